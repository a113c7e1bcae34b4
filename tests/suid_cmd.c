/* SPDX-License-Identifier: MIT */
/*
 * The CMD of the set-user-ID tests (tooltest.h, vt_suid_copy): a root-owned
 * set-user-ID copy of this program says its pid and its uids on stdout,
 * with an optional word first (argv[1]), then waits to be killed. Run by
 * an unprivileged user it has euid 0 and the user's real uid: what the
 * kernel clears PR_SET_PDEATHSIG for.
 */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    printf("%s pid %d euid %d ruid %d\n", argc > 1 ? argv[1] : "suid", (int)getpid(), (int)geteuid(),
           (int)getuid());
    fflush(stdout);
    for (;;)
        pause();
}
