/*
 * Groups on etcd with the network as an adversary (src/group/group_fence.c,
 * THE RULE; group_units.c and group_barrier.c, "LATE AND TWICE"): every
 * request of a member may be held by the network and delivered at any
 * later moment (after the member's later requests), or delivered twice,
 * and its answer may be lost. group.pml checks the same txns against
 * kills, revokes and stale members, with requests that are applied or not.
 *
 * CHECK claim_net   | -DCLAIM -DFAULTS=5 -DUNAVAILABLE | -DSAFETY | -m400000 | clean
 * CHECK claim_late  | -DCLAIM -DOLD_NET          | -DSAFETY | -m200000 | error
 * CHECK nodoubt     | -DCLAIM -DMUT_NODOUBT      | -DSAFETY | -m200000 | error
 * CHECK unavailable_old | -DCLAIM -DUNAVAILABLE -DOLD_UNAVAILABLE | -DSAFETY | -m200000 | error
 * CHECK round_net   | -DROUND -DFAULTS=5 -DUNAVAILABLE | -DSAFETY | -m400000 | clean
 * CHECK round_late  | -DROUND -DOLD_NET          | -DSAFETY | -m200000 | error
 * CHECK withdraw_late | -DROUND -DOLD_NET -DLATE_WITHDRAW | -DSAFETY | -m200000 | error
 *
 * etcd is the global state below, and each txn one atomic step (etcd's
 * contract: linearizable txns in one order of revisions). The network is
 * one slot: when the member P sends a request, a copy of it may go into
 * the slot (if free): the client gave up on it (or it was duplicated) and
 * the copy is delivered later by net(), at any moment, against whatever
 * etcd then holds, or dropped. Independently the request is applied now
 * and answered, applied now with its answer lost, or not applied now (the
 * client's resend to another member, or nothing). "Held, then delivered
 * late" is a copy in the slot and the request applied now, answered (the
 * resend landed) or not (given up); "delivered twice" is a copy in the
 * slot and the request applied now: the slot's copy is a second
 * application. Whether a copy went to the slot is what the C calls
 * greply.doubt (an attempt failed after it may have reached a member).
 * With UNAVAILABLE a copy may also go to the slot with an answer: the
 * member that holds it said Unavailable ("request timed out"),
 * DeadlineExceeded or a 5xx page, having proposed it; the request loop
 * (etcd_http.c, call_endpoints) counts that answer as doubt too.
 *
 * Every write of P carries P's fence: it compares fv (the version of
 * GROUP/fence/<hex>) with the version P knows, and on success moves it
 * and puts its id there; the failure branch reads fence's version and id.
 * A write not answered, or refused while a copy may still land, is
 * resolved (a RESOLVE txn: the fence compared and moved, or found moved
 * with the write's id: landed) before P is told, or goes on being
 * resolved before P's next write.
 *
 * claim: P takes the unit (claim), then finishes it (done) or gives it
 * back, TAKES times; Q, another member whose requests are never delayed,
 * claims it and finishes or gives it back once. Asserted: a unit is done
 * at most once; at the end (every process done, the slot delivered or
 * dropped), no unit is owned by P, who finished everything it knew it
 * held (issue 25.1: a claim held by a frozen member, landed elsewhere,
 * given back, then applied: the unit owned on a live member's lease, and
 * the member does not know it).
 * claim_late: the txns before the fence (no fence compare; an unanswered
 * claim resolved by reading the claim, group.pml's claim): Spin finds
 * issue 25.1.
 * nodoubt: the fence, but a refused answer taken as final even when a copy
 * may still land (no resolution after greply.doubt): Spin finds P owning
 * the unit Q gave back.
 * unavailable_old: the request loop before the outside review of issue
 * 25, where an answer of Unavailable left no doubt (only transport
 * failures did): a claim so answered by one member and refused by the
 * next was taken as busy for good, and Spin finds P owning the unit Q
 * gave back. (A round's writes are refused only once the round moved,
 * which no late copy undoes: round_net with UNAVAILABLE stays clean, and
 * the old loop finds nothing there.)
 *
 * round: P and Q, round 0. P arrives (through the network), waits, and
 * may time out and withdraw (through the network), then arrive again in
 * a second call; Q arrives and judges and commits. Asserted at a commit:
 * a member it counts was not told VIGIL_ETIMEDOUT since its last arrival
 * (issue 25.2); and (withdraw_late) a withdrawal deletes only the arrival
 * of the call that sent it. round_late, withdraw_late: the txns before the
 * fence; Spin finds each.
 *
 * What this model leaves out, and why that is safe:
 * - Kills, revokes, stale members and names that recur: group.pml, with
 *   the same txns; a lease revoked makes every write of its member fail
 *   (the fence key and the member key go with the lease), which only
 *   ends P's writes early here.
 * - More than one slot: a copy held while another is held is a second
 *   late copy of the same kind; each copy of a write compares the fence
 *   version P knew when it sent it, and P sends nothing new until it
 *   knows the version (one write at a time, m->lock), so what one slot
 *   shows for one copy holds for each.
 * - A member's threads: they share the member's fence and send one write
 *   at a time (m->lock), so to etcd and the network they are one P. What
 *   one thread leaves another is m->doubt (resolved before the next
 *   write, as P does here) and m->found, a claim of another thread found
 *   landed by a resolution: kept for the next take, and no claim is sent
 *   while it is kept (gop_run answers the found unit instead), so it holds
 *   at most one unit and none is dropped (etcd_test_group_doubt.c,
 *   test_found_kept).
 * - The reads (candidates, a round's look and judgement): a read changes
 *   nothing, and its copies, late or twice, change nothing either.
 * - The judgement and the commit as one step: group.pml takes them apart
 *   (the gate and joins compares); here only the late arrival matters,
 *   and a commit counts whatever arrivals it sees.
 * - Join, leave, add, and the lock and session calls of etcd.c and
 *   etcd_session.c: idempotent by construction (a lease revoked when the
 *   caller gives up, a create revision that never recurs, a proclaim's
 *   mod_revision), each checked in tests/etcd_test_net.c held then
 *   delivered late and delivered twice.
 * - Resolutions unanswered for ever: P keeps the doubt and resolves it
 *   before its next write (here: it tries until answered; a loop that is
 *   cut short only delays the same steps).
 * - At most FAULTS faults in a run (5 in the clean runs, 3 where the old
 *   steps fail): a copy put in the slot, an answer lost, a request not
 *   applied each count one. Every fault the C can meet is one of these;
 *   five reach a held claim landing after a done, a give-back and a
 *   second claim, each with a resolution of its own unanswered.
 */

