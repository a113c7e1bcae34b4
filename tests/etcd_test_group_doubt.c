/* SPDX-License-Identifier: MIT */
/*
 * A claim, a done, a give-back and an arrival whose answer never comes
 * (group_fence.c, THE RULE; group_units.c, "LATE AND TWICE"): the member
 * talks to etcd through
 * a proxy in this process that, when told, lets the Nth request through
 * and then loses its answer (the connection closed with nothing, or cut
 * after half its headers), or loses the request itself. The request
 * that is hit is chosen by its place in the member's sequence, never by
 * time (the member's lease lasts 60 s: its keepalive sends nothing while
 * a case runs).
 *
 * Before the fix a claim that landed unanswered was held by a live member
 * that did not know it: the unit stayed owned for the member's life and
 * every other taker waited for it (the chaos run's drain hung, and a
 * forced end counted it lost); a done that landed unanswered answered an
 * error, and again VIGIL_ELOST, to the member that had done it.
 */
#define _GNU_SOURCE
#include "grouptest.h"
#include "group_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#define TTL_MS 60000

/* ---- the proxy ------------------------------------------------------------- */

/* The proxy reads HTTP/1.1's turns (a request, then its answer) on the
 * bytes it relays: these tests speak to etcd through its JSON gateway.
 * (The doubt they make is the request loop's, above either transport.) */
__attribute__((constructor)) static void gateway_only(void)
{
    setenv("VIGIL_ETCD_TRANSPORT", "gateway", 1);
}

enum { PASS, DROP_REPLY, CUT_REPLY, DROP_REQUEST };

#define PAIRS 16
/* Half an answer: whole header lines (libcurl sends a request again on a
 * fresh connection when a reused one died before any of them came). */
#define CUT "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
static struct proxy {
    int              lfd, port, up_port;
    pthread_t        th;
    _Atomic int      quit;
    _Atomic int      mode, skip, count; /* the next count requests after skip, in mode */
    _Atomic unsigned hits;              /* requests hit so far */
    _Atomic unsigned reqs;              /* requests started, in all */
    int              c[PAIRS], s[PAIRS];
    int              victim[PAIRS];     /* its request was hit (how): its answer is lost */
} P;

static void pair_close(int i)
{
    close(P.c[i]);
    close(P.s[i]);
    P.c[i] = P.s[i] = -1;
    P.victim[i] = 0;
}

/* A request starts (bytes from the client on a pair with none in flight):
 * is it hit, and how? */
static int hit_next(void)
{
    atomic_fetch_add(&P.reqs, 1);
    if (atomic_load(&P.count) <= 0)
        return PASS;
    if (atomic_load(&P.skip) > 0) {
        atomic_fetch_sub(&P.skip, 1);
        return PASS;
    }
    atomic_fetch_sub(&P.count, 1);
    atomic_fetch_add(&P.hits, 1);
    return atomic_load(&P.mode);
}

