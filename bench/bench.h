/* SPDX-License-Identifier: MIT */
/*
 * Shared by the benchmarks: the clock, the timed loop and the best of N
 * (the machine is noisy: the least disturbed run is the figure), the
 * second thread that keeps glibc's mutexes honest, a temporary directory,
 * and the printing of figures, ratios and the hardware's floor.
 *
 * A timed body is `void body(void *arg, long n)`: n calls of the operation
 * in a loop, each followed by BARRIER() and anything it computes added to
 * bench_sink, so the compiler can neither drop nor merge the work.
 */
#ifndef VIGIL_BENCH_H
#define VIGIL_BENCH_H

#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Keeps the compiler from hoisting, merging or deleting the timed work:
 * every iteration must reload what it uses and store what it makes. */
#define BARRIER() __asm__ __volatile__("" ::: "memory")

/* Where timed loops leave what they compute, so it is not optimised away. */
static volatile uint64_t bench_sink __attribute__((unused));

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the timed loop and the best of N --------------------------------------- */

/* One run of body(arg, iters), in ns per call. */
static inline double bench_loop_ns(void (*body)(void *, long), void *arg, long iters)
{
    uint64_t t0 = bench_now_ns();
    body(arg, iters);
    return (double)(bench_now_ns() - t0) / (double)iters;
}

/* The least of `reps` evaluations of `expr`, a double: the best of N. */
#define BENCH_BEST_OF(reps, expr)                                             \
    ({                                                                        \
        double bench_best_ = 1e300;                                           \
        for (int bench_r_ = 0; bench_r_ < (reps); bench_r_++) {               \
            double bench_v_ = (expr);                                         \
            if (bench_v_ < bench_best_)                                       \
                bench_best_ = bench_v_;                                       \
        }                                                                     \
        bench_best_;                                                          \
    })

/* A warm-up run of iters / 10 + 1 calls (caches, branch predictors), then
 * the best of `reps` runs of `iters` calls, in ns per call. */
static inline double bench_best_ns(void (*body)(void *, long), void *arg, long iters, int reps)
{
    body(arg, iters / 10 + 1);
    return BENCH_BEST_OF(reps, bench_loop_ns(body, arg, iters));
}

/* ---- the second thread -------------------------------------------------------- */

/*
 * glibc skips a mutex's atomic instructions while a process has one
 * thread, which would flatter the mutex baselines: a second thread stays
 * alive, blocked in read(2) on a pipe, for as long as they are timed. It
 * takes no CPU; bench_idle_stop wakes it with one byte and joins it.
 */
struct bench_idle {
    int       fd[2];
    pthread_t thread;
};

