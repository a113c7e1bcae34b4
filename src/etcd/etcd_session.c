/* SPDX-License-Identifier: MIT */
/*
 * What a user of etcd's concurrency package finds in Session and Election,
 * beside the single-key calls (etcd.c), on the same layout:
 *
 *   session   one lease, granted once and kept alive by a vigil keepalive
 *             (renewing at 0.32 TTL, lost locally once a TTL passes
 *             unrenewed, its fd readable then), under which any number of
 *             keys are held: each KEY/<the session's lease in hex>, as
 *             concurrency.NewSession and a Mutex or Election on it. Closing
 *             the session revokes the lease, and every key held in it goes.
 *   resign    txn: if our key still has the token's create revision and our
 *             lease, delete it. The lease lives on for the other keys
 *             (Election.Resign).
 *   proclaim  txn: the same check, then a put of the new value on our key
 *             under our lease: the value changes, the create revision (the
 *             token, the leader's term) does not (Election.Proclaim).
 *
 * A key held in a session needs no keepalive of its own: the session's
 * renews the one lease they share, and its fd says when it is lost, and
 * with it every key. vigil_etcd_renew still checks one key (its lease
 * alive and the key still ours), as for a key held alone.
 */
#define _GNU_SOURCE
#include "etcd_internal.h"
#include "keepalive_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vigil_etcd_session {
    vigil_etcd      *e;
    vigil_lease      lease; /* the session's lease, as the keepalive knows it */
    int64_t          granted; /* seconds */
    vigil_keepalive *ka;
};

static int session_renew(void *ctx, const vigil_lease *lease)
{
    vigil_etcd_session *s = ctx;
    return vigil_etcd__keepalive(s->e, lease->id);
}

int vigil_etcd_session_open(vigil_etcd *e, uint64_t ttl_ms, vigil_etcd_session **out)
{
    uint64_t secs;
    vigil_lease probe = { 0 }; /* only its field sizes are looked at */
    int rc = vigil_etcd__acquire_args(e, "session", "", ttl_ms, &probe, &secs);
    if (rc < 0 || !out)
        return rc < 0 ? rc : -EINVAL;
    vigil_etcd_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->e = e;
    vigil_etcd__lock(e);
    uint64_t sent = vigil_etcd__now_ns();
    rc = vigil_etcd__grant_locked(e, secs, &s->lease.id, &s->granted);
    vigil_etcd__unlock(e);
    if (rc < 0) {
        free(s);
        return rc;
    }
    snprintf(s->lease.key, sizeof(s->lease.key), "(session %llx)", (unsigned long long)s->lease.id);
    s->lease.token = 1;
    s->lease.ttl_ms = (uint64_t)s->granted * 1000;
    vigil_lease_note_sent(&s->lease, sent); /* the keepalive times its local expiry from the grant */
    vigil_lease_port port = { .ctx = s, .renew = session_renew };
    if ((rc = vigil_keepalive_start(&port, &s->lease, &s->ka)) < 0) {
        vigil_etcd__lock(e);
        (void)vigil_etcd__revoke_locked(e, s->lease.id);
        vigil_etcd__unlock(e);
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int vigil_etcd_session_close(vigil_etcd_session *s)
{
    if (!s)
        return 0;
    int ka = vigil_keepalive_stop(s->ka); /* no renewal after the revoke */
    vigil_etcd__lock(s->e);
    int rc = vigil_etcd__revoke_locked(s->e, s->lease.id);
    vigil_etcd__unlock(s->e);
    free(s);
    return ka == VIGIL_ELOST ? VIGIL_ELOST : rc;
}

int64_t vigil_etcd_session_lease(const vigil_etcd_session *s)
{
    return s ? s->lease.id : 0;
}

int vigil_etcd_session_fd(const vigil_etcd_session *s)
{
    return s ? vigil_keepalive_fd(s->ka) : -EINVAL;
}

bool vigil_etcd_session_lost(const vigil_etcd_session *s)
{
    return !s || vigil_keepalive_lost(s->ka);
}

/* A key held in the session, as vigil_lease. */
static void fill(const vigil_etcd_session *s, const char *key, const char *owner, uint64_t token, vigil_lease *out)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, strlen(key));
    memcpy(out->owner, owner, strlen(owner));
    out->token = token;
    out->ttl_ms = (uint64_t)s->granted * 1000;
    out->id = s->lease.id;
}

/* The arguments of a session's acquire, and the session still alive: 0,
 * or the error. */
