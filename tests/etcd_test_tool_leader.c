/* SPDX-License-Identifier: MIT */
/*
 * Leadership told, by the tool (issue 31): `vigil group watch --json`
 * prints {"event": "leader", "name", "term", "revision", "time"} for the
 * leader at the start and each change after, each term once; `vigil
 * group join --leader-only -- CMD` runs CMD only while the member leads:
 * a follower's CMD waits; the leader's tool killed with kill -9 takes its
 * CMD with it, and the next leader's CMD starts alone, under its own
 * term; a leader's tool stopped (SIGSTOP) past its TTL is replaced, and
 * once continued stops its CMD (SIGTERM), joins again behind the new
 * leader, and runs CMD again under a new term when it leads again; a
 * stop signal ends a follower with 0 and a leader with CMD's status. The
 * test decides every kill and stop.
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

/* CMD for a member called X: starts a worker of its own ("X-bg PID", a
 * sleep that ends only with its process group), says it runs and under
 * which term ("X-run TERM X-ok"), "X-overlap" first if the process
 * $PEER_PID still runs, "X-term" on SIGTERM and exits 3 (or, deaf, ignores
 * SIGTERM); writes its pid to pidfile. */
static void cmd_for_as(char *buf, size_t cap, const char *x, const char *pidfile, bool deaf)
{
    snprintf(buf, cap,
             "echo $$ > %s; trap '%s%s%s' TERM; sleep 100000 & echo %s-bg $!; "
             "if [ -n \"$PEER_PID\" ] && [ -e /proc/$PEER_PID ] && ! grep -q ') Z' /proc/$PEER_PID/stat; "
             "then echo %s-overlap; fi; echo %s-run $VIGIL_GROUP_TERM %s-ok; while :; do sleep 0.1; done",
             pidfile, deaf ? "" : "echo ", deaf ? "" : x, deaf ? "" : "-term; exit 3", x, x, x, x);
}

static void cmd_for(char *buf, size_t cap, const char *x, const char *pidfile)
{
    cmd_for_as(buf, cap, x, pidfile, false);
}

/* The number after "X-WHAT " the n-th time (from 1), or 0. */
static unsigned long long said(const struct vt_proc *p, const char *x, const char *what, int n)
{
    char needle[32];
    snprintf(needle, sizeof(needle), "%s-%s ", x, what);
    const char *at = p->buf;
    for (int i = 0; i < n; i++) {
        if (!(at = strstr(at, needle)))
            return 0;
        at += strlen(needle);
    }
    return strtoull(at, NULL, 10);
}

/* The term X's CMD said it runs under (the n-th time, from 1), or 0. */
static unsigned long long term_of(const struct vt_proc *p, const char *x, int n)
{
    return said(p, x, "run", n);
}

/* The worker X's CMD started (the n-th time), or 0. */
static pid_t bg_of(const struct vt_proc *p, const char *x, int n)
{
    return (pid_t)said(p, x, "bg", n);
}

/* Process pid's state letter (/proc/PID/stat), or 0. */
static char proc_state(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    vt_slurp(path, buf, sizeof(buf));
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

static int read_pid(const char *path)
{
    char buf[32];
    vt_slurp(path, buf, sizeof(buf));
    return atoi(buf);
}

/* Reads until needle occurs k times in p's output, within timeout_ms. */
static bool read_until_n(struct vt_proc *p, const char *needle, int k, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    while (vt_occurs(p->buf, needle) < k) {
        uint64_t now = vt_now_ms();
        if (now >= deadline || p->len + 1 >= sizeof(p->buf))
            return false;
        vt_read_until(p, "\001", (unsigned)(deadline - now < 200 ? deadline - now : 200)); /* more, or the time */
    }
    return true;
}

/* X's CMD has said it runs, n times, each line whole. */
static bool runs(struct vt_proc *p, const char *x, int n, unsigned timeout_ms)
{
    char ok[16];
    snprintf(ok, sizeof(ok), "%s-ok", x);
    return read_until_n(p, ok, n, timeout_ms);
}

/* The leader lines of a --json watch's output, each line's keys checked:
 * their names in order, "-" for none. Their number, or -1. */
static int leader_lines(const char *out, char names[][64], int max)
{
    int n = 0;
    const char *const keys[] = { "event", "name", "term", "revision", "time", NULL };
    for (const char *l = strstr(out, "{\"event\": \"leader\""); l; l = strstr(l + 1, "{\"event\": \"leader\"")) {
        const char *nl = strchr(l, '\n');
        if (!nl || n == max)
            return -1;
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)(nl - l), l);
        struct vj *j = vj_parse(line);
        if (!j || !vj_keys_are(j, keys))
            return -1;
        const struct vj *name = vj_get(j, "name"), *term = vj_get(j, "term");
        uint64_t t;
        if (name && name->type == VJ_STR && vj_u64(term, &t) && t > 0)
            snprintf(names[n++], 64, "%s", name->str);
        else if (name && name->type == VJ_NULL && term && term->type == VJ_NULL)
            snprintf(names[n++], 64, "-");
        else
            return -1;
    }
    return n;
}

