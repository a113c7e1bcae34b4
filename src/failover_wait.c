/* SPDX-License-Identifier: MIT */
/*
 * vigil_failover_wait: failover that learns of a death the moment the
 * kernel does, and keeps epochs for the owner that is alive but hung.
 *
 * The watchdog holds a pidfd (pidfd_open(2)) for the owner of every
 * occupied slot and sleeps in epoll on all of them at once; a pidfd
 * becomes readable when its process has exited (every thread of it), so
 * the watchdog wakes within microseconds of a kill -9, not a grace window
 * later. THE WATCH, per slot (model: model/failover_wait.pml; tests:
 * test_failover_wait.c, test_failover_wait_ns.c):
 *
 *   1. Read the slot under its SeqLock: generation, pid, start time and
 *      pid namespace of one registration. A slot mid-change is left for
 *      the next look; a vacant one drops its state.
 *   2. The slot's state on this handle (pidfd, verdict) is the state of
 *      one registration, keyed by its generation (which never recurs): a
 *      slot registered again (by anyone, with any pid and start time, the
 *      same ones included) starts from nothing, so no verdict is ever
 *      carried from one registration to the next.
 *   3. Only an owner of this pid namespace is watched: its recorded
 *      namespace must be ours (recorded 0, or another, and the pid number
 *      names some other process here or none: the slot is left to epochs).
 *   4. Open a pidfd for the pid. ESRCH: no such process, the owner is
 *      dead. Otherwise the pidfd names the process that has the pid now,
 *      and keeps naming it whatever happens to the pid.
 *   5. Judge the owner as vigil_hb_probe does, vigil_pid_judge with the
 *      recorded start time and namespace: 0, dead (exited, or its pid
 *      reused: another start time, read from a /proc that is provably
 *      ours); 1 or unknown (a /proc of another namespace, unreadable),
 *      watch the pidfd. Watching is safe whatever the judge could not
 *      tell: the pidfd was opened after the registration was read, in the
 *      owner's namespace, so it names the owner or, if the owner had
 *      already exited, whoever took its pid; either way the pidfd becomes
 *      readable only once the owner is gone. So death is never guessed.
 *   6. The owner's death (the pidfd readable, or step 4 or 5) is a verdict
 *      about the registration read, named by its generation: the claim is
 *      failover's own (vigil_failover_claim_dead), which takes the slot
 *      under its writer lock only while it still holds that generation,
 *      so a slot vacated or registered again meanwhile is never taken, and
 *      exactly one of any number of watchdogs and scans in any number of
 *      processes gets the bits.
 *
 * One wait at a time on a handle (it holds the pidfds), and a wait's
 * timeout covers its turn too: a second caller waits for the handle's
 * turn (take_turn) until the deadline of its own call, on
 * CLOCK_MONOTONIC, and returns 0, nothing reclaimed, when the first is
 * still waiting at that deadline (it took a lock untimed, and a 100 ms
 * wait behind a 3 s one returned after 3 s; test_failover_wait.c
 * test_second_wait_keeps_its_timeout). The turn is the handle's own, not
 * shared between processes: the protocol above, the model and the
 * processes it proves are unchanged.
 *
 * THE DESCRIPTOR (vigil_failover_wait_fd): the epoll instance the waits
 * sleep on, for an event loop. It is made once per handle, under
 * make_lock, and never changes until the handle is closed (a forked
 * child's first call makes the child's own: see watch_leave), so a loop can
 * register it; it polls readable while a watched owner has exited and its
 * slot is not yet claimed (the claim takes the pidfd out). Only a wait
 * adds and removes pidfds: a loop calls one with a timeout of 0 when it is
 * readable and at every tick (stale slots, newly registered ones).
 *
 * A descriptor or memory that runs out is transient: an epoll instance or
 * a pidfd that could not be made for EMFILE, ENFILE or ENOMEM (an epoll_ctl
 * for ENOMEM or ENOSPC) is tried again at the next look, and the slot
 * waits on epochs meanwhile (vigil_failover_wait_info counts it as
 * retrying). Only a kernel without pidfds (ENOSYS) turns them off for
 * good. Every wait also wakes every WAIT_SLICE_NS to pick up slots
 * registered or vacated meanwhile and to run the epoch scan, which takes
 * the stale slots.
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
    uint32_t pid;     /* the registration watched: gen, pid, start */
    uint64_t gen;
    uint64_t start;
    bool     dead;    /* registration `gen` proven dead, not yet claimed */
    bool     epochs;  /* occupied but left to epochs, for this registration */
    bool     retry;   /* no pidfd for want of descriptors or memory: try again */
};

