/* SPDX-License-Identifier: MIT */
/*
 * Running CMD for as long as something is held (`vigil group join`): CMD
 * started with the fds the tool was given and no other, its end awaited
 * in one poll(2) on a signalfd and the holder's loss fd, SIGINT and SIGTERM
 * passed on, and on a loss SIGTERM, then SIGKILL after a grace.
 */
#ifndef VIGIL_TOOL_CHILD_H
#define VIGIL_TOOL_CHILD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct tool_child {
    pid_t    pid;
    int      sfd;   /* signalfd: SIGCHLD, SIGINT, SIGTERM, SIGHUP */
    sigset_t old;   /* the mask before, restored in CMD */
    int      death_sig; /* what CMD gets if the tool dies first; 0: SIGTERM */
};

/* Notes the fds open now (call first thing): CMD inherits these only. */
void tool_child_note_fds(void);

/* Blocks the signals the wait takes (in every thread made after: call it
 * before any) and opens the signalfd. 0, or -errno. */
int tool_child_block(struct tool_child *c);

/* Forks and execs argv with env (NULL: ours), with the signal mask as it
 * was before tool_child_block. CMD gets death_sig (SIGTERM) if the tool
 * dies first.
 * 0, or -errno. */
int tool_child_start(struct tool_child *c, char **argv, char **env);

/* Waits for CMD. lost_fd readable (POLLIN) is a loss: *lost set, CMD gets
 * SIGTERM, then SIGKILL kill_after_ms later. 0 with *status as a shell
 * reports it (128 + n for signal n), or -errno. */
int tool_child_wait(struct tool_child *c, int lost_fd, uint64_t kill_after_ms, int *status, bool *lost);

/* Closes the signalfd and restores the signal mask (after the threads
 * made since tool_child_block are gone). */
void tool_child_end(struct tool_child *c);

/* environ less every variable named in drop and every entry skip says
 * so of (NULL: none), with add (NAME=VALUE strings, NULL-terminated) in
 * front: malloc'd, the strings not copied. */
char **tool_env_with(const char *const *add, const char *const *drop, bool (*skip)(const char *entry));

#endif
