/* SPDX-License-Identifier: MIT */
/*
 * A look at a mapped file faults with SIGBUS when whoever may write the
 * file truncates it meanwhile: its owner, a member of its group for a
 * group's 0660 table (which root trusts, and so maps), anyone for a
 * world-writable one. The library reads a copy of a file its caller does
 * not trust, which cannot fault; the files it maps, the commands that
 * only look (ls, inspect, export) look at under this guard, so a file
 * shrunk under them is reported, never their death.
 *
 * The guard is scoped: SIGBUS jumps back only while a guarded look runs
 * (the innermost one); a SIGBUS anywhere else is the default, fatal one.
 * A look jumped out of leaves its handle and mapping behind: the
 * commands that guard are one-shots, and a look has no lock to release
 * (the read paths only load and back off); main then leaves by _exit, so
 * that no exit handler (LeakSanitizer's) counts them.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include <setjmp.h>
#include <signal.h>
#include <stddef.h>

static sigjmp_buf *volatile guarded;
static bool jumped;

static void on_bus(int sig)
{
    if (guarded)
        siglongjmp(*guarded, 1);
    /* Not in a look: die of it, as without the guard. */
    signal(sig, SIG_DFL);
    raise(sig);
}

int tool_guarded(int (*look)(void *), void *arg)
{
    static bool installed;
    if (!installed) {
        struct sigaction sa = { .sa_handler = on_bus };
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, NULL) != 0)
            return look(arg);
        installed = true;
    }
    sigjmp_buf here, *outer = guarded;
    if (sigsetjmp(here, 1) != 0) {
        guarded = outer;
        jumped = true;
        return TOOL_SHRUNK;
    }
    guarded = &here;
    int rc = look(arg);
    guarded = outer;
    return rc;
}

bool tool_guard_jumped(void)
{
    return jumped;
}

const char *tool_look_strerror(int err)
{
    return err == TOOL_SHRUNK ? "truncated while being looked at (whoever may write it shrank it)"
                              : vigil_strerror(err);
}
