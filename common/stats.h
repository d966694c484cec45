/* Activation statistics files ("stats", written by hc-profile, read by hc-solve).
 * A GGUF file with general.architecture = "hotcold.stats":
 *   KVs  hotcold.stats.version (u32, 1), .arch (str), .n_layer, .n_ff, .n_embd (u32),
 *        .activation (str "relu"|"silu"|"gelu"), .threshold (f32), .n_tokens (u64),
 *        .ffn_hash (str, 16 hex digits of hc_ffn_hash; "0000000000000000" = unknown,
 *        e.g. imported from PowerInfer), .corpus (str: corpus identity), .ctx (u32)
 *   tensors  blk.N.act_count (I64 [n_ff]) and blk.N.act_sum (F64 [n_ff]) for N = 0..n_layer-1,
 *        in that order. */
#ifndef HC_STATS_H
#define HC_STATS_H

#include <stdint.h>
#include <stddef.h>
#include "gguf.h"

typedef struct {
    char arch[64];
    char activation[16];       /* "relu", "silu" or "gelu": the model's FFN activation */
    char corpus[256];          /* free-form corpus identity (name + hash) */
    uint32_t n_layer, n_ff, n_embd, ctx;
    float threshold;
    uint64_t n_tokens;
    uint64_t ffn_hash;         /* 0 = unknown */
    int64_t *count;            /* [n_layer * n_ff], layer-major */
    double *sum;               /* [n_layer * n_ff] sum of |activation| */
} hc_stats;

hc_stats *hc_stats_new(uint32_t n_layer, uint32_t n_ff);
void hc_stats_free(hc_stats *s);
/* Atomic write. 0 or -1 with a message. */
int hc_stats_write(const hc_stats *s, const char *path, char *err, size_t errlen);
/* Read and validate (every KV and tensor present with the right type and shape). */
hc_stats *hc_stats_read(const char *path, char *err, size_t errlen);
/* The model's architecture (general.architecture, truncated to 63 bytes),
 * ARCH.block_count and ARCH.feed_forward_length; -1 with a message if one is
 * missing. */
int hc_model_ffn_shape(const gguf_file *model, const char *model_path, char arch[64], int64_t *n_layer,
                       int64_t *n_ff, char *err, size_t errlen);
/* 0 if the stats were made for this model (arch, n_layer, n_ff and, when known,
 * the FFN hash), else -1 with a message saying what differs. */
int hc_stats_check_model(const hc_stats *s, const gguf_file *model, const char *model_path,
                         char *err, size_t errlen);
/* Identity of a model's FFN: FNV-1a over the names, types, shapes and (sampled)
 * bytes of every blk.N.ffn_{gate,up,down,down_t}.weight tensor; a weight stored
 * as INT4-GPTQ companions (`<name>.qweight`, `.scales`, `.qzeros`, `.g_idx`,
 * hc-quantize GPTQ) contributes those tensors instead, by the same rule. */
uint64_t hc_ffn_hash(const gguf_file *model);

#endif
