/* SPDX-License-Identifier: MIT */
/* The file layer: create without clobbering, open after validating. */
#define _GNU_SOURCE
#include "file_internal.h"
#include "spin_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0x7f keeps text tools away, "\r\n" catches a newline-mangling copy. */
const uint8_t vigil_magic[8] = { 0x7f, 'V', 'I', 'G', 'I', 'L', '\r', '\n' };

size_t vigil_layout_size(const struct vigil_layout *lay, uint64_t capacity)
{
    if (capacity == 0 || capacity > lay->max_capacity)
        return 0;
    if (capacity > (SIZE_MAX - lay->head_bytes) / lay->slot_bytes)
        return 0;
    return lay->head_bytes + (size_t)capacity * lay->slot_bytes;
}

/* Tests only: called with the name of each step of create, and the
 * limits of other systems to act out (see file_internal.h); NULL and 0 in
 * every real process. */
void (*vigil_file_create_hook)(const char *step);
unsigned vigil_file_pretend;

static void step(const char *name)
{
    if (vigil_file_create_hook)
        vigil_file_create_hook(name);
}

/*
 * Create acts on descriptors alone, never twice on a name, because the
 * directory may be writable by others (a group's 0770 directory): any name
 * in it can be renamed, replaced or made a symlink between two calls. The
 * directory is opened once (dirfd) and every later name is looked up in
 * it; the new file is made by descriptor (O_TMPFILE, or a name opened
 * O_CREAT|O_EXCL|O_NOFOLLOW, which neither follows a symlink nor opens
 * what is already there); its group, mode and space are set through that
 * descriptor (fchown, fchmod, fallocate); and it is linked to its name
 * from the descriptor (linkat of /proc/self/fd/N, which names the inode
 * itself, never a path). Whatever another user does to a name meanwhile,
 * this file is the only one given the group and mode, and the only one
 * that can appear at path; at worst their doing makes create fail.
 */
struct target {
    int         dirfd;     /* path's directory, opened once */
    const char *base;      /* path's last component */
};

/* Splits path into its directory, opened O_PATH, and its last name. */
static int target_open(const char *path, struct target *t)
{
    const char *slash = strrchr(path, '/');
    t->base = slash ? slash + 1 : path;
    if (!*t->base)
        return -EISDIR; /* "dir/": no name to make */
    if (!slash) {
        t->dirfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        char *dir = malloc(n + 1);
        if (!dir)
            return -ENOMEM;
        memcpy(dir, path, n);
        dir[n] = '\0';
        t->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        free(dir);
    }
    return t->dirfd < 0 ? -errno : 0;
}

/* Links the file open at fd to t's name, never replacing anything there:
 * linkat fails with EEXIST on any existing name, a dangling symlink
 * included, as it never follows the new name. */
