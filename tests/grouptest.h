/* SPDX-License-Identifier: MIT */
/*
 * Scaffolding for the group tests: members in child processes that do
 * what a pipe tells them and answer on another, "hosts" (a directory and
 * an agent each, on this machine), and a unique group name per call.
 */
#ifndef VIGIL_GROUPTEST_H
#define VIGIL_GROUPTEST_H

#include <stdarg.h>

#include "etcd_testutil.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <vigil/group.h>

/* A unique group per call and per process. */
static inline const char *gt_group(const char *name)
{
    static char bufs[4][96];
    static unsigned next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "vigil-test/%d/%u/%s", (int)getpid(), next, name);
    return b;
}

static inline vigil_group_member *gt_join(vigil_etcd *e, const char *group, const char *name, uint64_t ttl,
                                          const char *dir)
{
    struct vigil_group_options o = { .dir = dir ? dir : "", .host = NULL };
    vigil_group_member *m = NULL;
    int rc;
    /* A request that outlived the handle's timeout on a loaded machine
     * (etcd's disk shared with others) is tried again, a few times: a
     * join told -ETIMEDOUT or -EAGAIN left nothing behind (issue 25). */
    for (int tries = 0; (rc = vigil_group_join_opts(e, group, name, ttl, &o, &m)) == -ETIMEDOUT || rc == -EAGAIN;)
        if (++tries == 3)
            break;
    if (rc < 0) {
        fprintf(stderr, "join %s as %s: %s\n", group, name, vigil_strerror(rc));
        return NULL;
    }
    return m;
}

static inline int gt_count(vigil_etcd *e, const char *group)
{
    return vigil_group_members(e, group, NULL, 0);
}

/* The lease of the member called name (among the first 16), 0 if none. */
static inline int64_t gt_lease_of(vigil_etcd *e, const char *group, const char *name)
{
    vigil_group_member_info m[16];
    int n = vigil_group_members(e, group, m, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(m[i].name, name) == 0)
            return m[i].lease;
    return 0;
}

/* The next event within timeout_ms, waiting on the watch's fd. */
static inline int gt_next_event(vigil_group_watcher *w, vigil_group_event *ev, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        int rc = vigil_group_watch_next(w, ev);
        if (rc != 0)
            return rc;
        uint64_t now = vt_now_ms();
        if (now >= deadline)
            return 0;
        struct pollfd p = { vigil_group_watch_fd(w), POLLIN, 0 };
        poll(&p, 1, (int)(deadline - now));
    }
}

/* The next event about name (others skipped), within timeout_ms. */
static inline int gt_event_of(vigil_group_watcher *w, const char *name, vigil_group_event *ev, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        uint64_t now = vt_now_ms();
        int rc = gt_next_event(w, ev, now < deadline ? (unsigned)(deadline - now) : 0);
        if (rc != 1 || strcmp(ev->member.name, name) == 0)
            return rc;
    }
}

/* ---- a member in a child process, driven by one-line commands ------------------ */

/*
 * The child connects, joins GROUP as NAME (dir: the agent's records, ""
 * none), writes "joined REV\n", then reads commands, one a line, and
 * answers each with one line:
 *
 *   take            "took UNIT TOKEN" | "rc N"
 *   takewait MS     the same, waiting up to MS
 *   done UNIT TOKEN "rc N"
 *   wait ROUND MS   "rc N"  (barrier_wait)
 *   lost            "lost 0|1"
 *   leaderwait TERM MS [GROUP]  "leader TERM NAME" | "rc N" (vigil_group_leader_wait
 *                   on GROUP, default its own)
 *   leave           "rc N", and exits 0
 *
 * A child whose parent dies dies too (PR_SET_PDEATHSIG).
 */
struct gt_child {
    pid_t    pid;
    int      in, out; /* we write commands to in, read answers from out */
    uint64_t rev;
    pid_t    boxed_pid; /* its pid in a namespace of its own (GT_BOX_NOPROC), else 0 */
    char     line[512];
};

static inline bool gt_readline(int fd, char *buf, size_t cap, unsigned timeout_ms)
{
    size_t n = 0;
    uint64_t deadline = vt_now_ms() + timeout_ms;
    while (n + 1 < cap) {
        uint64_t now = vt_now_ms();
        if (now >= deadline)
            break;
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t k = read(fd, buf + n, 1);
        if (k <= 0)
            break;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return true;
        }
        n++;
    }
    buf[n] = '\0';
    return false;
}

