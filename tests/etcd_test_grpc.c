/* SPDX-License-Identifier: MIT */
/*
 * Description: the gRPC transport (src/etcd/etcd_grpc.c, etcd_grpc_json.c):
 * the gateway's JSON to etcd's protobuf and back for every call vigil
 * makes, hostile replies (-EPROTO, never a crash), the frame, the status
 * mapping; and against a real etcd that gRPC is what auto speaks, that
 * the gateway still works when forced, and that an HTTP/1.1-only server
 * (the fakes) gets the gateway with nothing counted against it.
 */
#include "etcd_testutil.h"


#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static const struct vigil_etcd_grpc_method *method(const char *path)
{
    const struct vigil_etcd_grpc_method *m = vigil_etcd__grpc_method(path);
    if (!m) {
        fprintf(stderr, "no gRPC call for %s\n", path);
        exit(1);
    }
    return m;
}

/* json encoded as d and decoded again: the same JSON (as values). */
static int round_trip(const struct ProtobufCMessageDescriptor *d, const char *json)
{
    unsigned char *pb;
    size_t n, len;
    char *back;
    EXPECT_RC(vigil_etcd__pb_encode(d, json, 0, &pb, &n), 0);
    int rc = vigil_etcd__pb_decode(d, pb, n, &back, &len);
    free(pb);
    EXPECT_RC(rc, 0);
    cJSON *a = cJSON_Parse(json), *b = cJSON_Parse(back);
    bool same = a && b && cJSON_Compare(a, b, true);
    cJSON_Delete(a);
    cJSON_Delete(b);
    EXPECT(same && strlen(back) == len, "round trip of %s gave %s", json, back);
    free(back);
    return 0;
}

