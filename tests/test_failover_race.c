/* SPDX-License-Identifier: MIT */
/*
 * Description: failover with real processes. Three workers with distinct
 * in-flight bits, one killed with SIGKILL: three watchdog processes,
 * released together by a start gate in shared memory, race to reclaim it,
 * round after round; the sum of what every watchdog reported is the dead
 * worker's bits exactly once, and the live workers keep theirs. The same
 * race on a wedged slot (repair exactly once) and with the probe-assisted
 * scan on a worker that exited inside its grace window.
 */
#include "hbtest.h"

#define WORKERS   3
#define WATCHDOGS 3
#define ROUNDS    40
#define GRACE     2

struct shared {
    _Atomic int      ready;
    struct vt_gate   gate;
    _Atomic int      stop;
    _Atomic int      reclaimed;         /* entries reported, all watchdogs */
    _Atomic uint32_t entries[WATCHDOGS];
    _Atomic uint64_t bits[WATCHDOGS];
    _Atomic uint32_t pid[WATCHDOGS];    /* pid of the last entry */
    _Atomic uint32_t errors[WATCHDOGS]; /* scan returned < 0, or a gate timed out */
};

static void shared_reset(struct shared *sh)
{
    memset((void *)sh, 0, sizeof(*sh));
}

/* A watchdog: waits at the gate, then scans until someone has reclaimed
 * `want` entries (or a deadline), adding up what it got itself. */
static pid_t spawn_watchdog(const char *path, struct shared *sh, int idx, int want, bool probe)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        _exit(3);
    atomic_fetch_add(&sh->ready, 1);
    /* Every round starts from a reset gate: round 0. The parent arms it;
     * watchdog 0 opens it, so it opens while watchdogs, not the parent,
     * hold the CPUs, and the ones running leave it within nanoseconds of
     * each other. */
    if (!vt_gate_pass(&sh->gate, idx, 0, 5000)) {
        atomic_fetch_add(&sh->errors[idx], 1);
        _exit(4);
    }
    uint64_t deadline = vt_now_ms() + 5000;
    while (atomic_load(&sh->reclaimed) < want && vt_now_ms() < deadline) {
        vigil_reclaim out[8];
        int n = probe ? vigil_failover_scan_probe(hb, GRACE, out, 8) : vigil_failover_scan(hb, GRACE, out, 8);
        if (n < 0) {
            atomic_fetch_add(&sh->errors[idx], 1);
            break;
        }
        for (int i = 0; i < n; i++) {
            atomic_fetch_add(&sh->entries[idx], 1);
            atomic_fetch_or(&sh->bits[idx], out[i].in_flight);
            atomic_store(&sh->pid[idx], out[i].pid);
        }
        atomic_fetch_add(&sh->reclaimed, n);
    }
    _exit(0);
}

/* Starts the watchdogs, each wanting one entry, and waits (5 s at most)
 * until all of them are at the gate. */
static bool spawn_watchdogs(const char *path, struct shared *sh, pid_t *dogs, bool probe)
{
    for (int d = 0; d < WATCHDOGS; d++)
        dogs[d] = spawn_watchdog(path, sh, d, 1, probe);
    return VT_WAIT_FOR(atomic_load(&sh->ready) == WATCHDOGS, 5000);
}

static int check_watchdogs(struct shared *sh, pid_t *dogs, int round, uint32_t want_pid, uint64_t want_bits)
{
    uint32_t entries = 0;
    uint64_t bits = 0;
    for (int d = 0; d < WATCHDOGS; d++) {
        int st = vt_wait(dogs[d], 10000);
        EXPECT(st == 0, "round %d: watchdog %d exited %d", round, d, st);
        EXPECT(atomic_load(&sh->errors[d]) == 0, "round %d: watchdog %d saw an error", round, d);
        uint32_t e = atomic_load(&sh->entries[d]);
        uint64_t b = atomic_load(&sh->bits[d]);
        EXPECT(!(bits & b), "round %d: bits %#llx reported by two watchdogs", round, (unsigned long long)(bits & b));
        if (e)
            EXPECT(atomic_load(&sh->pid[d]) == want_pid, "round %d: watchdog %d reclaimed pid %u, expected %u",
                   round, d, atomic_load(&sh->pid[d]), want_pid);
        entries += e;
        bits |= b;
    }
    EXPECT(entries == 1, "round %d: expected exactly 1 reclaim over all watchdogs, got %u", round, entries);
    EXPECT(bits == want_bits, "round %d: expected bits %#llx reclaimed, got %#llx", round,
           (unsigned long long)want_bits, (unsigned long long)bits);
    return 0;
}

