/* SPDX-License-Identifier: MIT */
/*
 * Description: barrier records name a registration, not a pid (issue
 * 17.2; THE RECORD in src/barrier.c; model/barrier.pml runs recur and
 * recur_old), with real processes:
 *
 * - B (bound) arrives at round 0 and is killed; a scan reclaims its slot;
 *   a newcomer with B's pid registers into the same slot and never
 *   arrives: A's timed wait must not release round 0 (a record of
 *   (epoch, pid) counted the newcomer as arrived). Once with a newcomer
 *   registered under B's pid, once (root) with a real process given B's
 *   pid by clone3 in a pid namespace of the test's own;
 * - a stale bound handle (stopped after its arrival's check, its slot
 *   reclaimed and registered again meanwhile) cannot change its
 *   successor's record: its arrival returns VIGIL_ELOST, whether the
 *   successor arrived before it resumed or after, and the round counts
 *   the successor alone; nor can its withdrawal, after a timeout, clear
 *   the successor's record.
 *
 * Every moment is the test's: children stop themselves at a hook (seen by
 * waitpid), are killed only once they have arrived, and the heartbeat
 * epoch moves only when the parent ticks it.
 */
#include "hbtest.h"
#include "nstest.h"
#include "barriertest.h"

#include "barrier_internal.h"

#define MS 1000000ull

struct shared {
    _Atomic int hook_at; /* the point the armed child stops at */
    _Atomic int arrived[4]; /* per child: its record is written */
    _Atomic int rc[4];   /* a child's wait result + 1000, 0 not yet */
    _Atomic uint32_t slot[4];
    _Atomic int go[4];
};
static struct shared *sh;
static int my_idx; /* in a child: its index */

static void stop_at_hook(int point)
{
    if (point == BP_RECORDED)
        atomic_store(&sh->arrived[my_idx], 1);
    if (point == atomic_load(&sh->hook_at)) {
        atomic_store(&sh->hook_at, 0);
        raise(SIGSTOP);
    }
}

/* A child: registers itself, binds, says so, waits for go, then waits for
 * round 0 with timeout_ns (UINT64_MAX: none) and posts the result. */
static pid_t spawn_peer(int idx, const char *hbn, const char *bn, uint64_t timeout_ns)
{
    fflush(NULL);
    pid_t p = fork();
    if (p != 0)
        return p;
    vt_own_pgrp(); /* it may stop itself at a hook */
    vigil_hb *hb;
    vigil_barrier *b = vt_barrier_open(hbn, bn, &hb);
    uint32_t slot;
    if (vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        _exit(91);
    atomic_store(&sh->slot[idx], slot);
    my_idx = idx;
    vigil_barrier_hook = stop_at_hook;
    if (!VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx])), 60000))
        _exit(92);
    int rc = timeout_ns == UINT64_MAX ? vigil_barrier_wait(b, 0) : vigil_barrier_wait_timeout(b, 0, timeout_ns);
    atomic_store(&sh->rc[idx], rc + 1000);
    vt_await_kill();
}

static int result(int idx)
{
    return atomic_load(&sh->rc[idx]) - 1000;
}

/* Ticks past grace 2 keeping `keep` (a slot bitmask) beaten. */
static void age_out_others(vigil_hb *hb, uint64_t keep)
{
    vt_hb_tick_keep(hb, 4, keep);
}

/* ---- a recycled pid is no arrival ----------------------------------------- */

/* The interleaving; newcomer(pid) registers the newcomer into the
 * reclaimed slot and returns its pid (its own process, or -1 for none). */
static int recycled(const char *tag, pid_t (*newcomer)(vigil_hb *hb, pid_t pid, uint32_t want_slot))
{
    char hbn[32], bn[32];
    snprintf(hbn, sizeof(hbn), "%s.hb", tag);
    snprintf(bn, sizeof(bn), "%s.b", tag);
    vt_barrier_files(hbn, bn, 2);
    memset(sh, 0, sizeof(*sh));
    vigil_hb *hb;
    vigil_barrier *a = vt_barrier_open(hbn, bn, &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    EXPECT_RC(vigil_barrier_bind(a, as), 0);
    pid_t bpid = spawn_peer(1, hbn, bn, UINT64_MAX);
    atomic_store(&sh->go[1], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[1]), 20000), "B never arrived");
    kill(bpid, SIGKILL);
    EXPECT(vt_wait(bpid, 20000) == 128 + SIGKILL, "B not killed");
    uint32_t bs = atomic_load(&sh->slot[1]);
    vigil_reclaim r[4];
    EXPECT(vigil_failover_scan_probe(hb, 1000, r, 4) == 1 && r[0].slot == bs, "B's slot %u not reclaimed", bs);
    errno = 0;
    pid_t n = newcomer(hb, bpid, bs);
    if (n == 0 && errno == ENOTSUP)
        return VT_SKIP; /* no clone3 here (ThreadSanitizer) */
    EXPECT(n != 0, "no newcomer with B's pid %d", (int)bpid);
    EXPECT(atomic_load(&hb->slots[bs].pid) == (uint32_t)bpid, "the newcomer is not in B's slot with B's pid");
    EXPECT(a->records[bs].ep == rec_make(0), "B's record is gone");
    /* A arrives: N is live and has not arrived, so round 0 waits. */
    int rc = vigil_barrier_wait_timeout(a, 0, 100 * MS);
    EXPECT(rc == VIGIL_ETIMEDOUT,
           "round 0 released (%d) without the newcomer in B's slot: B's record counted for a recycled pid", rc);
    EXPECT(vigil_barrier_epoch(a) == 0, "epoch %u", vigil_barrier_epoch(a));
    if (n > 0) {
        kill(n, SIGKILL);
        waitpid(n, NULL, 0);
    }
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

