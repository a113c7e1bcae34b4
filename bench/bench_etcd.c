/* SPDX-License-Identifier: MIT */
/*
 * The etcd adapter's cost per call on loopback etcd, against the bare HTTP
 * round trip of the same connection (GET /version, which etcd answers
 * without touching raft or disk) and a bare keepalive POST, in one run.
 *
 *   renew           = keepalive + a read-only txn proving the key is ours
 *   acquire         = grant + txn (put if create_revision == 0, range)
 *   release         = txn (delete if still ours) + revoke
 *   get             = range (first key under KEY/) + lease timetolive;
 *                     of a vacant key, the range alone
 *   acquire_wait    the wake-up: from the holder's release (its start, and
 *                   its return) to the waiter's acquire_wait returning with
 *                   the key, the waiter having been asleep on its watch
 *                   (etcd's Watch counter moved): the watch event, then a
 *                   keepalive and a look (txn) before it returns
 *
 *   TLS, auth       renew over mutual TLS (a second etcd of our own, started
 *                   with --client-cert-auth by tests/etcd_cluster.sh, its
 *                   certificates made with openssl), then with etcd auth
 *                   on as well (the token on every request), each
 *                   interleaved with renew over plain http, as a ratio;
 *                   and a fresh handle's first request (the TLS handshake)
 *                   beside a plain one's
 *
 *   hung member     a 3-member cluster of our own (tests/etcd_cluster.sh):
 *                   A holds KEY (TTL 3 s) through the leader, the waiter B
 *                   queues with its endpoint list starting at a follower,
 *                   where its watch goes; that follower is SIGSTOPped
 *                   (every thread stopped), A releases: from the release
 *                   to B's acquire_wait returning with the key, beside the
 *                   bound 2 x 0.32 x TTL (issue 19)
 *
 * Starts its own etcd with tests/etcd_server.sh (found next to this source
 * file), or uses VIGIL_ETCD_ENDPOINTS; without etcd it says so and exits 0.
 * Figures are medians (p99 beside them); the ratio to the round trip is
 * the figure to compare, the machine being noisy.
 */
#include "bench.h"

#include <vigil/etcd.h>
#include "recipes_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct stat_ns {
    double p50, p99;
};

static struct stat_ns summarize(uint64_t *s, size_t n)
{
    qsort(s, n, sizeof(*s), cmp_u64);
    struct stat_ns r = { (double)s[n / 2], (double)s[n * 99 / 100] };
    return r;
}

#define WAKE_N 100

/* ---- a second etcd, speaking only mutual TLS ---------------------------------- */

static char tls_script[1024], tls_state[256];

static int run_tls(const char *cmd, const char *arg)
{
    char certs[400];
    snprintf(certs, sizeof(certs), "%s/certs", tls_state);
    return bench_run_sh(tls_script, cmd, tls_state, arg, certs);
}

static void stop_tls(void)
{
    if (tls_state[0]) {
        run_tls("stop", NULL);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tls_state);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_etcd: could not remove %s\n", tls_state);
    }
}

/* The TLS server's endpoint, or NULL (it could not start: the TLS rows are
 * left out). */
