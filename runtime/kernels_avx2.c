/* AVX2 + FMA + F16C kernels (8 floats / 32 int8 per register), selected at run
 * time by kernels.c. Q8_0 dots use ggml's sign trick: |w| (unsigned) times
 * x·sign(w) with maddubs, pairs summed to int32 with madd, one FMA per block;
 * Q4_0 sums 8 blocks to one int32 each, then one FMA for the 8 (dots_q4_0). */
#if defined(__x86_64__)
#include "kernels_avx2.h"

#include "cli.h"

/* Software prefetch distance in the Q4_0 row being read (as the AVX-512 kernels). */
#define PF_Q 4096

/* ---- F32 / F16 / BF16: one body, specialised by the constant k when inlined ---- */

TI float dot_float(int k, const void *row, const float *x, int n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load8(k, row, i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8(k, row, i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8(k, row, i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8(k, row, i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8(k, row, i), _mm256_loadu_ps(x + i), a0);
    if (i < n) {
        float wb[8], xb[8] = {0};
        memcpy(xb, x + i, (size_t)(n - i) * sizeof(float));
        a0 = _mm256_fmadd_ps(load8(k, pad_tail(k, row, i, n - i, wb), 0), _mm256_loadu_ps(xb), a0);
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

TI void axpy_float(int k, const void *row, int n, float a, float *y)
{
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8(k, row, i), _mm256_loadu_ps(y + i)));
    if (i < n) {
        float wb[8], yb[8] = {0};
        memcpy(yb, y + i, (size_t)(n - i) * sizeof(float));
        _mm256_storeu_ps(yb, _mm256_fmadd_ps(va, load8(k, pad_tail(k, row, i, n - i, wb), 0), _mm256_loadu_ps(yb)));
        memcpy(y + i, yb, (size_t)(n - i) * sizeof(float));
    }
}

HC_FLOAT_KERNELS

/* ---- Q8_0 / Q4_0 against Q8_0 activations, up to HC_DOT_ROWS rows per
 * pass over the activation ---- */

/* 32 signed bytes of w times 32 of x, as 8 int32 partial sums converted to float.
 * Exact: |w| <= 128 and |x| <= 127 keep maddubs' int16 pairs from saturating. */
TI __m256 mul_sum_i8(__m256i w, __m256i x)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* 16 bytes of nibbles -> 32 values 0..15 in element order (low nibbles first). */
TI __m256i nibbles(const uint8_t *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

/* acc[r] += dot of Q8_0 block b of rows[r] with x. R is a constant after
 * inlining; each row's arithmetic is the same for every R. */
TI void q_block(int R, const void *const *rows, const block_q8_0 *x, int b, __m256 *acc)
{
    __m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
    float dx = _cvtsh_ss(x[b].d);
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const block_q8_0 *w = (const block_q8_0 *)rows[r] + b;
        __m256 p = mul_sum_i8(_mm256_loadu_si256((const __m256i *)w->qs), xv);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w->d) * dx), p, acc[r]);
    }
}

TI void dot_q_rows(int R, const void *const *rows, const void *act, int n, float *y)
{
    __m256 acc[HC_DOT_ROWS];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int b = 0; b < n / QK8_0; b++) q_block(R, rows, act, b, acc);
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = hsum(acc[r]);
}

T static void dot_q8_0(const void *const *rows, int nr, const void *act, int n, float *y)
{
    if (nr == HC_DOT_ROWS) dot_q_rows(HC_DOT_ROWS, rows, act, n, y);
    else for (int i = 0; i < nr; i++) dot_q_rows(1, rows + i, act, n, y + i);
}

/* ---- Q4_0: 8 blocks per step, summed in integers to one int32 per block,
 * so one convert and one FMA cover 8 blocks ---- */

/* acc[r] += the dot of the 8 blocks at w[r] (whole blocks, 144 bytes) with chunk xc. */
TI void q4_chunk(int R, const block_q4_0 *const *w, const xq4 *xc, __m256 *acc)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        __m256i P[4];
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m256i v = _mm256_loadu2_m128i((const __m128i *)w[r][2 * p + 1].qs, (const __m128i *)w[r][2 * p].qs);
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            /* int16 pairs within ±2·15·128 each, ±4·15·128 summed */
            __m256i d16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xc->lo[p]), _mm256_maddubs_epi16(hi, xc->hi[p]));
            P[p] = _mm256_madd_epi16(d16, ones);
        }
        /* |P| <= 8·15·128: the int16 packs are exact; two levels of pairwise
         * sums leave lane 4m+p = block 2p+m */
        __m256i A = _mm256_madd_epi16(_mm256_packs_epi32(P[0], P[1]), ones);
        __m256i B = _mm256_madd_epi16(_mm256_packs_epi32(P[2], P[3]), ones);
        __m256i C = _mm256_add_epi32(_mm256_madd_epi16(_mm256_packs_epi32(A, B), ones), xc->corr);
        /* block 2p+m's scale to lane 4m+p (word inserts beat a gather here) */
        const block_q4_0 *q = w[r];
        __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)q[0].d, (short)q[2].d, (short)q[4].d, (short)q[6].d,
                                                   (short)q[1].d, (short)q[3].d, (short)q[5].d, (short)q[7].d));
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xc->d), _mm256_cvtepi32_ps(C), acc[r]);
    }
}