static inline void gt_child_main(const char *url, const char *group, const char *name, uint64_t ttl, const char *dir,
                                 const char *host, int in, int out)
{
    vigil_etcd *e = NULL;
    if (vigil_etcd_connect(url, &e) < 0)
        _exit(3);
    struct vigil_group_options o = { .dir = dir, .host = host };
    vigil_group_member *m = NULL;
    int rc = vigil_group_join_opts(e, group, name, ttl, &o, &m);
    FILE *w = fdopen(out, "w");
    if (rc < 0) {
        fprintf(w, "rc %d\n", rc);
        fflush(w);
        _exit(4);
    }
    vigil_group_member_info self;
    vigil_group_self(m, &self);
    fprintf(w, "joined %llu\n", (unsigned long long)self.revision);
    fflush(w);
    char cmd[512];
    while (gt_readline(in, cmd, sizeof(cmd), 600000)) {
        vigil_group_unit u;
        unsigned long long a = 0, b = 0;
        char unit[128];
        int k;
        if (strcmp(cmd, "take") == 0 || sscanf(cmd, "takewait %llu", &a) == 1) {
            rc = cmd[4] == 'w' ? vigil_group_take_wait(m, a * 1000000ull, &u) : vigil_group_take(m, &u);
            if (rc == 0)
                fprintf(w, "took %s %llu\n", u.name, (unsigned long long)u.token);
            else
                fprintf(w, "rc %d\n", rc);
        } else if (sscanf(cmd, "done %127s %llu", unit, &a) == 2) {
            memset(&u, 0, sizeof(u));
            memcpy(u.name, unit, sizeof(unit));
            u.token = a;
            fprintf(w, "rc %d\n", vigil_group_done(m, &u));
        } else if (sscanf(cmd, "wait %llu %llu", &a, &b) == 2) {
            fprintf(w, "rc %d\n", vigil_group_barrier_wait(m, a, b * 1000000ull));
        } else if (strcmp(cmd, "lost") == 0) {
            fprintf(w, "lost %d\n", vigil_group_lost(m));
        } else if ((k = sscanf(cmd, "leaderwait %llu %llu %127s", &a, &b, unit)) >= 2) {
            vigil_group_member_info l;
            const char *g = k == 3 ? unit : group;
            rc = vigil_group_leader_wait(e, g, a, b * 1000000ull, &l);
            if (rc == 0)
                fprintf(w, "leader %llu %s\n", (unsigned long long)l.revision, l.name);
            else
                fprintf(w, "rc %d\n", rc);
        } else if (strcmp(cmd, "leave") == 0) {
            fprintf(w, "rc %d\n", vigil_group_leave(m));
            fflush(w);
            vigil_etcd_close(e);
            _exit(0);
        } else {
            fprintf(w, "rc -22\n");
        }
        fflush(w);
    }
    _exit(0);
}

/*
 * A member child is this test program run again (the parent has threads
 * by now, keepalives among them, and a forked copy of a threaded process
 * must not start threads of its own: ThreadSanitizer refuses it, and a
 * lock another thread held at the fork would never be released). The
 * child's part comes in the environment and runs from this constructor,
 * before main; its pipes are descriptors GT_CHILD_IN and GT_CHILD_OUT.
 */
enum { GT_CHILD_IN = 100, GT_CHILD_OUT = 101 };

