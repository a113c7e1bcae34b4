/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil create, against the built binary: --mode and --group
 * give the file its permissions and group as it appears (the umask does
 * not apply; nothing is left beside it), each kind is made (a heartbeat
 * table, a barrier on its table, a lease store) and opens with the
 * library, the options that do not fit a kind are usage errors, and a
 * user outside the group is refused with a line that says why.
 * --exist-ok (a service's start step) keeps an existing file of the kind
 * and capacity asked for, exit 0, and is still an error for any other
 * and for one the next command would refuse as untrusted; a
 * command that opens a missing file names it and says how to make it.
 */
#include "tooltest.h"

#include <dirent.h>
#include <grp.h>

/* Entries in dir other than . and .., so a leftover temporary shows. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static int test_mode_and_group(void)
{
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/modes", vt_tmpdir());
    EXPECT(mkdir(dir, 0700) == 0, "mkdir");
    char p[700];
    snprintf(p, sizeof(p), "%s/pool.hb", dir);
    mode_t old = umask(077); /* the file's mode must not depend on it */
    VT_RUN("create", p, "--capacity", "8", "--mode", "0660");
    umask(old);
    EXPECT_EXIT(0, "create --mode 0660");
    struct stat st;
    EXPECT(stat(p, &st) == 0 && (st.st_mode & 07777) == 0660, "expected mode 0660, got %o", st.st_mode & 07777);
    EXPECT(strstr(R.out, "mode 0660"), "create did not say the mode: %s", R.out);

    /* A group of processes: root gives it away; the file appears with it. */
    gid_t gid = getegid() == 0 ? 65534 : getegid();
    char gname[32];
    struct group *gr = getgrgid(gid);
    snprintf(gname, sizeof(gname), "%s", gr ? gr->gr_name : "");
    if (!gname[0])
        snprintf(gname, sizeof(gname), "%u", (unsigned)gid);
    snprintf(p, sizeof(p), "%s/group.hb", dir);
    VT_RUN("create", p, "--capacity", "4", "--mode", "640", "--group", gname);
    EXPECT_EXIT(0, "create --group");
    EXPECT(stat(p, &st) == 0 && st.st_gid == gid && (st.st_mode & 07777) == 0640,
           "expected group %u mode 0640, got %u %o", (unsigned)gid, (unsigned)st.st_gid, st.st_mode & 07777);
    EXPECT(entries(dir) == 2, "a temporary file was left beside the new one (%d entries)", entries(dir));
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(p, 4, &hb), 0);
    vigil_hb_close(hb);
    /* never clobbers, with --group too */
    VT_RUN("create", p, "--capacity", "4", "--group", gname);
    EXPECT_EXIT(1, "create --group over an existing file");
    EXPECT(strstr(R.err, strerror(EEXIST)) && entries(dir) == 2, "'%s', %d entries", R.err, entries(dir));
    return 0;
}

static int test_kinds(void)
{
    const char *t = vt_path("k.hb"), *b = vt_path("k.barrier"), *l = vt_path("k.leases");
    VT_RUN("create", t, "--kind", "heartbeat", "--capacity", "6");
    EXPECT_EXIT(0, "create --kind heartbeat");
    VT_RUN("create", b, "--kind", "barrier", "--table", t, "--grace", "7");
    EXPECT_EXIT(0, "create --kind barrier");
    EXPECT(strstr(R.out, "barrier, capacity 6"), "%s", R.out);
    VT_RUN("create", l, "--kind", "leases", "--capacity", "32", "--mode", "0600");
    EXPECT_EXIT(0, "create --kind leases");
    vigil_hb *hb;
    vigil_barrier *br;
    vigil_leases *ls;
    vigil_barrier_state bs;
    EXPECT_RC(vigil_hb_open(t, 6, &hb), 0);
    EXPECT_RC(vigil_barrier_open(b, hb, 0, &br), 0);
    EXPECT_RC(vigil_barrier_peek(b, &bs), 0);
    EXPECT(bs.capacity == 6 && bs.grace_epochs == 7, "barrier capacity %u grace %llu", bs.capacity,
           (unsigned long long)bs.grace_epochs);
    EXPECT_RC(vigil_leases_open(l, &ls), 0);
    EXPECT(vigil_leases_capacity(ls) == 32, "lease store capacity %u", vigil_leases_capacity(ls));
    vigil_leases_close(ls);
    vigil_barrier_close(br);
    vigil_hb_close(hb);

    /* A barrier's table must be a heartbeat table, and exist. */
    VT_RUN("create", vt_path("k2.barrier"), "--kind", "barrier", "--table", l);
    EXPECT_EXIT(1, "a barrier on a lease store");
    EXPECT(strstr(R.err, "a lease store, not a heartbeat table"), "'%s'", R.err);
    VT_RUN("create", vt_path("k3.barrier"), "--kind", "barrier", "--table", vt_path("none.hb"));
    EXPECT_EXIT(1, "a barrier on a missing table");
    EXPECT(access(vt_path("k2.barrier"), F_OK) != 0 && access(vt_path("k3.barrier"), F_OK) != 0,
           "a refused barrier was made");
    return 0;
}

