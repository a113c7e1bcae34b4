/* SPDX-License-Identifier: MIT */
/*
 * The embedded lease store: a vigil file of kind leases, the default lease
 * backend on one host.
 *
 * File layout (little-endian as the host writes it; 64 + capacity * 256 bytes)
 *
 *   header, offset 0, 64 bytes
 *     0  u8[8]  magic "\177VIGIL\r\n"
 *     8  u32    layout version (1)
 *    12  u32    kind (3, leases)
 *    16  u32    capacity: number of entries
 *    20  u32    flags (0)
 *    24  u64    last_token: the last fencing token handed out (0 none);
 *               every hand-over takes the next one
 *    32  u64    bind_lock: 0 free, else a lock word (below) of the process
 *               binding a key to an entry
 *    40  u32    entry_bytes (256)
 *    44  u32[5] reserved (0)
 *
 *   entry i, offset 64 + i * 256, 256 bytes
 *     0  u64    ctl: the entry's state word (below)
 *     8  u64    token: fencing token of the current hand-over
 *    16  u64    ttl_ms: what a renewal extends the expiry by
 *    24  u32    hash: FNV-1a of the key (never 0 while bound), 0 unbound
 *    28  u32    bound: 0 never used, 1 bound to the key, 2 cleared after
 *               a crashed change (reusable)
 *    32  u32    gen_hint: generation of the last unlocked ctl a locker saw
 *    36  u32    pid of the acquiring process (information only)
 *    40  u8[24] reserved (0)
 *    64  u8[128] key, NUL-padded
 *   192  u8[64] owner, NUL-padded
 *
 *   ctl, unlocked (bit 63 clear):
 *     bits 62..42  generation: moves on every change of hands
 *     bits 41..0   expiry, milliseconds of CLOCK_MONOTONIC; 0 released
 *   ctl locked, and bind_lock held (bit 63 set):
 *     bits 62..32  low 31 bits of the locker's start time (clock ticks since
 *                  boot, /proc/<pid>/stat field 22), against PID reuse
 *     bits 31..0   the locker's pid
 *
 * CLOCK_MONOTONIC is the same clock for every process on the host (outside
 * time namespaces), so an expiry written by one process is read correctly
 * by all the others, and no wall-clock step moves it.
 *
 * Why a per-entry CAS protocol and not a robust process-shared mutex:
 *
 *  - The hot path, renew, is one CAS on ctl: no lock, no syscall.
 *  - A robust pthread mutex keeps glibc's robust-list pointers inside the
 *    shared file; the holder writes through them at unlock. A hostile or
 *    broken peer that scribbles them makes another process write to
 *    addresses of the peer's choosing. A file that any peer can write must
 *    only ever hold plain data, which is all the protocol below reads.
 *  - pthread_mutex_t's size and layout belong to one libc and one ABI; the
 *    file's layout is fixed here, for every process that maps it.
 *
 * The protocol:
 *
 *  - Renew and release are one CAS on ctl from the unlocked word they read
 *    (unexpired, token and key matching) to the same generation with a new
 *    expiry (renew) or to the next generation with expiry 0 (release). Of a
 *    renewal racing a take-over exactly one CAS wins.
 *  - A change of hands (acquire of an expired or released entry, binding a
 *    key to an entry) locks ctl by CAS from the unlocked word to the lock
 *    word, and only from a word whose lease has lapsed, so a lock never
 *    cuts a live lease short and a renewer that finds ctl locked is right
 *    to report VIGIL_ELOST. The locker writes token, ttl and owner (and
 *    the key for a new binding) and unlocks with the next generation and
 *    the new expiry.
 *  - No ABA: a renewer's CAS only succeeds from the exact word it checked.
 *    Every lock starts from an expired word, and what follows it is either
 *    expiry 0 or now + ttl, later than anything that had expired; release
 *    moves the generation on; so an unexpired word never comes back.
 *  - Keys are unique: a key is bound to an entry only under the store's
 *    bind lock, after a scan of every entry (keys change only under that
 *    lock, or are cleared by recovery) found it bound nowhere.
 *  - A process killed at any instruction: outside a lock it leaves nothing
 *    half done (every other write is a single CAS). Killed holding an
 *    entry's lock, its partial writes are thrown away: the next process
 *    that meets the lock and finds its holder dead (no such pid, a zombie,
 *    or a pid reused by a process that started at another time) takes the
 *    lock over by CAS, clears the entry (no key, no holder) and unlocks.
 *    The key it was changing is then bound afresh by its next acquirer,
 *    with a token from the header counter, which only ever grows: the
 *    fencing order survives the crash. A dead holder of the bind lock is
 *    replaced the same way; that lock guards no data of its own.
 *    A lock held by a live process is waited for, boundedly (10 ms), then
 *    VIGIL_EBUSY: a process stopped inside a change is never robbed, so a
 *    resumed one can never write over its successor.
 *  - Every process sharing a store must see the same pids (one pid
 *    namespace), as for the heartbeat table's probe.
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"
#include "spin.h"

void (*vigil_leases_hook)(int point);

static inline void hook(int point)
{
    void (*h)(int) = vigil_leases_hook;
    if (__builtin_expect(h != NULL, 0))
        h(point);
}

static const struct vigil_layout leases_layout = {
    .kind = VIGIL_KIND_LEASES,
    .max_capacity = VIGIL_LEASES_MAX_CAPACITY,
    .head_bytes = sizeof(struct vigil_leases_header),
    .slot_bytes = sizeof(struct vigil_leases_entry),
};

/* ---- words and clocks ---------------------------------------------------- */

