/* AVX-512 (F/BW/VL/DQ + VNNI) kernels: 16 floats per register, two Q8_0
 * blocks per register, Q4_0 16 blocks per step reduced to one int32 per block,
 * masked loads for the tails. Selected at run time by kernels.c; CPUs with
 * AVX-512 but no VNNI (Skylake-SP) run the AVX2 kernels.
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

#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TI static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

/* The B = 1 loops read one ascending stream per thread (F32 rows, and F16
 * and BF16 rows longer than 4096: several, through hc_kernel.dots in
 * weight.c). Software prefetch:
 * none in the float, Q8_0, Q4_0 and GPTQ dots (on Zen 4 the float dot's 2 KiB
 * ahead halved F16, and the quantized dots' 4 KiB ahead, which once lifted
 * Q4_0 from 11 to 24 GB/s, cost Q8_0 and Q4_0 10-30 % once their arithmetic
 * became the integer-sum kernels below; docs/design/kernels.md, "Decode");
 * none in the streams either (prefetcht0/t1/t2/nta 1-8 KiB ahead in the F16
 * streams: even or slower, docs/design/kernels.md); the F16 few-vector,
 * Q8_0, Q4_0 and GPTQ tiles fetch the next row tile into L2 while they
 * compute (few_pass, hc_prefetch_next_tile). */

/* ---- F32 / F16 / BF16: one body, specialised by the constant k (a ggml
 * type) when inlined ---- */

/* Elements [i, i+16) masked by m (lanes outside m read nothing and are zero). */
TI __m512 load16(int k, const void *p, int i, __mmask16 m)
{
    if (k == GGML_TYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (k == GGML_TYPE_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

TI __mmask16 tail_mask(int m) { return (__mmask16)((1u << m) - 1); }

/* The single-row dots keep two accumulators a0, a1 and return
 * reduce_add(a0 + a1); which elements go to which differs by type, and the
 * register tile (below) repeats exactly that order for every pair.
 *
 * F16 (dot_steps): a0 gets elements [32c, 32c + 16), a1
 * [32c + 16, 32c + 32) for c = 0, 1, ...; then a0 one more 16-element step,
 * a1 the masked tail. Two FMA chains side by side in one ascending stream:
 * F16 decode is the most sensitive to the dot's shape (every other order
 * tried lost 10-15 % of its memory speed, docs/design/kernels.md). The loop
 * unrolled twice (the same order): a 4096-wide row's stream went from
 * 0.74-0.85 to 0.90-0.93 of a plain read (fewer instructions in flight per
 * cache line); four times was 0.87-0.99, no better. */
TI float dot_steps(int k, const void *row, const float *x, int n)
{
    const __mmask16 all = 0xffff;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int i = 0;
    _Pragma("GCC unroll 2")
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(load16(k, row, i, all), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(load16(k, row, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);
    }
    if (i + 16 <= n) {
        a0 = _mm512_fmadd_ps(load16(k, row, i, all), _mm512_loadu_ps(x + i), a0);
        i += 16;
    }
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        a1 = _mm512_fmadd_ps(load16(k, row, i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* F32 (dot_chunks): the row is cut into chunks of CHUNK elements, a0 sums
 * the even chunks and a1 the odd ones, each chunk in ascending 16-element
 * steps, the tail of the row masked. At B = 1 the row is read chunk after
 * chunk as one ascending stream and the out-of-order core overlaps the two
 * chains; the tile needs one accumulator per (row, vector) pair for a chunk,
 * which lets it hold 4 x 6 pairs. (Accumulators over the two halves of the
 * row, or chunks read side by side, halved decode: two streams per row;
 * chunks of 256 or 512 elements cost the tile 10 % or 6 % in parking.) */
#define CHUNK 1024        /* elements */

#define DOTS_F32 3        /* F32 rows hc_kernel.dots reads side by side */

/* acc[r] + row[r] · x over elements [i0, i1) (none when i0 >= i1) in
 * 16-element steps, the last one masked at i1, for r < R. */
TI void chunk_sums(int k, int R, const void *const *row, const float *x, int i0, int i1, __m512 acc[DOTS_F32])
{
    int i = i0;
    for (; i + 16 <= i1; i += 16) {
        __m512 xv = _mm512_loadu_ps(x + i);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(load16(k, row[r], i, 0xffff), xv, acc[r]);
    }
    if (i < i1) {
        __mmask16 m = tail_mask(i1 - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(load16(k, row[r], i, m), xv, acc[r]);
    }
}

/* y[r] = dot_chunks of row[r] for r < R, the rows side by side. */
TI void rows_chunks(int k, int R, const void *const *row, const float *x, int n, float *y)
{
    __m512 a0[DOTS_F32], a1[DOTS_F32];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_ps();
    for (int c = 0; c < n; c += 2 * CHUNK) {
        chunk_sums(k, R, row, x, c, n - c < CHUNK ? n : c + CHUNK, a0);
        chunk_sums(k, R, row, x, c + CHUNK, n - c < 2 * CHUNK ? n : c + 2 * CHUNK, a1);
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++) y[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
}

TI float dot_chunks(int k, const void *row, const float *x, int n)
{
    float y;
    rows_chunks(k, 1, &row, x, n, &y);
    return y;
}

T static float dot_f(const hc_weight *w, int r, const void *x)
{
    const char *row = hc_float_row(w, r, 0);
    return w->type == GGML_TYPE_F32 ? dot_chunks(GGML_TYPE_F32, row, x, w->n) : dot_steps(GGML_TYPE_F16, row, x, w->n);
}

TI void axpy_float(int k, const void *row, int n, float a, float *y)
{
    __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, load16(k, row, i, m), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

T static void axpy_f(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const char *row = hc_float_row(w, r, c0);
    if (w->type == GGML_TYPE_F32) axpy_float(GGML_TYPE_F32, row, c1 - c0, a, y);
    else if (w->type == GGML_TYPE_F16) axpy_float(GGML_TYPE_F16, row, c1 - c0, a, y);
    else axpy_float(GGML_TYPE_BF16, row, c1 - c0, a, y);
}

/* axpy_float's FMAs for nt outputs, 64 columns of the row in registers at a time. */
TI void axpy_multi_float(int k, const void *row, int n, int nt, const float *a, const int32_t *rows, float *y,
                         size_t ys)
{
    const __mmask16 all = 0xffff;
    int i = 0;
    for (; i + 64 <= n; i += 64) {   /* four registers of the row, then every output */
        __m512 v[4] = { load16(k, row, i, all), load16(k, row, i + 16, all), load16(k, row, i + 32, all),
                        load16(k, row, i + 48, all) };
        for (int t = 0; t < nt; t++) {
            float *yt = y + (size_t)rows[t] * ys + i;
            _Pragma("GCC unroll 4")
            for (int j = 0; j < 4; j++)
                _mm512_storeu_ps(yt + 16 * j, _mm512_fmadd_ps(_mm512_set1_ps(a[t]), v[j], _mm512_loadu_ps(yt + 16 * j)));
        }
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? all : tail_mask(n - i);
        __m512 v = load16(k, row, i, m);
        for (int t = 0; t < nt; t++) {
            float *yt = y + (size_t)rows[t] * ys + i;
            _mm512_mask_storeu_ps(yt, m, _mm512_fmadd_ps(_mm512_set1_ps(a[t]), v, _mm512_maskz_loadu_ps(m, yt)));
        }
    }
}

T static void axpy_multi_f(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                           float *y, size_t ys)
{
    /* the type as a constant in each call, so the inlined loads are specialised */
    const char *row = hc_float_row(w, r, c0);
    switch (w->type) {
    case GGML_TYPE_F32: axpy_multi_float(GGML_TYPE_F32, row, c1 - c0, nt, a, rows, y, ys); break;
    case GGML_TYPE_F16: axpy_multi_float(GGML_TYPE_F16, row, c1 - c0, nt, a, rows, y, ys); break;
    default: axpy_multi_float(GGML_TYPE_BF16, row, c1 - c0, nt, a, rows, y, ys); break;
    }
}

/* The float tile: RM rows x TM vectors. Per 16 elements each activation
 * load is shared by the rows and each weight load (and F16 widening) by
 * the vectors, and every pair gets its dot's FMAs in its dot's order, so the
 * result is the dot's bits.
 * - F32 (tile_chunks): 4 x 6 pairs, one accumulator each in registers (24
 *   of the 32, with the 6 activation loads and a weight register; 4 + 6
 *   loads per 24 FMAs, llamafile's tinyBLAS shape), chunk by chunk into the
 *   even or odd chunks' set, the other set parked in memory meanwhile. F32
 *   is the type whose 4-byte weights and activations made the old 4 x 3
 *   tile L2-bound (docs/design/kernels.md).
 * - F16 (tile_steps): dot_steps' two accumulators of 4 x 3 pairs in
 *   registers for the whole row, for vectors 0-2 and then 3-5. */
#define RM 4              /* rows per tile */
#define TM 6              /* vectors per tile */
#define TS 3              /* vectors per pass of tile_steps */
#define DOTS_FETCH 2048   /* bytes ahead each B = 1 F16/BF16 stream fetches (hc_decode_streams) */

/* acc[r][t] += w_r[i..i+16) * x_t[i..i+16) for r < RM, t < Tn (lanes outside m: zero). */
TI void step(int k, int Tn, const void *const *w, const float *const *x, int i, __mmask16 m, __m512 acc[RM][TM])
{
    __m512 xv[TM];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < Tn; t++) xv[t] = _mm512_maskz_loadu_ps(m, x[t] + i);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++) {
        __m512 wv = load16(k, w[r], i, m);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
}

/* park[r][t] += chunk_sums' steps over elements [i0, i1), t < nt; with next
 * (the tile, not the B = 1 streams, whose rows are apart), one line of row r
 * + RM, the next row tile's, is fetched into L2 per step, as in the F16
 * few-vector tile. The fetches are unrolled, as in every tile: left a loop,
 * GCC kept it one (a load of the row pointer, a compare and a branch per
 * row, the index spilled beside the 24 accumulators) and the F32 tile ran
 * 10-12 % slower on the Intel Xeon (docs/measurements.md). */
TI void chunk_tile(int k, int nt, int next, const void *const *w, const float *const *x, int n, int i0, int i1,
                   float park[RM][TM][16])
{
    __m512 acc[RM][TM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_load_ps(park[r][t]);
    int i = i0;
    for (; i + 16 <= i1; i += 16) {
        if (next)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < RM; r++) _mm_prefetch((const char *)w[r] + RM * 4 * (size_t)n + 4 * i, _MM_HINT_T1);
        step(k, nt, w, x, i, 0xffff, acc);
    }
    if (i < i1) step(k, nt, w, x, i, tail_mask(i1 - i), acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) _mm512_store_ps(park[r][t], acc[r][t]);
}

/* y[t * RM + r] for t < nt from the even and odd chunks' parked sums. */
TI void park_sums(int nt, const float park[2][RM][TM][16], float *y)
{
    for (int r = 0; r < RM; r++)
        for (int t = 0; t < nt; t++)
            y[t * RM + r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_load_ps(park[0][r][t]), _mm512_load_ps(park[1][r][t])));
}

/* y[t * RM + r] = dot_chunks(k, w[r], x[t], n) for r < RM, t < nt (a
 * constant at every call). */
TI void tile_chunks(int k, int nt, int next, const void *const *w, const float *const *x, int n, float *y)
{
    _Alignas(64) float park[2][RM][TM][16];
    memset(park, 0, sizeof park);
    for (int c = 0; c < n; c += CHUNK)
        chunk_tile(k, nt, next, w, x, n, c, n - c < CHUNK ? n : c + CHUNK, park[c / CHUNK % 2]);
    park_sums(nt, (const float (*)[RM][TM][16])park, y);
}

/* The vectors the F32 tile computes: those it really has (see
 * hc_real_vectors), rounded up to 2, 4 or TM. */
TI int f32_vectors(const void *const *x)
{
    int tn = hc_real_vectors(x, TM);
    return tn > 4 ? TM : tn > 2 ? 4 : 2;
}

/* The F32 tile over f32_vectors' vectors, the copies of an edge after. */
TI void tile_chunks_any(const void *const *w, const float *const *x, int n, float *y)
{
    int nt = f32_vectors((const void *const *)x);
    if (nt == TM) tile_chunks(GGML_TYPE_F32, TM, 1, w, x, n, y);
    else if (nt == 4) tile_chunks(GGML_TYPE_F32, 4, 1, w, x, n, y);
    else tile_chunks(GGML_TYPE_F32, 2, 1, w, x, n, y);
    hc_copy_edge(y, nt, RM, TM);
}

/* The F32 tile in column blocks of CHUNK (hc_kernel.tile_part): weight.c
 * keeps a vector tile's block in L1 while a group of row tiles passes over
 * it, where tile_chunks read its six vectors' chunk from L2 again for each
 * row tile (4 weight and 6 activation lines per 24 FMAs: 69-77 % of the FMA
 * peak at B = 128 on 11008-wide rows, 76-80 % now). Each block is one chunk,
 * into its set of tile_chunks' parked accumulators: its bits. */
#define PARK_F32 (2 * RM * TM * 16)

T static void part_f32(const hc_weight *w, const int *r, const void *const *x, int c0, int c1, float *park)
{
    const void *rows[RM];
    const float *const *xf = (const float *const *)x;
    float (*set)[TM][16] = ((float (*)[RM][TM][16])park)[c0 / CHUNK % 2];
    int nt = f32_vectors(x);
    for (int i = 0; i < RM; i++) rows[i] = hc_float_row(w, r[i], 0);
    if (nt == TM) chunk_tile(GGML_TYPE_F32, TM, 1, rows, xf, w->n, c0, c1, set);
    else if (nt == 4) chunk_tile(GGML_TYPE_F32, 4, 1, rows, xf, w->n, c0, c1, set);
    else chunk_tile(GGML_TYPE_F32, 2, 1, rows, xf, w->n, c0, c1, set);
}

T static void sum_f32(const hc_weight *w, const void *const *x, const float *park, float *y)
{
    (void)w;
    int nt = f32_vectors(x);
    park_sums(nt, (const float (*)[RM][TM][16])park, y);
    hc_copy_edge(y, nt, RM, TM);
}

/* y[t * RM + r] = dot_steps(k, w[r], x[t], n) for r < RM, t < nt (TS in
 * the tile, 1 in dots_h); with next 1 (the tile's first pass), one line of
 * row r + RM, the next row tile's, is fetched into L2 per 32 elements; with
 * next 2 (far-apart rows as streams), each row's line DOTS_FETCH bytes
 * ahead. */
TI void tile_steps(int k, int nt, int next, const void *const *w, const float *const *x, int n, float *y)
{
    __m512 a0[RM][TM], a1[RM][TM];
    const __mmask16 all = 0xffff;
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) a0[r][t] = a1[r][t] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        if (next == 1)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < RM; r++) _mm_prefetch((const char *)w[r] + RM * 2 * (size_t)n + 2 * i, _MM_HINT_T1);
        else if (next == 2)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < RM; r++) _mm_prefetch((const char *)w[r] + DOTS_FETCH + 2 * i, _MM_HINT_T0);
        step(k, nt, w, x, i, all, a0);
        step(k, nt, w, x, i + 16, all, a1);
    }
    if (i + 16 <= n) {
        step(k, nt, w, x, i, all, a0);
        i += 16;
    }
    if (i < n) step(k, nt, w, x, i, tail_mask(n - i), a1);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) y[t * RM + r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r][t], a1[r][t]));
}

/* The passes of tile_steps over the vectors the tile really has (weight.c
 * repeats the last one: hc_real_vectors), each pass over only its real ones:
 * a batch's edge does no FMAs for its copies. */
TI void tile_steps_all(int k, const void *const *w, const float *const *x, int n, float *y)
{
    int tn = hc_real_vectors((const void *const *)x, TM);
    for (int t0 = 0; t0 < tn; t0 += TS) {
        int nt = tn - t0 < TS ? tn - t0 : TS;
        if (nt == TS) tile_steps(k, TS, !t0, w, x + t0, n, y + t0 * RM);
        else if (nt == 2) tile_steps(k, 2, !t0, w, x + t0, n, y + t0 * RM);
        else tile_steps(k, 1, !t0, w, x + t0, n, y + t0 * RM);
    }
    hc_copy_edge(y, tn, RM, TM);
}

T static void tile_f(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    const float *const *xf = (const float *const *)x;
    for (int i = 0; i < RM; i++) rows[i] = hc_float_row(w, r[i], 0);
    if (w->type == GGML_TYPE_F32) tile_chunks_any(rows, xf, w->n, y);
    else tile_steps_all(GGML_TYPE_F16, rows, xf, w->n, y);
}

/* The F16 tile for few vectors (hc_kernel.few: B <= 8, several sequences
 * decoded together). tile_steps holds both of dot_steps' accumulators of
 * each pair, 4 x 3 pairs: at B = 8 its three passes read the rows from
 * memory in the first and from cache in the others, with the memory idle
 * meanwhile (the tile waited on the rows: 111 GFLOP/s from L2, 75 from
 * memory). This tile goes through the rows once,
 * block by block (FKB columns): per block, the even 16-element steps of
 * every pair (one accumulator each), then the odd ones, in groups of at most
 * 24 pairs in registers (4 x 6, then 4 x the rest), each group's
 * accumulators parked between blocks while the block's rows stay in L1; the
 * first group's steps fetch the same block of the next row tile (the RM
 * rows after these, which weight.c runs next) into L2, so that the memory
 * works while the arithmetic does. Each accumulator takes its steps
 * in dot_steps' order (the masked tail last into a1), so every pair gets the
 * dot's bits (docs/design/kernels.md, "Few vectors"). */
#define FT 8              /* the most vectors (hc_kernel.few_tm) */
#define FKB 512           /* columns per block, a multiple of 32 */

/* acc[r][t] += w_r[i..i+16) * x_t[i..i+16) for r < RM, t < nt (lanes outside m: zero). */
TI void few_step(int k, int nt, const void *const *w, const float *const *x, int i, __mmask16 m, __m512 acc[RM][FT])
{
    __m512 wv[RM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++) wv[r] = load16(k, w[r], i, m);
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) {
        __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + i);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < RM; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
}

