/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes failover, election and probing on whatever vigil_hb_open accepts:
 * a hostile table (wedged versions, scribbled pids, start times, wedge
 * records, leader words, lock words and intents) must give answers inside
 * the table's bounds and never a crash, hang or out-of-bounds access.
 */
#include "fuzz.h"

#include <vigil/vigil.h>

#include "heartbeat_internal.h"
#include "proc_internal.h"

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    uint32_t slots;
    size_t size = fuzz_hb_seed_begin(index, buf, cap, &slots);
    if (size == 0)
        return 0;
    uint64_t epoch = 10, term = 3, leader = ((uint64_t)4242 << 32) | 1;
    memcpy(buf + 24, &epoch, 8);
    memcpy(buf + 32, &term, 8);
    memcpy(buf + 40, &leader, 8);
    for (uint32_t i = 0; i < slots && i < 4; i++) {
        uint8_t *s = buf + 64 + (size_t)i * 64;
        uint32_t pid = 4242 + i, seq = i == 2 ? 3 : 2, role = i == 0;
        uint64_t seen = i == 1 ? 2 : 10, bits = UINT64_C(0x11) << i, start = 1000 + i;
        uint64_t odd = i == 2 ? ((uint64_t)3 << 32 | 1) : 0;
        memcpy(s + 0, &pid, 4);
        memcpy(s + 4, &seq, 4);
        memcpy(s + 8, &seen, 8);
        memcpy(s + 16, &bits, 8);
        memcpy(s + 24, &role, 4);
        memcpy(s + 32, &start, 8);
        memcpy(s + 40, &odd, 8);
    }
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size, VIGIL_KIND_HEARTBEAT);
    vigil_hb *hb = NULL;
    if (vigil_hb_open(path, 0, &hb) == 0) {
        uint32_t cap = vigil_hb_capacity(hb);
        /* A lock word naming a live process would make the election wait
         * its full budget; that is correct, and too slow for a fuzzer. */
        uint64_t seq = atomic_load(&hb->hdr->elect_seq);
        if ((seq & 1u) && !vigil_lock_holder_dead(atomic_load(&hb->hdr->elect_lock), NULL))
            atomic_store(&hb->hdr->elect_seq, seq + 1);

        vigil_reclaim out[8];
        for (int pass = 0; pass < 2; pass++) {
            int n = pass ? vigil_failover_scan_probe(hb, 3, out, 8) : vigil_failover_scan(hb, 3, out, 8);
            if (n < 0 || n > 8)
                abort();
            for (int i = 0; i < n; i++)
                if (out[i].slot >= cap)
                    abort();
        }
        vigil_hb_tick(hb);
        vigil_hb_tick(hb);
        int n = vigil_failover_scan(hb, 0, out, 8);
        if (n < 0 || n > 8)
            abort();
        vigil_leader l;
        int rc = vigil_leader_elect(hb, 5, &l);
        if (rc >= 0 && l.slot >= cap)
            abort();
        if (vigil_leader_get(hb, &l) == 0 && l.slot >= cap)
            abort();
        for (uint32_t i = 0; i < cap && i < 8; i++) {
            (void)vigil_leader_is(hb, i, 5);
            rc = vigil_hb_probe(hb, i);
            if (rc > 1)
                abort();
        }
        (void)vigil_leader_is(hb, cap, 5);
        if (vigil_hb_probe(hb, cap) != VIGIL_ERANGE)
            abort();
        vigil_hb_close(hb);
    }
    fuzz_remove_file(path);
    return 0;
}