static inline void *bench_idle_main(void *arg)
{
    struct bench_idle *b = arg;
    char c;
    while (read(b->fd[0], &c, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* 0, or -1 with a message on stderr naming `who`. */
static inline int bench_idle_start(struct bench_idle *b, const char *who)
{
    if (pipe(b->fd) != 0) {
        fprintf(stderr, "%s: pipe: %s\n", who, strerror(errno));
        return -1;
    }
    if (pthread_create(&b->thread, NULL, bench_idle_main, b) != 0) {
        fprintf(stderr, "%s: cannot start the second thread\n", who);
        close(b->fd[0]);
        close(b->fd[1]);
        return -1;
    }
    return 0;
}

static inline void bench_idle_stop(struct bench_idle *b)
{
    if (write(b->fd[1], "x", 1) == 1)
        pthread_join(b->thread, NULL);
    close(b->fd[0]);
    close(b->fd[1]);
}

/* ---- the temporary directory --------------------------------------------------- */

/* "$TMPDIR/vigil-bench.XXXXXX" (or under /tmp), made on first use and
 * removed with everything in it when the benchmark exits. */
static char bench_dir[256];

static inline int bench_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void bench_cleanup(void)
{
    if (bench_dir[0])
        nftw(bench_dir, bench_rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* A path inside the directory (rotating through 4 buffers); exits 1 if
 * the directory cannot be made. */
static inline const char *bench_path(const char *name)
{
    static char bufs[4][320];
    static unsigned next;
    if (!bench_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(bench_dir, sizeof(bench_dir), "%s/vigil-bench.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(bench_dir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(bench_cleanup);
    }
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", bench_dir, name);
    return b;
}

/* ---- printing ------------------------------------------------------------------- */

/* A figure: "  name                      123.4 ns". */
static inline void bench_row(const char *name, double ns)
{
    printf("  %-44s %10.1f ns\n", name, ns);
}

/* A ratio, base / vigil (above 1: vigil is faster): "  name      1.23x". */
static inline void bench_ratio(const char *name, double base, double vigil)
{
    printf("  %-44s %10.2fx\n", name, base / vigil);
}

/* A target's verdict. */
static inline const char *bench_verdict(bool ok)
{
    return ok ? "met" : "MISSED";
}

/*
 * Where a target ratio is past what this hardware allows in this run,
 * says so with the figures: `bound` is the baseline's cost over the bare
 * instructions vigil cannot do without (the best ratio possible). Prints
 * nothing when the target is within the bound.
 */
static inline void bench_floor_note(const char *op, double target, double bound, const char *bare)
{
    if (bound < target)
        printf("  note: %s's %gx is past this hardware in this run: the table's %s is only %.1fx a bare %s\n",
               op, target, op, bound, bare);
}

/* ---- an etcd of the benchmark's own ------------------------------------------- */

/* `sh script cmd dir [arg]`, with ETCD_TLS set when tls is: its exit status. */
static inline int bench_run_sh(const char *sh, const char *cmd, const char *dir, const char *arg, const char *tls)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (tls)
            setenv("ETCD_TLS", tls, 1);
        execlp("sh", "sh", sh, cmd, dir, arg, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char bench_etcd_script[1024], bench_etcd_state[256], bench_etcd_who[64];

static inline void bench_etcd_stop(void)
{
    if (bench_etcd_state[0]) {
        /* leaves only its log, or the skip marker */
        bench_run_sh(bench_etcd_script, "stop", bench_etcd_state, NULL, NULL);
        static const char *const left[] = { "etcd.log", "skip" };
        char p[400];
        for (unsigned i = 0; i < 2; i++) {
            snprintf(p, sizeof(p), "%s/%s", bench_etcd_state, left[i]);
            unlink(p);
        }
        if (rmdir(bench_etcd_state) != 0)
            fprintf(stderr, "%s: could not remove %s: %s\n", bench_etcd_who, bench_etcd_state, strerror(errno));
    }
}

/* What tests/etcd_server.sh or etcd_cluster.sh left in `state` once
 * started: the endpoints into buf, or NULL when etcd is not installed
 * (said on stdout in `who`'s name) or they cannot be read. */
static inline const char *bench_etcd_started(const char *who, const char *state, char *buf, size_t cap)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/skip", state);
    if (access(p, F_OK) == 0) {
        printf("%s: skipped, etcd is not installed (Debian: etcd-server)\n", who);
        return NULL;
    }
    snprintf(p, sizeof(p), "%s/endpoints", state);
    FILE *f = fopen(p, "r");
    bool ok = f && fgets(buf, (int)cap, f);
    if (f)
        fclose(f);
    if (!ok)
        return NULL;
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf;
}

/* The endpoints: VIGIL_ETCD_ENDPOINTS, or one etcd server of our own
 * (tests/etcd_server.sh, stopped at exit) into buf. NULL: skip, said on
 * stdout or stderr in `who`'s name. */
static inline const char *bench_etcd_endpoints(const char *who, char *buf, size_t cap)
{
    const char *env = getenv("VIGIL_ETCD_ENDPOINTS");
    if (env && *env)
        return env;
    snprintf(bench_etcd_who, sizeof(bench_etcd_who), "%s", who);
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(bench_etcd_script, sizeof(bench_etcd_script), "%.*s%s../tests/etcd_server.sh", dir, src, slash ? "/" : "");
    if (access(bench_etcd_script, R_OK) != 0) {
        fprintf(stderr, "%s: %s not found; set VIGIL_ETCD_ENDPOINTS\n", who, bench_etcd_script);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(bench_etcd_state, sizeof(bench_etcd_state), "%s/vigil-bench-etcd.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(bench_etcd_state)) {
        perror("mkdtemp");
        bench_etcd_state[0] = '\0';
        return NULL;
    }
    atexit(bench_etcd_stop);
    if (bench_run_sh(bench_etcd_script, "start", bench_etcd_state, NULL, NULL) != 0) {
        fprintf(stderr, "%s: etcd did not start\n", who);
        return NULL;
    }
    return bench_etcd_started(who, bench_etcd_state, buf, cap);
}

#endif