static void *proxy_main(void *arg)
{
    (void)arg;
    bool busy[PAIRS] = { false }; /* a request in flight on the pair (HTTP/1.1: one at a time) */
    char buf[65536];
    while (!atomic_load(&P.quit)) {
        struct pollfd p[1 + 2 * PAIRS];
        int n = 0;
        p[n++] = (struct pollfd){ P.lfd, POLLIN, 0 };
        for (int i = 0; i < PAIRS; i++) {
            p[n++] = (struct pollfd){ P.c[i], POLLIN, 0 };
            p[n++] = (struct pollfd){ P.s[i], POLLIN, 0 };
        }
        if (poll(p, (nfds_t)n, 100) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            int c = accept4(P.lfd, NULL, NULL, SOCK_CLOEXEC);
            int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)P.up_port) };
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            int i = 0;
            while (i < PAIRS && P.c[i] >= 0)
                i++;
            if (c < 0 || s < 0 || i == PAIRS || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
                if (c >= 0)
                    close(c);
                if (s >= 0)
                    close(s);
            } else {
                P.c[i] = c, P.s[i] = s, busy[i] = false;
            }
        }
        for (int i = 0; i < PAIRS; i++) {
            short cr = p[1 + 2 * i].revents, sr = p[2 + 2 * i].revents;
            if (P.c[i] < 0 || p[1 + 2 * i].fd != P.c[i])
                continue;
            if (cr & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t k = read(P.c[i], buf, sizeof(buf));
                if (k <= 0) {
                    pair_close(i);
                    continue;
                }
                int how = busy[i] ? PASS : hit_next();
                busy[i] = true;
                if (how == DROP_REQUEST) {
                    pair_close(i); /* it never reaches etcd */
                    continue;
                }
                if (how != PASS)
                    P.victim[i] = how;
                if (write(P.s[i], buf, (size_t)k) != k) {
                    pair_close(i);
                    continue;
                }
            }
            if (sr & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t k = read(P.s[i], buf, sizeof(buf));
                if (k <= 0) {
                    pair_close(i);
                    continue;
                }
                busy[i] = false; /* an answer, so its request was whole */
                if (P.victim[i]) {
                    /* Applied, and its answer lost: nothing at all, or half
                     * an answer (which libcurl will not send again). */
                    if (P.victim[i] == CUT_REPLY)
                        (void)!write(P.c[i], CUT, strlen(CUT));
                    pair_close(i);
                    continue;
                }
                if (write(P.c[i], buf, (size_t)k) != k)
                    pair_close(i);
            }
        }
    }
    for (int i = 0; i < PAIRS; i++)
        if (P.c[i] >= 0)
            pair_close(i);
    close(P.lfd);
    return NULL;
}

/* The proxy in front of url's etcd: its URL into buf, or NULL. */
static const char *proxy_start(const char *url, char *buf, size_t cap)
{
    const char *colon = strrchr(url, ':');
    if (!colon || strncmp(url, "http://127.0.0.1:", 17) != 0)
        return NULL;
    memset(&P, 0, sizeof(P));
    P.up_port = atoi(colon + 1);
    for (int i = 0; i < PAIRS; i++)
        P.c[i] = P.s[i] = -1;
    P.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (P.lfd < 0 || bind(P.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(P.lfd, 16) < 0 ||
        getsockname(P.lfd, (struct sockaddr *)&a, &len) < 0)
        return NULL;
    P.port = ntohs(a.sin_port);
    if (pthread_create(&P.th, NULL, proxy_main, NULL) != 0)
        return NULL;
    snprintf(buf, cap, "http://127.0.0.1:%d", P.port);
    return buf;
}

static void proxy_stop(void)
{
    atomic_store(&P.quit, 1);
    pthread_join(P.th, NULL);
}

/* Hits count requests in mode after letting skip through. */
static void proxy_arm(int mode, int skip, int count)
{
    atomic_store(&P.hits, 0);
    atomic_store(&P.mode, mode);
    atomic_store(&P.skip, skip);
    atomic_store(&P.count, count);
}

/* ---- the cases ------------------------------------------------------------- */

/* The group with units "u0".."u<n-1>"; m joined through the proxy. */
struct setup {
    const char         *url, *g;
    char                purl[64];
    vigil_etcd         *e, *pe; /* direct, and through the proxy */
    vigil_group_member *m;
};

static int setup(struct setup *s, const char *name, int units)
{
    int f = et_fixture(&s->url);
    if (f)
        return f;
    if (!proxy_start(s->url, s->purl, sizeof(s->purl)))
        return fprintf(stderr, "no proxy for %s\n", s->url), 1;
    s->e = et_connect(s->url);
    s->pe = et_connect(s->purl);
    s->g = gt_group(name);
    for (int i = 0; i < units; i++) {
        char u[16];
        snprintf(u, sizeof(u), "u%d", i);
        if (vigil_group_add(s->e, s->g, u) != 0)
            return fprintf(stderr, "add %s failed\n", u), 1;
    }
    s->m = gt_join(s->pe, s->g, "m", TTL_MS, NULL);
    return s->m ? 0 : 1;
}

static void teardown(struct setup *s)
{
    proxy_arm(PASS, 0, 0);
    if (s->m)
        vigil_group_leave(s->m);
    vigil_etcd_close(s->pe);
    vigil_etcd_close(s->e);
    proxy_stop();
}

/* etcd's word on the group: units owned and done. */
static int counts(struct setup *s, uint32_t *owned, uint32_t *done)
{
    vigil_group_stats st;
    int rc = vigil_group_stats_get(s->e, s->g, &st);
    *owned = st.units_owned, *done = st.units_done;
    return rc;
}

/* A claim that lands and whose answer is lost (mode): take answers with the
 * unit all the same, at the claim's token; done finishes it. */
static int claim_lost(int mode)
{
    struct setup s = { 0 };
    int rc = setup(&s, "claim", 1);
    if (rc)
        return rc;
    vigil_group_unit u;
    uint32_t owned = 0, done = 0;
    proxy_arm(mode, 1, 1); /* the reading goes through; the claim is hit */
    rc = vigil_group_take(s.m, &u);
    EXPECT(atomic_load(&P.hits) == 1, "the claim was not hit");
    EXPECT(rc == 0 && strcmp(u.name, "u0") == 0, "take after a lost answer: %d (%s) '%s'", rc, vigil_strerror(rc),
           rc == 0 ? u.name : "");
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 1 && done == 0, "owned %u done %u", owned, done);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 1, "owned %u done %u", owned, done);
    EXPECT_RC(vigil_group_take(s.m, &u), VIGIL_EVACANT);
    teardown(&s);
    return 0;
}

