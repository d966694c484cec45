/* AVX2 + FMA + F16C kernels (8 floats / 32 int8 per register), selected at run
 * time by kernels.c. Q8_0 dots use ggml's sign trick: |w| (unsigned) times
 * x·sign(w) with maddubs, pairs summed to int32 with madd; Q8_0 and Q4_0 sum
 * 8 blocks to one int32 each, then one convert and one FMA for the 8.
 *
 * The register tiles (batched products, B > 1) compute RM rows x TM vectors
 * at once, each weight load shared by the vectors and each activation load by
 * the rows, while every (row, vector) pair goes through the very FMAs,
 * accumulator lanes and final reduction of the single-row dot: the results
 * are bit-identical to B = 1 whatever the tile, the batch or the row split. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "x16.h"

#define T __attribute__((target("avx2,fma,f16c")))
#define TI static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* Software prefetch distance in the GPTQ rows the dots read (Q8_0 read
 * 14-20 % slower with it on Zen 4, and Q4_0 in chunks of 16 about 10 %,
 * docs/measurements.md). */
#define PF_Q 4096

TI float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* ---- F32 / F16 / BF16: one body, specialised by the constant k (a ggml
 * type) when inlined ---- */

TI __m256 load8(int k, const void *p, int i)
{
    if (k == GGML_TYPE_F32) return _mm256_loadu_ps((const float *)p + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (k == GGML_TYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The last n % 8 elements go through zero-padded copies, so every element
 * takes the same vector path. */
TI const void *pad_tail(int k, const void *row, int i, int m, float buf[8])
{
    size_t es = k == GGML_TYPE_F32 ? 4 : 2;
    memset(buf, 0, 8 * sizeof(float));
    memcpy(buf, (const char *)row + (size_t)i * es, (size_t)m * es);
    return buf;
}

/* The single-row dots keep two accumulators a0, a1 and return
 * hsum(a0 + a1), the elements split between them as on AVX-512 (8-element
 * steps; the last n % 8 elements go through zero-padded copies, so every
 * element takes the same vector path). The register tile (below) repeats
 * exactly that order for every pair.
 *
 * F16 (dot_steps): a0 gets elements [16c, 16c + 8), a1
 * [16c + 8, 16c + 16) for c = 0, 1, ...; then a0 one more 8-element step,
 * a1 the tail: two FMA chains side by side in one ascending stream (what F16
 * decode needs, docs/design/kernels.md). */
/* *a0, *a1 += dot_steps' steps over elements [i0, i1): i0 a multiple of 32,
 * i1 a multiple of 32 or n (only then the last step and the padded tail).
 * With next (F16 only), one line of it is prefetched into L2 per 32
 * elements, line for line with the row. */
TI void steps_range(int k, const void *row, const float *x, int i0, int i1, __m256 *a0, __m256 *a1, const char *next)
{
    __m256 s0 = *a0, s1 = *a1;   /* in registers for the loop */
    int i = i0;
    _Pragma("GCC unroll 2")   /* fewer instructions in flight per line read: 0.65-0.82 -> 0.79-0.88 of a plain read */
    for (; i + 16 <= i1; i += 16) {
        if (next && !((i - i0) & 31)) _mm_prefetch(next + 2 * (i - i0), _MM_HINT_T1);
        s0 = _mm256_fmadd_ps(load8(k, row, i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load8(k, row, i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    if (i + 8 <= i1) {
        s0 = _mm256_fmadd_ps(load8(k, row, i), _mm256_loadu_ps(x + i), s0);
        i += 8;
    }
    if (i < i1) {
        float wb[8], xb[8] = {0};
        memcpy(xb, x + i, (size_t)(i1 - i) * sizeof(float));
        s1 = _mm256_fmadd_ps(load8(k, pad_tail(k, row, i, i1 - i, wb), 0), _mm256_loadu_ps(xb), s1);
    }
    *a0 = s0;
    *a1 = s1;
}

TI float dot_steps(int k, const void *row, const float *x, int n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    steps_range(k, row, x, 0, n, &a0, &a1, NULL);
    return hsum(_mm256_add_ps(a0, a1));
}

/* dot_steps' result from its two accumulators parked at acc
 * (hc_kernel.piece_sum). */
T static float sum_f(const float *acc) { return hsum(_mm256_add_ps(_mm256_load_ps(acc), _mm256_load_ps(acc + 8))); }

/* F32 (dot_chunks): a0 sums the even chunks of CHUNK elements and a1 the odd
 * ones, each chunk in ascending 8-element steps, the row's tail last: one
 * ascending stream at B = 1, and one accumulator per (row, vector) pair in
 * the tile. */
#define CHUNK 1024        /* elements */

/* acc + row · x over elements [i0, i1) (none when i0 >= i1) in 8-element
 * steps, the last one zero-padded at i1. */
TI __m256 chunk_sum(int k, const void *row, const float *x, int i0, int i1, __m256 acc)
{
    int i = i0;
    for (; i + 8 <= i1; i += 8) acc = _mm256_fmadd_ps(load8(k, row, i), _mm256_loadu_ps(x + i), acc);
    if (i < i1) {
        float wb[8], xb[8] = {0};
        memcpy(xb, x + i, (size_t)(i1 - i) * sizeof(float));
        acc = _mm256_fmadd_ps(load8(k, pad_tail(k, row, i, i1 - i, wb), 0), _mm256_loadu_ps(xb), acc);
    }
    return acc;
}

TI float dot_chunks(int k, const void *row, const float *x, int n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int c = 0; c < n; c += 2 * CHUNK) {
        a0 = chunk_sum(k, row, x, c, n - c < CHUNK ? n : c + CHUNK, a0);
        a1 = chunk_sum(k, row, x, c + CHUNK, n - c < 2 * CHUNK ? n : c + 2 * CHUNK, a1);
    }
    return hsum(_mm256_add_ps(a0, a1));
}

T static float dot_f(const hc_weight *w, int r, const void *x)
{
    const char *row = hc_float_row(w, r, 0);
    return w->type == GGML_TYPE_F32 ? dot_chunks(GGML_TYPE_F32, row, x, w->n) : dot_steps(GGML_TYPE_F16, row, x, w->n);
}

/* hc_kernel.piece for F16 (weight.c's column blocks): dot_steps' two
 * accumulators parked at acc, as two vectors (acc is aligned to 64). */
T static void piece_f(const hc_weight *w, int r, int c0, int c1, const void *x, float *acc, const char *next)
{
    __m256 *a = (__m256 *)acc;
    steps_range(GGML_TYPE_F16, hc_float_row(w, r, 0), x, c0, c1, a, a + 1, next);
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

T static void axpy_f(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const char *row = hc_float_row(w, r, c0);
    if (w->type == GGML_TYPE_F32) axpy_float(GGML_TYPE_F32, row, c1 - c0, a, y);
    else if (w->type == GGML_TYPE_F16) axpy_float(GGML_TYPE_F16, row, c1 - c0, a, y);
    else axpy_float(GGML_TYPE_BF16, row, c1 - c0, a, y);
}

/* axpy_float's FMAs for nt outputs, 32 columns of the row in registers at a
 * time; the tail through axpy_float itself. */
TI void axpy_multi_float(int k, const void *row, int n, int nt, const float *a, const int32_t *rows, float *y,
                         size_t ys)
{
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v[4];
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++) v[j] = load8(k, row, i + 8 * j);
        for (int t = 0; t < nt; t++)
            _Pragma("GCC unroll 4")
            for (int j = 0; j < 4; j++) {
                float *yt = y + (size_t)rows[t] * ys + i + 8 * j;
                _mm256_storeu_ps(yt, _mm256_fmadd_ps(_mm256_set1_ps(a[t]), v[j], _mm256_loadu_ps(yt)));
            }
    }
    if (i < n) {
        size_t es = k == GGML_TYPE_F32 ? 4 : 2;
        for (int t = 0; t < nt; t++) axpy_float(k, (const char *)row + (size_t)i * es, n - i, a[t], y + (size_t)rows[t] * ys + i);
    }
}

T static void axpy_multi_f(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                           float *y, size_t ys)
{
    const char *row = hc_float_row(w, r, c0);
    if (w->type == GGML_TYPE_F32) axpy_multi_float(GGML_TYPE_F32, row, c1 - c0, nt, a, rows, y, ys);
    else if (w->type == GGML_TYPE_F16) axpy_multi_float(GGML_TYPE_F16, row, c1 - c0, nt, a, rows, y, ys);
    else axpy_multi_float(GGML_TYPE_BF16, row, c1 - c0, nt, a, rows, y, ys);
}

/* The float tile: RM rows x TM vectors; per 8 elements each weight load
 * (and F16 widening) is shared by the vectors and each activation load
 * by the rows, and every pair gets its dot's FMAs in its dot's order.
 * - F32 (tile_chunks): 3 x 4 pairs, one accumulator each in registers (12 of
 *   the 16, with the 3 weight registers and an activation load; 2 x 6 and
 *   4 x 3 measured slower), chunk by chunk into the even or odd chunks' set,
 *   the other set parked in memory meanwhile.
 * - F16 (steps_part): the same 3 x 4 pairs, over a0's steps and then a1's
 *   (docs/design/kernels.md). */
#define RM 3              /* rows per tile */
#define TM 4              /* vectors per tile */

/* acc[r][t] += w_r[i..i+8) * x_t[i..i+8) for r < RM, t < Tn. */
TI void step(int k, int Tn, const void *const *w, const float *const *x, int i, __m256 acc[RM][TM])
{
    __m256 wv[RM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++) wv[r] = load8(k, w[r], i);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < Tn; t++) {
        __m256 xv = _mm256_loadu_ps(x[t] + i);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RM; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
}

/* step over elements [i, e) (e - i < 8) through zero-padded copies. */
TI void tail_step(int k, int Tn, const void *const *w, const float *const *x, int i, int e, __m256 acc[RM][TM])
{
    float wb[RM][8], xb[TM][8];
    const void *wt[RM];
    const float *xt[TM];
    for (int r = 0; r < RM; r++) wt[r] = pad_tail(k, w[r], i, e - i, wb[r]);
    for (int t = 0; t < Tn; t++) {
        memset(xb[t], 0, sizeof xb[t]);
        memcpy(xb[t], x[t] + i, (size_t)(e - i) * sizeof(float));
        xt[t] = xb[t];
    }
    step(k, Tn, wt, xt, 0, acc);
}

/* park[r][t] += chunk_sum's steps over elements [i0, i1), t < nt. */
TI void chunk_tile(int k, int nt, const void *const *w, const float *const *x, int i0, int i1, float park[RM][TM][8])
{
    __m256 acc[RM][TM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = _mm256_load_ps(park[r][t]);
    int i = i0;
    for (; i + 8 <= i1; i += 8) step(k, nt, w, x, i, acc);
    if (i < i1) tail_step(k, nt, w, x, i, i1, acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) _mm256_store_ps(park[r][t], acc[r][t]);
}

/* y[t * RM + r] = dot_chunks(k, w[r], x[t], n) for r < RM, t < nt, from the
 * two chunk sets parked by chunk_tile. */
TI void chunks_sum(int nt, const float park[2][RM][TM][8], float *y)
{
    for (int r = 0; r < RM; r++)
        for (int t = 0; t < nt; t++)
            y[t * RM + r] = hsum(_mm256_add_ps(_mm256_load_ps(park[0][r][t]), _mm256_load_ps(park[1][r][t])));
}

/* park += dot_chunks' chunk steps over elements [c0, c1) for the RM x nt
 * pairs, block by block within the chunks. */
TI void chunks_part(int k, int nt, const void *const *w, const float *const *x, int c0, int c1, float park[2][RM][TM][8])
{
    for (int c = c0; c < c1;) {
        int e = (c / CHUNK + 1) * CHUNK;
        e = e < c1 ? e : c1;
        chunk_tile(k, nt, w, x, c, e, park[c / CHUNK % 2]);
        c = e;
    }
}

/* park[p] += the steps that dot_steps adds into its accumulator a<p> over
 * elements [c0, c1) (c0 a multiple of 32, c1 one too or n: only then the
 * last step and the padded tail), for RM rows x TM vectors: a0's steps
 * ([16c, 16c + 8), and the last whole 8 elements when they start a 16),
 * then a1's ([16c + 8, 16c + 16), and the tail). One accumulator's steps at
 * a time, so each weight is widened once for all TM vectors while every
 * pair keeps its dot's two chains (taking both chains at once left room for
 * 2 vectors, and each weight was widened twice). No software prefetch: one
 * of the next row tile's block (into L2, a line per row and 32 columns) won
 * 1-12 % on Zen 4 with AVX2 forced, but on Zen 3, an AVX2-only core with
 * half the L2, it cost a 353-token F16 prompt 17-19 % (hc-run -t 1: 89
 * against 108 tok/s, -t 2: 166 against 198, medians of 6 alternated runs;
 * docs/measurements.md, "Zen 3"). */
TI void steps_part(int k, int nt, const void *const *w, const float *const *x, int c0, int c1,
                   float park[2][RM][TM][8])
{
    for (int p = 0; p < 2; p++) {
        __m256 acc[RM][TM];
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RM; r++)
            _Pragma("GCC unroll 8")
            for (int t = 0; t < nt; t++) acc[r][t] = _mm256_load_ps(park[p][r][t]);
        int i = c0;
        for (; i + 16 <= c1; i += 16) step(k, nt, w, x, i + 8 * p, acc);
        if (i + 8 <= c1) {
            if (!p) step(k, nt, w, x, i, acc);
            i += 8;
        }
        if (i < c1 && p) tail_step(k, nt, w, x, i, c1, acc);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RM; r++)
            _Pragma("GCC unroll 8")
            for (int t = 0; t < nt; t++) _mm256_store_ps(park[p][r][t], acc[r][t]);
    }
}

#define PARK_F (2 * RM * TM * 8)       /* floats parked per float tile (two sets of accumulators) */
#define KB_F 1024                      /* columns per block of the float tile (hc_kernel.kb) */

/* hc_kernel.tile_part and tile_sum of the float tile. */
T static void part_f(const hc_weight *w, const int *r, const void *const *x, int c0, int c1, float *park)
{
    const void *rows[RM];
    const float *const *xf = (const float *const *)x;
    for (int i = 0; i < RM; i++) rows[i] = hc_float_row(w, r[i], 0);
    if (w->type == GGML_TYPE_F32) chunks_part(GGML_TYPE_F32, TM, rows, xf, c0, c1, (float (*)[RM][TM][8])park);
    else steps_part(GGML_TYPE_F16, TM, rows, xf, c0, c1, (float (*)[RM][TM][8])park);
}

T static void sum_tile_f(const hc_weight *w, const void *const *x, const float *park, float *y)
{
    (void)w, (void)x;   /* F32's even and odd chunks, F16's a0 and a1: summed alike */
    chunks_sum(TM, (const float (*)[RM][TM][8])park, y);
}

/* hc_kernel.dots for F32: the tile's RM rows with one vector. */
T static void dots_f(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    hc_float_rows(w, r, RM, rows);
    _Alignas(32) float park[2][RM][TM][8];
    memset(park, 0, sizeof park);
    chunks_part(GGML_TYPE_F32, 1, rows, (const float *const *)x, 0, w->n, park);
    chunks_sum(1, (const float (*)[RM][TM][8])park, y);
}

/* hc_kernel.dots for F16: the tile's RM rows with one vector. */
T static void dots_h(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    hc_float_rows(w, r, RM, rows);
    _Alignas(32) float park[2][RM][TM][8];
    memset(park, 0, sizeof park);
    steps_part(GGML_TYPE_F16, 1, rows, (const float *const *)x, 0, w->n, park);
    chunks_sum(1, (const float (*)[RM][TM][8])park, y);
}

T static void tile_f(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    _Alignas(64) float park[PARK_F];
    memset(park, 0, sizeof park);
    part_f(w, r, x, 0, w->n, park);
    sum_tile_f(w, x, park, y);
}

/* The F16 tile for few vectors (hc_kernel.few, B <= FT: sequences decoded
 * together), as AVX-512's (kernels_avx512.c): the rows read once, in blocks
 * of FKB columns; per block the even 8-element steps of every pair (one
 * accumulator each), then the odd ones, in groups of RM x TM pairs in
 * registers (12 accumulators, 3 weights and an activation: all 16), parked
 * between blocks while the block's rows stay in L1; the odd steps of the
 * first group fetch the same block of the next row tile into L2. Each
 * accumulator takes its steps in dot_steps' order (the padded tail last into
 * a1): the dot's bits. */
#define FT 8              /* the most vectors (hc_kernel.few_tm): two groups */
#define FKB 512           /* columns per block, a multiple of 32 */

/* One group of nt vectors and one parity p of block [c, e): park (zero in
 * the first block) plus the steps at c + 8p, then every 16th, that end by
 * e, and (p = 1, e = n) the padded tail; with next, one line of row r + RM
 * (2n bytes a row) is prefetched per 32 columns. */
TI void few_pass(int k, int nt, const void *const *w, const float *const *x, int c, int e, int p, int n, int next,
                 float park[RM][TM][8])
{
    __m256 acc[RM][TM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = c ? _mm256_load_ps(park[r][t]) : _mm256_setzero_ps();
    for (int i = c + 8 * p; i + 8 <= e; i += 16) {
        if (next && !((i - 8) & 31))
            _Pragma("GCC unroll 4")
            for (int r = 0; r < RM; r++) _mm_prefetch((const char *)w[r] + RM * 2 * (size_t)n + 2 * (i - 8), _MM_HINT_T1);
        step(k, nt, w, x, i, acc);
    }
    if (p && e == n && n % 8) tail_step(k, nt, w, x, n & ~7, n, acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) _mm256_store_ps(park[r][t], acc[r][t]);
}

/* y[t * RM + i] = dot_steps(k, row r[i] of wt, x[t], n) for i < RM, t < nt:
 * per block and parity, vectors [0, TM), then the rest (nt a constant at
 * every call, so are the groups). */
TI void few_tile(int k, int nt, const hc_weight *wt, const int *r, const void *const *xv, float *y)
{
    const int n1 = nt < TM ? nt : TM, n2 = nt - n1, n = wt->n;
    const void *w[RM];
    const float *const *x = (const float *const *)xv;
    hc_float_rows(wt, r, RM, w);
    _Alignas(32) float park[2][2][RM][TM][8];
    int c = 0;
    do {   /* n >= 1: the first block sets every accumulator */
        int e = n - c < FKB ? n : c + FKB;
        for (int p = 0; p < 2; p++) {
            few_pass(k, n1, w, x, c, e, p, n, p, park[p][0]);
            if (n2) few_pass(k, n2, w, x + TM, c, e, p, n, 0, park[p][1]);
        }
        c = e;
    } while (c < n);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < RM; r++)
            y[t * RM + r] = hsum(_mm256_add_ps(_mm256_load_ps(park[0][t / TM][r][t % TM]),
                                               _mm256_load_ps(park[1][t / TM][r][t % TM])));
}

/* hc_kernel.few of F16 over the vectors it really has (see hc_real_vectors). */
T static void few_h(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    int tn = hc_real_vectors(x, FT);
    switch (tn) {
    case 1: few_tile(GGML_TYPE_F16, 1, w, r, x, y); break;
    case 2: few_tile(GGML_TYPE_F16, 2, w, r, x, y); break;
    case 3: few_tile(GGML_TYPE_F16, 3, w, r, x, y); break;
    case 4: few_tile(GGML_TYPE_F16, 4, w, r, x, y); break;
    case 5: few_tile(GGML_TYPE_F16, 5, w, r, x, y); break;
    case 6: few_tile(GGML_TYPE_F16, 6, w, r, x, y); break;
    case 7: few_tile(GGML_TYPE_F16, 7, w, r, x, y); break;
    default: few_tile(GGML_TYPE_F16, 8, w, r, x, y); break;
    }
    hc_copy_edge(y, tn, RM, FT);
}

/* F16's kernel (long rows in column blocks: piece_f; as three streams they
 * read 12 % slower on Zen 4, docs/design/kernels.md; 4096-wide rows as
 * streams: dots_h) and F32's (rows of every width as streams: dots_f). */
#define FLOAT_KERNEL                                                                                            \
    .prepare = hc_act_copy, .arranged_bytes = hc_float_arranged_bytes, .arrange = hc_float_arrange, .dot = dot_f, \
    .tile = tile_f, .rm = RM, .tm = TM, .tile_part = part_f, .tile_sum = sum_tile_f, .kb = KB_F,               \
    .tile_park = PARK_F, .axpy = axpy_f, .axpy_multi = axpy_multi_f
const hc_kernel hc_avx2_float = { FLOAT_KERNEL, .piece = piece_f, .piece_sum = sum_f, .dots = dots_h, .dots_when = HC_DOTS_ALL,
                                   .few = few_h, .few_tm = FT };
const hc_kernel hc_avx2_f32 = { FLOAT_KERNEL, .dots = dots_f, .dots_when = HC_DOTS_ALL };

/* ---- BF16 against bf16 activations (ggml's numerics): 16 bf16 per
 * register, both operands widened by shifts (the odd elements by a mask, the
 * even ones by a shift left); per lane the pair's sum, odd product (exact)
 * plus even product rounded once by an FMA, is added to one accumulator; the
 * result is hsum(acc). Only the add is on the accumulator's dependency
 * chain: FMAing both products into it (vdpbf16ps's order) made a chain of two
 * FMAs per 16 elements that held the B = 1 dot to 15 GB/s. ---- */

/* The bf16 activation, 8 floats per step with fp32_to_bf16's integer
 * rounding (nearest even; NaN kept and quieted): the reference's bits. */
T static void act_bf16(const hc_weight *w, const float *x, void *act)
{
    uint16_t *h = act;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(64);
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    int i = 0;
    for (; i + 8 <= w->n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(x + i)), hi = _mm256_srli_epi32(u, 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        /* words 0-3 and 4-7 of the two lanes, then the lanes' low halves together */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(h + i), _mm256_castsi256_si128(p));
    }
    for (; i < w->n; i++) h[i] = fp32_to_bf16(x[i]);
}

/* The 16 bf16 at p as their odd and even elements in f32. */
TI void widen_bf16(const uint16_t *p, __m256 *odd, __m256 *even)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* The last n % 16 elements through zero-padded copies. */
TI const uint16_t *pad_tail_bf16(const uint16_t *p, int m, uint16_t buf[16])
{
    memset(buf, 0, 16 * sizeof *buf);
    memcpy(buf, p, (size_t)m * sizeof *buf);
    return buf;
}

/* The bf16 tile: BRM rows x BTM vectors, the accumulator of every pair in
 * registers (8 of the 16; the widened activations take 4, a widened row 2):
 * per 16 elements 6 loads and 12 widening operations for 8 multiplies, 8
 * FMAs and 8 adds (3 x 2: 61 GFLOP/s at B = 128, 4 x 2: 78). */
#define BRM 4
#define BTM 2

/* acc[r][t] += the pair sums of elements [i, i+16) of w[r] and x[t]. */
TI void step_bf16(int R, int Tn, const uint16_t *const *w, const uint16_t *const *x, int i, __m256 acc[BRM][BTM])
{
    __m256 xo[BTM], xe[BTM];
    _Pragma("GCC unroll 4")
    for (int t = 0; t < Tn; t++) widen_bf16(x[t] + i, &xo[t], &xe[t]);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++) {
        __m256 wo, we;
        widen_bf16(w[r] + i, &wo, &we);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_fmadd_ps(we, xe[t], _mm256_mul_ps(wo, xo[t])));
    }
}

/* acc[r][t] += the pair sums of elements [0, n) of w[r] and x[t] (the
 * last n % 16 through padded copies); with next (hc_kernel.few's first
 * pass), one line of row r + R, the next row tile's, is fetched into L2 per
 * 32 elements, as in the F16 few-vector tile. */
TI void range_bf16(int R, int Tn, int next, const uint16_t *const *w, const uint16_t *const *x, int n,
                   __m256 acc[BRM][BTM])
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        if (next && !(i & 31))
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(w[r] + (size_t)R * (size_t)n + i), _MM_HINT_T1);
        step_bf16(R, Tn, w, x, i, acc);
    }
    if (i < n) {
        uint16_t wb[BRM][16], xb[BTM][16];
        const uint16_t *wt[BRM], *xt[BTM];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) wt[r] = pad_tail_bf16(w[r] + i, n - i, wb[r]);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) xt[t] = pad_tail_bf16(x[t] + i, n - i, xb[t]);
        step_bf16(R, Tn, wt, xt, 0, acc);
    }
}

