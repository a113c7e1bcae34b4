/* SPDX-License-Identifier: MIT */
/*
 * CMD under a guardian (`vigil lock`, `vigil group join`, `vigil failover
 * --exec`): CMD runs in a process group of its own, started and watched by
 * a small middle process, the guardian, so that nothing credentials can
 * cut ties CMD's life to the tool's.
 *
 * Why not PR_SET_PDEATHSIG on CMD alone (the design before issue 32): the
 * kernel clears the parent-death signal when exec changes credentials
 * (a set-user-ID or set-group-ID program, file capabilities, sudo), so a
 * set-user-ID CMD outlived a SIGKILLed `vigil lock` and ran beside the
 * next holder's CMD; and a signal to CMD alone leaves what CMD started.
 *
 * THE GUARDIAN (tests: test_tool_guard.c; the tool side: child.c and
 * reclaim_exec.c):
 *
 *   tool ──fork──> guardian ──fork──> CMD (leader of process group CMD)
 *     ctl pipe: commands ──>  (the guardian holds only the read end; the
 *                              tool's death, any signal, closes the write
 *                              end: EOF, "end the group")
 *     rep pipe: <── reports    (started, the leader's status, what was
 *                              sent, gone)
 *
 *  - The guardian is in a process group of its own, apart from the tool's
 *    and CMD's: a signal to the tool's whole group (a shell's `kill -9
 *    %1`) kills the tool, whose death the guardian then answers.
 *  - The guardian is a fork of the tool and never execs: its credentials
 *    are the tool's, so it can always signal a CMD the tool could, set-
 *    user-ID or not (kill(2) compares the sender's uids with the target's
 *    real and saved uid, and a set-user-ID program keeps the caller's real
 *    uid). A CMD that makes every uid another's (sudo, su) cannot be
 *    signalled by an unprivileged tool at all: the guardian says so
 *    (GUARD_STILL) instead of waiting for ever.
 *  - Pipe EOF, not a signal, tells it the tool died: a descriptor closes
 *    whatever killed its holder, and no credential change resets it. The
 *    write end is close-on-exec and the guardian and CMD close their
 *    copies at once, so only the tool holds it.
 *  - It signals the process group, never a pid it might have reaped: the
 *    group's id stays reserved while any member lives (the kernel does
 *    not hand out a pid that is still a process group's id), and the
 *    guardian stops signalling once the group is gone. It is a child
 *    subreaper, so members orphaned by the leader's exit are its children
 *    and their exits wake it; a member that is not (a nested subreaper)
 *    is looked for every GUARD_TICK_MS.
 *  - It is the fork of a process with threads and runs without exec: only
 *    async-signal-safe calls in it and in CMD's child before its exec (no
 *    stdio, no malloc: the argv, the PATH candidates and the messages are
 *    made before the fork, and the exec is execve over the candidates).
 *  - CMD's child sets PR_SET_PDEATHSIG too (SIGKILL if the guardian goes):
 *    cleared for a set-user-ID CMD, kept for the others.
 *  - A tool that is stopped (SIGSTOP, a debugger, a frozen cgroup that
 *    spares the guardian) renews nothing and ends nothing: opts.held lets
 *    the guardian see the hold lapse itself (vigil lock: the keepalive's
 *    shared page, as CMD's child's last look reads it) and end the group
 *    as on a loss.
 *  - A process that leaves CMD's group (setsid(2): a daemon) is outside
 *    what the guardian ends, as it is outside timeout(1)'s; and a
 *    guardian killed on its own, with its tool, leaves CMD to the
 *    parent-death signal (systemd's stop kills the unit's whole cgroup),
 *    which reaches neither a set-user-ID CMD nor CMD's workers: for
 *    `failover --exec` the next watchdog ends that group before the next
 *    CMD (the journal's run group, src/journal_internal.h step 5); for
 *    `vigil lock` nothing does.
 *  - In the guardian, vigil_self_lock_word (the journal's owner word)
 *    works out the guardian's own identity from /proc/self/stat with
 *    open, read and a digit parse: no lock, no allocation.
 *
 * Ending the group, in every case: SIGTERM (or SIGKILL where the caller
 * says so) to the group, SIGKILL to the group `kill_ms` later whether or
 * not the leader was reaped, then waiting until the group is gone; then
 * what CMD put outside its group (setsid, a double fork), which the
 * guardian, a subreaper, has as its children by then: SIGTERM, SIGKILL
 * later, until it has none (THE STRAYS, guard.c; GUARD_STRAYS). The
 * report tells the tool what really happened.
 *
 * With the terminal: when the tool's process group is the foreground of
 * its controlling terminal and its standard input and output are that
 * terminal, CMD's group is made the foreground (as a shell does for a
 * job) and given back when it is gone (a tool whose output goes down a
 * pipe leaves the foreground to its job: the pipe's reader may read the
 * terminal); a CMD stopped by
 * the terminal (^Z, SIGTTIN) stops the tool's group too, and a SIGCONT to
 * it (which the tool passes on as 'C') continues CMD, in the foreground
 * again if the shell gave it back.
 */
