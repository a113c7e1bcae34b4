/* SPDX-License-Identifier: MIT */
/*
 * Shared by the tests of the vigil tool (test_tool*.c): running the built
 * binary with a bound on its time, capturing what it printed, and a small
 * strict JSON reader to check the shape of its --json output.
 */
#ifndef VIGIL_TOOLTEST_H
#define VIGIL_TOOLTEST_H

#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#ifndef VIGIL_TOOL
#error "VIGIL_TOOL (the path of the built vigil) is set by tests/CMakeLists.txt"
#endif

/* ---- running the tool ----------------------------------------------------- */

struct vt_res {
    int  rc;          /* exit status, 128 + signal, or -1 on timeout */
    char out[1 << 17];
    char err[1 << 13];
};
static struct vt_res R;

static inline void vt_slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(fd);
}

/* Runs vigil with argv (NULL-terminated, without argv[0]) for at most
 * timeout_ms, through the command prefix names when not NULL (as
 * `setpriv ... vigil ARGS`); fills R and returns R.rc. stdin is
 * /dev/null. */
static inline int vt_runv_via(unsigned timeout_ms, const char *const *prefix, const char *const *args)
{
    /* Own buffers: vt_path's rotate, and the caller's paths use them. */
    static char out[512], err[512];
    snprintf(out, sizeof(out), "%s/tool.stdout", vt_tmpdir());
    snprintf(err, sizeof(err), "%s/tool.stderr", vt_tmpdir());
    const char *argv[64];
    size_t n = 0;
    while (prefix && prefix[n] && n < 16) {
        argv[n] = prefix[n];
        n++;
    }
    size_t tool = n;
    argv[n++] = VIGIL_TOOL;
    while (args[n - tool - 1] && n < 63) {
        argv[n] = args[n - tool - 1];
        n++;
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return R.rc = -1;
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || e < 0)
            _exit(126);
        dup2(in, 0), dup2(o, 1), dup2(e, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    R.rc = vt_wait(pid, timeout_ms);
    vt_slurp(out, R.out, sizeof(R.out));
    vt_slurp(err, R.err, sizeof(R.err));
    return R.rc;
}

static inline int vt_runv(unsigned timeout_ms, const char *const *args)
{
    return vt_runv_via(timeout_ms, NULL, args);
}
#define VT_RUN(...) vt_runv(10000, (const char *const[]){ __VA_ARGS__, NULL })

/* Prints the last run's output, for a failure message. */
static inline void vt_dump(void)
{
    fprintf(stderr, "  exit %d\n  stdout: %.2000s\n  stderr: %s\n", R.rc, R.out, R.err);
}

/* Expects the last run to exit `want`; on failure shows what it printed. */
#define EXPECT_EXIT(want, what)                                                \
    do {                                                                       \
        if (R.rc != (want)) {                                                  \
            fprintf(stderr, "%s:%d: %s: %s: expected exit %d, got %d\n",       \
                    __FILE__, __LINE__, __func__, (what), (want), R.rc);       \
            vt_dump();                                                         \
            return 1;                                                          \
        }                                                                      \
    } while (0)

static inline int vt_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* vigil with stdout on a pipe (struct vt_proc, testutil.h), for the
 * long-running commands: the test reads lines as they come, then signals
 * it; with_stderr, stderr on the pipe too. */
static inline int vt_spawn_io(struct vt_proc *p, const char *const *args, bool with_stderr)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = VIGIL_TOOL;
    while (args[n - 1] && n < 63) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    p->len = 0;
    p->buf[0] = '\0';
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        dup2(fds[1], 1);
        if (with_stderr)
            dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execv(VIGIL_TOOL, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
    return 0;
}
static inline int vt_spawnv(struct vt_proc *p, const char *const *args)
{
    return vt_spawn_io(p, args, false);
}
#define VT_SPAWN(p, ...) vt_spawnv((p), (const char *const[]){ __VA_ARGS__, NULL })
/* The same with stderr on the pipe too. */
#define VT_SPAWN2(p, ...) vt_spawn_io((p), (const char *const[]){ __VA_ARGS__, NULL }, true)


/* vigil with stdout on a pipe and stderr into a file, for reading what a
 * running watchdog logs. */
static inline int vt_spawn_logged(struct vt_proc *p, const char *errfile, const char *const *args)
{
    int efd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = fcntl(2, F_DUPFD_CLOEXEC, 3); /* not inherited by the tool, nor by its CMD */
    dup2(efd, 2);
    int rc = vt_spawnv(p, args);
    dup2(saved, 2);
    close(saved);
    close(efd);
    return rc;
}

/* Reads a file until it holds `needle`; false after timeout_ms. */
static inline bool vt_file_has(const char *path, const char *needle, char *buf, size_t len, unsigned timeout_ms)
{
    return VT_WAIT_FOR((vt_slurp(path, buf, len), strstr(buf, needle) != NULL), timeout_ms);
}

/* The parent of pid as /proc has it, 0 if it cannot be read; its state
 * ('R', 'S', 'T' stopped, 'Z') in *state. */
static inline pid_t vt_parent_of(pid_t pid, char *state)
{
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    vt_slurp(path, text, sizeof(text));
    const char *rp = strrchr(text, ')');
    int ppid;
    return rp && sscanf(rp + 2, "%c %d", state, &ppid) == 2 ? ppid : 0;
}

/* A child of `parent` in state T (stopped), 0 if none yet. */
static inline pid_t vt_stopped_child(pid_t parent)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *de;
    while (d && !found && (de = readdir(d))) {
        int pid = atoi(de->d_name);
        char state;
        if (pid > 0 && vt_parent_of(pid, &state) == parent && state == 'T')
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* Whether process pid has sig blocked (/proc/PID/status, SigBlk). */
static inline bool vt_sig_blocked(pid_t pid, int sig)
{
    char path[64], text[4096];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    vt_slurp(path, text, sizeof(text));
    const char *b = strstr(text, "\nSigBlk:");
    unsigned long long mask;
    return b && sscanf(b + 8, "%llx", &mask) == 1 && (mask >> (sig - 1) & 1);
}

/* Stops a long-running vigil command with sig (SIGINT or SIGTERM) once it
 * is ready to take it: the tool blocks its stop signals as it starts, and
 * one sent before that kills it (exit 128 + sig) instead of ending it
 * cleanly. A command that printed something has; one that may have found
 * nothing to say (a second watchdog) is waited for here, bounded. */
static inline int vt_stop_tool(struct vt_proc *p, int sig, unsigned timeout_ms)
{
    VT_WAIT_FOR(vt_sig_blocked(p->pid, sig), timeout_ms);
    return vt_stop(p, sig, timeout_ms);
}

/* NULL when text holds nothing a terminal acts on (of the C0 controls only
 * '\n'; no DEL, no C1 control, no bidi control or separator; valid UTF-8),
 * else what it holds: what every line the tool prints must pass. */
static inline size_t vj_utf8(const unsigned char *s);
static inline const char *vt_unclean(const char *text)
{
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        if ((*s < 0x20 && *s != '\n') || *s == 0x7f)
            return "a C0 control or DEL";
        size_t n = vj_utf8(s);
        if (!n)
            return "malformed UTF-8";
        uint32_t cp = n == 1 ? s[0]
                    : n == 2 ? (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f)
                    : n == 3 ? (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f)
                             : 0;
        if (cp >= 0x80 && cp <= 0x9f)
            return "a C1 control";
        if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029)
            return "a bidirectional control or a separator";
        s += n;
    }
    return NULL;
}

