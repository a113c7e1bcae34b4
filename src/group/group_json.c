/* SPDX-License-Identifier: MIT */
/*
 * The transactions of the group calls, built as cJSON trees and read back
 * with cJSON: the gateway's kv/txn, its keys and values in base64, its
 * int64 fields as strings, proto3 leaving out whatever is zero (etcd.c
 * tells the gateway's JSON). One place turns a key into what goes on the
 * wire and back, so every key of a group passes through here.
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void gtxn_init(struct gtxn *t)
{
    memset(t, 0, sizeof(*t));
    t->root = cJSON_CreateObject();
    if (!t->root) {
        t->err = -ENOMEM;
        return;
    }
    t->cmp = cJSON_AddArrayToObject(t->root, "compare");
    t->ok = cJSON_AddArrayToObject(t->root, "success");
    t->fail = cJSON_AddArrayToObject(t->root, "failure");
    if (!t->cmp || !t->ok || !t->fail)
        t->err = -ENOMEM;
}

void gtxn_free(struct gtxn *t)
{
    cJSON_Delete(t->root);
    t->root = NULL;
}

/* s in base64 as a member of obj. */
static void add_b64(struct gtxn *t, cJSON *obj, const char *name, const char *s, size_t n)
{
    size_t cap = (n + 2) / 3 * 4 + 1;
    char stack[GKEY_MAX * 2], *b = cap <= sizeof(stack) ? stack : malloc(cap);
    if (!b || vigil_etcd__b64(s, n, b, cap) < 0 || !cJSON_AddStringToObject(obj, name, b))
        t->err = t->err ? t->err : -ENOMEM;
    if (b != stack)
        free(b);
}

static void add_i64(struct gtxn *t, cJSON *obj, const char *name, int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%" PRId64, v);
    if (!cJSON_AddStringToObject(obj, name, s))
        t->err = t->err ? t->err : -ENOMEM;
}

/* The key, and with G_PREFIX the end of its prefix range: the key with its
 * last byte raised by one ("a/" -> "a0"), as etcd's WithPrefix. */
static void add_key(struct gtxn *t, cJSON *obj, const char *key, unsigned flags)
{
    size_t n = strlen(key);
    if (n == 0 || n >= GKEY_MAX) {
        t->err = t->err ? t->err : VIGIL_ERANGE;
        return;
    }
    add_b64(t, obj, "key", key, n);
    if (flags & G_PREFIX) {
        char end[GKEY_MAX];
        memcpy(end, key, n);
        end[n - 1] = (char)(end[n - 1] + 1); /* our prefixes end in '/': never 0xff */
        add_b64(t, obj, "range_end", end, n);
    }
}

/* A new op {"request_NAME": {...}} in the branch: the inner object. */
static cJSON *new_op(struct gtxn *t, enum gbranch b, const char *name)
{
    if (t->err)
        return NULL;
    cJSON *op = cJSON_CreateObject(), *in = op ? cJSON_AddObjectToObject(op, name) : NULL;
    if (!in || !cJSON_AddItemToArray(b == G_OK ? t->ok : t->fail, op)) {
        cJSON_Delete(op);
        t->err = -ENOMEM;
        return NULL;
    }
    return in;
}

void gtxn_cmp(struct gtxn *t, const char *key, enum gtarget target, enum gresult res, int64_t v)
{
    static const char *const targets[] = { "CREATE", "MOD", "VERSION", "LEASE" };
    static const char *const fields[] = { "create_revision", "mod_revision", "version", "lease" };
    static const char *const results[] = { "EQUAL", "LESS", "GREATER", "NOT_EQUAL" };
    if (t->err)
        return;
    cJSON *c = cJSON_CreateObject();
    if (!c || !cJSON_AddItemToArray(t->cmp, c)) {
        cJSON_Delete(c);
        t->err = -ENOMEM;
        return;
    }
    add_key(t, c, key, 0);
    if (!cJSON_AddStringToObject(c, "target", targets[target]) || !cJSON_AddStringToObject(c, "result", results[res]))
        t->err = -ENOMEM;
    add_i64(t, c, fields[target], v);
}

