/* SPDX-License-Identifier: MIT */
/*
 * Description: failover scan: stale slots vacated with their bits handed
 * over once, live ones never touched, the grace boundary, the max limit,
 * stray bits on a vacant slot, wedged slots (version left odd) recorded on
 * first sight and repaired once past grace, and the probe-assisted scan
 * taking a dead owner inside its grace window.
 */
#include "hbtest.h"
#include "proc_internal.h"

#include <pthread.h>
#include <sys/mman.h>

static int test_scan_args(void)
{
    vigil_hb *hb = vt_hb_fresh("args.hb", 4);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(NULL, 2, out, 4), -EINVAL);
    EXPECT_RC(vigil_failover_scan(hb, 2, NULL, 4), -EINVAL);
    EXPECT_RC(vigil_failover_scan(hb, 2, NULL, 0), 0);
    EXPECT_RC(vigil_failover_scan_probe(NULL, 2, out, 4), -EINVAL);
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 0);
    vigil_hb_close(hb);
    return 0;
}

/* Live slots: not one byte of theirs changes, the version included. */
static int test_live_untouched(void)
{
    vigil_hb *hb = vt_hb_fresh("live.hb", 8);
    uint32_t s[3];
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(vigil_hb_register(hb, 100 + i, &s[i]), 0);
        EXPECT_RC(vigil_hb_mark_in_flight(hb, s[i], i), 0);
    }
    vt_hb_tick_keep(hb, 10, 0x7);
    struct vigil_hb_slot before[3];
    memcpy(before, hb->slots, sizeof(before));
    vigil_reclaim out[8];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 8), 0);
    EXPECT_RC(vigil_failover_scan(hb, 0, out, 8), 0);
    EXPECT(memcmp(before, hb->slots, sizeof(before)) == 0, "a scan wrote to a live slot");
    vigil_hb_close(hb);
    return 0;
}

static int test_stale_reclaimed_once(void)
{
    vigil_hb *hb = vt_hb_fresh("stale.hb", 8);
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, 11, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 12, &b), 0);
    EXPECT_RC(vigil_hb_register(hb, 13, &c), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, a, 1), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, a, 2), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, b, 5), 0);
    EXPECT_RC(vigil_hb_set_role(hb, a, VIGIL_ROLE_COORDINATOR), 0);
    vt_hb_tick_keep(hb, 3, UINT64_C(1) << b);
    vigil_reclaim out[8];
    memset(out, 0xee, sizeof(out));
    int n = vigil_failover_scan(hb, 2, out, 8);
    EXPECT(n == 2, "expected 2 reclaims (pids 11 and 13), got %d", n);
    EXPECT(out[0].slot == a && out[0].pid == 11 && out[0].in_flight == 0x6,
           "expected {slot %u, pid 11, 0x6}, got {slot %u, pid %u, %#llx}", a, out[0].slot,
           out[0].pid, (unsigned long long)out[0].in_flight);
    EXPECT(out[1].slot == c && out[1].pid == 13 && out[1].in_flight == 0,
           "expected {slot %u, pid 13, 0}, got {slot %u, pid %u, %#llx}", c, out[1].slot,
           out[1].pid, (unsigned long long)out[1].in_flight);
    vigil_slot_info info = { .pid = 1 };
    EXPECT_RC(vigil_hb_snapshot(hb, a, &info), VIGIL_EVACANT);
    EXPECT(info.in_flight == 0 && info.role == VIGIL_ROLE_WORKER,
           "vacated slot kept bits %#llx or role %u", (unsigned long long)info.in_flight, info.role);
    EXPECT(atomic_load(&hb->slots[a].start_time) == 0 && atomic_load(&hb->slots[a].seq) % 2 == 0,
           "vacated slot kept its start time or stayed locked");
    EXPECT_RC(vigil_hb_snapshot(hb, b, &info), 0);
    EXPECT(info.pid == 12 && info.in_flight == (1u << 5), "live slot changed: pid %u bits %#llx",
           info.pid, (unsigned long long)info.in_flight);
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 8), 0);
    EXPECT(atomic_load(&hb->slots[a].seq) % 2 == 0, "vacated slot left odd");
    uint32_t again;
    EXPECT_RC(vigil_hb_register(hb, 14, &again), 0);
    EXPECT(again == a, "expected the vacated slot %u to be reused, got %u", a, again);
    vigil_hb_close(hb);
    return 0;
}

