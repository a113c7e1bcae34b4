/* SPDX-License-Identifier: MIT */
/*
 * etcd adapter internals, exported for the etcd tests and the benchmark:
 * the base64 encoder, the endpoint list parser, the reply interpreters (pure
 * functions from an HTTP status and a body to a vigil result, so a hostile
 * server's replies can be tested without one), and a raw request through a
 * handle's connection. Not part of the public API; the names may change.
 */
#ifndef VIGIL_SRC_ETCD_INTERNAL_H
#define VIGIL_SRC_ETCD_INTERNAL_H

#include <vigil/etcd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIGIL_ETCD_MAX_ENDPOINTS 16
#define VIGIL_ETCD_URL_MAX       256
#define VIGIL_ETCD_BODY_MAX      (1u << 20) /* a reply longer than 1 MiB is refused: -EMSGSIZE */
#define VIGIL_ETCD_MAX_TTL_S     9000000000LL /* etcd's MaxLeaseTTL */
#define VIGIL_ETCD_NS_MAX        256          /* a namespace, with its NUL */
#define VIGIL_ETCD_KEY_MAX       (VIGIL_ETCD_NS_MAX + 128) /* namespace and key, with the NUL */
#define VIGIL_ETCD_TOKEN_MAX     2048         /* an auth token (simple or JWT), with its NUL */
#define VIGIL_ETCD_REQ_MAX       8192         /* a request body */
/* Base64 of an own key (namespace, key, "/", 16 hex digits), with its NUL. */
#define VIGIL_ETCD_KEY_B64       ((VIGIL_ETCD_KEY_MAX + 17 + 2) / 3 * 4 + 1)

/* Standard base64 (RFC 4648, with padding) of n bytes into out (cap bytes,
 * NUL-terminated). Returns the length written, VIGIL_ERANGE if cap is short. */
int vigil_etcd__b64(const void *in, size_t n, char *out, size_t cap);

/* "http://a:2379, b:2379 ,https://c:2379/" -> base URLs without a trailing
 * slash; a bare host:port gets http://. Empty entries are skipped. -EINVAL
 * for no endpoint, a scheme other than http/https, a missing host, or a
 * space or control character inside one; VIGIL_ERANGE for more than max
 * endpoints or a URL past VIGIL_ETCD_URL_MAX - 1 bytes. */
int vigil_etcd__parse_endpoints(const char *spec, char (*urls)[VIGIL_ETCD_URL_MAX],
                                unsigned max, unsigned *n);
/* The same, a bare host:port getting https:// when tls. */
int vigil_etcd__parse_endpoints_as(const char *spec, bool tls, char (*urls)[VIGIL_ETCD_URL_MAX],
                                   unsigned max, unsigned *n);

/* The gRPC status code of an error reply, mapped to a vigil result:
 * 5 NotFound on a lease is VIGIL_ELOST (the caller decides, lease says so),
 * 11 OutOfRange VIGIL_ERANGE, the rest -errno (14 Unavailable -EAGAIN,
 * 4 DeadlineExceeded -ETIMEDOUT, 3 InvalidArgument -EINVAL, ...). */
int vigil_etcd__grpc_error(int code, bool lease_op);

/*
 * Reply interpreters. Each takes the HTTP status and the body (not
 * necessarily NUL-terminated) and returns 0 with its outputs written, or a
 * vigil result: an error reply mapped by vigil_etcd__grpc_error, -EPROTO
 * for a body that is not JSON or lacks a field the reply must have.
 */
/* lease/grant: ID (non-zero) and TTL (> 0, seconds). */
int vigil_etcd__parse_grant(long http, const char *body, size_t len, int64_t *id, int64_t *ttl);
/* kv/txn of acquire (etcd_queue.c): *my_rev is the create_revision of our
 * own key KEY/<lease hex> (which must carry lease_id: the put took, perhaps
 * on an earlier attempt whose reply was lost), written on 0 and on
 * VIGIL_EBUSY; 0 when ours is the lowest create_revision under KEY/ (we
 * hold KEY), VIGIL_EBUSY when a lower one is there (someone holds it, or
 * waits ahead of us). */
int vigil_etcd__parse_acquire(long http, const char *body, size_t len, int64_t lease_id, uint64_t *my_rev);
/* lease/keepalive: 0 with the new TTL (seconds) when TTL > 0; VIGIL_ELOST
 * when TTL is 0 or missing (etcd's answer for an expired or revoked lease)
 * or the error is "lease not found". */
