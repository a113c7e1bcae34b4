/* SPDX-License-Identifier: MIT */
/*
 * Description: the barrier's protocol (src/barrier_wait.c, THE PROTOCOL;
 * model/barrier.pml) at the two moments where the design before it was
 * wrong, with real processes held at a test hook:
 *
 * - a releaser stopped between its judgement and its commit, while the
 *   waiter it counted times out and a peer arrives in its place: the
 *   stale judgement must not release the round (model/barrier_old.pml's
 *   counterexample, the same interleaving);
 * - a bound arrival killed just before and just after its record: the
 *   round still waits for every live peer;
 * - a committer killed between its commit and its state move while the
 *   only other waiter is ahead of the barrier (issue 17.1): the waiter
 *   ahead finishes the committed round and goes on to its own.
 *
 * Every moment is decided by the test: children stop themselves at a hook
 * (SIGSTOP, seen by waitpid) or wait there to be killed; the heartbeat
 * epoch only moves when the parent ticks it.
 */
#include "testutil.h"
#include "barriertest.h"

#include <stdatomic.h>
#include <sys/wait.h>

#include "barrier_internal.h"

#define MS 1000000ull

struct shared {
    _Atomic int hook_at;   /* the point a child stops at, for the child that arms it */
    _Atomic int parked;    /* a child reached its hook */
    _Atomic int go[4];     /* per child: 1 arrive, 2 arrive again */
    _Atomic int rc[4];     /* per child: its wait's result + 1000 once known */
    _Atomic uint32_t slot[4];
    _Atomic int ready;
};
static struct shared *sh;

static void stop_self(int point)
{
    if (point != atomic_load(&sh->hook_at))
        return;
    atomic_store(&sh->hook_at, 0); /* once */
    atomic_store(&sh->parked, 1);
    raise(SIGSTOP);
}

static void await_kill(int point)
{
    if (point != atomic_load(&sh->hook_at))
        return;
    atomic_store(&sh->parked, 1);
    vt_await_kill();
}

static vigil_hb *hb_of(const char *name)
{
    vigil_hb *hb;
    if (vigil_hb_open(vt_path(name), 0, &hb) < 0)
        _exit(90);
    return hb;
}

/*
 * A child: registers, binds, then on go == 1 waits for round 0 (with
 * timeout_ns, UINT64_MAX for none) and posts the result; on go == 2 waits
 * again, untimed. Between commands it keeps its slot beating, as a live
 * peer that has not come to the barrier yet does.
 */
static int child(int idx, const char *hbn, const char *bn, uint64_t timeout_ns, void (*hook)(int))
{
    vigil_hb *hb = hb_of(hbn);
    vigil_barrier *b;
    uint32_t slot;
    if (vigil_barrier_open(vt_path(bn), hb, 0, &b) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 ||
        vigil_barrier_bind(b, slot) < 0)
        return 91;
    atomic_store(&sh->slot[idx], slot);
    atomic_fetch_add(&sh->ready, 1);
    vigil_barrier_hook = hook;
    for (int want = 1; want <= 2; want++) {
        if (!VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx]) >= want), 60000))
            return 92;
        int rc = vigil_barrier_wait_timeout(b, 0, want == 1 ? timeout_ns : UINT64_MAX);
        atomic_store(&sh->rc[idx], rc + 1000);
        if (rc != VIGIL_ETIMEDOUT)
            break;
    }
    /* Stay registered and beating until the parent is done looking. */
    VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx]) >= 3), 60000);
    return 0;
}

static pid_t spawn(int idx, const char *hbn, const char *bn, uint64_t timeout_ns, void (*hook)(int))
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        vt_own_pgrp(); /* stopped by the test */
        _exit(child(idx, hbn, bn, timeout_ns, hook));
    }
    return p;
}

static vigil_barrier_state peek(const char *bn)
{
    vigil_barrier_state st = { 0 };
    vigil_barrier_peek(vt_path(bn), &st);
    return st;
}

static int result(int idx)
{
    return atomic_load(&sh->rc[idx]) - 1000;
}

