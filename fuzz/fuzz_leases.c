/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes vigil_leases_open and every call on whatever it accepts: the entry
 * view of every entry, acquire (binding and taking over), renew and release
 * by id and by key, with leases whose fields are taken from the input too.
 * Nothing may read past a field, crash or hang.
 */
#include "fuzz.h"

#include <vigil/vigil.h>

#include "leases_internal.h"

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    static const uint32_t caps[] = { 1, 4, 16 };
    if (index >= sizeof(caps) / sizeof(caps[0]))
        return 0;
    size_t size = fuzz_seed_begin(buf, cap, 64 + (size_t)caps[index] * 256, VIGIL_KIND_LEASES, caps[index]);
    if (size == 0)
        return 0;
    uint32_t eb = 256;
    uint64_t last = 7;
    memcpy(buf + 24, &last, 8);
    memcpy(buf + 40, &eb, 4);
    /* Entry 0 bound to "seed" with token 7 and a far expiry, so mutations
     * hit a live record; the last entry bound and released. */
    for (uint32_t i = 0; i < caps[index]; i += caps[index] > 1 ? caps[index] - 1 : 1) {
        uint8_t *e = buf + 64 + (size_t)i * 256;
        uint64_t ctl = i == 0 ? ((UINT64_C(3) << CTL_GEN_SHIFT) | CTL_EXP_MASK) : (UINT64_C(5) << CTL_GEN_SHIFT);
        uint64_t tok = 7, ttl = 1000;
        uint32_t hash = 0, bound = ENTRY_BOUND;
        memcpy(e, &ctl, 8);
        memcpy(e + 8, &tok, 8);
        memcpy(e + 16, &ttl, 8);
        /* FNV-1a of "seed", as leases.c computes it */
        hash = 2166136261u;
        for (const char *p = "seed"; *p; p++)
            hash = (hash ^ (uint8_t)*p) * 16777619u;
        memcpy(e + 24, &hash, 4);
        memcpy(e + 28, &bound, 4);
        memcpy(e + 64, "seed", 4);
        memcpy(e + 192, "owner", 5);
    }
    return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file(data, size, VIGIL_KIND_LEASES);
    vigil_leases *ls = NULL;
    if (vigil_leases_open(path, &ls) == 0) {
        uint32_t cap = vigil_leases_capacity(ls);
        vigil_lease_info info;
        for (uint32_t i = 0; i < cap && i < 64; i++)
            (void)vigil_leases_entry(ls, i, &info);
        (void)vigil_leases_entry(ls, cap, &info);

        /* Leases built from the input: ids, tokens and keys of any kind,
         * including keys without a NUL. */
        vigil_lease l;
        memset(&l, 0, sizeof(l));
        snprintf(l.key, sizeof(l.key), "seed");
        l.token = 7;
        l.id = 1;
        l.ttl_ms = 1000;
        (void)vigil_leases_renew(ls, &l);
        l.id = 0;
        (void)vigil_leases_renew(ls, &l);
        if (size >= 64 + 16) {
            memcpy(&l.token, data + 64 + 8, 8);
            memcpy(&l.id, data + 64 + 16, 8);
        }
        (void)vigil_leases_renew(ls, &l);
        (void)vigil_leases_release(ls, &l);
        vigil_lease raw;
        size_t n = size < sizeof(raw) ? size : sizeof(raw);
        memset(&raw, 'x', sizeof(raw));
        memcpy(&raw, data, n);
        (void)vigil_leases_renew(ls, &raw);
        (void)vigil_leases_release(ls, &raw);

        /* Acquire whatever is there, bound keys and new ones alike. */
        vigil_lease got;
        const char *keys[] = { "seed", "fresh", "other" };
        for (int k = 0; k < 3; k++) {
            if (vigil_leases_acquire(ls, keys[k], "fuzz", 5, &got) == 0) {
                (void)vigil_leases_renew(ls, &got);
                (void)vigil_leases_release(ls, &got);
            }
        }
        /* Keys read back from the file go back in (bounded copies). */
        for (uint32_t i = 0; i < cap && i < 4; i++) {
            if (vigil_leases_entry(ls, i, &info) >= 0 && info.key[0])
                (void)vigil_leases_acquire(ls, info.key, info.owner, 5, &got);
        }
        vigil_leases_close(ls);
    }
    fuzz_remove_file(path);
    return 0;
}
