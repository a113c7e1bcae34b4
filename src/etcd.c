/* SPDX-License-Identifier: MIT */
/*
 * The etcd adapter: vigil's lease API across hosts on etcd v3, spoken
 * through etcd's JSON gateway (grpc-gateway) with libcurl; replies are read
 * with cJSON.
 *
 * What vigil keeps in etcd. There is no vigil file here: these are etcd's
 * own records, and this table is the layout a peer must agree on.
 *
 *   record        field             meaning
 *   key <key>     value             the owner string, as given (0..63 bytes)
 *                 lease             the lease granted for this acquisition
 *                 create_revision   the fencing token: etcd's revision only
 *                                   rises, and a key deleted and created
 *                                   again gets a new, greater one
 *   lease <ID>    TTL               whole seconds, ceil(ttl_ms / 1000),
 *                                   raised by etcd to its minimum (2 s by
 *                                   default); vigil_lease.ttl_ms is the TTL
 *                                   etcd granted, in ms
 *
 * The gateway speaks JSON over HTTP POST; bytes fields (key, value) are
 * base64 and int64 fields are JSON strings; proto3 omits fields that are
 * zero or false. Requests, P being the gateway prefix (/v3/ on etcd 3.4
 * and later, /v3beta/ on 3.3, /v3alpha/ on 3.2, found per endpoint: a 404
 * without JSON moves an endpoint to the next prefix):
 *
 *   acquire  P lease/grant {"TTL": s}                       -> ID, TTL
 *            P kv/txn  if create_revision(key) == 0
 *                      then put(key, owner, lease ID); range(key)
 *                      else range(key)
 *            The range tells who holds the key: our lease (the put took,
 *            perhaps on an attempt whose reply was lost) gives the token,
 *            another lease VIGIL_EBUSY. On anything but success our lease
 *            is revoked, so nothing granted by this call outlives it.
 *   renew    P lease/keepalive {"ID"}    -> TTL > 0; TTL 0 or absent: lost
 *            P kv/txn  if create_revision(key) == token && lease(key) == ID
 *            A live lease alone does not prove the key is ours: someone may
 *            have deleted it and taken it under a lease of their own.
 *   release  P kv/txn  if create_revision(key) == token && lease(key) == ID
 *            P lease/revoke {"ID"}, whatever the txn said: the lease is ours.
 *            The revoke deletes the keys attached to the lease, so the key
 *            goes only if it is still ours; lost if the check failed or the
 *            lease was gone by the revoke.
 *
 * Endpoints are tried in turn, starting with the last one that answered; an
 * endpoint is passed over on a transport failure, a 5xx without JSON, or
 * etcd's Unavailable / DeadlineExceeded. When none answers, the last such
 * failure is the result: a transient -errno, never VIGIL_ELOST.
 *
 * One handle is shared by the caller and its keepalive thread, so every
 * call holds the handle's mutex for all of its requests: a renewal never
 * interleaves with a release on the same connection.
 */
#define _GNU_SOURCE
#include "etcd_internal.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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
    unsigned           prefix[VIGIL_ETCD_MAX_ENDPOINTS];
    char               urls[VIGIL_ETCD_MAX_ENDPOINTS][VIGIL_ETCD_URL_MAX];
};

/* ---- base64 and endpoints ------------------------------------------------ */

