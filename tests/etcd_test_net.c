/* SPDX-License-Identifier: MIT */
/*
 * The network as an adversary (tests/etcd_proxy.py, a fault proxy in front
 * of each member of the 3-member cluster): every etcd mutation vigil sends
 * is safe to be applied late or twice, and a caller is told an outcome
 * only once it is known (src/group/group_fence.c, THE RULE; the guide's
 * "Requests that arrive late or twice").
 *
 * Each mutation twice over. "Late": its request held by the proxy the
 * client speaks to first, so that the client gives up on it and sends it
 * to the next member, where it lands; the caller goes on (gives the unit
 * back, withdraws, leaves, proclaims again); then the held copy is
 * delivered, and must change nothing. "Twice": its request delivered
 * twice in a row, the client told the second answer, which must not turn
 * the caller's success into a failure. The request a fault hits is chosen
 * by its keys (the proxy reads them), never by a time.
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

/* A handle through every proxy that gives up on a member within 2 s. */
static vigil_etcd *connect_quick(void)
{
    vigil_etcd *e = et_connect(eps);
    vigil_etcd_set_timeout(e, 500, 2000);
    return e;
}

/* The proxy the next request of e goes to first. */
static int first_proxy(vigil_etcd *e)
{
    return et_proxy_of(vigil_etcd__current_endpoint(e));
}

/* The held copy, delivered late, changed nothing: its txn failed, or etcd
 * refused it (its lease gone). */
static bool not_applied(const char *answer)
{
    int status;
    char ok[8];
    return sscanf(answer, "released 1 %d/%7s", &status, ok) == 2 && (status != 200 || strcmp(ok, "false") == 0);
}

/* The fault's held copy, delivered now, changed nothing. */
#define EXPECT_LATE_VOID(p, what)                                             \
    do {                                                                      \
        const char *late_ = et_proxy((p), "release");                         \
        EXPECT(not_applied(late_), "%s delivered late: '%s'", (what), late_); \
    } while (0)

/* A key's version (puts since its creation), 0 absent, -1 no answer. */
static int key_version(vigil_etcd *e, const char *key)
{
    char b64[VIGIL_ETCD_KEY_B64], body[VIGIL_ETCD_KEY_B64 + 32];
    long http;
    const char *reply;
    size_t len;
    vigil_etcd__b64(key, strlen(key), b64, sizeof(b64));
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", b64);
    if (vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len) < 0 || http != 200)
        return -1;
    const char *v = strstr(reply, "\"version\":\"");
    return v ? atoi(v + 11) : 0;
}

/* ---- a group through the proxies ---------------------------------------------- */

struct net {
    vigil_etcd         *e, *d;   /* through the proxies (quick), and a plain handle */
    const char         *g;
    vigil_group_member *m, *b;   /* m on e, b on d */
    int                 p;       /* the proxy e speaks to first */
};

static int net_up(struct net *n, const char *name, int units, uint64_t b_ttl)
{
    n->e = connect_quick();
    n->d = et_connect(eps);
    n->g = gt_group(name);
    for (int i = 0; i < units; i++) {
        char u[16];
        snprintf(u, sizeof(u), "u%d", i);
        EXPECT_RC(vigil_group_add(n->d, n->g, u), 0);
    }
    n->m = gt_join(n->e, n->g, "m", TTL, NULL);
    n->b = gt_join(n->d, n->g, "b", b_ttl, NULL);
    n->p = first_proxy(n->e);
    EXPECT(n->m && n->b && n->p > 0, "join failed, or no proxy is first (%s)", vigil_etcd__current_endpoint(n->e));
    return 0;
}

static int net_down(struct net *n)
{
    EXPECT_STR(et_proxy(n->p, "clear"), "ok");
    EXPECT_RC(vigil_group_leave(n->b), 0);
    EXPECT_RC(vigil_group_leave(n->m), 0);
    vigil_etcd_close(n->d);
    vigil_etcd_close(n->e);
    return 0;
}

#define NET_UP(n, name, units, b_ttl)                                         \
    do {                                                                      \
        NEED_PROXIES();                                                       \
        if (net_up((n), (name), (units), (b_ttl)))                            \
            return 1;                                                         \
    } while (0)

static int owned(struct net *n)
{
    vigil_group_stats st;
    return vigil_group_stats_get(n->d, n->g, &st) == 0 ? (int)st.units_owned : -1;
}

static const char *gk(const struct net *n, const char *fmt, const char *arg)
{
    static char buf[4][300];
    static unsigned next;
    char *b = buf[next++ % 4], rest[200];
    snprintf(rest, sizeof(rest), fmt, arg);
    snprintf(b, sizeof(buf[0]), "%s/%s", n->g, rest);
    return b;
}

/* ---- work units ------------------------------------------------------------- */

/* The claim held; the member's giveback; the claim delivered late must not
 * make the unit the member's again (before the fence it did: the unit
 * owned on a live member's lease, unknown to it, issue 25.1). */
static int test_claim_late(void)
{
    struct net n;
    NET_UP(&n, "claim-late", 1, TTL);
    EXPECT_STR(et_proxy(n.p, "hold put:%s", gk(&n, "work/owners/%s", "u0")), "ok");
    vigil_group_unit u, v;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "held"), "held 1");
    EXPECT_RC(vigil_group_giveback(n.m, &u), 0);
    EXPECT_LATE_VOID(n.p, "the claim");
    EXPECT(owned(&n) == 0, "owned %d after the giveback", owned(&n));
    EXPECT_RC(vigil_group_take(n.b, &v), 0);
    EXPECT_RC(vigil_group_done(n.b, &v), 0);
    return net_down(&n);
}

struct taker {
    vigil_group_member *m;
    vigil_group_unit    u;
    int                 rc;
    pthread_t           th;
};

