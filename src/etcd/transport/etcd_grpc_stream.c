/* SPDX-License-Identifier: MIT */
/*
 * A watch stream's connection (etcd_watch.c, group_stream.c), in gRPC
 * where the handle speaks gRPC to the endpoint, else on the JSON gateway
 * as before. Either way the caller's write callback reads the gateway's
 * stream: one JSON message a line, {"result":{...}} each.
 *
 * In gRPC: a POST to /etcdserverpb.Watch/Watch of one framed
 * WatchRequest (the caller's create_request, from the gateway's JSON
 * through etcd_grpc_json.c) with the request body ended (etcd's watch
 * server keeps the stream when the client half-closes: its recvLoop
 * returns nil at EOF), over HTTP/2 (prior knowledge on the stream's own
 * fresh connection for http://, ALPN h2 for https), with etcd's metadata
 * (`token`, `hasleader: true`). Its reply, framed WatchResponse messages,
 * goes through the converter below (partial frames kept across
 * callbacks) to the caller's callback as the gateway's lines; a malformed
 * frame (compressed, past VIGIL_ETCD_BODY_MAX, not a WatchResponse, or a
 * reply that is not application/grpc) ends the transfer with an error
 * (vigil_etcd__stream_error). The status in the trailers: 0 is a stream
 * etcd ended (as the gateway's end); another is given to the caller as
 * the gateway's error line, {"error":{"grpc_code":N,"message":..}}, which
 * its parser reads as it reads the gateway's (an auth refusal -EACCES).
 *
 * Each stream keeps a connection of its own (its own multi handle:
 * libcurl multiplexes HTTP/2 streams only within one multi handle).
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct vigil_etcd_stream {
    struct curl_slist                   *headers;
    const struct vigil_etcd_grpc_method *m;    /* NULL: the gateway */
    vigil_etcd_stream_write_fn          *write; /* the caller's, reading the gateway's lines */
    void                                *arg;
    struct vigil_etcd_grpc_state         g;    /* content type, grpc-status, grpc-message */
    unsigned char                       *buf;  /* a frame not yet whole */
    size_t                               len, cap;
    int                                  err;  /* why the converter ended the transfer */
    bool                                 told; /* a non-zero status given to the caller */
};

struct vigil_etcd_stream *vigil_etcd__stream_new(const struct vigil_etcd_grpc_method *m,
                                                 vigil_etcd_stream_write_fn *write, void *arg)
{
    struct vigil_etcd_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->m = m;
    s->write = write;
    s->arg = arg;
    s->g.status = -1;
    return s;
}

void vigil_etcd__stream_free(struct vigil_etcd_stream *s)
{
    if (!s)
        return;
    curl_slist_free_all(s->headers);
    free(s->buf);
    free(s);
}

int vigil_etcd__stream_error(const struct vigil_etcd_stream *s)
{
    return s ? s->err : 0;
}

bool vigil_etcd__stream_grpc(const struct vigil_etcd_stream *s)
{
    return s && s->m;
}

/* One line to the caller: false when it refused it (its own error). */
static bool tell(struct vigil_etcd_stream *s, const char *pre, const char *json, size_t n, const char *post)
{
    size_t a = strlen(pre), b = strlen(post);
    char *line = malloc(a + n + b + 1);
    if (!line) {
        s->err = -ENOMEM;
        return false;
    }
    memcpy(line, pre, a);
    memcpy(line + a, json, n);
    memcpy(line + a + n, post, b);
    size_t len = a + n + b;
    bool taken = s->write(line, 1, len, s->arg) == len;
    free(line);
    return taken;
}

/* The whole frames in s->buf to the caller, as the gateway's lines. */
static bool frames_out(struct vigil_etcd_stream *s)
{
    size_t at = 0;
    bool ok = true;
    while (ok && s->len - at >= 5) {
        const unsigned char *f = s->buf + at;
        if (f[0] != 0) {
            s->err = -EPROTO; /* compressed: we asked for no compression */
            return false;
        }
        uint32_t mlen = (uint32_t)f[1] << 24 | (uint32_t)f[2] << 16 | (uint32_t)f[3] << 8 | f[4];
        if (mlen > VIGIL_ETCD_BODY_MAX) {
            s->err = -EMSGSIZE;
            return false;
        }
        if (s->len - at - 5 < mlen)
            break; /* the rest comes in a later callback */
        char *json;
        size_t jlen;
        int rc = vigil_etcd__pb_decode(s->m->reply, f + 5, mlen, &json, &jlen);
        if (rc < 0) {
            s->err = rc;
            return false;
        }
        ok = tell(s, "{\"result\":", json, jlen, "}\n");
        free(json);
        at += 5 + (size_t)mlen;
    }
    memmove(s->buf, s->buf + at, s->len - at);
    s->len -= at;
    return ok;
}

