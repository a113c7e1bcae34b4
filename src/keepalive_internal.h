/* SPDX-License-Identifier: MIT */
/* Lease keepalive internals shared with the backends (src/leases_*.c,
 * src/etcd/recipes/etcd.c): the lease clock, and how an acquisition tells the
 * keepalive when it was sent. */
#ifndef VIGIL_SRC_KEEPALIVE_INTERNAL_H
#define VIGIL_SRC_KEEPALIVE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <vigil/lease.h>

/*
 * THE LEASE CLOCK: CLOCK_BOOTTIME, in nanoseconds. A lease's deadline
 * (the keepalive's local expiry, the store's expiry) runs while the
 * machine is suspended, as an etcd lease on another host does; on
 * CLOCK_MONOTONIC, which stops across a suspend, a process waking from
 * one would believe in a lease that lapsed while it slept. The clock is
 * the same for every process on the host (outside time namespaces), so
 * an expiry written by one is read rightly by all.
 *
 * vigil_lease_clock_skew is 0 in production; a test adds to it to move
 * the lease clock (a suspend, a slow answer) without waiting for one. The
 * kernel's timers are armed at the deadline less the skew, so only the
 * clock reads move: a test that jumps it looks with lost() or the store.
 */
extern _Atomic uint64_t vigil_lease_clock_skew;

static inline uint64_t vigil_lease_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    /* Relaxed: a test's knob, read alone. */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
           atomic_load_explicit(&vigil_lease_clock_skew, memory_order_relaxed);
}

/* Called by a backend when it hands out `lease` from a request sent at
 * `sent_ns` on the lease clock: a keepalive started for that lease on
 * this thread times local expiry from then, not from its own start. */
void vigil_lease_note_sent(const vigil_lease *lease, uint64_t sent_ns);

#endif
