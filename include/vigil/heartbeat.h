/* SPDX-License-Identifier: MIT */
/*
 * vigil heartbeat table: one 64-byte slot per process in a shared mapping.
 *
 * The layout is public because vigil_hb_beat is inline: a beat is one
 * acquire load of the epoch and one release store to the slot, about a
 * nanosecond, and a call through a shared library would double that.
 * Treat every struct below as read-only; change slots only through the API.
 * The full byte layout of every vigil file is in vigil-files(5).
 */
#ifndef VIGIL_HEARTBEAT_H
#define VIGIL_HEARTBEAT_H

#include <errno.h>
#include <vigil/common.h>

/*
 * The shared words are C11 atomics; in C++ (17 and later) the same words
 * are std::atomic of the same type, which on every platform vigil builds
 * for has the same size, alignment and representation (checked below), so
 * a C++ program maps the same files and runs the same inline beat. The
 * VIGIL__ macros are the few atomic operations the inline code needs.
 */
#ifdef __cplusplus
#include <atomic>
#define VIGIL_ATOMIC(T)          std::atomic<T>
#define VIGIL_ALIGNAS(n)         alignas(n)
#define VIGIL_STATIC_ASSERT(c, m) static_assert(c, m)
#define VIGIL__LOAD(p, mo)       (p)->load(std::memory_order_##mo)
#define VIGIL__STORE(p, v, mo)   (p)->store((v), std::memory_order_##mo)
#define VIGIL__OR(p, v, mo)      (p)->fetch_or((v), std::memory_order_##mo)
#define VIGIL__AND(p, v, mo)     (p)->fetch_and((v), std::memory_order_##mo)
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  alignof(std::atomic<uint64_t>) == alignof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "std::atomic<uint64_t> is a plain lock-free uint64_t, as C's _Atomic is");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  alignof(std::atomic<uint32_t>) == alignof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "std::atomic<uint32_t> is a plain lock-free uint32_t, as C's _Atomic is");
extern "C" {
#else
#include <stdatomic.h>
#define VIGIL_ATOMIC(T)          _Atomic T
#define VIGIL_ALIGNAS(n)         _Alignas(n)
#define VIGIL_STATIC_ASSERT(c, m) _Static_assert(c, m)
#define VIGIL__LOAD(p, mo)       atomic_load_explicit((p), memory_order_##mo)
#define VIGIL__STORE(p, v, mo)   atomic_store_explicit((p), (v), memory_order_##mo)
#define VIGIL__OR(p, v, mo)      atomic_fetch_or_explicit((p), (v), memory_order_##mo)
#define VIGIL__AND(p, v, mo)     atomic_fetch_and_explicit((p), (v), memory_order_##mo)
#endif

enum { VIGIL_ROLE_WORKER = 0, VIGIL_ROLE_COORDINATOR = 1 };

typedef struct vigil_slot_info {
    uint32_t pid;             /* 0 = vacant */
    uint32_t role;
    uint64_t last_seen_epoch;
    uint64_t in_flight;       /* bitmap of work units */
} vigil_slot_info;            /* fields may be added at the end */

/* File header, offsets 0..63. The first 24 bytes are common to all kinds. */
struct vigil_hb_header {
    uint8_t          magic[8];   /*  0: "\177VIGIL\r\n" */
    uint32_t         version;    /*  8: VIGIL_LAYOUT_VERSION */
    uint32_t         kind;       /* 12: VIGIL_KIND_HEARTBEAT */
    uint32_t         capacity;   /* 16: number of slots */
    uint32_t         flags;      /* 20: 0 */
    VIGIL_ATOMIC(uint64_t) epoch;      /* 24: global epoch, ticked by the watchdog */
    VIGIL_ATOMIC(uint64_t) term;       /* 32: leader term, +1 on each change of leader */
    VIGIL_ATOMIC(uint64_t) leader;     /* 40: (pid << 32) | (slot + 1), 0 = none */
    VIGIL_ATOMIC(uint64_t) elect_lock; /* 48: 0 free, else the elector's lock word (vigil-files(5)) */
    VIGIL_ATOMIC(uint64_t) elect_intent;/* 56: leader change in progress: ((term & 0x7ff) << 53) | (pid << 21) | (slot + 1), 0 none */
};

/* One slot, offsets relative to 64 + slot * 64 (vigil-files(5)). Two
 * pairs are 16-byte aligned because each is changed by one 16-byte
 * compare-and-swap: {in_flight, gen} (a mark that names the registration
 * it belongs to) and {writer, seq} (THE SLOT WRITER LOCK). */
struct vigil_hb_slot {
    VIGIL_ALIGNAS(64) VIGIL_ATOMIC(uint32_t) pid; /*  0: owner, 0 = vacant */
    VIGIL_ATOMIC(uint32_t) role;            /*  4: VIGIL_ROLE_* */
    VIGIL_ATOMIC(uint64_t) last_seen_epoch; /*  8: epoch at the last beat */
    VIGIL_ALIGNAS(16) VIGIL_ATOMIC(uint64_t) in_flight; /* 16: bitmap of work units */
    VIGIL_ATOMIC(uint64_t) gen;             /* 24: registration generation (vigil-files(5)) */
    VIGIL_ALIGNAS(16) VIGIL_ATOMIC(uint64_t) writer; /* 32: the structural writer's lock word */
    VIGIL_ATOMIC(uint64_t) seq;             /* 40: SeqLock version, odd during a structural change */
    VIGIL_ATOMIC(uint32_t) start_time;      /* 48: low 32 bits of the owner's start time, 0 unknown */
    VIGIL_ATOMIC(uint32_t) owner_ns;        /* 52: owner's pid namespace (inode of /proc/self/ns/pid), 0 not recorded */
    VIGIL_ATOMIC(uint32_t) reclaims;        /* 56: owners vacated by failover (wraps) */
    VIGIL_ATOMIC(uint32_t) repairs;         /* 60: repairs after a writer died mid-change (wraps) */
};

VIGIL_STATIC_ASSERT(sizeof(struct vigil_hb_header) == 64, "header is one cache line");
VIGIL_STATIC_ASSERT(sizeof(struct vigil_hb_slot) == 64, "slot is one cache line");

/* The handle. Its bounds are this process's own copy, taken at open, so a
 * peer scribbling on the file header cannot move them. */
typedef struct vigil_hb {
    struct vigil_hb_header *hdr;
    struct vigil_hb_slot   *slots;
    uint32_t                capacity;
    size_t                  map_size;
    struct vigil_failover_watch *watch; /* vigil_failover_wait's pidfds, made on first use */
    VIGIL_ATOMIC(uint64_t) *mine;       /* per slot, the generation this handle registered there, 0 none */
} vigil_hb;

int      vigil_hb_create(const char *path, uint32_t capacity, vigil_hb **out);
int      vigil_hb_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_hb **out);
int      vigil_hb_open(const char *path, uint32_t capacity, vigil_hb **out); /* 0 = the file's capacity */
/* For looking only (inspect, watch, export): needs read permission alone.
 * Peers' changes show as they land; nothing done through the handle
 * reaches the file (see vigil_hb_open_readonly(3)). */
