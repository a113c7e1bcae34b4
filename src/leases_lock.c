/* SPDX-License-Identifier: MIT */
/*
 * The lease store's locks: an entry's ctl word locked for a change of
 * hands, the header's bind lock, and what happens when their holder dies.
 *
 * Fields used (lease file; the whole layout is told in leases.c):
 *
 *   header
 *     32  u64    bind_lock: the binder's lock word (the last one's once free)
 *     40  u64    bind_seq: odd while held; with bind_lock a lock pair
 *   entry i, at 128 + i * 256
 *      0  u64    ctl: locked, the locker's lock word (proc_internal.h:
 *                bit 63 set, pid, exact pid namespace, start tag);
 *                unlocked, generation | expiry
 *      8  u64    seq: odd while ctl is locked; with ctl a lock pair
 *     24  u32    hash, 28 bound, 36 pid, 64 key, 192 owner: cleared by
 *                recovery
 *     32  u32    gen_hint: the generation of the last unlocked ctl a locker
 *                saw, so recovery can step past it
 *     40  u32    wake, 44 waiters: the futex a lock waiter sleeps on (the
 *                same acquire_wait sleeps on for a release)
 *
 * The protocol (the hand-over done under these locks is leases_ops.c's):
 *
 *  - A process killed at any instruction: outside a lock it leaves nothing
 *    half done (every other write is a single CAS). Killed holding an
 *    entry's lock, its partial writes are thrown away: the next process
 *    that meets the lock and finds its holder dead (no such pid, a zombie
 *    whose threads have all exited, or a pid reused by a process that
 *    started at another time) takes the lock over by CAS, clears the entry
 *    (no key, no holder) and unlocks. The key it was changing is then
 *    bound afresh by its next acquirer, with a token from the header
 *    counter, which only ever grows: the fencing order survives the crash.
 *    A dead holder of the bind lock is replaced the same way; that lock
 *    guards no data of its own.
 *  - Both locks are lock pairs (proc_internal.h, LOCK PAIRS; THE ENTRY
 *    LOCK in leases_internal.h): the {lock word, seq} a waiter judged is
 *    read as one before the judgement, and the take-over swaps from
 *    exactly it. A lock word names a pid and a start tick, which recur (a
 *    recycled pid started in the same tick); the seq never goes back, so
 *    a waiter that judged a dead holder and stalled fails its swap if
 *    anyone took the lock since, even a newcomer with the dead one's word
 *    (issue 17; test_leases_procs.c, test_recycled_lock_word).
 *  - A lock held by a live process is waited for asleep (THE LOCK WAIT
 *    below), until the caller's deadline (10 ms for a plain acquire),
 *    then VIGIL_EBUSY: a process stopped inside a change is never robbed,
 *    so a resumed one can never write over its successor.
 *  - Every process sharing a store must see the same pids (one pid
 *    namespace), as for the heartbeat table's probe.
 *
 * Model: model/leases.pml (the take-over only ever of a dead locker; its
 * run old_word takes over by the word alone and is robbed).
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "spin_internal.h"

/* Looks with the pause hint before a waiter judges and sleeps: a change
 * takes well under a microsecond, so a lock still held after these is
 * held by a process that is preempted, stopped or dead. */
#define LOCK_SPIN_LOOKS 64
/* Between two judgements of a live holder: the first at once, then
 * doubling from 1 ms to 64 ms. A stopped locker costs a waiter one /proc
 * look per 64 ms (well under 1% of a core); a dead one is taken over
 * within that. */
#define LOCK_JUDGE_FIRST_NS 1000000u
#define LOCK_JUDGE_MAX_NS   64000000u

