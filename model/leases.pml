/*
 * The lease store: one key, one entry, its ctl word as lock and lease,
 * the header's token counter and bind lock, and acquire_wait's sleep
 * (src/leases_ops.c: the protocol, take, bind, hand_over,
 * renew_or_release; src/leases_lock.c: vigil_leases__recover,
 * vigil_leases__wait_locked, vigil_leases__bind_lock;
 * src/leases_internal.h: entry_lock_from, entry_unlock, unexpired;
 * src/leases_wait.c: THE SLEEP, vigil_leases__wake_waiters).
 *
 * Three clients each acquire the key, and if they get it renew it once and
 * release it. With WAITER, client 3 acquires with acquire_wait: on
 * VIGIL_EBUSY it sleeps on the entry's futex until a release wakes it or
 * the holder's expiry comes, then tries once more. Any client is killed at any step (K) and from then on is
 * provably dead (vigil_lock_holder_dead), and paused for any length (every
 * interleaving) while the clock runs on: a lease lapses under a paused
 * holder, whose late renewal must then fail or extend a lease nobody else
 * holds. The entry starts never used, so the first acquire binds it, and a
 * recovery from a locker killed mid-change clears it for a new binding.
 *
 * CHECK safety    |                        | -DSAFETY | -m100000 | clean
 * CHECK sleep     | -DWAITER -DNORENEW     | -DSAFETY | -m100000 | clean
 * CHECK robbed    | -DMUT_ROB              | -DSAFETY | -m100000 | error
 * CHECK old_sleep | -DWAITER -DOLD_SLEEP   | -DSAFETY | -m100000 | error
 * CHECK recycled  | -DRECYCLE -DNORENEW   | -DSAFETY | -m100000 | clean
 * CHECK rebind    | -DWAITER -DNORENEW -DREBIND | -DSAFETY | -m100000 | clean
 * CHECK old_rebind | -DWAITER -DNORENEW -DREBIND -DOLD_REBIND | -DSAFETY | -m100000 | error
 * CHECK old_nanosleep | -DWAITER -DNORENEW -DOLD_NANOSLEEP | -DSAFETY | -m100000 | error
 * CHECK old_word  | -DRECYCLE -DNORENEW -DOLD_WORD | -DSAFETY | -m100000 | error
 * CHECK room      | -DWAITER -DNORENEW -DREBIND -DROOM | -DSAFETY | -m100000 | clean
 * CHECK room_old  | -DWAITER -DNORENEW -DREBIND -DROOM -DOLD_ROOM | -DSAFETY | -m100000 | error
 * CHECK full_old  | -DWAITER -DNORENEW -DREBIND -DROOM -DOLD_FULL | -DSAFETY | -m100000 | error
 *
 * safety: the three clients with plain acquires. sleep: client 3 with
 *   acquire_wait; client 2 keeps the lease it gets to its expiry, nobody
 *   renews (the states: with client 1 and 3 renewing, 13 million, clean).
 *
 * robbed, old_sleep: the model can fail. robbed takes over a lock held by
 *   a process that is only paused (judged dead on a timeout): the paused
 *   one's unlock then lands over its successor's and the generation goes
 *   backwards. old_sleep raises `waiters` after the ctl load instead of
 *   before: a release between the two sees no waiter, and the waiter
 *   sleeps through it (a lost wakeup, until the expiry bound).
 *
 * Safety (asserts): never two unexpired holders of the key (a killed
 * holder counts until its lease expires); the tokens acquisitions return
 * strictly rise; only a dead locker's entry lock or bind lock is taken
 * over; the generation never goes backwards; no lost wakeup: when a
 * release has done its wake, no live waiter that loaded ctl before the
 * release's CAS is asleep on the futex.
 *
 * rebind, old_rebind: another key binds the key's entry once its lease
 *   has lapsed (Rebinder), between the waiter's look-up and its load of
 *   ctl. rebind: the waiter reads the key under ctl (holds_key) and sleeps
 *   only on its own key, held; clean. old_rebind is the C before issue 18:
 *   it slept to the expiry of whatever the entry held; Spin finds it
 *   asleep to key 3's expiry while its own key is free.
 * old_nanosleep: the C before issue 18 switched, after 17 quick futex
 *   returns, to a nanosleep until the holder's expiry, which no release
 *   can end; Spin finds a release's wake done with the waiter still
 *   asleep (the lost wakeup). The C now has only the futex sleep (sleep).
 * recycled, old_word: a newcomer gets client 1's pid in the same clock
 *   tick once client 1 is dead, so its lock word is 1's (Newcomer), and
 *   locks and unlocks the entry. recycled: the entry lock is the pair
 *   {ctl, seq} of the C (THE ENTRY LOCK, leases_internal.h): a waiter
 *   that read {1, s}, judged 1 dead and paused swaps from exactly {1, s}
 *   and fails once anyone locked since; clean. old_word: the take-over
 *   from the word alone, the C before the lock pairs; Spin finds the
 *   paused waiter robbing the newcomer (the holding taken over is a live
 *   one's). The ghost `lockinc` names the incarnation that holds the lock,
 *   since killed[] follows the pid, which the newcomer brings back.
 *
 * room, room_old, full_old: THE ROOM SLEEP (src/leases_wait.c, issue 32).
 *   The waiter's key released, the Rebinder binds key 3 to the only
 *   entry before the waiter looks again: the waiter's bind finds the
 *   store full and it sleeps for room on the header's room futex, until
 *   the Rebinder releases key 3 (which reads room_waiters after its
 *   release CAS and wakes) or the first expiry. room: clean, no lost
 *   wakeup on the room futex. room_old: room_waiters raised after the
 *   look instead of before; Spin finds the release between the two, the
 *   waiter asleep through it. full_old: the C before issue 32, acquire_wait
 *   returning VIGIL_EFULL: Spin finds the waiter giving up on its key
 *   (the assertion that a waiter never returns VIGIL_EFULL). Client 2
 *   sits these runs out: the other holder adds states, not steps.
 *
 * Time: `now` is the lease clock (CLOCK_BOOTTIME) in ms, moved on (TICK)
 * at any read, TTL 2.
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - More than one entry, and a second key's own holders. The protocol
 *     is per entry: every CAS and swap is on one entry's words, and the
 *     bind lock orders the binders. What a second key does to this one
 *     is take its entry over once its lease has lapsed (Rebinder, the
 *     rebind runs); its holders' renewals are this key's again, on
 *     another key's words, which the model's own holders already check.
 *   - acquire_wait's spurious-wake counting: the model chooses the
 *     nanosleep of before issue 18 at any sleep (old_nanosleep), which
 *     covers every count of quick returns that led the C to it.
 *   - The bind lock's take-over is one step here (read, judge, swap). In
 *     the C it is a lock pair (vigil_pair_read, vigil_pair_take_over),
 *     the same code as the heartbeat's slot writer lock and the election
 *     lock, whose pairs model/slot.pml and model/election.pml prove with
 *     recurring words; the entry lock's pair is proven here.
 *   - Scribbles (a peer writing garbage): bounded by the C's checks and
 *     test_leases_files.c's hostile entries, not a protocol question.
 *   - The judge's own errors: "dead" is trusted as proof (vigil_lock_
 *     holder_dead says "alive" whenever it cannot prove it); robbed shows
 *     what a judge that guessed would cost.
 *   - Futex spurious wake-ups and timeouts: a woken waiter only looks
 *     again, which the model's loop already does; the lost-wakeup
 *     invariant is about a waiter that stays asleep.
 */
