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

/* ---- passwords (issue 25.6) ------------------------------------------------- */

/* A fake etcd with auth on, answering by path: every txn as an acquire
 * of k2 won at revision 4 (and as a join), the lease ours for 60 s. */
#define ET_LID "5007618193102948884"
#define ET_OWN "azIvNDU3ZWEyMzcxMmFmNGExNA==" /* k2/457ea23712af4a14 */
#define ET_KV(rev) "{\"key\":\"" ET_OWN "\",\"create_revision\":\"" rev "\",\"mod_revision\":\"" rev \
                   "\",\"version\":\"1\",\"lease\":\"" ET_LID "\"}"
static const struct et_route auth_on[] = {
    { "/v3/auth/authenticate", 200, "{\"header\":{\"revision\":\"4\"},\"token\":\"tok.1\"}", false },
    { "/v3/lease/grant", 200, "{\"header\":{\"revision\":\"4\"},\"ID\":\"" ET_LID "\",\"TTL\":\"60\"}", false },
    { "/v3/kv/txn", 200,
      "{\"header\":{\"revision\":\"4\"},\"succeeded\":true,\"responses\":[{\"response_put\":{}},"
      "{\"response_range\":{\"kvs\":[" ET_KV("4") "],\"count\":\"1\"}},"
      "{\"response_range\":{\"kvs\":[" ET_KV("4") "],\"count\":\"1\"}}]}",
      false },
    { "/v3/lease/keepalive", 200, "{\"result\":{\"header\":{\"revision\":\"4\"},\"ID\":\"" ET_LID "\",\"TTL\":\"60\"}}",
      false },
    { "/v3/lease/revoke", 200, "{\"header\":{\"revision\":\"4\"}}", false },
};
/* One that refuses every name and password. */
static const struct et_route auth_refused[] = {
    { "/v3/auth/authenticate", 400,
      "{\"error\":\"etcdserver: authentication failed, invalid user ID or password\",\"code\":3,"
      "\"message\":\"etcdserver: authentication failed, invalid user ID or password\"}",
      false },
};

/* CMD (env) under vigil lock and vigil group join: no ETCDCTL_PASSWORD,
 * no ETCDCTL_USER carrying NAME:PASSWORD, whichever way it was given. */
static int test_no_password_in_cmd_env(void)
{
    struct et_fake f;
    EXPECT_RC(et_router_start(&f, auth_on, sizeof(auth_on) / sizeof(auth_on[0])), 0);
    setenv("ETCDCTL_USER", "bob", 1);
    setenv("ETCDCTL_PASSWORD", "S3cretEnv", 1);
    VT_RUN("lock", "--etcd", f.url, "--ttl", "60s", "k2", "--", "env");
    int lock_rc = R.rc;
    bool lock_clean = !strstr(R.out, "S3cretEnv") && !strstr(R.out, "ETCDCTL_PASSWORD");
    bool lock_ran = strstr(R.out, "VIGIL_LEASE_TOKEN=4") != NULL;
    static char lock_out[sizeof(R.out)];
    memcpy(lock_out, R.out, sizeof(lock_out));
    VT_RUN("group", "join", "g", "--etcd", f.url, "--name", "a", "--ttl", "60s", "--", "env");
    int join_rc = R.rc;
    bool join_clean = !strstr(R.out, "S3cretEnv") && !strstr(R.out, "ETCDCTL_PASSWORD");
    bool join_ran = strstr(R.out, "VIGIL_GROUP_TERM=4") != NULL;
    unsetenv("ETCDCTL_PASSWORD");
    setenv("ETCDCTL_USER", "bob:S3cretUser", 1);
    VT_RUN("lock", "--etcd", f.url, "--ttl", "60s", "k2", "--", "env");
    unsetenv("ETCDCTL_USER");
    et_fake_stop(&f);
    EXPECT(lock_rc == 0 && lock_ran && lock_clean, "vigil lock: exit %d, CMD's environment: '%s'", lock_rc, lock_out);
    EXPECT(join_rc == 0 && join_ran && join_clean, "vigil group join: exit %d, CMD's environment: '%s'", join_rc,
           R.out);
    EXPECT(R.rc == 0 && strstr(R.out, "VIGIL_LEASE_TOKEN=4") && !strstr(R.out, "S3cretUser"),
           "ETCDCTL_USER=NAME:PASSWORD: exit %d, CMD's environment: '%s'", R.rc, R.out);
    EXPECT(strstr(et_fake_log(&f), "\"name\":\"bob\""), "the name sent was not bob alone:\n%s", et_fake_log(&f));
    return 0;
}

