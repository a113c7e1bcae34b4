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
 * REGISTRATIONS AND THEIR GENERATIONS (vigil-files(5), "gen").
 *
 * A registration is (slot, gen): the slot's 64-bit `gen` word rises by one
 * at every registration into the slot and never goes back, so a gen names
 * one registration for the life of the file, whatever pids are recycled.
 * The word holds:
 *
 *   0                         vacant, never registered (a new file)
 *   g, 1 <= g <= GEN_MAX      occupied by registration g
 *   GEN_VACANT | g            vacant, g the last registration it held
 *
 * A gen always fits in VIGIL_GEN_BITS bits, so a name truncated to them
 * (the leader word) never recurs either: a slot whose last gen is
 * VIGIL_GEN_MAX is retired and never registered again (2^43 registrations
 * of one slot: a million a second for over three months).
 */
#define VIGIL_GEN_BITS   43
#define VIGIL_GEN_MAX    ((UINT64_C(1) << VIGIL_GEN_BITS) - 1)
#define VIGIL_GEN_VACANT (UINT64_C(1) << 63)

/* The generation a gen word names: g when occupied, 0 when vacant (or
 * scribbled to a value no registration has). */
static inline uint64_t vigil_gen_of(uint64_t word)
{
    return word <= VIGIL_GEN_MAX ? word : 0;
}

/*
 * The current registration of slot `s`: its gen, or 0 when the slot is
 * vacant. seq_cst, for checks across files: a caller that stores a record
 * naming a registration and then loads the gen to see it still holds
 * (the barrier's arrival) races a failover that kills the gen (a locked
 * read-modify-write, a full barrier) and then reads the records; with
 * the load seq_cst at least one of the two sees the other. On x86-64 it
 * is a plain load, on aarch64 an ldar.
 */
static inline uint64_t vigil_slot_gen(const struct vigil_hb_slot *s)
{
    return vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_seq_cst));
}

/* The generation this handle registered into `slot`, 0 none (never
 * through this handle, or unregistered through it since). The caller
 * checks slot < hb->capacity. Relaxed: the handle's own note, written by
 * this process's register and unregister. */
static inline uint64_t vigil_hb_mine(const vigil_hb *hb, uint32_t slot)
{
    return atomic_load_explicit(&hb->mine[slot], memory_order_relaxed);
}

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
int  vigil_slot_try_lock(struct vigil_hb_slot *s, uint64_t *version);
int  vigil_slot_lock(struct vigil_hb_slot *s, uint64_t *version);
int  vigil_slot_unlock(struct vigil_hb_slot *s, uint64_t version);
/* With `writer` already ours (a repair's take-over): moves the version to
 * the next odd value, so readers keep away while the slot is repaired. */
int  vigil_slot_lock_version(struct vigil_hb_slot *s, uint64_t *version);

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

/* The probe-assisted claim of one slot (failover.c): vacates slot `slot`
 * if it still holds registration `gen`, the one whose owner was proven
 * dead, writing the entry to *out. 1 claimed, 0 not (another registration
 * holds the slot now, or it is vacant, or its lock stayed busy). */
int vigil_failover_claim_dead(vigil_hb *hb, uint32_t slot, uint64_t gen, vigil_reclaim *out);

/* A slot's words as one registration left them. */
struct vigil_slot_words {
    vigil_slot_info info;  /* pid, role, last_seen_epoch, in_flight */
    uint64_t        gen;   /* the registration (vigil_gen_of), 0 vacant */
    uint32_t        start_time; /* low 32 bits, 0 unknown */
    uint32_t        owner_ns;   /* 0 not recorded */
};

/* Start times are kept to their low 32 bits in a slot; compare so. */
#define VIGIL_START_MASK UINT64_C(0xffffffff)

/* The SeqLock read of a slot, for snapshot and probe: 0 with *out a copy
 * that no writer overlapped, or VIGIL_EBUSY when the slot stayed
 * mid-change past vigil_backoff's budget. gen, start_time and owner_ns are
 * read only when `identity` is set (a constant at each caller: snapshot, the
 * hot one, loads no more than it returns). */
static inline int vigil_slot_read(const struct vigil_hb_slot *s, struct vigil_slot_words *out, bool identity)
{
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        /* If the version is odd a writer is in the middle of an update:
         * retry rather than return fields from two different owners. */
        uint64_t v1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (!(v1 & 1u)) {
            struct vigil_slot_words w;
            w.info.pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
            w.info.role = atomic_load_explicit(&s->role, memory_order_relaxed);
            w.info.last_seen_epoch = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
            w.info.in_flight = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
            w.gen = identity ? vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed)) : 0;
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
