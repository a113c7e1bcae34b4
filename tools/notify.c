/* SPDX-License-Identifier: MIT */
/*
 * Telling systemd how the watchdog is doing: READY=1 once it runs,
 * WATCHDOG=1 at each healthy interval, STATUS= always. The protocol
 * sd_notify(3) documents, spoken directly (libsystemd and its stack are
 * not worth loading for one datagram): one datagram of "KEY=VALUE" lines
 * to the AF_UNIX socket named by $NOTIFY_SOCKET, a path or, '@' first, a
 * name in the abstract namespace. Without $NOTIFY_SOCKET, nothing.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int tool_sd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path) || (path[0] == '@' && len < 2))
        return -EINVAL;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') /* abstract: a NUL first, the name is the rest of the length */
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    int err = n < 0 ? -errno : 1;
    close(fd);
    return err;
}
