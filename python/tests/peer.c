/* SPDX-License-Identifier: MIT */
/*
 * Description: the C peer of the Python package's multi-process tests: a
 * worker in a heartbeat table and a rival for a lease, so that Python and
 * C processes are seen to share the same files and protocols.
 *
 *   vigil_py_peer worker TABLE BIT...
 *       registers, marks BITs in flight, prints "slot S pid P", then beats
 *       every 2 ms until its stdin closes (then unregisters, exit 0) or
 *       60 s pass (exit 1). The test kills it with SIGKILL when it wants.
 *   vigil_py_peer lease STORE KEY OWNER TTL_MS
 *       one acquire: prints "token T" and exits 0 (after releasing),
 *       75 when the key is held (VIGIL_EBUSY), 1 on another error.
 *   vigil_py_peer lease-wait STORE KEY OWNER TTL_MS TIMEOUT_MS
 *       vigil_leases_acquire_wait: prints "token T", exit 0 once it has
 *       the key; 75 when TIMEOUT_MS passed first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vigil/vigil.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "vigil_py_peer: %s: %s\n", what, vigil_strerror(rc));
    return 1;
}

static int worker(int argc, char **argv)
{
    vigil_hb *hb = NULL;
    uint32_t slot = 0;
    int rc = vigil_hb_open(argv[0], 0, &hb);
    if (rc < 0)
        return fail(argv[0], rc);
    if ((rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot)) < 0)
        return fail("register", rc);
    for (int i = 1; i < argc; i++)
        if ((rc = vigil_hb_mark_in_flight(hb, slot, (unsigned)atoi(argv[i]))) < 0)
            return fail("mark_in_flight", rc);
    printf("slot %u pid %d\n", slot, (int)getpid());
    fflush(stdout);
    vigil_beater b = vigil_hb_beater(hb, slot);
    uint64_t until = now_ms() + 60000;
    while (now_ms() < until) {
        vigil_beater_beat(b);
        struct pollfd p = { .fd = 0, .events = POLLIN };
        if (poll(&p, 1, 2) > 0) { /* EOF (or anything): the test is done with us */
            vigil_hb_unregister(hb, slot);
            vigil_hb_close(hb);
            return 0;
        }
    }
    fprintf(stderr, "vigil_py_peer: worker: nobody stopped me in 60 s\n");
    return 1;
}

static int lease(int argc, char **argv, int wait)
{
    if (argc < 4 + wait)
        return 2;
    vigil_leases *ls = NULL;
    int rc = vigil_leases_open(argv[0], &ls);
    if (rc < 0)
        return fail(argv[0], rc);
    uint64_t ttl = strtoull(argv[3], NULL, 10);
    vigil_lease l;
    if (wait) /* asleep in the store until the holder releases or lapses */
        rc = vigil_leases_acquire_wait(ls, argv[1], argv[2], ttl, strtoull(argv[4], NULL, 10) * 1000000u, &l);
    else
        rc = vigil_leases_acquire(ls, argv[1], argv[2], ttl, &l);
    if (rc == VIGIL_EBUSY || rc == VIGIL_ETIMEDOUT) {
        vigil_leases_close(ls);
        return 75;
    }
    if (rc < 0)
        return fail("acquire", rc);
    printf("token %llu\n", (unsigned long long)l.token);
    fflush(stdout);
    vigil_leases_release(ls, &l);
    vigil_leases_close(ls);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "worker") == 0)
        return worker(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "lease") == 0)
        return lease(argc - 2, argv + 2, 0);
    if (argc >= 2 && strcmp(argv[1], "lease-wait") == 0)
        return lease(argc - 2, argv + 2, 1);
    fprintf(stderr, "usage: vigil_py_peer worker TABLE BIT... | lease STORE KEY OWNER TTL_MS"
                    " | lease-wait STORE KEY OWNER TTL_MS TIMEOUT_MS\n");
    return 2;
}
