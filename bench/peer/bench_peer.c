/* SPDX-License-Identifier: MIT */
/*
 * vigil against etcd's own Go client, on the same etcd, in one run:
 * clientv3's concurrency package (Session, Mutex, Election) and
 * contrib/recipes (DoubleBarrier, Queue), which is what Go services that
 * lock, elect or queue on etcd use. `make bench-peer` builds both sides and
 * runs this.
 *
 *   bench_peer [--quick] PEER [OP...]
 *
 * PEER is the Go side (clientv3/main.go, built by build.sh), a long-lived
 * child driven over a pipe: no process starts inside a timed sample. The
 * sides take the same commands (peer.h) and run alternately, in batches,
 * the order flipped each batch, so that drift and the machine's load fall
 * on both alike. For each op: medians and p99 of each side, the ratio
 * vigil / clientv3 (below 1.0x vigil is faster), the load average, and
 * where the time goes: etcd's own count of requests per op by gRPC method
 * (grpc_server_msg_received_total from /metrics: the JSON gateway's
 * requests are counted as the gRPC calls it makes), and CPU per op of the
 * side's client and of etcd.
 *
 * The floor first: one bare Put and one bare Range, on the JSON gateway
 * (libcurl, the transport vigil speaks today) and on clientv3's gRPC, so
 * that a ratio can be split into the transport's cost and the number of
 * requests.
 *
 * The waiter's wake-up (op wake): the holder holds, the waiter queues;
 * the holder releases only once etcd shows the waiter's key and its watch,
 * synced (etcd_debugging_mvcc_keys_total, _watcher_total,
 * _slow_watcher_total), so the waiter is asleep, on both sides alike; the
 * sample is from the release called to the waiter's acquire returning (a
 * waiter that returns on its watch event can return before the release's
 * own answer: the release's round trip is in both sides' samples).
 *
 * etcd: VIGIL_ETCD_ENDPOINTS (and VIGIL_ETCD_PID for etcd's CPU), or a
 * throwaway one of its own (tests/etcd_server.sh). --quick: one tiny batch
 * of each op (the CTest smoke test); OP...: only those (put range lock
 * lease wake elect observe round10 round100 unit tput16 tput16-shared).
 * Exit status 0, or 1 if an op failed.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef VIGIL_SOURCE_DIR
#define VIGIL_SOURCE_DIR "."
#endif

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* ---- etcd: ours, or the one named ---------------------------------------------- */

static char script[1024], state[256], eps[1024], metrics_url[1100];
static pid_t etcd_pid;

static int run_script(const char *cmd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        peer_unblock_signals(); /* in the script and its etcd */
        execlp("sh", "sh", script, cmd, state, (char *)NULL);
        _exit(127);
    }
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stop_etcd(void)
{
    if (!state[0])
        return;
    run_script("stop");
    static const char *const left[] = { "etcd.log", "skip", "pid" };
    char p[400];
    for (unsigned i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", state, left[i]);
        unlink(p);
    }
    rmdir(state);
    state[0] = '\0';
}

static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    bool ok = f && fgets(buf, (int)cap, f);
    if (f)
        fclose(f);
    if (ok)
        buf[strcspn(buf, "\r\n")] = '\0';
    return ok;
}

/* 0 and eps set; 77 skip (no etcd); -1 failed. */
static int start_etcd(void)
{
    const char *env = getenv("VIGIL_ETCD_ENDPOINTS");
    if (env && *env) {
        snprintf(eps, sizeof(eps), "%s", env);
        const char *pid = getenv("VIGIL_ETCD_PID"); /* for etcd's CPU per op */
        etcd_pid = pid ? (pid_t)atoi(pid) : 0;
        return 0;
    }
    snprintf(script, sizeof(script), "%s/tests/etcd_server.sh", VIGIL_SOURCE_DIR);
    const char *tmp = getenv("TMPDIR");
    snprintf(state, sizeof(state), "%s/vigil-bench-peer.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(state)) {
        perror("bench_peer: mkdtemp");
        state[0] = '\0';
        return -1;
    }
    atexit(stop_etcd);
    if (run_script("start") != 0) {
        fprintf(stderr, "bench_peer: etcd did not start (%s)\n", script);
        return -1;
    }
    char p[400], pid[32];
    snprintf(p, sizeof(p), "%s/skip", state);
    if (access(p, F_OK) == 0) {
        printf("bench_peer: skipped, etcd is not installed (Debian: etcd-server)\n");
        return 77;
    }
    snprintf(p, sizeof(p), "%s/endpoints", state);
    if (!read_line(p, eps, sizeof(eps)))
        return -1;
    snprintf(p, sizeof(p), "%s/pid", state);
    etcd_pid = read_line(p, pid, sizeof(pid)) ? (pid_t)atoi(pid) : 0;
    return 0;
}

