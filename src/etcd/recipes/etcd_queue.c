/* SPDX-License-Identifier: MIT */
/*
 * The JSON of the queue under KEY/: the requests that make vigil hold a
 * key the way etcd's own concurrency package holds a Mutex or an Election
 * (etcd.c tells the layout), and the reading of their replies. Same rules
 * as etcd_json.c: keys and values go in base64, int64 fields are strings,
 * the readers are pure functions of a status and a body.
 *
 * Everything under KEY/ is read as one range [KEY/, KEY0): '0' is the byte
 * after '/', so that range holds exactly the keys that start with "KEY/".
 */
#define _GNU_SOURCE
#include "recipes_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_B64 VIGIL_ETCD_KEY_B64

static int fits(int n, size_t cap)
{
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

/* KEY/ and KEY0 (the range end), in base64. */
static int prefix_b64(const char *key, char pfx[KEY_B64], char end[KEY_B64])
{
    char k[VIGIL_ETCD_KEY_MAX + 1];
    int n = snprintf(k, sizeof(k), "%s/", key);
    if (n <= 0 || (size_t)n >= sizeof(k) || vigil_etcd__b64(k, (size_t)n, pfx, KEY_B64) < 0)
        return VIGIL_ERANGE;
    k[n - 1] = '0';
    return vigil_etcd__b64(k, (size_t)n, end, KEY_B64) < 0 ? VIGIL_ERANGE : 0;
}

static int own_b64(const char *key, int64_t lease_id, char out[KEY_B64])
{
    char own[VIGIL_ETCD_KEY_MAX + 24];
    if (vigil_etcd__own_key(key, lease_id, own, sizeof(own)) < 0)
        return VIGIL_ERANGE;
    return vigil_etcd__b64(own, strlen(own), out, KEY_B64) < 0 ? VIGIL_ERANGE : 0;
}

/* If our key was never created, put it under our lease; either way range
 * it and the first key under KEY/ by create_revision: one round trip says
 * where we stand. (Mutex.tryAcquire and Election.Campaign do the same.) */
int vigil_etcd__body_acquire(char *buf, size_t cap, const char *key, const char *owner, int64_t lease_id)
{
    return vigil_etcd__body_acquire_as(buf, cap, key, owner, lease_id, lease_id);
}

int vigil_etcd__body_acquire_as(char *buf, size_t cap, const char *key, const char *owner, int64_t name_id,
                                int64_t lease_id)
{
    char own[KEY_B64], pfx[KEY_B64], end[KEY_B64], vb[96];
    if (own_b64(key, name_id, own) < 0 || prefix_b64(key, pfx, end) < 0 ||
        vigil_etcd__b64(owner, strlen(owner), vb, sizeof(vb)) < 0)
        return VIGIL_ERANGE;
    char first[2 * KEY_B64 + 256];
    if (fits(snprintf(first, sizeof(first),
                      "{\"request_range\":{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
                      "\"sort_target\":\"CREATE\",\"limit\":\"1\",\"keys_only\":true}}",
                      pfx, end),
             sizeof(first)) < 0)
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                         "\"create_revision\":\"0\"}],"
                         "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}},"
                         "{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}},%s],"
                         "\"failure\":[{\"request_range\":{\"key\":\"%s\",\"keys_only\":true}},%s]}",
                         own, own, vb, lease_id, own, first, own, first),
                cap);
}

int vigil_etcd__body_put_if(char *buf, size_t cap, const char *key, int64_t name_id, uint64_t token,
                           int64_t lease_id, int64_t mod, int64_t to_lease, const char *value)
{
    char own[KEY_B64], vb[96], mc[KEY_B64 + 128] = "";
    if (token == 0 || token > INT64_MAX || own_b64(key, name_id, own) < 0 ||
        vigil_etcd__b64(value, strlen(value), vb, sizeof(vb)) < 0)
        return VIGIL_ERANGE;
    if (mod >= 0 && fits(snprintf(mc, sizeof(mc),
                                 ",{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
                                 "\"mod_revision\":\"%" PRId64 "\"}",
                                 own, mod),
                        sizeof(mc)) < 0)
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                         "\"create_revision\":\"%" PRIu64 "\"},{\"key\":\"%s\",\"target\":\"LEASE\","
                         "\"result\":\"EQUAL\",\"lease\":\"%" PRId64 "\"}%s],"
                         "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\",\"lease\":\"%" PRId64 "\"}}],"
                         "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
                         own, token, own, lease_id, mc, own, vb, to_lease, own),
                cap);
}

