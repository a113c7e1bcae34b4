/* SPDX-License-Identifier: MIT */
/*
 * Death probing: tell a dead local owner at once, without waiting out the
 * grace window.
 *
 * Fields read (heartbeat file, slot i at 64 + i * 64):
 *
 *   offset  size  field
 *        0     4  pid           owner, 0 = vacant
 *       40     8  seq           SeqLock version; pid, start_time and owner_ns
 *                               are read together under it
 *       48     4  start_time    low 32 bits of the owner's start time,
 *                               /proc/<pid>/stat field 22 (clock ticks since
 *                               boot), stamped by register; 0 = unknown
 *       52     4  owner_ns      owner's pid namespace, the inode of
 *                               /proc/<pid>/ns/pid; 0 = not recorded: the
 *                               pid may be any namespace's, so the verdict
 *                               is "unknown" (-EREMOTE), never "dead"
 *
 * The verdicts, in the order they are tried:
 *
 *   vacant slot                           VIGIL_EVACANT
 *   slot mid-change past the retry budget VIGIL_EBUSY
 *   otherwise                             vigil_pid_judge(pid, start_time,
 *                                         owner_ns), every bit kept (32 each):
 *                                         1 alive,
 *                                         0 provably dead, < 0 unknown (the
 *                                         pid verdicts are told in proc.c)
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "heartbeat_internal.h"

#include <errno.h>

int vigil_hb_probe(const vigil_hb *hb, uint32_t slot)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity)
        return VIGIL_ERANGE;
    /* Under the SeqLock: pid, start time and namespace come from the same
     * registration, or a new owner's pid could be judged against the old
     * owner's start time and be called reused. */
    struct vigil_slot_words w;
    int err = vigil_slot_read(&hb->slots[slot], &w, true);
    if (err < 0)
        return err;
    if (w.info.pid == 0)
        return VIGIL_EVACANT;
    return vigil_pid_judge(w.info.pid, w.start_time, VIGIL_START_MASK, w.owner_ns, UINT32_MAX);
}
