/* SPDX-License-Identifier: MIT */
/*
 * Description: heartbeat table: register, full table, beat, unregister and
 * reuse, in-flight bitmap, roles, SeqLock snapshots, live counting, the
 * handle's own bounds against a scribbled header, and threads of one
 * process registering at once.
 */
#include "hbtest.h"

#include <pthread.h>
#include <sys/mman.h>

#include "heartbeat_internal.h"

static int test_register(void)
{
    vigil_hb *hb = vt_hb_fresh("register.hb", 8);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    uint32_t slot = 99;
    EXPECT_RC(vigil_hb_register(hb, 1234, &slot), 0);
    EXPECT(slot == 0, "expected first slot 0, got %u", slot);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, slot, &info), 0);
    EXPECT(info.pid == 1234 && info.role == VIGIL_ROLE_WORKER && info.in_flight == 0,
           "expected pid 1234 worker no bits, got pid %u role %u bits %#llx",
           info.pid, info.role, (unsigned long long)info.in_flight);
    EXPECT(info.last_seen_epoch == 2, "expected register to stamp epoch 2, got %llu",
           (unsigned long long)info.last_seen_epoch);
    EXPECT_RC(vigil_hb_register(hb, 0, &slot), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_register(hb, 5678, &slot), 0);
    EXPECT(slot == 1, "expected second slot 1, got %u", slot);
    vigil_hb_close(hb);
    vigil_hb_close(NULL);
    return 0;
}

static int test_table_full(void)
{
    vigil_hb *hb = vt_hb_fresh("full.hb", 4);
    uint32_t slot;
    for (uint32_t i = 0; i < 4; i++)
        EXPECT_RC(vigil_hb_register(hb, 100 + i, &slot), 0);
    slot = 77;
    EXPECT_RC(vigil_hb_register(hb, 200, &slot), VIGIL_EFULL);
    EXPECT(slot == 77, "a failed register wrote its output: %u", slot);
    EXPECT(vigil_hb_capacity(hb) == 4, "capacity %u", vigil_hb_capacity(hb));
    vigil_hb_close(hb);
    return 0;
}

static int test_beat_advances_last_seen(void)
{
    vigil_hb *hb = vt_hb_fresh("beat.hb", 4);
    uint32_t slot;
    EXPECT_RC(vigil_hb_register(hb, 42, &slot), 0);
    for (int i = 0; i < 5; i++)
        EXPECT(vigil_hb_tick(hb) == (uint64_t)i + 1, "tick did not return the new epoch");
    EXPECT(vigil_hb_epoch(hb) == 5, "epoch %llu", (unsigned long long)vigil_hb_epoch(hb));
    vigil_slot_info info;
    vigil_hb_snapshot(hb, slot, &info);
    EXPECT(info.last_seen_epoch == 0, "last_seen moved without a beat");
    uint32_t seq_before = atomic_load(&hb->slots[slot].seq);
    vigil_hb_beat(hb, slot);
    vigil_hb_snapshot(hb, slot, &info);
    EXPECT(info.last_seen_epoch == 5, "expected last_seen 5 after beat, got %llu",
           (unsigned long long)info.last_seen_epoch);
    EXPECT(atomic_load(&hb->slots[slot].seq) == seq_before, "beat bumped the SeqLock version");
    vigil_hb_beat(hb, 4);          /* out of range: ignored */
    vigil_hb_beat(hb, UINT32_MAX); /* likewise */
    vigil_hb_close(hb);
    return 0;
}