static const char *tls_server(char *buf, size_t cap)
{
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(tls_script, sizeof(tls_script), "%.*s%s../tests/etcd_cluster.sh", dir, src, slash ? "/" : "");
    const char *tmp = getenv("TMPDIR");
    snprintf(tls_state, sizeof(tls_state), "%s/vigil-bench-tls.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (access(tls_script, R_OK) != 0 || !mkdtemp(tls_state)) {
        tls_state[0] = '\0';
        return NULL;
    }
    atexit(stop_tls);
    char p[400];
    snprintf(p, sizeof(p), "%s/endpoints", tls_state);
    FILE *f = run_tls("start", "1") == 0 ? fopen(p, "r") : NULL;
    if (!f || !fgets(buf, (int)cap, f)) {
        if (f)
            fclose(f);
        return NULL;
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf;
}

/* etcdctl against the TLS server, quietly: its exit status. */
static int tls_ctl(const char *url, const char *user, const char *args)
{
    char cmd[2000];
    snprintf(cmd, sizeof(cmd),
             "ETCDCTL_API=3 etcdctl --endpoints=%s --cacert=%s/certs/ca.pem --cert=%s/certs/client.pem "
             "--key=%s/certs/client-key.pem %s%s %s >/dev/null 2>&1",
             url, tls_state, tls_state, tls_state, user ? "--user=" : "", user ? user : "", args);
    return system(cmd);
}

static vigil_etcd *tls_connect(const char *url, const char *user, const char *password)
{
    char ca[400], cert[400], key[400];
    snprintf(ca, sizeof(ca), "%s/certs/ca.pem", tls_state);
    snprintf(cert, sizeof(cert), "%s/certs/client.pem", tls_state);
    snprintf(key, sizeof(key), "%s/certs/client-key.pem", tls_state);
    struct vigil_etcd_options o = { .cacert = ca, .cert = cert, .key = key, .user = user, .password = password };
    vigil_etcd *t = NULL;
    int rc = vigil_etcd_connect_opts(url, &o, &t);
    if (rc < 0)
        fprintf(stderr, "bench_etcd: TLS connect: %s %s\n", vigil_strerror(rc), vigil_etcd_errmsg());
    return rc < 0 ? NULL : t;
}

#define TLS_N 1000
#define HS_N  50

/* renew on plain e and on t, interleaved, TLS_N times each. 0 or -1. */
static int renew_pair(vigil_etcd *e, vigil_etcd *t, const char *key, uint64_t *plain, uint64_t *over)
{
    vigil_lease a, b;
    if (vigil_etcd_acquire(e, key, "bench", 5000, &a) != 0 || vigil_etcd_acquire(t, key, "bench", 5000, &b) != 0) {
        fprintf(stderr, "bench_etcd: TLS acquire: %s\n", vigil_etcd_errmsg());
        return -1;
    }
    for (int i = 0; i < 100; i++) /* warm both connections */
        vigil_etcd_renew(e, &a), vigil_etcd_renew(t, &b);
    for (int i = 0; i < TLS_N; i++) {
        uint64_t t0 = bench_now_ns();
        int r1 = vigil_etcd_renew(e, &a);
        uint64_t t1 = bench_now_ns();
        int r2 = vigil_etcd_renew(t, &b);
        uint64_t t2 = bench_now_ns();
        if (r1 || r2) {
            fprintf(stderr, "bench_etcd: renew: %s / %s %s\n", vigil_strerror(r1), vigil_strerror(r2),
                    vigil_etcd_errmsg());
            return -1;
        }
        plain[i] = t1 - t0;
        over[i] = t2 - t1;
    }
    vigil_etcd_release(e, &a);
    vigil_etcd_release(t, &b);
    return 0;
}

/* A fresh handle's first request (a vacant get: one range), plain and
 * over TLS, interleaved: the connection, and TLS's handshake. */
static int first_requests(const char *url, const char *tls_url, const char *key, uint64_t *plain, uint64_t *over)
{
    for (int i = 0; i < HS_N; i++) {
        vigil_lease_info info;
        uint64_t t0 = bench_now_ns();
        vigil_etcd *e = NULL, *t;
        int r1 = vigil_etcd_connect(url, &e) == 0 ? vigil_etcd_get(e, key, &info) : -1;
        uint64_t t1 = bench_now_ns();
        t = tls_connect(tls_url, NULL, NULL);
        int r2 = t ? vigil_etcd_get(t, key, &info) : -1;
        uint64_t t2 = bench_now_ns();
        vigil_etcd_close(e);
        vigil_etcd_close(t);
        if (r1 != VIGIL_EVACANT || r2 != VIGIL_EVACANT)
            return -1;
        plain[i] = t1 - t0;
        over[i] = t2 - t1;
    }
    return 0;
}

/* etcd's count of watches started, from its /metrics; -1 unknown. */
static long long watches_started(vigil_etcd *e)
{
    long http;
    const char *reply;
    size_t len;
    if (vigil_etcd__request(e, "metrics", NULL, &http, &reply, &len) < 0 || http != 200)
        return -1;
    const char *p = strstr(reply, "grpc_server_started_total{grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\"");
    p = p ? strchr(p, '}') : NULL;
    return p ? atoll(p + 1) : -1;
}

/* The waiter of the wake-up rounds: acquire_wait, then the time it
 * returned, then release when told. */
struct waiter {
    const char     *url, *key;
    _Atomic int     round;   /* main -> waiter: go wait for this round */
    _Atomic int     got;     /* waiter -> main: this round's acquire returned */
    _Atomic int     rc;
    _Atomic uint64_t at_ns;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    vigil_etcd *e;
    if (vigil_etcd_connect(w->url, &e) < 0)
        return NULL;
    for (int r = 1;; r++) {
        int at;
        while ((at = atomic_load(&w->round)) >= 0 && at < r)
            usleep(100);
        if (at < 0)
            break;
        vigil_lease l;
        int rc = vigil_etcd_acquire_wait(e, w->key, "waiter", 5000, 10000000000ull, &l);
        atomic_store(&w->at_ns, bench_now_ns());
        atomic_store(&w->rc, rc);
        if (rc == 0)
            vigil_etcd_release(e, &l);
        atomic_store(&w->got, r);
    }
    vigil_etcd_close(e);
    return NULL;
}

/* WAKE_N rounds: main holds, the waiter queues and sleeps on its watch,
 * main releases. 0, or 1 on a failure. */
static int wake_rounds(vigil_etcd *e, const char *url, const char *key, uint64_t *from_start, uint64_t *from_end)
{
    struct waiter w = { .url = url, .key = key };
    pthread_t th;
    if (pthread_create(&th, NULL, waiter_main, &w) != 0)
        return 1;
    int bad = 0;
    for (int r = 1; r <= WAKE_N && !bad; r++) {
        vigil_lease l;
        int rc = vigil_etcd_acquire(e, key, "holder", 5000, &l);
        long long w0 = watches_started(e);
        if (rc != 0 || w0 < 0) {
            fprintf(stderr, "wake round %d: acquire %s, metrics %lld\n", r, vigil_strerror(rc), w0);
            bad = 1;
            break;
        }
        atomic_store(&w.round, r);
        uint64_t give_up = bench_now_ns() + 5000000000ull;
        while (watches_started(e) <= w0 && bench_now_ns() < give_up)
            usleep(200);
        usleep(2000); /* past the watch's start: asleep on it */
        uint64_t t0 = bench_now_ns();
        rc = vigil_etcd_release(e, &l);
        uint64_t t1 = bench_now_ns();
        give_up = t1 + 10000000000ull;
        while (atomic_load(&w.got) < r && bench_now_ns() < give_up)
            ;
        if (rc != 0 || atomic_load(&w.got) < r || atomic_load(&w.rc) != 0) {
            fprintf(stderr, "wake round %d: release %s, waiter %s\n", r, vigil_strerror(rc),
                    atomic_load(&w.got) < r ? "never woke" : vigil_strerror(atomic_load(&w.rc)));
            bad = 1;
            break;
        }
        uint64_t at = atomic_load(&w.at_ns);
        from_start[r - 1] = at - t0;
        from_end[r - 1] = at > t1 ? at - t1 : 0;
    }
    atomic_store(&w.round, -1);
    pthread_join(th, NULL);
    return bad;
}

/* The floor under the wake-up: a bare watch (the one acquire_wait uses)
 * on the holder's own key, from the release's return to the DELETE event. */
static int bare_watch_rounds(vigil_etcd *e, const char *key, uint64_t *out)
{
    for (int r = 0; r < WAKE_N; r++) {
        vigil_lease l;
        char own[200], kb[300];
        int rc = vigil_etcd_acquire(e, key, "holder", 5000, &l);
        if (rc != 0)
            return fprintf(stderr, "bare watch: acquire %s\n", vigil_strerror(rc)), 1;
        vigil_etcd__own_key(key, l.id, own, sizeof(own));
        vigil_etcd__b64(own, strlen(own), kb, sizeof(kb));
        struct vigil_etcd_watch *w;
        long long w0 = watches_started(e);
        /* From the next revision, as acquire_wait does: a watch from a past one
         * joins etcd's unsynced watchers, caught up only every 100 ms. */
        if ((rc = vigil_etcd__watch_open(e, kb, (int64_t)l.token + 1, &w)) < 0)
            return fprintf(stderr, "bare watch: %s\n", vigil_strerror(rc)), 1;
        uint64_t give_up = bench_now_ns() + 5000000000ull;
        /* Drive the stream until etcd has started the watch, then past its
         * "created" message: listening. */
        while (vigil_etcd__watch_wait(w, 1) == VIGIL_ETCD_WATCH_NOTHING && watches_started(e) <= w0 &&
               bench_now_ns() < give_up)
            ;
        vigil_etcd__watch_wait(w, 2);
        rc = vigil_etcd_release(e, &l);
        uint64_t t1 = bench_now_ns();
        int ev = rc == 0 ? vigil_etcd__watch_wait(w, 10000) : rc;
        out[r] = bench_now_ns() - t1;
        vigil_etcd__watch_close(w);
        if (ev != VIGIL_ETCD_WATCH_DELETED)
            return fprintf(stderr, "bare watch: release %s, event %d\n", vigil_strerror(rc), ev), 1;
    }
    return 0;
}

#define RTT_N   2000
#define RENEW_N 2000
#define ACQ_N   300

/* ---- a waiter whose watch sits on a hung member ------------------------------- */

#define HUNG_N   8
#define HUNG_TTL 3000

static char c3_script[1024], c3_state[256];

static int run_c3(const char *cmd, const char *arg)
{
    return bench_run_sh(c3_script, cmd, c3_state, arg, NULL);
}

static void stop_c3(void)
{
    if (c3_state[0]) {
        run_c3("stop", NULL);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c3_state);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_etcd: could not remove %s\n", c3_state);
    }
}