static void *take_thread(void *arg)
{
    struct taker *t = arg;
    t->rc = vigil_group_take(t->m, &t->u);
    return NULL;
}

/* The claim held while b claims the unit: the copy sent elsewhere is
 * refused (busy), but the held one may still land, so the member resolves
 * it before answering; b gives the unit back; the held claim delivered
 * late must not make it the member's. */
static int test_claim_late_refused(void)
{
    struct net n;
    NET_UP(&n, "claim-late-refused", 1, TTL);
    EXPECT_STR(et_proxy(n.p, "hold put:%s", gk(&n, "work/owners/%s", "u0")), "ok");
    struct taker t = { .m = n.m, .rc = INT32_MIN };
    EXPECT(pthread_create(&t.th, NULL, take_thread, &t) == 0, "no thread");
    bool held = VT_WAIT_FOR(strcmp(et_proxy(n.p, "held"), "held 1") == 0, 20000);
    vigil_group_unit v;
    int rb = vigil_group_take(n.b, &v);
    pthread_join(t.th, NULL);
    EXPECT(held, "the claim was never held");
    EXPECT_RC(rb, 0);
    EXPECT_RC(t.rc, VIGIL_EBUSY);
    EXPECT_RC(vigil_group_giveback(n.b, &v), 0);
    EXPECT_LATE_VOID(n.p, "the claim");
    EXPECT(owned(&n) == 0, "owned %d after b's giveback", owned(&n));
    return net_down(&n);
}

/* Which proxy but not_p (0: any) has a request waiting (a wait rule's), or 0. */
static int waiting_proxy(int not_p)
{
    for (int i = 1; i <= 3; i++)
        if (i != not_p && strcmp(et_proxy(i, "waiting"), "waiting 1") == 0)
            return i;
    return 0;
}

/* The claim answered at once with an error that leaves it open (how:
 * Unavailable "request timed out", DeadlineExceeded, a 5xx page) and held
 * there, by the member the client speaks to first, or (everywhere) by
 * every member, the claim then sent again as an election is ridden out
 * (group_json.c). The copy sent on waits at its member while b claims the
 * unit, and is refused. A held copy may still land, so the member
 * resolves before answering busy; b gives the unit back; no held claim,
 * delivered late, makes the unit the member's (before, such an answer
 * left no doubt: the unit owned by a live member unknown to it, its takes
 * busy for ever). b speaks to the members directly, past the rules. */
static int claim_open_refused(const char *name, const char *how, bool everywhere)
{
    const char *direct;
    NEED_PROXIES();
    if (et_cluster(&direct))
        return 1;
    vigil_etcd *e = et_connect(eps), *d = et_connect(direct);
    vigil_etcd_set_timeout(e, 500, 60000); /* the copy sent on waits for b's take: no clock decides */
    const char *g = gt_group(name);
    char ko[300];
    snprintf(ko, sizeof(ko), "%s/work/owners/u0", g);
    EXPECT_RC(vigil_group_add(d, g, "u0"), 0);
    vigil_group_member *m = gt_join(e, g, "m", TTL, NULL), *b = gt_join(d, g, "b", TTL, NULL);
    int p = first_proxy(e);
    EXPECT(m && b && p > 0, "join failed, or no proxy is first (%s)", vigil_etcd__current_endpoint(e));
    for (int i = 1; i <= 3; i++)
        if (everywhere || i == p)
            EXPECT_STR(et_proxy(i, "fail put:%s 1 %s", ko, how), "ok");
    for (int i = 1; i <= 3; i++)
        if (everywhere == (i == p)) /* where the next sending goes: after the three failed, p again */
            EXPECT_STR(et_proxy(i, "wait put:%s", ko), "ok");
    struct taker t = { .m = m, .rc = INT32_MIN };
    EXPECT(pthread_create(&t.th, NULL, take_thread, &t) == 0, "no thread");
    int q = 0;
    bool waited = VT_WAIT_FOR((q = waiting_proxy(everywhere ? 0 : p)) > 0, 30000);
    vigil_group_unit u, v;
    int rb = vigil_group_take(b, &v);
    const char *opened = q > 0 ? et_proxy(q, "open") : "none waits";
    bool open_ok = strcmp(opened, "opened 1") == 0;
    pthread_join(t.th, NULL);
    EXPECT(waited && open_ok, "the claim was never sent on (%s)", opened);
    EXPECT_RC(rb, 0);
    EXPECT_RC(t.rc, VIGIL_EBUSY);
    EXPECT_RC(vigil_group_giveback(b, &v), 0);
    for (int i = 1; i <= 3; i++)
        if (everywhere || i == p)
            EXPECT_LATE_VOID(i, "the claim answered with an error");
    vigil_group_stats st;
    EXPECT_RC(vigil_group_stats_get(d, g, &st), 0);
    EXPECT(st.units_owned == 0, "owned %d after b's giveback", (int)st.units_owned);
    EXPECT_RC(vigil_group_take(m, &u), 0);
    EXPECT_RC(vigil_group_done(m, &u), 0);
    for (int i = 1; i <= 3; i++)
        EXPECT_STR(et_proxy(i, "clear"), "ok");
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

static int test_claim_unavailable_refused(void)
{
    return claim_open_refused("claim-unavailable", "unavailable", false);
}

static int test_claim_deadline_refused(void)
{
    return claim_open_refused("claim-deadline", "deadline", false);
}

static int test_claim_page_refused(void)
{
    return claim_open_refused("claim-page", "page", false);
}

static int test_claim_unavailable_everywhere(void)
{
    return claim_open_refused("claim-unavailable-all", "unavailable", true);
}

/* An add delivered twice (the client told the second answer): 0, its own
 * add; another add of the unit after it: -EEXIST. */
static int test_add_twice(void)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick();
    const char *g = gt_group("add-twice");
    int p = first_proxy(e);
    EXPECT(p > 0, "no proxy is first (%s)", vigil_etcd__current_endpoint(e));
    EXPECT_STR(et_proxy(p, "dup put:%s/work/units/u0", g), "ok");
    EXPECT_RC(vigil_group_add(e, g, "u0"), 0);
    const char *stats = et_proxy(p, "stats");
    EXPECT(strstr(stats, " rules 0"), "the add was not delivered twice: %s", stats);
    EXPECT_RC(vigil_group_add(e, g, "u0"), -EEXIST);
    vigil_group_stats st;
    EXPECT_RC(vigil_group_stats_get(e, g, &st), 0);
    EXPECT(st.units_free == 1, "%d units free", (int)st.units_free);
    EXPECT_STR(et_proxy(p, "clear"), "ok");
    vigil_etcd_close(e);
    return 0;
}

