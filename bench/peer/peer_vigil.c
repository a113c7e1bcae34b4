/* SPDX-License-Identifier: MIT */
/*
 * bench_peer's vigil side: the ops of peer.h on vigil's public API alone
 * (<vigil/etcd.h>, <vigil/group.h>), so that it measures whatever
 * transport the adapter speaks. Every actor (holder, waiter, leader,
 * observer, member, locker) has a handle of its own, one connection each,
 * as separate processes would (a handle runs one call at a time); members
 * and lockers are threads. Leases and sessions have a TTL of 60 s, as the
 * Go side's.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <vigil/etcd.h>
#include <vigil/group.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define TTL_MS     60000
#define PATIENT_NS 60000000000ull /* the bound on any one wait */
#define PREFIX     "bench-peer/vigil/"

static const char *eps;
static char tag[48]; /* in the names that must not recur on one etcd across runs */
static uint64_t seq; /* names that never recur within the run */

static struct timespec deadline_in(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec += (long)(ns % 1000000000u);
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

static int fail(const char *what, int rc)
{
    const char *why = vigil_etcd_errmsg();
    fprintf(stderr, "bench_peer: vigil: %s: %s%s%s\n", what, vigil_strerror(rc), *why ? ": " : "", why);
    return rc < 0 ? rc : -1;
}

/* ---- actors: a handle (and a session) each ------------------------------------ */

struct actor {
    vigil_etcd         *e;
    vigil_etcd_session *s;
};

static struct actor *actors;
static int n_actors;
static vigil_etcd *shared; /* tput-shared: the one handle of every locker */

static int connect_one(vigil_etcd **e)
{
    int rc = vigil_etcd_connect(eps, e);
    if (rc < 0)
        return fail("connect", rc);
    vigil_etcd_set_timeout(*e, 2000, 10000); /* a loaded machine answers late, not never */
    return 0;
}

static void drop_actors(void)
{
    for (int i = 0; i < n_actors; i++) {
        vigil_etcd_session_close(actors[i].s);
        if (actors[i].e != shared)
            vigil_etcd_close(actors[i].e);
    }
    vigil_etcd_close(shared);
    shared = NULL;
    free(actors);
    actors = NULL;
    n_actors = 0;
}

/* n actors, each with a session unless sessions is false; on one shared
 * handle when share is true. */
static int make_actors(int n, bool sessions, bool share)
{
    int rc;
    actors = calloc((size_t)n, sizeof(*actors));
    if (!actors)
        return -ENOMEM;
    if (share && (rc = connect_one(&shared)) < 0)
        goto out;
    for (; n_actors < n; n_actors++) {
        struct actor *a = &actors[n_actors];
        if (share)
            a->e = shared;
        else if ((rc = connect_one(&a->e)) < 0)
            goto out;
        if (sessions && (rc = vigil_etcd_session_open(a->e, TTL_MS, &a->s)) < 0) {
            fail("session_open", rc);
            n_actors++; /* its handle is closed with the others */
            goto out;
        }
    }
    return 0;
out:
    drop_actors();
    return rc;
}

/* ---- observe: a leader proclaims, the observer's thread stamps what it is told -- */

static struct {
    vigil_lease          leader;
    bool                 leading;
    vigil_etcd_observer *o;
    pthread_t            th;
    bool                 running;
    atomic_bool          stop;
    pthread_mutex_t      mu;
    pthread_cond_t       cv;
    char                 seen[64]; /* the latest value told, and when */
    int64_t              seen_at;
} obs = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *observer_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&obs.stop)) {
        vigil_lease_info info;
        int rc = vigil_etcd_observer_next(obs.o, &info, 200000000u);
        if (rc == VIGIL_ETIMEDOUT)
            continue;
        if (rc < 0) {
            fail("observer_next", rc);
            break;
        }
        if (info.state != VIGIL_LEASE_HELD)
            continue;
        int64_t at = now_ns();
        pthread_mutex_lock(&obs.mu);
        snprintf(obs.seen, sizeof(obs.seen), "%s", info.owner);
        obs.seen_at = at;
        pthread_cond_broadcast(&obs.cv);
        pthread_mutex_unlock(&obs.mu);
    }
    return NULL;
}

/* When the observer was told val: 0 and *at, or VIGIL_ETIMEDOUT. */
static int observed(const char *val, int64_t *at)
{
    struct timespec dl = deadline_in(PATIENT_NS);
    int rc = 0;
    pthread_mutex_lock(&obs.mu);
    while (strcmp(obs.seen, val) != 0 && rc == 0)
        rc = pthread_cond_timedwait(&obs.cv, &obs.mu, &dl);
    *at = obs.seen_at;
    pthread_mutex_unlock(&obs.mu);
    return rc == 0 ? 0 : VIGIL_ETIMEDOUT;
}