static inline uint64_t ctl_gen(uint64_t c) { return (c >> CTL_GEN_SHIFT) & CTL_GEN_MASK; }
static inline uint64_t ctl_exp(uint64_t c) { return c & CTL_EXP_MASK; }
static inline uint64_t ctl_make(uint64_t gen, uint64_t exp_ms)
{
    return ((gen & CTL_GEN_MASK) << CTL_GEN_SHIFT) | (exp_ms & CTL_EXP_MASK);
}

static inline bool unexpired(uint64_t exp_ms, uint64_t now_ns)
{
    /* exp_ms < 2^42, so the product stays below 2^62. */
    return exp_ms != 0 && exp_ms * 1000000u > now_ns;
}

/* Expiry for a lease renewed now: rounded up to the next millisecond, so a
 * lease never lapses before its TTL has passed. */
static inline uint64_t expiry_for(uint64_t now_ns, uint64_t ttl_ms)
{
    uint64_t ms = now_ns / 1000000u + 1;
    return ttl_ms >= CTL_EXP_MASK - ms ? CTL_EXP_MASK : ms + ttl_ms;
}

static uint32_t key_hash(const uint64_t *kw)
{
    const unsigned char *p = (const unsigned char *)kw;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < 128 && p[i]; i++)
        h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

/* A string into NUL-padded words, so the entry's fields are compared and
 * written as whole atomic words. */
static void to_words(uint64_t *w, size_t nwords, const char *s, size_t len)
{
    memset(w, 0, nwords * 8);
    memcpy(w, s, len);
}

static bool words_eq(const _Atomic uint64_t *field, const uint64_t *w, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++)
        if (atomic_load_explicit(&field[i], memory_order_relaxed) != w[i])
            return false;
    return true;
}

static void words_store(_Atomic uint64_t *field, const uint64_t *w, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++)
        atomic_store_explicit(&field[i], w[i], memory_order_relaxed);
}

/* Copies a field out as a C string: bounded by the field, always
 * terminated, whatever a peer wrote there. */
static void words_to_str(char *dst, size_t cap, const _Atomic uint64_t *field)
{
    for (size_t i = 0; i < cap / 8; i++) {
        uint64_t v = atomic_load_explicit(&field[i], memory_order_relaxed);
        memcpy(dst + i * 8, &v, 8);
    }
    dst[cap - 1] = '\0';
    size_t n = strlen(dst);
    memset(dst + n, 0, cap - n);
}

