/* SPDX-License-Identifier: MIT */
/*
 * Description: leader election with real processes. Killing the leader
 * (SIGKILL) makes the next-lowest live pid leader with a higher term, by
 * the grace window or at once through the probe-assisted scan. Elector
 * processes released together by a start gate race round after round
 * while membership changes between rounds: never two coordinators among
 * live slots, every elector agrees on (leader, term), and the term rises
 * exactly once per change (the electors' "changed" answers add up to the
 * term's rise, and that is 1 exactly when the lowest live pid moved).
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

struct race {
    _Atomic int      ready;
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
    EXPECT(atomic_load(&hb->hdr->term) == changes_expected, "term %llu after %u changes",
           (unsigned long long)atomic_load(&hb->hdr->term), changes_expected);
    munmap(r, sizeof(*r));
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_kill_leader), VT_CASE(test_racing_electors))
