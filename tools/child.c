/* SPDX-License-Identifier: MIT */
/*
 * CMD under a holder (child.h): started under its guardian, waited for,
 * ended on a loss.
 */
#define _GNU_SOURCE
#include "child.h"
#include "fds.h"
#include "vigil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

void tool_child_note_fds(void)
{
    tool_fds_note();
}

char **tool_env_with(const char *const *add, const char *const *drop, bool (*skip)(const char *entry))
{
    extern char **environ;
    size_t n = 0, na = 0;
    while (environ[n])
        n++;
    while (add[na])
        na++;
    char **env = calloc(n + na + 1, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < na; i++)
        env[k++] = (char *)add[i];
    for (size_t i = 0; i < n; i++) {
        bool dropped = skip && skip(environ[i]);
        for (const char *const *d = drop; *d && !dropped; d++) {
            size_t l = strlen(*d);
            dropped = strncmp(environ[i], *d, l) == 0 && environ[i][l] == '=';
        }
        if (!dropped)
            env[k++] = environ[i];
    }
    return env;
}

/* SIGCONT too: it continues us whatever the mask, and the signalfd tells
 * the guardian (a job continued by the shell continues CMD). */
static const int taken[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGCHLD, SIGCONT };

int tool_child_block(struct tool_child *c)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
        sigaddset(&set, taken[i]);
    c->tty = -1;
    sigprocmask(SIG_BLOCK, &set, &c->old);
    c->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (c->sfd < 0) {
        int err = -errno;
        sigprocmask(SIG_SETMASK, &c->old, NULL);
        return err;
    }
    return 0;
}

int tool_child_start(struct tool_child *c, char **argv, char **env)
{
    extern char **environ;
    int rc = tool_exec_prepare(&c->x, argv, env ? env : environ);
    if (rc < 0)
        return rc;
    c->tty = tool_guard_tty();
    struct tool_guard_opts o = {
        .mask = &c->old,
        .terminal = true,
        .orphan_signal = c->orphan_signal ? c->orphan_signal : SIGTERM,
        .orphan_kill_ms = c->orphan_kill_ms,
        /* Nothing of CMD runs on after it without what is held. */
        .end_at_exit = true,
        .exit_kill_ms = c->orphan_kill_ms,
        .may_exec = c->may_exec,
        .may_exec_arg = c->may_exec_arg,
        .refuse_status = c->refuse_status,
        .stop_before_exec = c->stop_before_exec,
        .held = c->held,
        .held_arg = c->held_arg,
        .wait_out_still = c->still_hold != NULL,
        .lost_kill_ms = c->orphan_kill_ms,
    };
    if ((rc = tool_guard_start(&c->g, &c->x, &o, c->tty)) < 0)
        return rc;
    c->started = true;
    return 0;
}

/* Reads the guardian's reports; 1 once it is done. */
static int follow(struct tool_child *c)
{
    int done = tool_guard_read(&c->g);
    if (c->g.r.flags & GUARD_STARTED)
        c->pid = c->g.r.cmd;
    return done;
}

/* After the guardian's end, reaped: CMD's status, or -errno. */
static int finish(struct tool_child *c, int *status)
{
    const struct tool_guard_report *r = &c->g.r;
    if ((r->flags & GUARD_STARTED) && !(r->flags & (GUARD_GONE | GUARD_STILL))) {
        /* The guardian died (killed on its own) before the group's end:
         * end it from here, while it is there to be signalled. */
        if (kill(-r->cmd, 0) == 0)
            kill(-r->cmd, SIGKILL);
        return -ECHILD;
    }
    if (r->flags & GUARD_NOFORK)
        return -r->err;
    if (!(r->flags & GUARD_EXITED))
        return -ECHILD;
    *status = tool_guard_status(r);
    return 0;
}

/* Passes on the signals read, but SIGCHLD and one we raised ourselves
 * (the SIGPIPE of a write to a closed stderr); returns SIGINT or SIGTERM
 * if one came, for the caller. The terminal's own reach CMD's group
 * directly when it has the terminal. */
int tool_child_signals(struct tool_child *c)
{
    int stop = 0;
    struct signalfd_siginfo si;
    while (read(c->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD || (pid_t)si.ssi_pid == getpid())
            continue;
        if (c->started)
            tool_guard_signal(&c->g, sig);
        if (sig == SIGINT || sig == SIGTERM)
            stop = sig;
    }
    return stop;
}

int tool_child_wait(struct tool_child *c, int lost_fd, uint64_t kill_after_ms, int *status, bool *lost)
{
    *lost = false;
    bool still_said = false;
    while (!follow(c)) {
        if ((c->g.r.flags & GUARD_STILL) && c->still_hold && !still_said) {
            /* The guardian waits the group out: the hold is kept (the
             * caller renews it meanwhile), and said so. */
            fflush(stdout);
            fprintf(stderr, "vigil: %s: CMD's process group %d could not be ended (%s: a member this user may not "
                            "signal, as under sudo): %s is kept, renewed, until the group is gone\n",
                    tool_e(c->still_who), (int)c->pid, strerror(c->g.r.err), c->still_hold);
            still_said = true;
        }
        struct pollfd pf[3] = {
            { c->sfd, POLLIN, 0 }, { *lost ? -1 : lost_fd, POLLIN, 0 }, { c->g.rep, POLLIN, 0 },
        };
        if (poll(pf, 3, -1) < 0 && errno != EINTR)
            return -errno;
        if (!*lost && (pf[1].revents & POLLIN)) {
            *lost = true;
            tool_guard_end(&c->g, kill_after_ms);
        }
        (void)tool_child_signals(c);
    }
    tool_guard_reap(&c->g);
    if (c->g.r.flags & GUARD_LOST)
        *lost = true; /* the guardian saw it first (we were stopped) */
    return finish(c, status);
}

pid_t tool_child_pid(struct tool_child *c)
{
    while (!follow(c) && !(c->g.r.flags & GUARD_STARTED)) {
        struct pollfd pf = { c->g.rep, POLLIN, 0 };
        if (poll(&pf, 1, -1) < 0 && errno != EINTR)
            break;
    }
    return (c->g.r.flags & GUARD_STARTED) ? c->g.r.cmd : 0;
}

int tool_child_done(struct tool_child *c, int *status)
{
    if (!c->started || !follow(c))
        return 0;
    tool_guard_reap(&c->g);
    *status = -1;
    int rc = finish(c, status);
    tool_exec_free(&c->x);
    c->started = false;
    if (c->tty >= 0)
        close(c->tty);
    c->tty = -1;
    c->pid = 0;
    return rc < 0 ? rc : 1;
}

void tool_child_end(struct tool_child *c)
{
    if (c->started && c->g.pid > 0) {
        tool_guard_end(&c->g, 0); /* SIGKILL: we are leaving */
        tool_guard_reap(&c->g);
    }
    if (c->started)
        tool_exec_free(&c->x);
    c->started = false;
    if (c->tty >= 0)
        close(c->tty);
    c->tty = -1;
    if (c->sfd >= 0)
        close(c->sfd);
    c->sfd = -1;
    sigprocmask(SIG_SETMASK, &c->old, NULL);
}

int tool_child_exit(const struct tool_child *c, int rc)
{
    const struct tool_guard_report *r = &c->g.r;
    if (rc != 128 + SIGINT || !c->g.interactive || !(r->flags & GUARD_EXITED) || !WIFSIGNALED(r->status) ||
        WTERMSIG(r->status) != SIGINT)
        return rc;
    fflush(NULL);
    signal(SIGINT, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGINT);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(SIGINT);
    return rc; /* not reached: SIGINT's default action ends us */
}
