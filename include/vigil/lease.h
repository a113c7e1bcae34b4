/* SPDX-License-Identifier: MIT */
/*
 * vigil leases: a keepalive that renews a lease at a third of its TTL while
 * work runs, and an embedded lease store in a vigil file for one host.
 */
#ifndef VIGIL_LEASE_H
#define VIGIL_LEASE_H

#include <vigil/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vigil_lease {
    char     key[128];
    char     owner[64];
    uint64_t token;   /* fencing token: strictly greater each time the key changes hands */
    uint64_t ttl_ms;
    int64_t  id;      /* backend's lease id (etcd), 0 where none */
} vigil_lease;

typedef struct vigil_lease_port {
    void *ctx;
    int (*renew)(void *ctx, const vigil_lease *lease); /* 0 renewed, VIGIL_ELOST refused, other < 0 transient */
} vigil_lease_port;

typedef struct vigil_keepalive vigil_keepalive;
int  vigil_keepalive_start(const vigil_lease_port *port, const vigil_lease *lease, vigil_keepalive **out);
int  vigil_keepalive_stop(vigil_keepalive *ka);       /* 0, or VIGIL_ELOST if a renewal was refused */
bool vigil_keepalive_lost(const vigil_keepalive *ka);
int  vigil_with_keepalive(const vigil_lease_port *port, const vigil_lease *lease,
                          int (*body)(void *arg), void *arg); /* body's result, or VIGIL_ELOST if lost and body returned >= 0 */

typedef struct vigil_leases vigil_leases;
int  vigil_leases_create(const char *path, uint32_t capacity, vigil_leases **out);
int  vigil_leases_open(const char *path, vigil_leases **out);
void vigil_leases_close(vigil_leases *ls);
int  vigil_leases_acquire(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out); /* VIGIL_EBUSY */
int  vigil_leases_renew(vigil_leases *ls, const vigil_lease *lease);   /* VIGIL_ELOST once expired or taken */
int  vigil_leases_release(vigil_leases *ls, const vigil_lease *lease);   /* VIGIL_ELOST if it was no longer held */
vigil_lease_port vigil_leases_port(vigil_leases *ls);

#ifdef __cplusplus
}
#endif

#endif
