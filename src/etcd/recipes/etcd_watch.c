/* SPDX-License-Identifier: MIT */
/*
 * A watch for the deletion of one key: one create_request, answered by
 * a stream of messages for as long as the connection lasts, in etcd's
 * gRPC or through its JSON gateway, whichever the handle speaks to the
 * endpoint (etcd_grpc_stream.c), read here as the gateway's, one a line:
 *
 *   {"result":{"header":{..},"created":true}}                   at once
 *   {"result":{"header":{..},"events":[{"type":"DELETE",..}]}}  the news
 *   {"result":{..,"canceled":true,"compact_revision":"N"}}      look again
 *
 * It runs on a connection of its own (a curl multi handle, so the caller
 * waits in poll(2) on the socket with a deadline, asleep until etcd
 * speaks), while the caller keeps its lease alive through the handle's
 * usual connection, to an endpoint the caller chooses (so that a watch on
 * a member that went silent can move to another). It carries the
 * handle's headers: the auth token, and require-leader, so that a member
 * cut off from its leader refuses the watch (Unavailable) instead of
 * keeping it open on a history that no longer moves. It asks for progress
 * notifications, which etcd sends where its operator shortened
 * --experimental-watch-progress-notify-interval: any message, created or
 * progress, tells the caller the stream is alive (watch_heard); the caller
 * does not count on them and looks again itself at every renewal.
 */
#define _GNU_SOURCE
#include "recipes_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vigil_etcd_watch {
    CURLM             *multi;
    CURL              *curl;
    struct vigil_etcd_stream *stream; /* its connection: gRPC or the gateway (etcd_grpc_stream.c) */
    char              *buf;   /* what came and was not read yet */
    size_t             len, cap;
    int                err;   /* why the write callback refused */
    bool               done;  /* the stream ended */
    bool               heard; /* a whole message came (created, progress or news) */
    int                done_rc;
    unsigned           ep;    /* the endpoint it runs on */
    char              *pred, *own; /* a waiter's keys (parse_watch_keys), or NULL */
    char               errbuf[CURL_ERROR_SIZE];
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct vigil_etcd_watch *w = arg;
    size_t n = size * nmemb;
    if (n > VIGIL_ETCD_BODY_MAX - w->len) {
        w->err = -EMSGSIZE; /* a message past the limit, or lines that never end */
        return 0;
    }
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *p = realloc(w->buf, cap);
        if (!p) {
            w->err = -ENOMEM;
            return 0;
        }
        w->buf = p;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, data, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return n;
}

static int stream_error(struct vigil_etcd_watch *w, CURLcode c)
{
    if (c == CURLE_OK)
        return VIGIL_ETCD_WATCH_CANCELED; /* the server ended it */
    long os = 0;
    if (curl_easy_getinfo(w->curl, CURLINFO_OS_ERRNO, &os) != CURLE_OK)
        os = 0;
    int err = w->err ? w->err : vigil_etcd__stream_error(w->stream);
    int rc = vigil_etcd__curl_error(c, os, err, w->errbuf);
    return rc == -EIO ? -ECONNRESET : rc;
}

/* The messages that came whole; with `last`, also what is left without a
 * newline (the stream is over). What the first that matters says, else
 * NOTHING. */
static int drain(struct vigil_etcd_watch *w, bool last)
{
    size_t at = 0;
    int rc = VIGIL_ETCD_WATCH_NOTHING;
    while (rc == VIGIL_ETCD_WATCH_NOTHING && at < w->len) {
        char *nl = memchr(w->buf + at, '\n', w->len - at);
        if (!nl && !last)
            break;
        size_t end = nl ? (size_t)(nl - w->buf) : w->len, a = at;
        at = nl ? end + 1 : w->len;
        while (a < end && vigil_etcd__is_space(w->buf[a]))
            a++;
        if (a < end) {
            rc = vigil_etcd__parse_watch_keys(w->buf + a, end - a, w->pred, w->own);
            w->heard = true;
        }
    }
    memmove(w->buf, w->buf + at, w->len - at);
    w->len -= at;
    w->buf[w->len] = '\0';
    return rc;
}