/* Registered on behalf of B's pid, which no process has now. */
static pid_t newcomer_by_name(vigil_hb *hb, pid_t pid, uint32_t want_slot)
{
    uint32_t s;
    if (vigil_hb_register(hb, (uint32_t)pid, &s) < 0 || s != want_slot)
        return 0;
    return -1;
}

static int test_recycled_pid_not_counted(void)
{
    return recycled("rp", newcomer_by_name);
}

/* A real process with B's pid (clone3 with set_tid), registering itself. */
static pid_t newcomer_process(vigil_hb *hb, pid_t pid, uint32_t want_slot)
{
    pid_t n = vt_fork_with_pid(pid);
    if (n == 0) {
        uint32_t s;
        if (vigil_hb_register(hb, (uint32_t)getpid(), &s) < 0 || s != want_slot)
            _exit(3);
        for (;;)
            vigil_hb_beat(hb, s), vt_sleep_ms(1);
    }
    if (n < 0 || !VT_WAIT_FOR(atomic_load(&hb->slots[want_slot].pid) == (uint32_t)n, 20000))
        return 0;
    return n;
}

static int recycled_in_ns(void *arg)
{
    (void)arg;
    return recycled("rpns", newcomer_process);
}

static int test_recycled_pid_real_process(void)
{
    int st = vt_in_pidns(recycled_in_ns, NULL, true, 60000);
    if (st == VT_SKIP)
        return VT_SKIP;
    EXPECT(st == 0, "in the namespace: status %d (its message is above)", st);
    return 0;
}

/* ---- a stale handle and its successor's record ------------------------------ */

/*
 * S (bound) stops itself at its arrival, after the check that its
 * registration holds and before its record's CAS. The parent ages S out
 * (A beating), reclaims S's slot, and N (another process) registers
 * there; with successor_first, N binds and arrives before S resumes.
 * S must return VIGIL_ELOST, N's record must stand (or, if N had not
 * arrived, S's record must count for no one), and the round then
 * releases with A and N.
 */