static int test_claim_answer_dropped(void)
{
    return claim_lost(DROP_REPLY);
}

static int test_claim_answer_cut(void)
{
    return claim_lost(CUT_REPLY);
}

/* A claim lost and every resolution after it lost too: take answers an
 * error; the claim is in doubt, and the next take answers with it. */
static int test_claim_doubt_kept(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "kept", 2);
    if (rc)
        return rc;
    vigil_group_unit u, v;
    uint32_t owned = 0, done = 0;
    proxy_arm(CUT_REPLY, 1, 1000); /* the claim and every resolution after it */
    rc = vigil_group_take(s.m, &u);
    EXPECT(atomic_load(&P.hits) >= 2 && rc < 0, "take: %d (%s), %u hits", rc, vigil_strerror(rc),
           atomic_load(&P.hits));
    proxy_arm(PASS, 0, 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 1, "owned %u", owned);
    EXPECT_RC(vigil_group_take(s.m, &u), 0); /* the one in doubt */
    EXPECT_RC(vigil_group_take(s.m, &v), 0); /* the other */
    EXPECT(strcmp(u.name, v.name) != 0, "took %s twice", u.name);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    EXPECT_RC(vigil_group_done(s.m, &v), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 2, "owned %u done %u", owned, done);
    teardown(&s);
    return 0;
}

/* ---- a member's threads: a claim found landed by another's resolution ---- */

static struct found_case {
    struct setup       *s;
    vigil_group_member *b;
    int                 calls, inner_rc;
    unsigned            inner_hits;
} FC;

/* At the outer take's "candidates" (it read u1 alone): what another
 * thread of m does there. u0 added; b holds u1 for a moment, so that m's
 * take (the other thread's) claims u0, whose answer and every resolution
 * are lost: that claim stays in doubt, landed. */