int vigil_etcd__parse_keepalive(long http, const char *body, size_t len, int64_t lease_id, int64_t *ttl);
/* What a reply's header says of the store that answered: its revision
 * and its cluster's ID, each 0 when the header has none. */
struct vigil_etcd_hdr {
    int64_t  rev;
    uint64_t cluster;
};
/* A reply's header object read: 0, or -EPROTO. */
struct cJSON;
int vigil_etcd__header_of(const struct cJSON *header, struct vigil_etcd_hdr *out);
/* kv/txn: whether the comparisons held; _at also the header. */
int vigil_etcd__parse_txn(long http, const char *body, size_t len, bool *succeeded);
int vigil_etcd__parse_txn_at(long http, const char *body, size_t len, bool *succeeded, struct vigil_etcd_hdr *at);
/* The handle's cluster: the ID the first reply that names one carries
 * (a reply's body; any reply, called on every answer). */
void vigil_etcd__note_cluster(vigil_etcd *e, const char *body, size_t len);
/* The store is not the one the token came from: a linearizable reply (a
 * txn, a write; never a keepalive or a watch, which a lagging member
 * answers from its own older revision) from another cluster than the
 * handle's, or at a header revision below a token the caller holds (the
 * store went backwards). VIGIL_ELOST with vigil_etcd_errmsg saying which,
 * else 0. On the parsed header, whatever the transport. */
int vigil_etcd__store_behind(vigil_etcd *e, const struct vigil_etcd_hdr *at, uint64_t token);
/* The observer's pause (ms) before it watches again after a watch ended,
 * *ended counting the ends since the last news, lived_ms the ended
 * stream's life (etcd_observe.c). */
unsigned vigil_etcd__watch_ended_pause(unsigned *ended, uint64_t lived_ms);
/* lease/revoke: 0, or VIGIL_ELOST when the lease was already gone. */
int vigil_etcd__parse_revoke(long http, const char *body, size_t len);

/* Standard base64 decoding (padding optional, no white space) of in into
 * out (cap bytes; not NUL-terminated): the length, or -EPROTO for bytes
 * that are not base64, VIGIL_ERANGE when cap is short. */
int vigil_etcd__unb64(const char *in, size_t n, void *out, size_t cap);

/* Our own key under KEY/, as etcd's concurrency package names a session's:
 * KEY "/" the lease ID in lowercase hex. 0, or VIGIL_ERANGE. */
int vigil_etcd__own_key(const char *key, int64_t lease_id, char *out, size_t cap);

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
/* One message of a watch stream: what it says (a deletion wins over puts
 * in one message; -EACCES a watch refused for its token or permission). */
enum { VIGIL_ETCD_WATCH_NOTHING = 0, VIGIL_ETCD_WATCH_DELETED = 1, VIGIL_ETCD_WATCH_CANCELED = 2,
       VIGIL_ETCD_WATCH_PUT = 3 };
int vigil_etcd__parse_watch(const char *msg, size_t len);

/* One request through e's connection and endpoint list: POST of body (GET
 * when body is NULL) to base URL + path, where a path starting with "v3/"
 * gets the gateway prefix the server answers to. On 0, *http is the status
 * and *reply (NUL-terminated, *len bytes, a copy in the calling thread's
 * buffer) stays valid until this thread's next request. Takes e's lock. */
int vigil_etcd__request(vigil_etcd *e, const char *path, const char *body,
                        long *http, const char **reply, size_t *len);

/* The endpoint the next request goes to first (the last one that answered). */
const char *vigil_etcd__current_endpoint(vigil_etcd *e);

/* ==== What the adapter's three files share beyond the above: etcd.c, the
 * lease operations; etcd_http.c, the endpoints, the connection and the
 * request loop; etcd_json.c, the request bodies and the reading of replies. */
static inline bool vigil_etcd__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- the connection (etcd_http.c) ---------------------------------------- */

struct curl_slist;
struct vigil_etcd_reply;

struct vigil_etcd_reply_buf {
    char  *p;
    size_t len, cap;
    int    err; /* why the write callback refused: -EMSGSIZE or -ENOMEM */
};

/* libcurl's write callback into a reply buffer (arg), up to VIGIL_ETCD_BODY_MAX. */
size_t vigil_etcd__on_write(char *data, size_t size, size_t nmemb, void *arg);