/* One group of vectors [t0, t0 + nt) and one parity p of block [c, e):
 * park[r][t] (zero in the first block) plus the steps at c + 16p, then every
 * 32nd, that end by e, and (p = 1, e = n) the masked tail; with fetch, per
 * step the line of each row r + RM (2n bytes a row) that holds the step's
 * 32 columns is prefetched into L2. The first group fetches in both
 * parities, so each line twice: fetched in one parity only, the next tile's
 * block came late (F16 at B = 8 from memory 64-71 GFLOP/s, both 79-88;
 * docs/design/kernels.md, "Few vectors"). */
TI void few_pass(int k, int nt, const void *const *w, const float *const *x, int t0, int c, int e, int p, int n,
                 int fetch, float park[RM][FT][16])
{
    __m512 acc[RM][FT];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = c ? _mm512_load_ps(park[r][t0 + t]) : _mm512_setzero_ps();
    for (int i = c + 16 * p; i + 16 <= e; i += 32) {
        if (fetch)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < RM; r++)
                _mm_prefetch((const char *)w[r] + RM * 2 * (size_t)n + 2 * (i - 16 * p), _MM_HINT_T1);
        few_step(k, nt, w, x + t0, i, 0xffff, acc);
    }
    if (p && e == n && n % 16) few_step(k, nt, w, x + t0, n & ~15, tail_mask(n % 16), acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < RM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) _mm512_store_ps(park[r][t0 + t], acc[r][t]);
}

/* y[t * RM + r] = dot_steps(k, w[r], x[t], n) for r < RM, t < n1 + n2:
 * per block and parity, vectors [0, n1), then [n1, n1 + n2). */
TI void few_tile(int k, int n1, int n2, const void *const *w, const float *const *x, int n, float *y)
{
    _Alignas(64) float park[2][RM][FT][16];
    int c = 0;
    do {   /* n >= 1: the first block sets every accumulator */
        int e = n - c < FKB ? n : c + FKB;
        for (int p = 0; p < 2; p++) {
            few_pass(k, n1, w, x, 0, c, e, p, n, 1, park[p]);
            if (n2) few_pass(k, n2, w, x, n1, c, e, p, n, 0, park[p]);
        }
        c = e;
    } while (c < n);
    for (int r = 0; r < RM; r++)
        for (int t = 0; t < n1 + n2; t++)
            y[t * RM + r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_load_ps(park[0][r][t]), _mm512_load_ps(park[1][r][t])));
}

/* hc_kernel.few of F16 over the vectors it really has (see hc_real_vectors):
 * up to 6 in one group, 7 and 8 as 6 and the rest (4 and 3 or 4: 85
 * GFLOP/s at B = 7 against 92). */
T static void few_h(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    const float *const *xf = (const float *const *)x;
    int tn = hc_real_vectors(x, FT), n = w->n;
    hc_float_rows(w, r, RM, rows);
    switch (tn) {
    case 1: few_tile(GGML_TYPE_F16, 1, 0, rows, xf, n, y); break;
    case 2: few_tile(GGML_TYPE_F16, 2, 0, rows, xf, n, y); break;
    case 3: few_tile(GGML_TYPE_F16, 3, 0, rows, xf, n, y); break;
    case 4: few_tile(GGML_TYPE_F16, 4, 0, rows, xf, n, y); break;
    case 5: few_tile(GGML_TYPE_F16, 5, 0, rows, xf, n, y); break;
    case 6: few_tile(GGML_TYPE_F16, 6, 0, rows, xf, n, y); break;
    case 7: few_tile(GGML_TYPE_F16, 6, 1, rows, xf, n, y); break;
    default: few_tile(GGML_TYPE_F16, 6, 2, rows, xf, n, y); break;
    }
    hc_copy_edge(y, tn, RM, FT);
}

/* hc_kernel.few of F32: the rows read once for up to FT vectors, where the
 * column-blocked tile (4 x 6) read them again from L2 for vectors 7 and 8.
 * Blocks of FKB columns (a half chunk: the 4 rows' block and the 8 vectors'
 * take 24 KiB of L1), each through chunk_tile for vectors [0, 6) (fetching
 * the next row tile's block into L2) and then [6, 8) while the block's rows
 * are in L1, into the accumulators of its chunk's parity: dot_chunks' steps
 * in its order, so every pair gets its bits. */
TI void few_chunks_f32(int n1, int n2, const void *const *w, const float *const *x, int n, float *y)
{
    _Alignas(64) float park[2][2][RM][TM][16];   /* [vectors from 0, from TM][chunk parity] */
    memset(park, 0, sizeof park);
    for (int c = 0; c < n; c += FKB) {
        int e = n - c < FKB ? n : c + FKB, s = c / CHUNK % 2;
        chunk_tile(GGML_TYPE_F32, n1, 1, w, x, n, c, e, park[0][s]);
        if (n2) chunk_tile(GGML_TYPE_F32, n2, 0, w, x + TM, n, c, e, park[1][s]);
    }
    park_sums(n1, (const float (*)[RM][TM][16])park[0], y);
    if (n2) park_sums(n2, (const float (*)[RM][TM][16])park[1], y + TM * RM);
}

/* The vectors the F32 and BF16 tiles for few vectors compute: those they
 * really have (see hc_real_vectors), rounded up to 2, 4, 6 or FT (6 and 2 in
 * two groups), the copies of an edge after. */
TI int few_vectors(const void *const *x)
{
    int tn = hc_real_vectors(x, FT);
    return tn > TM ? FT : tn > 4 ? TM : tn > 2 ? 4 : 2;
}

T static void few_f32(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    const float *const *xf = (const float *const *)x;
    int nt = few_vectors(x);
    for (int i = 0; i < RM; i++) rows[i] = hc_float_row(w, r[i], 0);
    if (nt == 2) few_chunks_f32(2, 0, rows, xf, w->n, y);
    else if (nt == 4) few_chunks_f32(4, 0, rows, xf, w->n, y);
    else if (nt == TM) few_chunks_f32(TM, 0, rows, xf, w->n, y);
    else few_chunks_f32(TM, 2, rows, xf, w->n, y);
    hc_copy_edge(y, nt, RM, FT);
}

