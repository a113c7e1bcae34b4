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
 *   VIGIL_RECLAIM_TICKET     the reclaim's number in the journal: unique, rising
 *
 * Every reclaim is written in the table's journal (FILE.journal, THE
 * JOURNAL in src/journal_internal.h) before its slot is vacated, and its
 * CMD is run from there: a watchdog killed by any signal (SIGABRT from
 * WatchdogSec=, SIGKILL) leaves its pending reclaims to the next one,
 * which runs each exactly once, and says what became of the one that was
 * running. CMDs run one at a time across every watchdog of the table, in
 * reclaim order, each under a guardian (guard.h) in a process group of
 * its own, while the watchdog goes on scanning: the guardian takes the
 * journal's run lock, marks the entry running, runs CMD, and when the
 * group is gone writes what happened and lets the next one go.
 *
 * A CMD running past --exec-timeout gets SIGTERM to its process group and
 * SIGKILL to the group HOOK_KILL_MS later, whether or not its shell has
 * exited; the next CMD starts only once the group is gone. Every CMD that
 * did not simply finish is logged on stderr with its units (so an
 * operator can hand them back by hand) and what really happened to it.
 * CMD's stdout goes to the watchdog's stderr, so that --json's stream
 * stays JSON.
 */
#define _GNU_SOURCE
#include "guard.h"
#include "child.h"
#include "vigil.h"

#include "journal_internal.h"
#include "proc_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

/* From SIGTERM to SIGKILL for a CMD past its timeout, or whose watchdog
 * died. */
#define HOOK_KILL_MS 5000u

/* What the guardian needs in its own process: read there, never freed. */
struct run_arg {
    vigil_journal *j;
    uint32_t       idx;
    uint64_t       ticket;
    uint64_t       tool;  /* the watchdog's lock word: who logs the outcome */
    uint64_t       me;    /* the guardian's, once it holds the run lock */
    uint64_t       held;
};

struct tool_hooks {
    const char      *cmd, *file;
    uint64_t         timeout_ms;
    vigil_hb        *hb;
    vigil_journal   *j;
    uint64_t         me;      /* our lock word, as the journal names us */
    bool             running;
    struct tool_guard g;
    struct tool_exec  x;
    char            *argv[4];     /* sh -c CMD */
    char           **env;
    struct run_arg   arg;
    struct vigil_journal_rec cur;
    uint64_t         held_seq, held_since, held_said; /* the run lock's holding of another, and when said */
    sigset_t         none;
    unsigned         failed;
};

/* ---- the test hook ----------------------------------------------------------- */

/* VIGIL_TEST_JOURNAL_STOP=POINT (never set in use) makes the process that
 * reaches POINT raise SIGSTOP there, so that a test kills it at the step
 * it chose: begun, swapped, committed (the claim, in the watchdog), fork
 * (the watchdog, before the guardian), run-taken, started, finished (the
 * guardian), logged (the watchdog, between its log line and the free). */
static char stop_at[16];

static const char *const point_names[] = { "", "begun", "swapped", "committed", "run-taken", "started", "finished" };

static void test_point(int point)
{
    if (point > 0 && point < (int)(sizeof(point_names) / sizeof(point_names[0])) &&
        strcmp(stop_at, point_names[point]) == 0)
        raise(SIGSTOP);
}

static void test_stop(const char *where)
{
    if (strcmp(stop_at, where) == 0)
        raise(SIGSTOP);
}

/* ---- lines --------------------------------------------------------------------- */

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
static void describe(const struct vigil_journal_rec *r, char *buf, size_t len)
{
    char u[256];
    units(r->in_flight, u, sizeof(u));
    snprintf(buf, len, "slot %u (pid %u, %s, units %s)", r->slot, r->pid,
             r->why == VIGIL_RECLAIM_EXITED ? "exited" : "stale", u[0] ? u : "none");
}