struct vigil_failover_watch {
    pthread_mutex_t mu;        /* guards busy */
    pthread_cond_t  freed;     /* busy cleared, on CLOCK_MONOTONIC */
    bool            busy;      /* a wait holds the handle (its turn) */
    _Atomic int     epfd;      /* -1: none yet (retried), or no pidfds here; set once, under make_lock */
    bool            no_pidfds; /* the kernel has none: epochs alone, for good */
    uint32_t        cap;
    /* Counts of the last look, read by vigil_failover_wait_info without
     * the lock (a wait may hold it for long): relaxed, each a figure. */
    _Atomic uint32_t watched, by_epochs, retrying;
    uint32_t        owner;     /* the process that made it (see watch_of) */
    struct watched  w[];
};

static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;

/* make_lock is held across fork, so that a child never inherits it locked
 * by a thread it does not have. */
static void make_lock_take(void)
{
    pthread_mutex_lock(&make_lock);
}

static void make_lock_give(void)
{
    pthread_mutex_unlock(&make_lock);
}

static void make_lock_at_fork(void)
{
    pthread_atfork(make_lock_take, make_lock_give, make_lock_give);
}

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
    int ep = atomic_load_explicit(&w->epfd, memory_order_acquire);
    if (ep >= 0)
        close(ep);
    pthread_cond_destroy(&w->freed);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* A watch inherited by fork is the parent's: its epoll instance is the
 * same kernel object as the parent's, so a pidfd the child added there
 * would wake the parent's waits, tagged with a slot the parent may watch
 * another owner of (test_forked_child_waits_apart). The child leaves it:
 * its copies of the descriptors are closed (never epoll_ctl'd: the
 * parent's entries are the parent's) when no wait held it at the fork,
 * else left as they are (its state was caught mid-change), and it makes
 * its own. */
static void watch_leave(struct vigil_failover_watch *w)
{
    if (pthread_mutex_trylock(&w->mu) != 0)
        return;
    bool busy = w->busy;
    pthread_mutex_unlock(&w->mu);
    if (!busy)
        vigil_failover_watch_free(w);
}

static struct vigil_failover_watch *watch_of(vigil_hb *hb)
{
    static pthread_once_t at_fork = PTHREAD_ONCE_INIT;
    pthread_once(&at_fork, make_lock_at_fork);
    pthread_mutex_lock(&make_lock);
    struct vigil_failover_watch *w = hb->watch;
    if (w && w->owner != vigil_self_pid()) {
        watch_leave(w);
        hb->watch = w = NULL;
    }
    if (!w) {
        w = calloc(1, sizeof(*w) + (size_t)hb->capacity * sizeof(w->w[0]));
        pthread_condattr_t ca;
        if (w && (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
                  pthread_cond_init(&w->freed, &ca) != 0)) {
            free(w); /* (an attribute object holds nothing to destroy on Linux) */
            w = NULL;
        }
        if (w) {
            pthread_condattr_destroy(&ca);
            pthread_mutex_init(&w->mu, NULL);
            w->cap = hb->capacity;
            w->owner = vigil_self_pid();
            for (uint32_t i = 0; i < w->cap; i++)
                w->w[i].fd = -1;
            /* A kernel without pidfds: said once, epochs for good. The
             * epoll instance is made at the first look (and again at every
             * look until it can be). */
            int probe = pidfd_open_((uint32_t)getpid());
            w->no_pidfds = probe < 0 && errno == ENOSYS;
            if (probe >= 0)
                close(probe);
            atomic_init(&w->epfd, -1);
            hb->watch = w;
        }
    }
    pthread_mutex_unlock(&make_lock);
    return w;
}

/* The handle's epoll instance, made at the first call that needs it (and
 * again at every call until it can be): its descriptor, or -errno. Set
 * once under make_lock, never changed: release, so that whoever loads it
 * (acquire) uses the instance made. */