/* hc_kernel.dots for F32: DOTS_F32 rows side by side with one vector (a
 * core read 4096-wide rows faster as three streams than as the tile's four:
 * `bench_kernels pool avx512 4096 11008 1`, 26.3-27.7 -> 29.1-30.6 GB/s;
 * two streams 28.3-28.5). */
T static void dots_f(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[DOTS_F32];
    hc_float_rows(w, r, DOTS_F32, rows);
    rows_chunks(GGML_TYPE_F32, DOTS_F32, rows, (const float *)x[0], w->n, y);
}

/* hc_kernel.dots for F16: tile_steps with one vector, each row fetching
 * ahead where decode reads every row as streams (hc_decode_streams; Zen 4's
 * long rows, the only ones there, read faster without). */
T static void dots_h(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[RM];
    hc_float_rows(w, r, RM, rows);
    if (hc_decode_streams()) tile_steps(GGML_TYPE_F16, 1, 2, rows, (const float *const *)x, w->n, y);
    else tile_steps(GGML_TYPE_F16, 1, 0, rows, (const float *const *)x, w->n, y);
}

/* F16's kernel (rows longer than 4096 as streams, and shorter ones where the
 * CPU's row says so: dots_h) and F32's (rows of every width as streams:
 * dots_f). */
#define FLOAT_KERNEL                                                                                            \
    .prepare = hc_act_copy, .arranged_bytes = hc_float_arranged_bytes, .arrange = hc_float_arrange, .dot = dot_f, \
    .tile = tile_f, .rm = RM, .tm = TM, .axpy = axpy_f, .axpy_multi = axpy_multi_f
const hc_kernel hc_avx512_float = { FLOAT_KERNEL, .dots = dots_h, .dots_when = HC_DOTS_BY_CPU_LONG, .few = few_h,
                                    .few_tm = FT };
const hc_kernel hc_avx512_f32 = { FLOAT_KERNEL, .dots = dots_f, .dots_rm = DOTS_F32, .dots_when = HC_DOTS_ALL,
                                  .tile_part = part_f32, .tile_sum = sum_f32, .kb = CHUNK, .tile_park = PARK_F32,
                                  .few = few_f32, .few_tm = FT };

/* ---- BF16 against bf16 activations (ggml's numerics): 32 pairs of bf16
 * per register. With AVX512_BF16 one vdpbf16ps per register: lane j gets
 * acc + w[2j+1]·x[2j+1], rounded, then + w[2j]·x[2j], rounded (products of
 * bf16 are exact in f32; subnormal inputs and results are zero). Without it
 * (hc_bf16_dot() == 0) the pairs are widened by shifts and FMAed in that
 * order: the same bits unless something is subnormal. ---- */

#define TB __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c")))
#define TBI static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c")))

/* The bf16 activation, 16 floats per step with fp32_to_bf16's integer
 * rounding (nearest even; NaN kept and quieted): the same bits as the
 * reference's loop (vcvtneps2bf16 would flush subnormals). */
TB static void act_bf16(const hc_weight *w, const float *x, void *act)
{
    uint16_t *h = act;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(64);
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    int i = 0;
    for (; i + 16 <= w->n; i += 16) {
        __m512i u = _mm512_loadu_si512(x + i), hi = _mm512_srli_epi32(u, 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < w->n; i++) h[i] = fp32_to_bf16(x[i]);
}

/* acc + the 16 pairs of w times those of x, as vdpbf16ps (dp) or its FMAs. */
TBI __m512 dot_pairs(int dp, __m512 acc, __m512i w, __m512i x)
{
    if (dp) return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi)), _mm512_castsi512_ps(_mm512_and_si512(x, hi)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)), acc);
}

/* bf16 elements [i, i+32) of p masked by m (lanes outside m read nothing and are zero). */
TBI __m512i load32bf(const uint16_t *p, int i, __mmask32 m) { return _mm512_maskz_loadu_epi16(m, p + i); }

TBI __mmask32 tail_mask32(int m) { return (__mmask32)((1ull << m) - 1); }

/* One accumulator: a += the pairs of elements [32c, 32c + 32) for c = 0, 1,
 * ..., the tail masked; the result is reduce_add(a). */
TBI float bf16_dot(int dp, const uint16_t *row, const uint16_t *x, int n)
{
    __m512 a = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) a = dot_pairs(dp, a, load32bf(row, i, 0xffffffffu), load32bf(x, i, 0xffffffffu));
    if (i < n) a = dot_pairs(dp, a, load32bf(row, i, tail_mask32(n - i)), load32bf(x, i, tail_mask32(n - i)));
    return _mm512_reduce_add_ps(a);
}

TB static float dot_b(const hc_weight *w, int r, const void *x)
{
    const uint16_t *row = (const uint16_t *)hc_float_row(w, r, 0);
    return hc_bf16_dot() ? bf16_dot(1, row, x, w->n) : bf16_dot(0, row, x, w->n);
}

/* The bf16 tile: BRM rows x BTM vectors, the accumulator of every pair in
 * registers (24 of the 32) for the whole row, every pair through dot_b's
 * operations in its order: per 32 elements 4 + 6 loads for 24 vdpbf16ps
 * (llamafile's tinyBLAS shape). One accumulator per pair (not dot_float's
 * two) leaves room for 4 x 6: 154 GFLOP/s at B = 128 against 147 for 4 x 3
 * with two, and the B = 1 dot, one vdpbf16ps chain, still outruns DRAM
 * (docs/measurements.md). */
#define BRM 4
#define BTM 6

/* acc[r][t] += the pairs of elements [i, i + 32) of w[r] and x[t], t < nt. */
TBI void step_bf16(int dp, int nt, const uint16_t *const *w, const uint16_t *const *x, int i, __mmask32 m,
                   __m512 acc[BRM][BTM])
{
    __m512i xv[BTM];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < nt; t++) xv[t] = load32bf(x[t], i, m);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < BRM; r++) {
        __m512i wv = load32bf(w[r], i, m);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = dot_pairs(dp, acc[r][t], wv, xv[t]);
    }
}

/* y[t * BRM + r] = dot_b's value of row w[r] and x[t] for t < nt (a
 * constant at every call, so the loops unroll into registers). With next 2
 * (the B = 1 streams, whose rows are apart), each row's line DOTS_FETCH
 * bytes ahead is fetched per step; with next 1 (the tile), one line of row r
 * + BRM, the next row tile's, is fetched into L2 per step, so that the memory
 * works while the arithmetic does, as in the F16 few-vector tile (B = 2, 8:
 * 33-37 -> 48, 103-106 -> 109-114 GFLOP/s; B = 128 level). */
TBI void steps_bf16(int dp, int nt, int next, const uint16_t *const *w, const uint16_t *const *x, int n, int i0,
                    int i1, __m512 acc[BRM][BTM])
{
    int i = i0;
    for (; i + 32 <= i1; i += 32) {
        if (next == 1)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < BRM; r++) _mm_prefetch((const char *)w[r] + BRM * 2 * (size_t)n + 2 * i, _MM_HINT_T1);
        else if (next == 2)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < BRM; r++) _mm_prefetch((const char *)w[r] + DOTS_FETCH + 2 * i, _MM_HINT_T0);
        step_bf16(dp, nt, w, x, i, 0xffffffffu, acc);
    }
    if (i < i1) step_bf16(dp, nt, w, x, i, tail_mask32(i1 - i), acc);
}

TBI void tile_bf16(int dp, int nt, int next, const uint16_t *const *w, const uint16_t *const *x, int n, float *y)
{
    __m512 acc[BRM][BTM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < BRM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_setzero_ps();
    steps_bf16(dp, nt, next, w, x, n, 0, n, acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < BRM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) y[t * BRM + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* The bf16 tile over the vectors it really has (see hc_real_vectors). */
TBI void tile_bf16_any(int dp, const uint16_t *const *w, const uint16_t *const *x, int n, float *y)
{
    int tn = hc_real_vectors((const void *const *)x, BTM);
    if (tn > 4) tile_bf16(dp, BTM, 1, w, x, n, y);
    else if (tn > 2) tile_bf16(dp, 4, 1, w, x, n, y);
    else tile_bf16(dp, 2, 1, w, x, n, y);
    hc_copy_edge(y, tn > 4 ? BTM : tn > 2 ? 4 : 2, BRM, BTM);
}

TB static void tile_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const uint16_t *rows[BRM];
    for (int i = 0; i < BRM; i++) rows[i] = (const uint16_t *)hc_float_row(w, r[i], 0);
    if (hc_bf16_dot()) tile_bf16_any(1, rows, (const uint16_t *const *)x, w->n, y);
    else tile_bf16_any(0, rows, (const uint16_t *const *)x, w->n, y);
}

/* hc_kernel.few of BF16: the rows read once for up to FT vectors, where the
 * tile (4 x 6) read them again for vectors 7 and 8 (from L2 at best). Blocks
 * of FKB columns, each through the tile's steps for vectors [0, 6) (fetching
 * the next row tile's block into L2) and then [6, 8) while the block's rows
 * are in L1, every pair's one accumulator parked between blocks: its steps
 * in tile_bf16's order, so every pair gets dot_b's bits. */
TBI void few_block_bf16(int dp, int nt, int next, const uint16_t *const *w, const uint16_t *const *x, int n, int c,
                        int e, float park[BRM][BTM][16])
{
    __m512 acc[BRM][BTM];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < BRM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[r][t] = _mm512_load_ps(park[r][t]);
    steps_bf16(dp, nt, next, w, x, n, c, e, acc);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < BRM; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) _mm512_store_ps(park[r][t], acc[r][t]);
}

TBI void few_bf16(int dp, int n1, int n2, const uint16_t *const *w, const uint16_t *const *x, int n, float *y)
{
    _Alignas(64) float park[2][BRM][BTM][16];   /* vectors from 0, from BTM */
    memset(park, 0, sizeof park);
    for (int c = 0; c < n; c += FKB) {
        int e = n - c < FKB ? n : c + FKB;
        few_block_bf16(dp, n1, 1, w, x, n, c, e, park[0]);
        if (n2) few_block_bf16(dp, n2, 0, w, x + BTM, n, c, e, park[1]);
    }
    for (int r = 0; r < BRM; r++) {
        for (int t = 0; t < n1; t++) y[t * BRM + r] = _mm512_reduce_add_ps(_mm512_load_ps(park[0][r][t]));
        for (int t = 0; t < n2; t++) y[(BTM + t) * BRM + r] = _mm512_reduce_add_ps(_mm512_load_ps(park[1][r][t]));
    }
}

/* few_bf16 over few_vectors' vectors: 2, 4 or 6 in one group, 7 and 8 as 6
 * and 2. */
_Static_assert(BTM == TM, "few_vectors' groups are the BF16 tile's too");
TBI void few_bf16_any(int dp, const uint16_t *const *w, const uint16_t *const *x, int n, float *y)
{
    int nt = few_vectors((const void *const *)x);
    if (nt == FT) few_bf16(dp, BTM, 2, w, x, n, y);
    else if (nt == BTM) few_bf16(dp, BTM, 0, w, x, n, y);
    else if (nt == 4) few_bf16(dp, 4, 0, w, x, n, y);
    else few_bf16(dp, 2, 0, w, x, n, y);
    hc_copy_edge(y, nt, BRM, FT);
}

TB static void few_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const uint16_t *rows[BRM];
    for (int i = 0; i < BRM; i++) rows[i] = (const uint16_t *)hc_float_row(w, r[i], 0);
    if (hc_bf16_dot()) few_bf16_any(1, rows, (const uint16_t *const *)x, w->n, y);
    else few_bf16_any(0, rows, (const uint16_t *const *)x, w->n, y);
}

/* hc_kernel.dots for BF16: the tile's BRM rows with one vector, fetching
 * ahead as dots_h does. */
