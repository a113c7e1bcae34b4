/* SPDX-License-Identifier: MIT */
/*
 * etcd's own recipes (src/etcd/recipes/), over the transport: the lease
 * operations (etcd.c), the queue under a key that locks and elects as
 * etcd's concurrency package does (etcd_queue.c: its requests, and the
 * reading of their replies and of watch messages), the wait for a turn
 * (etcd_wait.c), sessions (etcd_session.c), observers (etcd_observe.c)
 * and the one-key watch stream the waits and observers use (etcd_watch.c).
 * What they share, and lend the groups (src/group/) above them. The
 * recipes include the transport's header and nothing of the groups
 * (tests/layers.sh checks). Not part of the public API; the names may
 * change.
 */
#ifndef VIGIL_SRC_ETCD_RECIPES_INTERNAL_H
#define VIGIL_SRC_ETCD_RECIPES_INTERNAL_H

#include "transport_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kv/txn of acquire (etcd_queue.c): *my_rev is the create_revision of our
 * own key KEY/<lease hex> (which must carry lease_id: the put took, perhaps
 * on an earlier attempt whose reply was lost), written on 0 and on
 * VIGIL_EBUSY; 0 when ours is the lowest create_revision under KEY/ (we
 * hold KEY), VIGIL_EBUSY when a lower one is there (someone holds it, or
 * waits ahead of us). */
int vigil_etcd__parse_acquire(long http, const char *body, size_t len, int64_t lease_id, uint64_t *my_rev);
/* The observer's pause (ms) before it watches again after a watch ended,
 * *ended counting the ends since the last news, lived_ms the ended
 * stream's life (etcd_observe.c). */
unsigned vigil_etcd__watch_ended_pause(unsigned *ended, uint64_t lived_ms);
/* The holder of KEY, from kv/range of KEY/ sorted by create_revision
 * (etcd_queue.c): 0 with its create_revision, lease (0: none) and value
 * (the owner; NUL-terminated, cut to cap - 1 bytes), VIGIL_EVACANT when
 * nothing is under KEY/. */
int vigil_etcd__parse_holder(long http, const char *body, size_t len, uint64_t *rev, int64_t *lease,
                             char *owner, size_t cap);
/* The same, and (at) the revision etcd read at: on 0 and VIGIL_EVACANT. */
int vigil_etcd__parse_holder_at(long http, const char *body, size_t len, uint64_t *rev, int64_t *lease,
                                char *owner, size_t cap, int64_t *at);
/* vigil_etcd_get, and the revision of etcd's range (*at, on 0 and on
 * VIGIL_EVACANT): a watch from *at + 1 misses no change after it. */
int vigil_etcd__get_at(vigil_etcd *e, const char *key, vigil_lease_info *out, int64_t *at);
/* lease/timetolive: 0 with the seconds left (negative: past its expiry,
 * not yet revoked) and granted, VIGIL_EVACANT when the lease is gone
 * (TTL -1 and nothing granted). */
int vigil_etcd__parse_ttl(long http, const char *body, size_t len, int64_t *left, int64_t *granted);
/* kv/txn of a waiter's look (our key still ours? then the last key under
 * KEY/ created before it): 0 with that key, base64 as etcd gave it
 * (NUL-terminated in pred, cap bytes), and the reply's revision;
 * VIGIL_EVACANT when there is none (our turn); VIGIL_ELOST when our key
 * is gone or not ours. */
int vigil_etcd__parse_pred(long http, const char *body, size_t len, char *pred, size_t cap, int64_t *rev);
/* The same, and *first: no other key below ours, so the one ahead holds
 * KEY (etcd_wait.c, SECOND IN LINE). */
int vigil_etcd__parse_pred_first(long http, const char *body, size_t len, char *pred, size_t cap, int64_t *rev,
                                 bool *first);
/* One message of a watch stream: what it says (a deletion wins over puts
 * in one message; -EACCES a watch refused for its token or permission). */
enum { VIGIL_ETCD_WATCH_NOTHING = 0, VIGIL_ETCD_WATCH_DELETED = 1, VIGIL_ETCD_WATCH_CANCELED = 2,
       VIGIL_ETCD_WATCH_PUT = 3, VIGIL_ETCD_WATCH_OURS = 4 };
int vigil_etcd__parse_watch(const char *msg, size_t len);
/* A message of a waiter's watch on everything under KEY/ (pred and own:
 * the key ahead and ours, base64): VIGIL_ETCD_WATCH_OURS the one ahead
 * deleted and ours untouched, VIGIL_ETCD_WATCH_DELETED ours deleted or
 * put over (look again), NOTHING for the other keys; cancels as above. */
