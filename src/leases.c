/* SPDX-License-Identifier: MIT */
/*
 * The embedded lease store: a vigil file of kind leases, the default lease
 * backend on one host.
 *
 * File layout (little-endian as the host writes it; 128 + capacity * 256 bytes)
 *
 *   header, offset 0, 128 bytes
 *     0  u8[8]  magic "\177VIGIL\r\n"
 *     8  u32    layout version (6)
 *    12  u32    kind (3, leases)
 *    16  u32    capacity: number of entries
 *    20  u32    flags (0)
 *    24  u64    last_token: the last fencing token handed out (0 none);
 *               every hand-over takes the next one
 *    32  u64    bind_lock: the lock word (below) of the process binding a
 *               key to an entry, the last binder's once free
 *    40  u64    bind_seq: odd while the bind lock is held; with bind_lock
 *               a lock pair (proc_internal.h, LOCK PAIRS)
 *    48  u32    bind_wake, 52 u32 bind_waiters: the bind lock's futex
 *    56  u32    room_wake, 60 u32 room_waiters: the futex acquire_wait
 *               sleeps on while the store is full (0 in a store made
 *               before; a release by a vigil older than it wakes nobody,
 *               and such a waiter wakes at the first expiry)
 *    64  u64    renewals_refused: counter of renewals answered VIGIL_ELOST
 *    72  u64    expiries: counter of hand-overs that took over a lease
 *               that had expired (not one released)
 *    80  u8[48] reserved (0)
 *
 *   The counters (and last_token, the hand-overs) are for monitoring:
 *   relaxed fetch_adds off the renewal's success path, read by
 *   vigil_leases_stats; they wrap at 2^64.
 *
 *   entry i, offset 128 + i * 256, 256 bytes
 *     0  u64    ctl: the entry's state word (below)
 *     8  u64    seq: odd while ctl is locked; with ctl a lock pair
 *    16  u64    ttl_ms: what a renewal extends the expiry by
 *    24  u32    hash: FNV-1a of the key (never 0 while bound), 0 unbound
 *    28  u32    bound: 0 never used, 1 bound to the key, 2 cleared after
 *               a crashed change (reusable)
 *    32  u32    gen_hint: generation of the last unlocked ctl a locker saw
 *    36  u32    pid of the acquiring process (information only)
 *    40  u32    wake: futex word of acquire_wait (leases_wait.c)
 *    44  u32    waiters: acquire_wait callers asleep on it (a hint)
 *    48  u64    token: fencing token of the current hand-over
 *    56  u8[8]  reserved (0)
 *    64  u8[128] key, NUL-padded
 *   192  u8[64] owner, NUL-padded
 *
 *   ctl, unlocked (bit 63 clear):
 *     bits 62..42  generation: moves on every change of hands
 *     bits 41..0   expiry, milliseconds of CLOCK_BOOTTIME; 0 released
 *   ctl locked, and bind_lock held (bit 63 set): the locker's lock word
 *     bits 62..41  pid
 *     bits 40..21  pid namespace, exactly (0 unknown, 1 the initial one,
 *                  2 + inode - 0xf0000000 for the others)
 *     bits 20..0   low 21 bits of its start time (clock ticks since boot,
 *                  /proc/<pid>/stat field 22), against PID reuse
 *   A lock word recurs (a pid recycled, started in the same tick); the
 *   pair's seq does not: it rises at every lock and take-over, so a
 *   take-over swaps from exactly the {word, seq} it judged and never from
 *   a newcomer with the same word (leases_lock.c).
 *
 * CLOCK_BOOTTIME is the same clock for every process on the host (outside
 * time namespaces), so an expiry written by one process is read correctly
 * by all the others, no wall-clock step moves it, and unlike
 * CLOCK_MONOTONIC it runs on while the machine is suspended, as an etcd
 * lease on another host does.
 *
 * Why a per-entry CAS protocol and not a robust process-shared mutex:
 *
 *  - The hot path, renew, is one CAS on ctl: no lock, no syscall.
 *  - A robust pthread mutex keeps glibc's robust-list pointers inside the
 *    shared file; the holder writes through them at unlock. A hostile or
 *    broken peer that scribbles them makes another process write to
 *    addresses of the peer's choosing. A file that any peer can write must
 *    only ever hold plain data, which is all the protocol reads.
 *  - pthread_mutex_t's size and layout belong to one libc and one ABI; the
 *    file's layout is fixed here, for every process that maps it.
 *
 * The protocol that keeps it whole, told next to its code: leases_ops.c
 * (acquire, the change of hands; renew and release, one CAS each) and
 * leases_lock.c (the entry and bind locks, and recovery from a locker
 * killed inside a change). Every process sharing a store must see the
 * same pids (one pid namespace), as for the heartbeat table's probe.
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keepalive_internal.h"
#include "spin_internal.h"

void (*vigil_leases_hook)(int point);

const struct vigil_layout vigil_leases_layout = {
    .kind = VIGIL_KIND_LEASES,
    .max_capacity = VIGIL_LEASES_MAX_CAPACITY,
    .head_bytes = sizeof(struct vigil_leases_header),
    .slot_bytes = sizeof(struct vigil_leases_entry),
};

/* ---- create, open, close ------------------------------------------------- */

