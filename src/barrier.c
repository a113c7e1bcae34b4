/* SPDX-License-Identifier: MIT */
/*
 * The epoch barrier: a cross-process phase barrier over a heartbeat table.
 *
 * File layout (kind 2), size 704 + capacity * 144, capacity = the
 * heartbeat table's (at most 2^20). All integers host byte order,
 * naturally aligned; P = 8 places, M = 8 marks.
 *
 *   offset size field
 *    0     8   magic "\177VIGIL\r\n"
 *    8     4   layout version (6)
 *   12     4   kind: 2 (barrier)
 *   16     4   capacity: slots, equal to the heartbeat table's
 *   20     4   flags: 0
 *   24     8   grace_epochs stored at create (open with 0 uses it)
 *   32     8   state (atomic): (epoch << 32) | unbound arrivals
 *   40     4   wake (atomic): futex word, +1 on a release that finds sleepers
 *   44     4   sleepers (atomic): waiters inside FUTEX_WAIT; a hint only
 *   48     8   gate (atomic): (epoch << 32) | committed (bit 31) |
 *              withdrawals from the round (31 bits); a release is decided
 *              by setting the bit and the committing judgement's ticket's
 *              low 31 bits in place of the count, a withdrawal bumps it
 *   56     8   withdrawals (atomic): counter of arrivals withdrawn by
 *              waiters that timed out, since create; wraps at 2^64
 *   64+8m  8   mark m (atomic), of the rounds r with r mod M = m:
 *              (r << 32) | valid (bit 31) | the ticket's low 31 bits of
 *              the judgement that released r (THE RELEASE RECORD,
 *              src/barrier_info.c)
 *   128    8   tickets (atomic): judgements recorded since create
 *   136    56  0
 *   192+64p 64 place p's header, three pairs {value, ticket} written
 *              whole by 16-byte CAS: +0 round (epoch << 32 | unbound
 *              arrivals counted), +16 serial (the judge's binding, gen
 *              << 21 | slot, 0 unbound), +32 counts (counted << 32 |
 *              left out); +48 16 bytes of 0
 *   704+16i 16 record of slot i, 16-byte aligned, written whole by one
 *              16-byte compare-and-swap (THE RECORD, below):
 *                +0 8  ep: (epoch << 32) | 1, the arrival at that round;
 *                      0 none (never, or withdrawn)
 *                +8 8  gen: the registration (the heartbeat slot's gen)
 *                      whose arrival it is; never decreases
 *   704+16C+16(pC+i) 16  place p's entry for slot i, a pair {(gen << 2) |
 *              why, ticket}: why 1 counted, 2 left out dead, 3 left out
 *              absent (C = capacity)
 *
 * THE RECORD names a registration, never a pid (model: model/barrier.pml,
 * runs recur and recur_old; tests: test_barrier_identity.c). A pid is
 * recycled, and a slot reclaimed from a dead or stalled owner is
 * registered again, perhaps by a process with the same pid: a record of
 * (epoch, pid) counted that newcomer as arrived. A gen never recurs
 * (heartbeat_internal.h). So:
 *
 *   - A handle is bound to a registration: bind reads the slot's gen.
 *   - Its arrival is one 16-byte CAS of the record to (epoch, gen), from
 *     the value last read, made only after the slot was seen, after that
 *     read, to hold the bound gen still; else it is VIGIL_ELOST and the
 *     record is left as it is. A value naming a later registration would
 *     mean the check came after that registration began, and failed; a
 *     record changed after the read fails the CAS. So a stale handle that
 *     checked, stalled, and resumes after its slot went to a newcomer
 *     either fails (the newcomer arrived: ELOST) or writes a record naming
 *     its own, gone, gen, which counts for no one and which the
 *     newcomer's arrival replaces. A record's gen therefore never
 *     decreases (short of a peer scribbling the file).
 *   - A judge counts a record stamped with the round only if the gen it
 *     names is the slot's gen now and the slot is live, the slot's pid,
 *     last beat and gen read as one SeqLock snapshot (so a newcomer's
 *     liveness is never joined to its predecessor's gen), the record read
 *     gen, stamp, gen (rec_gen_at: as good as one 16-byte load).
 *   - A withdrawal is a CAS of its own (epoch, gen) to (0, gen).
 *
 * A round is an epoch of the state word. An unbound arrival is one CAS
 * adding 1 to the count, a bound one the CAS of its record. A release
 * is committed by one CAS on the gate, which fails after any withdrawal
 * since the judgement began, then the state moves to (epoch + 1, 0); the
 * committer gets VIGIL_SERIAL. The protocol and its proof are told in
 * src/barrier_wait.c.
 *
 * The waits (arrival, the release rule, withdrawal, sleeping) are in
 * src/barrier_wait.c, the live count in src/barrier_live.c, what the
 * three files share in src/barrier_internal.h.
 */
