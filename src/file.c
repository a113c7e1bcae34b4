/* SPDX-License-Identifier: MIT */
/* The file layer: create without clobbering, open after validating. */
#define _GNU_SOURCE
#include "file_internal.h"
#include "spin_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* Tests only: called with the name of each step of create (see
 * file_internal.h); NULL in every real process. */
void (*vigil_file_create_hook)(const char *step);
int vigil_file_no_tmpfile;

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
    if (linkat(AT_FDCWD, proc, t->dirfd, t->base, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    int err = errno;
    if (err != EEXIST && access(proc, F_OK) != 0) {
        /* No /proc: flink() proper, which older kernels allow only with
         * CAP_DAC_READ_SEARCH. */
        if (linkat(fd, "", t->dirfd, t->base, AT_EMPTY_PATH) == 0)
            return 0;
        err = errno;
    }
    return -err;
}

/* True when dirfd's `name` is the file open at fd (not a symlink, not
 * another file put there since). */
static bool names_fd(int dirfd, const char *name, int fd)
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
    if (vigil_file_no_tmpfile)
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

/* A fresh temporary name in t's directory, opened O_CREAT|O_EXCL (so never
 * a file or symlink already there); its name in tmp. */
static int open_temp(const struct target *t, char tmp[32])
{
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)vigil_now_ns() ^ (uint64_t)attempt * 0x9e3779b97f4a7c15u;
        snprintf(tmp, 32, ".vigil-tmp.%012llx", (unsigned long long)(r & 0xffffffffffffull));
        int fd = openat(t->dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd < 0 ? -errno : fd;
    }
    return -EEXIST;
}

/* Removes the temporary name, if it still names this file: another user
 * may have renamed it away and put their own in its place. */
static void drop_temp(const struct target *t, const char *tmp, int fd)
{
    if (names_fd(t->dirfd, tmp, fd))
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
        if (err == -EPERM || err == -EOPNOTSUPP || err == -ENOSYS || err == -EMLINK) {
            /* No hard links here: the temporary name is moved, which is a
             * call on a name, so what arrives at path is checked to be
             * this file; anything else is taken away again. */
            if (renameat2(t->dirfd, tmp, t->dirfd, t->base, RENAME_NOREPLACE) == 0) {
                err = 0;
                if (!names_fd(t->dirfd, t->base, fd)) {
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

int vigil_file_trusted(const struct stat *st)
{
    /* As ssh's StrictModes: a file anyone may write could have been made
     * or rewritten by anyone, and its owner (or anyone, for a world-
     * writable one) can truncate it under every process that maps it. */
    if (st->st_mode & S_IWOTH)
        return VIGIL_EUNTRUSTED;
    if (st->st_uid == geteuid() || st->st_uid == 0)
        return 0;
    /* Another user's: trusted only as a group arrangement, a file made
     * group-writable for a group this caller is in (create --mode 0660
     * --group G). A non-root owner can only give a file to a group of
     * their own, so owner and caller share that group. */
    if ((st->st_mode & S_IWGRP) && in_my_groups(st->st_gid))
        return 0;
    return VIGIL_EUNTRUSTED;
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

/* A private copy of the file, read with pread: reading a hole never
 * allocates, so a sparse file on a full file system is read, not faulted
 * on. Returns the copy or MAP_FAILED with errno set. */
static void *read_copy(int fd, size_t size)
{
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return base;
    for (size_t off = 0; off < size;) {
        ssize_t n = pread(fd, (char *)base + off, size - off, (off_t)off);
        if (n <= 0 && !(n < 0 && errno == EINTR)) {
            munmap(base, size);
            errno = n == 0 ? EIO : errno; /* shrank while being read */
            return MAP_FAILED;
        }
        if (n > 0)
            off += (size_t)n;
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
 * are, so live peers see no change), or fails -ENOSPC when it cannot. A
 * read-only open of a file with holes on tmpfs takes a private copy
 * instead of mapping it (there even a load from a hole allocates): a look
 * at it then never faults, though peers' later stores do not show in it. */
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
    /* A file system that cannot reserve space (EOPNOTSUPP) makes no file
     * safer by refusing this one: new files there are no better. */
    if (writable && sparse && fallocate(fd, 0, 0, (off_t)size) != 0 && errno != EOPNOTSUPP) {
        err = -errno; /* -ENOSPC: no room for it */
        goto fail;
    }
    void *base = !writable && sparse && read_allocates(fd) ? read_copy(fd, size)
                                     : mmap(NULL, size, PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE,
                                            fd, 0);
    if (base == MAP_FAILED) {
        err = -errno;
        goto fail;
    }
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

int vigil_file_probe(const char *path, vigil_file_info *out)
{
    if (!out)
        return -EINVAL;
    struct vigil_file_header h;
    struct stat st;
    int fd = open_checked(path, O_RDONLY, &h, &st);
    if (fd < 0)
        return fd;
    close(fd);
    out->kind = h.kind;
    out->version = h.version;
    out->capacity = h.capacity;
    out->size = (uint64_t)st.st_size;
    return 0;
}
