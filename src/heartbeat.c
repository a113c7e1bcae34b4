/* SPDX-License-Identifier: MIT */
/*
 * The heartbeat table: create/open, register/unregister under the slot
 * SeqLock, snapshots with bounded retry, live counting.
 *
 * File layout (kind 1, VIGIL_KIND_HEARTBEAT), host byte order, natural
 * alignment; size exactly 64 + capacity * 64 bytes:
 *
 *   offset  size  field
 *   header, one cache line
 *        0     8  magic "\177VIGIL\r\n"
 *        8     4  version            VIGIL_LAYOUT_VERSION (6)
 *       12     4  kind               1
 *       16     4  capacity           number of slots, 1 .. 2^20
 *       20     4  flags              0
 *       24     8  epoch              global epoch, atomic; only vigil_hb_tick moves it
 *       32     8  term               leader term (leader.c); {term, leader}
 *                                    change together, by one 16-byte swap
 *       40     8  leader             (gen << 21) | (slot + 1) of the leader's
 *                                    registration, 0 = none (leader.c)
 *       48     8  elect_lock         THE ELECTION LOCK's word: its holder's lock
 *                                    word (proc_internal.h), or the last one's
 *       56     8  elect_seq          odd while the election lock is held
 *                                    ({elect_lock, elect_seq}: a lock pair)
 *   slot i at 64 + i * 64, one cache line each, so beats never false-share
 *        0     4  pid                owner, 0 = vacant
 *        4     4  role               0 worker, 1 coordinator
 *        8     8  last_seen_epoch    epoch at the owner's last beat
 *       16     8  in_flight          bitmap of the owner's work units
 *       24     8  gen                the registration's generation: 0 never
 *                                    registered, g while registration g holds
 *                                    the slot, VIGIL_GEN_VACANT | g after it
 *                                    (REGISTRATIONS AND THEIR GENERATIONS,
 *                                    heartbeat_internal.h)
 *       32     8  writer             the structural writer's lock word
 *                                    (proc_internal.h): THE SLOT WRITER LOCK in
 *                                    heartbeat_internal.h
 *       40     8  seq                SeqLock version: odd while a structural
 *                                    change (register, unregister, reclaim,
 *                                    set_role) is in progress
 *       48     4  start_time         low 32 bits of the owner's start time,
 *                                    /proc/<pid>/stat field 22 (clock ticks
 *                                    since boot), 0 unknown
 *       52     4  owner_ns           registrant's pid namespace (inode of
 *                                    /proc/self/ns/pid, 32 bits as procfs
 *                                    makes them), 0 not recorded
 *       56     4  reclaims           counter: owners vacated by failover (failover.c)
 *       60     4  repairs            counter: repairs after a writer died
 *                                    mid-change (failover.c)
 *
 * A reader must check magic, version, kind, 1 <= capacity <= 2^20 and the
 * file size against 64 + capacity * 64 before touching a slot, and keep
 * its own copy of capacity afterwards (a peer may scribble the header).
 *
 * Registrations are counted by the generation itself. The two counters
 * are 32-bit and wrap; each is changed only by a writer holding the slot
 * writer lock (relaxed fetch_add), never by a beat or a mark, so a SeqLock
 * read gives a slot's counts and pid together (vigil_hb_stats).
 * Unregisters are registrations - reclaims - occupied.
 */
#define _GNU_SOURCE
#include "heartbeat_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

/* 2^20 slots is a 64 MiB file; far past any pool on one host. */
const struct vigil_layout vigil_hb_layout = {
    .kind = VIGIL_KIND_HEARTBEAT,
    .max_capacity = 1u << 20,
    .head_bytes = sizeof(struct vigil_hb_header),
    .slot_bytes = sizeof(struct vigil_hb_slot),
};

void (*vigil_slot_hook)(int point);

/* THE SLOT WRITER LOCK's slow paths; the take and the unlock are inline
 * (heartbeat_internal.h). */
int vigil_slot_take_over(struct vigil_hb_slot *s, uint64_t w, uint64_t odd, uint64_t *version)
{
    uint64_t held;
    if (!vigil_pair_take_over(&s->writer, w, odd, vigil_self_lock_word(), &held))
        return VIGIL_EBUSY;
    vigil_slot_locked(version, held);
    return 0;
}

