/* SPDX-License-Identifier: MIT */
/*
 * Description: the descriptors CMD runs with (tools/fds.c): exactly those
 * the tool was given, none it opened without close-on-exec. The functions
 * themselves: descriptors open at the note kept, those opened after it
 * dropped at the exec, in runs and alone, with close_range(2) and on a
 * kernel without it (a seccomp filter answering ENOSYS, the fallback's
 * one-by-one close), and noted under an RLIMIT_NOFILE lowered after a
 * descriptor above it was opened. Then through the tool: the CMD of `vigil lock
 * --store` given fds 0, 1, 2 and 9 sees those four, with close_range and
 * without. CMD here is this program again, which,
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

/* With VT_LIST_FDS set: "0 1 2 9\n" (the open descriptors, the listing's
 * own left out) on stdout, then exit, before any test runs. */
__attribute__((constructor)) static void list_fds_if_asked(void)
{
    if (!getenv("VT_LIST_FDS"))
        return;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        _exit(126);
    bool open[1024] = { false };
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != dirfd(d) && fd < 1024)
            open[fd] = true;
    }
    closedir(d);
    char out[4096];
    size_t n = 0;
    for (int fd = 0; fd < 1024 && n + 8 < sizeof(out); fd++)
        if (open[fd])
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

/* A kernel without close_range: the call answers ENOSYS, as before 5.9.
 * Inherited by every process the caller starts. 0, or -errno. */
static int without_close_range(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof(f) / sizeof(f[0])), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -errno;
    return syscall(__NR_close_range, 1000u, 1000u, 0u) == -1 && errno == ENOSYS ? 0 : -EINVAL;
}

/* Runs argv (argv[0] a path) in a child whose descriptors are 0 (/dev/null),
 * 1 (out), 2 (err) and 9 (a file), nothing else, under the filter when
 * `old_kernel`; VT_LIST_FDS in its environment. Its exit status, with its
 * stdout in out (NUL-terminated), stderr in err. */
static int run_given(const char *const *argv, bool old_kernel, char *out, size_t cap, char *err, size_t ecap)
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
        int in = open("/dev/null", O_RDONLY);
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int f9 = open(given, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || fo < 0 || fe < 0 || f9 < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 ||
            dup2(f9, 9) < 0)
            _exit(120);
        for (int fd = 3; fd < 1024; fd++) /* the test's own, whatever made them */
            if (fd != 9)
                close(fd);
        if (old_kernel && without_close_range() != 0)
            _exit(121);
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

/* Descriptors given (noted): 3 and 7..8 and 600, the rest of 3..20 and 700
 * opened after the note without close-on-exec, in runs (4..6, 9..20) and
 * alone (700). After tool_fds_cloexec_unnoted and an exec, only the noted
 * ones (and 0, 1, 2) are open. `low_limit`: the note taken under an
 * RLIMIT_NOFILE of 256, lowered after 600 was opened (poll takes 256 at a
 * time). */
static int check_note_and_drop(bool old_kernel, bool low_limit)
{
    if (find_self() != 0)
        return VT_SKIP;
    char out[4096];
    char path[512];
    snprintf(path, sizeof(path), "%s/fds.out", vt_tmpdir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || dup2(fo, 1) < 0)
            _exit(120);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < 1024)
            _exit(125); /* no room for fd 700 here */
        rl.rlim_cur = 1024;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        int given[] = { 3, 7, 8, 600 };
        for (size_t i = 0; i < sizeof(given) / sizeof(given[0]); i++)
            if (dup2(0, given[i]) != given[i])
                _exit(121);
        rl.rlim_cur = 256;
        if (low_limit && setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        static uint8_t noted[1024 / 8];
        tool_fds_note(1024, noted);
        rl.rlim_cur = 1024;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(125);
        for (int fd = 3; fd <= 20; fd++)
            if (fd != 7 && fd != 8 && fd != 3 && dup2(0, fd) != fd)
                _exit(122);
        if (dup2(0, 700) != 700)
            _exit(123);
        if (old_kernel && without_close_range() != 0)
            _exit(124);
        tool_fds_cloexec_unnoted(3, 1024, noted);
        setenv("VT_LIST_FDS", "1", 1);
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    int rc = vt_wait(pid, 20000);
    vt_slurp(path, out, sizeof(out));
    if ((old_kernel && rc == 124) || rc == 125)
        return VT_SKIP; /* no seccomp, or a hard limit below 1024: nothing to say */
    EXPECT(rc == 0, "the child exited %d", rc);
    EXPECT(strcmp(out, "0 1 2 3 7 8 600\n") == 0, "%s%s: expected the noted '0 1 2 3 7 8 600', got '%s'",
           old_kernel ? "without close_range" : "with close_range", low_limit ? ", RLIMIT_NOFILE 256" : "", out);
    return 0;
}

static int test_note_and_drop(void)
{
    return check_note_and_drop(false, false);
}

static int test_note_and_drop_without_close_range(void)
{
    return check_note_and_drop(true, false);
}

static int test_note_under_a_low_limit(void)
{
    return check_note_and_drop(false, true);
}

/* The note: open and closed told apart across the whole range, what was
 * set before kept (bits only added). */
static int test_note(void)
{
    int a = dup(0), b = dup(0);
    EXPECT(a >= 0 && b >= 0, "dup: %s", strerror(errno));
    close(a);
    uint8_t noted[1024 / 8];
    memset(noted, 0, sizeof(noted));
    noted[1000 / 8] |= (uint8_t)(1u << (1000 % 8)); /* set before: kept */
    tool_fds_note(1024, noted);
    for (int fd = 0; fd < 1024; fd++) {
        bool want = fcntl(fd, F_GETFD) >= 0 || fd == 1000;
        EXPECT(fd_noted(noted, fd) == want, "fd %d: noted %d, open %d", fd, fd_noted(noted, fd), want);
    }
    close(b);
    return 0;
}

/* ---- through the tool ---------------------------------------------------------- */

static int check_lock(bool old_kernel)
{
    if (find_self() != 0)
        return VT_SKIP;
    char out[4096], err[8192];
    const char *store = vt_path("fds.leases");
    const char *argv[] = { VIGIL_TOOL, "lock", "--store", store, "k", "--", self, NULL };
    int rc = run_given(argv, old_kernel, out, sizeof(out), err, sizeof(err));
    if (old_kernel && rc == 121)
        return VT_SKIP;
    EXPECT(rc == 0, "vigil lock exited %d: %s", rc, err);
    EXPECT(strcmp(out, "0 1 2 9\n") == 0, "%s: CMD should see the given '0 1 2 9', saw '%s'",
           old_kernel ? "without close_range" : "with close_range", out);
    return 0;
}

static int test_lock_cmd_gets_the_given_fds(void)
{
    return check_lock(false);
}

static int test_lock_cmd_gets_the_given_fds_without_close_range(void)
{
    return check_lock(true);
}

VT_MAIN(VT_CASE(test_note), VT_CASE(test_note_and_drop), VT_CASE(test_note_and_drop_without_close_range),
        VT_CASE(test_note_under_a_low_limit),
        VT_CASE(test_lock_cmd_gets_the_given_fds), VT_CASE(test_lock_cmd_gets_the_given_fds_without_close_range))
