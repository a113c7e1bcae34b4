/*
 * The heartbeat slot's SeqLock as it stood before issue 9 (git history:
 * src/heartbeat.c vigil_slot_try_lock/vigil_slot_unlock and src/failover.c
 * repair() at 8e4f747): the odd version itself was the writer lock, the
 * unlock a plain store of v + 2, and the repair of a slot whose version
 * stayed odd at one value past the grace window moved it from v to v + 2
 * and then stored v + 3, whoever the writer was, dead or only paused.
 *
 * Expected: an error. Spin finds the paused writer: a registrant stopped
 * between its lock and its unlock outlives the grace window (here: the
 * scanner saw the same odd version twice), is repaired over, and when it
 * resumes its own unlock stores v + 2 over v + 3 (the version goes
 * backwards) and its pid over the slot's next owner (two owners).
 * model/slot.pml is the protocol that replaced it, clean.
 *
 * CHECK safety | | -DSAFETY | -m100000 | error
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 * It is a counterexample, kept to show that the model of the design it
 * stands for can fail: whatever it leaves out can only hide more errors,
 * never make this one appear. Left out: the in-flight bits and marks
 * (the flaw is in the version and the owner alone), pids and lock words
 * that recur (the old lock had no word; issue 17's recurring names are
 * slot.pml's fence_old, clear_old and aba_old runs), more than one
 * repair, memory order (steps are sequentially consistent, which only
 * removes interleavings), and the epochs (the scanner's second look at
 * the same odd version stands for "past grace", the only use it made of
 * time).
 */

#define NONE 0
#define R1 1
#define R2 2
#define S1 3

byte seq = 0;
byte owner = NONE;
bool dead[4];
bool owned[4];

#define K(me) if :: skip :: dead[me] = true; goto out fi

/* Every store to seq is checked: versions only grow. */
inline store_seq(to) {
    atomic { assert(to > seq); seq = to }
}

proctype Registrant(byte me) {
    byte v;
    v = seq;
    if :: v % 2 == 1 -> goto out :: else fi;
    atomic { if :: seq == v -> assert(v + 1 > seq); seq = v + 1 :: else -> goto out fi };
    K(me);
    if
    :: owner != NONE -> store_seq(v + 2); goto out
    :: else
    fi;
    owner = me;
    K(me);
    store_seq(v + 2);          /* vigil_slot_unlock: a plain store */
    owned[me] = true;
out:
    skip
}

proctype Scanner(byte me) {
    byte v, seen = 255;
    byte round = 0;
    do
    :: round < 3 ->
        round++;
        v = seq;
        if
        :: v % 2 == 1 && v != seen -> seen = v      /* first sight: odd_since */
        :: v % 2 == 1 && v == seen ->               /* past grace: repair */
            atomic { if :: seq == v -> assert(v + 2 > seq); seq = v + 2 :: else -> goto next fi };
            if
            :: owner != NONE -> owned[owner] = false; owner = NONE  /* vacate */
            :: else
            fi;
            store_seq(v + 3)
        :: else
        fi;
next:   skip
    :: round >= 3 -> break
    od
}

init {
    atomic { run Registrant(R1); run Scanner(S1) }
    /* The next owner registers once the repair freed the slot. */
end:
    (seq >= 4 && seq % 2 == 0 && owner == NONE) -> run Registrant(R2)
}

active proctype Invariants() {
end:
    do
    :: atomic { (owned[R1] && owned[R2] && !dead[R1] && !dead[R2]) -> assert(false) }
    :: atomic { (owner == R1 && owned[R2] && !dead[R2]) -> assert(false) }
    od
}
