/* SPDX-License-Identifier: MIT */
/*
 * Failover: vacate every slot whose heartbeat lapsed and hand its in-flight
 * bits to the caller, exactly once among any number of racing watchdogs;
 * repair a slot wedged mid-change.
 *
 * Fields used (heartbeat file, header at 0, slot i at 64 + i * 64):
 *
 *   offset  size  field
 *   header
 *       24     8  epoch          read once per scan: the scan's "now"
 *   slot
 *        0     4  pid            owner, 0 = vacant; the claim clears it by CAS
 *        4     4  role           reset to worker on vacate
 *        8     8  last_seen_epoch
 *       16     8  in_flight      taken by one atomic exchange with 0
 *       24     8  gen            the registration (heartbeat_internal.h): the
 *                                claim takes only the one judged, and marks
 *                                it vacant
 *       32     8  writer         the structural writer's lock word
 *                                (THE SLOT WRITER LOCK, heartbeat_internal.h)
 *       40     8  seq            SeqLock version
 *       48     4  start_time     cleared on vacate
 *       52     4  owner_ns       cleared on vacate
 *       56     4  reclaims       counter, +1 for each owner vacated
 *       60     4  repairs        counter, +1 for each repair of a dead writer's slot
 *
 * A slot is stale when pid != 0 and epoch - last_seen_epoch > grace as a
 * signed difference (vigil_hb_is_live_at); a live slot is never vacated
 * and its bits are never touched.
 *
 * THE CLAIM (stale slot, seq even):
 *
 *   1. Filter without writing: seq even, pid != 0, stale (relaxed loads;
 *      an acquire fence only once the slot needs acting on).
 *   2. Take the slot's writer lock (one 16-byte compare-and-swap of
 *      {writer, seq} from {any, even v} to {our word, v + 1}). Of all
 *      racing watchdogs (and registrants, and unregister) exactly one
 *      takes it; the losers skip the slot for this scan.
 *   3. Under the lock, re-read gen, pid and last_seen_epoch: the
 *      registration judged (named by its generation, which never recurs)
 *      must still hold the slot, and a beat may have landed since step 1
 *      (beats do not take the lock). Still that registration and still
 *      stale, or let it go.
 *   4. Claim by CAS on pid, from the pid judged to 0. No vigil writer moves
 *      pid without the lock, so this fails only against a peer writing the
 *      file outside the protocol; then the slot is left alone.
 *   5. Take the bits and end the registration in one 16-byte swap of
 *      {in_flight, gen} to {0, gen | VIGIL_GEN_VACANT} (THE FENCE, in
 *      <vigil/heartbeat.h>): every mark or clear the owner makes after it,
 *      however stale, fails and is told VIGIL_ELOST, so no bit lands in
 *      the vacant slot or a successor's, and every one before it is in
 *      the bits handed over: a bit is never taken twice nor dropped.
 *   6. Clear the rest, release the lock with a store of v + 2.
 *
 * An entry is written only for a slot actually vacated, and a slot is
 * vacated only while there is room for its entry: with max entries
 * written the scan stops, and the rest wait, untouched, for the next one.
 *
 * THE REPAIR (a writer died holding the lock; model: model/slot.pml):
 *
 *   A writer killed between its lock and its unlock leaves the version
 *   odd and `writer` naming it: snapshots give VIGIL_EBUSY and nobody can
 *   lock the slot. A scan that finds the version odd reads the holding
 *   {writer, seq} as one (vigil_pair_read), then looks at the process it
 *   names (vigil_lock_holder_dead: same pid namespace, and gone, or
 *   another process by its start time, or one that maps no part of the
 *   table):
 *
 *   - alive, or not provably dead (another namespace, unknown): leave it.
 *     A writer that is only paused (SIGSTOP, a long preemption) resumes
 *     and finishes its own change; nothing ever moves the version under
 *     it, so it never goes backwards.
 *   - dead: take the lock over by one 16-byte swap from exactly the
 *     holding read to {our word, odd + 2} (one of the racing scanners
 *     wins; one that judged and then stalled fails once the lock has
 *     changed hands, even to a process with the dead one's very word,
 *     since the version names the holding: LOCK PAIRS, proc_internal.h).
 *     Under that lock the slot is judged as in the claim: a stale, dead
 *     or vacant slot is vacated and its bits handed over (with pid 0 if
 *     the pid was already cleared by a writer killed after it); a live
 *     slot keeps its owner and bits. The unlock stores the next even
 *     version.
 *
 *   So the version only grows, and a repair never happens under a writer
 *   that can come back. (The design before, which repaired by time once
 *   the version had stayed odd past grace, let a paused writer store its
 *   unlock over the repair's: model/slot_old.pml.)
 *
 * STRAY BITS: since THE FENCE a vacant slot never gains a bit through
 * vigil; one that holds some anyway (written by a peer outside the
 * protocol) has them taken under the lock as above and reported with
 * pid 0, or cleared by the next register.
 *
 * THE JOURNAL (journal_internal.h; model: model/journal.pml). A handle
 * with a reclaim journal attached (hb->journal, `vigil failover --exec`)
 * writes every reclaim down before the slot is vacated: under the lock,
 * between steps 3 and 4, an entry is begun (CLAIMING) with the
 * registration and the bits; step 5's swap expects exactly the entry's
 * bits (each retry writes the new ones to the entry first); then the
 * entry is committed (PENDING), then the unlock. A repair that takes the
 * lock over from a dead claimer settles that claimer's entry (its owner
 * the holder taken over: no one else can have touched the slot since) by
 * the slot's gen word: VACANT | the entry's gen, the swap was made
 * (commit); the entry's gen, it was not (the repair adopts the entry and
 * goes on as a claim, or voids it). A journal with no free entry vacates nothing:
 * the slot waits, stale, for the next scan. Stray bits (pid 0, a peer
 * writing outside the protocol) are handed to the caller alone, as
 * before.
 *
 * Without a journal, a watchdog killed between step 5 and returning loses
 * the entries it took: the scan hands bits to its caller's memory.
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "heartbeat_internal.h"
#include "journal_internal.h"

#include <errno.h>

struct scan {
    vigil_hb      *hb;
    vigil_journal *j;     /* hb->journal: the claim's steps journaled */
    uint64_t       epoch;
    uint64_t       grace;
    bool           probe;
    bool           full;  /* the journal had no free entry: stop */
    vigil_reclaim *out;
    uint32_t       max;
    uint32_t       n;
};

