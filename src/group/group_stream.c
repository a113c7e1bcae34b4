/* SPDX-License-Identifier: MIT */
/*
 * A watch stream over a key or a prefix, for the group calls that wait
 * (take_wait, barrier_wait) and the membership watcher: one
 * create_request, answered by messages for as long as the connection
 * lasts, in gRPC or through the gateway (etcd_grpc_stream.c), read as the
 * gateway's, one a line (etcd_watch.c shows them).
 * The stream asks for each deletion's previous kv, so a member that leaves
 * is named. Messages are parsed as they come (on_data), their events
 * queued, and handed out by gstream_next, which sleeps in poll(2) on the
 * stream's socket (and on one more fd of the caller's) until etcd speaks.
 *
 * A stream knows the revision of the last event it handed out; a caller
 * whose stream ended opens a new one from the revision after it, and
 * misses nothing unless etcd compacted that far (then it reads afresh).
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gstream {
    CURLM             *multi;
    CURL              *curl;
    struct vigil_etcd_stream *stream; /* its connection: gRPC or the gateway (etcd_grpc_stream.c) */
    unsigned           ep;       /* the endpoint it runs on */
    char              *line;     /* the message being received, up to its newline */
    size_t             len, cap;
    int                err;      /* why on_data refused, or a message that was not etcd's */
    bool               ended;    /* cancelled, compacted, or the transfer is over */
    bool               compacted; /* etcd no longer has the revision asked from */
    int                end_rc;
    struct gevent     *q;        /* events parsed and not yet handed out */
    size_t             qhead, qlen, qcap;
};

static int queue(struct gstream *s, const struct gevent *ev)
{
    if (s->qhead + s->qlen == s->qcap) {
        if (s->qhead > 0) {
            memmove(s->q, s->q + s->qhead, s->qlen * sizeof(*s->q));
            s->qhead = 0;
        } else {
            size_t cap = s->qcap ? s->qcap * 2 : 16;
            struct gevent *q = realloc(s->q, cap * sizeof(*q));
            if (!q)
                return -ENOMEM;
            s->q = q;
            s->qcap = cap;
        }
    }
    s->q[s->qhead + s->qlen++] = *ev;
    return 0;
}

/* One message: its events queued; cancelled or compacted ends the stream. */
static int message(struct gstream *s, const char *msg, size_t len)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(200, msg, len, false, &r);
    if (rc < 0)
        return rc;
    const cJSON *res = vigil_etcd__field(r, "result"), *evs, *e;
    int64_t compact = 0;
    if (!cJSON_IsObject(res) || vigil_etcd__json_i64(res, "compact_revision", &compact) < 0) {
        cJSON_Delete(r);
        return -EPROTO;
    }
    evs = vigil_etcd__field(res, "events");
    cJSON_ArrayForEach(e, (cJSON_IsArray(evs) ? evs : NULL)) {
        const cJSON *type = vigil_etcd__field(e, "type"), *prev = vigil_etcd__field(e, "prev_kv");
        struct gevent ev = { .del = cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0 };
        if ((rc = gkv_read(vigil_etcd__field(e, "kv"), &ev.kv)) < 0)
            break;
        if (ev.del && cJSON_IsObject(prev)) {
            /* The name of the one that went, from its last value; the
             * revision stays the deletion's. */
            struct gkv p;
            if (gkv_read(prev, &p) == 0) {
                int64_t mod = ev.kv.mod;
                gkv_free(&ev.kv);
                ev.kv = p;
                ev.kv.mod = mod;
            }
        }
        if ((rc = queue(s, &ev)) < 0) {
            gkv_free(&ev.kv);
            break;
        }
    }
    if (rc == 0 && (cJSON_IsTrue(vigil_etcd__field(res, "canceled")) || compact > 0)) {
        s->ended = true;
        s->compacted = compact > 0;
        s->end_rc = GSTREAM_ENDED;
    }
    cJSON_Delete(r);
    return rc;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct gstream *s = arg;
    size_t n = size * nmemb, at = 0;
    while (at < n && !s->err) {
        char *nl = memchr(data + at, '\n', n - at);
        size_t take = nl ? (size_t)(nl - (data + at)) : n - at;
        if (s->len + take + 1 > s->cap) {
            size_t cap = s->cap ? s->cap : 4096;
            while (cap < s->len + take + 1)
                cap *= 2;
            char *p = cap <= VIGIL_ETCD_BODY_MAX ? realloc(s->line, cap) : NULL;
            if (!p) {
                s->err = cap <= VIGIL_ETCD_BODY_MAX ? -ENOMEM : -EMSGSIZE;
                return 0; /* aborts the transfer */
            }
            s->line = p;
            s->cap = cap;
        }
        memcpy(s->line + s->len, data + at, take);
        s->len += take;
        s->line[s->len] = '\0';
        at += take;
        if (nl) {
            at++;
            size_t a = 0;
            while (a < s->len && vigil_etcd__is_space(s->line[a]))
                a++;
            if (a < s->len) {
                int rc = message(s, s->line + a, s->len - a);
                if (rc < 0) {
                    s->err = rc;
                    return 0;
                }
            }
            s->len = 0;
        }
    }
    return n;
}

