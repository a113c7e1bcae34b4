/*
 * vigil_failover_wait's per-slot state across registrations (THE WATCH
 * in src/failover_wait.c): what one watchdog handle knows about a slot
 * (the registration it read, a pidfd, a verdict of death, the version it
 * claims at) while the slot is reclaimed by others and registered again
 * by a process with the same pid and the same start tick.
 *
 * CHECK carry     |                      | -DSAFETY | -m100000 | clean
 * CHECK carry_old | -DOLD_KEY -DOLD_CLAIM | -DSAFETY | -m100000 | error
 * CHECK carry_key | -DOLD_CLAIM          | -DSAFETY | -m100000 | clean
 * CHECK carry_claim | -DOLD_KEY          | -DSAFETY | -m100000 | clean
 * CHECK proc      | -DFOREIGN_PROC       | -DSAFETY | -m100000 | clean
 * CHECK proc_old  | -DFOREIGN_PROC -DOLD_JUDGE | -DSAFETY | -m100000 | error
 * CHECK emfile    | -DEMFILE -DLTL -DNOCLAIMER     | | -a -f -m100000 | clean
 * CHECK emfile_old| -DEMFILE -DLTL -DNOCLAIMER -DOLD_EPOLL | | -a -f -m100000 | error
 *
 * One slot. Registration 1 (gen 1) is process P1's, with pid 7 and start
 * tick 5. P1 may die at any moment; the slot is then reclaimed, by the
 * watchdog W or by another handle C (a scan with the probe, or another
 * process's wait); then P2 is born with P1's pid (recycled) in the same
 * start tick and registers the slot again: gen 2, pid 7, start 5. P2 may
 * die too. W is failover_wait: it reads the slot under the SeqLock, keeps
 * or resets its state, opens a pidfd and judges, looks at the pidfd
 * (readable: its owner has exited) right after the read and sleeps until
 * it is readable, and claims a slot proven dead at the version it read; with
 * max entries reached a wait may stop with a verdict still unclaimed (the
 * choice `skip`), and the next wait starts at the read again.
 *
 * carry, carry_old (issue 17.5): the state is keyed by the registration
 *   (gen), and the claim takes the slot only while it holds the gen the
 *   verdict was about (vigil_failover_claim_dead). carry_old is the steps
 *   before issue 17, state keyed by (pid, start time) and the claim made
 *   at the version last read with the pid: W carries P1's verdict to P2's
 *   registration and claims it at P2's version, a live worker reclaimed.
 *   Each fix alone is enough: carry_key (the keyed state, the old claim)
 *   and carry_claim (the old key, the claim by gen) are clean too, which
 *   is why no test with real processes can see the old key alone any
 *   more (make mutate: failover_wait_verdict_carried). With both old
 *   steps test_failover_wait_ns.c does (failover_wait_verdict_carried_old).
 * proc, proc_old (issue 17.4): /proc is another pid namespace's, so the
 *   start time read for pid 7 is another process's. The judge answers
 *   "unknown" and W watches the pidfd; the old steps took the other start
 *   time for a reused pid and convicted the live owner.
 * emfile, emfile_old (issue 17.7): the process is out of descriptors at
 *   first (for a while, then never again), no other claimer, no epochs.
 *   LTL `seen`, under weak fairness: P1's registration is eventually
 *   claimed (P1 always dies). The old steps made the epoll instance once, and
 *   after EMFILE never watched a pidfd again: only epochs (not modelled)
 *   would ever take the slot.
 *
 * Property (assert, every run): a claim vacates only a registration whose
 * process is dead.
 *
 * What this model leaves out, and why that is safe.
 *
 * - One slot: a wait's per-slot states are independent (each keyed by its
 *   own slot's registration, each claim made at its own slot's version);
 *   what couples slots is only `max`, which stops a wait early, and the
 *   choice `skip` lets W stop with any verdict unclaimed at any point.
 * - The epoch scan. A stale slot is claimed by epochs after its grace
 *   (vigil_failover_scan, model/slot.pml); leaving it out only removes
 *   claims, and every claim that remains is checked. In `emfile` leaving
 *   it out is the point: pidfds alone must come back.
 * - The SeqLock read is one step: the C's read is retried until no writer
 *   overlapped it, so it is one registration's words, as here.
 * - The claim (vigil_failover_claim_dead) is one step, the writer lock
 *   taken only at the version read: model/slot.pml checks that lock with
 *   kills and repairs; here what matters is which version is offered.
 * - Kills of the watchdogs. A watchdog killed at any step leaves its
 *   state in its own memory, gone with it; the slot's words change only
 *   under the writer lock (slot.pml).
 * - The same start tick always: a start tick that differs makes the judge
 *   call a recycled pid's process "reused" at once, which only helps; the
 *   model gives the recurrence its worst case.
 * - Zombies, threads and a pid above INT_MAX: the judge's (test_probe,
 *   test_failover_wait). Here a process is alive or exited.
 */
#ifndef OLD_KEY
#define SAME(p, s, g) (st_gen == g)                   /* registration_key */
#else
#define SAME(p, s, g) (st_pid == p && st_start == s)  /* pid and start time */
#endif

byte ver;             /* the slot's SeqLock version: even at rest */
byte spid, sstart, sgen; /* the slot's pid (0 vacant), start time, gen */
bool alive[3];        /* process Pg alive (P1, P2) */
byte holder;          /* the process that has pid 7 now: 1, 2 or 0 none */
bool p2_born;
bool fdshort;         /* EMFILE now */
#ifdef FOREIGN_PROC
bool foreign = true;  /* /proc is another namespace's */
#else
bool foreign = false;
#endif
byte claimed;         /* ghost: registrations claimed, as a set of bits */

