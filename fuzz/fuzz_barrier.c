/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes vigil_barrier_open and vigil_barrier_peek, and every call on
 * whatever open accepts: the waits must neither read nor write out of
 * bounds nor hang on a hostile file. Timed waits use timeouts of 0 and a
 * few microseconds; the untimed waits made are the ones that must return
 * whatever the file says: an epoch already passed, and a bound caller that
 * is the only live peer (its own arrival completes the round, or the file
 * makes it -EOVERFLOW). A heartbeat table of the capacity the image claims
 * (up to 1024) is created beside it, so mutations reach past the capacity
 * check into the records.
 */
#include "fuzz.h"

#include <vigil/vigil.h>

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    static const uint32_t caps[] = { 1, 4, 64 };
    if (index >= sizeof(caps) / sizeof(caps[0]))
        return 0;
    size_t size = 704 + (size_t)caps[index] * 144;
    if (size > cap)
        return 0;
    memset(buf, 0, size);
    memcpy(buf, vigil_magic, 8);
    uint32_t v = VIGIL_LAYOUT_VERSION, kind = VIGIL_KIND_BARRIER;
    memcpy(buf + 8, &v, 4);
    memcpy(buf + 12, &kind, 4);
    memcpy(buf + 16, &caps[index], 4);
    uint64_t grace = 5, state = (uint64_t)3 << 32 | 1, rec = (uint64_t)3 << 32 | 4242;
    memcpy(buf + 24, &grace, 8);
    memcpy(buf + 32, &state, 8);
    memcpy(buf + 704, &rec, 8); /* slot 0 arrived in epoch 3 as pid 4242 */
    /* Round 2's release record, as its judgement (ticket 1, place 1) left
     * it: the mark, the place's three pairs, slot 0's entry (counted). */
    uint64_t mark = (uint64_t)2 << 32 | 1u << 31 | 1, t = 1, round = (uint64_t)2 << 32, serial = 1 << 21,
             counts = (uint64_t)1 << 32, entry = 1 << 2 | 1;
    memcpy(buf + 64 + 2 * 8, &mark, 8);
    memcpy(buf + 128, &t, 8);
    for (int pair = 0; pair < 3; pair++) {
        const uint64_t *val[] = { &round, &serial, &counts };
        memcpy(buf + 192 + 64 + 16 * pair, val[pair], 8);
        memcpy(buf + 192 + 64 + 16 * pair + 8, &t, 8);
    }
    size_t entry_at = 704 + 16 * (size_t)caps[index] + 16 * (size_t)caps[index]; /* place 1, slot 0 */
    memcpy(buf + entry_at, &entry, 8);
    memcpy(buf + entry_at + 8, &t, 8);
    return size;
}

/* The release record, as the file says it: counts the arrays cannot
 * hold are only counted. */
static void read_rounds(vigil_barrier *b, uint32_t e)
{
    vigil_barrier_peer counted[2], left[2];
    vigil_barrier_round info = { .counted_peers = counted, .counted_cap = 2, .left_out_peers = left,
                                 .left_out_cap = 2 };
    for (uint32_t r = e - 9; r != e + 2; r++)
        (void)vigil_barrier_round_info(b, r, &info);
}

static void exercise(vigil_barrier *b, uint32_t cap, uint32_t slot)
{
    uint32_t e = vigil_barrier_epoch(b);
    (void)vigil_barrier_live_peers(b);
    read_rounds(b, e);
    (void)vigil_barrier_wait(b, e - 1);                     /* passed: at once */
    (void)vigil_barrier_wait_timeout(b, e, 0);
    (void)vigil_barrier_wait_quorum_timeout(b, e, 1, 0);
    (void)vigil_barrier_wait_quorum_timeout(b, e, 3, 2000);
    (void)vigil_barrier_wait_quorum_timeout(b, e + 1, 1, 0); /* early */
    (void)vigil_barrier_wait_quorum(b, e, 0);                /* VIGIL_ERANGE */
    (void)vigil_barrier_bind(b, cap);                        /* VIGIL_ERANGE */
    if (vigil_barrier_bind(b, slot) == 0) {
        e = vigil_barrier_epoch(b);
        (void)vigil_barrier_wait_timeout(b, e, 2000);
        (void)vigil_barrier_wait_quorum_timeout(b, e, 2, 0);
        /* Untimed, bound, the only live peer: must return. */
        (void)vigil_barrier_wait_quorum(b, vigil_barrier_epoch(b), 1);
        (void)vigil_barrier_wait(b, vigil_barrier_epoch(b));
        vigil_barrier_round info = { 0 };
        (void)vigil_barrier_wait_info(b, vigil_barrier_epoch(b), 1, 2000, &info);
        read_rounds(b, vigil_barrier_epoch(b));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size, VIGIL_KIND_BARRIER);
    vigil_barrier_state st;
    (void)vigil_barrier_peek(path, &st);

    uint32_t cap = 4;
    if (size >= 20) {
        memcpy(&cap, data + 16, 4);
        if (cap == 0 || cap > 1024)
            cap = 4;
    }
    char hbpath[sizeof(fuzz_dir) + 8];
    snprintf(hbpath, sizeof(hbpath), "%s/h", fuzz_dir);
    unlink(hbpath);
    vigil_hb *hb = NULL;
    if (vigil_hb_create(hbpath, cap, &hb) == 0) {
        uint32_t slot = 0;
        (void)vigil_hb_register(hb, 4242, &slot);
        vigil_barrier *b = NULL;
        if (vigil_barrier_open(path, hb, 0, &b) == 0) {
            exercise(b, cap, slot);
            vigil_barrier_close(b);
        }
        if (vigil_barrier_open(path, hb, UINT64_MAX, &b) == 0) {
            (void)vigil_barrier_live_peers(b);
            (void)vigil_barrier_wait_timeout(b, vigil_barrier_epoch(b), 0);
            vigil_barrier_close(b);
        }
        vigil_hb_close(hb);
        unlink(hbpath);
    }
    fuzz_remove_file(path);
    return 0;
}
