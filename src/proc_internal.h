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

#include <stdbool.h>
#include <stdint.h>

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

#endif