__attribute__((format(printf, 3, 4))) static void log_job(const struct tool_hooks *h,
                                                          const struct vigil_journal_rec *r, const char *fmt, ...)
{
    char what[320];
    describe(r, what, sizeof(what));
    fflush(stdout);
    fprintf(stderr, "vigil: %s: --exec for %s: ", tool_e(h->file), what);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* How the leader ended, for a line: "exited with status 3", "[was ]killed
 * by signal 15 (Terminated)". */
static void leader_end(uint32_t out, bool was, char *buf, size_t len)
{
    int st = (int)(out & 0xffff);
    if (WIFEXITED(st))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    else
        snprintf(buf, len, "%skilled by signal %d (%s)", was ? "was " : "", WTERMSIG(st), strsignal(WTERMSIG(st)));
}

/*
 * Says what became of entry r's CMD, unless it simply finished (status 0,
 * nothing sent, nothing left behind). Returns true when it failed, in the
 * sense of --once's exit status: anything but that.
 */
static bool report(struct tool_hooks *h, const struct vigil_journal_rec *r)
{
    uint32_t out = r->outcome;
    char t[32], leader[96] = "", tail[512] = "";
    tool_format_ms(h->timeout_ms, t, sizeof(t));
    if (out & VJ_OUT_EXITED)
        leader_end(out, false, leader, sizeof(leader));
    /* Finished: status 0 and nothing sent (a group that ran on a moment
     * after its shell and ended by itself finished too). */
    if ((out & ~(uint32_t)(VJ_OUT_LINGERED | 0xffff)) == VJ_OUT_EXITED && WIFEXITED(out & 0xffff) &&
        WEXITSTATUS(out & 0xffff) == 0)
        return false;
    if (out & VJ_OUT_UNKNOWN) {
        log_job(h, r, "may have run: its guardian died before it could say what became of it (the watchdog "
                      "running it was killed); it is not run again");
        return true;
    }
    if (out & VJ_OUT_UNSURE) {
        log_job(h, r, "not run: the reclaim was cut short and its slot vacated by a scan that did not settle it "
                      "(one outside the journal, as a program's vigil_failover_scan, which may have handed these "
                      "units over itself; or a watchdog's repair killed before it could settle it)");
        return true;
    }
    if (out & VJ_OUT_NOTRUN) {
        log_job(h, r, "not run: it could not be started");
        return true;
    }
    /* What was sent to the group, and why. */
    const char *cause = out & VJ_OUT_TIMEOUT    ? "ran past --exec-timeout"
                        : out & VJ_OUT_ORPHANED ? "killed: the watchdog running it died"
                        : out & VJ_OUT_STOPPED  ? "killed: the watchdog was told to stop again (a second SIGINT or SIGTERM)"
                                                : NULL;
    const char *strays = out & VJ_OUT_STRAYS ? "; what it left outside its process group was ended" : "";
    if (!cause && !(out & (VJ_OUT_TERM | VJ_OUT_KILL | VJ_OUT_STILL))) {
        /* Nothing sent to the group: its own end. */
        log_job(h, r, "%s%s%s", leader, out & VJ_OUT_LINGERED ? "; its process group ran on after it" : "", strays);
        return true;
    }
    size_t n = 0;
    if (out & VJ_OUT_TERM)
        n += (size_t)snprintf(tail + n, sizeof(tail) - n, "; SIGTERM to its process group");
    if (out & VJ_OUT_KILL)
        n += (size_t)snprintf(tail + n, sizeof(tail) - n, "; SIGKILL to its process group%s",
                              out & VJ_OUT_TERM ? " 5s later" : "");
    if (out & VJ_OUT_EXITED) {
        leader_end(out, true, leader, sizeof(leader));
        n += (size_t)snprintf(tail + n, sizeof(tail) - n, "; the shell %s", leader);
    }
    /* The shell gone, the rest of the group ran on and ended before any
     * SIGKILL: by itself, what it was doing finished or not. */
    if ((out & VJ_OUT_LINGERED) && (out & VJ_OUT_TERM) && !(out & (VJ_OUT_KILL | VJ_OUT_STILL)))
        n += (size_t)snprintf(tail + n, sizeof(tail) - n, "; the rest of its group outlived the shell and ended "
                                                          "by itself before the SIGKILL");
    if (out & VJ_OUT_STILL)
        snprintf(tail + n, sizeof(tail) - n, "; still running when the watchdog gave up on it: its process "
                                             "group could not be signalled");
    else
        snprintf(tail + n, sizeof(tail) - n, "; its process group is gone%s", strays);
    if (cause && (out & VJ_OUT_TIMEOUT))
        log_job(h, r, "%s %s%s", cause, t, tail);
    else
        log_job(h, r, "%s%s", cause ? cause : "ended", tail);
    return true;
}

/* Says and frees every DONE entry that is ours to log (ours from the
 * start, or made ours by the sweep once its watchdog was dead). */
static void collect(struct tool_hooks *h)
{
    for (uint32_t i = 0; i < h->j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(h->j, i, &r) != 0 || r.state != VJ_DONE || r.owner != h->me)
            continue;
        if (report(h, &r))
            h->failed++;
        test_stop("logged");
        /* Ours: only we write its fields now. Logged, then freed: killed
         * in between, the next watchdog says it again. */
        atomic_store_explicit(&h->j->e[i].gen, 0, memory_order_relaxed);
        vigil_journal_move(h->j, i, vj_word(VJ_DONE, r.ticket), h->me, vj_word(VJ_FREE, r.ticket), 0);
    }
}