/* The claim delivered twice: take answers with the unit, at its token. */
static int test_claim_twice(void)
{
    struct net n;
    NET_UP(&n, "claim-twice", 1, TTL);
    EXPECT_STR(et_proxy(n.p, "dup put:%s", gk(&n, "work/owners/%s", "u0")), "ok");
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT(owned(&n) == 1, "owned %d", owned(&n));
    EXPECT_RC(vigil_group_done(n.m, &u), 0);
    EXPECT(owned(&n) == 0 && key_version(n.d, gk(&n, "work/done/%s", "u0")) == 1, "not done once");
    return net_down(&n);
}

/* A done held, landed elsewhere, delivered late: done once. */
static int test_done_late(void)
{
    struct net n;
    NET_UP(&n, "done-late", 1, TTL);
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "hold put:%s", gk(&n, "work/done/%s", "u0")), "ok");
    EXPECT_RC(vigil_group_done(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "held"), "held 1");
    EXPECT_LATE_VOID(n.p, "the done");
    EXPECT(key_version(n.d, gk(&n, "work/done/%s", "u0")) == 1, "done/u0 put %d times",
           key_version(n.d, gk(&n, "work/done/%s", "u0")));
    return net_down(&n);
}

/* A done delivered twice: 0, done once. */
static int test_done_twice(void)
{
    struct net n;
    NET_UP(&n, "done-twice", 1, TTL);
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "dup put:%s", gk(&n, "work/done/%s", "u0")), "ok");
    EXPECT_RC(vigil_group_done(n.m, &u), 0);
    EXPECT(key_version(n.d, gk(&n, "work/done/%s", "u0")) == 1, "done/u0 put %d times",
           key_version(n.d, gk(&n, "work/done/%s", "u0")));
    return net_down(&n);
}

/* A giveback held; the member takes the unit again; the giveback
 * delivered late must not free the new claim. */
static int test_giveback_late(void)
{
    struct net n;
    NET_UP(&n, "giveback-late", 1, TTL);
    vigil_group_unit u, u2;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "hold del:%s", gk(&n, "work/owners/%s", "u0")), "ok");
    EXPECT_RC(vigil_group_giveback(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "held"), "held 1");
    EXPECT_RC(vigil_group_take(n.m, &u2), 0);
    EXPECT_LATE_VOID(n.p, "the giveback");
    EXPECT(owned(&n) == 1, "owned %d: the new claim freed", owned(&n));
    EXPECT_RC(vigil_group_done(n.m, &u2), 0);
    return net_down(&n);
}

/* A giveback delivered twice: 0, and the unit free for another. */
static int test_giveback_twice(void)
{
    struct net n;
    NET_UP(&n, "giveback-twice", 1, TTL);
    vigil_group_unit u, v;
    EXPECT_RC(vigil_group_take(n.m, &u), 0);
    EXPECT_STR(et_proxy(n.p, "dup del:%s", gk(&n, "work/owners/%s", "u0")), "ok");
    EXPECT_RC(vigil_group_giveback(n.m, &u), 0);
    EXPECT_RC(vigil_group_take(n.b, &v), 0);
    EXPECT_RC(vigil_group_done(n.b, &v), 0);
    return net_down(&n);
}

/* ---- rounds ------------------------------------------------------------------ */

static const char *round_key(const struct net *n, uint64_t r, const char *rest)
{
    static char buf[2][300];
    static unsigned next;
    char *b = buf[next++ % 2];
    snprintf(b, sizeof(buf[0]), "%s/rounds/%020" PRIu64 "/%s", n->g, r, rest);
    return b;
}

struct waiter {
    vigil_group_member *m;
    uint64_t            round, timeout_ns;
    int                 rc;
    pthread_t           th;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = vigil_group_barrier_wait(w->m, w->round, w->timeout_ns);
    return NULL;
}

static bool wait_start(struct waiter *w, vigil_group_member *m, uint64_t round, uint64_t timeout_ms)
{
    *w = (struct waiter){ m, round, timeout_ms * 1000000ull, INT32_MIN, 0 };
    return pthread_create(&w->th, NULL, wait_thread, w) == 0;
}

static int arrivals(const struct net *n, uint64_t r)
{
    char k[300];
    snprintf(k, sizeof(k), "%s/rounds/%020" PRIu64 "/a", n->g, r);
    return et_count_under(n->d, k);
}

/* Round r released with one serial between a and b, counting both. */
static int one_serial(const struct net *n, uint64_t r, int ra, int rb)
{
    vigil_group_peer peers[4];
    vigil_group_round info = { .counted_peers = peers, .counted_cap = 4 };
    EXPECT(ra >= 0 && rb >= 0 && (ra == VIGIL_SERIAL) + (rb == VIGIL_SERIAL) == 1, "round %llu: m %d, b %d",
           (unsigned long long)r, ra, rb);
    EXPECT_RC(vigil_group_round_info(n->d, n->g, r, &info), 0);
    EXPECT(info.counted == 2, "round %llu counted %u", (unsigned long long)r, info.counted);
    return 0;
}

