/* SPDX-License-Identifier: MIT */
/*
 * The reporter of etcd trouble (etcd_report.h).
 */
#define _GNU_SOURCE
#include "etcd_report.h"
#include "vigil.h"

#ifdef VIGIL_HAVE_ETCD
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int64_t tool_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One line per change of reachable, the record read as it stands. */
static void say(struct tool_etcd_report *r, uint32_t *told)
{
    vigil_etcd_health h;
    if (vigil_etcd_health_get(r->e, &h) < 0 || h.reachable == *told)
        return;
    /* A failure no wait rides out (TLS, refused credentials, no gateway,
     * a bad endpoint) ends the command, which says it in its own line:
     * "trying again" would be untrue. */
    if (!h.reachable && (h.error == VIGIL_ETLS || h.error == -EACCES || h.error == -EPERM ||
                         h.error == -EPROTONOSUPPORT || h.error == -EINVAL))
        return;
    *told = h.reachable;
    /* The endpoints when there are several: the message names the last one tried. */
    bool several = strchr(r->endpoints, ',') != NULL;
    if (!h.reachable) {
        r->down_ns = h.changed_ns;
        fprintf(stderr, "vigil: %s: etcd unreachable%s%s%s: %s; trying again\n", tool_e(r->what), several ? " (" : "",
                several ? tool_e(r->endpoints) : "", several ? ")" : "", tool_e(h.message));
    } else {
        char took[32];
        int64_t ms = (h.changed_ns - r->down_ns) / 1000000; /* the outage: from going to coming back */
        tool_format_ms(ms > 0 ? (uint64_t)ms : 0, took, sizeof(took));
        fprintf(stderr, "vigil: %s: etcd reachable again (%s) after %s\n", tool_e(r->what), tool_e(r->endpoints),
                took);
    }
}

static void *report(void *arg)
{
    struct tool_etcd_report *r = arg;
    uint32_t told = 1; /* nothing said yet: etcd taken as answering */
    int hfd = vigil_etcd_health_fd(r->e);
    uint64_t next_ping = r->ping_ms ? tool_now_ms() + r->ping_ms : 0;
    for (;;) {
        int timeout = -1;
        if (next_ping) {
            uint64_t now = tool_now_ms();
            timeout = next_ping > now ? (int)(next_ping - now) : 0;
        }
        struct pollfd pf[2] = { { r->stopfd, POLLIN, 0 }, { hfd, POLLIN, 0 } };
        if (poll(pf, 2, timeout) < 0 && errno != EINTR)
            break;
        if (pf[0].revents & POLLIN)
            break;
        if (next_ping && tool_now_ms() >= next_ping) {
            (void)vigil_etcd_ping(r->e); /* its outcome is in the record */
            next_ping = tool_now_ms() + r->ping_ms;
        }
        say(r, &told);
    }
    return NULL;
}

int tool_etcd_report_start(struct tool_etcd_report *r, vigil_etcd *e, const char *what, const char *endpoints,
                           uint64_t ping_ms)
{
    *r = (struct tool_etcd_report){ .e = e, .what = what, .endpoints = endpoints, .ping_ms = ping_ms, .stopfd = -1 };
    if (vigil_etcd_health_fd(e) < 0)
        return -EINVAL;
    if ((r->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return -errno;
    /* Every signal blocked in the thread: it inherits the mask. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->thread, NULL, report, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(r->stopfd);
        r->stopfd = -1;
        return -rc;
    }
    r->running = true;
    return 0;
}

void tool_etcd_report_stop(struct tool_etcd_report *r)
{
    if (!r->running)
        return;
    uint64_t one = 1;
    (void)!write(r->stopfd, &one, sizeof(one));
    pthread_join(r->thread, NULL);
    close(r->stopfd);
    r->stopfd = -1;
    r->running = false;
}

const char *tool_etcd_met(vigil_etcd *e, int64_t since_ns)
{
    static char buf[400];
    vigil_etcd_health h;
    if (vigil_etcd_health_get(e, &h) < 0 || !h.failures || h.failed_ns < since_ns)
        return "";
    snprintf(buf, sizeof(buf), "%s: %s", h.reachable ? "the last error met" : "etcd unreachable", h.message);
    return buf;
}
#endif
