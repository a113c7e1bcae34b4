/* SPDX-License-Identifier: MIT */
/*
 * Description: leader election with real processes. Killing the leader
 * (SIGKILL) makes the next-lowest live pid leader with a higher term, by
 * the grace window or at once through the probe-assisted scan. Elector
 * processes released together by a start gate race round after round
 * while membership changes between rounds: never two coordinators among
 * live slots, every elector agrees on (leader, term), and the term rises
 * exactly once per change (the electors' "changed" answers add up to the
 * term's rise, and that is 1 exactly when the lowest live pid moved); a
 * reader process calling vigil_leader_get all along never sees one term
 * with two leaders, nor the term go back.
 *
 * An elector killed at each step of a change (vigil_elect_hook) leaves
 * the leader and the term agreeing, the change installed whole or not at
 * all, and the next election finishes with the term risen exactly once.
 * And issue 17.6 for the election lock: an elector that judged a dead
 * holder and was stopped before its take-over must not rob the holder
 * that took the lock meanwhile with the very same lock word.
 */
#include "hbtest.h"

#define ELECTORS 4
#define ROUNDS   300
#define CALLS    25
#define GRACE    2

struct workers {
    _Atomic int ready;
    _Atomic int stop;
};

static int order_by_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* Kill the leader: by the grace window (ticks) the next-lowest live pid
 * leads with a higher term; kill that one too and the probe-assisted scan
 * lets the election move on at once, without a tick. */
static int test_kill_leader(void)
{
    const char *path = vt_path("kill.hb");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(path, 8, &hb), 0);
    struct workers *sh = vt_shared(sizeof(*sh));
    pid_t w[3];
    for (int i = 0; i < 3; i++)
        w[i] = vt_hb_spawn_worker(path, &sh->ready, &sh->stop, 0);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 3, 5000), "workers not ready");
    qsort(w, 3, sizeof(w[0]), order_by_pid);
    uint32_t slot[3];
    for (int i = 0; i < 3; i++)
        EXPECT(vt_hb_find_slot(hb, w[i], &slot[i]), "worker %d has no slot", (int)w[i]);

    vigil_leader out;
    EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 1);
    EXPECT(out.pid == (uint32_t)w[0] && out.slot == slot[0], "expected leader %d, got %u", (int)w[0], out.pid);
    uint64_t term0 = out.term;
    EXPECT(vigil_leader_is(hb, slot[0], GRACE), "leader_is false for the elected leader");

    kill(w[0], SIGKILL);
    EXPECT(vt_wait(w[0], 5000) == 128 + SIGKILL, "leader not killed");
    EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 0); /* inside grace: still "live" */
    uint32_t live[2] = { slot[1], slot[2] };
    for (int t = 0; t <= GRACE; t++)
        EXPECT(vt_hb_tick_with_live(hb, live, 2), "a live worker stopped beating");
    EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 1);
    EXPECT(out.pid == (uint32_t)w[1] && out.slot == slot[1] && out.term == term0 + 1,
           "expected leader %d at term %llu, got %u at %llu", (int)w[1], (unsigned long long)term0 + 1,
           out.pid, (unsigned long long)out.term);
    EXPECT(vigil_leader_is(hb, slot[1], GRACE) && !vigil_leader_is(hb, slot[2], GRACE),
           "leader_is disagrees with the election");
    EXPECT(atomic_load(&hb->slots[slot[2]].role) == VIGIL_ROLE_WORKER, "worker promoted");

    kill(w[1], SIGKILL);
    EXPECT(vt_wait(w[1], 5000) == 128 + SIGKILL, "second leader not killed");
    vigil_reclaim rec[8];
    int n = vigil_failover_scan_probe(hb, GRACE, rec, 8);
    EXPECT(n == 2, "expected the two dead leaders reclaimed, got %d", n);
    EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 1);
    EXPECT(out.pid == (uint32_t)w[2] && out.term == term0 + 2, "expected leader %d at term %llu, got %u at %llu",
           (int)w[2], (unsigned long long)term0 + 2, out.pid, (unsigned long long)out.term);

    atomic_store(&sh->stop, 1);
    EXPECT(vt_wait(w[2], 5000) == 0, "last worker failed");
    munmap(sh, sizeof(*sh));
    vigil_hb_close(hb);
    return 0;
}

#define MAX_TERMS 1024