/* kv/range: the first key under KEY/ by create_revision, with its value. */
int vigil_etcd__body_holder(char *buf, size_t cap, const char *key)
{
    char pfx[KEY_B64], end[KEY_B64];
    if (prefix_b64(key, pfx, end) < 0)
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"key\":\"%s\",\"range_end\":\"%s\",\"sort_order\":\"ASCEND\","
                         "\"sort_target\":\"CREATE\",\"limit\":\"1\"}",
                         pfx, end),
                cap);
}

/* A waiter's look: if our key is still ours (created at my_rev, on our
 * lease), the last two keys under KEY/ created before it: the first is
 * the one to watch; no second says it holds KEY (etcd_wait.c, SECOND IN
 * LINE). etcd sorts and filters before it cuts to the limit, so "two"
 * counts the keys below ours, not the first two of the range. */
int vigil_etcd__body_pred(char *buf, size_t cap, const char *key, int64_t lease_id, uint64_t my_rev)
{
    char own[KEY_B64], pfx[KEY_B64], end[KEY_B64];
    /* max_create_revision 0 would mean "no limit": a key created at
     * revision 1 cannot exist (the first write of a cluster makes 2). */
    if (my_rev < 2 || my_rev > INT64_MAX || own_b64(key, lease_id, own) < 0 || prefix_b64(key, pfx, end) < 0)
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
                         "\"create_revision\":\"%" PRIu64 "\"},{\"key\":\"%s\",\"target\":\"LEASE\","
                         "\"result\":\"EQUAL\",\"lease\":\"%" PRId64 "\"}],"
                         "\"success\":[{\"request_range\":{\"key\":\"%s\",\"range_end\":\"%s\","
                         "\"sort_order\":\"DESCEND\",\"sort_target\":\"CREATE\",\"limit\":\"2\","
                         "\"max_create_revision\":\"%" PRIu64 "\",\"keys_only\":true}}]}",
                         own, my_rev, own, lease_id, pfx, end, my_rev - 1),
                cap);
}

/* Only deletions matter to a waiter: NOPUT keeps the puts off the wire. */
int vigil_etcd__body_watch(char *buf, size_t cap, const char *key_b64, int64_t rev)
{
    struct vigil_etcd_watch_spec spec = { .key_b64 = key_b64, .rev = rev, .ep = -1 };
    return vigil_etcd__body_watch_spec(buf, cap, &spec);
}

int vigil_etcd__body_watch_spec(char *buf, size_t cap, const struct vigil_etcd_watch_spec *w)
{
    char end[VIGIL_ETCD_KEY_B64 + 32] = "";
    if (w->end_b64 && fits(snprintf(end, sizeof(end), "\"range_end\":\"%s\",", w->end_b64), sizeof(end)) < 0)
        return VIGIL_ERANGE;
    return fits(snprintf(buf, cap,
                         "{\"create_request\":{\"key\":\"%s\",%s\"start_revision\":\"%" PRId64 "\","
                         "\"progress_notify\":true%s}}",
                         w->key_b64, end, w->rev, w->puts ? "" : ",\"filters\":[\"NOPUT\"]"),
                cap);
}

int vigil_etcd__prefix_b64(const char *key, char *pfx, char *end)
{
    return prefix_b64(key, pfx, end);
}

int vigil_etcd__own_b64(const char *key, int64_t lease_id, char *out)
{
    return own_b64(key, lease_id, out);
}

/* ---- replies ------------------------------------------------------------- */

/* The first kv of the n-th range response of a txn reply: 1 found, 0 the
 * range is there and empty, -EPROTO no such range. */
static int txn_range_kv(const cJSON *r, int n, const cJSON **kv)
{
    const cJSON *resps = vigil_etcd__field(r, "responses"), *op;
    if (!cJSON_IsArray(resps))
        return -EPROTO;
    cJSON_ArrayForEach(op, resps) {
        const cJSON *range = vigil_etcd__field(op, "response_range");
        if (!cJSON_IsObject(range) || n-- > 0)
            continue;
        const cJSON *kvs = vigil_etcd__field(range, "kvs");
        if (!kvs || cJSON_IsNull(kvs))
            return 0; /* proto3 omits an empty list */
        if (!cJSON_IsArray(kvs))
            return -EPROTO;
        if (!kvs->child)
            return 0;
        if (!cJSON_IsObject(kvs->child))
            return -EPROTO;
        *kv = kvs->child;
        return 1;
    }
    return -EPROTO;
}

