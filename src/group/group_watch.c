/* SPDX-License-Identifier: MIT */
/*
 * vigil_group_watch: a group's membership as a stream of events behind one
 * file descriptor. A thread of the watcher's own reads members/ (a join
 * event for each member found), then follows a watch of members/ from the
 * revision after: a key created is a join, a key deleted a leave (named
 * from its previous value), a key put again is neither (a round's
 * wake-up, or a campaigner's Proclaim). Events queue under a mutex; an
 * eventfd is readable while the queue is not empty.
 *
 * When the stream ends, fails, or stops speaking for the adapter's
 * current endpoint, the thread asks etcd (a count of members/, through
 * the handle: a request finds an endpoint that answers, and the handle
 * moves there) and opens a new stream from the revision after the last
 * it reported, so the changes between are replayed in etcd's order, each
 * once. Only when etcd compacted that history away (or the count, at or
 * before what we have seen, disagrees with the members known: a stream
 * from a member that lags) does it read members/ again and report the
 * difference (a leave for each member gone, a join for each one new); a
 * member that joined and left entirely within such a gap is not reported.
 * Every PROBE_MS the count is asked for anyway: a frozen member keeps a
 * stream open and silent, and is found out there.
 *
 * THE LEADER (VIGIL_GROUP_WATCH_LEADER). The leader is the known member
 * with the lowest join revision, its term that revision. It is judged
 * after each revision's events are all applied (a txn of someone else's
 * may delete several members at one revision: the leader between two of
 * its deletions never led) and after each reading, and a leader event is
 * queued when the term differs from the last one told: each term at most
 * once, since a term never comes back (a join revision never recurs, and
 * no member can join below the lowest live one). Replayed history tells
 * every leader in between; after a compacted gap, the leader found by the
 * reading is told, at that reading's revision. Modelled in
 * model/leader.pml (watch, compacted; watch_old is the reading after
 * every break that this replaces); tests/etcd_test_group_leader.c.
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PROBE_MS   2000
#define QUEUE_MAX  (1u << 20) /* events a reader may leave unread; past it the watch fails */
#define EVENTS     64

struct known {
    char                    hex[17];
    vigil_group_member_info info;
};

struct vigil_group_watcher {
    vigil_etcd     *e;
    unsigned        flags; /* VIGIL_GROUP_WATCH_* */
    char            prefix[GKEY_MAX]; /* GROUP/members/ */
    pthread_t       thread;
    int             efd;   /* readable while events are queued */
    int             stopfd;
    pthread_mutex_t lock;
    vigil_group_event *q;
    size_t          qhead, qlen, qcap;
    int             failed; /* the thread's error, for good */
    _Atomic bool    stop;
    /* the thread's own */
    struct known   *k;
    size_t          nk, kcap;
    int64_t         rev;
    uint64_t        told_term; /* the leader last told (0: none), with VIGIL_GROUP_WATCH_LEADER */
};