/* promtool's verdict on an exposition: 0 valid, 1 not (said on stderr),
 * VT_SKIP where promtool is not installed. */
static inline int vt_promtool(const char *text)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        return VT_SKIP;
    static char in[600], out_path[600];
    snprintf(in, sizeof(in), "%s/metrics.prom", vt_tmpdir());
    snprintf(out_path, sizeof(out_path), "%s/promtool.out", vt_tmpdir());
    FILE *f = fopen(in, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        return 1;
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s > %s 2>&1", in, out_path);
    int rc = system(cmd);
    char out[4096];
    vt_slurp(out_path, out, sizeof(out));
    if (rc != 0 || out[0])
        fprintf(stderr, "promtool check metrics: %s\n", out);
    return rc == 0 && !out[0] ? 0 : 1;
}

/* ---- running the tool as an unprivileged user --------------------------- */

/*
 * Runs body(arg) in a forked child that has become nobody (uid and gid
 * 65534), whose own scratch directory (for the tool's captured output)
 * is made for it: 0 when body returned 0, 1 when it failed, VT_SKIP when
 * this test is not root (root reads everything: nothing to test) or
 * nobody cannot run the built tool (a build tree under a directory
 * closed to others). The test's directory is opened to others (0711,
 * search only) meanwhile; files in it keep their own modes.
 */
