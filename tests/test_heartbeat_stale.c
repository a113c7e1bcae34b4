/* SPDX-License-Identifier: MIT */
/*
 * Description: issue 17.3 with real processes, THE FENCE
 * (<vigil/heartbeat.h>; model/slot.pml). A worker that checked its slot
 * and was stopped (SIGSTOP, at the moment it chooses) is failed over; a
 * successor registers into the same slot and marks the same unit; the
 * stale worker resumes and clears that unit, marks another, sets its
 * role, unregisters: every call returns VIGIL_ELOST, vigil_hb_owned says
 * 0, and the successor's bits, role and registration are untouched, so
 * when the successor is killed its unit is handed over, not lost. Then,
 * as root, a pid recycled on purpose (clone3 with set_tid): a supervisor
 * registered a worker, the worker died and was reclaimed, and a new
 * process with the dead worker's pid registered the slot; the
 * supervisor's stale calls about the old registration are all told
 * VIGIL_ELOST and change nothing of the newcomer's.
 */
#include "hbtest.h"
#include "nstest.h"

#include <sys/wait.h>

#define GRACE 2

struct told {
    _Atomic uint32_t slot;
    _Atomic int ready;
    _Atomic int clear, mark, role, unreg, owned, owned_before; /* results + 10000 */
};
static struct told *sh;

static int stale_worker(const char *path)
{
    vigil_hb *hb;
    uint32_t slot;
    if (vigil_hb_open(path, 0, &hb) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0)
        return 3;
    if (vigil_hb_mark_in_flight(hb, slot, 3) < 0)
        return 4;
    atomic_store(&sh->slot, slot);
    /* As vigil(7) advises before a unit: the slot still ours? Yes, and
     * then the worker stalls, right before finishing unit 5's work. */
    vigil_slot_info info;
    if (vigil_hb_snapshot(hb, slot, &info) < 0 || info.pid != (uint32_t)getpid())
        return 5;
    atomic_store(&sh->owned_before, vigil_hb_owned(hb, slot) + 10000);
    raise(SIGSTOP);
    atomic_store(&sh->clear, vigil_hb_clear_in_flight(hb, slot, 5) + 10000);
    atomic_store(&sh->mark, vigil_hb_mark_in_flight(hb, slot, 7) + 10000);
    atomic_store(&sh->role, vigil_hb_set_role(hb, slot, VIGIL_ROLE_COORDINATOR) + 10000);
    atomic_store(&sh->owned, vigil_hb_owned(hb, slot) + 10000);
    atomic_store(&sh->unreg, vigil_hb_unregister(hb, slot) + 10000);
    vigil_hb_close(hb);
    return 0;
}

static int successor(const char *path)
{
    vigil_hb *hb;
    uint32_t slot;
    if (vigil_hb_open(path, 0, &hb) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0)
        return 3;
    if (slot != atomic_load(&sh->slot) || vigil_hb_mark_in_flight(hb, slot, 5) < 0)
        return 4;
    atomic_store(&sh->ready, 1);
    vt_await_kill();
}

#define RC(field) (atomic_load(&sh->field) - 10000)

static int test_stale_worker_told(void)
{
    const char *path = vt_path("stale.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 1); /* one slot: the successor gets the worker's */
    memset(sh, 0, sizeof(*sh));
    fflush(NULL);
    pid_t a = fork();
    if (a == 0)
        _exit(stale_worker(path));
    EXPECT(vt_wait_stopped(a, 20000), "the worker never stopped");
    EXPECT(RC(owned_before) == 1, "before the stall vigil_hb_owned gave %d", RC(owned_before));
    uint32_t slot = atomic_load(&sh->slot);

    /* Stopped past its grace: failed over, its unit 3 handed over. */
    vigil_reclaim r[2];
    vt_hb_tick_keep(hb, GRACE + 1, 0);
    int n = vigil_failover_scan(hb, GRACE, r, 2);
    EXPECT(n == 1 && r[0].slot == slot && r[0].pid == (uint32_t)a && r[0].in_flight == (1u << 3),
           "expected the worker's slot %u with unit 3, got %d entries ({%u, %u, %#llx})", slot, n, r[0].slot,
           r[0].pid, (unsigned long long)r[0].in_flight);

    /* The successor in the same slot, with unit 5 (handed to it, say). */
    pid_t b = fork();
    if (b == 0)
        _exit(successor(path));
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->ready), 20000), "the successor never marked its unit");

    /* The stale worker resumes: told, and fenced. */
    kill(a, SIGCONT);
    EXPECT(vt_wait(a, 20000) == 0, "the stale worker failed");
    EXPECT(RC(clear) == VIGIL_ELOST && RC(mark) == VIGIL_ELOST && RC(role) == VIGIL_ELOST &&
               RC(unreg) == VIGIL_ELOST && RC(owned) == 0,
           "the stale worker was told clear %d, mark %d, set_role %d, unregister %d, owned %d "
           "(expected VIGIL_ELOST = %d for each and owned 0)",
           RC(clear), RC(mark), RC(role), RC(unreg), RC(owned), VIGIL_ELOST);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, slot, &info), 0);
    EXPECT(info.pid == (uint32_t)b && info.in_flight == (1u << 5) && info.role == VIGIL_ROLE_WORKER,
           "the successor's slot was changed: pid %u (successor %d), bits %#llx, role %u", info.pid, (int)b,
           (unsigned long long)info.in_flight, info.role);

    /* The successor dies: its unit 5 is handed over, not lost. */
    kill(b, SIGKILL);
    EXPECT(vt_wait(b, 20000) == 128 + SIGKILL, "successor not killed");
    n = vigil_failover_scan_probe(hb, GRACE, r, 2);
    EXPECT(n == 1 && r[0].pid == (uint32_t)b && r[0].in_flight == (1u << 5),
           "expected the successor's unit 5 handed over, got %d entries ({%u, %#llx})", n, r[0].pid,
           (unsigned long long)r[0].in_flight);
    vigil_hb_close(hb);
    return 0;
}

