/* SPDX-License-Identifier: MIT */
/*
 * vigil: error codes and shared definitions.
 *
 * Every call that can fail returns an int: >= 0 success, < 0 failure.
 * A failed system call is -errno; vigil's own failures sit below -1000 so
 * the two ranges never meet.
 */
#ifndef VIGIL_COMMON_H
#define VIGIL_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* gid_t */

#ifdef __cplusplus
extern "C" {
#endif

#define VIGIL_EFULL     (-1001) /* no vacant slot */
#define VIGIL_EBADFILE  (-1002) /* not a vigil file of this kind, wrong version, or size disagrees with header */
#define VIGIL_ECAPACITY (-1003) /* file's capacity differs from the one asked for */
#define VIGIL_ERANGE    (-1004) /* slot, bit, quorum or argument out of range */
#define VIGIL_EVACANT   (-1005) /* slot is vacant */
#define VIGIL_ETIMEDOUT (-1006) /* deadline passed */
#define VIGIL_ENOPEERS  (-1007) /* nothing live to wait for */
#define VIGIL_ELOST     (-1008) /* lease refused: the scope is someone else's now */
#define VIGIL_EBUSY     (-1009) /* held by another owner, or in the middle of a change */
#define VIGIL_ETLS      (-1010) /* TLS: the server's certificate failed verification (etcd adapter) */
#define VIGIL_EUNTRUSTED (-1011) /* the file could have been made or rewritten by another user */

/* Never NULL, also for -errno and for codes vigil does not know. */
const char *vigil_strerror(int err);

/* The layout version every vigil file carries at offset 8; open refuses
 * any other (VIGIL_EBADFILE). 2: the slot writer word, the barrier's
 * release gate and the counters; 4: registrations named by a generation
 * that never recurs, and lock words that never recur (vigil-files(5));
 * 5: the lease store's entry and bind locks as lock pairs (a 128-byte
 * lease header, each entry's token moved to make room for its seq); 6:
 * the barrier's release record (marks, places, per-slot entries). */
#define VIGIL_LAYOUT_VERSION 6u

/* The kinds of vigil file; the value is stored at offset 12 of the header. */
enum vigil_kind {
    VIGIL_KIND_HEARTBEAT = 1,
    VIGIL_KIND_BARRIER   = 2,
    VIGIL_KIND_LEASES    = 3,
    VIGIL_KIND_JOURNAL   = 4, /* the reclaim journal of `vigil failover --exec` */
};

/* Flags of the *_open_flags calls (vigil_hb_open_flags(3)). */
#define VIGIL_OPEN_READONLY    0x1u /* for looking only, as *_open_readonly */
/* Opening for writing refuses, VIGIL_EUNTRUSTED, a file that another user
 * could have made or rewritten: writable by everyone, or owned by another
 * user (not root) unless it is group-writable, of a group the caller is
 * in, and its owner is a member of that group (the group database says:
 * a setgid directory gives its group to anyone's file). A look
 * (VIGIL_OPEN_READONLY) at such a file reads a copy rather than mapping
 * it. This flag skips that check: the caller trusts the file's owner. */
#define VIGIL_OPEN_TRUST_OWNER 0x2u

/* Reads the 64-byte header of any vigil file without mapping it: for tools
 * that must say what a file is before choosing how to open it. */
typedef struct vigil_file_info {
    uint32_t kind;     /* enum vigil_kind */
    uint32_t version;
    uint32_t capacity;
    uint64_t size;     /* file size in bytes, as found */
} vigil_file_info;
int vigil_file_probe(const char *path, vigil_file_info *out);
/* The size in bytes of a vigil file of this kind and capacity, as this
 * vigil lays it out; 0 for an unknown kind or a capacity it cannot have. */
uint64_t vigil_file_size(uint32_t kind, uint32_t capacity);

#ifdef __cplusplus
}
#endif

#endif
