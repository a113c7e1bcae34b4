/* SPDX-License-Identifier: MIT */
/*
 * Description: CMD under its guardian (tools/guard.h), through `vigil
 * lock`: a set-user-ID CMD run by an unprivileged user dies with a vigil
 * lock killed by SIGKILL (issue 32: the kernel clears PR_SET_PDEATHSIG at
 * a set-user-ID exec, and such a CMD ran on beside the next holder's);
 * CMD's whole process group dies with the tool, not the leader alone;
 * what CMD leaves of its group when it exits is ended (SIGTERM, SIGKILL
 * after --kill-after) before the lease is released; a signal the tool is
 * sent reaches CMD and not the workers CMD forked; the exec's errors as
 * the shells give them (127, 126, a script without #! run by sh); and
 * with a terminal: CMD gets the foreground (it reads the terminal), but
 * not when the tool's output goes down a pipe whose reader reads the
 * terminal; ^C ends CMD and then the tool by SIGINT, ^Z stops the tool's
 * job and fg brings CMD back.
 *
 * Each kill is made by the test when CMD has said it is ready (a line on
 * a pipe), never after a sleep.
 */
#include "tooltest.h"

#include <pty.h>
#include <sys/wait.h>

/* ---- a set-user-ID CMD ------------------------------------------------------ */

/* vigil lock in a process group of its own (as a shell's job is), its
 * stdout on a pipe, running `copy`. */
static int spawn_job(struct vt_proc *p, const char *copy, const char *key)
{
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
        setpgid(0, 0);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(VIGIL_TOOL, VIGIL_TOOL, "lock", "--store", vt_path("suid.leases"), "--ttl", "60s", key, "--", copy,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
    return 0;
}

/* As nobody: vigil lock runs the set-user-ID copy; once it has said it
 * runs (euid 0, ruid nobody), vigil lock gets SIGKILL, first alone, then
 * with its whole process group (a shell's `kill -9 %1`: the guardian,
 * in a group of its own, is not in it); CMD must go every time. */
static int suid_body(void *arg)
{
    const char *copy = arg;
    for (int whole = 0; whole < 2; whole++) {
        struct vt_proc p;
        /* A key per round: the killed holder's lease lapses only at its TTL. */
        if (spawn_job(&p, copy, whole ? "suid-whole" : "suid") != 0)
            return 1;
        int st;
        pid_t cmd;
        bool dead = vt_suid_dies_with(&p, "suid", whole ? -p.pid : p.pid, &st, &cmd);
        if (cmd <= 0)
            return 1;
        EXPECT(st == 128 + SIGKILL, "vigil lock: %d", st);
        EXPECT(dead, "the set-user-ID CMD (pid %d) runs on after vigil lock%s was killed", (int)cmd,
               whole ? " and its process group" : "");
    }
    return 0;
}

static int test_suid_cmd_dies_with_lock(void)
{
    const char *copy = vt_suid_copy();
    if (!copy)
        return VT_SKIP;
    return vt_as_nobody(suid_body, (void *)copy);
}

/* As nobody: vigil lock's CMD leaves a child that made every uid root (as
 * sudo does), which nobody may signal. The lease is kept, renewed past
 * its TTL (3 s: the line comes 5 s after the SIGKILL), and said so, while
 * that child runs; released once it is gone,
 * vigil lock then exiting 1 (issue 32's review: released at once, exit 0). */
static int still_body(void *arg)
{
    const char *copy = arg, *s = vt_path("still.leases"), *flag = vt_path("still.flag"), *err = vt_path("still.err");
    struct vt_proc p;
    if (vt_spawn_logged(&p, err, (const char *const[]){ "lock", "--store", s, "--ttl", "3s", "--kill-after", "100ms",
                                                        "still", "--", copy, "root-child", flag, NULL }) != 0)
        return 1;
    int kid = 0, euid = -1, ruid = -1;
    bool ran = vt_read_until(&p, "root-child pid ", 15000) && vt_read_until(&p, "\n", 15000) &&
               sscanf(strstr(p.buf, "root-child pid ") + 15, "%d euid %d ruid %d", &kid, &euid, &ruid) == 3;
    char buf[4096] = "";
    bool said = ran && vt_file_has(err, "the lease is kept, renewed, until the group is gone", buf, sizeof(buf), 30000);
    bool held = !vt_key_vacant(s, "still");
    int st = -1;
    bool running = waitpid(p.pid, &st, WNOHANG) == 0;
    int fd = open(flag, O_WRONLY | O_CREAT | O_CLOEXEC, 0600); /* the root child's end, whatever happened */
    if (fd >= 0)
        close(fd);
    st = running ? vt_wait(p.pid, 30000) : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    close(p.fd);
    if (!ran)
        vt_slurp(err, buf, sizeof(buf));
    EXPECT(ran && euid == 0 && ruid == 0, "the root child never said it runs as root: '%s' / '%s'", p.buf, buf);
    EXPECT(said && held && running, "while the root child ran: said %d, lease held %d, vigil lock running %d: '%s'",
           said, held, running, buf);
    vt_slurp(err, buf, sizeof(buf));
    EXPECT(st == 1 && strstr(buf, "the lease was kept until the group was gone"),
           "vigil lock exited %d once the child was gone: '%s'", st, buf);
    EXPECT(vt_key_vacant(s, "still"), "the lease was not released");
    return 0;
}

static int test_suid_root_child_waited_out(void)
{
    const char *copy = vt_suid_copy();
    if (!copy)
        return VT_SKIP;
    return vt_as_nobody(still_body, (void *)copy);
}

/* ---- the process group ------------------------------------------------------ */

/* Reads "NAME PID" from the spawned tool's CMD. */
static pid_t said(struct vt_proc *p, const char *name)
{
    char want[64];
    snprintf(want, sizeof(want), "%s ", name);
    if (!vt_read_until(p, want, 15000) || !vt_read_until(p, "\n", 15000))
        return 0;
    const char *at = strstr(p->buf, want);
    int pid = 0;
    return at && sscanf(at + strlen(want), "%d", &pid) == 1 ? pid : 0;
}

/* vigil lock killed with SIGKILL: CMD's whole group goes, the worker it
 * forked as well as CMD itself. */
static int test_group_dies_with_lock(void)
{
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "lock", "--store", vt_path("group.leases"), "--ttl", "60s", "grp", "--", "sh", "-c",
                    "sleep 1000 & echo \"worker $!\"; echo \"leader $$\"; wait") == 0,
           "spawn");
    pid_t worker = said(&p, "worker"), leader = said(&p, "leader");
    EXPECT(worker > 0 && leader > 0, "CMD never said its pids: '%s'", p.buf);
    kill(p.pid, SIGKILL);
    vt_wait(p.pid, 15000);
    close(p.fd);
    bool dead = VT_WAIT_FOR(vt_gone(worker) && vt_gone(leader), 10000);
    if (!dead)
        kill(worker, SIGKILL), kill(leader, SIGKILL);
    EXPECT(dead, "CMD's group runs on after vigil lock was killed: leader %d gone %d, worker %d gone %d", leader,
           vt_gone(leader), worker, vt_gone(worker));
    return 0;
}

