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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIGIL_ETCD_MAX_ENDPOINTS 16
#define VIGIL_ETCD_URL_MAX       256
#define VIGIL_ETCD_BODY_MAX      (1u << 20) /* a reply longer than 1 MiB is refused: -EMSGSIZE */
#define VIGIL_ETCD_MAX_TTL_S     9000000000LL /* etcd's MaxLeaseTTL */

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
/* kv/txn: whether the comparisons held. */
int vigil_etcd__parse_txn(long http, const char *body, size_t len, bool *succeeded);
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
/* lease/timetolive: 0 with the seconds left and granted, VIGIL_EVACANT
 * when the lease is gone (TTL -1). */
int vigil_etcd__parse_ttl(long http, const char *body, size_t len, int64_t *left, int64_t *granted);
/* kv/txn of a waiter's look (our key still ours? then the last key under
 * KEY/ created before it): 0 with that key, base64 as etcd gave it
 * (NUL-terminated in pred, cap bytes), and the reply's revision;
 * VIGIL_EVACANT when there is none (our turn); VIGIL_ELOST when our key
 * is gone or not ours. */
int vigil_etcd__parse_pred(long http, const char *body, size_t len, char *pred, size_t cap, int64_t *rev);
/* One message of a watch stream: what it says. */
enum { VIGIL_ETCD_WATCH_NOTHING = 0, VIGIL_ETCD_WATCH_DELETED = 1, VIGIL_ETCD_WATCH_CANCELED = 2 };
int vigil_etcd__parse_watch(const char *msg, size_t len);

/* One request through e's connection and endpoint list: POST of body (GET
 * when body is NULL) to base URL + path, where a path starting with "v3/"
 * gets the gateway prefix the server answers to. On 0, *http is the status
 * and *reply (NUL-terminated, *len bytes) stays valid until the next call
 * on e. Takes e's lock: call it from one thread at a time per reply. */
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
/* etcd_queue.c: the acquire txn, the holder range, a waiter's look (our
 * key at my_rev under lease_id, then the last key created before it) and
 * a watch for the deletion of a key given in base64 from revision rev. */
int vigil_etcd__body_acquire(char *buf, size_t cap, const char *key, const char *owner, int64_t lease_id);
int vigil_etcd__body_holder(char *buf, size_t cap, const char *key);
int vigil_etcd__body_pred(char *buf, size_t cap, const char *key, int64_t lease_id, uint64_t my_rev);
int vigil_etcd__body_watch(char *buf, size_t cap, const char *key_b64, int64_t rev);

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

/* lease/grant of ttl_s seconds and lease/revoke, with e's lock held. */
int vigil_etcd__grant_locked(vigil_etcd *e, uint64_t ttl_s, int64_t *id, int64_t *granted);
int vigil_etcd__revoke_locked(vigil_etcd *e, int64_t id);
/* lease/keepalive alone (no check of the key), taking e's lock. */
int vigil_etcd__keepalive(vigil_etcd *e, int64_t id);
/* Checks key, owner and ttl_ms as acquire does: 0 with the TTL in whole
 * seconds, or VIGIL_ERANGE / -EINVAL. */
int vigil_etcd__acquire_args(vigil_etcd *e, const char *key, const char *owner, uint64_t ttl_ms,
                             const vigil_lease *out, uint64_t *secs);

/* ---- a watch stream (etcd_watch.c) ------------------------------------- */

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

/* The options every curl handle of the adapter has (a CURL *): no signals,
 * no proxy, no redirects, http(s) only, sockets close-on-exec. */
void vigil_etcd__curl_setup(void *curl, long connect_ms);

/* For the watch: the URL of path (a "v3/" path) on e's current endpoint,
 * and e's connect timeout. */
int  vigil_etcd__url(vigil_etcd *e, const char *path, char *url, size_t cap, long *connect_ms);

#endif
