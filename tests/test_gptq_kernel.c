/* The runtime's INT4-GPTQ weights: repacking from the HF layout, the scalar
 * reference against a product computed straight from qweight/scales/qzeros
 * (g_idx included), every SIMD path against the reference, dequantized
 * rows, bad g_idx refused, and the sparse FFN's down columns and gathered
 * rows against the file layout; the repacked rows in 2 MiB-aligned memory
 * with their padding codes zero. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "harness.h"
#include "hugepage.h"
#include "kernels.h"
#include "kernels_gptq.h"

static uint64_t rng = 7;
static uint32_t urand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)(urand() >> 8) / 16777216.0f * 2.0f - 1.0f; }

typedef struct {
    int n, rows, gs, G;
    int32_t *qw, *qz, *gi;
    uint16_t *sc;
} file_weight;

/* Random file-layout weight; g_idx NULL, or groups of exactly gs inputs in shuffled order. */
static void make_weight(file_weight *f, int n, int rows, int gs, int shuffled)
{
    f->n = n;
    f->rows = rows;
    f->gs = gs;
    f->G = (n + gs - 1) / gs;
    const int kw = (n + 7) / 8, zw = (rows + 7) / 8;
    f->qw = calloc((size_t)kw * rows, sizeof *f->qw);
    f->qz = calloc((size_t)f->G * zw, sizeof *f->qz);
    f->sc = malloc(sizeof *f->sc * (size_t)f->G * rows);
    for (int k = 0; k < n; k++)
        for (int r = 0; r < rows; r++) f->qw[(k / 8) * rows + r] |= (int32_t)((urand() & 15u) << (4 * (k % 8)));
    for (int g = 0; g < f->G; g++)
        for (int r = 0; r < rows; r++) {
            f->qz[g * zw + r / 8] |= (int32_t)((urand() & 15u) << (4 * (r % 8)));
            f->sc[g * rows + r] = fp32_to_fp16(0.01f + 0.05f * (frand() + 1.0f));
        }
    f->gi = NULL;
    if (shuffled) {
        f->gi = malloc(sizeof *f->gi * (size_t)n);
        for (int k = 0; k < n; k++) f->gi[k] = k / gs;
        for (int k = n - 1; k > 0; k--) {   /* Fisher-Yates: same group sizes, any order */
            int j = (int)(urand() % (uint32_t)(k + 1)), t = f->gi[k];
            f->gi[k] = f->gi[j];
            f->gi[j] = t;
        }
    }
}

static void free_weight(file_weight *f)
{
    free(f->qw);
    free(f->qz);
    free(f->sc);
    free(f->gi);
}

/* W[r][k] straight from the file layout: scale[g][r] * (q[k][r] - zero[g][r]), g = g_idx[k]. */
static double file_value(const file_weight *f, int r, int k)
{
    const int g = f->gi ? f->gi[k] : k / f->gs, zw = (f->rows + 7) / 8;
    const int q = (int)(((uint32_t)f->qw[(k / 8) * f->rows + r] >> (4 * (k % 8))) & 15u);
    const int z = (int)(((uint32_t)f->qz[g * zw + r / 8] >> (4 * (r % 8))) & 15u);
    return (double)fp16_to_fp32(f->sc[g * f->rows + r]) * (q - z);
}

/* The activation the product sees, in input order: x itself, or (int8
 * activation, gs % 32 == 0) each position's d_b·x̃ from the prepared act. */
static void seen_x(const hc_gptq *g, const float *x, const void *act, float *out)
{
    for (int i = 0; i < g->n; i++)
        out[g->perm ? g->perm[i] : i] = hc_gptq_int8(g) ? hc_gptq_xd(act, i / 32) * (float)hc_gptq_xq(act, i) : x[i];
}

/* B vectors: 3 and 12 give the AVX-512 tile its half (4 vectors, the last
 * repeated; 12: a whole tile, then half a one), 13 two whole ones (the
 * second with 5), AVX2's tile of 4 its edges. */
