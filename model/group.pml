/*
 * Groups on etcd (src/group/group_units.c and group_barrier.c, THE
 * PROTOCOL in each): the claim of a work unit and the transaction that
 * commits a barrier round, with members killed, revoked and stale.
 *
 * CHECK claim     | -DCLAIM                  | -DSAFETY | -m100000 | clean
 * CHECK byname    | -DCLAIM -DMUT_BYNAME     | -DSAFETY | -m100000 | error
 * CHECK lostreply | -DCLAIM -DOLD_DOUBT      | -DSAFETY | -m100000 | error
 * CHECK round     | -DROUND                  | -DSAFETY | -m100000 | clean
 * CHECK ahead     | -DROUND -DM=2 -DR=2 -DAHEAD | -DSAFETY | -m100000 | clean
 * CHECK nogate    | -DROUND -DMUT_NOGATE     | -DSAFETY | -m100000 | error
 * CHECK nojoins   | -DROUND -DMUT_NOJOINS    | -DSAFETY | -m100000 | error
 *
 * etcd is the global state below, and every txn of the C is one atomic
 * step here (etcd applies a txn at one revision, in one total order of
 * revisions); every read of the C that is one range or one txn is one
 * atomic snapshot. Between any two of a member's steps it may be paused
 * for ever (a process killed: it simply takes no more steps) and its lease
 * may be revoked (the agent, or the TTL: the revoker below), after which
 * the member goes on as a stale actor whose every txn must fail. A member
 * key's incarnation (its create_revision, the join revision) is a number
 * that never recurs; the member's name recurs (claim: the same name joins
 * again in a new process while the old one is stale).
 *
 * claim: two names, the second joining twice (a new process under the old
 * name, the old one going on stale), two units, each member taking a unit
 * and then finishing it or giving it back, any number of times; one lease
 * revoked at any step. Asserted: a unit is done at most once; a done or a
 * give-back lands only for the claim the finisher made itself (its own
 * incarnation, its own token), never for a claim of another, whatever its
 * name; at the end, once every process has finished what it knew it
 * held, every unit is done or in the set and unowned (no unit lost, and
 * none held by a member that does not know it holds it). Every request of
 * a member may go unanswered: lost before etcd (nothing happens), or
 * applied with its answer lost. An unanswered claim is resolved before
 * the member claims again, by its fence (src/group/group_fence.c: a txn
 * that moves the fence, or finds it moved by the claim, whose id the
 * claim's value carries; here, where nothing lands late, one atomic look
 * at whether the claim landed); an unanswered done or give-
 * back is sent again until answered (guarded, it lands at most once).
 * byname: the done and the give-back compare the owner's name instead of
 * the claim (no fence, no token): the stale process finishes its
 * successor's claim. Spin finds it.
 * lostreply: the steps before the fix: an unanswered claim or done is
 * taken for a failure and the member goes on. A claim that landed, or a
 * done that did not, leaves the unit owned by a live member that will
 * never finish it (the chaos run's drain then waits for ever). Spin finds
 * it.
 *
 * round: three members, two rounds; the third joins at any moment (after
 * some rounds may have passed). Each member arrives at a round, waits,
 * judges and commits, or times out and withdraws, and arrives again;
 * one lease revoked at any step. Asserted at every commit: no member the
 * judgement counted has withdrawn since (a waiter that timed out is never
 * counted); every live member at the commit has arrived (nobody is
 * released over a live member who has not arrived); one commit per round;
 * at most one VIGIL_SERIAL returned per round.
 * ahead: two members, two rounds, the second joining late; the first may
 * arrive at round 1 while round 0 gathers (its arrival counts for both),
 * and the serial of round 0 then goes to a caller of round 0.
 * nogate, nojoins: the commit without its gate comparison (a withdrawal
 * after the judgement is counted) or without its joins comparison (a
 * member that joined after the judgement is released over). Spin finds
 * both.
 *
 * What this model leaves out, and why that is safe:
 * - Requests delivered late (after the member's later ones) or twice:
 *   group_net.pml, with the member's fence (src/group/group_fence.c).
 * - etcd itself: linearizable txns over a revision order are etcd's
 *   contract (raft). Unanswered requests are modelled in the claim (above:
 *   the step happens or not, and the member is not told). In the round
 *   they are the step happening or not: an arrival, a withdrawal or a
 *   commit that goes unanswered makes the C return an error, and a caller
 *   that calls again for the round finds it released (0, or VIGIL_SERIAL
 *   when the release named it and no earlier call of its was told the
 *   round) or arrives again on the round as it reads it; a commit is
 *   judged afresh. The model's members take those same steps again.
 * - The candidates' reading in take: a claim's comparisons decide, the
 *   reading only picks which unit to try; here a member tries any unit.
 * - Counting names/ and arrivals with count_only ranges: the model judges
 *   on the sets, as the commit does (it reads every name and arrival and
 *   checks each name has an arrival); the counts only decide whether to
 *   judge at all.
 * - Watches, wake-ups and the look every third of the TTL: they decide
 *   when a member judges, never what it may commit; here a member may
 *   judge at any step, which covers every timing the wake-ups allow.
 * - The serial's rule among several callers of a round (the committer if
 *   its call is the round, else the counted caller of lowest join
 *   revision): one record names one serial, and a member has one wait at
 *   a time; the model names the committer or the lowest caller the same.
 * - Leases lapsing at their TTL vs. revoked by the agent: both delete the
 *   member key, the name, the claims and the arrivals in one revision,
 *   which is the revoker's one atomic step.
 * - More members, rounds and units: each property is about one unit, or
 *   one round and the members counted in it; two and three members with a
 *   revoke and a late join reach every interleaving of one stale actor,
 *   one newcomer and one caller ahead against the others.
 */