void vigil_etcd__watch_close(struct vigil_etcd_watch *w)
{
    if (!w)
        return;
    if (w->multi && w->curl)
        curl_multi_remove_handle(w->multi, w->curl);
    if (w->curl)
        curl_easy_cleanup(w->curl); /* closes the connection: etcd drops the watch */
    if (w->multi)
        curl_multi_cleanup(w->multi);
    vigil_etcd__stream_free(w->stream);
    free(w->buf);
    free(w->pred);
    free(w->own);
    free(w);
}

int vigil_etcd__watch_open(vigil_etcd *e, const char *key_b64, int64_t rev, struct vigil_etcd_watch **out)
{
    struct vigil_etcd_watch_spec spec = { .key_b64 = key_b64, .rev = rev, .ep = -1 };
    return vigil_etcd__watch_start(e, &spec, out);
}

int vigil_etcd__watch_start(vigil_etcd *e, const struct vigil_etcd_watch_spec *spec, struct vigil_etcd_watch **out)
{
    char *body = malloc(VIGIL_ETCD_REQ_MAX);
    if (!body)
        return -ENOMEM;
    int rc = vigil_etcd__body_watch_spec(body, VIGIL_ETCD_REQ_MAX, spec);
    struct vigil_etcd_watch *w = rc < 0 ? NULL : calloc(1, sizeof(*w));
    if (!w) {
        free(body);
        return rc < 0 ? rc : -ENOMEM;
    }
    w->cap = 4096;
    w->buf = malloc(w->cap);
    w->multi = curl_multi_init();
    w->curl = curl_easy_init();
    bool keys = spec->pred_b64 && spec->own_b64;
    if (keys) {
        w->pred = strdup(spec->pred_b64);
        w->own = strdup(spec->own_b64);
    }
    if (!w->buf || !w->multi || !w->curl || (keys && (!w->pred || !w->own))) {
        free(body);
        vigil_etcd__watch_close(w);
        return -ENOMEM;
    }
    w->buf[0] = '\0';
    CURL *c = w->curl;
    /* As the handle's own connection (etcd_http.c), but no total timeout:
     * the stream lasts. */
    rc = vigil_etcd__stream_setup(e, spec->ep, "v3/watch", body, c, on_data, w, &w->stream, &w->ep);
    free(body);
    if (rc < 0) {
        vigil_etcd__watch_close(w);
        return rc;
    }
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, w->errbuf);
    if (curl_multi_add_handle(w->multi, c) != CURLM_OK) {
        vigil_etcd__watch_close(w);
        return -ENOMEM;
    }
    *out = w;
    return 0;
}

void vigil_etcd__watch_wakeup(struct vigil_etcd_watch *w)
{
    curl_multi_wakeup(w->multi);
}

bool vigil_etcd__watch_heard(const struct vigil_etcd_watch *w)
{
    return w->heard;
}

bool vigil_etcd__watch_grpc(const struct vigil_etcd_watch *w)
{
    return vigil_etcd__stream_grpc(w->stream);
}

unsigned vigil_etcd__watch_endpoint(const struct vigil_etcd_watch *w)
{
    return w->ep;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int vigil_etcd__watch_wait(struct vigil_etcd_watch *w, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (!w->done) {
            int running = 0;
            if (curl_multi_perform(w->multi, &running) != CURLM_OK)
                return -EIO;
            int left;
            CURLMsg *m;
            while ((m = curl_multi_info_read(w->multi, &left))) {
                if (m->msg == CURLMSG_DONE && m->easy_handle == w->curl) {
                    w->done = true;
                    int end = vigil_etcd__stream_end(w->stream); /* the error line, all trailers in */
                    w->done_rc = end && m->data.result == CURLE_OK ? end : stream_error(w, m->data.result);
                }
            }
        }
        int rc = drain(w, w->done);
        if (rc != VIGIL_ETCD_WATCH_NOTHING)
            return rc;
        if (w->done)
            return w->done_rc;
        uint64_t now = now_ms();
        if (now >= deadline)
            return VIGIL_ETCD_WATCH_NOTHING;
        uint64_t wait = deadline - now;
        /* Asleep in poll(2) on the stream's socket until etcd speaks or
         * the time is up: no request goes out while nothing changes. */
        if (curl_multi_poll(w->multi, NULL, 0, wait > INT_MAX ? INT_MAX : (int)wait, NULL) != CURLM_OK)
            return -EIO;
    }
}
