/* SPDX-License-Identifier: MIT */
/*
 * The network as an adversary (tests/etcd_proxy.py, a fault proxy in front
 * of each member of the 3-member cluster): every etcd mutation vigil sends
 * is safe to be applied late or twice, and a caller is told an outcome
 * only once it is known (the rule: src/etcd/group_fence.c, and the guide's
 * "Requests that arrive late or twice").
 *
 * Each mutation twice: "late", its request held by the proxy the client
 * speaks to first, so that the client gives up on it and sends it to the
 * next member, where it lands; the caller goes on; then the held copy is
 * delivered, and must change nothing. And "twice", its request delivered
 * twice in a row, the client told the second answer. The moment of each
 * fault is the request's own (the proxy matches it by its keys), never a
 * time.
 */
#include "grouptest.h"

#include <inttypes.h>
#include <pthread.h>

#define TTL 10000

#define EXPECT_STR(got, want)                                                 \
    do {                                                                      \
        const char *got_ = (got);                                             \
        EXPECT(strcmp(got_, (want)) == 0, "%s: expected '%s', got '%s'", #got, (want), got_); \
    } while (0)

static const char *eps;

#define NEED_PROXIES()                                                        \
    do {                                                                      \
        int need_rc_ = et_proxies(&eps);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

/* A handle through every proxy that gives up on a member within 1 s. */
static vigil_etcd *connect_quick(void)
{
    vigil_etcd *e = et_connect(eps);
    vigil_etcd_set_timeout(e, 500, 1000);
    return e;
}

/* The proxy the next request of e goes to first. */
static int first_proxy(vigil_etcd *e)
{
    return et_proxy_of(vigil_etcd__current_endpoint(e));
}

/* "released 1 200/false": the late copy delivered, and refused. */
static bool refused(const char *answer)
{
    return strcmp(answer, "released 1 200/false") == 0;
}

static int owned(vigil_etcd *e, const char *g)
{
    vigil_group_stats st;
    return vigil_group_stats_get(e, g, &st) == 0 ? (int)st.units_owned : -1;
}

/* ---- work units ------------------------------------------------------------- */

/* The claim held; the member's giveback; the claim delivered late must not
 * make the unit the member's again (before the fence it did: the unit
 * owned on a live member's lease, unknown to it, issue 25.1). */
static int test_claim_late(void)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("claim-late");
    EXPECT_RC(vigil_group_add(d, g, "u0"), 0);
    vigil_group_member *m = gt_join(e, g, "m", TTL, NULL), *b = gt_join(d, g, "b", TTL, NULL);
    EXPECT(m && b, "join failed");
    int p = first_proxy(e);
    EXPECT(p > 0, "no proxy is first for %s", vigil_etcd__current_endpoint(e));
    EXPECT_STR(et_proxy(p, "hold put:%s/work/owners/u0", g), "ok");
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(m, &u), 0);
    EXPECT_STR(et_proxy(p, "held"), "held 1");
    EXPECT_RC(vigil_group_giveback(m, &u), 0);
    const char *late = et_proxy(p, "release");
    EXPECT(refused(late), "the claim delivered late: '%s'", late);
    EXPECT(owned(d, g) == 0, "owned %d after the giveback", owned(d, g));
    vigil_group_unit v;
    EXPECT_RC(vigil_group_take(b, &v), 0);
    EXPECT_RC(vigil_group_done(b, &v), 0);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

/* ---- rounds ------------------------------------------------------------------ */

static const char *round_key(const char *g, uint64_t r, const char *rest)
{
    static char buf[2][300];
    static unsigned next;
    char *b = buf[next++ % 2];
    snprintf(b, sizeof(buf[0]), "%s/rounds/%020" PRIu64 "/%s", g, r, rest);
    return b;
}

/* The arrival held; the waiter times out and withdraws; the arrival
 * delivered late must not count it (before the fence another member's
 * wait was released at once, counting the member that had left, issue
 * 25.2). */
static int test_arrive_late(void)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("arrive-late");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL), *b = gt_join(d, g, "b", TTL, NULL);
    EXPECT(a && b, "join failed");
    int p = first_proxy(e);
    EXPECT_STR(et_proxy(p, "hold put:%s", round_key(g, 0, "a/a")), "ok");
    EXPECT_RC(vigil_group_barrier_wait(a, 0, 2500000000ull), VIGIL_ETIMEDOUT);
    EXPECT_STR(et_proxy(p, "held"), "held 1");
    const char *late = et_proxy(p, "release");
    EXPECT(refused(late), "the arrival delivered late: '%s'", late);
    EXPECT_RC(vigil_group_barrier_wait(b, 0, 500000000ull), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

struct waiter {
    vigil_group_member *m;
    uint64_t            round, timeout_ns;
    int                 rc;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = vigil_group_barrier_wait(w->m, w->round, w->timeout_ns);
    return NULL;
}

static int arrivals(vigil_etcd *e, const char *g, uint64_t r)
{
    char k[300];
    snprintf(k, sizeof(k), "%s/rounds/%020" PRIu64 "/a", g, r);
    return et_count_under(e, k);
}

/* The withdrawal held (the waiter told VIGIL_ETIMEDOUT by the copy that
 * landed elsewhere); the member arrives again; the withdrawal delivered
 * late must not take that arrival away (before, it did: the round waited
 * for a member that was waiting). */
static int test_withdraw_late(void)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("withdraw-late");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL), *b = gt_join(d, g, "b", TTL, NULL);
    EXPECT(a && b, "join failed");
    int p = first_proxy(e);
    EXPECT_STR(et_proxy(p, "hold put:%s", round_key(g, 0, "gate")), "ok");
    EXPECT_RC(vigil_group_barrier_wait(a, 0, 300000000ull), VIGIL_ETIMEDOUT);
    EXPECT_STR(et_proxy(p, "held"), "held 1");
    struct waiter w = { a, 0, 30000000000ull, INT32_MIN };
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, wait_thread, &w) == 0, "no thread");
    bool in = VT_WAIT_FOR(arrivals(d, g, 0) == 1, 20000);
    const char *late = et_proxy(p, "release");
    int rb = vigil_group_barrier_wait(b, 0, 20000000000ull);
    pthread_join(th, NULL);
    EXPECT(in, "a's second arrival never showed");
    EXPECT(refused(late), "the withdrawal delivered late: '%s'", late);
    EXPECT(rb >= 0 && w.rc >= 0 && (rb == VIGIL_SERIAL) + (w.rc == VIGIL_SERIAL) == 1, "round 0: a %d, b %d", w.rc,
           rb);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_claim_late), VT_CASE(test_arrive_late), VT_CASE(test_withdraw_late))
