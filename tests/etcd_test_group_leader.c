/* SPDX-License-Identifier: MIT */
/*
 * Leadership told (issue 31): vigil_group_watch_flags with
 * VIGIL_GROUP_WATCH_LEADER tells the leader at the start and each change
 * after, each term once, through a leader killed with kill -9 and a
 * member stopped (SIGSTOP) past its TTL, and across an etcd taken away
 * and given back (the history between replayed); vigil_group_leader_wait
 * returns at once for a leader other than the one known, waits in
 * another process for a change the test makes, and names the failure it
 * met when it times out with etcd gone. Members are child processes
 * (grouptest.h); the test decides every kill.
 */
#include "grouptest.h"
#include "relaytest.h"

#include "group_internal.h"

#include <inttypes.h>

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

/* The next leader event within timeout_ms (joins and leaves skipped, and
 * counted in *other when given): 1, or 0 when none came. */
static int leader_event(vigil_group_watcher *w, vigil_group_event *ev, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        uint64_t now = vt_now_ms();
        int rc = gt_next_event(w, ev, now < deadline ? (unsigned)(deadline - now) : 0);
        if (rc != 1 || ev->type == VIGIL_GROUP_LEADER)
            return rc;
    }
}

/* No leader event queued: every event now queued is a join or a leave. */
static bool no_leader_queued(vigil_group_watcher *w)
{
    vigil_group_event ev;
    int rc;
    while ((rc = vigil_group_watch_next(w, &ev)) == 1)
        if (ev.type == VIGIL_GROUP_LEADER)
            return false;
    return rc == 0;
}

static int test_watch_tells_each_leader_once(void)
{
    NEED_ETCD();
    const char *g = gt_group("wl");
    vigil_etcd *e = et_connect(url);
    vigil_group_watcher *w = NULL, *plain = NULL;
    EXPECT_RC(vigil_group_watch_flags(e, g, 7, &w), -EINVAL);
    EXPECT_RC(vigil_group_watch_flags(e, g, VIGIL_GROUP_WATCH_LEADER, &w), 0);
    EXPECT_RC(vigil_group_watch(e, g, &plain), 0);
    vigil_group_event ev;
    EXPECT(leader_event(w, &ev, 5000) == 1 && ev.initial == 1 && ev.member.revision == 0 && !ev.member.name[0],
           "the first event is not 'no leader': type %u, initial %u, term %llu", ev.type, ev.initial,
           (unsigned long long)ev.member.revision);

    struct gt_child a, b;
    EXPECT(gt_child_start(&a, url, g, "a", 3000, "", NULL), "a did not join: %s", a.line);
    EXPECT(leader_event(w, &ev, 15000) == 1 && strcmp(ev.member.name, "a") == 0 && ev.member.revision == a.rev &&
               ev.revision == a.rev && ev.initial == 0,
           "a's leadership: '%s' term %llu revision %llu (a joined at %llu)", ev.member.name,
           (unsigned long long)ev.member.revision, (unsigned long long)ev.revision, (unsigned long long)a.rev);
    EXPECT(gt_child_start(&b, url, g, "b", 3000, "", NULL), "b did not join: %s", b.line);
    EXPECT(gt_event_of(w, "b", &ev, 15000) == 1 && ev.type == VIGIL_GROUP_JOIN, "b's join not seen");
    EXPECT(no_leader_queued(w), "a follower's join told as a change of leader");

    /* The leader killed with kill -9; its lease revoked, as its host's agent would. */
    int64_t la = gt_lease_of(e, g, "a");
    EXPECT(gt_child_kill(&a) == 128 + SIGKILL, "a not killed");
    EXPECT_RC(et_revoke(e, la), 0);
    EXPECT(leader_event(w, &ev, 15000) == 1 && strcmp(ev.member.name, "b") == 0 && ev.member.revision == b.rev &&
               ev.revision > b.rev,
           "b's leadership after a's kill: '%s' term %llu revision %llu", ev.member.name,
           (unsigned long long)ev.member.revision, (unsigned long long)ev.revision);

    /* b stopped past its TTL: etcd ends its lease, and the group has no leader. */
    kill(b.pid, SIGSTOP);
    EXPECT(VT_WAIT_FOR(gt_count(e, g) == 0, 30000), "b's lease did not lapse while it was stopped");
    EXPECT(leader_event(w, &ev, 15000) == 1 && ev.member.revision == 0 && !ev.member.name[0],
           "no leader after b lapsed: '%s' term %llu", ev.member.name, (unsigned long long)ev.member.revision);
    kill(b.pid, SIGCONT);
    gt_send(&b, "lost");
    EXPECT(gt_readline(b.out, b.line, sizeof(b.line), 20000) && strcmp(b.line, "lost 1") == 0,
           "b resumed does not know it is lost: '%s'", b.line);
    gt_child_kill(&b);

    /* Every change once: nothing more, on either watch. */
    struct gt_child c;
    EXPECT(gt_child_start(&c, url, g, "c", 3000, "", NULL), "c did not join: %s", c.line);
    EXPECT(leader_event(w, &ev, 15000) == 1 && strcmp(ev.member.name, "c") == 0, "c's leadership not told");
    EXPECT(gt_event_of(plain, "c", &ev, 15000) == 1, "the plain watch did not see c");
    EXPECT(no_leader_queued(w) && no_leader_queued(plain), "a leader told twice, or to a plain watch");
    EXPECT(gt_child_leave(&c) == 0, "c did not leave");
    EXPECT(leader_event(w, &ev, 15000) == 1 && ev.member.revision == 0, "no leader after c left");
    vigil_group_watch_close(plain);
    vigil_group_watch_close(w);
    vigil_etcd_close(e);
    return 0;
}