/* Messages carry the user name alone: NAME:PASSWORD is split once, and
 * a password given twice is a usage error that names neither; the
 * library, given NAME:PASSWORD as the user, names NAME alone. */
static int test_no_password_in_messages(void)
{
    struct et_fake f;
    EXPECT_RC(et_router_start(&f, auth_refused, 1), 0);
    setenv("ETCDCTL_PASSWORD", "x", 1);
    VT_RUN("lock", "--etcd", f.url, "--user", "alice:alicepw", "--wait", "0", "k", "--", "true");
    unsetenv("ETCDCTL_PASSWORD");
    EXPECT(R.rc == 1 && strstr(R.err, "user 'alice'") && !strstr(R.err, "alicepw"),
           "refused NAME:PASSWORD: exit %d, '%s'", R.rc, R.err);
    EXPECT(strstr(et_fake_log(&f), "\"password\":\"alicepw\""), "the password in --user was not the one sent:\n%s",
           et_fake_log(&f));
    VT_RUN("lock", "--etcd", f.url, "--user", "alice:S3cret", "--password", "other", "k", "--", "true");
    EXPECT(R.rc == 2 && !strstr(R.err, "S3cret") && !strstr(R.err, "other") && strstr(R.err, "once"),
           "two passwords: exit %d, '%s'", R.rc, R.err);
    VT_RUN("group", "join", "g", "--etcd", f.url, "--user", "carol:pw42", "--", "true");
    EXPECT(R.rc == 1 && strstr(R.err, "'carol'") && !strstr(R.err, "pw42"), "group join refused: exit %d, '%s'", R.rc,
           R.err);
    struct vigil_etcd_options o = { .user = "dave:S3cretLib", .password = "x" };
    vigil_etcd *e = NULL;
    EXPECT_RC(vigil_etcd_connect_opts(f.url, &o, &e), 0);
    vigil_lease_info info;
    int rc = vigil_etcd_get(e, "k", &info);
    char why[300];
    snprintf(why, sizeof(why), "%s", vigil_etcd_errmsg());
    vigil_etcd_close(e);
    et_fake_stop(&f);
    EXPECT(rc == -EACCES && strstr(why, "user 'dave'") && !strstr(why, "S3cretLib"), "library: %d, '%s'", rc, why);
    return 0;
}

/* How many times needle is in s. */
static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* CMD's look at its parent, the running vigil: the environment and the
 * command line as CMD's user reads them, then the command line as
 * nobody reads it (every user may). */
/* Root without capabilities: a process of the same user as any other
 * run so, which reads another's memory and environ only when that one is
 * dumpable (without CAP_SYS_PTRACE root is a user like any), and which
 * still runs the tool from a build tree of mode 0700. */
#define AS_CAPLESS "setpriv", "--bounding-set=-all", "--inh-caps=-all"
#define LOOK_AT_VIGIL                                                                         \
    "tr '\\0' '\\n' < /proc/$PPID/environ; echo; tr '\\0' ' ' < /proc/$PPID/cmdline; echo; " \
    "setpriv --reuid=65534 --regid=65534 --clear-groups cat /proc/$PPID/cmdline | tr '\\0' ' '"