__attribute__((constructor)) static void gt_child_entry(void)
{
    const char *url = getenv("VIGIL_GT_URL");
    if (!url)
        return;
    /* A member without /proc (GT_BOX_NOPROC): hidden under a tmpfs, here
     * after the exec (the sanitizers' runtimes read /proc as they start),
     * before the library looks at itself. */
    const char *noproc = getenv("VIGIL_GT_NOPROC");
    if (noproc && *noproc == '1' && mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        _exit(VT_SKIP);
    const char *host = getenv("VIGIL_GT_HOST");
    vt_own_pgrp(); /* a test may stop it (SIGSTOP): never in a group that gets orphaned (testutil.h) */
    gt_child_main(url, getenv("VIGIL_GT_GROUP"), getenv("VIGIL_GT_NAME"),
                  strtoull(getenv("VIGIL_GT_TTL"), NULL, 10), getenv("VIGIL_GT_DIR"), host && *host ? host : NULL,
                  GT_CHILD_IN, GT_CHILD_OUT);
}

/* Where a member child runs: as the test does; pid 1 of a pid namespace
 * of its own; or in one, without /proc (a tmpfs over it: it cannot read
 * its own namespace or start time) and at a pid this namespace has no
 * process of (gt_free_pid), as in the container of issue 25's review. */
enum { GT_BOX_NONE = 0, GT_BOX_PIDNS = 1, GT_BOX_NOPROC = 2 };

/* The lowest pid above 1 that names no process in our namespace (0 none
 * below 4096): a member there, judged by its pid from here, is dead. */
static inline pid_t gt_free_pid(void)
{
    for (pid_t p = 2; p < 4096; p++)
        if (kill(p, 0) < 0 && errno == ESRCH)
            return p;
    return 0;
}

/* In pid 1 of a new pid namespace: returns in a child of it whose pid is
 * want (the namespace's next pid set to want - 1, else pids used up until
 * it comes); pid 1 waits for that child and exits with its status. Only
 * system calls: the test's parent has threads. */
static inline void gt_become_pid(pid_t want)
{
    char num[16], *p = num + sizeof(num);
    for (unsigned v = (unsigned)want - 1; p == num + sizeof(num) || v; v /= 10)
        *--p = (char)('0' + v % 10);
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, p, (size_t)(num + sizeof(num) - p));
        close(fd);
    }
    for (;;) {
        pid_t k = fork();
        if (k == 0) {
            if (getpid() != want)
                _exit(0);
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                _exit(VT_SKIP);
            return;
        }
        int st;
        if (k < 0 || k > want || waitpid(k, &st, 0) != k)
            _exit(3);
        if (k == want)
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
}

/*
 * The member child in a pid namespace of its own, with its own /proc, as
 * in a container that shares the host's agent directory: the forked
 * child makes the namespaces and forks the namespace's pid 1, which
 * mounts a /proc of its namespace and is killed if the child dies; the
 * child waits for it and exits with its status (VT_SKIP when it may not
 * make them). want 0: pid 1 is the member; else pid 1 forks the member
 * at pid want (gt_become_pid). Only system calls between the fork and
 * the exec: the parent has threads.
 */
