/* SPDX-License-Identifier: MIT */
/*
 * Whether etcd answers a handle (vigil_etcd_health_get): a record kept
 * beside the handle and fed by its request loop, the one place every
 * request passes (etcd_http.c: call_endpoints), whatever thread sends it
 * (the caller's, a keepalive's, a watcher's). A request some endpoint
 * answered makes the handle reachable; one that no endpoint answered
 * (refused, timed out, TLS, etcd saying it cannot serve) makes it
 * unreachable and is kept as the last failure, with the endpoint and the
 * words that say why. A change of reachable is counted and written to an
 * eventfd, made when first asked for, so a caller polls it beside its own
 * descriptors and reads the record when it turns readable: one line when
 * etcd goes, one when it is back, however many requests fail between.
 *
 * The record has a mutex of its own, taken inside e's lock (the request
 * loop holds that) and never the other way round: a reader is never held
 * up by a request in flight. Transport-independent: what it counts is a
 * request answered or not, which a gRPC transport has too.
 */
#define _GNU_SOURCE
#include "transport_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct vigil_etcd_health_state {
    pthread_mutex_t   lock;
    int               fd; /* eventfd, -1 until vigil_etcd_health_fd */
    vigil_etcd_health h;
};

int64_t vigil_etcd__wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int vigil_etcd__health_open(vigil_etcd *e)
{
    struct vigil_etcd_health_state *s = calloc(1, sizeof(*s));
    if (!s || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return -ENOMEM;
    }
    s->fd = -1;
    s->h.reachable = 1; /* nothing has failed yet */
    e->health = s;
    return 0;
}

void vigil_etcd__health_close(vigil_etcd *e)
{
    struct vigil_etcd_health_state *s = e->health;
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
    e->health = NULL;
}

/* With s->lock held: reachable becomes r. */
static void turn(struct vigil_etcd_health_state *s, uint32_t r, int64_t now)
{
    if (s->h.reachable == r)
        return;
    s->h.reachable = r;
    s->h.changes++;
    s->h.changed_ns = now;
    if (s->fd >= 0) {
        uint64_t one = 1;
        (void)!write(s->fd, &one, sizeof(one));
    }
}

void vigil_etcd__health_answered(vigil_etcd *e)
{
    struct vigil_etcd_health_state *s = e->health;
    if (!s)
        return;
    int64_t now = vigil_etcd__wall_ns();
    pthread_mutex_lock(&s->lock);
    s->h.answered_ns = now;
    turn(s, 1, now);
    pthread_mutex_unlock(&s->lock);
}

const char *vigil_etcd__redact(const char *url, char *buf, size_t cap)
{
    if (!url)
        return NULL;
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    size_t end = strcspn(host, "/?#");
    const char *at = memchr(host, '@', end);
    if (!at)
        return url;
    /* The last '@' of the authority ends the userinfo (RFC 3986). */
    for (const char *p = at; p < host + end; p++)
        if (*p == '@')
            at = p;
    snprintf(buf, cap, "%.*s%s", (int)(host - url), url, at + 1);
    return buf;
}

void vigil_etcd__health_failed(vigil_etcd *e, int rc, const char *url, int64_t sent_ns)
{
    char clean[512];
    url = vigil_etcd__redact(url, clean, sizeof(clean)); /* no password in a public record */
    struct vigil_etcd_health_state *s = e->health;
    if (!s || rc >= 0 || rc == VIGIL_ETIMEDOUT) /* a wait's deadline is the caller's, not etcd's */
        return;
    const char *why = vigil_etcd_errmsg();
    int64_t now = vigil_etcd__wall_ns();
    pthread_mutex_lock(&s->lock);
    s->h.failures++;
    s->h.error = rc;
    s->h.failed_ns = now;
    /* The endpoint, the error, and libcurl's or etcd's words when they
     * add to it ("Couldn't connect to server" hides a refusal). */
    const char *err = vigil_strerror(rc);
    if (!*why || strstr(why, err))
        snprintf(s->h.message, sizeof(s->h.message), "%s: %s", url ? url : "etcd", *why ? why : err);
    else
        snprintf(s->h.message, sizeof(s->h.message), "%s: %s (%s)", url ? url : "etcd", err, why);
    /* Unreachable since the failing request was sent, not since it gave
     * up (a timeout later): the outage is not under-told by that. */
    turn(s, 0, sent_ns && sent_ns < now ? sent_ns : now);
    pthread_mutex_unlock(&s->lock);
}

/* The record; drained, the fd too (a reader's, not a wait's look). */
static int snapshot(vigil_etcd *e, vigil_etcd_health *out, bool drain)
{
    if (!e || !out || !e->health)
        return -EINVAL;
    struct vigil_etcd_health_state *s = e->health;
    pthread_mutex_lock(&s->lock);
    *out = s->h;
    if (drain && s->fd >= 0) {
        uint64_t v;
        (void)!read(s->fd, &v, sizeof(v)); /* nonblocking: read, unreadable until the next change */
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int vigil_etcd_health_get(vigil_etcd *e, vigil_etcd_health *out)
{
    return snapshot(e, out, true);
}

int vigil_etcd_health_fd(vigil_etcd *e)
{
    if (!e || !e->health)
        return -EINVAL;
    struct vigil_etcd_health_state *s = e->health;
    pthread_mutex_lock(&s->lock);
    if (s->fd < 0)
        s->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fd = s->fd >= 0 ? s->fd : -errno;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

int vigil_etcd_ping(vigil_etcd *e)
{
    if (!e)
        return -EINVAL;
    struct vigil_etcd_reply r;
    vigil_etcd__lock(e);
    int rc = vigil_etcd__call(e, "v3/maintenance/status", "{}", &r);
    vigil_etcd__unlock(e);
    return rc < 0 ? rc : 0;
}

void vigil_etcd__why_wait(vigil_etcd *e, int64_t start)
{
    vigil_etcd_health h;
    if (snapshot(e, &h, false) < 0 || !h.failures || h.failed_ns < start)
        return;
    vigil_etcd__why("%s: %s", h.reachable ? "the last failure met during the wait" : "no endpoint answers", h.message);
}
