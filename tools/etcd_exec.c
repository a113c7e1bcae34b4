/* SPDX-License-Identifier: MIT */
/*
 * The etcd commands handed to the helper (etcd_exec.h). The helper is
 * found from the running program's own path (/proc/self/exe), never from
 * PATH or the environment: in the build tree beside `vigil`, installed at
 * VIGIL_ETCD_HELPER from vigil's directory (LIBEXECDIR/vigil/vigil-etcd),
 * a place as much the administrator's as `vigil` itself.
 */
#define _GNU_SOURCE
#include "etcd_exec.h"
#include "vigil.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef VIGIL_ETCD_HELPER

/* --NAME or --NAME=VALUE. */
static bool is_option(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, "--", 2) == 0 && strncmp(arg + 2, name, n) == 0 && (arg[2 + n] == '\0' || arg[2 + n] == '=');
}

bool tool_wants_etcd(int argc, char **argv)
{
    const char *cmd = argv[1];
    if (strcmp(cmd, "group") == 0 || strcmp(cmd, "agent") == 0)
        return true;
    bool lock = strcmp(cmd, "lock") == 0;
    if (!lock && strcmp(cmd, "export") != 0)
        return false;
    bool store = false;
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (is_option(argv[i], "etcd") || is_option(argv[i], "endpoints"))
            return true;
        store = store || is_option(argv[i], "store");
    }
    const char *endpoints = getenv("ETCDCTL_ENDPOINTS");
    return lock && !store && endpoints && *endpoints;
}

/* The helper's path into buf: beside the running program when that is the
 * build tree's `vigil`, else VIGIL_ETCD_HELPER from its directory ("../"
 * taken off the directory: /proc/self/exe names no symbolic link). 0, or
 * -errno. */
static int helper_path(char *buf, size_t cap)
{
    char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n >= sizeof(dir) - 1)
        return -ENAMETOOLONG;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0'; /* "/usr/bin", or "" for a program in "/" */
    const char *rel = VIGIL_ETCD_HELPER;
    if (strcmp(dir, VIGIL_BUILD_DIR) == 0)
        rel = "vigil-etcd";
    else if (rel[0] == '/')
        dir[0] = '\0', rel++;
    while (strncmp(rel, "../", 3) == 0 && (slash = strrchr(dir, '/')) != NULL) {
        *slash = '\0';
        rel += 3;
    }
    if ((size_t)snprintf(buf, cap, "%s/%s", dir, rel) >= cap)
        return -ENAMETOOLONG;
    return 0;
}

int tool_exec_etcd(char **argv)
{
    char path[PATH_MAX + 64];
    int rc = helper_path(path, sizeof(path));
    if (rc < 0) {
        fprintf(stderr, "vigil: /proc/self/exe: %s (vigil finds its etcd helper from its own path)\n",
                strerror(-rc));
        return EXIT_RUNTIME;
    }
    extern char **environ;
    execve(path, argv, environ);
    fprintf(stderr, "vigil: %s: %s (the etcd helper, which runs `vigil %s`; install it with vigil)\n", path,
            strerror(errno), argv[1]);
    return EXIT_RUNTIME;
}

#endif