static int test_three_watchdogs_exactly_once(void)
{
    struct shared *sh = vt_shared(sizeof(*sh));
    for (int round = 0; round < ROUNDS; round++) {
        char name[32];
        snprintf(name, sizeof(name), "race-%d.hb", round);
        const char *path = vt_path(name);
        vigil_hb *hb;
        EXPECT_RC(vigil_hb_create(path, 8, &hb), 0);
        shared_reset(sh);
        pid_t workers[WORKERS];
        uint64_t bits[WORKERS];
        for (int w = 0; w < WORKERS; w++) {
            /* distinct bits per worker, a different pattern each round */
            bits[w] = ((UINT64_C(0x9) << (round % 13)) | 1) << (20 * w);
            workers[w] = vt_hb_spawn_worker(path, &sh->ready, &sh->stop, bits[w]);
        }
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == WORKERS, 5000), "round %d: workers not ready", round);
        int victim = round % WORKERS;
        uint32_t slots[WORKERS], live[WORKERS - 1];
        for (int w = 0, l = 0; w < WORKERS; w++) {
            EXPECT(vt_hb_find_slot(hb, workers[w], &slots[w]), "round %d: worker %d has no slot", round, w);
            if (w != victim)
                live[l++] = slots[w];
        }
        kill(workers[victim], SIGKILL);
        EXPECT(vt_wait(workers[victim], 5000) == 128 + SIGKILL, "round %d: victim not killed", round);

        pid_t dogs[WATCHDOGS];
        atomic_store(&sh->ready, 0);
        EXPECT(spawn_watchdogs(path, sh, dogs, false), "round %d: watchdogs not ready", round);
        for (int t = 0; t <= GRACE; t++)
            EXPECT(vt_hb_tick_with_live(hb, live, WORKERS - 1), "round %d: a live worker stopped beating", round);
        vt_gate_arm(&sh->gate, 0);
        if (check_watchdogs(sh, dogs, round, (uint32_t)workers[victim], bits[victim]))
            return 1;

        for (int w = 0; w < WORKERS; w++) {
            vigil_slot_info info;
            int rc = vigil_hb_snapshot(hb, slots[w], &info);
            if (w == victim) {
                EXPECT(rc == VIGIL_EVACANT, "round %d: victim's slot not vacant (%d)", round, rc);
            } else {
                EXPECT(rc == 0 && info.pid == (uint32_t)workers[w] && info.in_flight == bits[w],
                       "round %d: live worker %d touched: rc %d pid %u bits %#llx", round, w, rc,
                       info.pid, (unsigned long long)info.in_flight);
            }
        }
        atomic_store(&sh->stop, 1);
        for (int w = 0; w < WORKERS; w++)
            if (w != victim)
                EXPECT(vt_wait(workers[w], 5000) == 0, "round %d: worker %d failed", round, w);
        vigil_hb_close(hb);
        unlink(path);
    }
    munmap(sh, sizeof(*sh));
    return 0;
}

/* A slot wedged by a writer that died mid-change: racing watchdogs repair
 * it exactly once, past grace, and hand its bits over once. */
