/* SPDX-License-Identifier: MIT */
/*
 * What the etcd adapter's three files share beyond etcd_internal.h (which
 * the tests and the benchmark see too): etcd.c, the lease operations;
 * etcd_http.c, the endpoints, the connection and the request loop;
 * etcd_json.c, the request bodies and the reading of replies.
 */
#ifndef VIGIL_SRC_ETCD_PRIVATE_H
#define VIGIL_SRC_ETCD_PRIVATE_H

#include "etcd_internal.h"

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
