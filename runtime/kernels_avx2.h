/* Internal to the AVX2 kernels: the helpers kernels_avx2.c and
 * kernels_tile_avx2.c share, so the tiled kernels run the single-row arithmetic. */
#ifndef HC_KERNELS_AVX2_H
#define HC_KERNELS_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "ggml_types.h"
#include "kernels_impl.h"

#define T __attribute__((target("avx2,fma,f16c")))
#define TI static inline __attribute__((always_inline, target("avx2,fma,f16c")))

TI float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* ---- F32 / F16 / BF16 loads ---- */

TI __m256 load8(int k, const void *p, int i)
{
    if (k == HC_K_F32) return _mm256_loadu_ps((const float *)p + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (k == HC_K_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The last n % 8 elements go through zero-padded copies, so every element
 * takes the same vector path. */
TI const void *pad_tail(int k, const void *row, int i, int m, float buf[8])
{
    size_t es = k == HC_K_F32 ? 4 : 2;
    memset(buf, 0, 8 * sizeof(float));
    memcpy(buf, (const char *)row + (size_t)i * es, (size_t)m * es);
    return buf;
}

/* ---- Q4_0 against Q8_0 activations ---- */

/* The Q8_0 activation rearranged for 8 blocks of a row (a chunk, 144 bytes of
 * Q4_0), as 4 pairs of blocks: lo[p] and hi[p] are the activation bytes that
 * meet the low and high nibbles of blocks 2p, 2p+1 (one block per 128-bit
 * lane). After the reduction (q4_chunk) lane 4m+p holds block 2p+m: corr is
 * that block's -8·Σx and d its activation scale, in the same order. */
typedef struct {
    __m256i lo[4], hi[4];
    __m256i corr;
    __m256 d;
} xq4;

#define Q4_CHUNK 8

T static inline void arrange_q4(const block_q8_0 *x, int nb, xq4 *xc)
{
    for (int c = 0; c < (nb + Q4_CHUNK - 1) / Q4_CHUNK; c++) {
        int8_t lo[4][32] = {{0}}, hi[4][32] = {{0}};
        int32_t corr[8] = {0};
        float d[8] = {0};
        for (int p = 0; p < 4; p++)
            for (int m = 0; m < 2; m++) {
                int b = c * Q4_CHUNK + 2 * p + m, s = 0;
                if (b >= nb) continue;
                memcpy(lo[p] + 16 * m, x[b].qs, 16);
                memcpy(hi[p] + 16 * m, x[b].qs + 16, 16);
                for (int j = 0; j < QK8_0; j++) s += x[b].qs[j];
                corr[4 * m + p] = -8 * s;
                d[4 * m + p] = _cvtsh_ss(x[b].d);
            }
        for (int p = 0; p < 4; p++) {
            xc[c].lo[p] = _mm256_loadu_si256((const __m256i *)lo[p]);
            xc[c].hi[p] = _mm256_loadu_si256((const __m256i *)hi[p]);
        }
        xc[c].corr = _mm256_loadu_si256((const __m256i *)corr);
        xc[c].d = _mm256_loadu_ps(d);
    }
}

#endif