static inline int vt_as_nobody(int (*body)(void *), void *arg)
{
    if (geteuid() != 0)
        return VT_SKIP;
    char scratch[sizeof(vt_dir)];
    if (snprintf(scratch, sizeof(scratch), "%.200s/nobody", vt_tmpdir()) >= (int)sizeof(scratch))
        return VT_SKIP;
    if ((mkdir(scratch, 0777) != 0 && errno != EEXIST) || chmod(scratch, 0777) != 0 || chmod(vt_tmpdir(), 0711) != 0)
        return 1;
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(VT_SKIP);
        if (access(VIGIL_TOOL, X_OK) != 0)
            _exit(VT_SKIP);
        memcpy(vt_dir, scratch, sizeof(vt_dir)); /* where it may write the tool's output */
        _exit(body(arg) == 0 ? 0 : 1);
    }
    int st = vt_wait(kid, 60000);
    chmod(vt_tmpdir(), 0700);
    return st == VT_SKIP ? VT_SKIP : st == 0 ? 0 : 1;
}

/* ---- a set-user-ID CMD ------------------------------------------------------ */

/*
 * A root-owned set-user-ID copy of tests/suid_cmd.c in the test's
 * directory (search-only for others while vt_as_nobody runs), or NULL
 * with the reason on stderr where there can be none: not root, or a
 * temporary directory on a nosuid filesystem (set TMPDIR elsewhere). Run
 * by nobody it prints "WORD pid P euid 0 ruid 65534".
 */
