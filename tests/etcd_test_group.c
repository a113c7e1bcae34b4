/* SPDX-License-Identifier: MIT */
/*
 * vigil_group_* against a real etcd: membership, the leader and its term,
 * the watch, units claimed and done exactly once, a stale member fenced,
 * barrier rounds (one serial, a waiter that timed out never counted, a
 * caller ahead, who was counted and who left out), and `etcdctl elect`
 * on a group's members.
 */
#include <stdarg.h>

#include "grouptest.h"

#define TTL 5000

static int test_join_members_leave(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("m");
    vigil_group_member *a = gt_join(e, g, "alpha", TTL, NULL), *b = gt_join(e, g, "beta", TTL, NULL), *dup = NULL;
    EXPECT(a && b, "join failed");
    EXPECT_RC(vigil_group_join(e, g, "alpha", TTL, &dup), VIGIL_EBUSY);
    vigil_group_member_info info[4], l, sa, sb;
    EXPECT_RC(vigil_group_members(e, g, info, 4), 2);
    vigil_group_self(a, &sa);
    vigil_group_self(b, &sb);
    EXPECT(strcmp(info[0].name, "alpha") == 0 && strcmp(info[1].name, "beta") == 0 && info[0].revision == sa.revision &&
               info[1].revision == sb.revision && sa.revision < sb.revision && info[0].pid == (uint32_t)getpid() &&
               info[0].flags == 0 && info[0].lease == sa.lease,
           "members: '%s' rev %llu, '%s' rev %llu (self %llu, %llu)", info[0].name,
           (unsigned long long)info[0].revision, info[1].name, (unsigned long long)info[1].revision,
           (unsigned long long)sa.revision, (unsigned long long)sb.revision);
    EXPECT_RC(vigil_group_leader(e, g, &l), 0);
    EXPECT(strcmp(l.name, "alpha") == 0 && l.revision == sa.revision, "leader '%s' term %llu", l.name,
           (unsigned long long)l.revision);
    EXPECT_RC(vigil_group_is_leader(a), 1);
    EXPECT_RC(vigil_group_is_leader(b), 0);
    EXPECT_RC(vigil_group_leave(a), 0);
    EXPECT_RC(vigil_group_leader(e, g, &l), 0);
    EXPECT(strcmp(l.name, "beta") == 0 && l.revision == sb.revision, "leader after alpha left: '%s'", l.name);
    EXPECT_RC(vigil_group_is_leader(b), 1);
    /* The name is free again, and a new join has a higher revision. */
    EXPECT_RC(vigil_group_join(e, g, "alpha", TTL, &a), 0);
    vigil_group_self(a, &sa);
    EXPECT(sa.revision > sb.revision, "rejoined alpha at %llu, not after beta's %llu", (unsigned long long)sa.revision,
           (unsigned long long)sb.revision);
    EXPECT_RC(vigil_group_leave(a), 0);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(vigil_group_members(e, g, info, 4), 0);
    EXPECT_RC(vigil_group_leader(e, g, &l), VIGIL_ENOPEERS);
    vigil_etcd_close(e);
    return 0;
}

static int test_bad_args(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    vigil_group_member *m = NULL;
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    EXPECT_RC(vigil_group_join(NULL, "g", "n", TTL, &m), -EINVAL);
    EXPECT_RC(vigil_group_join(e, NULL, "n", TTL, &m), -EINVAL);
    EXPECT_RC(vigil_group_join(e, "", "n", TTL, &m), VIGIL_ERANGE);
    EXPECT_RC(vigil_group_join(e, longname, "n", TTL, &m), VIGIL_ERANGE);
    EXPECT_RC(vigil_group_join(e, "g", longname, TTL, &m), VIGIL_ERANGE);
    EXPECT_RC(vigil_group_join(e, "g", "n", 0, &m), VIGIL_ERANGE);
    EXPECT(m == NULL, "an output written on failure");
    EXPECT_RC(vigil_group_leave(NULL), 0);
    vigil_group_watch_close(NULL);
    EXPECT_RC(vigil_group_add(e, "g", longname), VIGIL_ERANGE);
    EXPECT_RC(vigil_group_members(e, "g", NULL, 1), -EINVAL);
    vigil_etcd_close(e);
    return 0;
}

