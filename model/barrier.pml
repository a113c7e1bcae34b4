/*
 * The epoch barrier with issue 9's fix: a bound arrival is one record
 * store, and a gate word commits each release (src/barrier_wait.c, THE
 * PROTOCOL; the functions are named at each step below).
 *
 * CHECK bound    | -DNORETRY                    | -DSAFETY | -m200000 | clean
 * CHECK retry    | -DR=1                        | -DSAFETY | -m200000 | clean
 * CHECK mixed    | -DNORETRY -DUNBOUND=1        | -DSAFETY | -m200000 | clean
 * CHECK unbretry | -DR=1 -DUNBOUND=0           | -DSAFETY | -m200000 | clean
 * CHECK quorum   | -DR=1 -DUNBOUND=1 -DQUORUM=2 | -DSAFETY | -m200000 | clean
 * CHECK flipall  | -DR=1 -DNORETRY -DFLIPALL -DUNBOUND=1 | -DSAFETY | -m200000 | clean
 * CHECK live     | -DR=1 -DLTL -DNOTIMEOUT -DNOFLIP             | | -a -f -m200000 | clean
 * CHECK livemix  | -DR=1 -DLTL -DNOTIMEOUT -DNOFLIP -DUNBOUND=1 | | -a -f -m200000 | clean
 * CHECK live2    | -DLTL -DNOTIMEOUT -DNOFLIP -DNOKILL -DUNBOUND=1 | | -a -f -m200000 | clean
 * CHECK nobump   | -DR=1 -DNORETRY -DMUT_NOBUMP | -DSAFETY | -m200000 | error
 * CHECK nohelp   | -DR=1 -DLTL -DNOTIMEOUT -DNOFLIP -DMUT_NOHELP | | -a -f -m200000 | error
 *
 * Three processes W=0, R=1, X=2, each with its heartbeat slot; two rounds
 * (R=1: one). Kills at every step (K), timeouts at every wait, X's slot
 * stale and live again at any time, a killed process's slot lapsing at
 * some moment after its death, as in barrier_old.pml.
 * bound: all bound, the all-live rule, two rounds (a stale gate from the
 *   round before, late judges and withdrawers of a passed round).
 * retry: one round; W, told VIGIL_ETIMEDOUT, arrives again at the same
 *   epoch (a second withdrawal, a gate count of 2).
 * mixed: R unbound, two rounds. unbretry: W unbound and retrying.
 * quorum: R unbound, wait_quorum(2), W retrying.
 * flipall: every process's slot may go stale and come back (a paused
 *   peer stops beating), R unbound.
 * live, livemix, live2: no timeouts, X never stale. LTL `released`, under
 *   weak fairness: every run ends with every round released or everyone
 *   killed. live2 without kills, two rounds.
 * nobump, nohelp: the model can fail. A withdrawal that does not bump the
 *   gate is counted by a commit (assertion); a waiter that finds the gate
 *   committed and does not finish the round leaves everyone waiting for a
 *   committer killed before its finish (acceptance cycle).
 *
 * Properties (asserts): a waiter told VIGIL_ETIMEDOUT was counted by no
 * release; with bound handles only, every peer the committing judgement
 * saw live had its record; one commit per round, the state moves only
 * after it, so one VIGIL_SERIAL (the committer's, unless it was killed).
 *
 * Liveness is read at each slot read (READLIVE): a process's own beats
 * (keep_beating) are among the values a read of X's slot may give.
 */
#define N 3
#define X 2
/* NB: an `else` in the first statement of an atomic that is an option
 * beside K's kill would be the else of the kill choice, never taken:
 * such choices below spell out their negated guard instead. */
#ifndef R
#define R 2             /* rounds */
#endif
#ifndef UNBOUND
#define UNBOUND 9       /* no unbound handle */
#define ALLBOUND
#endif
#define ab(p, a) (1 << (2 * (p) + (a))) /* ghost: arrival a (0, or 1 on the retry) of p */

#ifdef NOKILL
#define K
#else
#define K :: goto dead
#endif

/* complete(): the rule on the state's count sn and the tally m */
#ifdef QUORUM
#define TALLY(j) (rec[j] == E + 1 && lv)  /* m = rec_live */
#define RULE (sn + m >= QUORUM)           /* unbound + rec_live >= quorum */
#else
#define TALLY(j) (rec[j] != E + 1 && lv)  /* m = live - rec_live */
#define RULE (m <= sn)                    /* live - rec_live <= unbound */
#endif

