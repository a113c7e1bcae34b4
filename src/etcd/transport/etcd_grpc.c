/* SPDX-License-Identifier: MIT */
/*
 * The gRPC transport: a request of the adapter, written as the JSON
 * gateway takes it, sent to etcd as its own clients send it (gRPC over
 * HTTP/2: a POST to /etcdserverpb.KV/Txn and the like, the message in a
 * length-prefixed frame, the status in the trailers), and the reply given
 * back as the gateway would have given it (etcd_grpc_json.c): an error
 * status as grpc-gateway's HTTP status and {"error","code","message"}
 * body, a stream's message under "result". Every layer above the request
 * loop (etcd_http.c) is the same whichever transport carried a request,
 * and so is every promise about late and duplicate requests.
 *
 * Which transport an endpoint gets (VIGIL_ETCD_TRANSPORT, read at
 * connect): "gateway", the JSON gateway; "grpc", gRPC only; "auto" (the
 * default), gRPC until the endpoint shows, before a request is sent, that
 * it does not speak HTTP/2 (an HTTP/1.1 answer to the h2c probe's
 * preface; a TLS handshake whose ALPN settled on another protocol than
 * h2, refused in alpn_check before the send), and then the gateway for
 * the handle's life. Such a refusal is neither a failed attempt nor one
 * that may have applied. Anything after the send (a reply that is not
 * application/grpc, a GOAWAY, a reset) is an ordinary failed attempt that
 * may have applied, and moves nothing: a proxy's 504 may hide an etcd
 * that applied the request. A dead or frozen endpoint keeps gRPC too.
 *
 * Metadata as etcd reads it: the auth token as `token`, require-leader as
 * `hasleader: true`. gRPC calls take a connection of their own per handle
 * (an easy handle: libcurl multiplexes HTTP/2 streams only within one
 * multi handle); the watch streams take gRPC too, a connection each
 * (etcd_grpc_stream.c).
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* ---- which transport ----------------------------------------------------- */

int vigil_etcd__transport_mode(const char *env, int *mode)
{
    if (!env || !*env || strcmp(env, "auto") == 0)
        *mode = VIGIL_ETCD_TRANSPORT_AUTO;
    else if (strcmp(env, "grpc") == 0)
        *mode = VIGIL_ETCD_TRANSPORT_GRPC;
    else if (strcmp(env, "gateway") == 0)
        *mode = VIGIL_ETCD_TRANSPORT_GATEWAY;
    else
        return -EINVAL;
    return 0;
}

bool vigil_etcd__grpc_on(const vigil_etcd *e, unsigned ep)
{
    return e->mode != VIGIL_ETCD_TRANSPORT_GATEWAY && e->speaks[ep] != VIGIL_ETCD_SPEAKS_GATEWAY;
}

/* ---- the reply's headers and trailers ------------------------------------ */

static bool header_is(const char *line, size_t n, const char *name, const char **value, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return true;
}

/* libcurl hands the trailers to the header callback too: grpc-status and
 * grpc-message come in one or the other (Trailers-Only). */
size_t vigil_etcd__grpc_on_header(char *line, size_t size, size_t nmemb, void *arg)
{
    struct vigil_etcd_grpc_state *g = arg;
    size_t n = size * nmemb;
    const char *v;
    size_t vl;
    if (header_is(line, n, "content-type", &v, &vl))
        g->is_grpc = vl >= 16 && strncasecmp(v, "application/grpc", 16) == 0 && (vl == 16 || v[16] == '+' || v[16] == ';');
    else if (header_is(line, n, "grpc-status", &v, &vl)) {
        int code = 0;
        for (size_t i = 0; i < vl && code < 1000; i++)
            code = v[i] >= '0' && v[i] <= '9' ? code * 10 + (v[i] - '0') : 1000;
        g->status = vl && code < 1000 ? code : 2; /* unparsable: Unknown */
        g->have_status = true;
    } else if (header_is(line, n, "grpc-message", &v, &vl)) {
        if (vl >= sizeof(g->message))
            vl = sizeof(g->message) - 1;
        memcpy(g->message, v, vl);
        vigil_etcd__grpc_unpercent(g->message, vl);
    }
    return n;
}

