/* SPDX-License-Identifier: MIT */
/*
 * Running CMD for as long as something is held (`vigil lock`, `vigil
 * group join`): CMD started under a guardian (guard.h), in a process group
 * of its own, with the fds the tool was given and no other; its end
 * awaited in one poll(2) on a signalfd, the holder's loss fd and the
 * guardian's reports; the signals that would end the tool passed on to
 * CMD; on a loss SIGTERM to CMD's group, then SIGKILL after a grace.
 * The tool killed by any signal, SIGKILL included, ends the group too:
 * the guardian sees its command pipe close.
 */
#ifndef VIGIL_TOOL_CHILD_H
#define VIGIL_TOOL_CHILD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "guard.h"

struct tool_child {
    pid_t    pid;   /* CMD's, and its process group's, once started */
    int      sfd;   /* signalfd: SIGCHLD and the signals passed on */
    sigset_t old;   /* the mask before, restored in CMD */
    /* Set before tool_child_start (zero: the defaults). */
    int      orphan_signal;  /* to CMD's group when the tool dies: SIGTERM (default) or SIGKILL */
    uint64_t orphan_kill_ms; /* SIGTERM to SIGKILL then, and when CMD exits leaving its group */
    bool   (*may_exec)(void *arg); /* the last look, in CMD's child (guard.h) */
    void    *may_exec_arg;
    int      refuse_status;
    bool     stop_before_exec;
    bool   (*held)(void *arg); /* watched by the guardian (guard.h); false: a loss, orphan_kill_ms's grace */
    void    *held_arg;
    /* Who the tool is and what it holds, for the line that says a group it
     * could not end is waited for, the hold kept ("vigil: lock K: ...",
     * "the lease"): tool_child_wait then never returns before the group
     * is gone, and reports GUARD_STILL (with GUARD_GONE) in c->g.r. */
    const char *still_who, *still_hold;
    /* The tool's own. */
    struct tool_guard g;
    struct tool_exec  x;
    int      tty;
    bool     started;
};

/* Notes the fds open now (call first thing): CMD inherits these only. */
void tool_child_note_fds(void);

/* Blocks the signals the wait takes (in every thread made after: call it
 * before any): every one that would end the tool by default and can be
 * caught (INT, TERM, HUP, QUIT, USR1, USR2, ALRM, PIPE), CHLD and CONT;
 * opens the signalfd. 0, or -errno. */
int tool_child_block(struct tool_child *c);

/* Starts CMD under its guardian, with the signal mask as it was before
 * tool_child_block. 0, or -errno. */
int tool_child_start(struct tool_child *c, char **argv, char **env);

/* Waits until CMD's group is gone. lost_fd readable (POLLIN) is a loss:
 * *lost set, the group gets SIGTERM, then SIGKILL kill_after_ms later;
 * so is the guardian's finding the hold lost (c->held) first.
 * 0 with *status as a shell reports it (128 + n for signal n), or -errno
 * (-ECHILD: the guardian died before CMD's end was known; the group was
 * then sent SIGKILL). */
int tool_child_wait(struct tool_child *c, int lost_fd, uint64_t kill_after_ms, int *status, bool *lost);

/* Passes the signals pending on the signalfd on to CMD's group (while
 * started), but SIGCHLD and those we raised ourselves: SIGINT or SIGTERM
 * if one came (the last), else 0. */
int tool_child_signals(struct tool_child *c);

/* After tool_child_start: CMD's pid (and group), once the guardian says
 * it started (waits for that), or 0 (it did not). */
pid_t tool_child_pid(struct tool_child *c);

/* Without blocking (poll c->g.rep for POLLIN): 0 CMD's group is still
 * there; 1 it is gone, *status CMD's as a shell reports it, c->g.r what
 * the guardian saw (GUARD_LOST: c->held said the hold was lost), and c
 * ready to start CMD again; -errno as tool_child_wait (the group was then
 * sent SIGKILL). */
int tool_child_done(struct tool_child *c, int *status);

/* Closes the signalfd and restores the signal mask (after the threads
 * made since tool_child_block are gone); ends a guardian still running. */
void tool_child_end(struct tool_child *c);

/* The tool's exit status rc, as it leaves: a CMD that had the terminal and
 * died of its SIGINT (^C) makes the tool die of SIGINT too, after every
 * other thing is done, as the terminal's ^C would have made a tool in
 * CMD's place (a shell waiting for it is told of a SIGINT, not of an
 * exit 130). Returns rc otherwise. */
int tool_child_exit(const struct tool_child *c, int rc);

/* environ less every variable named in drop and every entry skip says
 * so of (NULL: none), with add (NAME=VALUE strings, NULL-terminated) in
 * front: malloc'd, the strings not copied. */
char **tool_env_with(const char *const *add, const char *const *drop, bool (*skip)(const char *entry));

#endif
