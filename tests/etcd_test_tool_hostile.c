/* SPDX-License-Identifier: MIT */
/*
 * Issue 26 against a real etcd: member names and hosts are whatever an
 * etcd client chose, so `vigil group ls`, `group watch` and `agent` print
 * them escaped (no ESC, C0, C1, DEL, bidi control or malformed UTF-8 ever
 * reaches the terminal; --json parses). The agent refuses a --dir that
 * another user could have written in (world-writable; another user's),
 * unless --trust-owner, and ignores a record another user made: a dead
 * member recorded by the agent's own user is revoked, one recorded by the
 * unprivileged vigil-test (tests/usertest.h) is left alone, unless
 * vigil-test may write in the directory (a group's 1770 directory).
 */
#include "grouptest.h"
#include "tooltest.h"
#include "usertest.h"

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static const char evil_name[] = "\x1b]0;pwned\x07name\xc2\x9b" "2J\xff";
static const char evil_host[] = "host\x1b[2J\xe2\x80\xae\x7f";

static int test_hostile_members(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("hostile");
    struct vigil_group_options o = { .dir = "", .host = evil_host };
    vigil_group_member *m = NULL;
    EXPECT_RC(vigil_group_join_opts(e, g, evil_name, 60000, &o, &m), 0);
    VT_RUN("group", "ls", g, "--etcd", url);
    EXPECT(R.rc == 0 && !vt_unclean(R.out) && !vt_unclean(R.err), "group ls: exit %d, %s reached the terminal:\n%s%s",
           R.rc, vt_unclean(R.out) ? vt_unclean(R.out) : vt_unclean(R.err), R.out, R.err);
    EXPECT(strstr(R.out, "\\x1b]0;pwned\\x07name\\u009b2J\\xff") && strstr(R.out, "host\\x1b[2J\\u202e\\x7f"),
           "group ls: the name and host are not shown escaped:\n%s", R.out);
    VT_RUN("group", "ls", g, "--etcd", url, "--json");
    EXPECT(R.rc == 0 && vj_parse(R.out) && !vt_unclean(R.out), "group ls --json: not clean JSON (%s):\n%s", vj_error,
           R.out);
    struct vt_proc w;
    EXPECT(VT_SPAWN(&w, "group", "watch", g, "--etcd", url) == 0, "spawn watch");
    bool seen = vt_read_until(&w, "pwned", 15000) && vt_read_until(&w, "\n", 5000);
    vt_stop_tool(&w, SIGTERM, 10000);
    EXPECT(seen && !vt_unclean(w.buf), "group watch: %s:\n%s", seen ? vt_unclean(w.buf) : "no join line", w.buf);
    EXPECT_RC(vigil_group_leave(m), 0);
    vigil_etcd_close(e);
    return 0;
}

/* The agent's directory: refused when others could write in it. */
static int test_agent_dir_refused(void)
{
    NEED_ETCD();
    const char *d = vt_path("everyone");
    EXPECT(mkdir(d, 0777) == 0 && chmod(d, 0777) == 0, "mkdir: %s", strerror(errno));
    VT_RUN("agent", "--etcd", url, "--dir", d);
    EXPECT(R.rc == 1 && strstr(R.err, "mode 0777") && strstr(R.err, "writable by everyone") &&
               strstr(R.err, "--trust-owner"),
           "agent on a 0777 directory: exit %d, '%s'", R.rc, R.err);
    struct vt_proc a;
    EXPECT(VT_SPAWN(&a, "agent", "--etcd", url, "--dir", d, "--json", "--trust-owner") == 0, "spawn agent");
    bool ready = vt_read_until(&a, "\"ready\"", 15000);
    vt_stop_tool(&a, SIGTERM, 10000);
    EXPECT(ready, "agent --trust-owner did not start: '%s'", a.buf);
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *theirs = vt_path("theirs");
    EXPECT(mkdir(theirs, 0700) == 0 && chown(theirs, u.uid, u.gid) == 0, "mkdir: %s", strerror(errno));
    VT_RUN("agent", "--etcd", url, "--dir", theirs);
    EXPECT(R.rc == 1 && strstr(R.err, VT_TEST_USER) && strstr(R.err, "another user's"),
           "agent on another user's directory: exit %d, '%s'", R.rc, R.err);
    return 0;
}

