/* SPDX-License-Identifier: MIT */
/*
 * Description: epoch barrier with real processes under load: 4 processes x
 * hundreds of rounds (nobody leaves a round before every live peer
 * arrived, exactly one releaser per round), a peer killed with SIGKILL
 * mid-run while the others finish every round, a slow peer that beats but
 * arrives late is waited for while the waiters keep their own slots alive,
 * and a blocked waiter uses a small fraction of a core.
 *
 * No timing is asserted. Where liveness matters the parent ticks the
 * heartbeat epoch in lockstep: it ticks again only once every peer that
 * should be alive has beaten in the current epoch, so a loaded machine
 * slows the test down but never ages a live peer out.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "barrier_internal.h"

#define SEC 1000000000ull
#define MS  1000000ull

enum { NPROC = 4, ROUNDS = 400 };

struct run {
    _Atomic int go;
    _Atomic int registered;
    _Atomic uint32_t slot[NPROC];
    _Atomic int in_round[NPROC];
    _Atomic int progress[NPROC];
    _Atomic int done[NPROC];
    _Atomic int arrived[ROUNDS];      /* arrivals of counted peers, per round */
    _Atomic int serial[ROUNDS];
    _Atomic int bad, bad_round, bad_count, bad_rc;
    _Atomic int flag;
    _Atomic int rc[NPROC];
    _Atomic uint64_t cpu_ns;
};
static struct run *run;