/* The arrival held; the waiter times out and withdraws; the arrival
 * delivered late must not count it (before the fence another member's
 * wait was released at once, counting the member that had left, issue
 * 25.2). */
static int test_arrive_late(void)
{
    struct net n;
    NET_UP(&n, "arrive-late", 0, TTL);
    EXPECT_STR(et_proxy(n.p, "hold put:%s", round_key(&n, 0, "a/m")), "ok");
    EXPECT_RC(vigil_group_barrier_wait(n.m, 0, 3500000000ull), VIGIL_ETIMEDOUT);
    EXPECT_STR(et_proxy(n.p, "held"), "held 1");
    EXPECT_LATE_VOID(n.p, "the arrival");
    EXPECT_RC(vigil_group_barrier_wait(n.b, 0, 500000000ull), VIGIL_ETIMEDOUT);
    return net_down(&n);
}

/* An arrival delivered twice: the round released once, counting both. */
static int test_arrive_twice(void)
{
    struct net n;
    NET_UP(&n, "arrive-twice", 0, TTL);
    struct waiter b;
    EXPECT(wait_start(&b, n.b, 0, 30000), "no thread");
    bool in = VT_WAIT_FOR(arrivals(&n, 0) == 1, 20000);
    EXPECT_STR(et_proxy(n.p, "dup put:%s", round_key(&n, 0, "a/m")), "ok");
    int rm = vigil_group_barrier_wait(n.m, 0, 30000000000ull);
    pthread_join(b.th, NULL);
    EXPECT(in, "b's arrival never showed");
    if (one_serial(&n, 0, rm, b.rc))
        return 1;
    return net_down(&n);
}

/* The withdrawal held (the waiter told VIGIL_ETIMEDOUT by the copy that
 * landed elsewhere); the member arrives again; the withdrawal delivered
 * late must not take that arrival away (before, it did: the round waited
 * for a member that was waiting). */
static int test_withdraw_late(void)
{
    struct net n;
    NET_UP(&n, "withdraw-late", 0, TTL);
    EXPECT_STR(et_proxy(n.p, "hold put:%s", round_key(&n, 0, "gate")), "ok");
    EXPECT_RC(vigil_group_barrier_wait(n.m, 0, 300000000ull), VIGIL_ETIMEDOUT);
    EXPECT_STR(et_proxy(n.p, "held"), "held 1");
    struct waiter m;
    EXPECT(wait_start(&m, n.m, 0, 30000), "no thread");
    bool in = VT_WAIT_FOR(arrivals(&n, 0) == 1, 20000);
    const char *late = et_proxy(n.p, "release");
    int rb = vigil_group_barrier_wait(n.b, 0, 20000000000ull);
    pthread_join(m.th, NULL);
    EXPECT(in, "m's second arrival never showed");
    EXPECT(not_applied(late), "the withdrawal delivered late: '%s'", late);
    if (one_serial(&n, 0, m.rc, rb))
        return 1;
    return net_down(&n);
}

/* A withdrawal delivered twice: VIGIL_ETIMEDOUT, and not counted. */
static int test_withdraw_twice(void)
{
    struct net n;
    NET_UP(&n, "withdraw-twice", 0, TTL);
    EXPECT_STR(et_proxy(n.p, "dup put:%s", round_key(&n, 0, "gate")), "ok");
    EXPECT_RC(vigil_group_barrier_wait(n.m, 0, 300000000ull), VIGIL_ETIMEDOUT);
    EXPECT(arrivals(&n, 0) == 0, "%d arrivals after the withdrawal", arrivals(&n, 0));
    EXPECT_RC(vigil_group_barrier_wait(n.b, 0, 500000000ull), VIGIL_ETIMEDOUT);
    return net_down(&n);
}

/* A commit held (b, with a long TTL, looks again only after it), the copy
 * sent elsewhere releasing the round, then delivered late; or delivered
 * twice: one release, one serial, and nothing released again. */
static int commit_fault(const char *fault)
{
    struct net n;
    NET_UP(&n, "commit", 0, 60000);
    struct waiter b;
    EXPECT(wait_start(&b, n.b, 0, 40000), "no thread");
    bool in = VT_WAIT_FOR(arrivals(&n, 0) == 1, 20000);
    EXPECT_STR(et_proxy(n.p, "%s put:%s/released/*", fault, n.g), "ok");
    int rm = vigil_group_barrier_wait(n.m, 0, 30000000000ull);
    pthread_join(b.th, NULL);
    EXPECT(in, "b's arrival never showed");
    if (strcmp(fault, "hold") == 0) {
        EXPECT_STR(et_proxy(n.p, "held"), "held 1");
        EXPECT_LATE_VOID(n.p, "the commit");
    }
    if (one_serial(&n, 0, rm, b.rc))
        return 1;
    vigil_group_stats st;
    EXPECT(vigil_group_stats_get(n.d, n.g, &st) == 0 && st.round == 1, "round %llu", (unsigned long long)st.round);
    return net_down(&n);
}

static int test_commit_late(void)
{
    return commit_fault("hold");
}

static int test_commit_twice(void)
{
    return commit_fault("dup");
}

/* ---- membership --------------------------------------------------------------- */

/* A join held, landed elsewhere, and delivered late after the member
 * left; or delivered twice: joined once, and never brought back. */
