/* SPDX-License-Identifier: MIT */
/*
 * A group on a 3-member etcd cluster (the etcd3 fixture) whose members hang
 * and die under it: with the member the clients speak to frozen (SIGSTOP:
 * it accepts and never answers), and with the leader killed, members still
 * join, take and finish units, meet at a round, and a watch still sees a
 * member leave. Every wait is bounded; the clients move to another member
 * when a request times out, and a watch stream follows them.
 */
#include "grouptest.h"

#define TTL 10000

static const char *eps;

#define NEED_CLUSTER()                                                        \
    do {                                                                      \
        int need_rc_ = et_cluster(&eps);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static vigil_etcd *connect_fast(void)
{
    vigil_etcd *e = et_connect(eps);
    vigil_etcd_set_timeout(e, 1000, 3000); /* a frozen member costs a request's time, once */
    return e;
}

/* With member `victim` stopped by how (freeze or kill), the group goes on:
 * a unit taken and done, a round with a member in another process, that
 * member's leave seen by a watch, a member joining. */
static int group_survives(const char *how, int victim)
{
    vigil_etcd *e = connect_fast(), *we = connect_fast();
    const char *g = gt_group(how);
    vigil_group_member *a = gt_join(e, g, "a", TTL, NULL);
    EXPECT(a, "join failed");
    EXPECT_RC(vigil_group_add(e, g, "u"), 0);
    struct gt_child b;
    EXPECT(gt_child_start(&b, eps, g, "b", TTL, NULL, NULL), "b did not join: '%s'", b.line);
    vigil_group_watcher *w = NULL;
    EXPECT_RC(vigil_group_watch(we, g, &w), 0);
    vigil_group_event ev;
    EXPECT_RC(gt_event_of(w, "b", &ev, 10000), 1);
    EXPECT_RC(et_cluster_do(how, victim, strcmp(how, "kill") == 0 ? "KILL" : NULL), 0);
    vigil_group_unit u;
    int take = vigil_group_take(a, &u);
    int done = take == 0 ? vigil_group_done(a, &u) : take;
    gt_send(&b, "wait 0 60000");
    int ra = vigil_group_barrier_wait(a, 0, 60000000000ull), rb = gt_rc(&b, 70000);
    int left = gt_child_leave(&b);
    int seen = gt_event_of(w, "b", &ev, 30000);
    vigil_group_member *c = gt_join(e, g, "c", TTL, NULL);
    int n = gt_count(e, g);
    int back = et_cluster_do(strcmp(how, "kill") == 0 ? "restart" : "thaw", victim, NULL);
    EXPECT(take == 0 && done == 0, "with member %d %sed: take %d, done %d", victim, how, take, done);
    EXPECT(ra >= 0 && rb >= 0 && (ra == VIGIL_SERIAL) + (rb == VIGIL_SERIAL) == 1, "round 0: %d and %d", ra, rb);
    EXPECT(left == 0, "b's leave: %d", left);
    EXPECT(seen == 1 && ev.type == VIGIL_GROUP_LEAVE, "the watch: %d, type %u", seen, ev.type);
    EXPECT(c && n == 2, "join with member %d %sed: %s, %d members", victim, how, c ? "joined" : "failed", n);
    EXPECT(back == 0, "member %d did not come back", victim);
    EXPECT(!vigil_group_lost(a), "a lost its membership while a member was %sed", how);
    EXPECT_RC(vigil_group_leave(c), 0);
    EXPECT_RC(vigil_group_leave(a), 0);
    vigil_group_watch_close(w);
    vigil_etcd_close(we);
    vigil_etcd_close(e);
    return 0;
}

/* The first endpoint, the one every client speaks to first, frozen. */
static int test_member_frozen(void)
{
    NEED_CLUSTER();
    return group_survives("freeze", 1);
}

/* The leader killed. */
static int test_leader_killed(void)
{
    NEED_CLUSTER();
    int l = et_cluster_leader();
    EXPECT(l > 0, "no leader found");
    return group_survives("kill", l);
}

VT_MAIN(VT_CASE(test_member_frozen), VT_CASE(test_leader_killed))
