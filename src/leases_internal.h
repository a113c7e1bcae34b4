/* SPDX-License-Identifier: MIT */
/*
 * Lease store internals: the file layout (told at the top of leases.c;
 * the protocol at the top of leases_ops.c and leases_lock.c) and a crash
 * hook the tests use to kill a process at each step of a change.
 */
#ifndef VIGIL_SRC_LEASES_INTERNAL_H
#define VIGIL_SRC_LEASES_INTERNAL_H

#include <stdatomic.h>
#include <vigil/lease.h>
#include "file_internal.h"
#include "proc_internal.h"

#define VIGIL_LEASES_ENTRY_BYTES 256u
#define VIGIL_LEASES_MAX_CAPACITY (1u << 20)

/* File header, offsets 0..63; the first 24 bytes are common to all kinds. */
struct vigil_leases_header {
    uint8_t          magic[8];    /*  0: "\177VIGIL\r\n" */
    uint32_t         version;     /*  8: VIGIL_LAYOUT_VERSION */
    uint32_t         kind;        /* 12: VIGIL_KIND_LEASES */
    uint32_t         capacity;    /* 16: number of entries */
    uint32_t         flags;       /* 20: 0 */
    _Atomic uint64_t last_token;  /* 24: last fencing token handed out, 0 none */
    _Atomic uint64_t bind_lock;   /* 32: 0 free, else a lock word (see leases.c) */
    _Atomic uint32_t bind_wake;   /* 40: futex word, +1 by a bind unlock that finds waiters */
    _Atomic uint32_t bind_waiters; /* 44: bind lock waiters about to sleep or asleep (a hint) */
    _Atomic uint64_t renewals_refused; /* 48: counter: renewals answered VIGIL_ELOST */
    _Atomic uint64_t expiries;    /* 56: counter: take-overs of an expired lease */
};

/* One entry, offsets relative to 64 + index * 256. */
struct vigil_leases_entry {
    _Alignas(64) _Atomic uint64_t ctl; /*   0: unlocked: gen | expiry ms; locked: LOCKED | start | pid */
    _Atomic uint64_t token;            /*   8: fencing token of the current hand-over */
    _Atomic uint64_t ttl_ms;           /*  16: TTL the renewals extend by */
    _Atomic uint32_t hash;             /*  24: FNV-1a of the key, 0 when unbound */
    _Atomic uint32_t bound;            /*  28: ENTRY_NEVER, ENTRY_BOUND or ENTRY_CLEARED */
    _Atomic uint32_t gen_hint;         /*  32: gen of the last unlocked ctl a locker saw */
    _Atomic uint32_t pid;              /*  36: acquiring process (information only) */
    _Atomic uint32_t wake;             /*  40: futex word, +1 by a release or unlock that finds waiters */
    _Atomic uint32_t waiters;          /*  44: waiters about to sleep or asleep on it (a hint) */
    uint8_t          reserved0[16];    /*  48: 0 */
    _Atomic uint64_t key[16];          /*  64: key, NUL-padded, 128 bytes */
    _Atomic uint64_t owner[8];         /* 192: owner, NUL-padded, 64 bytes */
};

_Static_assert(sizeof(struct vigil_leases_header) == 64, "header is one cache line");
_Static_assert(sizeof(struct vigil_leases_entry) == VIGIL_LEASES_ENTRY_BYTES, "entry is 256 bytes");

enum { ENTRY_NEVER = 0, ENTRY_BOUND = 1, ENTRY_CLEARED = 2 };

/* The lock word: the locker's (proc_internal.h), bit 63 set, with its pid,
 * its exact pid namespace and a start tag against PID reuse. The unlocked
 * word: bit 63 clear, bits 62..42 a generation that
 * moves on every change of hands, bits 41..0 the expiry in milliseconds of
 * the lease clock, CLOCK_BOOTTIME (keepalive_internal.h; 0 = released or
 * never held). */
