/* SPDX-License-Identifier: MIT */
/*
 * The lease store's observers and waiters: vigil_leases_get, and
 * vigil_leases_acquire_wait, which sleeps on a futex in the key's entry
 * until a release wakes it or the holder's expiry comes.
 *
 * Fields used (entry i at 64 + i * 256; the rest is leases_ops.c's):
 *
 *     40  u32  wake: futex word, +1 by a release that finds waiters
 *     44  u32  waiters: acquire_wait callers about to sleep or asleep (a hint)
 *
 * THE SLEEP, against a release (model: model/leases.pml). A waiter reads
 * `wake`, raises `waiters`, then loads ctl and sleeps only if the key is
 * still held, with FUTEX_WAIT on the `wake` value it read, for at most the
 * time left until the holder's expiry. A release CASes ctl and then reads
 * `waiters`. All four are seq_cst, so either the waiter's ctl load sees
 * the release (it does not sleep) or the release sees the waiter, bumps
 * `wake` and wakes it (a waiter that read `wake` before the bump fails
 * FUTEX_WAIT's compare). Expiry needs no waker: the sleep ends at it, and
 * a holder that renewed meanwhile just sends the waiter back to sleep
 * until the new expiry. A peer that scribbles the words costs a waiter a
 * useless wake or a sleep to the end of its bound, never a lost key.
 */
#define _GNU_SOURCE
#include "leases_internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "spin_internal.h"

/* Not FUTEX_PRIVATE_FLAG: the word is in a file many processes map. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void vigil_leases__wake_waiters(struct vigil_leases_entry *e)
{
    /* seq_cst: after the release CAS in the total order (THE SLEEP). */
    if (atomic_load_explicit(&e->waiters, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&e->wake, 1, memory_order_seq_cst);
        syscall(SYS_futex, (uint32_t *)&e->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

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

/*
 * How long to sleep on an entry whose ctl is c before trying again: until the holder's
 * expiry (plus the millisecond the store rounds up by), or a millisecond
 * while a change of hands is under way, never past the deadline. 0: do
 * not sleep, try at once.
 */
static uint64_t sleep_for(uint64_t c, uint64_t now, uint64_t deadline)
{
    uint64_t ns;
    if (c & CTL_LOCKED)
        ns = 1000000u;
    else if (!unexpired(ctl_exp(c), now))
        return 0;
    else
        ns = ctl_exp(c) * 1000000u - now + 1000000u;
    if (deadline != UINT64_MAX && now + ns > deadline)
        ns = deadline > now ? deadline - now : 0;
    return ns;
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
    unsigned quick = 0;
    for (;;) {
        int rc = vigil_leases_acquire(ls, key, owner, ttl_ms, out);
        if (rc != VIGIL_EBUSY)
            return rc; /* acquired, or an error no wait can cure */
        uint64_t now = vigil_now_ns();
        if (now >= deadline)
            return VIGIL_ETIMEDOUT;
        int64_t i = entry_of(ls, key, klen);
        if (i < 0)
            continue; /* released and unbound meanwhile: try at once */
        struct vigil_leases_entry *e = &ls->entries[i];
        /* THE SLEEP: wake, waiters, ctl, then FUTEX_WAIT; all seq_cst. */
        uint32_t v = atomic_load_explicit(&e->wake, memory_order_seq_cst);
        atomic_fetch_add_explicit(&e->waiters, 1, memory_order_seq_cst);
        uint64_t c = atomic_load_explicit(&e->ctl, memory_order_seq_cst);
        uint64_t ns = sleep_for(c, now, deadline);
        if (ns) {
            /* A peer flipping `wake` makes FUTEX_WAIT return at once; after
             * a few of those in a row sleep out the bound instead. */
            if (quick > 16) {
                struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
                nanosleep(&ts, NULL);
                quick = 0;
            } else {
                uint64_t t0 = vigil_now_ns();
                futex_wait(&e->wake, v, ns);
                quick = vigil_now_ns() - t0 < ns / 2 ? quick + 1 : 0;
            }
        }
        /* Relaxed: leaving orders nothing; a late decrement costs a
         * releaser one useless wake. */
        atomic_fetch_sub_explicit(&e->waiters, 1, memory_order_relaxed);
    }
}