/* What the reply of a gRPC call said in its headers and trailers. */
struct vigil_etcd_grpc_state {
    int  status;      /* grpc-status; -1 none yet */
    bool have_status;
    bool is_grpc;     /* content-type application/grpc */
    char message[512]; /* grpc-message, percent-decoded */
};

enum { VIGIL_ETCD_TRANSPORT_AUTO = 0, VIGIL_ETCD_TRANSPORT_GRPC = 1, VIGIL_ETCD_TRANSPORT_GATEWAY = 2 };
enum { VIGIL_ETCD_SPEAKS_UNKNOWN = 0, VIGIL_ETCD_SPEAKS_GRPC = 1, VIGIL_ETCD_SPEAKS_GATEWAY = 2 };

/* The handle: etcd_handle.c makes it (options, auth, namespace),
 * etcd_http.c sends its requests. Other files use the functions below. */
struct vigil_etcd {
    pthread_mutex_t             lock; /* held for the whole of each call: one request at a time */
    void                       *curl; /* CURL * */
    struct curl_slist          *headers; /* JSON, require-leader, and the auth token once there is one */
    struct vigil_etcd_reply_buf reply;
    unsigned                    n, cur; /* endpoints, and the one to try first */
    long                        connect_ms, total_ms; /* per attempt on one endpoint */
    /* The bounds of the lock's holder (vigil_etcd__lock_until): no
     * request past deadline_ns, no attempt longer than attempt_ms. */
    uint64_t                    deadline_ns;
    long                        attempt_ms;
    unsigned                    prefix[VIGIL_ETCD_MAX_ENDPOINTS];
    char                        urls[VIGIL_ETCD_MAX_ENDPOINTS][VIGIL_ETCD_URL_MAX];
    /* The connection options, copied: the TLS files for every connection
     * (the watch streams' too), the user and password, the namespace. */
    char                       *cacert, *cert, *key, *user, *password;
    size_t                      nslen;
    char                        ns[VIGIL_ETCD_NS_MAX];
    char                        token[VIGIL_ETCD_TOKEN_MAX]; /* etcd's auth token; "" none yet */
    bool                        auth_off; /* the server said auth is not enabled */
    /* An attempt of the last call failed after it may have reached a
     * server (timed out, reset): its effect may have been applied. */
    bool                        maybe_applied;
    int64_t                     revoke_unsure; /* a lease whose revoke failed that way, or 0 */
    _Atomic uint64_t            cluster; /* the cluster's ID, from the first reply naming one; 0 none yet */
    char                        curl_err[256]; /* libcurl's own words for the last failure */
    struct vigil_etcd_health_state *health; /* etcd_health.c: whether etcd answers */
    /* The gRPC transport (etcd_grpc.c): VIGIL_ETCD_TRANSPORT_* from the
     * environment at connect, what each endpoint showed it speaks
     * (VIGIL_ETCD_SPEAKS_*), and the connection gRPC calls take. */
    int                         mode;
    unsigned char               speaks[VIGIL_ETCD_MAX_ENDPOINTS];
    void                       *gcurl; /* CURL *, NULL when mode is the gateway */
    struct curl_slist          *gheaders; /* application/grpc, te, hasleader, token */
    struct vigil_etcd_reply_buf greply; /* the framed reply, before it is JSON in reply */
    struct vigil_etcd_grpc_state grpc;
    unsigned long               grpc_answers; /* replies that came in gRPC (for the tests) */
    unsigned                    gconn; /* 1 + the endpoint gcurl's last call left an HTTP/2 connection to; 0 none */
    /* The attempt failed before any of its request was sent (a first
     * contact's probe): it cannot have applied. The OS's errno of it. */
    bool                        unsent;
    long                        unsent_os;
};

/* The handle's curl connection, made and closed (etcd_http.c). */
int  vigil_etcd__curl_open(vigil_etcd *e);
void vigil_etcd__curl_close(vigil_etcd *e);
/* A fresh list of e's request headers (a struct curl_slist *, the
 * caller's), or NULL; and the handle's own list rebuilt (after a change
 * of token): 0 or -ENOMEM. */
void *vigil_etcd__headers_make(vigil_etcd *e);
/* The list of fixed[0..n) and, once e has a token, "token_name: token". */
void *vigil_etcd__headers_of(vigil_etcd *e, const char *const *fixed, size_t n, const char *token_name);
/* The same, taking e's lock: for a stream of another file's own. */
void *vigil_etcd__headers_copy(vigil_etcd *e);
int   vigil_etcd__headers_reset(vigil_etcd *e);

