/* SPDX-License-Identifier: MIT */
/*
 * The JSON the etcd adapter speaks to etcd's gateway (grpc-gateway): the
 * request bodies, written here, and the replies, read with cJSON; those of
 * the queue under KEY/ (acquire, get, a waiter's look, a watch) are in
 * etcd_queue.c. The requests each lease operation makes, and what they
 * mean, are told in etcd.c.
 *
 * The gateway speaks JSON over HTTP POST; bytes fields (key, value) are
 * base64 and int64 fields are JSON strings; proto3 omits fields that are
 * zero or false. Errors come back as gRPC status codes (json_error).
 *
 * The reply interpreters are pure functions of an HTTP status and a body,
 * so a hostile server's replies are tested without one (transport_internal.h).
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Short names, within this file, for the helpers etcd_queue.c shares. */
#define field       vigil_etcd__field
#define json_i64    vigil_etcd__json_i64
#define parse_whole vigil_etcd__parse_whole
#define reply_open  vigil_etcd__reply_open

/* ---- request bodies ------------------------------------------------------ */

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


int vigil_etcd__unb64(const char *in, size_t n, void *out, size_t cap)
{
    unsigned char *o = out;
    size_t len = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    while (n > 0 && in[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        unsigned v = c >= 'A' && c <= 'Z' ? (unsigned)(c - 'A') : c >= 'a' && c <= 'z' ? (unsigned)(c - 'a' + 26)
                   : c >= '0' && c <= '9' ? (unsigned)(c - '0' + 52) : c == '+' ? 62u : c == '/' ? 63u : 64u;
        if (v == 64)
            return -EPROTO;
        acc = acc << 6 | v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (len == cap)
                return VIGIL_ERANGE;
            o[len++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (bits >= 6)
        return -EPROTO; /* a lone sextet: not the encoding of any bytes */
    return (int)len;
}

int vigil_etcd__own_key(const char *key, int64_t lease_id, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%" PRIx64, key, (uint64_t)lease_id);
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

static int fits(int n, size_t cap)
{
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

/* lease/grant */
int vigil_etcd__body_ttl(char *buf, size_t cap, uint64_t ttl_s)
{
    return fits(snprintf(buf, cap, "{\"TTL\":\"%" PRIu64 "\"}", ttl_s), cap);
}

/* lease/keepalive and lease/revoke */
int vigil_etcd__body_id(char *buf, size_t cap, int64_t id)
{
    return fits(snprintf(buf, cap, "{\"ID\":\"%" PRId64 "\"}", id), cap);
}

/* kv/txn of renew and release: the comparisons that say a key is still
 * this lease's, created at the token's revision (not deleted and created
 * again since) and carrying our lease. */
int vigil_etcd__body_held(char *buf, size_t cap, const vigil_lease *l)
{
    return vigil_etcd__body_if_held(buf, cap, l->key, l->token, l->id, VIGIL_ETCD_IF_HELD_NOTHING, NULL);
}

/* The same comparisons, and on success what `then` says: nothing, the
 * deletion of our key (resign), or a put of value on it under our lease
 * (proclaim: the create revision, the token, stays). */
int vigil_etcd__body_if_held(char *buf, size_t cap, const char *key, uint64_t token, int64_t id, int then,
                             const char *value)
{
    char own[VIGIL_ETCD_KEY_MAX + 24], kb[VIGIL_ETCD_KEY_B64], vb[96], ops[VIGIL_ETCD_KEY_B64 + 256];
    if (vigil_etcd__own_key(key, id, own, sizeof(own)) < 0 ||
        vigil_etcd__b64(own, strlen(own), kb, sizeof(kb)) < 0)
        return VIGIL_ERANGE;
    ops[0] = '\0';
    if (then == VIGIL_ETCD_IF_HELD_DELETE &&
        fits(snprintf(ops, sizeof(ops), ",\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}]", kb),
             sizeof(ops)) < 0)
        return VIGIL_ERANGE;
    if (then == VIGIL_ETCD_IF_HELD_PUT &&
        (vigil_etcd__b64(value, strlen(value), vb, sizeof(vb)) < 0 ||
         fits(snprintf(ops, sizeof(ops),
                       ",\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}}]",
                       kb, vb, id),
              sizeof(ops)) < 0))
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                         "\"create_revision\":\"%" PRIu64 "\"},{\"key\":\"%s\",\"target\":\"LEASE\","
                         "\"result\":\"EQUAL\",\"lease\":\"%" PRId64 "\"}]%s}",
                         kb, token, kb, id, ops),
                cap);
}

/* ---- reading replies ----------------------------------------------------- */

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

const cJSON *vigil_etcd__field(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* The digits of s as a uint64: 0, or -EPROTO (none, another character,
 * past 2^64 - 1). */
static int digits_u64(const char *s, uint64_t *out)
{
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
    *out = acc;
    return 0;
}

/* An int64 field. The gateway writes them as strings; a JSON number is
 * taken too while it is an exact integer. 1 found, 0 absent (proto3 omits
 * zero), -EPROTO malformed. */
int vigil_etcd__json_i64(const cJSON *obj, const char *name, int64_t *out)
{
    const cJSON *v = field(obj, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsString(v) && v->valuestring) {
        const char *s = v->valuestring;
        bool neg = *s == '-';
        uint64_t acc;
        if (digits_u64(s + neg, &acc) < 0 || acc > (uint64_t)INT64_MAX + neg)
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

/* etcd's refusals of an authenticated (or unauthenticated) request, by
 * their messages: the codes alone do not tell them (a wrong password is
 * InvalidArgument, as are requests that are wrong in other ways). */
static bool auth_message(const char *msg)
{
    static const char *const refusals[] = {
        "authentication failed", "user name is empty", "user name not found", "permission denied",
        "invalid auth token", "revision of auth store is old", "auth: invalid", "root user does not",
    };
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strstr(msg, refusals[i]))
            return true;
    return false;
}

bool vigil_etcd__token_error(int code, const char *msg)
{
    return code == 16 || strstr(msg, "invalid auth token") || strstr(msg, "revision of auth store is old") ||
           strstr(msg, "user name is empty");
}

int vigil_etcd__error_of(const char *body, size_t len, char *msg, size_t cap)
{
    cJSON *r = vigil_etcd__parse_whole(body, len);
    int code;
    const char *m;
    int rc = -1;
    if (cJSON_IsObject(r) && json_error(r, &code, &m)) {
        snprintf(msg, cap, "%s", m);
        rc = code;
    }
    cJSON_Delete(r);
    return rc;
}

char *vigil_etcd__body_auth(const char *user, const char *password)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o && cJSON_AddStringToObject(o, "name", user) && cJSON_AddStringToObject(o, "password", password))
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int vigil_etcd__parse_auth(long http, const char *body, size_t len, char *token, size_t cap)
{
    cJSON *r = parse_whole(body, len);
    int code, rc = 0;
    const char *msg;
    if (!cJSON_IsObject(r)) {
        rc = -EPROTO;
    } else if (json_error(r, &code, &msg)) {
        rc = strstr(msg, "authentication is not enabled") ? VIGIL_EVACANT
           : auth_message(msg) || code == 3 || code == 7 || code == 16 ? -EACCES
           : vigil_etcd__grpc_error(code, false);
    } else {
        const cJSON *t = field(r, "token");
        if (http < 200 || http > 299 || !cJSON_IsString(t) || !t->valuestring[0])
            rc = -EPROTO;
        else if (strlen(t->valuestring) >= cap)
            rc = VIGIL_ERANGE;
        else if (strpbrk(t->valuestring, "\r\n"))
            rc = -EPROTO; /* it goes into a header line */
        else
            strcpy(token, t->valuestring);
    }
    cJSON_Delete(r);
    return rc;
}

/* The body as one JSON value and nothing after it but white space. */
cJSON *vigil_etcd__parse_whole(const char *body, size_t len)
{
    const char *end = NULL;
    cJSON *r = body && len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    if (!r)
        return NULL;
    for (; end && end < body + len; end++) {
        if (!vigil_etcd__is_space(*end)) {
            cJSON_Delete(r);
            return NULL;
        }
    }
    return r;
}

/* 0 and *root (an object, to be deleted by the caller) for a 2xx JSON reply
 * that is not an error; otherwise the error's vigil result. */
int vigil_etcd__reply_open(long http, const char *body, size_t len, bool lease_op, cJSON **root)
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
        else if (auth_message(msg))
            rc = -EACCES;
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

/* "succeeded": absent (proto3's false), true or false; anything else -EPROTO.
 * A txn reply always has a header: without one it is not etcd's. */
int vigil_etcd__txn_succeeded(const cJSON *r, bool *out)
{
    const cJSON *s = field(r, "succeeded");
    if (!cJSON_IsObject(field(r, "header")) || (s && !cJSON_IsBool(s)))
        return -EPROTO;
    *out = cJSON_IsTrue(s);
    return 0;
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
    struct vigil_etcd_hdr at;
    return vigil_etcd__parse_txn_at(http, body, len, succeeded, &at);
}

int vigil_etcd__header_of(const cJSON *header, struct vigil_etcd_hdr *out)
{
    struct vigil_etcd_hdr h = { 0, 0 };
    const cJSON *c = field(header, "cluster_id");
    /* Absent: 0, not judged (etcd's revision starts at 1, never omitted;
     * its cluster IDs are hashes, never 0). A cluster ID is a uint64,
     * written as a string. */
    if (json_i64(header, "revision", &h.rev) < 0 || h.rev < 0 ||
        (c && !cJSON_IsNull(c) && (!cJSON_IsString(c) || !c->valuestring || digits_u64(c->valuestring, &h.cluster) < 0)))
        return -EPROTO;
    *out = h;
    return 0;
}

int vigil_etcd__parse_txn_at(long http, const char *body, size_t len, bool *succeeded, struct vigil_etcd_hdr *at)
{
    cJSON *r;
    int rc = reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    bool s = false;
    struct vigil_etcd_hdr h;
    rc = vigil_etcd__txn_succeeded(r, &s);
    if (rc == 0)
        rc = vigil_etcd__header_of(field(r, "header"), &h);
    cJSON_Delete(r);
    if (rc == 0) {
        *succeeded = s;
        *at = h;
    }
    return rc;
}

void vigil_etcd__note_cluster(vigil_etcd *e, const char *body, size_t len)
{
    /* Relaxed: the ID is the whole of what is published, and it is set
     * once; a reader that sees 0 judges nothing. */
    if (atomic_load_explicit(&e->cluster, memory_order_relaxed) || !memmem(body, len, "\"cluster_id\"", 12))
        return;
    cJSON *r = parse_whole(body, len);
    const cJSON *h = field(r, "header");
    struct vigil_etcd_hdr at;
    if (!h)
        h = field(field(r, "result"), "header"); /* a keepalive's, from the streaming gateway */
    if (h && vigil_etcd__header_of(h, &at) == 0 && at.cluster) {
        uint64_t none = 0;
        atomic_compare_exchange_strong_explicit(&e->cluster, &none, at.cluster, memory_order_relaxed,
                                                memory_order_relaxed);
    }
    cJSON_Delete(r);
}

/* A token is the create revision of a key, and etcd's revision only
 * rises: every linearizable answer (a txn, a write) given after a token
 * was handed out carries a revision at least as great. One below it
 * comes from a store that lost what it had (its data wiped, or restored
 * from an older copy): what the token fenced is gone. One from another
 * cluster (another ID than the handle's first reply named: the endpoints
 * now lead to another etcd) is of a store the token never was in: gone
 * as well, whatever its revision. */
int vigil_etcd__store_behind(vigil_etcd *e, const struct vigil_etcd_hdr *at, uint64_t token)
{
    uint64_t first = atomic_load_explicit(&e->cluster, memory_order_relaxed);
    if (at->cluster && first && at->cluster != first) {
        vigil_etcd__why("etcd answered from another cluster (ID %llx, not %llx, the one this handle first spoke "
                        "to): the store the token %llu was handed out by is not there; the lease is lost",
                        (unsigned long long)at->cluster, (unsigned long long)first, (unsigned long long)token);
        return VIGIL_ELOST;
    }
    if (at->rev <= 0 || (uint64_t)at->rev >= token)
        return 0;
    vigil_etcd__why("etcd's store went backwards: it answered at revision %lld, below the token %llu held "
                    "(its data was wiped or restored from an older copy); the lease is lost",
                    (long long)at->rev, (unsigned long long)token);
    return VIGIL_ELOST;
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

/* ---- which endpoint answered --------------------------------------------- */

int vigil_etcd__classify(long http, const char *body, size_t len)
{
    bool maybe_error = http < 200 || http > 299 || memmem(body, len, "error", 5);
    if (!maybe_error)
        return VIGIL_ETCD_ANSWERED;
    cJSON *r = parse_whole(body, len);
    int rc = VIGIL_ETCD_ANSWERED, code;
    const char *msg;
    if (!cJSON_IsObject(r)) {
        if (http == 404)
            rc = VIGIL_ETCD_NO_GATEWAY;
        else if (http >= 500)
            rc = -EAGAIN; /* a proxy's or a dying server's page */
    } else if (json_error(r, &code, &msg) && (code == 14 || code == 4)) {
        rc = vigil_etcd__grpc_error(code, false);
    }
    cJSON_Delete(r);
    return rc;
}
