/* SPDX-License-Identifier: MIT */
/* Heartbeat internals shared with failover and leader election. */
#ifndef VIGIL_SRC_HEARTBEAT_INTERNAL_H
#define VIGIL_SRC_HEARTBEAT_INTERNAL_H

#include <vigil/heartbeat.h>
#include <vigil/failover.h>
#include "file_internal.h"
#include "proc_internal.h"
#include "spin_internal.h"

extern const struct vigil_layout vigil_hb_layout;

/*
 * THE SLOT WRITER LOCK (model: model/slot.pml; the design before it, where
 * the odd version itself was the lock and a repair by time could move it
 * backwards under a paused writer, is model/slot_old.pml's counterexample;
 * tests: test_slot_writer.c, test_failover.c).
 *
 * A structural writer (register, unregister, a failover claim, promotion)
 * first takes the slot's `writer` word by CAS from 0 to its own lock word
 * (pid, pid namespace, start tag: proc_internal.h), then moves the SeqLock
 * version from even v to odd v + 1, changes the fields, and unlocks with
 * a CAS of the version from v + 1 to v + 2 and of `writer` back to 0.
 * Readers retry while the version is odd or has moved. A writer killed
 * mid-change leaves `writer` naming it: only a failover scan that proves
 * that process dead (vigil_lock_holder_dead) takes the lock over and
 * repairs the slot, moving the version on, never back. A writer that is
 * alive (paused, preempted) or that the scanner cannot see (another pid
 * namespace) is never robbed: its slot stays locked until it finishes. An
 * unlock that finds the version or `writer` moved anyway (a peer writing
 * outside the protocol) fails, and the writer reports it, touching
 * nothing more.
 *
 * vigil_slot_try_lock makes one attempt; vigil_slot_lock waits a bounded
 * time for a writer to finish and then gives VIGIL_EBUSY.
 * vigil_slot_unlock returns 0, or VIGIL_ELOST when the lock was no longer
 * this writer's.
 */
int  vigil_slot_try_lock(struct vigil_hb_slot *s, uint32_t *version);
int  vigil_slot_lock(struct vigil_hb_slot *s, uint32_t *version);
int  vigil_slot_unlock(struct vigil_hb_slot *s, uint32_t version);
/* With `writer` already ours (a repair's take-over): moves the version to
 * the next odd value, so readers keep away while the slot is repaired. */
int  vigil_slot_lock_version(struct vigil_hb_slot *s, uint32_t *version);

/* Test hook, called at the points below when set (tests only). */
enum { SP_WRITER_TAKEN = 1, SP_LOCKED, SP_FIELDS_WRITTEN };
extern void (*vigil_slot_hook)(int point);
static inline void slot_hook(int point)
{
    void (*h)(int) = vigil_slot_hook;
    if (h)
        h(point);
}

/* vigil_failover_wait's state on a handle (failover_wait.c): its pidfds
 * closed and freed. NULL is fine. */
struct vigil_failover_watch;
void vigil_failover_watch_free(struct vigil_failover_watch *w);

/* The probe-assisted claim of one slot (failover.c): takes slot `slot`
 * from `pid` if its version is still `version`, the one at which its
 * owner was proven dead, writing the entry to *out. 1 claimed, 0 not. */
int vigil_failover_claim_dead(vigil_hb *hb, uint32_t slot, uint32_t version, uint32_t pid, vigil_reclaim *out);

/* A slot's words as one registration left them. */
struct vigil_slot_words {
    vigil_slot_info info; /* pid, role, last_seen_epoch, in_flight */
    uint64_t        start_time;
    uint64_t        owner_ns;
};

/* The SeqLock read of a slot, for snapshot and probe: 0 with *out a copy
 * that no writer overlapped, or VIGIL_EBUSY when the slot stayed
 * mid-change past vigil_backoff's budget. start_time and owner_ns are read
 * only when `identity` is set (a constant at each caller: snapshot, the
 * hot one, loads no more than it returns). */
static inline int vigil_slot_read(const struct vigil_hb_slot *s, struct vigil_slot_words *out, bool identity)
{
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        /* If the version is odd a writer is in the middle of an update:
         * retry rather than return fields from two different owners. */
        uint32_t v1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (!(v1 & 1u)) {
            struct vigil_slot_words w;
            w.info.pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
            w.info.role = atomic_load_explicit(&s->role, memory_order_relaxed);
            w.info.last_seen_epoch = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
            w.info.in_flight = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
            w.start_time = identity ? atomic_load_explicit(&s->start_time, memory_order_relaxed) : 0;
            w.owner_ns = identity ? atomic_load_explicit(&s->owner_ns, memory_order_relaxed) : 0;
            /* The field loads complete before the version is read again;
             * an unchanged even version means no writer overlapped them. */
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->seq, memory_order_relaxed) == v1) {
                *out = w;
                return 0;
            }
        }
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}

#endif
