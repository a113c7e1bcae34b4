/* SPDX-License-Identifier: MIT */
/*
 * Test scaffolding for the epoch barrier's multi-process tests: a fresh
 * pair of files (a heartbeat table of 8 slots and its barrier) in the
 * test's temporary directory, and a process's handles on them.
 */
#ifndef VIGIL_BARRIERTEST_H
#define VIGIL_BARRIERTEST_H

#include "testutil.h"

/* Makes hbn (8 slots) and bn (grace epochs) afresh, removing what an
 * earlier try of a case left under those names, and closes both. */
static inline void vt_barrier_files(const char *hbn, const char *bn, uint64_t grace)
{
    unlink(vt_path(hbn));
    unlink(vt_path(bn));
    vigil_hb *hb = vt_hb_fresh(hbn, 8);
    vigil_barrier *b;
    if (vigil_barrier_create(vt_path(bn), hb, grace, &b) < 0)
        exit(2);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
}

/* This process's handles on hbn and bn; exits 90 if either will not open
 * (a child's failure its parent sees in the status). */
static inline vigil_barrier *vt_barrier_open(const char *hbn, const char *bn, vigil_hb **hb)
{
    vigil_barrier *b;
    if (vigil_hb_open(vt_path(hbn), 0, hb) < 0 || vigil_barrier_open(vt_path(bn), *hb, 0, &b) < 0)
        _exit(90);
    return b;
}

#endif