static int push(vigil_group_watcher *w, uint32_t type, uint32_t initial, const vigil_group_member_info *info,
                int64_t rev)
{
    vigil_group_event ev = { .type = type, .initial = initial, .member = *info, .revision = (uint64_t)rev,
                             .time_ns = grealtime_ns() };
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    if (w->qhead + w->qlen == w->qcap) {
        if (w->qhead > 0) {
            memmove(w->q, w->q + w->qhead, w->qlen * sizeof(*w->q));
            w->qhead = 0;
        } else {
            size_t cap = w->qcap ? w->qcap * 2 : 64;
            vigil_group_event *q = cap <= QUEUE_MAX ? realloc(w->q, cap * sizeof(*q)) : NULL;
            if (!q) {
                rc = cap <= QUEUE_MAX ? -ENOMEM : -ENOBUFS;
                goto out;
            }
            w->q = q;
            w->qcap = cap;
        }
    }
    w->q[w->qhead + w->qlen++] = ev;
    if (w->qlen == 1) {
        uint64_t one = 1;
        (void)!write(w->efd, &one, sizeof(one));
    }
out:
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static struct known *find_known(vigil_group_watcher *w, const char *hex)
{
    for (size_t i = 0; i < w->nk; i++)
        if (strcmp(w->k[i].hex, hex) == 0)
            return &w->k[i];
    return NULL;
}

static int add_known(vigil_group_watcher *w, const char *hex, const vigil_group_member_info *info)
{
    if (w->nk == w->kcap) {
        size_t cap = w->kcap ? w->kcap * 2 : 64;
        struct known *k = realloc(w->k, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        w->k = k;
        w->kcap = cap;
    }
    snprintf(w->k[w->nk].hex, sizeof(w->k[w->nk].hex), "%s", hex);
    w->k[w->nk++].info = *info;
    return 0;
}

static void drop_known(vigil_group_watcher *w, struct known *k)
{
    *k = w->k[--w->nk];
}

/* The leader as the known members make it, told when its term is not the
 * one told last (THE LEADER, above). rev: the revision of the change. */
static int judge_leader(vigil_group_watcher *w, uint32_t initial, int64_t rev)
{
    if (!(w->flags & VIGIL_GROUP_WATCH_LEADER))
        return 0;
    const struct known *lead = NULL;
    for (size_t i = 0; i < w->nk; i++)
        if (!lead || w->k[i].info.revision < lead->info.revision)
            lead = &w->k[i];
    uint64_t term = lead ? lead->info.revision : 0;
    if (term == w->told_term && !initial)
        return 0;
    vigil_group_member_info none;
    memset(&none, 0, sizeof(none));
    w->told_term = term;
    return push(w, VIGIL_GROUP_LEADER, initial, lead ? &lead->info : &none, rev);
}

/* One event of the stream. */
static int apply(vigil_group_watcher *w, const struct gevent *ev)
{
    size_t plen = strlen(w->prefix);
    if (strncmp(ev->kv.key, w->prefix, plen) != 0 || strlen(ev->kv.key + plen) >= 17)
        return 0;
    const char *hex = ev->kv.key + plen;
    struct known *k = find_known(w, hex);
    if (ev->del) {
        if (!k)
            return 0;
        vigil_group_member_info info = k->info;
        drop_known(w, k);
        return push(w, VIGIL_GROUP_LEAVE, 0, &info, ev->kv.mod);
    }
    vigil_group_member_info info;
    gmember_parse(&ev->kv, hex, &info);
    if (k) {
        k->info = info; /* put again: not a change of membership */
        return 0;
    }
    int rc = add_known(w, hex, &info);
    return rc < 0 ? rc : push(w, VIGIL_GROUP_JOIN, 0, &info, ev->kv.mod);
}

/* Reads members/ and reports the difference with what was known (all of
 * it the first time, as initial joins). */
static int resync(vigil_group_watcher *w, bool initial)
{
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, w->prefix, G_PREFIX | G_BY_CREATE, 0);
    int rc = gtxn_run(w->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int64_t count;
    const cJSON *kvs, *kv;
    size_t plen = strlen(w->prefix), n = 0;
    if ((rc = greply_range(&r, 0, &count, &kvs)) < 0) {
        greply_free(&r);
        return rc;
    }
    size_t total = (size_t)cJSON_GetArraySize(kvs);
    struct known *now = total ? calloc(total, sizeof(*now)) : NULL;
    if (total && !now)
        rc = -ENOMEM;
    cJSON_ArrayForEach(kv, (rc == 0 ? kvs : NULL)) {
        struct gkv g;
        if ((rc = gkv_read(kv, &g)) < 0)
            break;
        if (strncmp(g.key, w->prefix, plen) == 0 && strlen(g.key + plen) < 17) {
            snprintf(now[n].hex, sizeof(now[n].hex), "%s", g.key + plen);
            gmember_parse(&g, now[n].hex, &now[n].info);
            n++;
        }
        gkv_free(&g);
    }
    int64_t rev = r.rev;
    greply_free(&r);
    /* The gone, then the new (in join order). */
    for (size_t i = 0; rc == 0 && i < w->nk;) {
        bool still = false;
        for (size_t j = 0; j < n && !still; j++)
            still = strcmp(now[j].hex, w->k[i].hex) == 0 && now[j].info.revision == w->k[i].info.revision;
        if (still) {
            i++;
            continue;
        }
        vigil_group_member_info info = w->k[i].info;
        drop_known(w, &w->k[i]);
        rc = push(w, VIGIL_GROUP_LEAVE, 0, &info, rev);
    }
    for (size_t j = 0; rc == 0 && j < n; j++) {
        if (find_known(w, now[j].hex))
            continue;
        if ((rc = add_known(w, now[j].hex, &now[j].info)) == 0)
            rc = push(w, VIGIL_GROUP_JOIN, initial, &now[j].info, initial ? rev : (int64_t)now[j].info.revision);
    }
    free(now);
    if (rc == 0)
        rc = judge_leader(w, initial, rev);
    if (rc == 0)
        w->rev = rev;
    return rc;
}

/* Does a count of members/ agree with what we know? (Through e: a member
 * that froze is found out, and e moves to another.) */
static int probe(vigil_group_watcher *w, bool *agree)
{
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, w->prefix, G_PREFIX | G_COUNT, 0);
    int rc = gtxn_run(w->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int64_t count;
    const cJSON *kvs;
    rc = greply_range(&r, 0, &count, &kvs);
    /* Past our revision, a difference may be news the stream has yet to
     * bring: only a count at or before what we have seen can disagree. */
    *agree = rc < 0 || r.rev > w->rev || (size_t)count == w->nk;
    greply_free(&r);
    return rc;
}

static bool stopping(vigil_group_watcher *w)
{
    return atomic_load_explicit(&w->stop, memory_order_acquire);
}

/* Sleeps ms, or until the watcher is stopped. */
static void pause_ms(vigil_group_watcher *w, unsigned ms)
{
    struct pollfd p = { w->stopfd, POLLIN, 0 };
    (void)poll(&p, 1, (int)ms);
}

/* Applies a batch of the stream's events, judging the leader at the end
 * of each revision. A revision whose events may go on in the next batch
 * (a full one) is judged there: *pending holds it. */
static int apply_batch(vigil_group_watcher *w, struct gevent *ev, int n, int max, int64_t *pending)
{
    int rc = 0;
    if (*pending && (n <= 0 || ev[0].kv.mod != *pending))
        rc = judge_leader(w, 0, *pending);
    *pending = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0)
            rc = apply(w, &ev[i]);
        bool last_of_rev = i + 1 == n || ev[i + 1].kv.mod != ev[i].kv.mod;
        if (rc == 0 && last_of_rev) {
            if (i + 1 == n && n == max)
                *pending = ev[i].kv.mod;
            else
                rc = judge_leader(w, 0, ev[i].kv.mod);
        }
        gkv_free(&ev[i].kv);
    }
    return rc;
}

