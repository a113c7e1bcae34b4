/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz harnesses. An input is a whole file image; when bit 0
 * of its first byte is set the harness first stamps a valid magic, version
 * and the kind it tests, so mutations reach past the header checks into
 * the slots instead of dying on the magic.
 */
#ifndef VIGIL_FUZZ_H
#define VIGIL_FUZZ_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Seed images the replay driver mutates, and `make fuzz` starts libFuzzer
 * from: valid files of the harness's kind. Returns the image's size, 0
 * past the last seed. */
size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap);

/* The first 16 bytes of a valid header at p: magic, layout version, kind. */
static inline void fuzz_stamp_header(uint8_t *p, uint32_t kind)
{
    uint32_t v = VIGIL_LAYOUT_VERSION;
    memcpy(p, vigil_magic, 8);
    memcpy(p + 8, &v, 4);
    memcpy(p + 12, &kind, 4);
}

/* Begins a seed image of `size` bytes in buf: zeroed, a valid header of
 * `kind` with `capacity` at offset 16. Returns size, or 0 when the image
 * does not fit in `cap` bytes. */
static inline size_t fuzz_seed_begin(uint8_t *buf, size_t cap, size_t size, uint32_t kind, uint32_t capacity)
{
    if (size > cap)
        return 0;
    memset(buf, 0, size);
    fuzz_stamp_header(buf, kind);
    memcpy(buf + 16, &capacity, 4);
    return size;
}

/* Begins heartbeat-table seed `index`: capacities 1, 4 and 64, a 64-byte
 * header and 64-byte slots; *capacity gets the seed's. Returns the size,
 * 0 past the last seed or when it does not fit. */
static inline size_t fuzz_hb_seed_begin(unsigned index, uint8_t *buf, size_t cap, uint32_t *capacity)
{
    static const uint32_t caps[] = { 1, 4, 64 };
    if (index >= sizeof(caps) / sizeof(caps[0]))
        return 0;
    *capacity = caps[index];
    return fuzz_seed_begin(buf, cap, 64 + (size_t)caps[index] * 64, VIGIL_KIND_HEARTBEAT, caps[index]);
}

/* Writes the input to a fresh file and returns its path (static buffer). */
static char fuzz_dir[64], fuzz_path[80];

static inline void fuzz_cleanup(void)
{
    unlink(fuzz_path);
    rmdir(fuzz_dir);
}

static inline const char *fuzz_write_file(const uint8_t *data, size_t size, uint32_t kind)
{
    char *path = fuzz_path;
    if (!fuzz_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/vigil-fuzz.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(fuzz_dir))
            abort();
        atexit(fuzz_cleanup);
    }
    snprintf(path, sizeof(fuzz_path), "%s/f", fuzz_dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    uint8_t head[24];
    size_t off = 0;
    if (size > 0 && (data[0] & 1) && size >= sizeof(head)) {
        memcpy(head, data, sizeof(head));
        fuzz_stamp_header(head, kind);
        if (write(fd, head, sizeof(head)) != (ssize_t)sizeof(head))
            abort();
        off = sizeof(head);
    }
    if (size > off && write(fd, data + off, size - off) != (ssize_t)(size - off))
        abort();
    close(fd);
    return path;
}

static inline void fuzz_remove_file(const char *path)
{
    unlink(path);
}

#endif
