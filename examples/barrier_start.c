/* Starting a barrier safely: N processes that each register and then
 * wait from round 0 can see round 0 released before the last of them has
 * registered, since a peer that has not registered yet is not live and
 * the barrier counts only live peers; they then count rounds apart. Each
 * worker here calls vigil_barrier_start once: it returns when all N have
 * arrived, with the same first round for each (whatever round the barrier
 * file was at), and every later round is a plain wait. The workers start
 * at different times on purpose.
 *
 * Usage: barrier_start [N] [ROUNDS] (forks N workers over files in /tmp) */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vigil/vigil.h>

static int worker(const char *hbp, const char *bp, uint32_t group, uint32_t rounds)
{
    vigil_hb *hb;
    vigil_barrier *b;
    uint32_t slot, first;
    if (vigil_hb_open(hbp, 0, &hb) < 0 || vigil_barrier_open(bp, hb, 0, &b) < 0 ||
        vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        return 1;
    /* The start: every member of the group, then the same first round. */
    int rc = vigil_barrier_start(b, group, 30000000000ull, &first);
    for (uint32_t r = first; rc >= 0 && r < first + rounds; r++)
        rc = vigil_barrier_wait(b, r); /* every live peer, each round */
    if (rc < 0)
        fprintf(stderr, "pid %d: %s\n", (int)getpid(), vigil_strerror(rc));
    vigil_hb_unregister(hb, slot);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return rc < 0;
}

int main(int argc, char **argv)
{
    uint32_t group = argc > 1 ? (uint32_t)atoi(argv[1]) : 4;
    uint32_t rounds = argc > 2 ? (uint32_t)atoi(argv[2]) : 100;
    char hbp[64], bp[64];
    snprintf(hbp, sizeof(hbp), "/tmp/vigil-start-%d.hb", (int)getpid());
    snprintf(bp, sizeof(bp), "/tmp/vigil-start-%d.barrier", (int)getpid());
    vigil_hb *hb;
    vigil_barrier *b;
    int rc = vigil_hb_create(hbp, 64, &hb);
    if (rc == 0)
        rc = vigil_barrier_create(bp, hb, 5, &b);
    if (rc < 0) {
        fprintf(stderr, "create: %s\n", vigil_strerror(rc));
        return 1;
    }
    for (uint32_t i = 0; i < group; i++) {
        if (fork() == 0)
            _exit(worker(hbp, bp, group, rounds));
        struct timespec late = { 0, 20000000 }; /* the next one comes 20 ms later */
        nanosleep(&late, NULL);
    }
    int failed = 0, st;
    for (uint32_t i = 0; i < group; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    printf("%u workers, %u rounds after the start: %s (barrier at round %u)\n", group, rounds,
           failed ? "FAILED" : "ok", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    unlink(bp);
    unlink(hbp);
    return failed != 0;
}