static inline bool key_matches(const struct vigil_leases_entry *e, uint32_t h, const uint64_t *kw)
{
    return atomic_load_explicit(&e->bound, memory_order_relaxed) == ENTRY_BOUND &&
           atomic_load_explicit(&e->hash, memory_order_relaxed) == h &&
           words_eq(e->key, kw, 16);
}

/* ---- who holds a lock ---------------------------------------------------- */

/* This process's lock word, from its cached identity (proc.c: no system
 * call after the first, and a forked child never sees its parent's). An
 * unknown start time is 0: peers then judge by the pid alone. */
static inline uint64_t my_lock_word(void)
{
    return CTL_LOCKED | (vigil_self_start_time() & 0x7fffffffu) << 32 | vigil_self_pid();
}

/* Whether the process named by a lock word is provably gone. "Don't know"
 * counts as alive: robbing a live locker is the one unrecoverable mistake.
 * A pid past 2^31 - 1 is no process (a scribble); one of our own threads
 * (same pid, same start tag) is alive without a look at /proc. */
static bool locker_dead(uint64_t w)
{
    return vigil_holder_dead((uint32_t)w, (w >> 32) & 0x7fffffffu, 0x7fffffffu, 0, 0);
}

/* ---- entry locks --------------------------------------------------------- */

