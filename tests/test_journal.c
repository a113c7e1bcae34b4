/* SPDX-License-Identifier: MIT */
/*
 * Description: the reclaim journal's steps in the library (THE JOURNAL,
 * src/journal_internal.h, and its claim in src/failover.c; model:
 * model/journal.pml). A journaled scan writes each reclaim down (slot,
 * pid, gen, bits, why, epoch) and commits it only with the slot vacated;
 * bits marked by a stale owner between the entry and the swap are the
 * entry's; a full journal vacates nothing until an entry is free; a
 * claimer killed at each step of the claim leaves the slot to a repair
 * that settles its entry, exactly once; the same claimer repaired by a
 * scan without the journal leaves an entry the sweep says UNSURE;
 * a guardian killed holding the run lock has its RUNNING entry finished
 * UNKNOWN by the sweep; a dead watchdog's DONE entry is adopted; a file
 * that is not a journal is refused and a scribbled entry never crashes
 * the sweep.
 */
#include "hbtest.h"

#include "journal_internal.h"

#include <fcntl.h>
#include <sys/wait.h>

static vigil_journal *journal_for(const char *name, uint32_t cap)
{
    vigil_journal *j = NULL;
    const char *path = vt_path(name);
    unlink(path);
    const struct vigil_journal_table t = { 8, 0, 0 }; /* the library never looks at the table's identity */
    int rc = vigil_journal_create(path, cap, &t, 0600, (gid_t)-1, &j);
    if (rc < 0) {
        fprintf(stderr, "journal %s: %s\n", path, vigil_strerror(rc));
        exit(2);
    }
    return j;
}

/* A table `name`.hb of 4 slots with a journal of jcap entries attached,
 * and two registrations (pids p1, p2) gone stale: their slots in a, b. */
static vigil_hb *two_stale(const char *name, uint32_t jcap, uint32_t p1, uint32_t p2, uint32_t *a, uint32_t *b,
                           vigil_journal **j)
{
    char hb_name[64], j_name[64];
    snprintf(hb_name, sizeof(hb_name), "%s.hb", name);
    snprintf(j_name, sizeof(j_name), "%s.journal", name);
    vigil_hb *hb = vt_hb_fresh(hb_name, 4);
    *j = journal_for(j_name, jcap);
    hb->journal = *j;
    if (vigil_hb_register(hb, p1, a) < 0 || vigil_hb_register(hb, p2, b) < 0)
        exit(2);
    vt_hb_tick_keep(hb, 3, 0);
    return hb;
}

/* The entries in state `state`, into out (at most max); how many. */
static int entries_in(const vigil_journal *j, uint32_t state, struct vigil_journal_rec *out, int max)
{
    int n = 0;
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) == 0 && r.state == state && n < max)
            out[n++] = r;
    }
    return n;
}

static int test_scan_writes_down(void)
{
    vigil_hb *hb = vt_hb_fresh("down.hb", 4);
    vigil_journal *j = journal_for("down.journal", 8);
    hb->journal = j;
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 501, &s), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 7), 0);
    uint64_t gen = vigil_hb_mine(hb, s);
    vt_hb_tick_keep(hb, 3, 0);
    vigil_reclaim out[4];
    EXPECT(vigil_failover_scan(hb, 2, out, 4) == 1 && out[0].pid == 501 && out[0].in_flight == 0x80, "scan");
    struct vigil_journal_rec r[4];
    EXPECT(entries_in(j, VJ_PENDING, r, 4) == 1, "one pending entry");
    EXPECT(r[0].slot == s && r[0].pid == 501 && r[0].gen == gen && r[0].in_flight == 0x80 &&
               r[0].why == VIGIL_RECLAIM_STALE && r[0].epoch == 3 && r[0].claimer == vigil_self_lock_word() &&
               r[0].ticket == 1,
           "entry: slot %u pid %u gen %llu bits %#llx why %u epoch %llu ticket %llu", r[0].slot, r[0].pid,
           (unsigned long long)r[0].gen, (unsigned long long)r[0].in_flight, r[0].why,
           (unsigned long long)r[0].epoch, (unsigned long long)r[0].ticket);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s, &info), VIGIL_EVACANT);
    hb->journal = NULL;
    vigil_journal_close(j);
    vigil_hb_close(hb);
    return 0;
}

