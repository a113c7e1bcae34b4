/* SPDX-License-Identifier: MIT */
/*
 * The descriptors a command runs CMD with: those the tool was given, and
 * none that the tool or its libraries opened without close-on-exec. Noted
 * at the start from one listing of /proc/self/fd, made close-on-exec
 * before the exec in one close_range(2) per run of descriptors to drop.
 */
#ifndef VIGIL_TOOL_FDS_H
#define VIGIL_TOOL_FDS_H

/* Notes every descriptor open now, whatever its kind (an O_PATH one too)
 * and its number (above 1024 too), from /proc/self/fd; without /proc,
 * by fcntl(F_GETFD) on each number below RLIMIT_NOFILE (at least 1024,
 * at most 65536). One note a process: a second replaces the first. Where
 * the note cannot be kept (no memory), nothing is dropped later. */
void tool_fds_note(void);

/* Makes every descriptor from `from` up that the note did not see
 * close-on-exec: close_range(CLOSE_RANGE_CLOEXEC) over each run of them
 * (Linux 5.11), else closes each run with close_range (5.9, 5.10), else
 * (ENOSYS) closes each one open, listed from /proc/self/fd, or tried one
 * by one up to the note's bound without /proc. Async-signal-safe: for the
 * child of a fork, before its exec. */
void tool_fds_cloexec_unnoted(int from);

#endif
