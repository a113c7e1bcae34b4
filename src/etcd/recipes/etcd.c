/* SPDX-License-Identifier: MIT */
/*
 * The etcd adapter: vigil's lease API across hosts on etcd v3, spoken
 * through etcd's JSON gateway (grpc-gateway) with libcurl; replies are read
 * with cJSON.
 *
 * What vigil keeps in etcd. There is no vigil file here: these are etcd's
 * own records, laid out as etcd's concurrency package lays out a Mutex or
 * an Election, so that `etcdctl lock KEY`, `etcdctl elect KEY` and Go's
 * concurrency.Mutex / Election share a key with vigil. This table is the
 * layout every peer must agree on.
 *
 *   record          field            meaning
 *   key KEY/<hex>   (name)           <hex>: the lease ID in lowercase hex, no
 *                                    padding (Go's %x): one key per contender
 *                   value            the owner string, as given (0..63
 *                                    bytes; empty for etcdctl lock)
 *                   lease            the lease granted for this contention
 *                   create_revision  the contender's place in the queue
 *   the holder of KEY                the key under KEY/ with the lowest
 *                                    create_revision; its create_revision is
 *                                    the fencing token (etcd's revision only
 *                                    rises, so every later holder has a
 *                                    greater one: the leader's term)
 *   lease <ID>      TTL              whole seconds, ceil(ttl_ms / 1000),
 *                                    raised by etcd to its minimum (2 s by
 *                                    default); vigil_lease.ttl_ms is the TTL
 *                                    etcd granted, in ms
 *
 * The gateway speaks JSON over HTTP POST; bytes fields (key, value) are
 * base64 and int64 fields are JSON strings; proto3 omits fields that are
 * zero or false. Requests, P being the gateway prefix (/v3/ on etcd 3.4
 * and later, /v3beta/ on 3.3, /v3alpha/ on 3.2, found per endpoint: a 404
 * without JSON moves an endpoint to the next prefix), OWN our KEY/<hex>:
 *
 *   acquire  P lease/grant {"TTL": s}                       -> ID, TTL
 *            P kv/txn  if create_revision(OWN) == 0
 *                      then put(OWN, owner, lease ID); range(OWN); first
 *                      else range(OWN); first
 *            where first is the key under KEY/ with the lowest
 *            create_revision. Ours (the put took, perhaps on an attempt
 *            whose reply was lost) is the token; a lower one is
 *            VIGIL_EBUSY. On anything but success our lease is revoked,
 *            and with it OWN: a refused acquire leaves no waiter behind,
 *            and a copy of the txn that lands late (group_fence.c, THE
 *            RULE) fails whole, its lease gone; a release revokes it too.
 *   renew    P lease/keepalive {"ID"}    -> TTL > 0; TTL 0 or absent: lost
 *            P kv/txn  if create_revision(OWN) == token && lease(OWN) == ID
 *            A live lease alone does not prove the key is ours: someone may
 *            have deleted OWN, and another contender then holds KEY.
 *            Once OWN is the lowest it stays so while it lives: every key
 *            made later has a greater create_revision.
 *   release  P kv/txn  if create_revision(OWN) == token && lease(OWN) == ID
 *            P lease/revoke {"ID"}, whatever the txn said: the lease is ours.
 *            The revoke deletes the keys attached to the lease, so OWN
 *            goes if it is still ours; lost if the check failed or the
 *            lease was gone by the revoke.
 *   get      P kv/range the first key under KEY/, with its value; then
 *            P lease/timetolive {"ID"} of its lease, for the time left.
 *   wait     (etcd_wait.c) as acquire; then, while a key is ahead of OWN,
 *            a watch for the deletion of the last one created before it.
 *
 * Endpoints are tried in turn, and a transport failure is a transient
 * -errno, never VIGIL_ELOST (etcd_http.c); the bodies are written and the
 * replies read in etcd_json.c and etcd_queue.c.
 *
 * One handle is shared by the caller and its keepalive thread, so every
 * call holds the handle's mutex for all of its requests: a renewal never
 * interleaves with a release on the same connection.
 */
#define _GNU_SOURCE
#include "recipes_internal.h"
#include "keepalive_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* The lease clock (keepalive_internal.h): a lease's TTL runs on across a
 * suspend, here as on the server. */
uint64_t vigil_etcd__now_ns(void)
{
    return vigil_lease_now_ns();
}

static int lease_check(const vigil_lease *l)
{
    vigil_etcd__why("%s", ""); /* a call's errmsg is its own */
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
    vigil_etcd__lock(e);
    return 0;
}

/* With e's lock held: does our key KEY/<id hex> still hang on this lease
 * at the token's revision? Then (then) nothing more, delete it, or put
 * value on it (etcd_json.c). The txn of renew, release, resign, proclaim.
 * A reply below the token is a store gone backwards: lost at once. */
