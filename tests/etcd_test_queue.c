/* SPDX-License-Identifier: MIT */
/*
 * Description: KEY held as etcd's concurrency package holds it (KEY/<lease
 * hex>, lowest create_revision), against the fixture's real etcd: get of
 * a vacant, held, released and lapsed key; a refused acquire leaving no
 * waiter key; acquire_wait timing out (and leaving nothing), woken by a
 * release, in order along a queue with a waiter leaving from its middle,
 * retaking a place deleted under it, and sending nothing to etcd while
 * nothing changes (etcd's own request counters); and, against the real
 * etcdctl, vigil and `etcdctl lock` excluding each other both ways,
 * `etcdctl elect -l` printing a vigil holder's owner, acquire_wait woken by
 * etcdctl's release and by an etcdctl elect leader resigning, and tokens
 * rising at every hand-over between them. Second in line (etcd_wait.c,
 * SECOND IN LINE; model/etcd_queue.pml): the holder killed (kill -9) and
 * the waiter returning on the deletion with no request after it; the
 * waiter stopped (SIGSTOP, at its watch's first word) past its lease after
 * the holder left, taking a new place rather than its lapsed one; a
 * compaction under its watch; its key deleted by an operator while it
 * watches (wait_place_deleted), or between its look and its watch
 * (second_deleted_before_watch); and its key made again on its live lease
 * at a new create revision (second_recreated), its token never the old one.
 */
#include "etcd_testutil.h"

#include <pthread.h>
#include <stdatomic.h>

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

/* The etcd key of the waiter that is not `not_id` under KEY/ (for an
 * operator's delete), or "" . */
static const char *other_key(vigil_etcd *e, const char *key, int64_t not_id)
{
    static char out[256];
    char k[200], pfx[300], end[300], body[700];
    long http;
    const char *reply;
    size_t len;
    int n = snprintf(k, sizeof(k), "%s/", key);
    vigil_etcd__b64(k, (size_t)n, pfx, sizeof(pfx));
    k[n - 1] = '0';
    vigil_etcd__b64(k, (size_t)n, end, sizeof(end));
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\",\"keys_only\":true}", pfx, end);
    out[0] = '\0';
    if (vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len) < 0 || http != 200)
        return out;
    char mine[200], mb[300];
    vigil_etcd__own_key(key, not_id, mine, sizeof(mine));
    vigil_etcd__b64(mine, strlen(mine), mb, sizeof(mb));
    for (const char *p = reply; (p = strstr(p, "\"key\":\"")); p += 7) {
        const char *q = p + 7;
        size_t l = strcspn(q, "\"");
        if (l < sizeof(out) && !(strlen(mb) == l && strncmp(q, mb, l) == 0)) {
            memcpy(out, q, l);
            out[l] = '\0';
            break;
        }
    }
    return out;
}

static int delete_b64(vigil_etcd *e, const char *kb)
{
    char body[400];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", kb);
    int rc = vigil_etcd__request(e, "v3/kv/deleterange", body, &http, &reply, &len);
    return rc < 0 ? rc : http == 200 ? 0 : -EIO;
}

/* ---- a waiter in a thread ----------------------------------------------------- */

struct waiter {
    pthread_t        th;
    const char      *key, *owner;
    uint64_t         ttl_ms, timeout_ns;
    vigil_lease      lease;
    _Atomic int      done;
    int              rc;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    vigil_etcd *e = et_connect(url);
    w->rc = vigil_etcd_acquire_wait(e, w->key, w->owner, w->ttl_ms, w->timeout_ns, &w->lease);
    atomic_store(&w->done, 1);
    /* The lease stays held until the test releases it through its own handle. */
    vigil_etcd_close(e);
    return NULL;
}

static void waiter_start_ttl(struct waiter *w, const char *key, const char *owner, uint64_t timeout_ms,
                             uint64_t ttl_ms)
{
    memset(w, 0, sizeof(*w));
    w->key = key;
    w->owner = owner;
    w->ttl_ms = ttl_ms;
    w->timeout_ns = timeout_ms * 1000000ull;
    pthread_create(&w->th, NULL, waiter_main, w);
}

static void waiter_start(struct waiter *w, const char *key, const char *owner, uint64_t timeout_ms)
{
    waiter_start_ttl(w, key, owner, timeout_ms, 3000);
}

/* Joins the waiter once done, waiting at most timeout_ms; false if it is
 * still waiting then (the caller's test fails, the thread is left). */
static bool waiter_join(struct waiter *w, unsigned timeout_ms)
{
    if (!VT_WAIT_FOR(atomic_load(&w->done), timeout_ms))
        return false;
    pthread_join(w->th, NULL);
    return true;
}