static int observe_prep(void)
{
    int rc;
    if ((rc = vigil_etcd_session_acquire(actors[0].s, PREFIX "observe", "start", &obs.leader)) < 0)
        return fail("session_acquire (the leader)", rc);
    obs.leading = true;
    if ((rc = vigil_etcd_observe(actors[1].e, PREFIX "observe", &obs.o)) < 0)
        return fail("observe", rc);
    atomic_store(&obs.stop, false);
    if (pthread_create(&obs.th, NULL, observer_main, NULL) != 0)
        return -EAGAIN;
    obs.running = true;
    int64_t at;
    return observed("start", &at) < 0 ? fail("the observer was never told the leader", VIGIL_ETIMEDOUT) : 0;
}

static void observe_drop(void)
{
    atomic_store(&obs.stop, true);
    if (obs.running)
        pthread_join(obs.th, NULL);
    obs.running = false;
    vigil_etcd_observer_close(obs.o);
    obs.o = NULL;
    if (obs.leading)
        vigil_etcd_resign(actors[0].e, &obs.leader);
    obs.leading = false;
    obs.seen[0] = '\0';
}

/* ---- wake: the holder holds, a waiter queues behind it ----------------------------- */

static struct {
    vigil_lease held;
    bool        holding;
    pthread_t   waiter;
    int64_t     woke_at;
    int         rc;
} wk;

static void *waiter_main(void *arg)
{
    (void)arg;
    vigil_lease l;
    wk.rc = vigil_etcd_session_acquire_wait(actors[1].s, PREFIX "wake", "waiter", PATIENT_NS, &l);
    wk.woke_at = now_ns();
    if (wk.rc >= 0) /* after the stamp: the next sample's holder waits for it */
        vigil_etcd_resign(actors[1].e, &l);
    return NULL;
}

static int vigil_hold(void)
{
    if (n_actors != 2 || wk.holding)
        return -EINVAL;
    int rc = vigil_etcd_session_acquire(actors[0].s, PREFIX "wake", "holder", &wk.held);
    if (rc < 0)
        return fail("session_acquire (the holder)", rc);
    if (pthread_create(&wk.waiter, NULL, waiter_main, NULL) != 0) {
        vigil_etcd_resign(actors[0].e, &wk.held);
        return -EAGAIN;
    }
    wk.holding = true;
    return 0;
}

static int vigil_release(int64_t *ns)
{
    if (!wk.holding)
        return -EINVAL;
    int64_t t0 = now_ns();
    int rc = vigil_etcd_resign(actors[0].e, &wk.held);
    pthread_join(wk.waiter, NULL); /* bounded: the waiter waits PATIENT_NS at most */
    wk.holding = false;
    if (rc < 0)
        return fail("resign (the holder)", rc);
    if (wk.rc < 0)
        return fail("session_acquire_wait (the waiter)", wk.rc);
    *ns = wk.woke_at - t0;
    return 0;
}

/* ---- round N: members are threads, each with a handle of its own --------------------- */

static struct {
    vigil_group_member **m;
    pthread_t           *th;
    int                  n, started;
    pthread_mutex_t      mu;
    pthread_cond_t       go, back;
    uint64_t             gen, round;
    bool                 stop;
    int                  done, rc;
    int64_t              last;
} rd = { .mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .back = PTHREAD_COND_INITIALIZER };

static void *member_main(void *arg)
{
    vigil_group_member *m = arg;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&rd.mu);
        while (rd.gen == seen && !rd.stop)
            pthread_cond_wait(&rd.go, &rd.mu);
        if (rd.stop) {
            pthread_mutex_unlock(&rd.mu);
            return NULL;
        }
        seen = rd.gen;
        uint64_t round = rd.round;
        pthread_mutex_unlock(&rd.mu);
        int rc = vigil_group_barrier_wait(m, round, 2 * PATIENT_NS);
        int64_t t = now_ns();
        pthread_mutex_lock(&rd.mu);
        if (t > rd.last)
            rd.last = t;
        if (rc < 0 && rd.rc == 0)
            rd.rc = rc;
        rd.done++;
        pthread_cond_signal(&rd.back);
        pthread_mutex_unlock(&rd.mu);
    }
}

static int join_member(vigil_etcd *e, const char *group, const char *name, vigil_group_member **m)
{
    struct vigil_group_options o = { .dir = "", .host = "bench-peer" };
    int rc = vigil_group_join_opts(e, group, name, TTL_MS, &o, m);
    return rc < 0 ? fail("group_join", rc) : 0;
}

