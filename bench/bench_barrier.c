/* SPDX-License-Identifier: MIT */
/*
 * bench/barrier: the epoch barrier against pthread_barrier_t, side by side
 * in one run, with the hardware's limits measured in the same run.
 *
 *   4-thread round        vigil (one unbound handle; a bound handle per
 *                         thread) vs pthread_barrier_t
 *   4-process round       vigil (bound handle per process) vs a
 *                         PTHREAD_PROCESS_SHARED pthread_barrier_t in
 *                         shared memory
 *   wait_quorum(e, 1)     single participant, unbound and bound (the
 *                         record's 16-byte CAS and its reading)
 *   live_peers            8 slots (4 live), 64 slots (64 live); and
 *                         vigil_hb_live_count on the same tables
 *   epoch                 one load
 *   limits                a bare CAS, a futex wake round trip between two
 *                         threads, a sched_yield
 *
 * Each contender runs REPS times, alternating, and the median is printed:
 * the machine is shared and noisy, so the ratio is the figure. Usage:
 * bench_barrier [rounds]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vigil/vigil.h>

#include "barrier_internal.h"

enum { NT = 4, REPS = 7 };
static unsigned ROUNDS = 20000;
static char dir[128];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *path(const char *name)
{
    static char bufs[4][256];
    static unsigned n;
    char *b = bufs[n++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return b;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return v[n / 2];
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_barrier: %s: %s\n", what, vigil_strerror(rc));
    exit(1);
}

/* ---- 4 threads ----------------------------------------------------------- */

static pthread_barrier_t pt_bar, gate;
static vigil_barrier *vb_shared;
static vigil_barrier *vb_own[NT];
static _Atomic int bad;

struct targ { int kind; int idx; };

static void *thread_main(void *p)
{
    struct targ *a = p;
    pthread_barrier_wait(&gate);
    for (unsigned r = 0; r < ROUNDS; r++) {
        if (a->kind == 0) {
            pthread_barrier_wait(&pt_bar);
        } else {
            vigil_barrier *b = a->kind == 1 ? vb_shared : vb_own[a->idx];
            if (vigil_barrier_wait(b, vigil_barrier_epoch(b)) < 0)
                atomic_fetch_add(&bad, 1);
        }
    }
    pthread_barrier_wait(&gate);
    return NULL;
}

/* kind 0 pthread_barrier_t, 1 vigil shared unbound, 2 vigil bound per thread */
static double thread_round(int kind)
{
    pthread_t t[NT];
    struct targ a[NT];
    pthread_barrier_init(&gate, NULL, NT + 1);
    for (int i = 0; i < NT; i++) {
        a[i] = (struct targ){ kind, i };
        pthread_create(&t[i], NULL, thread_main, &a[i]);
    }
    pthread_barrier_wait(&gate);
    uint64_t t0 = now_ns();
    pthread_barrier_wait(&gate);
    uint64_t t1 = now_ns();
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&gate);
    return (double)(t1 - t0) / ROUNDS;
}

/* ---- 4 processes --------------------------------------------------------- */

struct pshm {
    pthread_barrier_t bar;
    pthread_barrier_t gate;
    _Atomic uint64_t end[NT];
    _Atomic int bad;
};