static int test_leader_only_kill9(void)
{
    NEED_ETCD();
    const char *g = gt_group("lk");
    char pa[512], pb[512], ca[1024], cb[1024];
    snprintf(pa, sizeof(pa), "%s", vt_path("a.pid"));
    snprintf(pb, sizeof(pb), "%s", vt_path("b.pid"));
    cmd_for_as(ca, sizeof(ca), "A", pa, true); /* deaf to SIGTERM: only SIGKILL ends it */
    cmd_for(cb, sizeof(cb), "B", pb);
    struct vt_proc w, a, b;
    EXPECT(VT_SPAWN(&w, "group", "watch", g, "--endpoints", url, "--json") == 0, "spawn failed");
    EXPECT(vt_read_until(&w, "\"leader\"", 15000), "no leader line at the start: '%s'", w.buf);
    EXPECT(VT_SPAWN2(&a, "group", "join", g, "--etcd", url, "--name", "a", "--ttl", "2s", "--leader-only", "--", "sh",
                     "-c", ca) == 0,
           "spawn failed");
    EXPECT(runs(&a, "A", 1, 15000), "a's CMD did not run: '%s'", a.buf);
    unsigned long long ta = term_of(&a, "A", 1);
    EXPECT(ta > 0, "a's CMD has no term: '%s'", a.buf);
    EXPECT(VT_WAIT_FOR(read_pid(pa) > 0, 5000), "no pid from a's CMD");
    char peer[32];
    snprintf(peer, sizeof(peer), "%d", read_pid(pa));
    setenv("PEER_PID", peer, 1);
    int sp = VT_SPAWN2(&b, "group", "join", g, "--etcd", url, "--name", "b", "--leader-only", "--", "sh", "-c", cb);
    unsetenv("PEER_PID");
    EXPECT(sp == 0, "spawn failed");
    vigil_etcd *e = et_connect(url);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 2, 15000), "b did not join");
    EXPECT(!strstr(b.buf, "B-run"), "a follower's CMD ran: '%s'", b.buf);

    /* The leader's tool killed: its CMD goes with it (SIGKILL, which it
     * cannot ignore); b leads once a's lease lapses, and starts alone. */
    EXPECT(vt_stop(&a, SIGKILL, 10000) == 128 + SIGKILL, "a's tool not killed");
    EXPECT(bg_of(&a, "A", 1) > 0 && VT_WAIT_FOR(vt_gone(bg_of(&a, "A", 1)), 10000),
           "what a's CMD started outlived a's tool: '%s'", a.buf);
    EXPECT(runs(&b, "B", 1, 20000), "b's CMD did not run: '%s'", b.buf);
    EXPECT(!strstr(b.buf, "B-overlap"), "b's CMD started while a's still ran: '%s'", b.buf);
    unsigned long long tb = term_of(&b, "B", 1);
    EXPECT(tb > ta, "b's term %llu, a's %llu", tb, ta);

    /* A leader stopped by a signal: CMD's status. */
    int st = vt_stop_tool(&b, SIGTERM, 15000); /* passed on to CMD, whose trap exits 3 */
    EXPECT(st == 3, "b on SIGTERM: exit %d, '%s'", st, b.buf);
    EXPECT(read_until_n(&w, "\"name\": null", 2, 20000), "no 'no leader' line at the end: '%s'", w.buf);
    EXPECT(vt_stop_tool(&w, SIGTERM, 10000) == 0, "watch did not end cleanly");
    char names[8][64];
    int n = leader_lines(w.buf, names, 8);
    EXPECT(n == 4 && strcmp(names[0], "-") == 0 && strcmp(names[1], "a") == 0 && strcmp(names[2], "b") == 0 &&
               strcmp(names[3], "-") == 0,
           "the leader lines: %d, '%s'", n, w.buf);
    vigil_etcd_close(e);
    return 0;
}

