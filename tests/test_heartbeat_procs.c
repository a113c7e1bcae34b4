/* SPDX-License-Identifier: MIT */
/*
 * Description: the heartbeat table across real processes: racing
 * registrants never share a slot, a reader never sees a torn snapshot of
 * a slot another process churns, beats and marks cross in both
 * directions, and processes killed with SIGKILL (idle, or at random
 * moments in the middle of register/unregister) leave a table on which
 * every call still returns promptly.
 */
#include "testutil.h"

#include "heartbeat_internal.h"

#define RACERS 16

/* A child's wait for a word to reach a value spins briefly, then yields
 * (2 cores, up to 16 processes): vt_spin_until with a yield every 256. */
#define SPIN_YIELD 256

/* ---- racing registrants --------------------------------------------------- */

struct race {
    _Atomic int ready;
    _Atomic int gate;
    int         rc[RACERS];
    uint32_t    slot[RACERS];
};

/* One round: RACERS processes, each with its own mapping of the table,
 * released together by the gate, each registering its own pid. */
static int race_round(const char *path, uint32_t cap, struct race *r, pid_t *pids)
{
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < RACERS; i++) {
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            vigil_hb *hb;
            int rc = vigil_hb_open(path, cap, &hb);
            if (rc < 0)
                _exit(3);
            atomic_fetch_add(&r->ready, 1);
            if (!vt_spin_until(&r->gate, 1, SPIN_YIELD, 10000))
                _exit(4);
            uint32_t slot = UINT32_MAX;
            r->rc[i] = vigil_hb_register(hb, (uint32_t)getpid(), &slot);
            r->slot[i] = slot;
            vigil_hb_close(hb);
            _exit(0);
        }
        pids[i] = pid;
    }
    bool all_ready = VT_WAIT_FOR(atomic_load(&r->ready) == RACERS, 10000);
    atomic_store_explicit(&r->gate, 1, memory_order_release);
    int bad = 0;
    for (int i = 0; i < RACERS; i++) {
        int st = vt_wait(pids[i], 10000);
        if (st != 0) {
            fprintf(stderr, "racer %d exited with %d\n", i, st);
            bad = 1;
        }
    }
    EXPECT(all_ready, "only %d of %d racers reached the gate", atomic_load(&r->ready), RACERS);
    return bad;
}

/* 16 racers on 16 slots, several rounds: every one gets a slot, no two the
 * same, and the table holds exactly the winners' pids. */
static int test_register_race(void)
{
    struct race *r = vt_shared(sizeof(*r));
    pid_t pids[RACERS];
    for (int round = 0; round < 5; round++) {
        const char *path = vt_path("race.hb");
        unlink(path); /* the last round's table */
        vigil_hb *hb = vt_hb_fresh_at(path, RACERS);
        EXPECT(race_round(path, RACERS, r, pids) == 0, "round %d: a racer failed", round);
        bool taken[RACERS] = { false };
        for (int i = 0; i < RACERS; i++) {
            EXPECT(r->rc[i] == 0, "round %d racer %d: expected 0, got %d (%s)", round, i, r->rc[i],
                   vigil_strerror(r->rc[i]));
            EXPECT(r->slot[i] < RACERS, "round %d racer %d: slot %u out of range", round, i, r->slot[i]);
            EXPECT(!taken[r->slot[i]], "round %d: slot %u handed out twice", round, r->slot[i]);
            taken[r->slot[i]] = true;
            vigil_slot_info info;
            EXPECT_RC(vigil_hb_snapshot(hb, r->slot[i], &info), 0);
            EXPECT(info.pid == (uint32_t)pids[i], "round %d: slot %u holds pid %u, expected racer %d",
                   round, r->slot[i], info.pid, (int)pids[i]);
        }
        vigil_hb_close(hb);
    }
    munmap(r, sizeof(*r));
    return 0;
}

