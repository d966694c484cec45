/* AVX2 and AVX-512 Q4_0/Q8_0 quantizers, bit-identical to quants.c's
 * references. Per 32-element block: the same fp32 operations in the same
 * order (separate multiply and add, never FMA), truncating conversions whose
 * out-of-range result (0x80000000) is the one x86 scalar code gets, and only
 * the low byte kept. A block holding a NaN goes to the reference: ggml's
 * maxima treat NaN in an order vector max instructions do not reproduce. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "quants.h"

/* The per-block scalars: Q4_0 scale from the first element of largest
 * magnitude (sign kept), as quantize_row_q4_0_ref. */
static float q4_0_max(const float *x, uint32_t eq_mask, float amax)
{
    return amax == 0.0f ? 0.0f : x[__builtin_ctz(eq_mask)];
}

static float inv_or_zero(float d)
{
    return d ? 1.0f / d : 0.0f;
}

/* ------------------------------------------------------------------ AVX2 */

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256 abs8(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

AVX2 static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

AVX2 static inline int any_nan(const __m256 v[4])
{
    __m256 u = _mm256_cmp_ps(v[0], v[0], _CMP_UNORD_Q);
    for (int i = 1; i < 4; i++)
        u = _mm256_or_ps(u, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    return _mm256_movemask_ps(u);
}

/* Low byte of each of the 32 int32 lanes, in element order. */
AVX2 static inline __m256i low_bytes(const __m256i q[4])
{
    const __m256i ff = _mm256_set1_epi32(0xff);
    const __m256i w01 = _mm256_packus_epi32(_mm256_and_si256(q[0], ff), _mm256_and_si256(q[1], ff));
    const __m256i w23 = _mm256_packus_epi32(_mm256_and_si256(q[2], ff), _mm256_and_si256(q[3], ff));
    /* packs work per 128-bit lane: put the 4-byte groups back in order */
    return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

AVX2 void quantize_row_q4_0_avx2(const float *x, block_q4_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, x += QK4_0) {
        __m256 v[4], a[4];
        for (int r = 0; r < 4; r++) {
            v[r] = _mm256_loadu_ps(x + 8 * r);
            a[r] = abs8(v[r]);
        }
        if (any_nan(v)) {
            quantize_row_q4_0_ref(x, &y[i], QK4_0);
            continue;
        }
        const float amax = hmax8(_mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3])));
        const __m256 am = _mm256_set1_ps(amax);
        uint32_t eq = 0;
        for (int r = 0; r < 4; r++)
            eq |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a[r], am, _CMP_EQ_OQ)) << (8 * r);
        const float d = q4_0_max(x, eq, amax) / -8;
        const __m256 id = _mm256_set1_ps(inv_or_zero(d));
        y[i].d = fp32_to_fp16(d);
        __m256i q[4];
        for (int r = 0; r < 4; r++)
            q[r] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[r], id), _mm256_set1_ps(8.5f)));
        const __m256i b = _mm256_min_epi8(low_bytes(q), _mm256_set1_epi8(15));
        const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
        const __m128i hi4 = _mm_and_si128(_mm_slli_epi16(hi, 4), _mm_set1_epi8((char)0xf0));
        _mm_storeu_si128((__m128i *)y[i].qs, _mm_or_si128(lo, hi4));
    }
}

/* roundf (half away from zero) of each lane: truncate, then step one away
 * from zero where the dropped fraction is >= 0.5 (v - trunc(v) is exact). */