static void check_batch(int n, int rows, int gs, int shuffled, int B)
{
    file_weight f;
    make_weight(&f, n, rows, gs, shuffled);
    hc_gptq g;
    char err[256];
    if (hc_gptq_load(&g, n, rows, gs, f.qw, f.sc, f.qz, f.gi, err, sizeof err) != 0) {
        th_fail(__FILE__, __LINE__, "load: %s", err);
        free_weight(&f);
        return;
    }
    const hc_weight gw = { .kind = HC_WEIGHT_GPTQ, .n = n, .rows = rows, .ext = &g };
    const size_t ab = hc_gptq_act_bytes(&g);
    float *x = malloc(sizeof(float) * (size_t)n * B), *row = malloc(sizeof(float) * (size_t)n);
    char *acts = malloc(ab * B);
    float *y_ref = malloc(sizeof(float) * (size_t)rows * B), *y = malloc(sizeof(float) * (size_t)(rows * B > n ? rows * B : n));
    for (int i = 0; i < n * B; i++) x[i] = frand();
    for (int b = 0; b < B; b++) hc_gptq_act_prepare(&g, x + (size_t)b * n, acts + (size_t)b * ab);
    hc_weight_matvec(&gw, HC_ISA_SCALAR, 0, rows, acts, ab, B, y_ref, (size_t)rows);
    /* the reference: the file's weights times the activation it sees (x, or
     * x rounded to int8 blocks: then within half a step of each block's
     * scale of the exact product, times Σ|w|) */
    int bad = 0;
    float *xs = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < rows && !bad; r++) {
        hc_gptq_row(&g, r, row);
        for (int b = 0; b < B && !bad; b++) {
            const float *xb = x + (size_t)b * n;
            seen_x(&g, xb, acts + (size_t)b * ab, xs);
            double want = 0, exact = 0, mag = 0, step = 0;
            for (int k = 0; k < n; k++) {
                const double w = file_value(&f, r, k);
                want += w * xs[k];
                exact += w * xb[k];
                mag += fabs(w * xs[k]);
                step += fabs(w) * fabs(xs[k] - xb[k]);
                if (b == 0 && row[k] != (float)w) bad = 1;
                if (fabs(xs[k] - xb[k]) > (hc_gptq_int8(&g) ? 1.0 / 254 + 1e-7 : 0)) bad = 6;
            }
            if (fabs(y_ref[(size_t)b * rows + r] - want) > 1e-5 * mag + 1e-6) bad = 2;
            if (fabs(y_ref[(size_t)b * rows + r] - exact) > step + 1e-5 * mag + 1e-6) bad = 2;
        }
    }
    free(xs);
    /* row AXPY: a times the dequantized row, over all columns and over a range */
    for (int r = 0; r < rows && !bad; r += 7) {
        const int c0 = n / 3, c1 = n - n / 4;
        hc_gptq_row(&g, r, row);
        memset(y, 0, sizeof(float) * (size_t)n);
        hc_weight_axpy(&gw, HC_ISA_SCALAR, r, 0, n, 0.5f, y);
        for (int k = 0; k < n; k++)
            if (y[k] != 0.5f * row[k]) bad = 5;
        memset(y, 0, sizeof(float) * (size_t)n);
        hc_weight_axpy(&gw, HC_ISA_SCALAR, r, c0, c1, 0.5f, y);
        for (int k = c0; k < c1; k++)
            if (y[k - c0] != 0.5f * row[k]) bad = 5;
    }
    const char *isas[] = { "avx512", "avx2", "scalar" };
    float *y1 = malloc(sizeof(float) * (size_t)rows);
    for (size_t i = 0; i < sizeof isas / sizeof *isas && !bad; i++) {
        if (hc_kernel_force(isas[i]) != 0) continue;   /* not on this CPU */
        hc_weight_matvec(&gw, hc_isa(), 0, rows, acts, ab, B, y, (size_t)rows);
        for (int j = 0; j < rows * B; j++)
            if (fabsf(y[j] - y_ref[j]) > 1e-5f * (1.0f + fabsf(y_ref[j])) && !bad) bad = 3;
        /* the tile (B > 1) gives the bits of B = 1, rows one at a time and
         * as streams (AVX-512's hc_decode_streams) */
        for (int st = 0; st < 2; st++) {
            hc_kernel_decode_streams(st);
            for (int b = 0; b < B; b++) {
                hc_weight_matvec(&gw, hc_isa(), 0, rows, acts + (size_t)b * ab, ab, 1, y1, (size_t)rows);
                if (memcmp(y1, y + (size_t)b * rows, sizeof(float) * (size_t)rows) && !bad) bad = 7;
            }
        }
        hc_kernel_decode_streams(-1);
        /* any row split gives the same values */
        hc_weight_matvec(&gw, hc_isa(), rows / 2, rows, acts, ab, B, y, (size_t)rows);
        for (int b = 0; b < B; b++)
            for (int r = rows / 2; r < rows; r++)
                if (fabsf(y[(size_t)b * rows + r - rows / 2] - y_ref[(size_t)b * rows + r]) >
                    1e-5f * (1.0f + fabsf(y_ref[(size_t)b * rows + r])) && !bad)
                    bad = 4;
    }
    hc_kernel_force(NULL);
    static const char *what[] = { "", "row dequant", "reference vs file layout", "SIMD vs reference", "row split",
                                  "row AXPY", "activation rounding", "tile vs B = 1" };
    if (bad) th_fail(__FILE__, __LINE__, "n=%d rows=%d gs=%d shuffled=%d B=%d: %s", n, rows, gs, shuffled, B, what[bad]);
    free(y1);
    free(x);
    free(row);
    free(acts);
    free(y_ref);
    free(y);
    hc_gptq_free(&g);
    free_weight(&f);
}

