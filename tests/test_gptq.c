/* GPTQ's pieces on hand-checkable inputs: the sym/asym/Q4_0/Q4_1 grids
 * (find_params quirks, fp16 scales, round half to even), the HF packing
 * against an independent unpack, and one layer: round to nearest equals an
 * independent RTN, error feedback lowers ‖(W−Q)X‖ (plain and act-order),
 * dead columns, damping retries, determinism. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "gptq.h"
#include "harness.h"

static uint64_t rng = 42;
static float frand(void)   /* uniform in [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static gptq_grid grid_of(const float *x, int n, int sym, int param)
{
    gptq_grid g;
    gptq_find_params(x, n, 1, 1, sym, param, &g);
    return g;
}

static void test_grid_sym(void)
{
    const float x[] = { -1.0f, 0.5f, 0.25f, 0.75f };
    gptq_grid g = grid_of(x, 4, 1, GPTQ_NATIVE);
    CHECK(g.zero == 8);
    CHECK(g.d == fp16_to_fp32(fp32_to_fp16(2.0f / 15.0f)));   /* (xmax - xmin)/15, xmax = |xmin| */
    CHECK(gptq_code(&g, GPTQ_NATIVE, -1.0f) == 0);               /* rint(-7.50) = -8 -> 0 */
    CHECK(gptq_code(&g, GPTQ_NATIVE, 1.0f) == 15);               /* rint(7.50) + 8 = 16, clamped */
    CHECK(gptq_code(&g, GPTQ_NATIVE, 0.75f) == 14);              /* rint(5.63) = 6 */
    CHECK(gptq_value(&g, 8) == 0.0f);
}

static void test_grid_sym_nonnegative_quirk(void)
{
    const float x[] = { 0.0f, 1.5f, 0.3f };
    gptq_grid g = grid_of(x, 3, 1, GPTQ_NATIVE);
    CHECK(g.zero == 8);                                          /* xmin stays 0 ... */
    CHECK(g.d == fp16_to_fp32(fp32_to_fp16(0.1f)));              /* ... so scale = xmax/15 */
    CHECK(gptq_code(&g, GPTQ_NATIVE, 1.5f) == 15);               /* top clipped to 7 steps */
    CHECK(fabsf(gptq_value(&g, 15) - 0.7f) < 1e-3f);
}

static void test_grid_asym_and_zero_row(void)
{
    const float x[] = { -0.5f, 1.0f };
    gptq_grid g = grid_of(x, 2, 0, GPTQ_NATIVE);
    CHECK(g.zero == 5);                                          /* rint(0.5 / 0.1) */
    CHECK(gptq_code(&g, GPTQ_NATIVE, -0.5f) == 0);
    CHECK(gptq_code(&g, GPTQ_NATIVE, 1.0f) == 15);
    const float z[] = { 0.0f, 0.0f };
    g = grid_of(z, 2, 0, GPTQ_NATIVE);                           /* range [-1, 1] */
    CHECK(g.d == fp16_to_fp32(fp32_to_fp16(2.0f / 15.0f)));
    CHECK(g.zero == 7);                                          /* 1 / fl(2/15) = 7.4999996 */
    CHECK(gptq_value(&g, gptq_code(&g, GPTQ_NATIVE, 0.0f)) == 0.0f);
}

static void test_round_half_to_even(void)
{
    const float x[] = { 0.0f, 15.0f };                           /* asym: scale 1, zero 0 */
    gptq_grid g = grid_of(x, 2, 0, GPTQ_NATIVE);
    CHECK(g.d == 1.0f && g.zero == 0);
    CHECK(gptq_code(&g, GPTQ_NATIVE, 0.5f) == 0);                /* roundf would give 1 */
    CHECK(gptq_code(&g, GPTQ_NATIVE, 2.5f) == 2);
    CHECK(gptq_code(&g, GPTQ_NATIVE, 3.5f) == 4);
    CHECK(gptq_code(&g, GPTQ_NATIVE, 14.5f) == 14);
}

