/* SPDX-License-Identifier: MIT */
/*
 * Description: the barrier's wait in slices (vigil_barrier_wait_slice,
 * vigil_barrier_withdraw), which the Python package waits with so that
 * Ctrl-C runs: a slice that ends keeps the arrival (bound or unbound) and
 * is never counted as a withdrawal; the next slice does not arrive twice;
 * the round releases over a caller between slices; withdraw takes the
 * arrival back once, or finds the round passed. And the safe start in
 * slices (vigil_barrier_start_slice), which bindings wait with too.
 */
#include "testutil.h"

#define MS 1000000ull

static vigil_barrier *barrier_at(const char *name, vigil_hb *hb, bool create)
{
    vigil_barrier *b = NULL;
    int rc = create ? vigil_barrier_create(vt_path(name), hb, 1000, &b)
                    : vigil_barrier_open(vt_path(name), hb, 0, &b);
    if (rc < 0) {
        fprintf(stderr, "barrier %s: %s\n", name, vigil_strerror(rc));
        exit(1);
    }
    return b;
}

static vigil_barrier_state peek(const char *name)
{
    vigil_barrier_state st = { 0 };
    int rc = vigil_barrier_peek(vt_path(name), &st);
    if (rc < 0) {
        fprintf(stderr, "peek %s: %s\n", name, vigil_strerror(rc));
        exit(1);
    }
    return st;
}

static uint64_t withdrawals(const vigil_barrier *b)
{
    vigil_barrier_counters c = { 0 };
    if (vigil_barrier_stats(b, &c) < 0)
        return UINT64_MAX;
    return c.withdrawals;
}

/* Two registered slots of this process and two handles on one barrier:
 * `a` waits in slices, `other` is the second peer. */
struct peers {
    vigil_hb *hb;
    vigil_barrier *a, *other;
    const char *name;
};

static struct peers two_peers(const char *name, bool bound)
{
    char hbname[64];
    snprintf(hbname, sizeof(hbname), "%s.hb", name);
    struct peers p = { .hb = vt_hb_fresh(hbname, 4), .name = name };
    uint32_t s1, s2;
    if (vigil_hb_register(p.hb, (uint32_t)getpid(), &s1) < 0 || vigil_hb_register(p.hb, (uint32_t)getpid(), &s2) < 0) {
        fprintf(stderr, "%s: register failed\n", name);
        exit(1);
    }
    p.a = barrier_at(name, p.hb, true);
    p.other = barrier_at(name, p.hb, false);
    if (bound && (vigil_barrier_bind(p.a, s1) < 0 || vigil_barrier_bind(p.other, s2) < 0)) {
        fprintf(stderr, "%s: bind failed\n", name);
        exit(1);
    }
    return p;
}

static void peers_close(struct peers *p)
{
    vigil_barrier_close(p->a);
    vigil_barrier_close(p->other);
    vigil_hb_close(p->hb);
}

/* Three slices end with the round gathering: one arrival stands, nothing
 * is counted as withdrawn; a second peer then releases the round over the
 * caller between slices, whose next slice returns 0 and clears *arrived. */
static int slices_keep_the_arrival(bool bound)
{
    const char *bn = bound ? "keep_bound.b" : "keep_unbound.b";
    struct peers p = two_peers(bn, bound);
    vigil_barrier *a = p.a, *other = p.other;
    uint32_t e = vigil_barrier_epoch(a);
    int arrived = 0;
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 2 * MS, &arrived), VIGIL_ETIMEDOUT);
        EXPECT(arrived == 1, "slice %d: arrived %d, want 1", i, arrived);
        vigil_barrier_state st = peek(bn);
        EXPECT(st.arrived == 1 && st.recorded == (bound ? 1u : 0u),
               "slice %d: arrived %u recorded %u: one arrival must stand, once", i, st.arrived, st.recorded);
    }
    EXPECT(withdrawals(a) == 0, "withdrawals %llu after slices, want 0",
           (unsigned long long)withdrawals(a));
    /* Two live slots: the other caller's arrival completes the round. */
    EXPECT_RC(vigil_barrier_wait_timeout(other, e, 10000 * MS), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 2 * MS, &arrived), 0);
    EXPECT(arrived == 0, "after the release: arrived %d, want 0", arrived);
    EXPECT(vigil_barrier_epoch(a) == e + 1, "epoch %u, want %u", vigil_barrier_epoch(a), e + 1);
    EXPECT(withdrawals(a) == 0, "withdrawals %llu, want 0", (unsigned long long)withdrawals(a));
    peers_close(&p);
    return 0;
}