#define _GNU_SOURCE
#include "barrier_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const struct vigil_layout vigil_barrier_layout = {
    .kind = VIGIL_KIND_BARRIER,
    .max_capacity = 1u << 20, /* the heartbeat table's maximum */
    .head_bytes = sizeof(struct vigil_barrier_header) + sizeof(struct vigil_barrier_releases),
    .slot_bytes = sizeof(vigil_barrier_record) + RELEASE_PLACES * sizeof(vigil_release_pair),
};

/* ---- epoch, bind -------------------------------------------------------- */

uint32_t vigil_barrier_epoch(const vigil_barrier *b)
{
    if (!b)
        return 0;
    return st_epoch(atomic_load_explicit(&b->hdr->state, memory_order_acquire));
}

bool vigil_barrier_cas16_ok(void)
{
    return vigil_cpu_has_cas16();
}

int vigil_barrier_bind(vigil_barrier *b, uint32_t slot)
{
    if (!b)
        return -EINVAL;
    if (slot >= b->capacity)
        return VIGIL_ERANGE;
    if (!vigil_barrier_cas16_ok())
        return -ENOTSUP; /* no records here: unbound handles still work */
    /* The registration the slot holds now: this handle's own, when it
     * registered the slot (a slot registered again since is not ours);
     * else whoever's it is (a supervisor binding for a worker). Checked
     * again at every arrival. */
    uint64_t gen = vigil_slot_gen(&b->hb->slots[slot]);
    if (gen == 0)
        return VIGIL_EVACANT;
    uint64_t mine = vigil_hb_mine(b->hb, slot);
    if (mine != 0 && mine != gen)
        return VIGIL_ELOST;
    /* Relaxed: one word read whole by the waits; nothing travels with it. */
    atomic_store_explicit(&b->bound, gen << BOUND_SLOT_BITS | slot, memory_order_relaxed);
    vigil_hb_beat(b->hb, slot);
    return 0;
}

int vigil_barrier_stats(const vigil_barrier *b, vigil_barrier_counters *out)
{
    if (!b || !out)
        return -EINVAL;
    /* Acquire on the state, as vigil_barrier_epoch; relaxed on the count,
     * a statistic through which nothing else is read. */
    uint64_t s = atomic_load_explicit(&b->hdr->state, memory_order_acquire);
    out->releases = st_epoch(s);
    out->withdrawals = atomic_load_explicit(&b->hdr->withdrawals, memory_order_relaxed);
    return 0;
}

/* ---- create, open, close, peek ------------------------------------------ */

static int barrier_init(void *base, size_t size, uint32_t capacity, void *arg)
{
    (void)size, (void)capacity;
    /* ftruncate zero-filled the rest: epoch 0, arrived 0, no records. */
    struct vigil_barrier_header *h = base;
    h->grace_epochs = *(const uint64_t *)arg;
    return 0;
}

