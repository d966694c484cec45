/* Matrix-vector kernels: every type on every instruction set this CPU runs,
 * against the scalar reference; exact bytes of the Q8_0 activation quantizer;
 * hand-checkable blocks of docs/formats.md; bit-identical results whatever
 * the row split or batch size. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "kernels.h"
#include "matmul.h"
#include "x16.h"
#include "quants.h"

static const char *const isas[] = { "avx512", "avx2", "scalar" };
static const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
#define NISA (int)(sizeof isas / sizeof isas[0])
#define NTYPE (int)(sizeof types / sizeof types[0])

/* The kernels through the weight API (weight.h), on raw rows of type t: the
 * instruction set in use (hc_kernel_force) or the scalar reference. */
static hc_weight view(uint32_t t, const void *W, int n, int rows)
{
    return (hc_weight){ .kind = HC_WEIGHT_GGML, .type = t, .data = W, .n = n, .rows = rows };
}
static size_t act_bytes(uint32_t t, int n) { return hc_weight_act_bytes(&(hc_weight){ .kind = HC_WEIGHT_GGML, .type = t, .n = n }); }
static void act_prepare(uint32_t t, const float *x, int n, void *act) { hc_weight w = view(t, NULL, n, 1); hc_weight_prepare(&w, hc_isa(), x, act); }
static void row_to_f32(uint32_t t, const void *row, int n, float *out) { hc_weight w = view(t, row, n, 1); hc_weight_row(&w, 0, out); }
static void matvec_of(int isa, hc_weight w, int r0, int r1, const void *acts, size_t as, int B, float *y, size_t ys)
{
    size_t xs = hc_weight_arranged_bytes(&w, isa);
    void *xa = NULL;
    if (xs) {   /* arranged once for the product, as hc_ctx_matvec does */
        CHECK(posix_memalign(&xa, 64, xs * (size_t)B) == 0);
        hc_weight_arrange(&w, isa, acts, as, B, xa);
    }
    hc_weight_matvec(&w, isa, r0, r1, xs ? xa : acts, xs ? xs : as, B, y, ys);
    free(xa);
}
static void matvec_on(int isa, uint32_t t, const void *W, int n, int r0, int r1, const void *acts, size_t as, int B,
                      float *y, size_t ys)
{ matvec_of(isa, view(t, W, n, r1), r0, r1, acts, as, B, y, ys); }
static void matvec(uint32_t t, const void *W, int n, int r0, int r1, const void *acts, size_t as, int B, float *y, size_t ys)
{ matvec_on(hc_isa(), t, W, n, r0, r1, acts, as, B, y, ys); }
static void matvec_ref(uint32_t t, const void *W, int n, int r0, int r1, const void *acts, size_t as, int B, float *y,
                       size_t ys)
{ matvec_on(HC_ISA_SCALAR, t, W, n, r0, r1, acts, as, B, y, ys); }
static void matvec_rows(uint32_t t, const void *W, int n, const int32_t *idx, int k, int step, const void *act, float *y)
{
    int rows = 0;
    for (int i = 0; i < k; i++) rows = step * idx[i] >= rows ? step * idx[i] + 1 : rows;
    hc_weight w = view(t, W, n, rows);
    size_t xs = hc_weight_arranged_bytes(&w, hc_isa());
    void *xa = NULL;
    if (xs) {
        CHECK(posix_memalign(&xa, 64, xs) == 0);
        hc_weight_arrange(&w, hc_isa(), act, 0, 1, xa);
    }
    hc_weight_matvec_rows(&w, hc_isa(), idx, k, step, xs ? xa : act, y);
    free(xa);
}
static void axpy(uint32_t t, const void *row, int n, float a, float *y) { hc_weight w = view(t, row, n, 1); hc_weight_axpy(&w, hc_isa(), 0, 0, n, a, y); }
static void axpy_ref(uint32_t t, const void *row, int n, float a, float *y) { hc_weight w = view(t, row, n, 1); hc_weight_axpy(&w, HC_ISA_SCALAR, 0, 0, n, a, y); }

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)rnd() / 4294967296.0f * 2 - 1; }   /* [-1, 1) */

static int is_quant(uint32_t t) { return t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0; }

/* rows x n weights of type t from random floats (scaled per row); Q8_0 rows get
 * a few -128 bytes, which files may hold though ggml's quantizer never writes them. */
static void *make_weights(uint32_t t, int rows, int n)
{
    size_t rb = ggml_row_size(t, n);
    char *w = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)n * sizeof *x);
    for (int r = 0; r < rows; r++) {
        float s = ldexpf(1, (int)(rnd() % 9) - 4);
        for (int i = 0; i < n; i++) x[i] = frand() * s;
        void *row = w + rb * (size_t)r;
        uint16_t *h = row;
        switch (t) {
        case GGML_TYPE_F32: memcpy(row, x, (size_t)n * sizeof *x); break;
        case GGML_TYPE_F16: for (int i = 0; i < n; i++) h[i] = fp32_to_fp16(x[i]); break;
        case GGML_TYPE_BF16: for (int i = 0; i < n; i++) h[i] = fp32_to_bf16(x[i]); break;
        case GGML_TYPE_Q4_0: quantize_row_q4_0_ref(x, row, n); break;
        case GGML_TYPE_Q8_0:
            quantize_row_q8_0_ref(x, row, n);
            for (int k = 0; k < n / 64; k++) ((block_q8_0 *)row)[rnd() % (unsigned)(n / 32)].qs[rnd() % 32] = -128;
            break;
        }
    }
    free(x);
    return w;
}

/* B prepared activations of n elements, act_stride bytes apart. */
static void *make_acts(uint32_t t, int n, int B, size_t *stride)
{
    *stride = act_bytes(t, n) + 16;   /* a gap, so strides are really honoured */
    char *a = calloc((size_t)B, *stride);
    float *x = malloc((size_t)n * sizeof *x);
    for (int b = 0; b < B; b++) {
        float s = ldexpf(1, (int)(rnd() % 9) - 4);
        for (int i = 0; i < n; i++) x[i] = frand() * s;
        act_prepare(t, x, n, a + (size_t)b * *stride);
    }
    free(x);
    return a;
}

/* Σ|w_i x_i| over the values the kernels really multiply: the scale of the
 * rounding error any summation order can make. */
