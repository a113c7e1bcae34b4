/* SPDX-License-Identifier: MIT */
/*
 * Description: where `vigil` finds its etcd helper, and what it refuses to
 * run (tools/etcd_exec.c). Laid out as installed (PREFIX/BINDIR/vigil,
 * PREFIX/LIBEXECDIR/vigil/vigil-etcd) it runs the helper there, never one
 * on PATH or beside it, and says which one it missed when there is none.
 * It never runs another user's program as its helper: root running its
 * own copy of vigil from a directory nobody owns does not run what nobody
 * planted at ../libexec/vigil/vigil-etcd (outside a BINDIR no relative
 * place is taken; inside one, the place is refused, saying why); nor a
 * helper writable by its group or others, or under a directory that is
 * (a sticky one, as /tmp, excepted), or owned by another user (a link to
 * one too); a vigil owned by a user trusts that user's helper. Without
 * /proc, and from a hardlink outside any BINDIR, the absolute place
 * compiled in is taken (a mount namespace puts a helper there and hides
 * /proc; a /proc that is not procfs is not believed), and group and agent
 * --help need no helper. The helper's process is named vigil (what pgrep
 * -x, killall and ps -C match), its /proc/PID/exe the helper. The cases
 * with another user or a mount namespace need root (make check runs as
 * root) and say so when skipped.
 */
#include "tooltest.h"

#ifdef VIGIL_TOOL_HELPER

/* An endpoint with nothing behind it: refused at once. */
#define NOBODY_HOME "http://127.0.0.1:1"
#define NOBODY_UID  65534

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    unlink(to);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    char buf[1 << 16];
    ssize_t n = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    int ok = in >= 0 && out >= 0 && n == 0 && fchmod(out, 0755) == 0;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* mkdir -p of path's directory, each made 0755. */
static int make_parents(const char *path)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return 0;
}

/* Runs prog with args (NULL-terminated), argv[0] "vigil", PATH set to
 * `path`; fills R. Needs no /proc. */