static void run_reset(void)
{
    if (!run) {
        run = mmap(NULL, sizeof(*run), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (run == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
    }
    memset(run, 0, sizeof(*run));
    atomic_store(&run->bad_round, -1);
}

static void note_bad(int round, int count, int rc)
{
    if (atomic_fetch_add(&run->bad, 1) == 0) {
        atomic_store(&run->bad_round, round);
        atomic_store(&run->bad_count, count);
        atomic_store(&run->bad_rc, rc);
    }
}

struct worker {
    const char *hb_name, *b_name;
    int idx;
    bool bind;
    bool counted;   /* counts itself in run->arrived (survivors only in the kill test) */
    int expect;     /* arrivals every leaver must see */
    uint32_t rounds;
    int park_at;    /* > 0: waits there, before arriving, to be killed */
};

static int open_both(const char *hbn, const char *bn, vigil_hb **hb, vigil_barrier **b)
{
    if (vigil_hb_open(vt_path(hbn), 0, hb) < 0)
        return 90;
    if (vigil_barrier_open(vt_path(bn), *hb, 0, b) < 0)
        return 91;
    return 0;
}

/* Registers itself, waits for the gate, then runs the rounds. */
static int worker_main(const struct worker *w)
{
    vigil_hb *hb;
    vigil_barrier *b;
    int rc = open_both(w->hb_name, w->b_name, &hb, &b);
    if (rc)
        return rc;
    uint32_t slot;
    if (vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0)
        return 92;
    atomic_store(&run->slot[w->idx], slot);
    if (w->bind && vigil_barrier_bind(b, slot) < 0)
        return 93;
    atomic_fetch_add(&run->registered, 1);
    if (!VT_WAIT_FOR(atomic_load(&run->go), 20000))
        return 94;
    for (uint32_t r = 0; r < w->rounds; r++) {
        atomic_store(&run->in_round[w->idx], (int)r);
        if (w->park_at > 0 && r == (uint32_t)w->park_at) {
            atomic_store(&run->flag, 1);
            vt_await_kill();
        }
        if (w->counted)
            atomic_fetch_add(&run->arrived[r], 1);
        rc = vigil_barrier_wait(b, r);
        if (rc == VIGIL_SERIAL)
            atomic_fetch_add(&run->serial[r], 1);
        int seen = atomic_load(&run->arrived[r]);
        if (rc < 0 || seen < w->expect)
            note_bad((int)r, seen, rc);
        atomic_store(&run->progress[w->idx], (int)r + 1);
    }
    atomic_store(&run->done[w->idx], 1);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static pid_t spawn_worker(struct worker w)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(worker_main(&w));
    return p;
}

static void create_files(const char *hbn, const char *bn, uint32_t cap, uint64_t grace)
{
    vigil_hb *hb;
    vigil_barrier *b;
    if (vigil_hb_create(vt_path(hbn), cap, &hb) < 0 || vigil_barrier_create(vt_path(bn), hb, grace, &b) < 0) {
        fprintf(stderr, "cannot create %s / %s\n", hbn, bn);
        exit(1);
    }
    vigil_barrier_close(b);
    vigil_hb_close(hb);
}

static int rounds_4procs(bool bind)
{
    run_reset();
    const char *hbn = bind ? "r4b.hb" : "r4u.hb", *bn = bind ? "r4b.b" : "r4u.b";
    create_files(hbn, bn, 8, 5);
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++)
        kids[i] = spawn_worker((struct worker){ hbn, bn, i, bind, true, NPROC, ROUNDS, 0 });
    EXPECT(VT_WAIT_FOR(atomic_load(&run->registered) == NPROC, 20000), "workers never registered");
    atomic_store(&run->go, 1);
    for (int i = 0; i < NPROC; i++) {
        int st = vt_wait(kids[i], 120000);
        EXPECT(st == 0, "worker %d exited with %d", i, st);
    }
    EXPECT(atomic_load(&run->bad) == 0,
           "%d waits left a round early or failed; first: round %d saw %d arrivals, rc %d",
           atomic_load(&run->bad), atomic_load(&run->bad_round), atomic_load(&run->bad_count),
           atomic_load(&run->bad_rc));
    for (int r = 0; r < ROUNDS; r++)
        EXPECT(atomic_load(&run->serial[r]) == 1, "round %d had %d releasers", r, atomic_load(&run->serial[r]));
    vigil_barrier_state st;
    EXPECT_RC(vigil_barrier_peek(vt_path(bn), &st), 0);
    EXPECT(st.epoch == ROUNDS && st.arrived == 0, "after the run: epoch %u arrived %u", st.epoch, st.arrived);
    return 0;
}

static int test_rounds_4procs_bound(void) { return rounds_4procs(true); }
static int test_rounds_4procs_unbound(void) { return rounds_4procs(false); }

/*
 * Ticks once every peer in `mask` (of run->slot) that is not done has
 * beaten in the current epoch. Returns false if one never does (a live
 * waiter that stopped beating is exactly the bug this catches).
 */
static bool lockstep_tick(vigil_hb *hb, unsigned mask)
{
    vigil_hb_tick(hb);
    uint64_t e = vigil_hb_epoch(hb);
    for (int i = 0; i < NPROC; i++) {
        if (!(mask & (1u << i)))
            continue;
        uint32_t s = atomic_load(&run->slot[i]);
        if (!VT_WAIT_FOR(atomic_load(&run->done[i]) ||
                         atomic_load(&hb->slots[s].last_seen_epoch) >= e, 20000)) {
            fprintf(stderr, "peer %d (slot %u) stopped beating at epoch %llu\n", i, s,
                    (unsigned long long)e);
            return false;
        }
    }
    return true;
}

/* A peer killed with SIGKILL mid-run: the others finish every round. */
static int test_sigkill_mid_run(void)
{
    run_reset();
    create_files("kill.hb", "kill.b", 8, 2);
    enum { K = NPROC - 1, KILL_AT = 60, N = 300 };
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++)
        kids[i] = spawn_worker(
            (struct worker){ "kill.hb", "kill.b", i, true, i != K, NPROC - 1, N, i == K ? KILL_AT : 0 });
    EXPECT(VT_WAIT_FOR(atomic_load(&run->registered) == NPROC, 20000), "workers never registered");
    atomic_store(&run->go, 1);
    /* The victim waits at round KILL_AT to be killed: the test, not the
     * scheduler, decides that it dies mid-run. */
    EXPECT(VT_WAIT_FOR(atomic_load(&run->flag), 60000), "victim never reached round %d", KILL_AT);
    kill(kids[K], SIGKILL);
    EXPECT(vt_wait(kids[K], 10000) == 128 + SIGKILL, "victim not killed");
    int died_in = atomic_load(&run->in_round[K]);

    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(vt_path("kill.hb"), 0, &hb), 0);
    unsigned survivors = (1u << NPROC) - 1 - (1u << K);
    bool all_done = false;
    while (!all_done) {
        EXPECT(lockstep_tick(hb, survivors), "a survivor stopped beating");
        all_done = true;
        for (int i = 0; i < NPROC; i++)
            if (i != K && !atomic_load(&run->done[i]))
                all_done = false;
    }
    vigil_hb_close(hb);
    for (int i = 0; i < NPROC; i++) {
        if (i == K)
            continue;
        int st = vt_wait(kids[i], 60000);
        EXPECT(st == 0, "survivor %d exited with %d", i, st);
        EXPECT(atomic_load(&run->progress[i]) == N, "survivor %d finished %d of %d rounds", i,
               atomic_load(&run->progress[i]), N);
    }
    EXPECT(atomic_load(&run->bad) == 0,
           "%d survivor waits left a round early or failed; first: round %d saw %d, rc %d",
           atomic_load(&run->bad), atomic_load(&run->bad_round), atomic_load(&run->bad_count),
           atomic_load(&run->bad_rc));
    EXPECT(died_in == KILL_AT, "victim died in round %d", died_in);
    for (int r = 0; r < N; r++)
        EXPECT(atomic_load(&run->serial[r]) == 1, "round %d had %d releasers", r, atomic_load(&run->serial[r]));
    return 0;
}

