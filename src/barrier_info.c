/* SPDX-License-Identifier: MIT */
/*
 * THE RELEASE RECORD: who each release of the barrier counted and who it
 * left out (vigil_barrier_wait_info(3); model: model/barrier_info.pml;
 * tests: test_barrier_info.c). The layout is told in src/barrier.c.
 *
 * Only the judgement that releases a round knows whom it counted, and it
 * may be killed or paused at any step, or resume after later rounds; any
 * number of judgements of one round race, and one commits. So:
 *
 *   Record. A judgement that finds the round complete takes a ticket (one
 *   fetch_add of the release counter: a ticket never recurs) and, if the
 *   gate is still the one it judged under after the ticket (so tickets
 *   follow the rounds: no later round's judgement holds an earlier
 *   ticket than a judge that goes on), writes itself into place
 *   ticket mod RELEASE_PLACES: first the place's `round` pair (the claim),
 *   then one entry per slot it counted or left out, then the `serial` and
 *   `counts` pairs. Each pair is one 16-byte CAS that replaces only a pair
 *   of an older ticket, so a judge that resumes after a later ticket took
 *   its place changes nothing of it (its own pairs elsewhere carry its
 *   ticket, which no reader asks for), and stops writing. The writing
 *   pass is the judgement: it commits only if that pass finds the round
 *   complete. Without the 16-byte CAS nothing is written: the commit
 *   names ticket 0, which no place holds.
 *
 *   Commit. The gate's CAS sets COMMITTED and the ticket's low 31 bits
 *   (barrier_wait.c, try_release): of the judgements racing, the one that
 *   commits names its own record, written whole before its CAS.
 *
 *   Mark. Whoever finishes a committed round (the committer, or anyone
 *   who finds the gate committed) first copies the gate into the round's
 *   mark, by CAS from a mark of an older round, then moves the state. So
 *   once the state has passed a round, its mark names the committed
 *   record, until the round RELEASE_MARKS later takes the mark.
 *
 *   Read. The round's mark, the place its ticket names: the `round` pair
 *   must carry that round and a ticket with those low bits; every other
 *   pair and entry is read only with exactly that ticket; then the
 *   `round` pair again (a later ticket claims it before it writes anything
 *   else) and the mark again, unchanged. A pair is read ticket, value,
 *   ticket, as rec_gen_at reads a record: a pair holds a ticket once, so
 *   the same ticket on both sides means the value between is its own.
 *
 * Every access here is a locked instruction or a seq_cst or acquire load:
 * the commit's CAS publishes the record, the mark's CAS follows a load of
 * the committed gate, and a reader's load of the moved state, the mark and
 * the pairs follow in that order.
 */
#define _GNU_SOURCE
#include "barrier_internal.h"

#include <errno.h>

#define CAS_TRIES  (1u << 20) /* as barrier_wait.c: a scribbler gets no hang */
#define PAIR_TRIES 64u        /* a pair's CAS; honest contention on a pair is one rival */

/* Writes (value, ticket) over a pair of an older ticket: 1 written, 0 a
 * later ticket holds it (this judge is stale), -1 a peer kept rewriting
 * it (a scribbled file: the judgement stops writing). */
static int pair_put(vigil_release_pair *p, uint64_t value, uint64_t ticket)
{
    /* Relaxed: a torn pair only fails the CAS, which then gives it whole. */
    uint64_t v = atomic_load_explicit(&p->value, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_relaxed);
    for (unsigned tries = 0; tries < PAIR_TRIES; tries++) {
        if (t >= ticket)
            return t == ticket;
        if (vigil__cas16(p, &v, &t, value, ticket))
            return 1;
    }
    return -1;
}

/* The value of pair p if it holds `ticket`. Both ticket loads acquire:
 * a later judgement's ticket seen in either orders the reader's next
 * loads after that judgement's claim of the place (its `round` pair,
 * written before any of its entries), so the final check sees it. */
static bool pair_get(const vigil_release_pair *p, uint64_t ticket, uint64_t *value)
{
    uint64_t t1 = atomic_load_explicit(&p->ticket, memory_order_acquire);
    uint64_t v = atomic_load_explicit(&p->value, memory_order_acquire);
    uint64_t t2 = atomic_load_explicit(&p->ticket, memory_order_acquire);
    *value = v;
    return t1 == ticket && t2 == ticket;
}

