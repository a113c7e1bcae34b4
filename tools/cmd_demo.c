/* SPDX-License-Identifier: MIT */
/*
 * vigil demo [--workers N]: the whole system at work, end to end.
 *
 * The parent makes a heartbeat table, a barrier file and a lease store in
 * a fresh temporary directory, forks N workers (demo_worker.c) and a
 * second watchdog (`vigil failover --json` in a child), and then runs the
 * script below on a 20 ms poll, ticking the epoch and printing the slot
 * table every DEMO_TICK_MS:
 *
 *   run       workers elect a leader, the leader takes the lease with a
 *             keepalive, phases pass the barrier; once the lease has
 *             outlived its ttl (a rival is refused) and the leader is in
 *             the middle of phase DEMO_KILL_PHASE, it is killed with SIGKILL
 *   killed    its slot goes stale, the watchdogs race to reclaim its units
 *             (exactly one wins), the units go to a live worker, the
 *             barrier goes on without it, its lease expires and the new
 *             leader takes it over with a higher token and term
 *   stopping  every survivor leaves after the same round; the watchdog
 *             child is stopped with SIGTERM
 *
 * Every wait is bounded: the demo as a whole by DEMO_DEADLINE_MS, after
 * which everything left is killed and the demo fails.
 */
#define _GNU_SOURCE
#include "demo.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- the script ------------------------------------------------------------- */

static uint64_t demo_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void tick(struct demo *d)
{
    uint64_t epoch = vigil_hb_tick(d->hb);
    demo_print_table(d, epoch);
    /* The parent is a watchdog too, racing the child for every stale slot. */
    vigil_reclaim r[8];
    int k = vigil_failover_scan(d->hb, DEMO_GRACE, r, 8);
    if (k < 0)
        demo_fail(d, "failover scan: %s", vigil_strerror(k));
    for (int i = 0; i < k; i++)
        demo_add_reclaim(d, &r[i], "the parent", epoch);
}

static void kill_leader(struct demo *d, int v)
{
    struct demo_worker *w = &d->box->w[v];
    d->victim = v;
    d->victim_pid = (uint32_t)d->pid[v];
    d->victim_slot = atomic_load(&w->slot);
    d->victim_token = atomic_load(&w->lease_token);
    d->term_at_kill = d->leader.term;
    d->kill_round = vigil_barrier_epoch(d->b);
    d->kill_phase = atomic_load(&w->phase);
    d->kill_epoch = vigil_hb_epoch(d->hb);
    for (unsigned i = 0; i < d->n; i++)
        d->busy_at_kill += atomic_load(&d->box->w[i].lease_busy);
    /* What its slot holds just before the kill: mid-phase, the worker only
     * adds units, so these are in flight when it dies. */
    vigil_slot_info info;
    if (vigil_hb_snapshot(d->hb, d->victim_slot, &info) == 0) {
        d->victim_bits = info.in_flight;
        d->victim_seen = info.last_seen_epoch;
    }
    uint64_t t0 = demo_now_us();
    kill(d->pid[v], SIGKILL);
    /* No tick from here until the slot is vacated: the `vigil failover`
     * child holds a pidfd for the worker and reclaims at its exit, long
     * before any grace window could pass. */
    for (;;) {
        int rc = vigil_hb_snapshot(d->hb, d->victim_slot, &info);
        if (rc == VIGIL_EVACANT || (rc == 0 && info.pid != d->victim_pid)) {
            d->reclaim_us = demo_now_us() - t0;
            d->vacated_epoch = vigil_hb_epoch(d->hb);
            break;
        }
        if (demo_now_us() - t0 > 5000000)
            break; /* the check below says it was never seen */
        sched_yield();
    }
    d->status[v] = demo_wait_bounded(d->pid[v], 5000);
    d->reaped[v] = true;
    char units[128];
    demo_fmt_units(units, sizeof(units), d->victim_bits);
    printf("== 2. kill -9 the leader, worker %d (pid %u, slot %u), in the middle of phase %u,\n"
           "     holding units %s and the lease (token %llu)\n"
           "  > its slot was vacated %llu us after the kill, at epoch %llu, before any tick\n",
           v, d->victim_pid, d->victim_slot, d->kill_phase, units,
           (unsigned long long)d->victim_token, (unsigned long long)d->reclaim_us,
           (unsigned long long)d->vacated_epoch);
}