int vigil_etcd__parse_watch_keys(const char *msg, size_t len, const char *pred, const char *own);
/* etcd_queue.c: the acquire txn, the holder range, a waiter's look (our
 * key at my_rev under lease_id, then the last key created before it) and
 * a watch for the deletion of a key given in base64 from revision rev. */
int vigil_etcd__body_acquire(char *buf, size_t cap, const char *key, const char *owner, int64_t lease_id);
/* The same for the key named after name_id, put on lease_id (a session's
 * key on a lease of the call's own: etcd_session.c). */
int vigil_etcd__body_acquire_as(char *buf, size_t cap, const char *key, const char *owner, int64_t name_id,
                                int64_t lease_id);
/* The reply of either: as vigil__parse_acquire, with the lease our key
 * hangs on into *lease (on 0 and VIGIL_EBUSY), whatever it is. */
int vigil_etcd__parse_acquire_on(long http, const char *body, size_t len, int64_t *lease, uint64_t *my_rev);
/* Proclaim and a session key's move (etcd_session.c): the txn "our key
 * KEY/<name_id hex> has create revision token, lease lease_id and, when
 * mod >= 0, mod_revision mod (0: never, a txn that only reads)", then a
 * put of value on it under lease to_lease; the failure branch ranges it. */
int vigil_etcd__body_put_if(char *buf, size_t cap, const char *key, int64_t name_id, uint64_t token,
                           int64_t lease_id, int64_t mod, int64_t to_lease, const char *value);
/* The reply of that txn: 0 and *ok; when it failed, our key as the failure
 * branch read it (found false: gone; else its create revision, lease,
 * mod_revision and value, NUL-terminated; value_fits false for a value
 * longer than any owner). */
struct vigil_etcd_own {
    bool    ok, found, value_fits;
    int64_t create, lease, mod;
    char    value[64];
    struct vigil_etcd_hdr at; /* the reply's header: vigil_etcd__store_behind judges it */
};
int vigil_etcd__parse_put_if(long http, const char *body, size_t len, struct vigil_etcd_own *own);
int vigil_etcd__body_holder(char *buf, size_t cap, const char *key);
int vigil_etcd__body_pred(char *buf, size_t cap, const char *key, int64_t lease_id, uint64_t my_rev);
int vigil_etcd__body_watch(char *buf, size_t cap, const char *key_b64, int64_t rev);
/* ---- what etcd.c lends the wait (etcd_wait.c) -------------------------- */

/* The lease clock in ns (CLOCK_BOOTTIME, keepalive_internal.h), the keepalive's. */
uint64_t vigil_etcd__now_ns(void);

/* The txn "our key still hangs on this lease at the token's revision",
 * then nothing, its deletion or a put of value (VIGIL_ETCD_IF_HELD_*),
 * with e's lock held: 0 and *held, or an error. */
int vigil_etcd__if_held_locked(vigil_etcd *e, const vigil_lease *lease, int then, const char *value, bool *held);

/* lease/grant of ttl_s seconds and lease/revoke, with e's lock held. A
 * revoke answered "not found" after an attempt that may have landed (or
 * after an earlier such revoke of the same lease) is 0: ours, not a loss. */
int vigil_etcd__grant_locked(vigil_etcd *e, uint64_t ttl_s, int64_t *id, int64_t *granted);
int vigil_etcd__revoke_locked(vigil_etcd *e, int64_t id);
/* The same, sent again while unanswered (a few times, within e's bounds):
 * 0 (gone, by this revoke or an earlier one), or the error. */
int vigil_etcd__revoke_sure_locked(vigil_etcd *e, int64_t id);
/* lease/keepalive alone (no check of the key), taking e's lock, or with
 * it held. */
int vigil_etcd__keepalive(vigil_etcd *e, int64_t id);
int vigil_etcd__keepalive_locked(vigil_etcd *e, int64_t id);

/* A place in a key's queue (etcd_wait.c), for acquire_wait and for a
 * session's waits (then session is set: the key hangs on the session's
 * lease, never revoked by the wait; granted is the session's TTL). */
struct vigil_etcd_place {
    const char *key;        /* namespace and key (set by queue_wait) */
    int64_t     id;
    int64_t     granted;    /* seconds */
    uint64_t    rev;        /* our key's create_revision: the token, once ours */
    uint64_t    renewed_ns; /* when the request that last kept the lease was sent */
    struct vigil_etcd_session *session;
    bool        mine;       /* in a session: this wait put our key (else another call of the session did) */
};
/* A session's key put as A KEY PUT IN A SESSION says (etcd_session.c),
 * with e's lock held: 0 held, VIGIL_EBUSY queued (our key on the
 * session's lease either way, its create revision in *rev; *mine: this
 * call put it), or an error (nothing of the call's left, or what is left
 * kept in the session for its next call). */