/* What CMD put outside its process group (a daemon's double fork into a
 * session of its own, reparented to the guardian) is ended too: when CMD
 * exits (before vigil lock exits with CMD's status) and when vigil lock
 * is killed with SIGKILL (issue 32's review: both outlived it). */
static int test_strays_ended(void)
{
    const char *s = vt_path("strays.leases");
    /* $(...) returns once the stray has said its pid and let go of the
     * pipe: it runs, outside CMD's group, before CMD goes on. */
    static const char *const scripts[2] = {
        "p=$(setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' &); echo \"stray $p\"; exit 3",
        "p=$(setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' &); echo \"stray $p\"; exec sleep 1000",
    };
    for (int killed = 0; killed < 2; killed++) {
        struct vt_proc p;
        EXPECT(VT_SPAWN(&p, "lock", "--store", s, "--kill-after", "200ms", "strays", "--", "sh", "-c",
                        scripts[killed]) == 0,
               "spawn");
        pid_t stray = said(&p, "stray");
        if (killed)
            kill(p.pid, SIGKILL);
        int st = vt_wait(p.pid, 15000);
        close(p.fd);
        bool dead = stray > 0 && VT_WAIT_FOR(vt_gone(stray), killed ? 10000 : 0);
        if (stray > 0 && !dead)
            kill(stray, SIGKILL);
        EXPECT(stray > 0, "case %d: CMD never said its stray: '%s'", killed, p.buf);
        EXPECT(st == (killed ? 128 + SIGKILL : 3) && dead, "case %d: vigil lock exited %d with the stray %d %s",
               killed, st, (int)stray, dead ? "gone" : "still running");
    }
    return 0;
}

/* CMD exits leaving a worker in its group: the worker is ended (SIGTERM;
 * one deaf to it SIGKILL after --kill-after) before vigil lock releases
 * and exits with CMD's status. */