/* ---- one call -------------------------------------------------------------- */

static int reply_set(vigil_etcd *e, const char *pre, const char *s, size_t n, const char *post)
{
    size_t a = strlen(pre), b = strlen(post);
    if (n > VIGIL_ETCD_BODY_MAX - a - b)
        return -EMSGSIZE;
    if (a + n + b + 1 > e->reply.cap) {
        char *p = realloc(e->reply.p, a + n + b + 1);
        if (!p)
            return -ENOMEM;
        e->reply.p = p;
        e->reply.cap = a + n + b + 1;
    }
    memcpy(e->reply.p, pre, a);
    memcpy(e->reply.p + a, s, n);
    memcpy(e->reply.p + a + n, post, b);
    e->reply.len = a + n + b;
    e->reply.p[e->reply.len] = '\0';
    return 0;
}

/* A non-zero status as grpc-gateway's error reply (DefaultHTTPError). */
static int error_reply(vigil_etcd *e, int code, long *http)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o && cJSON_AddStringToObject(o, "error", e->grpc.message) && cJSON_AddNumberToObject(o, "code", code) &&
        cJSON_AddStringToObject(o, "message", e->grpc.message))
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return -ENOMEM;
    int rc = reply_set(e, "", s, strlen(s), "");
    free(s);
    *http = vigil_etcd__grpc_http_status(code);
    return rc;
}

/* Whether an http:// endpoint speaks HTTP/2 without TLS (h2c with prior
 * knowledge, as etcd's port does): the client preface and an empty
 * SETTINGS frame on a connection of its own, and the first bytes back.
 * VIGIL_ETCD_NOT_GRPC for an HTTP/1.x answer ("HTTP/"); 0 for a SETTINGS
 * frame, or a close that says nothing; else the CURLcode of a connection
 * that failed or a preface not answered in time, with e->unsent_os: a
 * dead or frozen endpoint is no reason to leave gRPC, and its failure is
 * the attempt's (nothing of the request was sent: it cannot apply). */
static int h2c_probe(vigil_etcd *e, const char *url, long timeout_ms)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    e->unsent_os = 0;
    uint64_t start = mono_ms();
    CURL *c = curl_easy_init();
    if (!c)
        return CURLE_OUT_OF_MEMORY;
    vigil_etcd__curl_setup(c, e->connect_ms < timeout_ms ? e->connect_ms : timeout_ms);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, e->curl_err);
    curl_socket_t fd = CURL_SOCKET_BAD;
    size_t sent = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK && (curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD))
        rc = CURLE_COULDNT_CONNECT;
    if (rc == CURLE_OK)
        rc = curl_easy_send(c, preface, sizeof(preface) - 1, &sent);
    int answer = 0;
    if (rc == CURLE_OK && sent == sizeof(preface) - 1) {
        char got[5];
        size_t have = 0;
        struct pollfd pf = { fd, POLLIN, 0 };
        int ready = 1;
        /* The connect's time is the probe's too: the wait is what is left. */
        long left;
        while (have < sizeof(got) && (left = timeout_ms - (long)(mono_ms() - start)) > 0 &&
               (ready = poll(&pf, 1, (int)left)) > 0) {
            size_t n = 0;
            CURLcode r = curl_easy_recv(c, got + have, sizeof(got) - have, &n);
            if (r == CURLE_AGAIN)
                continue;
            if (r != CURLE_OK || n == 0)
                break;
            have += n;
        }
        if (have == sizeof(got) && memcmp(got, "HTTP/", 5) == 0)
            answer = VIGIL_ETCD_NOT_GRPC;
        else if (ready >= 0 && have == 0 && mono_ms() - start >= (uint64_t)timeout_ms) {
            snprintf(e->curl_err, sizeof(e->curl_err), "no answer to the HTTP/2 preface in %ld ms", timeout_ms);
            answer = CURLE_OPERATION_TIMEDOUT;
        }
    } else {
        long os = 0;
        answer = rc != CURLE_OK ? (int)rc : CURLE_SEND_ERROR;
        e->unsent_os = curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os) == CURLE_OK ? os : 0;
    }
    curl_easy_cleanup(c);
    return answer;
}

