/* SPDX-License-Identifier: MIT */
/*
 * CMD's descriptors (fds.h): noted from one listing, dropped in one call
 * per run of descriptors the tool was not given. Listed, not probed: poll
 * answers POLLNVAL for an O_PATH descriptor (a lock directory, a group's
 * directory handed to CMD), and a probe stops at some bound where a
 * listing has none.
 */
#define _GNU_SOURCE
#include "fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The system call by number: glibc has a wrapper only since 2.34, the
 * kernel the call since 5.9 and the flag since 5.11. One number on every
 * architecture (the calls added since 5.1 share theirs). */
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

/* The note: the descriptors open at it, ascending. `bound`: above every
 * noted one and at least the numbers a probe without /proc tried, where
 * the last fallback of the drop stops. keep_all: the note ran out of
 * memory, and a descriptor lost is worse than one leaked. */
static int   *noted;
static size_t nnoted, noted_cap;
static int    bound;
static bool   keep_all;

static bool add(int fd)
{
    if (nnoted == noted_cap) {
        size_t cap = noted_cap ? noted_cap * 2 : 64;
        int *p = realloc(noted, cap * sizeof(*p));
        if (!p)
            return false;
        noted = p;
        noted_cap = cap;
    }
    noted[nnoted++] = fd;
    return true;
}

static int by_number(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "123" of a /proc/self/fd entry; -1 for ".", "..", anything else. */
static long fd_of_name(const char *s)
{
    long v = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++)
        if ((v = v * 10 + (*s - '0')) > INT_MAX)
            return -1;
    return *s ? -1 : v;
}

/* The note from /proc/self/fd (every descriptor but the listing's own):
 * false without /proc, or when the listing failed midway. */
static bool note_listed(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return false;
    int self = dirfd(d);
    errno = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long fd = fd_of_name(e->d_name);
        if (fd >= 0 && fd != self && !add((int)fd)) {
            keep_all = true;
            break;
        }
    }
    bool whole = errno == 0 || keep_all;
    closedir(d);
    qsort(noted, nnoted, sizeof(*noted), by_number);
    return whole;
}

void tool_fds_note(void)
{
    nnoted = 0;
    keep_all = false;
    struct rlimit rl;
    rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    bound = lim < 1024 ? 1024 : lim > 65536 ? 65536 : (int)lim;
    if (!note_listed()) {
        /* fcntl answers for every kind of descriptor, O_PATH too. */
        nnoted = 0;
        keep_all = false;
        for (int fd = 0; fd < bound && !keep_all; fd++)
            if (fcntl(fd, F_GETFD) >= 0 && !add(fd))
                keep_all = true;
    }
    if (nnoted > 0 && noted[nnoted - 1] >= bound)
        bound = noted[nnoted - 1] + 1;
}

static bool is_noted(int fd)
{
    size_t lo = 0, hi = nnoted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (noted[mid] == fd)
            return true;
        if (noted[mid] < fd)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* [lo, hi] made close-on-exec, or closed where the kernel knows the call
 * but not the flag (EINVAL, Linux 5.9 and 5.10: *plain from then on).
 * false: no close_range at all. */
static bool drop_run(unsigned lo, unsigned hi, bool *plain)
{
    if (!*plain) {
        if (syscall(__NR_close_range, lo, hi, CLOSE_RANGE_CLOEXEC) == 0)
            return true;
        if (errno != EINVAL)
            return false;
        *plain = true;
    }
    return syscall(__NR_close_range, lo, hi, 0u) == 0;
}

/* An entry of getdents64, which glibc wraps only since 2.30. */
struct fd_dirent {
    uint64_t       ino;
    int64_t        off;
    unsigned short reclen;
    unsigned char  type;
    char           name[];
};

/* Without close_range: closes each unnoted descriptor from `from` up that
 * /proc/self/fd lists (raw getdents64 into the stack: no allocation in
 * the child of a fork), else each number below the bound. */
static void drop_one_by_one(int from)
{
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        _Alignas(8) char buf[4096];
        long n;
        while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0)
            for (long at = 0; at < n;) {
                const struct fd_dirent *e = (const struct fd_dirent *)(buf + at);
                at += e->reclen;
                long fd = fd_of_name(e->name);
                if (fd >= from && fd != dir && !is_noted((int)fd))
                    close((int)fd); /* a listing of numbers: closing one moves no other */
            }
        close(dir);
        if (n == 0)
            return;
    }
    for (int fd = from; fd < bound; fd++)
        if (!is_noted(fd))
            close(fd);
}

void tool_fds_cloexec_unnoted(int from)
{
    if (keep_all)
        return;
    bool plain = false;
    unsigned lo = (unsigned)from; /* the next number not yet dealt with */
    for (size_t i = 0; i <= nnoted; i++) {
        if (i < nnoted && (unsigned)noted[i] < lo)
            continue; /* below `from`, or kept already */
        if (i == nnoted || (unsigned)noted[i] > lo) {
            unsigned hi = i < nnoted ? (unsigned)noted[i] - 1 : ~0u; /* [lo, hi]: a run to drop */
            if (!drop_run(lo, hi, &plain)) {
                drop_one_by_one(from);
                return;
            }
        }
        if (i < nnoted)
            lo = (unsigned)noted[i] + 1;
    }
}
