/* SPDX-License-Identifier: MIT */
/*
 * The etcd adapter's connection: the endpoint list, one libcurl handle per
 * vigil_etcd, and the loop that sends a request to the endpoints in turn.
 * (What is stored in etcd, and the requests the lease operations make,
 * are told in etcd.c.)
 *
 * Endpoints are tried in turn, starting with the last one that answered; an
 * endpoint is passed over on a transport failure, a 5xx without JSON, or
 * etcd's Unavailable / DeadlineExceeded. When none answers, the last such
 * failure is the result: a transient -errno, never VIGIL_ELOST. A request
 * passed over after it may have reached a member (maybe_applied: a
 * transport failure past the connection, or an answer of Unavailable,
 * DeadlineExceeded or a 5xx page, which a member gives for a request it
 * proposed and stopped waiting for) may still be applied there, late,
 * after the copy sent on: that is safe only because every write vigil
 * sends is idempotent by construction or fenced
 * (group_fence.c, THE RULE), and the callers learn of it to resolve their
 * write before telling theirs (greply.doubt, revoke_unsure). Every
 * request carries require-leader (a member cut off from the leader says
 * Unavailable at once, and the next is tried) and, with a user, the auth
 * token (etcd_handle.c).
 *
 * Each attempt is bounded by the handle's limits and by those of the
 * lock's holder (vigil_etcd__lock_until): a wait's deadline, past which
 * nothing is sent and what is under way is cut short (VIGIL_ETIMEDOUT),
 * and a shorter bound per attempt, so that a member that hangs costs a
 * waiter little before the next one answers.
 *
 * Each endpoint finds its own gateway prefix (/v3/ on etcd 3.4 and later,
 * /v3beta/ on 3.3, /v3alpha/ on 3.2): a 404 without JSON moves it to the
 * next one, and past the last it starts over at the next request.
 *
 * The handle's mutex is taken by each lease operation for all of its
 * requests (etcd.c): the caller and its keepalive thread share a handle,
 * and a renewal must never interleave with a release on the connection.
 * A reply stays in the handle's buffer until the next request.
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>


_Static_assert(sizeof(((vigil_etcd *)0)->curl_err) >= CURL_ERROR_SIZE, "libcurl's error buffer");

static const char *const gateway_prefix[] = { "/v3/", "/v3beta/", "/v3alpha/" };
#define NPREFIX (sizeof(gateway_prefix) / sizeof(gateway_prefix[0]))

/* ---- one transfer -------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

size_t vigil_etcd__on_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct vigil_etcd_reply_buf *b = arg;
    size_t n = size * nmemb; /* size is 1 by libcurl's contract */
    if (n > VIGIL_ETCD_BODY_MAX - b->len) {
        b->err = -EMSGSIZE;
        return 0; /* aborts the transfer */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->err = -ENOMEM;
            return 0;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* Did the server refuse our client certificate (or the lack of one)? An
 * OpenSSL alert about a certificate, in libcurl's words. */
static bool cert_refused(const char *detail)
{
    return detail && strstr(detail, "alert") &&
           (strstr(detail, "certificate") || strstr(detail, "unknown ca") || strstr(detail, "access denied"));
}

int vigil_etcd__curl_error(int code, long os, int write_err, const char *detail)
{
    CURLcode c = (CURLcode)code;
    if (os <= 0 || os >= 4096)
        os = 0;
    if (!detail || !*detail)
        detail = curl_easy_strerror(c);
    int rc;
    switch (c) {
    case CURLE_OPERATION_TIMEDOUT:    rc = -ETIMEDOUT; break;
    case CURLE_COULDNT_CONNECT:       rc = os ? (int)-os : -ECONNREFUSED; break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: rc = -EHOSTUNREACH; break;
    case CURLE_OUT_OF_MEMORY:         rc = -ENOMEM; break;
    case CURLE_WRITE_ERROR:           rc = write_err ? write_err : -EIO; break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        vigil_etcd__why("TLS: the server's certificate failed verification (%s)", detail);
        return VIGIL_ETLS;
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CRL_BADFILE:
        vigil_etcd__why("TLS: a certificate or key file cannot be used (%s)", detail);
        return -EINVAL;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
        if (cert_refused(detail)) {
            vigil_etcd__why("TLS: the server refused our client certificate (%s)", detail);
            return -EACCES;
        }
        if (c == CURLE_SSL_CONNECT_ERROR) {
            vigil_etcd__why("TLS handshake failed (%s)", detail);
            return -EPROTO;
        }
        rc = os ? (int)-os : -ECONNRESET;
        break;
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:          rc = os ? (int)-os : -ECONNRESET; break;
    case CURLE_URL_MALFORMAT:         rc = -EINVAL; break;
    case CURLE_UNSUPPORTED_PROTOCOL:  /* the scheme was checked: this is a reply that is not HTTP */
    case CURLE_WEIRD_SERVER_REPLY:    rc = -EPROTO; break;
    default:                          rc = os ? (int)-os : -EIO; break;
    }
    vigil_etcd__why("%s", detail);
    return rc;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A TLS connection that the server drops right after the handshake, when
 * we present no client certificate: with TLS 1.3 the server's refusal of
 * us comes after our request left, and libcurl often sees only the
 * closed connection. A handshake alone, capped at TLS 1.2 (where the
 * refusal is part of the handshake), says whether that was it: -EACCES
 * with the reason, or 0 (it was something else).
 */
static int tls_refuses_us(vigil_etcd *e, const char *url, long timeout_ms)
{
    if (e->cert || strncasecmp(url, "https://", 8) != 0)
        return 0;
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    char err[CURL_ERROR_SIZE] = "";
    vigil_etcd__curl_setup(c, timeout_ms);
    vigil_etcd__curl_tls(e, c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2));
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK && cert_refused(err)) {
        vigil_etcd__why("TLS: the server wants a client certificate (--cert/--key) and we gave none (%s)", err);
        return -EACCES;
    }
    return 0;
}

