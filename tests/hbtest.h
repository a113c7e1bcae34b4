/* SPDX-License-Identifier: MIT */
/*
 * Test scaffolding over the heartbeat table's internals (heartbeat_internal.h),
 * shared by the failover, leader and heartbeat tests: ticking with chosen
 * slots kept live, finding a process's slot, and worker processes that
 * beat until told to stop. It includes testutil.h and heartbeat_internal.h.
 */
#ifndef VIGIL_HBTEST_H
#define VIGIL_HBTEST_H

#include "testutil.h"

#include "heartbeat_internal.h"

/* How a test wedges a slot as a writer left it mid-change (THE SLOT WRITER
 * LOCK): the version odd and `writer` naming a process that is dead (a
 * pid nobody has), alive (this very process, as a paused writer would
 * be), or in another pid namespace. Returns the odd version. */
enum vt_writer { VT_WRITER_DEAD, VT_WRITER_ALIVE, VT_WRITER_ELSEWHERE };
static inline uint64_t vt_wedge(vigil_hb *hb, uint32_t slot, enum vt_writer who)
{
    uint64_t w = who == VT_WRITER_ALIVE ? vigil_self_lock_word()
                 : who == VT_WRITER_DEAD ? vigil_lock_word_of((uint32_t)vt_unused_pid(), vigil_self_pidns(), 0)
                                         : vigil_lock_word_of(1, vigil_self_pidns() ^ 0x5a5a, 0);
    atomic_store(&hb->slots[slot].writer, w);
    return atomic_fetch_add(&hb->slots[slot].seq, 1) + 1;
}

/* Ticks n times, beating the slots in `keep` (a bitmask) after each. */
static inline void vt_hb_tick_keep(vigil_hb *hb, int n, uint64_t keep)
{
    for (int i = 0; i < n; i++) {
        vigil_hb_tick(hb);
        for (uint32_t s = 0; s < 64 && s < hb->capacity; s++)
            if (keep & (UINT64_C(1) << s))
                vigil_hb_beat(hb, s);
    }
}

/* Ticks once and waits (5 s at most per slot) until every slot in `slots`
 * has beaten at the new epoch, so live workers never look stale however
 * the scheduler runs them; false if one did not. */
static inline bool vt_hb_tick_with_live(vigil_hb *hb, const uint32_t *slots, int n)
{
    uint64_t e = vigil_hb_tick(hb);
    for (int i = 0; i < n; i++)
        if (!VT_WAIT_FOR(atomic_load(&hb->slots[slots[i]].last_seen_epoch) >= e, 5000))
            return false;
    return true;
}

/* The first slot whose pid is `pid`, into *slot; false if there is none. */
static inline bool vt_hb_find_slot(vigil_hb *hb, pid_t pid, uint32_t *slot)
{
    for (uint32_t i = 0; i < hb->capacity; i++)
        if (atomic_load(&hb->slots[i].pid) == (uint32_t)pid) {
            *slot = i;
            return true;
        }
    return false;
}

/*
 * A worker process: opens the table at `path`, registers its own pid,
 * marks the in-flight bits in `bits`, counts itself into *ready, then
 * beats every 100 us until *stop is set and exits 0; exits
 * 3 if it could not open or register. Returns the child's pid to the
 * parent. `ready` and `stop` live in vt_shared memory.
 */
static inline pid_t vt_hb_spawn_worker(const char *path, _Atomic int *ready, _Atomic int *stop, uint64_t bits)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    vigil_hb *hb;
    uint32_t slot;
    if (vigil_hb_open(path, 0, &hb) < 0 || vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0)
        _exit(3);
    for (unsigned b = 0; b < 64; b++)
        if (bits & (UINT64_C(1) << b))
            vigil_hb_mark_in_flight(hb, slot, b);
    atomic_fetch_add(ready, 1);
    /* No deadline of its own: a test that kills it must find it alive
     * however long the machine took (it dies with the test). */
    while (!atomic_load(stop)) {
        vigil_hb_beat(hb, slot);
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    _exit(0);
}

/*
 * Children that stop themselves at a hook point (vigil_slot_hook's SP_*,
 * vigil_elect_hook's EP_*), so that a test decides the moment: the child
 * sets vt_stop_point and the hook, the parent waits until it is stopped
 * (vt_wait_stopped), acts, then resumes it with SIGCONT or kills it.
 */
static int vt_stop_point __attribute__((unused));
static inline void vt_stop_at(int point)
{
    if (point == vt_stop_point) {
        vt_stop_point = 0;
        raise(SIGSTOP);
    }
}

/* Waits at most timeout_ms until the child is stopped; false if it exited
 * or never stopped. */
static inline bool vt_wait_stopped(pid_t pid, unsigned timeout_ms)
{
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG | WUNTRACED);
        if (r == pid)
            return WIFSTOPPED(status);
        if (r < 0 || vt_now_ms() > deadline)
            return false;
        vt_sleep_ms(1);
    }
}

/*
 * A twin: a live process whose lock word is the one a test gives a forged
 * holding. While it maps no part of the table, a judge finds that holder
 * dead (a live pid whose start tag matches but which maps nothing of the
 * file is not the holder: vigil_lock_holder_dead), just as it finds a dead
 * process dead whose pid a newcomer recycles within the same clock tick.
 * When told (vt_twin_go), the twin opens the table and runs act(hb), with
 * that very word: the newcomer. It exits with act's result + 100.
 */
struct vt_twin {
    pid_t    pid;
    int      go;   /* write end: one byte starts act */
    uint64_t word; /* its lock word */
};

static inline bool vt_twin_start(struct vt_twin *t, vigil_hb *hb, const char *path, int (*act)(vigil_hb *))
{
    int go[2], ready[2];
    if (pipe(go) != 0 || pipe(ready) != 0)
        return false;
    fflush(NULL);
    t->pid = fork();
    if (t->pid == 0) {
        vt_die_with_parent();
        vigil_hb_close(hb); /* the inherited mapping: the twin maps nothing of the table */
        close(go[1]);
        close(ready[0]);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        vigil_hb *mine;
        if (vigil_hb_open(path, 0, &mine) < 0)
            _exit(3);
        _exit(100 + act(mine));
    }
    close(go[0]);
    close(ready[1]);
    char c;
    bool ok = t->pid > 0 && read(ready[0], &c, 1) == 1;
    close(ready[0]);
    uint64_t start = 0;
    ok = ok && vigil_proc_start_time((uint32_t)t->pid, &start) == 0;
    t->go = go[1];
    t->word = vigil_lock_word_of((uint32_t)t->pid, vigil_self_pidns(), start);
    return ok;
}

static inline bool vt_twin_go(struct vt_twin *t)
{
    char c = 1;
    bool ok = write(t->go, &c, 1) == 1;
    close(t->go);
    return ok;
}

#endif