#ifdef CLAIM
#define M 3       /* processes: name 0; name 1, then name 1 again (process 2) */
#define U 2
#ifndef TAKES
#define TAKES 1   /* takes per process */
#endif
#else
#ifndef M
#define M 3       /* members; the last joins late */
#endif
#ifndef R
#define R 1       /* rounds */
#endif
#endif

byte inc[M];             /* members/<lease>: the incarnation, 0 none (name n's key, by process) */
byte nextinc = 1;
bit  revoked;            /* the one revoke done */

#ifdef CLAIM
/* ---- the claim ------------------------------------------------------------- */
byte owner[U];           /* work/owners/<u>: the claimant's incarnation, 0 none */
byte tok[U];             /* its create_revision */
byte non[U];             /* its value's id */
bit  inset[U];           /* work/units/<u> */
byte done[U];            /* ghost: dones that landed */
byte rev = 1;
byte name_of[M];         /* process -> name */
byte name_of_inc[5];     /* incarnation -> name (byname: the owner's name as the key holds it) */

#define CLAIMABLE (inc[p] == myinc && owner[u] == 0 && inset[u])
#ifdef MUT_BYNAME
#define OURS (owner[u] != 0 && name_of_inc[owner[u]] == name_of[p])
#else
#define OURS (inc[p] == myinc && owner[u] == myinc && tok[u] == mytok)
#endif

/* One request's fate after its step: its answer may be lost. */
#define MAYBE_UNANSWERED if :: skip :: answered = 0 fi

proctype member(byte p)
{
    byte myinc, u, mytok, takes, mynon;
    bit ok, answered;
    atomic { /* join (group.c, join_txn) */
        inc[p] = nextinc;
        nextinc++;
        myinc = inc[p];
        name_of_inc[myinc] = name_of[p]
    }
    do
    :: takes < TAKES -> /* take: the candidates, then the claim (group_units.c, claim) */
        takes++;
        if
        :: u = 0
        :: u = 1
        fi;
        mynon++;
        atomic {
            answered = 1;
            ok = 0;
            if
            :: CLAIMABLE ->
                rev++;
                owner[u] = myinc;
                tok[u] = rev;
                non[u] = mynon;
                mytok = rev;
                ok = 1
            :: !CLAIMABLE -> skip
            :: answered = 0 /* the request lost before etcd */
            fi;
            MAYBE_UNANSWERED
        }
        if
        :: !answered ->
#ifdef OLD_DOUBT
            ok = 0 /* an error: taken for no unit */
#else
            do /* the claim in doubt (group_fence.c, resolve), resolved until answered */
            :: atomic {
                ok = inc[p] == myinc && owner[u] == myinc && non[u] == mynon;
                if
                :: ok -> mytok = tok[u]
                :: else -> skip
                fi
               };
               break
            :: answered = 0 /* the read unanswered: again */
            od
#endif
        :: else -> skip
        fi;
        answered = 0;
        if
        :: ok ->
            do /* done or give-back (group_units.c, finish), sent until answered */
            :: atomic {
                answered = 1;
                if
                :: OURS ->
                    assert(owner[u] == myinc && tok[u] == mytok); /* our own claim, nobody else's */
                    owner[u] = 0;
                    inset[u] = 0;
                    done[u]++;
                    assert(done[u] == 1)
                :: !OURS -> skip
                :: answered = 0
                fi;
                MAYBE_UNANSWERED
               };
#ifdef OLD_DOUBT
               break
#else
               if
               :: answered -> break
               :: else -> skip
               fi
#endif
            :: atomic { /* giveback */
                answered = 1;
                if
                :: OURS ->
                    assert(owner[u] == myinc && tok[u] == mytok);
                    owner[u] = 0
                :: !OURS -> skip
                :: answered = 0
                fi;
                MAYBE_UNANSWERED
               };
#ifdef OLD_DOUBT
               break
#else
               if
               :: answered -> break
               :: else -> skip
               fi
#endif
            od;
            answered = 0
        :: else -> skip
        fi;
        ok = 0;
        mytok = 0
    :: break
    od
}

