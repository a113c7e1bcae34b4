/*
 * The barrier's release record (src/barrier_info.c, THE RELEASE RECORD;
 * its use in src/barrier_wait.c: try_release's ticketed commit, finish's
 * mark before the move; tests: tests/test_barrier_info.c).
 *
 * CHECK record      | -DR=3 -DM=2      | -DSAFETY -DMEMLIM=3000 | -m100000 | clean
 * CHECK three       | -DTHREE -DR=1    | -DSAFETY -DMEMLIM=3000 | -m100000 | clean
 * CHECK noreuse     | -DNOREUSE        | -DSAFETY -DMEMLIM=3000 | -m100000 | clean
 * CHECK overwrite_old | -DOLD_OVERWRITE | -DSAFETY -DMEMLIM=3000 | -m100000 | error
 * CHECK noname_old  | -DOLD_NONAME     | -DSAFETY -DMEMLIM=3000 | -m100000 | error
 * CHECK latemark_old | -DOLD_LATEMARK  | -DSAFETY -DMEMLIM=3000 | -m100000 | error
 * CHECK gatefirst_old | -DOLD_GATE_FIRST -DR=3 -DM=2 | -DSAFETY -DMEMLIM=3000 | -m100000 | error
 *
 * Two processes (three), each a waiter of rounds 0..R-1 that may judge
 * the round complete (check the gate, take a ticket, check the gate
 * again, claim place ticket mod P, write its
 * two entries and its counts, commit the gate with its ticket), or wait
 * and finish a round it finds committed (mark, then move the state), then
 * read the round's record twice. Any process may be killed at any step
 * (K) and Spin pauses any of them for any number of others' steps: a
 * judge that claimed its place may resume rounds later. P = 2 places and
 * M marks, so places and marks are taken again within the run:
 *   record: two processes, three rounds, two marks (round 2 takes round
 *     0's mark; the fourth ticket takes the second's place);
 *   three: three processes racing for one round (three tickets, two
 *     places);
 *   noreuse: eight places, a mark per round: nothing is taken again.
 *
 * Properties (asserts):
 *   - once the state has passed round e, e's mark names e or a later
 *     round (a reader never finds the mark still to come);
 *   - a mark of round e names the judgement that committed e;
 *   - a record read whole (mark, header, both entries, counts, header and
 *     mark again) is exactly that judgement's;
 *   - a record read whole stays whole while its mark and its place's
 *     header are unchanged (no stale judge writes into it);
 *   - noreuse: every reader reads its round's record whole;
 *   - a claim never takes a place from a later round's record (a judge
 *     paused anywhere before its claim evicts nothing newer than its
 *     own round: what vigil_barrier_wait_info(3) keeps stays kept).
 * overwrite_old: a pair written over a later ticket's (the stale judge
 * resumes into a place taken again). noname_old: the commit leaves the
 * gate without the ticket. latemark_old: the mark after the state's move.
 * gatefirst_old: the gate checked only before the ticket (issue 25.8): a
 * judge paused between the check and its ticket resumes rounds later,
 * takes the newest ticket and evicts a later round's kept record.
 */
