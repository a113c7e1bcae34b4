/* SPDX-License-Identifier: MIT */
/*
 * CMD under a guardian (guard.h tells the design): the exec made ready
 * before any fork, the guardian, CMD's child, and the tool's side.
 */
#define _GNU_SOURCE
#include "guard.h"
#include "fds.h"
#include "vigil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---- the exec, made before the fork --------------------------------------- */

void tool_exec_free(struct tool_exec *x)
{
    if (x->cand)
        for (char **c = x->cand; *c; c++)
            free(*c);
    free(x->cand);
    free(x->sh_argv);
    x->cand = x->sh_argv = NULL;
}

int tool_exec_prepare(struct tool_exec *x, char *const *argv, char *const *env)
{
    memset(x, 0, sizeof(*x));
    x->argv = argv;
    x->env = env;
    const char *name = argv[0];
    snprintf(x->err_prefix, sizeof(x->err_prefix), "vigil: %.120s: ", tool_e(name));
    size_t argc = 0;
    while (argv[argc])
        argc++;
    if (!(x->sh_argv = calloc(argc + 2, sizeof(*x->sh_argv))))
        return -ENOMEM;
    x->sh_argv[0] = "sh";
    for (size_t i = 1; i < argc; i++)
        x->sh_argv[i + 1] = argv[i];
    /* A name with a slash is the path itself; one without is looked up in
     * PATH, an empty element meaning the current directory, as execvp. */
    const char *path = strchr(name, '/') ? "" : getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";
    size_t n = 1;
    for (const char *p = path; *p; p++)
        n += *p == ':';
    if (!(x->cand = calloc(n + 1, sizeof(*x->cand)))) {
        tool_exec_free(x);
        return -ENOMEM;
    }
    if (strchr(name, '/')) {
        x->cand[0] = strdup(name);
    } else {
        size_t k = 0;
        for (const char *p = path;; p++) {
            const char *end = strchrnul(p, ':');
            size_t len = (size_t)(end - p);
            if (asprintf(&x->cand[k], "%.*s%s%s", (int)len, p, len ? "/" : "", name) < 0) {
                x->cand[k] = NULL;
                tool_exec_free(x);
                return -ENOMEM;
            }
            k++;
            if (!*end)
                break;
            p = end;
        }
    }
    if (!x->cand[0]) {
        tool_exec_free(x);
        return -ENOMEM;
    }
    return 0;
}

/* ---- async-signal-safe pieces ---------------------------------------------- */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* strerror(3) may translate, and so lock and allocate: the few an exec
 * gives, by hand. */
static const char *exec_error(int err)
{
    switch (err) {
    case ENOENT: return "No such file or directory";
    case EACCES: return "Permission denied";
    case ENOEXEC: return "Exec format error";
    case ENOTDIR: return "Not a directory";
    case ELOOP: return "Too many levels of symbolic links";
    case ENAMETOOLONG: return "File name too long";
    case E2BIG: return "Argument list too long";
    case ENOMEM: return "Cannot allocate memory";
    case ETXTBSY: return "Text file busy";
    case EISDIR: return "Is a directory";
    case EPERM: return "Operation not permitted";
    default: return "cannot be executed";
    }
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n, len -= (size_t)n;
    }
}

/* ---- CMD's child ----------------------------------------------------------- */

struct guardian {
    const struct tool_exec      *x;
    const struct tool_guard_opts *o;
    int      tty, ctl, rep, sfd;
    pid_t    self, tool_pgrp, cmd;
    bool     interactive, orphan, reaped;
    bool     group_left; /* the group is gone (its strays may not be): its id may be another's now */
    uint64_t t0, kill_at, give_up_at;
    uint64_t strays_kill_at; /* SIGKILL to the strays then; 0 before their SIGTERM */
    struct tool_guard_report r;
};

