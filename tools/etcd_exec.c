/* SPDX-License-Identifier: MIT */
/*
 * The etcd commands handed to the helper (etcd_exec.h). Where the helper
 * is, from the directory the running program is in (/proc/self/exe),
 * never from PATH or the environment:
 *
 *   the build directory compiled in     DIR/vigil-etcd
 *   PREFIX/BINDIR (BINDIR relative)     PREFIX/LIBEXECDIR/vigil/vigil-etcd
 *   anywhere else, or without /proc     the absolute LIBEXECDIR/vigil/vigil-etcd
 *                                       compiled in (VIGIL_ETCD_HELPER)
 *
 * and the absolute path too when the place a directory names has no helper
 * (a `vigil` copied or hardlinked into some bin/). The relative rule is
 * git's for a relocatable install: only a directory that ends in /BINDIR
 * says where its prefix is. Then the helper runs only if it and every
 * directory above it belong to root, to the owner of this `vigil` or to
 * the user running it, and none is writable by anyone else (a directory
 * writable by others only if sticky, as /tmp: no one renames there what
 * another owns). Else another user could have put there a program for
 * this one, root perhaps, to run. Looked at through descriptors, from "/"
 * down, following no link (realpath resolved them first: one swapped in
 * since fails), and executed through the last: what was judged is what
 * runs.
 */
#define _GNU_SOURCE
#include "etcd_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static char **kept_argv;

void tool_etcd_keep_argv(char **argv)
{
    kept_argv = argv;
}

/* --help or -h before any "--", argv[0] the command: tool_parse's rule. */
static bool help_asked(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

int tool_etcd_elsewhere(const struct tool_cmd *cmd, int argc, char **argv)
{
    if (help_asked(argc, argv)) {
        tool_print_help(cmd, stdout);
        return tool_flush();
    }
#ifdef VIGIL_ETCD_HELPER
    if (kept_argv)
        return tool_exec_etcd(kept_argv);
#endif
    fprintf(stderr, "vigil %s: this vigil was built without the etcd adapter (libcurl and cJSON)\n", cmd->name);
    return EXIT_RUNTIME;
}

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
    bool lock = strcmp(cmd, "lock") == 0, export = strcmp(cmd, "export") == 0;
    if (!lock && !export && strcmp(cmd, "group") != 0 && strcmp(cmd, "agent") != 0)
        return false;
    bool named = false, store = false, group = false;
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {
        named = named || is_option(argv[i], "etcd") || is_option(argv[i], "endpoints");
        store = store || is_option(argv[i], "store");
        group = group || is_option(argv[i], "group");
    }
    if (!lock && !export)
        return !help_asked(argc - 1, argv + 1); /* group, agent */
    const char *endpoints = getenv("ETCDCTL_ENDPOINTS");
    bool env = endpoints && *endpoints;
    return named || (lock && !store && env) || (export && group && env);
}

/* Who may own the helper and the directories above it: root, the user
 * running us (nothing gained over them), and our own owner (who could
 * rewrite `vigil` itself), when /proc names us. */
struct trust {
    bool  known;
    uid_t owner;
};

static bool trusted(const struct trust *t, uid_t uid)
{
    return uid == 0 || uid == geteuid() || (t->known && uid == t->owner);
}

/* Judges what fd names (path[0..len), the last component of the path when
 * `last`): 0, or -EPERM with why filled. */
