/* SPDX-License-Identifier: MIT */
/*
 * vigil groups across hosts, on etcd (libvigil-etcd): membership with a
 * leader and a term, exactly-once work units fenced by each member's lease,
 * and barrier rounds committed by one etcd transaction. A member's death is
 * seen by every host at once when its host runs `vigil agent` (the agent
 * calls are at the end), and at its lease's TTL otherwise.
 *
 * Names: a group is 1..100 bytes, a member 1..63, a unit 1..127, none with
 * a NUL; the keys they make are told in vigil_group(7)-style detail in
 * vigil_group_join(3).
 */
#ifndef VIGIL_GROUP_H
#define VIGIL_GROUP_H

#include <vigil/barrier.h> /* VIGIL_SERIAL */
#include <vigil/etcd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VIGIL_GROUP_MAX  100 /* bytes of a group's name */
#define VIGIL_MEMBER_MAX 63  /* bytes of a member's name */
#define VIGIL_UNIT_MAX   127 /* bytes of a unit's name */

typedef struct vigil_group_member vigil_group_member;

/* A live member as etcd holds it. */
enum { VIGIL_GROUP_FOREIGN = 1 }; /* flags: not a vigil member (an `etcdctl elect` campaigner) */
typedef struct vigil_group_member_info {
    char     name[64];  /* a foreign member's: its proposal, cut */
    char     host[64];
    uint32_t pid;       /* on host; 0 for a foreign member */
    uint32_t flags;
    uint64_t revision;  /* join revision: the registration, never recurring; the leader's term */
    int64_t  lease;     /* the member's etcd lease */
} vigil_group_member_info; /* fields may be added at the end */

struct vigil_group_options {
    const char *dir;  /* record the member's lease under dir for `vigil agent --dir`; NULL: $VIGIL_DIR; "": none */
    const char *host; /* the host named in the member's record; NULL: $VIGIL_HOST, else gethostname() */
};

/* Joins group as name, under a lease of ttl_ms (rounded up to whole
 * seconds, etcd's minimum applying) kept alive until leave or loss. 0,
 * VIGIL_EBUSY when a live member has that name, VIGIL_ERANGE, -errno. e
 * must outlive the member. */
int  vigil_group_join(vigil_etcd *e, const char *group, const char *name, uint64_t ttl_ms,
                      vigil_group_member **out);
int  vigil_group_join_opts(vigil_etcd *e, const char *group, const char *name, uint64_t ttl_ms,
                           const struct vigil_group_options *opts, vigil_group_member **out);
/* Leaves (revokes the lease: the member, its units and its arrivals go at
 * once) and frees m. 0, or VIGIL_ELOST if the membership had been lost;
 * NULL is fine. */
int  vigil_group_leave(vigil_group_member *m);
/* This member as etcd holds it. */
int  vigil_group_self(const vigil_group_member *m, vigil_group_member_info *out);
/* Readable (POLLIN) once the membership is lost (lease refused or not
 * renewed for a whole TTL); valid until leave. */
int  vigil_group_lost_fd(const vigil_group_member *m);
bool vigil_group_lost(const vigil_group_member *m);
/* 1 when m is the leader (the live member with the lowest join
 * revision; its term is m's join revision), 0 not, or an error. */
int  vigil_group_is_leader(vigil_group_member *m);

/* The live members, lowest join revision first (out[0] is the leader):
 * their number (all of them; min(count, max) written), or an error. */
int  vigil_group_members(vigil_etcd *e, const char *group, vigil_group_member_info *out, uint32_t max);
/* 0 and the leader, or VIGIL_ENOPEERS. */
int  vigil_group_leader(vigil_etcd *e, const char *group, vigil_group_member_info *out);
/* Waits (on a watch) until the group's leader is not the one of term
 * (its join revision; 0: no leader): 0 and the leader now in *out (at
 * once if it is another already), VIGIL_ENOPEERS no leader now,
 * VIGIL_ETIMEDOUT (UINT64_MAX: no deadline; vigil_etcd_errmsg names the
 * failure it last met, if any). Rides out etcd's outages until then. */
