/* Q4_0/Q8_0 quantizers: the hand-checkable blocks of
 * docs/formats.md, "Q8_0 and Q4_0 blocks" (measured with ggml), the no-FMA
 * rounding, x86 conversion semantics, and every SIMD level against the
 * reference bit for bit on millions of hostile values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "harness.h"
#include "quants.h"

static const int levels[] = { HC_SIMD_SCALAR, HC_SIMD_AVX2, HC_SIMD_AVX512 };
#define N_LEVELS (int)(sizeof levels / sizeof levels[0])

/* Quantize one block at a level and compare its file bytes with want. */
static int q4_block_is(const float *x, int level, const uint8_t want[18])
{
    block_q4_0 b;
    quantize_row_q4_0_at(x, &b, QK4_0, level);
    uint8_t got[18] = { (uint8_t)b.d, (uint8_t)(b.d >> 8) };
    memcpy(got + 2, b.qs, 16);
    return memcmp(got, want, 18) == 0;
}

static int q8_block_is(const float *x, int level, const uint8_t want[34])
{
    block_q8_0 b;
    quantize_row_q8_0_at(x, &b, QK8_0, level);
    uint8_t got[34] = { (uint8_t)b.d, (uint8_t)(b.d >> 8) };
    memcpy(got + 2, b.qs, 32);
    return memcmp(got, want, 34) == 0;
}

static void block_a(float *x) { for (int j = 0; j < 32; j++) x[j] = (float)(j - 16); }
static void block_e(float *x) { for (int j = 0; j < 32; j++) x[j] = 0.1f * (float)j; }
static void block_c(float *x)
{
    static const float c[9] = { 127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -127 };
    memset(x, 0, 32 * sizeof *x);
    memcpy(x, c, sizeof c);
}

static void test_hand_blocks_q4_0(void)
{
    static const uint8_t a[18] = { 0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4,
                                   0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8 };
    static const uint8_t z[18] = { 0x00, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
                                   0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88 };
    static const uint8_t c[18] = { 0xf0, 0xcb, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x80,
                                   0x8f, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88 };
    static const uint8_t e[18] = { 0x33, 0xb6, 0x48, 0x48, 0x37, 0x37, 0x37, 0x37, 0x26, 0x26,
                                   0x26, 0x26, 0x15, 0x15, 0x15, 0x15, 0x04, 0x04 };
    float x[32];
    for (int l = 0; l < N_LEVELS; l++) {
        block_a(x); CHECKF(q4_block_is(x, levels[l], a), "A at level %d", levels[l]);
        memset(x, 0, sizeof x); CHECKF(q4_block_is(x, levels[l], z), "Z at level %d", levels[l]);
        block_c(x); CHECKF(q4_block_is(x, levels[l], c), "C at level %d", levels[l]);
        block_e(x); CHECKF(q4_block_is(x, levels[l], e), "E at level %d", levels[l]);
    }
}

static void test_hand_blocks_q8_0(void)
{
    static const uint8_t a[34] = { 0x08, 0x30, 0x81, 0x89, 0x91, 0x99, 0xa1, 0xa9, 0xb1, 0xb9, 0xc0, 0xc8,
                                   0xd0, 0xd8, 0xe0, 0xe8, 0xf0, 0xf8, 0x00, 0x08, 0x10, 0x18, 0x20, 0x28,
                                   0x30, 0x38, 0x40, 0x47, 0x4f, 0x57, 0x5f, 0x67, 0x6f, 0x77 };
    static const uint8_t e[34] = { 0x40, 0x26, 0x00, 0x04, 0x08, 0x0c, 0x10, 0x14, 0x19, 0x1d, 0x21, 0x25,
                                   0x29, 0x2d, 0x31, 0x35, 0x39, 0x3d, 0x42, 0x46, 0x4a, 0x4e, 0x52, 0x56,
                                   0x5a, 0x5e, 0x62, 0x66, 0x6b, 0x6f, 0x73, 0x77, 0x7b, 0x7f };
    uint8_t z[34] = { 0 };
    /* C: ties round away from zero; then zeros */
    uint8_t c[34] = { 0x00, 0x3c, 0x7f, 0x01, 0x02, 0x03, 0xff, 0xfe, 0xfd, 0x7f, 0x81 };
    float x[32];
    for (int l = 0; l < N_LEVELS; l++) {
        block_a(x); CHECKF(q8_block_is(x, levels[l], a), "A at level %d", levels[l]);
        memset(x, 0, sizeof x); CHECKF(q8_block_is(x, levels[l], z), "Z at level %d", levels[l]);
        block_c(x); CHECKF(q8_block_is(x, levels[l], c), "C at level %d", levels[l]);
        block_e(x); CHECKF(q8_block_is(x, levels[l], e), "E at level %d", levels[l]);
    }
}