void gtxn_put(struct gtxn *t, enum gbranch b, const char *key, const char *val, size_t vlen, int64_t lease)
{
    cJSON *p = new_op(t, b, "request_put");
    if (!p)
        return;
    add_key(t, p, key, 0);
    add_b64(t, p, "value", val ? val : "", val ? vlen : 0);
    if (lease) {
        add_i64(t, p, "lease", lease);
        t->lease_put = true;
    }
}

void gtxn_range(struct gtxn *t, enum gbranch b, const char *key, unsigned flags, int64_t limit)
{
    cJSON *r = new_op(t, b, "request_range");
    if (!r)
        return;
    t->franges += b == G_FAIL;
    add_key(t, r, key, flags);
    if (((flags & G_KEYS_ONLY) && !cJSON_AddTrueToObject(r, "keys_only")) ||
        ((flags & G_COUNT) && !cJSON_AddTrueToObject(r, "count_only")) ||
        ((flags & G_BY_CREATE) && (!cJSON_AddStringToObject(r, "sort_order", "ASCEND") ||
                                   !cJSON_AddStringToObject(r, "sort_target", "CREATE"))))
        t->err = -ENOMEM;
    if (limit > 0)
        add_i64(t, r, "limit", limit);
}

void gtxn_del(struct gtxn *t, enum gbranch b, const char *key, unsigned flags)
{
    cJSON *d = new_op(t, b, "request_delete_range");
    if (d)
        add_key(t, d, key, flags);
}

#define UNAVAILABLE_MS 5000 /* an etcd election ridden out by a txn */

int gtxn_run(vigil_etcd *e, struct gtxn *t, struct greply *r)
{
    memset(r, 0, sizeof(*r));
    if (t->err)
        return t->err;
    char *body = cJSON_PrintUnformatted(t->root);
    if (!body)
        return -ENOMEM;
    struct vigil_etcd_reply rep;
    cJSON *root = NULL;
    int rc;
    /* Unavailable (-EAGAIN: no leader, leader changed) from every
     * endpoint: an election under way, sent again for up to UNAVAILABLE_MS
     * with a growing pause. Every txn of ours may be sent twice, and may
     * land late: a read changes nothing, and every write is safe so
     * (group_fence.c, THE RULE). Whether a copy may still be on its way
     * is told in r->doubt. */
    uint64_t until = gnow_ns() + UNAVAILABLE_MS * 1000000ull;
    bool doubt = false;
    for (unsigned pause_ms = 25;; pause_ms *= 2) {
        vigil_etcd__lock(e);
        rc = vigil_etcd__call(e, "v3/kv/txn", body, &rep);
        doubt = doubt || e->maybe_applied;
        if (rc == 0)
            rc = vigil_etcd__reply_open(rep.http, rep.body, rep.len, false, &root);
        vigil_etcd__unlock(e);
        if (rc != -EAGAIN || gnow_ns() + pause_ms * 1000000ull >= until)
            break;
        struct timespec ts = { 0, (long)pause_ms * 1000000L };
        nanosleep(&ts, NULL);
    }
    free(body);
    if (rc == -ENOENT && t->lease_put)
        return VIGIL_ELOST; /* "requested lease not found": our lease is gone */
    if (rc < 0)
        return rc;
    struct vigil_etcd_hdr at;
    if (vigil_etcd__txn_succeeded(root, &r->ok) < 0 || vigil_etcd__header_of(vigil_etcd__field(root, "header"), &at) < 0 ||
        at.rev <= 0) {
        cJSON_Delete(root);
        return -EPROTO;
    }
    if (t->fence_rev > 0 && (rc = vigil_etcd__store_behind(e, &at, (uint64_t)t->fence_rev)) < 0) {
        cJSON_Delete(root);
        r->behind = true;
        return rc;
    }
    r->root = root;
    r->rev = at.rev;
    r->doubt = doubt;
    return 0;
}

void greply_free(struct greply *r)
{
    cJSON_Delete(r->root);
    r->root = NULL;
}

void gkv_free(struct gkv *kv)
{
    free(kv->val);
    kv->val = NULL;
}

