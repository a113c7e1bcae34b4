/* SPDX-License-Identifier: MIT */
/*
 * The descriptors a command runs CMD with: those the tool was given, and
 * none that the tool or its libraries opened without close-on-exec. Noted
 * at the start in one poll(2), made close-on-exec before the exec in one
 * close_range(2) per run of descriptors to drop.
 */
#ifndef VIGIL_TOOL_FDS_H
#define VIGIL_TOOL_FDS_H

#include <stdint.h>

/* Sets bit fd (byte fd / 8, bit fd % 8) of open[] for each fd below n
 * open now, leaving the other bits as they are. One poll(2) of the n
 * descriptors (POLLNVAL: not open), or one per RLIMIT_NOFILE of them
 * where the limit is lower; fcntl(F_GETFD) on each where poll fails. */
void tool_fds_note(int n, uint8_t *open);

/* Makes every fd in [from, n) whose bit in open[] is clear close-on-exec,
 * with close_range(CLOSE_RANGE_CLOEXEC) over each run of them, or, where
 * the kernel lacks it (ENOSYS before Linux 5.9, EINVAL for the flag before
 * 5.11), closes them one by one. Async-signal-safe: for the child of a
 * fork, before its exec. */
void tool_fds_cloexec_unnoted(int from, int n, const uint8_t *open);

#endif
