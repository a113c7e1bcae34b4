/* SPDX-License-Identifier: MIT */
/*
 * Lease store internals: the file layout (told at the top of leases.c;
 * the protocol at the top of leases_ops.c and leases_lock.c) and a crash
 * hook the tests use to kill a process at each step of a change.
 */
#ifndef VIGIL_SRC_LEASES_INTERNAL_H
#define VIGIL_SRC_LEASES_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <vigil/lease.h>
#include "file_internal.h"

extern const struct vigil_layout vigil_leases_layout;
#include "proc_internal.h"

#define VIGIL_LEASES_ENTRY_BYTES 256u
#define VIGIL_LEASES_MAX_CAPACITY (1u << 20)

/* File header, offsets 0..127; the first 24 bytes are common to all kinds. */
struct vigil_leases_header {
    uint8_t          magic[8];    /*  0: "\177VIGIL\r\n" */
    uint32_t         version;     /*  8: VIGIL_LAYOUT_VERSION */
    uint32_t         kind;        /* 12: VIGIL_KIND_LEASES */
    uint32_t         capacity;    /* 16: number of entries */
    uint32_t         flags;       /* 20: 0 */
    _Atomic uint64_t last_token;  /* 24: last fencing token handed out, 0 none */
    /* 32: the bind lock, a lock pair (proc_internal.h, LOCK PAIRS): the
     * binder's lock word (the last binder's once free), then a sequence,
     * odd while held, that rises at every take and take-over. */
    _Alignas(16) _Atomic uint64_t bind_lock[2];
    _Atomic uint32_t bind_wake;   /* 48: futex word, +1 by a bind unlock that finds waiters */
    _Atomic uint32_t bind_waiters; /* 52: bind lock waiters about to sleep or asleep (a hint) */
    _Atomic uint32_t room_wake;   /* 56: futex word, +1 by a release that finds room_waiters (THE ROOM SLEEP) */
    _Atomic uint32_t room_waiters; /* 60: acquire_wait callers waiting for a free entry (a hint) */
    _Atomic uint64_t renewals_refused; /* 64: counter: renewals answered VIGIL_ELOST */
    _Atomic uint64_t expiries;    /* 72: counter: take-overs of an expired lease */
    uint8_t          reserved1[48]; /* 80: 0 */
};

/* One entry, offsets relative to 128 + index * 256. */
struct vigil_leases_entry {
    /* 0: ctl and its lock sequence, a lock pair: ctl unlocked is gen |
     * expiry ms, locked the locker's lock word; seq (8) is odd while ctl
     * is locked and rises at every lock and take-over, so (lock word, seq)
     * names one holding for the life of the file, whatever pid comes back. */
    _Alignas(64) _Atomic uint64_t ctl;
    _Atomic uint64_t seq;              /*   8: the lock's sequence (above) */
    _Atomic uint64_t ttl_ms;           /*  16: TTL the renewals extend by */
    _Atomic uint32_t hash;             /*  24: FNV-1a of the key, 0 when unbound */
    _Atomic uint32_t bound;            /*  28: ENTRY_NEVER, ENTRY_BOUND or ENTRY_CLEARED */
    _Atomic uint32_t gen_hint;         /*  32: gen of the last unlocked ctl a locker saw */
    _Atomic uint32_t pid;              /*  36: acquiring process (information only) */
    _Atomic uint32_t wake;             /*  40: futex word, +1 by a release or unlock that finds waiters */
    _Atomic uint32_t waiters;          /*  44: waiters about to sleep or asleep on it (a hint) */
    _Atomic uint64_t token;            /*  48: fencing token of the current hand-over */
    uint8_t          reserved0[8];     /*  56: 0 */
    _Atomic uint64_t key[16];          /*  64: key, NUL-padded, 128 bytes */
    _Atomic uint64_t owner[8];         /* 192: owner, NUL-padded, 64 bytes */
};

_Static_assert(sizeof(struct vigil_leases_header) == 128, "header is two cache lines");
_Static_assert(sizeof(struct vigil_leases_entry) == VIGIL_LEASES_ENTRY_BYTES, "entry is 256 bytes");
_Static_assert(offsetof(struct vigil_leases_header, bind_lock) == 32, "bind lock pair at 32");
_Static_assert(offsetof(struct vigil_leases_entry, seq) == 8, "ctl and seq are one pair");

enum { ENTRY_NEVER = 0, ENTRY_BOUND = 1, ENTRY_CLEARED = 2 };

/* The lock word: the locker's (proc_internal.h), bit 63 set, with its pid,
 * its exact pid namespace and a start tag against PID reuse; with the
 * entry's seq it names one holding that never recurs. The unlocked
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
    LP_WAIT_FOUND,       /* acquire_wait found its key's entry, before its sleep */
    LP_RECOVER_JUDGED,   /* judged an entry's locker dead, before the take-over */
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

