/* The run-time choice of instruction set (kernels.h). */
#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdatomic.h>
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

/* The instruction set named by $HC_KERNELS (the best this CPU runs when unset
 * or empty): an unknown name or one this CPU does not run is refused. */
static int env_isa(void)
{
    const char *e = getenv("HC_KERNELS");
    int best = best_isa();
    if (!e || !*e) return best;
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

const char *hc_kernel_isa(void) { return names[hc_isa()]; }

int hc_kernel_force(const char *name)
{
    int best = best_isa();
    if (!name) { atomic_store(&cur_isa, best); return 0; }
    for (int i = best; i >= 0; i--)    /* the best and everything below it run here */
        if (!strcmp(names[i], name)) { atomic_store(&cur_isa, i); return 0; }
    return -1;
}

/* Tests and benchmarks change it with hc_kernel_bf16_dot between runs. */
static atomic_int bf16_dot = -1;

int hc_bf16_dot(void) { return chosen(&bf16_dot, has_avx512bf16); }

int hc_kernel_bf16_dot(int on)
{
    atomic_store(&bf16_dot, on && has_avx512bf16());
    return hc_bf16_dot();
}