static int judge(int fd, const char *path, size_t len, bool last, const struct trust *t, char *why, size_t cap)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (S_ISLNK(st.st_mode))
        return -ELOOP; /* a link swapped in since realpath */
    if (last ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode))
        return last ? -EACCES : -ENOTDIR;
    const char *name = len ? path : "/";
    int n = len ? (int)len : 1;
    if (!trusted(t, st.st_uid)) {
        snprintf(why, cap, "%.*s is owned by uid %u", n, name, (unsigned)st.st_uid);
        return -EPERM;
    }
    bool sticky = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky) {
        snprintf(why, cap, "%.*s is writable by %s (mode %04o)", n, name,
                 (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "its group and others"
                 : st.st_mode & S_IWGRP                          ? "its group"
                                                                 : "others",
                 (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

/* Opens path for fexecve if it and each directory above it pass judge:
 * the descriptor, or -errno (-EPERM with why filled: refused). */
static int open_judged(const char *path, const struct trust *t, char *real, char *why, size_t cap)
{
    why[0] = '\0';
    if (!realpath(path, real))
        return -errno;
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    for (const char *p = real;;) {
        int rc = judge(fd, real, (size_t)(p - real), *p == '\0', t, why, cap);
        if (rc < 0) {
            close(fd);
            return rc;
        }
        while (*p == '/')
            p++;
        if (*p == '\0')
            return fd;
        const char *end = strchrnul(p, '/');
        char name[NAME_MAX + 1];
        if ((size_t)(end - p) > NAME_MAX) {
            close(fd);
            return -ENAMETOOLONG;
        }
        memcpy(name, p, (size_t)(end - p));
        name[end - p] = '\0';
        int next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        if (next < 0)
            return -errno;
        fd = next;
        p = end;
    }
}

/* The place the running program's directory names (the table above), or
 * "" for none; *self and t from /proc/self/exe, when there is one. */
static void placed_helper(char *buf, size_t cap, struct stat *self, struct trust *t)
{
    buf[0] = '\0';
    char dir[PATH_MAX];
    struct statfs fs; /* the kernel's /proc, not a file system that only looks like it */
    if (statfs("/proc/self", &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)
        return; /* no /proc: the absolute path */
    ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (n <= 0 || (size_t)n >= sizeof(dir) - 1 || stat("/proc/self/exe", self) != 0)
        return;
    t->known = true;
    t->owner = self->st_uid;
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = '\0'; /* "/usr/bin", or "" for a program in "/" */
    size_t dl = strlen(dir);
#ifdef VIGIL_BUILD_DIR
    if (strcmp(dir, VIGIL_BUILD_DIR) == 0) {
        snprintf(buf, cap, "%s/vigil-etcd", dir);
        return;
    }
#endif
#ifdef VIGIL_INSTALL_BINDIR
    size_t bl = strlen(VIGIL_INSTALL_BINDIR);
    if (dl > bl && dir[dl - bl - 1] == '/' && strcmp(dir + dl - bl, VIGIL_INSTALL_BINDIR) == 0)
        snprintf(buf, cap, "%.*s/%s", (int)(dl - bl - 1), dir, VIGIL_INSTALL_HELPER);
#else
    (void)dl;
#endif
}

int tool_exec_etcd(char **argv)
{
    struct stat self;
    struct trust t = { false, 0 };
    char placed[PATH_MAX + 64], real[PATH_MAX], why[PATH_MAX + 64], missed[2 * PATH_MAX + 200] = "";
    placed_helper(placed, sizeof(placed), &self, &t);
    const char *path = placed[0] ? placed : VIGIL_ETCD_HELPER;
    int fd = open_judged(path, &t, real, why, sizeof(why));
    if (placed[0] && (fd == -ENOENT || fd == -ENOTDIR)) {
        /* Nothing there: the place compiled in (a vigil copied into a bin/). */
        snprintf(missed, sizeof(missed), "%s: %s; ", placed, strerror(-fd));
        fd = open_judged(path = VIGIL_ETCD_HELPER, &t, real, why, sizeof(why));
    }
    struct stat st;
    if (fd >= 0 && t.known && fstat(fd, &st) == 0 && st.st_dev == self.st_dev && st.st_ino == self.st_ino) {
        close(fd);
        fprintf(stderr, "vigil: %s: this is vigil itself, not its etcd helper (which runs `vigil %s`)\n", path,
                argv[1]);
        return EXIT_RUNTIME;
    }
    if (fd >= 0) {
        extern char **environ;
        fexecve(fd, argv, environ);
        int err = errno;
        close(fd);
        fd = -err;
    }
    if (why[0]) {
        char owner[48] = "";
        if (t.known && t.owner != 0 && t.owner != geteuid())
            snprintf(owner, sizeof(owner), ", to vigil's owner (uid %u)", (unsigned)t.owner);
        fprintf(stderr, "vigil: refusing the etcd helper %s: %s (it and each directory above it must belong to "
                        "root%s or to you (uid %u), and be writable by no one else)\n", real, why, owner,
                (unsigned)geteuid());
    } else
        fprintf(stderr, "vigil: %s%s: %s (the etcd helper, which runs `vigil %s`; install it with vigil)\n", missed,
                path, strerror(-fd), argv[1]);
    return EXIT_RUNTIME;
}

#endif
