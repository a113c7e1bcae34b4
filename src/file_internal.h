/* SPDX-License-Identifier: MIT */
/*
 * The file layer under every kind of vigil file: a 64-byte header (magic,
 * layout version, kind, capacity, then the kind's own fields), created
 * without clobbering and published fully initialised, opened only after
 * the header has been checked against the file's size.
 */
#ifndef VIGIL_SRC_FILE_INTERNAL_H
#define VIGIL_SRC_FILE_INTERNAL_H

#include <vigil/common.h>

#include <stdbool.h>
#include <sys/types.h>

#define VIGIL_HEADER_SIZE    64u
#define VIGIL_DEFAULT_MODE   0600u

extern const uint8_t vigil_magic[8];

/* Offsets 0..23 of every vigil file. */
struct vigil_file_header {
    uint8_t  magic[8];
    uint32_t version;
    uint32_t kind;
    uint32_t capacity;
    uint32_t flags;
};

/* How a kind lays out its file: head_bytes (>= 64, the header included)
 * then capacity records of slot_bytes each. */
struct vigil_layout {
    uint32_t kind;
    uint32_t max_capacity;
    size_t   head_bytes;
    size_t   slot_bytes;
};

/* A mapping and this process's own copy of its bounds. */
struct vigil_map {
    void    *base;
    size_t   size;
    uint32_t capacity;
};

/* File size for `capacity` records, or 0 when capacity is out of range or
 * the size would not fit in a size_t. */
size_t vigil_layout_size(const struct vigil_layout *lay, uint64_t capacity);

/* Fills the kind's part of a new file before anyone can see it; the common
 * header is already written. Returns 0 or a negative error. */
typedef int (*vigil_init_fn)(void *base, size_t size, uint32_t capacity, void *arg);

/* How create makes a file: its mode (the umask does not apply) and its
 * group ((gid_t)-1: the creator's). */
struct vigil_create_how {
    unsigned mode;
    gid_t    gid;
};

/* -EEXIST when path exists (never clobbers), VIGIL_ERANGE for a capacity
 * of 0 or past the kind's maximum, -ENOSPC (or -EDQUOT) when the file
 * system has no room for the whole file, which is allocated here, never
 * left sparse. The file appears at path atomically, fully initialised,
 * with exactly how's mode and group; nothing is left behind on failure. */
int  vigil_map_create(const char *path, const struct vigil_layout *lay, uint32_t capacity,
                      const struct vigil_create_how *how, vigil_init_fn init, void *arg, struct vigil_map *out);
/* capacity 0 accepts the file's own; otherwise a different one is
 * VIGIL_ECAPACITY. Any header or size disagreement is VIGIL_EBADFILE.
 * flags: VIGIL_OPEN_READONLY opens O_RDONLY (no write permission needed)
 * and maps private: stores from peers show as they land, and nothing this
 * process does can change the file (see file.c). Otherwise the file is
 * mapped shared for writing, after vigil_file_trusted unless
 * VIGIL_OPEN_TRUST_OWNER, and with any hole allocated (-ENOSPC, -EDQUOT;
 * -EOPNOTSUPP where the file system cannot). */
int  vigil_map_open_flags(const char *path, const struct vigil_layout *lay, uint32_t capacity, unsigned flags,
                          struct vigil_map *out);
void vigil_map_close(struct vigil_map *m);

/* Opens path with `flags` (O_RDONLY or O_RDWR; O_CLOEXEC, O_NOCTTY and
 * O_NONBLOCK are added) only after an O_PATH look has shown a regular
 * file, never a symlink (-ELOOP), device, FIFO or directory
 * (VIGIL_EBADFILE), so no other kind of object is ever opened. Returns
 * the fd with *st filled, or a negative error. */
struct stat;
int vigil_file_open_regular(const char *path, int flags, struct stat *st);

/* vigil_file_probe, and *st the fstat of the very file whose header it
 * read (one lookup of path: a trust check or a mode read from st is of
 * the file described, not of whatever path names a moment later). */
int vigil_file_probe_stat(const char *path, vigil_file_info *out, struct stat *st);

/* 0 when the file st describes could have been made or rewritten only by
 * this caller, root, or a group this caller is in (a group-writable file
 * of that group: create --mode 0660 --group G, whose owner is a member of
 * the group); VIGIL_EUNTRUSTED when it is writable by everyone, or another
 * non-root user's outside such an arrangement. */
int vigil_file_trusted(const struct stat *st);

/* The stat of the file vigil_file_trusted refused last on this thread: 0
 * and *out, or -ENOENT if it refused none. For a message describing the
 * very file refused, not whatever its path names by the time it is
 * written. */
int vigil_file_refused(struct stat *out);

/* Whether uid belongs to group gid as the group database says: root, its
 * primary group, or a group listing it (getgrouplist). */
bool vigil_user_in_group(uid_t uid, gid_t gid);

/* A name in a directory others may write, for a file of this process's
 * own: prefix, 12 random hex digits, suffix, into out (VIGIL_ERANGE if it
 * does not fit in cap). */
int vigil_file_random_name(char *out, size_t cap, const char *prefix, const char *suffix);

/* Creates and opens O_RDWR a new file mode 0600 under such a random name
 * in dirfd (O_CREAT|O_EXCL|O_NOFOLLOW: never a file or symlink already
 * there; a name taken is passed over for another, never removed). The fd
 * with the name in `name`, or a negative error. */
int vigil_file_open_temp(int dirfd, const char *prefix, const char *suffix, char *name, size_t cap);

/* True when dirfd's `name` is the file open at fd (not a symlink, not
 * another file put there since). */
bool vigil_file_names_fd(int dirfd, const char *name, int fd);

/* Tests only: limits of other systems the file layer acts out, so that
 * every way it takes stays tested here. NO_TMPFILE: create skips O_TMPFILE
 * for its fallback, a named temporary file beside the target; NO_PROC:
 * no /proc to link a descriptor through; OLD_FLINK: linkat AT_EMPTY_PATH
 * says ENOENT, as kernels before 6.10 do without CAP_DAC_READ_SEARCH;
 * NO_FALLOCATE: fallocate says EOPNOTSUPP, as some file systems do. */
#define VIGIL_PRETEND_NO_TMPFILE   0x1u
#define VIGIL_PRETEND_NO_PROC      0x2u
#define VIGIL_PRETEND_OLD_FLINK    0x4u
#define VIGIL_PRETEND_NO_FALLOCATE 0x8u
extern unsigned vigil_file_pretend;

/* Tests only: when set, called at each step of create with its name
 * ("open": the new file exists, nameless or under its temporary name;
 * "group", "mode", "reserve", "init": each done on its descriptor;
 * "publish": linked at path; "done": the temporary name, if any, removed), so a
 * test can act on the names between any two steps. */
extern void (*vigil_file_create_hook)(const char *step);

#endif
