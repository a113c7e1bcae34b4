/* SPDX-License-Identifier: MIT */
/*
 * Lease store and keepalive benchmark, against the textbook baselines in
 * the same run:
 *
 *   - vigil's embedded store (a file, per-entry CAS protocol);
 *   - a pthread_mutex-protected table in the process, with a second thread
 *     alive so glibc does not skip the mutex's atomics;
 *   - the same table in a shared mapping under a PTHREAD_PROCESS_SHARED,
 *     PTHREAD_MUTEX_ROBUST mutex: the design the store rejected.
 *
 * Each does the same work per operation: find the key, check expiry and
 * token against CLOCK_MONOTONIC, write the new state. The figure is the
 * ratio (the machine is noisy); the best of several runs is kept. The
 * hardware's floor is printed alongside: an uncontended CAS and one
 * clock_gettime(CLOCK_MONOTONIC), which every renewal needs.
 *
 * Then the keepalive's own cost: a keepalive on the store at a 1 s TTL runs
 * for a 5 s window (after its first beats, so start-up is apart); its
 * renewer thread's CPU time (CLOCK_THREAD_CPUTIME_ID through
 * pthread_getcpuclockid) is extrapolated to an hour, next to a bare thread
 * that only wakes on a condvar at the same beat in the same window (the
 * floor: on a VM a timer wake-up alone costs tens of microseconds), and
 * the process's getrusage as a cross-check.
 */
#include "bench.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <vigil/vigil.h>

#include "leases_internal.h"

#define ROUNDS 5
#define CAP    64

/* ---- the baseline: a table under one mutex -------------------------------- */

struct mentry {
    char     key[128];
    char     owner[64];
    uint64_t token, exp_ns, ttl_ms;
    int      used;
};

struct mtable {
    pthread_mutex_t mu;
    int             robust;
    uint64_t        last_token;
    struct mentry   e[CAP];
};

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static void mt_lock(struct mtable *t)
{
    int rc = pthread_mutex_lock(&t->mu);
    if (rc == EOWNERDEAD)
        pthread_mutex_consistent(&t->mu);
}