#ifndef VIGIL_TOOL_GUARD_H
#define VIGIL_TOOL_GUARD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* How often a guardian looks for a group whose leader it has reaped. */
#define GUARD_TICK_MS 50u
/* After the SIGKILL, how long a group that is still there (members the
 * guardian may not signal) is waited for before it is reported so (and
 * given up, unless wait_out_still: vigil lock and group join keep their
 * hold until it is gone). */
#define GUARD_GIVE_UP_MS 5000u

/* CMD as execve(2) needs it, made before any fork: argv[0] looked up in
 * PATH as execvp(3) does (the caller's PATH, /bin:/usr/bin without one). */
struct tool_exec {
    char *const *argv;
    char *const *env;
    char       **cand;      /* the paths to try, NULL-terminated */
    char       **sh_argv;   /* { "sh", <candidate>, argv[1..], NULL }: ENOEXEC's fallback */
    char         err_prefix[160]; /* "vigil: ARGV0: " */
};
int  tool_exec_prepare(struct tool_exec *x, char *const *argv, char *const *env);
void tool_exec_free(struct tool_exec *x);

/* What the guardian saw, as it reported it. */
enum {
    GUARD_STARTED  = 1u << 0,  /* CMD forked: cmd is its pid and group */
    GUARD_EXITED   = 1u << 1,  /* the leader was reaped: status */
    GUARD_TERM     = 1u << 2,  /* SIGTERM sent to the group */
    GUARD_KILL     = 1u << 3,  /* SIGKILL sent to the group */
    GUARD_TIMEOUT  = 1u << 4,  /* ... because of timeout_ms */
    GUARD_ORPHANED = 1u << 5,  /* ... because the tool died */
    GUARD_TOLD     = 1u << 6,  /* ... because the tool said so (a loss, a stop) */
    GUARD_LINGERED = 1u << 7,  /* the group outlived its leader */
    GUARD_GONE     = 1u << 8,  /* the group is gone */
    GUARD_STILL    = 1u << 9,  /* given up: members it may not signal (EPERM) */
    GUARD_REFUSED  = 1u << 10, /* not started: `before` said no */
    GUARD_NOFORK   = 1u << 11, /* not started: fork failed (err) */
    GUARD_STOPPED  = 1u << 12, /* the terminal stopped CMD at least once */
    GUARD_LOST     = 1u << 13, /* ... because held() said the hold was lost */
    GUARD_STRAYS   = 1u << 14, /* descendants outside the group (setsid) were ended */
};

struct tool_guard_report {
    uint32_t flags;
    pid_t    cmd;     /* GUARD_STARTED */
    int      status;  /* GUARD_EXITED: the leader's wait status */
    int      err;     /* GUARD_NOFORK, GUARD_STILL: errno */
    uint64_t term_ms, kill_ms; /* since the start, when sent */
};