struct race {
    _Atomic int      ready;
    _Atomic int      stop_reader;
    _Atomic uint32_t term_slot[MAX_TERMS]; /* slot + 1 the reader saw with each term, 0 none yet */
    _Atomic uint64_t reads;                /* the reader's accepted reads */
    _Atomic uint32_t reader_bad;           /* a term read with two slots, or going back */
    struct vt_gate   gate;        /* armed by the parent, opened by elector 0 */
    _Atomic uint32_t changed[ELECTORS];
    _Atomic uint32_t errors[ELECTORS];
    _Atomic uint32_t disagree[ELECTORS]; /* answers that differ from this elector's own first answer after a change */
    _Atomic uint64_t last_term[ELECTORS];
    _Atomic uint32_t last_pid[ELECTORS];
};

static pid_t spawn_elector(const char *path, struct race *r, int idx)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        _exit(3);
    atomic_fetch_add(&r->ready, 1);
    for (int round = 0; round < ROUNDS; round++) {
        /* Busy-wait, yielding now and then so the parent can run: the
         * electors that are on a CPU when the gate opens leave it within
         * nanoseconds of each other, which is when a race would show. The
         * parent arms the round; elector 0 opens the gate, so the gate
         * opens while electors, not the parent, hold both CPUs. */
        if (!vt_gate_pass(&r->gate, idx, round, 10000))
            _exit(4);
        uint64_t prev_term = 0;
        for (int c = 0; c < CALLS; c++) {
            vigil_leader out;
            int rc = vigil_leader_elect(hb, GRACE, &out);
            if (rc == VIGIL_EBUSY)
                continue; /* a holder preempted past the wait: try again */
            if (rc < 0) {
                atomic_fetch_add(&r->errors[idx], 1);
                continue;
            }
            if (c > 0 && out.term < prev_term)
                atomic_fetch_add(&r->disagree[idx], 1); /* the term went backwards */
            prev_term = out.term;
            atomic_fetch_add(&r->changed[idx], (uint32_t)rc);
            atomic_store(&r->last_term[idx], out.term);
            atomic_store(&r->last_pid[idx], out.pid);
        }
        atomic_fetch_add(&r->ready, 1);
    }
    _exit(0);
}

/* The reader: vigil_leader_get all along, each term's leader noted the
 * first time and every later read of that term checked against it ({term,
 * leader} change together, by one swap: a reader never pairs a term with
 * another change's leader). A read-only handle, as `vigil inspect` has. */
static pid_t spawn_reader(const char *path, struct race *r)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    vigil_hb *hb;
    if (vigil_hb_open_readonly(path, 0, &hb) < 0)
        _exit(3);
    uint64_t last = 0;
    /* At least one batch, however late this process first runs: a leader
     * stands once the rounds are over, so the reads are never none. */
    do {
        for (int i = 0; i < 64; i++) {
            vigil_leader got;
            if (vigil_leader_get(hb, &got) != 0)
                continue; /* no leader yet, or busy: nothing to check */
            if (got.term < last || got.term >= MAX_TERMS) {
                atomic_fetch_add(&r->reader_bad, 1);
                continue;
            }
            last = got.term;
            uint32_t seen = 0;
            if (!atomic_compare_exchange_strong(&r->term_slot[got.term], &seen, got.slot + 1) &&
                seen != got.slot + 1)
                atomic_fetch_add(&r->reader_bad, 1);
            atomic_fetch_add(&r->reads, 1);
        }
        struct timespec ts = { 0, 50000 }; /* leave the electors the CPUs */
        nanosleep(&ts, NULL);
    } while (!atomic_load(&r->stop_reader));
    vigil_hb_close(hb);
    _exit(0);
}