/* y[t * R + r] = row w[r] · x[t] for r < R, t < Tn; R = Tn = 1 is the dot. */
TI void tile_bf16(int R, int Tn, int next, const uint16_t *const *w, const uint16_t *const *x, int n, float *y)
{
    __m256 acc[BRM][BTM];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm256_setzero_ps();
    range_bf16(R, Tn, next, w, x, n, acc);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) y[t * R + r] = hsum(acc[r][t]);
}

T static float dot_b(const hc_weight *w, int r, const void *x)
{
    const uint16_t *row = (const uint16_t *)hc_float_row(w, r, 0), *xs = x;
    float y;
    tile_bf16(1, 1, 0, &row, &xs, w->n, &y);
    return y;
}

/* hc_kernel.dots for BF16 (rows longer than 4096): the tile's BRM rows with
 * one vector. */
T static void dots_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[BRM];
    hc_float_rows(w, r, BRM, rows);
    tile_bf16(BRM, 1, 0, (const uint16_t *const *)rows, (const uint16_t *const *)x, w->n, y);
}

T static void tile_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const uint16_t *rows[BRM];
    for (int i = 0; i < BRM; i++) rows[i] = (const uint16_t *)hc_float_row(w, r[i], 0);
    tile_bf16(BRM, BTM, 0, rows, (const uint16_t *const *)x, w->n, y);
}

