/* SPDX-License-Identifier: MIT */
/*
 * vigil_etcd_acquire_wait: a place in KEY's queue, and a watch on the one
 * ahead of it, as etcd's concurrency Mutex.Lock and Election.Campaign wait
 * (the layout is told in etcd.c).
 *
 *   join    grant a lease, create our key KEY/<hex> (the acquire txn). The
 *           lowest create_revision under KEY/ holds it: ours, and we are
 *           done; another, and we wait.
 *   look    txn: if our key is still ours, range the last key under KEY/
 *           created before it. None: our turn. Our key gone (deleted, or
 *           its lease lapsed): our place is lost, take a new one.
 *   watch   on that key, from the look's revision + 1, for its deletion;
 *           then look again (the one ahead may have been a waiter that
 *           left, with the holder still there). Waiting on the stream is
 *           poll(2) on its socket: nothing is asked of etcd while nothing
 *           changes, but for the lease's keepalive every TTL / 3.
 *
 * Our lease must outlive the wait, so the waiter keeps it alive itself;
 * and once it is our turn it renews once more before returning, so the
 * caller gets a lease whose TTL runs from a request just sent, as after
 * vigil_etcd_acquire. A timeout, or any failure, revokes our lease, which
 * deletes our key: nobody is left waiting behind a waiter who left.
 */
#define _GNU_SOURCE
#include "etcd_internal.h"
#include "keepalive_internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#define NS_PER_MS   1000000ull
#define LOOK_AGAIN  1          /* watch_for_delete: the stream ended, look again */
#define BACKOFF_MIN 50u        /* ms, after a failure, doubling ... */
#define BACKOFF_MAX 1000u      /* ... up to this */

/* Our key in the queue. */
struct place {
    const char *key;
    int64_t     id;
    int64_t     granted;    /* seconds */
    uint64_t    rev;        /* our key's create_revision: the token, once ours */
    uint64_t    renewed_ns; /* when the request that last kept the lease was sent */
};

#define now_ns vigil_etcd__now_ns

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t ttl_ns(const struct place *p)
{
    return (uint64_t)p->granted * 1000 * NS_PER_MS;
}

/* 0 we hold the key, VIGIL_EBUSY we wait in *p, else an error (and no
 * lease left behind). */
static int join(vigil_etcd *e, const char *key, const char *owner, uint64_t secs, struct place *p)
{
    char body[4096];
    struct vigil_etcd_reply r;
    p->key = key;
    p->renewed_ns = now_ns();
    vigil_etcd__lock(e);
    int rc = vigil_etcd__grant_locked(e, secs, &p->id, &p->granted);
    if (rc == 0) {
        rc = vigil_etcd__body_acquire(body, sizeof(body), key, owner, p->id);
        if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
            rc = vigil_etcd__parse_acquire(r.http, r.body, r.len, p->id, &p->rev);
        if (rc < 0 && rc != VIGIL_EBUSY)
            (void)vigil_etcd__revoke_locked(e, p->id);
    }
    vigil_etcd__unlock(e);
    return rc;
}

static void leave(vigil_etcd *e, const struct place *p)
{
    vigil_etcd__lock(e);
    (void)vigil_etcd__revoke_locked(e, p->id);
    vigil_etcd__unlock(e);
}

static int keep(vigil_etcd *e, struct place *p)
{
    uint64_t t0 = now_ns();
    int rc = vigil_etcd__keepalive(e, p->id);
    if (rc == 0)
        p->renewed_ns = t0;
    return rc;
}

/* 0 and the key ahead of ours (base64) with the revision to watch from,
 * VIGIL_EVACANT our turn, VIGIL_ELOST our key is gone, or an error. */
static int look(vigil_etcd *e, const struct place *p, char *pred, size_t cap, int64_t *rev)
{
    char body[2048];
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__body_pred(body, sizeof(body), p->key, p->id, p->rev);
    vigil_etcd__lock(e);
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
        rc = vigil_etcd__parse_pred(r.http, r.body, r.len, pred, cap, rev);
    vigil_etcd__unlock(e);
    return rc;
}

/* Watches pred from rev until it is deleted (0), the stream ends
 * (LOOK_AGAIN), the deadline passes (VIGIL_ETIMEDOUT), our lease is lost
 * (VIGIL_ELOST: refused, or not kept for a whole TTL), or an error. */
