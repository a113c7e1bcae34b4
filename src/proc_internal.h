/* SPDX-License-Identifier: MIT */
/*
 * Process identity, in one place: what /proc/<pid>/stat says about a
 * process, this process's own pid, start time and pid namespace (cached,
 * and never carried into a forked child), and the judge of whether a
 * recorded process is still alive. Used by register (heartbeat.c), probe
 * and the probe-assisted failover scan (probe.c, failover.c), the election
 * lock (leader.c) and the lease store's entry locks (leases_lock.c).
 */
#ifndef VIGIL_SRC_PROC_INTERNAL_H
#define VIGIL_SRC_PROC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <vigil/heartbeat.h> /* vigil__cas16, VIGIL_EBUSY */

#include "spin_internal.h"

/* State (field 3: 'R', 'S', 'Z', ...) and start time (field 22, clock
 * ticks since boot) of /proc/<pid>/stat. 0 with both written; -EINVAL for
 * pid 0 or above INT_MAX, -ENOENT when no such process is visible, -EIO
 * for a line that does not parse, other -errno from open or read. */
int vigil_proc_stat(uint32_t pid, char *state, uint64_t *start);

/* The start time alone: 0 and *out on success, errors as above. */
int vigil_proc_start_time(uint32_t pid, uint64_t *out);

/*
 * This process's own identity, computed once and then read without a
 * system call; a forked child works out its own (see proc.c).
 *
 * vigil_self_pid: getpid(). vigil_self_start_time: field 22 of
 * /proc/self/stat, 0 unknown. vigil_self_pidns: the inode of
 * /proc/self/ns/pid, 0 unknown; what register stamps as a slot's owner_ns.
 */
uint32_t vigil_self_pid(void);
uint64_t vigil_self_start_time(void);
uint64_t vigil_self_pidns(void);

/* All of it at once, for register (one call on its path, not four):
 * pid, start time, pid namespace and lock word (vigil_self_lock_word). */
struct vigil_self_id {
    uint32_t pid;
    uint64_t start, ns, lock;
};
void vigil_self_id(struct vigil_self_id *out);

/*
 * Is process `pid` the one that was recorded? 1 alive, 0 provably dead,
 * < 0 unknown (-errno, or -EREMOTE when the owner or this process's /proc
 * lives in another pid namespace).
 *
 * `start` is the recorded start time (/proc/<pid>/stat field 22) and
 * `start_mask` the bits of it that were kept; `ns` the recorded pid
 * namespace (inode of /proc/<pid>/ns/pid) and `ns_mask` likewise. A
 * recorded value whose kept bits are all 0 means "not recorded": a start
 * time never convicts then, and the owner is taken to share this
 * process's pid namespace.
 *
 * Dead means: kill(pid, 0) says ESRCH; or the pid exists but is a zombie
 * whose every thread has exited (it will never run again, it only waits
 * for its parent to reap it); or it exists with a different start time
 * (the pid was reused by another process). EPERM from kill means the
 * process exists. A pid above INT_MAX is no process anywhere (pid_t is a
 * positive int) and is never passed to kill, where it would name a
 * process group. The verdicts in full are told at the code, in proc.c.
 */
int vigil_pid_judge(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask);

/*
 * The judge for a lock word's holder (the election lock, the lease
 * store's locks): true only when the holder is provably dead, since
 * robbing a live holder is the one mistake a lock cannot undo; "unknown"
 * counts as alive. Pid 0 is no word a locker writes (a scribble: dead).
 * A holder with this process's own pid, recorded in this pid namespace,
 * is judged without a system call: it is a thread of ours when the start
 * time matches, else the pid's previous owner, dead since we have its pid.
 */
bool vigil_holder_dead(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask);

/*
 * Lock words: the one way a lock in a shared file names its holder (the
 * election lock, a heartbeat slot's writer, the lease store's entry and
 * bind locks), so that a waiter can tell a dead holder from a slow one.
 *
 *   bit  63      1: held (a lock word is never 0; the lease store's
 *                CTL_LOCKED)
 *   bits 62..41  pid (22 bits: Linux pids are below 2^22)
 *   bits 40..21  pid namespace, exactly: 0 unknown, 1 the initial
 *                namespace (inode 0xeffffffc), 2 + (inode - 0xf0000000)
 *                for the others while that fits in 20 bits, else 0
 *   bits 20..0   low 21 bits of the start time (clock ticks since boot)
 *
 * The namespace is exact, never a hash or a truncation, because a holder
 * in another namespace taken for one in ours would be judged by a pid that
 * names another process here, and robbed. The start tag may collide (a
 * reused pid whose new process started 2^21 ticks apart); the judge then
 * looks further (vigil_lock_holder_dead).
 */
#define VIGIL_LOCK_HELD      (UINT64_C(1) << 63)
#define VIGIL_LOCK_PID_SHIFT 41
#define VIGIL_LOCK_PID_MASK  ((UINT64_C(1) << 22) - 1)
#define VIGIL_LOCK_NS_SHIFT  21
#define VIGIL_LOCK_NS_MASK   ((UINT64_C(1) << 20) - 1)
#define VIGIL_LOCK_START_MASK ((UINT64_C(1) << 21) - 1)

