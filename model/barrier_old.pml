/*
 * The epoch barrier as it stood before issue 9's fix: src/barrier_wait.c
 * at commit 8e4f747 (line numbers below are that file's). Spin must find
 * both of its flaws, so these runs expect an error:
 *
 * CHECK timeout | -DNOKILL -DTOUT_PROP                | | -m10000 | error
 * CHECK kill    | -DNOTIMEOUT -DNOFLIP -DLIVE_PROP    | | -m10000 | error
 * CHECK pause   | -DNOTIMEOUT -DNOKILL -DLIVE_PROP    | | -m10000 | error
 *
 * timeout: issue 9 item 1. A waiter that withdrew and returned
 *   VIGIL_ETIMEDOUT was counted by a judgement whose release CAS still
 *   succeeds, because arrivals restored the state value it judged (ABA)
 *   and the withdrawer waited for that judge only a bounded time.
 * kill: issue 9 item 2. A bound arrival killed between its count and its
 *   record stays an anonymous count that stands in for a live bound peer
 *   that has not arrived. No timeouts in this run, so no withdrawal (whose
 *   ABA breaks the same property without a kill: see timeout), and X never
 *   goes stale: only a kill makes a slot lapse.
 * pause: the same window without a kill. A bound arrival paused between
 *   its count and its record until its heartbeat is stale is the same
 *   anonymous count.
 *
 * One round (epoch 0), three bound handles W=0, R=1, X=2, each in its own
 * heartbeat slot. Liveness is the environment's: X may be stale and live
 * again any number of times (a peer that stopped beating and beats again,
 * as with grace 2); a killed process's slot may lapse, once, for good.
 * Every step may instead be the process's death (K below); Spin's
 * interleaving pauses any process for any length of time.
 */
/*
 * What this model leaves out, and why that is safe: it exists to fail.
 * It keeps the old protocol's steps that carry its two flaws (the judge's
 * load then CAS on the state word, the bound arrival's count then record)
 * and abstracts the rest as barrier.pml does (no futex sleep, liveness as
 * the environment's choice, one step per slot's tally). An abstraction
 * that only removes behaviours could hide a flaw but never invent one, so
 * each counterexample it finds is one the old C had: both were reproduced
 * with real processes (test_barrier_kill.c).
 */
#define N 3
#define X 2
#define bit(p) (1 << (p))

#ifdef NOKILL
#define K
#else
#define K :: goto dead
#endif

byte ep;        /* hdr->state (offset 32), epoch half: 0, then 1 once released */
byte arr;       /* hdr->state, arrived half */
bool rec[N];    /* records[i] == (0, owner's pid) */
byte rel;       /* hdr->releasing (offset 48): judges announced at epoch 0 */
bool live[N] = true; /* is_live() of slot i: heartbeat within grace */
bool killed[N];

/* ghost state: what the properties talk about */
byte inarr;     /* processes whose 1 is in arr */
byte tout;      /* processes that returned VIGIL_ETIMEDOUT */
byte counted;   /* processes the release counted */

proctype P(byte i)
{
    byte se, sn;        /* the state value judged (s in try_release) */
    byte lv, rc, rl, j; /* struct tally: live, rec, rec_live */
    byte seen;          /* ghost: live records the tally counted */
    byte cnt;           /* ghost: inarr at the judged load */
    byte unarr;         /* ghost: slots seen live that had not arrived */

    /* barrier_wait: keep_beating (458) makes our slot live, then the
     * arrival CAS (514): +1 at our epoch */
    if K :: live[i] = true fi;
    if K
    :: atomic { ep != 0 -> goto passed }
    :: atomic { ep == 0 -> arr++; inarr = inarr | bit(i) }
    fi;
    /* then the record (527): count first, record second */
    if K :: rec[i] = true fi;

judge:  /* try_release (186); the filter complete(b, s, 0) at 539 is left
         * out: it only skips judgements, and the model may judge anyway */
    /* announce (111): releasing += 1 at our epoch, seq_cst CAS (132) */
    if K :: rel++ fi;
    /* the judgement's first load (190) */
    if K :: atomic { se = ep; sn = arr; cnt = inarr } fi;
    if :: se != 0 -> goto unann :: else fi;
    /* tally (56): records and liveness, one slot a step */
    j = 0;
    do
    :: j < N ->
        if K
        :: atomic {
            lv = lv + live[j];
            if :: rec[j] -> rc++ :: else fi;
            if :: rec[j] && live[j] -> rl++; seen = seen | bit(j) :: else fi;
            if :: live[j] && !(inarr & bit(j)) -> unarr = unarr | bit(j) :: else fi;
            j++ }
        fi
    :: else -> break
    od;
    /* complete (84), the all-live rule, then the release CAS (206) */
    if
    :: sn >= lv && lv - rl <= (sn > rc -> sn - rc : 0) ->
        if K
        :: atomic {
            if
            :: ep == se && arr == sn ->
                ep = 1; arr = 0;
                counted = seen | cnt;
#ifdef TOUT_PROP
                assert((counted & tout) == 0); /* no waiter told ETIMEDOUT is counted */
#endif
#ifdef LIVE_PROP
                assert(unarr == 0); /* every bound peer seen live has arrived */
#endif
                goto serial
            :: !(ep == se && arr == sn)
            fi }
        fi
    :: else
    fi;
unann:  /* unannounce (144) */
    if K :: rel-- fi;
    lv = 0; rc = 0; rl = 0; seen = 0; cnt = 0; unarr = 0; se = 0; sn = 0;

    /* await_change (322): the release, a wake to judge again, or the
     * deadline (then try_release once more at 555, which judge covers) */
    if
    :: ep != 0 -> goto passed
    :: goto judge
#ifndef NOTIMEOUT
    :: goto withdraw
#endif
    fi;

withdraw:   /* withdraw (405) */
    /* clear our record (410) */
    if K :: rec[i] = false fi;
    /* take our 1 back (422); a new epoch means we passed (419) */
    if K
    :: atomic { ep != 0 -> goto passed }
    :: atomic { ep == 0 -> arr--; inarr = inarr & ~bit(i) }
    fi;
    /* wait for announced judges (437-444), but vigil_backoff gives up
     * after about 10 ms: a judge slower than that is not waited for */
    do
    :: rel == 0 || ep != 0 -> break
    :: break
    od;
    /* the last look (446) */
    if K
    :: atomic {
        if
        :: ep != 0 -> goto passed
        :: ep == 0 ->
            tout = tout | bit(i);
#ifdef TOUT_PROP
            assert((counted & bit(i)) == 0)
#endif
        fi }
    fi;
    goto end;
serial:
passed:
end:
    skip;
    goto stop;
dead:
    killed[i] = true;
stop:
    skip
}

/* The heartbeat table as the judges see it: X stale and live again at any
 * time; a killed process's slot lapses at some moment after its death. */
active proctype env()
{
end:
    do
#ifndef NOFLIP
    :: !killed[X] -> live[X] = !live[X]
#endif
    :: atomic { killed[0] && live[0] -> live[0] = false }
    :: atomic { killed[1] && live[1] -> live[1] = false }
    :: atomic { killed[X] && live[X] -> live[X] = false }
    od
}

init
{
    atomic { run P(0); run P(1); run P(X) }
}
