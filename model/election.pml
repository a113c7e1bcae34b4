/*
 * Leader election on the heartbeat table's header: the election lock (a
 * lock pair), the change of leader ({term, leader} by one 16-byte swap),
 * and the roles of the slots (src/leader.c: THE PROTOCOL, lock_acquire,
 * vigil_leader_elect, vigil_leader_get; src/proc_internal.h: LOCK PAIRS).
 *
 * Three electors run ROUNDS elections each; a reader calls vigil_leader_get
 * READS times. Any elector is killed at any step (K) and from then on
 * provably dead, and paused for any length (every interleaving). Who is
 * live is a moment's estimate: each election judges the leader to be the
 * registration in slot 1 or slot 2 (the lowest live pid), either way, or
 * finds no live slot (VIGIL_ENOPEERS: nothing changes).
 *
 * Names that recur, as issue 17 found them: slot 1's registration may be
 * replaced (REREG) by a new one with the same pid (a recycled pid, or the
 * same process registering again), and elector 3's lock word may be
 * elector 1's (SAME_WORD: elector 1's pid recycled within one clock tick;
 * elector 3 then starts only once elector 1 is dead).
 *
 * CHECK electors      | -DROUNDS=2 -DREADS=0         | -DSAFETY | -m100000 | clean
 * CHECK reader        | -DROUNDS=1 -DREADS=1         | -DSAFETY | -m100000 | clean
 * CHECK rereg         | -DROUNDS=1 -DREADS=0 -DREREG | -DSAFETY | -m100000 | clean
 * CHECK aba           | -DROUNDS=1 -DREADS=0 -DSAME_WORD -DNE=4 | -DSAFETY | -m100000 | clean
 * CHECK aba_old       | -DROUNDS=1 -DREADS=0 -DSAME_WORD -DNE=4 -DOLD_TAKEOVER | -DSAFETY | -m100000 | error
 * CHECK pid_word      | -DROUNDS=1 -DREADS=0 -DREREG -DPID_WORD | -DSAFETY | -m100000 | error
 * CHECK split         | -DROUNDS=1 -DREADS=1 -DSPLIT | -DSAFETY | -m100000 | error
 * CHECK robbed        | -DROUNDS=1 -DREADS=0 -DMUT_ROB | -DSAFETY | -m100000 | error
 * CHECK promote_first | -DROUNDS=1 -DREADS=0 -DPROMOTE_FIRST | -DSAFETY | -m100000 | error
 *
 * electors: two elections each, no reader. reader: one election each and
 * one vigil_leader_get. rereg: one election each, slot 1 registered again
 * at any moment. aba: four
 * electors, one election each, elector 3 with elector 1's lock word (it
 * cannot take over its twin's lock itself: the C judges a holder with its
 * own pid, namespace and start tag to be a thread of its own, alive; so
 * a fourth elector repairs).
 *
 * The error runs, each a step as it was or a mutant: aba_old takes the
 * lock over from the word alone (the C before issue 17): an elector that
 * judged dead elector 1 and was paused takes the lock from elector 3,
 * which holds it with the very same word (issue 17.6). pid_word names the
 * leader by its pid (the C before issue 17): slot 1 registered again by
 * the same pid is no change, and the new registration leads under the
 * old one's term. split installs the change with two stores, the term
 * first (the mutant "term before leader"): an elector killed between them
 * leaves a term without its leader, and a reader pairs them. robbed takes
 * the lock from a holder that is only paused. promote_first promotes the
 * new leader before demoting the old: two coordinators at once.
 *
 * Safety (asserts): every change of leader raises the term by exactly
 * one and names a registration other than the term before's; leader and
 * term always agree (leader_of[term] == leader); an election returns the
 * registration of the term it returns; a reader that accepts (term,
 * leader) got that term's leader; at most one slot has the coordinator
 * role; the lock is taken over only from a dead holder.
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - The slots' liveness is an oracle (either candidate, or none): the
 *     election's judgement is a moment's estimate in the C too, and every
 *     answer it can give is explored. The SeqLock read of the chosen
 *     slot, which gives the registration with its pid, is one step.
 *   - Two slots and three registrations: enough for a leader, a rival, and
 *     a successor in the leader's slot with the leader's own pid; more
 *     slots only add candidates the oracle already ranges over.
 *   - The slot writer lock taken to promote is one atomic step (its
 *     protocol is model/slot.pml's); registration and demotion race
 *     promotion only through the role word, which is modelled.
 *   - Terms and sequences do not wrap (64 bits in the C, rising by one).
 *   - Each 16-byte compare-and-swap is one step, as the hardware makes it;
 *     the loads that guess its expected value are left out (a wrong
 *     guess fails the swap, which then retries with what it read).
 *   - Memory order: steps are sequentially consistent. The C needs no
 *     release/acquire pair with a dead holder, because {term, leader} is
 *     changed only by a locked read-modify-write, which reads the latest
 *     value, and the roles are rewritten from scratch; the reader's three
 *     loads are seq_cst (leader.c, ORDERS ONLY AN ARGUMENT PROTECTS).
 *   - The judge of a dead holder is an oracle: dead when no started,
 *     live elector has the word. The real one errs only towards "alive"
 *     (a wait, never a robbery), and judges after reading the holding,
 *     as here.
 *   - The lock's bounded wait is left out: a waiter gives up (VIGIL_EBUSY)
 *     at any moment it cannot take the lock, which covers every budget.
 */