/* Every thread's time on a CPU (schedstat, in ns), or else utime + stime
 * (in clock ticks, 10 ms: too coarse for a batch of a few ms a sample). */
double peer_proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    double ns = 0;
    bool all = d != NULL;
    for (struct dirent *t; d && (t = readdir(d));) {
        if (t->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.20s/schedstat", (int)pid, t->d_name);
        if (read_line(path, buf, sizeof(buf)))
            ns += strtod(buf, NULL);
        else
            all = false; /* gone meanwhile, or no schedstat */
    }
    if (d)
        closedir(d);
    if (all)
        return ns / 1e9;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!read_line(path, buf, sizeof(buf)))
        return -1;
    const char *p = strrchr(buf, ')');
    unsigned long ut, st;
    /* after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int samples_add(struct samples *s, int64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        int64_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
    return 0;
}

int buf_append(struct buf *b, const char *data, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        size_t cap = (b->n + len + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = '\0';
    return 0;
}

/* ---- etcd's /metrics: requests by method, keys, watchers -------------------------- */

static const char *const methods[] = { "Range", "Put", "DeleteRange", "Txn", "LeaseGrant", "LeaseRevoke",
                                        "LeaseKeepAlive", "LeaseTimeToLive", "Watch" };
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

struct counts {
    double msgs[N_METHODS + 1]; /* the last: every other method */
    double streams;             /* gRPC streams opened (a watch, a keepalive stream) */
    double keys, watchers, slow; /* slow: watchers not yet synced to the head revision */
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    return buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

static CURL *curl;
static struct buf page;

static int http_get(const char *url)
{
    page.n = 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &page);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    long code = 0;
    if (curl_easy_perform(curl) != CURLE_OK ||
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200 || !page.p)
        return -1;
    return 0;
}

static int metrics(struct counts *c)
{
    memset(c, 0, sizeof(*c));
    if (http_get(metrics_url) < 0)
        return -1;
    for (char *l = page.p; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *end = strchr(l, '}'), *m;
        if (!strncmp(l, "grpc_server_msg_received_total{", 31) && end &&
            (m = strstr(l, "grpc_method=\"")) && m < end) {
            m += 13;
            size_t i = 0, len = strcspn(m, "\"");
            while (i < N_METHODS && !(strlen(methods[i]) == len && !strncmp(methods[i], m, len)))
                i++;
            c->msgs[i] += strtod(end + 1, NULL);
        } else if (!strncmp(l, "grpc_server_started_total{", 26) && end && strstr(l, "_stream\"") &&
                   strstr(l, "_stream\"") < end) {
            c->streams += strtod(end + 1, NULL);
        } else if (!strncmp(l, "etcd_debugging_mvcc_keys_total ", 31)) {
            c->keys = strtod(l + 31, NULL);
        } else if (!strncmp(l, "etcd_debugging_mvcc_watcher_total ", 34)) {
            c->watchers = strtod(l + 34, NULL);
        } else if (!strncmp(l, "etcd_debugging_mvcc_slow_watcher_total ", 39)) {
            c->slow = strtod(l + 39, NULL);
        }
    }
    return 0;
}

/* ---- the ops, alternating ------------------------------------------------------------ */

enum kind { RUN, WAKE, TPUT };

struct op {
    const struct side *first; /* vigil, or the bare gateway for a floor */
    const char *key;   /* as named on the command line */
    const char *name;  /* as both sides take it */
    int         arg;   /* members, lockers */
    const char *label; /* %d: arg */
    enum kind   kind;
    int         total, batch; /* samples a side, a batch (TPUT: batches a side, ms a batch) */
};