#define NC 3
#define TTL 2
#ifndef TMAX
#define TMAX 3          /* 4: clean too, 12.4 million states, about 12 s */
#endif
#define NEVER 0
#define BOUND 1
#define CLEARED 2
#define KEYED (bound == BOUND && hashk && key == 2)  /* key_matches */

byte now;               /* vigil_now_ns, in ms */
/* entry 0 (offsets in the entry) */
byte clk;               /*  0 ctl locked: the locker's lock word (its id), 0 unlocked */
byte seq;               /*  8 the entry lock's seq: odd while locked, rises at every step */
byte gen, exp;          /*  0 ctl unlocked: generation, expiry (0 released) */
byte token;             /*  8 */
byte hint;              /* 32 gen_hint */
byte bound;             /* 28 NEVER, BOUND, CLEARED */
bool hashk;             /* 24 hash is the key's */
byte key;               /* 64 key: 0 none, 1 half written, 2 the key */
byte wake;              /* 40 futex word */
byte waiters;           /* 44 */
/* header */
byte last_token;        /* 24 */
byte bindlk;            /* 32 bind_lock: 0, or the binder's id */
bool killed[NC + 1];

/* ghost */
bool hold[NC + 1];      /* i was granted the lease and has not lost or released it */
byte hexp[NC + 1];      /* its expiry as i last wrote it */
byte maxtok;            /* the greatest token an acquire returned */
bool loaded;            /* the waiter (client 3) loaded ctl for a sleep */
bool rel_after;         /* a release CASed ctl after that load */
bool must_wake;         /* and that release's wake is done */
bool asleep;            /* the waiter is in FUTEX_WAIT */
bool deaf;              /* OLD_NANOSLEEP: in a nanosleep, which no wake ends */
bool wrongsleep;        /* asleep to the expiry of a key that is not its own */
byte lockinc;           /* the incarnation holding the entry lock: a client's id, 4 the newcomer */
/* THE ROOM SLEEP (ROOM): the header's room futex and its ghosts */
byte rwake, rwaiters;
bool rloaded, rrel_after, rmust_wake, rasleep;
bool dinc[5];           /* incarnation i is dead (killed[] follows the pid, which may be reborn) */

