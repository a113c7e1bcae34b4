/* SPDX-License-Identifier: MIT */
/*
 * Description: a watch stream in gRPC (src/etcd/transport/etcd_grpc_stream.c):
 * the converter from framed WatchResponse messages to the gateway's lines
 * ({"result":...} each) that the watch parsers read, fed as libcurl feeds
 * it (frames cut across callbacks, two in one), its refusals (a frame
 * past the limit, a compressed one, one that is no WatchResponse, a reply
 * that is not application/grpc), the status in the trailers as the
 * gateway's error line; and against a real etcd that a watch goes in
 * gRPC in auto, on the gateway when told, and hears a put either way.
 */
#include "etcd_testutil.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "recipes_internal.h"

static const char *url;

/* What the converter gave the caller, and whether the caller refuses. */
struct sink {
    char   out[8192];
    size_t len;
    bool   refuse;
};

static size_t sink_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sink *k = arg;
    size_t n = size * nmemb;
    if (k->refuse || n > sizeof(k->out) - 1 - k->len)
        return 0;
    memcpy(k->out + k->len, data, n);
    k->len += n;
    k->out[k->len] = '\0';
    return n;
}

static struct vigil_etcd_stream *watch_conv(struct sink *k)
{
    struct vigil_etcd_stream *s = vigil_etcd__stream_new(vigil_etcd__grpc_method("v3/watch"), sink_write, k);
    char ct[] = "content-type: application/grpc\r\n";
    if (!s || vigil_etcd__stream_header(ct, 1, strlen(ct), s) != strlen(ct)) {
        fprintf(stderr, "no converter\n");
        exit(1);
    }
    return s;
}

/* The WatchResponse of json, framed, appended to buf at *len. */
static void frame(const char *json, unsigned char *buf, size_t cap, size_t *len)
{
    unsigned char *f;
    size_t n;
    if (vigil_etcd__pb_encode(vigil_etcd__grpc_method("v3/watch")->reply, json, 5, &f, &n) < 0 || *len + n > cap) {
        fprintf(stderr, "cannot frame %s\n", json);
        exit(1);
    }
    vigil_etcd__grpc_frame_header(f, n - 5);
    memcpy(buf + *len, f, n);
    *len += n;
    free(f);
}

static size_t feed(struct vigil_etcd_stream *s, const void *p, size_t n)
{
    return vigil_etcd__stream_feed((char *)p, 1, n, s);
}

/* Line i of out is {"result": json}, as values. */
static bool line_is(const char *out, int i, const char *json)
{
    const char *at = out;
    for (; i > 0 && at; i--)
        at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL;
    const char *nl = at ? strchr(at, '\n') : NULL;
    if (!nl)
        return false;
    char want[2048];
    snprintf(want, sizeof(want), "{\"result\":%s}", json);
    cJSON *a = cJSON_ParseWithLength(at, (size_t)(nl - at)), *b = cJSON_Parse(want);
    bool same = a && b && cJSON_Compare(a, b, true);
    cJSON_Delete(a);
    cJSON_Delete(b);
    return same;
}

static const char *const created = "{\"header\":{\"cluster_id\":\"1\",\"revision\":\"7\"},\"created\":true}";
static const char *const event = "{\"header\":{\"revision\":\"8\"},\"events\":[{\"type\":\"DELETE\",\"kv\":"
                                 "{\"key\":\"YQ==\",\"mod_revision\":\"8\"}}]}";

static int test_two_frames_in_one(void)
{
    struct sink k = { 0 };
    struct vigil_etcd_stream *s = watch_conv(&k);
    unsigned char buf[1024];
    size_t n = 0;
    frame(created, buf, sizeof(buf), &n);
    frame(event, buf, sizeof(buf), &n);
    size_t took = feed(s, buf, n);
    int err = vigil_etcd__stream_error(s);
    vigil_etcd__stream_free(s);
    EXPECT(took == n && err == 0, "two frames: took %zu of %zu, error %d", took, n, err);
    EXPECT(line_is(k.out, 0, created) && line_is(k.out, 1, event) && !strchr(strchr(strchr(k.out, '\n') + 1, '\n') + 1, '\n'),
           "two frames in one callback gave '%s'", k.out);
    return 0;
}