static void found_hook(vigil_group_member *m, const char *step)
{
    if (strcmp(step, "candidates") != 0 || FC.calls++ > 0)
        return;
    vigil_group_unit x, y, w;
    if (vigil_group_add(FC.s->e, FC.s->g, "u0") != 0 || vigil_group_take(FC.b, &x) != 0 ||
        vigil_group_take(FC.b, &y) != 0 || vigil_group_giveback(FC.b, strcmp(x.name, "u0") == 0 ? &x : &y) != 0) {
        FC.inner_rc = INT32_MIN;
        return;
    }
    proxy_arm(CUT_REPLY, 1, 1 + 3); /* the reading passes; the claim and its resolutions are lost */
    FC.inner_rc = vigil_group_take(m, &w);
    FC.inner_hits = atomic_load(&P.hits);
    (void)vigil_group_giveback(FC.b, strcmp(x.name, "u1") == 0 ? &x : &y);
    proxy_arm(CUT_REPLY, 1, 1000); /* the next resolution passes; all after it are lost */
}

/* Two threads of one member: one's claim (u0) in doubt, landed; the other,
 * past its reading (u1 free), claims u1, and its resolution of the first
 * finds u0 landed. It answers u0 at once and sends no claim: before, it
 * sent the claim of u1 (landed, its answer lost: in doubt), and the next
 * take's resolution, with u0 still kept, dropped u1: owned for the
 * member's life by a member that never learned of it. */
static int test_found_kept(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "foundkept", 0);
    if (rc)
        return rc;
    EXPECT_RC(vigil_group_add(s.e, s.g, "u1"), 0);
    FC = (struct found_case){ .s = &s, .b = gt_join(s.e, s.g, "b", TTL_MS, NULL) };
    EXPECT(FC.b, "b did not join");
    vigil_group_unit u, v;
    uint32_t owned = 0, done = 0;
    gunits_test_hook = found_hook;
    rc = vigil_group_take(s.m, &u);
    gunits_test_hook = NULL;
    proxy_arm(PASS, 0, 0);
    EXPECT(FC.calls >= 1 && FC.inner_rc < 0 && FC.inner_rc != INT32_MIN && FC.inner_hits == 4,
           "the other thread's take: %d, %u hits", FC.inner_rc, FC.inner_hits);
    EXPECT(rc == 0 && strcmp(u.name, "u0") == 0, "take: %d (%s) '%s', not u0", rc, vigil_strerror(rc),
           rc == 0 ? u.name : "");
    EXPECT_RC(vigil_group_take(s.m, &v), 0);
    EXPECT(strcmp(v.name, "u1") == 0, "took %s, not u1", v.name);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    EXPECT_RC(vigil_group_done(s.m, &v), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 2, "owned %u done %u", owned, done);
    EXPECT_RC(vigil_group_leave(FC.b), 0);
    teardown(&s);
    return 0;
}

/* The fence moved by a claim of the member that left no doubt (made here
 * by hand: the member's own txn, sent past gop_run): the next write sees
 * the move, finds the claim by its value, and the take answers with it;
 * before, the move was taken as no write of the member's, and the unit
 * stayed owned by a member that did not know it. */
static int test_unknown_claim_found(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "unknownclaim", 2);
    if (rc)
        return rc;
    vigil_group_member *m = s.m;
    char ko[GKEY_MAX], kf[GKEY_MAX], val[40], id[24];
    struct gtxn t;
    struct greply r;
    pthread_mutex_lock(&m->lock);
    uint64_t n = ++m->ids;
    snprintf(val, sizeof(val), "%s %llu", m->hex, (unsigned long long)n);
    snprintf(id, sizeof(id), "%llu", (unsigned long long)n);
    rc = gkey(ko, s.g, "work/owners/u0") < 0 || gkey(kf, s.g, "fence/%s", m->hex) < 0 ? -1 : 0;
    gtxn_init(&t);
    gtxn_put(&t, G_OK, ko, val, strlen(val), m->lease);
    gtxn_put(&t, G_OK, kf, id, strlen(id), m->lease);
    if (rc == 0 && (rc = gtxn_run(s.e, &t, &r)) == 0)
        greply_free(&r);
    gtxn_free(&t);
    pthread_mutex_unlock(&m->lock);
    EXPECT_RC(rc, 0);
    vigil_group_unit u, v;
    uint32_t owned = 0, done = 0;
    EXPECT_RC(vigil_group_take(m, &u), 0);
    EXPECT(strcmp(u.name, "u0") == 0, "took %s, not u0 (its claim unknown to it)", u.name);
    rc = vigil_group_take(m, &v);
    EXPECT(rc == 0 && strcmp(v.name, "u1") == 0, "take: %d (%s) '%s', not u1", rc, vigil_strerror(rc),
           rc == 0 ? v.name : "");
    EXPECT_RC(vigil_group_done(m, &u), 0);
    EXPECT_RC(vigil_group_done(m, &v), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 2, "owned %u done %u", owned, done);
    teardown(&s);
    return 0;
}