static int test_racing_repairers(void)
{
    struct shared *sh = vt_shared(sizeof(*sh));
    for (int round = 0; round < ROUNDS; round++) {
        char name[32];
        snprintf(name, sizeof(name), "wedge-%d.hb", round);
        const char *path = vt_path(name);
        vigil_hb *hb;
        EXPECT_RC(vigil_hb_create(path, 4, &hb), 0);
        shared_reset(sh);
        uint32_t s, keep;
        EXPECT_RC(vigil_hb_register(hb, 1000 + round, &keep), 0);
        EXPECT_RC(vigil_hb_register(hb, 2000 + round, &s), 0);
        uint64_t want = (UINT64_C(0x5) << (round % 60));
        for (unsigned b = 0; b < 64; b++)
            if (want & (UINT64_C(1) << b))
                EXPECT_RC(vigil_hb_mark_in_flight(hb, s, b), 0);
        for (int t = 0; t <= GRACE; t++) {
            vigil_hb_tick(hb);
            vigil_hb_beat(hb, keep);
        }
        /* Stale, and wedged by a writer that died: the watchdogs race to
         * prove it dead, repair and vacate it. */
        uint64_t v = vt_wedge(hb, s, VT_WRITER_DEAD);
        pid_t dogs[WATCHDOGS];
        EXPECT(spawn_watchdogs(path, sh, dogs, false), "round %d: watchdogs not ready", round);
        vt_gate_arm(&sh->gate, 0);
        if (check_watchdogs(sh, dogs, round, 2000 + round, want))
            return 1;
        EXPECT(atomic_load(&hb->slots[s].seq) == v + 3, "round %d: expected version %llu, got %llu", round,
               (unsigned long long)v + 3, (unsigned long long)atomic_load(&hb->slots[s].seq));
        vigil_slot_info info;
        EXPECT_RC(vigil_hb_snapshot(hb, keep, &info), 0);
        EXPECT(info.pid == 1000u + round, "round %d: live slot lost", round);
        vigil_hb_close(hb);
        unlink(path);
    }
    munmap(sh, sizeof(*sh));
    return 0;
}

/* A worker that exits without unregistering, inside its grace window:
 * racing probe-assisted watchdogs take it at once, exactly once. */
static int test_probe_watchdogs_exit_without_unregister(void)
{
    struct shared *sh = vt_shared(sizeof(*sh));
    for (int round = 0; round < ROUNDS / 2; round++) {
        char name[32];
        snprintf(name, sizeof(name), "exit-%d.hb", round);
        const char *path = vt_path(name);
        vigil_hb *hb;
        EXPECT_RC(vigil_hb_create(path, 8, &hb), 0);
        shared_reset(sh);
        pid_t keep = vt_hb_spawn_worker(path, &sh->ready, &sh->stop, 0x1);
        pid_t quitter = vt_hb_spawn_worker(path, &sh->ready, &sh->stop, UINT64_C(0xf0) << round);
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 2, 5000), "round %d: workers not ready", round);
        kill(quitter, SIGTERM); /* dies without unregistering; not reaped yet */
        siginfo_t si;
        EXPECT(waitid(P_PID, (id_t)quitter, &si, WEXITED | WNOWAIT) == 0, "waitid: %s", strerror(errno));
        atomic_store(&sh->ready, 0);
        pid_t dogs[WATCHDOGS];
        EXPECT(spawn_watchdogs(path, sh, dogs, true), "round %d: watchdogs not ready", round);
        vt_gate_arm(&sh->gate, 0); /* no tick at all: every slot is inside grace */
        if (check_watchdogs(sh, dogs, round, (uint32_t)quitter, UINT64_C(0xf0) << round))
            return 1;
        EXPECT(vt_wait(quitter, 1000) == 128 + SIGTERM, "round %d: quitter status", round);
        atomic_store(&sh->stop, 1);
        EXPECT(vt_wait(keep, 5000) == 0, "round %d: live worker failed", round);
        uint32_t ks;
        EXPECT(vt_hb_find_slot(hb, keep, &ks), "round %d: live worker's slot was taken", round);
        vigil_hb_close(hb);
        unlink(path);
    }
    munmap(sh, sizeof(*sh));
    return 0;
}

VT_MAIN(VT_CASE(test_three_watchdogs_exactly_once), VT_CASE(test_racing_repairers),
        VT_CASE(test_probe_watchdogs_exit_without_unregister))
