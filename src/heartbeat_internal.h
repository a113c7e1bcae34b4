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
 * this process's register and unregister. The note itself (hb->mine) is
 * 0 for never, the gen while registered or lost to failover (so every
 * call about a lost registration is told VIGIL_ELOST), and
 * VIGIL_GEN_VACANT | gen once unregistered through the handle. */
static inline uint64_t vigil_hb_mine(const vigil_hb *hb, uint32_t slot)
{
    return vigil_gen_of(atomic_load_explicit(&hb->mine[slot], memory_order_relaxed));
}

/*
 * THE SLOT WRITER LOCK (model: model/slot.pml; the design before the one
 * before, where the odd version itself was the lock and a repair by time
 * could move it backwards under a paused writer, is model/slot_old.pml's
 * counterexample; tests: test_slot_writer.c, test_failover.c).
 *
 * The lock is a lock pair (LOCK PAIRS, proc_internal.h): the slot's
 * {writer, seq}, seq being the SeqLock version itself. A structural
 * writer (register, unregister, set_role, a failover claim, promotion)
 * takes it with one 16-byte compare-and-swap from {any word, even v} to
 * {its lock word, v + 1}, changes the fields, and unlocks with one
 * release store of v + 2. Readers retry while the version is odd or has
 * moved. So a lock and an unlock cost one locked instruction and one
 * store.
 *
 * A writer killed mid-change leaves the version odd and `writer` naming
 * it: only a failover scan that proves that process dead
 * (vigil_lock_holder_dead) takes the lock over, from exactly the pair it
 * read before judging, to {its word, odd + 2}, and repairs the slot; the
 * version moves on, never back. Since the version never recurs, a
 * scanner that judged a dead writer and stalled cannot take over a lock
 * that changed hands since, even to a process whose lock word equals the
 * dead one's (model/slot.pml's aba run is the bug that was). A writer
 * that is alive (paused, preempted) or that the scanner cannot see
 * (another pid namespace) is never robbed: its slot stays locked until it
 * finishes, and its unlock is a plain store because nobody else moves an
 * odd version.
 *
 * vigil_slot_try_lock makes one attempt; vigil_slot_lock waits a bounded
 * time for a writer to finish and then gives VIGIL_EBUSY;
 * vigil_slot_take_over takes over the holding {w, odd} read before a
 * judgement of "dead", VIGIL_EBUSY when it changed since.
 */
int  vigil_slot_lock(struct vigil_hb_slot *s, uint64_t *version);
int  vigil_slot_take_over(struct vigil_hb_slot *s, uint64_t w, uint64_t odd, uint64_t *version);
static inline int vigil_slot_try_lock_as(struct vigil_hb_slot *s, uint64_t me, uint64_t *version);
static inline int vigil_slot_try_lock(struct vigil_hb_slot *s, uint64_t *version);
static inline void vigil_slot_unlock(struct vigil_hb_slot *s, uint64_t version);

/* Test hook, called at the points below when set (tests only): a writer
 * has just taken the lock; register has stored the new gen, not yet the
 * pid; a writer is about to unlock; a repairing scan has judged the
 * holder {w, odd} dead and is about to take over. */
enum { SP_LOCKED = 1, SP_GEN_WRITTEN, SP_FIELDS_WRITTEN, SP_JUDGED, SP_CLAIMING };
extern void (*vigil_slot_hook)(int point);
static inline void slot_hook(int point)
{
    void (*h)(int) = vigil_slot_hook;
    if (h)
        h(point);
}

/* A version here is the even value the holder found (after a take-over,
 * the one below the odd value it holds): the holding is version + 1 and
 * the unlock stores version + 2. */
static inline void vigil_slot_locked(uint64_t *version, uint64_t held)
{
    /* The odd version is visible before any field changes: a reader that
     * sees a new field value then loads the version again after its
     * acquire fence, and this fence makes that load see the odd one. On
     * x86-64 the swap that took the lock is a full barrier already and
     * this is no instruction; on aarch64 the swap's release half orders
     * only what came before it. */
    atomic_thread_fence(memory_order_release);
    *version = held - 1u;
    slot_hook(SP_LOCKED);
}

/* One attempt at the lock as the process whose lock word is `me`. */
static inline int vigil_slot_try_lock_as(struct vigil_hb_slot *s, uint64_t me, uint64_t *version)
{
    uint64_t held;
    if (vigil_pair_take(&s->writer, me, &held) < 0)
        return VIGIL_EBUSY;
    vigil_slot_locked(version, held);
    return 0;
}

static inline int vigil_slot_try_lock(struct vigil_hb_slot *s, uint64_t *version)
{
    return vigil_slot_try_lock_as(s, vigil_self_lock_word(), version);
}

static inline void vigil_slot_unlock(struct vigil_hb_slot *s, uint64_t version)
{
    slot_hook(SP_FIELDS_WRITTEN);
    /* Release (vigil_pair_release): every field written under the lock
     * is visible to whoever sees the new even version. */
    vigil_pair_release(&s->writer, version + 1u);
}

/* Test hook of the election (leader.c), called at the points below when
 * set (tests only): the election lock taken; a dead holder judged, its
 * take-over next; the change of leader installed (or found unneeded); the
 * other slots demoted, the promotion next. */
enum { EP_LOCKED = 1, EP_JUDGED, EP_CHANGED, EP_DEMOTED };
extern void (*vigil_elect_hook)(int point);

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
            /* ONLY AN ARGUMENT PROTECTS THIS FENCE: x86-64 keeps loads in
             * order, so it is no instruction there and no test on this
             * machine can miss it (make mutate lists it as argued). The
             * argument: the field loads must complete before the version
             * is read again, or a weaker processor (aarch64) may read the
             * second version first and return fields a writer was changing
             * under an unchanged even version: one owner's pid with
             * another's bits. With it, an unchanged even version means no
             * writer overlapped the loads (the writer's side is the
             * release fence in vigil_slot_locked). */
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
