# SPDX-License-Identifier: MIT
"""The C library through cffi in ABI mode: no compiler at install time.

The declarations below are the public headers' (include/vigil/*.h). Where a
struct is an output whose header says "fields may be added at the end", the
Python side hands C a buffer padded well past today's size, so a newer
library writing more fields never writes past what Python allocated.

Functions are looked up in the library when first used, so a declaration
the loaded library lacks (an older libvigil) costs nothing until called;
`has(name)` says which are there.
"""
import ctypes.util
import os
import platform
import threading
from typing import Any, Optional

import cffi

ffi = cffi.FFI()
ffi.cdef(
    r"""
    const char *vigil_strerror(int err);

    typedef struct vigil_file_info {
        uint32_t kind; uint32_t version; uint32_t capacity; uint64_t size;
    } vigil_file_info;
    int vigil_file_probe(const char *path, vigil_file_info *out);

    /* heartbeat.h; the handle is used only through pointers */
    typedef struct vigil_hb vigil_hb;
    typedef struct vigil_slot_info {
        uint32_t pid; uint32_t role; uint64_t last_seen_epoch; uint64_t in_flight;
    } vigil_slot_info;
    typedef struct vigil_beater { uint64_t *epoch; uint64_t *seen; } vigil_beater;
    int      vigil_hb_create(const char *path, uint32_t capacity, vigil_hb **out);
    int      vigil_hb_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_hb **out);
    int      vigil_hb_open(const char *path, uint32_t capacity, vigil_hb **out);
    int      vigil_hb_open_readonly(const char *path, uint32_t capacity, vigil_hb **out);
    int      vigil_hb_open_flags(const char *path, uint32_t capacity, unsigned flags, vigil_hb **out);
    int      vigil_hb_create_group(const char *path, uint32_t capacity, unsigned mode, unsigned int group,
                                   vigil_hb **out);
    void     vigil_hb_close(vigil_hb *hb);
    uint32_t vigil_hb_capacity(const vigil_hb *hb);
    int      vigil_hb_register(vigil_hb *hb, uint32_t pid, uint32_t *slot);
    int      vigil_hb_unregister(vigil_hb *hb, uint32_t slot);
    int      vigil_hb_owned(const vigil_hb *hb, uint32_t slot);
    uint64_t vigil_hb_tick(vigil_hb *hb);
    uint64_t vigil_hb_epoch(const vigil_hb *hb);
    int      vigil_hb_mark_in_flight(vigil_hb *hb, uint32_t slot, unsigned bit);
    int      vigil_hb_clear_in_flight(vigil_hb *hb, uint32_t slot, unsigned bit);
    int      vigil_hb_set_role(vigil_hb *hb, uint32_t slot, uint32_t role);
    int      vigil_hb_snapshot(const vigil_hb *hb, uint32_t slot, vigil_slot_info *out);
    uint32_t vigil_hb_live_count(const vigil_hb *hb, uint64_t grace_epochs);
    vigil_beater vigil_hb_beater(vigil_hb *hb, uint32_t slot);

    /* failover.h */
    typedef struct vigil_reclaim { uint32_t slot; uint32_t pid; uint64_t in_flight; } vigil_reclaim;
    typedef struct vigil_leader { uint32_t slot; uint32_t pid; uint64_t term; } vigil_leader;
    int  vigil_failover_scan(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max);
    int  vigil_failover_scan_probe(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max);
    int  vigil_failover_wait_fd(vigil_hb *hb);
    int  vigil_failover_wait(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns,
                             vigil_reclaim *out, uint32_t max);
    int  vigil_leader_elect(vigil_hb *hb, uint64_t grace_epochs, vigil_leader *out);
    bool vigil_leader_is(const vigil_hb *hb, uint32_t slot, uint64_t grace_epochs);
    int  vigil_leader_get(const vigil_hb *hb, vigil_leader *out);
    int  vigil_hb_probe(const vigil_hb *hb, uint32_t slot);

    /* barrier.h */
    typedef struct vigil_barrier vigil_barrier;
    int      vigil_barrier_create_mode(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                                       vigil_barrier **out);
    int      vigil_barrier_open(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out);
    int      vigil_barrier_open_flags(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned flags,
                                      vigil_barrier **out);
    int      vigil_barrier_create_group(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                                        unsigned int group, vigil_barrier **out);
    void     vigil_barrier_close(vigil_barrier *b);
    int      vigil_barrier_wait(vigil_barrier *b, uint32_t my_epoch);
    int      vigil_barrier_wait_quorum(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum);
    int      vigil_barrier_wait_timeout(vigil_barrier *b, uint32_t my_epoch, uint64_t timeout_ns);
    int      vigil_barrier_wait_quorum_timeout(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum,
                                               uint64_t timeout_ns);
    uint32_t vigil_barrier_epoch(const vigil_barrier *b);
    uint32_t vigil_barrier_live_peers(const vigil_barrier *b);
    int      vigil_barrier_bind(vigil_barrier *b, uint32_t slot);
    typedef struct vigil_barrier_counters { uint64_t releases; uint64_t withdrawals; } vigil_barrier_counters;
    int      vigil_barrier_stats(const vigil_barrier *b, vigil_barrier_counters *out);
    int      vigil_barrier_wait_slice(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t slice_ns,
                                      int *arrived);
    int      vigil_barrier_withdraw(vigil_barrier *b, uint32_t my_epoch, int *arrived);
    int      vigil_barrier_start(vigil_barrier *b, uint32_t participants, uint64_t timeout_ns, uint32_t *first_round);
    typedef struct vigil_barrier_peer { uint32_t slot; uint32_t why; uint64_t gen; uint32_t pid; } vigil_barrier_peer;
    typedef struct vigil_barrier_round {
        uint32_t round; uint32_t kept; uint32_t serial_slot; uint64_t serial_gen;
        uint32_t counted, unbound, left_out;
        vigil_barrier_peer *counted_peers; uint32_t counted_cap;
        vigil_barrier_peer *left_out_peers; uint32_t left_out_cap;
    } vigil_barrier_round;
    int      vigil_barrier_round_info(const vigil_barrier *b, uint32_t round, vigil_barrier_round *info);
    int      vigil_barrier_start_slice(vigil_barrier *b, uint32_t participants, uint64_t slice_ns, int *arrived,
                                       uint32_t *round);

    /* lease.h */
    typedef struct vigil_lease {
        char key[128]; char owner[64]; uint64_t token; uint64_t ttl_ms; int64_t id;
    } vigil_lease;
    typedef struct vigil_lease_port {
        void *ctx;
        int (*renew)(void *ctx, const vigil_lease *lease);
    } vigil_lease_port;
    typedef struct vigil_keepalive vigil_keepalive;
    int  vigil_keepalive_start(const vigil_lease_port *port, const vigil_lease *lease, vigil_keepalive **out);
    int  vigil_keepalive_stop(vigil_keepalive *ka);
    bool vigil_keepalive_lost(const vigil_keepalive *ka);
    int  vigil_keepalive_fd(const vigil_keepalive *ka);
    typedef struct vigil_keepalive_info {
        uint64_t period_ns; uint64_t renewals; uint64_t failures;
        uint32_t consecutive_failures; uint32_t lost; uint64_t cpu_ns;
    } vigil_keepalive_info;
    int  vigil_keepalive_stats(const vigil_keepalive *ka, vigil_keepalive_info *out);

    typedef struct vigil_leases vigil_leases;
    int  vigil_leases_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_leases **out);
    int  vigil_leases_open(const char *path, vigil_leases **out);
    int  vigil_leases_open_readonly(const char *path, vigil_leases **out);
    int  vigil_leases_open_flags(const char *path, unsigned flags, vigil_leases **out);
    int  vigil_leases_create_group(const char *path, uint32_t capacity, unsigned mode, unsigned int group,
                                   vigil_leases **out);
    void vigil_leases_close(vigil_leases *ls);
    int  vigil_leases_acquire(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                              vigil_lease *out);
    int  vigil_leases_renew(vigil_leases *ls, const vigil_lease *lease);
    int  vigil_leases_release(vigil_leases *ls, const vigil_lease *lease);
    vigil_lease_port vigil_leases_port(vigil_leases *ls);
    typedef struct vigil_lease_info {
        char key[128]; char owner[64]; uint64_t token; uint64_t ttl_ms;
        int64_t expires_in_ms; uint32_t state; uint32_t pid;
    } vigil_lease_info;
    uint32_t vigil_leases_capacity(const vigil_leases *ls);
    int  vigil_leases_entry(const vigil_leases *ls, uint32_t index, vigil_lease_info *out);
    int  vigil_leases_get(vigil_leases *ls, const char *key, vigil_lease_info *out);
    int  vigil_leases_acquire_wait(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                                   uint64_t timeout_ns, vigil_lease *out);

    /* etcd.h, in libvigil-etcd */
    typedef struct vigil_etcd vigil_etcd;
    int  vigil_etcd_connect(const char *endpoints, vigil_etcd **out);
    void vigil_etcd_close(vigil_etcd *e);
    int  vigil_etcd_acquire(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out);
    int  vigil_etcd_renew(vigil_etcd *e, const vigil_lease *lease);
    int  vigil_etcd_release(vigil_etcd *e, const vigil_lease *lease);
    vigil_lease_port vigil_etcd_port(vigil_etcd *e);
    int  vigil_etcd_set_timeout(vigil_etcd *e, uint32_t connect_ms, uint32_t total_ms);
    int  vigil_etcd_get(vigil_etcd *e, const char *key, vigil_lease_info *out);
    int  vigil_etcd_acquire_wait(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                                 uint64_t timeout_ns, vigil_lease *out);
    struct vigil_etcd_options {
        const char *cacert, *cert, *key;
        const char *user, *password;
        const char *namespace;
        uint32_t    dial_timeout_ms, request_timeout_ms;
    };
    int  vigil_etcd_connect_opts(const char *endpoints, const struct vigil_etcd_options *opts, vigil_etcd **out);
    const char *vigil_etcd_errmsg(void);

    /* Output buffers with room for fields a newer library adds at the end. */
    typedef union { vigil_slot_info v; uint8_t room[256]; } vigil_py_slot_info;
    typedef union { vigil_lease_info v; uint8_t room[1024]; } vigil_py_lease_info;
    typedef union { vigil_keepalive_info v; uint8_t room[256]; } vigil_py_keepalive_info;
    typedef union { vigil_barrier_counters v; uint8_t room[256]; } vigil_py_barrier_counters;
    """
)