/* One attempt on one endpoint (ep), within the handle's limits and the
 * lock holder's: VIGIL_ETIMEDOUT when the holder's deadline cut it short.
 * In gRPC when m is given (VIGIL_ETCD_NOT_GRPC: the endpoint showed it
 * does not speak it), else through the gateway. */
static int transfer(vigil_etcd *e, unsigned ep, const struct vigil_etcd_grpc_method *m, const char *url,
                    const char *body, long *http)
{
    /* The holder's bound per attempt matters only where there is another
     * endpoint to turn to; with one, the handle's own limit stands. */
    long total = e->attempt_ms > 0 && e->attempt_ms < e->total_ms && e->n > 1 ? e->attempt_ms : e->total_ms;
    bool cut = false;
    if (e->deadline_ns != UINT64_MAX) {
        uint64_t now = now_ns();
        if (now >= e->deadline_ns)
            return VIGIL_ETIMEDOUT;
        uint64_t left = (e->deadline_ns - now + 999999) / 1000000;
        if (left < (uint64_t)total) {
            total = (long)left;
            cut = true;
        }
    }
    e->reply.len = 0;
    e->reply.err = 0;
    e->reply.p[0] = '\0';
    e->curl_err[0] = '\0';
    CURL *curl = m ? e->gcurl : e->curl;
    e->unsent = false;
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, total);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, e->connect_ms < total ? e->connect_ms : total);
    CURLcode c;
    int write_err = e->reply.err;
    if (m) {
        int cc = CURLE_OK;
        int rc = vigil_etcd__grpc_perform(e, ep, m, url, body, total, http, &cc);
        if (rc != VIGIL_ETCD_CURL_FAILED)
            return rc;
        c = (CURLcode)cc;
        write_err = e->greply.err;
    } else {
        curl_easy_setopt(curl, CURLOPT_URL, url);
        if (body) {
            curl_easy_setopt(curl, CURLOPT_POST, 1L);
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        } else {
            curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        }
        c = curl_easy_perform(curl);
        write_err = e->reply.err;
    }
    if (c != CURLE_OK) {
        if (c == CURLE_OPERATION_TIMEDOUT && cut && now_ns() >= e->deadline_ns) {
            vigil_etcd__why("%s: no answer before the deadline", url);
            return VIGIL_ETIMEDOUT;
        }
        long os = 0;
        if (e->unsent)
            os = e->unsent_os;
        else if (curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os) != CURLE_OK)
            os = 0;
        int rc = vigil_etcd__curl_error(c, os, write_err, e->curl_err);
        if ((c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR || c == CURLE_GOT_NOTHING) && rc != -EACCES &&
            tls_refuses_us(e, url, total) == -EACCES)
            rc = -EACCES;
        return rc;
    }
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    *http = code;
    return 0;
}