/* For a TLS endpoint not yet known to speak gRPC: libcurl's account of
 * the handshake, which names the protocol ALPN settled on, "ALPN: server
 * accepted h2" or another (libcurl's vtls words, alike for every TLS
 * backend). Read before the request is sent (alpn_check): the evidence
 * auto may act on. */
static int on_debug(CURL *c, curl_infotype type, char *text, size_t n, void *arg)
{
    (void)c;
    struct vigil_etcd_grpc_state *g = arg;
    static const char said[] = "ALPN: server ";
    if (type == CURLINFO_TEXT && n > sizeof(said) - 1 && memcmp(text, said, sizeof(said) - 1) == 0) {
        static const char h2[] = "ALPN: server accepted h2";
        g->alpn = n >= sizeof(h2) - 1 && memcmp(text, h2, sizeof(h2) - 1) == 0 &&
                          (n == sizeof(h2) - 1 || text[sizeof(h2) - 1] == '\n' || text[sizeof(h2) - 1] == '\r')
                      ? VIGIL_ETCD_ALPN_H2
                      : VIGIL_ETCD_ALPN_OTHER;
    }
    return 0;
}

/* Called by libcurl once the connection is up, before a byte of the
 * request: a TLS handshake that settled on anything but h2 is refused
 * here, so that nothing reached the server. No account of ALPN (a reused
 * connection, a libcurl that words it otherwise): the request goes, and a
 * reply that is not gRPC is an ordinary failed attempt. */
#if LIBCURL_VERSION_NUM >= 0x075000 /* CURLOPT_PREREQFUNCTION: 7.80 */
static int alpn_check(void *arg, char *ip_remote, char *ip_local, int remote_port, int local_port)
{
    (void)ip_remote;
    (void)ip_local;
    (void)remote_port;
    (void)local_port;
    const struct vigil_etcd_grpc_state *g = arg;
    return g->alpn == VIGIL_ETCD_ALPN_OTHER ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}
#endif

/* A request refused before it was sent: nothing can have applied. */
static int unsent(vigil_etcd *e, int rc, const char *url, const char *what)
{
    e->unsent = true;
    e->unsent_os = 0;
    char clean[512];
    vigil_etcd__why("%s: %s, not sent", vigil_etcd__redact(url, clean, sizeof(clean)), what);
    return rc;
}

void vigil_etcd__grpc_frame_header(unsigned char *frame, size_t mlen)
{
    frame[0] = 0; /* not compressed */
    frame[1] = (unsigned char)(mlen >> 24);
    frame[2] = (unsigned char)(mlen >> 16);
    frame[3] = (unsigned char)(mlen >> 8);
    frame[4] = (unsigned char)mlen;
}

int vigil_etcd__grpc_perform(vigil_etcd *e, unsigned ep, const struct vigil_etcd_grpc_method *m, const char *url,
                             const char *body, long timeout_ms, long *http, int *curl_code)
{
    CURL *c = e->gcurl;
    uint64_t start = mono_ms();
    unsigned char *frame;
    size_t flen;
    int rc = vigil_etcd__pb_encode(m->request, body, 5, &frame, &flen);
    if (rc < 0) {
        e->unsent = true;
        e->unsent_os = 0;
        if (rc == -ENOMEM)
            vigil_etcd__why("%s: out of memory encoding the request, not sent", m->gateway);
        else
            vigil_etcd__why("%s: a request that is not a %s", m->gateway, m->request->name);
        return rc;
    }
    if (flen - 5 > VIGIL_ETCD_BODY_MAX) {
        free(frame);
        return unsent(e, -EMSGSIZE, url, "a request larger than VIGIL_ETCD_BODY_MAX");
    }
    vigil_etcd__grpc_frame_header(frame, flen - 5);
    bool tls = strncasecmp(url, "https://", 8) == 0;
    bool first = e->speaks[ep] == VIGIL_ETCD_SPEAKS_UNKNOWN;
    int probe = !tls && first ? h2c_probe(e, url, timeout_ms) : 0;
    if (probe != 0) {
        free(frame);
        if (probe == VIGIL_ETCD_NOT_GRPC)
            return VIGIL_ETCD_NOT_GRPC;
        e->unsent = true;
        *curl_code = probe;
        return VIGIL_ETCD_CURL_FAILED;
    }
    /* Only evidence from before the send may move the endpoint to the
     * gateway: for TLS, the handshake's ALPN (alpn_check). */
    curl_easy_setopt(c, CURLOPT_VERBOSE, (long)(tls && first));
    curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, tls && first ? on_debug : NULL);
    curl_easy_setopt(c, CURLOPT_DEBUGDATA, &e->grpc);
