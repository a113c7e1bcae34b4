/* SPDX-License-Identifier: MIT */
/*
 * Description: the whole system under random kills and stalls. Eight
 * workers take work units from a shared ledger, mark them in flight, write
 * each unit's result under a lease on the embedded store (every write
 * carrying the lease's fencing token), and meet at the epoch barrier every
 * phase. Two watchdogs race each other ticking, reclaiming (one waits on
 * pidfds, the other scans by epochs) and electing a leader. A killer sends
 * SIGKILL, or SIGSTOP and later SIGCONT, to random workers and watchdogs at
 * random moments, inside whatever call
 * they are in (register, unregister, arrival, withdrawal, renewal,
 * election), and respawns the killed. Names recur on purpose (issue 17):
 * as root the whole run is pid 1 of a pid namespace of its own, a killed
 * worker comes back with the very pid it had (clone3 with set_tid), and
 * now and then one is killed the moment it has registered and comes back
 * in the same clock tick, so a slot's next registration has the pid and
 * the start time of the last; a stopped worker resumes after failover
 * handed its slot on, a stale actor that must be told. At the end every
 * unit handed out must be done, and the run prints its figures:
 *
 *   kills, stalls        signals sent and survived
 *   recycled pids        workers respawned with their dead predecessor's
 *                        pid, and of those in its start tick
 *   stale told           calls of a worker whose slot was handed on that
 *                        told it so (vigil_hb_owned 0, VIGIL_ELOST)
 *   rounds               barrier rounds released (one VIGIL_SERIAL each)
 *   units done           units finished; lost must be 0
 *   done twice           a unit whose result was written twice with no
 *                        reclaim of it in between: 0
 *   stale accepted       a result the fenced store accepted from a holder
 *                        whose key another process had already acquired
 *                        (a stale token the store had not yet seen beaten,
 *                        the one case fencing cannot catch alone): 0
 *   two holders          a holder that still believed its lease held
 *                        (vigil_keepalive_lost false) after another process
 *                        had acquired the key: 0
 *   two leaders          two elections naming different leaders for one
 *                        term, or two changes producing one term: 0
 *   owned twice          register handing out a slot whose last owner had
 *                        neither unregistered nor been reclaimed: 0
 *   live reclaimed       a slot reclaimed as "exited" (vigil_failover_wait_why)
 *                        whose owner was never killed and had not exited: 0
 *   two serials          two VIGIL_SERIALs for one round: 0
 *   hangs                a process not stopped by the killer that made no
 *                        progress for HANG_MS: 0 (every wait is bounded)
 *
 * Units a worker claimed but can no longer finish are given back: by the
 * watchdog that reclaims its slot (the unit behind each in-flight bit,
 * and every claim of that incarnation), and by the supervisor for claims
 * of incarnations that are gone (a watchdog killed between its scan and
 * the give-back, a worker that marked after its slot was reclaimed:
 * vigil_hb_mark_in_flight's documented limit). A real application keeps
 * such a journal itself; the figure "orphans" counts what only it saved.
 *
 * CHAOS_SECONDS (default 60) sets the length of the chaos; a drain with no
 * more kills follows, bounded. Nothing is timed: the figures are counts.
 */
#include "testutil.h"
#include "nstest.h"

#include <fcntl.h>
#include <sys/stat.h>

enum {
    WORKERS = 8,
    DOGS = 2,
    PROCS = WORKERS + DOGS,
    CAP = 16,           /* heartbeat slots: workers come back before failover frees theirs */
    SHARDS = 4,         /* lease keys; a worker writes under shard idx % SHARDS */
    UNITS = 1 << 17,    /* the ledger */
    PER_PHASE = 8,      /* units a worker takes per phase */
    GRACE = 40,         /* epochs: about 100 ms at the watchdogs' pace */
    TTL_MS = 60,        /* lease TTL: a stall past it loses the lease */
    LOG = 256,          /* acquisitions remembered per shard */
    TERMS = 1 << 14,    /* elections remembered, by term */
    HANG_MS = 20000,
    DRAIN_MS = 60000,
};

#define CLAIMED (UINT64_C(1) << 63)
#define DONE    UINT64_C(1)
#define TODO    UINT64_C(0)

struct unit {
    _Atomic uint64_t state;  /* TODO, DONE, or CLAIMED | incarnation */
    _Atomic uint32_t writes; /* results accepted for it */
    _Atomic uint32_t resets; /* times a reclaim gave it back */
};

struct acquisition {
    _Atomic uint64_t token; /* 0: empty */
    _Atomic uint64_t done_ns;
};

struct election {
    _Atomic uint64_t term_pid; /* (term << 32) | leader pid, 0 empty */
    _Atomic uint32_t changes;  /* elections that returned 1 with this term */
};