static void run_stage(struct demo *d)
{
    if (!d->leader_known)
        return;
    int li = demo_worker_of_pid(d, d->leader.pid);
    if (li < 0)
        return;
    struct demo_worker *w = &d->box->w[li];
    uint64_t token = atomic_load(&w->lease_token);
    if (!token)
        return;
    uint64_t held = tool_now_ms() - atomic_load(&w->lease_ms);
    if (d->rival_rc == 1) {
        /* Past its ttl, the lease is still held only if the keepalive renewed it. */
        if (held < DEMO_LEASE_TTL + DEMO_LEASE_TTL / 3)
            return;
        vigil_lease mine;
        d->rival_rc = vigil_leases_acquire(d->ls, DEMO_LEASE_KEY, "a rival (the parent)",
                                           DEMO_LEASE_TTL, &mine);
        d->rival_after_ms = held;
        if (d->rival_rc == 0) {
            vigil_leases_release(d->ls, &mine);
            printf("  > a rival asked for \"%s\" %llu ms into a %u ms lease and GOT it: the\n"
                   "    keepalive did not renew\n",
                   DEMO_LEASE_KEY, (unsigned long long)held, DEMO_LEASE_TTL);
        } else {
            printf("  > a rival asks for \"%s\" %llu ms after worker %d took it (ttl %u ms):\n"
                   "    %s, the keepalive has renewed it\n",
                   DEMO_LEASE_KEY, (unsigned long long)held, li, DEMO_LEASE_TTL,
                   d->rival_rc == VIGIL_EBUSY ? "refused" : vigil_strerror(d->rival_rc));
        }
    }
    /* Mid-phase: half way through the work, its unit surely in flight. */
    if (atomic_load(&w->phase) >= DEMO_KILL_PHASE && atomic_load(&w->working) &&
        tool_now_ms() - atomic_load(&w->phase_ms) >= DEMO_WORK_MS / 2 &&
        atomic_load(&w->units) != 0) {
        d->lowest_pid_then = demo_lowest_live_pid(d);
        kill_leader(d, li);
        d->stage = STAGE_KILLED;
    }
}

static void killed_stage(struct demo *d)
{
    /* the dead peer's units, once a watchdog has them, go to a live worker */
    if (d->target < 0) {
        for (unsigned i = 0; i < d->nrec; i++) {
            if (d->rec[i].r.pid != d->victim_pid)
                continue;
            for (unsigned j = 0; j < d->n && d->target < 0; j++)
                if ((int)j != d->victim && !d->reaped[j])
                    d->target = (int)j;
            if (d->target < 0)
                return;
            d->handed = d->rec[i].r.in_flight;
            char units[128];
            demo_fmt_units(units, sizeof(units), d->handed);
            printf("  > the parent hands units %s to worker %d (pid %d, slot %u)\n", units,
                   d->target, (int)d->pid[d->target],
                   atomic_load(&d->box->w[d->target].slot));
            atomic_store(&d->box->w[d->target].adopt_req, d->handed);
            break;
        }
    }
    bool finished = d->target >= 0 &&
                    (atomic_load(&d->box->w[d->target].adopted_done) & d->handed) == d->handed;
    bool done = finished && d->new_leader_ok && d->taker >= 0 &&
                vigil_barrier_epoch(d->b) >= d->kill_round + DEMO_AFTER;
    if (done) {
        d->rounds_ok = true;
        uint32_t stop = vigil_barrier_epoch(d->b);
        printf("== 3. wind down: every worker leaves after round %u\n", stop);
        atomic_store(&d->box->stop_after, stop);
        d->stage = STAGE_STOPPING;
    }
}

