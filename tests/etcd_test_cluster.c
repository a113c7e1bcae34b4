/* SPDX-License-Identifier: MIT */
/*
 * Description: libvigil-etcd on a 3-member cluster (tests/etcd_cluster.sh,
 * the etcd3 fixture) whose members hang and die under it. The fixture
 * itself (every member serves, one can be killed and brought back); and
 * the review's hung member: a waiter whose watch sits on a member that is
 * SIGSTOPped, or behind a proxy that sends a watch's headers and then
 * nothing, still gets the key once its holder lets go (issue 19: within
 * 2 x 0.32 x TTL), while the member stays hung; and `etcdctl lock` from
 * another client gets it after. An observer whose watch sits on the hung
 * member still sees the key change hands.
 */
#include "etcd_testutil.h"

#define TTL_MS 3000 /* the figure: a freed key seen within 2 x 0.32 x TTL = 1920 ms */

static const char *eps;

#define NEED_CLUSTER()                                                        \
    do {                                                                      \
        int need_rc_ = et_cluster(&eps);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

/* A member other than the leader (1..3), or -1. */
static int follower(void)
{
    int l = et_cluster_leader();
    return l < 0 ? -1 : l % 3 + 1;
}

/* The fixture: three members, each serving on its own; one killed and
 * restarted, the others go on. */
static int test_fixture_members(void)
{
    NEED_CLUSTER();
    vigil_lease_info info;
    for (int i = 1; i <= 3; i++) {
        vigil_etcd *e = et_connect(et_member(i));
        int rc = vigil_etcd_get(e, et_key("fixture"), &info);
        vigil_etcd_close(e);
        EXPECT(rc == VIGIL_EVACANT, "member %d (%s): get of a fresh key gave %s", i, et_member(i),
               vigil_strerror(rc));
    }
    EXPECT(strchr(eps, ',') && strchr(strchr(eps, ',') + 1, ','), "endpoints '%s': expected three", eps);
    int f = follower();
    EXPECT(f > 0, "no leader found");
    EXPECT_RC(et_cluster_do("kill", f, "KILL"), 0);
    vigil_etcd *e = et_connect(eps);
    vigil_lease l;
    int rc = vigil_etcd_acquire(e, et_key("fixture-kill"), "me", 2000, &l);
    if (rc == 0)
        rc = vigil_etcd_release(e, &l);
    int back = et_cluster_do("restart", f, NULL);
    vigil_etcd_close(e);
    EXPECT(rc == 0, "acquire and release with member %d killed: %s", f, vigil_strerror(rc));
    EXPECT(back == 0, "restart of member %d exited %d", f, back);
    e = et_connect(et_member(f));
    rc = vigil_etcd_get(e, et_key("fixture-back"), &info);
    vigil_etcd_close(e);
    EXPECT(rc == VIGIL_EVACANT, "member %d after its restart: %s", f, vigil_strerror(rc));
    return 0;
}

/* ---- a waiter in a child process --------------------------------------------- */

/* Starts a child that waits for key on endpoints (no deadline), then
 * prints "got RC TOKEN" and releases. */
static int waiter_spawn(struct vt_proc *p, const char *endpoints, const char *key)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    p->len = 0;
    p->buf[0] = '\0';
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        close(fds[0]);
        vigil_etcd *e = et_connect(endpoints);
        /* Short request limits, as a client tuned for a LAN has: a request
         * to the hung member fails in time to keep the lease, so only the
         * watch can be stuck (with the default 3 s, the lease would lapse
         * and a new place would hide the bug). */
        vigil_etcd_set_timeout(e, 300, 500);
        vigil_lease l;
        int rc = vigil_etcd_acquire_wait(e, key, "waiter", TTL_MS, UINT64_MAX, &l);
        dprintf(fds[1], "got %d %llu\n", rc, rc == 0 ? (unsigned long long)l.token : 0ull);
        if (rc == 0)
            vigil_etcd_release(e, &l);
        vigil_etcd_close(e);
        _exit(rc == 0 ? 0 : 1);
    }
    close(fds[1]);
    p->fd = fds[0];
    return 0;
}

/* Watches started on the member at url so far (-1 unknown). */
static long long watches_on(const char *url)
{
    static const char *const watch[] = { "Watch", NULL };
    vigil_etcd *e = et_connect(url);
    long long n = et_grpc_started(e, watch);
    vigil_etcd_close(e);
    return n;
}

/* How the scene below is set: where the waiter's watch goes, how to tell
 * it is there, how to silence it and how to end that. */
struct silence {
    const char *what;
    const char *endpoints; /* the waiter's, starting where its watch goes */
    long long (*watches)(void);
    int (*hang)(void);
    void (*unhang)(void);
};

/*
 * The scene of the review: A holds KEY, the waiter B queues behind it with
 * its watch where its endpoint list starts, then that watch goes silent
 * (hang); A releases (through the leader). B must get the key while the
 * watch stays silent; then unhang.
 */
