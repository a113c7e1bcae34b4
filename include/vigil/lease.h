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
    int64_t  id;      /* backend's handle: etcd's lease ID; the store's entry + 1; 0 where none */
} vigil_lease;

typedef struct vigil_lease_port {
    void *ctx;
    int (*renew)(void *ctx, const vigil_lease *lease); /* 0 renewed, VIGIL_ELOST refused, other < 0 transient */
} vigil_lease_port;

typedef struct vigil_keepalive vigil_keepalive;
int  vigil_keepalive_start(const vigil_lease_port *port, const vigil_lease *lease, vigil_keepalive **out);
int  vigil_keepalive_stop(vigil_keepalive *ka);       /* 0, or VIGIL_ELOST if refused or expired */
bool vigil_keepalive_lost(const vigil_keepalive *ka);
int  vigil_keepalive_fd(const vigil_keepalive *ka); /* readable (POLLIN) once the lease is lost; owned by ka, valid until stop */
int  vigil_with_keepalive(const vigil_lease_port *port, const vigil_lease *lease,
                          int (*body)(void *arg), void *arg); /* body's result, or VIGIL_ELOST if lost and body returned >= 0 */

/* What a keepalive has done so far, for monitoring and benchmarks. */
typedef struct vigil_keepalive_info {
    uint64_t period_ns;            /* the beat: 0.32 ttl, a hair under a third, in ns */
    uint64_t renewals;             /* renewals the port accepted */
    uint64_t failures;             /* transient failures, each retried on the next beat */
    uint32_t consecutive_failures; /* since the last accepted renewal; 2 are survivable */
    uint32_t lost;                 /* 1 once the lease is lost (refused or expired) */
    uint64_t cpu_ns;               /* CPU time of the renewer thread, 0 if none or unknown */
} vigil_keepalive_info;            /* fields may be added at the end */
int  vigil_keepalive_stats(const vigil_keepalive *ka, vigil_keepalive_info *out);
/* Inside a vigil_with_keepalive body: that body's keepalive (the innermost
 * one on this thread), so the body can poll vigil_keepalive_lost. NULL
 * outside any body. */
const vigil_keepalive *vigil_keepalive_current(void);

typedef struct vigil_leases vigil_leases;
int  vigil_leases_create(const char *path, uint32_t capacity, vigil_leases **out);
int  vigil_leases_open(const char *path, vigil_leases **out);
/* For looking only: read permission alone; nothing done through the
 * handle reaches the file (see vigil_leases_open_readonly(3)). */
int  vigil_leases_open_readonly(const char *path, vigil_leases **out);
void vigil_leases_close(vigil_leases *ls);
int  vigil_leases_acquire(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms, vigil_lease *out); /* VIGIL_EBUSY */
int  vigil_leases_renew(vigil_leases *ls, const vigil_lease *lease);   /* VIGIL_ELOST once expired or taken */
int  vigil_leases_release(vigil_leases *ls, const vigil_lease *lease);   /* VIGIL_ELOST if it was no longer held */
vigil_lease_port vigil_leases_port(vigil_leases *ls);
/* The store's own lease id is its entry + 1, so a renewal goes straight to
 * the entry; a lease with id 0 (or one out of range) is found by key. */
int  vigil_leases_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_leases **out);
/* As vigil_hb_create_group(3) and vigil_hb_open_flags(3). */
int  vigil_leases_create_group(const char *path, uint32_t capacity, unsigned mode, gid_t group, vigil_leases **out);
int  vigil_leases_open_flags(const char *path, unsigned flags, vigil_leases **out);

/* Read-only view of one entry, for `vigil inspect` and monitoring. */
enum vigil_lease_state {
    VIGIL_LEASE_VACANT   = 0, /* no key: never used, or cleared after a crashed change */
    VIGIL_LEASE_HELD     = 1, /* unexpired: acquire of this key gives VIGIL_EBUSY */
    VIGIL_LEASE_EXPIRED  = 2, /* the holder stopped renewing; anyone may acquire it */
    VIGIL_LEASE_RELEASED = 3, /* released by its holder; anyone may acquire it */
    VIGIL_LEASE_CHANGING = 4, /* a process is in the middle of changing it */
};
typedef struct vigil_lease_info {
    char     key[128];      /* always NUL-terminated */
    char     owner[64];     /* always NUL-terminated */
    uint64_t token;         /* fencing token of the last hand-over */
    uint64_t ttl_ms;
    int64_t  expires_in_ms; /* > 0 while held; <= 0 expired that long ago; 0 released or vacant */
    uint32_t state;         /* enum vigil_lease_state */
    uint32_t pid;           /* acquiring process, or the changing one when CHANGING */
} vigil_lease_info;         /* fields may be added at the end */
uint32_t vigil_leases_capacity(const vigil_leases *ls);
/* 0 and *out for a held, expired or released entry; VIGIL_EVACANT for a
 * vacant one and VIGIL_EBUSY for one stuck in a change (both fill *out);
 * VIGIL_ERANGE for index >= capacity. */
int  vigil_leases_entry(const vigil_leases *ls, uint32_t index, vigil_lease_info *out);
int  vigil_leases_get(vigil_leases *ls, const char *key, vigil_lease_info *out); /* 0 held, VIGIL_EVACANT nobody holds it */
/* Blocks until the key is acquired (0) or timeout_ns passes
 * (VIGIL_ETIMEDOUT; UINT64_MAX: no deadline), asleep on a futex in the
 * file, woken by a release or at the holder's expiry; it never polls. */
int  vigil_leases_acquire_wait(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                               uint64_t timeout_ns, vigil_lease *out);

/* Counters of the store's events since it was created, for monitoring
 * (vigil_hb_stats(3)). */
typedef struct vigil_leases_counters {
    uint64_t handovers;        /* acquisitions: fencing tokens handed out */
    uint64_t renewals_refused; /* renewals answered VIGIL_ELOST */
    uint64_t expiries;         /* acquisitions that took over an expired lease */
} vigil_leases_counters;       /* fields may be added at the end */
int  vigil_leases_stats(const vigil_leases *ls, vigil_leases_counters *out);

#ifdef __cplusplus
}
#endif

#endif