TB static void dots_b(const hc_weight *w, const int *r, const void *const *x, float *y)
{
    const void *rows[BRM];
    hc_float_rows(w, r, BRM, rows);
    const uint16_t *const *wb = (const uint16_t *const *)rows, *const *xb = (const uint16_t *const *)x;
    const int ahead = hc_decode_streams() ? 2 : 0;
    if (hc_bf16_dot()) tile_bf16(1, 1, ahead, wb, xb, w->n, y);
    else tile_bf16(0, 1, ahead, wb, xb, w->n, y);
}

/* A BF16 row's AXPY has no activation: the float kernels' (exact widening). */
const hc_kernel hc_avx512_bf16 = { .prepare = act_bf16, .arranged_bytes = hc_bf16_arranged_bytes,
                                   .arrange = hc_bf16_arrange, .dot = dot_b, .dots = dots_b,
                                   .dots_when = HC_DOTS_BY_CPU_LONG,
                                   .tile = tile_b, .rm = BRM, .tm = BTM, .few = few_b, .few_tm = FT,
                                   .axpy = axpy_f, .axpy_multi = axpy_multi_f };

/* ---- Q8_0 against Q8_0 activations: 16 blocks per step ---- */

TI __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

TI __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* Q8_0 products take 16 blocks (a chunk) per step and sum each block in
 * integers before any float work: the chunk's weight bytes are spread over 8
 * registers so that every int32 lane meets only one block (half a block: the
 * 4 registers of a group hold 8 blocks x 2 halves), vpdpbusd accumulates the
 * 8 registers straight into two int32 accumulators, one shuffle-add leaves one
 * int32 per block, and one convert and one FMA cover the 16 blocks. The
 * spreading (loads and in-lane unpacks) is done once per row chunk and shared
 * by the tile's vectors; the activation is spread the same way once per
 * product (arrange_q8). */
#define Q8_CHUNK 16

/* 16 blocks at b (whole) spread into U[8]: U[4G + i] holds group G (blocks
 * 8G..8G+7); its 128-bit lane L, dword q is dword 4(L % 2) + i of block
 * 8G + 2q + L / 2 (an 8 x 4 dword transpose per lane, with unpacks), so the
 * int32 lane 4L + q of U[4G .. 4G+3] sees only one half of one block. */
TI void q8_spread(const block_q8_0 *b, __m512i U[8])
{
    #pragma GCC unroll 2
    for (int G = 0; G < 2; G++) {
        __m512i P[4];
        #pragma GCC unroll 4
        for (int q = 0; q < 4; q++) P[q] = join(load32(b[8 * G + 2 * q].qs), load32(b[8 * G + 2 * q + 1].qs));
        __m512i t0 = _mm512_unpacklo_epi32(P[0], P[1]), t1 = _mm512_unpackhi_epi32(P[0], P[1]);
        __m512i t2 = _mm512_unpacklo_epi32(P[2], P[3]), t3 = _mm512_unpackhi_epi32(P[2], P[3]);
        U[4 * G] = _mm512_unpacklo_epi64(t0, t2);
        U[4 * G + 1] = _mm512_unpackhi_epi64(t0, t2);
        U[4 * G + 2] = _mm512_unpacklo_epi64(t1, t3);
        U[4 * G + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
}

/* The two groups' half-block sums (a0: group 0, a1: group 1, lanes as in
 * q8_spread) to one int32 per block: lane 4M + q holds block
 * 8(M / 2) + 2q + M % 2. */
TI __m512i q8_block_sums(__m512i a0, __m512i a1)
{
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The 16 scales of the blocks at b as floats, in q8_block_sums' lane order. */
TI __m512 q8_scales(const block_q8_0 *b)
{
    const int s = (int)sizeof(block_q8_0);
    const __m512i at = _mm512_setr_epi32(0, 2 * s, 4 * s, 6 * s, s, 3 * s, 5 * s, 7 * s, 8 * s, 10 * s, 12 * s,
                                         14 * s, 9 * s, 11 * s, 13 * s, 15 * s);
    /* the dword at a block's start: its scale in the low word */
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(at, (const void *)b, 1)));
}

/* The Q8_0 activation of a Q8_0 matvec, arranged once per product: per chunk
 * the bytes spread as q8_spread does (signed), their correction (q8_corr)
 * and the 16 scales as floats. Blocks past the row's end are zero. */
typedef struct {
    __m512i q[8], corr[2];
    __m512 d;
} xq8;

/* corr[G] = -128·Σx per int32 lane of group G of the spread chunk U: it
 * turns vpdpbusd of the weights plus 128 (unsigned) with x into the exact
 * Σ w·x (|Σ| <= 16·255·128). */
TI void q8_corr(const __m512i U[8], __m512i corr[2])
{
    const __m512i u128 = _mm512_set1_epi8((char)0x80);
    #pragma GCC unroll 2
    for (int G = 0; G < 2; G++) {
        __m512i c = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++) c = _mm512_dpbusd_epi32(c, u128, U[4 * G + i]);
        corr[G] = _mm512_sub_epi32(_mm512_setzero_si512(), c);
    }
}

T static void arrange_q8(const void *act, int n, void *xa)
{
    const block_q8_0 *x = act;
    xq8 *xc = xa;
    int nb = n / QK8_0;
    for (int c = 0; c * Q8_CHUNK < nb; c++) {
        block_q8_0 pad[Q8_CHUNK];
        const block_q8_0 *b = hc_whole_chunk(x + c * Q8_CHUNK, nb - c * Q8_CHUNK, Q8_CHUNK, sizeof(block_q8_0), pad);
        q8_spread(b, xc[c].q);
        q8_corr(xc[c].q, xc[c].corr);
        xc[c].d = q8_scales(b);
    }
}

static size_t arranged_q8(int n) { return sizeof(xq8) * (size_t)((n / QK8_0 + Q8_CHUNK - 1) / Q8_CHUNK); }

/* Row r of a Q8_0 / Q4_0 weight (blocks of type B). */
#define QROW(B, w, r) ((const B *)(w)->data + (size_t)(r) * (size_t)((w)->n / QK8_0))

/* One row chunk, spread (U) and plus 128 (unsigned, w ^ 0x80: one xor per
 * register, where a correction on the weights' side cost 8 vpdpbusd per
 * chunk at B = 1), and the 16 scales. */
typedef struct {
    __m512i U[8];
    __m512 dw;
} wq8;

TI void q8_load(const block_q8_0 *b, int nb, wq8 *w)
{
    block_q8_0 pad[Q8_CHUNK];
    b = hc_whole_chunk(b, nb, Q8_CHUNK, sizeof(block_q8_0), pad);
    q8_spread(b, w->U);
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) w->U[i] = _mm512_xor_si512(w->U[i], _mm512_set1_epi8((char)0x80));
    w->dw = q8_scales(b);
}

/* acc + the dot of a loaded row chunk with activation chunk x: the 16 block
 * sums in integers, then one convert and one FMA. */
TI __m512 q8_fma(const wq8 *w, const xq8 *x, __m512 acc)
{
    __m512i a[2];
    #pragma GCC unroll 2
    for (int G = 0; G < 2; G++) {
        a[G] = x->corr[G];
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++) a[G] = _mm512_dpbusd_epi32(a[G], w->U[4 * G + i], x->q[4 * G + i]);
    }
    return _mm512_fmadd_ps(_mm512_mul_ps(w->dw, x->d), _mm512_cvtepi32_ps(q8_block_sums(a[0], a[1])), acc);
}

/* Chunks in order, the last one zero-padded. */
T static float dot_q8(const hc_weight *w, int r, const void *xa)
{
    const block_q8_0 *q = QROW(block_q8_0, w, r);
    const xq8 *xc = xa;
    __m512 acc = _mm512_setzero_ps();
    int nb = w->n / QK8_0;
    wq8 wc;
    for (int c = 0; c * Q8_CHUNK < nb; c++) {
        q8_load(q + c * Q8_CHUNK, nb - c * Q8_CHUNK, &wc);
        acc = q8_fma(&wc, xc + c, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

#define RQ 4              /* the most rows and vectors a quantized tile holds */
#define TQN 8
#define R8 2              /* Q8_0 tile: rows x vectors */
#define T8 8
#define R4 2              /* Q4_0 tile: rows x vectors */
#define T4 4
#define FR 3              /* the tile for few vectors (few_chunk; GPTQ's tile): rows x vectors */
#define FX 8

/* The Q8_0 tile, as dot_q8: each row chunk spread once for the vectors,
 * each activation chunk loaded once for the rows. */
T static void tile_q8(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    enum { R = R8, Tn = T8 };
    const block_q8_0 *q[R];
    const xq8 *const *xc = (const xq8 *const *)xv;
    const int nb = wt->n / QK8_0;
    const size_t row_bytes = sizeof(block_q8_0) * (size_t)nb;
    for (int r = 0; r < R; r++) q[r] = QROW(block_q8_0, wt, rows[r]);
    __m512 acc[RQ][TQN];
    wq8 wc[RQ];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm512_setzero_ps();
    for (int c = 0; c * Q8_CHUNK < nb; c++) {
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) {
            q8_load(q[r] + c * Q8_CHUNK, nb - c * Q8_CHUNK, &wc[r]);
            hc_prefetch_next_tile(q[r] + c * Q8_CHUNK, (size_t)R * row_bytes, sizeof(block_q8_0) * Q8_CHUNK);
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++)
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) acc[r][t] = q8_fma(&wc[r], xc[t] + c, acc[r][t]);
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < Tn; t++) y[t * R + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* y[0..32) += a * (q * d), the block's 32 codes q as two halves of 16: q*d
 * is exact in float, then one FMA. (Q8_0's halves straight from memory: the
 * widening loads them, with no 32-byte load and extract between.) */
TI void axpy_q32(__m128i q0, __m128i q1, float d, float a, float *y)
{
    __m512 vd = _mm512_set1_ps(d), va = _mm512_set1_ps(a);
    __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), v1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1));
    _mm512_storeu_ps(y, _mm512_fmadd_ps(va, _mm512_mul_ps(v0, vd), _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(va, _mm512_mul_ps(v1, vd), _mm512_loadu_ps(y + 16)));
}

TI __m128i load128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }

T static void axpy_q8(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    for (int b = c0 / QK8_0; b < c1 / QK8_0; b++, y += QK8_0) {
        block_q8_0 buf;
        const block_q8_0 *wb = hc_q8_0_block(w, r, b, &buf);
        axpy_q32(load128(wb->qs), load128(wb->qs + 16), _cvtsh_ss(wb->d), a, y);
    }
}

/* axpy_q32 for nt outputs: the block's q * d once, then one FMA per output. */
TI void axpy_multi_q32(__m128i q0, __m128i q1, float d, int nt, const float *a, const int32_t *rows, float *y,
                       size_t ys)
{
    __m512 vd = _mm512_set1_ps(d);
    __m512 w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), vd);
    __m512 w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), vd);
    for (int t = 0; t < nt; t++) {
        __m512 va = _mm512_set1_ps(a[t]);
        float *yt = y + (size_t)rows[t] * ys;
        _mm512_storeu_ps(yt, _mm512_fmadd_ps(va, w0, _mm512_loadu_ps(yt)));
        _mm512_storeu_ps(yt + 16, _mm512_fmadd_ps(va, w1, _mm512_loadu_ps(yt + 16)));
    }
}

T static void axpy_multi_q8(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                            float *y, size_t ys)
{
    for (int b = c0 / QK8_0; b < c1 / QK8_0; b++, y += QK8_0) {
        block_q8_0 buf;
        const block_q8_0 *wb = hc_q8_0_block(w, r, b, &buf);
        axpy_multi_q32(load128(wb->qs), load128(wb->qs + 16), _cvtsh_ss(wb->d), nt, a, rows, y, ys);
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

/* A block of 32 values v0, v1 rounded as quantize_row_q8_0_ref rounds
 * them, with the same arithmetic for finite values: the int8 values into qs,
 * their sum into *sum, the f32 scale returned. */
TI float q8_block(__m512 v0, __m512 v1, int8_t *qs, int *sum)
{
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float d = amax / 127, id = d ? 1.0f / d : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i q0 = roundf_epi32(_mm512_mul_ps(v0, vid)), q1 = roundf_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtsepi32_epi8(q1));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    return d;
}

/* quantize_row_q8_0_ref, vectorised. */
T static void prepare_q8(const hc_weight *w, const float *x, void *act)
{
    block_q8_0 *y = act;
    int n = w->n, sum;
    for (int b = 0; b < n / QK8_0; b++, x += QK8_0)
        y[b].d = (uint16_t)_cvtss_sh(q8_block(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16), (int8_t *)y[b].qs, &sum),
                                     _MM_FROUND_TO_NEAREST_INT);
}

