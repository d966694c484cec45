/* AVX-512 (F/BW/VL/DQ + VNNI) kernels: 16 floats per register, two Q8_0
 * blocks per register, Q4_0 16 blocks per step reduced to one int32 per block,
 * masked loads for the tails. Selected at run time by
 * kernels.c; CPUs with AVX-512 but no VNNI (Skylake-SP) run the AVX2 kernels. */
#if defined(__x86_64__)
#include "kernels_avx512.h"

#include "cli.h"

#define T __attribute__((target(HC_AVX512_VNNI)))
#define TI static inline __attribute__((always_inline, target(HC_AVX512_VNNI)))

/* Software prefetch distance (bytes ahead in the row being read). The B = 1
 * loops read one ascending stream per thread; without it the hardware
 * prefetcher left Q4_0 at 11 GB/s from DRAM (24 with it), F32 at 29 (34). */
#define PF_FLOAT 2048
#define PF_Q 4096

/* ---- F32 / F16 / BF16: one body, specialised by the constant k when inlined ---- */

TI __mmask16 tail_mask(int m) { return (__mmask16)((1u << m) - 1); }

TI float dot_float(int k, const void *row, const float *x, int n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const __mmask16 all = 0xffff;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        _mm_prefetch((const char *)row + (k == HC_K_F32 ? 4 : 2) * (size_t)i + PF_FLOAT, _MM_HINT_T0);
        if (k == HC_K_F32) _mm_prefetch((const char *)row + 4 * (size_t)i + 64 + PF_FLOAT, _MM_HINT_T0);
        a0 = _mm512_fmadd_ps(load16(k, row, i, all), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(load16(k, row, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(load16(k, row, i + 32, all), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(load16(k, row, i + 48, all), _mm512_loadu_ps(x + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load16(k, row, i, all), _mm512_loadu_ps(x + i), a0);
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        a0 = _mm512_fmadd_ps(load16(k, row, i, m), _mm512_maskz_loadu_ps(m, x + i), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

TI void axpy_float(int k, const void *row, int n, float a, float *y)
{
    __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, load16(k, row, i, m), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

HC_FLOAT_KERNELS

/* ---- Q8_0 against Q8_0 activations: two blocks per register, up to
 * HC_DOT_ROWS rows per pass over the activation ---- */

/* 64 signed bytes of w times 64 of x -> 16 int32 partial sums as floats:
 * |w| (unsigned, so -128 too) times x with w's sign, summed by vpdpbusd. */
TI __m512 mul_sum_i8(__m512i w, __m512i x)
{
    __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), sx));
}

#define XPAIRS_STACK 256   /* rows of up to 16384 elements arrange on the stack */

/* acc[r] += dot of blocks b and, if two (see load_pair), b+1 of rows[r] with
 * the arranged pair xp. R and two are constants after inlining; each row's
 * arithmetic is the same for every R. Int32 sums: lanes 0-7 block b, 8-15 b+1. */
TI void q_pair(int R, const char *const *rows, const xpair *xp, int b, int two, __m512 *acc)
{
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const block_q8_0 *w = (const block_q8_0 *)rows[r] + b;
        _mm_prefetch((const char *)w + PF_Q, _MM_HINT_T0);
        __m512 p = mul_sum_i8(join(load32(w[0].qs), two ? load32(w[1].qs) : _mm256_setzero_si256()), xp->q);
        __m512 dw = scales(load_pair(w, two), 17);
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xp->d), p, acc[r]);
    }
}

/* Two accumulators per row (even and odd pairs) keep the FMA latency off the
 * critical path. */
TI void dot_q_rows(int R, const char *const *rows, const xpair *xp, int nb, float *y)
{
    __m512 acc[2 * HC_DOT_ROWS];
    int b = 0;
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = acc[HC_DOT_ROWS + r] = _mm512_setzero_ps();
    for (; b + 6 <= nb; b += 4) {
        q_pair(R, rows, xp + b / 2, b, 2, acc);
        q_pair(R, rows, xp + b / 2 + 1, b + 2, 2, acc + HC_DOT_ROWS);
    }
    if (b + 4 <= nb) { q_pair(R, rows, xp + b / 2, b, 2, acc); b += 2; }
    if (b + 2 <= nb) { q_pair(R, rows, xp + b / 2, b, 1, acc + (b / 2 % 2) * HC_DOT_ROWS); b += 2; }
    if (b < nb) q_pair(R, rows, xp + b / 2, b, 0, acc + (b / 2 % 2) * HC_DOT_ROWS);
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], acc[HC_DOT_ROWS + r]));
}

#define Q8_PAIRS(nb) (((nb) + 1) / 2)
HC_DOTS_ROWS(dots_q8_0, xpair, arrange, Q8_PAIRS, XPAIRS_STACK, 64, dot_q_rows)

/* ---- Q4_0 against Q8_0 activations: 16 blocks per step, summed in integers
 * to one int32 per block, so one convert and one FMA cover 16 blocks ---- */

/* acc[r] += the dot of the 16 blocks at byte off of rows[r] with chunk xc.
 * tail: rem bytes of the row are left from off (see chunk_line). */
