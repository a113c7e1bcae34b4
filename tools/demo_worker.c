/* SPDX-License-Identifier: MIT */
/*
 * vigil demo: one worker process. It registers in the heartbeat table and
 * binds its slot to the barrier, then works phases: take this phase's unit
 * (mark its in-flight bit), work while beating and taking part in the
 * election, arrive at the barrier, and once the round is released count
 * the unit done (clear the bit). Whoever the election names leader holds
 * the shared lease, kept alive by a keepalive thread, and gives it back
 * when it stops being leader. Units a dead peer left are adopted when the
 * parent asks, and finished with the current phase.
 *
 * Nothing here prints: the parent tells the story from the reports in the
 * box, so the lines come out in order.
 */
#define _GNU_SOURCE
#include "demo.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct worker {
    const struct demo_paths *paths;
    struct demo_worker      *me;
    struct demo_box         *box;
    unsigned                 index;
    pid_t                    parent;
    uint64_t                 deadline;
    vigil_hb                *hb;
    vigil_barrier           *b;
    vigil_leases            *ls;
    uint32_t                 slot;
    bool                     registered;
    vigil_lease_port         port;  /* outlives every keepalive that uses it */
    vigil_lease              lease;
    vigil_keepalive         *ka;    /* non-NULL while this worker holds the lease */
    uint64_t                 adopted_pending;
    char                     owner[64];
};

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { 0, (long)ms * 1000000L };
    nanosleep(&ts, NULL);
}

/* Gives the lease back: stop first, so no renewal can land after the
 * release and resurrect it, then release. */
static void drop_lease(struct worker *w)
{
    if (!w->ka)
        return;
    vigil_keepalive_stop(w->ka);
    w->ka = NULL;
    vigil_leases_release(w->ls, &w->lease); /* VIGIL_ELOST if it had lapsed: nothing to give back */
    atomic_store(&w->me->lease_token, 0);
}

static _Noreturn void leave(struct worker *w, int status)
{
    drop_lease(w);
    if (w->registered && vigil_hb_unregister(w->hb, w->slot) < 0)
        status = 1;
    vigil_barrier_close(w->b);
    vigil_leases_close(w->ls);
    vigil_hb_close(w->hb);
    if (status == 0)
        atomic_store(&w->me->exited, 1);
    _exit(status);
}

static _Noreturn void fail(struct worker *w, enum demo_step step, int err)
{
    int32_t none = 0;
    if (atomic_compare_exchange_strong(&w->me->err, &none, err ? err : -1))
        atomic_store(&w->me->err_where, step);
    leave(w, 1);
}

/* Ends the worker quietly when the demo is over for it anyway: the parent
 * is gone (it never leaves workers behind on purpose) or time ran out. */
static void check_alive(struct worker *w)
{
    if (getppid() != w->parent)
        leave(w, 1);
    if (tool_now_ms() > w->deadline)
        fail(w, STEP_START, VIGIL_ETIMEDOUT);
}

/* The leader holds the shared lease; everyone else lets it be. */
static void tend_lease(struct worker *w, bool leader)
{
    if (w->ka && vigil_keepalive_lost(w->ka)) {
        /* A renewal was refused: the lease is someone else's now. */
        vigil_keepalive_stop(w->ka);
        w->ka = NULL;
        atomic_store(&w->me->lease_token, 0);
        atomic_fetch_add(&w->me->lease_lost, 1);
    }
    if (w->ka && !leader) {
        drop_lease(w);
        return;
    }
    if (w->ka || !leader)
        return;
    int rc = vigil_leases_acquire(w->ls, DEMO_LEASE_KEY, w->owner, DEMO_LEASE_TTL, &w->lease);
    if (rc == VIGIL_EBUSY) {
        /* still held: the previous holder's ttl has not run out */
        atomic_fetch_add(&w->me->lease_busy, 1);
        return;
    }
    if (rc < 0)
        fail(w, STEP_LEASE, rc);
    if ((rc = vigil_keepalive_start(&w->port, &w->lease, &w->ka)) < 0) {
        vigil_leases_release(w->ls, &w->lease);
        fail(w, STEP_KEEPALIVE, rc);
    }
    atomic_store(&w->me->lease_ms, tool_now_ms());
    atomic_store(&w->me->lease_token, w->lease.token);
}

/* Units the parent reclaimed from a dead peer and handed here. */
static void adopt(struct worker *w)
{
    uint64_t bits = atomic_exchange(&w->me->adopt_req, 0);
    if (!bits)
        return;
    for (unsigned bit = 0; bit < 64; bit++) {
        if (!(bits >> bit & 1))
            continue;
        int rc = vigil_hb_mark_in_flight(w->hb, w->slot, bit);
        if (rc < 0)
            fail(w, STEP_MARK, rc);
    }
    w->adopted_pending |= bits;
    atomic_fetch_or(&w->me->units, bits);
    atomic_fetch_or(&w->me->adopted, bits);
}

