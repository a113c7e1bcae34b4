/* SPDX-License-Identifier: MIT */
/*
 * `vigil group join|watch|ls` and `vigil agent` against a real etcd: CMD
 * runs as a member with its environment and its exit status; ls and watch
 * --json print the documented fields; a name taken exits 75; a membership
 * revoked under CMD ends it and exits 79; a set-user-ID CMD run by an
 * unprivileged user dies with a tool killed by SIGKILL; the agent revokes a member whose
 * tool process is killed -9, and a member started with VIGIL_DIR set is
 * recorded there.
 */
#include "grouptest.h"
#include "tooltest.h"

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static int test_join_runs_cmd(void)
{
    NEED_ETCD();
    const char *g = gt_group("tj");
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "group", "join", g, "--etcd", url, "--name", "worker-1", "--ttl", "5s", "--", "sh", "-c",
                    "trap 'exit 7' TERM; echo env $VIGIL_GROUP $VIGIL_MEMBER $VIGIL_GROUP_TERM; while :; do sleep 0.1; done") == 0,
           "spawn failed");
    EXPECT(vt_read_until(&p, "env ", 15000), "no output from CMD: '%s'", p.buf);
    EXPECT(vt_read_until(&p, "\n", 5000), "no whole line");
    char eg[128], em[80];
    unsigned long long term = 0;
    EXPECT(sscanf(strstr(p.buf, "env "), "env %127s %79s %llu", eg, em, &term) == 3 && strcmp(eg, g) == 0 &&
               strcmp(em, "worker-1") == 0 && term > 0,
           "CMD's environment: '%s'", p.buf);
    VT_RUN("group", "ls", g, "--etcd", url, "--json");
    struct vj *j = vj_parse(R.out);
    const char *const keys[] = { "group", "leader", "term", "members", NULL };
    EXPECT(R.rc == 0 && j && vj_keys_are(j, keys) && vj_is_str(vj_get(j, "leader"), "worker-1") &&
               vj_count(vj_get(j, "members")) == 1,
           "ls --json: exit %d, '%s'", R.rc, R.out);
    uint64_t t = 0;
    EXPECT(vj_u64(vj_get(j, "term"), &t) && t == term, "ls term %llu, CMD's %llu", (unsigned long long)t, term);
    const struct vj *m0 = vj_get(j, "members")->child;
    const char *const mkeys[] = { "name", "host", "pid", "revision", "lease", "vigil", NULL };
    EXPECT(vj_keys_are(m0, mkeys), "member fields: '%s'", R.out);
    /* A second member with the same name: 75. */
    VT_RUN("group", "join", g, "--etcd", url, "--name", "worker-1", "--", "true");
    EXPECT(R.rc == 75 && strstr(R.err, "worker-1"), "a name taken: exit %d, '%s'", R.rc, R.err);
    int st = vt_stop(&p, SIGTERM, 15000); /* passed on to CMD, which exits 7 */
    EXPECT(st == 7, "join after SIGTERM: %d", st);
    VT_RUN("group", "ls", g, "--etcd", url);
    EXPECT(R.rc == 0 && strstr(R.out, "0 members"), "after CMD ended: '%s'", R.out);
    /* CMD's exit status is the tool's. */
    VT_RUN("group", "join", g, "--etcd", url, "--", "sh", "-c", "exit 7");
    EXPECT(R.rc == 7, "exit of CMD 7: tool %d, '%s'", R.rc, R.err);
    return 0;
}

static int test_usage(void)
{
    NEED_ETCD();
    EXPECT(VT_RUN("group", "join", "g", "--", "true") == 2, "no --etcd: %d", R.rc);
    EXPECT(VT_RUN("group", "join", "g", "--etcd", url) == 2, "no CMD: %d", R.rc);
    EXPECT(VT_RUN("group", "join", "g", "--etcd", url, "--ttl", "soon", "--", "true") == 2, "bad ttl: %d", R.rc);
    EXPECT(VT_RUN("group", "frob", "g") == 2, "unknown subcommand: %d", R.rc);
    EXPECT(VT_RUN("group", "ls", "--etcd", url) == 2, "ls without GROUP: %d", R.rc);
    EXPECT(VT_RUN("agent", "--etcd", url) == 2, "agent without --dir: %d", R.rc);
    EXPECT(VT_RUN("group", "--help") == 0 && strstr(R.out, "group join"), "help: '%s'", R.out);
    EXPECT(VT_RUN("group", "join", "--help") == 0 && strstr(R.out, "VIGIL_GROUP_TERM"), "join help: '%s'", R.out);
    return 0;
}

