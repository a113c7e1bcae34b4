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
/* Per-request limits for this handle (defaults 1000 ms to connect, 3000 ms
 * in all; 0 keeps the default). Each endpoint tried costs at most total_ms. */
int  vigil_etcd_set_timeout(vigil_etcd *e, uint32_t connect_ms, uint32_t total_ms);

#ifdef __cplusplus
}
#endif

#endif
