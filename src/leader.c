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
 *       40     8  leader        the registration the last election named:
 *                               (gen << 21) | (slot + 1), gen the slot's
 *                               generation (below 2^43), 0 = none yet;
 *                               {term, leader} change together, by one
 *                               16-byte compare-and-swap
 *       48     8  elect_lock    THE ELECTION LOCK's word: the lock word
 *                               (proc_internal.h) of its holder, or of the
 *                               last one once free
 *       56     8  elect_seq     odd while the lock is held; rises at every
 *                               take and take-over ({elect_lock, elect_seq}
 *                               is a lock pair, proc_internal.h)
 *   slot
 *        0     4  pid
 *        4     4  role          written only by the lock holder (and by
 *                               register / unregister / failover / set_role)
 *        8     8  last_seen_epoch
 *       24     8  gen           the registration the leader word names
 *       32    16  writer, seq   THE SLOT WRITER LOCK, taken to promote, so
 *                               the slot cannot change owner between the
 *                               check and the role store
 *
 * THE PROTOCOL. Electors serialise on the election lock; an election is a
 * few loads per slot, so the lock is held for microseconds and is never on
 * a hot path (beats, snapshots and leader_is take no lock).
 *
 *   1. Take the lock: one 16-byte swap of {elect_lock, elect_seq} from
 *      {any, even s} to {our word, s + 1}. A holder that is provably dead
 *      (vigil_lock_holder_dead: gone, exited and unreaped, its pid reused,
 *      or a pid whose start tag collides but whose process maps no part of
 *      this table) is taken over: the holding is read as one
 *      (vigil_pair_read), judged, and replaced by one swap from exactly
 *      that holding to {our word, s + 2}. Of several waiters one wins, and
 *      a lock that changed hands since it was read is left, even when the
 *      new holder's word equals the dead one's (a recycled pid started in
 *      the same clock tick): the sequence names the holding (issue 17.6).
 *      A holder that is alive, or cannot be judged (another pid namespace),
 *      is waited for, a bounded time (ELECT_WAIT_NS), then VIGIL_EBUSY.
 *   2. Judge every slot, as vigil_hb_live_count does, with plain atomic
 *      loads: the lock makes electors agree, it does not stop slots
 *      beating. The leader is the live slot with the lowest (pid, slot),
 *      and its registration is read under the slot's SeqLock, so the
 *      generation named is the pid's.
 *   3. If that registration is not the recorded leader: {term, leader}
 *      from {t, old} to {t + 1, new} by one 16-byte swap. A change is
 *      installed whole or not at all, whenever an elector is killed, and
 *      the term rises exactly once for it; a reader never sees a leader
 *      with another change's term.
 *   4. Demote every other occupied slot whose role is coordinator, then
 *      promote the leader's slot under its writer lock if it still holds
 *      the registration judged. Demoting first means no reader ever finds
 *      two coordinators that this election produced. A holder killed here
 *      leaves roles half-changed; step 4 of the next election rewrites
 *      every role from scratch.
 *   5. Release the lock: a release store of s + 2.
 *
 * The leader word names a registration, not a pid, so a pid recycled into
 * the leader's slot is a new registration and a change of leader: the term
 * rises and a deposed incarnation is fenced by it.
 *
 * With no live slot the election names nobody and changes nothing
 * (VIGIL_ENOPEERS): the recorded leader stays until a live slot can
 * replace it, and if it comes back to life first it keeps its term.
 *
 * ORDERS ONLY AN ARGUMENT PROTECTS. A holder that takes the lock over from
 * a dead one has no release/acquire pair with it (the dead one never
 * released). It needs none: the only words a holder changes that the next
 * one reads are {term, leader}, changed by a locked read-modify-write,
 * which always reads the latest value whoever wrote it; the roles are
 * rewritten from scratch. vigil_leader_get's three loads (term, leader,
 * term) are seq_cst so they are not reordered among themselves; the
 * argument that an unchanged term brackets the leader of that term is
 * that {term, leader} change only together and the term only rises.
 *
 * Model: model/election.pml (steps 1 to 5 with kills at every step, lock
 * words that recur). Tests: test_leader.c, test_leader_race.c (an elector
 * killed at each vigil_elect_hook point, a take-over judged and paused
 * while the lock changes hands to a holder with the same word).
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "heartbeat_internal.h"

