/* SPDX-License-Identifier: MIT */
/*
 * Description: the lease store's vigil_leases_get and
 * vigil_leases_acquire_wait (src/leases_wait.c, THE SLEEP): get reports
 * the holder and VIGIL_EVACANT for a vacant, released or expired key;
 * acquire_wait takes a free key at once, times out on a held one, is
 * woken by a release in another process (the wake-up latency is printed,
 * and bounded at ten times issue 18's 1 ms), takes the key of a holder killed with SIGKILL once its lease
 * expires, stays asleep across the holder's renewals, and sleeps rather
 * than polls; a full store is waited for (THE ROOM SLEEP), not returned.
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
    _Atomic int      go;
    _Atomic uint64_t released_ns;
    _Atomic uint64_t token;
};
static struct shared *sh;

static int test_get(void)
{
    vigil_leases *ls = vt_leases_fresh("get.leases", 8);
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_get(ls, "k", &info), VIGIL_EVACANT);
    EXPECT(strcmp(info.key, "k") == 0 && info.state == VIGIL_LEASE_VACANT, "vacant: key %s state %u", info.key,
           info.state);
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "alice", 5000, &l), 0);
    EXPECT_RC(vigil_leases_get(ls, "k", &info), 0);
    EXPECT(strcmp(info.key, "k") == 0 && strcmp(info.owner, "alice") == 0 && info.token == l.token &&
               info.ttl_ms == 5000 && info.expires_in_ms > 0 && info.expires_in_ms <= 5001 && /* whole ms, rounded down */
               info.state == VIGIL_LEASE_HELD && info.pid == (uint32_t)getpid(),
           "held: %s %s token %llu ttl %llu left %lld state %u pid %u", info.key, info.owner,
           (unsigned long long)info.token, (unsigned long long)info.ttl_ms, (long long)info.expires_in_ms,
           info.state, info.pid);
    EXPECT_RC(vigil_leases_get(ls, "other", &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_leases_release(ls, &l), 0);
    EXPECT_RC(vigil_leases_get(ls, "k", &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "bob", 3, &l), 0);
    vt_sleep_ms(10);
    EXPECT_RC(vigil_leases_get(ls, "k", &info), VIGIL_EVACANT); /* expired */
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    EXPECT_RC(vigil_leases_get(ls, big, &info), VIGIL_ERANGE);

    /* The cost of a get, for the record. */
    EXPECT_RC(vigil_leases_acquire(ls, "k", "carol", 60000, &l), 0);
    enum { N = 200000 };
    uint64_t t0 = vigil_now_ns();
    for (int i = 0; i < N; i++)
        vigil_leases_get(ls, "k", &info);
    printf("vigil_leases_get: %.0f ns\n", (double)(vigil_now_ns() - t0) / N);
    vigil_leases_close(ls);
    return 0;
}

static int test_wait_local(void)
{
    vigil_leases *ls = vt_leases_fresh("local.leases", 8);
    vigil_lease a, b;
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "a", 5000, 0, &a), 0);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "b", 5000, 0, &b), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "b", 5000, 20 * MS, &b), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "b", 2, UINT64_MAX, &b), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "", "b", 5000, 0, &b), -EINVAL);
    EXPECT_RC(vigil_leases_release(ls, &a), 0);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "b", 5000, 0, &b), 0);
    EXPECT(b.token > a.token, "tokens %llu then %llu", (unsigned long long)a.token, (unsigned long long)b.token);
    vigil_leases_close(ls);
    return 0;
}