/* ---- the guardian's side of the journal (async-signal-safe) -------------------- */

static bool run_before(void *p)
{
    struct run_arg *a = p;
    a->me = vigil_self_lock_word();
    if (vigil_journal_run_take(a->j, a->me, &a->held) < 0)
        return false; /* another watchdog's CMD runs: ours waits */
    journal_hook(JP_RUN_TAKEN);
    struct vigil_journal_rec r;
    if (vigil_journal_read(a->j, a->idx, &r) != 0 || r.state != VJ_PENDING || r.ticket != a->ticket ||
        !vigil_journal_move(a->j, a->idx, vj_word(VJ_PENDING, a->ticket), r.owner, vj_word(VJ_RUNNING, a->ticket),
                            a->me)) {
        vigil_journal_run_release(a->j, a->held);
        return false; /* run by someone else meanwhile */
    }
    journal_hook(JP_STARTED);
    return true;
}

/* In CMD's child, before its exec: its group named in the journal, so
 * that the sweep of a watchdog finding this guardian dead ends it (THE
 * JOURNAL, step 5). */
static bool run_record(void *p)
{
    const struct run_arg *a = p;
    vigil_journal_run_group(a->j);
    return true;
}

static void run_after(void *p, const struct tool_guard_report *g)
{
    struct run_arg *a = p;
    uint32_t out = 0;
    if (g->flags & GUARD_EXITED)
        out |= VJ_OUT_EXITED | ((uint32_t)g->status & 0xffff);
    out |= g->flags & GUARD_TERM ? VJ_OUT_TERM : 0;
    out |= g->flags & GUARD_KILL ? VJ_OUT_KILL : 0;
    out |= g->flags & GUARD_TIMEOUT ? VJ_OUT_TIMEOUT : 0;
    out |= g->flags & GUARD_ORPHANED ? VJ_OUT_ORPHANED : 0;
    out |= g->flags & GUARD_TOLD ? VJ_OUT_STOPPED : 0;
    out |= g->flags & GUARD_LINGERED ? VJ_OUT_LINGERED : 0;
    out |= g->flags & GUARD_STILL ? VJ_OUT_STILL : 0;
    out |= g->flags & GUARD_NOFORK ? VJ_OUT_NOTRUN : 0;
    out |= g->flags & GUARD_STRAYS ? VJ_OUT_STRAYS : 0;
    /* The entry is ours (RUNNING, owner: us): the outcome, then DONE for
     * the watchdog to log, then the run lock for the next CMD. */
    atomic_store_explicit(&a->j->e[a->idx].outcome, out, memory_order_relaxed);
    vigil_journal_move(a->j, a->idx, vj_word(VJ_RUNNING, a->ticket), a->me, vj_word(VJ_DONE, a->ticket), a->tool);
    journal_hook(JP_FINISHED);
    vigil_journal_run_release(a->j, a->held);
}

