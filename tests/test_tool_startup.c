/* SPDX-License-Identifier: MIT */
/*
 * Description: what the tool loads. Every one-host command (--version,
 * --help, create, inspect, watch, tick, failover, lock --store, ls,
 * export, demo --help) maps no shared library beyond those this test
 * program maps (libc and the loader, and a sanitizer's runtime in those
 * builds): the loader itself says what it loaded (LD_DEBUG=files). The
 * etcd commands (lock --etcd, group, agent, export --etcd) run the helper
 * in the tool's own process (one pid from start to end), and it loads
 * libcurl. A `vigil` without its helper says which file it missed (exit
 * 1) and still runs the one-host commands; laid out as installed (BINDIR
 * and LIBEXECDIR/vigil/), it finds its helper there, and never on PATH.
 */
#include "tooltest.h"

#include <dirent.h>

/* ---- what the loader loaded ----------------------------------------------------- */

/* "libc" of "/usr/lib/x86_64-linux-gnu/libc.so.6 [0] ...": the file
 * name of the first word, up to ".so". */
static void stem(const char *path, char *out, size_t cap)
{
    char word[512];
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(path, " \t\n"), path);
    const char *base = strrchr(word, '/');
    base = base ? base + 1 : word;
    const char *so = strstr(base, ".so");
    snprintf(out, cap, "%.*s", (int)(so ? (size_t)(so - base) : strlen(base)), base);
}

static char allowed[4096]; /* " libc ld-linux-x86-64 libasan ... " */

/* The libraries this program maps (libc, the loader, a sanitizer's
 * runtime): all the one-host commands may map. */
static void note_allowed(void)
{
    char maps[1 << 16];
    vt_slurp("/proc/self/maps", maps, sizeof(maps));
    snprintf(allowed, sizeof(allowed), " ");
    for (char *line = strtok(maps, "\n"); line; line = strtok(NULL, "\n")) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, ".so"))
            continue;
        char s[128], word[132];
        stem(path, s, sizeof(s));
        snprintf(word, sizeof(word), " %s ", s);
        if (!strstr(allowed, word) && strlen(allowed) + strlen(word) < sizeof(allowed))
            strcat(allowed, word + 1);
    }
}

/* The LD_DEBUG=files output of the last run, every process of it (the
 * tool, its CMD), concatenated into buf; *files: how many processes wrote. */
static void ld_output(const char *prefix, char *buf, size_t cap, int *files)
{
    buf[0] = '\0';
    *files = 0;
    DIR *d = opendir(vt_tmpdir());
    if (!d)
        return;
    const char *base = strrchr(prefix, '/') + 1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, base, strlen(base)) != 0 || e->d_name[strlen(base)] != '.')
            continue;
        char path[600], text[1 << 15];
        snprintf(path, sizeof(path), "%s/%s", vt_tmpdir(), e->d_name);
        vt_slurp(path, text, sizeof(text));
        if (strlen(buf) + strlen(text) < cap)
            strcat(buf, text);
        unlink(path);
        (*files)++;
    }
    closedir(d);
}

static unsigned runs;

/* Points LD_DEBUG=files at a fresh prefix in the test's directory. */
static const char *ld_debug_on(void)
{
    static char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s/ld%u", vt_tmpdir(), runs++);
    setenv("LD_DEBUG", "files", 1);
    setenv("LD_DEBUG_OUTPUT", prefix, 1);
    return prefix;
}

static void ld_debug_off(void)
{
    unsetenv("LD_DEBUG");
    unsetenv("LD_DEBUG_OUTPUT");
}

/* The first library in the loader's output not in `allowed`, into bad;
 * false when there is none. *libc: whether libc was among them (else the
 * output was not the loader's). */
static bool foreign_library(const char *ld, char *bad, size_t cap, bool *libc)
{
    *libc = false;
    for (const char *p = ld; (p = strstr(p, "file=")) != NULL; p += 5) {
        char s[128], word[132];
        stem(p + 5, s, sizeof(s));
        *libc = *libc || strcmp(s, "libc") == 0;
        snprintf(word, sizeof(word), " %s ", s);
        if (!strstr(allowed, word)) {
            snprintf(bad, cap, "%s", s);
            return true;
        }
    }
    return false;
}

/* ---- the one-host commands ------------------------------------------------------- */

static int check_libc_alone(const char *what, const char *prefix, int rc, int want_rc)
{
    char ld[1 << 16], bad[128];
    int files;
    ld_output(prefix, ld, sizeof(ld), &files);
    EXPECT(rc == want_rc, "%s: expected exit %d, got %d: %s", what, want_rc, rc, R.err);
    bool libc;
    bool foreign = foreign_library(ld, bad, sizeof(bad), &libc);
    EXPECT(libc, "%s: no loader output (LD_DEBUG=files) naming libc: '%.300s'", what, ld);
    EXPECT(!foreign, "%s loaded %s, which a one-host command has no use for (allowed:%s)", what, bad, allowed);
    return 0;
}