/* A child holds the key; it releases (or dies) when told. */
static pid_t holder(const char *name, uint64_t ttl_ms, int how)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        vigil_leases *ls;
        vigil_lease l;
        if (vigil_leases_open(vt_path(name), &ls) < 0 || vigil_leases_acquire(ls, "k", "child", ttl_ms, &l) < 0)
            _exit(90);
        atomic_store(&sh->token, l.token);
        atomic_store(&sh->held, 1);
        if (how == 1)
            vt_await_kill();
        if (!VT_WAIT_FOR(atomic_load(&sh->go), 20000))
            _exit(91);
        vt_sleep_ms(20); /* let the parent fall asleep; its wake is what is measured */
        atomic_store(&sh->released_ns, vigil_now_ns());
        _exit(vigil_leases_release(ls, &l) == 0 ? 0 : 92);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The latency is bounded: the median at ten times the 1 ms issue 18 asks
 * for, each round at 2 s, so that a release whose wake-up is lost (a
 * FUTEX_WAKE removed, issue 17's mutant; the waiter then finds the key
 * only when its 2 s timeout ends its sleep) fails in the first round
 * instead of sleeping to the holder's 60 s expiry and CTest's timeout. */
static int test_woken_by_release(void)
{
    vigil_leases *ls = vt_leases_fresh("rel.leases", 8);
    enum { ROUNDS = 20 };
    double us[ROUNDS], sum = 0;
    for (int r = 0; r < ROUNDS; r++) {
        memset(sh, 0, sizeof(*sh));
        pid_t kid = holder("rel.leases", 60000, 0);
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->held), 20000), "child never acquired");
        atomic_store(&sh->go, 1);
        vigil_lease l;
        EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "parent", 60000, 2000 * MS, &l), 0);
        us[r] = (double)(vigil_now_ns() - atomic_load(&sh->released_ns)) / 1000.0;
        sum += us[r];
        EXPECT(us[r] < 1e6, "round %d: woken %.1f ms after the release: the wake-up was lost", r, us[r] / 1000);
        EXPECT(l.token > atomic_load(&sh->token), "token did not rise");
        EXPECT(vt_wait(kid, 20000) == 0, "holder failed");
        EXPECT_RC(vigil_leases_release(ls, &l), 0);
    }
    qsort(us, ROUNDS, sizeof(us[0]), cmp_double);
    printf("acquire_wait woken by a release in another process: median %.1f us, mean %.1f us, best %.1f us\n",
           us[ROUNDS / 2], sum / ROUNDS, us[0]);
    EXPECT(us[ROUNDS / 2] < 10000.0, "woken %.1f us (median) after the release: bound 10 ms", us[ROUNDS / 2]);
    vigil_leases_close(ls);
    return 0;
}

static int test_holder_killed(void)
{
    vigil_leases *ls = vt_leases_fresh("kill.leases", 8);
    memset(sh, 0, sizeof(*sh));
    pid_t kid = holder("kill.leases", 200, 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->held), 20000), "child never acquired");
    kill(kid, SIGKILL);
    EXPECT(vt_wait(kid, 20000) == 128 + SIGKILL, "holder not killed");
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k", "parent", 5000, 20000 * MS, &l), 0);
    EXPECT(l.token > atomic_load(&sh->token), "token did not rise");
    vigil_leases_close(ls);
    return 0;
}

/* The holder renews through a keepalive: the waiter sleeps to each
 * expiry, finds it renewed, sleeps again, and times out; it wakes a few
 * times per renewal, never in a loop. */