/* No other process reads vigil's password (issue 25's review): CMD (the
 * same user: here root, who reads any process's environ) finds neither
 * the password of --user NAME:PW, --password PW nor the environment's
 * in vigil's /proc/PID/environ and cmdline, only stars where they were;
 * nobody (any other user) finds none in the command line; and a vigil
 * run without privileges keeps even its environ from its CMD, of the
 * same user (non-dumpable: CMD's own exec made CMD dumpable again, not
 * vigil). */
static int test_no_password_in_proc(void)
{
    if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
        return VT_SKIP; /* another user to look from: root and setpriv(1) */
    struct et_fake f;
    EXPECT_RC(et_router_start(&f, auth_on, sizeof(auth_on) / sizeof(auth_on[0])), 0);
    setenv("ETCDCTL_PASSWORD", "EnvSecr3t", 1);
    VT_RUN("lock", "--etcd", f.url, "--user", "alice:Sup3rSecret", "--ttl", "60s", "k2", "--", "sh", "-c",
           LOOK_AT_VIGIL);
    unsetenv("ETCDCTL_PASSWORD");
    static char lock_out[sizeof(R.out)];
    int lock_rc = R.rc;
    memcpy(lock_out, R.out, sizeof(lock_out));
    setenv("ETCDCTL_USER", "carol:UserSecr3t", 1);
    VT_RUN("group", "join", "g", "--etcd", f.url, "--name", "a", "--ttl", "60s", "--user", "bob", "--password=Pw0rdArg",
           "--", "sh", "-c", LOOK_AT_VIGIL);
    unsetenv("ETCDCTL_USER");
    static char join_out[sizeof(R.out)];
    int join_rc = R.rc;
    memcpy(join_out, R.out, sizeof(join_out));
    vt_runv_via(10000, (const char *const[]){ AS_CAPLESS, NULL },
                (const char *const[]){ "lock", "--etcd", f.url, "--password", "Capl355ecret", "--user", "dave", "--ttl",
                                       "60s", "k2", "--", "sh", "-c",
                                       "cat /proc/$PPID/environ >/dev/null 2>&1 && echo environ-open || "
                                       "echo environ-closed; tr '\\0' ' ' < /proc/$PPID/cmdline",
                                       NULL });
    et_fake_stop(&f);
    EXPECT(lock_rc == 0 && strstr(lock_out, "ETCDCTL_PASSWORD=*********\n") &&
               count_of(lock_out, "--user alice:*********** ") == 2 && !strstr(lock_out, "Sup3rSecret") &&
               !strstr(lock_out, "EnvSecr3t"),
           "vigil lock: exit %d; CMD read (environ, cmdline, cmdline as nobody):\n%s", lock_rc, lock_out);
    EXPECT(join_rc == 0 && strstr(join_out, "ETCDCTL_USER=carol:**********\n") &&
               count_of(join_out, "--password=******** ") == 2 && !strstr(join_out, "Pw0rdArg") &&
               !strstr(join_out, "UserSecr3t"),
           "vigil group join: exit %d; CMD read (environ, cmdline, cmdline as nobody):\n%s", join_rc, join_out);
    EXPECT(R.rc == 0 && strncmp(R.out, "environ-closed\n", 15) == 0 && strstr(R.out, "--password ************ --user dave") &&
               !strstr(R.out, "Capl355ecret"),
           "vigil lock without privileges: exit %d; its CMD read:\n%s\nstderr: %s", R.rc, R.out, R.err);
    return 0;
}

/* ---- a server of our own, to freeze ------------------------------------------ */

static char state[512], own_url[300];

static void stop_own(void)
{
    if (state[0] && getpid() == vt_owner_pid)
        et_script("stop", state, NULL);
}