static int test_one_host_commands_load_libc_alone(void)
{
    note_allowed();
    const char *hb = vt_path("t.hb"), *made = vt_path("made.hb"), *store = vt_path("s.leases");
    vigil_hb_close(vt_hb_fresh_at(hb, 64));
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", vt_tmpdir());
    struct {
        const char *what;
        const char *argv[10];
        int rc;
    } runs_[] = {
        { "--version", { "--version" }, 0 },
        { "--help", { "--help" }, 0 },
        { "help agent", { "help", "agent" }, 0 },
        { "create", { "create", made, "--capacity", "64" }, 0 },
        { "inspect", { "inspect", hb }, 0 },
        { "inspect --json", { "inspect", hb, "--json" }, 0 },
        { "tick", { "tick", hb, "--count", "1", "--interval", "1ms", "--quiet" }, 0 },
        { "failover --once", { "failover", hb, "--once" }, 0 },
        { "lock --store", { "lock", "--store", store, "k", "--", "true" }, 0 },
        { "lock --store, a usage error", { "lock", "--store", store, "k" }, 2 },
        { "ls", { "ls", dir }, 0 },
        { "export", { "export", hb }, 0 },
        { "demo --help", { "demo", "--help" }, 0 },
        { "lock --help", { "lock", "--help" }, 0 },
    };
    for (size_t i = 0; i < sizeof(runs_) / sizeof(runs_[0]); i++) {
        const char *prefix = ld_debug_on();
        int rc = vt_runv(20000, runs_[i].argv);
        ld_debug_off();
        if (check_libc_alone(runs_[i].what, prefix, rc, runs_[i].rc) != 0)
            return 1;
    }
    /* watch runs until stopped: one view, then SIGTERM. */
    const char *prefix = ld_debug_on();
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "watch", hb, "--interval", "50ms");
    ld_debug_off();
    EXPECT(sp == 0, "spawn");
    bool viewed = vt_read_until(&p, "\n\n", 20000);
    int rc = vt_stop_tool(&p, SIGTERM, 20000);
    EXPECT(viewed, "watch printed no view: '%s'", p.buf);
    return check_libc_alone("watch", prefix, rc, 0);
}

/* ---- the etcd commands ------------------------------------------------------------ */

#ifdef VIGIL_TOOL_HELPER
/* An endpoint with nothing behind it: refused at once. */
#define NOBODY "http://127.0.0.1:1"

static int test_etcd_commands_run_the_helper(void)
{
    const char *hb = vt_path("e.hb");
    vigil_hb_close(vt_hb_fresh_at(hb, 4));
    struct {
        const char *what;
        const char *argv[12];
        int rc;
        const char *says;
    } runs_[] = {
        { "lock --etcd", { "lock", "--etcd", NOBODY, "--wait", "0", "k", "--", "true" }, 1, "vigil: k: " },
        { "lock --etcd=", { "lock", "--ttl", "5s", "--etcd=" NOBODY, "--wait=0", "k", "--", "true" }, 1, "vigil: k: " },
        { "agent", { "agent" }, 2, "vigil agent: missing --etcd ENDPOINTS" },
        { "agent --help", { "agent", "--help" }, 0, "" },
        { "group ls", { "group", "ls", "g", "--etcd", NOBODY }, 1, "vigil: group g: " },
        { "export --etcd", { "export", hb, "--etcd", NOBODY, "--group", "g" }, 1, "vigil: " },
    };
    for (size_t i = 0; i < sizeof(runs_) / sizeof(runs_[0]); i++) {
        const char *prefix = ld_debug_on();
        int rc = vt_runv(20000, runs_[i].argv);
        ld_debug_off();
        char ld[1 << 16];
        int files;
        ld_output(prefix, ld, sizeof(ld), &files);
        EXPECT(rc == runs_[i].rc, "%s: expected exit %d, got %d: %s", runs_[i].what, runs_[i].rc, rc, R.err);
        EXPECT(strstr(R.err, runs_[i].says), "%s: expected '%s' on stderr, got '%s'", runs_[i].what, runs_[i].says,
               R.err);
        EXPECT(strstr(ld, "file=libcurl"), "%s: the helper (which loads libcurl) did not run", runs_[i].what);
        /* One process from start to end: vigil execs the helper in its place. */
        EXPECT(files == 1, "%s: %d processes wrote loader output, not the one", runs_[i].what, files);
    }
    return 0;
}

