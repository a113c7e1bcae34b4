/* SPDX-License-Identifier: MIT */
/*
 * Description: the vigil tool, run as root, against another user
 * (tests/usertest.h: the attacker is the unprivileged vigil-test, acting
 * when the test says). A full tmpfs, mounted by the test in a mount
 * namespace of its own: create of a file that does not fit fails naming
 * the file system and the size and leaves nothing; once the attacker has
 * filled it, no command dies of SIGBUS (inspect, ls, export, tick,
 * failover, lock, barrier create), an older vigil's sparse file is refused
 * for writing with a message and read for looking, and allocated once
 * there is room. A store or table the attacker made (world-writable, or
 * theirs alone) is refused naming owner and mode unless --trust-owner;
 * create warns of a shared directory without the sticky bit. Hostile names
 * (ESC, C1, DEL, bytes that are not UTF-8, a newline, a bidi override) in
 * paths, keys and owners never reach the terminal raw from ls, inspect,
 * watch, export or an error message, the JSON parses, and promtool takes
 * the exposition. ls out of file descriptors names what it could not look
 * at and exits 1. The attacker shrinking and regrowing its files, over and
 * over, while root runs ls, inspect and export on them: none faults.
 */
#include "tooltest.h"
#include "usertest.h"

#include <dirent.h>
#include <sys/resource.h>

/* ---- what the attacker does --------------------------------------------- */

struct scene {
    char dir[512]; /* where the attacker acts */
};

static const char *const hostile[] = {
    "esc-\x1b]0;pwned\x07.hb", "csi-\xc2\x9b" "2J.hb", "bad-\xff\xfe.hb", "nl-\nfake line.hb",
    "del-\x7f.hb", "bidi-\xe2\x80\xae" "bh.evil", "back\\slash.hb",
};
#define NHOSTILE (sizeof(hostile) / sizeof(hostile[0]))
static const char hostile_key[] = "\x1b[2J\xc2\x9bkey\xff";
static const char hostile_owner[] = "\x1b]2;owned\x07\xc2\x85";

static const char *in(const struct scene *s, const char *name)
{
    static char bufs[4][1200];
    static unsigned next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", s->dir, name);
    return b;
}

/* The files the attacker flips (case 'F'): its own, and root's for its
 * group. */
static int flip_these(const struct scene *s)
{
    static const char *const big[] = { "big.hb", "big.bar", "big.ls", "root.hb", "root.ls" };
    const char *paths[5];
    char bufs[5][1200];
    for (int i = 0; i < 5; i++) {
        snprintf(bufs[i], sizeof(bufs[i]), "%s/%s", s->dir, big[i]);
        paths[i] = bufs[i];
    }
    return vt_flip_start(paths, 5);
}