struct proc {
    _Atomic int      pid;
    _Atomic uint32_t incarnation;
    _Atomic uint64_t progress;
    _Atomic int      stopped; /* by the killer: SIGSTOP sent, SIGCONT not yet */
    _Atomic int      infant;  /* this incarnation kills itself once registered */
    _Atomic uint64_t born_start; /* start time of the incarnation before, when recycled */
};

#define INCS (1 << 16) /* incarnations remembered, by number mod INCS */

struct slot_rec {
    _Atomic uint64_t owner;       /* (incarnation << 32) | pid of its registrant, 0 none */
    _Atomic uint32_t unit_of[64]; /* unit behind each in-flight bit */
};

struct world {
    _Atomic int      phase;       /* 0 chaos, 1 drain, 2 stop */
    _Atomic uint32_t next_incarnation;
    _Atomic uint32_t hwm;         /* units handed out so far: [0, hwm) */
    _Atomic uint32_t dog_deaths;  /* watchdogs killed: reclaims may be unlogged */
    struct proc      procs[PROCS];
    struct slot_rec  slots[CAP];
    _Atomic uint64_t shard_max[SHARDS]; /* the fenced store: highest token accepted */
    struct acquisition acq[SHARDS][LOG];
    _Atomic uint32_t acq_next[SHARDS];
    struct election  terms[TERMS];
    _Atomic uint64_t serial[1 << 16];   /* epoch + 1 of the last VIGIL_SERIAL, by epoch mod 2^16 */
    _Atomic uint8_t  killed[INCS];      /* an incarnation the killer (or it itself) SIGKILLed */
    _Atomic int      recycle;           /* respawns reuse the dead one's pid (root, own namespace) */
    /* figures */
    _Atomic uint64_t kills, stalls, rounds, done, reclaims, units_reset, lost_slot, timeouts,
        stale_rejected, lease_lost, acquired, elections, changes, registers, unregisters, orphans,
        recycled, same_tick, infants, stale_told, exited_reclaims;
    /* violations */
    _Atomic uint64_t done_twice, stale_accepted, two_holders, two_leaders, owned_twice, two_serial, live_reclaimed;
    struct unit      units[UNITS];
};

static struct world *W;
static const char *hb_path, *b_path, *ls_path;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_us(unsigned us)
{
    struct timespec ts = { 0, (long)us * 1000L };
    nanosleep(&ts, NULL);
}

/* ---- the fenced store and the lease log ----------------------------------- */

/* Accepts a result under `token` iff no higher token was accepted for the
 * shard: the store a fencing token protects. */
static bool fenced_write(int shard, uint64_t token)
{
    uint64_t m = atomic_load(&W->shard_max[shard]);
    while (token > m && !atomic_compare_exchange_weak(&W->shard_max[shard], &m, token))
        ;
    if (token < m) {
        atomic_fetch_add(&W->stale_rejected, 1);
        return false;
    }
    return true;
}

static void log_acquisition(int shard, uint64_t token)
{
    uint32_t i = atomic_fetch_add(&W->acq_next[shard], 1) % LOG;
    atomic_store(&W->acq[shard][i].token, 0);
    atomic_store(&W->acq[shard][i].done_ns, now_ns());
    atomic_store(&W->acq[shard][i].token, token);
}

/* A holder of `token` that found its lease not lost at `checked_ns` (a
 * clock read before it asked): had anyone acquired the key with a higher
 * token before that moment, two processes held it at once. */
static bool check_sole_holder(int shard, uint64_t token, uint64_t checked_ns)
{
    for (int i = 0; i < LOG; i++) {
        uint64_t t = atomic_load(&W->acq[shard][i].token);
        uint64_t at = atomic_load(&W->acq[shard][i].done_ns);
        if (t > token && at < checked_ns && atomic_load(&W->acq[shard][i].token) == t) {
            atomic_fetch_add(&W->two_holders, 1);
            fprintf(stderr, "chaos: shard %d: token %llu still held at %llu, token %llu acquired at %llu\n",
                    shard, (unsigned long long)token, (unsigned long long)checked_ns,
                    (unsigned long long)t, (unsigned long long)at);
            return false;
        }
    }
    return true;
}

/* ---- the ledger ----------------------------------------------------------- */

/* A unit to work on: a given-back one below the high-water mark, else the
 * next new one; UNITS when there is none. */
