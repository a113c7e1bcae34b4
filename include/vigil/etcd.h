/* SPDX-License-Identifier: MIT */
/*
 * vigil etcd adapter (libvigil-etcd): the lease API across hosts on etcd v3.
 * KEY is held as etcd's concurrency package holds a Mutex or an Election:
 * the holder is the key KEY/<lease id in hex> with the lowest
 * create_revision, which is the token; ttl_ms rounds up to whole seconds.
 */
#ifndef VIGIL_ETCD_H
#define VIGIL_ETCD_H

#include <vigil/lease.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vigil_etcd vigil_etcd;
int  vigil_etcd_connect(const char *endpoints, vigil_etcd **out); /* "http://127.0.0.1:2379[,...]" */

/* How to reach a production etcd (vigil_etcd_connect_opts(3)). Every field
 * may be NULL or 0: today's behaviour. */
struct vigil_etcd_options {
    const char *cacert, *cert, *key;   /* PEM files; NULL: system CA store, no client certificate */
    const char *user, *password;       /* etcd auth; NULL: none */
#ifdef __cplusplus
    const char *namespace_;            /* C++: the same field, under a name C++ allows */
#else
    const char *namespace;             /* prepended to every key; NULL: none */
#endif
    uint32_t    dial_timeout_ms, request_timeout_ms; /* 0: defaults */
};
int  vigil_etcd_connect_opts(const char *endpoints, const struct vigil_etcd_options *opts, vigil_etcd **out);
/* Why the last vigil_etcd_* call that failed on this thread failed, in a
 * line (etcd's own message, libcurl's, or the option at fault); "" when
 * there is nothing to add to vigil_strerror. Never NULL. */
const char *vigil_etcd_errmsg(void);
void vigil_etcd_close(vigil_etcd *e);
int  vigil_etcd_acquire(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out);
int  vigil_etcd_renew(vigil_etcd *e, const vigil_lease *lease);
int  vigil_etcd_release(vigil_etcd *e, const vigil_lease *lease);
vigil_lease_port vigil_etcd_port(vigil_etcd *e);
/* The holder of key: 0 and *out (owner, token, TTL, time left), or
 * VIGIL_EVACANT when nobody holds it. A key held by etcd's own lock or
 * election (etcdctl lock / elect) counts as held. */
int  vigil_etcd_get(vigil_etcd *e, const char *key, vigil_lease_info *out);
/* Blocks until key is acquired (0) or timeout_ns passes (VIGIL_ETIMEDOUT;
 * UINT64_MAX waits for ever): waits on a watch, never polls. */
int  vigil_etcd_acquire_wait(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                             uint64_t timeout_ns, vigil_lease *out);
/*
 * Election parity with etcd's concurrency package (Session, Election).
 *
 * A session is one lease, kept alive by a keepalive of its own, under
 * which several keys are held (concurrency.NewSession, and a Mutex or an
 * Election on it): each key is KEY/<the session's lease in hex>, held and
 * queued as vigil_etcd_acquire holds one. Closing the session revokes the
 * lease, and every key held in it goes. Its fd turns readable once the
 * lease is lost (refused, or not renewed for a TTL), and with it every key.
 */
typedef struct vigil_etcd_session vigil_etcd_session;
int     vigil_etcd_session_open(vigil_etcd *e, uint64_t ttl_ms, vigil_etcd_session **out);
int     vigil_etcd_session_close(vigil_etcd_session *s); /* 0, VIGIL_ELOST if it was lost; NULL is fine */
int64_t vigil_etcd_session_lease(const vigil_etcd_session *s);
int     vigil_etcd_session_fd(const vigil_etcd_session *s); /* POLLIN once the session's lease is lost */
bool    vigil_etcd_session_lost(const vigil_etcd_session *s);
/* As vigil_etcd_acquire and vigil_etcd_acquire_wait, under the session's
 * lease (out->id): VIGIL_EBUSY, VIGIL_ETIMEDOUT; VIGIL_ELOST once the
 * session is lost. */
int     vigil_etcd_session_acquire(vigil_etcd_session *s, const char *key, const char *owner, vigil_lease *out);
int     vigil_etcd_session_acquire_wait(vigil_etcd_session *s, const char *key, const char *owner,
                                        uint64_t timeout_ns, vigil_lease *out);
/* Gives the key up and keeps its lease (Election.Resign): 0, or
 * VIGIL_ELOST when the key was no longer ours. */
int     vigil_etcd_resign(vigil_etcd *e, const vigil_lease *lease);
/* Changes the value (the owner) while holding, the token staying
 * (Election.Proclaim): 0 and lease->owner updated, or VIGIL_ELOST. */
int     vigil_etcd_proclaim(vigil_etcd *e, vigil_lease *lease, const char *owner);

/* The holder of key and every change to it (Election.Observe): the fd is
 * readable while a change waits to be read; next gives the oldest, a
 * vigil_lease_info in the state VIGIL_LEASE_HELD (owner, token, TTL) or
 * VIGIL_LEASE_VACANT, waiting up to timeout_ns (0: not at all; UINT64_MAX:
 * for ever) before VIGIL_ETIMEDOUT. The first change is the state at the
 * start. Close the observer before its handle. */
typedef struct vigil_etcd_observer vigil_etcd_observer;
int  vigil_etcd_observe(vigil_etcd *e, const char *key, vigil_etcd_observer **out);
int  vigil_etcd_observer_fd(const vigil_etcd_observer *o);
int  vigil_etcd_observer_next(vigil_etcd_observer *o, vigil_lease_info *out, uint64_t timeout_ns);
void vigil_etcd_observer_close(vigil_etcd_observer *o); /* NULL is fine */

/* Per-request limits for this handle (defaults 1000 ms to connect, 3000 ms
 * in all; 0 keeps the default). Each endpoint tried costs at most total_ms. */
int  vigil_etcd_set_timeout(vigil_etcd *e, uint32_t connect_ms, uint32_t total_ms);

/* Whether etcd answers the handle, as its requests last found it
 * (vigil_etcd_health_get(3)): every request of the handle's (its
 * keepalives', its watchers' and waits' too) either reaches an endpoint
 * that answers or finds none; reachable changes when the other happens.
 * A wait's own deadline cutting a request short is neither. */
typedef struct vigil_etcd_health {
    uint32_t reachable;    /* 1: the last request was answered (also before the first); 0: none since changed_ns */
    int32_t  error;        /* the last failure (a request no endpoint answered), a vigil result; 0: none yet */
    uint64_t changes;      /* how many times reachable has changed */
    uint64_t failures;     /* requests no endpoint answered, in all */
    int64_t  changed_ns;   /* CLOCK_REALTIME of the last change (to 0: when the failing request was sent); 0: none */
    int64_t  answered_ns;  /* of the last answer; 0: none */
    int64_t  failed_ns;    /* of the last failure; 0: none */
    char     message[256]; /* the last failure in a line: the endpoint, then libcurl's or etcd's words */
} vigil_etcd_health;       /* fields may be added at the end */
int  vigil_etcd_health_get(vigil_etcd *e, vigil_etcd_health *out);
/* Readable (POLLIN) once reachable has changed since the last
 * vigil_etcd_health_get, which makes it unreadable again. Owned by e. */
int  vigil_etcd_health_fd(vigil_etcd *e);
/* One request etcd answers whatever the caller may read (its status):
 * 0 when an endpoint answered, else the error (and the health says so). */
int  vigil_etcd_ping(vigil_etcd *e);

#ifdef __cplusplus
}
#endif

#endif
