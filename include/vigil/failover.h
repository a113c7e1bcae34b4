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

#ifdef __cplusplus
}
#endif

#endif
