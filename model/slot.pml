/*
 * A heartbeat slot: registrations named by their generation, THE FENCE on
 * marks and clears, and THE SLOT WRITER LOCK with its repair, as they are
 * now (src/heartbeat_internal.h: REGISTRATIONS AND THEIR GENERATIONS, THE
 * SLOT WRITER LOCK; src/proc_internal.h: LOCK PAIRS; src/heartbeat.c:
 * claim_vacant, may_change, vigil_hb_unregister, vigil_hb_set_role;
 * include/vigil/heartbeat.h: THE FENCE, vigil_hb_in_flight_inline;
 * src/failover.c: scan_table, claim, repair, vacate_locked).
 *
 * One slot. Any process is killed at any step (K) and from then on dead;
 * any is paused for any length (every interleaving), and a paused or
 * preempted owner may look stale to a scanner at any moment, so a scanner
 * may judge any owner stale at any read (the stale claim, which also
 * stands for the probe's "dead").
 *
 * What hid issue 17's bugs is here: names that recur. R2's pid may be R1's
 * (SAME_PID: a pid of another namespace, or recycled), and R2's lock word
 * may be R1's (SAME_WORD: R1's pid recycled by R2 in the same clock tick;
 * R2 then starts only once R1 is dead). And a unit handed to a successor
 * in the same slot: R1 marks unit 1, may be failed over while it works,
 * and R2 registers into the slot and marks the same bit; R1, stale, then
 * clears its unit, sets its role and unregisters.
 *
 * CHECK fence     | -DSAME_PID                    | -DSAFETY | -m100000 | clean
 * CHECK clear_old | -DSAME_PID -DOLD_CLEAR        | -DSAFETY | -m100000 | error
 * CHECK fence_old | -DSAME_PID -DOLD_STEPS        | -DSAFETY | -m100000 | error
 * CHECK aba       | -DABA -DSAME_WORD             | -DSAFETY | -m100000 | clean
 * CHECK aba_old   | -DABA -DSAME_WORD -DOLD_TAKEOVER | -DSAFETY | -m100000 | error
 * CHECK two_scan  | -DABA -DSCAN2                 | -DSAFETY | -m100000 | clean
 *
 * fence: R1 (register, mark 1, clear 1, set_role, unregister), R2 with
 *   R1's pid (register once the slot is vacant, mark 1), one scanner
 *   scanning twice. clear_old: the clear as it was before issue 17 (pid
 *   != 0 checked, then fetch_and): Spin finds R1 failed over while it
 *   worked, R2 registered into the slot and marking the same bit, and
 *   R1's stale clear removing R2's unit (issue 17.3). fence_old: every
 *   step as it was (mark, clear and set_role checked the pid, then wrote;
 *   unregister checked pid and start time, the same for a recurring
 *   pid): Spin finds a stale change to the successor.
 * aba: R1 killed anywhere in its register, R2 with R1's lock word
 *   starting after R1 died, two scanners scanning once each: a repair's
 *   take-over judged R1 dead and is paused; the other scanner repairs; R2
 *   takes the lock. aba_old: the take-over from the word alone (the C
 *   before issue 17 took `writer` by a compare-and-swap from the word it
 *   judged): Spin finds the paused scanner robbing R2 (issue 17.6).
 * two_scan: the same without recurring words, two scanners racing to
 *   repair and claim.
 *
 * Safety (asserts):
 *   - the version never goes backwards (every store to seq is checked);
 *   - a writer's lock is taken over only from a dead holder;
 *   - a registrant's pid lands only on a vacant slot, and no two
 *     registrations hold the slot at once;
 *   - every change a registrant makes to the slot (a mark, a clear, its
 *     role, its unregister) lands while the slot holds its own
 *     registration: a stale one changes nothing of a successor's;
 *   - a registration is vacated once, and when everyone is done every
 *     unit a registrant marked and did not clear itself is in the slot,
 *     was handed to a scanner with that registration, or was dropped by
 *     its own unregister.
 *
 * WHAT THIS MODEL LEAVES OUT, AND WHY THAT IS SAFE
 *
 *   - One slot and two registrations. Slots share nothing but the epoch
 *     and the mapping: every protocol step names one slot, so two slots
 *     interleave as independent copies of this one. Two registrations
 *     are the fewest that let one be the other's stale predecessor and
 *     successor; a third would be a successor's successor, the same step
 *     again with a gen one higher.
 *   - Generations do not wrap (a byte; 2 registrations). In the C a gen
 *     is below 2^43 and a slot whose gen reaches that is retired, so no
 *     gen recurs (heartbeat_internal.h).
 *   - The version does not wrap: 64 bits rising one per change.
 *   - Each 16-byte compare-and-swap is one atomic step, as the hardware
 *     makes it (lock cmpxchg16b; ldaxp/stlxp that stores even on a
 *     mismatch). The loads that guess a swap's expected value are left
 *     out: a wrong guess only fails the swap, which then retries with
 *     the values it read, and a retry reads no older value.
 *   - Memory order. Spin interleaves whole steps, sequentially
 *     consistent. The C keeps the orders this relies on by argument,
 *     told beside each: the swaps are full barriers; the release fence
 *     after the lock's swap orders the odd version before the fields
 *     (vigil_slot_locked); the unlock is a release store; a SeqLock
 *     reader's acquire fence keeps its field loads before its second load
 *     of the version (vigil_slot_read). Orders on fields written under the
 *     lock are relaxed: the lock orders them. A relaxed load can only make
 *     a guess stale, which a swap catches.
 *   - The judge of "dead" is an oracle: a word is dead when no live,
 *     started process has it. The real judge (vigil_lock_holder_dead) can
 *     only err towards "alive" (another namespace, an unreadable /proc),
 *     which is a wait, never a robbery; and as here it judges a word after
 *     the holding was read, so a process with that word that took the lock
 *     before the read is covered by the verdict (it existed) and one that
 *     took it after has another version.
 *   - Snapshots, beats and live counts are left out: they write no word a
 *     writer reads under the lock except last_seen_epoch, whose every
 *     value the nondeterministic "stale or not" of the scanner covers.
 *   - Registrants do not retry after VIGIL_EFULL more than twice, and R2
 *     registers only once the slot is vacant: the rest is the same steps
 *     on a slot already held, which fail at the pid filter.
 */
