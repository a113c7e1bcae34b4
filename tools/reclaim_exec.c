/* SPDX-License-Identifier: MIT */
/*
 * vigil failover --exec CMD: the reclaimed work handed back. CMD runs once
 * per reclaim, through /bin/sh -c, with the reclaim in its environment:
 *
 *   VIGIL_RECLAIM_FILE       the heartbeat table
 *   VIGIL_RECLAIM_SLOT       the slot vacated
 *   VIGIL_RECLAIM_PID        its owner's pid
 *   VIGIL_RECLAIM_UNITS      the in-flight bits as a comma list ("1,40"; empty: none)
 *   VIGIL_RECLAIM_IN_FLIGHT  the same bitmap as 0x.. hex
 *   VIGIL_RECLAIM_REASON     "exited" (its process died) or "stale" (past grace)
 *   VIGIL_RECLAIM_EPOCH      the table's epoch at the reclaim
 *
 * The watchdog never waits on CMD: reclaims are queued and their CMDs
 * run one at a time, in reclaim order, in a process group of their own,
 * while the watchdog goes on scanning. A CMD that fails is logged on
 * stderr with the units it was given (so an operator can hand them back
 * by hand), and the next one runs. A CMD still running after the timeout
 * gets SIGTERM, its whole process group SIGKILL HOOK_KILL_MS later: a
 * hung CMD delays the CMDs queued behind it by at most that, and never
 * the reclaims themselves. CMD's stdout goes to the watchdog's stderr, so
 * that --json's stream stays JSON.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* From SIGTERM to SIGKILL for a CMD past its timeout. */
#define HOOK_KILL_MS 5000u

struct hook_job {
    vigil_reclaim r;
    uint32_t      why;
    uint64_t      epoch;
};

struct tool_hooks {
    const char      *cmd, *file;
    uint64_t         timeout_ms;
    struct hook_job *q;             /* a ring of queued jobs */
    size_t           head, len, cap;
    pid_t            pid;           /* the running CMD, 0 none */
    struct hook_job  cur;
    uint64_t         started_ms, term_ms;
    bool             termed;
    unsigned         failed;
};

int tool_hooks_new(const char *cmd, const char *file, uint64_t timeout_ms, struct tool_hooks **out)
{
    struct tool_hooks *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->cmd = cmd, h->file = file, h->timeout_ms = timeout_ms;
    *out = h;
    return 0;
}

void tool_hooks_free(struct tool_hooks *h)
{
    if (h)
        free(h->q);
    free(h);
}

unsigned tool_hooks_failed(const struct tool_hooks *h)
{
    return h ? h->failed : 0;
}

bool tool_hooks_busy(const struct tool_hooks *h)
{
    return h && (h->pid > 0 || h->len > 0);
}

static void units(uint64_t bits, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned b = 0; b < 64; b++)
        if (bits >> b & 1)
            n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%u", n ? "," : "", b);
}

/* "slot 3 (pid 1240, exited, units 1,40)": what a log line must carry for
 * an operator to hand the units back by hand. */
static void describe(const struct hook_job *j, char *buf, size_t len)
{
    char u[256];
    units(j->r.in_flight, u, sizeof(u));
    snprintf(buf, len, "slot %u (pid %u, %s, units %s)", j->r.slot, j->r.pid,
             j->why == VIGIL_RECLAIM_EXITED ? "exited" : "stale", u[0] ? u : "none");
}

__attribute__((format(printf, 3, 4))) static void log_job(const struct tool_hooks *h, const struct hook_job *j,
                                                          const char *fmt, ...)
{
    char what[320];
    describe(j, what, sizeof(what));
    fflush(stdout);
    fprintf(stderr, "vigil: %s: --exec for %s: ", tool_e(h->file), what);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int tool_hooks_add(struct tool_hooks *h, const vigil_reclaim *r, uint32_t why, uint64_t epoch)
{
    struct hook_job j = { *r, why, epoch };
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct hook_job *q = malloc(cap * sizeof(*q));
        if (!q) {
            h->failed++;
            log_job(h, &j, "not run: %s", strerror(ENOMEM));
            return -ENOMEM;
        }
        for (size_t i = 0; i < h->len; i++)
            q[i] = h->q[(h->head + i) % h->cap];
        free(h->q);
        h->q = q, h->cap = cap, h->head = 0;
    }
    h->q[(h->head + h->len++) % h->cap] = j;
    return 0;
}