static int freed_under_silent_watch(const struct silence *sc)
{
    const char *what = sc->what;
    const char *key = et_key(what);
    int leader = et_cluster_leader();
    EXPECT(leader > 0, "no leader");
    vigil_etcd *a = et_connect(et_member(leader));
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(a, key, "holder", TTL_MS, &l), 0);
    long long w0 = sc->watches();
    struct vt_proc b;
    EXPECT(waiter_spawn(&b, sc->endpoints, key) == 0, "fork failed");
    /* Queued, and its watch where it is to go silent. */
    bool queued = VT_WAIT_FOR(et_count_under(a, key) == 2, 10000) && VT_WAIT_FOR(sc->watches() > w0, 10000);
    int hung = queued ? sc->hang() : -1;
    uint64_t t0 = vt_now_ms();
    int rel = vigil_etcd_release(a, &l);
    bool got = vt_read_until(&b, "\n", 20000);
    uint64_t took = vt_now_ms() - t0;
    int st = vt_wait(b.pid, 10000);
    close(b.fd);
    /* Still hung: etcdctl lock from another client gets the key too. */
    bool ctl_ok = true;
    if (et_have_etcdctl() && got) {
        struct vt_proc ctl;
        char name[200];
        snprintf(name, sizeof(name), "%s/", key);
        ctl_ok = ET_CTL(&ctl, et_member(leader), "lock", key) == 0 && vt_read_until(&ctl, name, 15000);
        vt_stop(&ctl, SIGTERM, 10000);
    }
    sc->unhang();
    vigil_etcd_close(a);
    EXPECT(queued, "the waiter never queued with its watch at %s", sc->endpoints);
    EXPECT(hung == 0, "hanging the watch failed (%d)", hung);
    EXPECT_RC(rel, 0);
    unsigned long long token = 0;
    int rc = -1;
    EXPECT(got && sscanf(b.buf, "got %d %llu", &rc, &token) == 2 && rc == 0 && token > l.token,
           "the waiter did not get the freed key under a silent watch: '%s'", b.buf);
    EXPECT(st == 0, "the waiter exited %d", st);
    EXPECT(ctl_ok, "etcdctl lock did not get the key after the waiter let go");
    printf("%s: freed key got %llu ms after the release (TTL %d ms; 2 x 0.32 x TTL = %d ms)\n", what,
           (unsigned long long)took, TTL_MS, 2 * 32 * TTL_MS / 100);
    return 0;
}

/* ---- a member SIGSTOPped under the watch ----------------------------------------- */

static int frozen;

static long long watches_frozen(void)
{
    return watches_on(et_member(frozen));
}

static int freeze_it(void)
{
    return et_cluster_do("freeze", frozen, NULL);
}

static void thaw_it(void)
{
    et_cluster_do("thaw", frozen, NULL);
}

static int test_waiter_watch_on_hung_member(void)
{
    NEED_CLUSTER();
    frozen = follower();
    EXPECT(frozen > 0, "no leader found");
    /* The waiter's list starts at the member to be frozen: its first
     * requests and its watch go there. */
    char list[1000];
    int o1 = frozen % 3 + 1, o2 = o1 % 3 + 1;
    snprintf(list, sizeof(list), "%s,%s,%s", et_member(frozen), et_member(o1), et_member(o2));
    struct silence sc = { "hung-member", list, watches_frozen, freeze_it, thaw_it };
    return freed_under_silent_watch(&sc);
}

/* An observer whose watch sits on a member that is then SIGSTOPped still
 * sees the key change hands (its bounded re-check, and the watch moved). */
static int test_observer_on_hung_member(void)
{
    NEED_CLUSTER();
    int f = follower(), leader = et_cluster_leader();
    EXPECT(f > 0 && leader > 0, "no leader found");
    char list[1000];
    snprintf(list, sizeof(list), "%s,%s,%s", et_member(f), et_member(f % 3 + 1), et_member((f + 1) % 3 + 1));
    vigil_etcd *oe = et_connect(list), *a = et_connect(et_member(leader));
    vigil_etcd_set_timeout(oe, 300, 500);
    const char *key = et_key("observed-hung");
    long long w0 = watches_on(et_member(f));
    vigil_etcd_observer *o = NULL;
    EXPECT_RC(vigil_etcd_observe(oe, key, &o), 0);
    vigil_lease_info first = { 0 }, seen = { 0 };
    int r0 = vigil_etcd_observer_next(o, &first, 10000 * 1000000ull);
    bool watching = VT_WAIT_FOR(watches_on(et_member(f)) > w0, 10000);
    int fz = et_cluster_do("freeze", f, NULL);
    vigil_lease l;
    int acq = vigil_etcd_acquire(a, key, "while-hung", TTL_MS, &l);
    uint64_t t0 = vt_now_ms();
    int r1 = vigil_etcd_observer_next(o, &seen, 15000 * 1000000ull);
    uint64_t took = vt_now_ms() - t0;
    et_cluster_do("thaw", f, NULL);
    vigil_etcd_observer_close(o);
    if (acq == 0)
        vigil_etcd_release(a, &l);
    vigil_etcd_close(oe);
    vigil_etcd_close(a);
    EXPECT(r0 == 0 && first.state == VIGIL_LEASE_VACANT, "the observer's first report: %d state %u", r0,
           first.state);
    EXPECT(watching, "the observer's watch never reached member %d", f);
    EXPECT(fz == 0, "freeze exited %d", fz);
    EXPECT_RC(acq, 0);
    EXPECT(r1 == 0 && seen.state == VIGIL_LEASE_HELD && strcmp(seen.owner, "while-hung") == 0,
           "the observer did not see the new holder with its watch's member hung: %d state %u owner '%s'", r1,
           seen.state, seen.owner);
    printf("observer, watch on a hung member: new holder seen %llu ms after the acquire\n",
           (unsigned long long)took);
    return 0;
}