int vigil_etcd__session_put_locked(struct vigil_etcd_session *s, const char *full, const char *owner, uint64_t *rev,
                                   bool *mine);
/* Our key in the session (full: KEY with the namespace) deleted if still
 * at rev, with e's lock held: 0, or the error (then kept in the session
 * for its next call). */
int vigil_etcd__session_unqueue_locked(struct vigil_etcd_session *s, const char *full, uint64_t rev);
/* Joins KEY's queue and waits for the key up to timeout_ns (UINT64_MAX:
 * for ever): 0 with *p (ours), VIGIL_ETIMEDOUT, or an error no retry
 * mends; through outages it waits on (see etcd_wait.c). */
int vigil_etcd__queue_wait(vigil_etcd *e, struct vigil_etcd_place *p, const char *key, const char *owner,
                           uint64_t secs, uint64_t timeout_ns);
/* Tests only: called by a queued waiter at "looked" (its look answered,
 * its watch not yet asked for: a test compacts etcd, or deletes the
 * waiter's key, there) and at "heard" (its watch's first message: etcd
 * has it registered; a test stops the waiter there); NULL otherwise. */
extern void (*vigil_etcd__wait_test_hook)(const char *step);
/* An error an outage makes, which the waits ride out (not -EACCES,
 * VIGIL_ETLS, -EPROTO, bad arguments, ...). */
bool vigil_etcd__transient(int rc);
/* Checks key, owner and ttl_ms as acquire does: 0 with the TTL in whole
 * seconds, or VIGIL_ERANGE / -EINVAL. */
int vigil_etcd__acquire_args(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                             const vigil_lease *out, uint64_t *secs);

/* ---- a watch stream (etcd_watch.c) ------------------------------------- */

/* What to watch: a key (base64), or the range [key, end) when end_b64 is
 * set; from revision rev; puts too, or deletions only; on endpoint ep
 * (-1: e's current one). */
struct vigil_etcd_watch_spec {
    const char *key_b64, *end_b64;
    const char *pred_b64, *own_b64; /* set both: read as parse_watch_keys does */
    int64_t     rev;
    bool        puts;
    int         ep;
};
int vigil_etcd__body_watch_spec(char *buf, size_t cap, const struct vigil_etcd_watch_spec *w);
/* KEY/ and KEY0 in base64 (VIGIL_ETCD_KEY_B64 bytes each): the range of
 * everything under KEY/. 0, or VIGIL_ERANGE. */
int vigil_etcd__prefix_b64(const char *key, char *pfx, char *end);
/* KEY/<lease id in hex>, our key in KEY's queue, in base64. */
int vigil_etcd__own_b64(const char *key, int64_t lease_id, char *out);

/* A watch for the deletion of one key, on its own connection to e's
 * current endpoint: the stream runs while the caller's requests go on
 * through e. */
struct vigil_etcd_watch;
int  vigil_etcd__watch_open(vigil_etcd *e, const char *key_b64, int64_t rev, struct vigil_etcd_watch **out);
/* Waits up to timeout_ms for the stream to say something that matters:
 * VIGIL_ETCD_WATCH_DELETED, VIGIL_ETCD_WATCH_CANCELED (the stream ended or
 * was cancelled: look again), VIGIL_ETCD_WATCH_NOTHING when the time ran
 * out, or an error. */
int  vigil_etcd__watch_wait(struct vigil_etcd_watch *w, int timeout_ms);
void vigil_etcd__watch_close(struct vigil_etcd_watch *w);
/* A watch as spec says, on its own connection. */
int  vigil_etcd__watch_start(vigil_etcd *e, const struct vigil_etcd_watch_spec *spec, struct vigil_etcd_watch **out);
/* Has the stream said anything yet (created, progress, news)? */
bool vigil_etcd__watch_heard(const struct vigil_etcd_watch *w);
/* Whether the watch speaks gRPC (else the gateway): for the tests. */
bool vigil_etcd__watch_grpc(const struct vigil_etcd_watch *w);
/* The endpoint (index) the watch runs on. */
unsigned vigil_etcd__watch_endpoint(const struct vigil_etcd_watch *w);
/* Ends a watch_wait under way on another thread at once (it returns
 * VIGIL_ETCD_WATCH_NOTHING). */
void vigil_etcd__watch_wakeup(struct vigil_etcd_watch *w);

#endif
