/* HF / AutoGPTQ packing of 4-bit values into int32 words (docs/formats.md,
 * "INT4-GPTQ tensors"): eight values per word, value i in bits 4i..4i+3. Zero
 * points are stored as the true zero (GPTQModel's "v2"), not zero - 1. */
#include <string.h>
#include "gptq.h"

void gptq_pack_qweight(const uint8_t *codes, int N, int K, int32_t *qweight)
{
    memset(qweight, 0, sizeof *qweight * (size_t)gptq_words(K) * (size_t)N);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            uint32_t *w = (uint32_t *)&qweight[(size_t)(k / 8) * (size_t)N + (size_t)n];
            *w |= (uint32_t)codes[(size_t)n * K + k] << (4 * (k % 8));
        }
}

void gptq_pack_qzeros(const uint8_t *zeros, int N, int G, int32_t *qzeros)
{
    const int W = gptq_words(N);
    memset(qzeros, 0, sizeof *qzeros * (size_t)W * (size_t)G);
    for (int g = 0; g < G; g++)
        for (int n = 0; n < N; n++) {
            uint32_t *w = (uint32_t *)&qzeros[(size_t)g * W + (size_t)(n / 8)];
            *w |= (uint32_t)zeros[(size_t)g * N + n] << (4 * (n % 8));
        }
}
