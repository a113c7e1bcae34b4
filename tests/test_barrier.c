/* SPDX-License-Identifier: MIT */
/*
 * Description: epoch barrier: the reference's cases (single-peer release,
 * multi-peer arrival, quorum threshold, timeout, dead-peer exclusion,
 * cross-handle visibility, multi-epoch sequence, arrived-count reset) with
 * real processes, and the SPEC's rules: order of checks, wrap-safe epochs,
 * early epochs, stored grace, capacity and kind checks, withdrawal on
 * timeout, what a death after arriving leaves behind, the mixed
 * bound/unbound rule, and threads sharing one handle.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "barrier_internal.h"

#define SEC 1000000000ull
#define MS  1000000ull

/* Results children leave for the parent. */
struct shared {
    _Atomic int rc[8];
    _Atomic int ready[8];
    _Atomic int flag;
};
static struct shared *sh;

static struct shared *shared_reset(void)
{
    if (!sh) {
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (sh == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
    }
    for (int i = 0; i < 8; i++) {
        atomic_store(&sh->rc[i], 12345);
        atomic_store(&sh->ready[i], 0);
    }
    atomic_store(&sh->flag, 0);
    return sh;
}

static vigil_hb *fresh_hb(const char *name, uint32_t cap)
{
    vigil_hb *hb = NULL;
    int rc = vigil_hb_create(vt_path(name), cap, &hb);
    if (rc < 0) {
        fprintf(stderr, "hb create %s: %s\n", name, vigil_strerror(rc));
        exit(1);
    }
    return hb;
}

static vigil_barrier *fresh_barrier(const char *name, vigil_hb *hb, uint64_t grace)
{
    vigil_barrier *b = NULL;
    int rc = vigil_barrier_create(vt_path(name), hb, grace, &b);
    if (rc < 0) {
        fprintf(stderr, "barrier create %s: %s\n", name, vigil_strerror(rc));
        exit(1);
    }
    return b;
}

static uint32_t reg(vigil_hb *hb, uint32_t pid)
{
    uint32_t slot;
    int rc = vigil_hb_register(hb, pid, &slot);
    if (rc < 0) {
        fprintf(stderr, "register %u: %s\n", pid, vigil_strerror(rc));
        exit(1);
    }
    return slot;
}

static vigil_barrier_state peek(const char *name)
{
    vigil_barrier_state st;
    memset(&st, 0xa5, sizeof(st));
    int rc = vigil_barrier_peek(vt_path(name), &st);
    if (rc < 0)
        fprintf(stderr, "peek %s: %s\n", name, vigil_strerror(rc));
    return st;
}

/* A child process: opens its own handles on the files, optionally binds
 * a slot, waits, and leaves the result in sh->rc[idx]. */
struct waiter_args {
    const char *hb_name, *b_name;
    int idx;
    int64_t bind_slot;   /* -1: unbound */
    uint32_t epoch;
    uint32_t quorum;     /* 0: wait / wait_timeout */
    uint64_t timeout_ns; /* 0: untimed */
};

static int waiter_main(const struct waiter_args *a)
{
    vigil_hb *hb;
    vigil_barrier *b;
    if (vigil_hb_open(vt_path(a->hb_name), 0, &hb) < 0)
        return 90;
    if (vigil_barrier_open(vt_path(a->b_name), hb, 0, &b) < 0)
        return 91;
    if (a->bind_slot >= 0 && vigil_barrier_bind(b, (uint32_t)a->bind_slot) < 0)
        return 92;
    atomic_store(&sh->ready[a->idx], 1);
    int rc;
    if (a->quorum && a->timeout_ns)
        rc = vigil_barrier_wait_quorum_timeout(b, a->epoch, a->quorum, a->timeout_ns);
    else if (a->quorum)
        rc = vigil_barrier_wait_quorum(b, a->epoch, a->quorum);
    else if (a->timeout_ns)
        rc = vigil_barrier_wait_timeout(b, a->epoch, a->timeout_ns);
    else
        rc = vigil_barrier_wait(b, a->epoch);
    atomic_store(&sh->rc[a->idx], rc);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static pid_t spawn_waiter(struct waiter_args a)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        _exit(waiter_main(&a));
    return p;
}

/* Waits for a child's exit; 0 when it exited cleanly. */
static int reap(pid_t p)
{
    int st = vt_wait(p, 20000);
    if (st != 0)
        fprintf(stderr, "child %d ended with status %d\n", (int)p, st);
    return st;
}

static int test_single_peer_release(void)
{
    vigil_hb *hb = fresh_hb("single.hb", 4);
    vigil_barrier *b = fresh_barrier("single.b", hb, 5);
    reg(hb, 100);
    EXPECT(vigil_barrier_epoch(b) == 0, "fresh barrier at epoch %u", vigil_barrier_epoch(b));
    EXPECT(vigil_barrier_live_peers(b) == 1, "expected 1 live peer, got %u", vigil_barrier_live_peers(b));
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    EXPECT(vigil_barrier_epoch(b) == 1, "expected epoch 1 after release, got %u", vigil_barrier_epoch(b));
    EXPECT_RC(vigil_barrier_wait(b, 0), 0); /* passed */
    vigil_barrier_close(b);
    vigil_barrier_close(NULL);
    vigil_hb_close(hb);
    return 0;
}

/* Three processes, each bound to its own slot: all return, one SERIAL. */
static int test_multi_peer_arrival(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("multi.hb", 4);
    vigil_barrier *b = fresh_barrier("multi.b", hb, 5);
    uint32_t s[3];
    for (int i = 0; i < 3; i++)
        s[i] = reg(hb, 200 + i);
    pid_t kids[2];
    for (int i = 0; i < 2; i++)
        kids[i] = spawn_waiter((struct waiter_args){ "multi.hb", "multi.b", i, s[i], 0, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("multi.b").arrived == 2, 10000), "the two children never arrived");
    EXPECT(peek("multi.b").recorded == 2, "expected 2 arrival records, got %u", peek("multi.b").recorded);
    /* Blocked, they sleep in the kernel rather than spin. */
    EXPECT(VT_WAIT_FOR(peek("multi.b").sleepers == 2, 10000), "waiters never went to sleep: sleepers %u",
           peek("multi.b").sleepers);
    EXPECT(vigil_barrier_epoch(b) == 0, "released before the third peer arrived");
    EXPECT_RC(vigil_barrier_bind(b, s[2]), 0);
    uint32_t wake0 = atomic_load(&b->hdr->wake);
    int mine = vigil_barrier_wait(b, 0);
    for (int i = 0; i < 2; i++)
        EXPECT(reap(kids[i]) == 0, "child %d failed", i);
    int serial = (mine == VIGIL_SERIAL) + (sh->rc[0] == VIGIL_SERIAL) + (sh->rc[1] == VIGIL_SERIAL);
    int zero = (mine == 0) + (sh->rc[0] == 0) + (sh->rc[1] == 0);
    EXPECT(serial == 1 && zero == 2, "expected one SERIAL and two 0, got %d %d %d", mine,
           sh->rc[0], sh->rc[1]);
    EXPECT(atomic_load(&b->hdr->wake) != wake0, "the releaser saw sleepers but did not bump the futex word");
    EXPECT(vigil_barrier_epoch(b) == 1, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Four live peers; a quorum of 2 releases on two arrivals. */
static int test_quorum_threshold(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("quorum.hb", 8);
    vigil_barrier *b = fresh_barrier("quorum.b", hb, 5);
    for (int i = 0; i < 4; i++)
        reg(hb, 300 + i);
    /* One arrival short of the quorum: times out and takes itself back. */
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 0, 2, 20 * MS), VIGIL_ETIMEDOUT);
    EXPECT(peek("quorum.b").arrived == 0, "withdrawn arrival still counted: %u", peek("quorum.b").arrived);
    pid_t k = spawn_waiter((struct waiter_args){ "quorum.hb", "quorum.b", 0, -1, 0, 2, 0 });
    EXPECT(VT_WAIT_FOR(peek("quorum.b").arrived == 1, 10000), "child never arrived");
    int mine = vigil_barrier_wait_quorum(b, 0, 2);
    EXPECT(reap(k) == 0, "child failed");
    EXPECT((mine == VIGIL_SERIAL) + (sh->rc[0] == VIGIL_SERIAL) == 1 && (mine == 0 || sh->rc[0] == 0),
           "expected one SERIAL, got %d and %d", mine, sh->rc[0]);
    EXPECT(vigil_barrier_epoch(b) == 1, "quorum 2 of 4 did not release: epoch %u", vigil_barrier_epoch(b));
    /* A quorum of 1 is a single caller's own release. */
    EXPECT_RC(vigil_barrier_wait_quorum(b, 1, 1), VIGIL_SERIAL);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Checks in order: quorum 0, an epoch passed, no live peer. */
static int test_order_of_checks(void)
{
    vigil_hb *hb = fresh_hb("order.hb", 4);
    vigil_barrier *b = fresh_barrier("order.b", hb, 5);
    uint32_t s = reg(hb, 400);
    for (uint32_t e = 0; e < 5; e++)
        EXPECT_RC(vigil_barrier_wait(b, e), VIGIL_SERIAL);
    EXPECT_RC(vigil_hb_unregister(hb, s), 0);
    EXPECT(vigil_barrier_live_peers(b) == 0, "expected no live peer");
    EXPECT_RC(vigil_barrier_wait_quorum(b, 3, 0), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 3, 0, MS), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_wait(b, 3), 0);          /* passed beats no peers */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 4, 0), 0);
    EXPECT_RC(vigil_barrier_wait(b, 5), VIGIL_ENOPEERS);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 5, MS), VIGIL_ENOPEERS);
    EXPECT_RC(vigil_barrier_wait(b, 9), VIGIL_ENOPEERS); /* early, still nobody */
    EXPECT(peek("order.b").arrived == 0, "a refused wait arrived");
    /* A quorum needs no live peer: unbound arrivals count. */
    EXPECT_RC(vigil_barrier_wait_quorum(b, 5, 1), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_wait(NULL, 0), -EINVAL);
    EXPECT_RC(vigil_barrier_wait_quorum(NULL, 0, 1), -EINVAL);
    EXPECT_RC(vigil_barrier_wait_timeout(NULL, 0, 1), -EINVAL);
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(NULL, 0, 1, 1), -EINVAL);
    EXPECT(vigil_barrier_epoch(NULL) == 0 && vigil_barrier_live_peers(NULL) == 0, "NULL handle");
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A waiter that times out withdraws its arrival, so a later arrival never
 * releases the round with it counted. Unbound and bound. */
