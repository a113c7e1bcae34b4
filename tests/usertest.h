/* SPDX-License-Identifier: MIT */
/*
 * Another user, for the tests of what vigil does at the operating system's
 * boundaries: the test runs as root (the victim: a service made by root,
 * as the shipped units are) and forks the attacker, which becomes the
 * unprivileged user vigil-test (made by tests/test_user.sh, the CTest
 * fixture "testuser", when the tests run as root). Not root, or no such
 * user: the test says why and is skipped, never passed.
 *
 * The attacker runs commands the victim sends down a pipe, one at a time,
 * and answers each, so the test decides the moment of every attack (a
 * hook inside the victim's own call sends it): nothing races.
 */
#ifndef VIGIL_USERTEST_H
#define VIGIL_USERTEST_H

#include "testutil.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define VT_TEST_USER "vigil-test"

struct vt_user {
    uid_t uid;
    gid_t gid; /* its own group */
};

/* The attacker's identity: 0, or VT_SKIP after saying why on stderr; the
 * attacks are the program's point, so it then reports itself skipped
 * (vt_point_skipped) whatever else passed. */
static inline int vt_test_user(struct vt_user *u)
{
    vt_point_skipped = true; /* until the user is found */
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: not root: the attacks need root as the victim and the user %s as the attacker "
                        "(make check as root makes it)\n", VT_TEST_USER);
        return VT_SKIP;
    }
    struct passwd *pw = getpwnam(VT_TEST_USER);
    if (!pw) {
        fprintf(stderr, "skipped: no user %s (the test_user_setup fixture makes it when run as root)\n",
                VT_TEST_USER);
        return VT_SKIP;
    }
    vt_point_skipped = false;
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    /* The test's directory must be reachable by the attacker (search
     * only: what is in it keeps its own modes). */
    if (chmod(vt_tmpdir(), 0711) != 0)
        return 1;
    return 0;
}

/* In a forked child: becomes uid with gid and exactly the groups given
 * (none: its gid alone). Exits 99 if it cannot. */
static inline void vt_become(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
    if (setgroups(n, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0 || getuid() != uid) {
        perror("vt_become");
        _exit(99);
    }
}

/* A 2-slot table made at path by uid:gid (no other group) with mode, in a
 * child: 0, or non-zero when it could not. */
static inline int vt_make_table_cap_as(const char *path, uint32_t capacity, unsigned mode, uid_t uid, gid_t gid)
{
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        vt_become(uid, gid, NULL, 0);
        vigil_hb *hb;
        _exit(vigil_hb_create_mode(path, capacity, mode, &hb) == 0 ? 0 : 1);
    }
    return vt_wait(kid, 10000);
}

static inline int vt_make_table_as(const char *path, unsigned mode, uid_t uid, gid_t gid)
{
    return vt_make_table_cap_as(path, 2, mode, uid, gid);
}

/* ---- an attacker driven by the test ---------------------------------------- */

struct vt_attacker {
    pid_t pid;
    int   cmd, ack; /* the victim's ends */
};

/* Forks the attacker as u, running act(cmd, arg) for each command byte the
 * victim sends and answering with act's result byte, until the pipe closes. */
