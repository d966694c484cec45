/* Which instruction sets have a register-tiled batched kernel (kernels_tile.h). */
#include "kernels_tile.h"

hc_gemm_fn hc_tile_gemm(const struct hc_isa *is, int k)
{
    if (k < 0 || k >= HC_K_COUNT) return NULL;
#if defined(__x86_64__)
    if (is == &hc_isa_avx512) return hc_tile_avx512[k];
    if (is == &hc_isa_avx2) return hc_tile_avx2[k];
#endif
    (void)is;
    return NULL;
}
