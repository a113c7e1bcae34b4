/* SPDX-License-Identifier: MIT */
/*
 * Description: leader election: the lowest live pid leads, the term rises
 * by one exactly when the leader changes and stays when nothing changed,
 * roles follow, leader_is and leader_get agree; the leader word names a
 * registration, so a pid registered again is a new leader; a dead lock
 * holder is replaced at once, a live or unjudgeable one is waited for,
 * boundedly. (Electors killed at each step: test_leader_race.c.)
 */
#include "hbtest.h"
#include "proc_internal.h"

#include <pthread.h>

static uint32_t coordinators(vigil_hb *hb, uint32_t *which)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < hb->capacity; i++)
        if (atomic_load(&hb->slots[i].pid) != 0 && atomic_load(&hb->slots[i].role) == VIGIL_ROLE_COORDINATOR) {
            n++;
            *which = i;
        }
    return n;
}

/* The lock word an elector with this pid, namespace and start time writes. */
static uint64_t lock_word(uint32_t pid, uint64_t ns, uint64_t start)
{
    return vigil_lock_word_of(pid, ns, start);
}

/* The election lock held with word w, as a holder killed holding it
 * leaves it: the word, and the sequence odd. */
static void hold_lock(vigil_hb *hb, uint64_t w)
{
    atomic_store(&hb->hdr->elect_lock, w);
    if (!(atomic_load(&hb->hdr->elect_seq) & 1u))
        atomic_fetch_add(&hb->hdr->elect_seq, 1);
}

static bool lock_free(vigil_hb *hb)
{
    return atomic_load(&hb->hdr->elect_seq) % 2 == 0;
}

static int test_no_peers(void)
{
    vigil_hb *hb = vt_hb_fresh("none.hb", 4);
    vigil_leader out = { 7, 7, 7 };
    EXPECT_RC(vigil_leader_elect(NULL, 2, &out), -EINVAL);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), VIGIL_ENOPEERS);
    EXPECT(out.slot == 7 && out.pid == 7 && out.term == 7, "output written on failure");
    EXPECT_RC(vigil_leader_get(hb, &out), VIGIL_ENOPEERS);
    EXPECT_RC(vigil_leader_get(hb, NULL), -EINVAL);
    EXPECT(!vigil_leader_is(hb, 0, 2) && !vigil_leader_is(hb, 9, 2) && !vigil_leader_is(NULL, 0, 2),
           "leader_is true with nobody");
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 5, &s), 0);
    vt_hb_tick_keep(hb, 3, 0);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), VIGIL_ENOPEERS); /* only a stale slot */
    EXPECT(atomic_load(&hb->hdr->term) == 0, "term moved with no live slot");
    vigil_hb_close(hb);
    return 0;
}

static int test_lowest_pid_leads(void)
{
    vigil_hb *hb = vt_hb_fresh("lowest.hb", 8);
    uint32_t s300, s100, s200;
    EXPECT_RC(vigil_hb_register(hb, 300, &s300), 0);
    EXPECT_RC(vigil_hb_register(hb, 100, &s100), 0);
    EXPECT_RC(vigil_hb_register(hb, 200, &s200), 0);
    EXPECT(!vigil_leader_is(hb, s100, 2), "leader_is true before any election");
    EXPECT_RC(vigil_hb_set_role(hb, s300, VIGIL_ROLE_COORDINATOR), 0); /* a stray coordinator */
    vigil_leader out;
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.slot == s100 && out.pid == 100 && out.term == 1,
           "expected {slot %u, pid 100, term 1}, got {%u, %u, %llu}", s100, out.slot, out.pid,
           (unsigned long long)out.term);
    uint32_t which = 99;
    EXPECT(coordinators(hb, &which) == 1 && which == s100, "expected slot %u sole coordinator, got %u coordinators",
           s100, coordinators(hb, &which));
    EXPECT(vigil_leader_is(hb, s100, 2), "leader_is false for the leader");
    EXPECT(!vigil_leader_is(hb, s200, 2) && !vigil_leader_is(hb, s300, 2), "leader_is true for a worker");
    vigil_leader got;
    EXPECT_RC(vigil_leader_get(hb, &got), 0);
    EXPECT(got.slot == out.slot && got.pid == out.pid && got.term == out.term, "leader_get disagrees");
    /* Nothing changed: same leader, same term, as often as asked. */
    for (int i = 0; i < 5; i++) {
        EXPECT_RC(vigil_leader_elect(hb, 2, &out), 0);
        EXPECT(out.pid == 100 && out.term == 1, "re-election moved: pid %u term %llu", out.pid,
               (unsigned long long)out.term);
    }
    EXPECT_RC(vigil_leader_elect(hb, 2, NULL), 0);
    vigil_hb_close(hb);
    return 0;
}