/*
 * Issue 9.1's interleaving, grace 2, all handles bound:
 *   X registered long ago and is stale. W arrives and waits with a
 *   timeout. R arrives, judges (live = {W, R}, both recorded) and is
 *   stopped before its commit. X beats. W times out. X arrives, judges
 *   the round incomplete (W is live, no record) and sleeps. R resumes.
 * The round must not release: W was told it left.
 */
static int test_stale_judgement_after_withdrawal(void)
{
    enum { W, R, X };
    vt_barrier_files("sj.hb", "sj.b", 2);
    memset(sh, 0, sizeof(*sh));
    pid_t kid[3];
    kid[X] = spawn(X, "sj.hb", "sj.b", UINT64_MAX, NULL);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 1, 20000), "X never registered");
    kill(kid[X], SIGSTOP); /* X stops beating: stale after 3 ticks */
    EXPECT(waitpid(kid[X], NULL, WUNTRACED) == kid[X], "X not stopped");
    /* W's timeout only has to outlast the parent's few steps from its
     * arrival to its SIGSTOP; it passes while W is stopped. */
    kid[W] = spawn(W, "sj.hb", "sj.b", 2000 * MS, NULL);
    kid[R] = spawn(R, "sj.hb", "sj.b", UINT64_MAX, stop_self);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 3, 20000), "W and R never registered");
    vigil_hb *hb = hb_of("sj.hb");
    for (int i = 0; i < 3; i++)
        vigil_hb_tick(hb);
    uint32_t xs = atomic_load(&sh->slot[X]);
    EXPECT(VT_WAIT_FOR(vigil_hb_live_count(hb, 2) == 2, 20000), "X not stale");

    /* W arrives; once its record is there, stop it so that its timeout
     * cannot pass before the stage is set. */
    atomic_store(&sh->go[W], 1);
    EXPECT(VT_WAIT_FOR(peek("sj.b").recorded == 1, 20000), "W never arrived");
    kill(kid[W], SIGSTOP);
    EXPECT(waitpid(kid[W], NULL, WUNTRACED) == kid[W], "W not stopped");
    /* R arrives, judges the round complete and stops before its commit. */
    atomic_store(&sh->hook_at, BP_JUDGED);
    atomic_store(&sh->go[R], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->parked), 20000), "R never judged the round complete");
    EXPECT(waitpid(kid[R], NULL, WUNTRACED) == kid[R], "R not stopped");
    /* X beats (live again); W resumes and times out. */
    vigil_hb_beat(hb, xs);
    kill(kid[X], SIGCONT);
    kill(kid[W], SIGCONT);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[W]) != 0, 20000), "W never returned");
    EXPECT(result(W) == VIGIL_ETIMEDOUT, "W: %d", result(W));
    /* X arrives and goes to sleep on an incomplete round. */
    atomic_store(&sh->go[X], 1);
    EXPECT(VT_WAIT_FOR(peek("sj.b").recorded == 2 && peek("sj.b").sleepers >= 1, 20000), "X never slept");
    /* R resumes: its commit must fail; it judges again and sleeps too. */
    kill(kid[R], SIGCONT);
    EXPECT(VT_WAIT_FOR(peek("sj.b").epoch != 0 || peek("sj.b").sleepers == 2, 20000),
           "R never went back: epoch %u sleepers %u recorded %u, R %d X %d, R %s", peek("sj.b").epoch,
           peek("sj.b").sleepers, peek("sj.b").recorded, atomic_load(&sh->rc[R]), atomic_load(&sh->rc[X]),
           waitpid(kid[R], NULL, WNOHANG) == kid[R] ? "ended" : "alive");
    EXPECT(peek("sj.b").epoch == 0, "the round released without W, which was told it left");
    EXPECT(atomic_load(&sh->rc[R]) == 0 && atomic_load(&sh->rc[X]) == 0, "a waiter returned");

    /* W comes back: now the round is complete, and releases once. */
    atomic_store(&sh->rc[W], 0);
    atomic_store(&sh->go[W], 2);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[W]) && atomic_load(&sh->rc[R]) && atomic_load(&sh->rc[X]), 20000),
           "the round never released");
    int serial = (result(W) == VIGIL_SERIAL) + (result(R) == VIGIL_SERIAL) + (result(X) == VIGIL_SERIAL);
    EXPECT(serial == 1 && result(W) >= 0 && result(R) >= 0 && result(X) >= 0, "results W %d R %d X %d",
           result(W), result(R), result(X));
    for (int i = 0; i < 3; i++) {
        atomic_store(&sh->go[i], 3);
        EXPECT(vt_wait(kid[i], 20000) == 0, "child %d", i);
    }
    vigil_hb_close(hb);
    return 0;
}

