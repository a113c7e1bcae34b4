/* SPDX-License-Identifier: MIT */
/*
 * Description: death probing: a live owner is alive, an owner that exited
 * without unregistering is dead at once (zombie or reaped), a killed one
 * too, PID reuse (a wrong start time in the slot) is dead, an unknown
 * start time never convicts, EPERM from kill means alive, and an owner in
 * another pid namespace or a slot mid-change is "unknown", never "dead".
 */
#include "hbtest.h"

#include "heartbeat_internal.h"
#include "proc_internal.h"

#include <limits.h>

static int test_probe_args(void)
{
    vigil_hb *hb = vt_hb_fresh("args.hb", 2);
    EXPECT_RC(vigil_hb_probe(NULL, 0), -EINVAL);
    EXPECT_RC(vigil_hb_probe(hb, 2), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_probe(hb, UINT32_MAX), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_probe(hb, 0), VIGIL_EVACANT);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    vt_wedge(hb, s, VT_WRITER_DEAD); /* a writer died mid-change */
    EXPECT_RC(vigil_hb_probe(hb, s), VIGIL_EBUSY);
    vigil_hb_close(hb);
    return 0;
}

static int test_self_alive(void)
{
    vigil_hb *hb = vt_hb_fresh("self.hb", 2);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    EXPECT(atomic_load(&hb->slots[s].start_time) != 0, "register did not stamp a start time");
    EXPECT_RC(vigil_hb_probe(hb, s), 1);
    vigil_hb_close(hb);
    return 0;
}

/* The case: a worker that exits without unregistering is dead at
 * once, before its parent reaps it (state Z) and after. */
static int test_exit_without_unregister(void)
{
    vigil_hb *hb = vt_hb_fresh("exit.hb", 2);
    int ready[2];
    EXPECT(pipe(ready) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        vigil_hb *mine;
        uint32_t slot;
        if (vigil_hb_open(vt_path("exit.hb"), 0, &mine) < 0 ||
            vigil_hb_register(mine, (uint32_t)getpid(), &slot) < 0)
            _exit(3);
        vigil_hb_mark_in_flight(mine, slot, 2);
        char c = (char)slot;
        if (write(ready[1], &c, 1) != 1)
            _exit(4);
        _exit(0); /* no unregister */
    }
    close(ready[1]);
    char c;
    EXPECT(read(ready[0], &c, 1) == 1, "child did not register");
    close(ready[0]);
    uint32_t slot = (uint32_t)c;
    siginfo_t si;
    EXPECT(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0, "waitid: %s", strerror(errno));
    EXPECT(kill(child, 0) == 0, "expected the unreaped child to exist as a zombie");
    EXPECT_RC(vigil_hb_probe(hb, slot), 0);
    EXPECT_RC(waitpid(child, NULL, 0), child);
    EXPECT_RC(vigil_hb_probe(hb, slot), 0);
    EXPECT(vigil_hb_live_count(hb, 5) == 1, "the probe changed the slot");
    vigil_hb_close(hb);
    return 0;
}

static int test_killed(void)
{
    vigil_hb *hb = vt_hb_fresh("killed.hb", 2);
    pid_t child = fork();
    if (child == 0) {
        for (;;)
            pause();
    }
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)child, &s), 0);
    EXPECT_RC(vigil_hb_probe(hb, s), 1);
    kill(child, SIGSTOP); /* stopped is still alive */
    EXPECT(VT_WAIT_FOR(waitpid(child, NULL, WNOHANG | WUNTRACED) == child, 2000), "child did not stop");
    EXPECT_RC(vigil_hb_probe(hb, s), 1);
    kill(child, SIGKILL);
    EXPECT(vt_wait(child, 2000) == 128 + SIGKILL, "child not killed");
    EXPECT_RC(vigil_hb_probe(hb, s), 0);
    vigil_hb_close(hb);
    return 0;
}

/* PID reuse, simulated by a wrong start time in the slot: the pid is
 * alive but belongs to another process. A start time of 0 is unknown and
 * never convicts. */
static int test_pid_reuse(void)
{
    vigil_hb *hb = vt_hb_fresh("reuse.hb", 2);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    uint64_t real = atomic_load(&hb->slots[s].start_time);
    atomic_store(&hb->slots[s].start_time, real + 1);
    EXPECT_RC(vigil_hb_probe(hb, s), 0);
    atomic_store(&hb->slots[s].start_time, real - 1);
    EXPECT_RC(vigil_hb_probe(hb, s), 0);
    atomic_store(&hb->slots[s].start_time, 0);
    EXPECT_RC(vigil_hb_probe(hb, s), 1);
    atomic_store(&hb->slots[s].start_time, real);
    EXPECT_RC(vigil_hb_probe(hb, s), 1);
    vigil_hb_close(hb);
    return 0;
}