#if LIBCURL_VERSION_NUM >= 0x075000 /* else no check: after the send, a failed attempt as any */
    curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, tls && first ? alpn_check : NULL);
    curl_easy_setopt(c, CURLOPT_PREREQDATA, &e->grpc);
#endif
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)frame);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)flen);
    CURLcode cc;
    long version = 0;
    for (int round = 0;; round++) {
        /* h2c with prior knowledge on a fresh connection only: libcurl
         * 7.88 fails a request that reuses one so asked for (curl issue
         * 10634, fixed in 8.0); "HTTP/2" reuses the one the last call
         * left. Had that one gone and libcurl opened another in HTTP/1.1
         * (no gRPC server behind that: nothing was applied), ask again,
         * with prior knowledge. The probe and both rounds share the
         * attempt's time (etcd.h: each endpoint tried costs at most
         * total_ms). */
        long left = timeout_ms - (long)(mono_ms() - start);
        if (left <= 0) {
            cc = CURLE_OPERATION_TIMEDOUT;
            if (round == 0) { /* the probe took it all: nothing was sent */
                e->unsent = true;
                e->unsent_os = 0;
            }
            snprintf(e->curl_err, sizeof(e->curl_err), "no time left of the attempt's %ld ms", timeout_ms);
            break;
        }
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->connect_ms < left ? e->connect_ms : left);
        bool reuse = !tls && e->gconn == ep + 1 && round == 0;
        e->greply.len = 0;
        e->greply.err = 0;
        e->grpc = (struct vigil_etcd_grpc_state){ .status = -1 };
        curl_easy_setopt(c, CURLOPT_HTTP_VERSION,
                         (long)(tls ? CURL_HTTP_VERSION_2TLS
                                    : reuse ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
        /* TLS on a first contact: a handshake of its own, whose ALPN
         * alpn_check reads (a kept connection would say nothing). */
        curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, (long)(tls ? first : !reuse));
        cc = curl_easy_perform(c);
        if (curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &version) != CURLE_OK)
            version = 0;
        long connects = 0;
        (void)curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        e->gconn = cc == CURLE_OK && version == CURL_HTTP_VERSION_2_0 ? ep + 1 : 0;
        bool fresh_h1 = cc == CURLE_OK ? version != CURL_HTTP_VERSION_2_0
                                       : connects > 0 && cc != CURLE_OPERATION_TIMEDOUT;
        if (!reuse || !fresh_h1)
            break;
    }
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
    free(frame);
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        e->unsent = true; /* alpn_check: TLS without h2, before the send */
        e->unsent_os = 0;
        return VIGIL_ETCD_NOT_GRPC;
    }
    if (cc != CURLE_OK) {
        /* After the request may have left: an ordinary failure, which
         * may have applied (a GOAWAY, a reset, a close). */
        *curl_code = (int)cc;
        return VIGIL_ETCD_CURL_FAILED;
    }
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (version != CURL_HTTP_VERSION_2_0 || !e->grpc.is_grpc) {
        /* The request left: a proxy's 504 may hide an etcd that applied
         * it. A failed attempt, and the endpoint keeps gRPC. */
        char clean[512];
        vigil_etcd__why("%s: a reply that is not gRPC (HTTP %ld)", vigil_etcd__redact(url, clean, sizeof(clean)), code);
        return -EPROTO;
    }
    e->speaks[ep] = VIGIL_ETCD_SPEAKS_GRPC;
    e->grpc_answers++;
    if (!e->grpc.have_status) {
        vigil_etcd__why("%s: the stream ended without a gRPC status", url);
        return -EPROTO; /* reset after it was sent: it may have been applied */
    }
    if (e->grpc.status != 0)
        return error_reply(e, e->grpc.status, http);
    const unsigned char *msg;
    size_t n;
    char *json;
    size_t jlen;
    if ((rc = vigil_etcd__grpc_unframe((const unsigned char *)e->greply.p, e->greply.len, &msg, &n)) < 0 ||
        (rc = vigil_etcd__pb_decode(m->reply, msg, n, &json, &jlen)) < 0) {
        vigil_etcd__why("%s: a reply that is not a %s", url, m->reply->name);
        return rc;
    }
    /* A stream's message comes under "result" from the gateway. */
    rc = reply_set(e, m->stream ? "{\"result\":" : "", json, jlen, m->stream ? "}" : "");
    free(json);
    *http = 200;
    return rc;
}

