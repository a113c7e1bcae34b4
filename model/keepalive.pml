/*
 * The lease keepalive's stop, join and local expiry (src/keepalive.c:
 * renewer(), watcher(), extend(), is_lost(), mark_lost(),
 * vigil_keepalive_stop(); its comment, LOCAL EXPIRY, names this model).
 *
 * Processes: the renewer thread, the watcher thread (it sleeps on the
 * deadline timer so that the loss is seen even while a renewal hangs in
 * the port), the caller that stops them, an observer calling
 * vigil_keepalive_lost() and polling vigil_keepalive_fd() at any moment,
 * the clock, and the kernel's timer. The port answers each renewal
 * nondeterministically (accepted, refused, transient) and may take any
 * time (Spin interleaves every step, so any thread can be paused
 * anywhere). The threads share one process, so a kill takes them all and
 * proves nothing; the hard case is the pause.
 *
 * The timer is the kernel's timerfd: timerfd_settime stores the expiry
 * and resets the expiration count to 0 (a readable timer turns
 * unreadable), and the expiry fires later, from the kernel's own context
 * (the Kernel process, at any step once it is due), never inside the
 * settime. A relative 1 ns timer is due at once and fires later likewise.
 *
 * Safety:
 *   - no renewal starts after vigil_keepalive_stop has returned;
 *   - lost() is monotonic: once an observer saw true, it never sees false;
 *   - the fd readable implies lost(), and once readable it stays readable;
 *   - the deadline never moves once lost (0 is the latch);
 *   - an accepted renewal moves the deadline to at most the moment the
 *     store took the request plus the TTL (the deadline runs from the send,
 *     never from the answer: a store renews from when it sees the request,
 *     and the keepalive must never believe in a lease the store let lapse);
 *   - stop returns only once both threads have exited, and a lease it
 *     calls lost has the fd readable;
 *   - a stop made by the port's renew, on the renewer itself (runs
 *     self_stop, old_self_stop): no renewal starts after the one it was
 *     made from, and nothing touches the keepalive once it is freed (the
 *     renewer frees it, last, as it leaves).
 *
 * CHECK safety      | -DMAXT=6 -DNREN=2 -DNOBS=0                 | -DSAFETY | -m200000 | clean
 * CHECK observer    | -DMAXT=5 -DNREN=1 -DNOBS=1                 | -DSAFETY | -m200000 | clean
 * CHECK old_timer   | -DMAXT=6 -DNREN=2 -DNOBS=0 -DOLD_TIMER     | -DSAFETY | -m200000 | error
 * CHECK old_is_lost | -DMAXT=5 -DNREN=1 -DNOBS=1 -DOLD_IS_LOST   | -DSAFETY | -m200000 | error
 * CHECK late_sent   | -DMAXT=6 -DNREN=2 -DNOBS=0 -DMUT_LATE_SENT | -DSAFETY | -m200000 | error
 * CHECK self_stop   | -DMAXT=6 -DNREN=2 -DNOBS=0 -DSELF_STOP     | -DSAFETY | -m200000 | clean
 * CHECK old_self_stop | -DMAXT=6 -DNREN=2 -DNOBS=0 -DOLD_SELF_STOP | -DSAFETY | -m200000 | error
 *
 * safety: the renewer (two renewals), the watcher, the stopper and the
 *   invariants, the clock to 6 (two TTLs). observer: one renewal racing a
 *   lost() caller whose every step is interleaved, the clock to 5.
 *
 * old_timer is the C before issue 18: the loss fd was the deadline timer
 * itself, and mark_lost re-armed it to fire in 1 ns unless it had fired.
 * Spin finds the fd turning unreadable: the timer fires between
 * mark_lost's look and its settime, whose reset of the count hides the
 * firing until the new 1 ns timer fires (the same between extend's look
 * and its re-arm). old_is_lost is the first is_lost() written for local
 * expiry: a reader whose latch CAS failed against an accepted renewal
 * answered "not lost" although the renewed deadline had passed too.
 * late_sent takes the renewal's send time after the port answers, as a
 * mutant of the C did (issue 17): the deadline then outruns the store's.
 *
 * self_stop: the port's first renewal stops its own keepalive, on the
 * renewer, in the middle of the renewal (no Stopper process): the stop
 * marks it stopping and detached, and the renewer finishes the stop and
 * frees it when the renewal returns. old_self_stop is the C before issue
 * 27's review: that stop joined itself (EDEADLK, ignored), stopped the
 * watcher and freed the keepalive, and Spin finds the renewal returning
 * into freed memory (the renewer's next lock of the mutex).
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - Kills. The renewer, the watcher and the caller are threads of one
 *     process: a kill ends them all, and then nothing of the keepalive is
 *     left to be wrong (the store's own expiry ends the lease).
 *   - fork. A child gets no threads and only reads the shared page
 *     (deadline, stopped); its stop frees its own copies. Nothing it does
 *     writes a word the model checks, so it adds no interleaving.
 *   - Clock values: time is a few ticks, TTL 3, the beat any time (the
 *     renewer's timed wait is any number of clock steps). The protocol
 *     compares the clock with the deadline and nothing else, so what
 *     matters is the order of the clock against each step, and Spin tries
 *     every order. The lease clock (CLOCK_BOOTTIME) and the beat clock
 *     (CLOCK_MONOTONIC) are one clock here: suspend moves only the first,
 *     which is a jump of `now`, one more interleaving of the same kind.
 *   - The condition variable and the stop eventfd are modelled as flags
 *     that wake their waiter: a missed wake-up is excluded by the mutex
 *     (renewer) and by the eventfd's level-triggered readiness (watcher).
 *   - The port's transient failures are one branch: they change no word
 *     but the counters, which nothing reads for a decision.
 *   - One keepalive: keepalives share nothing but the process.
 *   - In the self_stop runs, an observer and a second stopper: once stop
 *     has been called, whoever touches the keepalive (lost(), stop again)
 *     uses memory the caller gave up, as after any stop; and the stop is
 *     made at the first renewal, since where in the schedule the renewal
 *     falls is the order of the clock against it, which Spin tries.
 */