static inline const char *vt_suid_copy(void)
{
#ifdef VIGIL_SUID_CMD
    static char path[512];
    if (geteuid() != 0) {
        fprintf(stderr, "not root: no set-user-ID copy can be made\n");
        return NULL;
    }
    struct statvfs sv;
    if (statvfs(vt_tmpdir(), &sv) == 0 && (sv.f_flag & ST_NOSUID)) {
        fprintf(stderr, "%s is on a nosuid filesystem: set TMPDIR elsewhere\n", vt_tmpdir());
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/suid-cmd", vt_tmpdir());
    int in = open(VIGIL_SUID_CMD, O_RDONLY | O_CLOEXEC);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    char buf[65536];
    ssize_t n;
    bool ok = in >= 0 && out >= 0;
    while (ok && (n = read(in, buf, sizeof(buf))) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (!ok || chown(path, 0, 0) != 0 || chmod(path, 04755) != 0) {
        fprintf(stderr, "could not make %s set-user-ID\n", path);
        return NULL;
    }
    return path;
#else
    return NULL;
#endif
}

/* Reads "WORD pid P euid E ruid R" from a spawned tool's CMD: P when E is
 * 0 and R this process's real uid (a set-user-ID root CMD run by us), 0
 * otherwise (and why, on stderr). */
static inline pid_t vt_suid_said(struct vt_proc *p, const char *word)
{
    char want[64];
    snprintf(want, sizeof(want), "%s pid ", word);
    if (!vt_read_until(p, want, 15000) || !vt_read_until(p, "\n", 15000)) {
        fprintf(stderr, "the set-user-ID CMD never said it runs: '%s'\n", p->buf);
        return 0;
    }
    int pid = 0, euid = -1, ruid = -1;
    if (sscanf(strstr(p->buf, want) + strlen(want), "%d euid %d ruid %d", &pid, &euid, &ruid) != 3 || euid != 0 ||
        ruid != (int)getuid()) {
        fprintf(stderr, "the CMD is not set-user-ID root run by uid %d: '%s'\n", (int)getuid(), p->buf);
        return 0;
    }
    return pid;
}

/* Whether process pid is gone: no such process, or a zombie. */
static inline bool vt_gone(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    vt_slurp(path, text, sizeof(text));
    const char *rp = strrchr(text, ')');
    return !rp || rp[2] == 'Z' || rp[2] == 'X';
}

/* The spawned tool p's set-user-ID CMD (vt_suid_said's WORD): once it
 * runs, SIGKILL to `who` (the tool's pid, or -pid: its process group);
 * *st the tool's status. True when CMD went with it (bounded); a CMD
 * still there is killed here (its real uid is ours). */
static inline bool vt_suid_dies_with(struct vt_proc *p, const char *word, pid_t who, int *st, pid_t *cmd)
{
    *cmd = vt_suid_said(p, word);
    kill(who, SIGKILL);
    *st = vt_wait(p->pid, 15000);
    close(p->fd);
    if (*cmd <= 0)
        return false;
    bool dead = VT_WAIT_FOR(vt_gone(*cmd), 10000);
    if (!dead)
        kill(*cmd, SIGKILL);
    return dead;
}

/* The spawned tool p, whose set-user-ID CMD says "suid pid ...", killed
 * (SIGKILL) once CMD runs: 0 CMD went with it, else 1 (said why). */
static inline int vt_suid_tool_killed(struct vt_proc *p, const char *what)
{
    int st;
    pid_t cmd;
    bool dead = vt_suid_dies_with(p, "suid", p->pid, &st, &cmd);
    if (cmd <= 0)
        return 1;
    EXPECT(st == 128 + SIGKILL, "%s: %d", what, st);
    EXPECT(dead, "the set-user-ID CMD (pid %d) runs on after %s was killed", (int)cmd, what);
    return 0;
}

/* Whether KEY is held by nobody in the lease store at `store`. */
static inline bool vt_key_vacant(const char *store, const char *key)
{
    vigil_leases *ls = NULL;
    vigil_lease_info info;
    bool vacant = vigil_leases_open(store, &ls) == 0 && vigil_leases_get(ls, key, &info) == VIGIL_EVACANT;
    vigil_leases_close(ls);
    return vacant;
}

/* ---- a system without /proc ---------------------------------------------------- */

/*
 * Gives the calling process (a child of the test: it stays so) a mount
 * namespace of its own, private so that nothing leaks to the host, with
 * an empty /proc: as in a container or chroot that mounted none. 0, or
 * -errno: not root (no CAP_SYS_ADMIN), or a sanitized build (-ENOTSUP: a
 * sanitizer's runtime reads its options from /proc/self/environ, and
 * LeakSanitizer fails every process at exit without /proc/PID/task); the
 * caller skips.
 */
static inline int vt_hide_proc(void)
{
#ifdef VT_SANITIZED
    return -ENOTSUP;
#else
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555") != 0)
        return -errno;
    return access("/proc/self", F_OK) != 0 ? 0 : -EEXIST;
#endif
}

/* ---- a small strict JSON reader --------------------------------------------- */

enum vj_type { VJ_NULL, VJ_BOOL, VJ_NUM, VJ_STR, VJ_ARR, VJ_OBJ };

struct vj {
    enum vj_type type;
    const char  *key;   /* member name, inside an object */
    const char  *str;   /* VJ_STR: decoded (UTF-8); VJ_NUM: the literal text */
    size_t       len;   /* VJ_STR: decoded length */
    double       num;
    bool         b;
    struct vj   *child; /* first element or member */
    struct vj   *next;
};

static char   vj_arena[1 << 18];
static size_t vj_used;
static const char *vj_error;

static inline void *vj_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (vj_used + n > sizeof(vj_arena))
        return NULL;
    void *p = vj_arena + vj_used;
    vj_used += n;
    memset(p, 0, n);
    return p;
}

static inline void vj_ws(const char **s)
{
    while (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r')
        (*s)++;
}

static inline void vj_put_utf8(char *o, size_t *n, uint32_t cp)
{
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xc0 | cp >> 6);
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xe0 | cp >> 12);
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*n)++] = (char)(0xf0 | cp >> 18);
        o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* Well-formed UTF-8 at s, or 0 (the same rules a JSON reader must apply). */
