/* SPDX-License-Identifier: MIT */
/* Epoch barrier internals: the file layout, the handle and the helpers
 * shared by barrier.c, barrier_wait.c and barrier_live.c, and with the
 * tests and the bench. The byte layout is told in src/barrier.c. */
#ifndef VIGIL_SRC_BARRIER_INTERNAL_H
#define VIGIL_SRC_BARRIER_INTERNAL_H

#include <vigil/barrier.h>
#include "heartbeat_internal.h"

/* Offsets 0..63 of a barrier file; arrival records follow at 64. */
struct vigil_barrier_header {
    uint8_t          magic[8];     /*  0: "\177VIGIL\r\n" */
    uint32_t         version;      /*  8: VIGIL_LAYOUT_VERSION */
    uint32_t         kind;         /* 12: VIGIL_KIND_BARRIER */
    uint32_t         capacity;     /* 16: slots, equal to the heartbeat table's */
    uint32_t         flags;        /* 20: 0 */
    uint64_t         grace_epochs; /* 24: grace stored at create */
    _Atomic uint64_t state;        /* 32: (epoch << 32) | unbound arrivals */
    _Atomic uint32_t wake;         /* 40: futex word, +1 on a release that finds sleepers */
    _Atomic uint32_t sleepers;     /* 44: waiters inside FUTEX_WAIT (a hint) */
    _Atomic uint64_t gate;         /* 48: (epoch << 32) | GATE_COMMITTED | withdrawals */
    _Atomic uint64_t withdrawals;  /* 56: counter: arrivals withdrawn since create (wraps) */
};
_Static_assert(sizeof(struct vigil_barrier_header) == 64, "barrier header is one cache line");

/*
 * THE RELEASE RECORD (src/barrier_info.c): who each release counted and
 * left out. After the header: RELEASE_MARKS marks, one per round mod
 * RELEASE_MARKS, naming the judgement that released it; then the release
 * counter (tickets); then RELEASE_PLACES places, each a judgement's own
 * header here and its per-slot entries after the records. Every word a
 * judgement writes is tagged with its ticket, which never recurs.
 */
#define RELEASE_MARKS  8u
#define RELEASE_PLACES 8u
#define MARK_VALID     (UINT32_C(1) << 31) /* a mark's low half: valid, then the ticket's low 31 bits */
#define TICKET_LOW     (MARK_VALID - 1)

/* One 16-byte pair written whole by vigil__cas16: a value and the ticket
 * of the judgement that wrote it. */
typedef struct vigil_release_pair {
    _Alignas(16) _Atomic uint64_t value;
    _Atomic uint64_t              ticket;
} vigil_release_pair;

/* A place's header: the round judged, the judge, the counts. */
struct vigil_release_head {
    vigil_release_pair round;  /* (epoch << 32) | unbound arrivals counted; claimed first */
    vigil_release_pair serial; /* the judge's binding (gen << BOUND_SLOT_BITS | slot), 0 unbound */
    vigil_release_pair counts; /* (counted << 32) | left out */
    uint64_t           pad[2];
};
_Static_assert(sizeof(struct vigil_release_head) == 64, "a place's header is one cache line");

/* Offsets 64..703 of a barrier file. */
struct vigil_barrier_releases {
    _Atomic uint64_t          marks[RELEASE_MARKS]; /*  64: (epoch << 32) | MARK_VALID | ticket low 31 bits */
    _Atomic uint64_t          tickets;              /* 128: judgements recorded so far */
    uint64_t                  pad[7];
    struct vigil_release_head heads[RELEASE_PLACES]; /* 192 */
};
_Static_assert(sizeof(struct vigil_barrier_releases) == 640, "the release area is ten cache lines");

/* An entry's value: (gen << 2) | why (the VIGIL_BARRIER_COUNTED, _DEAD or
 * _ABSENT of <vigil/barrier.h>). */
#define ENTRY_WHY_BITS 2

/* Record of slot i at 704 + i * 16, THE RECORD in src/barrier.c: the
 * arrival of the slot's registration `gen` at round `epoch`. One 16-byte
 * compare-and-swap writes both words (rec_cas). */
typedef struct vigil_barrier_record {
    _Alignas(16) _Atomic uint64_t ep; /* (epoch << 32) | REC_ARRIVED; 0 none (withdrawn, or never) */
    _Atomic uint64_t              gen; /* the registration that wrote it; never decreases */
} vigil_barrier_record;
_Static_assert(sizeof(vigil_barrier_record) == 16, "a record is 16 bytes");