/* Is KEY held by owner with token, as etcd says now? 0, or 1 (said why). */
static int expect_holder(vigil_etcd *e, const char *key, const char *owner, uint64_t token)
{
    vigil_lease_info info;
    EXPECT_RC(vigil_etcd_get(e, key, &info), 0);
    EXPECT(strcmp(info.owner, owner) == 0 && info.token == token, "holder %s token %llu, expected %s %llu", info.owner,
           (unsigned long long)info.token, owner, (unsigned long long)token);
    return 0;
}

/* ---- get ------------------------------------------------------------------ */

static int test_get(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("get");
    vigil_lease_info info;
    memset(&info, 0x5a, sizeof(info));
    EXPECT_RC(vigil_etcd_get(e, key, &info), VIGIL_EVACANT);
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, "getter", 3000, &l), 0);
    EXPECT_RC(vigil_etcd_get(e, key, &info), 0);
    EXPECT(strcmp(info.key, key) == 0 && strcmp(info.owner, "getter") == 0 && info.token == l.token &&
           info.ttl_ms == l.ttl_ms && info.expires_in_ms > 0 && info.expires_in_ms <= (int64_t)l.ttl_ms &&
           info.state == VIGIL_LEASE_HELD,
           "get: key %s owner %s token %llu (lease's %llu) ttl %llu (%llu) left %lld state %u", info.key, info.owner,
           (unsigned long long)info.token, (unsigned long long)l.token, (unsigned long long)info.ttl_ms,
           (unsigned long long)l.ttl_ms, (long long)info.expires_in_ms, info.state);
    /* A waiter's key behind the holder changes nothing. */
    vigil_lease busy;
    EXPECT_RC(vigil_etcd_acquire(e, key, "other", 3000, &busy), VIGIL_EBUSY);
    EXPECT(et_count_under(e, key) == 1, "a refused acquire left a waiter key (%d keys under it)", et_count_under(e, key));
    EXPECT_RC(vigil_etcd_get(e, key, &info), 0);
    EXPECT(strcmp(info.owner, "getter") == 0, "get after a refused acquire: owner %s", info.owner);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    EXPECT_RC(vigil_etcd_get(e, key, &info), VIGIL_EVACANT);
    /* Lapsed: nobody renews, the lease expires, the key is vacant. */
    EXPECT_RC(vigil_etcd_acquire(e, key, "idle", 1000, &l), 0);
    bool vacant = VT_WAIT_FOR(vigil_etcd_get(e, key, &info) == VIGIL_EVACANT, l.ttl_ms * 3 + 5000);
    EXPECT(vacant, "get still saw a holder %llu ms after a lease of %llu ms lapsed",
           (unsigned long long)(l.ttl_ms * 3 + 5000), (unsigned long long)l.ttl_ms);
    EXPECT_RC(vigil_etcd_get(e, "", &info), VIGIL_ERANGE);
    EXPECT_RC(vigil_etcd_get(NULL, key, &info), -EINVAL);
    vigil_etcd_close(e);
    return 0;
}

/* ---- acquire_wait -------------------------------------------------------------- */

static int test_wait_timeout(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("timeout");
    vigil_lease l, w;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 5000, &l), 0);
    EXPECT_RC(vigil_etcd_acquire_wait(e, key, "w", 3000, 0, &w), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_etcd_acquire_wait(e, key, "w", 3000, 300 * 1000000ull, &w), VIGIL_ETIMEDOUT);
    EXPECT(et_count_under(e, key) == 1, "a timed-out waiter left its key (%d keys)", et_count_under(e, key));
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    /* Free: at once, whatever the timeout. */
    EXPECT_RC(vigil_etcd_acquire_wait(e, key, "w", 3000, 0, &w), 0);
    EXPECT(w.token > l.token && strcmp(w.owner, "w") == 0 && strcmp(w.key, key) == 0,
           "token %llu after %llu, owner %s", (unsigned long long)w.token, (unsigned long long)l.token, w.owner);
    EXPECT_RC(vigil_etcd_renew(e, &w), 0);
    EXPECT_RC(vigil_etcd_release(e, &w), 0);
    EXPECT_RC(vigil_etcd_acquire_wait(e, "", "w", 3000, 0, &w), VIGIL_ERANGE);
    vigil_etcd_close(e);
    return 0;
}

/* A waiter sleeps on its watch: while nothing changes under the key, etcd
 * serves no read and no new watch for it, and no txn but the one look a
 * renewal makes (every 0.32 TTL: the re-check that does not trust the
 * watch alone); a release wakes it, with a greater token. */
