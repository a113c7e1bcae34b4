/*
 * A queued waiter on etcd deciding from its watch event that it holds the
 * key (src/etcd/recipes/etcd_wait.c: SECOND IN LINE, look, ahead_watch,
 * wait_turn; src/etcd/recipes/etcd_queue.c: vigil_etcd__body_pred,
 * vigil_etcd__parse_pred_first, vigil_etcd__parse_watch_keys). Tests:
 * tests/etcd_test_queue.c, second_* (second_deleted_before_watch for the
 * watch's own step, second_recreated for the late join) and
 * wait_place_deleted. Mutants (scripts/mutants.txt): second_any_ahead,
 * second_blind, second_stale, second_watch_from_now, second_look_any_crev.
 *
 * CHECK second    | -DAHEAD -DHAND -DCOMPACT -DJOINER -DLATE_JOIN | -DSAFETY | -m100000 | clean
 * CHECK alone     |                                   | -DSAFETY | -m100000 | clean
 * CHECK any_ahead | -DAHEAD -DMUT_ANY                 | -DSAFETY | -m100000 | error
 * CHECK blind     | -DHAND -DMUT_BLIND                | -DSAFETY | -m100000 | error
 * CHECK stale     | -DMUT_STALE                       | -DSAFETY | -m100000 | error
 * CHECK from_now  | -DHAND -DMUT_FROM_NOW             | -DSAFETY | -m100000 | error
 * CHECK recreated | -DHAND -DLATE_JOIN -DMUT_NO_CREV  | -DSAFETY | -m100000 | error
 *
 * second: every actor and step below; alone: the holder and W, nothing
 * else (W's own key deleted only by its lease lapsing).
 *
 * KEY's queue under KEY/: the holder H (created first), with AHEAD a
 * waiter A created after H and before W, and W, the waiter modelled; with
 * JOINER a waiter X that joins behind W at any step. etcd is one history
 * of revisions, one event each (a put or a deletion of one key), kept
 * whole in `ev_*` so that a watch can replay it from any revision. Every
 * actor but W is a step of the world at any moment: H releases or is
 * killed (its lease lapses: the same deletion); A leaves; X joins and
 * leaves; with HAND an operator deletes W's key (etcdctl del); with
 * LATE_JOIN a late copy of W's acquire txn (sent again when its reply was
 * lost) lands after that and makes KEY/<hex> again on W's live lease, at
 * a new create revision (the txn's compare only asks that the key be
 * absent); with COMPACT etcd compacts and W's watch is cancelled.
 *
 * W loops: look (one txn, atomic in etcd: our key still ours, that is
 * created at our revision w_rev and on our lease? the two keys created
 * last before it), then, a step of its own, the watch request from the
 * look's revision + 1 (W may be paused there while the world moves, or
 * killed), then the watch read one message (one revision) at a time, as
 * late as the world likes (a lagging member, a slow stream). Its lease:
 * `fresh` while its renewal is not yet due (under 0.32 TTL since the last keepalive was
 * sent); time makes it stale at any step, W paused or not; etcd may
 * expire W's lease only once it is stale (etcd counts the TTL from the
 * keepalive's arrival, after its sending, and TTL > 0.32 TTL). W renews
 * (a keepalive, atomic: refused once the lease is gone) and looks again
 * whenever it likes (the C: at every renewal, and after every event that
 * decides nothing).
 *
 * Asserted when W returns holding the key at revision R: W's key was the
 * lowest create revision under KEY/ at R (etcd's own rule for the holder),
 * its create revision at R is W's token w_rev, and W's lease is alive as
 * it returns. The first two are what the token fences from then on, as
 * for every holder: a token that is not the key's create revision is not
 * the one etcd's holder has.
 *
 * The error runs: any_ahead trusts the deletion of the one ahead when the
 * look found a second key below ours (A leaves while H holds: W returns
 * beside H). blind reads only the one ahead's events, not its own key's
 * (its key deleted by hand, then H releases: W returns holding nothing).
 * stale trusts the event with its renewal overdue (W stopped past its
 * lease: its key lapses after H's deletion, and W returns on a dead
 * lease). from_now asks its watch from its own creation (at = rev + 1 at
 * the request), not from the look's L + 1: W paused between look and
 * watch, its key deleted by hand there, then H releases: the watch never
 * shows the deletion it needed, and W returns holding nothing. recreated
 * has the look check only that W's key exists, not its create revision:
 * the key deleted by hand and made again by the late join, H releases,
 * and W returns a token that is not its key's create revision (or a
 * place behind X that joined in the gap). Spin finds all five.
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - One event a revision. A txn that changes several keys at one
 *     revision comes in one message in etcd (the watch batches by whole
 *     revisions); the C reads a message whole and sends the waiter to
 *     look again when its own key is in it at all, which is the most
 *     cautious order of the same events modelled here one by one.
 *   - Time is the one fact `fresh` carries: W's lease cannot lapse while
 *     its renewal is not yet due. The C checks exactly that (now -
 *     renewed_ns < period) before it trusts the event.
 *   - The look's txn and the keepalive are atomic steps: etcd applies
 *     each at one revision. Their replies lost or late are the handle's
 *     rule (issue 25, model/group_net.pml); a look is a read.
 *   - Endpoints and watch moves are a watch cancelled (COMPACT's step),
 *     which W answers by looking again, as the C does for every end.
 *   - W killed at any step is W never moving again: nothing W returns is
 *     asserted then, and its key goes with its lease (the world's lapse
 *     step, or HAND's deletion); the other actors are modelled by what
 *     they do to the store, so their deaths are their deletions.
 *   - The late join needs W's key gone while its lease lives: HAND's
 *     deletion (a lapse takes the lease too, and a put on a dead lease is
 *     refused). A late copy while the key stands fails its compare and
 *     writes nothing, so it is not a step.
 *   - Three other keys: a holder, one waiter ahead (the pred that is not
 *     the holder), one behind (keys made after the look); more waiters
 *     ahead only repeat A, more behind only repeat X.
 */

