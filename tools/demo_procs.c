/* SPDX-License-Identifier: MIT */
/*
 * vigil demo: the parent's processes. Reaping the workers, bounded waits,
 * and the second watchdog: `vigil failover --json` run in a child (the
 * command itself, through its entry point, its stdout on a pipe), whose
 * reclaims the parent reads line by line to check that of the two
 * watchdogs racing over the dead peer's slot exactly one took it.
 */
#define _GNU_SOURCE
#include "demo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void demo_fail(struct demo *d, const char *fmt, ...)
{
    if (d->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof(d->why), fmt, ap);
    va_end(ap);
    d->failed = true;
    printf("  ! %s\n", d->why);
}

/* Status as vt_wait gives it: exit code, or 128 + signal. */
static int decode(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void demo_reap(struct demo *d)
{
    for (unsigned i = 0; i < d->n; i++) {
        int st;
        if (d->reaped[i] || waitpid(d->pid[i], &st, WNOHANG) != d->pid[i])
            continue;
        d->reaped[i] = true;
        d->status[i] = decode(st);
        if ((int)i != d->victim && d->stage < STAGE_STOPPING)
            demo_fail(d, "worker %u (pid %d) ended early, status %d", i, (int)d->pid[i],
                      d->status[i]);
    }
}

bool demo_all_reaped(const struct demo *d)
{
    for (unsigned i = 0; i < d->n; i++)
        if (!d->reaped[i])
            return false;
    return true;
}

/* Waits at most ms for pid; SIGKILL past that. Returns the status as decode(). */
int demo_wait_bounded(pid_t pid, unsigned ms)
{
    uint64_t end = tool_now_ms() + ms;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return decode(st);
        if (r < 0)
            return -1;
        if (tool_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
    }
}

/* ---- the second watchdog: `vigil failover --json` in a child -------------- */

int demo_start_watchdog(struct demo *d)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -errno;
    }
    if (pid == 0) {
        /* If the demo dies, so does its watchdog: SIGTERM ends it cleanly. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        dup2(fds[1], STDOUT_FILENO);
        char grace[16], interval[16];
        snprintf(grace, sizeof(grace), "%u", DEMO_GRACE);
        snprintf(interval, sizeof(interval), "%u", DEMO_TICK_MS / 8);
        char *argv[] = { "failover", d->paths.hb, "--grace", grace, "--interval", interval,
                         "--json", NULL };
        int rc = tool_cmd_failover.run(&tool_cmd_failover, 7, argv);
        fflush(stdout);
        _exit(rc);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    d->wd_pid = pid;
    d->wd_fd = fds[0];
    return 0;
}

/* Reads whatever the watchdog child has printed: one JSON object a line. */
void demo_read_watchdog(struct demo *d)
{
    if (d->wd_fd < 0)
        return;
    for (;;) {
        ssize_t k = read(d->wd_fd, d->wd_buf + d->wd_len, sizeof(d->wd_buf) - 1 - d->wd_len);
        if (k <= 0)
            break;
        d->wd_len += (size_t)k;
        d->wd_buf[d->wd_len] = '\0';
        char *nl;
        while ((nl = strchr(d->wd_buf, '\n'))) {
            *nl = '\0';
            unsigned slot, pid;
            unsigned long long bits;
            char reason[16];
            if (sscanf(d->wd_buf, "{\"slot\": %u, \"pid\": %u, \"in_flight\": \"0x%llx\", \"reason\": \"%15[a-z]\"",
                       &slot, &pid, &bits, reason) == 4) {
                vigil_reclaim r = { slot, pid, bits };
                demo_add_reclaim(d, &r, "the `vigil failover` child", vigil_hb_epoch(d->hb));
                d->rec[d->nrec - 1].exited = strcmp(reason, "exited") == 0;
            } else {
                demo_fail(d, "the watchdog child printed '%s'", d->wd_buf);
            }
            size_t used = (size_t)(nl - d->wd_buf) + 1;
            memmove(d->wd_buf, nl + 1, d->wd_len - used + 1);
            d->wd_len -= used;
        }
        if (d->wd_len == sizeof(d->wd_buf) - 1)
            d->wd_len = 0; /* a line that long is garbage */
    }
}

void demo_stop_watchdog(struct demo *d)
{
    if (d->wd_pid <= 0)
        return;
    kill(d->wd_pid, SIGTERM);
    d->wd_status = demo_wait_bounded(d->wd_pid, 5000);
    d->wd_pid = 0;
    demo_read_watchdog(d);
    close(d->wd_fd);
    d->wd_fd = -1;
}