static _Noreturn void cmd_child(struct guardian *s)
{
    const struct tool_guard_opts *o = s->o;
    const struct tool_exec *x = s->x;
    setpgid(0, 0);
    /* Every signal is blocked here (the guardian's mask): SIGTTOU does
     * not stop a background group's tcsetpgrp. */
    if (s->interactive)
        tcsetpgrp(s->tty, getpid());
    /* Set first, then checked: a guardian killed before the prctl left us
     * to another parent. Cleared by a set-user-ID exec; the group signal
     * is what holds then. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != s->self)
        _exit(126);
    if (o->stop_before_exec)
        raise(SIGSTOP);
    if (o->may_exec && !o->may_exec(o->may_exec_arg))
        _exit(o->refuse_status);
    if (o->quiet_stdio) {
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in >= 0)
            dup2(in, 0);
        dup2(2, 1);
    }
    /* The fds the tool was given (tool_fds_note), no other. */
    tool_fds_cloexec_unnoted(3);
    sigprocmask(SIG_SETMASK, o->mask, NULL);
    /* execvp's search: EACCES remembered while looking further, the
     * errors of a missing candidate passed over, any other one final. */
    int err = ENOENT;
    bool eacces = false;
    for (char *const *c = x->cand; *c; c++) {
        execve(*c, x->argv, x->env);
        err = errno;
        if (err == ENOEXEC) {
            x->sh_argv[1] = *c;
            execve("/bin/sh", x->sh_argv, x->env);
            err = errno;
            break;
        }
        if (err == EACCES) {
            eacces = true;
            continue;
        }
        if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV && err != ETIMEDOUT)
            break;
    }
    if (eacces && (err == ENOENT || err == ENOTDIR))
        err = EACCES;
    char msg[256];
    const char *why = exec_error(err);
    size_t a = strnlen(x->err_prefix, sizeof(x->err_prefix)), b = strlen(why);
    if (a + b + 1 <= sizeof(msg)) {
        memcpy(msg, x->err_prefix, a);
        memcpy(msg + a, why, b);
        msg[a + b] = '\n';
        write_all(2, msg, a + b + 1);
    }
    _exit(err == ENOENT ? 127 : 126);
}

/* ---- the guardian ----------------------------------------------------------- */

static void report(struct guardian *s)
{
    /* One write, under PIPE_BUF: the tool reads whole reports. A tool
     * that is gone makes it EPIPE (SIGPIPE is blocked here). */
    write_all(s->rep, &s->r, sizeof(s->r));
}

/* The group still has a member: kill(2) finds one (EPERM: one we may not
 * signal, there all the same). */
static bool group_there(const struct guardian *s, int *err)
{
    if (kill(-s->cmd, 0) == 0)
        return true;
    *err = errno;
    return errno == EPERM;
}

/*
 * Sends sig (SIGTERM or SIGKILL) to the group, for reason `why` (a GUARD_* cause). SIGTERM
 * schedules SIGKILL kill_ms later (0: now), once; a SIGTERM asked for
 * again only brings that SIGKILL nearer. SIGCONT follows a SIGTERM, as
 * systemd sends it: a stopped member acts on its SIGTERM only once
 * continued. Nothing is sent once the group is gone: its id may be
 * another's then.
 */
static void group_signal(struct guardian *s, int sig, uint32_t why, uint64_t kill_ms)
{
    if ((s->r.flags & GUARD_GONE) || s->group_left)
        return;
    uint64_t now = mono_ms();
    if (sig == SIGTERM && kill_ms == 0)
        sig = SIGKILL; /* no grace: at once */
    if (sig == SIGTERM) {
        if (s->r.flags & GUARD_KILL)
            return;
        if (!(s->r.flags & GUARD_TERM)) {
            kill(-s->cmd, SIGTERM);
            kill(-s->cmd, SIGCONT);
            s->r.flags |= GUARD_TERM | why;
            s->r.term_ms = now - s->t0;
        }
        uint64_t at = now + kill_ms;
        if (!s->kill_at || at < s->kill_at)
            s->kill_at = at;
        report(s);
    } else if (sig == SIGKILL) {
        kill(-s->cmd, SIGKILL);
        if (!(s->r.flags & GUARD_KILL)) {
            s->r.flags |= GUARD_KILL | why;
            s->r.kill_ms = now - s->t0;
            s->give_up_at = now + GUARD_GIVE_UP_MS;
        }
        s->kill_at = 0;
        report(s);
    }
}

/* A signal the tool was sent, passed on to CMD itself, as a shell's
 * `exec` would have it: a SIGUSR1 or SIGHUP meant for a server is not
 * for every worker it forked (whose default action may be to die). The
 * leader's pid is safe to signal until we reap it; after that the group
 * is being ended anyway. */
