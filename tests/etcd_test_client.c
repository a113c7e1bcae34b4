/* SPDX-License-Identifier: MIT */
/*
 * Description: the etcd adapter without etcd: base64, endpoint lists,
 * argument checks, every reply interpreter on etcd's real replies and on
 * malformed, truncated and hostile ones, and the whole client against fake
 * servers (a dead endpoint passed over, the /v3beta fallback, a server that
 * hangs, closes, babbles or floods), an unreachable server being a
 * transient -errno and never VIGIL_ELOST.
 */
#include "etcd_testutil.h"

#define HDR "\"header\":{\"cluster_id\":\"7801232528081817440\",\"member_id\":\"13458989633860879742\"," \
            "\"revision\":\"4\",\"raft_term\":\"2\"}"
#define LID  5007618193102948884LL
#define LIDS "5007618193102948884"

static const char GRANT_OK[] = "{" HDR ",\"ID\":\"" LIDS "\",\"TTL\":\"2\"}";
static const char ACQ_WON[] =
    "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":{\"revision\":\"4\"}}},"
    "{\"response_range\":{\"header\":{\"revision\":\"4\"},\"kvs\":[{\"key\":\"azI=\",\"create_revision\":\"4\","
    "\"mod_revision\":\"4\",\"version\":\"1\",\"lease\":\"" LIDS "\"}],\"count\":\"1\"}}]}";
static const char ACQ_HELD[] =
    "{" HDR ",\"responses\":[{\"response_range\":{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"azI=\","
    "\"create_revision\":\"7\",\"mod_revision\":\"7\",\"version\":\"1\",\"lease\":\"1234\"}],\"count\":\"1\"}}]}";
static const char ACQ_OURS_EARLIER[] =
    "{" HDR ",\"responses\":[{\"response_range\":{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"azI=\","
    "\"create_revision\":\"8\",\"mod_revision\":\"8\",\"version\":\"1\",\"lease\":\"" LIDS "\"}],\"count\":\"1\"}}]}";
static const char KA_OK[] = "{\"result\":{" HDR ",\"ID\":\"" LIDS "\",\"TTL\":\"2\"}}";
static const char KA_EXPIRED[] = "{\"result\":{" HDR ",\"ID\":\"" LIDS "\"}}";
static const char TXN_TRUE[] = "{" HDR ",\"succeeded\":true}";
static const char TXN_FALSE[] = "{" HDR "}";
static const char REVOKE_OK[] = "{" HDR "}";
static const char NOT_FOUND[] = "{\"error\":\"etcdserver: requested lease not found\","
                                "\"message\":\"etcdserver: requested lease not found\",\"code\":5}";
static const char NO_LEADER[] = "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}";

#define P(s) (s), strlen(s)

static int test_base64(void)
{
    static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    static const char *const want[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
    char out[32];
    for (unsigned i = 0; i < 7; i++) {
        int n = vigil_etcd__b64(in[i], strlen(in[i]), out, sizeof(out));
        EXPECT(n == (int)strlen(want[i]) && strcmp(out, want[i]) == 0,
               "base64(\"%s\"): expected \"%s\", got %d \"%s\"", in[i], want[i], n, out);
    }
    const unsigned char bin[] = { 0xff, 0xfe, 0x00, 0xfb };
    EXPECT(vigil_etcd__b64(bin, 4, out, sizeof(out)) == 8 && strcmp(out, "//4A+w==") == 0,
           "base64 of binary: expected //4A+w==, got %s", out);
    EXPECT_RC(vigil_etcd__b64("foo", 3, out, 4), VIGIL_ERANGE); /* no room for the NUL */
    EXPECT_RC(vigil_etcd__b64("foo", 3, out, 5), 4);
    EXPECT_RC(vigil_etcd__b64("foo", 3, NULL, 5), VIGIL_ERANGE);
    return 0;
}

static int test_endpoints(void)
{
    char urls[4][VIGIL_ETCD_URL_MAX];
    unsigned n = 99;
    EXPECT_RC(vigil_etcd__parse_endpoints(" http://127.0.0.1:2379/, 10.0.0.2:2379 ,,HTTPS://h:1//", urls, 4, &n), 0);
    EXPECT(n == 3, "expected 3 endpoints, got %u", n);
    EXPECT(strcmp(urls[0], "http://127.0.0.1:2379") == 0, "endpoint 0: %s", urls[0]);
    EXPECT(strcmp(urls[1], "http://10.0.0.2:2379") == 0, "endpoint 1 (bare host:port): %s", urls[1]);
    EXPECT(strcmp(urls[2], "HTTPS://h:1") == 0, "endpoint 2: %s", urls[2]);
    EXPECT_RC(vigil_etcd__parse_endpoints("localhost:2379/prefix", urls, 4, &n), 0);
    EXPECT(n == 1 && strcmp(urls[0], "http://localhost:2379/prefix") == 0, "with a path: %u %s", n, urls[0]);

    static const char *const bad[] = { "", " , ,", "ftp://h:1", "file:///etc/passwd", "http://",
                                       "http:///x", "http://:2379", "http://a b:1", "http://h:1?x",
                                       "h:1#f", "gopher://h", "http://h\x01:1" };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = 99;
        int rc = vigil_etcd__parse_endpoints(bad[i], urls, 4, &n);
        EXPECT(rc == -EINVAL && n == 99, "\"%s\": expected -EINVAL and n untouched, got %d, n %u", bad[i], rc, n);
    }
    EXPECT_RC(vigil_etcd__parse_endpoints("a:1,b:1,c:1,d:1,e:1", urls, 4, &n), VIGIL_ERANGE);
    char longurl[400];
    memset(longurl, 'a', sizeof(longurl) - 1);
    longurl[sizeof(longurl) - 1] = '\0';
    EXPECT_RC(vigil_etcd__parse_endpoints(longurl, urls, 4, &n), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd__parse_endpoints(NULL, urls, 4, &n), -EINVAL);
    return 0;
}

static int test_arguments(void)
{
    vigil_etcd *e = (vigil_etcd *)0x1;
    EXPECT_RC(vigil_etcd_connect(NULL, &e), -EINVAL);
    EXPECT_RC(vigil_etcd_connect("ftp://x", &e), -EINVAL);
    EXPECT_RC(vigil_etcd_connect("", &e), -EINVAL);
    EXPECT(e == (vigil_etcd *)0x1, "a failed connect wrote its output");
    vigil_etcd_close(NULL);

    /* Checks come before any request: a closed port is never reached. */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", et_closed_port());
    e = et_connect(url);
    vigil_lease l, keep;
    memset(&l, 0x5a, sizeof(l));
    keep = l;
    char key128[129];
    memset(key128, 'k', 128);
    key128[128] = '\0';
    char owner64[65];
    memset(owner64, 'o', 64);
    owner64[64] = '\0';
    EXPECT_RC(vigil_etcd_acquire(NULL, "k", "o", 1000, &l), -EINVAL);
    EXPECT_RC(vigil_etcd_acquire(e, NULL, "o", 1000, &l), -EINVAL);
    EXPECT_RC(vigil_etcd_acquire(e, "k", NULL, 1000, &l), -EINVAL);
    EXPECT_RC(vigil_etcd_acquire(e, "k", "o", 1000, NULL), -EINVAL);
    EXPECT_RC(vigil_etcd_acquire(e, "", "o", 1000, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_acquire(e, key128, "o", 1000, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_acquire(e, "k", owner64, 1000, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_acquire(e, "k", "o", 0, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_acquire(e, "k", "o", UINT64_MAX, &l), VIGIL_ERANGE);
    EXPECT(memcmp(&l, &keep, sizeof(l)) == 0, "a failed acquire wrote its output");

    /* A lease that etcd never granted, or a scribbled struct. */
    memset(&l, 0, sizeof(l));
    strcpy(l.key, "k");
    l.token = 5;
    l.id = 0;
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ERANGE);
    l.id = 7;
    l.token = 0;
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ERANGE);
    l.token = 5;
    memset(l.key, 'x', sizeof(l.key)); /* no NUL */
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_renew(e, NULL), -EINVAL);
    EXPECT_RC(vigil_etcd_renew(NULL, &l), -EINVAL);
    EXPECT_RC(vigil_etcd_release(NULL, &l), -EINVAL);
    EXPECT_RC(vigil_etcd_set_timeout(NULL, 1, 1), -EINVAL);
    vigil_lease_port port = vigil_etcd_port(NULL);
    EXPECT(port.renew && port.renew(port.ctx, &l) == -EINVAL, "a port on no handle must refuse with -EINVAL");
    vigil_etcd_close(e);
    return 0;
}

static int test_parse_grant(void)
{
    int64_t id = 1, ttl = 1;
    EXPECT_RC(vigil_etcd__parse_grant(200, P(GRANT_OK), &id, &ttl), 0);
    EXPECT(id == LID && ttl == 2, "expected ID %lld TTL 2, got %lld %lld", LID, (long long)id, (long long)ttl);
    /* The gateway's numbers are strings; plain numbers are taken too. */
    EXPECT_RC(vigil_etcd__parse_grant(200, P("{\"ID\":77,\"TTL\":3}"), &id, &ttl), 0);
    EXPECT(id == 77 && ttl == 3, "numeric fields: got %lld %lld", (long long)id, (long long)ttl);
    id = ttl = -9;
    static const char *const bad[] = {
        "{\"TTL\":\"2\"}", "{\"ID\":\"5\"}", "{\"ID\":\"0\",\"TTL\":\"2\"}", "{\"ID\":\"-5\",\"TTL\":\"2\"}",
        "{\"ID\":\"5\",\"TTL\":\"0\"}", "{\"ID\":\"5\",\"TTL\":\"-1\"}", "{\"ID\":\"abc\",\"TTL\":\"2\"}",
        "{\"ID\":\"5x\",\"TTL\":\"2\"}", "{\"ID\":\"\",\"TTL\":\"2\"}", "{\"ID\":\"-\",\"TTL\":\"2\"}",
        "{\"ID\":\"99999999999999999999\",\"TTL\":\"2\"}", "{\"ID\":\"9223372036854775808\",\"TTL\":\"2\"}",
        "{\"ID\":5.5,\"TTL\":2}", "{\"ID\":1e300,\"TTL\":2}", "{\"ID\":{},\"TTL\":2}", "{\"ID\":[5],\"TTL\":2}",
        "{\"ID\":true,\"TTL\":2}", "{\"ID\":\"5\",\"TTL\":\"9000000001\"}", "[]", "\"str\"", "17", "null",
        "", "{", "{\"ID\":\"5\",\"TTL\":\"2\"", "not json at all", "{\"ID\":\"5\",\"TTL\":\"2\"}}}garbage",
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = vigil_etcd__parse_grant(200, P(bad[i]), &id, &ttl);
        EXPECT(rc == -EPROTO, "grant reply %s: expected -EPROTO, got %d (%s)", bad[i], rc, vigil_strerror(rc));
    }
    EXPECT(id == -9 && ttl == -9, "a refused reply wrote the outputs");
    EXPECT_RC(vigil_etcd__parse_grant(200, NULL, 0, &id, &ttl), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_grant(200, P(" {\"ID\":\"5\",\"TTL\":\"2\"}\r\n"), &id, &ttl), 0);
    EXPECT_RC(vigil_etcd__parse_grant(500, P("{\"ID\":\"5\",\"TTL\":\"2\"}"), &id, &ttl), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_grant(400, P("{\"error\":\"etcdserver: too large lease TTL\",\"code\":11}"), &id, &ttl),
              VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd__parse_grant(503, P(NO_LEADER), &id, &ttl), -EAGAIN);
    EXPECT_RC(vigil_etcd__parse_grant(200, P("{\"error\":{\"grpc_code\":7,\"message\":\"denied\"}}"), &id, &ttl), -EACCES);
    EXPECT_RC(vigil_etcd__parse_grant(500, P("{\"error\":\"?\",\"code\":\"five\"}"), &id, &ttl), -EIO);
    EXPECT_RC(vigil_etcd__parse_grant(500, P("{\"error\":\"?\",\"code\":1e99}"), &id, &ttl), -EIO);
    /* A grant never answers "lease not found" with ELOST: acquire has no lease to lose. */
    EXPECT_RC(vigil_etcd__parse_grant(404, P(NOT_FOUND), &id, &ttl), -ENOENT);
    return 0;
}

static int test_parse_acquire(void)
{
    uint64_t token = 0;
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_WON), LID, &token), 0);
    EXPECT(token == 4, "expected token 4 (create_revision), got %llu", (unsigned long long)token);
    token = 0;
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_HELD), LID, &token), VIGIL_EBUSY);
    EXPECT(token == 0, "EBUSY wrote the token");
    /* Our own lease on the key in the failure branch: an earlier attempt's
     * put took and its reply was lost. That is a win, at its revision. */
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_OURS_EARLIER), LID, &token), 0);
    EXPECT(token == 8, "expected token 8 from the earlier put, got %llu", (unsigned long long)token);
    token = 0;
    static const char *const bad[] = {
        /* success without the range, or the range without the key */
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{}}]}",
        "{" HDR ",\"succeeded\":true}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[]}}]}",
        "{" HDR ",\"responses\":[{\"response_range\":{}}]}",
        "{" HDR ",\"responses\":[{\"response_range\":{\"kvs\":{}}}]}",
        "{" HDR ",\"responses\":[{\"response_range\":{\"kvs\":[7]}}]}",
        "{" HDR ",\"responses\":\"none\"}",
        "{" HDR "}",
        /* success, but the key carries another lease: not what we put */
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"create_revision\":\"4\",\"lease\":\"1\"}]}}]}",
        /* bad revisions */
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"lease\":\"" LIDS "\"}]}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"create_revision\":\"0\",\"lease\":\"" LIDS "\"}]}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"create_revision\":\"-4\",\"lease\":\"" LIDS "\"}]}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"create_revision\":\"4\",\"lease\":\"x\"}]}}]}",
        /* a succeeded that is not a bool, a missing header */
        "{" HDR ",\"succeeded\":\"yes\",\"responses\":[]}",
        "{\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"create_revision\":\"4\",\"lease\":\"" LIDS "\"}]}}]}",
        "{}", "[]", "", "{\"header\":",
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = vigil_etcd__parse_acquire(200, P(bad[i]), LID, &token);
        EXPECT(rc == -EPROTO, "acquire reply %s: expected -EPROTO, got %d (%s)", bad[i], rc, vigil_strerror(rc));
    }
    EXPECT(token == 0, "a refused reply wrote the token");
    /* Our fresh lease already gone at the put: a slow server, not a loss. */
    EXPECT_RC(vigil_etcd__parse_acquire(404, P(NOT_FOUND), LID, &token), -ETIMEDOUT);
    EXPECT_RC(vigil_etcd__parse_acquire(400, P("{\"error\":\"etcdserver: key is not provided\",\"code\":3}"), LID, &token),
              -EINVAL);
    return 0;
}