/* hc_kernel.few of BF16 (B <= BFT): the tile over each BTM vectors in turn,
 * the first pass fetching the next row tile into L2 while it computes (the
 * others find the rows in cache): B = 2, 4, 8 31-36 -> 36-48, 50-51 ->
 * 60-63, 61-64 -> 68-72 GFLOP/s. In every tile, larger B too, the
 * prefetches cost B = 128 11 %. */
#define BFT 8
T static void few_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const uint16_t *rows[BRM];
    const uint16_t *const *xb = (const uint16_t *const *)x;
    int tn = hc_real_vectors(x, BFT);
    for (int i = 0; i < BRM; i++) rows[i] = (const uint16_t *)hc_float_row(w, r[i], 0);
    for (int t0 = 0; t0 < tn; t0 += BTM) tile_bf16(BRM, BTM, t0 == 0, rows, xb + t0, w->n, y + t0 * BRM);
    hc_copy_edge(y, (tn + BTM - 1) / BTM * BTM, BRM, BFT);
}

/* A BF16 row's AXPY has no activation: the float kernels' (exact widening). */
const hc_kernel hc_avx2_bf16 = { .prepare = act_bf16, .arranged_bytes = hc_bf16_arranged_bytes,
                                 .arrange = hc_bf16_arrange, .dot = dot_b, .dots = dots_b, .dots_when = HC_DOTS_ALL,
                                 .tile = tile_b, .rm = BRM, .tm = BTM, .few = few_b, .few_tm = BFT,
                                 .axpy = axpy_f, .axpy_multi = axpy_multi_f };

