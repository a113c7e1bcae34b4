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
/* As vigil_hb_create_group(3) and vigil_hb_open_flags(3) (a barrier is
 * always opened for writing: VIGIL_OPEN_READONLY is -EINVAL here). */
int      vigil_barrier_create_group(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned mode,
                                    gid_t group, vigil_barrier **out);
int      vigil_barrier_open_flags(const char *path, vigil_hb *hb, uint64_t grace_epochs, unsigned flags,
                                  vigil_barrier **out);
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

/*
 * Who a released round counted and who it left out (vigil_barrier_wait_info(3)):
 * the judgement that released it, recorded before its commit. counted:
 * bound registrations whose arrival it counted; unbound: anonymous
 * arrivals it counted; left out: registrations in the table it did not
 * count, dead (heartbeat lapsed, arrived or not) or, when a quorum alone
 * released the round, live and not arrived. Under the all-live rule a
 * live slot with no arrival record was matched by an unbound arrival.
 */
#define VIGIL_BARRIER_COUNTED 1 /* arrived, live: counted */
#define VIGIL_BARRIER_DEAD    2 /* left out: its heartbeat had lapsed */
#define VIGIL_BARRIER_ABSENT  3 /* left out: live, not arrived (a quorum release) */
typedef struct vigil_barrier_peer {
    uint32_t slot;
    uint32_t why;  /* VIGIL_BARRIER_COUNTED, _DEAD or _ABSENT */
    uint64_t gen;  /* the registration (vigil-files(5)) */
    uint32_t pid;  /* its pid if it still holds the slot, else 0 */
} vigil_barrier_peer;
typedef struct vigil_barrier_round {
    uint32_t round;
    uint32_t kept;          /* 1: filled from the round's record; 0: no longer kept */
    uint32_t serial_slot;   /* slot + 1 of the handle given VIGIL_SERIAL, 0 an unbound one */
    uint64_t serial_gen;    /* its registration, 0 unbound */
    uint32_t counted, unbound, left_out; /* how many (counted, left_out may exceed the arrays) */
    vigil_barrier_peer *counted_peers;   /* in: room for counted_cap (NULL, 0: none wanted) */
    uint32_t            counted_cap;
    vigil_barrier_peer *left_out_peers;  /* in: room for left_out_cap */
    uint32_t            left_out_cap;
} vigil_barrier_round;
/* As vigil_barrier_wait_quorum_timeout (quorum 0: the all-live rule,
 * timeout_ns UINT64_MAX: none), and on 0 or VIGIL_SERIAL fills *info from
 * the round's record, info->kept 0 when that record is no longer kept
 * (the last eight judgements' are: vigil_barrier_wait_info(3)). */
int      vigil_barrier_wait_info(vigil_barrier *b, uint32_t my_epoch, uint32_t quorum, uint64_t timeout_ns,
                                 vigil_barrier_round *info);
/* A released round's record: 0, or VIGIL_EVACANT (not released, or no
 * longer kept). */
int      vigil_barrier_round_info(const vigil_barrier *b, uint32_t round, vigil_barrier_round *info);

#ifdef __cplusplus
}
#endif

#endif
