/* SPDX-License-Identifier: MIT */
/*
 * The epoch barrier's live count, vigil_barrier_live_peers: the heartbeat
 * table's live slots under the handle's grace, by the rule in barrier_internal.h
 * (live_rule, is_live). A scalar scan and an AVX2 one, chosen per handle
 * at open. The file layout is told in src/barrier.c.
 */
#include "barrier_internal.h"

/* The AVX2 live scan: x86-64 only, and not under ThreadSanitizer, which
 * would take its vector loads of atomic words for plain racing reads. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VIGIL_NO_SIMD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define VIGIL_NO_SIMD 1
#endif
#if defined(__x86_64__) && !defined(VIGIL_NO_SIMD)
#define VIGIL_BARRIER_AVX2 1
#include <immintrin.h>
#else
#define VIGIL_BARRIER_AVX2 0
#endif

/* One slot by the rule: two relaxed single-word loads and no SeqLock,
 * like vigil_hb_live_count (a count is a moment's estimate anyway). */
static inline uint32_t slot_live(struct live_rule r, const struct vigil_hb_slot *s)
{
    return is_live(r, atomic_load_explicit(&s->pid, memory_order_relaxed),
                   atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed));
}

#if VIGIL_BARRIER_AVX2
/*
 * The count of live_scan below, four slots a step. One aligned 16-byte
 * load per slot brings pid|seq and last_seen_epoch together (each aligned
 * 8-byte half of it is read atomically on x86-64, which is all the scalar
 * loop's two relaxed loads give); unpacklo/unpackhi gather the four pids
 * and the four last_seen (in an order that does not matter to a count).
 * AVX2 has no unsigned 64-bit compare, so x > k is done signed on both
 * sides biased by 2^63. A true lane is all ones: subtracting it counts
 * one.
 */
__attribute__((target("avx2"))) static uint32_t live_scan_avx2(const vigil_barrier *b, struct live_rule r)
{
    const struct vigil_hb_slot *s = b->hb->slots;
    const __m256i bias = _mm256_set1_epi64x(INT64_MIN);
    const __m256i base = _mm256_set1_epi64x((long long)r.base);
    const __m256i k = _mm256_xor_si256(_mm256_set1_epi64x((long long)r.k), bias);
    const __m256i pid_mask = _mm256_set1_epi64x(0xffffffffLL);
    __m256i acc = _mm256_setzero_si256();
    uint32_t n = b->capacity, i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)&s[i])),
                                            _mm_load_si128((const __m128i *)&s[i + 1]), 1);
        __m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i *)&s[i + 2])),
                                            _mm_load_si128((const __m128i *)&s[i + 3]), 1);
        __m256i pids = _mm256_and_si256(_mm256_unpacklo_epi64(a, c), pid_mask);
        __m256i seen = _mm256_unpackhi_epi64(a, c);
        __m256i vacant = _mm256_cmpeq_epi64(pids, _mm256_setzero_si256());
        __m256i x = _mm256_xor_si256(_mm256_sub_epi64(base, seen), bias);
        acc = _mm256_sub_epi64(acc, _mm256_andnot_si256(vacant, _mm256_cmpgt_epi64(x, k)));
    }
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    uint32_t c0 = (uint32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
    for (; i < n; i++)
        c0 += slot_live(r, &s[i]);
    return c0;
}
#endif

/* The heartbeat table's live count with this handle's grace, slot_live's
 * loads and rule with two accumulators so the loads of successive slots
 * overlap; four slots a step with AVX2 where the processor has it. */
static uint32_t live_scan(const vigil_barrier *b)
{
    const struct vigil_hb_slot *s = b->hb->slots;
    struct live_rule r = live_rule(b);
#if VIGIL_BARRIER_AVX2
    if (b->avx2 && !r.any)
        return live_scan_avx2(b, r);
#endif
    uint32_t n = b->capacity, c0 = 0, c1 = 0, i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t e0 = atomic_load_explicit(&s[i].last_seen_epoch, memory_order_relaxed);
        uint64_t e1 = atomic_load_explicit(&s[i + 1].last_seen_epoch, memory_order_relaxed);
        uint32_t p0 = atomic_load_explicit(&s[i].pid, memory_order_relaxed);
        uint32_t p1 = atomic_load_explicit(&s[i + 1].pid, memory_order_relaxed);
        c0 += is_live(r, p0, e0);
        c1 += is_live(r, p1, e1);
    }
    if (i < n)
        c0 += slot_live(r, &s[i]);
    return c0 + c1;
}

uint32_t vigil_barrier_live_peers(const vigil_barrier *b)
{
    return b ? live_scan(b) : 0;
}

bool vigil_barrier_use_avx2(void)
{
#if VIGIL_BARRIER_AVX2
    return vigil_cpu_has_avx2();
#else
    return false;
#endif
}