/* kill(pid, 0) giving EPERM: the process exists. Run as an unprivileged
 * child probing its root parent, or (not root) probing pid 1. */
static int test_eperm_alive(void)
{
    vigil_hb *hb = vt_hb_fresh("eperm.hb", 2);
    uint32_t s;
    uint32_t target = geteuid() == 0 ? (uint32_t)getpid() : 1;
    EXPECT_RC(vigil_hb_register(hb, target, &s), 0);
    uint64_t real = atomic_load(&hb->slots[s].start_time);
    if (real == 0) {
        vigil_hb_close(hb);
        return VT_SKIP; /* no /proc entry for the target: nothing to compare */
    }
    int res[2];
    EXPECT(pipe(res) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        if (kill((pid_t)target, 0) == 0 || errno != EPERM)
            _exit(4); /* cannot make EPERM happen here */
        signed char r[2];
        r[0] = (signed char)vigil_hb_probe(hb, s);
        atomic_store(&hb->slots[s].start_time, real + 7); /* a "reused" pid */
        r[1] = (signed char)vigil_hb_probe(hb, s);
        _exit(write(res[1], r, 2) == 2 ? 0 : 5);
    }
    close(res[1]);
    signed char r[2] = { 99, 99 };
    ssize_t got = read(res[0], r, 2);
    close(res[0]);
    int st = vt_wait(child, 5000);
    vigil_hb_close(hb);
    if (st == 3 || st == 4)
        return VT_SKIP;
    EXPECT(st == 0 && got == 2, "child exited %d", st);
    EXPECT(r[0] == 1, "EPERM target: expected alive (1), got %d", r[0]);
    EXPECT(r[1] == 0, "EPERM target with another start time: expected dead (0), got %d", r[1]);
    return 0;
}

/* An owner recorded in another pid namespace cannot be judged from here:
 * its pid means another process, or none, in ours. Unknown, never dead. */
static int test_other_namespace_unknown(void)
{
    uint64_t mine = vigil_self_pidns();
    if (mine == 0)
        return VT_SKIP;
    vigil_hb *hb = vt_hb_fresh("ns.hb", 4);
    pid_t gone = vt_unused_pid();
    EXPECT(gone > 0, "no unused pid found");
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)gone, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &b), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &c), 0);
    EXPECT_RC(vigil_hb_probe(hb, a), 0);
    atomic_store(&hb->slots[a].owner_ns, mine + 1);
    atomic_store(&hb->slots[b].owner_ns, mine + 1);
    atomic_store(&hb->slots[c].owner_ns, mine); /* recorded, and ours */
    EXPECT_RC(vigil_hb_probe(hb, a), -EREMOTE);
    EXPECT_RC(vigil_hb_probe(hb, b), -EREMOTE);
    EXPECT_RC(vigil_hb_probe(hb, c), 1);
    vigil_hb_close(hb);
    return 0;
}

static int test_odd_pids(void)
{
    vigil_hb *hb = vt_hb_fresh("odd.hb", 4);
    uint32_t a, b;
    pid_t gone = vt_unused_pid();
    EXPECT(gone > 0, "no unused pid found");
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)gone, &a), 0);
    EXPECT_RC(vigil_hb_probe(hb, a), 0);
    /* Above INT_MAX: no process has that id, and it must never reach
     * kill(), where it would be a process group. */
    EXPECT_RC(vigil_hb_register(hb, 0x80000000u | (uint32_t)getpgrp(), &b), 0);
    EXPECT_RC(vigil_hb_probe(hb, b), 0);
    atomic_store(&hb->slots[b].pid, UINT32_MAX); /* kill(-1) would be every process */
    EXPECT_RC(vigil_hb_probe(hb, b), 0);
    EXPECT_RC(vigil_pid_judge(0, 0, 0, 0, 0), -EINVAL);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_probe_args), VT_CASE(test_self_alive), VT_CASE(test_exit_without_unregister),
        VT_CASE(test_killed), VT_CASE(test_pid_reuse), VT_CASE(test_eperm_alive),
        VT_CASE(test_other_namespace_unknown), VT_CASE(test_odd_pids))