/* Every request vigil sends, and the replies etcd gives, both ways. */
static int test_each_message(void)
{
    static const struct {
        const char *path;
        bool        reply;
        const char *json;
    } cases[] = {
        { "v3/kv/range", false, "{\"key\":\"YQ==\",\"range_end\":\"Yg==\",\"limit\":\"1\",\"sort_order\":\"DESCEND\","
                                "\"sort_target\":\"CREATE\",\"keys_only\":true,\"max_create_revision\":\"99\"}" },
        { "v3/kv/range", true, "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"member_id\":\"1\","
                               "\"revision\":\"5\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":"
                               "\"2\",\"mod_revision\":\"3\",\"version\":\"1\",\"value\":\"Yg==\",\"lease\":\"-7\"}],"
                               "\"more\":true,\"count\":\"1\"}" },
        { "v3/kv/put", false, "{\"key\":\"YQ==\",\"lease\":\"7587899360832723719\",\"prev_kv\":true}" },
        { "v3/kv/deleterange", false, "{\"key\":\"YQ==\",\"range_end\":\"AA==\"}" },
        { "v3/kv/deleterange", true, "{\"header\":{\"revision\":\"9\"},\"deleted\":\"2\",\"prev_kvs\":[{\"key\":\"YQ==\"}]}" },
        { "v3/kv/txn", false,
          "{\"compare\":[{\"key\":\"YQ==\",\"target\":\"CREATE\",\"create_revision\":\"0\"}," /* EQUAL: 0, left out */
          "{\"key\":\"Yg==\",\"target\":\"LEASE\",\"lease\":\"12\"},"
          "{\"key\":\"Yw==\",\"target\":\"MOD\",\"result\":\"LESS\",\"mod_revision\":\"4\",\"range_end\":\"ZA==\"}],"
          "\"success\":[{\"request_put\":{\"key\":\"YQ==\",\"value\":\"eA==\",\"lease\":\"12\"}},"
          "{\"request_delete_range\":{\"key\":\"Yg==\"}},{\"request_txn\":{\"success\":[{\"request_range\":"
          "{\"key\":\"YQ==\"}}]}}],\"failure\":[{\"request_range\":{\"key\":\"YQ==\",\"sort_target\":\"CREATE\","
          "\"sort_order\":\"ASCEND\",\"limit\":\"1\"}}]}" },
        { "v3/kv/txn", true, "{\"header\":{\"revision\":\"4\"},\"succeeded\":true,\"responses\":[{\"response_put\":"
                             "{\"header\":{\"revision\":\"4\"}}},{\"response_range\":{\"header\":{}}}]}" },
        { "v3/lease/grant", false, "{\"TTL\":\"5\"}" },
        { "v3/lease/grant", true, "{\"header\":{\"revision\":\"2\"},\"ID\":\"7587899360832723719\",\"TTL\":\"5\"}" },
        { "v3/lease/revoke", false, "{\"ID\":\"-1\"}" },
        { "v3/lease/keepalive", false, "{\"ID\":\"7587899360832723719\"}" },
        { "v3/lease/keepalive", true, "{\"header\":{},\"ID\":\"1\",\"TTL\":\"3\"}" },
        { "v3/lease/timetolive", false, "{\"ID\":\"1\",\"keys\":true}" },
        { "v3/lease/timetolive", true, "{\"ID\":\"1\",\"TTL\":\"-1\",\"grantedTTL\":\"10\",\"keys\":[\"YQ==\"]}" },
        { "v3/watch", false, "{\"create_request\":{\"key\":\"YQ==\",\"range_end\":\"Yg==\",\"start_revision\":\"5\","
                             "\"progress_notify\":true,\"filters\":[\"NOPUT\"],\"prev_kv\":true}}" },
        { "v3/watch", true, "{\"header\":{\"revision\":\"9\"},\"watch_id\":\"1\",\"canceled\":true,"
                            "\"compact_revision\":\"3\",\"cancel_reason\":\"x\",\"events\":[{\"type\":\"DELETE\","
                            "\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"9\"},\"prev_kv\":{\"key\":\"YQ==\",\"value\":\"dg==\"}}]}" },
        { "v3/maintenance/status", false, "{}" },
        { "v3/maintenance/status", true, "{\"version\":\"3.4.23\",\"dbSize\":\"20480\",\"leader\":\"1\","
                                         "\"errors\":[\"x\"],\"raftAppliedIndex\":\"7\"}" },
        { "v3/auth/authenticate", false, "{\"name\":\"root\",\"password\":\"p\\u00e9\"}" },
        { "v3/auth/authenticate", true, "{\"token\":\"abc.123\"}" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct vigil_etcd_grpc_method *m = method(cases[i].path);
        if (round_trip(cases[i].reply ? m->reply : m->request, cases[i].json))
            return 1;
    }
    const struct vigil_etcd_grpc_method *w = vigil_etcd__grpc_method("v3/watch");
    EXPECT(w && w->stream, "the watch is a stream (etcd_grpc_stream.c)");
    EXPECT(vigil_etcd__grpc_method("v3/kv/rang") == NULL, "a path that is no call");
    return 0;
}

static int decode_hex(const struct ProtobufCMessageDescriptor *d, const unsigned char *p, size_t n, const char *want)
{
    char *json;
    size_t len;
    int rc = vigil_etcd__pb_decode(d, p, n, &json, &len);
    EXPECT(rc == 0, "decode: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(strcmp(json, want) == 0, "expected %s, got %s", want, json);
    free(json);
    return 0;
}

/* Bytes as etcd writes them, read as grpc-gateway writes its JSON:
 * 64-bit integers as strings, zero values left out but a oneof's, enums
 * by name, unknown fields skipped, packed repeated numbers. */
static int test_reply_as_gateway(void)
{
    const struct vigil_etcd_grpc_method *txn = method("v3/kv/txn"), *range = method("v3/kv/range");
    /* TxnResponse: header {revision 7, raft_term 0 (sent anyway)},
     * succeeded false (sent anyway), an unknown field 15 (varint). */
    static const unsigned char t1[] = { 0x0a, 0x04, 0x18, 0x07, 0x20, 0x00, 0x10, 0x00, 0x78, 0x05 };
    if (decode_hex(txn->reply, t1, sizeof(t1), "{\"header\":{\"revision\":\"7\"}}"))
        return 1;
    /* A Compare whose oneof is create_revision 0: kept (it says which). */
    static const unsigned char t2[] = { 0x0a, 0x06, 0x10, 0x01, 0x1a, 0x00, 0x28, 0x00 };
    if (decode_hex(txn->request, t2, sizeof(t2), "{\"compare\":[{\"target\":\"CREATE\",\"create_revision\":\"0\"}]}"))
        return 1;
    /* A uint64 past 2^63 and a negative int64. */
    static const unsigned char r1[] = { 0x0a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                        0x12, 0x0e, 0x0a, 0x01, 0x61, 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0x01 };
    if (decode_hex(range->reply, r1, sizeof(r1),
                   "{\"header\":{\"cluster_id\":\"18446744073709551615\"},\"kvs\":[{\"key\":\"YQ==\",\"lease\":\"-1\"}]}"))
        return 1;
    /* An enum value this etcd does not know: its number. */
    static const unsigned char c1[] = { 0x0a, 0x02, 0x08, 0x09 };
    if (decode_hex(txn->request, c1, sizeof(c1), "{\"compare\":[{\"result\":9}]}"))
        return 1;
    /* A field twice: the last wins, as protobuf reads it. */
    static const unsigned char h2[] = { 0x0a, 0x04, 0x18, 0x05, 0x18, 0x06 };
    if (decode_hex(txn->reply, h2, sizeof(h2), "{\"header\":{\"revision\":\"6\"}}"))
        return 1;
    /* Two members of one oneof: only the last is kept (protobuf's rule,
     * and the gateway's JSON), in a reply and in a request. */
    static const unsigned char o1[] = { 0x1a, 0x04, 0x0a, 0x00, 0x12, 0x00 };
    if (decode_hex(txn->reply, o1, sizeof(o1), "{\"responses\":[{\"response_put\":{}}]}"))
        return 1;
    static const unsigned char o2[] = { 0x0a, 0x04, 0x28, 0x00, 0x30, 0x03 };
    return decode_hex(txn->request, o2, sizeof(o2), "{\"compare\":[{\"mod_revision\":\"3\"}]}");
}

/* Hostile bytes: -EPROTO or -EMSGSIZE, never a crash or a read past the end. */
static int test_hostile_replies(void)
{
    const struct vigil_etcd_grpc_method *txn = method("v3/kv/txn");
    static const struct {
        const char   *what;
        unsigned char b[16];
        size_t        n;
    } bad[] = {
        { "a truncated key", { 0x80 }, 1 },
        { "a truncated varint", { 0x10, 0x80 }, 2 },
        { "a length past the end", { 0x0a, 0x05, 0x18 }, 3 },
        { "a header as a varint", { 0x08, 0x01 }, 2 },
        { "succeeded as a length", { 0x12, 0x00 }, 2 },
        { "a group", { 0x0b, 0x0c }, 2 },
        { "wire type 7", { 0x7f, 0x00 }, 2 },
        { "field 0", { 0x00, 0x00 }, 2 },
        { "a varint past 64 bits", { 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f }, 11 },
        { "a short fixed64 of an unknown field", { 0x79, 0x01, 0x02 }, 3 },
        { "a nested header cut", { 0x0a, 0x02, 0x18 }, 3 },
        { "a response's oneof cut", { 0x1a, 0x04, 0x0a, 0x05, 0x00, 0x00 }, 6 },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *json = NULL;
        size_t len;
        int rc = vigil_etcd__pb_decode(txn->reply, bad[i].b, bad[i].n, &json, &len);
        EXPECT(rc == -EPROTO, "%s: expected -EPROTO, got %d (%s)", bad[i].what, rc, json ? json : "");
    }
    /* A string with a NUL (an error message, say): refused. */
    const struct vigil_etcd_grpc_method *st = method("v3/maintenance/status");
    static const unsigned char nul[] = { 0x0a + 0x08, 0x02, 'a', 0x00 }; /* field 2 version */
    char *json;
    size_t len;
    EXPECT_RC(vigil_etcd__pb_decode(st->reply, nul, sizeof(nul), &json, &len), -EPROTO);
    /* Nesting past 32: a txn in a txn in a txn ... */
    enum { DEEP = 20 }; /* 40 levels of messages; each length below 128, one byte */
    unsigned char deep[DEEP * 4 + 8];
    size_t n = 0;
    for (int i = 0; i < DEEP; i++) {
        deep[n++] = 0x12; /* success: RequestOp */
        deep[n++] = (unsigned char)((DEEP - i - 1) * 4 + 2);
        deep[n++] = 0x22; /* request_txn */
        deep[n++] = (unsigned char)((DEEP - i - 1) * 4);
    }
    EXPECT_RC(vigil_etcd__pb_decode(txn->request, deep, n, &json, &len), -EPROTO);
    /* Past VIGIL_ETCD_BODY_MAX: refused before it is read. */
    EXPECT_RC(vigil_etcd__pb_decode(txn->reply, deep, (size_t)VIGIL_ETCD_BODY_MAX + 1, &json, &len), -EMSGSIZE);
    return 0;
}

static int test_frames(void)
{
    const unsigned char *msg;
    size_t n;
    static const unsigned char one[] = { 0, 0, 0, 0, 2, 0x10, 0x01 };
    EXPECT_RC(vigil_etcd__grpc_unframe(one, sizeof(one), &msg, &n), 0);
    EXPECT(msg == one + 5 && n == 2, "the message: at +%td, %zu bytes", msg - one, n);
    static const unsigned char empty[] = { 0, 0, 0, 0, 0 };
    EXPECT_RC(vigil_etcd__grpc_unframe(empty, sizeof(empty), &msg, &n), 0);
    EXPECT(n == 0, "an empty message: %zu bytes", n);
    static const unsigned char compressed[] = { 1, 0, 0, 0, 0 }, cut[] = { 0, 0, 0, 0, 3, 1 },
                               two[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, huge[] = { 0, 0x7f, 0xff, 0xff, 0xff };
    EXPECT_RC(vigil_etcd__grpc_unframe(one, 0, &msg, &n), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_unframe(one, 4, &msg, &n), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_unframe(compressed, sizeof(compressed), &msg, &n), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_unframe(cut, sizeof(cut), &msg, &n), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_unframe(two, sizeof(two), &msg, &n), -EPROTO);
    EXPECT_RC(vigil_etcd__grpc_unframe(huge, sizeof(huge), &msg, &n), -EMSGSIZE);
    return 0;
}

/* A request body that is not the call's message: -EINVAL, nothing sent. */
static int test_bad_requests(void)
{
    const struct vigil_etcd_grpc_method *txn = method("v3/kv/txn"), *grant = method("v3/lease/grant");
    static const char *const bad[] = {
        "{\"nope\":1}",
        "{\"compare\":{}}",
        "{\"compare\":[{\"key\":5}]}",
        "{\"compare\":[{\"key\":\"!!!\"}]}",
        "{\"compare\":[{\"target\":\"NOPE\"}]}",
        "{\"compare\":[{\"version\":\"12x\"}]}",
        "{\"compare\":[{\"version\":12.5}]}",
        "{\"compare\":[{\"version\":1e300}]}",
        "{\"success\":[{\"request_put\":{\"prev_kv\":\"true\"}}]}",
        "[1]",
        "not json",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char *pb = NULL;
        size_t n;
        int rc = vigil_etcd__pb_encode(txn->request, bad[i], 5, &pb, &n);
        free(pb);
        EXPECT(rc == -EINVAL, "%s: expected -EINVAL, got %d", bad[i], rc);
    }
    unsigned char *pb;
    size_t n;
    EXPECT_RC(vigil_etcd__pb_encode(grant->request, "{\"TTL\":\"-1\"}", 5, &pb, &n), 0);
    EXPECT(n == 5 + 11 && pb[5] == 0x08 && pb[15] == 0x01, "TTL -1: a ten-byte varint after the frame's room");
    free(pb);
    /* int32 out of range (a RangeRequest's sort_order is an enum, a
     * Compare's result too: the numbers past int32 are refused). */
    EXPECT_RC(vigil_etcd__pb_encode(txn->request, "{\"compare\":[{\"result\":4294967296}]}", 0, &pb, &n), -EINVAL);
    return 0;
}

static int test_status_mapping(void)
{
    static const struct {
        int  code;
        long http;
    } map[] = { { 0, 200 }, { 1, 408 }, { 3, 400 }, { 4, 504 }, { 5, 404 }, { 7, 403 }, { 9, 412 },
                { 11, 400 }, { 13, 500 }, { 14, 503 }, { 16, 401 }, { 17, 500 }, { -1, 500 } };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        EXPECT(vigil_etcd__grpc_http_status(map[i].code) == map[i].http, "code %d: expected %ld, got %ld",
               map[i].code, map[i].http, vigil_etcd__grpc_http_status(map[i].code));
    char s[] = "etcdserver:%20no%20leader%2";
    size_t n = vigil_etcd__grpc_unpercent(s, strlen(s));
    EXPECT(strcmp(s, "etcdserver: no leader%2") == 0 && n == strlen(s), "percent-decoded: '%s'", s);
    int mode = -1;
    EXPECT(vigil_etcd__transport_mode(NULL, &mode) == 0 && mode == VIGIL_ETCD_TRANSPORT_AUTO, "unset: auto");
    EXPECT(vigil_etcd__transport_mode("grpc", &mode) == 0 && mode == VIGIL_ETCD_TRANSPORT_GRPC, "grpc");
    EXPECT(vigil_etcd__transport_mode("gateway", &mode) == 0 && mode == VIGIL_ETCD_TRANSPORT_GATEWAY, "gateway");
    EXPECT_RC(vigil_etcd__transport_mode("http", &mode), -EINVAL);
    return 0;
}

/* A lease's life through handle e: 0, or 1 with why. */
static int lease_cycle(vigil_etcd *e)
{
    vigil_lease l;
    const char *key = et_key("grpc");
    EXPECT_RC(vigil_etcd_acquire(e, key, "g", 2000, &l), 0);
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    vigil_lease_info info;
    EXPECT_RC(vigil_etcd_get(e, key, &info), 0);
    EXPECT(strcmp(info.owner, "g") == 0, "owner: %s", info.owner);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ELOST); /* a keepalive of a revoked lease: TTL 0 */
    return 0;
}

static vigil_etcd *connect_as(const char *transport, const char *endpoints)
{
    if (transport)
        setenv("VIGIL_ETCD_TRANSPORT", transport, 1);
    else
        unsetenv("VIGIL_ETCD_TRANSPORT");
    vigil_etcd *e = et_connect(endpoints);
    unsetenv("VIGIL_ETCD_TRANSPORT");
    return e;
}

/* Against etcd: auto speaks gRPC (each reply came framed), gateway none. */
static int test_real_etcd(void)
{
    NEED_ETCD();
    static const char *const modes[] = { NULL, "auto", "grpc", "gateway" };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        vigil_etcd *e = connect_as(modes[i], url);
        int rc = lease_cycle(e);
        unsigned long n = vigil_etcd__grpc_answered(e);
        unsigned char speaks = e->speaks[0];
        vigil_etcd_close(e);
        if (rc)
            return rc;
        bool gateway = modes[i] && strcmp(modes[i], "gateway") == 0;
        EXPECT(gateway ? n == 0 : n >= 6, "%s: %lu replies in gRPC", modes[i] ? modes[i] : "unset", n);
        EXPECT(speaks == (gateway ? VIGIL_ETCD_SPEAKS_UNKNOWN : VIGIL_ETCD_SPEAKS_GRPC), "%s: endpoint speaks %d",
               modes[i] ? modes[i] : "unset", speaks);
    }
    setenv("VIGIL_ETCD_TRANSPORT", "http3", 1);
    vigil_etcd *e = NULL;
    EXPECT_RC(vigil_etcd_connect(url, &e), -EINVAL);
    unsetenv("VIGIL_ETCD_TRANSPORT");
    EXPECT(strstr(vigil_etcd_errmsg(), "VIGIL_ETCD_TRANSPORT") != NULL, "errmsg: %s", vigil_etcd_errmsg());
    return 0;
}

/* etcd's errors through gRPC read as the gateway's: the same HTTP status
 * and the same code and message, in both transports. */
static int test_errors_alike(void)
{
    NEED_ETCD();
    char seen[2][400];
    for (int g = 0; g < 2; g++) {
        vigil_etcd *e = connect_as(g ? "gateway" : "grpc", url);
        long http = 0;
        const char *reply;
        size_t len;
        int rc = vigil_etcd__request(e, "v3/kv/put", "{\"value\":\"eA==\"}", &http, &reply, &len);
        if (rc == 0) {
            cJSON *j = cJSON_ParseWithLength(reply, len);
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "code"),
                        *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
            snprintf(seen[g], sizeof(seen[g]), "%ld %d %s", http, cJSON_IsNumber(code) ? code->valueint : -1,
                     cJSON_IsString(msg) ? msg->valuestring : "?");
            cJSON_Delete(j);
        }
        vigil_etcd_close(e);
        EXPECT_RC(rc, 0);
    }
    EXPECT(strcmp(seen[0], seen[1]) == 0 && strstr(seen[0], "400 3 etcdserver: key is not provided"),
           "gRPC said '%s', the gateway '%s'", seen[0], seen[1]);
    return 0;
}