static int test_timeout_withdraws(void)
{
    vigil_hb *hb = fresh_hb("wd.hb", 4);
    vigil_barrier *b = fresh_barrier("wd.b", hb, 5);
    uint32_t s0 = reg(hb, 500);
    reg(hb, 501);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 20 * MS), VIGIL_ETIMEDOUT);
    vigil_barrier_state st = peek("wd.b");
    EXPECT(st.arrived == 0 && st.epoch == 0, "after timeout: arrived %u epoch %u", st.arrived, st.epoch);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 0), VIGIL_ETIMEDOUT); /* a timeout of 0 is a try */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 5 * MS), VIGIL_ETIMEDOUT);
    EXPECT(peek("wd.b").arrived == 0, "timeouts left %u arrivals", peek("wd.b").arrived);

    EXPECT_RC(vigil_barrier_bind(b, s0), 0);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 10 * MS), VIGIL_ETIMEDOUT);
    st = peek("wd.b");
    EXPECT(st.arrived == 0 && st.recorded == 0, "bound timeout left arrived %u recorded %u",
           st.arrived, st.recorded);
    /* Both arrive for real: released by whoever came second. */
    shared_reset();
    pid_t k = spawn_waiter((struct waiter_args){ "wd.hb", "wd.b", 0, 1, 0, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("wd.b").arrived == 1, 10000), "child never arrived");
    /* One serial, for whichever CAS released it (a spinning child may). */
    int mine = vigil_barrier_wait_timeout(b, 0, 10 * SEC);
    EXPECT(reap(k) == 0, "child failed");
    EXPECT(mine >= 0 && sh->rc[0] >= 0 && (mine == VIGIL_SERIAL) + (sh->rc[0] == VIGIL_SERIAL) == 1,
           "expected both released, one SERIAL: %d and %d", mine, sh->rc[0]);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A peer that never beats ages out and the barrier releases without it,
 * also for a waiter that is already asleep when it ages out. */