/* Not FUTEX_PRIVATE_FLAG: the word is in a file many processes map. */
void vigil_leases__futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *wake)
{
    /* seq_cst: the sleeper read `wake` before it raised `waiters`, so a
     * sleeper this wake must reach fails FUTEX_WAIT's compare. */
    atomic_fetch_add_explicit(wake, 1, memory_order_seq_cst);
    syscall(SYS_futex, (uint32_t *)wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void vigil_leases__wake(struct vigil_leases_entry *e)
{
    futex_wake_all(&e->wake);
}

void vigil_leases__bind_wake(struct vigil_leases_header *h)
{
    futex_wake_all(&h->bind_wake);
}

void vigil_leases__room_wake(struct vigil_leases_header *h)
{
    futex_wake_all(&h->room_wake);
}

/* "Don't know" counts as alive: robbing a live locker is the one
 * unrecoverable mistake (vigil_lock_holder_dead says what is proof). */
bool vigil_leases__locker_dead(uint64_t w, const void *where)
{
    return vigil_lock_holder_dead(w, where);
}

bool vigil_leases__recover(struct vigil_leases_entry *e, uint64_t dead, uint64_t seq)
{
    /* Of several processes that find the same dead locker, one swap wins;
     * the rest see the winner's lock and wait for it like any other. */
    hook(LP_RECOVER_JUDGED);
    struct entry_hold held;
    if (!entry_take_over(e, dead, seq, &held))
        return true;
    hook(LP_RECOVER_LOCKED);
    /* Cleared, not never-used: "never used" ends a lookup's probe, and a
     * key bound further on may have been probed past this entry. */
    /* Release: a binder that reads CLEARED here (then fences, see bind in
     * leases_ops.c) comes after everything this entry saw, the dead process's token
     * included, so the token it takes is greater. */
    atomic_store_explicit(&e->bound, ENTRY_CLEARED, memory_order_release);
    atomic_store_explicit(&e->hash, 0, memory_order_relaxed);
    static const uint64_t zero[16];
    words_store(e->key, zero, 16);
    words_store(e->owner, zero, 8);
    atomic_store_explicit(&e->pid, 0, memory_order_relaxed);
    /* The dead locker may have died before recording the generation it
     * locked from: step past both the recorded one and the next. Expiry 0
     * matches no word a renewer could hold, so any generation is safe. */
    uint64_t gen = atomic_load_explicit(&e->gen_hint, memory_order_relaxed) + 2u;
    entry_unlock(e, &held, gen, 0);
    return true;
}

/*
 * THE LOCK WAIT (model: model/leases.pml, lock_wait). A waiter that finds
 * a lock held spins a little, then judges the holder (dead: the caller
 * takes over) and sleeps on the lock's futex until the holder's unlock
 * wakes it, the next judgement is due, or the deadline. The sleep is
 * THE SLEEP of leases_wait.c with the lock's seq for ctl: read `wake`,
 * raise `waiters`, load seq (all seq_cst) and sleep only if it is still
 * the odd seq of the holding judged; the unlock moves seq by a swap (a
 * full barrier) or a seq_cst store and then loads `waiters`, so either the waiter's load sees the unlock (no
 * sleep) or the unlock sees the waiter and bumps `wake` (FUTEX_WAIT's
 * compare fails, or FUTEX_WAKE finds it). Nothing spins past the first
 * LOCK_SPIN_LOOKS: a stopped locker costs its waiters a judgement every
 * 64 ms, not a core (issue 18).
 */
struct lock_sleep {
    _Atomic uint32_t      *wake, *waiters;
    uint64_t               deadline;  /* vigil_now_ns, 0: LOCK_WAIT_NS from the first sleep */
    unsigned               looks;
    uint64_t               next_judge, judge_gap;
    struct vigil_lock_wait judge;     /* vigil_lock_judge's memory of the words it looked at */
};

/* One round of waiting for the lock pair {w, seq}, the pair's seq word at
 * *seqw: 1 when its holder is provably dead (judged after the pair was
 * read), 0 to look again, VIGIL_EBUSY past the deadline. The sleep watches
 * seq, which every unlock and take-over moves. */
static int lock_sleep_round(struct lock_sleep *s, _Atomic uint64_t *seqw, uint64_t w, uint64_t seq,
                            const void *where)
{
    if (s->looks < LOCK_SPIN_LOOKS) {
        s->looks++;
        vigil_cpu_relax();
        return 0;
    }
    uint64_t now = vigil_now_ns();
    if (s->deadline == 0)
        s->deadline = now + LOCK_WAIT_NS;
    if (now >= s->deadline)
        return VIGIL_EBUSY;
    if (now >= s->next_judge) {
        if (vigil_lock_judge(&s->judge, w, where))
            return 1;
        s->judge_gap = s->judge_gap ? (s->judge_gap < LOCK_JUDGE_MAX_NS / 2 ? s->judge_gap * 2 : LOCK_JUDGE_MAX_NS)
                                    : LOCK_JUDGE_FIRST_NS;
        now = vigil_now_ns();
        s->next_judge = now + s->judge_gap;
        if (now >= s->deadline)
            return VIGIL_EBUSY;
    }
    uint64_t until = s->next_judge < s->deadline ? s->next_judge : s->deadline;
    uint32_t v = atomic_load_explicit(s->wake, memory_order_seq_cst);
    atomic_fetch_add_explicit(s->waiters, 1, memory_order_seq_cst);
    if (atomic_load_explicit(seqw, memory_order_seq_cst) == seq)
        vigil_leases__futex_wait(s->wake, v, until - now);
    /* Relaxed: leaving orders nothing; a late decrement costs an unlocker
     * one useless wake. */
    atomic_fetch_sub_explicit(s->waiters, 1, memory_order_relaxed);
    return 0;
}

int vigil_leases__wait_locked(struct vigil_leases_entry *e, uint64_t *c, uint64_t deadline)
{
    struct lock_sleep s = { .wake = &e->wake, .waiters = &e->waiters, .deadline = deadline };
    for (;;) {
        uint64_t w = atomic_load_explicit(&e->ctl, memory_order_acquire);
        if (!(w & CTL_LOCKED)) {
            *c = w;
            return 0;
        }
        /* The pair as one moment had it, before any judgement of w: the
         * take-over swaps from exactly this holding. */
        uint64_t seq;
        if (!vigil_pair_read(&e->ctl, &w, &seq))
            continue; /* it moved under the read */
        if (!(w & CTL_LOCKED))
            continue;
        int r = lock_sleep_round(&s, &e->seq, w, seq, e);
        if (r < 0)
            return r;
        if (r == 1)
            vigil_leases__recover(e, w, seq);
    }
}

int vigil_leases__bind_lock(struct vigil_leases_header *h, uint64_t deadline, uint64_t *held)
{
    uint64_t me = my_lock_word();
    struct lock_sleep s = { .wake = &h->bind_wake, .waiters = &h->bind_waiters, .deadline = deadline };
    for (;;) {
        /* Acquire (the pair's swaps are full barriers): this binder sees
         * every key the previous one bound. */
        if (vigil_pair_take(h->bind_lock, me, held) == 0)
            return 0;
        uint64_t w, seq;
        if (!vigil_pair_read(h->bind_lock, &w, &seq) || !(seq & 1u))
            continue; /* moved, or freed meanwhile: take again */
        int r = lock_sleep_round(&s, &h->bind_lock[1], w, seq, h);
        if (r < 0)
            return r;
        /* Taking over a dead binder's lock needs no repair: the lock
         * guards a decision, not data; its half-made binding is an entry
         * it had locked, which recovery clears. */
        if (r == 1 && vigil_pair_take_over(h->bind_lock, w, seq, me, held))
            return 0;
    }
}