static double abs_dot(uint32_t t, const void *row, const void *act, int n)
{
    float *w = malloc((size_t)n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
    row_to_f32(t, row, n, w);
    if (is_quant(t)) dequantize_row_q8_0(act, x, n);
    else if (t == GGML_TYPE_BF16) row_to_f32(t, act, n, x);   /* the bf16 activation: a row's layout */
    else memcpy(x, act, (size_t)n * sizeof *x);
    double s = 0;
    for (int i = 0; i < n; i++) s += fabs((double)w[i] * x[i]);
    free(w);
    free(x);
    return s;
}

static int random_n(uint32_t t)
{
    static const int quant_n[] = { 32, 64, 96, 160, 224, 1024, 4096 };
    static const int float_n[] = { 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 257, 1000, 4099 };
    if (is_quant(t)) return quant_n[rnd() % (sizeof quant_n / sizeof quant_n[0])];
    return float_n[rnd() % (sizeof float_n / sizeof float_n[0])];
}

/* fn(isa) with each ISA the CPU runs selected in turn; fn reports its own
 * failure with th_fail and returns 0. */
static void each_isa(int (*fn)(const char *isa))
{
    int ran = 0;
    for (int i = 0; i < NISA; i++) {
        if (hc_kernel_force(isas[i])) continue;
        ran++;
        int ok = !strcmp(hc_kernel_isa(), isas[i]) && fn(isas[i]);
        hc_kernel_force(NULL);
        if (!ok) {
            if (!th_failed_case) th_fail(__FILE__, __LINE__, "forcing %s did not select it", isas[i]);
            return;
        }
    }
    if (!ran) th_fail(__FILE__, __LINE__, "no instruction set ran");
}

static void test_dispatch(void)
{
    CHECK(hc_kernel_force("avx9000") != 0);
    CHECK(hc_kernel_force("scalar") == 0 && !strcmp(hc_kernel_isa(), "scalar"));
    CHECK(hc_kernel_force(NULL) == 0);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK(hc_kernel_force("avx2") == 0 && !strcmp(hc_kernel_isa(), "avx2"));
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
        CHECK(hc_kernel_force("avx512") == 0 && !strcmp(hc_kernel_isa(), "avx512"));
    hc_kernel_force(NULL);
    CHECK(hc_isa() == HC_ISA_CHOSEN && !strcmp(hc_kernel_isa(), "by type"));
    for (int i = 0; i < NTYPE; i++) CHECK(hc_kernel_supports(types[i]));
    CHECK(!hc_kernel_supports(GGML_TYPE_Q2_K) && !hc_kernel_supports(GGML_TYPE_I32));
    CHECK(act_bytes(GGML_TYPE_F16, 7) == 28 && act_bytes(GGML_TYPE_BF16, 7) == 14);
    CHECK(act_bytes(GGML_TYPE_Q4_0, 64) == 68 && act_bytes(GGML_TYPE_Q8_0, 4096) == 128 * 34);
}

/* docs/formats.md ("Q8_0 and Q4_0 blocks"), inputs A, C, E, Z and their Q8_0 bytes from ggml. */
static void input_A(float *x) { for (int j = 0; j < 32; j++) x[j] = (float)(j - 16); }
static void input_C(float *x)
{
    static const float c[9] = { 127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -127 };
    memset(x, 0, 32 * sizeof *x);
    memcpy(x, c, sizeof c);
}
static void input_E(float *x) { for (int j = 0; j < 32; j++) x[j] = 0.1f * (float)j; }
static void input_Z(float *x) { memset(x, 0, 32 * sizeof *x); }

static const uint8_t q8_A[34] = { 0x08, 0x30, 0x81, 0x89, 0x91, 0x99, 0xa1, 0xa9, 0xb1, 0xb9, 0xc0, 0xc8, 0xd0, 0xd8,
                                  0xe0, 0xe8, 0xf0, 0xf8, 0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38, 0x40, 0x47,
                                  0x4f, 0x57, 0x5f, 0x67, 0x6f, 0x77 };
static const uint8_t q8_C[34] = { 0x00, 0x3c, 0x7f, 0x01, 0x02, 0x03, 0xff, 0xfe, 0xfd, 0x7f, 0x81 };
static const uint8_t q8_E[34] = { 0x40, 0x26, 0x00, 0x04, 0x08, 0x0c, 0x10, 0x14, 0x19, 0x1d, 0x21, 0x25, 0x29, 0x2d,
                                  0x31, 0x35, 0x39, 0x3d, 0x42, 0x46, 0x4a, 0x4e, 0x52, 0x56, 0x5a, 0x5e, 0x62, 0x66,
                                  0x6b, 0x6f, 0x73, 0x77, 0x7b, 0x7f };
static const uint8_t q8_Z[34] = { 0 };

static int act_bytes_match_ggml(const char *isa)
{
    void (*const in[4])(float *) = { input_A, input_C, input_E, input_Z };
    const uint8_t *want[4] = { q8_A, q8_C, q8_E, q8_Z };
    for (int i = 0; i < 4; i++) {
        float x[64];
        uint8_t got[68];
        in[i](x);
        in[(i + 1) % 4](x + 32);
        act_prepare(GGML_TYPE_Q4_0, x, 64, got);
        if (memcmp(got, want[i], 34) || memcmp(got + 34, want[(i + 1) % 4], 34)) {
            th_fail(__FILE__, __LINE__, "%s: Q8_0 activation of input %d differs from ggml's bytes", isa, i);
            return 0;
        }
    }
    return 1;
}

/* The table of CPU models: a row applies to its vendor, family and models,
 * and only where the CPU runs every instruction set it names. */
static void test_kernel_table(void)
{
    hc_kernel_row k = { { 0 }, -1, -1, -1 };
    hc_cpu_id zen4 = { "AuthenticAMD", 25, 17 }, zen5 = { "AuthenticAMD", 26, 68 };
    hc_cpu_id xeon = { "GenuineIntel", 6, 167 }, xeon207 = { "GenuineIntel", 6, 207 };
    hc_cpu_id intel = { "GenuineIntel", 25, 17 }, none = { "", 0, 0 };
    const char *row = hc_kernel_table(&zen4, HC_ISA_AVX512, &k);
    CHECK(row && !strcmp(row, "Zen 4") && k.wperm == 1 && k.streams == 0 && k.bf16dp == 1);
    row = hc_kernel_table(&zen5, HC_ISA_AVX512, &k);
    CHECK(row && !strcmp(row, "Zen 5") && k.isa[HC_KT_Q4_0] == HC_ISA_AVX2 && k.isa[HC_KT_Q8_0] == HC_ISA_AVX512 && !k.wperm &&
          !k.streams);
    row = hc_kernel_table(&xeon, HC_ISA_AVX512, &k);
    CHECK(row && k.isa[HC_KT_Q4_0] == HC_ISA_AVX512 && k.streams == 1 && k.bf16dp == 0);
    row = hc_kernel_table(&xeon207, HC_ISA_AVX512, &k);
    CHECK(row && !strcmp(row, "Intel Xeon (model 207)") && !k.wperm && k.streams == 1 && k.bf16dp == 0);
    CHECK(!hc_kernel_table(&zen4, HC_ISA_AVX2, &k));   /* Zen 3: family 25 without AVX-512 */
    CHECK(!hc_kernel_table(&intel, HC_ISA_AVX512, &k) && !hc_kernel_table(&none, HC_ISA_AVX512, &k));
}

/* The choice by type: fixed for the process, an instruction set this CPU
 * runs, and the kernels HC_ISA_CHOSEN reaches are that set's; forcing one
 * takes every type there. */
static void test_kernel_choice(void)
{
    hc_kernel_force(NULL);
    for (int kt = 0; kt < HC_KT_COUNT; kt++) {
        int c = hc_kernel_choice(kt);
        CHECK(c >= HC_ISA_SCALAR && c < HC_ISA_COUNT && c == hc_kernel_choice(kt));
        CHECK(hc_kernel_force(((const char *[]){ "scalar", "avx2", "avx512" })[c]) == 0);
        hc_kernel_force(NULL);
    }
    /* the ggml types in the order of enum hc_kernel_type */
    static const uint32_t kt_type[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    for (int kt = 0; kt < (int)(sizeof kt_type / sizeof kt_type[0]); kt++) {
        hc_weight w = view(kt_type[kt], NULL, 64, 1);
        CHECK(hc_kernel_for(&w, HC_ISA_CHOSEN) == hc_kernel_for(&w, hc_kernel_choice(kt)));
    }
    CHECK(hc_kernel_force("scalar") == 0);
    for (int kt = 0; kt < HC_KT_COUNT; kt++) CHECK(hc_kernel_choice(kt) == HC_ISA_SCALAR);
    char line[512];
    hc_kernel_describe(line, sizeof line);
    CHECK(strstr(line, "Q4_0 scalar") && strstr(line, "(forced)"));
    hc_kernel_force(NULL);
    hc_kernel_describe(line, sizeof line);
    CHECK(strstr(line, "table: ") || strstr(line, "cpuid: "));
}

static void test_act_quant_ggml_bytes(void) { each_isa(act_bytes_match_ggml); }

/* Random vectors, including exact .5 ties (amax 127 makes id = 1), against the ref bytes. */
static int act_bytes_match_ref(const char *isa)
{
    enum { N = 4096 };
    static float x[N];
    static block_q8_0 want[N / 32], got[N / 32];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++)
            x[i] = round & 1 ? (float)((int)(rnd() % 254) - 127) + 0.5f * (float)(rnd() & 1) : frand() * 3;
        for (int b = 0; round & 1 && b < N / 32; b++) x[b * 32 + rnd() % 32] = rnd() & 1 ? 127 : -127;
        quantize_row_q8_0_ref(x, want, N);
        act_prepare(GGML_TYPE_Q8_0, x, N, got);
        if (memcmp(got, want, sizeof want)) {
            th_fail(__FILE__, __LINE__, "%s: Q8_0 activation differs from quantize_row_q8_0_ref (round %d)", isa, round);
            return 0;
        }
    }
    return 1;
}