static void *run(void *arg)
{
    vigil_group_watcher *w = arg;
    struct gstream *s = NULL;
    struct gevent ev[EVENTS];
    unsigned backoff = 0;
    bool fresh = true;   /* w->rev is a reading's: watch on from it */
    bool reread = false; /* history lost (compacted) or in doubt: read members/ again */
    int64_t pending = 0;
    int rc = 0;
    while (!stopping(w)) {
        /* After a break: etcd asked first (the handle finds an endpoint
         * that answers, and the stream opens there), then the history
         * since w->rev replayed, or, when it is gone, a new reading. */
        if (!fresh && !reread) {
            bool agree = true;
            if ((rc = probe(w, &agree)) == 0 && !agree)
                reread = true;
        }
        if (rc == 0 && reread)
            rc = resync(w, false);
        if (rc == 0)
            rc = gstream_open(w->e, w->prefix, G_PREFIX, w->rev + 1, &s);
        if (rc < 0) {
            s = NULL;
            if (rc == -ENOMEM || rc == -ENOBUFS)
                break;
            /* etcd unreachable: again, backing off up to a second. */
            backoff = backoff ? (backoff * 2 > 1000 ? 1000 : backoff * 2) : 50;
            fresh = false;
            rc = 0;
            pause_ms(w, backoff);
            continue;
        }
        fresh = false;
        reread = false;
        uint64_t opened = gnow_ns(), probe_at = opened + PROBE_MS * 1000000ull;
        bool heard = false;
        for (;;) {
            int n = gstream_next(s, GROUP_STREAM_SLICE_MS, w->stopfd, ev, EVENTS, &w->rev);
            heard = heard || (n > 0 && n != GSTREAM_ENDED);
            rc = apply_batch(w, ev, n > 0 && n != GSTREAM_ENDED ? n : 0, EVENTS, &pending);
            if (n == GSTREAM_ENDED && gstream_compacted(s))
                reread = true;
            if (rc < 0 || n < 0 || n == GSTREAM_ENDED || stopping(w))
                break;
            if (n == EVENTS)
                continue; /* more may be queued, of this revision too: read them before leaving the stream */
            if (!gstream_current(s, w->e))
                break;
            if (gnow_ns() >= probe_at) {
                bool agree = true;
                if (probe(w, &agree) < 0 || !agree) {
                    reread = !agree;
                    break;
                }
                probe_at = gnow_ns() + PROBE_MS * 1000000ull;
            }
        }
        gstream_close(s);
        s = NULL;
        if (rc == 0 && pending) /* the stream ended after a full batch: its last revision is whole */
            rc = judge_leader(w, 0, pending);
        pending = 0;
        if (rc == -ENOMEM || rc == -ENOBUFS)
            break;
        rc = 0;
        /* A stream that ended at once, saying nothing (refused, cancelled
         * for good), is a failure to back off from, not a loop. */
        if (!heard && gnow_ns() - opened < PROBE_MS * 1000000ull && !stopping(w)) {
            backoff = backoff ? (backoff * 2 > 1000 ? 1000 : backoff * 2) : 50;
            pause_ms(w, backoff);
        } else {
            backoff = 0;
        }
    }
    if (rc < 0) {
        pthread_mutex_lock(&w->lock);
        w->failed = rc;
        uint64_t one = 1;
        (void)!write(w->efd, &one, sizeof(one));
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

int vigil_group_watch(vigil_etcd *e, const char *group, vigil_group_watcher **out)
{
    return vigil_group_watch_flags(e, group, 0, out);
}

int vigil_group_watch_flags(vigil_etcd *e, const char *group, unsigned flags, vigil_group_watcher **out)
{
    int rc;
    if (!e || !out || (flags & ~(unsigned)VIGIL_GROUP_WATCH_LEADER))
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0)
        return rc;
    vigil_group_watcher *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->e = e;
    w->flags = flags;
    if ((rc = gkey(w->prefix, group, "members/")) < 0) {
        free(w);
        return rc;
    }
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->efd < 0 || w->stopfd < 0 || pthread_mutex_init(&w->lock, NULL) != 0) {
        rc = w->efd < 0 || w->stopfd < 0 ? -errno : -ENOMEM;
        goto fail;
    }
    /* The first reading here, so that a failure to reach etcd is the
     * caller's answer and the initial joins are queued on return. */
    if ((rc = resync(w, true)) < 0 || (rc = -pthread_create(&w->thread, NULL, run, w)) < 0) {
        pthread_mutex_destroy(&w->lock);
        goto fail;
    }
    *out = w;
    return 0;
fail:
    if (w->efd >= 0)
        close(w->efd);
    if (w->stopfd >= 0)
        close(w->stopfd);
    free(w->q);
    free(w->k);
    free(w);
    return rc;
}

int vigil_group_watch_fd(const vigil_group_watcher *w)
{
    return w ? w->efd : -EINVAL;
}

int vigil_group_watch_next(vigil_group_watcher *w, vigil_group_event *out)
{
    if (!w || !out)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    if (w->qlen > 0) {
        *out = w->q[w->qhead++];
        w->qlen--;
        rc = 1;
    } else if (w->failed) {
        rc = w->failed;
    }
    if (w->qlen == 0 && !w->failed) {
        uint64_t v;
        w->qhead = 0;
        (void)!read(w->efd, &v, sizeof(v)); /* empty: not readable until the next event */
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void vigil_group_watch_close(vigil_group_watcher *w)
{
    if (!w)
        return;
    uint64_t one = 1;
    atomic_store_explicit(&w->stop, true, memory_order_release);
    (void)!write(w->stopfd, &one, sizeof(one)); /* stays readable: every wait of the thread ends */
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    close(w->efd);
    close(w->stopfd);
    free(w->q);
    free(w->k);
    free(w);
}