static int test_watch(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url), *we = et_connect(url);
    const char *g = gt_group("w");
    vigil_group_member *a = gt_join(e, g, "first", TTL, NULL), *b = NULL;
    EXPECT(a, "join failed");
    vigil_group_watcher *w = NULL;
    EXPECT_RC(vigil_group_watch(we, g, &w), 0);
    vigil_group_event ev;
    EXPECT_RC(gt_next_event(w, &ev, 5000), 1);
    EXPECT(ev.type == VIGIL_GROUP_JOIN && ev.initial && strcmp(ev.member.name, "first") == 0,
           "initial event: type %u initial %u '%s'", ev.type, ev.initial, ev.member.name);
    EXPECT_RC(vigil_group_watch_next(w, &ev), 0);
    struct pollfd p = { vigil_group_watch_fd(w), POLLIN, 0 };
    EXPECT(poll(&p, 1, 0) == 0, "the fd readable with nothing queued");
    b = gt_join(e, g, "second", TTL, NULL);
    EXPECT(b, "join failed");
    EXPECT_RC(gt_next_event(w, &ev, 10000), 1);
    vigil_group_member_info sb;
    vigil_group_self(b, &sb);
    EXPECT(ev.type == VIGIL_GROUP_JOIN && !ev.initial && strcmp(ev.member.name, "second") == 0 &&
               ev.revision == sb.revision && ev.member.pid == (uint32_t)getpid() && ev.time_ns > 0,
           "join event: type %u '%s' rev %llu (joined at %llu)", ev.type, ev.member.name,
           (unsigned long long)ev.revision, (unsigned long long)sb.revision);
    EXPECT_RC(vigil_group_leave(a), 0);
    EXPECT_RC(gt_next_event(w, &ev, 10000), 1);
    EXPECT(ev.type == VIGIL_GROUP_LEAVE && strcmp(ev.member.name, "first") == 0 && ev.revision > sb.revision,
           "leave event: type %u '%s'", ev.type, ev.member.name);
    /* A round's release puts a name again: no membership event. */
    EXPECT_RC(vigil_group_barrier_wait(b, 0, 10000000000ull), VIGIL_SERIAL);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT_RC(gt_next_event(w, &ev, 10000), 1);
    EXPECT(ev.type == VIGIL_GROUP_LEAVE && strcmp(ev.member.name, "second") == 0, "after a round: type %u '%s'",
           ev.type, ev.member.name);
    vigil_group_watch_close(w);
    vigil_etcd_close(we);
    vigil_etcd_close(e);
    return 0;
}

static int test_units_once(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("u");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL), *b = gt_join(e, g, "b", TTL, NULL);
    EXPECT(a && b, "join failed");
    vigil_group_unit u;
    EXPECT_RC(vigil_group_take(a, &u), VIGIL_EVACANT);
    char name[32];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof(name), "unit-%d", i);
        EXPECT_RC(vigil_group_add(e, g, name), 0);
    }
    EXPECT_RC(vigil_group_add(e, g, "unit-0"), -EEXIST);
    vigil_group_unit got[6];
    bool seen[6] = { false };
    for (int i = 0; i < 6; i++) {
        EXPECT_RC(vigil_group_take(i % 2 ? b : a, &got[i]), 0);
        int k = atoi(got[i].name + 5);
        EXPECT(strncmp(got[i].name, "unit-", 5) == 0 && k >= 0 && k < 6 && !seen[k], "took '%s' twice or unknown",
               got[i].name);
        seen[k] = true;
    }
    EXPECT_RC(vigil_group_take(a, &u), VIGIL_EBUSY);
    vigil_group_stats st;
    EXPECT_RC(vigil_group_stats_get(e, g, &st), 0);
    EXPECT(st.members == 2 && st.units_owned == 6 && st.units_free == 0 && st.units_done == 0, "stats %u %u %u %u",
           st.members, st.units_owned, st.units_free, st.units_done);
    /* Only the owner finishes, and only once. */
    EXPECT_RC(vigil_group_done(b, &got[0]), VIGIL_ELOST);
    EXPECT_RC(vigil_group_done(a, &got[0]), 0);
    /* Again (a caller told an error calls again): 0, as its own done is
     * the record, and nothing changes. */
    EXPECT_RC(vigil_group_done(a, &got[0]), 0);
    EXPECT_RC(vigil_group_add(e, g, got[0].name), -EEXIST);
    /* Given back, it is taken again with a greater token. */
    EXPECT_RC(vigil_group_giveback(b, &got[1]), 0);
    EXPECT_RC(vigil_group_take(a, &u), 0);
    EXPECT(strcmp(u.name, got[1].name) == 0 && u.token > got[1].token, "took '%s' token %llu after giveback of '%s' %llu",
           u.name, (unsigned long long)u.token, got[1].name, (unsigned long long)got[1].token);
    EXPECT_RC(vigil_group_done(b, &got[1]), VIGIL_ELOST); /* the old claim finishes nothing */
    EXPECT_RC(vigil_group_done(a, &u), 0);
    /* b leaves: its units are free, each taken once. */
    EXPECT_RC(vigil_group_leave(b), 0);
    int taken = 0;
    while (vigil_group_take(a, &u) == 0) {
        EXPECT_RC(vigil_group_done(a, &u), 0);
        taken++;
    }
    EXPECT(taken == 2, "after b left, a took %d units (b had 2 left)", taken);
    for (int i = 2; i < 6; i += 2)
        EXPECT_RC(vigil_group_done(a, &got[i]), 0);
    EXPECT_RC(vigil_group_take(a, &u), VIGIL_EVACANT);
    EXPECT_RC(vigil_group_stats_get(e, g, &st), 0);
    EXPECT(st.units_done == 6 && st.units_owned == 0 && st.units_free == 0, "at the end: done %u owned %u free %u",
           st.units_done, st.units_owned, st.units_free);
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(e);
    return 0;
}