#define NONE     0
#define CLAIMOP  1
#define DONEOP   2
#define GIVEOP   3
#define RESOLVE  4
#define ARRIVE   5
#define WITHDRAW 6

#ifndef FAULTS
#define FAULTS 3     /* faults of the network in a run: copies held, answers lost */
#endif
byte faults;

/* etcd */
byte fv = 1;         /* GROUP/fence/<P>'s version (put by P's join) */
byte fval;           /* its value: the id of the write that last moved it */
byte rev = 1;

/* the network's slot: a copy of one of P's requests */
byte nk;             /* kind, NONE: empty */
byte nfv, nid, narg, ntok;

/* a request's fate, set by send() */
bit applied, answered, okr, doubt;
byte seenfv, seenval;  /* the failure branch's read of the fence */

#ifdef OLD_NET
#define FENCED(c) true
#define BUMP(i) skip
#else
#define FENCED(c) (fv == (c))
#define BUMP(i) fv++; fval = (i)
#endif

#ifdef CLAIM
#ifndef TAKES
#define TAKES 2
#endif
byte owner;          /* work/owners/u: 0 none, 1 P, 2 Q */
byte tok;            /* its create revision */
byte non;            /* its value's id (P's claims) */
bit  inset = 1;      /* work/units/u */
byte done;           /* ghost: dones that landed */

