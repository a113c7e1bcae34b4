/* SPDX-License-Identifier: MIT */
/*
 * Lease store internals: the file layout (told at the top of leases.c;
 * the protocol at the top of leases_ops.c and leases_lock.c) and a crash
 * hook the tests use to kill a process at each step of a change.
 */
#ifndef VIGIL_SRC_LEASES_INTERNAL_H
#define VIGIL_SRC_LEASES_INTERNAL_H

#include <stdatomic.h>
#include <vigil/lease.h>
#include "file.h"

#define VIGIL_LEASES_ENTRY_BYTES 256u
#define VIGIL_LEASES_MAX_CAPACITY (1u << 20)

/* File header, offsets 0..63; the first 24 bytes are common to all kinds. */
struct vigil_leases_header {
    uint8_t          magic[8];    /*  0: "\177VIGIL\r\n" */
    uint32_t         version;     /*  8: VIGIL_LAYOUT_VERSION */
    uint32_t         kind;        /* 12: VIGIL_KIND_LEASES */
    uint32_t         capacity;    /* 16: number of entries */
    uint32_t         flags;       /* 20: 0 */
    _Atomic uint64_t last_token;  /* 24: last fencing token handed out, 0 none */
    _Atomic uint64_t bind_lock;   /* 32: 0 free, else a lock word (see leases.c) */
    uint32_t         entry_bytes; /* 40: 256 */
    uint32_t         reserved[5]; /* 44: 0 */
};

/* One entry, offsets relative to 64 + index * 256. */
struct vigil_leases_entry {
    _Alignas(64) _Atomic uint64_t ctl; /*   0: unlocked: gen | expiry ms; locked: LOCKED | start | pid */
    _Atomic uint64_t token;            /*   8: fencing token of the current hand-over */
    _Atomic uint64_t ttl_ms;           /*  16: TTL the renewals extend by */
    _Atomic uint32_t hash;             /*  24: FNV-1a of the key, 0 when unbound */
    _Atomic uint32_t bound;            /*  28: ENTRY_NEVER, ENTRY_BOUND or ENTRY_CLEARED */
    _Atomic uint32_t gen_hint;         /*  32: gen of the last unlocked ctl a locker saw */
    _Atomic uint32_t pid;              /*  36: acquiring process (information only) */
    uint8_t          reserved0[24];    /*  40: 0 */
    _Atomic uint64_t key[16];          /*  64: key, NUL-padded, 128 bytes */
    _Atomic uint64_t owner[8];         /* 192: owner, NUL-padded, 64 bytes */
};

_Static_assert(sizeof(struct vigil_leases_header) == 64, "header is one cache line");
_Static_assert(sizeof(struct vigil_leases_entry) == VIGIL_LEASES_ENTRY_BYTES, "entry is 256 bytes");

enum { ENTRY_NEVER = 0, ENTRY_BOUND = 1, ENTRY_CLEARED = 2 };

/* The lock word: bit 63 set, bits 62..32 the low 31 bits of the locker's
 * start time (clock ticks since boot, against PID reuse), bits 31..0 its
 * pid. The unlocked word: bit 63 clear, bits 62..42 a generation that
 * moves on every change of hands, bits 41..0 the expiry in milliseconds of
 * CLOCK_MONOTONIC (0 = released or never held). */
#define CTL_LOCKED     (UINT64_C(1) << 63)
#define CTL_GEN_SHIFT  42
#define CTL_GEN_MASK   ((UINT64_C(1) << 21) - 1)
#define CTL_EXP_MASK   ((UINT64_C(1) << 42) - 1)

struct vigil_leases {
    struct vigil_map             map;
    struct vigil_leases_header  *hdr;
    struct vigil_leases_entry   *entries;
    uint32_t                     capacity; /* this process's copy, checked at open */
};

/* Where the tests kill a process inside a change. */
enum vigil_leases_point {
    LP_BIND_LOCKED = 1,  /* holds the store's bind lock */
    LP_ENTRY_LOCKED,     /* holds an entry's lock, nothing written yet */
    LP_TOKEN_TAKEN,      /* took a token from the header counter */
    LP_TOKEN_WRITTEN,    /* wrote it to the entry */
    LP_KEY_HALF,         /* wrote half the key of a new binding */
    LP_FIELDS_WRITTEN,   /* wrote everything but the unlock */
    LP_RECOVER_LOCKED,   /* took over a dead locker's entry, not yet repaired */
    LP_MAX
};
/* NULL in production; a test sets it in a child that should die at a point. */
extern void (*vigil_leases_hook)(int point);

#endif
