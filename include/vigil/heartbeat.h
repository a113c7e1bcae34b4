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
#endif

/*
 * vigil__cas16: one compare-and-swap of a 16-byte aligned pair of 64-bit
 * words, {lo at p, hi at p + 8}, as a single atomic step: if the pair
 * holds {*lo, *hi} it becomes {nlo, nhi} and the call returns true; if
 * not it returns false with {*lo, *hi} set to what the pair held. It is
 * a full barrier, as a seq_cst read-modify-write of both words: a
 * lock-prefixed cmpxchg16b on x86-64, an acquire-release exclusive pair
 * on aarch64 (which also stores back what it read when the comparison
 * fails, so that even then the pair was read as one).
 *
 * vigil changes two words together this way where a stale process must
 * be fenced by a name that never recurs: a slot's {in_flight, gen} (a
 * mark names the registration it is for) and {writer, seq} (THE SLOT
 * WRITER LOCK), the header's {term, leader} and {elect_lock, elect_seq}
 * (vigil-files(5)). Under ThreadSanitizer on x86-64 it is the same
 * instruction, with its happens-before told to TSan by hand (TSan's own
 * 16-byte atomics take a mutex no other process sees); on other targets
 * the compiler's builtin, where the compiler inlines a lock-free
 * one (a call into libatomic may take a lock that other processes cannot
 * see, so such a target is refused here).
 */
__extension__ typedef unsigned __int128 vigil__u128;

#if defined(__has_feature)
#define VIGIL__HAS_FEATURE(x) __has_feature(x)
#else
#define VIGIL__HAS_FEATURE(x) 0
#endif
#if (defined(__SANITIZE_THREAD__) || VIGIL__HAS_FEATURE(thread_sanitizer)) && defined(__x86_64__)
/* ThreadSanitizer emulates a 16-byte atomic under a mutex of its own
 * process, which other processes mapping the pair never take: the real
 * instruction, with the happens-before it makes told to TSan by hand. */
#define VIGIL__CAS16_TSAN_ASM 1
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#elif defined(__SANITIZE_THREAD__) || VIGIL__HAS_FEATURE(thread_sanitizer)
#define VIGIL__CAS16_TSAN 1
#if defined(__clang__) && defined(__has_include)
#if __has_include(<sanitizer/tsan_interface_atomic.h>)
#include <sanitizer/tsan_interface_atomic.h>
#define VIGIL__CAS16_TSAN_CALL 1 /* clang lowers a 16-byte builtin before TSan sees it */
#endif
#endif
#elif !defined(__x86_64__) && !defined(__aarch64__) && !defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
#error "vigil needs a lock-free 16-byte compare-and-swap: x86-64, aarch64, or a target the compiler inlines one for"
#endif

static inline bool vigil__cas16(void *p, uint64_t *lo, uint64_t *hi, uint64_t nlo, uint64_t nhi)
{
#if defined(VIGIL__CAS16_TSAN_CALL)
    __tsan_atomic128 e = (__tsan_atomic128)(((vigil__u128)*hi << 64) | *lo);
    __tsan_atomic128 n = (__tsan_atomic128)(((vigil__u128)nhi << 64) | nlo);
    bool ok = __tsan_atomic128_compare_exchange_strong((volatile __tsan_atomic128 *)p, &e, n,
                                                       __tsan_memory_order_seq_cst,
                                                       __tsan_memory_order_seq_cst) != 0;
    *lo = (uint64_t)e;
    *hi = (uint64_t)((vigil__u128)e >> 64);
    return ok;
#elif defined(VIGIL__CAS16_TSAN) || (!defined(__x86_64__) && !defined(__aarch64__))
    vigil__u128 e = ((vigil__u128)*hi << 64) | *lo;
    bool ok = __atomic_compare_exchange_n((vigil__u128 *)p, &e, ((vigil__u128)nhi << 64) | nlo, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *lo = (uint64_t)e;
    *hi = (uint64_t)(e >> 64);
    return ok;
#elif defined(__x86_64__)
    bool ok;
#if defined(VIGIL__CAS16_TSAN_ASM)
    __tsan_release(p); /* a seq_cst read-modify-write of both words */
    __tsan_release((char *)p + 8);
#endif
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*(volatile vigil__u128 *)p), "+a"(*lo), "+d"(*hi)
                         : "b"(nlo), "c"(nhi)
                         : "memory");
#if defined(VIGIL__CAS16_TSAN_ASM)
    __tsan_acquire(p);
    __tsan_acquire((char *)p + 8);
#endif
    return ok;
#else /* aarch64: the exclusive pair, storing back on a mismatch so the read was one */
    uint64_t olo, ohi;
    uint32_t fail;
    __asm__ __volatile__("1: ldaxp %0, %1, %3\n"
                         "   cmp   %0, %4\n"
                         "   ccmp  %1, %5, #0, eq\n"
                         "   b.ne  2f\n"
                         "   stlxp %w2, %6, %7, %3\n"
                         "   cbnz  %w2, 1b\n"
                         "   b     3f\n"
                         "2: stlxp %w2, %0, %1, %3\n"
                         "   cbnz  %w2, 1b\n"
                         "3:\n"
                         : "=&r"(olo), "=&r"(ohi), "=&r"(fail), "+Q"(*(volatile vigil__u128 *)p)
                         : "r"(*lo), "r"(*hi), "r"(nlo), "r"(nhi)
                         : "cc", "memory");
    bool ok = olo == *lo && ohi == *hi;
    *lo = olo;
    *hi = ohi;
    return ok;