static int test_leader_only_sigstop(void)
{
    NEED_ETCD();
    const char *g = gt_group("ls");
    char pa[512], pb[512], ca[1024], cb[1024];
    snprintf(pa, sizeof(pa), "%s", vt_path("sa.pid"));
    snprintf(pb, sizeof(pb), "%s", vt_path("sb.pid"));
    cmd_for(ca, sizeof(ca), "A", pa);
    cmd_for(cb, sizeof(cb), "B", pb);
    struct vt_proc a, b;
    EXPECT(VT_SPAWN2(&a, "group", "join", g, "--etcd", url, "--name", "a", "--ttl", "2s", "--kill-after", "10s",
                     "--leader-only", "--", "sh", "-c", ca) == 0,
           "spawn failed");
    EXPECT(runs(&a, "A", 1, 15000), "a's CMD did not run: '%s'", a.buf);
    unsigned long long ta = term_of(&a, "A", 1);
    EXPECT(VT_SPAWN2(&b, "group", "join", g, "--etcd", url, "--name", "b", "--ttl", "5s", "--leader-only", "--", "sh",
                     "-c", cb) == 0,
           "spawn failed");
    vigil_etcd *e = et_connect(url);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 2, 15000), "b did not join");

    /* a's tool stopped past its TTL: its guardian sees the membership
     * lapse and ends CMD's group (SIGTERM: "A-term") while the tool is
     * still stopped; b leads. */
    EXPECT(VT_WAIT_FOR(vt_sig_blocked(a.pid, SIGTERM), 5000), "a not ready");
    pid_t cmd_a = read_pid(pa), bg_a = bg_of(&a, "A", 1);
    EXPECT(cmd_a > 0 && bg_a > 0, "a's CMD's pids: '%s'", a.buf);
    kill(a.pid, SIGSTOP);
    EXPECT(runs(&b, "B", 1, 30000), "b's CMD did not run: '%s'", b.buf);
    unsigned long long tb = term_of(&b, "B", 1);
    EXPECT(tb > ta, "b's term %llu, a's %llu", tb, ta);
    EXPECT(vt_read_until(&a, "A-term", 20000), "a's CMD not told its term ended while a was stopped: '%s'", a.buf);
    EXPECT(VT_WAIT_FOR(vt_gone(cmd_a) && vt_gone(bg_a), 20000), "a's CMD's group runs on beside b's");
    EXPECT(proc_state(a.pid) == 'T', "a's tool was not stopped all along");
    /* Continued, a finds its membership lost, and joins again, behind b. */
    kill(a.pid, SIGCONT);
    EXPECT(vt_read_until(&a, "no longer leads", 20000), "a did not say its term ended: '%s'", a.buf);
    EXPECT(vt_read_until(&a, "joined again", 20000), "a did not join again: '%s'", a.buf);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 2, 15000), "a not a member again");
    vigil_group_member_info l;
    EXPECT_RC(vigil_group_leader(e, g, &l), 0);
    EXPECT(strcmp(l.name, "b") == 0, "the leader after a came back: '%s'", l.name);
    EXPECT(term_of(&a, "A", 2) == 0, "a ran CMD again behind b: '%s'", a.buf);

    /* b ends: a leads again, under a new term, and CMD runs again. */
    EXPECT(vt_stop_tool(&b, SIGTERM, 15000) == 3, "b on SIGTERM");
    EXPECT(runs(&a, "A", 2, 20000), "a's CMD did not run again: '%s'", a.buf);
    unsigned long long ta2 = term_of(&a, "A", 2);
    EXPECT(ta2 > tb, "a's new term %llu, b's %llu", ta2, tb);
    EXPECT(vt_stop_tool(&a, SIGTERM, 15000) == 3, "a on SIGTERM");
    vigil_etcd_close(e);
    return 0;
}

/* CPU time (user + system, clock ticks) process pid has used. */
static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    vt_slurp(path, buf, sizeof(buf));
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

/* The leader's lease revoked by hand: its term is over at once. Its CMD,
 * which ignores SIGTERM, is killed --kill-after later (the tool sleeping
 * meanwhile, not spinning on a loss it already knows), and once it is gone
 * the member joins again and, alone, leads again under a new term. */