void gstream_close(struct gstream *s)
{
    if (!s)
        return;
    if (s->multi && s->curl)
        curl_multi_remove_handle(s->multi, s->curl);
    if (s->curl)
        curl_easy_cleanup(s->curl); /* closes the connection: etcd drops the watch */
    if (s->multi)
        curl_multi_cleanup(s->multi);
    vigil_etcd__stream_free(s->stream);
    for (size_t i = 0; i < s->qlen; i++)
        gkv_free(&s->q[s->qhead + i].kv);
    free(s->q);
    free(s->line);
    free(s);
}

static char *watch_body(const char *key, unsigned flags, int64_t rev)
{
    /* The create request is a txn's range in shape: reuse the builder. */
    struct gtxn t;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, key, flags & G_PREFIX, 0);
    char *body = NULL;
    cJSON *req = t.err ? NULL : cJSON_DetachItemFromObject(t.ok->child, "request_range");
    if (req) {
        char r[24];
        snprintf(r, sizeof(r), "%" PRId64, rev);
        cJSON *w = cJSON_CreateObject();
        if (w && cJSON_AddStringToObject(req, "start_revision", r) && cJSON_AddTrueToObject(req, "prev_kv") &&
            cJSON_AddItemToObject(w, "create_request", req)) {
            req = NULL;
            body = cJSON_PrintUnformatted(w);
        }
        cJSON_Delete(w);
        cJSON_Delete(req);
    }
    gtxn_free(&t);
    return body;
}

int gstream_open(vigil_etcd *e, const char *key, unsigned flags, int64_t rev, struct gstream **out)
{
    struct gstream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    char *body = watch_body(key, flags, rev);
    s->multi = curl_multi_init();
    s->curl = curl_easy_init();
    if (!body || !s->multi || !s->curl) {
        free(body);
        gstream_close(s);
        return -ENOMEM;
    }
    /* e's options and headers (require-leader, the auth token), and no
     * total timeout: the stream lasts. */
    int rc = vigil_etcd__stream_setup(e, -1, "v3/watch", body, s->curl, on_data, s, &s->stream, &s->ep);
    free(body);
    if (rc < 0) {
        gstream_close(s);
        return rc;
    }
    if (curl_multi_add_handle(s->multi, s->curl) != CURLM_OK) {
        gstream_close(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

static int transfer_rc(struct gstream *s, CURLcode c)
{
    if (s->err)
        return s->err;
    if (vigil_etcd__stream_error(s->stream))
        return vigil_etcd__stream_error(s->stream); /* a frame that was not etcd's */
    long http = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &http);
    switch (c) {
    case CURLE_OK:                 return http >= 200 && http < 300 ? GSTREAM_ENDED : -EPROTO;
    case CURLE_COULDNT_CONNECT:    return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:      return -ENOMEM;
    default:                       return -ECONNRESET;
    }
}

static int hand_out(struct gstream *s, struct gevent *ev, int max, int64_t *rev)
{
    int n = 0;
    while (n < max && s->qlen > 0) {
        ev[n] = s->q[s->qhead++];
        s->qlen--;
        if (ev[n].kv.mod > *rev)
            *rev = ev[n].kv.mod;
        n++;
    }
    if (s->qlen == 0)
        s->qhead = 0;
    return n;
}

int gstream_next(struct gstream *s, int timeout_ms, int extra_fd, struct gevent *ev, int max, int64_t *rev)
{
    uint64_t deadline = gnow_ns() / 1000000 + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (!s->ended) {
            int running = 0;
            if (curl_multi_perform(s->multi, &running) != CURLM_OK)
                return -EIO;
            int left;
            CURLMsg *m;
            while ((m = curl_multi_info_read(s->multi, &left))) {
                if (m->msg == CURLMSG_DONE && m->easy_handle == s->curl && !s->ended) {
                    s->ended = true;
                    vigil_etcd__stream_end(s->stream); /* the error line, all trailers in */
                    s->end_rc = transfer_rc(s, m->data.result);
                }
            }
        }
        if (s->qlen > 0)
            return hand_out(s, ev, max, rev);
        if (s->ended)
            return s->end_rc;
        uint64_t now = gnow_ns() / 1000000;
        if (now >= deadline)
            return 0;
        uint64_t wait = deadline - now;
        struct curl_waitfd extra = { .fd = extra_fd, .events = CURL_WAIT_POLLIN };
        int got = 0;
        if (curl_multi_poll(s->multi, extra_fd >= 0 ? &extra : NULL, extra_fd >= 0 ? 1 : 0,
                            wait > INT_MAX ? INT_MAX : (int)wait, &got) != CURLM_OK)
            return -EIO;
        if (extra_fd >= 0 && (extra.revents & CURL_WAIT_POLLIN))
            return 0; /* the caller's fd: it looks for itself */
    }
}

bool gstream_compacted(const struct gstream *s)
{
    return s->compacted;
}

bool gstream_current(struct gstream *s, vigil_etcd *e)
{
    unsigned cur;
    vigil_etcd__endpoints(e, &cur);
    return cur == s->ep;
}