#define TTL   3
#ifndef MAXT
#define MAXT  7
#endif
#ifndef NREN
#define NREN  3         /* renewals the renewer makes, at most */
#endif
#ifndef NOBS
#define NOBS  2         /* lost() calls the observer makes */
#endif
#define NONE  255

byte now = 0;           /* the lease clock, in ticks */
byte deadline = TTL;    /* ka->sh->deadline; 0 = lost (the latch) */
byte armed = TTL;       /* the timerfd's expiry; NONE: disarmed (fired) */
bool ticks = false;     /* the timerfd's expiration count is not 0: readable */
bool lossfd = false;       /* the loss eventfd has been written */

bool mu = false;        /* ka->mu */
bool stopping = false;  /* under mu: the renewer stops */
bool wstop = false;     /* the stop eventfd: the watcher stops */
bool exited = false;    /* the renewer has exited */
bool wexited = false;   /* the watcher has exited */
bool stop_returned = false;
bool ever_lost = false; /* ghost: the latch was ever set */
bool fdseen = false;    /* ghost: the fd was seen readable */
bool detached = false;  /* under mu: stopped from the renewer, which frees it */
bool freed = false;     /* ghost: the keepalive was freed */

#if defined(SELF_STOP) || defined(OLD_SELF_STOP)
#define BY_RENEW 1      /* the port's renew stops the keepalive: no Stopper */
#endif

inline lock()   { atomic { !mu -> assert(!freed); mu = true } }
inline unlock() { mu = false }

/* timerfd_settime: the expiry (`to` 0: a relative 1 ns, due now) and the
 * count reset, atomically in the kernel; old = the timer had expired (a
 * one-shot timer that fired reads back disarmed). */
inline arm(to, old) {
    atomic {
        old = (armed == NONE);
        armed = (to == 0 -> now : to);
        ticks = false
    }
}

/* The user's fd: the timer itself before issue 18, the eventfd now. */
#ifdef OLD_TIMER
#define FD_READABLE ticks
#else
#define FD_READABLE lossfd
#endif

