/* SPDX-License-Identifier: MIT */
/*
 * Placeholders for the reader's own code in the documentation's C
 * fragments (tests/docs_blocks.py compiles each fragment as a function
 * body after this header): the work a worker does and the unit it does.
 */
#ifndef VIGIL_DOCS_STUBS_H
#define VIGIL_DOCS_STUBS_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned unit __attribute__((unused));
static inline void do_work(unsigned u) { (void)u; }
static inline void requeue(uint32_t slot, uint64_t units) { (void)slot, (void)units; }
#endif
