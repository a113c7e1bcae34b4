/* SPDX-License-Identifier: MIT */
/*
 * The epoch barrier's waits: arrival, the release rule, the gate that
 * commits a release, withdrawal on timeout, and the spin, yields and
 * futex sleeps between. The file layout is told in src/barrier.c.
 *
 * The release rule, per SPEC: live = live slots of the heartbeat table;
 * rec_live = records stamped with this epoch whose slot is still live and
 * still holds the registration that arrived (THE RECORD, src/barrier.c);
 * unbound = the state word's count, which only unbound handles add to. A
 * round releases when
 *     live - rec_live <= unbound       (wait)
 *     unbound + rec_live >= quorum     (wait_quorum)
 * With no bound handle this is the reference's `arrived >= live`; with
 * only bound handles it is "every live slot has an arrival record".
 *
 * THE PROTOCOL (model: model/barrier.pml; the flaws of the one before it,
 * a stale judgement releasing over a withdrawal and a bound arrival killed
 * between its count and its record, are model/barrier_old.pml's
 * counterexamples; tests: test_barrier_procs.c, test_barrier.c).
 *
 *   Arrival. Unbound: one CAS adding 1 to the state's count at the epoch.
 *   Bound: one 16-byte CAS of the record to (epoch, gen), and nothing
 *   else, so no kill can leave half an arrival: before the CAS it has not
 *   arrived, after it the record stands for it until its heartbeat lapses
 *   or its registration is reclaimed.
 *
 *   Judgement and commit. The gate word is (epoch, COMMITTED, withdrawals).
 *   A judge loads the gate g first (installing (E, 0) over an older
 *   round's), then the state and the records, and judges. A complete round
 *   is committed by one CAS of the gate from g to g | COMMITTED: it fails
 *   if anyone withdrew since g was loaded. The committer then moves the
 *   state to (E + 1, 0) and gets VIGIL_SERIAL. Anyone who finds the gate
 *   committed at its epoch finishes that move (a committer killed between
 *   the two leaves no one stuck). A finisher gets 0: the round's
 *   VIGIL_SERIAL was the committer's, so when the committer dies between
 *   its commit and its return nobody gets it for that round (a committer
 *   only paused still returns it when it resumes, and so must be the only
 *   one that can).
 *
 *   Ahead. A caller waiting for a later round than the state's (it called
 *   with my_epoch > E) neither arrives at nor judges round E, but it
 *   looks at the gate on every wake and finishes a committed round E like
 *   a waiter of E. So whoever waits, at whatever round, a committed round
 *   is finished: with the committer and every waiter of E killed, the
 *   callers ahead move the state on (model/barrier.pml, run `ahead`; the
 *   steps before, which only slept, are its `ahead_old` counterexample).
 *
 *   Withdrawal. A waiter that times out first takes its arrival back
 *   (clears its record, or takes 1 off the count), then bumps the gate's
 *   withdrawal count by CAS. If the gate is committed first, a judgement
 *   may have counted it: the round is released and it returns 0. If its
 *   bump lands first, every judgement that loaded the gate before it (and
 *   so may have counted it) fails its commit; every later one loads the
 *   state after the take-back. VIGIL_ETIMEDOUT therefore means no release
 *   counted this caller, with no time-based escape. The gate, the state,
 *   the records: every access in this argument is seq_cst, so one total
 *   order decides each pair.
 *
 *   Orders only an argument protects. x86-64 compiles every load the same
 *   whatever its order, and every read-modify-write as a locked, fully
 *   fenced instruction, so on the machines the tests run on these orders
 *   could be weakened with no test failing; each is argued where it
 *   stands: the Dekker pair of `sleepers` and the state (sleep_once,
 *   wake_sleepers); the stamp's seq_cst load in the tally against an
 *   arrival's CAS (the first paragraph above); the gen-stamp-gen read of a
 *   record (rec_gen_at) and the slot's SeqLock snapshot (slot_look), whose
 *   acquire orders keep the three loads, and the fields before the second
 *   version load, in program order; and the acquire loads of the record
 *   before the registration check in arrive_bound. make mutate lists
 *   their weakenings as argued, naming the place.
 */
#define _GNU_SOURCE
#include "barrier_internal.h"
#include "spin_internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Bounds every CAS loop: legitimate contention never comes near it, a peer
 * scribbling the state word in a loop gets VIGIL_EBUSY instead of a hang. */
#define CAS_TRIES (1u << 20)

void (*vigil_barrier_hook)(int point);

/* Not FUTEX_PRIVATE_FLAG: the word is in a file mapped by many processes,
 * and the kernel must key the wait on the page, not on this mm. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
    struct timespec ts = { (time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u) };
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- counting ----------------------------------------------------------- */

struct tally {
    uint32_t live;     /* live slots (only for the all-live rule) */
    uint32_t rec_live; /* records stamped with the epoch, slot live and still the registration that arrived */
};