int vigil_etcd__b64(const void *in, size_t n, char *out, size_t cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = in;
    if (n > (size_t)INT_MAX / 4 * 3 - 3)
        return VIGIL_ERANGE;
    size_t need = (n + 2) / 3 * 4;
    if (!out || need >= cap)
        return VIGIL_ERANGE;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = tab[(v >> 6) & 63];
        *o++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = tab[v >> 18];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return (int)need;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int vigil_etcd__parse_endpoints(const char *spec, char (*urls)[VIGIL_ETCD_URL_MAX],
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
        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        if (a == b)
            continue;
        for (const char *q = a; q < b; q++)
            if ((unsigned char)*q <= ' ' || *q == 0x7f || *q == '?' || *q == '#')
                return -EINVAL;
        const char *host = a, *scheme = "http://";
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

/* ---- reading replies ------------------------------------------------------ */

int vigil_etcd__grpc_error(int code, bool lease_op)
{
    switch (code) {
    case 1:  return -ECANCELED;
    case 3:  return -EINVAL;
    case 4:  return -ETIMEDOUT;
    case 5:  return lease_op ? VIGIL_ELOST : -ENOENT;
    case 6:  return -EEXIST;
    case 7:
    case 16: return -EACCES;
    case 8:                 /* ResourceExhausted: too many requests */
    case 10:                /* Aborted */
    case 14: return -EAGAIN; /* Unavailable: no leader, leader changed, stopping */
    case 11: return VIGIL_ERANGE;
    case 12: return -ENOSYS;
    default: return -EIO;    /* Unknown, FailedPrecondition, Internal, DataLoss, nonsense */
    }
}

static const cJSON *field(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* An int64 field. The gateway writes them as strings; a JSON number is
 * taken too while it is an exact integer. 1 found, 0 absent (proto3 omits
 * zero), -EPROTO malformed. */
static int json_i64(const cJSON *obj, const char *name, int64_t *out)
{
    const cJSON *v = field(obj, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsString(v) && v->valuestring) {
        const char *s = v->valuestring;
        bool neg = *s == '-';
        s += neg;
        if (!*s)
            return -EPROTO;
        uint64_t acc = 0;
        for (; *s; s++) {
            if (*s < '0' || *s > '9')
                return -EPROTO;
            unsigned d = (unsigned)(*s - '0');
            if (acc > (UINT64_MAX - d) / 10)
                return -EPROTO;
            acc = acc * 10 + d;
        }
        if (acc > (uint64_t)INT64_MAX + neg)
            return -EPROTO;
        *out = neg ? (acc ? -(int64_t)(acc - 1) - 1 : 0) : (int64_t)acc;
        return 1;
    }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* The range test comes first and is false for NaN, so the cast
         * below only ever sees a value an int64 holds. */
        if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
            return -EPROTO;
        *out = (int64_t)d;
        return 1;
    }
    return -EPROTO;
}

/* etcd's error replies: {"error": "msg", "code": N, "message": "msg"} from
 * unary calls, {"error": {"grpc_code": N, "message": "msg", ...}} from the
 * streaming keepalive of older gateways. */
static bool json_error(const cJSON *root, int *code, const char **msg)
{
    const cJSON *err = field(root, "error");
    if (!err || cJSON_IsNull(err))
        return false;
    const cJSON *c, *m;
    if (cJSON_IsObject(err)) {
        c = field(err, "grpc_code");
        m = field(err, "message");
    } else {
        c = field(root, "code");
        m = cJSON_IsString(err) ? err : field(root, "message");
    }
    *code = 2; /* Unknown, unless it says */
    if (cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble <= 16)
        *code = (int)c->valuedouble;
    *msg = cJSON_IsString(m) && m->valuestring ? m->valuestring : "";
    return true;
}

/* The body as one JSON value and nothing after it but white space. */
static cJSON *parse_whole(const char *body, size_t len)
{
    const char *end = NULL;
    cJSON *r = body && len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    if (!r)
        return NULL;
    for (; end && end < body + len; end++) {
        if (!is_space(*end)) {
            cJSON_Delete(r);
            return NULL;
        }
    }
    return r;
}

/* 0 and *root (an object, to be deleted by the caller) for a 2xx JSON reply
 * that is not an error; otherwise the error's vigil result. */
static int reply_open(long http, const char *body, size_t len, bool lease_op, cJSON **root)
{
    *root = NULL;
    cJSON *r = parse_whole(body, len);
    if (!r)
        return -EPROTO;
    if (!cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return -EPROTO;
    }
    int code;
    const char *msg;
    if (json_error(r, &code, &msg)) {
        int rc = code == 0 ? -EPROTO : vigil_etcd__grpc_error(code, lease_op);
        if (lease_op && strstr(msg, "lease not found"))
            rc = VIGIL_ELOST;
        cJSON_Delete(r);
        return rc;
    }
    if (http < 200 || http > 299) {
        cJSON_Delete(r);
        return -EPROTO;
    }
    *root = r;
    return 0;
}

int vigil_etcd__parse_grant(long http, const char *body, size_t len, int64_t *id, int64_t *ttl)
{
    cJSON *r;
    int rc = reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    int64_t i = 0, t = 0;
    if (json_i64(r, "ID", &i) != 1 || json_i64(r, "TTL", &t) != 1 || i <= 0 || t <= 0 ||
        t > VIGIL_ETCD_MAX_TTL_S)
        rc = -EPROTO;
    cJSON_Delete(r);
    if (rc == 0) {
        *id = i;
        *ttl = t;
    }
    return rc;
}

/* The first key of the first range response in a txn reply, or NULL. */
static const cJSON *txn_range_kv(const cJSON *r)
{
    const cJSON *resps = field(r, "responses"), *op;
    if (!cJSON_IsArray(resps))
        return NULL;
    cJSON_ArrayForEach(op, resps) {
        const cJSON *kvs = field(field(op, "response_range"), "kvs");
        if (cJSON_IsArray(kvs))
            return cJSON_IsObject(kvs->child) ? kvs->child : NULL;
    }
    return NULL;
}

/* "succeeded": absent (proto3's false), true or false; anything else -EPROTO.
 * A txn reply always has a header: without one it is not etcd's. */
static int txn_succeeded(const cJSON *r, bool *out)
{
    const cJSON *s = field(r, "succeeded");
    if (!cJSON_IsObject(field(r, "header")) || (s && !cJSON_IsBool(s)))
        return -EPROTO;
    *out = cJSON_IsTrue(s);
    return 0;
}

int vigil_etcd__parse_acquire(long http, const char *body, size_t len, int64_t lease_id, uint64_t *token)
{
    cJSON *r;
    int rc = reply_open(http, body, len, false, &r);
    if (rc)
        /* NotFound here is our own lease, lapsed between grant and put: the
         * server was too slow to keep it, which is a transient failure. */
        return rc == -ENOENT ? -ETIMEDOUT : rc;
    bool won = false;
    int64_t lease = 0, rev = 0;
    const cJSON *kv;
    if ((rc = txn_succeeded(r, &won)) < 0)
        goto out;
    kv = txn_range_kv(r);
    if (!kv || json_i64(kv, "lease", &lease) < 0 || json_i64(kv, "create_revision", &rev) != 1 ||
        rev <= 0) {
        /* The range runs in the same transaction as the comparison: the key
         * existed (failure) or was just put (success), so it must be there. */
        rc = -EPROTO;
        goto out;
    }
    if (lease == lease_id)
        rc = 0; /* ours: this put, or an earlier attempt's whose reply was lost */
    else
        rc = won ? -EPROTO : VIGIL_EBUSY;
out:
    cJSON_Delete(r);
    if (rc == 0)
        *token = (uint64_t)rev;
    return rc;
}

int vigil_etcd__parse_keepalive(long http, const char *body, size_t len, int64_t lease_id, int64_t *ttl)
{
    cJSON *r;
    int rc = reply_open(http, body, len, true, &r);
    if (rc)
        return rc;
    const cJSON *res = field(r, "result");
    int64_t id = 0, t = 0;
    int tr;
    /* etcd answers a keepalive of an expired or revoked lease with its ID
     * and no TTL (proto3's zero): that, and only a reply that names our
     * lease, is a refusal. */
    if (!cJSON_IsObject(res) || json_i64(res, "ID", &id) != 1 || id != lease_id ||
        (tr = json_i64(res, "TTL", &t)) < 0)
        rc = -EPROTO;
    else if (tr == 0 || t <= 0)
        rc = VIGIL_ELOST;
    cJSON_Delete(r);
    if (rc == 0)
        *ttl = t;
    return rc;
}

int vigil_etcd__parse_txn(long http, const char *body, size_t len, bool *succeeded)
{
    cJSON *r;
    int rc = reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    bool s = false;
    rc = txn_succeeded(r, &s);
    cJSON_Delete(r);
    if (rc == 0)
        *succeeded = s;
    return rc;
}

int vigil_etcd__parse_revoke(long http, const char *body, size_t len)
{
    cJSON *r;
    int rc = reply_open(http, body, len, true, &r);
    if (rc)
        return rc;
    if (!cJSON_IsObject(field(r, "header")))
        rc = -EPROTO;
    cJSON_Delete(r);
    return rc;
}

/* ---- transport ------------------------------------------------------------ */

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

enum { ANSWERED = 0, NO_GATEWAY = 1 };

/* Whether a reply is this endpoint's answer (ANSWERED), says there is no
 * gateway under this prefix (NO_GATEWAY), or says the endpoint cannot
 * serve now (< 0: try the next one). */
static int classify(long http, const char *body, size_t len)
{
    bool maybe_error = http < 200 || http > 299 || memmem(body, len, "error", 5);
    if (!maybe_error)
        return ANSWERED;
    cJSON *r = parse_whole(body, len);
    int rc = ANSWERED, code;
    const char *msg;
    if (!cJSON_IsObject(r)) {
        if (http == 404)
            rc = NO_GATEWAY;
        else if (http >= 500)
            rc = -EAGAIN; /* a proxy's or a dying server's page */
    } else if (json_error(r, &code, &msg) && (code == 14 || code == 4)) {
        rc = vigil_etcd__grpc_error(code, false);
    }
    cJSON_Delete(r);
    return rc;
}

static int request_locked(vigil_etcd *e, const char *path, const char *body, long *http)
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
            int c = classify(code, e->reply.p, e->reply.len);
            if (c == NO_GATEWAY && gateway) {
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
            *http = code;
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
    pthread_mutex_lock(&e->lock);
    int rc = request_locked(e, path, body, http);
    if (rc == 0) {
        *reply = e->reply.p;
        *len = e->reply.len;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

const char *vigil_etcd__current_endpoint(vigil_etcd *e)
{
    return e ? e->urls[e->cur] : NULL;
}

/* ---- the lease API --------------------------------------------------------- */

int vigil_etcd_connect(const char *endpoints, vigil_etcd **out)
{
    if (!endpoints || !out)
        return -EINVAL;
    vigil_etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    int rc = vigil_etcd__parse_endpoints(endpoints, e->urls, VIGIL_ETCD_MAX_ENDPOINTS, &e->n);
    if (rc < 0) {
        free(e);
        return rc;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        free(e);
        return -ENOMEM;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    e->headers = h2 ? h2 : h;
    e->reply.cap = 4096;
    e->reply.p = malloc(e->reply.cap);
    e->curl = curl_easy_init();
    if (!h2 || !e->reply.p || !e->curl || pthread_mutex_init(&e->lock, NULL) != 0) {
        if (e->curl)
            curl_easy_cleanup(e->curl);
        curl_slist_free_all(e->headers);
        free(e->reply.p);
        free(e);
        return -ENOMEM;
    }
    CURL *c = e->curl;
    /* NOSIGNAL: renewals run in the keepalive thread, where curl must not
     * use alarm() for its timeouts. No proxy: etcd is spoken to directly,
     * whatever http_proxy says. Only http and https, and no redirects. */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &e->reply);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS_DEFAULT);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)TOTAL_MS_DEFAULT);
    *out = e;
    return 0;
}

void vigil_etcd_close(vigil_etcd *e)
{
    if (!e)
        return;
    curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    free(e->reply.p);
    pthread_mutex_destroy(&e->lock);
    free(e);
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
    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, tm);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

/* The comparisons that say a key is still this lease's: created at the
 * token's revision (not deleted and created again since) and carrying our
 * lease. */
static int held_compare(char *buf, size_t cap, const vigil_lease *l)
{
    char kb[192];
    if (vigil_etcd__b64(l->key, strlen(l->key), kb, sizeof(kb)) < 0)
        return VIGIL_ERANGE;
    int n = snprintf(buf, cap,
                     "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                     "\"create_revision\":\"%" PRIu64 "\"},{\"key\":\"%s\",\"target\":\"LEASE\","
                     "\"result\":\"EQUAL\",\"lease\":\"%" PRId64 "\"}]}",
                     kb, l->token, kb, l->id);
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

static int lease_check(const vigil_lease *l)
{
    if (!l)
        return -EINVAL;
    size_t k = strnlen(l->key, sizeof(l->key));
    if (k == 0 || k == sizeof(l->key) || l->id <= 0 || l->token == 0 || l->token > INT64_MAX)
        return VIGIL_ERANGE;
    return 0;
}

/* Renew and release begin alike: the lease checked, then e's lock taken
 * for all of their requests. 0 with the lock held, or the error without. */
static int lease_op_begin(vigil_etcd *e, const vigil_lease *lease)
{
    if (!e)
        return -EINVAL;
    int rc = lease_check(lease);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->lock);
    return 0;
}

/* With e's lock held: is the key still this lease's? (The txn of renew
 * and release.) */
static int held_locked(vigil_etcd *e, const vigil_lease *lease, bool *held)
{
    char body[2048];
    long http;
    int rc = held_compare(body, sizeof(body), lease);
    if (rc == 0 && (rc = request_locked(e, "v3/kv/txn", body, &http)) == 0)
        rc = vigil_etcd__parse_txn(http, e->reply.p, e->reply.len, held);
    return rc;
}

static int revoke_locked(vigil_etcd *e, int64_t id)
{
    char body[64];
    long http;
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
    int rc = request_locked(e, "v3/lease/revoke", body, &http);
    return rc < 0 ? rc : vigil_etcd__parse_revoke(http, e->reply.p, e->reply.len);
}

int vigil_etcd_acquire(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out)
{
    if (!e || !key || !owner || !out)
        return -EINVAL;
    size_t kl = strlen(key), ol = strlen(owner);
    if (kl == 0 || kl >= sizeof(out->key) || ol >= sizeof(out->owner) || ttl_ms == 0)
        return VIGIL_ERANGE;
    uint64_t secs = ttl_ms / 1000 + (ttl_ms % 1000 != 0);
    if (secs > VIGIL_ETCD_MAX_TTL_S)
        return VIGIL_ERANGE;
    char kb[192], vb[96], body[2048];
    vigil_etcd__b64(key, kl, kb, sizeof(kb));
    vigil_etcd__b64(owner, ol, vb, sizeof(vb));

    pthread_mutex_lock(&e->lock);
    long http;
    int64_t id = 0, granted = 0;
    uint64_t token = 0;
    snprintf(body, sizeof(body), "{\"TTL\":\"%" PRIu64 "\"}", secs);
    int rc = request_locked(e, "v3/lease/grant", body, &http);
    if (rc == 0)
        rc = vigil_etcd__parse_grant(http, e->reply.p, e->reply.len, &id, &granted);
    if (rc < 0)
        goto out;
    snprintf(body, sizeof(body),
             "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
             "\"create_revision\":\"0\"}],"
             "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}},"
             "{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}}],"
             "\"failure\":[{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}}]}",
             kb, kb, vb, id, kb, kb);
    rc = request_locked(e, "v3/kv/txn", body, &http);
    if (rc == 0)
        rc = vigil_etcd__parse_acquire(http, e->reply.p, e->reply.len, id, &token);
    if (rc < 0) {
        /* Held by another, or we cannot tell: the lease we granted goes, and
         * with it the key if our put took after all. If the revoke fails too,
         * the lease lapses on its own within its TTL, never renewed. */
        (void)revoke_locked(e, id);
        goto out;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, kl);
    memcpy(out->owner, owner, ol);
    out->token = token;
    out->ttl_ms = (uint64_t)granted * 1000;
    out->id = id;
out:
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int vigil_etcd_renew(vigil_etcd *e, const vigil_lease *lease)
{
    int rc = lease_op_begin(e, lease);
    if (rc < 0)
        return rc;
    char body[64];
    long http;
    int64_t ttl;
    bool held = false;
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", lease->id);
    rc = request_locked(e, "v3/lease/keepalive", body, &http);
    if (rc == 0)
        rc = vigil_etcd__parse_keepalive(http, e->reply.p, e->reply.len, lease->id, &ttl);
    /* The lease lives on; the check says the key still hangs on it. */
    if (rc == 0 && (rc = held_locked(e, lease, &held)) == 0 && !held)
        rc = VIGIL_ELOST;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int vigil_etcd_release(vigil_etcd *e, const vigil_lease *lease)
{
    int rc = lease_op_begin(e, lease);
    if (rc < 0)
        return rc;
    bool held = false;
    rc = held_locked(e, lease, &held);
    if (rc == 0) {
        /* Ours or not, the lease is: revoke it. Revoking deletes exactly
         * the keys attached to the lease, so it deletes ours when the check
         * held and never a key someone has taken since (theirs hangs on
         * their own lease): one write where a guarded delete and a revoke
         * would take two. */
        int rv = revoke_locked(e, lease->id);
        if (!held || rv == VIGIL_ELOST)
            rc = VIGIL_ELOST; /* not ours, or lapsed between check and revoke */
        else if (rv < 0)
            rc = rv; /* the key is still there and ours: the caller may retry */
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

static int port_renew(void *ctx, const vigil_lease *lease)
{
    return vigil_etcd_renew(ctx, lease);
}

vigil_lease_port vigil_etcd_port(vigil_etcd *e)
{
    vigil_lease_port p = { .ctx = e, .renew = port_renew };
    return p;
}