int vigil_etcd__if_held_locked(vigil_etcd *e, const vigil_lease *lease, int then, const char *value, bool *held)
{
    char body[VIGIL_ETCD_REQ_MAX], full[VIGIL_ETCD_KEY_MAX];
    struct vigil_etcd_reply r;
    struct vigil_etcd_hdr at;
    int rc = vigil_etcd__full_key(e, lease->key, full, sizeof(full));
    if (rc == 0)
        rc = vigil_etcd__body_if_held(body, sizeof(body), full, lease->token, lease->id, then, value);
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0 &&
        (rc = vigil_etcd__parse_txn_at(r.http, r.body, r.len, held, &at)) == 0)
        rc = vigil_etcd__store_behind(e, &at, lease->token);
    return rc;
}

static int held_locked(vigil_etcd *e, const vigil_lease *lease, bool *held)
{
    return vigil_etcd__if_held_locked(e, lease, VIGIL_ETCD_IF_HELD_NOTHING, NULL, held);
}

int vigil_etcd__revoke_locked(vigil_etcd *e, int64_t id)
{
    char body[64];
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__body_id(body, sizeof(body), id);
    if (rc == 0)
        rc = vigil_etcd__call(e, "v3/lease/revoke", body, &r);
    if (rc == 0)
        rc = vigil_etcd__parse_revoke(r.http, r.body, r.len);
    /* "Not found" after an attempt that may have been applied (timed out
     * on one endpoint, answered by the next), or after a revoke of the
     * same lease that failed that way before: most likely our own revoke,
     * so not a loss. */
    if (rc == VIGIL_ELOST && (e->maybe_applied || e->revoke_unsure == id))
        rc = 0;
    if (rc < 0 && rc != VIGIL_ELOST && e->maybe_applied)
        e->revoke_unsure = id;
    else if (e->revoke_unsure == id)
        e->revoke_unsure = 0;
    return rc;
}

#define REVOKE_SENDS 3 /* a revoke whose answer never came, sent again at once */

int vigil_etcd__revoke_sure_locked(vigil_etcd *e, int64_t id)
{
    int rc = -EIO;
    for (int i = 0; i < REVOKE_SENDS && rc < 0 && rc != VIGIL_ELOST && rc != VIGIL_ETIMEDOUT; i++)
        rc = vigil_etcd__revoke_locked(e, id);
    return rc == VIGIL_ELOST ? 0 : rc;
}

int vigil_etcd__grant_locked(vigil_etcd *e, uint64_t ttl_s, int64_t *id, int64_t *granted)
{
    char body[64];
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__body_ttl(body, sizeof(body), ttl_s);
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/lease/grant", body, &r)) == 0)
        rc = vigil_etcd__parse_grant(r.http, r.body, r.len, id, granted);
    return rc;
}

int vigil_etcd__keepalive_locked(vigil_etcd *e, int64_t id)
{
    char body[64];
    struct vigil_etcd_reply r;
    int64_t ttl;
    int rc = vigil_etcd__body_id(body, sizeof(body), id);
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/lease/keepalive", body, &r)) == 0)
        rc = vigil_etcd__parse_keepalive(r.http, r.body, r.len, id, &ttl);
    return rc;
}

int vigil_etcd__keepalive(vigil_etcd *e, int64_t id)
{
    vigil_etcd__lock(e);
    int rc = vigil_etcd__keepalive_locked(e, id);
    vigil_etcd__unlock(e);
    return rc;
}

int vigil_etcd__acquire_args(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                             const vigil_lease *out, uint64_t *secs)
{
    vigil_etcd__why("%s", "");
    if (!e || !key || !owner || !out)
        return -EINVAL;
    size_t kl = strlen(key), ol = strlen(owner);
    if (kl == 0 || kl >= sizeof(out->key) || ol >= sizeof(out->owner) || ttl_ms == 0)
        return VIGIL_ERANGE;
    uint64_t s = ttl_ms / 1000 + (ttl_ms % 1000 != 0);
    if (s > VIGIL_ETCD_MAX_TTL_S)
        return VIGIL_ERANGE;
    *secs = s;
    return 0;
}

int vigil_etcd_acquire(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out)
{
    uint64_t secs;
    int rc = vigil_etcd__acquire_args(e, key, owner, ttl_ms, out, &secs);
    if (rc < 0)
        return rc;
    char body[VIGIL_ETCD_REQ_MAX], full[VIGIL_ETCD_KEY_MAX];
    struct vigil_etcd_reply r;
    int64_t id = 0, granted = 0;
    uint64_t token = 0;
    if ((rc = vigil_etcd__full_key(e, key, full, sizeof(full))) < 0)
        return rc;

    vigil_etcd__lock(e);
    /* The lease's TTL runs from the grant's sending, not its answer: a
     * keepalive started next on this thread times local expiry from it. */
    uint64_t sent = vigil_etcd__now_ns();
    if ((rc = vigil_etcd__grant_locked(e, secs, &id, &granted)) < 0)
        goto out;
    rc = vigil_etcd__body_acquire(body, sizeof(body), full, owner, id);
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
        rc = vigil_etcd__parse_acquire(r.http, r.body, r.len, id, &token);
    if (rc < 0) {
        /* Held by another, or we cannot tell: the lease we granted goes, and
         * with it our key (a waiter's place nobody will use), and any copy
         * of the txn that lands later fails whole. Sent again while
         * unanswered; if every sending fails too, the lease lapses on its
         * own within its TTL, never renewed, and takes with it the key a
         * late copy may have put. */
        char why[256];
        vigil_etcd__why_save(why, sizeof(why));
        (void)vigil_etcd__revoke_sure_locked(e, id);
        vigil_etcd__why_restore(why);
        goto out;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, strlen(key));
    memcpy(out->owner, owner, strlen(owner));
    out->token = token;
    out->ttl_ms = (uint64_t)granted * 1000;
    out->id = id;
    vigil_lease_note_sent(out, sent);
out:
    vigil_etcd__unlock(e);
    return rc;
}

