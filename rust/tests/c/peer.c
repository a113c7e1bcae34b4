/* SPDX-License-Identifier: MIT */
/*
 * The C side of the Rust crate's multi-process tests and of its bench
 * example, compiled by them against the same headers and library:
 *
 *   peer worker TABLE BIT...
 *       registers, marks BITs in flight, prints "slot S pid P", then beats
 *       every 2 ms until its stdin closes (unregisters, exit 0) or 60 s
 *       pass (exit 1). The test kills it with SIGKILL when it wants.
 *   peer beat TABLE N
 *       registers and times N beats (a multiple of 8) through
 *       vigil_beater_beat (inline), eight to a loop turn;
 *       prints "ns X" per beat (best of 5 runs).
 *   peer register TABLE N
 *       times N vigil_hb_register + vigil_hb_unregister pairs; prints
 *       "ns X" per pair (best of 5 runs).
 *   peer barrier TABLE BARRIER GROUP ROUNDS
 *       registers, binds, starts the group of GROUP (vigil_barrier_start),
 *       times ROUNDS rounds of vigil_barrier_wait from the first round it
 *       gave; prints "ns X" per round.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vigil/vigil.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "peer: %s: %s\n", what, vigil_strerror(rc));
    return 1;
}

static int worker(vigil_hb *hb, int argc, char **argv)
{
    uint32_t slot;
    int rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot);
    if (rc < 0)
        return fail("register", rc);
    for (int i = 0; i < argc; i++)
        if ((rc = vigil_hb_mark_in_flight(hb, slot, (unsigned)atoi(argv[i]))) < 0)
            return fail("mark", rc);
    printf("slot %u pid %d\n", slot, (int)getpid());
    fflush(stdout);
    vigil_beater b = vigil_hb_beater(hb, slot);
    for (uint64_t until = now_ns() + 60000000000u; now_ns() < until;) {
        vigil_beater_beat(b);
        struct pollfd p = { .fd = 0, .events = POLLIN };
        char buf[64];
        if (poll(&p, 1, 2) == 1 && read(0, buf, sizeof(buf)) <= 0) {
            vigil_hb_unregister(hb, slot);
            return 0;
        }
    }
    return 1;
}

static int beat(vigil_hb *hb, uint64_t n)
{
    uint32_t slot;
    int rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot);
    if (rc < 0)
        return fail("register", rc);
    vigil_beater b = vigil_hb_beater(hb, slot);
    uint64_t best = UINT64_MAX;
    for (int run = 0; run < 5; run++) {
        uint64_t t0 = now_ns();
        /* Eight beats per turn, as the Rust side writes them: the loop's
         * own cost is then the same small share on both sides. */
        for (uint64_t i = 0; i < n; i += 8) {
            vigil_beater_beat(b); vigil_beater_beat(b); vigil_beater_beat(b); vigil_beater_beat(b);
            vigil_beater_beat(b); vigil_beater_beat(b); vigil_beater_beat(b); vigil_beater_beat(b);
        }
        uint64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    vigil_hb_unregister(hb, slot);
    printf("ns %.4f\n", (double)best / (double)n);
    return 0;
}

static int reg(vigil_hb *hb, uint64_t n)
{
    uint64_t best = UINT64_MAX;
    uint32_t pid = (uint32_t)getpid();
    for (int run = 0; run < 5; run++) {
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < n; i++) {
            uint32_t slot;
            int rc = vigil_hb_register(hb, pid, &slot);
            if (rc < 0)
                return fail("register", rc);
            vigil_hb_unregister(hb, slot);
        }
        uint64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    printf("ns %.4f\n", (double)best / (double)n);
    return 0;
}

static int barrier(vigil_hb *hb, const char *path, uint32_t group, uint32_t rounds)
{
    vigil_barrier *b;
    uint32_t slot;
    int rc = vigil_barrier_open(path, hb, 0, &b);
    if (rc < 0)
        return fail(path, rc);
    if ((rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot)) < 0 || (rc = vigil_barrier_bind(b, slot)) < 0)
        return fail("register", rc);
    uint32_t first;
    if ((rc = vigil_barrier_start(b, group, UINT64_MAX, &first)) < 0)
        return fail("start", rc);
    uint64_t t0 = now_ns();
    for (uint32_t r = first; r < first + rounds; r++)
        if ((rc = vigil_barrier_wait(b, r)) < 0)
            return fail("wait", rc);
    uint64_t t = now_ns() - t0;
    printf("ns %.1f\n", (double)t / rounds);
    vigil_hb_unregister(hb, slot);
    vigil_barrier_close(b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: peer worker|beat|register|barrier TABLE ...\n");
        return 2;
    }
    vigil_hb *hb;
    int rc = vigil_hb_open(argv[2], 0, &hb);
    if (rc < 0)
        return fail(argv[2], rc);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "worker"))
        rc = worker(hb, argc - 3, argv + 3);
    else if (!strcmp(cmd, "beat") && argc == 4)
        rc = beat(hb, strtoull(argv[3], NULL, 10));
    else if (!strcmp(cmd, "register") && argc == 4)
        rc = reg(hb, strtoull(argv[3], NULL, 10));
    else if (!strcmp(cmd, "barrier") && argc == 6)
        rc = barrier(hb, argv[3], (uint32_t)atoi(argv[4]), (uint32_t)atoi(argv[5]));
    else
        rc = 2;
    vigil_hb_close(hb);
    return rc;
}
