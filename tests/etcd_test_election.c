/* SPDX-License-Identifier: MIT */
/*
 * Description: election parity with etcd's concurrency package, against a
 * real etcd. A session holds several keys on one lease; resign gives one
 * up and keeps the lease (the other keys stay held, a waiter gets the
 * resigned one); proclaim changes the value under the same token, which
 * `etcdctl elect -l` shows; closing the session frees every key; a
 * session whose lease is revoked from outside is lost (its fd turns
 * readable) and acquires nothing more. vigil_etcd_observe reports the
 * holder and every change (vacant, held, proclaimed, handed on) through
 * its fd, an `etcdctl elect` campaign among them.
 */
#include "etcd_testutil.h"

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static vigil_etcd_session *session(vigil_etcd *e, uint64_t ttl_ms)
{
    vigil_etcd_session *s = NULL;
    int rc = vigil_etcd_session_open(e, ttl_ms, &s);
    if (rc < 0) {
        fprintf(stderr, "vigil_etcd_session_open: %s\n", vigil_strerror(rc));
        exit(1);
    }
    return s;
}

static int test_session_keys(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url), *other = et_connect(url);
    vigil_etcd_session *s = session(e, 3000);
    const char *k1 = et_key("sess-1"), *k2 = et_key("sess-2");
    vigil_lease l1, l2, busy;
    vigil_lease_info info;
    EXPECT_RC(vigil_etcd_session_acquire(s, k1, "one", &l1), 0);
    EXPECT_RC(vigil_etcd_session_acquire(s, k2, "two", &l2), 0);
    EXPECT(l1.id == vigil_etcd_session_lease(s) && l2.id == l1.id && l2.token > l1.token && l1.ttl_ms == 3000,
           "session keys: ids %lld %lld (session %lld), tokens %llu %llu, ttl %llu", (long long)l1.id,
           (long long)l2.id, (long long)vigil_etcd_session_lease(s), (unsigned long long)l1.token,
           (unsigned long long)l2.token, (unsigned long long)l1.ttl_ms);
    EXPECT_RC(vigil_etcd_acquire(other, k1, "thief", 2000, &busy), VIGIL_EBUSY);
    EXPECT_RC(vigil_etcd_session_acquire(s, k1, "again", &busy), 0); /* ours already: the same key, as Go's */
    EXPECT(busy.token == l1.token, "re-acquire in the session: token %llu, not %llu", (unsigned long long)busy.token,
           (unsigned long long)l1.token);
    EXPECT_RC(vigil_etcd_renew(e, &l1), 0);
    /* Resign one: the other stays held, the lease lives. */
    EXPECT_RC(vigil_etcd_resign(e, &l1), 0);
    EXPECT_RC(vigil_etcd_get(other, k1, &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd_get(other, k2, &info), 0);
    EXPECT(strcmp(info.owner, "two") == 0, "k2's owner after k1's resign: %s", info.owner);
    /* Again: the key is gone and the lease lives, as after a resign
     * delivered twice (its first copy's answer lost): resigned, 0, as Go's
     * Election.Resign. */
    EXPECT_RC(vigil_etcd_resign(e, &l1), 0);
    EXPECT(!vigil_etcd_session_lost(s), "the session was lost by a resign");
    /* Proclaim: a new value, the same token. */
    EXPECT_RC(vigil_etcd_proclaim(e, &l2, "two-bis"), 0);
    EXPECT(strcmp(l2.owner, "two-bis") == 0, "proclaim did not update the lease's owner: %s", l2.owner);
    EXPECT_RC(vigil_etcd_get(other, k2, &info), 0);
    EXPECT(strcmp(info.owner, "two-bis") == 0 && info.token == l2.token, "after proclaim: owner %s token %llu",
           info.owner, (unsigned long long)info.token);
    if (et_have_etcdctl()) {
        struct vt_proc p;
        EXPECT(ET_CTL(&p, url, "elect", "-l", k2) == 0, "spawning etcdctl failed");
        bool seen = vt_read_until(&p, "two-bis", 10000);
        vt_stop(&p, SIGTERM, 10000);
        EXPECT(seen, "etcdctl elect -l did not show the proclaimed value: '%s'", p.buf);
    }
    EXPECT_RC(vigil_etcd_proclaim(e, &l1, "gone"), VIGIL_ELOST);
    /* Closing the session frees every key in it. */
    EXPECT_RC(vigil_etcd_session_close(s), 0);
    EXPECT_RC(vigil_etcd_get(other, k2, &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd_session_close(NULL), 0);
    vigil_etcd_close(e);
    vigil_etcd_close(other);
    return 0;
}

/* A waiter in another session gets a key its holder resigns, while the
 * holder keeps its lease and its other key. */
static int test_resign_hands_on(void)
{
    NEED_ETCD();
    const char *k = et_key("resign"), *kept = et_key("kept");
    int fds[2], go[2];
    EXPECT(pipe(fds) == 0 && pipe(go) == 0, "pipe");
    /* The waiter is forked before this process has a keepalive thread: a
     * forked copy of a threaded process must not start threads. It waits
     * for the word that the key is held. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(3);
        vigil_etcd *we = et_connect(url);
        vigil_etcd_session *ws = session(we, 3000);
        vigil_lease w;
        int rc = vigil_etcd_session_acquire_wait(ws, k, "second", 20000 * 1000000ull, &w);
        dprintf(fds[1], "got %d %llu\n", rc, (unsigned long long)w.token);
        vigil_etcd_session_close(ws);
        _exit(0);
    }
    close(fds[1]);
    close(go[0]);
    vigil_etcd *e = et_connect(url);
    vigil_etcd_session *s = session(e, 3000);
    vigil_lease l, lk;
    EXPECT_RC(vigil_etcd_session_acquire(s, k, "first", &l), 0);
    EXPECT_RC(vigil_etcd_session_acquire(s, kept, "first", &lk), 0);
    EXPECT(write(go[1], "g", 1) == 1, "the waiter is gone");
    close(go[1]);
    struct vt_proc p = { .pid = pid, .fd = fds[0] };
    bool queued = VT_WAIT_FOR(et_count_under(e, k) == 2, 10000);
    EXPECT_RC(vigil_etcd_resign(e, &l), 0);
    bool got = vt_read_until(&p, "\n", 20000);
    int st = vt_wait(pid, 10000);
    close(p.fd);
    int rc = -1;
    unsigned long long token = 0;
    EXPECT(queued, "the waiter never queued");
    EXPECT(got && sscanf(p.buf, "got %d %llu", &rc, &token) == 2 && rc == 0 && token > l.token,
           "the waiter did not get the resigned key: '%s'", p.buf);
    EXPECT(st == 0, "the waiter exited %d", st);
    EXPECT_RC(vigil_etcd_renew(e, &lk), 0); /* the lease, and the other key, live on */
    EXPECT(!vigil_etcd_session_lost(s), "the holder's session was lost");
    EXPECT_RC(vigil_etcd_session_close(s), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A session whose lease is revoked from outside: the next renewal is
 * refused, the fd turns readable, and it acquires nothing more. */
static int test_session_lost(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url), *other = et_connect(url);
    vigil_etcd_session *s = session(e, 2000);
    vigil_lease l;
    const char *k = et_key("sess-lost");
    EXPECT_RC(vigil_etcd_session_acquire(s, k, "doomed", &l), 0);
    char body[64];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)vigil_etcd_session_lease(s));
    EXPECT_RC(vigil_etcd__request(other, "v3/lease/revoke", body, &http, &reply, &len), 0);
    struct pollfd pf = { vigil_etcd_session_fd(s), POLLIN, 0 };
    int ready = poll(&pf, 1, 10000);
    EXPECT(ready == 1 && vigil_etcd_session_lost(s), "the session was not lost once its lease was revoked");
    EXPECT_RC(vigil_etcd_session_acquire(s, et_key("sess-after"), "x", &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_session_acquire_wait(s, et_key("sess-after"), "x", 1000000000ull, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_session_close(s), VIGIL_ELOST);
    vigil_etcd_close(e);
    vigil_etcd_close(other);
    return 0;
}

/* ---- observe --------------------------------------------------------------- */

/* The next change, through the fd (bounded). */
static int next_change(vigil_etcd_observer *o, vigil_lease_info *info)
{
    struct pollfd pf = { vigil_etcd_observer_fd(o), POLLIN, 0 };
    if (poll(&pf, 1, 15000) != 1)
        return VIGIL_ETIMEDOUT;
    return vigil_etcd_observer_next(o, info, 0);
}

static int test_observe(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url), *oe = et_connect(url);
    const char *k = et_key("observed");
    vigil_etcd_observer *o = NULL;
    vigil_lease_info c[6];
    memset(c, 0, sizeof(c));
    EXPECT_RC(vigil_etcd_observe(oe, k, &o), 0);
    int r0 = next_change(o, &c[0]); /* the start: vacant */
    uint32_t first_state = c[0].state;
    vigil_lease a, b;
    EXPECT_RC(vigil_etcd_acquire(e, k, "alpha", 3000, &a), 0);
    int r1 = next_change(o, &c[1]);
    EXPECT_RC(vigil_etcd_proclaim(e, &a, "alpha-2"), 0);
    int r2 = next_change(o, &c[2]);
    EXPECT_RC(vigil_etcd_release(e, &a), 0);
    int r3 = next_change(o, &c[3]);
    /* etcdctl elect campaigns for the key: observed as any holder. */
    struct vt_proc ctl = { .pid = -1 };
    int r4 = 0, r5 = 0;
    bool elected = false;
    if (et_have_etcdctl() && ET_CTL(&ctl, url, "elect", k, "from-etcdctl") == 0) {
        r4 = next_change(o, &c[4]);
        /* Elected (it says so) before it is stopped: etcdctl resigns on
         * SIGTERM only once its campaign has returned. */
        elected = vt_read_until(&ctl, "from-etcdctl", 15000);
        vt_stop(&ctl, SIGTERM, 10000);
        r5 = next_change(o, &c[5]);
    }
    int more = vigil_etcd_observer_next(o, &c[0], 0); /* nothing more */
    EXPECT_RC(vigil_etcd_acquire(e, k, "beta", 3000, &b), 0);
    vigil_etcd_observer_close(o); /* closed while the key is held */
    EXPECT_RC(vigil_etcd_release(e, &b), 0);
    vigil_etcd_close(e);
    vigil_etcd_close(oe);
    EXPECT(r0 == 0 && first_state == VIGIL_LEASE_VACANT, "first: %d state %u", r0, first_state);
    EXPECT_RC(more, VIGIL_ETIMEDOUT);
    EXPECT(r1 == 0 && c[1].state == VIGIL_LEASE_HELD && strcmp(c[1].owner, "alpha") == 0 && c[1].token == a.token &&
               strcmp(c[1].key, k) == 0,
           "held: %d state %u owner %s token %llu", r1, c[1].state, c[1].owner, (unsigned long long)c[1].token);
    EXPECT(r2 == 0 && strcmp(c[2].owner, "alpha-2") == 0 && c[2].token == a.token,
           "proclaimed: %d owner %s token %llu", r2, c[2].owner, (unsigned long long)c[2].token);
    EXPECT(r3 == 0 && c[3].state == VIGIL_LEASE_VACANT, "released: %d state %u", r3, c[3].state);
    if (ctl.pid != -1) {
        EXPECT(r4 == 0 && strcmp(c[4].owner, "from-etcdctl") == 0 && c[4].token > a.token,
               "etcdctl elect: %d owner %s", r4, c[4].owner);
        EXPECT(elected, "etcdctl elect did not say it was elected: '%s'", ctl.buf);
        EXPECT(r5 == 0 && c[5].state == VIGIL_LEASE_VACANT, "etcdctl resigned: %d state %u", r5, c[5].state);
    }
    vigil_etcd_observer_close(NULL);
    return 0;
}

VT_MAIN(VT_CASE(test_session_keys), VT_CASE(test_resign_hands_on), VT_CASE(test_session_lost),
        VT_CASE(test_observe))
