/* SPDX-License-Identifier: MIT */
/*
 * Shared test scaffolding: a fresh temporary directory per test program
 * (removed at exit), bounded waits for child processes, and a runner that
 * prints one line per failure and a closing count.
 *
 * A test is `static int test_x(void)` returning 0 (pass), 1 (fail) or
 * VT_SKIP; every failure prints what was expected and what came instead.
 *
 * Also the pieces tests kept writing again: fresh tables and stores in the
 * temporary directory, memory shared with forked children, and start gates
 * for processes (or threads) that must leave together.
 */
#ifndef VIGIL_TESTUTIL_H
#define VIGIL_TESTUTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vigil/vigil.h>

#define VT_SKIP 77

/* Built with ASan or TSan (GCC's macros, clang's __has_feature). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VT_SANITIZED 1
#endif
#endif

#define EXPECT(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, __func__);     \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            return 1;                                                         \
        }                                                                     \
    } while (0)

/* Expect a call to return `want`; prints both codes and their meanings. */
#define EXPECT_RC(call, want)                                                 \
    do {                                                                      \
        int vt_rc_ = (call);                                                  \
        int vt_want_ = (want);                                                \
        EXPECT(vt_rc_ == vt_want_, "%s: expected %d (%s), got %d (%s)", #call, \
               vt_want_, vigil_strerror(vt_want_), vt_rc_, vigil_strerror(vt_rc_)); \
    } while (0)

static char vt_dir[256];

static inline int vt_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static pid_t vt_owner_pid;

static inline void vt_cleanup(void)
{
    /* Children that return from main instead of _exit must not remove
     * their parent's directory. */
    if (vt_dir[0] && getpid() == vt_owner_pid)
        nftw(vt_dir, vt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The test's temporary directory, made on first use. */
static inline const char *vt_tmpdir(void)
{
    if (!vt_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(vt_dir, sizeof(vt_dir), "%s/vigil-test.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(vt_dir)) {
            perror("mkdtemp");
            exit(2);
        }
        vt_owner_pid = getpid();
        atexit(vt_cleanup);
    }
    return vt_dir;
}

/* A path inside the temporary directory; rotates through 8 buffers. */
static inline const char *vt_path(const char *name)
{
    static char bufs[8][512];
    static unsigned next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof(bufs[0]), "%s/%s", vt_tmpdir(), name);
    return b;
}

static inline uint64_t vt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void vt_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Waits at most timeout_ms for a child; kills it with SIGKILL past that.
 * Returns its exit status (0..255), 128 + signal if killed by one, or -1
 * on timeout. */
static inline int vt_wait(pid_t pid, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0)
            return -1;
        if (vt_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "child %d did not finish in %u ms, killed\n", (int)pid, timeout_ms);
            return -1;
        }
        vt_sleep_ms(1);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

/* A pid with no process now: the pid of a child reaped just now, unless
 * something took it since (then another try); -1 if every try was taken. */
static inline pid_t vt_unused_pid(void)
{
    for (int i = 0; i < 100; i++) {
        pid_t p = fork();
        if (p == 0)
            _exit(0);
        waitpid(p, NULL, 0);
        if (kill(p, 0) < 0 && errno == ESRCH)
            return p;
    }
    return -1;
}

/* For a child that is to be killed: it blocks until the signal comes, so
 * it can never finish first, whatever the machine's load (a child that
 * slept a while instead raced its parent's kill). If the test dies first
 * the child dies with it (vt_die_with_parent). */
static inline _Noreturn void vt_await_kill(void)
{
    for (;;)
        pause();
}

/* Polls cond every millisecond for at most timeout_ms: a bounded wait. */
#define VT_WAIT_FOR(cond, timeout_ms)                                         \
    ({                                                                        \
        uint64_t vt_dl_ = vt_now_ms() + (timeout_ms);                         \
        bool vt_ok_;                                                          \
        while (!(vt_ok_ = (cond)) && vt_now_ms() < vt_dl_)                    \
            vt_sleep_ms(1);                                                   \
        vt_ok_;                                                               \
    })

/* ---- children with stdout on a pipe -------------------------------------- */

/* A child (vigil, etcdctl, any program) whose stdout the test reads; the
 * spawners are tooltest.h's vt_spawnv and etcd_testutil.h's et_spawnv. */
struct vt_proc {
    pid_t pid;
    int   fd;
    char  buf[1 << 16];
    size_t len;
};

/* Reads from the child until its output holds `needle` or timeout_ms
 * passes; true when found. */
static inline bool vt_read_until(struct vt_proc *p, const char *needle, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    while (!strstr(p->buf, needle)) {
        uint64_t now = vt_now_ms();
        if (now >= deadline || p->len + 1 >= sizeof(p->buf))
            return false;
        struct pollfd pfd = { p->fd, POLLIN, 0 };
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t k = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (k <= 0)
            return strstr(p->buf, needle) != NULL;
        p->len += (size_t)k;
        p->buf[p->len] = '\0';
    }
    return true;
}

/* Sends sig and waits at most timeout_ms (vt_wait kills it then); returns
 * the exit status as vt_wait, or -1 for a child never started or already
 * stopped. */
static inline int vt_stop(struct vt_proc *p, int sig, unsigned timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    int rc = vt_wait(p->pid, timeout_ms);
    close(p->fd);
    p->pid = 0;
    return rc;
}

/* ---- fresh files ---------------------------------------------------------- */

/* A new heartbeat table at `path`; exits with status 2 when it cannot be
 * made, since the test cannot run without it. */