/* Killed here, or not. Only before a step that writes: a kill before a
 * read leaves the same store as one before the next write. */
#define K(me) if :: skip :: atomic { killed[me] = true; dinc[me] = true }; goto out fi

/* The clock moves on only when someone reads it, by any amount: the
 * protocol looks at it only there, and a later now only makes a lease
 * lapse sooner, so the invariant meets each clock value that matters. */
#define TICK do :: now < TMAX -> now++ :: break od

/* Reads of ctl and of what the change of hands or the renewal checks
 * (key, token, clock) are one step: the CAS that follows succeeds only
 * from the ctl read, and key and token change only with ctl. */

/* Every unlocked ctl stored: the generation never goes backwards. */
#define SET_CTL(g, e) assert((g) >= gen); gen = (g); exp = (e); clk = 0
/* entry_unlock: the pair's swap to {the new ctl, seq + 1} */
#define UNLOCK(g, e) SET_CTL(g, e); seq++
/* entry_lock_from: {c, s} -> {me, s + 1}, only from the word c read */
#define LOCK_FROM(me, inc, cg, ce, ok) \
    if \
    :: clk == 0 && gen == cg && exp == ce -> clk = me; seq++; lockinc = inc; ok = true \
    :: !(clk == 0 && gen == cg && exp == ce) -> ok = false \
    fi

/* vigil_leases__recover: the take-over from exactly the pair {dead, ds}
 * read before the judgement (OLD_WORD: from the word alone, the C before
 * the lock pairs), clear, unlock at gen_hint + 2 with expiry 0 */
inline recover(me, dead, ds, ok) {
    K(me);
    atomic {
        if
#ifndef OLD_WORD
        :: clk == dead && seq == ds ->
#else
        :: clk == dead ->
#endif
#ifndef MUT_ROB
            assert(dinc[lockinc]);          /* the holding taken over is a dead one's */
#endif
            clk = me; seq = seq + 2; lockinc = me; ok = true
        :: else -> ok = false               /* another recovered it, or it changed hands */
        fi
    };
    if
    :: ok ->
        K(me);
        atomic {
            bound = CLEARED; hashk = false; key = 0;
            hint = hint + 2; UNLOCK(hint, 0) }
    :: else
    fi
}

/* hand_over: a token from the counter, the fields, the unlock with the
 * next generation and expiry now + TTL (now read before the lock) */
