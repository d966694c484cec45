/* LLaMA-family model (GGUF, mmap) and its evaluation context.
 *
 * Loading follows llama.cpp (../shared/reference/gguf-ggml.md §1.7-1.8):
 * u32/f32 keys checked by type, rope.freq_base default 10000, head_count_kv
 * default head_count, output.weight optional (tied to token_embd). The string
 * KV `hotcold.ffn_activation` = "relu" | "silu" (default silu) selects the
 * FFN activation. A PowerInfer "PWRI" file stores blk.N.ffn_down_t.weight
 * {n_embd, n_ff} instead of ffn_down and may carry the predictor
 * blk.N.fc1.weight {n_embd, r} / blk.N.fc2.weight {r, n_ff}.
 *
 * Forward pass as llama2.c run.c (§4.2): RMSNorm, RoPE on adjacent pairs,
 * grouped-query attention with an f32 KV cache, SwiGLU (or ReLU-gated) FFN.
 *
 * Extension points (used by GPTQ, the profiler, predictors, hybrid):
 *  - hc_layer: every weight is an hc_weight a caller may replace;
 *  - hc_embed / hc_layer_forward / hc_output: run the network piece by piece;
 *  - ctx->hook: called with each linear layer's input, B rows at a time;
 *  - ctx->ffn: replaces a layer's FFN; hc_ffn_dense / hc_ffn_partial compute
 *    all neurons or a subset (hot/cold split). */
#ifndef HC_MODEL_H
#define HC_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"
#include "threads.h"
#include "tokenizer.h"
#include "weight.h"

enum hc_act { HC_ACT_SILU = 0, HC_ACT_RELU = 1 };

typedef struct {
    int n_vocab, n_embd, n_layer, n_ff;
    int n_head, n_head_kv, head_dim;   /* head_dim = n_embd / n_head */
    int n_ctx_train;                   /* llama.context_length */
    float rms_eps, rope_base;
    int act;                           /* enum hc_act */
    float sparse_threshold;            /* powerinfer.sparse_threshold (0 if absent) */
} hc_hparams;

typedef struct {
    const float *attn_norm, *ffn_norm;           /* [n_embd], f32 (owned copies) */
    hc_weight attn_q, attn_k, attn_v, attn_output;
    hc_weight ffn_gate, ffn_up;                   /* rows = n_ff */
    hc_weight ffn_down;                           /* rows = n_embd, n = n_ff; NONE in PWRI files */
    hc_weight ffn_down_t;                         /* rows = n_ff, n = n_embd; PWRI only, else NONE */
    hc_weight fc1, fc2;                           /* PWRI predictor: rows r / n_ff; else NONE */
} hc_layer;

typedef struct {
    char *path;
    gguf_file *file;                  /* the mapping; tokenizer loads from it */
    hc_hparams hp;
    hc_weight token_embd;             /* rows = n_vocab */
    hc_weight output;                 /* = token_embd when tied */
    const float *output_norm;         /* [n_embd] */
    hc_layer *layers;                 /* [n_layer] */
    float *norms;                     /* storage of every norm vector */
    struct hc_gptq **gptq;            /* INT4-GPTQ weights loaded (owned), n_gptq of them */
    int n_gptq;
} hc_model;

/* NULL + one line "PATH: what is wrong" in err for any file it cannot run. */
hc_model *hc_model_load(const char *path, char *err, size_t errlen);
/* The same checks and model, without faulting the weights in first
 * (hc_model_check: programs that only validate). */
hc_model *hc_model_open(const char *path, char *err, size_t errlen);
/* The model's tokenizer, its vocabulary as large as token_embd.weight's rows;
 * NULL + "PATH: what is wrong" (runtime/model_check.c). */
hc_tokenizer *hc_model_tokenizer(const hc_model *m, char *err, size_t errlen);
void hc_model_free(hc_model *m);
/* Weight bytes one token reads (every matrix once, one embedding row). */
uint64_t hc_model_token_bytes(const hc_model *m);

/* ------------------------------------------------------------ context */