#define NONE 0
#define R1 1
#define R2 2
#define S1 3
#define S2 4
#define NPROC 4
#define U 1                     /* the unit: bit 1, for both registrants */
#define VAC 64                  /* VIGIL_GEN_VACANT */
#define OCCUPIED(g) ((g) != 0 && (g) < VAC)

#ifdef SAME_PID
#define PID_R2 1                /* R2's pid is R1's */
#else
#define PID_R2 2
#endif
#ifdef SAME_WORD
#define WORD_R2 1               /* R2's lock word is R1's */
#else
#define WORD_R2 2
#endif
#define PID_OF(r) ((r) == R1 -> 1 : PID_R2)
#define WORD_OF(p) ((p) == R1 -> 1 : ((p) == R2 -> WORD_R2 : (p)))

byte seq;               /* slot offset 40: SeqLock version, odd while locked */
byte writer;            /* slot offset 32: lock word of the holder, or of the last one */
byte owner;             /* slot offset 0: pid, 0 vacant */
byte gen;               /* slot offset 24: 0, g occupied, VAC + g vacant */
byte bits;              /* slot offset 16: in_flight */
byte role;              /* slot offset 4 */
bool killed[NPROC + 1];
bool started[NPROC + 1];

/* ghost */
byte holder;            /* the process holding the lock, NONE while free */
byte cur;               /* whose registration holds the slot, NONE */
byte mygen[3];          /* the gen each registrant's handle noted */
bool vacated[3];        /* registration r was vacated (by a scanner) */
byte marked[3];         /* units r marked and did not clear itself */
byte handed[3];         /* units handed to a scanner with r's registration */
byte dropped[3];        /* units dropped by r's own unregister */
byte done;              /* processes finished or dead */

#define K(me) if :: skip :: killed[me] = true; goto out fi

/* Every store to seq: versions only grow (no wrap in this model). */
#define SET_SEQ(to) assert((to) > seq); seq = (to)

/* The judge (vigil_lock_holder_dead): dead when no started process that
 * is alive has the word. */
#define ALIVE_WITH(w, p) (WORD_OF(p) == (w) && started[p] && !killed[p])
#define DEAD(w) !(ALIVE_WITH(w, R1) || ALIVE_WITH(w, R2) || ALIVE_WITH(w, S1) || ALIVE_WITH(w, S2))

/* vigil_pair_take as vigil_slot_try_lock: {any, even} -> {me, odd}. */
inline try_lock(me, v, ok) {
    atomic {
        if
        :: seq % 2 == 0 -> v = seq; SET_SEQ(v + 1); writer = WORD_OF(me); holder = me; ok = true
        :: else -> ok = false
        fi
    }
}