static int test_parse_keepalive(void)
{
    int64_t ttl = 0;
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P(KA_OK), LID, &ttl), 0);
    EXPECT(ttl == 2, "expected TTL 2, got %lld", (long long)ttl);
    ttl = -3;
    /* etcd's answer for an expired or revoked lease: its ID, no TTL. */
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P(KA_EXPIRED), LID, &ttl), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P("{\"result\":{\"ID\":\"" LIDS "\",\"TTL\":\"0\"}}"), LID, &ttl), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P("{\"result\":{\"ID\":\"" LIDS "\",\"TTL\":\"-1\"}}"), LID, &ttl), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_keepalive(404, P(NOT_FOUND), LID, &ttl), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P("{\"error\":{\"grpc_code\":5,\"http_code\":404,"
                                                 "\"message\":\"etcdserver: requested lease not found\"}}"), LID, &ttl),
              VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_keepalive(500, P("{\"error\":\"etcdserver: requested lease not found\",\"code\":2}"), LID, &ttl),
              VIGIL_ELOST);
    /* Transient: the server cannot answer now. */
    EXPECT_RC(vigil_etcd__parse_keepalive(503, P(NO_LEADER), LID, &ttl), -EAGAIN);
    EXPECT_RC(vigil_etcd__parse_keepalive(200, P("{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}"), LID, &ttl),
              -EAGAIN);
    EXPECT_RC(vigil_etcd__parse_keepalive(504, P("{\"error\":\"context deadline exceeded\",\"code\":4}"), LID, &ttl), -ETIMEDOUT);
    /* Nothing that fails to name our lease is a refusal: a wrong ID, no
     * result, an empty object, garbage. */
    static const char *const bad[] = {
        "{\"result\":{\"ID\":\"1\",\"TTL\":\"2\"}}", "{\"result\":{\"ID\":\"1\"}}", "{\"result\":{\"TTL\":\"2\"}}",
        "{\"result\":{}}", "{\"result\":[]}", "{\"result\":null}", "{}", "{\"ID\":\"" LIDS "\",\"TTL\":\"2\"}",
        "{\"result\":{\"ID\":\"" LIDS "\",\"TTL\":\"2x\"}}", "{\"result\":{\"ID\":\"" LIDS "\",\"TTL\":{}}}",
        "{\"result\":{\"ID\":\"" LIDS "\",\"TTL\":\"2\"}", "", "\x00\x01", "<html>503</html>",
        "{\"error\":\"x\",\"code\":0}",
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = vigil_etcd__parse_keepalive(200, P(bad[i]), LID, &ttl);
        EXPECT(rc == -EPROTO, "keepalive reply %s: expected -EPROTO, got %d (%s)", bad[i], rc, vigil_strerror(rc));
    }
    EXPECT(ttl == -3, "a refused reply wrote the TTL");
    return 0;
}