/* 16 racers on 5 slots: exactly 5 win, 11 get VIGIL_EFULL, nothing else. */
static int test_register_race_full(void)
{
    enum { CAP = 5 };
    struct race *r = vt_shared(sizeof(*r));
    pid_t pids[RACERS];
    for (int round = 0; round < 4; round++) {
        const char *path = vt_path("racefull.hb");
        unlink(path); /* the last round's table */
        vigil_hb *hb = vt_hb_fresh_at(path, CAP);
        EXPECT(race_round(path, CAP, r, pids) == 0, "round %d: a racer failed", round);
        int won = 0, full = 0;
        bool taken[CAP] = { false };
        for (int i = 0; i < RACERS; i++) {
            if (r->rc[i] == VIGIL_EFULL) {
                full++;
                EXPECT(r->slot[i] == UINT32_MAX, "a failed register wrote its slot %u", r->slot[i]);
                continue;
            }
            EXPECT(r->rc[i] == 0, "round %d racer %d: expected 0 or VIGIL_EFULL, got %d (%s)", round, i,
                   r->rc[i], vigil_strerror(r->rc[i]));
            EXPECT(r->slot[i] < CAP && !taken[r->slot[i]], "round %d: slot %u out of range or shared",
                   round, r->slot[i]);
            taken[r->slot[i]] = true;
            won++;
            vigil_slot_info info;
            EXPECT_RC(vigil_hb_snapshot(hb, r->slot[i], &info), 0);
            EXPECT(info.pid == (uint32_t)pids[i], "slot %u holds %u, expected winner %d", r->slot[i],
                   info.pid, (int)pids[i]);
        }
        EXPECT(won == CAP && full == RACERS - CAP, "round %d: expected %d winners and %d VIGIL_EFULL, got %d and %d",
               round, CAP, RACERS - CAP, won, full);
        vigil_hb_close(hb);
    }
    munmap(r, sizeof(*r));
    return 0;
}

/* ---- torn snapshots ------------------------------------------------------ */

struct churn {
    _Atomic int      stop;
    _Atomic int      started;
    _Atomic uint64_t cycles;
};

/*
 * The writer alone ticks, so each cycle it ticks to epoch E and then owns
 * the slot as pid PID_BASE + E, stamped last_seen E, with at most bit
 * E % 64 in flight and role 0 or E & 1. Any occupied snapshot that breaks
 * pid == PID_BASE + last_seen, or carries another bit or role, mixes two
 * owners: a tear. A vacant snapshot must be all zeros. (PID_BASE is past
 * any real pid, so register does not spend the cycle reading /proc.)
 */
#define PID_BASE 0x80000000u

static void torn_writer(const char *path, struct churn *c)
{
    vigil_hb *hb;
    if (vigil_hb_open(path, 1, &hb) < 0)
        _exit(3);
    atomic_store(&c->started, 1);
    uint64_t deadline = vt_now_ms() + 10000;
    for (uint64_t i = 0; !atomic_load_explicit(&c->stop, memory_order_relaxed); i++) {
        uint64_t e = vigil_hb_tick(hb);
        uint32_t slot;
        if (vigil_hb_register(hb, PID_BASE + (uint32_t)e, &slot) != 0 || slot != 0)
            _exit(4);
        vigil_hb_beat(hb, slot);
        if (vigil_hb_mark_in_flight(hb, slot, (unsigned)(e % 64)) != 0 ||
            vigil_hb_set_role(hb, slot, (uint32_t)(e & 1)) != 0 || vigil_hb_unregister(hb, slot) != 0)
            _exit(5);
        atomic_store_explicit(&c->cycles, i + 1, memory_order_relaxed);
        if ((i & 1023) == 0 && vt_now_ms() > deadline)
            _exit(6);
    }
    vigil_hb_close(hb);
    _exit(0);
}

