/* SPDX-License-Identifier: MIT */
/*
 * The lease keepalive: one renewer thread per lease, renewing at a third of
 * the TTL while the work the lease authorises is still going.
 *
 * Why a third (0.32 of the TTL, see period_of): a TTL alone has to answer two questions at once, how long a
 * crashed worker may hold its scope hostage and how long the slowest
 * legitimate cycle takes. Renewal separates them: the TTL stays short, so a
 * crash is noticed quickly, and a worker that is still running says so.
 * At ttl / 3 two consecutive renewals can be lost (a slow store, a
 * scheduling hiccup) before the lease lapses; at ttl / 2 one failure would
 * already be fatal, and the point is to tell trouble from death.
 *
 * Why it stops on a refusal: refused (VIGIL_ELOST) means the scope is
 * someone else's now, and a renewer that kept trying could one day succeed
 * against a lease it does not own. A transient failure (any other < 0) is
 * retried on the next beat.
 *
 * Why stop joins: a renewal landing after the caller has released the lease
 * would resurrect a lease nobody holds and lock the scope out for a whole
 * TTL. So stop sets `stopping` under the mutex, wakes the renewer through
 * the condition variable (it never sleeps out a period), and joins it. The
 * renewer reads `stopping` under the same mutex right before each renewal,
 * so once stop has set it no renewal can start, and the join waits out the
 * one that may be in flight. When stop returns, the thread is gone.
 *
 * STOP FROM THE RENEWER ITSELF (model: model/keepalive.pml, run
 * self_stop; test: test_keepalive.c test_stop_from_renew). A port's renew
 * may stop its own keepalive (a Rust port that drops the guard it took
 * out of a static, a Python renew that calls stop). That stop runs on the
 * renewer thread, inside the renewal: it cannot join itself (the keepalive
 * before issue 27's review joined, ignored EDEADLK, freed, and the renewal
 * returned into freed memory). So it sets `stopping` and `detached` under
 * the mutex, detaches the thread and returns: no renewal starts after the
 * one it is inside, which is the caller's own. The renewer, leaving its
 * loop on `stopping`, finds `detached` and finishes the stop itself: it
 * joins the watcher, publishes `stopped`, and frees the keepalive, the
 * last touch of it. The caller must not touch ka after stop either way.
 *
 * The beat runs on CLOCK_MONOTONIC (the condition variable's clock): a
 * wall-clock step (NTP, an operator) must neither delay a renewal nor fire
 * a burst of them. The deadline runs on the lease clock, CLOCK_BOOTTIME
 * (keepalive_internal.h), which a suspend does not stop.
 *
 * LOCAL EXPIRY (model: model/keepalive.pml). The lease is lost, without
 * asking anyone, once its TTL has passed since the start of the request
 * that acquired or last renewed it with no renewal accepted since: a slow
 * answer must not stretch the lease. `deadline` holds that moment. Loss
 * is latched: whoever sees the clock past the deadline CASes it to 0
 * (lost for good), and an accepted renewal moves the deadline only by CAS
 * from the value it started from, and only when its answer came before
 * that deadline (an answer after it proves nothing about the moment the
 * lease lapsed), so once lost() said true it never says false again.
 *
 * THE LOSS FD. vigil_keepalive_fd is an eventfd that the thread latching
 * the loss writes, and nothing ever reads: once readable, readable for
 * good, and readable only after the latch. The deadline itself is a
 * timerfd that only the watcher thread polls: it sleeps until the
 * deadline (or stop), then judges the clock and latches the loss, so the
 * fd turns readable on time even while the renewer hangs inside the port.
 * The timer is never the user's fd because timerfd_settime resets a fired
 * timer's count: the keepalive before issue 18 handed out the timer, and
 * a re-arm racing its firing turned a readable fd unreadable (the model's
 * old_timer run). The renewer re-arms the watcher's timer after each
 * accepted renewal; a firing it overtakes only wakes the watcher to find
 * the deadline moved.
 *
 * FORK. A child forked while a keepalive runs inherits the handle but not
 * the renewer thread. The words above live in a MAP_SHARED page, so the
 * child's lost() reports the parent's keepalive truthfully (lost when the
 * parent's is, or stopped, or the deadline passed); the child never
 * renews, and its stop never touches the mutex, the condition variable or
 * the thread it does not have (it only frees its own copies).
 */