static int test_grace_boundary(void)
{
    vigil_hb *hb = vt_hb_fresh("boundary.hb", 2);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 7, &s), 0);
    vt_hb_tick_keep(hb, 3, 0);
    vigil_reclaim out[2];
    EXPECT_RC(vigil_failover_scan(hb, 3, out, 2), 0); /* age 3 == grace: live */
    EXPECT_RC(vigil_failover_scan(hb, UINT64_MAX, out, 2), 0);
    vigil_hb_tick(hb);
    EXPECT_RC(vigil_failover_scan(hb, 3, out, 2), 1); /* age 4 */
    /* A last_seen ahead of the epoch (a beat racing the read) is live. */
    EXPECT_RC(vigil_hb_register(hb, 8, &s), 0);
    atomic_store(&hb->slots[s].last_seen_epoch, vigil_hb_epoch(hb) + 5);
    EXPECT_RC(vigil_failover_scan(hb, 0, out, 2), 0);
    vigil_hb_close(hb);
    return 0;
}

/* With room for fewer entries than stale slots, the rest stay occupied,
 * bits and all, for the next scan: nothing is vacated without its entry. */
static int test_max_limits(void)
{
    vigil_hb *hb = vt_hb_fresh("max.hb", 8);
    uint32_t s;
    for (int i = 0; i < 5; i++) {
        EXPECT_RC(vigil_hb_register(hb, 50 + i, &s), 0);
        EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 10 + i), 0);
    }
    vt_hb_tick_keep(hb, 2, 0);
    vigil_reclaim out[8];
    EXPECT_RC(vigil_failover_scan(hb, 1, out, 0), 0);
    EXPECT(vigil_hb_live_count(hb, UINT64_MAX) == 5, "max 0 vacated a slot");
    uint64_t seen = 0;
    int total = 0, rounds = 0;
    for (int n; (n = vigil_failover_scan(hb, 1, out, 2)) > 0; rounds++) {
        EXPECT(n <= 2, "scan wrote %d entries with max 2", n);
        for (int i = 0; i < n; i++) {
            EXPECT(!(seen & out[i].in_flight), "bits %#llx handed over twice",
                   (unsigned long long)out[i].in_flight);
            seen |= out[i].in_flight;
        }
        total += n;
        EXPECT(vigil_hb_live_count(hb, UINT64_MAX) == (uint32_t)(5 - total),
               "after %d entries %u slots occupied", total, vigil_hb_live_count(hb, UINT64_MAX));
    }
    EXPECT(total == 5 && rounds == 3, "expected 5 entries in 3 scans, got %d in %d", total, rounds);
    EXPECT(seen == UINT64_C(0x1f) << 10, "expected bits 10..14, got %#llx", (unsigned long long)seen);
    vigil_hb_close(hb);
    return 0;
}

/* Marks that land after the slot was vacated are handed over, pid 0. */
static int test_stray_bits(void)
{
    vigil_hb *hb = vt_hb_fresh("stray.hb", 2);
    atomic_store(&hb->slots[1].in_flight, 0x30);
    vigil_reclaim out[2];
    EXPECT_RC(vigil_failover_scan(hb, 5, out, 2), 1);
    EXPECT(out[0].slot == 1 && out[0].pid == 0 && out[0].in_flight == 0x30,
           "expected {1, 0, 0x30}, got {%u, %u, %#llx}", out[0].slot, out[0].pid,
           (unsigned long long)out[0].in_flight);
    EXPECT_RC(vigil_failover_scan(hb, 5, out, 2), 0);
    vigil_hb_close(hb);
    return 0;
}

/* A writer killed mid-change: the first scan proves it dead and repairs
 * the slot at once, moving the version on; the owner (still live) keeps
 * its slot and bits until it goes stale like any other. */
static int test_wedged_repaired(void)
{
    vigil_hb *hb = vt_hb_fresh("wedged.hb", 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 21, &s), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 3), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 9), 0);
    uint64_t v = vt_wedge(hb, s, VT_WRITER_DEAD);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), VIGIL_EBUSY);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 0);
    EXPECT(atomic_load(&hb->slots[s].seq) == v + 3 && atomic_load(&hb->slots[s].writer) == vigil_self_lock_word(),
           "expected version %llu and the repairer as last writer, got %llu, %#llx", (unsigned long long)v + 3,
           (unsigned long long)atomic_load(&hb->slots[s].seq), (unsigned long long)atomic_load(&hb->slots[s].writer));
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), 0);
    EXPECT(info.pid == 21 && info.in_flight == ((1u << 3) | (1u << 9)), "live owner lost: pid %u bits %#llx",
           info.pid, (unsigned long long)info.in_flight);
    vt_hb_tick_keep(hb, 3, 0);
    int n = vigil_failover_scan(hb, 2, out, 4);
    EXPECT(n == 1 && out[0].slot == s && out[0].pid == 21 && out[0].in_flight == ((1u << 3) | (1u << 9)),
           "expected {%u, 21, 0x208}, got %d: {%u, %u, %#llx}", s, n, out[0].slot, out[0].pid,
           (unsigned long long)out[0].in_flight);
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), VIGIL_EVACANT);
    uint32_t t;
    EXPECT_RC(vigil_hb_register(hb, 22, &t), 0);
    EXPECT(t == s, "repaired slot %u not reusable (got %u)", s, t);
    vigil_hb_close(hb);
    return 0;
}