static int test_parse_txn_revoke(void)
{
    bool s = false;
    EXPECT_RC(vigil_etcd__parse_txn(200, P(TXN_TRUE), &s), 0);
    EXPECT(s, "expected succeeded");
    EXPECT_RC(vigil_etcd__parse_txn(200, P(TXN_FALSE), &s), 0);
    EXPECT(!s, "expected not succeeded (proto3 omits false)");
    EXPECT_RC(vigil_etcd__parse_txn(200, P("{" HDR ",\"succeeded\":false}"), &s), 0);
    EXPECT(!s, "expected not succeeded");
    s = true;
    EXPECT_RC(vigil_etcd__parse_txn(200, P("{}"), &s), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn(200, P("{\"succeeded\":true}"), &s), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn(200, P("{" HDR ",\"succeeded\":1}"), &s), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn(200, P("{\"header\":[],\"succeeded\":true}"), &s), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn(503, P(NO_LEADER), &s), -EAGAIN);
    EXPECT(s, "a refused reply wrote the output");

    EXPECT_RC(vigil_etcd__parse_revoke(200, P(REVOKE_OK)), 0);
    EXPECT_RC(vigil_etcd__parse_revoke(404, P(NOT_FOUND)), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_revoke(200, P("{}")), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_revoke(404, P("Not Found\n")), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_error(5, false), -ENOENT);
    EXPECT_RC(vigil_etcd__grpc_error(5, true), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__grpc_error(99, true), -EIO);
    return 0;
}