static int test_slices_keep_a_bound_arrival(void) { return slices_keep_the_arrival(true); }
static int test_slices_keep_an_unbound_arrival(void) { return slices_keep_the_arrival(false); }

/* Withdraw takes a kept arrival back, counted once; a second withdraw
 * has nothing to take; the peer alone then cannot release the round. */
static int withdraw_takes_it_back(bool bound)
{
    const char *bn = bound ? "wd_bound.b" : "wd_unbound.b";
    struct peers p = two_peers(bn, bound);
    vigil_barrier *a = p.a, *other = p.other;
    uint32_t e = vigil_barrier_epoch(a);
    int arrived = 0;
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 1 * MS, &arrived), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 1 * MS, &arrived), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_barrier_withdraw(a, e, &arrived), VIGIL_ETIMEDOUT);
    EXPECT(arrived == 0, "after withdraw: arrived %d, want 0", arrived);
    vigil_barrier_state st = peek(bn);
    EXPECT(st.arrived == 0 && st.recorded == 0, "after withdraw: arrived %u recorded %u, want 0 0",
           st.arrived, st.recorded);
    EXPECT(withdrawals(a) == 1, "withdrawals %llu, want 1", (unsigned long long)withdrawals(a));
    EXPECT_RC(vigil_barrier_withdraw(a, e, &arrived), VIGIL_ETIMEDOUT);
    EXPECT(withdrawals(a) == 1, "a second withdraw counted: %llu", (unsigned long long)withdrawals(a));
    EXPECT_RC(vigil_barrier_wait_timeout(other, e, 5 * MS), VIGIL_ETIMEDOUT);
    EXPECT(vigil_barrier_epoch(a) == e, "released without the withdrawn caller");
    peers_close(&p);
    return 0;
}

static int test_withdraw_bound(void) { return withdraw_takes_it_back(true); }
static int test_withdraw_unbound(void) { return withdraw_takes_it_back(false); }

/* A round released between a slice and the withdraw: the caller passed it. */
static int test_withdraw_after_release_is_void(void)
{
    struct peers p = two_peers("void.b", true);
    vigil_barrier *a = p.a, *other = p.other;
    uint32_t e = vigil_barrier_epoch(a);
    int arrived = 0;
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 1 * MS, &arrived), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_barrier_wait_timeout(other, e, 10000 * MS), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_withdraw(a, e, &arrived), 0);
    EXPECT(arrived == 0 && withdrawals(a) == 0, "arrived %d withdrawals %llu, want 0 0", arrived,
           (unsigned long long)withdrawals(a));
    peers_close(&p);
    return 0;
}