/* vigil_slot_unlock: the release store of v + 2. Only the holder moves an
 * odd version, so it is a store. */
inline unlock(me, v) {
    atomic { assert(holder == me && seq == v + 1); SET_SEQ(v + 2); holder = NONE }
}

/* claim_vacant: the pid filter, the lock, the checks under it, in_flight
 * 0, the gen, the pid, the unlock. */
inline register(me, v, ok) {
    if
    :: owner != NONE -> ok = false
    :: owner == NONE ->
        K(me);
        try_lock(me, v, ok);
        if
        :: ok ->
            K(me);
            if
            :: owner != NONE || OCCUPIED(gen) -> unlock(me, v); ok = false
            :: else ->
                K(me);
#ifndef OLD_MARK
                atomic { assert(bits == 0); bits = 0 };   /* in_flight = 0: nothing stray since the fence */
#else
                bits = 0;                                 /* in_flight = 0: stray bits dropped */
#endif
                K(me);
                atomic { assert(cur == NONE); gen = gen % VAC + 1; mygen[me] = gen; cur = me };
                K(me);
                atomic { assert(owner == NONE); owner = PID_OF(me) };
                K(me);
                unlock(me, v)
            fi
        :: else
        fi
    fi
}

/* A change by registrant `me` landing on the slot: it must be its own.
 * The steps before issue 17 could land on a slot vacated meanwhile,
 * which was accepted then (a stray bit, a role register resets): they
 * are held only to never landing on a successor's. */
#define MINE(me) assert(cur == me)
#define NOT_ANOTHERS(me) assert(cur == me || cur == NONE)

#ifdef OLD_STEPS
#define OLD_MARK
#define OLD_CLEAR
#define OLD_ROLE
#define OLD_UNREG
#endif

/* THE FENCE: one 16-byte swap of {in_flight, gen} against the handle's
 * gen. Before issue 17 (OLD_MARK, OLD_CLEAR): the pid checked, then the
 * bitmap's fetch_or or fetch_and; a mark that landed on a slot vacated
 * meanwhile was a stray bit, taken by the next scan or dropped by the
 * next register (accepted then), but one that lands on a successor's
 * registration is the bug. */
#ifndef OLD_MARK
inline mark(me) {
    atomic { if :: gen == mygen[me] -> MINE(me); bits = bits | U; marked[me] = marked[me] | U :: else fi }
}
#else
inline mark(me) {
    if
    :: owner != NONE ->
        K(me);
        atomic { NOT_ANOTHERS(me); bits = bits | U; if :: cur == me -> marked[me] = marked[me] | U :: else fi }
    :: else
    fi
}
#endif
#ifndef OLD_CLEAR
inline clear(me) {
    atomic { if :: gen == mygen[me] -> MINE(me); bits = bits & ~U; marked[me] = marked[me] & ~U :: else fi }
}
#else
inline clear(me) {
    if
    :: owner != NONE -> K(me); atomic { NOT_ANOTHERS(me); bits = bits & ~U; marked[me] = marked[me] & ~U }
    :: else
    fi
}
#endif
/* vigil_hb_set_role: the gen checked under the lock; before issue 17
 * (OLD_ROLE) the pid checked, then the store. */
#ifndef OLD_ROLE
inline set_role(me, v, ok) {
    try_lock(me, v, ok);
    if
    :: ok -> K(me);
        atomic { if :: gen == mygen[me] -> MINE(me); role = 1 :: else fi };
        K(me); unlock(me, v)
    :: else
    fi
}
#else
inline set_role(me, v, ok) {
    if
    :: owner != NONE -> K(me); atomic { NOT_ANOTHERS(me); role = 1 }
    :: else
    fi
}
#endif
/* vigil_hb_unregister: the gen checked under the lock; before issue 17
 * (OLD_UNREG) pid and start time, the same for a recurring pid. */
#ifndef OLD_UNREG
#define MAY_CHANGE(me) (gen == mygen[me])
#else
#define MAY_CHANGE(me) (owner == PID_OF(me))
#endif

inline unregister(me, v, ok) {
    try_lock(me, v, ok);
    if
    :: ok ->
        K(me);
        if
        :: MAY_CHANGE(me) && owner != NONE ->
            atomic { MINE(me); owner = NONE };
            K(me);
            atomic { gen = (gen % VAC) + VAC; dropped[me] = dropped[me] | bits; bits = 0; cur = NONE };
            K(me);
            role = 0;
            K(me);
            unlock(me, v)
        :: else -> unlock(me, v)  /* VIGIL_ELOST or VIGIL_EVACANT */
        fi
    :: else
    fi
}

