/* SPDX-License-Identifier: MIT */
/*
 * The lease store's locks: an entry's ctl word locked for a change of
 * hands, the header's bind lock, and what happens when their holder dies.
 *
 * Fields used (lease file; the whole layout is told in leases.c):
 *
 *   header
 *     32  u64    bind_lock: 0 free, else the binder's lock word
 *   entry i, at 64 + i * 256
 *      0  u64    ctl: locked, the locker's lock word (proc_internal.h:
 *                bit 63 set, pid, exact pid namespace, start tag);
 *                unlocked, generation | expiry
 *     24  u32    hash, 28 bound, 36 pid, 64 key, 192 owner: cleared by
 *                recovery
 *     32  u32    gen_hint: the generation of the last unlocked ctl a locker
 *                saw, so recovery can step past it
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
 *  - A lock held by a live process is waited for, boundedly (10 ms), then
 *    VIGIL_EBUSY: a process stopped inside a change is never robbed, so a
 *    resumed one can never write over its successor.
 *  - Every process sharing a store must see the same pids (one pid
 *    namespace), as for the heartbeat table's probe.
 *
 * Model: model/leases.pml (the take-over only ever of a dead locker).
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include "spin_internal.h"

/* How long a live locker is waited for (a change takes well under a
 * microsecond: this is for one preempted mid-change), and how often it is
 * asked whether it died meanwhile (about what 128 yields took before the
 * wait was written in time: a /proc look costs microseconds, so only a
 * lock that outlives the spin is worth one, and then not on every look). */
#define LOCK_WAIT_NS  10000000u
#define LOCK_JUDGE_NS 200000u

/* "Don't know" counts as alive: robbing a live locker is the one
 * unrecoverable mistake (vigil_lock_holder_dead says what is proof). */
bool vigil_leases__locker_dead(uint64_t w, const void *where)
{
    return vigil_lock_holder_dead(w, where);
}

bool vigil_leases__recover(struct vigil_leases_entry *e, uint64_t dead)
{
    /* Of several processes that find the same dead locker, one CAS wins;
     * the rest see the winner's lock and wait for it like any other. */
    if (!entry_lock_from(e, dead, my_lock_word()))
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
    entry_unlock(e, gen, 0);
    return true;
}

int vigil_leases__wait_locked(struct vigil_leases_entry *e, uint64_t *c)
{
    struct vigil_lock_wait wait = { .budget_ns = LOCK_WAIT_NS, .judge_ns = LOCK_JUDGE_NS };
    bool judge = false;
    for (;;) {
        uint64_t w = atomic_load_explicit(&e->ctl, memory_order_acquire);
        if (!(w & CTL_LOCKED)) {
            *c = w;
            return 0;
        }
        if (judge && vigil_lock_judge(&wait, w, e)) {
            vigil_leases__recover(e, w);
            judge = false;
            continue;
        }
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}

int vigil_leases__bind_lock(struct vigil_leases_header *h)
{
    uint64_t me = my_lock_word();
    struct vigil_lock_wait wait = { .budget_ns = LOCK_WAIT_NS, .judge_ns = LOCK_JUDGE_NS };
    bool judge = false;
    for (;;) {
        uint64_t w = atomic_load_explicit(&h->bind_lock, memory_order_relaxed);
        /* Acquire: this binder sees every key the previous one bound.
         * Taking over a dead binder's lock needs no repair: the lock guards
         * a decision, not data; its half-made binding is an entry it had
         * locked, which recovery clears. */
        if ((w == 0 || (judge && vigil_lock_judge(&wait, w, h))) &&
            atomic_compare_exchange_strong_explicit(&h->bind_lock, &w, me, memory_order_acquire,
                                                    memory_order_relaxed))
            return 0;
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}