static int join_fault(const char *fault)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("join");
    int p = first_proxy(e);
    EXPECT_STR(et_proxy(p, "%s put:%s/names/m", fault, g), "ok");
    vigil_group_member *m = gt_join(e, g, "m", TTL, NULL);
    EXPECT(m, "join failed");
    EXPECT(gt_count(d, g) == 1 && vigil_group_is_leader(m) == 1, "%d members", gt_count(d, g));
    EXPECT_RC(vigil_group_leave(m), 0);
    if (strcmp(fault, "hold") == 0) {
        EXPECT_STR(et_proxy(p, "held"), "held 1");
        EXPECT_LATE_VOID(p, "the join");
    }
    EXPECT(gt_count(d, g) == 0, "%d members after the leave", gt_count(d, g));
    EXPECT_STR(et_proxy(p, "clear"), "ok");
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

static int test_join_late(void)
{
    return join_fault("hold");
}

static int test_join_twice(void)
{
    return join_fault("dup");
}

/* A leave's revoke held, landed elsewhere, delivered late; and delivered
 * twice: the leave answers 0 both ways, and the member is gone. */
static int leave_fault(const char *fault)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("leave");
    vigil_group_member *m = gt_join(e, g, "m", TTL, NULL);
    EXPECT(m, "join failed");
    int p = first_proxy(e);
    EXPECT_STR(et_proxy(p, "%s lease/revoke", fault), "ok");
    EXPECT_RC(vigil_group_leave(m), 0);
    if (strcmp(fault, "hold") == 0)
        EXPECT_LATE_VOID(p, "the revoke");
    EXPECT(gt_count(d, g) == 0, "%d members after the leave", gt_count(d, g));
    EXPECT_STR(et_proxy(p, "clear"), "ok");
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

/* A member whose lease another revoked (the agent, an operator) before
 * it leaves: VIGIL_ELOST, as vigil_group_join(3) says; not the 0 of a
 * revoke of its own delivered twice (test_leave_twice). */
static int test_leave_lost(void)
{
    NEED_PROXIES();
    vigil_etcd *e = connect_quick(), *d = et_connect(eps);
    const char *g = gt_group("leave-lost");
    vigil_group_member *m = gt_join(e, g, "m", TTL, NULL);
    EXPECT(m, "join failed");
    EXPECT_RC(et_revoke(d, gt_lease_of(d, g, "m")), 0);
    EXPECT_RC(vigil_group_leave(m), VIGIL_ELOST);
    EXPECT(gt_count(d, g) == 0, "%d members after the leave", gt_count(d, g));
    vigil_etcd_close(d);
    vigil_etcd_close(e);
    return 0;
}

static int test_leave_late(void)
{
    return leave_fault("hold");
}

static int test_leave_twice(void)
{
    return leave_fault("dup");
}

/* ---- locks, sessions, elections (etcd.c, etcd_session.c) -------------------------- */

/* A key through the proxies (e, quick; d plain), in a session when s is
 * asked for, held as "A" when a session acquire is asked for too. */
struct keyed {
    vigil_etcd         *e, *d;
    const char         *key;
    vigil_etcd_session *s;
    vigil_lease         l;
    int                 p; /* the proxy e speaks to first */
};

static int keyed_up(struct keyed *k, const char *name, bool session, bool acquire)
{
    memset(k, 0, sizeof(*k));
    k->e = connect_quick();
    k->d = et_connect(eps);
    k->key = et_key(name);
    if (session)
        EXPECT_RC(vigil_etcd_session_open(k->e, TTL, &k->s), 0);
    if (acquire)
        EXPECT_RC(vigil_etcd_session_acquire(k->s, k->key, "A", &k->l), 0);
    k->p = first_proxy(k->e);
    EXPECT(k->p > 0, "no proxy is first (%s)", vigil_etcd__current_endpoint(k->e));
    return 0;
}

static int keyed_down(struct keyed *k)
{
    EXPECT_STR(et_proxy(k->p, "clear"), "ok");
    EXPECT_RC(vigil_etcd_session_close(k->s), 0);
    vigil_etcd_close(k->d);
    vigil_etcd_close(k->e);
    return 0;
}

#define KEYED_UP(k, name, session, acquire)                                   \
    do {                                                                      \
        NEED_PROXIES();                                                       \
        if (keyed_up((k), (name), (session), (acquire)))                      \
            return 1;                                                         \
    } while (0)

/* The key's holder, as d reads it: its token and owner. */
static int holder_is(struct keyed *k, uint64_t token, const char *owner)
{
    vigil_lease_info info;
    EXPECT_RC(vigil_etcd_get(k->d, k->key, &info), 0);
    EXPECT(info.token == token && strcmp(info.owner, owner) == 0, "held at %llu by '%s', not %llu by '%s'",
           (unsigned long long)info.token, info.owner, (unsigned long long)token, owner);
    return 0;
}

/* A lock's acquire held, landed elsewhere; released; delivered late: its
 * lease is gone, and nobody holds the key. */