proctype Registrant(byte me) {
    byte v, tries;
    bool ok;
#ifdef SAME_WORD
    /* R1's pid recycled: R2 exists only once R1 is dead */
    if :: me == R2 -> end_wait: (killed[R1]) :: else fi;
#else
    /* R2 registers into the slot R1 left (failed over, or unregistered) */
    if :: me == R2 -> end_vacant: (mygen[R1] != 0 && owner == NONE) :: else fi;
#endif
    started[me] = true;
    do
    :: tries < 2 ->
        tries++;
        register(me, v, ok);
        if :: ok -> break :: else fi
    :: else -> goto out
    od;
#ifndef ABA
    K(me);
    mark(me);
    if
    :: me == R1 ->
        K(me);
        clear(me);              /* R1's unit done: possibly stale */
        K(me);
        set_role(me, v, ok);
        K(me);
        unregister(me, v, ok)
    :: else
    fi;
#endif
out:
    atomic { done++ }
}

/* vacate_locked: the pid by compare-and-swap, then {in_flight, gen} by one
 * swap: the bits handed over, the gen marked vacant. */
inline vacate(p, g) {
    atomic { if :: owner == p -> owner = NONE; ok = true :: else -> ok = false fi };
    if
    :: ok ->
        K(me);
        atomic {
            if
            :: cur != NONE ->
                assert(!vacated[cur]); vacated[cur] = true;
                handed[cur] = handed[cur] | bits
            :: else
            fi;
            bits = 0; gen = (gen % VAC) + VAC; cur = NONE
        };
        K(me);
        role = 0
    :: else
    fi
}

proctype Scanner(byte me) {
    byte v, w, g, p, lv, round;
    bool ok;
    started[me] = true;
    do
#if defined(ABA)
    :: round < 1 ->
#else
    :: round < 2 ->
#endif
        round++;
        /* scan_table's filter and vigil_pair_read: the version and the
         * writer as one moment had them; pid and gen after the fence */
        atomic { v = seq; w = writer };
        K(me);
        if
        :: v % 2 == 1 ->
            /* THE REPAIR: judged after the holding was read */
            if
            :: DEAD(w) ->
                K(me);              /* SP_JUDGED */
                atomic {
#ifdef OLD_TAKEOVER
                    if :: writer == w && seq % 2 == 1 -> ok = true :: else -> ok = false fi;
#else
                    if :: writer == w && seq == v -> ok = true :: else -> ok = false fi;
#endif
                    if
                    :: ok -> assert(killed[holder]); holder = me; writer = WORD_OF(me);
                        lv = seq + 1; SET_SEQ(seq + 2)
                    :: else
                    fi
                };
                if
                :: ok ->
                    K(me);
                    /* judged under the lock: vacant or stale/dead: vacate;
                     * or live: keeps its slot */
                    p = owner;
                    if :: vacate(p, 0) :: p != NONE -> skip fi;
                    K(me);
                    unlock(me, lv)
                :: else
                fi
            :: else                 /* alive, or not judged dead */
            fi
        :: v % 2 == 0 ->
            atomic { p = owner; g = gen };
            if
            :: p != NONE && OCCUPIED(g) ->
                if
                :: skip                     /* judged live */
                :: K(me);
                    /* THE CLAIM: locked, then only the registration judged */
                    try_lock(me, lv, ok);
                    if
                    :: ok ->
                        K(me);
                        if
                        :: gen == g && owner == p -> vacate(p, g)
                        :: else                   /* changed, or a late beat */
                        fi;
                        K(me);
                        unlock(me, lv)
                    :: else
                    fi
                fi
            :: else
            fi
        fi;
        v = 0; w = 0; g = 0; p = 0; lv = 0; ok = false
    :: else -> break
    od;
out:
    atomic { done++ }
}

init {
    atomic {
        run Registrant(R1);
        run Registrant(R2);
        run Scanner(S1);
#if defined(ABA) && (defined(SCAN2) || defined(SAME_WORD))
        run Scanner(S2)
#else
        done++
#endif
    }
}

active proctype Invariants() {
end:
    do
    :: atomic { done == NPROC ->
        /* every unit a registrant marked and did not finish is in the
         * slot, handed over with its registration, or dropped by it */
        assert((marked[R1] & ~(handed[R1] | dropped[R1] | (cur == R1 -> bits : 0))) == 0);
        assert((marked[R2] & ~(handed[R2] | dropped[R2] | (cur == R2 -> bits : 0))) == 0);
        break }
    od
}
