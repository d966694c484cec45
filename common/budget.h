/* What a placement costs in device memory, priced once for hc-solve and hc-run:
 * the dense parts charged before any FFN neuron (in total and per layer) and
 * what one FFN neuron of each layer costs, all as hc-run stores them.
 * docs/design/solver.md, "What is charged to the budget". */
#ifndef HC_BUDGET_H
#define HC_BUDGET_H

#include <stdint.h>
#include <stddef.h>

#include "gguf.h"

/* The fixed parts, charged in this order before any FFN neuron: PowerInfer's
 * offloading priority (attention, predictors, norms, output head, KV cache),
 * then the INT4-GPTQ down columns' pairs tables, which a layer's device rows
 * share (runtime/kernels_gptq.h: one table per layer with hot neurons).
 *   HC_FIX_ATTN    a layer's attn_* tensors: weights (GPTQ companions as stored),
 *                  biases, attn_norm (PowerInfer's attention level holds its norm)
 *   HC_FIX_PRED    the layer's predictor, fc1 and fc2
 *   HC_FIX_NORM    every other per-layer tensor that is not an FFN neuron weight:
 *                  ffn_norm and its bias, the FFN products' biases, ...
 *   HC_FIX_OUTPUT  the output head: every tensor outside the layers but token_embd
 *                  (output, output_norm and its bias, rope_freqs, ...), and
 *                  token_embd when the embeddings are tied (no output.weight)
 *   HC_FIX_KV      K and V of ctx positions, kv_bytes (hc_budget_read) a position's element of both
 *   HC_FIX_GPTQ_PAIRS  the layer's GPTQ ffn_down pairs table (0 without GPTQ) */
enum { HC_FIX_ATTN, HC_FIX_PRED, HC_FIX_NORM, HC_FIX_OUTPUT, HC_FIX_KV, HC_FIX_GPTQ_PAIRS, HC_FIX_COUNT };
/* Their names in hc-solve's outputs ("attention", ..., "kv_cache", "gptq_down_pairs"). */
extern const char *const hc_budget_fixed_names[HC_FIX_COUNT];

/* hc-run's default KV caches (CPU and device) hold f32: 4 bytes an element of
 * k and of v; -ctk/-ctv f16 2 (ggml's and PowerInfer's default is F16). */
#define HC_BUDGET_KV_BYTES 4
/* The bytes of a k element and a v element of a cache of those types
 * (GGML_TYPE_F32 or GGML_TYPE_F16: hc-run's -ctk, -ctv), hc_budget_read's kv_bytes. */
int hc_kv_bytes(uint32_t type_k, uint32_t type_v);

typedef struct {
    uint64_t part[HC_FIX_COUNT];   /* this layer's bytes of each fixed part; part[HC_FIX_OUTPUT] is 0 */
    uint64_t neuron_bytes;         /* one FFN neuron: gate row + up row + one ffn_down_t row, as the runtime
                                      stores them, + a float per gate/up bias */
} hc_budget_layer;

typedef struct {
    uint32_t n_layer, n_ff, n_embd;
    uint32_t ctx;                  /* KV cache charged for this context length */
    uint32_t ctx_train;            /* the model's context_length (0: not given) */
    int kv_bytes;                  /* ... at these bytes a position's element of k and v (hc_budget_read) */
    hc_budget_layer *layer;        /* [n_layer] */
    uint64_t fixed[HC_FIX_COUNT];  /* totals: part[i] summed over the layers; fixed[HC_FIX_OUTPUT] is the
                                      output head's bytes, which belong to no layer */
    uint64_t fixed_total;          /* sum of fixed[] */
} hc_budget;

/* Prices model m, its KV cache at kv_bytes for an element of k and one of v
 * (2 * HC_BUDGET_KV_BYTES: f32's). ctx < 0: charge the KV cache for the
 * model's <arch>.context_length. 0, or -1 with a one-line message naming the
 * file. */
int hc_budget_read(hc_budget *b, const gguf_file *m, int64_t ctx, int kv_bytes, char *err, size_t errlen);
void hc_budget_free(hc_budget *b);

/* Bytes left for FFN neurons once every fixed part is charged, in the order
 * above, under vram_budget; or -1 with a message naming the first part that
 * does not fit. */
int hc_budget_capacity(const hc_budget *b, const char *model_path, uint64_t vram_budget,
                       uint64_t *capacity, char *err, size_t errlen);

/* Layer l's dense part: part[HC_FIX_ATTN] + part[HC_FIX_PRED] + part[HC_FIX_NORM]. */
uint64_t hc_budget_layer_dense(const hc_budget *b, uint32_t l);

/* How many leading layers (0 .. k-1) fit wholly, each with its KV cache: the
 * largest k <= n_layer with
 *     sum over l < k of (hc_budget_layer_dense(b, l) + layer[l].part[HC_FIX_KV]) <= vram_budget.
 * Parts are charged layer by layer from layer 0, and within a layer in
 * PowerInfer's order: attention, predictors, norms, then its KV cache; a layer
 * counts only when all of them fit (its attention reads its cache). Not charged:
 * the output head (fixed[HC_FIX_OUTPUT]) and the GPTQ pairs tables (they come
 * with hot rows). PowerInfer charges the head before any KV cache: to do the
 * same, pass vram_budget - fixed[HC_FIX_OUTPUT] (when the head fits). Whenever
 * hc_budget_capacity succeeds (hc-solve accepts the budget), this is n_layer. */
uint32_t hc_budget_layers(const hc_budget *b, uint64_t vram_budget);

/* The cost model of hc-solve (its defaults) and of hc-run's placement: the
 * CPU and a GPU stream weights at these bytes/s, one CPU-GPU
 * synchronisation costs this long, and (hc-run's placement only) a layer's
 * steps on a device cost this much in kernel launches: 14 (F16) to 18 (Q4_0)
 * a layer (hc-run -v counts them) of a few µs each. docs/design/solver.md,
 * "The cost model". */
#define HC_COST_CPU_BW (40.0 * 1073741824.0)
#define HC_COST_GPU_BW (900.0 * 1073741824.0)
#define HC_COST_SYNC_S 20e-6
#define HC_COST_LAYER_S 50e-6

/* Whether the first n_layers layers' dense parts on a device (their FFN
 * too with ffn, and the output head with head) pay per token by that model:
 * the weights read there instead save bytes * (1/CPU - 1/GPU) seconds
 * (*saved); the device costs (*cost) HC_COST_LAYER_S per placed layer and
 * HC_COST_SYNC_S per synchronisation: one per placed layer whose FFN stays
 * on the CPU (its exchange), and one where the residual stream (or the
 * logits) comes back. 1 when *saved > *cost. */
int hc_budget_place_pays(const hc_budget *b, uint32_t n_layers, int ffn, int head, double *saved, double *cost);

#endif