static int test_take_wait(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("tw");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL);
    EXPECT(a, "join failed");
    EXPECT_RC(vigil_group_add(e, g, "only"), 0);
    vigil_group_unit u, v;
    EXPECT_RC(vigil_group_take(a, &u), 0);
    struct gt_child c;
    EXPECT(gt_child_start(&c, url, g, "waiter", TTL, NULL, NULL), "child did not join: '%s'", c.line);
    gt_send(&c, "takewait 300");
    EXPECT_RC(gt_rc(&c, 10000), VIGIL_ETIMEDOUT);
    gt_send(&c, "takewait 30000");
    /* The child is in its wait (or about to be): a give-back wakes it. */
    EXPECT_RC(vigil_group_giveback(a, &u), 0);
    char unit[64];
    unsigned long long tok = 0;
    EXPECT(gt_readline(c.out, c.line, sizeof(c.line), 20000) && sscanf(c.line, "took %63s %llu", unit, &tok) == 2 &&
               strcmp(unit, "only") == 0 && tok > u.token,
           "the waiter said '%s'", c.line);
    EXPECT_RC(vigil_group_take(a, &v), VIGIL_EBUSY);
    gt_send(&c, "done only %llu", tok);
    EXPECT_RC(gt_rc(&c, 10000), 0);
    gt_send(&c, "takewait 30000");
    EXPECT_RC(gt_rc(&c, 10000), VIGIL_EVACANT);
    EXPECT_RC(gt_child_leave(&c), 0);
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(e);
    return 0;
}

/* The lease of m revoked behind its back: it is stale, and nothing it
 * writes lands. */
static int test_stale_member_fenced(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url), *e2 = et_connect(url);
    const char *g = gt_group("stale");
    vigil_group_member *a = gt_join(e, g, "a", 3000, NULL), *b = gt_join(e2, g, "b", TTL, NULL);
    EXPECT(a && b, "join failed");
    EXPECT_RC(vigil_group_add(e, g, "x"), 0);
    EXPECT_RC(vigil_group_add(e, g, "y"), 0);
    vigil_group_unit ua, ub;
    EXPECT_RC(vigil_group_take(a, &ua), 0);
    vigil_group_member_info sa;
    vigil_group_self(a, &sa);
    EXPECT_RC(et_revoke(e2, sa.lease), 0);
    /* b takes a's unit; a (stale) can neither finish it nor take. */
    EXPECT_RC(vigil_group_take(b, &ub), 0);
    vigil_group_unit other;
    EXPECT_RC(vigil_group_take(b, &other), 0);
    EXPECT_RC(vigil_group_done(a, &ua), VIGIL_ELOST);
    vigil_group_unit t;
    EXPECT_RC(vigil_group_take(a, &t), VIGIL_ELOST);
    EXPECT_RC(vigil_group_barrier_wait(a, 0, 1000000000ull), VIGIL_ELOST);
    EXPECT_RC(vigil_group_done(b, &ub), 0);
    EXPECT_RC(vigil_group_done(b, &other), 0);
    /* Its keepalive learns it too: the loss fd turns readable. */
    struct pollfd p = { vigil_group_lost_fd(a), POLLIN, 0 };
    EXPECT(poll(&p, 1, 10000) == 1 && vigil_group_lost(a), "no loss seen within 10 s of the revoke");
    EXPECT_RC(vigil_group_leave(a), VIGIL_ELOST);
    vigil_group_stats st;
    EXPECT_RC(vigil_group_stats_get(e, g, &st), 0);
    EXPECT(st.units_done == 2 && st.members == 1, "done %u members %u", st.units_done, st.members);
    EXPECT_RC(vigil_group_leave(b), 0);
    vigil_etcd_close(e);
    vigil_etcd_close(e2);
    return 0;
}

