/* SPDX-License-Identifier: MIT */
/* The file layer: create without clobbering, open after validating. */
#define _GNU_SOURCE
#include "file_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/* Publishes tmp at path without replacing anything there. link() is the
 * portable no-clobber rename; filesystems without hard links get
 * renameat2(RENAME_NOREPLACE). */
static int publish(const char *tmp, const char *path)
{
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    int err = errno;
    if (err == EPERM || err == EOPNOTSUPP || err == ENOSYS) {
#ifdef SYS_renameat2
        if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path, 1 /* RENAME_NOREPLACE */) == 0)
            return 0;
        err = errno;
#endif
    }
    unlink(tmp);
    return -err;
}

/* Gives an anonymous (O_TMPFILE) file the name path, never replacing
 * anything there: linkat fails with EEXIST on any existing name, a
 * dangling symlink included, since it never follows the new name. */
static int publish_anon(int fd, const char *path)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    int err = errno;
    if (err != EEXIST && access(proc, F_OK) != 0) {
        /* No /proc: flink() proper, which older kernels allow only with
         * CAP_DAC_READ_SEARCH. */
        if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0)
            return 0;
        err = errno;
    }
    return -err;
}

/* The directory part of path, "." when it has none; malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* Sizes a new, still nameless or privately named file, maps it and writes
 * the header and the kind's initial state. Returns 0 and the mapping, or
 * a negative error with nothing mapped. */
static int fill(int fd, const struct vigil_layout *lay, uint32_t capacity, size_t size, unsigned mode,
                vigil_init_fn init, void *arg, void **basep)
{
    /* fchmod, not the open's mode argument: the umask must not apply. */
    if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)size) != 0)
        return -errno;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return -errno;
    struct vigil_file_header *h = base;
    memcpy(h->magic, vigil_magic, sizeof(h->magic));
    h->version = VIGIL_LAYOUT_VERSION;
    h->kind = lay->kind;
    h->capacity = capacity;
    h->flags = 0;
    int err;
    if (init && (err = init(base, size, capacity, arg)) < 0) {
        munmap(base, size);
        return err;
    }
    *basep = base;
    return 0;
}

/* The first way: an O_TMPFILE file in path's directory, filled while it
 * has no name at all and then linked in. A creator killed at any point
 * leaves nothing behind, and no name is longer than path. Returns 1 when
 * this way is not available here (no O_TMPFILE, or no way to link one)
 * and the caller should use a named temporary file instead. */
int vigil_file_no_tmpfile;

static int create_anon(const char *path, const struct vigil_layout *lay, uint32_t capacity, size_t size,
                       unsigned mode, vigil_init_fn init, void *arg, void **basep)
{
#ifdef O_TMPFILE
    if (vigil_file_no_tmpfile)
        return 1;
    char *dir = dir_of(path);
    if (!dir)
        return -ENOMEM;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    free(dir);
    if (fd < 0)
        return 1; /* kernel or filesystem without O_TMPFILE; the named way reports real errors */
    void *base;
    int err = fill(fd, lay, capacity, size, mode, init, arg, &base);
    if (err == 0) {
        /* Everything is in the page cache before the name exists, so
         * every opener sees a complete file. */
        err = publish_anon(fd, path);
        if (err < 0)
            munmap(base, size);
    }
    close(fd);
    if (err == 0)
        *basep = base;
    /* EEXIST is the answer; anything else may be this way's own limit
     * (a filesystem without hard links, no /proc), so try the other. */
    return err == 0 || err == -EEXIST ? err : 1;
#else
    (void)path, (void)lay, (void)capacity, (void)size, (void)mode, (void)init, (void)arg, (void)basep;
    return 1;
#endif
}

/* The second way: a temporary file with a short name beside path, filled,
 * then linked (or renamed without replacing) to path and unlinked. */
static int create_named(const char *path, const struct vigil_layout *lay, uint32_t capacity, size_t size,
                        unsigned mode, vigil_init_fn init, void *arg, void **basep)
{
    char *dir = dir_of(path);
    if (!dir)
        return -ENOMEM;
    static const char name[] = "/.vigil-tmp.XXXXXX";
    size_t dlen = strlen(dir);
    char *tmp = malloc(dlen + sizeof(name));
    if (!tmp) {
        free(dir);
        return -ENOMEM;
    }
    memcpy(tmp, dir, dlen);
    memcpy(tmp + dlen, name, sizeof(name));
    free(dir);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        free(tmp);
        return err;
    }
    void *base;
    int err = fill(fd, lay, capacity, size, mode, init, arg, &base);
    if (err == 0) {
        err = publish(tmp, path); /* removes tmp, whatever the outcome */
        if (err < 0)
            munmap(base, size);
    } else {
        unlink(tmp);
    }
    close(fd);
    free(tmp);
    if (err == 0)
        *basep = base;
    return err;
}

int vigil_map_create(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                     unsigned mode, vigil_init_fn init, void *arg, struct vigil_map *out)
{
    if (!path || !out)
        return -EINVAL;
    size_t size = vigil_layout_size(lay, capacity);
    if (size == 0)
        return VIGIL_ERANGE;
    if (mode & ~07777u)
        return -EINVAL;
    if (!*path)
        return -ENOENT;

    /* Fail early, before making a temporary file, when the name is taken.
     * (Only a shortcut: the link that publishes the file is the check.) */
    struct stat st;
    if (lstat(path, &st) == 0)
        return -EEXIST;

    void *base = NULL;
    int err = create_anon(path, lay, capacity, size, mode, init, arg, &base);
    if (err == 1)
        err = create_named(path, lay, capacity, size, mode, init, arg, &base);
    if (err < 0)
        return err;
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

/* Both opens: read-write maps the file shared; read-only opens it
 * O_RDONLY, so no write permission is needed, and maps it private: every
 * page is the file's own page cache page, seeing each peer's stores as
 * they land, until this process writes to it, which copies the page for
 * this process alone (and that page then stops following the file). So a
 * read-only handle can never change the file, and a call that writes
 * through one by mistake neither faults nor reaches anyone. */
static int map_open(const char *path, const struct vigil_layout *lay, uint32_t capacity, bool writable,
                    struct vigil_map *out)
{
    if (!out)
        return -EINVAL;
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
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
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

int vigil_map_open(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                   struct vigil_map *out)
{
    return map_open(path, lay, capacity, true, out);
}

int vigil_map_open_readonly(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                            struct vigil_map *out)
{
    return map_open(path, lay, capacity, false, out);
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
