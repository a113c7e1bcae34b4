/* pool_worker.c: the worker of docs/guide-worker-pool.md in C, beside its
 * worker.py: takes jobs from queue/ (in the current directory, the spool)
 * until none is left anywhere, one at a time, under the guide's four
 * rules. Usage: pool_worker [TABLE [WORK_MS]] (defaults: the pool's table
 * /run/vigil/pool.hb, 200 ms of work per job). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vigil/vigil.h>

static int is_entry(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* The first job of dir/ in name order into job (empty when there is none);
 * the number of entries, or -1. */
static int first_job(const char *dir, char *job, size_t len)
{
    struct dirent **list;
    int n = scandir(dir, &list, is_entry, alphasort);
    if (n < 0)
        return -1;
    job[0] = '\0';
    if (n > 0)
        snprintf(job, len, "%s", list[0]->d_name);
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "pool_worker: %s: %s\n", what, vigil_strerror(rc));
    return 1;
}

/* Rule 4: a claim claimed/S.U.P.JOB whose slot S is no longer held by
 * pid P is an orphan. Its worker was reclaimed between its mark and its
 * take (the watchdog's requeue found no claim) and killed before it could
 * put the job back itself. Points job at JOB. */
static int orphan(const vigil_hb *hb, const char *name, const char **job)
{
    unsigned slot, unit, pid;
    int at = 0;
    vigil_slot_info info;
    if (sscanf(name, "%u.%u.%u.%n", &slot, &unit, &pid, &at) != 3 || at == 0)
        return 0;
    *job = name + at;
    int rc = vigil_hb_snapshot(hb, slot, &info); /* VIGIL_EBUSY mid-change: next time */
    return rc == VIGIL_EVACANT || (rc == 0 && info.pid != pid);
}

/* Puts the orphans of claimed/ back in the queue; how many. The names are
 * listed before their slots are read, so an orphan existed while P had
 * lost S, and P never holds S again: its own check after the take fails,
 * and it works on nothing. */
static int sweep(const vigil_hb *hb)
{
    struct dirent **list;
    int n = scandir("claimed", &list, is_entry, alphasort), back = 0;
    for (int i = 0; i < n; i++) {
        const char *job;
        char claim[600], to[600];
        if (orphan(hb, list[i]->d_name, &job)) {
            snprintf(claim, sizeof(claim), "claimed/%s", list[i]->d_name);
            snprintf(to, sizeof(to), "queue/%s", job);
            if (rename(claim, to) == 0) {   /* ENOENT: the watchdog's requeue was first */
                printf("requeued orphan %s\n", list[i]->d_name);
                back++;
            }
        }
        free(list[i]);
    }
    if (n >= 0)
        free(list);
    return back;
}

/* The work on one claimed job: its number squared, written under the
 * job's name so that a second run replaces the first (rule 2); a job that
 * is not a number gets "error: not a number" as its result. A long job
 * beats as it goes (every 100 ms here), or it would go stale past the
 * grace and be reclaimed while it works. */
static int work(vigil_hb *hb, uint32_t slot, const char *claim, const char *job, long work_ms)
{
    char tmp[600], done[600];
    long long v = 0;
    FILE *f = fopen(claim, "r");
    if (!f)
        return -errno;
    bool number = fscanf(f, "%lld", &v) == 1; /* a bad job is done too, its result says why: */
    fclose(f);                                /* requeued, it would end every worker in turn */
    for (long left = work_ms; left > 0; left -= 100) {
        sleep_ms(left < 100 ? left : 100);
        vigil_hb_beat(hb, slot);
    }
    snprintf(tmp, sizeof(tmp), "done/%s.%d.tmp", job, (int)getpid()); /* one writer per name */
    snprintf(done, sizeof(done), "done/%s", job);
    if (!(f = fopen(tmp, "w")))
        return -errno;
    if (number)
        fprintf(f, "%lld\n", v * v);
    else
        fprintf(f, "error: not a number\n");
    if (fclose(f) != 0 || rename(tmp, done) != 0)
        return -errno;
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/run/vigil/pool.hb";
    long work_ms = argc > 2 ? atol(argv[2]) : 200;
    vigil_hb *hb;
    uint32_t slot;
    int rc = vigil_hb_open(path, 0, &hb);
    if (rc < 0)
        return fail(path, rc);
    if ((rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot)) < 0)
        return fail("register", rc);
    for (;;) {
        char job[256], claim[600], from[600];
        vigil_hb_beat(hb, slot);
        int queued = first_job("queue", job, sizeof(job));
        if (queued < 0) {
            perror("pool_worker: queue");
            return 1;
        }
        if (queued == 0) {
            char any[256];
            int claimed = first_job("claimed", any, sizeof(any));
            if (claimed < 0) {
                perror("pool_worker: claimed");
                return 1;
            }
            if (claimed == 0)
                break;       /* nothing queued, nothing in anyone's hands */
            if (sweep(hb) == 0)
                sleep_ms(50); /* a dead worker's job may come back */
            continue;
        }
        snprintf(claim, sizeof(claim), "claimed/%u.0.%d.%s", slot, (int)getpid(), job);
        snprintf(from, sizeof(from), "queue/%s", job);
        if ((rc = vigil_hb_mark_in_flight(hb, slot, 0)) < 0) /* rule 1: the mark first ... */
            return fail("mark", rc);                          /* VIGIL_ELOST: reclaimed, stop */
        if (rename(from, claim) != 0) {                        /* ... then the job */
            int err = errno;
            vigil_hb_clear_in_flight(hb, slot, 0);
            if (err == ENOENT)                                 /* another worker took it first */
                continue;
            fprintf(stderr, "pool_worker: %s: %s\n", from, strerror(err));
            return 1;
        }
        if (vigil_hb_owned(hb, slot) != 1) {                  /* rule 1: the mark still holds? */
            if (rename(claim, from) != 0 && errno != ENOENT)   /* no: reclaimed before the take, */
                perror("pool_worker: put back");               /* the job goes back (ENOENT: the */
            return fail("take", VIGIL_ELOST);                  /* watchdog's requeue found it) */
        }
        printf("slot %u took %s\n", slot, job);
        fflush(stdout);
        if ((rc = work(hb, slot, claim, job, work_ms)) < 0)              /* rule 2: the result ... */
            return fail(job, rc);
        unlink(claim);                                         /* ... the claim ... */
        if ((rc = vigil_hb_clear_in_flight(hb, slot, 0)) < 0)  /* ... then the mark */
            return fail("clear", rc);
    }
    vigil_hb_unregister(hb, slot);
    vigil_hb_close(hb);
    return 0;
}
