/*
 * The lease store's entry protocol, one key on one entry (src/leases_ops.c:
 * take(), bind() as far as it re-binds a cleared entry, hand_over(),
 * renew_or_release(); src/leases_lock.c: vigil_leases__wait_locked(),
 * vigil_leases__recover(); src/leases_internal.h: the ctl word,
 * entry_lock_from(), entry_unlock(); src/leases_wait.c: THE SLEEP of
 * vigil_leases_acquire_wait() against vigil_leases__wake_waiters(). The
 * protocol comments of leases_ops.c, leases_lock.c and leases_wait.c name
 * this model.)
 *
 * Processes: three clients, each acquiring (plainly or with acquire_wait),
 * renewing and releasing the key a bounded number of times; the clock; a
 * killer that may kill any client at any step (a killed client stops for
 * good, and from then its lock word is provably dead); a monitor. A pause
 * is any interleaving. Every load and store is one step, sequentially
 * consistent: the memory orders are argued in the C's comments, not here.
 *
 * Abstractions: ctl is one int, LOCKED(p) for client p's lock word, else
 * gen * 32 + expiry. Time is in ticks; an entry's expiry is now + TTL with
 * `now` the reading taken before the lock (hand_over(): expiry_for(now)),
 * unexpired while clock < expiry. A holder believes from the moment its
 * acquire succeeds until its own reading + TTL; the C's reading (`sent`)
 * is taken earlier still, so believing until now + TTL is the harder case.
 * With one entry the bind lock guards nothing (it keeps a key on one entry
 * of many), and take()'s key re-check under the lock always passes (the key
 * changes only under the lock or by recovery, which moves ctl), so both
 * are left out.
 *
 * Safety:
 *   - never two live clients believing they hold an unexpired lease;
 *   - fencing tokens strictly rise at every hand-over (each unlock that
 *     grants);
 *   - a locker's lock is taken over only once the locker is dead: a live
 *     (perhaps paused) locker is never robbed;
 *   - THE SLEEP has no lost wakeup: when a release has done its wake, no
 *     waiter that loaded ctl before the release's CAS is still asleep on
 *     the futex (a killed releaser wakes nobody: the sleep ends at expiry).

 * Size: clients 0, 1 and 2 make 2, 1 and 1 calls (an acquire_wait's every
 * try counts), one kill, the clock runs to 3 with TTL 2. Even so the full
 * space is over 3e7 states, past what fits in a minute on 2 cores, so the
 * runs are bitstate (-DBITSTATE, -w26: partial coverage, hash factor about
 * 2); an exhaustive run wants about 5 GB and several minutes.
 *
 * CHECK safety | | -DSAFETY -DBITSTATE | -m100000 -w26 | clean
 * CHECK old_sleep | -DOLD_SLEEP | -DSAFETY -DBITSTATE | -m100000 -w26 | error
 * CHECK rob_live | -DROB_LIVE | -DSAFETY -DBITSTATE | -m100000 -w26 | error
 *
 * old_sleep raises `waiters` after the ctl load instead of before, and
 * rob_live takes over a locker judged only slow, not dead: Spin must find
 * the lost wakeup and the robbed locker.
 */

#define N      3
#define TTL    2
#define MAXT   3
#define KILLS  1
#define LOCKED(p)  (1000 + (p))
#define GEN(c)     ((c) / 32)
#define EXP(c)     ((c) % 32)
#define MAKE(g, e) ((g) * 32 + (e))
#define ISLOCKED(c) ((c) >= 1000)
#define BOUND   1
#define CLEARED 2

byte now = 0;              /* CLOCK_MONOTONIC, in ticks */
int  ctl = MAKE(1, 0);     /* e->ctl: the key bound, released */
byte token = 0;            /* e->token */
byte last_token = 0;       /* hdr->last_token */
byte bound = BOUND;        /* e->bound */
int  gen_hint = 1;         /* e->gen_hint */
byte wake = 0;             /* e->wake, the futex word */
byte waiters = 0;          /* e->waiters */

bool dead[N];
/* ghosts */
bool have[N];              /* holds a lease (a token) it believes in */
byte bdl[N];               /* ... until the clock reaches this */
byte granted = 0;          /* token of the last hand-over */
byte relseq = 0;           /* releases done (their CAS) */
byte seen_rel[N];          /* relseq when this waiter loaded ctl */
bool asleep[N];            /* blocked in FUTEX_WAIT */

active proctype Clock() {
    do
    :: now < MAXT -> now++
    :: now >= MAXT -> break
    od
}

/* A kill: the process stops at its next step (Client's unless), and from
 * now on vigil_lock_holder_dead() says so. */
active proctype Killer() {
    byte kills = 0;
    do
    :: kills < KILLS ->
       if
       :: atomic { !dead[0] -> dead[0] = true; have[0] = false; asleep[0] = false; kills++ }
       :: atomic { !dead[1] -> dead[1] = true; have[1] = false; asleep[1] = false; kills++ }
       :: atomic { !dead[2] -> dead[2] = true; have[2] = false; asleep[2] = false; kills++ }
       fi
    :: break
    od
}

/* Never two unexpired holders: checked on every state. */
active proctype Monitor() {
end:
    do
    :: atomic {
        (have[0] && now < bdl[0] && have[1] && now < bdl[1]) ||
        (have[0] && now < bdl[0] && have[2] && now < bdl[2]) ||
        (have[1] && now < bdl[1] && have[2] && now < bdl[2]) -> assert(false)
       }
    od
}

/* vigil_leases__recover(e, w): CAS ctl from the dead word to ours, clear
 * the entry, unlock with gen_hint + 2 and expiry 0. */
