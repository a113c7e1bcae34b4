/* SPDX-License-Identifier: MIT */
/*
 * Death probing: tell a dead local owner at once, without waiting out the
 * grace window.
 *
 * Fields read (heartbeat file, slot i at 64 + i * 64):
 *
 *   offset  size  field
 *        0     4  pid           owner, 0 = vacant
 *        4     4  seq           SeqLock version; pid, start_time and owner_ns
 *                               are read together under it
 *       32     8  start_time    owner's start time, /proc/<pid>/stat field 22
 *                               (clock ticks since boot), stamped by register;
 *                               0 = unknown
 *       48     8  owner_ns      owner's pid namespace, the inode of
 *                               /proc/<pid>/ns/pid; 0 = not recorded, taken to
 *                               be the prober's own
 *
 * The verdicts, in the order they are tried:
 *
 *   vacant slot                          VIGIL_EVACANT
 *   slot mid-change past the retry budget VIGIL_EBUSY
 *   owner_ns recorded and not ours       -EREMOTE (its pid means nothing here)
 *   pid > INT_MAX                        0: no process has that id
 *   kill(pid, 0) == ESRCH                0: gone
 *   kill(pid, 0) other than 0 or EPERM   -errno
 *   /proc/<pid>/stat unreadable          0 if kill now says ESRCH, else -errno
 *   state Z or X (zombie)                0: exited, only waits to be reaped
 *   start time recorded and different    0: the pid belongs to another process
 *   anything else                        1
 *
 * A verdict of 0 that rests on /proc (zombie, start time) is given only
 * after checking that /proc is this process's own namespace's (readlink
 * of /proc/self is our pid); a /proc mounted from another namespace names
 * other processes by the same numbers, and then the answer is -EREMOTE.
 * kill(2) needs no /proc: ESRCH is conclusive even where /proc is absent.
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "hb_internal.h"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads the state (field 3) and start time (field 22) of /proc/<pid>/stat.
 * The command name (field 2) is in parentheses and may hold spaces and
 * ')' itself, so fields are counted from the last ')'. */
static int read_stat(uint32_t pid, char *state, uint64_t *start)
{
    char path[32], buf[1024];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n;
    do
        n = read(fd, buf, sizeof(buf) - 1);
    while (n < 0 && errno == EINTR);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return -EIO;
    char st = p[2];
    p += 2; /* field 3 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EIO;
        p++;
    }
    if (*p < '0' || *p > '9')
        return -EIO;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || (*end != ' ' && *end != '\n' && *end != '\0'))
        return -EIO;
    *state = st;
    *start = v;
    return 0;
}

/* Is /proc this process's namespace's? In another's, /proc/self does not
 * resolve to our own pid. */
static bool proc_is_ours(void)
{
    char buf[32];
    ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *end;
    unsigned long v = strtoul(buf, &end, 10);
    return *end == '\0' && v == (unsigned long)vigil_self_pid();
}

/*
 * This process's own pid, pid namespace and start time, computed once and
 * cached process-wide: getpid() is a system call (glibc keeps no cache),
 * and an election that made three of them would spend microseconds on
 * them alone. A forked child is a different process: an atfork handler
 * clears the cache in the child. (A child made by a raw clone(2) system
 * call, which runs no atfork handlers, would inherit the parent's values;
 * vigil does not support calling it from one.)
 *
 * The cache is one word per value, with VALID set once computed; threads
 * that race to fill it compute the same values, so the last store wins
 * harmlessly. Relaxed: each word is self-contained.
 */
#define SELF_VALID (UINT64_C(1) << 63)
static _Atomic uint64_t self_pid, self_ns, self_start;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void self_forget(void)
{
    atomic_store_explicit(&self_pid, 0, memory_order_relaxed);
    atomic_store_explicit(&self_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&self_start, 0, memory_order_relaxed);
}

static void self_init(void)
{
    pthread_atfork(NULL, NULL, self_forget);
}

uint32_t vigil_self_pid(void)
{
    uint64_t v = atomic_load_explicit(&self_pid, memory_order_relaxed);
    if (!(v & SELF_VALID)) {
        pthread_once(&self_once, self_init);
        v = SELF_VALID | (uint32_t)getpid();
        atomic_store_explicit(&self_pid, v, memory_order_relaxed);
    }
    return (uint32_t)v;
}

uint64_t vigil_self_pidns(void)
{
    uint64_t v = atomic_load_explicit(&self_ns, memory_order_relaxed);
    if (!(v & SELF_VALID)) {
        pthread_once(&self_once, self_init);
        struct stat st;
        v = SELF_VALID | (stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino & ~SELF_VALID : 0);
        atomic_store_explicit(&self_ns, v, memory_order_relaxed);
    }
    return v & ~SELF_VALID;
}

uint64_t vigil_self_start_time(void)
{
    uint64_t v = atomic_load_explicit(&self_start, memory_order_relaxed);
    if (!(v & SELF_VALID)) {
        pthread_once(&self_once, self_init);
        uint64_t t = 0;
        if (vigil_proc_start_time((uint32_t)getpid(), &t) < 0)
            t = 0;
        v = SELF_VALID | (t & ~SELF_VALID);
        atomic_store_explicit(&self_start, v, memory_order_relaxed);
    }
    return v & ~SELF_VALID;
}

int vigil_pid_judge(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask)
{
    if (pid == 0)
        return -EINVAL;
    if ((ns & ns_mask) != 0) {
        uint64_t mine = vigil_self_pidns();
        if (mine == 0)
            return -ENOENT; /* no /proc: cannot tell which namespace we are in */
        if ((mine & ns_mask) != (ns & ns_mask))
            return -EREMOTE;
    }
    if (pid > INT_MAX)
        return 0;
    if (kill((pid_t)pid, 0) < 0) {
        if (errno == ESRCH)
            return 0;
        if (errno != EPERM)
            return -errno;
    }
    char state;
    uint64_t now_start;
    int err = read_stat(pid, &state, &now_start);
    if (err < 0) {
        /* It may have exited between the two looks; or there is no /proc
         * and nothing more can be said than that it exists. */
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return 0;
        return err;
    }
    bool zombie = state == 'Z' || state == 'X';
    bool reused = (start & start_mask) != 0 && (now_start & start_mask) != (start & start_mask);
    if (!zombie && !reused)
        return 1;
    return proc_is_ours() ? 0 : -EREMOTE;
}

int vigil_hb_probe(const vigil_hb *hb, uint32_t slot)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity)
        return VIGIL_ERANGE;
    struct vigil_hb_slot *s = &hb->slots[slot];
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        /* SeqLock read: pid, start time and namespace come from the same
         * registration, or a new owner's pid could be judged against the
         * old owner's start time and be called reused. */
        uint32_t v1 = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (!(v1 & 1u)) {
            uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
            uint64_t start = atomic_load_explicit(&s->start_time, memory_order_relaxed);
            uint64_t ns = atomic_load_explicit(&s->owner_ns, memory_order_relaxed);
            /* The loads complete before the version is read again; an
             * unchanged even version means no writer overlapped them. */
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&s->seq, memory_order_relaxed) == v1) {
                if (pid == 0)
                    return VIGIL_EVACANT;
                return vigil_pid_judge(pid, start, UINT64_MAX, ns, UINT64_MAX);
            }
        }
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}
