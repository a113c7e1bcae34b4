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
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#ifdef CPU_FEATURE_ACTIVE /* 2.33 on: 2.32's header has CPU_FEATURE_USABLE alone */
#define VIGIL_GLIBC_CPU_FEATURES 1
#endif
#endif
#endif
#if defined(__x86_64__) && !defined(VIGIL_GLIBC_CPU_FEATURES)
#include <cpuid.h>
#endif

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

/*
 * What the processor offers, x86-64: cmpxchg16b (vigil__cas16) and AVX2
 * (the barrier's live scan). As glibc found it when the program started
 * (CPU_FEATURE_ACTIVE of <sys/platform/x86.h>, glibc 2.33 and later; AVX2
 * only where the kernel saves its registers, and not when GLIBC_TUNABLES
 * masks it), never by a cpuid of ours: a virtual machine traps every cpuid
 * (8 us each on the machine of docs/performance.md), and libgcc's
 * __builtin_cpu_supports runs a dozen of them in a constructor of every
 * program linking libvigil, a `vigil --version` included. Elsewhere (glibc
 * 2.32's header too: tests/spin_old_glibc.c), cpuid and libgcc as before.
 */
static inline bool vigil_cpu_has_cas16(void)
{
#if defined(VIGIL_GLIBC_CPU_FEATURES)
    return CPU_FEATURE_ACTIVE(CMPXCHG16B);
#elif defined(__x86_64__)
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_CMPXCHG16B);
#else
    return true; /* the build refused a target without it */
#endif
}

static inline bool vigil_cpu_has_avx2(void)
{
#if defined(VIGIL_GLIBC_CPU_FEATURES)
    return CPU_FEATURE_ACTIVE(AVX2);
#elif defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return false;
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
