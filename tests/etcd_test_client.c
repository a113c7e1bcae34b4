/* SPDX-License-Identifier: MIT */
/*
 * Description: the etcd adapter without etcd: base64, endpoint lists,
 * argument checks, the queue's request bodies (KEY/<lease hex>, the range
 * under KEY/), every reply interpreter on etcd's real replies and on
 * malformed, truncated and hostile ones, and the whole client against fake
 * servers (a dead endpoint passed over, the /v3beta fallback, a server that
 * hangs, closes, babbles or floods), an unreachable server being a
 * transient -errno and never VIGIL_ELOST.
 */
#include "etcd_testutil.h"

#include <vigil/group.h>

#define HDR "\"header\":{\"cluster_id\":\"7801232528081817440\",\"member_id\":\"13458989633860879742\"," \
            "\"revision\":\"4\",\"raft_term\":\"2\"}"
#define LID  5007618193102948884LL
#define LIDS "5007618193102948884"

static const char GRANT_OK[] = "{" HDR ",\"ID\":\"" LIDS "\",\"TTL\":\"2\"}";
/* The acquire txn's replies: our key k2/<LID in hex>, then the first key
 * under k2/. Won: put, our key at 4, first at 4. Held: our key at 9 (not
 * put: an earlier attempt's), someone else's first at 7. */
#define OWN_B64 "azIvNDU3ZWEyMzcxMmFmNGExNA=="
#define RANGE(key, rev, lease) \
    "{\"response_range\":{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"" key "\",\"create_revision\":\"" \
    rev "\",\"mod_revision\":\"" rev "\",\"version\":\"1\",\"lease\":\"" lease "\"}],\"count\":\"1\"}}"
static const char ACQ_WON[] =
    "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":{\"revision\":\"4\"}}},"
    RANGE(OWN_B64, "4", LIDS) "," RANGE(OWN_B64, "4", LIDS) "]}";
static const char ACQ_HELD[] =
    "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{}}," RANGE(OWN_B64, "9", LIDS) ","
    RANGE("azIvMTIzNA==", "7", "1234") "]}";
static const char ACQ_OURS_EARLIER[] =
    "{" HDR ",\"responses\":[" RANGE(OWN_B64, "8", LIDS) "," RANGE(OWN_B64, "8", LIDS) "]}";
/* The queue's other replies: the holder (get), a lease's time to live, a
 * waiter's look, watch messages. */
static const char HOLDER[] =
    "{" HDR ",\"kvs\":[{\"key\":\"azIvMTIzNA==\",\"create_revision\":\"7\",\"mod_revision\":\"7\","
    "\"version\":\"1\",\"value\":\"bGVhZGVyLUE=\",\"lease\":\"1234\"}],\"count\":\"1\"}";
static const char TTL_OK[] = "{" HDR ",\"ID\":\"1234\",\"TTL\":\"4\",\"grantedTTL\":\"5\"}";
static const char TTL_GONE[] = "{" HDR ",\"ID\":\"1234\",\"TTL\":\"-1\"}";
static const char PRED[] =
    "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"header\":{\"revision\":\"4\"},"
    "\"kvs\":[{\"key\":\"azIvMTIzNA==\",\"create_revision\":\"3\",\"mod_revision\":\"3\",\"version\":\"1\","
    "\"lease\":\"1234\"}],\"count\":\"1\"}}]}";
static const char PRED_NONE[] = "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"header\":{}}}]}";
static const char WATCH_CREATED[] = "{\"result\":{" HDR ",\"created\":true}}";
static const char WATCH_DELETE[] =
    "{\"result\":{" HDR ",\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"azIvMTIzNA==\",\"mod_revision\":\"5\"}}]}}";
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
    for (unsigned i = 0; i < 7; i++) {
        char dec[16];
        int n = vigil_etcd__unb64(want[i], strlen(want[i]), dec, sizeof(dec));
        EXPECT(n == (int)strlen(in[i]) && memcmp(dec, in[i], (size_t)n) == 0, "unbase64(\"%s\"): got %d", want[i], n);
    }
    char dec[8];
    EXPECT_RC(vigil_etcd__unb64("//4A+w==", 8, dec, sizeof(dec)), 4);
    EXPECT(memcmp(dec, bin, 4) == 0, "unbase64 of binary");
    EXPECT_RC(vigil_etcd__unb64("Zm9v", 4, dec, 2), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd__unb64("Zm9v!", 5, dec, sizeof(dec)), -EPROTO);
    EXPECT_RC(vigil_etcd__unb64("Z", 1, dec, sizeof(dec)), -EPROTO);
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
    uint64_t rev = 0;
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_WON), LID, &rev), 0);
    EXPECT(rev == 4, "expected our key's create_revision 4, got %llu", (unsigned long long)rev);
    rev = 0;
    /* Someone else's key is first: busy, and our place (9) is told. */
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_HELD), LID, &rev), VIGIL_EBUSY);
    EXPECT(rev == 9, "EBUSY: expected our place 9, got %llu", (unsigned long long)rev);
    /* Our own lease on the key in the failure branch: an earlier attempt's
     * put took and its reply was lost. That is a win, at its revision. */
    EXPECT_RC(vigil_etcd__parse_acquire(200, P(ACQ_OURS_EARLIER), LID, &rev), 0);
    EXPECT(rev == 8, "expected token 8 from the earlier put, got %llu", (unsigned long long)rev);
    rev = 0;
    static const char *const bad[] = {
        /* success without the ranges, or a range without its key */
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{}}]}",
        "{" HDR ",\"succeeded\":true}",
        "{" HDR ",\"succeeded\":true,\"responses\":[" RANGE(OWN_B64, "4", LIDS) "]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[]}}," RANGE(OWN_B64, "4", LIDS) "]}",
        "{" HDR ",\"responses\":[" RANGE(OWN_B64, "4", LIDS) ",{\"response_range\":{}}]}",
        "{" HDR ",\"responses\":[{\"response_range\":{\"kvs\":{}}}," RANGE(OWN_B64, "4", LIDS) "]}",
        "{" HDR ",\"responses\":[{\"response_range\":{\"kvs\":[7]}}," RANGE(OWN_B64, "4", LIDS) "]}",
        "{" HDR ",\"responses\":\"none\"}",
        "{" HDR "}",
        /* our key carries another lease: not what we put */
        "{" HDR ",\"succeeded\":true,\"responses\":[" RANGE(OWN_B64, "4", "1") "," RANGE(OWN_B64, "4", "1") "]}",
        /* the first key after ours, bad revisions */
        "{" HDR ",\"responses\":[" RANGE(OWN_B64, "4", LIDS) "," RANGE("eA==", "5", "1") "]}",
        "{" HDR ",\"responses\":[" RANGE(OWN_B64, "0", LIDS) "," RANGE(OWN_B64, "0", LIDS) "]}",
        "{" HDR ",\"responses\":[" RANGE(OWN_B64, "-4", LIDS) "," RANGE(OWN_B64, "-4", LIDS) "]}",
        "{" HDR ",\"responses\":[" RANGE(OWN_B64, "4", "x") "," RANGE(OWN_B64, "4", LIDS) "]}",
        /* a succeeded that is not a bool, a missing header */
        "{" HDR ",\"succeeded\":\"yes\",\"responses\":[]}",
        "{\"succeeded\":true,\"responses\":[" RANGE(OWN_B64, "4", LIDS) "," RANGE(OWN_B64, "4", LIDS) "]}",
        "{}", "[]", "", "{\"header\":",
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = vigil_etcd__parse_acquire(200, P(bad[i]), LID, &rev);
        EXPECT(rc == -EPROTO, "acquire reply %s: expected -EPROTO, got %d (%s)", bad[i], rc, vigil_strerror(rc));
    }
    EXPECT(rev == 0, "a refused reply wrote the revision");
    /* Our fresh lease already gone at the put: a slow server, not a loss. */
    EXPECT_RC(vigil_etcd__parse_acquire(404, P(NOT_FOUND), LID, &rev), -ETIMEDOUT);
    EXPECT_RC(vigil_etcd__parse_acquire(400, P("{\"error\":\"etcdserver: key is not provided\",\"code\":3}"), LID, &rev),
              -EINVAL);
    return 0;
}