static int test_partial_frames(void)
{
    unsigned char buf[1024];
    size_t n = 0;
    frame(created, buf, sizeof(buf), &n);
    frame(event, buf, sizeof(buf), &n);
    /* Byte by byte, then in cuts across both frames' headers and bodies. */
    for (size_t step = 1; step < n; step += 3) {
        struct sink k = { 0 };
        struct vigil_etcd_stream *s = watch_conv(&k);
        bool ok = true;
        for (size_t at = 0; at < n && ok; at += step) {
            size_t m = n - at < step ? n - at : step;
            ok = feed(s, buf + at, m) == m;
        }
        int err = vigil_etcd__stream_error(s);
        vigil_etcd__stream_free(s);
        EXPECT(ok && err == 0, "in pieces of %zu: refused, error %d", step, err);
        EXPECT(line_is(k.out, 0, created) && line_is(k.out, 1, event), "in pieces of %zu: '%s'", step, k.out);
    }
    return 0;
}

/* Each refusal ends the transfer (the callback takes nothing) and says why. */
static int refused(const void *p, size_t n, int want, const char *what)
{
    struct sink k = { 0 };
    struct vigil_etcd_stream *s = watch_conv(&k);
    size_t took = feed(s, p, n);
    size_t again = feed(s, p, n); /* nothing more after a refusal */
    int err = vigil_etcd__stream_error(s);
    vigil_etcd__stream_free(s);
    EXPECT(took == 0 && again == 0 && err == want && k.len == 0, "%s: took %zu, then %zu, error %d (want %d), gave '%s'",
           what, took, again, err, want, k.out);
    return 0;
}

static int test_refusals(void)
{
    unsigned char past[5] = { 0 };
    uint32_t big = VIGIL_ETCD_BODY_MAX + 1;
    vigil_etcd__grpc_frame_header(past, big);
    if (refused(past, sizeof(past), -EMSGSIZE, "a frame past the limit"))
        return 1;
    unsigned char buf[1024];
    size_t n = 0;
    frame(created, buf, sizeof(buf), &n);
    buf[0] = 1;
    if (refused(buf, n, -EPROTO, "a compressed frame"))
        return 1;
    static const unsigned char not_watch[] = { 0, 0, 0, 0, 2, 0x0a, 0x05 }; /* a header cut short */
    if (refused(not_watch, sizeof(not_watch), -EPROTO, "a frame that is no WatchResponse"))
        return 1;
    /* A reply without application/grpc: an error page, an HTTP/1.1 server. */
    struct sink k = { 0 };
    struct vigil_etcd_stream *s = vigil_etcd__stream_new(vigil_etcd__grpc_method("v3/watch"), sink_write, &k);
    EXPECT(s, "no converter");
    char ct[] = "content-type: text/html\r\n";
    vigil_etcd__stream_header(ct, 1, strlen(ct), s);
    size_t took = feed(s, "<html>", 6);
    int err = vigil_etcd__stream_error(s);
    vigil_etcd__stream_free(s);
    EXPECT(took == 0 && err == -EPROTO, "a reply in text/html: took %zu, error %d", took, err);
    /* The caller's own refusal ends it too, with no error of the converter's. */
    struct sink no = { .refuse = true };
    s = watch_conv(&no);
    n = 0;
    frame(created, buf, sizeof(buf), &n);
    took = feed(s, buf, n);
    err = vigil_etcd__stream_error(s);
    vigil_etcd__stream_free(s);
    EXPECT(took == 0 && err == 0, "the caller refused: took %zu, error %d", took, err);
    return 0;
}

/* The trailers: status 0 ends the stream with nothing said; another is
 * the gateway's error line, once, which the watch parser reads as the
 * gateway's (an auth refusal -EACCES). */