/* ---- the handle's gRPC connection ------------------------------------------ */

void *vigil_etcd__grpc_headers(vigil_etcd *e)
{
    /* etcd's metadata: require-leader as "hasleader", the token as "token". */
    static const char *const fixed[] = { "Content-Type: application/grpc", "TE: trailers", "Expect:",
                                         "hasleader: true" };
    return vigil_etcd__headers_of(e, fixed, sizeof(fixed) / sizeof(fixed[0]), "token");
}

int vigil_etcd__grpc_open(vigil_etcd *e)
{
    int rc = vigil_etcd__transport_mode(getenv("VIGIL_ETCD_TRANSPORT"), &e->mode);
    if (rc < 0) {
        vigil_etcd__why("VIGIL_ETCD_TRANSPORT='%s': not auto, grpc or gateway", getenv("VIGIL_ETCD_TRANSPORT"));
        return rc;
    }
    if (e->mode == VIGIL_ETCD_TRANSPORT_GATEWAY)
        return 0;
    e->greply.cap = 4096;
    e->greply.p = malloc(e->greply.cap);
    e->gcurl = curl_easy_init();
    e->gheaders = vigil_etcd__grpc_headers(e);
    if (!e->greply.p || !e->gcurl || !e->gheaders)
        return -ENOMEM;
    CURL *c = e->gcurl;
    vigil_etcd__curl_setup(c, e->connect_ms);
    vigil_etcd__curl_tls(e, c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, vigil_etcd__on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &e->greply);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, vigil_etcd__grpc_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &e->grpc);
    /* libcurl 7.88's HTTP/2 leaves the rest of a reply longer than its
     * read buffer (16 KiB) unread until its next 1 s poll (a group's txn
     * of 100 members waited 1 s a round): the buffer at libcurl's largest,
     * touched only as far as a reply fills it. */
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->gheaders);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, e->curl_err);
    return 0;
}

int vigil_etcd__grpc_headers_reset(vigil_etcd *e)
{
    if (!e->gcurl)
        return 0;
    struct curl_slist *h = vigil_etcd__grpc_headers(e);
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(e->gcurl, CURLOPT_HTTPHEADER, h);
    curl_slist_free_all(e->gheaders);
    e->gheaders = h;
    return 0;
}

void vigil_etcd__grpc_close(vigil_etcd *e)
{
    if (e->gcurl)
        curl_easy_cleanup(e->gcurl);
    curl_slist_free_all(e->gheaders);
    free(e->greply.p);
}

unsigned long vigil_etcd__grpc_answered(vigil_etcd *e)
{
    vigil_etcd__lock(e);
    unsigned long n = e->grpc_answers;
    vigil_etcd__unlock(e);
    return n;
}