static double process_round(int kind, struct pshm *sh)
{
    pthread_barrierattr_t at;
    pthread_barrierattr_init(&at);
    pthread_barrierattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->gate, &at, NT + 1);
    if (kind == 0)
        pthread_barrier_init(&sh->bar, &at, NT);
    pthread_barrierattr_destroy(&at);
    pid_t kids[NT];
    for (int i = 0; i < NT; i++) {
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] == 0) {
            vigil_hb *hb = NULL;
            vigil_barrier *b = NULL;
            uint32_t slot = 0;
            if (kind == 1) {
                int rc;
                if ((rc = vigil_hb_open(path("p.hb"), 0, &hb)) < 0 ||
                    (rc = vigil_barrier_open(path("p.b"), hb, 0, &b)) < 0 ||
                    (rc = vigil_hb_register(hb, (uint32_t)getpid(), &slot)) < 0 ||
                    (rc = vigil_barrier_bind(b, slot)) < 0)
                    die("child setup", rc);
            }
            pthread_barrier_wait(&sh->gate);
            uint32_t e0 = kind ? vigil_barrier_epoch(b) : 0;
            for (unsigned r = 0; r < ROUNDS; r++) {
                if (kind == 0)
                    pthread_barrier_wait(&sh->bar);
                else if (vigil_barrier_wait(b, e0 + r) < 0)
                    atomic_fetch_add(&sh->bad, 1);
            }
            atomic_store(&sh->end[i], now_ns());
            if (kind == 1) {
                vigil_hb_unregister(hb, slot);
                vigil_barrier_close(b);
                vigil_hb_close(hb);
            }
            _exit(0);
        }
    }
    /* All four are registered before the gate opens, so no round is
     * released with fewer than four live peers. */
    pthread_barrier_wait(&sh->gate);
    uint64_t t0 = now_ns();
    for (int i = 0; i < NT; i++)
        waitpid(kids[i], NULL, 0);
    uint64_t t1 = 0;
    for (int i = 0; i < NT; i++)
        if (atomic_load(&sh->end[i]) > t1)
            t1 = atomic_load(&sh->end[i]);
    if (kind == 0)
        pthread_barrier_destroy(&sh->bar);
    pthread_barrier_destroy(&sh->gate);
    return (double)(t1 - t0) / ROUNDS;
}

/* ---- single-op loops ----------------------------------------------------- */

static volatile uint32_t sink;

static double per_op(uint64_t t0, uint64_t t1, unsigned n)
{
    return (double)(t1 - t0) / n;
}

/* ---- hardware limits ----------------------------------------------------- */

static _Atomic uint32_t ping_word;