static int test_trailers(void)
{
    struct sink k = { 0 };
    struct vigil_etcd_stream *s = watch_conv(&k);
    char ok[] = "grpc-status: 0\r\n";
    EXPECT(vigil_etcd__stream_header(ok, 1, strlen(ok), s) == strlen(ok) && vigil_etcd__stream_end(s) == 0 && k.len == 0,
           "status 0 gave '%s'", k.out);
    vigil_etcd__stream_free(s);
    s = watch_conv(&k);
    /* etcd's order: grpc-status, then grpc-message; the line waits for the end. */
    char st[] = "grpc-status: 16\r\n", msg[] = "grpc-message: etcdserver: invalid auth token\r\n";
    size_t b = vigil_etcd__stream_header(st, 1, strlen(st), s), a = vigil_etcd__stream_header(msg, 1, strlen(msg), s);
    size_t before = k.len;
    int e1 = vigil_etcd__stream_end(s), e2 = vigil_etcd__stream_end(s);
    vigil_etcd__stream_free(s);
    EXPECT(a == strlen(msg) && b == strlen(st) && before == 0 && e1 == 0 && e2 == 0,
           "the trailers: %zu %zu, %zu written before the end, ends %d %d", a, b, before, e1, e2);
    char *nl = strchr(k.out, '\n');
    EXPECT(nl && !nl[1], "one error line: '%s'", k.out);
    int code = vigil_etcd__parse_watch_keys(k.out, (size_t)(nl - k.out), NULL, NULL);
    EXPECT(code == -EACCES, "the watch parser on '%s': %d (want -EACCES)", k.out, code);
    char m[128];
    EXPECT(vigil_etcd__error_of(k.out, (size_t)(nl - k.out), m, sizeof(m)) == 16 && strstr(m, "invalid auth token"),
           "the error line '%s' lost the message", k.out);
    /* A stream that ends inside a message, with a status or with none: refused. */
    for (int with_status = 0; with_status < 2; with_status++) {
        s = watch_conv(&k);
        unsigned char buf[1024];
        size_t n = 0;
        frame(created, buf, sizeof(buf), &n);
        size_t part = feed(s, buf, n - 1);
        if (with_status)
            vigil_etcd__stream_header(ok, 1, strlen(ok), s);
        int end = vigil_etcd__stream_end(s), err = vigil_etcd__stream_error(s);
        vigil_etcd__stream_free(s);
        EXPECT(part == n - 1 && end == -EPROTO && err == -EPROTO, "ended inside a message (status %d): %zu, %d, %d",
               with_status, part, end, err);
    }
    /* The gateway's stream passes as it came. */
    struct sink g = { 0 };
    s = vigil_etcd__stream_new(NULL, sink_write, &g);
    EXPECT(s, "no stream");
    size_t took = feed(s, "{\"result\":{}}\n{", 15);
    vigil_etcd__stream_free(s);
    EXPECT(took == 15 && strcmp(g.out, "{\"result\":{}}\n{") == 0, "the gateway's: %zu '%s'", took, g.out);
    return 0;
}

/* Against etcd: a watch hears a put, in gRPC in auto and on the gateway
 * when told (VIGIL_ETCD_TRANSPORT=gateway). */
static int test_real_watch(void)
{
    int f = et_fixture(&url);
    if (f)
        return f;
    const char *t = getenv("VIGIL_ETCD_TRANSPORT");
    bool gateway = t && strcmp(t, "gateway") == 0;
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("grpc-stream");
    char full[VIGIL_ETCD_KEY_MAX + 1], pfx[VIGIL_ETCD_KEY_B64], end[VIGIL_ETCD_KEY_B64];
    EXPECT_RC(vigil_etcd__full_key(e, key, full, sizeof(full)), 0);
    EXPECT_RC(vigil_etcd__prefix_b64(full, pfx, end), 0);
    vigil_lease_info none;
    EXPECT_RC(vigil_etcd_get(e, key, &none), VIGIL_EVACANT); /* a first request: the endpoint known to speak gRPC */
    /* Everything under KEY/, puts too: the acquire's put is the news. */
    struct vigil_etcd_watch_spec spec = { .key_b64 = pfx, .end_b64 = end, .puts = true, .ep = -1 };
    struct vigil_etcd_watch *w = NULL;
    EXPECT_RC(vigil_etcd__watch_start(e, &spec, &w), 0);
    bool grpc = vigil_etcd__watch_grpc(w);
    int heard = VIGIL_ETCD_WATCH_NOTHING;
    for (int i = 0; i < 100 && !vigil_etcd__watch_heard(w) && heard == VIGIL_ETCD_WATCH_NOTHING; i++)
        heard = vigil_etcd__watch_wait(w, 100);
    vigil_lease l;
    int acq = vigil_etcd_acquire(e, key, "x", 5000, &l);
    int rel = acq == 0 ? vigil_etcd_release(e, &l) : acq;
    int news = VIGIL_ETCD_WATCH_NOTHING;
    for (int i = 0; i < 100 && news == VIGIL_ETCD_WATCH_NOTHING; i++)
        news = vigil_etcd__watch_wait(w, 100);
    vigil_etcd__watch_close(w);
    vigil_etcd_close(e);
    EXPECT(grpc == !gateway, "the watch went in %s (VIGIL_ETCD_TRANSPORT=%s)", grpc ? "gRPC" : "the gateway",
           t ? t : "");
    EXPECT(heard == VIGIL_ETCD_WATCH_NOTHING, "the watch before any news: %d", heard);
    EXPECT_RC(acq, 0);
    EXPECT_RC(rel, 0);
    EXPECT(news == VIGIL_ETCD_WATCH_PUT || news == VIGIL_ETCD_WATCH_DELETED, "the watch heard %d", news);
    return 0;
}

VT_MAIN(VT_CASE(test_two_frames_in_one), VT_CASE(test_partial_frames), VT_CASE(test_refusals),
        VT_CASE(test_trailers), VT_CASE(test_real_watch))