static int kv_rev(const cJSON *kv, int64_t *rev)
{
    return vigil_etcd__json_i64(kv, "create_revision", rev) == 1 && *rev > 0 ? 0 : -EPROTO;
}

int vigil_etcd__parse_acquire(long http, const char *body, size_t len, int64_t lease_id, uint64_t *my_rev)
{
    int64_t lease = 0;
    uint64_t rev = 0;
    int rc = vigil_etcd__parse_acquire_on(http, body, len, &lease, &rev);
    if ((rc == 0 || rc == VIGIL_EBUSY) && lease != lease_id)
        return -EPROTO; /* our key is named after our lease: another lease on it is not our doing */
    if (rc == 0 || rc == VIGIL_EBUSY)
        *my_rev = rev;
    return rc;
}

int vigil_etcd__parse_acquire_on(long http, const char *body, size_t len, int64_t *lease_out, uint64_t *my_rev)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(http, body, len, false, &r);
    if (rc)
        /* NotFound here is our own lease, lapsed between grant and put: the
         * server was too slow to keep it, which is a transient failure. */
        return rc == -ENOENT ? -ETIMEDOUT : rc;
    bool put = false;
    int64_t lease = 0, mine = 0, first = 0;
    const cJSON *own = NULL, *low = NULL;
    /* Both ranges run in the transaction that made or found our key, after
     * the put: our key is there, and so is a first key under KEY/. */
    if ((rc = vigil_etcd__txn_succeeded(r, &put)) < 0 || txn_range_kv(r, 0, &own) != 1 ||
        txn_range_kv(r, 1, &low) != 1 || vigil_etcd__json_i64(own, "lease", &lease) < 0 ||
        kv_rev(own, &mine) < 0 || kv_rev(low, &first) < 0 || first > mine) {
        rc = -EPROTO;
        goto out;
    }
    rc = lease <= 0 ? -EPROTO : first == mine ? 0 : VIGIL_EBUSY;
out:
    cJSON_Delete(r);
    if (rc == 0 || rc == VIGIL_EBUSY) {
        *my_rev = (uint64_t)mine;
        *lease_out = lease;
    }
    return rc;
}

int vigil_etcd__parse_put_if(long http, const char *body, size_t len, struct vigil_etcd_own *own)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    struct vigil_etcd_own o = { 0 };
    const cJSON *kv = NULL, *v;
    if ((rc = vigil_etcd__txn_succeeded(r, &o.ok)) < 0 ||
        (rc = vigil_etcd__header_of(vigil_etcd__field(r, "header"), &o.at)) < 0 || o.ok)
        goto out;
    int f = txn_range_kv(r, 0, &kv);
    if (f < 0) {
        rc = -EPROTO;
        goto out;
    }
    if (f == 1) {
        o.found = true;
        v = vigil_etcd__field(kv, "value");
        if (kv_rev(kv, &o.create) < 0 || vigil_etcd__json_i64(kv, "lease", &o.lease) < 0 ||
            vigil_etcd__json_i64(kv, "mod_revision", &o.mod) != 1 || (v && !cJSON_IsNull(v) && !cJSON_IsString(v))) {
            rc = -EPROTO;
            goto out;
        }
        int n = 0;
        if (cJSON_IsString(v) && v->valuestring[0])
            n = vigil_etcd__unb64(v->valuestring, strlen(v->valuestring), o.value, sizeof(o.value) - 1);
        if (n == -EPROTO) {
            rc = n;
            goto out;
        }
        o.value_fits = n >= 0; /* longer than any owner: not a value of ours */
        o.value[n >= 0 ? n : 0] = '\0';
    }
out:
    cJSON_Delete(r);
    if (rc == 0)
        *own = o;
    return rc;
}

int vigil_etcd__parse_holder(long http, const char *body, size_t len, uint64_t *rev, int64_t *lease,
                             char *owner, size_t cap)
{
    return vigil_etcd__parse_holder_at(http, body, len, rev, lease, owner, cap, NULL);
}

