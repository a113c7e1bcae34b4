/* SPDX-License-Identifier: MIT */
/* Lease keepalive internals shared with the backends (src/leases_ops.c,
 * src/etcd/etcd.c): how an acquisition tells the keepalive when it was sent. */
#ifndef VIGIL_SRC_KEEPALIVE_INTERNAL_H
#define VIGIL_SRC_KEEPALIVE_INTERNAL_H

#include <vigil/lease.h>

/* Called by a backend when it hands out `lease` from a request sent at
 * monotonic `sent_ns`: a keepalive started for that lease on this thread
 * times local expiry from then, not from its own start. */
void vigil_lease_note_sent(const vigil_lease *lease, uint64_t sent_ns);

#endif
