/* Random INT4-GPTQ weights for the tests: qweight, fp16 scales, qzeros and
 * g_idx in the file layout (docs/formats.md), loaded through hc_gptq_load. */
#ifndef HC_TEST_RANDOM_GPTQ_H
#define HC_TEST_RANDOM_GPTQ_H

#include <stddef.h>
#include <stdint.h>
#include "kernels_gptq.h"

/* A weight of `in` inputs and `out` outputs in groups of gs, input k in
 * group g_idx[k] (NULL: k / gs), its codes and scales drawn from *seed.
 * 0, or -1 + err from hc_gptq_load. */
int th_random_gptq(int in, int out, int gs, const int32_t *g_idx, uint64_t *seed, hc_gptq *g, char *err,
                   size_t errlen);

#endif