UINT64_MAX = (1 << 64) - 1


def _open(env: str, soname: str, short: str) -> Any:
    """dlopen the library named by `env`, else the installed one; when
    neither loads, an OSError that says how to point at it."""
    path = os.environ.get(env)
    if path:
        try:
            return ffi.dlopen(path)
        except OSError as e:
            raise OSError(f"{env}={path}: cannot load it ({e}); name the {soname} a vigil build "
                          f"or install made (build/{soname}, PREFIX/lib/{soname})") from None
    try:
        return ffi.dlopen(soname)
    except OSError as e:
        found = ctypes.util.find_library(short)
        if found:
            return ffi.dlopen(found)
        raise OSError(
            f"{soname} not found ({e}). Install vigil (make install; then ldconfig for /usr/local), "
            f"or tell Python where it is: {env}=/path/to/{soname}, or "
            f"LD_LIBRARY_PATH=/path/to/lib (e.g. LD_LIBRARY_PATH=$HOME/.local/lib after "
            f"make install PREFIX=$HOME/.local)"
        ) from None


lib = _open("VIGIL_LIBRARY", "libvigil.so.0", "vigil")

_etcd_lock = threading.Lock()
_etcd_lib: Optional[Any] = None


def _fresh_etcd_lock() -> None:
    global _etcd_lock
    _etcd_lock = threading.Lock()  # a parent's thread may have been loading it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_etcd_lock)


