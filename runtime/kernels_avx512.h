/* Internal to the AVX-512 kernels: the helpers kernels_avx512.c and
 * kernels_tile_avx512.c share, so the tiled kernels run the single-row arithmetic. */
#ifndef HC_KERNELS_AVX512_H
#define HC_KERNELS_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "ggml_types.h"
#include "kernels_impl.h"

/* The float kernels need no VNNI; the quantized ones do. */
#define HC_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define HC_AVX512_VNNI HC_AVX512 ",avx512vnni"
#define TIB static inline __attribute__((always_inline, target(HC_AVX512)))
#define TQI static inline __attribute__((always_inline, target(HC_AVX512_VNNI)))
#define TQS static inline __attribute__((target(HC_AVX512_VNNI)))

/* Elements [i, i+16) masked by m (lanes outside m read nothing and are zero). */
TIB __m512 load16(int k, const void *p, int i, __mmask16 m)
{
    if (k == HC_K_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (k == HC_K_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* ---- Q8_0 ---- */

TQI __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

TQI __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

#define W2(a, b) ((a) | (b) << 16)   /* two word indices per int32: gcc lacks _mm512_setr_epi16 */

/* The first bytes of Q8_0 blocks b, b+1 of a row, as words: at least both
 * scales (words 0 and 17). two: 0 only
 * block b is there, 1 both, 2 both and 64 bytes of the row left, so a plain
 * load (masked loads that miss the cache are slow and train no prefetcher). */
TQI __m512i load_pair(const void *p, int two)
{
    return two == 2 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(two ? 0x3ffff : 1, p);
}

/* The fp16 scales at words 0 and w1 of v, as floats in lanes 0-7 and 8-15. */
TQI __m512 scales(__m512i v, int w1)
{
    __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, W2(w1, w1), W2(w1, w1), W2(w1, w1), W2(w1, w1), 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, v)));
}

/* The Q8_0 activation of a Q8_0 matvec, rearranged once per row loop so the
 * inner loop only loads it: per pair of blocks the 64 quant bytes and the
 * scales as 16 floats (8 lanes per block). */
typedef struct {
    __m512i q;
    __m512 d;
} xpair;

TQI void arrange(const block_q8_0 *x, int nb, xpair *xp)
{
    for (int b = 0; b < nb; b += 2) {
        int two = b + 1 < nb;
        xpair *o = xp + b / 2;
        o->q = join(load32(x[b].qs), two ? load32(x[b + 1].qs) : _mm256_setzero_si256());
        o->d = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(x[b].d)), _mm256_set1_ps(two ? _cvtsh_ss(x[b + 1].d) : 0), 1);
    }
}

/* ---- Q4_0 ---- */

/* The Q8_0 activation rearranged for 16 blocks of a row (a "chunk", 288 bytes
 * of Q4_0): the chunk is 4 groups of 4 blocks; group g's 64 weight nibble
 * bytes are gathered as [qs(4g) qs(4g+1) qs(4g+2) qs(4g+3)], so lo[g] and hi[g]
 * hold the activation bytes that meet their low and high nibbles. After the
 * integer reduction (q4_chunk) lane 4m+g holds block 4g+m: corr is that
 * block's -8·Σx and d its activation scale, in the same order. */
typedef struct {
    __m512i lo[4], hi[4];
    __m512i corr;
    __m512 d;
} xq4;

#define Q4_CHUNK 16                       /* blocks per chunk */
#define Q4_CHUNK_BYTES (Q4_CHUNK * 18)    /* sizeof(block_q4_0) == 18 */

TQS void arrange_q4(const block_q8_0 *x, int nb, xq4 *xc)
{
    for (int c = 0; c < (nb + Q4_CHUNK - 1) / Q4_CHUNK; c++) {
        int8_t lo[4][64] = {{0}}, hi[4][64] = {{0}};
        int32_t corr[16] = {0};
        float d[16] = {0};
        for (int g = 0; g < 4; g++)
            for (int m = 0; m < 4; m++) {
                int b = c * Q4_CHUNK + 4 * g + m, s = 0;
                if (b >= nb) continue;
                memcpy(lo[g] + 16 * m, x[b].qs, 16);
                memcpy(hi[g] + 16 * m, x[b].qs + 16, 16);
                for (int j = 0; j < QK8_0; j++) s += x[b].qs[j];
                corr[4 * m + g] = -8 * s;
                d[4 * m + g] = _cvtsh_ss(x[b].d);
            }
        for (int g = 0; g < 4; g++) {
            xc[c].lo[g] = _mm512_loadu_si512(lo[g]);
            xc[c].hi[g] = _mm512_loadu_si512(hi[g]);
        }
        xc[c].corr = _mm512_loadu_si512(corr);
        xc[c].d = _mm512_loadu_ps(d);
    }
}