/* A socket of ours must not leak into a program the caller execs (vigil
 * lock's CMD): libcurl opens them without close-on-exec. */
static int on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg;
    (void)purpose;
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    return CURL_SOCKOPT_OK;
}

void vigil_etcd__curl_setup(void *curl, long connect_ms)
{
    CURL *c = curl;
    /* NOSIGNAL: renewals run in the keepalive thread, where curl must not
     * use alarm() for its timeouts. No proxy: etcd is spoken to directly,
     * whatever http_proxy says. Only http and https, and no redirects. */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
}

/* The TLS files of e's options on a curl handle of e's: the CA bundle that
 * verifies the servers (else the system's), the client certificate and
 * its key. */
void vigil_etcd__curl_tls(vigil_etcd *e, void *curl)
{
    CURL *c = curl;
    if (e->cacert)
        curl_easy_setopt(c, CURLOPT_CAINFO, e->cacert);
    if (e->cert)
        curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
    if (e->key)
        curl_easy_setopt(c, CURLOPT_SSLKEY, e->key);
}

/* ---- the request loop ---------------------------------------------------- */

void vigil_etcd__lock(vigil_etcd *e)
{
    pthread_mutex_lock(&e->lock);
}

void vigil_etcd__lock_until(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms)
{
    pthread_mutex_lock(&e->lock);
    vigil_etcd__bound(e, deadline_ns, attempt_ms);
}

void vigil_etcd__bound(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms)
{
    e->deadline_ns = deadline_ns;
    e->attempt_ms = (long)attempt_ms;
}

void vigil_etcd__unlock(vigil_etcd *e)
{
    e->deadline_ns = UINT64_MAX;
    e->attempt_ms = 0;
    pthread_mutex_unlock(&e->lock);
}

/* What an error reply said, kept for vigil_etcd_errmsg. */
static void note_error_reply(const struct vigil_etcd_reply *r)
{
    char msg[200];
    if (vigil_etcd__error_of(r->body, r->len, msg, sizeof(msg)) >= 0)
        vigil_etcd__why("etcd: %s", msg);
}