/* mark_lost(): the latch, then the fd. */
#ifdef OLD_TIMER
inline mark_lost(old) {
    deadline = 0; ever_lost = true;
    if
    :: armed == NONE -> skip              /* timer_fired(): leave it */
    :: else -> arm(0, old)
    fi
}
#else
inline mark_lost(old) {
    deadline = 0; ever_lost = true;       /* the store, release */
    lossfd = true                            /* write(loss_fd): never undone */
}
#endif

/* is_lost(), as the observer runs it: the load and the clock compare
 * (one step: a deadline that moves between them makes the CAS below fail,
 * an interleaving Spin tries anyway); the CAS to 0, judging again the
 * deadline a failed CAS found; the caller whose CAS latched the loss
 * writes the fd. */
#ifdef OLD_IS_LOST
inline is_lost(d, res) {
    atomic {
        d = deadline;
        if
        :: d == 0 -> res = true; d = 0
        :: d != 0 && now < d -> res = false; d = 0
        :: d != 0 && now >= d
        fi
    };
    if
    :: d != 0 ->
        atomic { if :: deadline == d -> deadline = 0; ever_lost = true :: else fi };
        atomic {
            res = (deadline == 0);
            assert(res || now < deadline);       /* "not lost" was true at some moment */
            d = 0
        }
    :: else
    fi
}
#else
inline is_lost(d, res) {
    atomic {
        d = deadline;
        if
        :: d == 0 -> res = true; d = 0
        :: d != 0 && now < d -> res = false; d = 0
        :: d != 0 && now >= d
        fi
    };
    do
    :: d == 0 -> break
    :: d != 0 ->
        atomic {
            if
            :: deadline == d -> deadline = 0; ever_lost = true; res = true; d = 0
#ifndef OLD_TIMER
                ; lossfd = true
#endif
            :: else ->                           /* judged again: the value the CAS found */
                d = deadline;
                if
                :: d == 0 -> res = true
                :: d != 0 && now < d -> res = false; d = 0
                :: d != 0 && now >= d
                fi
            fi
        }
    od
}
#endif

/* is_lost() as one step, for the renewer, the watcher and the stopper:
 * the same code as the observer's, whose every step Spin interleaves
 * with the others (the observer stands for every caller's race with a
 * renewal). */
inline is_lost_now(res) {
    atomic {
        if
        :: deadline == 0 -> res = true
        :: deadline != 0 && now < deadline -> res = false
        :: deadline != 0 && now >= deadline -> deadline = 0; ever_lost = true; res = true
        fi;
#ifndef OLD_TIMER
        if :: res -> lossfd = true :: else fi
#endif
    }
}

/* The clock, and the kernel firing a due timer later, from its own
 * context, never inside a settime. */
active proctype Clock() {
end:
    do
    :: now < MAXT -> now++
    :: atomic { armed != NONE && now >= armed -> ticks = true; armed = NONE }
    od
}

#ifdef BY_RENEW
/* vigil_keepalive_stop() called from the port's renew, on the renewer. */
inline self_stop(res, old) {
#ifdef OLD_SELF_STOP
    lock(); stopping = true; unlock();   /* pthread_join(self): EDEADLK, ignored */
    wstop = true; wexited;               /* stop_watcher() */
    is_lost_now(res);
    if :: res -> mark_lost(old) :: else fi;
    freed = true;                        /* free_keepalive(), under the renewal */
#else
    lock(); stopping = true; detached = true; unlock();  /* pthread_detach(self) */
    is_lost_now(res);                    /* the verdict known now */
#endif
    stop_returned = true
}
#endif