/* A record of a dead process for m's lease, in dir, owned by uid:gid. */
static int plant_record(const char *dir, vigil_group_member *m, const char *group, uid_t uid, gid_t gid)
{
    vigil_group_member_info s;
    vigil_group_self(m, &s);
    char path[700];
    snprintf(path, sizeof(path), "%s/vigil-%llx.lease", dir, (unsigned long long)s.lease);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "vigil-lease 1\nlease %lld\npid %d\nstart 0\ngroup %s\nname %s\n", (long long)s.lease,
            (int)vt_unused_pid(), group, s.name);
    if (fclose(f) != 0 || chown(path, uid, gid) != 0)
        return -1;
    return 0;
}

static int test_agent_ignores_foreign_records(void)
{
    NEED_ETCD();
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("records");
    vigil_group_member *mine = gt_join(e, g, "mine", 120000, NULL), *theirs = gt_join(e, g, "theirs", 120000, NULL);
    EXPECT(mine && theirs, "join failed");
    const char *d = vt_path("records");
    EXPECT(mkdir(d, 0700) == 0, "mkdir: %s", strerror(errno));
    /* Both name a dead process: a record the agent trusts is revoked at
     * once; the same from another user must not be. */
    EXPECT(plant_record(d, mine, g, 0, 0) == 0 && plant_record(d, theirs, g, u.uid, u.gid) == 0, "records: %s",
           strerror(errno));
    vigil_group_member_info mi, ti;
    vigil_group_self(mine, &mi);
    vigil_group_self(theirs, &ti);
    char want[64], not_want[64];
    snprintf(want, sizeof(want), "\"lease\": \"%llx\"", (unsigned long long)mi.lease);
    snprintf(not_want, sizeof(not_want), "\"lease\": \"%llx\"", (unsigned long long)ti.lease);
    struct vt_proc a;
    EXPECT(VT_SPAWN(&a, "agent", "--etcd", url, "--dir", d, "--json") == 0, "spawn agent");
    /* Both records were loaded by the opening scan and both are dead, so
     * one pass revokes every trusted one: once mine is reported, theirs
     * would have been in the same pass. */
    bool revoked = vt_read_until(&a, want, 20000) && vt_read_until(&a, "\n", 5000);
    EXPECT(vt_stop_tool(&a, SIGTERM, 10000) == 0, "agent did not end cleanly");
    EXPECT(revoked, "the agent did not revoke its own user's record: '%s'", a.buf);
    EXPECT(!strstr(a.buf, not_want), "the agent revoked a lease another user's record named: '%s'", a.buf);
    vigil_group_member_info info[4];
    int n = vigil_group_members(e, g, info, 4);
    EXPECT(n == 1 && strcmp(info[0].name, "theirs") == 0, "members after the agent: %d", n);
    vigil_group_leave(theirs);
    vigil_group_leave(mine); /* its lease is gone: refused, freed all the same */
    vigil_etcd_close(e);
    return 0;
}

/* A root agent serving a group's directory (root:G 1770): a member of G
 * may write there, so its record is read and its dead member revoked. */
static int test_agent_group_records(void)
{
    NEED_ETCD();
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group("grouprec");
    vigil_group_member *m = gt_join(e, g, "member", 120000, NULL);
    EXPECT(m, "join failed");
    const char *d = vt_path("groupdir");
    EXPECT(mkdir(d, 0700) == 0 && chown(d, 0, u.gid) == 0 && chmod(d, 01770) == 0, "mkdir: %s", strerror(errno));
    EXPECT(plant_record(d, m, g, u.uid, u.gid) == 0, "record: %s", strerror(errno));
    vigil_group_member_info mi;
    vigil_group_self(m, &mi);
    char want[64];
    snprintf(want, sizeof(want), "\"lease\": \"%llx\"", (unsigned long long)mi.lease);
    struct vt_proc a;
    EXPECT(VT_SPAWN(&a, "agent", "--etcd", url, "--dir", d, "--json") == 0, "spawn agent");
    bool revoked = vt_read_until(&a, want, 20000);
    EXPECT(vt_stop_tool(&a, SIGTERM, 10000) == 0, "agent did not end cleanly");
    EXPECT(revoked && strstr(a.buf, "\"revoked\""), "the agent ignored a group member's record: '%s'", a.buf);
    vigil_group_leave(m);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_hostile_members), VT_CASE(test_agent_dir_refused), VT_CASE(test_agent_ignores_foreign_records),
        VT_CASE(test_agent_group_records))
