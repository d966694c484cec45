/* hc-convert hf internals: config.json read into an hf_config (the model
 * family and every key that changes the math, each implemented or refused
 * by name: convert_hf_config.c), then each family's tensors mapped to
 * llama.cpp's / PowerInfer's GGUF names (convert_hf_tensors.c). */
#ifndef HC_CONVERT_HF_H
#define HC_CONVERT_HF_H

#include "convert.h"

enum hf_family { HF_LLAMA, HF_QWEN2, HF_BAMBOO, HF_OPT, HF_FALCON };
/* Rope scaling: none, linear (rope.scaling.factor), llama3 (rope_freqs.weight). */
enum hf_rope { HF_ROPE_NONE, HF_ROPE_LINEAR, HF_ROPE_LLAMA3 };

typedef struct {
    cv_hparams hp;
    int family;              /* enum hf_family */
    const char *act;         /* "silu", "relu" or "gelu" */
    int tied;                /* tie_word_embeddings */
    float rope_theta;
    int rope;                /* enum hf_rope */
    float rope_factor, low_freq, high_freq;
    uint32_t rope_orig_ctx;  /* llama3: original_max_position_embeddings */
    uint32_t sliding_window; /* 0: none, or not shorter than the context */
    float act_threshold;     /* ProSparse FATReLU (hidden_act_param); 0: none */
} hf_config;

/* Read DIR/config.json into c; dies with one line naming the key and value
 * for anything it does not implement. */
void hf_read_config(const char *dir, hf_config *c);

/* Declare the output tensors of a family from the checkpoint s; with
 * predictors (pred not NULL) ffn_down goes transposed to ffn_down_t and each
 * layer gets fc1/fc2. Marks every source tensor it uses. */
void hf_map_tensors(const hf_config *c, st_set *s, st_set *pred, const char *pred_dir, uint32_t wtype,
                    cv_tensors *ts);

#endif
