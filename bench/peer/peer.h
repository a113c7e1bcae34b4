/* SPDX-License-Identifier: MIT */
/*
 * bench_peer's sides behind one interface: vigil in this process
 * (peer_vigil.c, on the public headers alone), etcd's Go client in a child
 * driven over a pipe (peer_go.c, clientv3/main.go), and the floor of one
 * bare request on etcd's JSON gateway, the transport vigil speaks today
 * (peer_gateway.c). They take the same commands, so the driver
 * (bench_peer.c) treats them alike and alternates them.
 *
 * Ops (the same names on every side that has them):
 *   lock         lock + unlock on a kept session
 *   lease        a lease each time: acquire + release (a session + Lock + Unlock + Close)
 *   wake         hold, then release: the queued waiter's wake-up
 *   elect        campaign + resign on a kept session
 *   observe      proclaim, to the observer being told the new value
 *   round N      a group round of N members (DoubleBarrier Enter + Leave)
 *   unit         add + take + done (Queue Enqueue + Dequeue)
 *   tput K       K lockers on keys of their own, each its own connection
 *   tput-shared K   the same on one connection between them
 *   put, range   one bare request (the gateway, libcurl's gRPC and clientv3 only): the floors
 */
#ifndef VIGIL_BENCH_PEER_H
#define VIGIL_BENCH_PEER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* For a child about to exec: bench_peer blocks SIGINT, SIGTERM and SIGHUP
 * in all its threads but the one that takes them, and a mask outlives exec. */
static inline void peer_unblock_signals(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Samples in ns, signed: a waiter may be told before its waker's call returns. */
struct samples {
    int64_t *v;
    size_t   n, cap;
};
int samples_add(struct samples *s, int64_t ns); /* 0 or -ENOMEM */

/* A growing NUL-terminated buffer. */
struct buf {
    char  *p;
    size_t n, cap;
};
int buf_append(struct buf *b, const char *data, size_t len); /* 0 or -ENOMEM */

struct side {
    const char *name;
    /* 0, or < 0 with the reason already printed on stderr */
    int  (*prep)(const char *op, int arg);
    int  (*run)(const char *op, int count, struct samples *out);
    int  (*tput)(const char *op, int ms, int64_t *elapsed_ns, struct samples *out);
    int  (*hold)(void);
    int  (*release)(int64_t *ns);
    void (*drop)(const char *op);
    double (*cpu_s)(void); /* CPU seconds this side's client has used so far; < 0 unknown */
};

extern const struct side peer_vigil, peer_go, peer_gateway, peer_grpc;
void peer_vigil_init(const char *endpoints, const char *run_tag);
int  peer_go_start(const char *program, const char *endpoints, const char **version);
void peer_go_stop(void);
void peer_gateway_init(const char *endpoint);
void peer_grpc_init(const char *endpoint);

/* CPU seconds a process has used (every thread of it); < 0 unknown. */
double peer_proc_cpu_s(pid_t pid);

#endif