/* Member i's endpoint into buf; 0 or -1. */
static int c3_member(int i, char *buf, size_t cap)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/%d/endpoint", c3_state, i);
    FILE *f = fopen(p, "r");
    bool ok = f && fgets(buf, (int)cap, f);
    if (f)
        fclose(f);
    buf[ok ? strcspn(buf, "\r\n") : 0] = '\0';
    return ok ? 0 : -1;
}

/* The leader's index (1..3), or -1. */
static int c3_leader(void)
{
    char cmd[1400], out[16] = "";
    snprintf(cmd, sizeof(cmd), "sh '%s' leader '%s' 2>/dev/null", c3_script, c3_state);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    bool ok = fgets(out, sizeof(out), f) != NULL;
    int st = pclose(f);
    return ok && st == 0 ? atoi(out) : -1;
}

struct hung_waiter {
    const char      *list, *key;
    int              rc;
    uint64_t         token;
    _Atomic uint64_t at_ns; /* when acquire_wait returned */
};

static void *hung_waiter_main(void *arg)
{
    struct hung_waiter *w = arg;
    vigil_etcd *e;
    w->rc = vigil_etcd_connect(w->list, &e);
    if (w->rc < 0)
        return NULL;
    vigil_etcd_set_timeout(e, 300, 500); /* a LAN client's limits, as tests/etcd_test_cluster.c */
    vigil_lease l;
    w->rc = vigil_etcd_acquire_wait(e, w->key, "waiter", HUNG_TTL, UINT64_MAX, &l);
    atomic_store_explicit(&w->at_ns, bench_now_ns(), memory_order_release);
    if (w->rc == 0) {
        w->token = l.token;
        vigil_etcd_release(e, &l);
    }
    vigil_etcd_close(e);
    return NULL;
}