/*
 * THE ENTRY LOCK, a lock pair {ctl, seq} (proc_internal.h, LOCK PAIRS;
 * model/leases.pml, the recycled lock word): locked from exactly the
 * unlocked word c a caller judged, with the sequence it had, by one
 * 16-byte compare-and-swap to {my lock word, a greater odd seq}; unlocked
 * by another, to {the new unlocked word, seq + 1}; taken over from a dead
 * locker only from the {word, seq} read before its judgement. Every step
 * raises seq (a scribbled even seq under a locked word included), so a
 * waiter that judged a dead locker and stalled can never take the lock
 * from a newcomer whose lock word equals the dead one's (its pid recycled
 * in the same clock tick): the newcomer's seq is another (issue 17).
 * Renew and release stay one 8-byte CAS on ctl from an unlocked word: a
 * lock changes ctl, so they fail against it, and they never move seq.
 */
struct entry_hold {
    uint64_t me, seq; /* the lock word written and the odd seq held */
};

static inline bool entry_lock_pair(struct vigil_leases_entry *e, uint64_t c, uint64_t s, uint64_t next,
                                   struct entry_hold *held)
{
    /* Full barrier (vigil__cas16): acquire, the fields read under the lock
     * are at least as new as the ones the last unlocker published; and
     * the lock word is visible before any field changes, so a reader that
     * sees a changed field re-reads ctl after its acquire fence and finds
     * it locked (the SeqLock rule, with ctl as the version). */
    if (!vigil__cas16(&e->ctl, &c, &s, held->me, next))
        return false;
    held->seq = next;
    return true;
}

static inline bool entry_lock_from(struct vigil_leases_entry *e, uint64_t c, struct entry_hold *held)
{
    /* Relaxed: a guess, which the swap compares with ctl as one. */
    uint64_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    held->me = my_lock_word();
    return entry_lock_pair(e, c, s, (s + 1u) | 1u, held);
}

/* The take-over of a lock judged dead, from the {w, s} read before the
 * judgement: fails if the lock changed hands since. */
static inline bool entry_take_over(struct vigil_leases_entry *e, uint64_t w, uint64_t s, struct entry_hold *held)
{
    held->me = my_lock_word();
    return entry_lock_pair(e, w, s, (s + 2u) | 1u, held);
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

/* After a release: wakes the acquire_wait callers waiting for room in a
 * full store (THE ROOM SLEEP, leases_wait.c), if any said so; seq_cst as
 * vigil_leases__wake_waiters. */
void vigil_leases__room_wake(struct vigil_leases_header *h);

static inline void vigil_leases__wake_room(struct vigil_leases_header *h)
{
    if (__builtin_expect(atomic_load_explicit(&h->room_waiters, memory_order_seq_cst) != 0, 0))
        vigil_leases__room_wake(h);
}

static inline void entry_unlock(struct vigil_leases_entry *e, const struct entry_hold *held, uint64_t gen,
                                uint64_t exp_ms)
{
    atomic_store_explicit(&e->gen_hint, (uint32_t)(gen & CTL_GEN_MASK), memory_order_relaxed);
    /* A full barrier (vigil__cas16): every field written under the lock is
     * visible to whoever reads the new word, and to whoever reads a
     * renewal's CAS after it; and, for the sleep, it is ordered before the
     * load of `waiters` below as a seq_cst store would be (a lock waiter
     * raised `waiters` and then loaded the pair: either it saw this swap or
     * the load below sees it). It fails only for a holder robbed as dead,
     * which a live one never is: its change is then the robber's to undo. */
    uint64_t w = held->me, s = held->seq;
    (void)vigil__cas16(&e->ctl, &w, &s, ctl_make(gen, exp_ms), held->seq + 1u);
    vigil_leases__wake_waiters(e);
}

/* Whether the process named by a lock word found in the store at `where`
 * (any address in its mapping) is provably gone. */
bool vigil_leases__locker_dead(uint64_t w, const void *where);

/* Takes over the lock {dead, seq} of a dead process (read as one before
 * it was judged) and throws its change away: the entry ends cleared, with
 * no key and no holder. Returns true if this call or another made
 * progress (the pair is no longer {dead, seq}). */
bool vigil_leases__recover(struct vigil_leases_entry *e, uint64_t dead, uint64_t seq);

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

/* The store's bind lock, a lock pair, waited for until `deadline`
 * (vigil_now_ns; a plain acquire waits LOCK_WAIT_NS): 0 and *held (the odd
 * seq, for the unlock), or VIGIL_EBUSY. */
int vigil_leases__bind_lock(struct vigil_leases_header *h, uint64_t deadline, uint64_t *held);

void vigil_leases__bind_wake(struct vigil_leases_header *h);

static inline void vigil_leases__bind_unlock(struct vigil_leases_header *h, uint64_t held)
{
    /* The pair's release (vigil_pair_release), seq_cst: release, the
     * bindings made under the lock reach the next binder; seq_cst for the
     * sleep of the bind lock's waiters (as entry_unlock). */
    atomic_store_explicit(&h->bind_lock[1], held + 1u, memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&h->bind_waiters, memory_order_seq_cst) != 0, 0))
        vigil_leases__bind_wake(h);
}

/* How long a plain acquire waits for a live locker (a change takes well
 * under a microsecond: this is for one preempted mid-change). */
#define LOCK_WAIT_NS 10000000u

#endif
