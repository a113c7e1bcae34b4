/* SPDX-License-Identifier: MIT */
/* Process start times from /proc, against PID reuse. */
#define _GNU_SOURCE
#include "hb_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int vigil_proc_start_time(uint32_t pid, uint64_t *out)
{
    char path[32], buf[1024];
    if (pid == 0 || pid > 0x7fffffffu)
        return -EINVAL;
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold spaces or
     * ')' itself, so count fields from the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -EIO;
    p++;
    /* After ')' come fields 3.. ; the start time is field 22. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return -EIO;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + 1, &end, 10);
    if (errno || end == p + 1)
        return -EIO;
    *out = v;
    return 0;
}
