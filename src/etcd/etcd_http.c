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
 * failure is the result: a transient -errno, never VIGIL_ELOST.
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
#include "etcd_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONNECT_MS_DEFAULT 1000
#define TOTAL_MS_DEFAULT   3000

static const char *const gateway_prefix[] = { "/v3/", "/v3beta/", "/v3alpha/" };
#define NPREFIX (sizeof(gateway_prefix) / sizeof(gateway_prefix[0]))

struct reply_buf {
    char  *p;
    size_t len, cap;
    int    err; /* why the write callback refused: -EMSGSIZE or -ENOMEM */
};

struct vigil_etcd {
    pthread_mutex_t    lock; /* held for the whole of each call: one request at a time */
    CURL              *curl;
    struct curl_slist *headers;
    struct reply_buf   reply;
    unsigned           n, cur; /* endpoints, and the one to try first */
    long               connect_ms; /* for the watch streams' own connections */
    unsigned           prefix[VIGIL_ETCD_MAX_ENDPOINTS];
    char               urls[VIGIL_ETCD_MAX_ENDPOINTS][VIGIL_ETCD_URL_MAX];
    /* The connection options, copied (vigil_etcd_connect_opts): the TLS
     * files for every connection, the watch streams' too. */
    char              *cacert, *cert, *key;
};

/* ---- endpoints ----------------------------------------------------------- */

int vigil_etcd__parse_endpoints(const char *spec, char (*urls)[VIGIL_ETCD_URL_MAX],
                                unsigned max, unsigned *n)
{
    return vigil_etcd__parse_endpoints_as(spec, false, urls, max, n);
}

int vigil_etcd__parse_endpoints_as(const char *spec, bool tls, char (*urls)[VIGIL_ETCD_URL_MAX],
                                   unsigned max, unsigned *n)
{
    if (!spec || !urls || !n)
        return -EINVAL;
    unsigned count = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        p = *end ? end + 1 : end;
        while (a < b && vigil_etcd__is_space(*a))
            a++;
        while (b > a && vigil_etcd__is_space(b[-1]))
            b--;
        if (a == b)
            continue;
        for (const char *q = a; q < b; q++)
            if ((unsigned char)*q <= ' ' || *q == 0x7f || *q == '?' || *q == '#')
                return -EINVAL;
        const char *host = a, *scheme = tls ? "https://" : "http://";
        for (const char *q = a; q + 3 <= b; q++) {
            if (memcmp(q, "://", 3) == 0) {
                size_t sl = (size_t)(q - a);
                if (!((sl == 4 && strncasecmp(a, "http", 4) == 0) ||
                      (sl == 5 && strncasecmp(a, "https", 5) == 0)))
                    return -EINVAL;
                host = q + 3;
                scheme = "";
                break;
            }
            if (*q == '/' || *q == ':')
                break; /* no scheme: the first ':' is the port's */
        }
        while (b > host && b[-1] == '/')
            b--;
        if (host == b || *host == '/' || *host == ':')
            return -EINVAL;
        if (count == max)
            return VIGIL_ERANGE;
        size_t sl = strlen(scheme), len = (size_t)(b - a);
        if (sl + len >= VIGIL_ETCD_URL_MAX)
            return VIGIL_ERANGE;
        memcpy(urls[count], scheme, sl);
        memcpy(urls[count] + sl, a, len);
        urls[count][sl + len] = '\0';
        count++;
    }
    if (count == 0)
        return -EINVAL;
    *n = count;
    return 0;
}

/* ---- one transfer -------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct reply_buf *b = arg;
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

static int curl_result(vigil_etcd *e, CURLcode c)
{
    long os = 0;
    if (curl_easy_getinfo(e->curl, CURLINFO_OS_ERRNO, &os) != CURLE_OK || os <= 0 || os >= 4096)
        os = 0;
    switch (c) {
    case CURLE_OPERATION_TIMEDOUT:    return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:       return os ? (int)-os : -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY:         return -ENOMEM;
    case CURLE_WRITE_ERROR:           return e->reply.err ? e->reply.err : -EIO;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:          return os ? (int)-os : -ECONNRESET;
    case CURLE_URL_MALFORMAT:         return -EINVAL;
    case CURLE_UNSUPPORTED_PROTOCOL:  /* the scheme was checked: this is a reply that is not HTTP */
    case CURLE_WEIRD_SERVER_REPLY:    return -EPROTO;
    default:                          return os ? (int)-os : -EIO;
    }
}

