/* SPDX-License-Identifier: MIT */
/*
 * Description: starting a barrier safely. Processes that register and
 * wait from round 0 at once can see early rounds released before the
 * whole group exists: a peer not yet registered is not live. The start
 * gate (round 0 waited with a quorum of the group, examples/barrier_start.c)
 * makes every later round wait for all of them: each process counts its
 * arrival at round r before waiting, and on release finds every member's
 * arrival counted.
 */
#include "testutil.h"

enum { GROUP = 4, ROUNDS = 400 };

struct counts {
    _Atomic int arrived[ROUNDS + 1];
    _Atomic int early; /* releases that found a member missing */
    _Atomic int first_early;
};

static _Noreturn void member(const char *hbp, const char *bp, struct counts *c)
{
    vigil_hb *hb;
    vigil_barrier *b;
    uint32_t slot;
    if (vigil_hb_open(hbp, 0, &hb) < 0 || vigil_barrier_open(bp, hb, 0, &b) < 0 ||
        vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        _exit(3);
    if (vigil_barrier_wait_quorum(b, 0, GROUP) < 0)
        _exit(4);
    for (int r = 1; r <= ROUNDS; r++) {
        atomic_fetch_add(&c->arrived[r], 1);
        int rc = vigil_barrier_wait(b, (uint32_t)r);
        if (rc < 0)
            _exit(5);
        if (atomic_load(&c->arrived[r]) != GROUP && atomic_fetch_add(&c->early, 1) == 0)
            atomic_store(&c->first_early, r);
    }
    _exit(0);
}

static int test_start_gate(void)
{
    const char *hbp = vt_path("start.hb"), *bp = vt_path("start.barrier");
    vigil_hb *hb = vt_hb_fresh_at(hbp, 16);
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(bp, hb, 5, &b), 0);
    struct counts *c = vt_shared(sizeof(*c));
    pid_t kids[GROUP];
    for (int i = 0; i < GROUP; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            member(hbp, bp, c);
    }
    int bad = 0;
    for (int i = 0; i < GROUP; i++) {
        int st = vt_wait(kids[i], 120000);
        if (st != 0) {
            fprintf(stderr, "member %d ended with %d (3 open, 4 gate, 5 wait; -1 hung)\n", i, st);
            bad++;
        }
    }
    EXPECT(bad == 0, "%d of %d members failed", bad, GROUP);
    EXPECT(atomic_load(&c->early) == 0, "%d releases found a member missing, the first at round %d",
           atomic_load(&c->early), atomic_load(&c->first_early));
    EXPECT(vigil_barrier_epoch(b) == ROUNDS + 1, "expected the barrier at round %d, found %u", ROUNDS + 1,
           vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_start_gate))