AVX2 static inline __m256 round_away8(__m256 v)
{
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(abs8(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
    return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

AVX2 void quantize_row_q8_0_avx2(const float *x, block_q8_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0) {
        __m256 v[4];
        for (int r = 0; r < 4; r++)
            v[r] = _mm256_loadu_ps(x + 8 * r);
        if (any_nan(v)) {
            quantize_row_q8_0_ref(x, &y[i], QK8_0);
            continue;
        }
        const __m256 m = _mm256_max_ps(_mm256_max_ps(abs8(v[0]), abs8(v[1])),
                                       _mm256_max_ps(abs8(v[2]), abs8(v[3])));
        const float d = hmax8(m) / ((1 << 7) - 1);
        const __m256 id = _mm256_set1_ps(inv_or_zero(d));
        y[i].d = fp32_to_fp16(d);
        __m256i q[4];
        for (int r = 0; r < 4; r++)
            q[r] = _mm256_cvttps_epi32(round_away8(_mm256_mul_ps(v[r], id)));
        _mm256_storeu_si256((__m256i *)y[i].qs, low_bytes(q));
    }
}

__attribute__((target("avx2,f16c"))) void fp16_row_to_f32_avx2(const uint16_t *h, float *y, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
    for (; j < n; j++)
        y[j] = fp16_to_fp32(h[j]);
}

__attribute__((target("avx2,f16c"))) void fp32_row_to_f16_avx2(const float *x, uint16_t *h, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {   /* fp32_to_fp16's NaN */
            for (int i = 0; i < 8; i++) h[j + i] = fp32_to_fp16(x[j + i]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(h + j), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; j < n; j++)
        h[j] = fp32_to_fp16(x[j]);
}

/* --------------------------------------------------------------- AVX-512 */

#define AVX512 __attribute__((target("avx512f,avx512bw")))

AVX512 void quantize_row_q4_0_avx512(const float *x, block_q4_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK4_0; i++, x += QK4_0) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) {
            quantize_row_q4_0_ref(x, &y[i], QK4_0);
            continue;
        }
        const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const __m512 am = _mm512_set1_ps(amax);
        const uint32_t eq = (uint32_t)_mm512_cmp_ps_mask(a0, am, _CMP_EQ_OQ) |
                            (uint32_t)_mm512_cmp_ps_mask(a1, am, _CMP_EQ_OQ) << 16;
        const float d = q4_0_max(x, eq, amax) / -8;
        const __m512 id = _mm512_set1_ps(inv_or_zero(d)), half = _mm512_set1_ps(8.5f);
        y[i].d = fp32_to_fp16(d);
        /* vpmovdb keeps the low byte of each lane, like the scalar conversion */
        const __m128i fifteen = _mm_set1_epi8(15);
        const __m128i lo = _mm_min_epi8(_mm512_cvtepi32_epi8(
            _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v0, id), half))), fifteen);
        const __m128i hi = _mm_min_epi8(_mm512_cvtepi32_epi8(
            _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v1, id), half))), fifteen);
        const __m128i hi4 = _mm_and_si128(_mm_slli_epi16(hi, 4), _mm_set1_epi8((char)0xf0));
        _mm_storeu_si128((__m128i *)y[i].qs, _mm_or_si128(lo, hi4));
    }
}

AVX512 static inline __m512 round_away16(__m512 v)
{
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)),
                                            _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u));
    const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3f800000)));
    return _mm512_mask_add_ps(t, up, t, one);
}

AVX512 void quantize_row_q8_0_avx512(const float *x, block_q8_0 *y, int64_t k)
{
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) {
            quantize_row_q8_0_ref(x, &y[i], QK8_0);
            continue;
        }
        const float d = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)))
                        / ((1 << 7) - 1);
        const __m512 id = _mm512_set1_ps(inv_or_zero(d));
        y[i].d = fp32_to_fp16(d);
        _mm_storeu_si128((__m128i *)y[i].qs,
                         _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(round_away16(_mm512_mul_ps(v0, id)))));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16),
                         _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(round_away16(_mm512_mul_ps(v1, id)))));
    }
}

AVX512 void fp16_row_to_f32_avx512(const uint16_t *h, float *y, int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + j))));
    for (; j < n; j++)
        y[j] = fp16_to_fp32(h[j]);
}

#else
typedef int quants_x86_unused;   /* ISO C forbids an empty translation unit */
#endif
