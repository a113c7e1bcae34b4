/* SPDX-License-Identifier: MIT */
/*
 * The lease store's operations: acquire (a change of hands), renew and
 * release. The file layout is told in leases.c; the locks a change of
 * hands takes, and recovery from a locker that died, in leases_lock.c.
 *
 * Fields used (entry i, at 128 + i * 256; header counters: last_token at
 * 24, renewals_refused at 64, expiries at 72):
 *
 *      0  u64    ctl: unlocked, generation (bits 62..42) | expiry ms (41..0)
 *      8  u64    seq: the entry lock's sequence (leases_lock.c)
 *     48  u64    token: the hand-over's, from the header's last_token + 1
 *     16  u64    ttl_ms: what a renewal extends the expiry by
 *     24  u32    hash: FNV-1a of the key, never 0 while bound
 *     28  u32    bound: 0 never used, 1 bound, 2 cleared (reusable)
 *     32  u32    gen_hint, 36 pid: written by the locker
 *     64  u8[128] key, 192 u8[64] owner: NUL-padded, as whole words
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
 *
 * Model: model/leases.pml (acquire, renew, release, recovery, the sleep).
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <errno.h>
#include <string.h>

#include "keepalive_internal.h"
#include "spin_internal.h"

/* ---- keys and clocks ----------------------------------------------------- */

/* Expiry for a lease renewed now: rounded up to the next millisecond, so a
 * lease never lapses before its TTL has passed. */
static inline uint64_t expiry_for(uint64_t now_ns, uint64_t ttl_ms)
{
    uint64_t ms = now_ns / 1000000u + 1;
    return ttl_ms >= CTL_EXP_MASK - ms ? CTL_EXP_MASK : ms + ttl_ms;
}

uint32_t vigil_leases__hash(const uint64_t *kw)
{
    const unsigned char *p = (const unsigned char *)kw;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < 128 && p[i]; i++)
        h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

/* A string into NUL-padded words, so the entry's fields are compared and
 * written as whole atomic words. */
void vigil_leases__words(uint64_t *w, size_t nwords, const char *s, size_t len)
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

static inline bool key_matches(const struct vigil_leases_entry *e, uint32_t h, const uint64_t *kw)
{
    return atomic_load_explicit(&e->bound, memory_order_relaxed) == ENTRY_BOUND &&
           atomic_load_explicit(&e->hash, memory_order_relaxed) == h &&
           words_eq(e->key, kw, 16);
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
int64_t vigil_leases__find(const vigil_leases *ls, uint32_t hash, const uint64_t *kw)
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
static uint64_t hand_over(vigil_leases *ls, struct vigil_leases_entry *e, const struct entry_hold *held,
                          uint64_t c, const struct want *w, uint64_t now)
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
    atomic_store_explicit(&e->pid, vigil_lock_pid(held->me), memory_order_relaxed);
    hook(LP_FIELDS_WRITTEN);
    /* `now` was read before the lock: the lease runs from a moment before
     * it was granted, never past its TTL. */
    entry_unlock(e, held, ctl_gen(c) + 1, expiry_for(now, w->ttl_ms));
    return token;
}

/* A change of hands from the unlocked word c, which has lapsed: one that
 * had an expiry (a holder that stopped renewing, not one that released)
 * is an expiry. Relaxed: a statistic, under the entry lock. */
static inline void count_expiry(vigil_leases *ls, uint64_t c)
{
    if (ctl_exp(c) != 0)
        atomic_fetch_add_explicit(&ls->hdr->expiries, 1, memory_order_relaxed);
}

/* Acquire of the key bound to entry i: VIGIL_EBUSY while unexpired,
 * RESTART when the entry turns out to hold another key. */