static char act(char cmd, void *arg)
{
    struct scene *s = arg;
    vigil_leases *ls;
    vigil_hb *hb;
    vigil_lease l;
    switch (cmd) {
    case 'f': { /* fill the file system */
        int fd = open(in(s, "filler"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        static char block[4096];
        ssize_t w;
        while (fd >= 0 && (w = write(fd, block, sizeof(block))) > 0)
            ;
        int err = errno;
        if (fd >= 0)
            close(fd);
        return fd >= 0 && err == ENOSPC ? 0 : 1;
    }
    case 'r':
        return unlink(in(s, "filler")) == 0 ? 0 : 1;
    case 's': /* a world-writable store, a key held in it for ten minutes */
        if (vigil_leases_create_mode(in(s, "locks.ls"), 8, 0666, &ls) != 0)
            return 1;
        return vigil_leases_acquire(ls, "nightly", "mallory", 600000, &l) == 0 ? 0 : 1;
    case 'o': /* stores and tables of its own, its group's, everyone's */
        if (vigil_leases_create_mode(in(s, "own.ls"), 8, 0600, &ls) != 0 ||
            vigil_hb_create_mode(in(s, "own.hb"), 4, 0600, &hb) != 0)
            return 1;
        vigil_hb_close(hb);
        if (vigil_hb_create_mode(in(s, "group.hb"), 4, 0660, &hb) != 0)
            return 1;
        vigil_hb_close(hb);
        if (vigil_hb_create_mode(in(s, "world.hb"), 4, 0666, &hb) != 0)
            return 1;
        vigil_hb_close(hb);
        vigil_leases_close(ls);
        return 0;
    case 'b': /* a big table, store and barrier of its own, readable by all */
        if (vigil_hb_create_mode(in(s, "big.hb"), 1u << 14, 0644, &hb) != 0)
            return 1;
        vigil_barrier *bar;
        if (vigil_barrier_create_mode(in(s, "big.bar"), hb, 5, 0644, &bar) != 0)
            return 1;
        vigil_barrier_close(bar);
        vigil_hb_close(hb);
        if (vigil_leases_create_mode(in(s, "big.ls"), 4096, 0644, &ls) != 0)
            return 1;
        vigil_leases_close(ls);
        return 0;
    case 'g': /* a table in a setgid directory of root's group */
        if (vigil_hb_create_mode(in(s, "setgid/group.hb"), 4, 0660, &hb) != 0)
            return 1;
        vigil_hb_close(hb);
        return 0;
    case 'F': /* a child that flips their sizes until told to stop */
        return flip_these(s) == 0 ? 0 : 1;
    case 'X':
        return vt_flip_stop() == 0 ? 0 : 1;
    case 'n': /* files with names that are not text, a store with such keys */
        for (size_t i = 0; i < NHOSTILE; i++) {
            if (vigil_hb_create_mode(in(s, hostile[i]), 2, 0644, &hb) != 0)
                return 1;
            vigil_hb_close(hb);
        }
        if (vigil_leases_create_mode(in(s, "keys-\x1b[1m.ls"), 4, 0644, &ls) != 0)
            return 1;
        return vigil_leases_acquire(ls, hostile_key, hostile_owner, 600000, &l) == 0 ? 0 : 1;
    }
    return 1;
}

/* A directory for the attacker: anyone may write it, sticky (as /dev/shm). */
static const char *anyone_dir(struct scene *s, const char *name)
{
    snprintf(s->dir, sizeof(s->dir), "%s", vt_path(name));
    if (mkdir(s->dir, 01777) != 0 || chmod(s->dir, 01777) != 0)
        return NULL;
    return s->dir;
}

/* ---- what no line may hold -------------------------------------------------- */

#define EXPECT_CLEAN(what)                                                                     \
    do {                                                                                       \
        const char *why_o = vt_unclean(R.out), *why_e = vt_unclean(R.err);                           \
        EXPECT(!why_o && !why_e, "%s: %s reached the terminal", (what), why_o ? why_o : why_e); \
    } while (0)

/* ---- a full tmpfs --------------------------------------------------------------- */

static int full_disk(struct scene *s)
{
    const char *d = s->dir;
    /* 256 KiB wanted on 64 KiB: refused at once, naming it all, nothing left. */
    VT_RUN("create", in(s, "big.hb"), "--capacity", "4096");
    EXPECT_EXIT(1, "create on a tmpfs too small for it");
    EXPECT(strstr(R.err, "no room for its 262208 bytes") && strstr(R.err, "tmpfs") && strstr(R.err, d) &&
               strstr(R.err, "nothing was made"),
           "create: expected the file system and the size named, got: %s", R.err);
    DIR *dh = opendir(d);
    struct dirent *e;
    int left = 0;
    while (dh && (e = readdir(dh)))
        left += e->d_name[0] != '.';
    if (dh)
        closedir(dh);
    EXPECT(left == 0, "create left %d files on the full tmpfs", left);
    VT_RUN("create", in(s, "t.hb"), "--capacity", "8");
    EXPECT_EXIT(0, "create of a table that fits");
    VT_RUN("create", in(s, "l.ls"), "--kind", "leases", "--capacity", "4");
    EXPECT_EXIT(0, "create of a store that fits");
    VT_RUN("create", in(s, "b.bar"), "--kind", "barrier", "--table", in(s, "t.hb"));
    EXPECT_EXIT(0, "create of a barrier that fits");
    EXPECT_RC(vt_make_sparse(in(s, "old.hb"), 256), 0);
    EXPECT(vt_sparse(in(s, "old.hb")), "the older vigil's table has no hole");
    return 0;
}

static int test_full_tmpfs(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    static struct scene s;
    snprintf(s.dir, sizeof(s.dir), "%s", vt_path("tmpfs"));
    if ((rc = vt_tmpfs(s.dir, "size=64k,mode=1777")) != 0)
        return rc;
    struct vt_attacker a = { 0 };
    int fail = full_disk(&s);
    if (!fail && vt_attacker_start(&a, &u, act, &s) != 0)
        fail = 1;
    if (!fail && vt_attack(&a, 'f') != 0) {
        fprintf(stderr, "the attacker could not fill the tmpfs\n");
        fail = 1;
    }
    /* Now full: every command either works or says why, none faults. */
    static const struct {
        const char *args[10];
        int         want;
        const char *says;
    } runs[] = {
        { { "inspect", "@t.hb" }, 0, NULL },
        { { "inspect", "@old.hb" }, 0, NULL },
        { { "inspect", "@b.bar" }, 0, NULL },
        { { "inspect", "@l.ls" }, 0, NULL },
        { { "ls", "@" }, 0, NULL },
        { { "export", "@t.hb", "@old.hb", "@l.ls", "@b.bar" }, 0, NULL },
        { { "tick", "@t.hb", "--count", "1", "--quiet" }, 0, NULL },
        { { "failover", "@t.hb", "--once" }, 0, NULL },
        { { "lock", "--store", "@l.ls", "--wait", "0", "k", "--", "true" }, 0, NULL },
        { { "tick", "@old.hb", "--count", "1" }, 1, "made by an older vigil, its pages not yet allocated, and no room" },
        { { "failover", "@old.hb", "--once" }, 1, "no room for its 16448 bytes" },
        { { "create", "@b2.bar", "--kind", "barrier", "--table", "@t.hb" }, 1, "nothing was made" },
        { { "lock", "--store", "@new.ls", "--wait", "0", "k", "--", "true" }, 1, "nothing was made" },
    };
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]) && !fail; i++) {
        const char *args[11] = { 0 };
        for (size_t k = 0; k < 10 && runs[i].args[k]; k++)
            args[k] = runs[i].args[k][0] == '@' ? (runs[i].args[k][1] ? in(&s, runs[i].args[k] + 1) : s.dir)
                                                : runs[i].args[k];
        vt_runv(20000, args);
        if (R.rc != runs[i].want || (runs[i].says && !strstr(R.err, runs[i].says))) {
            fprintf(stderr, "on the full tmpfs, vigil %s %s: expected exit %d%s%s\n", args[0], args[1], runs[i].want,
                    runs[i].says ? " saying " : "", runs[i].says ? runs[i].says : "");
            vt_dump();
            fail = 1;
        }
    }
    if (!fail && (access(in(&s, "b2.bar"), F_OK) == 0 || access(in(&s, "new.ls"), F_OK) == 0)) {
        fprintf(stderr, "a create refused for want of room left its file\n");
        fail = 1;
    }
    if (!fail && !vt_sparse(in(&s, "old.hb"))) {
        fprintf(stderr, "the older vigil's table lost its holes with no room to allocate them?\n");
        fail = 1;
    }
    /* Room again: the first writing open allocates the older table. */
    if (!fail && vt_attack(&a, 'r') != 0)
        fail = 1;
    if (!fail) {
        VT_RUN("tick", in(&s, "old.hb"), "--count", "1", "--quiet");
        if (R.rc != 0 || vt_sparse(in(&s, "old.hb"))) {
            fprintf(stderr, "with room again, tick did not allocate the older table\n");
            vt_dump();
            fail = 1;
        }
    }
    if (a.pid > 0 && vt_attacker_stop(&a) != 0)
        fail = 1;
    umount2(s.dir, MNT_DETACH);
    return fail;
}

