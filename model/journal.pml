/*
 * The reclaim journal (src/journal_internal.h: THE JOURNAL; src/journal.c:
 * vigil_journal_begin, vigil_journal_sweep, THE RUN LOCK; src/failover.c:
 * claim, vacate_journaled, settle, repair; tools/reclaim_exec.c:
 * run_before, run_after, collect, start_next): a reclaim written down
 * before its slot is vacated, run from the journal by a guardian holding
 * the run lock, its outcome logged by its watchdog or, once that one is
 * dead, by whoever adopts it.
 *
 * One slot whose owner O has gone stale but may still mark a unit (a
 * stopped owner resumed: THE FENCE lets a mark land until the swap). Two
 * watchdogs W1, W2 at once, each scanning (the claim, or the repair of a
 * slot whose writer died), sweeping, starting a guardian (G1, G2) for the
 * lowest pending entry and logging what is theirs. Any process is killed
 * at any step (K) and from then on dead; any is paused for any length
 * (every interleaving): a stopped then resumed watchdog or guardian is
 * alive all along and is never taken over. With -DPLAIN, U is a scanner
 * without the journal (a C program's vigil_failover_scan on the same
 * table): it may repair a dead claimer's slot and take the bits itself.
 *
 * CHECK claim      |               | -DSAFETY -DMEMLIM=4096 | -m200000 | clean
 * CHECK plain      | -DPLAIN       | -DSAFETY -DMEMLIM=4096 | -m200000 | clean
 * CHECK run        | -DRUN         | -DSAFETY -DMEMLIM=4096 | -m200000 | clean
 * CHECK memory     | -DNOJOURNAL   | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK bits_old   | -DOLD_BITS    | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK settle_old | -DOLD_SETTLE  | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK lock_old   | -DRUN -DOLD_NOLOCK | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK any_old    | -DPLAIN -DOLD_SETTLE_ANY | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK nowait_old | -DRUN -DOLD_NOWAIT | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 * CHECK takeover_old | -DRUN -DOLD_NOTAKEOVER | -DSAFETY -DMEMLIM=4096 | -m200000 | error
 *
 * claim: the claim and its repair. W1 and W2 scan the slot at once (each
 *   the claim, or the repair of a slot whose writer died) and sweep; W2
 *   scans and sweeps again after. plain: the same with U. run: the run
 *   side, from two pending entries (two reclaims written down): W1 and
 *   W2 each sweep, start a guardian (G1, G2) for the lowest pending
 *   entry, wait for it, sweep and log.
 * memory: the design before issue 32 (the bits taken into the watchdog's
 *   memory, run from there): Spin finds the watchdog killed between the
 *   swap and its CMD, the reclaim lost (the issue's SIGABRT from
 *   WatchdogSec=). bits_old: the entry's bits written once at begin, not
 *   before each try of the swap: Spin finds O's mark between the two, and
 *   the entry handing over fewer bits than the slot gave. settle_old: a
 *   repair that does not settle the dead claimer's entry: Spin finds the
 *   entry said UNSURE on a table every scanner of which journals.
 *   lock_old: guardians that do not take the run lock: Spin finds two
 *   CMDs running at once. any_old: the repair settling any CLAIMING entry
 *   of the slot, not only the one of the holder it took over from (this
 *   very C, before the plain run was added): Spin finds a claimer killed
 *   after its begin, the plain scanner taking the slot over, vacating it
 *   for its caller and dying, and the repair that follows committing the
 *   claimer's entry from the vacant gen: the units handed over twice.
 *   nowait_old: guardians that never run their entry (end_wait: goto
 *   out): every step above holds (at most once), Spin finds the reclaims
 *   never run although nobody was killed. takeover_old: a sweep that
 *   never takes a dead guardian's run lock over: Spin finds a guardian
 *   killed holding it, and the lock held by the dead for ever, its
 *   entry RUNNING, though both watchdogs live on.
 *
 * Safety (asserts):
 *   - a reclaim's CMD starts at most once, and never two CMDs at once;
 *   - the bits an entry hands over are exactly the bits the swap took;
 *   - when everyone is done, a vacated registration is accounted for: its
 *     CMD ran, or its entry is in the journal for the next watchdog
 *     (claiming, pending, running or done), or it was said UNKNOWN (its
 *     guardian died after the start) or UNSURE, or (PLAIN) the plain
 *     scanner took the bits; with two journaled watchdogs and no plain
 *     scanner, never UNSURE (a third watchdog could see one: a repair
 *     killed between its take-over and its settling leaves the entry to
 *     the sweep, journal_internal.h step 3);
 *   - a lock (the slot's, the run lock) is taken over only from the dead;
 *   - progress, as end-state asserts (run): when nobody is killed, the
 *     first reclaim ran (each watchdog starts one guardian, both may pick
 *     the first: the C's next round runs the second), nothing is left
 *     running, done unsaid or claiming, and the run lock is free; when
 *     both watchdogs live (their guardians may die), the run lock is not
 *     held by the dead and no entry is RUNNING under a dead guardian:
 *     what it left was taken over and said UNKNOWN.
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - One slot, one registration. Entries are per reclaim, every step
 *     names one entry and the claim names one slot under its lock; a
 *     second registration of the slot is the same claim again with a
 *     gen one higher and a new ticket. Two entries are kept, so that a
 *     begun-then-voided entry and its successor coexist.
 *   - Tickets do not wrap (61 bits in the C); lock words are process
 *     ids, and the judge is an oracle (dead = killed): the real judge
 *     (vigil_lock_holder_dead) errs only towards "alive", a wait, and the
 *     lock pairs' seq makes a recurring word harmless (model/slot.pml,
 *     aba).
 *   - Each 16-byte swap is one atomic step; the loads that guess it are
 *     folded in (a stale guess only fails the swap). Memory order: Spin
 *     is sequentially consistent; the C's swaps are full barriers and
 *     the entry's fields are written before the swap that publishes them
 *     (gen last, release; read first, acquire).
 *   - A guardian's CMD dies with the guardian. So it does when systemd
 *     stops the unit (KillMode=control-group: the whole cgroup), and when
 *     the watchdog is alive (it ends the group of a guardian that died
 *     before saying the group was gone, reclaim_exec.c reap_guardian);
 *     a guardian killed with its watchdog leaves its group to the sweep
 *     that takes its run lock over: CMD's child names the group in the
 *     journal's header before its exec, and the sweep sends it SIGKILL
 *     and takes the lock only once it is gone (journal.c run_group_gone;
 *     test_tool_failover_kill's test_killed_group_ended), so the next CMD
 *     never starts beside it; but for members the sweeper may not signal
 *     (a CMD that made every uid another's), given up 5 s after the
 *     SIGKILL as the guardian gives them up. The entry is UNKNOWN either
 *     way, as here.
 *   - The slot's writer lock and its repair are model/slot.pml's; here
 *     only their outcome (who holds the slot, and the take-over from the
 *     dead) is kept. Beats, ticks and snapshots are left out: the
 *     scanner's nondeterministic "stale" covers every epoch.
 *   - Each watchdog starts at most one guardian and scans twice: more
 *     rounds repeat the same steps on an empty journal.
 */
