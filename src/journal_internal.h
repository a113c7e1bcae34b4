/* SPDX-License-Identifier: MIT */
/*
 * The reclaim journal: a vigil file of kind journal (4) next to a
 * heartbeat table, in which every reclaim and its hand-back are written
 * down before the slot is vacated, so that a watchdog killed by any
 * signal (SIGABRT from WatchdogSec=, SIGKILL) leaves the next one able to
 * run every pending hand-back exactly once, and to say so for one that
 * may have run (issue 32). Layout: vigil-files(5), "journal".
 *
 * THE JOURNAL (model: model/journal.pml; tests: test_journal.c for the
 * library's steps, test_tool_failover_kill.c for `vigil failover --exec`
 * killed at each of them).
 *
 * An entry is one reclaim. Its 16-byte pair {state, owner} moves by one
 * compare-and-swap (vigil__cas16) from exactly the pair its mover read;
 * `state` holds the entry's state and its ticket, a number taken from the
 * header's last_ticket when the entry is begun and never handed out
 * again, so a stale actor's swap, made from a pair it read before the
 * entry was finished and begun anew, always fails. `owner` is the lock
 * word (proc_internal.h) of the one process that may move the entry on;
 * every other process moves it only once that one is provably dead
 * (vigil_lock_holder_dead: a stopped or unseen owner is alive).
 *
 *   FREE ──begin──> CLAIMING ──commit──> PENDING ──start──> RUNNING
 *     ^  (claimer,     │ owner: claimer      │ owner: 0        │ owner: guardian
 *     │  slot locked)  │                     │                 │
 *     │                └──void──> FREE       │                 └──finish──> DONE ──free──> FREE
 *     │                                      │                      owner: the watchdog to log it
 *     └──────────────────────────────────────┴── (a DONE entry is logged, then freed)
 *
 *  1. THE CLAIM, journaled (failover.c, under the slot's writer lock, so
 *     one claimer per slot at a time): begin takes a FREE entry, {FREE, t}
 *     to {CLAIMING t', me}, and writes slot, pid, gen, why, epoch and the
 *     bits it reads; then the claim's swap of {in_flight, gen} expects
 *     exactly the bits the entry holds (each retry writes the new bits to
 *     the entry first), so the bits taken are the entry's; then commit,
 *     {CLAIMING t', me} to {PENDING t', 0}; then the slot's unlock. A
 *     journal with no FREE entry vacates nothing: the slot waits, stale,
 *     for the next scan (backpressure, never a loss).
 *
 *  2. A claimer killed between begin and commit holds the slot's lock: the
 *     repair that takes the lock over (only from a dead writer w) finds
 *     the slot's CLAIMING entry whose owner is w, and settles it: since w
 *     took the lock nobody else touched the slot, so the slot's gen word
 *     VACANT | the entry's gen means w's swap was made, with the entry's
 *     bits: commit. The entry's gen still the slot's registration: the
 *     swap was not made; the repair adopts the entry ({CLAIMING, w} to
 *     {CLAIMING, me}) and goes on as a claim (vacating if the slot is
 *     stale, dead, or half vacated), or voids it (a live owner keeps its
 *     slot). An entry whose owner is not the holder taken over is not
 *     settled: someone held the slot in between (a scan without the
 *     journal may have vacated it for its own caller), which step 3 says.
 *
 *  3. A CLAIMING entry whose owner is dead and whose slot is unlocked
 *     (version even) was left by a claimer whose slot someone else
 *     repaired without settling it: a scan without the journal (a C
 *     caller of vigil_failover_scan, an older vigil), or a journaled
 *     repair killed between its take-over and its settling (which then
 *     left the slot to another). The slot's gen still the entry's,
 *     nothing was taken (void); otherwise the bits were taken by the dead
 *     claimer's swap or by that scan, which cannot be told apart: the
 *     entry is finished UNSURE, to be logged with its units, never run.
 *
 *  4. THE RUN LOCK (header {run_word, run_seq}, a lock pair) is held by
 *     the guardian (tools/guard.h) of the one CMD that runs: journal-wide,
 *     so CMDs run one at a time across all watchdogs and the next starts
 *     only once the last one's process group is gone. Holding it, the
 *     guardian starts its entry ({PENDING t, *} to {RUNNING t, me}; a
 *     failed swap: someone ran it, nothing is started), forks CMD, and
 *     once the group is gone writes the outcome and finishes it ({RUNNING
 *     t, me} to {DONE t, its watchdog}), then releases the lock.
 *
 *  5. A guardian killed holding the run lock is taken over (LOCK PAIRS:
 *     from exactly the holding judged dead) by any watchdog, which
 *     finishes every RUNNING entry (one holding the run lock sees only
 *     dead holders' RUNNING entries) as UNKNOWN: CMD may have run, and is
 *     never run again. A guardian whose watchdog died ends CMD's group
 *     and finishes its entry ORPHANED, with what really happened.
 *     Before the take-over, what the dead guardian's CMD left of its
 *     process group is ended: CMD's child names its group in the header
 *     (run_pgid, and its own start time) before its exec, so the workers
 *     of any CMD, which the parent-death signal never reached, and a
 *     set-user-ID CMD, which it no longer reaches (its environment is
 *     root's alone to read: a root watchdog's sweep), are sent SIGKILL by
 *     the sweep, and the run lock is taken over (the next CMD started) only
 *     once the group is gone, or 5 s after the first SIGKILL (members the
 *     sweeper may not signal). A group id whose leader now has another
 *     start time is another process's, and a group none of whose live
 *     members carries the entry's VIGIL_RECLAIM_TICKET (a header forged
 *     by whoever may write the journal) is not CMD's: both left alone.
 *
 *  6. A DONE entry is logged by its owner, or, once that one is provably
 *     dead, by whoever first swaps the owner to itself; then freed. A
 *     logger killed between its log line and the free logs twice, never
 *     never.
 *
 * Several watchdogs at once: each step is one swap from a pair read, so
 * of racing movers exactly one wins; PENDING entries are anyone's to run
 * (lowest ticket first), the run lock keeps one CMD at a time. A stopped
 * then resumed watchdog or guardian is alive all along: nothing of its is
 * taken over, and its own later swaps fail where someone moved on.
 */