#define REC_ARRIVED 1u

#define VIGIL_BARRIER_UNBOUND UINT32_MAX
/* The handle's binding, one word: (gen << BOUND_SLOT_BITS) | slot, gen 0
 * unbound. A gen fits in VIGIL_GEN_BITS (43) and a slot in 21 bits. */
#define BOUND_SLOT_BITS 21
_Static_assert(VIGIL_GEN_BITS + BOUND_SLOT_BITS <= 64, "a binding is one word");

/* The gate's low half: bit 31 says the round's release is decided, the
 * other 31 bits count withdrawals from the round (barrier_wait.c). */
#define GATE_COMMITTED (UINT32_C(1) << 31)
/* A committed gate's low 31 bits are the committing judgement's ticket
 * (no withdrawal counts after the commit), which the marks copy. */

/* Test hook, called at the points below when set (tests only). */
enum { BP_JUDGED = 1, BP_COMMITTED, BP_RECORDING, BP_RECORDED, BP_WITHDRAWN, BP_WITHDRAWING, BP_START_READ,
       BP_PLACE_CLAIMED, BP_MOVED, BP_TICKET };
extern void (*vigil_barrier_hook)(int point);
static inline void barrier_hook(int point)
{
    void (*h)(int) = vigil_barrier_hook;
    if (h)
        h(point);
}

/* The state word, a record and the gate alike: (epoch << 32) | low half. */
static inline uint32_t st_epoch(uint64_t s) { return (uint32_t)(s >> 32); }
static inline uint32_t st_arrived(uint64_t s) { return (uint32_t)s; }
static inline uint64_t st_make(uint32_t epoch, uint32_t n) { return (uint64_t)epoch << 32 | n; }

/* Serial-number arithmetic (RFC 1982): > 0 when a is after b, < 0 before,
 * correct across the wrap at 2^32 as long as the two are less than 2^31
 * rounds apart. */
static inline int32_t ep_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

struct vigil_barrier {
    struct vigil_barrier_header *hdr;
    struct vigil_barrier_releases *rel;  /* right after hdr */
    vigil_barrier_record        *records;
    vigil_release_pair          *entries; /* place p's entry for slot i: entries[p * capacity + i] */
    vigil_hb                    *hb;
    size_t                       map_size;
    uint32_t                     capacity;  /* this process's copy, checked at open */
    uint64_t                     grace;     /* the handle's grace: stored or overridden */
    _Atomic uint64_t             bound;     /* (gen << BOUND_SLOT_BITS) | slot, 0 unbound */
    _Atomic uint64_t             tick_ns;   /* learnt heartbeat tick interval, 0 unknown */
    bool                         avx2;      /* the live scan may use AVX2 */
    bool                         cas16;     /* this processor has the 16-byte CAS the release record needs */
};

extern const struct vigil_layout vigil_barrier_layout;

/*
 * The liveness rule of the heartbeat table (vigil_hb_is_live_at) with one
 * subtraction and one unsigned compare per slot instead of two compares:
 * a slot is live when pid != 0 and age = epoch - last_seen (mod 2^64) is
 * at most grace or "negative" (>= 2^63: a beat racing the read). So it is
 * dead exactly when age is in [grace + 1, 2^63 - 1], that is when
 * x = age - (grace + 1) = base - last_seen is in [0, 2^63 - grace - 2].
 * A vacant slot is given x = 0, which is never above k. A grace of
 * 2^63 - 1 or more leaves no dead ages at all.
 */
struct live_rule {
    uint64_t base; /* epoch - grace - 1 */
    uint64_t k;    /* live when x > k */
    bool     any;  /* every occupied slot is live */
};

static inline struct live_rule live_rule(const vigil_barrier *b)
{
    uint64_t epoch = atomic_load_explicit(&b->hb->hdr->epoch, memory_order_acquire);
    uint64_t g = b->grace;
    if (g >= (UINT64_C(1) << 63) - 1)
        return (struct live_rule){ 0, 0, true };
    return (struct live_rule){ epoch - g - 1, (UINT64_C(1) << 63) - g - 2, false };
}

static inline uint32_t is_live(struct live_rule r, uint32_t pid, uint64_t seen)
{
    if (r.any)
        return pid != 0;
    uint64_t x = pid ? r.base - seen : 0;
    return x > r.k;
}

/* Whether the live scan may use AVX2 here (barrier_live.c); asked once
 * per handle at open. */
bool vigil_barrier_use_avx2(void);

