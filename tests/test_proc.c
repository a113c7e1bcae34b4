/* SPDX-License-Identifier: MIT */
/*
 * Description: process identity (src/proc.c): /proc/<pid>/stat read right
 * whatever the command name holds; this process's cached pid, start time
 * and namespace, filled once by racing threads and never carried into a
 * child, whether made by fork() or by a raw fork system call; and the
 * judge: a process whose main thread alone exited while another
 * thread runs is alive (its /proc state is already Z), one whose threads
 * have all exited is dead, for vigil_pid_judge, vigil_hb_probe, the
 * probe-assisted failover scan and the lock-holder judge alike.
 */
#include "testutil.h"

#include "heartbeat_internal.h"
#include "proc_internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Field 3 and field 22 of /proc/<pid>/stat, read here independently of
 * the library: from the last ')', with sscanf. */
static int stat_fields(pid_t pid, char *state, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    /* state, then fields 4..21 (18 of them), then 22 */
    return sscanf(p + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                  state, start) == 2 ? 0 : -1;
}

/* ---- the cache, first filled by racing threads (for TSan) ---------------- */

struct filler {
    _Atomic int *go;
    uint32_t pid;
    uint64_t start, ns;
};

static void *filler_main(void *arg)
{
    struct filler *f = arg;
    while (!atomic_load(f->go))
        ;
    f->pid = vigil_self_pid();
    f->start = vigil_self_start_time();
    f->ns = vigil_self_pidns();
    return NULL;
}

/* Runs first, in a child, so the threads meet an empty cache. */
static int test_cache_filled_by_threads(void)
{
    pid_t child = fork();
    if (child == 0) {
        enum { N = 4 };
        struct filler f[N];
        pthread_t th[N];
        _Atomic int go = 0;
        for (int i = 0; i < N; i++) {
            f[i] = (struct filler){ .go = &go };
            if (pthread_create(&th[i], NULL, filler_main, &f[i]) != 0)
                _exit(2);
        }
        atomic_store(&go, 1);
        for (int i = 0; i < N; i++)
            pthread_join(th[i], NULL);
        char state;
        unsigned long long start;
        if (stat_fields(getpid(), &state, &start) < 0)
            _exit(3);
        for (int i = 0; i < N; i++)
            if (f[i].pid != (uint32_t)getpid() || f[i].start != start || f[i].ns != f[0].ns || f[i].ns == 0)
                _exit(1);
        _exit(0);
    }
    int st = vt_wait(child, 10000);
    EXPECT(st != 3, "no /proc/<pid>/stat to compare with");
    EXPECT(st == 0, "threads filling the cache at once: expected the child's own pid, start time and "
                    "namespace in every thread, child exited %d", st);
    return 0;
}

/* ---- /proc/<pid>/stat ------------------------------------------------------ */

static int test_stat_self(void)
{
    char state = 0, want_state;
    uint64_t start = 0;
    unsigned long long want;
    EXPECT(stat_fields(getpid(), &want_state, &want) == 0, "cannot read /proc/self/stat here");
    EXPECT_RC(vigil_proc_stat((uint32_t)getpid(), &state, &start), 0);
    EXPECT(state == 'R', "own state: expected R, got %c", state);
    EXPECT(start == want, "own start time: expected %llu, got %llu", want, (unsigned long long)start);
    EXPECT(vigil_self_start_time() == want, "cached start time %llu, /proc says %llu",
           (unsigned long long)vigil_self_start_time(), want);
    uint64_t t = 0;
    EXPECT_RC(vigil_proc_start_time((uint32_t)getpid(), &t), 0);
    EXPECT(t == want, "vigil_proc_start_time: expected %llu, got %llu", want, (unsigned long long)t);
    EXPECT(vigil_self_pid() == (uint32_t)getpid(), "cached pid %u, getpid %d", vigil_self_pid(), (int)getpid());
    return 0;
}

static int test_stat_bad_pids(void)
{
    char state = '?';
    uint64_t start = 12345;
    EXPECT_RC(vigil_proc_stat(0, &state, &start), -EINVAL);
    EXPECT_RC(vigil_proc_stat(0x80000000u, &state, &start), -EINVAL);
    EXPECT_RC(vigil_proc_stat(UINT32_MAX, &state, &start), -EINVAL);
    EXPECT_RC(vigil_proc_start_time(0, &start), -EINVAL);
    pid_t gone = vt_unused_pid();
    EXPECT(gone > 0, "no unused pid found");
    EXPECT_RC(vigil_proc_stat((uint32_t)gone, &state, &start), -ENOENT);
    EXPECT(state == '?' && start == 12345, "outputs written on failure: %c %llu", state,
           (unsigned long long)start);
    return 0;
}

/* A command name with spaces and parentheses: fields count from the last
 * ')', so the start time is still field 22. */
