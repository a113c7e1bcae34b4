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
 *   acquire   see A KEY PUT IN A SESSION below.
 *   resign    txn: if our key still has the token's create revision and our
 *             lease, delete it. The lease lives on for the other keys
 *             (Election.Resign). Idempotent by construction: a copy that
 *             lands late finds the key gone, or made again by a later
 *             acquire at another create revision.
 *   proclaim  txn: the same check, and our key's mod_revision as this call
 *             read it, then a put of the new value on our key under our
 *             lease: the value changes, the create revision (the token,
 *             the leader's term) does not (Election.Proclaim). The
 *             mod_revision is the fence (group_fence.c, THE RULE): a copy
 *             of this proclaim that lands late finds it moved by the one
 *             that landed, or by any later proclaim, and fails; so a late
 *             proclaim never writes over a newer value. The first sending
 *             compares nothing more and only reads the key (its failure
 *             branch): two round trips.
 *
 * A KEY PUT IN A SESSION. The session's lease lives on after a call gives
 * up, so a put on it that lands late (a frozen member resumed) would leave
 * a key in the queue that no call knows of: a waiter nobody serves and,
 * once the holder goes, a holder nobody knows. So a call's put hangs first
 * on a lease of the call's own, which the call revokes whatever happens:
 *
 *   grant    L, the session's TTL
 *   acquire  the acquire txn of etcd.c, for KEY/<session hex>, put on L
 *   move     txn: if create(OWN) == token && lease(OWN) == L: put OWN (the
 *            same value) on the session's lease; its create_revision, the
 *            token and the place in the queue, stays
 *   revoke   L: a copy of the acquire that lands after it fails whole (its
 *            lease is gone); a copy of the move finds the key on the
 *            session's lease, or gone with L
 *
 * Four round trips where one would do, the price of never holding a key
 * unknowingly. A key found there already, on the session's lease or on
 * another call's, is another call's of the same session (one key per
 * session and KEY, as concurrency.Mutex): this call neither moves nor
 * deletes it, and a VIGIL_EBUSY leaves it queued. What a call could not clean up for want of
 * an answer (L unrevoked, or our key on the session's lease) is kept in
 * the session and done before its next acquire, and by the session's
 * keepalive after each renewal that etcd answers (our key on the kept-
 * alive lease would otherwise stay queued, and once the holder goes be
 * held unknowingly, for as long as the session lives); the caller is told
 * the error meanwhile, never a held or a busy that may not be so. Nothing
 * kept is dropped: past LEFT_MAX the session gives itself up (renews no
 * more, and is lost: its lease lapses within a TTL, and every key on it).
 *
 * A key held in a session needs no keepalive of its own: the session's
 * renews the one lease they share, and its fd says when it is lost, and
 * with it every key. vigil_etcd_renew still checks one key (its lease
 * alive and the key still ours), as for a key held alone.
 */
#define _GNU_SOURCE
#include "recipes_internal.h"
#include "keepalive_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENDS      3   /* a request whose answer never came, sent again at once */
#define CLEANUP_MS 600 /* what a call's clean-up gets past a wait's deadline */
/* Clean-ups left at once, at most: past it (calls of many threads that
 * could not clean up, while neither the next nor a renewal could) the
 * session is given up, and what is left goes with its lease. */
#define LEFT_MAX   8

struct vigil_etcd_session {
    vigil_etcd      *e;
    vigil_lease      lease; /* the session's lease, as the keepalive knows it */
    int64_t          granted; /* seconds */
    vigil_keepalive *ka;
    /* What calls left for want of an answer, done before the next (the
     * lock taken only after e's, never before it). */
    pthread_mutex_t  lock;
    pthread_mutex_t  settling;  /* held by a settle for all of it: a call waits for the keepalive's */
    uint64_t         renewed_ns; /* the keepalive's last renewal that etcd answered (its thread's) */
    _Atomic bool     given_up;  /* a clean-up found no room: renew no more */
    struct left {
        int64_t  lease;                   /* a call's lease to revoke; or 0 and ... */
        char     key[VIGIL_ETCD_KEY_MAX]; /* ... our key KEY/<hex>'s KEY (full) to delete ... */
        uint64_t rev;                     /* ... if it still has this create revision */
    } left[LEFT_MAX];
    unsigned         nleft;
};

static int settle(vigil_etcd_session *s, uint64_t deadline_ns);

/* The keepalive's renewal, and then what calls left, while etcd answers:
 * bounded to end well before the lease's deadline as the keepalive
 * reckons it (from the renewal before this one), which it checks when
 * this returns. */
static int session_renew(void *ctx, const vigil_lease *lease)
{
    vigil_etcd_session *s = ctx;
    if (atomic_load_explicit(&s->given_up, memory_order_acquire))
        return VIGIL_ELOST; /* renewed no more: the lease lapses, and every key on it */
    uint64_t sent = vigil_etcd__now_ns(), until = s->renewed_ns + (uint64_t)s->granted * 750000000ull;
    int rc = vigil_etcd__keepalive(s->e, lease->id);
    if (rc < 0)
        return rc;
    s->renewed_ns = sent;
    pthread_mutex_lock(&s->lock);
    bool pending = s->nleft > 0;
    pthread_mutex_unlock(&s->lock);
    if (pending && vigil_etcd__now_ns() < until && pthread_mutex_trylock(&s->settling) == 0) {
        (void)settle(s, until); /* what fails stays for the next */
        pthread_mutex_unlock(&s->settling);
    }
    return 0;
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
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->settling, NULL);
    vigil_etcd__lock(e);
    uint64_t sent = vigil_etcd__now_ns();
    rc = vigil_etcd__grant_locked(e, secs, &s->lease.id, &s->granted);
    vigil_etcd__unlock(e);
    s->renewed_ns = sent;
    if (rc < 0) {
        pthread_mutex_destroy(&s->settling);
        pthread_mutex_destroy(&s->lock);
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
        pthread_mutex_destroy(&s->settling);
        pthread_mutex_destroy(&s->lock);
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
    int rc = vigil_etcd__revoke_locked(s->e, s->lease.id); /* and every key on it */
    for (unsigned i = 0; i < s->nleft; i++)
        if (s->left[i].lease)
            (void)vigil_etcd__revoke_locked(s->e, s->left[i].lease); /* else it lapses at its TTL, never renewed */
    vigil_etcd__unlock(s->e);
    pthread_mutex_destroy(&s->settling);
    pthread_mutex_destroy(&s->lock);
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

/* Lost, or given up (its keepalive told to renew no more). */
static bool session_gone(vigil_etcd_session *s)
{
    return vigil_keepalive_lost(s->ka) || atomic_load_explicit(&s->given_up, memory_order_acquire);
}

bool vigil_etcd_session_lost(const vigil_etcd_session *s)
{
    return !s || session_gone((vigil_etcd_session *)s);
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
    return rc < 0 ? rc : session_gone(s) ? VIGIL_ELOST : 0;
}

/* ---- a key put in a session ---------------------------------------------- */

/* With e's lock held: our key KEY/<session hex> (full: KEY with the
 * namespace) deleted if it still has create revision rev on the
 * session's lease, sent again while unanswered: 0, or the error. */
static int delete_sure(vigil_etcd_session *s, const char *full, uint64_t rev)
{
    char body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    bool held;
    int rc = vigil_etcd__body_if_held(body, sizeof(body), full, rev, s->lease.id, VIGIL_ETCD_IF_HELD_DELETE, NULL);
    for (int i = 0, sent = rc; i < SENDS && sent == 0; i++) {
        if ((rc = vigil_etcd__call(s->e, "v3/kv/txn", body, &r)) == 0)
            return vigil_etcd__parse_txn(r.http, r.body, r.len, &held);
    }
    return rc;
}

/* What a call leaves to the session's next (with e's lock held or not:
 * s->lock is taken only after it): a lease to revoke, or (lease 0) our
 * key under full to delete at rev. */
static void leave_behind(vigil_etcd_session *s, int64_t lease, const char *full, uint64_t rev)
{
    pthread_mutex_lock(&s->lock);
    if (s->nleft < LEFT_MAX) {
        struct left *l = &s->left[s->nleft++];
        l->lease = lease;
        snprintf(l->key, sizeof(l->key), "%s", full ? full : "");
        l->rev = rev;
    } else if (!atomic_exchange_explicit(&s->given_up, true, memory_order_acq_rel)) {
        /* No room: never dropped, the session itself goes (its keepalive
         * renews no more), and the key with its lease. */
        vigil_etcd__why("session %llx: %d clean-ups unanswered; given up, its keys go with its lease within a TTL",
                        (unsigned long long)s->lease.id, LEFT_MAX + 1);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Does what earlier calls left, the leases first (a move sent late then
 * finds nothing to move), s->settling held, nothing sent past deadline_ns:
 * 0, or the first error (then the call that asked does nothing: what could
 * not be done stays for the next). */
static int settle(vigil_etcd_session *s, uint64_t deadline_ns)
{
    struct left todo[LEFT_MAX];
    pthread_mutex_lock(&s->lock);
    unsigned n = s->nleft;
    memcpy(todo, s->left, n * sizeof(todo[0]));
    s->nleft = 0;
    pthread_mutex_unlock(&s->lock);
    int rc = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < n; i++) {
            struct left *l = &todo[i];
            if ((pass == 0) != (l->lease != 0))
                continue;
            vigil_etcd__lock_until(s->e, deadline_ns, 0);
            int r = l->lease  ? vigil_etcd__revoke_sure_locked(s->e, l->lease)
                    : rc == 0 ? delete_sure(s, l->key, l->rev)
                              : rc;
            vigil_etcd__unlock(s->e);
            if (r < 0) {
                leave_behind(s, l->lease, l->key, l->rev);
                rc = rc < 0 ? rc : r;
            }
        }
    }
    return rc;
}

/* With e's lock held: the move of our key from the call's lease L to the
 * session's: 0 moved (now, or by an earlier sending), 1 not there (gone
 * with L, which lapsed), or the error (unknown). */
static int move_locked(vigil_etcd_session *s, const char *full, uint64_t rev, int64_t call_lease, const char *owner)
{
    char body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    struct vigil_etcd_own own;
    int rc = vigil_etcd__body_put_if(body, sizeof(body), full, s->lease.id, rev, call_lease, -1, s->lease.id, owner);
    for (int i = 0, sent = rc; i < SENDS && sent == 0; i++) {
        if ((rc = vigil_etcd__call(s->e, "v3/kv/txn", body, &r)) == 0 &&
            (rc = vigil_etcd__parse_put_if(r.http, r.body, r.len, &own)) == 0)
            return own.ok || (own.found && own.create == (int64_t)rev && own.lease == s->lease.id) ? 0 : 1;
        if (!vigil_etcd__transient(rc))
            break;
    }
    return rc;
}

int vigil_etcd__session_put_locked(vigil_etcd_session *s, const char *full, const char *owner, uint64_t *rev,
                                   bool *mine)
{
    vigil_etcd *e = s->e;
    char body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    int64_t call_lease = 0, granted = 0, on = 0;
    uint64_t token = 0;
    int rc = vigil_etcd__grant_locked(e, (uint64_t)s->granted, &call_lease, &granted);
    if (rc < 0)
        return rc;
    if ((rc = vigil_etcd__body_acquire_as(body, sizeof(body), full, owner, s->lease.id, call_lease)) == 0 &&
        (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
        rc = vigil_etcd__parse_acquire_on(r.http, r.body, r.len, &on, &token);
    /* Named after the session and on another lease than the call's: put
     * by another call of the session (moved to the session's lease, or
     * about to be), which this one never moves nor deletes. */
    bool placed = rc == 0 || rc == VIGIL_EBUSY, ours = placed && on == call_lease;
    int mv = 0;
    if (ours && (mv = move_locked(s, full, token, call_lease, owner)) != 0)
        rc = mv == 1 ? -ETIMEDOUT : mv; /* gone with L, the server too slow to keep it; or unknown */
    /* L goes whatever happened: no copy of the acquire can land after.
     * The clean-up gets CLEANUP_MS past a wait's deadline. */
    char why[256];
    vigil_etcd__why_save(why, sizeof(why));
    uint64_t deadline = e->deadline_ns, floor = vigil_etcd__now_ns() + CLEANUP_MS * 1000000ull;
    long attempt = e->attempt_ms;
    if (deadline < floor)
        vigil_etcd__bound(e, floor, 0);
    int rv = vigil_etcd__revoke_sure_locked(e, call_lease);
    if (rv < 0 && (rc == 0 || rc == VIGIL_EBUSY))
        rc = rv; /* L may live on, and a copy land on it: neither held nor busy can be told */
    bool failed = rc < 0 && rc != VIGIL_EBUSY;
    /* A call that fails takes its key away: gone with L, or (the move's
     * outcome unknown) deleted from the session's lease, now or before
     * the session's next call (after L's revoke: a move sent late then
     * finds nothing to move). */
    if (rv < 0)
        leave_behind(s, call_lease, NULL, 0);
    if (ours && failed && (rv < 0 || (mv < 0 && delete_sure(s, full, token) < 0)))
        leave_behind(s, 0, full, token);
    vigil_etcd__bound(e, deadline, (uint32_t)attempt);
    vigil_etcd__why_restore(why);
    if (!failed) {
        *rev = token;
        *mine = ours;
    }
    return rc;
}

int vigil_etcd__session_unqueue_locked(vigil_etcd_session *s, const char *full, uint64_t rev)
{
    int rc = delete_sure(s, full, rev);
    if (rc < 0)
        leave_behind(s, 0, full, rev);
    return rc;
}

/* What earlier calls left, done before a call's own (waiting for the
 * keepalive's settle, if one is under way). */
static int settle_first(vigil_etcd_session *s)
{
    pthread_mutex_lock(&s->settling);
    int rc = settle(s, UINT64_MAX);
    pthread_mutex_unlock(&s->settling);
    return rc;
}

int vigil_etcd_session_acquire(vigil_etcd_session *s, const char *key, const char *owner, vigil_lease *out)
{
    int rc = session_args(s, key, owner, out);
    if (rc < 0 || (rc = settle_first(s)) < 0)
        return rc;
    char full[VIGIL_ETCD_KEY_MAX];
    uint64_t token = 0;
    bool mine = false;
    if ((rc = vigil_etcd__full_key(s->e, key, full, sizeof(full))) < 0)
        return rc;
    vigil_etcd__lock(s->e);
    rc = vigil_etcd__session_put_locked(s, full, owner, &token, &mine);
    /* Queued behind the holder: our key taken back out (the lease stays,
     * the session's), unless another call of the session queued it. Not
     * sure it went: the error, never a busy that may become a hold. */
    if (rc == VIGIL_EBUSY && mine)
        rc = vigil_etcd__session_unqueue_locked(s, full, token) < 0 ? -ETIMEDOUT : VIGIL_EBUSY;
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
    if (rc < 0 || (rc = settle_first(s)) < 0)
        return rc;
    struct vigil_etcd_place p = { .id = s->lease.id, .granted = s->granted, .session = s };
    int64_t start = vigil_etcd__wall_ns();
    if ((rc = vigil_etcd__queue_wait(s->e, &p, key, owner, (uint64_t)s->granted, timeout_ns)) < 0) {
        if (rc == VIGIL_ETIMEDOUT)
            vigil_etcd__why_wait(s->e, start); /* the trouble it met, if any */
        return rc == VIGIL_ELOST || vigil_keepalive_lost(s->ka) ? VIGIL_ELOST : rc;
    }
    fill(s, key, owner, p.rev, out);
    return 0;
}

/* The checks of resign and proclaim: 0, or the error. */
static int held_args(vigil_etcd *e, const vigil_lease *lease)
{
    vigil_etcd__why("%s", "");
    if (!e || !lease)
        return -EINVAL;
    size_t k = strnlen(lease->key, sizeof(lease->key));
    if (k == 0 || k == sizeof(lease->key) || lease->id <= 0 || lease->token == 0 || lease->token > INT64_MAX)
        return VIGIL_ERANGE;
    return 0;
}

/* With e's lock held, after a resign found our key not held: 0 when it is
 * gone while our lease lives (by a copy of this resign that landed first:
 * sent twice), VIGIL_ELOST when it is there otherwise or our lease is
 * gone, or the error. */
static int gone_by_us(vigil_etcd *e, const vigil_lease *lease)
{
    char full[VIGIL_ETCD_KEY_MAX], body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    struct vigil_etcd_own own;
    int64_t left, granted;
    int rc = vigil_etcd__full_key(e, lease->key, full, sizeof(full));
    /* mod_revision 0 never holds: a txn that only reads our key. */
    if (rc == 0)
        rc = vigil_etcd__body_put_if(body, sizeof(body), full, lease->id, lease->token, lease->id, 0, lease->id, "");
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0 &&
        (rc = vigil_etcd__parse_put_if(r.http, r.body, r.len, &own)) == 0)
        rc = vigil_etcd__store_behind(e, &own.at, lease->token);
    if (rc < 0)
        return rc;
    if (own.ok || own.found)
        return VIGIL_ELOST;
    if ((rc = vigil_etcd__body_id(body, sizeof(body), lease->id)) < 0 ||
        (rc = vigil_etcd__call(e, "v3/lease/timetolive", body, &r)) < 0)
        return rc;
    rc = vigil_etcd__parse_ttl(r.http, r.body, r.len, &left, &granted);
    return rc == VIGIL_EVACANT ? VIGIL_ELOST : rc;
}

int vigil_etcd_resign(vigil_etcd *e, const vigil_lease *lease)
{
    int rc = held_args(e, lease);
    if (rc < 0)
        return rc;
    bool held = false;
    vigil_etcd__lock(e);
    rc = vigil_etcd__if_held_locked(e, lease, VIGIL_ETCD_IF_HELD_DELETE, NULL, &held);
    if (rc == 0 && !held)
        rc = gone_by_us(e, lease);
    vigil_etcd__unlock(e);
    return rc;
}

#define PROCLAIM_TRIES 8 /* readings of our key, while other proclaims of ours move it under us */

int vigil_etcd_proclaim(vigil_etcd *e, vigil_lease *lease, const char *owner)
{
    int rc = held_args(e, lease);
    if (rc < 0 || !owner)
        return rc < 0 ? rc : -EINVAL;
    size_t ol = strlen(owner);
    char full[VIGIL_ETCD_KEY_MAX], body[VIGIL_ETCD_REQ_MAX];
    if (ol >= sizeof(lease->owner))
        return VIGIL_ERANGE;
    if ((rc = vigil_etcd__full_key(e, lease->key, full, sizeof(full))) < 0)
        return rc;
    int64_t mod = 0; /* 0: the first sending only reads our key's mod_revision */
    rc = -EAGAIN;    /* moved under every reading: a churn we do not outlast */
    vigil_etcd__lock(e);
    for (int tries = 0; tries < PROCLAIM_TRIES && rc == -EAGAIN; tries++) {
        struct vigil_etcd_own own;
        struct vigil_etcd_reply r;
        if ((rc = vigil_etcd__body_put_if(body, sizeof(body), full, lease->id, lease->token, lease->id, mod, lease->id,
                                          owner)) < 0)
            break;
        /* Sent again while unanswered: every copy compares mod, one lands. */
        for (int i = 0; i < SENDS; i++) {
            if ((rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0 &&
                (rc = vigil_etcd__parse_put_if(r.http, r.body, r.len, &own)) == 0)
                break;
            if (!vigil_etcd__transient(rc))
                break;
        }
        if (rc < 0)
            break; /* unknown: it lands before any later write of our key, or never */
        if ((rc = vigil_etcd__store_behind(e, &own.at, lease->token)) < 0 || own.ok)
            break; /* a store gone back below the token, or another cluster: lost */
        if (!own.found || own.create != (int64_t)lease->token || own.lease != lease->id)
            rc = VIGIL_ELOST;
        else if (mod > 0 && own.mod != mod && own.value_fits && strcmp(own.value, owner) == 0)
            rc = 0; /* a copy of ours landed, or another proclaim of the same value after the reading */
        else
            rc = -EAGAIN, mod = own.mod;
    }
    vigil_etcd__unlock(e);
    if (rc == 0) {
        memset(lease->owner, 0, sizeof(lease->owner));
        memcpy(lease->owner, owner, ol);
    }
    return rc;
}