#define NREV 12     /* revisions 1..NREV-1 */
#define NONE 255

#define KH 0        /* the holder */
#define KA 1        /* a waiter ahead of W */
#define KW 2        /* W */
#define KX 3        /* a waiter behind W */
#define NK 4

byte rev;                   /* etcd's revision */
bool exists[NK];
byte crev[NK];
byte ev_key[NREV];          /* the event at each revision */
bool ev_del[NREV];
byte lowest_at[NREV];       /* ghost: the holder after each revision (NONE: nobody) */
byte wcrev_at[NREV];        /* ghost: W's key's create revision after each revision (0: none) */
byte w_rev;                 /* W's token: its key's create revision at the join */
bool w_lease = true;        /* W's lease alive in etcd */
bool fresh = true;          /* W's renewal not yet due */
bool canceled;              /* W's watch cancelled (compacted) */
bool w_done;                /* W returned */
bool w_lost;                /* W's place lost (VIGIL_ELOST: a new one, not modelled) */

inline lowest(out) {
    byte k_; out = NONE;
    for (k_ : 0 .. NK - 1) {
        if
        :: exists[k_] && (out == NONE || crev[k_] < crev[out]) -> out = k_
        :: else
        fi
    }
}

/* One event at a new revision: the store and the ghost. */
inline apply(k, del) {
    rev++;
    ev_key[rev] = k; ev_del[rev] = del;
    if
    :: del -> exists[k] = false
    :: else -> exists[k] = true; crev[k] = rev
    fi;
    lowest(lowest_at[rev]);
    wcrev_at[rev] = (exists[KW] -> crev[KW] : 0)
}

