/* SPDX-License-Identifier: MIT */
/*
 * The lease store's observers and waiters: vigil_leases_get, and
 * vigil_leases_acquire_wait, which sleeps on a futex in the key's entry
 * until a release wakes it or the holder's expiry comes.
 *
 * Fields used (entry i at 128 + i * 256; the rest is leases_ops.c's):
 *
 *     40  u32  wake: futex word, +1 by a release that finds waiters
 *     44  u32  waiters: acquire_wait callers about to sleep or asleep (a hint)
 *
 * THE SLEEP, against a release (model: model/leases.pml). A waiter reads
 * `wake`, raises `waiters`, then loads ctl and sleeps only if the entry
 * still holds its key, held, with FUTEX_WAIT on the `wake` value it read,
 * for at most the time left until the holder's expiry. A release (or the
 * unlock that ends a change of hands) stores ctl and then reads `waiters`.
 * All four are seq_cst, so either the waiter's ctl load sees the release
 * (it does not sleep) or the release sees the waiter, bumps `wake` and
 * wakes it (a waiter that read `wake` before the bump fails FUTEX_WAIT's
 * compare). Expiry needs no waker: the sleep ends at it, and a holder
 * that renewed meanwhile just sends the waiter back to sleep until the
 * new expiry.
 *
 * The key is checked after the ctl load, under it (SeqLock: the key
 * changes only while ctl is locked, so a key read between two loads of
 * ctl that show the same generation unlocked is the one bound then): a
 * waiter preempted after its look-up, while its key was released and its
 * entry bound to another key, finds the other key and looks again, never
 * sleeps to the other key's expiry (issue 18; leases.pml's rebind run).
 * A waiter never sleeps in any other way: a change of hands under way is
 * waited for inside acquire, asleep on the same futex (THE LOCK WAIT,
 * leases_lock.c), and there is no fallback to a sleep no release can
 * wake (the nanosleep before issue 18 slept through them under churn),
 * but for THE ROOM SLEEP below.
 *
 * THE ROOM SLEEP (model: model/leases.pml, the room runs). A full store
 * (VIGIL_EFULL: every entry bound to another key and held) is waited for
 * as a held key is, not returned: the key waited for may have been
 * released and its entry bound to a new key before the waiter looked
 * again (issue 32: `vigil lock --wait` on a small store exited 1). The
 * waiter reads the header's room_wake, raises room_waiters, tries the
 * acquire once more, and sleeps only if the store is still full, with
 * FUTEX_WAIT on the value read, until the first expiry of an entry (or
 * its deadline). A release stores ctl (seq_cst) and then reads
 * room_waiters (vigil_leases__wake_room): as in THE SLEEP, either the
 * waiter's attempt sees the release or the release sees the waiter and
 * bumps room_wake. An expiry needs no waker: the sleep ends at the first
 * one.
 * A peer that scribbles `wake` costs a waiter useless wakes, and after 16
 * in a row that saw no change of ctl a 1 ms pause: never a lost key.
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "keepalive_internal.h"
#include "spin_internal.h"

/* The entry bound to key (klen bytes), or -1. */
static int64_t entry_of(const vigil_leases *ls, const char *key, size_t klen)
{
    uint64_t kw[16];
    vigil_leases__words(kw, 16, key, klen);
    return vigil_leases__find(ls, vigil_leases__hash(kw), kw);
}

int vigil_leases_get(vigil_leases *ls, const char *key, vigil_lease_info *out)
{
    if (!ls || !out)
        return -EINVAL;
    size_t klen;
    int err = vigil_leases__check_str(key, 128, &klen);
    if (err < 0)
        return err;
    if (klen == 0)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    for (int round = 0; round < 8; round++) {
        int64_t i = entry_of(ls, key, klen);
        if (i < 0)
            break;
        vigil_lease_info info;
        err = vigil_leases_entry(ls, (uint32_t)i, &info);
        if (err == VIGIL_EBUSY) {
            *out = info; /* mid-change: who holds the change */
            return err;
        }
        if (err < 0 || strncmp(info.key, key, sizeof(info.key)) != 0)
            continue; /* rebound to another key meanwhile: look again */
        if (info.state != VIGIL_LEASE_HELD)
            break;
        *out = info;
        return 0;
    }
    snprintf(out->key, sizeof(out->key), "%s", key);
    out->state = VIGIL_LEASE_VACANT;
    return VIGIL_EVACANT;
}

/* How long to sleep on an entry whose ctl c is unlocked: until the
 * holder's expiry (plus the millisecond the store rounds up by), never
 * past the deadline. 0: do not sleep, try at once. */
static uint64_t sleep_for(uint64_t c, uint64_t now, uint64_t deadline)
{
    uint64_t lease_now = vigil_lease_now_ns();
    if (!unexpired(ctl_exp(c), lease_now))
        return 0;
    uint64_t ns = ctl_exp(c) * 1000000u - lease_now + 1000000u;
    if (deadline != UINT64_MAX && now + ns > deadline)
        ns = deadline > now ? deadline - now : 0;
    return ns;
}

/* Whether entry e, whose ctl was c when loaded, still holds `key` bound:
 * the key words read between c and a second look at ctl that finds the
 * same generation, unlocked. */