/* Takes a ticket and claims its place: true with *t the ticket, false
 * when no place could be had. The gate is checked after the ticket: a
 * judge whose gate moved after its ticket is stale and takes no place.
 * So every judgement of a later round (which loaded the moved gate
 * before its own ticket) holds a later ticket than any judge that claims,
 * and a claim, which replaces only an older ticket's pair, never evicts
 * a later round's record: a judge paused before its ticket, or between
 * ticket and claim, changes nothing kept when it resumes. The check
 * before the ticket only spares a ticket. A place a later ticket holds
 * means eight judgements overtook this one: a fresh ticket, checked the
 * same way, names another place. */
static bool claim_place(vigil_barrier *b, uint32_t epoch, uint64_t s, uint64_t gate, uint64_t *t)
{
    for (unsigned tries = 0; tries < 4; tries++) {
        /* seq_cst, as every load of the gate (barrier_wait.c). */
        if (atomic_load_explicit(&b->hdr->gate, memory_order_seq_cst) != gate)
            return false;
        barrier_hook(BP_TICKET);
        /* seq_cst: before the gate's load below in the total order, so a
         * later round's judge, whose ticket follows its load of the moved
         * gate, takes a later ticket than one that passes that load. */
        *t = atomic_fetch_add_explicit(&b->rel->tickets, 1, memory_order_seq_cst) + 1;
        if (atomic_load_explicit(&b->hdr->gate, memory_order_seq_cst) != gate)
            return false; /* the gate moved after the ticket: stale */
        struct vigil_release_head *hd = &b->rel->heads[(uint32_t)(*t & TICKET_LOW) % RELEASE_PLACES];
        int put = pair_put(&hd->round, st_make(epoch, st_arrived(s)), *t);
        if (put != 0)
            return put > 0;
    }
    return false;
}

int vigil_barrier__judge_recorded(vigil_barrier *b, uint32_t epoch, uint64_t s, uint64_t gate, uint32_t quorum,
                                  bool all, uint64_t binding, uint64_t *ticket)
{
    /* Without the 16-byte CAS (vigil_barrier_cas16_ok) nothing is
     * recorded: the judgement commits ticket 0, which no place holds, and
     * round_info says VIGIL_EVACANT. */
    uint64_t t = 0;
    bool mine = b->cas16 && claim_place(b, epoch, s, gate, &t);
    barrier_hook(BP_PLACE_CLAIMED);
    uint32_t place = (uint32_t)(t & TICKET_LOW) % RELEASE_PLACES;
    struct vigil_release_head *hd = &b->rel->heads[place];
    vigil_release_pair *ent = b->entries + (size_t)place * b->capacity;
    const struct vigil_hb_slot *slots = b->hb->slots;
    struct live_rule lr = live_rule(b);
    uint32_t live = 0, rec_live = 0, left = 0;
    for (uint32_t i = 0; i < b->capacity; i++) {
        /* seq_cst, as tally's: this pass is the judgement. */
        bool stamped = atomic_load_explicit(&b->records[i].ep, memory_order_seq_cst) == rec_make(epoch);
        uint64_t g = stamped ? rec_gen_at(&b->records[i], epoch) : 0;
        struct slot_look l = slot_look(&slots[i]);
        uint32_t lv = is_live(lr, l.pid, l.seen);
        uint32_t why = 0;
        uint64_t who = l.gen;
        if (stamped || all)
            live += lv;
        if (stamped && lv && g != 0 && g == l.gen) {
            rec_live++;
            why = VIGIL_BARRIER_COUNTED;
        } else if (l.pid != 0 && l.gen != 0) {
            /* Under the all-live rule a live slot with no record of its
             * own was matched by an unbound arrival: not left out. */
            why = !lv ? VIGIL_BARRIER_DEAD : all ? 0 : VIGIL_BARRIER_ABSENT;
        }
        if (!why)
            continue;
        left += why != VIGIL_BARRIER_COUNTED;
        /* A pair a later ticket holds, or one a peer keeps rewriting,
         * ends this judgement's writing: its record is then no one's. */
        if (mine && pair_put(&ent[i], who << ENTRY_WHY_BITS | why, t) <= 0)
            mine = false;
    }
    uint32_t unbound = st_arrived(s);
    if (quorum && (uint64_t)unbound + rec_live < quorum)
        return 0;
    if (all && live - rec_live > unbound)
        return 0;
    if (mine && pair_put(&hd->serial, binding, t) > 0)
        pair_put(&hd->counts, (uint64_t)rec_live << 32 | left, t);
    *ticket = t;
    return 1;
}

