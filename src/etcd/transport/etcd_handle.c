/* SPDX-License-Identifier: MIT */
/*
 * A vigil_etcd handle: the endpoint list, the connection options
 * (vigil_etcd_connect_opts: TLS files, authentication, a namespace, the
 * timeouts), etcd's auth token, and why the last call failed. The
 * requests themselves go through etcd_http.c.
 *
 * Authentication is etcd's auth/authenticate, as clientv3 does it: the
 * user and password give a token, sent as the Authorization header on
 * every request and every watch. The first request of a handle with a
 * user authenticates; a request refused because etcd no longer takes the
 * token (it expired: --auth-token-ttl, or the auth store changed since)
 * authenticates again and is sent once more. A server without auth
 * enabled is spoken to without a token, as clientv3 does.
 *
 * The namespace is prepended to every key the adapter sends, as etcd's
 * namespace client (clientv3/namespace) and grpc-proxy --namespace do:
 * what vigil holds as KEY is NAMESPACE KEY in etcd.
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CONNECT_MS_DEFAULT 1000
#define TOTAL_MS_DEFAULT   3000

/* ---- why the last call failed (vigil_etcd_errmsg) -------------------------- */

static _Thread_local char errmsg[256];

const char *vigil_etcd_errmsg(void)
{
    return errmsg;
}

void vigil_etcd__why_save(char *saved, size_t cap)
{
    snprintf(saved, cap, "%s", errmsg);
}

void vigil_etcd__why_restore(const char *saved)
{
    snprintf(errmsg, sizeof(errmsg), "%s", saved);
}

