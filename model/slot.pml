/*
 * The heartbeat slot's writer lock and its repair, as they are now
 * (src/heartbeat_internal.h, THE SLOT WRITER LOCK; src/heartbeat.c
 * vigil_slot_try_lock, vigil_slot_lock_version, vigil_slot_unlock,
 * claim_vacant; src/failover.c claim(), repair(), vacate_locked()).
 *
 * One slot; two registrants and two failover scanners, any of them killed
 * at any step (a killed process never comes back and is from then on
 * "provably dead": vigil_lock_holder_dead) and paused for any length (every
 * interleaving). A registrant that got its slot marks its work unit in it.
 * A scanner repairs a slot whose writer is dead, and claims the slot of an
 * owner that is dead (the probe-assisted claim), taking its bits.
 *
 * Safety:
 *   - the version never goes backwards (every store to seq is checked);
 *   - no two live registrants both own the slot;
 *   - a unit a dead owner marked is handed over at most once;
 *   - a live writer's lock is never taken over.
 *
 * CHECK safety | | -DSAFETY | -m100000 | clean
 */

#define NONE 0
#define R1 1
#define R2 2
#define S1 3
#define S2 4

byte seq = 0;          /* SeqLock version, offset 4 */
byte writer = NONE;    /* offset 56: the writer's lock word, here its id */
byte owner = NONE;     /* pid, offset 0 */
byte bits = 0;         /* in_flight: registrant R1 marks unit 1, R2 unit 2 */
bool dead[5];
bool owned[5];         /* register returned 0 and nothing vacated it since */
byte reported = 0;     /* units handed to scanners, each at most once */

/* Killed here, or not. */
#define K(me) if :: skip :: dead[me] = true; goto out fi

/* A store to seq, checked: versions only grow (no wrap in this model). */
inline set_seq(from, to, ok) {
    atomic {
        if
        :: seq == from -> assert(to > seq); seq = to; ok = true
        :: else -> ok = false
        fi
    }
}

/* vigil_slot_try_lock then vigil_slot_lock_version: writer 0 -> me, then
 * seq even v -> v + 1. ok false: EBUSY, nothing held. */
inline try_lock(me, v, ok) {
    atomic {
        if
        :: writer == NONE -> writer = me; ok = true
        :: else -> ok = false
        fi
    };
    if
    :: ok ->
        K(me);
        v = seq;
        if
        :: v % 2 == 1 -> writer = NONE; ok = false   /* odd, writer free: a scribble */
        :: else -> set_seq(v, v + 1, ok);
                   if :: !ok -> writer = NONE :: else fi
        fi
    :: else
    fi
}

/* vigil_slot_unlock: seq v + 1 -> v + 2, then writer me -> 0. ok false:
 * VIGIL_ELOST, the slot was taken over, touch nothing more. */
inline unlock(me, v, ok) {
    set_seq(v + 1, v + 2, ok);
    if
    :: ok ->
        K(me);
        atomic { if :: writer == me -> writer = NONE :: else -> ok = false fi }
    :: else
    fi
}

proctype Registrant(byte me) {
    byte v;
    bool ok;
    try_lock(me, v, ok);
    if :: !ok -> goto out :: else fi;
    K(me);
    if
    :: owner != NONE -> unlock(me, v, ok); goto out    /* occupied */
    :: else
    fi;
    owner = me;
    K(me);
    unlock(me, v, ok);
    if :: !ok -> goto out :: else fi;
    owned[me] = true;
    K(me);
    /* mark_in_flight: checks owner, then fetch_or */
    if
    :: owner == me -> K(me); bits = bits | me
    :: else
    fi;
    K(me);
out:
    skip
}

/* vacate_locked: CAS owner -> 0, exchange the bits. */
inline vacate(p) {
    atomic {
        if
        :: owner == p -> owner = NONE; assert((reported & bits) == 0); reported = reported | bits; bits = 0;
                       if :: p != NONE -> owned[p] = false :: else fi
        :: else
        fi
    }
}

proctype Scanner(byte me) {
    byte v, w, p;
    bool ok;
    byte round = 0;
    do
    :: round < 2 ->
        round++;
        w = writer;
        if
        :: w != NONE ->
            /* THE REPAIR: only a writer proven dead. */
            if
            :: dead[w] ->
                atomic {
                    if
                    :: writer == w -> assert(dead[w]); writer = me; ok = true
                    :: else -> ok = false
                    fi
                };
                if
                :: ok ->
                    K(me);
                    v = seq;
                    if
                    :: v % 2 == 1 -> set_seq(v, v + 2, ok); v = v + 1
                    :: else -> set_seq(v, v + 1, ok)
                    fi;
                    if
                    :: !ok -> writer = NONE
                    :: else ->
                        K(me);
                        p = owner;
                        if
                        :: p == NONE || dead[p] -> vacate(p)
                        :: else
                        fi;
                        K(me);
                        unlock(me, v, ok)
                    fi
                :: else
                fi
            :: else
            fi
        :: else ->
            /* THE CLAIM of a dead owner, at the version judged. */
            v = seq;
            p = owner;
            if
            :: v % 2 == 0 && p != NONE && dead[p] ->
                try_lock(me, w, ok);
                if
                :: ok && w == v ->
                    K(me);
                    vacate(p);
                    K(me);
                    unlock(me, w, ok)
                :: ok && w != v -> unlock(me, w, ok)
                :: else
                fi
            :: else
            fi
        fi
    :: round >= 2 -> break
    od;
out:
    skip
}

init {
    atomic {
        run Registrant(R1); run Registrant(R2);
        run Scanner(S1); run Scanner(S2)
    }
}

/* Checked in every state. */
active proctype Invariants() {
end:
    do
    :: atomic { (owned[R1] && owned[R2] && !dead[R1] && !dead[R2]) -> assert(false) }
    od
}