/* An HTTP/1.1-only server (the fakes): auto finds it out from the preface,
 * before any request, and takes the gateway; nothing failed, nothing may
 * have applied. Forced gRPC there: -EPROTONOSUPPORT, nothing sent. */
static int test_http1_server(void)
{
    static const struct et_reply script[] = {
        { ET_REPLY, 200, "{\"header\":{\"revision\":\"3\"},\"ID\":\"77\",\"TTL\":\"5\"}" },
        { ET_REPLY, 200, "{\"header\":{\"revision\":\"3\"},\"ID\":\"78\",\"TTL\":\"5\"}" },
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    vigil_etcd *e = connect_as(NULL, f.url);
    long http = 0;
    const char *reply;
    size_t len;
    int rc = vigil_etcd__request(e, "v3/lease/grant", "{\"TTL\":\"5\"}", &http, &reply, &len);
    bool maybe = e->maybe_applied;
    unsigned char speaks = e->speaks[0];
    vigil_etcd_close(e);
    e = connect_as("grpc", f.url);
    int forced = vigil_etcd__request(e, "v3/lease/grant", "{\"TTL\":\"5\"}", &http, &reply, &len);
    bool forced_maybe = e->maybe_applied;
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT_RC(rc, 0);
    EXPECT(!maybe && speaks == VIGIL_ETCD_SPEAKS_GATEWAY, "auto: maybe_applied %d, speaks %d", maybe, speaks);
    EXPECT_RC(forced, -EPROTONOSUPPORT);
    EXPECT(!forced_maybe, "a request refused at the preface may not have applied");
    const char *log = et_fake_log(&f);
    EXPECT(strcmp(log, "POST /v3/lease/grant {\"TTL\":\"5\"}\n") == 0, "the fake saw:\n%s", log);
    return 0;
}

/* A first contact with a server that accepts and says nothing (a frozen
 * etcd, its connections queued by the kernel): the probe's silence is the
 * attempt's failure (-ETIMEDOUT), nothing was sent, so nothing may have
 * applied, and the endpoint keeps gRPC. */
static int test_silent_first_contact(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    EXPECT(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(s, 4) == 0 &&
               getsockname(s, (struct sockaddr *)&a, &al) == 0,
           "a listening socket: %s", strerror(errno));
    char spec[64];
    snprintf(spec, sizeof(spec), "http://127.0.0.1:%d", ntohs(a.sin_port));
    vigil_etcd *e = connect_as(NULL, spec);
    vigil_etcd_set_timeout(e, 200, 300);
    long http = 0;
    const char *reply;
    size_t len;
    int rc = vigil_etcd__request(e, "v3/lease/grant", "{\"TTL\":\"5\"}", &http, &reply, &len);
    bool maybe = e->maybe_applied;
    unsigned char speaks = e->speaks[0];
    vigil_etcd_close(e);
    close(s);
    EXPECT_RC(rc, -ETIMEDOUT);
    EXPECT(!maybe && speaks == VIGIL_ETCD_SPEAKS_UNKNOWN, "maybe_applied %d, speaks %d", maybe, speaks);
    return 0;
}

/* ---- a gRPC endpoint that fails after the request left (tests/grpc_fake.py) ---- */

struct gfake {
    pid_t pid;
    int   stdin_fd; /* held: the fake exits when it closes */
    char  url[64], log[512];
};

/* The fake in mode (certs: the TLS certificates' directory, or NULL for
 * h2c): 0, VT_SKIP (no python3-h2, or not under ctest), or 1. */
static int gfake_start_in(struct gfake *f, const char *mode, const char *certs)
{
    const char *script = getenv("VIGIL_ETCD_SCRIPT"); /* tests/etcd_server.sh, beside grpc_fake.py */
    if (!script || !strrchr(script, '/')) {
        fprintf(stderr, "skip: VIGIL_ETCD_SCRIPT not set: run under ctest\n");
        return VT_SKIP;
    }
    char path[600];
    snprintf(path, sizeof(path), "%.*s/grpc_fake.py", (int)(strrchr(script, '/') - script), script);
    snprintf(f->log, sizeof(f->log), "%s", vt_path(mode));
    int in[2], out[2];
    EXPECT(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    f->pid = fork();
    EXPECT(f->pid >= 0, "fork: %s", strerror(errno));
    if (f->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        /* Debian's python3 (where python3-h2 is), before another on PATH. */
        execl("/usr/bin/python3", "python3", path, mode, f->log, certs, (char *)NULL);
        execlp("python3", "python3", path, mode, f->log, certs, (char *)NULL);
        _exit(VT_SKIP); /* no python3 */
    }
    close(in[0]);
    close(out[1]);
    f->stdin_fd = in[1];
    char port[16] = "";
    size_t have = 0;
    struct pollfd pf = { out[0], POLLIN, 0 };
    uint64_t deadline = vt_now_ms() + 20000;
    while (!memchr(port, '\n', have) && have + 1 < sizeof(port) && vt_now_ms() < deadline &&
           poll(&pf, 1, 1000) >= 0) {
        ssize_t n = pf.revents ? read(out[0], port + have, sizeof(port) - 1 - have) : 0;
        if (pf.revents && n <= 0)
            break;
        have += n > 0 ? (size_t)n : 0;
        port[have] = '\0';
    }
    close(out[0]);
    if (atoi(port) <= 0) {
        close(f->stdin_fd);
        int st = vt_wait(f->pid, 10000);
        if (st == VT_SKIP) {
            fprintf(stderr, "skip: no python3 with h2 (apt-get install python3-h2) for %s\n", path);
            return VT_SKIP;
        }
        EXPECT(0, "grpc_fake.py %s gave no port (exit %d)", mode, st);
    }
    snprintf(f->url, sizeof(f->url), "%s://127.0.0.1:%d", certs ? "https" : "http", atoi(port));
    return 0;
}

static int gfake_start(struct gfake *f, const char *mode)
{
    return gfake_start_in(f, mode, NULL);
}

static void gfake_stop(struct gfake *f)
{
    close(f->stdin_fd);
    kill(f->pid, SIGKILL);
    vt_wait(f->pid, 10000);
}

/* What the fake read since the last call (a static buffer), its log emptied. */
static const char *gfake_log(struct gfake *f)
{
    static char buf[2048];
    buf[0] = '\0';
    FILE *l = fopen(f->log, "r");
    if (l) {
        buf[fread(buf, 1, sizeof(buf) - 1, l)] = '\0';
        fclose(l);
    }
    fclose(fopen(f->log, "w"));
    return buf;
}

/* A failure after the whole request reached the endpoint (a proxy's 504
 * text/plain, a GOAWAY, a reset stream, a member that never answers): an
 * ordinary failed attempt that may have applied, in auto as when forced;
 * the request was sent once, in gRPC, and the endpoint keeps gRPC (only a
 * refusal before the send, the preface's or ALPN's, moves it). */
static int test_failures_after_send(void)
{
    static const char *const modes[] = { "h504", "goaway", "rst", "silent" };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        struct gfake f;
        int rc = gfake_start(&f, modes[i]);
        if (rc)
            return rc;
        for (int forced = 0; forced < 2; forced++) {
            vigil_etcd *e = connect_as(forced ? "grpc" : NULL, f.url);
            vigil_etcd_set_timeout(e, 500, 1000);
            long http = 0;
            const char *reply;
            size_t len;
            rc = vigil_etcd__request(e, "v3/lease/revoke", "{\"ID\":\"5\"}", &http, &reply, &len);
            bool maybe = e->maybe_applied;
            unsigned char speaks = e->speaks[0];
            char why[256];
            snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
            vigil_etcd_close(e);
            const char *log = gfake_log(&f);
            if (rc >= 0 || !maybe || speaks == VIGIL_ETCD_SPEAKS_GATEWAY ||
                strcmp(log, "grpc /etcdserverpb.Lease/LeaseRevoke\n") != 0) {
                gfake_stop(&f);
                EXPECT(0, "%s%s: rc %d (%s) maybe_applied %d speaks %d why '%s'; the fake read:\n%s", modes[i],
                       forced ? " (grpc)" : "", rc, vigil_strerror(rc), maybe, speaks, why, log);
            }
        }
        gfake_stop(&f);
    }
    return 0;
}

/* A first contact's probe and its request share the attempt's limit
 * (etcd.h: each endpoint tried costs at most total_ms): SETTINGS only
 * after 2.7 s of a 3 s limit, then silence. Spending the limit twice
 * takes 5.7 s at the least; the bound, 5 s, leaves a loaded machine 2 s
 * past the limit before it would call a right answer wrong. */
static int test_first_contact_bound(void)
{
    struct gfake f;
    int rc = gfake_start(&f, "slowsettings");
    if (rc)
        return rc;
    vigil_etcd *e = connect_as(NULL, f.url);
    vigil_etcd_set_timeout(e, 500, 3000);
    long http = 0;
    const char *reply;
    size_t len;
    uint64_t t0 = vt_now_ms();
    rc = vigil_etcd__request(e, "v3/lease/revoke", "{\"ID\":\"5\"}", &http, &reply, &len);
    uint64_t took = vt_now_ms() - t0;
    unsigned char speaks = e->speaks[0];
    vigil_etcd_close(e);
    gfake_stop(&f);
    EXPECT_RC(rc, -ETIMEDOUT);
    EXPECT(took < 5000, "one endpoint's attempt took %llu ms of a 3000 ms limit", (unsigned long long)took);
    EXPECT(speaks != VIGIL_ETCD_SPEAKS_GATEWAY, "a slow endpoint left gRPC");
    return 0;
}

/* grpc-message is the server's to write: terminal escapes in it never
 * reach vigil_etcd_errmsg. */
static int test_hostile_message(void)
{
    struct gfake f;
    int rc = gfake_start(&f, "errmsg");
    if (rc)
        return rc;
    vigil_etcd *e = connect_as(NULL, f.url);
    long http = 0;
    const char *reply;
    size_t len;
    rc = vigil_etcd__request(e, "v3/lease/revoke", "{\"ID\":\"5\"}", &http, &reply, &len);
    char why[256];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    vigil_etcd_close(e);
    gfake_stop(&f);
    EXPECT(rc == 0 && http >= 400, "FailedPrecondition as the gateway's error: rc %d, HTTP %ld", rc, http);
    bool clean = strstr(why, "etcdserver") != NULL;
    for (const char *p = why; *p; p++)
        clean = clean && (unsigned char)*p >= 0x20 && *p != 0x7f;
    EXPECT(clean, "errmsg with control characters, or none: '%s'", why);
    return 0;
}

/* A TLS endpoint whose handshake settles on http/1.1 (a TLS proxy without
 * h2): auto sees it in ALPN before a byte of the request and takes the
 * gateway, nothing counted against it; forced gRPC, -EPROTONOSUPPORT with
 * nothing sent. */
static int test_tls_without_h2(void)
{
    const char *tls_url, *certs;
    int rc = et_tls(&tls_url, &certs);
    if (rc)
        return rc;
    struct gfake f;
    if ((rc = gfake_start_in(&f, "tls_http1", certs)))
        return rc;
    char ca[1200];
    snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
    for (int forced = 0; forced < 2; forced++) {
        setenv("VIGIL_ETCD_TRANSPORT", forced ? "grpc" : "auto", 1);
        struct vigil_etcd_options o = { .cacert = ca };
        vigil_etcd *e = NULL;
        rc = vigil_etcd_connect_opts(f.url, &o, &e);
        unsetenv("VIGIL_ETCD_TRANSPORT");
        if (rc < 0) {
            gfake_stop(&f);
            EXPECT_RC(rc, 0);
        }
        long http = 0;
        const char *reply;
        size_t len;
        rc = vigil_etcd__request(e, "v3/lease/grant", "{\"TTL\":\"5\"}", &http, &reply, &len);
        bool maybe = e->maybe_applied;
        if (forced && rc == -EPROTONOSUPPORT) { /* and again: no connection kept sends it */
            rc = vigil_etcd__request(e, "v3/lease/grant", "{\"TTL\":\"5\"}", &http, &reply, &len);
            maybe = maybe || e->maybe_applied;
        }
        unsigned char speaks = e->speaks[0];
        vigil_etcd_close(e);
        const char *log = gfake_log(&f);
        bool ok = forced ? rc == -EPROTONOSUPPORT && !maybe && log[0] == '\0'
                         : rc == 0 && !maybe && speaks == VIGIL_ETCD_SPEAKS_GATEWAY &&
                               strcmp(log, "http1 POST /v3/lease/grant HTTP/1.1\n") == 0;
        if (!ok) {
            gfake_stop(&f);
            EXPECT(0, "%s: rc %d (%s) maybe_applied %d speaks %d; the fake read:\n%s", forced ? "grpc" : "auto", rc,
                   vigil_strerror(rc), maybe, speaks, log);
        }
    }
    gfake_stop(&f);
    return 0;
}

/* A request refused before it was sent (larger than VIGIL_ETCD_BODY_MAX):
 * unsent, so never maybe applied, and said why. */
static int test_refused_unsent(void)
{
    size_t n = (VIGIL_ETCD_BODY_MAX + 4096) / 3 * 4; /* base64 of more than the limit */
    char *body = malloc(n + 64);
    EXPECT(body, "malloc");
    size_t k = (size_t)snprintf(body, 64, "{\"key\":\"YQ==\",\"value\":\"");
    for (size_t i = 0; i < n; i += 4)
        memcpy(body + k + i, "QUFB", 4);
    snprintf(body + k + n, 64, "\"}");
    vigil_etcd *e = connect_as("grpc", "http://127.0.0.1:9");
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__call(e, "v3/kv/put", body, &r);
    bool maybe = e->maybe_applied;
    char why[256];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    vigil_etcd_close(e);
    free(body);
    EXPECT_RC(rc, -EMSGSIZE);
    EXPECT(!maybe && strstr(why, "not sent"), "maybe_applied %d, why '%s'", maybe, why);
    return 0;
}

VT_MAIN(VT_CASE(test_each_message), VT_CASE(test_reply_as_gateway), VT_CASE(test_hostile_replies),
        VT_CASE(test_frames), VT_CASE(test_bad_requests), VT_CASE(test_status_mapping), VT_CASE(test_real_etcd),
        VT_CASE(test_errors_alike), VT_CASE(test_http1_server), VT_CASE(test_silent_first_contact),
        VT_CASE(test_failures_after_send), VT_CASE(test_first_contact_bound), VT_CASE(test_hostile_message),
        VT_CASE(test_refused_unsent), VT_CASE(test_tls_without_h2))
