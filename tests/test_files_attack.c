/* SPDX-License-Identifier: MIT */
/*
 * Description: the file layer against another user (tests/usertest.h: the
 * test is root, the attacker the unprivileged vigil-test). Create with a
 * group, in the group's shared directory, with the attacker swapping names
 * at every step of it (the file layer's test hook stops create there and
 * has the attacker act): the temporary name renamed away and made a
 * symlink to a root-only file, the target path planted; on both ways of
 * create (O_TMPFILE, and a named temporary file). Nothing is given away
 * (the root-only file keeps owner, mode and content), the path is this
 * create's own file with the group and mode asked, or create fails with
 * -EEXIST. Opening for writing refuses what another user could have made
 * (world-writable, or theirs outside a group arrangement) and accepts the
 * arrangement itself; an older vigil's sparse file is allocated by a
 * writing open and copied by a read-only one.
 */
#include "usertest.h"

#include <dirent.h>
#include <sys/mman.h>

#include "file_internal.h"

static const char *const steps[] = { "open", "group", "mode", "reserve", "init", "publish", "done" };
#define NSTEPS (sizeof(steps) / sizeof(steps[0]))

/* What the attacker does in the shared directory. */
struct swap {
    char dir[512];    /* the group's directory */
    char target[600]; /* the path being made */
    char victim[600]; /* a root-only file the attacker must not get */
    int  renamed;     /* temporary names the attacker swapped (its own count) */
};

/* 't': every temporary name in dir renamed away and replaced by a symlink
 * to the victim; 'p': the same, and the target planted as such a symlink
 * (or, once it exists, renamed away for one: refused in a sticky
 * directory). Answers how many names it swapped. */
static char swap_names(char cmd, void *arg)
{
    struct swap *s = arg;
    char n = 0;
    DIR *d = opendir(s->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, ".vigil-tmp.", 11) != 0)
            continue;
        char from[1200], to[1200];
        snprintf(from, sizeof(from), "%s/%s", s->dir, e->d_name);
        snprintf(to, sizeof(to), "%s/stolen.%d", s->dir, s->renamed++);
        if (rename(from, to) == 0 && symlink(s->victim, from) == 0)
            n++;
    }
    if (d)
        closedir(d);
    if (cmd == 'p') {
        char away[1200];
        snprintf(away, sizeof(away), "%s/stolen-target.%d", s->dir, s->renamed++);
        (void)rename(s->target, away); /* EPERM in a sticky directory; ENOENT before publish */
        if (symlink(s->victim, s->target) == 0)
            n++;
    }
    return n;
}

static struct vt_attacker *hook_attacker;
static const char *hook_step;
static char hook_cmd;
static int hook_done;

static void at_step(const char *step)
{
    if (hook_step && strcmp(step, hook_step) == 0) {
        hook_done = vt_attack(hook_attacker, hook_cmd) >= 0 ? 1 : -1;
        hook_step = NULL;
    }
}

/* One create of a 4-slot table for group gid, mode 0660, with the attack
 * cmd at step; checks what came of it. */
