/* SPDX-License-Identifier: MIT */
/*
 * Description: how vigil_leases_acquire_wait sleeps (src/leases_wait.c,
 * THE SLEEP; src/leases_lock.c, THE LOCK WAIT; model/leases.pml), as issue
 * 18 asked: it never spins while the key's holder, a locker inside a
 * change of hands or the store's binder is stopped (its CPU stays a small
 * part of the wait); it is woken by the release that frees its key while
 * the holder releases and takes the key straight back, again and again;
 * a waiter stopped just after its look-up, while its key is released and
 * the entry bound to another key, still gets its key at once; it returns
 * on its deadline. Every moment is the test's own (hooks, SIGSTOP); the
 * latencies are bounded at ten times the figures bench_leases prints, so
 * that a lost wake-up fails in seconds, not at CTest's timeout.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "leases_internal.h"
#include "spin_internal.h"

#define MS 1000000ull

struct shared {
    _Atomic int      held;
    _Atomic int      stop;        /* the churner stops */
    _Atomic uint64_t release_ns;  /* when the churner last began a release */
};
static struct shared *sh;

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Waits at most ms for a child to stop (SIGSTOP, raised at a hook). */
static bool wait_stopped(pid_t kid, unsigned ms)
{
    uint64_t deadline = vt_now_ms() + ms;
    int st;
    while (vt_now_ms() < deadline) {
        pid_t r = waitpid(kid, &st, WUNTRACED | WNOHANG);
        if (r == kid && WIFSTOPPED(st))
            return true;
        if (r != 0)
            return false;
        vt_sleep_ms(1);
    }
    return false;
}

static int stop_point;

static void stop_hook(int point)
{
    if (point == stop_point) {
        stop_point = 0; /* once */
        raise(SIGSTOP);
    }
}

static vigil_leases *open_store(const char *name)
{
    vigil_leases *ls;
    if (vigil_leases_open(vt_path(name), &ls) < 0)
        _exit(90);
    return ls;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return v[n / 2];
}

/* ---- a stopped holder, locker or binder: asleep, not spinning ------------ */

enum stopped { HOLDER, ENTRY_LOCKER, BINDER };

/* The child stops holding what `what` names; the parent waits 400 ms for
 * key `want` and must spend well under that on the CPU. */
static int stopped_case(enum stopped what)
{
    static const char *const names[] = { "a stopped holder", "a locker stopped inside a change",
                                         "a binder stopped holding the bind lock" };
    vigil_leases *ls = vt_leases_fresh("stopped.leases", 4);
    vigil_lease l;
    /* Bound and released: the child's acquire takes the entry lock only. */
    EXPECT_RC(vigil_leases_acquire(ls, "k", "first", 60000, &l), 0);
    EXPECT_RC(vigil_leases_release(ls, &l), 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vigil_leases *cls = open_store("stopped.leases");
        stop_point = what == ENTRY_LOCKER ? LP_ENTRY_LOCKED : what == BINDER ? LP_BIND_LOCKED : 0;
        vigil_leases_hook = stop_hook;
        vigil_lease m;
        if (vigil_leases_acquire(cls, what == BINDER ? "new-1" : "k", "child", 60000, &m) != 0)
            _exit(91);
        if (what == HOLDER)
            raise(SIGSTOP);
        _exit(0);
    }
    EXPECT(wait_stopped(kid, 20000), "%s: the child never stopped", names[what]);
    const char *want = what == BINDER ? "new-2" : "k";
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    uint64_t t0 = vigil_now_ns(), c0 = cpu_ns();
    int rc = vigil_leases_acquire_wait(ls, want, "waiter", 60000, 400 * MS, &l);
    uint64_t wall = vigil_now_ns() - t0, cpu = cpu_ns() - c0;
    getrusage(RUSAGE_THREAD, &r1);
    long switches = (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw);
    kill(kid, SIGCONT);
    int st = vt_wait(kid, 20000);
    printf("acquire_wait against %s: %.1f ms CPU in %.1f ms (%.2f%%), %ld context switches, deadline passed by "
           "%.2f ms\n", names[what], cpu / 1e6, wall / 1e6, 100.0 * (double)cpu / (double)wall, switches,
           (double)(wall - 400 * MS) / 1e6);
    EXPECT_RC(rc, VIGIL_ETIMEDOUT);
    EXPECT(st == 0, "%s: the child ended with %d once continued", names[what], st);
    /* Ten times the 5 % issue 18 asks for; a spinning waiter takes 100 %
     * of an idle core. On a loaded one it gets less, but it still switches
     * hundreds of times where a sleeper switches once per judgement of the
     * holder (about a dozen in 400 ms). */
    EXPECT(cpu * 2 < wall, "%s: %.1f ms of CPU in a %.1f ms wait: it spun", names[what], cpu / 1e6, wall / 1e6);
    EXPECT(switches < 100, "%s: %ld context switches in a %.1f ms wait: it spun", names[what], switches, wall / 1e6);
    vigil_leases_close(ls);
    unlink(vt_path("stopped.leases"));
    return 0;
}