int vigil_slot_lock(struct vigil_hb_slot *s, uint64_t *version)
{
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        if (vigil_slot_try_lock(s, version) == 0)
            return 0;
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}

static int hb_init(void *base, size_t size, uint32_t capacity, void *arg)
{
    (void)size, (void)capacity, (void)arg;
    /* ftruncate zero-filled the file: epoch 0, term 0, every slot vacant
     * with an even version. Nothing more to write. */
    (void)base;
    return 0;
}

static int hb_wrap(struct vigil_map *m, vigil_hb **out)
{
    vigil_hb *hb = malloc(sizeof(*hb));
    if (!hb) {
        vigil_map_close(m);
        return -ENOMEM;
    }
    hb->hdr = m->base;
    hb->slots = (struct vigil_hb_slot *)((char *)m->base + sizeof(struct vigil_hb_header));
    hb->capacity = m->capacity;
    hb->map_size = m->size;
    hb->watch = NULL;
    hb->journal = NULL;
    /* The handle's notes of its registrations, zeroed (calloc's untouched
     * pages cost nothing for the slots never registered through it). */
    hb->mine = calloc(m->capacity, sizeof(*hb->mine));
    if (!hb->mine) {
        free(hb);
        vigil_map_close(m);
        return -ENOMEM;
    }
    *out = hb;
    return 0;
}

/* Every change to a slot's identity is a 16-byte compare-and-swap
 * (vigil__cas16): a table is not opened for writing on a processor
 * without one (x86-64 processors before 2006 lack cmpxchg16b), which
 * vigil_cpu_has_cas16 tells. */
int vigil_hb_create_group(const char *path, uint32_t capacity, unsigned mode, gid_t group, vigil_hb **out)
{
    if (!out)
        return -EINVAL;
    if (!vigil_cpu_has_cas16())
        return -ENOTSUP;
    struct vigil_map m;
    const struct vigil_create_how how = { mode, group };
    int err = vigil_map_create(path, &vigil_hb_layout, capacity, &how, hb_init, NULL, &m);
    return err < 0 ? err : hb_wrap(&m, out);
}

int vigil_hb_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_hb **out)
{
    return vigil_hb_create_group(path, capacity, mode, (gid_t)-1, out);
}

int vigil_hb_create(const char *path, uint32_t capacity, vigil_hb **out)
{
    return vigil_hb_create_mode(path, capacity, VIGIL_DEFAULT_MODE, out);
}

int vigil_hb_open_flags(const char *path, uint32_t capacity, unsigned flags, vigil_hb **out)
{
    if (!out)
        return -EINVAL;
    if (!(flags & VIGIL_OPEN_READONLY) && !vigil_cpu_has_cas16())
        return -ENOTSUP;
    struct vigil_map m;
    int err = vigil_map_open_flags(path, &vigil_hb_layout, capacity, flags, &m);
    return err < 0 ? err : hb_wrap(&m, out);
}

int vigil_hb_open(const char *path, uint32_t capacity, vigil_hb **out)
{
    return vigil_hb_open_flags(path, capacity, 0, out);
}

int vigil_hb_open_readonly(const char *path, uint32_t capacity, vigil_hb **out)
{
    return vigil_hb_open_flags(path, capacity, VIGIL_OPEN_READONLY, out);
}

void vigil_hb_close(vigil_hb *hb)
{
    if (!hb)
        return;
    vigil_failover_watch_free(hb->watch);
    free((void *)hb->mine);
    struct vigil_map m = { .base = hb->hdr, .size = hb->map_size, .capacity = hb->capacity };
    vigil_map_close(&m);
    free(hb);
}

uint32_t vigil_hb_capacity(const vigil_hb *hb)
{
    return hb ? hb->capacity : 0;
}

uint64_t vigil_hb_tick(vigil_hb *hb)
{
    if (!hb)
        return 0;
    /* acq_rel: release publishes what the ticker did before the tick to
     * beaters that load this epoch; acquire keeps the ticker's own later
     * reads (a failover scan right after) from seeing an older table. */
    return atomic_fetch_add_explicit(&hb->hdr->epoch, 1, memory_order_acq_rel) + 1;
}