/* A claim whose request never reached etcd: nothing was claimed, and take
 * goes on to claim (the same unit, or another) for real. */
static int test_claim_request_lost(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "reqlost", 1);
    if (rc)
        return rc;
    vigil_group_unit u;
    uint32_t owned = 0, done = 0;
    proxy_arm(DROP_REQUEST, 1, 1);
    rc = vigil_group_take(s.m, &u);
    EXPECT(atomic_load(&P.hits) == 1, "the claim was not hit");
    if (rc != 0) /* told "unknown" at once; the next take settles it */
        EXPECT_RC(vigil_group_take(s.m, &u), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 1, "owned %u", owned);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    teardown(&s);
    return 0;
}

/* A done that lands and whose answer is lost: 0 (sent again, its failure
 * finds our own record), and a caller's second done answers 0 too. */
static int done_lost(int mode)
{
    struct setup s = { 0 };
    int rc = setup(&s, "done", 1);
    if (rc)
        return rc;
    vigil_group_unit u;
    uint32_t owned = 0, done = 0;
    EXPECT_RC(vigil_group_take(s.m, &u), 0);
    proxy_arm(mode, 0, 1);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    EXPECT(atomic_load(&P.hits) == 1, "the done was not hit");
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 1, "owned %u done %u", owned, done);
    EXPECT_RC(vigil_group_done(s.m, &u), 0); /* a caller that was told an error calls again */
    EXPECT_RC(vigil_group_take(s.m, &u), VIGIL_EVACANT);
    teardown(&s);
    return 0;
}

static int test_done_answer_dropped(void)
{
    return done_lost(DROP_REPLY);
}

static int test_done_answer_cut(void)
{
    return done_lost(CUT_REPLY);
}

/* A done whose request never reached etcd: sent again, it lands. */
static int test_done_request_lost(void)
{
    return done_lost(DROP_REQUEST);
}

/* A done whose every sending is hit (mode), and every resolution after
 * it: the error; then (out) the member's lease revoked behind its back;
 * a second call answers 0 with the unit done once: its own done, or the
 * record of the first landed, even for a member out since (never
 * VIGIL_ELOST for a done that landed). */
static int done_unanswered(int mode, bool out)
{
    struct setup s = { 0 };
    int rc = setup(&s, "dall", 1);
    if (rc)
        return rc;
    vigil_group_unit u;
    uint32_t owned = 0, done = 0;
    EXPECT_RC(vigil_group_take(s.m, &u), 0);
    proxy_arm(mode, 0, 1000);
    rc = vigil_group_done(s.m, &u);
    EXPECT(rc < 0 && rc != VIGIL_ELOST, "done with every sending hit: %d (%s)", rc, vigil_strerror(rc));
    proxy_arm(PASS, 0, 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned + done == 1, "owned %u done %u", owned, done);
    vigil_group_member_info self;
    EXPECT_RC(vigil_group_self(s.m, &self), 0);
    if (out)
        EXPECT_RC(et_revoke(s.e, self.lease), 0);
    EXPECT_RC(vigil_group_done(s.m, &u), 0);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 1, "owned %u done %u", owned, done);
    teardown(&s);
    return 0;
}