static int test_leftover_ended_at_exit(void)
{
    const char *s = vt_path("left.leases");
    static const char *const scripts[2] = {
        "sleep 1000 & echo \"worker $!\"; exit 3",
        "(trap '' TERM; exec sleep 1000) & echo \"worker $!\"; exit 3",
    };
    for (int i = 0; i < 2; i++) {
        struct vt_proc p;
        EXPECT(VT_SPAWN(&p, "lock", "--store", s, "--kill-after", "200ms", "left", "--", "sh", "-c", scripts[i]) == 0,
               "spawn");
        pid_t worker = said(&p, "worker");
        int st = vt_wait(p.pid, 15000);
        close(p.fd);
        bool dead = worker > 0 && vt_gone(worker);
        if (worker > 0 && !dead)
            kill(worker, SIGKILL);
        EXPECT(worker > 0, "case %d: CMD never said its worker: '%s'", i, p.buf);
        EXPECT(st == 3 && dead, "case %d: vigil lock exited %d (want CMD's 3) with its worker %d %s", i, st,
               (int)worker, dead ? "gone" : "still running");
        EXPECT(vt_key_vacant(s, "left"), "case %d: the lease was not released", i);
    }
    return 0;
}

/* A signal the tool is sent reaches CMD, not the workers CMD forked: a
 * SIGUSR1 meant for a server does not kill its workers. */
static int test_signal_to_leader_only(void)
{
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "lock", "--store", vt_path("usr1.leases"), "usr1", "--", "sh", "-c",
                    "trap 'echo got-usr1' USR1; sleep 1000 & echo \"worker $!\"; "
                    "while ! wait; do :; done") == 0,
           "spawn");
    pid_t worker = said(&p, "worker");
    EXPECT(worker > 0, "CMD never said its worker: '%s'", p.buf);
    VT_WAIT_FOR(vt_sig_blocked(p.pid, SIGUSR1), 10000);
    kill(p.pid, SIGUSR1);
    bool got = vt_read_until(&p, "got-usr1", 15000);
    bool alive = !vt_gone(worker);
    kill(worker, SIGKILL); /* then the leader's wait returns and it exits */
    int st = vt_wait(p.pid, 15000);
    close(p.fd);
    EXPECT(got && alive, "SIGUSR1: CMD saw it %d, its worker alive after it %d", got, alive);
    EXPECT(st == 0, "vigil lock exited %d", st);
    return 0;
}

/* ---- the exec ---------------------------------------------------------------- */

static int test_exec_errors(void)
{
    const char *s = vt_path("exec.leases");
    VT_RUN("lock", "--store", s, "e", "--", "no-such-command-here");
    EXPECT_EXIT(127, "a CMD not found");
    EXPECT(strstr(R.err, "vigil: no-such-command-here: No such file or directory"), "stderr: '%s'", R.err);
    const char *plain = vt_path("plain");
    int fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT(fd >= 0 && write(fd, "echo from-sh\n", 13) == 13, "write %s", plain);
    close(fd);
    VT_RUN("lock", "--store", s, "e", "--", plain);
    EXPECT_EXIT(126, "a CMD not executable");
    EXPECT(strstr(R.err, "Permission denied"), "stderr: '%s'", R.err);
    chmod(plain, 0755);
    VT_RUN("lock", "--store", s, "e", "--", plain);
    EXPECT_EXIT(0, "a script without #!");
    EXPECT(strstr(R.out, "from-sh"), "a script without #! is run by sh, as execvp does: '%s'", R.out);
    return 0;
}

/* ---- the terminal ------------------------------------------------------------ */

/* vigil lock as the session leader of a new pseudo-terminal, in its
 * foreground, running `sh -c script`. */
struct term {
    pid_t pid;
    int   master;
    char  buf[8192];
    size_t len;
};

static int term_start(struct term *t, const char *key, const char *script)
{
    memset(t, 0, sizeof(*t));
    fflush(NULL);
    t->pid = forkpty(&t->master, NULL, NULL, NULL);
    if (t->pid < 0)
        return -1;
    if (t->pid == 0) {
        execl(VIGIL_TOOL, VIGIL_TOOL, "lock", "--store", vt_path("term.leases"), key, "--", "sh", "-c", script,
              (char *)NULL);
        _exit(127);
    }
    return 0;
}

static bool term_read_until(struct term *t, const char *needle, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    while (!strstr(t->buf, needle)) {
        uint64_t now = vt_now_ms();
        if (now >= deadline || t->len + 1 >= sizeof(t->buf))
            return false;
        struct pollfd pfd = { t->master, POLLIN, 0 };
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t k = read(t->master, t->buf + t->len, sizeof(t->buf) - 1 - t->len);
        if (k <= 0)
            return false;
        t->len += (size_t)k;
        t->buf[t->len] = '\0';
    }
    return true;
}

/* CMD has the terminal's foreground: it reads from it (in a background
 * group it would be stopped by SIGTTIN and vigil lock would hang). */
