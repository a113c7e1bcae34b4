/* SPDX-License-Identifier: MIT */
/*
 * vigil failover and leader election on the heartbeat table.
 *
 * failover_scan vacates every slot whose heartbeat lapsed past the grace
 * window and hands its in-flight bits to the caller, exactly once among
 * any number of racing watchdogs; failover_scan_probe also takes, without
 * waiting for the grace window, every slot whose owner vigil_hb_probe
 * proves dead. leader_elect makes the lowest live pid the coordinator and
 * raises the term, the fencing token, exactly when the leader changes.
 * The protocols are told in src/failover.c, src/leader.c and src/probe.c;
 * how a pid is judged alive or dead, in src/proc.c.
 */
#ifndef VIGIL_FAILOVER_H
#define VIGIL_FAILOVER_H

#include <vigil/heartbeat.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vigil_reclaim { uint32_t slot; uint32_t pid; uint64_t in_flight; } vigil_reclaim;
int vigil_failover_scan(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max); /* at most max; the rest wait for the next scan */
/* As vigil_failover_scan, and also reclaims a slot still inside its grace
 * window when vigil_hb_probe answers 0 (owner provably dead). One kill(2)
 * and at most one /proc read per occupied slot: for a watchdog, not a loop. */
int vigil_failover_scan_probe(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max);

typedef struct vigil_leader { uint32_t slot; uint32_t pid; uint64_t term; } vigil_leader;
int  vigil_leader_elect(vigil_hb *hb, uint64_t grace_epochs, vigil_leader *out);
bool vigil_leader_is(const vigil_hb *hb, uint32_t slot, uint64_t grace_epochs);
/* The leader and term the last election recorded, without electing: 0,
 * VIGIL_ENOPEERS when no election has named one, VIGIL_EBUSY while an
 * election is installing a new one. The leader named may since have died;
 * vigil_leader_is says whether it still holds. */
int  vigil_leader_get(const vigil_hb *hb, vigil_leader *out);
int  vigil_hb_probe(const vigil_hb *hb, uint32_t slot); /* 1 alive, 0 provably dead, VIGIL_* / -errno unknown */

/*
 * Blocks until at least one slot can be reclaimed, reclaims (at most max)
 * and returns how many entries it wrote; 0 when timeout_ns passed with
 * nothing to reclaim (UINT64_MAX: no deadline). A slot can be reclaimed
 * when it is stale by epochs, as for vigil_failover_scan, or at once when
 * its owner is provably dead: the handle holds a pidfd per occupied slot's
 * owner and wakes the moment one exits. Exactly once against any scans
 * and waits, in any process. One wait at a time per handle.
 */
int vigil_failover_wait(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns,
                        vigil_reclaim *out, uint32_t max);

/* Why each entry of vigil_failover_wait_why was reclaimed. */
enum { VIGIL_RECLAIM_STALE = 1, VIGIL_RECLAIM_EXITED = 2 };
int vigil_failover_wait_why(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns,
                            vigil_reclaim *out, uint32_t *why, uint32_t max);

/* What the last wait on hb could watch: pidfds is 0 where the kernel has
 * none (every slot then waits out its epochs); watched the slots whose
 * owner's exit wakes the wait, by_epochs the occupied slots left to epochs
 * (an owner in another pid namespace, or of none recorded), retrying the
 * occupied slots waiting on epochs only until a pidfd can be made (the
 * process was out of descriptors or memory: tried again at every look). */
typedef struct vigil_failover_watch_info {
    uint32_t pidfds;
    uint32_t watched;
    uint32_t by_epochs;
    uint32_t retrying;
} vigil_failover_watch_info; /* fields may be added at the end */
int vigil_failover_wait_info(const vigil_hb *hb, vigil_failover_watch_info *out);

/* The descriptor the waits on hb sleep on, for an event loop: readable
 * (POLLIN) while a watched owner has exited and its slot is not yet
 * reclaimed. Only a wait adds or removes owners: call vigil_failover_wait
 * with a timeout of 0 when it is readable and at every tick. Valid until
 * vigil_hb_close; never read or close it. -ENOSYS without pidfds. */
int vigil_failover_wait_fd(vigil_hb *hb);

#ifdef __cplusplus
}
#endif

#endif