const hc_kernel hc_avx512_q8_0 = { .prepare = prepare_q8, .arranged_bytes = arranged_q8, .arrange = arrange_q8,
                                   .dot = dot_q8, .tile = tile_q8, .rm = R8, .tm = T8, .tile_min = 3, .axpy = axpy_q8,
                                   .axpy_multi = axpy_multi_q8 };

/* ---- Q4_0 against Q8_0 activations: 16 blocks per step, summed in integers
 * to one int32 per block, so one convert and one FMA cover 16 blocks ---- */

/* The Q8_0 activation arranged for 16 blocks of a row (a "chunk", 288 bytes
 * of Q4_0): x16.h's hc_x16_act as registers, lane 4m+g = block 4g+m after
 * the integer reduction (q4_chunk). */
typedef struct {
    __m512i lo[4], hi[4];
    __m512i corr;
    __m512 d;
} xq4;
_Static_assert(sizeof(xq4) == sizeof(hc_x16_act), "xq4 is hc_x16_act's bytes");

#define Q4_CHUNK 16                       /* blocks per chunk */

/* ggml's layout (q4_unpack): block 4g+m's 16 bytes in 128-bit lane m of group g. */
T static void arrange_q4(const void *act, int n, void *xa) { hc_x16_arrange(act, n, HC_X16_GROUPS, 8, xa); }

/* Chunks of 16 blocks (x16.h, x16_unpack): lane 4m+g of plane i holds
 * block 4g+m's bytes qs[4i .. 4i + 3] (lo) and qs[16 + 4i ..] (hi), where
 * they meet Q4_0's nibbles and Q8_0's codes alike. */
T static void arrange_q4x16(const void *act, int n, void *xa) { hc_x16_arrange(act, n, HC_X16_PLANES, 8, xa); }
T static void arrange_q8x16(const void *act, int n, void *xa) { hc_x16_arrange(act, n, HC_X16_PLANES, 128, xa); }

#define W2(a, b) ((a) | (b) << 16)   /* two word indices per int32: gcc lacks _mm512_setr_epi16 */

/* One row's 16 blocks at q (whole, read within their 288 bytes): the weight
 * nibbles of group g in lo[g] / hi[g], block 4g+m's 16 bytes in 128-bit lane
 * m to meet xq4's lo[g] / hi[g], and the 16 block scales as floats in xq4's
 * lane order (lane 4m+g = block 4g+m). Two ways, the same values: wp, from
 * the chunk's lines with word permutes (vpermt2w: 7 per chunk), else from
 * loads 2 or 8 bytes on with dword permutes (vpermt2d: 6 per chunk). Zen 5
 * runs the word permutes slowly (Q4_0 decode at half AVX2's speed); on Zen 4
 * they are the faster way (docs/design/kernels.md). */
TI void q4_unpack(const block_q4_0 *q, __m512i lo[4], __m512i hi[4], __m512 *dw, const int wp)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const char *p = (const char *)q;
    if (wp) {
        /* group g (bytes [72g, 72g + 72), word 4g of line g): its nibble bytes
         * are words 4g + 9m + 1 .. 4g + 9m + 8 of lines g, g + 1 (of line 4 only
         * the first 32 bytes are the chunk's) */
        const __m512i qidx = _mm512_setr_epi32(W2(1, 2), W2(3, 4), W2(5, 6), W2(7, 8), W2(10, 11), W2(12, 13),
                                               W2(14, 15), W2(16, 17), W2(19, 20), W2(21, 22), W2(23, 24),
                                               W2(25, 26), W2(28, 29), W2(30, 31), W2(32, 33), W2(34, 35));
        /* block j's scale is word 9j of the chunk; block 4g+m goes to word
         * 4m+g: blocks 0-7 from lines 0, 1, blocks 8-14 from lines 2, 3,
         * block 15 from line 4 */
        const __m512i s01 = _mm512_setr_epi32(W2(0, 36), W2(0, 36), W2(9, 45), W2(0, 36), W2(18, 54), W2(0, 36),
                                              W2(27, 63), W2(0, 36), 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i s23 = _mm512_setr_epi32(0, W2(8, 44), 0, W2(17, 53), 0, W2(26, 62), 0, W2(35, 7),
                                              0, 0, 0, 0, 0, 0, 0, 0);
        __m512i Z[5];
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++) Z[i] = _mm512_loadu_si512(p + 64 * i);
        Z[4] = _mm512_maskz_loadu_epi8(~0ULL >> 32, p + 256);
        #pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512i v = _mm512_permutex2var_epi16(Z[g], _mm512_add_epi16(qidx, _mm512_set1_epi16((short)(4 * g))),
                                                  Z[g + 1]);
            lo[g] = _mm512_and_si512(v, m4);
            hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        __m512i s23v = _mm512_mask_permutexvar_epi16(_mm512_permutex2var_epi16(Z[2], s23, Z[3]), 0x8000, s23, Z[4]);
        __m512i s = _mm512_mask_blend_epi16(0xcccc, _mm512_permutex2var_epi16(Z[0], s01, Z[1]), s23v);
        *dw = _mm512_cvtph_ps(_mm512_castsi512_si256(s));
        return;
    }
    /* group g's nibbles are at bytes 2, 20, 38 and 56 from 72g: dwords 0 and 9
     * of the 64 bytes from 72g + 2, dwords 3 and 12 of those from 72g + 8
     * (which end with the group) */
    const __m512i qi = _mm512_setr_epi32(0, 1, 2, 3, 19, 20, 21, 22, 9, 10, 11, 12, 28, 29, 30, 31);
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i v = _mm512_permutex2var_epi32(_mm512_loadu_si512(p + 72 * g + 2), qi, _mm512_loadu_si512(p + 72 * g + 8));
        lo[g] = _mm512_and_si512(v, m4);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    /* block j's scale is dword 18j / 4 of the chunk (its high word when j is
     * odd); blocks 8.. sit from byte 144 as blocks 0.. from byte 0, so one
     * index serves both halves: lanes 4m+g, g < 2, from bytes [0, 128), g >= 2
     * from [144, 272) */
    const __m512i at = _mm512_setr_epi32(0, 18, 0, 18, 4, 22, 4, 22, 9, 27, 9, 27, 13, 31, 13, 31);
    const __m512i hw = _mm512_setr_epi32(0, 0, 0, 0, 16, 16, 16, 16, 0, 0, 0, 0, 16, 16, 16, 16);
    __m512i a = _mm512_permutex2var_epi32(_mm512_loadu_si512(p), at, _mm512_loadu_si512(p + 64));
    __m512i b = _mm512_permutex2var_epi32(_mm512_loadu_si512(p + 144), at, _mm512_loadu_si512(p + 208));
    __m512i s = _mm512_srlv_epi32(_mm512_mask_blend_epi32(0xcccc, a, b), hw);
    *dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(s));
}

/* acc + the 16 block sums C of a chunk (lane 4m+g = block 4g+m) times their
 * weight and activation scales: one convert and one FMA, the same in every
 * Q4_0 dot and tile, so every way has the same bits. */
TI __m512 q4_scaled(__m512i C, __m512 dw, __m512 xd, __m512 acc)
{
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(C), acc);
}

/* acc + the dot of an unpacked chunk with activation chunk x: the 16 block
 * sums in integers, then q4_scaled. */
TI __m512 q4_fma(const __m512i lo[4], const __m512i hi[4], __m512 dw, const xq4 *x, __m512 acc)
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
    return q4_scaled(C, dw, x->d, acc);
}

/* A chunk of t blocks in chunks of 16 (x16.h) at p, Q4_0's or (q8)
 * Q8_0's: plane i's lanes are each block's code bytes qs[4i ..], so lo[i] /
 * hi[i] come by a load (Q8_0: planes i and 4 + i, already unsigned) or a
 * load and a mask (Q4_0's nibbles; a short chunk's lanes by an expanding
 * load), and the lanes are already q4_fma's (lane 4m+g = block 4g+m): for
 * Q4_0 the same values as q4_unpack. */
TI void x16_unpack(const uint8_t *p, int t, __m512i lo[4], __m512i hi[4], __m512 *dw, const int q8)
{
    const int planes = q8 ? 8 : 4;
    __m512i w[8];
    if (t == Q4_CHUNK) {
        *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        _Pragma("GCC unroll 8")
        for (int i = 0; i < planes; i++) w[i] = _mm512_loadu_si512(p + 32 + 64 * i);
    } else {
        const __mmask16 lanes = hc_x16_lanes(t);
        *dw = _mm512_maskz_expand_ps(lanes, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << t) - 1), p)));
        for (int i = 0; i < planes; i++) w[i] = _mm512_maskz_expandloadu_epi32(lanes, p + 2 * t + 4 * t * i);
    }
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {
        lo[i] = q8 ? w[i] : _mm512_and_si512(w[i], m4);
        hi[i] = q8 ? w[4 + i] : _mm512_and_si512(_mm512_srli_epi16(w[i], 4), m4);
    }
}

/* q4_fma for chunks of 16: each lane's dword is already its block's, so the
 * 8 dpbusd leave the block sums with no reduction between lanes (the same
 * integers: the sums are exact), then q4_scaled. */
TI __m512 q4x16_fma(const __m512i lo[4], const __m512i hi[4], __m512 dw, const xq4 *x, __m512 acc)
{
    __m512i D[4];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++)
        D[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(i ? _mm512_setzero_si512() : x->corr, lo[i], x->lo[i]), hi[i],
                                   x->hi[i]);
    __m512i C = _mm512_add_epi32(_mm512_add_epi32(D[0], D[1]), _mm512_add_epi32(D[2], D[3]));
    return q4_scaled(C, dw, x->d, acc);
}

/* How a row's chunks are unpacked: Q4_0 from ggml's layout with dword or
 * word permutes (q4_unpack's wp 0 or 1), or Q4_0 or Q8_0 from chunks of 16
 * (x16_unpack). */
enum { Q4_DWORDS, Q4_WORDS, Q4_X16, Q8_X16 };

/* The bytes of a block of the rows `how` reads. */
#define HOW_BLOCK(how) ((how) == Q8_X16 ? sizeof(block_q8_0) : sizeof(block_q4_0))

/* Chunk c of a row of nb blocks at q, unpacked as `how` says; the same
 * values every way (the last chunk zero-padded, or its missing lanes zero). */
TI void q4_chunk(const void *q, int nb, int c, __m512i lo[4], __m512i hi[4], __m512 *dw, const int how)
{
    if (how >= Q4_X16) {
        x16_unpack((const uint8_t *)q + HOW_BLOCK(how) * (size_t)(c * Q4_CHUNK),
                   nb - c * Q4_CHUNK < Q4_CHUNK ? nb - c * Q4_CHUNK : Q4_CHUNK, lo, hi, dw, how == Q8_X16);
        return;
    }
    block_q4_0 pad[Q4_CHUNK];
    const block_q4_0 *b = (const block_q4_0 *)q + c * Q4_CHUNK;
    q4_unpack(hc_whole_chunk(b, nb - c * Q4_CHUNK, Q4_CHUNK, sizeof(block_q4_0), pad), lo, hi, dw, how);
}

TI __m512 q4_fma_as(const __m512i lo[4], const __m512i hi[4], __m512 dw, const xq4 *x, __m512 acc, const int how)
{
    return how >= Q4_X16 ? q4x16_fma(lo, hi, dw, x, acc) : q4_fma(lo, hi, dw, x, acc);
}

/* Row r of w, whose blocks are of the type `how` reads. */
TI const uint8_t *how_row(const hc_weight *w, int r, const int how)
{
    return (const uint8_t *)w->data + (size_t)r * (size_t)(w->n / QK8_0) * HOW_BLOCK(how);
}

