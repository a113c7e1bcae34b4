/* SPDX-License-Identifier: MIT */
/* Bounded waiting: the spin, the yield and the budget (spin_internal.h). */
#define _GNU_SOURCE
#include "spin_internal.h"

#include <sched.h>
#include <time.h>

#define SPIN_LOOKS 64         /* looks with the pause hint before yielding */
#define BACKOFF_NS 10000000u  /* vigil_backoff's budget: a preempted writer gets 10 ms */

uint64_t vigil_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { OVER, SPUN, PAST_SPIN };

/* The step both waits share, after failed look number `attempt`: OVER once
 * the budget is spent; SPUN while spinning (the pause is done); PAST_SPIN
 * with the clock in *now once past the spin (the caller yields or judges). */
static int step(unsigned attempt, uint64_t *deadline_ns, uint64_t budget_ns, uint64_t *now)
{
    if (attempt < SPIN_LOOKS) {
        vigil_cpu_relax();
        return SPUN;
    }
    *now = vigil_now_ns();
    if (attempt == SPIN_LOOKS)
        *deadline_ns = *now + budget_ns;
    else if (*now > *deadline_ns)
        return OVER;
    return PAST_SPIN;
}

bool vigil_backoff(unsigned attempt, uint64_t *deadline_ns)
{
    uint64_t now;
    int s = step(attempt, deadline_ns, BACKOFF_NS, &now);
    if (s == PAST_SPIN)
        sched_yield();
    return s != OVER;
}

bool vigil_lock_wait(struct vigil_lock_wait *w, bool *judge)
{
    uint64_t now;
    *judge = false;
    int s = step(w->attempt++, &w->deadline_ns, w->budget_ns, &now);
    if (s != PAST_SPIN)
        return s != OVER;
    if (now >= w->next_judge_ns) {
        /* The judge's own system calls stand in for this round's yield. */
        w->next_judge_ns = now + w->judge_ns;
        *judge = true;
        return true;
    }
    sched_yield();
    return true;
}
