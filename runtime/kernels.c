/* The run-time choice of instruction set (kernels.h). */
#include "kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quants.h"

static const char *const names[HC_ISA_COUNT] = { "scalar", "avx2", "avx512" };

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

/* Chosen on first use (-1: not yet); threads racing here all store the same
 * value. Tests and benchmarks change it with hc_kernel_force between runs. */
static atomic_int cur_isa = -1;

int hc_isa(void)
{
    int is = atomic_load_explicit(&cur_isa, memory_order_relaxed);
    if (is < 0) {
        is = env_isa();
        atomic_store_explicit(&cur_isa, is, memory_order_relaxed);
    }
    return is;
}

const char *hc_kernel_isa(void) { return names[hc_isa()]; }

int hc_kernel_force(const char *name)
{
    int best = best_isa();
    if (!name) { atomic_store(&cur_isa, best); return 0; }
    for (int i = best; i >= 0; i--)    /* the best and everything below it run here */
        if (!strcmp(names[i], name)) { atomic_store(&cur_isa, i); return 0; }
    return -1;
}