int vigil_etcd__parse_holder_at(long http, const char *body, size_t len, uint64_t *rev, int64_t *lease,
                                char *owner, size_t cap, int64_t *at)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    int64_t hrev = 0;
    if (at && (vigil_etcd__json_i64(vigil_etcd__field(r, "header"), "revision", &hrev) != 1 || hrev <= 0)) {
        cJSON_Delete(r);
        return -EPROTO;
    }
    const cJSON *kvs = vigil_etcd__field(r, "kvs"), *kv, *v;
    int64_t cr = 0, l = 0;
    char *tmp = NULL;
    int n = 0;
    if (!cJSON_IsObject(vigil_etcd__field(r, "header")) || (kvs && !cJSON_IsNull(kvs) && !cJSON_IsArray(kvs))) {
        rc = -EPROTO;
        goto out;
    }
    if (!cJSON_IsArray(kvs) || !kvs->child) {
        rc = VIGIL_EVACANT;
        goto out;
    }
    kv = kvs->child;
    v = vigil_etcd__field(kv, "value");
    if (!cJSON_IsObject(kv) || kv_rev(kv, &cr) < 0 || vigil_etcd__json_i64(kv, "lease", &l) < 0 || l < 0 ||
        (v && !cJSON_IsNull(v) && !cJSON_IsString(v))) {
        rc = -EPROTO;
        goto out;
    }
    if (cJSON_IsString(v) && v->valuestring[0]) {
        size_t bl = strlen(v->valuestring);
        if (!(tmp = malloc(bl))) {
            rc = -ENOMEM;
            goto out;
        }
        if ((n = vigil_etcd__unb64(v->valuestring, bl, tmp, bl)) < 0) {
            rc = -EPROTO;
            goto out;
        }
    }
out:
    cJSON_Delete(r);
    if (at && (rc == 0 || rc == VIGIL_EVACANT))
        *at = hrev;
    if (rc == 0) {
        /* The owner as a C string: cut to the field, and at a NUL. */
        size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
        if (k)
            memcpy(owner, tmp, k);
        owner[k] = '\0';
        *rev = (uint64_t)cr;
        *lease = l;
    }
    free(tmp);
    return rc;
}

int vigil_etcd__parse_ttl(long http, const char *body, size_t len, int64_t *left, int64_t *granted)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(http, body, len, true, &r);
    if (rc)
        return rc == VIGIL_ELOST ? VIGIL_EVACANT : rc;
    int64_t t = 0, g = 0;
    if (!cJSON_IsObject(vigil_etcd__field(r, "header")) || vigil_etcd__json_i64(r, "TTL", &t) < 0 ||
        vigil_etcd__json_i64(r, "grantedTTL", &g) < 0 || g < 0 || t < -VIGIL_ETCD_MAX_TTL_S)
        rc = -EPROTO;
    else if (t == -1 && g == 0)
        rc = VIGIL_EVACANT; /* etcd's answer for a lease that is gone: TTL -1, nothing granted */
    else if (t < 0 && g == 0)
        rc = -EPROTO;
    cJSON_Delete(r);
    if (rc == 0) {
        *left = t;
        *granted = g;
    }
    return rc;
}

/* A key as etcd gave it, to be sent back in a watch: base64 and nothing else. */
static bool is_b64(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '+' ||
              *s == '/' || *s == '='))
            return false;
    return true;
}

int vigil_etcd__parse_pred(long http, const char *body, size_t len, char *pred, size_t cap, int64_t *rev)
{
    bool first;
    return vigil_etcd__parse_pred_first(http, body, len, pred, cap, rev, &first);
}