/* ---- a store, a table another user made ------------------------------------ */

static int test_foreign_files(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    static struct scene s;
    EXPECT(anyone_dir(&s, "shm"), "mkdir: %s", strerror(errno));
    struct vt_attacker a;
    EXPECT(vt_attacker_start(&a, &u, act, &s) == 0, "attacker: %s", strerror(errno));
    EXPECT(vt_attack(&a, 's') == 0 && vt_attack(&a, 'o') == 0, "the attacker could not make its files");
    char owner[128];
    snprintf(owner, sizeof(owner), "owned by %s (uid %u)", VT_TEST_USER, (unsigned)u.uid);
    /* Their world-writable store: refused, not "not acquired" (75). */
    VT_RUN("lock", "--store", in(&s, "locks.ls"), "--wait", "0", "nightly", "--", "true");
    EXPECT_EXIT(1, "lock on another user's 0666 store");
    EXPECT(strstr(R.err, owner) && strstr(R.err, "mode 0666") && strstr(R.err, "writable by everyone") &&
               strstr(R.err, "--trust-owner"),
           "lock: expected the owner and mode named, got: %s", R.err);
    VT_RUN("lock", "--store", in(&s, "locks.ls"), "--wait", "0", "--trust-owner", "nightly", "--", "true");
    EXPECT_EXIT(75, "lock --trust-owner on their store, the key theirs");
    /* Theirs alone (0600), theirs for their group (0660), everyone's. */
    VT_RUN("lock", "--store", in(&s, "own.ls"), "--wait", "0", "k", "--", "true");
    EXPECT_EXIT(1, "lock on another user's 0600 store");
    EXPECT(strstr(R.err, owner) && strstr(R.err, "mode 0600") && strstr(R.err, "another user's"),
           "lock: expected the owner named, got: %s", R.err);
    static const char *const tables[] = { "own.hb", "group.hb", "world.hb" };
    for (size_t i = 0; i < 3; i++) {
        VT_RUN("tick", in(&s, tables[i]), "--count", "1");
        EXPECT_EXIT(1, tables[i]);
        EXPECT(strstr(R.err, owner) && strstr(R.err, "refused"), "tick %s: got: %s", tables[i], R.err);
        VT_RUN("failover", in(&s, tables[i]), "--once");
        EXPECT_EXIT(1, tables[i]);
        EXPECT(strstr(R.err, owner), "failover %s: got: %s", tables[i], R.err);
        VT_RUN("failover", in(&s, tables[i]), "--once", "--trust-owner");
        EXPECT_EXIT(0, "failover --trust-owner");
        VT_RUN("inspect", in(&s, tables[i]));
        EXPECT_EXIT(0, "inspect only looks: no owner check");
    }
    /* A setgid directory anyone may write, root's group: the attacker's
     * table there is of root's group, which the attacker is not in. */
    char sgid[700];
    snprintf(sgid, sizeof(sgid), "%s/setgid", s.dir);
    EXPECT(mkdir(sgid, 0700) == 0 && chown(sgid, 0, 0) == 0 && chmod(sgid, 03777) == 0, "mkdir: %s", strerror(errno));
    EXPECT(vt_attack(&a, 'g') == 0, "the attacker could not make its table there");
    VT_RUN("tick", in(&s, "setgid/group.hb"), "--count", "1");
    EXPECT_EXIT(1, "tick on their table of root's group");
    EXPECT(strstr(R.err, owner) && strstr(R.err, "group root (gid 0), mode 0660") &&
               strstr(R.err, "not a member of its group"),
           "tick: expected the owner outside the group named, got: %s", R.err);
    EXPECT(vt_attacker_stop(&a) == 0, "the attacker failed");
    return 0;
}

