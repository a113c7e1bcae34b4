/* SPDX-License-Identifier: MIT */
/* The file layer: create without clobbering, open after validating. */
#define _GNU_SOURCE
#include "file.h"

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

    /* Fail early, before making a temporary file, when the name is taken. */
    struct stat st;
    if (lstat(path, &st) == 0)
        return -EEXIST;

    size_t plen = strlen(path);
    static const char suffix[] = ".vigil-tmp.XXXXXX";
    char *tmp = malloc(plen + sizeof(suffix));
    if (!tmp)
        return -ENOMEM;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, suffix, sizeof(suffix));

    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        free(tmp);
        return err;
    }
    int err = 0;
    void *base = MAP_FAILED;
    if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)size) != 0) {
        err = -errno;
        goto fail;
    }
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        err = -errno;
        goto fail;
    }
    struct vigil_file_header *h = base;
    memcpy(h->magic, vigil_magic, sizeof(h->magic));
    h->version = VIGIL_LAYOUT_VERSION;
    h->kind = lay->kind;
    h->capacity = capacity;
    h->flags = 0;
    if (init && (err = init(base, size, capacity, arg)) < 0)
        goto fail;
    /* Everything above is in the page cache before the name exists, so
     * every opener sees a complete file. */
    if ((err = publish(tmp, path)) < 0) {
        munmap(base, size);
        close(fd);
        free(tmp);
        return err;
    }
    close(fd);
    free(tmp);
    out->base = base;
    out->size = size;
    out->capacity = capacity;
    return 0;
fail:
    if (base != MAP_FAILED)
        munmap(base, size);
    close(fd);
    unlink(tmp);
    free(tmp);
    return err;
}

/* Reads and checks the common header; returns the fd or a negative error. */
static int open_checked(const char *path, int flags, struct vigil_file_header *h, struct stat *st)
{
    if (!path)
        return -EINVAL;
    /* O_NONBLOCK: a FIFO planted at the path must not block the open. */
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    int err = 0;
    if (fstat(fd, st) != 0) {
        err = -errno;
        goto fail;
    }
    if (!S_ISREG(st->st_mode) || st->st_size < (off_t)VIGIL_HEADER_SIZE) {
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

int vigil_map_open(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                   struct vigil_map *out)
{
    if (!out)
        return -EINVAL;
    struct vigil_file_header h;
    struct stat st;
    int fd = open_checked(path, O_RDWR, &h, &st);
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
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
