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
 *           changes, but for the lease's keepalive every 0.32 TTL.
 *
 * SECOND IN LINE (model: model/etcd_queue.pml, run "second"; tests:
 * etcd_test_queue.c, second_*). The look ranges two keys below ours; when
 * there is one, P, it is the holder, and the waiter watches all of KEY/
 * (puts too) from the look's revision L + 1 instead of P alone. Then P's
 * deletion at R, with nothing done to our key in (L, R], is the key ours
 * at R, and the waiter returns on the event itself, without a request:
 *   - at L our key K stood (the look's compare: created at our revision,
 *     on our lease; a key of our name made again, by a late copy of our
 *     acquire txn after a deletion, fails it: our token would not be its
 *     create revision) and P was the only key under KEY/ created before it;
 *   - create revisions only grow: a key made after L, or P made again,
 *     comes after K; so at R, K has the lowest create revision under KEY/;
 *   - K untouched in (L, R]: a watch from L + 1 carries every event of
 *     KEY/ in revision order, one revision whole in a message, so a
 *     deletion of K (our lease lapsed or revoked, etcdctl del) or a put
 *     over it comes before P's deletion or beside it; either sends the
 *     waiter to look again (parse_watch_keys). From L + 1, never from the
 *     watch's own creation: the waiter may stand still between the look
 *     and the watch request, and a deletion of K there must be in it;
 *   - our lease alive: the event is trusted only while the waiter's
 *     renewal is not yet due (under 0.32 TTL since the last keepalive was
 *     sent), so the lease it returns has at least 0.68 of its TTL left,
 *     timed from that send. A waiter stopped past that (SIGSTOP, a swap
 *     storm) keeps the event for nothing: it renews and looks, and a lease
 *     lapsed meanwhile is VIGIL_ELOST there, a new place at the back.
 * A member behind L only delays the stream (it sends from L + 1 once it
 * has it); a compaction past L cancels the watch: look again. A deletion
 * of the one ahead when it was not the holder (the look found a second
 * key) decides nothing: look again, as before (model: error runs
 * "any_ahead", a waiter that trusts it; "blind", one that does not watch
 * its own key; "stale", one that trusts the event with its renewal
 * overdue; "from_now", a watch from its own creation; "recreated", a look
 * that asks only that our key exist. Tests second_deleted_before_watch
 * and second_recreated).
 *
 * A watch can fall silent without a word: its member SIGSTOPped or hung,
 * or a proxy in front of it that sent the headers and then nothing. So
 * the watch is a hint, never the only way to learn: at every renewal
 * (0.32 TTL) the waiter looks again itself, through the handle's
 * requests, which pass over an endpoint that does not answer within half
 * a renewal period; and it moves the watch to another endpoint when the
 * watch has not said a word (not even "created") within that time, or
 * when the requests have left its endpoint behind. A freed key is seen
 * within one renewal period and one such bound: under 2 x 0.32 x TTL.
 * The watch carries require-leader (etcd_watch.c), so a member cut off
 * from its leader refuses it, and it moves at once.
 *
 * Our lease must outlive the wait, so the waiter keeps it alive itself;
 * when its turn is found by a look it renews first, so the caller gets a
 * lease whose TTL runs from a request just sent, as after
 * vigil_etcd_acquire; found by the event (SECOND IN LINE), from the last
 * renewal, under 0.32 TTL before. A timeout, or a failure that ends the wait, revokes
 * our lease (in a session: deletes our key), so nobody is left waiting
 * behind a waiter who left.
 *
 * The deadline bounds every request (VIGIL_ETIMEDOUT, never a request's
 * own -ETIMEDOUT, once it has passed). Without one (UINT64_MAX) the wait
 * goes on through an outage of any length: our place is kept when etcd
 * comes back with our lease alive (a restart gives leases a fresh TTL),
 * and taken again at the back when it lapsed. Only what no retry mends ends it early: authentication or
 * permission refused (-EACCES), TLS (VIGIL_ETLS), a reply that is not
 * etcd's (-EPROTO), bad arguments.
 */