/* One pass over the records and, for the all-live rule, the whole table.
 * The heartbeat words are relaxed: liveness is a moment's estimate. A
 * slot without a record of the round costs its stamp's load and, for the
 * all-live rule, the two words of its liveness, as before records named
 * registrations; only a stamped record costs the gen loads and the
 * slot's SeqLock snapshot. */
static void tally(const vigil_barrier *b, uint32_t epoch, bool all, struct tally *t)
{
    const struct vigil_hb_slot *s = b->hb->slots;
    struct live_rule lr = live_rule(b);
    uint32_t live = 0, rec_live = 0;
    for (uint32_t i = 0; i < b->capacity; i++) {
        /* seq_cst: against the arrival's CAS, so that of two bound
         * arrivals judging at once at least one sees the other's record,
         * and against the withdrawal's clear (see THE PROTOCOL). */
        bool stamped = atomic_load_explicit(&b->records[i].ep, memory_order_seq_cst) == rec_make(epoch);
        if (!stamped) {
            if (all) {
                uint32_t pid = atomic_load_explicit(&s[i].pid, memory_order_relaxed);
                live += is_live(lr, pid, atomic_load_explicit(&s[i].last_seen_epoch, memory_order_relaxed));
            }
            continue;
        }
        uint64_t g = rec_gen_at(&b->records[i], epoch);
        struct slot_look l = slot_look(&s[i]);
        uint32_t lv = is_live(lr, l.pid, l.seen);
        live += lv;
        rec_live += lv & (g != 0 && g == l.gen);
    }
    t->live = live, t->rec_live = rec_live;
}

/* Whether state s (at its epoch) satisfies rule r. */
static bool complete(const vigil_barrier *b, uint64_t s, struct rule r)
{
    uint32_t unbound = st_arrived(s);
    struct tally t;
    tally(b, st_epoch(s), r.all, &t);
    if (r.quorum && (uint64_t)unbound + t.rec_live < r.quorum)
        return false;
    return !r.all || t.live - t.rec_live <= unbound;
}

/* ---- the gate and the release ------------------------------------------- */

static void wake_sleepers(vigil_barrier *b)
{
    struct vigil_barrier_header *h = b->hdr;
    /*
     * If anyone may be asleep, bump the futex word and wake them all.
     * Pairs with sleep_once: a waiter raises `sleepers` and then re-reads
     * the state, this releaser moved the state (its seq_cst CAS) and then
     * reads `sleepers`; all seq_cst, so either the waiter sees the new
     * epoch and does not sleep, or this load sees the waiter, and then a
     * waiter that read `wake` before the bump fails FUTEX_WAIT's compare
     * and one already queued is woken. With nobody asleep no bump and no
     * syscall is needed. `sleepers` is a hint: a dead or hostile peer
     * that leaves it high costs a useless syscall, one that zeroes it
     * leaves a sleeper to wake at the end of its slice.
     */
    /* seq_cst: the other half of sleep_once's Dekker pair; ONLY THE
     * ARGUMENT there protects it (a plain mov on x86-64 whatever the order;
     * an acquire load on aarch64 could be satisfied before our CAS of the
     * state is visible, and miss a sleeper that missed our release). */
    if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&h->wake, 1, memory_order_seq_cst);
        futex_wake_all(&h->wake);
    }
}

/* The second half of a committed release: move the state from any value
 * at `epoch` to (epoch + 1, 0). Whoever finds the gate committed does it,
 * so a committer killed halfway leaves no one stuck. `gate` is the
 * committed gate as loaded: its ticket goes into the round's mark first. */
static void finish(vigil_barrier *b, uint32_t epoch, uint64_t gate)
{
    struct vigil_barrier_header *h = b->hdr;
    vigil_barrier__mark(b, epoch, gate); /* THE RELEASE RECORD: the mark, before the move */
    /* seq_cst (so acquire and release): each arrival's writes before the
     * barrier come with the count it left, and go on to every waiter that
     * loads the new epoch; wake_sleepers needs it in the total order too. */
    uint64_t s = atomic_load_explicit(&h->state, memory_order_seq_cst);
    for (unsigned tries = 0; st_epoch(s) == epoch; tries++) {
        if (tries >= CAS_TRIES)
            return; /* a peer rewriting the word in a loop: the waits time out */
        if (atomic_compare_exchange_weak_explicit(&h->state, &s, st_make(epoch + 1, 0),
                                                  memory_order_seq_cst, memory_order_seq_cst)) {
            barrier_hook(BP_MOVED);
            break;
        }
    }
    wake_sleepers(b);
}

enum gate_look { GATE_OPEN, GATE_DONE, GATE_PAST };

/*
 * Loads the gate for `epoch` into *g: GATE_OPEN with a value of this
 * round (one of an older round is replaced by (epoch, 0), but only while
 * the round is still the state's: a late caller must not reset a later
 * round's gate); GATE_DONE when the round is committed or past.
 */