int vigil_etcd__parse_pred_first(long http, const char *body, size_t len, char *pred, size_t cap, int64_t *rev,
                                 bool *first)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(http, body, len, false, &r);
    if (rc)
        return rc;
    bool ours = false;
    int64_t h = 0;
    const cJSON *kv = NULL, *k;
    if ((rc = vigil_etcd__txn_succeeded(r, &ours)) < 0)
        goto out;
    if (!ours) {
        rc = VIGIL_ELOST; /* our key is gone, or on someone else's lease */
        goto out;
    }
    if (vigil_etcd__json_i64(vigil_etcd__field(r, "header"), "revision", &h) != 1 || h <= 0 ||
        (rc = txn_range_kv(r, 0, &kv)) < 0) {
        rc = -EPROTO;
        goto out;
    }
    if (rc == 0) {
        rc = VIGIL_EVACANT; /* nobody ahead of us: our turn */
        goto out;
    }
    k = vigil_etcd__field(kv, "key");
    if (!cJSON_IsString(k) || !k->valuestring[0] || !is_b64(k->valuestring))
        rc = -EPROTO;
    else
        rc = strlen(k->valuestring) < cap ? 0 : VIGIL_ERANGE;
    if (rc == 0) {
        strcpy(pred, k->valuestring);
        *rev = h;
        *first = kv->next == NULL; /* no second key below ours: the one ahead holds KEY */
    }
out:
    cJSON_Delete(r);
    return rc;
}

int vigil_etcd__parse_watch(const char *msg, size_t len)
{
    return vigil_etcd__parse_watch_keys(msg, len, NULL, NULL);
}

/* The key of a watch event, base64 as etcd sent it ("" when absent). */
static const char *event_key(const cJSON *ev)
{
    const cJSON *k = vigil_etcd__field(vigil_etcd__field(ev, "kv"), "key");
    return cJSON_IsString(k) ? k->valuestring : "";
}

int vigil_etcd__parse_watch_keys(const char *msg, size_t len, const char *pred, const char *own)
{
    cJSON *r;
    int rc = vigil_etcd__reply_open(200, msg, len, false, &r);
    if (rc)
        return rc;
    const cJSON *res = vigil_etcd__field(r, "result"), *evs, *ev;
    int64_t compact = 0;
    if (!cJSON_IsObject(res) || vigil_etcd__json_i64(res, "compact_revision", &compact) < 0) {
        rc = -EPROTO;
        goto out;
    }
    evs = vigil_etcd__field(res, "events");
    if (pred && own && cJSON_IsArray(evs)) {
        /* SECOND IN LINE (etcd_wait.c): only our key and the one ahead
         * matter. Anything done to ours (its deletion, a put over it)
         * sends the waiter to look again, even after the one ahead went
         * in the same message; the one ahead deleted, ours untouched,
         * is the key ours. */
        bool ahead_gone = false, ours_touched = false;
        cJSON_ArrayForEach(ev, evs) {
            const cJSON *t = vigil_etcd__field(ev, "type");
            bool del = cJSON_IsString(t) && strcmp(t->valuestring, "DELETE") == 0;
            if (strcmp(event_key(ev), own) == 0)
                ours_touched = true;
            else if (del && strcmp(event_key(ev), pred) == 0)
                ahead_gone = true;
        }
        rc = ours_touched ? VIGIL_ETCD_WATCH_DELETED : ahead_gone ? VIGIL_ETCD_WATCH_OURS : 0;
    } else if (cJSON_IsArray(evs)) {
        cJSON_ArrayForEach(ev, evs) {
            const cJSON *t = vigil_etcd__field(ev, "type");
            if (cJSON_IsString(t) && strcmp(t->valuestring, "DELETE") == 0)
                rc = VIGIL_ETCD_WATCH_DELETED;
            else if (rc == 0)
                rc = VIGIL_ETCD_WATCH_PUT; /* a put: proto3 omits its type, PUT being 0 */
        }
    }
    /* Refused for want of a valid token, or of permission: the reason is
     * the only word of it (the watch was "created" and cancelled at once). */
    const cJSON *why = vigil_etcd__field(res, "cancel_reason");
    if (rc == 0 && cJSON_IsTrue(vigil_etcd__field(res, "canceled")) && cJSON_IsString(why) &&
        (strstr(why->valuestring, "Unauthenticated") || strstr(why->valuestring, "PermissionDenied") ||
         strstr(why->valuestring, "auth token") || strstr(why->valuestring, "permission denied"))) {
        vigil_etcd__why("etcd refused the watch: %s", why->valuestring);
        rc = -EACCES;
    }
    /* Cancelled (by the server, or because our revision was compacted
     * away): the caller looks again from a fresh revision. */
    if (rc == 0 && (cJSON_IsTrue(vigil_etcd__field(res, "canceled")) || compact > 0))
        rc = VIGIL_ETCD_WATCH_CANCELED;
out:
    cJSON_Delete(r);
    return rc;
}
