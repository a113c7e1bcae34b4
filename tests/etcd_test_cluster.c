/* SPDX-License-Identifier: MIT */
/*
 * Description: libvigil-etcd on a 3-member cluster (tests/etcd_cluster.sh,
 * the etcd3 fixture) whose members hang and die under it: the fixture
 * itself (every member serves, one can be frozen, killed and brought
 * back).
 */
#include "etcd_testutil.h"

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

/* The fixture: three members, each serving on its own; one frozen and one
 * killed and restarted, the others go on. */
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

VT_MAIN(VT_CASE(test_fixture_members))
