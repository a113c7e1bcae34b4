/* SPDX-License-Identifier: MIT */
/*
 * Description: the counters of structural events in the files' headers
 * and slots (vigil_hb_stats, vigil_barrier_stats, vigil_leases_stats):
 * each moves by exactly one when its event happens, and not otherwise:
 * a register, an unregister, a failover claim (stale, probed dead, and
 * vigil_failover_wait's), the repair of a dead writer's slot, a leader
 * change; beats and marks move none of them. A barrier waiter's
 * withdrawal and a release; a lease's refused renewal, the take-over of
 * an expired lease (by its key or by another binding over its entry),
 * and every acquisition as a hand-over.
 */
#include "hbtest.h"

/* The table's counters, or a zeroed set with the failure said. */
static vigil_hb_counters hb_counts(const vigil_hb *hb)
{
    vigil_hb_counters c = { 0 };
    int rc = vigil_hb_stats(hb, &c);
    if (rc != 0)
        fprintf(stderr, "vigil_hb_stats: %s\n", vigil_strerror(rc));
    return c;
}

#define EXPECT_HB(c, reg, unreg, rec, rep, occ)                                                        \
    EXPECT((c).registers == (reg) && (c).unregisters == (unreg) && (c).reclaims == (rec) &&             \
               (c).repairs == (rep) && (c).occupied == (occ),                                           \
           "expected registers %d, unregisters %d, reclaims %d, repairs %d, occupied %d; got %llu, "    \
           "%llu, %llu, %llu, %u",                                                                      \
           (reg), (unreg), (rec), (rep), (occ), (unsigned long long)(c).registers,                     \
           (unsigned long long)(c).unregisters, (unsigned long long)(c).reclaims,                      \
           (unsigned long long)(c).repairs, (c).occupied)

static int test_hb_register_unregister(void)
{
    vigil_hb *hb = vt_hb_fresh("reg.hb", 4);
    vigil_hb_counters c = hb_counts(hb);
    EXPECT_HB(c, 0, 0, 0, 0, 0);
    EXPECT(c.leader_changes == 0, "leader changes %llu in a new table", (unsigned long long)c.leader_changes);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 101, &a), 0);
    c = hb_counts(hb);
    EXPECT_HB(c, 1, 0, 0, 0, 1);
    EXPECT_RC(vigil_hb_register(hb, 102, &b), 0);
    /* The hot paths move nothing. */
    for (int i = 0; i < 100; i++) {
        vigil_hb_beat(hb, a);
        vigil_beater_beat(vigil_hb_beater(hb, b));
        vigil_hb_mark_in_flight(hb, a, (unsigned)i % 64);
        vigil_hb_clear_in_flight(hb, a, (unsigned)i % 64);
    }
    EXPECT_RC(vigil_hb_set_role(hb, b, VIGIL_ROLE_COORDINATOR), 0);
    c = hb_counts(hb);
    EXPECT_HB(c, 2, 0, 0, 0, 2);
    EXPECT_RC(vigil_hb_unregister(hb, a), 0);
    c = hb_counts(hb);
    EXPECT_HB(c, 2, 1, 0, 0, 1);
    /* The same slot again: its own counts go on. */
    uint32_t again;
    EXPECT_RC(vigil_hb_register(hb, 103, &again), 0);
    EXPECT(again == a, "expected slot %u again, got %u", a, again);
    EXPECT_RC(vigil_hb_unregister(hb, again), 0);
    EXPECT_RC(vigil_hb_unregister(hb, again), VIGIL_EVACANT); /* nothing to count */
    c = hb_counts(hb);
    EXPECT_HB(c, 3, 2, 0, 0, 1);
    EXPECT(vigil_gen_of(atomic_load(&hb->slots[a].gen) & ~VIGIL_GEN_VACANT) == 2, "slot %u: %llu registers", a,
           (unsigned long long)(atomic_load(&hb->slots[a].gen) & ~VIGIL_GEN_VACANT));
    EXPECT_RC(vigil_hb_stats(NULL, &c), -EINVAL);
    EXPECT_RC(vigil_hb_stats(hb, NULL), -EINVAL);
    vigil_hb_close(hb);
    return 0;
}