inline hand_over(me, cg, n, t) {
    K(me);
    atomic { last_token++; t = last_token };
    K(me);
    atomic {
        token = t;                          /* token, ttl, owner, pid */
        hint = cg + 1; UNLOCK(cg + 1, n + TTL);
        assert(t > maxtok); maxtok = t;     /* tokens strictly rise */
        hold[me] = true; hexp[me] = n + TTL }
}

proctype Client(byte me) {
    byte cl, cs, cg, ce, n, t, b, round, att, v, tmo;
    bool ok;
#ifdef ROOM
    /* room: one holder (1), the waiter (3) and the Rebinder are the whole
     * story; a second holder only multiplies the states (100 million). */
    if :: me == 2 -> goto out :: else fi;
#endif

    do
    :: round < 2 ->
        round++;
        /* vigil_leases__find */
        if
        :: KEYED -> goto take
        :: else -> goto bind
        fi;
take:
        att = 0;
        do
        :: att < 2 ->
            att++;
            /* vigil_leases__wait_unlocked, key_matches, the clock */
            atomic { TICK; cl = clk; cs = seq; cg = gen; ce = exp; ok = KEYED; n = now };
            if
            :: cl != 0 && killed[cl] -> recover(me, cl, cs, ok); goto retake
#ifdef MUT_ROB
            :: cl != 0 -> recover(me, cl, cs, ok); goto retake  /* a paused one too */
#endif
            :: cl != 0 -> goto busy         /* live locker: VIGIL_EBUSY after the wait */
            :: cl == 0 && !ok -> goto again /* RESTART */
            :: cl == 0 && ok && ce != 0 && ce > n -> goto busy  /* held: VIGIL_EBUSY */
            :: cl == 0 && ok && !(ce != 0 && ce > n)
            fi;
            /* entry_lock_from c: only from the lapsed word read */
            K(me);
            atomic { LOCK_FROM(me, me, cg, ce, ok) };
            if :: !ok -> goto retake :: else fi;
            /* under the lock: gen_hint, the key again */
            K(me);
            atomic { hint = cg; ok = KEYED };
            if
            :: !ok -> K(me); atomic { hint = cg + 1; UNLOCK(cg + 1, ce) }; goto again
            :: else
            fi;
            hand_over(me, cg, n, t);
            goto held;
retake:     skip
        :: else -> goto out
        od;
bind:
        /* vigil_leases__bind_lock: free, or its holder judged dead */
        K(me);
        atomic {
            if
            :: bindlk == 0 -> bindlk = me; ok = true
            :: bindlk != 0 && killed[bindlk] -> bindlk = me; ok = true
            :: bindlk != 0 -> ok = false    /* VIGIL_EBUSY after the wait */
            fi
        };
        if :: !ok -> goto out :: else fi;
        /* the scan: bound elsewhere? (here: to our one entry) */
        if
        :: KEYED -> K(me); bindlk = 0; goto take
        :: else
        fi;
        att = 0;
        do
        :: att < 2 ->
            att++;
            atomic { TICK; cl = clk; cs = seq; cg = gen; ce = exp; b = bound; n = now };
            if
            :: cl != 0 && killed[cl] -> recover(me, cl, cs, ok)
            :: cl != 0 -> break             /* a live locker's change: skip */
            :: cl == 0 && b == BOUND && ce != 0 && ce > n -> break  /* held */
            :: cl == 0 && !(b == BOUND && ce != 0 && ce > n) ->
                K(me);
                atomic { LOCK_FROM(me, me, cg, ce, ok) };
                if
                :: ok ->
                    K(me);
                    atomic {                /* gen_hint, the first half of the key */
                        hint = cg;
                        if :: bound == NEVER -> bound = CLEARED :: else fi;
                        hashk = false; key = 1 };
                    K(me);
                    atomic { key = 2; hashk = true; bound = BOUND };
                    hand_over(me, cg, n, t);
                    K(me);
                    bindlk = 0;
                    goto held
                :: else
                fi
            fi
        :: else -> break
        od;
        K(me);
        bindlk = 0;                         /* VIGIL_EFULL */
#ifdef ROOM
        if
        :: me == 3 ->
#ifdef OLD_FULL
            assert(false);                  /* acquire_wait returned VIGIL_EFULL */
#endif
            /* THE ROOM SLEEP: room_wake, room_waiters, the look again,
             * then FUTEX_WAIT on the value read, to the first expiry */
            atomic { v = rwake };
#ifndef OLD_ROOM
            K(me); rwaiters++;
            atomic { TICK; cl = clk; ce = exp; n = now; ok = (cl != 0 || (ce != 0 && ce > n && !KEYED)); rloaded = true };
#else
            atomic { TICK; cl = clk; ce = exp; n = now; ok = (cl != 0 || (ce != 0 && ce > n && !KEYED)); rloaded = true };
            K(me); rwaiters++;
#endif
            if
            :: ok ->                        /* still full: asleep */
                K(me);
                atomic { tmo = (cl != 0 -> n + 1 : ce + 1); if :: rwake == v -> rasleep = true :: else fi };
end_rsleep:     if
                :: !rasleep
                :: atomic { rasleep && tmo <= TMAX -> if :: now < tmo -> now = tmo :: else fi; rasleep = false }
                fi
            :: else
            fi;
            K(me); atomic { rwaiters--; rloaded = false; rrel_after = false; rmust_wake = false };
            goto again
        :: else
        fi;
#endif
        goto out;
busy:   /* VIGIL_EBUSY: acquire returns it; acquire_wait sleeps (client 3) */
#ifndef WAITER
        goto out;
#endif
        if :: me != 3 || round == 2 -> goto out :: else fi;
        /* THE SLEEP: wake, waiters, ctl, then FUTEX_WAIT on the wake read */
        atomic { v = wake };
#ifndef OLD_SLEEP
        K(me); waiters++;
        atomic { TICK; cl = clk; ce = exp; n = now; ok = KEYED; loaded = true };
#else
        atomic { TICK; cl = clk; ce = exp; n = now; ok = KEYED; loaded = true };
        K(me); waiters++;
#endif
        /* sleep_for, only on the entry still holding the key, held
         * (holds_key: the key read under ctl, a SeqLock read, so one step
         * here); a change of hands under way is the lock wait's, inside
         * acquire. OLD_REBIND, before issue 18: a tick while locked, else
         * to the expiry of whatever the entry holds, its key unchecked. */
        if
#ifndef OLD_REBIND
        :: cl == 0 && ok && ce != 0 && ce > n ->
#else
        :: cl != 0 || (ce != 0 && ce > n) ->
#endif
            K(me);
            atomic {
                tmo = (cl != 0 -> n + 1 : ce + 1);
                wrongsleep = (cl == 0 && !ok);
#ifndef OLD_NANOSLEEP
                if :: wake == v -> asleep = true :: else fi };
#else
                /* after 17 quick futex returns, a nanosleep to the expiry */
                if :: wake == v -> asleep = true :: asleep = true; deaf = true :: else fi };
