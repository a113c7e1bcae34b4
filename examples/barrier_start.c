/* Starting a barrier safely: N processes that each register and then
 * wait from round 0 can see round 0 released before the last of them has
 * registered, since a peer that has not registered yet is not live and
 * the barrier counts only live peers. The start gate is round 0 waited
 * with a quorum of the whole group: it releases only once all N have
 * arrived, so all N are registered (and bound) before any round that
 * counts live peers. Every later round is a plain wait.
 *
 * Usage: barrier_start [N] [ROUNDS] (forks N workers over files in /tmp) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vigil/vigil.h>

static int worker(const char *hbp, const char *bp, uint32_t group, uint32_t rounds)
{
    vigil_hb *hb;
    vigil_barrier *b;
    uint32_t slot;
    if (vigil_hb_open(hbp, 0, &hb) < 0 || vigil_barrier_open(bp, hb, 0, &b) < 0 ||
        vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        return 1;
    /* The start gate: round 0 releases when the whole group has arrived. */
    int rc = vigil_barrier_wait_quorum(b, 0, group);
    for (uint32_t r = 1; rc >= 0 && r <= rounds; r++)
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
    for (uint32_t i = 0; i < group; i++)
        if (fork() == 0)
            _exit(worker(hbp, bp, group, rounds));
    int failed = 0, st;
    for (uint32_t i = 0; i < group; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    printf("%u workers, %u rounds after the start gate: %s (barrier at round %u)\n", group, rounds,
           failed ? "FAILED" : "ok", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    unlink(bp);
    unlink(hbp);
    return failed != 0;
}