#define _GNU_SOURCE
#include "recipes_internal.h"
#include "keepalive_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_MS   1000000ull
#define LOOK_AGAIN  1          /* the stream ended, or moves: look again */
#define BACKOFF_MIN 50u        /* ms, after a failure, doubling ... */
#define BACKOFF_MAX 1000u      /* ... up to this */
#define ATTEMPT_MIN 200u       /* ms: the least a request of the wait gets on one endpoint */
#define LEAVE_MS    200u       /* ms: the revoke of a waiter that leaves, past its deadline */

#define now_ns vigil_etcd__now_ns

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t ttl_ns(const struct vigil_etcd_place *p)
{
    return (uint64_t)p->granted * 1000 * NS_PER_MS;
}

/* The keepalive's beat (keepalive.c): 0.32 TTL. */
static uint64_t period_ns(const struct vigil_etcd_place *p)
{
    return ttl_ns(p) / 100 * 32;
}

/* A request of the wait on one endpoint: at most half a renewal period
 * (at least ATTEMPT_MIN), so that a member that hangs costs one such
 * bound before the next endpoint answers. */
static uint32_t attempt_ms(uint64_t ttl_s)
{
    uint64_t ms = ttl_s * 1000 / 100 * 16;
    return ms < ATTEMPT_MIN ? ATTEMPT_MIN : ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

bool vigil_etcd__transient(int rc)
{
    switch (rc) {
    case -ECONNREFUSED: case -ECONNRESET: case -ECONNABORTED: case -ETIMEDOUT: case -EAGAIN:
    case -EHOSTUNREACH: case -ENETUNREACH: case -ENETDOWN: case -EPIPE: case -EIO: case -ECANCELED:
    case VIGIL_ETIMEDOUT:
        return true;
    default:
        return false;
    }
}

/* 0 we hold the key, VIGIL_EBUSY we wait in *p, else an error (and no
 * lease of ours left behind). In a session the lease is p->id already. */
static int join(vigil_etcd *e, const char *owner, uint64_t secs, struct vigil_etcd_place *p, uint64_t deadline)
{
    char body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    p->renewed_ns = now_ns();
    vigil_etcd__lock_until(e, deadline, attempt_ms(secs));
    if (p->session) {
        /* On a lease of the join's own first, then moved to the session's
         * (etcd_session.c, A KEY PUT IN A SESSION). */
        int rc = vigil_etcd__session_put_locked(p->session, p->key, owner, &p->rev, &p->mine);
        vigil_etcd__unlock(e);
        return rc;
    }
    int rc = vigil_etcd__grant_locked(e, secs, &p->id, &p->granted);
    if (rc == 0) {
        rc = vigil_etcd__body_acquire(body, sizeof(body), p->key, owner, p->id);
        if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
            rc = vigil_etcd__parse_acquire(r.http, r.body, r.len, p->id, &p->rev);
        if (rc < 0 && rc != VIGIL_EBUSY) {
            char why[256];
            vigil_etcd__why_save(why, sizeof(why));
            vigil_etcd__bound(e, now_ns() + LEAVE_MS * NS_PER_MS, 0); /* past the deadline too */
            /* Sent again while unanswered: a held copy of the put that
             * lands later fails whole only once the lease is gone. */
            (void)vigil_etcd__revoke_sure_locked(e, p->id);
            vigil_etcd__why_restore(why);
        }
    }
    vigil_etcd__unlock(e);
    return rc;
}

/* Leaves the queue: our lease revoked (our key goes with it), or in a
 * session our key deleted if it is still ours (and this wait put it).
 * Bounded: a server that does not answer has the lease lapse, or the
 * session delete the key before its next call. */
static void leave(vigil_etcd *e, const struct vigil_etcd_place *p)
{
    char why[256];
    vigil_etcd__why_save(why, sizeof(why));
    uint64_t bound = now_ns() + LEAVE_MS * NS_PER_MS;
    vigil_etcd__lock_until(e, bound, 0);
    if (p->session) {
        if (p->mine)
            (void)vigil_etcd__session_unqueue_locked(p->session, p->key, p->rev);
    } else {
        (void)vigil_etcd__revoke_sure_locked(e, p->id); /* as join's, for a late copy */
    }
    vigil_etcd__unlock(e);
    vigil_etcd__why_restore(why);
}

static int keep(vigil_etcd *e, struct vigil_etcd_place *p, uint64_t deadline)
{
    uint64_t t0 = now_ns();
    vigil_etcd__lock_until(e, deadline, attempt_ms((uint64_t)p->granted));
    int rc = vigil_etcd__keepalive_locked(e, p->id);
    vigil_etcd__unlock(e);
    if (rc == 0)
        p->renewed_ns = t0;
    return rc;
}

/* 0 and the key ahead of ours (base64) with the revision to watch from
 * (*first: it holds KEY), VIGIL_EVACANT our turn, VIGIL_ELOST our key is
 * gone, or an error. */
static int look(vigil_etcd *e, const struct vigil_etcd_place *p, char *pred, size_t cap, int64_t *rev,
                bool *first, uint64_t deadline)
{
    char body[VIGIL_ETCD_REQ_MAX];
    struct vigil_etcd_reply r;
    int rc = vigil_etcd__body_pred(body, sizeof(body), p->key, p->id, p->rev);
    vigil_etcd__lock_until(e, deadline, attempt_ms((uint64_t)p->granted));
    if (rc == 0 && (rc = vigil_etcd__call(e, "v3/kv/txn", body, &r)) == 0)
        rc = vigil_etcd__parse_pred_first(r.http, r.body, r.len, pred, cap, rev, first);
    vigil_etcd__unlock(e);
    return rc;
}

/* The watch on the one ahead, and what the waiter knows of it. */
struct ahead {
    struct vigil_etcd_watch *w;
    char                     pred[VIGIL_ETCD_KEY_B64]; /* watched key, base64 */
    bool                     second;      /* SECOND IN LINE: the watch is on all of KEY/ */
    uint64_t                 opened_ns;
    unsigned                 cur_at_open; /* where the handle's requests went when it opened */
    int                      next_ep;     /* where the next watch goes: -1 the current endpoint */
    unsigned                 ended;       /* cancelled or ended in a row, without news */
};

static void ahead_drop(struct ahead *a, bool move_on)
{
    if (a->w && move_on)
        a->next_ep = (int)vigil_etcd__watch_endpoint(a->w) + 1; /* wraps in stream_setup */
    vigil_etcd__watch_close(a->w);
    a->w = NULL;
}

/* Watches pred from rev (a new watch when it is another key, or the old
 * one moved), and with second (pred holds KEY) all of KEY/, to see what
 * becomes of ours as well: 0, or an error. */
static int ahead_watch(vigil_etcd *e, struct ahead *a, const struct vigil_etcd_place *p, const char *pred,
                       int64_t rev, bool second)
{
    if (a->w && strcmp(a->pred, pred) == 0 && a->second == second)
        return 0;
    ahead_drop(a, false);
    char pfx[VIGIL_ETCD_KEY_B64], end[VIGIL_ETCD_KEY_B64], own[VIGIL_ETCD_KEY_B64];
    struct vigil_etcd_watch_spec spec = { .key_b64 = pred, .rev = rev + 1, .ep = a->next_ep };
    if (second && vigil_etcd__prefix_b64(p->key, pfx, end) == 0 && vigil_etcd__own_b64(p->key, p->id, own) == 0)
        spec = (struct vigil_etcd_watch_spec){ .key_b64 = pfx, .end_b64 = end, .pred_b64 = pred, .own_b64 = own,
                                               .rev = rev + 1, .puts = true, .ep = a->next_ep };
    vigil_etcd__endpoints(e, &a->cur_at_open);
    int rc = vigil_etcd__watch_start(e, &spec, &a->w);
    if (rc == 0) {
        snprintf(a->pred, sizeof(a->pred), "%s", pred);
        a->second = spec.own_b64 != NULL;
        a->opened_ns = now_ns();
        a->next_ep = -1;
    }
    return rc;
}

/* Is the watch to be moved? It has not said a word within a request's
 * bound; or it went where the handle's requests went, and they have left
 * that endpoint since (it failed to answer one: hung, or gone). */
static bool ahead_stale(vigil_etcd *e, const struct ahead *a, uint64_t bound_ns)
{
    if (!a->w)
        return false;
    if (!vigil_etcd__watch_heard(a->w) && now_ns() - a->opened_ns >= bound_ns)
        return true;
    unsigned cur, ep = vigil_etcd__watch_endpoint(a->w);
    return vigil_etcd__endpoints(e, &cur) > 1 && a->cur_at_open == ep && cur != ep;
}

void (*vigil_etcd__wait_test_hook)(const char *step);

/* From a place in the queue to the key: 0 ours, VIGIL_ETIMEDOUT,
 * VIGIL_ELOST (our place is gone), or an error that no retry mends. */
static int wait_turn(vigil_etcd *e, struct vigil_etcd_place *p, uint64_t deadline)
{
    struct ahead a = { .w = NULL, .next_ep = -1 };
    uint64_t period = period_ns(p), bound = (uint64_t)attempt_ms((uint64_t)p->granted) * NS_PER_MS;
    uint64_t next_look = 0; /* at once */
    unsigned backoff = 0;
    int rc;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            rc = VIGIL_ETIMEDOUT;
            break;
        }
        if (now >= next_look) {
            /* Renew first: if it is our turn, the lease's TTL then runs
             * from this request, and the look after it proves the key
             * ours. Then look: the re-check that needs no watch. */
            rc = keep(e, p, deadline);
            if (rc == 0) {
                char pred[VIGIL_ETCD_KEY_B64];
                int64_t rev = 0;
                bool first = false;
                rc = look(e, p, pred, sizeof(pred), &rev, &first, deadline);
                if (rc == VIGIL_EVACANT) {
                    rc = 0;
                    break;
                }
                if (rc == 0) {
                    if (vigil_etcd__wait_test_hook)
                        vigil_etcd__wait_test_hook("looked");
                    if (ahead_stale(e, &a, bound))
                        ahead_drop(&a, true);
                    if (a.w && strcmp(a.pred, pred) != 0)
                        a.ended = 0; /* news: another one ahead */
                    rc = ahead_watch(e, &a, p, pred, rev, first);
                }
            }
            if (rc == VIGIL_ELOST || (rc < 0 && !vigil_etcd__transient(rc)))
                break;
            if (rc < 0) {
                /* Etcd unreachable, or the watch not to be had: ride it
                 * out, backing off. Past a TTL unrenewed our lease has
                 * most likely lapsed, but not surely (etcd gives every
                 * lease a fresh TTL when a new leader takes over, as after
                 * a restart): the keepalive that gets through says which,
                 * kept (our place stands) or refused (a new one). */
                backoff = !backoff ? BACKOFF_MIN : backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
                next_look = now_ns() + backoff * NS_PER_MS;
                ahead_drop(&a, true);
            } else {
                backoff = 0;
                next_look = p->renewed_ns + period;
            }
        }
        now = now_ns();
        uint64_t until = deadline < next_look ? deadline : next_look;
        if (a.w && !vigil_etcd__watch_heard(a.w) && a.opened_ns + bound < until)
            until = a.opened_ns + bound; /* a watch that has said nothing yet is checked on */
        if (until <= now)
            continue;
        uint64_t ms = (until - now + NS_PER_MS - 1) / NS_PER_MS;
        if (!a.w) {
            sleep_ns(until - now);
            continue;
        }
        bool heard = vigil_etcd__watch_heard(a.w);
        rc = vigil_etcd__watch_wait(a.w, ms > INT_MAX ? INT_MAX : (int)ms);
        if (!heard && vigil_etcd__watch_heard(a.w) && vigil_etcd__wait_test_hook)
            vigil_etcd__wait_test_hook("heard"); /* the watch registered: its first word */
        if (rc == VIGIL_ETCD_WATCH_OURS && now_ns() - p->renewed_ns < period) {
            rc = 0; /* SECOND IN LINE: the holder's deletion, ours untouched, our lease not yet due */
            break;
        }
        if (rc == VIGIL_ETCD_WATCH_DELETED || rc == VIGIL_ETCD_WATCH_OURS) {
            next_look = 0; /* deleted: look again at once */
            a.ended = 0;
        } else if (rc == VIGIL_ETCD_WATCH_CANCELED || rc < 0) {
            /* Ended, cancelled, compacted, refused (no leader there, or
             * the token expired: the look authenticates again): look
             * again, and watch anew, on the next endpoint when this one
             * failed; at once the first time, then backing off. */
            ahead_drop(&a, rc < 0);
            unsigned pause = a.ended++ == 0 ? 0 : BACKOFF_MIN << (a.ended < 5 ? a.ended : 5);
            next_look = now_ns() + (uint64_t)(pause > BACKOFF_MAX ? BACKOFF_MAX : pause) * NS_PER_MS;
        } else if (!vigil_etcd__watch_heard(a.w) && now_ns() - a.opened_ns >= bound) {
            ahead_drop(&a, true); /* silent since it was opened: elsewhere */
            next_look = 0;
        }
    }
    ahead_drop(&a, false);
    return rc;
}