#define CTL_LOCKED     (UINT64_C(1) << 63)
#define CTL_GEN_SHIFT  42
#define CTL_GEN_MASK   ((UINT64_C(1) << 21) - 1)
#define CTL_EXP_MASK   ((UINT64_C(1) << 42) - 1)

struct vigil_leases {
    struct vigil_map             map;
    struct vigil_leases_header  *hdr;
    struct vigil_leases_entry   *entries;
    uint32_t                     capacity; /* this process's copy, checked at open */
};

/* Where the tests kill a process inside a change. */
enum vigil_leases_point {
    LP_BIND_LOCKED = 1,  /* holds the store's bind lock */
    LP_ENTRY_LOCKED,     /* holds an entry's lock, nothing written yet */
    LP_TOKEN_TAKEN,      /* took a token from the header counter */
    LP_TOKEN_WRITTEN,    /* wrote it to the entry */
    LP_KEY_HALF,         /* wrote half the key of a new binding */
    LP_FIELDS_WRITTEN,   /* wrote everything but the unlock */
    LP_RECOVER_LOCKED,   /* took over a dead locker's entry, not yet repaired */
    LP_RENEW_CHECKED,    /* a renewal judged the lease unexpired, before its CAS */
    LP_MAX
};
/* NULL in production; a test sets it in a child that should die at a point. */
extern void (*vigil_leases_hook)(int point);

/* ==== What the three files share: the ctl word, the crash hook, and the
 * entry and bind locks (leases_lock.c holds the waits and the recovery
 * from a dead locker; leases_ops.c the hand-over, renew and release). */
/* ---- the ctl word (layout in leases.c) ----------------------------------- */

static inline uint64_t ctl_gen(uint64_t c) { return (c >> CTL_GEN_SHIFT) & CTL_GEN_MASK; }
static inline uint64_t ctl_exp(uint64_t c) { return c & CTL_EXP_MASK; }
static inline uint64_t ctl_make(uint64_t gen, uint64_t exp_ms)
{
    return ((gen & CTL_GEN_MASK) << CTL_GEN_SHIFT) | (exp_ms & CTL_EXP_MASK);
}

static inline bool unexpired(uint64_t exp_ms, uint64_t now_ns)
{
    /* exp_ms < 2^42, so the product stays below 2^62. */
    return exp_ms != 0 && exp_ms * 1000000u > now_ns;
}

static inline void words_store(_Atomic uint64_t *field, const uint64_t *w, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++)
        atomic_store_explicit(&field[i], w[i], memory_order_relaxed);
}

static inline void hook(int point)
{
    void (*h)(int) = vigil_leases_hook;
    if (__builtin_expect(h != NULL, 0))
        h(point);
}

/* ---- the locks (protocol in leases_lock.c) ------------------------------- */

/* This process's lock word (proc_internal.h): no system call after the
 * first, and a forked child never sees its parent's. */
static inline uint64_t my_lock_word(void)
{
    return vigil_self_lock_word();
}