uint64_t vigil_hb_epoch(const vigil_hb *hb)
{
    if (!hb)
        return 0;
    return atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire);
}

/* What register stamps into a slot, worked out once per call. */
struct registrant {
    uint32_t pid;
    uint32_t start; /* low 32 bits of the owner's start time, 0 unknown */
    uint32_t ns;    /* the registrant's pid namespace, 0 not recorded */
    uint64_t me;    /* this process's lock word, for the slot's lock */
};

/* The owner's start time, against PID reuse, its low 32 bits as a slot
 * keeps it, and the registrant's namespace. A process nearly always
 * registers itself, and its own identity is cached (proc.c), so the
 * common register makes no system call; other pids go to /proc. */
static void registrant_of(uint32_t pid, struct registrant *r)
{
    struct vigil_self_id self;
    vigil_self_id(&self);
    uint64_t start = self.start;
    if (pid != self.pid && vigil_proc_start_time(pid, &start) < 0)
        start = 0; /* unknown: probe will answer "unknown", never "dead" */
    /* procfs inode numbers are 32-bit: one that is not is no namespace a
     * slot can name (0, not recorded). */
    *r = (struct registrant){ .pid = pid, .start = (uint32_t)start,
                              .ns = self.ns <= UINT32_MAX ? (uint32_t)self.ns : 0, .me = self.lock };
}

enum claim { CLAIMED, OCCUPIED, LOCKED };

/* How long vigil_hb_register looks again at vacant slots whose lock is
 * held before it calls the table full: the whole call's budget. */
#define REGISTER_BUDGET_NS (100u * 1000000u)

/* Claims slot i for r if it is vacant, with one attempt at its lock; on
 * CLAIMED *gen is the new registration's generation. */
static enum claim claim_vacant(vigil_hb *hb, uint32_t i, const struct registrant *r, uint64_t *gen)
{
    struct vigil_hb_slot *s = &hb->slots[i];
    uint64_t v;
    /* Cheap filter first; the decision is made under the lock. */
    if (atomic_load_explicit(&s->pid, memory_order_relaxed) != 0)
        return OCCUPIED;
    /* Taking the lock is the claim: of any number of racing registrants
     * exactly one holds it, and only that one may fill the slot. A loser
     * moves on to the next slot. */
    if (vigil_slot_try_lock_as(s, r->me, &v) < 0)
        return LOCKED;
    uint64_t word = atomic_load_explicit(&s->gen, memory_order_relaxed);
    uint64_t last = word & ~VIGIL_GEN_VACANT;
    if (atomic_load_explicit(&s->pid, memory_order_relaxed) != 0 || vigil_gen_of(word) != 0 ||
        last >= VIGIL_GEN_MAX) {
        /* Taken between the filter and the lock; or retired, its
         * generations spent (REGISTRATIONS AND THEIR GENERATIONS). */
        vigil_slot_unlock(s, v);
        return OCCUPIED;
    }
    uint64_t epoch = atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire);
    atomic_store_explicit(&s->last_seen_epoch, epoch, memory_order_relaxed);
    atomic_store_explicit(&s->in_flight, 0, memory_order_relaxed);
    atomic_store_explicit(&s->role, VIGIL_ROLE_WORKER, memory_order_relaxed);
    atomic_store_explicit(&s->start_time, r->start, memory_order_relaxed);
    /* The pid means something only in the registrant's pid namespace; a
     * prober elsewhere answers "unknown" rather than "dead". */
    atomic_store_explicit(&s->owner_ns, r->ns, memory_order_relaxed);
    /* The new registration's name, one past the last: it never recurs.
     * Relaxed, as every field under the lock: the unlock publishes it.
     * After in_flight's zero: a stale mark can match neither word, and
     * the bitmap is empty before any mark can name this generation. */
    *gen = last + 1;
    atomic_store_explicit(&s->gen, last + 1, memory_order_relaxed);
    slot_hook(SP_GEN_WRITTEN);
    atomic_store_explicit(&s->pid, r->pid, memory_order_relaxed);
    vigil_slot_unlock(s, v);
    return CLAIMED;
}

