/* SPDX-License-Identifier: MIT */
/*
 * Replay driver: feeds a harness its seeds and a fixed, reproducible
 * series of mutations of them (byte flips, overwrites with extreme values,
 * truncations and extensions), so CTest exercises every harness without
 * libFuzzer. Usage: fuzz_<x>_replay [iterations]
 *
 * fuzz_<x>_replay --write-seeds DIR writes the harness's seeds into DIR
 * as seed-<index> files instead: `make fuzz` starts each libFuzzer binary
 * from them, as its corpus, rather than from nothing.
 */
#include "fuzz.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible across runs and machines */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static int write_seeds(const char *dir, uint8_t *seed, size_t cap)
{
    unsigned n = 0;
    for (size_t size; (size = vigil_fuzz_seed(n, seed, cap)) > 0; n++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/seed-%u", dir, n);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, seed, size) != (ssize_t)size) {
            perror(path);
            return 1;
        }
        close(fd);
    }
    printf("%u seeds written to %s\n", n, dir);
    return n ? 0 : 1;
}

int main(int argc, char **argv)
{
    unsigned iterations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
    enum { CAP = 1 << 16 };
    static uint8_t seed[CAP], buf[CAP + 256];
    if (argc > 2 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2], seed, CAP);
    unsigned nseeds = 0;
    unsigned runs = 0;
    while (vigil_fuzz_seed(nseeds, seed, CAP) > 0)
        nseeds++;
    if (nseeds == 0) {
        fprintf(stderr, "harness has no seeds\n");
        return 1;
    }
    for (unsigned i = 0; i < iterations; i++) {
        size_t n = vigil_fuzz_seed(i % nseeds, seed, CAP);
        memcpy(buf, seed, n);
        if (i >= nseeds) {
            unsigned edits = 1 + (unsigned)(rnd() % 8);
            for (unsigned e = 0; e < edits; e++) {
                size_t at = n ? (size_t)(rnd() % n) : 0;
                switch (rnd() % 6) {
                case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
                case 1: buf[at] = (uint8_t)rnd(); break;
                case 2: if (at + 4 <= n) memset(buf + at, 0xff, 4); break;
                case 3: if (at + 8 <= n) { uint64_t v = rnd(); memcpy(buf + at, &v, 8); } break;
                case 4: n = at; break;                                  /* truncate */
                case 5: if (n + 64 <= sizeof(buf)) { memset(buf + n, (int)(rnd() & 0xff), 64); n += 64; } break;
                }
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    printf("%u passed, 0 failed\n", runs);
    return 0;
}