#endif
end_sleep:  if
            :: !asleep                      /* woken, or FUTEX_WAIT's compare failed */
            :: atomic { asleep && tmo <= TMAX -> if :: now < tmo -> now = tmo :: else fi;
                        asleep = false; deaf = false; wrongsleep = false }
            fi
        :: else
        fi;
        K(me); atomic { waiters--; loaded = false; rel_after = false; must_wake = false };
again:  skip
    :: else -> goto out
    od;

held:   /* renew once, then release: one CAS each from the word checked */
#ifdef WAITER
    if :: me == 2 -> goto out :: else fi;   /* keeps it to its expiry */
#endif
#ifdef NORENEW
    att = 1;
#else
    att = 0;
#endif
    do
    :: att < 2 ->
        atomic {
            TICK; cl = clk; cg = gen; ce = exp; n = now;
            ok = cl == 0 && ce != 0 && ce > n && token == t && bound == BOUND && key == 2 };
        if
        :: !ok -> hold[me] = false; goto out        /* VIGIL_ELOST */
        :: else
        fi;
        K(me);
        atomic {
            if
            :: clk == 0 && gen == cg && exp == ce ->
                if
                :: att == 0 ->              /* renew: the same generation, later expiry */
                    SET_CTL(cg, (n + TTL > ce -> n + TTL : ce)); hexp[me] = exp
                :: att == 1 ->              /* release: the next generation, expiry 0 */
                    SET_CTL(cg + 1, 0); hold[me] = false;
                    if :: loaded -> rel_after = true :: else fi
                fi;
                att++
            :: !(clk == 0 && gen == cg && exp == ce)  /* lost a race: look again */
            fi
        }
    :: else -> break
    od;