/* HUNG_N rounds of the review's scene; the times from A's release to B
 * holding the key into s. The number of rounds done, or -1 (no cluster). */
static int hung_rounds(const char *key, uint64_t *s)
{
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(c3_script, sizeof(c3_script), "%.*s%s../tests/etcd_cluster.sh", dir, src, slash ? "/" : "");
    const char *tmp = getenv("TMPDIR");
    snprintf(c3_state, sizeof(c3_state), "%s/vigil-bench-c3.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (access(c3_script, R_OK) != 0 || !mkdtemp(c3_state)) {
        c3_state[0] = '\0';
        return -1;
    }
    atexit(stop_c3);
    if (run_c3("start", "3") != 0)
        return -1;
    int n = 0;
    for (int r = 0; r < HUNG_N; r++) {
        int leader = c3_leader(), f = leader % 3 + 1, o = f % 3 + 1;
        char lu[300], fu[300], ou[300], list[1000], k[120];
        if (leader < 1 || c3_member(leader, lu, sizeof(lu)) || c3_member(f, fu, sizeof(fu)) ||
            c3_member(o, ou, sizeof(ou)))
            break;
        snprintf(list, sizeof(list), "%s,%s,%s", fu, ou, lu);
        snprintf(k, sizeof(k), "%s-hung-%d", key, r);
        vigil_etcd *a = NULL, *fm = NULL;
        vigil_lease l;
        if (vigil_etcd_connect(lu, &a) < 0 || vigil_etcd_connect(fu, &fm) < 0 ||
            vigil_etcd_acquire(a, k, "holder", HUNG_TTL, &l) != 0) {
            vigil_etcd_close(a);
            vigil_etcd_close(fm);
            break;
        }
        long long w0 = watches_started(fm);
        struct hung_waiter w = { .list = list, .key = k };
        pthread_t th;
        bool started = pthread_create(&th, NULL, hung_waiter_main, &w) == 0;
        /* Queued, with its watch on the follower (bounded: 10 s). */
        uint64_t until = bench_now_ns() + 10000000000ull;
        while (started && watches_started(fm) <= w0 && bench_now_ns() < until)
            usleep(5000);
        vigil_etcd_close(fm);
        bool watching = started && bench_now_ns() < until;
        char fi[4];
        snprintf(fi, sizeof(fi), "%d", f);
        int fz = watching ? run_c3("freeze", fi) : -1;
        uint64_t t0 = bench_now_ns();
        vigil_etcd_release(a, &l);
        if (started)
            pthread_join(th, NULL);
        run_c3("thaw", fi);
        vigil_etcd_close(a);
        if (!watching || fz != 0 || w.rc != 0 || w.token <= l.token) {
            fprintf(stderr, "bench_etcd: hung-member round %d: watching %d, freeze %d, waiter %s\n", r, watching, fz,
                    vigil_strerror(w.rc));
            break;
        }
        s[n++] = atomic_load_explicit(&w.at_ns, memory_order_acquire) - t0;
    }
    return n;
}


