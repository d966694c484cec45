/* PowerInfer's .gpuidx (GPU neuron index), read and validated as PowerInfer's
 * loader does (docs/formats.md, ".gpuidx"): a GGUF/PWRI file with
 * u64 split.vram_capacity and exactly 2 * n_layer I32 tensors, taken by
 * position: per layer gpu_idx [n_ff] (0/1) then gpu_bucket (the GPU neurons).
 * Stricter than PowerInfer where it trusts the file: gpu_idx holds only 0/1,
 * the bucket is strictly ascending, in range and has sum(gpu_idx) entries
 * that are exactly the neurons marked 1. */
#ifndef HC_GPUIDX_H
#define HC_GPUIDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n_layer, n_ff;
    uint64_t vram_capacity;   /* split.vram_capacity: device bytes the split was made for */
    uint64_t model_ffn_hash;  /* hotcold.solve.model_ffn_hash (hc-solve's): the model it was solved for; 0: unknown */
    int *n_gpu;               /* [n_layer] neurons on the device per layer */
    int32_t **bucket;         /* [n_layer][n_gpu[l]] device neurons, ascending */
} hc_gpuidx;

/* NULL + one line "PATH: what is wrong" in err for a file that is corrupt or
 * made for another shape (layer count, n_ff). */
hc_gpuidx *hc_gpuidx_load(const char *path, int n_layer, int n_ff, char *err, size_t errlen);
void hc_gpuidx_free(hc_gpuidx *g);

#endif