static void pass_on(const struct guardian *s, int sig)
{
    if (!s->reaped && sig > 0 && sig < NSIG)
        kill(s->cmd, sig);
}

/* The terminal stopped CMD (^Z, SIGTTIN): the tool's group stops as a
 * job does (SIGSTOP, not SIGTSTP: a tool that ignores SIGTSTP would run
 * on), with the terminal given back to it; the shell continues it (fg or
 * bg), and the tool tells us (job_continued). */
static void job_stopped(struct guardian *s)
{
    s->r.flags |= GUARD_STOPPED;
    if (s->orphan)
        return;
    tcsetpgrp(s->tty, s->tool_pgrp);
    kill(-s->tool_pgrp, SIGSTOP);
}

/* The tool was continued: CMD too, in the foreground again if the shell
 * gave it to the tool's group (fg). */
static void job_continued(struct guardian *s)
{
    if (!s->interactive || s->reaped)
        return;
    if (tcgetpgrp(s->tty) == s->tool_pgrp)
        tcsetpgrp(s->tty, s->cmd);
    kill(-s->cmd, SIGCONT);
}

/* Reaps our children: CMD's leader and the orphans we inherit as a
 * subreaper. */
static void reap(struct guardian *s)
{
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG | (s->interactive ? WUNTRACED : 0));
        if (r <= 0)
            return;
        if (r != s->cmd)
            continue;
        if (WIFSTOPPED(st)) {
            job_stopped(s);
            continue;
        }
        s->reaped = true;
        s->r.flags |= GUARD_EXITED;
        s->r.status = st;
        report(s);
    }
}

/*
 * THE STRAYS: what CMD put outside its process group (setsid, setpgid;
 * a daemon's double fork) is still CMD's. We are a subreaper, so once
 * the group is gone every such descendant is below us: our child (its
 * parents in the group are dead), or a child of one. Each of our
 * children gets SIGTERM (and SIGCONT), then SIGKILL `grace` ms later (at
 * once when the group was killed); a killed one's children become ours
 * and are sent the same. Our children's pids are safe to signal: unreaped,
 * none is handed out again. True once we have none (waitpid: ECHILD).
 * /proc/thread-self/children, read with open and read: async-signal-safe.
 */
static bool strays_gone(struct guardian *s, uint64_t now, uint64_t grace)
{
    reap(s);
    char buf[4096];
    int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return true; /* none; or a kernel without the file (CONFIG_PROC_CHILDREN): left, as vigil(1) says */
    buf[n] = '\0';
    bool first = !(s->r.flags & GUARD_STRAYS);
    if (first) {
        s->r.flags |= GUARD_STRAYS;
        s->strays_kill_at = now + ((s->r.flags & GUARD_KILL) ? 0 : grace);
        if (!s->give_up_at)
            s->give_up_at = s->strays_kill_at + GUARD_GIVE_UP_MS;
        report(s);
    }
    int sig = now >= s->strays_kill_at ? SIGKILL : SIGTERM;
    for (char *p = buf; *p;) {
        pid_t pid = 0;
        while (*p >= '0' && *p <= '9')
            pid = pid * 10 + (*p++ - '0');
        while (*p && (*p < '0' || *p > '9'))
            p++;
        if (pid <= 0 || (sig == SIGTERM && !first))
            continue;
        kill(pid, sig);
        if (sig == SIGTERM)
            kill(pid, SIGCONT);
    }
    return false;
}

/* One command from the tool: {op, arg}. */
struct guard_cmd {
    uint32_t op; /* 'S' a signal to pass on, 'E' end the group (arg: kill_ms), 'C' the tool was continued */
    uint32_t arg;
};

static void read_commands(struct guardian *s)
{
    struct guard_cmd c[8];
    ssize_t n = read(s->ctl, c, sizeof(c));
    if (n < 0)
        return; /* EINTR, EAGAIN: poll again */
    if (n == 0) {
        /* The tool is gone, by whatever signal: end the group. */
        s->orphan = true;
        group_signal(s, s->o->orphan_signal, GUARD_ORPHANED, s->o->orphan_kill_ms);
        return;
    }
    for (ssize_t i = 0; i < n / (ssize_t)sizeof(c[0]); i++) {
        if (c[i].op == 'S')
            pass_on(s, (int)c[i].arg);
        else if (c[i].op == 'E')
            group_signal(s, SIGTERM, GUARD_TOLD, c[i].arg);
        else if (c[i].op == 'C')
            job_continued(s);
    }
}