#ifdef WAITER
    /* vigil_leases__wake_waiters: waiters seen, then wake + 1, FUTEX_WAKE */
    K(me);
    atomic {
        if :: waiters != 0 -> wake++; if :: !deaf -> asleep = false :: else fi :: else fi;
        if :: rel_after -> must_wake = true :: else fi }
#endif
out:
    skip
}

#ifdef REBIND
/* Another key (3) bound to the entry once the key's lease has lapsed or
 * been released: the binder's whole change in one step (its steps are
 * the clients' bind, checked above). A waiter that looked the key up
 * before and loads ctl after finds key 3 held. */
proctype Rebinder() {
end_rebind:
    atomic { clk == 0 && bindlk == 0 && !(exp != 0 && exp > now) && KEYED ->
        last_token++; token = last_token; bound = BOUND; key = 3; hashk = false;
        hint = gen;                         /* its lock's gen_hint, as every locker writes */
        SET_CTL(gen + 1, now + TTL); seq = seq + 2 }
#ifdef ROOM
    /* key 3 released (one CAS, seq_cst), then vigil_leases__wake_room:
     * room_waiters read, room_wake + 1, FUTEX_WAKE */
    ;
end_release:
    atomic { clk == 0 && key == 3 && exp != 0 ->
        SET_CTL(gen + 1, 0); if :: rloaded -> rrel_after = true :: else fi };
    atomic {
        if :: rwaiters != 0 -> rwake++; rasleep = false :: else fi;
        if :: rrel_after -> rmust_wake = true :: else fi }
#endif
}
#endif

#ifdef RECYCLE
/* A newcomer that got client 1's pid, started in the same tick: once 1
 * is dead its lock word names this live process. It locks the entry from
 * whatever unlocked word it finds (a change of hands of its own) and
 * unlocks it. A waiter that judged 1 dead before this and swaps after it
 * must fail: the pair's seq moved (OLD_WORD: it robs the newcomer, and
 * recover's assert, only a dead locker, fails). */
proctype Newcomer() {
    byte cg, ce;
    bool ok;
end_reborn:
    atomic { killed[1] -> killed[1] = false };
end_look:                                   /* only a lapsed word is locked */
    atomic { clk == 0 && !(exp != 0 && exp > now) -> cg = gen; ce = exp };
    atomic { LOCK_FROM(1, 4, cg, ce, ok) };
    if
    :: ok -> atomic { clk == 1 -> UNLOCK(cg + 1, ce) }
    :: else
    fi
}
#endif

/* Never two unexpired holders (a dead holder's lease runs to its end). */
#define TWO(i, j) (hold[i] && hexp[i] > now && hold[j] && hexp[j] > now)
active proctype Invariants() {
end:
    do
    :: atomic { TWO(1, 2) || TWO(1, 3) || TWO(2, 3) -> assert(false) }
    /* no lost wakeup */
    :: atomic { asleep && !killed[3] && must_wake -> assert(false) }
    /* never asleep to another key's expiry (the entry rebound) */
    :: atomic { asleep && !killed[3] && wrongsleep -> assert(false) }
    /* no lost wakeup for room */
    :: atomic { rasleep && !killed[3] && rmust_wake -> assert(false) }
    od
}

init {
    atomic {
#ifdef PREBOUND
        bound = BOUND; hashk = true; key = 2; gen = 1; hint = 1;
#endif
        run Client(1); run Client(2); run Client(3);
#ifdef RECYCLE
        run Newcomer();
#endif
#ifdef REBIND
        run Rebinder();
#endif
    }
}