static struct op ops[] = {
    { &peer_gateway, "put", "put", 0, "floor: one Put (gateway / gRPC)", RUN, 300, 30 },
    { &peer_gateway, "range", "range", 0, "floor: one Range (gateway / gRPC)", RUN, 300, 30 },
    { &peer_grpc, "put-grpc", "put", 0, "floor: one Put (libcurl gRPC / gRPC)", RUN, 300, 30 },
    { &peer_grpc, "range-grpc", "range", 0, "floor: one Range (libcurl gRPC / gRPC)", RUN, 300, 30 },
    { &peer_vigil, "lock", "lock", 0, "lock + unlock, kept session", RUN, 500, 50 },
    { &peer_vigil, "lease", "lease", 0, "a lease each time", RUN, 300, 30 },
    { &peer_vigil, "wake", "wake", 0, "wake-up of a queued waiter", WAKE, 100, 10 },
    { &peer_vigil, "elect", "elect", 0, "election: campaign + resign", RUN, 500, 50 },
    { &peer_vigil, "observe", "observe", 0, "election: proclaim to observer told", RUN, 300, 30 },
    { &peer_vigil, "round10", "round", 10, "group round, %d members", RUN, 60, 10 },
    { &peer_vigil, "round100", "round", 100, "group round, %d members", RUN, 12, 2 },
    { &peer_vigil, "unit", "unit", 0, "add + take + done of a unit", RUN, 300, 30 },
    { &peer_vigil, "tput16", "tput", 16, "%d lockers, distinct keys", TPUT, 4, 2000 },
    { &peer_vigil, "tput16-shared", "tput-shared", 16, "%d lockers, one connection", TPUT, 4, 2000 },
};
#define N_OPS (sizeof(ops) / sizeof(ops[0]))

struct tally {
    struct samples s;
    double         msgs[N_METHODS + 1], streams;
    double         cpu, etcd_cpu; /* seconds, over the side's batches */
    int64_t        elapsed;       /* TPUT: ns of the side's batches */
    int            unconfirmed;   /* WAKE: released before etcd showed the waiter asleep */
    bool           counted;       /* /metrics answered around every batch */
};

struct result {
    const struct op *op;
    char             label[64];
    bool             ok;
    struct tally     t[2];
    double           load;
};

static struct result results[N_OPS];

/* WAKE: etcd's watchers at rest, once nothing of the last sample is left. */
static double settle_watchers(void)
{
    struct counts c;
    double last = -1;
    int same = 0;
    for (int i = 0; i < 200 && same < 3; i++) {
        if (metrics(&c) < 0)
            return -1;
        same = c.watchers == last ? same + 1 : 0;
        last = c.watchers;
        nap_ms(10);
    }
    return last;
}

/* WAKE: waits until etcd shows the waiter's key beside the holder's and
 * the waiter's watch, synced: true, or false when it never did (bounded,
 * 3 s). A watch that starts at a revision etcd has already reached (as
 * clientv3's Mutex starts its own) waits, unsynced, for etcd's sync loop
 * (every 100 ms), and an event meanwhile with it: a waiter queued longer
 * than that is the common case, and the one measured. */
static bool waiter_asleep(double keys0, double idle)
{
    struct counts c;
    for (int i = 0; i < 1500; i++) {
        if (metrics(&c) < 0)
            return false;
        if (c.keys >= keys0 + 2 && c.watchers >= idle + 1 && c.slow == 0)
            return true;
        nap_ms(2);
    }
    return false;
}

static int wake_batch(const struct side *side, int n, double idle, struct tally *t)
{
    for (int i = 0; i < n; i++) {
        struct counts c;
        for (int k = 0; k < 200 && metrics(&c) == 0 && c.watchers > idle; k++)
            nap_ms(5); /* the last sample's watch, being cancelled */
        if (metrics(&c) < 0 || side->hold() < 0)
            return -1;
        if (!waiter_asleep(c.keys, idle))
            t->unconfirmed++;
        int64_t ns;
        if (side->release(&ns) < 0 || samples_add(&t->s, ns) < 0)
            return -1;
    }
    return 0;
}