/* Every sending lost before etcd: the claim still ours, the second done finishes it. */
static int test_done_all_lost(void)
{
    return done_unanswered(DROP_REQUEST, false);
}

/* Landed, every answer lost, and the member out before the next call. */
static int test_done_landed_then_out(void)
{
    return done_unanswered(CUT_REPLY, true);
}

/* A give-back whose answer is lost: 0, and the unit is free again. */
static int test_giveback_answer_lost(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "gb", 1);
    if (rc)
        return rc;
    vigil_group_unit u, v;
    uint32_t owned = 0, done = 0;
    EXPECT_RC(vigil_group_take(s.m, &u), 0);
    proxy_arm(CUT_REPLY, 0, 1);
    EXPECT_RC(vigil_group_giveback(s.m, &u), 0);
    EXPECT(atomic_load(&P.hits) == 1, "the give-back was not hit");
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 0, "owned %u done %u", owned, done);
    EXPECT_RC(vigil_group_take(s.m, &v), 0);
    EXPECT(v.token > u.token, "token %llu after %llu", (unsigned long long)v.token, (unsigned long long)u.token);
    teardown(&s);
    return 0;
}

/* A stale done (our lease revoked) is still VIGIL_ELOST, lost answers or
 * not: the retries never turn a refusal into a success. */
static int test_stale_done_refused(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "stale", 1);
    if (rc)
        return rc;
    vigil_group_unit u;
    uint32_t owned = 0, done = 0;
    EXPECT_RC(vigil_group_take(s.m, &u), 0);
    vigil_group_member_info self;
    EXPECT_RC(vigil_group_self(s.m, &self), 0);
    EXPECT_RC(et_revoke(s.e, self.lease), 0);
    proxy_arm(CUT_REPLY, 0, 1);
    EXPECT_RC(vigil_group_done(s.m, &u), VIGIL_ELOST);
    proxy_arm(CUT_REPLY, 0, 1);
    EXPECT_RC(vigil_group_giveback(s.m, &u), VIGIL_ELOST);
    EXPECT(counts(&s, &owned, &done) == 0 && owned == 0 && done == 0, "owned %u done %u", owned, done);
    teardown(&s);
    return 0;
}

struct waiter {
    vigil_group_member *m;
    int                 rc;
};

static void *wait_round0(void *arg)
{
    struct waiter *w = arg;
    w->rc = vigil_group_barrier_wait(w->m, 0, 30000000000ull);
    return NULL;
}

/* An arrival that lands unanswered is resolved at once (group_fence.c):
 * found landed, and the wait goes on to its release. */
static int test_arrival_answer_lost_resolved(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "resolved", 0);
    if (rc)
        return rc;
    struct waiter b = { gt_join(s.e, s.g, "b", TTL_MS, NULL), INT32_MIN };
    EXPECT(b.m, "b did not join");
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, wait_round0, &b) == 0, "no thread");
    proxy_arm(CUT_REPLY, 0, 1); /* the arrival at round 0 */
    rc = vigil_group_barrier_wait(s.m, 0, 30000000000ull);
    pthread_join(th, NULL);
    EXPECT(atomic_load(&P.hits) == 1, "the arrival was not hit");
    EXPECT(rc >= 0 && b.rc >= 0 && (rc == VIGIL_SERIAL) + (b.rc == VIGIL_SERIAL) == 1, "round 0: m %d, b %d", rc,
           b.rc);
    EXPECT_RC(vigil_group_leave(b.m), 0);
    teardown(&s);
    return 0;
}

/* An arrival that lands unanswered, and every resolution of it too: the
 * call errs, the round is released naming that member its serial (the
 * committer's call was for a later round), and the member's next call for
 * the round is the one told VIGIL_SERIAL; a call after that is told 0.
 * Before, the next call was told 0 too, and the round had no serial at
 * all. */
