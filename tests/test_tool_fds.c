/* SPDX-License-Identifier: MIT */
/*
 * Description: the descriptors CMD runs with (tools/fds.c): exactly those
 * the tool was given, of any kind (an O_PATH one too) and any number
 * (above 1024 too), none it opened without close-on-exec. The functions
 * themselves: descriptors open at the note kept, those opened after it
 * dropped at the exec, in runs and alone, with close_range(2), on a
 * kernel that knows the call but not CLOSE_RANGE_CLOEXEC (5.9, 5.10: a
 * seccomp filter answering EINVAL for a flag), on one without the call
 * (ENOSYS: the fallback closes what /proc/self/fd lists), without /proc
 * (a mount namespace with an empty one: noted and dropped by number), and
 * noted under an RLIMIT_NOFILE lowered after a descriptor above it was
 * opened. Then through the tool: the CMD of `vigil lock --store` given
 * fds 0, 1, 2, 9, an O_PATH 10 and 1500 sees those six, with close_range,
 * without it, and without /proc. CMD here is this program again, which,
 * with VT_LIST_FDS set, prints its open descriptors and exits.
 */
#include "tooltest.h"

#include "../tools/fds.c"

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/resource.h>

/* ---- CMD: this program, listing its descriptors ------------------------------- */

/* With VT_LIST_FDS set: "0 1 2 9\n" (the open descriptors, ascending, the
 * listing's own left out: from /proc/self/fd, else by fcntl below 4096)
 * on stdout, then exit, before any test runs. */
__attribute__((constructor)) static void list_fds_if_asked(void)
{
    if (!getenv("VT_LIST_FDS"))
        return;
    static bool open_[4096];
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != dirfd(d) && fd < 4096)
            open_[fd] = true;
    }
    if (d)
        closedir(d);
    else
        for (int fd = 0; fd < 4096; fd++)
            open_[fd] = fcntl(fd, F_GETFD) >= 0;
    char out[4096];
    size_t n = 0;
    for (int fd = 0; fd < 4096 && n + 8 < sizeof(out); fd++)
        if (open_[fd])
            n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%d", n ? " " : "", fd);
    out[n++] = '\n';
    _exit(write(1, out, n) == (ssize_t)n ? 0 : 125);
}

static char self[4096];

static int find_self(void)
{
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || (size_t)n >= sizeof(self) - 1)
        return -1;
    self[n] = '\0';
    return 0;
}

/* How a run's system differs from today's. */
enum {
    NO_CLOSE_RANGE = 1, /* close_range answers ENOSYS, as before Linux 5.9 */
    NO_CLOEXEC_FLAG = 2, /* close_range answers EINVAL for a flag, as 5.9 and 5.10 */
    NO_PROC = 4,        /* an empty /proc */
    LOW_LIMIT = 8,      /* the note under an RLIMIT_NOFILE of 256 */
};

static const char *describe(unsigned how)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), "%s%s%s%s", how & NO_CLOSE_RANGE ? "without close_range" : "with close_range",
             how & NO_CLOEXEC_FLAG ? " but not its CLOEXEC flag" : "", how & NO_PROC ? ", without /proc" : "",
             how & LOW_LIMIT ? ", RLIMIT_NOFILE 256" : "");
    return buf;
}

/* The kernel `how` names, by a seccomp filter inherited by every process
 * the caller starts. 0, or -errno. */
static int old_kernel(unsigned how)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])), /* flags (low half) */
        /* ENOSYS whatever the flags; EINVAL for a flag, a plain call allowed */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, how & NO_CLOSE_RANGE ? 0 : 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (how & NO_CLOSE_RANGE ? ENOSYS : EINVAL)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -errno;
    int want = how & NO_CLOSE_RANGE ? ENOSYS : EINVAL;
    return syscall(__NR_close_range, 1000u, 1000u, CLOSE_RANGE_CLOEXEC) == -1 && errno == want ? 0 : -EINVAL;
}

/* Sets up the system `how` names in this child: exit status 124 when it
 * cannot (no seccomp, no mount namespace: the caller skips). */
static void become(unsigned how)
{
    if ((how & NO_PROC) && vt_hide_proc() != 0)
        _exit(124);
    if ((how & (NO_CLOSE_RANGE | NO_CLOEXEC_FLAG)) && old_kernel(how) != 0)
        _exit(124);
}

/* Room for descriptor 1500: RLIMIT_NOFILE raised to 2048 where the hard
 * limit allows. */