def etcd_lib() -> Any:
    """libvigil-etcd, loaded on first use: the core never needs it (OSError if absent)."""
    global _etcd_lib
    with _etcd_lock:
        if _etcd_lib is None:
            _etcd_lib = _open("VIGIL_ETCD_LIBRARY", "libvigil-etcd.so.0", "vigil-etcd")
        return _etcd_lib


def has(name: str, library: Optional[Any] = None) -> bool:
    """Whether the loaded library exports `name` (a call declared above)."""
    try:
        getattr(lib if library is None else library, name)
    except (AttributeError, NotImplementedError):
        return False
    return True


def path_bytes(path: Any, name: str = "path") -> bytes:
    """`path` as the C string it becomes: a NUL inside is ValueError, as
    open() says it (C would cut the name there)."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise ValueError(f"{name}: embedded null byte")
    return raw


# A beat is one acquire load of the epoch and one release store to the
# slot. The library keeps that pair inline in its header, so there is no
# function to call; Python does the same two accesses on the mapping
# through the beater's pointers. On x86-64 an aligned 8-byte mov is atomic
# and, under TSO, a plain load is an acquire and a plain store a release:
# exactly the instructions the C inline compiles to. Elsewhere the pair goes
# through libatomic with the explicit orders.
ATOMIC_ACQUIRE = 2  # __ATOMIC_ACQUIRE
ATOMIC_RELEASE = 3  # __ATOMIC_RELEASE
atomic: Optional[Any] = None
if platform.machine().lower() not in ("x86_64", "amd64"):
    _aff = cffi.FFI()
    _aff.cdef(
        "uint64_t __atomic_load_8(const volatile void *p, int order);"
        "void __atomic_store_8(volatile void *p, uint64_t v, int order);"
    )
    try:
        atomic = _aff.dlopen("libatomic.so.1")
    except OSError:  # no libatomic: aligned 8-byte accesses are still single-copy atomic
        atomic = None
# getattr: a class body would mangle the double-underscore names.
atomic_load = getattr(atomic, "__atomic_load_8", None)
atomic_store = getattr(atomic, "__atomic_store_8", None)