/* A libcurl failure (a CURLcode, the OS errno it saw, the write
 * callback's refusal, libcurl's error text) as a vigil result: a
 * transport failure is a transient -errno; the server's certificate
 * failing verification VIGIL_ETLS; our client certificate refused
 * -EACCES; a TLS file that cannot be used -EINVAL; another TLS failure
 * -EPROTO. The reason goes to vigil_etcd_errmsg. */
int vigil_etcd__curl_error(int code, long os, int write_err, const char *detail);

/* Sets this thread's vigil_etcd_errmsg; and keeps it (256 bytes) across
 * the cleanup requests after a failure, which would overwrite it. */
void vigil_etcd__why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vigil_etcd__why_save(char *saved, size_t cap);
void vigil_etcd__why_restore(const char *saved);

/* e's lock, with bounds on every request made while it is held: none
 * sent past deadline_ns (CLOCK_MONOTONIC; the call then fails with
 * VIGIL_ETIMEDOUT, as does one the deadline cut short), and no attempt on
 * one endpoint longer than attempt_ms (0: the handle's own limit).
 * vigil_etcd__unlock lifts them. */
void vigil_etcd__lock_until(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms);
/* The same bounds changed while the lock is held. */
void vigil_etcd__bound(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms);

/* vigil_etcd__call without authentication (the authenticate itself). */
int vigil_etcd__call_raw(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r);

/* A stream's curl handle (a CURL *) set up for path on endpoint ep (-1:
 * the current one) with e's options and headers: 0, *headers (a struct
 * curl_slist * for the caller to free after the transfer) and *used (the
 * endpoint's index), or an error. */
int vigil_etcd__stream_setup(vigil_etcd *e, int ep, const char *path, void *curl, void **headers, unsigned *used);

/* How many endpoints e has, and (cur) the one the next request goes to first. */
unsigned vigil_etcd__endpoints(vigil_etcd *e, unsigned *cur);

/* ---- auth and namespace (etcd_handle.c) ----------------------------------- */

/* With e's lock held: authenticate (again) and set the token. 0 (also
 * when etcd has no auth enabled), -EACCES for a wrong name or password,
 * or a transport error. */
int  vigil_etcd__authenticate(vigil_etcd *e);
/* With e's lock held: authenticate first if e has a user and no token. */
int  vigil_etcd__auth_ready(vigil_etcd *e);
/* Does reply r refuse e's token (to be authenticated again)? */
bool vigil_etcd__auth_refused(vigil_etcd *e, const struct vigil_etcd_reply *r);
/* namespace + key into out (cap bytes): 0, or VIGIL_ERANGE. */
int  vigil_etcd__full_key(const vigil_etcd *e, const char *key, char *out, size_t cap);
/* The namespace (NUL-terminated) and its length. */
size_t vigil_etcd__ns(const vigil_etcd *e, const char **ns);

/* A reply: the HTTP status and the body, valid until the next request on
 * the handle. */
struct vigil_etcd_reply {
    long        http;
    const char *body;
    size_t      len;
};

/* e's mutex, held for the whole of a lease operation: one request at a
 * time on the connection. */
void vigil_etcd__lock(vigil_etcd *e);
void vigil_etcd__unlock(vigil_etcd *e);

/* vigil_etcd__request with e's lock already held. */
int vigil_etcd__call(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r);

/* ---- the JSON (etcd_json.c) ---------------------------------------------- */

/* Whether a reply is this endpoint's answer (VIGIL_ETCD_ANSWERED), says
 * there is no gateway under this prefix (VIGIL_ETCD_NO_GATEWAY), or says
 * the endpoint cannot serve now (< 0: try the next one). */
enum { VIGIL_ETCD_ANSWERED = 0, VIGIL_ETCD_NO_GATEWAY = 1 };
int vigil_etcd__classify(long http, const char *body, size_t len);

/* Request bodies, into buf (cap bytes): 0, or VIGIL_ERANGE when it does
 * not fit. Keys and owners are given as C strings and sent in base64. */
int vigil_etcd__body_ttl(char *buf, size_t cap, uint64_t ttl_s);
int vigil_etcd__body_id(char *buf, size_t cap, int64_t id);
int vigil_etcd__body_held(char *buf, size_t cap, const vigil_lease *l);
/* The txn "our key KEY/<id hex> still has create revision token and lease
 * id", then (when it holds) nothing, our key's deletion, or a put of
 * value on it under our lease. key is the full key (namespace included). */