/* ---- a file truncated while root looks at it ------------------------------ */

/* The attacker's own files, readable by root, and root's own made for the
 * attacker's group (0660: the group arrangement, which root trusts), their
 * sizes flipped between a page and whole while root runs the commands
 * that only look, over and over: none may die of SIGBUS (every look of
 * the tool reads a copy, never a mapping whoever may write it can
 * shrink). */
static int test_truncated_while_looked_at(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    static struct scene s;
    EXPECT(anyone_dir(&s, "flip"), "mkdir: %s", strerror(errno));
    struct vt_attacker a;
    EXPECT(vt_attacker_start(&a, &u, act, &s) == 0, "attacker: %s", strerror(errno));
    EXPECT(vt_attack(&a, 'b') == 0, "the attacker could not make its files");
    vigil_hb *hb;
    vigil_leases *ls;
    EXPECT_RC(vigil_hb_create_group(in(&s, "root.hb"), 1u << 14, 0660, u.gid, &hb), 0);
    vigil_hb_close(hb);
    EXPECT_RC(vigil_leases_create_group(in(&s, "root.ls"), 4096, 0660, u.gid, &ls), 0);
    vigil_leases_close(ls);
    EXPECT(vt_attack(&a, 'F') == 0, "the attacker could not start flipping");
    static const char *const names[] = { "big.hb", "big.ls", "big.bar", "root.hb", "root.ls" };
    char p[5][700];
    for (int i = 0; i < 5; i++)
        snprintf(p[i], sizeof(p[i]), "%s/%s", s.dir, names[i]);
    const char *const runs[][7] = {
        { "ls", s.dir },
        { "inspect", p[0] },
        { "inspect", p[1] },
        { "inspect", p[2] },
        { "inspect", p[3] },
        { "inspect", p[4] },
        { "export", p[0], p[1], p[2], p[3], p[4] },
    };
    int fail = 0, faulted = 0, ran = 0;
    for (int round = 0; round < 25 && !fail; round++) {
        for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++, ran++) {
            vt_runv(20000, runs[i]);
            if (R.rc == 128 + SIGBUS)
                faulted++;
            else if (R.rc < 0 || R.rc >= 128) {
                fprintf(stderr, "vigil %s: exit %d\n", runs[i][0], R.rc);
                vt_dump();
                fail = 1;
            }
        }
    }
    EXPECT(vt_attack(&a, 'X') == 0, "the flipper was not flipping to the end");
    EXPECT(vt_attacker_stop(&a) == 0, "the attacker failed");
    EXPECT(!fail && faulted == 0, "%d of %d looks died of SIGBUS while the owner truncated their file", faulted, ran);
    return 0;
}

