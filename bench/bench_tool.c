/* SPDX-License-Identifier: MIT */
/*
 * The tool's start, as a shell script or a cron job pays it: whole
 * processes (fork, exec, wait), each beside the program a user would run
 * instead, in one run, alternating (A B, then B A, ...) so that the
 * machine's drift hits both alike; medians of 41 runs (101 on etcd, whose
 * disk writes spread widely), their ratio, and the load average beside
 * each group:
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

#define RUNS      41
#define RUNS_ETCD 101
#define WARMUP    5
#define MAXCOL 4

/* A column: its name, the word for it in a ratio's line, its command. */
#define COL(name_, tag_, ...) { .name = (name_), .tag = (tag_), .argv = { __VA_ARGS__ } }

struct column {
    const char *name;
    const char *tag; /* in the ratio's line */
    const char *argv[16];
    double      ms[RUNS_ETCD];
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

/* The columns, alternating: each of `runs` rounds runs every column once,
 * in turn forwards and backwards. Medians into each column. */
static void measure(struct column *c, int n, int runs)
{
    for (int w = 0; w < WARMUP; w++)
        for (int i = 0; i < n; i++)
            run_once(&c[i]);
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < n; k++) {
            int i = r % 2 ? n - 1 - k : k;
            c[i].ms[r] = run_once(&c[i]);
        }
    for (int i = 0; i < n; i++) {
        qsort(c[i].ms, (size_t)runs, sizeof(c[i].ms[0]), cmp_double);
        c[i].median = c[i].ms[runs / 2];
    }
}

/* A group: vigil (column 0) beside its baselines; the ratio of column 0 to
 * column `goal_col` (none: -1) judged against `goal`. */
static void group(const char *title, struct column *c, int n, int runs, int goal_col, double goal)
{
    double before = load_average();
    measure(c, n, runs);
    printf("%s, %d runs (load %.2f, then %.2f)\n", title, runs, before, load_average());
    for (int i = 0; i < n; i++)
        printf("  %-56s %8.2f ms\n", c[i].name, c[i].median);
    for (int i = 1; i < n; i++) {
        double ratio = c[0].median / c[i].median;
        if (i == goal_col)
            printf("  vigil / %-48s %8.2fx  goal <= %gx: %s\n", c[i].tag, ratio, goal, bench_verdict(ratio <= goal));
        else
            printf("  vigil / %-48s %8.2fx\n", c[i].tag, ratio);
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
    printf("The tool's start: whole processes, alternating, medians\n");
    struct column floor_[] = { COL("/bin/true (the floor: fork, exec, exit)", "", "/bin/true") };
    measure(floor_, 1, RUNS);
    printf("  %-56s %8.2f ms\n\n", floor_[0].name, floor_[0].median);
    int n = old ? 3 : 2;

    struct column lock[MAXCOL] = {
        COL("vigil lock --store S k -- true", "", VIGIL_TOOL, "lock", "--store", store, "k", "--", "true"),
        COL("flock F true", "flock", "flock", flockf, "true"),
        COL("old vigil lock --store S k -- true", "old vigil", old, "lock", "--store", store, "k", "--", "true"),
    };
    group("vigil lock --store beside flock(1)", lock, n, RUNS, 1, 1.5);

    struct column inspect[MAXCOL] = {
        COL("vigil inspect T (64 slots, 48 live)", "", VIGIL_TOOL, "inspect", hb),
        COL("cat T", "cat", "cat", hb),
        COL("old vigil inspect T", "old vigil", old, "inspect", hb),
    };
    group("vigil inspect beside cat(1)", inspect, n, RUNS, 1, 2.0);

    struct column version[MAXCOL] = {
        COL("vigil --version", "", VIGIL_TOOL, "--version"),
        COL("print_line (a C program that prints a line)", "print_line", PRINT_LINE),
        COL("old vigil --version", "old vigil", old, "--version"),
    };
    group("vigil --version beside a C program that prints a line", version, n, RUNS, 1, 1.2);

#ifdef VIGIL_TOOL_HELPER
    char buf[300];
    const char *url = bench_etcd_endpoints("bench_tool", buf, sizeof(buf));
    if (url) {
        char key[64];
        snprintf(key, sizeof(key), "vigil-bench-tool/%d", (int)getpid());
        struct column etcd[MAXCOL] = {
            COL("vigil lock --etcd E k -- true (vigil, then its helper)", "", VIGIL_TOOL, "lock", "--etcd", url, key,
                "--", "true"),
            COL("vigil-etcd lock --etcd E k -- true (adapter linked in)", "vigil-etcd", VIGIL_TOOL_HELPER, "lock",
                "--etcd", url, key, "--", "true"),
            COL("old vigil lock --etcd E k -- true", "old vigil", old, "lock", "--etcd", url, key, "--", "true"),
        };
        group("vigil lock --etcd beside the program with the adapter linked in", etcd, n, RUNS_ETCD, old ? 2 : -1,
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