void vigil_barrier__mark(vigil_barrier *b, uint32_t epoch, uint64_t gate)
{
    if (st_epoch(gate) != epoch || !(st_arrived(gate) & GATE_COMMITTED))
        return;
    _Atomic uint64_t *mark = &b->rel->marks[epoch % RELEASE_MARKS];
    uint64_t want = st_make(epoch, MARK_VALID | (st_arrived(gate) & TICKET_LOW));
    /* seq_cst, load and CAS: before the state's move in the total order,
     * which a reader loads before the mark. */
    uint64_t v = atomic_load_explicit(mark, memory_order_seq_cst);
    for (unsigned tries = 0; tries < CAS_TRIES && v != want; tries++) {
        /* A mark of this round or a later one stays: a finisher paused
         * since its round was released must not take back the mark. */
        if ((st_arrived(v) & MARK_VALID) && ep_diff(st_epoch(v), epoch) >= 0)
            return;
        if (atomic_compare_exchange_weak_explicit(mark, &v, want, memory_order_seq_cst, memory_order_seq_cst))
            return;
    }
}

/* The pid of registration gen of slot i now, 0 when it is gone. */
static uint32_t pid_of(const vigil_barrier *b, uint32_t i, uint64_t gen)
{
    struct slot_look l = slot_look(&b->hb->slots[i]);
    return l.gen == gen ? l.pid : 0;
}

int vigil_barrier_round_info(const vigil_barrier *b, uint32_t round, vigil_barrier_round *info)
{
    if (!b || !info)
        return -EINVAL;
    info->round = round;
    info->kept = 0;
    info->serial_slot = 0, info->serial_gen = 0;
    info->counted = info->unbound = info->left_out = 0;
    /* seq_cst, then the mark: a state past the round means its mark was
     * written first (vigil_barrier__mark, then finish's move). */
    uint64_t s = atomic_load_explicit(&b->hdr->state, memory_order_seq_cst);
    if (ep_diff(st_epoch(s), round) <= 0)
        return VIGIL_EVACANT; /* not released yet */
    _Atomic uint64_t *mark = &b->rel->marks[round % RELEASE_MARKS];
    uint64_t m = atomic_load_explicit(mark, memory_order_seq_cst);
    if (st_epoch(m) != round || !(st_arrived(m) & MARK_VALID))
        return VIGIL_EVACANT; /* a later round's mark: no longer kept */
    uint32_t low = st_arrived(m) & TICKET_LOW; /* 0: committed with nothing recorded */
    const struct vigil_release_head *hd = &b->rel->heads[low % RELEASE_PLACES];
    uint64_t t = atomic_load_explicit(&hd->round.ticket, memory_order_acquire);
    uint64_t rv, serial, counts;
    if (t == 0 || (t & TICKET_LOW) != low || !pair_get(&hd->round, t, &rv) || st_epoch(rv) != round ||
        !pair_get(&hd->serial, t, &serial) || !pair_get(&hd->counts, t, &counts))
        return VIGIL_EVACANT;
    const vigil_release_pair *ent = b->entries + (size_t)(low % RELEASE_PLACES) * b->capacity;
    uint32_t nc = 0, nl = 0;
    for (uint32_t i = 0; i < b->capacity; i++) {
        uint64_t v;
        if (!pair_get(&ent[i], t, &v))
            continue; /* not this judgement's: a slot it neither counted nor left out */
        uint32_t why = (uint32_t)(v & ((1u << ENTRY_WHY_BITS) - 1));
        vigil_barrier_peer p = { .slot = i, .why = why, .gen = v >> ENTRY_WHY_BITS };
        p.pid = pid_of(b, i, p.gen);
        if (why == VIGIL_BARRIER_COUNTED) {
            if (info->counted_peers && nc < info->counted_cap)
                info->counted_peers[nc] = p;
            nc++;
        } else {
            if (info->left_out_peers && nl < info->left_out_cap)
                info->left_out_peers[nl] = p;
            nl++;
        }
    }
    /* Still that judgement's place and still the round's mark: nothing
     * read above was a later judgement's. */
    if (atomic_load_explicit(&hd->round.ticket, memory_order_acquire) != t ||
        atomic_load_explicit(mark, memory_order_acquire) != m)
        return VIGIL_EVACANT;
    /* Every entry the judgement wrote read back: with the checks above,
     * part of the argument (an entry skipped for a later ticket is seen
     * here at the latest), and a scribbled file's guard. */
    if (nc != (uint32_t)(counts >> 32) || nl != (uint32_t)counts)
        return VIGIL_EVACANT;
    uint64_t gen = serial >> BOUND_SLOT_BITS;
    info->serial_slot = gen ? (uint32_t)(serial & ((UINT64_C(1) << BOUND_SLOT_BITS) - 1)) + 1 : 0;
    info->serial_gen = gen;
    info->counted = nc;
    info->left_out = nl;
    info->unbound = st_arrived(rv);
    info->kept = 1;
    return 0;
}