/*
 * What this model leaves out, and why that is safe.
 *
 * - What a judgement contains. Here a judgement is its ticket: each entry
 *   it writes carries the ticket as its value, so a reader that accepts a
 *   record can check that every word came from the committing judgement.
 *   Whether that judgement counted the right registrations, never a
 *   withdrawn waiter, is model/barrier.pml's (its tally and gate are the
 *   same steps: the recording pass judges after the gate's load like the
 *   tally it repeats). The recording pass may find the round incomplete
 *   and not commit: a judge here may abandon its record after writing it.
 * - Withdrawals and the gate's count. The gate here is (round, committed,
 *   ticket): a commit succeeds while the round's gate is open, which in
 *   the C also requires no withdrawal since the judge's load (a failed
 *   commit, which a judge here may also take by being second). The
 *   install of a round's gate is folded into the commit's step; the C's
 *   install is a CAS from an older round's value while the state is at
 *   the round, as here.
 * - Sizes. Two entries stand for a judgement's per-slot entries: each is
 *   written and read by the same steps, so more slots are more copies. P
 *   and M are 8 in the C; fewer here make a place and a mark be taken
 *   again within the run, the case the tickets and the marks' round
 *   numbers guard. Two processes over three rounds, or three over one:
 *   three over two rounds is past 60 million states. A third process
 *   adds a third racing judgement of a round (the run `three`) or a
 *   third reader, whose steps are the other two's. Kills: for these
 *   safety properties a process killed at a step is one Spin never
 *   schedules again (nothing here waits on its liveness); K is kept for
 *   the traces' sake. Tickets never wrap in the C (64 bits); the gate and
 *   the marks carry 31 bits of them, and a place is chosen by the low
 *   bits, so two tickets confused by the gate would be 2^31 apart, with
 *   the place taken again in between (a header read fails).
 * - The reader's count. The C reader skips an entry of another ticket
 *   and then requires as many entries as the judgement's `counts` pair
 *   says it wrote; here, where a judgement always writes both entries,
 *   that is the requirement that both carry the ticket. A judgement that
 *   stops writing (a pair a later ticket holds, or a scribbled one) is
 *   a judge here whose record is no one's: `mine` false.
 * - Memory orders. Spin interleaves whole steps: sequential consistency.
 *   Every write here is a locked CAS in the C (16-byte pairs, the marks,
 *   the gate, the state) and every read the argument needs is seq_cst or
 *   acquire, read ticket-value-ticket for a pair (one step here, as good
 *   as one 16-byte load: a pair holds a ticket once).
 */
#ifndef R
#define R 2       /* rounds */
#endif
#ifdef NOREUSE
#define P 8
#define M R
#else
#define P 2       /* places */
#ifndef M
#define M 1       /* marks */
#endif
#endif

#ifdef NOKILL
#define K
#else
#define K :: goto dead
#endif

byte ep;                  /* hdr->state's epoch */
byte gep; bool gc; byte gt; /* the gate: round, committed, ticket */
byte tickets;             /* rel->tickets */
byte mk_ep[M]; bool mk_ok[M]; byte mk_t[M]; /* marks: round, valid, ticket */
byte hd_t[P], hd_round[P];   /* a place's `round` pair: ticket, round */
byte cn_t[P];                /* its `counts` pair's ticket */
byte en_t[P * 2], en_v[P * 2]; /* its two entries: ticket, value */
byte committed[R];        /* ghost: the ticket that committed round e */

/* pair_put: over a pair of an older ticket only (OLD_OVERWRITE: any). */
#ifdef OLD_OVERWRITE
#define NEWER(have, t) true
#else
#define NEWER(have, t) (have < t)
#endif