enum { VIGIL_ETCD_IF_HELD_NOTHING = 0, VIGIL_ETCD_IF_HELD_DELETE = 1, VIGIL_ETCD_IF_HELD_PUT = 2 };
int vigil_etcd__body_if_held(char *buf, size_t cap, const char *key, uint64_t token, int64_t id, int then,
                             const char *value);
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

/* The gRPC code of an error reply (>= 0, its message into msg, cap
 * bytes), or -1 when body is not one. */
int vigil_etcd__error_of(const char *body, size_t len, char *msg, size_t cap);
/* Does an error (code, message) say etcd no longer takes the token? */
bool vigil_etcd__token_error(int code, const char *msg);
/* auth/authenticate: the body for user and password (malloc'd, or NULL),
 * and the reply: 0 and the token, -EACCES refused, VIGIL_EVACANT auth
 * not enabled, or another error. */
char *vigil_etcd__body_auth(const char *user, const char *password);
int   vigil_etcd__parse_auth(long http, const char *body, size_t len, char *token, size_t cap);

/* Shared by etcd_json.c and etcd_queue.c (cJSON stays out of the header). */
struct cJSON;
const struct cJSON *vigil_etcd__field(const struct cJSON *obj, const char *name);
/* 1 found, 0 absent (proto3 omits zero), -EPROTO malformed. */
int vigil_etcd__json_i64(const struct cJSON *obj, const char *name, int64_t *out);
/* 0 and *root for a 2xx reply that is not an error, else its result. */
int vigil_etcd__reply_open(long http, const char *body, size_t len, bool lease_op, struct cJSON **root);
int vigil_etcd__txn_succeeded(const struct cJSON *r, bool *out);
/* The body as one JSON value and nothing after it but white space. */
struct cJSON *vigil_etcd__parse_whole(const char *body, size_t len);

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
    int64_t     rev;
    bool        puts;
    int         ep;
};
int vigil_etcd__body_watch_spec(char *buf, size_t cap, const struct vigil_etcd_watch_spec *w);
/* KEY/ and KEY0 in base64 (VIGIL_ETCD_KEY_B64 bytes each): the range of
 * everything under KEY/. 0, or VIGIL_ERANGE. */
int vigil_etcd__prefix_b64(const char *key, char *pfx, char *end);

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
/* The endpoint (index) the watch runs on. */
unsigned vigil_etcd__watch_endpoint(const struct vigil_etcd_watch *w);
/* Ends a watch_wait under way on another thread at once (it returns
 * VIGIL_ETCD_WATCH_NOTHING). */
void vigil_etcd__watch_wakeup(struct vigil_etcd_watch *w);

/* The options every curl handle of the adapter has (a CURL *): no signals,
 * no proxy, no redirects, http(s) only, sockets close-on-exec. */
void vigil_etcd__curl_setup(void *curl, long connect_ms);

/* The TLS files of e's options (CA bundle, client certificate and key) on
 * a curl handle. */
void vigil_etcd__curl_tls(vigil_etcd *e, void *curl);

/* For the watch: the URL of path (a "v3/" path) on e's current endpoint,
 * and e's connect timeout. */
int  vigil_etcd__url(vigil_etcd *e, const char *path, char *url, size_t cap, long *connect_ms);

/* ---- whether etcd answers (etcd_health.c) ------------------------------- */

/* Made with the handle and freed with it: 0 or -ENOMEM. */
int  vigil_etcd__health_open(vigil_etcd *e);
void vigil_etcd__health_close(vigil_etcd *e);
/* A request of e's was answered by an endpoint; or no endpoint answered
 * it (rc, the last endpoint tried, and this thread's errmsg saying why). */
void vigil_etcd__health_answered(vigil_etcd *e);
/* A request no endpoint answered, sent (CLOCK_REALTIME) at sent_ns. */
void vigil_etcd__health_failed(vigil_etcd *e, int rc, const char *url, int64_t sent_ns);
/* url without its userinfo (scheme://user:password@host: a secret): url
 * itself when it has none, else buf. */
const char *vigil_etcd__redact(const char *url, char *buf, size_t cap);
/* The errmsg of a wait that ends (VIGIL_ETIMEDOUT) after meeting
 * failures: the last one met since start (CLOCK_REALTIME ns), if any. */
void vigil_etcd__why_wait(vigil_etcd *e, int64_t start);
/* CLOCK_REALTIME in ns, as the record keeps time. */
int64_t vigil_etcd__wall_ns(void);

#endif