/* Every proper prefix of a valid reply, and seeded random bytes and byte
 * flips: no parser may crash, and none may take a truncated reply. */
static int test_parse_hostile(void)
{
    static const char *const good[] = { GRANT_OK, ACQ_WON, ACQ_HELD, KA_OK, KA_EXPIRED, TXN_TRUE, TXN_FALSE, NOT_FOUND };
    int64_t a, b;
    uint64_t t;
    bool s;
    for (unsigned g = 0; g < sizeof(good) / sizeof(good[0]); g++) {
        size_t n = strlen(good[g]);
        for (size_t cut = 0; cut < n; cut++) {
            /* a copy of exactly cut bytes, so ASan sees any read past it */
            char *p = malloc(cut ? cut : 1);
            memcpy(p, good[g], cut);
            int r1 = vigil_etcd__parse_grant(200, p, cut, &a, &b);
            int r2 = vigil_etcd__parse_acquire(200, p, cut, LID, &t);
            int r3 = vigil_etcd__parse_keepalive(200, p, cut, LID, &a);
            int r4 = vigil_etcd__parse_txn(200, p, cut, &s);
            int r5 = vigil_etcd__parse_revoke(200, p, cut);
            free(p);
            EXPECT(r1 < 0 && r2 < 0 && r3 < 0 && r4 < 0 && r5 < 0,
                   "reply %u cut at %zu was taken: %d %d %d %d %d", g, cut, r1, r2, r3, r4, r5);
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[512];
    for (int round = 0; round < 20000; round++) {
        const char *src = good[round % 8];
        size_t n = strlen(src);
        memcpy(buf, src, n);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[x % n] = (char)(x >> 32);
        }
        char *p = malloc(n);
        memcpy(p, buf, n);
        (void)vigil_etcd__parse_grant(200, p, n, &a, &b);
        (void)vigil_etcd__parse_acquire(200, p, n, LID, &t);
        (void)vigil_etcd__parse_keepalive(200, p, n, LID, &a);
        (void)vigil_etcd__parse_txn(200, p, n, &s);
        (void)vigil_etcd__parse_revoke(200, p, n);
        free(p);
    }
    /* Nesting far past any sane depth: cJSON stops at its limit. */
    size_t deep = 100000;
    char *d = malloc(deep);
    memset(d, '[', deep);
    EXPECT_RC(vigil_etcd__parse_keepalive(200, d, deep, LID, &a), -EPROTO);
    memset(d, '{', deep);
    EXPECT_RC(vigil_etcd__parse_txn(200, d, deep, &s), -EPROTO);
    free(d);
    return 0;
}

/* An unreachable server is transient, never a loss, and fails at once. */
static int test_unreachable(void)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", et_closed_port());
    vigil_etcd *e = et_connect(url);
    vigil_lease l = { .key = "k", .token = 3, .ttl_ms = 2000, .id = 99 }, keep;
    memset(&keep, 0x33, sizeof(keep));
    vigil_lease out = keep;
    EXPECT_RC(vigil_etcd_acquire(e, "k", "me", 1000, &out), -ECONNREFUSED);
    EXPECT(memcmp(&out, &keep, sizeof(out)) == 0, "a failed acquire wrote its output");
    EXPECT_RC(vigil_etcd_renew(e, &l), -ECONNREFUSED);
    EXPECT_RC(vigil_etcd_release(e, &l), -ECONNREFUSED);
    vigil_lease_port port = vigil_etcd_port(e);
    EXPECT_RC(port.renew(port.ctx, &l), -ECONNREFUSED);
    vigil_etcd_close(e);

    /* A name that does not resolve is unreachable too. */
    e = et_connect("http://no-such-host.invalid:2379");
    vigil_etcd_set_timeout(e, 500, 1000);
    int rc = vigil_etcd_renew(e, &l);
    EXPECT(et_transient(rc), "renew against an unresolvable host: expected a transient error, got %d (%s)",
           rc, vigil_strerror(rc));
    vigil_etcd_close(e);
    return 0;
}