#define NONE 0
#define W1 1
#define W2 2
#define G1 3
#define G2 4
#define U 5
#define O 6
#define NPROC 6
#define NDONE 6                 /* Owner, W1, W2, G1, G2, Plain (or its stand-in) */
#define NE 2
#define VAC 64

#define FREE 0
#define CLAIMING 1
#define PENDING 2
#define RUNNING 3
#define DONE 4

#define OUT_OK 1
#define OUT_UNKNOWN 2
#define OUT_UNSURE 3

/* the slot */
byte seq;               /* odd while locked */
byte writer;            /* the holder's word, or the last one's */
byte owner = O;         /* pid */
byte sgen = 1;          /* 1 occupied by the registration, VAC + 1 vacated */
byte sbits = 1;         /* unit 1 in flight */

/* the journal */
byte est[NE], etk[NE], eown[NE], egen[NE], ebits[NE], eout[NE];
byte last_ticket;
byte rword, rseq;       /* THE RUN LOCK */

bool killed[NPROC + 1];
#ifdef NOJOURNAL
bool mem[3];
#endif
byte gstart[3];         /* the entry a watchdog's guardian is to run, + 1 */
byte gticket[3];
bool gdone[3];

/* ghost */
byte swapped = 255;     /* the bits the one swap took */
bool vacated;
byte runs;              /* CMD starts for the registration */
byte running;           /* CMDs running now */
bool unknown_said, unsure_said;
bool plain;             /* the plain scanner took the bits */
byte done;