static int test_renewed_holder_waited_out(void)
{
    vigil_leases *ls = vt_leases_fresh("renew.leases", 8);
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "holder", 1500, &l), 0);
    vigil_lease_port port = vigil_leases_port(ls);
    vigil_keepalive *ka;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    vigil_lease w;
    int rc = vigil_leases_acquire_wait(ls, "k", "waiter", 5000, 1000 * MS, &w);
    bool lost_then = vigil_keepalive_lost(ka); /* at once: judged by the clock */
    getrusage(RUSAGE_THREAD, &r1);
    long switches = (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw);
    /* The store's expiry is never before the keepalive's own deadline: a
     * waiter that got the key of a lease that had lapsed finds the
     * keepalive already lost by its clock the moment it returns (a stalled
     * machine); one that got a live lease's key finds it not lost (a bug,
     * which the refusal at the next renewal must not hide). */
    EXPECT(rc != 0 || lost_then, "acquire_wait took the key of a lease still live");
    /* The stop's answer, not a look before it: the lease may lapse
     * between the two (seen under a load of 7). */
    int stop = vigil_keepalive_stop(ka);
    EXPECT(stop == 0 || stop == VIGIL_ELOST, "keepalive_stop: %d", stop);
    if (stop == VIGIL_ELOST) {
        fprintf(stderr, "the holder's 1.5 s lease lapsed: this machine stalled\n");
        vigil_leases_close(ls);
        return VT_SKIP;
    }
    EXPECT(rc == VIGIL_ETIMEDOUT, "acquire_wait gave %d on a key renewed all along", rc);
    EXPECT(switches < 100, "%ld context switches in a 1 s wait: it polled", switches);
    printf("a 1 s acquire_wait on a key renewed every 500 ms: %ld context switches\n", switches);
    vigil_leases_close(ls);
    return 0;
}

/*
 * A full store is waited for, not returned (issue 32): a one-entry store,
 * the waiter asleep on k1; k1 released and, before the waiter looks
 * again (it is stopped then), k2 bound to the only entry. Continued, the
 * waiter finds the store full: it sleeps for room (THE ROOM SLEEP) until
 * k2 is released, then takes k1, with a greater token. Before, it
 * returned VIGIL_EFULL and `vigil lock --wait` exited 1. A full store
 * that stays full until the deadline is VIGIL_ETIMEDOUT.
 */
static int test_waits_through_full(void)
{
    vigil_leases *ls = vt_leases_fresh("full.leases", 1);
    memset(sh, 0, sizeof(*sh));
    vigil_lease a, b;
    EXPECT_RC(vigil_leases_acquire(ls, "k1", "a", 60000, &a), 0);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_own_pgrp();
        vigil_leases *mine;
        vigil_lease w;
        if (vigil_leases_open(vt_path("full.leases"), &mine) < 0)
            _exit(3);
        int rc = vigil_leases_acquire_wait(mine, "k1", "waiter", 60000, 30000 * MS, &w);
        atomic_store(&sh->token, rc == 0 ? w.token : 0);
        _exit(rc == 0 ? 0 : rc == VIGIL_EFULL ? 4 : 5);
    }
    struct vigil_leases_entry *e = &ls->entries[0];
    EXPECT(VT_WAIT_FOR(atomic_load(&e->waiters) > 0, 20000), "the waiter never slept on k1");
    kill(kid, SIGSTOP);
    EXPECT_RC(vigil_leases_release(ls, &a), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "k2", "b", 60000, &b), 0); /* the only entry, rebound */
    kill(kid, SIGCONT);
    bool room = VT_WAIT_FOR(atomic_load(&ls->hdr->room_waiters) > 0, 20000);
    EXPECT_RC(vigil_leases_release(ls, &b), 0);
    int st = vt_wait(kid, 20000);
    EXPECT(room && st == 0, "waiting for room: asleep %d, waiter %s (%d)", room,
           st == 4 ? "returned VIGIL_EFULL" : "failed", st);
    EXPECT(atomic_load(&sh->token) > b.token, "token %llu not above %llu", (unsigned long long)atomic_load(&sh->token),
           (unsigned long long)b.token);
    /* Full (k1 is the waiter's, for its TTL) until the deadline:
     * VIGIL_ETIMEDOUT, for 0 and for 100 ms; acquire itself is unchanged. */
    vigil_lease w;
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k3", "w", 60000, 0, &w), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_leases_acquire_wait(ls, "k3", "w", 60000, 100 * MS, &w), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_leases_acquire(ls, "k3", "w", 60000, &w), VIGIL_EFULL);
    vigil_leases_close(ls);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_get),
        VT_CASE(test_wait_local),
        VT_CASE(test_woken_by_release),
        VT_CASE(test_holder_killed),
        VT_CASE(test_renewed_holder_waited_out),
        VT_CASE(test_waits_through_full),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