int  vigil_group_leader_wait(vigil_etcd *e, const char *group, uint64_t term, uint64_t timeout_ns,
                             vigil_group_member_info *out);

/* A watch of a group's membership: a file descriptor readable while
 * events are queued. The first events are a join for every member live at
 * the start (initial = 1); then one per change, in etcd's order. */
typedef struct vigil_group_watcher vigil_group_watcher;
enum { VIGIL_GROUP_JOIN = 1, VIGIL_GROUP_LEAVE = 2,
       VIGIL_GROUP_LEADER = 3 }; /* a change of leader: vigil_group_watch_flags, VIGIL_GROUP_WATCH_LEADER */
typedef struct vigil_group_event {
    uint32_t type;      /* VIGIL_GROUP_JOIN, VIGIL_GROUP_LEAVE or VIGIL_GROUP_LEADER */
    uint32_t initial;   /* 1: a member live when the watch began (the leader then, for a leader event) */
    vigil_group_member_info member; /* a leader event's: the new leader (revision: its term), or all 0: none */
    uint64_t revision;  /* etcd revision of the change (of the start, for initial events) */
    int64_t  time_ns;   /* CLOCK_REALTIME when the watch saw it */
} vigil_group_event;    /* fields may be added at the end */
int  vigil_group_watch(vigil_etcd *e, const char *group, vigil_group_watcher **out);
/* As vigil_group_watch; with VIGIL_GROUP_WATCH_LEADER, also a
 * VIGIL_GROUP_LEADER event after the initial joins (the leader at the
 * start) and one per change of leader after, each term once. */
enum { VIGIL_GROUP_WATCH_LEADER = 1 };
int  vigil_group_watch_flags(vigil_etcd *e, const char *group, unsigned flags, vigil_group_watcher **out);
int  vigil_group_watch_fd(const vigil_group_watcher *w);
/* 1 and the next event, 0 none queued now, < 0 the watch failed for good. */
int  vigil_group_watch_next(vigil_group_watcher *w, vigil_group_event *out);
void vigil_group_watch_close(vigil_group_watcher *w);

/* ---- work units, exactly once ---------------------------------------- */

typedef struct vigil_group_unit {
    char     name[128];
    uint64_t token;     /* the claim's revision: rises with every claim of the unit; fences the owner */
} vigil_group_unit;

/* Adds a unit to the group's work set. 0, -EEXIST (in the set, or done). */
int  vigil_group_add(vigil_etcd *e, const char *group, const char *unit);
/* Claims one unowned unit by a transaction fenced by m's lease. 0,
 * VIGIL_EBUSY every unit left is owned, VIGIL_EVACANT none left,
 * VIGIL_ELOST m is no longer a member, or an error of the request (etcd
 * did not answer): a claim that landed unanswered is m's all the same,
 * and the next take of m answers with it. */
int  vigil_group_take(vigil_group_member *m, vigil_group_unit *out);
/* As take, waiting (on a watch) while every unit left is owned: 0,
 * VIGIL_EVACANT, VIGIL_ETIMEDOUT, VIGIL_ELOST (UINT64_MAX: no deadline). */
int  vigil_group_take_wait(vigil_group_member *m, uint64_t timeout_ns, vigil_group_unit *out);
/* Finishes a claimed unit: 0, or VIGIL_ELOST when m no longer owns it
 * (nothing changes then). A unit is done at most once, ever. Sent again
 * while etcd does not answer; an error then means not known: call again
 * (0 when m's done of this claim is the record, an earlier call's too). */
int  vigil_group_done(vigil_group_member *m, const vigil_group_unit *u);
/* Gives a claimed unit back unfinished: 0 (also when it was given back
 * already while m is a member), VIGIL_ELOST, or as done an error. */
int  vigil_group_giveback(vigil_group_member *m, const vigil_group_unit *u);

/* The group at one revision, for monitoring (`vigil export`). */
typedef struct vigil_group_stats {
    uint32_t members;
    uint32_t units_free;   /* in the work set, unowned */
    uint32_t units_owned;
    uint32_t units_done;
    uint64_t round;        /* the barrier round now gathering (rounds released so far) */
    uint64_t term;         /* the leader's join revision, 0 without members */
    uint64_t revision;     /* etcd's revision of the reading */
} vigil_group_stats;       /* fields may be added at the end */
int  vigil_group_stats_get(vigil_etcd *e, const char *group, vigil_group_stats *out);