static int test_terminal_foreground(void)
{
    struct term t;
    EXPECT(term_start(&t, "fg", "echo ready; read line; echo \"got $line\"") == 0, "forkpty");
    bool ready = term_read_until(&t, "ready", 15000);
    EXPECT(write(t.master, "hello\n", 6) == 6, "write");
    bool got = term_read_until(&t, "got hello", 15000);
    int st = vt_wait(t.pid, 15000);
    close(t.master);
    EXPECT(ready && got && st == 0, "CMD reading the terminal: ready %d, got %d, exit %d; terminal: '%s'", ready, got,
           st, t.buf);
    return 0;
}

/* vigil lock with its output down a pipe leaves the foreground to its
 * job: the pipe's reader, in vigil lock's process group, reads the
 * terminal (given to CMD, the reader would be stopped by SIGTTIN). */
static int test_terminal_pipeline(void)
{
    struct term t;
    memset(&t, 0, sizeof(t));
    char script[1024];
    snprintf(script, sizeof(script),
             "'%s' lock --store '%s' pipe -- sh -c 'echo from-cmd' | "
             "{ read line; echo \"piped $line\"; echo ready; read x < /dev/tty; echo \"got $x\"; }",
             VIGIL_TOOL, vt_path("term.leases"));
    fflush(NULL);
    t.pid = forkpty(&t.master, NULL, NULL, NULL);
    EXPECT(t.pid >= 0, "forkpty");
    if (t.pid == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    bool ready = term_read_until(&t, "ready", 15000);
    EXPECT(write(t.master, "typed\n", 6) == 6, "write");
    bool got = term_read_until(&t, "got typed", 15000);
    int st = vt_wait(t.pid, 15000);
    close(t.master);
    EXPECT(ready && got && st == 0 && strstr(t.buf, "piped from-cmd"),
           "a pipeline's reader of the terminal: ready %d, got %d, exit %d; terminal: '%s'", ready, got, st, t.buf);
    return 0;
}

/* ^C reaches CMD's group; CMD dies of SIGINT and so does vigil lock, once
 * it has released, so that a script running it stops as it would for
 * CMD. */
static int test_terminal_interrupt(void)
{
    struct term t;
    EXPECT(term_start(&t, "int", "echo ready; exec sleep 1000") == 0, "forkpty");
    bool ready = term_read_until(&t, "ready", 15000);
    EXPECT(write(t.master, "\x03", 1) == 1, "write");
    int st = -1;
    bool done = VT_WAIT_FOR(waitpid(t.pid, &st, WNOHANG) == t.pid, 15000);
    if (!done)
        kill(t.pid, SIGKILL), waitpid(t.pid, &st, 0);
    close(t.master);
    EXPECT(ready && done && WIFSIGNALED(st) && WTERMSIG(st) == SIGINT,
           "^C: ready %d, done %d, vigil lock %s %d; terminal: '%s'", ready, done,
           WIFSIGNALED(st) ? "killed by" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), t.buf);
    EXPECT(vt_key_vacant(vt_path("term.leases"), "int"), "the lease was not released");
    return 0;
}

/* ^Z stops CMD and the tool's job with it; continued (as `fg` does: the
 * shell's SIGCONT to the job's group), CMD has the terminal again. */
static int test_terminal_stop(void)
{
    struct term t;
    EXPECT(term_start(&t, "tstp", "echo ready; read line; echo \"got $line\"") == 0, "forkpty");
    bool ready = term_read_until(&t, "ready", 15000);
    EXPECT(write(t.master, "\x1a", 1) == 1, "write");
    int st = 0;
    bool stopped = VT_WAIT_FOR(waitpid(t.pid, &st, WNOHANG | WUNTRACED) == t.pid && WIFSTOPPED(st), 15000);
    kill(-t.pid, SIGCONT); /* vigil lock leads its session and group */
    EXPECT(write(t.master, "again\n", 6) == 6, "write");
    bool got = term_read_until(&t, "got again", 15000);
    int rc = vt_wait(t.pid, 15000);
    close(t.master);
    EXPECT(ready && stopped && got && rc == 0, "^Z then fg: ready %d, stopped %d, got %d, exit %d; terminal: '%s'",
           ready, stopped, got, rc, t.buf);
    return 0;
}

VT_MAIN(VT_CASE(test_suid_cmd_dies_with_lock), VT_CASE(test_suid_root_child_waited_out), VT_CASE(test_group_dies_with_lock), VT_CASE(test_strays_ended),
        VT_CASE(test_leftover_ended_at_exit), VT_CASE(test_signal_to_leader_only), VT_CASE(test_exec_errors),
        VT_CASE(test_terminal_foreground), VT_CASE(test_terminal_pipeline), VT_CASE(test_terminal_interrupt),
        VT_CASE(test_terminal_stop))