/* The queue's bodies name our key KEY/<hex>, the range [KEY/, KEY0), and
 * the limits etcd's concurrency package uses. */
static int test_queue_bodies(void)
{
    char own[200], buf[4096];
    EXPECT_RC(vigil_etcd__own_key("k2", LID, own, sizeof(own)), 0);
    EXPECT(strcmp(own, "k2/457ea23712af4a14") == 0, "own key: %s", own);
    EXPECT_RC(vigil_etcd__own_key("k2", LID, own, 19), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd__body_acquire(buf, sizeof(buf), "k2", "worker-1", LID), 0);
    static const char *const acq[] = {
        "\"compare\":[{\"key\":\"" OWN_B64 "\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}]",
        "\"request_put\":{\"key\":\"" OWN_B64 "\",\"value\":\"d29ya2VyLTE=\",\"lease\":\"" LIDS "\"}",
        "{\"request_range\":{\"key\":\"azIv\",\"range_end\":\"azIw\",\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\","
        "\"limit\":\"1\",\"keys_only\":true}}",
    };
    for (unsigned i = 0; i < 3; i++)
        EXPECT(strstr(buf, acq[i]), "acquire body lacks %s:\n%s", acq[i], buf);
    EXPECT_RC(vigil_etcd__body_holder(buf, sizeof(buf), "k2"), 0);
    EXPECT(strcmp(buf, "{\"key\":\"azIv\",\"range_end\":\"azIw\",\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\","
                       "\"limit\":\"1\"}") == 0, "holder body: %s", buf);
    EXPECT_RC(vigil_etcd__body_pred(buf, sizeof(buf), "k2", LID, 9), 0);
    EXPECT(strstr(buf, "\"create_revision\":\"9\"") && strstr(buf, "\"lease\":\"" LIDS "\"") &&
           strstr(buf, "\"sort_order\":\"DESCEND\"") && strstr(buf, "\"max_create_revision\":\"8\""),
           "pred body: %s", buf);
    EXPECT_RC(vigil_etcd__body_pred(buf, sizeof(buf), "k2", LID, 1), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd__body_watch(buf, sizeof(buf), "azIvMTIzNA==", 5), 0);
    EXPECT(strcmp(buf, "{\"create_request\":{\"key\":\"azIvMTIzNA==\",\"start_revision\":\"5\","
                       "\"progress_notify\":true,\"filters\":[\"NOPUT\"]}}") == 0, "watch body: %s", buf);
    /* The longest key: its own key and ranges still fit. */
    char longkey[128];
    memset(longkey, 'K', 127);
    longkey[127] = '\0';
    EXPECT_RC(vigil_etcd__body_acquire(buf, sizeof(buf), longkey, "o", INT64_MAX), 0);
    EXPECT_RC(vigil_etcd__body_pred(buf, sizeof(buf), longkey, INT64_MAX, 9), 0);
    EXPECT_RC(vigil_etcd__body_acquire(buf, 100, "k2", "o", LID), VIGIL_ERANGE);
    return 0;
}