static bool stale_at(const struct scan *sc, uint32_t pid, uint64_t seen)
{
    return pid != 0 && !vigil_hb_is_live_at(pid, seen, sc->epoch, sc->grace);
}

/* Provably dead by probe (the probe-assisted scan only). */
static bool probed_dead(const struct scan *sc, const struct vigil_hb_slot *s, uint32_t pid)
{
    if (!sc->probe)
        return false;
    uint64_t start = atomic_load_explicit(&s->start_time, memory_order_relaxed);
    uint64_t ns = atomic_load_explicit(&s->owner_ns, memory_order_relaxed);
    return vigil_pid_judge(pid, start, VIGIL_START_MASK, ns, UINT32_MAX) == 0;
}

/* With the slot's writer lock held: steps 4 to 6 but the unlock, the
 * swap's bits written to journal entry idx first when j is given. Returns
 * false when the pid moved under us (a peer outside the protocol). */
static bool vacate_locked(struct vigil_hb_slot *s, uint32_t pid, uint64_t *bits, vigil_journal *j, uint32_t idx)
{
    uint32_t expect = pid;
    /* Relaxed: the lock's swap already ordered us after the last writer,
     * and the unlock's release publishes the vacancy. */
    if (!atomic_compare_exchange_strong_explicit(&s->pid, &expect, 0, memory_order_relaxed,
                                                 memory_order_relaxed))
        return false;
    /* An owner vacated (not a vacancy finished or stray bits taken).
     * Relaxed: a statistic, published by the unlock; after the pid, so a
     * scanner killed between the two never makes the derived unregister
     * count (registers - reclaims - occupied) go below zero. */
    if (pid != 0)
        atomic_fetch_add_explicit(&s->reclaims, 1, memory_order_relaxed);
    /* Step 5, THE FENCE's other half (<vigil/heartbeat.h>): the bits are
     * taken and the generation marked vacant in one swap of the pair, so
     * every mark or clear the owner makes after it, however stale, fails
     * and is told VIGIL_ELOST, and every one before it is in the bits
     * handed over. It can fail only against the owner's own marks (the
     * bits moved), and is then tried again with what it read. A full
     * barrier: acquire for what the owner recorded about each unit before
     * marking it. */
    uint64_t b = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
    uint64_t g = atomic_load_explicit(&s->gen, memory_order_relaxed);
    /* Journaled: the entry holds exactly the bits the swap expects, so
     * the bits taken are the entry's (THE JOURNAL). */
    for (;;) {
        if (j)
            vigil_journal_set_bits(j, idx, b);
        if (vigil__cas16(&s->in_flight, &b, &g, 0, g | VIGIL_GEN_VACANT))
            break;
    }
    if (j)
        journal_hook(JP_SWAPPED);
    *bits = b;
    atomic_store_explicit(&s->role, VIGIL_ROLE_WORKER, memory_order_relaxed);
    atomic_store_explicit(&s->last_seen_epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->start_time, 0, memory_order_relaxed);
    atomic_store_explicit(&s->owner_ns, 0, memory_order_relaxed);
    return true;
}

