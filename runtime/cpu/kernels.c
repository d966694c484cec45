/* The run-time choice of instruction set (kernels.h): the one forced, or
 * each weight type's from the table of CPU models (kernel_table.c). */
#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quants.h"

static const char *const names[HC_ISA_COUNT] = { "scalar", "avx2", "avx512" };

/* AVX512_BF16 (vdpbf16ps): cpuid leaf 7, subleaf 1, eax bit 5. */
static int has_avx512bf16(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
    return 0;
#endif
}

static int best_isa(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    int base = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && hc_cpu_has_f16c();
    if (base && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return HC_ISA_AVX512;
    if (base) return HC_ISA_AVX2;
#endif
    return HC_ISA_SCALAR;
}

/* The instruction set named by $HC_KERNELS, HC_ISA_CHOSEN when unset or
 * empty: an unknown name or one this CPU does not run is refused. */
static int env_isa(void)
{
    const char *e = getenv("HC_KERNELS");
    int best = best_isa();
    if (!e || !*e) return HC_ISA_CHOSEN;
    for (int i = best; i >= 0; i--)
        if (!strcmp(names[i], e)) return i;
    hc_die("HC_KERNELS: '%s' is not an instruction set this CPU runs (%s%s%s)", e, best >= HC_ISA_AVX512 ? "avx512, " : "",
           best >= HC_ISA_AVX2 ? "avx2, " : "", "scalar");
}

/* *v, set to choose() on first use (-1: not yet); threads racing here all
 * store the same value. */
static int chosen(atomic_int *v, int (*choose)(void))
{
    int c = atomic_load_explicit(v, memory_order_relaxed);
    if (c < 0) {
        c = choose();
        atomic_store_explicit(v, c, memory_order_relaxed);
    }
    return c;
}

/* Tests and benchmarks change it with hc_kernel_force between runs. */
static atomic_int cur_isa = -1;

int hc_isa(void) { return chosen(&cur_isa, env_isa); }

int hc_isa_top(void) { return hc_isa() == HC_ISA_CHOSEN ? best_isa() : hc_isa(); }

const char *hc_kernel_isa(void) { return hc_isa() == HC_ISA_CHOSEN ? "by type" : names[hc_isa()]; }

int hc_kernel_force(const char *name)
{
    int best = best_isa();
    if (!name) { atomic_store(&cur_isa, HC_ISA_CHOSEN); return 0; }
    for (int i = best; i >= 0; i--)    /* the best and everything below it run here */
        if (!strcmp(names[i], name)) { atomic_store(&cur_isa, i); return 0; }
    return -1;
}

/* This CPU (*c) and its model's table row (kernel_table.c) in *k. */
static const char *table_row(hc_cpu_id *c, hc_kernel_row *k)
{
    hc_cpu_identify(c);
    return hc_kernel_table(c, best_isa(), k);
}

/* The choice by type: the table row's, else the best the CPU runs
 * everywhere; looked up once per process. */
static int by_type[HC_KT_COUNT];
static pthread_once_t by_type_once = PTHREAD_ONCE_INIT;

static void choose_by_type(void)
{
    hc_cpu_id c;
    hc_kernel_row k;
    const int has_row = table_row(&c, &k) != NULL;
    for (int t = 0; t < HC_KT_COUNT; t++) by_type[t] = has_row ? k.isa[t] : best_isa();
}

int hc_kernel_choice(int kt)
{
    if (hc_isa() != HC_ISA_CHOSEN) return hc_isa();
    pthread_once(&by_type_once, choose_by_type);
    return by_type[kt];
}

/* The table row's flags; without a row, dword permutes, decode as streams
 * and vdpbf16ps. */
static hc_kernel_row table_flags(void)
{
    hc_cpu_id c;
    hc_kernel_row k = { .wperm = 0, .streams = 1, .bf16dp = 1 };
    table_row(&c, &k);
    return k;
}

/* Tests and benchmarks set these with hc_kernel_q4_word_permutes,
 * hc_kernel_decode_streams and hc_kernel_bf16_dot. */
static int table_wperm(void) { return table_flags().wperm; }
static int table_streams(void) { return table_flags().streams; }
static int table_bf16dp(void) { return has_avx512bf16() && table_flags().bf16dp; }

static atomic_int q4_wperm = -1;

int hc_q4_word_permutes(void) { return chosen(&q4_wperm, table_wperm); }

int hc_kernel_q4_word_permutes(int on)
{
    atomic_store(&q4_wperm, on < 0 ? table_wperm() : on);
    return hc_q4_word_permutes();
}

static atomic_int streams = -1;

int hc_decode_streams(void) { return chosen(&streams, table_streams); }

int hc_kernel_decode_streams(int on)
{
    atomic_store(&streams, on < 0 ? table_streams() : on);
    return hc_decode_streams();
}

void hc_kernel_describe(char *buf, size_t size)
{
    static const char *const types[HC_KT_COUNT] = { "F32", "F16", "BF16", "Q8_0", "Q4_0", "INT4-GPTQ" };
    size_t o = 0;
    for (int t = 0; t < HC_KT_COUNT && o < size; t++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s %s", t ? ", " : "", types[t], names[hc_kernel_choice(t)]);
    if (o >= size) return;
    hc_cpu_id c;
    hc_kernel_row k;
    const char *row = table_row(&c, &k);
    if (hc_kernel_choice(HC_KT_Q4_0) == HC_ISA_AVX512 && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", AVX-512 Q4_0 rows in ggml's layout unpacked with %s", hc_q4_word_permutes() ? "vpermt2w" : "vpermt2d");
    if (hc_isa_top() == HC_ISA_AVX512 && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", AVX-512 decode %s", hc_decode_streams() ? "as streams" : "a row at a time");
    if (hc_kernel_choice(HC_KT_BF16) == HC_ISA_AVX512 && has_avx512bf16() && o < size)
        o += (size_t)snprintf(buf + o, size - o, ", BF16 by %s", hc_bf16_dot() ? "vdpbf16ps" : "FMAs in vdpbf16ps's order");
    if (o >= size) return;
    if (hc_isa() != HC_ISA_CHOSEN)
        snprintf(buf + o, size - o, " (%s)", getenv("HC_KERNELS") && *getenv("HC_KERNELS") ? "HC_KERNELS" : "forced");
    else if (row)
        snprintf(buf + o, size - o, " (table: %s; %s family %d model %d)", row, c.vendor, c.family, c.model);
    else
        snprintf(buf + o, size - o, " (cpuid: no table row for %s family %d model %d; scripts/tune-kernels.sh measures one)",
                 c.vendor, c.family, c.model);
}

static atomic_int bf16_dot = -1;

int hc_bf16_dot(void) { return chosen(&bf16_dot, table_bf16dp); }

int hc_kernel_bf16_dot(int on)
{
    atomic_store(&bf16_dot, on < 0 ? table_bf16dp() : on && has_avx512bf16());
    return hc_bf16_dot();
}
