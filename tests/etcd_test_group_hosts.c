/* SPDX-License-Identifier: MIT */
/*
 * Several "hosts" on this machine, each its own directory, its own agent
 * and its own member processes, around one etcd: a process killed with
 * kill -9 is seen gone on the other host through its agent (long before
 * its TTL); a whole host killed, agent included, loses its members at the
 * TTL; an agent started again revokes what died while it was away; a host
 * stopped past the TTL and continued learns it is out through the loss fd
 * and makes no write that lands; an etcd member stopped or killed under a
 * 3-member cluster leaves the group working.
 */
#include "grouptest.h"

#define LONG_TTL 120000 /* far past every wait: a leave within it is the agent's */

struct host {
    char         dir[512];
    struct vt_proc agent;
};

static bool host_up(struct host *h, const char *url, const char *name)
{
    snprintf(h->dir, sizeof(h->dir), "%s", vt_path(name));
    return gt_agent_start(&h->agent, url, h->dir);
}

static void host_agent_kill(struct host *h)
{
    if (h->agent.pid > 0)
        vt_stop(&h->agent, SIGKILL, 10000);
}

/* The agent's report of lease ID, within timeout_ms. */
static bool agent_said(struct host *h, int64_t lease, const char *result, unsigned timeout_ms)
{
    char want[96];
    snprintf(want, sizeof(want), "revoked %lld %s\n", (long long)lease, result);
    return vt_read_until(&h->agent, want, timeout_ms);
}

/* kill -9 of a member process on host A: host B's watch sees it leave and
 * B's waiting member takes its unit, through A's agent (the TTL is two
 * minutes, the waits at most 20 s). */
static int test_kill9_process(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("k9");
    struct host a, b;
    EXPECT(host_up(&a, url, "hostA") && host_up(&b, url, "hostB"), "agents did not start");
    EXPECT_RC(vigil_group_add(e, g, "job"), 0);
    struct gt_child a1, b1;
    EXPECT(gt_child_start(&a1, url, g, "a1", LONG_TTL, a.dir, "hostA"), "a1 did not join: '%s'", a1.line);
    EXPECT(gt_child_start(&b1, url, g, "b1", LONG_TTL, b.dir, "hostB"), "b1 did not join: '%s'", b1.line);
    gt_send(&a1, "take");
    char unit[64];
    unsigned long long tok = 0, tok2 = 0;
    EXPECT(gt_readline(a1.out, a1.line, sizeof(a1.line), 10000) && sscanf(a1.line, "took %63s %llu", unit, &tok) == 2,
           "a1: '%s'", a1.line);
    vigil_group_watcher *w = NULL;
    vigil_etcd *we = et_connect(url);
    EXPECT_RC(vigil_group_watch(we, g, &w), 0);
    vigil_group_event ev;
    gt_send(&b1, "takewait 20000");
    int64_t lease = gt_lease_of(e, g, "a1");
    EXPECT(lease != 0, "a1 not among the members");
    gt_child_kill(&a1);
    EXPECT(agent_said(&a, lease, "0", 20000), "host A's agent did not revoke a1's lease: '%s'", a.agent.buf);
    EXPECT_RC(gt_event_of(w, "a1", &ev, 20000), 1);
    while (ev.initial)
        EXPECT_RC(gt_event_of(w, "a1", &ev, 20000), 1);
    EXPECT(ev.type == VIGIL_GROUP_LEAVE && strcmp(ev.member.host, "hostA") == 0, "B's watch: type %u host '%s'",
           ev.type, ev.member.host);
    EXPECT(gt_readline(b1.out, b1.line, sizeof(b1.line), 20000) && sscanf(b1.line, "took %63s %llu", unit, &tok2) == 2 &&
               tok2 > tok,
           "b1: '%s'", b1.line);
    gt_send(&b1, "done %s %llu", unit, tok2);
    EXPECT_RC(gt_rc(&b1, 10000), 0);
    EXPECT_RC(gt_child_leave(&b1), 0);
    vigil_group_watch_close(w);
    host_agent_kill(&a);
    host_agent_kill(&b);
    vigil_etcd_close(we);
    vigil_etcd_close(e);
    return 0;
}

/* A whole host killed, agent and member: the member lapses at its TTL
 * (2 s), and B takes its unit then. A's agent started again finds the
 * record, the lease already gone, and clears it. */
static int test_kill_host(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("kh");
    struct host a, b;
    EXPECT(host_up(&a, url, "hostA2") && host_up(&b, url, "hostB2"), "agents did not start");
    EXPECT_RC(vigil_group_add(e, g, "job"), 0);
    struct gt_child a1, b1;
    EXPECT(gt_child_start(&a1, url, g, "a1", 2000, a.dir, "hostA"), "a1 did not join: '%s'", a1.line);
    EXPECT(gt_child_start(&b1, url, g, "b1", LONG_TTL, b.dir, "hostB"), "b1 did not join: '%s'", b1.line);
    gt_send(&a1, "take");
    EXPECT(gt_readline(a1.out, a1.line, sizeof(a1.line), 10000) && strncmp(a1.line, "took job", 8) == 0, "a1: '%s'",
           a1.line);
    int64_t lease = gt_lease_of(e, g, "a1");
    host_agent_kill(&a); /* the host goes: its agent first, then its process */
    gt_child_kill(&a1);
    gt_send(&b1, "takewait 30000");
    EXPECT(gt_readline(b1.out, b1.line, sizeof(b1.line), 40000) && strncmp(b1.line, "took job", 8) == 0,
           "b1 after host A died: '%s'", b1.line);
    EXPECT(gt_count(e, g) == 1, "host A's member still listed");
    /* A comes back: its agent clears the stale record. */
    EXPECT(gt_agent_start(&a.agent, url, a.dir), "agent A did not start again");
    EXPECT(agent_said(&a, lease, "-1008", 20000), "agent A did not clear a1's record: '%s'", a.agent.buf);
    char rec[600];
    snprintf(rec, sizeof(rec), "%s/vigil-%llx.lease", a.dir, (unsigned long long)lease);
    EXPECT(VT_WAIT_FOR(access(rec, F_OK) != 0, 10000), "record %s still there", rec);
    EXPECT_RC(gt_child_leave(&b1), 0);
    host_agent_kill(&a);
    host_agent_kill(&b);
    vigil_etcd_close(e);
    return 0;
}