static inline bool entry_lock_from(struct vigil_leases_entry *e, uint64_t c, uint64_t me)
{
    /* Acquire: the fields read under the lock are at least as new as the
     * ones the last unlocker published. */
    if (!atomic_compare_exchange_strong_explicit(&e->ctl, &c, me, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    /* The lock word is visible before any field changes: a reader that
     * sees a changed field re-reads ctl after its acquire fence and finds
     * it locked (the SeqLock rule, with ctl as the version). */
    atomic_thread_fence(memory_order_release);
    return true;
}

static inline void entry_unlock(struct vigil_leases_entry *e, uint64_t gen, uint64_t exp_ms)
{
    atomic_store_explicit(&e->gen_hint, (uint32_t)(gen & CTL_GEN_MASK), memory_order_relaxed);
    /* Release: every field written under the lock is visible to whoever
     * reads this word, and to whoever reads a renewal's CAS after it. */
    atomic_store_explicit(&e->ctl, ctl_make(gen, exp_ms), memory_order_release);
}

/* Takes over the lock of a dead process and throws its change away: the
 * entry ends cleared, with no key and no holder. Returns true if this call
 * or another made progress (ctl is no longer `dead`). */
static bool recover_entry(struct vigil_leases_entry *e, uint64_t dead)
{
    uint64_t me = my_lock_word();
    uint64_t c = dead;
    /* Of several processes that find the same dead locker, one CAS wins;
     * the rest see the winner's lock and wait for it like any other. */
    if (!atomic_compare_exchange_strong_explicit(&e->ctl, &c, me, memory_order_acquire,
                                                 memory_order_relaxed))
        return true;
    atomic_thread_fence(memory_order_release);
    hook(LP_RECOVER_LOCKED);
    /* Cleared, not never-used: "never used" ends a lookup's probe, and a
     * key bound further on may have been probed past this entry. */
    /* Release: a binder that reads CLEARED here (then fences, see bind)
     * comes after everything this entry saw, the dead process's token
     * included, so the token it takes is greater. */
    atomic_store_explicit(&e->bound, ENTRY_CLEARED, memory_order_release);
    atomic_store_explicit(&e->hash, 0, memory_order_relaxed);
    static const uint64_t zero[16];
    words_store(e->key, zero, 16);
    words_store(e->owner, zero, 8);
    atomic_store_explicit(&e->pid, 0, memory_order_relaxed);
    /* The dead locker may have died before recording the generation it
     * locked from: step past both the recorded one and the next. Expiry 0
     * matches no word a renewer could hold, so any generation is safe. */
    uint64_t gen = atomic_load_explicit(&e->gen_hint, memory_order_relaxed) + 2u;
    entry_unlock(e, gen, 0);
    return true;
}

/* How long a live locker is waited for (a change takes well under a
 * microsecond: this is for one preempted mid-change), and how often it is
 * asked whether it died meanwhile (about what 128 yields took before the
 * wait was written in time: a /proc look costs microseconds, so only a
 * lock that outlives the spin is worth one, and then not on every look). */
#define LOCK_WAIT_NS  10000000u
#define LOCK_JUDGE_NS 200000u

/* Waits for ctl to be unlocked: a bounded wait for a live locker, a
 * take-over for a dead one. 0 with *c unlocked, or VIGIL_EBUSY. */
static int wait_unlocked(struct vigil_leases_entry *e, uint64_t *c)
{
    struct vigil_lock_wait wait = { .budget_ns = LOCK_WAIT_NS, .judge_ns = LOCK_JUDGE_NS };
    bool judge = false;
    for (;;) {
        uint64_t w = atomic_load_explicit(&e->ctl, memory_order_acquire);
        if (!(w & CTL_LOCKED)) {
            *c = w;
            return 0;
        }
        if (judge && locker_dead(w)) {
            recover_entry(e, w);
            judge = false;
            continue;
        }
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}

static int bind_lock(struct vigil_leases_header *h)
{
    uint64_t me = my_lock_word();
    struct vigil_lock_wait wait = { .budget_ns = LOCK_WAIT_NS, .judge_ns = LOCK_JUDGE_NS };
    bool judge = false;
    for (;;) {
        uint64_t w = atomic_load_explicit(&h->bind_lock, memory_order_relaxed);
        /* Acquire: this binder sees every key the previous one bound.
         * Taking over a dead binder's lock needs no repair: the lock guards
         * a decision, not data; its half-made binding is an entry it had
         * locked, which recovery clears. */
        if ((w == 0 || (judge && locker_dead(w))) &&
            atomic_compare_exchange_strong_explicit(&h->bind_lock, &w, me, memory_order_acquire,
                                                    memory_order_relaxed))
            return 0;
        if (!vigil_lock_wait(&wait, &judge))
            return VIGIL_EBUSY;
    }
}

static void bind_unlock(struct vigil_leases_header *h)
{
    /* Release: the bindings made under the lock reach the next binder. */
    atomic_store_explicit(&h->bind_lock, 0, memory_order_release);
}

/* ---- create, open, close ------------------------------------------------- */

static int leases_init(void *base, size_t size, uint32_t capacity, void *arg)
{
    (void)size, (void)capacity, (void)arg;
    /* ftruncate zero-filled the rest: no token yet, bind lock free, every
     * entry never used and unlocked. */
    struct vigil_leases_header *h = base;
    h->entry_bytes = VIGIL_LEASES_ENTRY_BYTES;
    return 0;
}

static int leases_wrap(struct vigil_map *m, vigil_leases **out)
{
    struct vigil_leases_header *h = m->base;
    if (h->entry_bytes != VIGIL_LEASES_ENTRY_BYTES || h->flags != 0) {
        vigil_map_close(m);
        return VIGIL_EBADFILE;
    }
    vigil_leases *ls = malloc(sizeof(*ls));
    if (!ls) {
        vigil_map_close(m);
        return -ENOMEM;
    }
    ls->map = *m;
    ls->hdr = h;
    ls->entries = (struct vigil_leases_entry *)((char *)m->base + sizeof(*h));
    ls->capacity = m->capacity;
    *out = ls;
    return 0;
}

int vigil_leases_create_mode(const char *path, uint32_t capacity, unsigned mode, vigil_leases **out)
{
    if (!out)
        return -EINVAL;
    struct vigil_map m;
    int err = vigil_map_create(path, &leases_layout, capacity, mode, leases_init, NULL, &m);
    return err < 0 ? err : leases_wrap(&m, out);
}

int vigil_leases_create(const char *path, uint32_t capacity, vigil_leases **out)
{
    return vigil_leases_create_mode(path, capacity, VIGIL_DEFAULT_MODE, out);
}

int vigil_leases_open(const char *path, vigil_leases **out)
{
    if (!out)
        return -EINVAL;
    struct vigil_map m;
    int err = vigil_map_open(path, &leases_layout, 0, &m);
    return err < 0 ? err : leases_wrap(&m, out);
}

void vigil_leases_close(vigil_leases *ls)
{
    if (!ls)
        return;
    vigil_map_close(&ls->map);
    free(ls);
}

uint32_t vigil_leases_capacity(const vigil_leases *ls)
{
    return ls ? ls->capacity : 0;
}

/* ---- acquire ------------------------------------------------------------- */

enum { RESTART = 1 };

struct want {
    uint64_t kw[16];
    uint64_t ow[8];
    uint32_t hash;
    uint64_t ttl_ms;
};

/* A hint: the entry bound to the key, probing from its home and stopping
 * at an unlocked never-used entry (nothing is ever bound past one, see
 * bind). -1 when not found; the bind path then scans everything. */
static int64_t find_key(const vigil_leases *ls, uint32_t hash, const uint64_t *kw)
{
    uint32_t cap = ls->capacity;
    uint32_t home = hash % cap;
    for (uint32_t j = 0; j < cap; j++) {
        uint32_t i = home + j < cap ? home + j : home + j - cap;
        const struct vigil_leases_entry *e = &ls->entries[i];
        uint32_t b = atomic_load_explicit(&e->bound, memory_order_relaxed);
        if (b == ENTRY_NEVER) {
            if (!(atomic_load_explicit(&e->ctl, memory_order_relaxed) & CTL_LOCKED))
                return -1;
            continue;
        }
        if (key_matches(e, hash, kw))
            return i;
    }
    return -1;
}

static void fill_out(vigil_lease *out, const struct want *w, uint64_t token, uint32_t index)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->key, w->kw, sizeof(out->key));
    memcpy(out->owner, w->ow, sizeof(out->owner));
    out->token = token;
    out->ttl_ms = w->ttl_ms;
    out->id = (int64_t)index + 1; /* this store's lease id: the entry, so renew goes straight to it */
}

/* Writes a new hand-over into a locked entry and unlocks it. */
static uint64_t hand_over(vigil_leases *ls, struct vigil_leases_entry *e, uint64_t c,
                          const struct want *w, uint32_t pid, uint64_t now)
{
    /* Relaxed: the counter is ordered by the entry lock and the bind
     * path. This hand-over locked after the previous one of the same
     * entry unlocked (acquire on ctl), or bound the key after its last
     * binding was undone (see bind), so its increment comes later in the
     * counter's single modification order and returns a greater value. */
    uint64_t token = atomic_fetch_add_explicit(&ls->hdr->last_token, 1, memory_order_relaxed) + 1;
    hook(LP_TOKEN_TAKEN);
    atomic_store_explicit(&e->token, token, memory_order_relaxed);
    hook(LP_TOKEN_WRITTEN);
    atomic_store_explicit(&e->ttl_ms, w->ttl_ms, memory_order_relaxed);
    words_store(e->owner, w->ow, 8);
    atomic_store_explicit(&e->pid, pid, memory_order_relaxed);
    hook(LP_FIELDS_WRITTEN);
    /* `now` was read before the lock: the lease runs from a moment before
     * it was granted, never past its TTL. */
    entry_unlock(e, ctl_gen(c) + 1, expiry_for(now, w->ttl_ms));
    return token;
}

/* Acquire of the key bound to entry i: VIGIL_EBUSY while unexpired,
 * RESTART when the entry turns out to hold another key. */
static int take(vigil_leases *ls, uint32_t i, const struct want *w, vigil_lease *out)
{
    struct vigil_leases_entry *e = &ls->entries[i];
    uint64_t me = my_lock_word();
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        uint64_t c;
        int err = wait_unlocked(e, &c);
        if (err < 0)
            return err;
        if (!key_matches(e, w->hash, w->kw))
            return RESTART;
        /* Held unexpired by anyone, the same owner string included. */
        uint64_t now = vigil_now_ns();
        if (unexpired(ctl_exp(c), now))
            return VIGIL_EBUSY;
        /* Lapsed or released: the lock is the take-over. A renewal racing
         * it CASes the same word; exactly one of the two moves it. */
        if (!entry_lock_from(e, c, me))
            continue;
        hook(LP_ENTRY_LOCKED);
        atomic_store_explicit(&e->gen_hint, (uint32_t)ctl_gen(c), memory_order_relaxed);
        /* Under the lock the key is stable: it changed hands between the
         * look-up and the lock if it no longer matches. */
        if (!key_matches(e, w->hash, w->kw)) {
            entry_unlock(e, ctl_gen(c) + 1, ctl_exp(c));
            return RESTART;
        }
        uint64_t token = hand_over(ls, e, c, w, (uint32_t)me, now);
        fill_out(out, w, token, i);
        return 0;
    }
    return VIGIL_EBUSY;
}

