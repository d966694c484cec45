/* Random INT4-GPTQ weights for the tests (see random_gptq.h). */
#include "random_gptq.h"

#include <stdlib.h>
#include "ggml_types.h"

/* the next 4-bit code of *seed's sequence */
static unsigned code(uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(*seed >> 60);
}

int th_random_gptq(int in, int out, int gs, const int32_t *g_idx, uint64_t *seed, hc_gptq *g, char *err,
                   size_t errlen)
{
    int G = (in + gs - 1) / gs, zw = (out + 7) / 8;
    int32_t *qw = calloc((size_t)(in + 7) / 8 * (size_t)out, sizeof *qw), *qz = calloc((size_t)G * zw, sizeof *qz);
    int32_t *gi = malloc(sizeof *gi * (size_t)in);
    uint16_t *sc = malloc(sizeof *sc * (size_t)G * out);
    for (int k = 0; k < in; k++)
        for (int r = 0; r < out; r++) qw[(k / 8) * out + r] |= (int32_t)(code(seed) << (4 * (k % 8)));
    for (int j = 0; j < G; j++)
        for (int r = 0; r < out; r++) {
            sc[j * out + r] = fp32_to_fp16(0.01f + 0.04f * (float)code(seed) / 15.0f);
            qz[j * zw + r / 8] |= (int32_t)(code(seed) << (4 * (r % 8)));
        }
    for (int k = 0; k < in; k++) gi[k] = g_idx ? g_idx[k] : k / gs;
    int rc = hc_gptq_load(g, in, out, gs, qw, sc, qz, gi, err, errlen);
    free(qw);
    free(qz);
    free(gi);
    free(sc);
    return rc;
}