/* One slice of work: beat, elect, tend the lease, read the mailbox. */
static void slice(struct worker *w)
{
    vigil_hb_beat(w->hb, w->slot);
    vigil_leader ld;
    int rc = vigil_leader_elect(w->hb, DEMO_GRACE, &ld);
    if (rc < 0 && rc != VIGIL_EBUSY)
        fail(w, STEP_ELECT, rc); /* ENOPEERS cannot happen: this slot is live */
    bool leader = vigil_leader_is(w->hb, w->slot, DEMO_GRACE);
    atomic_store(&w->me->leader, leader);
    tend_lease(w, leader);
    adopt(w);
    check_alive(w);
}

static void finish_units(struct worker *w, unsigned unit)
{
    int rc = vigil_hb_clear_in_flight(w->hb, w->slot, unit);
    if (rc < 0)
        fail(w, STEP_CLEAR, rc);
    uint64_t done = UINT64_C(1) << unit;
    if (w->adopted_pending) {
        for (unsigned bit = 0; bit < 64; bit++)
            if ((w->adopted_pending >> bit & 1) &&
                (rc = vigil_hb_clear_in_flight(w->hb, w->slot, bit)) < 0)
                fail(w, STEP_CLEAR, rc);
        atomic_fetch_or(&w->me->adopted_done, w->adopted_pending);
        done |= w->adopted_pending;
        w->adopted_pending = 0;
    }
    atomic_fetch_and(&w->me->units, ~done);
}

_Noreturn void demo_worker_main(const struct demo_paths *paths, struct demo_box *box,
                                unsigned index, pid_t parent)
{
    /* The parent blocks SIGINT and SIGTERM for itself; a worker takes them
     * the ordinary way, so Ctrl-C ends the whole demo at once. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    struct worker w = {
        .paths = paths, .me = &box->w[index], .box = box, .index = index, .parent = parent,
        .deadline = tool_now_ms() + DEMO_DEADLINE_MS,
    };
    pid_t pid = getpid();
    snprintf(w.owner, sizeof(w.owner), "worker %u (pid %d)", index, (int)pid);
    atomic_store(&w.me->pid, (uint32_t)pid);

    int rc;
    if ((rc = vigil_hb_open(paths->hb, 0, &w.hb)) < 0 ||
        (rc = vigil_barrier_open(paths->barrier, w.hb, 0, &w.b)) < 0 ||
        (rc = vigil_leases_open(paths->leases, &w.ls)) < 0)
        fail(&w, STEP_OPEN, rc);
    w.port = vigil_leases_port(w.ls);
    if ((rc = vigil_hb_register(w.hb, (uint32_t)pid, &w.slot)) < 0)
        fail(&w, STEP_REGISTER, rc);
    w.registered = true;
    atomic_store(&w.me->slot, w.slot);
    /* Bound: while this worker waits at the barrier, the wait beats for it. */
    if ((rc = vigil_barrier_bind(w.b, w.slot)) < 0)
        fail(&w, STEP_BIND, rc);
    atomic_store(&w.me->ready, 1);

    while (!atomic_load(&box->go)) {
        vigil_hb_beat(w.hb, w.slot);
        check_alive(&w);
        sleep_ms(DEMO_SLICE_MS);
    }

    for (uint32_t phase = vigil_barrier_epoch(w.b);; phase++) {
        atomic_store(&w.me->phase, phase);
        unsigned unit = demo_unit(index, phase);
        if ((rc = vigil_hb_mark_in_flight(w.hb, w.slot, unit)) < 0)
            fail(&w, STEP_MARK, rc);
        atomic_fetch_or(&w.me->units, UINT64_C(1) << unit);
        uint64_t begun = tool_now_ms();
        atomic_store(&w.me->phase_ms, begun);
        atomic_store(&w.me->working, 1);

        uint64_t end = begun + DEMO_WORK_MS;
        do {
            slice(&w);
            sleep_ms(DEMO_SLICE_MS);
        } while (tool_now_ms() < end);

        atomic_store(&w.me->working, 0);
        rc = vigil_barrier_wait_timeout(w.b, phase, (uint64_t)DEMO_WAIT_MS * 1000000u);
        if (rc < 0)
            fail(&w, STEP_BARRIER, rc);
        if (rc == VIGIL_SERIAL)
            atomic_fetch_add(&w.me->serials, 1);
        atomic_fetch_add(&w.me->rounds, 1);
        /* The round is released: every live peer got this far, so the
         * phase's work is done and its units leave the bitmap. */
        finish_units(&w, unit);

        uint32_t stop = atomic_load(&box->stop_after);
        if (stop && phase >= stop)
            leave(&w, 0);
        check_alive(&w);
    }
}

const char *demo_step_name(uint32_t step)
{
    static const char *const names[] = {
        [STEP_NONE] = "?", [STEP_OPEN] = "open", [STEP_REGISTER] = "register",
        [STEP_BIND] = "barrier bind", [STEP_MARK] = "mark in flight",
        [STEP_CLEAR] = "clear in flight", [STEP_ELECT] = "leader election",
        [STEP_LEASE] = "lease acquire", [STEP_KEEPALIVE] = "keepalive",
        [STEP_BARRIER] = "barrier wait", [STEP_START] = "waiting", [STEP_UNREGISTER] = "unregister",
    };
    return step < sizeof(names) / sizeof(names[0]) ? names[step] : "?";
}