/* Binds the key to a reclaimable entry, under the bind lock. */
static int bind(vigil_leases *ls, const struct want *w, vigil_lease *out)
{
    int err = bind_lock(ls->hdr);
    if (err < 0)
        return err;
    hook(LP_BIND_LOCKED);
    uint32_t cap = ls->capacity;
    uint32_t home = w->hash % cap;
    /* Every entry, no early stop: under the bind lock no key can appear,
     * so a key not found here is bound nowhere. */
    for (uint32_t j = 0; j < cap; j++) {
        uint32_t i = home + j < cap ? home + j : home + j - cap;
        if (key_matches(&ls->entries[i], w->hash, w->kw)) {
            bind_unlock(ls->hdr);
            return take(ls, i, w, out);
        }
    }
    /* The key is bound nowhere, because a binder rebound it (ordered by
     * the bind lock) or a recovery cleared it (its release store of
     * `bound`, read above): this fence orders the token taken below after
     * every token the key was ever handed out with. */
    atomic_thread_fence(memory_order_acquire);
    /* The first reclaimable entry in probe order from the key's home, so
     * that a look-up probing from there meets it before any never-used
     * entry: every entry before it is bound and held, or mid-change. */
    uint64_t me = my_lock_word();
    for (uint32_t j = 0; j < cap; j++) {
        uint32_t i = home + j < cap ? home + j : home + j - cap;
        struct vigil_leases_entry *e = &ls->entries[i];
        for (unsigned tries = 0; tries < 4; tries++) {
            uint64_t c = atomic_load_explicit(&e->ctl, memory_order_acquire);
            if (c & CTL_LOCKED) {
                /* A live locker is mid-change on a key of its own; skip it.
                 * A dead one's entry is cleared and becomes reclaimable. */
                if (!locker_dead(c) || !recover_entry(e, c))
                    break;
                continue;
            }
            uint32_t b = atomic_load_explicit(&e->bound, memory_order_relaxed);
            uint64_t now = vigil_now_ns();
            if (b == ENTRY_BOUND && unexpired(ctl_exp(c), now))
                break;
            if (!entry_lock_from(e, c, me))
                continue; /* renewed, taken or released meanwhile: look again */
            hook(LP_ENTRY_LOCKED);
            atomic_store_explicit(&e->gen_hint, (uint32_t)ctl_gen(c), memory_order_relaxed);
            /* The old key, if any, lapsed: its holder's renewals now find
             * the lock or another key and are refused. */
            if (b == ENTRY_NEVER)
                atomic_store_explicit(&e->bound, ENTRY_CLEARED, memory_order_relaxed);
            atomic_store_explicit(&e->hash, 0, memory_order_relaxed);
            words_store(e->key, w->kw, 8);
            hook(LP_KEY_HALF);
            words_store(e->key + 8, w->kw + 8, 8);
            atomic_store_explicit(&e->hash, w->hash, memory_order_relaxed);
            atomic_store_explicit(&e->bound, ENTRY_BOUND, memory_order_relaxed);
            uint64_t token = hand_over(ls, e, c, w, (uint32_t)me, now);
            bind_unlock(ls->hdr);
            fill_out(out, w, token, i);
            return 0;
        }
    }
    bind_unlock(ls->hdr);
    return VIGIL_EFULL;
}