/* A stale slot taken by a scan, a dead owner's by the probe scan: one
 * reclaim each; a live slot and a scan with nothing to do: none. */
static int test_hb_failover_claims(void)
{
    vigil_hb *hb = vt_hb_fresh("claim.hb", 4);
    uint32_t live, stale, dead;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &live), 0);
    EXPECT_RC(vigil_hb_register(hb, 201, &stale), 0);
    vt_hb_tick_keep(hb, 4, UINT64_C(1) << live);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 1);
    vigil_hb_counters c = hb_counts(hb);
    EXPECT_HB(c, 2, 0, 1, 0, 1);
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 0);
    c = hb_counts(hb);
    EXPECT_HB(c, 2, 0, 1, 0, 1);

    pid_t gone = vt_unused_pid();
    EXPECT(gone > 0, "no unused pid");
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)gone, &dead), 0);
    EXPECT_RC(vigil_failover_scan_probe(hb, 1000, out, 4), 1);
    EXPECT(out[0].slot == dead, "probe scan took slot %u, expected %u", out[0].slot, dead);
    c = hb_counts(hb);
    EXPECT_HB(c, 3, 0, 2, 0, 1);
    vigil_hb_close(hb);
    return 0;
}

/* vigil_failover_wait's claim of a worker the test killed. */
static int test_hb_failover_wait_claim(void)
{
    const char *path = vt_path("wait.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 4);
    int p[2];
    EXPECT(pipe(p) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        vt_die_with_parent();
        vigil_hb *mine;
        uint32_t s;
        if (vigil_hb_open(path, 0, &mine) < 0 || vigil_hb_register(mine, (uint32_t)getpid(), &s) < 0)
            _exit(3);
        if (write(p[1], &s, sizeof(s)) != sizeof(s))
            _exit(4);
        vt_await_kill();
    }
    close(p[1]);
    uint32_t slot;
    EXPECT(read(p[0], &slot, sizeof(slot)) == sizeof(slot), "worker did not register");
    close(p[0]);
    kill(kid, SIGKILL);
    EXPECT(vt_wait(kid, 10000) == 128 + SIGKILL, "worker not killed");
    vigil_reclaim out[4];
    int n = vigil_failover_wait(hb, 1000000, 10000000000ull, out, 4);
    EXPECT(n == 1 && out[0].slot == slot, "expected the killed worker's slot %u, got %d", slot, n);
    vigil_hb_counters c = hb_counts(hb);
    EXPECT_HB(c, 1, 0, 1, 0, 0);
    vigil_hb_close(hb);
    return 0;
}

/* A dead writer's slot: one repair. Its owner still live keeps the slot
 * (no reclaim); a stale one is vacated by the repair (one reclaim too).
 * A live writer's slot is never repaired, so counts nothing. */
static int test_hb_repairs(void)
{
    vigil_hb *hb = vt_hb_fresh("repair.hb", 4);
    uint32_t kept, gone, paused;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &kept), 0);
    EXPECT_RC(vigil_hb_register(hb, 302, &gone), 0);
    EXPECT_RC(vigil_hb_register(hb, 303, &paused), 0);
    vt_hb_tick_keep(hb, 4, (UINT64_C(1) << kept) | (UINT64_C(1) << paused));
    vt_wedge(hb, kept, VT_WRITER_DEAD);
    vt_wedge(hb, gone, VT_WRITER_DEAD);
    uint32_t v = vt_wedge(hb, paused, VT_WRITER_ALIVE);
    vigil_reclaim out[4];
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 1);
    EXPECT(out[0].slot == gone, "expected slot %u vacated, got %u", gone, out[0].slot);
    vigil_hb_counters c = hb_counts(hb);
    EXPECT_HB(c, 3, 0, 1, 2, 2);
    EXPECT(atomic_load(&hb->slots[kept].repairs) == 1 && atomic_load(&hb->slots[gone].repairs) == 1 &&
               atomic_load(&hb->slots[paused].repairs) == 0,
           "repairs per slot %u %u %u, expected 1 1 0", atomic_load(&hb->slots[kept].repairs),
           atomic_load(&hb->slots[gone].repairs), atomic_load(&hb->slots[paused].repairs));
    /* The paused writer finishes its own change: nothing more counted. */
    vigil_slot_unlock(&hb->slots[paused], v - 1);
    EXPECT_RC(vigil_failover_scan(hb, 2, out, 4), 0);
    c = hb_counts(hb);
    EXPECT_HB(c, 3, 0, 1, 2, 2);
    vigil_hb_close(hb);
    return 0;
}

