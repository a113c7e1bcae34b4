/* SPDX-License-Identifier: MIT */
/*
 * Description: the production connection options (vigil_etcd_connect_opts)
 * against a real etcd started with --client-cert-auth --trusted-ca-file
 * (the etcd_tls fixture: certificates made with openssl in its state
 * directory), then with `etcdctl auth enable`. Mutual TLS serves the
 * lease calls and a waiter's watch; a server the CA bundle does not
 * verify is VIGIL_ETLS, a missing client certificate -EACCES, each with a
 * reason in vigil_etcd_errmsg. With auth: the right password serves, a
 * wrong one or none is -EACCES naming authentication, a key outside the
 * user's permission -EACCES, an expired token is renewed without the
 * caller seeing it; a client certificate with a CommonName beside the
 * password is served in gRPC and, through etcd's JSON gateway
 * (VIGIL_ETCD_TRANSPORT=gateway), refused with the CommonName named. A namespace
 * prefixes every key as etcd's own namespace client does. etcdctl shares
 * the keys under TLS and auth. The whole matrix of TLS and auth
 * configurations, layer by layer: etcd_test_matrix.c.
 */
#include "grouptest.h"

static const char *url, *certs;
static char ca[1200], cert[1200], key[1200];

#define NEED_TLS() ET_NEED_TLS()

/* The connection with the fixture's CA and client certificate, plus o's
 * other fields; exits when it cannot be made. */
static vigil_etcd *tls_connect(struct vigil_etcd_options o)
{
    o.cacert = o.cacert ? o.cacert : ca;
    o.cert = o.cert ? o.cert : cert;
    o.key = o.key ? o.key : key;
    vigil_etcd *e = NULL;
    int rc = vigil_etcd_connect_opts(url, &o, &e);
    if (rc < 0) {
        fprintf(stderr, "vigil_etcd_connect_opts(%s): %s (%s)\n", url, vigil_strerror(rc), vigil_etcd_errmsg());
        exit(1);
    }
    return e;
}

/* A key ET_USER may use. */
static const char *tkey(const char *name)
{
    return et_key(name); /* "vigil-test/...": under ET_USER_PFX */
}

/* Acquire, renew, get, release: the lease calls over e; 0 or the first
 * failure. */
static int cycle(vigil_etcd *e, const char *k)
{
    vigil_lease l;
    vigil_lease_info info;
    int rc = vigil_etcd_acquire(e, k, "tls", 2000, &l);
    if (rc == 0 && (rc = vigil_etcd_renew(e, &l)) == 0 && (rc = vigil_etcd_get(e, k, &info)) == 0 &&
        strcmp(info.owner, "tls") != 0)
        rc = -EPROTO;
    if (rc == 0)
        rc = vigil_etcd_release(e, &l);
    return rc;
}

static int test_mutual_tls(void)
{
    NEED_TLS();
    EXPECT(strncmp(url, "https://", 8) == 0, "the TLS fixture's endpoint %s is not https", url);
    vigil_etcd *e = tls_connect((struct vigil_etcd_options){ 0 });
    EXPECT_RC(cycle(e, tkey("tls-cycle")), 0);
    /* ALPN settled on h2 before the first request: gRPC over TLS. */
    const char *transport = getenv("VIGIL_ETCD_TRANSPORT");
    if (!transport || strcmp(transport, "gateway") != 0)
        EXPECT(vigil_etcd__grpc_answered(e) > 0 && e->speaks[0] == VIGIL_ETCD_SPEAKS_GRPC,
               "no gRPC over TLS: %lu answers, speaks %d", vigil_etcd__grpc_answered(e), e->speaks[0]);
    /* A waiter's watch over TLS: the holder lets go, the waiter has it. */
    const char *k = tkey("tls-wait");
    vigil_lease l, w;
    EXPECT_RC(vigil_etcd_acquire(e, k, "holder", 2000, &l), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        vigil_etcd *we = tls_connect((struct vigil_etcd_options){ 0 });
        int rc = vigil_etcd_acquire_wait(we, k, "waiter", 2000, 20000 * 1000000ull, &w);
        if (rc == 0)
            rc = vigil_etcd_release(we, &w);
        _exit(rc == 0 ? 0 : 1);
    }
    bool queued = VT_WAIT_FOR(et_count_under(e, k) == 2, 10000);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    int st = vt_wait(pid, 20000);
    vigil_etcd_close(e);
    EXPECT(queued, "the waiter never queued over TLS");
    EXPECT(st == 0, "the waiter over TLS exited %d", st);
    return 0;
}