static uint32_t find_unit(unsigned *seed, bool thorough)
{
    uint32_t hwm = atomic_load(&W->hwm);
    if (hwm) {
        uint32_t from = (uint32_t)rand_r(seed) % hwm;
        uint32_t looks = thorough ? hwm : (hwm < 64 ? hwm : 64);
        for (uint32_t k = 0; k < looks; k++) {
            uint32_t u = (from + k) % hwm;
            if (atomic_load(&W->units[u].state) == TODO)
                return u;
        }
    }
    if (atomic_load(&W->phase) != 0)
        return UNITS; /* no new work once the chaos is over: only drain */
    uint32_t u = atomic_fetch_add(&W->hwm, 1);
    if (u >= UNITS) {
        atomic_store(&W->hwm, UNITS);
        return UNITS;
    }
    return u;
}

/* Gives back every unit claimed by `inc`: its owner was declared dead. */
static void give_back(uint32_t inc)
{
    uint32_t hwm = atomic_load(&W->hwm);
    uint64_t mine = CLAIMED | inc;
    for (uint32_t u = 0; u < hwm && u < UNITS; u++) {
        uint64_t s = mine;
        if (atomic_load_explicit(&W->units[u].state, memory_order_relaxed) == mine &&
            atomic_compare_exchange_strong(&W->units[u].state, &s, TODO)) {
            atomic_fetch_add(&W->units[u].resets, 1);
            atomic_fetch_add(&W->units_reset, 1);
        }
    }
}

/* ---- slot ownership ------------------------------------------------------- */

/* After register gave `slot`: its last registrant must have ended its
 * registration, and whoever ended it clears the slot's record (the
 * registrant itself before unregistering or once told its slot is gone,
 * or the watchdog that reclaimed it, once it has given its units back).
 * Wait a while (bounded: past the longest stall), beating so the wait
 * itself is no stall, for that; a watchdog killed in that window leaves
 * the record, and the check then gives the benefit of the doubt. A
 * registrant reclaimed meanwhile (stopped by the killer) writes nothing
 * and returns false: the slot is no longer its to record. */
static bool take_slot(vigil_hb *hb, uint32_t slot, uint32_t pid, uint32_t inc, uint32_t dog_deaths_at_start)
{
    uint64_t mine = (uint64_t)inc << 32 | pid;
    for (int ms = 0; ms < 2000; ms++) {
        vigil_hb_beat(hb, slot);
        if (vigil_hb_owned(hb, slot) != 1)
            return false;
        uint64_t none = 0;
        if (atomic_compare_exchange_strong(&W->slots[slot].owner, &none, mine))
            return true;
        if (atomic_load(&W->dog_deaths) != dog_deaths_at_start)
            break;
        nap_us(1000);
    }
    uint64_t prev = atomic_exchange(&W->slots[slot].owner, mine);
    /* Owned twice only if the slot is still ours after the exchange (a
     * registration handed on meanwhile is the stale case, told below) and
     * the record's writer was not killed: one stopped after its last
     * ownership check, reclaimed before its record, then killed, leaves a
     * record no one clears, of a registration long ended. */
    if (prev != 0 && atomic_load(&W->dog_deaths) == dog_deaths_at_start && vigil_hb_owned(hb, slot) == 1 &&
        !atomic_load(&W->killed[(prev >> 32) % INCS])) {
        atomic_fetch_add(&W->owned_twice, 1);
        fprintf(stderr, "chaos: slot %u handed to %u (incarnation %u) while %u (incarnation %u) still had it\n", slot,
                pid, inc, (uint32_t)prev, (uint32_t)(prev >> 32));
    }
    return true;
}

/* ---- a worker ------------------------------------------------------------- */

struct held {
    uint32_t unit, bit;
};