int greply_range(const struct greply *r, int n, int64_t *count, const cJSON **kvs)
{
    const cJSON *resps = vigil_etcd__field(r->root, "responses"), *op;
    if (resps && !cJSON_IsArray(resps))
        return -EPROTO;
    cJSON_ArrayForEach(op, resps) {
        const cJSON *range = vigil_etcd__field(op, "response_range"), *k;
        if (!range || n-- > 0)
            continue; /* a put's or a delete's response, or an earlier range */
        if (!cJSON_IsObject(range))
            return -EPROTO;
        int64_t c = 0;
        if (vigil_etcd__json_i64(range, "count", &c) < 0 || c < 0)
            return -EPROTO;
        k = vigil_etcd__field(range, "kvs");
        if (k && !cJSON_IsNull(k) && !cJSON_IsArray(k))
            return -EPROTO;
        *count = c;
        *kvs = cJSON_IsArray(k) ? k : NULL;
        return 0;
    }
    return -EPROTO;
}

/* A bytes field: decoded into a malloc'd NUL-terminated buffer. */
static int b64_field(const cJSON *kv, const char *name, char **out, size_t *len)
{
    const cJSON *v = vigil_etcd__field(kv, name);
    *out = NULL;
    *len = 0;
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return -EPROTO;
    size_t bl = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    char *buf = malloc(bl + 1);
    if (!buf)
        return -ENOMEM;
    int n = bl ? vigil_etcd__unb64(v->valuestring, bl, buf, bl) : 0;
    if (n < 0) {
        free(buf);
        return -EPROTO;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    return 0;
}

int gkv_read(const cJSON *kv, struct gkv *out)
{
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(kv))
        return -EPROTO;
    char *k;
    size_t kl;
    int rc = b64_field(kv, "key", &k, &kl);
    if (rc < 0)
        return rc;
    if (kl == 0 || kl >= sizeof(out->key) || memchr(k, '\0', kl)) {
        free(k);
        return -EPROTO; /* no key of ours is empty, that long, or holds a NUL */
    }
    memcpy(out->key, k, kl + 1);
    free(k);
    if ((rc = b64_field(kv, "value", &out->val, &out->vlen)) < 0)
        return rc;
    if (vigil_etcd__json_i64(kv, "create_revision", &out->create) < 0 ||
        vigil_etcd__json_i64(kv, "mod_revision", &out->mod) < 0 ||
        vigil_etcd__json_i64(kv, "version", &out->version) < 0 || vigil_etcd__json_i64(kv, "lease", &out->lease) < 0 ||
        out->create < 0 || out->mod < 0 || out->version < 0 || out->lease < 0) {
        gkv_free(out);
        return -EPROTO;
    }
    return 0;
}

int greply_first(const struct greply *r, int n, struct gkv *out)
{
    int64_t count;
    const cJSON *kvs;
    int rc = greply_range(r, n, &count, &kvs);
    if (rc < 0)
        return rc;
    if (!kvs || !kvs->child)
        return 0;
    rc = gkv_read(kvs->child, out);
    return rc < 0 ? rc : 1;
}

int greply_entries(const struct greply *r, int n, size_t plen, size_t maxlen, struct gentry **out)
{
    int64_t count;
    const cJSON *kvs, *kv;
    int rc = greply_range(r, n, &count, &kvs);
    *out = NULL;
    if (rc < 0)
        return rc;
    size_t cap = (size_t)cJSON_GetArraySize(kvs), k = 0;
    struct gentry *e = cap ? calloc(cap, sizeof(*e)) : NULL;
    if (cap && !e)
        return -ENOMEM;
    if (maxlen >= sizeof(e->name))
        maxlen = sizeof(e->name) - 1;
    cJSON_ArrayForEach(kv, kvs) {
        struct gkv g;
        if ((rc = gkv_read(kv, &g)) < 0)
            break;
        size_t l = strlen(g.key);
        if (l > plen && l - plen <= maxlen && k < cap) {
            memcpy(e[k].name, g.key + plen, l - plen + 1);
            e[k].create = g.create;
            snprintf(e[k].val, sizeof(e[k].val), "%s", g.val ? g.val : "");
            k++;
        }
        gkv_free(&g);
    }
    if (rc < 0) {
        free(e);
        return rc;
    }
    *out = e;
    return (int)k;
}
