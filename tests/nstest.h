/* SPDX-License-Identifier: MIT */
/*
 * Test scaffolding for names that recur: running a function as pid 1 of a
 * new pid namespace (with its own /proc, or with the parent's as
 * `unshare -p -f` without --mount-proc leaves it), and forking a child
 * with a pid chosen by the test (clone3 with set_tid), so that a pid is
 * recycled when the test says, not when the kernel happens to. Both need
 * root (CAP_SYS_ADMIN); without it the callers skip with VT_SKIP.
 */
#ifndef VIGIL_NSTEST_H
#define VIGIL_NSTEST_H

#include "testutil.h"

#include <linux/sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>

/*
 * Runs fn(arg) as pid 1 of a new pid namespace and returns its exit
 * status (vt_wait's: -1 if it did not finish within timeout_ms), or
 * VT_SKIP when this process may not make one. With own_proc, the new
 * namespace also gets a mount namespace of its own (made private, so
 * nothing leaks to the host) with a /proc of the new pid namespace;
 * without, /proc stays the parent's: /proc/<pid> there names other
 * processes than the pids the namespace's processes see.
 * When pid 1 exits the kernel kills every process left in its namespace.
 */
static inline int vt_in_pidns(int (*fn)(void *), void *arg, bool own_proc, unsigned timeout_ms)
{
    fflush(NULL);
    pid_t mid = fork();
    if (mid < 0)
        return -1;
    if (mid == 0) {
        if (unshare(CLONE_NEWPID | (own_proc ? CLONE_NEWNS : 0)) < 0)
            _exit(VT_SKIP);
        if (own_proc && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(VT_SKIP);
        pid_t inner = fork();
        if (inner == 0) {
            if (own_proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                _exit(VT_SKIP);
            int rc = fn(arg);
            fflush(NULL); /* _exit does not: what fn printed must come out */
            _exit(rc);
        }
        int st;
        if (inner < 0 || waitpid(inner, &st, 0) != inner)
            _exit(3);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    return vt_wait(mid, timeout_ms);
}

/* Is /proc this process's pid namespace's? (/proc/self names our pid.) */
static inline bool vt_proc_is_ours(void)
{
    char buf[32];
    ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strtol(buf, NULL, 10) == (long)getpid();
}

/*
 * fork(), but the child gets pid `pid` in this process's pid namespace
 * (clone3 with set_tid; the pid must be free). Returns as fork does, -1
 * with errno set on failure (EEXIST: the pid is taken; EPERM: no right to
 * choose). No atfork handlers run in the child: it should only pause, or
 * _exit, or be written not to need them.
 */
static inline pid_t vt_fork_with_pid(pid_t pid)
{
    pid_t want = pid;
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.exit_signal = SIGCHLD;
    ca.set_tid = (uint64_t)(uintptr_t)&want;
    ca.set_tid_size = 1;
    fflush(NULL);
    long r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0)
        vt_die_with_parent();
    return (pid_t)r;
}

/* A child that pauses until it is killed, with pid `pid` (0: any). */
static inline pid_t vt_spawn_sleeper(pid_t pid)
{
    pid_t p = pid ? vt_fork_with_pid(pid) : fork();
    if (p == 0)
        vt_await_kill();
    return p;
}

/* The start time (clock ticks since boot) /proc gives for pid, 0 unknown. */
static inline uint64_t vt_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    /* Fields after the command: state is field 3, start time field 22. */
    unsigned long long v = 0;
    int field = 2;
    for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " "))
        if (++field == 22) {
            v = strtoull(t, NULL, 10);
            break;
        }
    return v;
}

#endif