/* ---- Q8_0 / Q4_0 against Q8_0 activations ---- */

/* A register of code bytes -> its low and high nibbles (codes 0..15). */
TI void split_nibbles(__m256i v, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

/* 16 bytes of nibbles -> 32 values 0..15 in element order (low nibbles first). */
TI __m256i nibbles(const uint8_t *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
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

/* axpy_q32 for nt outputs: the block's q * d once, then one FMA per output. */
TI void axpy_multi_q32(__m256i q, float d, int nt, const float *a, const int32_t *rows, float *y, size_t ys)
{
    __m256 vd = _mm256_set1_ps(d), wv[4];
    for (int j = 0; j < 4; j++) {
        __m128i q8 = j & 2 ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
        wv[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(j & 1 ? _mm_srli_si128(q8, 8) : q8)), vd);
    }
    for (int t = 0; t < nt; t++) {
        __m256 va = _mm256_set1_ps(a[t]);
        float *yt = y + (size_t)rows[t] * ys;
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(yt + 8 * j, _mm256_fmadd_ps(va, wv[j], _mm256_loadu_ps(yt + 8 * j)));
    }
}

/* Row r of a Q8_0 / Q4_0 weight (blocks of type B). */
#define QROW(B, w, r) ((const B *)(w)->data + (size_t)(r) * (size_t)((w)->n / QK8_0))

/* ---- Q8_0: 8 blocks per step, each summed in integers to one int32, so one
 * convert and one FMA cover 8 blocks (as Q4_0 below) ---- */

/* The Q8_0 activation rearranged for 8 blocks of a row (a chunk), as 4 pairs
 * of blocks: lo[p] holds the first 16 bytes of blocks 2p and 2p+1 (one per
 * 128-bit lane), hi[p] their last 16, as the tile loads the weights. After
 * the reduction (block_sums) lane 4m+p holds block 2p+m; d is that
 * block's activation scale, in the same order. */
typedef struct {
    __m256i lo[4], hi[4];
    __m256 d;
} xq8;

#define Q8_CHUNK 8

/* Chunk c (8 blocks, zero past nb) of a Q8_0 activation x in the layout both
 * AVX2 arrangements share: lo[p] / hi[p] the first / last 16 bytes of blocks
 * 2p, 2p+1, and each block's scale and (if corr) its -8·Σx in lane 4m+p. */
TI void arrange_pairs(const block_q8_0 *x, int nb, int c, __m256i lo[4], __m256i hi[4], __m256 *d, __m256i *corr)
{
    int8_t l[4][32] = {{0}}, h[4][32] = {{0}};
    int32_t cs[8] = {0};
    float ds[8] = {0};
    for (int p = 0; p < 4; p++)
        for (int m = 0; m < 2; m++) {
            int b = 8 * c + 2 * p + m, sum = 0;
            if (b >= nb) continue;
            memcpy(l[p] + 16 * m, x[b].qs, 16);
            memcpy(h[p] + 16 * m, x[b].qs + 16, 16);
            for (int j = 0; corr && j < QK8_0; j++) sum += x[b].qs[j];
            cs[4 * m + p] = -8 * sum;
            ds[4 * m + p] = _cvtsh_ss(x[b].d);
        }
    for (int p = 0; p < 4; p++) {
        lo[p] = _mm256_loadu_si256((const __m256i *)l[p]);
        hi[p] = _mm256_loadu_si256((const __m256i *)h[p]);
    }
    *d = _mm256_loadu_ps(ds);
    if (corr) *corr = _mm256_loadu_si256((const __m256i *)cs);
}

T static void arrange_q8(const void *act, int n, void *xa)
{
    xq8 *xc = xa;
    for (int c = 0; c * Q8_CHUNK < n / QK8_0; c++) arrange_pairs(act, n / QK8_0, c, xc[c].lo, xc[c].hi, &xc[c].d, NULL);
}

static size_t arranged_q8(int n) { return sizeof(xq8) * (size_t)((n / QK8_0 + Q8_CHUNK - 1) / Q8_CHUNK); }

/* The in-lane sums of two vectors' 32- (h = 0) or 64-bit (h = 1) halves,
 * interleaved: hadd's result with shuffles and an add, which this Zen 4 runs
 * four times as fast as vphaddd (on other pipes than the multiplies). */
TI __m256i sum_halves(__m256i a, __m256i b, int h)
{
    if (h) return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

/* P[p] holds 4 int32 partial sums of block 2p in its low 128-bit lane and 4
 * of block 2p+1 in its high lane: the 8 blocks' sums, lane 4m+p = block 2p+m. */
TI __m256i block_sums(const __m256i P[4])
{
    __m256i s01 = sum_halves(P[0], P[1], 0);   /* blocks 0 2 0 2 | 1 3 1 3 */
    __m256i s23 = sum_halves(P[2], P[3], 0);   /* blocks 4 6 4 6 | 5 7 5 7 */
    return sum_halves(s01, s23, 1);
}

/* Half h (the first or last 16 bytes) of blocks 2p and 2p+1 at q, one per
 * 128-bit lane: as the activation's lo[p] / hi[p]. */
TI __m256i q8_half(const block_q8_0 *q, int p, int h)
{
    return _mm256_loadu2_m128i((const __m128i *)(q[2 * p + 1].qs + 16 * h), (const __m128i *)(q[2 * p].qs + 16 * h));
}

/* The scales of the 8 blocks at q as floats, in lane order 4m+p (block 2p+m). */
TI __m256 q8_scales(const block_q8_0 *q)
{
    return _mm256_cvtph_ps(_mm_setr_epi16((short)q[0].d, (short)q[2].d, (short)q[4].d, (short)q[6].d,
                                          (short)q[1].d, (short)q[3].d, (short)q[5].d, (short)q[7].d));
}

/* ggml's sign trick on 32 bytes: a = |w| (unsigned, 128 for -128) times x with
 * w's sign, pairs summed to 8 int32. Exact: maddubs' int16 pairs are at most
 * 2·128·127, a block's sum at most 32·128·127. */
TI __m256i q8_dot32(__m256i w, __m256i a, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}

/* acc + the 8 blocks' integer sums P (see block_sums) times dw·dx. */
TI __m256 q8_fma(const __m256i P[4], __m256 dw, const xq8 *x, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, x->d), _mm256_cvtepi32_ps(block_sums(P)), acc);
}

/* acc + the dot of the 8 whole blocks at q with chunk x, straight from the
 * row (B = 1): P[p] holds blocks 2p, 2p+1's partial sums (lanes 0-3, 4-7). */
TI __m256 q8_chunk(const block_q8_0 *q, const xq8 *x, __m256 acc)
{
    __m256i P[4];
    for (int p = 0; p < 4; p++) {
        __m256i l = q8_half(q, p, 0), h = q8_half(q, p, 1);
        P[p] = _mm256_add_epi32(q8_dot32(l, _mm256_sign_epi8(l, l), x->lo[p]), q8_dot32(h, _mm256_sign_epi8(h, h), x->hi[p]));
    }
    return q8_fma(P, q8_scales(q), x, acc);
}

