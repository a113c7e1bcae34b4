/* SPDX-License-Identifier: MIT */
/*
 * Groups across hosts on a 3-member etcd cluster on loopback (started with
 * tests/etcd_cluster.sh, or VIGIL_ETCD_ENDPOINTS):
 *
 *   death seen   kill -9 of a member's process on host A (its agent
 *                revokes its lease through a pidfd) to host B's watch
 *                seeing it leave, and to its freed unit taken by host B's
 *                member asleep in take_wait: median and p99 of DEATH_N
 *   host death   host A killed whole, agent first: to B's takeover of the
 *                unit, against the bound TTL + one renewal (0.32 TTL)
 *   scale        groups of 10, 100 and 1000 members (up to 100 per process,
 *                processes in parallel): join time, a barrier round (every
 *                member waiting, from the start to the last release),
 *                propagation of a join to 10 watchers (until all 10 saw
 *                it), and etcd requests per second per member at rest
 *                (etcd's own count of gRPC calls, all members, over a
 *                window), with how each grows from 10 members
 *
 * The peers' defaults for noticing a dead holder are the baselines: a
 * Kubernetes lease (15 s), an etcd concurrency session (60 s TTL), Consul's
 * lock-delay (15 s), a ZooKeeper session (4 s, twice the default tick's
 * minimum); vigil's own without an agent is the TTL.
 */
#include "bench.h"

#include <vigil/group.h>
#include "recipes_internal.h"

#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define DEATH_N  100
#define HOST_N   4
#define HOST_TTL 2000
#define PROP_N   15
#define WATCHERS 10
#define PER_PROC 100
#define REST_S   10
#define SCALE_TTL 30000 /* a machine this loaded can stall a keepalive for seconds */

static char script[1024], state[256];
static const char *eps;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- the cluster ---------------------------------------------------------------- */

static int cluster(const char *cmd, const char *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("sh", "sh", script, cmd, state, arg, (char *)NULL);
        _exit(127);
    }
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cluster_stop(void)
{
    if (state[0] && getpid() == (pid_t)atoi(state + strlen(state) + 1)) {
        cluster("stop", NULL);
        char p[400];
        snprintf(p, sizeof(p), "rm -rf '%s'", state);
        if (system(p) != 0)
            fprintf(stderr, "bench_etcd_group: could not remove %s\n", state);
    }
}

static const char *start_cluster(char *buf, size_t cap)
{
    const char *env = getenv("VIGIL_ETCD_ENDPOINTS");
    if (env && *env)
        return env;
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(script, sizeof(script), "%.*s%s../tests/etcd_cluster.sh", dir, src, slash ? "/" : "");
    const char *tmp = getenv("TMPDIR");
    snprintf(state, sizeof(state), "%s/vigil-bench-etcd-group.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (access(script, R_OK) != 0 || !mkdtemp(state)) {
        fprintf(stderr, "bench_etcd_group: no %s or temporary directory; set VIGIL_ETCD_ENDPOINTS\n", script);
        return NULL;
    }
    /* The owner's pid after the name's NUL: children never stop it. */
    snprintf(state + strlen(state) + 1, sizeof(state) - strlen(state) - 1, "%d", (int)getpid());
    atexit(cluster_stop);
    if (cluster("start", "3") != 0) {
        fprintf(stderr, "bench_etcd_group: the cluster did not start\n");
        return NULL;
    }
    return bench_etcd_started("bench_etcd_group", state, buf, cap);
}

static vigil_etcd *connect_or_die(void)
{
    vigil_etcd *e = NULL;
    int rc = vigil_etcd_connect(eps, &e);
    if (rc < 0) {
        fprintf(stderr, "bench_etcd_group: connect %s: %s\n", eps, vigil_strerror(rc));
        exit(1);
    }
    return e;
}

/* ---- host A: an agent in a child ------------------------------------------------ */

/* A child that runs fn(arg, fd) and writes a byte to fd once it is ready:
 * its pid once it is, or -1. */
static pid_t fork_ready(void (*fn)(void *arg, int fd), void *arg)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fn(arg, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    char c;
    struct pollfd p = { fds[0], POLLIN, 0 };
    bool ready = pid > 0 && poll(&p, 1, 30000) == 1 && read(fds[0], &c, 1) == 1;
    close(fds[0]);
    return ready ? pid : -1;
}

