/*
 * The heartbeat slot's writer lock and its repair, as they are now
 * (src/heartbeat_internal.h, THE SLOT WRITER LOCK; src/heartbeat.c
 * vigil_slot_try_lock, vigil_slot_lock_version, vigil_slot_unlock,
 * claim_vacant, vigil_hb_unregister; include/vigil/heartbeat.h
 * vigil_hb_in_flight_inline; src/failover.c scan_table, claim, repair,
 * vacate_locked).
 *
 * One slot. Registrants register and mark their work unit (R1 unit 1, R2
 * unit 2), and R1 unregisters (UNREG); one failover scanner scans it
 * twice, or two scanners once each. Any
 * process is killed at any step (K) and from then on provably dead
 * (vigil_lock_holder_dead); any is paused for any length (every
 * interleaving), and a paused or preempted owner may look stale to a
 * scanner at any moment (its heartbeat lapsed), so a scanner may judge
 * any owner stale, at any read: the stale claim, which also covers the
 * probe's "dead".
 *
 * CHECK two_reg  |                                   | -DSAFETY | -m100000 | clean
 * CHECK two_scan | -DSCANNERS=2 -DUNREG              | -DSAFETY | -m100000 | clean
 * CHECK unreg    | -DUNREG                           | -DSAFETY | -m100000 | error
 * CHECK unregfix | -DUNREG -DUNREG_OWNCHECK          | -DSAFETY | -m100000 | clean
 *
 * two_reg: R1, R2 and one scanner. two_scan: R1, who then unregisters,
 * and two scanners racing. (R1, R2 and two scanners: 29 million states,
 * a minute; clean, but left out of `make model` for its time.)
 * unreg: a finding, the C before its fix. vigil_hb_unregister took a slot
 *   index and cleared whatever registration the slot held. R1, stalled past its grace just
 *   before it unregisters, is failed over and the slot registered again
 *   by R2; R1's unregister then vacates R2's registration and drops R2's
 *   unit. No caller can avoid it: the stall can come after any check it
 *   makes. unregfix: the C now (src/heartbeat.c, mine_of and
 *   vigil_hb_unregister): the check under the lock that the slot still
 *   holds the caller's registration (pid and start time), clean.
 *
 * Safety (asserts):
 *   - the version never goes backwards (every store to seq is checked);
 *   - a registrant's pid lands only on a vacant slot, and no two
 *     registrants own the slot at once (owned: register returned 0 and
 *     nothing vacated it since);
 *   - a writer's lock is taken over only from a dead writer;
 *   - a unit is handed to a scanner at most once, and when everyone is
 *     done every marked unit was handed over, is still in the slot, or
 *     was dropped by its owner's unregister or by a register over stray
 *     bits (the heartbeat table's documented race, failover.c STRAY BITS).
 */
#define NONE 0
#define R1 1
#define R2 2
#define S1 3
#define S2 4
#ifndef SCANNERS
#define SCANNERS 1
#endif
#ifndef REGS
#define REGS (3 - SCANNERS)
#endif
#define NPROC (REGS + SCANNERS)
#define unit(r) (r)             /* R1 marks bit 1, R2 bit 2 */

byte seq;               /* slot offset 4: SeqLock version */
byte writer;            /* slot offset 56: the writer's lock word, here its id */
byte owner;             /* slot offset 0: pid, 0 vacant */
byte bits;              /* slot offset 16: in_flight */
bool killed[5];

/* ghost */
bool owned[3];          /* the slot holds r's registration (from its pid store) */
byte marked;            /* units marked */
byte reported;          /* units handed to scanners */
byte dropped;           /* units dropped by unregister or a register over strays */
byte done;              /* processes finished or dead */

/* Killed here, or not. */
#define K(me) if :: skip :: killed[me] = true; goto out fi

/* Every store to seq: versions only grow (no wrap in this model). */
#define SET_SEQ(to) assert((to) > seq); seq = (to)

/* vigil_slot_try_lock: the filter (writer free, seq even), the CAS of
 * writer 0 -> me, the load of seq; odd: release writer, EBUSY; else the
 * store of v + 1 (a store: holding writer, no vigil writer moves seq).
 * ok false: EBUSY, nothing held. */
inline try_lock(me, v, ok) {
    atomic {
        if
        :: writer == NONE && seq % 2 == 0 -> writer = me; ok = true
        :: !(writer == NONE && seq % 2 == 0) -> ok = false
        fi
    };
    if
    :: ok ->
        K(me);
        /* the load and the store as one step: holding writer, no other
         * process moves seq (a repairer only once we are dead) */
        atomic {
            v = seq;
            if
            :: v % 2 == 0 -> SET_SEQ(v + 1)
            :: v % 2 == 1 -> ok = false     /* a scribble: writer released below */
            fi
        };
        if :: !ok -> K(me); writer = NONE :: else fi
    :: else
    fi
}

/* vigil_slot_unlock: CAS seq v + 1 -> v + 2 (failing: VIGIL_ELOST, touch
 * nothing more), the check that writer is still me, the store of 0. */
inline unlock(me, v, ok) {
    atomic {
        if
        :: seq == v + 1 -> SET_SEQ(v + 2); ok = true
        :: seq != v + 1 -> ok = false
        fi
    };
    if
    :: ok ->
        K(me);
        atomic { if :: writer == me -> writer = NONE :: writer != me -> ok = false fi }
    :: else
    fi
}