/*
 * is_live(slot j) as a judge reads it, into lv. X's slot (any, with
 * FLIPALL) may read either way at each read: X stopped beating, or beat
 * again, at any moment before (the same as a process flipping it at any
 * time, without the states). A killed process's slot reads live until
 * it lapses (env), then stale for good; the others' slots read live.
 */
#ifdef NOFLIP
#define FLIPS(j) false
#elif defined(FLIPALL)
#define FLIPS(j) (!killed[j])
#else
#define FLIPS(j) (j == X && !killed[j])
#endif
#define READLIVE(j) if :: FLIPS(j) -> lv = true :: FLIPS(j) -> lv = false :: !FLIPS(j) -> lv = live[j] fi

/* tally, one slot: its record and liveness in one step */
#define SLOT(j) \
    if K \
    :: atomic { \
        READLIVE(j); \
        m = m + TALLY(j); \
        if :: rec[j] == E + 1 && lv -> cnt = cnt | ab(j, recA[j]) :: else fi; \
        lv = false } \
    fi

byte ep, arr;           /* hdr->state (offset 32): epoch, unbound arrivals */
byte rec[N];            /* records[i]: 0, or e + 1 for (e, owner's pid) */
byte gep; bool gc; byte gn; /* hdr->gate (offset 48): epoch, COMMITTED, withdrawals */
bool live[N] = true;    /* slot i not lapsed (see READLIVE) */
bool killed[N];
byte nkilled;

/* ghost: sets of arrivals ab(p, a) */
byte recA[N];           /* which arrival of i's the record is */
byte inarr;             /* unbound arrivals whose 1 is in arr */
byte counted[R];        /* arrivals the commit of round e counted */
byte tout[R];           /* arrivals told VIGIL_ETIMEDOUT at round e */
byte committer[R];      /* i + 1 of round e's committer */
byte serial[R];         /* VIGIL_SERIALs returned for round e */

#ifdef LTL
ltl released { <> (ep == R || nkilled == N) }
#endif

/* gate_load, found an older round's value (ge - 1, gcl, gk): while the
 * state is still at E, CAS it to (E, 0); reload on failure */
#define INSTALL(retry) \
    if K \
    :: atomic { ep != E -> ge = 0; gcl = false; gk = 0; goto next } /* GATE_PAST */ \
    :: ep == E \
    fi; \
    if K \
    :: atomic { \
        if \
        :: gep + 1 == ge && gc == gcl && gn == gk -> gep = E; gc = false; gn = 0 \
        :: !(gep + 1 == ge && gc == gcl && gn == gk) -> ge = 0; gcl = false; gk = 0; goto retry \
        fi; \
        ge = 0; gcl = false; gk = 0 } \
    fi

