/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil_failover_wait. A worker killed with SIGKILL is
 * reclaimed at once, before any tick, with its bits, as "exited"; a stale
 * slot is reclaimed as "stale"; a pid reused by a stranger is the owner's
 * death; an owner in another pid namespace, or a process whose main thread
 * exited while another runs, is never called dead; slots registered while
 * the wait sleeps are watched; several watchdogs waiting at once in
 * different processes reclaim every killed worker exactly once; a slot
 * recorded in another pid namespace is never judged by its pid here
 * (issue 17.4), and a wait that ran out of descriptors watches again once
 * it has them (issue 17.7), and a second wait on a handle another wait
 * holds returns at its own timeout, and the wait's descriptor turns
 * readable at an owner's death for an event loop. Kills are decided by the test, waits are
 * bounded, nothing is timed. The cases that need a pid namespace and pid
 * recycling are in test_failover_wait_ns.c.
 */
#include "hbtest.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct worker {
    pid_t    pid;
    uint32_t slot;
};

/* A worker process: registers itself, marks `bits`, says so on a pipe and
 * waits to be killed. */
static int spawn_worker(const char *path, uint64_t bits, struct worker *w)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    w->pid = fork();
    if (w->pid == 0) {
        close(p[0]);
        vigil_hb *hb;
        uint32_t s;
        if (vigil_hb_open(path, 0, &hb) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &s) < 0)
            _exit(3);
        for (unsigned b = 0; b < 64; b++)
            if (bits & (UINT64_C(1) << b))
                vigil_hb_mark_in_flight(hb, s, b);
        if (write(p[1], &s, sizeof(s)) != sizeof(s))
            _exit(4);
        vt_await_kill();
    }
    close(p[1]);
    ssize_t n = read(p[0], &w->slot, sizeof(w->slot));
    close(p[0]);
    return n == sizeof(w->slot) ? 0 : -1;
}

struct waiter {
    vigil_hb     *hb;
    uint64_t      grace, timeout;
    vigil_reclaim out[8];
    uint32_t      why[8];
    int           n;
    _Atomic int   done;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    w->n = vigil_failover_wait_why(w->hb, w->grace, w->timeout, w->out, w->why, 8);
    atomic_store(&w->done, 1);
    return NULL;
}

/* One wait holds the handle (watching a live worker); a second wait on the
 * same handle, with a short timeout, returns 0 at its own deadline while
 * the first still waits (it took the handle's lock untimed and returned
 * only after the first: a 100 ms wait came back after 3 s). */
static int test_second_wait_keeps_its_timeout(void)
{
    const char *path = vt_path("second.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    struct worker w;
    EXPECT(spawn_worker(path, 0x2, &w) == 0, "worker did not start");
    struct waiter first = { .hb = hb, .grace = 1000000, .timeout = 60000000000ull };
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, wait_main, &first) == 0, "thread");
    vigil_failover_watch_info info;
    /* The first wait's look at the table, made holding the handle's lock,
     * which it keeps until the worker dies. */
    EXPECT(VT_WAIT_FOR((vigil_failover_wait_info(hb, &info), info.watched == 1), 10000),
           "the first wait never watched the worker");
    vigil_reclaim out[8];
    for (int i = 0; i < 3; i++) {
        int n = vigil_failover_wait(hb, 1000000, 100000000ull, out, 8);
        EXPECT(n == 0, "second wait %d: expected 0 (timed out), got %d", i, n);
        EXPECT(!atomic_load(&first.done), "second wait %d returned only after the first ended", i);
    }
    kill(w.pid, SIGKILL);
    pthread_join(th, NULL);
    waitpid(w.pid, NULL, 0);
    EXPECT(first.n == 1 && first.out[0].slot == w.slot && first.out[0].in_flight == 0x2,
           "first wait: expected slot %u with 0x2, got n=%d", w.slot, first.n);
    vigil_hb_close(hb);
    return 0;
}