active proctype world()
{
    /* revision 1: H; 2: A (with AHEAD); 3: W's join (the acquire txn) */
    atomic {
        apply(KH, false);
#ifdef AHEAD
        apply(KA, false);
#endif
        apply(KW, false);
        w_rev = rev
    }
    do
    :: rev < NREV - 1 && exists[KH] -> atomic { apply(KH, true) }   /* released, or killed and lapsed */
#ifdef AHEAD
    :: rev < NREV - 1 && exists[KA] -> atomic { apply(KA, true) }   /* a waiter ahead leaves */
#endif
#ifdef JOINER
    :: rev < NREV - 1 && !exists[KX] && crev[KX] == 0 -> atomic { apply(KX, false) }
    :: rev < NREV - 1 && exists[KX] -> atomic { apply(KX, true) }
#endif
#ifdef HAND
    :: rev < NREV - 1 && exists[KW] -> atomic { apply(KW, true) }   /* etcdctl del of W's key */
#endif
#ifdef LATE_JOIN
    /* a late copy of W's acquire txn (its compare: the key absent) lands
     * on W's live lease: KEY/<hex> again, at a new create revision */
    :: rev < NREV - 1 && !exists[KW] && w_lease -> atomic { apply(KW, false) }
#endif
    :: fresh -> fresh = false                                       /* time: W's renewal falls due */
    :: rev < NREV - 1 && !fresh && w_lease ->                       /* W's lease lapses */
        atomic { w_lease = false; if :: exists[KW] -> apply(KW, true) :: else fi }
#ifdef COMPACT
    :: !canceled -> canceled = true
#endif
    :: w_done || w_lost -> break
    od
}

active proctype waiter()
{
    byte pred, at, L, k, n, r;
    bool first;

look:
    /* look: if our key is ours (created at our revision, on our lease),
     * the two keys created last before it */
    atomic {
        if
#ifdef MUT_NO_CREV
        :: !exists[KW] || !w_lease -> w_lost = true; goto out
#else
        :: !exists[KW] || crev[KW] != w_rev || !w_lease -> w_lost = true; goto out
#endif
        :: else
        fi;
        pred = NONE; n = 0;
        for (k : 0 .. NK - 1) {
            if
            :: exists[k] && crev[k] < crev[KW] ->
                n++;
                if
                :: pred == NONE || crev[k] > crev[pred] -> pred = k
                :: else
                fi
            :: else
            fi
        }
        if
        :: n == 0 ->            /* nobody ahead: ours at this revision (the look renewed first) */
            assert(lowest_at[rev] == KW && wcrev_at[rev] == w_rev && w_lease);
            w_done = true; goto out
        :: else
        fi;
        first = (n == 1);
        L = rev; canceled = false
    }
    /* the watch asked for: a step of its own (W paused, or killed, here) */
#ifdef MUT_FROM_NOW
    atomic { at = rev + 1 }                         /* from its own creation */
#else
    atomic { at = L + 1 }                           /* from the look's revision + 1 */
#endif
    do
    :: at <= rev && !canceled ->    /* the next message of the watch from L + 1 */
        atomic {
            r = at; at++;
            if
#ifndef MUT_BLIND
            :: ev_key[r] == KW -> goto look         /* ours deleted, or put over: look */
#endif
            :: ev_key[r] == pred && ev_del[r] ->
                if
#ifdef MUT_ANY
                :: fresh -> skip                    /* trusted, holder or not */
#else
#ifdef MUT_STALE
                :: first -> skip                    /* trusted, renewal overdue or not */
#else
                :: first && fresh -> skip           /* SECOND IN LINE */
#endif
#endif
                :: else -> goto look                /* decides nothing: look again */
                fi;
                assert(lowest_at[r] == KW && wcrev_at[r] == w_rev && w_lease);
                w_done = true; goto out
            :: else                                 /* another key: nothing to us */
            fi
        }
    :: canceled -> goto look                        /* compacted, ended, moved */
    :: atomic { w_lease -> fresh = true }; goto look /* renewal kept, then a look */
    :: atomic { !w_lease -> w_lost = true }; goto out /* renewal refused */
    od;
out:
    skip
}