#define _GNU_SOURCE
#include <vigil/lease.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "keepalive_internal.h"
#include "spin_internal.h"

/* What a forked child must see as the parent's renewer sees it. */
struct ka_shared {
    _Atomic uint64_t deadline; /* lease clock ns the lease lapses at; 0 = lost */
    _Atomic bool     stopped;  /* the creator's stop has run */
};

struct vigil_keepalive {
    vigil_lease_port port;     /* copied: the caller's may go away */
    vigil_lease      lease;    /* copied, likewise */
    uint64_t         period_ns;
    uint64_t         ttl_ns;
    uint64_t         first_due; /* CLOCK_MONOTONIC ns of the first renewal */
    pid_t            creator;  /* the process whose renewer this is */
    int              loss_fd;  /* eventfd, written once lost: the user's fd */
    int              timer_fd; /* CLOCK_BOOTTIME timerfd at the deadline: the watcher's */
    int              stop_fd;  /* eventfd: stop -> watcher */
    struct ka_shared *sh;
    bool             has_thread;
    bool             has_watcher;
    pthread_t        thread;
    pthread_t        watcher;

    pthread_mutex_t  mu;       /* guards stopping and detached */
    pthread_cond_t   cv;       /* stop -> renewer, on CLOCK_MONOTONIC */
    bool             stopping;
    bool             detached; /* stopped from the renewer: it frees the keepalive */

    /* Written by the renewer, read by anyone through stats(). */
    _Atomic bool     exited;
    _Atomic uint64_t renewals;
    _Atomic uint64_t failures;
    _Atomic uint32_t consecutive;
    _Atomic uint64_t final_cpu_ns;
};

_Atomic uint64_t vigil_lease_clock_skew;

static _Thread_local const vigil_keepalive *tls_current;

/* The last acquisition this thread made through a vigil backend: a
 * keepalive started for that lease times its first deadline from when
 * that request was sent. */
static _Thread_local struct {
    uint64_t token;
    int64_t  id;
    uint64_t sent_ns;
    char     key[128];
} tls_sent;

void vigil_lease_note_sent(const vigil_lease *lease, uint64_t sent_ns)
{
    tls_sent.token = lease->token;
    tls_sent.id = lease->id;
    tls_sent.sent_ns = sent_ns;
    memcpy(tls_sent.key, lease->key, sizeof(tls_sent.key));
}

static uint64_t acquired_at(const vigil_lease *lease, uint64_t now)
{
    if (tls_sent.sent_ns && tls_sent.sent_ns <= now && tls_sent.token == lease->token &&
        tls_sent.id == lease->id && memcmp(tls_sent.key, lease->key, sizeof(tls_sent.key)) == 0)
        return tls_sent.sent_ns;
    return now;
}

/* The beat: a hair under a third of the TTL, 0.32 ttl. At exactly a third
 * the beat after two lost ones would fall due at the very instant the
 * lease lapses and race it; 0.32 brings it in at 0.96 ttl, so the margin
 * (4% of the TTL, 40 ms at 1 s) absorbs a late wake-up. In nanoseconds,
 * without overflow; saturates far past any deadline that matters. */