static bool room_above_1024(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 2048)
        return false;
    rl.rlim_cur = 2048;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

static bool can_go_above_1024(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max >= 2048;
}

/* Runs argv (argv[0] a path) in a child whose descriptors are 0 (/dev/null),
 * 1 (out), 2 (err), 9 (a file), 10 (O_PATH, a directory) and 1500 (where
 * the hard limit allows), nothing else, in the system `how` names;
 * VT_LIST_FDS in its environment. Its exit status, with its stdout in out
 * (NUL-terminated), stderr in err. */
static int run_given(const char *const *argv, unsigned how, char *out, size_t cap, char *err, size_t ecap)
{
    char o[512], e[512], given[512];
    snprintf(o, sizeof(o), "%s/given.out", vt_tmpdir());
    snprintf(e, sizeof(e), "%s/given.err", vt_tmpdir());
    snprintf(given, sizeof(given), "%s/given.9", vt_tmpdir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        bool high = room_above_1024();
        int in = open("/dev/null", O_RDONLY);
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int f9 = open(given, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int f10 = open(vt_tmpdir(), O_PATH | O_DIRECTORY);
        if (in < 0 || fo < 0 || fe < 0 || f9 < 0 || f10 < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 ||
            dup2(fe, 2) < 0 || dup2(f9, 9) < 0 || dup2(f10, 10) < 0 || (high && dup2(f9, 1500) < 0))
            _exit(120);
        for (int fd = 3; fd < 1024; fd++) /* the test's own, whatever made them */
            if (fd != 9 && fd != 10)
                close(fd);
        become(how);
        setenv("VT_LIST_FDS", "1", 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int rc = vt_wait(pid, 20000);
    vt_slurp(o, out, cap);
    vt_slurp(e, err, ecap);
    return rc;
}

/* ---- the functions ------------------------------------------------------------ */

/* Descriptors given (noted): 3, 7 (O_PATH, a directory), 8, 600 and, where
 * the hard limit allows, 1500; the rest of 3..20, 700 and 1600 opened after
 * the note without close-on-exec, in runs (4..6, 9..20) and alone (700,
 * 1600). After tool_fds_cloexec_unnoted and an exec, only the noted ones
 * (and 0, 1, 2) are open. LOW_LIMIT: the note taken under an
 * RLIMIT_NOFILE of 256, lowered after 600 and 1500 were opened. */
static int check_note_and_drop(unsigned how)
{
    if (find_self() != 0)
        return VT_SKIP;
    char out[4096];
    char path[512];
    snprintf(path, sizeof(path), "%s/fds.out", vt_tmpdir());
    bool high = can_go_above_1024();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int dir = open(vt_tmpdir(), O_PATH | O_DIRECTORY);
        if (fo < 0 || dir < 0 || dup2(fo, 1) < 0 || dup2(dir, 7) != 7)
            _exit(120);
        for (int fd = 3; fd < 1024; fd++)
            if (fd != 7)
                close(fd);
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 1024)
            _exit(125); /* no room for fd 700 here */
        rl.rlim_cur = high ? 2048 : 1024;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        int given[] = { 3, 8, 600, 1500 };
        for (size_t i = 0; i < (high ? 4 : 3); i++)
            if (dup2(0, given[i]) != given[i])
                _exit(121);
        if ((how & NO_PROC) && vt_hide_proc() != 0)
            _exit(124);
        struct rlimit low = { 256, rl.rlim_max };
        if ((how & LOW_LIMIT) && setrlimit(RLIMIT_NOFILE, &low) != 0)
            _exit(125);
        tool_fds_note();
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        for (int fd = 3; fd <= 20; fd++)
            if (fd != 3 && fd != 7 && fd != 8 && dup2(0, fd) != fd)
                _exit(122);
        if (dup2(0, 700) != 700 || (high && dup2(0, 1600) != 1600))
            _exit(123);
        if ((how & (NO_CLOSE_RANGE | NO_CLOEXEC_FLAG)) && old_kernel(how) != 0)
            _exit(124);
        tool_fds_cloexec_unnoted(3);
        setenv("VT_LIST_FDS", "1", 1);
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    int rc = vt_wait(pid, 20000);
    vt_slurp(path, out, sizeof(out));
    if (rc == 124 || rc == 125) {
        fprintf(stderr, "  skipped %s: %s\n", describe(how),
                rc == 124 ? "no seccomp filter or mount namespace here (not root? a sanitized build without /proc?)"
                          : "a hard limit below 1024");
        return VT_SKIP;
    }
    const char *want = high ? "0 1 2 3 7 8 600 1500\n" : "0 1 2 3 7 8 600\n";
    EXPECT(rc == 0, "the child exited %d", rc);
    EXPECT(strcmp(out, want) == 0, "%s: expected the noted '%.*s', got '%s'", describe(how), (int)strlen(want) - 1,
           want, out);
    return 0;
}

static int test_note_and_drop(void)
{
    return check_note_and_drop(0);
}

static int test_note_and_drop_without_cloexec_flag(void)
{
    return check_note_and_drop(NO_CLOEXEC_FLAG);
}

static int test_note_and_drop_without_close_range(void)
{
    return check_note_and_drop(NO_CLOSE_RANGE);
}

static int test_note_and_drop_without_proc(void)
{
    return check_note_and_drop(NO_PROC);
}

static int test_note_and_drop_without_close_range_or_proc(void)
{
    return check_note_and_drop(NO_CLOSE_RANGE | NO_PROC);
}

static int test_note_under_a_low_limit(void)
{
    return check_note_and_drop(LOW_LIMIT);
}

/* The note: every open descriptor and none closed, an O_PATH one and one
 * above 1024 included; a second note replaces the first. */
static int test_note(void)
{
    int a = dup(0), b = dup(0), p = open(vt_tmpdir(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    EXPECT(a >= 0 && b >= 0 && p >= 0, "dup, open: %s", strerror(errno));
    int high = -1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 1100)
        high = fcntl(0, F_DUPFD_CLOEXEC, 1100);
    close(a);
    tool_fds_note();
    for (int fd = 0; fd < bound; fd++) {
        bool want = fcntl(fd, F_GETFD) >= 0;
        EXPECT(is_noted(fd) == want, "fd %d: noted %d, open %d", fd, is_noted(fd), want);
    }
    EXPECT(is_noted(p), "the O_PATH descriptor %d was not noted", p);
    EXPECT(high < 0 || is_noted(high), "descriptor %d, above 1024, was not noted", high);
    close(b);
    tool_fds_note();
    EXPECT(!is_noted(b), "descriptor %d, closed before the second note, is still noted", b);
    close(p);
    if (high >= 0)
        close(high);
    return 0;
}

/* ---- through the tool ---------------------------------------------------------- */

static int check_lock(unsigned how)
{
    if (find_self() != 0)
        return VT_SKIP;
    char out[4096], err[8192];
    const char *store = vt_path("fds.leases");
    const char *argv[] = { VIGIL_TOOL, "lock", "--store", store, "k", "--", self, NULL };
    int rc = run_given(argv, how, out, sizeof(out), err, sizeof(err));
    if (rc == 124) {
        fprintf(stderr, "  skipped %s: no seccomp filter or mount namespace here (not root? a sanitized build "
                        "without /proc?)\n", describe(how));
        return VT_SKIP;
    }
    const char *want = can_go_above_1024() ? "0 1 2 9 10 1500\n" : "0 1 2 9 10\n";
    EXPECT(rc == 0, "vigil lock exited %d: %s", rc, err);
    EXPECT(strcmp(out, want) == 0, "%s: CMD should see the given '%.*s', saw '%s'", describe(how),
           (int)strlen(want) - 1, want, out);
    return 0;
}

static int test_lock_cmd_gets_the_given_fds(void)
{
    return check_lock(0);
}

static int test_lock_cmd_gets_the_given_fds_without_close_range(void)
{
    return check_lock(NO_CLOSE_RANGE);
}

static int test_lock_cmd_gets_the_given_fds_without_proc(void)
{
    return check_lock(NO_PROC);
}

VT_MAIN(VT_CASE(test_note), VT_CASE(test_note_and_drop), VT_CASE(test_note_and_drop_without_cloexec_flag),
        VT_CASE(test_note_and_drop_without_close_range), VT_CASE(test_note_and_drop_without_proc),
        VT_CASE(test_note_and_drop_without_close_range_or_proc), VT_CASE(test_note_under_a_low_limit),
        VT_CASE(test_lock_cmd_gets_the_given_fds), VT_CASE(test_lock_cmd_gets_the_given_fds_without_close_range),
        VT_CASE(test_lock_cmd_gets_the_given_fds_without_proc))
