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

#include "group_internal.h"
#include "proc_internal.h"

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
    /* Through a symlink of root's (mode 0777 as every symlink's): the
     * message describes the directory refused, not the link. */
    const char *link = vt_path("link");
    EXPECT(symlink(theirs, link) == 0, "symlink: %s", strerror(errno));
    VT_RUN("agent", "--etcd", url, "--dir", link);
    EXPECT(R.rc == 1 && strstr(R.err, VT_TEST_USER) && strstr(R.err, "mode 0700") && strstr(R.err, "another user's"),
           "agent on a link to another user's directory: exit %d, '%s'", R.rc, R.err);
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

/* A member the agent cannot see (its record names another pid namespace):
 * said once, "not watching lease ... of NAME in GROUP", the name and
 * group as the record holds them, hostile, and escaped. */
static int test_agent_unseen_escaped(void)
{
    NEED_ETCD();
    const char *d = vt_path("unseen");
    EXPECT(mkdir(d, 0700) == 0, "mkdir: %s", strerror(errno));
    char path[700];
    snprintf(path, sizeof(path), "%s/vigil-7e57.lease", d);
    FILE *f = fopen(path, "w");
    EXPECT(f, "record: %s", strerror(errno));
    /* pidns 12345: no pid namespace's inode, so never the agent's own. */
    fprintf(f, "vigil-lease 2\nlease %lld\npid %d\nstart 0\npidns 12345\ngroup %s\nname %s\n", 0x7e57LL,
            (int)getpid(), evil_host, evil_name);
    EXPECT(fclose(f) == 0, "record: %s", strerror(errno));
    struct vt_proc a;
    EXPECT(VT_SPAWN(&a, "agent", "--etcd", url, "--dir", d) == 0, "spawn agent");
    bool said = vt_read_until(&a, "not watching lease 7e57", 20000) && vt_read_until(&a, "TTL\n", 5000);
    EXPECT(vt_stop_tool(&a, SIGTERM, 10000) == 0, "agent did not end cleanly");
    EXPECT(said, "the agent did not say it leaves the unseen member alone: '%s'", a.buf);
    EXPECT(!vt_unclean(a.buf), "agent: %s reached the terminal:\n%s", vt_unclean(a.buf), a.buf);
    EXPECT(strstr(a.buf, "of \\x1b]0;pwned\\x07name\\u009b2J\\xff in host\\x1b[2J\\u202e\\x7f"),
           "the member's name and group are not shown escaped:\n%s", a.buf);
    return 0;
}

/* The names a member's record of a lease would take, planted first by
 * another member of a group's directory (nobody, with the group as a
 * supplementary one: it may write there, and lease IDs come in order):
 * the temporary name older vigils used and the final one. The member
 * (vigil-test) records its lease all the same, under names of its own;
 * what was planted is left as it was; and the agent (root) reads the
 * record. */