static int test_unregister_reuse(void)
{
    vigil_hb *hb = vt_hb_fresh("reuse.hb", 2);
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, 1, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 2, &b), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, a, 7), 0);
    EXPECT_RC(vigil_hb_set_role(hb, a, VIGIL_ROLE_COORDINATOR), 0);
    EXPECT_RC(vigil_hb_unregister(hb, a), 0);
    EXPECT_RC(vigil_hb_unregister(hb, a), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_unregister(hb, 2), VIGIL_ERANGE);
    vigil_slot_info info = { .pid = 9 };
    EXPECT_RC(vigil_hb_snapshot(hb, a, &info), VIGIL_EVACANT);
    EXPECT(info.pid == 0 && info.in_flight == 0 && info.role == 0,
           "vacant slot snapshot not cleared: pid %u bits %#llx role %u", info.pid,
           (unsigned long long)info.in_flight, info.role);
    EXPECT_RC(vigil_hb_register(hb, 3, &c), 0);
    EXPECT(c == a, "expected the freed slot %u to be reused, got %u", a, c);
    vigil_hb_snapshot(hb, c, &info);
    EXPECT(info.pid == 3 && info.in_flight == 0 && info.role == VIGIL_ROLE_WORKER,
           "reused slot kept old state: pid %u bits %#llx role %u", info.pid,
           (unsigned long long)info.in_flight, info.role);
    vigil_hb_close(hb);
    return 0;
}

static int test_in_flight_mark_clear(void)
{
    vigil_hb *hb = vt_hb_fresh("bits.hb", 2);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 9, &s), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 0), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 63), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 5), 0);
    EXPECT_RC(vigil_hb_clear_in_flight(hb, s, 5), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 64), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_clear_in_flight(hb, s, 64), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, 2, 0), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, 1, 0), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_clear_in_flight(hb, 1, 0), VIGIL_EVACANT);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), 0);
    EXPECT(info.in_flight == (UINT64_C(1) << 63 | 1), "expected bits 0 and 63, got %#llx",
           (unsigned long long)info.in_flight);
    vigil_hb_close(hb);
    return 0;
}

static int test_roles(void)
{
    vigil_hb *hb = vt_hb_fresh("roles.hb", 2);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 9, &s), 0);
    EXPECT_RC(vigil_hb_set_role(hb, s, VIGIL_ROLE_COORDINATOR), 0);
    vigil_slot_info info;
    vigil_hb_snapshot(hb, s, &info);
    EXPECT(info.role == VIGIL_ROLE_COORDINATOR, "role %u", info.role);
    EXPECT_RC(vigil_hb_set_role(hb, s, 2), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_set_role(hb, 1, VIGIL_ROLE_WORKER), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_set_role(hb, 2, VIGIL_ROLE_WORKER), VIGIL_ERANGE);
    vigil_hb_close(hb);
    return 0;
}

/*
 * A registration is (slot, gen): the generation rises at every register
 * into a slot, a handle knows the ones it made (vigil_hb_mine), and
 * vigil_hb_owned answers for them. A holder whose registration was failed
 * over and registered again by another is told VIGIL_ELOST by set_role
 * and unregister, and changes nothing of its successor's; a retired slot
 * (its generations spent) is never registered again.
 */