/* The watch's JSON line for event on name, within timeout_ms: parsed. */
static struct vj *watch_line(struct vt_proc *w, const char *event, const char *name, unsigned timeout_ms)
{
    char needle[160];
    snprintf(needle, sizeof(needle), "{\"event\": \"%s\", \"name\": \"%s\"", event, name);
    if (!vt_read_until(w, needle, timeout_ms))
        return NULL;
    char *at = strstr(w->buf, needle), *nl;
    uint64_t deadline = vt_now_ms() + timeout_ms;
    while (!(nl = strchr(at, '\n')) && vt_now_ms() < deadline) {
        size_t off = (size_t)(at - w->buf);
        vt_read_until(w, "\n\n", 50); /* more bytes, or the time: then look again */
        at = w->buf + off;
    }
    if (!nl)
        return NULL;
    *nl = '\0';
    struct vj *j = vj_parse(at);
    *nl = '\n';
    return j;
}

static int test_watch_json_and_loss(void)
{
    NEED_ETCD();
    const char *g = gt_group("tw");
    struct vt_proc w, p;
    EXPECT(VT_SPAWN(&w, "group", "watch", g, "--etcd", url, "--json") == 0, "spawn failed");
    EXPECT(VT_SPAWN(&p, "group", "join", g, "--etcd", url, "--name", "doomed", "--kill-after", "2s", "--", "sh", "-c",
                    "trap 'echo got-term; exit 3' TERM; echo up; while :; do sleep 0.1; done") == 0,
           "spawn failed");
    struct vj *j = watch_line(&w, "join", "doomed", 15000);
    const char *const keys[] = { "event", "name", "pid", "host", "revision", "time", NULL };
    EXPECT(j && vj_keys_are(j, keys), "watch's join line: '%s'", w.buf);
    uint64_t pid = 0, rev = 0;
    EXPECT(vj_u64(vj_get(j, "pid"), &pid) && pid == (uint64_t)p.pid && vj_u64(vj_get(j, "revision"), &rev) && rev > 0,
           "pid %llu (the tool's is %d), revision %llu", (unsigned long long)pid, (int)p.pid, (unsigned long long)rev);
    EXPECT(vt_read_until(&p, "up", 15000), "CMD did not start: '%s'", p.buf);
    /* The membership revoked behind the tool's back: CMD is ended, 79. */
    vigil_etcd *e = et_connect(url);
    vigil_group_member_info m;
    EXPECT_RC(vigil_group_leader(e, g, &m), 0);
    char body[64];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)m.lease);
    EXPECT_RC(vigil_etcd__request(e, "v3/lease/revoke", body, &http, &reply, &len), 0);
    j = watch_line(&w, "leave", "doomed", 15000);
    EXPECT(j, "watch's leave line: '%s'", w.buf);
    EXPECT(vt_read_until(&p, "got-term", 20000), "CMD not sent SIGTERM on the loss: '%s'", p.buf);
    int st = vt_wait(p.pid, 20000);
    close(p.fd);
    EXPECT(st == 79, "join after the loss: exit %d", st);
    EXPECT(vt_stop(&w, SIGTERM, 10000) == 0, "watch did not end cleanly on SIGTERM");
    vigil_etcd_close(e);
    return 0;
}

/* The agent revokes the lease of a member whose tool is killed -9; a
 * member started with VIGIL_DIR in its environment records there. */
static int test_agent(void)
{
    NEED_ETCD();
    const char *g = gt_group("ta");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", vt_path("host"));
    struct vt_proc a, p;
    EXPECT(VT_SPAWN(&a, "agent", "--etcd", url, "--dir", dir, "--json") == 0, "spawn failed");
    EXPECT(vt_read_until(&a, "\"ready\"", 15000), "agent not ready: '%s'", a.buf);
    setenv("VIGIL_DIR", dir, 1);
    int sp = VT_SPAWN(&p, "group", "join", g, "--etcd", url, "--name", "rec", "--ttl", "2m", "--", "sh", "-c",
                      "echo up; exec sleep 600");
    unsetenv("VIGIL_DIR");
    EXPECT(sp == 0 && vt_read_until(&p, "up", 15000), "member did not start: '%s'", p.buf);
    vigil_etcd *e = et_connect(url);
    EXPECT(gt_count(e, g) == 1, "not a member");
    /* The member's record is there: the tool's, named after its lease. */
    vigil_group_member_info m;
    EXPECT_RC(vigil_group_leader(e, g, &m), 0);
    char rec[700];
    snprintf(rec, sizeof(rec), "%s/vigil-%llx.lease", dir, (unsigned long long)m.lease);
    EXPECT(access(rec, F_OK) == 0, "no record %s", rec);
    kill(p.pid, SIGKILL);
    vt_wait(p.pid, 10000);
    close(p.fd);
    char want[64];
    snprintf(want, sizeof(want), "\"lease\": \"%llx\"", (unsigned long long)m.lease);
    EXPECT(vt_read_until(&a, want, 20000) && strstr(a.buf, "\"revoked\""), "agent: '%s'", a.buf);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 0, 10000), "still a member after the agent's revoke");
    EXPECT(VT_WAIT_FOR(access(rec, F_OK) != 0, 10000), "record %s not removed", rec);
    EXPECT(vt_stop(&a, SIGTERM, 10000) == 0, "agent did not end cleanly");
    vigil_etcd_close(e);
    return 0;
}

