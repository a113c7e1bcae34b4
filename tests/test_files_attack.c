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
 * (world-writable, or theirs outside a group arrangement, a group-writable
 * file whose owner is not in its group included: a setgid directory gives
 * its group to anyone's file) and accepts the arrangement itself; an older vigil's sparse file is allocated by a
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
    const char *way = vigil_file_pretend & VIGIL_PRETEND_NO_TMPFILE ? "named" : "O_TMPFILE";
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
    vigil_file_pretend = named ? VIGIL_PRETEND_NO_TMPFILE : 0;
    int fail = 0;
    for (size_t i = 0; i < NSTEPS && !fail; i++) {
        fail = swap_at(&s, &a, u.gid, steps[i], 't', sticky);
        /* Planting the target too: only where the attacker cannot move
         * root's finished file (sticky); in a plain 0770 directory they
         * can, which is why create warns about one. */
        if (!fail && sticky)
            fail = swap_at(&s, &a, u.gid, steps[i], 'p', sticky);
    }
    vigil_file_pretend = 0;
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
    EXPECT(vt_make_table_as(theirs_world, 0666, u.uid, u.gid) == 0 && vt_make_table_as(theirs_own, 0600, u.uid, u.gid) == 0 &&
               vt_make_table_as(theirs_group, 0660, u.uid, u.gid) == 0,
           "the attacker could not make its files");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create_group(root_group, 2, 0660, u.gid, &hb), 0);
    vigil_hb_close(hb);
    EXPECT_RC(vigil_hb_create_mode(root_world, 2, 0666, &hb), 0);
    vigil_hb_close(hb);
    const gid_t theirs = u.gid, other = u.gid + 1;
    const uid_t stranger = u.uid + 1000; /* a user with no name: only its groups matter */
    /* A setgid directory anyone may write (root's group): the attacker's
     * file there takes the group root is in, a group the attacker is not. */
    char sgid_dir[600], theirs_sgid[700], strangers[600];
    snprintf(sgid_dir, sizeof(sgid_dir), "%s/setgid", d);
    snprintf(theirs_sgid, sizeof(theirs_sgid), "%s/theirs-0660.hb", sgid_dir);
    EXPECT(mkdir(sgid_dir, 0700) == 0 && chown(sgid_dir, 0, 0) == 0 && chmod(sgid_dir, 03777) == 0, "mkdir: %s",
           strerror(errno));
    EXPECT(vt_make_table_as(theirs_sgid, 0660, u.uid, u.gid) == 0, "the attacker could not make its file there");
    struct stat sg;
    EXPECT(stat(theirs_sgid, &sg) == 0 && sg.st_gid == 0 && sg.st_uid == u.uid && (sg.st_mode & 0777) == 0660,
           "the setgid directory did not give its group: uid %u gid %u mode %o", (unsigned)sg.st_uid,
           (unsigned)sg.st_gid, (unsigned)sg.st_mode);
    /* A 0660 file of the attacker's group, owned by a user outside it (one
     * with no name at all). */
    snprintf(strangers, sizeof(strangers), "%s/strangers-0660.hb", d);
    EXPECT_RC(vigil_hb_create_group(strangers, 2, 0660, u.gid, &hb), 0);
    vigil_hb_close(hb);
    EXPECT(chown(strangers, stranger, u.gid) == 0, "chown: %s", strerror(errno));
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
        /* the group is the file's, but the owner is no member of it */
        { theirs_sgid, 0, 0, 0, NULL, 0, 1, "root, their 0660 file given root's group by a setgid directory" },
        { strangers, 0, 0, 0, &theirs, 1, 1, "root in the group, a 0660 file of it whose owner is not in it" },
        { theirs_sgid, VIGIL_OPEN_TRUST_OWNER, 0, 0, NULL, 0, 0, "root trusting the owner, the setgid case" },
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
    /* Where the file system cannot allocate holes (no fallocate), a
     * writing open refuses it rather than map it with them. */
    vigil_file_pretend = VIGIL_PRETEND_NO_FALLOCATE;
    rc = vigil_hb_open(p, 256, &hb);
    vigil_file_pretend = 0;
    if (rc == 0)
        vigil_hb_close(hb);
    EXPECT(rc == -EOPNOTSUPP, "a sparse file where fallocate is not supported: expected -EOPNOTSUPP, got %d (%s)", rc,
           vigil_strerror(rc));
    EXPECT(vt_sparse(p), "the refused open changed the file");
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

/* ---- a file its owner truncates while root looks ------------------------------ */

static char flip_paths[2][600];

static char flip_act(char cmd, void *arg)
{
    (void)arg;
    const char *paths[2] = { flip_paths[0], flip_paths[1] };
    if (cmd == 'F')
        return vt_flip_start(paths, 2) == 0 ? 0 : 1;
    return cmd == 'X' && vt_flip_stop() == 0 ? 0 : 1;
}