/* create warns of a directory whose group may write it without the sticky
 * bit, and not of a sticky one. */
static int test_directory_warning(void)
{
    const char *plain = vt_path("plain"), *sticky = vt_path("sticky");
    EXPECT(mkdir(plain, 0770) == 0 && chmod(plain, 0770) == 0 && mkdir(sticky, 0700) == 0 &&
               chmod(sticky, 01770) == 0,
           "mkdir: %s", strerror(errno));
    char p[600];
    snprintf(p, sizeof(p), "%s/t.hb", plain);
    VT_RUN("create", p, "--capacity", "2");
    EXPECT_EXIT(0, "create in a 0770 directory");
    EXPECT(strstr(R.err, "warning") && strstr(R.err, "sticky") && strstr(R.err, "01770") == NULL &&
               strstr(R.err, "mode 0770"),
           "expected a warning about the directory, got: '%s'", R.err);
    VT_RUN("tick", p, "--count", "1", "--quiet");
    EXPECT(R.rc == 0 && strstr(R.err, "sticky"), "tick: expected the warning, got: '%s'", R.err);
    snprintf(p, sizeof(p), "%s/t.hb", sticky);
    VT_RUN("create", p, "--capacity", "2");
    EXPECT_EXIT(0, "create in a 1770 directory");
    EXPECT(!R.err[0], "a warning about a sticky directory: '%s'", R.err);
    return 0;
}

/* ---- names that are not text ---------------------------------------------- */

static int test_hostile_names(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    static struct scene s;
    EXPECT(anyone_dir(&s, "names"), "mkdir: %s", strerror(errno));
    struct vt_attacker a;
    EXPECT(vt_attacker_start(&a, &u, act, &s) == 0, "attacker: %s", strerror(errno));
    EXPECT(vt_attack(&a, 'n') == 0, "the attacker could not make its files");
    EXPECT(vt_attacker_stop(&a) == 0, "the attacker failed");
    VT_RUN("ls", s.dir);
    EXPECT_EXIT(0, "ls of hostile names");
    EXPECT_CLEAN("ls");
    EXPECT(strstr(R.out, "esc-\\x1b]0;pwned\\x07.hb") && strstr(R.out, "csi-\\u009b2J.hb") &&
               strstr(R.out, "bad-\\xff\\xfe.hb") && strstr(R.out, "back\\\\slash.hb") &&
               strstr(R.out, "bidi-\\u202ebh.evil"),
           "ls: the names are not shown escaped:\n%s", R.out);
    VT_RUN("ls", s.dir, "--json");
    EXPECT_EXIT(0, "ls --json");
    EXPECT(vj_parse(R.out), "ls --json is not JSON (%s):\n%s", vj_error, R.out);
    EXPECT(!vt_unclean(R.out) && strstr(R.out, "csi-\\u009b2J.hb"), "ls --json: C1 not escaped:\n%s", R.out);
    char *argv[NHOSTILE + 4] = { "export" };
    size_t n = 1;
    for (size_t i = 0; i < NHOSTILE; i++) {
        VT_RUN("inspect", in(&s, hostile[i]));
        EXPECT_EXIT(0, "inspect of a hostile name");
        EXPECT_CLEAN("inspect");
        VT_RUN("inspect", in(&s, hostile[i]), "--check");
        EXPECT_CLEAN("inspect --check");
        argv[n++] = strdup(in(&s, hostile[i]));
    }
    argv[n++] = strdup(in(&s, "keys-\x1b[1m.ls"));
    argv[n] = NULL;
    vt_runv(10000, (const char *const *)argv);
    EXPECT_EXIT(0, "export of hostile names");
    EXPECT_CLEAN("export");
    EXPECT(vt_promtool(R.out) != 1, "promtool rejected the exposition of hostile names:\n%s", R.out);
    for (size_t i = 1; i < n; i++)
        free(argv[i]);
    /* Keys and owners from the file. */
    VT_RUN("inspect", in(&s, "keys-\x1b[1m.ls"));
    EXPECT_EXIT(0, "inspect of hostile keys");
    EXPECT_CLEAN("inspect of a store");
    EXPECT(strstr(R.out, "\"\\x1b[2J\\u009bkey\\xff\", \"\\x1b]2;owned\\x07\\u0085\""),
           "inspect: the key and owner are not shown escaped:\n%s", R.out);
    VT_RUN("inspect", in(&s, "keys-\x1b[1m.ls"), "--json");
    EXPECT(vj_parse(R.out) && !vt_unclean(R.out), "inspect --json: not clean JSON (%s):\n%s", vj_error, R.out);
    VT_RUN("lock", "--store", in(&s, "keys-\x1b[1m.ls"), "--trust-owner", "--wait", "0", hostile_key, "--", "true");
    EXPECT_EXIT(75, "lock of a hostile key another holds");
    EXPECT_CLEAN("lock's message");
    /* Error messages name paths and arguments escaped too. */
    VT_RUN("inspect", in(&s, "missing-\x1b[31m\xc2\x9b"));
    EXPECT_EXIT(1, "inspect of a missing hostile name");
    EXPECT_CLEAN("an error message");
    VT_RUN("tick", in(&s, hostile[0]), "--count", "1");
    EXPECT_EXIT(1, "tick of their file");
    EXPECT_CLEAN("a refusal naming a hostile path");
    VT_RUN("tick", "--interval", "\x1b[2J", in(&s, hostile[0]));
    EXPECT_EXIT(2, "a hostile argument");
    EXPECT_CLEAN("a usage error");
    /* watch's first view. */
    struct vt_proc w;
    setenv("TERM", "dumb", 1);
    EXPECT(VT_SPAWN(&w, "watch", in(&s, hostile[1]), "--interval", "100ms") == 0, "spawn watch");
    bool seen = vt_read_until(&w, "vacant", 10000);
    vt_stop_tool(&w, SIGTERM, 10000);
    EXPECT(seen, "watch showed nothing: %s", w.buf);
    EXPECT(!vt_unclean(w.buf), "watch: %s reached the terminal:\n%s", vt_unclean(w.buf), w.buf);
    return 0;
}

