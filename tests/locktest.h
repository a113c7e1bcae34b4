/* SPDX-License-Identifier: MIT */
/*
 * Shared by the tests of `vigil lock` (test_tool_lock.c on the store,
 * etcd_test_tool_lock.c on etcd): two vigil lock processes on one key,
 * each CMD writing "start TOKEN" and "end TOKEN" to one log, and the
 * check that the commands never overlapped, the second ran after the
 * first, and the token rose.
 */
#ifndef VIGIL_LOCKTEST_H
#define VIGIL_LOCKTEST_H

#include "tooltest.h"

/* The CMD of a contender: appends start, holds a while (long enough that
 * an overlap, were exclusion broken, would show), appends end. */
#define LT_BODY "echo \"start $VIGIL_LEASE_TOKEN\" >> \"$1\"; sleep 0.4; echo \"end $VIGIL_LEASE_TOKEN\" >> \"$1\""

/* Runs two `vigil lock BACKEND_OPT BACKEND KEY -- sh -c LT_BODY sh LOG`
 * at once (the second started once the first's CMD has begun) and checks
 * the log. 0 or 1, with the reason on stderr. */
static inline int lt_two_never_overlap(const char *opt, const char *backend, const char *key, const char *log)
{
    struct vt_proc a, b;
    unlink(log);
    if (VT_SPAWN(&a, "lock", opt, backend, "--ttl", "3000", "--owner", "first", key, "--", "sh", "-c", LT_BODY, "sh",
                 log) != 0) {
        fprintf(stderr, "spawn failed\n");
        return 1;
    }
    /* The first holds before the second asks. */
    char logbuf[512] = "";
    uint64_t deadline = vt_now_ms() + 20000;
    while (!strstr(logbuf, "start") && vt_now_ms() < deadline) {
        vt_sleep_ms(5);
        vt_slurp(log, logbuf, sizeof(logbuf));
    }
    if (VT_SPAWN(&b, "lock", opt, backend, "--ttl", "3000", "--owner", "second", key, "--", "sh", "-c", LT_BODY, "sh",
                 log) != 0) {
        fprintf(stderr, "spawn failed\n");
        return 1;
    }
    int sa = vt_wait(a.pid, 30000), sb = vt_wait(b.pid, 30000);
    close(a.fd);
    close(b.fd);
    vt_slurp(log, logbuf, sizeof(logbuf));
    unsigned long long t[4] = { 0, 0, 0, 0 };
    char w[4][8] = { "", "", "", "" };
    int n = sscanf(logbuf, "%7s %llu %7s %llu %7s %llu %7s %llu", w[0], &t[0], w[1], &t[1], w[2], &t[2], w[3], &t[3]);
    if (sa != 0 || sb != 0 || n != 8 || vt_count_lines(logbuf) != 4) {
        fprintf(stderr, "two vigil lock on %s: exits %d and %d, log:\n%s", key, sa, sb, logbuf);
        return 1;
    }
    if (strcmp(w[0], "start") || strcmp(w[1], "end") || strcmp(w[2], "start") || strcmp(w[3], "end") ||
        t[0] != t[1] || t[2] != t[3]) {
        fprintf(stderr, "the commands overlapped on %s; log:\n%s", key, logbuf);
        return 1;
    }
    if (t[2] <= t[0]) {
        fprintf(stderr, "the second holder's token %llu is not above the first's %llu\n", t[2], t[0]);
        return 1;
    }
    return 0;
}

#endif