static void emit(struct scan *sc, uint32_t slot, uint32_t pid, uint64_t bits)
{
    sc->out[sc->n++] = (vigil_reclaim){ .slot = slot, .pid = pid, .in_flight = bits };
}

/* THE JOURNAL's claim, under the lock: begin, vacate, commit. A journal
 * with no free entry stops the scan (sc->full) and vacates nothing; the
 * journal's handle keeps that (starved) for its caller to say. */
static void vacate_journaled(struct scan *sc, struct vigil_hb_slot *s, uint32_t i, uint32_t pid, uint64_t gen,
                             uint32_t why, struct vigil_journal_rec *r)
{
    uint64_t me = vigil_self_lock_word(), bits, word;
    if (r->idx == UINT32_MAX) {
        bits = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
        if (vigil_journal_begin(sc->j, me, i, pid, gen, bits, why, sc->epoch, &r->idx, &word) < 0) {
            sc->full = true;
            sc->j->starved = true;
            return;
        }
        r->state = VJ_CLAIMING, r->ticket = vj_ticket(word), r->owner = me;
    }
    uint64_t from = vj_word(VJ_CLAIMING, r->ticket);
    if (!vacate_locked(s, atomic_load_explicit(&s->pid, memory_order_relaxed), &bits, sc->j, r->idx)) {
        atomic_store_explicit(&sc->j->e[r->idx].gen, 0, memory_order_relaxed);
        vigil_journal_move(sc->j, r->idx, from, me, vj_word(VJ_FREE, r->ticket), 0);
        return;
    }
    vigil_journal_move(sc->j, r->idx, from, me, vj_word(VJ_PENDING, r->ticket), 0);
    journal_hook(JP_COMMITTED);
    emit(sc, i, pid, bits);
}

/* Steps 2 to 6 for a slot the filter judged to hold registration `gen`
 * of `pid` and to be stale (or its owner provably dead), or (gen 0,
 * pid 0) to be vacant with stray bits. */
