/* SPDX-License-Identifier: MIT */
/*
 * The reclaim journal: its file, its entries' moves, the run lock and the
 * sweep. THE JOURNAL, the protocol, is told in journal_internal.h; the
 * claim's own steps are in failover.c, next to the claim.
 *
 * File layout (kind 4, VIGIL_KIND_JOURNAL), host byte order; size exactly
 * 128 + capacity * 64 bytes (vigil-files(5), "journal"):
 *
 *   offset  size  field
 *   header
 *        0     8  magic "\177VIGIL\r\n"
 *        8     4  version            VIGIL_LAYOUT_VERSION (6)
 *       12     4  kind               4
 *       16     4  capacity           entries, 1 .. 65536
 *       20     4  flags              0
 *       24     8  last_ticket        the last ticket handed out (0 none)
 *       32     8  run_word           THE RUN LOCK: its holder's lock word,
 *       40     8  run_seq            odd while held (a lock pair)
 *       48     4  table_capacity     the table's, when the journal was made
 *       52     4  run_pgid           the running CMD's process group, 0 none
 *       56     8  run_start          its leader's start time (clock ticks
 *                                    since boot, /proc/PID/stat field 22)
 *       64     8  table_dev          the table's st_dev and st_ino when the
 *       72     8  table_ino          journal was made: its entries name
 *                                    that table's slots, and no other's
 *       80    48  reserved           0
 *   entry i at 128 + i * 64
 *        0     8  state              bits 63..61 the state (0 free,
 *                                    1 claiming, 2 pending, 3 running,
 *                                    4 done), 60..0 the ticket
 *        8     8  owner              lock word of who moves it on, 0 none
 *       16     4  slot               the slot reclaimed
 *       20     4  pid                its owner's pid
 *       24     8  gen                the registration reclaimed; 0 while
 *                                    free or being begun
 *       32     8  in_flight          the bits handed over
 *       40     8  epoch              the table's epoch at the reclaim
 *       48     4  why                1 stale, 2 exited
 *       52     4  outcome            VJ_OUT_* once done
 *       56     8  claimer            lock word of the watchdog that
 *                                    reclaimed it
 *
 * A hostile file: every field read is bounded where it is used (a slot
 * past the table's capacity is not looked up, a state past 4 is taken
 * for none, an owner word that no holder writes is judged dead, so an
 * entry a peer scribbled is at worst finished and logged, never run
 * twice by vigil's own moves, which are all swaps from what was read).
 */
#define _GNU_SOURCE
#include "journal_internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heartbeat_internal.h"
#include "proc_internal.h"
#include "spin_internal.h"

void (*vigil_journal_hook)(int point);
bool (*vigil_journal_group_ours)(uint32_t pgid, uint64_t ticket);

const struct vigil_layout vigil_journal_layout = {
    .kind = VIGIL_KIND_JOURNAL,
    .max_capacity = VIGIL_JOURNAL_MAX_CAPACITY,
    .head_bytes = sizeof(struct vigil_journal_header),
    .slot_bytes = sizeof(struct vigil_journal_entry),
};

/* ---- the file ---------------------------------------------------------------- */

static int journal_init(void *base, size_t size, uint32_t capacity, void *arg)
{
    (void)size, (void)capacity;
    /* ftruncate zero-filled the rest: every entry FREE with gen 0, the
     * run lock free, no ticket yet. */
    struct vigil_journal_header *h = base;
    const struct vigil_journal_table *t = arg;
    h->table_capacity = t->capacity;
    h->table_dev = t->dev;
    h->table_ino = t->ino;
    return 0;
}

static int journal_wrap(struct vigil_map *m, vigil_journal **out)
{
    struct vigil_journal_header *h = m->base;
    if (h->flags != 0) {
        vigil_map_close(m);
        return VIGIL_EBADFILE;
    }
    vigil_journal *j = malloc(sizeof(*j));
    if (!j) {
        vigil_map_close(m);
        return -ENOMEM;
    }
    j->map = *m;
    j->hdr = h;
    j->e = (struct vigil_journal_entry *)((char *)m->base + sizeof(*h));
    j->capacity = m->capacity;
    j->kill_pgid = 0;
    j->kill_since = 0;
    j->starved = false;
    j->starved_said = false;
    *out = j;
    return 0;
}

int vigil_journal_create(const char *path, uint32_t capacity, const struct vigil_journal_table *table, unsigned mode,
                         gid_t group, vigil_journal **out)
{
    if (!out || !table)
        return -EINVAL;
    struct vigil_map m;
    const struct vigil_create_how how = { mode, group };
    int err = vigil_map_create(path, &vigil_journal_layout, capacity, &how, journal_init, (void *)table, &m);
    return err < 0 ? err : journal_wrap(&m, out);
}

