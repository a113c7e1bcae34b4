/*
 * Leader election on the heartbeat table's header: elect_lock, the intent
 * record, leader and term, and the roles of the slots (src/leader.c: THE
 * PROTOCOL, lock_acquire, finish_intent, vigil_leader_elect,
 * vigil_leader_get).
 *
 * Three electors run ROUNDS elections each; a reader calls
 * vigil_leader_get READS times. Any elector is killed at any step (K) and from then on provably
 * dead (vigil_lock_holder_dead), and paused for any length (every
 * interleaving). Who is live is a moment's estimate: each election judges
 * the leader to be candidate 1 or 2 (the lowest live pid), either way, or
 * finds no live slot (VIGIL_ENOPEERS: nothing changes).
 *
 * CHECK electors      | -DROUNDS=2 -DREADS=0 | -DSAFETY | -m100000 | clean
 * CHECK reader        | -DROUNDS=1 -DREADS=1 | -DSAFETY | -m100000 | clean
 * CHECK robbed        | -DMUT_ROB            | -DSAFETY | -m100000 | error
 * CHECK no_intent     | -DNO_INTENT -DREADS=0 | -DSAFETY | -m100000 | error
 * CHECK promote_first | -DPROMOTE_FIRST -DREADS=0 | -DSAFETY | -m100000 | error
 *
 * electors: two elections each, no reader. reader: one election each and
 * one vigil_leader_get (each of the reader's five loads multiplies the
 * states: two elections each and two reads is 27 million, clean).
 *
 * robbed, no_intent, promote_first: the model can fail. robbed takes the
 *   lock over from a holder that is only paused: its successor finishes
 *   the paused one's change and the paused one's own term store makes a
 *   second rise for it. no_intent leaves out step 2: a killed elector's
 *   leader store stays without its term. promote_first promotes the new
 *   leader before demoting the old: two coordinators at once.
 *
 * Safety (asserts): every store to term raises it by exactly one and
 * names a leader other than the term before's (leader_of); whenever no
 * intent is pending, leader and term agree; an election returns the
 * leader of the term it returns; a reader that accepts (term, leader) got
 * that term's leader; at most one slot has the coordinator role; the lock
 * is taken over only from a dead holder.
 */
#define NE 3            /* electors 1..3 */
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef READS
#define READS 1
#endif
#define W 0             /* VIGIL_ROLE_WORKER */
#define C 1             /* VIGIL_ROLE_COORDINATOR */

byte lock;              /* header 48 elect_lock: 0, or the elector's word (its id) */
byte in_term, in_leader;/* header 56 elect_intent: (term + 1, leader), in_term 0 none */
byte leader;            /* header 40: the candidate named, 0 none */
byte term;              /* header 32 */
byte role[3];           /* slot role of candidates 1 and 2 */
bool killed[NE + 1];

/* ghost */
byte leader_of[8];      /* the leader each term was installed with */

#define K(me) if :: skip :: killed[me] = true; goto out fi

/* Every store to term: one up, for a change of leader. */
#define SET_TERM(t, l) \
    assert((t) == term + 1 && leader_of[term] != (l) && leader == (l)); \
    term = (t); leader_of[term] = (l)

proctype Elector(byte me) {
    byte round, best, t, l, it, il, other;
    bool changed;
    do
    :: round < ROUNDS ->
        round++;
        /* 1. lock_acquire: CAS from 0, or from a holder proven dead */
        K(me);
        atomic {
            if
            :: lock == 0 -> lock = me
            :: lock != 0 && killed[lock] -> lock = me
#ifdef MUT_ROB
            :: lock != 0 -> lock = me        /* a paused one too */
#endif
            :: lock != 0 -> goto done        /* VIGIL_EBUSY after the wait */
            fi
        };
        /* 2. finish_intent: loads under the lock, one step (no one else
         * writes while we hold it, unless we are dead) */
        atomic { it = in_term; il = in_leader; t = term };
#ifdef NO_INTENT
        it = 0;
#endif
        if
        :: it != 0 && it == t + 1 ->         /* killed after the intent, before the term */
            K(me); leader = il;
            K(me); atomic { SET_TERM(t + 1, il) };
            K(me); in_term = 0; in_leader = 0
        :: it != 0 && it != t + 1 ->         /* complete */
            K(me); in_term = 0; in_leader = 0
        :: it == 0
        fi;
        /* 3. judge the slots: the lowest live pid, as the moment has it */
        if
        :: best = 1
        :: best = 2
        :: K(me); lock = 0; goto done        /* no live slot: VIGIL_ENOPEERS */
        fi;
        other = 3 - best;
        /* 4. a change of leader: intent, leader, term, intent cleared */
        atomic { t = term; changed = leader != best };
        if
        :: changed ->
            K(me); atomic { in_term = t + 1; in_leader = best };
            K(me); leader = best;
            K(me); t++; atomic { SET_TERM(t, best) };
            K(me); in_term = 0; in_leader = 0
        :: else
        fi;
        /* 5. demote the other, then promote the leader (under its slot lock) */
#ifdef PROMOTE_FIRST
        K(me); role[best] = C;
#endif
        K(me); role[other] = W;
#ifndef PROMOTE_FIRST
        K(me); role[best] = C;
#endif
        /* 6. release */
        K(me); lock = 0;
        /* what the election returns */
        assert(leader_of[t] == best);
done:   best = 0; other = 0; t = 0; it = 0; il = 0; changed = false
    :: else -> break
    od;
out:
    skip
}

/* vigil_leader_get: term, intent, leader, intent, term */
proctype Reader() {
    byte n, t1, t2, l;
    bool i1, i2;
    do
    :: n < READS ->
        n++;
        t1 = term;
        i1 = in_term != 0;
        l = leader;
        i2 = in_term != 0;
        t2 = term;
        if
        :: t1 == t2 && !i1 && !i2 -> assert(leader_of[t1] == l)
        :: else                              /* moving: look again */
        fi
    :: else -> break
    od
}

active proctype Invariants() {
end:
    do
    :: atomic { in_term == 0 && leader != leader_of[term] -> assert(false) }
    :: atomic { role[1] == C && role[2] == C -> assert(false) }
    od
}

init {
    atomic { run Elector(1); run Elector(2); run Elector(3); run Reader() }
}
