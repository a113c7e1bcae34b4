/* SPDX-License-Identifier: MIT */
/* Heartbeat internals shared with failover and leader election. */
#ifndef VIGIL_SRC_HB_INTERNAL_H
#define VIGIL_SRC_HB_INTERNAL_H

#include <vigil/heartbeat.h>
#include "file.h"
#include "proc.h"
#include "spin.h"

extern const struct vigil_layout vigil_hb_layout;

/*
 * The slot's SeqLock version doubles as its writer lock: a structural
 * writer CASes it from even v to odd v + 1, changes the fields, and
 * releases it with a store of v + 2. Readers retry while it is odd or has
 * moved. Taking it by CAS means two writers (register racing failover,
 * say) can never interleave on one slot.
 *
 * vigil_slot_try_lock makes one attempt; vigil_slot_lock waits a bounded
 * time for a writer to finish and then gives VIGIL_EBUSY (a writer killed
 * mid-change leaves the version odd until failover repairs it).
 */
int  vigil_slot_try_lock(struct vigil_hb_slot *s, uint32_t *version);
int  vigil_slot_lock(struct vigil_hb_slot *s, uint32_t *version);
void vigil_slot_unlock(struct vigil_hb_slot *s, uint32_t version);

#endif