static int test_killed_reclaimed_before_any_tick(void)
{
    const char *path = vt_path("kill.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    struct worker w;
    EXPECT(spawn_worker(path, 0x8001, &w) == 0, "worker did not start");
    struct waiter wt = { .hb = hb, .grace = 1000000, .timeout = 30000000000ull };
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, wait_main, &wt) == 0, "thread");
    kill(w.pid, SIGKILL);
    pthread_join(th, NULL);
    waitpid(w.pid, NULL, 0);
    EXPECT(wt.n == 1, "expected the killed worker's slot, got %d (%s)", wt.n, wt.n < 0 ? vigil_strerror(wt.n) : "");
    EXPECT(wt.out[0].slot == w.slot && wt.out[0].pid == (uint32_t)w.pid && wt.out[0].in_flight == 0x8001,
           "expected {%u, %d, 0x8001}, got {%u, %u, %#llx}", w.slot, (int)w.pid, wt.out[0].slot, wt.out[0].pid,
           (unsigned long long)wt.out[0].in_flight);
    EXPECT(wt.why[0] == VIGIL_RECLAIM_EXITED, "expected reason exited, got %u", wt.why[0]);
    EXPECT(vigil_hb_epoch(hb) == 0, "a tick happened: epoch %llu", (unsigned long long)vigil_hb_epoch(hb));
    vigil_failover_watch_info info;
    EXPECT_RC(vigil_failover_wait_info(hb, &info), 0);
    EXPECT(info.pidfds == 1, "pidfds reported missing on this kernel");
    vigil_reclaim r[4];
    EXPECT_RC(vigil_failover_scan(hb, 0, r, 4), 0); /* exactly once */
    vigil_hb_close(hb);
    return 0;
}

/* Nothing dies, nothing is stale: the wait ends at its timeout with 0. A
 * stale slot is taken as stale. */
static int test_timeout_and_stale(void)
{
    vigil_hb *hb = vt_hb_fresh("stale.hb", 4);
    uint32_t me;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &me), 0);
    vigil_reclaim r[4];
    uint32_t why[4];
    EXPECT_RC(vigil_failover_wait_why(hb, 3, 20000000u, r, why, 4), 0);
    for (int i = 0; i < 4; i++)
        vigil_hb_tick(hb);
    EXPECT_RC(vigil_failover_wait_why(hb, 3, 20000000u, r, why, 4), 1);
    EXPECT(r[0].slot == me && why[0] == VIGIL_RECLAIM_STALE, "expected slot %u stale, got slot %u why %u", me,
           r[0].slot, why[0]);
    EXPECT_RC(vigil_failover_wait(NULL, 3, 0, r, 4), -EINVAL);
    EXPECT_RC(vigil_failover_wait(hb, 3, 0, r, 0), -EINVAL);
    vigil_hb_close(hb);
    return 0;
}

/* A slot whose recorded start time is not its pid's process's: the pid
 * was reused, the owner is dead, reclaimed at once. One recorded in
 * another pid namespace is left to epochs, whatever its pid does here. */
static int test_reused_and_foreign(void)
{
    vigil_hb *hb = vt_hb_fresh("reuse.hb", 4);
    pid_t kid = fork();
    if (kid == 0)
        vt_await_kill();
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)kid, &a), 0);
    atomic_store(&hb->slots[a].start_time, atomic_load(&hb->slots[a].start_time) + 1);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)vt_unused_pid(), &b), 0);
    atomic_store(&hb->slots[b].owner_ns, vigil_self_pidns() + 1);
    vigil_reclaim r[4];
    uint32_t why[4];
    int n = vigil_failover_wait_why(hb, 1000, 30000000000ull, r, why, 4);
    vigil_failover_watch_info info;
    int irc = vigil_failover_wait_info(hb, &info);
    int again = vigil_failover_wait(hb, 1000, 20000000u, r + 1, 3);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    EXPECT(n == 1 && r[0].slot == a && why[0] == VIGIL_RECLAIM_EXITED,
           "expected the reused pid's slot %u reclaimed as exited, got %d entries (slot %u)", a, n, r[0].slot);
    EXPECT(irc == 0 && info.by_epochs == 1, "expected the foreign slot left to epochs, info rc %d by_epochs %u", irc,
           info.by_epochs);
    EXPECT(again == 0, "the foreign slot was reclaimed (%d) before its grace window", again);
    vigil_hb_close(hb);
    return 0;
}