static int run_prog(const char *prog, const char *path, const char *const *args)
{
    char out[1024], err[1024];
    snprintf(out, sizeof(out), "%s/prog.stdout", vt_tmpdir());
    snprintf(err, sizeof(err), "%s/prog.stderr", vt_tmpdir());
    const char *argv[16] = { "vigil" };
    for (size_t i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        setenv("PATH", path, 1);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    R.rc = vt_wait(pid, 20000);
    vt_slurp(out, R.out, sizeof(R.out));
    vt_slurp(err, R.err, sizeof(R.err));
    return R.rc;
}

#define RUN_PROG(prog, ...) run_prog((prog), "/nonexistent", (const char *const[]){ __VA_ARGS__, NULL })

/* The helper ran: `vigil agent` without options is its usage error. */
#define EXPECT_HELPER_RAN(what)                                                                                \
    EXPECT(R.rc == 2 && strstr(R.err, "vigil agent: missing --etcd ENDPOINTS"),                                \
           "%s: expected the helper's usage error (exit 2), got exit %d: '%s'", (what), R.rc, R.err)

/* It did not, and said why in one line. */
#define EXPECT_REFUSED(what, needle)                                                                           \
    EXPECT(R.rc == 1 && vt_count_lines(R.err) == 1 && strstr(R.err, "vigil: refusing the etcd helper ") &&      \
               strstr(R.err, (needle)),                                                                        \
           "%s: expected one line refusing the helper and naming '%s', got exit %d: '%s'", (what), (needle),   \
           R.rc, R.err)

/* DIR/BINDIR/vigil and DIR/LIBEXECDIR/vigil/vigil-etcd, as `cmake
 * --install --prefix DIR` lays them out (DIR under the test's directory);
 * false when either is absolute (no prefix to move). */
static bool install_layout(const char *prefix, char *vigil, size_t vcap, char *helper, size_t hcap)
{
    if (VIGIL_INSTALL_BINDIR[0] == '/' || VIGIL_INSTALL_HELPER[0] == '/')
        return false;
    snprintf(vigil, vcap, "%s/%s/%s/vigil", vt_tmpdir(), prefix, VIGIL_INSTALL_BINDIR);
    snprintf(helper, hcap, "%s/%s/%s", vt_tmpdir(), prefix, VIGIL_INSTALL_HELPER);
    return true;
}

/* Both copied there: 0, or -1. */
static int install_at(const char *prefix, char *vigil, size_t vcap, char *helper, size_t hcap)
{
    if (!install_layout(prefix, vigil, vcap, helper, hcap))
        return -1;
    if (make_parents(vigil) != 0 || copy_file(VIGIL_TOOL, vigil) != 0 || make_parents(helper) != 0 ||
        copy_file(VIGIL_TOOL_HELPER, helper) != 0)
        return -1;
    return 0;
}

/* Is the absolute place compiled in taken (an install of vigil)? */
static bool absolute_installed(void)
{
    return access(VIGIL_HELPER_ABSOLUTE, F_OK) == 0;
}

/* ---- the installed layout ---------------------------------------------------------- */

/* The etcd commands run the helper at PREFIX/LIBEXECDIR/vigil/. */
static int test_installed_layout(void)
{
    char vigil[1024], helper[1024];
    if (!install_layout("prefix", vigil, sizeof(vigil), helper, sizeof(helper)))
        return VT_SKIP;
    EXPECT(install_at("prefix", vigil, sizeof(vigil), helper, sizeof(helper)) == 0, "install: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    EXPECT_HELPER_RAN("the installed helper");
    RUN_PROG(vigil, "lock", "--etcd", NOBODY_HOME, "--wait", "0", "k", "--", "true");
    EXPECT(R.rc == 1 && strncmp(R.err, "vigil: k: acquire on http://127.0.0.1:1: ", 41) == 0,
           "lock --etcd through the installed helper: exit %d, '%s'", R.rc, R.err);
    return 0;
}

/* A vigil installed without its helper: the one-host commands run; an etcd
 * command says, in one line and exit 1, which helper it missed (and the
 * absolute place it tried next), though a `vigil-etcd` is on PATH and
 * beside it (PATH is never asked; the place beside it only in the build
 * tree). */
static int test_missing_helper(void)
{
    char vigil[1024], helper[1024], decoy[1024], dir[1024];
    if (!install_layout("alone", vigil, sizeof(vigil), helper, sizeof(helper)))
        return VT_SKIP; /* an absolute LIBEXECDIR: install_consumer.sh tries the real install */
    snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(vigil, '/') - vigil), vigil);
    snprintf(decoy, sizeof(decoy), "%.900s/vigil-etcd", dir);
    EXPECT(make_parents(vigil) == 0 && copy_file(VIGIL_TOOL, vigil) == 0, "copy %s: %s", VIGIL_TOOL, strerror(errno));
    EXPECT(copy_file(VIGIL_TOOL_HELPER, decoy) == 0, "copy the helper: %s", strerror(errno));
    run_prog(vigil, dir, (const char *const[]){ "--version", NULL });
    EXPECT(R.rc == 0 && strncmp(R.out, "vigil ", 6) == 0, "--version without the helper: exit %d, '%s' '%s'", R.rc,
           R.out, R.err);
    run_prog(vigil, dir, (const char *const[]){ "agent", "--etcd", NOBODY_HOME, "--dir", "x", NULL });
    if (absolute_installed()) /* then the absolute place runs it */
        return R.rc == 1 && strstr(R.err, "agent") ? 0 : (vt_dump(), 1);
    EXPECT(R.rc == 1 && vt_count_lines(R.err) == 1 && strncmp(R.err, "vigil: ", 7) == 0 && strstr(R.err, helper) &&
               strstr(R.err, VIGIL_HELPER_ABSOLUTE) && strstr(R.err, strerror(ENOENT)),
           "expected exit 1 and one line naming %s and %s, got exit %d: '%s'", helper, VIGIL_HELPER_ABSOLUTE, R.rc,
           R.err);
    return 0;
}

/* ---- another user's program --------------------------------------------------------- */

/* What nobody plants: a helper that leaves a mark when it runs. */
struct plant {
    char shared[1024]; /* nobody's directory */
    char helper[1024]; /* shared/LIBEXECDIR/vigil/vigil-etcd */
    char mark[1024];   /* made by the planted helper when it runs */
};