static void round_drop(void)
{
    pthread_mutex_lock(&rd.mu);
    rd.stop = true;
    pthread_cond_broadcast(&rd.go);
    pthread_mutex_unlock(&rd.mu);
    for (int i = 0; i < rd.started; i++)
        pthread_join(rd.th[i], NULL);
    for (int i = 0; i < rd.n; i++)
        vigil_group_leave(rd.m[i]);
    free(rd.m);
    free(rd.th);
    rd.m = NULL;
    rd.th = NULL;
    rd.n = rd.started = 0;
    rd.stop = false;
}

static int round_prep(int n)
{
    char group[VIGIL_GROUP_MAX + 1];
    snprintf(group, sizeof(group), "bench-peer-%s-round%d", tag, n);
    rd.m = calloc((size_t)n, sizeof(*rd.m));
    rd.th = calloc((size_t)n, sizeof(*rd.th));
    if (!rd.m || !rd.th)
        return -ENOMEM;
    rd.round = 0;
    rd.gen = 0;
    for (; rd.n < n; rd.n++) {
        char name[32];
        snprintf(name, sizeof(name), "m%d", rd.n);
        if (join_member(actors[rd.n].e, group, name, &rd.m[rd.n]) < 0)
            return -1;
    }
    for (; rd.started < n; rd.started++)
        if (pthread_create(&rd.th[rd.started], NULL, member_main, rd.m[rd.started]) != 0)
            return -EAGAIN;
    return 0;
}

/* Every member arrives at the next round: from the start to the last one's return. */
static int round_sample(int64_t *ns)
{
    struct timespec dl = deadline_in(2 * PATIENT_NS + 1000000000u);
    int rc = 0;
    pthread_mutex_lock(&rd.mu);
    rd.done = 0;
    rd.rc = 0;
    rd.last = 0;
    int64_t t0 = now_ns();
    rd.gen++;
    pthread_cond_broadcast(&rd.go);
    while (rd.done < rd.n && rc == 0)
        rc = pthread_cond_timedwait(&rd.back, &rd.mu, &dl);
    rd.round++;
    int err = rd.rc;
    *ns = rd.last - t0;
    pthread_mutex_unlock(&rd.mu);
    if (rc != 0)
        return fail("a round never ended", VIGIL_ETIMEDOUT);
    return err < 0 ? fail("group_barrier_wait", err) : 0;
}

/* ---- unit: add + take + done by one member -------------------------------------- */

static vigil_group_member *unit_member;
static char unit_group[VIGIL_GROUP_MAX + 1];

static int unit_sample(void)
{
    char name[64];
    snprintf(name, sizeof(name), "u%" PRIu64, ++seq);
    vigil_group_unit u;
    int rc;
    if ((rc = vigil_group_add(actors[0].e, unit_group, name)) < 0)
        return fail("group_add", rc);
    if ((rc = vigil_group_take(unit_member, &u)) < 0)
        return fail("group_take", rc);
    if (strcmp(u.name, name) != 0) {
        fprintf(stderr, "bench_peer: vigil: took %s, added %s\n", u.name, name);
        return -1;
    }
    if ((rc = vigil_group_done(unit_member, &u)) < 0)
        return fail("group_done", rc);
    return 0;
}

/* ---- the ops ---------------------------------------------------------------- */

static int vigil_prep(const char *op, int arg)
{
    int rc;
    if (n_actors)
        return -EBUSY;
    if (!strcmp(op, "lock") || !strcmp(op, "elect"))
        return make_actors(1, true, false);
    if (!strcmp(op, "lease"))
        return make_actors(1, false, false);
    if (!strcmp(op, "wake"))
        return make_actors(2, true, false);
    if (!strcmp(op, "observe"))
        return (rc = make_actors(2, true, false)) < 0 ? rc : observe_prep();
    if (!strcmp(op, "round"))
        return (rc = make_actors(arg, false, false)) < 0 ? rc : round_prep(arg);
    if (!strcmp(op, "unit")) {
        snprintf(unit_group, sizeof(unit_group), "bench-peer-%s-units", tag);
        return (rc = make_actors(1, false, false)) < 0 ? rc
                                                       : join_member(actors[0].e, unit_group, "worker", &unit_member);
    }
    if (!strcmp(op, "tput") || !strcmp(op, "tput-shared"))
        return make_actors(arg, true, !strcmp(op, "tput-shared"));
    fprintf(stderr, "bench_peer: vigil: unknown op %s\n", op);
    return -EINVAL;
}

static void vigil_drop(const char *op)
{
    if (!strcmp(op, "observe"))
        observe_drop();
    if (!strcmp(op, "round"))
        round_drop();
    if (!strcmp(op, "unit")) {
        vigil_group_leave(unit_member);
        unit_member = NULL;
    }
    drop_actors();
}