static int check_str(const char *s, size_t field, size_t *len)
{
    if (!s)
        return -EINVAL;
    size_t n = strnlen(s, field);
    if (n == field)
        return VIGIL_ERANGE; /* no room for the NUL */
    *len = n;
    return 0;
}

int vigil_leases_acquire(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                         vigil_lease *out)
{
    if (!ls || !out)
        return -EINVAL;
    size_t klen, olen;
    int err;
    if ((err = check_str(key, 128, &klen)) < 0 || (err = check_str(owner, 64, &olen)) < 0)
        return err;
    if (klen == 0)
        return -EINVAL;
    if (ttl_ms < 3)
        return VIGIL_ERANGE;
    struct want w;
    to_words(w.kw, 16, key, klen);
    to_words(w.ow, 8, owner, olen);
    w.hash = key_hash(w.kw);
    w.ttl_ms = ttl_ms;
    /* Each restart means the entry found changed keys under us; a handful
     * is already a hostile amount of churn. */
    for (int round = 0; round < 8; round++) {
        int64_t i = find_key(ls, w.hash, w.kw);
        err = i >= 0 ? take(ls, (uint32_t)i, &w, out) : bind(ls, &w, out);
        if (err != RESTART)
            return err;
    }
    return VIGIL_EBUSY;
}