/* A value the compiler must take as it is: an empty asm that may have
 * changed it. GCC folds a load into every instruction that uses a value (a
 * load for each), and loads are what bound the chunks' tile; Clang's
 * _mm512_reduce_add_ps may reassociate, so it drops a permute before it. */
#define IN_REGISTER(v) __asm__("" : "+v"(v))
/* A pointer the compiler cannot follow, so that values stored behind it are
 * not carried in registers from one pass to the next (GCC carried
 * tile_gptq's parked sums, spilled, and stored each twice a chunk). */
#define IN_REGISTER_PTR(p) __asm__("" : "+r"(p))

/* A row's sum of its 16 lanes. Q8_0 in chunks of 16 holds block 4g+m in
 * lane 4m+g (x16.h), where dot_q8 holds block 8(M/2) + 2q + M%2 in lane
 * 4M+q (q8_block_sums): each lane's sum is the same value in another lane,
 * so the lanes go back to dot_q8's order first (kept from Clang's
 * reassociation), and the row gets its bits. */
TI float x16_sum(__m512 acc, const int how)
{
    if (how == Q8_X16) {
        acc = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 1, 9, 4, 12, 5, 13, 2, 10, 3, 11, 6, 14, 7, 15), acc);
        IN_REGISTER(acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Chunks in order; how: see q4_chunk. */
TI float dot_q4_as(const hc_weight *w, int r, const void *xa, const int how)
{
    const uint8_t *q = how_row(w, r, how);
    const xq4 *xc = xa;
    __m512 acc = _mm512_setzero_ps();
    int nb = w->n / QK8_0;
    for (int c = 0; c * Q4_CHUNK < nb; c++) {
        __m512i lo[4], hi[4];
        __m512 dw;
        if (how == Q8_X16) {   /* two chunks ahead: without, this dot read 15 % slower than dot_q8 from memory */
            const size_t chunk = sizeof(block_q8_0) * Q4_CHUNK;
            hc_prefetch_next_tile(q + chunk * (size_t)c, 2 * chunk, chunk);
        }
        q4_chunk(q, nb, c, lo, hi, &dw, how);
        acc = q4_fma_as(lo, hi, dw, xc + c, acc, how);
    }
    return x16_sum(acc, how);
}

T static float dot_q4(const hc_weight *w, int r, const void *xa)
{
    return hc_q4_word_permutes() ? dot_q4_as(w, r, xa, Q4_WORDS) : dot_q4_as(w, r, xa, Q4_DWORDS);
}

T static float dot_q4x16(const hc_weight *w, int r, const void *xa) { return dot_q4_as(w, r, xa, Q4_X16); }
T static float dot_q8x16(const hc_weight *w, int r, const void *xa) { return dot_q4_as(w, r, xa, Q8_X16); }

/* hc_kernel.dots of Q4_0 (and Q8_0 in chunks of 16): DOTS_Q4 rows far apart
 * (weight.c's dots_streams) with one vector, chunk by chunk, each row's sums
 * as dot_q4_as, so its bits; each stream fetches the chunk DOTS_AHEAD chunks
 * ahead. One Intel core (a Xeon with AMX, family 6 model 167) decoded Q4_0
 * at 47-50 tok/s one row at a time (58 % of a plain read), 60 as three
 * streams and 72-82 with the fetch (hc-run -t 1, 2 layers 4096 x 11008;
 * Q8_0 36 -> 38-40; docs/measurements.md, "Intel Xeon"). */
#define DOTS_Q4 3
#define DOTS_AHEAD 4
TI void dots_q4_as(const hc_weight *w, const int *r, const void *const *xa, float *y, const int how)
{
    const xq4 *xc = xa[0];
    const int nb = w->n / QK8_0;
    const size_t chunk = HOW_BLOCK(how) * Q4_CHUNK;
    const uint8_t *row[DOTS_Q4];
    __m512 acc[DOTS_Q4];
    for (int s = 0; s < DOTS_Q4; s++) row[s] = how_row(w, r[s], how), acc[s] = _mm512_setzero_ps();
    for (int c = 0; c * Q4_CHUNK < nb; c++)
        _Pragma("GCC unroll 4")
        for (int s = 0; s < DOTS_Q4; s++) {
            __m512i lo[4], hi[4];
            __m512 dw;
            hc_prefetch_next_tile(row[s] + chunk * (size_t)c, DOTS_AHEAD * chunk, chunk);
            q4_chunk(row[s], nb, c, lo, hi, &dw, how);
            acc[s] = q4_fma_as(lo, hi, dw, xc + c, acc[s], how);
        }
    for (int s = 0; s < DOTS_Q4; s++) y[s] = x16_sum(acc[s], how);
}

T static void dots_q4(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    if (hc_q4_word_permutes()) dots_q4_as(w, r, xa, y, Q4_WORDS);
    else dots_q4_as(w, r, xa, y, Q4_DWORDS);
}

T static void dots_q4x16(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    dots_q4_as(w, r, xa, y, Q4_X16);
}

T static void dots_q8x16(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    dots_q4_as(w, r, xa, y, Q8_X16);
}

/* The Q4_0 tile, as dot_q4: each row chunk unpacked once for the vectors. */
TI void tile_q4_as(const hc_weight *wt, const int *rows, const void *const *xv, float *y, const int how)
{
    enum { R = R4, Tn = T4 };
    const block_q4_0 *q[R];
    const xq4 *const *xc = (const xq4 *const *)xv;
    const int nb = wt->n / QK8_0;
    for (int r = 0; r < R; r++) q[r] = QROW(block_q4_0, wt, rows[r]);
    __m512 acc[RQ][TQN];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) acc[r][t] = _mm512_setzero_ps();
    for (int c = 0; c * Q4_CHUNK < nb; c++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) {
            __m512i lo[4], hi[4];
            __m512 dw;
            q4_chunk(q[r], nb, c, lo, hi, &dw, how);
            hc_prefetch_next_tile(q[r] + c * Q4_CHUNK, sizeof(block_q4_0) * (size_t)nb * R, sizeof(block_q4_0) * Q4_CHUNK);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < Tn; t++) acc[r][t] = q4_fma_as(lo, hi, dw, xc[t] + c, acc[r][t], how);
        }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < Tn; t++) y[t * R + r] = _mm512_reduce_add_ps(acc[r][t]);
}

T static void tile_q4(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    if (hc_q4_word_permutes()) tile_q4_as(wt, rows, xv, y, Q4_WORDS);
    else tile_q4_as(wt, rows, xv, y, Q4_DWORDS);
}

/* The tile over chunks of 16, both rows' chunks unpacked first, so that each
 * activation load serves the two rows: per row, vector and chunk, tile_q4_as
 * made 10 loads of 64 bytes for 8 vpdpbusd, and on Zen 4 (one 64-byte load a
 * cycle, one vpdpbusd) the loads bound it: 257-261 -> 302-315 GFLOP/s at B = 8
 * and 64 (bench_kernels cpu avx512-chunks 4096 4096 B). Each pair's block sums
 * in two chains of 4 vpdpbusd (one from the correction; exact integers, so any
 * order), then q4_scaled: dot_q4_as's bits. This adds chunks [c0, c1) of the
 * rows (Q4_0's or Q8_0's: how) to acc for the first nt vectors. */
TI void x16_chunks(const uint8_t *const q[R4], int nb, const xq4 *const *xc, int nt, int c0, int c1,
                   __m512 acc[R4][T4], const int how)
{
    const size_t chunk = HOW_BLOCK(how) * Q4_CHUNK;
    for (int c = c0; c < c1; c++) {
        __m512i lo[R4][4], hi[R4][4];
        __m512 dw[R4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R4; r++) {
            q4_chunk(q[r], nb, c, lo[r], hi[r], &dw[r], how);
            hc_prefetch_next_tile(q[r] + chunk * (size_t)c, HOW_BLOCK(how) * (size_t)nb * R4, chunk);
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < nt; t++) {
            const xq4 *x = xc[t] + c;
            __m512i D[R4][2];
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R4; r++) D[r][0] = x->corr, D[r][1] = _mm512_setzero_si512();
            _Pragma("GCC unroll 4")
            for (int i = 0; i < 4; i++) {
                __m512i xl = _mm512_load_si512(&x->lo[i]), xh = _mm512_load_si512(&x->hi[i]);
                IN_REGISTER(xl);
                IN_REGISTER(xh);
                _Pragma("GCC unroll 4")
                for (int r = 0; r < R4; r++)
                    D[r][i / 2] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(D[r][i / 2], lo[r][i], xl), hi[r][i], xh);
            }
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R4; r++)
                acc[r][t] = q4_scaled(_mm512_add_epi32(D[r][0], D[r][1]), dw[r], x->d, acc[r][t]);
        }
    }
}

/* The rm rows of a tile in chunks of 16 (weight.c's row indices r). */
TI int x16_rows(const hc_weight *wt, const int *r, int rm, const uint8_t **q, const int how)
{
    for (int i = 0; i < rm; i++) q[i] = how_row(wt, r[i], how);
    return wt->n / QK8_0;
}

TI void tile_x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y, const int how)
{
    const uint8_t *q[R4];
    const int nb = x16_rows(wt, rows, R4, q, how);
    __m512 acc[R4][T4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T4; t++) acc[r][t] = _mm512_setzero_ps();
    x16_chunks(q, nb, (const xq4 *const *)xv, T4, 0, (nb + Q4_CHUNK - 1) / Q4_CHUNK, acc, how);
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T4; t++) y[t * R4 + r] = x16_sum(acc[r][t], how);
}

T static void tile_q4x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    tile_x16(wt, rows, xv, y, Q4_X16);
}

T static void tile_q8x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    tile_x16(wt, rows, xv, y, Q8_X16);
}

/* The same tile in column blocks (hc_kernel.tile_part): rows longer than
 * KB_Q4 columns made its four vectors' activation chunks (640 bytes per 512
 * columns each) outgrow the 32 KiB L1 beside the rows, and the tile ran at
 * half speed on the down projection's 11008-wide rows (bench_kernels cpu
 * avx512-chunks N 4096 8: 305 GFLOP/s at N = 4096 and 5120, 129-242 from
 * 6144 on). Each block adds its chunks to the pairs' accumulators parked
 * between blocks, in tile_x16's order, for the vectors the tile really has
 * (an edge's copies cost nothing). */
#define KB_Q4 4096
#define PARK_Q4 (R4 * T4 * 16)

TI void part_x16(const hc_weight *wt, const int *rows, const void *const *xv, int c0, int c1, float *park,
                 const int how)
{
    const uint8_t *q[R4];
    const int nb = x16_rows(wt, rows, R4, q, how), tn = hc_real_vectors(xv, T4), per = QK8_0 * Q4_CHUNK;
    const int a = c0 / per, e = (c1 + per - 1) / per;   /* the block's chunks */
    const xq4 *const *xc = (const xq4 *const *)xv;
    __m512 acc[R4][T4];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T4; t++) acc[r][t] = _mm512_load_ps(park + (r * T4 + t) * 16);
    /* the vector count as a constant in each call, so the loops unroll */
    switch (tn) {
    case 1: x16_chunks(q, nb, xc, 1, a, e, acc, how); break;
    case 2: x16_chunks(q, nb, xc, 2, a, e, acc, how); break;
    case 3: x16_chunks(q, nb, xc, 3, a, e, acc, how); break;
    default: x16_chunks(q, nb, xc, T4, a, e, acc, how); break;
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T4; t++) _mm512_store_ps(park + (r * T4 + t) * 16, acc[r][t]);
}

T static void part_q4x16(const hc_weight *wt, const int *rows, const void *const *xv, int c0, int c1, float *park)
{
    part_x16(wt, rows, xv, c0, c1, park, Q4_X16);
}

T static void part_q8x16(const hc_weight *wt, const int *rows, const void *const *xv, int c0, int c1, float *park)
{
    part_x16(wt, rows, xv, c0, c1, park, Q8_X16);
}

/* The sums of a tile of rm rows from its pairs' parked ones (park[(r * tm
 * + t) * 16 ..]). */
