/* SPDX-License-Identifier: MIT */
/*
 * vigil_etcd_observe: the holder of a key and every change to it, as
 * concurrency.Election.Observe gives them, readable through a file
 * descriptor.
 *
 * A thread of the observer's own reads the holder (as vigil_etcd_get
 * does: the first key under KEY/ by create revision, its value, its
 * lease's time left) and the revision etcd read it at; then watches all
 * of KEY/ from the next revision, puts and deletions. Any event, and a
 * bounded re-check (0.32 of the holder's TTL, 1 s while vacant, between
 * 200 ms and 2 s: the watch may fall silent, etcd_wait.c tells how), read
 * the holder again; what differs from what was last reported (another
 * holder, another value, vacant) is queued for the caller. The watch
 * moves to another endpoint when it has said nothing within a request's
 * bound, or the requests left its endpoint behind; it carries
 * require-leader and the auth token (etcd_watch.c). A watch that ends
 * (or fails) is looked past and opened again at once the first time,
 * then backing off (200 ms doubling to 1 s) until one brings news or
 * runs at least as long as the longest pause (watch_ended_pause), as
 * the waiter does (etcd_wait.c): a proxy that answers every watch with
 * an empty 200 gets a new stream a second, not hundreds, and a quiet
 * observer whose watch etcd cancels now and then over days is not
 * paused a second at each.
 *
 * The queue holds OBSERVE_QUEUE changes; a reader that falls further
 * behind loses the oldest, never the latest. An eventfd is readable while
 * the queue holds a change, or once the observer failed for good (auth
 * refused, TLS), which vigil_etcd_observer_next then returns.
 *
 * The thread shares the caller's handle (its lock, one request at a time):
 * close the observer before the handle.
 */
#define _GNU_SOURCE
#include "recipes_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define OBSERVE_QUEUE 64
#define NS_PER_MS     1000000ull
#define RECHECK_MIN   200u  /* ms */
#define RECHECK_MAX   2000u /* ms */
#define RECHECK_VACANT 1000u
#define ENDED_MIN     50u   /* ms: a watch ended again: 50 << ended, ... */
#define ENDED_MAX     1000u /* ... up to this */

struct vigil_etcd_observer {
    vigil_etcd             *e;
    char                    key[sizeof(((vigil_lease_info *)0)->key)];
    char                    pfx[VIGIL_ETCD_KEY_B64], end[VIGIL_ETCD_KEY_B64]; /* KEY/ and KEY0, base64 */
    pthread_t               thread;
    pthread_mutex_t         mu;   /* the queue, err, stop, w */
    pthread_cond_t          cv;   /* a change queued, or stop */
    int                     efd;  /* readable while the queue holds a change, or err */
    bool                    stop;
    int                     err;  /* a failure no retry mends */
    vigil_lease_info        q[OBSERVE_QUEUE];
    unsigned                head, n;
    vigil_lease_info        last; /* what was reported last */
    bool                    reported;
    struct vigil_etcd_watch *w;   /* the thread's, for close to wake */
};

static void efd_set(int fd)
{
    uint64_t one = 1;
    (void)!write(fd, &one, sizeof(one));
}

static void efd_clear(int fd)
{
    uint64_t v;
    (void)!read(fd, &v, sizeof(v));
}

/*
 * The pause before a watch that ended is opened again, the ends counted
 * in *ended (the caller zeroes it on news: a put or a deletion seen):
 * none the first time, then 200, 400, 800 ms, then 1 s each. A stream
 * that ran at least ENDED_MAX (longer than any pause) was no spin, even
 * if it said nothing: its end counts as a first again. So a stream is
 * opened again at most once per ENDED_MAX, or once per its own life,
 * whatever the server does. Whether it spoke (created, progress) is not
 * asked: one that says "created" and ends at once is the spin.
 */
unsigned vigil_etcd__watch_ended_pause(unsigned *ended, uint64_t lived_ms)
{
    if (lived_ms >= ENDED_MAX)
        *ended = 0;
    unsigned n = *ended < 5 ? ++*ended : 5;
    unsigned pause = n == 1 ? 0 : ENDED_MIN << n;
    return pause > ENDED_MAX ? ENDED_MAX : pause;
}

/* With o->mu held. */
static void push(vigil_etcd_observer *o, const vigil_lease_info *info)
{
    if (o->n == OBSERVE_QUEUE) { /* a reader this far behind loses the oldest */
        o->head = (o->head + 1) % OBSERVE_QUEUE;
        o->n--;
    }
    o->q[(o->head + o->n) % OBSERVE_QUEUE] = *info;
    if (o->n++ == 0 && !o->err)
        efd_set(o->efd);
    pthread_cond_broadcast(&o->cv);
}