#define K(me) if :: skip :: killed[me] = true; goto out fi
/* A guardian's kill takes its CMD with it (see what is left out). */
#define KG(me) if :: skip :: atomic { killed[me] = true; if :: cmd -> running--; cmd = false :: else fi }; goto out fi
#define DEAD(w) ((w) != NONE && killed[w])

/* O: a stale owner that may still mark unit 2 (THE FENCE: only while the
 * slot holds its registration). */
proctype Owner() {
    atomic { if :: sgen == 1 -> sbits = sbits | 2 :: else fi };
    atomic { done++ }
}

/* ---- the slot's lock, as slot.pml has it ------------------------------- */

inline try_lock(me, ok) {
    atomic { if :: seq % 2 == 0 -> seq++; writer = me; ok = true :: else -> ok = false fi }
}
inline unlock(me) {
    atomic { assert(writer == me && seq % 2 == 1); seq++ }
}
/* The repair's take-over: the holding read, judged dead, swapped from. */
inline take_over(me, v, w, ok) {
    atomic { v = seq; w = writer };
    if
    :: v % 2 == 1 && DEAD(w) ->
        atomic { if :: seq == v && writer == w -> assert(killed[w]); seq = v + 2; writer = me; ok = true
                    :: else -> ok = false fi }
    :: else -> ok = false
    fi
}

/* ---- the claim, journaled ---------------------------------------------- */

/* vigil_journal_begin: a FREE entry made CLAIMING by me, fields, gen last. */
inline begin(me, i, ok) {
    ok = false;
    i = 0;
    do
    :: i < NE ->
        atomic { if :: est[i] == FREE -> last_ticket++; est[i] = CLAIMING; etk[i] = last_ticket; eown[i] = me; ok = true
                    :: else fi };
        if :: ok -> break :: else -> i++ fi
    :: else -> break
    od;
    if
    :: ok -> K(me); ebits[i] = sbits; K(me); egen[i] = 1
    :: else
    fi
}

/* vacate_locked with the entry: the pid by swap, then {bits, gen}
 * expecting exactly the entry's bits, written before each try. */
inline vacate_j(me, i, b, ok) {
    atomic { if :: owner == O || owner == NONE -> owner = NONE; ok = true :: else -> ok = false fi };
    do
    :: ok ->
        K(me);
        b = sbits;
#ifndef OLD_BITS
        ebits[i] = b;
#endif
        K(me);
        atomic {
            if
            :: sbits == b && sgen == 1 ->
                assert(!vacated); vacated = true; swapped = sbits; sbits = 0; sgen = VAC + 1; break
            :: sgen != 1 -> ok = false; break     /* not this registration's (a scribbler, in the C) */
            :: else                                /* the owner marked: try again */
            fi
        }
    :: else -> break
    od
}

inline commit(me, i) {
    atomic {
        if
        :: est[i] == CLAIMING && eown[i] == me ->
            assert(ebits[i] == swapped); est[i] = PENDING; eown[i] = NONE
        :: else
        fi
    }
}

inline void_entry(me, i) {
    egen[i] = 0;
    atomic { if :: est[i] == CLAIMING && eown[i] == me -> est[i] = FREE; eown[i] = NONE :: else fi }
}

