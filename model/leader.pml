/*
 * Leadership told (issue 31): the group watch's leader events
 * (src/group/group_watch.c, THE LEADER) and `vigil group join
 * --leader-only` handing CMD from one host to the next
 * (tools/group_lead.c). Tests: tests/etcd_test_group_leader.c,
 * tests/etcd_test_tool_leader.c.
 *
 * CHECK watch      | -DWATCH                      | -DSAFETY | -m100000 | clean
 * CHECK compacted  | -DWATCH -DCOMPACT             | -DSAFETY | -m100000 | clean
 * CHECK watch_old  | -DWATCH -DMUT_REREAD          | -DSAFETY | -m100000 | error
 * CHECK perevent   | -DWATCH -DMUT_PEREVENT        | -DSAFETY | -m100000 | error
 * CHECK handover   | -DHANDOVER                    | -DSAFETY | -m100000 | clean
 * CHECK noloss     | -DHANDOVER -DMUT_NOLOSS       | -DSAFETY | -m100000 | error
 * CHECK earlyjoin  | -DHANDOVER -DMUT_EARLYJOIN    | -DSAFETY | -m100000 | error
 *
 * watch: a world makes a history of revisions (a member joins, with the
 * revision as its term; a member leaves; or, a stranger's txn, two leave
 * at one revision), and the watcher follows it, its stream breaking at
 * any step. After a break it replays from the revision after the last it
 * applied, unless etcd compacted that far (COMPACT lets the world compact
 * at any step): then it reads the revision now. It judges the leader (the
 * lowest term known) once a revision is applied whole, and tells it when
 * it differs from the last told. Asserted: every term told led at some
 * revision of the history; the terms told rise (each at most once, in
 * order); and, without compaction, once the watcher has caught up with a
 * finished history, every term that led at some revision was told.
 * watch_old: after every break the watcher reads the revision now (the
 * watch before issue 31, src/etcd/group_watch.c at main before 38756da): a term that led only between two readings is
 * never told. Spin finds it. perevent: the leader judged after each event
 * rather than each revision: the stranger's txn makes a leader of the
 * member between its two deletions, which never led. Spin finds it.
 *
 * handover: two hosts, each a tool and its CMD. A tool joins (a member
 * key whose create revision is its term), starts CMD when the leader (the
 * lowest live term, as its watch reads it) is its own term, stops it
 * (SIGTERM: CMD terminating, dead at any later step: the --kill-after
 * grace) when its keepalive says the membership is lost or the watch
 * names another leader, and only once CMD is dead leaves and joins again.
 * The network may fail a host's renewals at any step; etcd may then
 * expire its lease, but only once that host's tool has found the loss or
 * is stopped (the keepalive times the lease from the sending of the last
 * accepted renewal, etcd from its arrival: the local lapse comes first,
 * while the tool runs). A tool may be stopped (SIGSTOP) and continued,
 * killed (its CMD dies with it, PR_SET_PDEATHSIG SIGKILL; its lease is
 * revoked by the agent or expires); a key may be revoked by hand.
 * Asserted when a CMD starts: the other host's CMD is dead, or terminating
 * (within its grace), or its tool is stopped, or its lease expired while
 * its tool was stopped and, resumed, it has not yet acted, or its key was
 * revoked by hand and its tool has not yet seen it (the windows vigil(1)
 * names, that only the term fences); and a host never runs two CMDs. noloss: the tool
 * stops CMD only on the watch's word, not on its own keepalive's: etcd
 * expires the lease and the next leader starts beside a CMD whose tool
 * runs and should have known. earlyjoin: the tool joins again as soon as
 * CMD is told to stop, not once it is dead: the same host runs two. Spin
 * finds both.
 *
 * What this model leaves out, and why that is safe:
 * - Time: the one timing fact the handover rests on (a running tool finds
 *   a lapse before etcd does) is the guard on the expiry step; the grace
 *   is CMD terminating for any number of steps. A stopped tool is the
 *   case where that fact does not hold, and the model allows the overlap
 *   there, as vigil(1) says.
 * - etcd's transactions and reads are atomic steps (etcd's contract); the
 *   watch's delivery is the history in revision order (etcd's watch
 *   contract), each break losing only what the stream had not yet handed
 *   out.
 * - The watch's lag at a start: the tool starts CMD on its watch's last
 *   leader event, which may be behind etcd (a replay after a break tells
 *   the leaders in between), where the model reads the leader as it is.
 *   An event naming this member's current term that is no longer true
 *   means its key went, since a member leads until its key goes: by a
 *   lapse (then the keepalive found it first, and the start looks at
 *   vigil_group_lost), by hand (byhand), or while stopped (stale): the
 *   windows the assertion allows. Stopping on a lagging watch is only a
 *   later stop, which the model has (a step taken at any later time).
 * - A reading of members/ after the watch's count disagrees (a stream
 *   from a member that lags) is the compacted run's reading step.
 * - A leave whose revoke etcd never got leaves the key to lapse: a key
 *   that names no running tool's term, so it starts nothing; the model
 *   drops it at the leave, which only lets the other host start sooner.
 * - Names, hosts, pids: a term is a member's identity (a join revision
 *   never recurs).
 * - Two hosts, three joins each at most, a history of six revisions: a
 *   third host adds interleavings of the same steps, no new kind of step.
 */