/* Starts this test's own etcd once: 0, VT_SKIP without etcd, 1 on failure. */
static int own_server(void)
{
    if (own_url[0])
        return 0;
    if (!getenv("VIGIL_ETCD_SCRIPT"))
        return VT_SKIP;
    snprintf(state, sizeof(state), "%s", vt_path("etcd"));
    int st = et_script("start", state, NULL);
    atexit(stop_own);
    EXPECT(st == 0, "etcd_server.sh start exited %d", st);
    return et_read_endpoints(state, own_url, sizeof(own_url));
}

static int test_lost_under_frozen_etcd(void)
{
    int rc = own_server();
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

/* Puts n keys, each a revision: a store well past revision n. */
static int bump_revision(const char *url, int n)
{
    vigil_etcd *e = et_connect(url);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char k[64], k64[100], body[200];
        const char *reply;
        size_t len;
        long http;
        snprintf(k, sizeof(k), "vigil-test/bump/%d", i);
        vigil_etcd__b64(k, strlen(k), k64, sizeof(k64));
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"\"}", k64);
        rc = vigil_etcd__request(e, "v3/kv/put", body, &http, &reply, &len);
        if (rc == 0 && http != 200)
            rc = -EIO;
    }
    vigil_etcd_close(e);
    return rc;
}

/*
 * Issue 25.7: etcd killed, its data removed, started again with the same
 * name, URLs and cluster token (the same cluster ID), under a holder
 * whose token (past 40) is above everything the new store has. The
 * holder's CMD is stopped (SIGTERM), vigil lock exits 79 and says the
 * store went backwards. vigil lock is stopped (SIGSTOP) while etcd is
 * wiped and continued once it serves again: it then meets the new store,
 * however long the restart took.
 */
static int test_lost_when_store_wiped(void)
{
    int rc = own_server();
    if (rc)
        return rc;
    EXPECT_RC(bump_revision(own_url, 40), 0);
    struct vt_proc p;
    int efd = open(vt_path("wipe.stderr"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = dup(2);
    dup2(efd, 2);
    int sp = VT_SPAWN(&p, "lock", "--etcd", own_url, "--ttl", "3000", "--kill-after", "2000", et_key("wiped"), "--",
                      "sh", "-c",
                      "trap 'echo killed; exit 9' TERM; echo ready $VIGIL_LEASE_TOKEN; while :; do sleep 0.05; done");
    dup2(saved, 2);
    close(saved);
    close(efd);
    EXPECT(sp == 0, "spawn failed");
    bool ready = vt_read_until(&p, "ready", 15000);
    unsigned long long token = 0;
    const char *r = strstr(p.buf, "ready ");
    if (r)
        token = strtoull(r + 6, NULL, 10);
    kill(p.pid, SIGSTOP);
    int wp = et_script("wipe", state, NULL);
    kill(p.pid, SIGCONT);
    bool killed = vt_read_until(&p, "killed", 20000);
    int exit_st = vt_wait(p.pid, 20000);
    close(p.fd);
    char err[1024];
    vt_slurp(vt_path("wipe.stderr"), err, sizeof(err));
    EXPECT(ready && token > 40, "CMD never started, or its token %llu is not past 40: '%s'", token, p.buf);
    EXPECT(wp == 0, "etcd_server.sh wipe exited %d", wp);
    EXPECT(killed, "CMD was not stopped once the store went backwards: '%s'", p.buf);
    EXPECT(exit_st == 79 && strstr(err, "lost") && strstr(err, "went backwards"),
           "expected exit 79 and the store gone backwards on stderr, got %d, '%s'", exit_st, err);
    fprintf(stderr, "etcd wiped under token %llu: %s", token, err);
    return 0;
}

VT_MAIN(VT_CASE(test_two_never_overlap), VT_CASE(test_with_etcdctl), VT_CASE(test_connection_flags_usage),
        VT_CASE(test_lost_under_frozen_etcd), VT_CASE(test_lost_when_store_wiped), VT_CASE(test_no_password_in_cmd_env),
        VT_CASE(test_no_password_in_messages), VT_CASE(test_no_password_in_proc))