#endif
}

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
    VIGIL_ALIGNAS(16) VIGIL_ATOMIC(uint64_t) term; /* 32: leader term, +1 on each change of leader */
    VIGIL_ATOMIC(uint64_t) leader;     /* 40: (gen << 21) | (slot + 1) of the leader's registration, 0 = none */
    VIGIL_ALIGNAS(16) VIGIL_ATOMIC(uint64_t) elect_lock; /* 48: the elector's lock word (vigil-files(5)) */
    VIGIL_ATOMIC(uint64_t) elect_seq;  /* 56: odd while the election lock is held */
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
    VIGIL_ATOMIC(uint64_t) *mine;       /* per slot: the generation this handle registered there; 0 none;
                                         * with the top bit set, unregistered through this handle */
    struct vigil_journal *journal;      /* internal: the reclaim journal failover writes before it
                                         * vacates (`vigil failover --exec`), NULL none; not owned */
} vigil_hb;

int      vigil_hb_create(const char *path, uint32_t capacity, vigil_hb **out);
int      vigil_hb_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_hb **out);
int      vigil_hb_open(const char *path, uint32_t capacity, vigil_hb **out); /* 0 = the file's capacity */
/* For looking only (inspect, watch, export): needs read permission alone.
 * Peers' changes show as they land; nothing done through the handle
 * reaches the file (see vigil_hb_open_readonly(3)). */
int      vigil_hb_open_readonly(const char *path, uint32_t capacity, vigil_hb **out);
/* vigil_hb_open, or _readonly, with VIGIL_OPEN_* flags: VIGIL_OPEN_TRUST_OWNER
 * opens for writing a file another user could have made (see common.h). */
int      vigil_hb_open_flags(const char *path, uint32_t capacity, unsigned flags, vigil_hb **out);
/* create_mode with the file's group set too ((gid_t)-1: the creator's),
 * through the new file's descriptor before it has its name. */
int      vigil_hb_create_group(const char *path, uint32_t capacity, unsigned mode, gid_t group, vigil_hb **out);
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
 *
 * A beat names no registration (THE FENCE below is for marks and clears):
 * a stale beat, by a holder whose registration was failed over, lands in
 * whichever registration holds the slot now. It can only make that one
 * look live by epochs; the probe and failover_wait judge its pid anyway,
 * and every call that changes a slot is fenced (vigil_hb_beat(3)).
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
 * per unit of work), so direct calls go to this inline body through the
 * macros below; the library still exports both as functions (for function
 * pointers and other languages), as libc does with getc.
 *
 * THE FENCE (model: model/slot.pml). A mark names the registration it is
 * for: the bitmap and the slot's gen (the registration's generation,
 * which never recurs) sit side by side, and the mark changes the bitmap
 * only together with a check that gen is still the one this handle
 * registered, in one 16-byte compare-and-swap of the pair (vigil__cas16).
 * A failover that vacates the slot takes the bits and marks the gen
 * vacant in one such step, so a holder stopped anywhere in here, even
 * between its loads and its swap, and resumed after its slot was
 * reclaimed and registered again, fails the swap and is told VIGIL_ELOST:
 * its stale mark or clear never lands in a successor's bitmap. A swap
 * that fails only because the bits moved (another thread of the owner
 * marking) is retried with the bits it read.
 *
 * The swap is a full barrier, so it is release on both calls: a watchdog
 * that takes a bit also sees what the worker recorded about the unit
 * before marking it, and a unit's results are published before it stops
 * being in flight, so nobody reclaims and redoes finished work unseen.
 * The two loads before it are relaxed: they only guess what the swap
 * compares, and a wrong guess fails it.
 *
 * A slot this handle did not register (a supervisor's handle acting on a
 * worker's slot) has no registration to check against: such a call goes
 * out of line to vigil__hb_in_flight_unowned, which marks whichever
 * registration holds the slot, VIGIL_EVACANT when none. A slot the handle
 * registered and then unregistered gives VIGIL_EVACANT there too, whoever
 * holds it now.
 */
int vigil__hb_in_flight_unowned(vigil_hb *hb, uint32_t slot, uint64_t mask, bool set);

static inline int vigil_hb_in_flight_inline(vigil_hb *hb, uint32_t slot, unsigned bit, bool set)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity || bit >= 64)
        return VIGIL_ERANGE;
    uint64_t m = UINT64_C(1) << bit;
    uint64_t gen = VIGIL__LOAD(&hb->mine[slot], relaxed);
    if ((int64_t)gen <= 0) /* none made here, or unregistered since (the top bit) */
        return vigil__hb_in_flight_unowned(hb, slot, m, set);
    struct vigil_hb_slot *s = &hb->slots[slot];
    uint64_t bits = VIGIL__LOAD(&s->in_flight, relaxed), g = gen;
    while (!vigil__cas16(&s->in_flight, &bits, &g, set ? bits | m : bits & ~m, gen)) {
        if (g != gen)
            return VIGIL_ELOST; /* reclaimed: the slot is not this registration's */
        /* only the bits moved: bits holds them now */
    }
    return 0;
}
#define vigil_hb_mark_in_flight(hb, slot, bit)  vigil_hb_in_flight_inline((hb), (slot), (bit), true)
#define vigil_hb_clear_in_flight(hb, slot, bit) vigil_hb_in_flight_inline((hb), (slot), (bit), false)

#ifdef __cplusplus
}
#endif

#endif