#define NONE 0

#ifdef WATCH
/* ---- the watch ---------------------------------------------------------- */
#define MAXREV 6
#define NTERMS 8 /* terms are revisions 1..MAXREV */

byte hist[MAXREV + 1];  /* the live members after each revision: bit t = term t */
byte rev = 0;           /* the world's revision */
byte compacted = 0;     /* revisions up to this one are gone from etcd's history */
bool done = false;      /* the world made its last revision */
byte led = 0;           /* every term that led at some revision (bit t) */
byte second[MAXREV + 1];/* a revision's second deletion (the stranger's txn), or 0 */

inline lowest(set, t) {
    t = 0;
    if
    :: set & 2 -> t = 1
    :: else -> if
        :: set & 4 -> t = 2
        :: else -> if
            :: set & 8 -> t = 3
            :: else -> if
                :: set & 16 -> t = 4
                :: else -> if
                    :: set & 32 -> t = 5
                    :: else -> if :: set & 64 -> t = 6 :: else -> t = 0 fi
                    fi
                fi
            fi
        fi
    fi
}

inline note_leader() {
    lowest(hist[rev], t);
    if :: t != 0 -> led = led | (1 << t) :: else -> skip fi
}

active proctype world()
{
    byte t, a, b;
    hist[0] = 0;
    do
    :: rev < MAXREV ->
        if
        :: atomic { rev++; hist[rev] = hist[rev - 1] | (1 << rev); note_leader() } /* a join: term = rev */
        :: hist[rev] != 0 ->
            /* a leave of any live member */
            a = 1;
            do
            :: a < MAXREV && !(hist[rev] & (1 << a)) -> a++
            :: a < MAXREV && (hist[rev] & (1 << a)) -> if :: a++ :: break fi
            :: a >= MAXREV -> break
            od;
            if
            :: hist[rev] & (1 << a) -> atomic { rev++; hist[rev] = hist[rev - 1] & ~(1 << a); note_leader() }
            :: else -> skip
            fi
        :: hist[rev] & (hist[rev] - 1) ->
            /* a stranger's txn: the two lowest leave at one revision */
            lowest(hist[rev], a);
            lowest(hist[rev] & ~(1 << a), b);
            atomic { rev++; hist[rev] = hist[rev - 1] & ~(1 << a) & ~(1 << b); second[rev] = b; note_leader() }
#ifdef COMPACT
        :: compacted < rev -> compacted++
#endif
        fi
    :: else -> break
    od;
    done = true
}