static inline size_t vj_utf8(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f, min = 0x80;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f, min = 0x800;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07, min = 0x10000;
    else
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    return (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) ? 0 : len;
}

static inline int vj_hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static inline const char *vj_string(const char **s, size_t *len)
{
    const char *p = *s + 1;
    /* Decoding never makes a string longer than its text. */
    size_t raw = 0;
    while (p[raw] && p[raw] != '"')
        raw += (p[raw] == '\\' && p[raw + 1]) ? 2 : 1;
    char *o = vj_alloc(raw + 1);
    if (!o)
        return vj_error = "arena full", NULL;
    size_t n = 0;
    for (;;) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            break;
        if (c < 0x20)
            return vj_error = "raw control character or end inside a string", NULL;
        if (c != '\\') {
            size_t k = vj_utf8((const unsigned char *)p);
            if (!k)
                return vj_error = "malformed UTF-8 inside a string", NULL;
            memcpy(o + n, p, k);
            n += k, p += k;
            continue;
        }
        p++;
        switch (*p) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (vj_hex4(p + 1, &cp) < 0)
                return vj_error = "bad \\u escape", NULL;
            p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (p[1] != '\\' || p[2] != 'u' || vj_hex4(p + 3, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                    return vj_error = "lone surrogate", NULL;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return vj_error = "lone surrogate", NULL;
            }
            vj_put_utf8(o, &n, cp);
            break;
        }
        default:
            return vj_error = "bad escape", NULL;
        }
        p++;
    }
    o[n] = '\0';
    *len = n;
    *s = p + 1;
    return o;
}