/* Host A's agent. */
static void agent_main(void *arg, int fd)
{
    vigil_etcd *e = connect_or_die();
    vigil_agent *a = NULL;
    if (vigil_agent_open(e, arg, &a) < 0)
        _exit(3);
    (void)!write(fd, "r", 1);
    for (;;)
        if (vigil_agent_run(a, -1, NULL, 0) < 0)
            _exit(4);
}

static pid_t agent_start(const char *dir)
{
    return fork_ready(agent_main, (void *)dir);
}

/* A member on host A: joins, takes the one free unit, says so, and waits
 * to be killed. */
struct victim {
    const char *group, *name, *dir;
    uint64_t    ttl;
};

static void victim_main(void *arg, int fd)
{
    const struct victim *v = arg;
    vigil_etcd *e = connect_or_die();
    struct vigil_group_options o = { .dir = v->dir, .host = "hostA" };
    vigil_group_member *m = NULL;
    vigil_group_unit u;
    if (vigil_group_join_opts(e, v->group, v->name, v->ttl, &o, &m) < 0 || vigil_group_take(m, &u) < 0)
        _exit(3);
    (void)!write(fd, "r", 1);
    for (;;)
        pause();
}

static pid_t victim_start(const char *group, const char *name, const char *dir, uint64_t ttl)
{
    struct victim v = { group, name, dir, ttl };
    return fork_ready(victim_main, &v);
}

/* Host B: a member waiting in take_wait, in a thread. */
struct taker {
    pthread_t           th;
    vigil_group_member *m;
    _Atomic uint64_t    at; /* when take_wait returned with a unit */
    int                 rc;
};

static void *taker_main(void *arg)
{
    struct taker *t = arg;
    vigil_group_unit u;
    t->rc = vigil_group_take_wait(t->m, 30000000000ull, &u);
    atomic_store(&t->at, bench_now_ns());
    if (t->rc == 0)
        vigil_group_done(t->m, &u);
    return NULL;
}

/* The time the watch saw name leave (0: not within timeout_ms). */
static uint64_t leave_seen(vigil_group_watcher *w, const char *name, unsigned timeout_ms)
{
    uint64_t deadline = bench_now_ns() + timeout_ms * 1000000ull;
    for (;;) {
        vigil_group_event ev;
        int rc;
        while ((rc = vigil_group_watch_next(w, &ev)) == 1)
            if (ev.type == VIGIL_GROUP_LEAVE && strcmp(ev.member.name, name) == 0)
                return bench_now_ns();
        uint64_t now = bench_now_ns();
        if (rc < 0 || now >= deadline)
            return 0;
        struct pollfd p = { vigil_group_watch_fd(w), POLLIN, 0 };
        poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
    }
}

/* One death on host A, seen on host B: the kill to the leave seen and to
 * the unit taken (ns, into *seen and *taken). whole: the agent dies too. */
static int one_death(const char *group, int i, const char *dir, bool whole, uint64_t ttl, vigil_group_member *b,
                     vigil_group_watcher *w, uint64_t *seen, uint64_t *taken)
{
    char name[32], unit[32];
    snprintf(name, sizeof(name), "a%d", i);
    snprintf(unit, sizeof(unit), "job%d", i);
    vigil_etcd *e = connect_or_die();
    int added = vigil_group_add(e, group, unit);
    vigil_etcd_close(e);
    if (added < 0)
        return -1;
    pid_t agent = whole ? agent_start(dir) : 0;
    pid_t a = victim_start(group, name, dir, ttl);
    if (a < 0 || agent < 0)
        return -1;
    struct taker t = { .m = b };
    pthread_create(&t.th, NULL, taker_main, &t);
    usleep(200000); /* B asleep on its watch: the path measured is the wake-up */
    uint64_t t0 = bench_now_ns();
    if (whole)
        kill(agent, SIGKILL);
    kill(a, SIGKILL);
    uint64_t s = leave_seen(w, name, whole ? 30000 : 10000);
    pthread_join(t.th, NULL);
    waitpid(a, NULL, 0);
    if (whole)
        waitpid(agent, NULL, 0);
    if (!s || t.rc != 0)
        return -1;
    *seen = s - t0;
    *taken = atomic_load(&t.at) - t0;
    return 0;
}