static int test_wait_woken(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("woken");
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 6000, &l), 0);
    static const char *const watch[] = { "Watch", NULL }, *const kv[] = { "Range", "Watch", NULL },
                             *const txn[] = { "Txn", NULL };
    long long w0 = et_grpc_started(e, watch);
    struct waiter w;
    waiter_start(&w, key, "waiter", 30000);
    /* Queued, looked, and watching: from then on it only listens. */
    bool queued = VT_WAIT_FOR(et_grpc_started(e, watch) > w0, 10000) && et_count_under(e, key) == 2;
    long long before = et_grpc_started(e, kv), t_before = et_grpc_started(e, txn);
    uint64_t t0 = vt_now_ms();
    vt_sleep_ms(1500); /* an idle stretch: a poller would ask within it */
    long long after = et_grpc_started(e, kv), t_after = et_grpc_started(e, txn);
    long long looks_max = (long long)((vt_now_ms() - t0) / 960 + 1); /* one a renewal of a 3 s TTL */
    int early = atomic_load(&w.done);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    bool joined = waiter_join(&w, 15000);
    EXPECT(queued, "the waiter's key never appeared under %s", key);
    EXPECT(!early, "acquire_wait returned %d while the key was held", w.rc);
    EXPECT(before >= 0 && after == before,
           "etcd served %lld reads or watches while the waiter waited and nothing changed", after - before);
    EXPECT(t_before >= 0 && t_after - t_before <= looks_max,
           "etcd served %lld txns while the waiter waited and nothing changed (one a renewal: at most %lld)",
           t_after - t_before, looks_max);
    EXPECT(joined, "acquire_wait did not return within 15 s of the release");
    EXPECT_RC(w.rc, 0);
    EXPECT(w.lease.token > l.token, "waiter's token %llu not above the holder's %llu",
           (unsigned long long)w.lease.token, (unsigned long long)l.token);
    EXPECT_RC(vigil_etcd_renew(e, &w.lease), 0);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A queue: holder A, waiters B (who gives up) and C. A's release passes
 * over B's left place to C; tokens rise. */