static int test_no_torn_snapshot(void)
{
    const char *path = vt_path("torn.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 1);
    struct churn *c = vt_shared(sizeof(*c));
    pid_t w = fork();
    EXPECT(w >= 0, "fork: %s", strerror(errno));
    if (w == 0)
        torn_writer(path, c);
    EXPECT(VT_WAIT_FOR(atomic_load(&c->started), 5000), "writer did not start");

    uint64_t occupied = 0, vacant = 0, busy = 0, reads = 0;
    uint64_t deadline = vt_now_ms() + 3000;
    int fail = 0;
    /* Until the writer has made 100000 changes and both states were seen
     * often, or 3 s. */
    while (!fail && (occupied < 20000 || vacant < 20000 || atomic_load(&c->cycles) < 100000) &&
           vt_now_ms() < deadline) {
        for (int k = 0; k < 1000 && !fail; k++, reads++) {
            vigil_slot_info info;
            memset(&info, 0xa5, sizeof(info));
            int rc = vigil_hb_snapshot(hb, 0, &info);
            if (rc == 0) {
                occupied++;
                uint64_t e = info.last_seen_epoch;
                if (info.pid != PID_BASE + (uint32_t)e || (info.in_flight & ~(UINT64_C(1) << (e % 64))) != 0 ||
                    (info.role != 0 && info.role != (e & 1))) {
                    fprintf(stderr, "torn snapshot: pid %u last_seen %llu in_flight %#llx role %u\n",
                            info.pid, (unsigned long long)e, (unsigned long long)info.in_flight, info.role);
                    fail = 1;
                }
            } else if (rc == VIGIL_EVACANT) {
                vacant++;
                if (info.pid || info.last_seen_epoch || info.in_flight || info.role) {
                    fprintf(stderr, "torn vacant snapshot: pid %u last_seen %llu in_flight %#llx role %u\n",
                            info.pid, (unsigned long long)info.last_seen_epoch,
                            (unsigned long long)info.in_flight, info.role);
                    fail = 1;
                }
            } else if (rc == VIGIL_EBUSY) {
                busy++;
            } else {
                fprintf(stderr, "snapshot: expected 0, VIGIL_EVACANT or VIGIL_EBUSY, got %d (%s)\n", rc,
                        vigil_strerror(rc));
                fail = 1;
            }
        }
    }
    atomic_store(&c->stop, 1);
    int st = vt_wait(w, 10000);
    uint64_t cycles = atomic_load(&c->cycles);
    munmap(c, sizeof(*c));
    vigil_hb_close(hb);
    EXPECT(!fail, "after %llu reads (%llu occupied, %llu vacant, %llu busy)", (unsigned long long)reads,
           (unsigned long long)occupied, (unsigned long long)vacant, (unsigned long long)busy);
    EXPECT(st == 0, "writer exited with %d after %llu cycles", st, (unsigned long long)cycles);
    EXPECT(occupied > 0 && vacant > 0, "reader never saw both states: %llu occupied, %llu vacant in %llu reads",
           (unsigned long long)occupied, (unsigned long long)vacant, (unsigned long long)reads);
    return 0;
}

/* ---- visibility in both directions ---------------------------------------- */

struct xproc {
    _Atomic int phase;
    uint32_t    child_slot;
    uint32_t    parent_slot;
    uint32_t    parent_pid;
};

static int cross_child(const char *path, struct xproc *x)
{
    vigil_hb *hb;
    uint32_t s;
    if (vigil_hb_open(path, 4, &hb) < 0)
        return 3;
    if (vigil_hb_register(hb, (uint32_t)getpid(), &s) < 0)
        return 4;
    vigil_hb_beat(hb, s);
    if (vigil_hb_mark_in_flight(hb, s, 3) < 0 || vigil_hb_mark_in_flight(hb, s, 60) < 0 ||
        vigil_hb_set_role(hb, s, VIGIL_ROLE_COORDINATOR) < 0)
        return 5;
    vigil_hb_tick(hb); /* epoch 5 -> 6, for the parent to see */
    x->child_slot = s;
    atomic_store_explicit(&x->phase, 1, memory_order_release);
    if (!vt_spin_until(&x->phase, 2, SPIN_YIELD, 10000))
        return 6;
    vigil_slot_info info;
    if (vigil_hb_snapshot(hb, x->parent_slot, &info) != 0)
        return 7;
    if (info.pid != x->parent_pid || info.last_seen_epoch != 9 || info.in_flight != UINT64_C(1) << 7 ||
        info.role != VIGIL_ROLE_WORKER)
        return 8;
    if (vigil_hb_epoch(hb) != 9)
        return 9;
    /* And back: the parent sees these after we exit. */
    if (vigil_hb_clear_in_flight(hb, s, 3) < 0 || vigil_hb_unregister(hb, s) < 0)
        return 10;
    vigil_hb_close(hb);
    return 0;
}

static int test_cross_process_visibility(void)
{
    const char *path = vt_path("cross.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 4);
    for (int i = 0; i < 5; i++)
        vigil_hb_tick(hb);
    struct xproc *x = vt_shared(sizeof(*x));
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        _exit(cross_child(path, x));
    bool up = VT_WAIT_FOR(atomic_load_explicit(&x->phase, memory_order_acquire) == 1, 10000);
    if (!up) {
        int st = vt_wait(pid, 1000);
        EXPECT(up, "child never registered (exit %d)", st);
    }
    vigil_slot_info info;
    int rc = vigil_hb_snapshot(hb, x->child_slot, &info);
    bool ok = rc == 0 && info.pid == (uint32_t)pid && info.last_seen_epoch == 5 &&
              info.in_flight == ((UINT64_C(1) << 3) | (UINT64_C(1) << 60)) && info.role == VIGIL_ROLE_COORDINATOR;
    uint64_t epoch = vigil_hb_epoch(hb);
    uint32_t ps;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &ps), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    vigil_hb_beat(hb, ps);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, ps, 7), 0);
    x->parent_slot = ps;
    x->parent_pid = (uint32_t)getpid();
    atomic_store_explicit(&x->phase, 2, memory_order_release);
    int st = vt_wait(pid, 10000);
    EXPECT(ok, "child's slot: expected rc 0 pid %d last_seen 5 bits 3,60 coordinator, got rc %d pid %u "
               "last_seen %llu bits %#llx role %u",
           (int)pid, rc, info.pid, (unsigned long long)info.last_seen_epoch,
           (unsigned long long)info.in_flight, info.role);
    EXPECT(epoch == 6, "expected the child's tick to show as epoch 6, got %llu", (unsigned long long)epoch);
    EXPECT(st == 0, "child saw the wrong parent slot or failed (exit %d)", st);
    EXPECT_RC(vigil_hb_snapshot(hb, x->child_slot, &info), VIGIL_EVACANT);
    munmap(x, sizeof(*x));
    vigil_hb_close(hb);
    return 0;
}

