/* SPDX-License-Identifier: MIT */
/* Judging whether a local process is alive: shared by vigil_hb_probe, the
 * probe-assisted failover scan and the election lock's dead-holder
 * recovery. */
#ifndef VIGIL_SRC_PROBE_H
#define VIGIL_SRC_PROBE_H

#include <vigil/common.h>

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
 * (state Z or X: it exited and will never beat again, it only waits for
 * its parent to reap it); or it exists with a different start time (the
 * pid was reused by another process). EPERM from kill means the process
 * exists. A pid above INT_MAX is no process anywhere (pid_t is a positive
 * int) and is never passed to kill, where it would name a process group.
 */
int vigil_pid_judge(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask);

/* This process's pid namespace (inode of /proc/self/ns/pid), 0 unknown.
 * What register should stamp as the slot's owner_ns. */
uint64_t vigil_self_pidns(void);

/* This process's start time, 0 unknown. */
uint64_t vigil_self_start_time(void);

/* getpid(), without the system call after the first. The three are cached
 * process-wide and forgotten in a forked child (pthread_atfork). */
uint32_t vigil_self_pid(void);

#endif
