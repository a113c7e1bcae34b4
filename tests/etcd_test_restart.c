/* SPDX-License-Identifier: MIT */
/*
 * Description: etcd stopped and restarted under a running keepalive, on a
 * server of the test's own (tests/etcd_server.sh pause/resume, same port
 * and data dir). While it is down every call is a transient -errno, never
 * VIGIL_ELOST; down past the TTL, the keepalive gives the lease up locally
 * and renews no more, so it lapses on etcd too and passes on; and no
 * renewal ever succeeds for a lease once someone else holds the key:
 * with the holder running (lost locally), with it frozen across the
 * restart (it is refused, and its release cannot touch the new holder's
 * key), and with the server frozen (timeouts, then recovery). A waiter
 * with no deadline waits on through an outage of 3 x TTL and ends
 * holding the key.
 */
#include "etcd_testutil.h"

#include <poll.h>
#include <stdatomic.h>
#include <sys/mman.h>

static char state[512];
static char url[300];

static void stop_server(void)
{
    if (state[0] && getpid() == vt_owner_pid)
        et_script("stop", state, NULL);
}

/* Starts this test's own etcd: 0, VT_SKIP without etcd, 1 on failure. */
static int own_server(void)
{
    if (url[0])
        return 0;
    if (!getenv("VIGIL_ETCD_SCRIPT")) {
        fprintf(stderr, "VIGIL_ETCD_SCRIPT not set: run under ctest\n");
        return VT_SKIP;
    }
    snprintf(state, sizeof(state), "%s", vt_path("etcd"));
    int st = et_script("start", state, NULL);
    atexit(stop_server); /* runs before vt_cleanup removes the directory */
    if (st != 0) {
        fprintf(stderr, "expected etcd_server.sh start to exit 0, got %d\n", st);
        return 1;
    }
    return et_read_endpoints(state, url, sizeof(url));
}