#ifndef NE
#define NE 3            /* electors 1..NE */
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef READS
#define READS 1
#endif
#define W 0             /* VIGIL_ROLE_WORKER */
#define C 1             /* VIGIL_ROLE_COORDINATOR */

#ifdef SAME_WORD
#define WORD(e) ((e) == 3 -> 1 : (e))   /* elector 3 has elector 1's lock word */
#else
#define WORD(e) (e)
#endif
/* Registrations: 1 and 2 in slots 1 and 2; 3 is slot 1's next, same pid as 1. */
#define PID(r) ((r) == 2 -> 2 : 1)
#define SLOT(r) ((r) == 2 -> 2 : 1)

byte lock;              /* header 48 elect_lock: the holder's word, or the last one's */
byte lseq;              /* header 56 elect_seq: odd while held */
byte leader;            /* header 40: the registration named, 0 none */
byte term;              /* header 32 */
byte reg[3];            /* the registration in slots 1 and 2 */
byte role[3];           /* slot role of slots 1 and 2 */
bool killed[NE + 1];
bool started[NE + 1];

/* ghost */
byte holder;            /* the elector holding the lock, 0 free */
byte leader_of[10];     /* the registration each term was installed with */

#define K(me) if :: skip :: killed[me] = true; goto out fi

#define ALIVE_WITH(w, e) (WORD(e) == (w) && started[e] && !killed[e])
#define DEAD(w) !(ALIVE_WITH(w, 1) || ALIVE_WITH(w, 2) || ALIVE_WITH(w, 3) || (NE == 4 && ALIVE_WITH(w, 4)))

/* Every change of term: one up, to a registration other than the last. */
#define NEW_TERM(t, l) \
    assert((t) == term + 1 && leader_of[term] != (l)); \
    term = (t); leader_of[term] = (l)

#ifdef PID_WORD
#define SAME_LEADER(a, b) (PID(a) == PID(b) && SLOT(a) == SLOT(b))  /* (pid << 32) | (slot + 1) */
#else
#define SAME_LEADER(a, b) ((a) == (b))                              /* (gen << 21) | (slot + 1) */
#endif