static int test_stopped_holder_no_spin(void)
{
    return stopped_case(HOLDER);
}

static int test_stopped_locker_no_spin(void)
{
    return stopped_case(ENTRY_LOCKER);
}

static int test_stopped_binder_no_spin(void)
{
    return stopped_case(BINDER);
}

/* ---- churn: released and taken back, again and again --------------------- */

/* Holds k for 2 ms, releases it and takes it straight back, for 300 ms,
 * then releases it for good; stops early if the waiter got it between a
 * release and the take-back. */
static _Noreturn void churner(const char *name)
{
    vigil_leases *ls = open_store(name);
    vigil_lease l;
    if (vigil_leases_acquire(ls, "k", "churner", 10000, &l) != 0)
        _exit(91);
    atomic_store(&sh->held, 1);
    uint64_t end = vigil_now_ns() + 300 * MS;
    for (;;) {
        vt_sleep_ms(2);
        bool last = vigil_now_ns() >= end;
        atomic_store(&sh->release_ns, vigil_now_ns());
        if (vigil_leases_release(ls, &l) != 0)
            _exit(92);
        if (last || vigil_leases_acquire(ls, "k", "churner", 10000, &l) != 0)
            _exit(0);
    }
}

static int test_woken_under_churn(void)
{
    enum { ROUNDS = 8 };
    uint64_t lat[ROUNDS];
    vigil_leases *ls = vt_leases_fresh("churn.leases", 4);
    for (int r = 0; r < ROUNDS; r++) {
        memset(sh, 0, sizeof(*sh));
        fflush(NULL);
        pid_t kid = fork();
        if (kid == 0)
            churner("churn.leases");
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->held), 20000), "the churner never took the key");
        vigil_lease l;
        /* 5 s: a waiter that sleeps through the releases (until the 10 s
         * expiry) fails here at once. */
        int rc = vigil_leases_acquire_wait(ls, "k", "waiter", 60000, 5000 * MS, &l);
        uint64_t got = vigil_now_ns();
        EXPECT_RC(rc, 0);
        lat[r] = got - atomic_load(&sh->release_ns);
        EXPECT(vt_wait(kid, 20000) == 0, "the churner failed");
        EXPECT_RC(vigil_leases_release(ls, &l), 0);
    }
    uint64_t worst = 0;
    for (int r = 0; r < ROUNDS; r++)
        worst = lat[r] > worst ? lat[r] : worst;
    uint64_t med = median(lat, ROUNDS);
    printf("acquire_wait under churn: woken %.3f ms (median) after the release that freed the key, worst %.3f ms\n",
           med / 1e6, worst / 1e6);
    EXPECT(med < 10 * MS, "median wake-up %.3f ms after the release (bound: 10 x 1 ms)", med / 1e6);
    vigil_leases_close(ls);
    return 0;
}