static void worker(int idx)
{
    struct proc *me = &W->procs[idx];
    uint32_t pid = (uint32_t)getpid();
    uint32_t inc = atomic_load(&me->incarnation);
    unsigned seed = pid * 2654435761u;
    vigil_hb *hb;
    vigil_barrier *b;
    vigil_leases *ls;
    if (vigil_hb_open(hb_path, 0, &hb) < 0 || vigil_barrier_open(b_path, hb, 0, &b) < 0 ||
        vigil_leases_open(ls_path, &ls) < 0)
        _exit(3);
    int shard = idx % SHARDS;
    char key[16];
    snprintf(key, sizeof(key), "shard-%d", shard);
    char owner[32];
    snprintf(owner, sizeof(owner), "w%d.%u", idx, inc);
    vigil_lease_port port = vigil_leases_port(ls);

    while (atomic_load(&W->phase) < 2) {
        uint32_t slot;
        uint32_t deaths = atomic_load(&W->dog_deaths);
        if (vigil_hb_register(hb, pid, &slot) != 0) {
            atomic_fetch_add(&me->progress, 1);
            nap_us(500);
            continue;
        }
        atomic_fetch_add(&W->registers, 1);
        if (!take_slot(hb, slot, pid, inc, deaths))
            goto lost_slot;
        if (atomic_load(&me->infant)) {
            /* Killed the moment it has registered: its next incarnation
             * comes back with this pid, most likely in this clock tick. */
            atomic_store(&W->killed[inc % INCS], 1);
            raise(SIGKILL);
        }
        if (vigil_barrier_bind(b, slot) != 0)
            goto lost_slot;
        int phases = 5 + rand_r(&seed) % 40;
        for (int ph = 0; ph < phases && atomic_load(&W->phase) < 2; ph++) {
            atomic_fetch_add(&me->progress, 1);
            vigil_hb_beat(hb, slot);
            /* Still our registration? A stopped worker whose slot was
             * handed on, perhaps to a process with a recycled pid, is
             * told here or by the calls below (VIGIL_ELOST). */
            if (vigil_hb_owned(hb, slot) != 1) {
                atomic_fetch_add(&W->stale_told, 1);
                goto lost_slot;
            }

            /* Take units: name the unit behind the bit, mark the bit, then
             * claim the unit, so a reclaim of the bit always finds it. */
            struct held h[PER_PHASE];
            int n = 0;
            bool drain = atomic_load(&W->phase) == 1;
            for (uint32_t bit = 0; bit < PER_PHASE; bit++) {
                uint32_t u = find_unit(&seed, drain);
                if (u >= UNITS)
                    break;
                atomic_store(&W->slots[slot].unit_of[bit], u);
                int mrc = vigil_hb_mark_in_flight(hb, slot, bit);
                if (mrc != 0) {
                    atomic_fetch_add(&W->stale_told, mrc == VIGIL_ELOST);
                    goto lost_slot;
                }
                uint64_t t = TODO;
                if (!atomic_compare_exchange_strong(&W->units[u].state, &t, CLAIMED | inc)) {
                    vigil_hb_clear_in_flight(hb, slot, bit);
                    continue;
                }
                h[n++] = (struct held){ u, bit };
            }

            if (n > 0) {
                vigil_lease l;
                if (vigil_leases_acquire(ls, key, owner, TTL_MS, &l) == 0) {
                    atomic_fetch_add(&W->acquired, 1);
                    log_acquisition(shard, l.token);
                    vigil_keepalive *ka;
                    if (vigil_keepalive_start(&port, &l, &ka) == 0) {
                        for (int i = 0; i < n; i++) {
                            uint64_t checked = now_ns();
                            if (vigil_keepalive_lost(ka)) {
                                atomic_fetch_add(&W->lease_lost, 1);
                                break;
                            }
                            bool sole = check_sole_holder(shard, l.token, checked);
                            uint64_t mine = CLAIMED | inc;
                            if (atomic_load(&W->units[h[i].unit].state) != mine)
                                continue; /* given back meanwhile: not ours to finish */
                            nap_us(200); /* the work itself: long enough for the killer to land in it */
                            if (!fenced_write(shard, l.token))
                                break;
                            if (!sole)
                                atomic_fetch_add(&W->stale_accepted, 1);
                            atomic_fetch_add(&W->units[h[i].unit].writes, 1);
                            if (atomic_compare_exchange_strong(&W->units[h[i].unit].state, &mine, DONE))
                                atomic_fetch_add(&W->done, 1);
                            vigil_hb_clear_in_flight(hb, slot, h[i].bit);
                            h[i].unit = UNITS;
                        }
                        vigil_keepalive_stop(ka);
                    }
                    vigil_leases_release(ls, &l);
                }
                /* What was not finished goes back for anyone to take. */
                for (int i = 0; i < n; i++) {
                    if (h[i].unit >= UNITS)
                        continue;
                    uint64_t mine = CLAIMED | inc;
                    atomic_compare_exchange_strong(&W->units[h[i].unit].state, &mine, TODO);
                    vigil_hb_clear_in_flight(hb, slot, h[i].bit);
                }
            }

            uint32_t e = vigil_barrier_epoch(b);
            int rc = vigil_barrier_wait_timeout(b, e, 50000000u);
            if (rc == VIGIL_SERIAL) {
                atomic_fetch_add(&W->rounds, 1);
                if (atomic_exchange(&W->serial[e & 0xffff], (uint64_t)e + 1) == (uint64_t)e + 1)
                    atomic_fetch_add(&W->two_serial, 1);
            } else if (rc == VIGIL_ETIMEDOUT) {
                atomic_fetch_add(&W->timeouts, 1);
            } else if (rc == VIGIL_ELOST || rc == VIGIL_EVACANT) {
                atomic_fetch_add(&W->stale_told, rc == VIGIL_ELOST);
                goto lost_slot;
            }
        }
        /* Leave cleanly: the record first, so a successor never finds it. */
        {
            uint64_t mine = (uint64_t)inc << 32 | pid;
            atomic_compare_exchange_strong(&W->slots[slot].owner, &mine, 0);
            if (vigil_hb_unregister(hb, slot) == 0)
                atomic_fetch_add(&W->unregisters, 1);
        }
        continue;
    lost_slot:
        /* Declared dead while alive (a stall past grace): the slot is not
         * ours, and neither are its bits; what we still claim goes back. */
        atomic_fetch_add(&W->lost_slot, 1);
        {
            /* Our record, if the watchdog that reclaimed the slot found
             * none yet to clear (we were stopped before writing it). */
            uint64_t mine = (uint64_t)inc << 32 | pid;
            atomic_compare_exchange_strong(&W->slots[slot].owner, &mine, 0);
        }
        give_back(inc);
        nap_us(200);
    }
    _exit(0);
}