/* What the group gets in each case, and when. */
struct tool_guard_opts {
    const sigset_t *mask;      /* CMD's signal mask; CMD inherits the fds tool_fds_note saw (fds.h) */
    bool     quiet_stdio;      /* stdin from /dev/null, stdout to stderr */
    bool     terminal;         /* take the terminal's foreground when the tool has it */
    int      orphan_signal;    /* to the group when the tool dies: SIGKILL, or SIGTERM */
    uint64_t orphan_kill_ms;   /* then SIGKILL that long after a SIGTERM */
    uint64_t timeout_ms;       /* 0 none: SIGTERM to the group at it */
    uint64_t kill_ms;          /* SIGTERM to SIGKILL, after the timeout */
    bool     end_at_exit;      /* what is left of the group when the leader exits gets SIGTERM */
    bool     wait_out_still;   /* a group still there GUARD_GIVE_UP_MS after its SIGKILL (members
                                * it may not signal) is reported GUARD_STILL, then waited for until
                                * gone, never given up: what the tool holds is kept meanwhile */
    uint64_t exit_kill_ms;     /* then SIGKILL that long after */
    /* In CMD's child just before the exec: false ends it with
     * refuse_status instead. Async-signal-safe. */
    bool   (*may_exec)(void *arg);
    void    *may_exec_arg;
    int      refuse_status;
    bool     stop_before_exec; /* tests: CMD's child raises SIGSTOP first */
    /* In the guardian, before CMD is forked: false, and CMD is not run
     * (GUARD_REFUSED); and once the group is gone, with the report. Both
     * async-signal-safe. */
    bool   (*before)(void *arg);
    void   (*after)(void *arg, const struct tool_guard_report *r);
    void    *hook_arg;
    /* In the guardian, every GUARD_TICK_MS while CMD runs: false (what
     * the tool holds for CMD is lost) ends the group, SIGTERM and SIGKILL
     * lost_kill_ms later, even while the tool itself is stopped (SIGSTOP,
     * a debugger: its renewals stopped with it and the lease lapsed).
     * Async-signal-safe. */
    bool   (*held)(void *arg);
    void    *held_arg;
    uint64_t lost_kill_ms;
};

struct tool_guard {
    pid_t    pid;     /* the guardian */
    int      ctl;     /* commands to it; closed: end the group */
    int      rep;     /* its reports; EOF: it is done */
    bool     interactive; /* CMD has the terminal */
    struct tool_guard_report r;
};

/* Opens the terminal when the tool's group is its foreground and the
 * tool's standard input and output are on it (for opts.terminal): the
 * fd, or -1. */
int tool_guard_tty(void);

/* Forks the guardian, which starts CMD. 0, or -errno with nothing
 * started. tty: tool_guard_tty's fd, or -1. */
int tool_guard_start(struct tool_guard *g, const struct tool_exec *x, const struct tool_guard_opts *o, int tty);

/* Commands: sig passed on to CMD (the leader, while it runs; SIGCONT: the
 * tool was continued, CMD is too, in the terminal's foreground if the
 * tool's group has it); the group ended, SIGTERM now and SIGKILL kill_ms
 * later (kill_ms 0: SIGKILL now). 0, or -errno (the guardian is gone). */
int tool_guard_signal(struct tool_guard *g, int sig);
int tool_guard_end(struct tool_guard *g, uint64_t kill_ms);

/* Reads what the guardian reported, without blocking: 1 once it is done
 * (its report pipe at EOF; reap it with tool_guard_reap), 0 not yet. */
int tool_guard_read(struct tool_guard *g);

/* Waits for the guardian to finish and reaps it (after tool_guard_read
 * said 1, this does not block). 0, or -errno. */
int tool_guard_reap(struct tool_guard *g);

/* CMD's status as a shell reports it: exit code, 128 + n for signal n;
 * -1 when the leader was never reaped. */
int tool_guard_status(const struct tool_guard_report *r);

#endif