/* ---- the key's entry rebound under a waiter's look-up -------------------- */

/* A key other than `key` whose home entry in a store of `cap` is key's. */
static void same_home(const char *key, uint32_t cap, char *out, size_t outlen)
{
    uint64_t kw[16];
    vigil_leases__words(kw, 16, key, strlen(key));
    uint32_t home = vigil_leases__hash(kw) % cap;
    for (int i = 0;; i++) {
        snprintf(out, outlen, "other-%d", i);
        vigil_leases__words(kw, 16, out, strlen(out));
        if (vigil_leases__hash(kw) % cap == home)
            return;
    }
}

static int test_rebound_under_lookup(void)
{
    vigil_leases *ls = vt_leases_fresh("rebind.leases", 2);
    char other[32];
    same_home("k", 2, other, sizeof(other));
    vigil_lease held, o;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "holder", 60000, &held), 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vigil_leases *cls = open_store("rebind.leases");
        stop_point = LP_WAIT_FOUND;
        vigil_leases_hook = stop_hook;
        vigil_lease m;
        /* 3 s: the old waiter slept to the other key's 60 s expiry. */
        _exit(vigil_leases_acquire_wait(cls, "k", "waiter", 60000, 3000 * MS, &m) == 0 ? 0 : 1);
    }
    EXPECT(wait_stopped(kid, 20000), "the waiter never stopped after its look-up");
    /* Released, and its entry bound to a key with the same home. */
    EXPECT_RC(vigil_leases_release(ls, &held), 0);
    EXPECT_RC(vigil_leases_acquire(ls, other, "other", 60000, &o), 0);
    EXPECT(o.id == held.id, "%s went to entry %lld, not k's %lld", other, (long long)o.id, (long long)held.id);
    uint64_t t0 = vigil_now_ns();
    kill(kid, SIGCONT);
    int st = vt_wait(kid, 20000);
    printf("a waiter continued after its key's entry was rebound: got the key in %.3f ms\n",
           (vigil_now_ns() - t0) / 1e6);
    EXPECT(st == 0, "the waiter slept on the rebound entry (exit %d)", st);
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_get(ls, "k", &info), 0);
    EXPECT(strcmp(info.owner, "waiter") == 0 && info.token > o.token, "k held by %s, token %llu", info.owner,
           (unsigned long long)info.token);
    vigil_leases_close(ls);
    return 0;
}

/* ---- the deadline -------------------------------------------------------- */

static int test_deadline_kept(void)
{
    enum { ROUNDS = 10 };
    uint64_t over[ROUNDS];
    vigil_leases *ls = vt_leases_fresh("deadline.leases", 4);
    vigil_lease held, l;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "holder", 60000, &held), 0);
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = vigil_now_ns();
        EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "waiter", 60000, 30 * MS, &l), VIGIL_ETIMEDOUT);
        uint64_t took = vigil_now_ns() - t0;
        EXPECT(took >= 30 * MS, "returned after %.3f ms of a 30 ms wait", took / 1e6);
        over[r] = took - 30 * MS;
    }
    uint64_t worst = 0;
    for (int r = 0; r < ROUNDS; r++)
        worst = over[r] > worst ? over[r] : worst;
    uint64_t med = median(over, ROUNDS);
    printf("acquire_wait's deadline passed by %.3f ms (median), %.3f ms at worst\n", med / 1e6, worst / 1e6);
    EXPECT(med < 20 * MS, "the deadline passed by %.3f ms (median; bound: 10 x 2 ms)", med / 1e6);
    vigil_leases_close(ls);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_stopped_holder_no_spin), VT_CASE(test_stopped_locker_no_spin),
        VT_CASE(test_stopped_binder_no_spin), VT_CASE(test_woken_under_churn),
        VT_CASE(test_rebound_under_lookup),   VT_CASE(test_deadline_kept),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