static int test_arrival_answer_lost_serial(void)
{
    struct setup s = { 0 };
    int rc = setup(&s, "serial", 0);
    if (rc)
        return rc;
    vigil_group_member *b = gt_join(s.e, s.g, "b", TTL_MS, NULL);
    EXPECT(b, "b did not join");
    vigil_group_member_info self;
    EXPECT_RC(vigil_group_self(s.m, &self), 0);
    proxy_arm(CUT_REPLY, 0, 1000); /* the arrival at round 0, and every resolution of it */
    rc = vigil_group_barrier_wait(s.m, 0, 5000000000ull);
    EXPECT(atomic_load(&P.hits) >= 2 && rc < 0 && rc != VIGIL_ETIMEDOUT, "the arrival: %d (%s), %u hits", rc,
           vigil_strerror(rc), atomic_load(&P.hits));
    proxy_arm(PASS, 0, 0);
    /* b, ahead at round 1: it releases round 0, whose serial is m (the
     * counted caller of round 0), and times out at round 1. */
    EXPECT_RC(vigil_group_barrier_wait(b, 1, 500000000ull), VIGIL_ETIMEDOUT);
    vigil_group_round info = { 0 };
    EXPECT_RC(vigil_group_round_info(s.e, s.g, 0, &info), 0);
    EXPECT(info.serial == self.revision, "round 0's serial %llu, m is %llu", (unsigned long long)info.serial,
           (unsigned long long)self.revision);
    EXPECT_RC(vigil_group_barrier_wait(s.m, 0, 5000000000ull), VIGIL_SERIAL);
    EXPECT_RC(vigil_group_barrier_wait(s.m, 0, 0), 0);
    EXPECT_RC(vigil_group_leave(b), 0);
    teardown(&s);
    return 0;
}

/* A join whose answer is lost and that libcurl sends again on a fresh
 * connection: the second finds our own member key, and the join stands
 * (before: VIGIL_EBUSY, "a live member has that name": ourselves). */
static int test_join_answer_dropped(void)
{
    const char *url;
    char purl[64];
    int f = et_fixture(&url);
    if (f)
        return f;
    EXPECT(proxy_start(url, purl, sizeof(purl)), "no proxy");
    vigil_etcd *e = et_connect(url), *pe = et_connect(purl);
    const char *g = gt_group("join");
    vigil_group_member *m = NULL;
    struct vigil_group_options o = { .dir = "", .host = NULL };
    proxy_arm(DROP_REPLY, 1, 1); /* the grant goes through; the join txn is hit */
    int rc = vigil_group_join_opts(pe, g, "m", TTL_MS, &o, &m);
    EXPECT(atomic_load(&P.hits) == 1, "the join was not hit (%u requests)", atomic_load(&P.reqs));
    proxy_arm(PASS, 0, 0);
    if (rc != 0) /* unanswered on a fresh connection: the error, and nothing kept */
        EXPECT(rc != VIGIL_EBUSY && gt_count(e, g) == 0, "join: %d (%s), %d members", rc, vigil_strerror(rc),
               gt_count(e, g));
    else
        EXPECT(gt_count(e, g) == 1 && vigil_group_is_leader(m) == 1, "joined, but %d members", gt_count(e, g));
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(pe);
    vigil_etcd_close(e);
    proxy_stop();
    return 0;
}

VT_MAIN(VT_CASE(test_claim_answer_dropped), VT_CASE(test_claim_answer_cut), VT_CASE(test_claim_doubt_kept),
        VT_CASE(test_found_kept), VT_CASE(test_unknown_claim_found), VT_CASE(test_claim_request_lost), VT_CASE(test_done_answer_dropped), VT_CASE(test_done_answer_cut),
        VT_CASE(test_done_request_lost), VT_CASE(test_done_all_lost),
        VT_CASE(test_done_landed_then_out), VT_CASE(test_giveback_answer_lost),
        VT_CASE(test_stale_done_refused), VT_CASE(test_arrival_answer_lost_resolved),
        VT_CASE(test_arrival_answer_lost_serial),
        VT_CASE(test_join_answer_dropped))
