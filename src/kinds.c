/* SPDX-License-Identifier: MIT */
/* What each kind of vigil file is made of: its size for a capacity. */
#include "barrier_internal.h"
#include "heartbeat_internal.h"
#include "journal_internal.h"
#include "leases_internal.h"

uint64_t vigil_file_size(uint32_t kind, uint32_t capacity)
{
    const struct vigil_layout *lay = kind == VIGIL_KIND_HEARTBEAT ? &vigil_hb_layout
                                   : kind == VIGIL_KIND_BARRIER   ? &vigil_barrier_layout
                                   : kind == VIGIL_KIND_LEASES    ? &vigil_leases_layout
                                   : kind == VIGIL_KIND_JOURNAL   ? &vigil_journal_layout
                                                                  : NULL;
    return lay ? vigil_layout_size(lay, capacity) : 0;
}