static void test_act_quant_matches_ref(void) { each_isa(act_bytes_match_ref); }

static void test_dequant_hand_blocks(void)
{
    static const uint8_t q4_A[18] = { 0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6,
                                      0xe6, 0xf7, 0xf7, 0xf8 };
    static const uint8_t q4_C[18] = { 0xf0, 0xcb, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x80, 0x8f, 0x88, 0x88,
                                      0x88, 0x88, 0x88, 0x88, 0x88 };
    static const float want_A[32] = { -16, -14, -14, -12, -12, -10, -10, -8, -8, -6, -6, -4, -4, -2, -2, 0,
                                      0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14, 14 };
    float y[32];
    row_to_f32(GGML_TYPE_Q4_0, q4_A, 32, y);
    for (int j = 0; j < 32; j++) CHECKF(y[j] == want_A[j], "A[%d] = %g", j, y[j]);
    row_to_f32(GGML_TYPE_Q4_0, q4_C, 32, y);   /* d = -15.875 */
    CHECK(y[0] == 127 && y[7] == 127 && y[8] == -111.125f && y[1] == 0 && y[16] == 0);
    /* Q8_0 A: d = fp16 0x3008 = 1.0078125 / 8 */
    row_to_f32(GGML_TYPE_Q8_0, q8_A, 32, y);
    CHECK(y[0] == -127 * 0.1259765625f && y[16] == 0 && y[31] == 119 * 0.1259765625f);
    row_to_f32(GGML_TYPE_Q8_0, q8_C, 32, y);   /* d = 1.0 */
    CHECK(y[0] == 127 && y[1] == 1 && y[4] == -1 && y[8] == -127 && y[9] == 0);
    /* Q4_1: d = 0.5 (0x3800), m = -1 (0xbc00): y = q/2 - 1 */
    block_q4_1 b41 = { 0x3800, 0xbc00, { 0 } };
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | (15 - j) << 4);
    dequantize_row_q4_1(&b41, y, 32);   /* not a runtime weight type: the common dequantizer */
    for (int j = 0; j < 16; j++) CHECK(y[j] == j * 0.5f - 1 && y[j + 16] == (15 - j) * 0.5f - 1);
    uint16_t h[3] = { 0x3c00, 0xc000, 0x3f80 };   /* f16 1, f16 -2, bf16 1 */
    row_to_f32(GGML_TYPE_F16, h, 2, y);
    CHECK(y[0] == 1 && y[1] == -2);
    row_to_f32(GGML_TYPE_BF16, h + 2, 1, y);
    CHECK(y[0] == 1);
}

/* The hand blocks as weights: the dot with x = 1..32 is Σ dequant(w)·x_q on every ISA. */
static int hand_block_dots(const char *isa)
{
    static const uint8_t q4_E[18] = { 0x33, 0xb6, 0x48, 0x48, 0x37, 0x37, 0x37, 0x37, 0x26, 0x26, 0x26, 0x26,
                                      0x15, 0x15, 0x15, 0x15, 0x04, 0x04 };
    const void *rows[2] = { q8_A, q4_E };
    const uint32_t t[2] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    float x[32], w[32], xq[32];
    block_q8_0 act;
    for (int j = 0; j < 32; j++) x[j] = (float)(j + 1);
    for (int i = 0; i < 2; i++) {
        act_prepare(t[i], x, 32, &act);
        dequantize_row_q8_0(&act, xq, 32);
        row_to_f32(t[i], rows[i], 32, w);
        double want = 0;
        for (int j = 0; j < 32; j++) want += (double)w[j] * xq[j];
        float y;
        matvec(t[i], rows[i], 32, 0, 1, &act, 0, 1, &y, 0);
        if (fabs(y - want) > 1e-5 * fabs(want)) {
            th_fail(__FILE__, __LINE__, "%s: %s hand block dot %g, want %g", isa, ggml_type_name(t[i]), y, want);
            return 0;
        }
    }
    return 1;
}

static void test_hand_block_dots(void) { each_isa(hand_block_dots); }

/* y (B vectors ys apart, rows row0..row1 of w) within the float rounding
 * bound of the scalar reference: sums of up to 4096 terms in different
 * orders (the reference sums blocks in order). */
static int near_ref(const char *isa, uint32_t t, const char *w, int n, int row0, int row1, const char *a, size_t as,
                    int B, const float *y, size_t ys)
{
    size_t rb = ggml_row_size(t, n);
    float *yr = calloc((size_t)B * ys, sizeof *yr);
    matvec_ref(t, w, n, row0, row1, a, as, B, yr, ys);
    double tol = is_quant(t) ? 2e-5 : 1e-5;
    int ok = 1;
    for (int b = 0; ok && b < B; b++)
        for (int r = row0; ok && r < row1; r++) {
            size_t i = (size_t)b * ys + (size_t)(r - row0);
            double bound = tol * abs_dot(t, w + rb * (size_t)r, a + (size_t)b * as, n) + 1e-30;
            if (fabs((double)y[i] - yr[i]) > bound) {
                th_fail(__FILE__, __LINE__, "%s %s n=%d B=%d row %d: %.9g, ref %.9g (bound %.3g)", isa,
                        ggml_type_name(t), n, B, r, y[i], yr[i], bound);
                ok = 0;
            }
        }
    free(yr);
    return ok;
}

/* One random case of matvec vs the reference, plus bit-identical results for
 * a different row split and for B = 1 calls. */
static int matvec_case(const char *isa, uint32_t t)
{
    int n = random_n(t), rows = 1 + (int)(rnd() % 24), B = 1 + (int)(rnd() % 5);
    int row0 = (int)(rnd() % (unsigned)rows), row1 = row0 + 1 + (int)(rnd() % (unsigned)(rows - row0));
    size_t as, ys = (size_t)rows + 3;
    char *w = make_weights(t, rows, n);
    char *a = make_acts(t, n, B, &as);
    float *y = calloc((size_t)B * ys, sizeof *y), *ys1 = calloc((size_t)B * ys, sizeof *y);
    matvec(t, w, n, row0, row1, a, as, B, y, ys);
    int ok = near_ref(isa, t, w, n, row0, row1, a, as, B, y, ys);
    int mid = row0 + (int)(rnd() % (unsigned)(row1 - row0 + 1));
    for (int b = 0; b < B; b++) {   /* the same rows, split at mid, one vector at a time */
        matvec(t, w, n, row0, mid, a + (size_t)b * as, 0, 1, ys1 + (size_t)b * ys, 0);
        matvec(t, w, n, mid, row1, a + (size_t)b * as, 0, 1, ys1 + (size_t)b * ys + (mid - row0), 0);
    }
    for (int b = 0; ok && b < B; b++)
        for (int r = row0; ok && r < row1; r++) {
            size_t i = (size_t)b * ys + (size_t)(r - row0);
            if (memcmp(&y[i], &ys1[i], sizeof *y)) {
                th_fail(__FILE__, __LINE__, "%s %s n=%d: batch/split changes row %d: %.9g vs %.9g", isa,
                        ggml_type_name(t), n, r, y[i], ys1[i]);
                ok = 0;
            }
        }
    for (int b = 0; ok && b < B; b++)   /* nothing written past row1 - row0 */
        for (size_t i = (size_t)(row1 - row0); i < ys; i++)
            if (y[(size_t)b * ys + i] != 0) { th_fail(__FILE__, __LINE__, "%s: wrote past the rows", isa); ok = 0; }
    free(w), free(a), free(y), free(ys1);
    return ok;
}

static int matvec_all_types(const char *isa)
{
    for (int ti = 0; ti < NTYPE; ti++)
        for (int c = 0; c < 40; c++)
            if (!matvec_case(isa, types[ti])) return 0;
    return 1;
}

static void test_matvec_vs_ref(void) { each_isa(matvec_all_types); }