static int batch(const struct side *side, const struct op *op, int n, double idle, struct tally *t)
{
    struct counts m0, m1;
    bool counted = metrics(&m0) == 0;
    double c0 = side->cpu_s(), e0 = peer_proc_cpu_s(etcd_pid);
    int rc;
    int64_t elapsed = 0;
    if (op->kind == RUN)
        rc = side->run(op->name, n, &t->s);
    else if (op->kind == TPUT)
        rc = side->tput(op->name, op->batch, &elapsed, &t->s);
    else
        rc = wake_batch(side, n, idle, t);
    double c1 = side->cpu_s(), e1 = peer_proc_cpu_s(etcd_pid);
    counted = metrics(&m1) == 0 && counted;
    t->elapsed += elapsed;
    t->cpu += c0 >= 0 && c1 >= 0 ? c1 - c0 : NAN;
    t->etcd_cpu += e0 >= 0 && e1 >= 0 ? e1 - e0 : NAN;
    t->counted = t->counted && counted;
    for (size_t i = 0; i <= N_METHODS; i++)
        t->msgs[i] += m1.msgs[i] - m0.msgs[i];
    t->streams += m1.streams - m0.streams;
    return rc;
}

static double load1(void)
{
    char buf[128];
    return read_line("/proc/loadavg", buf, sizeof(buf)) ? strtod(buf, NULL) : NAN;
}

/* Ctrl-C, or a kill: the etcd of our own stopped and its data removed
 * all the same (it runs apart from us, started by a script), and the Go
 * side with it (its parent-death signal). Every other thread has these
 * signals blocked: this one takes them, in a thread's own context. */
static void *on_signal(void *arg)
{
    int sig = 0;
    sigwait(arg, &sig);
    fprintf(stderr, "bench_peer: signal %d: stopping etcd\n", sig);
    stop_etcd();
    _exit(128 + sig);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct stat2 {
    double p50, p99; /* ns */
};

static struct stat2 summarize(struct samples *s)
{
    if (s->n == 0)
        return (struct stat2){ NAN, NAN };
    qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
    return (struct stat2){ (double)s->v[s->n / 2], (double)s->v[s->n * 99 / 100] };
}

static const char *dur(double ns, char *buf, size_t cap)
{
    double a = fabs(ns);
    if (isnan(ns))
        snprintf(buf, cap, "-");
    else if (a < 1e6)
        snprintf(buf, cap, "%.0f us", ns / 1e3);
    else if (a < 1e8)
        snprintf(buf, cap, "%.2f ms", ns / 1e6);
    else if (a < 1e9)
        snprintf(buf, cap, "%.0f ms", ns / 1e6);
    else
        snprintf(buf, cap, "%.2f s", ns / 1e9);
    return buf;
}

/* v with two decimals, or none when it is whole. */
static const char *num(double v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.*f", fabs(v - round(v)) < 0.005 ? 0 : 2, v);
    return buf;
}

/* "Txn 2, Range 1, ..." per op, and the streams opened. */
static const char *per_op(const struct tally *t, double per, char *buf, size_t cap)
{
    size_t at = 0;
    char n[32];
    buf[0] = '\0';
    if (!t->counted) {
        snprintf(buf, cap, "unknown");
        return buf;
    }
    for (size_t i = 0; i <= N_METHODS && at < cap; i++)
        if (t->msgs[i] / per >= 0.005)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s %s", at ? ", " : "",
                                   i < N_METHODS ? methods[i] : "other", num(t->msgs[i] / per, n, sizeof(n)));
    if (at < cap)
        snprintf(buf + at, cap - at, "%s(streams %s)", at ? " " : "", num(t->streams / per, n, sizeof(n)));
    return buf;
}