inline recover(w) {
    if
    :: atomic { ctl == LOCKED(w) -> assert(dead[w]); ctl = LOCKED(me) };
       bound = CLEARED;                 /* release store of `bound` */
       atomic { g = gen_hint + 2; gen_hint = g }  /* zeroing key, owner, pid: no state here; entry_unlock */
       ctl = MAKE(g, 0)
    :: else                             /* another recoverer won */
    fi
}

/* vigil_leases__wait_unlocked / __wait_locked: c unlocked, or busy. A live
 * locker is waited for (any number of looks, then VIGIL_EBUSY); a locker
 * judged dead (vigil_lock_judge) is recovered. */
inline wait_unlocked() {
    busy = false;
    do
    :: c = ctl;
       if
       :: !ISLOCKED(c) -> break
       :: else ->
          w = c - 1000;
          if
#ifdef ROB_LIVE
          :: true -> recover(w)
#else
          :: dead[w] -> recover(w)
#endif
          :: true -> busy = true; break   /* the 10 ms budget ran out */
          fi
       fi
    od
}

/* vigil_leases_acquire: take() of the bound key, or bind() of the cleared
 * entry; res true on success. */
inline acquire() {
    res = false;
    wait_unlocked();
    if
    :: busy
    :: else ->
       atomic { b = bound; t = now }         /* key_matches / bind's load; vigil_now_ns() */
       if
       :: b == BOUND && EXP(c) > t -> skip  /* unexpired: VIGIL_EBUSY */
       :: else ->
          if
          :: atomic { ctl == c -> ctl = LOCKED(me) };   /* entry_lock_from */
             gen_hint = GEN(c);
             if
             :: b != BOUND -> bound = BOUND  /* bind(): key written */
             :: else
             fi;
             /* hand_over() */
             atomic { last_token++; tok = last_token };
             token = tok;
             gen_hint = GEN(c) + 1;          /* entry_unlock */
             atomic {
                 assert(tok > granted); granted = tok;
                 ctl = MAKE(GEN(c) + 1, t + TTL);
                 have[me] = true; bdl[me] = t + TTL; mytok = tok
             };
             res = true
          :: else                            /* lost the CAS: EBUSY here */
          fi
       fi
    fi
}

/* renew_or_release(): one CAS from the word checked. */
inline renew_or_release(release) {
    c = ctl;
    if
    :: ISLOCKED(c) -> have[me] = false       /* VIGIL_ELOST */
    :: else ->
       t = now;
       if
       :: EXP(c) <= t -> have[me] = false
       :: else ->
          if
          :: token != mytok || bound != BOUND -> have[me] = false
          :: else ->
             /* LP_RENEW_CHECKED: a pause here is any interleaving */
             if
             :: release ->
                atomic {
                    if
                    :: ctl == c -> ctl = MAKE(GEN(c) + 1, 0); relseq++; r = relseq; res = true
                    :: else -> res = false
                    fi
                };
                if
                :: res ->                    /* vigil_leases__wake_waiters */
                   if
                   :: waiters != 0 ->
                      wake++;
                      atomic { asleep[0] = false; asleep[1] = false; asleep[2] = false }
                   :: else
                   fi;
                   /* no lost wakeup */
                   assert(!(asleep[0] && seen_rel[0] < r) && !(asleep[1] && seen_rel[1] < r) &&
                          !(asleep[2] && seen_rel[2] < r))
                :: else
                fi
             :: else ->
                atomic {
                    if
                    :: ctl == c ->
                       ctl = MAKE(GEN(c), (t + TTL > EXP(c) -> t + TTL : EXP(c)));
                       if :: !have[me] || bdl[me] < t + TTL -> bdl[me] = t + TTL :: else fi;
                       have[me] = true
                    :: else -> have[me] = false  /* a look again finds it lost */
                    fi
                }
             fi
          fi
       fi
    fi
}

/* vigil_leases_acquire_wait: after EBUSY, THE SLEEP. */
inline acquire_wait() {
    do
    :: acquire();
       if
       :: res -> break
       :: else
       fi;
       if
       :: bound != BOUND -> skip             /* entry_of: -1, try at once */
       :: else ->
#ifndef OLD_SLEEP
          v = wake;
          waiters++;
          atomic { c = ctl; seen_rel[me] = relseq };
#else
          v = wake;
          atomic { c = ctl; seen_rel[me] = relseq };
          waiters++;
#endif
          t = now;
          /* sleep_for(): locked, a tick; unexpired, to expiry + 1 */
          if
          :: ISLOCKED(c) || EXP(c) > t ->
             atomic { tmo = (ISLOCKED(c) -> t + 1 : EXP(c) + 1);
                      if :: wake == v -> asleep[me] = true :: else fi };  /* FUTEX_WAIT */
end_sleep:   if
             :: !asleep[me]                  /* woken, or never slept */
             :: atomic { asleep[me] && now >= tmo -> asleep[me] = false }
             fi
          :: else
          fi;
          waiters--
       fi;
       if
       :: ops < OPS -> ops++                 /* each try counts */
       :: else -> break                      /* the caller's timeout */
       fi
    od
}

proctype Client(byte me; byte OPS) {
    int c, g;
    byte w, b, t, tok, mytok, v, r, tmo;
    byte ops = 0;
    bool busy, res;
    {
        do
        :: ops < OPS ->
           ops++;
           if
           :: acquire()
           :: acquire_wait()
           :: mytok != 0 -> renew_or_release(false)
           :: mytok != 0 -> have[me] = false; renew_or_release(true)
           fi
        :: else -> break
        od
    } unless { dead[me] }
}

init {
    atomic { run Client(0, 2); run Client(1, 1); run Client(2, 1) }
}