int vigil_journal_open_flags(const char *path, unsigned flags, vigil_journal **out)
{
    if (!out)
        return -EINVAL;
    struct vigil_map m;
    int err = vigil_map_open_flags(path, &vigil_journal_layout, 0, flags, &m);
    return err < 0 ? err : journal_wrap(&m, out);
}

int vigil_journal_open(const char *path, vigil_journal **out)
{
    return vigil_journal_open_flags(path, 0, out);
}

int vigil_journal_open_readonly(const char *path, vigil_journal **out)
{
    return vigil_journal_open_flags(path, VIGIL_OPEN_READONLY, out);
}

void vigil_journal_close(vigil_journal *j)
{
    if (!j)
        return;
    vigil_map_close(&j->map);
    free(j);
}

/* ---- entries ----------------------------------------------------------------- */

int vigil_journal_read(const vigil_journal *j, uint32_t idx, struct vigil_journal_rec *out)
{
    if (idx >= j->capacity)
        return VIGIL_ERANGE;
    const struct vigil_journal_entry *e = &j->e[idx];
    for (int attempt = 0; attempt < 64; attempt++) {
        /* As a SeqLock read, the state word being the version: the fields
         * read between two equal loads of it are one moment's (every move
         * is a full-barrier swap of it, after the fields it publishes). */
        uint64_t s1 = atomic_load_explicit(&e->state, memory_order_acquire);
        struct vigil_journal_rec r;
        r.idx = idx;
        r.state = vj_state(s1);
        r.ticket = vj_ticket(s1);
        r.owner = atomic_load_explicit(&e->owner, memory_order_relaxed);
        /* gen first, acquire: begin writes it last, with release, so the
         * fields below are the entry's own once gen is not 0. */
        r.gen = atomic_load_explicit(&e->gen, memory_order_acquire);
        r.slot = atomic_load_explicit(&e->slot, memory_order_relaxed);
        r.pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
        r.in_flight = atomic_load_explicit(&e->in_flight, memory_order_relaxed);
        r.epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
        r.why = atomic_load_explicit(&e->why, memory_order_relaxed);
        r.outcome = atomic_load_explicit(&e->outcome, memory_order_relaxed);
        r.claimer = atomic_load_explicit(&e->claimer, memory_order_relaxed);
        /* The loads complete before the state is read again. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->state, memory_order_relaxed) == s1) {
            *out = r;
            return 0;
        }
    }
    return VIGIL_EBUSY;
}

bool vigil_journal_move(vigil_journal *j, uint32_t idx, uint64_t from, uint64_t from_owner, uint64_t to,
                        uint64_t to_owner)
{
    if (idx >= j->capacity)
        return false;
    /* A full barrier (vigil__cas16): the fields written before it are
     * visible to whoever sees the new pair. */
    return vigil__cas16(&j->e[idx].state, &from, &from_owner, to, to_owner);
}

int vigil_journal_begin(vigil_journal *j, uint64_t me, uint32_t slot, uint32_t pid, uint64_t gen, uint64_t bits,
                        uint32_t why, uint64_t epoch, uint32_t *idx, uint64_t *word)
{
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_entry *e = &j->e[i];
        /* Relaxed: a guess, which the swap compares. */
        uint64_t s = atomic_load_explicit(&e->state, memory_order_relaxed);
        if (vj_state(s) != VJ_FREE)
            continue;
        uint64_t o = atomic_load_explicit(&e->owner, memory_order_relaxed);
        /* Relaxed: the ticket only has to be unique; the swap publishes it. */
        uint64_t t = atomic_fetch_add_explicit(&j->hdr->last_ticket, 1, memory_order_relaxed) + 1;
        uint64_t w = vj_word(VJ_CLAIMING, t);
        if (!vigil_journal_move(j, i, s, o, w, me))
            continue; /* taken meanwhile (the ticket is lost: a gap, harmless) */
        /* The entry is ours; gen last, with release: whoever reads a gen
         * that is not 0 reads the fields with it (a claimer killed before
         * it left gen 0, and then nothing was vacated). */
        atomic_store_explicit(&e->slot, slot, memory_order_relaxed);
        atomic_store_explicit(&e->pid, pid, memory_order_relaxed);
        atomic_store_explicit(&e->in_flight, bits, memory_order_relaxed);
        atomic_store_explicit(&e->epoch, epoch, memory_order_relaxed);
        atomic_store_explicit(&e->why, why, memory_order_relaxed);
        atomic_store_explicit(&e->outcome, 0, memory_order_relaxed);
        atomic_store_explicit(&e->claimer, me, memory_order_relaxed);
        atomic_store_explicit(&e->gen, gen, memory_order_release);
        *idx = i;
        *word = w;
        journal_hook(JP_BEGUN);
        return 0;
    }
    return VIGIL_EFULL;
}