static int test_leader_only_revoked(void)
{
    NEED_ETCD();
    const char *g = gt_group("lr");
    struct vt_proc a;
    /* Renewed every 0.64 s: the keepalive finds the loss too, well before CMD is killed. */
    EXPECT(VT_SPAWN2(&a, "group", "join", g, "--etcd", url, "--name", "a", "--ttl", "2s", "--kill-after", "3s",
                     "--leader-only",
                     "--", "sh", "-c",
                     "trap '' TERM; sleep 100000 & echo A-bg $!; echo A-run $VIGIL_GROUP_TERM A-ok; "
                     "while :; do sleep 0.1; done") == 0,
           "spawn failed");
    EXPECT(runs(&a, "A", 1, 15000), "a's CMD did not run: '%s'", a.buf);
    unsigned long long t1 = term_of(&a, "A", 1);
    vigil_etcd *e = et_connect(url);
    long long before = cpu_ticks(a.pid);
    EXPECT_RC(et_revoke(e, gt_lease_of(e, g, "a")), 0);
    EXPECT(vt_read_until(&a, "no longer leads", 20000), "a did not stop leading: '%s'", a.buf);
    EXPECT(vt_read_until(&a, "joined again", 20000), "a did not join again: '%s'", a.buf);
    long long used = cpu_ticks(a.pid) - before;
    EXPECT(before >= 0 && used < sysconf(_SC_CLK_TCK) / 2,
           "the tool used %lld ticks of CPU while its CMD took 3 s to be killed", used);
    EXPECT(runs(&a, "A", 2, 20000), "a's CMD did not run again: '%s'", a.buf);
    unsigned long long t2 = term_of(&a, "A", 2);
    EXPECT(t2 > t1, "the new term %llu, the old %llu", t2, t1);
    /* The next term's CMD started only once the last term's whole group
     * (its worker, deaf to SIGTERM too) was gone. */
    EXPECT(bg_of(&a, "A", 1) > 0 && vt_gone(bg_of(&a, "A", 1)), "term %llu's worker runs in term %llu: '%s'", t1, t2,
           a.buf);
    /* A stop signal ends the tool once CMD's whole group is gone. */
    EXPECT(vt_stop_tool(&a, SIGINT, 15000) != -1, "a did not end");
    EXPECT(bg_of(&a, "A", 2) > 0 && vt_gone(bg_of(&a, "A", 2)), "term %llu's worker outlived the tool: '%s'", t2,
           a.buf);
    vigil_etcd_close(e);
    return 0;
}

/* A follower stopped by a signal exits 0; a name taken is 75. */
static int test_leader_only_follower_and_usage(void)
{
    NEED_ETCD();
    const char *g = gt_group("lf");
    vigil_etcd *e = et_connect(url);
    vigil_group_member *m = gt_join(e, g, "boss", 30000, NULL);
    EXPECT(m, "join failed");
    struct vt_proc f;
    EXPECT(VT_SPAWN2(&f, "group", "join", g, "--etcd", url, "--name", "f", "--leader-only", "--", "sh", "-c",
                     "echo ran") == 0,
           "spawn failed");
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 2, 15000), "f did not join");
    EXPECT(vt_stop_tool(&f, SIGTERM, 15000) == 0 && !strstr(f.buf, "ran"), "a follower on SIGTERM: '%s'", f.buf);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 1, 15000), "f did not leave");
    VT_RUN("group", "join", g, "--etcd", url, "--name", "boss", "--leader-only", "--", "true");
    EXPECT(R.rc == 75 && strstr(R.err, "boss"), "a name taken: exit %d, '%s'", R.rc, R.err);
    /* CMD ending on its own ends the tool with its status. */
    EXPECT_RC(vigil_group_leave(m), 0);
    VT_RUN("group", "join", g, "--etcd", url, "--leader-only", "--", "sh", "-c", "exit 7");
    EXPECT(R.rc == 7, "a leader's CMD exiting 7: %d, '%s'", R.rc, R.err);
    vigil_etcd_close(e);
    return 0;
}

/* As nobody, --leader-only with a set-user-ID root CMD: the tool killed
 * once CMD runs, CMD must go with it (the kernel clears the parent-death
 * signal at a set-user-ID exec; the guardian sees the tool's pipe close). */
static int lead_suid_body(void *arg)
{
    struct vt_proc p;
    if (VT_SPAWN(&p, "group", "join", gt_group("lsuid"), "--etcd", url, "--ttl", "1m", "--leader-only", "--",
                 (const char *)arg) != 0)
        return 1;
    return vt_suid_tool_killed(&p, "group join --leader-only");
}

static int test_leader_only_suid_cmd_dies_with_tool(void)
{
    NEED_ETCD();
    const char *copy = vt_suid_copy();
    if (!copy)
        return VT_SKIP;
    return vt_as_nobody(lead_suid_body, (void *)copy);
}

VT_MAIN(VT_CASE(test_leader_only_kill9), VT_CASE(test_leader_only_suid_cmd_dies_with_tool), VT_CASE(test_leader_only_sigstop), VT_CASE(test_leader_only_revoked),
        VT_CASE(test_leader_only_follower_and_usage))
