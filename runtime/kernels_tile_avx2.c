/* AVX2 register-tiled batched matvec for F32/F16/BF16 and Q8_0/Q4_0 weights
 * (kernels_tile.h).
 *
 * dot_float in kernels_avx2.c sums a row in four 8-lane accumulators: a_j gets
 * elements [32c + 8j, 32c + 8j + 8) for c = 0, 1, ... in order, then a_0 the
 * remaining 8-element steps and the zero-padded tail, and the result is
 * hsum((a0 + a1) + (a2 + a3)). As in kernels_tile_avx512.c the tile walks one
 * accumulator lane group at a time over a block of the row, with the R x T
 * partial sums in registers, so every (row, vector) pair sees dot_float's FMAs
 * in dot_float's order. */
#if defined(__x86_64__)
#include "kernels_avx2.h"
#include "kernels_tile.h"

#include "cli.h"

#ifndef RM
#define RM 3              /* rows per tile */
#endif
#ifndef TM
#define TM 4              /* vectors per tile */
#endif
#ifndef KB
#define KB 512            /* elements per block of the k loop (a multiple of 32) */
#endif
#define PANEL (256 * 1024) /* bytes of weight rows kept in L2 while every vector passes */

/* acc[r][t] += w_r[i..i+8) * x_t[i..i+8) for i = i0, i0 + step, ... < i1. */
TI void run(int k, int R, int Tn, const void *const *w, const float *const *x, int i0, int i1, int step,
            __m256 acc[RM][TM])
{
    __m256 a[RM][TM];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) a[r][t] = acc[r][t];
    for (int i = i0; i < i1; i += step) {
        __m256 wv[RM];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) wv[r] = load8(k, w[r], i);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) {
            __m256 xv = _mm256_loadu_ps(x[t] + i);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) a[r][t] = _mm256_fmadd_ps(wv[r], xv, a[r][t]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = a[r][t];
}

/* y[t][r] = dot_float(k, w[r], x[t], n) for r < R, t < Tn. */
TI void tile(int k, int R, int Tn, const void *const *w, const float *const *x, int n, float *const *y)
{
    __m256 acc[4][RM][TM];
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            _Pragma("GCC unroll 4")
            for (int t = 0; t < Tn; t++) acc[j][r][t] = _mm256_setzero_ps();
    int n32 = n / 32 * 32, i = n32;
    for (int kb = 0; kb < n32; kb += KB) {
        int ke = n32 - kb < KB ? n32 : kb + KB;
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++) run(k, R, Tn, w, x, kb + 8 * j, ke, 32, acc[j]);
    }
    if (n - i >= 8) {
        run(k, R, Tn, w, x, i, n - 7, 8, acc[0]);
        i += (n - i) / 8 * 8;
    }
    if (i < n) {
        float wb[RM][8], xb[TM][8];
        const void *wt[RM];
        const float *xt[TM];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) wt[r] = pad_tail(k, w[r], i, n - i, wb[r]);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) {
            memset(xb[t], 0, sizeof xb[t]);
            memcpy(xb[t], x[t] + i, (size_t)(n - i) * sizeof(float));
            xt[t] = xb[t];
        }
        run(k, R, Tn, wt, xt, 0, 1, 8, acc[0]);
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++)
            y[t][r] = hsum(_mm256_add_ps(_mm256_add_ps(acc[0][r][t], acc[1][r][t]),
                                         _mm256_add_ps(acc[2][r][t], acc[3][r][t])));
}

#include "kernels_tile_driver.h"


/* ---- Q8_0 / Q4_0 weights x Q8_0 activations ----
 *
 * kernels_avx2.c's dot_q8_0 and dots_q4_0, tiled: every (row, vector) pair
 * gets the same integer block sums, converts, scale products and FMAs into
 * the same accumulator in the same order, and the same hsum; each weight
 * block (Q8_0: |w|; Q4_0: the nibbles and scales of 8 blocks) is loaded and
 * unpacked once per row for all the tile's vectors. arrange_q4 and the
 * helpers come from kernels_avx2.h. */

#define TQ T

#define RQ 4              /* the most rows and vectors a quantized tile holds */
#define TQN 8
#ifndef R8
#define R8 2              /* Q8_0 tile: rows x vectors */
#endif
#ifndef T8
#define T8 4
#endif
#ifndef R4
#define R4 1              /* Q4_0 tile: rows x vectors */
#endif
#ifndef T4
#define T4 4
#endif
_Static_assert(R8 <= RQ && R4 <= RQ && T8 <= TQN && T4 <= TQN, "quantized tile too large");