static void deaths(void)
{
    vigil_etcd *e = connect_or_die(), *we = connect_or_die();
    char group[64], dir[600];
    snprintf(group, sizeof(group), "bench/death/%d", (int)getpid());
    snprintf(dir, sizeof(dir), "%s", bench_path("hostA"));
    struct vigil_group_options o = { .dir = "", .host = "hostB" };
    vigil_group_member *b = NULL;
    vigil_group_watcher *w = NULL;
    if (vigil_group_join_opts(e, group, "b", 30000, &o, &b) < 0 || vigil_group_watch(we, group, &w) < 0) {
        printf("death seen: could not join or watch\n");
        return;
    }
    pid_t agent = agent_start(dir);
    uint64_t seen[DEATH_N], taken[DEATH_N];
    int n = 0;
    for (int i = 0; i < DEATH_N; i++)
        if (one_death(group, i, dir, false, 30000, b, w, &seen[n], &taken[n]) == 0)
            n++;
    kill(agent, SIGKILL);
    waitpid(agent, NULL, 0);
    if (n == 0) {
        printf("death seen: no trial completed\n");
        return;
    }
    qsort(seen, (size_t)n, sizeof(seen[0]), cmp_u64);
    qsort(taken, (size_t)n, sizeof(taken[0]), cmp_u64);
    double s50 = ms(seen[n / 2]), s99 = ms(seen[n * 99 / 100]), t50 = ms(taken[n / 2]), t99 = ms(taken[n * 99 / 100]);
    printf("kill -9 on host A, seen on host B (agent and pidfd; %d trials, TTL 30 s)\n", n);
    printf("  %-36s median %7.2f ms  p99 %7.2f ms  max %7.2f ms  %s\n", "B's watch sees the member leave", s50, s99,
           ms(seen[n - 1]), bench_verdict(s50 < 50 && s99 < 200));
    printf("  %-36s median %7.2f ms  p99 %7.2f ms  max %7.2f ms  %s\n", "B takes the member's freed unit", t50, t99,
           ms(taken[n - 1]), bench_verdict(t50 < 50 && t99 < 200));
    printf("  target: median < 50 ms, p99 < 200 ms. Against the peers' defaults (the unit taken, median):\n");
    static const struct {
        const char *who;
        double      ms;
    } peers[] = { { "vigil without an agent (the TTL, 30 s here)", 30000 },
                  { "etcd concurrency session (60 s TTL)", 60000 },
                  { "Kubernetes leader election (15 s lease)", 15000 },
                  { "Consul lock-delay (15 s)", 15000 },
                  { "ZooKeeper session (4 s minimum timeout)", 4000 } };
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++)
        printf("    %-46s %8.0f ms  %7.0fx slower\n", peers[i].who, peers[i].ms, peers[i].ms / t50);

    /* The whole host: its agent too. */
    uint64_t hs[HOST_N], ht[HOST_N];
    int hn = 0;
    for (int i = 0; i < HOST_N; i++)
        if (one_death(group, DEATH_N + i, dir, true, HOST_TTL, b, w, &hs[hn], &ht[hn]) == 0)
            hn++;
    if (hn) {
        qsort(ht, (size_t)hn, sizeof(ht[0]), cmp_u64);
        double bound = HOST_TTL * 1.32;
        printf("host A killed whole, agent first (%d trials, TTL %d ms: the bound TTL + one renewal is %.0f ms)\n",
               hn, HOST_TTL, bound);
        printf("  %-36s min %7.0f ms  median %7.0f ms  max %7.0f ms  %s\n", "B takes the unit", ms(ht[0]),
               ms(ht[hn / 2]), ms(ht[hn - 1]), bench_verdict(ms(ht[hn - 1]) <= bound + 500));
        printf("  (etcd checks lease expiry every 500 ms: the bound's allowance)\n");
    }
    vigil_group_watch_close(w);
    vigil_group_leave(b);
    vigil_etcd_close(we);
    vigil_etcd_close(e);
}

/* ---- scale ------------------------------------------------------------------------- */

struct scale_shm {
    _Atomic uint32_t joined, returned, failed;
    _Atomic int      why; /* the first failure */
    _Atomic int      go;      /* round r starts when go == r + 1; -1: leave */
    _Atomic uint64_t last;    /* the latest return of a round (ns) */
    _Atomic uint64_t join_ns; /* the longest process's join time */
};
static struct scale_shm *S;