/* Deterministic pseudo-random membership changes between rounds. */
static uint32_t rng(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static uint32_t lowest_live(vigil_hb *hb, uint64_t grace, uint32_t *slot)
{
    uint64_t e = vigil_hb_epoch(hb);
    uint32_t best = 0;
    for (uint32_t i = 0; i < hb->capacity; i++) {
        uint32_t p = atomic_load(&hb->slots[i].pid);
        if (vigil_hb_is_live_at(p, atomic_load(&hb->slots[i].last_seen_epoch), e, grace) && (!best || p < best)) {
            best = p;
            *slot = i;
        }
    }
    return best;
}

static int test_racing_electors(void)
{
    const char *path = vt_path("electors.hb");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(path, 16, &hb), 0);
    struct race *r = vt_shared(sizeof(*r));
    uint32_t s;
    for (int i = 0; i < 6; i++)
        EXPECT_RC(vigil_hb_register(hb, 1000 + 100 * i, &s), 0);
    pid_t el[ELECTORS];
    for (int i = 0; i < ELECTORS; i++)
        el[i] = spawn_elector(path, r, i);
    pid_t reader = spawn_reader(path, r);
    EXPECT(VT_WAIT_FOR(atomic_load(&r->ready) == ELECTORS, 5000), "electors not ready");

    uint32_t seed = 0x9e3779b9u, prev_leader = 0;
    uint32_t changes_expected = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* Change membership (or not) while nobody elects. */
        switch (rng(&seed) % 8) {
        case 0: /* a lower pid joins */
            vigil_hb_register(hb, 900 - (uint32_t)round, &s);
            break;
        case 1: { /* the leader leaves */
            uint32_t ls;
            if (lowest_live(hb, GRACE, &ls))
                vigil_hb_unregister(hb, ls);
            break;
        }
        case 2: { /* the leader goes stale, everyone else beats */
            uint32_t ls = UINT32_MAX;
            lowest_live(hb, GRACE, &ls);
            for (int t = 0; t <= GRACE; t++) {
                vigil_hb_tick(hb);
                for (uint32_t i = 0; i < hb->capacity; i++)
                    if (i != ls)
                        vigil_hb_beat(hb, i);
            }
            break;
        }
        case 3: /* the leader leaves and a lower pid joins */
        case 4: {
            uint32_t ls;
            if (lowest_live(hb, GRACE, &ls))
                vigil_hb_unregister(hb, ls);
            vigil_hb_register(hb, 800 - (uint32_t)round, &s);
            break;
        }
        case 5: /* a higher pid joins: no change of leader */
            vigil_hb_register(hb, 5000 + (uint32_t)round, &s);
            break;
        default: /* nothing */
            break;
        }
        uint32_t want_slot = 0;
        uint32_t want = lowest_live(hb, GRACE, &want_slot);
        if (want == 0) { /* never leave the table empty */
            vigil_hb_register(hb, 3000 + (uint32_t)round, &s);
            want = lowest_live(hb, GRACE, &want_slot);
        }
        uint64_t term_before = atomic_load(&hb->hdr->term);
        bool change = want != prev_leader;
        changes_expected += change;
        for (int i = 0; i < ELECTORS; i++)
            atomic_store(&r->changed[i], 0);
        atomic_store(&r->ready, 0);
        vt_gate_arm(&r->gate, round);
        EXPECT(VT_WAIT_FOR(atomic_load(&r->ready) == ELECTORS, 10000), "round %d: electors did not finish", round);

        uint64_t term_after = atomic_load(&hb->hdr->term);
        uint32_t sum = 0;
        for (int i = 0; i < ELECTORS; i++) {
            sum += atomic_load(&r->changed[i]);
            EXPECT(atomic_load(&r->errors[i]) == 0, "round %d: elector %d saw errors", round, i);
            EXPECT(atomic_load(&r->disagree[i]) == 0, "round %d: elector %d saw the term go back", round, i);
            EXPECT(atomic_load(&r->last_pid[i]) == want && atomic_load(&r->last_term[i]) == term_after,
                   "round %d: elector %d ended on pid %u term %llu, expected pid %u term %llu", round, i,
                   atomic_load(&r->last_pid[i]), (unsigned long long)atomic_load(&r->last_term[i]), want,
                   (unsigned long long)term_after);
        }
        EXPECT(term_after - term_before == (change ? 1u : 0u),
               "round %d: leader %s, term rose by %llu", round, change ? "changed" : "stayed",
               (unsigned long long)(term_after - term_before));
        EXPECT(sum == term_after - term_before, "round %d: %u electors said 'changed', term rose by %llu", round,
               sum, (unsigned long long)(term_after - term_before));
        /* Never two coordinators among live slots, and the one is the lowest. */
        uint64_t e = vigil_hb_epoch(hb);
        uint32_t coord = 0, coord_slot = UINT32_MAX;
        for (uint32_t i = 0; i < hb->capacity; i++) {
            uint32_t p = atomic_load(&hb->slots[i].pid);
            if (vigil_hb_is_live_at(p, atomic_load(&hb->slots[i].last_seen_epoch), e, GRACE) &&
                atomic_load(&hb->slots[i].role) == VIGIL_ROLE_COORDINATOR) {
                coord++;
                coord_slot = i;
            }
        }
        EXPECT(coord == 1 && coord_slot == want_slot, "round %d: %u live coordinators (slot %u), expected slot %u",
               round, coord, coord_slot, want_slot);
        EXPECT(vigil_leader_is(hb, want_slot, GRACE), "round %d: leader_is false for the leader", round);
        prev_leader = want;
    }
    for (int i = 0; i < ELECTORS; i++)
        EXPECT(vt_wait(el[i], 10000) == 0, "elector %d failed", i);
    atomic_store(&r->stop_reader, 1);
    EXPECT(vt_wait(reader, 10000) == 0, "the reader failed");
    EXPECT(atomic_load(&r->reader_bad) == 0 && atomic_load(&r->reads) > 0,
           "the reader saw a term with two leaders, or the term go back, %u times in %llu reads",
           atomic_load(&r->reader_bad), (unsigned long long)atomic_load(&r->reads));
    EXPECT(atomic_load(&hb->hdr->term) == changes_expected, "term %llu after %u changes",
           (unsigned long long)atomic_load(&hb->hdr->term), changes_expected);
    munmap(r, sizeof(*r));
    vigil_hb_close(hb);
    return 0;
}