/* A quorum, an early epoch (nothing arrives, nothing is kept), the checks. */
static int test_quorum_early_and_checks(void)
{
    vigil_hb *hb = vt_hb_fresh("q.hb", 4);
    uint32_t s1;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s1), 0);
    vigil_barrier *a = barrier_at("q.b", hb, true), *other = barrier_at("q.b", hb, false);
    uint32_t e = vigil_barrier_epoch(a);
    int arrived = 0;
    EXPECT_RC(vigil_barrier_wait_slice(a, e + 1, 0, 1 * MS, &arrived), VIGIL_ETIMEDOUT);
    EXPECT(arrived == 0 && peek("q.b").arrived == 0, "an early slice arrived");
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 2, 1 * MS, &arrived), VIGIL_ETIMEDOUT);
    EXPECT(arrived == 1 && peek("q.b").arrived == 1, "quorum slice: arrived %d", arrived);
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(other, e, 2, 10000 * MS), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 2, 1 * MS, &arrived), 0);
    EXPECT(arrived == 0 && vigil_barrier_epoch(a) == e + 1, "the quorum round did not release");
    EXPECT_RC(vigil_barrier_wait_slice(NULL, e, 0, 1, &arrived), -EINVAL);
    EXPECT_RC(vigil_barrier_wait_slice(a, e, 0, 1, NULL), -EINVAL);
    EXPECT_RC(vigil_barrier_withdraw(NULL, e, &arrived), -EINVAL);
    EXPECT_RC(vigil_barrier_withdraw(a, e, NULL), -EINVAL);
    EXPECT_RC(vigil_hb_unregister(hb, s1), 0);
    EXPECT_RC(vigil_barrier_wait_slice(a, e + 1, 0, 1 * MS, &arrived), VIGIL_ENOPEERS);
    vigil_barrier_close(a);
    vigil_barrier_close(other);
    vigil_hb_close(hb);
    return 0;
}

/* The start in slices: the arrival stands between slices, nothing is
 * withdrawn, the second member's start releases it, and both get the same
 * first round, on a barrier file already past round 0. */
static int test_start_in_slices(void)
{
    struct peers p = two_peers("start.b", true);
    uint32_t e;
    for (uint32_t i = 0; i < 3; i++) /* a file used before: not at round 0 */
        EXPECT_RC(vigil_barrier_wait_quorum(p.a, i, 1), VIGIL_SERIAL);
    e = vigil_barrier_epoch(p.a);
    int arrived = 0;
    uint32_t round = 12345;
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(vigil_barrier_start_slice(p.a, 2, 2 * MS, &arrived, &round), VIGIL_ETIMEDOUT);
        EXPECT(arrived == 1 && round == e, "slice %d: arrived %d round %u, want 1 %u", i, arrived, round, e);
    }
    EXPECT(withdrawals(p.a) == 0, "withdrawals %llu after slices, want 0", (unsigned long long)withdrawals(p.a));
    uint32_t first = 0;
    EXPECT_RC(vigil_barrier_start(p.other, 2, 10000 * MS, &first), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_start_slice(p.a, 2, 2 * MS, &arrived, &round), 0);
    EXPECT(first == e + 1 && round == e + 1 && arrived == 0, "first rounds %u and %u (arrived %d), want %u",
           first, round, arrived, e + 1);
    /* A start left between slices: withdrawn once, at the round it stood. */
    EXPECT_RC(vigil_barrier_start_slice(p.a, 2, 1 * MS, &arrived, &round), VIGIL_ETIMEDOUT);
    EXPECT(arrived == 1 && round == e + 1, "arrived %d round %u", arrived, round);
    EXPECT_RC(vigil_barrier_withdraw(p.a, round, &arrived), VIGIL_ETIMEDOUT);
    EXPECT(withdrawals(p.a) == 1 && peek("start.b").recorded == 0, "the start was not withdrawn once");
    EXPECT_RC(vigil_barrier_start_slice(p.a, 0, 1, &arrived, &round), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_start_slice(p.a, 2, 1, NULL, &round), -EINVAL);
    EXPECT_RC(vigil_barrier_start_slice(p.a, 2, 1, &arrived, NULL), -EINVAL);
    peers_close(&p);
    return 0;
}

VT_MAIN(VT_CASE(test_slices_keep_a_bound_arrival), VT_CASE(test_slices_keep_an_unbound_arrival),
        VT_CASE(test_withdraw_bound), VT_CASE(test_withdraw_unbound),
        VT_CASE(test_withdraw_after_release_is_void), VT_CASE(test_quorum_early_and_checks),
        VT_CASE(test_start_in_slices))