static enum gate_look gate_load(vigil_barrier *b, uint32_t epoch, uint64_t *g)
{
    struct vigil_barrier_header *h = b->hdr;
    /* seq_cst: the first load of a judgement (see THE PROTOCOL). */
    uint64_t v = atomic_load_explicit(&h->gate, memory_order_seq_cst);
    for (unsigned tries = 0; tries < CAS_TRIES; tries++) {
        if (st_epoch(v) == epoch) {
            *g = v;
            return st_arrived(v) & GATE_COMMITTED ? GATE_DONE : GATE_OPEN;
        }
        if (st_epoch(atomic_load_explicit(&h->state, memory_order_seq_cst)) != epoch)
            return GATE_PAST;
        /* Every release of a round commits its gate first, so a CAS from
         * an older round's value cannot land after this round released.
         * seq_cst on success, like every gate change; failure reloads. */
        if (atomic_compare_exchange_weak_explicit(&h->gate, &v, st_make(epoch, 0),
                                                  memory_order_seq_cst, memory_order_seq_cst))
            v = st_make(epoch, 0);
    }
    return GATE_PAST; /* a peer rewriting the word in a loop */
}

/* For a caller ahead of the barrier, which neither arrives at nor judges
 * the round `epoch`: finishes it if its release is committed (a committer
 * killed between its gate CAS and its state move). True when it did. */
static bool finish_committed(vigil_barrier *b, uint32_t epoch)
{
    /* seq_cst, as gate_load's: the commit is seen in the total order. */
    uint64_t g = atomic_load_explicit(&b->hdr->gate, memory_order_seq_cst);
    if (st_epoch(g) != epoch || !(st_arrived(g) & GATE_COMMITTED))
        return false;
    finish(b, epoch, g);
    return true;
}

/* Judges the round and commits it if complete. Returns 1 when this caller
 * released the round, 0 when the round is not complete, -1 when the round
 * has passed or the gate moved under the judgement (look again). */