static int test_barrier_serial_and_info(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("b");
    struct gt_child c[2];
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL);
    EXPECT(a, "join failed");
    EXPECT(gt_child_start(&c[0], url, g, "b", TTL, NULL, NULL), "child did not join: '%s'", c[0].line);
    EXPECT(gt_child_start(&c[1], url, g, "c", TTL, NULL, NULL), "child did not join: '%s'", c[1].line);
    int serials = 0;
    for (uint64_t r = 0; r < 3; r++) {
        gt_send(&c[0], "wait %llu 30000", (unsigned long long)r);
        gt_send(&c[1], "wait %llu 30000", (unsigned long long)r);
        vigil_group_peer counted[4], left[4];
        vigil_group_round info = { .counted_peers = counted, .counted_cap = 4, .left_out_peers = left,
                                   .left_out_cap = 4 };
        int rc = vigil_group_barrier_wait_info(a, r, 30000000000ull, &info);
        int r0 = gt_rc(&c[0], 30000), r1 = gt_rc(&c[1], 30000);
        EXPECT(rc >= 0 && r0 >= 0 && r1 >= 0, "round %llu: %d %d %d", (unsigned long long)r, rc, r0, r1);
        int s = (rc == VIGIL_SERIAL) + (r0 == VIGIL_SERIAL) + (r1 == VIGIL_SERIAL);
        EXPECT(s == 1, "round %llu: %d serials (%d %d %d)", (unsigned long long)r, s, rc, r0, r1);
        serials += s;
        EXPECT(info.round == r && info.counted == 3 && info.left_out == 0 && info.serial != 0,
               "round %llu info: counted %u left out %u serial %llu", (unsigned long long)r, info.counted,
               info.left_out, (unsigned long long)info.serial);
    }
    /* A round already released answers at once. */
    EXPECT_RC(vigil_group_barrier_wait(a, 1, 0), 0);
    /* Rounds too far ahead are refused. */
    EXPECT_RC(vigil_group_barrier_wait(a, 3 + 16, 0), VIGIL_ERANGE);
    EXPECT(gt_child_leave(&c[0]) == 0 && gt_child_leave(&c[1]) == 0, "children did not leave");
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A waiter that timed out withdrew: no release counts it, and the round
 * waits for it (it is live) until it leaves. */
static int test_barrier_timeout_not_counted(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("bt");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL);
    struct gt_child c;
    EXPECT(a, "join failed");
    EXPECT(gt_child_start(&c, url, g, "late", TTL, NULL, NULL), "child did not join: '%s'", c.line);
    gt_send(&c, "wait 0 30000");
    EXPECT(vigil_group_barrier_wait(a, 0, 30000000000ull) >= 0 && gt_rc(&c, 30000) >= 0, "round 0 failed");
    gt_send(&c, "wait 1 200");
    EXPECT_RC(gt_rc(&c, 30000), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_group_barrier_wait(a, 1, 300000000ull), VIGIL_ETIMEDOUT);
    EXPECT(gt_child_leave(&c) == 0, "child did not leave");
    vigil_group_peer counted[4], left[4];
    vigil_group_round info = { .counted_peers = counted, .counted_cap = 4, .left_out_peers = left, .left_out_cap = 4 };
    EXPECT_RC(vigil_group_barrier_wait_info(a, 1, 30000000000ull, &info), VIGIL_SERIAL);
    EXPECT(info.counted == 1 && strcmp(counted[0].name, "a") == 0 && info.left_out == 1 &&
               strcmp(left[0].name, "late") == 0 && left[0].revision == c.rev,
           "round 1: counted %u ('%s'), left out %u ('%s')", info.counted, counted[0].name, info.left_out,
           info.left_out ? left[0].name : "");
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A caller ahead is counted in the rounds it passed over, and the serial
 * of each round goes to a caller of that round. */