/* A tall matrix: the batched path tiles rows (more than 256 KiB of weights). */
static int matvec_tiled(const char *isa)
{
    const uint32_t t = GGML_TYPE_F16;
    int n = 1000, rows = 300, B = 3;
    size_t as;
    char *w = make_weights(t, rows, n);
    char *a = make_acts(t, n, B, &as);
    float *y = malloc((size_t)B * rows * sizeof *y), *y1 = malloc((size_t)rows * sizeof *y);
    int ok = 1;
    matvec(t, w, n, 0, rows, a, as, B, y, (size_t)rows);
    for (int b = 0; ok && b < B; b++) {
        matvec(t, w, n, 0, rows, a + (size_t)b * as, 0, 1, y1, 0);
        if (memcmp(y1, y + (size_t)b * rows, (size_t)rows * sizeof *y)) {
            th_fail(__FILE__, __LINE__, "%s: tiled batch differs from B = 1", isa);
            ok = 0;
        }
    }
    free(w), free(a), free(y), free(y1);
    return ok;
}

static void test_matvec_tiled(void) { each_isa(matvec_tiled); }

/* F32/F16/BF16 batches go through register-tiled kernels (R rows x T vectors
 * over the whole row): each (row, vector) must equal the B = 1 dot bit for
 * bit, for n off the vector width and across blocks, row counts and B off the
 * tile, row splits, and weights of several panels (3/4 of L2 each: 2.6 MiB
 * covers L2 caches up to 2 MiB). */
static int tiled_float_case(const char *isa, uint32_t t, int n, int rows, int B)
{
    int row0 = (int)(rnd() % (unsigned)rows), row1 = row0 + 1 + (int)(rnd() % (unsigned)(rows - row0));
    int mid = row0 + (int)(rnd() % (unsigned)(row1 - row0 + 1));
    size_t as, ys = (size_t)rows + 5;
    char *w = make_weights(t, rows, n);
    char *a = make_acts(t, n, B, &as);
    float *y = calloc((size_t)B * ys, sizeof *y), *ysp = calloc((size_t)B * ys, sizeof *y);
    float *y1 = calloc((size_t)rows, sizeof *y);
    matvec(t, w, n, row0, row1, a, as, B, y, ys);
    matvec(t, w, n, row0, mid, a, as, B, ysp, ys);   /* the same batch, rows split at mid */
    matvec(t, w, n, mid, row1, a, as, B, ysp + (mid - row0), ys);
    int ok = 1;
    for (int b = 0; ok && b < B; b++) {
        matvec(t, w, n, row0, row1, a + (size_t)b * as, 0, 1, y1, 0);
        for (int r = 0; ok && r < row1 - row0; r++) {
            const float *yb = y + (size_t)b * ys, *sb = ysp + (size_t)b * ys;
            if (memcmp(&yb[r], &y1[r], sizeof *y) || memcmp(&sb[r], &y1[r], sizeof *y)) {
                th_fail(__FILE__, __LINE__, "%s %s n=%d rows %d..%d B=%d: vector %d row %d: %.9g / split %.9g, B = 1 %.9g",
                        isa, ggml_type_name(t), n, row0, row1, B, b, row0 + r, yb[r], sb[r], y1[r]);
                ok = 0;
            }
        }
        for (size_t i = (size_t)(row1 - row0); ok && i < ys; i++)
            if (y[(size_t)b * ys + i] != 0) { th_fail(__FILE__, __LINE__, "%s: wrote past the rows", isa); ok = 0; }
    }
    free(w), free(a), free(y), free(ysp), free(y1);
    return ok;
}