/* ---- killed processes ----------------------------------------------------- */

/* A registered child killed with SIGKILL keeps its slot; once the epoch
 * moves past grace it is stale, and new registrants go elsewhere. */
static int test_killed_registered_goes_stale(void)
{
    const char *path = vt_path("killed.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 4);
    vigil_hb_tick(hb);
    struct xproc *x = vt_shared(sizeof(*x));
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        vigil_hb *c;
        uint32_t s;
        if (vigil_hb_open(path, 4, &c) < 0 || vigil_hb_register(c, (uint32_t)getpid(), &s) < 0 ||
            vigil_hb_mark_in_flight(c, s, 1) < 0)
            _exit(3);
        x->child_slot = s;
        atomic_store_explicit(&x->phase, 1, memory_order_release);
        for (;;) { /* beats until killed */
            vigil_hb_beat(c, s);
            vt_sleep_ms(1);
        }
    }
    bool up = VT_WAIT_FOR(atomic_load_explicit(&x->phase, memory_order_acquire) == 1, 10000);
    kill(pid, SIGKILL);
    int st = vt_wait(pid, 10000);
    EXPECT(up, "child never registered");
    EXPECT(st == 128 + SIGKILL, "expected the child killed by SIGKILL, got status %d", st);

    uint32_t s = x->child_slot;
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), 0);
    EXPECT(info.pid == (uint32_t)pid && info.in_flight == 2, "dead child's slot: pid %u bits %#llx",
           info.pid, (unsigned long long)info.in_flight);
    EXPECT(vigil_hb_live_count(hb, 2) == 1, "freshly killed child should still count live");
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    EXPECT(vigil_hb_live_count(hb, 2) == 1, "age 2 with grace 2 is still live");
    vigil_hb_tick(hb);
    EXPECT(vigil_hb_live_count(hb, 2) == 0, "age 3 with grace 2 must be stale, got %u live",
           vigil_hb_live_count(hb, 2));
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), 0);
    EXPECT(info.pid == (uint32_t)pid, "the stale slot was vacated without a failover: pid %u", info.pid);
    EXPECT(!vigil_hb_is_live_at(info.pid, info.last_seen_epoch, vigil_hb_epoch(hb), 2),
           "the slot's own snapshot is judged live");
    for (int i = 0; i < 3; i++) {
        uint32_t t;
        EXPECT_RC(vigil_hb_register(hb, 7000 + (uint32_t)i, &t), 0);
        EXPECT(t != s, "register handed out the dead child's slot %u", s);
    }
    munmap(x, sizeof(*x));
    vigil_hb_close(hb);
    return 0;
}

/*
 * Churners register their own pid, mark bit pid % 64, set role pid & 1,
 * beat, sometimes tick, then clear and unregister, in a loop, and are
 * killed with SIGKILL at random moments. A slot can be left vacant,
 * occupied by a dead pid, or wedged mid-change (odd version); never torn.
 */