static bool holds_key(const struct vigil_leases_entry *e, uint64_t c, const uint64_t *kw)
{
    if ((c & CTL_LOCKED) || atomic_load_explicit(&e->bound, memory_order_relaxed) != ENTRY_BOUND)
        return false;
    for (size_t i = 0; i < 16; i++)
        if (atomic_load_explicit(&e->key[i], memory_order_relaxed) != kw[i])
            return false;
    /* The key loads complete before ctl is read again. */
    atomic_thread_fence(memory_order_acquire);
    uint64_t c2 = atomic_load_explicit(&e->ctl, memory_order_relaxed);
    return !(c2 & CTL_LOCKED) && ctl_gen(c2) == ctl_gen(c);
}

/* How long a waiter for room sleeps: until the first lease of the store
 * lapses (an entry to bind then), never past the deadline; a store whose
 * entries are all mid-change (no expiry to read) is looked at again in a
 * millisecond. */
static uint64_t room_sleep_for(const vigil_leases *ls, uint64_t now, uint64_t deadline)
{
    uint64_t lease_now = vigil_lease_now_ns(), first = UINT64_MAX;
    for (uint32_t i = 0; i < ls->capacity; i++) {
        /* Relaxed: a guess at when to look again; the acquire decides. */
        uint64_t c = atomic_load_explicit(&ls->entries[i].ctl, memory_order_relaxed);
        if (!(c & CTL_LOCKED) && ctl_exp(c) < first)
            first = ctl_exp(c);
    }
    uint64_t ns = first == UINT64_MAX ? 1000000u
                  : !unexpired(first, lease_now) ? 0
                                                 : first * 1000000u - lease_now + 1000000u;
    if (deadline != UINT64_MAX && now + ns > deadline)
        ns = deadline > now ? deadline - now : 0;
    return ns;
}

/* THE ROOM SLEEP, for a waiter whose acquire found the store full:
 * returns what the acquire made of it once room may have come. */
static int wait_for_room(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms, uint64_t deadline,
                         vigil_lease *out)
{
    struct vigil_leases_header *h = ls->hdr;
    uint32_t v = atomic_load_explicit(&h->room_wake, memory_order_seq_cst);
    atomic_fetch_add_explicit(&h->room_waiters, 1, memory_order_seq_cst);
    /* The look after raising room_waiters: a release before it is seen
     * here, one after it sees us. */
    int rc = vigil_leases__acquire_until(ls, key, owner, ttl_ms, deadline, out);
    if (rc == VIGIL_EFULL) {
        uint64_t now = vigil_now_ns();
        uint64_t ns = room_sleep_for(ls, now, deadline);
        if (ns)
            vigil_leases__futex_wait(&h->room_wake, v, ns);
    }
    /* Relaxed: leaving orders nothing; a late decrement costs a releaser
     * one useless wake. */
    atomic_fetch_sub_explicit(&h->room_waiters, 1, memory_order_relaxed);
    return rc;
}

int vigil_leases_acquire_wait(vigil_leases *ls, const char *key, const char *owner, uint64_t ttl_ms,
                              uint64_t timeout_ns, vigil_lease *out)
{
    if (!ls || !out || !key)
        return -EINVAL;
    uint64_t start = vigil_now_ns();
    uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - start ? UINT64_MAX
                                                                                     : start + timeout_ns;
    /* Bounded: acquire refuses a key that does not fit before any wait. */
    size_t klen = strnlen(key, 128);
    uint64_t kw[16];
    vigil_leases__words(kw, 16, key, klen < 128 ? klen : 0);
    unsigned idle = 0;
    for (;;) {
        /* A change of hands under way is waited for in here, asleep, up
         * to our deadline. */
        int rc = vigil_leases__acquire_until(ls, key, owner, ttl_ms, deadline, out);
        /* A full store is waited for, as a held key is. */
        for (int full = 0; rc == VIGIL_EFULL; full++) {
            if (full > 0 && vigil_now_ns() >= deadline)
                return VIGIL_ETIMEDOUT;
            rc = wait_for_room(ls, key, owner, ttl_ms, deadline, out);
        }
        if (rc != VIGIL_EBUSY)
            return rc; /* acquired, or an error no wait can cure */
        uint64_t now = vigil_now_ns();
        if (now >= deadline)
            return VIGIL_ETIMEDOUT;
        int64_t i = vigil_leases__find(ls, vigil_leases__hash(kw), kw);
        if (i < 0)
            continue; /* released and unbound meanwhile: try at once */
        struct vigil_leases_entry *e = &ls->entries[i];
        hook(LP_WAIT_FOUND);
        /* THE SLEEP: wake, waiters, ctl, the key under it, FUTEX_WAIT; the
         * first three seq_cst. */
        uint32_t v = atomic_load_explicit(&e->wake, memory_order_seq_cst);
        atomic_fetch_add_explicit(&e->waiters, 1, memory_order_seq_cst);
        uint64_t c = atomic_load_explicit(&e->ctl, memory_order_seq_cst);
        uint64_t ns = holds_key(e, c, kw) ? sleep_for(c, now, deadline) : 0;
        if (ns) {
            vigil_leases__futex_wait(&e->wake, v, ns);
            /* Woken with nothing changed, at once: a peer flipping `wake`.
             * A real wake follows a release or an unlock, which move ctl. */
            bool spurious = atomic_load_explicit(&e->ctl, memory_order_relaxed) == c &&
                            vigil_now_ns() - now < ns / 2;
            idle = spurious ? idle + 1 : 0;
            if (idle > 16) {
                struct timespec ms = { 0, 1000000 };
                nanosleep(&ms, NULL);
                idle = 0;
            }
        }
        /* Relaxed: leaving orders nothing; a late decrement costs a
         * releaser one useless wake. */
        atomic_fetch_sub_explicit(&e->waiters, 1, memory_order_relaxed);
    }
}