/*
 * A slow peer that beats but arrives late is waited for, however many
 * epochs go by, and the blocked waiters keep their own slots beating (the
 * lockstep ticker would stall otherwise).
 */
static int test_slow_peer_waited_for(void)
{
    run_reset();
    create_files("slow.hb", "slow.b", 4, 2);
    enum { TICKS = 25 };
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] == 0) {
            vigil_hb *hb;
            vigil_barrier *b;
            if (open_both("slow.hb", "slow.b", &hb, &b))
                _exit(90);
            uint32_t slot;
            if (vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
                _exit(92);
            atomic_store(&run->slot[i], slot);
            atomic_fetch_add(&run->registered, 1);
            if (!VT_WAIT_FOR(atomic_load(&run->go), 20000))
                _exit(94);
            if (i == 2) { /* the slow one: works, beating, for TICKS epochs */
                while (vigil_hb_epoch(hb) < TICKS && !atomic_load(&run->done[0])) {
                    vigil_hb_beat(hb, slot);
                    vt_sleep_ms(1);
                }
                atomic_store(&run->flag, 1);
            }
            int rc = vigil_barrier_wait(b, 0);
            atomic_store(&run->rc[i], rc);
            if (!atomic_load(&run->flag))
                note_bad(0, i, rc);
            atomic_store(&run->done[i], 1);
            _exit(0);
        }
    }
    EXPECT(VT_WAIT_FOR(atomic_load(&run->registered) == 3, 20000), "peers never registered");
    atomic_store(&run->go, 1);
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(vt_path("slow.hb"), 0, &hb), 0);
    for (int t = 0; t < TICKS; t++) {
        EXPECT(lockstep_tick(hb, 7), "a peer stopped beating at tick %d", t);
        EXPECT(atomic_load(&run->bad) == 0, "a waiter left before the slow peer arrived (tick %d)", t);
    }
    vigil_hb_close(hb);
    for (int i = 0; i < 3; i++)
        EXPECT(vt_wait(kids[i], 60000) == 0, "peer %d failed", i);
    EXPECT(atomic_load(&run->bad) == 0, "%d waiters left before the slow peer arrived", atomic_load(&run->bad));
    int serial = 0;
    for (int i = 0; i < 3; i++) {
        EXPECT(atomic_load(&run->rc[i]) >= 0, "peer %d returned %d", i, atomic_load(&run->rc[i]));
        serial += atomic_load(&run->rc[i]) == VIGIL_SERIAL;
    }
    EXPECT(serial == 1, "expected one SERIAL, got %d", serial);
    return 0;
}

static uint64_t cpu_ns_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * SEC +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* A waiter blocked for a second, with the epoch ticking every few ms,
 * spends a small fraction of a core: it sleeps in the kernel. */
static int test_blocked_waiter_cpu(void)
{
    run_reset();
    create_files("cpu.hb", "cpu.b", 4, 3);
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(vt_path("cpu.hb"), 0, &hb), 0);
    uint32_t mine;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &mine), 0); /* never arrives */
    fflush(NULL);
    pid_t k = fork();
    if (k == 0) {
        vigil_hb *chb;
        vigil_barrier *b;
        if (open_both("cpu.hb", "cpu.b", &chb, &b))
            _exit(90);
        uint32_t slot;
        if (vigil_hb_register(chb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
            _exit(92);
        uint64_t c0 = cpu_ns_self();
        int rc = vigil_barrier_wait_timeout(b, 0, 1 * SEC);
        atomic_store(&run->cpu_ns, cpu_ns_self() - c0);
        atomic_store(&run->rc[0], rc);
        atomic_store(&run->done[0], 1);
        _exit(0);
    }
    while (!atomic_load(&run->done[0])) {
        vigil_hb_tick(hb);
        vigil_hb_beat(hb, mine);
        vt_sleep_ms(5);
    }
    EXPECT(vt_wait(k, 20000) == 0, "waiter failed");
    vigil_hb_close(hb);
    int rc = atomic_load(&run->rc[0]);
    uint64_t cpu = atomic_load(&run->cpu_ns);
    EXPECT(rc == VIGIL_ETIMEDOUT, "expected the wait to time out, got %d (%s)", rc, vigil_strerror(rc));
    /* A spinning waiter would use the whole second; a sleeping one a few ms. */
    EXPECT(cpu < SEC / 10, "a blocked waiter used %.1f ms of CPU in a 1 s wait", cpu / 1e6);
    printf("blocked waiter: %.2f ms of CPU in a 1 s wait\n", cpu / 1e6);
    return 0;
}

VT_MAIN(VT_CASE(test_rounds_4procs_bound), VT_CASE(test_rounds_4procs_unbound),
        VT_CASE(test_sigkill_mid_run), VT_CASE(test_slow_peer_waited_for),
        VT_CASE(test_blocked_waiter_cpu))