/* ---- renew and release --------------------------------------------------- */

/* The lease's key against the entry's NUL-padded words, without copying
 * or hashing it (renew is the hot path): the words before the one that
 * holds the NUL, then that one with the bytes past the NUL as zero. */
static bool lease_key_matches(const struct vigil_leases_entry *e, const char *key, size_t klen)
{
    if (atomic_load_explicit(&e->bound, memory_order_relaxed) != ENTRY_BOUND)
        return false;
    size_t full = klen / 8; /* klen < 128, so the NUL's word exists */
    for (size_t i = 0; i < full; i++) {
        uint64_t w;
        memcpy(&w, key + 8 * i, 8);
        if (atomic_load_explicit(&e->key[i], memory_order_relaxed) != w)
            return false;
    }
    uint64_t last = 0;
    memcpy(&last, key + 8 * full, klen % 8);
    return atomic_load_explicit(&e->key[full], memory_order_relaxed) == last;
}

/* Renew (release = false) or release: one CAS from the word checked. */
static int renew_or_release(vigil_leases *ls, const vigil_lease *lease, bool release)
{
    if (!ls || !lease)
        return -EINVAL;
    size_t klen = strnlen(lease->key, sizeof(lease->key));
    if (klen == sizeof(lease->key))
        return VIGIL_ERANGE;
    /* The entry the lease names: its id when that is one of ours (this
     * store's acquire puts the entry there), else a look-up by key. */
    int64_t i;
    if (lease->id >= 1 && (uint64_t)lease->id <= ls->capacity) {
        i = lease->id - 1;
    } else {
        struct want w;
        to_words(w.kw, 16, lease->key, klen);
        w.hash = key_hash(w.kw);
        if ((i = find_key(ls, w.hash, w.kw)) < 0)
            return VIGIL_ELOST;
    }
    struct vigil_leases_entry *e = &ls->entries[i];
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        uint64_t c = atomic_load_explicit(&e->ctl, memory_order_acquire);
        /* Locked means a change of hands, which only starts from a lapsed
         * or released lease: this one is gone. */
        if (c & CTL_LOCKED)
            return VIGIL_ELOST;
        uint64_t now = vigil_now_ns();
        if (!unexpired(ctl_exp(c), now))
            return VIGIL_ELOST;
        /* These loads come after the acquire load of c, so they are at
         * least as new as the hand-over that wrote c. */
        if (atomic_load_explicit(&e->token, memory_order_relaxed) != lease->token ||
            !lease_key_matches(e, lease->key, klen))
            return VIGIL_ELOST;
        uint64_t next;
        if (release) {
            next = ctl_make(ctl_gen(c) + 1, 0);
        } else {
            uint64_t exp = expiry_for(now, atomic_load_explicit(&e->ttl_ms, memory_order_relaxed));
            next = ctl_make(ctl_gen(c), exp > ctl_exp(c) ? exp : ctl_exp(c));
        }
        /* Release: the token and key loads above are done before the CAS,
         * so a CAS that finds c unchanged vouches for what they saw. */
        if (atomic_compare_exchange_strong_explicit(&e->ctl, &c, next, memory_order_release,
                                                    memory_order_relaxed))
            return 0;
        /* Lost a race with another renewal of the same lease, or with a
         * release or take-over: look again. Only a scribbling peer keeps
         * this going, and then for a bounded time. */
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}