/* ---- a watchdog ----------------------------------------------------------- */

static void record_election(const vigil_leader *l, int rc)
{
    struct election *e = &W->terms[l->term % TERMS];
    uint64_t want = l->term << 32 | l->pid;
    uint64_t cur = 0;
    if (!atomic_compare_exchange_strong(&e->term_pid, &cur, want) && cur != want) {
        if (cur >> 32 == l->term) {
            atomic_fetch_add(&W->two_leaders, 1);
            fprintf(stderr, "chaos: term %llu named %u and %u\n", (unsigned long long)l->term,
                    (uint32_t)cur, l->pid);
        } else {
            atomic_store(&e->term_pid, want); /* an old term's entry: replace */
        }
    }
    if (rc == 1 && atomic_fetch_add(&e->changes, 1) != 0 && atomic_load(&e->term_pid) == want) {
        atomic_fetch_add(&W->two_leaders, 1);
        fprintf(stderr, "chaos: two changes of leader produced term %llu\n", (unsigned long long)l->term);
    }
}

static void watchdog(int idx)
{
    struct proc *me = &W->procs[idx];
    vigil_hb *hb;
    if (vigil_hb_open(hb_path, 0, &hb) < 0)
        _exit(3);
    for (unsigned i = 0; atomic_load(&W->phase) < 2; i++) {
        atomic_fetch_add(&me->progress, 1);
        vigil_hb_tick(hb);
        vigil_reclaim r[CAP];
        uint32_t why[CAP];
        /* One watchdog waits on pidfds (a death wakes it at once), at most
         * one or two slots a wait so that verdicts stay pending across
         * waits while slots change hands; the other scans by epochs. The
         * two ways race for every slot. */
        int n = idx == WORKERS ? vigil_failover_wait_why(hb, GRACE, 5000000u, r, why, 1 + (i & 1))
                               : vigil_failover_scan(hb, GRACE, r, CAP);
        for (int k = 0; k < n; k++) {
            atomic_fetch_add(&W->reclaims, 1);
            /* The slot's record names the registration reclaimed: its
             * successor waits for us to clear it before it writes its own. */
            uint64_t owner = atomic_load(&W->slots[r[k].slot].owner);
            uint32_t inc = (uint32_t)(owner >> 32);
            if ((uint32_t)owner == r[k].pid && r[k].pid != 0) {
                if (idx == WORKERS && why[k] == VIGIL_RECLAIM_EXITED) {
                    atomic_fetch_add(&W->exited_reclaims, 1);
                    /* "Exited" must mean exited: every worker death in the
                     * chaos is a SIGKILL the killer marked first. */
                    if (!atomic_load(&W->killed[inc % INCS]) && atomic_load(&W->phase) < 2) {
                        atomic_fetch_add(&W->live_reclaimed, 1);
                        fprintf(stderr, "chaos: slot %u (pid %u, incarnation %u) reclaimed as exited, never killed\n",
                                r[k].slot, r[k].pid, inc);
                    }
                }
                /* The bits say which units; the claims are keyed by the
                 * owner's incarnation, which only its slot record knows. */
                for (unsigned bit = 0; bit < 64; bit++) {
                    if (!(r[k].in_flight & (UINT64_C(1) << bit)))
                        continue;
                    uint32_t u = atomic_load(&W->slots[r[k].slot].unit_of[bit]);
                    uint64_t s = CLAIMED | inc;
                    if (u < UNITS && atomic_compare_exchange_strong(&W->units[u].state, &s, TODO)) {
                        atomic_fetch_add(&W->units[u].resets, 1);
                        atomic_fetch_add(&W->units_reset, 1);
                    }
                }
                give_back(inc); /* claims whose bit a dying worker never set */
                atomic_compare_exchange_strong(&W->slots[r[k].slot].owner, &owner, 0);
            }
        }
        if ((i & 7) == 0) {
            vigil_leader l;
            int rc = vigil_leader_elect(hb, GRACE, &l);
            if (rc >= 0) {
                atomic_fetch_add(&W->elections, 1);
                if (rc == 1)
                    atomic_fetch_add(&W->changes, 1);
                record_election(&l, rc);
            }
        }
        if (idx != WORKERS)
            nap_us(5000);
    }
    _exit(0);
}