/* One row's 8 blocks loaded for a tile: w[2p + h] = q8_half(q, p, h), a = |w|,
 * dw = q8_scales(q). */
typedef struct {
    __m256i w[8], a[8];
    __m256 dw;
} wq8;

TI void q8_load(const block_q8_0 *q, wq8 *r)
{
    for (int p = 0; p < 4; p++) {
        r->w[2 * p] = q8_half(q, p, 0);
        r->w[2 * p + 1] = q8_half(q, p, 1);
        r->a[2 * p] = _mm256_sign_epi8(r->w[2 * p], r->w[2 * p]);
        r->a[2 * p + 1] = _mm256_sign_epi8(r->w[2 * p + 1], r->w[2 * p + 1]);
    }
    r->dw = q8_scales(q);
}

/* Blocks 2p, 2p+1 of a loaded row against chunk x, as in q8_chunk. */
TI __m256i q8_pair(const wq8 *r, const xq8 *x, int p)
{
    return _mm256_add_epi32(q8_dot32(r->w[2 * p], r->a[2 * p], x->lo[p]), q8_dot32(r->w[2 * p + 1], r->a[2 * p + 1], x->hi[p]));
}

T static float dot_q8(const hc_weight *w, int r, const void *xa)
{
    const block_q8_0 *q = QROW(block_q8_0, w, r);
    const xq8 *xc = xa;
    __m256 acc = _mm256_setzero_ps();
    int c = 0, nb = w->n / QK8_0;
    for (; (c + 1) * Q8_CHUNK <= nb; c++) acc = q8_chunk(q + c * Q8_CHUNK, xc + c, acc);
    if (c * Q8_CHUNK < nb) {   /* the last blocks, zero-padded to a chunk */
        block_q8_0 pad[Q8_CHUNK];
        const block_q8_0 *b = hc_whole_chunk(q + c * Q8_CHUNK, nb - c * Q8_CHUNK, Q8_CHUNK, sizeof(block_q8_0), pad);
        acc = q8_chunk(b, xc + c, acc);
    }
    return hsum(acc);
}

T static void axpy_q8(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const block_q8_0 *wb = QROW(block_q8_0, w, r);
    for (int b = c0 / QK8_0; b < c1 / QK8_0; b++, y += QK8_0)
        axpy_q32(_mm256_loadu_si256((const __m256i *)wb[b].qs), _cvtsh_ss(wb[b].d), a, y);
}

T static void axpy_multi_q8(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                            float *y, size_t ys)
{
    const block_q8_0 *wb = QROW(block_q8_0, w, r);
    for (int b = c0 / QK8_0; b < c1 / QK8_0; b++, y += QK8_0)
        axpy_multi_q32(_mm256_loadu_si256((const __m256i *)wb[b].qs), _cvtsh_ss(wb[b].d), nt, a, rows, y, ys);
}

#define RQ 4              /* the most rows and vectors a quantized tile holds */
#define TQN 8
#define R8 1              /* Q8_0 tile: rows x vectors */
#define T8 8
#define R4 1              /* Q4_0 tile: rows x vectors */
#define T4 4
#define F4 8              /* Q4_0 in chunks of 16: the most vectors of its few (hc_kernel.few_tm) */

/* hc_kernel.dots of Q8_0: DOTS_Q8 rows far apart with one vector, chunk by
 * chunk, each as dot_q8 (dots_q4's streams). */
#define DOTS_Q8 3
T static void dots_q8(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    const xq8 *xc = xa[0];
    const int nb = w->n / QK8_0;
    const block_q8_0 *row[DOTS_Q8];
    __m256 acc[DOTS_Q8];
    for (int s = 0; s < DOTS_Q8; s++) row[s] = QROW(block_q8_0, w, r[s]), acc[s] = _mm256_setzero_ps();
    for (int c = 0; c * Q8_CHUNK < nb; c++)
        _Pragma("GCC unroll 4")
        for (int s = 0; s < DOTS_Q8; s++) {
            block_q8_0 pad[Q8_CHUNK];
            const block_q8_0 *q = row[s] + c * Q8_CHUNK;
            if ((c + 1) * Q8_CHUNK > nb) q = hc_whole_chunk(q, nb - c * Q8_CHUNK, Q8_CHUNK, sizeof(block_q8_0), pad);
            acc[s] = q8_chunk(q, xc + c, acc[s]);
        }
    for (int s = 0; s < DOTS_Q8; s++) y[s] = hsum(acc[s]);
}

/* The Q8_0 tile, as dot_q8: whole chunks in order, then the last blocks
 * zero-padded to a chunk; each row chunk loaded once for the vectors, and
 * each block pair's weights held while all the vectors pass (the same int32
 * block sums as block_sums). */
T static void tile_q8(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    enum { Tn = T8 };
    const block_q8_0 *w = QROW(block_q8_0, wt, rows[0]);
    const xq8 *const *xc = (const xq8 *const *)xv;
    const int nb = wt->n / QK8_0;
    __m256 acc[TQN];
    wq8 wr;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < Tn; t++) acc[t] = _mm256_setzero_ps();
    for (int c = 0; c * Q8_CHUNK < nb; c++) {
        block_q8_0 pad[Q8_CHUNK];
        if ((c + 1) * Q8_CHUNK <= nb) q8_load(w + c * Q8_CHUNK, &wr);
        else q8_load(hc_whole_chunk(w + c * Q8_CHUNK, nb - c * Q8_CHUNK, Q8_CHUNK, sizeof(block_q8_0), pad), &wr);
        hc_prefetch_next_tile(w + c * Q8_CHUNK, sizeof(block_q8_0) * (size_t)nb, sizeof(block_q8_0) * Q8_CHUNK);
        __m256i u[2][TQN], S[TQN];
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            _Pragma("GCC unroll 8")
            for (int t = 0; t < Tn; t++) S[t] = q8_pair(&wr, xc[t] + c, 2 * h);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < Tn; t++) u[h][t] = sum_halves(S[t], q8_pair(&wr, xc[t] + c, 2 * h + 1), 0);
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(wr.dw, xc[t][c].d), _mm256_cvtepi32_ps(sum_halves(u[0][t], u[1][t], 1)), acc[t]);
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < Tn; t++) y[t] = hsum(acc[t]);
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

/* A block of 32 values v[0..4) rounded as quantize_row_q8_0_ref rounds
 * them, with the same arithmetic for finite values: the int8 values into qs,
 * their sum into *sum, the f32 scale returned. */
TI float q8_block(const __m256 v[4], int8_t *qs, int *sum)
{
    __m256 sign = _mm256_set1_ps(-0.0f), m = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    float d = amax / 127, id = d ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; j++) q[j] = roundf_epi32(_mm256_mul_ps(v[j], vid));
    /* packs interleave 128-bit lanes; the permute puts the bytes back in order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    *sum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1)));
    return d;
}

/* quantize_row_q8_0_ref, vectorised. */
T static void prepare_q8(const hc_weight *w, const float *x, void *act)
{
    block_q8_0 *y = act;
    int n = w->n, sum;
    for (int b = 0; b < n / QK8_0; b++, x += QK8_0) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 8 * j);
        y[b].d = (uint16_t)_cvtss_sh(q8_block(v, (int8_t *)y[b].qs, &sum), _MM_FROUND_TO_NEAREST_INT);
    }
}

const hc_kernel hc_avx2_q8_0 = { .prepare = prepare_q8, .arranged_bytes = arranged_q8, .arrange = arrange_q8,
                                 .dot = dot_q8, .tile = tile_q8, .rm = R8, .tm = T8, .tile_min = 4,
                                 .dots = dots_q8, .dots_rm = DOTS_Q8, .dots_when = HC_DOTS_ALL, .axpy = axpy_q8,
                                 .axpy_multi = axpy_multi_q8 };

/* ---- Q4_0: 16 blocks per step (a chunk, x16.h's), as two halves of 8
 * blocks each summed in integers to one int32 per block, so one convert and
 * one FMA cover 8 blocks. Rows in ggml's layout, or in chunks of 16
 * (hc-run's copy where Q4_0 runs on AVX2 or AVX-512, model_memory.c), which
 * load the codes with plain 32-byte loads and the scales with one, where
 * ggml's layout takes a 128-bit insert per two blocks and eight word
 * inserts per half: AVX2 decode read 25-26 GB/s of a 4096 x 11008 matrix in
 * ggml's layout, 29-31 in chunks of 16 (bench_kernels cpu avx2[-chunks]
 * 4096 11008 1). Both ways give each lane the same block's integer sum and
 * scales, so they have the same bits. ---- */

