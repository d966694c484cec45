/* AVX-512 register-tiled batched matvec for F32/F16/BF16 weights (kernels_tile.h).
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
#include "kernels_tile.h"

#include <immintrin.h>

#define TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define T __attribute__((target(TARGET)))
#define TI static inline __attribute__((always_inline, target(TARGET)))

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

/* Elements [i, i+16) masked by m, as kernels_avx512.c's load16. */
TI __m512 load16(int k, const void *p, int i, __mmask16 m)
{
    if (k == HC_K_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (k == HC_K_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* acc[r][t] += w_r[i..i+16) * x_t[i..i+16) for i = i0, i0 + step, ... < i1 (masked by m). */
TI void run(int k, int R, int Tn, const char *const *w, const float *const *x, int i0, int i1, int step,
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
TI void tile(int k, int R, int Tn, const char *const *w, const float *const *x, int n, float *const *y)
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

#define TILE(R_, T_) case (R_) * 16 + (T_): if ((R_) <= RM && (T_) <= TM) tile(k, (R_) <= RM ? (R_) : 1, (T_) <= TM ? (T_) : 1, w, x, n, yp); break
#define TILES(R_) TILE(R_, 1); TILE(R_, 2); TILE(R_, 3); TILE(R_, 4); TILE(R_, 5); TILE(R_, 6); TILE(R_, 7); TILE(R_, 8)

TI void gemm(int k, const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
             size_t ys, int n)
{
    int panel = nr;
    if ((size_t)nr * rb > PANEL) panel = rb * RM >= PANEL ? RM : (int)(PANEL / rb) / RM * RM;
    for (int p0 = 0; p0 < nr; p0 += panel) {
        int p1 = nr - p0 < panel ? nr : p0 + panel;
        for (int b0 = 0; b0 < B; b0 += TM) {
            int tn = B - b0 < TM ? B - b0 : TM;
            const float *x[TM];
            for (int t = 0; t < tn; t++) x[t] = (const float *)(acts + (size_t)(b0 + t) * as);
            for (int i0 = p0; i0 < p1; i0 += RM) {
                int rn = p1 - i0 < RM ? p1 - i0 : RM;
                const char *w[RM];
                float *yp[TM];
                for (int r = 0; r < rn; r++) w[r] = W + (size_t)(r0 + i0 + r) * rb;
                for (int t = 0; t < tn; t++) yp[t] = y + (size_t)(b0 + t) * ys + i0;
                switch (rn * 16 + tn) {
                TILES(1); TILES(2); TILES(3); TILES(4); TILES(5); TILES(6); TILES(7); TILES(8);
                }
            }
        }
    }
}

T static void gemm_f32(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                       size_t ys, int n)
{ gemm(HC_K_F32, W, rb, r0, nr, acts, as, B, y, ys, n); }
T static void gemm_f16(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                       size_t ys, int n)
{ gemm(HC_K_F16, W, rb, r0, nr, acts, as, B, y, ys, n); }
T static void gemm_bf16(const char *W, size_t rb, int r0, int nr, const char *acts, size_t as, int B, float *y,
                        size_t ys, int n)
{ gemm(HC_K_BF16, W, rb, r0, nr, acts, as, B, y, ys, n); }

const hc_gemm_fn hc_tile_avx512[HC_K_BF16 + 1] = { gemm_f32, gemm_f16, gemm_bf16 };
#endif
