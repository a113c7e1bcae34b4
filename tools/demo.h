/* SPDX-License-Identifier: MIT */
/*
 * vigil demo: what the parent (cmd_demo.c) and the workers (demo_worker.c)
 * share. The coordination itself goes through the vigil files; the "box"
 * below is only the demo's own narration channel, an anonymous shared
 * mapping where each worker reports what it did so the parent can tell the
 * story in order and check it, and where the parent leaves the two orders
 * it gives (adopt these units; stop after this round).
 */
#ifndef VIGIL_TOOL_DEMO_H
#define VIGIL_TOOL_DEMO_H

#include "vigil.h"

#include <stdatomic.h>
#include <sys/types.h>

#define DEMO_MAX_WORKERS 32
#define DEMO_GRACE       3u     /* epochs */
#define DEMO_TICK_MS     400u   /* the parent's epoch ticker */
#define DEMO_SLICE_MS    25u    /* a worker's beat, elect and mailbox loop */
#define DEMO_WORK_MS     1000u  /* the work part of each phase */
#define DEMO_LEASE_TTL   3000u  /* ms; the keepalive renews every ttl / 3 */
#define DEMO_KILL_PHASE  4u     /* the leader dies in the middle of this phase */
#define DEMO_AFTER       4u     /* rounds the survivors complete after the kill */
#define DEMO_WAIT_MS     15000u /* the longest any single barrier wait may take */
#define DEMO_DEADLINE_MS 45000u /* the whole demo, at most */
#define DEMO_LEASE_KEY   "demo/resource"

/* One worker's reports. Written by the worker, read by the parent, except
 * adopt_req and the parent's orders in struct demo_box. */
struct demo_worker {
    _Atomic uint32_t pid;
    _Atomic uint32_t slot;        /* UINT32_MAX until registered */
    _Atomic uint32_t ready;       /* registered, bound, waiting for go */
    _Atomic uint32_t phase;       /* the phase it is in */
    _Atomic uint32_t working;     /* 1 in the work part, 0 at the barrier */
    _Atomic uint64_t phase_ms;    /* when the work part began (tool_now_ms) */
    _Atomic uint32_t rounds;      /* barrier rounds it has passed */
    _Atomic uint32_t serials;     /* of those, rounds its wait released (VIGIL_SERIAL) */
    _Atomic uint32_t leader;      /* vigil_leader_is, at its last look */
    _Atomic uint64_t units;       /* the units (bits) it holds in flight */
    _Atomic uint64_t lease_token; /* token of the lease it holds, 0 none */
    _Atomic uint64_t lease_ms;    /* when it acquired it (tool_now_ms) */
    _Atomic uint32_t lease_busy;  /* acquires refused with VIGIL_EBUSY */
    _Atomic uint32_t lease_lost;  /* keepalives that reported the lease lost */
    _Atomic uint64_t adopt_req;   /* parent: units to adopt */
    _Atomic uint64_t adopted;     /* units it adopted from a dead peer */
    _Atomic uint64_t adopted_done;/* of those, the ones it finished */
    _Atomic int32_t  err;         /* first failure, 0 none */
    _Atomic uint32_t err_where;   /* which step failed (enum demo_step) */
    _Atomic uint32_t exited;      /* 1 once it left cleanly */
};

struct demo_box {
    _Atomic uint32_t go;          /* parent: all registered, start phase 0 */
    _Atomic uint32_t stop_after;  /* parent: leave after passing this round (0 = not yet) */
    struct demo_worker w[DEMO_MAX_WORKERS];
};

enum demo_step {
    STEP_NONE, STEP_OPEN, STEP_REGISTER, STEP_BIND, STEP_MARK, STEP_CLEAR, STEP_ELECT,
    STEP_LEASE, STEP_KEEPALIVE, STEP_BARRIER, STEP_START, STEP_UNREGISTER,
};

struct demo_paths {
    char dir[256];
    char hb[320];
    char barrier[320];
    char leases[320];
};

/* Worker `index`: opens the files, registers, works phases until told to
 * stop (or the parent dies, or the deadline passes). Never returns. */
_Noreturn void demo_worker_main(const struct demo_paths *paths, struct demo_box *box,
                                unsigned index, pid_t parent);

