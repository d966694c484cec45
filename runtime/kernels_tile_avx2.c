/* AVX2 register-tiled batched matvec for F32/F16/BF16 weights (kernels_tile.h).
 *
 * dot_float in kernels_avx2.c sums a row in four 8-lane accumulators: a_j gets
 * elements [32c + 8j, 32c + 8j + 8) for c = 0, 1, ... in order, then a_0 the
 * remaining 8-element steps and the zero-padded tail, and the result is
 * hsum((a0 + a1) + (a2 + a3)). As in kernels_tile_avx512.c the tile walks one
 * accumulator lane group at a time over a block of the row, with the R x T
 * partial sums in registers, so every (row, vector) pair sees dot_float's FMAs
 * in dot_float's order. */
#if defined(__x86_64__)
#include "kernels_tile.h"

#include <immintrin.h>
#include <string.h>

#define T __attribute__((target("avx2,fma,f16c")))
#define TI static inline __attribute__((always_inline, target("avx2,fma,f16c")))

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

/* As kernels_avx2.c's hsum, load8 and pad_tail. */
TI float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

TI __m256 load8(int k, const void *p, int i)
{
    if (k == HC_K_F32) return _mm256_loadu_ps((const float *)p + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (k == HC_K_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

TI const void *pad_tail(int k, const void *row, int i, int m, float buf[8])
{
    size_t es = k == HC_K_F32 ? 4 : 2;
    memset(buf, 0, 8 * sizeof(float));
    memcpy(buf, (const char *)row + (size_t)i * es, (size_t)m * es);
    return buf;
}

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
                const void *w[RM];
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

const hc_gemm_fn hc_tile_avx2[HC_K_BF16 + 1] = { gemm_f32, gemm_f16, gemm_bf16 };
#endif