/* A writer that is alive (paused, preempted) or out of sight (another pid
 * namespace) is never robbed, however long its change takes: the version
 * stays where it left it, and its own unlock moves it on, never back. */
static int test_wedged_by_live_writer_kept(void)
{
    vigil_hb *hb = vt_hb_fresh("wedgedlive.hb", 2);
    uint32_t s, o;
    EXPECT_RC(vigil_hb_register(hb, 31, &s), 0);
    EXPECT_RC(vigil_hb_register(hb, 32, &o), 0);
    uint64_t v = vt_wedge(hb, s, VT_WRITER_ALIVE);
    uint64_t vo = vt_wedge(hb, o, VT_WRITER_ELSEWHERE);
    vigil_reclaim out[2];
    for (int e = 0; e < 10; e++) {
        vt_hb_tick_keep(hb, 1, 0);
        EXPECT_RC(vigil_failover_scan(hb, 1, out, 2), 0);
        EXPECT_RC(vigil_failover_scan_probe(hb, 1, out, 2), 0);
    }
    EXPECT(atomic_load(&hb->slots[s].seq) == v && atomic_load(&hb->slots[o].seq) == vo,
           "a live writer's slot was repaired: versions %llu, %llu", (unsigned long long)atomic_load(&hb->slots[s].seq),
           (unsigned long long)atomic_load(&hb->slots[o].seq));
    vigil_slot_unlock(&hb->slots[s], v - 1); /* the paused writer resumes */
    EXPECT(atomic_load(&hb->slots[s].seq) == v + 1 && atomic_load(&hb->slots[s].writer) == vigil_self_lock_word(),
           "unlock gave version %llu", (unsigned long long)atomic_load(&hb->slots[s].seq));
    vigil_hb_close(hb);
    return 0;
}

/*
 * Issue 17.6, the take-over's ABA, in one process: a writer whose lock
 * word w is judged dead leaves the slot locked at {w, odd}; a scanner
 * reads that holding and judges it; meanwhile the slot is repaired and
 * locked again by a writer with the very same word w (a recycled pid in
 * the same clock tick). The take-over from the holding read must fail:
 * the version it names is gone. The lock stays the new writer's, whose
 * unlock then moves the version on.
 */
static int test_take_over_names_one_holding(void)
{
    vigil_hb *hb = vt_hb_fresh("aba.hb", 1);
    struct vigil_hb_slot *s = &hb->slots[0];
    uint64_t v = vt_wedge(hb, 0, VT_WRITER_DEAD);
    uint64_t w, odd;
    EXPECT(vigil_pair_read(&s->writer, &w, &odd) && odd == v && (odd & 1u), "read %llu, wedged at %llu",
           (unsigned long long)odd, (unsigned long long)v);
    vigil_reclaim out[1];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 1), 0); /* another scanner repairs it */
    uint64_t held;
    EXPECT_RC(vigil_pair_take(&s->writer, w, &held), 0); /* the newcomer, with the same word */
    uint64_t lv;
    EXPECT_RC(vigil_slot_take_over(s, w, odd, &lv), VIGIL_EBUSY);
    EXPECT(atomic_load(&s->writer) == w && atomic_load(&s->seq) == held, "the newcomer was robbed: %#llx at %llu",
           (unsigned long long)atomic_load(&s->writer), (unsigned long long)atomic_load(&s->seq));
    /* From the holding as it is now, a take-over would succeed: the
     * version, not the word, is what failed the stale one. */
    EXPECT_RC(vigil_slot_take_over(s, w, held, &lv), 0);
    vigil_slot_unlock(s, lv);
    EXPECT(atomic_load(&s->seq) == held + 3, "version %llu after the take-over's unlock",
           (unsigned long long)atomic_load(&s->seq));
    vigil_hb_close(hb);
    return 0;
}