TI void x16_park_sums(const void *const *xv, const float *park, int rm, int tm, float *y, const int how)
{
    int tn = hc_real_vectors(xv, tm);
    for (int r = 0; r < rm; r++)
        for (int t = 0; t < tn; t++) y[t * rm + r] = x16_sum(_mm512_load_ps(park + (r * tm + t) * 16), how);
    hc_copy_edge(y, tn, rm, tm);
}

T static void sum_q4x16(const hc_weight *wt, const void *const *xv, const float *park, float *y)
{
    (void)wt;
    x16_park_sums(xv, park, R4, T4, y, Q4_X16);
}

T static void sum_q8x16(const hc_weight *wt, const void *const *xv, const float *park, float *y)
{
    (void)wt;
    x16_park_sums(xv, park, R4, T4, y, Q8_X16);
}

/* x16_unpack a plane at a time: plane i of a chunk of t blocks at p, and
 * the chunk's block scales (the few vectors' tile below holds only one
 * plane of each row; with t a constant the tests fold). */
TI __m512i x16_line(const uint8_t *p, int t, int i)
{
    if (t == Q4_CHUNK) return _mm512_loadu_si512(p + 32 + 64 * i);
    return _mm512_maskz_expandloadu_epi32(hc_x16_lanes(t), p + 2 * t + 4 * t * i);
}

TI void x16_plane(const uint8_t *p, int t, int i, __m512i *lo, __m512i *hi, const int q8)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), w = x16_line(p, t, i);
    *lo = q8 ? w : _mm512_and_si512(w, m4);
    *hi = q8 ? x16_line(p, t, 4 + i) : _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
}

TI __m512 x16_scales(const uint8_t *p, int t)
{
    if (t == Q4_CHUNK) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_maskz_expand_ps(hc_x16_lanes(t),
                                  _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << t) - 1), p)));
}

/* The tile for steps of up to FX vectors (hc_kernel.few: several sequences
 * decoded at once). tile_x16 takes 4 vectors, so a step of 8 read each row
 * tile twice (from memory, as a step's rows are all new); here FR rows meet
 * FX vectors. The rows' chunks are unpacked once into 24 registers, then
 * the vectors go one after another (few_planes_pass): each activation line loaded
 * once for the rows, a pair's block sums one chain of 8 vpdpbusd from the
 * correction (exact integers, so any order), then q4_scaled into the pair's
 * sum parked in memory between chunks: dot_q4_as's bits. With the vectors
 * outer only a vector's FR chains are live, where planes outer held all
 * pairs' chains beside the lines (2 rows: 16 chains, and lines spilled to
 * the stack), so three rows fit and share each activation line
 * (docs/design/kernels.md, "a tile for few vectors"). The pass over a chunk
 * of the rows, unpacked into planes lo / hi with their block scales dw, for
 * the first nt vectors, vector v's chunk (xq4's layout, not necessarily
 * aligned: GPTQ's activations) at byte `at` of xv[v]: */
TI void few_planes_pass(const __m512i lo[FR][4], const __m512i hi[FR][4], const __m512 dw[FR], const void *const *xv,
                        size_t at, int nt, float *park)
{
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nt; v++) {
        const char *x = (const char *)xv[v] + at;
        __m512i D[FR];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < FR; r++) D[r] = _mm512_loadu_si512(x + offsetof(xq4, corr));
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++) {
            __m512i xl = _mm512_loadu_si512(x + offsetof(xq4, lo) + 64 * i);
            __m512i xh = _mm512_loadu_si512(x + offsetof(xq4, hi) + 64 * i);
            IN_REGISTER(xl);
            IN_REGISTER(xh);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < FR; r++)
                D[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(D[r], lo[r][i], xl), hi[r][i], xh);
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < FR; r++) {
            float *s = park + (r * FX + v) * 16;
            _mm512_store_ps(s, q4_scaled(D[r], dw[r], _mm512_loadu_ps(x + offsetof(xq4, d)), _mm512_load_ps(s)));
        }
    }
}

/* Chunk c (t blocks) of the rows (Q4_0's or Q8_0's: how). */
TI void few_chunk(const uint8_t *const q[FR], int nb, const void *const *xv, int nt, int c, int t, float *park,
                  const int how)
{
    const size_t chunk = HOW_BLOCK(how) * Q4_CHUNK;
    __m512i lo[FR][4], hi[FR][4];
    __m512 dw[FR];
    _Pragma("GCC unroll 4")
    for (int r = 0; r < FR; r++) {
        const uint8_t *p = q[r] + chunk * (size_t)c;
        hc_prefetch_next_tile(p, HOW_BLOCK(how) * (size_t)nb * FR, chunk);
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++) x16_plane(p, t, i, &lo[r][i], &hi[r][i], how == Q8_X16);
        dw[r] = x16_scales(p, t);
    }
    few_planes_pass(lo, hi, dw, xv, sizeof(xq4) * (size_t)c, nt, park);
}

/* Whole chunks with their size a constant, a row's short last one apart. */
TI void few_chunks(const uint8_t *const q[FR], int nb, const void *const *xv, int nt, float *park, const int how)
{
    for (int c = 0; c * Q4_CHUNK < nb; c++) {
        if (nb - c * Q4_CHUNK >= Q4_CHUNK) few_chunk(q, nb, xv, nt, c, Q4_CHUNK, park, how);
        else few_chunk(q, nb, xv, nt, c, nb - c * Q4_CHUNK, park, how);
    }
}

/* The vector count as a constant in each call, so that the loops unroll
 * (an odd count computes one copy; fewer than 3 vectors go by dot). */
TI void few_x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y, const int how)
{
    const uint8_t *q[FR];
    const int nb = x16_rows(wt, rows, FR, q, how), tn = hc_real_vectors(xv, FX);
    _Alignas(64) float park[FR * FX * 16] = { 0 };
    if (tn <= 4) few_chunks(q, nb, xv, 4, park, how);
    else if (tn <= 6) few_chunks(q, nb, xv, 6, park, how);
    else few_chunks(q, nb, xv, FX, park, how);
    x16_park_sums(xv, park, FR, FX, y, how);
}

T static void few_q4x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    few_x16(wt, rows, xv, y, Q4_X16);
}

T static void few_q8x16(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    few_x16(wt, rows, xv, y, Q8_X16);
}

/* A Q4_0 block's 32 signed values -8..7 in element order, as two halves of
 * 16: its low nibbles (elements 0..15) in *q0, its high ones in *q1. */
TI void q4_values(const block_q4_0 *blk, __m128i *q0, __m128i *q1)
{
    const __m128i t = load128(blk->qs), m = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    *q0 = _mm_sub_epi8(_mm_and_si128(t, m), eight);
    *q1 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(t, 4), m), eight);
}

T static void axpy_q4(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    for (int b = c0 / QK4_0; b < c1 / QK4_0; b++, y += QK4_0) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        __m128i q0, q1;
        q4_values(wb, &q0, &q1);
        axpy_q32(q0, q1, _cvtsh_ss(wb->d), a, y);
    }
}

T static void axpy_multi_q4(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows,
                            float *y, size_t ys)
{
    for (int b = c0 / QK4_0; b < c1 / QK4_0; b++, y += QK4_0) {
        block_q4_0 buf;
        const block_q4_0 *wb = hc_q4_0_block(w, r, b, &buf);
        __m128i q0, q1;
        q4_values(wb, &q0, &q1);
        axpy_multi_q32(q0, q1, _cvtsh_ss(wb->d), nt, a, rows, y, ys);
    }
}

#define Q4_KERNEL .prepare = prepare_q8, .arranged_bytes = hc_x16_act_bytes, .rm = R4, .tm = T4, .tile_min = 3, \
                  .dots_rm = DOTS_Q4, .dots_when = HC_DOTS_BY_CPU, .axpy = axpy_q4, .axpy_multi = axpy_multi_q4
const hc_kernel hc_avx512_q4_0 = { Q4_KERNEL, .arrange = arrange_q4, .dot = dot_q4, .tile = tile_q4, .dots = dots_q4 };
const hc_kernel hc_avx512_q4x16 = { Q4_KERNEL, .arrange = arrange_q4x16, .dot = dot_q4x16, .tile = tile_q4x16,
                                    .dots = dots_q4x16,
                                    .tile_part = part_q4x16, .tile_sum = sum_q4x16, .kb = KB_Q4, .tile_park = PARK_Q4,
                                    .few = few_q4x16, .few_tm = FX, .few_rm = FR };
/* Q8_0 in chunks of 16: Q8_0's kernel but for its products, which take the
 * Q4_0 chunks' tile (the activation arranged the same way, with the
 * correction for codes stored plus 128) */
const hc_kernel hc_avx512_q8x16 = { .prepare = prepare_q8, .arranged_bytes = hc_x16_act_bytes, .arrange = arrange_q8x16,
                                    .dot = dot_q8x16, .tile = tile_q8x16, .rm = R4, .tm = T4, .tile_min = 3,
                                    .dots = dots_q8x16, .dots_rm = DOTS_Q4, .dots_when = HC_DOTS_BY_CPU,
                                    .axpy = axpy_q8, .axpy_multi = axpy_multi_q8, .tile_part = part_q8x16,
                                    .tile_sum = sum_q8x16, .kb = KB_Q4, .tile_park = PARK_Q4, .few = few_q8x16,
                                    .few_tm = FX, .few_rm = FR };

/* ---- INT4-GPTQ (kernels_gptq.h) on the int8 activation: 16 blocks (256
 * code bytes) per step, summed in integers to one int32 per block as Q4_0's
 * chunks are (the codes are unsigned, so no correction), then one multiply
 * (activation scale by group scale, gathered per block) and one FMA; the
 * zero terms ({s, -s·z} pairs times {0, X̃}) start the accumulator, before
 * the first block (after the last, a tile's zero terms waited on all its
 * steps: B = 8 ran 3-7 % slower, B = 4 10 %). The dots reduce each block's
 * four lanes after the vpdpbusd (gq_fma); the tile permutes a row's chunk
 * into planes once, so that its vectors' sums need no reduction
 * (gq_planes). Other group sizes take the reference. ---- */

/* One row's chunk: codes of group g in lo[g] / hi[g] (as xchunk's lo / hi),
 * and each block's group scale in xchunk's lane order. */
typedef struct {
    __m512i lo[4], hi[4];
    __m512 s;
} wgq;
_Static_assert(sizeof(hc_gptq_xplanes) == sizeof(xq4) && offsetof(hc_gptq_xplanes, corr) == offsetof(xq4, corr) &&
                   offsetof(hc_gptq_xplanes, d) == offsetof(xq4, d),
               "an activation's planes are an xq4");

/* Bytes [64i, 64i + 64) of a chunk at p; tail: only the rem bytes the row
 * has left from p, with masked loads. */
TI __m512i chunk_line(const char *p, int i, int tail, long rem)
{
    if (!tail) return _mm512_loadu_si512(p + 64 * i);
    long a = rem - 64 * i;
    return _mm512_maskz_loadu_epi8(a >= 64 ? ~0ULL : a <= 0 ? 0 : (1ULL << a) - 1, p + 64 * i);
}

/* The scales of a chunk's blocks (x's sidx) in a row's n2 floats of pairs
 * sm (n2 < 0: groups of 32). */
TI __m512 gq_scales(const float *sm, int n2, const hc_gptq_xchunk *x)
{
    const __m512i idx = _mm512_loadu_si512(x->sidx);
    if (n2 < 0) return _mm512_i32gather_ps(idx, sm, 4);   /* groups of 32: the 16 blocks have 16 scales */
    /* larger groups: the chunk's blocks lie in at most 8 groups from the
     * first one's (lane 0), whose 8 pairs one load holds */
    const int base = x->sidx[0], left = n2 - base;
    const __m512 win = _mm512_maskz_loadu_ps(left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1), sm + base);
    return _mm512_permutexvar_ps(_mm512_sub_epi32(idx, _mm512_set1_epi32(base)), win);
}