/* Revokes one member's lease at any moment: its key and its claims go in
 * one revision; its process goes on, stale. */
proctype revoker()
{
    byte p, u;
    if
    :: p = 0
    :: p = 1
    :: p = 2
    :: goto none
    fi;
    atomic {
        inc[p] != 0 && !revoked ->
        revoked = 1;
        u = 0;
        do
        :: u < U ->
            if
            :: owner[u] == inc[p] -> owner[u] = 0
            :: else -> skip
            fi;
            u++
        :: else -> break
        od;
        inc[p] = 0
    };
none:
    skip
}

init {
    byte u;
    atomic {
        inset[0] = 1;
        inset[1] = 1;
        name_of[0] = 0;
        name_of[1] = 1;
        name_of[2] = 1;
        run member(0);
        run member(1);
        run revoker()
    }
    /* Name 1 joins again in a new process once its first is revoked or
     * has joined: the old process may go on, stale. */
    (inc[1] != 0 || revoked) -> run member(2);
    (_nr_pr == 1) ->
    u = 0;
    do
    :: u < U ->
        /* no unit lost: done, or in the set and free (every process has
         * finished what it knew it held: a claim left is one its member
         * does not know of, which it would hold for its whole life) */
        assert(done[u] == 1 || (inset[u] && owner[u] == 0));
        u++
    :: else -> break
    od
}

#else
/* ---- the round ----------------------------------------------------------------- */
bit  name[M];            /* names/<name>: live vigil member */
byte round;              /* GROUP/round: the round gathering */
byte gate[R];            /* rounds/<r>/gate's mod_revision (a count suffices) */
byte joins;              /* GROUP/joins's mod_revision */
bit  arr[R * M];         /* rounds/<r>/a/<name> */
byte call[R * M];        /* its value's call round */
byte ghost[R * M];       /* 0 none, 1 arrived, 2 withdrew (timed out), 3 died with it */
byte serial[R];          /* the record's serial: process + 1 */
byte serials[R];         /* VIGIL_SERIAL returned */
byte commits[R];

#define A(r, p) ((r) * M + (p))

