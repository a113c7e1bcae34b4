/* SPDX-License-Identifier: MIT */
/*
 * vigil failover and leader election on the heartbeat table.
 */
#ifndef VIGIL_FAILOVER_H
#define VIGIL_FAILOVER_H

#include <vigil/heartbeat.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vigil_reclaim { uint32_t slot; uint32_t pid; uint64_t in_flight; } vigil_reclaim;
int vigil_failover_scan(vigil_hb *hb, uint64_t grace_epochs, vigil_reclaim *out, uint32_t max); /* at most max; the rest wait for the next scan */

typedef struct vigil_leader { uint32_t slot; uint32_t pid; uint64_t term; } vigil_leader;
int  vigil_leader_elect(vigil_hb *hb, uint64_t grace_epochs, vigil_leader *out);
bool vigil_leader_is(const vigil_hb *hb, uint32_t slot, uint64_t grace_epochs);
int  vigil_hb_probe(const vigil_hb *hb, uint32_t slot); /* 1 alive, 0 provably dead, VIGIL_* / -errno unknown */

#ifdef __cplusplus
}
#endif

#endif