/* Q8_0: the activation blocks themselves (copied, so the loops share one shape). */
TI void q8_arrange(const block_q8_0 *x, int nb, block_q8_0 *o) { memcpy(o, x, sizeof *o * (size_t)nb); }

/* dot_q_rows / mul_sum_i8 for R rows x Tn vectors: one accumulator, blocks in order. */
TI void q8_tile(int R, int Tn, const char *const *w, const block_q8_0 *const *x, int nb, float *const *y)
{
    __m256 acc[RQ][TQN];
    const __m256i ones = _mm256_set1_epi16(1);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) {
            const block_q8_0 *wb = (const block_q8_0 *)w[r] + b;
            __m256i wv = _mm256_loadu_si256((const __m256i *)wb->qs), aw = _mm256_sign_epi8(wv, wv);
            float dw = _cvtsh_ss(wb->d);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < Tn; t++) {
                __m256i xv = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
                __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv));
                __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * _cvtsh_ss(x[t][b].d)), p, acc[r][t]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) y[t][r] = hsum(acc[r][t]);
}

/* kernels_avx2.c's q4_chunk for R rows (8 whole blocks at wq[r]) x Tn vectors. */
TI void q4_chunk_tile(int R, int Tn, const block_q4_0 *const *wq, const xq4 *const *xc, int c, __m256 acc[RQ][TQN])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++) {
        __m256i lo[4], hi[4];
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu2_m128i((const __m128i *)wq[r][2 * p + 1].qs, (const __m128i *)wq[r][2 * p].qs);
            lo[p] = _mm256_and_si256(v, m4);
            hi[p] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        const block_q4_0 *q = wq[r];
        __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)q[0].d, (short)q[2].d, (short)q[4].d, (short)q[6].d,
                                                   (short)q[1].d, (short)q[3].d, (short)q[5].d, (short)q[7].d));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) {
            const xq4 *x = xc[t] + c;
            __m256i P[4];
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++) {
                __m256i d16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[p], x->lo[p]), _mm256_maddubs_epi16(hi[p], x->hi[p]));
                P[p] = _mm256_madd_epi16(d16, ones);
            }
            __m256i A = _mm256_madd_epi16(_mm256_packs_epi32(P[0], P[1]), ones);
            __m256i B = _mm256_madd_epi16(_mm256_packs_epi32(P[2], P[3]), ones);
            __m256i C = _mm256_add_epi32(_mm256_madd_epi16(_mm256_packs_epi32(A, B), ones), x->corr);
            acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, x->d), _mm256_cvtepi32_ps(C), acc[r][t]);
        }
    }
}

/* dot_q4_rows: whole chunks in order, then the last blocks zero-padded to a chunk. */
TI void q4_tile(int R, int Tn, const char *const *w, const xq4 *const *xc, int nb, float *const *y)
{
    __m256 acc[RQ][TQN];
    const block_q4_0 *wq[RQ];
    int c = 0;
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm256_setzero_ps();
    for (; (c + 1) * Q4_CHUNK <= nb; c++) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) wq[r] = (const block_q4_0 *)w[r] + c * Q4_CHUNK;
        q4_chunk_tile(R, Tn, wq, xc, c, acc);
    }
    if (c * Q4_CHUNK < nb) {
        block_q4_0 pad[RQ][Q4_CHUNK];
        memset(pad, 0, sizeof pad);
        for (int r = 0; r < R; r++) {
            memcpy(pad[r], (const block_q4_0 *)w[r] + c * Q4_CHUNK, (size_t)(nb - c * Q4_CHUNK) * sizeof(block_q4_0));
            wq[r] = pad[r];
        }
        q4_chunk_tile(R, Tn, wq, xc, c, acc);
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) y[t][r] = hsum(acc[r][t]);
}

QGEMM(gemm_q8_0, block_q8_0, q8_arrange, q8_tile, nb, R8, T8)
QGEMM(gemm_q4_0, xq4, arrange_q4, q4_tile, (nb + Q4_CHUNK - 1) / Q4_CHUNK, R4, T4)

const hc_gemm_fn hc_tile_avx2[HC_K_COUNT] = { gemm_f32, gemm_f16, gemm_bf16, gemm_q8_0, gemm_q4_0 };
#endif
