/* SPDX-License-Identifier: MIT */
/*
 * bench_peer's two sides behind one interface: vigil in this process
 * (peer_vigil.c, on the public headers alone) and etcd's Go client in a
 * child driven over a pipe (bench_peer.c, clientv3/main.go). Both take the
 * same commands, so the driver treats them alike and alternates them.
 *
 * Ops (the same names on both sides):
 *   lock         lock + unlock on a kept session
 *   lease        a lease each time: acquire + release (a session + Lock + Unlock + Close)
 *   wake         hold, then release: the queued waiter's wake-up
 *   elect        campaign + resign on a kept session
 *   observe      proclaim, to the observer being told the new value
 *   round N      a group round of N members (DoubleBarrier Enter + Leave)
 *   unit         add + take + done (Queue Enqueue + Dequeue)
 *   tput K       K lockers on keys of their own, each its own connection
 *   tput-shared K   the same on one connection between them
 */
#ifndef VIGIL_BENCH_PEER_H
#define VIGIL_BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

/* Samples in ns, signed: a waiter may be told before its waker's call returns. */
struct samples {
    int64_t *v;
    size_t   n, cap;
};
int samples_add(struct samples *s, int64_t ns);

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

extern const struct side peer_vigil; /* peer_vigil.c */
int peer_vigil_init(const char *endpoints, const char *run_tag);

#endif