/* As nobody, `vigil group join -- CMD` with a set-user-ID root CMD: once
 * CMD has said it runs, the tool gets SIGKILL, and CMD must go with it
 * (issue 32: the kernel clears PR_SET_PDEATHSIG at a set-user-ID exec,
 * which was all that tied CMD to the tool). */
static int join_suid_body(void *arg)
{
    const char *cmd_path = arg;
    struct vt_proc p;
    if (VT_SPAWN(&p, "group", "join", gt_group("tsuid"), "--etcd", url, "--ttl", "1m", "--", cmd_path) != 0)
        return 1;
    return vt_suid_tool_killed(&p, "group join");
}

static int test_join_suid_cmd_dies_with_tool(void)
{
    NEED_ETCD();
    const char *copy = vt_suid_copy();
    if (!copy)
        return VT_SKIP;
    return vt_as_nobody(join_suid_body, (void *)copy);
}

/* vigil export --etcd --group: the group's gauges, as the exposition format wants. */
static int test_export(void)
{
    NEED_ETCD();
    const char *g = gt_group("te");
    vigil_etcd *e = et_connect(url);
    vigil_group_member *m = gt_join(e, g, "m", 5000, NULL);
    EXPECT(m, "join failed");
    EXPECT_RC(vigil_group_add(e, g, "a"), 0);
    EXPECT_RC(vigil_group_add(e, g, "b"), 0);
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(m, &u), 0);
    EXPECT_RC(vigil_group_barrier_wait(m, 0, 10000000000ull), VIGIL_SERIAL);
    VT_RUN("export", "--etcd", url, "--group", g);
    char want[5][256];
    snprintf(want[0], sizeof(want[0]), "vigil_group_up{group=\"%s\"} 1\n", g);
    snprintf(want[1], sizeof(want[1]), "vigil_group_members{group=\"%s\"} 1\n", g);
    snprintf(want[2], sizeof(want[2]), "vigil_group_units{group=\"%s\",state=\"free\"} 1\n", g);
    snprintf(want[3], sizeof(want[3]), "vigil_group_units{group=\"%s\",state=\"owned\"} 1\n", g);
    snprintf(want[4], sizeof(want[4]), "vigil_group_round{group=\"%s\"} 1\n", g);
    EXPECT(R.rc == 0, "export: exit %d, '%s'", R.rc, R.err);
    for (int i = 0; i < 5; i++)
        EXPECT(strstr(R.out, want[i]), "export lacks '%s': '%s'", want[i], R.out);
    EXPECT(VT_RUN("export", "--group", g) == 2, "--group without --etcd: %d", R.rc);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(e);
    return 0;
}

/* Join errors say what happened (issue 25.4): a lease gone before the
 * join landed (a fake etcd answers the join "lease not found", as when
 * an agent revoked it) is a loss, exit 79, never a timeout that was not
 * one (a name taken, the refusal, is test_join_runs_cmd's exit 75); and
 * in a group's words, not VIGIL_ELOST's text of leases refused and
 * failover. */
static int test_join_errors_say_what_happened(void)
{
    static const char GRANT[] = "{\"header\":{\"revision\":\"3\"},\"ID\":\"7587\",\"TTL\":\"10\"}";
    static const char NOT_FOUND[] = "{\"error\":\"etcdserver: requested lease not found\","
                                    "\"message\":\"etcdserver: requested lease not found\",\"code\":5}";
    static const struct et_reply script[] = {
        { ET_REPLY, 200, GRANT }, { ET_REPLY, 404, NOT_FOUND }, /* the join */
        { ET_REPLY, 404, NOT_FOUND },                           /* the undo's revoke */
    };
    struct et_fake f;
    EXPECT_RC(et_fake_start(&f, script, sizeof(script) / sizeof(script[0])), 0);
    VT_RUN("group", "join", "g", "--etcd", f.url, "--name", "a", "--", "sh", "-c", "echo ran");
    et_fake_stop(&f);
    EXPECT(R.rc == 79 && strstr(R.err, "lost before CMD started") && strstr(R.err, "gone before its join") &&
               !strstr(R.err, "timed out") && !strstr(R.err, "failover") && !strstr(R.err, "refused") &&
               !strstr(R.out, "ran"),
           "join whose lease went first: exit %d, '%s', out '%s'", R.rc, R.err, R.out);
    return 0;
}

VT_MAIN(VT_CASE(test_join_runs_cmd), VT_CASE(test_join_suid_cmd_dies_with_tool), VT_CASE(test_export), VT_CASE(test_usage), VT_CASE(test_watch_json_and_loss), VT_CASE(test_agent),
        VT_CASE(test_join_errors_say_what_happened))
