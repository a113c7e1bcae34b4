/* SPDX-License-Identifier: MIT */
/*
 * Leader election across hosts on etcd: run it on several hosts (or
 * several times on one) with the same endpoints and key; one leads at a
 * time, the others wait their turn asleep on a watch, and every leader
 * gets a term greater than any before it.
 *
 *   etcd_leader ENDPOINTS [KEY] [NAME]
 *   etcd_leader http://10.0.0.1:2379,http://10.0.0.2:2379 cluster/leader host-a
 *
 * The pieces:
 *   - vigil_etcd_acquire_wait campaigns: it queues behind the leader and
 *     returns once this process leads (etcdctl elect, and Go's
 *     concurrency.Election, campaign for the same key the same way:
 *     `etcdctl get --prefix --sort-by=CREATE --limit=1 cluster/leader/`
 *     shows who leads, vigil or not);
 *   - the lease's token is the term: strictly greater at every change of
 *     leader, so whatever the leader writes carries it, and a store that
 *     refuses writes below the greatest term it has seen cannot be
 *     overwritten by a leader that was deposed without knowing it;
 *   - a keepalive renews the lease every 0.32 of its TTL, and
 *     vigil_keepalive_fd turns readable the moment leadership is lost (the
 *     renewal refused, or no renewal accepted for a TTL: etcd unreachable),
 *     so the loop below learns it in poll(2), not at its next look;
 *   - SIGINT or SIGTERM while leading resigns: the lease is revoked and the
 *     next in line leads at once, without waiting out the TTL.
 *
 * Build: cc etcd_leader.c $(pkg-config --cflags --libs vigil-etcd)
 */
#define _GNU_SOURCE
#include <vigil/etcd.h>
#include <vigil/vigil.h>

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define TTL_MS  5000
#define WORK_MS 1000 /* the leader's duty cycle */
/* A request is worth nothing to a lease once a renewal period (0.32 TTL)
 * has gone by: bound each well below a third of the TTL
 * (vigil_etcd_set_timeout(3)), so that a hung member costs one short
 * attempt before the next endpoint answers, never the lease. */
#define REQUEST_MS (TTL_MS / 5)

/* The leader's work: here a line a second, tagged with the term as every
 * write of a real leader would be. */
static void lead_once(const vigil_lease *l, unsigned n)
{
    printf("%s: term %" PRIu64 ": leading (%u)\n", l->owner, l->token, n);
    fflush(stdout);
}

/* Leads until leadership is lost (0) or a signal asks to resign (1). */
static int lead(vigil_etcd *e, const vigil_lease *l, int sfd)
{
    vigil_lease_port port = vigil_etcd_port(e);
    vigil_keepalive *ka = NULL;
    int rc = vigil_keepalive_start(&port, l, &ka);
    if (rc < 0) {
        fprintf(stderr, "keepalive: %s\n", vigil_strerror(rc));
        vigil_etcd_release(e, l);
        return 0;
    }
    int resign = 0;
    for (unsigned n = 1;; n++) {
        struct pollfd pf[2] = { { vigil_keepalive_fd(ka), POLLIN, 0 }, { sfd, POLLIN, 0 } };
        lead_once(l, n);
        if (poll(pf, 2, WORK_MS) < 0)
            continue; /* EINTR */
        if (pf[0].revents & POLLIN) {
            printf("%s: term %" PRIu64 ": leadership lost\n", l->owner, l->token);
            break;
        }
        if (pf[1].revents & POLLIN) {
            printf("%s: term %" PRIu64 ": resigning\n", l->owner, l->token);
            resign = 1;
            break;
        }
    }
    /* Stop first: no renewal may land after the release. Release either
     * way: after a loss it frees the key at once if etcd still had it. */
    vigil_keepalive_stop(ka);
    vigil_etcd_release(e, l);
    fflush(stdout);
    return resign;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s ENDPOINTS [KEY] [NAME]\n", argv[0]);
        return 2;
    }
    const char *key = argc > 2 ? argv[2] : "vigil-example/leader";
    char name[64];
    if (argc > 3) {
        snprintf(name, sizeof(name), "%s", argv[3]);
    } else {
        char host[48] = "host";
        gethostname(host, sizeof(host) - 1);
        snprintf(name, sizeof(name), "%s:%d", host, (int)getpid());
    }
    vigil_etcd *e = NULL;
    struct vigil_etcd_options o = { .dial_timeout_ms = REQUEST_MS / 2, .request_timeout_ms = REQUEST_MS };
    int rc = vigil_etcd_connect_opts(argv[1], &o, &e);
    if (rc < 0) {
        fprintf(stderr, "%s: %s %s\n", argv[1], vigil_strerror(rc), vigil_etcd_errmsg());
        return 1;
    }
    /* SIGINT and SIGTERM: while campaigning they end the program (nothing
     * is held); while leading they are read from a signalfd, to resign. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    for (;;) {
        printf("%s: campaigning for %s\n", name, key);
        fflush(stdout);
        vigil_lease l;
        rc = vigil_etcd_acquire_wait(e, key, name, TTL_MS, UINT64_MAX, &l);
        if (rc < 0) {
            fprintf(stderr, "%s: campaign: %s %s\n", key, vigil_strerror(rc), vigil_etcd_errmsg());
            sleep(1); /* etcd unreachable: try again */
            continue;
        }
        sigprocmask(SIG_BLOCK, &stop, NULL);
        int resign = lead(e, &l, sfd);
        if (resign)
            break;
        sigprocmask(SIG_UNBLOCK, &stop, NULL);
    }
    close(sfd);
    vigil_etcd_close(e);
    return 0;
}