static int plant_as_nobody(void *arg)
{
    struct plant *p = arg;
    FILE *f;
    if (mkdir(p->shared, 0755) != 0 || make_parents(p->helper) != 0 || !(f = fopen(p->helper, "w")))
        return 1;
    fprintf(f, "#!/bin/sh\necho ran as $(id -u) > '%s'\nexit 0\n", p->mark);
    return fclose(f) == 0 && chmod(p->helper, 0755) == 0 ? 0 : 1;
}

/* Root's own copy of vigil in a directory nobody owns (as in a shared
 * /tmp/shared/rootdir/vigil) never runs nobody's program as its helper:
 * from rootdir/ (no BINDIR) the relative place is not taken at all; from
 * bin/ it is, and refused, naming nobody's directory. */
static int test_nobody_plants_a_helper(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "  skipped: another user's plant needs root (to be that user, and to run as root)\n");
        return VT_SKIP;
    }
    if (VIGIL_INSTALL_BINDIR[0] == '/' || VIGIL_INSTALL_HELPER[0] == '/')
        return VT_SKIP;
    static struct plant p;
    /* vt_as_nobody's scratch directory, which it makes 0777: nobody's
     * `shared` goes in it, then it is made root's 0755 again. */
    char scratch[1024];
    snprintf(scratch, sizeof(scratch), "%.900s/nobody", vt_tmpdir());
    snprintf(p.shared, sizeof(p.shared), "%.900s/shared", scratch);
    snprintf(p.helper, sizeof(p.helper), "%.900s/%s", p.shared, VIGIL_INSTALL_HELPER);
    snprintf(p.mark, sizeof(p.mark), "%.900s/ran", p.shared);
    int rc = vt_as_nobody(plant_as_nobody, &p);
    if (rc == VT_SKIP)
        fprintf(stderr, "  skipped: nobody cannot run the built tool here\n");
    if (rc != 0)
        return rc;
    EXPECT(chmod(scratch, 0755) == 0, "chmod %s: %s", scratch, strerror(errno));
    struct stat st;
    EXPECT(stat(p.helper, &st) == 0 && st.st_uid == NOBODY_UID, "nobody's plant %s is not there", p.helper);

    char rootdir[1024], bin[1024];
    snprintf(rootdir, sizeof(rootdir), "%.900s/rootdir/vigil", p.shared);
    snprintf(bin, sizeof(bin), "%.900s/%s/vigil", p.shared, VIGIL_INSTALL_BINDIR);
    EXPECT(make_parents(rootdir) == 0 && copy_file(VIGIL_TOOL, rootdir) == 0, "copy: %s", strerror(errno));
    EXPECT(make_parents(bin) == 0 && copy_file(VIGIL_TOOL, bin) == 0, "copy: %s", strerror(errno));

    RUN_PROG(rootdir, "group", "ls", "g", "--etcd", NOBODY_HOME);
    EXPECT(access(p.mark, F_OK) != 0, "root's vigil in %s ran nobody's %s", rootdir, p.helper);
    EXPECT(R.rc == 1 && !strstr(R.err, p.helper), "rootdir: expected exit 1 without a word of %s: exit %d, '%s'",
           p.helper, R.rc, R.err);

    RUN_PROG(bin, "group", "ls", "g", "--etcd", NOBODY_HOME);
    EXPECT(access(p.mark, F_OK) != 0, "root's vigil in %s ran nobody's %s", bin, p.helper);
    char why[1024];
    snprintf(why, sizeof(why), "%.900s is owned by uid %d", p.shared, NOBODY_UID);
    EXPECT_REFUSED("bin/", why);
    return 0;
}

/* Modes and owners, on a layout of the test's own: a helper writable by
 * its group or by others is refused, so is one under a directory that is,
 * unless that directory is sticky; so is a helper of another user's, or a
 * link to one. A vigil another user owns trusts that user's helper (that
 * user could rewrite vigil itself). */