size_t vigil_etcd__stream_feed(char *data, size_t size, size_t nmemb, void *arg)
{
    struct vigil_etcd_stream *s = arg;
    size_t n = size * nmemb;
    if (!s->m)
        return s->write(data, size, nmemb, s->arg);
    if (s->err)
        return 0;
    if (!s->g.is_grpc) {
        s->err = -EPROTO; /* an HTTP/1.1 answer, an error page: no gRPC */
        return 0;
    }
    /* Bounded: what is kept between callbacks is one frame not yet
     * whole, whose length frames_out has checked against the limit. */
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n)
            cap *= 2;
        unsigned char *p = realloc(s->buf, cap);
        if (!p) {
            s->err = -ENOMEM;
            return 0;
        }
        s->buf = p;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    return frames_out(s) ? n : 0;
}

/* The headers and the trailers, recorded: the error line waits for the
 * transfer's end (vigil_etcd__stream_end), since etcd sends grpc-status
 * before grpc-message. */
size_t vigil_etcd__stream_header(char *line, size_t size, size_t nmemb, void *arg)
{
    struct vigil_etcd_stream *s = arg;
    return vigil_etcd__grpc_on_header(line, size, nmemb, &s->g);
}

int vigil_etcd__stream_end(struct vigil_etcd_stream *s)
{
    if (!s || s->err || !s->m)
        return s ? s->err : 0;
    if (s->len > 0) {
        s->err = -EPROTO; /* it ended inside a message */
        return s->err;
    }
    if (!s->g.have_status || s->g.status == 0 || s->told)
        return 0;
    s->told = true;
    cJSON *o = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(o, "error");
    char *json = NULL;
    if (err && cJSON_AddNumberToObject(err, "grpc_code", s->g.status) &&
        cJSON_AddNumberToObject(err, "http_code", (double)vigil_etcd__grpc_http_status(s->g.status)) &&
        cJSON_AddStringToObject(err, "message", s->g.message))
        json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json)
        return s->err = -ENOMEM;
    bool taken = tell(s, "", json, strlen(json), "\n");
    free(json);
    return taken ? 0 : (s->err ? s->err : -EIO);
}

/* gRPC for a stream on endpoint i: where the handle's calls go in gRPC
 * and the endpoint is known to speak it, or (not known yet) another
 * endpoint of the handle does; or always, when asked (grpc). */
static bool stream_in_grpc(const vigil_etcd *e, unsigned i)
{
    if (!vigil_etcd__grpc_on(e, i))
        return false;
    if (e->mode == VIGIL_ETCD_TRANSPORT_GRPC || e->speaks[i] == VIGIL_ETCD_SPEAKS_GRPC)
        return true;
    for (unsigned k = 0; k < e->n; k++)
        if (e->speaks[k] == VIGIL_ETCD_SPEAKS_GRPC)
            return true;
    return false;
}

int vigil_etcd__stream_setup(vigil_etcd *e, int ep, const char *path, const char *body, void *curl,
                             vigil_etcd_stream_write_fn *write, void *arg, struct vigil_etcd_stream **out,
                             unsigned *used)
{
    if (strncmp(path, "v3/", 3) != 0)
        return -EINVAL;
    char url[VIGIL_ETCD_URL_MAX + 64];
    vigil_etcd__lock(e);
    unsigned i = ep < 0 ? e->cur : (unsigned)ep % e->n;
    const struct vigil_etcd_grpc_method *m = stream_in_grpc(e, i) ? vigil_etcd__grpc_method(path) : NULL;
    int n = m ? snprintf(url, sizeof(url), "%s%s", e->urls[i], m->grpc)
              : vigil_etcd__gateway_url(e, i, path, url, sizeof(url));
    struct curl_slist *h = m ? vigil_etcd__grpc_headers(e) : vigil_etcd__headers_make(e);
    long connect_ms = e->connect_ms;
    vigil_etcd__unlock(e);
    struct vigil_etcd_stream *s = h ? vigil_etcd__stream_new(m, write, arg) : NULL;
    if (!s) {
        curl_slist_free_all(h);
        return -ENOMEM;
    }
    s->headers = h;
    if (n <= 0 || (size_t)n >= sizeof(url)) {
        vigil_etcd__stream_free(s);
        return VIGIL_ERANGE;
    }
    unsigned char *frame = NULL;
    size_t flen = strlen(body);
    if (m) {
        int rc = vigil_etcd__pb_encode(m->request, body, 5, &frame, &flen);
        if (rc < 0 || flen - 5 > VIGIL_ETCD_BODY_MAX) {
            vigil_etcd__why("%s: a request that is not a %s", path, m->request->name);
            free(frame);
            vigil_etcd__stream_free(s);
            return rc < 0 ? rc : -EMSGSIZE;
        }
        vigil_etcd__grpc_frame_header(frame, flen - 5);
    }
    vigil_etcd__curl_setup(curl, connect_ms); /* and no total timeout: the stream lasts */
    vigil_etcd__curl_tls(e, curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)flen); /* before the copy: the frame is binary */
    curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, m ? (const char *)frame : body);
    free(frame);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, vigil_etcd__stream_feed);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
    if (m) {
        bool tls = strncasecmp(url, "https://", 8) == 0;
        curl_easy_setopt(curl, CURLOPT_HTTP_VERSION,
                         (long)(tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, vigil_etcd__stream_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, s);
        /* libcurl 7.88's HTTP/2 leaves a message longer than its read
         * buffer half read until its next 1 s poll (etcd_grpc.c). */
        curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
    }
    *out = s;
    *used = i;
    return 0;
}