static int test_lock_late(void)
{
    struct keyed k;
    vigil_lease_info info;
    KEYED_UP(&k, "lock-late", false, false);
    EXPECT_STR(et_proxy(k.p, "hold put:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_acquire(k.e, k.key, "a", 5000, &k.l), 0);
    EXPECT_STR(et_proxy(k.p, "held"), "held 1");
    EXPECT_RC(vigil_etcd_release(k.e, &k.l), 0);
    EXPECT_LATE_VOID(k.p, "the acquire");
    EXPECT_RC(vigil_etcd_get(k.d, k.key, &info), VIGIL_EVACANT);
    return keyed_down(&k);
}

/* A lock's acquire held, and every other sending of it lost: the caller
 * is told an error, and the lease it granted is revoked; the first revoke
 * is lost everywhere too, so it is sent again, and the held copy,
 * delivered late, fails whole (before, one revoke was sent, and the late
 * copy held the key on a lease nobody knew of, up to its TTL). */
static int given_up_revoke_lost(const char *name, bool wait)
{
    struct keyed k;
    vigil_lease_info info;
    KEYED_UP(&k, name, false, false);
    for (int i = 1; i <= 3; i++) {
        EXPECT_STR(et_proxy(i, i == k.p ? "hold put:%s/*" : "lose put:%s/*", k.key), "ok");
        EXPECT_STR(et_proxy(i, "lose lease/revoke"), "ok");
    }
    int rc = wait ? vigil_etcd_acquire_wait(k.e, k.key, "ghost", TTL, 1500000000ull, &k.l)
                  : vigil_etcd_acquire(k.e, k.key, "ghost", TTL, &k.l);
    const char *held = et_proxy(k.p, "held");
    bool one = strcmp(held, "held 1") == 0;
    for (int i = 1; i <= 3; i++)
        if (i != k.p)
            EXPECT_STR(et_proxy(i, "clear"), "ok");
    EXPECT(rc < 0, "the acquire: %d, not an error", rc);
    EXPECT(one, "the acquire was never held");
    EXPECT_LATE_VOID(k.p, "the acquire");
    EXPECT_RC(vigil_etcd_get(k.d, k.key, &info), VIGIL_EVACANT);
    return keyed_down(&k);
}

static int test_lock_given_up_revoke_lost(void)
{
    return given_up_revoke_lost("lock-revoke-lost", false);
}

/* The same for a wait that gives up: its join's revoke (etcd_wait.c) is
 * sent again while unanswered too (the outside review's repro: the late
 * copy held the key as 'ghost' for its whole TTL). */
static int test_lock_wait_given_up_revoke_lost(void)
{
    return given_up_revoke_lost("lock-wait-revoke-lost", true);
}

/* A lock's acquire and its release delivered twice: held at the token the
 * acquire says, released with 0. */
static int test_lock_twice(void)
{
    struct keyed k;
    vigil_lease_info info;
    KEYED_UP(&k, "lock-twice", false, false);
    EXPECT_STR(et_proxy(k.p, "dup put:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_acquire(k.e, k.key, "a", 5000, &k.l), 0);
    if (holder_is(&k, k.l.token, "a"))
        return 1;
    EXPECT_STR(et_proxy(k.p = first_proxy(k.e), "dup lease/revoke"), "ok");
    EXPECT_RC(vigil_etcd_release(k.e, &k.l), 0);
    EXPECT_RC(vigil_etcd_get(k.d, k.key, &info), VIGIL_EVACANT);
    return keyed_down(&k);
}

/* A session's acquire held while another holds the key, landed elsewhere
 * (busy: taken back out), delivered late: it must not queue the session
 * behind the holder, to hold the key unknowingly once the holder goes. */
static int test_session_acquire_late(void)
{
    struct keyed k;
    vigil_lease h;
    vigil_lease_info info;
    KEYED_UP(&k, "session-late", true, false);
    EXPECT_RC(vigil_etcd_acquire(k.d, k.key, "holder", 10000, &h), 0);
    EXPECT_STR(et_proxy(k.p, "hold put:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_session_acquire(k.s, k.key, "s", &k.l), VIGIL_EBUSY);
    EXPECT_STR(et_proxy(k.p, "held"), "held 1");
    EXPECT_LATE_VOID(k.p, "the session's acquire");
    EXPECT(et_count_under(k.d, k.key) == 1, "%d keys: the session queued", et_count_under(k.d, k.key));
    EXPECT_RC(vigil_etcd_release(k.d, &h), 0);
    EXPECT_RC(vigil_etcd_get(k.d, k.key, &info), VIGIL_EVACANT);
    return keyed_down(&k);
}

/* A session's acquire delivered twice: held, at the token the key has. */
static int test_session_acquire_twice(void)
{
    struct keyed k;
    KEYED_UP(&k, "session-twice", true, false);
    EXPECT_STR(et_proxy(k.p, "dup put:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_session_acquire(k.s, k.key, "s", &k.l), 0);
    if (holder_is(&k, k.l.token, "s"))
        return 1;
    EXPECT(et_count_under(k.d, k.key) == 1, "%d keys", et_count_under(k.d, k.key));
    EXPECT_RC(vigil_etcd_resign(k.e, &k.l), 0);
    EXPECT(et_count_under(k.d, k.key) == 0, "%d keys after the resign", et_count_under(k.d, k.key));
    return keyed_down(&k);
}

/* A session's acquire told busy whose taking back out of its key goes
 * unanswered (every delete of it lost): the caller is told an error, and
 * the key stays queued on the session's lease, which is kept alive. It is
 * deleted after the session's next renewal that etcd answers, with no
 * further call of the session (before, only the session's next acquire
 * did it: meanwhile, once the holder went, the session held the key
 * unknowingly, and every other waiter starved for the session's life). */
static int test_session_unqueue_lost(void)
{
    struct keyed k;
    vigil_lease h;
    vigil_lease_info info;
    KEYED_UP(&k, "session-unqueue-lost", true, false);
    EXPECT_RC(vigil_etcd_acquire(k.d, k.key, "holder", 6 * TTL, &h), 0); /* outlives the wait below */
    for (int i = 1; i <= 3; i++)
        EXPECT_STR(et_proxy(i, "lose del:%s/*,cmp:%s/* 1000", k.key, k.key), "ok");
    int rc = vigil_etcd_session_acquire(k.s, k.key, "s", &k.l);
    int queued = et_count_under(k.d, k.key);
    for (int i = 1; i <= 3; i++)
        EXPECT_STR(et_proxy(i, "clear"), "ok");
    EXPECT(rc < 0 && rc != VIGIL_EBUSY, "the acquire: %d (%s), not an error", rc, vigil_strerror(rc));
    EXPECT(queued == 2, "%d keys after the acquire, not 2 (the holder's, the session's)", queued);
    bool gone = VT_WAIT_FOR(et_count_under(k.d, k.key) == 1, 3 * TTL);
    EXPECT(gone, "the session's key is still queued (%d keys) with no call to take it out", et_count_under(k.d, k.key));
    if (holder_is(&k, h.token, "holder"))
        return 1;
    EXPECT_RC(vigil_etcd_release(k.d, &h), 0);
    EXPECT_RC(vigil_etcd_get(k.d, k.key, &info), VIGIL_EVACANT);
    EXPECT(!vigil_etcd_session_lost(k.s), "the session lost");
    return keyed_down(&k);
}

struct session_wait {
    vigil_etcd_session *s;
    const char         *key;
    vigil_lease         l;
    int                 rc;
};

static void *session_wait_thread(void *arg)
{
    struct session_wait *w = arg;
    w->rc = vigil_etcd_session_acquire_wait(w->s, w->key, "waiter", 30000000000ull, &w->l);
    return NULL;
}

/* A session's acquire that is busy takes back out only the key it put:
 * not the one another thread of the same session queued (issue 25.3). */
static int test_session_busy_keeps_other(void)
{
    struct keyed k;
    vigil_lease h;
    KEYED_UP(&k, "session-other", true, false);
    EXPECT_RC(vigil_etcd_acquire(k.d, k.key, "holder", 10000, &h), 0);
    struct session_wait w = { .s = k.s, .key = k.key, .rc = INT32_MIN };
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, session_wait_thread, &w) == 0, "no thread");
    bool queued = VT_WAIT_FOR(et_count_under(k.d, k.key) == 2, 20000);
    int rc = vigil_etcd_session_acquire(k.s, k.key, "other", &k.l);
    int after = et_count_under(k.d, k.key);
    EXPECT_RC(vigil_etcd_release(k.d, &h), 0);
    pthread_join(th, NULL);
    EXPECT(queued, "the waiter never queued");
    EXPECT(rc == VIGIL_EBUSY && after == 2, "the second acquire: %d (%s), %d keys left", rc, vigil_strerror(rc), after);
    EXPECT_RC(w.rc, 0);
    EXPECT_RC(vigil_etcd_resign(k.e, &w.l), 0);
    return keyed_down(&k);
}

/* A proclaim's put held, landed elsewhere; a newer proclaim; the first
 * delivered late must not write over the newer value (before, it did: the
 * guard, same create revision and lease, still passed, issue 25.3). */
static int test_proclaim_late(void)
{
    struct keyed k;
    KEYED_UP(&k, "proclaim-late", true, true);
    EXPECT_STR(et_proxy(k.p, "hold put:%s/* skip=1", k.key), "ok"); /* the reading passes, the put is held */
    EXPECT_RC(vigil_etcd_proclaim(k.e, &k.l, "B"), 0);
    EXPECT_STR(et_proxy(k.p, "held"), "held 1");
    EXPECT_RC(vigil_etcd_proclaim(k.e, &k.l, "C"), 0);
    EXPECT_LATE_VOID(k.p, "the proclaim");
    if (holder_is(&k, k.l.token, "C"))
        return 1;
    return keyed_down(&k);
}

/* A proclaim delivered twice: 0, the new value. */
static int test_proclaim_twice(void)
{
    struct keyed k;
    KEYED_UP(&k, "proclaim-twice", true, true);
    EXPECT_STR(et_proxy(k.p, "dup put:%s/* skip=1", k.key), "ok");
    EXPECT_RC(vigil_etcd_proclaim(k.e, &k.l, "B"), 0);
    EXPECT(strcmp(k.l.owner, "B") == 0, "told '%s'", k.l.owner);
    if (holder_is(&k, k.l.token, "B"))
        return 1;
    return keyed_down(&k);
}

/* A resign held, landed elsewhere; the session takes the key again; the
 * resign delivered late must not delete the new hold. */
static int test_resign_late(void)
{
    struct keyed k;
    vigil_lease l2;
    KEYED_UP(&k, "resign-late", true, true);
    EXPECT_STR(et_proxy(k.p, "hold del:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_resign(k.e, &k.l), 0);
    EXPECT_STR(et_proxy(k.p, "held"), "held 1");
    EXPECT_RC(vigil_etcd_session_acquire(k.s, k.key, "A2", &l2), 0);
    EXPECT_LATE_VOID(k.p, "the resign");
    if (holder_is(&k, l2.token, "A2"))
        return 1;
    return keyed_down(&k);
}

/* A resign delivered twice: 0 (its own first copy took the key), not
 * VIGIL_ELOST. */
static int test_resign_twice(void)
{
    struct keyed k;
    KEYED_UP(&k, "resign-twice", true, true);
    EXPECT_STR(et_proxy(k.p, "dup del:%s/*", k.key), "ok");
    EXPECT_RC(vigil_etcd_resign(k.e, &k.l), 0);
    EXPECT(et_count_under(k.d, k.key) == 0, "%d keys after the resign", et_count_under(k.d, k.key));
    return keyed_down(&k);
}

/* ---- a leader's wait on a server that ends every watch at once ------------ */

/* Requests proxy p has passed on so far, or -1. */
static long long proxy_requests(int p)
{
    long long r = -1;
    return sscanf(et_proxy(p, "stats"), "requests %lld", &r) == 1 ? r : -1;
}

/* vigil_group_leader_wait through a proxy whose every watch ends as it
 * starts (no news): it backs off (50 ms doubling to 1 s) instead of
 * reading and watching again at once (about 1,100 requests a second). A
 * 2 s wait stays far below a hundred requests either way the machine is
 * loaded: the spin made thousands. */
static int test_leader_wait_ended_watches(void)
{
    NEED_PROXIES();
    int p = 1;
    vigil_etcd *d = et_connect(eps), *e = et_connect(et_proxy_url(p));
    const char *g = gt_group("lwend");
    vigil_group_member *m = gt_join(d, g, "m", TTL, NULL);
    vigil_group_member_info self, l;
    EXPECT(m && vigil_group_self(m, &self) == 0, "join failed");
    EXPECT_STR(et_proxy(p, "endwatch 1000000"), "ok");
    long long before = proxy_requests(p);
    int rc = vigil_group_leader_wait(e, g, self.revision, 2000000000ull, &l);
    long long used = proxy_requests(p) - before;
    EXPECT_STR(et_proxy(p, "clear"), "ok");
    EXPECT_RC(rc, VIGIL_ETIMEDOUT);
    EXPECT(before >= 0 && used < 100, "a 2 s wait made %lld requests", used);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(e);
    vigil_etcd_close(d);
    return 0;
}

/* ---- the health record: when an outage began, and no password in it ------- */

struct pinger {
    vigil_etcd *e;
    int         rc;
};

static void *ping_one(void *arg)
{
    struct pinger *pg = arg;
    pg->rc = vigil_etcd_ping(pg->e);
    return NULL;
}

/* A request held by the proxy until it times out: the record dates the
 * outage from when that request was sent (before the test saw it held),
 * not from when it gave up (its timeout later), so "reachable again
 * after ..." is not short by the request timeout. */
static int test_outage_dated_from_the_request(void)
{
    NEED_PROXIES();
    int p = 1;
    vigil_etcd *e = et_connect(et_proxy_url(p));
    vigil_etcd_set_timeout(e, 500, 3000);
    EXPECT_RC(vigil_etcd_ping(e), 0);
    EXPECT_STR(et_proxy(p, "hold maintenance/status"), "ok");
    struct pinger pg = { e, 1 };
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, ping_one, &pg) == 0, "pthread_create");
    bool held = VT_WAIT_FOR(strcmp(et_proxy(p, "held"), "held 1") == 0, 20000);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t seen = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec; /* the request was sent before this */
    pthread_join(t, NULL);
    vigil_etcd_health h;
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT_STR(et_proxy(p, "clear"), "ok");
    EXPECT(held, "the ping was never held");
    EXPECT(pg.rc < 0 && h.reachable == 0, "the held ping: %d, reachable %u", pg.rc, h.reachable);
    EXPECT(h.changed_ns > 0 && h.changed_ns <= seen && h.changed_ns < h.failed_ns,
           "the outage dated %lld, the request seen held at %lld, given up at %lld", (long long)h.changed_ns,
           (long long)seen, (long long)h.failed_ns);
    vigil_etcd_close(e);
    return 0;
}

/* An endpoint written with a user and password: the health record (read
 * by whoever watches the handle) and the error message name it without. */
static int test_health_message_has_no_password(void)
{
    NEED_PROXIES();
    const char *url = et_proxy_url(1), *host = strstr(url, "://");
    EXPECT(host, "proxy url '%s'", url);
    char with[400];
    snprintf(with, sizeof(with), "http://someone:s3cr3tpw@%s", host + 3);
    EXPECT_STR(et_proxy(1, "lose maintenance/status"), "ok");
    vigil_etcd *e = NULL;
    EXPECT_RC(vigil_etcd_connect(with, &e), 0);
    vigil_etcd_set_timeout(e, 500, 2000);
    int rc = vigil_etcd_ping(e);
    vigil_etcd_health h;
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT_STR(et_proxy(1, "clear"), "ok");
    EXPECT(rc < 0 && h.failures > 0, "the ping: %d", rc);
    EXPECT(!strstr(h.message, "s3cr3tpw") && !strstr(h.message, "someone") && strstr(h.message, url),
           "the health message: '%s'", h.message);
    EXPECT(!strstr(vigil_etcd_errmsg(), "s3cr3tpw"), "errmsg: '%s'", vigil_etcd_errmsg());
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_leader_wait_ended_watches), VT_CASE(test_outage_dated_from_the_request),
        VT_CASE(test_health_message_has_no_password), VT_CASE(test_claim_late), VT_CASE(test_claim_late_refused),
        VT_CASE(test_claim_unavailable_refused),
        VT_CASE(test_claim_deadline_refused), VT_CASE(test_claim_page_refused),
        VT_CASE(test_claim_unavailable_everywhere), VT_CASE(test_add_twice), VT_CASE(test_claim_twice),
        VT_CASE(test_done_late), VT_CASE(test_done_twice),
        VT_CASE(test_giveback_late), VT_CASE(test_giveback_twice), VT_CASE(test_arrive_late),
        VT_CASE(test_arrive_twice), VT_CASE(test_withdraw_late), VT_CASE(test_withdraw_twice),
        VT_CASE(test_commit_late), VT_CASE(test_commit_twice), VT_CASE(test_join_late), VT_CASE(test_join_twice),
        VT_CASE(test_leave_lost), VT_CASE(test_leave_late), VT_CASE(test_leave_twice), VT_CASE(test_lock_late), VT_CASE(test_lock_given_up_revoke_lost),
        VT_CASE(test_lock_wait_given_up_revoke_lost),
        VT_CASE(test_lock_twice),
        VT_CASE(test_session_acquire_late), VT_CASE(test_session_acquire_twice),
        VT_CASE(test_session_unqueue_lost), VT_CASE(test_session_busy_keeps_other), VT_CASE(test_proclaim_late), VT_CASE(test_proclaim_twice),
        VT_CASE(test_resign_late), VT_CASE(test_resign_twice))