/* claim_vacant, then the marking of our unit */
inline register(me, v, ok) {
    if
    :: owner != NONE -> ok = false          /* OCCUPIED (the filter) */
    :: owner == NONE ->
        K(me);
        try_lock(me, v, ok);
        if
        :: ok ->
            K(me);
            if
            :: owner != NONE -> unlock(me, v, ok); ok = false  /* taken meanwhile */
            :: owner == NONE ->
                K(me);
                atomic { dropped = dropped | bits; bits = 0 }  /* in_flight = 0 */
                K(me);
                atomic { assert(owner == NONE); owner = me; owned[me] = true };
                K(me);
                unlock(me, v, ok)
            fi
        :: else
        fi
    fi
}

/* vigil_hb_in_flight_inline: the pid check, then fetch_or */
inline mark(me) {
    if
    :: owner != NONE ->
        K(me);
        atomic { bits = bits | unit(me); marked = marked | unit(me) }
    :: owner == NONE                        /* VIGIL_EVACANT */
    fi
}

/* vigil_hb_unregister: lock, pid 0 -> EVACANT, else clear pid and
 * in_flight, unlock */
inline unregister(me, v, ok) {
    try_lock(me, v, ok);
    if
    :: ok ->
        K(me);
        if
        :: owner == NONE -> unlock(me, v, ok)
#ifdef UNREG_OWNCHECK
        :: owner != NONE && owner != me -> unlock(me, v, ok)  /* not ours: EVACANT */
        :: owner == me ->
#else
        :: owner != NONE ->
#endif
            atomic {
                assert(owner == me);        /* only its own registration */
                owner = NONE; owned[me] = false;
                dropped = dropped | bits; bits = 0 };
            K(me);
            unlock(me, v, ok)
        fi
    :: else
    fi
}

proctype Registrant(byte me) {
    byte v, tries;
    bool ok;
    do
    :: tries < 2 ->
        tries++;
        register(me, v, ok);
        if :: ok -> break :: else fi
    :: else -> goto out
    od;
    K(me);
    mark(me);
    K(me);
#ifdef UNREG
    if :: me == R1 -> unregister(me, v, ok) :: else fi;
#endif
out:
    atomic { done++ }
}

/* vacate_locked: CAS pid p -> 0, exchange in_flight with 0, hand over */
inline vacate(p) {
    atomic {
        if
        :: owner == p ->
            owner = NONE;
            if :: p != NONE -> owned[p] = false :: else fi;
            assert((reported & bits) == 0); /* each unit handed over once */
            reported = reported | bits; bits = 0
        :: owner != p
        fi
    }
}

proctype Scanner(byte me) {
    byte v, w, p, lv, round;
    bool ok;
    do
    :: round < 3 - SCANNERS ->           /* two scans, or one each of two */
        round++;
        /* scan_table's filter: seq, pid, writer (one step), then the pid
         * again after the acquire fence */
        atomic { v = seq; w = writer };
        K(me);
        p = owner;
        if
        :: w != NONE ->
            /* repair: only a holder vigil_lock_holder_dead proves dead */
            if
            :: killed[w] ->
                K(me);
                atomic {
                    if
                    :: writer == w -> assert(killed[w]); writer = me; ok = true
                    :: writer != w -> ok = false
                    fi
                };
                if
                :: ok ->
                    K(me);
                    /* vigil_slot_lock_version: odd v -> v + 2, even v -> v + 1
                     * (load and CAS as one step: holding writer, we alone
                     * move seq) */
                    atomic {
                        lv = seq - seq % 2;  /* the unlock's v */
                        if :: seq % 2 == 1 -> SET_SEQ(seq + 2); lv = lv + 2 :: else -> SET_SEQ(seq + 1) fi
                    };
                    K(me);
                    /* judged under the lock: vacant, stale or dead: vacate */
                    p = owner;
                    if :: vacate(p) :: p != NONE -> skip /* live: keeps its slot */ fi;
                    K(me);
                    unlock(me, lv, ok)
                :: else
                fi
            :: else                         /* alive, or not yet judged dead */
            fi
        :: w == NONE && v % 2 == 1          /* odd with no writer: a scribble */
        :: w == NONE && v % 2 == 0 && p == NONE && bits == 0
        :: w == NONE && v % 2 == 0 && (p != NONE || bits != 0) ->
            /* claim: stray bits (p == 0), or an owner judged stale */
            if
            :: skip                         /* judged live */
            :: K(me);
                try_lock(me, lv, ok);
                if
                :: ok && lv != v -> unlock(me, lv, ok)   /* changed since judged */
                :: ok && lv == v ->
                    K(me);
                    /* take if still that pid, and (an owner) still stale */
                    if
                    :: p == NONE && owner == NONE && bits != 0 -> vacate(NONE)
                    :: p != NONE && owner == p -> vacate(p)
                    :: skip                 /* nothing to take, or a late beat */
                    fi;
                    K(me);
                    unlock(me, lv, ok)
                :: else
                fi
            fi
        fi;
        v = 0; w = 0; p = 0; lv = 0; ok = false
    :: else -> break
    od;
out:
    atomic { done++ }
}

init {
    atomic {
        run Registrant(R1);
        if :: REGS == 2 -> run Registrant(R2) :: else fi;
        run Scanner(S1);
        if :: SCANNERS == 2 -> run Scanner(S2) :: else fi
    }
}

active proctype Invariants() {
end:
    do
    :: atomic { owned[R1] && owned[R2] -> assert(false) }  /* two registrations */
    :: atomic { done == NPROC ->
        /* every marked unit handed over, still in the slot, or dropped */
        assert((marked & ~(reported | bits | dropped)) == 0);
        break }
    od
}
