/* SPDX-License-Identifier: MIT */
/*
 * The CMD of the set-user-ID tests (tooltest.h, vt_suid_copy): a root-owned
 * set-user-ID copy of this program says its pid and its uids on stdout,
 * with an optional word first (argv[1]), then waits to be killed. Run by
 * an unprivileged user it has euid 0 and the user's real uid: what the
 * kernel clears PR_SET_PDEATHSIG for.
 *
 * "root-child FLAG": as sudo does, a child that makes every uid root
 * (setresuid(0, 0, 0): its runner may no longer signal it) says so, and
 * runs until the file FLAG exists (60 s at most); the leader exits once
 * the child is root.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "root-child") == 0) {
        /* The leader leaves only once the child is root: before, the
         * group's SIGTERM at the leader's exit would still reach it. */
        int ready[2];
        if (pipe(ready) != 0)
            return 1;
        pid_t kid = fork();
        if (kid != 0) {
            char c;
            close(ready[1]);
            return kid < 0 || read(ready[0], &c, 1) != 1;
        }
        close(ready[0]);
        if (setresuid(0, 0, 0) != 0)
            return 1;
        printf("root-child pid %d euid %d ruid %d\n", (int)getpid(), (int)geteuid(), (int)getuid());
        fflush(stdout);
        if (write(ready[1], "r", 1) != 1)
            return 1;
        close(ready[1]);
        for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; i++)
            nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        return 0;
    }
    printf("%s pid %d euid %d ruid %d\n", argc > 1 ? argv[1] : "suid", (int)getpid(), (int)geteuid(),
           (int)getuid());
    fflush(stdout);
    for (;;)
        pause();
}