static inline bool entry_lock_from(struct vigil_leases_entry *e, uint64_t c, uint64_t me)
{
    /* Acquire: the fields read under the lock are at least as new as the
     * ones the last unlocker published. */
    if (!atomic_compare_exchange_strong_explicit(&e->ctl, &c, me, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    /* The lock word is visible before any field changes: a reader that
     * sees a changed field re-reads ctl after its acquire fence and finds
     * it locked (the SeqLock rule, with ctl as the version). */
    atomic_thread_fence(memory_order_release);
    return true;
}

/* After a release or an unlock of entry e: wakes whoever sleeps on it
 * (acquire_wait for the key, a lock waiter), if anyone said so. seq_cst:
 * after the release's CAS or the unlock's store in the total order, as
 * the sleeper's raise of `waiters` comes before its load of ctl (THE
 * SLEEP, leases_wait.c): one of the two sees the other. */
void vigil_leases__wake(struct vigil_leases_entry *e);

static inline void vigil_leases__wake_waiters(struct vigil_leases_entry *e)
{
    if (__builtin_expect(atomic_load_explicit(&e->waiters, memory_order_seq_cst) != 0, 0))
        vigil_leases__wake(e);
}

static inline void entry_unlock(struct vigil_leases_entry *e, uint64_t gen, uint64_t exp_ms)
{
    atomic_store_explicit(&e->gen_hint, (uint32_t)(gen & CTL_GEN_MASK), memory_order_relaxed);
    /* Release: every field written under the lock is visible to whoever
     * reads this word, and to whoever reads a renewal's CAS after it.
     * seq_cst, for the sleep: a lock waiter raised `waiters` and then
     * loaded ctl; either it saw this store or the load below sees it. */
    atomic_store_explicit(&e->ctl, ctl_make(gen, exp_ms), memory_order_seq_cst);
    vigil_leases__wake_waiters(e);
}

/* Whether the process named by a lock word found in the store at `where`
 * (any address in its mapping) is provably gone. */
bool vigil_leases__locker_dead(uint64_t w, const void *where);

/* Takes over the lock of a dead process and throws its change away: the
 * entry ends cleared, with no key and no holder. Returns true if this call
 * or another made progress (ctl is no longer `dead`). */
bool vigil_leases__recover(struct vigil_leases_entry *e, uint64_t dead);

/* Waits for ctl to be unlocked: asleep on the entry's futex while a live
 * locker holds it (its unlock wakes the sleepers), a take-over for a dead
 * one, until `deadline` (vigil_now_ns). 0 with *c unlocked, or
 * VIGIL_EBUSY. The first look is inline (acquire's common case finds the
 * entry unlocked); the wait is vigil_leases__wait_locked's. */
int vigil_leases__wait_locked(struct vigil_leases_entry *e, uint64_t *c, uint64_t deadline);

static inline int vigil_leases__wait_unlocked(struct vigil_leases_entry *e, uint64_t *c, uint64_t deadline)
{
    uint64_t w = atomic_load_explicit(&e->ctl, memory_order_acquire);
    if (__builtin_expect(!(w & CTL_LOCKED), 1)) {
        *c = w;
        return 0;
    }
    return vigil_leases__wait_locked(e, c, deadline);
}

/* vigil_leases_acquire with its lock waits bounded by `deadline`
 * (vigil_now_ns; 0: LOCK_WAIT_NS from the first sleep, a plain
 * acquire's), for acquire_wait, which never spins on a held lock. */
int vigil_leases__acquire_until(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                                uint64_t deadline, vigil_lease *out);

/* FUTEX_WAIT on a word in the file, for at most ns. */
void vigil_leases__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns);

/* Key helpers shared by leases_ops.c and leases_wait.c. */
int      vigil_leases__check_str(const char *s, size_t field, size_t *len);
void     vigil_leases__words(uint64_t *w, size_t nwords, const char *s, size_t len);
uint32_t vigil_leases__hash(const uint64_t *kw);
int64_t  vigil_leases__find(const vigil_leases *ls, uint32_t hash, const uint64_t *kw);

/* The store's bind lock, waited for until `deadline` (vigil_now_ns; a
 * plain acquire waits LOCK_WAIT_NS): 0, or VIGIL_EBUSY. */
int vigil_leases__bind_lock(struct vigil_leases_header *h, uint64_t deadline);

void vigil_leases__bind_wake(struct vigil_leases_header *h);

static inline void vigil_leases__bind_unlock(struct vigil_leases_header *h)
{
    /* Release: the bindings made under the lock reach the next binder.
     * seq_cst, for the sleep of the bind lock's waiters (as entry_unlock). */
    atomic_store_explicit(&h->bind_lock, 0, memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&h->bind_waiters, memory_order_seq_cst) != 0, 0))
        vigil_leases__bind_wake(h);
}

/* How long a plain acquire waits for a live locker (a change takes well
 * under a microsecond: this is for one preempted mid-change). */
#define LOCK_WAIT_NS 10000000u

#endif