proctype P(byte i; bool b)
{
    byte E;                   /* my_epoch */
    byte a;                   /* this arrival: 0, or 1 on the retry */
    byte ge, gk; bool gcl;    /* the gate as loaded (ge, gcl: older round's only) */
    byte sn, m;               /* the state's count, the tally */
    byte cnt;                 /* ghost: the arrivals this judgement counts */
    bool lv;                  /* one slot's liveness, inside a tally step */

round:
    if :: E == R -> goto fin :: else fi;
    /* barrier_wait: an epoch that has passed returns at once; the early
     * wait sleeps until the barrier reaches E */
end_early:
    if K
    :: ep > E -> goto next
    :: ep == E
    fi;
    /* arrival: bound, the record store (seq_cst); unbound, +1 by CAS */
    if
    :: b -> if K :: atomic { rec[i] = E + 1; recA[i] = a } fi
    :: else ->
        if K
        :: atomic { ep != E -> goto next }
        :: atomic { ep == E -> arr++; inarr = inarr | ab(i, a) }
        fi
    fi;

judge:  /* try_release: gate_load first */
    if K
    :: atomic { gep == E && gc -> goto help }   /* GATE_DONE */
    :: atomic { gep == E && !gc -> gk = gn }    /* GATE_OPEN */
    :: atomic { gep != E -> ge = gep + 1; gcl = gc; gk = gn }
    fi;
    if :: ge != 0 -> INSTALL(judge) :: else fi;
    /* the state, after the gate */
    if K
    :: atomic { ep != E -> gk = 0; goto next }
    :: atomic { ep == E -> sn = arr; cnt = inarr }
    fi;
    /* tally: each slot's record and liveness, one slot a step */
    SLOT(0); SLOT(1); SLOT(X);
    if
    :: RULE
    :: else -> sn = 0; m = 0; cnt = 0; gk = 0; goto await
    fi;
    /* the commit: CAS of the gate from (E, gk) to (E, COMMITTED, gk) */
    if K
    :: atomic {
        if
        :: gep == E && !gc && gn == gk ->
            gc = true;
            assert((cnt & tout[E]) == 0);   /* counts no one told ETIMEDOUT */
#ifdef ALLBOUND
            assert(m == 0);                 /* every slot seen live had its record */
#endif
            assert(committer[E] == 0);
            committer[E] = i + 1;
            counted[E] = cnt
        :: !(gep == E && !gc && gn == gk)   /* lost to a moving gate */
        fi;
        sn = 0; m = 0; cnt = 0; gk = 0 }
    fi;
    if :: committer[E] != i + 1 -> goto judge :: else fi; /* (a won flag, kept in the ghost) */
    /* finish: the state from any value at E to (E + 1, 0); VIGIL_SERIAL */
    if K
    :: atomic {
        if :: ep == E -> ep = E + 1; arr = 0; inarr = 0 :: ep != E fi;
        serial[E]++;
        assert(serial[E] == 1) }
    fi;
    goto next;

help:   /* the gate is COMMITTED at E: finish for the committer, passed */
    if K
    :: atomic {
        if
#ifdef MUT_NOHELP
        :: ep == E -> goto fin /* waits for the committer, for ever */
#endif
        :: ep == E -> assert(gep == E && gc); ep = E + 1; arr = 0; inarr = 0
        :: ep != E
        fi }
    fi;
    goto next;

await:  /* await_change: the release, a wake to judge again, or the
         * deadline (try_release once more, which judge covers, then
         * withdraw) */
    if
    :: ep != E -> goto next
    :: goto judge
#ifndef NOTIMEOUT
    :: goto withdraw
#endif
    fi;

withdraw:   /* withdraw: first take our arrival back */
    if
    :: b ->
        if K :: atomic { if :: rec[i] == E + 1 -> rec[i] = 0 :: rec[i] != E + 1 fi } fi
    :: else ->
        if K
        :: atomic { ep != E -> goto next }
        :: atomic { ep == E -> arr--; inarr = inarr & ~ab(i, a) }
        fi
    fi;
wgate:  /* then gate_load, and bump the gate's withdrawals by CAS */
    if K
    :: atomic { gep == E && gc -> goto help }   /* committed first: passed */
    :: atomic { gep == E && !gc -> gk = gn }
    :: atomic { gep != E -> ge = gep + 1; gcl = gc; gk = gn }
    fi;
    if :: ge != 0 -> INSTALL(wgate) :: else fi;
    if K
    :: atomic {
        if
        :: gep == E && !gc && gn == gk ->
#ifndef MUT_NOBUMP
            gn++;
#endif
            tout[E] = tout[E] | ab(i, a);
            assert((counted[E] & ab(i, a)) == 0);
            gk = 0
        :: !(gep == E && !gc && gn == gk) -> gk = 0; goto wgate
        fi }
    fi;
    /* VIGIL_ETIMEDOUT: the caller may try the same epoch again, once */
    if
#ifndef NORETRY
    :: i == 0 && a == 0 -> a = 1; goto round  /* W only: the states */
#endif
    :: goto fin
    fi;

next:   /* returned 0 or VIGIL_SERIAL: on to the next epoch */
    E++; a = 0;
    goto round;
dead:
    atomic { killed[i] = true; nkilled++ }
fin:    /* forget the locals: one state per dead or finished process */
    E = 0; a = 0; ge = 0; gk = 0; gcl = false; sn = 0; m = 0; cnt = 0
}

/* A killed process's slot lapses at some moment after its death. */
active proctype env()
{
end:
    do
    :: atomic { killed[0] && live[0] -> live[0] = false }
    :: atomic { killed[1] && live[1] -> live[1] = false }
    :: atomic { killed[X] && live[X] -> live[X] = false }
    od
}

init
{
    atomic { run P(0, UNBOUND != 0); run P(1, UNBOUND != 1); run P(X, UNBOUND != X) }
}