/* A stale owner's mark landing between begin and the swap: the swap
 * fails once, the entry takes the new bits first, the retry takes them. */
static vigil_hb *mark_hb;
static uint32_t mark_slot;
static void mark_at_begun(int point)
{
    if (point == JP_BEGUN)
        vigil_hb_mark_in_flight(mark_hb, mark_slot, 12);
}

static int test_mark_between_begin_and_swap(void)
{
    vigil_hb *hb = vt_hb_fresh("mark.hb", 2);
    vigil_journal *j = journal_for("mark.journal", 4);
    hb->journal = j;
    EXPECT_RC(vigil_hb_register(hb, 502, &mark_slot), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, mark_slot, 1), 0);
    mark_hb = hb;
    vt_hb_tick_keep(hb, 3, 0);
    vigil_journal_hook = mark_at_begun;
    vigil_reclaim out[2];
    int n = vigil_failover_scan(hb, 2, out, 2);
    vigil_journal_hook = NULL;
    struct vigil_journal_rec r[2];
    EXPECT(n == 1 && out[0].in_flight == 0x1002, "handed %#llx (want 0x1002)", (unsigned long long)out[0].in_flight);
    EXPECT(entries_in(j, VJ_PENDING, r, 2) == 1 && r[0].in_flight == 0x1002, "the entry holds %#llx, not the bits taken",
           (unsigned long long)r[0].in_flight);
    hb->journal = NULL;
    vigil_journal_close(j);
    vigil_hb_close(hb);
    return 0;
}

/* No free entry: nothing is vacated (the slot waits, stale); once one is
 * free, the next scan takes it. */
static int test_full_vacates_nothing(void)
{
    uint32_t a, b;
    vigil_journal *j;
    vigil_hb *hb = two_stale("full", 1, 503, 504, &a, &b, &j);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 1);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, b, &info), 0); /* still occupied: no room to write it down */
    EXPECT(info.pid == 504, "slot %u: pid %u", b, info.pid);
    struct vigil_journal_rec r;
    EXPECT_RC(vigil_journal_read(j, 0, &r), 0);
    atomic_store(&j->e[0].gen, 0);
    EXPECT(vigil_journal_move(j, 0, vj_word(VJ_PENDING, r.ticket), r.owner, vj_word(VJ_FREE, r.ticket), 0), "free");
    EXPECT(vigil_failover_scan(hb, 2, out, 4) == 1 && out[0].pid == 504, "the waiting slot after room was made");
    hb->journal = NULL;
    vigil_journal_close(j);
    vigil_hb_close(hb);
    return 0;
}

/* A claimer child, journaled, that stops itself at `point`. */
static pid_t claimer_stopped_at(const char *hb_path, const char *j_path, int point)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        vt_own_pgrp();
        vigil_hb *hb;
        vigil_journal *j;
        if (vigil_hb_open(hb_path, 0, &hb) < 0 || vigil_journal_open(j_path, &j) < 0)
            _exit(3);
        hb->journal = j;
        vt_stop_point = point;
        vigil_journal_hook = vt_stop_at;
        vigil_reclaim out[4];
        vigil_failover_scan(hb, 2, out, 4);
        _exit(4); /* never reached the point */
    }
    return pid;
}

/*
 * The claimer killed at each step with the slot locked (begun, swapped,
 * committed); then a scan: journaled (its repair settles the entry: one
 * PENDING entry with the bits, the slot vacant, handed over once), or
 * not (it repairs the slot without the entry, which the sweep then says
 * UNSURE for begun and swapped, and leaves PENDING for committed).
 */