static int test_usage(void)
{
    const char *t = vt_path("u.hb"), *n = vt_path("u-new");
    vigil_hb_close(vt_hb_fresh_at(t, 2));
    const char *const cases[][10] = {
        { "create", n, "--kind", "queue", "--capacity", "4" },
        { "create", n, "--kind", "barrier" },                              /* no --table */
        { "create", n, "--kind", "barrier", "--table", t, "--capacity", "4" },
        { "create", n, "--kind", "leases" },                               /* no --capacity */
        { "create", n, "--capacity", "4", "--table", t },                  /* --table on a table */
        { "create", n, "--capacity", "4", "--grace", "3" },
        { "create", n, "--capacity", "4", "--mode", "0800" },
        { "create", n, "--capacity", "4", "--mode", "1777" },
        { "create", n, "--capacity", "4", "--mode", "rw" },
        { "create", n, "--capacity", "4", "--mode", "07777" },
        { "create", n, "--capacity", "4", "--group", "no-such-group-here" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vt_runv(10000, cases[i]);
        EXPECT_EXIT(2, cases[i][2]);
        EXPECT(!R.out[0] && strncmp(R.err, "vigil create: ", 14) == 0, "case %zu: '%s' / '%s'", i, R.out, R.err);
    }
    EXPECT(access(n, F_OK) != 0, "a refused create made the file");
    return 0;
}

/* A user outside the group cannot give a file to it, and is told so. */
static int create_as_user(void *arg)
{
    (void)arg;
    const char *p = vt_path("theirs.hb");
    VT_RUN("create", p, "--capacity", "2", "--group", "0");
    if (R.rc != 1 || !strstr(R.err, "cannot give it to group 0") || !strstr(R.err, "not a member") ||
        access(p, F_OK) == 0 || entries(vt_tmpdir()) > 2) {
        fprintf(stderr, "create --group 0 as nobody: exit %d, '%s'\n", R.rc, R.err);
        return 1;
    }
    return 0;
}

static int test_group_refused(void)
{
    return vt_as_nobody(create_as_user, NULL);
}

static int test_exist_ok(void)
{
    const char *t = vt_path("keep.hb");
    VT_RUN("create", t, "--capacity", "4", "--mode", "0660", "--exist-ok");
    EXPECT(R.rc == 0 && strstr(R.out, "capacity 4, mode 0660"), "made: %d '%s' '%s'", R.rc, R.out, R.err);
    vigil_hb *hb;
    uint32_t slot;
    EXPECT_RC(vigil_hb_open(t, 4, &hb), 0);
    EXPECT_RC(vigil_hb_register(hb, 77, &slot), 0);
    /* Again, as a restarted service's start step: kept, its slot intact. */
    VT_RUN("create", t, "--capacity", "4", "--mode", "0660", "--exist-ok");
    EXPECT(R.rc == 0 && strstr(R.out, "there already, kept") && !R.err[0], "kept: %d '%s' '%s'", R.rc, R.out,
           R.err);
    vigil_slot_info info;
    EXPECT(vigil_hb_snapshot(hb, slot, &info) == 0 && info.pid == 77, "the kept table lost its slot");
    VT_RUN("create", t, "--capacity", "4", "--exist-ok");
    EXPECT(R.rc == 0 && strstr(R.err, "warning") && strstr(R.err, "mode 0660") && strstr(R.err, "--mode 0600"),
           "another mode is warned about: %d '%s'", R.rc, R.err);
    VT_RUN("create", t, "--capacity", "8", "--exist-ok");
    EXPECT(R.rc == 1 && strstr(R.err, "capacity 4, not 8"), "another capacity: %d '%s'", R.rc, R.err);
    VT_RUN("create", t, "--kind", "leases", "--capacity", "4", "--exist-ok");
    EXPECT(R.rc == 1 && strstr(R.err, "a heartbeat table, not a lease store"), "another kind: %d '%s'", R.rc,
           R.err);
    VT_RUN("create", t, "--capacity", "4");
    EXPECT(R.rc == 1 && strstr(R.err, "File exists"), "without --exist-ok: %d '%s'", R.rc, R.err);
    const char *junk = vt_path("junk.hb");
    int fd = open(junk, O_WRONLY | O_CREAT | O_EXCL, 0600);
    EXPECT(fd >= 0 && write(fd, "not vigil", 9) == 9, "junk");
    close(fd);
    VT_RUN("create", junk, "--capacity", "4", "--exist-ok");
    EXPECT(R.rc == 1 && strstr(R.err, "too short for a vigil file"), "not a vigil file: %d '%s'", R.rc, R.err);
    vigil_hb_close(hb);
    return 0;
}

/* --exist-ok keeps only what the next step will open: a file everyone
 * can write (or another user's) is refused as tick refuses it, unless
 * --trust-owner; never "kept", exit 0, and then a failing tick. */
static int test_exist_ok_untrusted(void)
{
    const char *t = vt_path("open.hb");
    VT_RUN("create", t, "--capacity", "4", "--mode", "0666");
    EXPECT(R.rc == 0, "made 0666: %d '%s'", R.rc, R.err);
    VT_RUN("create", t, "--capacity", "4", "--mode", "0666", "--exist-ok");
    EXPECT(R.rc == 1 && strstr(R.err, "writable by everyone") && !strstr(R.out, "kept"),
           "an untrusted file kept: %d '%s' '%s'", R.rc, R.out, R.err);
    VT_RUN("tick", t, "--count", "1");
    EXPECT(R.rc == 1 && strstr(R.err, "writable by everyone"), "tick on it: %d '%s'", R.rc, R.err);
    VT_RUN("create", t, "--capacity", "4", "--mode", "0666", "--exist-ok", "--trust-owner");
    EXPECT(R.rc == 0 && strstr(R.out, "there already, kept"), "--trust-owner: %d '%s' '%s'", R.rc, R.out, R.err);
    VT_RUN("create", vt_path("new.hb"), "--capacity", "4", "--trust-owner");
    EXPECT(R.rc == 2 && strstr(R.err, "goes with --exist-ok"), "--trust-owner alone: %d '%s'", R.rc, R.err);
    const char *link = vt_path("link.hb");
    EXPECT(symlink(vt_path("keep-target.hb"), link) == 0, "symlink: %s", strerror(errno));
    VT_RUN("create", vt_path("keep-target.hb"), "--capacity", "4");
    VT_RUN("create", link, "--capacity", "4", "--exist-ok");
    EXPECT(R.rc == 1 && !strstr(R.out, "kept"), "a symlink kept: %d '%s' '%s'", R.rc, R.out, R.err);
    return 0;
}

/* tick (and every command that opens an existing file to write it) on a
 * missing file: names it and says to make it with vigil create. */
static int test_missing_says_create(void)
{
    const char *t = vt_path("never-made.hb");
    VT_RUN("tick", t, "--count", "1");
    char want[1200];
    snprintf(want, sizeof(want), "vigil: %s: No such file or directory: make it with `vigil create %s --capacity N`",
             t, t);
    EXPECT(R.rc == 1 && strstr(R.err, want), "tick on a missing table: %d '%s'", R.rc, R.err);
    VT_RUN("failover", t, "--once");
    EXPECT(R.rc == 1 && strstr(R.err, want), "failover on a missing table: %d '%s'", R.rc, R.err);
    const char *deep = vt_path("no-dir/pool.hb");
    VT_RUN("tick", deep, "--count", "1");
    EXPECT(R.rc == 1 && strstr(R.err, "nor its directory") && strstr(R.err, "vigil create"),
           "a missing directory: %d '%s'", R.rc, R.err);
    return 0;
}

VT_MAIN(VT_CASE(test_mode_and_group), VT_CASE(test_kinds), VT_CASE(test_usage), VT_CASE(test_group_refused),
        VT_CASE(test_exist_ok), VT_CASE(test_exist_ok_untrusted), VT_CASE(test_missing_says_create))
