/* One core's arithmetic peak, for the "% of peak" of scripts/bench-vs-llamacpp.sh:
 * 12 independent chains of fused multiply-adds (enough to cover the FMA
 * latency on every current x86 core), at the AVX-512 (zmm) and AVX2 (ymm)
 * widths, and, where the CPU has AVX512_BF16 / AVX512_VNNI, 12 chains of
 * vdpbf16ps / vpdpbusd (the int8 products of the quantized kernels). The
 * time is the thread's CPU time, so other processes on a shared machine only
 * lengthen the run; best of 5 passes.
 * Usage: bench_peak
 * Prints "NAME GFLOP/s" per line, NAME in fma512, fma256, dpbf16, dpbusd (a
 * line only where the CPU runs it). FLOPs: an FMA is 2 per lane; vdpbf16ps
 * adds two bf16 products to each f32 lane, 4 per lane; vpdpbusd four int8
 * products to each int32 lane, 8 "FLOPs" (integer operations) per lane. */
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define CHAINS 12
#define ITERS 20000000L

/* The 12 chains as named variables, so that every compiler keeps them in
 * registers (an array is left in memory at -O2). */
#define CHAINS_DO(OP) OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7) OP(a8) OP(a9) OP(a10) OP(a11)

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile float seed = 0.999999f;   /* keeps the compiler from folding the chains */
static volatile float sink;

/* Seconds of ITERS rounds of the 12 chains: init sets a chain, step advances
 * one, and the sum goes to sink. */
#define PEAK_BODY(VT, INIT, STEP, SUM)                                          \
    VT CHAINS_DO(INIT) unused_ = a0; /* the list ends with a declarator */      \
    (void)unused_;                                                              \
    double t0 = cpu_now();                                                      \
    for (long k = 0; k < ITERS; k++) { CHAINS_DO(STEP) }                        \
    double t = cpu_now() - t0;                                                  \
    float s = 0;                                                                \
    CHAINS_DO(SUM)                                                              \
    sink = s;                                                                   \
    return t;

/* Each measure's chain start, step (x and y: its operands) and sum. */
#define I512(v) v = _mm512_set1_ps(seed),
#define S512(v) v = _mm512_fmadd_ps(v, x, y);
#define R512(v) s += _mm512_reduce_add_ps(v);
#define I256(v) v = _mm256_set1_ps(seed),
#define S256(v) v = _mm256_fmadd_ps(v, x, y);
#define R256(v) s += sum8(v);
#define SBF(v) v = _mm512_dpbf16_ps(v, x, x);
#define IDP(v) v = _mm512_set1_epi32((int)(seed * 100)),
#define SDP(v) v = _mm512_dpbusd_epi32(v, x, x);
#define RDP(v) s += (float)_mm512_reduce_add_epi32(v);

__attribute__((target("avx2,fma"))) static float sum8(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

__attribute__((target("avx512f"))) static double fma512(void)
{
    const __m512 x = _mm512_set1_ps(seed), y = _mm512_set1_ps(seed * 1e-7f);
    PEAK_BODY(__m512, I512, S512, R512)
}

__attribute__((target("avx2,fma"))) static double fma256(void)
{
    const __m256 x = _mm256_set1_ps(seed), y = _mm256_set1_ps(seed * 1e-7f);
    PEAK_BODY(__m256, I256, S256, R256)
}

__attribute__((target("avx512f,avx512bf16"))) static double dpbf16(void)
{
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed), _mm512_set1_ps(seed * 0.5f));
    PEAK_BODY(__m512, I512, SBF, R512)
}

__attribute__((target("avx512f,avx512vnni"))) static double dpbusd(void)
{
    const __m512i x = _mm512_set1_epi8((char)(seed * 3));
    PEAK_BODY(__m512i, IDP, SDP, RDP)
}

/* Best GFLOP/s of 5 passes of one measure doing flops_per_op per instruction. */
static void report(const char *name, double (*run)(void), double flops_per_op)
{
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t = run();
        if (t > 0 && (best == 0 || t < best)) best = t;
    }
    printf("%s %.1f\n", name, (double)ITERS * CHAINS * flops_per_op / best / 1e9);
}

int main(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) report("fma512", fma512, 2.0 * 16);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) report("fma256", fma256, 2.0 * 8);
    if (__builtin_cpu_supports("avx512bf16")) report("dpbf16", dpbf16, 4.0 * 16);
    if (__builtin_cpu_supports("avx512vnni")) report("dpbusd", dpbusd, 8.0 * 16);
    return 0;
}
#else
int main(void)
{
    printf("bench_peak: x86-64 only\n");
    return 0;
}
#endif