static int transfer(vigil_etcd *e, const char *url, const char *body, long *http)
{
    e->reply.len = 0;
    e->reply.err = 0;
    e->reply.p[0] = '\0';
    curl_easy_setopt(e->curl, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(e->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(e->curl, CURLOPT_HTTPGET, 1L);
    }
    CURLcode c = curl_easy_perform(e->curl);
    if (c != CURLE_OK)
        return curl_result(e, c);
    long code = 0;
    curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
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

void vigil_etcd__unlock(vigil_etcd *e)
{
    pthread_mutex_unlock(&e->lock);
}

int vigil_etcd__call(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r)
{
    bool gateway = strncmp(path, "v3/", 3) == 0;
    int rc = -EHOSTUNREACH;
    for (unsigned k = 0; k < e->n; k++) {
        unsigned i = (e->cur + k) % e->n;
        for (;;) {
            char url[VIGIL_ETCD_URL_MAX + 64];
            if (gateway)
                snprintf(url, sizeof(url), "%s%s%s", e->urls[i], gateway_prefix[e->prefix[i]], path + 3);
            else
                snprintf(url, sizeof(url), "%s/%s", e->urls[i], path);
            long code = 0;
            rc = transfer(e, url, body, &code);
            if (rc < 0)
                break;
            int c = vigil_etcd__classify(code, e->reply.p, e->reply.len);
            if (c == VIGIL_ETCD_NO_GATEWAY && gateway) {
                if (++e->prefix[i] < NPREFIX)
                    continue;
                e->prefix[i] = 0; /* start over next time: the server may change */
                rc = -EPROTONOSUPPORT;
                break;
            }
            if (c < 0) {
                rc = c;
                break;
            }
            e->cur = i;
            *r = (struct vigil_etcd_reply){ .http = code, .body = e->reply.p, .len = e->reply.len };
            return 0;
        }
    }
    return rc;
}

int vigil_etcd__request(vigil_etcd *e, const char *path, const char *body,
                        long *http, const char **reply, size_t *len)
{
    if (!e || !path || !http || !reply || !len)
        return -EINVAL;
    struct vigil_etcd_reply r;
    vigil_etcd__lock(e);
    int rc = vigil_etcd__call(e, path, body, &r);
    if (rc == 0) {
        *http = r.http;
        *reply = r.body;
        *len = r.len;
    }
    vigil_etcd__unlock(e);
    return rc;
}

int vigil_etcd__url(vigil_etcd *e, const char *path, char *url, size_t cap, long *connect_ms)
{
    if (strncmp(path, "v3/", 3) != 0)
        return -EINVAL;
    vigil_etcd__lock(e);
    int n = snprintf(url, cap, "%s%s%s", e->urls[e->cur], gateway_prefix[e->prefix[e->cur]], path + 3);
    *connect_ms = e->connect_ms;
    vigil_etcd__unlock(e);
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

const char *vigil_etcd__current_endpoint(vigil_etcd *e)
{
    return e ? e->urls[e->cur] : NULL;
}

/* ---- the handle ---------------------------------------------------------- */

static void free_handle(vigil_etcd *e)
{
    if (e->curl)
        curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    free(e->reply.p);
    free(e->cacert);
    free(e->cert);
    free(e->key);
    free(e);
}

/* A copy of an option's string: 0 (NULL or "" stays NULL), or -ENOMEM. */
static int copy_opt(const char *s, char **out)
{
    *out = NULL;
    if (!s || !*s)
        return 0;
    return (*out = strdup(s)) ? 0 : -ENOMEM;
}

int vigil_etcd_connect(const char *endpoints, vigil_etcd **out)
{
    return vigil_etcd_connect_opts(endpoints, NULL, out);
}

int vigil_etcd_connect_opts(const char *endpoints, const struct vigil_etcd_options *opts, vigil_etcd **out)
{
    static const struct vigil_etcd_options none;
    if (!endpoints || !out)
        return -EINVAL;
    const struct vigil_etcd_options *o = opts ? opts : &none;
    if ((o->user && *o->user) || (o->namespace && *o->namespace))
        return -ENOTSUP; /* authentication and namespaces: not yet */
    if (o->password && *o->password && !(o->user && *o->user))
        return -EINVAL; /* a password without a user */
    vigil_etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    /* A bare host:port is https:// when TLS files are given, as etcdctl
     * takes it. */
    bool tls = (o->cacert && *o->cacert) || (o->cert && *o->cert);
    int rc = vigil_etcd__parse_endpoints_as(endpoints, tls, e->urls, VIGIL_ETCD_MAX_ENDPOINTS, &e->n);
    if (rc == 0 && (o->key && *o->key) && !(o->cert && *o->cert))
        rc = -EINVAL; /* a key without its certificate */
    if (rc == 0 && ((rc = copy_opt(o->cacert, &e->cacert)) < 0 || (rc = copy_opt(o->cert, &e->cert)) < 0 ||
                    (rc = copy_opt(o->key, &e->key)) < 0))
        rc = -ENOMEM;
    if (rc < 0) {
        free_handle(e);
        return rc;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        free_handle(e);
        return -ENOMEM;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    e->headers = h2 ? h2 : h;
    e->reply.cap = 4096;
    e->reply.p = malloc(e->reply.cap);
    e->curl = curl_easy_init();
    if (!h2)
        curl_slist_free_all(h);
    if (!h2 || !e->reply.p || !e->curl || pthread_mutex_init(&e->lock, NULL) != 0) {
        free_handle(e);
        return -ENOMEM;
    }
    CURL *c = e->curl;
    vigil_etcd__curl_setup(c, CONNECT_MS_DEFAULT);
    vigil_etcd__curl_tls(e, c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &e->reply);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
    e->connect_ms = CONNECT_MS_DEFAULT;
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)TOTAL_MS_DEFAULT);
    if (o->dial_timeout_ms || o->request_timeout_ms)
        vigil_etcd_set_timeout(e, o->dial_timeout_ms, o->request_timeout_ms);
    *out = e;
    return 0;
}

void vigil_etcd_close(vigil_etcd *e)
{
    if (!e)
        return;
    pthread_mutex_destroy(&e->lock);
    free_handle(e);
}

int vigil_etcd_set_timeout(vigil_etcd *e, uint32_t connect_ms, uint32_t total_ms)
{
    if (!e)
        return -EINVAL;
    long cm = connect_ms ? (long)connect_ms : CONNECT_MS_DEFAULT;
    long tm = total_ms ? (long)total_ms : TOTAL_MS_DEFAULT;
    if (cm > tm)
        cm = tm;
    pthread_mutex_lock(&e->lock);
    curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, cm);
    e->connect_ms = cm;
    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, tm);
    pthread_mutex_unlock(&e->lock);
    return 0;
}