static inline int vt_attacker_start(struct vt_attacker *a, const struct vt_user *u, char (*act)(char, void *),
                                    void *arg)
{
    int c[2], k[2];
    if (pipe2(c, O_CLOEXEC) != 0 || pipe2(k, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    a->pid = fork();
    if (a->pid < 0)
        return -1;
    if (a->pid == 0) {
        vt_die_with_parent();
        close(c[1]);
        close(k[0]);
        vt_become(u->uid, u->gid, NULL, 0);
        char cmd;
        while (read(c[0], &cmd, 1) == 1) {
            char r = act(cmd, arg);
            if (write(k[1], &r, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    close(c[0]);
    close(k[1]);
    a->cmd = c[1];
    a->ack = k[0];
    return 0;
}

/* Has the attacker do cmd, waiting (bounded) for its answer; -1 if none came. */
static inline int vt_attack(struct vt_attacker *a, char cmd)
{
    if (write(a->cmd, &cmd, 1) != 1)
        return -1;
    struct pollfd p = { a->ack, POLLIN, 0 };
    char r;
    if (poll(&p, 1, 10000) != 1 || read(a->ack, &r, 1) != 1)
        return -1;
    return (unsigned char)r;
}

/* Ends the attacker: 0 when it exited cleanly. */
static inline int vt_attacker_stop(struct vt_attacker *a)
{
    close(a->cmd);
    close(a->ack);
    return vt_wait(a->pid, 10000);
}

/* True when the file at path still is root's, mode 0600, holding want. */
static inline bool vt_untouched(const char *path, const char *want)
{
    struct stat st;
    char buf[64] = "";
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    return n >= 0 && lstat(path, &st) == 0 && st.st_uid == 0 && st.st_gid == 0 && (st.st_mode & 07777) == 0600 &&
           strcmp(buf, want) == 0;
}

/* ---- the owner's truncation race ------------------------------------------------ */

/* A child (of the attacker, who may write the files) that shrinks each of
 * the n files to a page and allocates it whole again, over and over (a
 * bounded number of times), until vt_flip_stop: 0, or -1. */
static pid_t vt_flipper;

static inline int vt_flip_start(const char *const *paths, int n)
{
    int fd[8];
    off_t size[8];
    if (n > 8)
        return -1;
    for (int i = 0; i < n; i++) {
        struct stat st;
        fd[i] = open(paths[i], O_RDWR | O_CLOEXEC);
        if (fd[i] < 0 || fstat(fd[i], &st) != 0)
            return -1;
        size[i] = st.st_size;
    }
    fflush(NULL);
    vt_flipper = fork();
    if (vt_flipper == 0) {
        vt_die_with_parent();
        for (long round = 0; round < 100000000; round++)
            for (int i = 0; i < n; i++)
                if (ftruncate(fd[i], 4096) != 0 || fallocate(fd[i], 0, 0, size[i]) != 0)
                    _exit(1);
        _exit(0);
    }
    for (int i = 0; i < n; i++)
        close(fd[i]);
    return vt_flipper > 0 ? 0 : -1;
}

/* Stops the flipper: 0 when it was still flipping (killed, not exited). */
static inline int vt_flip_stop(void)
{
    int st;
    kill(vt_flipper, SIGKILL);
    return waitpid(vt_flipper, &st, 0) == vt_flipper && WIFSIGNALED(st) ? 0 : -1;
}

/* ---- a file system of the test's own ------------------------------------------ */

/* A tmpfs mounted at dir (made here) with these options, in a mount
 * namespace of this test's own (gone with it, whatever happens): 0, or
 * VT_SKIP where mounting is not allowed. */
static inline int vt_tmpfs(const char *dir, const char *options)
{
    static bool own_ns;
    if (!own_ns) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
            fprintf(stderr, "skipped: no mount namespace here (%s)\n", strerror(errno));
            return VT_SKIP;
        }
        own_ns = true;
    }
    if (mkdir(dir, 0755) != 0 || mount("vigil-test", dir, "tmpfs", 0, options) != 0) {
        fprintf(stderr, "skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
        return VT_SKIP;
    }
    return 0;
}

/* ---- an older vigil's file ---------------------------------------------- */

/* A table as an older vigil left it: only ftruncate'd, its untouched pages
 * holes; made here by punching every page but the first of a new table of
 * cap slots. 0, or a negative error (-EOPNOTSUPP: no holes here). */
static inline int vt_make_sparse(const char *path, uint32_t cap)
{
    vigil_hb *hb;
    int rc = vigil_hb_create(path, cap, &hb);
    if (rc < 0)
        return rc;
    vigil_hb_close(hb);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    long page = sysconf(_SC_PAGESIZE);
    rc = fd >= 0 && fstat(fd, &st) == 0 &&
                 fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, page, st.st_size - page) == 0
             ? 0
             : -errno;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Some of the file's size has no storage (fallocate'd blocks count, though
 * SEEK_HOLE on tmpfs calls them holes until written). */
static inline bool vt_sparse(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_blocks * 512 < st.st_size;
}

#endif