static void check_shape(int n, int rows, int gs, int shuffled)
{
    /* 2: dots; 3 .. 8: AVX2's tile for few vectors, AVX-512's tile (run
     * on 4, 6 or 8 vectors, the last repeated); 12, 13: whole tiles and an
     * edge */
    static const int batches[] = { 2, 3, 4, 5, 6, 7, 8, 12, 13 };
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) check_batch(n, rows, gs, shuffled, batches[i]);
}

static void test_plain_groups(void)
{
    check_shape(256, 37, 128, 0);
    check_shape(172, 64, 32, 0);    /* stories260K's ffn_down: partial last group, padded words */
    check_shape(64, 13, 128, 0);    /* one group shorter than gs */
    check_shape(96, 9, 24, 0);      /* gs not a multiple of 32: scalar path */
    check_shape(1184, 19, 32, 0);   /* 37 blocks: two whole chunks of 16 and a masked one */
    check_shape(4096, 11, 128, 0);  /* LLaMA's rows: 8 chunks */
    check_shape(384, 7, 96, 0);     /* three blocks a group: an AVX2 step meets four groups */
}

static void test_act_order_g_idx(void)
{
    check_shape(256, 21, 64, 1);
    check_shape(200, 16, 32, 1);
    check_shape(2048, 9, 128, 1);
}

static void test_same_act(void)
{
    file_weight f1, f2;
    make_weight(&f1, 128, 8, 32, 0);
    make_weight(&f2, 128, 16, 32, 1);
    hc_gptq a, b, c;
    char err[256];
    CHECK(hc_gptq_load(&a, 128, 8, 32, f1.qw, f1.sc, f1.qz, NULL, err, sizeof err) == 0);
    CHECK(hc_gptq_load(&b, 128, 8, 64, f1.qw, f1.sc, f1.qz, NULL, err, sizeof err) == 0);
    CHECK(hc_gptq_load(&c, 128, 16, 32, f2.qw, f2.sc, f2.qz, f2.gi, err, sizeof err) == 0);
    CHECK(hc_gptq_same_act(&a, &a) && !hc_gptq_same_act(&a, &b) && !hc_gptq_same_act(&a, &c));
    hc_gptq_free(&a);
    hc_gptq_free(&b);
    hc_gptq_free(&c);
    free_weight(&f1);
    free_weight(&f2);
}

/* Each instruction set's prepare gives hc_gptq_act_prepare's bytes: random
 * values, values halfway between two steps (ties round away from zero), a
 * block of zeros (scale 0) and a partial last block, in file order and
 * gathered by g_idx. */