/* A stranger's txn deletes the leader and the next in line at one
 * revision: the leader goes from the first to the third, and the second,
 * which never led at any revision, is never told (model/leader.pml,
 * perevent). */
static int test_watch_one_revision_two_leaves(void)
{
    NEED_ETCD();
    const char *g = gt_group("w2");
    vigil_etcd *e = et_connect(url);
    vigil_group_member *a = gt_join(e, g, "a", 30000, NULL), *b = gt_join(e, g, "b", 30000, NULL),
                       *c = gt_join(e, g, "c", 30000, NULL);
    EXPECT(a && b && c, "joins failed");
    vigil_group_watcher *w = NULL;
    EXPECT_RC(vigil_group_watch_flags(e, g, VIGIL_GROUP_WATCH_LEADER, &w), 0);
    vigil_group_event ev;
    EXPECT(leader_event(w, &ev, 5000) == 1 && strcmp(ev.member.name, "a") == 0, "the leader at the start: '%s'",
           ev.member.name);
    char ka[GKEY_MAX], kb[GKEY_MAX];
    EXPECT(gkey(ka, g, "members/%" PRIx64, (uint64_t)gt_lease_of(e, g, "a")) == 0 &&
               gkey(kb, g, "members/%" PRIx64, (uint64_t)gt_lease_of(e, g, "b")) == 0,
           "the members' keys");
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_del(&t, G_OK, ka, 0);
    gtxn_del(&t, G_OK, kb, 0);
    int rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    EXPECT_RC(rc, 0);
    int64_t rev = r.rev;
    greply_free(&r);
    EXPECT(leader_event(w, &ev, 15000) == 1 && strcmp(ev.member.name, "c") == 0 && ev.revision == (uint64_t)rev,
           "after a and b left at revision %lld: '%s' at %llu", (long long)rev, ev.member.name,
           (unsigned long long)ev.revision);
    EXPECT(no_leader_queued(w), "a member that never led told as leader");
    EXPECT_RC(vigil_group_leave(c), 0);
    (void)vigil_group_leave(a); /* their keys are gone; their leases go now */
    (void)vigil_group_leave(b);
    vigil_group_watch_close(w);
    vigil_etcd_close(e);
    return 0;
}

/* etcd taken away while the leader changes twice: both changes are told,
 * in order, when it comes back (the history replayed). */
static int test_watch_replays_an_outage(void)
{
    NEED_ETCD();
    const char *g = gt_group("wr");
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    vigil_etcd *e = et_connect(url), *through = et_connect(r.url);
    vigil_group_watcher *w = NULL;
    vigil_group_member *a = gt_join(e, g, "a", 30000, NULL), *b = gt_join(e, g, "b", 30000, NULL),
                       *c = gt_join(e, g, "c", 30000, NULL);
    EXPECT(a && b && c, "joins failed");
    EXPECT_RC(vigil_group_watch_flags(through, g, VIGIL_GROUP_WATCH_LEADER, &w), 0);
    vigil_group_event ev;
    EXPECT(leader_event(w, &ev, 5000) == 1 && strcmp(ev.member.name, "a") == 0 && ev.initial,
           "the leader at the start: '%s'", ev.member.name);
    vt_relay_down(&r);
    EXPECT_RC(vigil_group_leave(a), 0);
    EXPECT_RC(vigil_group_leave(b), 0);
    EXPECT(vt_relay_up(&r) == 0, "relay did not come back");
    EXPECT(leader_event(w, &ev, 20000) == 1 && strcmp(ev.member.name, "b") == 0, "b's term, replayed: '%s'",
           ev.member.name);
    EXPECT(leader_event(w, &ev, 20000) == 1 && strcmp(ev.member.name, "c") == 0, "then c's: '%s'", ev.member.name);
    EXPECT(no_leader_queued(w), "a leader told twice");
    EXPECT_RC(vigil_group_leave(c), 0);
    vigil_group_watch_close(w);
    vigil_etcd_close(through);
    vigil_etcd_close(e);
    vt_relay_down(&r);
    return 0;
}

