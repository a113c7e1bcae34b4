/*
 * The heartbeat table at work: a parent creates a table and ticks the
 * epoch, worker processes register, beat and mark work, one of them is
 * killed with SIGKILL, and the parent prints the slots each tick so the
 * dead one can be seen going stale. Usage: demo [WORKERS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vigil/vigil.h>

#define GRACE 3
#define TICKS 12
#define TICK_MS 150

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int worker(const char *path, unsigned index)
{
    vigil_hb *hb;
    uint32_t slot;
    if (vigil_hb_open(path, 0, &hb) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0)
        _exit(1);
    /* Beat until killed or the parent is gone, holding two work units. */
    vigil_hb_mark_in_flight(hb, slot, index * 2);
    vigil_hb_mark_in_flight(hb, slot, index * 2 + 1);
    for (int i = 0; i < 200 && getppid() != 1; i++) {
        vigil_hb_beat(hb, slot);
        sleep_ms(TICK_MS / 3);
    }
    vigil_hb_unregister(hb, slot);
    _exit(0);
}

static void print_table(vigil_hb *hb, uint64_t epoch)
{
    printf("epoch %3llu |", (unsigned long long)epoch);
    for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++) {
        vigil_slot_info s;
        int rc = vigil_hb_snapshot(hb, i, &s);
        if (rc == VIGIL_EVACANT)
            continue;
        if (rc < 0) {
            printf(" slot %u: %s |", i, vigil_strerror(rc));
            continue;
        }
        bool live = vigil_hb_is_live_at(s.pid, s.last_seen_epoch, epoch, GRACE);
        printf(" %u:%u %s bits %#llx |", i, s.pid, live ? "live " : "STALE",
               (unsigned long long)s.in_flight);
    }
    printf("  (%u live)\n", vigil_hb_live_count(hb, GRACE));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    unsigned workers = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
    if (workers < 2 || workers > 16) {
        fprintf(stderr, "usage: demo [WORKERS 2..16]\n");
        return 2;
    }
    char dir[] = "/tmp/vigil-demo.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[64];
    snprintf(path, sizeof(path), "%s/table.hb", dir);
    vigil_hb *hb;
    int rc = vigil_hb_create(path, 8, &hb);
    if (rc < 0) {
        fprintf(stderr, "demo: %s: %s\n", path, vigil_strerror(rc));
        return 1;
    }
    printf("table %s: %u slots, grace %d epochs, one tick every %d ms\n", path,
           vigil_hb_capacity(hb), GRACE, TICK_MS);
    pid_t pids[16];
    for (unsigned i = 0; i < workers; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            worker(path, i);
    }
    int ok = 1;
    for (int t = 1; t <= TICKS; t++) {
        sleep_ms(TICK_MS);
        uint64_t epoch = vigil_hb_tick(hb);
        if (t == 3) {
            printf("-- kill -9 worker %d --\n", (int)pids[0]);
            kill(pids[0], SIGKILL);
            waitpid(pids[0], NULL, 0);
        }
        print_table(hb, epoch);
    }
    uint32_t live = vigil_hb_live_count(hb, GRACE);
    printf("%u of %u workers live after the kill: %s\n", live, workers,
           live == workers - 1 ? "the dead one went stale" : "UNEXPECTED");
    ok = live == workers - 1;
    for (unsigned i = 1; i < workers; i++)
        kill(pids[i], SIGTERM);
    for (unsigned i = 1; i < workers; i++)
        waitpid(pids[i], NULL, 0);
    vigil_hb_close(hb);
    unlink(path);
    rmdir(dir);
    return ok ? 0 : 1;
}