static inline uint32_t vigil_lock_pid(uint64_t w) { return (uint32_t)((w >> VIGIL_LOCK_PID_SHIFT) & VIGIL_LOCK_PID_MASK); }
static inline uint32_t vigil_lock_ns(uint64_t w) { return (uint32_t)((w >> VIGIL_LOCK_NS_SHIFT) & VIGIL_LOCK_NS_MASK); }
static inline uint64_t vigil_lock_start(uint64_t w) { return w & VIGIL_LOCK_START_MASK; }

/* The namespace code of a pid namespace inode, as above; 0 unknown. */
uint32_t vigil_pidns_code(uint64_t inode);
/* A lock word for (pid, namespace inode, start time); 0 when the pid does
 * not fit (no Linux pid is that large). */
uint64_t vigil_lock_word_of(uint32_t pid, uint64_t ns_inode, uint64_t start);
/* This process's lock word, from its cached identity: no system call after
 * the first, and a forked child gets its own. */
uint64_t vigil_self_lock_word(void);

/*
 * Is the holder named by lock word w provably dead? False ("alive") for
 * everything that cannot be proven: a word from another pid namespace or
 * of unknown namespace (its pid means nothing here), a /proc that cannot
 * be read. A word without the held bit, or with pid 0, is no word a holder
 * writes: a scribble, dead.
 *
 * `mapping` is an address inside this process's mapping of the file that
 * holds the lock, or NULL. With it, a holder that vigil_pid_judge finds
 * alive is looked at once more: a process that holds a lock in a file has
 * that file mapped, so a pid whose process provably maps no part of the
 * same file (its /proc/<pid>/maps, read whole, names no mapping with the
 * device and inode that our own /proc/self/maps shows for `mapping`) is
 * the pid's new owner whose start tag happens to collide: the holder is
 * dead. It costs two reads of /proc, so a waiter asks at most once per
 * word (vigil_lock_judge).
 */
bool vigil_lock_holder_dead(uint64_t w, const void *mapping);

/* 1 when process pid maps the file that this process maps at `mapping`,
 * 0 when it provably maps no part of it, < 0 when that cannot be told. */
int vigil_proc_maps_file(uint32_t pid, const void *mapping);

/* vigil_lock_holder_dead for a waiter: the look at the holder's mappings
 * is made once per word a wait meets, not at every judgement. */
bool vigil_lock_judge(struct vigil_lock_wait *wait, uint64_t w, const void *mapping);

/*
 * LOCK PAIRS (models: model/slot.pml, model/election.pml): a lock in a
 * shared file that a waiter takes over from a dead holder without ever
 * robbing a live one, even one whose lock word equals the dead one's (the
 * dead holder's pid recycled, the new process started in the same clock
 * tick, or its start tag colliding). Two 64-bit words, 16-byte aligned:
 * `word`, the lock word of the holder (of the last holder once free), and
 * `seq` right after it, odd while the lock is held.
 *
 *   take:      {w, even s} -> {me, s + 1}, one 16-byte compare-and-swap;
 *   release:   seq = s + 1, one release store: while seq is odd only its
 *              holder moves it (a take-over happens only to the dead);
 *   take over: read {w, odd s} as one (seq, word, seq again, unchanged),
 *              judge w dead, then {w, s} -> {me, s + 2}, one 16-byte
 *              compare-and-swap.
 *
 * seq rises at every take and take-over and never goes back (64 bits),
 * so (w, s) names one holding for the life of the file: a take-over
 * whose holder was judged dead fails if the lock changed hands after it
 * was read, whatever word the new holder wrote. The read must come before
 * the judgement: a holder that took the lock before the read existed then,
 * so a judgement of "dead" made after the read covers it.
 *
 * vigil_pair_take: 0 and *held (the odd seq now held), or VIGIL_EBUSY.
 * vigil_pair_read: true with the pair as one moment had it.
 * vigil_pair_take_over: true and *held, false when {w, s} is gone.
 * `pair` is the word; the seq is pair[1].
 */
static inline int vigil_pair_take(_Atomic uint64_t *pair, uint64_t me, uint64_t *held)
{
    /* Relaxed: guesses for the swap, which compares them. */
    uint64_t s = atomic_load_explicit(&pair[1], memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&pair[0], memory_order_relaxed);
    while (!(s & 1u)) {
        uint64_t want = s + 1u;
        /* A full barrier: acquire for what the last holder wrote before
         * its release, and the odd seq ordered before the stores the
         * holder makes next (a SeqLock writer's fields come after its
         * odd version; on aarch64 see the fence in vigil_slot_lock). */
        if (vigil__cas16(pair, &w, &s, me, want)) {
            *held = want;
            return 0;
        }
        /* {w, s} is what the pair holds now: taken (s odd), or a free
         * lock that moved on since the guess, tried again. */
    }
    return VIGIL_EBUSY;
}

static inline void vigil_pair_release(_Atomic uint64_t *pair, uint64_t held)
{
    /* Release: whatever the holder wrote is visible to whoever sees the
     * even seq (the next taker's swap, a SeqLock reader's load). A store,
     * not a swap: while seq is odd only its holder moves it, since only a
     * holder proven dead is taken over. */
    atomic_store_explicit(&pair[1], held + 1u, memory_order_release);
}

bool vigil_pair_read(const _Atomic uint64_t *pair, uint64_t *word, uint64_t *seq);
bool vigil_pair_take_over(_Atomic uint64_t *pair, uint64_t w, uint64_t s, uint64_t me, uint64_t *held);

#endif