/* ---- barrier rounds ---------------------------------------------------- */

/* Arrives at round and waits until every live member has arrived at it
 * (a member that dies or leaves is no longer waited for). VIGIL_SERIAL to
 * exactly one caller per released round, 0 to the others and at once for
 * a round already released (VIGIL_SERIAL if its release named m and no
 * call of m was told it: one that erred after its arrival landed);
 * VIGIL_ETIMEDOUT (the arrival withdrawn: it is
 * never counted), VIGIL_ELOST, VIGIL_ERANGE for a round more than 16 ahead
 * of the one gathering. An arrival counts for the rounds before it still
 * gathering too. Rounds start at 0. */
int  vigil_group_barrier_wait(vigil_group_member *m, uint64_t round, uint64_t timeout_ns);

/* Who a released round counted, and who it left out: the members counted
 * in the round before or that arrived at this one, and were not counted
 * (dead, left, or withdrawn and gone). */
typedef struct vigil_group_peer {
    char     name[64];
    uint64_t revision;  /* its join revision */
} vigil_group_peer;
typedef struct vigil_group_round {
    uint64_t round;
    uint64_t revision;           /* etcd revision of the release */
    uint64_t serial;             /* join revision of the member given VIGIL_SERIAL, 0 none */
    uint32_t counted, left_out;  /* how many (may exceed the arrays) */
    vigil_group_peer *counted_peers;   /* in: room for counted_cap (NULL, 0: none wanted) */
    uint32_t          counted_cap;
    vigil_group_peer *left_out_peers;  /* in: room for left_out_cap */
    uint32_t          left_out_cap;
} vigil_group_round;
int  vigil_group_barrier_wait_info(vigil_group_member *m, uint64_t round, uint64_t timeout_ns,
                                   vigil_group_round *info);
/* A released round's record (the last 64 are kept): 0, VIGIL_EVACANT
 * not released (or no longer kept). */
int  vigil_group_round_info(vigil_etcd *e, const char *group, uint64_t round, vigil_group_round *info);

/* ---- the host's agent -------------------------------------------------- */

/* Revokes the lease of every member recorded under dir (vigil_group_options)
 * the moment its process dies, watching each through a pidfd. Open scans
 * dir, revoking at once the leases of processes already gone (a restart of
 * the agent misses nothing). */
typedef struct vigil_agent vigil_agent;
typedef struct vigil_agent_event {
    int64_t  lease;
    uint32_t pid;
    int32_t  result;     /* of the revoke: 0, VIGIL_ELOST (already gone), or < 0 retried later;
                            -EREMOTE: not watched (another pid namespace), left to its TTL, said once */
    char     group[104];
    char     name[64];
} vigil_agent_event;
int  vigil_agent_open(vigil_etcd *e, const char *dir, vigil_agent **out);
/* vigil_agent_open with VIGIL_OPEN_* flags. A dir another user could have
 * written in (writable by everyone, or another user's outside a group of
 * the caller's) is VIGIL_EUNTRUSTED, and a record writable by everyone or
 * made by a user who may not write in dir is ignored, unless
 * VIGIL_OPEN_TRUST_OWNER (vigil_agent_open passes 0). */
int  vigil_agent_open_flags(vigil_etcd *e, const char *dir, unsigned flags, vigil_agent **out);
/* Readable when the agent has something to do. */
int  vigil_agent_fd(const vigil_agent *a);
/* Does what is due, waiting up to timeout_ms (-1: until something is),
 * and reports up to max revokes in ev: their number, or an error. */
int  vigil_agent_run(vigil_agent *a, int timeout_ms, vigil_agent_event *ev, uint32_t max);
/* Processes being watched now. */
uint32_t vigil_agent_watched(const vigil_agent *a);
void vigil_agent_close(vigil_agent *a);

#ifdef __cplusplus
}
#endif

#endif
