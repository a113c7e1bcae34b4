/* SPDX-License-Identifier: MIT */
/* Fuzzes vigil_hb_open and every call on whatever it accepts. */
#include "fuzz.h"

#include <vigil/vigil.h>

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    uint32_t slots;
    size_t size = fuzz_hb_seed_begin(index, buf, cap, &slots);
    if (size == 0)
        return 0;
    /* one occupied slot, so mutations hit a live record too */
    uint32_t pid = 4242;
    memcpy(buf + 64, &pid, 4);
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size, VIGIL_KIND_HEARTBEAT);
    vigil_hb *hb = NULL;
    if (vigil_hb_open(path, 0, &hb) == 0) {
        uint32_t cap = vigil_hb_capacity(hb);
        vigil_slot_info info;
        for (uint32_t i = 0; i < cap && i < 256; i++) {
            (void)vigil_hb_snapshot(hb, i, &info);
            vigil_hb_beat(hb, i);
            (void)vigil_hb_mark_in_flight(hb, i, i % 64);
            (void)vigil_hb_clear_in_flight(hb, i, i % 64);
        }
        (void)vigil_hb_snapshot(hb, cap, &info);
        vigil_hb_beat(hb, cap);
        (void)vigil_hb_live_count(hb, 5);
        (void)vigil_hb_tick(hb);
        uint32_t slot;
        if (vigil_hb_register(hb, 777, &slot) == 0)
            (void)vigil_hb_unregister(hb, slot);
        vigil_hb_close(hb);
    }
    fuzz_remove_file(path);
    return 0;
}
