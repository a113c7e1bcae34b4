/* SPDX-License-Identifier: MIT */
/*
 * `vigil group join GROUP --leader-only -- CMD` (group_lead.c): CMD runs
 * only while this member leads, and runs again each time it leads again.
 */
#ifndef VIGIL_TOOL_GROUP_LEAD_H
#define VIGIL_TOOL_GROUP_LEAD_H

#include "child.h"
#include "vigil.h"

/* "vigil: group GROUP: <message>" on stderr, escaped (tool_vmsg);
 * EXIT_RUNTIME, for a failure's return. */
int tool_group_say(const char *group, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef VIGIL_HAVE_ETCD
#include <vigil/group.h>

struct tool_lead {
    vigil_etcd        *e;      /* the member's: its join, keepalive and leave */
    vigil_etcd        *ew;     /* the watch's, apart: its requests never hold up a renewal */
    const char        *group, *name, *endpoints;
    struct vigil_group_options opts;
    uint64_t           ttl_ms, kill_after_ms;
    char             **cmd;    /* CMD and its arguments */
    struct tool_child *child;  /* signals blocked, the signalfd open (tool_child_block) */
};

/* Campaigns until CMD ends on its own or a stop signal comes: the exit
 * status (CMD's own; 0 when stopped while not leading; 75 the name is a
 * live member's at the first join; 1 an error). */
int tool_group_lead(struct tool_lead *l);

#endif

#endif