/* Bytes [64i, 64i + 64) of a chunk at p, i < 5 (a full chunk reads 32 bytes
 * past its end); tail: only the rem bytes the row has left from p, with
 * masked loads. */
TQI __m512i chunk_line(const char *p, int i, int tail, long rem)
{
    if (!tail) return _mm512_loadu_si512(p + 64 * i);
    long a = rem - 64 * i;
    return _mm512_maskz_loadu_epi8(a >= 64 ? ~0ULL : a <= 0 ? 0 : (1ULL << a) - 1, p + 64 * i);
}

/* One row's 16-block chunk (its 5 lines Z): the weight nibbles of group g in
 * lo[g] / hi[g], gathered to meet xq4's lo[g] / hi[g], and the 16 block scales
 * as floats in xq4's lane order (lane 4m+g = block 4g+m). */
TQI void q4_unpack(const __m512i Z[5], __m512i lo[4], __m512i hi[4], __m512 *dw)
{
    /* group g (bytes [72g, 72g + 72), word 4g of line g): its nibble bytes are
     * words 4g + 9m + 1 .. 4g + 9m + 8 of lines g, g + 1 */
    const __m512i qidx = _mm512_setr_epi32(W2(1, 2), W2(3, 4), W2(5, 6), W2(7, 8), W2(10, 11), W2(12, 13),
                                           W2(14, 15), W2(16, 17), W2(19, 20), W2(21, 22), W2(23, 24),
                                           W2(25, 26), W2(28, 29), W2(30, 31), W2(32, 33), W2(34, 35));
    /* block j's scale is word 9j of the chunk; block 4g+m goes to word 4m+g:
     * blocks 0-7 from lines 0, 1, blocks 8-14 from lines 2, 3, block 15 from line 4 */
    const __m512i s01 = _mm512_setr_epi32(W2(0, 36), W2(0, 36), W2(9, 45), W2(0, 36), W2(18, 54), W2(0, 36),
                                          W2(27, 63), W2(0, 36), 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i s23 = _mm512_setr_epi32(0, W2(8, 44), 0, W2(17, 53), 0, W2(26, 62), 0, W2(35, 7),
                                          0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i v = _mm512_permutex2var_epi16(Z[g], _mm512_add_epi16(qidx, _mm512_set1_epi16((short)(4 * g))), Z[g + 1]);
        lo[g] = _mm512_and_si512(v, m4);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    __m512i s23v = _mm512_mask_permutexvar_epi16(_mm512_permutex2var_epi16(Z[2], s23, Z[3]), 0x8000, s23, Z[4]);
    __m512i s = _mm512_mask_blend_epi16(0xcccc, _mm512_permutex2var_epi16(Z[0], s01, Z[1]), s23v);
    *dw = _mm512_cvtph_ps(_mm512_castsi512_si256(s));
}

/* acc + the dot of an unpacked chunk with activation chunk x: the 16 block
 * sums in integers, then one convert and one FMA. */
TQI __m512 q4_fma(const __m512i lo[4], const __m512i hi[4], __m512 dw, const xq4 *x, __m512 acc)
{
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i D[4];
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++)
        D[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[g], x->lo[g]), hi[g], x->hi[g]);
    /* |D| <= 8·15·128, so the int16 packs are exact; two levels of pairwise
     * sums leave lane 4m+g = block 4g+m, plus its -8·Σx */
    __m512i A = _mm512_madd_epi16(_mm512_packs_epi32(D[0], D[1]), ones);
    __m512i B = _mm512_madd_epi16(_mm512_packs_epi32(D[2], D[3]), ones);
    __m512i C = _mm512_dpwssd_epi32(x->corr, _mm512_packs_epi32(A, B), ones);
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, x->d), _mm512_cvtepi32_ps(C), acc);
}

#undef W2

#endif