/* The units of worker w's lane: bit 2w in even phases, 2w + 1 in odd ones. */
static inline unsigned demo_unit(unsigned w, uint32_t phase)
{
    return 2 * w + (phase & 1);
}

const char *demo_step_name(uint32_t step);

/* ---- the parent (cmd_demo.c runs it, demo_story.c tells it) ------------- */

enum demo_stage { STAGE_RUN, STAGE_KILLED, STAGE_STOPPING, STAGE_DONE };

struct demo_reclaim {
    vigil_reclaim r;
    const char   *by;     /* which watchdog */
    uint64_t      epoch;  /* the parent's epoch when it learnt of it */
    bool          exited; /* reclaimed because its owner exited, not by epochs */
};

struct demo {
    struct demo_paths paths;
    struct demo_box  *box;
    unsigned          n;
    pid_t             pid[DEMO_MAX_WORKERS];
    bool              reaped[DEMO_MAX_WORKERS];
    int               status[DEMO_MAX_WORKERS]; /* as vt_wait: exit code or 128 + signal */
    pid_t             wd_pid;                   /* the `vigil failover` child */
    int               wd_fd;
    char              wd_buf[4096];
    size_t            wd_len;
    int               wd_status;
    vigil_hb         *hb;
    vigil_barrier    *b;
    vigil_leases     *ls;
    uint64_t          start_ms, deadline_ms;
    enum demo_stage   stage;
    bool              failed;      /* something went wrong outside the checks */
    char              why[256];    /* what, for the summary */

    /* what the story has told so far */
    bool         leader_known;
    vigil_leader leader;           /* as last told */
    uint64_t     token_told;
    uint32_t     round_told;

    /* before the kill */
    bool         first_leader_ok;
    vigil_leader first_leader;
    uint32_t     lowest_pid_then;
    int          rival_rc;         /* a rival's acquire while the leader held the lease; 1 = not tried */
    uint64_t     rival_after_ms;

    /* the kill */
    int          victim;           /* worker index, -1 until chosen */
    uint32_t     victim_slot, victim_pid;
    uint64_t     victim_bits, victim_seen, victim_token, term_at_kill, kill_epoch;
    uint64_t     reclaim_us;       /* kill -9 to the victim's slot vacated, 0 never seen */
    uint64_t     vacated_epoch;    /* the epoch when it was seen vacated */
    uint32_t     kill_round, kill_phase;
    uint32_t     busy_at_kill;     /* refused lease acquires, all workers, at the kill */
    bool         stale_told;
    uint64_t     stale_epoch;

    /* after it */
    struct demo_reclaim rec[64];
    unsigned     nrec;
    int          target;           /* who got the dead peer's units, -1 none yet */
    uint64_t     handed;
    bool         adopted_told, finished_told, adopted_in_slot;
    bool         busy_told, new_leader_ok;
    vigil_leader new_leader;
    uint32_t     lowest_pid_after;
    int          taker;            /* who took the lease over, -1 none yet */
    uint64_t     taker_token;
    uint32_t     live_after;       /* barrier live peers once the dead one dropped out */
    bool         rounds_ok;
    bool         serial_ok;
    uint32_t     final_round;
    bool         clean_exit, wd_clean, dir_removed;
};

/* demo_procs.c */
void demo_fail(struct demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void demo_reap(struct demo *d);
bool demo_all_reaped(const struct demo *d);
int  demo_wait_bounded(pid_t pid, unsigned ms); /* exit code, 128 + signal, -1 killed after ms */
int  demo_start_watchdog(struct demo *d);
void demo_read_watchdog(struct demo *d);
void demo_stop_watchdog(struct demo *d);

/* demo_story.c */
void demo_print_intro(const struct demo *d);
void demo_print_table(struct demo *d, uint64_t epoch);
void demo_add_reclaim(struct demo *d, const vigil_reclaim *r, const char *by, uint64_t epoch);
void demo_tell_events(struct demo *d);
int  demo_summary(struct demo *d);
int  demo_worker_of_pid(const struct demo *d, uint32_t pid);
uint32_t demo_lowest_live_pid(const struct demo *d);
void demo_fmt_units(char *buf, size_t size, uint64_t bits);

#endif