/* Root's read-only handles on the attacker's table and store (0644: root
 * does not trust them), each looked at whole, over and over, while the
 * attacker flips their sizes between a page and whole: the looks read
 * copies, so none faults (a file shrunk at the open, or during its copy,
 * is VIGIL_EBADFILE). */
static int test_truncated_under_look(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *d = vt_path("flip");
    EXPECT(mkdir(d, 01777) == 0 && chmod(d, 01777) == 0, "mkdir: %s", strerror(errno));
    snprintf(flip_paths[0], sizeof(flip_paths[0]), "%s/theirs.hb", d);
    snprintf(flip_paths[1], sizeof(flip_paths[1]), "%s/theirs.ls", d);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_become(u.uid, u.gid, NULL, 0);
        vigil_hb *hb;
        vigil_leases *ls;
        _exit(vigil_hb_create_mode(flip_paths[0], 1u << 14, 0644, &hb) == 0 &&
                      vigil_leases_create_mode(flip_paths[1], 4096, 0644, &ls) == 0
                  ? 0
                  : 1);
    }
    EXPECT(vt_wait(kid, 10000) == 0, "the attacker could not make its files");
    struct vt_attacker a;
    EXPECT(vt_attacker_start(&a, &u, flip_act, NULL) == 0, "attacker: %s", strerror(errno));
    EXPECT(vt_attack(&a, 'F') == 0, "the attacker could not start flipping");
    /* The looks in a child: a fault kills it, not this test. */
    fflush(NULL);
    pid_t looker = fork();
    if (looker == 0) {
        int opened = 0;
        for (int round = 0; round < 200; round++) {
            vigil_hb *hb;
            if (vigil_hb_open_readonly(flip_paths[0], 0, &hb) == 0) {
                vigil_slot_info si;
                for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++)
                    (void)vigil_hb_snapshot(hb, i, &si);
                (void)vigil_hb_live_count(hb, 5);
                vigil_hb_close(hb);
                opened++;
            }
            vigil_leases *ls;
            if (vigil_leases_open_readonly(flip_paths[1], &ls) == 0) {
                vigil_lease_info li;
                for (uint32_t i = 0; i < vigil_leases_capacity(ls); i++)
                    (void)vigil_leases_entry(ls, i, &li);
                vigil_leases_close(ls);
                opened++;
            }
        }
        _exit(opened > 0 ? 0 : 3);
    }
    int st = vt_wait(looker, 120000);
    EXPECT(vt_attack(&a, 'X') == 0, "the flipper was not flipping to the end");
    EXPECT(vt_attacker_stop(&a) == 0, "the attacker failed");
    EXPECT(st != 128 + SIGBUS, "a read-only look died of SIGBUS while the owner truncated the file");
    EXPECT(st == 0, "the looks: exit %d (3: not one open of 400 got past the flips)", st);
    return 0;
}

/* ---- create where descriptors cannot be linked ---------------------------------- */

/* The named way of create, as an unprivileged user, where nothing can
 * link a descriptor: no /proc, and a kernel before 6.10 (linkat
 * AT_EMPTY_PATH is ENOENT without CAP_DAC_READ_SEARCH). The temporary
 * name is moved into place instead; the file is whole, the user's, and
 * nothing else is left in the directory. */
static int test_create_without_flink(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *d = vt_path("noflink");
    EXPECT(mkdir(d, 0700) == 0 && chown(d, u.uid, u.gid) == 0, "mkdir: %s", strerror(errno));
    char p[600];
    snprintf(p, sizeof(p), "%s/t.hb", d);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_become(u.uid, u.gid, NULL, 0);
        vigil_file_pretend = VIGIL_PRETEND_NO_TMPFILE | VIGIL_PRETEND_NO_PROC | VIGIL_PRETEND_OLD_FLINK;
        vigil_hb *hb;
        int r = vigil_hb_create_mode(p, 4, 0640, &hb);
        if (r != 0) {
            fprintf(stderr, "create: %s\n", vigil_strerror(r));
            _exit(1);
        }
        vigil_hb_tick(hb);
        _exit(0);
    }
    EXPECT(vt_wait(kid, 10000) == 0, "create without a way to link a descriptor failed");
    struct stat st;
    EXPECT(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == u.uid && (st.st_mode & 07777) == 0640,
           "the file is not vigil-test's 0640 regular file");
    vigil_hb *look;
    EXPECT_RC(vigil_hb_open_readonly(p, 4, &look), 0);
    EXPECT(vigil_hb_epoch(look) == 1, "the path is not the table create made");
    vigil_hb_close(look);
    DIR *dh = opendir(d);
    struct dirent *e;
    int names = 0;
    while (dh && (e = readdir(dh)))
        names += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (dh)
        closedir(dh);
    EXPECT(names == 1, "create left %d names in the directory, not 1", names);
    return 0;
}