static void *sleeper(void *arg)
{
    int fd = *(int *)arg;
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* A process whose main thread exited while another thread runs is alive:
 * its pidfd is not readable, its slot not reclaimed. */
static int test_main_thread_exited_is_alive(void)
{
    vigil_hb *hb = vt_hb_fresh("zombie.hb", 4);
    int hold[2], up[2];
    EXPECT(pipe(hold) == 0 && pipe(up) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        close(hold[1]);
        pthread_t th;
        if (pthread_create(&th, NULL, sleeper, &hold[0]) != 0)
            _exit(2);
        char c = 1;
        if (write(up[1], &c, 1) != 1)
            _exit(2);
        /* The main thread alone exits, by the raw call: pthread_exit would
         * unwind, dlopen libgcc_s in a forked child and, if that fails
         * (under a sanitizer, short of memory), abort the whole process. */
        syscall(SYS_exit, 0);
        _exit(3);
    }
    close(hold[0]);
    char c;
    EXPECT(read(up[0], &c, 1) == 1, "child never started");
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)kid, &s), 0);
    vigil_reclaim r[4];
    int n = vigil_failover_wait(hb, 1000, 50000000u, r, 4);
    /* A reclaim is a bug only if the child still ran: say which. */
    int early = 0;
    pid_t gone = waitpid(kid, &early, WNOHANG);
    kill(kid, SIGKILL);
    close(hold[1]);
    int after = vigil_failover_wait(hb, 1000, 30000000000ull, r, 4);
    if (gone == 0)
        waitpid(kid, NULL, 0);
    EXPECT(gone == 0, "the child died before it was judged (wait status %#x): the test, not the judge", early);
    EXPECT(n == 0, "a process with a running thread was reclaimed (%d)", n);
    EXPECT(after == 1 && r[0].slot == s, "once every thread is gone it is: got %d", after);
    vigil_hb_close(hb);
    return 0;
}

/* A worker that registers while the wait already sleeps is watched too. */
static int test_registered_while_waiting(void)
{
    const char *path = vt_path("late.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    struct waiter wt = { .hb = hb, .grace = 1000000, .timeout = 30000000000ull };
    pthread_t th;
    EXPECT(pthread_create(&th, NULL, wait_main, &wt) == 0, "thread");
    struct worker w;
    EXPECT(spawn_worker(path, 0x2, &w) == 0, "worker did not start");
    kill(w.pid, SIGKILL);
    pthread_join(th, NULL);
    waitpid(w.pid, NULL, 0);
    EXPECT(wt.n == 1 && wt.out[0].slot == w.slot && wt.why[0] == VIGIL_RECLAIM_EXITED,
           "expected the late worker's slot %u as exited, got %d entries", w.slot, wt.n);
    vigil_hb_close(hb);
    return 0;
}

/* Issue 17.4's mutant: slots recorded in another pid namespace, with a
 * start time, whose pid names nothing here or another process here, are
 * left to epochs: a pid of another namespace is never judged here. */
static int test_foreign_namespace_never_judged(void)
{
    vigil_hb *hb = vt_hb_fresh("foreign.hb", 4);
    pid_t kid = fork();
    if (kid == 0)
        vt_await_kill();
    uint32_t nobody, stranger;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)vt_unused_pid(), &nobody), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)kid, &stranger), 0);
    for (uint32_t s = 0; s < 2; s++) {
        uint32_t slot = s ? stranger : nobody;
        /* As the registrant's own namespace wrote them: its inode, and a
         * start time that is not this pid's process's here. */
        atomic_store(&hb->slots[slot].owner_ns, vigil_self_pidns() + 1);
        atomic_store(&hb->slots[slot].start_time, 424242);
    }
    vigil_reclaim r[4];
    int n = vigil_failover_wait(hb, 1000, 50000000u, r, 4);
    vigil_failover_watch_info info;
    int irc = vigil_failover_wait_info(hb, &info);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    EXPECT(n == 0, "a slot of another pid namespace was reclaimed (%d, slot %u) by a pid that means nothing here", n,
           n > 0 ? r[0].slot : 0);
    EXPECT(irc == 0 && info.by_epochs == 2 && info.watched == 0,
           "expected both foreign slots left to epochs, got by_epochs %u watched %u", info.by_epochs, info.watched);
    vigil_hb_close(hb);
    return 0;
}