static int tiled_float_all(const char *isa)
{
    static const uint32_t ft[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    static const int ns[] = { 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 129, 1023, 1024, 1025, 1088, 2100, 4099 };
    for (int ti = 0; ti < 3; ti++) {
        for (int c = 0; c < 60; c++) {
            int n = ns[rnd() % (sizeof ns / sizeof ns[0])], rows = 1 + (int)(rnd() % 14), B = 2 + (int)(rnd() % 11);
            if (!tiled_float_case(isa, ft[ti], n, rows, B)) return 0;
        }
        if (!tiled_float_case(isa, ft[ti], 4099, 160, 7)) return 0;   /* 2.6 MiB of F32: several panels */
        if (!tiled_float_case(isa, ft[ti], 33, 70, 9)) return 0;
        /* 8.5 MiB of f32 vectors: AVX2's column-blocked tiles take them in three passes */
        if (!tiled_float_case(isa, ft[ti], 11008, 7, 201)) return 0;
        /* rows of several column segments (4096) and row groups */
        if (!tiled_float_case(isa, ft[ti], 9000, 60, 30)) return 0;
    }
    return 1;
}

static void test_matvec_tiled_float(void) { each_isa(tiled_float_all); }

/* Few vectors (B = 2..8: sequences decoded together; AVX-512 F16 has its
 * own tile for them, hc_kernel.few): every B, row counts off the 4-row tile
 * and widths off the 16-element steps and the 512-column blocks (1024 and
 * 3072: rows a multiple of 2 KiB, which it fetches along), each pair the
 * B = 1 dot's bits (also split) and near the reference. */
static int few_vectors_all(const char *isa)
{
    static const uint32_t ft[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    static const int ns[] = { 1, 15, 17, 31, 47, 511, 513, 1024, 1040, 1553, 3072, 4099 };
    static const int rows[] = { 1, 3, 5, 9 };
    for (int ti = 0; ti < 3; ti++)
        for (int B = 2; B <= 8; B++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                int n = ns[ni], nr = rows[(ni + (size_t)B) % (sizeof rows / sizeof rows[0])];
                size_t as, ys = (size_t)nr;
                char *w = make_weights(ft[ti], nr, n), *a = make_acts(ft[ti], n, B, &as);
                float *y = malloc((size_t)B * ys * sizeof *y);
                matvec(ft[ti], w, n, 0, nr, a, as, B, y, ys);
                int ok = near_ref(isa, ft[ti], w, n, 0, nr, a, as, B, y, ys) && tiled_float_case(isa, ft[ti], n, nr, B);
                free(w), free(a), free(y);
                if (!ok) return 0;
            }
    return 1;
}

static void test_matvec_few_vectors(void) { each_isa(few_vectors_all); }

/* Q8_0/Q4_0 batches go through register-tiled integer kernels too: each
 * (row, vector) must equal the B = 1 dot bit for bit, for 1..40 blocks (rows
 * end in a partial chunk of 8 (avx2) or 16 (avx512) blocks unless the count
 * is a multiple), rows and B off the tile, row splits, and several panels. */
static int tiled_quant_all(const char *isa)
{
    static const uint32_t qt[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    for (int ti = 0; ti < 2; ti++) {
        for (int nb = 1; nb <= 40; nb++) {
            int rows = 1 + (int)(rnd() % 14), B = 2 + (int)(rnd() % 11);
            if (!tiled_float_case(isa, qt[ti], 32 * nb, rows, B)) return 0;
        }
        for (int c = 0; c < 20; c++) {
            static const int nbs[] = { 17, 25, 33, 48, 49, 64, 65, 127, 344 };
            int nb = nbs[rnd() % (sizeof nbs / sizeof nbs[0])], rows = 1 + (int)(rnd() % 19), B = 2 + (int)(rnd() % 15);
            if (!tiled_float_case(isa, qt[ti], 32 * nb, rows, B)) return 0;
        }
        if (!tiled_float_case(isa, qt[ti], 32 * 344, 240, 7)) return 0;   /* 2.6 MiB of Q8_0 (1.4 of Q4_0): several panels */
        if (!tiled_float_case(isa, qt[ti], 32 * 25, 70, 9)) return 0;
    }
    return 1;
}

static void test_matvec_tiled_quant(void) { each_isa(tiled_quant_all); }

/* The B = 1 product of rows 0..rows of type t and width n: every row must be
 * the single-row dot's bits (a gathered row, the tile, a row split) and near
 * the reference (a lane sums about n/32 rounded terms: 3e-5 of the absolute
 * sum for 11017). */
static int b1_rows_case(const char *isa, uint32_t t, int n, int rows)
{
    if (!tiled_float_case(isa, t, n, rows, 3)) return 0;
    size_t as, rb = ggml_row_size(t, n);
    char *w = make_weights(t, rows, n), *a = make_acts(t, n, 1, &as);
    float *y = malloc((size_t)rows * sizeof *y), *yg = malloc((size_t)rows * sizeof *y);
    float *yr = malloc((size_t)rows * sizeof *y);
    int32_t *idx = malloc((size_t)rows * sizeof *idx);
    for (int r = 0; r < rows; r++) idx[r] = rows - 1 - r;
    matvec(t, w, n, 0, rows, a, 0, 1, y, 0);
    matvec_rows(t, w, n, idx, rows, 1, a, yg);
    matvec_ref(t, w, n, 0, rows, a, as, 1, yr, 0);
    int ok = 1;
    for (int r = 0; ok && r < rows; r++) {
        double bound = 3e-5 * abs_dot(t, w + rb * (size_t)r, a, n) + 1e-30;
        if (memcmp(&y[r], &yg[rows - 1 - r], sizeof *y) || fabs((double)y[r] - yr[r]) > bound) {
            th_fail(__FILE__, __LINE__, "%s %s n=%d rows %d: row %d: %.9g, gathered %.9g, ref %.9g", isa, ggml_type_name(t), n,
                    rows, r, y[r], yg[rows - 1 - r], yr[r]);
            ok = 0;
        }
    }
    free(w), free(a), free(y), free(yg), free(yr), free(idx);
    return ok;
}

/* Rows longer than 4096 elements go through hc_kernel.dots at B = 1 (as
 * many runs as the tile has rows, read side by side), except F16 on AVX2,
 * whose rows go through column blocks (a group of rows block by block, each
 * row's accumulators kept): b1_rows_case for row counts below, at and off a
 * multiple of the runs and of the groups, and rows that end in a partial
 * block, a partial step and a masked tail, F32 also in an empty or partial
 * odd chunk (5120, 6145). */
static int float_long_rows(const char *isa)
{
    static const int ns[] = { 4097, 4128, 5120, 6145, 8192, 8223, 11008, 11017 };
    static const int rows[] = { 3, 4, 5, 37 };
    static const uint32_t ts[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    for (size_t c = 0; c < sizeof ns / sizeof ns[0] * 3; c++)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            if (!b1_rows_case(isa, ts[c % 3], ns[c / 3], rows[r])) return 0;
    return 1;
}

static void test_float_long_rows(void) { each_isa(float_long_rows); }

/* Rows of at most 4096 elements go through hc_kernel.dots at B = 1 where
 * the kernel's dots_when says so (F32, AVX2's types, AVX-512's by the CPU's
 * row: hc_decode_streams; the others one row at a time): the rows in as many
 * runs as the tile has rows, read side by side. b1_rows_case for every float
 * type, for row counts below, at and off a multiple of the runs (the last
 * rows one at a time), widths in and across F32's 1024-element chunks and
 * with masked tails. */
/* b1_rows_case for each of the nt types and nn widths, at row counts below,
 * at and off a multiple of the runs, with AVX-512's decode a row at a time
 * and as streams (the same bits). */
static int row_streams(const char *isa, const uint32_t *ts, size_t nt, const int *ns, size_t nn)
{
    static const int rows[] = { 1, 2, 3, 4, 5, 8, 12, 13, 37 };
    int ok = 1;
    for (int st = 0; st < 2 && ok; st++) {
        hc_kernel_decode_streams(st);
        for (size_t t = 0; t < nt && ok; t++)
            for (size_t c = 0; c < nn && ok; c++)
                for (size_t r = 0; r < sizeof rows / sizeof rows[0] && ok; r++) ok = b1_rows_case(isa, ts[t], ns[c], rows[r]);
    }
    hc_kernel_decode_streams(-1);
    return ok;
}

static int float_row_streams(const char *isa)
{
    static const int ns[] = { 1, 17, 1000, 1024, 1025, 2048, 2100, 4096 };
    static const uint32_t ts[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    return row_streams(isa, ts, 3, ns, sizeof ns / sizeof ns[0]);
}

static void test_float_row_streams(void) { each_isa(float_row_streams); }

/* The same for Q8_0 and Q4_0, whose AVX2 and AVX-512 kernels read rows as
 * streams too (dots_q8, dots_q4; test_x16_layout: AVX-512's in chunks of
 * 16): widths of one block, a partial and whole chunks, and
 * 4096 and 11008. */
static int quant_row_streams(const char *isa)
{
    static const int ns[] = { 32, 96, 512, 544, 4096, 11008 };
    static const uint32_t ts[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    return row_streams(isa, ts, 2, ns, sizeof ns / sizeof ns[0]);
}

static void test_quant_row_streams(void) { each_isa(quant_row_streams); }

/* hc_pool_matvec, the threads' split of a product (at B = 1 one run of row
 * pieces per thread, dealt in turn), gives the bits of one call over all the
 * rows, for pools of 2 and 3 threads (8 and 12 chunks here); so do three
 * products in one run (hc_pool_matvec_many). */
static int pool_matvec_same(const char *isa)
{
    const int n = 512, rows = 1040;
    int ok = 1;
    for (int ti = 0; ti < NTYPE; ti++)
        for (int B = 1; B <= 2; B++) {
            uint32_t t = types[ti];
            size_t as, yb = sizeof(float) * (size_t)B * (size_t)rows;
            char *w = make_weights(t, rows, n), *a = make_acts(t, n, B, &as);
            float *y = malloc(yb), *yp = malloc(yb);
            matvec(t, w, n, 0, rows, a, as, B, y, (size_t)rows);
            hc_weight wv = view(t, w, n, rows);
            size_t xs = hc_weight_arranged_bytes(&wv, hc_isa());
            void *xa = NULL;
            if (xs && posix_memalign(&xa, 64, xs * (size_t)B)) xa = NULL;
            if (xs && xa) hc_weight_arrange(&wv, hc_isa(), a, as, B, xa);
            for (int nt = 2; nt <= 3; nt++) {
                hc_pool *p = hc_pool_new(nt);
                if (!p || !y || !yp || (xs && !xa)) {
                    th_fail(__FILE__, __LINE__, "out of memory or threads");
                    hc_pool_free(p);
                    ok = 0;
                    break;
                }
                memset(yp, 0xff, yb);
                hc_pool_matvec(p, &wv, hc_isa(), xs ? xa : a, xs ? xs : as, B, yp, (size_t)rows);
                if (memcmp(y, yp, yb)) {
                    th_fail(__FILE__, __LINE__, "%s %s B=%d: %d threads change the product", isa, ggml_type_name(t),
                            B, nt);
                    ok = 0;
                }
                /* three products in one run (hc_pool_matvec_many): the first 1040, 37 and 500 rows,
                 * ends that are not whole ROW_UNITs; each gives its rows of y */
                const hc_weight ws[3] = { wv, view(t, w, n, 37), view(t, w, n, 500) };
                const hc_weight *wp[3] = { &ws[0], &ws[1], &ws[2] };
                float *ym[3] = { malloc(yb), malloc(yb), malloc(yb) };
                for (int m = 0; m < 3 && ym[m]; m++) memset(ym[m], 0xff, yb);
                if (ym[0] && ym[1] && ym[2]) hc_pool_matvec_many(p, wp, ym, 3, hc_isa(), xs ? xa : a, xs ? xs : as, B, (size_t)rows);
                for (int m = 0; m < 3; m++)
                    for (int b = 0; b < B && ok; b++)
                        if (!ym[m] || memcmp(y + (size_t)b * rows, ym[m] + (size_t)b * rows, sizeof(float) * (size_t)ws[m].rows)) {
                            th_fail(__FILE__, __LINE__, "%s %s B=%d: %d threads, product %d of 3 in one run differs",
                                    isa, ggml_type_name(t), B, nt, m);
                            ok = 0;
                        }
                for (int m = 0; m < 3; m++) free(ym[m]);
                hc_pool_free(p);
            }
            free(xa), free(w), free(a), free(y), free(yp);
        }
    return ok;
}

static void test_pool_matvec(void) { each_isa(pool_matvec_same); }

/* The integer block sums stay exact at the extremes: weights of -128 / 127
 * (Q8_0) and -8 / 7 (Q4_0) with scale 1 against activations of ±127 with
 * scale 1 make integer dots below 2^24, so every ISA, its tile (B > 1) and
 * B = 1 must return them exactly: no int16 pair saturates, no partial sum is
 * lost, for whole chunks and a partial last one. Vector 0 and row 0 are
 * all-extreme (127 against -128: the largest products). */
static int quant_extremes(const char *isa)
{
    enum { NB = 31, N = 32 * NB, ROWS = 5, B = 9 };
    static block_q8_0 w8[ROWS][NB], x[B][NB];
    static block_q4_0 w4[ROWS][NB];
    static int8_t wv[2][ROWS][N];
    for (int r = 0; r < ROWS; r++)
        for (int b = 0; b < NB; b++) {
            w8[r][b].d = w4[r][b].d = 0x3c00;   /* fp16 1.0 */
            for (int j = 0; j < 32; j++) {
                int hi = r && rnd() % 2;
                w8[r][b].qs[j] = (int8_t)(hi ? 127 : -128);
                int q4 = r && rnd() % 2 ? 15 : 0;   /* -8 or 7 */
                if (j < 16) w4[r][b].qs[j] = (uint8_t)q4;
                else w4[r][b].qs[j - 16] |= (uint8_t)(q4 << 4);
                wv[0][r][32 * b + j] = w8[r][b].qs[j];
                wv[1][r][32 * b + j] = (int8_t)(q4 - 8);
            }
        }
    for (int v = 0; v < B; v++)
        for (int b = 0; b < NB; b++) {
            x[v][b].d = 0x3c00;
            for (int j = 0; j < 32; j++) x[v][b].qs[j] = (int8_t)(v == 0 || (v > 1 && rnd() % 2) ? 127 : -127);
        }
    const uint32_t t[2] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    const void *W[2] = { w8, w4 };
    for (int k = 0; k < 2; k++) {
        float y[B * ROWS], y1[ROWS];
        matvec(t[k], W[k], N, 0, ROWS, x, sizeof x[0], B, y, ROWS);
        for (int v = 0; v < B; v++) {
            matvec(t[k], W[k], N, 0, ROWS, x[v], 0, 1, y1, 0);
            for (int r = 0; r < ROWS; r++) {
                long want = 0;
                for (int i = 0; i < N; i++) want += (long)wv[k][r][i] * x[v][i / 32].qs[i % 32];
                if (y[v * ROWS + r] != (float)want || y1[r] != (float)want) {
                    th_fail(__FILE__, __LINE__, "%s %s row %d vector %d: %.9g (B = 1: %.9g), want %ld", isa,
                            ggml_type_name(t[k]), r, v, y[v * ROWS + r], y1[r], want);
                    return 0;
                }
            }
        }
    }
    return 1;
}

static void test_quant_extremes(void) { each_isa(quant_extremes); }

/* AVX-512 Q4_0's two ways of unpacking a chunk (word permutes or dword
 * permutes, by CPU model) give the same bits, dot and tile, for rows of 1..40
 * blocks (the last chunk zero-padded) and longer. */
static void test_q4_word_permutes(void)
{
    if (hc_kernel_force("avx512")) SKIP("no AVX-512 kernels on this CPU");
    enum { ROWS = 3, B = 5 };
    for (int nb = 1; nb <= 48; nb += nb < 40 ? 1 : 8) {
        int n = 32 * (nb == 48 ? 344 : nb);
        void *w = make_weights(GGML_TYPE_Q4_0, ROWS, n);
        size_t as = act_bytes(GGML_TYPE_Q4_0, n);
        char *a = malloc(as * B);
        float *x = malloc(sizeof(float) * (size_t)n), y[2][2][B * ROWS];
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < n; i++) x[i] = frand();
            act_prepare(GGML_TYPE_Q4_0, x, n, a + as * (size_t)b);
        }
        for (int wp = 0; wp < 2; wp++) {
            hc_kernel_q4_word_permutes(wp);
            matvec(GGML_TYPE_Q4_0, w, n, 0, ROWS, a, as, B, y[wp][0], ROWS);
            for (int b = 0; b < B; b++) matvec(GGML_TYPE_Q4_0, w, n, 0, ROWS, a + as * (size_t)b, as, 1, y[wp][1] + b * ROWS, 0);
        }
        CHECK(!memcmp(y[0], y[1], sizeof y[0]) && !memcmp(y[0][0], y[0][1], sizeof y[0][0]));
        free(w), free(a), free(x);
    }
    hc_kernel_q4_word_permutes(-1);
    hc_kernel_force(NULL);
}

/* Q4_0 and Q8_0 rows repacked in chunks of 16 blocks (x16.h, the layout of
 * hc-run's copy where they run on AVX-512, and Q4_0 on AVX2): each block and each row's values as before, and every
 * product (B = 1, with AVX-512's decode a row at a time and as streams;
 * B = 3..8, which AVX-512 runs through its tile for few vectors, with one
 * copy computed at 3, 5 and 7; the tile at 17: an edge of 1 vector), AXPY and the reference the bits of the same rows in ggml's
 * layout, for rows of 1..40 blocks (a short last chunk) and 344 (4096 x
 * 11008's down rows, which the tile takes in column blocks: 70 of them,
 * several groups of row tiles). */
static void test_x16_layout(void)
{
    enum { B = 17 };
    static const uint32_t x16_types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0 };
    for (int k = 0; k < 2 * 41; k++) {
        const uint32_t type = x16_types[k / 41];
        const int nb = 1 + k % 41, n = 32 * (nb == 41 ? 344 : nb), nblk = n / 32, rows = nb == 41 ? 70 : 5;
        const size_t rb = ggml_row_size(type, n), as = act_bytes(type, n), bs = ggml_type_size(type);
        uint8_t *w = make_weights(type, rows, n), *w16 = malloc(rb * rows);
        for (int r = 0; r < rows; r++) hc_x16_repack(type, w + r * rb, w16 + r * rb, nblk);
        int same_blocks = 1;
        for (int r = 0; r < rows; r++)
            for (int b = 0; b < nblk; b++) {
                block_q8_0 blk;   /* the larger of the two */
                hc_x16_block(type, w16 + r * rb, nblk, b, &blk);
                same_blocks &= !memcmp(&blk, w + r * rb + b * bs, bs);
            }
        CHECKF(same_blocks, "%s, %d blocks: a block moved", ggml_type_name(type), nblk);
        hc_weight g = view(type, w, n, rows), c = g;
        c.kind = HC_WEIGHT_X16;
        c.data = w16;
        char *a = malloc(as * B);
        const size_t most = (size_t)(n > B * rows ? n : B * rows);
        float *x = malloc(sizeof(float) * (size_t)n), *yg = malloc(sizeof(float) * 2 * most), *yc = yg + most;
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < n; i++) x[i] = frand();
            act_prepare(type, x, n, a + as * (size_t)b);
        }
        hc_weight_row(&g, rows - 1, yg);
        hc_weight_row(&c, rows - 1, yc);
        CHECKF(!memcmp(yg, yc, sizeof(float) * (size_t)n), "%s, %d blocks: the row's values differ",
               ggml_type_name(type), nblk);
        /* the kernels for chunks (AVX-512's, AVX2's Q4_0) against ggml's layout on the same instruction set;
         * elsewhere (the reference) against the reference */
        for (int i = 0; i < (int)(sizeof isas / sizeof *isas); i++) {
            if (hc_kernel_force(isas[i])) continue;
            const int isa = hc_isa(), Bs[] = { 1, 3, 4, 5, 6, 7, 8, B }, nbs = (int)(sizeof Bs / sizeof *Bs);
            const int ref = isa == HC_ISA_AVX512 || (isa == HC_ISA_AVX2 && type == GGML_TYPE_Q4_0) ? isa : HC_ISA_SCALAR;
            for (int j = 0; j <= nbs; j++) {   /* the last: B = 1 with AVX-512's decode the other way */
                const int Bj = j < nbs ? Bs[j] : 1;
                if (j == nbs) hc_kernel_decode_streams(!hc_decode_streams());
                matvec_of(ref, g, 0, rows, a, as, Bj, yg, rows);
                matvec_of(isa, c, 0, rows, a, as, Bj, yc, rows);
                CHECKF(!memcmp(yg, yc, sizeof(float) * (size_t)(Bj * rows)), "%s %s, %d blocks, B = %d%s: not ggml's bits",
                       isas[i], ggml_type_name(type), nblk, Bj, j == nbs ? " (decode the other way)" : "");
            }
            hc_kernel_decode_streams(-1);
            for (int j = 0; j < n; j++) yg[j] = yc[j] = x[j];
            hc_weight_axpy(&g, ref, 1, 0, n, 0.75f, yg);
            hc_weight_axpy(&c, isa, 1, 0, n, 0.75f, yc);
            CHECKF(!memcmp(yg, yc, sizeof(float) * (size_t)n), "%s %s, %d blocks: AXPY differs", isas[i],
                   ggml_type_name(type), nblk);
        }
        hc_kernel_force(NULL);
        free(w), free(w16), free(a), free(x), free(yg);
    }
}

/* Gathered rows equal the same rows of a dense matvec, bit for bit; so do
 * they read with a row step of 2 from a copy where each row of w lies beside
 * the same row of another matrix (w2), either of the two read. */
static int rows_case(const char *isa)
{
    for (int ti = 0; ti < NTYPE; ti++) {
        uint32_t t = types[ti];
        int n = random_n(t), rows = 2 + (int)(rnd() % 40), k = (int)(rnd() % 60);
        size_t as, rb = ggml_row_size(t, n);
        char *w = make_weights(t, rows, n), *w2 = make_weights(t, rows, n), *pair = malloc(2 * rb * (size_t)rows);
        char *a = make_acts(t, n, 1, &as);
        int32_t *idx = malloc(((size_t)k + 1) * sizeof *idx);
        float *y = malloc(((size_t)k + 1) * sizeof *y), *dense = malloc((size_t)rows * sizeof *y);
        float *y1 = malloc(((size_t)k + 1) * sizeof *y), *y2 = malloc(((size_t)k + 1) * sizeof *y);
        float *dense2 = malloc((size_t)rows * sizeof *y);
        for (int r = 0; r < rows; r++) {
            memcpy(pair + 2 * (size_t)r * rb, w + (size_t)r * rb, rb);
            memcpy(pair + (2 * (size_t)r + 1) * rb, w2 + (size_t)r * rb, rb);
        }
        for (int i = 0; i < k; i++) idx[i] = (int32_t)(rnd() % (unsigned)rows);
        matvec_rows(t, w, n, idx, k, 1, a, y);
        matvec_rows(t, pair, n, idx, k, 2, a, y1);
        matvec_rows(t, pair + rb, n, idx, k, 2, a, y2);
        matvec(t, w, n, 0, rows, a, 0, 1, dense, 0);
        matvec(t, w2, n, 0, rows, a, 0, 1, dense2, 0);
        int ok = 1;
        for (int i = 0; i < k; i++)
            if (memcmp(&y[i], &dense[idx[i]], sizeof *y) || memcmp(&y1[i], &dense[idx[i]], sizeof *y) ||
                memcmp(&y2[i], &dense2[idx[i]], sizeof *y))
                ok = 0;
        free(w), free(w2), free(pair), free(a), free(idx), free(y), free(y1), free(y2), free(dense), free(dense2);
        if (!ok) {
            th_fail(__FILE__, __LINE__, "%s %s: gathered rows differ from dense rows", isa, ggml_type_name(t));
            return 0;
        }
    }
    return 1;
}

static int matvec_rows_all(const char *isa)
{
    for (int c = 0; c < 10; c++)
        if (!rows_case(isa)) return 0;
    return 1;
}

static void test_matvec_rows(void) { each_isa(matvec_rows_all); }

static int axpy_all(const char *isa)
{
    for (int ti = 0; ti < NTYPE; ti++)
        for (int c = 0; c < 30; c++) {
            uint32_t t = types[ti];
            int n = random_n(t);
            char *w = make_weights(t, 1, n);
            float *y = malloc(((size_t)n + 1) * sizeof *y), *yr = malloc(((size_t)n + 1) * sizeof *y);
            float *wf = malloc((size_t)n * sizeof *wf), a = frand() * 4;
            for (int i = 0; i <= n; i++) y[i] = yr[i] = frand();
            axpy(t, w, n, a, y);
            axpy_ref(t, w, n, a, yr);
            row_to_f32(t, w, n, wf);
            int ok = y[n] == yr[n];   /* the element past the row is untouched */
            for (int i = 0; ok && i < n; i++) {
                /* FMA vs multiply-then-add: a few roundings apart */
                double bound = 2.5e-7 * (fabs(yr[i]) + fabs((double)a * wf[i]));
                if (fabs((double)y[i] - yr[i]) > bound) ok = 0;
            }
            free(w), free(y), free(yr), free(wf);
            if (!ok) {
                th_fail(__FILE__, __LINE__, "%s %s n=%d: axpy differs from the reference", isa, ggml_type_name(t), n);
                return 0;
            }
        }
    return 1;
}

static void test_axpy(void) { each_isa(axpy_all); }

/* A column range [c0, c1) of a row (the down product's chunks) adds exactly
 * what the whole row adds to those columns. */
static int axpy_range_all(const char *isa)
{
    enum { N = 320, C0 = 64, C1 = 224 };
    for (int ti = 0; ti < NTYPE; ti++) {
        uint32_t t = types[ti];
        void *w = make_weights(t, 3, N);
        hc_weight wt = view(t, w, N, 3);
        float full[N] = { 0 }, part[C1 - C0] = { 0 };
        hc_weight_axpy(&wt, hc_isa(), 2, 0, N, 0.75f, full);
        hc_weight_axpy(&wt, hc_isa(), 2, C0, C1, 0.75f, part);
        free(w);
        if (memcmp(part, full + C0, sizeof part)) {
            th_fail(__FILE__, __LINE__, "%s %s: axpy over columns [%d, %d) differs from the whole row", isa,
                    ggml_type_name(t), C0, C1);
            return 0;
        }
    }
    return 1;
}
static void test_axpy_range(void) { each_isa(axpy_range_all); }

/* The multi-token AXPY (a prompt's sparse down rows): nt outputs at rows of a
 * strided buffer, each with its own factor, over a column range, give the
 * bits of nt axpy calls of the same instruction set; outputs not listed and
 * columns outside the range are untouched. */
static int axpy_multi_all(const char *isa)
{
    enum { ROWS = 9, YS = 400 };
    for (int ti = 0; ti < NTYPE; ti++)
        for (int c = 0; c < 20; c++) {
            uint32_t t = types[ti];
            int n = random_n(t) % 320 + (is_quant(t) ? 32 : 1);
            n -= is_quant(t) ? n % 32 : 0;
            void *w = make_weights(t, 3, n);
            hc_weight wt = view(t, w, n, 3);
            int c0 = is_quant(t) ? 32 * (int)(rnd() % (unsigned)(n / 32)) : (int)(rnd() % (unsigned)n);
            int c1 = c0 + (is_quant(t) ? 32 * (1 + (int)(rnd() % (unsigned)((n - c0) / 32))) : 1 + (int)(rnd() % (unsigned)(n - c0)));
            int nt = (int)(rnd() % ROWS) + 1;
            int32_t rows[ROWS];
            float a[ROWS], *y = malloc(sizeof(float) * ROWS * YS), *yr = malloc(sizeof(float) * ROWS * YS);
            for (int i = 0; i < ROWS * YS; i++) y[i] = yr[i] = frand();
            for (int i = 0; i < nt; i++) {   /* distinct rows in a random order */
                rows[i] = (int32_t)((c * 7 + i * 4) % ROWS);
                a[i] = frand() * 3;
            }
            hc_weight_axpy_multi(&wt, hc_isa(), 2, c0, c1, nt, a, rows, y + c0, YS);
            for (int i = 0; i < nt; i++) hc_weight_axpy(&wt, hc_isa(), 2, c0, c1, a[i], yr + (size_t)rows[i] * YS + c0);
            int same = !memcmp(y, yr, sizeof(float) * ROWS * YS);
            free(w), free(y), free(yr);
            if (!same) {
                th_fail(__FILE__, __LINE__, "%s %s n=%d [%d, %d) nt=%d: axpy_multi differs from axpy per output", isa,
                        ggml_type_name(t), n, c0, c1, nt);
                return 0;
            }
        }
    return 1;
}
static void test_axpy_multi(void) { each_isa(axpy_multi_all); }

/* axpy against its definition in doubles, on the reference itself. */
/* BF16 weights take the activation rounded to bf16 as ggml's fp32_to_bf16
 * (nearest even, NaN quieted) on every ISA, and dot it with exact products:
 * x = 1 + 2^-9 rounds to 1, so a row of ones gives n, not n·x. */
static int bf16_act_and_dot(const char *isa)
{
    static const uint32_t in[] = { 0x3f808000, 0x3f818000, 0x3f808001, 0x7f800001, 0xff800000, 0x80000000,
                                   0x00000001, 0x7f7fffff, 0xbf7fffff };
    static const uint16_t want[] = { 0x3f80, 0x3f82, 0x3f81, 0x7fc0, 0xff80, 0x8000, 0x0000, 0x7f80, 0xbf80 };
    enum { NI = sizeof in / sizeof in[0] };
    float x[NI];
    uint16_t got[NI];
    memcpy(x, in, sizeof x);
    act_prepare(GGML_TYPE_BF16, x, NI, got);
    for (int i = 0; i < NI; i++)
        if (got[i] != want[i]) {
            th_fail(__FILE__, __LINE__, "%s: bf16 activation of 0x%08x is 0x%04x, want 0x%04x", isa, in[i], got[i], want[i]);
            return 0;
        }
    enum { NV = 1000 };   /* the SIMD loops: random bits and the cases above, against fp32_to_bf16 */
    uint32_t bits[NV];
    uint16_t hv[NV];
    float xv[NV];
    for (int i = 0; i < NV; i++) bits[i] = i % 3 ? (uint32_t)rnd() : in[i % NI] ^ (uint32_t)(i & 1);
    memcpy(xv, bits, sizeof xv);
    act_prepare(GGML_TYPE_BF16, xv, NV, hv);
    for (int i = 0; i < NV; i++)
        if (hv[i] != fp32_to_bf16(xv[i])) {
            th_fail(__FILE__, __LINE__, "%s: bf16 activation of 0x%08x is 0x%04x, want 0x%04x", isa, bits[i], hv[i],
                    fp32_to_bf16(xv[i]));
            return 0;
        }
    enum { N = 100 };
    uint16_t ones[N], act[N];
    float xs[N], y;
    for (int i = 0; i < N; i++) ones[i] = 0x3f80, xs[i] = 1 + 0x1p-9f;
    act_prepare(GGML_TYPE_BF16, xs, N, act);
    matvec(GGML_TYPE_BF16, ones, N, 0, 1, act, 0, 1, &y, 0);
    if (y != N) {
        th_fail(__FILE__, __LINE__, "%s: BF16 dot of ones with 1 + 2^-9 is %.9g, want %d", isa, y, N);
        return 0;
    }
    return 1;
}

static void test_bf16_act_and_dot(void) { each_isa(bf16_act_and_dot); }

/* The AVX-512 BF16 kernels both ways, with vdpbf16ps where the CPU has it
 * and with its FMAs (as on Ice Lake, and where the CPU's table row chose
 * them): against the reference and their own B = 1 dot, and each the very
 * bits of the other on normal numbers (the same two roundings per pair in
 * the same order). */
static void test_bf16_both_ways(void)
{
    if (hc_kernel_force("avx512")) SKIP("no AVX-512 kernels on this CPU");
    const int has = hc_kernel_bf16_dot(1);
    for (int dp = has; dp >= 0 && !th_failed_case; dp--) {
        const char *isa = dp ? "avx512 (vdpbf16ps)" : "avx512-nobf16";
        CHECK(hc_kernel_bf16_dot(dp) == dp);
        for (int c = 0; c < 40 && !th_failed_case; c++) CHECK(matvec_case(isa, GGML_TYPE_BF16));
        for (int c = 0; c < 30 && !th_failed_case; c++) {
            static const int ns[] = { 1, 31, 32, 33, 63, 64, 65, 100, 1023, 1025, 4099 };
            int n = ns[rnd() % (sizeof ns / sizeof ns[0])], rows = 1 + (int)(rnd() % 14), B = 2 + (int)(rnd() % 11);
            CHECK(tiled_float_case(isa, GGML_TYPE_BF16, n, rows, B));
        }
        CHECK(tiled_float_case(isa, GGML_TYPE_BF16, 11017, 37, 3));   /* B = 1 through dots, long rows */
        CHECK(b1_rows_case(isa, GGML_TYPE_BF16, 1025, 13));
        CHECK(b1_rows_case(isa, GGML_TYPE_BF16, 5003, 13));            /* B = 1 through dots */
        CHECK(b1_rows_case(isa, GGML_TYPE_BF16, 4096, 37));
    }
    if (has) {
        int n = 1000, rows = 13, B = 7;
        size_t as;
        char *w = make_weights(GGML_TYPE_BF16, rows, n), *a = make_acts(GGML_TYPE_BF16, n, B, &as);
        float y0[7 * 13], y1[7 * 13];
        CHECK(hc_kernel_bf16_dot(0) == 0);
        matvec(GGML_TYPE_BF16, w, n, 0, rows, a, as, B, y0, (size_t)rows);
        CHECK(hc_kernel_bf16_dot(1) == 1);
        matvec(GGML_TYPE_BF16, w, n, 0, rows, a, as, B, y1, (size_t)rows);
        CHECK(!memcmp(y0, y1, sizeof y0));
        free(w), free(a);
        char d[512];   /* -v names the path */
        hc_kernel_describe(d, sizeof d);
        CHECK(strstr(d, ", BF16 by vdpbf16ps") != NULL);
        hc_kernel_bf16_dot(0);
        hc_kernel_describe(d, sizeof d);
        CHECK(strstr(d, ", BF16 by FMAs in vdpbf16ps's order") != NULL);
    }
    hc_kernel_bf16_dot(-1);
    hc_kernel_force(NULL);
}

static void test_axpy_ref_definition(void)
{
    for (int ti = 0; ti < NTYPE; ti++) {
        uint32_t t = types[ti];
        int n = 96;
        char *w = make_weights(t, 1, n);
        float y[96], y0[96], wf[96], a = 0.75f;
        for (int i = 0; i < n; i++) y[i] = y0[i] = frand();
        axpy_ref(t, w, n, a, y);
        row_to_f32(t, w, n, wf);
        for (int i = 0; i < n; i++)
            CHECKF(fabs(y[i] - (y0[i] + (double)a * wf[i])) <= 1.2e-7 * (fabs(y0[i]) + fabs(a * wf[i])),
                   "%s [%d]", ggml_type_name(t), i);
        free(w);
    }
}

int main(void)
{
    RUN(test_dispatch);
    RUN(test_kernel_table);
    RUN(test_kernel_choice);
    RUN(test_act_quant_ggml_bytes);
    RUN(test_act_quant_matches_ref);
    RUN(test_dequant_hand_blocks);
    RUN(test_hand_block_dots);
    RUN(test_matvec_vs_ref);
    RUN(test_matvec_tiled);
    RUN(test_matvec_tiled_float);
    RUN(test_matvec_tiled_quant);
    RUN(test_matvec_few_vectors);
    RUN(test_float_long_rows);
    RUN(test_float_row_streams);
    RUN(test_quant_row_streams);
    RUN(test_pool_matvec);
    RUN(test_quant_extremes);
    RUN(test_q4_word_permutes);
    RUN(test_x16_layout);
    RUN(test_matvec_rows);
    RUN(test_axpy);
    RUN(test_axpy_range);
    RUN(test_axpy_multi);
    RUN(test_axpy_ref_definition);
    RUN(test_bf16_act_and_dot);
    RUN(test_bf16_both_ways);
    return th_done();
}