/* One NAME=VALUE string, or NULL when out of memory. */
__attribute__((format(printf, 1, 2))) static char *var(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

/* CMD's environment: ours less any VIGIL_RECLAIM_*, then the reclaim's.
 * Made before fork: the child only execs. NULL when out of memory. */
static char **job_env(const struct tool_hooks *h, const struct hook_job *j)
{
    extern char **environ;
    enum { NVARS = 7 };
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + NVARS + 1, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VIGIL_RECLAIM_", 14) != 0)
            env[k++] = environ[i];
    char u[256];
    units(j->r.in_flight, u, sizeof(u));
    char *mine[NVARS] = {
        var("VIGIL_RECLAIM_FILE=%s", h->file),
        var("VIGIL_RECLAIM_SLOT=%u", j->r.slot),
        var("VIGIL_RECLAIM_PID=%u", j->r.pid),
        var("VIGIL_RECLAIM_UNITS=%s", u),
        var("VIGIL_RECLAIM_IN_FLIGHT=0x%" PRIx64, j->r.in_flight),
        var("VIGIL_RECLAIM_REASON=%s", j->why == VIGIL_RECLAIM_EXITED ? "exited" : "stale"),
        var("VIGIL_RECLAIM_EPOCH=%" PRIu64, j->epoch),
    };
    bool ok = true;
    for (int i = 0; i < NVARS; i++)
        ok &= mine[i] != NULL;
    for (int i = 0; i < NVARS; i++) {
        if (ok)
            env[k++] = mine[i];
        else
            free(mine[i]);
    }
    if (!ok) {
        free(env);
        return NULL;
    }
    return env;
}

static void free_env(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        if (strncmp(*e, "VIGIL_RECLAIM_", 14) == 0)
            free(*e);
    free(env);
}

/* Starts the next queued CMD, if none runs. */
static void start_next(struct tool_hooks *h)
{
    while (h->pid == 0 && h->len > 0) {
        h->cur = h->q[h->head];
        h->head = (h->head + 1) % h->cap;
        h->len--;
        char **env = job_env(h, &h->cur);
        if (!env) {
            h->failed++;
            log_job(h, &h->cur, "not run: %s", strerror(ENOMEM));
            continue;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            /* Its own process group, so a timeout reaches what it started;
             * the signals the watchdog blocks unblocked; stdout to stderr. */
            setpgid(0, 0);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (in >= 0)
                dup2(in, 0);
            dup2(2, 1);
            execve("/bin/sh", (char *const[]){ "sh", "-c", (char *)h->cmd, NULL }, env);
            _exit(127);
        }
        int err = errno;
        free_env(env);
        if (pid < 0) {
            h->failed++;
            log_job(h, &h->cur, "not run: fork: %s", strerror(err));
            continue;
        }
        setpgid(pid, pid); /* as the child does: whichever runs first */
        h->pid = pid;
        h->started_ms = tool_now_ms();
        h->termed = false;
    }
}

void tool_hooks_poll(struct tool_hooks *h)
{
    if (!h)
        return;
    if (h->pid > 0) {
        int st;
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        uint64_t now = tool_now_ms();
        if (r == h->pid) {
            h->pid = 0;
            char t[32];
            tool_format_ms(h->timeout_ms, t, sizeof(t));
            if (h->termed) {
                h->failed++;
                log_job(h, &h->cur, "ran past --exec-timeout %s and was killed", t);
            } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
                h->failed++;
                log_job(h, &h->cur, "exited with status %d", WEXITSTATUS(st));
            } else if (WIFSIGNALED(st)) {
                h->failed++;
                log_job(h, &h->cur, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
            }
        } else if (r < 0 && errno != EINTR) {
            h->pid = 0; /* not ours to wait for any more: nothing to judge */
            h->failed++;
            log_job(h, &h->cur, "lost track of it: %s", strerror(errno));
        } else if (!h->termed && now - h->started_ms >= h->timeout_ms) {
            kill(-h->pid, SIGTERM);
            h->termed = true;
            h->term_ms = now;
        } else if (h->termed && now - h->term_ms >= HOOK_KILL_MS) {
            kill(-h->pid, SIGKILL);
        }
    }
    start_next(h);
}

void tool_hooks_drain(struct tool_hooks *h)
{
    if (!h)
        return;
    for (tool_hooks_poll(h); tool_hooks_busy(h); tool_hooks_poll(h)) {
        if (!tool_sleep_ms(20))
            continue;
        /* Told to stop again while draining: what runs is killed and what
         * waits is said, each with its units, never dropped silently. */
        if (h->pid > 0) {
            kill(-h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            h->pid = 0;
            h->failed++;
            log_job(h, &h->cur, "killed: the watchdog was stopped");
        }
        for (; h->len > 0; h->len--, h->head = (h->head + 1) % h->cap) {
            h->failed++;
            log_job(h, &h->q[h->head], "not run: the watchdog was stopped");
        }
    }
}
