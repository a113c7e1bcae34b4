/* SPDX-License-Identifier: MIT */
/*
 * What the lease store's three files share: the ctl word, the crash hook,
 * and the entry and bind locks. leases.c tells the file layout and opens
 * files; leases_lock.c holds the locks' waits and the recovery from a dead
 * locker; leases_ops.c the hand-over (acquire), renew and release.
 */
#ifndef VIGIL_SRC_LEASES_LOCK_H
#define VIGIL_SRC_LEASES_LOCK_H

#include "leases_internal.h"
#include "proc.h"

/* ---- the ctl word (layout in leases.c) ----------------------------------- */

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

static inline void words_store(_Atomic uint64_t *field, const uint64_t *w, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++)
        atomic_store_explicit(&field[i], w[i], memory_order_relaxed);
}

static inline void hook(int point)
{
    void (*h)(int) = vigil_leases_hook;
    if (__builtin_expect(h != NULL, 0))
        h(point);
}

/* ---- the locks (protocol in leases_lock.c) ------------------------------- */

/* This process's lock word, from its cached identity (proc.c: no system
 * call after the first, and a forked child never sees its parent's). An
 * unknown start time is 0: peers then judge by the pid alone. */
static inline uint64_t my_lock_word(void)
{
    return CTL_LOCKED | (vigil_self_start_time() & 0x7fffffffu) << 32 | vigil_self_pid();
}

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

/* Whether the process named by a lock word is provably gone. */
bool vigil_leases__locker_dead(uint64_t w);

/* Takes over the lock of a dead process and throws its change away: the
 * entry ends cleared, with no key and no holder. Returns true if this call
 * or another made progress (ctl is no longer `dead`). */
bool vigil_leases__recover(struct vigil_leases_entry *e, uint64_t dead);

/* Waits for ctl to be unlocked: a bounded wait for a live locker, a
 * take-over for a dead one. 0 with *c unlocked, or VIGIL_EBUSY. The first
 * look is inline (acquire's common case finds the entry unlocked); the
 * wait is vigil_leases__wait_locked's. */
int vigil_leases__wait_locked(struct vigil_leases_entry *e, uint64_t *c);

static inline int vigil_leases__wait_unlocked(struct vigil_leases_entry *e, uint64_t *c)
{
    uint64_t w = atomic_load_explicit(&e->ctl, memory_order_acquire);
    if (__builtin_expect(!(w & CTL_LOCKED), 1)) {
        *c = w;
        return 0;
    }
    return vigil_leases__wait_locked(e, c);
}

/* The store's bind lock: 0, or VIGIL_EBUSY after the bounded wait. */
int vigil_leases__bind_lock(struct vigil_leases_header *h);

static inline void vigil_leases__bind_unlock(struct vigil_leases_header *h)
{
    /* Release: the bindings made under the lock reach the next binder. */
    atomic_store_explicit(&h->bind_lock, 0, memory_order_release);
}

#endif
