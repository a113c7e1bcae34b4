/* SPDX-License-Identifier: MIT */
/*
 * The epoch barrier's waits: arrival, the release rule and its CASes,
 * withdrawal on timeout, and the spin, yields and futex sleeps between.
 * The file layout and the round in brief are told in src/barrier.c.
 *
 * The release rule, per SPEC: let live = live slots of the heartbeat table,
 * rec = records stamped with this epoch, rec_live = those whose slot is
 * still live and still owned by the pid that arrived. The unbound arrivals
 * are arrived - rec (clamped at 0). A round releases when
 *     live - rec_live <= unbound       (wait)
 *     unbound + rec_live >= quorum     (wait_quorum)
 * With no bound handle this is the reference's `arrived >= live`; with
 * only bound handles it is "every live slot has an arrival record".
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
    uint32_t rec;      /* records stamped with the epoch, any slot */
    uint32_t rec_live; /* of those, slot live and owned by the recorded pid */
};

/* One pass over the records and, for the all-live rule, the whole table.
 * A record is written just after its arrival's CAS, so it may be missed
 * while in flight; see barrier_wait for why that is safe. The heartbeat
 * words are relaxed: liveness is a moment's estimate. */
static void tally(const vigil_barrier *b, uint32_t epoch, bool all, struct tally *t)
{
    const struct vigil_hb_slot *s = b->hb->slots;
    struct live_rule lr = live_rule(b);
    uint32_t live = 0, rec = 0, rec_live = 0;
    for (uint32_t i = 0; i < b->capacity; i++) {
        /* seq_cst: see withdraw (a plain load on x86). */
        uint64_t r = atomic_load_explicit(&b->records[i], memory_order_seq_cst);
        uint32_t stamped = st_epoch(r) == epoch && st_arrived(r) != 0;
        if (!all && !stamped)
            continue;
        uint32_t pid = atomic_load_explicit(&s[i].pid, memory_order_relaxed);
        uint32_t lv = is_live(lr, pid, atomic_load_explicit(&s[i].last_seen_epoch, memory_order_relaxed));
        live += lv;
        rec += stamped;
        rec_live += stamped & lv & (st_arrived(r) == pid);
    }
    t->live = live, t->rec = rec, t->rec_live = rec_live;
}

/* Whether state s (at its epoch) satisfies the release rule; quorum 0 is
 * the all-live rule. Both filters are necessary conditions of the rule
 * as long as arrived >= rec, which arrival and withdrawal keep (count
 * before record on arrival, record before count on withdrawal); only a
 * scribbled file breaks it, and then the filters only make the barrier
 * wait. */
static bool complete(const vigil_barrier *b, uint64_t s, uint32_t quorum)
{
    uint32_t a = st_arrived(s);
    struct tally t;
    if (quorum) {
        if (a < quorum)
            return false;
        tally(b, st_epoch(s), false, &t);
        uint32_t unbound = a > t.rec ? a - t.rec : 0;
        return (uint64_t)unbound + t.rec_live >= quorum;
    }
    tally(b, st_epoch(s), true, &t);
    if (a < t.live)
        return false;
    uint32_t unbound = a > t.rec ? a - t.rec : 0;
    return t.live - t.rec_live <= unbound;
}

/* ---- release ------------------------------------------------------------ */

/*
 * `releasing` counts the callers judging epoch E for release, so that a
 * waiter withdrawing from E can tell whether a judgement that may still
 * count it is in flight (see withdraw). Tagged with the epoch so a count
 * left by a releaser killed mid-judgement dies with its round. A tag of
 * another epoch is replaced by (E, 1), except by a late releaser whose
 * round has passed (it must not clobber the current round's count): it
 * returns false.
 */
