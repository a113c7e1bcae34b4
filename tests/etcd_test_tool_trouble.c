/* SPDX-License-Identifier: MIT */
/*
 * etcd trouble said out loud (issue 31): `vigil group watch`, `group join`
 * and `agent`, talking to etcd through a relay the test kills and starts
 * again (relaytest.h), each write one line when etcd stops answering
 * (the endpoint and the refusal) and one when it answers again, once
 * each; `vigil lock --wait` that ends names the refused connection.
 */
#include "grouptest.h"
#include "relaytest.h"
#include "tooltest.h"

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

#define DOWN_LINE "etcd unreachable"
#define BACK_LINE "etcd reachable again"

/* p, running through relay r: r taken away, then given back once p said
 * so; each said exactly once, naming the relay's endpoint and the
 * refusal. 0, or 1 after saying what went wrong. */
static int down_and_back(struct vt_proc *p, struct vt_relay *r, const char *who)
{
    vt_relay_down(r);
    EXPECT(vt_read_until(p, DOWN_LINE, 20000), "%s said nothing of etcd gone: '%s'", who, p->buf);
    EXPECT(vt_read_until(p, "trying again\n", 5000), "%s: no whole line: '%s'", who, p->buf);
    const char *line = strstr(p->buf, DOWN_LINE);
    EXPECT(strstr(line, r->url) && strstr(line, "refused"), "%s's line names neither endpoint nor refusal: '%s'", who,
           line);
    EXPECT(vt_relay_up(r) == 0, "relay did not come back");
    EXPECT(vt_read_until(p, BACK_LINE, 20000), "%s said nothing of etcd back: '%s'", who, p->buf);
    EXPECT(vt_read_until(p, "\n", 5000), "no whole line");
    EXPECT(vt_occurs(p->buf, DOWN_LINE) == 1 && vt_occurs(p->buf, BACK_LINE) == 1,
           "%s: each line once, not: '%s'", who, p->buf);
    return 0;
}

static int test_watch(void)
{
    NEED_ETCD();
    const char *g = gt_group("trw");
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    vigil_etcd *e = et_connect(url);
    vigil_group_member *m = gt_join(e, g, "steady", 30000, NULL);
    EXPECT(m, "join failed");
    struct vt_proc w;
    EXPECT(VT_SPAWN2(&w, "group", "watch", g, "--etcd", r.url) == 0, "spawn failed");
    EXPECT(vt_read_until(&w, "steady", 15000), "watch printed no join: '%s'", w.buf);
    if (down_and_back(&w, &r, "group watch"))
        return 1;
    /* Still watching: a join after the outage is seen. */
    vigil_group_member *m2 = gt_join(e, g, "after", 30000, NULL);
    EXPECT(m2 && vt_read_until(&w, "after", 20000), "watch did not see a join after etcd came back: '%s'", w.buf);
    EXPECT(vt_stop_tool(&w, SIGTERM, 10000) == 0, "watch did not end cleanly");
    EXPECT_RC(vigil_group_leave(m2), 0);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(e);
    vt_relay_down(&r);
    return 0;
}

static int test_join(void)
{
    NEED_ETCD();
    const char *g = gt_group("trj");
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    struct vt_proc p;
    /* Renewed every 6.4 s: the first one after the relay goes fails, the
     * next, with the relay back as soon as that was said, lands well
     * inside the TTL, so the membership outlives the outage. */
    EXPECT(VT_SPAWN2(&p, "group", "join", g, "--etcd", r.url, "--ttl", "20s", "--", "sh", "-c",
                     "echo up; while :; do sleep 0.1; done") == 0,
           "spawn failed");
    EXPECT(vt_read_until(&p, "up", 15000), "CMD did not start: '%s'", p.buf);
    if (down_and_back(&p, &r, "group join"))
        return 1;
    EXPECT(vt_stop_tool(&p, SIGTERM, 15000) == 128 + SIGTERM, "join did not end with CMD on SIGTERM");
    vt_relay_down(&r);
    return 0;
}