static inline vigil_hb *vt_hb_fresh_at(const char *path, uint32_t cap)
{
    vigil_hb *hb = NULL;
    int rc = vigil_hb_create(path, cap, &hb);
    if (rc < 0) {
        fprintf(stderr, "create %s: %s\n", path, vigil_strerror(rc));
        exit(2);
    }
    return hb;
}

/* A new heartbeat table `name` in the test's temporary directory. */
static inline vigil_hb *vt_hb_fresh(const char *name, uint32_t cap)
{
    return vt_hb_fresh_at(vt_path(name), cap);
}

/* A new lease store `name` in the test's temporary directory; exits with
 * status 2 when it cannot be made. */
static inline vigil_leases *vt_leases_fresh(const char *name, uint32_t cap)
{
    vigil_leases *ls = NULL;
    const char *path = vt_path(name);
    int rc = vigil_leases_create(path, cap, &ls);
    if (rc < 0) {
        fprintf(stderr, "create %s: %s\n", path, vigil_strerror(rc));
        exit(2);
    }
    return ls;
}

/* ---- memory shared with forked children ----------------------------------- */

/* `size` zeroed bytes mapped MAP_SHARED, so what a forked child writes its
 * parent reads (gates, counters, results); exits with status 2 when the
 * mapping fails. Release with munmap(p, size). */
static inline void *vt_shared(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    memset(p, 0, size);
    return p;
}

/* ---- start gates ---------------------------------------------------------- */

/*
 * Busy-waits until *word >= want (an acquire load, so what was written
 * before the word was raised is seen after): spins, and every yield_every
 * spins (a power of two) checks the clock and yields the CPU, so that on 2
 * cores the others, the one who raises the word included, get to run. A
 * pure spin leaves the waiters that are on a CPU within nanoseconds of each
 * other, which is when a race shows; yield_every 1 yields on every spin.
 * False after timeout_ms: a bounded wait.
 */
static inline bool vt_spin_until(_Atomic int *word, int want, unsigned yield_every, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (unsigned spin = 0; atomic_load_explicit(word, memory_order_acquire) < want; spin++) {
        if ((spin & (yield_every - 1)) == yield_every - 1) {
            if (vt_now_ms() > deadline)
                return false;
            sched_yield();
        }
    }
    return true;
}

/*
 * A start gate for racers, round after round (rounds count from 0), in
 * memory the racers share (vt_shared, or a thread's stack). The parent
 * arms it once it has set the round up; racer 0 opens it for the others,
 * so it opens while racers, not the parent, hold the CPUs. Every wait is
 * vt_spin_until with a yield every 1024 spins.
 */
struct vt_gate {
    _Atomic int armed; /* round + 1 once the parent has set the round up */
    _Atomic int go;    /* round + 1 once racer 0 has opened the gate */
};

static inline void vt_gate_arm(struct vt_gate *g, int round)
{
    atomic_store(&g->armed, round + 1);
}

/* Racer `racer` waits at the gate for `round`; false after timeout_ms. */
static inline bool vt_gate_pass(struct vt_gate *g, int racer, int round, unsigned timeout_ms)
{
    if (!vt_spin_until(racer == 0 ? &g->armed : &g->go, round + 1, 1024, timeout_ms))
        return false;
    if (racer == 0)
        atomic_store(&g->go, round + 1);
    return true;
}

struct vt_case {
    const char *name;
    int (*fn)(void);
};

/* Set by a case skipped for want of what the program is there to test
 * (tests/usertest.h: no other user to attack from): the program then
 * exits VT_SKIP even if its other cases passed, so CTest reports it
 * skipped rather than passed. */
static bool vt_point_skipped;
#define VT_CASE(f) { #f, f }

/* Runs every case, prints "N passed, N failed, N skipped" (and a SKIPPED
 * line per case skipped), exits non-zero on any failure; 77, for CTest's
 * SKIP_RETURN_CODE, if all were skipped, or the program's point was
 * (vt_point_skipped). */
/* Every child a test forks dies with the test: a failing case returns
 * before it reaps, and its children, often blocked in an untimed wait,
 * must not outlive the run (PR_SET_PDEATHSIG survives exec, so the tool's
 * tests are covered too). */
static inline void vt_die_with_parent(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* A child the test will stop (SIGSTOP, or raise(SIGSTOP) at a hook) calls
 * this first, to be a process group of its own. The kernel sends SIGHUP
 * and SIGCONT to a group that becomes orphaned while a member is stopped
 * (POSIX job control): the test's own group is orphaned when whatever
 * started it exits first (a shell that ran `make stress &` and returned),
 * and a stopped child then died of SIGHUP mid-case, or went on before the
 * test let it. A group whose one member's parent, the test, is in another
 * group of the session is never orphaned while the test runs. */
static inline void vt_own_pgrp(void)
{
    (void)setpgid(0, 0);
}

static inline int vt_run(const struct vt_case *cases, size_t n)
{
    pthread_atfork(NULL, NULL, vt_die_with_parent);
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = cases[i].fn();
        if (rc == 0) {
            passed++;
        } else if (rc == VT_SKIP) {
            skipped++;
            printf("SKIPPED: %s\n", cases[i].name);
        } else {
            failed++;
            fprintf(stderr, "FAIL: %s\n", cases[i].name);
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed)
        return 1;
    return (skipped && (!passed || vt_point_skipped)) ? VT_SKIP : 0;
}
#define VT_MAIN(...)                                                          \
    int main(void)                                                            \
    {                                                                         \
        static const struct vt_case cases[] = { __VA_ARGS__ };                \
        return vt_run(cases, sizeof(cases) / sizeof(cases[0]));               \
    }

#endif