static void test_dequantize(void)
{
    float x[64], y[64];
    block_a(x);
    block_e(x + 32);
    block_q4_0 b4[2];
    quantize_row_q4_0_ref(x, b4, 64);
    dequantize_row_q4_0(b4, y, 64);
    CHECK(y[0] == -16 && y[1] == -14 && y[2] == -14 && y[3] == -12 && y[16] == 0 && y[31] == 14);
    block_q8_0 b8[2];
    quantize_row_q8_0_ref(x, b8, 64);
    dequantize_row_q8_0(b8, y, 64);
    const float d = fp16_to_fp32(0x3008);
    for (int j = 0; j < 32; j++)
        CHECKF(y[j] == (float)b8[0].qs[j] * d && fabsf(y[j] - x[j]) <= d / 2 + 1e-6f, "j=%d", j);
    CHECK(b8[0].qs[0] == -127 && b8[0].qs[31] == 119);
    /* Q4_1: y = q*d + m */
    block_q4_1 b1 = { fp32_to_fp16(0.5f), fp32_to_fp16(-1.0f), { 0 } };
    b1.qs[0] = 0xf3;
    dequantize_row_q4_1(&b1, y, 32);
    CHECK(y[0] == 0.5f && y[16] == 6.5f && y[1] == -1.0f);
}

/* A block where x*id + 8.5f rounds differently with a fused multiply-add:
 * the reference must give the unfused result, as llama.cpp's x86 build. */
static void test_no_fma(void)
{
    float x[32] = { 0 };
    x[0] = 0x1.3c8858p+0f;    /* the max: d = -x0/8 */
    x[1] = 0x1.28bfd2p+0f;    /* x1*id = -7.5 after rounding, just above exactly */
    const float id = 1.0f / (x[0] / -8);
    volatile float prod = x[1] * id;
    CHECK((int)(prod + 8.5f) == 1);
    CHECK((int)fmaf(x[1], id, 8.5f) == 0);      /* an FMA build would store 0 */
    for (int l = 0; l < N_LEVELS; l++) {
        block_q4_0 b;
        quantize_row_q4_0_at(x, &b, 32, levels[l]);
        CHECKF((b.qs[1] & 15) == 1, "level %d stored %d", levels[l], b.qs[1] & 15);
    }
}

static void test_x86_conversion(void)
{
    CHECK(hc_f32_to_i8_x86(-1.5f) == -1 && hc_f32_to_i8_x86(16.9f) == 16);
    CHECK(hc_f32_to_i8_x86(200.0f) == -56);           /* low byte of 200 */
    CHECK(hc_f32_to_i8_x86(NAN) == 0 && hc_f32_to_i8_x86(INFINITY) == 0);
    CHECK(hc_f32_to_i8_x86(3e9f) == 0 && hc_f32_to_i8_x86(-2147483648.0f) == 0);
    CHECK(hc_f32_to_i8_x86(2147483520.0f) == (int8_t)0x80);
}

/* ------------------------------------------------- SIMD == reference */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { return hc_splitmix64(&rng_state); }
static float unif(void) { return (float)(rnd() >> 40) / 16777216.0f * 2.0f - 1.0f; }
static float bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Fill one block of 32 with a randomly chosen hostile pattern. */
static void hostile_block(float *x)
{
    const unsigned kind = (unsigned)(rnd() % 10);
    const float scale = kind == 1 ? 1e38f : kind == 2 ? 1e-40f : kind == 3 ? 3e-39f : 1.0f;
    for (int j = 0; j < 32; j++) {
        switch (kind) {
        case 4:  x[j] = (float)((int)(rnd() % 255) - 127) + 0.5f; break;  /* Q8_0 ties at d=1 */
        case 5:  x[j] = (float)((int)(rnd() % 17) - 8) * 0.5f; break;     /* Q4_0 half steps */
        case 6:  x[j] = (rnd() & 1) ? 0.0f : -0.0f; break;                /* signed zeros */
        case 7:  x[j] = bits((uint32_t)rnd()); break;                     /* any bits: NaN, inf, denormal */
        case 8:  x[j] = (rnd() & 3) ? unif() : ((rnd() & 1) ? 2.0f : -2.0f); break; /* tied maxima */
        default: x[j] = unif() * scale; break;
        }
    }
    if (kind == 4) x[rnd() % 32] = 127.0f;   /* d = 1 exactly */
    if (kind == 5) x[rnd() % 32] = -4.0f;    /* d = 0.5, id = 2 */
}

static void test_simd_equals_ref(void)
{
    const int64_t n = 1 << 21;                  /* 2 Mi values, 64 Ki blocks */
    float *x = malloc((size_t)n * sizeof *x);
    block_q4_0 *r4 = malloc((size_t)n / 32 * sizeof *r4), *s4 = malloc((size_t)n / 32 * sizeof *s4);
    block_q8_0 *r8 = malloc((size_t)n / 32 * sizeof *r8), *s8 = malloc((size_t)n / 32 * sizeof *s8);
    CHECK(x && r4 && s4 && r8 && s8);
    for (int64_t i = 0; i < n; i += 32)
        hostile_block(x + i);
    quantize_row_q4_0_ref(x, r4, n);
    quantize_row_q8_0_ref(x, r8, n);
    int bad = 0;
    for (int l = 1; l < N_LEVELS && !bad; l++) {
        if (levels[l] > hc_quant_simd_level()) {
            printf("# level %d not supported by this CPU: not tested\n", levels[l]);
            continue;
        }
        quantize_row_q4_0_at(x, s4, n, levels[l]);
        quantize_row_q8_0_at(x, s8, n, levels[l]);
        for (int64_t b = 0; b < n / 32 && !bad; b++) {
            if (memcmp(&r4[b], &s4[b], sizeof *r4)) { th_fail(__FILE__, __LINE__, "Q4_0 level %d block %lld", levels[l], (long long)b); bad = 1; }
            if (memcmp(&r8[b], &s8[b], sizeof *r8)) { th_fail(__FILE__, __LINE__, "Q8_0 level %d block %lld", levels[l], (long long)b); bad = 1; }
        }
    }
    free(x); free(r4); free(s4); free(r8); free(s8);
}

