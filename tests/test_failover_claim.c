/* SPDX-License-Identifier: MIT */
/*
 * Description: a failover scan judges a slot, then locks it and judges
 * again under the lock (src/failover.c, claim()); the second judgement
 * is what keeps a scan paused in between from reclaiming what changed
 * meanwhile. With real processes, the scanner stopped at the hook
 * between its judgement and its lock:
 *
 * - the owner it judged stale beats again: the scan takes nothing;
 * - the owner it judged dead (its pid gone) is reclaimed by another scan,
 *   and a new process given the same pid (clone3 with set_tid, in a pid
 *   namespace of the test's own; root) registers into the same slot: the
 *   scan takes nothing, the verdict was about a registration now gone.
 */
#include "hbtest.h"
#include "nstest.h"

#define GRACE 2

struct shared {
    _Atomic int n;      /* what the scanner reclaimed + 1000, 0 not yet */
};
static struct shared *sh;

static void stop_before_lock(int point)
{
    if (point == SP_CLAIMING) {
        vigil_slot_hook = NULL;
        raise(SIGSTOP);
    }
}

/* A scanner stopped between its judgement and its lock of a slot. */
static pid_t spawn_scanner(const char *path, bool probe)
{
    fflush(NULL);
    pid_t p = fork();
    if (p != 0)
        return p;
    vt_own_pgrp(); /* it stops itself */
    vigil_hb *hb;
    if (vigil_hb_open(path, 0, &hb) < 0)
        _exit(90);
    vigil_slot_hook = stop_before_lock;
    vigil_reclaim r[4];
    int n = probe ? vigil_failover_scan_probe(hb, 1000, r, 4) : vigil_failover_scan(hb, GRACE, r, 4);
    atomic_store(&sh->n, n + 1000);
    vt_await_kill();
}

static bool stopped(pid_t p)
{
    int st;
    return waitpid(p, &st, WUNTRACED) == p && WIFSTOPPED(st);
}

static int test_stale_owner_beats_again(void)
{
    memset(sh, 0, sizeof(*sh));
    vigil_hb *hb = vt_hb_fresh("beat.hb", 4);
    uint32_t w;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &w), 0);
    uint64_t gen = vigil_slot_gen(&hb->slots[w]);
    vt_hb_tick_keep(hb, GRACE + 1, 0); /* w is stale */
    pid_t s = spawn_scanner(vt_path("beat.hb"), false);
    EXPECT(stopped(s), "the scanner did not stop before its lock");
    vigil_hb_beat(hb, w); /* live again */
    kill(s, SIGCONT);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->n) != 0, 20000), "the scanner never returned");
    EXPECT(atomic_load(&sh->n) - 1000 == 0, "the scan reclaimed %d slots: an owner that beat again",
           atomic_load(&sh->n) - 1000);
    EXPECT(vigil_slot_gen(&hb->slots[w]) == gen && vigil_hb_owned(hb, w) == 1, "the slot was taken");
    kill(s, SIGKILL);
    waitpid(s, NULL, 0);
    vigil_hb_close(hb);
    return 0;
}

static int recycled_in_ns(void *arg)
{
    (void)arg;
    memset(sh, 0, sizeof(*sh));
    vigil_hb *hb = vt_hb_fresh("ns.hb", 4);
    pid_t a = vt_spawn_sleeper(0);
    uint32_t w;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)a, &w), 0);
    uint64_t gen = vigil_slot_gen(&hb->slots[w]);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0); /* a's pid is free: the probe finds it dead */
    pid_t s = spawn_scanner(vt_path("ns.hb"), true);
    EXPECT(stopped(s), "the scanner did not stop before its lock");
    vigil_reclaim r[4];
    EXPECT(vigil_failover_scan_probe(hb, 1000, r, 4) == 1 && r[0].slot == w, "a's slot %u not reclaimed", w);
    errno = 0;
    pid_t n = vt_spawn_sleeper(a);
    if (n < 0 && errno == ENOTSUP) {
        kill(s, SIGKILL);
        return VT_SKIP; /* no clone3 here (ThreadSanitizer) */
    }
    EXPECT(n == a, "no process with a's pid %d (%s)", (int)a, strerror(errno));
    uint32_t w2;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)n, &w2), 0);
    uint64_t gen2 = vigil_slot_gen(&hb->slots[w]);
    EXPECT(w2 == w && gen2 > gen, "the newcomer is in slot %u (gen %llu), a was in %u (gen %llu)", w2,
           (unsigned long long)gen2, w, (unsigned long long)gen);
    kill(s, SIGCONT);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->n) != 0, 20000), "the scanner never returned");
    EXPECT(atomic_load(&sh->n) - 1000 == 0,
           "the paused scan reclaimed %d slots: its verdict on a's registration taken for the newcomer's",
           atomic_load(&sh->n) - 1000);
    EXPECT(vigil_slot_gen(&hb->slots[w]) == gen2 && atomic_load(&hb->slots[w].pid) == (uint32_t)n,
           "the newcomer's registration was taken");
    kill(s, SIGKILL);
    kill(n, SIGKILL);
    waitpid(s, NULL, 0);
    waitpid(n, NULL, 0);
    vigil_hb_close(hb);
    return 0;
}

static int test_dead_verdict_not_carried_to_a_recycled_pid(void)
{
    int st = vt_in_pidns(recycled_in_ns, NULL, true, 60000);
    if (st == VT_SKIP)
        return VT_SKIP;
    EXPECT(st == 0, "in the namespace: status %d (its message is above)", st);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_stale_owner_beats_again),
        VT_CASE(test_dead_verdict_not_carried_to_a_recycled_pid),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