int main(void)
{
    char buf[300];
    const char *url = bench_etcd_endpoints("bench_etcd", buf, sizeof(buf));
    if (!url)
        return 0;
    vigil_etcd *e;
    int rc = vigil_etcd_connect(url, &e);
    if (rc < 0) {
        fprintf(stderr, "connect %s: %s\n", url, vigil_strerror(rc));
        return 1;
    }
    static uint64_t s_rtt[RTT_N], s_ka[RENEW_N], s_renew[RENEW_N], s_acq[ACQ_N], s_rel[ACQ_N], s_pair[ACQ_N];
    long http;
    const char *reply;
    size_t len;
    vigil_lease l;
    char key[64];
    snprintf(key, sizeof(key), "vigil-bench/%d", (int)getpid());
    if ((rc = vigil_etcd_acquire(e, key, "bench", 5000, &l)) != 0) {
        fprintf(stderr, "acquire: %s\n", vigil_strerror(rc));
        return 1;
    }
    char ka_body[64];
    snprintf(ka_body, sizeof(ka_body), "{\"ID\":\"%lld\"}", (long long)l.id);
    for (int i = 0; i < 200; i++) { /* warm the connection and etcd */
        vigil_etcd__request(e, "version", NULL, &http, &reply, &len);
        vigil_etcd_renew(e, &l);
    }
    /* Interleaved, so drift in the machine's load hits every column alike. */
    for (int i = 0; i < RENEW_N; i++) {
        uint64_t t0 = bench_now_ns();
        rc = vigil_etcd__request(e, "version", NULL, &http, &reply, &len);
        uint64_t t1 = bench_now_ns();
        int rk = vigil_etcd__request(e, "v3/lease/keepalive", ka_body, &http, &reply, &len);
        uint64_t t2 = bench_now_ns();
        int rr = vigil_etcd_renew(e, &l);
        uint64_t t3 = bench_now_ns();
        if (rc || rk || rr) {
            fprintf(stderr, "request failed: %s / %s / %s\n", vigil_strerror(rc), vigil_strerror(rk), vigil_strerror(rr));
            return 1;
        }
        s_rtt[i] = t1 - t0;
        s_ka[i] = t2 - t1;
        s_renew[i] = t3 - t2;
    }
    vigil_etcd_release(e, &l);
    for (int i = 0; i < ACQ_N; i++) {
        uint64_t t0 = bench_now_ns();
        int ra = vigil_etcd_acquire(e, key, "bench", 5000, &l);
        uint64_t t1 = bench_now_ns();
        int rr = ra == 0 ? vigil_etcd_release(e, &l) : ra;
        uint64_t t2 = bench_now_ns();
        if (ra || rr) {
            fprintf(stderr, "acquire/release failed: %s / %s\n", vigil_strerror(ra), vigil_strerror(rr));
            return 1;
        }
        s_acq[i] = t1 - t0;
        s_rel[i] = t2 - t1;
        s_pair[i] = t2 - t0;
    }
    static uint64_t s_get[RENEW_N], s_vacant[RENEW_N], s_wake0[WAKE_N], s_wake1[WAKE_N], s_bare[WAKE_N];
    if ((rc = vigil_etcd_acquire(e, key, "bench", 5000, &l)) != 0) {
        fprintf(stderr, "acquire: %s\n", vigil_strerror(rc));
        return 1;
    }
    char vacant[80];
    snprintf(vacant, sizeof(vacant), "%s-vacant", key);
    for (int i = 0; i < RENEW_N; i++) {
        vigil_lease_info info;
        if (i % 200 == 0 && (rc = vigil_etcd_renew(e, &l)) != 0) { /* untimed: the lease outlives the loop */
            fprintf(stderr, "renew: %s\n", vigil_strerror(rc));
            return 1;
        }
        uint64_t t0 = bench_now_ns();
        int rg = vigil_etcd_get(e, key, &info);
        uint64_t t1 = bench_now_ns();
        int rv = vigil_etcd_get(e, vacant, &info);
        uint64_t t2 = bench_now_ns();
        if (rg != 0 || rv != VIGIL_EVACANT) {
            fprintf(stderr, "get failed: %s / %s\n", vigil_strerror(rg), vigil_strerror(rv));
            return 1;
        }
        s_get[i] = t1 - t0;
        s_vacant[i] = t2 - t1;
    }
    vigil_etcd_release(e, &l);
    char wkey[80];
    snprintf(wkey, sizeof(wkey), "%s-wake", key);
    if (wake_rounds(e, url, wkey, s_wake0, s_wake1) != 0 || bare_watch_rounds(e, wkey, s_bare) != 0)
        return 1;
    /* TLS, then TLS and auth, each beside plain http in one interleaved run. */
    static uint64_t s_p1[TLS_N], s_tls[TLS_N], s_p2[TLS_N], s_auth[TLS_N], s_hp[HS_N], s_ht[HS_N];
    char tbuf[300], tkey[80];
    snprintf(tkey, sizeof(tkey), "%s-tls", key);
    const char *tls_url = tls_server(tbuf, sizeof(tbuf));
    int tls_ok = -1, auth_ok = -1, hs_ok = -1;
    if (tls_url) {
        vigil_etcd *t = tls_connect(tls_url, NULL, NULL);
        tls_ok = t ? renew_pair(e, t, tkey, s_p1, s_tls) : -1;
        vigil_etcd_close(t);
        hs_ok = first_requests(url, tls_url, tkey, s_hp, s_ht);
        /* etcd auth on, as etcdctl turns it on. */
        if (tls_ctl(tls_url, NULL, "user add root:bench-root") == 0 &&
            tls_ctl(tls_url, NULL, "user grant-role root root") == 0 &&
            tls_ctl(tls_url, NULL, "user add bench:bench-pw") == 0 && tls_ctl(tls_url, NULL, "role add rw") == 0 &&
            tls_ctl(tls_url, NULL, "role grant-permission rw --prefix=true readwrite vigil-bench/") == 0 &&
            tls_ctl(tls_url, NULL, "user grant-role bench rw") == 0 && tls_ctl(tls_url, NULL, "auth enable") == 0) {
            vigil_etcd *ta = tls_connect(tls_url, "bench", "bench-pw");
            auth_ok = ta ? renew_pair(e, ta, tkey, s_p2, s_auth) : -1;
            vigil_etcd_close(ta);
        } else {
            fprintf(stderr, "bench_etcd: etcdctl could not turn auth on: the TLS + auth row is left out\n");
        }
    } else {
        fprintf(stderr, "bench_etcd: no TLS server (tests/etcd_cluster.sh): the TLS rows are left out\n");
    }
    vigil_etcd_close(e);
    static uint64_t s_hung[HUNG_N];
    int hung_n = hung_rounds(key, s_hung);
    if (hung_n < 0)
        fprintf(stderr, "bench_etcd: no 3-member cluster (tests/etcd_cluster.sh): the hung-member row is left out\n");

    struct stat_ns rtt = summarize(s_rtt, RTT_N), ka = summarize(s_ka, RENEW_N), renew = summarize(s_renew, RENEW_N),
                   acq = summarize(s_acq, ACQ_N), rel = summarize(s_rel, ACQ_N), pair = summarize(s_pair, ACQ_N);
    printf("etcd on loopback (%s), median per op (p99), ratio to the HTTP round trip:\n", url);
    printf("  %-34s %9.1f us (%8.1f)   1.00x\n", "HTTP round trip (GET /version)", rtt.p50 / 1e3, rtt.p99 / 1e3);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "bare keepalive POST", ka.p50 / 1e3, ka.p99 / 1e3, ka.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_renew", renew.p50 / 1e3, renew.p99 / 1e3, renew.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_acquire", acq.p50 / 1e3, acq.p99 / 1e3, acq.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_release", rel.p50 / 1e3, rel.p99 / 1e3, rel.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "acquire + release", pair.p50 / 1e3, pair.p99 / 1e3, pair.p50 / rtt.p50);
    struct stat_ns get = summarize(s_get, RENEW_N), vac = summarize(s_vacant, RENEW_N),
                   w0 = summarize(s_wake0, WAKE_N), w1 = summarize(s_wake1, WAKE_N), bare = summarize(s_bare, WAKE_N);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_get (held)", get.p50 / 1e3, get.p99 / 1e3, get.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_get (vacant)", vac.p50 / 1e3, vac.p99 / 1e3, vac.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "wake-up: release start -> acquired", w0.p50 / 1e3, w0.p99 / 1e3,
           w0.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "wake-up: release return -> acquired", w1.p50 / 1e3, w1.p99 / 1e3,
           w1.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "  floor: bare watch, return -> event", bare.p50 / 1e3,
           bare.p99 / 1e3, bare.p50 / rtt.p50);
    printf("  renew / bare keepalive: %.2fx (the ownership txn); samples: %d renew, %d acquire+release, %d get, "
           "%d wake-ups\n",
           renew.p50 / ka.p50, RENEW_N, ACQ_N, RENEW_N, WAKE_N);
    if (tls_ok == 0) {
        struct stat_ns p1 = summarize(s_p1, TLS_N), tl = summarize(s_tls, TLS_N);
        printf("renew over mutual TLS beside plain http, interleaved (%d each):\n", TLS_N);
        printf("  %-34s %9.1f us (%8.1f)   1.00x\n", "renew, plain http", p1.p50 / 1e3, p1.p99 / 1e3);
        printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "renew, mutual TLS", tl.p50 / 1e3, tl.p99 / 1e3, tl.p50 / p1.p50);
    }
    if (auth_ok == 0) {
        struct stat_ns p2 = summarize(s_p2, TLS_N), au = summarize(s_auth, TLS_N);
        printf("  %-34s %9.1f us (%8.1f)   1.00x\n", "renew, plain http (again)", p2.p50 / 1e3, p2.p99 / 1e3);
        printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "renew, mutual TLS + etcd auth", au.p50 / 1e3, au.p99 / 1e3,
               au.p50 / p2.p50);
    }
    if (hs_ok == 0) {
        struct stat_ns hp = summarize(s_hp, HS_N), ht = summarize(s_ht, HS_N);
        printf("a fresh handle's first request (connect, then a vacant get), %d each:\n", HS_N);
        printf("  %-34s %9.1f us (%8.1f)   1.00x\n", "plain http", hp.p50 / 1e3, hp.p99 / 1e3);
        printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "mutual TLS (handshake)", ht.p50 / 1e3, ht.p99 / 1e3,
               ht.p50 / hp.p50);
    }
    if (hung_n > 0) {
        struct stat_ns h = summarize(s_hung, (size_t)hung_n);
        printf("a waiter whose watch sits on a SIGSTOPped follower (3 members, TTL %d ms), %d rounds:\n", HUNG_TTL,
               hung_n);
        printf("  %-34s %9.1f ms (max %6.1f)   bound 2 x 0.32 x TTL = %d ms\n", "holder's release -> waiter holds",
               h.p50 / 1e6, (double)s_hung[hung_n - 1] / 1e6, 2 * 32 * HUNG_TTL / 100);
    }
    return 0;
}