/* What goes wrong with TLS is said: which certificate, and why. */
static int test_tls_refusals(void)
{
    NEED_TLS();
    char other[1200];
    snprintf(other, sizeof(other), "%s/other-ca.pem", certs);
    static const char *const none = "";
    struct {
        const char *cacert, *cert, *key;
        int         want;
        const char *why;
    } cases[] = {
        { none, NULL, NULL, VIGIL_ETLS, "certificate" },  /* the system's CAs never signed it */
        { other, NULL, NULL, VIGIL_ETLS, "certificate" }, /* nor did another CA */
        { NULL, none, none, -EACCES, "client certificate" }, /* the server wants ours */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vigil_etcd_options o = { .cacert = cases[i].cacert, .cert = cases[i].cert, .key = cases[i].key };
        vigil_etcd *e = tls_connect(o);
        vigil_lease l;
        int rc = vigil_etcd_acquire(e, tkey("tls-refused"), "x", 2000, &l);
        char why[256];
        snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
        vigil_etcd_close(e);
        EXPECT(rc == cases[i].want && strstr(why, cases[i].why),
               "case %zu: expected %d (%s) naming '%s', got %d (%s): '%s'", i, cases[i].want,
               vigil_strerror(cases[i].want), cases[i].why, rc, vigil_strerror(rc), why);
    }
    /* Files that are not there, or half a pair: said at connect. */
    vigil_etcd *e = NULL;
    struct vigil_etcd_options o = { .cacert = "/nonexistent/ca.pem" };
    EXPECT_RC(vigil_etcd_connect_opts(url, &o, &e), -ENOENT);
    EXPECT(strstr(vigil_etcd_errmsg(), "/nonexistent/ca.pem"), "errmsg '%s' does not name the file",
           vigil_etcd_errmsg());
    o = (struct vigil_etcd_options){ .key = key };
    EXPECT_RC(vigil_etcd_connect_opts(url, &o, &e), -EINVAL);
    o = (struct vigil_etcd_options){ .password = "pw" };
    EXPECT_RC(vigil_etcd_connect_opts(url, &o, &e), -EINVAL);
    return 0;
}

/* A namespace prefixes every key, as clientv3/namespace does: vigil's KEY
 * is NS KEY in etcd, where etcdctl sees it and contends for it. */