#ifdef LTL
ltl seen { <> (claimed & 2) }
#endif

/* vigil_failover_claim_dead(slot, g, p): under the writer lock, only
 * while the slot holds registration g (and pid p); vacate. OLD_CLAIM: at
 * version v, the pid still p, as before issue 17. A claim must take a
 * dead registration. */
#ifdef OLD_CLAIM
#define HOLDS(v, g, p) (ver == v && spid == p)
#else
#define HOLDS(v, g, p) (sgen == g && spid == p)
#endif
#define CLAIM(v, g, p) \
    atomic { \
        if \
        :: HOLDS(v, g, p) -> \
            assert(!alive[sgen]); \
            claimed = claimed | (1 << sgen); \
            spid = 0; sstart = 0; sgen = 0; ver = ver + 2 \
        :: !HOLDS(v, g, p) \
        fi }

/* P1 lives, then dies; P2 is born with its pid once the slot is free and
 * P1 is gone, registers, and may die too. */
active proctype world()
{
    atomic { ver = 2; spid = 7; sstart = 5; sgen = 1; alive[1] = true; holder = 1 }
#ifdef EMFILE
    fdshort = true;
#endif
    alive[1] = false; holder = 0;
end_w:
    do
#ifndef LTL
    :: atomic { !p2_born && holder == 0 -> p2_born = true; alive[2] = true; holder = 2 }
#else
    /* Not before the slot is free: a stranger born in P1's tick with P1's
     * pid while P1's registration stands is a process the judge cannot
     * tell from P1, so only epochs could take that slot (the limit told
     * in vigil_failover_wait(3)); `seen` is about pidfds coming back. */
    :: atomic { !p2_born && holder == 0 && sgen == 0 -> p2_born = true; alive[2] = true; holder = 2 }
#endif
    :: atomic { p2_born && alive[2] && sgen == 0 && spid == 0 ->
           ver++; spid = 7; sstart = 5; sgen = 2; ver++ }        /* P2 registers */
    :: atomic { alive[2] && sgen == 2 -> alive[2] = false; holder = 0 }
#ifdef EMFILE
    :: atomic { fdshort -> fdshort = false }               /* descriptors come back */
#endif
    od
}

#ifndef NOCLAIMER
/* C: another handle's probe-assisted claim, judging exactly (its /proc is
 * its own): the owner's process dead. */
active proctype other()
{
    byte v, g, p;
end_c:
    do
    :: atomic { (ver & 1) == 0 && sgen != 0 && !alive[sgen] -> v = ver; g = sgen; p = spid };
       CLAIM(v, g, p); v = 0; g = 0; p = 0
    od
}
#endif

/* W: vigil_failover_wait on one handle. */
active proctype W()
{
    byte v, p, s, g;           /* one SeqLock read */
    byte st_pid, st_start, st_gen, st_ver; /* the slot's state */
    byte fd;                   /* the process the pidfd names, 0 none */
    bool dead, watching, retry, epochs;
#ifdef OLD_EPOLL
    bool epfd_failed;
#endif

end_look:
    do
    :: true ->
        /* sync_table step 1: the read, if the slot is at rest */
        atomic { (ver & 1) == 0 -> v = ver; p = spid; s = sstart; g = sgen };
        if
        :: p == 0 ->
            st_pid = 0; st_start = 0; st_gen = 0; fd = 0; dead = false; watching = false;
            retry = false; epochs = false
        :: p != 0 && SAME(p, s, g) && (watching || dead || retry || epochs) ->
            st_ver = v;
            if :: retry -> goto judge :: else fi
        :: else ->
            /* step 2: another registration: from nothing */
            st_pid = p; st_start = s; st_gen = g; st_ver = v;
            fd = 0; dead = false; watching = false; retry = false; epochs = false;
judge:
            retry = false;
#ifdef OLD_EPOLL
            /* epoll made once; EMFILE then meant epochs for good */
            if
            :: epfd_failed -> epochs = true; goto claim
            :: atomic { !epfd_failed && fdshort -> epfd_failed = true; epochs = true }; goto claim
            :: !epfd_failed && !fdshort
            fi;
#endif
            /* step 4: the pidfd names whoever has the pid now */
            atomic {
                if
                :: fdshort -> retry = true
                :: !fdshort && holder == 0 -> dead = true        /* ESRCH */
                :: !fdshort && holder != 0 -> fd = holder
                fi };
            if
            :: fd != 0 ->
                /* step 5: the judge. Both processes have start tick 5,
                 * so a /proc of ours says alive; one of another
                 * namespace shows another process's sstart time. */
#ifdef OLD_JUDGE
                if
                :: foreign -> dead = true; fd = 0                 /* "reused" */
                :: else -> watching = true
                fi
#else
                watching = true                                  /* alive or unknown */
#endif
            :: else
            fi
        fi;
claim:
        /* the look at the pidfds without sleeping, after the read (as the
         * sleep below: a readable pidfd's owner has exited) */
        atomic {
            if
            :: watching && fd != 0 && !alive[fd] -> dead = true; watching = false; fd = 0
            :: else
            fi };
        /* claim_dead, or the wait stops here with max entries written */
        if
        :: dead -> CLAIM(st_ver, st_gen, st_pid);
           st_pid = 0; st_start = 0; st_gen = 0; fd = 0; dead = false; watching = false
#ifndef LTL
        :: dead -> skip     /* max reached: the next wait claims, or not */
#endif
        :: !dead
        fi;
        /* sleep_on_pidfds: a pidfd is readable once the process it names
         * has exited, and epoll says so */
        atomic {
            if
            :: watching && fd != 0 && !alive[fd] -> dead = true; watching = false; fd = 0
            :: else
            fi };
        v = 0; p = 0; s = 0; g = 0
    od
}