static inline _Noreturn void gt_exec_in_pidns(char *const argv[], char *const env[], pid_t want)
{
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        _exit(VT_SKIP);
    pid_t inner = fork();
    if (inner == 0) {
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            _exit(VT_SKIP);
        if (want > 1)
            gt_become_pid(want);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    int st;
    if (inner < 0 || waitpid(inner, &st, 0) != inner)
        _exit(3);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Starts a member child where box says (GT_BOX_*); false if it did not
 * join (its answer in c->line). c->boxed_pid: the member's pid in its
 * namespace (GT_BOX_NOPROC), else 0. */
static inline bool gt_child_start_in(struct gt_child *c, const char *url, const char *group, const char *name,
                                     uint64_t ttl, const char *dir, const char *host, int box)
{
    int a[2], b[2];
    memset(c, 0, sizeof(*c));
    c->boxed_pid = box == GT_BOX_NOPROC ? gt_free_pid() : 0;
    if ((box == GT_BOX_NOPROC && !c->boxed_pid) || pipe2(a, O_CLOEXEC) != 0 || pipe2(b, O_CLOEXEC) != 0)
        return false;
    /* Everything the child needs is made before the fork: between fork
     * and exec it only moves descriptors. */
    extern char **environ;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 8, sizeof(*env));
    char vars[7][600];
    if (!env)
        return false;
    memcpy(env, environ, n * sizeof(*env));
    snprintf(vars[0], sizeof(vars[0]), "VIGIL_GT_URL=%s", url);
    snprintf(vars[1], sizeof(vars[1]), "VIGIL_GT_GROUP=%s", group);
    snprintf(vars[2], sizeof(vars[2]), "VIGIL_GT_NAME=%s", name);
    snprintf(vars[3], sizeof(vars[3]), "VIGIL_GT_TTL=%llu", (unsigned long long)ttl);
    snprintf(vars[4], sizeof(vars[4]), "VIGIL_GT_DIR=%s", dir ? dir : "");
    snprintf(vars[5], sizeof(vars[5]), "VIGIL_GT_HOST=%s", host ? host : "");
    snprintf(vars[6], sizeof(vars[6]), "VIGIL_GT_NOPROC=%d", box == GT_BOX_NOPROC);
    for (int i = 0; i < 7; i++)
        env[n + (size_t)i] = vars[i];
    char *argv[] = { (char *)"gt-child", NULL };
    fflush(NULL);
    c->pid = fork();
    if (c->pid < 0) {
        free(env);
        return false;
    }
    if (c->pid == 0) {
        /* dup2 clears close-on-exec on the copies. */
        if (dup2(a[0], GT_CHILD_IN) < 0 || dup2(b[1], GT_CHILD_OUT) < 0 ||
            fcntl(GT_CHILD_IN, F_SETFD, 0) < 0 || fcntl(GT_CHILD_OUT, F_SETFD, 0) < 0)
            _exit(2);
        if (box != GT_BOX_NONE)
            gt_exec_in_pidns(argv, env, c->boxed_pid);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    free(env);
    close(a[0]);
    close(b[1]);
    c->in = a[1];
    c->out = b[0];
    unsigned long long rev = 0;
    if (!gt_readline(c->out, c->line, sizeof(c->line), 20000) || sscanf(c->line, "joined %llu", &rev) != 1)
        return false;
    c->rev = rev;
    return true;
}

static inline bool gt_child_start(struct gt_child *c, const char *url, const char *group, const char *name,
                                  uint64_t ttl, const char *dir, const char *host)
{
    return gt_child_start_in(c, url, group, name, ttl, dir, host, GT_BOX_NONE);
}

/* Sends a command (no answer read). */
static inline void gt_send(struct gt_child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void gt_send(struct gt_child *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    (void)!write(c->in, buf, (size_t)n);
}

/* The answer to the last command, within timeout_ms: its "rc N" value, or
 * INT32_MIN when none came or it was something else (then in c->line). */
static inline int gt_rc(struct gt_child *c, unsigned timeout_ms)
{
    int rc;
    if (!gt_readline(c->out, c->line, sizeof(c->line), timeout_ms) || sscanf(c->line, "rc %d", &rc) != 1)
        return INT32_MIN;
    return rc;
}

static inline int gt_child_kill(struct gt_child *c)
{
    if (c->pid <= 0)
        return -1;
    kill(c->pid, SIGKILL);
    int st = vt_wait(c->pid, 10000);
    close(c->in);
    close(c->out);
    c->pid = 0;
    return st;
}

static inline int gt_child_leave(struct gt_child *c)
{
    gt_send(c, "leave");
    int rc = gt_rc(c, 20000);
    int st = vt_wait(c->pid, 10000);
    close(c->in);
    close(c->out);
    c->pid = 0;
    return st == 0 ? rc : INT32_MIN;
}

/* ---- a host's agent, in a child process ----------------------------------------- */

/* Runs vigil_agent on dir until killed; each revoke is a line "revoked
 * LEASE RESULT" on the pipe (read with vt_read_until). */
static inline bool gt_agent_start(struct vt_proc *p, const char *url, const char *dir)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return false;
    fflush(NULL);
    p->len = 0;
    p->buf[0] = '\0';
    p->pid = fork();
    if (p->pid < 0)
        return false;
    if (p->pid == 0) {
        close(fds[0]);
        vigil_etcd *e = NULL;
        vigil_agent *a = NULL;
        if (vigil_etcd_connect(url, &e) < 0 || vigil_agent_open(e, dir, &a) < 0)
            _exit(3);
        (void)!write(fds[1], "ready\n", 6);
        for (;;) {
            vigil_agent_event ev[16];
            int n = vigil_agent_run(a, -1, ev, 16);
            for (int i = 0; i < n; i++) {
                char line[128];
                int k = snprintf(line, sizeof(line), "revoked %lld %d\n", (long long)ev[i].lease, ev[i].result);
                (void)!write(fds[1], line, (size_t)k);
            }
            if (n < 0)
                _exit(5);
        }
    }
    close(fds[1]);
    p->fd = fds[0];
    return vt_read_until(p, "ready\n", 20000);
}

#endif