/*
 * A bound arrival killed just before or just after its record, with a
 * live peer D that has not come yet. A and B arrive; the parent ticks in
 * lockstep until the victim has aged out and A and B have judged the
 * round again twice since; the round must still wait for D.
 */
static int killed_arrival(int point)
{
    enum { A, B, C, D };
    char hbn[16], bn[16];
    snprintf(hbn, sizeof(hbn), "ka%d.hb", point);
    snprintf(bn, sizeof(bn), "ka%d.b", point);
    vt_barrier_files(hbn, bn, 2);
    memset(sh, 0, sizeof(*sh));
    pid_t kid[4];
    for (int i = 0; i < 4; i++)
        kid[i] = spawn(i, hbn, bn, UINT64_MAX, i == C ? await_kill : NULL);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 4, 20000), "children never registered");
    atomic_store(&sh->hook_at, point);
    atomic_store(&sh->go[C], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->parked), 20000), "the victim never reached its hook");
    kill(kid[C], SIGKILL);
    EXPECT(vt_wait(kid[C], 20000) == 128 + SIGKILL, "victim not killed");
    atomic_store(&sh->go[A], 1);
    atomic_store(&sh->go[B], 1);
    uint32_t want = point == BP_RECORDED ? 3 : 2;
    EXPECT(VT_WAIT_FOR(peek(bn).recorded == want, 20000), "A and B never arrived");

    vigil_hb *hb = hb_of(hbn);
    /* Grace 2: the victim is stale 3 ticks after its last beat; then two
     * more, each seen beaten by A, B and D (a waiter beats on every wake
     * and judges right after, so the second proves a judgement). */
    for (int t = 0; t < 5; t++) {
        uint64_t e = vigil_hb_tick(hb);
        for (int i = 0; i < 4; i++) {
            if (i == C)
                continue;
            uint32_t s = atomic_load(&sh->slot[i]);
            EXPECT(VT_WAIT_FOR(atomic_load(&hb->slots[s].last_seen_epoch) >= e, 20000), "peer %d stopped beating",
                   i);
        }
    }
    EXPECT(vigil_hb_live_count(hb, 2) == 3, "the victim is still live");
    EXPECT(peek(bn).epoch == 0, "released while live peer D had not arrived");
    atomic_store(&sh->go[D], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[A]) && atomic_load(&sh->rc[B]) && atomic_load(&sh->rc[D]), 20000),
           "the round never released");
    int serial = (result(A) == VIGIL_SERIAL) + (result(B) == VIGIL_SERIAL) + (result(D) == VIGIL_SERIAL);
    EXPECT(serial == 1, "%d serial callers", serial);
    for (int i = 0; i < 4; i++) {
        if (i == C)
            continue;
        atomic_store(&sh->go[i], 3);
        EXPECT(vt_wait(kid[i], 20000) == 0, "child %d", i);
    }
    vigil_hb_close(hb);
    return 0;
}

static int test_killed_before_record(void) { return killed_arrival(BP_RECORDING); }
static int test_killed_after_record(void) { return killed_arrival(BP_RECORDED); }

/*
 * Issue 17.1, with grace 2: C (bound) waits for round 1 while the barrier
 * is at round 0. A and B wait_quorum(0, 2); A is killed once it has
 * arrived, B once it has committed round 0 and before it moves the state.
 * Nobody waits at round 0 any more: C must finish round 0, then wait for
 * round 1, which releases with C alone once A and B have aged out.
 */