proctype Elector(byte me) {
    byte round, best, t, l, w, s, other;
    bool changed, ok;
#ifdef SAME_WORD
    if :: me == 3 -> end_wait: (killed[1]) :: else fi;
#endif
    started[me] = true;
    do
    :: round < ROUNDS ->
        round++;
        /* 1. lock_acquire: take {any, even} -> {me, odd}; or, judged dead,
         * take over from exactly the holding read (OLD_TAKEOVER: the word) */
        K(me);
        atomic {
            if
            :: lseq % 2 == 0 -> lock = WORD(me); lseq++; holder = me; ok = true
            :: lseq % 2 == 1 -> w = lock; s = lseq; ok = false
            fi
        };
        if
        :: !ok && DEAD(w) ->
            K(me);              /* EP_JUDGED */
            atomic {
#ifdef OLD_TAKEOVER
                if :: lock == w && lseq % 2 == 1 -> ok = true :: else fi;
#else
                if :: lock == w && lseq == s -> ok = true :: else fi;
#endif
                if :: ok -> assert(killed[holder]); holder = me; lock = WORD(me); lseq = lseq + 2 :: else fi
            }
#ifdef MUT_ROB
        :: !ok ->               /* a paused holder robbed */
            atomic { if :: lseq % 2 == 1 -> holder = me; lock = WORD(me); lseq = lseq + 2; ok = true :: else fi }
#endif
        :: else
        fi;
        if :: !ok -> goto done :: else fi;    /* VIGIL_EBUSY after the wait */
        /* 2. judge the slots: the lowest live pid's registration, as the
         * moment has it */
        if
        :: best = reg[1]
        :: best = reg[2]
        :: K(me); atomic { assert(holder == me); holder = 0; lseq++ }; goto done  /* VIGIL_ENOPEERS */
        fi;
        other = 3 - SLOT(best);
        /* 3. the change of leader */
        atomic { t = term; l = leader; changed = !SAME_LEADER(l, best) };
        if
        :: changed ->
            K(me);
#ifndef SPLIT
            atomic { assert(term == t && leader == l); NEW_TERM(t + 1, best); leader = best };
#else
            atomic { NEW_TERM(t + 1, best) };   /* the term first ... */
            K(me);
            leader = best;                      /* ... then the leader */
#endif
            t++
        :: else
        fi;
        /* 4. demote the other slot, then promote the leader's slot under
         * its lock if it still holds the registration judged */
#ifdef PROMOTE_FIRST
        K(me); atomic { if :: reg[SLOT(best)] == best -> role[SLOT(best)] = C :: else fi };
#endif
        K(me); role[other] = W;
#ifndef PROMOTE_FIRST
        K(me); atomic { if :: reg[SLOT(best)] == best -> role[SLOT(best)] = C :: else fi };
#endif
        /* 5. release: the store of the next even sequence */
        K(me); atomic { assert(holder == me); holder = 0; lseq++ };
        /* what the election returns */
        assert(leader_of[t] == best);
done:   best = 0; other = 0; t = 0; l = 0; w = 0; s = 0; changed = false; ok = false
    :: else -> break
    od;
out:
    skip
}

/* vigil_leader_get: term, leader, term */
proctype Reader() {
    byte n, t1, t2, l;
    do
    :: n < READS ->
        n++;
        t1 = term;
        l = leader;
        t2 = term;
        if
        :: t1 == t2 -> assert(leader_of[t1] == l)
        :: else                              /* moving: look again */
        fi
    :: else -> break
    od
}

/* Slot 1 registered again, by the same pid: a new registration, worker. */
proctype Registrar() {
    atomic { reg[1] = 3; role[1] = W }
}

active proctype Invariants() {
end:
    do
#ifndef SPLIT
    :: atomic { leader != leader_of[term] -> assert(false) }
#endif
    :: atomic { role[1] == C && role[2] == C -> assert(false) }
    od
}

init {
    atomic {
        reg[1] = 1; reg[2] = 2;
        run Elector(1); run Elector(2); run Elector(3); run Reader();
        if :: NE == 4 -> run Elector(4) :: else fi;
#ifdef REREG
        run Registrar()
#endif
    }
}
