/* SPDX-License-Identifier: MIT */
/*
 * vigil_failover_wait: failover that learns of a death the moment the
 * kernel does, and keeps epochs for the owner that is alive but hung.
 *
 * The watchdog holds a pidfd (pidfd_open(2)) for the owner of every
 * occupied slot and sleeps in epoll on all of them at once; a pidfd
 * becomes readable when its process has exited (every thread of it), so
 * the watchdog wakes within microseconds of a kill -9, not a grace window
 * later. A pid is a name that can be reused, so a pidfd is trusted only
 * once it is known to name the slot's owner:
 *
 *   1. Read the slot under its SeqLock: generation, pid, start time and
 *      pid namespace of one registration. A slot mid-change is left for
 *      the next look; a vacant one drops its pidfd.
 *   2. Open a pidfd for the pid. ESRCH: no such process, the owner is
 *      dead. Otherwise the pidfd names the process that has the pid now,
 *      and it keeps naming that process whatever happens to the pid.
 *   3. Read that process's start time (/proc/<pid>/stat) after the open:
 *      equal to the slot's, it is the owner, and the pidfd is watched;
 *      different, the owner is dead and its pid reused.
 *   4. The owner's death (the pidfd readable, or step 2 or 3) is a verdict
 *      about the registration read, named by its generation: the claim is
 *      failover's own (vigil_failover_claim_dead), which takes the slot
 *      under its writer lock only while it still holds that generation,
 *      so a slot vacated or registered again meanwhile is never taken, and exactly one of any number of watchdogs and
 *      scans in any number of processes gets the bits.
 *
 * A slot whose owner cannot be watched is left to epochs and counted as
 * such (vigil_failover_wait_info): no pidfds (a kernel before 5.3), an
 * owner in another pid namespace or of none recorded (its pid names
 * nothing here), no start time recorded (a pidfd could name a stranger).
 * Never is a slot called dead by a guess. Every wait also wakes every
 * WAIT_SLICE_NS to pick up slots registered or vacated meanwhile and to
 * run the epoch scan, which takes the stale slots.
 */
#define _GNU_SOURCE
#include <vigil/failover.h>

#include "heartbeat_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How often a wait looks at the table for slots registered or vacated,
 * and runs the epoch scan, when no pidfd wakes it first. */
#define WAIT_SLICE_NS 5000000ull /* 5 ms */

struct watched {
    int      fd;      /* pidfd, -1 none */
    uint32_t pid;     /* the registration watched: pid, start, gen */
    uint64_t start;
    uint64_t gen;
    bool     dead;    /* registration `gen` proven dead, not yet claimed */
    bool     epochs;  /* occupied but left to epochs */
};

struct vigil_failover_watch {
    pthread_mutex_t mu;   /* one wait at a time on a handle */
    int             epfd; /* -1: no pidfds here, epochs alone */
    uint32_t        cap;
    /* Counts of the last look, read by vigil_failover_wait_info without
     * the lock (a wait may hold it for long): relaxed, each a figure. */
    _Atomic uint32_t watched, by_epochs;
    struct watched  w[];
};

static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;

static int pidfd_open_(uint32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

void vigil_failover_watch_free(struct vigil_failover_watch *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->cap; i++)
        if (w->w[i].fd >= 0)
            close(w->w[i].fd);
    if (w->epfd >= 0)
        close(w->epfd);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static struct vigil_failover_watch *watch_of(vigil_hb *hb)
{
    pthread_mutex_lock(&make_lock);
    struct vigil_failover_watch *w = hb->watch;
    if (!w) {
        w = calloc(1, sizeof(*w) + (size_t)hb->capacity * sizeof(w->w[0]));
        if (w) {
            pthread_mutex_init(&w->mu, NULL);
            w->cap = hb->capacity;
            for (uint32_t i = 0; i < w->cap; i++)
                w->w[i].fd = -1;
            w->epfd = epoll_create1(EPOLL_CLOEXEC);
            /* A kernel without pidfds: say so once, rely on epochs. */
            int probe = pidfd_open_((uint32_t)getpid());
            if (probe < 0 && errno == ENOSYS && w->epfd >= 0) {
                close(w->epfd);
                w->epfd = -1;
            }
            if (probe >= 0)
                close(probe);
            hb->watch = w;
        }
    }
    pthread_mutex_unlock(&make_lock);
    return w;
}

static void unwatch(struct vigil_failover_watch *w, uint32_t i)
{
    struct watched *x = &w->w[i];
    if (x->fd >= 0) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, x->fd, NULL);
        close(x->fd);
    }
    *x = (struct watched){ .fd = -1 };
}