static int epoll_of(struct vigil_failover_watch *w)
{
    int ep = atomic_load_explicit(&w->epfd, memory_order_acquire);
    if (ep >= 0)
        return ep;
    pthread_mutex_lock(&make_lock);
    ep = atomic_load_explicit(&w->epfd, memory_order_relaxed); /* make_lock orders it */
    if (ep < 0) {
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep >= 0)
            atomic_store_explicit(&w->epfd, ep, memory_order_release);
        else
            ep = -errno;
    }
    pthread_mutex_unlock(&make_lock);
    return ep;
}

static void unwatch(struct vigil_failover_watch *w, uint32_t i)
{
    struct watched *x = &w->w[i];
    if (x->fd >= 0) {
        /* x->fd was added to the instance, so it exists. */
        epoll_ctl(atomic_load_explicit(&w->epfd, memory_order_acquire), EPOLL_CTL_DEL, x->fd, NULL);
        close(x->fd);
    }
    *x = (struct watched){ .fd = -1 };
}

static bool transient(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOSPC;
}

/* Steps 3 to 5 for slot i, read at `v` as the registration in *x: a
 * pidfd watched, a verdict of death, epochs, or a retry. */
static void watch_slot(struct vigil_failover_watch *w, uint32_t i, uint32_t ns, uint32_t my_ns)
{
    struct watched *x = &w->w[i];
    x->epochs = x->retry = false;
    /* Step 3: a pid of another namespace, or of none recorded, names
     * nothing that can be judged here. */
    if (w->no_pidfds || ns == 0 || my_ns == 0 || ns != my_ns) {
        x->epochs = true;
        return;
    }
    int ep = epoll_of(w);
    if (ep < 0) {
        x->retry = transient(-ep), x->epochs = !x->retry;
        return;
    }
    /* Step 4. */
    int fd = pidfd_open_(x->pid);
    if (fd < 0) {
        if (errno == ESRCH)
            x->dead = true;
        else
            x->retry = transient(errno), x->epochs = !x->retry;
        return;
    }
    /* Step 5: the probe's judge, every bit of the record kept. */
    int alive = vigil_pid_judge(x->pid, x->start, VIGIL_START_MASK, ns, UINT32_MAX);
    if (alive == 0) {
        close(fd);
        x->dead = true; /* exited since the open, or the pid was reused */
        return;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        x->retry = transient(errno), x->epochs = !x->retry;
        close(fd);
        return;
    }
    x->fd = fd;
}

/* Steps 1 to 5 for every slot: the pidfds follow the table. */
static void sync_table(vigil_hb *hb, struct vigil_failover_watch *w)
{
    uint32_t my_ns = (uint32_t)vigil_self_pidns(); /* as register records it */
    uint32_t watched = 0, by_epochs = 0, retrying = 0;
    for (uint32_t i = 0; i < w->cap; i++) {
        struct watched *x = &w->w[i];
        const struct vigil_hb_slot *s = &hb->slots[i];
        /* Step 1: one registration's gen, pid, start and namespace. */
        uint64_t v = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (v & 1u) {
            watched += x->fd >= 0;
            continue; /* mid-change: the next look, or the repair */
        }
        uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t gen = vigil_gen_of(atomic_load_explicit(&s->gen, memory_order_relaxed));
        uint64_t start = atomic_load_explicit(&s->start_time, memory_order_relaxed);
        uint32_t ns = atomic_load_explicit(&s->owner_ns, memory_order_relaxed);
        /* The loads above complete before the version is read again; an
         * unchanged version means they are one registration's. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) != v)
            continue;
        if (pid == 0 || gen == 0) {
            unwatch(w, i);
            continue;
        }
        /* Step 2: the same registration keeps its state; any other, the
         * same pid and start time included, starts from nothing. */
        bool same = x->gen == gen && x->pid == pid && (x->fd >= 0 || x->dead || x->epochs || x->retry);
        if (!same) {
            unwatch(w, i);
            x->pid = pid, x->gen = gen, x->start = start;
        }
        if (!same || x->retry)
            watch_slot(w, i, ns, my_ns);
        watched += x->fd >= 0;
        by_epochs += x->epochs;
        retrying += x->retry;
    }
    atomic_store_explicit(&w->watched, watched, memory_order_relaxed);
    atomic_store_explicit(&w->by_epochs, by_epochs, memory_order_relaxed);
    atomic_store_explicit(&w->retrying, retrying, memory_order_relaxed);
}

/* Step 6 for every slot proven dead; returns the entries written. */
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