/* ---- the killer and the supervisor ---------------------------------------- */

/* Starts process idx; with `reuse` (a pid just reaped) and recycling on,
 * with that very pid, and `infant`: a worker that kills itself the moment
 * it has registered. */
static pid_t spawn(int idx, pid_t reuse, bool infant)
{
    struct proc *p = &W->procs[idx];
    atomic_store(&p->incarnation, atomic_fetch_add(&W->next_incarnation, 1) + 1);
    atomic_store(&p->stopped, 0);
    atomic_store(&p->infant, infant);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = reuse > 0 && atomic_load(&W->recycle) ? vt_fork_with_pid(reuse) : -1;
    if (pid < 0)
        pid = fork();
    if (pid == 0) {
        vt_die_with_parent();
        vt_own_pgrp(); /* the killer stops it: never in a group that can be orphaned */
        if (idx < WORKERS)
            worker(idx);
        watchdog(idx);
    }
    if (pid == reuse) {
        atomic_fetch_add(&W->recycled, 1);
        uint64_t st = vt_start_time(pid);
        atomic_fetch_add(&W->same_tick, st != 0 && st == atomic_load(&p->born_start));
    }
    atomic_store(&p->born_start, vt_start_time(pid));
    atomic_store(&p->pid, pid);
    return pid;
}

/* Reaps whoever died (the killer's victims), and respawns them while the
 * chaos or the drain goes on. */
static void reap(bool respawn)
{
    int status;
    pid_t dead;
    while ((dead = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < PROCS; i++) {
            if (atomic_load(&W->procs[i].pid) != dead)
                continue;
            if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                atomic_fetch_add(&W->kills, 1);
                if (i >= WORKERS)
                    atomic_fetch_add(&W->dog_deaths, 1);
            } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "chaos: process %d (%s %d) ended with status %#x\n", (int)dead,
                        i < WORKERS ? "worker" : "watchdog", i, status);
            }
            atomic_store(&W->procs[i].pid, 0);
            /* A worker killed comes back with its pid (when recycling),
             * and one in four of those is killed at once again, so the
             * next one has the same pid and most likely the same start
             * tick as a registration just ended. */
            bool infant = false;
            if (i < WORKERS && WIFSIGNALED(status) && !atomic_load(&W->procs[i].infant) && rand() % 4 == 0) {
                infant = true;
                atomic_fetch_add(&W->infants, 1);
            }
            if (!respawn)
                continue;
            pid_t p = spawn(i, dead, infant);
            if (!infant || p <= 0)
                continue;
            /* The infant kills itself once registered, a few ms from its
             * birth: reaped at once, its successor takes the pid in what
             * is most likely the same clock tick. Bounded: an infant that
             * does not die is left to the killer like any worker. */
            int st;
            for (int ms = 0; ms < 5000; ms++) {
                pid_t r = waitpid(p, &st, WNOHANG);
                if (r == p) {
                    atomic_fetch_add(&W->kills, 1);
                    atomic_store(&W->procs[i].pid, 0);
                    spawn(i, p, false);
                    break;
                }
                if (r < 0)
                    break;
                nap_us(200);
            }
        }
    }
}

/* Claims of incarnations that no process carries any more and that no
 * slot names either (the watchdog that reclaims a named slot gives its
 * claims back; these are the ones nobody will). */
static void sweep_orphans(void)
{
    uint32_t live[PROCS + CAP];
    for (int i = 0; i < PROCS; i++)
        live[i] = atomic_load(&W->procs[i].incarnation);
    for (int i = 0; i < CAP; i++)
        live[PROCS + i] = (uint32_t)(atomic_load(&W->slots[i].owner) >> 32);
    uint32_t hwm = atomic_load(&W->hwm);
    for (uint32_t u = 0; u < hwm && u < UNITS; u++) {
        uint64_t s = atomic_load_explicit(&W->units[u].state, memory_order_relaxed);
        if (!(s & CLAIMED))
            continue;
        bool alive = false;
        for (int i = 0; i < PROCS + CAP && !alive; i++)
            alive = (uint32_t)s == live[i];
        if (!alive && atomic_compare_exchange_strong(&W->units[u].state, &s, TODO)) {
            atomic_fetch_add(&W->units[u].resets, 1);
            atomic_fetch_add(&W->orphans, 1);
        }
    }
}