static int test_generations_and_owned(void)
{
    vigil_hb *a = vt_hb_fresh("gen.hb", 2), *b;
    EXPECT_RC(vigil_hb_open(vt_path("gen.hb"), 0, &b), 0);
    uint32_t s, t;
    EXPECT(vigil_slot_gen(&a->slots[0]) == 0, "a new slot names a registration");
    EXPECT_RC(vigil_hb_owned(a, 0), 0);
    EXPECT_RC(vigil_hb_register(a, 11, &s), 0);
    EXPECT(vigil_slot_gen(&a->slots[s]) == 1 && vigil_hb_mine(a, s) == 1 && vigil_hb_mine(b, s) == 0,
           "gen %llu, mine %llu / %llu", (unsigned long long)vigil_slot_gen(&a->slots[s]),
           (unsigned long long)vigil_hb_mine(a, s), (unsigned long long)vigil_hb_mine(b, s));
    EXPECT_RC(vigil_hb_owned(a, s), 1);
    EXPECT_RC(vigil_hb_owned(b, s), 0); /* registered through another handle */
    EXPECT_RC(vigil_hb_owned(a, 2), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_owned(NULL, 0), -EINVAL);
    EXPECT_RC(vigil_hb_unregister(a, s), 0);
    EXPECT_RC(vigil_hb_owned(a, s), 0);
    EXPECT(vigil_slot_gen(&a->slots[s]) == 0 && atomic_load(&a->slots[s].gen) == (VIGIL_GEN_VACANT | 1),
           "vacated gen word %#llx", (unsigned long long)atomic_load(&a->slots[s].gen));

    /* Registered again: generation 2. Then stalled past its grace, failed
     * over, and the slot registered by b: generation 3, b's. */
    EXPECT_RC(vigil_hb_register(a, 11, &s), 0);
    EXPECT(vigil_hb_mine(a, s) == 2, "second registration is gen %llu", (unsigned long long)vigil_hb_mine(a, s));
    vt_hb_tick_keep(a, 3, 0);
    vigil_reclaim out[2];
    EXPECT_RC(vigil_failover_scan(b, 2, out, 2), 1);
    EXPECT_RC(vigil_hb_owned(a, s), 0);
    EXPECT_RC(vigil_hb_register(b, 11, &t), 0); /* the same pid, even */
    EXPECT(t == s && vigil_slot_gen(&b->slots[t]) == 3, "successor in slot %u gen %llu", t,
           (unsigned long long)vigil_slot_gen(&b->slots[t]));
    EXPECT_RC(vigil_hb_owned(a, s), 0);
    EXPECT_RC(vigil_hb_owned(b, t), 1);
    EXPECT_RC(vigil_hb_mark_in_flight(b, t, 5), 0);
    /* The stale holder: every call that would change the slot is told. */
    EXPECT_RC(vigil_hb_clear_in_flight(a, s, 5), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_mark_in_flight(a, s, 7), VIGIL_ELOST);
    EXPECT_RC((vigil_hb_clear_in_flight)(a, s, 5), VIGIL_ELOST); /* the exported functions too */
    EXPECT_RC((vigil_hb_mark_in_flight)(a, s, 7), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_set_role(a, s, VIGIL_ROLE_COORDINATOR), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_unregister(a, s), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_unregister(a, s), VIGIL_ELOST); /* told again, never let loose */
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(b, t, &info), 0);
    EXPECT(info.pid == 11 && info.role == VIGIL_ROLE_WORKER && info.in_flight == (1u << 5),
           "the successor was changed: pid %u role %u bits %#llx", info.pid, info.role,
           (unsigned long long)info.in_flight);
    /* A handle that registered nothing there (a supervisor's) marks
     * whichever registration holds the slot, and nothing in a vacant one. */
    vigil_hb *c;
    EXPECT_RC(vigil_hb_open(vt_path("gen.hb"), 0, &c), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(c, t, 9), 0);
    EXPECT_RC(vigil_hb_clear_in_flight(c, t, 9), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(c, 1 - t, 9), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_snapshot(b, t, &info), 0);
    EXPECT(info.in_flight == (1u << 5), "bits %#llx after the supervisor's mark and clear",
           (unsigned long long)info.in_flight);
    vigil_hb_close(c);
    EXPECT_RC(vigil_hb_set_role(b, t, VIGIL_ROLE_COORDINATOR), 0);
    EXPECT_RC(vigil_hb_unregister(b, t), 0);
    /* Unregistered through b, then registered through a: b's calls about
     * the slot change nothing of a's. */
    EXPECT_RC(vigil_hb_register(a, 14, &s), 0);
    EXPECT(s == t, "expected slot %u again, got %u", t, s);
    EXPECT_RC(vigil_hb_mark_in_flight(b, t, 1), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_set_role(b, t, VIGIL_ROLE_COORDINATOR), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_unregister(b, t), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_snapshot(a, s, &info), 0);
    EXPECT(info.pid == 14 && info.in_flight == 0 && info.role == VIGIL_ROLE_WORKER,
           "a's registration was changed through b: pid %u bits %#llx role %u", info.pid,
           (unsigned long long)info.in_flight, info.role);
    EXPECT_RC(vigil_hb_unregister(a, s), 0);

    /* A retired slot: its last generation is the largest a name keeps. */
    atomic_store(&a->slots[0].gen, VIGIL_GEN_VACANT | VIGIL_GEN_MAX);
    EXPECT_RC(vigil_hb_register(a, 12, &s), 0);
    EXPECT(s == 1, "registered into the retired slot 0 (got slot %u)", s);
    EXPECT_RC(vigil_hb_register(a, 13, &s), VIGIL_EFULL);
    vigil_hb_close(b);
    vigil_hb_close(a);
    return 0;
}