static int test_hb_leader_changes(void)
{
    vigil_hb *hb = vt_hb_fresh("leader.hb", 4);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 401, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 402, &b), 0);
    vigil_leader ld;
    EXPECT_RC(vigil_leader_elect(hb, 5, &ld), 1);
    EXPECT_RC(vigil_leader_elect(hb, 5, &ld), 0);
    vigil_hb_counters c = hb_counts(hb);
    EXPECT(c.leader_changes == 1 && c.leader_changes == ld.term, "expected 1 change (term %llu), got %llu",
           (unsigned long long)ld.term, (unsigned long long)c.leader_changes);
    EXPECT_RC(vigil_hb_unregister(hb, a), 0);
    EXPECT_RC(vigil_leader_elect(hb, 5, &ld), 1);
    c = hb_counts(hb);
    EXPECT(c.leader_changes == 2, "expected 2 changes, got %llu", (unsigned long long)c.leader_changes);
    vigil_hb_close(hb);
    return 0;
}

/* A waiter that times out withdraws: one withdrawal, unbound or bound; a
 * release moves the releases (the epoch) and no withdrawal. */
static int test_barrier_withdrawals(void)
{
    vigil_hb *hb = vt_hb_fresh("b.hb", 4);
    uint32_t a, b2;
    EXPECT_RC(vigil_hb_register(hb, 501, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 502, &b2), 0);
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(vt_path("b.barrier"), hb, 1000, &b), 0);
    vigil_barrier_counters c;
    EXPECT_RC(vigil_barrier_stats(b, &c), 0);
    EXPECT(c.releases == 0 && c.withdrawals == 0, "new barrier: %llu releases, %llu withdrawals",
           (unsigned long long)c.releases, (unsigned long long)c.withdrawals);
    /* Two live peers, one arrives and gives up. */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 1000000), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_barrier_stats(b, &c), 0);
    EXPECT(c.releases == 0 && c.withdrawals == 1, "after a timeout: %llu releases, %llu withdrawals",
           (unsigned long long)c.releases, (unsigned long long)c.withdrawals);
    EXPECT_RC(vigil_barrier_wait_quorum(b, 0, 1), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_stats(b, &c), 0);
    EXPECT(c.releases == 1 && c.withdrawals == 1, "after a release: %llu releases, %llu withdrawals",
           (unsigned long long)c.releases, (unsigned long long)c.withdrawals);
    /* Bound: the record is taken back, and counted the same. */
    EXPECT_RC(vigil_barrier_bind(b, a), 0);
    EXPECT_RC(vigil_barrier_wait_timeout(b, 1, 1000000), VIGIL_ETIMEDOUT);
    /* An epoch already passed returns at once and withdraws nothing. */
    EXPECT_RC(vigil_barrier_wait_timeout(b, 0, 1000000), 0);
    EXPECT_RC(vigil_barrier_stats(b, &c), 0);
    EXPECT(c.releases == 1 && c.withdrawals == 2, "after a bound timeout: %llu releases, %llu withdrawals",
           (unsigned long long)c.releases, (unsigned long long)c.withdrawals);
    vigil_barrier_state st;
    EXPECT_RC(vigil_barrier_peek(vt_path("b.barrier"), &st), 0);
    EXPECT(st.withdrawals == 2 && st.epoch == 1, "peek: %llu withdrawals, epoch %u",
           (unsigned long long)st.withdrawals, st.epoch);
    EXPECT_RC(vigil_barrier_stats(NULL, &c), -EINVAL);
    EXPECT_RC(vigil_barrier_stats(b, NULL), -EINVAL);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static vigil_leases_counters ls_counts(const vigil_leases *ls)
{
    vigil_leases_counters c = { 0 };
    int rc = vigil_leases_stats(ls, &c);
    if (rc != 0)
        fprintf(stderr, "vigil_leases_stats: %s\n", vigil_strerror(rc));
    return c;
}