struct stall {
    pid_t    pid;
    int      idx;
    uint64_t until_ns;
};

static int run_chaos(unsigned seconds)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("chaos: %u s, seed %u, %d workers, %d watchdogs\n", seconds, seed, WORKERS, DOGS);
    srand(seed);
    for (int i = 0; i < PROCS; i++)
        spawn(i, 0, false);
    struct stall stalls[PROCS];
    int nstalls = 0;
    uint64_t last_progress[PROCS] = { 0 }, last_change[PROCS];
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)seconds * 1000000000u;
    for (int i = 0; i < PROCS; i++)
        last_change[i] = t0;
    int hangs = 0;

    for (int drain = 0; drain < 2 && !hangs; drain++) {
        uint64_t stop_at = drain ? now_ns() + (uint64_t)DRAIN_MS * 1000000u : end;
        if (drain) {
            /* No more kills: let every stalled process go, and finish the work. */
            for (int k = 0; k < nstalls; k++) {
                kill(stalls[k].pid, SIGCONT);
                atomic_store(&W->procs[stalls[k].idx].stopped, 0);
            }
            nstalls = 0;
            atomic_store(&W->phase, 1);
        }
        while (now_ns() < stop_at) {
            nap_us(3000 + (unsigned)rand_r(&seed) % 30000);
            reap(true);
            sweep_orphans();
            uint64_t now = now_ns();
            for (int k = 0; k < nstalls; k++) {
                if (now >= stalls[k].until_ns) {
                    kill(stalls[k].pid, SIGCONT);
                    atomic_store(&W->procs[stalls[k].idx].stopped, 0);
                    stalls[k--] = stalls[--nstalls];
                }
            }
            if (!drain) {
                int v = rand_r(&seed) % PROCS;
                pid_t pid = atomic_load(&W->procs[v].pid);
                if (pid > 0 && !atomic_load(&W->procs[v].stopped)) {
                    if (rand_r(&seed) % 5 < 3) {
                        atomic_store(&W->killed[atomic_load(&W->procs[v].incarnation) % INCS], 1);
                        kill(pid, SIGKILL);
                    } else {
                        /* Stopped for 1 to 300 ms: past the grace window and
                         * the lease's TTL, or not. */
                        atomic_store(&W->procs[v].stopped, 1);
                        kill(pid, SIGSTOP);
                        stalls[nstalls++] = (struct stall){ pid, v,
                                                            now + (1 + (uint64_t)(rand_r(&seed) % 300)) * 1000000u };
                        atomic_fetch_add(&W->stalls, 1);
                    }
                }
            } else {
                uint32_t hwm = atomic_load(&W->hwm), left = 0;
                for (uint32_t u = 0; u < hwm && u < UNITS; u++)
                    left += atomic_load(&W->units[u].state) != DONE;
                if (left == 0)
                    break;
            }
            /* Hangs: a process the killer is not holding that stopped moving. */
            for (int i = 0; i < PROCS; i++) {
                uint64_t p = atomic_load(&W->procs[i].progress);
                if (p != last_progress[i] || atomic_load(&W->procs[i].stopped) || !atomic_load(&W->procs[i].pid)) {
                    last_progress[i] = p;
                    last_change[i] = now;
                } else if (now - last_change[i] > (uint64_t)HANG_MS * 1000000u) {
                    fprintf(stderr, "chaos: %s %d (pid %d) made no progress for %d ms\n",
                            i < WORKERS ? "worker" : "watchdog", i, atomic_load(&W->procs[i].pid), HANG_MS);
                    hangs++;
                    last_change[i] = now;
                }
            }
        }
    }

    /* Stop everyone, bounded. */
    atomic_store(&W->phase, 2);
    for (int i = 0; i < PROCS; i++) {
        pid_t pid = atomic_load(&W->procs[i].pid);
        if (pid > 0) {
            kill(pid, SIGCONT);
            int st = vt_wait(pid, 10000);
            if (st != 0) {
                fprintf(stderr, "chaos: %s %d did not stop cleanly (%d)\n", i < WORKERS ? "worker" : "watchdog", i, st);
                hangs += st < 0;
            }
        }
    }

    uint32_t hwm = atomic_load(&W->hwm);
    uint64_t lost = 0, twice = 0;
    for (uint32_t u = 0; u < hwm && u < UNITS; u++) {
        lost += atomic_load(&W->units[u].state) != DONE;
        twice += atomic_load(&W->units[u].writes) > atomic_load(&W->units[u].resets) + 1;
    }
    atomic_store(&W->done_twice, twice);
    printf("chaos: kills %llu, stalls %llu, rounds released %llu, barrier timeouts %llu\n",
           (unsigned long long)W->kills, (unsigned long long)W->stalls, (unsigned long long)W->rounds,
           (unsigned long long)W->timeouts);
    printf("chaos: recycled pids %llu (in the same start tick %llu, after %llu killed at registration), "
           "stale told %llu, reclaimed as exited %llu\n",
           (unsigned long long)W->recycled, (unsigned long long)W->same_tick, (unsigned long long)W->infants,
           (unsigned long long)W->stale_told, (unsigned long long)W->exited_reclaims);
    printf("chaos: units handed out %u, done %llu, lost %llu, given back by reclaims %llu, orphans %llu, "
           "slots reclaimed %llu, workers that found their slot gone %llu\n",
           hwm, (unsigned long long)W->done, (unsigned long long)lost, (unsigned long long)W->units_reset,
           (unsigned long long)W->orphans, (unsigned long long)W->reclaims, (unsigned long long)W->lost_slot);
    printf("chaos: leases acquired %llu, lost under a holder %llu, stale writes rejected %llu; "
           "elections %llu, leader changes %llu; registers %llu, unregisters %llu\n",
           (unsigned long long)W->acquired, (unsigned long long)W->lease_lost,
           (unsigned long long)W->stale_rejected, (unsigned long long)W->elections,
           (unsigned long long)W->changes, (unsigned long long)W->registers, (unsigned long long)W->unregisters);
    printf("chaos: violations: lost %llu, done twice %llu, stale accepted %llu, two holders %llu, two leaders %llu, "
           "owned twice %llu, live reclaimed %llu, two serials %llu, hangs %d\n",
           (unsigned long long)lost, (unsigned long long)twice, (unsigned long long)W->stale_accepted,
           (unsigned long long)W->two_holders, (unsigned long long)W->two_leaders,
           (unsigned long long)W->owned_twice, (unsigned long long)W->live_reclaimed,
           (unsigned long long)W->two_serial, hangs);
    EXPECT(lost == 0, "%llu units handed out were never done", (unsigned long long)lost);
    EXPECT(twice == 0, "%llu units done twice without a reclaim in between", (unsigned long long)twice);
    EXPECT(W->stale_accepted == 0, "%llu results accepted under a stale token", (unsigned long long)W->stale_accepted);
    EXPECT(W->two_holders == 0, "%llu times two processes held one lease", (unsigned long long)W->two_holders);
    EXPECT(W->two_leaders == 0, "%llu terms with two leaders", (unsigned long long)W->two_leaders);
    EXPECT(W->owned_twice == 0, "%llu slots owned twice", (unsigned long long)W->owned_twice);
    EXPECT(W->two_serial == 0, "%llu rounds with two VIGIL_SERIAL callers", (unsigned long long)W->two_serial);
    EXPECT(W->live_reclaimed == 0, "%llu live slots reclaimed as exited", (unsigned long long)W->live_reclaimed);
    EXPECT(hangs == 0, "%d processes hung", hangs);
    EXPECT(W->kills > 0 && W->rounds > 0 && W->done > 0, "no chaos happened: kills %llu rounds %llu done %llu",
           (unsigned long long)W->kills, (unsigned long long)W->rounds, (unsigned long long)W->done);
    return 0;
}