/* The txn of request (k, cfv, id, ctok) against etcd now: okr. */
inline apply(k, cfv, id, ctok)
{
    okr = 0;
    if
    :: k == CLAIMOP && FENCED(cfv) && owner == 0 && inset ->
        rev++; owner = 1; tok = rev; non = id; BUMP(id); okr = 1
    :: k == DONEOP && FENCED(cfv) && owner == 1 && tok == ctok ->
        owner = 0; inset = 0; done++; assert(done == 1); BUMP(id); okr = 1
    :: k == GIVEOP && FENCED(cfv) && owner == 1 && tok == ctok ->
        owner = 0; BUMP(id); okr = 1
    :: k == RESOLVE && fv == cfv -> fv++; fval = id; okr = 1
    :: else -> skip
    fi;
    seenfv = fv; seenval = fval
}
#else
#define M 2          /* P (0) and Q (1) */
byte round;          /* GROUP/round: the round gathering (0, or 1 released) */
bit  arr[M];         /* rounds/0/a/<name> */
byte acall[M];       /* the call of P whose arrival it is */
bit  inprog;         /* ghost: a call of P goes on (arrived or arriving, not yet told) */
byte tout;           /* ghost: the call of P told VIGIL_ETIMEDOUT last, 0 none */
byte commits;

inline apply(k, cfv, id, call)
{
    okr = 0;
    if
    :: k == ARRIVE && FENCED(cfv) && round == 0 ->
        arr[0] = 1; acall[0] = call; BUMP(id); okr = 1
    :: k == WITHDRAW && FENCED(cfv) && round == 0 ->
#ifdef LATE_WITHDRAW
        /* a withdrawal deletes only its own call's arrival */
        assert(!arr[0] || acall[0] == call);
#endif
        arr[0] = 0; BUMP(id); okr = 1
    :: k == RESOLVE && fv == cfv -> fv++; fval = id; okr = 1
    :: else -> skip
    fi;
    seenfv = fv; seenval = fval
}
#endif

/* P sends request (k, cfv, id, a): its fate, then (atomically with the
 * application now, if any) the answer P gets: answered, okr, seenfv,
 * seenval; doubt when a copy went to the slot. */
inline send(k, cfv, id, a)
{
    atomic {
        doubt = 0;
        if
        :: nk == NONE && faults < FAULTS -> nk = k; nfv = cfv; nid = id; narg = a; doubt = 1; faults++
#ifdef UNAVAILABLE
        :: nk == NONE && faults < FAULTS -> nk = k; nfv = cfv; nid = id; narg = a; faults++;
#ifdef OLD_UNAVAILABLE
            doubt = 0 /* an answer, not a transport failure: no doubt, before the fix */
#else
            doubt = 1 /* proposed by the member that answered, and may still apply */
#endif
#endif
        :: true /* a copy held, or a second; or none */
        fi;
        if
        :: applied = 1; answered = 1
        :: faults < FAULTS -> applied = 1; answered = 0; faults++
        :: faults < FAULTS -> applied = 0; answered = 0; faults++
        fi;
        if
        :: applied -> apply(k, cfv, id, a)
        :: else -> okr = 0
        fi
    }
}

/* The network: delivers the slot's copy at any moment, or drops it. */
proctype net()
{
end:
    do
    :: atomic { nk != NONE -> apply(nk, nfv, nid, narg); nk = NONE }
    :: atomic { nk != NONE -> nk = NONE }
    :: _nr_pr == 2 && nk == NONE -> break /* P and Q done, nothing held */
    od
}

#ifdef CLAIM
/* Q: one claim, then done or giveback; never delayed, never fenced by P's. */
proctype q()
{
    byte t;
    if
    :: atomic { owner == 0 && inset -> rev++; owner = 2; tok = rev; t = rev };
       atomic {
           if
           :: owner == 2 && tok == t -> owner = 0; inset = 0; done++; assert(done == 1)
           :: owner == 2 && tok == t -> owner = 0
           fi
       }
    :: skip /* takes nothing */
    fi
}

