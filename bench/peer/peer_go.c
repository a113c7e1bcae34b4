/* SPDX-License-Identifier: MIT */
/*
 * bench_peer's clientv3 side: the Go program of clientv3/main.go, a
 * long-lived child driven over a pipe (a command a line, an answer a
 * line), so that no process starts inside a timed sample. Every answer is
 * awaited with a bound.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static pid_t go_pid;
static int go_in = -1, go_out = -1;
static struct buf go_line;
static size_t go_taken; /* bytes of go_line already handed out as lines */

/* Sends a command, reads its answer (bounded): 0 and the text after "ok", or -1. */
static int go_cmd(const char **rest, const char *fmt, ...)
{
    char cmd[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(cmd) - 1 || go_in < 0)
        return -1;
    cmd[len++] = '\n';
    if (write(go_in, cmd, (size_t)len) != len) {
        fprintf(stderr, "bench_peer: clientv3: the peer went away\n");
        return -1;
    }
    if (go_taken) { /* the previous answer's line is consumed: keep what followed it */
        memmove(go_line.p, go_line.p + go_taken, go_line.n - go_taken);
        go_line.n -= go_taken;
        go_taken = 0;
    }
    int64_t deadline = now_ns() + 900 * (int64_t)1000000000;
    char *nl;
    while (!(nl = go_line.n ? memchr(go_line.p, '\n', go_line.n) : NULL)) {
        struct pollfd p = { go_out, POLLIN, 0 };
        int left = (int)((deadline - now_ns()) / 1000000);
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            fprintf(stderr, "bench_peer: clientv3: no answer to %.*s\n", len - 1, cmd);
            return -1;
        }
        char chunk[65536];
        ssize_t got = read(go_out, chunk, sizeof(chunk));
        if (got <= 0 || buf_append(&go_line, chunk, (size_t)got) < 0) {
            fprintf(stderr, "bench_peer: clientv3: the peer went away\n");
            return -1;
        }
    }
    *nl = '\0';
    go_taken = (size_t)(nl - go_line.p) + 1;
    if (strncmp(go_line.p, "ok", 2) != 0) {
        fprintf(stderr, "bench_peer: clientv3: %.*s: %s\n", len - 1, cmd, go_line.p);
        return -1;
    }
    if (rest)
        *rest = go_line.p + 2 + (go_line.p[2] == ' ');
    return 0;
}

static int go_numbers(const char *s, struct samples *out, int64_t *first)
{
    char *end;
    for (bool head = first != NULL;; head = false) {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s)
            return 0;
        if (errno)
            return -1;
        if (head)
            *first = v;
        else if (samples_add(out, v) < 0)
            return -1;
        s = end;
    }
}

static int go_prep(const char *op, int arg)
{
    return go_cmd(NULL, "prep %s %d", op, arg);
}

static int go_run(const char *op, int count, struct samples *out)
{
    const char *r;
    return go_cmd(&r, "run %s %d", op, count) < 0 ? -1 : go_numbers(r, out, NULL);
}

static int go_tput(const char *op, int ms, int64_t *elapsed, struct samples *out)
{
    const char *r;
    return go_cmd(&r, "tput %s %d", op, ms) < 0 ? -1 : go_numbers(r, out, elapsed);
}

static int go_hold(void)
{
    return go_cmd(NULL, "hold");
}

static int go_release(int64_t *ns)
{
    const char *r;
    char *end;
    if (go_cmd(&r, "release") < 0)
        return -1;
    *ns = strtoll(r, &end, 10);
    return end == r ? -1 : 0;
}

static void go_drop(const char *op)
{
    go_cmd(NULL, "drop %s", op);
}

static double go_cpu(void)
{
    return peer_proc_cpu_s(go_pid);
}

const struct side peer_go = {
    .name = "clientv3",
    .prep = go_prep,
    .run = go_run,
    .tput = go_tput,
    .hold = go_hold,
    .release = go_release,
    .drop = go_drop,
    .cpu_s = go_cpu,
};

/* Starts the Go side, asks its version: 0 and *version, or -1. */
int peer_go_start(const char *program, const char *eps, const char **version)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t parent = getpid();
    go_pid = fork();
    if (go_pid < 0)
        return -1;
    if (go_pid == 0) {
        /* Gone with this process, whatever it is doing then (a recipe's
         * wait without a deadline): never an orphan holding sessions. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        peer_unblock_signals();
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl(program, program, eps, (char *)NULL);
        fprintf(stderr, "bench_peer: %s: %s\n", program, strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    go_in = in[1];
    go_out = out[0];
    return go_cmd(version, "version");
}

void peer_go_stop(void)
{
    if (go_pid <= 0)
        return;
    if (go_in >= 0 && write(go_in, "quit\n", 5) == 5) {
        struct pollfd p = { go_out, POLLIN, 0 };
        poll(&p, 1, 10000); /* it answers once every session is closed */
    }
    close(go_in);
    go_in = -1;
    int st;
    for (int i = 0; i < 100 && waitpid(go_pid, &st, WNOHANG) == 0; i++)
        nap_ms(50);
    if (waitpid(go_pid, &st, WNOHANG) == 0) {
        kill(go_pid, SIGKILL);
        waitpid(go_pid, &st, 0);
    }
    go_pid = 0;
}