/* Rows not starting on a block boundary of a big buffer, and unaligned input. */
static void test_simd_unaligned(void)
{
    float buf[32 * 5 + 1];
    for (int j = 0; j < 32 * 5 + 1; j++) buf[j] = unif() * 3.0f;
    block_q4_0 r4[5], s4[5];
    block_q8_0 r8[5], s8[5];
    quantize_row_q4_0_ref(buf + 1, r4, 160);
    quantize_row_q8_0_ref(buf + 1, r8, 160);
    quantize_row_q4_0(buf + 1, s4, 160);
    quantize_row_q8_0(buf + 1, s8, 160);
    CHECK(memcmp(r4, s4, sizeof r4) == 0 && memcmp(r8, s8, sizeof r8) == 0);
}

/* Every one of the 65536 halves (NaNs, infinities, subnormals included),
 * at odd lengths and offsets, widened at every level: the reference's bits. */
static void test_fp16_rows(void)
{
    enum { N = 65536 + 7 };
    uint16_t *h = malloc(N * sizeof *h);
    float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    CHECK(h && want && got);
    for (int i = 0; i < N; i++) {
        h[i] = (uint16_t)(i * 40503u);   /* odd multiplier: a permutation of the halves */
        want[i] = fp16_to_fp32(h[i]);
    }
    for (int l = 1; l < N_LEVELS; l++) {
        if (levels[l] > hc_quant_simd_level()) continue;
        for (int off = 0; off < 3; off++) {
            memset(got, 0, N * sizeof *got);
            fp16_row_to_f32_at(h + off, got + off, N - 7 + off, levels[l]);
            CHECKF(memcmp(got + off, want + off, (size_t)(N - 7 + off) * sizeof *got) == 0,
                   "level %d offset %d", levels[l], off);
        }
    }
    free(h); free(want); free(got);
}

/* Floats that round to every half (each half's value, the midpoints
 * between neighbours: ties to even, and just beside them), beyond the
 * largest (to inf), below the smallest subnormal (to 0), NaNs with payloads,
 * at odd lengths and offsets, narrowed at every level: the reference's
 * bits. */
static void test_f32_rows_to_fp16(void)
{
    enum { N = 4 * 65536 + 7 };
    float *x = malloc(N * sizeof *x);
    uint16_t *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    CHECK(x && want && got);
    for (int i = 0; i < N; i++) {
        uint16_t a = (uint16_t)((i / 4) * 40503u), b = (uint16_t)(a + 1);
        float fa = fp16_to_fp32(a), fb = fp16_to_fp32(b), mid = fa + (fb - fa) / 2;
        switch (i % 4) {
        case 0: x[i] = fa; break;
        case 1: x[i] = mid; break;
        case 2: x[i] = nextafterf(mid, INFINITY); break;
        default: x[i] = i % 8 == 3 ? nextafterf(mid, -INFINITY) : (i % 16 == 7 ? 1e6f : 1e-9f); break;
        }
        if (i % 1000 == 5) {   /* a NaN with a payload, and its sign */
            uint32_t u = 0x7f800001u | (uint32_t)i << 8 | (i % 2000 == 5 ? 0x80000000u : 0);
            memcpy(&x[i], &u, sizeof u);
        }
        want[i] = fp32_to_fp16(x[i]);
    }
    for (int l = 0; l < N_LEVELS; l++) {
        if (levels[l] > hc_quant_simd_level()) continue;
        for (int off = 0; off < 3; off++) {
            memset(got, 0, N * sizeof *got);
            fp32_row_to_f16_at(x + off, got + off, N - 7 + off, levels[l]);
            CHECKF(memcmp(got + off, want + off, (size_t)(N - 7 + off) * sizeof *got) == 0, "level %d offset %d",
                   levels[l], off);
        }
    }
    free(x); free(want); free(got);
}

int main(void)
{
    RUN(test_hand_blocks_q4_0);
    RUN(test_hand_blocks_q8_0);
    RUN(test_dequantize);
    RUN(test_no_fma);
    RUN(test_x86_conversion);
    RUN(test_simd_equals_ref);
    RUN(test_simd_unaligned);
    RUN(test_fp16_rows);
    RUN(test_f32_rows_to_fp16);
    return th_done();
}