/* A member dies while its host's agent is down; the agent, started again,
 * revokes its lease at once (the TTL is two minutes). */
static int test_agent_restart(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("ar");
    struct host a;
    EXPECT(host_up(&a, url, "hostA3"), "agent did not start");
    struct gt_child a1, a2;
    EXPECT(gt_child_start(&a1, url, g, "a1", LONG_TTL, a.dir, "hostA"), "a1 did not join: '%s'", a1.line);
    EXPECT(gt_child_start(&a2, url, g, "a2", LONG_TTL, a.dir, "hostA"), "a2 did not join: '%s'", a2.line);
    int64_t l1 = gt_lease_of(e, g, "a1");
    host_agent_kill(&a);
    gt_child_kill(&a1);
    EXPECT(gt_count(e, g) == 2, "a1 gone with no agent running: its lease should stand until the TTL");
    EXPECT(gt_agent_start(&a.agent, url, a.dir), "agent did not start again");
    EXPECT(agent_said(&a, l1, "0", 20000), "the restarted agent did not revoke a1: '%s'", a.agent.buf);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 1, 10000), "a1 still a member");
    /* a2, alive all along, is watched by the new agent too. */
    int64_t l2 = gt_lease_of(e, g, "a2");
    gt_child_kill(&a2);
    EXPECT(agent_said(&a, l2, "0", 20000), "the restarted agent did not revoke a2: '%s'", a.agent.buf);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 0, 10000), "a2 still a member");
    host_agent_kill(&a);
    vigil_etcd_close(e);
    return 0;
}

/* A host stopped past its members' TTL and continued: B took over; the
 * stopped member learns it is out (its loss fd), and nothing it writes
 * lands: its done is refused, the unit is done once, by B. */
static int test_sigstop_host(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("st");
    struct host a;
    EXPECT(host_up(&a, url, "hostA4"), "agent did not start");
    EXPECT_RC(vigil_group_add(e, g, "job"), 0);
    struct gt_child a1, b1;
    EXPECT(gt_child_start(&a1, url, g, "a1", 2000, a.dir, "hostA"), "a1 did not join: '%s'", a1.line);
    EXPECT(gt_child_start(&b1, url, g, "b1", LONG_TTL, NULL, "hostB"), "b1 did not join: '%s'", b1.line);
    char unit[64];
    unsigned long long tok = 0, tok2 = 0;
    gt_send(&a1, "take");
    EXPECT(gt_readline(a1.out, a1.line, sizeof(a1.line), 10000) && sscanf(a1.line, "took %63s %llu", unit, &tok) == 2,
           "a1: '%s'", a1.line);
    kill(a.agent.pid, SIGSTOP);
    kill(a1.pid, SIGSTOP);
    gt_send(&b1, "takewait 30000");
    EXPECT(gt_readline(b1.out, b1.line, sizeof(b1.line), 40000) && sscanf(b1.line, "took %63s %llu", unit, &tok2) == 2 &&
               tok2 > tok,
           "b1 while host A was stopped: '%s'", b1.line);
    gt_send(&b1, "done %s %llu", unit, tok2);
    EXPECT_RC(gt_rc(&b1, 10000), 0);
    kill(a1.pid, SIGCONT);
    kill(a.agent.pid, SIGCONT);
    /* a1 asks until its keepalive has run past the deadline it missed. */
    bool lost = false;
    for (int i = 0; i < 200 && !lost; i++) {
        gt_send(&a1, "lost");
        lost = gt_readline(a1.out, a1.line, sizeof(a1.line), 10000) && strcmp(a1.line, "lost 1") == 0;
        if (!lost)
            vt_sleep_ms(50);
    }
    EXPECT(lost, "a1 resumed and does not know it is out: '%s'", a1.line);
    gt_send(&a1, "done %s %llu", unit, tok);
    EXPECT_RC(gt_rc(&a1, 10000), VIGIL_ELOST);
    gt_send(&a1, "take");
    EXPECT_RC(gt_rc(&a1, 10000), VIGIL_ELOST);
    vigil_group_stats st;
    EXPECT_RC(vigil_group_stats_get(e, g, &st), 0);
    EXPECT(st.units_done == 1 && st.units_owned == 0 && st.members == 1, "done %u owned %u members %u", st.units_done,
           st.units_owned, st.members);
    EXPECT_RC(gt_child_leave(&a1), VIGIL_ELOST);
    EXPECT_RC(gt_child_leave(&b1), 0);
    host_agent_kill(&a);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_kill9_process), VT_CASE(test_kill_host), VT_CASE(test_agent_restart), VT_CASE(test_sigstop_host))