TI void dot_q4_rows(int R, const char *const *rows, const xq4 *xc, int nb, float *y)
{
    __m256 acc[HC_DOT_ROWS];
    const block_q4_0 *w[HC_DOT_ROWS];
    int c = 0;
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (; (c + 1) * Q4_CHUNK <= nb; c++) {
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            w[r] = (const block_q4_0 *)rows[r] + c * Q4_CHUNK;
            for (int i = 0; i < 3; i++) _mm_prefetch((const char *)w[r] + PF_Q + 64 * i, _MM_HINT_T0);
        }
        q4_chunk(R, w, xc + c, acc);
    }
    if (c * Q4_CHUNK < nb) {   /* the last blocks, zero-padded to a chunk */
        block_q4_0 pad[HC_DOT_ROWS][Q4_CHUNK];
        memset(pad, 0, sizeof pad);
        for (int r = 0; r < R; r++) {
            memcpy(pad[r], (const block_q4_0 *)rows[r] + c * Q4_CHUNK, (size_t)(nb - c * Q4_CHUNK) * sizeof(block_q4_0));
            w[r] = pad[r];
        }
        q4_chunk(R, w, xc + c, acc);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) y[r] = hsum(acc[r]);
}

#define XQ4_STACK 128   /* rows of up to 32768 elements arrange on the stack */

#define Q4_CHUNKS(nb) (((nb) + Q4_CHUNK - 1) / Q4_CHUNK)
HC_DOTS_ROWS(dots_q4_0, xq4, arrange_q4, Q4_CHUNKS, XQ4_STACK, 32, dot_q4_rows)

/* The dot entry: the same arithmetic, through the row loop. */
T static void dot_q4_0(const void *const *rows, int nr, const void *act, int n, float *y)
{
    for (int i = 0; i < nr; i++) dots_q4_0(rows[i], 0, NULL, 0, 1, 1, act, n, y + i);
}

/* y += a * (q * d): q*d is exact in float (8-bit q, 11-bit d), then one FMA. */
TI void axpy_q32(__m256i q, float d, float a, float *y)
{
    __m256 vd = _mm256_set1_ps(d), va = _mm256_set1_ps(a);
    for (int j = 0; j < 4; j++) {
        __m128i q8 = j & 2 ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(j & 1 ? _mm_srli_si128(q8, 8) : q8));
        _mm256_storeu_ps(y + 8 * j, _mm256_fmadd_ps(va, _mm256_mul_ps(v, vd), _mm256_loadu_ps(y + 8 * j)));
    }
}

T static void axpy_q8_0(const void *row, int n, float a, float *y)
{
    const block_q8_0 *w = row;
    for (int b = 0; b < n / QK8_0; b++)
        axpy_q32(_mm256_loadu_si256((const __m256i *)w[b].qs), _cvtsh_ss(w[b].d), a, y + b * QK8_0);
}

T static void axpy_q4_0(const void *row, int n, float a, float *y)
{
    const block_q4_0 *w = row;
    for (int b = 0; b < n / QK4_0; b++)
        axpy_q32(_mm256_sub_epi8(nibbles(w[b].qs), _mm256_set1_epi8(8)), _cvtsh_ss(w[b].d), a, y + b * QK4_0);
}

/* roundf (half away from zero) of values |v| < 2^23: truncate, then step away
 * from zero when the dropped fraction is >= 0.5 (v - trunc(v) is exact). */
TI __m256i roundf_epi32(__m256 v)
{
    __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(sign, v));
    t = _mm256_add_ps(t, _mm256_and_ps(step, _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ)));
    return _mm256_cvtps_epi32(t);
}

/* quantize_row_q8_0_ref, vectorised, with the same arithmetic for finite x. */
T static void quantize_q8(const float *x, int n, void *blocks)
{
    block_q8_0 *y = blocks;
    __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < n / QK8_0; b++, x += QK8_0) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        float d = amax / 127, id = d ? 1.0f / d : 0.0f;
        y[b].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = roundf_epi32(_mm256_mul_ps(v[j], vid));
        /* packs interleave 128-bit lanes; the permute puts the bytes back in order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[b].qs, p);
    }
}

const struct hc_isa hc_isa_avx2 = {
    .name = "avx2",
    .dot = { dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0 },
    .axpy = { axpy_f32, axpy_f16, axpy_bf16, axpy_q8_0, axpy_q4_0 },
    .quantize_q8 = quantize_q8,
    .dots = { [HC_K_Q4_0] = dots_q4_0 },
};
#endif
