/* SPDX-License-Identifier: MIT */
/*
 * Description: judges never call dead what they cannot see, across pid
 * namespaces made with unshare(CLONE_NEWPID) (root only: skipped, never
 * passed, without it):
 *
 * - a live lease locker that is pid 1 of its own namespace, stopped in the
 *   middle of a hand-over, is not robbed by an acquirer in the root
 *   namespace (whose pid 1 is another process): it gets VIGIL_EBUSY, and
 *   the locker finishes with the key;
 * - a probe from a child namespace of a slot whose registrant recorded no
 *   namespace (owner_ns 0) answers "unknown", never "dead";
 * - a failover scan from a child namespace repairs no slot wedged by a
 *   writer of the root namespace, even one that is dead there.
 */
#include "hbtest.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "leases_internal.h"

struct shared {
    _Atomic int parked;
    _Atomic int go;
    _Atomic int rc;       /* the namespaced process's result + 1000 */
    _Atomic uint32_t pid; /* its pid as it sees it */
};
static struct shared *sh;

/* Runs fn as pid 1 of a new pid namespace; returns its exit status, or
 * VT_SKIP when this process may not make one. */
static int in_new_pidns(int (*fn)(void *), void *arg, pid_t *outer)
{
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return -1;
    fflush(NULL);
    pid_t mid = fork();
    if (mid == 0) {
        close(pipefd[0]);
        if (unshare(CLONE_NEWPID) < 0)
            _exit(VT_SKIP);
        pid_t inner = fork();
        if (inner == 0)
            _exit(fn(arg));
        /* Tell the test the namespaced process's pid as the root sees it. */
        if (write(pipefd[1], &inner, sizeof(inner)) != (ssize_t)sizeof(inner))
            _exit(2);
        int st;
        if (waitpid(inner, &st, 0) != inner)
            _exit(3);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    close(pipefd[1]);
    pid_t inner = -1;
    ssize_t n = read(pipefd[0], &inner, sizeof(inner));
    close(pipefd[0]);
    if (outer)
        *outer = n == (ssize_t)sizeof(inner) ? inner : -1;
    return mid;
}

static int finish(pid_t mid)
{
    int st = vt_wait(mid, 30000);
    return st;
}

/* ---- the lease locker ---------------------------------------------------- */

static void park_locked(int point)
{
    if (point != LP_ENTRY_LOCKED)
        return;
    atomic_store(&sh->parked, 1);
    VT_WAIT_FOR(atomic_load(&sh->go), 30000);
}

static int locker(void *arg)
{
    vigil_leases *ls;
    if (vigil_leases_open(arg, &ls) < 0)
        return 90;
    atomic_store(&sh->pid, (uint32_t)getpid());
    vigil_leases_hook = park_locked;
    vigil_lease l;
    int rc = vigil_leases_acquire(ls, "k", "inner", 60000, &l);
    vigil_leases_hook = NULL;
    atomic_store(&sh->rc, rc + 1000);
    vigil_leases_close(ls);
    return 0;
}

static int test_locker_in_other_namespace_not_robbed(void)
{
    memset(sh, 0, sizeof(*sh));
    vigil_leases *ls = vt_leases_fresh("ns.leases", 4);
    vigil_lease l;
    /* Bound once, so the namespaced acquire takes the entry lock only. */
    EXPECT_RC(vigil_leases_acquire(ls, "k", "first", 60000, &l), 0);
    EXPECT_RC(vigil_leases_release(ls, &l), 0);
    pid_t inner;
    pid_t mid = in_new_pidns(locker, (void *)vt_path("ns.leases"), &inner);
    EXPECT(mid > 0, "fork failed");
    if (!VT_WAIT_FOR(atomic_load(&sh->parked), 20000)) {
        int st = finish(mid);
        if (st == VT_SKIP)
            return VT_SKIP;
        EXPECT(0, "the namespaced locker never locked (exit %d)", st);
    }
    EXPECT(atomic_load(&sh->pid) == 1, "the locker is pid %u in its namespace, not 1", atomic_load(&sh->pid));
    /* Our pid 1 is another process: the judge must not take it for the
     * locker's and call the locker dead. */
    vigil_lease mine;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "outer", 60000, &mine), VIGIL_EBUSY);
    atomic_store(&sh->go, 1);
    EXPECT(finish(mid) == 0, "the locker failed");
    EXPECT(atomic_load(&sh->rc) - 1000 == 0, "the locker's acquire gave %d", atomic_load(&sh->rc) - 1000);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "outer", 60000, &mine), VIGIL_EBUSY);
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_get(ls, "k", &info), 0);
    EXPECT(strcmp(info.owner, "inner") == 0, "holder %s", info.owner);
    vigil_leases_close(ls);
    return 0;
}

/* ---- probes and repairs from a child namespace --------------------------- */

struct look {
    const char *path;
    uint32_t    probe_slot, wedged_slot;
};

static int looker(void *arg)
{
    const struct look *lk = arg;
    vigil_hb *hb;
    if (vigil_hb_open(lk->path, 0, &hb) < 0)
        return 90;
    int probe = vigil_hb_probe(hb, lk->probe_slot);
    vigil_reclaim out[4];
    int n = vigil_failover_scan_probe(hb, 1000, out, 4);
    uint64_t version = atomic_load(&hb->slots[lk->wedged_slot].seq);
    vigil_hb_close(hb);
    if (probe != -EREMOTE)
        return 10 + (probe < 0 ? 0 : probe);
    if (n != 0 || !(version & 1u))
        return 20;
    return 0;
}

static int test_unseen_owners_and_writers_left_alone(void)
{
    vigil_hb *hb = vt_hb_fresh("ns.hb", 4);
    uint32_t a, b;
    /* A: our own slot, its namespace not recorded (as by a registrant
     * without /proc). B: wedged by a writer of this namespace that is
     * dead here. */
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &a), 0);
    atomic_store(&hb->slots[a].owner_ns, 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &b), 0);
    vt_wedge(hb, b, VT_WRITER_DEAD);
    struct look lk = { vt_path("ns.hb"), a, b };
    pid_t mid = in_new_pidns(looker, &lk, NULL);
    EXPECT(mid > 0, "fork failed");
    int st = finish(mid);
    if (st == VT_SKIP) {
        vigil_hb_close(hb);
        return VT_SKIP;
    }
    EXPECT(st == 0, "from a child namespace: %s (exit %d)",
           st >= 10 && st < 20 ? "the probe of an unrecorded namespace did not say unknown"
                               : "a scan repaired or vacated what it cannot see",
           st);
    /* Here, where the writer is provably dead, it is repaired. */
    vigil_reclaim out[4];
    EXPECT(vigil_failover_scan(hb, 1000, out, 4) == 0, "scan");
    EXPECT(atomic_load(&hb->slots[b].seq) % 2 == 0, "not repaired in the writer's own namespace");
    vigil_hb_close(hb);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_locker_in_other_namespace_not_robbed),
        VT_CASE(test_unseen_owners_and_writers_left_alone),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