/* ---- a sparse file of the largest size ------------------------------------------ */

/* ThreadSanitizer shadows every byte read with memory of its own: the
 * resident size then says nothing of what the look kept. */
#if defined(__SANITIZE_THREAD__)
#define VT_SHADOWED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VT_SHADOWED 1
#endif
#endif

/* This process's resident memory, KiB. */
static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A lease store of cap entries that is a header and nothing else: a
 * sparse file (anyone can make one of the largest size, 256 MiB, for free
 * on a tmpfs), or with written zeros after the header when `written`. */
static int make_hollow_store(const char *path, uint32_t cap, bool written)
{
    vigil_leases *small;
    int rc = vigil_leases_create(path, 4, &small);
    if (rc < 0)
        return rc;
    vigil_leases_close(small);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct vigil_file_header h;
    uint64_t size = vigil_file_size(VIGIL_KIND_LEASES, cap);
    rc = fd >= 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && ftruncate(fd, 0) == 0 ? 0 : -errno;
    h.capacity = cap;
    if (rc == 0 && (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || ftruncate(fd, (off_t)size) != 0))
        rc = -errno;
    static char zeros[1 << 16];
    for (uint64_t off = sizeof(h); rc == 0 && written && off < size; off += sizeof(zeros))
        if (pwrite(fd, zeros, size - off < sizeof(zeros) ? size - off : sizeof(zeros), (off_t)off) <= 0)
            rc = -errno;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Looked at whole, every entry read, such a file costs no memory: the
 * look keeps what the file holds (a header), never the size it claims,
 * nor zeros. */
static int look_costs_little(const char *path, uint32_t cap, const char *whose)
{
    long before = rss_kib();
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_open_readonly(path, &ls), 0);
    EXPECT(vigil_leases_capacity(ls) == cap, "%s: capacity %u", whose, vigil_leases_capacity(ls));
    vigil_lease_info info;
    uint32_t used = 0;
    for (uint32_t i = 0; i < cap; i++)
        used += vigil_leases_entry(ls, i, &info) == 0;
    long after = rss_kib();
    vigil_leases_close(ls);
    EXPECT(used == 0, "%s: %u entries in use in an empty store", whose, used);
#ifdef VT_SHADOWED
    (void)before, (void)after;
    return 0;
#endif
    EXPECT(after - before < 4 * 1024, "%s: a look at a store of %u empty entries (%llu bytes) took %ld KiB of memory",
           whose, cap, (unsigned long long)vigil_file_size(VIGIL_KIND_LEASES, cap), after - before);
    return 0;
}

static int test_hollow_file_costs_no_memory(void)
{
    /* On a tmpfs, where a hole is copied rather than mapped. */
    const char *shm = vt_path("hollow-tmpfs");
    int rc = vt_tmpfs(shm, "size=24m,mode=1777");
    if (rc)
        return rc;
    char path[600];
    const uint32_t max = 1u << 20, some = 1u << 16;
    snprintf(path, sizeof(path), "%s/huge.ls", shm);
    EXPECT_RC(make_hollow_store(path, max, false), 0);
    EXPECT(vt_sparse(path), "the store has no holes");
    if (look_costs_little(path, max, "root's own hollow store on a tmpfs"))
        return 1;
    /* Another user's, anywhere: copied too, as its owner could truncate it. */
    struct vt_user u;
    if ((rc = vt_test_user(&u)) != 0)
        return rc;
    EXPECT(chown(path, u.uid, u.gid) == 0, "chown: %s", strerror(errno));
    if (look_costs_little(path, max, "their hollow store on a tmpfs"))
        return 1;
    snprintf(path, sizeof(path), "%s", vt_path("huge.ls"));
    EXPECT_RC(make_hollow_store(path, max, false), 0);
    EXPECT(chown(path, u.uid, u.gid) == 0, "chown: %s", strerror(errno));
    if (look_costs_little(path, max, "their hollow store on the test's file system"))
        return 1;
    /* Zeros written out are data, not holes: still nothing kept. */
    snprintf(path, sizeof(path), "%s/zeros.ls", shm);
    EXPECT_RC(make_hollow_store(path, some, true), 0);
    EXPECT(!vt_sparse(path), "the store of written zeros has holes");
    EXPECT(chown(path, u.uid, u.gid) == 0, "chown: %s", strerror(errno));
    return look_costs_little(path, some, "their store of written zeros on a tmpfs");
}

VT_MAIN(VT_CASE(test_swap_tmpfile_plain), VT_CASE(test_swap_named_plain), VT_CASE(test_swap_tmpfile_sticky),
        VT_CASE(test_swap_named_sticky), VT_CASE(test_trust_rule), VT_CASE(test_sparse_file),
        VT_CASE(test_hollow_file_costs_no_memory), VT_CASE(test_create_without_flink),
        VT_CASE(test_truncated_under_look))