static int test_leader_wait(void)
{
    NEED_ETCD();
    const char *g = gt_group("lw"), *g2 = gt_group("lw2");
    vigil_etcd *e = et_connect(url);
    vigil_group_member_info l;
    EXPECT_RC(vigil_group_leader_wait(e, g, 0, 0, &l), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_group_leader_wait(e, g, 12345, UINT64_MAX, &l), VIGIL_ENOPEERS);
    EXPECT_RC(vigil_group_leader_wait(NULL, g, 0, 0, &l), -EINVAL);
    EXPECT_RC(vigil_group_leader_wait(e, "", 0, 0, &l), VIGIL_ERANGE);

    struct gt_child a, b;
    EXPECT(gt_child_start(&a, url, g, "a", 5000, "", NULL), "a did not join: %s", a.line);
    EXPECT(gt_child_start(&b, url, g, "b", 5000, "", NULL), "b did not join: %s", b.line);
    EXPECT_RC(vigil_group_leader_wait(e, g, 0, UINT64_MAX, &l), 0);
    EXPECT(strcmp(l.name, "a") == 0 && l.revision == a.rev, "leader '%s'", l.name);
    EXPECT_RC(vigil_group_leader_wait(e, g, a.rev, 0, &l), VIGIL_ETIMEDOUT);

    /* b waits, in its own process, for a's term to end; a is killed. */
    gt_send(&b, "leaderwait %llu 30000", (unsigned long long)a.rev);
    int64_t la = gt_lease_of(e, g, "a");
    EXPECT(gt_child_kill(&a) == 128 + SIGKILL, "a not killed");
    EXPECT_RC(et_revoke(e, la), 0);
    char want[64];
    snprintf(want, sizeof(want), "leader %llu b", (unsigned long long)b.rev);
    EXPECT(gt_readline(b.out, b.line, sizeof(b.line), 30000) && strcmp(b.line, want) == 0,
           "b's wait: '%s', wanted '%s'", b.line, want);

    /* b waits for a leader of an empty group; one joins. */
    gt_send(&b, "leaderwait 0 30000 %s", g2);
    vigil_group_member *c = gt_join(e, g2, "c", 5000, NULL);
    vigil_group_member_info ci;
    EXPECT(c && vigil_group_self(c, &ci) == 0, "c did not join");
    snprintf(want, sizeof(want), "leader %llu c", (unsigned long long)ci.revision);
    EXPECT(gt_readline(b.out, b.line, sizeof(b.line), 30000) && strcmp(b.line, want) == 0,
           "b's wait on the empty group: '%s', wanted '%s'", b.line, want);
    /* b waits for its own term to end; its lease is revoked under it: no leader. */
    gt_send(&b, "leaderwait %llu 30000", (unsigned long long)b.rev);
    EXPECT_RC(et_revoke(e, gt_lease_of(e, g, "b")), 0);
    EXPECT(gt_rc(&b, 30000) == VIGIL_ENOPEERS, "b's wait for its own end: '%s'", b.line);
    gt_child_kill(&b);
    EXPECT_RC(vigil_group_leave(c), 0);

    /* With etcd gone, the wait ends at its deadline naming what it met. */
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    vigil_etcd *through = et_connect(r.url);
    vt_relay_down(&r);
    int rc = vigil_group_leader_wait(through, g, 0, 500000000ull, &l);
    EXPECT(rc == VIGIL_ETIMEDOUT && strstr(vigil_etcd_errmsg(), "refused"),
           "leader_wait with etcd gone: %d, errmsg '%s'", rc, vigil_etcd_errmsg());
    vigil_etcd_close(through);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_watch_tells_each_leader_once), VT_CASE(test_watch_one_revision_two_leaves),
        VT_CASE(test_watch_replays_an_outage), VT_CASE(test_leader_wait))