int vigil_leases_renew(vigil_leases *ls, const vigil_lease *lease)
{
    return renew_or_release(ls, lease, false);
}

int vigil_leases_release(vigil_leases *ls, const vigil_lease *lease)
{
    return renew_or_release(ls, lease, true);
}

static int port_renew(void *ctx, const vigil_lease *lease)
{
    return vigil_leases_renew(ctx, lease);
}

vigil_lease_port vigil_leases_port(vigil_leases *ls)
{
    vigil_lease_port p = { .ctx = ls, .renew = port_renew };
    return p;
}

/* ---- inspection ---------------------------------------------------------- */

int vigil_leases_entry(const vigil_leases *ls, uint32_t index, vigil_lease_info *out)
{
    if (!ls || !out)
        return -EINVAL;
    if (index >= ls->capacity)
        return VIGIL_ERANGE;
    const struct vigil_leases_entry *e = &ls->entries[index];
    vigil_lease_info info;
    uint64_t deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        uint64_t c1 = atomic_load_explicit(&e->ctl, memory_order_acquire);
        if (c1 & CTL_LOCKED) {
            if (vigil_backoff(attempt, &deadline))
                continue;
            /* Stuck in a change: say who holds it. */
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_CHANGING;
            info.pid = (uint32_t)c1;
            *out = info;
            return VIGIL_EBUSY;
        }
        memset(&info, 0, sizeof(info));
        uint32_t bound = atomic_load_explicit(&e->bound, memory_order_relaxed);
        info.token = atomic_load_explicit(&e->token, memory_order_relaxed);
        info.ttl_ms = atomic_load_explicit(&e->ttl_ms, memory_order_relaxed);
        info.pid = atomic_load_explicit(&e->pid, memory_order_relaxed);
        words_to_str(info.key, sizeof(info.key), e->key);
        words_to_str(info.owner, sizeof(info.owner), e->owner);
        /* The field loads complete before ctl is read again. A renewal
         * moves only the expiry, so the same generation, unlocked, means
         * no change of hands overlapped them. */
        atomic_thread_fence(memory_order_acquire);
        uint64_t c2 = atomic_load_explicit(&e->ctl, memory_order_relaxed);
        if ((c2 & CTL_LOCKED) || ctl_gen(c2) != ctl_gen(c1)) {
            if (vigil_backoff(attempt, &deadline))
                continue;
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_CHANGING;
            info.pid = (c2 & CTL_LOCKED) ? (uint32_t)c2 : 0;
            *out = info;
            return VIGIL_EBUSY;
        }
        uint64_t exp = ctl_exp(c2), now = vigil_now_ns();
        if (bound != ENTRY_BOUND) {
            memset(&info, 0, sizeof(info));
            info.state = VIGIL_LEASE_VACANT;
            *out = info;
            return VIGIL_EVACANT;
        }
        if (exp == 0) {
            info.state = VIGIL_LEASE_RELEASED;
        } else if (unexpired(exp, now)) {
            info.state = VIGIL_LEASE_HELD;
            info.expires_in_ms = (int64_t)((exp * 1000000u - now + 999999u) / 1000000u);
        } else {
            info.state = VIGIL_LEASE_EXPIRED;
            info.expires_in_ms = -(int64_t)((now - exp * 1000000u) / 1000000u);
        }
        *out = info;
        return 0;
    }
}