static int mt_acquire(struct mtable *t, const char *key, const char *owner, uint64_t ttl, vigil_lease *out)
{
    uint64_t now = bench_now_ns();
    mt_lock(t);
    uint32_t home = fnv(key) % CAP;
    int found = -1, vacant = -1;
    for (int j = 0; j < CAP; j++) {
        int i = (int)((home + (uint32_t)j) % CAP);
        if (t->e[i].used && strcmp(t->e[i].key, key) == 0) {
            found = i;
            break;
        }
        if (!t->e[i].used && vacant < 0)
            vacant = i;
        if (!t->e[i].used)
            break;
    }
    int i = found >= 0 ? found : vacant;
    if (i < 0 || (found >= 0 && t->e[i].exp_ns > now)) {
        pthread_mutex_unlock(&t->mu);
        return i < 0 ? VIGIL_EFULL : VIGIL_EBUSY;
    }
    struct mentry *e = &t->e[i];
    e->used = 1;
    snprintf(e->key, sizeof(e->key), "%s", key);
    snprintf(e->owner, sizeof(e->owner), "%s", owner);
    e->token = ++t->last_token;
    e->ttl_ms = ttl;
    e->exp_ns = now + ttl * 1000000u;
    out->token = e->token;
    out->id = i + 1;
    out->ttl_ms = ttl;
    memcpy(out->key, e->key, sizeof(out->key));
    memcpy(out->owner, e->owner, sizeof(out->owner));
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static int mt_change(struct mtable *t, const vigil_lease *l, int release)
{
    uint64_t now = bench_now_ns();
    mt_lock(t);
    struct mentry *e = &t->e[l->id - 1];
    int rc = VIGIL_ELOST;
    if (e->used && e->token == l->token && e->exp_ns > now && strcmp(e->key, l->key) == 0) {
        e->exp_ns = release ? 0 : now + e->ttl_ms * 1000000u;
        rc = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static struct mtable *mt_new(int shared)
{
    struct mtable *t;
    if (shared) {
        t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (t == MAP_FAILED)
            return NULL;
    } else {
        t = calloc(1, sizeof(*t));
        if (!t)
            return NULL;
    }
    memset(t, 0, sizeof(*t));
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (shared) {
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        t->robust = 1;
    }
    pthread_mutex_init(&t->mu, &a);
    pthread_mutexattr_destroy(&a);
    return t;
}

/* ---- timing --------------------------------------------------------------- */

enum backend { B_VIGIL, B_MUTEX, B_ROBUST, B_COUNT };
static const char *backend_names[] = { "vigil store", "mutex table", "robust pshared" };

struct ctx {
    vigil_leases  *ls;
    struct mtable *mt[B_COUNT];
};

/* Acquire then release the same key: a full hand-over each time. */
static double run_acquire_release(struct ctx *c, enum backend b, unsigned n)
{
    vigil_lease l;
    uint64_t t0 = bench_now_ns();
    for (unsigned i = 0; i < n; i++) {
        int rc;
        if (b == B_VIGIL) {
            rc = vigil_leases_acquire(c->ls, "bench/key", "bench", 10000, &l);
            rc |= vigil_leases_release(c->ls, &l);
        } else {
            rc = mt_acquire(c->mt[b], "bench/key", "bench", 10000, &l);
            rc |= mt_change(c->mt[b], &l, 1);
        }
        if (rc != 0) {
            fprintf(stderr, "%s: acquire/release failed: %d\n", backend_names[b], rc);
            exit(1);
        }
    }
    return (double)(bench_now_ns() - t0) / n;
}

static double run_renew(struct ctx *c, enum backend b, unsigned n)
{
    vigil_lease l;
    int rc = b == B_VIGIL ? vigil_leases_acquire(c->ls, "bench/renewed", "bench", 60000, &l)
                          : mt_acquire(c->mt[b], "bench/renewed", "bench", 60000, &l);
    if (rc != 0) {
        fprintf(stderr, "%s: acquire failed: %d\n", backend_names[b], rc);
        exit(1);
    }
    uint64_t t0 = bench_now_ns();
    for (unsigned i = 0; i < n; i++) {
        rc = b == B_VIGIL ? vigil_leases_renew(c->ls, &l) : mt_change(c->mt[b], &l, 0);
        if (rc != 0) {
            fprintf(stderr, "%s: renew failed: %d\n", backend_names[b], rc);
            exit(1);
        }
    }
    double per = (double)(bench_now_ns() - t0) / n;
    if (b == B_VIGIL)
        vigil_leases_release(c->ls, &l);
    else
        mt_change(c->mt[b], &l, 1);
    return per;
}

/* The hardware's floor: an uncontended CAS, in ns. */
static void floor_cas(void *arg, long n)
{
    (void)arg;
    static _Atomic uint64_t word;
    for (long i = 0; i < n; i++) {
        uint64_t v = atomic_load_explicit(&word, memory_order_relaxed);
        atomic_compare_exchange_strong(&word, &v, v + 1);
    }
}

/* And one clock_gettime(CLOCK_MONOTONIC), which every renewal needs. */
static void floor_clock(void *arg, long n)
{
    (void)arg;
    volatile uint64_t sink = 0;
    for (long i = 0; i < n; i++)
        sink += bench_now_ns();
    (void)sink;
}

/* The keepalive's floor: a thread that only sleeps on a CLOCK_MONOTONIC
 * condition variable at the same beat and does nothing when it wakes. */
struct bare {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             stop;
    uint64_t        period_ns;
    _Atomic uint64_t wakes;
    pthread_t       thread;
};

static void *bare_thread(void *arg)
{
    struct bare *b = arg;
    pthread_mutex_lock(&b->mu);
    uint64_t next = bench_now_ns() + b->period_ns / 2; /* between the keepalive's beats */
    while (!b->stop) {
        struct timespec ts = { (time_t)(next / 1000000000u), (long)(next % 1000000000u) };
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        if (bench_now_ns() >= next) {
            atomic_fetch_add(&b->wakes, 1);
            next += b->period_ns;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static uint64_t thread_cpu(pthread_t t)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rusage_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* ---- acquire_wait (issue 18) ---------------------------------------------- */

struct wshared {
    _Atomic int      held;
    _Atomic uint64_t release_ns, got_ns;
};
static struct wshared *ws;
static int stop_point;

static void stop_hook(int point)
{
    if (point == stop_point) {
        stop_point = 0;
        raise(SIGSTOP);
    }
}

static int wait_stopped(pid_t kid)
{
    int st;
    return waitpid(kid, &st, WUNTRACED) == kid && WIFSTOPPED(st);
}

static void reap(pid_t kid)
{
    kill(kid, SIGCONT);
    int st;
    waitpid(kid, &st, 0);
}

static uint64_t thread_cpu_self(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v; prints median, p90 and worst in ms; returns the median. */
static double report_ms(const char *what, uint64_t *v, size_t n, double bound_ms)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    double med = v[n / 2] / 1e6;
    printf("  %-44s median %.3f ms, p90 %.3f ms, worst %.3f ms (n %zu; bound %.0f ms median: %s)\n", what, med,
           v[n * 9 / 10] / 1e6, v[n - 1] / 1e6, n, bound_ms, med <= bound_ms ? "met" : "MISSED");
    return med;
}

static vigil_leases *reopen(const char *path)
{
    vigil_leases *ls;
    if (vigil_leases_open(path, &ls) < 0)
        _exit(90);
    return ls;
}

/* A child stopped holding what `what` names (0 the key, 1 the entry lock
 * inside a change, 2 the bind lock); the waiter waits 1 s for its key. */
static void stopped_figure(const char *path, int what)
{
    static const char *const names[] = { "holder stopped", "locker stopped inside a change",
                                         "binder stopped holding the bind lock" };
    vigil_leases *ls = reopen(path);
    vigil_lease l;
    if (vigil_leases_acquire(ls, "w/k", "first", 60000, &l) != 0 || vigil_leases_release(ls, &l) != 0)
        return;
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vigil_leases *cls = reopen(path);
        stop_point = what == 1 ? LP_ENTRY_LOCKED : what == 2 ? LP_BIND_LOCKED : 0;
        vigil_leases_hook = stop_hook;
        vigil_lease m;
        char key[32];
        snprintf(key, sizeof(key), "w/new-%d", (int)getpid());
        if (vigil_leases_acquire(cls, what == 2 ? key : "w/k", "child", 60000, &m) != 0)
            _exit(91);
        if (what == 0)
            raise(SIGSTOP);
        if (what != 2)
            vigil_leases_release(cls, &m);
        _exit(0);
    }
    if (!wait_stopped(kid)) {
        reap(kid);
        return;
    }
    char want[32];
    snprintf(want, sizeof(want), "w/bind-%d", (int)kid);
    uint64_t t0 = bench_now_ns(), c0 = thread_cpu_self();
    int rc = vigil_leases_acquire_wait(ls, what == 2 ? want : "w/k", "waiter", 60000, 1000000000u, &l);
    uint64_t wall = bench_now_ns() - t0, cpu = thread_cpu_self() - c0;
    reap(kid);
    double pct = 100.0 * (double)cpu / (double)wall;
    printf("  %-44s CPU %.3f ms in %.1f ms wall = %.3f%% (bound 5%%: %s), deadline passed by %.3f ms%s\n", names[what],
           cpu / 1e6, wall / 1e6, pct, pct < 5.0 ? "met" : "MISSED", (double)(wall - 1000000000u) / 1e6,
           rc == VIGIL_ETIMEDOUT ? "" : " (not a timeout!)");
    vigil_leases_close(ls);
}

static _Noreturn void churner(const char *path)
{
    vigil_leases *ls = reopen(path);
    vigil_lease l;
    if (vigil_leases_acquire(ls, "w/churn", "churner", 10000, &l) != 0)
        _exit(91);
    atomic_store(&ws->held, 1);
    uint64_t end = bench_now_ns() + 100000000u;
    for (;;) {
        struct timespec two = { 0, 2000000 };
        nanosleep(&two, NULL);
        bool last = bench_now_ns() >= end;
        atomic_store(&ws->release_ns, bench_now_ns());
        if (vigil_leases_release(ls, &l) != 0)
            _exit(92);
        if (last || vigil_leases_acquire(ls, "w/churn", "churner", 10000, &l) != 0)
            _exit(0);
    }
}

static void churn_figure(const char *path)
{
    enum { N = 30 };
    uint64_t lat[N];
    size_t n = 0;
    vigil_leases *ls = reopen(path);
    for (int r = 0; r < N; r++) {
        atomic_store(&ws->held, 0);
        fflush(NULL);
        pid_t kid = fork();
        if (kid == 0)
            churner(path);
        while (!atomic_load(&ws->held))
            sched_yield();
        vigil_lease l;
        int rc = vigil_leases_acquire_wait(ls, "w/churn", "waiter", 60000, 5000000000u, &l);
        uint64_t got = bench_now_ns();
        int st;
        waitpid(kid, &st, 0);
        if (rc == 0) {
            lat[n++] = got - atomic_load(&ws->release_ns);
            vigil_leases_release(ls, &l);
        }
    }
    if (n)
        report_ms("woken after the freeing release, churn", lat, n, 1);
    vigil_leases_close(ls);
}

/* A key other than `key` with the same home entry in a store of `cap`. */
static void same_home(const char *key, uint32_t cap, char *out, size_t outlen)
{
    uint64_t kw[16];
    vigil_leases__words(kw, 16, key, strlen(key));
    uint32_t home = vigil_leases__hash(kw) % cap;
    for (int i = 0;; i++) {
        snprintf(out, outlen, "w/other-%d", i);
        vigil_leases__words(kw, 16, out, strlen(out));
        if (vigil_leases__hash(kw) % cap == home)
            return;
    }
}

static void rebind_figure(void)
{
    enum { N = 30 };
    uint64_t lat[N];
    size_t n = 0;
    const char *path = bench_path("rebind.leases");
    char other[32];
    same_home("w/k", 2, other, sizeof(other));
    for (int r = 0; r < N; r++) {
        unlink(path);
        vigil_leases *ls;
        if (vigil_leases_create(path, 2, &ls) < 0)
            return;
        vigil_lease held, o;
        if (vigil_leases_acquire(ls, "w/k", "holder", 60000, &held) != 0)
            return;
        fflush(NULL);
        pid_t kid = fork();
        if (kid == 0) {
            vigil_leases *cls = reopen(path);
            stop_point = LP_WAIT_FOUND;
            vigil_leases_hook = stop_hook;
            vigil_lease m;
            int rc = vigil_leases_acquire_wait(cls, "w/k", "waiter", 60000, 5000000000u, &m);
            atomic_store(&ws->got_ns, bench_now_ns());
            _exit(rc == 0 ? 0 : 1);
        }
        if (wait_stopped(kid) && vigil_leases_release(ls, &held) == 0 &&
            vigil_leases_acquire(ls, other, "other", 60000, &o) == 0) {
            uint64_t t0 = bench_now_ns();
            atomic_store(&ws->release_ns, t0);
            kill(kid, SIGCONT);
            int st;
            waitpid(kid, &st, 0);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                lat[n++] = atomic_load(&ws->got_ns) - t0;
        } else {
            reap(kid);
        }
        vigil_leases_close(ls);
    }
    if (n)
        report_ms("got its key, entry rebound under its look-up", lat, n, 1);
}

static void deadline_figure(const char *path)
{
    enum { N = 30 };
    uint64_t over[N];
    vigil_leases *ls = reopen(path);
    vigil_lease held, l;
    if (vigil_leases_acquire(ls, "w/dl", "holder", 60000, &held) != 0)
        return;
    for (int r = 0; r < N; r++) {
        uint64_t t0 = bench_now_ns();
        vigil_leases_acquire_wait(ls, "w/dl", "waiter", 60000, 30000000u, &l);
        uint64_t took = bench_now_ns() - t0;
        over[r] = took > 30000000u ? took - 30000000u : 0;
    }
    report_ms("30 ms wait, past its deadline by", over, N, 2);
    vigil_leases_release(ls, &held);
    vigil_leases_close(ls);
}

static void acquire_wait_figures(const char *path)
{
    ws = mmap(NULL, sizeof(*ws), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ws == MAP_FAILED)
        return;
    printf("acquire_wait (issue 18 bounds; the waiter's own thread CPU clock, CLOCK_THREAD_CPUTIME_ID)\n");
    for (int what = 0; what < 3; what++)
        stopped_figure(path, what);
    churn_figure(path);
    rebind_figure();
    deadline_figure(path);
    munmap(ws, sizeof(*ws));
}

int main(void)
{
    const char *path = bench_path("bench.leases");
    struct ctx c = { 0 };
    int rc = vigil_leases_create(path, CAP, &c.ls);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, vigil_strerror(rc));
        return 1;
    }
    c.mt[B_MUTEX] = mt_new(0);
    c.mt[B_ROBUST] = mt_new(1);
    if (!c.mt[B_MUTEX] || !c.mt[B_ROBUST]) {
        fprintf(stderr, "baseline tables: out of memory\n");
        return 1;
    }
    /* The second thread: alive and idle, so glibc's mutexes do their atomics. */
    struct bench_idle idle;
    if (bench_idle_start(&idle, "bench_leases") != 0)
        return 1;

    const unsigned n = 200000;
    double ar[B_COUNT], rn[B_COUNT];
    for (int b = 0; b < B_COUNT; b++) {
        ar[b] = BENCH_BEST_OF(ROUNDS, run_acquire_release(&c, (enum backend)b, n));
        rn[b] = BENCH_BEST_OF(ROUNDS, run_renew(&c, (enum backend)b, n));
    }
    double cas = BENCH_BEST_OF(ROUNDS, bench_loop_ns(floor_cas, NULL, n * 5));
    double clk = BENCH_BEST_OF(ROUNDS, bench_loop_ns(floor_clock, NULL, n * 5));

    printf("lease store, one process, %u ops x best of %d (second thread alive)\n", n, ROUNDS);
    printf("  %-22s %12s %12s %12s\n", "per operation", backend_names[0], backend_names[1], backend_names[2]);
    printf("  %-22s %9.1f ns %9.1f ns %9.1f ns   vigil/mutex %.2fx, vigil/robust %.2fx\n",
           "acquire + release", ar[0], ar[1], ar[2], ar[0] / ar[1], ar[0] / ar[2]);
    printf("  %-22s %9.1f ns %9.1f ns %9.1f ns   vigil/mutex %.2fx, vigil/robust %.2fx\n",
           "renew", rn[0], rn[1], rn[2], rn[0] / rn[1], rn[0] / rn[2]);
    printf("  hardware floor: uncontended CAS %.1f ns, clock_gettime(CLOCK_MONOTONIC) %.1f ns\n", cas, clk);
    printf("  (renew is one clock read, one CAS and the token/key check: %.1f ns of floor)\n", cas + clk);

    bench_idle_stop(&idle);

    /* Keepalive CPU at a 1 s TTL. */
    vigil_lease l;
    if ((rc = vigil_leases_acquire(c.ls, "bench/kept", "bench", 1000, &l)) < 0) {
        fprintf(stderr, "acquire: %s\n", vigil_strerror(rc));
        return 1;
    }
    vigil_lease_port port = vigil_leases_port(c.ls);
    vigil_keepalive *ka;
    if ((rc = vigil_keepalive_start(&port, &l, &ka)) < 0) {
        fprintf(stderr, "keepalive: %s\n", vigil_strerror(rc));
        return 1;
    }
    static struct bare bare;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&bare.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&bare.mu, NULL);
    bare.period_ns = 320000000u;
    pthread_create(&bare.thread, NULL, bare_thread, &bare);
    /* The window starts after the first beats, so the thread's start-up
     * (stack, first page faults) is counted apart from its steady cost. */
    struct timespec warm = { 0, 700000000 }, five = { 5, 0 };
    while (nanosleep(&warm, &warm) != 0 && errno == EINTR)
        ;
    vigil_keepalive_info i0, i1;
    vigil_keepalive_stats(ka, &i0);
    uint64_t b0 = thread_cpu(bare.thread), w0 = atomic_load(&bare.wakes);
    uint64_t ru0 = rusage_cpu_ns(), t0 = bench_now_ns();
    while (nanosleep(&five, &five) != 0 && errno == EINTR)
        ;
    vigil_keepalive_stats(ka, &i1);
    uint64_t bcpu = thread_cpu(bare.thread) - b0, bw = atomic_load(&bare.wakes) - w0;
    uint64_t wall = bench_now_ns() - t0;
    uint64_t ru = rusage_cpu_ns() - ru0;
    rc = vigil_keepalive_stop(ka);
    pthread_mutex_lock(&bare.mu);
    bare.stop = 1;
    pthread_cond_signal(&bare.cv);
    pthread_mutex_unlock(&bare.mu);
    pthread_join(bare.thread, NULL);
    uint64_t cpu = i1.cpu_ns - i0.cpu_ns, beats = i1.renewals - i0.renewals;
    double scale = 3600e9 / (double)wall;
    printf("keepalive at a 1 s TTL (beat %.0f ms) on the store: %llu renewals in a %.1f s window%s\n",
           i1.period_ns / 1e6, (unsigned long long)beats, wall / 1e9, rc == 0 ? "" : " (LOST)");
    printf("  method: the renewer thread's CPU clock (pthread_getcpuclockid) read before and after\n"
           "  the window, extrapolated to an hour; start-up before the window: %.0f us\n", i0.cpu_ns / 1e3);
    printf("  renewer thread CPU: %.1f us per renewal, %.1f ms per hour (%.4f%% of one core)\n",
           beats ? cpu / 1e3 / (double)beats : 0.0, cpu * scale / 1e6, cpu * 100.0 / (double)wall);
    printf("  floor, a bare thread waking on a CLOCK_MONOTONIC condvar at the same beat in the same\n"
           "  window: %.1f us per wake, %.1f ms per hour; keepalive/floor %.2fx\n",
           bw ? bcpu / 1e3 / (double)bw : 0.0, bcpu * scale / 1e6, bcpu ? (double)cpu / (double)bcpu : 0.0);
    printf("  cross-check, whole process CPU (getrusage: both threads, main asleep): %.1f ms per hour\n",
           ru * scale / 1e6);

    vigil_leases_release(c.ls, &l);
    vigil_leases_close(c.ls);

    acquire_wait_figures(path);
    return 0;
}