static void churner(const char *path, struct churn *c)
{
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        _exit(3);
    uint32_t me = (uint32_t)getpid();
    for (uint64_t i = 0;; i++) { /* until killed: it never finishes before its kill */
        uint32_t s;
        int rc = vigil_hb_register(hb, me, &s);
        if (rc == 0) {
            vigil_hb_mark_in_flight(hb, s, me % 64);
            vigil_hb_set_role(hb, s, me & 1);
            vigil_hb_beat(hb, s);
            if ((i & 7) == 0)
                vigil_hb_tick(hb);
            vigil_hb_clear_in_flight(hb, s, me % 64);
            vigil_hb_unregister(hb, s);
        }
        atomic_fetch_add_explicit(&c->cycles, 1, memory_order_relaxed);
    }
}

/* Snapshots every slot; returns 0 when each is prompt and consistent,
 * counting cleanly vacant slots into *vacant and wedged ones into *busy
 * (run in a child, under a bound). */
static int check_table(const char *path, uint32_t *vacant, uint32_t *busy)
{
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        return 3;
    *vacant = *busy = 0;
    for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++) {
        vigil_slot_info info;
        memset(&info, 0xa5, sizeof(info));
        int rc = vigil_hb_snapshot(hb, i, &info);
        if (rc == 0) {
            if ((info.in_flight & ~(UINT64_C(1) << (info.pid % 64))) != 0 ||
                (info.role != 0 && info.role != (info.pid & 1))) {
                fprintf(stderr, "slot %u torn: pid %u in_flight %#llx role %u\n", i, info.pid,
                        (unsigned long long)info.in_flight, info.role);
                return 5;
            }
        } else if (rc == VIGIL_EVACANT) {
            if (info.pid || info.in_flight || info.role || info.last_seen_epoch) {
                fprintf(stderr, "vacant slot %u not clean: pid %u in_flight %#llx role %u last_seen %llu\n",
                        i, info.pid, (unsigned long long)info.in_flight, info.role,
                        (unsigned long long)info.last_seen_epoch);
                return 6;
            }
            /* Vacant but locked since by a writer killed mid-change
             * (THE SLOT WRITER LOCK): wedged until failover proves it
             * dead. */
            if (atomic_load(&hb->slots[i].seq) & 1u)
                ++*busy;
            else
                ++*vacant;
        } else if (rc == VIGIL_EBUSY) {
            ++*busy;
        } else {
            fprintf(stderr, "slot %u: snapshot gave %d (%s)\n", i, rc, vigil_strerror(rc));
            return 7;
        }
    }
    vigil_hb_close(hb);
    return 0;
}

