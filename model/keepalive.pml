/*
 * The lease keepalive's stop, join and local expiry (src/keepalive.c:
 * renewer(), extend(), is_lost(), mark_lost(), arm_timer(),
 * vigil_keepalive_stop(); its comment, LOCAL EXPIRY, names this model).
 *
 * Processes: the renewer thread, the caller that stops it, an observer
 * calling vigil_keepalive_lost() and polling vigil_keepalive_fd() at any
 * moment, and the clock. The port answers each renewal nondeterministically
 * (accepted, refused, transient) and may take any time (the renewer can
 * be paused anywhere: Spin interleaves every step). The threads share one
 * process, so a kill takes them all and proves nothing; the hard case is
 * the pause, and every interleaving is one.
 *
 * Safety:
 *   - no renewal starts after vigil_keepalive_stop has returned;
 *   - lost() is monotonic: once an observer saw true, it never sees false;
 *   - the fd readable implies lost();
 *   - the deadline never moves once lost (0 is the latch);
 *   - stop returns only once the renewer has exited.
 *
 * CHECK safety | | -DSAFETY | -m200000 | clean
 * CHECK old_is_lost | -DOLD_IS_LOST | -DSAFETY | -m200000 | error
 */

#define TTL   3
#define MAXT  8

byte now = 0;           /* CLOCK_MONOTONIC, in ticks */
byte deadline = TTL;    /* ka->sh->deadline; 0 = lost (the latch) */
byte armed = TTL;       /* the timerfd's expiry, 0 = armed at once */
bool fired = false;     /* the timerfd has expired: the fd is readable */

bool mu = false;        /* ka->mu */
bool stopping = false;  /* under mu */
bool exited = false;
bool stop_returned = false;
bool ever_lost = false; /* the latch was ever set */

inline lock()   { atomic { !mu -> mu = true } }
inline unlock() { mu = false }

/* arm_timer(): timerfd_settime, atomic in the kernel; old = had it fired. */
inline arm(to, old) {
    atomic {
        old = fired;
        armed = to;
        fired = (to == 0 || now >= to)
    }
}

/* is_lost(): load; clock compare; CAS to 0, judging again the deadline a
 * failed CAS found. (The first version returned "deadline == 0" after a
 * failed CAS: Spin found the observer that then called a lease whose
 * renewed deadline had also passed "not lost" while its fd was readable.) */
#ifdef OLD_IS_LOST
inline is_lost(d, res) {
    d = deadline;
    if
    :: d == 0 -> res = true
    :: d != 0 && now < d -> res = false
    :: d != 0 && now >= d ->
        atomic { if :: deadline == d -> deadline = 0; ever_lost = true :: else fi };
        res = (deadline == 0)
    fi
}
#else
inline is_lost(d, res) {
    d = deadline;
    do
    :: d == 0 -> res = true; break
    :: d != 0 && now < d -> res = false; break
    :: d != 0 && now >= d ->
        atomic {
            if
            :: deadline == d -> deadline = 0; ever_lost = true; res = true
            :: else -> d = deadline; res = false
            fi
        };
        if :: res -> break :: else fi
    od
}
#endif

/* mark_lost(): the latch, then re-fire the timer unless it has fired
 * (timer_fired(): timerfd_gettime), so a readable fd never turns
 * unreadable here. */
inline mark_lost(old) {
    deadline = 0; ever_lost = true;   /* the store, release */
    if
    :: fired -> skip
    :: !fired -> arm(0, old)
    fi
}

active proctype Clock() {
    do
    :: now < MAXT -> atomic { now++; fired = fired || (armed != 0 && now >= armed) }
    :: now >= MAXT -> break
    od
}

active proctype Renewer() {
    byte d, from, sent, to;
    bool res, old;
    lock();
    do
    :: stopping -> break
    :: else ->
        is_lost(d, res);
        if
        :: res -> break
        :: else ->
            /* due (the timed wait is any number of steps: the clock runs) */
            from = deadline;
            unlock();
            sent = now;
            assert(!stop_returned);          /* port.renew() called */
            if
            :: true -> /* accepted */
                lock();
                to = sent + TTL;
                /* extend(): a fired timer is never re-armed; else re-arm
                 * first (it may fire between the look and the re-arm) */
                if
                :: fired -> old = true
                :: !fired -> arm(to, old)
                fi;
                if
                :: from == 0 || old -> mark_lost(old); break
                :: else ->
                    atomic {
                        if
                        :: deadline == from -> assert(deadline != 0); deadline = to
                        :: else -> res = true
                        fi
                    };
                    if :: res -> mark_lost(old); break :: else fi
                fi
            :: true -> /* refused: VIGIL_ELOST */
                lock(); mark_lost(old); break
            :: true -> /* transient */
                lock()
            fi
        fi
    od;
    is_lost(d, res);
    if :: res -> mark_lost(old) :: else fi;
    exited = true;
    unlock()
}

active proctype Stopper() {
    byte d;
    bool res;
    lock(); stopping = true; unlock();   /* set under mu, signal */
    exited;                              /* pthread_join */
    stop_returned = true;
    is_lost(d, res)                      /* stop's return value */
}

active proctype Observer() {
    byte d;
    bool res, saw = false, f;
    do
    :: is_lost(d, res);
       assert(!saw || res);              /* lost() never goes back */
       saw = saw || res
    :: atomic { f = fired };
       if
       :: f -> is_lost(d, res); assert(res)  /* readable fd: lost */
       :: else
       fi;
       saw = saw || f
    :: stop_returned -> break
    od
}

/* The latch never opens again: checked on every state. */
active proctype Latch() {
end:
    do
    :: atomic { ever_lost && deadline != 0 -> assert(false) }
    od
}