static int swap_at(struct swap *s, struct vt_attacker *a, gid_t gid, const char *step, char cmd, bool sticky)
{
    static int seq;
    snprintf(s->target, sizeof(s->target), "%s/t%d.hb", s->dir, seq++);
    hook_attacker = a, hook_step = step, hook_cmd = cmd, hook_done = 0;
    vigil_file_create_hook = at_step;
    vigil_hb *hb = NULL;
    int rc = vigil_hb_create_group(s->target, 4, 0660, gid, &hb);
    vigil_file_create_hook = NULL;
    const char *way = vigil_file_no_tmpfile ? "named" : "O_TMPFILE";
    EXPECT(hook_done == 1, "%s, step %s: the attacker did not act (%d)", way, step, hook_done);
    EXPECT(vt_untouched(s->victim, "secret"), "%s, step %s, attack %c: the root-only file was given away", way,
           step, cmd);
    struct stat st;
    if (rc != 0) {
        /* Only a planted target may make it fail, and then it is theirs. */
        EXPECT(rc == -EEXIST && cmd == 'p', "%s, step %s, attack %c: create failed with %d (%s)", way, step, cmd,
               rc, vigil_strerror(rc));
        EXPECT(lstat(s->target, &st) == 0 && S_ISLNK(st.st_mode), "%s, step %s: a failed create left %s", way,
               step, s->target);
        return 0;
    }
    /* The path is this create's own file: regular, the group and mode
     * asked, and the very table the handle maps (a tick shows through). */
    EXPECT(lstat(s->target, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && st.st_gid == gid &&
               (st.st_mode & 07777) == 0660,
           "%s, step %s, attack %c (%s directory): %s is not root:%u 0660 regular but uid %u gid %u mode %o", way,
           step, cmd, sticky ? "sticky" : "plain", s->target, (unsigned)gid, (unsigned)st.st_uid,
           (unsigned)st.st_gid, (unsigned)st.st_mode);
    vigil_hb_tick(hb);
    vigil_hb *look;
    EXPECT_RC(vigil_hb_open_readonly(s->target, 4, &look), 0);
    EXPECT(vigil_hb_epoch(look) == 1, "%s, step %s: the path is not the table create made", way, step);
    vigil_hb_close(look);
    vigil_hb_close(hb);
    return 0;
}

static int swap_every_step(bool named, bool sticky)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    static struct swap s; /* the attacker gets its own copy at fork */
    static int run;
    char name[32];
    memset(&s, 0, sizeof(s));
    snprintf(name, sizeof(name), "victim.%d", run);
    snprintf(s.victim, sizeof(s.victim), "%s", vt_path(name));
    int fd = open(s.victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    EXPECT(fd >= 0 && write(fd, "secret", 6) == 6 && close(fd) == 0, "victim: %s", strerror(errno));
    snprintf(name, sizeof(name), "shared.%d", run++);
    snprintf(s.dir, sizeof(s.dir), "%s", vt_path(name));
    /* The group's directory, as deployment.md once had it (0770), or
     * sticky (1770): root's, writable by the attacker's group. */
    EXPECT(mkdir(s.dir, 0700) == 0 && chown(s.dir, 0, u.gid) == 0 && chmod(s.dir, sticky ? 01770 : 0770) == 0,
           "shared directory: %s", strerror(errno));
    struct vt_attacker a;
    EXPECT(vt_attacker_start(&a, &u, swap_names, &s) == 0, "attacker: %s", strerror(errno));
    vigil_file_no_tmpfile = named;
    int fail = 0;
    for (size_t i = 0; i < NSTEPS && !fail; i++) {
        fail = swap_at(&s, &a, u.gid, steps[i], 't', sticky);
        /* Planting the target too: only where the attacker cannot move
         * root's finished file (sticky); in a plain 0770 directory they
         * can, which is why create warns about one. */
        if (!fail && sticky)
            fail = swap_at(&s, &a, u.gid, steps[i], 'p', sticky);
    }
    vigil_file_no_tmpfile = 0;
    EXPECT(vt_attacker_stop(&a) == 0, "the attacker failed");
    unlink(s.victim);
    return fail;
}

static int test_swap_tmpfile_plain(void)  { return swap_every_step(false, false); }
static int test_swap_named_plain(void)    { return swap_every_step(true, false); }
static int test_swap_tmpfile_sticky(void) { return swap_every_step(false, true); }
static int test_swap_named_sticky(void)   { return swap_every_step(true, true); }

/* ---- whose file may be opened for writing ----------------------------------- */

/* In a child as uid with these groups: vigil_hb_open_flags's answer. */
static int open_as(const char *path, uint32_t flags, uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        if (uid != 0 || n)
            vt_become(uid, gid, groups, n);
        vigil_hb *hb = NULL;
        int rc = vigil_hb_open_flags(path, 0, flags, &hb);
        vigil_hb_close(hb);
        _exit(rc == 0 ? 0 : rc == VIGIL_EUNTRUSTED ? 1 : rc == -EACCES ? 2 : 3);
    }
    return vt_wait(kid, 10000);
}

/* A 2-slot table made at path by uid:gid with mode, in a child. */
static int make_as(const char *path, unsigned mode, uid_t uid, gid_t gid)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_become(uid, gid, NULL, 0);
        vigil_hb *hb;
        _exit(vigil_hb_create_mode(path, 2, mode, &hb) == 0 ? 0 : 1);
    }
    return vt_wait(kid, 10000);
}