/* The activation arranged for a chunk (x16.h's hc_x16_act: HC_X16_GROUPS
 * for ggml's layout, HC_X16_PLANES for chunks of 16) as registers: half h
 * of lo[i] / hi[i] meets the codes of the chunk's lanes 8h .. 8h + 7, and
 * lane j of half h holds block 4(j % 4) + 2h + j / 4, as corr[h] and d[h]. */
typedef struct {
    __m256i lo[4][2], hi[4][2];
    __m256i corr[2];
    __m256 d[2];
} xq4;
_Static_assert(sizeof(xq4) == sizeof(hc_x16_act), "xq4 is hc_x16_act's bytes");

#define Q4_CHUNK HC_X16_CHUNK
#define Q4_CHUNK_BYTES (Q4_CHUNK * sizeof(block_q4_0))

T static void arrange_q4(const void *act, int n, void *xa) { hc_x16_arrange(act, n, HC_X16_GROUPS, 8, xa); }
T static void arrange_q4x16(const void *act, int n, void *xa) { hc_x16_arrange(act, n, HC_X16_PLANES, 8, xa); }

/* acc + half h's 8 block sums C (exact integers, so the order in which
 * either layout sums them does not matter) with their correction, times
 * their weight and activation scales: one convert and one FMA, the same in
 * the dot and the tile and from either layout. */
TI __m256 q4_scaled(__m256i C, __m256 dw, const xq4 *x, int h, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, x->d[h]), _mm256_cvtepi32_ps(_mm256_add_epi32(C, x->corr[h])), acc);
}

/* acc[t] + half h of the whole chunk at p (in chunks of 16) with chunk c of
 * activations xc[t], t < nt: plane by plane (one register of codes, its low
 * and high nibbles) against each vector, whose 16 pair sums of a block a
 * lane stay in int16 (|s| <= 16 * 15 * 128) until one vpmaddwd: few enough
 * registers that the tile's 4 vectors keep their sums and accumulators in
 * them. */
TI void q4x16_half(const uint8_t *p, int h, const xq4 *const *xc, int c, int nt, __m256 acc[F4])
{
    __m256i s[F4];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_si256();
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {
        __m256i lo, hi;
        split_nibbles(_mm256_loadu_si256((const __m256i *)(p + 32 + 64 * i + 32 * h)), &lo, &hi);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) {
            s[t] = _mm256_add_epi16(s[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xc[t][c].lo[i][h]),
                                                           _mm256_maddubs_epi16(hi, xc[t][c].hi[i][h])));
            __asm__("" : "+x"(s[t]));   /* summed plane by plane: GCC's reassociated sums held every product */
        }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++)
        acc[t] = q4_scaled(_mm256_madd_epi16(s[t], _mm256_set1_epi16(1)), dw, xc[t] + c, h, acc[t]);
}

/* The same from ggml's 16 blocks at q: blocks 4i + 2h and 4i + 2h + 1 as one
 * register per i (one per 128-bit lane), their partial sums reduced to the
 * same lanes by block_sums, the 8 scales gathered by word inserts. */
TI void q4_pairs_half(const block_q4_0 *q, int h, const xq4 *const *xc, int c, int nt, __m256 acc[F4])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i lo[4], hi[4];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {
        split_nibbles(_mm256_loadu2_m128i((const __m128i *)q[4 * i + 2 * h + 1].qs, (const __m128i *)q[4 * i + 2 * h].qs),
                      &lo[i], &hi[i]);
    }
    const int b = 2 * h;
    const __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)q[b].d, (short)q[b + 4].d, (short)q[b + 8].d,
                                                     (short)q[b + 12].d, (short)q[b + 1].d, (short)q[b + 5].d,
                                                     (short)q[b + 9].d, (short)q[b + 13].d));
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) {
        const xq4 *x = xc[t] + c;
        __m256i P[4];   /* int16 pairs within ±2·15·128 each, ±4·15·128 summed */
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++)
            P[i] = _mm256_madd_epi16(
                _mm256_add_epi16(_mm256_maddubs_epi16(lo[i], x->lo[i][h]), _mm256_maddubs_epi16(hi[i], x->hi[i][h])),
                ones);
        acc[t] = q4_scaled(block_sums(P), dw, x, h, acc[t]);
    }
}

/* Chunk c of a row of nb blocks at q as a whole chunk: itself, or its
 * blocks zero-padded into pad (no codes, no scales: the lanes add 0). */
TI const uint8_t *q4_whole(const uint8_t *q, int nb, int c, uint8_t pad[Q4_CHUNK_BYTES], const int x16)
{
    const uint8_t *p = q + (size_t)c * Q4_CHUNK_BYTES;
    const int t = nb - c * Q4_CHUNK;
    if (t >= Q4_CHUNK || !x16) return hc_whole_chunk(p, t, Q4_CHUNK, sizeof(block_q4_0), pad);
    hc_x16_pad(GGML_TYPE_Q4_0, p, t, pad);
    return pad;
}

/* acc[t] + row q (nb blocks) · activation xc[t] for t < nt, chunk by chunk,
 * each half unpacked once for the nt vectors; with next (the tile), the
 * same chunk of the row next bytes on is fetched into L2 meanwhile (the
 * dot's rows come by the hardware's prefetch: a software one PF_Q ahead
 * made them slower). */
TI void q4_rows(const uint8_t *q, int nb, const xq4 *const *xc, int nt, size_t next, __m256 acc[F4], const int x16)
{
    for (int c = 0; c * Q4_CHUNK < nb; c++) {
        uint8_t pad[Q4_CHUNK_BYTES];
        if (next) hc_prefetch_next_tile(q + Q4_CHUNK_BYTES * (size_t)c, next, Q4_CHUNK_BYTES);
        const uint8_t *p = q4_whole(q, nb, c, pad, x16);
        _Pragma("GCC unroll 1")   /* a half at a time: two halves' registers do not fit the 16 */
        for (int h = 0; h < 2; h++) {
            if (x16) q4x16_half(p, h, xc, c, nt, acc);
            else q4_pairs_half((const block_q4_0 *)p, h, xc, c, nt, acc);
        }
    }
}

TI float dot_q4_as(const hc_weight *w, int r, const void *xa, const int x16)
{
    const xq4 *x = xa;
    __m256 acc[F4] = { _mm256_setzero_ps() };
    q4_rows((const uint8_t *)QROW(block_q4_0, w, r), w->n / QK8_0, &x, 1, 0, acc, x16);
    return hsum(acc[0]);
}

T static float dot_q4(const hc_weight *w, int r, const void *xa) { return dot_q4_as(w, r, xa, 0); }
T static float dot_q4x16(const hc_weight *w, int r, const void *xa) { return dot_q4_as(w, r, xa, 1); }

/* hc_kernel.dots of Q4_0: DOTS_Q4 rows far apart (weight.c's dots_streams)
 * with one vector, chunk by chunk, each row's sums in its dot's order, so
 * its bits. One core here reads more ascending streams at once than one:
 * on Zen 3 the single row streamed 8.1 GB/s and a plain read 8.9, where
 * F32's three streams read 12.8 (bench_kernels pool avx2 4096 11008 1;
 * docs/measurements.md, "Zen 3"). */
#define DOTS_Q4 3
TI void dots_q4_as(const hc_weight *w, const int *r, const void *const *xa, float *y, const int x16)
{
    const xq4 *x = xa[0];
    const int nb = w->n / QK8_0;
    const uint8_t *row[DOTS_Q4];
    __m256 acc[DOTS_Q4][F4];
    for (int s = 0; s < DOTS_Q4; s++) row[s] = (const uint8_t *)QROW(block_q4_0, w, r[s]), acc[s][0] = _mm256_setzero_ps();
    for (int c = 0; c * Q4_CHUNK < nb; c++)
        _Pragma("GCC unroll 4")
        for (int s = 0; s < DOTS_Q4; s++) {
            uint8_t pad[Q4_CHUNK_BYTES];
            const uint8_t *p = q4_whole(row[s], nb, c, pad, x16);
            _Pragma("GCC unroll 1")
            for (int h = 0; h < 2; h++) {
                if (x16) q4x16_half(p, h, &x, c, 1, acc[s]);
                else q4_pairs_half((const block_q4_0 *)p, h, &x, c, 1, acc[s]);
            }
        }
    for (int s = 0; s < DOTS_Q4; s++) y[s] = hsum(acc[s][0]);
}

T static void dots_q4(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    dots_q4_as(w, r, xa, y, 0);
}
T static void dots_q4x16(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    dots_q4_as(w, r, xa, y, 1);
}