/* An elector that SIGKILLs itself at `point`; exits 0 if it got past. */
static int kill_point;
static void die_at(int point)
{
    if (point == kill_point)
        raise(SIGKILL);
}

/*
 * Slots a (pid 100) and b (pid 200); 100 leads at term 1, then goes stale,
 * so the next election moves the leader to 200. An elector killed at each
 * point of that election: before the change (holding the lock), after it,
 * after the demotion. Then leader_get gives a leader and a term that
 * agree, and the next election (taking over the dead elector's lock)
 * finishes the change with the term risen exactly once, one coordinator.
 * (Mutant: install the term before the leader, the kill between the two
 * stores: leader_get then pairs 100 with term 2, and this test fails.)
 */
static int test_elector_killed_at_each_point(void)
{
    static const int points[] = { EP_LOCKED, EP_CHANGED, EP_DEMOTED };
    for (size_t k = 0; k < sizeof(points) / sizeof(points[0]); k++) {
        char name[32];
        snprintf(name, sizeof(name), "killed%d.hb", points[k]);
        vigil_hb *hb = vt_hb_fresh(name, 4);
        uint32_t a, b;
        EXPECT_RC(vigil_hb_register(hb, 100, &a), 0);
        EXPECT_RC(vigil_hb_register(hb, 200, &b), 0);
        vigil_leader out, got;
        EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 1);
        vt_hb_tick_keep(hb, GRACE + 1, UINT64_C(1) << b);
        fflush(NULL);
        pid_t kid = fork();
        if (kid == 0) {
            vigil_hb *mine;
            if (vigil_hb_open(vt_path(name), 0, &mine) < 0)
                _exit(3);
            kill_point = points[k];
            vigil_elect_hook = die_at;
            vigil_leader_elect(mine, GRACE, NULL);
            _exit(0);
        }
        EXPECT(vt_wait(kid, 20000) == 128 + SIGKILL, "point %d: the elector was not killed there", points[k]);
        bool installed = points[k] != EP_LOCKED;
        EXPECT_RC(vigil_leader_get(hb, &got), 0);
        EXPECT(got.slot == (installed ? b : a) && got.term == (installed ? 2u : 1u),
               "point %d: leader_get gives slot %u term %llu, expected slot %u term %u", points[k], got.slot,
               (unsigned long long)got.term, installed ? b : a, installed ? 2 : 1);
        EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), installed ? 0 : 1);
        EXPECT(out.slot == b && out.pid == 200 && out.term == 2,
               "point %d: after the next election slot %u pid %u term %llu, expected slot %u pid 200 term 2",
               points[k], out.slot, out.pid, (unsigned long long)out.term, b);
        EXPECT(atomic_load(&hb->slots[b].role) == VIGIL_ROLE_COORDINATOR &&
                   atomic_load(&hb->slots[a].role) == VIGIL_ROLE_WORKER,
               "point %d: roles %u (a), %u (b)", points[k], atomic_load(&hb->slots[a].role),
               atomic_load(&hb->slots[b].role));
        EXPECT(atomic_load(&hb->hdr->elect_seq) % 2 == 0, "point %d: the lock was left held", points[k]);
        vigil_hb_close(hb);
    }
    return 0;
}