/* The endpoints in turn, from the last that answered. */
static int call_endpoints(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r)
{
    bool gateway = strncmp(path, "v3/", 3) == 0, electing = false;
    const struct vigil_etcd_grpc_method *m = gateway ? vigil_etcd__grpc_method(path) : NULL;
    int rc = -EHOSTUNREACH;
    int64_t sent = vigil_etcd__wall_ns(); /* an outage it finds began no later */
    e->maybe_applied = false;
    for (unsigned k = 0; k < e->n; k++) {
        unsigned i = (e->cur + k) % e->n;
        for (;;) {
            char url[VIGIL_ETCD_URL_MAX + 64];
            bool grpc = m && vigil_etcd__grpc_on(e, i);
            if (grpc)
                snprintf(url, sizeof(url), "%s%s", e->urls[i], m->grpc);
            else if (gateway)
                snprintf(url, sizeof(url), "%s%s%s", e->urls[i], gateway_prefix[e->prefix[i]], path + 3);
            else
                snprintf(url, sizeof(url), "%s/%s", e->urls[i], path);
            long code = 0;
            rc = transfer(e, i, grpc ? m : NULL, url, body, &code);
            if (rc == VIGIL_ETCD_NOT_GRPC) {
                /* Refused before any request reached etcd: no attempt
                 * failed, nothing may have applied. In auto the endpoint
                 * takes the gateway from now on. */
                if (e->mode == VIGIL_ETCD_TRANSPORT_AUTO) {
                    e->speaks[i] = VIGIL_ETCD_SPEAKS_GATEWAY;
                    continue;
                }
                char clean[512];
                vigil_etcd__why("%s: no etcd gRPC there (VIGIL_ETCD_TRANSPORT=grpc)",
                                vigil_etcd__redact(e->urls[i], clean, sizeof(clean)));
                rc = -EPROTONOSUPPORT;
                break;
            }
            if (rc < 0) {
                /* Refused or unresolved: it never left. Anything else may
                 * have been applied without our hearing of it. */
                if (rc != -ECONNREFUSED && rc != -EHOSTUNREACH && rc != -ENETUNREACH && rc != VIGIL_ETLS &&
                    rc != -EACCES && rc != -EINVAL && !e->unsent)
                    e->maybe_applied = true;
                break;
            }
            int c = vigil_etcd__classify(code, e->reply.p, e->reply.len);
            if (c == VIGIL_ETCD_NO_GATEWAY && gateway) {
                if (++e->prefix[i] < NPREFIX)
                    continue;
                e->prefix[i] = 0; /* start over next time: the server may change */
                char clean[512];
                vigil_etcd__why("%s: no etcd v3 gateway there", vigil_etcd__redact(e->urls[i], clean, sizeof(clean)));
                rc = -EPROTONOSUPPORT;
                break;
            }
            *r = (struct vigil_etcd_reply){ .http = code, .body = e->reply.p, .len = e->reply.len };
            if (c < 0) {
                /* Unavailable, DeadlineExceeded or a 5xx page: the member
                 * may have proposed it and given up waiting, and may still
                 * apply it; only "no leader" is said before any proposal
                 * (require-leader). */
                if (r->len == 0 || !memmem(r->body, r->len, "etcdserver: no leader", 21))
                    e->maybe_applied = true;
                note_error_reply(r);
                rc = c;
                electing = electing || c == -EAGAIN;
                break;
            }
            e->cur = i;
            vigil_etcd__health_answered(e);
            vigil_etcd__note_cluster(e, r->body, r->len);
            /* The last word: etcd's error, or none (an endpoint that
             * failed before this one answered is no reason any more). */
            vigil_etcd__why("%s", "");
            if (code < 200 || code > 299 || memmem(r->body, r->len, "\"error\"", 7))
                note_error_reply(r);
            if (code == 400 && memmem(r->body, r->len, "CommonName", 10) && !memchr(r->body, '{', r->len)) {
                /* etcd 3.4's gateway refuses a client certificate that has
                 * a CommonName while auth is enabled (the CN would bypass
                 * the password), in a line of plain text. */
                vigil_etcd__why("etcd's gateway refuses a client certificate with a CommonName while auth is "
                                "enabled: use one without (%.*s)", (int)(r->len < 120 ? r->len : 120), r->body);
                return -EACCES;
            }
            return 0;
        }
        if (rc == VIGIL_ETIMEDOUT || rc == VIGIL_ETLS) {
            vigil_etcd__health_failed(e, rc, e->urls[i], sent);
            return rc; /* the holder's time is up; or TLS, configured alike everywhere */
        }
        if (k + 1 == e->n)
            vigil_etcd__health_failed(e, rc, e->urls[i], sent); /* none answered */
    }
    /* A member that said Unavailable (no leader: an election under way)
     * beside one that refused the connection (the leader killed): the
     * election is the news, whichever was tried last; callers ride it
     * out (group_json.c). */
    if (electing && (rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETUNREACH))
        rc = -EAGAIN;
    return rc;
}

int vigil_etcd__call(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r)
{
    int rc = vigil_etcd__auth_ready(e);
    if (rc < 0)
        return rc;
    rc = call_endpoints(e, path, body, r);
    /* An auth token etcd no longer takes (expired, or from before a change
     * of the auth store): authenticate again, and once more the request.
     * A sending of the first round that may have landed still may. */
    if (rc == 0 && vigil_etcd__auth_refused(e, r)) {
        bool maybe = e->maybe_applied;
        if ((rc = vigil_etcd__authenticate(e)) == 0)
            rc = call_endpoints(e, path, body, r);
        e->maybe_applied = e->maybe_applied || maybe;
    }
    return rc;
}