static int link_fd(int fd, const struct target *t)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    const bool no_proc = vigil_file_pretend & VIGIL_PRETEND_NO_PROC;
    if (!no_proc && linkat(AT_FDCWD, proc, t->dirfd, t->base, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    int err = no_proc ? ENOENT : errno;
    if (err != EEXIST && (no_proc || access(proc, F_OK) != 0)) {
        /* No /proc: flink() proper, which kernels before 6.10 allow only
         * with CAP_DAC_READ_SEARCH (ENOENT to anyone else). */
        if (!(vigil_file_pretend & VIGIL_PRETEND_OLD_FLINK) &&
            linkat(fd, "", t->dirfd, t->base, AT_EMPTY_PATH) == 0)
            return 0;
        err = vigil_file_pretend & VIGIL_PRETEND_OLD_FLINK ? ENOENT : errno;
    }
    return -err;
}

bool vigil_file_names_fd(int dirfd, const char *name, int fd)
{
    struct stat a, b;
    return fstatat(dirfd, name, &a, AT_SYMLINK_NOFOLLOW) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Sizes a new, still nameless or privately named file, gives it its group
 * and mode, reserves its space, maps it and writes the header and the
 * kind's initial state. Returns 0 and the mapping, or a negative error
 * with nothing mapped. */
static int fill(int fd, const struct vigil_layout *lay, uint32_t capacity, size_t size,
                const struct vigil_create_how *how, vigil_init_fn init, void *arg, void **basep)
{
    /* The group first: fchown may clear set-id bits that fchmod sets. */
    if (how->gid != (gid_t)-1 && fchown(fd, (uid_t)-1, how->gid) != 0)
        return -errno;
    step("group");
    /* fchmod, not the open's mode argument: the umask must not apply. */
    if (fchmod(fd, how->mode) != 0)
        return -errno;
    step("mode");
    /* Every page allocated now, so no store to the mapping, and no look at
     * it on tmpfs, can ever fault for want of space (a sparse file on a
     * full tmpfs is SIGBUS at the first touch of a hole). posix_fallocate
     * may fall back to writing each block: harmless here, as nobody else
     * can reach this file yet. */
    int err = posix_fallocate(fd, 0, (off_t)size);
    if (err != 0)
        return -err;
    step("reserve");
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return -errno;
    struct vigil_file_header *h = base;
    memcpy(h->magic, vigil_magic, sizeof(h->magic));
    h->version = VIGIL_LAYOUT_VERSION;
    h->kind = lay->kind;
    h->capacity = capacity;
    h->flags = 0;
    if (init && (err = init(base, size, capacity, arg)) < 0) {
        munmap(base, size);
        return err;
    }
    step("init");
    *basep = base;
    return 0;
}

/* The first way: an O_TMPFILE file in path's directory, filled while it
 * has no name at all and then linked in. A creator killed at any point
 * leaves nothing behind, and no name is longer than path. Returns 1 when
 * this way is not available here (no O_TMPFILE, or no way to link one)
 * and the caller should use a named temporary file instead. */
static int create_anon(const struct target *t, const struct vigil_layout *lay, uint32_t capacity, size_t size,
                       const struct vigil_create_how *how, vigil_init_fn init, void *arg, void **basep)
{
#ifdef O_TMPFILE
    if (vigil_file_pretend & VIGIL_PRETEND_NO_TMPFILE)
        return 1;
    int fd = openat(t->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return 1; /* kernel or filesystem without O_TMPFILE; the named way reports real errors */
    step("open");
    void *base;
    int err = fill(fd, lay, capacity, size, how, init, arg, &base);
    if (err < 0) {
        close(fd); /* the file was never named: it is gone */
        return err; /* about the file itself (no room, no such group): the other way would say the same */
    }
    /* Everything is in the page cache before the name exists, so every
     * opener sees a complete file. */
    err = link_fd(fd, t);
    close(fd);
    if (err < 0) {
        munmap(base, size);
        /* EEXIST is the answer; anything else may be this way's own limit
         * (a filesystem without hard links, no /proc): try the other. */
        return err == -EEXIST ? err : 1;
    }
    step("publish");
    *basep = base;
    return 0;
#else
    (void)t, (void)lay, (void)capacity, (void)size, (void)how, (void)init, (void)arg, (void)basep;
    return 1;
#endif
}

int vigil_file_random_name(char *out, size_t cap, const char *prefix, const char *suffix)
{
    static _Atomic uint64_t calls;
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        /* Relaxed: only a distinct number per call is wanted. */
        uint64_t n = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
        r = ((uint64_t)getpid() << 32) ^ (uint64_t)vigil_now_ns() ^ n * 0x9e3779b97f4a7c15u;
    }
    int n = snprintf(out, cap, "%s%012llx%s", prefix, (unsigned long long)(r & 0xffffffffffffull), suffix);
    return n > 0 && (size_t)n < cap ? 0 : VIGIL_ERANGE;
}

int vigil_file_open_temp(int dirfd, const char *prefix, const char *suffix, char *name, size_t cap)
{
    /* Another user may have put a file (or symlink) at any name they can
     * guess: a random one, opened O_EXCL|O_NOFOLLOW, is never theirs, and
     * one taken is passed over, never removed (it may be theirs). */
    for (int attempt = 0; attempt < 100; attempt++) {
        int err = vigil_file_random_name(name, cap, prefix, suffix);
        if (err < 0)
            return err;
        int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd < 0 ? -errno : fd;
    }
    return -EEXIST;
}

/* A fresh temporary name in t's directory, opened O_CREAT|O_EXCL (so never
 * a file or symlink already there); its name in tmp. */
static int open_temp(const struct target *t, char tmp[32])
{
    return vigil_file_open_temp(t->dirfd, ".vigil-tmp.", "", tmp, 32);
}

/* Removes the temporary name, if it still names this file: another user
 * may have renamed it away and put their own in its place. */
static void drop_temp(const struct target *t, const char *tmp, int fd)
{
    if (vigil_file_names_fd(t->dirfd, tmp, fd))
        unlinkat(t->dirfd, tmp, 0);
}

/* The second way: a temporary file with a short name beside path, filled,
 * then linked to path from its descriptor and its temporary name removed;
 * where the file system has no hard links, renamed without replacing, and
 * the result checked to be this very file. */
static int create_named(const struct target *t, const struct vigil_layout *lay, uint32_t capacity, size_t size,
                        const struct vigil_create_how *how, vigil_init_fn init, void *arg, void **basep)
{
    char tmp[32];
    int fd = open_temp(t, tmp);
    if (fd < 0)
        return fd;
    step("open");
    void *base;
    int err = fill(fd, lay, capacity, size, how, init, arg, &base);
    if (err == 0) {
        err = link_fd(fd, t);
        if (err < 0 && err != -EEXIST) {
            /* No hard links here (EPERM, EOPNOTSUPP, EMLINK), or no way to
             * link a descriptor (no /proc, and a kernel before 6.10 says
             * ENOENT to an unprivileged flink): the temporary name is
             * moved, which is a call on a name, so what arrives at path is
             * checked to be this file; anything else is taken away again.
             * Whatever stopped the link, the move says its own error. */
            if (renameat2(t->dirfd, tmp, t->dirfd, t->base, RENAME_NOREPLACE) == 0) {
                err = 0;
                if (!vigil_file_names_fd(t->dirfd, t->base, fd)) {
                    unlinkat(t->dirfd, t->base, 0);
                    err = -ESTALE;
                }
            } else {
                err = -errno;
            }
        }
        if (err < 0)
            munmap(base, size);
        else
            step("publish");
    }
    drop_temp(t, tmp, fd);
    close(fd);
    if (err == 0)
        *basep = base;
    return err;
}

int vigil_map_create(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                     const struct vigil_create_how *how, vigil_init_fn init, void *arg, struct vigil_map *out)
{
    if (!path || !out || !how)
        return -EINVAL;
    size_t size = vigil_layout_size(lay, capacity);
    if (size == 0)
        return VIGIL_ERANGE;
    if (how->mode & ~07777u)
        return -EINVAL;
    if (!*path)
        return -ENOENT;
    struct target t;
    int err = target_open(path, &t);
    if (err < 0)
        return err;
    /* Fail early, before making a temporary file, when the name is taken.
     * (Only a shortcut: the link that publishes the file is the check.) */
    struct stat st;
    if (fstatat(t.dirfd, t.base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        close(t.dirfd);
        return -EEXIST;
    }
    void *base = NULL;
    err = create_anon(&t, lay, capacity, size, how, init, arg, &base);
    if (err == 1)
        err = create_named(&t, lay, capacity, size, how, init, arg, &base);
    close(t.dirfd);
    if (err < 0)
        return err;
    step("done");
    out->base = base;
    out->size = size;
    out->capacity = capacity;
    return 0;
}

/*
 * Opens path with `flags` only once it is known to be a regular file, so
 * that nothing at the path but a regular file is ever opened: opening a
 * device node can act on the device (a tape rewinds, a tty becomes the
 * caller's controlling terminal), a FIFO can block. An O_PATH descriptor
 * opens nothing; fstat on it says what the path names, and the file is
 * then reopened through /proc/self/fd, which names that very inode, so a
 * rename between the look and the open cannot swap something else in.
 * Without /proc the path is opened again (O_NOCTTY, O_NONBLOCK, and a
 * check that it is the same inode); a swap in that window can then open a
 * device, but never make it the controlling terminal nor block.
 */
int vigil_file_open_regular(const char *path, int flags, struct stat *st)
{
    if (!path)
        return -EINVAL;
    int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return -errno;
    int err = 0;
    if (fstat(pfd, st) != 0) {
        err = -errno;
    } else if (S_ISLNK(st->st_mode)) {
        err = -ELOOP; /* what O_NOFOLLOW says of a symlink */
    } else if (S_ISDIR(st->st_mode) && (flags & O_ACCMODE) != O_RDONLY) {
        err = -EISDIR; /* what opening a directory for writing says */
    } else if (!S_ISREG(st->st_mode)) {
        err = VIGIL_EBADFILE;
    }
    if (err < 0) {
        close(pfd);
        return err;
    }
    const int how = flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
    int fd = open(proc, how);
    if (fd < 0 && errno == ENOENT)
        fd = open(path, how | O_NOFOLLOW); /* no /proc */
    if (fd < 0) {
        err = -errno;
        close(pfd);
        return err;
    }
    close(pfd);
    struct stat now;
    if (fstat(fd, &now) != 0) {
        err = -errno;
    } else if (!S_ISREG(now.st_mode) || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        err = VIGIL_EBADFILE; /* replaced between the look and the open */
    }
    if (err < 0) {
        close(fd);
        return err;
    }
    *st = now;
    return fd;
}

/* Reads and checks the common header; returns the fd or a negative error. */
static int open_checked(const char *path, int flags, struct vigil_file_header *h, struct stat *st)
{
    int fd = vigil_file_open_regular(path, flags, st);
    if (fd < 0)
        return fd;
    int err = 0;
    if (st->st_size < (off_t)VIGIL_HEADER_SIZE) {
        err = VIGIL_EBADFILE;
        goto fail;
    }
    ssize_t n = pread(fd, h, sizeof(*h), 0);
    if (n < 0) {
        err = -errno;
        goto fail;
    }
    if ((size_t)n != sizeof(*h) || memcmp(h->magic, vigil_magic, sizeof(h->magic)) != 0) {
        err = VIGIL_EBADFILE;
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return err;
}

/* What vigil_file_trusted refused last on this thread (see
 * vigil_file_refused). */
static _Thread_local struct stat refused_st;
static _Thread_local bool refused_valid;

static int refuse(const struct stat *st)
{
    refused_st = *st;
    refused_valid = true;
    return VIGIL_EUNTRUSTED;
}

/* Whether gid is the caller's effective group or one of its others. */
static bool in_my_groups(gid_t gid)
{
    if (gid == getegid())
        return true;
    int n = getgroups(0, NULL);
    if (n <= 0)
        return false;
    gid_t *g = malloc((size_t)n * sizeof(*g));
    if (!g)
        return false;
    n = getgroups(n, g);
    bool found = false;
    for (int i = 0; i < n && !found; i++)
        found = g[i] == gid;
    free(g);
    return found;
}

bool vigil_user_in_group(uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t cap = hint > 0 ? (size_t)hint : 1024;
    struct passwd pw, *res = NULL;
    char *buf = NULL;
    int err = ERANGE;
    /* The entry, in a buffer grown while it is too small (to a bound). */
    while (err == ERANGE && cap <= (1u << 20)) {
        char *more = realloc(buf, cap);
        if (!more)
            break;
        buf = more;
        err = getpwuid_r(uid, &pw, buf, cap, &res);
        cap *= 2;
    }
    bool member = false;
    if (err == 0 && res) {
        member = pw.pw_gid == gid;
        int n = 32;
        gid_t *groups = NULL;
        for (int tries = 0; !member && tries < 4; tries++) {
            gid_t *more = realloc(groups, (size_t)n * sizeof(*groups));
            if (!more)
                break;
            groups = more;
            int want = n;
            if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &want) >= 0) {
                for (int i = 0; i < want && !member; i++)
                    member = groups[i] == gid;
                break;
            }
            n = want > n ? want : n * 2; /* too small: want says how many */
        }
        free(groups);
    }
    free(buf);
    return member;
}

int vigil_file_trusted(const struct stat *st)
{
    /* As ssh's StrictModes: a file anyone may write could have been made
     * or rewritten by anyone, and its owner (or anyone, for a world-
     * writable one) can truncate it under every process that maps it. */
    if (st->st_mode & S_IWOTH)
        return refuse(st);
    if (st->st_uid == geteuid() || st->st_uid == 0)
        return 0;
    /* Another user's: trusted only as a group arrangement, a file made
     * group-writable for a group this caller is in (create --mode 0660
     * --group G), by a member of that group. The file's group alone
     * proves nothing of its owner: in a setgid directory a new file takes
     * the directory's group whoever makes it, so a user outside the group
     * (anyone, in a world-writable setgid directory) could give a file to
     * it. The owner must belong to the group as the group database says
     * (their primary group, or a listed member). */
    if ((st->st_mode & S_IWGRP) && in_my_groups(st->st_gid) && vigil_user_in_group(st->st_uid, st->st_gid))
        return 0;
    return refuse(st);
}

int vigil_file_refused(struct stat *out)
{
    if (!refused_valid)
        return -ENOENT;
    *out = refused_st;
    return 0;
}

/* A file of an older vigil may have holes (it was only ftruncate'd): the
 * first store to a hole allocates a block, and on a full file system that
 * store is SIGBUS. True when some of fd's first size bytes have no
 * storage: st_blocks says how much is allocated (fallocate's blocks
 * count, though SEEK_HOLE on tmpfs still calls them holes until they are
 * written), and SEEK_HOLE confirms a hole where fewer blocks may only
 * mean a compressed file. */
static bool has_hole(int fd, const struct stat *st, size_t size)
{
    if ((uint64_t)st->st_blocks * 512 >= (uint64_t)size)
        return false;
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    return hole >= 0 && (uint64_t)hole < (uint64_t)size;
}

/* Whether a load from a hole in a mapping of fd allocates, and so can
 * fault: on tmpfs and hugetlbfs it does (a page is made for it); on a disk
 * file system a hole maps the zero page. */
static bool read_allocates(int fd)
{
    struct statfs sf;
    return fstatfs(fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == HUGETLBFS_MAGIC);
}

/* True when all n bytes at p are zero. */
static bool all_zero(const unsigned char *p, size_t n)
{
    return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Copies fd's bytes [off, end) into base + off with pread, skipping the
 * chunks that are all zero (base is fresh anonymous memory: it reads as
 * zeros untouched). 0, or VIGIL_EBADFILE when the file ended first (shrunk
 * while being read), or a negative errno. */
static int copy_range(int fd, unsigned char *base, size_t off, size_t end, unsigned char *buf, size_t cap)
{
    while (off < end) {
        size_t want = end - off < cap ? end - off : cap;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return VIGIL_EBADFILE;
        if (!all_zero(buf, (size_t)n))
            memcpy(base + off, buf, (size_t)n);
        off += (size_t)n;
    }
    return 0;
}

/*
 * A private copy of fd's first size bytes, for a look that must never
 * fault: pread neither faults (a file shrunk under it is a short read) nor
 * allocates (a hole on tmpfs reads as zeros). It costs memory only for
 * what the file really holds, never for the size it claims: the copy is
 * fresh anonymous memory, which reads as zeros (the shared zero page)
 * until written; only the ranges SEEK_DATA finds are read, through a
 * bounded buffer, and of those only the chunks that are not all zero are
 * stored. A hostile sparse file of the kind's largest size costs address
 * space, and time to step over its holes, but no memory. Returns the copy,
 * or MAP_FAILED with *err set (VIGIL_EBADFILE: shrunk while being read).
 */
static void *read_copy(int fd, size_t size, int *err)
{
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        *err = -errno;
        return base;
    }
    enum { CHUNK = 64 * 1024 };
    unsigned char *buf = malloc(CHUNK);
    int rc = buf ? 0 : -ENOMEM;
    for (size_t off = 0; rc == 0 && off < size;) {
        off_t data = lseek(fd, (off_t)off, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* nothing but holes from off on (or the file ended: told below) */
        if (data < 0)
            data = (off_t)off; /* no SEEK_DATA here: all of it is data */
        if ((uint64_t)data >= size)
            break;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        size_t end = hole < 0 || (uint64_t)hole > size ? size : (size_t)hole;
        if (end <= (size_t)data)
            end = size; /* a hole before data: SEEK_HOLE disagrees with itself; read the rest */
        rc = copy_range(fd, base, (size_t)data, end, buf, CHUNK);
        off = end;
    }
    free(buf);
    /* Holes past the end are no proof the file still has its size. */
    struct stat st;
    if (rc == 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_size < (uint64_t)size))
        rc = VIGIL_EBADFILE;
    if (rc < 0) {
        munmap(base, size);
        *err = rc;
        return MAP_FAILED;
    }
    return base;
}

/* Both opens: read-write maps the file shared; read-only opens it
 * O_RDONLY, so no write permission is needed, and maps it private: every
 * page is the file's own page cache page, seeing each peer's stores as
 * they land, until this process writes to it, which copies the page for
 * this process alone (and that page then stops following the file). So a
 * read-only handle can never change the file, and a call that writes
 * through one by mistake neither faults nor reaches anyone.
 *
 * A writing open first asks whether the file could be someone else's doing
 * (vigil_file_trusted, on the opened descriptor's own fstat) unless told to
 * trust it; then allocates any holes (fallocate leaves the bytes as they
 * are, so live peers see no change), or fails -ENOSPC when it cannot.
 *
 * A read-only open takes a private copy (read_copy) instead of a mapping
 * when a mapping could fault: when the caller does not trust the file
 * (vigil_file_trusted, unless VIGIL_OPEN_TRUST_OWNER), whose owner, or
 * anyone for a world-writable one, may truncate it while it is being
 * looked at (a load past the new end is SIGBUS); and when the file has
 * holes on tmpfs, where even a load from a hole allocates, and faults on a
 * full file system. A look at a copy never faults; peers' later stores do
 * not show in it (open again to see them). A trusted file is mapped, and
 * follows peers live: whoever the caller trusts to write it (a member of
 * its group) may also shrink it under the look, which the vigil tool's
 * commands guard against (tools/look_guard.c). */
int vigil_map_open_flags(const char *path, const struct vigil_layout *lay, uint32_t capacity, unsigned flags,
                         struct vigil_map *out)
{
    if (!out || (flags & ~(VIGIL_OPEN_READONLY | VIGIL_OPEN_TRUST_OWNER)))
        return -EINVAL;
    bool writable = !(flags & VIGIL_OPEN_READONLY);
    struct vigil_file_header h;
    struct stat st;
    int fd = open_checked(path, writable ? O_RDWR : O_RDONLY, &h, &st);
    if (fd < 0)
        return fd;
    int err = VIGIL_EBADFILE;
    if (h.version != VIGIL_LAYOUT_VERSION || h.kind != lay->kind)
        goto fail;
    size_t size = vigil_layout_size(lay, h.capacity);
    if (size == 0 || (uint64_t)st.st_size != (uint64_t)size)
        goto fail;
    if (capacity != 0 && capacity != h.capacity) {
        err = VIGIL_ECAPACITY;
        goto fail;
    }
    if (writable && !(flags & VIGIL_OPEN_TRUST_OWNER) && (err = vigil_file_trusted(&st)) < 0)
        goto fail;
    bool sparse = has_hole(fd, &st, size);
    /* Allocated, or refused: -ENOSPC (-EDQUOT) with no room, -EOPNOTSUPP
     * on a file system that cannot allocate a file's holes in place. Its
     * holes would fault at the first store once that file system fills;
     * writing zeros into them instead could wipe a peer's store made
     * meanwhile. (A new file there is allocated at create by writing
     * every block, before anyone can reach it.) */
    if (writable && sparse &&
        ((vigil_file_pretend & VIGIL_PRETEND_NO_FALLOCATE) ? (errno = EOPNOTSUPP, -1)
                                                           : fallocate(fd, 0, 0, (off_t)size)) != 0) {
        err = -errno;
        goto fail;
    }
    bool copy = !writable && ((sparse && read_allocates(fd)) ||
                              (!(flags & VIGIL_OPEN_TRUST_OWNER) && vigil_file_trusted(&st) < 0));
    void *base;
    if (copy) {
        base = read_copy(fd, size, &err);
    } else {
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
        err = -errno;
    }
    if (base == MAP_FAILED)
        goto fail;
    close(fd);
    /* The bounds are the ones checked here, never re-read from the file. */
    out->base = base;
    out->size = size;
    out->capacity = h.capacity;
    return 0;
fail:
    close(fd);
    return err;
}

void vigil_map_close(struct vigil_map *m)
{
    if (m && m->base) {
        munmap(m->base, m->size);
        m->base = NULL;
    }
}

int vigil_file_probe_stat(const char *path, vigil_file_info *out, struct stat *st)
{
    if (!out || !st)
        return -EINVAL;
    struct vigil_file_header h;
    struct stat got;
    int fd = open_checked(path, O_RDONLY, &h, &got);
    if (fd < 0)
        return fd;
    close(fd);
    out->kind = h.kind;
    out->version = h.version;
    out->capacity = h.capacity;
    out->size = (uint64_t)got.st_size;
    *st = got;
    return 0;
}

int vigil_file_probe(const char *path, vigil_file_info *out)
{
    struct stat st;
    return vigil_file_probe_stat(path, out, &st);
}