int vigil_etcd_renew(vigil_etcd *e, const vigil_lease *lease)
{
    int rc = lease_op_begin(e, lease);
    if (rc < 0)
        return rc;
    bool held = false;
    rc = vigil_etcd__keepalive_locked(e, lease->id);
    /* The lease lives on; the check says our key still hangs on it. */
    if (rc == 0 && (rc = held_locked(e, lease, &held)) == 0 && !held)
        rc = VIGIL_ELOST;
    vigil_etcd__unlock(e);
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
        bool unsure = e->revoke_unsure == lease->id; /* an earlier release's revoke may have landed */
        int rv = vigil_etcd__revoke_locked(e, lease->id);
        if (!held && unsure && rv == 0)
            rc = 0; /* our key went with that revoke: released, not lost */
        else if (!held)
            rc = VIGIL_ELOST; /* not ours */
        else if (rv < 0 && rv != VIGIL_ELOST)
            rc = rv; /* the key is still there and ours: the caller may retry */
        /* Held, and the lease not found by the revoke: gone by this very
         * revoke, delivered twice (its first copy's answer lost), or
         * lapsed in between; released either way. */
    }
    vigil_etcd__unlock(e);
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

/* The first key under KEY/ and its lease's time left. A lease that lapses
 * between the two reads took its key with it: read again (a few times; a
 * key churning faster than that is reported busy, never invented). */
int vigil_etcd_get(vigil_etcd *e, const char *key, vigil_lease_info *out)
{
    int64_t at;
    return vigil_etcd__get_at(e, key, out, &at);
}

int vigil_etcd__get_at(vigil_etcd *e, const char *key, vigil_lease_info *out, int64_t *at)
{
    vigil_etcd__why("%s", "");
    if (!e || !key || !out)
        return -EINVAL;
    size_t kl = strlen(key);
    if (kl == 0 || kl >= sizeof(out->key))
        return VIGIL_ERANGE;
    char body[VIGIL_ETCD_REQ_MAX], tb[64], owner[sizeof(out->owner)], full[VIGIL_ETCD_KEY_MAX];
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__full_key(e, key, full, sizeof(full));
    if (rc == 0)
        rc = vigil_etcd__body_holder(body, sizeof(body), full);
    if (rc < 0)
        return rc;
    uint64_t rev = 0;
    int64_t lease = 0, left = 0, granted = 0;
    vigil_etcd__lock(e);
    for (int tries = 0;; tries++) {
        if (tries == 4) {
            rc = VIGIL_EBUSY;
            break;
        }
        if ((rc = vigil_etcd__call(e, "v3/kv/range", body, &r)) < 0 ||
            (rc = vigil_etcd__parse_holder_at(r.http, r.body, r.len, &rev, &lease, owner, sizeof(owner), at)) < 0)
            break;
        if (lease == 0)
            break; /* a key put without a lease: held until someone deletes it */
        if ((rc = vigil_etcd__body_id(tb, sizeof(tb), lease)) < 0 ||
            (rc = vigil_etcd__call(e, "v3/lease/timetolive", tb, &r)) < 0)
            break;
        if ((rc = vigil_etcd__parse_ttl(r.http, r.body, r.len, &left, &granted)) != VIGIL_EVACANT)
            break;
    }
    vigil_etcd__unlock(e);
    if (rc < 0)
        return rc;
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, kl);
    memcpy(out->owner, owner, strlen(owner) + 1);
    out->token = rev;
    out->state = VIGIL_LEASE_HELD;
    if (lease == 0) {
        out->expires_in_ms = INT64_MAX;
    } else {
        out->ttl_ms = (uint64_t)granted * 1000;
        /* etcd tells whole seconds, toward zero, as the lease store tells
         * whole ms: time left rounded down, at least 1 while held (TTL 0
         * is under a second either side: still held, as etcd has not
         * revoked it); a negative TTL is a lease past its expiry that etcd
         * has not revoked yet, its key still there: expired that long ago. */
        if (left < 0) {
            out->state = VIGIL_LEASE_EXPIRED;
            out->expires_in_ms = left * 1000;
        } else {
            out->expires_in_ms = left > 0 ? left * 1000 : 1;
        }
    }
    return 0;
}
