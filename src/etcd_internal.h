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
/* kv/txn of acquire (compare create_revision == 0; success put + range;
 * failure range): the key's create_revision when it carries lease_id
 * (the put took, perhaps on an earlier attempt), VIGIL_EBUSY when it
 * carries another lease. */
int vigil_etcd__parse_acquire(long http, const char *body, size_t len, int64_t lease_id, uint64_t *token);
/* lease/keepalive: 0 with the new TTL (seconds) when TTL > 0; VIGIL_ELOST
 * when TTL is 0 or missing (etcd's answer for an expired or revoked lease)
 * or the error is "lease not found". */
int vigil_etcd__parse_keepalive(long http, const char *body, size_t len, int64_t lease_id, int64_t *ttl);
/* kv/txn: whether the comparisons held. */
int vigil_etcd__parse_txn(long http, const char *body, size_t len, bool *succeeded);
/* lease/revoke: 0, or VIGIL_ELOST when the lease was already gone. */
int vigil_etcd__parse_revoke(long http, const char *body, size_t len);

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
int vigil_etcd__body_acquire(char *buf, size_t cap, const char *key, const char *owner, int64_t lease_id);
int vigil_etcd__body_held(char *buf, size_t cap, const vigil_lease *l);

#endif