enum hc_hook_point {
    HC_HOOK_ATTN_IN,    /* attn_norm(x): input of attn_q/k/v           [B][n_embd] */
    HC_HOOK_ATTN_OUT,   /* attention result: input of attn_output     [B][n_head*head_dim] */
    HC_HOOK_FFN_INP,    /* residual stream before ffn_norm (predictors) [B][n_embd] */
    HC_HOOK_FFN_IN,     /* ffn_norm(ffn_inp): input of ffn_gate/up     [B][n_embd] */
    HC_HOOK_FFN_ACT,    /* act(gate)*up: input of ffn_down              [B][n_ff] */
    HC_HOOK_COUNT
};
/* x holds B rows of n floats for positions pos0 .. pos0+B-1; read-only. */
typedef void (*hc_hook_fn)(void *user, int layer, int point, const float *x, int B, int n, int pos0);

typedef struct hc_ctx hc_ctx;
/* A replacement FFN for every layer: out[B][n_embd] = FFN(x_norm) (set, not
 * added; the caller adds the residual). ffn_inp is the un-normalized input
 * (predictors read it). It is then responsible for HC_HOOK_FFN_ACT. */
typedef void (*hc_ffn_fn)(void *user, hc_ctx *ctx, int layer, const float *ffn_inp,
                          const float *x_norm, int B, float *out);

typedef struct {
    int n_ctx;       /* KV cache positions; 0: min(context_length, 2048) */
    int n_batch;     /* most tokens per forward step; 0: min(n_ctx, 512) */
    int n_threads;   /* 0: 1 */
} hc_ctx_params;

struct hc_ctx {
    const hc_model *model;
    hc_pool *pool;
    int n_ctx, n_batch;
    /* set by callers, NULL by default */
    hc_hook_fn hook;  void *hook_user;
    hc_ffn_fn ffn;    void *ffn_user;
    /* internal state */
    float *k_cache, *v_cache;   /* [n_layer][n_ctx][n_head_kv*head_dim] */
    float *x, *xn, *tmp, *part; /* [n_batch][n_embd] */
    float *q, *att;             /* [n_batch][n_head*head_dim] */
    float *gate, *up;           /* [n_batch][n_ff] */
    float *scores;              /* [n_threads][n_ctx] */
    float *rope_freq;           /* [head_dim/2] */
    void *acts, *acts2;         /* prepared activations, [n_batch] each */
    size_t act_stride;          /* bytes per prepared vector */
    int cur_pos0;               /* first position of the rows being computed */
    char err[256];
};

/* NULL + message in err (too large a context, out of memory). */
hc_ctx *hc_ctx_new(const hc_model *m, const hc_ctx_params *p, char *err, size_t errlen);
void hc_ctx_free(hc_ctx *ctx);

enum hc_logits { HC_LOGITS_NONE, HC_LOGITS_LAST, HC_LOGITS_ALL };
/* Evaluate tokens at positions pos0 .. pos0+n_tokens-1 (the cache must hold
 * 0 .. pos0-1), in batches of at most n_batch with causal attention.
 * logits: n_vocab floats (LAST) or n_tokens*n_vocab (ALL). 0, or -1 with the
 * reason in ctx->err (position past n_ctx, token id out of range). */
int hc_eval(hc_ctx *ctx, const int32_t *tokens, int n_tokens, int pos0, float *logits, int which);

/* The pieces of hc_eval, for B <= n_batch rows (tokens must be valid). */
void hc_embed(hc_ctx *ctx, const int32_t *tokens, int B, float *x);        /* x[B][n_embd] */
void hc_layer_forward(hc_ctx *ctx, int layer, float *x, int B, int pos0);  /* in place */
void hc_output(hc_ctx *ctx, const float *x, int B, float *logits);         /* norm + classifier */

/* y[B][w->rows] = w · x[B][w->n], threads split over rows. */
void hc_ctx_matvec(hc_ctx *ctx, const hc_weight *w, const float *x, int B, float *y);

/* The dense FFN of a layer (the default when ctx->ffn is NULL): out = FFN(x_norm). */
void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out);
/* FFN restricted to neurons idx[0..k) (any order, no duplicates):
 * out_accum[B][n_embd] += Σ_{j in idx} down[:, j] · h_j. With ffn_down_t the
 * down step is one row AXPY per neuron; with ffn_down it scatters h into a
 * zeroed vector and runs the dense down product. If h is not NULL it
 * receives h[B][k]. Threads split over neurons for gate/up, over outputs for down. */
void hc_ffn_partial(hc_ctx *ctx, int layer, const float *x_norm, int B,
                    const int32_t *idx, int k, float *out_accum, float *h);

#endif