int vigil_etcd__queue_wait(vigil_etcd *e, struct vigil_etcd_place *p, const char *key, const char *owner,
                           uint64_t secs, uint64_t timeout_ns)
{
    uint64_t start = now_ns();
    /* No wait at all (0) is one try, as vigil_etcd_acquire: its requests
     * get the handle's own limits. */
    uint64_t deadline = timeout_ns == 0 || timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - 1 - start
                      ? UINT64_MAX : start + timeout_ns;
    char full[VIGIL_ETCD_KEY_MAX];
    int rc = vigil_etcd__full_key(e, key, full, sizeof(full));
    if (rc < 0)
        return rc;
    unsigned backoff = 0;
    p->key = full;
    for (;;) {
        rc = join(e, owner, secs, p, deadline);
        if (rc == 0)
            break;
        if (rc == VIGIL_EBUSY) {
            backoff = 0;
            rc = timeout_ns == 0 ? VIGIL_ETIMEDOUT : wait_turn(e, p, deadline);
            if (rc == 0)
                break;
            leave(e, p); /* our key goes with our lease (in a session: deleted) */
        }
        /* Our place was lost (the key deleted under us, or the lease not
         * kept for a TTL), or etcd could not be reached to take one: a new
         * one, at the back, while time remains. */
        if (rc != VIGIL_ELOST && !vigil_etcd__transient(rc))
            return rc;
        if (p->session && vigil_etcd__keepalive(e, p->id) == VIGIL_ELOST)
            return VIGIL_ELOST; /* the session's lease is gone: no place can be had under it */
        uint64_t now = now_ns();
        if (now >= deadline || timeout_ns == 0)
            return timeout_ns == 0 && rc != VIGIL_ELOST ? rc : VIGIL_ETIMEDOUT;
        if (rc != VIGIL_ELOST) {
            backoff = !backoff ? BACKOFF_MIN : backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
            uint64_t pause = backoff * NS_PER_MS;
            sleep_ns(deadline - now < pause ? deadline - now : pause);
        }
    }
    p->key = NULL;
    return 0;
}

int vigil_etcd_acquire_wait(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                            uint64_t timeout_ns, vigil_lease *out)
{
    uint64_t secs;
    int rc = vigil_etcd__acquire_args(e, key, owner, ttl_ms, out, &secs);
    if (rc < 0)
        return rc;
    struct vigil_etcd_place p = { 0 };
    int64_t start = vigil_etcd__wall_ns();
    if ((rc = vigil_etcd__queue_wait(e, &p, key, owner, secs, timeout_ns)) < 0) {
        if (rc == VIGIL_ETIMEDOUT)
            vigil_etcd__why_wait(e, start); /* the trouble it met, if any */
        return rc;
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
