/* SPDX-License-Identifier: MIT */
/*
 * etcd taken away and given back, at the moment a test decides: a TCP
 * relay on a loopback port of its own, in a child process, passing every
 * connection on to the fixture's etcd. vt_relay_down kills the child, so
 * every connection through it ends and the port refuses (as an etcd that
 * died); vt_relay_up starts it again on the same port (as one restarted);
 * vt_relay_freeze stops it (SIGSTOP: connections are taken and never
 * answered, as a frozen etcd).
 */
#ifndef VIGIL_RELAYTEST_H
#define VIGIL_RELAYTEST_H

#include "testutil.h"

#include <poll.h>
#include <stdbool.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>

struct vt_relay {
    pid_t pid;
    int   port;        /* ours, the same across downs and ups */
    int   target_port; /* etcd's */
    char  url[64];     /* http://127.0.0.1:PORT */
};

#define VT_RELAY_PAIRS 64

/* The child: accepts on ls, connects each to the target, copies both ways. */
static inline _Noreturn void vt_relay_serve(int ls, int target_port)
{
    struct pollfd pf[1 + 2 * VT_RELAY_PAIRS];
    int fd[2 * VT_RELAY_PAIRS];
    int n = 0;
    char buf[65536];
    for (;;) {
        pf[0] = (struct pollfd){ ls, POLLIN, 0 };
        for (int i = 0; i < n; i++)
            pf[1 + i] = (struct pollfd){ fd[i], POLLIN, 0 };
        if (poll(pf, (nfds_t)(1 + n), -1) < 0)
            continue;
        if ((pf[0].revents & POLLIN) && n + 2 <= 2 * VT_RELAY_PAIRS) {
            int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)target_port),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            if (c >= 0 && t >= 0 && connect(t, (struct sockaddr *)&a, sizeof(a)) == 0) {
                int one = 1;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                fd[n++] = c;
                fd[n++] = t;
            } else {
                if (c >= 0)
                    close(c);
                if (t >= 0)
                    close(t);
            }
            continue; /* the arrays moved: poll again */
        }
        for (int i = 0; i < n; i++) {
            if (!(pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int peer = fd[i ^ 1];
            ssize_t k = read(fd[i], buf, sizeof(buf));
            bool ok = k > 0;
            for (ssize_t off = 0; ok && off < k;) {
                ssize_t w = write(peer, buf + off, (size_t)(k - off));
                ok = w > 0;
                off += w > 0 ? w : 0;
            }
            if (!ok) { /* the pair ends: both closed, the last pair moved into its place */
                int p = i & ~1;
                close(fd[p]);
                close(fd[p + 1]);
                fd[p] = fd[n - 2];
                fd[p + 1] = fd[n - 1];
                n -= 2;
                break; /* the arrays moved: poll again */
            }
        }
    }
}

/* Starts the relay's child on r->port (0 the first time: a free port
 * found here). 0, or -1. */
static inline int vt_relay_up(struct vt_relay *r)
{
    for (int tries = 0; tries < 50; tries++) {
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        /* Below the ephemeral range, so that no outgoing connection takes
         * the port while the relay is down. */
        int port = r->port ? r->port : 20000 + (int)((vt_now_ms() * 7919 + (unsigned)getpid() * 31 + (unsigned)tries * 977) % 12000);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 64) != 0) {
            if (ls >= 0)
                close(ls);
            if (r->port)
                vt_sleep_ms(100); /* ours: a moment for the old one's sockets to go */
            continue;
        }
        fflush(NULL);
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
            close(ls);
            return -1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            vt_relay_serve(ls, r->target_port);
        }
        close(ls); /* the child's alone: killed, the port refuses */
        r->pid = pid;
        r->port = port;
        snprintf(r->url, sizeof(r->url), "http://127.0.0.1:%d", port);
        return 0;
    }
    return -1;
}

/* A relay to the etcd at url (http://127.0.0.1:PORT): 0, or -1. */
static inline int vt_relay_start(struct vt_relay *r, const char *url)
{
    memset(r, 0, sizeof(*r));
    const char *colon = strrchr(url, ':');
    if (!colon || (r->target_port = atoi(colon + 1)) <= 0)
        return -1;
    return vt_relay_up(r);
}

/* Kills the child: every connection through it ends, the port refuses. */
static inline void vt_relay_down(struct vt_relay *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    vt_wait(r->pid, 10000);
    r->pid = 0;
}

/* Stops (1) or continues (0) the child: its connections hang. */
static inline void vt_relay_freeze(struct vt_relay *r, bool frozen)
{
    if (r->pid > 0)
        kill(r->pid, frozen ? SIGSTOP : SIGCONT);
}

/* How many times needle occurs in s. */
static inline int vt_occurs(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#endif