active proctype Renewer() {
    byte from, sent, to, reqt, n;
    bool res, old;
    lock();
    do
    :: stopping -> break
    :: !stopping && n == NREN -> break
    :: !stopping && n < NREN ->
        n++;
        is_lost_now(res);
        if
        :: res -> break
        :: else
        fi;
        /* due (the timed wait is any number of steps: the clock runs) */
        from = deadline;
        unlock();
#ifndef MUT_LATE_SENT
        sent = now;                      /* vigil_lease_now_ns(), then renew() */
#endif
        assert(!stop_returned);          /* port.renew() called */
#ifdef BY_RENEW
        if
        :: n == 1 -> self_stop(res, old) /* the port's renew stops its own keepalive */
        :: else
        fi;
#endif
        reqt = now;                      /* the store takes the request */
        if
        :: true -> /* accepted */
#ifdef MUT_LATE_SENT
            sent = now;                  /* the answer's time */
#endif
            lock();
            to = sent + TTL;
#ifdef OLD_TIMER
            /* extend(): a fired timer is never re-armed; else re-arm first
             * (it may fire between the look and the re-arm) */
            if
            :: armed == NONE -> old = true
            :: else -> arm(to, old)
            fi;
            if
            :: from == 0 || old -> mark_lost(old); break
            :: else
            fi
#else
            /* extend(): an answer that came at or after the deadline
             * proves nothing before it: lost. */
            if
            :: atomic { from == 0 || now >= from } -> mark_lost(old); break
            :: else
            fi
#endif
            /* CAS the deadline from the one the renewal started from (a
             * reader's latch makes it fail) */
            atomic {
                if
                :: deadline == from ->
                    assert(to <= reqt + TTL);    /* from the send */
                    deadline = to; res = false
                :: else -> res = true
                fi
            };
            if :: res -> mark_lost(old); break :: else fi;
#ifndef OLD_TIMER
            arm(to, old);                    /* the watcher's timer, moved */
#endif
            from = 0; sent = 0; to = 0; reqt = 0
        :: true -> /* refused: VIGIL_ELOST */
            lock(); mark_lost(old); break
        :: true -> /* transient */
            lock(); from = 0; sent = 0; reqt = 0
        fi
    od;
    is_lost_now(res);
    if :: res -> mark_lost(old) :: else fi;
    exited = true;
    res = detached;                      /* read under mu */
    unlock();
    if
    :: res ->                            /* finish_stop(), for the stop made inside renew */
        wstop = true; wexited;           /* the watcher joined */
        is_lost_now(res);
        if :: res -> mark_lost(old) :: else fi;
        assert(!res || FD_READABLE);
        freed = true                     /* free_keepalive(): the last touch */
    :: else
    fi
}


#ifndef OLD_TIMER
/* watcher(): poll(timer, stop); a fired timer is read (the count back to
 * 0) and the clock judged; once the loss is latched it leaves. */
active proctype Watcher() {
    bool res, old;
    do
    :: atomic { ticks -> ticks = false };
        is_lost_now(res);
        if :: res -> mark_lost(old); break :: else fi
    :: wstop -> break
    od;
    wexited = true
}
#endif

#ifndef BY_RENEW
active proctype Stopper() {
    bool res, old;
    lock(); stopping = true; unlock();   /* set under mu, signal */
#ifndef OLD_TIMER
    wstop = true;                        /* write(stop_fd) */
    wexited;                             /* pthread_join */
#endif
    exited;                              /* pthread_join */
    stop_returned = true;
    is_lost_now(res);                    /* stop's return value */
#ifndef OLD_TIMER
    if :: res -> mark_lost(old) :: else fi;
    assert(!res || FD_READABLE)          /* ELOST: the fd is readable already */
#endif
}
#endif

/* An observer calling vigil_keepalive_lost(): it never goes back. */
active proctype Observer() {
    byte d, n;
    bool res, saw = false;
    do
    :: n < NOBS -> n++;
       is_lost(d, res);
       assert(!saw || res);
       saw = saw || res
    :: else -> break
    od
}

/* Checked on every state: the latch never opens again; a readable fd
 * means lost() answers true (the latch, or the clock past the deadline),
 * and it never turns unreadable. */
active proctype Invariants() {
end:
    do
    :: atomic { ever_lost && deadline != 0 -> assert(!ever_lost || deadline == 0) }
    :: atomic { FD_READABLE && deadline != 0 && now < deadline ->
                assert(!FD_READABLE || deadline == 0 || now >= deadline) }
    :: atomic { FD_READABLE && !fdseen -> fdseen = true }
    :: atomic { fdseen && !FD_READABLE -> assert(!fdseen || FD_READABLE) }
    od
}