/* The lowest descriptor number free now: a soft RLIMIT_NOFILE at it makes
 * the next epoll_create1 or pidfd_open fail with EMFILE. */
static rlim_t lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    return fd < 0 ? 0 : (rlim_t)fd;
}

static int out_of_fds_body(void)
{
    const char *path = vt_path("emfile.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    struct worker w1, w2;
    EXPECT(spawn_worker(path, 0x1, &w1) == 0, "worker 1 did not start");
    struct rlimit old;
    EXPECT(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
    vigil_reclaim r[4];
    uint32_t why[4];
    vigil_failover_watch_info info;

    /* 1. The first wait on the handle cannot make its epoll instance. */
    struct rlimit low = { lowest_free_fd(), old.rlim_max };
    EXPECT(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
    int n = vigil_failover_wait(hb, 1000000, 20000000u, r, 4);
    int irc = vigil_failover_wait_info(hb, &info);
    setrlimit(RLIMIT_NOFILE, &old);
    EXPECT(n == 0, "out of descriptors: %d", n);
    EXPECT(irc == 0 && info.pidfds == 1 && info.retrying == 1 && info.watched == 0,
           "out of descriptors: expected pidfds 1 (the kernel has them), retrying 1, watched 0; got %u %u %u",
           info.pidfds, info.retrying, info.watched);
    /* With descriptors again, a death is seen at once, before any tick. */
    kill(w1.pid, SIGKILL);
    waitpid(w1.pid, NULL, 0);
    n = vigil_failover_wait_why(hb, 1000000, 30000000000ull, r, why, 4);
    EXPECT(n == 1 && r[0].slot == w1.slot && why[0] == VIGIL_RECLAIM_EXITED && vigil_hb_epoch(hb) == 0,
           "after EMFILE on epoll_create1: expected slot %u reclaimed as exited, got %d entries (why %u)", w1.slot, n,
           n > 0 ? why[0] : 0);

    /* 2. The epoll instance exists; the pidfd of a new owner cannot be made. */
    EXPECT(spawn_worker(path, 0x2, &w2) == 0, "worker 2 did not start");
    low.rlim_cur = lowest_free_fd();
    EXPECT(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
    n = vigil_failover_wait(hb, 1000000, 20000000u, r, 4);
    irc = vigil_failover_wait_info(hb, &info);
    setrlimit(RLIMIT_NOFILE, &old);
    EXPECT(n == 0 && irc == 0 && info.retrying == 1, "out of descriptors for a pidfd: n %d retrying %u", n,
           info.retrying);
    kill(w2.pid, SIGKILL);
    waitpid(w2.pid, NULL, 0);
    n = vigil_failover_wait_why(hb, 1000000, 30000000000ull, r, why, 4);
    EXPECT(n == 1 && r[0].slot == w2.slot && why[0] == VIGIL_RECLAIM_EXITED,
           "after EMFILE on pidfd_open: expected slot %u reclaimed as exited, got %d entries", w2.slot, n);
    EXPECT_RC(vigil_failover_wait_info(hb, &info), 0);
    EXPECT(info.retrying == 0, "retrying %u", info.retrying);
    vigil_hb_close(hb);
    return 0;
}

/* Issue 17.7: EMFILE once never turns pidfds off for good. In a child, so
 * that the lowered limit never outlives the case. */
static int test_out_of_fds_retried(void)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0)
        _exit(out_of_fds_body());
    int st = vt_wait(kid, 120000);
    EXPECT(st == 0, "the case failed in its child (status %d; its message is above)", st);
    return 0;
}

/* Three watchdog processes wait on one table while workers are killed:
 * every slot is reclaimed exactly once, by one of them. */
enum { DOGS = 3, KILLED = 6 };

struct tally {
    _Atomic int got[8];      /* reclaims per slot */
    _Atomic int total;
    _Atomic int ready;
};

static _Noreturn void dog(const char *path, struct tally *t)
{
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        _exit(3);
    atomic_fetch_add(&t->ready, 1);
    while (atomic_load(&t->total) < KILLED) {
        vigil_reclaim r[8];
        int n = vigil_failover_wait(hb, 1000000, 50000000u, r, 8);
        for (int i = 0; i < n; i++) {
            if (r[i].slot < 8)
                atomic_fetch_add(&t->got[r[i].slot], 1);
            atomic_fetch_add(&t->total, 1);
        }
    }
    _exit(0);
}

static int test_three_watchdogs_exactly_once(void)
{
    const char *path = vt_path("race.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    struct tally *t = vt_shared(sizeof(*t));
    struct worker w[KILLED];
    for (int i = 0; i < KILLED; i++)
        EXPECT(spawn_worker(path, UINT64_C(1) << i, &w[i]) == 0, "worker %d did not start", i);
    pid_t dogs[DOGS];
    for (int d = 0; d < DOGS; d++) {
        dogs[d] = fork();
        if (dogs[d] == 0)
            dog(path, t);
    }
    EXPECT(VT_WAIT_FOR(atomic_load(&t->ready) == DOGS, 10000), "watchdogs did not start");
    for (int i = 0; i < KILLED; i++)
        kill(w[i].pid, SIGKILL);
    for (int i = 0; i < KILLED; i++)
        waitpid(w[i].pid, NULL, 0);
    bool all = VT_WAIT_FOR(atomic_load(&t->total) >= KILLED, 30000);
    for (int d = 0; d < DOGS; d++)
        EXPECT(vt_wait(dogs[d], 10000) == 0, "watchdog %d did not finish", d);
    EXPECT(all, "only %d of %d killed workers reclaimed", atomic_load(&t->total), KILLED);
    for (int i = 0; i < KILLED; i++)
        EXPECT(atomic_load(&t->got[w[i].slot]) == 1, "slot %u reclaimed %d times", w[i].slot,
               atomic_load(&t->got[w[i].slot]));
    EXPECT(atomic_load(&t->total) == KILLED, "%d reclaims for %d deaths", atomic_load(&t->total), KILLED);
    vigil_hb_close(hb);
    return 0;
}

/* The wait's descriptor, for an event loop: one descriptor for the
 * handle's life, not readable while the watched owner lives, readable
 * once it is killed, and not readable again once a wait has reclaimed
 * its slot. */
static int test_wait_fd_for_a_loop(void)
{
    const char *path = vt_path("fd.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 8);
    EXPECT_RC(vigil_failover_wait_fd(NULL), -EINVAL);
    int fd = vigil_failover_wait_fd(hb);
    EXPECT(fd >= 0, "no descriptor: %d", fd);
    EXPECT(vigil_failover_wait_fd(hb) == fd, "a second call gave another descriptor");
    struct worker w;
    EXPECT(spawn_worker(path, 0x4, &w) == 0, "worker did not start");
    vigil_reclaim out[8];
    EXPECT_RC(vigil_failover_wait(hb, 1000000, 0, out, 8), 0); /* the look that watches it */
    vigil_failover_watch_info info;
    EXPECT_RC(vigil_failover_wait_info(hb, &info), 0);
    EXPECT(info.watched == 1, "expected the worker watched, got %u", info.watched);
    struct pollfd p = { fd, POLLIN, 0 };
    EXPECT(poll(&p, 1, 0) == 0, "readable while the worker lives");
    kill(w.pid, SIGKILL);
    waitpid(w.pid, NULL, 0);
    EXPECT(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN), "not readable after the worker was killed");
    int n = vigil_failover_wait(hb, 1000000, 0, out, 8);
    EXPECT(n == 1 && out[0].slot == w.slot && out[0].in_flight == 0x4, "expected slot %u with 0x4, got n=%d",
           w.slot, n);
    p.revents = 0;
    EXPECT(poll(&p, 1, 0) == 0, "still readable after the reclaim");
    vigil_hb_close(hb);
    return 0;
}

/* A child that waits and is killed with the test. */
static pid_t idle_child(void)
{
    pid_t p = fork();
    if (p == 0) {
        vt_die_with_parent();
        vt_await_kill();
    }
    return p;
}

/* A forked child's waits are its own. The child inherits the handle and
 * with it the parent's epoll instance, which the kernel shares between the
 * two: a pidfd the child added there, tagged with a slot's number, made
 * the parent take the death of the slot's former owner for the death of
 * its live new one, and reclaim it. */
static int test_forked_child_waits_apart(void)
{
    vigil_hb *hb = vt_hb_fresh("forked.hb", 4);
    EXPECT(vigil_failover_wait_fd(hb) >= 0, "no descriptor"); /* the instance, made before the fork */
    pid_t first = idle_child(), second = idle_child();
    uint32_t s1, s2;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)first, &s1), 0);
    int back[2], go[2];
    EXPECT(pipe(back) == 0 && pipe(go) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        vt_die_with_parent();
        vigil_reclaim r[4];
        char c = vigil_failover_wait(hb, 1000000, 0, r, 4) == 0 ? 1 : 2; /* the child watches `first` */
        if (write(back[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(3);
        _exit(0); /* it keeps its watch until told */
    }
    char c = 0;
    EXPECT(read(back[0], &c, 1) == 1 && c == 1, "the child's wait failed (%d)", c);
    /* `first` leaves its slot alive and `second` takes the same slot. */
    EXPECT_RC(vigil_hb_unregister(hb, s1), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)second, &s2), 0);
    EXPECT(s2 == s1, "expected slot %u again, got %u", s1, s2);
    vigil_reclaim r[4];
    EXPECT_RC(vigil_failover_wait(hb, 1000000, 0, r, 4), 0); /* the parent watches `second` */
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    int n = vigil_failover_wait(hb, 1000000, 0, r, 4);
    int still = vigil_hb_probe(hb, s2);
    c = 0;
    EXPECT(write(go[1], &c, 1) == 1, "pipe");
    int status = -1;
    waitpid(kid, &status, 0);
    kill(second, SIGKILL);
    waitpid(second, NULL, 0);
    EXPECT(n == 0, "the death of slot %u's former owner, watched by a forked child, reclaimed its live owner (%d)",
           s1, n);
    EXPECT(still == 1, "the live owner's slot: probe %d", still);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: status %#x", status);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_killed_reclaimed_before_any_tick), VT_CASE(test_timeout_and_stale),
        VT_CASE(test_reused_and_foreign), VT_CASE(test_main_thread_exited_is_alive),
        VT_CASE(test_registered_while_waiting), VT_CASE(test_three_watchdogs_exactly_once),
        VT_CASE(test_foreign_namespace_never_judged), VT_CASE(test_out_of_fds_retried),
        VT_CASE(test_second_wait_keeps_its_timeout), VT_CASE(test_wait_fd_for_a_loop),
        VT_CASE(test_forked_child_waits_apart))