static int test_wedged_vacant(void)
{
    vigil_hb *hb = vt_hb_fresh("wedgedvacant.hb", 2);
    /* Slot 0: a registrant died before storing its pid; slot 1: a scanner
     * died between clearing the pid and taking the bits. */
    vt_wedge(hb, 0, VT_WRITER_DEAD);
    vt_wedge(hb, 1, VT_WRITER_DEAD);
    atomic_store(&hb->slots[1].in_flight, 0x81);
    uint32_t t;
    EXPECT_RC(vigil_hb_register(hb, 5, &t), VIGIL_EFULL);
    vigil_reclaim out[2];
    EXPECT_RC(vigil_failover_scan(hb, 0, out, 2), 1);
    EXPECT(out[0].slot == 1 && out[0].pid == 0 && out[0].in_flight == 0x81,
           "expected {1, 0, 0x81}, got {%u, %u, %#llx}", out[0].slot, out[0].pid,
           (unsigned long long)out[0].in_flight);
    EXPECT_RC(vigil_hb_register(hb, 5, &t), 0);
    EXPECT_RC(vigil_hb_register(hb, 6, &t), 0);
    vigil_hb_close(hb);
    return 0;
}

/*
 * model/slot.pml's unreg finding: a worker stalled past its grace is
 * failed over and its slot registered again by another process; the
 * worker's late unregister must not vacate the newcomer. It gets
 * VIGIL_ELOST (its registration is gone) and the newcomer keeps its slot
 * and its unit. A handle
 * that registered nothing there (a supervisor's) still unregisters it.
 */
static int test_late_unregister_after_failover(void)
{
    vigil_hb *worker = vt_hb_fresh("lateunreg.hb", 2), *other, *super;
    EXPECT_RC(vigil_hb_open(vt_path("lateunreg.hb"), 0, &other), 0);
    EXPECT_RC(vigil_hb_open(vt_path("lateunreg.hb"), 0, &super), 0);
    uint32_t s, t;
    EXPECT_RC(vigil_hb_register(worker, 71, &s), 0);
    vt_hb_tick_keep(worker, 3, 0);
    vigil_reclaim out[2];
    EXPECT_RC(vigil_failover_scan(other, 2, out, 2), 1);
    EXPECT_RC(vigil_hb_register(other, 72, &t), 0);
    EXPECT(t == s, "the newcomer got slot %u, not %u", t, s);
    EXPECT_RC(vigil_hb_mark_in_flight(other, t, 5), 0);
    EXPECT_RC(vigil_hb_unregister(worker, s), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_unregister(worker, s), VIGIL_ELOST); /* and again: never taken for a supervisor's */
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(other, t, &info), 0);
    EXPECT(info.pid == 72 && info.in_flight == (1u << 5), "the newcomer lost its slot: pid %u bits %#llx",
           info.pid, (unsigned long long)info.in_flight);
    EXPECT_RC(vigil_hb_unregister(super, t), 0);
    EXPECT_RC(vigil_hb_snapshot(other, t, &info), VIGIL_EVACANT);
    vigil_hb_close(super);
    vigil_hb_close(other);
    vigil_hb_close(worker);
    return 0;
}

/* A full out array: a dead writer's slot is repaired all the same, but
 * its owner is vacated only by a scan with room for the entry. */
static int test_wedged_waits_for_room(void)
{
    vigil_hb *hb = vt_hb_fresh("wedgedroom.hb", 2);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 61, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 62, &b), 0);
    vt_wedge(hb, b, VT_WRITER_DEAD);
    vigil_reclaim out[2];
    vt_hb_tick_keep(hb, 2, 0);
    EXPECT_RC(vigil_failover_scan(hb, 0, out, 1), 1);
    EXPECT(out[0].pid == 61, "expected pid 61 first, got %u", out[0].pid);
    EXPECT(atomic_load(&hb->slots[b].pid) == 62, "slot vacated without room for its entry");
    EXPECT_RC(vigil_failover_scan(hb, 0, out, 1), 1);
    EXPECT(out[0].pid == 62, "expected pid 62 next, got %u", out[0].pid);
    vigil_hb_close(hb);
    return 0;
}

/* The probe-assisted scan takes a dead owner inside its grace window and
 * leaves live and unjudgeable owners alone. */