static void test_grid_ggml_blocks(void)
{
    const float x[] = { -3.0f, 1.0f, 2.0f };
    gptq_grid g = grid_of(x, 3, 1, GPTQ_Q4_0);                   /* d = max / -8, max = -3 */
    CHECK(g.d == 0.375f && g.zero == 8);
    CHECK(gptq_code(&g, GPTQ_Q4_0, -3.0f) == 0);
    CHECK(gptq_code(&g, GPTQ_Q4_0, 2.0f) == 13);                 /* rint(-5.33) + 8 */
    CHECK(gptq_value(&g, 0) == -3.0f);
    const float y[] = { -1.0f, 2.0f, 0.5f };
    g = grid_of(y, 3, 0, GPTQ_Q4_1);                             /* d = (max - min)/15, m = min */
    CHECK(g.d == fp16_to_fp32(fp32_to_fp16(0.2f)) && g.m == -1.0f);
    CHECK(gptq_code(&g, GPTQ_Q4_1, 2.0f) == 15 && gptq_code(&g, GPTQ_Q4_1, -1.0f) == 0);
    const float c[] = { 0.25f, 0.25f };
    g = grid_of(c, 2, 0, GPTQ_Q4_1);                             /* constant block: d = 0 */
    CHECK(g.d == 0.0f && gptq_code(&g, GPTQ_Q4_1, 0.25f) == 0 && gptq_value(&g, 0) == 0.25f);
}

static void test_pack_roundtrip(void)
{
    enum { N = 13, K = 21, G = 3 };   /* neither a multiple of 8: padded words */
    uint8_t codes[N * K], zeros[G * N];
    for (int i = 0; i < N * K; i++) codes[i] = (uint8_t)((i * 7 + i / 5) & 15);
    for (int i = 0; i < G * N; i++) zeros[i] = (uint8_t)((i * 11 + 3) & 15);
    int32_t qw[3 * N], qz[G * 2];
    gptq_pack_qweight(codes, N, K, qw);
    gptq_pack_qzeros(zeros, N, G, qz);
    CHECK(gptq_words(K) == 3 && gptq_words(N) == 2);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < 24; k++) {   /* independent unpack: word [k/8][n], bits 4*(k%8) */
            uint32_t w = (uint32_t)qw[(k / 8) * N + n];
            int v = (int)((w >> (4 * (k % 8))) & 0xF);
            CHECKF(v == (k < K ? codes[n * K + k] : 0), "qweight n=%d k=%d: %d", n, k, v);
        }
    for (int g = 0; g < G; g++)
        for (int n = 0; n < 16; n++) {
            uint32_t w = (uint32_t)qz[g * 2 + n / 8];
            int v = (int)((w >> (4 * (n % 8))) & 0xF);
            CHECKF(v == (n < N ? zeros[g * N + n] : 0), "qzeros g=%d n=%d: %d", g, n, v);
        }
    /* first word by hand: codes 0..7 of output 0 in ascending nibbles */
    uint32_t want = 0;
    for (int i = 7; i >= 0; i--) want = want << 4 | codes[i];
    CHECK((uint32_t)qw[0] == want);
}

/* Inputs with correlated columns (what makes error feedback pay off). */
static float *make_inputs(int T, int K)
{
    float *X = malloc(sizeof(float) * (size_t)T * K);
    for (int t = 0; t < T; t++) {
        float common = frand();
        for (int k = 0; k < K; k++)
            X[(size_t)t * K + k] = frand() * (1.0f + (float)(k % 5)) + 2.0f * common * (float)(k % 3);
    }
    return X;
}

typedef struct {
    uint8_t *codes;
    gptq_grid *grids;
    float *Q;
    double err;
    gptq_stats st;
} layer_out;

static int run_layer(const float *W, int N, int K, const float *X, int T, const gptq_params *p, int rtn,
                     layer_out *o)
{
    const int G = gptq_groups(K, p->group_size);
    float *H = rtn ? NULL : malloc(sizeof(float) * (size_t)K * K);
    o->codes = malloc((size_t)N * K);
    o->grids = malloc(sizeof *o->grids * (size_t)G * N);
    o->Q = malloc(sizeof(float) * (size_t)N * K);
    if (H) gptq_hessian(NULL, X, T, K, H);
    char err[256];
    int rc = gptq_quantize_layer(NULL, W, N, K, H, p, o->codes, o->grids, &o->st, err, sizeof err);
    free(H);
    if (rc == 0) {
        gptq_dequant(o->codes, o->grids, N, K, p->group_size, o->Q);
        o->err = gptq_rel_error(NULL, W, o->Q, N, K, X, T);
    }
    return rc;
}