static int test_dead_peer_exclusion(void)
{
    vigil_hb *hb = fresh_hb("dead.hb", 4);
    vigil_barrier *b = fresh_barrier("dead.b", hb, 2);
    uint32_t live = reg(hb, 600);
    reg(hb, 601); /* never beats */
    EXPECT(vigil_barrier_live_peers(b) == 2, "expected 2 live");
    for (int i = 0; i < 3; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, live);
    EXPECT(vigil_barrier_live_peers(b) == 1, "expected the silent peer aged out, live %u",
           vigil_barrier_live_peers(b));
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);

    /* Now asleep first: a fresh silent peer, a bound child waiting, and
     * ticks that age the silent one out while the child sleeps. */
    shared_reset();
    uint32_t silent = reg(hb, 602);
    (void)silent;
    pid_t k = spawn_waiter((struct waiter_args){ "dead.hb", "dead.b", 0, live, 1, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("dead.b").arrived == 1, 10000), "child never arrived");
    EXPECT(vigil_barrier_epoch(b) == 1, "released while the silent peer was still live");
    bool done = VT_WAIT_FOR((vigil_hb_tick(hb), vt_sleep_ms(2), atomic_load(&sh->rc[0]) != 12345), 20000);
    EXPECT(done, "the sleeping waiter never saw the silent peer age out");
    EXPECT(reap(k) == 0 && sh->rc[0] == VIGIL_SERIAL, "child returned %d", sh->rc[0]);
    EXPECT(vigil_barrier_epoch(b) == 2, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Two handles on one file in one process and a third in a child all see
 * the same state. */
static int test_cross_handle_visibility(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("cross.hb", 4);
    vigil_barrier *b1 = fresh_barrier("cross.b", hb, 5);
    vigil_barrier *b2;
    EXPECT_RC(vigil_barrier_open(vt_path("cross.b"), hb, 0, &b2), 0);
    reg(hb, 700);
    reg(hb, 701);
    EXPECT_RC(vigil_barrier_wait_quorum(b1, 0, 1), VIGIL_SERIAL);
    EXPECT(vigil_barrier_epoch(b2) == 1, "second handle sees epoch %u", vigil_barrier_epoch(b2));
    pid_t k = spawn_waiter((struct waiter_args){ "cross.hb", "cross.b", 0, -1, 1, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("cross.b").arrived == 1, 10000), "child's arrival not visible");
    EXPECT(vigil_barrier_epoch(b1) == 1 && vigil_barrier_epoch(b2) == 1, "released early");
    EXPECT_RC(vigil_barrier_wait(b2, 1), VIGIL_SERIAL);
    EXPECT(reap(k) == 0 && sh->rc[0] == 0, "child returned %d", sh->rc[0]);
    EXPECT(vigil_barrier_epoch(b1) == 2 && vigil_barrier_epoch(b2) == 2, "epochs %u %u",
           vigil_barrier_epoch(b1), vigil_barrier_epoch(b2));
    vigil_barrier_close(b2);
    vigil_barrier_close(b1);
    vigil_hb_close(hb);
    return 0;
}

static int test_multi_epoch_sequence(void)
{
    vigil_hb *hb = fresh_hb("seq.hb", 2);
    vigil_barrier *b = fresh_barrier("seq.b", hb, 5);
    uint32_t s = reg(hb, 800);
    EXPECT_RC(vigil_barrier_bind(b, s), 0);
    for (uint32_t e = 0; e < 200; e++) {
        EXPECT_RC(vigil_barrier_wait(b, e), VIGIL_SERIAL);
        EXPECT(vigil_barrier_epoch(b) == e + 1, "after round %u epoch %u", e, vigil_barrier_epoch(b));
        EXPECT_RC(vigil_barrier_wait(b, e), 0);
    }
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_arrived_count_reset(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("reset.hb", 4);
    vigil_barrier *b = fresh_barrier("reset.b", hb, 5);
    uint32_t s[3];
    for (int i = 0; i < 3; i++)
        s[i] = reg(hb, 900 + i);
    pid_t k0 = spawn_waiter((struct waiter_args){ "reset.hb", "reset.b", 0, -1, 0, 0, 0 });
    pid_t k1 = spawn_waiter((struct waiter_args){ "reset.hb", "reset.b", 1, s[1], 0, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("reset.b").arrived == 2, 10000), "children never arrived");
    vigil_barrier_state st = peek("reset.b");
    EXPECT(st.recorded == 1, "expected 1 record (one bound child), got %u", st.recorded);
    /* The third arrival completes it; whichever caller's CAS releases the
     * round (a child still spinning may beat us to it) is the one serial. */
    int mine = vigil_barrier_wait(b, 0);
    EXPECT(reap(k0) == 0 && reap(k1) == 0, "children failed");
    int serial = (mine == VIGIL_SERIAL) + (sh->rc[0] == VIGIL_SERIAL) + (sh->rc[1] == VIGIL_SERIAL);
    EXPECT(serial == 1 && mine >= 0 && sh->rc[0] >= 0 && sh->rc[1] >= 0,
           "expected all released, one SERIAL: %d %d %d", mine, sh->rc[0], sh->rc[1]);
    st = peek("reset.b");
    EXPECT(st.epoch == 1 && st.arrived == 0 && st.recorded == 0,
           "after release: epoch %u arrived %u recorded %u", st.epoch, st.arrived, st.recorded);
    (void)s;
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Serial-number arithmetic across 2^32. */
static int test_wrap_safe(void)
{
    vigil_hb *hb = fresh_hb("wrap.hb", 2);
    vigil_barrier *b = fresh_barrier("wrap.b", hb, 5);
    reg(hb, 1000);
    atomic_store(&b->hdr->state, (uint64_t)0xffffffffu << 32);
    EXPECT(vigil_barrier_epoch(b) == 0xffffffffu, "epoch %u", vigil_barrier_epoch(b));
    EXPECT_RC(vigil_barrier_wait(b, 0xfffffffeu), 0);          /* passed */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, MS), VIGIL_ETIMEDOUT); /* early, across the wrap */
    EXPECT(peek("wrap.b").arrived == 0, "an early wait arrived");
    EXPECT_RC(vigil_barrier_wait(b, 0xffffffffu), VIGIL_SERIAL);
    EXPECT(vigil_barrier_epoch(b) == 0, "expected the epoch to wrap to 0, got %u", vigil_barrier_epoch(b));
    EXPECT_RC(vigil_barrier_wait(b, 0xffffffffu), 0);          /* passed, across the wrap */
    EXPECT_RC(vigil_barrier_wait(b, 0x80000001u), 0);          /* 2^31 - 1 behind */
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    EXPECT(vigil_barrier_epoch(b) == 1, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A caller ahead of the barrier sleeps through the rounds before its own
 * and is counted only in its own. */
static int test_early_epoch(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("early.hb", 4);
    vigil_barrier *b = fresh_barrier("early.b", hb, 5);
    uint32_t me = reg(hb, 1100), peer = reg(hb, 1101);
    EXPECT_RC(vigil_barrier_bind(b, me), 0);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 2, 5 * MS), VIGIL_ETIMEDOUT);
    EXPECT(peek("early.b").arrived == 0, "an early caller was counted");
    pid_t k = spawn_waiter((struct waiter_args){ "early.hb", "early.b", 0, peer, 1, 0, 0 });
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready[0]), 10000), "child never started");
    vt_sleep_ms(20);
    EXPECT(peek("early.b").arrived == 0, "the early child was counted in round 0");
    EXPECT_RC(vigil_barrier_wait_quorum(b, 0, 1), VIGIL_SERIAL); /* round 0 by quorum */
    EXPECT(VT_WAIT_FOR(peek("early.b").arrived == 1, 10000), "child never arrived in round 1");
    EXPECT_RC(vigil_barrier_wait(b, 1), VIGIL_SERIAL);
    EXPECT(reap(k) == 0 && sh->rc[0] == 0, "child returned %d", sh->rc[0]);
    EXPECT(vigil_barrier_epoch(b) == 2, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* grace is stored at create; open with 0 uses it, non-zero overrides. */
static int test_grace_stored(void)
{
    vigil_hb *hb = fresh_hb("grace.hb", 4);
    vigil_barrier *b = fresh_barrier("grace.b", hb, 3);
    reg(hb, 1200);
    for (int i = 0; i < 5; i++)
        vigil_hb_tick(hb); /* age 5 */
    vigil_barrier *b0, *b10;
    EXPECT_RC(vigil_barrier_open(vt_path("grace.b"), hb, 0, &b0), 0);
    EXPECT_RC(vigil_barrier_open(vt_path("grace.b"), hb, 10, &b10), 0);
    EXPECT(peek("grace.b").grace_epochs == 3, "stored grace %llu", (unsigned long long)peek("grace.b").grace_epochs);
    EXPECT(vigil_barrier_live_peers(b) == 0 && vigil_barrier_live_peers(b0) == 0,
           "grace 3: an age-5 peer counted live");
    EXPECT(vigil_barrier_live_peers(b10) == 1, "grace 10 override: expected 1 live, got %u",
           vigil_barrier_live_peers(b10));
    EXPECT_RC(vigil_barrier_wait(b0, 0), VIGIL_ENOPEERS);
    EXPECT_RC(vigil_barrier_wait(b10, 0), VIGIL_SERIAL);
    /* The grace is read once: a later scribble changes no handle. */
    b->hdr->grace_epochs = 0;
    EXPECT(vigil_barrier_live_peers(b10) == 1, "scribbled grace moved a handle");
    vigil_barrier_close(b10);
    vigil_barrier_close(b0);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_capacity_must_match(void)
{
    vigil_hb *hb4 = fresh_hb("cap4.hb", 4), *hb8 = fresh_hb("cap8.hb", 8);
    vigil_barrier *b = fresh_barrier("cap.b", hb4, 5), *x = NULL;
    EXPECT(peek("cap.b").capacity == 4, "barrier capacity %u, expected the table's 4", peek("cap.b").capacity);
    EXPECT_RC(vigil_barrier_open(vt_path("cap.b"), hb8, 0, &x), VIGIL_ECAPACITY);
    EXPECT(x == NULL, "failed open wrote its output");
    EXPECT_RC(vigil_barrier_open(vt_path("cap.b"), hb4, 0, &x), 0);
    vigil_barrier_close(x);
    vigil_barrier_close(b);
    vigil_hb_close(hb8);
    vigil_hb_close(hb4);
    return 0;
}

/* A heartbeat file opened as a barrier, and the reverse, are refused, as
 * are damaged barrier files. */
static int test_wrong_kind_refused(void)
{
    vigil_hb *hb = fresh_hb("kind.hb", 4);
    vigil_barrier *b = fresh_barrier("kind.b", hb, 5), *x = NULL;
    vigil_hb *y = NULL;
    vigil_barrier_state st;
    /* Same size, so only the kind tells them apart: 64 + 19 * 64 vs 704 + 4 * 144. */
    vigil_hb *hb1 = fresh_hb("kind1.hb", 19), *hb8 = fresh_hb("kind8.hb", 8);
    vigil_barrier *b8 = fresh_barrier("kind8.b", hb8, 5);
    EXPECT_RC(vigil_barrier_open(vt_path("kind.hb"), hb, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_open(vt_path("kind1.hb"), hb1, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_hb_open(vt_path("kind.b"), 0, &y), VIGIL_EBADFILE);
    EXPECT_RC(vigil_hb_open(vt_path("kind8.b"), 0, &y), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_peek(vt_path("kind.hb"), &st), VIGIL_EBADFILE);
    EXPECT(x == NULL && y == NULL, "a refused open wrote its output");
    vigil_file_info fi;
    EXPECT_RC(vigil_file_probe(vt_path("kind.b"), &fi), 0);
    EXPECT(fi.kind == VIGIL_KIND_BARRIER && fi.capacity == 4 && fi.size == 704 + 4 * 144,
           "probe: kind %u capacity %u size %llu", fi.kind, fi.capacity, (unsigned long long)fi.size);

    /* Truncated, extended, wrong version, missing, symlink, FIFO. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "head -c 70 %s > %s && cat %s > %s && printf x >> %s",
             vt_path("kind.b"), vt_path("short.b"), vt_path("kind.b"), vt_path("long.b"), vt_path("long.b"));
    EXPECT(system(cmd) == 0, "could not make damaged copies");
    EXPECT_RC(vigil_barrier_open(vt_path("short.b"), hb, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_open(vt_path("long.b"), hb, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_peek(vt_path("short.b"), &st), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_peek(vt_path("long.b"), &st), VIGIL_EBADFILE);
    b8->hdr->version = VIGIL_LAYOUT_VERSION + 1;
    EXPECT_RC(vigil_barrier_open(vt_path("kind8.b"), hb8, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_peek(vt_path("kind8.b"), &st), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_open(vt_path("nothing.b"), hb, 0, &x), -ENOENT);
    EXPECT_RC(vigil_barrier_peek(vt_path("nothing.b"), &st), -ENOENT);
    EXPECT(symlink(vt_path("kind.b"), vt_path("link.b")) == 0, "symlink");
    EXPECT_RC(vigil_barrier_open(vt_path("link.b"), hb, 0, &x), -ELOOP);
    EXPECT_RC(vigil_barrier_peek(vt_path("link.b"), &st), -ELOOP);
    EXPECT(mkfifo(vt_path("fifo.b"), 0600) == 0, "mkfifo");
    EXPECT_RC(vigil_barrier_open(vt_path("fifo.b"), hb, 0, &x), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_peek(vt_path("fifo.b"), &st), VIGIL_EBADFILE);
    EXPECT_RC(vigil_barrier_open(vt_path("kind.b"), NULL, 0, &x), -EINVAL);
    EXPECT_RC(vigil_barrier_open(vt_path("kind.b"), hb, 0, NULL), -EINVAL);
    EXPECT_RC(vigil_barrier_peek(NULL, &st), -EINVAL);
    EXPECT_RC(vigil_barrier_peek(vt_path("kind.b"), NULL), -EINVAL);
    vigil_barrier_close(b8);
    vigil_barrier_close(b);
    vigil_hb_close(hb8);
    vigil_hb_close(hb1);
    vigil_hb_close(hb);
    return 0;
}

static int test_create_rules(void)
{
    vigil_hb *hb = fresh_hb("create.hb", 4);
    vigil_barrier *b = fresh_barrier("create.b", hb, 7), *x = NULL;
    struct stat st;
    EXPECT(stat(vt_path("create.b"), &st) == 0 && (st.st_mode & 07777) == 0600,
           "expected mode 0600, got %o", st.st_mode & 07777);
    EXPECT_RC(vigil_barrier_create(vt_path("create.b"), hb, 5, &x), -EEXIST);
    EXPECT_RC(vigil_barrier_create(vt_path("create.hb"), hb, 5, &x), -EEXIST);
    EXPECT(peek("create.b").grace_epochs == 7, "an -EEXIST create clobbered the file");
    EXPECT_RC(vigil_barrier_create_mode(vt_path("mode.b"), hb, 5, 0640, &x), 0);
    EXPECT(stat(vt_path("mode.b"), &st) == 0 && (st.st_mode & 07777) == 0640,
           "expected mode 0640, got %o", st.st_mode & 07777);
    vigil_barrier_close(x);
    EXPECT_RC(vigil_barrier_create(vt_path("n.b"), NULL, 5, &x), -EINVAL);
    EXPECT_RC(vigil_barrier_create(vt_path("n.b"), hb, 5, NULL), -EINVAL);
    EXPECT_RC(vigil_barrier_create(NULL, hb, 5, &x), -EINVAL);
    EXPECT_RC(vigil_barrier_create_mode(vt_path("n.b"), hb, 5, 010000, &x), -EINVAL);
    vigil_barrier_state ps = peek("create.b");
    EXPECT(ps.capacity == 4 && ps.epoch == 0 && ps.arrived == 0 && ps.recorded == 0 && ps.sleepers == 0,
           "fresh file: capacity %u epoch %u arrived %u recorded %u sleepers %u", ps.capacity,
           ps.epoch, ps.arrived, ps.recorded, ps.sleepers);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_bind(void)
{
    vigil_hb *hb = fresh_hb("bind.hb", 4);
    vigil_barrier *b = fresh_barrier("bind.b", hb, 2);
    uint32_t s = reg(hb, 1300);
    EXPECT_RC(vigil_barrier_bind(b, 4), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_bind(b, UINT32_MAX), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_bind(b, 3), VIGIL_EVACANT);
    EXPECT_RC(vigil_barrier_bind(NULL, 0), -EINVAL);
    for (int i = 0; i < 4; i++)
        vigil_hb_tick(hb);
    EXPECT(vigil_barrier_live_peers(b) == 0, "expected the unbeaten slot stale");
    EXPECT_RC(vigil_barrier_bind(b, s), 0);
    EXPECT(vigil_barrier_live_peers(b) == 1, "bind did not beat the slot");
    for (int i = 0; i < 4; i++)
        vigil_hb_tick(hb);
    /* A wait beats the bound slot at entry: the waiter is alive. */
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), 0);
    EXPECT(info.last_seen_epoch == vigil_hb_epoch(hb), "wait did not beat the bound slot");
    /* A slot that changed hands is not ours: no beat, no arrival, and the
     * caller is told its registration is gone. */
    EXPECT_RC(vigil_hb_unregister(hb, s), 0);
    EXPECT_RC(vigil_barrier_wait(b, 1), VIGIL_ENOPEERS);
    EXPECT(reg(hb, 1301) == s, "slot not reused");
    uint32_t other = reg(hb, 1302);
    for (int i = 0; i < 4; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, other); /* a live peer, so the wait gets past ENOPEERS */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 1, MS), VIGIL_ELOST);
    EXPECT(vigil_barrier_live_peers(b) == 1, "a handle bound to the old owner beat the new one's slot");
    EXPECT(peek("bind.b").arrived == 0, "a refused bound wait arrived");
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A peer scribbling the header moves none of this handle's bounds. */
static int test_scribbled_header(void)
{
    vigil_hb *hb = fresh_hb("scrib.hb", 4);
    vigil_barrier *b = fresh_barrier("scrib.b", hb, 5), *peer;
    EXPECT_RC(vigil_barrier_open(vt_path("scrib.b"), hb, 0, &peer), 0);
    reg(hb, 1400);
    peer->hdr->capacity = 0x7fffffff;
    memset(peer->hdr->magic, 0, 8);
    atomic_store(&peer->hdr->sleepers, 0x7fffffff); /* a useless wake, not a hang */
    atomic_store(&peer->hdr->gate, (uint64_t)7 << 32 | 5); /* another round's gate */
    EXPECT_RC(vigil_barrier_bind(b, 1000), VIGIL_ERANGE);
    EXPECT(vigil_barrier_live_peers(b) == 1, "live %u", vigil_barrier_live_peers(b));
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    /* A count about to overflow into the epoch is refused. */
    atomic_store(&peer->hdr->state, (uint64_t)1 << 32 | UINT32_MAX);
    EXPECT_RC(vigil_barrier_wait(b, 1), -EOVERFLOW);
    EXPECT(vigil_barrier_epoch(b) == 1, "overflowing arrival moved the epoch");
    vigil_barrier_close(peer);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    vigil_barrier *again;
    vigil_hb *hb2 = fresh_hb("scrib2.hb", 4);
    EXPECT_RC(vigil_barrier_open(vt_path("scrib.b"), hb2, 0, &again), VIGIL_EBADFILE);
    vigil_hb_close(hb2);
    return 0;
}

/*
 * What a death after arriving leaves behind. Slots P (this process), C (a
 * child that arrives and is killed) and D (a live peer that has not come).
 * Unbound: C's arrival stays in `arrived` and, once C has aged out, stands
 * in for D (the reference's rule). Bound: C's record stays but is not
 * counted once C lapses, so the round waits for D.
 */
static int dead_after_arriving(bool bound)
{
    shared_reset();
    const char *hbn = bound ? "dab.hb" : "dau.hb", *bn = bound ? "dab.b" : "dau.b";
    vigil_hb *hb = fresh_hb(hbn, 4);
    vigil_barrier *b = fresh_barrier(bn, hb, 2);
    uint32_t P = reg(hb, 1500), C = reg(hb, 1501), D = reg(hb, 1502);
    if (bound)
        EXPECT_RC(vigil_barrier_bind(b, P), 0);
    pid_t k = spawn_waiter((struct waiter_args){ hbn, bn, 0, bound ? (int64_t)C : -1, 0, 0, 0 });
    /* A bound arrival is counted first and recorded just after: wait for
     * both, so the kill lands after the arrival, not inside it. */
    EXPECT(VT_WAIT_FOR(peek(bn).arrived == 1 && peek(bn).recorded == (bound ? 1u : 0u), 10000),
           "child never arrived");
    kill(k, SIGKILL);
    EXPECT(vt_wait(k, 10000) == 128 + SIGKILL, "child was not killed");
    vigil_barrier_state st = peek(bn);
    EXPECT(st.arrived == 1 && st.recorded == (bound ? 1u : 0u),
           "after the death: arrived %u recorded %u", st.arrived, st.recorded);
    for (int i = 0; i < 3; i++) {
        vigil_hb_tick(hb);
        vigil_hb_beat(hb, P);
        vigil_hb_beat(hb, D);
    }
    EXPECT(vigil_barrier_live_peers(b) == 2, "expected P and D live, got %u", vigil_barrier_live_peers(b));
    if (!bound) {
        EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 10 * SEC), VIGIL_SERIAL);
    } else {
        EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 30 * MS), VIGIL_ETIMEDOUT);
        st = peek(bn);
        EXPECT(st.arrived == 1 && st.recorded == 1, "after timeout: arrived %u recorded %u",
               st.arrived, st.recorded);
        /* D comes: now every live peer has arrived. */
        pid_t d = spawn_waiter((struct waiter_args){ hbn, bn, 1, D, 0, 0, 0 });
        EXPECT(VT_WAIT_FOR(peek(bn).arrived == 2, 10000), "D never arrived");
        vigil_hb_beat(hb, D);
        int mine = vigil_barrier_wait(b, 0);
        EXPECT(reap(d) == 0, "D failed");
        EXPECT((mine == VIGIL_SERIAL) + (sh->rc[1] == VIGIL_SERIAL) == 1,
               "expected one SERIAL, got %d and %d", mine, sh->rc[1]);
    }
    EXPECT(vigil_barrier_epoch(b) == 1, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_dead_after_arriving_unbound(void) { return dead_after_arriving(false); }
static int test_dead_after_arriving_bound(void) { return dead_after_arriving(true); }

/*
 * Mixed: the round releases when the live slots without an arrival record
 * are no more than the unbound arrivals. Slots A (bound child), S (live,
 * never arrives) and P (this process, bound). Then an unbound caller that
 * is no peer at all arrives and stands in for S.
 */
static int test_mixed_bound_unbound(void)
{
    shared_reset();
    vigil_hb *hb = fresh_hb("mixed.hb", 4);
    vigil_barrier *b = fresh_barrier("mixed.b", hb, 5);
    uint32_t A = reg(hb, 1600);
    reg(hb, 1601);
    uint32_t P = reg(hb, 1602);
    EXPECT_RC(vigil_barrier_bind(b, P), 0);
    pid_t a = spawn_waiter((struct waiter_args){ "mixed.hb", "mixed.b", 0, A, 0, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("mixed.b").arrived == 1 && peek("mixed.b").recorded == 1, 10000),
           "A never arrived");
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 20 * MS), VIGIL_ETIMEDOUT); /* S missing */
    pid_t u = spawn_waiter((struct waiter_args){ "mixed.hb", "mixed.b", 1, -1, 0, 0, 0 });
    EXPECT(VT_WAIT_FOR(peek("mixed.b").arrived == 2, 10000), "the unbound caller never arrived");
    vigil_barrier_state st = peek("mixed.b");
    EXPECT(st.recorded == 1, "recorded %u", st.recorded);
    int mine = vigil_barrier_wait_timeout(b, 0, 10 * SEC);
    EXPECT(reap(a) == 0 && reap(u) == 0, "children failed");
    int serial = (mine == VIGIL_SERIAL) + (sh->rc[0] == VIGIL_SERIAL) + (sh->rc[1] == VIGIL_SERIAL);
    EXPECT(serial == 1 && mine >= 0 && sh->rc[0] >= 0 && sh->rc[1] >= 0,
           "expected all released, one SERIAL: %d %d %d", mine, sh->rc[0], sh->rc[1]);

    /* A quorum counts arrivals of live bound peers and unbound ones, not
     * the record of a bound peer that has lapsed. */
    shared_reset();
    pid_t q = spawn_waiter((struct waiter_args){ "mixed.hb", "mixed.b", 0, A, 1, 5, 0 });
    EXPECT(VT_WAIT_FOR(peek("mixed.b").arrived == 1, 10000), "quorum child never arrived");
    kill(q, SIGKILL);
    EXPECT(vt_wait(q, 10000) == 128 + SIGKILL, "quorum child not killed");
    for (int i = 0; i < 6; i++) {
        vigil_hb_tick(hb);
        vigil_hb_beat(hb, P);
    }
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 1, 2, 20 * MS), VIGIL_ETIMEDOUT);
    vigil_barrier *u2;
    EXPECT_RC(vigil_barrier_open(vt_path("mixed.b"), hb, 0, &u2), 0);
    pid_t r = spawn_waiter((struct waiter_args){ "mixed.hb", "mixed.b", 1, -1, 1, 2, 0 });
    EXPECT(VT_WAIT_FOR(peek("mixed.b").arrived == 2, 10000), "unbound quorum child never arrived");
    mine = vigil_barrier_wait_quorum_timeout(b, 1, 2, 10 * SEC);
    EXPECT(reap(r) == 0, "child failed");
    EXPECT((mine == VIGIL_SERIAL) + (sh->rc[1] == VIGIL_SERIAL) == 1,
           "quorum of P and an unbound caller: %d and %d", mine, sh->rc[1]);
    vigil_barrier_close(u2);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A releaser killed between its commit and its move of the state leaves
 * the gate committed: the next caller of the round finishes the release
 * (it passes, and the round after it works as any), and a withdrawal that
 * finds the gate committed has passed the barrier too. */
