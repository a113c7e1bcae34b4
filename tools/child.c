/* SPDX-License-Identifier: MIT */
/*
 * CMD under a holder (child.h): started, waited for, ended on a loss.
 */
#define _GNU_SOURCE
#include "child.h"
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
#include <time.h>
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

int tool_child_block(struct tool_child *c)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
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
    pid_t parent = getpid();
    fflush(NULL);
    c->pid = fork();
    if (c->pid < 0)
        return -errno;
    if (c->pid == 0) {
        /* CMD without us is no member: it is told to end if we die. */
        int sig = c->death_sig ? c->death_sig : SIGTERM;
        prctl(PR_SET_PDEATHSIG, sig);
        if (getppid() != parent)
            _exit(128 + sig);
        sigprocmask(SIG_SETMASK, &c->old, NULL);
        tool_fds_cloexec_unnoted(3);
        extern char **environ;
        execvpe(argv[0], argv, env ? env : environ);
        int err = errno;
        fprintf(stderr, "vigil: %s: %s\n", tool_e(argv[0]), strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    return 0;
}

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int tool_child_wait(struct tool_child *c, int lost_fd, uint64_t kill_after_ms, int *status, bool *lost)
{
    uint64_t kill_at = 0; /* when SIGKILL is due, after a loss */
    bool killed = false;
    *lost = false;
    for (;;) {
        int st;
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return -errno;
        uint64_t now = ms_now();
        if (*lost && !killed && now >= kill_at) {
            kill(c->pid, SIGKILL);
            killed = true;
        }
        struct pollfd pf[2] = { { c->sfd, POLLIN, 0 }, { *lost ? -1 : lost_fd, POLLIN, 0 } };
        int timeout = *lost && !killed ? (int)(kill_at - now > INT_MAX ? INT_MAX : kill_at - now) : -1;
        if (poll(pf, 2, timeout) < 0 && errno != EINTR)
            return -errno;
        if (!*lost && (pf[1].revents & POLLIN)) {
            *lost = true;
            kill(c->pid, SIGTERM);
            kill_at = ms_now() + kill_after_ms;
        }
        struct signalfd_siginfo si;
        while (read(c->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            /* Passed on, unless the terminal sent it: CMD, in our process
             * group, had its own. */
            if (si.ssi_signo != SIGCHLD && si.ssi_code != SI_KERNEL)
                kill(c->pid, (int)si.ssi_signo);
    }
}

void tool_child_end(struct tool_child *c)
{
    if (c->sfd >= 0)
        close(c->sfd);
    c->sfd = -1;
    sigprocmask(SIG_SETMASK, &c->old, NULL);
}