static bool same(const vigil_lease_info *a, const vigil_lease_info *b)
{
    return a->state == b->state && a->token == b->token && strcmp(a->owner, b->owner) == 0;
}

/* Reads the holder: 0 (queued if it changed) with the revision to watch
 * from, or an error. */
static int look(vigil_etcd_observer *o, int64_t *at, uint64_t *recheck_ms)
{
    vigil_lease_info info;
    int rc = vigil_etcd__get_at(o->e, o->key, &info, at);
    if (rc == VIGIL_EVACANT) {
        memset(&info, 0, sizeof(info));
        memcpy(info.key, o->key, sizeof(info.key));
        info.state = VIGIL_LEASE_VACANT;
        rc = 0;
    } else if (rc == VIGIL_EBUSY) {
        return -EAGAIN; /* churning: look again soon */
    }
    if (rc < 0)
        return rc;
    if (info.state == VIGIL_LEASE_EXPIRED)
        info.state = VIGIL_LEASE_HELD; /* still in everyone's way, for the moment etcd takes */
    uint64_t r = info.state == VIGIL_LEASE_VACANT || info.ttl_ms == 0 ? RECHECK_VACANT : info.ttl_ms / 100 * 32;
    *recheck_ms = r < RECHECK_MIN ? RECHECK_MIN : r > RECHECK_MAX ? RECHECK_MAX : r;
    pthread_mutex_lock(&o->mu);
    if (!o->reported || !same(&o->last, &info)) {
        o->last = info;
        o->reported = true;
        push(o, &info);
    }
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static bool stopping(vigil_etcd_observer *o)
{
    pthread_mutex_lock(&o->mu);
    bool s = o->stop;
    pthread_mutex_unlock(&o->mu);
    return s;
}

static void set_watch(vigil_etcd_observer *o, struct vigil_etcd_watch *w)
{
    pthread_mutex_lock(&o->mu);
    o->w = w;
    pthread_mutex_unlock(&o->mu);
}

static void drop_watch(vigil_etcd_observer *o, int *next_ep, bool move_on)
{
    struct vigil_etcd_watch *w = o->w;
    if (!w)
        return;
    *next_ep = move_on ? (int)vigil_etcd__watch_endpoint(w) + 1 : -1;
    set_watch(o, NULL);
    vigil_etcd__watch_close(w);
}

/* Sleeps ms, or until close. */
static void pause_ms(vigil_etcd_observer *o, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + ms * NS_PER_MS;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_mutex_lock(&o->mu);
    while (!o->stop && pthread_cond_timedwait(&o->cv, &o->mu, &ts) == 0)
        ;
    pthread_mutex_unlock(&o->mu);
}

static void *observe_main(void *arg)
{
    vigil_etcd_observer *o = arg;
    uint64_t next_look = 0, recheck = RECHECK_VACANT, opened = 0, bound = RECHECK_MIN * NS_PER_MS;
    unsigned backoff = 0, cur_at_open = 0, ended = 0; /* watches ended since the last news */
    int next_ep = -1;
    while (!stopping(o)) {
        uint64_t now = vigil_etcd__now_ns();
        if (now >= next_look) {
            int64_t at = 0;
            int rc = look(o, &at, &recheck);
            if (rc < 0 && !vigil_etcd__transient(rc) && rc != -EAGAIN) {
                pthread_mutex_lock(&o->mu);
                o->err = rc; /* said once, through the fd and next() */
                if (o->n == 0)
                    efd_set(o->efd);
                pthread_cond_broadcast(&o->cv);
                pthread_mutex_unlock(&o->mu);
                break;
            }
            if (rc < 0) {
                backoff = !backoff ? 50 : backoff * 2 > 1000 ? 1000 : backoff * 2;
                drop_watch(o, &next_ep, true);
                next_look = vigil_etcd__now_ns() + backoff * NS_PER_MS;
                pause_ms(o, backoff);
                continue;
            }
            backoff = 0;
            next_look = vigil_etcd__now_ns() + recheck * NS_PER_MS;
            bound = recheck / 2 * NS_PER_MS;
            /* The watch has said nothing since it opened, or the requests
             * left its endpoint: elsewhere. Then one from this look on. */
            unsigned cur;
            if (o->w && ((!vigil_etcd__watch_heard(o->w) && vigil_etcd__now_ns() - opened >= bound) ||
                         (vigil_etcd__endpoints(o->e, &cur) > 1 && cur_at_open == vigil_etcd__watch_endpoint(o->w) &&
                          cur != cur_at_open)))
                drop_watch(o, &next_ep, true);
            if (!o->w) {
                struct vigil_etcd_watch_spec spec = { .key_b64 = o->pfx, .end_b64 = o->pfx[0] ? o->end : NULL,
                                                      .rev = at + 1, .puts = true, .ep = next_ep };
                struct vigil_etcd_watch *w = NULL;
                vigil_etcd__endpoints(o->e, &cur_at_open);
                if (vigil_etcd__watch_start(o->e, &spec, &w) == 0) {
                    set_watch(o, w);
                    opened = vigil_etcd__now_ns();
                    next_ep = -1;
                }
            }
        }
        now = vigil_etcd__now_ns();
        if (next_look <= now)
            continue;
        uint64_t ms = (next_look - now + NS_PER_MS - 1) / NS_PER_MS;
        if (!o->w) {
            pause_ms(o, ms);
            continue;
        }
        int rc = vigil_etcd__watch_wait(o->w, ms > INT_MAX ? INT_MAX : (int)ms);
        if (rc == VIGIL_ETCD_WATCH_PUT || rc == VIGIL_ETCD_WATCH_DELETED) {
            next_look = 0; /* something changed under KEY/: look */
            ended = 0;
        } else if (rc == VIGIL_ETCD_WATCH_CANCELED || rc < 0) {
            /* Ended, cancelled, compacted or refused: look again and
             * watch anew (on the next endpoint when this one failed), at
             * once the first time, then backing off. */
            uint64_t lived_ms = (vigil_etcd__now_ns() - opened) / NS_PER_MS;
            drop_watch(o, &next_ep, rc < 0);
            unsigned pause = vigil_etcd__watch_ended_pause(&ended, lived_ms);
            next_look = vigil_etcd__now_ns() + (uint64_t)pause * NS_PER_MS;
        }
    }
    drop_watch(o, &next_ep, false);
    return NULL;
}

int vigil_etcd_observe(vigil_etcd *e, const char *key, vigil_etcd_observer **out)
{
    vigil_etcd__why("%s", "");
    if (!e || !key || !out)
        return -EINVAL;
    size_t kl = strlen(key);
    char full[VIGIL_ETCD_KEY_MAX];
    if (kl == 0 || kl >= sizeof(((vigil_lease_info *)0)->key) || vigil_etcd__full_key(e, key, full, sizeof(full)) < 0)
        return VIGIL_ERANGE;
    vigil_etcd_observer *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    o->e = e;
    memcpy(o->key, key, kl + 1);
    int rc = vigil_etcd__prefix_b64(full, o->pfx, o->end);
    if (rc < 0) {
        free(o);
        return rc;
    }
    o->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (o->efd < 0) {
        rc = -errno;
        free(o);
        return rc;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int err = pthread_mutex_init(&o->mu, NULL);
    if (err == 0 && (err = pthread_cond_init(&o->cv, &ca)) != 0)
        pthread_mutex_destroy(&o->mu);
    pthread_condattr_destroy(&ca);
    if (err == 0 && (err = pthread_create(&o->thread, NULL, observe_main, o)) != 0) {
        pthread_cond_destroy(&o->cv);
        pthread_mutex_destroy(&o->mu);
    }
    if (err != 0) {
        close(o->efd);
        free(o);
        return -err;
    }
    *out = o;
    return 0;
}

int vigil_etcd_observer_fd(const vigil_etcd_observer *o)
{
    return o ? o->efd : -EINVAL;
}

int vigil_etcd_observer_next(vigil_etcd_observer *o, vigil_lease_info *out, uint64_t timeout_ns)
{
    if (!o || !out)
        return -EINVAL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    bool forever = timeout_ns == UINT64_MAX;
    if (!forever) {
        uint64_t s = (uint64_t)ts.tv_sec + timeout_ns / 1000000000ull, ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000ull;
        s += ns / 1000000000ull;
        ts.tv_sec = s > (uint64_t)INT64_MAX ? (time_t)INT64_MAX : (time_t)s;
        ts.tv_nsec = (long)(ns % 1000000000ull);
    }
    pthread_mutex_lock(&o->mu);
    while (o->n == 0 && !o->err && timeout_ns > 0) {
        if (forever)
            pthread_cond_wait(&o->cv, &o->mu);
        else if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) != 0)
            break;
    }
    int rc;
    if (o->n > 0) {
        *out = o->q[o->head];
        o->head = (o->head + 1) % OBSERVE_QUEUE;
        if (--o->n == 0 && !o->err)
            efd_clear(o->efd);
        rc = 0;
    } else {
        rc = o->err ? o->err : VIGIL_ETIMEDOUT;
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

void vigil_etcd_observer_close(vigil_etcd_observer *o)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->mu);
    o->stop = true;
    if (o->w)
        vigil_etcd__watch_wakeup(o->w); /* out of its poll at once */
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    close(o->efd);
    free(o);
}