/* claim + vacate_journaled, under the slot's lock. */
inline claim_body(me, i, b, ok) {
#ifdef NOJOURNAL
    /* before issue 32: the bits into memory, run from there */
    atomic { if :: owner == O -> owner = NONE; ok = true :: else -> ok = false fi };
    if
    :: ok -> K(me);
        atomic { assert(!vacated); vacated = true; swapped = sbits; sbits = 0; sgen = VAC + 1; mem[me] = true }
    :: else
    fi
#else
    begin(me, i, ok);
    if
    :: ok ->
        K(me);                                  /* JP_BEGUN */
        vacate_j(me, i, b, ok);
        if
        :: ok -> K(me); commit(me, i)           /* JP_SWAPPED, then JP_COMMITTED */
        :: else -> K(me); void_entry(me, i)
        fi
    :: else                                     /* full: nothing vacated */
    fi
#endif
}

/* settle: the CLAIMING entry of the dead holder w taken over from. */
inline settle(me, i, b, ok, found, w) {
    found = false;
    i = 0;
    do
#ifdef OLD_SETTLE_ANY
#define SETTLES(i) (est[i] == CLAIMING)
#else
#define SETTLES(i) (est[i] == CLAIMING && eown[i] == w)
#endif
    :: i < NE && SETTLES(i) ->
        /* adopt */
        atomic { if :: SETTLES(i) -> assert(DEAD(eown[i])); eown[i] = me; found = true :: else fi };
        break
    :: i < NE && !SETTLES(i) -> i++
    :: else -> break
    od;
    if
    :: found ->
        K(me);
        if
        :: egen[i] != 0 && sgen == VAC + egen[i] -> commit(me, i)
        :: egen[i] != 0 && sgen == egen[i] -> vacate_j(me, i, b, ok); if :: ok -> K(me); commit(me, i) :: else -> void_entry(me, i) fi
        :: else -> void_entry(me, i)
        fi
    :: else
    fi
}

/* A scan: the claim of a slot judged stale, or the repair of a wedged one. */
inline scan(me, i, b, ok, v, w, found) {
    if
    :: seq % 2 == 0 && sgen == 1 ->
        try_lock(me, ok);
        if
        :: ok ->
            K(me);
            if :: sgen == 1 -> claim_body(me, i, b, ok) :: else fi;
            K(me);
            unlock(me)
        :: else
        fi
    :: seq % 2 == 1 ->
        take_over(me, v, w, ok);
        if
        :: ok ->
            K(me);
            found = false;
#ifndef OLD_SETTLE
            settle(me, i, b, ok, found, w);
#endif
            if
            :: !found && sgen == 1 -> claim_body(me, i, b, ok)
            :: else
            fi;
            K(me);
            unlock(me)
        :: else
        fi
    :: else
    fi
}

/* ---- the sweep ---------------------------------------------------------- */

inline sweep(me, i, v, w, ok) {
    /* step 5: a dead guardian's run lock */
    atomic { v = rseq; w = rword };
    if
#ifdef OLD_NOTAKEOVER
    :: false ->
#else
    :: v % 2 == 1 && DEAD(w) ->
#endif
        atomic { if :: rseq == v && rword == w -> assert(killed[w]); rseq = v + 2; rword = me; ok = true
                    :: else -> ok = false fi };
        if
        :: ok ->
            i = 0;
            do
            :: i < NE ->
                if
                :: est[i] == RUNNING ->
                    atomic { if :: est[i] == RUNNING -> assert(DEAD(eown[i])); eown[i] = me; ok = true
                                :: else -> ok = false fi };
                    if :: ok -> K(me); eout[i] = OUT_UNKNOWN; atomic { est[i] = DONE } :: else fi
                :: else
                fi;
                i++
            :: else -> break
            od;
            K(me);
            atomic { assert(rword == me); rseq++ }
        :: else
        fi
    :: else
    fi;
    /* steps 3 and 6 */
    i = 0;
    do
    :: i < NE ->
        if
        :: est[i] == CLAIMING && DEAD(eown[i]) && (egen[i] == 0 || seq % 2 == 0) ->
            w = eown[i];
            atomic { if :: est[i] == CLAIMING && eown[i] == w -> eown[i] = me; ok = true :: else -> ok = false fi };
            if
            :: ok ->
                K(me);
                if
                :: egen[i] == 0 || sgen == egen[i] -> void_entry(me, i)
                :: else -> eout[i] = OUT_UNSURE; atomic { est[i] = DONE }
                fi
            :: else
            fi
        :: est[i] == DONE && eown[i] != me && DEAD(eown[i]) ->
            w = eown[i];
            atomic { if :: est[i] == DONE && eown[i] == w -> eown[i] = me :: else fi }
        :: else
        fi;
        i++
    :: else -> break
    od
}