/* A line's low and high nibbles (codes 0..15). */
TI void gq_nibbles(__m512i z, __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    *lo = _mm512_and_si512(z, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
}

/* The chunk at p (rem bytes of the row left from p) and its scales. */
TI void gq_load(const uint8_t *p, long rem, const float *sm, int n2, const hc_gptq_xchunk *x, wgq *w)
{
    const int tail = rem < 256;
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++) gq_nibbles(chunk_line((const char *)p, g, tail, rem), &w->lo[g], &w->hi[g]);
    w->s = gq_scales(sm, n2, x);
}

/* The chunk at p as planes (the activation's planes meet them): lane 4m+g of
 * plane i is block 4g+m's bytes 4i .. 4i + 3, dword 4m + i of the chunk's
 * line g, by two rounds of dword permutes: lane 4m + 2j + h of a[k] (b[k])
 * is line h's (2 + h's) dword 4m + 2k + j, then plane 2k + j takes lanes
 * 4m + g of a[k] (g < 2) and b[k]. With the planes the block sums need no
 * reduction between lanes (gq_fma's 6 packs and adds per vector): 8
 * permutes a row's chunk serve all the vectors. */
TI void gq_planes(const uint8_t *p, long rem, __m512i lo[4], __m512i hi[4])
{
    const int tail = rem < 256;
    const __m512i i1[2] = { _mm512_setr_epi32(0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29),
                            _mm512_setr_epi32(2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31) };
    const __m512i i2[2] = { _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                            _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31) };
    __m512i l[4], a[2], b[2];
    _Pragma("GCC unroll 4")
    for (int g = 0; g < 4; g++) l[g] = chunk_line((const char *)p, g, tail, rem);
    _Pragma("GCC unroll 2")
    for (int k = 0; k < 2; k++) {
        a[k] = _mm512_permutex2var_epi32(l[0], i1[k], l[1]);
        b[k] = _mm512_permutex2var_epi32(l[2], i1[k], l[3]);
    }
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) gq_nibbles(_mm512_permutex2var_epi32(a[i / 2], i2[i % 2], b[i / 2]), &lo[i], &hi[i]);
}

/* acc + (d_b·s_g)·isum_b over the chunk's 16 blocks. */
TI __m512 gq_fma(const wgq *w, const hc_gptq_xchunk *x, __m512 acc)
{
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i D[4];
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++)
        D[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w->lo[g], _mm512_loadu_si512(x->lo[g])),
                                   w->hi[g], _mm512_loadu_si512(x->hi[g]));
    /* |D| <= 8·15·127: the int16 packs are exact; lane 4m+g = block 4g+m */
    __m512i A = _mm512_madd_epi16(_mm512_packs_epi32(D[0], D[1]), ones);
    __m512i B = _mm512_madd_epi16(_mm512_packs_epi32(D[2], D[3]), ones);
    __m512i C = _mm512_madd_epi16(_mm512_packs_epi32(A, B), ones);
    return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(x->d), w->s), _mm512_cvtepi32_ps(C), acc);
}

/* acc[t] + the zero terms of a row with pairs sm for nt vectors: the n2
 * floats of its pairs times those of vector t's (xv[t]'s hc_gptq_xz), 16 at
 * a time in order, the vectors' chains side by side (a tile's pairs one
 * after another were bound by the chains' latency: a fifth of the few
 * vectors' tile at B = 8). */
TI void gq_zeros(const hc_gptq *g, const float *sm, const void *const *xv, int nt, __m512 *acc)
{
    const int n2 = 2 * g->n_groups;
    for (int i = 0; i < n2; i += 16) {
        const __mmask16 m = n2 - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n2 - i)) - 1);
        const __m512 s = _mm512_maskz_loadu_ps(m, sm + i);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < nt; t++) acc[t] = _mm512_fmadd_ps(s, _mm512_loadu_ps(hc_gptq_xz(g, xv[t]) + i), acc[t]);
    }
}

/* hc_gptq_act_prepare's int8 activation, each block rounded by q8_block
 * (the same bytes: test_gptq_kernel): x gathered by perm, positions past n
 * zero. It runs before each product (matmul.c's prep_rows), not beside it:
 * the scalar one was 2.8 % of a step of 8 sequences' samples. */
T static void prepare_gptq(const hc_weight *w, const float *x, void *act)
{
    const hc_gptq *g = w->ext;
    if (!hc_gptq_act_begin(g, x, act)) return;
    for (int b = 0; b < g->kp / 32; b++) {
        const int k = 32 * b, left = g->n - k;   /* >= 1: kp is n rounded up to 32 */
        const __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
        const __mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
        __m512 v0, v1;
        if (g->perm) {
            v0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m0, _mm512_maskz_loadu_epi32(m0, g->perm + k), x, 4);
            v1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m1, _mm512_maskz_loadu_epi32(m1, g->perm + k + 16), x,
                                          4);
        } else {
            v0 = _mm512_maskz_loadu_ps(m0, x + k);
            v1 = _mm512_maskz_loadu_ps(m1, x + k + 16);
        }
        int8_t q[32];
        int sum;
        const float d = q8_block(v0, v1, q, &sum);
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
    const long rb = g->kp / 2;
    const int n2 = g->gs == 32 ? -1 : 2 * g->n_groups;
    __m512 acc = _mm512_setzero_ps();
    gq_zeros(g, sm, &act, 1, &acc);
    wgq wc;
    for (int c = 0; c < hc_gptq_chunks(g); c++) {
        gq_load(row + 256 * (size_t)c, rb - 256L * c, sm, n2, x + c, &wc);
        acc = gq_fma(&wc, x + c, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* hc_kernel.dots of INT4-GPTQ: DOTS_GQ rows far apart (dots_q4_as's
 * streams), chunk by chunk, each row's sums as dot_gptq's, so its bits, each
 * stream fetching the chunk DOTS_AHEAD chunks ahead. */
#define DOTS_GQ 3
T static void dots_gptq(const hc_weight *w, const int *r, const void *const *xa, float *y)
{
    const hc_gptq *g = w->ext;
    if (!hc_gptq_int8(g)) {
        for (int s = 0; s < DOTS_GQ; s++) y[s] = hc_ref_gptq.dot(w, r[s], xa[0]);
        return;
    }
    const hc_gptq_xchunk *x = xa[0];
    const long rb = g->kp / 2;
    const int n2 = g->gs == 32 ? -1 : 2 * g->n_groups;
    const uint8_t *row[DOTS_GQ];
    const float *sm[DOTS_GQ];
    __m512 acc[DOTS_GQ];
    hc_gptq_tile_rows(g, r, DOTS_GQ, row, sm);
    for (int s = 0; s < DOTS_GQ; s++) {
        acc[s] = _mm512_setzero_ps();
        gq_zeros(g, sm[s], xa, 1, &acc[s]);
    }
    for (int c = 0; c < hc_gptq_chunks(g); c++)
        _Pragma("GCC unroll 4")
        for (int s = 0; s < DOTS_GQ; s++) {
            wgq wc;
            hc_prefetch_next_tile(row[s] + 256 * (size_t)c, DOTS_AHEAD * 256, 256);
            gq_load(row[s] + 256 * (size_t)c, rb - 256L * c, sm[s], n2, x + c, &wc);
            acc[s] = gq_fma(&wc, x + c, acc[s]);
        }
    for (int s = 0; s < DOTS_GQ; s++) y[s] = _mm512_reduce_add_ps(acc[s]);
}

/* The GPTQ tile (FR rows, FX vectors), as Q4_0's for few vectors: the
 * rows' chunks in planes (gq_planes) with their blocks' group scales, then
 * few_planes_pass over the vectors' planes (hc_gptq_planes), each pair's
 * block sums one chain of 8 vpdpbusd (from the planes' zero correction) and
 * gq_fma's multiply, convert and FMA, into the pair's zero terms parked
 * before the first: dot_gptq's bits.
 * It serves prompts too: a 2 x 8 tile of gq_fma, with its reduction between
 * lanes per pair, ran 207-213 GFLOP/s at B = 64 against 244-248
 * (bench_kernels cpu avx512 4096 11008 64). On the first nt vectors: */
TI void gq_chunks(const hc_gptq *g, const uint8_t *const w[FR], const float *const sm[FR], const void *const *xv,
                  int nt, float *park)
{
    const void *xp[FX];
    for (int t = 0; t < nt; t++) xp[t] = hc_gptq_planes(g, xv[t]);
    const long rb = g->kp / 2;
    const int n2 = g->gs == 32 ? -1 : 2 * g->n_groups;
    for (int c = 0; c < hc_gptq_chunks(g); c++) {
        const hc_gptq_xchunk *x = (const hc_gptq_xchunk *)xv[0] + c;
        __m512i lo[FR][4], hi[FR][4];
        __m512 s[FR];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < FR; r++) {
            const uint8_t *p = w[r] + 256 * (size_t)c;
            hc_prefetch_next_tile(p, (size_t)rb * FR, 256);
            gq_planes(p, rb - 256L * c, lo[r], hi[r]);
            s[r] = gq_scales(sm[r], n2, x);
        }
        float *sums = park;
        IN_REGISTER_PTR(sums);
        few_planes_pass(lo, hi, s, xp, sizeof(hc_gptq_xplanes) * (size_t)c, nt, sums);
    }
}

T static void tile_gptq(const hc_weight *wt, const int *rows, const void *const *xv, float *y)
{
    const hc_gptq *g = wt->ext;
    if (!hc_gptq_int8(g)) {
        hc_ref_gptq_tile(wt, rows, FR, xv, FX, y);
        return;
    }
    const uint8_t *w[FR];
    const float *sm[FR];
    hc_gptq_tile_rows(g, rows, FR, w, sm);
    const int tn = hc_real_vectors(xv, FX);
    _Alignas(64) float park[FR * FX * 16];
    for (int r = 0; r < FR; r++) {
        __m512 acc[FX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < FX; t++) acc[t] = _mm512_setzero_ps();
        gq_zeros(g, sm[r], xv, FX, acc);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < FX; t++) _mm512_store_ps(park + (r * FX + t) * 16, acc[t]);
    }
    if (tn <= 4) gq_chunks(g, w, sm, xv, 4, park);
    else if (tn <= 6) gq_chunks(g, w, sm, xv, 6, park);
    else gq_chunks(g, w, sm, xv, FX, park);
    for (int r = 0; r < FR; r++)
        for (int t = 0; t < tn; t++) y[t * FR + r] = _mm512_reduce_add_ps(_mm512_load_ps(park + (r * FX + t) * 16));
    hc_copy_edge(y, tn, FR, FX);
}

/* Down columns (groups of one element, no perm: kernels_gptq.h), 16 elements
 * per step: y += a·(s·q + (−s·z)) with separate multiplies and adds in the
 * reference's order, so its bits; other GPTQ rows take the reference. */
T static void axpy_gptq(const hc_weight *w, int r, int c0, int c1, float a, float *y)
{
    const hc_gptq *g = w->ext;
    if (g->gs != 1 || g->perm || c0 % 16) {
        hc_ref_gptq_axpy(w, r, c0, c1, a, y);
        return;
    }
    const uint8_t *row = hc_gptq_codes(g, r);
    const float *sm = hc_gptq_sm(g, r);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 va = _mm512_set1_ps(a);
    int c = c0;
    for (; c + 16 <= c1; c += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(row + (c / 32) * 16));
        if (c % 32) b = _mm_srli_epi16(b, 4);
        const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(15))));
        const __m512 p0 = _mm512_loadu_ps(sm + 2 * c), p1 = _mm512_loadu_ps(sm + 2 * c + 16);
        const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_permutex2var_ps(p0, even, p1), q),
                                       _mm512_permutex2var_ps(p0, odd, p1));
        _mm512_storeu_ps(y + (c - c0), _mm512_add_ps(_mm512_loadu_ps(y + (c - c0)), _mm512_mul_ps(va, v)));
    }
    if (c < c1) hc_ref_gptq_axpy(w, r, c, c1, a, y + (c - c0));
}

const hc_kernel hc_avx512_gptq = { .prepare = prepare_gptq, .dot = dot_gptq, .tile = tile_gptq, .rm = FR,
                                   .tm = FX, .tile_min = 3, .dots = dots_gptq, .dots_rm = DOTS_GQ,
                                   .dots_when = HC_DOTS_BY_CPU, .axpy = axpy_gptq };
#endif