static int leases_init(void *base, size_t size, uint32_t capacity, void *arg)
{
    (void)base, (void)size, (void)capacity, (void)arg;
    /* ftruncate zero-filled the rest: no token yet, bind lock free, every
     * entry never used and unlocked. */
    return 0;
}

static int leases_wrap(struct vigil_map *m, vigil_leases **out)
{
    struct vigil_leases_header *h = m->base;
    if (h->flags != 0) {
        vigil_map_close(m);
        return VIGIL_EBADFILE;
    }
    vigil_leases *ls = malloc(sizeof(*ls));
    if (!ls) {
        vigil_map_close(m);
        return -ENOMEM;
    }
    ls->map = *m;
    ls->hdr = h;
    ls->entries = (struct vigil_leases_entry *)((char *)m->base + sizeof(*h));
    ls->capacity = m->capacity;
    *out = ls;
    return 0;
}

int vigil_leases_create_group(const char *path, uint32_t capacity, unsigned mode, gid_t group, vigil_leases **out)
{
    if (!out)
        return -EINVAL;
    struct vigil_map m;
    const struct vigil_create_how how = { mode, group };
    int err = vigil_map_create(path, &vigil_leases_layout, capacity, &how, leases_init, NULL, &m);
    return err < 0 ? err : leases_wrap(&m, out);
}

int vigil_leases_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_leases **out)
{
    return vigil_leases_create_group(path, capacity, mode, (gid_t)-1, out);
}

int vigil_leases_create(const char *path, uint32_t capacity, vigil_leases **out)
{
    return vigil_leases_create_mode(path, capacity, VIGIL_DEFAULT_MODE, out);
}

int vigil_leases_open_flags(const char *path, unsigned flags, vigil_leases **out)
{
    if (!out)
        return -EINVAL;
    struct vigil_map m;
    int err = vigil_map_open_flags(path, &vigil_leases_layout, 0, flags, &m);
    return err < 0 ? err : leases_wrap(&m, out);
}

int vigil_leases_open(const char *path, vigil_leases **out)
{
    return vigil_leases_open_flags(path, 0, out);
}

int vigil_leases_open_readonly(const char *path, vigil_leases **out)
{
    return vigil_leases_open_flags(path, VIGIL_OPEN_READONLY, out);
}

void vigil_leases_close(vigil_leases *ls)
{
    if (!ls)
        return;
    vigil_map_close(&ls->map);
    free(ls);
}

uint32_t vigil_leases_capacity(const vigil_leases *ls)
{
    return ls ? ls->capacity : 0;
}

