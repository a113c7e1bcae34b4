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

#endif