static int test_barrier_ahead(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("ba");
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL);
    struct gt_child c;
    EXPECT(a, "join failed");
    EXPECT(gt_child_start(&c, url, g, "ahead", TTL, NULL, NULL), "child did not join: '%s'", c.line);
    gt_send(&c, "wait 2 30000");
    EXPECT_RC(vigil_group_barrier_wait(a, 0, 30000000000ull), VIGIL_SERIAL);
    EXPECT_RC(vigil_group_barrier_wait(a, 1, 30000000000ull), VIGIL_SERIAL);
    int ra = vigil_group_barrier_wait(a, 2, 30000000000ull), rc = gt_rc(&c, 30000);
    EXPECT((ra == VIGIL_SERIAL) + (rc == VIGIL_SERIAL) == 1 && ra >= 0 && rc >= 0, "round 2: %d and %d", ra, rc);
    EXPECT(gt_child_leave(&c) == 0, "child did not leave");
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_etcd_close(e);
    return 0;
}

/* `etcdctl elect -l GROUP/members` names the vigil leader; a campaigner
 * is a foreign member that rounds do not wait for. */
static int test_etcdctl_elect(void)
{
    NEED_ETCDCTL();
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("el");
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "%s/members", g);
    vigil_group_member *a = gt_join(e, g, "vigil-first", TTL, NULL);
    EXPECT(a, "join failed");
    struct vt_proc l, cand;
    EXPECT(ET_CTL(&l, url, "elect", "-l", prefix) == 0, "etcdctl did not start");
    bool shown = vt_read_until(&l, "vigil-first", 15000);
    vt_stop(&l, SIGTERM, 5000);
    EXPECT(shown, "etcdctl elect -l did not show the vigil leader: '%s'", l.buf);
    EXPECT(ET_CTL(&cand, url, "elect", prefix, "ctl-proposal") == 0, "etcdctl did not start");
    bool in = VT_WAIT_FOR(gt_count(e, g) == 2, 15000);
    vigil_group_member_info info[4];
    int n = vigil_group_members(e, g, info, 4);
    EXPECT(in && n == 2 && info[1].flags == VIGIL_GROUP_FOREIGN && strcmp(info[1].name, "ctl-proposal") == 0 &&
               info[0].flags == 0,
           "members with a campaigner: %d, second '%s' flags %u", n, n > 1 ? info[1].name : "", n > 1 ? info[1].flags : 0);
    EXPECT_RC(vigil_group_barrier_wait(a, 0, 30000000000ull), VIGIL_SERIAL);
    /* The vigil leader leaves: the campaigner leads, for etcd and for vigil. */
    vigil_group_member_info s;
    vigil_group_self(a, &s);
    EXPECT_RC(vigil_group_leave(a), 0);
    bool leads = vt_read_until(&cand, "ctl-proposal", 15000);
    vigil_group_member_info ld;
    int lr = vigil_group_leader(e, g, &ld);
    int st = vt_stop(&cand, SIGTERM, 10000);
    EXPECT(leads, "etcdctl elect did not lead after vigil's leader left: '%s'", cand.buf);
    EXPECT(lr == 0 && strcmp(ld.name, "ctl-proposal") == 0 && ld.revision > s.revision, "vigil's leader: %d '%s'", lr,
           ld.name);
    EXPECT(st == 0, "etcdctl elect exited %d", st);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_join_members_leave), VT_CASE(test_bad_args), VT_CASE(test_watch), VT_CASE(test_units_once),
        VT_CASE(test_take_wait), VT_CASE(test_stale_member_fenced), VT_CASE(test_barrier_serial_and_info),
        VT_CASE(test_barrier_timeout_not_counted), VT_CASE(test_barrier_ahead), VT_CASE(test_etcdctl_elect))
