/* SPDX-License-Identifier: MIT */
/*
 * Leader election on the heartbeat table: the lowest live pid is the
 * coordinator, every other slot a worker, and the term (the fencing token
 * for the leader's actions) rises by one exactly when the leader changes.
 *
 * Fields used (heartbeat file):
 *
 *   offset  size  field
 *   header
 *       24     8  epoch         the election's "now"
 *       32     8  term          completed changes of leader; 0 before the first
 *       40     8  leader        (pid << 32) | (slot + 1) of the leader the last
 *                               election named, 0 = none yet
 *       48     8  elect_lock    0 free, else the elector's lock word
 *                               (proc_internal.h): held bit, pid, exact pid
 *                               namespace, low 21 bits of its start time
 *       56     8  elect_intent  a change of leader being installed, 0 none:
 *                               bits 63..53 low 11 bits of the new term,
 *                               bits 52..21 new leader's pid,
 *                               bits 20..0 new leader's slot + 1
 *   slot
 *        0     4  pid
 *        4     4  seq           taken to promote, so the slot cannot change
 *                               owner between the check and the role store
 *        8     8  last_seen_epoch
 *       24     4  role          written only by the lock holder (and by
 *                               register / unregister / failover, to worker)
 *
 * THE PROTOCOL. Electors serialise on elect_lock; an election is a few
 * loads per slot, so the lock is held for microseconds and is never on a
 * hot path (beats, snapshots and leader_is take no lock).
 *
 *   1. Take elect_lock by CAS from 0 to this process's word. A holder that
 *      is provably dead (vigil_lock_holder_dead: gone, exited and unreaped,
 *      its pid reused, or a pid whose start tag collides but whose process
 *      maps no part of this table) is replaced by CAS from its exact word,
 *      so of several waiters one takes over and a lock that has changed
 *      hands meanwhile is left. A holder that is alive, or cannot be judged
 *      (another pid namespace), is waited for, a bounded time
 *      (ELECT_WAIT_NS), then VIGIL_EBUSY.
 *   2. Finish a change the previous holder left half-installed (below).
 *   3. Judge every slot, as vigil_hb_live_count does, with plain atomic
 *      loads: the lock makes electors agree, it does not stop slots
 *      beating. The leader is the live slot with the lowest (pid, slot).
 *   4. If that is not the recorded leader: write elect_intent, then
 *      leader, then term + 1, then clear elect_intent.
 *   5. Demote every other occupied slot whose role is coordinator, then
 *      promote the leader's slot under its SeqLock if its pid is still the
 *      one judged. Demoting first means no reader ever finds two
 *      coordinators that this election produced.
 *   6. Release elect_lock.
 *
 * CRASH SAFETY of steps 4 and 5. A holder killed inside step 4 leaves the
 * intent record, which says which leader and which term it was
 * installing. The next holder, in step 2: the term already equals the
 * record's (low 11 bits), so the change is complete; the term is one
 * below, so it stores the record's leader and that term; anything else is
 * a scribble and is dropped. Either way the term rose exactly once for the
 * change and the leader word and the term agree again before this holder
 * looks at them. A holder killed inside step 5 leaves roles half-changed;
 * step 5 of the next election rewrites every role from scratch.
 *
 * The intent, leader and term stores and the recovering holder's loads
 * are seq_cst: a holder that takes the lock from a dead one has no
 * release/acquire pair with it (the dead one never released), and the
 * single total order is what makes the dead holder's stores, in program
 * order, the ones it reads.
 *
 * With no live slot the election names nobody and changes nothing
 * (VIGIL_ENOPEERS): the recorded leader stays until a live slot can
 * replace it, and if it comes back to life first it keeps its term.
 *
 * Model: model/election.pml (steps 1 to 6 with kills at every step).
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "heartbeat_internal.h"

#include <errno.h>

#define INTENT_TERM_SHIFT 53
#define INTENT_TERM_MASK  UINT64_C(0x7ff)
#define INTENT_PID_SHIFT  21
#define INTENT_SLOT_MASK  ((UINT64_C(1) << 21) - 1)

/* How long an elector waits for a live holder before VIGIL_EBUSY, and how
 * often it asks whether the holder died. */