static int test_parse_queue(void)
{
    uint64_t rev = 0;
    int64_t lease = 0, left = 0, granted = 0;
    char owner[64], small[4], pred[64];
    EXPECT_RC(vigil_etcd__parse_holder(200, P(HOLDER), &rev, &lease, owner, sizeof(owner)), 0);
    EXPECT(rev == 7 && lease == 1234 && strcmp(owner, "leader-A") == 0, "holder: rev %llu lease %lld owner %s",
           (unsigned long long)rev, (long long)lease, owner);
    EXPECT_RC(vigil_etcd__parse_holder(200, P(HOLDER), &rev, &lease, small, sizeof(small)), 0);
    EXPECT(strcmp(small, "lea") == 0, "an owner longer than the field is cut: %s", small);
    /* etcdctl lock: no value, and a key put by hand: no lease. */
    EXPECT_RC(vigil_etcd__parse_holder(200, P("{" HDR ",\"kvs\":[{\"key\":\"eA==\",\"create_revision\":\"3\"}]}"),
                                       &rev, &lease, owner, sizeof(owner)), 0);
    EXPECT(rev == 3 && lease == 0 && owner[0] == '\0', "bare key: rev %llu lease %lld owner %s",
           (unsigned long long)rev, (long long)lease, owner);
    EXPECT_RC(vigil_etcd__parse_holder(200, P("{" HDR "}"), &rev, &lease, owner, sizeof(owner)), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd__parse_holder(200, P("{" HDR ",\"kvs\":[]}"), &rev, &lease, owner, sizeof(owner)), VIGIL_EVACANT);
    static const char *const bad_holder[] = {
        "{}", "{" HDR ",\"kvs\":{}}", "{" HDR ",\"kvs\":[1]}", "{" HDR ",\"kvs\":[{\"key\":\"eA==\"}]}",
        "{" HDR ",\"kvs\":[{\"create_revision\":\"3\",\"value\":\"!!\"}]}",
        "{" HDR ",\"kvs\":[{\"create_revision\":\"3\",\"value\":7}]}",
        "{" HDR ",\"kvs\":[{\"create_revision\":\"3\",\"lease\":\"-2\"}]}",
    };
    for (unsigned i = 0; i < sizeof(bad_holder) / sizeof(bad_holder[0]); i++) {
        int rc = vigil_etcd__parse_holder(200, P(bad_holder[i]), &rev, &lease, owner, sizeof(owner));
        EXPECT(rc == -EPROTO, "holder reply %s: expected -EPROTO, got %d", bad_holder[i], rc);
    }
    EXPECT_RC(vigil_etcd__parse_ttl(200, P(TTL_OK), &left, &granted), 0);
    EXPECT(left == 4 && granted == 5, "ttl: left %lld granted %lld", (long long)left, (long long)granted);
    EXPECT_RC(vigil_etcd__parse_ttl(200, P(TTL_GONE), &left, &granted), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd__parse_ttl(404, P(NOT_FOUND), &left, &granted), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd__parse_ttl(200, P("{\"TTL\":\"4\"}"), &left, &granted), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_ttl(200, P("{" HDR ",\"TTL\":\"-7\"}"), &left, &granted), -EPROTO);

    int64_t hrev = 0;
    EXPECT_RC(vigil_etcd__parse_pred(200, P(PRED), pred, sizeof(pred), &hrev), 0);
    EXPECT(strcmp(pred, "azIvMTIzNA==") == 0 && hrev == 4, "pred: %s at %lld", pred, (long long)hrev);
    EXPECT_RC(vigil_etcd__parse_pred(200, P(PRED_NONE), pred, sizeof(pred), &hrev), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd__parse_pred(200, P(TXN_FALSE), pred, sizeof(pred), &hrev), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd__parse_pred(200, P(PRED), pred, 5, &hrev), VIGIL_ERANGE);
    static const char *const bad_pred[] = {
        "{" HDR ",\"succeeded\":true}",
        "{\"header\":{},\"succeeded\":true,\"responses\":[{\"response_range\":{}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"a\\\"b\"}]}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":7}]}}]}",
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"kvs\":[{}]}}]}",
    };
    for (unsigned i = 0; i < sizeof(bad_pred) / sizeof(bad_pred[0]); i++) {
        int rc = vigil_etcd__parse_pred(200, P(bad_pred[i]), pred, sizeof(pred), &hrev);
        EXPECT(rc == -EPROTO, "pred reply %s: expected -EPROTO, got %d", bad_pred[i], rc);
    }

    EXPECT_RC(vigil_etcd__parse_watch(P(WATCH_CREATED)), VIGIL_ETCD_WATCH_NOTHING);
    EXPECT_RC(vigil_etcd__parse_watch(P(WATCH_DELETE)), VIGIL_ETCD_WATCH_DELETED);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":{" HDR ",\"events\":[{\"kv\":{}}]}}")), VIGIL_ETCD_WATCH_PUT);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":{" HDR ",\"created\":true,\"canceled\":true,\"cancel_reason\":"
                                        "\"rpc error: code = Unauthenticated desc = etcdserver: invalid auth token\"}}")),
              -EACCES);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":{" HDR ",\"canceled\":true}}")), VIGIL_ETCD_WATCH_CANCELED);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":{" HDR ",\"compact_revision\":\"9\"}}")), VIGIL_ETCD_WATCH_CANCELED);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}")), -EAGAIN);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":7}")), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_watch(P("{\"result\":{}")), -EPROTO);

    /* Second in line (etcd_wait.c, SECOND IN LINE): the look says whether
     * the one ahead is alone below ours; the watch of all of KEY/ says
     * OURS only for the one ahead deleted with ours untouched. */
    bool first = false;
    EXPECT_RC(vigil_etcd__parse_pred_first(200, P(PRED), pred, sizeof(pred), &hrev, &first), 0);
    EXPECT(first, "one key below ours: it holds the key");
    static const char PRED_TWO[] =
        "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_range\":{\"header\":{\"revision\":\"6\"},"
        "\"kvs\":[{\"key\":\"azIvMTIzNA==\",\"create_revision\":\"5\"},{\"key\":\"azIvOTk=\",\"create_revision\":\"3\"}],"
        "\"more\":true}}]}";
    EXPECT_RC(vigil_etcd__parse_pred_first(200, P(PRED_TWO), pred, sizeof(pred), &hrev, &first), 0);
    EXPECT(!first && strcmp(pred, "azIvMTIzNA==") == 0 && hrev == 4,
           "two keys below ours: the last created is the one ahead, not the holder (%s, first %d)", pred, first);
    const char *ahead = "azIvMTIzNA==", *own = "azIvYWI=";