/* The Q4_0 tile: one row (R4) with T4 vectors, as the dot. */
TI void tile_q4_as(const hc_weight *wt, const int *rows, const void *const *xv, float *y, const int x16)
{
    const int nb = wt->n / QK8_0;
    __m256 acc[F4];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T4; t++) acc[t] = _mm256_setzero_ps();
    q4_rows((const uint8_t *)QROW(block_q4_0, wt, rows[0]), nb, (const xq4 *const *)xv, T4,
            sizeof(block_q4_0) * (size_t)nb * R4, acc, x16);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < T4; t++) y[t] = hsum(acc[t]);
}

T static void tile_q4(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    tile_q4_as(wt, rows, xv, y, 0);
}

T static void tile_q4x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    tile_q4_as(wt, rows, xv, y, 1);
}

/* The tile for steps of up to F4 vectors (hc_kernel.few: several sequences
 * decoded at once), the row's chunks in chunks of 16 unpacked once for all
 * of them: with T4 a step of 8 read each row twice. The vectors' int16
 * sums stay in registers, their accumulators (touched once per half chunk)
 * where the compiler puts them; the vector count a constant in each call
 * (a count of 3, 5 or 7 computes one copy; fewer than 3 go by dot). */
T static void few_q4x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    const int nb = wt->n / QK8_0, tn = hc_real_vectors(xv, F4);
    const uint8_t *q = (const uint8_t *)QROW(block_q4_0, wt, rows[0]);
    const xq4 *const *xc = (const xq4 *const *)xv;
    const size_t next = sizeof(block_q4_0) * (size_t)nb * R4;
    __m256 acc[F4];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < F4; t++) acc[t] = _mm256_setzero_ps();
    if (tn <= 4) q4_rows(q, nb, xc, 4, next, acc, 1);
    else if (tn <= 6) q4_rows(q, nb, xc, 6, next, acc, 1);
    else q4_rows(q, nb, xc, F4, next, acc, 1);
    for (int t = 0; t < tn; t++) y[t] = hsum(acc[t]);
    hc_copy_edge(y, tn, R4, F4);
}

/* AXPY block by block, in either layout (x16.h's hc_q4_0_block). */
T static void axpy_q4(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    for (int b = c0 / QK4_0; b < c1 / QK4_0; b++, y += QK4_0) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        axpy_q32(_mm256_sub_epi8(nibbles(wb->qs), _mm256_set1_epi8(8)), _cvtsh_ss(wb->d), a, y);
    }
}

T static void axpy_multi_q4(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                            float *y, size_t ys)
{
    for (int b = c0 / QK4_0; b < c1 / QK4_0; b++, y += QK4_0) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        axpy_multi_q32(_mm256_sub_epi8(nibbles(wb->qs), _mm256_set1_epi8(8)), _cvtsh_ss(wb->d), nt, a, rows, y, ys);
    }
}

#define Q4_KERNEL .prepare = prepare_q8, .arranged_bytes = hc_x16_act_bytes, .rm = R4, .tm = T4, .tile_min = 3, \
                  .axpy = axpy_q4, .axpy_multi = axpy_multi_q4, .dots_rm = DOTS_Q4, .dots_when = HC_DOTS_ALL
const hc_kernel hc_avx2_q4_0 = { Q4_KERNEL, .arrange = arrange_q4, .dot = dot_q4, .tile = tile_q4, .dots = dots_q4 };
const hc_kernel hc_avx2_q4x16 = { Q4_KERNEL, .arrange = arrange_q4x16, .dot = dot_q4x16, .tile = tile_q4x16,
                                   .dots = dots_q4x16, .few = few_q4x16, .few_tm = F4 };

/* ---- INT4-GPTQ (kernels_gptq.h) on the int8 activation: 8 blocks (128
 * code bytes, half an activation chunk) per step, summed in integers to one
 * int32 per block as Q4_0's chunks are (the codes are unsigned, so no
 * correction), then one multiply (activation scale by group scale, gathered
 * per block) and one FMA; the zero terms ({s, -s·z} pairs times {0, X̃}) go
 * into the same accumulator after the last block. Other group sizes take the
 * reference. ---- */

#define RG 2              /* GPTQ tile: rows x vectors */
#define TG 4
#define FG 8              /* the most vectors of its few (hc_kernel.few_tm) */

/* One row's step: blocks 2p, 2p+1 in lo[p] / hi[p] (low / high nibbles, one
 * block per 128-bit lane), each block's group scale in lane 4m+p (block 2p+m). */
typedef struct {
    __m256i lo[4], hi[4];
    __m256 s;
} wgq;

/* Half h of chunk c of a row (codes at row, nb blocks; 8 blocks a step):
 * at row, or zero-padded in pad when the row ends within it. */
TI const uint8_t *gq_half(const uint8_t *row, int nb, int c, int h, uint8_t pad[128])
{
    const int k = 2 * c + h;
    return hc_whole_chunk(row + 128 * (size_t)k, nb - 8 * k, 8, 16, pad);
}

/* The group scales of half h of a chunk's blocks from a row's n2 floats of
 * pairs sm (n2 < 0: groups of 32); x: the chunk of the activation (its
 * sidx8 names them), in its lane order. */
TI __m256 gq_scales(const float *sm, int n2, const hc_gptq_xchunk *x, int h)
{
    const __m256i idx = _mm256_loadu_si256((const __m256i *)(x->sidx8 + 8 * h));
    if (n2 < 0) return _mm256_i32gather_ps(sm, idx, 4);   /* groups of 32: the 8 blocks have 8 scales */
    /* larger groups: the step's blocks lie in at most 4 groups from the
     * first one's (lane 0), whose 4 pairs one load holds */
    const int base = x->sidx8[8 * h];
    /* the pairs are a second stream: fetched ahead, AVX2 GPTQ decode read
     * 21-23 GB/s instead of 17-19 (the AVX-512 kernel lost by it) */
    _mm_prefetch((const char *)(sm + base) + 1024, _MM_HINT_T0);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 win = _mm256_maskload_ps(sm + base, _mm256_cmpgt_epi32(_mm256_set1_epi32(n2 - base), lane));
    return _mm256_permutevar8x32_ps(win, _mm256_sub_epi32(idx, _mm256_set1_epi32(base)));
}

/* The half's codes at p (as the activation's lo[p] / hi[p]) and scales. */
TI void gq_load(const uint8_t *p, const float *sm, int n2, const hc_gptq_xchunk *x, int h, wgq *w)
{
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) split_nibbles(_mm256_loadu_si256((const __m256i *)(p + 32 * i)), &w->lo[i], &w->hi[i]);
    w->s = gq_scales(sm, n2, x, h);
}

/* The half's codes at p in planes (the activation's hc_gptq_xplanes8: lane
 * 4m + q of plane i holds block 2q + m's bytes 4i .. 4i + 3), and scales:
 * loads of blocks (2q, 2q + 1), one per 128-bit lane, transposed by dwords
 * within the lanes. With the planes the tile's vectors need no reduction
 * between lanes per block (block_sums: 3 sum_halves each). */
TI void gq_load_planes(const uint8_t *p, const float *sm, int n2, const hc_gptq_xchunk *x, int h, wgq *w)
{
    __m256i b[4], t[4];
    #pragma GCC unroll 4
    for (int q = 0; q < 4; q++) b[q] = _mm256_loadu_si256((const __m256i *)(p + 32 * q));
    t[0] = _mm256_unpacklo_epi32(b[0], b[1]);
    t[1] = _mm256_unpackhi_epi32(b[0], b[1]);
    t[2] = _mm256_unpacklo_epi32(b[2], b[3]);
    t[3] = _mm256_unpackhi_epi32(b[2], b[3]);
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        split_nibbles(i % 2 ? _mm256_unpackhi_epi64(t[i / 2], t[i / 2 + 2]) : _mm256_unpacklo_epi64(t[i / 2], t[i / 2 + 2]),
                      &w->lo[i], &w->hi[i]);
    w->s = gq_scales(sm, n2, x, h);
}

/* acc + (d_b·s_g)·isum_b for the 8 block sums isum of half h of activation
 * chunk x: the one float step of the dot and the tile, so their bits. */
TI __m256 gq_scaled(__m256i isum, const wgq *w, const hc_gptq_xchunk *x, int h, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(x->d8 + 8 * h), w->s), _mm256_cvtepi32_ps(isum), acc);
}

/* acc + the step's 8 blocks (half h of activation chunk c). */
TI __m256 gq_fma(const wgq *w, const hc_gptq_xchunk *c, int h, __m256 acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i P[4];
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        /* blocks 8h + 2p, +1 of the chunk: group (4h + p) / 2, pieces 2((4h + p) % 2), +1 */
        const int q = 4 * h + p;
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(c->lo[q / 2] + 32 * (q % 2)));
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(c->hi[q / 2] + 32 * (q % 2)));
        /* int16 pairs within ±2·15·127 each, ±4·15·127 summed */
        P[p] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w->lo[p], xl), _mm256_maddubs_epi16(w->hi[p], xh)),
                                 ones);
    }
    return gq_scaled(block_sums(P), w, c, h, acc);
}