/* ---- records ------------------------------------------------------------ */

static inline uint64_t rec_make(uint32_t epoch) { return st_make(epoch, REC_ARRIVED); }

/*
 * One compare-and-swap of a whole record: if it holds (*ep, *gen), it
 * becomes (new_ep, new_gen) and true; else *ep, *gen get what it holds.
 * vigil__cas16: lock cmpxchg16b on x86-64 (seq_cst, as every locked
 * instruction), which every x86-64 processor since 2006 has
 * (vigil_barrier_cas16_ok says so at bind). A kill lands before or after
 * it, never inside: an arrival is this one instruction.
 */
static inline bool rec_cas(vigil_barrier_record *r, uint64_t *ep, uint64_t *gen, uint64_t new_ep, uint64_t new_gen)
{
    /* ep, the word at the lower address, is the pair's low half. */
    return vigil__cas16((void *)r, ep, gen, new_ep, new_gen);
}

/* Whether this processor has the 16-byte compare-and-swap rec_cas uses. */
bool vigil_barrier_cas16_ok(void);

/*
 * The registration whose arrival at `epoch` record r holds, or 0: the gen
 * word read on both sides of the stamp. A record's gen never decreases
 * (no arrival writes over a later registration's record, a withdrawal
 * keeps the gen: THE RECORD in src/barrier.c), so the same gen read before
 * and after means every write in between was that registration's, and
 * the stamp read between them is one of its own: three 8-byte loads give
 * what one 16-byte load would. The
 * stamp's load is seq_cst (THE PROTOCOL); the first gen load is acquire
 * so the stamp is read after it, the second is relaxed, after the stamp's
 * load, which is an acquire.
 */
static inline uint64_t rec_gen_at(const vigil_barrier_record *r, uint32_t epoch)
{
    uint64_t g1 = atomic_load_explicit(&r->gen, memory_order_acquire);
    uint64_t ep = atomic_load_explicit(&r->ep, memory_order_seq_cst);
    uint64_t g2 = atomic_load_explicit(&r->gen, memory_order_relaxed);
    return ep == rec_make(epoch) && g1 == g2 ? g1 : 0;
}

/* A slot's pid, last beat and registration as one SeqLock snapshot; gen 0
 * when the slot stayed mid-change for a few looks (then no record counts
 * for it, and its liveness is the words as read). */
struct slot_look {
    uint32_t pid;
    uint64_t seen, gen;
};

static inline struct slot_look slot_look(const struct vigil_hb_slot *s)
{
    struct slot_look l = { 0, 0, 0 };
    for (unsigned tries = 0; tries < 4; tries++) {
        /* As vigil_slot_read: an unchanged even version around the loads
         * says no structural writer overlapped them (a beat may have, and
         * is a moment's liveness anyway). */
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_acquire);
        l.pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        l.seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        l.gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
        /* ONLY AN ARGUMENT PROTECTS THIS FENCE (no instruction on x86-64,
         * which keeps loads in order): without it a weaker processor may
         * read the second version before the fields, and take a newcomer's
         * pid with its predecessor's gen for one snapshot. */
        atomic_thread_fence(memory_order_acquire);
        if (!(v & 1u) && atomic_load_explicit(&s->seq, memory_order_relaxed) == v)
            return l;
    }
    l.gen = 0;
    return l;
}

/* The release rule a waiter judges by: quorum 0 and all, the all-live
 * rule (wait); a quorum alone (wait_quorum); both, the start's (a quorum
 * of participants, and no live peer left out: vigil_barrier_start). */
struct rule {
    uint32_t quorum;
    bool     all;
};

/* THE RELEASE RECORD (barrier_info.c). judge_recorded: the judgement of
 * a round found complete under gate value `gate`, made again while it is
 * written into a place; 1 and *ticket when that pass finds the round
 * complete, else 0. mark:
 * before the state leaves a committed round, its mark names the record. */
int  vigil_barrier__judge_recorded(vigil_barrier *b, uint32_t epoch, uint64_t s, uint64_t gate, uint32_t quorum,
                                   bool all, uint64_t binding, uint64_t *ticket);
void vigil_barrier__mark(vigil_barrier *b, uint32_t epoch, uint64_t gate);

/* How long a waiter spins (pause instructions, about 30 ns each here) and
 * how many times it yields before it sleeps in the kernel. Chosen with
 * bench/bench_barrier.c; not part of the API. */
#define VIGIL_BARRIER_SPIN   8
#define VIGIL_BARRIER_YIELDS 4

#endif