void vigil_journal_set_bits(vigil_journal *j, uint32_t idx, uint64_t bits)
{
    /* Relaxed: the claim's swap that follows is a full barrier, so a
     * repairer that sees the swap's gen sees these bits. */
    atomic_store_explicit(&j->e[idx].in_flight, bits, memory_order_relaxed);
}

int64_t vigil_journal_claiming(const vigil_journal *j, uint32_t slot, uint64_t owner, struct vigil_journal_rec *out)
{
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state == VJ_CLAIMING && r.slot == slot && r.owner == owner) {
            *out = r;
            return i;
        }
    }
    return -1;
}

/* Entry r, whose owner we are (r->owner == me), back to free: gen 0
 * first, so that a free entry never carries a registration a half-made
 * begin could be taken for. Only the owner writes an entry's fields, so
 * no store of ours lands in an entry someone else has begun since. */
static bool free_entry(vigil_journal *j, const struct vigil_journal_rec *r)
{
    atomic_store_explicit(&j->e[r->idx].gen, 0, memory_order_relaxed);
    return vigil_journal_move(j, r->idx, vj_word(r->state, r->ticket), r->owner, vj_word(VJ_FREE, r->ticket), 0);
}

/* Entry r made ours, in the state it has: the one way a process other
 * than an entry's owner (a dead one) may go on with it. */
static bool adopt(vigil_journal *j, struct vigil_journal_rec *r, uint64_t me)
{
    uint64_t w = vj_word(r->state, r->ticket);
    if (!vigil_journal_move(j, r->idx, w, r->owner, w, me))
        return false;
    r->owner = me;
    return true;
}

/* ---- THE RUN LOCK ------------------------------------------------------------ */

int vigil_journal_run_take(vigil_journal *j, uint64_t me, uint64_t *held)
{
    return vigil_pair_take(&j->hdr->run_word, me, held);
}

void vigil_journal_run_release(vigil_journal *j, uint64_t held)
{
    /* Relaxed: the pair's release below publishes it to the next holder. */
    atomic_store_explicit(&j->hdr->run_pgid, 0, memory_order_relaxed);
    vigil_pair_release(&j->hdr->run_word, held);
}

void vigil_journal_run_group(vigil_journal *j)
{
    /* The start time first, the group last with release: a sweeper that
     * reads this group reads its start time. vigil_self_start_time in a
     * forked child reads /proc/self/stat afresh (open, read, a parse). */
    atomic_store_explicit(&j->hdr->run_start, vigil_self_start_time(), memory_order_relaxed);
    atomic_store_explicit(&j->hdr->run_pgid, (uint32_t)getpid(), memory_order_release);
}

int vigil_journal_next_pending(const vigil_journal *j, struct vigil_journal_rec *out)
{
    bool found = false;
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state == VJ_PENDING && (!found || r.ticket < out->ticket)) {
            *out = r;
            found = true;
        }
    }
    return found ? 0 : VIGIL_EVACANT;
}

void vigil_journal_counts(const vigil_journal *j, uint32_t counts[5])
{
    memset(counts, 0, 5 * sizeof(counts[0]));
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state <= VJ_DONE)
            counts[r.state]++;
    }
}

/* ---- the sweep ------------------------------------------------------------------ */

static bool dead(const vigil_journal *j, uint64_t w)
{
    /* An owner maps the journal: a pid whose process maps none of it is
     * not the one recorded. */
    return vigil_lock_holder_dead(w, j->map.base);
}

/* Finishes entry r (RUNNING or CLAIMING, ours) as `out`, for us to log. */
static bool finish_as(vigil_journal *j, const struct vigil_journal_rec *r, uint32_t out)
{
    atomic_store_explicit(&j->e[r->idx].outcome, out, memory_order_relaxed);
    return vigil_journal_move(j, r->idx, vj_word(r->state, r->ticket), r->owner, vj_word(VJ_DONE, r->ticket),
                              r->owner);
}