static int test_agent(void)
{
    NEED_ETCD();
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", vt_path("trouble-host"));
    struct vt_proc a;
    EXPECT(VT_SPAWN2(&a, "agent", "--etcd", r.url, "--dir", dir) == 0, "spawn failed");
    EXPECT(vt_read_until(&a, "watching", 15000), "agent not ready: '%s'", a.buf);
    if (down_and_back(&a, &r, "agent"))
        return 1;
    EXPECT(vt_stop_tool(&a, SIGTERM, 10000) == 0, "agent did not end cleanly");
    vt_relay_down(&r);
    return 0;
}

/* A wait that ends names what it met: the refused connection. */
static int test_lock_wait_says_why(void)
{
    NEED_ETCD();
    char dead[64];
    snprintf(dead, sizeof(dead), "http://127.0.0.1:%d", et_closed_port());
    VT_RUN("lock", "--etcd", dead, "--wait", "1s", "k", "--", "true");
    /* In the line that ends the wait, not only in the trouble line before it. */
    const char *end = strstr(R.err, "not acquired within 1s"), *nl = end ? strchr(end, '\n') : NULL;
    char last[1024] = "";
    if (end)
        snprintf(last, sizeof(last), "%.*s", nl ? (int)(nl - end) : (int)strlen(end), end);
    EXPECT(R.rc == 75 && strstr(last, "refused") && strstr(last, dead), "lock --wait on a dead etcd: exit %d, '%s'",
           R.rc, R.err);
    /* The live etcd held by another: the holder, and no trouble to tell. */
    vigil_etcd *e = et_connect(url);
    vigil_lease l;
    const char *key = et_key("trouble-lock");
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 30000, &l), 0);
    VT_RUN("lock", "--etcd", url, "--wait", "300ms", key, "--", "true");
    EXPECT(R.rc == 75 && strstr(R.err, "held by 'holder'") && !strstr(R.err, "unreachable") &&
               !strstr(R.err, "error met"),
           "lock --wait on a held key: exit %d, '%s'", R.rc, R.err);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    vigil_etcd_close(e);
    return 0;
}

/* An endpoint with a password in it is refused (a usage error that does
 * not repeat it): the trouble lines, the errors and the health record
 * print endpoints. --user is the way. */
static int test_password_in_endpoint_refused(void)
{
    NEED_ETCD();
    const char *host = strstr(url, "://") + 3;
    char with[300], bare[300];
    snprintf(with, sizeof(with), "http://someone:s3cr3tpw@%s", host);
    snprintf(bare, sizeof(bare), "someone:s3cr3tpw@%s", host);
    const char *const lists[] = { with, bare };
    for (int i = 0; i < 2; i++) {
        VT_RUN("lock", "--etcd", lists[i], "--wait", "0", "k", "--", "true");
        EXPECT(R.rc == 2 && strstr(R.err, "--user") && !strstr(R.err, "s3cr3tpw"), "lock --etcd %s: exit %d, '%s'",
               lists[i], R.rc, R.err);
        VT_RUN("group", "join", "g", "--endpoints", lists[i], "--leader-only", "--", "true");
        EXPECT(R.rc == 2 && !strstr(R.err, "s3cr3tpw"), "group join --endpoints: exit %d, '%s'", R.rc, R.err);
        VT_RUN("group", "watch", "g", "--etcd", lists[i]);
        EXPECT(R.rc == 2 && !strstr(R.err, "s3cr3tpw"), "group watch: exit %d, '%s'", R.rc, R.err);
    }
    setenv("ETCDCTL_ENDPOINTS", with, 1);
    VT_RUN("agent", "--dir", vt_path("agentdir"));
    unsetenv("ETCDCTL_ENDPOINTS");
    EXPECT(R.rc == 2 && strstr(R.err, "ETCDCTL_ENDPOINTS") && !strstr(R.err, "s3cr3tpw"),
           "agent with ETCDCTL_ENDPOINTS: exit %d, '%s'", R.rc, R.err);
    /* An '@' past the host (in a path) is no user. */
    char path_at[300];
    snprintf(path_at, sizeof(path_at), "%s/a@b", url);
    VT_RUN("group", "ls", et_key("no-such-group"), "--etcd", path_at);
    EXPECT(R.rc != 2, "an '@' in the path refused: '%s'", R.err);
    return 0;
}

VT_MAIN(VT_CASE(test_watch), VT_CASE(test_join), VT_CASE(test_agent), VT_CASE(test_lock_wait_says_why),
        VT_CASE(test_password_in_endpoint_refused))