static void claim(struct scan *sc, uint32_t i, uint64_t gen, uint32_t pid, bool dead)
{
    struct vigil_hb_slot *s = &sc->hb->slots[i];
    uint64_t lv;
    slot_hook(SP_CLAIMING); /* judged, not yet locked: tests pause a scanner here */
    if (vigil_slot_try_lock(s, &lv) < 0)
        return; /* another writer holds it: this scan leaves the slot */
    /* Under the lock the registration cannot change: the one judged is
     * the one taken, or nothing is. */
    uint64_t now_gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
    uint32_t now_pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
    uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
    uint64_t bits = 0;
    bool take;
    if (pid == 0)
        take = now_pid == 0 && now_gen == 0 && atomic_load_explicit(&s->in_flight, memory_order_relaxed) != 0;
    else
        /* A dead owner cannot beat, so its verdict survives a late beat;
         * a stale one must still be stale under the lock. */
        take = now_gen == gen && now_pid == pid && (dead || stale_at(sc, pid, seen));
    if (take && sc->j && pid != 0) {
        struct vigil_journal_rec r = { .idx = UINT32_MAX };
        vacate_journaled(sc, s, i, pid, gen, dead ? VIGIL_RECLAIM_EXITED : VIGIL_RECLAIM_STALE, &r);
    } else if (take && vacate_locked(s, now_pid, &bits, NULL, 0)) {
        emit(sc, i, pid, bits);
    }
    vigil_slot_unlock(s, lv);
}

/* THE JOURNAL, step 2: under a lock taken over from dead writer w, the
 * CLAIMING entry w left for this slot, settled. Only w's: the slot's gen
 * tells what w did only if w was its last holder (a scan without the
 * journal may have held it since another claimer died, and vacated it
 * for its own caller: model/journal.pml's plain run found that). Returns
 * true when the slot is dealt with; false leaves the repair to go on as
 * without an entry. */
static bool settle(struct scan *sc, uint32_t i, uint64_t w_dead, uint32_t pid, uint64_t seen)
{
    struct vigil_hb_slot *s = &sc->hb->slots[i];
    struct vigil_journal_rec r;
    if (!sc->j || vigil_journal_claiming(sc->j, i, w_dead, &r) < 0)
        return false;
    uint64_t me = vigil_self_lock_word();
    uint64_t w = vj_word(VJ_CLAIMING, r.ticket);
    if (!vigil_journal_move(sc->j, r.idx, w, r.owner, w, me))
        return false; /* moved meanwhile: not a dead holder's after all */
    r.owner = me;
    uint64_t gw = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (r.gen != 0 && gw == (r.gen | VIGIL_GEN_VACANT)) {
        /* The dead claimer's swap was made, with the entry's bits. */
        uint64_t bits;
        vigil_journal_move(sc->j, r.idx, w, me, vj_word(VJ_PENDING, r.ticket), 0);
        journal_hook(JP_COMMITTED);
        if (sc->n < sc->max)
            emit(sc, i, r.pid, r.in_flight);
        vacate_locked(s, 0, &bits, NULL, 0); /* the vacancy's other stores */
        return true;
    }
    if (r.gen != 0 && vigil_gen_of(gw) == r.gen && sc->n < sc->max &&
        (pid == 0 || stale_at(sc, pid, seen) || probed_dead(sc, s, pid))) {
        /* Not made: go on as the claim, with its entry. */
        vacate_journaled(sc, s, i, r.pid, r.gen, r.why, &r);
        return true;
    }
    /* Begun but never filled, a live owner, or no room to say it: void. */
    atomic_store_explicit(&sc->j->e[r.idx].gen, 0, memory_order_relaxed);
    vigil_journal_move(sc->j, r.idx, w, me, vj_word(VJ_FREE, r.ticket), 0);
    return false;
}