struct ahead_role {
    uint32_t epoch, quorum;
    int      park; /* the hook point this child is killed at, 0 none */
};
static const struct ahead_role *ahead_me;

static void ahead_hook(int point)
{
    if (ahead_me && point == ahead_me->park) {
        atomic_store(&sh->parked, atomic_load(&sh->parked) + 1);
        vt_await_kill();
    }
}

static int ahead_child(int idx, const struct ahead_role *role)
{
    vigil_hb *hb = hb_of("ah.hb");
    vigil_barrier *b;
    uint32_t slot;
    if (vigil_barrier_open(vt_path("ah.b"), hb, 0, &b) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 ||
        vigil_barrier_bind(b, slot) < 0)
        return 91;
    atomic_store(&sh->slot[idx], slot);
    atomic_fetch_add(&sh->ready, 1);
    ahead_me = role;
    vigil_barrier_hook = ahead_hook;
    if (!VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx]) >= 1), 60000))
        return 92;
    int rc = role->quorum ? vigil_barrier_wait_quorum(b, role->epoch, role->quorum) : vigil_barrier_wait(b, role->epoch);
    atomic_store(&sh->rc[idx], rc + 1000);
    VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx]) >= 3), 60000);
    return 0;
}

static int test_ahead_finishes_killed_commit(void)
{
    enum { A, B, C };
    static const struct ahead_role roles[3] = {
        [A] = { 0, 2, BP_RECORDED }, [B] = { 0, 2, BP_COMMITTED }, [C] = { 1, 0, 0 },
    };
    vt_barrier_files("ah.hb", "ah.b", 2);
    memset(sh, 0, sizeof(*sh));
    pid_t kid[3];
    for (int i = 0; i < 3; i++) {
        fflush(NULL);
        kid[i] = fork();
        if (kid[i] == 0)
            _exit(ahead_child(i, &roles[i]));
    }
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready) == 3, 20000), "children never registered");
    atomic_store(&sh->go[C], 1);
    EXPECT(VT_WAIT_FOR(peek("ah.b").sleepers >= 1, 20000), "C never went to sleep ahead of the barrier");
    atomic_store(&sh->go[A], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->parked) == 1, 20000), "A never arrived");
    kill(kid[A], SIGKILL);
    EXPECT(vt_wait(kid[A], 20000) == 128 + SIGKILL, "A not killed");
    atomic_store(&sh->go[B], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->parked) == 2, 20000), "B never committed round 0");
    kill(kid[B], SIGKILL);
    EXPECT(vt_wait(kid[B], 20000) == 128 + SIGKILL, "B not killed");
    /* Round 0 is committed and nobody waits at it: C must finish it. */
    EXPECT(VT_WAIT_FOR(peek("ah.b").epoch >= 1, 20000),
           "round 0, committed by a killed B, was never finished: C, waiting ahead, left it (epoch %u)",
           peek("ah.b").epoch);
    /* Round 1: A and B age out (C beats on every wake), then C releases it. */
    vigil_hb *hb = hb_of("ah.hb");
    uint32_t cs = atomic_load(&sh->slot[C]);
    for (int t = 0; t < 4; t++) {
        uint64_t e = vigil_hb_tick(hb);
        EXPECT(VT_WAIT_FOR(atomic_load(&hb->slots[cs].last_seen_epoch) >= e, 20000), "C stopped beating");
    }
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[C]) != 0, 20000), "C's round 1 never released");
    EXPECT(result(C) == VIGIL_SERIAL, "C: expected VIGIL_SERIAL for round 1, got %d (%s)", result(C),
           vigil_strerror(result(C)));
    EXPECT(peek("ah.b").epoch == 2, "epoch %u", peek("ah.b").epoch);
    atomic_store(&sh->go[C], 3);
    EXPECT(vt_wait(kid[C], 20000) == 0, "C");
    vigil_hb_close(hb);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_stale_judgement_after_withdrawal),
        VT_CASE(test_killed_before_record),
        VT_CASE(test_killed_after_record),
        VT_CASE(test_ahead_finishes_killed_commit),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