static int test_finish_after_dead_committer(void)
{
    vigil_hb *hb = fresh_hb("judge.hb", 4);
    vigil_barrier *b = fresh_barrier("judge.b", hb, 5);
    reg(hb, 1900);
    reg(hb, 1901);
    atomic_store(&b->hdr->gate, (uint64_t)0 << 32 | GATE_COMMITTED); /* round 0 decided */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, MS), 0);
    vigil_barrier_state st = peek("judge.b");
    EXPECT(st.arrived == 0 && st.epoch == 1, "after the finish: arrived %u epoch %u", st.arrived, st.epoch);
    EXPECT_RC(vigil_barrier_wait_quorum(b, 1, 1), VIGIL_SERIAL);
    /* A committer dies after a withdrawer took its arrival back. */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 2, 0), VIGIL_ETIMEDOUT);
    atomic_store(&b->hdr->gate, (uint64_t)2 << 32 | GATE_COMMITTED | 1);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 2, 0), 0);
    EXPECT(vigil_barrier_epoch(b) == 3, "epoch %u", vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Issue 17.1: a caller ahead of the barrier (waiting for round 1, or 2,
 * while the state is at 0) finishes a round 0 whose committer died after
 * its commit, with no waiter of round 0 left to do it; the finisher gets
 * 0 for round 0, and its own round is waited for as any. */
static int test_ahead_finishes_dead_committer(void)
{
    vigil_hb *hb = fresh_hb("ahead.hb", 4);
    vigil_barrier *b = fresh_barrier("ahead.b", hb, 5);
    reg(hb, 1910);
    atomic_store(&b->hdr->gate, (uint64_t)0 << 32 | GATE_COMMITTED); /* round 0 decided, state not moved */
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 1, 1, 5 * SEC), VIGIL_SERIAL);
    EXPECT(vigil_barrier_epoch(b) == 2, "expected round 0 finished and round 1 released: epoch %u",
           vigil_barrier_epoch(b));
    /* Two rounds ahead: round 2 committed and left; round 3 has nobody. */
    atomic_store(&b->hdr->gate, (uint64_t)2 << 32 | GATE_COMMITTED);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 4, 50 * MS), VIGIL_ETIMEDOUT);
    EXPECT(vigil_barrier_epoch(b) == 3, "expected round 2 finished by the caller at round 4: epoch %u",
           vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* Records a peer scribbled (stamped for this round, no count behind them,
 * registrations that never were, slots out of use) make no wait fail or
 * hang: the timed ones time out (a record naming another registration
 * counts for no one), and a bound caller that is the only live peer still
 * releases the round by itself. */
static int test_scribbled_records(void)
{
    enum { CAP = 8 };
    vigil_hb *hb = fresh_hb("srec.hb", CAP);
    vigil_barrier *b = fresh_barrier("srec.b", hb, 5);
    uint32_t me = reg(hb, 2000);
    reg(hb, 2001);
    for (uint32_t i = 0; i < CAP; i++) {
        atomic_store(&b->records[i].gen, 9000 + i);
        atomic_store(&b->records[i].ep, rec_make(0));
    }
    EXPECT(peek("srec.b").recorded == CAP, "recorded %u", peek("srec.b").recorded);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, MS), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 0, 2, MS), VIGIL_ETIMEDOUT);
    EXPECT(peek("srec.b").arrived == peek("srec.b").recorded, "arrivals not taken back: %u",
           peek("srec.b").arrived);
    EXPECT_RC(vigil_hb_unregister(hb, 1), 0);
    EXPECT_RC(vigil_barrier_bind(b, me), 0);
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    for (uint32_t i = 0; i < CAP; i++) {
        atomic_store(&b->records[i].gen, 9000 + i);
        atomic_store(&b->records[i].ep, rec_make(1));
    }
    EXPECT_RC(vigil_barrier_wait_quorum(b, 1, 1), VIGIL_SERIAL);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* live_peers computes the heartbeat table's liveness rule its own way
 * (one subtraction, one compare): it must agree with vigil_hb_live_count
 * everywhere, edges included. */