#define NEED_SERVER()                                                         \
    do {                                                                      \
        int need_rc_ = own_server();                                          \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

/* A port that records what each renewal got, for the keepalive to use. */
struct recorder {
    vigil_etcd      *e;
    _Atomic unsigned ok, transient, lost;
    _Atomic int      last_transient;
    _Atomic uint64_t mark_ms;      /* renewals that start after this ... */
    _Atomic unsigned ok_after_mark; /* ... and succeed: must stay 0 */
};

static int recorded_renew(void *ctx, const vigil_lease *l)
{
    struct recorder *r = ctx;
    uint64_t start = vt_now_ms();
    int rc = vigil_etcd_renew(r->e, l);
    if (rc == 0) {
        atomic_fetch_add(&r->ok, 1);
        if (start > atomic_load(&r->mark_ms))
            atomic_fetch_add(&r->ok_after_mark, 1);
    } else if (rc == VIGIL_ELOST) {
        atomic_fetch_add(&r->lost, 1);
    } else {
        atomic_fetch_add(&r->transient, 1);
        atomic_store(&r->last_transient, rc);
    }
    return rc;
}

static void recorder_init(struct recorder *r, vigil_etcd *e)
{
    memset(r, 0, sizeof(*r));
    r->e = e;
    atomic_store(&r->mark_ms, UINT64_MAX);
}

/* The holder keeps running through a restart (TERM or KILL). */
static int restart_with(const char *sig)
{
    NEED_SERVER();
    vigil_etcd *a = et_connect(url), *b = et_connect(url);
    vigil_etcd_set_timeout(a, 300, 1000);
    vigil_etcd_set_timeout(b, 300, 1000);
    const char *key = et_key("restart");
    vigil_lease l, lb;
    EXPECT_RC(vigil_etcd_acquire(a, key, "a", 2000, &l), 0);
    struct recorder rec;
    recorder_init(&rec, a);
    vigil_lease_port port = { &rec, recorded_renew };
    vigil_keepalive *ka = NULL;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    bool renewed = VT_WAIT_FOR(atomic_load(&rec.ok) >= 1, l.ttl_ms * 2);

    int st = et_script("pause", state, sig);
    /* Down: the keepalive meets transient errors; so does anyone else. */
    bool saw_transient = VT_WAIT_FOR(atomic_load(&rec.transient) >= 2, l.ttl_ms * 3);
    int down_b = vigil_etcd_acquire(b, key, "b", 1000, &lb);
    int down_a = vigil_etcd_renew(a, &l);
    vt_sleep_ms((unsigned)l.ttl_ms); /* down past the TTL, counting from the last renewal */
    bool lost_while_down = atomic_load(&rec.lost) > 0;
    int st2 = et_script("resume", state, NULL);

    /* Back. Down past the TTL, the keepalive has given the lease up
     * locally and renews no more, so the lease lapses on etcd too (which
     * may have kept it across the restart) and b gets the key. */
    bool lost_after = vigil_keepalive_lost(ka);
    int b_rc = VIGIL_EBUSY;
    uint64_t deadline = vt_now_ms() + l.ttl_ms * 4 + 5000;
    while (vt_now_ms() < deadline) {
        b_rc = vigil_etcd_acquire(b, key, "b", 1000, &lb);
        if (b_rc == 0) {
            atomic_store(&rec.mark_ms, vt_now_ms());
            break;
        }
        vt_sleep_ms(100);
    }
    int stop = vigil_keepalive_stop(ka);
    int after_a = vigil_etcd_renew(a, &l);
    int rel_a = vigil_etcd_release(a, &l);
    int rel_b = b_rc == 0 ? vigil_etcd_release(b, &lb) : 0;
    vigil_etcd_close(a);
    vigil_etcd_close(b);

    EXPECT(renewed, "no renewal before the restart");
    EXPECT(st == 0 && st2 == 0, "etcd_server.sh pause %s / resume exited %d / %d", sig, st, st2);
    EXPECT(saw_transient, "expected transient failures while etcd was down, got %u (ok %u lost %u)",
           atomic_load(&rec.transient), atomic_load(&rec.ok), atomic_load(&rec.lost));
    int lt = atomic_load(&rec.last_transient);
    EXPECT(et_transient(lt) && lt > -1000, "expected a -errno while down, got %d (%s)", lt, vigil_strerror(lt));
    EXPECT(et_transient(down_a) && et_transient(down_b),
           "with etcd down: renew %d (%s), acquire %d (%s); expected transient errors", down_a,
           vigil_strerror(down_a), down_b, vigil_strerror(down_b));
    EXPECT(!lost_while_down, "a renewal was refused while etcd was down: an unreachable server is not a refusal");
    EXPECT(lost_after, "etcd was down past the TTL and the keepalive still held the lease (ok %u, transient %u)",
           atomic_load(&rec.ok), atomic_load(&rec.transient));
    EXPECT_RC(b_rc, 0);
    EXPECT(atomic_load(&rec.ok_after_mark) == 0,
           "%u renewals succeeded after b held the key", atomic_load(&rec.ok_after_mark));
    EXPECT_RC(stop, VIGIL_ELOST);
    EXPECT_RC(after_a, VIGIL_ELOST);
    EXPECT_RC(rel_a, VIGIL_ELOST);
    EXPECT_RC(rel_b, 0);
    fprintf(stderr, "restart (%s): lost locally; renewals %u, transient %u (last %s)\n", sig,
            atomic_load(&rec.ok), atomic_load(&rec.transient), vigil_strerror(lt));
    return 0;
}

static int test_restart_term(void)
{
    return restart_with("TERM");
}

static int test_restart_kill(void)
{
    return restart_with("KILL");
}

/* What the frozen holder reports once it runs again. */
struct holder_report {
    int      lost, stop, renew, release;
    unsigned ok_after_mark, transient;
};

/* The holder is frozen (SIGSTOP) across the restart, so nothing renews its
 * lease; it lapses and b takes the key. Thawed, its keepalive is refused,
 * no renewal of it succeeds, and its release leaves b's key alone. */
static int test_frozen_holder(void)
{
    NEED_SERVER();
    const char *key = et_key("frozen");
    /* Shared, so the parent can set the mark before the holder thaws: a
     * renewal the holder starts after that must not succeed. */
    struct recorder *rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT(rec != MAP_FAILED, "mmap: %s", strerror(errno));
    recorder_init(rec, NULL);
    int up[2], down[2];
    EXPECT(pipe(up) == 0 && pipe(down) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t kid = fork();
    EXPECT(kid >= 0, "fork: %s", strerror(errno));
    if (kid == 0) {
        close(up[0]);
        close(down[1]);
        vigil_etcd *a = et_connect(url);
        vigil_etcd_set_timeout(a, 300, 1000);
        vigil_lease l;
        if (vigil_etcd_acquire(a, key, "a", 1000, &l) != 0)
            _exit(3);
        rec->e = a;
        vigil_lease_port port = { rec, recorded_renew };
        vigil_keepalive *ka = NULL;
        if (vigil_keepalive_start(&port, &l, &ka) != 0)
            _exit(3);
        if (!VT_WAIT_FOR(atomic_load(&rec->ok) >= 1, l.ttl_ms * 2))
            _exit(4);
        if (write(up[1], &l, sizeof(l)) != sizeof(l))
            _exit(3);
        /* Frozen here by the parent; thawed once b holds the key. */
        char c;
        if (read(down[0], &c, 1) != 1)
            _exit(3);
        struct holder_report r = { 0 };
        r.lost = VT_WAIT_FOR(vigil_keepalive_lost(ka), l.ttl_ms * 2 + 3000);
        r.stop = vigil_keepalive_stop(ka);
        r.renew = vigil_etcd_renew(a, &l);
        r.release = vigil_etcd_release(a, &l);
        r.ok_after_mark = atomic_load(&rec->ok_after_mark);
        r.transient = atomic_load(&rec->transient);
        vigil_etcd_close(a);
        _exit(write(up[1], &r, sizeof(r)) == sizeof(r) ? 0 : 3);
    }
    close(up[1]);
    close(down[0]);
    vigil_lease la;
    struct pollfd pf = { up[0], POLLIN, 0 };
    bool got = poll(&pf, 1, 15000) == 1 && read(up[0], &la, sizeof(la)) == sizeof(la);
    if (!got) {
        kill(kid, SIGKILL);
        vt_wait(kid, 5000);
    }
    EXPECT(got, "the holder did not acquire and renew");
    kill(kid, SIGSTOP);

    vigil_etcd *b = et_connect(url);
    vigil_etcd_set_timeout(b, 300, 1000);
    int st = et_script("pause", state, "TERM");
    int st2 = et_script("resume", state, NULL);
    vigil_lease lb;
    int b_rc = VIGIL_EBUSY;
    uint64_t deadline = vt_now_ms() + la.ttl_ms * 4 + 8000;
    while ((b_rc = vigil_etcd_acquire(b, key, "b", 3000, &lb)) != 0 && vt_now_ms() < deadline)
        vt_sleep_ms(100);
    atomic_store(&rec->mark_ms, vt_now_ms());
    kill(kid, SIGCONT);
    bool sent = write(down[1], "c", 1) == 1;
    struct holder_report r;
    memset(&r, 0, sizeof(r));
    pf.fd = up[0];
    bool reported = sent && poll(&pf, 1, 15000) == 1 && read(up[0], &r, sizeof(r)) == sizeof(r);
    int kst = vt_wait(kid, 15000);
    close(up[0]);
    close(down[1]);
    int b_renew = b_rc == 0 ? vigil_etcd_renew(b, &lb) : b_rc;
    int b_rel = b_rc == 0 ? vigil_etcd_release(b, &lb) : b_rc;
    vigil_etcd_close(b);
    munmap(rec, sizeof(*rec));

    EXPECT(st == 0 && st2 == 0, "etcd_server.sh pause / resume exited %d / %d", st, st2);
    EXPECT_RC(b_rc, 0);
    EXPECT(lb.token > la.token, "expected b's token above %llu, got %llu", (unsigned long long)la.token,
           (unsigned long long)lb.token);
    EXPECT(reported && kst == 0, "the holder did not report (status %d)", kst);
    EXPECT(r.lost, "the thawed holder's keepalive was not refused");
    EXPECT_RC(r.stop, VIGIL_ELOST);
    EXPECT_RC(r.renew, VIGIL_ELOST);
    EXPECT_RC(r.release, VIGIL_ELOST);
    EXPECT(r.ok_after_mark == 0, "%u renewals succeeded after b held the key", r.ok_after_mark);
    EXPECT_RC(b_renew, 0); /* the old holder's release left b's key alone */
    EXPECT_RC(b_rel, 0);
    return 0;
}

/* A server that accepts but never answers (SIGSTOP): renewals time out
 * within the handle's limit, transiently, and recover once it thaws. */
static int test_frozen_server(void)
{
    NEED_SERVER();
    vigil_etcd *a = et_connect(url);
    vigil_etcd_set_timeout(a, 300, 500);
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(a, et_key("stall"), "a", 3000, &l), 0);
    int st = et_script("freeze", state, NULL);
    int r1 = vigil_etcd_renew(a, &l);
    int r2 = vigil_etcd_renew(a, &l);
    int st2 = et_script("thaw", state, NULL);
    int r3 = VIGIL_ETIMEDOUT;
    uint64_t deadline = vt_now_ms() + 5000;
    while ((r3 = vigil_etcd_renew(a, &l)) != 0 && et_transient(r3) && vt_now_ms() < deadline)
        vt_sleep_ms(50);
    int rel = vigil_etcd_release(a, &l);
    vigil_etcd_close(a);
    EXPECT(st == 0 && st2 == 0, "etcd_server.sh freeze / thaw exited %d / %d", st, st2);
    EXPECT_RC(r1, -ETIMEDOUT);
    EXPECT_RC(r2, -ETIMEDOUT);
    EXPECT_RC(r3, 0);
    EXPECT_RC(rel, 0);
    return 0;
}

/* Issue 11's frozen server: etcd SIGSTOPped under a keepalive with a 2 s
 * TTL (etcd's minimum). The lease is lost locally within about the TTL
 * (the fd turns readable while renewals hang), and after SIGCONT the
 * keepalive stays lost: it never renews again. */
static int test_frozen_server_keepalive_lost(void)
{
    NEED_SERVER();
    vigil_etcd *a = et_connect(url);
    vigil_etcd_set_timeout(a, 300, 500);
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(a, et_key("frozenka"), "a", 2000, &l), 0);
    vigil_lease_port port = vigil_etcd_port(a);
    vigil_keepalive *ka;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    vt_sleep_ms(200); /* a renewal or so accepted first, as in real life */
    uint64_t t0 = vt_now_ms();
    int st = et_script("freeze", state, NULL);
    struct pollfd p = { .fd = vigil_keepalive_fd(ka), .events = POLLIN };
    int ready = poll(&p, 1, 10000);
    uint64_t took = vt_now_ms() - t0;
    int st2 = et_script("thaw", state, NULL);
    printf("etcd frozen under a 2000 ms TTL: lost %llu ms after the freeze\n", (unsigned long long)took);
    vigil_keepalive_info before, after;
    vigil_keepalive_stats(ka, &before);
    /* Thawed: give a revived renewer every chance (several beats). */
    vt_sleep_ms(1500);
    vigil_keepalive_stats(ka, &after);
    bool lost = vigil_keepalive_lost(ka);
    int stop = vigil_keepalive_stop(ka);
    vigil_etcd_release(a, &l);
    vigil_etcd_close(a);
    EXPECT(st == 0 && st2 == 0, "etcd_server.sh freeze / thaw exited %d / %d", st, st2);
    EXPECT(ready == 1 && (p.revents & POLLIN), "the fd never turned readable under a frozen etcd");
    EXPECT(took <= 2000 + 1500, "lost %llu ms after the freeze, TTL 2000", (unsigned long long)took);
    EXPECT(lost && stop == VIGIL_ELOST, "after the thaw: lost %d, stop %d", lost, stop);
    EXPECT(after.renewals == before.renewals, "renewed after the loss: %llu then %llu",
           (unsigned long long)before.renewals, (unsigned long long)after.renewals);
    return 0;
}

