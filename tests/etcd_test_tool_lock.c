/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil lock --etcd` against a real etcd: two vigil lock
 * processes on one key never run their commands at once, the second runs
 * after the first, and the token rises; vigil lock and `etcdctl lock`
 * exclude each other (--wait 0 gives 75 while etcdctl holds, a waiting
 * vigil lock runs once etcdctl lets go); and on a server of the test's
 * own, SIGSTOPped under a running CMD, the lease is lost locally within
 * about its TTL: CMD is killed and vigil lock exits 79. The etcd
 * connection flags: usage errors, and the ETCDCTL_* variables.
 */
#include "etcd_testutil.h"
#include "locktest.h"

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static int test_two_never_overlap(void)
{
    NEED_ETCD();
    return lt_two_never_overlap("--etcd", url, et_key("tool-two"), vt_path("order.log"));
}

static int test_with_etcdctl(void)
{
    NEED_ETCD();
    NEED_ETCDCTL();
    const char *key = et_key("tool-ctl");
    char name[200];
    snprintf(name, sizeof(name), "%s/", key);
    struct vt_proc ctl;
    EXPECT(ET_CTL(&ctl, url, "lock", key) == 0, "spawning etcdctl lock failed");
    bool held = vt_read_until(&ctl, name, 15000);
    VT_RUN("lock", "--etcd", url, "--wait", "0", key, "--", "true");
    int busy = R.rc;
    static char busy_err[sizeof(R.err)];
    memcpy(busy_err, R.err, sizeof(busy_err));
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "lock", "--etcd", url, key, "--", "sh", "-c", "echo ran $VIGIL_LEASE_TOKEN");
    bool early = sp == 0 && vt_read_until(&p, "ran", 1000);
    int st = vt_stop(&ctl, SIGTERM, 10000);
    bool ran = sp == 0 && vt_read_until(&p, "ran", 15000);
    int pst = sp == 0 ? vt_wait(p.pid, 15000) : -1;
    if (sp == 0)
        close(p.fd);
    EXPECT(held, "etcdctl lock did not get a free key: '%s'", ctl.buf);
    EXPECT(busy == 75 && strstr(busy_err, key), "vigil lock --wait 0 while etcdctl holds: exit %d, '%s'", busy,
           busy_err);
    EXPECT(!early, "vigil lock's CMD ran while etcdctl held the lock: '%s'", p.buf);
    EXPECT(st == 0, "etcdctl lock exited %d on SIGTERM", st);
    EXPECT(ran && pst == 0, "vigil lock after etcdctl let go: exit %d, '%s'", pst, p.buf);
    return 0;
}

/* The connection flags (tools/etcd_opts.c): what does not make sense is a
 * usage error naming the flag, before anything is asked of etcd; the
 * ETCDCTL_* variables stand in for absent flags. */
static int test_connection_flags_usage(void)
{
    NEED_ETCD();
    static const struct {
        const char *env, *val, *flag, *arg, *want;
    } cases[] = {
        { NULL, NULL, "--password", "pw", "--password without --user" },
        { "ETCDCTL_PASSWORD", "pw", NULL, NULL, "--password without --user" },
        { NULL, NULL, "--user", "bob", "no password" },
        { "ETCDCTL_USER", "bob", NULL, NULL, "no password" },
        { NULL, NULL, "--user", ":pw", "empty name" },
        { NULL, NULL, "--key", "k.pem", "--key without --cert" },
        { "ETCDCTL_KEY", "k.pem", NULL, NULL, "--key without --cert" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].env)
            setenv(cases[i].env, cases[i].val, 1);
        if (cases[i].flag)
            VT_RUN("lock", "--etcd", url, cases[i].flag, cases[i].arg, "k", "--", "true");
        else
            VT_RUN("lock", "--etcd", url, "k", "--", "true");
        if (cases[i].env)
            unsetenv(cases[i].env);
        EXPECT(R.rc == 2 && strstr(R.err, cases[i].want), "case %zu (%s%s%s): expected exit 2 and '%s', got %d, '%s'",
               i, cases[i].env ? cases[i].env : cases[i].flag, cases[i].env ? "=" : " ",
               cases[i].env ? cases[i].val : cases[i].arg, cases[i].want, R.rc, R.err);
    }
    VT_RUN("lock", "--store", vt_path("s.leases"), "--cacert", "ca.pem", "k", "--", "true");
    EXPECT(R.rc == 2 && strstr(R.err, "--etcd"), "--cacert with --store: expected exit 2, got %d, '%s'", R.rc, R.err);
    setenv("ETCDCTL_USER", "", 1); /* empty: absent */
    VT_RUN("lock", "--etcd", url, "--wait", "0", et_key("flags-plain"), "--", "true");
    unsetenv("ETCDCTL_USER");
    EXPECT(R.rc == 0, "an empty ETCDCTL_USER is absent: expected exit 0, got %d, '%s'", R.rc, R.err);
    return 0;
}

/* ---- a server of our own, to freeze ------------------------------------------ */

static char state[512], own_url[300];

static void stop_own(void)
{
    if (state[0] && getpid() == vt_owner_pid)
        et_script("stop", state, NULL);
}

static int test_lost_under_frozen_etcd(void)
{
    if (!getenv("VIGIL_ETCD_SCRIPT"))
        return VT_SKIP;
    snprintf(state, sizeof(state), "%s", vt_path("etcd"));
    int st = et_script("start", state, NULL);
    atexit(stop_own);
    EXPECT(st == 0, "etcd_server.sh start exited %d", st);
    int rc = et_read_endpoints(state, own_url, sizeof(own_url));
    if (rc)
        return rc;
    struct vt_proc p;
    int efd = open(vt_path("lock.stderr"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = fcntl(2, F_DUPFD_CLOEXEC, 3); /* not inherited by the tool, nor by its CMD */
    dup2(efd, 2);
    int sp = VT_SPAWN(&p, "lock", "--etcd", own_url, "--ttl", "2000", "--kill-after", "1000", et_key("frozen"), "--",
                      "sh", "-c", "trap 'echo killed; exit 9' TERM; echo ready; while :; do sleep 0.05; done");
    dup2(saved, 2);
    close(saved);
    close(efd);
    EXPECT(sp == 0, "spawn failed");
    bool ready = vt_read_until(&p, "ready", 15000);
    uint64_t frozen_at = vt_now_ms();
    int fz = et_script("freeze", state, NULL);
    /* Local expiry: within the TTL (2 s) of the last renewal, with no
     * answer from anyone. Bounded well past that. */
    bool killed = vt_read_until(&p, "killed", 15000);
    uint64_t lost_after = vt_now_ms() - frozen_at;
    int exit_st = vt_wait(p.pid, 15000);
    close(p.fd);
    et_script("thaw", state, NULL);
    char err[1024];
    vt_slurp(vt_path("lock.stderr"), err, sizeof(err));
    EXPECT(ready, "CMD never started: '%s'", p.buf);
    EXPECT(fz == 0, "etcd_server.sh freeze exited %d", fz);
    EXPECT(killed, "CMD was not told of the loss with etcd frozen: '%s'", p.buf);
    EXPECT(exit_st == 79 && strstr(err, "lost"), "expected exit 79 and the loss on stderr, got %d, '%s'", exit_st, err);
    fprintf(stderr, "etcd frozen: CMD got SIGTERM %llu ms later (TTL 2000 ms)\n", (unsigned long long)lost_after);
    return 0;
}

VT_MAIN(VT_CASE(test_two_never_overlap), VT_CASE(test_with_etcdctl), VT_CASE(test_connection_flags_usage),
        VT_CASE(test_lost_under_frozen_etcd))