/* ---- a proxy that sends a watch's headers and then nothing ------------------------- */

static pid_t proxy_pid;
static int proxy_port, proxy_told = -1; /* the proxy writes a byte here for each watch it silences */
static long long proxy_watches;

/* Copies bytes both ways until either side closes (or 30 s of silence). */
static void splice_both(int a, int b)
{
    char buf[16384];
    for (;;) {
        struct pollfd pf[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
        if (poll(pf, 2, 30000) <= 0)
            return;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(i ? b : a, buf, sizeof(buf));
            if (n <= 0 || !et_write_all(i ? a : b, buf, (size_t)n))
                return;
        }
    }
}

/* One connection: a watch gets its headers and then silence; anything
 * else is passed to the member at upstream_port as it is. */
static _Noreturn void proxy_conn(int c, int upstream_port)
{
    char head[8192];
    size_t have = 0;
    while (!memmem(head, have, "\r\n\r\n", 4) && et_read_more(c, head, &have, sizeof(head)))
        ;
    if (have >= 14 && memcmp(head, "PRI * HTTP/2.0", 14) == 0) {
        /* An HTTP/1.1 proxy, as most are: no h2c. vigil speaks the
         * gateway through it, so its watch is one the proxy can see. */
        static const char no[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        et_write_all(c, no, sizeof(no) - 1);
        _exit(0);
    }
    if (memmem(head, have, "/watch ", 7)) {
        (void)!write(proxy_told, "W", 1);
        static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n";
        et_write_all(c, hdr, sizeof(hdr) - 1);
        while (et_read_more(c, head, &have, sizeof(head)) && (have = 0) == 0)
            ; /* and then nothing, until the client goes */
        _exit(0);
    }
    int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)upstream_port) };
    if (u < 0 || connect(u, (struct sockaddr *)&a, sizeof(a)) < 0 || !et_write_all(u, head, have))
        _exit(1);
    splice_both(c, u);
    _exit(0);
}

static int proxy_start(int upstream_port)
{
    int told[2];
    if (pipe2(told, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 16) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) < 0)
        return -1;
    proxy_port = ntohs(a.sin_port);
    fflush(NULL);
    proxy_pid = fork();
    if (proxy_pid < 0)
        return -1;
    if (proxy_pid == 0) {
        close(told[0]);
        proxy_told = told[1];
        signal(SIGPIPE, SIG_IGN);
        signal(SIGCHLD, SIG_IGN); /* connections' children reap themselves */
        for (;;) {
            struct pollfd pf = { s, POLLIN, 0 };
            if (poll(&pf, 1, 60000) <= 0)
                _exit(0);
            int c = accept(s, NULL, NULL);
            if (c < 0)
                continue;
            pid_t k = fork();
            if (k == 0)
                proxy_conn(c, upstream_port);
            close(c);
        }
    }
    close(s);
    close(told[1]);
    proxy_told = told[0];
    proxy_watches = 0;
    return 0;
}

/* Watches the proxy has silenced so far. */
static long long watches_silenced(void)
{
    char buf[64];
    ssize_t n;
    while ((n = read(proxy_told, buf, sizeof(buf))) > 0)
        proxy_watches += n;
    return proxy_watches;
}

static int no_hang(void)
{
    return 0; /* the proxy is silent from the start */
}

static void proxy_stop(void)
{
    if (proxy_pid > 0) {
        kill(proxy_pid, SIGKILL);
        vt_wait(proxy_pid, 5000);
        proxy_pid = 0;
        close(proxy_told);
    }
}

static int test_waiter_watch_behind_silent_proxy(void)
{
    NEED_CLUSTER();
    int m = follower();
    EXPECT(m > 0, "no leader found");
    const char *mu = et_member(m);
    EXPECT(proxy_start(atoi(strrchr(mu, ':') + 1)) == 0, "proxy: %s", strerror(errno));
    char list[1000], purl[64];
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", proxy_port);
    snprintf(list, sizeof(list), "%s,%s", purl, et_member(m % 3 + 1));
    /* Its requests pass through the proxy, so the waiter's requests stay
     * on it, and so does its first watch, which the proxy keeps silent. */
    struct silence sc = { "silent-proxy", list, watches_silenced, no_hang, proxy_stop };
    int rc = freed_under_silent_watch(&sc);
    proxy_stop();
    return rc;
}

VT_MAIN(VT_CASE(test_fixture_members), VT_CASE(test_waiter_watch_on_hung_member),
        VT_CASE(test_observer_on_hung_member), VT_CASE(test_waiter_watch_behind_silent_proxy))