static void stopping_stage(struct demo *d)
{
    if (!demo_all_reaped(d))
        return;
    demo_stop_watchdog(d);
    d->stage = STAGE_DONE;
}

/* Ends whatever is left, for the paths that leave the script early. */
static void abandon(struct demo *d)
{
    atomic_store(&d->box->stop_after, 1);
    for (unsigned i = 0; i < d->n; i++)
        if (!d->reaped[i]) {
            kill(d->pid[i], SIGKILL);
            d->status[i] = demo_wait_bounded(d->pid[i], 5000);
            d->reaped[i] = true;
        }
    demo_stop_watchdog(d);
}

static int setup(struct demo *d)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(d->paths.dir, sizeof(d->paths.dir), "%s/vigil-demo.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->paths.dir))
        return tool_fail(d->paths.dir, -errno);
    snprintf(d->paths.hb, sizeof(d->paths.hb), "%s/demo.hb", d->paths.dir);
    snprintf(d->paths.barrier, sizeof(d->paths.barrier), "%s/demo.barrier", d->paths.dir);
    snprintf(d->paths.leases, sizeof(d->paths.leases), "%s/demo.leases", d->paths.dir);
    int rc;
    if ((rc = vigil_hb_create(d->paths.hb, d->n, &d->hb)) < 0)
        return tool_fail(d->paths.hb, rc);
    if ((rc = vigil_barrier_create(d->paths.barrier, d->hb, DEMO_GRACE, &d->b)) < 0)
        return tool_fail(d->paths.barrier, rc);
    if ((rc = vigil_leases_create(d->paths.leases, 4, &d->ls)) < 0)
        return tool_fail(d->paths.leases, rc);
    d->box = mmap(NULL, sizeof(*d->box), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (d->box == MAP_FAILED) {
        d->box = NULL;
        return tool_fail("shared memory", -errno);
    }
    for (unsigned i = 0; i < DEMO_MAX_WORKERS; i++)
        atomic_store(&d->box->w[i].slot, UINT32_MAX);
    return 0;
}

static void teardown(struct demo *d)
{
    if (d->b)
        d->final_round = vigil_barrier_epoch(d->b);
    vigil_barrier_close(d->b);
    vigil_leases_close(d->ls);
    vigil_hb_close(d->hb);
    d->b = NULL, d->ls = NULL, d->hb = NULL;
    if (!d->paths.dir[0])
        return;
    unlink(d->paths.hb);
    unlink(d->paths.barrier);
    unlink(d->paths.leases);
    d->dir_removed = rmdir(d->paths.dir) == 0;
    if (!d->dir_removed)
        fprintf(stderr, "vigil: %s: %s\n", tool_e(d->paths.dir), vigil_strerror(-errno));
}

static int spawn_workers(struct demo *d)
{
    pid_t parent = getpid();
    for (unsigned i = 0; i < d->n; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
            return -errno;
        if (pid == 0)
            demo_worker_main(&d->paths, d->box, i, parent);
        d->pid[i] = pid;
    }
    return 0;
}

static int play(struct demo *d)
{
    int rc = spawn_workers(d);
    if (rc < 0) {
        demo_fail(d, "fork: %s", vigil_strerror(rc));
        return -1;
    }
    /* Everyone registered and bound before phase 0, so that round 0 waits
     * for all of them. */
    uint64_t gate = tool_now_ms() + 10000;
    for (;;) {
        unsigned ready = 0;
        for (unsigned i = 0; i < d->n; i++)
            ready += atomic_load(&d->box->w[i].ready) != 0;
        if (ready == d->n)
            break;
        demo_reap(d);
        demo_tell_events(d);
        if (d->failed || tool_now_ms() > gate) {
            demo_fail(d, "only %u of %u workers registered", ready, d->n);
            return -1;
        }
        if (tool_sleep_ms(5)) {
            demo_fail(d, "interrupted");
            return -1;
        }
    }
    if ((rc = demo_start_watchdog(d)) < 0) {
        demo_fail(d, "watchdog: %s", vigil_strerror(rc));
        return -1;
    }
    demo_print_intro(d);
    atomic_store(&d->box->go, 1);

    uint64_t next_tick = tool_now_ms() + DEMO_TICK_MS;
    uint64_t stop_by = 0;
    while (d->stage != STAGE_DONE) {
        uint64_t now = tool_now_ms();
        if (now >= next_tick) {
            tick(d);
            next_tick += DEMO_TICK_MS;
        }
        demo_read_watchdog(d);
        demo_reap(d);
        demo_tell_events(d);
        if (ferror(stdout))
            demo_fail(d, "stdout: write error");
        if (d->failed)
            return -1;
        switch (d->stage) {
        case STAGE_RUN:      run_stage(d); break;
        case STAGE_KILLED:   killed_stage(d); break;
        case STAGE_STOPPING:
            if (!stop_by)
                stop_by = now + 10000;
            stopping_stage(d);
            if (d->stage != STAGE_DONE && now > stop_by) {
                demo_fail(d, "the workers did not leave within 10 s");
                return -1;
            }
            break;
        case STAGE_DONE:     break;
        }
        if (now > d->deadline_ms) {
            demo_fail(d, "the demo did not finish within %u s", DEMO_DEADLINE_MS / 1000);
            return -1;
        }
        if (tool_sleep_ms(20)) {
            demo_fail(d, "interrupted");
            return -1;
        }
    }
    return 0;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t workers = 4;
    const struct tool_opt opts[] = {
        { "workers", OPT_U64, 2, DEMO_MAX_WORKERS, &workers, NULL, NULL },
    };
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 1, NULL, 0, 0, &npos);
    if (rc != TOOL_GO)
        return rc;

    /* Line-buffered, so that the story can be followed through a pipe; a
     * reader that goes away makes writes fail rather than kill the demo
     * before it has cleaned up. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    tool_catch_stop_signals();
    static struct demo demo;
    struct demo *d = &demo;
    memset(d, 0, sizeof(*d));
    d->n = (unsigned)workers;
    d->victim = d->target = d->taker = -1;
    d->wd_fd = -1;
    d->rival_rc = 1;
    d->start_ms = tool_now_ms();
    d->deadline_ms = d->start_ms + DEMO_DEADLINE_MS;

    if ((rc = setup(d)) != 0) {
        teardown(d);
        if (d->box)
            munmap(d->box, sizeof(*d->box));
        return rc;
    }
    if (play(d) < 0)
        abandon(d);
    teardown(d);
    rc = demo_summary(d);
    munmap(d->box, sizeof(*d->box));
    return rc;
}

const struct tool_cmd tool_cmd_demo = {
    .name = "demo",
    .synopsis = "[--workers N]",
    .summary = "the whole system at work, end to end",
    .help = "Runs the whole system for about ten seconds in a fresh temporary directory,\n"
            "and removes it at the end. N workers (2..32, default 4) register in a\n"
            "heartbeat table, elect a leader, take work units (in-flight bits), sync\n"
            "phases on a barrier, and the leader holds a lease with a keepalive. The\n"
            "leader is then killed with SIGKILL mid-phase; the demo shows its slot\n"
            "going stale, two watchdogs racing to reclaim its units (exactly one\n"
            "wins), the units handed to a live worker, the barrier going on without\n"
            "the dead peer, the lease taken over with a higher fencing token, and a\n"
            "new leader with a higher term. It ends with one 'ok:' line for each\n"
            "thing verified, and exits 1 if any did not hold.\n"
            "\n"
            "options:\n"
            "  --workers N   worker processes, 2..32 (default 4)\n"
            "  -h, --help    show this help\n",
    .run = run,
};