static void free_out(layer_out *o)
{
    free(o->codes);
    free(o->grids);
    free(o->Q);
}

static void test_layer_rtn_is_independent_rtn(void)
{
    enum { N = 8, K = 40, T = 64, GS = 16 };
    float W[N * K];
    for (int i = 0; i < N * K; i++) W[i] = frand();
    float *X = make_inputs(T, K);
    gptq_params p = { .group_size = GS, .sym = 0, .damp = 0.01f };
    layer_out o;
    CHECK(run_layer(W, N, K, X, T, &p, 1, &o) == 0);
    for (int n = 0; n < N; n++)
        for (int g = 0; g * GS < K; g++) {
            const int c = K - g * GS < GS ? K - g * GS : GS;
            gptq_grid gr = grid_of(W + n * K + g * GS, c, 0, GPTQ_NATIVE);
            for (int k = g * GS; k < g * GS + c; k++)
                CHECKF(o.codes[n * K + k] == gptq_code(&gr, GPTQ_NATIVE, W[n * K + k]), "n=%d k=%d", n, k);
        }
    free_out(&o);
    free(X);
}

static void test_layer_feedback_beats_rtn(void)
{
    enum { N = 24, K = 160, T = 400 };
    float *W = malloc(sizeof(float) * N * K);
    for (int i = 0; i < N * K; i++) W[i] = frand();
    float *X = make_inputs(T, K);
    for (int ao = 0; ao <= 1; ao++) {
        gptq_params p = { .group_size = 32, .sym = 1, .act_order = ao, .damp = 0.01f };
        layer_out r, g, g2;
        CHECK(run_layer(W, N, K, X, T, &p, 1, &r) == 0);
        CHECK(run_layer(W, N, K, X, T, &p, 0, &g) == 0);
        CHECK(run_layer(W, N, K, X, T, &p, 0, &g2) == 0);
        CHECKF(g.err < 0.8 * r.err, "act_order %d: gptq %.4f vs rtn %.4f", ao, g.err, r.err);
        CHECK(memcmp(g.codes, g2.codes, (size_t)N * K) == 0);   /* deterministic */
        CHECK(memcmp(g.grids, g2.grids, sizeof *g.grids * 5 * N) == 0);
        for (int i = 0; i < 5 * N; i++)   /* scales are fp16 values */
            CHECK(g.grids[i].d == fp16_to_fp32(fp32_to_fp16(g.grids[i].d)));
        free_out(&r);
        free_out(&g);
        free_out(&g2);
    }
    free(W);
    free(X);
}

static void test_layer_dead_column(void)
{
    enum { N = 6, K = 32, T = 80 };
    float W[N * K];
    for (int i = 0; i < N * K; i++) W[i] = frand();
    float *X = make_inputs(T, K);
    for (int t = 0; t < T; t++) X[t * K + 5] = 0.0f;   /* input 5 never active */
    gptq_params p = { .group_size = 32, .sym = 0, .damp = 0.01f };
    layer_out o;
    CHECK(run_layer(W, N, K, X, T, &p, 0, &o) == 0);
    CHECK(o.st.dead == 1);
    for (int n = 0; n < N; n++) CHECK(o.Q[n * K + 5] == 0.0f);
    free_out(&o);
    free(X);
}

static void test_layer_damping_retry(void)
{
    enum { N = 4, K = 8, T = 1 };   /* rank-1 Hessian: not positive definite without damping */
    float W[N * K], X[T * K];
    for (int i = 0; i < N * K; i++) W[i] = frand();
    for (int k = 0; k < K; k++) X[k] = 1.0f + (float)k;
    gptq_params p = { .group_size = 8, .sym = 1, .damp = 0.0f };
    layer_out o;
    CHECK(run_layer(W, N, K, X, T, &p, 0, &o) == 0);
    CHECK(o.st.damp == 0.01f);
    free_out(&o);
}

int main(void)
{
    RUN(test_grid_sym);
    RUN(test_grid_sym_nonnegative_quirk);
    RUN(test_grid_asym_and_zero_row);
    RUN(test_round_half_to_even);
    RUN(test_grid_ggml_blocks);
    RUN(test_pack_roundtrip);
    RUN(test_layer_rtn_is_independent_rtn);
    RUN(test_layer_feedback_beats_rtn);
    RUN(test_layer_dead_column);
    RUN(test_layer_damping_retry);
    return th_done();
}