static void print_result(struct result *r)
{
    const struct op *op = r->op;
    struct stat2 st[2];
    double per[2], rate[2];
    char a[32], b[32], c[32], d[32], q[2][512];
    for (int k = 0; k < 2; k++) {
        st[k] = summarize(&r->t[k].s);
        per[k] = (double)r->t[k].s.n; /* samples; TPUT: lock + unlock pairs */
        rate[k] = r->t[k].elapsed ? (double)r->t[k].s.n / ((double)r->t[k].elapsed / 1e9) : NAN;
    }
    printf("   %-9s median %-10s p99 %-10s", op->first->name, dur(st[0].p50, a, sizeof(a)), dur(st[0].p99, b, sizeof(b)));
    if (op->kind == TPUT)
        printf(" %.0f lock + unlock/s", rate[0]);
    printf("\n   %-9s median %-10s p99 %-10s", "clientv3", dur(st[1].p50, c, sizeof(c)), dur(st[1].p99, d, sizeof(d)));
    if (op->kind == TPUT)
        printf(" %.0f lock + unlock/s", rate[1]);
    printf("\n   ratio     median %.2fx      p99 %.2fx", st[0].p50 / st[1].p50, st[0].p99 / st[1].p99);
    if (op->kind == TPUT)
        printf("      throughput %.2fx (clientv3's / vigil's)", rate[1] / rate[0]);
    printf("      load %.2f\n", r->load);
    if (op->kind == WAKE && (r->t[0].unconfirmed || r->t[1].unconfirmed))
        printf("   released before etcd showed the waiter asleep: vigil %d, clientv3 %d times\n",
               r->t[0].unconfirmed, r->t[1].unconfirmed);
    for (int k = 0; k < 2; k++)
        per_op(&r->t[k], per[k] ? per[k] : 1, q[k], sizeof(q[k]));
    printf("   requests per %s: %s %s; clientv3 %s\n", op->kind == TPUT ? "lock + unlock" : "op", op->first->name,
           q[0], q[1]);
    if (op->kind != WAKE) /* WAKE: the driver's own /metrics polling is in its CPU */
        printf("   CPU per op: %s %.0f us + etcd %.0f us; clientv3 %.0f us + etcd %.0f us\n", op->first->name,
               r->t[0].cpu / per[0] * 1e6, r->t[0].etcd_cpu / per[0] * 1e6, r->t[1].cpu / per[1] * 1e6,
               r->t[1].etcd_cpu / per[1] * 1e6);
    fflush(stdout);
}

static bool run_op(const struct op *op, struct result *r)
{
    const struct side *const sides[2] = { op->first, &peer_go };
    r->op = op;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(r->label, sizeof(r->label), op->label, op->arg);
#pragma GCC diagnostic pop
    for (int k = 0; k < 2; k++)
        r->t[k].counted = true;
    int batches = op->kind == TPUT ? op->total : op->total / op->batch;
    printf("== %s (%d %s a side, alternating, in batches of %d %s)\n", r->label, op->total,
           op->kind == TPUT ? "batches" : "samples", op->batch, op->kind == TPUT ? "ms" : "samples");
    fflush(stdout);
    int prepared = 0;
    bool ok = true;
    for (; prepared < 2 && ok; prepared++)
        ok = sides[prepared]->prep(op->name, op->arg) == 0;
    double idle = op->kind == WAKE && ok ? settle_watchers() : 0;
    for (int i = 0; i < batches && ok; i++)
        for (int j = 0; j < 2 && ok; j++) {
            int k = i % 2 ? 1 - j : j; /* vigil first, then clientv3 first, ... */
            ok = batch(sides[k], op, op->batch, idle, &r->t[k]) == 0;
        }
    for (int k = 0; k < prepared; k++)
        sides[k]->drop(op->name);
    r->load = load1();
    r->ok = ok;
    if (ok)
        print_result(r);
    else
        printf("   FAILED\n");
    return ok;
}