#define EV(type, key) "{\"type\":\"" type "\",\"kv\":{\"key\":\"" key "\",\"mod_revision\":\"5\"}}"
#define WATCH_OF(evs) "{\"result\":{" HDR ",\"events\":[" evs "]}}"
    static const struct {
        const char *msg;
        int         want;
    } keyed[] = {
        { WATCH_OF(EV("DELETE", "azIvMTIzNA==")), VIGIL_ETCD_WATCH_OURS },
        { WATCH_OF(EV("PUT", "azIvMTIzNA==")), VIGIL_ETCD_WATCH_NOTHING },       /* a proclaim by the holder */
        { WATCH_OF(EV("DELETE", "azIvOTk=")), VIGIL_ETCD_WATCH_NOTHING },        /* another key */
        { WATCH_OF("{\"kv\":{\"key\":\"azIvOTk=\"}}"), VIGIL_ETCD_WATCH_NOTHING }, /* one joining behind */
        { WATCH_OF(EV("DELETE", "azIvYWI=")), VIGIL_ETCD_WATCH_DELETED },       /* ours gone: look */
        { WATCH_OF("{\"kv\":{\"key\":\"azIvYWI=\"}}"), VIGIL_ETCD_WATCH_DELETED }, /* a put over ours */
        { WATCH_OF(EV("DELETE", "azIvMTIzNA==") "," EV("DELETE", "azIvYWI=")), VIGIL_ETCD_WATCH_DELETED },
        { WATCH_OF(EV("DELETE", "azIvYWI=") "," EV("DELETE", "azIvMTIzNA==")), VIGIL_ETCD_WATCH_DELETED },
        { WATCH_OF("{}"), VIGIL_ETCD_WATCH_NOTHING },
        { "{\"result\":{" HDR ",\"canceled\":true,\"compact_revision\":\"9\"}}", VIGIL_ETCD_WATCH_CANCELED },
        { "{\"result\":7}", -EPROTO },
    };
