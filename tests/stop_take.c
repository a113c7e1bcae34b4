/* stop_take.so: stops a pool worker at a chosen step of its take, for the
 * pool_stop test (LD_PRELOAD). STOP_TAKE=before stops the worker before its
 * first rename of queue/JOB into claimed/ (after rule 1's mark), after
 * just after that rename (before its check that the mark still holds),
 * before,after at both; STOP_TAKE=wait stops the C worker at its third
 * scandir of claimed/, once it waited for an empty queue and swept the
 * claims once (rule 4); STOP_TAKE=result stops it before its first rename
 * of a result from done/ into place. The test sees the stop in /proc and decides what
 * happens next: no sleep, no race. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    static int taken, results;
    const char *when = getenv("STOP_TAKE");
    int take = when && !taken && !strncmp(from, "queue/", 6) && !strncmp(to, "claimed/", 8);
    if (!real)
        real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (when && !strcmp(when, "result") && !strncmp(from, "done/", 5) && !results++)
        raise(SIGSTOP);
    if (take && strstr(when, "before"))
        raise(SIGSTOP);
    int rc = real(from, to), err = errno;
    if (take && rc == 0) {
        taken = 1;
        if (strstr(when, "after"))
            raise(SIGSTOP);
    }
    errno = err;
    return rc;
}

int scandir(const char *dir, struct dirent ***list, int (*filter)(const struct dirent *),
            int (*compar)(const struct dirent **, const struct dirent **))
{
    static int (*real)(const char *, struct dirent ***, int (*)(const struct dirent *),
                       int (*)(const struct dirent **, const struct dirent **));
    static int looks;
    const char *when = getenv("STOP_TAKE");
    if (!real)
        real = (int (*)(const char *, struct dirent ***, int (*)(const struct dirent *),
                        int (*)(const struct dirent **, const struct dirent **)))dlsym(RTLD_NEXT, "scandir");
    if (when && !strcmp(when, "wait") && !strcmp(dir, "claimed") && ++looks == 3)
        raise(SIGSTOP);
    return real(dir, list, filter, compar);
}