static int killed_claimer(int point, bool repair_journaled)
{
    const char *hp = vt_path("kill.hb"), *jp = vt_path("kill.journal");
    unlink(hp);
    vigil_hb *hb = vt_hb_fresh_at(hp, 2);
    vigil_journal *j = journal_for("kill.journal", 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, 505, &s), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, s, 5), 0);
    vt_hb_tick_keep(hb, 3, 0);
    pid_t c = claimer_stopped_at(hp, jp, point);
    EXPECT(vt_wait_stopped(c, 10000), "the claimer did not stop at %d", point);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    if (repair_journaled)
        hb->journal = j;
    vigil_reclaim out[2];
    int n = vigil_failover_scan(hb, 2, out, 2);
    hb->journal = NULL;
    vigil_journal_sweep(j, hb, vigil_self_lock_word());
    struct vigil_journal_rec p[4], d[4], cl[4];
    int np = entries_in(j, VJ_PENDING, p, 4), nd = entries_in(j, VJ_DONE, d, 4), nc = entries_in(j, VJ_CLAIMING, cl, 4);
    vigil_slot_info info;
    int snap = vigil_hb_snapshot(hb, s, &info);
    if (repair_journaled) {
        /* Exactly one hand-over, written down, with the bits. */
        EXPECT(np == 1 && nd == 0 && nc == 0 && p[0].in_flight == 0x20 && p[0].pid == 505 && p[0].slot == s,
               "point %d: pending %d (bits %#llx), done %d, claiming %d", point, np,
               (unsigned long long)(np ? p[0].in_flight : 0), nd, nc);
        EXPECT(point == JP_COMMITTED || point == JP_SWAPPED ? n <= 1 : n == 1, "point %d: handed %d", point, n);
    } else if (point == JP_BEGUN || point == JP_SWAPPED) {
        /* Whether the claimer's swap or the plain scan took the bits
         * cannot be told from the slot: the entry is said UNSURE, never
         * run (the plain scan's caller has them when it took them). */
        EXPECT(np == 0 && nd == 1 && nc == 0 && (d[0].outcome & VJ_OUT_UNSURE) && d[0].in_flight == 0x20 &&
                   d[0].owner == vigil_self_lock_word() && n == (point == JP_BEGUN),
               "point %d, plain repair: pending %d done %d (outcome %#x) claiming %d handed %d", point, np, nd,
               nd ? d[0].outcome : 0, nc, n);
    } else {
        EXPECT(np == 1 && nd == 0 && nc == 0 && n == 0, "committed, plain repair: pending %d done %d claiming %d handed %d",
               np, nd, nc, n);
    }
    EXPECT_RC(snap, VIGIL_EVACANT);
    vigil_journal_close(j);
    vigil_hb_close(hb);
    return 0;
}

static int test_killed_claimer_journaled_repair(void)
{
    for (int p = JP_BEGUN; p <= JP_COMMITTED; p++)
        if (killed_claimer(p, true))
            return 1;
    return 0;
}

static int test_killed_claimer_plain_repair(void)
{
    for (int p = JP_BEGUN; p <= JP_COMMITTED; p++)
        if (killed_claimer(p, false))
            return 1;
    return 0;
}

/* A guardian killed holding the run lock with its entry RUNNING: the
 * sweep takes the lock over, finishes the entry UNKNOWN (for the sweeper
 * to log), releases the lock. A DONE entry of a dead watchdog is made
 * the sweeper's. */
