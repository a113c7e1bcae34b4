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

#include "file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Seed images the replay driver mutates: valid files of the harness's kind. */
size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap);

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
        memcpy(head, vigil_magic, 8);
        uint32_t v = VIGIL_LAYOUT_VERSION;
        memcpy(head + 8, &v, 4);
        memcpy(head + 12, &kind, 4);
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
