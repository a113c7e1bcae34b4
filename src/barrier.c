/* SPDX-License-Identifier: MIT */
/*
 * The epoch barrier: a cross-process phase barrier over a heartbeat table.
 *
 * File layout (kind 2), size 64 + capacity * 8, capacity = the heartbeat
 * table's (at most 2^20). All integers host byte order, naturally aligned.
 *
 *   offset size field
 *    0     8   magic "\177VIGIL\r\n"
 *    8     4   layout version (3)
 *   12     4   kind: 2 (barrier)
 *   16     4   capacity: slots, equal to the heartbeat table's
 *   20     4   flags: 0
 *   24     8   grace_epochs stored at create (open with 0 uses it)
 *   32     8   state (atomic): (epoch << 32) | unbound arrivals
 *   40     4   wake (atomic): futex word, +1 on a release that finds sleepers
 *   44     4   sleepers (atomic): waiters inside FUTEX_WAIT; a hint only
 *   48     8   gate (atomic): (epoch << 32) | committed (bit 31) |
 *              withdrawals from the round (31 bits); a release is decided
 *              by setting the bit, a withdrawal bumps the count
 *   56     8   withdrawals (atomic): counter of arrivals withdrawn by
 *              waiters that timed out, since create; wraps at 2^64
 *   64 + 8i 8  record of slot i (atomic): (epoch << 32) | pid of the slot's
 *              owner, the whole arrival of a handle bound to slot i,
 *              cleared when it withdraws; pid 0 = none
 *
 * A round is an epoch of the state word. An unbound arrival is one CAS
 * adding 1 to the count, a bound one the store of its record. A release
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
    .head_bytes = sizeof(struct vigil_barrier_header),
    .slot_bytes = sizeof(vigil_barrier_record),
};

/* ---- epoch, bind -------------------------------------------------------- */

uint32_t vigil_barrier_epoch(const vigil_barrier *b)
{
    if (!b)
        return 0;
    return st_epoch(atomic_load_explicit(&b->hdr->state, memory_order_acquire));
}

int vigil_barrier_bind(vigil_barrier *b, uint32_t slot)
{
    if (!b)
        return -EINVAL;
    if (slot >= b->capacity)
        return VIGIL_ERANGE;
    /* Relaxed: the owner of the moment, checked again by every wait. */
    uint32_t pid = atomic_load_explicit(&b->hb->slots[slot].pid, memory_order_relaxed);
    if (pid == 0)
        return VIGIL_EVACANT;
    /* Relaxed: one word read whole by the waits; nothing travels with it. */
    atomic_store_explicit(&b->bound, st_make(pid, slot), memory_order_relaxed);
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
    b->records = (vigil_barrier_record *)((char *)m->base + sizeof(struct vigil_barrier_header));
    b->hb = hb;
    b->map_size = m->size;
    b->capacity = m->capacity;
    if (grace == 0) {
        /* The stored grace, read once: a later scribble changes nothing. */
        memcpy(&grace, (const char *)m->base + offsetof(struct vigil_barrier_header, grace_epochs),
               sizeof(grace));
    }
    b->grace = grace;
    atomic_init(&b->bound, st_make(0, VIGIL_BARRIER_UNBOUND));
    b->avx2 = vigil_barrier_use_avx2();
    atomic_init(&b->tick_ns, 0);
    *out = b;
    return 0;
}

int vigil_barrier_create_mode(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                              vigil_barrier **out)
{
    if (!hb || !out)
        return -EINVAL;
    struct vigil_map m;
    int err = vigil_map_create(path, &vigil_barrier_layout, hb->capacity, mode, barrier_init,
                               &grace_epochs, &m);
    return err < 0 ? err : barrier_wrap(&m, hb, grace_epochs, out);
}

int vigil_barrier_create(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out)
{
    return vigil_barrier_create_mode(path, hb, grace_epochs, VIGIL_DEFAULT_MODE, out);
}

int vigil_barrier_open(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out)
{
    if (!hb || !out)
        return -EINVAL;
    struct vigil_map m;
    /* Asking for hb's capacity: a barrier file sized for another table is
     * VIGIL_ECAPACITY, so every slot index is valid in both files. */
    int err = vigil_map_open(path, &vigil_barrier_layout, hb->capacity, &m);
    return err < 0 ? err : barrier_wrap(&m, hb, grace_epochs, out);
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
    /* Read-only: opened O_RDONLY and mapped PROT_READ, so inspecting a
     * file can never change it. The checks are vigil_map_open's. */
    struct stat st;
    int fd = vigil_file_open_regular(path, O_RDONLY, &st);
    if (fd < 0)
        return fd;
    int err = VIGIL_EBADFILE;
    struct vigil_barrier_header h;
    if (st.st_size < (off_t)sizeof(h))
        goto out;
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    if (n < 0) {
        err = -errno;
        goto out;
    }
    if ((size_t)n != sizeof(h) || memcmp(h.magic, vigil_magic, sizeof(h.magic)) != 0 ||
        h.version != VIGIL_LAYOUT_VERSION || h.kind != VIGIL_KIND_BARRIER)
        goto out;
    uint32_t cap = h.capacity;
    size_t size = vigil_layout_size(&vigil_barrier_layout, cap);
    if (size == 0 || (uint64_t)st.st_size != (uint64_t)size)
        goto out;
    void *base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        err = -errno;
        goto out;
    }
    const struct vigil_barrier_header *mh = base;
    const vigil_barrier_record *rec = (const vigil_barrier_record *)((const char *)base + sizeof(h));
    uint64_t s = atomic_load_explicit(&mh->state, memory_order_acquire);
    uint32_t recorded = 0;
    /* Relaxed, here and for sleepers: a snapshot to look at, through
     * which nothing else is read. */
    for (uint32_t i = 0; i < cap; i++) {
        uint64_t r = atomic_load_explicit(&rec[i], memory_order_relaxed);
        recorded += st_epoch(r) == st_epoch(s) && st_arrived(r) != 0;
    }
    out->capacity = cap;
    out->epoch = st_epoch(s);
    out->arrived = st_arrived(s) + recorded; /* the count holds the unbound only */
    out->recorded = recorded;
    out->grace_epochs = h.grace_epochs;
    out->sleepers = atomic_load_explicit(&mh->sleepers, memory_order_relaxed);
    out->withdrawals = atomic_load_explicit(&mh->withdrawals, memory_order_relaxed);
    munmap(base, size);
    err = 0;
out:
    close(fd);
    return err;
}