TI void q4_chunk(int R, const char *const *rows, const xq4 *xc, size_t off, int tail, long rem, __m512 *acc)
{
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const char *p = rows[r] + off;
        __m512i Z[5], lo[4], hi[4];
        __m512 dw;
        if (!tail)
            for (int i = 0; i < 5; i++) _mm_prefetch(p + PF_Q + 64 * i, _MM_HINT_T0);
        #pragma GCC unroll 5
        for (int i = 0; i < 5; i++) Z[i] = chunk_line(p, i, tail, rem);
        q4_unpack(Z, lo, hi, &dw);
        acc[r] = q4_fma(lo, hi, dw, xc, acc[r]);
    }
}

TI void dot_q4_rows(int R, const char *const *rows, const xq4 *xc, int nb, float *y)
{
    __m512 acc[HC_DOT_ROWS];
    long rb = (long)nb * 18;
    int c = 0, nc = (nb + Q4_CHUNK - 1) / Q4_CHUNK;
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (; (long)(c + 1) * Q4_CHUNK_BYTES + 32 <= rb; c++)
        q4_chunk(R, rows, xc + c, (size_t)c * Q4_CHUNK_BYTES, 0, 0, acc);
    for (; c < nc; c++)
        q4_chunk(R, rows, xc + c, (size_t)c * Q4_CHUNK_BYTES, 1, rb - (long)c * Q4_CHUNK_BYTES, acc);
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = _mm512_reduce_add_ps(acc[r]);
}

#define XQ4_STACK 64       /* rows of up to 32768 elements arrange on the stack */

#define Q4_CHUNKS(nb) (((nb) + Q4_CHUNK - 1) / Q4_CHUNK)
HC_DOTS_ROWS(dots_q4_0, xq4, arrange_q4, Q4_CHUNKS, XQ4_STACK, 64, dot_q4_rows)

/* The dot entries: the same arithmetic, through the row loops (rows are explicit pointers). */
T static void dot_q8_0(const void *const *rows, int nr, const void *act, int n, float *y)
{
    for (int i = 0; i < nr; i++) dots_q8_0(rows[i], 0, NULL, 0, 1, 1, act, n, y + i);
}

T static void dot_q4_0(const void *const *rows, int nr, const void *act, int n, float *y)
{
    for (int i = 0; i < nr; i++) dots_q4_0(rows[i], 0, NULL, 0, 1, 1, act, n, y + i);
}

/* y[0..32) += a * (q * d): q*d is exact in float, then one FMA. */
TI void axpy_q32(__m256i q, float d, float a, float *y)
{
    __m512 vd = _mm512_set1_ps(d), va = _mm512_set1_ps(a);
    __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    __m512 v1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
    _mm512_storeu_ps(y, _mm512_fmadd_ps(va, _mm512_mul_ps(v0, vd), _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(va, _mm512_mul_ps(v1, vd), _mm512_loadu_ps(y + 16)));
}

T static void axpy_q8_0(const void *row, int n, float a, float *y)
{
    const block_q8_0 *w = row;
    for (int b = 0; b < n / QK8_0; b++) axpy_q32(load32(w[b].qs), _cvtsh_ss(w[b].d), a, y + b * QK8_0);
}

T static void axpy_q4_0(const void *row, int n, float a, float *y)
{
    const block_q4_0 *w = row;
    for (int b = 0; b < n / QK4_0; b++) {
        __m128i t = _mm_loadu_si128((const __m128i *)w[b].qs);
        __m256i q = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
        q = _mm256_sub_epi8(_mm256_and_si256(q, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
        axpy_q32(q, _cvtsh_ss(w[b].d), a, y + b * QK4_0);
    }
}

/* roundf (half away from zero) for |v| < 2^23: truncate, then step away from
 * zero where the dropped fraction (exact) is >= 0.5. */
TI __m512i roundf_epi32(__m512 v)
{
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 step = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(_mm512_set1_ps(-0.0f), v));
    return _mm512_cvtps_epi32(_mm512_mask_add_ps(t, up, t, step));
}

/* quantize_row_q8_0_ref, vectorised, with the same arithmetic for finite x. */
T static void quantize_q8(const float *x, int n, void *blocks)
{
    block_q8_0 *y = blocks;
    for (int b = 0; b < n / QK8_0; b++, x += QK8_0) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m512 vid = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)y[b].qs, _mm512_cvtsepi32_epi8(roundf_epi32(_mm512_mul_ps(v0, vid))));
        _mm_storeu_si128((__m128i *)(y[b].qs + 16), _mm512_cvtsepi32_epi8(roundf_epi32(_mm512_mul_ps(v1, vid))));
    }
}

const struct hc_isa hc_isa_avx512 = {
    .name = "avx512",
    .dot = { dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0 },
    .axpy = { axpy_f32, axpy_f16, axpy_bf16, axpy_q8_0, axpy_q4_0 },
    .quantize_q8 = quantize_q8,
    .dots = { [HC_K_Q8_0] = dots_q8_0, [HC_K_Q4_0] = dots_q4_0 },
};
#endif