struct waiter {
    vigil_group_member *m;
    int                 round;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    int rc = vigil_group_barrier_wait(w->m, (uint64_t)w->round, 120000000000ull);
    uint64_t now = bench_now_ns(), prev = atomic_load(&S->last);
    while (prev < now && !atomic_compare_exchange_weak(&S->last, &prev, now))
        ;
    if (rc < 0 && atomic_fetch_add(&S->failed, 1) == 0)
        atomic_store(&S->why, rc);
    atomic_fetch_add(&S->returned, 1);
    return NULL;
}

static _Noreturn void scale_proc(const char *group, int p, int k)
{
    /* A connection per member, as a member per process would have. */
    vigil_etcd **e = calloc((size_t)k, sizeof(*e));
    vigil_group_member **m = calloc((size_t)k, sizeof(*m));
    struct vigil_group_options o = { .dir = "", .host = "bench" };
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < k; i++) {
        char name[32];
        snprintf(name, sizeof(name), "p%d-m%d", p, i);
        e[i] = connect_or_die();
        vigil_etcd_set_timeout(e[i], 2000, 10000); /* patience: a loaded etcd answers late, not never */
        int rc = -EAGAIN;
        for (int tries = 0; tries < 5 && rc < 0 && rc != VIGIL_EBUSY; tries++)
            rc = vigil_group_join_opts(e[i], group, name, SCALE_TTL, &o, &m[i]);
        if (rc < 0) {
            fprintf(stderr, "bench_etcd_group: join %s: %s\n", name, vigil_strerror(rc));
            _exit(3);
        }
        atomic_fetch_add(&S->joined, 1);
    }
    uint64_t took = bench_now_ns() - t0, prev = atomic_load(&S->join_ns);
    while (prev < took && !atomic_compare_exchange_weak(&S->join_ns, &prev, took))
        ;
    pthread_t *th = calloc((size_t)k, sizeof(*th));
    struct waiter *w = calloc((size_t)k, sizeof(*w));
    for (int r = 0;; r++) {
        int go;
        while ((go = atomic_load(&S->go)) != r + 1 && go >= 0)
            usleep(1000);
        if (go < 0)
            break;
        for (int i = 0; i < k; i++) {
            w[i] = (struct waiter){ m[i], r };
            pthread_create(&th[i], NULL, waiter_main, &w[i]);
        }
        for (int i = 0; i < k; i++)
            pthread_join(th[i], NULL);
    }
    for (int i = 0; i < k; i++) {
        vigil_group_leave(m[i]);
        vigil_etcd_close(e[i]);
    }
    _exit(0);
}

/* etcd's gRPC calls started, summed over the cluster's members (from each
 * one's /metrics); -1 unknown. */