static int test_term_follows_changes(void)
{
    vigil_hb *hb = vt_hb_fresh("changes.hb", 8);
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, 100, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 200, &b), 0);
    EXPECT_RC(vigil_hb_register(hb, 300, &c), 0);
    vigil_leader out;
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    uint64_t keep_bc = (UINT64_C(1) << b) | (UINT64_C(1) << c);
    /* The leader goes stale: next-lowest live pid, term 2, old one demoted. */
    vt_hb_tick_keep(hb, 3, keep_bc);
    EXPECT(!vigil_leader_is(hb, a, 2), "a stale leader still leads");
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.pid == 200 && out.slot == b && out.term == 2, "expected pid 200 term 2, got pid %u term %llu",
           out.pid, (unsigned long long)out.term);
    EXPECT(atomic_load(&hb->slots[a].role) == VIGIL_ROLE_WORKER, "stale old leader not demoted");
    EXPECT(vigil_leader_is(hb, b, 2), "new leader not recognised");
    /* It comes back: it is the lowest live pid again, a change. */
    vigil_hb_beat(hb, a);
    EXPECT(!vigil_leader_is(hb, b, 2), "leader_is true while a lower live pid exists");
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.pid == 100 && out.term == 3, "expected pid 100 term 3, got pid %u term %llu", out.pid,
           (unsigned long long)out.term);
    /* A lower pid registers. */
    uint32_t d;
    EXPECT_RC(vigil_hb_register(hb, 50, &d), 0);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.pid == 50 && out.slot == d && out.term == 4, "expected pid 50 term 4, got pid %u term %llu",
           out.pid, (unsigned long long)out.term);
    /* Unregistered leader. */
    EXPECT_RC(vigil_hb_unregister(hb, d), 0);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.pid == 100 && out.term == 5, "expected pid 100 term 5, got pid %u term %llu", out.pid,
           (unsigned long long)out.term);
    /* Same slot, same pid, registered again: another registration, so a
     * change (a recycled pid is a new process; the old one's term must
     * not pass for the new one's). Then nothing changes. */
    EXPECT_RC(vigil_hb_unregister(hb, a), 0);
    uint32_t a2;
    EXPECT_RC(vigil_hb_register(hb, 100, &a2), 0);
    EXPECT(a2 == a, "expected slot %u back, got %u", a, a2);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.pid == 100 && out.term == 6, "a new registration of pid 100: expected term 6, got pid %u term %llu",
           out.pid, (unsigned long long)out.term);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 0);
    EXPECT(out.term == 6, "term moved without a change: %llu", (unsigned long long)out.term);
    /* Everybody stale: nobody to elect, the record stays. */
    vt_hb_tick_keep(hb, 3, 0);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), VIGIL_ENOPEERS);
    vigil_leader got;
    EXPECT_RC(vigil_leader_get(hb, &got), 0);
    EXPECT(got.pid == 100 && got.term == 6, "record lost: pid %u term %llu", got.pid, (unsigned long long)got.term);
    uint32_t which;
    EXPECT(coordinators(hb, &which) == 1, "expected exactly one coordinator, got %u", coordinators(hb, &which));
    vigil_hb_close(hb);
    return 0;
}

/* Equal pids (one process registered twice): the lower slot leads. */
static int test_tie_lower_slot(void)
{
    vigil_hb *hb = vt_hb_fresh("tie.hb", 4);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 77, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 77, &b), 0);
    vigil_leader out;
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.slot == a, "expected slot %u, got %u", a, out.slot);
    EXPECT(vigil_leader_is(hb, a, 2) && !vigil_leader_is(hb, b, 2), "tie broken differently by leader_is");
    EXPECT_RC(vigil_hb_set_role(hb, b, VIGIL_ROLE_COORDINATOR), 0);
    EXPECT(!vigil_leader_is(hb, b, 2), "a coordinator that is not the lowest (pid, slot) leads");
    vigil_hb_close(hb);
    return 0;
}

/* The leader word names (slot, gen); leader_get gives the slot's pid
 * while that registration holds it, pid 0 once it has left (until the
 * next election), and VIGIL_ERANGE for a word naming no slot. */