static void check_prepare(int n, int gs, int shuffled)
{
    file_weight f;
    make_weight(&f, n, 4, gs, shuffled);
    hc_gptq g;
    char err[256];
    if (hc_gptq_load(&g, n, 4, gs, f.qw, f.sc, f.qz, f.gi, err, sizeof err) != 0) {
        th_fail(__FILE__, __LINE__, "load: %s", err);
        free_weight(&f);
        return;
    }
    const hc_weight gw = { .kind = HC_WEIGHT_GPTQ, .n = n, .rows = 4, .ext = &g };
    const size_t ab = hc_gptq_act_bytes(&g);
    float *x = malloc(sizeof(float) * (size_t)n);
    char *want = malloc(ab), *got = malloc(ab);
    for (int k = 0; k < n; k++) {
        const int b = k / 32;
        x[k] = b % 3 == 0 ? frand() : b % 3 == 1 ? (float)(k % 127 - 63) * 0.5f + 0.25f : 0.0f;
        if (b % 3 == 1 && k % 32 == 0) x[k] = -63.5f;   /* the block's max: d = 0.5, x / d = ±(j + 0.5) elsewhere */
    }
    hc_gptq_act_prepare(&g, x, want);
    const char *isas[] = { "avx512", "avx2", "scalar" };
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
        if (hc_kernel_force(isas[i]) != 0) continue;
        memset(got, 0x5a, ab);
        hc_weight_prepare(&gw, hc_isa(), x, got);
        if (memcmp(got, want, ab)) th_fail(__FILE__, __LINE__, "%s: n=%d gs=%d shuffled=%d: prepared bytes differ",
                                           isas[i], n, gs, shuffled);
    }
    hc_kernel_force(NULL);
    free(x);
    free(want);
    free(got);
    hc_gptq_free(&g);
    free_weight(&f);
}

static void test_prepare(void)
{
    check_prepare(1184, 32, 0);
    check_prepare(172, 32, 0);
    check_prepare(4096, 128, 0);
    check_prepare(2048, 128, 1);
    check_prepare(200, 32, 1);
    check_prepare(96, 24, 0);
}

/* Down columns of an ffn_down of n_ff = n inputs and n_embd = rows outputs:
 * neuron j's element e is the file's W[e][j] with the scale and zero of
 * group g_idx[j]; its AXPY on every instruction set adds exactly a times it;
 * gathered rows (of the columns and of the weight) are the rows named. */
static void check_columns(int n, int rows, int gs, int shuffled)
{
    file_weight f;
    make_weight(&f, n, rows, gs, shuffled);
    hc_gptq g, c, gc, gw;
    char err[256];
    CHECKF(hc_gptq_load(&g, n, rows, gs, f.qw, f.sc, f.qz, f.gi, err, sizeof err) == 0, "%s", err);
    CHECK(hc_gptq_columns(&g, &c) == 0);
    CHECK(c.rows == n && c.n == rows && c.gs == 1 && c.n_sm == f.G && !c.perm && c.sm_row);
    CHECK(hc_gptq_bytes(&c) == (size_t)n * ((size_t)c.kp / 2 + 4) + (size_t)f.G * (size_t)rows * 8);
    const hc_weight cw = { .kind = HC_WEIGHT_GPTQ, .n = rows, .rows = n, .ext = &c };
    float *row = malloc(sizeof(float) * (size_t)rows), *y = malloc(sizeof(float) * (size_t)rows);
    float *y0 = malloc(sizeof(float) * (size_t)rows);
    for (int e = 0; e < rows; e++) y0[e] = frand();
    int bad = 0, axpy_bad = 0, group_bad = 0;
    const char *isas[] = { "scalar", "avx2", "avx512" };
    for (int j = 0; j < n; j++) {
        group_bad += c.sm_row[j] != (f.gi ? f.gi[j] : j / gs);
        hc_gptq_row(&c, j, row);
        for (int e = 0; e < rows; e++) bad += row[e] != (float)file_value(&f, e, j);
        const int c0 = j % 2 ? 32 : 0, c1 = j % 3 ? rows : rows - rows % 32;
        for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
            if (hc_kernel_force(isas[i]) != 0) continue;
            for (int e = 0; e < rows; e++) y[e] = y0[e];
            hc_weight_axpy(&cw, hc_isa(), j, c0, c1, -0.75f, y);
            for (int e = c0; e < c1; e++) axpy_bad += y[e - c0] != y0[e - c0] + -0.75f * row[e];
        }
        hc_kernel_force(NULL);
    }
    CHECKF(!bad && !axpy_bad && !group_bad, "n=%d rows=%d gs=%d shuffled=%d: %d values, %d AXPY values, %d groups wrong",
           n, rows, gs, shuffled, bad, axpy_bad, group_bad);
    int32_t idx[5] = { n - 1, 0, n / 2, 3, n / 3 }, ridx[3] = { rows - 1, 0, rows / 2 };
    CHECK(hc_gptq_gather(&c, idx, 5, &gc) == 0 && hc_gptq_gather(&g, ridx, 3, &gw) == 0);
    CHECK(gc.rows == 5 && gc.n_sm == c.n_sm && gw.rows == 3 && gw.n_sm == 3 && !gw.sm_row && !gw.perm == !g.perm);
    float *a = malloc(sizeof(float) * (size_t)(n > rows ? n : rows)), *b = malloc(sizeof(float) * (size_t)(n > rows ? n : rows));
    for (int i = 0; i < 5; i++) {
        hc_gptq_row(&c, idx[i], a);
        hc_gptq_row(&gc, i, b);
        CHECKF(memcmp(a, b, sizeof(float) * (size_t)rows) == 0, "gathered column %d", idx[i]);
        if (i >= 3) continue;
        hc_gptq_row(&g, ridx[i], a);
        hc_gptq_row(&gw, i, b);
        CHECKF(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "gathered row %d", ridx[i]);
    }
    free(a);
    free(b);
    free(row);
    free(y);
    free(y0);
    hc_gptq_free(&gc);
    hc_gptq_free(&gw);
    hc_gptq_free(&c);
    hc_gptq_free(&g);
    free_weight(&f);
}