#ifndef VIGIL_SRC_JOURNAL_INTERNAL_H
#define VIGIL_SRC_JOURNAL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <vigil/heartbeat.h>

#include "file_internal.h"

#define VIGIL_JOURNAL_MAX_CAPACITY (UINT32_C(1) << 16)

/* The entries of a table's journal (failover --exec makes it, or vigil
 * create --kind journal): twice the table's slots, 64 at least. */
static inline uint32_t vigil_journal_capacity_for(uint32_t table_capacity)
{
    return table_capacity > VIGIL_JOURNAL_MAX_CAPACITY / 2 ? VIGIL_JOURNAL_MAX_CAPACITY
           : table_capacity * 2 < 64                       ? 64
                                                           : table_capacity * 2;
}

enum vigil_journal_state {
    VJ_FREE = 0,
    VJ_CLAIMING = 1,
    VJ_PENDING = 2,
    VJ_RUNNING = 3,
    VJ_DONE = 4,
};

/* An entry's state word: state in bits 63..61, its ticket below. */
#define VJ_TICKET_MASK ((UINT64_C(1) << 61) - 1)
static inline uint64_t vj_word(uint32_t state, uint64_t ticket)
{
    return (uint64_t)state << 61 | (ticket & VJ_TICKET_MASK);
}
static inline uint32_t vj_state(uint64_t w) { return (uint32_t)(w >> 61); }
static inline uint64_t vj_ticket(uint64_t w) { return w & VJ_TICKET_MASK; }

/* What became of an entry's CMD (its outcome word, DONE): the leader's
 * wait status in bits 15..0 when VJ_OUT_EXITED, and what was done. */