static int live_rule_matches(uint32_t cap, bool simd)
{
    char hbn[32], bn[32];
    snprintf(hbn, sizeof(hbn), "rule%u%d.hb", cap, simd);
    snprintf(bn, sizeof(bn), "rule%u%d.b", cap, simd);
    vigil_hb *hb = fresh_hb(hbn, cap);
    vigil_barrier *b0 = fresh_barrier(bn, hb, 0); /* grace 0 stored */
    if (simd && !b0->avx2) {
        vigil_barrier_close(b0);
        vigil_hb_close(hb);
        return 0; /* no AVX2 here: the scalar run covers it */
    }
    b0->avx2 = simd;
    for (uint32_t i = 0; i < cap - cap / 4; i++)
        reg(hb, 1800 + i);
    static const uint64_t graces[] = { 0, 1, 2, 5, 1000, (UINT64_C(1) << 63) - 3, (UINT64_C(1) << 63) - 2,
                                       (UINT64_C(1) << 63) - 1, UINT64_C(1) << 63, UINT64_MAX - 1, UINT64_MAX };
    static const uint64_t epochs[] = { 0, 1, 7, 1000, UINT64_C(1) << 63, UINT64_MAX - 2, UINT64_MAX };
    static const int64_t ages[] = { 0, 1, 2, 3, 4, 5, 6, 999, 1000, 1001, -1, -5, INT64_MAX, INT64_MIN,
                                    INT64_MAX - 1 };
    for (size_t g = 0; g < sizeof(graces) / sizeof(graces[0]); g++) {
        vigil_barrier *b = b0;
        if (graces[g] != 0) {
            EXPECT_RC(vigil_barrier_open(vt_path(bn), hb, graces[g], &b), 0);
            b->avx2 = simd;
        }
        for (size_t e = 0; e < sizeof(epochs) / sizeof(epochs[0]); e++) {
            atomic_store(&hb->hdr->epoch, epochs[e]);
            for (uint32_t i = 0; i < cap; i++) {
                int64_t age = ages[(i + e + g) % (sizeof(ages) / sizeof(ages[0]))];
                atomic_store(&hb->slots[i].last_seen_epoch, epochs[e] - (uint64_t)age);
            }
            uint32_t want = vigil_hb_live_count(hb, graces[g]), got = vigil_barrier_live_peers(b);
            EXPECT(got == want, "%s, %u slots, grace %llu epoch %llu: live_peers %u, heartbeat table says %u",
                   simd ? "AVX2" : "scalar", cap, (unsigned long long)graces[g],
                   (unsigned long long)epochs[e], got, want);
        }
        if (b != b0)
            vigil_barrier_close(b);
    }
    vigil_barrier_close(b0);
    vigil_hb_close(hb);
    return 0;
}