/* THE REPAIR, for a slot whose version was read odd. */
static void repair(struct scan *sc, uint32_t i)
{
    struct vigil_hb_slot *s = &sc->hb->slots[i];
    uint64_t w, odd;
    /* The holding first, then the judgement (LOCK PAIRS): a writer that
     * took the lock before this read existed then, so "dead" covers it,
     * and one that takes it after has another version. */
    if (!vigil_pair_read(&s->writer, &w, &odd) || !(odd & 1u))
        return; /* moving, or finished meanwhile */
    if (!vigil_lock_holder_dead(w, sc->hb->hdr))
        return; /* alive, paused, or out of sight: its change is its own */
    slot_hook(SP_JUDGED);
    uint64_t lv;
    if (vigil_slot_take_over(s, w, odd, &lv) < 0)
        return; /* another scanner repairs it, or it changed hands */
    /* Relaxed: a statistic, published by the unlock below. */
    atomic_fetch_add_explicit(&s->repairs, 1, memory_order_relaxed);
    uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
    uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
    if (settle(sc, i, w, pid, seen)) {
        vigil_slot_unlock(s, lv);
        return;
    }
    /* A wedged slot whose pid is already 0 was being vacated (or filled)
     * when its writer died: finish the vacancy, and hand over whatever
     * bits it still holds with pid 0. A live owner keeps its slot. */
    uint64_t bits = 0;
    bool vacate = sc->n < sc->max && (pid == 0 || stale_at(sc, pid, seen) || probed_dead(sc, s, pid));
    if (vacate && sc->j && pid != 0) {
        struct vigil_journal_rec r = { .idx = UINT32_MAX };
        uint64_t gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
        vacate_journaled(sc, s, i, pid, gen, stale_at(sc, pid, seen) ? VIGIL_RECLAIM_STALE : VIGIL_RECLAIM_EXITED,
                         &r);
    } else if (vacate && vacate_locked(s, pid, &bits, NULL, 0) && (pid != 0 || bits != 0)) {
        emit(sc, i, pid, bits);
    }
    vigil_slot_unlock(s, lv);
}

static int scan_table(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max, bool probe)
{
    if (!hb || (!out && max))
        return -EINVAL;
    struct scan sc = {
        .hb = hb,
        .j = hb->journal,
        .epoch = atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire),
        .grace = grace_epochs,
        .probe = probe,
        .out = out,
        .max = max,
    };
    /* Locals the compiler can keep in registers: &sc escapes into
     * claim() and repair(), so its fields would be reloaded every slot. */
    struct vigil_hb_slot *const slots = hb->slots;
    const uint32_t cap = hb->capacity;
    const uint64_t epoch = sc.epoch;
    for (uint32_t i = 0; i < cap && sc.n < sc.max && !sc.full; i++) {
        struct vigil_hb_slot *s = &slots[i];
        /* Step 1, the filter: three relaxed loads and nothing written. A
         * slot that needs nothing (version even, occupied, live) costs no
         * more than that; whatever is decided from here is decided again
         * under the lock, so a stale read here only skips or retries. */
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed);
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        if (!(v & 1u) && vigil_hb_is_live_at(pid, seen, epoch, grace_epochs) && !probe)
            continue;
        /* Acquire: the loads below are at least as new as the unlock that
         * wrote v; the version read again after them tells whether they
         * all belong to version v's registration. */
        atomic_thread_fence(memory_order_acquire);
        if (v & 1u) {
            repair(&sc, i);
            continue;
        }
        pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
        uint64_t bits = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
        seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        bool dead = !stale_at(&sc, pid, seen) && probed_dead(&sc, s, pid);
        /* As vigil_slot_read: the loads (and the probe's start time and
         * namespace) are one registration's if the version is still v.
         * If not, the slot changed: the next scan looks again. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != v)
            continue;
        if (pid == 0) {
            if (bits != 0)
                claim(&sc, i, 0, 0, false);
        } else if (dead || stale_at(&sc, pid, seen)) {
            claim(&sc, i, gen, pid, dead);
        }
    }
    return (int)sc.n;
}

int vigil_failover_claim_dead(vigil_hb *hb, uint32_t slot, uint64_t gen, vigil_reclaim *out)
{
    if (slot >= hb->capacity || gen == 0)
        return 0;
    uint32_t pid = atomic_load_explicit(&hb->slots[slot].pid, memory_order_relaxed);
    if (pid == 0)
        return 0;
    struct scan sc = {
        .hb = hb,
        .j = hb->journal,
        .epoch = atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire),
        .probe = true,
        .out = out,
        .max = 1,
    };
    /* THE CLAIM, steps 2 to 6, with the verdict "dead" made about
     * registration `gen`: claim() takes the slot only while it still
     * holds that registration (and this pid), so nothing changed since. */
    claim(&sc, slot, gen, pid, true);
    return (int)sc.n;
}

int vigil_failover_scan(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max)
{
    return scan_table(hb, grace_epochs, out, max, false);
}

int vigil_failover_scan_probe(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max)
{
    return scan_table(hb, grace_epochs, out, max, true);
}