static int stale_arrival(bool successor_first)
{
    const char *hbn = successor_first ? "sa1.hb" : "sa2.hb", *bn = successor_first ? "sa1.b" : "sa2.b";
    enum { S = 0, N = 1 };
    vt_barrier_files(hbn, bn, 2);
    memset(sh, 0, sizeof(*sh));
    vigil_hb *hb;
    vigil_barrier *a = vt_barrier_open(hbn, bn, &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    EXPECT_RC(vigil_barrier_bind(a, as), 0);
    pid_t sp = spawn_peer(S, hbn, bn, UINT64_MAX);
    EXPECT(VT_WAIT_FOR(atomic_load(&hb->slots[1].pid) == (uint32_t)sp, 20000), "S never registered");
    atomic_store(&sh->hook_at, BP_RECORDING);
    atomic_store(&sh->go[S], 1);
    int st;
    EXPECT(waitpid(sp, &st, WUNTRACED) == sp && WIFSTOPPED(st), "S did not stop at its arrival");
    uint32_t ss = atomic_load(&sh->slot[S]);
    uint64_t sgen = vigil_slot_gen(&hb->slots[ss]);
    /* S is stale: reclaimed by epochs, A kept live. */
    age_out_others(hb, UINT64_C(1) << as);
    vigil_reclaim r[4];
    EXPECT(vigil_failover_scan(hb, 2, r, 4) == 1 && r[0].slot == ss, "S's slot %u not reclaimed", ss);
    pid_t np = spawn_peer(N, hbn, bn, UINT64_MAX);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->slot[N]) == ss && atomic_load(&hb->slots[ss].pid) == (uint32_t)np, 20000),
           "N did not register into S's old slot %u", ss);
    uint64_t ngen = vigil_slot_gen(&hb->slots[ss]);
    EXPECT(ngen > sgen, "N's gen %llu, S's %llu", (unsigned long long)ngen, (unsigned long long)sgen);
    vigil_barrier_record *rec = &a->records[ss];
    if (successor_first) {
        atomic_store(&sh->go[N], 1);
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[N]), 20000), "N never arrived");
    }
    kill(sp, SIGCONT);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[S]) != 0, 20000), "S never returned");
    EXPECT(result(S) == VIGIL_ELOST, "S, stale, arrived: expected VIGIL_ELOST, got %d (%s)", result(S),
           vigil_strerror(result(S)));
    if (successor_first) {
        EXPECT(atomic_load(&rec->ep) == rec_make(0) && atomic_load(&rec->gen) == ngen,
               "the stale handle changed its successor's record: ep %#llx gen %llu, N's gen %llu",
               (unsigned long long)atomic_load(&rec->ep), (unsigned long long)atomic_load(&rec->gen),
               (unsigned long long)ngen);
    } else {
        /* S's record names S's gen: it counts for no one. A alone with N
         * live and not arrived: round 0 waits. */
        EXPECT(atomic_load(&rec->gen) == sgen || atomic_load(&rec->ep) != rec_make(0),
               "S's late record does not name S");
        EXPECT_RC(vigil_barrier_wait_timeout(a, 0, 50 * MS), VIGIL_ETIMEDOUT);
        atomic_store(&sh->go[N], 1);
        EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[N]), 20000), "N never arrived");
        EXPECT(atomic_load(&rec->ep) == rec_make(0) && atomic_load(&rec->gen) == ngen,
               "N's arrival did not replace S's stale record");
    }
    /* A arrives: A and N are the live peers, both arrived. */
    int rc = vigil_barrier_wait_timeout(a, 0, 20000 * MS);
    EXPECT(rc >= 0, "A: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[N]) != 0, 20000), "N never returned");
    EXPECT((rc == VIGIL_SERIAL) + (result(N) == VIGIL_SERIAL) == 1, "A %d, N %d: one VIGIL_SERIAL", rc, result(N));
    kill(sp, SIGKILL);
    kill(np, SIGKILL);
    waitpid(sp, NULL, 0);
    waitpid(np, NULL, 0);
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

static int test_stale_arrival_after_successor_arrived(void) { return stale_arrival(true); }
static int test_stale_arrival_before_successor(void) { return stale_arrival(false); }

/*
 * A stale waiter's withdrawal: S arrives, times out and stops itself
 * before taking its record back; meanwhile its slot is reclaimed and N
 * registers there and arrives. S's withdrawal must leave N's record.
 */
static int test_stale_withdrawal_keeps_successor_record(void)
{
    enum { S = 0, N = 1 };
    vt_barrier_files("sw.hb", "sw.b", 2);
    memset(sh, 0, sizeof(*sh));
    vigil_hb *hb;
    vigil_barrier *a = vt_barrier_open("sw.hb", "sw.b", &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    EXPECT_RC(vigil_barrier_bind(a, as), 0);
    pid_t sp = spawn_peer(S, "sw.hb", "sw.b", 20 * MS);
    EXPECT(VT_WAIT_FOR(atomic_load(&hb->slots[1].pid) == (uint32_t)sp, 20000), "S never registered");
    atomic_store(&sh->hook_at, BP_WITHDRAWING);
    atomic_store(&sh->go[S], 1);
    int st;
    EXPECT(waitpid(sp, &st, WUNTRACED) == sp && WIFSTOPPED(st), "S did not stop at its withdrawal");
    EXPECT(atomic_load(&sh->arrived[S]), "S stopped before it arrived");
    uint32_t ss = atomic_load(&sh->slot[S]);
    age_out_others(hb, UINT64_C(1) << as);
    vigil_reclaim r[4];
    EXPECT(vigil_failover_scan(hb, 2, r, 4) == 1 && r[0].slot == ss, "S's slot %u not reclaimed", ss);
    pid_t np = spawn_peer(N, "sw.hb", "sw.b", UINT64_MAX);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->slot[N]) == ss && atomic_load(&hb->slots[ss].pid) == (uint32_t)np, 20000),
           "N did not register into S's old slot %u", ss);
    uint64_t ngen = vigil_slot_gen(&hb->slots[ss]);
    atomic_store(&sh->go[N], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[N]), 20000), "N never arrived");
    kill(sp, SIGCONT);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->rc[S]) != 0, 20000), "S never returned");
    vigil_barrier_record *rec = &a->records[ss];
    EXPECT(atomic_load(&rec->ep) == rec_make(0) && atomic_load(&rec->gen) == ngen,
           "the stale waiter's withdrawal changed its successor's record: ep %#llx gen %llu, N's gen %llu",
           (unsigned long long)atomic_load(&rec->ep), (unsigned long long)atomic_load(&rec->gen),
           (unsigned long long)ngen);
    int rc = vigil_barrier_wait_timeout(a, 0, 20000 * MS);
    EXPECT(rc >= 0, "A: %d (%s)", rc, vigil_strerror(rc));
    kill(sp, SIGKILL);
    kill(np, SIGKILL);
    waitpid(sp, NULL, 0);
    waitpid(np, NULL, 0);
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_recycled_pid_not_counted),
        VT_CASE(test_recycled_pid_real_process),
        VT_CASE(test_stale_arrival_after_successor_arrived),
        VT_CASE(test_stale_arrival_before_successor),
        VT_CASE(test_stale_withdrawal_keeps_successor_record),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