/* Steps 1 to 3 for every slot: the pidfds follow the table. */
static void sync_table(vigil_hb *hb, struct vigil_failover_watch *w)
{
    uint64_t my_ns = vigil_self_pidns();
    uint32_t watched = 0, by_epochs = 0;
    for (uint32_t i = 0; i < w->cap; i++) {
        struct watched *x = &w->w[i];
        const struct vigil_hb_slot *s = &hb->slots[i];
        /* Step 1: one registration's pid, start and namespace, or none. */
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (v & 1u) {
            watched += x->fd >= 0;
            continue; /* mid-change: the next look, or the repair */
        }
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
        uint64_t start = atomic_load_explicit(&s->start_time, memory_order_relaxed);
        uint64_t ns = atomic_load_explicit(&s->owner_ns, memory_order_relaxed);
        /* The loads above complete before the version is read again; an
         * unchanged version means they are one registration's. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != v)
            continue;
        if (pid == 0) {
            unwatch(w, i);
            continue;
        }
        if (x->gen == gen && x->pid == pid && (x->fd >= 0 || x->dead || x->epochs)) {
            /* the same registration, its slot merely beaten or changed by itself */
            watched += x->fd >= 0;
            by_epochs += x->epochs;
            continue;
        }
        unwatch(w, i);
        x->pid = pid, x->start = start, x->gen = gen;
        if (w->epfd < 0 || ns == 0 || ns != my_ns || start == 0) {
            x->epochs = true; /* cannot be watched: epochs alone decide */
            by_epochs++;
            continue;
        }
        /* Step 2. */
        int fd = pidfd_open_(pid);
        if (fd < 0) {
            if (errno == ESRCH)
                x->dead = true;
            else
                x->epochs = true, by_epochs++;
            continue;
        }
        /* Step 3: the pidfd names whoever has the pid now. */
        uint64_t now_start;
        int err = vigil_proc_start_time(pid, &now_start);
        if (err == -ENOENT || (err == 0 && (now_start & VIGIL_START_MASK) != start)) {
            close(fd);
            x->dead = true; /* exited since the open, or the pid was reused */
            continue;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
        if (err < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            x->epochs = true, by_epochs++;
            continue;
        }
        x->fd = fd;
        watched++;
    }
    atomic_store_explicit(&w->watched, watched, memory_order_relaxed);
    atomic_store_explicit(&w->by_epochs, by_epochs, memory_order_relaxed);
}

/* Step 4 for every slot proven dead; returns the entries written. */
static uint32_t claim_dead(vigil_hb *hb, struct vigil_failover_watch *w, vigil_reclaim *out, uint32_t *why,
                           uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->cap && n < max; i++) {
        struct watched *x = &w->w[i];
        if (!x->dead)
            continue;
        if (vigil_failover_claim_dead(hb, i, x->gen, &out[n]) == 1) {
            if (why)
                why[n] = VIGIL_RECLAIM_EXITED;
            n++;
        }
        unwatch(w, i); /* claimed, or changed since: the next sync looks again */
    }
    return n;
}

/* Sleeps until a pidfd is readable or ns pass; marks the readable dead. */
static void sleep_on_pidfds(struct vigil_failover_watch *w, uint64_t ns)
{
    if (w->epfd < 0) {
        struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
        nanosleep(&ts, NULL);
        return;
    }
    struct epoll_event ev[16];
    int n;
#ifdef SYS_epoll_pwait2
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    n = (int)syscall(SYS_epoll_pwait2, w->epfd, ev, 16, &ts, NULL, 0);
    if (n < 0 && errno == ENOSYS)
#endif
        n = epoll_wait(w->epfd, ev, 16, (int)((ns + 999999u) / 1000000u));
    for (int k = 0; k < n; k++) {
        uint32_t i = ev[k].data.u32;
        if (i < w->cap && w->w[i].fd >= 0)
            w->w[i].dead = true; /* readable: every thread of the owner has exited */
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int vigil_failover_wait_why(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns, vigil_reclaim *out,
                            uint32_t *why, uint32_t max)
{
    if (!hb || !out || max == 0)
        return -EINVAL;
    struct vigil_failover_watch *w = watch_of(hb);
    if (!w)
        return -ENOMEM;
    uint64_t start = now_ns();
    uint64_t deadline = timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    pthread_mutex_lock(&w->mu);
    int result = 0;
    for (;;) {
        sync_table(hb, w);
        uint32_t n = claim_dead(hb, w, out, why, max);
        if (n < max) {
            int m = vigil_failover_scan(hb, grace_epochs, out + n, max - n);
            if (m < 0 && n == 0) {
                result = m;
                break;
            }
            for (int k = 0; k < m; k++)
                if (why)
                    why[n + (uint32_t)k] = VIGIL_RECLAIM_STALE;
            n += m > 0 ? (uint32_t)m : 0;
        }
        if (n > 0) {
            result = (int)n;
            break;
        }
        uint64_t now = now_ns();
        if (now >= deadline)
            break;
        uint64_t slice = deadline - now < WAIT_SLICE_NS ? deadline - now : WAIT_SLICE_NS;
        sleep_on_pidfds(w, slice);
    }
    pthread_mutex_unlock(&w->mu);
    return result;
}

int vigil_failover_wait(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns, vigil_reclaim *out, uint32_t max)
{
    return vigil_failover_wait_why(hb, grace_epochs, timeout_ns, out, NULL, max);
}

int vigil_failover_wait_info(const vigil_hb *hb, vigil_failover_watch_info *out)
{
    if (!hb || !out)
        return -EINVAL;
    pthread_mutex_lock(&make_lock); /* the pointer is written under it */
    struct vigil_failover_watch *w = hb->watch;
    pthread_mutex_unlock(&make_lock);
    vigil_failover_watch_info info = { 0 };
    if (w) {
        info.pidfds = w->epfd >= 0; /* set once, before the handle could see w */
        info.watched = atomic_load_explicit(&w->watched, memory_order_relaxed);
        info.by_epochs = atomic_load_explicit(&w->by_epochs, memory_order_relaxed);
    } else {
        int probe = pidfd_open_((uint32_t)getpid());
        info.pidfds = probe >= 0;
        if (probe >= 0)
            close(probe);
    }
    *out = info;
    return 0;
}