/* ---- inspection ---------------------------------------------------------- */

int vigil_leases_stats(const vigil_leases *ls, vigil_leases_counters *out)
{
    if (!ls || !out)
        return -EINVAL;
    /* Relaxed: statistics, each a word on its own; nothing is read
     * through them. */
    const struct vigil_leases_header *h = ls->hdr;
    out->handovers = atomic_load_explicit(&h->last_token, memory_order_relaxed);
    out->renewals_refused = atomic_load_explicit(&h->renewals_refused, memory_order_relaxed);
    out->expiries = atomic_load_explicit(&h->expiries, memory_order_relaxed);
    return 0;
}

/* Copies a field out as a C string: bounded by the field, always
 * terminated, whatever a peer wrote there. */
static void words_to_str(char *dst, size_t cap, const _Atomic uint64_t *field)
{
    for (size_t i = 0; i < cap / 8; i++) {
        uint64_t v = atomic_load_explicit(&field[i], memory_order_relaxed);
        memcpy(dst + i * 8, &v, 8);
    }
    dst[cap - 1] = '\0';
    size_t n = strlen(dst);
    memset(dst + n, 0, cap - n);
}

int vigil_leases_entry(const vigil_leases *ls, uint32_t index, vigil_lease_info *out)
{
    if (!ls || !out)
        return -EINVAL;
    if (index >= ls->capacity)
        return VIGIL_ERANGE;
    const struct vigil_leases_entry *e = &ls->entries[index];
    vigil_lease_info info;
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        uint64_t c1 = atomic_load_explicit(&e->ctl, memory_order_acquire);
        if (c1 & CTL_LOCKED) {
            if (vigil_backoff(attempt, &deadline))
                continue;
            /* Stuck in a change: say who holds it. */
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_CHANGING;
            info.pid = vigil_lock_pid(c1);
            *out = info;
            return VIGIL_EBUSY;
        }
        memset(&info, 0, sizeof(info));
        uint32_t bound = atomic_load_explicit(&e->bound, memory_order_relaxed);
        info.token = atomic_load_explicit(&e->token, memory_order_relaxed);
        info.ttl_ms = atomic_load_explicit(&e->ttl_ms, memory_order_relaxed);
        info.pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
        words_to_str(info.key, sizeof(info.key), e->key);
        words_to_str(info.owner, sizeof(info.owner), e->owner);
        /* The field loads complete before ctl is read again. A renewal
         * moves only the expiry, so the same generation, unlocked, means
         * no change of hands overlapped them. */
        atomic_thread_fence(memory_order_acquire);
        uint64_t c2 = atomic_load_explicit(&e->ctl, memory_order_relaxed);
        if ((c2 & CTL_LOCKED) || ctl_gen(c2) != ctl_gen(c1)) {
            if (vigil_backoff(attempt, &deadline))
                continue;
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_CHANGING;
            info.pid = (c2 & CTL_LOCKED) ? vigil_lock_pid(c2) : 0;
            *out = info;
            return VIGIL_EBUSY;
        }
        uint64_t exp = ctl_exp(c2), now = vigil_lease_now_ns();
        if (bound != ENTRY_BOUND) {
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_VACANT;
            *out = info;
            return VIGIL_EVACANT;
        }
        if (exp == 0) {
            info.state = VIGIL_LEASE_RELEASED;
        } else if (unexpired(exp, now)) {
            info.state = VIGIL_LEASE_HELD;
            /* Whole ms, rounded down and at least 1 while held: as the
             * etcd backend tells etcd's whole seconds. */
            info.expires_in_ms = (int64_t)((exp * 1000000u - now) / 1000000u);
            if (info.expires_in_ms == 0)
                info.expires_in_ms = 1;
        } else {
            info.state = VIGIL_LEASE_EXPIRED;
            info.expires_in_ms = -(int64_t)((now - exp * 1000000u) / 1000000u);
        }
        *out = info;
        return 0;
    }
}