/* ---- a dead guardian's group (THE JOURNAL, step 5) ------------------------------ */

static const char *ours_file; /* the table, as its CMDs' VIGIL_RECLAIM_FILE names it */
static char journal_name[PATH_MAX]; /* the journal attached, for the lines that name it */

/* /proc/PID/NAME read whole into buf (up to len - 1 bytes, NUL-ended):
 * its length, or -1. */
static ssize_t proc_read(const char *pid, const char *name, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t k;
    while (n < len - 1 && (k = read(fd, buf + n, len - 1 - n)) > 0)
        n += (size_t)k;
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* Whether process group pgid has a live member whose environment names
 * this table and this ticket: CMD of the entry, or a worker it started
 * (vigil_journal_group_ours). A header forged by a writer of the journal
 * names a group that has none. */
static bool group_ours(uint32_t pgid, uint64_t ticket)
{
    char want_t[48], want_f[PATH_MAX + 32];
    snprintf(want_t, sizeof(want_t), "VIGIL_RECLAIM_TICKET=%" PRIu64, ticket);
    if (!ours_file || (size_t)snprintf(want_f, sizeof(want_f), "VIGIL_RECLAIM_FILE=%s", ours_file) >= sizeof(want_f))
        return false;
    static char env[1 << 16];
    bool found = false;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && !found && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char stat[512];
        if (proc_read(de->d_name, "stat", stat, sizeof(stat)) <= 0)
            continue;
        /* After the command's ')': state, ppid, pgrp. */
        const char *p = strrchr(stat, ')');
        char state;
        unsigned long ppid, pgrp;
        if (!p || sscanf(p + 1, " %c %lu %lu", &state, &ppid, &pgrp) != 3 || pgrp != pgid || state == 'Z' ||
            state == 'X')
            continue;
        ssize_t n = proc_read(de->d_name, "environ", env, sizeof(env));
        bool t = false, f = false;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1) {
            t |= strcmp(env + i, want_t) == 0;
            f |= strcmp(env + i, want_f) == 0;
        }
        found = t && f;
    }
    if (d)
        closedir(d);
    return found;
}

/* ---- the watchdog's side --------------------------------------------------------- */

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

static void free_env(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        if (strncmp(*e, "VIGIL_RECLAIM_", 14) == 0)
            free(*e);
    free(env);
}

/* CMD's environment: ours less any VIGIL_RECLAIM_*, then the reclaim's.
 * NULL when out of memory. */
