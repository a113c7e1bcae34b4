/*
 * Leader election with the elect_lock and elect_intent words (src/leader.c:
 * lock_acquire(), finish_intent(), vigil_leader_elect() steps 1 to 6,
 * lock_release(); its protocol comment, CRASH SAFETY, names this model).
 *
 * Processes: three electors, each running vigil_leader_elect a bounded
 * number of times; the slots' liveness, one nondeterministic flag per slot
 * that may change at any moment (beats, deaths, the epoch moving); a killer
 * that may kill any elector at any step (from then its lock word is
 * provably dead, vigil_lock_holder_dead); a monitor. A pause is any
 * interleaving. The table has 3 slots with fixed pids (slot i has pid
 * i + 1, so the lowest live pid is the lowest live slot and the leader
 * word (pid << 32) | (slot + 1) is just slot + 1); slot locks and
 * re-registration are left out (pids never change). The intent record is
 * (new term, new leader); its 11-bit term tag never wraps here.
 *
 * Safety:
 *   - the term rises exactly once per change of leader: `changes` counts
 *     the changes decided (intent stores); whenever no intent is recorded,
 *     term == changes and the leader word is the last change's leader (what
 *     vigil_leader_get relies on), and the term never exceeds changes: a
 *     killed elector's change is completed exactly once by the next holder,
 *     never twice and never lost;
 *   - after finish_intent, the holder starts from a complete change
 *     (term == changes, leader that change's);
 *   - an election that completes leaves exactly one coordinator, the
 *     leader it names, and at no moment do two slots hold the role;
 *   - the lock is taken over only from a dead holder: a live (perhaps
 *     paused) elector is never robbed.

 * Size: one election per elector, two kills, three flips of liveness. The
 * full space is about 2.5e7 states, past what fits in a minute on 2 cores,
 * so the runs are bitstate (-DBITSTATE, -w26: partial coverage, hash factor
 * about 3); an exhaustive run wants about 3 GB and a few minutes.
 *
 * CHECK safety | | -DSAFETY -DBITSTATE | -m100000 -w26 | clean
 * CHECK no_intent | -DNO_INTENT | -DSAFETY -DBITSTATE | -m100000 -w26 | error
 * CHECK promote_first | -DPROMOTE_FIRST | -DSAFETY -DBITSTATE | -m100000 -w26 | error
 *
 * no_intent drops step 2 (a killed elector's leader store stays without
 * its term), promote_first promotes before demoting: Spin must find both.
 */

#define N      3
#define ELECTS 1
#define FLIPS  3
#define KILLS  2
#define WORKER 0
#define COORD  1
#define INTENT(t, s1) ((t) * 4 + (s1))

byte term = 0;          /* hdr->term */
byte leader = 0;        /* hdr->leader: slot + 1, 0 none */
byte intent = 0;        /* hdr->elect_intent: INTENT(term, slot + 1), 0 none */
byte elect_lock = 0;    /* hdr->elect_lock: elector + 1, 0 free */
bool live[N];           /* vigil_hb_is_live_at, per slot */
byte role[N];           /* slot->role */

bool dead[N];
/* ghosts */
byte changes = 0;       /* changes of leader decided (intent stored) */
byte gleader = 0;       /* the leader of the last one */

active proctype Beats() {
    byte flips = 0;
    do
    :: flips < FLIPS ->
       if
       :: atomic { live[0] = !live[0]; flips++ }
       :: atomic { live[1] = !live[1]; flips++ }
       :: atomic { live[2] = !live[2]; flips++ }
       fi
    :: break
    od
}

active proctype Killer() {
    byte kills = 0;
    do
    :: kills < KILLS ->
       if
       :: atomic { !dead[0] -> dead[0] = true; kills++ }
       :: atomic { !dead[1] -> dead[1] = true; kills++ }
       :: atomic { !dead[2] -> dead[2] = true; kills++ }
       fi
    :: break
    od
}

active proctype Monitor() {
end:
    do
    :: atomic { (intent == 0 && (term != changes || leader != gleader)) || term > changes ||
                (role[0] == COORD && role[1] == COORD) || (role[0] == COORD && role[2] == COORD) ||
                (role[1] == COORD && role[2] == COORD) -> assert(false) }
    od
}

proctype Elector(byte me) {
    byte w, in, t, best, i, n = 0;
    bool got;
    {
    do
    :: n < ELECTS ->
       n++;
       /* 1. lock_acquire: CAS 0 -> me; a dead holder's exact word -> me;
        * a live one waited for, boundedly, then VIGIL_EBUSY */
       got = false;
       do
       :: atomic { elect_lock == 0 -> elect_lock = me + 1; got = true }; break
       :: atomic { elect_lock != 0 && dead[elect_lock - 1] -> w = elect_lock };  /* vigil_lock_judge */
          atomic { if :: elect_lock == w -> assert(dead[w - 1]); elect_lock = me + 1; got = true
                      :: else fi };
          if :: got -> break :: else fi
       :: break                                               /* VIGIL_EBUSY */
       od;
       if
       :: !got
       :: else ->
#ifndef NO_INTENT
          /* 2. finish_intent */
          in = intent;
          if
          :: in != 0 ->
             t = term;
             if
             :: t + 1 == in / 4 ->            /* killed after the intent, before the term */
                leader = in % 4;
                term = t + 1
             :: else                          /* complete (or a scribble) */
             fi;
             intent = 0
          :: else
          fi;
          assert(term == changes && leader == gleader);
#endif
          /* 3. judge every slot: the lowest live pid */
          best = 0; i = 0;
          do
          :: i < N -> if :: best == 0 && live[i] -> best = i + 1 :: else fi; i++
          :: else -> break
          od;
          if
          :: best == 0 -> elect_lock = 0       /* VIGIL_ENOPEERS */
          :: else ->
             /* 4. a change: intent, leader, term, clear */
             t = term;
             if
             :: leader != best ->
                atomic { intent = INTENT(t + 1, best); changes++; gleader = best };
                leader = best;
                term = t + 1;
                intent = 0
             :: else
             fi;
             /* 5. demote every other coordinator, then promote */
#ifdef PROMOTE_FIRST
             if :: role[best - 1] != COORD -> role[best - 1] = COORD :: else fi;
#endif
             i = 0;
             do
             :: i < N -> if :: i + 1 != best && role[i] != WORKER -> role[i] = WORKER :: else fi; i++
             :: else -> break
             od;
#ifndef PROMOTE_FIRST
             if :: role[best - 1] != COORD -> role[best - 1] = COORD :: else fi;
#endif
             /* a completed election: one coordinator, the leader it names */
             assert(leader == best && role[best - 1] == COORD);
             assert((best == 1 || role[0] == WORKER) && (best == 2 || role[1] == WORKER) &&
                    (best == 3 || role[2] == WORKER));
             /* 6. lock_release */
             elect_lock = 0
          fi
       fi
    :: else -> break
    od
    } unless { dead[me] }
}

init {
    atomic { run Elector(0); run Elector(1); run Elector(2) }
}