proctype p()
{
    byte myfv = 1, ids, id, mytok, takes, k;
    bit holds, landed;
    do
    :: takes < TAKES ->
        takes++;
        /* the claim */
        ids++; id = ids;
        send(CLAIMOP, myfv, id, 0);
        holds = 0;
        if
        :: answered && okr -> holds = 1; mytok = tok; myfv++
#ifdef OLD_NET
        :: answered && !okr -> skip /* busy */
        :: !answered ->
            /* the old doubt: a read of the claim, answered at last */
            atomic { holds = owner == 1 && non == id; if :: holds -> mytok = tok :: else -> skip fi }
#else
        :: answered && !okr && seenval == id -> holds = 1; mytok = tok; myfv = seenfv /* our copy landed first */
#ifdef MUT_NODOUBT
        :: answered && !okr && seenval != id -> skip
#else
        :: answered && !okr && seenval != id && !doubt -> skip /* busy, for good */
        :: answered && !okr && seenval != id && doubt -> goto resolve_claim
#endif
        :: !answered ->
resolve_claim:
            do /* resolve until answered */
            :: ids++;
               send(RESOLVE, myfv, ids, 0);
               if
               :: answered && okr -> myfv++; break /* void */
               :: answered && !okr ->
                   atomic { holds = seenval == id; if :: holds -> mytok = tok :: else -> skip fi };
                   myfv = seenfv; break
               :: !answered -> skip
               fi
            od
#endif
        fi;
        /* done or give-back of what P knows it holds, until it is known landed */
        if
        :: holds -> if :: k = DONEOP :: k = GIVEOP fi
        :: else -> k = NONE
        fi;
        do
        :: k == NONE -> break
        :: k != NONE ->
            ids++; id = ids;
            send(k, myfv, id, mytok);
#ifdef OLD_NET
            if :: answered -> break :: else -> skip fi /* sent again until answered */
#else
            if
            :: answered && okr -> myfv++; break
            :: answered && !okr && seenval == id -> myfv = seenfv; break
            :: answered && !okr && seenval != id -> break /* refused: not ours any more */
            :: !answered ->
                do
                :: ids++;
                   send(RESOLVE, myfv, ids, 0);
                   if
                   :: answered && okr -> myfv++; break /* void: sent again, as a new write */
                   :: answered && !okr -> myfv = seenfv; if :: seenval == id -> k = NONE :: else -> skip fi; break
                   :: !answered -> skip
                   fi
                od
            fi
#endif
        od;
        holds = 0; mytok = 0; id = 0
    :: else -> break
    od
}

init {
    atomic { run net(); run p(); run q() } /* net first: it ends last */
    _nr_pr == 1 ->
    /* P finished every unit it knew it held: one still its own is one
     * it does not know of (given back, then claimed by a late copy) */
    assert(owner != 1)
}

#else

/* A write of P (ARRIVE or WITHDRAW, of call) sent until it is known to
 * have landed (gone = 1) or to have been refused (gone = 0: the round
 * moved); a write found void is sent again. */
inline write(kind)
{
    k = kind;
    do
    :: k == NONE -> break
    :: k != NONE ->
        ids++; id = ids;
        send(k, myfv, id, call);
#ifdef OLD_NET
        if
        :: answered -> gone = okr; break
        :: else -> skip /* the caller calls again: the same txn */
        fi
#else
        if
        :: answered && okr -> myfv++; gone = 1; break
        :: answered && !okr && seenval == id -> myfv = seenfv; gone = 1; break
        :: answered && !okr && seenval != id && !doubt -> gone = 0; break /* the round moved */
        :: answered && !okr && seenval != id && doubt -> goto resolve
        :: !answered ->
resolve:
            do
            :: ids++;
               send(RESOLVE, myfv, ids, 0);
               if
               :: answered && okr -> myfv++; break /* void: sent again */
               :: answered && !okr -> myfv = seenfv; if :: seenval == id -> gone = 1; k = NONE :: else -> skip fi; break
               :: !answered -> skip
               fi
            od
        fi
#endif
    od
}

proctype p()
{
    byte myfv = 1, ids, id, call, k;
    bit gone;
    do
    :: call < 2 ->
        call++;
        inprog = 1;
        write(ARRIVE);
        if
        :: round > 0 -> inprog = 0; break /* released: counted, told so */
        :: true -> /* the wait times out: the withdrawal */
            write(WITHDRAW);
            atomic {
                inprog = 0;
                if
                :: gone -> tout = call /* VIGIL_ETIMEDOUT */
                :: else -> skip /* released first: counted, told so */
                fi
            };
            if
            :: !gone -> break
            :: else -> skip /* and it arrives again */
            fi
        fi
    :: else -> break
    od
}

/* Q arrives, and judges and commits once every name has arrived. */
proctype q()
{
    arr[1] = 1;
end:
    atomic {
        round == 0 && arr[0] && arr[1] ->
#ifndef LATE_WITHDRAW
        /* P counted while a call of its goes on: never after VIGIL_ETIMEDOUT */
        assert(inprog);
#endif
        commits++;
        assert(commits == 1);
        round = 1;
        arr[0] = 0; arr[1] = 0
    }
}

init {
    atomic { run net(); run p(); run q() }
}
#endif