#include <errno.h>

/* How long an elector waits for a live holder before VIGIL_EBUSY, and how
 * often it asks whether the holder died. */
#define ELECT_WAIT_NS  200000000u
#define ELECT_JUDGE_NS 1000000u

/* The leader word: (gen << 21) | (slot + 1). Slots are below 2^20, so
 * slot + 1 fits 21 bits, and gens below 2^43 fit the rest whole. */
#define LEADER_SLOT_BITS 21
#define LEADER_SLOT_MASK ((UINT64_C(1) << LEADER_SLOT_BITS) - 1)
_Static_assert(VIGIL_GEN_BITS + LEADER_SLOT_BITS == 64, "a leader word holds a gen whole");

void (*vigil_elect_hook)(int point);

static void elect_hook(int point)
{
    void (*h)(int) = vigil_elect_hook;
    if (h)
        h(point);
}

static uint64_t leader_word(uint64_t gen, uint32_t slot)
{
    return gen << LEADER_SLOT_BITS | ((uint64_t)slot + 1);
}

/* Step 1; *held is the odd sequence held. */
static int lock_acquire(vigil_hb *hb, uint64_t me, uint64_t *held)
{
    _Atomic uint64_t *lock = &hb->hdr->elect_lock;
    struct vigil_lock_wait wait = { .budget_ns = ELECT_WAIT_NS, .judge_ns = ELECT_JUDGE_NS };
    bool judge = false;
    for (;;) {
        if (vigil_pair_take(lock, me, held) == 0)
            return 0;
        uint64_t w, s;
        /* The holding first, then the judgement: see LOCK PAIRS. */
        if (judge && vigil_pair_read(lock, &w, &s) && (s & 1u) && vigil_lock_judge(&wait, w, hb->hdr)) {
            elect_hook(EP_JUDGED);
            if (vigil_pair_take_over(lock, w, s, me, held))
                return 0;
        }
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}

/* Step 2 for the slot found lowest: its registration, read as one. false
 * when it changed since it was judged (the caller judges again). */
static bool leader_registration(const vigil_hb *hb, uint32_t slot, uint32_t pid, uint64_t epoch,
                                uint64_t grace, uint64_t *gen)
{
    struct vigil_slot_words w;
    if (vigil_slot_read(&hb->slots[slot], &w, true) == VIGIL_EBUSY) {
        /* Wedged by a writer killed mid-change (failover repairs it): its
         * words are each atomic, and the gen is the one its pid came with
         * unless the dead writer was changing it, which promotion checks. */
        *gen = vigil_slot_gen(&hb->slots[slot]);
        return *gen != 0;
    }
    *gen = w.gen;
    return w.gen != 0 && w.info.pid == pid && vigil_hb_is_live_at(pid, w.info.last_seen_epoch, epoch, grace);
}

/* How many times an election judges the slots again when the lowest one
 * changed under it, before it calls the table too busy. */
#define JUDGE_TRIES 8

int vigil_leader_elect(vigil_hb *hb, uint64_t grace_epochs, vigil_leader *out)
{
    if (!hb)
        return -EINVAL;
    uint64_t me = vigil_self_lock_word();
    if (me == 0)
        return -EOVERFLOW;
    uint64_t held;
    int err = lock_acquire(hb, me, &held);
    if (err < 0)
        return err;
    elect_hook(EP_LOCKED);

    struct vigil_hb_header *h = hb->hdr;
    uint32_t best_pid = 0, best_slot = 0;
    uint64_t best_gen = 0;
    for (unsigned tries = 0; tries < JUDGE_TRIES; tries++) {
        uint64_t epoch = atomic_load_explicit(&h->epoch, memory_order_acquire);
        best_pid = 0;
        for (uint32_t i = 0; i < hb->capacity; i++) {
            const struct vigil_hb_slot *s = &hb->slots[i];
            uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
            uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
            if (vigil_hb_is_live_at(pid, seen, epoch, grace_epochs) && (best_pid == 0 || pid < best_pid)) {
                best_pid = pid;
                best_slot = i;
            }
        }
        if (best_pid == 0 || leader_registration(hb, best_slot, best_pid, epoch, grace_epochs, &best_gen))
            break;
        best_pid = 0; /* changed under us: judge again */
        err = VIGIL_EBUSY;
    }
    if (best_pid == 0) {
        vigil_pair_release(&h->elect_lock, held);
        return err < 0 ? err : VIGIL_ENOPEERS;
    }

    /* Step 3: the change of leader, whole, by one swap of {term, leader}.
     * Only the lock holder changes the pair, so the swap fails only on a
     * peer scribbling outside the protocol; it is then tried from what it
     * read. The loads are guesses the swap checks. */
    uint64_t want = leader_word(best_gen, best_slot);
    uint64_t term = atomic_load_explicit(&h->term, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&h->leader, memory_order_relaxed);
    bool changed = false;
    while (cur != want) {
        uint64_t next = term + 1;
        if (vigil__cas16(&h->term, &term, &cur, next, want)) {
            term = next;
            changed = true;
            break;
        }
    }
    elect_hook(EP_CHANGED);

    /* Step 4: demote first, then promote. */
    for (uint32_t i = 0; i < hb->capacity; i++) {
        struct vigil_hb_slot *s = &hb->slots[i];
        if (i != best_slot && atomic_load_explicit(&s->role, memory_order_relaxed) != VIGIL_ROLE_WORKER &&
            atomic_load_explicit(&s->pid, memory_order_relaxed) != 0)
            atomic_store_explicit(&s->role, VIGIL_ROLE_WORKER, memory_order_release);
    }
    elect_hook(EP_DEMOTED);
    struct vigil_hb_slot *ls = &hb->slots[best_slot];
    if (atomic_load_explicit(&ls->role, memory_order_relaxed) != VIGIL_ROLE_COORDINATOR) {
        uint64_t v;
        /* Under the slot's lock its registration cannot change, so the
         * role goes to the one judged and not to one that registered the
         * slot in between. A slot wedged mid-change cannot be locked; it
         * is promoted if it still holds that registration, and failover
         * repairs it. */
        bool locked = vigil_slot_lock(ls, &v) == 0;
        if (vigil_gen_of(atomic_load_explicit(&ls->gen, memory_order_relaxed)) == best_gen)
            atomic_store_explicit(&ls->role, VIGIL_ROLE_COORDINATOR, memory_order_release);
        if (locked)
            vigil_slot_unlock(ls, v);
    }
    /* Step 5. Release (vigil_pair_release): the roles this election wrote
     * are visible to the next holder. */
    vigil_pair_release(&h->elect_lock, held);

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
        /* term, leader, term: the pair changes only together and the term
         * only rises, so an unchanged term around the leader's load means
         * the leader read is that term's (ORDERS ONLY AN ARGUMENT
         * PROTECTS). Plain loads: a read-only handle may not write, not
         * even the store-back of a 16-byte swap. */
        uint64_t t1 = atomic_load_explicit(&h->term, memory_order_seq_cst);
        uint64_t l = atomic_load_explicit(&h->leader, memory_order_seq_cst);
        uint64_t t2 = atomic_load_explicit(&h->term, memory_order_seq_cst);
        if (t1 == t2) {
            if (l == 0)
                return VIGIL_ENOPEERS;
            uint64_t slot1 = l & LEADER_SLOT_MASK, gen = l >> LEADER_SLOT_BITS;
            if (slot1 == 0 || slot1 > hb->capacity)
                return VIGIL_ERANGE; /* scribbled: names no slot of this table */
            /* The pid is the slot's while it holds the registration named;
             * 0 once that registration has left it (not yet re-elected). */
            const struct vigil_hb_slot *ls = &hb->slots[slot1 - 1];
            struct vigil_slot_words w;
            uint32_t pid = 0;
            int rc = vigil_slot_read(ls, &w, true);
            if (rc == 0 && w.gen == gen)
                pid = w.info.pid;
            else if (rc == VIGIL_EBUSY && vigil_slot_gen(ls) == gen) /* wedged: word by word */
                pid = atomic_load_explicit(&ls->pid, memory_order_relaxed);
            *out = (vigil_leader){ .slot = (uint32_t)slot1 - 1, .pid = pid, .term = t1 };
            return 0;
        }
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}