#undef EV
#undef WATCH_OF
    for (unsigned i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++) {
        int rc = vigil_etcd__parse_watch_keys(P(keyed[i].msg), ahead, own);
        EXPECT(rc == keyed[i].want, "watch of KEY/ %s: expected %d, got %d", keyed[i].msg, keyed[i].want, rc);
    }
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
    static const char *const good[] = { GRANT_OK, ACQ_WON, ACQ_HELD, KA_OK, KA_EXPIRED, TXN_TRUE, TXN_FALSE, NOT_FOUND,
                                        HOLDER, TTL_OK, PRED, WATCH_DELETE };
    const unsigned ngood = sizeof(good) / sizeof(good[0]);
    char owner[64], pred[64];
    int64_t a, b;
    uint64_t t;
    bool s;
    for (unsigned g = 0; g < ngood; g++) {
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
            int r6 = vigil_etcd__parse_holder(200, p, cut, &t, &a, owner, sizeof(owner));
            int r7 = vigil_etcd__parse_ttl(200, p, cut, &a, &b);
            int r8 = vigil_etcd__parse_pred(200, p, cut, pred, sizeof(pred), &a);
            int r9 = vigil_etcd__parse_watch(p, cut);
            free(p);
            EXPECT(r1 < 0 && r2 < 0 && r3 < 0 && r4 < 0 && r5 < 0 && r6 < 0 && r7 < 0 && r8 < 0 && r9 < 0,
                   "reply %u cut at %zu was taken: %d %d %d %d %d %d %d %d %d", g, cut, r1, r2, r3, r4, r5, r6, r7,
                   r8, r9);
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[2048];
    for (int round = 0; round < 20000; round++) {
        const char *src = good[round % ngood];
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
        (void)vigil_etcd__parse_holder(200, p, n, &t, &a, owner, sizeof(owner));
        (void)vigil_etcd__parse_ttl(200, p, n, &a, &b);
        (void)vigil_etcd__parse_pred(200, p, n, pred, sizeof(pred), &a);
        (void)vigil_etcd__parse_watch(p, n);
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
        { ET_REPLY, 200, TXN_TRUE }, { ET_REPLY, 404, NOT_FOUND },  /* release: gone before the revoke */
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
    EXPECT_RC(r7, 0); /* held, then not found: by this revoke delivered twice, or lapsed since; released */
    EXPECT_RC(r8, -EAGAIN);

    /* What went over the wire: our key k2/<hex> in base64 and the owner, the lease on
     * the put, TTL rounded up to whole seconds (1500 ms -> 2, 100 ms -> 1),
     * the guards on renew and release, and the revoke after EBUSY. */
    const char *log = et_fake_log(&f);
    static const char *const want[] = {
        "POST /v3/lease/grant {\"TTL\":\"2\"}\n",
        "\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"",
        "\"request_put\":{\"key\":\"" OWN_B64 "\",\"value\":\"d29ya2VyLTE=\",\"lease\":\"" LIDS "\"}",
        "POST /v3/lease/keepalive {\"ID\":\"" LIDS "\"}\n",
        "\"create_revision\":\"4\"},{\"key\":\"" OWN_B64 "\",\"target\":\"LEASE\",\"result\":\"EQUAL\",\"lease\":\"" LIDS "\"}",
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

/* A store that went backwards (issue 25.7): etcd's data wiped, or
 * restored from an older copy, while a holder holds token 4. Its lease
 * may even be there (a restored copy), and every check of the key may
 * pass; a txn answered at revision 2 is still a loss, at once, and the
 * message says why. A keepalive's revision, which a lagging member
 * answers from its own, is not judged. */
static int test_store_behind(void)
{
#define HDR2 "\"header\":{\"cluster_id\":\"7801232528081817440\",\"revision\":\"2\",\"raft_term\":\"2\"}"
    static const char KA_BEHIND[] = "{\"result\":{" HDR2 ",\"ID\":\"" LIDS "\",\"TTL\":\"2\"}}";
    static const char TXN_BEHIND[] = "{" HDR2 ",\"succeeded\":true}";
    static const struct et_reply script[] = {
        { ET_REPLY, 200, GRANT_OK },  { ET_REPLY, 200, ACQ_WON },    /* acquire: token 4 */
        { ET_REPLY, 200, KA_BEHIND }, { ET_REPLY, 200, TXN_TRUE },   /* renew: the keepalive's 2 is not judged */
        { ET_REPLY, 200, KA_OK },     { ET_REPLY, 200, TXN_BEHIND }, /* renew: the txn's 2 is */
        { ET_REPLY, 200, TXN_BEHIND },                               /* release */
        { ET_REPLY, 200, TXN_BEHIND },                               /* proclaim */
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_lease l;
    int rc = vigil_etcd_acquire(e, "k2", "worker-1", 1500, &l);
    int r1 = rc == 0 ? vigil_etcd_renew(e, &l) : rc;
    int r2 = rc == 0 ? vigil_etcd_renew(e, &l) : rc;
    char why[300];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    int r3 = rc == 0 ? vigil_etcd_release(e, &l) : rc;
    char why_rel[300];
    snprintf(why_rel, sizeof(why_rel), "%s", vigil_etcd_errmsg());
    int r4 = rc == 0 ? vigil_etcd_proclaim(e, &l, "worker-2") : rc;
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(rc, 0);
    EXPECT_RC(r1, 0);
    EXPECT_RC(r2, VIGIL_ELOST);
    EXPECT(strstr(why, "went backwards") && strstr(why, "revision 2") && strstr(why, "token 4"),
           "renew: expected the store gone backwards in the message, got '%s'", why);
    EXPECT_RC(r3, VIGIL_ELOST);
    EXPECT(strstr(why_rel, "went backwards"), "release: expected the store gone backwards, got '%s'", why_rel);
    EXPECT_RC(r4, VIGIL_ELOST);
    EXPECT(strcmp(l.owner, "worker-1") == 0, "a refused proclaim changed the owner to '%s'", l.owner);

    bool s = false;
    struct vigil_etcd_hdr at = { -1, 1 };
    EXPECT_RC(vigil_etcd__parse_txn_at(200, P(TXN_BEHIND), &s, &at), 0);
    EXPECT(s && at.rev == 2 && at.cluster == 7801232528081817440ull, "parse_txn_at: succeeded %d at %lld in %llu", s,
           (long long)at.rev, (unsigned long long)at.cluster);
    EXPECT_RC(vigil_etcd__parse_txn_at(200, P("{\"header\":{},\"succeeded\":true}"), &s, &at), 0);
    EXPECT(at.rev == 0 && at.cluster == 0, "no revision, no cluster: expected 0 and 0 (not judged), got %lld, %llu",
           (long long)at.rev, (unsigned long long)at.cluster);
    EXPECT_RC(vigil_etcd__parse_txn_at(200, P("{\"header\":{\"revision\":\"x\"}}"), &s, &at), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn_at(200, P("{\"header\":{\"cluster_id\":\"-1\"}}"), &s, &at), -EPROTO);
    EXPECT_RC(vigil_etcd__parse_txn_at(200, P("{\"header\":{\"cluster_id\":\"18446744073709551616\"}}"), &s, &at),
              -EPROTO);
    e = et_connect("127.0.0.1:1");
    int none = vigil_etcd__store_behind(e, &(struct vigil_etcd_hdr){ 9, 42 }, 4); /* no cluster seen yet */
    vigil_etcd__note_cluster(e, P(KA_OK));
    vigil_etcd__note_cluster(e, P("{\"header\":{\"cluster_id\":\"42\"}}")); /* the first stays */
    int same = vigil_etcd__store_behind(e, &(struct vigil_etcd_hdr){ 4, 7801232528081817440ull }, 4);
    int behind = vigil_etcd__store_behind(e, &(struct vigil_etcd_hdr){ 3, 0 }, 4);
    int other = vigil_etcd__store_behind(e, &(struct vigil_etcd_hdr){ 9, 42 }, 4);
    vigil_etcd_close(e);
    EXPECT_RC(none, 0);
    EXPECT_RC(same, 0);
    EXPECT_RC(behind, VIGIL_ELOST);
    EXPECT_RC(other, VIGIL_ELOST);
    return 0;
}

/* Member "a" joins group g on e and says unit u1 at token done: done's
 * result (or the join's failure), vigil_etcd_errmsg then in why. */
static int join_and_done(vigil_etcd *e, uint64_t token, char *why, size_t cap)
{
    unsetenv("VIGIL_DIR"); /* no record for an agent */
    vigil_group_member *m = NULL;
    int rc = vigil_group_join(e, "g", "a", 60000, &m);
    vigil_group_unit u = { .name = "u1", .token = token };
    int done = rc == 0 ? vigil_group_done(m, &u) : rc;
    snprintf(why, cap, "%s", vigil_etcd_errmsg());
    vigil_group_leave(m);
    return done;
}

/* A reply from another cluster than the one the handle first spoke to
 * (the endpoints now lead to another etcd: the token's store is not
 * there) is a lost lease, whatever its revision: a holder's check, and
 * a member's fenced write, each with a message of its own. */
static int test_other_cluster(void)
{
#define HDR42 "\"header\":{\"cluster_id\":\"42\",\"member_id\":\"7\",\"revision\":\"900\",\"raft_term\":\"2\"}"
    static const char TXN_ELSEWHERE[] = "{" HDR42 ",\"succeeded\":true}";
    static const char GRANT_LONG[] = "{" HDR ",\"ID\":\"" LIDS "\",\"TTL\":\"60\"}";
    static const char JOINED[] = "{" HDR ",\"succeeded\":true}";
    static const struct et_reply script[] = {
        { ET_REPLY, 200, GRANT_OK },      { ET_REPLY, 200, ACQ_WON },       /* acquire: token 4, cluster 78.. */
        { ET_REPLY, 200, KA_OK },         { ET_REPLY, 200, TXN_ELSEWHERE }, /* renew: answered by cluster 42 */
        { ET_REPLY, 200, GRANT_LONG },    { ET_REPLY, 200, JOINED },        /* join: revision 4 */
        { ET_REPLY, 200, TXN_ELSEWHERE }, { ET_REPLY, 200, TXN_ELSEWHERE }, /* done, and what it sends again */
        { ET_REPLY, 200, TXN_ELSEWHERE }, { ET_REPLY, 200, TXN_ELSEWHERE },
        { ET_REPLY, 200, REVOKE_OK },                                       /* leave */
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_lease l;
    int rc = vigil_etcd_acquire(e, "k2", "worker-1", 1500, &l);
    int renewed = rc == 0 ? vigil_etcd_renew(e, &l) : rc;
    char why[300], why_done[300];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    int done = join_and_done(e, 4, why_done, sizeof(why_done));
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(rc, 0);
    EXPECT(renewed == VIGIL_ELOST && strstr(why, "another cluster") && strstr(why, "ID 2a"),
           "renew answered by another cluster: %d, '%s'", renewed, why);
    EXPECT(done == VIGIL_ELOST && strstr(why_done, "another cluster"), "done answered by another cluster: %d, '%s'",
           done, why_done);
    return 0;
#undef HDR42
}

/* The same for a group member: every txn fenced by its join revision
 * (50 here) answered at revision 2 is VIGIL_ELOST, whatever it says. */
static int test_group_store_behind(void)
{
    static const char GRANT_LONG[] = "{" HDR ",\"ID\":\"" LIDS "\",\"TTL\":\"60\"}";
    static const char JOINED[] = "{\"header\":{\"revision\":\"50\"},\"succeeded\":true}";
    static const char DONE_BEHIND[] = "{" HDR2 ",\"succeeded\":true}";
    static const struct et_reply script[] = {
        { ET_REPLY, 200, GRANT_LONG }, { ET_REPLY, 200, JOINED }, /* join: revision 50 */
        /* done, which sends again what it does not know yet: each
         * reply is the same (one left over is as good a revoke's reply) */
        { ET_REPLY, 200, DONE_BEHIND }, { ET_REPLY, 200, DONE_BEHIND },
        { ET_REPLY, 200, DONE_BEHIND }, { ET_REPLY, 200, DONE_BEHIND },
        { ET_REPLY, 200, REVOKE_OK },                              /* leave */
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = et_connect(f.url);
    char why[300];
    int done = join_and_done(e, 45, why, sizeof(why));
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT(done == VIGIL_ELOST, "done: %d (%s), requests:\n%s", done, vigil_strerror(done), et_fake_log(&f));
    EXPECT(strstr(why, "went backwards") && strstr(why, "token 50"), "expected the store gone backwards, got '%s'",
           why);
    return 0;
#undef HDR2
}

/* Issue 25.5 and its review: the observer's pause before it watches
 * again after a watch ended, on a clock of the test's (each stream's
 * life is an argument): at once the first time, then growing, 200, 400,
 * 800 ms, to 1 s and no further; a stream that ran a second or more was
 * no spin, and its end is a first again (a quiet observer cancelled now
 * and then is not paused at each); one shorter keeps the pause. */
static int test_observe_pause(void)
{
    static const struct {
        uint64_t lived_ms;
        unsigned pause_ms;
    } steps[] = {
        { 0, 0 },    { 3, 200 },  { 0, 400 },   { 10, 800 }, { 0, 1000 }, { 0, 1000 }, /* streams ending at once */
        { 999, 1000 },                                                                 /* not long enough */
        { 1000, 0 }, { 2, 200 },  { 86400000, 0 }, { 86400000, 0 },                    /* long lives, ended */
    };
    unsigned ended = 0;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        unsigned got = vigil_etcd__watch_ended_pause(&ended, steps[i].lived_ms);
        EXPECT(got == steps[i].pause_ms, "end %zu (a stream of %llu ms): a pause of %u ms, expected %u", i,
               (unsigned long long)steps[i].lived_ms, got, steps[i].pause_ms);
    }
    return 0;
}

/* The observer against a proxy that answers every watch with an empty
 * 200 (the stream ends at once): it looks again and watches anew, and
 * keeps doing so (a fourth stream comes), but never spins: however long
 * it ran (E ms, measured), at most 2 + E/200 streams. That bound is no
 * timing: between two streams the observer waits, after an end, the
 * pause of test_observe_pause (0 only after the first end here, or after
 * a stream that lived a second, a gap of a second itself), and, after a
 * look that dropped a live stream (silent, or a failed look), a re-check
 * of 200 ms at least; so every gap but the first is 200 ms or more, and
 * a slower machine only makes the gaps longer and the streams fewer. A
 * spinning observer opens dozens to hundreds a second. The fake answers
 * by path, on every connection at once. */
static int test_observe_backs_off(void)
{
    static const struct et_route routes[] = {
        { "/v3/kv/range", 200, "{\"header\":{\"revision\":\"5\"},\"count\":\"0\"}", false },
        { "/v3/watch", 200, "", true },
    };
    struct et_fake f;
    EXPECT_RC(et_router_start(&f, routes, 2), 0);
    uint64_t t0 = vt_now_ms();
    vigil_etcd *e = et_connect(f.url);
    vigil_etcd_observer *o = NULL;
    int rc = vigil_etcd_observe(e, "k", &o);
    vigil_lease_info info;
    int first = rc == 0 ? vigil_etcd_observer_next(o, &info, 10000 * 1000000ull) : rc;
    unsigned seen = 0;
    /* Four streams (the bounded wait is for them, not a measure), and two
     * seconds at least, for a spinner to show itself. */
    for (uint64_t until = vt_now_ms() + 20000; vt_now_ms() < until;) {
        seen = 0;
        for (const char *p = et_fake_log(&f); (p = strstr(p, "POST /v3/watch ")); p++)
            seen++;
        if (seen >= 4 && vt_now_ms() - t0 >= 2000)
            break;
        vt_sleep_ms(50);
    }
    vigil_etcd_observer_close(o);
    vigil_etcd_close(e);
    uint64_t ran_ms = vt_now_ms() - t0;
    et_fake_stop(&f);
    const char *log = et_fake_log(&f);
    unsigned streams = 0, looks = 0;
    for (const char *p = log; (p = strstr(p, "POST /v3/watch ")); p++)
        streams++;
    for (const char *p = log; (p = strstr(p, "POST /v3/kv/range ")); p++)
        looks++;
    EXPECT_RC(rc, 0);
    EXPECT_RC(first, 0);
    EXPECT(info.state == VIGIL_LEASE_VACANT, "first report: state %d, expected vacant", info.state);
    EXPECT(streams >= 4, "%u watch streams in %llu ms: the observer stopped watching", streams,
           (unsigned long long)ran_ms);
    EXPECT(streams <= 2 + ran_ms / 200, "%u watch streams (and %u looks) in %llu ms of streams that end at once: "
           "more than %llu, a spin", streams, looks, (unsigned long long)ran_ms, (unsigned long long)(2 + ran_ms / 200));
    printf("watches that end at once, for %llu ms: %u streams, %u looks\n", (unsigned long long)ran_ms, streams, looks);
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

/* The leader killed, a member electing: one says "no leader", the other
 * refuses the connection. Unavailable is the answer whichever is tried
 * last (a group txn rides it out; a refusal it would give up on: the
 * leader-killed case of etcd_test_group_cluster, under load). */
static int test_fake_electing(void)
{
    static const struct et_reply script[] = { { ET_REPLY, 503, NO_LEADER } };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    char spec[256];
    snprintf(spec, sizeof(spec), "%s,127.0.0.1:%d", f.url, et_closed_port());
    vigil_etcd *e = et_connect(spec);
    long http;
    const char *reply;
    size_t len;
    int rc = vigil_etcd__request(e, "v3/kv/txn", "{}", &http, &reply, &len);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(rc, -EAGAIN);
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

/* Issue 19, item 5. A revoke that timed out on one endpoint but may have
 * landed, answered "not found" by the next, is a release, not a loss; so
 * is the caller's retry of a release whose revoke timed out everywhere
 * (the key gone, the lease not found). A holder whose lease is past its
 * expiry but not yet revoked (a negative TTL) is VIGIL_LEASE_EXPIRED, not
 * -EPROTO. */
static int test_revoke_landed_and_expired_holder(void)
{
    static const char TTL_EXPIRED[] = "{" HDR ",\"ID\":\"1234\",\"TTL\":\"-3\",\"grantedTTL\":\"5\"}";
    static const struct et_reply s1[] = { { ET_REPLY, 200, TXN_TRUE }, { ET_HANG, 0, NULL } };
    static const struct et_reply s2[] = { { ET_REPLY, 404, NOT_FOUND } };
    static const struct et_reply s3[] = { { ET_REPLY, 200, TXN_TRUE }, { ET_HANG, 0, NULL },
                                          { ET_REPLY, 200, TXN_FALSE }, { ET_REPLY, 404, NOT_FOUND },
                                          { ET_REPLY, 200, HOLDER }, { ET_REPLY, 200, TTL_EXPIRED } };
    struct et_fake f1, f2, f3;
    EXPECT_RC(et_fake_start(&f1, s1, 2), 0);
    EXPECT_RC(et_fake_start(&f2, s2, 1), 0);
    EXPECT_RC(et_fake_start(&f3, s3, 6), 0);
    char both[200];
    snprintf(both, sizeof(both), "%s,%s", f1.url, f2.url);
    vigil_etcd *e = et_connect(both), *one = et_connect(f3.url);
    vigil_etcd_set_timeout(e, 300, 300);
    vigil_etcd_set_timeout(one, 300, 300);
    vigil_lease l = { .key = "k2", .token = 4, .ttl_ms = 2000, .id = LID };
    int r1 = vigil_etcd_release(e, &l);    /* revoke: silence on f1, "not found" from f2 */
    int r2 = vigil_etcd_release(one, &l);  /* revoke: silence, and no other endpoint */
    vigil_etcd_set_timeout(one, 1000, 3000); /* f3 answers once its silence (1.5 s) is over */
    int r3 = vigil_etcd_release(one, &l);  /* the retry: the key gone, the lease not found */
    vigil_lease_info info;
    int r4 = vigil_etcd_get(one, "k2", &info);
    vigil_etcd_close(e);
    vigil_etcd_close(one);
    et_fake_stop(&f1);
    et_fake_stop(&f2);
    et_fake_stop(&f3);
    EXPECT_RC(r1, 0);
    EXPECT(et_transient(r2), "a revoke that timed out: expected a transient error, got %d", r2);
    EXPECT_RC(r3, 0);
    EXPECT_RC(r4, 0);
    EXPECT(info.state == VIGIL_LEASE_EXPIRED && info.expires_in_ms == -3000 && info.token == 7 &&
               strcmp(info.owner, "leader-A") == 0,
           "an expired, unrevoked holder: state %u, expires_in_ms %lld, token %llu, owner %s", info.state,
           (long long)info.expires_in_ms, (unsigned long long)info.token, info.owner);
    int64_t left = 0, granted = 0;
    EXPECT_RC(vigil_etcd__parse_ttl(200, P(TTL_EXPIRED), &left, &granted), 0);
    EXPECT(left == -3 && granted == 5, "parse_ttl: left %lld granted %lld", (long long)left, (long long)granted);
    return 0;
}

/* Issue 19: a wait of 500 ms against a server that says nothing (each
 * request held 1.5 s, then dropped) ends with VIGIL_ETIMEDOUT when its
 * time is up, not with a request's own -ETIMEDOUT after the handle's 3 s. */
static int test_wait_bounded_by_time_left(void)
{
    static const struct et_reply script[] = { { ET_HANG, 0, NULL }, { ET_HANG, 0, NULL }, { ET_HANG, 0, NULL } };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, 3), 0);
    vigil_etcd *e = et_connect(f.url);
    vigil_lease l;
    uint64_t t0 = vt_now_ms();
    int rc = vigil_etcd_acquire_wait(e, "k", "w", 2000, 500 * 1000000ull, &l);
    uint64_t took = vt_now_ms() - t0;
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(rc, VIGIL_ETIMEDOUT);
    /* Not a timing: 1.5 s is how long the server holds a request, so a
     * wait that waited one out took that long at least. */
    EXPECT(took < 1500, "a 500 ms wait on a silent server took %llu ms", (unsigned long long)took);
    printf("500 ms wait against a silent server: VIGIL_ETIMEDOUT after %llu ms\n", (unsigned long long)took);
    return 0;
}

/* Issue 19, item 5: expires_in_ms rounds as the lease store's does (time
 * left rounded down, at least 1 while held; tests/test_leases_wait.c for
 * the embedded side): etcd's whole seconds toward zero are taken as they
 * come, a TTL of 0 (under a second either side, not revoked) is 1, and a
 * negative one is expired that long ago. */
static int test_expires_in_rounding(void)
{
    static const char TTL_ZERO[] = "{" HDR ",\"ID\":\"1234\",\"TTL\":\"0\",\"grantedTTL\":\"5\"}";
    static const char TTL_MINUS1[] = "{" HDR ",\"ID\":\"1234\",\"TTL\":\"-1\",\"grantedTTL\":\"5\"}";
    static const struct et_reply s[] = { { ET_REPLY, 200, HOLDER }, { ET_REPLY, 200, TTL_OK },
                                         { ET_REPLY, 200, HOLDER }, { ET_REPLY, 200, TTL_ZERO },
                                         { ET_REPLY, 200, HOLDER }, { ET_REPLY, 200, TTL_MINUS1 } };
    static const struct {
        unsigned state;
        int64_t  ms;
    } want[] = { { VIGIL_LEASE_HELD, 4000 }, { VIGIL_LEASE_HELD, 1 }, { VIGIL_LEASE_EXPIRED, -1000 } };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, s, 6), 0);
    vigil_etcd *e = et_connect(f.url);
    int rc[3];
    vigil_lease_info info[3];
    for (int i = 0; i < 3; i++)
        rc[i] = vigil_etcd_get(e, "k2", &info[i]);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(rc[i], 0);
        EXPECT(info[i].state == want[i].state && info[i].expires_in_ms == want[i].ms && info[i].ttl_ms == 5000,
               "get %d: state %u expires_in_ms %lld ttl_ms %llu, expected state %u expires_in_ms %lld", i,
               info[i].state, (long long)info[i].expires_in_ms, (unsigned long long)info[i].ttl_ms,
               want[i].state, (long long)want[i].ms);
    }
    return 0;
}

/* struct vigil_etcd_options' limits are the handle's: request_timeout_ms
 * cuts a request the server holds (1.5 s, then dropped) short, so the
 * call says the time ran out (-ETIMEDOUT) where the default 3 s would have
 * seen the drop (-ECONNRESET); dial_timeout_ms cuts a connect that is
 * never answered (a listener whose accept queue is full drops the SYN)
 * short in the connect phase, as curl's own words say. */
static int test_connect_opts_limits(void)
{
    /* A fake each: the second request is not queued behind the first
     * one's 1.5 s (the fake serves one connection at a time), which left
     * the drop a hair under the default 3 s on a loaded machine. */
    static const struct et_reply s[] = { { ET_HANG, 0, NULL } };
    struct et_fake f, f2;
    EXPECT_RC(et_fake_start(&f, s, 1), 0);
    EXPECT_RC(et_fake_start(&f2, s, 1), 0);
    vigil_etcd *e = NULL, *d = NULL;
    struct vigil_etcd_options o = { .request_timeout_ms = 300 };
    EXPECT_RC(vigil_etcd_connect_opts(f.url, &o, &e), 0);
    vigil_lease_info info;
    int cut = vigil_etcd_get(e, "k", &info);
    vigil_etcd_close(e);
    EXPECT_RC(vigil_etcd_connect(f2.url, &e), 0);
    int dropped = vigil_etcd_get(e, "k", &info);
    vigil_etcd_close(e);
    et_fake_stop(&f);
    et_fake_stop(&f2);
    EXPECT_RC(cut, -ETIMEDOUT);
    EXPECT(dropped != -ETIMEDOUT && et_transient(dropped), "the default limit: expected the drop, got %d (%s)",
           dropped, vigil_strerror(dropped));

    /* A listener with a backlog of 0 queues one connection (ours, never
     * accepted), then drops every SYN. */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    EXPECT(ls >= 0 && filler >= 0 && bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 0) == 0 &&
               getsockname(ls, (struct sockaddr *)&a, &al) == 0 &&
               connect(filler, (struct sockaddr *)&a, sizeof(a)) == 0,
           "listener: %s", strerror(errno));
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    o = (struct vigil_etcd_options){ .dial_timeout_ms = 200, .request_timeout_ms = 20000 };
    EXPECT_RC(vigil_etcd_connect_opts(url, &o, &d), 0);
    int dial = vigil_etcd_get(d, "k", &info);
    char why[256];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    vigil_etcd_close(d);
    close(filler);
    close(ls);
    EXPECT(dial == -ETIMEDOUT && strstr(why, "onnect"), "a connect never answered: %d (%s), '%s'", dial,
           vigil_strerror(dial), why);
    return 0;
}

VT_MAIN(VT_CASE(test_base64), VT_CASE(test_endpoints), VT_CASE(test_arguments), VT_CASE(test_parse_grant),
        VT_CASE(test_parse_acquire), VT_CASE(test_queue_bodies), VT_CASE(test_parse_queue), VT_CASE(test_parse_keepalive), VT_CASE(test_parse_txn_revoke),
        VT_CASE(test_parse_hostile), VT_CASE(test_unreachable), VT_CASE(test_fake_cycle),
        VT_CASE(test_fake_endpoints), VT_CASE(test_fake_electing), VT_CASE(test_fake_prefix), VT_CASE(test_fake_hostile), VT_CASE(test_wait_bounded_by_time_left),
        VT_CASE(test_revoke_landed_and_expired_holder), VT_CASE(test_expires_in_rounding),
        VT_CASE(test_connect_opts_limits), VT_CASE(test_store_behind),
        VT_CASE(test_group_store_behind), VT_CASE(test_other_cluster), VT_CASE(test_observe_pause),
        VT_CASE(test_observe_backs_off))