static int test_dead_guardian_and_watchdog(void)
{
    uint32_t a, b;
    vigil_journal *j;
    vigil_hb *hb = two_stale("run", 4, 506, 507, &a, &b, &j);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 2);
    hb->journal = NULL;
    struct vigil_journal_rec p[4];
    EXPECT(entries_in(j, VJ_PENDING, p, 4) == 2, "two pending");
    int go[2];
    EXPECT(pipe(go) == 0, "pipe");
    fflush(NULL);
    pid_t g = fork();
    if (g == 0) {
        /* A guardian: the run lock, the first entry RUNNING; a dead
         * watchdog's: the second entry DONE with our word as its owner. */
        uint64_t me = vigil_self_lock_word(), held;
        if (vigil_journal_run_take(j, me, &held) < 0 ||
            !vigil_journal_move(j, p[0].idx, vj_word(VJ_PENDING, p[0].ticket), p[0].owner,
                                vj_word(VJ_RUNNING, p[0].ticket), me) ||
            !vigil_journal_move(j, p[1].idx, vj_word(VJ_PENDING, p[1].ticket), p[1].owner,
                                vj_word(VJ_DONE, p[1].ticket), me))
            _exit(3);
        char c = 1;
        if (write(go[1], &c, 1) != 1)
            _exit(4);
        vt_await_kill();
    }
    char c;
    EXPECT(read(go[0], &c, 1) == 1, "the guardian did not get going");
    uint64_t me = vigil_self_lock_word();
    EXPECT_RC(vigil_journal_sweep(j, hb, me), 0); /* alive: nothing of its is taken */
    kill(g, SIGKILL);
    waitpid(g, NULL, 0);
    EXPECT_RC(vigil_journal_sweep(j, hb, me), 2);
    struct vigil_journal_rec d[4];
    EXPECT(entries_in(j, VJ_DONE, d, 4) == 2, "two done");
    struct vigil_journal_rec *unk = d[0].idx == p[0].idx ? &d[0] : &d[1];
    EXPECT(unk->idx == p[0].idx && unk->outcome == VJ_OUT_UNKNOWN && unk->owner == me, "the running entry: %#x",
           unk->outcome);
    uint64_t held;
    EXPECT_RC(vigil_journal_run_take(j, me, &held), 0); /* released by the sweep */
    vigil_journal_run_release(j, held);
    vigil_journal_close(j);
    vigil_hb_close(hb);
    return 0;
}

/* A peer's scribbles: not a journal is refused; entries of any bytes are
 * swept without a crash and never made pending or running. */
static int test_hostile(void)
{
    const char *path = vt_path("hostile.journal");
    vigil_journal *j = journal_for("hostile.journal", 8);
    for (uint32_t i = 0; i < 8; i++) {
        atomic_store(&j->e[i].state, UINT64_MAX - i * 0x1111111111111111ull);
        atomic_store(&j->e[i].owner, i * 0x0123456789abcdefull);
        atomic_store(&j->e[i].slot, UINT32_MAX - i);
        atomic_store(&j->e[i].gen, i ? i : 1);
    }
    atomic_store(&j->hdr->run_word, 0xdeadbeef);
    atomic_store(&j->hdr->run_seq, 7);
    vigil_hb *hb = vt_hb_fresh("hostile.hb", 2);
    vigil_journal_sweep(j, hb, vigil_self_lock_word());
    vigil_journal_sweep(j, NULL, vigil_self_lock_word());
    struct vigil_journal_rec r;
    EXPECT_RC(vigil_journal_next_pending(j, &r), VIGIL_EVACANT);
    vigil_journal_close(j);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    EXPECT(fd >= 0 && pwrite(fd, "\x03", 1, 12) == 1, "scribble the kind");
    close(fd);
    EXPECT_RC(vigil_journal_open(path, &j), VIGIL_EBADFILE);
    EXPECT_RC(vigil_journal_open(vt_path("hostile.hb"), &j), VIGIL_EBADFILE);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_scan_writes_down), VT_CASE(test_mark_between_begin_and_swap), VT_CASE(test_full_vacates_nothing),
        VT_CASE(test_killed_claimer_journaled_repair), VT_CASE(test_killed_claimer_plain_repair),
        VT_CASE(test_dead_guardian_and_watchdog), VT_CASE(test_hostile))