/* collect: our DONE entries logged, then freed. */
inline collect(me, i) {
    i = 0;
    do
    :: i < NE ->
        if
        :: est[i] == DONE && eown[i] == me ->
            if :: eout[i] == OUT_UNKNOWN -> unknown_said = true
               :: eout[i] == OUT_UNSURE -> unsure_said = true
               :: else fi;
#ifdef RUN
            if :: eout[i] == OUT_UNKNOWN -> unknown_r[egen[i]] = true :: else fi;
#endif
            K(me);
            egen[i] = 0;
            atomic { if :: est[i] == DONE && eown[i] == me -> est[i] = FREE; eown[i] = NONE :: else fi }
        :: else
        fi;
        i++
    :: else -> break
    od
}

/* ---- the guardian (RUN) ------------------------------------------------------ */

#ifdef RUN
byte runs_r[3];         /* CMD starts per registration (entry gen) */
bool unknown_r[3];
#endif

proctype Guardian(byte me; byte parent) {
    byte i, t, r;
    bool ok, cmd;
end_wait:
#ifdef OLD_NOWAIT
    goto out;
#endif
    (gstart[parent] != 0);
    if :: gstart[parent] == 255 -> goto out :: else fi;   /* its watchdog started none */
    i = gstart[parent] - 1;
    t = gticket[parent];
#ifndef OLD_NOLOCK
    /* run_before: the run lock, then PENDING -> RUNNING */
    atomic { if :: rseq % 2 == 0 -> rseq++; rword = me; ok = true :: else -> ok = false fi };
    if :: !ok -> goto out :: else fi;
    KG(me);                                      /* JP_RUN_TAKEN */
#endif
    atomic { if :: est[i] == PENDING && etk[i] == t -> est[i] = RUNNING; eown[i] = me; r = egen[i]; ok = true
                :: else -> ok = false fi };
#ifndef OLD_NOLOCK
    if :: !ok -> atomic { rseq++ }; goto out :: else fi;
#else
    if :: !ok -> goto out :: else fi;
#endif
    KG(me);                                      /* JP_STARTED */
#ifdef RUN
    atomic { runs_r[r]++; assert(runs_r[r] <= 1); running++; assert(running <= 1); cmd = true };
#endif
    KG(me);
    atomic { running--; cmd = false };
    /* run_after: the outcome, DONE for the watchdog, the lock released */
    eout[i] = OUT_OK;
    atomic { assert(est[i] == RUNNING && eown[i] == me); est[i] = DONE; eown[i] = parent };
    KG(me);                                      /* JP_FINISHED */
#ifndef OLD_NOLOCK
    atomic { assert(rword == me); rseq++ };
#endif
out:
    atomic { if :: cmd -> running-- :: else fi; gdone[parent] = true; done++ }
}

/* ---- the watchdog ----------------------------------------------------------- */

#ifdef RUN
/* The run side: sweep, start a guardian for the lowest pending entry,
 * wait for it, sweep and log. */
proctype Watchdog(byte me; byte g) {
    byte i, b, v, w, low;
    bool ok;
    sweep(me, i, v, w, ok);
    K(me);
    /* start_next */
    low = 255;
    for (i : 0 .. NE - 1) {
        if :: est[i] == PENDING && (low == 255 || etk[i] < etk[low]) -> low = i :: else fi
    }
    if
    :: low != 255 -> gticket[me] = etk[low]; gstart[me] = low + 1;
end_g:  (gdone[me]);
        sweep(me, i, v, w, ok);
        K(me);
        collect(me, i)
    :: else
    fi;
out:
    atomic { if :: gstart[me] == 0 -> gstart[me] = 255 :: else fi; done++ }
}
#else
/* The claim side: scan (claim or repair) and sweep; W2 twice. */
proctype Watchdog(byte me; byte g) {
    byte i, b, v, w, round;
    bool ok, found;
    do
    :: round < (me == W1 -> 1 : 2) ->
        round++;
        scan(me, i, b, ok, v, w, found);
        K(me);
#ifdef NOJOURNAL
        if :: mem[me] -> atomic { runs++; mem[me] = false } :: else fi;   /* its CMD, from memory */
#endif
        sweep(me, i, v, w, ok);
        K(me)
    :: else -> break
    od;
out:
    atomic { done++ }
}
#endif