/* One attempt at every slot: true with *slot claimed (and noted in the
 * handle); *locked_vacant says whether a vacant slot's lock was held. */
static bool register_pass(vigil_hb *hb, const struct registrant *r, uint32_t *slot, bool *locked_vacant)
{
    *locked_vacant = false;
    for (uint32_t i = 0; i < hb->capacity; i++) {
        uint64_t gen;
        enum claim c = claim_vacant(hb, i, r, &gen);
        if (c == CLAIMED) {
            /* Relaxed: the handle's own note (vigil_hb_mine). */
            atomic_store_explicit(&hb->mine[i], gen, memory_order_relaxed);
            *slot = i;
            return true;
        }
        *locked_vacant |= c == LOCKED;
    }
    return false;
}

int vigil_hb_register(vigil_hb *hb, uint32_t pid, uint32_t *slot)
{
    if (!hb || !slot)
        return -EINVAL;
    if (pid == 0)
        return VIGIL_ERANGE;
    struct registrant r;
    registrant_of(pid, &r);

    bool locked_vacant;
    if (register_pass(hb, &r, slot, &locked_vacant))
        return 0;
    /*
     * A vacant slot whose lock was held for a moment (a failover scan
     * taking its stray bits, a registrant that found it taken) may be
     * vacant still: look again for a while before calling the table full.
     * The budget is the whole call's, not each slot's: slots wedged by a
     * writer killed mid-change (until failover repairs them) or by a
     * scribbling peer cost one failed look each per pass, so even 2^20 of
     * them end the call within about REGISTER_BUDGET_NS.
     */
    uint64_t deadline = vigil_now_ns() + REGISTER_BUDGET_NS;
    for (unsigned pass = 0; locked_vacant && vigil_now_ns() < deadline; pass++) {
        struct timespec ts = { 0, (long)(pass < 10 ? 100000u << (pass / 2) : 2000000u) };
        nanosleep(&ts, NULL);
        if (register_pass(hb, &r, slot, &locked_vacant))
            return 0;
    }
    return VIGIL_EFULL;
}

/*
 * Is the slot's current registration (gen) one this handle may change?
 * 0 yes; VIGIL_ELOST when the handle registered the slot and that
 * registration is gone (failed over, perhaps registered again by another
 * process: a stale holder must not touch its successor's); VIGIL_EVACANT
 * when the slot is vacant and the handle holds no registration there. A
 * slot registered through another handle (a supervisor's) is this
 * handle's to change while it is occupied, as before generations.
 */
static int may_change(const vigil_hb *hb, uint32_t slot, uint64_t gen)
{
    /* Relaxed: the handle's own note (vigil_hb_mine). */
    uint64_t mine = atomic_load_explicit(&hb->mine[slot], memory_order_relaxed);
    if (mine & VIGIL_GEN_VACANT)
        return VIGIL_EVACANT; /* unregistered through this handle */
    if (mine != 0)
        return gen == mine ? 0 : VIGIL_ELOST;
    return gen != 0 ? 0 : VIGIL_EVACANT;
}