static int test_snapshot_args(void)
{
    vigil_hb *hb = vt_hb_fresh("snap.hb", 2);
    vigil_slot_info info = { .pid = 5 };
    EXPECT_RC(vigil_hb_snapshot(hb, 2, &info), VIGIL_ERANGE);
    EXPECT(info.pid == 5, "out-of-range snapshot wrote its output");
    EXPECT_RC(vigil_hb_snapshot(hb, 0, NULL), -EINVAL);
    vigil_hb_close(hb);
    return 0;
}

static int test_live_count_grace(void)
{
    vigil_hb *hb = vt_hb_fresh("live.hb", 8);
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, 1, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 2, &b), 0);
    EXPECT_RC(vigil_hb_register(hb, 3, &c), 0);
    EXPECT(vigil_hb_live_count(hb, 0) == 3, "expected 3 live at epoch 0");
    for (int i = 0; i < 3; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, a);
    /* epoch 3: a seen at 3 (age 0), b and c at 0 (age 3) */
    EXPECT(vigil_hb_live_count(hb, 2) == 1, "grace 2: expected 1 live, got %u", vigil_hb_live_count(hb, 2));
    EXPECT(vigil_hb_live_count(hb, 3) == 3, "grace 3: expected 3 live, got %u", vigil_hb_live_count(hb, 3));
    EXPECT(vigil_hb_live_count(hb, UINT64_MAX) == 3, "huge grace: expected 3 live");
    /* A last_seen ahead of the epoch (a beat racing a read) is live. */
    atomic_store(&hb->slots[b].last_seen_epoch, 10);
    EXPECT(vigil_hb_live_count(hb, 0) == 2, "expected a and the future-stamped b live, got %u",
           vigil_hb_live_count(hb, 0));
    vigil_hb_unregister(hb, a);
    EXPECT(vigil_hb_live_count(hb, 100) == 2, "vacant slot counted live");
    vigil_hb_close(hb);
    return 0;
}

/* A writer killed mid-change leaves the version odd: readers and writers
 * give up with VIGIL_EBUSY instead of hanging, and register moves on. */
static int test_wedged_slot(void)
{
    vigil_hb *hb = vt_hb_fresh("wedged.hb", 2);
    uint32_t s, t;
    EXPECT_RC(vigil_hb_register(hb, 11, &s), 0);
    vt_wedge(hb, s, VT_WRITER_DEAD);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), VIGIL_EBUSY);
    EXPECT_RC(vigil_hb_unregister(hb, s), VIGIL_EBUSY);
    atomic_store(&hb->slots[s].pid, 0); /* vacant but wedged */
    EXPECT_RC(vigil_hb_register(hb, 12, &t), 0);
    EXPECT(t == 1, "register took the wedged slot %u", t);
    EXPECT_RC(vigil_hb_register(hb, 13, &t), VIGIL_EFULL);
    vigil_hb_close(hb);
    return 0;
}

/* The handle keeps the bounds it checked at open: a peer rewriting the
 * header's capacity moves nothing. */
static int test_scribbled_header(void)
{
    vigil_hb *hb = vt_hb_fresh("scribble.hb", 4);
    vigil_hb *peer;
    EXPECT_RC(vigil_hb_open(vt_path("scribble.hb"), 4, &peer), 0);
    uint32_t huge = 0x7fffffff;
    memcpy((char *)peer->hdr + 16, &huge, 4);
    memset(peer->hdr, 0, 8); /* and the magic */
    EXPECT(vigil_hb_capacity(hb) == 4, "capacity followed the scribble: %u", vigil_hb_capacity(hb));
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, 1000, &info), VIGIL_ERANGE);
    vigil_hb_beat(hb, 1000);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, 1000, 1), VIGIL_ERANGE);
    uint32_t s;
    for (int i = 0; i < 4; i++)
        EXPECT_RC(vigil_hb_register(hb, 50 + i, &s), 0);
    EXPECT_RC(vigil_hb_register(hb, 60, &s), VIGIL_EFULL);
    vigil_hb_close(peer);
    vigil_hb_close(hb);
    vigil_hb *again;
    EXPECT_RC(vigil_hb_open(vt_path("scribble.hb"), 0, &again), VIGIL_EBADFILE);
    return 0;
}