static int watch_for_delete(vigil_etcd *e, struct place *p, const char *pred, int64_t rev, uint64_t deadline)
{
    struct vigil_etcd_watch *w;
    int rc = vigil_etcd__watch_open(e, pred, rev, &w);
    if (rc < 0)
        return rc;
    uint64_t period = ttl_ns(p) / 3, next_keep = p->renewed_ns + period;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            rc = VIGIL_ETIMEDOUT;
            break;
        }
        if (now >= next_keep) {
            rc = keep(e, p);
            if (rc == VIGIL_ELOST)
                break;
            if (rc < 0 && now_ns() - p->renewed_ns >= ttl_ns(p)) {
                rc = VIGIL_ELOST; /* not kept for a whole TTL: lapsed, or about to */
                break;
            }
            /* Kept: the next at a third of the TTL; failed: retry sooner. */
            next_keep = rc == 0 ? p->renewed_ns + period : now_ns() + period / 4;
            continue;
        }
        uint64_t until = deadline < next_keep ? deadline : next_keep;
        uint64_t ms = (until - now + NS_PER_MS - 1) / NS_PER_MS;
        rc = vigil_etcd__watch_wait(w, ms > INT_MAX ? INT_MAX : (int)ms);
        if (rc == VIGIL_ETCD_WATCH_DELETED) {
            rc = 0;
            break;
        }
        if (rc == VIGIL_ETCD_WATCH_CANCELED) {
            rc = LOOK_AGAIN;
            break;
        }
        if (rc < 0)
            break;
    }
    vigil_etcd__watch_close(w);
    return rc;
}

/* From a place in the queue to the key: 0 ours, VIGIL_ETIMEDOUT,
 * VIGIL_ELOST (our place is gone), or an error. */
static int wait_turn(vigil_etcd *e, struct place *p, uint64_t deadline)
{
    char pred[256];
    int64_t rev = 0;
    bool woke = false, ended = false;
    unsigned backoff = 0;
    for (;;) {
        /* After a wake, renew first: if it is our turn, the lease's TTL
         * then runs from this request, and the look after it proves the
         * key ours. */
        int rc = woke ? keep(e, p) : 0;
        if (rc == 0)
            rc = look(e, p, pred, sizeof(pred), &rev);
        if (rc == VIGIL_EVACANT)
            return 0;
        if (rc == 0) {
            rc = watch_for_delete(e, p, pred, rev + 1, deadline);
            woke = true;
            if (rc == 0) {
                ended = false;
                backoff = 0;
                continue; /* deleted: look again at once */
            }
            if (rc == LOOK_AGAIN && !ended) {
                ended = true; /* cancelled, compacted: once at once, then with backoff */
                continue;
            }
        }
        if (rc == VIGIL_ETIMEDOUT || rc == VIGIL_ELOST)
            return rc;
        /* A failure, or a stream that keeps ending: ride it out while our
         * lease may still live, backing off. */
        woke = true;
        uint64_t now = now_ns();
        if (now - p->renewed_ns >= ttl_ns(p))
            return VIGIL_ELOST;
        if (now >= deadline)
            return VIGIL_ETIMEDOUT;
        backoff = !backoff ? BACKOFF_MIN : backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
        uint64_t pause = backoff * NS_PER_MS;
        if (deadline - now <= pause) {
            sleep_ns(deadline - now);
            return VIGIL_ETIMEDOUT;
        }
        sleep_ns(pause);
    }
}

int vigil_etcd_acquire_wait(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                            uint64_t timeout_ns, vigil_lease *out)
{
    uint64_t secs;
    int rc = vigil_etcd__acquire_args(e, key, owner, ttl_ms, out, &secs);
    if (rc < 0)
        return rc;
    uint64_t start = now_ns();
    uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - 1 - start ? UINT64_MAX
                                                                                         : start + timeout_ns;
    struct place p;
    for (;;) {
        rc = join(e, key, owner, secs, &p);
        if (rc == 0)
            break;
        if (rc != VIGIL_EBUSY)
            return rc;
        rc = timeout_ns == 0 ? VIGIL_ETIMEDOUT : wait_turn(e, &p, deadline);
        if (rc == 0)
            break;
        leave(e, &p); /* our key goes with our lease */
        /* Our place was lost (the key deleted under us, or the lease not
         * kept for a TTL): a new one, at the back, while time remains. */
        if (rc != VIGIL_ELOST || now_ns() >= deadline)
            return rc == VIGIL_ELOST ? VIGIL_ETIMEDOUT : rc;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, strlen(key));
    memcpy(out->owner, owner, strlen(owner));
    out->token = p.rev;
    out->ttl_ms = (uint64_t)p.granted * 1000;
    out->id = p.id;
    vigil_lease_note_sent(out, p.renewed_ns); /* the TTL runs from the last keepalive sent */
    return 0;
}