static int take(vigil_leases *ls, uint32_t i, const struct want *w, uint64_t deadline, vigil_lease *out)
{
    struct vigil_leases_entry *e = &ls->entries[i];
    struct entry_hold held;
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        uint64_t c;
        int err = vigil_leases__wait_unlocked(e, &c, deadline);
        if (err < 0)
            return err;
        if (!key_matches(e, w->hash, w->kw))
            return RESTART;
        /* Held unexpired by anyone, the same owner string included. */
        uint64_t now = vigil_lease_now_ns();
        if (unexpired(ctl_exp(c), now))
            return VIGIL_EBUSY;
        /* Lapsed or released: the lock is the take-over. A renewal racing
         * it CASes the same word; exactly one of the two moves it. */
        if (!entry_lock_from(e, c, &held))
            continue;
        hook(LP_ENTRY_LOCKED);
        atomic_store_explicit(&e->gen_hint, (uint32_t)ctl_gen(c), memory_order_relaxed);
        /* Under the lock the key is stable: it changed hands between the
         * look-up and the lock if it no longer matches. */
        if (!key_matches(e, w->hash, w->kw)) {
            entry_unlock(e, &held, ctl_gen(c) + 1, ctl_exp(c));
            return RESTART;
        }
        count_expiry(ls, c);
        uint64_t token = hand_over(ls, e, &held, c, w, now);
        fill_out(out, w, token, i);
        return 0;
    }
    return VIGIL_EBUSY;
}

/* Binds the key to a reclaimable entry, under the bind lock. */
static int bind(vigil_leases *ls, const struct want *w, uint64_t deadline, vigil_lease *out)
{
    uint64_t bheld;
    int err = vigil_leases__bind_lock(ls->hdr, deadline, &bheld);
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
            vigil_leases__bind_unlock(ls->hdr, bheld);
            return take(ls, i, w, deadline, out);
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
    struct entry_hold held;
    for (uint32_t j = 0; j < cap; j++) {
        uint32_t i = home + j < cap ? home + j : home + j - cap;
        struct vigil_leases_entry *e = &ls->entries[i];
        for (unsigned tries = 0; tries < 4; tries++) {
            uint64_t c = atomic_load_explicit(&e->ctl, memory_order_acquire);
            if (c & CTL_LOCKED) {
                /* A live locker is mid-change on a key of its own; skip it.
                 * A dead one's entry is cleared and becomes reclaimable:
                 * the pair read as one before the judgement, the take-over
                 * from exactly it (THE ENTRY LOCK). */
                uint64_t seq;
                if (!vigil_pair_read(&e->ctl, &c, &seq))
                    continue;
                if (!(c & CTL_LOCKED))
                    continue;
                if (!vigil_leases__locker_dead(c, e) || !vigil_leases__recover(e, c, seq))
                    break;
                continue;
            }
            uint32_t b = atomic_load_explicit(&e->bound, memory_order_relaxed);
            uint64_t now = vigil_lease_now_ns();
            if (b == ENTRY_BOUND && unexpired(ctl_exp(c), now))
                break;
            if (!entry_lock_from(e, c, &held))
                continue; /* renewed, taken or released meanwhile: look again */
            hook(LP_ENTRY_LOCKED);
            atomic_store_explicit(&e->gen_hint, (uint32_t)ctl_gen(c), memory_order_relaxed);
            /* The old key, if any, lapsed: its holder's renewals now find
             * the lock or another key and are refused. */
            if (b == ENTRY_NEVER)
                atomic_store_explicit(&e->bound, ENTRY_CLEARED, memory_order_relaxed);
            else if (b == ENTRY_BOUND)
                count_expiry(ls, c); /* another key's lease, lapsed */
            atomic_store_explicit(&e->hash, 0, memory_order_relaxed);
            words_store(e->key, w->kw, 8);
            hook(LP_KEY_HALF);
            words_store(e->key + 8, w->kw + 8, 8);
            atomic_store_explicit(&e->hash, w->hash, memory_order_relaxed);
            atomic_store_explicit(&e->bound, ENTRY_BOUND, memory_order_relaxed);
            uint64_t token = hand_over(ls, e, &held, c, w, now);
            vigil_leases__bind_unlock(ls->hdr, bheld);
            fill_out(out, w, token, i);
            return 0;
        }
    }
    vigil_leases__bind_unlock(ls->hdr, bheld);
    return VIGIL_EFULL;
}

int vigil_leases__check_str(const char *s, size_t field, size_t *len)
{
    if (!s)
        return -EINVAL;
    size_t n = strnlen(s, field);
    if (n == field)
        return VIGIL_ERANGE; /* no room for the NUL */
    *len = n;
    return 0;
}

