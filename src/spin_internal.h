/* SPDX-License-Identifier: MIT */
/*
 * Bounded waiting, the one way every wait in vigil spins: a short spin with
 * the CPU's pause hint, then yielding the CPU until a budget of time has
 * passed. Nothing in vigil waits unboundedly on another process: a peer
 * may be killed, or stopped, at any instruction.
 */
#ifndef VIGIL_SRC_SPIN_INTERNAL_H
#define VIGIL_SRC_SPIN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* The CPU's spin-wait hint: frees the pipeline for the sibling hyperthread
 * and eases the memory traffic of a load loop. */
static inline void vigil_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Monotonic clock in nanoseconds. */
uint64_t vigil_now_ns(void);

/* A bounded wait used by every SeqLock spin: call after each failed look
 * with the attempt number (0, 1, ...) and a deadline word the first call
 * sets; returns false once the wait has exceeded its budget (about 10 ms:
 * long enough for a preempted writer to be scheduled again). */
bool vigil_backoff(unsigned attempt, uint64_t *deadline_ns);

/*
 * Waiting for a lock word that another thread or process holds, with a
 * look now and then at whether the holder died (and the lock can be taken
 * over). The caller sets the budget and the judging interval and zeroes
 * the rest:
 *
 *     struct vigil_lock_wait w = { .budget_ns = B, .judge_ns = J };
 *     bool judge = false;
 *     for (;;) {
 *         look at the lock; take it if free, or if judge and its holder
 *         is provably dead (then judge = false);
 *         if (!vigil_lock_wait(&w, &judge))
 *             return VIGIL_EBUSY;
 *     }
 *
 * The first 64 calls spin; then each call yields the CPU, except that it
 * sets *judge instead at the first call past the spin and every judge_ns
 * after (judging reads /proc: worth it only for a lock that has outlived
 * the spin). Returns false once budget_ns have passed since the spin.
 */
struct vigil_lock_wait {
    uint64_t budget_ns;
    uint64_t judge_ns;
    unsigned attempt;
    uint64_t deadline_ns;
    uint64_t next_judge_ns;
    uint64_t mapped_word; /* vigil_lock_judge: the word whose holder was seen to map the file */
};

bool vigil_lock_wait(struct vigil_lock_wait *w, bool *judge);

#endif