static int poll_timeout(const struct guardian *s, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    if (s->o->timeout_ms && !(s->r.flags & (GUARD_TERM | GUARD_KILL)))
        next = s->t0 + s->o->timeout_ms;
    if (s->kill_at && s->kill_at < next)
        next = s->kill_at;
    if (s->give_up_at && s->give_up_at < next)
        next = s->give_up_at;
    bool watching = s->o->held && !(s->r.flags & (GUARD_TERM | GUARD_KILL));
    if ((s->reaped || s->sfd < 0 || watching) && now + GUARD_TICK_MS < next)
        next = now + GUARD_TICK_MS;
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

static _Noreturn void guardian_main(struct guardian *s)
{
    const struct tool_guard_opts *o = s->o;
    s->self = getpid();
    /* A process group of our own: a signal to the tool's group (a shell's
     * `kill -9 %1`, the terminal's) reaches the tool and not us, and we
     * end CMD's group when the tool dies of it. */
    setpgid(0, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    s->sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK); /* < 0: the tick looks instead */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The tool may have died since the fork: then nothing is started. */
    struct pollfd alive = { s->ctl, POLLIN, 0 };
    if (poll(&alive, 1, 0) == 1 && (alive.revents & (POLLHUP | POLLERR))) {
        s->r.flags |= GUARD_REFUSED | GUARD_ORPHANED;
        report(s);
        _exit(0);
    }
    if (o->before && !o->before(o->hook_arg)) {
        s->r.flags |= GUARD_REFUSED;
        report(s);
        _exit(0);
    }
    s->t0 = mono_ms();
    s->cmd = fork();
    if (s->cmd == 0)
        cmd_child(s);
    if (s->cmd < 0) {
        s->r.flags |= GUARD_NOFORK;
        s->r.err = errno;
        if (o->after)
            o->after(o->hook_arg, &s->r);
        report(s);
        _exit(0);
    }
    setpgid(s->cmd, s->cmd); /* as the child does: whichever runs first */
    s->r.flags |= GUARD_STARTED;
    s->r.cmd = s->cmd;
    report(s);
    for (;;) {
        reap(s);
        uint64_t now = mono_ms();
        int err = 0;
        bool group_gone = s->group_left || (s->reaped && !group_there(s, &err));
        s->group_left = group_gone;
        /* The group gone, what it put outside itself goes too. */
        if (group_gone && strays_gone(s, now, o->exit_kill_ms ? o->exit_kill_ms : o->kill_ms)) {
            s->r.flags |= GUARD_GONE;
            break;
        }
        if (s->reaped && !group_gone && !(s->r.flags & GUARD_LINGERED)) {
            s->r.flags |= GUARD_LINGERED;
            if (o->end_at_exit)
                group_signal(s, SIGTERM, GUARD_LINGERED, o->exit_kill_ms);
            else
                report(s);
        }
        if ((s->give_up_at && now >= s->give_up_at) || (s->orphan && (s->r.flags & GUARD_STILL))) {
            /* SIGKILL sent and the group still there: members that are
             * not ours to signal (EPERM), or a leader that cannot be.
             * Said; then, for a tool whose hold must outlast every member
             * (vigil lock, group join), waited for until gone. */
            s->r.flags |= GUARD_STILL;
            s->r.err = err ? err : EPERM;
            if (!o->wait_out_still || s->orphan)
                break; /* (the tool gone, what it held lapses: nothing to keep) */
            s->give_up_at = 0;
            report(s);
        }
        if (o->timeout_ms && !(s->r.flags & (GUARD_TERM | GUARD_KILL)) && now >= s->t0 + o->timeout_ms)
            group_signal(s, SIGTERM, GUARD_TIMEOUT, o->kill_ms);
        /* The hold lost while the tool cannot act on it (stopped): CMD
         * does not run on beside the next holder's. */
        if (o->held && !(s->r.flags & (GUARD_TERM | GUARD_KILL)) && !o->held(o->held_arg))
            group_signal(s, SIGTERM, GUARD_LOST, o->lost_kill_ms);
        if (s->kill_at && now >= s->kill_at)
            group_signal(s, SIGKILL, 0, 0);
        struct pollfd pf[2] = { { s->orphan ? -1 : s->ctl, POLLIN, 0 }, { s->sfd, POLLIN, 0 } };
        if (poll(pf, 2, poll_timeout(s, now)) <= 0)
            continue;
        if (pf[0].revents)
            read_commands(s);
        if (pf[1].revents) {
            struct signalfd_siginfo si;
            while (read(s->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
        }
    }
    /* Gone (or given up): the terminal back to the tool's group, unless
     * the tool died (its shell takes the terminal back itself). */
    if (s->interactive && !s->orphan && tcgetpgrp(s->tty) == s->cmd)
        tcsetpgrp(s->tty, s->tool_pgrp);
    if (o->after)
        o->after(o->hook_arg, &s->r);
    report(s);
    _exit(0);
}

/* ---- the tool's side ---------------------------------------------------------- */

int tool_guard_tty(void)
{
    /* Standard input and output on the terminal: CMD is the one that
     * talks to it. A tool whose output goes down a pipe (`vigil lock K --
     * make | less`) leaves the foreground to its job, where the pipe's
     * reader may want the terminal. */
    if (!isatty(0) || !isatty(1))
        return -1;
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    pid_t fg = tcgetpgrp(fd);
    if (fg < 0 || fg != getpgrp()) {
        close(fd);
        return -1;
    }
    return fd;
}

int tool_guard_start(struct tool_guard *g, const struct tool_exec *x, const struct tool_guard_opts *o, int tty)
{
    memset(g, 0, sizeof(*g));
    g->ctl = g->rep = -1;
    int ctl[2], rep[2];
    if (pipe2(ctl, O_CLOEXEC) != 0)
        return -errno;
    if (pipe2(rep, O_CLOEXEC) != 0) {
        int err = -errno;
        close(ctl[0]), close(ctl[1]);
        return err;
    }
    struct guardian s = {
        .x = x, .o = o, .tty = tty, .ctl = ctl[0], .rep = rep[1], .sfd = -1,
        .tool_pgrp = getpgrp(), .interactive = o->terminal && tty >= 0,
    };
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only the tool holds the command pipe's write end: its death is
         * the EOF. */
        close(ctl[1]);
        close(rep[0]);
        guardian_main(&s);
    }
    int err = errno;
    close(ctl[0]);
    close(rep[1]);
    if (pid < 0) {
        close(ctl[1]), close(rep[0]);
        return -err;
    }
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    g->pid = pid;
    g->ctl = ctl[1];
    g->rep = rep[0];
    g->interactive = s.interactive;
    return 0;
}

static int send_cmd(struct tool_guard *g, uint32_t op, uint32_t arg)
{
    if (g->ctl < 0)
        return -EPIPE;
    struct guard_cmd c = { op, arg };
    ssize_t n;
    do
        n = write(g->ctl, &c, sizeof(c));
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(c) ? 0 : n < 0 ? -errno : -EIO;
}

int tool_guard_signal(struct tool_guard *g, int sig)
{
    return send_cmd(g, sig == SIGCONT ? 'C' : 'S', (uint32_t)sig);
}

int tool_guard_end(struct tool_guard *g, uint64_t kill_ms)
{
    return send_cmd(g, 'E', kill_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)kill_ms);
}

int tool_guard_read(struct tool_guard *g)
{
    if (g->rep < 0)
        return 1;
    for (;;) {
        struct tool_guard_report r;
        ssize_t n = read(g->rep, &r, sizeof(r));
        if (n == (ssize_t)sizeof(r)) {
            g->r = r;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        /* EOF (or a torn read, which a pipe never gives for a write of
         * under PIPE_BUF): the guardian has finished or died. */
        close(g->rep);
        g->rep = -1;
        return 1;
    }
}

int tool_guard_reap(struct tool_guard *g)
{
    if (g->pid <= 0)
        return 0;
    while (tool_guard_read(g) == 0) {
        struct pollfd pf = { g->rep, POLLIN, 0 };
        poll(&pf, 1, -1);
    }
    int st, rc = 0;
    pid_t r;
    do
        r = waitpid(g->pid, &st, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        rc = -errno;
    g->pid = 0;
    if (g->ctl >= 0)
        close(g->ctl);
    g->ctl = -1;
    return rc;
}

int tool_guard_status(const struct tool_guard_report *r)
{
    if (!(r->flags & GUARD_EXITED))
        return -1;
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}