void vigil_etcd__why(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
    va_end(ap);
    /* What a server said (grpc-message, the gateway's "message") may hold
     * terminal escapes: no control character reaches the caller's screen. */
    for (char *p = errmsg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

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

/* ---- authentication ------------------------------------------------------- */

int vigil_etcd__authenticate(vigil_etcd *e)
{
    char *body = vigil_etcd__body_auth(e->user, e->password);
    if (!body)
        return -ENOMEM;
    struct vigil_etcd_reply r;
    e->token[0] = '\0';
    e->auth_off = false;
    int rc = vigil_etcd__headers_reset(e); /* no stale token on the authenticate itself */
    if (rc == 0 && (rc = vigil_etcd__call_raw(e, "v3/auth/authenticate", body, &r)) == 0) {
        rc = vigil_etcd__parse_auth(r.http, r.body, r.len, e->token, sizeof(e->token));
        /* The name alone: up to a ':' (a NAME:PASSWORD given as the
         * user, as etcdctl's --user takes it), never what follows. */
        if (rc == -EACCES)
            vigil_etcd__why("etcd authentication failed for user '%.*s' (wrong name or password)",
                            (int)strcspn(e->user, ":"), e->user);
    }
    free(body);
    if (rc == VIGIL_EVACANT) {
        e->auth_off = true; /* auth is not enabled: requests go without a token */
        return 0;
    }
    if (rc < 0) {
        e->token[0] = '\0';
        return rc;
    }
    return vigil_etcd__headers_reset(e);
}

int vigil_etcd__auth_ready(vigil_etcd *e)
{
    if (!e->user || e->token[0] || e->auth_off)
        return 0;
    return vigil_etcd__authenticate(e);
}

bool vigil_etcd__auth_refused(vigil_etcd *e, const struct vigil_etcd_reply *r)
{
    if (!e->user || (r->http >= 200 && r->http <= 299 && !memmem(r->body, r->len, "\"error\"", 7)))
        return false;
    char msg[128];
    int code = vigil_etcd__error_of(r->body, r->len, msg, sizeof(msg));
    return code >= 0 && vigil_etcd__token_error(code, msg);
}

/* ---- the namespace --------------------------------------------------------- */

int vigil_etcd__full_key(const vigil_etcd *e, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    if (e->nslen + kl + 1 > cap)
        return VIGIL_ERANGE;
    memcpy(out, e->ns, e->nslen);
    memcpy(out + e->nslen, key, kl + 1);
    return 0;
}

size_t vigil_etcd__ns(const vigil_etcd *e, const char **ns)
{
    *ns = e->ns;
    return e->nslen;
}

/* ---- the handle ------------------------------------------------------------ */

static void free_handle(vigil_etcd *e)
{
    vigil_etcd__health_close(e);
    vigil_etcd__curl_close(e);
    free(e->cacert);
    free(e->cert);
    free(e->key);
    free(e->user);
    if (e->password) {
        explicit_bzero(e->password, strlen(e->password));
        free(e->password);
    }
    explicit_bzero(e->token, sizeof(e->token));
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

/* A file the TLS options name must be there to read: its own error now
 * says more than a failed handshake later. */
static int readable(const char *what, const char *path)
{
    if (!path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        vigil_etcd__why("%s %s: %s", what, path, strerror(err));
        return -err;
    }
    close(fd);
    return 0;
}

static int set_options(vigil_etcd *e, const struct vigil_etcd_options *o)
{
    const char *ns = o->namespace;
    if (o->key && *o->key && !(o->cert && *o->cert)) {
        vigil_etcd__why("a client key without its certificate");
        return -EINVAL;
    }
    if (o->password && *o->password && !(o->user && *o->user)) {
        vigil_etcd__why("a password without a user");
        return -EINVAL;
    }
    if (ns && strlen(ns) >= sizeof(e->ns)) {
        vigil_etcd__why("namespace longer than %zu bytes", sizeof(e->ns) - 1);
        return VIGIL_ERANGE;
    }
    int rc;
    if ((rc = copy_opt(o->cacert, &e->cacert)) < 0 || (rc = copy_opt(o->cert, &e->cert)) < 0 ||
        (rc = copy_opt(o->key, &e->key)) < 0 || (rc = copy_opt(o->user, &e->user)) < 0 ||
        (rc = copy_opt(o->password, &e->password)) < 0)
        return rc;
    if (e->user && !e->password && !(e->password = strdup("")))
        return -ENOMEM; /* a user without a password: etcd decides */
    if ((rc = readable("CA bundle", e->cacert)) < 0 || (rc = readable("client certificate", e->cert)) < 0 ||
        (rc = readable("client key", e->key)) < 0)
        return rc;
    if (ns) {
        e->nslen = strlen(ns);
        memcpy(e->ns, ns, e->nslen + 1);
    }
    e->connect_ms = CONNECT_MS_DEFAULT;
    e->total_ms = TOTAL_MS_DEFAULT;
    if (o->request_timeout_ms)
        e->total_ms = (long)o->request_timeout_ms;
    if (o->dial_timeout_ms)
        e->connect_ms = (long)o->dial_timeout_ms;
    if (e->connect_ms > e->total_ms)
        e->connect_ms = e->total_ms;
    return 0;
}

int vigil_etcd_connect(const char *endpoints, vigil_etcd **out)
{
    return vigil_etcd_connect_opts(endpoints, NULL, out);
}

int vigil_etcd_connect_opts(const char *endpoints, const struct vigil_etcd_options *opts, vigil_etcd **out)
{
    static const struct vigil_etcd_options none;
    vigil_etcd__why("%s", "");
    if (!endpoints || !out)
        return -EINVAL;
    const struct vigil_etcd_options *o = opts ? opts : &none;
    vigil_etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->deadline_ns = UINT64_MAX;
    /* A bare host:port is https:// when TLS files are given, as etcdctl
     * takes it. */
    bool tls = (o->cacert && *o->cacert) || (o->cert && *o->cert);
    int rc = vigil_etcd__parse_endpoints_as(endpoints, tls, e->urls, VIGIL_ETCD_MAX_ENDPOINTS, &e->n);
    if (rc < 0)
        vigil_etcd__why("endpoints '%s': not a list of http(s)://host:port", endpoints);
    if (rc == 0)
        rc = set_options(e, o);
    if (rc == 0)
        rc = vigil_etcd__curl_open(e);
    if (rc == 0 && pthread_mutex_init(&e->lock, NULL) != 0)
        rc = -ENOMEM;
    if (rc == 0)
        rc = vigil_etcd__health_open(e);
    if (rc < 0) {
        free_handle(e);
        return rc;
    }
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
    e->connect_ms = cm;
    e->total_ms = tm;
    pthread_mutex_unlock(&e->lock);
    return 0;
}