int vigil_hb_unregister(vigil_hb *hb, uint32_t slot)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity)
        return VIGIL_ERANGE;
    struct vigil_hb_slot *s = &hb->slots[slot];
    uint64_t v;
    int err = vigil_slot_lock(s, &v);
    if (err < 0)
        return err;
    /* Under the lock the registration cannot change: the check and the
     * vacancy are about the same one (model/slot.pml's unreg run found
     * the late unregister that vacated its successor). */
    uint64_t word = atomic_load_explicit(&s->gen, memory_order_relaxed);
    err = may_change(hb, slot, vigil_gen_of(word));
    if (err < 0) {
        /* The handle's note stays: every later call about the lost
         * registration is told VIGIL_ELOST too, never taken for a
         * supervisor's and let loose on the successor. */
        vigil_slot_unlock(s, v);
        return err;
    }
    /* Relaxed: the handle's own note; the top bit keeps this handle's
     * later calls about the slot from acting on a successor's. */
    if (atomic_load_explicit(&hb->mine[slot], memory_order_relaxed) != 0)
        atomic_store_explicit(&hb->mine[slot], word | VIGIL_GEN_VACANT, memory_order_relaxed);
    atomic_store_explicit(&s->pid, 0, memory_order_relaxed);
    /* The gen first: from this store on, the owner's other threads' marks
     * fail (THE FENCE); one that landed before it is dropped with the
     * rest of the bits, as unregister drops in-flight work. Plain stores
     * beside their swaps: each is one atomic word, and the swap of the
     * pair is atomic against both. */
    atomic_store_explicit(&s->gen, word | VIGIL_GEN_VACANT, memory_order_relaxed);
    atomic_store_explicit(&s->in_flight, 0, memory_order_relaxed);
    atomic_store_explicit(&s->role, VIGIL_ROLE_WORKER, memory_order_relaxed);
    atomic_store_explicit(&s->last_seen_epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->start_time, 0, memory_order_relaxed);
    atomic_store_explicit(&s->owner_ns, 0, memory_order_relaxed);
    vigil_slot_unlock(s, v);
    return 0;
}

int vigil_hb_owned(const vigil_hb *hb, uint32_t slot)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity)
        return VIGIL_ERANGE;
    uint64_t mine = vigil_hb_mine(hb, slot); /* 0 when unregistered through hb */
    return mine != 0 && vigil_slot_gen(&hb->slots[slot]) == mine;
}

/* The exported functions behind the header's macros (the parentheses
 * keep the macros from expanding here); THE FENCE is told at the inline
 * body in <vigil/heartbeat.h>. */
int (vigil_hb_mark_in_flight)(vigil_hb *hb, uint32_t slot, unsigned bit)
{
    return vigil_hb_in_flight_inline(hb, slot, bit, true);
}

int (vigil_hb_clear_in_flight)(vigil_hb *hb, uint32_t slot, unsigned bit)
{
    return vigil_hb_in_flight_inline(hb, slot, bit, false);
}

/* A mark through a handle that holds no registration of the slot: the
 * fence is taken against whichever registration holds it now, so the
 * mark lands in one registration's bitmap, never in a vacant slot. */
int vigil__hb_in_flight_unowned(vigil_hb *hb, uint32_t slot, uint64_t mask, bool set)
{
    if (atomic_load_explicit(&hb->mine[slot], memory_order_relaxed) != 0)
        return VIGIL_EVACANT; /* unregistered through this handle: not its to change */
    struct vigil_hb_slot *s = &hb->slots[slot];
    uint64_t bits = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
    uint64_t word = atomic_load_explicit(&s->gen, memory_order_relaxed);
    for (;;) {
        uint64_t gen = vigil_gen_of(word);
        if (gen == 0)
            return VIGIL_EVACANT;
        if (vigil__cas16(&s->in_flight, &bits, &word, set ? bits | mask : bits & ~mask, gen))
            return 0;
    }
}

int vigil_hb_set_role(vigil_hb *hb, uint32_t slot, uint32_t role)
{
    if (!hb)
        return -EINVAL;
    if (slot >= hb->capacity || role > VIGIL_ROLE_COORDINATOR)
        return VIGIL_ERANGE;
    struct vigil_hb_slot *s = &hb->slots[slot];
    uint64_t v;
    int err = vigil_slot_lock(s, &v);
    if (err < 0)
        return err;
    /* Under the lock: the registration checked is the one whose role is
     * written, never a successor's (a stale holder gets VIGIL_ELOST). */
    err = may_change(hb, slot, vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed)));
    if (err == 0)
        atomic_store_explicit(&s->role, role, memory_order_relaxed);
    vigil_slot_unlock(s, v);
    return err;
}

int vigil_hb_snapshot(const vigil_hb *hb, uint32_t slot, vigil_slot_info *out)
{
    if (!hb || !out)
        return -EINVAL;
    if (slot >= hb->capacity)
        return VIGIL_ERANGE;
    struct vigil_slot_words w;
    int err = vigil_slot_read(&hb->slots[slot], &w, false);
    if (err < 0)
        return err;
    *out = w.info;
    return w.info.pid ? 0 : VIGIL_EVACANT;
}