int vigil_etcd__call_raw(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r)
{
    return call_endpoints(e, path, body, r);
}

int vigil_etcd__request(vigil_etcd *e, const char *path, const char *body,
                        long *http, const char **reply, size_t *len)
{
    if (!e || !path || !http || !reply || !len)
        return -EINVAL;
    /* The reply is copied out under the lock into this thread's buffer:
     * the handle's own buffer is reused by any thread's next call (a
     * keepalive's renewal, say) the moment the lock is dropped. */
    static _Thread_local char *copy;
    static _Thread_local size_t copy_cap;
    struct vigil_etcd_reply r;
    vigil_etcd__lock(e);
    int rc = vigil_etcd__call(e, path, body, &r);
    if (rc == 0 && r.len + 1 > copy_cap) {
        char *p = realloc(copy, r.len + 1);
        if (p) {
            copy = p;
            copy_cap = r.len + 1;
        } else {
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        memcpy(copy, r.body, r.len);
        copy[r.len] = '\0';
        *http = r.http;
        *reply = copy;
        *len = r.len;
    }
    vigil_etcd__unlock(e);
    return rc;
}

int vigil_etcd__gateway_url(const vigil_etcd *e, unsigned ep, const char *path, char *url, size_t cap)
{
    return snprintf(url, cap, "%s%s%s", e->urls[ep], gateway_prefix[e->prefix[ep]], path + 3);
}

unsigned vigil_etcd__endpoints(vigil_etcd *e, unsigned *cur)
{
    vigil_etcd__lock(e);
    unsigned n = e->n;
    if (cur)
        *cur = e->cur;
    vigil_etcd__unlock(e);
    return n;
}

const char *vigil_etcd__current_endpoint(vigil_etcd *e)
{
    return e ? e->urls[e->cur] : NULL;
}

/* ---- the handle's connection --------------------------------------------- */

int vigil_etcd__curl_open(vigil_etcd *e)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return -ENOMEM;
    e->reply.cap = 4096;
    e->reply.p = malloc(e->reply.cap);
    e->curl = curl_easy_init();
    e->headers = vigil_etcd__headers_make(e);
    if (!e->reply.p || !e->curl || !e->headers)
        return -ENOMEM;
    e->reply.p[0] = '\0';
    CURL *c = e->curl;
    vigil_etcd__curl_setup(c, e->connect_ms);
    vigil_etcd__curl_tls(e, c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, vigil_etcd__on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &e->reply);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, e->curl_err);
    return vigil_etcd__grpc_open(e);
}

void vigil_etcd__curl_close(vigil_etcd *e)
{
    vigil_etcd__grpc_close(e);
    if (e->curl)
        curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    free(e->reply.p);
}

void *vigil_etcd__headers_of(vigil_etcd *e, const char *const *fixed, size_t n, const char *token_name)
{
    char line[VIGIL_ETCD_TOKEN_MAX + 32];
    struct curl_slist *h = NULL, *next;
    for (size_t i = 0; i <= n; i++) {
        if (i == n && !e->token[0])
            break;
        if (i == n)
            snprintf(line, sizeof(line), "%s: %s", token_name, e->token);
        if (!(next = curl_slist_append(h, i < n ? fixed[i] : line))) {
            curl_slist_free_all(h);
            return NULL;
        }
        h = next;
    }
    return h;
}

void *vigil_etcd__headers_make(vigil_etcd *e)
{
    /* Require-leader, as clientv3's WithRequireLeader: a member cut off
     * from the leader refuses at once (Unavailable: the next endpoint is
     * tried) instead of serving a watch that will never fire. */
    static const char *const fixed[] = { "Content-Type: application/json", "Expect:",
                                         "Grpc-Metadata-hasleader: true" };
    return vigil_etcd__headers_of(e, fixed, sizeof(fixed) / sizeof(fixed[0]), "Authorization");
}

int vigil_etcd__headers_reset(vigil_etcd *e)
{
    struct curl_slist *h = vigil_etcd__headers_make(e);
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, h);
    curl_slist_free_all(e->headers);
    e->headers = h;
    return vigil_etcd__grpc_headers_reset(e);
}