int      vigil_hb_open_readonly(const char *path, uint32_t capacity, vigil_hb **out);
void     vigil_hb_close(vigil_hb *hb);                 /* NULL is fine */
uint32_t vigil_hb_capacity(const vigil_hb *hb);
int      vigil_hb_register(vigil_hb *hb, uint32_t pid, uint32_t *slot); /* VIGIL_EFULL */
int      vigil_hb_unregister(vigil_hb *hb, uint32_t slot);
uint64_t vigil_hb_tick(vigil_hb *hb);                  /* returns the new epoch */
uint64_t vigil_hb_epoch(const vigil_hb *hb);
int      vigil_hb_mark_in_flight(vigil_hb *hb, uint32_t slot, unsigned bit);
int      vigil_hb_clear_in_flight(vigil_hb *hb, uint32_t slot, unsigned bit);
int      vigil_hb_set_role(vigil_hb *hb, uint32_t slot, uint32_t role);
int      vigil_hb_snapshot(const vigil_hb *hb, uint32_t slot, vigil_slot_info *out);
uint32_t vigil_hb_live_count(const vigil_hb *hb, uint64_t grace_epochs);

/*
 * Does the registration this handle made into `slot` still hold it? 1 yes,
 * 0 no (never registered through this handle, unregistered, or reclaimed
 * by failover and perhaps registered again by someone else), VIGIL_ERANGE,
 * -EINVAL. A registration is named by the slot's generation, which never
 * recurs, so a recycled pid never answers 1 for a dead owner's slot. Two
 * loads, no system call: cheap enough to ask before each unit of work.
 */
int      vigil_hb_owned(const vigil_hb *hb, uint32_t slot);

/*
 * Counters of the table's structural events since it was created, summed
 * over its slots, for monitoring (vigil_hb_stats(3)). Each slot keeps its
 * own 32-bit counts, bumped under the slot's writer lock, never by a beat
 * or a mark; a count that wraps makes the sum drop, which Prometheus reads
 * as a counter reset.
 */