static int test_leader_word_names_registration(void)
{
    vigil_hb *hb = vt_hb_fresh("word.hb", 4);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 100, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 200, &b), 0);
    vigil_leader out, got;
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    struct vigil_hb_header *h = hb->hdr;
    uint64_t word = atomic_load(&h->leader);
    EXPECT(word == (vigil_slot_gen(&hb->slots[a]) << 21 | (a + 1)), "leader word %#llx for slot %u gen %llu",
           (unsigned long long)word, a, (unsigned long long)vigil_slot_gen(&hb->slots[a]));
    EXPECT_RC(vigil_hb_unregister(hb, a), 0);
    EXPECT_RC(vigil_leader_get(hb, &got), 0);
    EXPECT(got.slot == a && got.pid == 0 && got.term == 1, "after the leader left: slot %u pid %u term %llu", got.slot,
           got.pid, (unsigned long long)got.term);
    uint32_t c;
    EXPECT_RC(vigil_hb_register(hb, 100, &c), 0); /* the same pid, the same slot: another registration */
    EXPECT_RC(vigil_leader_get(hb, &got), 0);
    EXPECT(c == a && got.pid == 0, "a new registration passed for the leader: pid %u", got.pid);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(out.slot == a && out.pid == 100 && out.term == 2, "expected slot %u pid 100 term 2, got %u %u %llu", a,
           out.slot, out.pid, (unsigned long long)out.term);
    atomic_store(&h->leader, ((uint64_t)5 << 21) | 4000);
    EXPECT_RC(vigil_leader_get(hb, &got), VIGIL_ERANGE);
    atomic_store(&h->leader, 0);
    atomic_store(&h->term, 0);
    EXPECT_RC(vigil_leader_get(hb, &got), VIGIL_ENOPEERS);
    vigil_hb_close(hb);
    return 0;
}

/* The election lock: a dead holder (reaped, zombie, or its pid reused) is
 * replaced at once; a live one, or one in another pid namespace, is waited
 * for and then VIGIL_EBUSY; a word no elector writes is a scribble. */
static int test_lock_holders(void)
{
    vigil_hb *hb = vt_hb_fresh("lock.hb", 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 100, &s), 0);
    _Atomic uint64_t *lock = &hb->hdr->elect_lock;
    uint64_t ns = vigil_self_pidns();
    vigil_leader out;

    pid_t child = fork();
    if (child == 0) {
        vt_await_kill();
    }
    uint64_t start = 0;
    EXPECT_RC(vigil_proc_start_time((uint32_t)child, &start), 0);
    uint64_t held = lock_word((uint32_t)child, ns, start);
    hold_lock(hb, held);
    uint64_t seq = atomic_load(&hb->hdr->elect_seq);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), VIGIL_EBUSY); /* bounded: ctest's timeout catches a hang */
    EXPECT(atomic_load(lock) == held && atomic_load(&hb->hdr->elect_seq) == seq, "a live holder's lock was taken");
    /* Same pid, another start time: the pid was reused, the holder is dead. */
    atomic_store(lock, lock_word((uint32_t)child, ns, start + 1));
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 1);
    EXPECT(lock_free(hb) && atomic_load(&hb->hdr->elect_seq) == seq + 3, "lock not released (sequence %llu from %llu)",
           (unsigned long long)atomic_load(&hb->hdr->elect_seq), (unsigned long long)seq);
    /* Dead, not yet reaped (zombie). */
    hold_lock(hb, held);
    kill(child, SIGKILL);
    siginfo_t si;
    EXPECT(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0, "waitid");
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 0);
    /* Dead and reaped. */
    hold_lock(hb, held);
    waitpid(child, NULL, 0);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 0);
    /* Dead pid, but recorded in another namespace: cannot be judged. */
    if (ns) {
        hold_lock(hb, lock_word((uint32_t)child, ns + 1, start));
        EXPECT_RC(vigil_leader_elect(hb, 2, &out), VIGIL_EBUSY);
    }
    /* Pid field 0: no elector writes that. */
    hold_lock(hb, VIGIL_LOCK_HELD | 0x12345);
    EXPECT_RC(vigil_leader_elect(hb, 2, &out), 0);
    EXPECT(out.term == 1, "term %llu", (unsigned long long)out.term);
    vigil_hb_close(hb);
    return 0;
}

/* A start tag is 21 bits of the start time, so a reused pid's new process
 * can carry the tag of the elector that died holding the lock. Then every
 * election would wait and give VIGIL_EBUSY for as long as that process
 * lives. It is told apart by what a holder must have: a mapping of the
 * table. A live process that maps no part of it is not the holder, and its
 * word is taken over; one that maps it is waited for. */