static char **job_env(const struct tool_hooks *h, const struct vigil_journal_rec *r)
{
    extern char **environ;
    enum { NVARS = 8 };
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
    units(r->in_flight, u, sizeof(u));
    char *mine[NVARS] = {
        var("VIGIL_RECLAIM_FILE=%s", h->file),
        var("VIGIL_RECLAIM_SLOT=%u", r->slot),
        var("VIGIL_RECLAIM_PID=%u", r->pid),
        var("VIGIL_RECLAIM_UNITS=%s", u),
        var("VIGIL_RECLAIM_IN_FLIGHT=0x%" PRIx64, r->in_flight),
        var("VIGIL_RECLAIM_REASON=%s", r->why == VIGIL_RECLAIM_EXITED ? "exited" : "stale"),
        var("VIGIL_RECLAIM_EPOCH=%" PRIu64, r->epoch),
        var("VIGIL_RECLAIM_TICKET=%" PRIu64, r->ticket),
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

/* The journal next to the table: opened (trusted as the table is), or
 * made with the table's permission bits and group (a group's pool: a
 * group this user is not in falls back to the user's own). */
static int open_journal(const char *path, const vigil_hb *hb, const char *table, unsigned flags,
                        vigil_journal **out)
{
    int rc = vigil_journal_open_flags(path, flags, out);
    if (rc != -ENOENT)
        return rc;
    struct stat st;
    if (stat(table, &st) != 0)
        return -errno;
    unsigned mode = ((unsigned)st.st_mode & 0666) | 0600;
    const struct vigil_journal_table t = { vigil_hb_capacity(hb), (uint64_t)st.st_dev, (uint64_t)st.st_ino };
    uint32_t n = vigil_journal_capacity_for(t.capacity);
    rc = vigil_journal_create(path, n, &t, mode, st.st_gid, out);
    if (rc == -EPERM)
        rc = vigil_journal_create(path, n, &t, mode, (gid_t)-1, out);
    if (rc == -EEXIST) /* another watchdog made it first */
        rc = vigil_journal_open_flags(path, flags, out);
    return rc;
}

/* A journal is its table's: one made for another table (--journal naming
 * another table's, or a table made anew at the same name) names that
 * table's slots, and its pending CMDs are that table's reclaims. The
 * table is told by its st_dev and st_ino, as the journal's header keeps
 * them from its making (vigil-files(5)). */
static int journal_fits(const char *path, vigil_journal *j, const char *table, const vigil_hb *hb)
{
    uint32_t made = j->hdr->table_capacity, cap = vigil_hb_capacity(hb);
    uint64_t dev = j->hdr->table_dev, ino = j->hdr->table_ino;
    struct stat st;
    int rc = stat(table, &st) == 0 ? 0 : -errno;
    if (rc == 0 && made == cap && dev == (uint64_t)st.st_dev && ino == (uint64_t)st.st_ino)
        return 0;
    if (rc < 0)
        tool_fail(table, rc);
    else if (made != cap)
        fprintf(stderr, "vigil: %s: a reclaim journal made for a table of %u slots, not this one's %u\n",
                tool_e(path), made, cap);
    else
        fprintf(stderr, "vigil: %s: the reclaim journal of another table (device %u:%u inode %" PRIu64 "), not of %s "
                        "(device %u:%u inode %" PRIu64 "): its entries name that table's slots. Give this table's own "
                        "journal with --journal; if the table was made anew, `vigil inspect %s` shows what the old "
                        "one left pending (hand those units back by hand), then remove it\n",
                tool_e(path), major((dev_t)dev), minor((dev_t)dev), ino, tool_e(table), major(st.st_dev),
                minor(st.st_dev), (uint64_t)st.st_ino, tool_e(path));
    vigil_journal_close(j);
    return EXIT_RUNTIME;
}

/* Who put the refused journal there, and what to do: a file another
 * user made in a shared directory stops --exec (never a plain watchdog),
 * so the line names its owner. */
static void journal_refused(const char *file, const char *path)
{
    struct stat st;
    char who[64] = "";
    if (lstat(path, &st) == 0)
        snprintf(who, sizeof(who), " (owner uid %u, mode %04o)", (unsigned)st.st_uid, (unsigned)st.st_mode & 07777);
    fprintf(stderr, "vigil: %s: --exec writes every reclaim in its journal first, and %s%s is not one it can use: "
                    "move it away, or name another with --journal PATH\n",
            tool_e(file), tool_e(path), who);
}

int tool_hooks_new(const char *cmd, const char *file, const char *journal, uint64_t timeout_ms, vigil_hb *hb,
                   bool trust_owner, struct tool_hooks **out)
{
    struct tool_hooks *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->cmd = cmd, h->file = file, h->timeout_ms = timeout_ms, h->hb = hb;
    sigemptyset(&h->none);
    char *path = NULL;
    if (!journal && asprintf(&path, "%s.journal", file) < 0) {
        free(h);
        return -ENOMEM;
    }
    int rc = open_journal(journal ? journal : path, hb, file, trust_owner ? VIGIL_OPEN_TRUST_OWNER : 0, &h->j);
    if (rc < 0 || (rc = journal_fits(journal ? journal : path, h->j, file, hb)) != 0) {
        if (rc < 0) {
            tool_fail_file(journal ? journal : path, rc, VIGIL_KIND_JOURNAL, true);
            journal_refused(file, journal ? journal : path);
        }
        free(path);
        free(h);
        return EXIT_RUNTIME;
    }
    snprintf(journal_name, sizeof(journal_name), "%s", journal ? journal : path);
    free(path);
    h->me = vigil_self_lock_word();
    const char *at = getenv("VIGIL_TEST_JOURNAL_STOP");
    if (at && *at) {
        snprintf(stop_at, sizeof(stop_at), "%s", at);
        vigil_journal_hook = test_point;
    }
    ours_file = file;
    vigil_journal_group_ours = group_ours;
    hb->journal = h->j; /* from here every claim is journaled */
    /* What earlier watchdogs left: said, so that a restart names every
     * reclaim it takes on (issue 32's restarted watchdog said "nothing to
     * reclaim" over two lost ones). */
    vigil_journal_sweep(h->j, hb, h->me);
    for (uint32_t i = 0; i < h->j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(h->j, i, &r) == 0 && r.state == VJ_PENDING && r.claimer != h->me)
            log_job(h, &r, "pending in the journal (reclaimed by watchdog pid %u%s): its CMD runs from there",
                    vigil_lock_pid(r.claimer), vigil_lock_holder_dead(r.claimer, h->j->map.base) ? ", gone" : "");
    }
    *out = h;
    return 0;
}

int tool_journal_attach(const char *file, const char *journal, vigil_hb *hb, bool trust_owner, vigil_journal **out)
{
    *out = NULL;
    if (!journal)
        return 0; /* FILE.journal is the --exec watchdogs': the reclaims are this watchdog's alone */
    int rc = vigil_journal_open_flags(journal, trust_owner ? VIGIL_OPEN_TRUST_OWNER : 0, out);
    if (rc < 0)
        return tool_fail_file(journal, rc, VIGIL_KIND_JOURNAL, true);
    if ((rc = journal_fits(journal, *out, file, hb)) != 0) {
        *out = NULL;
        return rc;
    }
    snprintf(journal_name, sizeof(journal_name), "%s", journal);
    hb->journal = *out;
    return 0;
}

/* How often a journal that stays full is said again. */
#define STARVED_SAY_MS 60000u

bool tool_journal_starved(const char *file, vigil_hb *hb)
{
    static uint64_t said_ms;
    vigil_journal *j = hb->journal;
    if (!j)
        return false;
    bool starved = j->starved;
    j->starved = false;
    if (starved && (!j->starved_said || tool_now_ms() - said_ms >= STARVED_SAY_MS)) {
        uint32_t c[5];
        vigil_journal_counts(j, c);
        fflush(stdout);
        fprintf(stderr, "vigil: %s: the reclaim journal %s is full (%u reclaims pending, %u running, %u done and "
                        "unsaid): slots due for reclaim are left as they are, unreclaimed, until --exec watchdogs "
                        "run their CMDs\n",
                tool_e(file), tool_e(journal_name), c[VJ_PENDING], c[VJ_RUNNING], c[VJ_DONE]);
        said_ms = tool_now_ms();
    } else if (!starved && j->starved_said) {
        fprintf(stderr, "vigil: %s: the reclaim journal %s has room again\n", tool_e(file), tool_e(journal_name));
    }
    j->starved_said = starved;
    return starved;
}

void tool_journal_detach(vigil_hb *hb, vigil_journal *j)
{
    if (!j)
        return;
    hb->journal = NULL;
    vigil_journal_close(j);
}

void tool_hooks_free(struct tool_hooks *h)
{
    if (!h)
        return;
    if (h->running) {
        tool_guard_end(&h->g, 0);
        tool_guard_reap(&h->g);
        tool_exec_free(&h->x);
        free_env(h->env);
    }
    h->hb->journal = NULL;
    vigil_journal_close(h->j);
    free(h);
}

unsigned tool_hooks_failed(const struct tool_hooks *h)
{
    return h ? h->failed : 0;
}

/* How long the run lock may stay with one holding of another before the
 * watchdog says who holds it (again every minute). */
#define RUN_HELD_SAY_MS 60000u

/* The run lock is another's while entry r waits: said when that holding
 * has lasted RUN_HELD_SAY_MS (or at once when its holder is in another pid
 * namespace, whose death this watchdog cannot see, so that it is never
 * taken over from here), with who and which namespace. */
static void held_by_other(struct tool_hooks *h, const struct vigil_journal_rec *r, uint64_t rw, uint64_t rs)
{
    uint64_t now = tool_now_ms();
    bool foreign = vigil_lock_ns(rw) != vigil_lock_ns(h->me);
    if (h->held_seq != rs) {
        h->held_seq = rs;
        h->held_since = now;
        h->held_said = 0;
    }
    if ((h->held_said == 0 && (foreign || now - h->held_since >= RUN_HELD_SAY_MS)) ||
        (h->held_said != 0 && now - h->held_said >= RUN_HELD_SAY_MS)) {
        char ns[128];
        tool_lock_ns(rw, ns, sizeof(ns));
        log_job(h, r, "waiting: the run lock is held by pid %u in pid namespace %s%s", vigil_lock_pid(rw), ns,
                foreign ? "; a watchdog in that namespace takes it over if its guardian died" : "");
        h->held_said = now;
    }
}

/* Starts the guardian of the lowest pending entry, if none runs. */
static void start_next(struct tool_hooks *h)
{
    struct vigil_journal_rec r;
    if (h->running || vigil_journal_next_pending(h->j, &r) != 0)
        return;
    /* A CMD of another watchdog runs: the run lock says so without a fork. */
    uint64_t rw, rs;
    if (vigil_pair_read(&h->j->hdr->run_word, &rw, &rs) && (rs & 1u)) {
        held_by_other(h, &r, rw, rs);
        return;
    }
    h->held_seq = 0;
    test_stop("fork");
    if (!(h->env = job_env(h, &r))) {
        log_job(h, &r, "not started now: %s (tried again)", strerror(ENOMEM));
        return;
    }
    h->argv[0] = "sh", h->argv[1] = "-c", h->argv[2] = (char *)h->cmd, h->argv[3] = NULL;
    if (tool_exec_prepare(&h->x, h->argv, h->env) < 0) {
        free_env(h->env);
        h->env = NULL;
        return;
    }
    h->arg = (struct run_arg){ .j = h->j, .idx = r.idx, .ticket = r.ticket, .tool = h->me };
    struct tool_guard_opts o = {
        .mask = &h->none,
        .quiet_stdio = true,
        .orphan_signal = SIGTERM,
        .orphan_kill_ms = HOOK_KILL_MS,
        .timeout_ms = h->timeout_ms,
        .kill_ms = HOOK_KILL_MS,
        .before = run_before,
        .after = run_after,
        .hook_arg = &h->arg,
        .may_exec = run_record,
        .may_exec_arg = &h->arg,
    };
    int rc = tool_guard_start(&h->g, &h->x, &o, -1);
    if (rc < 0) {
        log_job(h, &r, "not started now: fork: %s (tried again)", strerror(-rc));
        tool_exec_free(&h->x);
        free_env(h->env);
        h->env = NULL;
        return;
    }
    h->cur = r;
    h->running = true;
}

/* A guardian that is done: reaped; its entry, DONE and ours, is said by
 * collect. One that refused (the run lock was taken, the entry run by
 * another) leaves the entry as it was. */
static void reap_guardian(struct tool_hooks *h)
{
    tool_guard_reap(&h->g);
    tool_exec_free(&h->x);
    free_env(h->env);
    h->env = NULL;
    h->running = false;
    const struct tool_guard_report *g = &h->g.r;
    if ((g->flags & GUARD_STARTED) && !(g->flags & (GUARD_GONE | GUARD_STILL)) && kill(-g->cmd, 0) == 0) {
        /* The guardian was killed on its own: its group ended from here;
         * its entry is finished UNKNOWN by the sweep. */
        kill(-g->cmd, SIGKILL);
    }
}

void tool_hooks_poll(struct tool_hooks *h)
{
    if (!h)
        return;
    if (h->running && tool_guard_read(&h->g) == 1)
        reap_guardian(h);
    vigil_journal_sweep(h->j, h->hb, h->me);
    collect(h);
    start_next(h);
}

/* Work of ours left: a CMD running, or a pending entry that we reclaimed
 * or whose watchdog is dead (the drain runs those too). */
bool tool_hooks_busy(const struct tool_hooks *h)
{
    if (!h)
        return false;
    if (h->running)
        return true;
    for (uint32_t i = 0; i < h->j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(h->j, i, &r) == 0 && r.state == VJ_PENDING &&
            (r.claimer == h->me || vigil_lock_holder_dead(r.claimer, h->j->map.base)))
            return true;
    }
    return false;
}