int vigil_leases__acquire_until(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                                uint64_t deadline, vigil_lease *out)
{
    if (!ls || !out)
        return -EINVAL;
    size_t klen, olen;
    int err;
    if ((err = vigil_leases__check_str(key, 128, &klen)) < 0 || (err = vigil_leases__check_str(owner, 64, &olen)) < 0)
        return err;
    if (klen == 0)
        return -EINVAL;
    if (ttl_ms < 3)
        return VIGIL_ERANGE;
    struct want w;
    vigil_leases__words(w.kw, 16, key, klen);
    vigil_leases__words(w.ow, 8, owner, olen);
    w.hash = vigil_leases__hash(w.kw);
    w.ttl_ms = ttl_ms;
    /* Each restart means the entry found changed keys under us; a handful
     * is already a hostile amount of churn. */
    uint64_t sent = vigil_lease_now_ns(); /* before any expiry this call computes */
    for (int round = 0; round < 8; round++) {
        int64_t i = vigil_leases__find(ls, w.hash, w.kw);
        err = i >= 0 ? take(ls, (uint32_t)i, &w, deadline, out) : bind(ls, &w, deadline, out);
        if (err == 0)
            vigil_lease_note_sent(out, sent);
        if (err != RESTART)
            return err;
    }
    return VIGIL_EBUSY;
}

int vigil_leases_acquire(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                         vigil_lease *out)
{
    /* A lock held by a live process is waited for LOCK_WAIT_NS, asleep. */
    return vigil_leases__acquire_until(ls, key, owner, ttl_ms, 0, out);
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
        vigil_leases__words(w.kw, 16, lease->key, klen);
        w.hash = vigil_leases__hash(w.kw);
        if ((i = vigil_leases__find(ls, w.hash, w.kw)) < 0)
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
        uint64_t now = vigil_lease_now_ns();
        if (!unexpired(ctl_exp(c), now))
            return VIGIL_ELOST;
        /* These loads come after the acquire load of c, so they are at
         * least as new as the hand-over that wrote c. */
        if (atomic_load_explicit(&e->token, memory_order_relaxed) != lease->token ||
            !lease_key_matches(e, lease->key, klen))
            return VIGIL_ELOST;
        /* A renewal preempted here past the lease's expiry still CASes
         * from c: it succeeds only if nobody took the key over (a take-over
         * locks ctl from c, so the CAS then fails), and then extends a
         * lease that no one else holds; never two holders
         * (test_leases_procs.c, test_renewal_preempted_past_expiry). */
        hook(LP_RENEW_CHECKED);
        uint64_t next;
        if (release) {
            next = ctl_make(ctl_gen(c) + 1, 0);
        } else {
            uint64_t exp = expiry_for(now, atomic_load_explicit(&e->ttl_ms, memory_order_relaxed));
            next = ctl_make(ctl_gen(c), exp > ctl_exp(c) ? exp : ctl_exp(c));
        }
        /* Release: the token and key loads above are done before the CAS,
         * so a CAS that finds c unchanged vouches for what they saw. A
         * release is seq_cst: it pairs with acquire_wait's sleep (see
         * vigil_leases__wake_waiters). */
        if (atomic_compare_exchange_strong_explicit(&e->ctl, &c, next,
                                                    release ? memory_order_seq_cst : memory_order_release,
                                                    memory_order_relaxed)) {
            if (release) {
                vigil_leases__wake_waiters(e);
                vigil_leases__wake_room(ls->hdr); /* an entry to bind, for a full store's waiters */
            }
            return 0;
        }
        /* Lost a race with another renewal of the same lease, or with a
         * release or take-over: look again. Only a scribbling peer keeps
         * this going, and then for a bounded time. */
        if (!vigil_backoff(attempt, &deadline))
            return VIGIL_EBUSY;
    }
}

int vigil_leases_renew(vigil_leases *ls, const vigil_lease *lease)
{
    int rc = renew_or_release(ls, lease, false);
    /* Relaxed: a statistic; off the success path, which stays one CAS. */
    if (rc == VIGIL_ELOST)
        atomic_fetch_add_explicit(&ls->hdr->renewals_refused, 1, memory_order_relaxed);
    return rc;
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