static int test_stat_hostile_comm(void)
{
    int ready[2], hold[2];
    EXPECT(pipe(ready) == 0 && pipe(hold) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        close(ready[0]);
        close(hold[1]);
        prctl(PR_SET_NAME, "a) b ) (c 1 2", 0, 0, 0);
        char c = 1;
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        (void)!read(hold[0], &c, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char c;
    EXPECT(read(ready[0], &c, 1) == 1, "child did not start");
    char want_state, state = 0;
    unsigned long long want;
    uint64_t start = 0;
    /* Once the child sleeps in its read it stays asleep ('S') until we
     * close the pipe, so both readings see the same state. */
    int got;
    (void)VT_WAIT_FOR((got = stat_fields(child, &want_state, &want)) != 0 || want_state == 'S', 5000);
    int rc = vigil_proc_stat((uint32_t)child, &state, &start);
    close(hold[1]);
    close(ready[0]);
    EXPECT(vt_wait(child, 5000) == 0, "child failed");
    EXPECT(got == 0, "cannot read the child's stat");
    EXPECT_RC(rc, 0);
    EXPECT(start == want && state == want_state, "comm with ')': expected %c %llu, got %c %llu", want_state,
           want, state, (unsigned long long)start);
    return 0;
}

/* ---- the cache across fork ------------------------------------------------ */

static int child_sees_itself(void)
{
    char state;
    unsigned long long start;
    if (stat_fields((pid_t)syscall(SYS_getpid), &state, &start) < 0)
        return 3;
    bool ok = vigil_self_pid() == (uint32_t)syscall(SYS_getpid) && vigil_self_start_time() == start &&
              vigil_self_pidns() != 0;
    return ok ? 0 : 1;
}

static int test_cache_after_fork(void)
{
    uint32_t pid = vigil_self_pid();
    uint64_t start = vigil_self_start_time(), ns = vigil_self_pidns();
    pid_t child = fork();
    if (child == 0)
        _exit(child_sees_itself());
    EXPECT(vt_wait(child, 5000) == 0, "a fork() child saw its parent's cached identity");
    EXPECT(vigil_self_pid() == pid && vigil_self_start_time() == start && vigil_self_pidns() == ns,
           "the parent's cache changed");
    return 0;
}

/* A child made by the fork system call itself runs no atfork handlers:
 * only the kernel's MADV_WIPEONFORK keeps it from its parent's cache.
 * Skipped where the kernel lacks the flag (vigil then documents this case
 * as unsupported), and under sanitizers, whose runtimes must see forks. */
static int test_cache_after_raw_fork(void)
{
#if defined(VT_SANITIZED) || !defined(MADV_WIPEONFORK)
    return VT_SKIP;
#else
    long pg = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(p != MAP_FAILED, "mmap");
    bool wipe = madvise(p, (size_t)pg, MADV_WIPEONFORK) == 0;
    munmap(p, (size_t)pg);
    if (!wipe)
        return VT_SKIP;
    (void)vigil_self_pid();
    (void)vigil_self_start_time();
    (void)vigil_self_pidns();
    /* clone with only SIGCHLD is fork, on every architecture (some have no
     * SYS_fork); the flags come first in every clone calling convention. */
    long child = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (child == 0)
        syscall(SYS_exit_group, child_sees_itself());
    EXPECT(child > 0, "clone: %s", strerror(errno));
    EXPECT(vt_wait((pid_t)child, 5000) == 0, "a raw-fork child saw its parent's cached identity");
    return 0;
#endif
}

/* ---- the judge -------------------------------------------------------------- */

static void *sleeper_main(void *arg)
{
    int fd = *(int *)arg;
    char c;
    (void)!read(fd, &c, 1); /* until the parent closes its end, or dies */
    return NULL;
}

static bool is_zombie(pid_t pid)
{
    char state;
    unsigned long long start;
    return stat_fields(pid, &state, &start) == 0 && state == 'Z';
}

/* The main thread exits with the exit of its main thread alone while another thread runs: /proc
 * shows the process as a zombie, yet it is alive. Then it is killed, and
 * unreaped it is dead. */
static int test_main_thread_exited(void)
{
    int hold[2];
    EXPECT(pipe(hold) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        close(hold[1]);
        pthread_t th;
        if (pthread_create(&th, NULL, sleeper_main, &hold[0]) != 0)
            _exit(2);
        /* The main thread alone exits, by the raw call (pthread_exit would
         * dlopen libgcc_s in a forked child, which may fail and abort). */
        syscall(SYS_exit, 0);
        _exit(3);
    }
    close(hold[0]);
    bool zombie = VT_WAIT_FOR(is_zombie(child), 5000);
    uint64_t start = 0;
    int srt = vigil_proc_start_time((uint32_t)child, &start);
    int judged = vigil_pid_judge((uint32_t)child, start, UINT64_MAX, 0, 0);
    bool holder = vigil_holder_dead((uint32_t)child, start & 0x7fffffffu, 0x7fffffffu, 0, 0);

    vigil_hb *hb = NULL;
    uint32_t slot = 0, other = 0;
    int crc = vigil_hb_create(vt_path("mainexit.hb"), 4, &hb);
    int rrc = crc < 0 ? crc : vigil_hb_register(hb, (uint32_t)child, &slot);
    int probed = rrc < 0 ? rrc : vigil_hb_probe(hb, slot);
    vigil_reclaim out[4];
    int scanned = rrc < 0 ? rrc : vigil_failover_scan_probe(hb, 1000, out, 4);

    /* Now every thread goes: a zombie with no thread left. */
    kill(child, SIGKILL);
    close(hold[1]);
    siginfo_t si;
    int wrc = waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT);
    int judged_dead = vigil_pid_judge((uint32_t)child, start, UINT64_MAX, 0, 0);
    bool holder_dead = vigil_holder_dead((uint32_t)child, start & 0x7fffffffu, 0x7fffffffu, 0, 0);
    int probed_dead = rrc < 0 ? rrc : vigil_hb_probe(hb, slot);
    int rrc2 = rrc < 0 ? rrc : vigil_hb_register(hb, (uint32_t)getpid(), &other);
    int scanned_dead = rrc2 < 0 ? rrc2 : vigil_failover_scan_probe(hb, 1000, out, 4);
    waitpid(child, NULL, 0);
    if (hb)
        vigil_hb_close(hb);

    EXPECT(zombie, "the child's main thread exited, yet /proc never showed state Z");
    EXPECT_RC(srt, 0);
    EXPECT_RC(crc, 0);
    EXPECT_RC(rrc, 0);
    EXPECT(judged == 1, "main thread gone, another running: expected alive (1), got %d", judged);
    EXPECT(!holder, "main thread gone, another running: a lock holder judged dead");
    EXPECT(probed == 1, "main thread gone, another running: probe expected 1, got %d", probed);
    EXPECT(scanned == 0, "main thread gone, another running: the probe scan reclaimed %d slot(s)", scanned);
    EXPECT(wrc == 0, "waitid: %s", strerror(errno));
    EXPECT(judged_dead == 0, "every thread exited, unreaped: expected dead (0), got %d", judged_dead);
    EXPECT(holder_dead, "every thread exited, unreaped: a lock holder judged alive");
    EXPECT(probed_dead == 0, "every thread exited, unreaped: probe expected 0, got %d", probed_dead);
    EXPECT_RC(rrc2, 0);
    EXPECT(scanned_dead == 1 && out[0].slot == slot && out[0].pid == (uint32_t)child,
           "every thread exited: expected the child's slot %u reclaimed, got %d entries", slot, scanned_dead);
    return 0;
}

/* A lock word naming this process: a thread of ours (same start tag) is
 * alive with no look at /proc; another start tag was our pid's previous
 * owner, dead. Another namespace's word is never judged dead from here. */
static int test_holder_self(void)
{
    uint32_t me = vigil_self_pid();
    uint64_t start = vigil_self_start_time(), ns = vigil_self_pidns();
    EXPECT(start != 0, "no start time for this process");
    EXPECT(!vigil_holder_dead(me, start, UINT64_MAX, 0, 0), "own word judged dead");
    EXPECT(!vigil_holder_dead(me, start & 0xffff, 0xffff, ns & 0x3ffffff, 0x3ffffff), "own tags judged dead");
    EXPECT(vigil_holder_dead(me, start + 1, UINT64_MAX, 0, 0), "own pid, other start: judged alive");
    EXPECT(vigil_holder_dead(0, start, UINT64_MAX, 0, 0), "pid 0: judged alive");
    EXPECT(vigil_holder_dead(0x80000000u, 0, 0, 0, 0), "pid past INT_MAX: judged alive");
    if (ns) {
        EXPECT(!vigil_holder_dead(me, start + 1, UINT64_MAX, ns + 1, UINT64_MAX),
               "a word from another namespace judged dead");
        EXPECT_RC(vigil_pid_judge(me, start, UINT64_MAX, ns + 1, UINT64_MAX), -EREMOTE);
    }
    EXPECT_RC(vigil_pid_judge(me, start, UINT64_MAX, ns, UINT64_MAX), 1);
    EXPECT_RC(vigil_pid_judge(me, start + 1, UINT64_MAX, 0, 0), 0);
    return 0;
}

VT_MAIN(VT_CASE(test_cache_filled_by_threads), VT_CASE(test_stat_self), VT_CASE(test_stat_bad_pids),
        VT_CASE(test_stat_hostile_comm), VT_CASE(test_cache_after_fork), VT_CASE(test_cache_after_raw_fork),
        VT_CASE(test_main_thread_exited), VT_CASE(test_holder_self))