static int test_trust_rule(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *d = vt_path("anyone");
    EXPECT(mkdir(d, 01777) == 0 && chmod(d, 01777) == 0, "mkdir: %s", strerror(errno));
    char theirs_world[600], theirs_own[600], theirs_group[600], root_group[600], root_world[600];
    snprintf(theirs_world, sizeof(theirs_world), "%s/theirs-0666.hb", d);
    snprintf(theirs_own, sizeof(theirs_own), "%s/theirs-0600.hb", d);
    snprintf(theirs_group, sizeof(theirs_group), "%s/theirs-0660.hb", d);
    snprintf(root_group, sizeof(root_group), "%s/root-0660.hb", d);
    snprintf(root_world, sizeof(root_world), "%s/root-0666.hb", d);
    EXPECT(make_as(theirs_world, 0666, u.uid, u.gid) == 0 && make_as(theirs_own, 0600, u.uid, u.gid) == 0 &&
               make_as(theirs_group, 0660, u.uid, u.gid) == 0,
           "the attacker could not make its files");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create_group(root_group, 2, 0660, u.gid, &hb), 0);
    vigil_hb_close(hb);
    EXPECT_RC(vigil_hb_create_mode(root_world, 2, 0666, &hb), 0);
    vigil_hb_close(hb);
    const gid_t theirs = u.gid, other = u.gid + 1;
    const uid_t stranger = u.uid + 1000; /* a user with no name: only its groups matter */
    static const char *const said[] = { "opened", "VIGIL_EUNTRUSTED", "-EACCES", "another error" };
    struct {
        const char *path;
        uint32_t    flags;
        uid_t       uid;
        gid_t       gid;
        const gid_t *groups;
        size_t      n;
        int         want;
        const char *who;
    } cases[] = {
        /* root, in no group of the attacker's */
        { theirs_world, 0, 0, 0, NULL, 0, 1, "root, their 0666 file" },
        { theirs_own, 0, 0, 0, NULL, 0, 1, "root, their 0600 file" },
        { theirs_group, 0, 0, 0, NULL, 0, 1, "root, their 0660 file of a group root is not in" },
        { theirs_world, VIGIL_OPEN_TRUST_OWNER, 0, 0, NULL, 0, 0, "root trusting the owner, their 0666 file" },
        { theirs_own, VIGIL_OPEN_TRUST_OWNER, 0, 0, NULL, 0, 0, "root trusting the owner, their 0600 file" },
        { theirs_own, VIGIL_OPEN_READONLY, 0, 0, NULL, 0, 0, "root looking only, their 0600 file" },
        { root_world, 0, 0, 0, NULL, 0, 1, "root, its own 0666 file" },
        { root_group, 0, 0, 0, NULL, 0, 0, "root, its own 0660 file for their group" },
        /* the group arrangement: a member of the file's group */
        { theirs_group, 0, 0, 0, &theirs, 1, 0, "root in their group, their 0660 file" },
        { theirs_group, 0, stranger, other, &theirs, 1, 0, "another user in their group, their 0660 file" },
        { theirs_group, 0, stranger, other, &other, 1, 2, "another user outside their group, their 0660 file" },
        { root_group, 0, u.uid, u.gid, NULL, 0, 0, "the attacker, root's 0660 file for its group" },
        { root_world, 0, u.uid, u.gid, NULL, 0, 1, "the attacker, root's 0666 file" },
        { theirs_world, 0, u.uid, u.gid, NULL, 0, 1, "the attacker, its own 0666 file" },
        { theirs_own, 0, u.uid, u.gid, NULL, 0, 0, "the attacker, its own 0600 file" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = open_as(cases[i].path, cases[i].flags, cases[i].uid, cases[i].gid, cases[i].groups, cases[i].n);
        EXPECT(got == cases[i].want, "%s: expected %s, got %s (%d)", cases[i].who, said[cases[i].want],
               got >= 0 && got <= 3 ? said[got] : "a crash or no answer", got);
    }
    return 0;
}

/* ---- an older vigil's sparse file ------------------------------------------- */

static int test_sparse_file(void)
{
    const char *p = vt_path("sparse.hb");
    int rc = vt_make_sparse(p, 256);
    if (rc == -EOPNOTSUPP) {
        fprintf(stderr, "skipped: %s cannot punch holes\n", vt_tmpdir());
        return VT_SKIP;
    }
    EXPECT_RC(rc, 0);
    EXPECT(vt_sparse(p), "no hole made");
    /* A look reads a copy: every slot vacant, and no change to the file. */
    vigil_hb *look, *hb;
    EXPECT_RC(vigil_hb_open_readonly(p, 256, &look), 0);
    EXPECT(vigil_hb_live_count(look, 5) == 0, "a sparse table read as holding live slots");
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(look, 255, &info), VIGIL_EVACANT);
    vigil_hb_close(look);
    EXPECT(vt_sparse(p), "a read-only open filled the holes");
    /* A writing open allocates it, bytes unchanged. */
    EXPECT_RC(vigil_hb_open(p, 256, &hb), 0);
    EXPECT(!vt_sparse(p), "a writing open left the holes");
    uint32_t slot;
    EXPECT_RC(vigil_hb_register(hb, 7, &slot), 0);
    vigil_hb_close(hb);
    vigil_file_info fi;
    EXPECT(vigil_file_probe(p, &fi) == 0 && fi.capacity == 256, "the header changed");
    return 0;
}

VT_MAIN(VT_CASE(test_swap_tmpfile_plain), VT_CASE(test_swap_named_plain), VT_CASE(test_swap_tmpfile_sticky),
        VT_CASE(test_swap_named_sticky), VT_CASE(test_trust_rule), VT_CASE(test_sparse_file))