static int test_wait_queue(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("queue");
    vigil_lease a;
    EXPECT_RC(vigil_etcd_acquire(e, key, "A", 6000, &a), 0);
    static const char *const watch[] = { "Watch", NULL };
    long long w0 = et_grpc_started(e, watch);
    struct waiter b, c;
    waiter_start(&b, key, "B", 1500);
    bool b_in = VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    waiter_start(&c, key, "C", 30000);
    bool c_in = VT_WAIT_FOR(et_count_under(e, key) == 3 && et_grpc_started(e, watch) >= w0 + 2, 10000);
    bool b_out = waiter_join(&b, 15000);
    /* B's leaving is no turn of C's: C looks again and watches anew (a
     * third watch), behind A, unless it wrongly returned. */
    (void)VT_WAIT_FOR(et_grpc_started(e, watch) >= w0 + 3 || atomic_load(&c.done), 10000);
    bool c_early = atomic_load(&c.done);
    EXPECT(b_in && c_in, "the waiters' keys did not appear (%d keys)", et_count_under(e, key));
    EXPECT(b_out, "B did not give up within 15 s of its 1.5 s timeout");
    EXPECT_RC(b.rc, VIGIL_ETIMEDOUT);
    EXPECT(!c_early, "C returned %d while A held the key", c.rc);
    EXPECT(et_count_under(e, key) == 2, "B left its key (%d keys)", et_count_under(e, key));
    EXPECT_RC(vigil_etcd_release(e, &a), 0);
    EXPECT(waiter_join(&c, 15000), "C did not get the key within 15 s of A's release");
    EXPECT_RC(c.rc, 0);
    EXPECT(c.lease.token > a.token, "C's token %llu not above A's %llu", (unsigned long long)c.lease.token,
           (unsigned long long)a.token);
    EXPECT(expect_holder(e, key, "C", c.lease.token) == 0, "etcd names another holder (above)");
    EXPECT_RC(vigil_etcd_release(e, &c.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* An operator deletes a waiter's key: it takes a new place and still gets
 * the key once the holder leaves. */
static int test_wait_place_deleted(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("deleted");
    vigil_lease a;
    EXPECT_RC(vigil_etcd_acquire(e, key, "A", 6000, &a), 0);
    static const char *const watch[] = { "Watch", NULL };
    long long w0 = et_grpc_started(e, watch);
    struct waiter b;
    waiter_start(&b, key, "B", 30000);
    /* Deleted while B watches (not before its look, which would see it). */
    bool in = VT_WAIT_FOR(et_grpc_started(e, watch) > w0 && et_count_under(e, key) == 2, 10000);
    const char *bk = other_key(e, key, a.id);
    int del = bk[0] ? delete_b64(e, bk) : -ENOENT;
    EXPECT_RC(vigil_etcd_release(e, &a), 0);
    bool joined = waiter_join(&b, 15000);
    EXPECT(in, "B's key never appeared");
    EXPECT_RC(del, 0);
    EXPECT(joined, "B did not get the key within 15 s of A's release");
    EXPECT_RC(b.rc, 0);
    EXPECT(b.lease.token > a.token, "B's token %llu not above A's %llu", (unsigned long long)b.lease.token,
           (unsigned long long)a.token);
    /* Its key, not the deleted one: B, second in line, watched its own
     * key too (etcd_wait.c, SECOND IN LINE). */
    EXPECT(expect_holder(e, key, "B", b.lease.token) == 0, "etcd names another holder (above)");
    EXPECT_RC(vigil_etcd_release(e, &b.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* ---- second in line: the holder's deletion decides ------------------------------ */

/* A waiter in a child of its own (to be stopped): it reports its
 * acquire_wait's outcome, and a renewal of the lease it got, on a pipe. */
struct kid_report {
    int         rc, renew_rc;
    vigil_lease lease;
};

/* In the child: stops itself (SIGSTOP) once, when its first watch says its
 * first word, so that the test decides the moment (etcd has the watch). */
static void stop_when_heard(const char *step)
{
    static int stopped;
    if (strcmp(step, "heard") == 0 && !stopped++)
        raise(SIGSTOP);
}

static pid_t kid_waiter(const char *key, const char *owner, uint64_t ttl_ms, int *fd)
{
    pid_t kid = et_fork_reporter(fd);
    if (kid == 0) {
        vt_own_pgrp();
        vigil_etcd__wait_test_hook = stop_when_heard;
        vigil_etcd *ce = et_connect(url);
        struct kid_report r = { 0 };
        r.rc = vigil_etcd_acquire_wait(ce, key, owner, ttl_ms, 60000 * 1000000ull, &r.lease);
        r.renew_rc = r.rc == 0 ? vigil_etcd_renew(ce, &r.lease) : r.rc;
        _exit(write(*fd, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 3);
    }
    return kid;
}

static const char *const second_watch[] = { "Watch", NULL }, *const second_asks[] = { "Txn", "Range", NULL },
                         *const second_keep[] = { "LeaseKeepAlive", NULL };

/* The holder, a process of its own, is killed (kill -9): its lease lapses
 * and the waiter second in line returns on that deletion, seen by its
 * watch, with no request after it: etcd serves no txn, read or keepalive
 * between the kill and the waiter's return (before issue 28 it renewed
 * and looked: a keepalive and a txn). Its key is the holder's now. */
static int test_second_holder_killed(void)
{
    NEED_ETCD();
    const char *key = et_key("second-kill");
    vigil_lease dead;
    pid_t kid = et_kid_holder(url, key, "doomed", 2000, &dead);
    EXPECT(kid >= 0, "fork: %s", strerror(errno));
    bool held = dead.token > 0;
    vigil_etcd *e = et_connect(url);
    long long w0 = et_grpc_started(e, second_watch);
    struct waiter w;
    /* A TTL of 90 s: the waiter's own renewal is not due for 28.8 s. */
    waiter_start_ttl(&w, key, "heir", 60000, 90000);
    bool queued = held && VT_WAIT_FOR(et_grpc_started(e, second_watch) > w0 && et_count_under(e, key) == 2, 10000);
    long long asks0 = et_grpc_started(e, second_asks), keep0 = et_grpc_started(e, second_keep);
    kill(kid, SIGKILL);
    int st = vt_wait(kid, 5000);
    bool joined = waiter_join(&w, 30000);
    long long asks1 = et_grpc_started(e, second_asks), keep1 = et_grpc_started(e, second_keep);
    EXPECT(held, "the holder's child did not acquire %s", key);
    EXPECT(st == 128 + SIGKILL, "expected the holder killed by SIGKILL, status %d", st);
    EXPECT(queued, "the waiter never queued and watched (%d keys)", et_count_under(e, key));
    EXPECT(joined, "the waiter did not get the key within 30 s of the holder's kill (TTL %llu ms)",
           (unsigned long long)dead.ttl_ms);
    EXPECT_RC(w.rc, 0);
    EXPECT(w.lease.token > dead.token, "the waiter's token %llu not above the dead holder's %llu",
           (unsigned long long)w.lease.token, (unsigned long long)dead.token);
    EXPECT(asks0 >= 0 && keep0 >= 0 && asks1 == asks0 && keep1 == keep0,
           "etcd served %lld txns or reads and %lld keepalives from the kill to the waiter's return, expected none",
           asks1 - asks0, keep1 - keep0);
    EXPECT(expect_holder(e, key, "heir", w.lease.token) == 0, "etcd names another holder (above)");
    EXPECT_RC(vigil_etcd_renew(e, &w.lease), 0);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* The waiter second in line stops itself (SIGSTOP) once its watch is
 * registered (the hook at "heard"); the holder releases, so
 * that the waiter's key holds KEY, and then the waiter's lease lapses
 * while it is still stopped. Continued, it finds the holder's deletion on
 * its watch, but its renewal is long overdue: it does not trust the event,
 * renews, is refused, and takes a new place (the key is free: at once).
 * It returns a lease that renews, with a token above the lapsed key's;
 * never the lapsed one. */
static int test_second_waiter_stopped(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("second-stop");
    vigil_lease h;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 60000, &h), 0);
    long long w0 = et_grpc_started(e, second_watch);
    int fd = -1, ws = 0;
    pid_t kid = kid_waiter(key, "stopped", 2000, &fd);
    EXPECT(kid > 0, "fork: %s", strerror(errno));
    bool queued = VT_WAIT_FOR(waitpid(kid, &ws, WNOHANG | WUNTRACED) == kid, 10000) && WIFSTOPPED(ws) &&
                  et_grpc_started(e, second_watch) > w0 && et_count_under(e, key) == 2;
    int rel = vigil_etcd_release(e, &h);
    vigil_lease_info lapsing = { 0 };
    int g = vigil_etcd_get(e, key, &lapsing); /* the stopped waiter's key, holding KEY now */
    bool lapsed = VT_WAIT_FOR(et_count_under(e, key) == 0, 20000);
    kill(kid, SIGCONT);
    struct kid_report r = { 0 };
    bool told = et_read_bounded(fd, &r, sizeof(r), 30000);
    close(fd);
    int st = vt_wait(kid, 10000);
    EXPECT(queued, "the waiter never stopped with its watch registered (%d keys)", et_count_under(e, key));
    EXPECT_RC(rel, 0);
    EXPECT_RC(g, 0);
    EXPECT(strcmp(lapsing.owner, "stopped") == 0, "after the release the holder is %s, not the waiter", lapsing.owner);
    EXPECT(lapsed, "the stopped waiter's key did not lapse within 20 s (TTL 2 s)");
    EXPECT(told && st == 0, "the waiter did not report (exit status %d)", st);
    EXPECT_RC(r.rc, 0);
    EXPECT_RC(r.renew_rc, 0);
    EXPECT(r.lease.token > lapsing.token, "the waiter returned token %llu, its lapsed key's was %llu",
           (unsigned long long)r.lease.token, (unsigned long long)lapsing.token);
    EXPECT(expect_holder(e, key, "stopped", r.lease.token) == 0, "etcd names another holder (above)");
    EXPECT_RC(vigil_etcd_release(e, &r.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A compaction under a waiting watch: the waiter second in line has
 * looked (at revision L) and is about to watch from L + 1 when etcd
 * compacts past it (a hook at "looked"). The watch is cancelled at once
 * (compact_revision); the waiter looks again and watches anew, and gets
 * the key at the holder's release, its own key, its token. */
static _Atomic int compact_step; /* 1 armed, 2 the waiter looked and waits, 3 compacted */

static long long put_rev(vigil_etcd *e, const char *kb)
{
    char body[400];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"eA==\"}", kb);
    if (vigil_etcd__request(e, "v3/kv/put", body, &http, &reply, &len) < 0 || http != 200)
        return -1;
    const char *p = strstr(reply, "\"revision\":\"");
    return p ? atoll(p + 12) : -1;
}

/* Two writes after the look, then etcd compacted up to the second: the
 * watch's L + 1 is below it. 0, or -1. */
static int compact_now(vigil_etcd *e)
{
    char kb[300], body[200];
    long http;
    const char *reply;
    size_t len;
    vigil_etcd__b64("second-compact-scratch", 22, kb, sizeof(kb));
    long long rev = put_rev(e, kb);
    if (rev > 0)
        rev = put_rev(e, kb);
    snprintf(body, sizeof(body), "{\"revision\":\"%lld\",\"physical\":true}", rev);
    return rev > 0 && vigil_etcd__request(e, "v3/kv/compaction", body, &http, &reply, &len) == 0 && http == 200
               ? 0
               : -1;
}

/* The waiter's thread at "looked": held there (bounded) while the test's
 * own thread compacts. */
static void compact_at_look(const char *step)
{
    int armed = 1;
    if (strcmp(step, "looked") != 0 || !atomic_compare_exchange_strong(&compact_step, &armed, 2))
        return;
    (void)VT_WAIT_FOR(atomic_load(&compact_step) == 3, 10000);
}

static int test_second_compacted(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("second-compact");
    vigil_lease h;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 60000, &h), 0);
    long long w0 = et_grpc_started(e, second_watch);
    atomic_store(&compact_step, 1);
    vigil_etcd__wait_test_hook = compact_at_look;
    struct waiter w;
    waiter_start_ttl(&w, key, "after", 60000, 60000);
    bool looked = VT_WAIT_FOR(atomic_load(&compact_step) == 2, 10000);
    int compacted = looked ? compact_now(e) : -1;
    atomic_store(&compact_step, 3);
    /* Two watches: the one compacted away, and the one after the look again. */
    bool watching = VT_WAIT_FOR(et_grpc_started(e, second_watch) >= w0 + 2 && et_count_under(e, key) == 2, 15000);
    int early = atomic_load(&w.done);
    EXPECT_RC(vigil_etcd_release(e, &h), 0);
    bool joined = waiter_join(&w, 30000);
    vigil_etcd__wait_test_hook = NULL;
    EXPECT(looked, "the waiter never looked");
    EXPECT(compacted == 0, "the compaction failed");
    EXPECT(watching, "the waiter did not watch again after the compaction (%lld watches)",
           et_grpc_started(e, second_watch) - w0);
    EXPECT(!early, "the waiter returned %d while the key was held", w.rc);
    EXPECT(joined, "the waiter did not get the key within 30 s of the release");
    EXPECT_RC(w.rc, 0);
    EXPECT(w.lease.token > h.token, "token %llu not above the holder's %llu", (unsigned long long)w.lease.token,
           (unsigned long long)h.token);
    EXPECT(expect_holder(e, key, "after", w.lease.token) == 0, "etcd names another holder (above)");
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* The waiter's thread held at its first "looked" while the test's own
 * thread acts (gap_step: 1 armed, 2 held there, 3 let go). */
static _Atomic int gap_step;

static void hold_at_look(const char *step)
{
    int armed = 1;
    if (strcmp(step, "looked") != 0 || !atomic_compare_exchange_strong(&gap_step, &armed, 2))
        return;
    (void)VT_WAIT_FOR(atomic_load(&gap_step) == 3, 10000);
}

/* The waiter second in line has looked (at revision L) and not yet asked
 * for its watch (the hook at "looked") when an operator deletes its key;
 * then, its watch registered in etcd, the holder releases. The watch,
 * from L + 1, carries the deletion of its key before the holder's: the
 * waiter looks, finds its place lost, takes a new one, and returns the
 * key with etcd's holder token (a watch from its own creation would have
 * missed the deletion and returned on the holder's, holding nothing:
 * model run from_now, mutant second_watch_from_now). */
static int test_second_deleted_before_watch(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("second-gap");
    vigil_lease h;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 60000, &h), 0);
    atomic_store(&gap_step, 1);
    vigil_etcd__wait_test_hook = hold_at_look;
    struct waiter w;
    waiter_start_ttl(&w, key, "gap", 60000, 60000);
    bool looked = VT_WAIT_FOR(atomic_load(&gap_step) == 2, 10000);
    long long n0 = et_metric(e, "etcd_debugging_mvcc_watcher_total");
    int del = looked ? delete_b64(e, other_key(e, key, h.id)) : -1;
    atomic_store(&gap_step, 3);
    bool watching = n0 >= 0 && VT_WAIT_FOR(et_metric(e, "etcd_debugging_mvcc_watcher_total") > n0, 10000);
    int rel = vigil_etcd_release(e, &h);
    bool joined = waiter_join(&w, 30000);
    vigil_etcd__wait_test_hook = NULL;
    EXPECT(looked, "the waiter never looked");
    EXPECT_RC(del, 0);
    EXPECT(watching, "etcd never registered the waiter's watch (%lld watchers before)", n0);
    EXPECT_RC(rel, 0);
    EXPECT(joined, "the waiter did not get the key within 30 s of the release");
    EXPECT_RC(w.rc, 0);
    EXPECT(expect_holder(e, key, "gap", w.lease.token) == 0, "the waiter returned holding nothing (above)");
    EXPECT_RC(vigil_etcd_renew(e, &w.lease), 0);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* The waiter second in line, held after a look (the hook at "looked"):
 * its key deleted by an operator, then made again under the same name on
 * the waiter's live lease (as a late copy of its acquire txn would), at a
 * new create revision; then the holder releases. Its watch carries both:
 * it looks again after the put, and must not return its old token: the
 * look's compare on the create revision finds its place lost, and it
 * returns the key with the token etcd's holder has (model run recreated,
 * mutant second_look_any_crev). */
static int test_second_recreated(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("second-recreated");
    vigil_lease h;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 60000, &h), 0);
    atomic_store(&gap_step, 1);
    vigil_etcd__wait_test_hook = hold_at_look;
    struct waiter w;
    waiter_start_ttl(&w, key, "again", 60000, 60000);
    bool looked = VT_WAIT_FOR(atomic_load(&gap_step) == 2, 10000);
    char kb[256], name[200];
    snprintf(kb, sizeof(kb), "%s", other_key(e, key, h.id));
    int n = vigil_etcd__unb64(kb, strlen(kb), name, sizeof(name) - 1);
    name[n > 0 ? n : 0] = '\0';
    const char *hex = strrchr(name, '/');
    int64_t wid = hex ? (int64_t)strtoull(hex + 1, NULL, 16) : 0;
    int del = delete_b64(e, kb);
    char body[600];
    long http = 0;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"YWdhaW4=\",\"lease\":\"%lld\"}", kb, (long long)wid);
    int put = vigil_etcd__request(e, "v3/kv/put", body, &http, &reply, &len);
    atomic_store(&gap_step, 3);
    int rel = vigil_etcd_release(e, &h);
    bool joined = waiter_join(&w, 30000);
    vigil_etcd__wait_test_hook = NULL;
    EXPECT(looked, "the waiter never looked");
    EXPECT(wid > 0, "no lease id in the waiter's key %s", name);
    EXPECT_RC(del, 0);
    EXPECT(put == 0 && http == 200, "the put again: %d, HTTP %ld", put, http);
    EXPECT_RC(rel, 0);
    EXPECT(joined, "the waiter did not get the key within 30 s of the release");
    EXPECT_RC(w.rc, 0);
    EXPECT(expect_holder(e, key, "again", w.lease.token) == 0,
           "the waiter's token is not its key's create revision (above)");
    EXPECT_RC(vigil_etcd_renew(e, &w.lease), 0);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* ---- with etcdctl ------------------------------------------------------------- */

/* vigil holds: `etcdctl lock` waits; vigil releases: etcdctl gets it, and
 * then vigil is refused; etcdctl unlocks (SIGTERM): vigil gets it. */
static int test_etcdctl_lock_excludes(void)
{
    NEED_ETCD();
    NEED_ETCDCTL();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("ctl-lock");
    char name[200];
    snprintf(name, sizeof(name), "%s/", key);
    vigil_lease l, l2, probe;
    EXPECT_RC(vigil_etcd_acquire(e, key, "vigil", 5000, &l), 0);
    struct vt_proc ctl;
    EXPECT(ET_CTL(&ctl, url, "lock", key) == 0, "spawning etcdctl lock failed");
    bool waiting = VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    bool early = vt_read_until(&ctl, name, 1000); /* must not: vigil holds it */
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    bool got = vt_read_until(&ctl, name, 15000);
    vigil_lease_info info;
    int g = vigil_etcd_get(e, key, &info);
    int busy = vigil_etcd_acquire(e, key, "vigil", 5000, &probe);
    int st = vt_stop(&ctl, SIGTERM, 10000);
    int again = vigil_etcd_acquire(e, key, "vigil", 5000, &l2);
    EXPECT(waiting, "etcdctl lock's key never appeared under %s", key);
    EXPECT(!early, "etcdctl lock took %s while vigil held it: %s", key, ctl.buf);
    EXPECT(got, "etcdctl lock did not get %s within 15 s of vigil's release (printed '%s')", key, ctl.buf);
    EXPECT_RC(g, 0);
    EXPECT(info.owner[0] == '\0' && info.token > l.token, "get of etcdctl's lock: owner '%s' token %llu after %llu",
           info.owner, (unsigned long long)info.token, (unsigned long long)l.token);
    EXPECT_RC(busy, VIGIL_EBUSY);
    EXPECT(st == 0, "etcdctl lock exited %d on SIGTERM", st);
    EXPECT_RC(again, 0);
    EXPECT(l2.token > info.token, "vigil's token %llu not above etcdctl's %llu", (unsigned long long)l2.token,
           (unsigned long long)info.token);
    EXPECT_RC(vigil_etcd_release(e, &l2), 0);
    vigil_etcd_close(e);
    return 0;
}

/* etcdctl holds the lock: acquire_wait waits, and etcdctl's release wakes
 * it, with a greater token. */
static int test_etcdctl_release_wakes(void)
{
    NEED_ETCD();
    NEED_ETCDCTL();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("ctl-wake");
    char name[200];
    snprintf(name, sizeof(name), "%s/", key);
    struct vt_proc ctl;
    EXPECT(ET_CTL(&ctl, url, "lock", key) == 0, "spawning etcdctl lock failed");
    bool got = vt_read_until(&ctl, name, 15000);
    vigil_lease_info info;
    int g = vigil_etcd_get(e, key, &info);
    struct waiter w;
    waiter_start(&w, key, "vigil", 30000);
    bool queued = VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    vt_sleep_ms(300);
    int early = atomic_load(&w.done);
    int st = vt_stop(&ctl, SIGTERM, 10000);
    bool joined = waiter_join(&w, 15000);
    EXPECT(got, "etcdctl lock did not get a free key (printed '%s')", ctl.buf);
    EXPECT_RC(g, 0);
    EXPECT(queued, "vigil's waiter key never appeared");
    EXPECT(!early, "acquire_wait returned %d while etcdctl held the lock", w.rc);
    EXPECT(st == 0, "etcdctl lock exited %d on SIGTERM", st);
    EXPECT(joined, "acquire_wait was not woken within 15 s of etcdctl's release");
    EXPECT_RC(w.rc, 0);
    EXPECT(w.lease.token > info.token, "vigil's token %llu not above etcdctl's %llu",
           (unsigned long long)w.lease.token, (unsigned long long)info.token);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

/* Elections: `etcdctl elect -l` shows vigil's leader; an etcdctl candidate
 * waits behind it and leads once vigil resigns; vigil waits behind that
 * leader and leads once it resigns. Tokens (terms) rise throughout. */
static int test_etcdctl_elect(void)
{
    NEED_ETCD();
    NEED_ETCDCTL();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("ctl-elect");
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, "vigil-leader-1", 5000, &l), 0);
    struct vt_proc obs, cand;
    EXPECT(ET_CTL(&obs, url, "elect", "-l", key) == 0, "spawning etcdctl elect -l failed");
    bool shown = vt_read_until(&obs, "vigil-leader-1", 15000);
    vt_stop(&obs, SIGTERM, 10000);
    EXPECT(shown, "etcdctl elect -l did not print vigil's owner; it printed '%s'", obs.buf);
    char own[200];
    vigil_etcd__own_key(key, l.id, own, sizeof(own));
    EXPECT(strstr(obs.buf, own), "etcdctl elect -l named %s, not vigil's key %s", obs.buf, own);

    EXPECT(ET_CTL(&cand, url, "elect", key, "ctl-leader") == 0, "spawning etcdctl elect failed");
    bool queued = VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    bool early = vt_read_until(&cand, "ctl-leader", 1000);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    bool leads = vt_read_until(&cand, "ctl-leader", 15000);
    vigil_lease_info info;
    int g = vigil_etcd_get(e, key, &info);
    struct waiter w;
    waiter_start(&w, key, "vigil-leader-2", 30000);
    bool w_in = VT_WAIT_FOR(et_count_under(e, key) == 2, 10000);
    int w_early = atomic_load(&w.done);
    int st = vt_stop(&cand, SIGTERM, 10000);
    bool joined = waiter_join(&w, 15000);
    EXPECT(queued && !early, "etcdctl elect led while vigil held %s: '%s'", key, cand.buf);
    EXPECT(leads, "etcdctl elect did not lead within 15 s of vigil's resignation: '%s'", cand.buf);
    EXPECT_RC(g, 0);
    EXPECT(strcmp(info.owner, "ctl-leader") == 0 && info.token > l.token,
           "get of etcdctl's leader: owner '%s' term %llu after %llu", info.owner, (unsigned long long)info.token,
           (unsigned long long)l.token);
    EXPECT(w_in && !w_early, "vigil's campaign returned %d while etcdctl led", w.rc);
    EXPECT(st == 0, "etcdctl elect exited %d on SIGTERM", st);
    EXPECT(joined, "vigil did not lead within 15 s of etcdctl's resignation");
    EXPECT_RC(w.rc, 0);
    EXPECT(w.lease.token > info.token, "vigil's term %llu not above etcdctl's %llu", (unsigned long long)w.lease.token,
           (unsigned long long)info.token);
    EXPECT_RC(vigil_etcd_release(e, &w.lease), 0);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_get), VT_CASE(test_wait_timeout), VT_CASE(test_wait_woken), VT_CASE(test_wait_queue),
        VT_CASE(test_wait_place_deleted), VT_CASE(test_etcdctl_lock_excludes), VT_CASE(test_etcdctl_release_wakes),
        VT_CASE(test_etcdctl_elect), VT_CASE(test_second_holder_killed), VT_CASE(test_second_waiter_stopped),
        VT_CASE(test_second_compacted), VT_CASE(test_second_deleted_before_watch), VT_CASE(test_second_recreated))