proctype member(byte p)
{
    byte myinc, r, c, n, x, g0, j0, q;
    bit ok, complete, timedout;
    byte seen;           /* the judgement's counted set, a bit per process */
    atomic { /* join */
        inc[p] = nextinc;
        nextinc++;
        myinc = inc[p];
        name[p] = 1;
        joins++
    }
    r = 0;
    do
    :: r < R ->
        c = r;
#ifdef AHEAD
        if
        :: r + 1 < R && p == 0 -> c = r + 1 /* a caller ahead */
        :: true
        fi;
#endif
arrive:
        n = round;
        if
        :: c < n -> goto released
        :: else -> skip
        fi;
        atomic { /* arrive (group_barrier.c, each_round) */
            if
            :: inc[p] == myinc && round == n ->
                x = n;
                do
                :: x <= c -> arr[A(x, p)] = 1; call[A(x, p)] = c; ghost[A(x, p)] = 1; x++
                :: else -> break
                od;
                x = 0;
                ok = 1
            :: else -> ok = 0
            fi
        }
        if
        :: !ok && inc[p] != myinc -> goto out /* VIGIL_ELOST */
        :: !ok && inc[p] == myinc -> goto arrive
        :: ok -> skip
        fi;
        do
        :: /* judge (one reading), then commit (group_barrier.c, commit_once) */
            atomic {
                n = round;
                if
                :: n < R ->
                    g0 = gate[n];
                    j0 = joins;
                    complete = 1;
                    seen = 0;
                    q = 0;
                    do
                    :: q < M ->
                        if
                        :: name[q] && !arr[A(n, q)] -> complete = 0
                        :: name[q] && arr[A(n, q)] -> seen = seen | (1 << q)
                        :: else -> skip
                        fi;
                        q++
                    :: else -> break
                    od;
                    q = 0
                :: else -> complete = 0
                fi
            }
            if
            :: c < n -> g0 = 0; j0 = 0; seen = 0; complete = 0; goto released
            :: complete && n <= c ->
                atomic {
                    if
#ifdef MUT_NOGATE
                    :: inc[p] == myinc && round == n && joins == j0 ->
#elif defined(MUT_NOJOINS)
                    :: inc[p] == myinc && round == n && gate[n] == g0 ->
#else
                    :: inc[p] == myinc && round == n && gate[n] == g0 && joins == j0 ->
#endif
                        q = 0;
                        do
                        :: q < M ->
                            /* never counted after timing out */
                            assert(!(seen & (1 << q)) || ghost[A(n, q)] != 2);
                            /* no live member released over */
                            assert(!name[q] || ghost[A(n, q)] == 1);
                            q++
                        :: else -> break
                        od;
                        commits[n]++;
                        assert(commits[n] == 1);
                        /* the serial: us if our call is n, else the lowest counted caller of n */
                        if
                        :: c == n -> serial[n] = p + 1
                        :: else ->
                            q = 0;
                            do
                            :: q < M && (seen & (1 << q)) && call[A(n, q)] == n -> serial[n] = q + 1; break
                            :: q < M && !((seen & (1 << q)) && call[A(n, q)] == n) -> q++
                            :: q >= M -> break
                            od
                        fi;
                        round = n + 1;
                        q = 0;
                        do
                        :: q < M -> arr[A(n, q)] = 0; q++
                        :: else -> break
                        od
                    :: else -> skip
                    fi;
                    g0 = 0; j0 = 0; seen = 0; complete = 0; q = 0 /* judged: forget it */
                }
            :: else -> g0 = 0; j0 = 0; seen = 0; complete = 0; q = 0
            fi
        :: !timedout -> /* time out: withdraw (group_barrier.c, withdraw) */
            timedout = 1;
            n = round;
            if
            :: c < n -> goto released /* released first: counted */
            :: else -> skip
            fi;
            atomic {
                if
                :: inc[p] == myinc && round == n ->
                    x = n;
                    do
                    :: x <= c ->
                        arr[A(x, p)] = 0;
                        ghost[A(x, p)] = 2;
                        gate[x]++;
                        x++
                    :: else -> break
                    od;
                    x = 0;
                    ok = 1
                :: else -> ok = 0
                fi
            }
            if
            :: ok -> goto arrive /* VIGIL_ETIMEDOUT; it arrives again */
            :: !ok && inc[p] != myinc -> goto out
            :: else -> skip
            fi
        od;
released:
        atomic {
            if
            :: serial[c] == p + 1 -> serials[c]++; assert(serials[c] <= 1)
            :: else -> skip
            fi
        }
        r = c + 1
    :: else -> break
    od;
out:
    skip
}

proctype revoker()
{
    byte p, x;
    if
    :: p = 0
    :: p = 1
    :: M > 2 -> p = 2
    :: goto none
    fi;
    atomic {
        inc[p] != 0 ->
        inc[p] = 0;
        name[p] = 0;
        x = 0;
        do
        :: x < R ->
            if
            :: arr[A(x, p)] -> arr[A(x, p)] = 0; ghost[A(x, p)] = 3
            :: else -> skip
            fi;
            x++
        :: else -> break
        od
    };
none:
    skip
}

init {
    atomic {
        run member(0);
#if M > 2
        run member(1);
#endif
        run revoker()
    }
    /* The last joins at any moment: perhaps after some rounds passed. */
    if
    :: true
    :: round > 0
    fi;
    run member(M - 1)
}
#endif