static int test_scan_probe(void)
{
    vigil_hb *hb = vt_hb_fresh("probescan.hb", 8);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    EXPECT(child > 0, "fork failed");
    siginfo_t si;
    EXPECT(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0, "waitid: %s", strerror(errno));
    uint32_t dead, self, live_child, foreign;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)child, &dead), 0); /* a zombie now */
    EXPECT_RC(vigil_hb_mark_in_flight(hb, dead, 17), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &self), 0);
    pid_t sleeper = fork();
    if (sleeper == 0) {
        vt_await_kill();
    }
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)sleeper, &live_child), 0);
    EXPECT_RC(vigil_hb_register(hb, 0x7ffffff0u, &foreign), 0);
    atomic_store(&hb->slots[foreign].owner_ns, vigil_self_pidns() + 1);

    vigil_reclaim out[8];
    EXPECT_RC(vigil_failover_scan(hb, 5, out, 8), 0); /* all inside grace */
    int n = vigil_failover_scan_probe(hb, 5, out, 8);
    EXPECT(n == 1, "expected the zombie's slot alone, got %d entries", n);
    EXPECT(out[0].slot == dead && out[0].pid == (uint32_t)child && out[0].in_flight == (1u << 17),
           "expected {%u, %d, bit 17}, got {%u, %u, %#llx}", dead, (int)child, out[0].slot,
           out[0].pid, (unsigned long long)out[0].in_flight);
    waitpid(child, NULL, 0);
    EXPECT_RC(vigil_failover_scan_probe(hb, 5, out, 8), 0);
    EXPECT(vigil_hb_live_count(hb, 5) == 3, "expected self, sleeper and the foreign slot kept, got %u",
           vigil_hb_live_count(hb, 5));
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
    EXPECT_RC(vigil_failover_scan_probe(hb, 5, out, 8), 1);
    EXPECT(out[0].pid == (uint32_t)sleeper, "expected the killed sleeper %d, got %u", (int)sleeper,
           out[0].pid);
    vigil_hb_close(hb);
    return 0;
}

/* Threads scanning one table at once (for TSan: the claim's orders within
 * a process); the multi-process race is in test_failover_race. */
struct scanner {
    vigil_hb *hb;
    _Atomic int *go;
    uint64_t bits;
    int entries;
    int err;
};

static void *scanner_main(void *arg)
{
    struct scanner *sc = arg;
    if (!vt_spin_until(sc->go, 1, 1024, 5000)) {
        sc->err = VIGIL_ETIMEDOUT; /* the gate never opened */
        return NULL;
    }
    for (int i = 0; i < 50; i++) {
        vigil_reclaim out[16];
        int n = vigil_failover_scan(sc->hb, 1, out, 16);
        if (n < 0) {
            sc->err = n;
            break;
        }
        for (int k = 0; k < n; k++)
            sc->bits |= out[k].in_flight;
        sc->entries += n;
    }
    return NULL;
}

static int test_threaded_scanners(void)
{
    vigil_hb *hb = vt_hb_fresh("threads.hb", 32);
    for (int round = 0; round < 20; round++) {
        uint32_t s;
        uint64_t want = 0;
        for (uint32_t i = 0; i < 24; i++) {
            EXPECT_RC(vigil_hb_register(hb, 100 + i, &s), 0);
            EXPECT_RC(vigil_hb_mark_in_flight(hb, s, s), 0);
            if (i % 3 != 0)
                want |= UINT64_C(1) << s;
        }
        vigil_hb_tick(hb);
        vigil_hb_tick(hb);
        for (uint32_t i = 0; i < 24; i += 3)
            vigil_hb_beat(hb, i);
        _Atomic int go = 0;
        struct scanner sc[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            sc[t] = (struct scanner){ .hb = hb, .go = &go };
            EXPECT(pthread_create(&th[t], NULL, scanner_main, &sc[t]) == 0, "pthread_create");
        }
        atomic_store(&go, 1);
        uint64_t got = 0;
        int entries = 0;
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            EXPECT(sc[t].err == 0, "scan failed: %s", vigil_strerror(sc[t].err));
            EXPECT(!(got & sc[t].bits), "bits %#llx taken twice", (unsigned long long)(got & sc[t].bits));
            got |= sc[t].bits;
            entries += sc[t].entries;
        }
        EXPECT(entries == 16 && got == want, "round %d: expected 16 entries %#llx, got %d %#llx", round,
               (unsigned long long)want, entries, (unsigned long long)got);
        for (uint32_t i = 0; i < 24; i += 3)
            EXPECT_RC(vigil_hb_unregister(hb, i), 0);
    }
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_scan_args), VT_CASE(test_live_untouched), VT_CASE(test_stale_reclaimed_once),
        VT_CASE(test_grace_boundary), VT_CASE(test_max_limits), VT_CASE(test_stray_bits),
        VT_CASE(test_wedged_repaired), VT_CASE(test_wedged_by_live_writer_kept), VT_CASE(test_take_over_names_one_holding),
        VT_CASE(test_wedged_vacant), VT_CASE(test_late_unregister_after_failover),
        VT_CASE(test_wedged_waits_for_room), VT_CASE(test_scan_probe),
        VT_CASE(test_threaded_scanners))