static int try_release(vigil_barrier *b, uint32_t epoch, struct rule rule, uint64_t binding)
{
    struct vigil_barrier_header *h = b->hdr;
    uint64_t g;
    switch (gate_load(b, epoch, &g)) {
    case GATE_DONE:
        finish(b, epoch, g);
        return -1;
    case GATE_PAST:
        return -1;
    case GATE_OPEN:
        break;
    }
    /* seq_cst: after the gate's load in the total order (THE PROTOCOL). */
    uint64_t s = atomic_load_explicit(&h->state, memory_order_seq_cst);
    if (st_epoch(s) != epoch)
        return -1;
    if (!complete(b, s, rule))
        return 0;
    /* Complete: judge again while writing the judgement down, and commit
     * only what was written (THE RELEASE RECORD, barrier_info.c). Still
     * after the gate's load, so the argument above holds for it. */
    uint64_t ticket;
    if (!vigil_barrier__judge_recorded(b, epoch, s, g, rule.quorum, rule.all, binding, &ticket))
        return 0;
    barrier_hook(BP_JUDGED);
    /* The commit. Of all callers racing to commit a round exactly one CAS
     * succeeds: it gets VIGIL_SERIAL. Fails after any withdrawal since the
     * gate was loaded. It sets COMMITTED and names the record by its
     * ticket (withdrawals are over once committed). seq_cst; failure
     * relaxed: the caller looks again. */
    uint64_t committed = st_make(epoch, GATE_COMMITTED | (uint32_t)(ticket & TICKET_LOW));
    if (!atomic_compare_exchange_strong_explicit(&h->gate, &g, committed, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return -1;
    barrier_hook(BP_COMMITTED);
    finish(b, epoch, committed);
    return 1;
}

/* ---- waiting ------------------------------------------------------------ */

struct waiter {
    uint32_t slot;      /* bound slot or VIGIL_BARRIER_UNBOUND */
    uint64_t gen;       /* the registration bound, 0 unbound */
    uint64_t deadline;  /* monotonic ns; UINT64_MAX = none */
    unsigned spun;      /* the spin and yield phases are done */
    uint64_t slice;     /* the last sleep's length */
    uint64_t hb_epoch;  /* heartbeat epoch when last looked at */
    uint64_t hb_since;  /* when hb_epoch was first seen; 0 = not yet */
    unsigned quiet;     /* wakes in a row that found no release */
};

/* A bound waiter is alive: it beats its slot, but only while the slot
 * still holds the registration it bound (a slot reclaimed and registered
 * again, by anyone, is not ours to keep alive). vigil_slot_gen is seq_cst:
 * checked after our record's CAS, it is ordered against a reclaim's
 * locked change of the gen (heartbeat_internal.h). */
static inline bool still_ours(const vigil_barrier *b, const struct waiter *w)
{
    return vigil_slot_gen(&b->hb->slots[w->slot]) == w->gen;
}

/* The binding of the handle now: one word, so a bind racing a wait gives
 * one whole binding or the other. Relaxed: nothing travels with it. */
static inline void bound_of(const vigil_barrier *b, uint32_t *slot, uint64_t *gen)
{
    uint64_t bound = atomic_load_explicit(&b->bound, memory_order_relaxed);
    *gen = bound >> BOUND_SLOT_BITS;
    *slot = *gen ? (uint32_t)(bound & ((UINT64_C(1) << BOUND_SLOT_BITS) - 1)) : VIGIL_BARRIER_UNBOUND;
}

/*
 * A bound arrival (THE RECORD, src/barrier.c): one 16-byte CAS of the
 * record to (epoch, gen), from the value last read, made only once the
 * slot has been seen to hold our registration after that value was read.
 * Had the value been a later registration's record, that registration
 * would have existed before the check, and the check would have failed
 * (a slot's gen never returns to an old one); and a record that changes
 * after the read fails the CAS. So a stale handle never writes over its
 * successor's record. 0 arrived; VIGIL_ELOST when our registration is
 * gone (before the CAS: nothing written; after it: the record names a gen
 * no judge counts); VIGIL_EBUSY when a peer kept rewriting the record.
 */
static int arrive_bound(vigil_barrier *b, const struct waiter *w, uint32_t epoch)
{
    vigil_barrier_record *r = &b->records[w->slot];
    /* Acquire: both read before the check below. A torn pair only fails
     * the CAS, which then gives the record whole. */
    uint64_t ep = atomic_load_explicit(&r->ep, memory_order_acquire);
    uint64_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
    for (unsigned tries = 0;; tries++) {
        if (!still_ours(b, w))
            return VIGIL_ELOST;
        if (tries == 0)
            barrier_hook(BP_RECORDING); /* checked, not yet recorded */
        if (rec_cas(r, &ep, &g, rec_make(epoch), w->gen))
            break;
        if (tries >= CAS_TRIES)
            return VIGIL_EBUSY;
    }
    barrier_hook(BP_RECORDED);
    /* Reclaimed while we arrived: our record counts for no one; say so. */
    return still_ours(b, w) ? 0 : VIGIL_ELOST;
}

static inline void keep_beating(vigil_barrier *b, const struct waiter *w)
{
    if (w->slot != VIGIL_BARRIER_UNBOUND && still_ours(b, w))
        vigil_hb_beat(b->hb, w->slot);
}

/* A sleeping waiter wakes at least this often to beat its slot and to see
 * a peer leave; more often once it has learnt a fast tick interval. On
 * this VM a timed futex sleep costs 20-120 us of CPU per wake whatever
 * vigil does, so fewer wakes is the only saving. */
#define SLICE_MIN_NS   200000ull   /* 0.2 ms */
#define SLICE_FIRST_NS 1000000ull  /* 1 ms */
#define SLICE_MAX_NS   50000000ull /* 50 ms */

/*
 * Learns the tick interval from the heartbeat epoch and sleeps grace/3 of
 * it: a bound sleeper's slot is then at most about grace/3 + 1 epochs old
 * when it beats again, inside the grace window with a margin for a late
 * wake (grace 1 wakes three times a tick), and a dead peer is seen to
 * have aged out within the same fraction of its grace window. Until the
 * epoch has been seen to move, the slice doubles from 1 ms to the cap.
 */
static uint64_t next_slice(vigil_barrier *b, struct waiter *w, uint64_t now)
{
    uint64_t e = vigil_hb_epoch(b->hb);
    if (w->hb_since == 0) {
        w->hb_epoch = e;
        w->hb_since = now;
    } else if (e != w->hb_epoch) {
        /* Unsigned: a heartbeat epoch moved backwards by a scribbler gives
         * a huge difference, a tiny estimate, and the shortest slice. */
        uint64_t est = (now - w->hb_since) / (e - w->hb_epoch);
        /* Relaxed, here and below: a hint the handle's threads share; it
         * guards no other data. */
        atomic_store_explicit(&b->tick_ns, est ? est : 1, memory_order_relaxed);
        w->hb_epoch = e;
        w->hb_since = now;
    }
    uint64_t est = atomic_load_explicit(&b->tick_ns, memory_order_relaxed);
    uint64_t slice;
    if (est && now - w->hb_since <= 2 * est) {
        uint64_t g = b->grace < 1 ? 1 : b->grace > 1000 ? 1000 : b->grace;
        slice = (est < SLICE_MAX_NS ? est : SLICE_MAX_NS) * g / 3;
    } else /* unknown, or the ticker has gone quiet: back off */
        slice = w->slice ? w->slice * 2 : SLICE_FIRST_NS;
    if (slice < SLICE_MIN_NS)
        slice = SLICE_MIN_NS;
    if (slice > SLICE_MAX_NS)
        slice = SLICE_MAX_NS;
    w->slice = slice;
    return slice;
}

/* Sleeps in the kernel until a release bumps `wake` or the slice ends. */
static void sleep_once(vigil_barrier *b, uint32_t epoch, uint64_t ns)
{
    struct vigil_barrier_header *h = b->hdr;
    /*
     * See wake_sleepers for the pairing of these three seq_cst accesses.
     * ONLY THE ARGUMENT PROTECTS THESE ORDERS: on x86-64 a locked add is a
     * full fence whatever its order, and every load is a plain mov, so a
     * relaxed add of `sleepers` or a weaker load of the state compile to
     * the same code and no test here can fail. The argument: this is a
     * Dekker pair (we write `sleepers` then read the state; the releaser
     * writes the state then reads `sleepers`), which needs both writes
     * before both reads in one total order, that is seq_cst on all four.
     * With the add relaxed, a processor that keeps stores in a buffer
     * (aarch64, POWER) may let our state load pass it: we see the old
     * epoch, the releaser sees no sleeper, nobody bumps `wake`, and we
     * sleep through the release until the slice ends (bounded, but a lost
     * wake). make mutate lists it as argued (barrier_sleepers_relaxed).
     */
    uint32_t v = atomic_load_explicit(&h->wake, memory_order_seq_cst);
    atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
    if (st_epoch(atomic_load_explicit(&h->state, memory_order_seq_cst)) == epoch)
        futex_wait(&h->wake, v, ns);
    /* Relaxed: leaving orders nothing; a late decrement costs a releaser
     * one useless wake. */
    atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_relaxed);
}

/*
 * Measured on 2 cores with 4 threads (VIGIL_BARRIER_SPIN, _YIELDS in
 * barrier_internal.h): sleeping at once loses to pthread_barrier_t about 2.4x, and
 * every 32 pause instructions of spin (about 1 us here) cost more than
 * they save, since the peer that must arrive often shares the spinner's
 * core. What wins is a brief spin (8 pauses, for a peer about to arrive on
 * the other core) and a few sched_yield()s, which hand the core to a peer
 * that still has to arrive: with 4 yields a round almost never needs the
 * futex at all, and no FUTEX_WAKE either, since nobody sleeps.
 */

/*
 * Waits until the state's epoch is no longer `epoch`, the deadline passes,
 * or it is time to judge the round again (a peer may have aged out).
 * Returns the state as last loaded; *timed_out when the deadline passed.
 * First a brief spin, then a few sched_yield()s, then bounded futex sleeps;
 * a bound handle beats its slot on every wake.
 */
static uint64_t await_change(vigil_barrier *b, struct waiter *w, uint32_t epoch, bool *timed_out)
{
    struct vigil_barrier_header *h = b->hdr;
    uint64_t s = atomic_load_explicit(&h->state, memory_order_acquire);
    *timed_out = false;
    /* The spin and yields, once per wait; not for a wait whose deadline
     * has already passed (a timeout of 0 is one attempt). */
    if (!w->spun && (w->deadline == UINT64_MAX || vigil_now_ns() < w->deadline)) {
        w->spun = 1;
        for (unsigned i = 0; i < VIGIL_BARRIER_SPIN; i++) {
            s = atomic_load_explicit(&h->state, memory_order_acquire);
            if (st_epoch(s) != epoch)
                return s;
            vigil_cpu_relax();
        }
        for (unsigned i = 0; i < VIGIL_BARRIER_YIELDS; i++) {
            sched_yield();
            s = atomic_load_explicit(&h->state, memory_order_acquire);
            if (st_epoch(s) != epoch)
                return s;
        }
        keep_beating(b, w);
        return s;
    }
    uint64_t now = vigil_now_ns();
    if (now >= w->deadline) {
        *timed_out = true;
        return atomic_load_explicit(&h->state, memory_order_acquire);
    }
    uint64_t ns = next_slice(b, w, now);
    if (w->deadline - now < ns)
        ns = w->deadline - now;
    /* Wakes that find the epoch unchanged are expected once per slice; a
     * peer flipping `wake` in a loop makes FUTEX_WAIT return at once, and
     * after a few of those in a row the waiter sleeps out its slice
     * instead, so a scribbled word never becomes a spin. */
    if (w->quiet > 16) {
        struct timespec ts = { 0, (long)ns };
        nanosleep(&ts, NULL);
        w->quiet = 0;
    } else {
        sleep_once(b, epoch, ns);
    }
    s = atomic_load_explicit(&h->state, memory_order_acquire);
    if (st_epoch(s) == epoch && vigil_now_ns() - now < ns / 2)
        w->quiet++;
    else
        w->quiet = 0;
    keep_beating(b, w);
    return s;
}

/*
 * A waiter that times out withdraws its arrival: it never helps release a
 * round it has left (THE PROTOCOL, "Withdrawal"). A waiter that dies after
 * arriving cannot take anything back: an unbound one stays in the count
 * until the round releases, an anonymous arrival that may stand in for a
 * live peer that has not come yet (the reference's rule); a bound one
 * leaves its record, and once its heartbeat lapses the rule no longer
 * counts it, so it stands in for no one. The release resets the count to
 * 0 and stale records stop matching the new epoch.
 */
static int withdraw(vigil_barrier *b, uint32_t epoch, uint32_t slot, uint64_t gen)
{
    struct vigil_barrier_header *h = b->hdr;
    barrier_hook(BP_WITHDRAWING);
    if (slot != VIGIL_BARRIER_UNBOUND) {
        /* Our own (epoch, gen) to (0, gen), keeping the gen (a record's
         * never decreases). A locked CAS, so before the gate's bump in the
         * total order; failing, the record is not ours and stays. */
        uint64_t ep = rec_make(epoch), g = gen;
        rec_cas(&b->records[slot], &ep, &g, 0, gen);
    } else {
        /* Acquire on failure too: a new epoch seen here is a return of 0,
         * the barrier passed, and the releaser's writes must come with it. */
        uint64_t s = atomic_load_explicit(&h->state, memory_order_acquire);
        for (unsigned tries = 0;; tries++) {
            if (st_epoch(s) != epoch)
                return 0; /* released before we could leave */
            if (st_arrived(s) == 0)
                break;    /* a scribbled count: nothing to take back */
            if (atomic_compare_exchange_weak_explicit(&h->state, &s, s - 1, memory_order_seq_cst,
                                                      memory_order_acquire))
                break;
            if (tries >= CAS_TRIES)
                return VIGIL_EBUSY;
        }
    }
    barrier_hook(BP_WITHDRAWN);
    uint64_t g;
    for (unsigned tries = 0; tries < CAS_TRIES; tries++) {
        switch (gate_load(b, epoch, &g)) {
        case GATE_DONE:
            finish(b, epoch, g); /* committed before our bump: we passed */
            return 0;
        case GATE_PAST:
            return 0;
        case GATE_OPEN:
            break;
        }
        if ((st_arrived(g) & ~GATE_COMMITTED) == ~GATE_COMMITTED)
            return VIGIL_EBUSY; /* 2^31 - 1 withdrawals in one round: a scribble */
        /* seq_cst: after our take-back, and ordered against every commit
         * (THE PROTOCOL). Failure relaxed: gate_load reloads. */
        if (atomic_compare_exchange_strong_explicit(&h->gate, &g, g + 1, memory_order_seq_cst,
                                                    memory_order_relaxed)) {
            /* Withdrawn for good. Relaxed: a statistic for monitoring,
             * outside the protocol; nothing is read through it. */
            atomic_fetch_add_explicit(&h->withdrawals, 1, memory_order_relaxed);
            return VIGIL_ETIMEDOUT;
        }
    }
    return VIGIL_EBUSY;
}

/* rule: what releases the round (struct rule). timeout_ns UINT64_MAX: no deadline.
 * kept NULL: a timeout withdraws the arrival. Non-NULL: a wait in slices
 * (vigil_barrier_wait_slice): *kept says the caller's arrival already
 * stands from an earlier slice, and a slice that ends keeps it and sets
 * *kept. To the protocol a caller between slices is a waiter paused after
 * arriving, a case the model already covers. passed, if not NULL, is set
 * when the call returns 0 because the round passed before the caller's
 * arrival was in it (vigil_barrier_start then tries the next). */
static int barrier_wait(vigil_barrier *b, uint32_t my_epoch, struct rule rule, uint64_t timeout_ns,
                        int *kept, bool *passed)
{
    struct vigil_barrier_header *h = b->hdr;
    struct waiter w = { .deadline = UINT64_MAX };
    bound_of(b, &w.slot, &w.gen);
    uint64_t binding = w.gen ? w.gen << BOUND_SLOT_BITS | w.slot : 0; /* for the release record */
    keep_beating(b, &w);

    /* An epoch that has already passed returns at once. */
    uint64_t s = atomic_load_explicit(&h->state, memory_order_acquire);
    if (ep_diff(my_epoch, st_epoch(s)) < 0) {
        if (passed)
            *passed = true;
        return 0;
    }
    if (rule.quorum == 0 && !(kept && *kept) && vigil_barrier_live_peers(b) == 0)
        return VIGIL_ENOPEERS; /* (a resumed wait goes on to judge its round) */
    if (timeout_ns != UINT64_MAX) {
        uint64_t now = vigil_now_ns();
        w.deadline = timeout_ns < UINT64_MAX - now ? now + timeout_ns : UINT64_MAX - 1;
    }

    /* Early: the barrier has not reached my_epoch yet. Sleep through the
     * releases before it; nothing is counted until the round is ours. A
     * round before ours whose release was committed by a caller killed
     * before it moved the state is finished here, as any waiter of that
     * round would (THE PROTOCOL, "Ahead"). */
    while (ep_diff(my_epoch, st_epoch(s)) > 0) {
        bool timed_out;
        w.spun = 1; /* no point spinning for a whole round */
        s = await_change(b, &w, st_epoch(s), &timed_out);
        if (ep_diff(my_epoch, st_epoch(s)) > 0 && finish_committed(b, st_epoch(s)))
            s = atomic_load_explicit(&h->state, memory_order_acquire);
        if (ep_diff(my_epoch, st_epoch(s)) < 0) {
            if (passed)
                *passed = true;
            return 0;
        }
        if (timed_out && st_epoch(s) != my_epoch)
            return VIGIL_ETIMEDOUT;
    }
    w.spun = 0;
    w.slice = 0;

    /*
     * Arrival (THE PROTOCOL). A slot that no longer holds the bound
     * registration (vacated by failover, say, and perhaps registered
     * again) is VIGIL_ELOST, and nothing of its successor's is touched.
     * Bound: arrive_bound. Unbound: one CAS adding 1 at our epoch; failing means
     * another caller arrived, withdrew or released in between, retry with
     * the value it left. Release: the caller's writes before the barrier
     * travel with the count to whoever releases the round; acquire on
     * failure: a released round's writes come with the return of 0.
     * seq_cst: the judgements' loads of the state are ordered against it.
     */
    if (kept && *kept) {
        /* Arrived in an earlier slice: the record or the count stands. */
        if (w.slot != VIGIL_BARRIER_UNBOUND && !still_ours(b, &w))
            return VIGIL_ELOST;
        s = atomic_load_explicit(&h->state, memory_order_seq_cst);
    } else if (w.slot != VIGIL_BARRIER_UNBOUND) {
        /* The CAS is seq_cst (see tally); it is also the release that
         * hands our writes before the barrier to the judge that counts
         * the record. */
        int err = arrive_bound(b, &w, my_epoch);
        if (err < 0)
            return err;
        s = atomic_load_explicit(&h->state, memory_order_seq_cst);
        if (passed && st_epoch(s) != my_epoch)
            *passed = true; /* released while we were arriving */
    } else {
        for (unsigned tries = 0;; tries++) {
            if (st_epoch(s) != my_epoch) {
                if (passed)
                    *passed = true;
                return 0; /* released while we were arriving */
            }
            if (st_arrived(s) == UINT32_MAX)
                return -EOVERFLOW; /* only a scribbled file gets here */
            if (atomic_compare_exchange_weak_explicit(&h->state, &s, s + 1, memory_order_seq_cst,
                                                      memory_order_acquire)) {
                s = s + 1;
                break;
            }
            if (tries >= CAS_TRIES)
                return VIGIL_EBUSY;
        }
    }
    if (kept)
        *kept = 1;

    /* Judge the round, then wait for a change and judge again. Only an
     * arrival (judged by the arriver) or a peer leaving the live set (seen
     * by a sleeper on its next wake) can complete a round. */
    unsigned lost = 0;
    for (;;) {
        if (st_epoch(s) != my_epoch)
            return 0;
        int r = try_release(b, my_epoch, rule, binding);
        if (r == 1)
            return VIGIL_SERIAL;
        s = atomic_load_explicit(&h->state, memory_order_acquire);
        /* Lost to a moving gate: judge again at once, a bounded number of
         * times, then sleep a slice like any waiter. */
        if (r < 0 && ++lost < 64)
            continue;
        lost = 0;
        bool timed_out;
        s = await_change(b, &w, my_epoch, &timed_out);
        /* Reclaimed while we waited (stalled past the grace window, say):
         * a stale actor, told. Our record names a gen no judge counts any
         * more, so there is nothing to take back. */
        if (st_epoch(s) == my_epoch && w.slot != VIGIL_BARRIER_UNBOUND && !still_ours(b, &w))
            return VIGIL_ELOST;
        if (timed_out && st_epoch(s) == my_epoch) {
            /* Judge once more: the deadline does not hide a round that has
             * just completed. */
            if (try_release(b, my_epoch, rule, binding) == 1)
                return VIGIL_SERIAL;
            if (kept)
                return VIGIL_ETIMEDOUT; /* the slice ends; the arrival stays */
            return withdraw(b, my_epoch, w.slot, w.gen);
        }
    }
}


/* ---- the API ------------------------------------------------------------ */

/* A timed wait keeps a deadline even for the longest timeout: UINT64_MAX
 * is barrier_wait's "no deadline", the untimed waits' alone. */
static inline uint64_t timed(uint64_t timeout_ns)
{
    return timeout_ns == UINT64_MAX ? UINT64_MAX - 1 : timeout_ns;
}

int vigil_barrier_wait(vigil_barrier *b, uint32_t my_epoch)
{
    if (!b)
        return -EINVAL;
    return barrier_wait(b, my_epoch, (struct rule){ 0, true }, UINT64_MAX, NULL, NULL);
}

int vigil_barrier_wait_quorum(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum)
{
    if (!b)
        return -EINVAL;
    if (quorum == 0)
        return VIGIL_ERANGE;
    return barrier_wait(b, my_epoch, (struct rule){ quorum, false }, UINT64_MAX, NULL, NULL);
}

int vigil_barrier_wait_timeout(vigil_barrier *b, uint32_t my_epoch, uint64_t timeout_ns)
{
    if (!b)
        return -EINVAL;
    return barrier_wait(b, my_epoch, (struct rule){ 0, true }, timed(timeout_ns), NULL, NULL);
}

int vigil_barrier_wait_quorum_timeout(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum,
                                      uint64_t timeout_ns)
{
    if (!b)
        return -EINVAL;
    if (quorum == 0)
        return VIGIL_ERANGE;
    return barrier_wait(b, my_epoch, (struct rule){ quorum, false }, timed(timeout_ns), NULL, NULL);
}

int vigil_barrier_wait_slice(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t slice_ns,
                             int *arrived)
{
    if (!b || !arrived)
        return -EINVAL;
    int rc = barrier_wait(b, my_epoch, (struct rule){ quorum, quorum == 0 }, timed(slice_ns), arrived, NULL);
    if (rc != VIGIL_ETIMEDOUT)
        *arrived = 0; /* released, or an error: nothing of ours stands */
    return rc;
}

/* vigil_barrier_start in slices: as the wait in slices, the arrival kept
 * between calls, at the round *round names while *arrived is set. A round
 * that passed before a fresh arrival was in it is no start (as in
 * vigil_barrier_start); one that passed while a kept arrival stood in it
 * is the start. */
int vigil_barrier_start_slice(vigil_barrier *b, uint32_t participants, uint64_t slice_ns, int *arrived,
                              uint32_t *round)
{
    if (!b || !arrived || !round)
        return -EINVAL;
    if (participants == 0)
        return VIGIL_ERANGE;
    uint64_t now = vigil_now_ns();
    uint64_t deadline = slice_ns > UINT64_MAX - 1 - now ? UINT64_MAX - 1 : now + slice_ns;
    for (unsigned tries = 0;; tries++) {
        bool resumed = *arrived != 0, passed = false;
        uint32_t e = resumed ? *round : vigil_barrier_epoch(b);
        now = vigil_now_ns();
        int rc = barrier_wait(b, e, (struct rule){ participants, true }, deadline > now ? deadline - now : 0,
                              arrived, resumed ? NULL : &passed);
        if (rc == VIGIL_ETIMEDOUT) {
            if (*arrived)
                *round = e; /* where the arrival stands */
            return rc;
        }
        *arrived = 0;
        if (rc < 0)
            return rc;
        if (!passed) {
            *round = e + 1;
            return rc;
        }
        if (tries >= CAS_TRIES)
            return VIGIL_EBUSY; /* a peer moving the epoch in a loop */
    }
}

int vigil_barrier_withdraw(vigil_barrier *b, uint32_t my_epoch, int *arrived)
{
    if (!b || !arrived)
        return -EINVAL;
    if (!*arrived)
        return VIGIL_ETIMEDOUT; /* nothing stands: nothing to take back */
    uint32_t slot;
    uint64_t gen;
    bound_of(b, &slot, &gen); /* as in barrier_wait */
    int rc = withdraw(b, my_epoch, slot, gen);
    if (rc == 0 || rc == VIGIL_ETIMEDOUT)
        *arrived = 0;
    return rc;
}

/*
 * The safe start of a group (THE START): every member calls it once, then
 * waits rounds *first_round, *first_round + 1, ... A member that simply
 * waited from round 0 could see early rounds released before the last
 * member had registered (a peer not yet registered is not live), and then
 * count rounds apart from the others. Here the round the barrier is at is
 * waited by two rules at once: a quorum of `participants`, so it releases
 * only once that many have arrived at it, and the all-live rule, so a
 * caller that joins a group already under way never releases the group's
 * round before every live member has come to it. Every member leaves it
 * knowing the same next round. A round that passed before the caller's arrival was in it
 * (more callers than participants, or a member joining a group already
 * under way) is not a start: the caller tries the round the barrier is at
 * now, so whatever it returns, it is in step with the others.
 */
int vigil_barrier_start(vigil_barrier *b, uint32_t participants, uint64_t timeout_ns, uint32_t *first_round)
{
    if (!b || !first_round)
        return -EINVAL;
    if (participants == 0)
        return VIGIL_ERANGE;
    uint64_t now = vigil_now_ns();
    uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - 1 - now ? UINT64_MAX : now + timeout_ns;
    for (unsigned tries = 0;; tries++) {
        uint32_t e = vigil_barrier_epoch(b);
        barrier_hook(BP_START_READ);
        now = vigil_now_ns();
        uint64_t left = deadline == UINT64_MAX ? UINT64_MAX : deadline > now ? deadline - now : 0;
        bool passed = false;
        int rc = barrier_wait(b, e, (struct rule){ participants, true }, timed(left), NULL, &passed);
        if (rc < 0)
            return rc;
        if (!passed) {
            *first_round = e + 1;
            return rc;
        }
        if (tries >= CAS_TRIES)
            return VIGIL_EBUSY; /* a peer moving the epoch in a loop */
    }
}

int vigil_barrier_wait_info(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t timeout_ns,
                            vigil_barrier_round *info)
{
    if (!b || !info)
        return -EINVAL;
    struct rule rule = { quorum, quorum == 0 };
    int rc = barrier_wait(b, my_epoch, rule, timeout_ns == UINT64_MAX ? UINT64_MAX : timed(timeout_ns), NULL, NULL);
    if (rc == 0 || rc == VIGIL_SERIAL)
        vigil_barrier_round_info(b, my_epoch, info); /* info->kept says whether it was found */
    return rc;
}
