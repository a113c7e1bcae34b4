/* SPDX-License-Identifier: MIT */
/*
 * CMD's descriptors (fds.h): noted in one call, dropped in one call per
 * run of descriptors the tool was not given.
 */
#define _GNU_SOURCE
#include "fds.h"

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
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

static bool fd_noted(const uint8_t *open, int fd)
{
    return open[fd / 8] >> (fd % 8) & 1;
}

void tool_fds_note(int n, uint8_t *open)
{
    /* events 0: poll asks nothing of an open descriptor and answers
     * POLLNVAL for a closed one, never blocking. One call for every
     * RLIMIT_NOFILE descriptors (poll refuses more at once: a limit
     * lowered after they were opened), fcntl one by one where it fails. */
    struct rlimit rl;
    int chunk = n;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n)
        chunk = rl.rlim_cur > 0 ? (int)rl.rlim_cur : 1;
    struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
    for (int lo = 0; lo < n; lo += chunk) {
        int k = n - lo < chunk ? n - lo : chunk;
        bool polled = false;
        if (pf) {
            for (int i = 0; i < k; i++)
                pf[lo + i] = (struct pollfd){ .fd = lo + i };
            polled = poll(pf + lo, (nfds_t)k, 0) >= 0;
        }
        for (int fd = lo; fd < lo + k; fd++)
            if (polled ? !(pf[fd].revents & POLLNVAL) : fcntl(fd, F_GETFD) >= 0)
                open[fd / 8] |= (uint8_t)(1u << (fd % 8));
    }
    free(pf);
}

void tool_fds_cloexec_unnoted(int from, int n, const uint8_t *open)
{
    bool ranges = true;
    for (int lo = from; lo < n;) {
        if (fd_noted(open, lo)) {
            lo++;
            continue;
        }
        int hi = lo; /* [lo, hi] a run of descriptors to drop */
        while (hi + 1 < n && !fd_noted(open, hi + 1))
            hi++;
        if (ranges && syscall(__NR_close_range, (unsigned)lo, (unsigned)hi, CLOSE_RANGE_CLOEXEC) != 0)
            ranges = false; /* ENOSYS, EINVAL: an older kernel, for this run and the rest */
        if (!ranges)
            for (int fd = lo; fd <= hi; fd++)
                close(fd);
        lo = hi + 1;
    }
}
