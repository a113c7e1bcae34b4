/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes vigil_journal_open and every call on whatever it accepts: the
 * consistent read of every entry, the next pending one, the counts, the
 * sweep (with a heartbeat table beside it and without), and the run lock.
 * A hostile journal (entries in any state, tickets, owners and slots of
 * any value, a run lock held by any word) must give answers inside the
 * file's bounds and never a crash, hang or out-of-bounds access.
 */
#include "fuzz.h"

#include <vigil/vigil.h>

#include "journal_internal.h"
#include "proc_internal.h"

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    static const uint32_t caps[] = { 1, 4, 16 };
    if (index >= sizeof(caps) / sizeof(caps[0]))
        return 0;
    size_t size = fuzz_seed_begin(buf, cap, 128 + (size_t)caps[index] * 64, VIGIL_KIND_JOURNAL, caps[index]);
    if (size == 0)
        return 0;
    uint64_t last = 9;
    uint32_t table = 8;
    memcpy(buf + 24, &last, 8);
    memcpy(buf + 48, &table, 4);
    /* Entries in each state, with a pid nobody has as their owners. */
    uint64_t gone = vigil_lock_word_of(4000000, 0, 1);
    for (uint32_t i = 0; i < caps[index] && i < 5; i++) {
        uint8_t *e = buf + 128 + (size_t)i * 64;
        uint64_t state = vj_word(i, 1 + i), owner = i ? gone : 0, gen = 3 + i, bits = UINT64_C(1) << i, epoch = 7;
        uint32_t slot = i, pid = 4242 + i, why = 1 + (i & 1), outcome = i == 4 ? VJ_OUT_EXITED | 0x300 : 0;
        memcpy(e + 0, &state, 8);
        memcpy(e + 8, &owner, 8);
        memcpy(e + 16, &slot, 4);
        memcpy(e + 20, &pid, 4);
        memcpy(e + 24, &gen, 8);
        memcpy(e + 32, &bits, 8);
        memcpy(e + 40, &epoch, 8);
        memcpy(e + 48, &why, 4);
        memcpy(e + 52, &outcome, 4);
        memcpy(e + 56, &owner, 8);
    }
    return size;
}

/* A heartbeat table beside the journal, for the sweep's look at slots. */
static vigil_hb *table(void)
{
    static vigil_hb *hb;
    static char path[96];
    if (!hb) {
        const char *base = getenv("TMPDIR");
        snprintf(path, sizeof(path), "%s/vigil-fuzz-hb.%d", base && *base ? base : "/tmp", (int)getpid());
        unlink(path);
        if (vigil_hb_create(path, 8, &hb) < 0)
            abort();
        unlink(path); /* the mapping stays */
        uint32_t s;
        vigil_hb_register(hb, 4242, &s);
    }
    return hb;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vigil_hb *hb = table();
    const char *path = fuzz_write_file(data, size, VIGIL_KIND_JOURNAL);
    vigil_journal *j = NULL;
    if (vigil_journal_open(path, &j) == 0) {
        uint32_t cap = j->capacity;
        for (uint32_t i = 0; i < cap; i++) {
            struct vigil_journal_rec r;
            if (vigil_journal_read(j, i, &r) == 0 && (r.idx != i || r.state > 7))
                abort();
        }
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, cap, &r) != VIGIL_ERANGE)
            abort();
        if (vigil_journal_next_pending(j, &r) == 0 && (r.idx >= cap || r.state != VJ_PENDING))
            abort();
        uint32_t counts[5];
        vigil_journal_counts(j, counts);
        if (counts[0] + counts[1] + counts[2] + counts[3] + counts[4] > cap)
            abort();
        uint64_t me = vigil_self_lock_word();
        int mine = vigil_journal_sweep(j, hb, me);
        if (mine < 0 || (uint32_t)mine > cap)
            abort();
        (void)vigil_journal_sweep(j, NULL, me);
        uint64_t held;
        if (vigil_journal_run_take(j, me, &held) == 0)
            vigil_journal_run_release(j, held);
        vigil_journal_close(j);
    }
    fuzz_remove_file(path);
    return 0;
}