/* gq_fma over planes (gq_load_planes; xp: the chunk's hc_gptq_xplanes8, x
 * its xchunk): the same integer sums into gq_scaled. */
TI __m256 gq_fma_planes(const wgq *w, const hc_gptq_xplanes8 *xp, const hc_gptq_xchunk *x, int h, __m256 acc)
{
    /* a vpmaddubsw's pairs are within ±2·15·127, the 8 summed within ±30480:
     * int16, in one chain (the tile's other vectors hide its latency) */
    __m256i s = _mm256_maddubs_epi16(w->lo[0], _mm256_loadu_si256((const __m256i *)xp->lo[0] + h));
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        if (i) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w->lo[i], _mm256_loadu_si256((const __m256i *)xp->lo[i] + h)));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w->hi[i], _mm256_loadu_si256((const __m256i *)xp->hi[i] + h)));
    }
    return gq_scaled(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), w, x, h, acc);
}

/* acc[t] + the zero terms of a row with pairs sm for nt vectors: the n2
 * floats of its pairs times those of vector t's (xv[t]'s hc_gptq_xz), 8 at
 * a time in order, the vectors' chains side by side (as AVX-512's: one pair
 * after another they were bound by the chains' latency). */
TI void gq_zeros(const hc_gptq *g, const float *sm, const void *const *xv, int nt, __m256 *acc)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int n2 = 2 * g->n_groups;
    for (int i = 0; i < n2; i += 8) {
        const __m256 s = _mm256_maskload_ps(sm + i, _mm256_cmpgt_epi32(_mm256_set1_epi32(n2 - i), lane));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[t] = _mm256_fmadd_ps(s, _mm256_loadu_ps(hc_gptq_xz(g, xv[t]) + i), acc[t]);
    }
}

/* hc_gptq_act_prepare's int8 activation, each block rounded by q8_block
 * (the same bytes: test_gptq_kernel): x gathered by perm, positions past n
 * zero (kernels_avx512.c's prepare_gptq). */
T static void prepare_gptq(const hc_weight *w, const float *x, void *act)
{
    const hc_gptq *g = w->ext;
    if (!hc_gptq_act_begin(g, x, act)) return;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int b = 0; b < g->kp / 32; b++) {
        __m256 v[4];
        for (int j = 0; j < 4; j++) {
            const int k = 32 * b + 8 * j;
            const __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(g->n - k), lane);   /* lanes k + i < n */
            if (g->perm)
                v[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, _mm256_maskload_epi32(g->perm + k, in),
                                                _mm256_castsi256_ps(in), 4);
            else
                v[j] = _mm256_maskload_ps(x + k, in);
        }
        int8_t q[32];
        int sum;
        const float d = q8_block(v, q, &sum);
        hc_gptq_act_block(g, act, b, q, d, sum);
    }
}

T static float dot_gptq(const hc_weight *w, int r, const void *act)
{
    const hc_gptq *g = w->ext;
    if (!hc_gptq_int8(g)) return hc_ref_gptq.dot(w, r, act);
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r);
    const hc_gptq_xchunk *x = act;
    const int nb = g->kp / 32, n2 = g->gs == 32 ? -1 : 2 * g->n_groups;
    __m256 acc = _mm256_setzero_ps();
    wgq wc;
    uint8_t pad[128];
    for (int c = 0; 16 * c < nb; c++) {
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            if (16 * c + 8 * h >= nb) break;
            const char *step = (const char *)row + 128 * (size_t)(2 * c + h);
            _mm_prefetch(step + PF_Q, _MM_HINT_T0);
            _mm_prefetch(step + PF_Q + 64, _MM_HINT_T0);
            gq_load(gq_half(row, nb, c, h, pad), sm, n2, x + c, h, &wc);
            acc = gq_fma(&wc, x + c, h, acc);
        }
    }
    gq_zeros(g, sm, &act, 1, &acc);
    return hsum(acc);
}

/* The GPTQ tile, as dot_gptq, for the first nt vectors (y[t * RG + r]):
 * each row step unpacked once for the vectors, the next row tile's step
 * fetched into L2 meanwhile (hc_prefetch_next_tile, as the AVX-512 tile; the
 * row's own bytes PF_Q ahead, as the dot fetches them, held 11008-wide rows
 * below 4096-wide ones). */
TI void gq_tile(const hc_gptq *g, const int *rows, const void *const *xv, int nt, float *y)
{
    const int nb = g->kp / 32, n2 = g->gs == 32 ? -1 : 2 * g->n_groups;
    const hc_gptq_xchunk *const *x = (const hc_gptq_xchunk *const *)xv;
    const hc_gptq_xplanes8 *xp[FG];
    for (int t = 0; t < nt; t++) xp[t] = hc_gptq_planes8(g, xv[t]);
    const uint8_t *w[RG];
    const float *sm[RG];
    hc_gptq_tile_rows(g, rows, RG, w, sm);
    uint8_t pad[128];
    __m256 acc[RG][FG];
    _Pragma("GCC unroll 2")
    for (int r = 0; r < RG; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = _mm256_setzero_ps();
    for (int c = 0; 16 * c < nb; c++) {
        _Pragma("GCC unroll 2")
        for (int h = 0; h < 2; h++) {
            if (16 * c + 8 * h >= nb) break;
            _Pragma("GCC unroll 2")
            for (int r = 0; r < RG; r++) {
                wgq wc;
                gq_load_planes(gq_half(w[r], nb, c, h, pad), sm[r], n2, x[0] + c, h, &wc);
                hc_prefetch_next_tile(w[r] + 128 * (size_t)(2 * c + h), (size_t)g->kp / 2 * RG, 128);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < nt; t++) acc[r][t] = gq_fma_planes(&wc, xp[t] + c, x[t] + c, h, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < RG; r++) {
        gq_zeros(g, sm[r], xv, nt, acc[r]);
        for (int t = 0; t < nt; t++) y[t * RG + r] = hsum(acc[r][t]);
    }
}

T static void tile_gptq(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    const hc_gptq *g = wt->ext;
    if (!hc_gptq_int8(g)) hc_ref_gptq_tile(wt, rows, RG, xv, TG, y);
    else gq_tile(g, rows, xv, TG, y);
}

/* The tile for steps of up to FG vectors (hc_kernel.few): with TG a step
 * of 8 read each row tile twice. The vector count a constant in each call
 * (a count of 3, 5 or 7 computes one copy; fewer than 3 go by dot). */
T static void few_gptq(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    const hc_gptq *g = wt->ext;
    const int tn = hc_real_vectors(xv, FG);
    if (!hc_gptq_int8(g)) hc_ref_gptq_tile(wt, rows, RG, xv, FG, y);
    else if (tn <= 4) gq_tile(g, rows, xv, 4, y);
    else if (tn <= 6) gq_tile(g, rows, xv, 6, y);
    else gq_tile(g, rows, xv, FG, y);
    hc_copy_edge(y, tn, RG, FG);
}

/* Down columns (groups of one element, no perm: kernels_gptq.h), 8 elements
 * per step: y += a·(s·q + (−s·z)) with separate multiplies and adds in the
 * reference's order, so its bits; other GPTQ rows take the reference. */
T static void axpy_gptq(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const hc_gptq *g = w->ext;
    if (g->gs != 1 || g->perm || c0 % 8) {
        hc_ref_gptq_axpy(w, r, c0, c1, a, y);
        return;
    }
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r);
    const __m256 va = _mm256_set1_ps(a);
    int c = c0;
    for (; c + 8 <= c1; c += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(row + (c / 32) * 16 + c % 16));
        if (c % 32 >= 16) b = _mm_srli_epi16(b, 4);
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(15))));
        /* pairs (s0 m0 .. s3 m3), (s4 m4 .. s7 m7) -> s0..s7 and m0..m7 */
        const __m256 p0 = _mm256_loadu_ps(sm + 2 * c), p1 = _mm256_loadu_ps(sm + 2 * c + 8);
        const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 m = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 v = _mm256_add_ps(_mm256_mul_ps(s, q), m);
        _mm256_storeu_ps(y + (c - c0), _mm256_add_ps(_mm256_loadu_ps(y + (c - c0)), _mm256_mul_ps(va, v)));
    }
    if (c < c1) hc_ref_gptq_axpy(w, r, c, c1, a, y + (c - c0));
}

const hc_kernel hc_avx2_gptq = { .prepare = prepare_gptq, .dot = dot_gptq, .tile = tile_gptq, .rm = RG,
                                 .tm = TG, .tile_min = 3, .few = few_gptq, .few_tm = FG, .axpy = axpy_gptq };
#endif