static int session_args(vigil_etcd_session *s, const char *key, const char *owner, const vigil_lease *out)
{
    uint64_t secs;
    if (!s)
        return -EINVAL;
    int rc = vigil_etcd__acquire_args(s->e, key, owner, 1000, out, &secs);
    return rc < 0 ? rc : vigil_keepalive_lost(s->ka) ? VIGIL_ELOST : 0;
}

int vigil_etcd_session_acquire(vigil_etcd_session *s, const char *key, const char *owner, vigil_lease *out)
{
    int rc = session_args(s, key, owner, out);
    if (rc < 0)
        return rc;
    char body[VIGIL_ETCD_REQ_MAX], full[VIGIL_ETCD_KEY_MAX];
    struct vigil_etcd_reply r;
    uint64_t token = 0;
    if ((rc = vigil_etcd__full_key(s->e, key, full, sizeof(full))) < 0 ||
        (rc = vigil_etcd__body_acquire(body, sizeof(body), full, owner, s->lease.id)) < 0)
        return rc;
    vigil_etcd__lock(s->e);
    if ((rc = vigil_etcd__call(s->e, "v3/kv/txn", body, &r)) == 0)
        rc = vigil_etcd__parse_acquire(r.http, r.body, r.len, s->lease.id, &token);
    if (rc == VIGIL_EBUSY) {
        /* Our key is queued behind the holder: take it back out (the
         * lease stays, the session's). */
        vigil_lease mine;
        bool held;
        fill(s, key, owner, token, &mine);
        (void)vigil_etcd__if_held_locked(s->e, &mine, VIGIL_ETCD_IF_HELD_DELETE, NULL, &held);
    }
    vigil_etcd__unlock(s->e);
    /* A put on a lease etcd no longer has fails as if it had lapsed on the
     * way (transient for a lease of our own, etcd.c): in a session it is
     * the session that is gone. */
    if (rc < 0 && rc != VIGIL_EBUSY && vigil_etcd__transient(rc) &&
        (vigil_keepalive_lost(s->ka) || vigil_etcd__keepalive(s->e, s->lease.id) == VIGIL_ELOST))
        return VIGIL_ELOST;
    if (rc < 0)
        return rc;
    fill(s, key, owner, token, out);
    return 0;
}

int vigil_etcd_session_acquire_wait(vigil_etcd_session *s, const char *key, const char *owner, uint64_t timeout_ns,
                                    vigil_lease *out)
{
    int rc = session_args(s, key, owner, out);
    if (rc < 0)
        return rc;
    struct vigil_etcd_place p = { .id = s->lease.id, .granted = s->granted, .shared = true };
    int64_t start = vigil_etcd__wall_ns();
    if ((rc = vigil_etcd__queue_wait(s->e, &p, key, owner, (uint64_t)s->granted, timeout_ns)) < 0) {
        if (rc == VIGIL_ETIMEDOUT)
            vigil_etcd__why_wait(s->e, start); /* the trouble it met, if any */
        return rc == VIGIL_ELOST || vigil_keepalive_lost(s->ka) ? VIGIL_ELOST : rc;
    }
    fill(s, key, owner, p.rev, out);
    return 0;
}

/* Resign and proclaim: the txn "our key, at the token's revision, on our
 * lease", then delete it or put the value; VIGIL_ELOST when it is not
 * ours any more. */
static int if_held(vigil_etcd *e, const vigil_lease *lease, int then, const char *value)
{
    vigil_etcd__why("%s", "");
    if (!e || !lease)
        return -EINVAL;
    size_t k = strnlen(lease->key, sizeof(lease->key));
    if (k == 0 || k == sizeof(lease->key) || lease->id <= 0 || lease->token == 0 || lease->token > INT64_MAX)
        return VIGIL_ERANGE;
    bool held = false;
    vigil_etcd__lock(e);
    int rc = vigil_etcd__if_held_locked(e, lease, then, value, &held);
    vigil_etcd__unlock(e);
    return rc < 0 ? rc : held ? 0 : VIGIL_ELOST;
}

int vigil_etcd_resign(vigil_etcd *e, const vigil_lease *lease)
{
    return if_held(e, lease, VIGIL_ETCD_IF_HELD_DELETE, NULL);
}

int vigil_etcd_proclaim(vigil_etcd *e, vigil_lease *lease, const char *owner)
{
    if (!owner)
        return -EINVAL;
    size_t ol = strlen(owner);
    if (ol >= sizeof(lease->owner))
        return VIGIL_ERANGE;
    int rc = if_held(e, lease, VIGIL_ETCD_IF_HELD_PUT, owner);
    if (rc == 0) {
        memset(lease->owner, 0, sizeof(lease->owner));
        memcpy(lease->owner, owner, ol);
    }
    return rc;
}