/* ---- out of file descriptors ---------------------------------------------------- */

/* vigil ls dir with at most nofile descriptors: R filled. */
static int ls_with_fds(const char *dir, rlim_t nofile)
{
    const char *out = strdup(vt_path("ls.out")), *err = strdup(vt_path("ls.err"));
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        /* Nothing inherited past stderr (CTest leaves some open): the
         * limit is then exactly what the tool has. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        struct rlimit rl = { nofile, nofile };
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(126);
        execl(VIGIL_TOOL, VIGIL_TOOL, "ls", dir, (char *)NULL);
        _exit(127);
    }
    R.rc = vt_wait(kid, 10000);
    vt_slurp(out, R.out, sizeof(R.out));
    vt_slurp(err, R.err, sizeof(R.err));
    free((void *)out);
    free((void *)err);
    return R.rc;
}

static int test_ls_out_of_fds(void)
{
    const char *d = vt_path("fds");
    EXPECT(mkdir(d, 0700) == 0, "mkdir: %s", strerror(errno));
    static const char *const names[] = { "a.hb", "b.hb", "c.hb" };
    for (size_t i = 0; i < 3; i++) {
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", d, names[i]);
        vigil_hb_close(vt_hb_fresh_at(p, 2));
    }
    /* Descriptors 0, 1, 2 and one more: the directory can be read, but no
     * file opened (a look needs two at once). */
    ls_with_fds(d, 4);
    EXPECT_EXIT(1, "ls out of file descriptors");
    for (size_t i = 0; i < 3; i++)
        EXPECT(strstr(R.err, names[i]) && strstr(R.err, "could not be looked at"),
               "ls did not name %s, which it could not look at:\n%s", names[i], R.err);
    EXPECT(strstr(R.err, strerror(EMFILE)), "ls did not say why: %s", R.err);
    ls_with_fds(d, 64);
    EXPECT_EXIT(0, "ls with descriptors to spare");
    EXPECT(vt_count_lines(R.out) == 4 && !R.err[0], "expected the header and 3 files:\n%s%s", R.out, R.err);
    return 0;
}

VT_MAIN(VT_CASE(test_full_tmpfs), VT_CASE(test_foreign_files), VT_CASE(test_truncated_while_looked_at), VT_CASE(test_directory_warning),
        VT_CASE(test_hostile_names), VT_CASE(test_ls_out_of_fds))