static int test_live_rule_matches_heartbeat(void)
{
    static const uint32_t caps[] = { 1, 3, 4, 16, 19, 64 };
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
        for (int simd = 0; simd < 2; simd++)
            if (live_rule_matches(caps[c], simd))
                return 1;
    return 0;
}

/* Threads sharing one unbound handle (TSan checks these): exactly one
 * SERIAL per round, and nobody leaves a round before all four arrived. */
enum { TH = 4, TROUNDS = 300 };
static vigil_barrier *th_b;
static _Atomic int th_arrived[TROUNDS], th_serial[TROUNDS], th_bad;

static void *th_main(void *arg)
{
    (void)arg;
    for (uint32_t r = 0; r < TROUNDS; r++) {
        atomic_fetch_add(&th_arrived[r], 1);
        int rc = vigil_barrier_wait_timeout(th_b, r, 30 * SEC);
        if (rc == VIGIL_SERIAL)
            atomic_fetch_add(&th_serial[r], 1);
        if (rc < 0 || atomic_load(&th_arrived[r]) != TH)
            atomic_fetch_add(&th_bad, 1);
    }
    return NULL;
}

static int test_threads_share_handle(void)
{
    vigil_hb *hb = fresh_hb("threads.hb", 8);
    th_b = fresh_barrier("threads.b", hb, 5);
    for (int i = 0; i < TH; i++)
        reg(hb, 1700 + i);
    pthread_t t[TH];
    for (int i = 0; i < TH; i++)
        EXPECT(pthread_create(&t[i], NULL, th_main, NULL) == 0, "pthread_create");
    for (int i = 0; i < TH; i++)
        pthread_join(t[i], NULL);
    EXPECT(atomic_load(&th_bad) == 0, "%d waits left early or failed", atomic_load(&th_bad));
    for (int r = 0; r < TROUNDS; r++)
        EXPECT(atomic_load(&th_serial[r]) == 1, "round %d had %d SERIAL", r, atomic_load(&th_serial[r]));
    EXPECT(vigil_barrier_epoch(th_b) == TROUNDS, "epoch %u", vigil_barrier_epoch(th_b));
    vigil_barrier_close(th_b);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_single_peer_release), VT_CASE(test_multi_peer_arrival),
        VT_CASE(test_quorum_threshold), VT_CASE(test_order_of_checks),
        VT_CASE(test_timeout_withdraws), VT_CASE(test_dead_peer_exclusion),
        VT_CASE(test_cross_handle_visibility), VT_CASE(test_multi_epoch_sequence),
        VT_CASE(test_arrived_count_reset), VT_CASE(test_wrap_safe), VT_CASE(test_early_epoch),
        VT_CASE(test_grace_stored), VT_CASE(test_capacity_must_match),
        VT_CASE(test_wrong_kind_refused), VT_CASE(test_create_rules), VT_CASE(test_bind),
        VT_CASE(test_scribbled_header), VT_CASE(test_dead_after_arriving_unbound),
        VT_CASE(test_dead_after_arriving_bound), VT_CASE(test_mixed_bound_unbound),
        VT_CASE(test_finish_after_dead_committer), VT_CASE(test_ahead_finishes_dead_committer),
        VT_CASE(test_scribbled_records),
        VT_CASE(test_live_rule_matches_heartbeat), VT_CASE(test_threads_share_handle))