static void *pong_main(void *p)
{
    (void)p;
    for (unsigned i = 0; i < 20000; i++) {
        /* wait for odd, answer even */
        while (!(atomic_load(&ping_word) & 1))
            syscall(SYS_futex, &ping_word, FUTEX_WAIT, atomic_load(&ping_word) & ~1u, NULL, NULL, 0);
        atomic_fetch_add(&ping_word, 1);
        syscall(SYS_futex, &ping_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    return NULL;
}

/* One futex wake round trip: A wakes B, B wakes A, both sleeping between. */
static double futex_round_trip(void)
{
    atomic_store(&ping_word, 0);
    pthread_t t;
    pthread_create(&t, NULL, pong_main, NULL);
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < 20000; i++) {
        atomic_fetch_add(&ping_word, 1); /* odd: ping */
        syscall(SYS_futex, &ping_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        uint32_t v;
        while ((v = atomic_load(&ping_word)) & 1)
            syscall(SYS_futex, &ping_word, FUTEX_WAIT, v, NULL, NULL, 0);
    }
    uint64_t t1 = now_ns();
    pthread_join(t, NULL);
    return per_op(t0, t1, 20000);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ROUNDS = (unsigned)strtoul(argv[1], NULL, 10);
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/vigil-bench.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc;

    /* Tables: t.hb (8 slots, 4 live) for the threads and live_peers(8),
     * p.hb for the processes, w.hb (64 slots, 64 live) for live_peers(64). */
    vigil_hb *hb8, *hbp, *hb64, *hb1;
    vigil_barrier *b8, *bp, *b64, *b1;
    if ((rc = vigil_hb_create(path("t.hb"), 8, &hb8)) < 0 ||
        (rc = vigil_barrier_create(path("t.b"), hb8, 5, &b8)) < 0 ||
        (rc = vigil_hb_create(path("p.hb"), 8, &hbp)) < 0 ||
        (rc = vigil_barrier_create(path("p.b"), hbp, 5, &bp)) < 0 ||
        (rc = vigil_hb_create(path("w.hb"), 64, &hb64)) < 0 ||
        (rc = vigil_barrier_create(path("w.b"), hb64, 5, &b64)) < 0 ||
        (rc = vigil_hb_create(path("q.hb"), 8, &hb1)) < 0 ||
        (rc = vigil_barrier_create(path("q.b"), hb1, 5, &b1)) < 0)
        die("create", rc);
    uint32_t slots[NT], s;
    for (int i = 0; i < NT; i++)
        if ((rc = vigil_hb_register(hb8, 1000 + (uint32_t)i, &slots[i])) < 0)
            die("register", rc);
    for (int i = 0; i < 64; i++)
        if ((rc = vigil_hb_register(hb64, 2000 + (uint32_t)i, &s)) < 0)
            die("register", rc);
    vb_shared = b8;
    for (int i = 0; i < NT; i++) {
        if ((rc = vigil_barrier_open(path("t.b"), hb8, 0, &vb_own[i])) < 0 ||
            (rc = vigil_barrier_bind(vb_own[i], slots[i])) < 0)
            die("open per-thread handle", rc);
    }
    pthread_barrier_init(&pt_bar, NULL, NT);
    struct pshm *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }

    double th_pt[REPS], th_vs[REPS], th_vb[REPS], pr_pt[REPS], pr_v[REPS];
    for (int r = 0; r < REPS; r++) {
        th_pt[r] = thread_round(0);
        th_vs[r] = thread_round(1);
        th_vb[r] = thread_round(2);
        pr_pt[r] = process_round(0, sh);
        pr_v[r] = process_round(1, sh);
    }
    if (atomic_load(&bad) || atomic_load(&sh->bad)) {
        fprintf(stderr, "bench_barrier: %d waits failed\n", atomic_load(&bad) + atomic_load(&sh->bad));
        return 1;
    }

    /* Single-op figures: the median of OPREPS short loops of N ops, so a
     * loop that was preempted on this shared machine does not count. */
    enum { N = 20000, OPREPS = 101 };
    static double q1[OPREPS], q1b[OPREPS], lp8[OPREPS], lp64[OPREPS], hl8[OPREPS], hl64[OPREPS], ep[OPREPS],
        cas[OPREPS], yl[OPREPS];
    _Atomic uint64_t word = 0;
    /* The same barrier through a handle bound to a registered slot: the
     * arrival is the record's 16-byte CAS and the judgement reads it. */
    vigil_barrier *b1b;
    uint32_t s1;
    if ((rc = vigil_hb_register(hb1, 3000, &s1)) < 0 || (rc = vigil_barrier_open(path("q.b"), hb1, 0, &b1b)) < 0 ||
        (rc = vigil_barrier_bind(b1b, s1)) < 0)
        die("bound single participant", rc);
    uint32_t e = vigil_barrier_epoch(b1);
    for (int r = 0; r < OPREPS; r++) {
        uint64_t t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = (uint32_t)vigil_barrier_wait_quorum(b1, e++, 1);
        q1[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = (uint32_t)vigil_barrier_wait_quorum(b1b, e++, 1);
        q1b[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = vigil_barrier_live_peers(b8);
        lp8[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = vigil_barrier_live_peers(b64);
        lp64[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = vigil_hb_live_count(hb8, 5);
        hl8[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = vigil_hb_live_count(hb64, 5);
        hl64[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++)
            sink = vigil_barrier_epoch(b8);
        ep[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < N; i++) {
            uint64_t v = i;
            atomic_compare_exchange_strong(&word, &v, (uint64_t)i + 1);
        }
        cas[r] = per_op(t0, now_ns(), N);
        t0 = now_ns();
        for (unsigned i = 0; i < 200; i++)
            sched_yield();
        yl[r] = per_op(t0, now_ns(), 200);
    }
    double rt[3];
    for (int r = 0; r < 3; r++)
        rt[r] = futex_round_trip();

    double m_th_pt = median(th_pt, REPS), m_th_vs = median(th_vs, REPS), m_th_vb = median(th_vb, REPS);
    double m_pr_pt = median(pr_pt, REPS), m_pr_v = median(pr_v, REPS);
    double m_lp64 = median(lp64, OPREPS);
    printf("bench/barrier: rounds %u x %d runs, ops %d x %d loops (medians); %ld cores; spin %u, yields %u\n\n",
           ROUNDS, REPS, N, OPREPS,
           sysconf(_SC_NPROCESSORS_ONLN), VIGIL_BARRIER_SPIN, VIGIL_BARRIER_YIELDS);
    printf("| operation | vigil | baseline | ratio | target |\n");
    printf("|---|---:|---:|---:|---|\n");
    printf("| 4-thread round, one unbound handle | %.2f us | pthread_barrier_t %.2f us | %.2fx | <= 0.8x: %s |\n",
           m_th_vs / 1e3, m_th_pt / 1e3, m_th_vs / m_th_pt, m_th_vs / m_th_pt <= 0.8 ? "met" : "MISSED");
    printf("| 4-thread round, bound handle per thread | %.2f us | pthread_barrier_t %.2f us | %.2fx | <= 0.8x: %s |\n",
           m_th_vb / 1e3, m_th_pt / 1e3, m_th_vb / m_th_pt, m_th_vb / m_th_pt <= 0.8 ? "met" : "MISSED");
    printf("| 4-process round, bound handle per process | %.2f us | pshared pthread_barrier_t %.2f us | %.2fx | <= 1.0x: %s |\n",
           m_pr_v / 1e3, m_pr_pt / 1e3, m_pr_v / m_pr_pt, m_pr_v / m_pr_pt <= 1.0 ? "met" : "MISSED");
    printf("| wait_quorum(e, 1), single participant | %.1f ns | | | |\n", median(q1, OPREPS));
    printf("| wait_quorum(e, 1), bound single participant | %.1f ns | unbound %.1f ns | %.2fx | |\n",
           median(q1b, OPREPS), median(q1, OPREPS), median(q1b, OPREPS) / median(q1, OPREPS));
    printf("| live_peers, 8 slots (4 live) | %.1f ns | vigil_hb_live_count %.1f ns | %.2fx | |\n",
           median(lp8, OPREPS), median(hl8, OPREPS), median(lp8, OPREPS) / median(hl8, OPREPS));
    printf("| live_peers, 64 slots | %.1f ns | vigil_hb_live_count %.1f ns | %.2fx | < 40 ns: %s |\n",
           m_lp64, median(hl64, OPREPS), m_lp64 / median(hl64, OPREPS), m_lp64 < 40 ? "met" : "MISSED");
    printf("| epoch | %.2f ns | | | |\n", median(ep, OPREPS));
    printf("\nhardware limits, same run:\n");
    printf("  bare CAS, uncontended:            %.1f ns\n", median(cas, OPREPS));
    printf("  sched_yield, nobody else runnable: %.0f ns\n", median(yl, OPREPS));
    printf("  futex wake round trip, 2 threads: %.2f us\n", median(rt, 3) / 1e3);

    for (int i = 0; i < NT; i++)
        vigil_barrier_close(vb_own[i]);
    vigil_barrier_close(b1b);
    vigil_barrier_close(b1);
    vigil_barrier_close(b64);
    vigil_barrier_close(bp);
    vigil_barrier_close(b8);
    vigil_hb_close(hb1);
    vigil_hb_close(hb64);
    vigil_hb_close(hbp);
    vigil_hb_close(hb8);
    const char *names[] = { "t.hb", "t.b", "p.hb", "p.b", "w.hb", "w.b", "q.hb", "q.b" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(path(names[i]));
    rmdir(dir);
    return 0;
}