/* The whole client against a fake etcd: acquire, renew, release, and the
 * requests it sends. */
static int test_fake_cycle(void)
{
    static const struct et_reply script[] = {
        { ET_REPLY, 200, GRANT_OK }, { ET_REPLY, 200, ACQ_WON },     /* acquire */
        { ET_REPLY, 200, KA_OK },    { ET_REPLY, 200, TXN_TRUE },    /* renew: held */
        { ET_REPLY, 200, KA_OK },    { ET_REPLY, 200, TXN_FALSE },   /* renew: key gone from our lease */
        { ET_REPLY, 200, KA_EXPIRED },                               /* renew: lease expired */
        { ET_REPLY, 200, TXN_TRUE }, { ET_REPLY, 200, REVOKE_OK },   /* release: ours */
        { ET_REPLY, 200, TXN_FALSE }, { ET_REPLY, 404, NOT_FOUND },  /* release: not ours any more */
        { ET_REPLY, 200, GRANT_OK }, { ET_REPLY, 200, ACQ_HELD }, { ET_REPLY, 200, REVOKE_OK }, /* busy */
        { ET_REPLY, 200, TXN_TRUE }, { ET_REPLY, 404, NOT_FOUND },  /* release: lapsed before the revoke */
        { ET_REPLY, 200, TXN_TRUE }, { ET_REPLY, 503, NO_LEADER },  /* release: revoke unavailable */
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_lease l;
    int rc = vigil_etcd_acquire(e, "k2", "worker-1", 1500, &l);
    if (rc != 0)
        et_fake_stop(&f);
    EXPECT_RC(rc, 0);
    EXPECT(strcmp(l.key, "k2") == 0 && strcmp(l.owner, "worker-1") == 0 && l.token == 4 && l.id == LID &&
           l.ttl_ms == 2000, "lease: key %s owner %s token %llu id %lld ttl %llu", l.key, l.owner,
           (unsigned long long)l.token, (long long)l.id, (unsigned long long)l.ttl_ms);
    int r1 = vigil_etcd_renew(e, &l);
    int r2 = vigil_etcd_renew(e, &l);
    int r3 = vigil_etcd_renew(e, &l);
    int r4 = vigil_etcd_release(e, &l);
    int r5 = vigil_etcd_release(e, &l);
    vigil_lease busy;
    int r6 = vigil_etcd_acquire(e, "k2", "worker-2", 100, &busy);
    int r7 = vigil_etcd_release(e, &l);
    int r8 = vigil_etcd_release(e, &l);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(r1, 0);
    EXPECT_RC(r2, VIGIL_ELOST);
    EXPECT_RC(r3, VIGIL_ELOST);
    EXPECT_RC(r4, 0);
    EXPECT_RC(r5, VIGIL_ELOST);
    EXPECT_RC(r6, VIGIL_EBUSY);
    EXPECT_RC(r7, VIGIL_ELOST);
    EXPECT_RC(r8, -EAGAIN);

    /* What went over the wire: base64 key "azI=" and owner, the lease on
     * the put, TTL rounded up to whole seconds (1500 ms -> 2, 100 ms -> 1),
     * the guards on renew and release, and the revoke after EBUSY. */
    const char *log = et_fake_log(&f);
    static const char *const want[] = {
        "POST /v3/lease/grant {\"TTL\":\"2\"}\n",
        "\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"",
        "\"request_put\":{\"key\":\"azI=\",\"value\":\"d29ya2VyLTE=\",\"lease\":\"" LIDS "\"}",
        "POST /v3/lease/keepalive {\"ID\":\"" LIDS "\"}\n",
        "\"create_revision\":\"4\"},{\"key\":\"azI=\",\"target\":\"LEASE\",\"result\":\"EQUAL\",\"lease\":\"" LIDS "\"}",
        "POST /v3/lease/revoke {\"ID\":\"" LIDS "\"}\n",
        "POST /v3/lease/grant {\"TTL\":\"1\"}\n",
    };
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        EXPECT(strstr(log, want[i]), "expected the requests to contain %s; they were:\n%s", want[i], log);
    /* After EBUSY: grant, txn, then the revoke of the lease just granted. */
    const char *busy_grant = strstr(log, "POST /v3/lease/grant {\"TTL\":\"1\"}\n");
    const char *after = busy_grant ? strchr(busy_grant, '\n') : NULL;
    after = after ? strchr(after + 1, '\n') : NULL;
    EXPECT(after && strncmp(after + 1, "POST /v3/lease/revoke", 21) == 0,
           "expected a revoke right after the refused acquire; requests:\n%s", log);
    return 0;
}

/* Dead endpoints are passed over, and the one that answered is kept. */
static int test_fake_endpoints(void)
{
    static const struct et_reply script[] = {
        { ET_TEXT, 503, "<html>Service Unavailable</html>" }, /* a proxy in front of nothing */
        { ET_REPLY, 503, NO_LEADER },
        { ET_REPLY, 200, KA_OK }, { ET_REPLY, 200, TXN_TRUE },
        { ET_REPLY, 200, KA_OK }, { ET_REPLY, 200, TXN_TRUE },
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    char spec[256];
    int dead = et_closed_port();
    /* Each renew tries the dead endpoint, then the fake: a proxy's 503
     * page, then "no leader", then an answer; from then on the fake is
     * tried first. */
    snprintf(spec, sizeof(spec), "127.0.0.1:%d,%s", dead, f.url);
    vigil_etcd *e = et_connect(spec);
    vigil_lease l = { .key = "k2", .token = 4, .ttl_ms = 2000, .id = LID };
    int r1 = vigil_etcd_renew(e, &l);
    int r2 = vigil_etcd_renew(e, &l);
    int r3 = vigil_etcd_renew(e, &l);
    const char *cur = vigil_etcd__current_endpoint(e);
    bool cur_ok = cur && strcmp(cur, f.url) == 0;
    int r4 = vigil_etcd_renew(e, &l);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT(et_transient(r1), "dead endpoint then a 503 page: expected transient, got %d (%s)", r1, vigil_strerror(r1));
    EXPECT(et_transient(r2), "dead endpoint then no leader: expected transient, got %d (%s)", r2, vigil_strerror(r2));
    EXPECT_RC(r3, 0);
    EXPECT(cur_ok, "expected the answering endpoint %s to be current, got %s", f.url, cur ? cur : "(null)");
    EXPECT_RC(r4, 0);
    return 0;
}

/* etcd 3.3 serves /v3beta/, 3.2 /v3alpha/: a 404 without JSON moves on. */
static int test_fake_prefix(void)
{
    static const struct et_reply script[] = {
        { ET_TEXT, 404, "Not Found\n" }, { ET_TEXT, 404, "404 page not found\n" },
        { ET_REPLY, 200, KA_OK }, { ET_REPLY, 200, TXN_TRUE },
        { ET_REPLY, 200, KA_OK }, { ET_REPLY, 200, TXN_TRUE },
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_lease l = { .key = "k2", .token = 4, .ttl_ms = 2000, .id = LID };
    int r1 = vigil_etcd_renew(e, &l);
    int r2 = vigil_etcd_renew(e, &l);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(r1, 0);
    EXPECT_RC(r2, 0);
    const char *log = et_fake_log(&f);
    EXPECT(strstr(log, "POST /v3/lease/keepalive") && strstr(log, "POST /v3beta/lease/keepalive") &&
           strstr(log, "POST /v3alpha/lease/keepalive") && strstr(log, "POST /v3alpha/kv/txn") &&
           !strstr(log, "POST /v3/kv/txn"),
           "expected /v3/, /v3beta/, then /v3alpha/ kept; requests were:\n%s", log);
    return 0;
}

/* A hostile or broken server: every misbehaviour is a transient error
 * (retried by the keepalive), never a renewal and never a loss. */
static int test_fake_hostile(void)
{
    static const struct et_reply script[] = {
        { ET_CLOSE, 0, NULL },
        { ET_GARBAGE, 0, NULL },
        { ET_HUGE, 0, NULL },
        { ET_REPLY, 200, "{\"result\":" },
        { ET_REPLY, 200, "" },
        { ET_REPLY, 200, "[1,2,3]" },
        { ET_REPLY, 200, "{\"result\":{\"ID\":\"1\",\"TTL\":\"5\"}}" }, /* another lease's reply */
        { ET_REPLY, 200, KA_OK }, { ET_REPLY, 200, "{\"succeeded\":true}" }, /* a txn reply that is not etcd's */
        { ET_REPLY, 302, "{}" },
        { ET_HANG, 0, NULL },
    };
    const unsigned n = sizeof(script) / sizeof(script[0]), renews = 10; /* one takes two replies */
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, n), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_etcd_set_timeout(e, 300, 300);
    vigil_lease l = { .key = "k2", .token = 4, .ttl_ms = 2000, .id = LID };
    int rc[16];
    for (unsigned i = 0; i < renews; i++)
        rc[i] = vigil_etcd_renew(e, &l);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    static const int want[] = { -ECONNRESET, -EPROTO, -EMSGSIZE, -EPROTO, -EPROTO, -EPROTO, -EPROTO, -EPROTO,
                                -EPROTO, -ETIMEDOUT };
    for (unsigned i = 0; i < renews; i++) {
        EXPECT(et_transient(rc[i]), "hostile reply %u: expected a transient error, got %d (%s)", i, rc[i],
               vigil_strerror(rc[i]));
        EXPECT(rc[i] == want[i], "hostile reply %u: expected %d (%s), got %d (%s)", i, want[i],
               vigil_strerror(want[i]), rc[i], vigil_strerror(rc[i]));
    }
    return 0;
}

VT_MAIN(VT_CASE(test_base64), VT_CASE(test_endpoints), VT_CASE(test_arguments), VT_CASE(test_parse_grant),
        VT_CASE(test_parse_acquire), VT_CASE(test_parse_keepalive), VT_CASE(test_parse_txn_revoke),
        VT_CASE(test_parse_hostile), VT_CASE(test_unreachable), VT_CASE(test_fake_cycle),
        VT_CASE(test_fake_endpoints), VT_CASE(test_fake_prefix), VT_CASE(test_fake_hostile))