typedef struct vigil_hb_counters {
    uint64_t registers;      /* vacant slots claimed by vigil_hb_register */
    uint64_t unregisters;    /* owners gone by vigil_hb_unregister: registers - reclaims - occupied */
    uint64_t reclaims;       /* owners vacated by a failover scan or wait (stale or dead) */
    uint64_t repairs;        /* slots repaired after their writer died mid-change */
    uint64_t leader_changes; /* the leader term: changes of leader */
    uint32_t occupied;       /* slots with an owner now */
} vigil_hb_counters;         /* fields may be added at the end */
int      vigil_hb_stats(const vigil_hb *hb, vigil_hb_counters *out);

/* Liveness rule shared by every module: pid != 0 and the slot's age is at
 * most grace, as a signed difference, so a beat racing a read is live. */
static inline bool vigil_hb_is_live_at(uint32_t pid, uint64_t last_seen,
                                       uint64_t epoch, uint64_t grace)
{
    int64_t age = (int64_t)(epoch - last_seen);
    return pid != 0 && (age <= 0 || (uint64_t)age <= grace);
}

/*
 * One acquire load of the global epoch, one release store to the slot.
 * The acquire pairs with the tick's increment so the stored epoch is never
 * older than one this process has already acted on; the release publishes
 * the work done before the beat to a watchdog that reads last_seen_epoch.
 * The SeqLock version is deliberately untouched: a beat changes one word,
 * which no reader can see torn, and bumping it would make every snapshot
 * retry on every beat.
 */
static inline void vigil_hb_beat(vigil_hb *hb, uint32_t slot)
{
    if (!hb || slot >= hb->capacity)
        return;
    uint64_t epoch = VIGIL__LOAD(&hb->hdr->epoch, acquire);
    VIGIL__STORE(&hb->slots[slot].last_seen_epoch, epoch, release);
}

/*
 * A beater: the two words of one slot's beat, looked up once, so that a
 * beat is the bare acquire load and release store and nothing else (no
 * NULL check, no bound check, no reload of the handle's fields, which
 * vigil_hb_beat must make on every call since the compiler cannot know
 * the handle is unchanged). vigil_hb_beater of a NULL table or an
 * out-of-range slot gives a beater whose beats go to a word of the
 * library's own, reaching no table. A beater is valid until its table is
 * closed. The orders are vigil_hb_beat's, for the same reasons.
 */
typedef struct vigil_beater {
    const VIGIL_ATOMIC(uint64_t) *epoch; /* the table's epoch */
    VIGIL_ATOMIC(uint64_t)       *seen;  /* the slot's last_seen_epoch */
} vigil_beater;

vigil_beater vigil_hb_beater(vigil_hb *hb, uint32_t slot);

static inline void vigil_beater_beat(vigil_beater b)
{
    VIGIL__STORE(b.seen, VIGIL__LOAD(b.epoch, acquire), release);
}

/*
 * mark_in_flight and clear_in_flight are on a worker's hot path too (once
 * per unit of work) and are one fetch_or / fetch_and each, so direct calls
 * go to this inline body through the macros below; the library still
 * exports both as functions (for function pointers and other languages),
 * as libc does with getc.
 *
 * Release on both: a watchdog that takes a bit (acquire exchange) also
 * sees what the worker recorded about the unit before marking it, and a
 * unit's results are published before it stops being in flight, so
 * nobody reclaims and redoes finished work unseen. The vacancy check is
 * a relaxed load: only the slot's owner marks its bits, and a mark that
 * races the slot being vacated under it (a failover taking a slot whose
 * owner it judged dead) can leave a stray bit in a vacant slot, which
 * register clears before anyone owns the slot again.
 */
static inline int vigil_hb_in_flight_inline(vigil_hb *hb, uint32_t slot, unsigned bit, bool set)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity || bit >= 64)
        return VIGIL_ERANGE;
    struct vigil_hb_slot *s = &hb->slots[slot];
    if (VIGIL__LOAD(&s->pid, relaxed) == 0)
        return VIGIL_EVACANT;
    uint64_t m = UINT64_C(1) << bit;
    if (set)
        VIGIL__OR(&s->in_flight, m, release);
    else
        VIGIL__AND(&s->in_flight, ~m, release);
    return 0;
}
#define vigil_hb_mark_in_flight(hb, slot, bit)  vigil_hb_in_flight_inline((hb), (slot), (bit), true)
#define vigil_hb_clear_in_flight(hb, slot, bit) vigil_hb_in_flight_inline((hb), (slot), (bit), false)

#ifdef __cplusplus
}
#endif

#endif