/*
 * A recycled pid, on purpose. The supervisor (this process) registers a
 * worker W by W's pid, marks its unit, and W dies; the probe scan reclaims
 * the slot. A new process N gets W's pid (clone3 with set_tid) and
 * registers itself into the same slot. The supervisor's handle still
 * names W's registration: every call it makes about the slot is told
 * VIGIL_ELOST, and N's registration keeps its bits and role.
 */
static int test_recycled_pid_successor(void)
{
    const char *path = vt_path("recycled.hb");
    vigil_hb *hb = vt_hb_fresh_at(path, 1);
    pid_t w = vt_spawn_sleeper(0);
    EXPECT(w > 0, "fork");
    uint32_t slot;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)w, &slot), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, slot, 2), 0);
    kill(w, SIGKILL);
    EXPECT(vt_wait(w, 20000) == 128 + SIGKILL, "W not killed");
    vigil_reclaim r[2];
    int n = vigil_failover_scan_probe(hb, 1000, r, 2);
    EXPECT(n == 1 && r[0].pid == (uint32_t)w && r[0].in_flight == (1u << 2), "W's slot not reclaimed: %d", n);

    int ready[2];
    EXPECT(pipe(ready) == 0, "pipe");
    pid_t nw = vt_fork_with_pid(w);
    if (nw < 0 && ((errno == EPERM || errno == ENOSYS || errno == ENOTSUP))) {
        vigil_hb_close(hb);
        return VT_SKIP; /* choosing a pid needs root and clone3, and no TSan */
    }
    if (nw == 0) {
        vigil_hb *mine;
        uint32_t s;
        char c = 1;
        if (vigil_hb_open(path, 0, &mine) < 0 || vigil_hb_register(mine, (uint32_t)getpid(), &s) < 0 ||
            vigil_hb_mark_in_flight(mine, s, 6) < 0 || write(ready[1], &c, 1) != 1)
            _exit(3);
        vt_await_kill();
    }
    EXPECT(nw == w, "clone3 with set_tid %d gave %d (%s)", (int)w, (int)nw, strerror(errno));
    char c;
    EXPECT(read(ready[0], &c, 1) == 1, "the newcomer never registered");
    close(ready[0]);
    close(ready[1]);

    EXPECT(atomic_load(&hb->slots[slot].pid) == (uint32_t)w, "the slot does not hold the recycled pid");
    EXPECT_RC(vigil_hb_owned(hb, slot), 0);
    EXPECT_RC(vigil_hb_clear_in_flight(hb, slot, 6), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, slot, 2), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_set_role(hb, slot, VIGIL_ROLE_COORDINATOR), VIGIL_ELOST);
    EXPECT_RC(vigil_hb_unregister(hb, slot), VIGIL_ELOST);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, slot, &info), 0);
    EXPECT(info.pid == (uint32_t)w && info.in_flight == (1u << 6) && info.role == VIGIL_ROLE_WORKER,
           "the newcomer's slot was changed: pid %u bits %#llx role %u", info.pid,
           (unsigned long long)info.in_flight, info.role);
    kill(nw, SIGKILL);
    EXPECT(vt_wait(nw, 20000) == 128 + SIGKILL, "newcomer not killed");
    vigil_hb_close(hb);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_stale_worker_told),
        VT_CASE(test_recycled_pid_successor),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