static long long grpc_calls(void)
{
    long long total = 0;
    char list[1000];
    snprintf(list, sizeof(list), "%s", eps);
    for (char *save = NULL, *ep = strtok_r(list, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
        vigil_etcd *e = NULL;
        long http;
        const char *reply;
        size_t len;
        if (vigil_etcd_connect(ep, &e) < 0 || vigil_etcd__request(e, "metrics", NULL, &http, &reply, &len) < 0) {
            vigil_etcd_close(e);
            return -1;
        }
        for (const char *l = reply; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            if (strncmp(l, "grpc_server_started_total{", 26) == 0) {
                const char *sp = strchr(l, '}');
                if (sp)
                    total += (long long)strtod(sp + 1, NULL);
            }
        vigil_etcd_close(e);
    }
    return total;
}

struct scale_row {
    int    n;
    double join_ms, join_per_ms, round_ms, prop_ms, req_s;
};

/* A join seen by every watcher: the time until the last saw it (ns). */
static uint64_t propagate(vigil_etcd *e, const char *group, vigil_group_watcher **w, int i)
{
    char name[32];
    snprintf(name, sizeof(name), "prop-%d", i);
    for (int k = 0; k < WATCHERS; k++) { /* drain what came before */
        vigil_group_event ev;
        while (vigil_group_watch_next(w[k], &ev) == 1)
            ;
    }
    struct vigil_group_options o = { .dir = "", .host = "bench" };
    vigil_group_member *m = NULL;
    uint64_t t0 = bench_now_ns(), last = 0;
    if (vigil_group_join_opts(e, group, name, SCALE_TTL, &o, &m) < 0)
        return 0;
    bool seen[WATCHERS] = { false };
    int left = WATCHERS;
    uint64_t deadline = t0 + 10000000000ull;
    while (left > 0 && bench_now_ns() < deadline) {
        struct pollfd p[WATCHERS];
        for (int k = 0; k < WATCHERS; k++)
            p[k] = (struct pollfd){ seen[k] ? -1 : vigil_group_watch_fd(w[k]), POLLIN, 0 };
        poll(p, WATCHERS, 100);
        for (int k = 0; k < WATCHERS; k++) {
            vigil_group_event ev;
            while (!seen[k] && vigil_group_watch_next(w[k], &ev) == 1)
                if (ev.type == VIGIL_GROUP_JOIN && strcmp(ev.member.name, name) == 0) {
                    seen[k] = true;
                    left--;
                    last = bench_now_ns();
                }
        }
    }
    vigil_group_leave(m);
    return left == 0 ? last - t0 : 0;
}

static int scale(int n, struct scale_row *row)
{
    char group[64];
    snprintf(group, sizeof(group), "bench/scale/%d/%d", (int)getpid(), n);
    memset(S, 0, sizeof(*S));
    int procs = (n + PER_PROC - 1) / PER_PROC;
    pid_t *pid = calloc((size_t)procs, sizeof(*pid));
    uint64_t t0 = bench_now_ns();
    for (int p = 0; p < procs; p++) {
        fflush(NULL);
        if ((pid[p] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            scale_proc(group, p, n / procs + (p < n % procs));
        }
    }
    while (atomic_load(&S->joined) < (uint32_t)n && bench_now_ns() - t0 < 300000000000ull) {
        usleep(1000);
        for (int p = 0; p < procs; p++)
            if (pid[p] > 0 && waitpid(pid[p], NULL, WNOHANG) == pid[p]) {
                pid[p] = 0; /* a process that could not join: give up this size */
                atomic_store(&S->go, -1);
                for (int q = 0; q < procs; q++)
                    if (pid[q] > 0)
                        waitpid(pid[q], NULL, 0);
                free(pid);
                return -1;
            }
    }
    row->n = n;
    row->join_ms = ms(bench_now_ns() - t0);
    row->join_per_ms = ms(atomic_load(&S->join_ns)) / ((double)n / procs);
    /* Rounds: the median of three, each from the start to the last release. */
    double rounds[3];
    for (int r = 0; r < 3; r++) {
        atomic_store(&S->last, 0);
        uint32_t want = (uint32_t)n * (uint32_t)(r + 1);
        uint64_t start = bench_now_ns();
        atomic_store(&S->go, r + 1);
        while (atomic_load(&S->returned) < want && bench_now_ns() - start < 300000000000ull)
            usleep(1000);
        rounds[r] = ms(atomic_load(&S->last) - start);
    }
    qsort(rounds, 3, sizeof(double), cmp_double);
    row->round_ms = rounds[1];
    /* At rest: nothing but the members' keepalives. */
    usleep(1000000);
    long long c0 = grpc_calls();
    uint64_t w0 = bench_now_ns();
    usleep(REST_S * 1000000u);
    long long c1 = grpc_calls();
    double secs = (double)(bench_now_ns() - w0) / 1e9;
    row->req_s = c0 >= 0 && c1 >= c0 ? (double)(c1 - c0 - 3) / secs / n : -1; /* less our own /metrics reads */
    /* Propagation of a join to 10 watchers. */
    vigil_etcd *we[WATCHERS], *e = connect_or_die();
    vigil_group_watcher *w[WATCHERS];
    for (int k = 0; k < WATCHERS; k++) {
        we[k] = connect_or_die();
        if (vigil_group_watch(we[k], group, &w[k]) < 0)
            return -1;
    }
    uint64_t prop[PROP_N];
    int pn = 0;
    for (int i = 0; i < PROP_N; i++)
        if ((prop[pn] = propagate(e, group, w, i)) > 0)
            pn++;
    qsort(prop, (size_t)pn, sizeof(prop[0]), cmp_u64);
    row->prop_ms = pn ? ms(prop[pn / 2]) : -1;
    for (int k = 0; k < WATCHERS; k++) {
        vigil_group_watch_close(w[k]);
        vigil_etcd_close(we[k]);
    }
    vigil_etcd_close(e);
    atomic_store(&S->go, -1);
    for (int p = 0; p < procs; p++)
        waitpid(pid[p], NULL, 0);
    free(pid);
    if (atomic_load(&S->failed))
        printf("  (%u waits failed at %d members, the first with %s)\n", atomic_load(&S->failed), n,
               vigil_strerror(atomic_load(&S->why)));
    return 0;
}

/* etcd's own cost on this machine now, for the ratios: the median of a
 * put (a raft write) and of a range (a linearizable read), through one
 * connection. */
static void etcd_floor(double *put_ms, double *get_ms)
{
    vigil_etcd *e = connect_or_die();
    uint64_t put[30], get[30];
    char body[256], key[64], b64[128];
    long http;
    const char *reply;
    size_t len;
    int n = snprintf(key, sizeof(key), "bench/floor/%d", (int)getpid());
    vigil_etcd__b64(key, (size_t)n, b64, sizeof(b64));
    for (int i = 0; i < 30; i++) {
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"eA==\"}", b64);
        uint64_t t0 = bench_now_ns();
        vigil_etcd__request(e, "v3/kv/put", body, &http, &reply, &len);
        put[i] = bench_now_ns() - t0;
        snprintf(body, sizeof(body), "{\"key\":\"%s\"}", b64);
        t0 = bench_now_ns();
        vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len);
        get[i] = bench_now_ns() - t0;
    }
    qsort(put, 30, sizeof(put[0]), cmp_u64);
    qsort(get, 30, sizeof(get[0]), cmp_u64);
    *put_ms = ms(put[15]);
    *get_ms = ms(get[15]);
    vigil_etcd_close(e);
}

static void scales(void)
{
    S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    static const int sizes[] = { 10, 100, 1000 };
    struct scale_row rows[3];
    double put_ms, get_ms;
    etcd_floor(&put_ms, &get_ms);
    printf("scale (a connection per member, up to %d members a process, TTL %d s; requests: etcd's gRPC calls "
           "at rest over %d s)\n", PER_PROC, SCALE_TTL / 1000, REST_S);
    printf("  etcd itself here now: a put %.1f ms, a range %.1f ms (medians; the floor every figure stands on)\n",
           put_ms, get_ms);
    printf("  %8s %12s %14s %12s %16s %16s\n", "members", "join all", "join, each", "round", "join to 10 watchers",
           "requests/s/member");
    for (int i = 0; i < 3; i++) {
        if (scale(sizes[i], &rows[i]) < 0) {
            printf("  %8d: failed\n", sizes[i]);
            return;
        }
        printf("  %8d %9.0f ms %11.2f ms %9.1f ms %16.1f ms %16.3f   (a round is %.1f puts)\n", rows[i].n,
               rows[i].join_ms, rows[i].join_per_ms, rows[i].round_ms, rows[i].prop_ms, rows[i].req_s,
               rows[i].round_ms / put_ms);
        fflush(stdout);
    }
    printf("  growth from 10 members (x100 members: %.1fx join, %.1fx round, %.1fx propagation, %.2fx requests "
           "per member)\n",
           rows[2].join_ms / rows[0].join_ms, rows[2].round_ms / rows[0].round_ms, rows[2].prop_ms / rows[0].prop_ms,
           rows[2].req_s / rows[0].req_s);
    printf("  at rest a member makes one request (its lease's keepalive) per 0.32 TTL: %.3f per second at\n"
           "  TTL %d s, whatever the group's size (the cluster's load grows with the members, linearly)\n",
           1.0 / (0.32 * SCALE_TTL / 1000.0), SCALE_TTL / 1000);
}

int main(void)
{
    char buf[1000];
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* a watch stream per waiting member */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (!(eps = start_cluster(buf, sizeof(buf))))
        return 0;
    printf("bench_etcd_group: etcd %s\n", eps);
    const char *only = getenv("BENCH_GROUP"); /* "deaths" or "scale": one part alone */
    if (!only || strcmp(only, "scale") != 0)
        deaths();
    if (!only || strcmp(only, "deaths") != 0)
        scales();
    return 0;
}