static int test_lock_tag_collision(void)
{
    vigil_hb *hb = vt_hb_fresh("collide.hb", 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 100, &s), 0);
    uint64_t ns = vigil_self_pidns();
    int ready[2];
    EXPECT(pipe(ready) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        vigil_hb_close(hb); /* a process with this pid and tag, but no mapping */
        char c = 1;
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        vt_await_kill();
    }
    char c;
    EXPECT(read(ready[0], &c, 1) == 1, "child never unmapped the table");
    uint64_t start = 0;
    EXPECT_RC(vigil_proc_start_time((uint32_t)child, &start), 0);
    hold_lock(hb, lock_word((uint32_t)child, ns, start));
    vigil_leader out;
    int rc = vigil_leader_elect(hb, 2, &out);
    bool released = lock_free(hb);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    EXPECT(rc == 1, "a live pid with the dead elector's tag but no mapping: expected the lock taken over "
                    "and leader changed (1), got %d (%s)", rc, vigil_strerror(rc));
    EXPECT(released, "lock not released after the take-over");
    vigil_hb_close(hb);
    return 0;
}

/* Threads of one process electing at once share its lock word: they wait
 * for each other and never take the lock from a live sibling. For TSan. */
struct elector {
    vigil_hb *hb;
    _Atomic int *go;
    int changed;
    int err;
};

static void *elector_main(void *arg)
{
    struct elector *e = arg;
    if (!vt_spin_until(e->go, 1, 1024, 5000)) {
        e->err = VIGIL_ETIMEDOUT; /* the gate never opened */
        return NULL;
    }
    for (int i = 0; i < 200; i++) {
        vigil_leader out;
        int rc = vigil_leader_elect(e->hb, 2, &out);
        if (rc < 0 && rc != VIGIL_EBUSY) {
            e->err = rc;
            break;
        }
        if (rc > 0)
            e->changed += rc;
    }
    return NULL;
}

static int test_threaded_electors(void)
{
    vigil_hb *hb = vt_hb_fresh("threads.hb", 16);
    uint32_t s;
    for (int i = 0; i < 8; i++)
        EXPECT_RC(vigil_hb_register(hb, 500 - i, &s), 0);
    for (int round = 0; round < 10; round++) {
        uint64_t before = atomic_load(&hb->hdr->term);
        _Atomic int go = 0;
        struct elector el[3];
        pthread_t th[3];
        for (int t = 0; t < 3; t++) {
            el[t] = (struct elector){ .hb = hb, .go = &go };
            EXPECT(pthread_create(&th[t], NULL, elector_main, &el[t]) == 0, "pthread_create");
        }
        atomic_store(&go, 1);
        int changed = 0;
        for (int t = 0; t < 3; t++) {
            pthread_join(th[t], NULL);
            EXPECT(el[t].err == 0, "elect failed: %s", vigil_strerror(el[t].err));
            changed += el[t].changed;
        }
        uint64_t rise = atomic_load(&hb->hdr->term) - before;
        EXPECT(rise == (round == 0 || round % 2 ? 1u : 0u) && (uint64_t)changed == rise,
               "round %d: term rose %llu, %d said changed", round, (unsigned long long)rise, changed);
        uint32_t which;
        EXPECT(coordinators(hb, &which) == 1, "round %d: %u coordinators", round, coordinators(hb, &which));
        if (round % 2 == 0) {
            vigil_leader cur;
            EXPECT_RC(vigil_leader_get(hb, &cur), 0);
            EXPECT_RC(vigil_hb_unregister(hb, cur.slot), 0); /* the next round has a change */
        }
    }
    vigil_hb_close(hb);
    return 0;
}

/* The cached identity of the calling process is forgotten across fork: a
 * child elects under its own pid, never its parent's. */
static int test_identity_after_fork(void)
{
    EXPECT(vigil_self_pid() == (uint32_t)getpid(), "cached pid %u, getpid %d", vigil_self_pid(), (int)getpid());
    uint64_t start = vigil_self_start_time();
    pid_t child = fork();
    if (child == 0) {
        uint64_t mine = 0;
        vigil_proc_start_time((uint32_t)getpid(), &mine);
        bool ok = vigil_self_pid() == (uint32_t)getpid() && vigil_self_start_time() == mine &&
                  vigil_self_pidns() != 0;
        _exit(ok ? 0 : 1);
    }
    EXPECT(vt_wait(child, 5000) == 0, "the child saw its parent's cached identity");
    EXPECT(vigil_self_start_time() == start, "the parent's cache changed");
    return 0;
}

VT_MAIN(VT_CASE(test_no_peers), VT_CASE(test_lowest_pid_leads), VT_CASE(test_term_follows_changes),
        VT_CASE(test_tie_lower_slot), VT_CASE(test_leader_word_names_registration), VT_CASE(test_lock_holders), VT_CASE(test_lock_tag_collision),
        VT_CASE(test_threaded_electors), VT_CASE(test_identity_after_fork))