static int test_writable_or_foreign_helper_refused(void)
{
    char vigil[1024], helper[1024], dir[1024];
    if (install_at("modes", vigil, sizeof(vigil), helper, sizeof(helper)) != 0)
        return VT_SKIP;
    snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(helper, '/') - helper), helper);
    RUN_PROG(vigil, "agent");
    EXPECT_HELPER_RAN("0755 throughout");

    EXPECT(chmod(helper, 0757) == 0, "chmod: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    EXPECT_REFUSED("a helper writable by others", "is writable by others (mode 0757)");
    EXPECT(chmod(helper, 0775) == 0, "chmod: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    EXPECT_REFUSED("a helper writable by its group", "is writable by its group (mode 0775)");
    EXPECT(chmod(helper, 0755) == 0 && chmod(dir, 0777) == 0, "chmod: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    char why[1024];
    snprintf(why, sizeof(why), "%.900s is writable by its group and others (mode 0777)", dir);
    EXPECT_REFUSED("a directory writable by others", why);
    EXPECT(chmod(dir, 01777) == 0, "chmod: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    EXPECT_HELPER_RAN("a sticky directory writable by others");
    EXPECT(chmod(dir, 0755) == 0, "chmod: %s", strerror(errno));

    if (geteuid() != 0) {
        fprintf(stderr, "  another user's helper not tried: that needs root (chown)\n");
        return 0;
    }
    EXPECT(chown(helper, NOBODY_UID, NOBODY_UID) == 0, "chown: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    snprintf(why, sizeof(why), "%.900s is owned by uid %d", helper, NOBODY_UID);
    EXPECT_REFUSED("nobody's helper", why);
    /* A link, in a directory of root's, to nobody's helper: judged where it leads. */
    char theirs[1024];
    snprintf(theirs, sizeof(theirs), "%.900s/theirs", dir);
    EXPECT(rename(helper, theirs) == 0 && symlink("theirs", helper) == 0, "link: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    snprintf(why, sizeof(why), "%.900s is owned by uid %d", theirs, NOBODY_UID);
    EXPECT_REFUSED("a link to nobody's helper", why);
    /* vigil of nobody's own: its owner's helper runs. */
    EXPECT(chown(vigil, NOBODY_UID, NOBODY_UID) == 0 && chmod(vigil, 0755) == 0, "chown: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    EXPECT_HELPER_RAN("nobody's vigil, nobody's helper");
    return 0;
}

/* ---- the absolute place: without /proc, from a hardlink -------------------------------- */

/* In this child, a mount namespace of its own whose VIGIL_HELPER_ABSOLUTE
 * is the built helper: a tmpfs over the deepest directory of that path
 * that exists (hidden for this child alone), the rest made in it. 0, or
 * -1 (not root, or that directory is one the test needs: skip). */
static int helper_at_absolute_place(bool hide_proc)
{
    if (hide_proc ? vt_hide_proc() != 0
                  : unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    char top[1024];
    snprintf(top, sizeof(top), "%s", VIGIL_HELPER_ABSOLUTE);
    do
        *strrchr(top, '/') = '\0';
    while (top[0] && access(top, F_OK) != 0);
    size_t tl = strlen(top);
    int depth = 0;
    for (const char *s = top; *s; s++)
        depth += *s == '/';
    /* Not "/", "/usr" or a directory holding the test, its tool or its libraries. */
    if (depth < 2 || strncmp(VIGIL_TOOL, top, tl) == 0 || strncmp(vt_tmpdir(), top, tl) == 0 ||
        strncmp(top, "/usr/lib", 8) == 0 || strncmp(top, "/lib", 4) == 0)
        return -1;
    if (mount("none", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
        return -1;
    return make_parents(VIGIL_HELPER_ABSOLUTE) == 0 && copy_file(VIGIL_TOOL_HELPER, VIGIL_HELPER_ABSOLUTE) == 0 ? 0
                                                                                                                : -1;
}

#define CHILD_EXPECT(cond, ...)                                                                                \
    do {                                                                                                       \
        if (!(cond)) {                                                                                         \
            fprintf(stderr, __VA_ARGS__);                                                                      \
            fprintf(stderr, ": exit %d, stdout '%.300s', stderr '%s'\n", R.rc, R.out, R.err);                  \
            _exit(1);                                                                                          \
        }                                                                                                      \
    } while (0)

/* Runs body in a child set up by helper_at_absolute_place; its status, or
 * VT_SKIP when the set-up cannot be made here. */
static int with_absolute_helper(bool hide_proc, void (*body)(const char *), const char *vigil)
{
    if (geteuid() != 0) {
        fprintf(stderr, "  skipped: a mount namespace needs root\n");
        return VT_SKIP;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (helper_at_absolute_place(hide_proc) != 0)
            _exit(VT_SKIP);
        body(vigil);
        _exit(0);
    }
    int rc = vt_wait(pid, 60000);
    if (rc == VT_SKIP)
        fprintf(stderr, "  skipped: no mount namespace here, a sanitized build without /proc, or %s lies where "
                        "the test cannot cover it\n", VIGIL_HELPER_ABSOLUTE);
    return rc;
}

static void without_proc_body(const char *vigil)
{
    CHILD_EXPECT(access("/proc/self/exe", F_OK) != 0, "/proc is still there");
    RUN_PROG(vigil, "agent");
    CHILD_EXPECT(R.rc == 2 && strstr(R.err, "vigil agent: missing --etcd ENDPOINTS"),
                 "without /proc, agent did not run the helper at %s", VIGIL_HELPER_ABSOLUTE);
    RUN_PROG(vigil, "lock", "--etcd", NOBODY_HOME, "--wait", "0", "k", "--", "true");
    CHILD_EXPECT(R.rc == 1 && strstr(R.err, "vigil: k: acquire on http://127.0.0.1:1: "), "without /proc, lock --etcd");
    RUN_PROG(vigil, "group", "ls", "g", "--etcd", NOBODY_HOME);
    CHILD_EXPECT(R.rc == 1 && strstr(R.err, "vigil: group g: "), "without /proc, group ls");
    /* A /proc that is no procfs (here a tmpfs with a self/exe pointing into
     * a bin/ whose libexec/ has a decoy that cannot run) is not believed. */
    char fake_bin[1024], decoy[1024];
    snprintf(fake_bin, sizeof(fake_bin), "%.900s/fake/bin/vigil", vt_tmpdir());
    snprintf(decoy, sizeof(decoy), "%.900s/fake/libexec/vigil/vigil-etcd", vt_tmpdir());
    CHILD_EXPECT(make_parents(fake_bin) == 0 && copy_file(VIGIL_TOOL, fake_bin) == 0 && make_parents(decoy) == 0 &&
                     copy_file(VIGIL_TOOL_HELPER, decoy) == 0 && chmod(decoy, 0644) == 0 &&
                     mkdir("/proc/self", 0755) == 0 && symlink(fake_bin, "/proc/self/exe") == 0,
                 "a fake /proc/self/exe: %s", strerror(errno));
    RUN_PROG(vigil, "agent");
    CHILD_EXPECT(R.rc == 2 && strstr(R.err, "vigil agent: missing --etcd ENDPOINTS"),
                 "with a /proc that is a tmpfs, agent did not run the helper at %s", VIGIL_HELPER_ABSOLUTE);
    /* Help without any helper: none where the build's vigil would look, and
     * the absolute one made unrunnable. */
    CHILD_EXPECT(chmod(VIGIL_HELPER_ABSOLUTE, 0644) == 0, "chmod");
    RUN_PROG(vigil, "group", "--help");
    CHILD_EXPECT(R.rc == 0 && strstr(R.out, "usage: vigil group "), "without /proc or a helper, group --help");
    RUN_PROG(vigil, "group", "ls", "--help");
    CHILD_EXPECT(R.rc == 0 && strstr(R.out, "usage: vigil group ls "), "without /proc or a helper, group ls --help");
    RUN_PROG(vigil, "agent", "--help");
    CHILD_EXPECT(R.rc == 0 && strstr(R.out, "usage: vigil agent "), "without /proc or a helper, agent --help");
    RUN_PROG(vigil, "agent");
    CHILD_EXPECT(R.rc == 1 && strstr(R.err, VIGIL_HELPER_ABSOLUTE) && strstr(R.err, strerror(EACCES)),
                 "without /proc, a helper that cannot run is named");
}

/* Without /proc (a container or chroot that mounted none) the etcd
 * commands run the helper at the absolute place compiled in, and the
 * help of group and agent needs none. */
static int test_without_proc(void)
{
    return with_absolute_helper(true, without_proc_body, VIGIL_TOOL);
}

static void hardlink_body(const char *vigil)
{
    RUN_PROG(vigil, "agent");
    CHILD_EXPECT(R.rc == 2 && strstr(R.err, "vigil agent: missing --etcd ENDPOINTS"),
                 "the hardlink %s did not run the helper at %s", vigil, VIGIL_HELPER_ABSOLUTE);
}

/* A hardlink of vigil (or a copy) in a directory that is no BINDIR runs
 * the helper at the absolute place; its directory's ../libexec is never
 * looked at. */
static int test_hardlink_elsewhere(void)
{
    char link_[1024], decoy[1024];
    snprintf(link_, sizeof(link_), "%s/elsewhere/vigil", vt_tmpdir());
    snprintf(decoy, sizeof(decoy), "%s/libexec/vigil/vigil-etcd", vt_tmpdir());
    EXPECT(make_parents(link_) == 0 && (link(VIGIL_TOOL, link_) == 0 || copy_file(VIGIL_TOOL, link_) == 0),
           "link %s: %s", link_, strerror(errno));
    EXPECT(make_parents(decoy) == 0 && copy_file(VIGIL_TOOL_HELPER, decoy) == 0, "copy: %s", strerror(errno));
    EXPECT(chmod(decoy, 0644) == 0, "chmod: %s", strerror(errno)); /* it would fail to run if taken */
    RUN_PROG(link_, "agent");
    if (!absolute_installed())
        EXPECT(R.rc == 1 && strstr(R.err, VIGIL_HELPER_ABSOLUTE) && !strstr(R.err, decoy),
               "expected exit 1 naming %s (and not %s), got exit %d: '%s'", VIGIL_HELPER_ABSOLUTE, decoy, R.rc,
               R.err);
    return with_absolute_helper(false, hardlink_body, link_);
}

/* ---- the helper's process ------------------------------------------------------------ */

/* What scripts look for finds it: comm "vigil" (pgrep -x vigil, killall
 * vigil, ps -C vigil), though /proc/PID/exe names the helper. */
static int test_helper_is_named_vigil(void)
{
    const char *dir = vt_path("agent.d");
    EXPECT(mkdir(dir, 0700) == 0, "mkdir: %s", strerror(errno));
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "agent", "--etcd", NOBODY_HOME, "--dir", dir) == 0, "spawn");
    bool ready = vt_read_until(&p, "watching", 20000);
    char path[64], comm[64], exe[4096], want[4096];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)p.pid);
    vt_slurp(path, comm, sizeof(comm));
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)p.pid);
    ssize_t n = readlink(path, exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    bool real = realpath(VIGIL_TOOL_HELPER, want) != NULL;
    int rc = vt_stop_tool(&p, SIGTERM, 20000);
    EXPECT(ready, "the agent did not start: '%s'", p.buf);
    EXPECT(strcmp(comm, "vigil\n") == 0, "the helper's process is named '%.*s', not 'vigil'", (int)strcspn(comm, "\n"),
           comm);
    EXPECT(real && strcmp(exe, want) == 0, "its /proc/PID/exe is '%s', not the helper %s", exe, want);
    EXPECT(rc == 0, "the agent exited %d on SIGTERM", rc);
    return 0;
}

#else
static int test_built_without_a_helper(void)
{
    return VT_SKIP; /* no etcd adapter, so no helper to find */
}
#endif

VT_MAIN(
#ifdef VIGIL_TOOL_HELPER
    VT_CASE(test_installed_layout), VT_CASE(test_missing_helper), VT_CASE(test_nobody_plants_a_helper),
    VT_CASE(test_writable_or_foreign_helper_refused), VT_CASE(test_without_proc), VT_CASE(test_hardlink_elsewhere),
    VT_CASE(test_helper_is_named_vigil)
#else
    VT_CASE(test_built_without_a_helper)
#endif
)