static unsigned chaos_seconds;

static int chaos_in(void *arg)
{
    (void)arg;
    return run_chaos(chaos_seconds);
}

static int test_chaos(void)
{
    const char *env = getenv("CHAOS_SECONDS");
    chaos_seconds = env && *env ? (unsigned)strtoul(env, NULL, 10) : 60;
    W = vt_shared(sizeof(*W));
    hb_path = vt_path("chaos.hb");
    b_path = vt_path("chaos.barrier");
    ls_path = vt_path("chaos.leases");
    vigil_hb *hb = vt_hb_fresh_at(hb_path, CAP);
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(b_path, hb, GRACE, &b), 0);
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_create(ls_path, SHARDS * 2, &ls), 0);
    /* As root: pid 1 of a pid namespace of its own (with its own /proc),
     * where a dead worker's pid can be given to its successor. */
    atomic_store(&W->recycle, 1);
    int rc = vt_in_pidns(chaos_in, NULL, true, (chaos_seconds + DRAIN_MS / 1000 + 120) * 1000u);
    if (rc == VT_SKIP) {
        printf("chaos: no pid namespace here (not root): pids are not recycled on purpose\n");
        atomic_store(&W->recycle, 0);
        rc = run_chaos(chaos_seconds);
    }
    vigil_leases_close(ls);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return rc;
}

VT_MAIN(VT_CASE(test_chaos))