static int test_killed_churners(void)
{
    enum { CAP = 16, ROUNDS = 6, PER_ROUND = 2 };
    const char *path = vt_path("churn.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, CAP);
    struct churn *c = vt_shared(sizeof(*c));
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    unsigned rs = seed;
    uint32_t vacant = 0, busy = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pid_t pids[PER_ROUND];
        atomic_store(&c->cycles, 0);
        for (int k = 0; k < PER_ROUND; k++) {
            pids[k] = fork();
            EXPECT(pids[k] >= 0, "fork: %s", strerror(errno));
            if (pids[k] == 0)
                churner(path, c);
        }
        /* Let them get going, then kill each at a random moment. */
        bool going = VT_WAIT_FOR(atomic_load(&c->cycles) >= 100, 10000);
        for (int k = 0; k < PER_ROUND; k++) {
            struct timespec ts = { 0, (long)(rand_r(&rs) % 3000) * 1000L };
            nanosleep(&ts, NULL);
            kill(pids[k], SIGKILL);
        }
        for (int k = 0; k < PER_ROUND; k++) {
            int st = vt_wait(pids[k], 10000);
            EXPECT(st == 128 + SIGKILL, "round %d: churner exited with %d, not SIGKILL (seed %u)", round, st,
                   seed);
        }
        EXPECT(going, "round %d: churners made no progress", round);

        /* Every snapshot must come back promptly: check in a child, bounded. */
        struct { uint32_t vacant, busy; int rc; } *res = vt_shared(4096);
        pid_t chk = fork();
        EXPECT(chk >= 0, "fork: %s", strerror(errno));
        if (chk == 0)
            _exit(check_table(path, &res->vacant, &res->busy));
        int st = vt_wait(chk, 5000);
        EXPECT(st == 0, "round %d: table check failed with %d (-1: a snapshot hung) (seed %u)", round, st, seed);
        vacant = res->vacant;
        busy = res->busy;
        munmap(res, 4096);
    }
    /* Register still works, on exactly the slots that are cleanly vacant. */
    uint32_t got = 0, s;
    int rc;
    bool seen[CAP] = { false };
    while ((rc = vigil_hb_register(hb, (uint32_t)getpid(), &s)) == 0) {
        EXPECT(s < CAP && !seen[s], "register returned slot %u twice or out of range", s);
        seen[s] = true;
        got++;
    }
    EXPECT(rc == VIGIL_EFULL, "register ended with %d (%s), expected VIGIL_EFULL", rc, vigil_strerror(rc));
    EXPECT(got == vacant && vacant >= CAP - ROUNDS * PER_ROUND,
           "expected %u registers on the %u vacant slots (%u wedged), got %u (seed %u)", vacant, vacant, busy,
           got, seed);
    for (uint32_t i = 0; i < CAP; i++) {
        if (!seen[i])
            continue;
        vigil_slot_info info;
        EXPECT_RC(vigil_hb_snapshot(hb, i, &info), 0);
        EXPECT(info.pid == (uint32_t)getpid() && info.in_flight == 0 && info.role == 0,
               "re-registered slot %u: pid %u bits %#llx role %u", i, info.pid,
               (unsigned long long)info.in_flight, info.role);
    }
    /* Every churner is dead: the probe-assisted scan proves it of each
     * writer that held a lock and each owner, and repairs and vacates
     * their slots; then the whole table registers. */
    vigil_reclaim out[CAP];
    EXPECT(vigil_failover_scan_probe(hb, UINT64_MAX / 4, out, CAP) >= 0, "scan failed");
    while (vigil_hb_register(hb, (uint32_t)getpid(), &s) == 0)
        got++;
    EXPECT(got == CAP, "after failover only %u of %u slots registered (seed %u)", got, CAP, seed);
    munmap(c, sizeof(*c));
    vigil_hb_close(hb);
    return 0;
}

/* ---- the start-time cache across fork ------------------------------------- */

struct st_report {
    uint64_t stored;
    uint64_t actual;
    int      rc;
};

/* register caches the caller's own start time; a forked child must record
 * its own, not the parent's. Checked where the two differ. */
static int test_start_time_after_fork(void)
{
    const char *path = vt_path("start.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 4);
    uint64_t mine = 0;
    if (vigil_proc_start_time((uint32_t)getpid(), &mine) < 0)
        return VT_SKIP; /* no /proc */
    uint32_t ps;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &ps), 0);
    EXPECT(atomic_load(&hb->slots[ps].start_time) == mine, "parent's slot start time %llu, expected %llu",
           (unsigned long long)atomic_load(&hb->slots[ps].start_time), (unsigned long long)mine);
    struct st_report *r = vt_shared(sizeof(*r));
    for (int attempt = 0; attempt < 5; attempt++) {
        pid_t pid = fork();
        EXPECT(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            uint32_t s;
            r->rc = vigil_hb_register(hb, (uint32_t)getpid(), &s);
            if (r->rc == 0) {
                r->stored = atomic_load(&hb->slots[s].start_time);
                vigil_proc_start_time((uint32_t)getpid(), &r->actual);
                vigil_hb_unregister(hb, s);
            }
            _exit(0);
        }
        EXPECT(vt_wait(pid, 10000) == 0, "child failed");
        EXPECT_RC(r->rc, 0);
        EXPECT(r->stored == r->actual, "child's slot start time %llu, expected its own %llu (parent's %llu)",
               (unsigned long long)r->stored, (unsigned long long)r->actual, (unsigned long long)mine);
        if (r->actual != mine)
            break; /* the distinguishing case was exercised */
        vt_sleep_ms(30); /* same clock tick as the parent: try again later */
    }
    uint32_t again;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &again), 0);
    EXPECT(atomic_load(&hb->slots[again].start_time) == mine, "parent's cached start time changed");
    munmap(r, sizeof(*r));
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_register_race), VT_CASE(test_register_race_full), VT_CASE(test_no_torn_snapshot),
        VT_CASE(test_cross_process_visibility), VT_CASE(test_killed_registered_goes_stale),
        VT_CASE(test_killed_churners), VT_CASE(test_start_time_after_fork))
