/* SPDX-License-Identifier: MIT */
/*
 * Description: what the tool loads. Every one-host command (--version,
 * --help, create, inspect, watch, tick, failover, lock --store, ls,
 * export, demo --help, and the help of group and agent) maps no shared
 * library beyond those this test program maps (libc and the loader, and a
 * sanitizer's runtime in those builds): the loader itself says what it
 * loaded (LD_DEBUG=files). The etcd commands (lock --etcd, group, agent,
 * export --etcd) run the helper in the tool's own process (one pid from
 * start to end), and it loads libcurl: however etcd is named (--etcd
 * VALUE, --etcd=VALUE, after a positional argument, its other name
 * --endpoints, ETCDCTL_ENDPOINTS for lock without --store and for export
 * --group), and when the first "--" is an option's value (export --textfile
 * -- --etcd E), not where an --etcd stands after the "--" that starts CMD.
 * Where the helper is found: test_tool_helper.c.
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
        { "lock --store, an --etcd of CMD's", { "lock", "--store", store, "k", "--", "true", "--etcd", "x" }, 0 },
        { "group --help", { "group", "--help" }, 0 },
        { "group ls --help", { "group", "ls", "g", "--etcd", "http://127.0.0.1:1", "--help" }, 0 },
        { "agent --help", { "agent", "-h" }, 0 },
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

/* Any exit status: a case whose outcome a later option may change. */
#define ANY_EXIT (-1)

static int test_etcd_commands_run_the_helper(void)
{
    const char *hb = vt_path("e.hb");
    vigil_hb_close(vt_hb_fresh_at(hb, 4));
    struct {
        const char *what;
        const char *argv[12];
        int rc;
        const char *says;
        const char *endpoints; /* ETCDCTL_ENDPOINTS, or NULL for none */
        const char *once;      /* said exactly once on stderr: the command ran once, not begun here and
                                  again in the helper */
    } runs_[] = {
        { "lock --etcd", { "lock", "--etcd", NOBODY, "--wait", "0", "k", "--", "true" }, 1, "vigil: k: ", NULL, NULL },
        { "lock --ttl 500 --etcd", { "lock", "--ttl", "500", "--etcd", NOBODY, "--wait", "0", "k", "--", "true" }, 1,
          "vigil: k: ", NULL, "--ttl 500 is 500ms" },
        { "lock --etcd=", { "lock", "--ttl", "5s", "--etcd=" NOBODY, "--wait=0", "k", "--", "true" }, 1, "vigil: k: ",
          NULL, NULL },
        { "lock KEY --etcd (after the positional KEY)", { "lock", "k", "--etcd", NOBODY, "--wait", "0", "--", "true" },
          1, "vigil: k: ", NULL, NULL },
        { "lock --etcd= (empty)", { "lock", "--etcd=", "k", "--", "true" }, 2, "--etcd: empty value", NULL, NULL },
        { "lock --endpoints", { "lock", "--endpoints", NOBODY, "--wait", "0", "k", "--", "true" }, 1, "vigil: k: ",
          NULL, NULL },
        { "lock, ETCDCTL_ENDPOINTS set", { "lock", "--wait", "0", "k", "--", "true" }, 1, "vigil: k: ", NOBODY,
          NULL },
        { "export --group, ETCDCTL_ENDPOINTS set", { "export", hb, "--group", "g" }, 1, "vigil: group g: ", NOBODY,
          NULL },
        { "agent", { "agent" }, 2, "vigil agent: missing --etcd ENDPOINTS", NULL, NULL },
        { "group ls", { "group", "ls", "g", "--etcd", NOBODY }, 1, "vigil: group g: ", NULL, NULL },
        { "group ls, a --help after '--'", { "group", "ls", "g", "--etcd", NOBODY, "--", "--help" }, 2,
          "unexpected argument '--help'", NULL, NULL },
        { "export --etcd", { "export", hb, "--etcd", NOBODY, "--group", "g" }, 1, "vigil: group g: ", NULL, NULL },
        { "export --textfile -- --etcd (a '--' that is an option's value)",
          { "export", "--textfile", "--", "missing.hb", "--etcd", NOBODY, "--group", "g" }, 1, "vigil: group g: ",
          NULL, "missing.hb" },
    };
    for (size_t i = 0; i < sizeof(runs_) / sizeof(runs_[0]); i++) {
        const char *prefix = ld_debug_on();
        if (runs_[i].endpoints)
            setenv("ETCDCTL_ENDPOINTS", runs_[i].endpoints, 1);
        int rc = vt_runv(20000, runs_[i].argv);
        unsetenv("ETCDCTL_ENDPOINTS");
        ld_debug_off();
        char ld[1 << 16];
        int files;
        ld_output(prefix, ld, sizeof(ld), &files);
        EXPECT(runs_[i].rc == ANY_EXIT || rc == runs_[i].rc, "%s: expected exit %d, got %d: %s", runs_[i].what,
               runs_[i].rc, rc, R.err);
        EXPECT(strstr(R.err, runs_[i].says) && !strstr(R.err, "built without"),
               "%s: expected '%s' on stderr, got '%s'", runs_[i].what, runs_[i].says, R.err);
        const char *once = runs_[i].once, *at = once ? strstr(R.err, once) : NULL;
        EXPECT(!once || (at && !strstr(at + 1, once)), "%s: expected '%s' once on stderr, got '%s'", runs_[i].what,
               once, R.err);
        EXPECT(strstr(ld, "file=libcurl"), "%s: the helper (which loads libcurl) did not run", runs_[i].what);
        /* One process from start to end: vigil execs the helper in its place. */
        EXPECT(files == 1, "%s: %d processes wrote loader output, not the one", runs_[i].what, files);
    }
    return 0;
}

#endif

VT_MAIN(VT_CASE(test_one_host_commands_load_libc_alone)
#ifdef VIGIL_TOOL_HELPER
        , VT_CASE(test_etcd_commands_run_the_helper)
#endif
)