#define ELECT_WAIT_NS  200000000u
#define ELECT_JUDGE_NS 1000000u

static uint64_t leader_word(uint32_t pid, uint32_t slot)
{
    return ((uint64_t)pid << 32) | ((uint64_t)slot + 1);
}

static int lock_acquire(vigil_hb *hb, uint64_t me)
{
    _Atomic uint64_t *lock = &hb->hdr->elect_lock;
    struct vigil_lock_wait wait = { .budget_ns = ELECT_WAIT_NS, .judge_ns = ELECT_JUDGE_NS };
    bool judge = false;
    for (;;) {
        uint64_t cur = 0;
        /* Acquire: pairs with the last holder's releasing unlock, so its
         * leader, term and roles are what this election starts from. */
        if (atomic_compare_exchange_strong_explicit(lock, &cur, me, memory_order_acquire,
                                                    memory_order_relaxed))
            return 0;
        /* Take over from a dead holder by CAS from its exact word: one of
         * several waiters wins, and a lock that changed hands since cur
         * was read is not taken. */
        if (judge && vigil_lock_judge(&wait, cur, hb->hdr) &&
            atomic_compare_exchange_strong_explicit(lock, &cur, me, memory_order_acquire,
                                                    memory_order_relaxed))
            return 0;
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}

static void lock_release(vigil_hb *hb)
{
    /* Release: the leader, term and roles this election wrote are visible
     * to the next holder. */
    atomic_store_explicit(&hb->hdr->elect_lock, 0, memory_order_release);
}

/* Step 2, with the lock held. */
static void finish_intent(vigil_hb *hb)
{
    struct vigil_hb_header *h = hb->hdr;
    uint64_t in = atomic_load_explicit(&h->elect_intent, memory_order_seq_cst);
    if (in == 0)
        return;
    uint64_t term = atomic_load_explicit(&h->term, memory_order_seq_cst);
    uint64_t tag = in >> INTENT_TERM_SHIFT;
    uint64_t slot1 = in & INTENT_SLOT_MASK;
    uint32_t pid = (uint32_t)(in >> INTENT_PID_SHIFT);
    if (((term + 1) & INTENT_TERM_MASK) == tag && slot1 >= 1 && slot1 <= hb->capacity && pid != 0) {
        /* Killed after the intent, before the term: redo both stores. */
        atomic_store_explicit(&h->leader, leader_word(pid, (uint32_t)slot1 - 1), memory_order_seq_cst);
        atomic_store_explicit(&h->term, term + 1, memory_order_seq_cst);
    }
    /* The term already equals the record's: complete. Otherwise: a
     * scribble, dropped. */
    atomic_store_explicit(&h->elect_intent, 0, memory_order_seq_cst);
}

int vigil_leader_elect(vigil_hb *hb, uint64_t grace_epochs, vigil_leader *out)
{
    if (!hb)
        return -EINVAL;
    uint64_t me = vigil_self_lock_word();
    if (me == 0)
        return -EOVERFLOW;
    int err = lock_acquire(hb, me);
    if (err < 0)
        return err;
    finish_intent(hb);

    struct vigil_hb_header *h = hb->hdr;
    uint64_t epoch = atomic_load_explicit(&h->epoch, memory_order_acquire);
    uint32_t best_pid = 0, best_slot = 0;
    for (uint32_t i = 0; i < hb->capacity; i++) {
        const struct vigil_hb_slot *s = &hb->slots[i];
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        if (vigil_hb_is_live_at(pid, seen, epoch, grace_epochs) && (best_pid == 0 || pid < best_pid)) {
            best_pid = pid;
            best_slot = i;
        }
    }
    if (best_pid == 0) {
        lock_release(hb);
        return VIGIL_ENOPEERS;
    }

    uint64_t want = leader_word(best_pid, best_slot);
    uint64_t term = atomic_load_explicit(&h->term, memory_order_seq_cst);
    bool changed = atomic_load_explicit(&h->leader, memory_order_seq_cst) != want;
    if (changed) {
        uint64_t intent = (((term + 1) & INTENT_TERM_MASK) << INTENT_TERM_SHIFT) |
                          ((uint64_t)best_pid << INTENT_PID_SHIFT) | ((uint64_t)best_slot + 1);
        /* Step 4, in this order; see CRASH SAFETY. */
        atomic_store_explicit(&h->elect_intent, intent, memory_order_seq_cst);
        atomic_store_explicit(&h->leader, want, memory_order_seq_cst);
        atomic_store_explicit(&h->term, ++term, memory_order_seq_cst);
        atomic_store_explicit(&h->elect_intent, 0, memory_order_seq_cst);
    }

    /* Step 5: demote first, then promote. */
    for (uint32_t i = 0; i < hb->capacity; i++) {
        struct vigil_hb_slot *s = &hb->slots[i];
        if (i != best_slot && atomic_load_explicit(&s->role, memory_order_relaxed) != VIGIL_ROLE_WORKER &&
            atomic_load_explicit(&s->pid, memory_order_relaxed) != 0)
            atomic_store_explicit(&s->role, VIGIL_ROLE_WORKER, memory_order_release);
    }
    struct vigil_hb_slot *ls = &hb->slots[best_slot];
    if (atomic_load_explicit(&ls->role, memory_order_relaxed) != VIGIL_ROLE_COORDINATOR) {
        uint64_t v;
        /* Under the slot's lock its owner cannot change, so the role goes
         * to the process judged and not to one that re-registered the slot
         * in between. A slot wedged mid-change cannot be locked; it is
         * promoted if its pid still matches, and failover repairs it. */
        bool locked = vigil_slot_lock(ls, &v) == 0;
        if (atomic_load_explicit(&ls->pid, memory_order_relaxed) == best_pid)
            atomic_store_explicit(&ls->role, VIGIL_ROLE_COORDINATOR, memory_order_release);
        if (locked)
            vigil_slot_unlock(ls, v);
    }
    lock_release(hb);

    if (out)
        *out = (vigil_leader){ .slot = best_slot, .pid = best_pid, .term = term };
    return changed ? 1 : 0;
}

bool vigil_leader_is(const vigil_hb *hb, uint32_t slot, uint64_t grace_epochs)
{
    if (!hb || slot >= hb->capacity)
        return false;
    uint64_t epoch = atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire);
    vigil_slot_info me;
    if (vigil_hb_snapshot(hb, slot, &me) != 0)
        return false;
    if (me.role != VIGIL_ROLE_COORDINATOR || !vigil_hb_is_live_at(me.pid, me.last_seen_epoch, epoch, grace_epochs))
        return false;
    for (uint32_t i = 0; i < hb->capacity; i++) {
        const struct vigil_hb_slot *s = &hb->slots[i];
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        if (i == slot || pid > me.pid || (pid == me.pid && i > slot))
            continue;
        uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        if (vigil_hb_is_live_at(pid, seen, epoch, grace_epochs))
            return false;
    }
    return true;
}