static int vigil_sample(const char *op, int64_t *ns)
{
    vigil_lease l;
    int rc;
    int64_t t0 = now_ns();
    if (!strcmp(op, "lock")) { /* session_acquire + resign on a kept session */
        if ((rc = vigil_etcd_session_acquire(actors[0].s, PREFIX "lock", "vigil", &l)) < 0)
            return fail("session_acquire", rc);
        if ((rc = vigil_etcd_resign(actors[0].e, &l)) < 0)
            return fail("resign", rc);
    } else if (!strcmp(op, "lease")) { /* a lease each time: acquire + release */
        if ((rc = vigil_etcd_acquire(actors[0].e, PREFIX "lease", "vigil", TTL_MS, &l)) < 0)
            return fail("acquire", rc);
        if ((rc = vigil_etcd_release(actors[0].e, &l)) < 0)
            return fail("release", rc);
    } else if (!strcmp(op, "elect")) { /* campaign (acquire_wait) + resign */
        if ((rc = vigil_etcd_session_acquire_wait(actors[0].s, PREFIX "elect", "vigil", PATIENT_NS, &l)) < 0)
            return fail("session_acquire_wait", rc);
        if ((rc = vigil_etcd_resign(actors[0].e, &l)) < 0)
            return fail("resign", rc);
    } else if (!strcmp(op, "observe")) { /* proclaim, to the observer told */
        char val[32];
        int64_t at;
        snprintf(val, sizeof(val), "v%" PRIu64, ++seq);
        if ((rc = vigil_etcd_proclaim(actors[0].e, &obs.leader, val)) < 0)
            return fail("proclaim", rc);
        if (observed(val, &at) < 0)
            return fail("the observer was never told", VIGIL_ETIMEDOUT);
        *ns = at - t0;
        return 0;
    } else if (!strcmp(op, "round")) {
        return round_sample(ns);
    } else if (!strcmp(op, "unit")) {
        if ((rc = unit_sample()) < 0)
            return rc;
    } else {
        return -EINVAL;
    }
    *ns = now_ns() - t0;
    return 0;
}

static int vigil_run(const char *op, int count, struct samples *out)
{
    for (int i = 0; i < count; i++) {
        int64_t ns;
        int rc = vigil_sample(op, &ns);
        if (rc < 0)
            return rc;
        if (samples_add(out, ns) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- tput: every locker locks and unlocks a key of its own until the deadline ---- */

struct locker {
    struct actor  *a;
    int            i, rc;
    int64_t        deadline;
    struct samples lat;
};

static void *locker_main(void *arg)
{
    struct locker *k = arg;
    char key[64];
    snprintf(key, sizeof(key), PREFIX "tput/%d", k->i);
    while (now_ns() < k->deadline) {
        vigil_lease l;
        int64_t t = now_ns();
        if ((k->rc = vigil_etcd_session_acquire(k->a->s, key, "vigil", &l)) < 0 ||
            (k->rc = vigil_etcd_resign(k->a->e, &l)) < 0 || (k->rc = samples_add(&k->lat, now_ns() - t)) < 0)
            return NULL;
    }
    return NULL;
}

static int vigil_tput(const char *op, int ms, int64_t *elapsed, struct samples *out)
{
    (void)op;
    struct locker *k = calloc((size_t)n_actors, sizeof(*k));
    pthread_t *th = calloc((size_t)n_actors, sizeof(*th));
    int rc = k && th ? 0 : -ENOMEM, started = 0;
    int64_t t0 = now_ns();
    for (; rc == 0 && started < n_actors; started++) {
        k[started] = (struct locker){ .a = &actors[started], .i = started, .deadline = t0 + (int64_t)ms * 1000000 };
        if (pthread_create(&th[started], NULL, locker_main, &k[started]) != 0)
            rc = -EAGAIN;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    *elapsed = now_ns() - t0;
    for (int i = 0; i < started; i++) {
        if (k[i].rc < 0 && rc == 0)
            rc = fail("a locker's lock + unlock", k[i].rc);
        for (size_t j = 0; j < k[i].lat.n && rc == 0; j++)
            rc = samples_add(out, k[i].lat.v[j]);
        free(k[i].lat.v);
    }
    free(k);
    free(th);
    return rc;
}

static double vigil_cpu(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

void peer_vigil_init(const char *endpoints, const char *run_tag)
{
    eps = endpoints;
    snprintf(tag, sizeof(tag), "%s", run_tag);
}

const struct side peer_vigil = {
    .name = "vigil",
    .prep = vigil_prep,
    .run = vigil_run,
    .tput = vigil_tput,
    .hold = vigil_hold,
    .release = vigil_release,
    .drop = vigil_drop,
    .cpu_s = vigil_cpu,
};