/* What waits that the drain would run (ours, or a dead watchdog's) stays
 * in the journal for the next watchdog: said, and counted as failed when
 * `failed` (--once's exit status). */
static void leave_pending(struct tool_hooks *h, const char *why, bool failed)
{
    for (uint32_t i = 0; i < h->j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(h->j, i, &r) == 0 && r.state == VJ_PENDING &&
            (r.claimer == h->me || vigil_lock_holder_dead(r.claimer, h->j->map.base))) {
            log_job(h, &r, "not run yet: left in the journal for the next watchdog%s", why);
            h->failed += failed;
        }
    }
}

void tool_hooks_drain(struct tool_hooks *h)
{
    if (!h)
        return;
    /* Waiting on another's CMD (the run lock not ours) is bounded: by
     * then any CMD of a watchdog with our --exec-timeout has ended, or
     * the lock's holder is one we cannot judge (another pid namespace). */
    uint64_t idle_since = 0, idle_max = h->timeout_ms + 2 * HOOK_KILL_MS;
    for (tool_hooks_poll(h); tool_hooks_busy(h); tool_hooks_poll(h)) {
        uint64_t now = tool_now_ms();
        idle_since = h->running ? 0 : idle_since ? idle_since : now;
        if (idle_since && now - idle_since > idle_max) {
            uint64_t rw, rs;
            char why[256] = "", ns[128];
            if (vigil_pair_read(&h->j->hdr->run_word, &rw, &rs) && (rs & 1u)) {
                tool_lock_ns(rw, ns, sizeof(ns));
                snprintf(why, sizeof(why), " (the run lock is held by pid %u in pid namespace %s)",
                         vigil_lock_pid(rw), ns);
            }
            leave_pending(h, why, true);
            return;
        }
        if (!tool_sleep_ms(20))
            continue;
        /* Told to stop again while draining: what runs is killed (and
         * said, with its units); what waits stays in the journal for the
         * next watchdog. */
        if (h->running) {
            tool_guard_end(&h->g, 0);
            reap_guardian(h);
            vigil_journal_sweep(h->j, h->hb, h->me);
            collect(h);
        }
        leave_pending(h, "", false);
        return;
    }
}