static uint64_t period_of(uint64_t ttl_ms)
{
    const uint64_t cap = UINT64_C(1) << 62;
    if (ttl_ms > cap / 320000u)
        return cap;
    return ttl_ms * 320000u; /* ttl_ms * 1e6 * 0.32 */
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static struct timespec ts_of(uint64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

/* Arms the watcher's timer at `at` on the lease clock. The kernel's
 * CLOCK_BOOTTIME is the lease clock less a test's skew. */
static void arm_timer(int fd, uint64_t at)
{
    uint64_t skew = atomic_load_explicit(&vigil_lease_clock_skew, memory_order_relaxed);
    at = at > skew ? at - skew : 1;
    /* The kernel refuses expiries past KTIME_MAX (2^63 ns); a deadline
     * that far is never, and 2^62 ns (146 years) is never too. */
    if (at > (UINT64_C(1) << 62))
        at = UINT64_C(1) << 62;
    struct itimerspec it = { .it_value = ts_of(at) };
    /* A failure leaves the timer where it was, at an earlier deadline: the
     * watcher wakes early, finds the lease renewed, and waits again. */
    (void)timerfd_settime(fd, TFD_TIMER_ABSTIME, &it, NULL);
}

/* The loss fd: an eventfd nobody reads, so it stays readable. Written by
 * every thread that latches the loss (once each: the count only grows,
 * and readiness is all anyone looks at). */
static void signal_loss(const vigil_keepalive *ka)
{
    uint64_t one = 1;
    ssize_t n = write(ka->loss_fd, &one, sizeof(one));
    (void)n; /* only EAGAIN at a count of 2^64 - 2: readable all the same */
}

/* Latches the loss: deadline 0, then the fd. */
static void mark_lost(vigil_keepalive *ka)
{
    /* Release: whoever sees the loss sees the counters before it. */
    atomic_store_explicit(&ka->sh->deadline, 0, memory_order_release);
    signal_loss(ka);
}

/* lost() for anyone: the latch, or the clock past the deadline (latched
 * here by CAS, so an accepted renewal cannot move it back; this caller
 * then writes the fd). */
static bool is_lost(const vigil_keepalive *ka)
{
    struct ka_shared *sh = ka->sh;
    uint64_t d = atomic_load_explicit(&sh->deadline, memory_order_acquire);
    /* A failed CAS means a renewal moved the deadline meanwhile: judge the
     * new one against the clock again (model/keepalive.pml found a reader
     * that took a renewal racing its latch for "not lost" although the new
     * deadline had passed too). Each retry follows an accepted renewal, so
     * the loop ends. Success release, as mark_lost; failure acquire: d is
     * judged again. */
    for (;;) {
        if (d == 0)
            return true;
        if (vigil_lease_now_ns() < d)
            return false;
        if (atomic_compare_exchange_weak_explicit(&sh->deadline, &d, 0, memory_order_release,
                                                  memory_order_acquire)) {
            signal_loss(ka);
            return true;
        }
    }
}

/* The watcher: sleeps on the deadline's timer until it fires or stop
 * writes stop_fd, and latches the loss once the clock has passed the
 * deadline. A firing the renewer overtook (the deadline moved on) reads
 * the timer and sleeps again, on the new expiry the renewer armed. */
static void *watcher(void *arg)
{
    vigil_keepalive *ka = arg;
    for (;;) {
        struct pollfd pf[2] = { { ka->timer_fd, POLLIN, 0 }, { ka->stop_fd, POLLIN, 0 } };
        int n = poll(pf, 2, -1);
        if (n < 0) {
            /* EINTR cannot happen (every signal is blocked here); ENOMEM
             * can: look again in a millisecond. */
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
            continue;
        }
        if (pf[1].revents)
            break;
        if (pf[0].revents) {
            uint64_t fired;
            ssize_t r = read(ka->timer_fd, &fired, sizeof(fired));
            (void)r; /* EAGAIN: the renewer re-armed it meanwhile */
            if (is_lost(ka))
                break; /* is_lost latched it and wrote the fd */
        }
    }
    return NULL;
}

static uint64_t thread_cpu_ns(pthread_t t)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An accepted renewal, sent at `sent` (lease clock): the deadline moves
 * to sent + ttl, unless the lease was lost meanwhile. Returns false when
 * lost. */
static bool extend(vigil_keepalive *ka, uint64_t from, uint64_t sent)
{
    uint64_t to = add_sat(sent, ka->ttl_ns);
    /* The answer came now: at or past the deadline it proves nothing about
     * the moment the lease lapsed (the store may have refused a moment
     * later), so the lease is lost, as the clock already says. */
    if (from == 0 || vigil_lease_now_ns() >= from)
        return false;
    /* acq_rel: publishes the renewal's counters like mark_lost; the CAS
     * fails if a reader latched the loss since `from` was read. */
    if (!atomic_compare_exchange_strong_explicit(&ka->sh->deadline, &from, to, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return false;
    arm_timer(ka->timer_fd, to);
    return true;
}

static int finish_stop(vigil_keepalive *ka);

static void *renewer(void *arg)
{
    vigil_keepalive *ka = arg;
    pthread_mutex_lock(&ka->mu);
    /* One period after the acquisition (start worked it out), not after
     * this thread's start: a caller that stalled between the two has that
     * much less of the TTL left. */
    uint64_t next = ka->first_due;
    while (!ka->stopping) {
        uint64_t now = vigil_now_ns();
        if (is_lost(ka))
            break;
        if (now < next) {
            /* Wakes at the beat, on stop's signal, or spuriously; every
             * case goes back through the checks above. The deadline is
             * the watcher's to see. */
            struct timespec ts = ts_of(next);
            pthread_cond_timedwait(&ka->cv, &ka->mu, &ts);
            continue;
        }
        /* Due, and stop has not been called: `stopping` was read under the
         * mutex, so a stop from here on waits in join for this renewal. */
        uint64_t from = atomic_load_explicit(&ka->sh->deadline, memory_order_acquire);
        pthread_mutex_unlock(&ka->mu);
        /* Before the request: the deadline runs from the send (issue 17's
         * mutant took it after the answer, and stretched the lease). */
        uint64_t sent = vigil_lease_now_ns();
        int rc = ka->port.renew(ka->port.ctx, &ka->lease);
        pthread_mutex_lock(&ka->mu);
        if (rc == VIGIL_ELOST) {
            mark_lost(ka);
            break;
        }
        if (rc < 0) {
            atomic_fetch_add_explicit(&ka->failures, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&ka->consecutive, 1, memory_order_relaxed);
        } else if (extend(ka, from, sent)) {
            atomic_fetch_add_explicit(&ka->renewals, 1, memory_order_relaxed);
            atomic_store_explicit(&ka->consecutive, 0, memory_order_relaxed);
        } else {
            mark_lost(ka); /* accepted, but after the lease had lapsed here */
            break;
        }
        /* Fixed rate: the next beat is one period after this one was due.
         * A renewal slower than a period makes the next one due at once
         * (the lease is closer to lapsing than planned), never a burst. */
        next = add_sat(next, ka->period_ns);
        now = vigil_now_ns();
        if (next < now)
            next = now;
    }
    (void)is_lost(ka); /* a loss by the clock alone: latched, the fd written */
    atomic_store_explicit(&ka->final_cpu_ns, thread_cpu_ns(pthread_self()), memory_order_relaxed);
    atomic_store_explicit(&ka->exited, true, memory_order_release);
    /* Read under the mutex it was set under: a stop from inside our own
     * renewal left the rest of the stop to us (STOP FROM THE RENEWER). */
    bool detached = ka->detached;
    pthread_mutex_unlock(&ka->mu);
    if (detached)
        (void)finish_stop(ka); /* its verdict was the stopper's to read, at its call */
    return NULL;
}

/* Wakes the watcher through stop_fd and joins it. */
static void stop_watcher(vigil_keepalive *ka)
{
    if (!ka->has_watcher)
        return;
    uint64_t one = 1;
    ssize_t n = write(ka->stop_fd, &one, sizeof(one));
    (void)n; /* a fresh eventfd: it cannot be full */
    pthread_join(ka->watcher, NULL);
    ka->has_watcher = false;
}

static void free_keepalive(vigil_keepalive *ka)
{
    if (ka->loss_fd >= 0)
        close(ka->loss_fd);
    if (ka->timer_fd >= 0)
        close(ka->timer_fd);
    if (ka->stop_fd >= 0)
        close(ka->stop_fd);
    if (ka->sh)
        munmap(ka->sh, sizeof(*ka->sh));
    free(ka);
}

int vigil_keepalive_start(const vigil_lease_port *port, const vigil_lease *lease, vigil_keepalive **out)
{
    if (!port || !lease || !out)
        return -EINVAL;
    if (lease->ttl_ms < 3)
        return VIGIL_ERANGE;
    uint64_t now = vigil_lease_now_ns();
    vigil_keepalive *ka = calloc(1, sizeof(*ka));
    if (!ka)
        return -ENOMEM;
    ka->port = *port;
    memcpy(&ka->lease, lease, sizeof(ka->lease));
    ka->period_ns = period_of(lease->ttl_ms);
    ka->ttl_ns = lease->ttl_ms > UINT64_MAX / 1000000u ? UINT64_MAX : lease->ttl_ms * 1000000u;
    ka->creator = getpid();
    atomic_init(&ka->exited, false);
    atomic_init(&ka->renewals, 0);
    atomic_init(&ka->failures, 0);
    atomic_init(&ka->consecutive, 0);
    atomic_init(&ka->final_cpu_ns, 0);

    int err;
    ka->loss_fd = ka->timer_fd = ka->stop_fd = -1;
    if ((ka->loss_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (ka->timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK)) < 0 ||
        (ka->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        (ka->sh = mmap(NULL, sizeof(*ka->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) ==
            MAP_FAILED) {
        err = errno;
        if (ka->sh == MAP_FAILED)
            ka->sh = NULL;
        free_keepalive(ka);
        return -err;
    }
    uint64_t acquired = acquired_at(lease, now);
    uint64_t deadline = add_sat(acquired, ka->ttl_ns);
    atomic_init(&ka->sh->deadline, deadline);
    /* The beat runs on CLOCK_MONOTONIC and the acquisition was timed on
     * the lease clock: the first renewal falls due one period after the
     * acquisition, that is `now - acquired` sooner than one period from
     * now, and at once when the period has already gone by. */
    uint64_t since = now - acquired, mono = vigil_now_ns();
    ka->first_due = since >= ka->period_ns ? mono : add_sat(mono, ka->period_ns - since);
    atomic_init(&ka->sh->stopped, false);
    arm_timer(ka->timer_fd, deadline);

    pthread_condattr_t ca;
    if ((err = pthread_mutex_init(&ka->mu, NULL)) != 0) {
        free_keepalive(ka);
        return -err;
    }
    if ((err = pthread_condattr_init(&ca)) != 0)
        goto fail_mutex;
    if ((err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0 ||
        (err = pthread_cond_init(&ka->cv, &ca)) != 0) {
        pthread_condattr_destroy(&ca);
        goto fail_mutex;
    }
    pthread_condattr_destroy(&ca);

    /* The threads block every signal, so the process's handlers run on
     * the application's threads, never on these. The watcher always runs:
     * a port without renew is accepted and simply not renewed, and the
     * lease lapses at its TTL, when the watcher says so. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&ka->watcher, NULL, watcher, ka);
    if (err == 0) {
        ka->has_watcher = true;
        if (port->renew && (err = pthread_create(&ka->thread, NULL, renewer, ka)) == 0)
            ka->has_thread = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        goto fail_threads;
    *out = ka;
    return 0;
fail_threads:
    stop_watcher(ka);
    pthread_cond_destroy(&ka->cv);
fail_mutex:
    pthread_mutex_destroy(&ka->mu);
    free_keepalive(ka);
    return -err;
}

/* The end of every stop, once no renewal can start and none is in flight
 * but the caller's own (STOP FROM THE RENEWER): the watcher joined, the
 * verdict latched, `stopped` published, the keepalive freed. */
static int finish_stop(vigil_keepalive *ka)
{
    stop_watcher(ka);
    /* Lost (by refusal, or by the clock now): latched, the fd written. */
    int rc = is_lost(ka) ? VIGIL_ELOST : 0;
    /* Release: a child that sees `stopped` sees the final deadline. */
    atomic_store_explicit(&ka->sh->stopped, true, memory_order_release);
    pthread_cond_destroy(&ka->cv);
    pthread_mutex_destroy(&ka->mu);
    free_keepalive(ka);
    return rc;
}

int vigil_keepalive_stop(vigil_keepalive *ka)
{
    if (!ka)
        return 0;
    if (getpid() != ka->creator) {
        /* A forked child's copy: no thread of ours to stop, and the mutex
         * and condition variable may be in any state the fork caught them
         * in. Only our own copies are freed; the parent's renewer, timer
         * and page go on untouched. */
        int rc = vigil_keepalive_lost(ka) ? VIGIL_ELOST : 0;
        free_keepalive(ka);
        return rc;
    }
    if (ka->has_thread && pthread_equal(pthread_self(), ka->thread)) {
        /* Called from the port's renew, on the renewer (STOP FROM THE
         * RENEWER): no renewal starts after this one, and the renewer
         * finishes the stop and frees ka when this renewal returns. The
         * verdict is the one known now, before this renewal's answer. */
        pthread_mutex_lock(&ka->mu);
        ka->stopping = true;
        ka->detached = true;
        pthread_mutex_unlock(&ka->mu);
        pthread_detach(ka->thread);
        return is_lost(ka) ? VIGIL_ELOST : 0;
    }
    if (ka->has_thread) {
        pthread_mutex_lock(&ka->mu);
        ka->stopping = true;
        pthread_cond_signal(&ka->cv);
        pthread_mutex_unlock(&ka->mu);
        /* Waits out a renewal in flight; none can start after `stopping`.
         * When join returns the renewer has exited: nothing of this
         * keepalive will ever call renew again. */
        pthread_join(ka->thread, NULL);
    }
    return finish_stop(ka);
}

bool vigil_keepalive_lost(const vigil_keepalive *ka)
{
    if (!ka)
        return false;
    if (getpid() != ka->creator && atomic_load_explicit(&ka->sh->stopped, memory_order_acquire))
        return true; /* a child's copy: the parent let the lease go */
    return is_lost(ka);
}

int vigil_keepalive_fd(const vigil_keepalive *ka)
{
    return ka ? ka->loss_fd : -EINVAL;
}

int vigil_keepalive_stats(const vigil_keepalive *ka, vigil_keepalive_info *out)
{
    if (!ka || !out)
        return -EINVAL;
    vigil_keepalive_info info;
    memset(&info, 0, sizeof(info));
    info.period_ns = ka->period_ns;
    info.lost = vigil_keepalive_lost(ka);
    info.renewals = atomic_load_explicit(&ka->renewals, memory_order_relaxed);
    info.failures = atomic_load_explicit(&ka->failures, memory_order_relaxed);
    info.consecutive_failures = atomic_load_explicit(&ka->consecutive, memory_order_relaxed);
    if (ka->has_thread && getpid() == ka->creator) {
        /* A thread that has exited has no CPU clock any more; it left its
         * total behind. One that is running is read live. */
        if (atomic_load_explicit(&ka->exited, memory_order_acquire))
            info.cpu_ns = atomic_load_explicit(&ka->final_cpu_ns, memory_order_relaxed);
        else
            info.cpu_ns = thread_cpu_ns(ka->thread);
    }
    *out = info;
    return 0;
}

const vigil_keepalive *vigil_keepalive_current(void)
{
    return tls_current;
}

struct with_frame {
    vigil_keepalive       *ka;
    const vigil_keepalive *prev;
    bool                   done;
};

/* Runs when the body leaves by pthread_exit or cancellation: the keepalive
 * is stopped on that path too. */
static void with_cleanup(void *arg)
{
    struct with_frame *f = arg;
    tls_current = f->prev;
    if (!f->done) {
        f->done = true;
        vigil_keepalive_stop(f->ka);
    }
}

int vigil_with_keepalive(const vigil_lease_port *port, const vigil_lease *lease,
                         int (*body)(void *arg), void *arg)
{
    if (!body)
        return -EINVAL;
    struct with_frame f = { 0 };
    int rc = vigil_keepalive_start(port, lease, &f.ka);
    if (rc < 0)
        return rc;
    f.prev = tls_current;
    tls_current = f.ka;
    int result;
    pthread_cleanup_push(with_cleanup, &f);
    result = body(arg);
    pthread_cleanup_pop(0);
    tls_current = f.prev;
    f.done = true;
    /* The body's outcome is the caller's news; a lost lease only replaces
     * a success, so the body's own error is never masked. */
    int st = vigil_keepalive_stop(f.ka);
    if (result >= 0 && st == VIGIL_ELOST)
        return VIGIL_ELOST;
    return result;
}