proctype W(byte i)
{
    byte e, t, p, g;      /* round, my ticket, my place, the committed gate's ticket */
    bool mine, won;
    byte r1t, r1m;        /* the first whole read: header ticket, mark ticket (0: none) */
    byte rt, rm, rp; bool ok; /* a read in progress */
    byte pass, tries;

round:
    if :: e == R -> goto fin :: else fi;
end_wait:
    (ep >= e);
    if :: ep > e -> goto read :: else fi;
    if
    :: goto judge
    :: goto end_waiting
    fi;

judge:  /* vigil_barrier__judge_recorded; claim_place: the gate checked,
         * a ticket, the gate checked again (OLD_GATE_FIRST: not), then the
         * claim of its place; a place a later ticket holds: once more with
         * a fresh ticket. The gate is "open for e" here: in the C it is
         * the very gate word the judge loaded, which never comes back. */
    tries = 0;
ticket:
    if K :: atomic { if :: ep == e && !(gep == e && gc) -> skip
                      :: else -> t = 0; mine = false; goto record fi } fi;
    if K :: atomic { tickets++; t = tickets; p = t % P } fi;
#ifndef OLD_GATE_FIRST
    if K :: atomic { if :: ep == e && !(gep == e && gc) -> skip
                      :: else -> mine = false; goto record fi } fi;
#endif
    if K :: atomic { if :: NEWER(hd_t[p], t) ->
                           /* a claim never evicts a later round's record */
                           assert(hd_t[p] == 0 || hd_round[p] <= e);
                           hd_t[p] = t; hd_round[p] = e; mine = true
                      :: else -> mine = false fi } fi;
    if :: !mine && tries == 0 -> tries = 1; goto ticket :: else fi;
record:
    if K :: atomic { if :: mine && NEWER(en_t[p * 2], t) -> en_t[p * 2] = t; en_v[p * 2] = t
                      :: else fi } fi;
    if K :: atomic { if :: mine && NEWER(en_t[p * 2 + 1], t) -> en_t[p * 2 + 1] = t; en_v[p * 2 + 1] = t
                      :: else fi } fi;
    if K :: atomic { if :: mine && NEWER(cn_t[p], t) -> cn_t[p] = t :: else fi } fi;
    if
    :: goto end_waiting       /* the recording pass found it incomplete after all */
    :: skip
    fi;
    /* try_release's commit: the round's gate open (installed at it) */
    if K :: atomic {
        if
        :: ep == e && (gep != e || !gc) ->
            gep = e; gc = true;
#ifdef OLD_NONAME
            gt = 0;
#else
            gt = t;
#endif
            assert(committed[e] == 0);
            committed[e] = t; g = gt; won = true
        :: else -> won = false
        fi } fi;
    if :: won -> goto finish :: else -> goto end_waiting fi;

end_waiting: /* await_change and the judge's GATE_DONE: released, or finish */
    if
    :: atomic { ep > e } -> goto read
    :: atomic { ep == e && gep == e && gc -> g = gt }; goto finish
    fi;

finish:  /* finish: the mark, then the move */
#ifndef OLD_LATEMARK
    if K :: atomic { if :: !(mk_ok[e % M] && mk_ep[e % M] >= e) -> mk_ok[e % M] = true; mk_ep[e % M] = e; mk_t[e % M] = g
                      :: else fi } fi;
#endif
    if K :: atomic { if :: ep == e -> ep = e + 1 :: else fi } fi;
#ifdef OLD_LATEMARK
    if K :: atomic { if :: !(mk_ok[e % M] && mk_ep[e % M] >= e) -> mk_ok[e % M] = true; mk_ep[e % M] = e; mk_t[e % M] = g
                      :: else fi } fi;
#endif

read:    /* vigil_barrier_round_info, twice */
    pass = 0;
again:
    ok = false; rm = 0; rt = 0;
    if K :: atomic {
        /* the state has passed e: its mark was written first */
        assert(mk_ok[e % M] && mk_ep[e % M] >= e);
        if
        :: mk_ep[e % M] == e ->
            assert(mk_t[e % M] == committed[e]);  /* the mark names the committer */
            rm = mk_t[e % M]; rp = rm % P; ok = true
        :: else
        fi } fi;
    if :: ok -> skip :: else -> goto readdone fi;
    if K :: atomic { if :: hd_t[rp] == rm && hd_round[rp] == e -> rt = rm :: else -> ok = false fi } fi;
    if K :: atomic { ok = ok && en_t[rp * 2] == rt; if :: ok -> assert(en_v[rp * 2] == committed[e]) :: else fi } fi;
    if K :: atomic { ok = ok && en_t[rp * 2 + 1] == rt; if :: ok -> assert(en_v[rp * 2 + 1] == committed[e]) :: else fi } fi;
    if K :: atomic { ok = ok && cn_t[rp] == rt } fi;
    if K :: atomic { ok = ok && hd_t[rp] == rt && mk_ok[e % M] && mk_ep[e % M] == e && mk_t[e % M] == rm } fi;
readdone:
#ifdef NOREUSE
    assert(ok);           /* nothing taken again: every record is read whole */
#endif
    if
    :: pass == 0 ->
        r1t = (ok -> rt : 0); r1m = (ok -> rm : 0);
        pass = 1; goto again   /* Spin may pause us here for any number of steps */
    :: pass == 1 && r1t != 0 ->
        /* still the same mark and header: the record must read whole again */
        atomic { if
                 :: mk_ok[e % M] && mk_ep[e % M] == e && mk_t[e % M] == r1m && hd_t[r1m % P] == r1t -> assert(ok)
                 :: else
                 fi }
    :: else
    fi;
    e++; t = 0; p = 0; g = 0; mine = false; won = false; r1t = 0; r1m = 0; rt = 0; rm = 0; rp = 0; ok = false; pass = 0;
    tries = 0;
    goto round;
dead:
fin:
    e = 0; t = 0; p = 0; g = 0; mine = false; won = false; r1t = 0; r1m = 0; rt = 0; rm = 0; rp = 0; ok = false; pass = 0;
    tries = 0
}

init
{
    atomic {
        run W(0); run W(1);
#ifdef THREE
        run W(2)
#endif
    }
}