static void print_table(void)
{
    printf("\n| operation | vigil median | vigil p99 | clientv3 median | clientv3 p99 | ratio | ratio p99 | load |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    bool tput = false;
    for (size_t i = 0; i < N_OPS; i++) {
        struct result *r = &results[i];
        if (!r->op || !r->ok)
            continue;
        struct stat2 st[2];
        char a[4][32];
        double rate[2];
        for (int k = 0; k < 2; k++) {
            st[k] = summarize(&r->t[k].s);
            rate[k] = (double)r->t[k].s.n / ((double)r->t[k].elapsed / 1e9);
        }
        if (r->op->kind == TPUT) { /* throughput; the p99 of a lock + unlock */
            tput = true;
            printf("| %s | %.0f/s | %s | %.0f/s | %s | %.2fx | %.2fx | %.1f |\n", r->label, rate[0],
                   dur(st[0].p99, a[1], 32), rate[1], dur(st[1].p99, a[3], 32), rate[1] / rate[0],
                   st[0].p99 / st[1].p99, r->load);
            continue;
        }
        printf("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %.1f |\n", r->label, dur(st[0].p50, a[0], 32),
               dur(st[0].p99, a[1], 32), dur(st[1].p50, a[2], 32), dur(st[1].p99, a[3], 32), st[0].p50 / st[1].p50,
               st[0].p99 / st[1].p99, r->load);
    }
    if (tput)
        printf("\nLockers: lock + unlock per second of all of them (ratio: clientv3's / vigil's), p99 of one.\n");
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc < 2 + quick) {
        fprintf(stderr, "usage: bench_peer [--quick] PEER_PROGRAM [OP...]\n");
        return 2;
    }
    const char *program = argv[1 + quick];
    for (int a = 2 + quick; a < argc; a++) {
        size_t i = 0;
        while (i < N_OPS && strcmp(argv[a], ops[i].key) != 0)
            i++;
        if (i == N_OPS) {
            fprintf(stderr, "bench_peer: no op %s (put range put-grpc range-grpc lock lease wake elect observe round10 "
                            "round100 unit tput16 tput16-shared)\n", argv[a]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    static sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    pthread_t sig_thread;
    if (pthread_sigmask(SIG_BLOCK, &stops, NULL) != 0 || pthread_create(&sig_thread, NULL, on_signal, &stops) != 0)
        return 1;
    int rc = start_etcd();
    if (rc != 0)
        return rc == 77 ? 0 : 1;
    snprintf(metrics_url, sizeof(metrics_url), "%.*s/metrics", (int)strcspn(eps, ","), eps); /* the first */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(curl = curl_easy_init()))
        return 1;
    char tag[48];
    snprintf(tag, sizeof(tag), "%d-%lld", (int)getpid(), (long long)time(NULL));
    char first[1024];
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(eps, ","), eps);
    peer_vigil_init(eps, tag);
    peer_gateway_init(first);
    peer_grpc_init(first);
    atexit(peer_go_stop);
    const char *version;
    if (peer_go_start(program, eps, &version) < 0) {
        fprintf(stderr, "bench_peer: the Go peer %s did not start (make bench-peer builds it)\n", program);
        return 1;
    }
    char etcd_version[256] = "?";
    char vurl[1100];
    snprintf(vurl, sizeof(vurl), "%.*s/version", (int)strcspn(eps, ","), eps);
    if (http_get(vurl) == 0)
        snprintf(etcd_version, sizeof(etcd_version), "%s", page.p);
    char loadavg[128] = "?";
    read_line("/proc/loadavg", loadavg, sizeof(loadavg));
    printf("bench_peer: vigil against %s on etcd %s at %s\n", version, etcd_version, eps);
    printf("%ld cores, load average %s; ratios are vigil / clientv3 (below 1.0x vigil is faster)\n",
           sysconf(_SC_NPROCESSORS_ONLN), loadavg);

    bool all_ok = true;
    for (size_t i = 0; i < N_OPS; i++) {
        struct op *op = &ops[i];
        bool wanted = argc == 2 + quick;
        for (int a = 2 + quick; a < argc; a++)
            wanted = wanted || !strcmp(argv[a], op->key);
        if (!wanted)
            continue;
        if (quick) { /* one tiny batch a side: does every op work? */
            op->total = op->kind == TPUT ? 1 : 2;
            op->batch = op->kind == TPUT ? 200 : 2;
            op->arg = op->arg ? (op->arg > 10 ? 4 : 2) : 0;
        }
        all_ok = run_op(op, &results[i]) && all_ok;
    }
    print_table();
    for (size_t i = 0; i < N_OPS; i++)
        for (int k = 0; k < 2; k++)
            free(results[i].t[k].s.v);
    free(page.p);
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    return all_ok ? 0 : 1;
}