enum {
    VJ_OUT_EXITED   = 1u << 16, /* the leader was reaped: bits 15..0 */
    VJ_OUT_TERM     = 1u << 17, /* SIGTERM sent to its process group */
    VJ_OUT_KILL     = 1u << 18, /* SIGKILL sent to its process group */
    VJ_OUT_TIMEOUT  = 1u << 19, /* ... for running past the timeout */
    VJ_OUT_ORPHANED = 1u << 20, /* ... because its watchdog died */
    VJ_OUT_STOPPED  = 1u << 21, /* ... because its watchdog was stopped */
    VJ_OUT_LINGERED = 1u << 22, /* the group outlived its leader */
    VJ_OUT_STILL    = 1u << 23, /* the group could not be ended (EPERM) */
    VJ_OUT_NOTRUN   = 1u << 24, /* never started (fork failed) */
    VJ_OUT_UNKNOWN  = 1u << 25, /* its guardian died: CMD may have run */
    VJ_OUT_UNSURE   = 1u << 26, /* the claim was cut short and its slot
                                 * vacated by a scan without the journal */
    VJ_OUT_STRAYS   = 1u << 27, /* what it put outside its group was ended */
};

struct vigil_journal_header {
    uint8_t          magic[8];
    uint32_t         version;        /* 8 */
    uint32_t         kind;           /* 12: VIGIL_KIND_JOURNAL */
    uint32_t         capacity;       /* 16: entries */
    uint32_t         flags;          /* 20: 0 */
    _Atomic uint64_t last_ticket;    /* 24: the last ticket handed out */
    _Atomic uint64_t run_word __attribute__((aligned(16))); /* 32: THE RUN LOCK's holder */
    _Atomic uint64_t run_seq;        /* 40: odd while held */
    uint32_t         table_capacity; /* 48: the table's, at create */
    _Atomic uint32_t run_pgid;       /* 52: the running CMD's process group, 0 none (THE RUN LOCK) */
    _Atomic uint64_t run_start;      /* 56: its leader's start time, telling a recycled id */
    uint64_t         table_dev;      /* 64: the table's st_dev, at create: whose slots the entries name */
    uint64_t         table_ino;      /* 72: its st_ino */
    uint8_t          reserved[48];   /* 80: 0 */
};

struct vigil_journal_entry {
    _Atomic uint64_t state __attribute__((aligned(16))); /* 0: vj_word */
    _Atomic uint64_t owner;     /* 8: lock word, 0 none */
    _Atomic uint32_t slot;      /* 16 */
    _Atomic uint32_t pid;       /* 20 */
    _Atomic uint64_t gen;       /* 24: the registration reclaimed */
    _Atomic uint64_t in_flight; /* 32 */
    _Atomic uint64_t epoch;     /* 40: the table's epoch at the reclaim */
    _Atomic uint32_t why;       /* 48: VIGIL_RECLAIM_STALE or _EXITED */
    _Atomic uint32_t outcome;   /* 52: VJ_OUT_*, once DONE */
    _Atomic uint64_t claimer;   /* 56: lock word of the watchdog that reclaimed it */
};

_Static_assert(sizeof(struct vigil_journal_header) == 128, "journal header is 128 bytes");
_Static_assert(sizeof(struct vigil_journal_entry) == 64, "journal entry is 64 bytes");

typedef struct vigil_journal {
    struct vigil_map              map;
    struct vigil_journal_header  *hdr;
    struct vigil_journal_entry   *e;
    uint32_t                      capacity; /* this process's copy, checked at open */
    uint32_t                      kill_pgid;  /* a dead guardian's group this process sent SIGKILL */
    uint64_t                      kill_since; /* CLOCK_MONOTONIC ns of the first one */
    bool                          starved;    /* a claim found no free entry and vacated nothing (the
                                               * scan stopped there); cleared by whoever says so */
    bool                          starved_said; /* the tool's: said, and not yet said to be over */
} vigil_journal;

/* An entry as one moment had it (vigil_journal_read). */
struct vigil_journal_rec {
    uint32_t idx, state;
    uint64_t ticket, owner, claimer;
    uint32_t slot, pid, why, outcome;
    uint64_t gen, in_flight, epoch;
};

extern const struct vigil_layout vigil_journal_layout;

/* The table a journal is made for: its entries name its slots, and
 * nothing else's (a journal is refused for another table). */
struct vigil_journal_table {
    uint32_t capacity;
    uint64_t dev, ino; /* its st_dev and st_ino */
};

/* Made as every vigil file is (vigil_map_create: mode and group, gid_t
 * -1 the creator's, space reserved); opened with VIGIL_OPEN_* flags (a
 * file another user could have rewritten is VIGIL_EUNTRUSTED for
 * writing unless VIGIL_OPEN_TRUST_OWNER). */