uint32_t vigil_hb_live_count(const vigil_hb *hb, uint64_t grace_epochs)
{
    if (!hb)
        return 0;
    uint64_t epoch = atomic_load_explicit(&hb->hdr->epoch, memory_order_acquire);
    uint32_t live = 0;
    /* Two single-word loads per slot, no SeqLock: each word is atomic and
     * a count is a moment's estimate anyway. */
    for (uint32_t i = 0; i < hb->capacity; i++) {
        const struct vigil_hb_slot *s = &hb->slots[i];
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t seen = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
        live += vigil_hb_is_live_at(pid, seen, epoch, grace_epochs);
    }
    return live;
}

/* The counters sit in the slot's spare words; their offsets are the file
 * format's (vigil-files(5)). */
_Static_assert(offsetof(struct vigil_hb_slot, role) == 4 && offsetof(struct vigil_hb_slot, last_seen_epoch) == 8 &&
                   offsetof(struct vigil_hb_slot, in_flight) == 16 && offsetof(struct vigil_hb_slot, gen) == 24 &&
                   offsetof(struct vigil_hb_slot, writer) == 32 && offsetof(struct vigil_hb_slot, seq) == 40 &&
                   offsetof(struct vigil_hb_slot, start_time) == 48 &&
                   offsetof(struct vigil_hb_slot, owner_ns) == 52 &&
                   offsetof(struct vigil_hb_slot, reclaims) == 56 && offsetof(struct vigil_hb_slot, repairs) == 60,
               "slot words at their documented offsets");

/* Reads of a slot's counts that a writer may overlap before the counts are
 * taken one by one: a wedged slot must not slow the sum down. */
#define STATS_TRIES 4

int vigil_hb_stats(const vigil_hb *hb, vigil_hb_counters *out)
{
    if (!hb || !out)
        return -EINVAL;
    vigil_hb_counters c = { 0 };
    for (uint32_t i = 0; i < hb->capacity; i++) {
        const struct vigil_hb_slot *s = &hb->slots[i];
        uint64_t reg = 0;
        uint32_t rec = 0, rep = 0, pid = 0;
        for (unsigned t = 0; t < STATS_TRIES; t++) {
            /* The SeqLock read, as vigil_slot_read: counts and pid change
             * only under the writer lock, so an unchanged even version
             * gives them as one registration left them, and the derived
             * unregister count is exact. After STATS_TRIES the words are
             * taken as they are (a moment's estimate of a busy slot). */
            uint64_t v1 = atomic_load_explicit(&s->seq, memory_order_acquire);
            /* Registrations are counted by the generation itself. */
            reg = atomic_load_explicit(&s->gen, memory_order_relaxed) & ~VIGIL_GEN_VACANT;
            rec = atomic_load_explicit(&s->reclaims, memory_order_relaxed);
            rep = atomic_load_explicit(&s->repairs, memory_order_relaxed);
            pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
            atomic_thread_fence(memory_order_acquire);
            if (!(v1 & 1u) && atomic_load_explicit(&s->seq, memory_order_relaxed) == v1)
                break;
        }
        c.registers += reg;
        c.reclaims += rec;
        c.repairs += rep;
        c.occupied += pid != 0;
        /* Modulo 2^32 as the reclaim count is, so its wrap cancels out. */
        c.unregisters += (uint32_t)(reg - rec - (pid != 0));
    }
    c.leader_changes = atomic_load_explicit(&hb->hdr->term, memory_order_acquire);
    *out = c;
    return 0;
}

/* Where the beats of a beater for no slot go: two words of the library's
 * own, so that such a beater needs no check on the hot path. */
static _Atomic uint64_t beater_sink_epoch, beater_sink_seen;

vigil_beater vigil_hb_beater(vigil_hb *hb, uint32_t slot)
{
    if (!hb || slot >= hb->capacity)
        return (vigil_beater){ .epoch = &beater_sink_epoch, .seen = &beater_sink_seen };
    return (vigil_beater){ .epoch = &hb->hdr->epoch, .seen = &hb->slots[slot].last_seen_epoch };
}