static int test_namespace(void)
{
    NEED_TLS();
    const char *k = tkey("ns");
    char ns[64], full[300];
    snprintf(ns, sizeof(ns), "%sns-%d/", ET_USER_PFX, (int)getpid());
    snprintf(full, sizeof(full), "%s%s", ns, k);
    vigil_etcd *n = tls_connect((struct vigil_etcd_options){ .namespace = ns });
    vigil_etcd *plain = tls_connect((struct vigil_etcd_options){ 0 });
    vigil_lease l;
    vigil_lease_info info;
    EXPECT_RC(vigil_etcd_acquire(n, k, "spaced", 2000, &l), 0);
    EXPECT(strcmp(l.key, k) == 0, "the lease's key is %s, not %s as named", l.key, k);
    EXPECT_RC(vigil_etcd_get(plain, k, &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_etcd_get(plain, full, &info), 0);
    EXPECT(strcmp(info.owner, "spaced") == 0 && info.token == l.token, "under %s: owner %s token %llu", full,
           info.owner, (unsigned long long)info.token);
    EXPECT_RC(vigil_etcd_get(n, k, &info), 0);
    vigil_lease busy;
    EXPECT_RC(vigil_etcd_acquire(plain, full, "other", 2000, &busy), VIGIL_EBUSY);
    EXPECT_RC(vigil_etcd_renew(n, &l), 0);
    EXPECT_RC(vigil_etcd_release(n, &l), 0);
    EXPECT_RC(vigil_etcd_get(plain, full, &info), VIGIL_EVACANT);
    /* A namespace past what the adapter keeps. */
    char huge[400];
    memset(huge, 'n', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    vigil_etcd *e = NULL;
    struct vigil_etcd_options o = { .namespace = huge };
    EXPECT_RC(vigil_etcd_connect_opts(url, &o, &e), VIGIL_ERANGE);
    vigil_etcd_close(n);
    vigil_etcd_close(plain);
    return 0;
}

/* The namespace covers the waits too: a waiter in it queues behind a
 * holder of NS KEY taken without it and has the key once that holder lets
 * go (its look and its watch on the namespaced keys); an observer in it
 * reports KEY's holders by the name it was given; a session's key is
 * NS KEY in etcd. */
static int test_namespace_wait_observe(void)
{
    NEED_TLS();
    const char *k = tkey("ns-wait"), *ks = tkey("ns-session");
    char ns[64], full[300], full_s[300];
    snprintf(ns, sizeof(ns), "%sns-w-%d/", ET_USER_PFX, (int)getpid());
    snprintf(full, sizeof(full), "%s%s", ns, k);
    snprintf(full_s, sizeof(full_s), "%s%s", ns, ks);
    /* The waiter is forked first, before this process has an observer's
     * thread or a TLS connection: a fork of a threaded process may inherit
     * a lock held (OpenSSL's, the allocator's) and hang in its connect. It
     * starts when told the outside holder is in place. */
    int fds[2], go[2], start[2];
    EXPECT(pipe(fds) == 0 && pipe(go) == 0 && pipe(start) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    struct vt_proc w = { .pid = fork() };
    if (w.pid == 0) {
        close(fds[0]);
        close(go[1]);
        close(start[1]);
        char s;
        if (read(start[0], &s, 1) != 1)
            _exit(3);
        vigil_etcd *we = tls_connect((struct vigil_etcd_options){ .namespace = ns });
        vigil_lease l;
        int rc = vigil_etcd_acquire_wait(we, k, "inside", 3000, 20000 * 1000000ull, &l);
        dprintf(fds[1], "got %d %llu %s\n", rc, rc == 0 ? (unsigned long long)l.token : 0ull, rc == 0 ? l.key : "");
        char c;
        if (rc == 0 && read(go[0], &c, 1) == 1) /* held until the parent has looked */
            rc = vigil_etcd_release(we, &l);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    close(go[0]);
    close(start[0]);
    w.fd = fds[0];
    vigil_etcd *n = tls_connect((struct vigil_etcd_options){ .namespace = ns });
    vigil_etcd *plain = tls_connect((struct vigil_etcd_options){ 0 });
    vigil_lease out;
    EXPECT_RC(vigil_etcd_acquire(plain, full, "outside", 3000, &out), 0);
    vigil_etcd_observer *o = NULL;
    EXPECT_RC(vigil_etcd_observe(n, k, &o), 0);
    vigil_lease_info first = { 0 }, next = { 0 }, seen = { 0 };
    int r0 = vigil_etcd_observer_next(o, &first, 10000 * 1000000ull);
    EXPECT(write(start[1], "s", 1) == 1, "the waiter is gone");
    close(start[1]);
    bool queued = VT_WAIT_FOR(et_count_under(plain, full) == 2, 10000);
    int rel = vigil_etcd_release(plain, &out);
    bool got = vt_read_until(&w, "\n", 20000);
    /* The observer: the outside holder, then the waiter (once or after a
     * vacancy between them). */
    int r1 = vigil_etcd_observer_next(o, &next, 10000 * 1000000ull);
    seen = next;
    if (r1 == 0 && seen.state != VIGIL_LEASE_HELD)
        r1 = vigil_etcd_observer_next(o, &seen, 10000 * 1000000ull);
    (void)!write(go[1], "r", 1);
    close(go[1]);
    int st = vt_wait(w.pid, 10000);
    close(w.fd);
    vigil_etcd_observer_close(o);
    /* A session in the namespace. */
    vigil_etcd_session *sess = NULL;
    vigil_lease sl;
    vigil_lease_info si = { 0 };
    int so = vigil_etcd_session_open(n, 3000, &sess);
    int sa = so == 0 ? vigil_etcd_session_acquire(sess, ks, "sess", &sl) : so;
    int sg = sa == 0 ? vigil_etcd_get(plain, full_s, &si) : sa;
    int sc = vigil_etcd_session_close(sess);
    vigil_lease_info after;
    int sgone = vigil_etcd_get(plain, full_s, &after);
    vigil_etcd_close(n);
    vigil_etcd_close(plain);
    EXPECT(r0 == 0 && first.state == VIGIL_LEASE_HELD && strcmp(first.owner, "outside") == 0 &&
               strcmp(first.key, k) == 0,
           "the observer's first report: %d state %u owner '%s' key '%s'", r0, first.state, first.owner, first.key);
    EXPECT(queued, "the waiter in the namespace never queued under %s", full);
    EXPECT_RC(rel, 0);
    unsigned long long token = 0;
    int rc = -1;
    char lkey[300] = "";
    EXPECT(got && sscanf(w.buf, "got %d %llu %299s", &rc, &token, lkey) == 3 && rc == 0 && token > out.token &&
               strcmp(lkey, k) == 0,
           "the waiter in the namespace: '%s'", w.buf);
    EXPECT(st == 0, "the waiter exited %d", st);
    EXPECT(r1 == 0 && seen.state == VIGIL_LEASE_HELD && strcmp(seen.owner, "inside") == 0 && seen.token == token &&
               strcmp(seen.key, k) == 0,
           "the observer after the hand-over: %d state %u owner '%s' token %llu key '%s'", r1, seen.state,
           seen.owner, (unsigned long long)seen.token, seen.key);
    EXPECT_RC(so, 0);
    EXPECT_RC(sa, 0);
    EXPECT(sg == 0 && strcmp(si.owner, "sess") == 0, "the session's key in etcd: %d owner '%s'", sg, si.owner);
    EXPECT_RC(sc, 0);
    EXPECT_RC(sgone, VIGIL_EVACANT);
    return 0;
}

/* A waiter in a child on options o: acquire_wait on k (TTL ttl_ms, 60 s
 * at most), then "got RC TOKEN ERRMSG" a line on w->fd, and release.
 * w->pid -1 when it could not fork. */
static void waiter_spawn(struct vt_proc *w, struct vigil_etcd_options o, const char *k, uint32_t ttl_ms)
{
    int fds[2]; /* a socket pair: the child's line out, and the test's go-ahead back */
    *w = (struct vt_proc){ .pid = -1, .fd = -1 };
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
        return;
    fflush(NULL);
    w->pid = fork();
    if (w->pid == 0) {
        close(fds[0]);
        vigil_etcd *we = tls_connect(o);
        vigil_lease l;
        int rc = vigil_etcd_acquire_wait(we, k, "waiter", ttl_ms, 60000 * 1000000ull, &l);
        dprintf(fds[1], "got %d %llu %s\n", rc, rc == 0 ? (unsigned long long)l.token : 0ull,
                rc == 0 ? "" : vigil_etcd_errmsg());
        char go;
        (void)!read(fds[1], &go, 1); /* the release waits until the test has counted (its close) */
        if (rc == 0)
            rc = vigil_etcd_release(we, &l);
        vigil_etcd_close(we);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    w->fd = fds[0];
}

/* ---- with `etcdctl auth enable` ------------------------------------------------ */

static int test_auth(void)
{
    NEED_TLS();
    NEED_ETCDCTL();
    int on = et_tls_auth(url, certs, true);
    EXPECT(on == 0, "etcdctl could not enable auth (%d)", on);
    vigil_etcd *good = tls_connect((struct vigil_etcd_options){ .user = ET_USER, .password = ET_USER_PW });
    vigil_etcd *bad = tls_connect((struct vigil_etcd_options){ .user = ET_USER, .password = "wrong" });
    vigil_etcd *anon = tls_connect((struct vigil_etcd_options){ 0 });
    int ok = cycle(good, tkey("auth-cycle"));
    vigil_lease l;
    int wrong = vigil_etcd_acquire(bad, tkey("auth-wrong"), "x", 2000, &l);
    char why_wrong[256];
    snprintf(why_wrong, sizeof(why_wrong), "%s", vigil_etcd_errmsg());
    int none = vigil_etcd_acquire(anon, tkey("auth-none"), "x", 2000, &l);
    int outside = vigil_etcd_acquire(good, "elsewhere/auth", "x", 2000, &l);
    char why_outside[256];
    snprintf(why_outside, sizeof(why_outside), "%s", vigil_etcd_errmsg());
    /* etcd 3.4's gateway, auth on, refuses a client certificate with a
     * CommonName (it would stand for a user): said so. etcd's gRPC takes
     * it, the token standing for the user (VIGIL_ETCD_TRANSPORT=auto). */
    const char *transport = getenv("VIGIL_ETCD_TRANSPORT");
    bool gateway = transport && strcmp(transport, "gateway") == 0;
    char cn_cert[1200], cn_key[1200];
    snprintf(cn_cert, sizeof(cn_cert), "%s/client-cn.pem", certs);
    snprintf(cn_key, sizeof(cn_key), "%s/client-cn-key.pem", certs);
    vigil_etcd *cn = tls_connect((struct vigil_etcd_options){ .cert = cn_cert, .key = cn_key, .user = ET_USER,
                                                              .password = ET_USER_PW });
    int with_cn = vigil_etcd_acquire(cn, tkey("auth-cn"), "x", 2000, &l);
    char why_cn[256];
    snprintf(why_cn, sizeof(why_cn), "%s", vigil_etcd_errmsg());
    int cn_rel = with_cn == 0 ? vigil_etcd_release(cn, &l) : 0;
    vigil_etcd_close(cn);
    /* The token (2 s idle: --auth-token-ttl=2) expires between two calls:
     * the next is refused once, authenticates again, and succeeds. */
    vigil_lease held;
    int acq = vigil_etcd_acquire(good, tkey("auth-token"), "x", 5000, &held);
    vt_sleep_ms(3000);
    int renew = acq == 0 ? vigil_etcd_renew(good, &held) : acq;
    int rel = acq == 0 ? vigil_etcd_release(good, &held) : acq;
    vigil_etcd_close(good);
    vigil_etcd_close(bad);
    vigil_etcd_close(anon);
    EXPECT_RC(ok, 0);
    EXPECT(wrong == -EACCES && strstr(why_wrong, "authentication"), "wrong password: %d (%s), '%s'", wrong,
           vigil_strerror(wrong), why_wrong);
    EXPECT_RC(none, -EACCES);
    if (gateway)
        EXPECT(with_cn == -EACCES && strstr(why_cn, "CommonName"), "a client certificate with a CN: %d, '%s'", with_cn,
               why_cn);
    else
        EXPECT(with_cn == 0 && cn_rel == 0, "a client certificate with a CN, in gRPC: %d, %d, '%s'", with_cn, cn_rel,
               why_cn);
    EXPECT(outside == -EACCES && strstr(why_outside, "permission denied"), "outside the user's prefix: %d, '%s'",
           outside, why_outside);
    EXPECT_RC(acq, 0);
    EXPECT_RC(renew, 0);
    EXPECT_RC(rel, 0);
    return 0;
}

/* A client certificate with a CommonName, auth on: etcd's gateway
 * refuses it, so its watches go in gRPC (etcd_grpc_stream.c). A waiter
 * is woken by its watch, not by polling: once its watch stream has
 * reached etcd's Watch service it renews nothing (TTL 30 s: a renewal
 * every 9.6 s) while it waits, where a waiter without a watch looks and
 * renews at least once a second; a group watcher sees a join. */
static int test_cn_watches_under_auth(void)
{
    NEED_TLS();
    NEED_ETCDCTL();
    const char *transport = getenv("VIGIL_ETCD_TRANSPORT");
    if (transport && strcmp(transport, "gateway") == 0)
        return VT_SKIP; /* the gateway takes no CommonName with auth on (test_auth) */
    EXPECT(et_tls_auth(url, certs, true) == 0, "etcdctl could not enable auth");
    char cn_cert[1200], cn_key[1200];
    snprintf(cn_cert, sizeof(cn_cert), "%s/client-cn.pem", certs);
    snprintf(cn_key, sizeof(cn_key), "%s/client-cn-key.pem", certs);
    struct vigil_etcd_options cn = { .cert = cn_cert, .key = cn_key, .user = ET_USER, .password = ET_USER_PW };
    vigil_etcd *e = tls_connect(cn);
    const char *k = tkey("cn-wait");
    static const char *const watch[] = { "Watch", NULL }, *const renew[] = { "LeaseKeepAlive", NULL };
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, k, "holder", 30000, &l), 0);
    long long w0 = et_grpc_started(e, watch);
    struct vt_proc w;
    waiter_spawn(&w, cn, k, 30000);
    bool queued = w.pid > 0 && VT_WAIT_FOR(et_count_under(e, k) == 2, 10000);
    bool watching = queued && w0 >= 0 && VT_WAIT_FOR(et_grpc_started(e, watch) > w0, 10000);
    /* A window in which a waiter without its watch would renew twice. */
    long long r0 = et_grpc_started(e, renew);
    vt_sleep_ms(2500);
    long long r1 = et_grpc_started(e, renew);
    int rel = vigil_etcd_release(e, &l);
    /* Second in line, it returns on its watch's word alone: no read, txn or
     * renewal from the release to its line (as etcd_test_queue's
     * test_second_holder_killed); the child releases only after our count. */
    static const char *const asked[] = { "Range", "Txn", "LeaseKeepAlive", NULL };
    long long q0 = et_grpc_started(e, asked);
    bool woke = w.pid > 0 && vt_read_until(&w, "\n", 20000);
    long long q1 = et_grpc_started(e, asked);
    close(w.fd); /* the child's go-ahead to release */
    int wst = w.pid > 0 ? vt_wait(w.pid, 10000) : -1;

    /* A group watcher on the CN certificate sees the initial member and a join. */
    vigil_etcd *we = tls_connect(cn);
    const char *g = gt_group("cn");
    vigil_group_member *a = gt_join(e, g, "first", 10, NULL), *b = NULL;
    vigil_group_watcher *gw = NULL;
    int wrc = a ? vigil_group_watch(we, g, &gw) : -1;
    vigil_group_event first = { 0 }, join = { 0 };
    int n1 = wrc == 0 ? gt_next_event(gw, &first, 10000) : -1;
    if (n1 == 1)
        b = gt_join(e, g, "second", 10, NULL);
    int n2 = b ? gt_next_event(gw, &join, 10000) : -1;
    char why[256];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    vigil_group_watch_close(gw);
    int la = a ? vigil_group_leave(a) : -1, lb = b ? vigil_group_leave(b) : -1;
    vigil_etcd_close(we);
    vigil_etcd_close(e);
    int off = et_tls_auth(url, certs, false);

    EXPECT(queued, "the waiter with a CN certificate never queued");
    EXPECT(watching, "the waiter's watch never reached etcd's Watch service (started before: %lld)", w0);
    EXPECT(r0 >= 0 && r1 == r0, "the waiter renewed while it waited (%lld -> %lld): it polls, its watch is not heard",
           r0, r1);
    EXPECT_RC(rel, 0);
    EXPECT(woke && strncmp(w.buf, "got 0 ", 6) == 0, "the waiter was not woken by the release: '%s'", w.buf);
    EXPECT(q0 >= 0 && q1 == q0,
           "etcd served %lld reads, txns or renewals between the release and the waiter's return: its watch was not heard",
           q1 - q0);
    EXPECT(wst == 0, "the waiter exited %d", wst);
    EXPECT(a != NULL && wrc == 0, "join %p, watch %d ('%s')", (void *)a, wrc, why);
    EXPECT(n1 == 1 && first.type == VIGIL_GROUP_JOIN && first.initial && strcmp(first.member.name, "first") == 0,
           "the group watcher's first event: %d type %u '%s' ('%s')", n1, first.type, first.member.name, why);
    EXPECT(n2 == 1 && join.type == VIGIL_GROUP_JOIN && !join.initial && strcmp(join.member.name, "second") == 0,
           "the group watcher with a CN certificate saw no join: %d type %u '%s' ('%s')", n2, join.type,
           join.member.name, why);
    EXPECT(la == 0 && lb == 0, "leave: %d %d", la, lb);
    EXPECT(off == 0, "etcdctl could not disable auth");
    return 0;
}

/* etcdctl and vigil share a key under TLS and auth: etcdctl lock waits
 * while vigil holds, and has it once vigil lets go. */
static int test_etcdctl_under_tls_and_auth(void)
{
    NEED_TLS();
    NEED_ETCDCTL();
    EXPECT(et_tls_auth(url, certs, true) == 0, "etcdctl could not enable auth");
    vigil_etcd *e = tls_connect((struct vigil_etcd_options){ .user = ET_USER, .password = ET_USER_PW });
    const char *k = tkey("auth-ctl");
    char name[200];
    snprintf(name, sizeof(name), "%s/", k);
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, k, "vigil-holder", 5000, &l), 0);
    struct vt_proc ctl;
    EXPECT(ET_TLS_CTL(&ctl, url, certs, ET_USER ":" ET_USER_PW, "lock", k) == 0, "spawning etcdctl failed");
    bool early = vt_read_until(&ctl, name, 1000);
    vigil_lease_info info;
    int got = vigil_etcd_get(e, k, &info);
    int rel = vigil_etcd_release(e, &l);
    bool later = vt_read_until(&ctl, name, 15000);
    int busy = vigil_etcd_acquire(e, k, "vigil-again", 5000, &l);
    int st = vt_stop(&ctl, SIGTERM, 10000);
    int off = et_tls_auth(url, certs, false);
    vigil_etcd_close(e);
    EXPECT(!early, "etcdctl lock got the key while vigil held it: '%s'", ctl.buf);
    EXPECT(got == 0 && strcmp(info.owner, "vigil-holder") == 0, "get while held: %d owner %s", got, info.owner);
    EXPECT_RC(rel, 0);
    EXPECT(later, "etcdctl lock did not get the key once vigil let go: '%s'", ctl.buf);
    EXPECT_RC(busy, VIGIL_EBUSY);
    EXPECT(st == 0, "etcdctl lock exited %d on SIGTERM", st);
    EXPECT(off == 0, "etcdctl could not disable auth");
    return 0;
}

/* A vigil waiter under TLS and auth, behind `etcdctl lock`: its requests
 * and its watch carry its token; with a TTL of 10 s its renewals come
 * 3.2 s apart, past the token's 2 s idle life (--auth-token-ttl=2), so the
 * token lapses while it waits and is renewed (a refusal, then
 * authenticate again), its place kept; and it has the key once etcdctl
 * lets go, with a greater token. */
static int test_waiter_under_auth(void)
{
    NEED_TLS();
    NEED_ETCDCTL();
    EXPECT(et_tls_auth(url, certs, true) == 0, "etcdctl could not enable auth");
    vigil_etcd *e = tls_connect((struct vigil_etcd_options){ .user = ET_USER, .password = ET_USER_PW });
    const char *k = tkey("auth-wait");
    char name[200];
    snprintf(name, sizeof(name), "%s/", k);
    struct vt_proc ctl;
    EXPECT(ET_TLS_CTL(&ctl, url, certs, ET_USER ":" ET_USER_PW, "lock", k) == 0, "spawning etcdctl failed");
    bool held = vt_read_until(&ctl, name, 15000);
    vigil_lease_info info = { 0 };
    int g = vigil_etcd_get(e, k, &info);
    struct vt_proc w = { .pid = -1, .fd = -1 };
    if (held)
        waiter_spawn(&w, (struct vigil_etcd_options){ .user = ET_USER, .password = ET_USER_PW }, k, 10000);
    bool queued = w.pid > 0 && VT_WAIT_FOR(et_count_under(e, k) == 2, 10000);
    /* Its token lapses and a renewal authenticates again (nobody else
     * does meanwhile: etcdctl's stream and our idle handle need not); the
     * waiter is still waiting. */
    static const char *const authn[] = { "Authenticate", NULL };
    long long a0 = et_grpc_started(e, authn);
    bool again = queued && a0 >= 0 && VT_WAIT_FOR(et_grpc_started(e, authn) > a0, 15000);
    bool early = queued && vt_read_until(&w, "\n", 200);
    int st = vt_stop(&ctl, SIGTERM, 10000);
    bool got = early || (w.pid > 0 && vt_read_until(&w, "\n", 20000));
    close(w.fd); /* the child's go-ahead to release */
    int wst = w.pid > 0 ? vt_wait(w.pid, 10000) : -1;
    int off = et_tls_auth(url, certs, false);
    vigil_etcd_close(e);
    EXPECT(held, "etcdctl lock did not get a free key: '%s'", ctl.buf);
    EXPECT_RC(g, 0);
    EXPECT(queued, "the waiter never queued under auth");
    EXPECT(again, "the waiter's token never lapsed and was renewed (Authenticate count %lld)", a0);
    EXPECT(!early, "the waiter returned while etcdctl held the key: '%s'", w.buf);
    EXPECT(st == 0, "etcdctl lock exited %d on SIGTERM", st);
    int rc = -1;
    unsigned long long token = 0;
    EXPECT(got && sscanf(w.buf, "got %d %llu", &rc, &token) == 2 && rc == 0 && token > info.token,
           "the waiter under auth did not get the key etcdctl let go (etcdctl's token %llu): '%s'",
           (unsigned long long)info.token, w.buf);
    EXPECT(wst == 0, "the waiter exited %d", wst);
    EXPECT(off == 0, "etcdctl could not disable auth");
    return 0;
}

VT_MAIN(VT_CASE(test_mutual_tls), VT_CASE(test_tls_refusals), VT_CASE(test_namespace),
        VT_CASE(test_namespace_wait_observe), VT_CASE(test_auth),
        VT_CASE(test_cn_watches_under_auth), VT_CASE(test_etcdctl_under_tls_and_auth),
        VT_CASE(test_waiter_under_auth))