/* Sleeps until a pidfd is readable or ns pass (0: only looks); marks the
 * readable dead. */
static void sleep_on_pidfds(struct vigil_failover_watch *w, uint64_t ns)
{
    int ep = atomic_load_explicit(&w->epfd, memory_order_acquire);
    if (ep < 0) {
        struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
        if (ns)
            nanosleep(&ts, NULL);
        return;
    }
    struct epoll_event ev[16];
    int n;
#ifdef SYS_epoll_pwait2
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    n = (int)syscall(SYS_epoll_pwait2, ep, ev, 16, &ts, NULL, 0);
    if (n < 0 && errno == ENOSYS)
#endif
        n = epoll_wait(ep, ev, 16, (int)((ns + 999999u) / 1000000u));
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

/* The handle's turn, taken by `deadline` (CLOCK_MONOTONIC ns; UINT64_MAX:
 * none): 0, or -ETIMEDOUT when another wait holds it past the deadline.
 * A flag under a mutex, waited on with a condition variable on
 * CLOCK_MONOTONIC, rather than a timed lock of the mutex itself:
 * pthread_mutex_clocklock came only in glibc 2.30, and ThreadSanitizer
 * does not see it (it reported every unlock that followed one). */
static int take_turn(struct vigil_failover_watch *w, uint64_t deadline)
{
    struct timespec at = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    while (w->busy && rc != ETIMEDOUT)
        rc = deadline == UINT64_MAX ? pthread_cond_wait(&w->freed, &w->mu)
                                    : pthread_cond_timedwait(&w->freed, &w->mu, &at);
    bool mine = !w->busy; /* free at the deadline's wake-up too: taken */
    if (mine)
        w->busy = true;
    pthread_mutex_unlock(&w->mu);
    return mine ? 0 : -ETIMEDOUT;
}

/* The turn given back, to the next wait if one is asleep for it. */
static void give_turn(struct vigil_failover_watch *w)
{
    pthread_mutex_lock(&w->mu);
    w->busy = false;
    pthread_cond_signal(&w->freed);
    pthread_mutex_unlock(&w->mu);
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
    if (take_turn(w, deadline) != 0)
        return 0; /* another wait holds the handle past our deadline: nothing reclaimed */
    int result = 0;
    for (;;) {
        sync_table(hb, w);
        /* The pidfds readable already, without sleeping: a wait with a
         * timeout of 0 (an event loop's, woken by the descriptor) claims
         * an owner that exited since the last look. */
        sleep_on_pidfds(w, 0);
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
    give_turn(w);
    return result;
}

int vigil_failover_wait(vigil_hb *hb, uint64_t grace_epochs, uint64_t timeout_ns, vigil_reclaim *out, uint32_t max)
{
    return vigil_failover_wait_why(hb, grace_epochs, timeout_ns, out, NULL, max);
}

int vigil_failover_wait_fd(vigil_hb *hb)
{
    if (!hb)
        return -EINVAL;
    struct vigil_failover_watch *w = watch_of(hb);
    if (!w)
        return -ENOMEM;
    if (w->no_pidfds)
        return -ENOSYS; /* nothing would ever make it readable */
    return epoll_of(w);
}

int vigil_failover_wait_info(const vigil_hb *hb, vigil_failover_watch_info *out)
{
    if (!hb || !out)
        return -EINVAL;
    /* The pointer is written under make_lock, and a forked child's first
     * wait frees an inherited watch under it: read the figures inside. */
    pthread_mutex_lock(&make_lock);
    struct vigil_failover_watch *w = hb->watch;
    vigil_failover_watch_info info = { 0 };
    if (w && w->owner != vigil_self_pid())
        w = NULL; /* the parent's: this process has none yet */
    if (w) {
        info.pidfds = !w->no_pidfds; /* set once, before the handle could see w */
        info.watched = atomic_load_explicit(&w->watched, memory_order_relaxed);
        info.by_epochs = atomic_load_explicit(&w->by_epochs, memory_order_relaxed);
        info.retrying = atomic_load_explicit(&w->retrying, memory_order_relaxed);
    } else {
        int probe = pidfd_open_((uint32_t)getpid());
        info.pidfds = probe >= 0;
        if (probe >= 0)
            close(probe);
    }
    pthread_mutex_unlock(&make_lock);
    *out = info;
    return 0;
}