active proctype watcher()
{
    byte w = 0, known = 0, told = 0, maxtold = 0, t, told_set = 0;
    bool broken = false;
    do
    :: w < rev && !broken ->
        /* the next revision from the stream, whole */
        w++;
#ifdef MUT_PEREVENT
        if
        :: second[w] != 0 ->
            /* judged between the txn's two deletions */
            known = hist[w] | (1 << second[w]);
            lowest(known, t);
            if
            :: t != told ->
                assert(t == 0 || (led & (1 << t)));
                told = t
            :: else -> skip
            fi
        :: else -> skip
        fi
#endif
        known = hist[w];
        lowest(known, t);
        if
        :: t != told ->
            assert(t == 0 || (led & (1 << t)));  /* it led at some revision */
            assert(t == 0 || t > maxtold);       /* rising: each term once, in order */
            if :: t != 0 -> maxtold = t; told_set = told_set | (1 << t) :: else -> skip fi;
            told = t
        :: else -> skip
        fi
    :: !broken -> broken = true
    :: broken ->
        /* back: replay from w + 1, or read now if that history is gone */
#ifdef MUT_REREAD
        if :: true ->
#else
        if :: compacted > w ->
#endif
            atomic {
                w = rev;
                known = hist[w];
                lowest(known, t);
                if
                :: t != told ->
                    assert(t == 0 || (led & (1 << t)));
                    assert(t == 0 || t > maxtold);
                    if :: t != 0 -> maxtold = t; told_set = told_set | (1 << t) :: else -> skip fi;
                    told = t
                :: else -> skip
                fi
            }
#ifndef MUT_REREAD
        :: else -> skip
#endif
        fi;
        broken = false
    :: done && w == rev && !broken -> break
    od;
#ifndef COMPACT
    assert(told_set == led) /* caught up, nothing compacted: every leader told */
#endif
}
#endif /* WATCH */

#ifdef HANDOVER
/* ---- the handover of CMD -------------------------------------------------- */
#define H 2
#define JOINS 3
mtype = { IDLE, RUNNING, TERMINATING };

byte rev = 0;
byte key[H];            /* the host's live member key: its term, or NONE */
bool failing[H];        /* the network fails the host's renewals */
bool lost[H];           /* the host's keepalive has found the loss */
bool stopped[H];        /* SIGSTOP */
bool killed[H];
bool byhand[H];         /* its key revoked by hand, and its tool has not seen it */
bool orphan[H];         /* earlyjoin: the last term's CMD, in its grace, no longer the tool's CMD */
bool stale[H];          /* its lease expired while its tool was stopped: resumed, it has not yet acted */
mtype cmd[H];
byte cmdterm[H];
byte joins[H];
bool revoked_once = false;

inline leader(t) {
    /* the lowest live term */
    t = NONE;
    if :: key[0] != NONE -> t = key[0] :: else -> skip fi;
    if :: key[1] != NONE && (t == NONE || key[1] < t) -> t = key[1] :: else -> skip fi
}

inline start_check(h) {
    /* the other host: dead CMD, in its grace, stopped, or revoked by hand unseen */
    assert(cmd[1 - h] != RUNNING || stopped[1 - h] || byhand[1 - h] || stale[1 - h]);
    assert(!orphan[h]) /* one CMD a host */
}