static void test_down_columns(void)
{
    check_columns(256, 64, 128, 0);
    check_columns(172, 40, 32, 0);   /* partial last group, n_embd not whole 32s */
    check_columns(256, 96, 64, 1);   /* act-order g_idx */
    check_columns(200, 48, 32, 1);
}

static void test_bad_g_idx(void)
{
    file_weight f;
    make_weight(&f, 64, 8, 32, 1);
    hc_gptq g;
    char err[256];
    f.gi[3] = f.gi[3] == 0 ? 1 : 0;   /* one group gets 33 inputs */
    CHECK(hc_gptq_load(&g, 64, 8, 32, f.qw, f.sc, f.qz, f.gi, err, sizeof err) == -1);
    CHECK(strstr(err, "g_idx gives group") != NULL);
    f.gi[0] = 2;
    CHECK(hc_gptq_load(&g, 64, 8, 32, f.qw, f.sc, f.qz, f.gi, err, sizeof err) == -1);
    CHECK(strstr(err, "is not a group") != NULL);
    free_weight(&f);
}

/* The rows live in memory that can take 2 MiB pages (hugepage.h): the
 * codes start on a 2 MiB boundary, and the padding past n is zero codes
 * (the allocation is not zeroed memory, the load clears it). */
static void test_huge_rows(void)
{
    void *p = hc_huge_alloc((size_t)3 << 20);
    CHECK(p && (uintptr_t)p % ((uintptr_t)2 << 20) == 0);
    if (p) memset(p, 1, (size_t)3 << 20);
    free(p);
    file_weight f;
    make_weight(&f, 4090, 1100, 128, 0);   /* 2048-byte rows: 2.1 MiB of codes */
    hc_gptq g;
    char err[256];
    CHECKF(hc_gptq_load(&g, 4090, 1100, 128, f.qw, f.sc, f.qz, NULL, err, sizeof err) == 0, "%s", err);
    CHECK((uintptr_t)g.codes % ((uintptr_t)2 << 20) == 0);
    int pad = 0;
    for (int r = 0; r < g.rows; r++)
        for (int k = g.n; k < g.kp; k++) pad |= hc_gptq_code(hc_gptq_codes(&g, r), k);
    CHECK(pad == 0);
    hc_gptq_free(&g);
    free_weight(&f);
}

int main(void)
{
    RUN(test_plain_groups);
    RUN(test_act_order_g_idx);
    RUN(test_same_act);
    RUN(test_prepare);
    RUN(test_down_columns);
    RUN(test_bad_g_idx);
    RUN(test_huge_rows);
    return th_done();
}