static bool announce(vigil_barrier *b, uint32_t epoch)
{
    _Atomic uint64_t *w = &b->hdr->releasing;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed); /* a first guess for the CAS */
    for (unsigned tries = 0; tries < CAS_TRIES; tries++) {
        uint64_t nv;
        if (st_epoch(v) == epoch) {
            nv = st_arrived(v) == UINT32_MAX ? v : v + 1; /* saturate a scribbled count */
        } else {
            /* A tag ahead of us is a later round's, unless our round is
             * still open (a fresh file at epoch 2^32 - 1, a scribble). */
            if (ep_diff(st_epoch(v), epoch) > 0 &&
                st_epoch(atomic_load_explicit(&b->hdr->state, memory_order_acquire)) != epoch)
                return false;
            nv = st_make(epoch, 1);
        }
        /* seq_cst, like the loads of the judgement that follows and the
         * withdrawer's CAS and load (see withdraw): one total order decides
         * which of the two sees the other. Failure relaxed: it only
         * reseeds v. */
        if (atomic_compare_exchange_weak_explicit(w, &v, nv, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return true;
    }
    /* Only a peer rewriting the word in a loop gets here: not announced,
     * so no judgement may run (and no unannounce may follow). */
    return false;
}

/* Only after a judgement that did not release: once the round is
 * released its count no longer matters (a withdrawer that sees the epoch
 * moved stops looking, and the next round's announcement replaces it). */
static void unannounce(vigil_barrier *b, uint32_t epoch)
{
    _Atomic uint64_t *w = &b->hdr->releasing;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed); /* a first guess for the CAS */
    for (unsigned tries = 0; tries < CAS_TRIES; tries++) {
        if (st_epoch(v) != epoch || st_arrived(v) == 0)
            return;
        /* Release: the judgement's loads are over before a withdrawer can
         * see its count gone. Failure relaxed: it only reseeds v. */
        if (atomic_compare_exchange_weak_explicit(w, &v, v - 1, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

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
    if (atomic_load_explicit(&h->sleepers, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&h->wake, 1, memory_order_seq_cst);
        futex_wake_all(&h->wake);
    }
}

/* Judges the round again under an announcement and tries the release CAS.
 * Returns 1 when this caller released the round, 0 when the round is not
 * complete, -1 when the state moved under the judgement (judge again). */
static int try_release(vigil_barrier *b, uint32_t epoch, uint32_t quorum)
{
    struct vigil_barrier_header *h = b->hdr;
    if (!announce(b, epoch))
        return -1;
    int r = 0;
    /* seq_cst: the judgement's first load (see announce). */
    uint64_t s = atomic_load_explicit(&h->state, memory_order_seq_cst);
    if (st_epoch(s) != epoch) {
        r = -1;
    } else if (complete(b, s, quorum)) {
        /*
         * The release: one CAS from the exact state just judged complete
         * to (epoch + 1, arrived 0). If any arrival or withdrawal moved the
         * state since the load above, the CAS fails and the round is
         * judged again. Of all callers racing to release a round exactly
         * one CAS succeeds: it gets VIGIL_SERIAL. seq_cst (so acq_rel):
         * acquire makes every arrival's writes before it visible to the
         * releaser (each arrival CAS is a release on this word), release
         * hands them and the releaser's own on to every waiter that loads
         * the new epoch; and wake_sleepers needs it in the total order.
         * Failure relaxed: s is not used again, the caller reloads it.
         */
        if (atomic_compare_exchange_strong_explicit(&h->state, &s, st_make(epoch + 1, 0),
                                                    memory_order_seq_cst, memory_order_relaxed)) {
            wake_sleepers(b);
            return 1;
        }
        r = -1;
    }
    unannounce(b, epoch);
    return r;
}

/* ---- waiting ------------------------------------------------------------ */

struct waiter {
    uint32_t slot;      /* bound slot or VIGIL_BARRIER_UNBOUND */
    uint32_t pid;       /* the slot's owner when it was bound */
    uint64_t deadline;  /* monotonic ns; UINT64_MAX = none */
    unsigned spun;      /* the spin and yield phases are done */
    uint64_t slice;     /* the last sleep's length */
    uint64_t hb_epoch;  /* heartbeat epoch when last looked at */
    uint64_t hb_since;  /* when hb_epoch was first seen; 0 = not yet */
    unsigned quiet;     /* wakes in a row that found no release */
};

/* A bound waiter is alive: it beats its slot, but only while the slot is
 * still the one it bound (a slot reclaimed and re-registered by another
 * process is not ours to keep alive). */
static inline bool still_ours(const vigil_barrier *b, const struct waiter *w)
{
    /* Relaxed: a moment's check, like the liveness rule's loads. */
    return atomic_load_explicit(&b->hb->slots[w->slot].pid, memory_order_relaxed) == w->pid;
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
    /* See wake_sleepers for the pairing of these three seq_cst accesses. */
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
 * round it has left.
 *
 * What happens to the arrived count: a waiter that times out takes its 1
 * back off `arrived` by CAS (and a bound one first clears its record), so
 * the count again holds only the callers still waiting. A waiter that dies
 * after arriving cannot take anything back: an unbound one stays in
 * `arrived` until the round releases, an anonymous arrival that may stand
 * in for a live peer that has not come yet (the reference's rule); a bound
 * one leaves its record, and once its heartbeat lapses the rule subtracts
 * it (it is in `rec` but not `rec_live`), so it stands in for no one and
 * the round waits for every live peer. Either way the release resets
 * `arrived` to 0 and stale records stop matching the new epoch.
 *
 * The withdrawal must not race a judgement that still counts it: a
 * releaser may have read our record or the state before our CAS and,
 * after arrivals restored the same state value (ABA), release on it. So
 * after the CAS we look at `releasing`: a releaser that announces after
 * our look sees our withdrawal; one that announced before it we wait out,
 * until it takes its count back (it judged the round incomplete) or the
 * epoch moves (it released; its count is then left to die with the
 * round). The wait is bounded: one killed mid-judgement leaves its count,
 * which we give up on after about 10 ms. If the round was released by
 * then, a judgement may have counted us, and we return 0: the withdrawal
 * is void and the caller passed the barrier. VIGIL_ETIMEDOUT therefore
 * means that no release counted this caller.
 */
static int withdraw(vigil_barrier *b, uint32_t epoch, uint32_t slot, uint32_t pid)
{
    struct vigil_barrier_header *h = b->hdr;
    if (slot != VIGIL_BARRIER_UNBOUND) {
        uint64_t mine = st_make(epoch, pid);
        /* seq_cst: see below. Failure relaxed: a record not ours stays. */
        atomic_compare_exchange_strong_explicit(&b->records[slot], &mine, 0,
                                                memory_order_seq_cst, memory_order_relaxed);
    }
    /* Acquire, and on the CAS's failure too: a new epoch seen here is a
     * return of 0, the barrier passed, so the releaser's writes must come
     * with it as they do with every other load that sees a release. */
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
    /*
     * Record clear, count CAS, this load: all seq_cst, as are a releaser's
     * announcement and the loads of its judgement. If this load misses an
     * announcement, it precedes it in the single total order, and so do
     * our clear and CAS: that releaser's judgement sees us gone. If it
     * sees one (or a later value of the word), we wait for the judgement
     * to end.
     */
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        uint64_t r = atomic_load_explicit(&h->releasing, memory_order_seq_cst);
        if (st_epoch(r) != epoch || st_arrived(r) == 0)
            break;
        if (st_epoch(atomic_load_explicit(&h->state, memory_order_acquire)) != epoch)
            break;
        if (!vigil_backoff(attempt, &deadline))
            break;
    }
    s = atomic_load_explicit(&h->state, memory_order_seq_cst);
    return st_epoch(s) != epoch ? 0 : VIGIL_ETIMEDOUT;
}

/* quorum 0: the all-live rule. timeout_ns UINT64_MAX: no deadline. */
static int barrier_wait(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t timeout_ns)
{
    struct vigil_barrier_header *h = b->hdr;
    /* Relaxed: (pid, slot) is one word, so a bind racing this wait gives
     * one whole pair or the other; nothing else travels with it. */
    uint64_t bound = atomic_load_explicit(&b->bound, memory_order_relaxed);
    struct waiter w = { .slot = (uint32_t)bound, .pid = (uint32_t)(bound >> 32),
                        .deadline = UINT64_MAX };
    keep_beating(b, &w);

    /* An epoch that has already passed returns at once. */
    uint64_t s = atomic_load_explicit(&h->state, memory_order_acquire);
    if (ep_diff(my_epoch, st_epoch(s)) < 0)
        return 0;
    if (quorum == 0 && vigil_barrier_live_peers(b) == 0)
        return VIGIL_ENOPEERS;
    if (timeout_ns != UINT64_MAX) {
        uint64_t now = vigil_now_ns();
        w.deadline = timeout_ns < UINT64_MAX - now ? now + timeout_ns : UINT64_MAX - 1;
    }

    /* Early: the barrier has not reached my_epoch yet. Sleep through the
     * releases before it; nothing is counted until the round is ours. */
    while (ep_diff(my_epoch, st_epoch(s)) > 0) {
        bool timed_out;
        w.spun = 1; /* no point spinning for a whole round */
        s = await_change(b, &w, st_epoch(s), &timed_out);
        if (ep_diff(my_epoch, st_epoch(s)) < 0)
            return 0;
        if (timed_out && st_epoch(s) != my_epoch)
            return VIGIL_ETIMEDOUT;
    }
    w.spun = 0;
    w.slice = 0;

    /*
     * Arrival: one CAS adding 1 at our epoch. Failing means another caller
     * arrived, withdrew or released in between; retry with the value it
     * left. Release: the caller's writes before the barrier travel with
     * the count to whoever releases the round; acquire on failure: a
     * released round's writes come with the return of 0. seq_cst rather
     * than acq_rel only to match the state word's other CASes (the same
     * locked cmpxchg on x86).
     *
     * A bound handle then stamps its slot's record: (epoch, pid of the
     * slot's owner), so a slot that changes hands is not taken for
     * arrived. Count first, record second, so that `arrived` holds every
     * record that stays (rec <= arrived): a releaser that sees the count but
     * not yet the record takes us for an unbound arrival and for a live
     * slot without a record at once, which the rule balances; and a
     * caller killed between the two is simply an unbound caller that died
     * after arriving. (The other order would leave, on such a kill, a
     * record that no count backs, and the round one arrival short for
     * good.) A slot that is no longer the bound owner's (vacated by
     * failover, say) is VIGIL_EVACANT before anything is counted.
     */
    if (w.slot != VIGIL_BARRIER_UNBOUND && !still_ours(b, &w))
        return VIGIL_EVACANT;
    for (unsigned tries = 0;; tries++) {
        if (st_epoch(s) != my_epoch)
            return 0; /* released while we were arriving */
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
    if (w.slot != VIGIL_BARRIER_UNBOUND) {
        /* Release: whoever acquires the record sees the count before it.
         * A relaxed reader may still see the record first for a moment;
         * it then under-counts the unbound arrivals, which only delays a
         * release that this caller judges itself right below. */
        atomic_store_explicit(&b->records[w.slot], st_make(my_epoch, w.pid), memory_order_release);
    }

    /* Judge the round, then wait for a change and judge again. Only an
     * arrival (judged by the arriver) or a peer leaving the live set (seen
     * by a sleeper on its next wake) can complete a round. */
    unsigned lost = 0;
    for (;;) {
        if (st_epoch(s) != my_epoch)
            return 0;
        /* For a quorum the count alone says whether judging is worth it;
         * the all-live rule needs the scan either way. */
        if (quorum ? st_arrived(s) >= quorum : complete(b, s, 0)) {
            int r = try_release(b, my_epoch, quorum);
            if (r == 1)
                return VIGIL_SERIAL;
            s = atomic_load_explicit(&h->state, memory_order_acquire);
            /* Lost to a moving state: judge again at once, a bounded number
             * of times, then sleep a slice like any waiter. */
            if (r < 0 && ++lost < 64)
                continue;
        }
        lost = 0;
        bool timed_out;
        s = await_change(b, &w, my_epoch, &timed_out);
        if (timed_out && st_epoch(s) == my_epoch) {
            /* Judge once more: the deadline does not hide a round that has
             * just completed. */
            if (try_release(b, my_epoch, quorum) == 1)
                return VIGIL_SERIAL;
            return withdraw(b, my_epoch, w.slot, w.pid);
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
    return barrier_wait(b, my_epoch, 0, UINT64_MAX);
}

int vigil_barrier_wait_quorum(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum)
{
    if (!b)
        return -EINVAL;
    if (quorum == 0)
        return VIGIL_ERANGE;
    return barrier_wait(b, my_epoch, quorum, UINT64_MAX);
}

int vigil_barrier_wait_timeout(vigil_barrier *b, uint32_t my_epoch, uint64_t timeout_ns)
{
    if (!b)
        return -EINVAL;
    return barrier_wait(b, my_epoch, 0, timed(timeout_ns));
}

int vigil_barrier_wait_quorum_timeout(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum,
                                      uint64_t timeout_ns)
{
    if (!b)
        return -EINVAL;
    if (quorum == 0)
        return VIGIL_ERANGE;
    return barrier_wait(b, my_epoch, quorum, timed(timeout_ns));
}