#define EXPECT_LS(c, hand, refused, exp)                                                           \
    EXPECT((c).handovers == (hand) && (c).renewals_refused == (refused) && (c).expiries == (exp),   \
           "expected handovers %d, renewals refused %d, expiries %d; got %llu, %llu, %llu", (hand), \
           (refused), (exp), (unsigned long long)(c).handovers,                                    \
           (unsigned long long)(c).renewals_refused, (unsigned long long)(c).expiries)

/* Until the lease on `key` has lapsed (bounded; nothing is timed). */
static bool lapsed(vigil_leases *ls, const char *key)
{
    vigil_lease_info info;
    return VT_WAIT_FOR(vigil_leases_get(ls, key, &info) == VIGIL_EVACANT, 10000);
}

/* A refused renewal counts once, an accepted one never; a take-over of
 * an expired lease (same key, or another key binding over the entry)
 * is an expiry, one of a released lease is not; every acquisition is a
 * hand-over. */
static int test_leases_counters(void)
{
    vigil_leases *ls = vt_leases_fresh("c.leases", 2);
    vigil_leases_counters c = ls_counts(ls);
    EXPECT_LS(c, 0, 0, 0);
    vigil_lease keep, k1, k2;
    EXPECT_RC(vigil_leases_acquire(ls, "keep", "me", 600000, &keep), 0);
    for (int i = 0; i < 10; i++)
        EXPECT_RC(vigil_leases_renew(ls, &keep), 0);
    c = ls_counts(ls);
    EXPECT_LS(c, 1, 0, 0);

    EXPECT_RC(vigil_leases_acquire(ls, "k", "a", 3, &k1), 0);
    EXPECT(lapsed(ls, "k"), "lease k never expired");
    EXPECT_RC(vigil_leases_renew(ls, &k1), VIGIL_ELOST);
    c = ls_counts(ls);
    EXPECT_LS(c, 2, 1, 0);
    /* The expired lease taken over (the take path), then the old
     * holder's renewal refused again. */
    EXPECT_RC(vigil_leases_acquire(ls, "k", "b", 600000, &k2), 0);
    EXPECT_RC(vigil_leases_renew(ls, &k1), VIGIL_ELOST);
    c = ls_counts(ls);
    EXPECT_LS(c, 3, 2, 1);
    /* Released, then acquired: a hand-over, no expiry. A release refused
     * is no refused renewal. */
    EXPECT_RC(vigil_leases_release(ls, &k2), 0);
    EXPECT_RC(vigil_leases_release(ls, &k2), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "c", 3, &k1), 0);
    c = ls_counts(ls);
    EXPECT_LS(c, 4, 2, 1);
    /* The store is full ("keep" and "k"): a new key binds over k's entry
     * once k has expired (the bind path). */
    EXPECT(lapsed(ls, "k"), "lease k never expired");
    EXPECT_RC(vigil_leases_acquire(ls, "other", "d", 600000, &k2), 0);
    c = ls_counts(ls);
    EXPECT_LS(c, 5, 2, 2);
    EXPECT_RC(vigil_leases_acquire(ls, "other", "e", 600000, &k2), VIGIL_EBUSY);
    c = ls_counts(ls);
    EXPECT_LS(c, 5, 2, 2);
    EXPECT_RC(vigil_leases_stats(NULL, &c), -EINVAL);
    EXPECT_RC(vigil_leases_stats(ls, NULL), -EINVAL);
    vigil_leases_close(ls);
    return 0;
}

VT_MAIN(VT_CASE(test_hb_register_unregister), VT_CASE(test_hb_failover_claims),
        VT_CASE(test_hb_failover_wait_claim), VT_CASE(test_hb_repairs), VT_CASE(test_hb_leader_changes),
        VT_CASE(test_barrier_withdrawals), VT_CASE(test_leases_counters))