#ifdef PLAIN
/* A scanner without the journal: the claim and the repair as they were,
 * the bits to its own caller. */
proctype Plain() {
    byte v, w, me = U;
    bool ok;
    if
    :: seq % 2 == 0 && sgen == 1 -> try_lock(me, ok)
    :: seq % 2 == 1 -> take_over(me, v, w, ok)
    :: else -> ok = false
    fi;
    if
    :: ok ->
        K(me);
        atomic { if :: (owner == O || owner == NONE) && sgen == 1 -> owner = NONE; assert(!vacated); vacated = true;
                    swapped = sbits; sbits = 0; sgen = VAC + 1; plain = true
                    :: else fi };
        K(me);
        unlock(me)
    :: else
    fi;
out:
    atomic { done++ }
}
#endif

init {
    atomic {
#ifdef RUN
        /* two reclaims written down, their slots vacated */
        sgen = VAC + 1; sbits = 0; owner = NONE; vacated = true;
        est[0] = PENDING; etk[0] = 1; egen[0] = 1; ebits[0] = 1;
        est[1] = PENDING; etk[1] = 2; egen[1] = 2; ebits[1] = 1;
        last_ticket = 2;
        run Watchdog(W1, G1);
        run Watchdog(W2, G2);
        run Guardian(G1, W1);
        run Guardian(G2, W2);
        done = done + 2
#else
        run Owner();
        run Watchdog(W1, G1);
        run Watchdog(W2, G2);
        done = done + 2;
#ifdef PLAIN
        run Plain()
#else
        done++
#endif
#endif
    }
}

active proctype Invariants() {
    byte i;
    bool inj, unsure;
end:
    do
    :: atomic { done == NDONE ->
        inj = false;
        unsure = false;
        for (i : 0 .. NE - 1) {
            if :: est[i] != FREE && egen[i] == 1 -> inj = true :: else fi;
            if :: est[i] == DONE && eout[i] == OUT_UNSURE -> unsure = true :: else fi;
            /* never handed over twice: to the plain scanner's caller and
             * to a CMD from the journal */
            assert(!(plain && egen[i] == 1 && (est[i] == PENDING || est[i] == RUNNING)))
        }
#ifdef RUN
        /* each reclaim ran once, is still in the journal, or was said UNKNOWN */
        for (i : 1 .. 2) {
            inj = false;
            if :: (est[0] != FREE && egen[0] == i) || (est[1] != FREE && egen[1] == i) -> inj = true :: else fi;
            assert(runs_r[i] == 1 || inj || unknown_r[i])
        }
        /* progress: nobody killed, the first reclaim ran and nothing is
         * left half done; the watchdogs alive, nothing is left held by a
         * dead guardian */
        if
        :: !killed[W1] && !killed[W2] && !killed[G1] && !killed[G2] ->
            assert(runs_r[1] == 1 && rseq % 2 == 0);
            for (i : 0 .. NE - 1) { assert(est[i] == FREE || est[i] == PENDING) }
        :: else
        fi;
#ifndef OLD_NOLOCK
        /* (without the run lock nothing takes a dead guardian's entry
         * over: lock_old is about its other bug, two CMDs at once) */
        if
        :: !killed[W1] && !killed[W2] ->
            assert(!(rseq % 2 == 1 && DEAD(rword)));
            for (i : 0 .. NE - 1) { assert(!(est[i] == RUNNING && DEAD(eown[i]))) }
        :: else
        fi
#endif
#else
        /* a vacated registration is in the journal (or, before issue 32,
         * ran from memory), or the plain scanner took it */
        assert(!vacated || inj || plain || runs == 1);
#ifndef PLAIN
        assert(!unsure && !unsure_said);
#endif
#endif
        break }
    od
}