int vigil_leader_get(const vigil_hb *hb, vigil_leader *out)
{
    if (!hb || !out)
        return -EINVAL;
    const struct vigil_hb_header *h = hb->hdr;
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        /* term, intent, leader, intent, term: an elector stores intent,
         * leader, term, then clears intent, so an unchanged term with no
         * intent on either side of the leader load means the leader read
         * belongs to that term. seq_cst: the argument needs one order of
         * these loads against the elector's stores. */
        uint64_t t1 = atomic_load_explicit(&h->term, memory_order_seq_cst);
        uint64_t i1 = atomic_load_explicit(&h->elect_intent, memory_order_seq_cst);
        uint64_t l = atomic_load_explicit(&h->leader, memory_order_seq_cst);
        uint64_t i2 = atomic_load_explicit(&h->elect_intent, memory_order_seq_cst);
        uint64_t t2 = atomic_load_explicit(&h->term, memory_order_seq_cst);
        if (t1 == t2 && i1 == 0 && i2 == 0) {
            if (l == 0)
                return VIGIL_ENOPEERS;
            uint32_t slot1 = (uint32_t)l;
            if (slot1 == 0 || slot1 > hb->capacity)
                return VIGIL_ERANGE; /* scribbled: names no slot of this table */
            *out = (vigil_leader){ .slot = slot1 - 1, .pid = (uint32_t)(l >> 32), .term = t1 };
            return 0;
        }
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}
