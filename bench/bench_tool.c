/* SPDX-License-Identifier: MIT */
/*
 * The tool's start, as a shell script or a cron job pays it: whole
 * processes (fork, exec, wait), each beside the program a user would run
 * instead, in one run, alternating (A B, then B A, ...) so that the
 * machine's drift hits both alike; medians of RUNS runs, their ratio, and
 * the load average beside each group:
 *
 *   vigil lock --store S KEY -- true   flock F true              goal <= 1.5x
 *   vigil inspect T (64 slots)         cat T                     goal <= 2x
 *   vigil --version                    print_line (C, puts)      goal <= 1.2x
 *   vigil lock --etcd E KEY -- true    vigil-etcd lock ... (the same program
 *                                      with the adapter linked in, as `vigil`
 *                                      was), and the vigil named by
 *                                      VIGIL_BENCH_OLD_VIGIL     goal <= 1x of that one
 *
 * VIGIL_BENCH_OLD_VIGIL (a vigil built from an earlier tree) also runs in
 * the first three groups, for a before and after in one run. The floor:
 * /bin/true, the smallest dynamically linked program's fork, exec and
 * exit; no command of any column can start faster. etcd: tests/etcd_server.sh
 * (as bench_etcd), or VIGIL_ETCD_ENDPOINTS; without it that group is skipped.
 */
#include "bench.h"

#include <fcntl.h>
#include <sys/wait.h>

#include <vigil/vigil.h>

#define RUNS   41
#define WARMUP 5
#define MAXCOL 4

struct column {
    const char *name;
    const char *argv[16];
    double      ms[RUNS];
    double      median;
};

static int devnull = -1;
static bool failed;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One whole run of argv, its stdout and stderr to /dev/null: ms from the
 * fork to the reaping. A failure is said once and marks the run. */
static double run_once(const struct column *c)
{
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
        execvp(c->argv[0], (char *const *)c->argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!failed)
            fprintf(stderr, "bench_tool: %s failed (status %d)\n", c->name, st);
        failed = true;
    }
    return (double)(bench_now_ns() - t0) / 1e6;
}

static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* The columns, alternating: each round runs every column once, in turn
 * forwards and backwards. Medians into each column. */
static void measure(struct column *c, int n)
{
    for (int w = 0; w < WARMUP; w++)
        for (int i = 0; i < n; i++)
            run_once(&c[i]);
    for (int r = 0; r < RUNS; r++)
        for (int k = 0; k < n; k++) {
            int i = r % 2 ? n - 1 - k : k;
            c[i].ms[r] = run_once(&c[i]);
        }
    for (int i = 0; i < n; i++) {
        double s[RUNS];
        memcpy(s, c[i].ms, sizeof(s));
        qsort(s, RUNS, sizeof(s[0]), cmp_double);
        c[i].median = s[RUNS / 2];
    }
}

/* A group: vigil (column 0) beside its baselines; the ratio of column 0 to
 * column `goal_col` (none: -1) judged against `goal`. */
static void group(const char *title, struct column *c, int n, int goal_col, double goal)
{
    double before = load_average();
    measure(c, n);
    printf("%s (load %.2f, then %.2f)\n", title, before, load_average());
    for (int i = 0; i < n; i++)
        printf("  %-56s %8.2f ms\n", c[i].name, c[i].median);
    for (int i = 1; i < n; i++) {
        double ratio = c[0].median / c[i].median;
        if (i == goal_col)
            printf("  %-56s %8.2fx  goal <= %gx: %s\n", "vigil / that", ratio, goal, bench_verdict(ratio <= goal));
        else
            printf("  vigil / %-48.48s %8.2fx\n", c[i].name, ratio);
    }
    printf("\n");
}

int main(void)
{
#ifndef VIGIL_TOOL
    printf("bench_tool: skipped, the tool was not built\n");
    return 0;
#else
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        perror("/dev/null");
        return 1;
    }
    const char *old = getenv("VIGIL_BENCH_OLD_VIGIL");
    if (old && !*old)
        old = NULL;
    const char *hb = bench_path("t.hb"), *store = bench_path("s.leases"), *flockf = bench_path("f.lock");
    vigil_hb *h;
    int rc = vigil_hb_create(hb, 64, &h);
    for (int i = 0; rc == 0 && i < 48; i++) { /* 48 of 64 slots held, live */
        uint32_t slot;
        rc = vigil_hb_register(h, (uint32_t)getpid(), &slot);
    }
    if (rc < 0) {
        fprintf(stderr, "bench_tool: %s: %s\n", hb, vigil_strerror(rc));
        return 1;
    }
    printf("The tool's start: whole processes, alternating, medians of %d runs each\n", RUNS);
    struct column floor_[] = { { .name = "/bin/true (the floor: fork, exec, exit)", .argv = { "/bin/true" } } };
    measure(floor_, 1);
    printf("  %-56s %8.2f ms\n\n", floor_[0].name, floor_[0].median);

    struct column lock[MAXCOL] = {
        { .name = "vigil lock --store S k -- true", .argv = { VIGIL_TOOL, "lock", "--store", store, "k", "--", "true" } },
        { .name = "flock F true", .argv = { "flock", flockf, "true" } },
        { .name = "old vigil lock --store S k -- true", .argv = { old, "lock", "--store", store, "k", "--", "true" } },
    };
    group("vigil lock --store beside flock(1)", lock, old ? 3 : 2, 1, 1.5);

    struct column inspect[MAXCOL] = {
        { .name = "vigil inspect T (64 slots, 48 live)", .argv = { VIGIL_TOOL, "inspect", hb } },
        { .name = "cat T", .argv = { "cat", hb } },
        { .name = "old vigil inspect T", .argv = { old, "inspect", hb } },
    };
    group("vigil inspect beside cat(1)", inspect, old ? 3 : 2, 1, 2.0);

    struct column version[MAXCOL] = {
        { .name = "vigil --version", .argv = { VIGIL_TOOL, "--version" } },
        { .name = "print_line (a C program that prints a line)", .argv = { PRINT_LINE } },
        { .name = "old vigil --version", .argv = { old, "--version" } },
    };
    group("vigil --version beside a C program that prints a line", version, old ? 3 : 2, 1, 1.2);

#ifdef VIGIL_TOOL_HELPER
    char buf[300];
    const char *url = bench_etcd_endpoints("bench_tool", buf, sizeof(buf));
    if (url) {
        char key[64];
        snprintf(key, sizeof(key), "vigil-bench-tool/%d", (int)getpid());
        struct column etcd[MAXCOL] = {
            { .name = "vigil lock --etcd E k -- true (vigil, then its helper)", .argv = { VIGIL_TOOL, "lock", "--etcd", url, key, "--", "true" } },
            { .name = "vigil-etcd lock --etcd E k -- true (adapter linked in)", .argv = { VIGIL_TOOL_HELPER, "lock", "--etcd", url, key, "--", "true" } },
            { .name = "old vigil lock --etcd E k -- true", .argv = { old, "lock", "--etcd", url, key, "--", "true" } },
        };
        group("vigil lock --etcd beside the program with the adapter linked in", etcd, old ? 3 : 2, old ? 2 : -1,
              1.0);
        if (!old)
            printf("  (the goal, no slower than before, is judged against VIGIL_BENCH_OLD_VIGIL)\n\n");
    }
#endif
    if (!old)
        printf("(VIGIL_BENCH_OLD_VIGIL=PATH times a vigil built from an earlier tree beside these)\n");
    vigil_hb_close(h);
    return failed ? 1 : 0;
#endif
}