static int test_record_names_planted(void)
{
    NEED_ETCD();
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *d = vt_path("planted");
    EXPECT(mkdir(d, 0700) == 0 && chown(d, 0, u.gid) == 0 && chmod(d, 01770) == 0, "mkdir: %s", strerror(errno));
    static const char *const planted[] = { ".vigil-7e58.tmp", "vigil-7e58.lease" };
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_become(65534, 65534, &u.gid, 1);
        for (size_t i = 0; i < 2; i++) {
            char p[700];
            snprintf(p, sizeof(p), "%s/%s", d, planted[i]);
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 || write(fd, "planted\n", 8) != 8 || close(fd) != 0)
                _exit(1);
        }
        _exit(0);
    }
    EXPECT(vt_wait(kid, 10000) == 0, "nobody could not plant its names");
    /* The member: writes its record, says where, and lives until told. */
    int said[2], hold[2];
    EXPECT(pipe2(said, O_CLOEXEC) == 0 && pipe2(hold, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t member = fork();
    if (member == 0) {
        close(said[0]);
        close(hold[1]);
        vt_become(u.uid, u.gid, NULL, 0);
        vigil_group_member *m = calloc(1, sizeof(*m));
        if (!m)
            _exit(1);
        m->lease = 0x7e58;
        snprintf(m->hex, sizeof(m->hex), "7e58");
        snprintf(m->group, sizeof(m->group), "planted");
        snprintf(m->name, sizeof(m->name), "member");
        m->pid = (uint32_t)getpid();
        char out[sizeof(m->record) + 16];
        int n = snprintf(out, sizeof(out), "%d %s", grecord_write(m, d), m->record);
        if (write(said[1], out, (size_t)n + 1) != n + 1)
            _exit(1);
        char c;
        (void)read(hold[0], &c, 1);
        _exit(0);
    }
    close(said[1]);
    close(hold[0]);
    char got[4200] = "";
    struct pollfd pf = { said[0], POLLIN, 0 };
    ssize_t k = poll(&pf, 1, 10000) == 1 ? read(said[0], got, sizeof(got) - 1) : -1;
    close(said[0]);
    int wrote = k > 0 ? atoi(got) : -99999;
    const char *record = k > 0 && strchr(got, ' ') ? strchr(got, ' ') + 1 : "";
    int fail = 0;
    struct stat st;
    char text[256];
    if (wrote != 0) {
        fprintf(stderr, "the member could not record its lease past the planted names: %d (%s)\n", wrote,
                vigil_strerror(wrote));
        fail = 1;
    } else if (lstat(record, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != u.uid) {
        fprintf(stderr, "the record %s is not the member's own file\n", record);
        fail = 1;
    } else {
        vt_slurp(record, text, sizeof(text));
        if (!strstr(text, "lease 32344\n") || !strstr(text, "name member\n")) {
            fprintf(stderr, "the record %s holds '%s'\n", record, text);
            fail = 1;
        }
    }
    for (size_t i = 0; i < 2 && !fail; i++) {
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", d, planted[i]);
        vt_slurp(p, text, sizeof(text));
        if (lstat(p, &st) != 0 || st.st_uid != 65534 || strcmp(text, "planted\n") != 0) {
            fprintf(stderr, "nobody's %s was removed or changed\n", planted[i]);
            fail = 1;
        }
    }
    /* The agent, root, trusts the member's record (a member of DIR's
     * group made it) and watches its process; the planted ones are no
     * records. */
    struct vt_proc a;
    if (!fail && VT_SPAWN(&a, "agent", "--etcd", url, "--dir", d, "--json") == 0) {
        bool ready = vt_read_until(&a, "\"ready\"", 15000) && vt_read_until(&a, "\n", 5000);
        vt_stop_tool(&a, SIGTERM, 10000);
        if (!ready || !strstr(a.buf, "\"watched\": 1}")) {
            fprintf(stderr, "the agent did not watch the member's record: '%s'\n", a.buf);
            fail = 1;
        }
    }
    close(hold[1]);
    EXPECT(vt_wait(member, 10000) == 0, "the member failed");
    return fail;
}

/* DIR renamed away, and another directory put at its path, between the
 * agent's opening it and its watching it: the agent watches the directory
 * it opened (and scanned), so a record arriving there later is read. */
static char swap_dir[600], swap_away[600];

static void swap_at_open(const char *step)
{
    if (strcmp(step, "opened") == 0 && rename(swap_dir, swap_away) == 0)
        (void)mkdir(swap_dir, 0700);
}

static int test_agent_watches_what_it_opened(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    snprintf(swap_dir, sizeof(swap_dir), "%s", vt_path("swapped"));
    snprintf(swap_away, sizeof(swap_away), "%s", vt_path("swapped-away"));
    EXPECT(mkdir(swap_dir, 0700) == 0, "mkdir: %s", strerror(errno));
    vigil_agent *a = NULL;
    gagent_test_hook = swap_at_open;
    int rc = vigil_agent_open(e, swap_dir, &a);
    gagent_test_hook = NULL;
    EXPECT_RC(rc, 0);
    EXPECT(access(swap_away, F_OK) == 0, "the directory was not swapped");
    /* A record of this live process, arriving by rename in the directory
     * the agent opened. */
    char tmp[700], rec[700];
    snprintf(tmp, sizeof(tmp), "%s/.tmp", swap_away);
    snprintf(rec, sizeof(rec), "%s/vigil-7e59.lease", swap_away);
    FILE *f = fopen(tmp, "w");
    EXPECT(f, "record: %s", strerror(errno));
    fprintf(f, "vigil-lease 2\nlease %lld\npid %d\nstart %llu\npidns %llu\ngroup g\nname n\n", 0x7e59LL,
            (int)getpid(), (unsigned long long)vigil_self_start_time(), (unsigned long long)vigil_self_pidns());
    EXPECT(fclose(f) == 0 && rename(tmp, rec) == 0, "record: %s", strerror(errno));
    vigil_agent_event ev[4];
    bool seen = VT_WAIT_FOR((vigil_agent_run(a, 50, ev, 4), vigil_agent_watched(a) == 1), 10000);
    vigil_agent_close(a);
    vigil_etcd_close(e);
    EXPECT(seen, "the agent did not see a record arrive in the directory it opened (watching what its path named)");
    return 0;
}

VT_MAIN(VT_CASE(test_hostile_members), VT_CASE(test_agent_dir_refused), VT_CASE(test_agent_ignores_foreign_records),
        VT_CASE(test_agent_group_records),
        VT_CASE(test_agent_unseen_escaped),
        VT_CASE(test_record_names_planted),
        VT_CASE(test_agent_watches_what_it_opened))
