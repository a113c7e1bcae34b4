/*
 * The safe start of a group (vigil_barrier_start, THE START in
 * src/barrier_wait.c): members that register at different times, on a
 * barrier file that may be past round 0, and then wait round after round.
 *
 * CHECK start     |           | -DSAFETY | -m100000 | clean
 * CHECK start_old | -DOLD_START | -DSAFETY | -m100000 | error
 * CHECK late      | -DLATE     | -DSAFETY | -m100000 | clean
 * CHECK late_quorum | -DLATE -DQUORUM_ONLY | -DSAFETY | -m100000 | error
 *
 * Three members M0, M1, M2 (participants 3), each registering (becoming a
 * live peer) at any moment, then starting, then waiting two rounds. With
 * LATE a fourth process joins, as a member restarted or a caller beyond
 * the participants, at any moment, and waits one round.
 *
 * start: vigil_barrier_start. The round the barrier is at is waited by the
 *   quorum rule and the all-live rule at once; a round that passed before
 *   the caller's arrival was in it is no start, and the caller tries again.
 * start_old: the pattern issue 22 found unsafe: every member waits from
 *   round 0 with the all-live rule. A member that registers late finds
 *   rounds released without it (it was not live), and its own waits of
 *   those rounds return at once: it counts rounds apart from the others.
 * late, late_quorum: the joiner's start must not release the group's
 *   round before every live member came (the all-live half of the rule);
 *   with the quorum alone it does.
 *
 * Property (asserts): a round a member waits for (its start, and each
 * after) is released only when every member that waits for it has
 * arrived, and no member finds a round of its own already released
 * without it; so every member's rounds are the same rounds as the
 * others'.
 *
 * What this model leaves out, and why that is safe.
 *
 * - The gate, withdrawals, kills and timeouts: a judgement and its commit
 *   are one step here. barrier.pml proves the judgement-and-commit
 *   protocol under kills, pauses and withdrawals for any rule that is a
 *   function of the arrivals and the live set; the start only chooses
 *   which rule (quorum and all-live), and its question is which round
 *   each member starts from.
 * - Liveness is registration: a member is live from its registration on
 *   and never lapses (a member that dies is barrier.pml's case). A peer
 *   registered in the table that never starts would hold the start back,
 *   as it holds back every all-live round: no numbering error.
 * - Bound arrivals only; unbound ones count the same in both rules.
 * - The file past round 0: the model's barrier starts at round 0, and
 *   no step depends on the round's value but through the state, so a
 *   file at round k is the same model shifted by k.
 */
#define M 3          /* participants */
#ifdef LATE
#define NP 4         /* and a joiner */
#else
#define NP 3
#endif
#define ROUNDS 2     /* rounds each member waits after its start */

byte ep;               /* the barrier's round */
bool live[NP];         /* registered */
byte rec[NP];          /* round + 1 of the arrival standing, 0 none */
byte wants[4 * ROUNDS + 4]; /* ghost: members that will wait round r after their start */
byte first[NP];        /* ghost: each one's first round, + 1 */

/* The release rules at round E: the all-live rule, the quorum of the
 * participants. */
#define ARRIVED(j) (rec[j] == E + 1)
#define ALL_LIVE (!(live[0] && !ARRIVED(0)) && !(live[1] && !ARRIVED(1)) && !(live[2] && !ARRIVED(2)) \
                  && !(NP > 3 && live[NP - 1] && !ARRIVED(NP - 1)))
#define NARRIVED (ARRIVED(0) + ARRIVED(1) + ARRIVED(2) + (NP > 3 && ARRIVED(NP - 1)))

/* One judgement and commit of round E by rule: the state moves on; every
 * member known to wait for E must have arrived. */
#define RELEASE(rule) \
    atomic { \
        ep == E && (rule) -> \
        assert(!(wants[E] & 1) || ARRIVED(0)); \
        assert(!(wants[E] & 2) || ARRIVED(1)); \
        assert(!(wants[E] & 4) || ARRIVED(2)); \
        assert(!(wants[E] & 8) || ARRIVED(NP - 1)); \
        ep = E + 1 }

proctype P(byte i; byte rounds)
{
    byte E, k;
    /* register, bind; the joiner comes while the group is at round 1 */
end_join:
    if
    :: i < M -> live[i] = true
    :: atomic { i >= M && ep == 1 -> live[i] = true }
    fi;
#ifdef OLD_START
    E = 0;                                 /* wait from round 0 */
#else
start:
    E = ep;                                /* the round the barrier is at */
#endif
    atomic { first[i] = E + 1; k = 0;      /* ghost: its rounds, from here */
             do :: k < rounds + 1 -> wants[E + k] = wants[E + k] | (1 << i); k++ :: else -> break od; k = 0 };
    atomic { if :: ep > E -> goto passed :: else -> rec[i] = E + 1 fi };
    /* judge, or wait for the state to move */
    if
#ifdef OLD_START
    :: RELEASE(ALL_LIVE)
#elif defined(QUORUM_ONLY)
    :: RELEASE(NARRIVED >= M)
#else
    :: RELEASE(ALL_LIVE && NARRIVED >= M)
#endif
    :: ep > E
    fi;
    goto rounds_;
passed:
#ifndef OLD_START
    /* no start: the round passed before our arrival; try the next */
    atomic { k = 0; do :: k < rounds + 1 -> wants[E + k] = wants[E + k] & ~(1 << i); k++ :: else -> break od; k = 0 };
    goto start;
#else
    /* the old wait of round 0 returns at once: a round of ours that
     * released without us */
    assert(false);
#endif
rounds_:
    /* then plain waits: rounds E + 1 .. E + rounds */
    do
    :: k < rounds ->
        E++; k++;
        /* a round after our start cannot have released without us */
        atomic { assert(ep <= E); rec[i] = E + 1 };
        if
        :: RELEASE(ALL_LIVE)
        :: ep > E
        fi
    :: else -> break
    od;
    live[i] = false                        /* unregister */
}

init
{
    atomic {
        run P(0, ROUNDS); run P(1, ROUNDS); run P(2, ROUNDS);
#ifdef LATE
        run P(3, 1);
#endif
    }
}