static int barrier_wrap(struct vigil_map *m, vigil_hb *hb, uint64_t grace, vigil_barrier **out)
{
    vigil_barrier *b = malloc(sizeof(*b));
    if (!b) {
        vigil_map_close(m);
        return -ENOMEM;
    }
    b->hdr = m->base;
    b->rel = (struct vigil_barrier_releases *)((char *)m->base + sizeof(struct vigil_barrier_header));
    b->records = (vigil_barrier_record *)(b->rel + 1);
    b->entries = (vigil_release_pair *)(b->records + m->capacity);
    b->hb = hb;
    b->map_size = m->size;
    b->capacity = m->capacity;
    if (grace == 0) {
        /* The stored grace, read once: a later scribble changes nothing. */
        memcpy(&grace, (const char *)m->base + offsetof(struct vigil_barrier_header, grace_epochs),
               sizeof(grace));
    }
    b->grace = grace;
    atomic_init(&b->bound, 0);
    b->avx2 = vigil_barrier_use_avx2();
    b->cas16 = vigil_barrier_cas16_ok();
    atomic_init(&b->tick_ns, 0);
    *out = b;
    return 0;
}

int vigil_barrier_create_group(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode, gid_t group,
                               vigil_barrier **out)
{
    if (!hb || !out)
        return -EINVAL;
    struct vigil_map m;
    const struct vigil_create_how how = { mode, group };
    int err = vigil_map_create(path, &vigil_barrier_layout, hb->capacity, &how, barrier_init, &grace_epochs, &m);
    return err < 0 ? err : barrier_wrap(&m, hb, grace_epochs, out);
}

int vigil_barrier_create_mode(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                              vigil_barrier **out)
{
    return vigil_barrier_create_group(path, hb, grace_epochs, mode, (gid_t)-1, out);
}

int vigil_barrier_create(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out)
{
    return vigil_barrier_create_mode(path, hb, grace_epochs, VIGIL_DEFAULT_MODE, out);
}

int vigil_barrier_open_flags(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned flags,
                             vigil_barrier **out)
{
    if (!hb || !out || (flags & VIGIL_OPEN_READONLY))
        return -EINVAL;
    struct vigil_map m;
    /* Asking for hb's capacity: a barrier file sized for another table is
     * VIGIL_ECAPACITY, so every slot index is valid in both files. */
    int err = vigil_map_open_flags(path, &vigil_barrier_layout, hb->capacity, flags, &m);
    return err < 0 ? err : barrier_wrap(&m, hb, grace_epochs, out);
}

int vigil_barrier_open(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out)
{
    return vigil_barrier_open_flags(path, hb, grace_epochs, 0, out);
}

void vigil_barrier_close(vigil_barrier *b)
{
    if (!b)
        return;
    struct vigil_map m = { .base = b->hdr, .size = b->map_size, .capacity = b->capacity };
    vigil_map_close(&m);
    free(b);
}

int vigil_barrier_peek(const char *path, vigil_barrier_state *out)
{
    if (!path || !out)
        return -EINVAL;
    /* Read-only: opened O_RDONLY and mapped private (or copied, for a
     * file with holes), so inspecting a file can never change it, nor
     * fault on a full file system. */
    struct vigil_map m;
    int err = vigil_map_open_flags(path, &vigil_barrier_layout, 0, VIGIL_OPEN_READONLY, &m);
    if (err < 0)
        return err;
    const struct vigil_barrier_header *mh = m.base;
    const vigil_barrier_record *rec =
        (const vigil_barrier_record *)((const char *)m.base + vigil_barrier_layout.head_bytes);
    uint64_t s = atomic_load_explicit(&mh->state, memory_order_acquire);
    uint32_t recorded = 0;
    /* Relaxed, here and for sleepers: a snapshot to look at, through
     * which nothing else is read. */
    for (uint32_t i = 0; i < m.capacity; i++)
        recorded += atomic_load_explicit(&rec[i].ep, memory_order_relaxed) == rec_make(st_epoch(s));
    out->capacity = m.capacity;
    out->epoch = st_epoch(s);
    out->arrived = st_arrived(s) + recorded; /* the count holds the unbound only */
    out->recorded = recorded;
    out->grace_epochs = mh->grace_epochs;
    out->sleepers = atomic_load_explicit(&mh->sleepers, memory_order_relaxed);
    out->withdrawals = atomic_load_explicit(&mh->withdrawals, memory_order_relaxed);
    vigil_map_close(&m);
    return 0;
}