/* Step 5, first: what the dead guardian w's CMD left of its process
 * group, sent SIGKILL. True once there is nothing (more) to wait for:
 * none named, gone, another process's id now, not proven its CMD's, not
 * ours to signal (EPERM, another pid namespace), or 5 s since our first
 * SIGKILL. The header is anyone's who may write the journal: the group
 * it names is signalled only when vigil_journal_group_ours (the tool's)
 * finds a live member whose environment names the entry's ticket, so a
 * forged header cannot turn a watchdog (root's) on another's processes. */
static bool run_group_gone(vigil_journal *j, uint64_t w, uint64_t me)
{
    uint32_t pg = atomic_load_explicit(&j->hdr->run_pgid, memory_order_acquire);
    if (pg == 0 || pg > INT_MAX || vigil_lock_ns(w) != vigil_lock_ns(me) || !vigil_journal_group_ours)
        return true;
    uint64_t start = atomic_load_explicit(&j->hdr->run_start, memory_order_relaxed), now_start;
    char state;
    /* The leader there with another start time: the id was handed out
     * again, so the group (which kept it while it had members) is gone.
     * The leader gone, members may still hold the id: theirs, then. */
    if (vigil_proc_stat(pg, &state, &now_start) == 0 && now_start != start)
        return true;
    /* The dead guardian's entry, whose ticket its CMD was given. */
    struct vigil_journal_rec r;
    uint32_t i = 0;
    while (i < j->capacity && !(vigil_journal_read(j, i, &r) == 0 && r.state == VJ_RUNNING && r.owner == w))
        i++;
    if (i == j->capacity || !vigil_journal_group_ours(pg, r.ticket))
        return true;
    if (kill(-(pid_t)pg, SIGKILL) != 0)
        return true; /* ESRCH: gone; EPERM: nothing more we can do */
    uint64_t now = vigil_now_ns();
    if (j->kill_pgid != pg) {
        j->kill_pgid = pg;
        j->kill_since = now;
    }
    /* A zombie leader its new parent has not reaped yet, or members we
     * may not signal, keep kill(2) answering: not for ever. */
    return now - j->kill_since >= UINT64_C(5000000000);
}

/* Step 5: a dead guardian's run lock. */
static void sweep_run_lock(vigil_journal *j, uint64_t me)
{
    uint64_t w, s;
    /* The holding first, then the judgement (LOCK PAIRS). */
    if (!vigil_pair_read(&j->hdr->run_word, &w, &s) || !(s & 1u) || !dead(j, w))
        return;
    /* The next CMD only once the dead one's group is gone: the next sweep
     * looks again. */
    if (!run_group_gone(j, w, me))
        return;
    uint64_t held;
    if (!vigil_pair_take_over(&j->hdr->run_word, w, s, me, &held))
        return; /* another sweeper, or it changed hands */
    /* Holding it, every RUNNING entry is a dead holder's. */
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state == VJ_RUNNING && adopt(j, &r, me))
            finish_as(j, &r, VJ_OUT_UNKNOWN);
    }
    vigil_journal_run_release(j, held);
}

/* Step 3: a dead claimer's entry whose slot is no longer its to repair. */
static void sweep_claiming(vigil_journal *j, const vigil_hb *hb, struct vigil_journal_rec *r, uint64_t me)
{
    const struct vigil_hb_slot *s = NULL;
    if (r->gen != 0) {
        if (!hb || r->slot >= hb->capacity)
            return;
        s = &hb->slots[r->slot];
        /* Still locked (by the dead claimer, or by a repair under way):
         * the repair settles it under the lock (step 2). */
        if (atomic_load_explicit(&s->seq, memory_order_acquire) & 1u)
            return;
    }
    if (!adopt(j, r, me))
        return; /* another sweeper, or a repair, moved it */
    if (!s) {
        free_entry(j, r); /* begun, never finished: nothing was taken */
        return;
    }
    /* The slot's registration as it is now: the dead claimer's lock was
     * released by a repair that did not settle the entry (a scan without
     * the journal), and nothing changes a slot's gen back. */
    uint64_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (g == r->gen)
        free_entry(j, r); /* its registration still holds the slot: nothing taken */
    else
        finish_as(j, r, VJ_OUT_UNSURE);
}

int vigil_journal_sweep(vigil_journal *j, const vigil_hb *hb, uint64_t me)
{
    sweep_run_lock(j, me);
    int mine = 0;
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) != 0)
            continue;
        if (r.state == VJ_CLAIMING && dead(j, r.owner))
            sweep_claiming(j, hb, &r, me);
        else if (r.state == VJ_DONE && r.owner != me && dead(j, r.owner))
            adopt(j, &r, me); /* step 6: a dead watchdog's DONE entry, ours to log */
    }
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state == VJ_DONE && r.owner == me)
            mine++;
    }
    return mine;
}