proctype tool(byte h)
{
    byte t;
end:
    do
    :: killed[h] -> break
    :: atomic { !stopped[h] && !killed[h] ->
            if
            /* join, once the last term's CMD is dead */
#ifdef MUT_EARLYJOIN
            :: key[h] == NONE && cmd[h] != RUNNING && joins[h] < JOINS ->
                if :: cmd[h] == TERMINATING -> orphan[h] = true; cmd[h] = IDLE :: else -> skip fi;
#else
            :: key[h] == NONE && cmd[h] == IDLE && joins[h] < JOINS ->
#endif
                rev++; key[h] = rev; joins[h]++; lost[h] = false; failing[h] = false; byhand[h] = false;
                stale[h] = false
            /* CMD starts under the term its watch names as ours */
            :: key[h] != NONE && !lost[h] && cmd[h] == IDLE ->
                leader(t);
                if
                :: t == key[h] ->
                    start_check(h);
                    cmd[h] = RUNNING; cmdterm[h] = key[h]
                :: else -> skip
                fi
            /* the keepalive found the loss: CMD told to stop */
#ifndef MUT_NOLOSS
            :: lost[h] && cmd[h] == RUNNING -> cmd[h] = TERMINATING
#endif
            /* the watch names another leader (our key went): CMD told to stop */
            :: cmd[h] == RUNNING && key[h] != cmdterm[h] -> cmd[h] = TERMINATING; byhand[h] = false
            :: cmd[h] == RUNNING && key[h] == cmdterm[h] ->
                leader(t);
                if :: t != cmdterm[h] -> cmd[h] = TERMINATING :: else -> skip fi
            /* CMD dead and the membership gone or lost: leave, to join again */
            :: cmd[h] == IDLE && key[h] != NONE && lost[h] -> key[h] = NONE; byhand[h] = false
            :: cmd[h] == IDLE && key[h] == NONE -> byhand[h] = false
            :: else -> skip /* nothing to do: the tool sleeps in poll */
            fi
        }
    od
}

inline react(h) {
#ifndef MUT_NOLOSS
    if :: cmd[h] == RUNNING -> cmd[h] = TERMINATING :: else -> skip fi
#else
    skip
#endif
}

active proctype world()
{
    cmd[0] = IDLE; cmd[1] = IDLE; /* an mtype starts as 0, no IDLE */
    run tool(0);
    run tool(1);
    do
    /* a host's renewals fail, then its keepalive finds the loss */
    :: atomic { key[0] != NONE && !failing[0] -> failing[0] = true }
    :: atomic { key[1] != NONE && !failing[1] -> failing[1] = true }
    /* ... and the running tool, asleep in poll on the keepalive's fd,
     * sends its CMD SIGTERM in the same breath (the timing fact of the
     * handover: this comes before etcd can expire the lease) */
    :: atomic { failing[0] && !stopped[0] && !killed[0] && !lost[0] -> lost[0] = true; react(0) }
    :: atomic { failing[1] && !stopped[1] && !killed[1] && !lost[1] -> lost[1] = true; react(1) }
    /* etcd expires a lease: after the running tool found its loss (or it is stopped, or dead) */
    :: atomic { key[0] != NONE && failing[0] && (lost[0] || stopped[0] || killed[0]) ->
                key[0] = NONE; stale[0] = !lost[0] && stopped[0]; lost[0] = true }
    :: atomic { key[1] != NONE && failing[1] && (lost[1] || stopped[1] || killed[1]) ->
                key[1] = NONE; stale[1] = !lost[1] && stopped[1]; lost[1] = true }
    /* a key revoked by hand, once */
    :: atomic { !revoked_once && key[0] != NONE -> key[0] = NONE; lost[0] = true; byhand[0] = true; revoked_once = true }
    :: atomic { !revoked_once && key[1] != NONE -> key[1] = NONE; lost[1] = true; byhand[1] = true; revoked_once = true }
    /* a CMD told to stop dies, at any step of its grace */
    :: atomic { cmd[0] == TERMINATING -> cmd[0] = IDLE }
    :: atomic { cmd[1] == TERMINATING -> cmd[1] = IDLE }
    :: atomic { orphan[0] -> orphan[0] = false }
    :: atomic { orphan[1] -> orphan[1] = false }
    /* SIGSTOP and SIGCONT, host 0; kill -9, host 1 (its CMD dies with it, its lease revoked) */
    :: atomic { !stopped[0] -> stopped[0] = true }
    :: atomic { stopped[0] -> stopped[0] = false }
    :: atomic { !killed[1] -> killed[1] = true; cmd[1] = IDLE; orphan[1] = false; failing[1] = true }
    :: break
    od
}
#endif /* HANDOVER */