/* ---- where the helper is found ------------------------------------------------------ */

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    char buf[1 << 16];
    ssize_t n = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    int ok = in >= 0 && out >= 0 && n == 0;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* mkdir -p of path's directory. */
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

/* Runs prog with args (NULL-terminated), PATH set to `path`; fills R. */
static int run_prog(const char *prog, const char *path, const char *const *args)
{
    char out[600], err[600];
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

#define RUN_PROG(prog, path, ...) run_prog((prog), (path), (const char *const[]){ __VA_ARGS__, NULL })

/* prefix/BINDIR/vigil, as `cmake --install --prefix` lays it out; the
 * helper's place beside it into helper. false when either directory is
 * absolute (no prefix to move). */
static bool install_layout(const char *prefix, char *vigil, size_t vcap, char *helper, size_t hcap)
{
    if (VIGIL_INSTALL_BINDIR[0] == '/' || VIGIL_INSTALL_HELPER[0] == '/')
        return false;
    snprintf(vigil, vcap, "%s/%s/%s/vigil", vt_tmpdir(), prefix, VIGIL_INSTALL_BINDIR);
    snprintf(helper, hcap, "%s/%s/%s", vt_tmpdir(), prefix, VIGIL_INSTALL_HELPER);
    return true;
}

/* A vigil installed without its helper: the one-host commands run; an etcd
 * command says, in one line and exit 1, which helper it missed, though a
 * `vigil-etcd` is on PATH and beside it (PATH is never asked; the place
 * beside it only in the build tree). */
static int test_missing_helper(void)
{
    char vigil[700], helper[700], decoy[800];
    if (!install_layout("alone", vigil, sizeof(vigil), helper, sizeof(helper)))
        return VT_SKIP; /* an absolute LIBEXECDIR: install_consumer.sh tries the real install */
    snprintf(decoy, sizeof(decoy), "%.*s/vigil-etcd", (int)(strrchr(vigil, '/') - vigil), vigil);
    EXPECT(make_parents(vigil) == 0 && copy_file(VIGIL_TOOL, vigil) == 0, "copy %s: %s", VIGIL_TOOL, strerror(errno));
    EXPECT(copy_file(VIGIL_TOOL_HELPER, decoy) == 0, "copy the helper: %s", strerror(errno));
    char path[800];
    snprintf(path, sizeof(path), "%.*s", (int)(strrchr(vigil, '/') - vigil), vigil);
    RUN_PROG(vigil, path, "--version");
    EXPECT(R.rc == 0 && strncmp(R.out, "vigil ", 6) == 0, "--version without the helper: exit %d, '%s' '%s'", R.rc,
           R.out, R.err);
    RUN_PROG(vigil, path, "agent", "--etcd", "http://127.0.0.1:1", "--dir", "x");
    EXPECT(R.rc == 1 && vt_count_lines(R.err) == 1 && strncmp(R.err, "vigil: ", 7) == 0 && strstr(R.err, helper) &&
               strstr(R.err, strerror(ENOENT)),
           "expected exit 1 and one line naming %s, got exit %d: '%s'", helper, R.rc, R.err);
    return 0;
}

/* BINDIR/vigil and LIBEXECDIR/vigil/vigil-etcd under a prefix of our own:
 * the etcd commands run the helper. */
static int test_installed_layout(void)
{
    char vigil[700], helper[700];
    if (!install_layout("prefix", vigil, sizeof(vigil), helper, sizeof(helper)))
        return VT_SKIP;
    EXPECT(make_parents(vigil) == 0 && copy_file(VIGIL_TOOL, vigil) == 0, "copy: %s", strerror(errno));
    EXPECT(make_parents(helper) == 0 && copy_file(VIGIL_TOOL_HELPER, helper) == 0, "copy: %s", strerror(errno));
    RUN_PROG(vigil, "/nonexistent", "agent");
    EXPECT(R.rc == 2 && strstr(R.err, "vigil agent: missing --etcd ENDPOINTS"),
           "the installed helper's usage error: exit %d, '%s'", R.rc, R.err);
    RUN_PROG(vigil, "/nonexistent", "lock", "--etcd", "http://127.0.0.1:1", "--wait", "0", "k", "--", "true");
    EXPECT(R.rc == 1 && strncmp(R.err, "vigil: k: acquire on http://127.0.0.1:1: ", 41) == 0,
           "lock --etcd through the installed helper: exit %d, '%s'", R.rc, R.err);
    return 0;
}
#endif

VT_MAIN(VT_CASE(test_one_host_commands_load_libc_alone)
#ifdef VIGIL_TOOL_HELPER
        , VT_CASE(test_etcd_commands_run_the_helper), VT_CASE(test_missing_helper), VT_CASE(test_installed_layout)
#endif
)
