/* AVX-512 register-tiled batched matvec for F32/F16/BF16 and Q8_0/Q4_0 weights
 * (kernels_tile.h).
 *
 * dot_float in kernels_avx512.c sums a row in four 16-lane accumulators:
 * a_j gets elements [64c + 16j, 64c + 16j + 16) for c = 0, 1, ... in order,
 * then a_0 the remaining 16-element steps and the masked tail, and the result
 * is reduce_add((a0 + a1) + (a2 + a3)). Holding four accumulators for each of
 * R x T (row, vector) pairs would not fit in 32 registers, so the tile walks
 * one accumulator lane group j at a time over a block of KB elements (the
 * chains are independent), keeps the R x T partial sums in registers and parks
 * them in memory between groups and blocks: every pair sees dot_float's FMAs in
 * dot_float's order, only interleaved with the other pairs. */
#if defined(__x86_64__)
#include "kernels_avx512.h"
#include "kernels_tile.h"

#include "cli.h"

#define T __attribute__((target(HC_AVX512)))
#define TI static inline __attribute__((always_inline, target(HC_AVX512)))

#ifndef RM
#define RM 4              /* rows per tile */
#endif
#ifndef TM
#define TM 4              /* vectors per tile */
#endif
#ifndef KB
#define KB 512            /* elements per block of the k loop (a multiple of 64) */
#endif
#define PANEL (256 * 1024) /* bytes of weight rows kept in L2 while every vector passes */

/* acc[r][t] += w_r[i..i+16) * x_t[i..i+16) for i = i0, i0 + step, ... < i1 (masked by m). */
TI void run(int k, int R, int Tn, const void *const *w, const float *const *x, int i0, int i1, int step,
            __mmask16 m, __m512 acc[RM][TM])
{
    __m512 a[RM][TM];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) a[r][t] = acc[r][t];
    for (int i = i0; i < i1; i += step) {
        __m512 wv[RM];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) wv[r] = load16(k, w[r], i, m);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + i);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]);
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
    __m512 acc[4][RM][TM];
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            _Pragma("GCC unroll 4")
            for (int t = 0; t < Tn; t++) acc[j][r][t] = _mm512_setzero_ps();
    int n64 = n / 64 * 64, i = n64;
    for (int kb = 0; kb < n64; kb += KB) {
        int ke = n64 - kb < KB ? n64 : kb + KB;
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++) run(k, R, Tn, w, x, kb + 16 * j, ke, 64, 0xffff, acc[j]);
    }
    if (n - i >= 16) {
        run(k, R, Tn, w, x, i, n - 15, 16, 0xffff, acc[0]);
        i += (n - i) / 16 * 16;
    }
    if (i < n) run(k, R, Tn, w, x, i, i + 1, 16, (__mmask16)((1u << (n - i)) - 1), acc[0]);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++)
            y[t][r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0][r][t], acc[1][r][t]),
                                                         _mm512_add_ps(acc[2][r][t], acc[3][r][t])));
}

#include "kernels_tile_driver.h"


/* ---- Q8_0 / Q4_0 weights x Q8_0 activations (VNNI) ----
 *
 * kernels_avx512.c's dots_q8_0 and dots_q4_0, tiled: the activations are
 * arranged exactly as there (once per call for all B vectors), and every
 * (row, vector) pair goes through the same integer sums, the same converts,
 * scale products and FMAs into the same accumulators in the same order, and
 * the same final reduction. Each weight chunk is loaded and unpacked once per
 * row for the tile's vectors; each arranged activation chunk serves its rows. The
 * shared helpers come from kernels_avx512.h. */

#define TQ __attribute__((target(HC_AVX512_VNNI)))

#define RQ 4              /* the most rows and vectors a quantized tile holds */
#define TQN 8
#ifndef R8
#define R8 4              /* Q8_0 tile: rows x vectors */
#endif
#ifndef T8
#define T8 4
#endif
#ifndef R4
#define R4 2              /* Q4_0 tile: rows x vectors */
#endif
#ifndef T4
#define T4 4
#endif
_Static_assert(R8 <= RQ && R4 <= RQ && T8 <= TQN && T4 <= TQN, "quantized tile too large");
#define KBP 16            /* Q8_0: block pairs per step of the k loop (even) */