/* The newcomer: elects, stopping at EP_LOCKED with the lock held. */
static int elect_stopping_locked(vigil_hb *hb)
{
    vt_stop_point = EP_LOCKED;
    vigil_elect_hook = vt_stop_at;
    return vigil_leader_elect(hb, GRACE, NULL) >= 0 ? 0 : 1;
}

/*
 * Issue 17.6, the election lock: a holding {w, s} whose holder a judge
 * finds dead; elector E1 judges it and is stopped before its take-over
 * (EP_JUDGED); another election takes the lock over and releases it; the
 * newcomer N, whose lock word is w itself, takes the lock and is stopped
 * holding it. E1 resumes: its take-over from {w, s} must fail (the lock
 * changed hands: the sequence moved), so E1 waits for N, who is alive,
 * and gives up with VIGIL_EBUSY, and the lock stays N's. The take-over
 * from the word alone, as before issue 17, robbed N here.
 */
static int test_take_over_after_the_lock_changed_hands(void)
{
    vigil_hb *hb = vt_hb_fresh("elect_aba.hb", 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 100, &s), 0);
    struct vt_twin n;
    EXPECT(vt_twin_start(&n, hb, vt_path("elect_aba.hb"), elect_stopping_locked), "twin");
    struct vigil_hb_header *h = hb->hdr;
    atomic_store(&h->elect_lock, n.word); /* a holder with N's word, "dead" while N maps nothing */
    atomic_fetch_add(&h->elect_seq, 1);

    int result[2];
    EXPECT(pipe(result) == 0, "pipe");
    fflush(NULL);
    pid_t e1 = fork();
    if (e1 == 0) {
        vigil_hb *mine;
        if (vigil_hb_open(vt_path("elect_aba.hb"), 0, &mine) < 0)
            _exit(3);
        vt_stop_point = EP_JUDGED;
        vigil_elect_hook = vt_stop_at;
        int rc = vigil_leader_elect(mine, GRACE, NULL);
        _exit(write(result[1], &rc, sizeof(rc)) == sizeof(rc) ? 0 : 4);
    }
    EXPECT(vt_wait_stopped(e1, 20000), "E1 never judged the holder dead");
    vigil_leader out;
    EXPECT_RC(vigil_leader_elect(hb, GRACE, &out), 1); /* another elector takes over, elects, releases */
    EXPECT(vt_twin_go(&n) && vt_wait_stopped(n.pid, 20000), "N never took the lock");
    uint64_t seq = atomic_load(&h->elect_seq);
    EXPECT(atomic_load(&h->elect_lock) == n.word && seq % 2 == 1, "N does not hold the lock");
    kill(e1, SIGCONT);
    EXPECT(vt_wait(e1, 20000) == 0, "E1 failed");
    int rc = 0;
    EXPECT(read(result[0], &rc, sizeof(rc)) == sizeof(rc), "E1's answer");
    EXPECT(rc == VIGIL_EBUSY, "E1, whose holder was judged before the lock changed hands, got %d (%s), "
                              "expected VIGIL_EBUSY", rc, vigil_strerror(rc));
    EXPECT(atomic_load(&h->elect_lock) == n.word && atomic_load(&h->elect_seq) == seq,
           "N was robbed: the lock is %#llx at %llu", (unsigned long long)atomic_load(&h->elect_lock),
           (unsigned long long)atomic_load(&h->elect_seq));
    kill(n.pid, SIGCONT);
    EXPECT(vt_wait(n.pid, 20000) == 100, "N's election failed");
    EXPECT(atomic_load(&h->elect_seq) == seq + 1, "N's release: sequence %llu", (unsigned long long)atomic_load(&h->elect_seq));
    close(result[0]);
    close(result[1]);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_kill_leader), VT_CASE(test_racing_electors), VT_CASE(test_elector_killed_at_each_point),
        VT_CASE(test_take_over_after_the_lock_changed_hands))