/* Issue 19's outage: etcd down for 3 x TTL under a waiter with no
 * deadline (UINT64_MAX), its holder killed meanwhile. The waiter rides it
 * out (no error while etcd is away, nor when it comes back) and ends
 * holding the key once etcd is back and the dead holder's lease lapses. */
static int test_wait_through_outage(void)
{
    NEED_SERVER();
    const char *key = et_key("outage");
    enum { TTL = 2000 };
    int fa[2], fb[2];
    EXPECT(pipe(fa) == 0 && pipe(fb) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    struct vt_proc a = { .pid = fork() };
    if (a.pid == 0) {
        vigil_etcd *e = et_connect(url);
        vigil_lease l;
        int rc = vigil_etcd_acquire(e, key, "holder", TTL, &l);
        dprintf(fa[1], "held %d %llu\n", rc, (unsigned long long)l.token);
        vt_await_kill();
    }
    a.fd = fa[0];
    close(fa[1]);
    bool held = vt_read_until(&a, "\n", 10000) && strstr(a.buf, "held 0 ");
    struct vt_proc b = { .pid = held ? fork() : -1 };
    if (b.pid == 0) {
        vigil_etcd *e = et_connect(url);
        vigil_etcd_set_timeout(e, 300, 500);
        vigil_lease l;
        int rc = vigil_etcd_acquire_wait(e, key, "waiter", TTL, UINT64_MAX, &l);
        dprintf(fb[1], "got %d %llu\n", rc, rc == 0 ? (unsigned long long)l.token : 0ull);
        if (rc == 0)
            rc = vigil_etcd_release(e, &l);
        _exit(rc == 0 ? 0 : 1);
    }
    b.fd = fb[0];
    close(fb[1]);
    vigil_etcd *e = et_connect(url);
    bool queued = b.pid > 0 && VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    vigil_etcd_close(e);
    int down = queued ? et_script("pause", state, "TERM") : -1;
    kill(a.pid, SIGKILL); /* the holder dies while etcd is away */
    vt_wait(a.pid, 5000);
    close(a.fd);
    bool early = vt_read_until(&b, "\n", 3 * TTL); /* the outage: 3 x TTL */
    int up = et_script("resume", state, NULL);
    uint64_t t0 = vt_now_ms();
    bool got = early || vt_read_until(&b, "\n", 20000);
    uint64_t took = vt_now_ms() - t0;
    int st = b.pid > 0 ? vt_wait(b.pid, 10000) : -1;
    close(b.fd);
    unsigned long long ta = 0, tb = 0;
    int rc = -1;
    sscanf(a.buf, "held %*d %llu", &ta);
    EXPECT(held, "the holder did not get the key: '%s'", a.buf);
    EXPECT(queued, "the waiter never queued");
    EXPECT(down == 0 && up == 0, "etcd_server.sh pause / resume exited %d / %d", down, up);
    EXPECT(!early, "the waiter gave up while etcd was away: '%s'", b.buf);
    EXPECT(got && sscanf(b.buf, "got %d %llu", &rc, &tb) == 2 && rc == 0 && tb > ta,
           "after an outage of 3 x TTL the waiter did not end holding the key: '%s'", b.buf);
    EXPECT(st == 0, "the waiter exited %d", st);
    printf("outage of %d ms under a waiter (TTL %d ms, no deadline): held the key %llu ms after etcd came back\n",
           3 * TTL, TTL, (unsigned long long)took);
    return 0;
}

VT_MAIN(VT_CASE(test_restart_term), VT_CASE(test_restart_kill), VT_CASE(test_frozen_holder),
        VT_CASE(test_frozen_server), VT_CASE(test_frozen_server_keepalive_lost), VT_CASE(test_wait_through_outage))