static int test_strerror(void)
{
    static const int codes[] = { VIGIL_EFULL, VIGIL_EBADFILE, VIGIL_ECAPACITY, VIGIL_ERANGE,
                                 VIGIL_EVACANT, VIGIL_ETIMEDOUT, VIGIL_ENOPEERS, VIGIL_ELOST,
                                 VIGIL_EBUSY, -EINVAL, -ENOENT, 0, 1, -1000, -1010, -4095,
                                 -5000, INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *s = vigil_strerror(codes[i]);
        EXPECT(s && *s, "vigil_strerror(%d) gave %s", codes[i], s ? "an empty string" : "NULL");
    }
    EXPECT(strcmp(vigil_strerror(VIGIL_EFULL), vigil_strerror(VIGIL_EBUSY)) != 0, "codes share a text");
    EXPECT(strcmp(vigil_strerror(-ENOENT), strerror(ENOENT)) == 0, "-errno not described as errno");
    return 0;
}

/* Threads of one process share a table (and register's start-time cache):
 * four threads registering the process's pid never hold one slot at once.
 * Mainly for ThreadSanitizer, which checks threads, not processes. */
#define THREADS 4
struct thr {
    vigil_hb        *hb;
    _Atomic int     *owner; /* per slot: 0, or the thread index + 1 holding it */
    int              id;
    int              err;
};

static void *register_thread(void *arg)
{
    struct thr *t = arg;
    uint32_t pid = (uint32_t)getpid();
    for (int i = 0; i < 2000 && !t->err; i++) {
        uint32_t s;
        int rc = vigil_hb_register(t->hb, pid, &s);
        if (rc == VIGIL_EFULL)
            continue;
        if (rc != 0) {
            t->err = rc;
            break;
        }
        int none = 0;
        if (!atomic_compare_exchange_strong(&t->owner[s], &none, t->id + 1)) {
            t->err = -9999; /* someone else holds this slot */
            break;
        }
        vigil_slot_info info;
        vigil_hb_beat(t->hb, s);
        if (vigil_hb_mark_in_flight(t->hb, s, (unsigned)t->id) != 0 || vigil_hb_snapshot(t->hb, s, &info) != 0 ||
            info.pid != pid || info.in_flight != UINT64_C(1) << t->id)
            t->err = -9998;
        atomic_store(&t->owner[s], 0);
        if (vigil_hb_unregister(t->hb, s) != 0)
            t->err = -9997;
    }
    return NULL;
}

static int test_threads_register(void)
{
    vigil_hb *hb = vt_hb_fresh("threads.hb", THREADS - 1); /* one short, so EFULL happens too */
    _Atomic int owner[THREADS] = { 0 };
    struct thr t[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        t[i] = (struct thr){ hb, owner, i, 0 };
        EXPECT(pthread_create(&th[i], NULL, register_thread, &t[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        EXPECT(t[i].err == 0, "thread %d: %d (%s; -9999 shared slot, -9998 wrong snapshot, -9997 unregister)", i,
               t[i].err, vigil_strerror(t[i].err));
    EXPECT(vigil_hb_live_count(hb, 100) == 0, "slots left occupied: %u", vigil_hb_live_count(hb, 100));
    uint64_t mine = 0;
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    if (vigil_proc_start_time((uint32_t)getpid(), &mine) == 0)
        EXPECT(atomic_load(&hb->slots[s].start_time) == mine, "cached start time %llu, /proc says %llu",
               (unsigned long long)atomic_load(&hb->slots[s].start_time), (unsigned long long)mine);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_register), VT_CASE(test_table_full), VT_CASE(test_beat_advances_last_seen),
        VT_CASE(test_unregister_reuse), VT_CASE(test_in_flight_mark_clear), VT_CASE(test_roles), VT_CASE(test_generations_and_owned),
        VT_CASE(test_snapshot_args), VT_CASE(test_live_count_grace), VT_CASE(test_wedged_slot),
        VT_CASE(test_scribbled_header), VT_CASE(test_strerror), VT_CASE(test_threads_register))