static inline struct vj *vj_value(const char **s, int depth)
{
    if (depth > 32)
        return vj_error = "nested too deep", NULL;
    vj_ws(s);
    struct vj *v = vj_alloc(sizeof(*v));
    if (!v)
        return vj_error = "arena full", NULL;
    const char *p = *s;
    if (*p == '{' || *p == '[') {
        bool obj = *p == '{';
        char close = obj ? '}' : ']';
        v->type = obj ? VJ_OBJ : VJ_ARR;
        *s = p + 1;
        vj_ws(s);
        if (**s == close) {
            (*s)++;
            return v;
        }
        struct vj **tail = &v->child;
        for (;;) {
            const char *key = NULL;
            size_t klen;
            if (obj) {
                vj_ws(s);
                if (**s != '"')
                    return vj_error = "expected a member name", NULL;
                if (!(key = vj_string(s, &klen)))
                    return NULL;
                vj_ws(s);
                if (**s != ':')
                    return vj_error = "expected ':'", NULL;
                (*s)++;
            }
            struct vj *c = vj_value(s, depth + 1);
            if (!c)
                return NULL;
            c->key = key;
            *tail = c;
            tail = &c->next;
            vj_ws(s);
            if (**s == ',') {
                (*s)++;
                continue;
            }
            if (**s == close) {
                (*s)++;
                return v;
            }
            return vj_error = "expected ',' or the end of a container", NULL;
        }
    }
    if (*p == '"') {
        v->type = VJ_STR;
        v->str = vj_string(s, &v->len);
        return v->str ? v : NULL;
    }
    if (*p == '-' || (*p >= '0' && *p <= '9')) {
        const char *q = p;
        if (*q == '-')
            q++;
        if (*q == '0')
            q++;
        else if (*q >= '1' && *q <= '9')
            while (*q >= '0' && *q <= '9')
                q++;
        else
            return vj_error = "bad number", NULL;
        if (*q == '.') {
            q++;
            if (*q < '0' || *q > '9')
                return vj_error = "bad number", NULL;
            while (*q >= '0' && *q <= '9')
                q++;
        }
        if (*q == 'e' || *q == 'E') {
            q++;
            if (*q == '+' || *q == '-')
                q++;
            if (*q < '0' || *q > '9')
                return vj_error = "bad number", NULL;
            while (*q >= '0' && *q <= '9')
                q++;
        }
        char *t = vj_alloc((size_t)(q - p) + 1);
        if (!t)
            return vj_error = "arena full", NULL;
        memcpy(t, p, (size_t)(q - p));
        v->type = VJ_NUM;
        v->str = t;
        v->num = strtod(t, NULL);
        *s = q;
        return v;
    }
    static const struct { const char *lit; enum vj_type t; bool b; } lits[] = {
        { "true", VJ_BOOL, true }, { "false", VJ_BOOL, false }, { "null", VJ_NULL, false } };
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lits[i].lit);
        if (strncmp(p, lits[i].lit, n) == 0) {
            v->type = lits[i].t;
            v->b = lits[i].b;
            *s = p + n;
            return v;
        }
    }
    return vj_error = "unexpected character", NULL;
}

/* Parses one whole document (trailing white space only); NULL with
 * vj_error set when text is not JSON. Resets the arena. */
static inline struct vj *vj_parse(const char *text)
{
    vj_used = 0;
    vj_error = NULL;
    const char *s = text;
    struct vj *v = vj_value(&s, 0);
    if (!v)
        return NULL;
    vj_ws(&s);
    if (*s)
        return vj_error = "text after the document", NULL;
    return v;
}

static inline struct vj *vj_get(const struct vj *obj, const char *key)
{
    if (!obj || obj->type != VJ_OBJ)
        return NULL;
    for (struct vj *c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

static inline size_t vj_count(const struct vj *v)
{
    size_t n = 0;
    for (struct vj *c = v ? v->child : NULL; c; c = c->next)
        n++;
    return n;
}

/* True when obj has exactly these member names, each once. keys ends with NULL. */
static inline bool vj_keys_are(const struct vj *obj, const char *const *keys)
{
    size_t want = 0;
    for (; keys[want]; want++) {
        size_t seen = 0;
        for (struct vj *c = obj->child; c; c = c->next)
            seen += strcmp(c->key, keys[want]) == 0;
        if (seen != 1)
            return false;
    }
    return obj->type == VJ_OBJ && vj_count(obj) == want;
}

/* The member as an exact unsigned integer: a JSON number written as plain
 * digits, or (for counters past 2^53) a string of digits. */
static inline bool vj_u64(const struct vj *v, uint64_t *out)
{
    if (!v || (v->type != VJ_NUM && v->type != VJ_STR))
        return false;
    const char *s = v->str;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    *out = strtoull(s, NULL, 10);
    return true;
}

static inline bool vj_is_str(const struct vj *v, const char *want)
{
    return v && v->type == VJ_STR && strcmp(v->str, want) == 0;
}

#endif