/* acc[r][t] += pairs p = p0, p0 + 2, ... < p1 of row r with vector t (two: 1
 * a full pair, 0 the last, half pair). mul_sum_i8 of kernels_avx512.c with
 * |w| and w's sign shared by the vectors. */
TQI void q8_run(int R, int Tn, const char *const *w, const xpair *const *xp, int p0, int p1, int two,
                __m512 acc[RQ][TQN])
{
    __m512 a[RQ][TQN];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) a[r][t] = acc[r][t];
    for (int p = p0; p < p1; p += 2) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) {
            const block_q8_0 *wb = (const block_q8_0 *)w[r] + 2 * p;
            __m512i wv = join(load32(wb[0].qs), two ? load32(wb[1].qs) : _mm256_setzero_si256());
            __mmask64 neg = _mm512_movepi8_mask(wv);
            __m512i aw = _mm512_abs_epi8(wv);
            __m512 dw = scales(load_pair(wb, 2 * two), 17);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < Tn; t++) {
                __m512i xq = xp[t][p].q;
                __m512i sx = _mm512_mask_sub_epi8(xq, neg, _mm512_setzero_si512(), xq);
                __m512 s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx));
                a[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xp[t][p].d), s, a[r][t]);
            }
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = a[r][t];
}

/* dot_q_rows: pair p goes to accumulator p % 2; y = reduce(acc0 + acc1). */
TQI void q8_tile(int R, int Tn, const char *const *w, const xpair *const *xp, int nb, float *const *y)
{
    __m512 acc[2][RQ][TQN];
    _Pragma("GCC unroll 2")
    for (int j = 0; j < 2; j++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            _Pragma("GCC unroll 4")
            for (int t = 0; t < Tn; t++) acc[j][r][t] = _mm512_setzero_ps();
    int np = nb / 2;
    for (int pb = 0; pb < np; pb += KBP) {
        int pe = np - pb < KBP ? np : pb + KBP;
        q8_run(R, Tn, w, xp, pb, pe, 1, acc[0]);
        q8_run(R, Tn, w, xp, pb + 1, pe, 1, acc[1]);
    }
    if (nb % 2) q8_run(R, Tn, w, xp, np, np + 1, 0, acc[np % 2]);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) y[t][r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r][t], acc[1][r][t]));
}

/* kernels_avx512.c's q4_chunk for R rows x Tn vectors (chunk c of each vector). */
TQI void q4_chunk_tile(int R, int Tn, const char *const *w, const xq4 *const *xc, int c, int tail, long rem,
                       __m512 acc[RQ][TQN])
{
    size_t off = (size_t)c * Q4_CHUNK_BYTES;
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++) {
        const char *p = w[r] + off;
        __m512i Z[5], lo[4], hi[4];
        __m512 dw;
        _Pragma("GCC unroll 5")
        for (int i = 0; i < 5; i++) Z[i] = chunk_line(p, i, tail, rem);
        q4_unpack(Z, lo, hi, &dw);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = q4_fma(lo, hi, dw, xc[t] + c, acc[r][t]);
    }
}

/* dot_q4_rows: one accumulator, chunks in order, the last ones masked. */
TQI void q4_tile(int R, int Tn, const char *const *w, const xq4 *const *xc, int nb, float *const *y)
{
    __m512 acc[RQ][TQN];
    long rb = (long)nb * 18;
    int c = 0, nc = (nb + Q4_CHUNK - 1) / Q4_CHUNK;
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm512_setzero_ps();
    for (; (long)(c + 1) * Q4_CHUNK_BYTES + 32 <= rb; c++) q4_chunk_tile(R, Tn, w, xc, c, 0, 0, acc);
    for (; c < nc; c++) q4_chunk_tile(R, Tn, w, xc, c, 1, rb - (long)c * Q4_CHUNK_BYTES, acc);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) y[t][r] = _mm512_reduce_add_ps(acc[r][t]);
}


QGEMM(gemm_q8_0, xpair, arrange, q8_tile, (nb + 1) / 2, R8, T8)
QGEMM(gemm_q4_0, xq4, arrange_q4, q4_tile, (nb + Q4_CHUNK - 1) / Q4_CHUNK, R4, T4)

const hc_gemm_fn hc_tile_avx512[HC_K_COUNT] = { gemm_f32, gemm_f16, gemm_bf16, gemm_q8_0, gemm_q4_0 };
#endif
