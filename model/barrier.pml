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
 * CHECK ahead    | -DAHEAD -DQUORUM=2 -DLTL_FINISH -DNOTIMEOUT -DNOFLIP | | -a -f -m200000 | clean
 * CHECK ahead_old| -DAHEAD -DQUORUM=2 -DLTL_FINISH -DNOTIMEOUT -DNOFLIP -DOLD_AHEAD | | -a -f -m200000 | error
 * CHECK recur    | -DR=1 -DNORETRY -DRECUR      | -DSAFETY | -m200000 | clean
 * CHECK recur_old| -DR=1 -DNORETRY -DRECUR -DOLD_RECORD | -DSAFETY | -m200000 | error
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
 * ahead, ahead_old (issue 17.1): a caller ahead of the barrier. X waits
 *   for round 1 from the start while W and R wait_quorum(0, 2), as in the
 *   issue, and is never killed (W and R are, at every step). LTL
 *   `finished`, under weak fairness: a committed round is always finished
 *   (the state moves past it).
 *   ahead_old is the early wait before the fix, which only slept: with W
 *   killed after arriving and R after its commit, X sleeps for ever.
 * recur, recur_old (issue 17.2): identities that recur. X's slot may be
 *   reclaimed at any moment (X killed, or stalled past its grace: X goes
 *   on as a stale actor) and registered by a newcomer with X's recycled
 *   pid, live and never arriving. A record names the registration that
 *   arrived (gen); a stale X's arrival check fails (VIGIL_ELOST), and a
 *   record it stores after a check that passed names its own, gone,
 *   registration. recur_old is the record (epoch, pid): the newcomer has
 *   X's pid, X's record counts as its arrival, and the round releases
 *   without it (the ghost assertion `un == 0`).
 *
 * Properties (asserts): a waiter told VIGIL_ETIMEDOUT was counted by no
 * release; with bound handles only, every peer the committing judgement
 * saw live had its record, and every live registration it saw had
 * arrived (the ghost `un`, the truth the rule stands for); one commit per
 * round, the state moves only after it, so one VIGIL_SERIAL (the
 * committer's, unless it was killed: a finisher gets 0).
 *
 * Liveness is read at each slot read (READLIVE): a process's own beats
 * (keep_beating) are among the values a read of X's slot may give.
 */
/*
 * What this model leaves out, and why that is safe.
 *
 * - The sleeping. A waiter here blocks on `ep != E` and Spin wakes it at
 *   the first change: no futex, no `sleepers` and `wake` words, no spin
 *   and yields. The sleep is liveness only, and bounded: every sleeper
 *   wakes at least once a slice (50 ms at most) and judges again, so a
 *   lost wake costs a slice, never a round nor a property checked here.
 *   The wake's own pairing (sleepers raised before the state is reread,
 *   read after the state moves) is a Dekker argument on seq_cst accesses,
 *   told beside wake_sleepers and sleep_once in src/barrier_wait.c, not
 *   checked here (make mutate lists its weakening as argued).
 * - Memory orders. Spin interleaves whole steps: sequential consistency.
 *   Every access the safety argument rests on (the gate, the state word,
 *   the records) is seq_cst in the C, which C11 gives exactly that total
 *   order; the heartbeat words are relaxed in the C and are a moment's
 *   estimate here too (below).
 * - The heartbeat table. No ticks, beats or grace: a read of a slot's
 *   liveness may give live or stale (X's, or every one with FLIPALL), and
 *   a killed process's slot lapses once, at some moment. Any schedule of
 *   ticks, beats and reads in the C gives a sequence of answers among
 *   those, so every interleaving the C can show is one Spin explores.
 * - One step per slot for the tally's record and liveness loads, which
 *   are separate loads in the C. Between them a record can only grow by
 *   an arrival (the judgement undercounts: it only waits longer) or be
 *   taken back by a withdrawal, whose gate bump then fails the commit
 *   (the gate was loaded before); a slot's registration and liveness
 *   are read in the C as one SeqLock snapshot. So merging them hides
 *   nothing.
 * - Sizes: three processes, two rounds (one in most runs), one retry, one
 *   recurrence. Each round's words (gate, state, records) are reset or
 *   installed over the round before's, which the two-round runs cover
 *   (a stale gate, late judges and withdrawers of a passed round); more
 *   processes are more copies of the same steps. The epoch's wrap, the
 *   31-bit withdrawal count and peers that scribble the file are the
 *   tests' (test_wrap_safe, test_scribbled_records, test_scribbled_header).
 * - The newcomer in a recycled slot is passive: it never arrives or
 *   withdraws. Its own arrival would be a record naming its own
 *   registration; a stale actor can never write over such a record (its
 *   record CAS in the C refuses a record of a later registration and
 *   returns VIGIL_ELOST), which test_barrier_identity.c shows with real
 *   processes, a recycled pid and a stale handle.
 * - The release record (model/barrier_info.pml). A judgement that finds
 *   the round complete judges it again while it writes itself into its
 *   place, and commits only if that pass finds it complete too; the
 *   tally here is that second pass (both read after the gate's load, so
 *   the argument is the same for it; the first only spares a ticket to
 *   judgements that fail). The committed gate's low bits then carry the
 *   judgement's ticket in place of the withdrawal count: no step here
 *   reads the count of a committed gate (a withdrawal that finds it
 *   committed has passed).
 * - Callers ahead: only X, one round ahead. A caller further ahead does
 *   the same finish at every round it finds committed (one step per
 *   wake), which is this step repeated.
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
#elif defined(AHEAD)
#define K :: i != X -> goto dead   /* X, ahead, is the one that lives on */
#else
#define K :: goto dead
#endif

/* A record of slot j stands for an arrival at E of the slot's current
 * registration: the record names the registration (gen) that arrived.
 * OLD_RECORD: it named a pid, which the newcomer in X's slot shares. */
#ifdef OLD_RECORD
#define ARRIVED(j) (rec[j] == E + 1)
#else
#define ARRIVED(j) (rec[j] == E + 1 && rgen[j] == reg[j])
#endif
/* withdraw's CAS: the record is still this arrival's (i's gen 1) */
#ifdef OLD_RECORD
#define MINE(i) (rec[i] == E + 1)
#else
#define MINE(i) (rec[i] == E + 1 && rgen[i] == 1)
#endif
/* the truth: the slot's current registration arrived at E (ghost) */
#define TRULY(j) (rec[j] == E + 1 && rgen[j] == reg[j])

/* complete(): the rule on the state's count sn and the tally m */
#ifdef QUORUM
#define TALLY(j) (ARRIVED(j) && lv)       /* m = rec_live */
#define RULE (sn + m >= QUORUM)           /* unbound + rec_live >= quorum */
#else
#define TALLY(j) (!ARRIVED(j) && lv)      /* m = live - rec_live */
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
#define FLIPS(j) (j == X && !killed[j] && !recycled)
#endif
#define READLIVE(j) if :: FLIPS(j) -> lv = true :: FLIPS(j) -> lv = false :: !FLIPS(j) -> lv = live[j] fi

/* tally, one slot: its record and liveness in one step */
#define SLOT(j) \
    if K \
    :: atomic { \
        READLIVE(j); \
        m = m + TALLY(j); \
        if :: ARRIVED(j) && lv -> cnt = cnt | ab(j, recA[j]) :: else fi; \
        if :: lv && !TRULY(j) -> un++ :: else fi; \
        lv = false } \
    fi

byte ep, arr;           /* hdr->state (offset 32): epoch, unbound arrivals */
byte rec[N];            /* records[i]: 0, or e + 1 for (e, gen of the registration that arrived) */
byte rgen[N];           /* records[i]'s gen (1: the first registration, 2: X's newcomer) */
byte reg[N] = 1;        /* the gen of slot i's registration now (vigil_slot_gen) */
bool recycled;          /* X's slot went to a newcomer with X's pid */
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

#ifdef LTL_FINISH
ltl finished { [] ((gc && gep == ep) -> <> (gep != ep)) }
#elif defined(LTL)
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
    byte un;                  /* ghost: live registrations seen that had not arrived */
    bool lv;                  /* one slot's liveness, inside a tally step */

#ifdef AHEAD
    if :: i == X -> E = 1 :: else fi;   /* X calls at round 1, the barrier at 0 */
#endif
round:
    if :: E == R -> goto fin :: else fi;
    /* barrier_wait: an epoch that has passed returns at once; the early
     * wait sleeps until the barrier reaches E */
end_early:
    if K
    :: ep > E -> goto next
    :: ep == E
#ifndef OLD_AHEAD
    /* finish_committed: a round before ours whose gate is committed */
    :: atomic { ep < E && gep == ep && gc -> ep = ep + 1; arr = 0; inarr = 0 }; goto end_early
#endif
    fi;
    /* arrival: bound, the check of the registration (VIGIL_ELOST when it
     * is gone), then the record CAS naming it (seq_cst); unbound, +1 by
     * CAS. Every process here is its slot's first registration, gen 1. */
    if
    :: b ->
#ifndef OLD_RECORD
        if K :: atomic { reg[i] != 1 -> goto fin } :: reg[i] == 1 fi;
#endif
        if K :: atomic { rec[i] = E + 1; recA[i] = a; rgen[i] = 1 } fi
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
    :: else -> sn = 0; m = 0; cnt = 0; un = 0; gk = 0; goto await
    fi;
    /* the commit: CAS of the gate from (E, gk) to (E, COMMITTED, gk) */
    if K
    :: atomic {
        if
        :: gep == E && !gc && gn == gk ->
            gc = true;
            assert((cnt & tout[E]) == 0);   /* counts no one told ETIMEDOUT */
#if defined(ALLBOUND) && !defined(QUORUM)
            assert(m == 0);                 /* every slot seen live had its record */
            assert(un == 0);                /* every live registration seen had arrived */
#endif
            assert(committer[E] == 0);
            committer[E] = i + 1;
            counted[E] = cnt
        :: !(gep == E && !gc && gn == gk)   /* lost to a moving gate */
        fi;
        sn = 0; m = 0; cnt = 0; un = 0; gk = 0 }
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
        if K :: atomic { if :: MINE(i) -> rec[i] = 0 :: !MINE(i) fi } fi
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
    E = 0; a = 0; ge = 0; gk = 0; gcl = false; sn = 0; m = 0; cnt = 0; un = 0
}

/* A killed process's slot lapses at some moment after its death. With
 * RECUR, X's slot is reclaimed at some moment (X dead, or stalled past
 * its grace) and registered by a newcomer with X's pid: gen 2, live,
 * never arriving (a peer that has not come to the barrier yet). */
active proctype env()
{
end:
    do
    :: atomic { killed[0] && live[0] -> live[0] = false }
    :: atomic { killed[1] && live[1] -> live[1] = false }
    :: atomic { killed[X] && live[X] && !recycled -> live[X] = false }
#ifdef RECUR
    :: atomic { !recycled -> recycled = true; reg[X] = 2; live[X] = true }
#endif
    od
}

init
{
    atomic { run P(0, UNBOUND != 0); run P(1, UNBOUND != 1); run P(X, UNBOUND != X) }
}