int  vigil_journal_create(const char *path, uint32_t capacity, const struct vigil_journal_table *table, unsigned mode,
                          gid_t group, vigil_journal **out);
int  vigil_journal_open_flags(const char *path, unsigned flags, vigil_journal **out);
int  vigil_journal_open(const char *path, vigil_journal **out);
int  vigil_journal_open_readonly(const char *path, vigil_journal **out);
void vigil_journal_close(vigil_journal *j);

/* The entry idx as one moment had it: 0, or VIGIL_EBUSY when it kept
 * moving, VIGIL_ERANGE for an idx past the capacity. */
int vigil_journal_read(const vigil_journal *j, uint32_t idx, struct vigil_journal_rec *out);

/* One swap of entry idx's {state, owner} from exactly {from, from_owner}
 * to {to, to_owner}: true when made. */
bool vigil_journal_move(vigil_journal *j, uint32_t idx, uint64_t from, uint64_t from_owner, uint64_t to,
                        uint64_t to_owner);

/* ---- the claim's steps (failover.c, under the slot's writer lock) ---------- */

/* Step 1, begin: a FREE entry made CLAIMING by `me` with the reclaim's
 * fields. 0 with *idx and *word (its state word), or VIGIL_EFULL. */
int  vigil_journal_begin(vigil_journal *j, uint64_t me, uint32_t slot, uint32_t pid, uint64_t gen,
                         uint64_t bits, uint32_t why, uint64_t epoch, uint32_t *idx, uint64_t *word);
/* The bits the claim's swap is about to expect. */
void vigil_journal_set_bits(vigil_journal *j, uint32_t idx, uint64_t bits);
/* Step 2: the CLAIMING entry for `slot` whose owner is `owner`, or -1. */
int64_t vigil_journal_claiming(const vigil_journal *j, uint32_t slot, uint64_t owner, struct vigil_journal_rec *out);

/* ---- THE RUN LOCK (guardians) ------------------------------------------------- */

/* 0 and *held, or VIGIL_EBUSY (held by another). The release forgets
 * the run group. */
int  vigil_journal_run_take(vigil_journal *j, uint64_t me, uint64_t *held);
void vigil_journal_run_release(vigil_journal *j, uint64_t held);
/* In CMD's child, before its exec (async-signal-safe): its process group
 * named in the header, for the sweep of a guardian that dies (step 5). */
void vigil_journal_run_group(vigil_journal *j);

/* The PENDING entry with the lowest ticket: 0 and *out, or VIGIL_EVACANT
 * when none is pending. */
int vigil_journal_next_pending(const vigil_journal *j, struct vigil_journal_rec *out);

/* The sweep (steps 3, 5 and 6) for a watchdog whose lock word is `me`:
 * a dead guardian's run lock taken over and its entries finished UNKNOWN;
 * dead claimers' entries on unlocked slots voided or finished UNSURE; dead
 * watchdogs' DONE entries made `me`'s to log. hb may be NULL (step 3 is
 * then skipped). Returns how many entries `me` now has DONE to log. */
int vigil_journal_sweep(vigil_journal *j, const vigil_hb *hb, uint64_t me);

/* Counts by state (entries that kept moving are not counted). */
void vigil_journal_counts(const vigil_journal *j, uint32_t counts[5]);

/* Test hook, called at the points below when set (tests only). */
enum {
    JP_BEGUN = 1,  /* the entry is CLAIMING, its fields written; nothing vacated */
    JP_SWAPPED,    /* the slot's bits taken; the entry not yet PENDING */
    JP_COMMITTED,  /* the entry is PENDING; the slot still locked */
    JP_RUN_TAKEN,  /* the run lock is held; the entry not yet RUNNING */
    JP_STARTED,    /* the entry is RUNNING; CMD not yet forked */
    JP_FINISHED,   /* the entry is DONE; the run lock still held */
};
extern void (*vigil_journal_hook)(int point);
/* Set by the tool (reclaim_exec.c): whether process group pgid has a live
 * member that is the CMD of the entry with this ticket; unset, the sweep
 * never signals a group (step 5). */
extern bool (*vigil_journal_group_ours)(uint32_t pgid, uint64_t ticket);
static inline void journal_hook(int point)
{
    void (*h)(int) = vigil_journal_hook;
    if (h)
        h(point);
}

#endif
