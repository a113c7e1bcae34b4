/* SPDX-License-Identifier: MIT */
/*
 * vigil epoch barrier: a cross-process phase barrier that counts only the
 * live peers of a heartbeat table, so a crashed peer never deadlocks it.
 */
#ifndef VIGIL_BARRIER_H
#define VIGIL_BARRIER_H

#include <vigil/heartbeat.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vigil_barrier vigil_barrier;
#define VIGIL_SERIAL 1 /* returned to exactly one caller per released round */

/* A barrier file's state as vigil_barrier_peek reads it, without a
 * heartbeat table (for `vigil inspect`). Fields may be added at the end. */
typedef struct vigil_barrier_state {
    uint32_t capacity;     /* slots; equal to the heartbeat table's */
    uint32_t epoch;        /* the round now gathering */
    uint32_t arrived;      /* arrivals in it, bound and unbound */
    uint32_t recorded;     /* per-slot arrival records of bound handles in it */
    uint64_t grace_epochs; /* grace stored at create */
    uint32_t sleepers;     /* waiters asleep in the kernel (a hint) */
    uint64_t withdrawals;  /* arrivals withdrawn since create (vigil_barrier_stats) */
} vigil_barrier_state;

/* Counters of the barrier's events since it was created, for monitoring
 * (vigil_hb_stats(3)). */
typedef struct vigil_barrier_counters {
    uint64_t releases;    /* rounds released: the epoch, so it wraps at 2^32 */
    uint64_t withdrawals; /* arrivals withdrawn by waiters that timed out */
} vigil_barrier_counters; /* fields may be added at the end */

/*
 * The barrier's capacity is the heartbeat table's: create takes hb's, and
 * open of a file whose capacity differs from hb's is VIGIL_ECAPACITY. hb
 * must stay open until the barrier is closed.
 */
int      vigil_barrier_create(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out);
int      vigil_barrier_create_mode(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                                   vigil_barrier **out);
int      vigil_barrier_open(const char *path, vigil_hb *hb, uint64_t grace_epochs, vigil_barrier **out);
void     vigil_barrier_close(vigil_barrier *b);
int      vigil_barrier_wait(vigil_barrier *b, uint32_t my_epoch);
int      vigil_barrier_wait_quorum(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum);
int      vigil_barrier_wait_timeout(vigil_barrier *b, uint32_t my_epoch, uint64_t timeout_ns);
int      vigil_barrier_wait_quorum_timeout(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t timeout_ns);
uint32_t vigil_barrier_epoch(const vigil_barrier *b);
uint32_t vigil_barrier_live_peers(const vigil_barrier *b);
int      vigil_barrier_bind(vigil_barrier *b, uint32_t slot); /* this handle's waits keep `slot` beating */
int      vigil_barrier_peek(const char *path, vigil_barrier_state *out); /* read-only, no heartbeat table */

/*
 * The safe start of a group of `participants` (vigil_barrier_start(3)):
 * waits until that many callers have arrived at one round and writes the
 * round after it, the first each member then waits (and the next ones in
 * turn). VIGIL_SERIAL to the caller that released the start round, 0 to
 * the others; VIGIL_ETIMEDOUT (the arrival withdrawn) after timeout_ns,
 * UINT64_MAX for none. Waiting from round 0 without it miscounts rounds
 * when members start at different times.
 */
int      vigil_barrier_start(vigil_barrier *b, uint32_t participants, uint64_t timeout_ns, uint32_t *first_round);
int      vigil_barrier_stats(const vigil_barrier *b, vigil_barrier_counters *out);

/*
 * A wait in slices, for a caller that must get control back now and then
 * (a binding that runs signal handlers, a cancellable task): as
 * vigil_barrier_wait_quorum_timeout (quorum 0: the all-live rule), but a
 * slice that ends with the round still gathering keeps the arrival,
 * returns VIGIL_ETIMEDOUT and sets *arrived; call again with the same
 * *arrived (start at 0) to wait on, or vigil_barrier_withdraw to leave.
 * Any other return clears *arrived. Only real withdrawals are counted in
 * vigil_barrier_stats.
 */
int      vigil_barrier_wait_slice(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t slice_ns,
                                  int *arrived);
int      vigil_barrier_withdraw(vigil_barrier *b, uint32_t my_epoch, int *arrived);
/* vigil_barrier_start in slices: VIGIL_ETIMEDOUT after slice_ns with the
 * arrival kept at round *round (*arrived set: call again, or withdraw at
 * *round); on success *round is the first round, as vigil_barrier_start's. */
int      vigil_barrier_start_slice(vigil_barrier *b, uint32_t participants, uint64_t slice_ns, int *arrived,
                                   uint32_t *round);

#ifdef __cplusplus
}
#endif

#endif
