/* The model (GGUF, mmap) and its evaluation context: the runtime's API.
 *
 * Loading follows llama.cpp (docs/formats.md, "Model files"):
 * u32/f32 keys checked by type, rope.freq_base default 10000, head_count_kv
 * default head_count, output.weight optional (tied to token_embd). The string
 * KV `hotcold.ffn_activation` = "relu" | "silu" | "gelu" (default: the
 * family's) selects the FFN activation. A PowerInfer "PWRI" file stores blk.N.ffn_down_t.weight
 * {n_embd, n_ff} instead of ffn_down and may carry the predictor
 * blk.N.fc1.weight {n_embd, r} / blk.N.fc2.weight {r, n_ff}.
 *
 * Forward pass as llama2.c run.c (docs/design/runtime.md, "Numerics"): RMSNorm, RoPE on adjacent pairs,
 * grouped-query attention with an f32 KV cache, SwiGLU (or ReLU-gated) FFN.
 *
 * Model families. What differs between families is data in hc_hparams (the
 * enums below, one value per variant) read by a few small functions; the
 * layer (hc_layer_forward) and the kernels stay the same. The family table
 * of model.c maps general.architecture (llama, qwen2, bamboo, opt, falcon)
 * to the seam's values; a new family adds a row there, its keys and optional
 * tensors to the loader and hc_layer, and, for a new variant, an enum value
 * and a case in each function it reaches: each is a switch on the enum, so
 * -Wswitch names every one that lacks the new value (docs/design/runtime.md,
 * "Model families").
 *  - norm (enum hc_norm): forward.c norm_rows. RMSNorm, or LayerNorm with
 *    the optional bias vectors next to attn_norm/ffn_norm.
 *  - attention: grouped-query by n_head_kv (multi-query is n_head_kv = 1);
 *    q/k/v/o biases are optional hc_layer vectors added after their products
 *    in forward.c; a fused attn_qkv is loaded as three row views.
 *  - position (enum hc_pos): forward.c positions() and hc_embed. RoPE on
 *    adjacent pairs or on halves (NeoX), with the frequencies made once by
 *    rope_freqs(), where rope scaling (enum hc_rope_scaling) divides them;
 *    learned absolute positions add a row of position_embd in hc_embed.
 *  - FFN (enum hc_ffn_kind): dense.c hc_ffn_neurons, sparse.c (first_rows,
 *    neuron_h) and the device kernel. Gated down(act(gate)·up), symmetric
 *    down(act(gate)·act(up)), sequential down(act(up)) (no gate).
 *  - residual (enum hc_residual): forward.c hc_layer_forward. Sequential
 *    x += attn(norm(x)); x += ffn(norm(x)); parallel feeds both blocks the
 *    same x and adds both outputs.
 *
 * Extension points (used by GPTQ, the profiler, predictors, hybrid):
 *  - hc_layer: every weight is an hc_weight a caller may replace;
 *  - hc_embed / hc_layer_forward / hc_ffn_forward / hc_output: run the
 *    network piece by piece;
 *  - hc_ctx_params.hook: called with each linear layer's input, B rows at a
 *    time, by the context (an FFN never calls it);
 *  - hc_ctx_params.ffn: replaces every layer's FFN (the sparse/hybrid FFN of
 *    sparse.h; ffn_setup.h chooses one as hc-run does). */
#ifndef HC_MODEL_H
#define HC_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"
#include "threads.h"
#include "tokenizer.h"
#include "weight.h"

enum hc_act { HC_ACT_SILU = 0, HC_ACT_RELU = 1, HC_ACT_GELU = 2 };   /* GELU: the exact (erf) form */
/* The family seam (see "Model families" above). */
enum hc_norm { HC_NORM_RMS = 0, HC_NORM_LAYER = 1 };     /* LayerNorm: optional bias vectors */
/* RoPE on adjacent pairs (GGUF llama layout), on the halves of a head (NeoX:
 * qwen2, falcon), or learned absolute positions (OPT's position_embd). */
enum hc_pos { HC_POS_ROPE = 0, HC_POS_ROPE_NEOX = 1, HC_POS_LEARNED = 2 };
/* Linear: every frequency / rope.scaling.factor; factors: each pair's
 * frequency / rope_freqs.weight[i] (llama.cpp's form of Llama 3 scaling). */
enum hc_rope_scaling { HC_ROPE_SCALING_NONE = 0, HC_ROPE_SCALING_LINEAR = 1, HC_ROPE_SCALING_FACTORS = 2 };
/* gated down(act(gate)·up); symmetric down(act(gate)·act(up)) (Bamboo's
 * dReLU); sequential down(act(up)) without a gate (OPT, Falcon). */
enum hc_ffn_kind { HC_FFN_GATED = 0, HC_FFN_SYMMETRIC = 1, HC_FFN_SEQUENTIAL = 2 };
enum hc_residual { HC_RESIDUAL_SEQUENTIAL = 0, HC_RESIDUAL_PARALLEL = 1 };

typedef struct {
    int n_vocab, n_embd, n_layer, n_ff;
    int n_head, n_head_kv, head_dim;   /* head_dim: ARCH.attention.key_length, else n_embd / n_head */
    int n_ctx_train;                   /* ARCH.context_length */
    int sliding_window;                /* ARCH.attention.sliding_window; 0: none */
    float rms_eps, rope_base;          /* rms_eps: the norm's epsilon (RMS or LayerNorm) */
    float rope_scale;                  /* ARCH.rope.scaling.factor (linear scaling), else 1 */
    int act;                           /* enum hc_act */
    float sparse_threshold;            /* powerinfer.sparse_threshold (0 if absent) */
    float act_threshold;               /* hotcold.ffn_act_threshold: ReLU as FATReLU, a = x >= T ? x : 0
                                        * (ProSparse; gated FFN only); 0: plain ReLU */
    /* the family: set by the loader from general.architecture */
    int norm;                          /* enum hc_norm */
    int pos;                           /* enum hc_pos */
    int rope_scaling;                  /* enum hc_rope_scaling */
    int ffn_kind;                      /* enum hc_ffn_kind */
    int residual;                      /* enum hc_residual */
} hc_hparams;

/* Vectors are f32 owned copies; a bias is NULL when the file has none. */
typedef struct {
    const float *attn_norm, *ffn_norm;           /* [n_embd]; ffn_norm = attn_norm when one norm is shared */
    const float *attn_norm_b, *ffn_norm_b;       /* LayerNorm biases [n_embd] */
    hc_weight attn_q, attn_k, attn_v, attn_output;   /* q/k/v may be row views of one attn_qkv */
    const float *attn_q_b, *attn_k_b, *attn_v_b, *attn_output_b;
    hc_weight ffn_gate, ffn_up;                   /* rows = n_ff; ffn_gate NONE for a sequential FFN */
    const float *ffn_gate_b, *ffn_up_b, *ffn_down_b;
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
    const float *output_norm_b;       /* [n_embd] or NULL */
    hc_weight pos_embd;               /* learned positions: rows = context_length; else NONE */
    const float *rope_factors;        /* rope_freqs.weight [head_dim/2] (rope scaling factors) or NULL */
    hc_layer *layers;                 /* [n_layer] */
    float *norms;                     /* storage of every norm vector */
    struct hc_gptq **gptq;            /* INT4-GPTQ weights loaded (owned), n_gptq of them */
    int n_gptq;
    void *weights_copy;               /* hc_model_copy_weights' copy (owned) or NULL */
    int n_chunked;                    /* of its matrices, those in chunks of 16 (HC_WEIGHT_X16) */
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
/* The window of a perplexity or profiling pass: ctx when given (non-zero),
 * else 512 tokens or the model's training context if shorter (llama.cpp's
 * perplexity default). */
int hc_window_len(const hc_hparams *hp, int ctx);
/* Where the weight matrices live (runtime/model_memory.c): the file mapping,
 * or a copy in 2 MiB pages (decode reads it up to 30 % faster: no TLB miss
 * every 4 KiB). AUTO copies when the kernel gives huge pages on advice and
 * the copy takes at most 80 % of MemAvailable; COPY always (llama.cpp's
 * --no-mmap); MAP never (--mmap). */
enum hc_weights_mem { HC_WEIGHTS_AUTO = 0, HC_WEIGHTS_MAP, HC_WEIGHTS_COPY };
/* Copy m's ggml matrices (with_ffn 0: all but the FFN's gate, up and down,
 * which the sparse FFN copies itself) out of the file mapping per mode, the
 * same bytes, each at its old address modulo 64; the copied pages of the
 * mapping are dropped. Where Q4_0's or Q8_0's products run on AVX-512, the
 * matrices of that type that products read (not ffn_down_t, read by AXPY)
 * are copied in chunks of 16 blocks (HC_WEIGHT_X16, runtime/x16.h): the same
 * blocks, the same bits, no permutes in their kernels. Bytes copied (0: none), or -1
 * + "PATH: ..." in err when COPY finds no memory. Before any context is made
 * and after any device took its copies (which read ggml's layout). */
int64_t hc_model_copy_weights(hc_model *m, int mode, int with_ffn, char *err, size_t errlen);
/* Drop the whole pages of [p, p + n) from this process when they lie in m's
 * read-only file mapping (clean file pages, faulted back from the page cache
 * if read again); anonymous memory is never touched (that would zero it). */
void hc_model_drop_mapped(const hc_model *m, const void *p, size_t n);
/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
uint64_t hc_mem_available(void);
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
 * (predictors read it). h is NULL, or (when the context has a hook)
 * [B][n_ff] to receive act(gate)·up of every neuron, 0 for a neuron the FFN
 * skips: the context then calls HC_HOOK_FFN_ACT with it. Scratch of its own
 * through hc_ctx_ffn_scratch (forward.h). */
typedef void (*hc_ffn_fn)(void *user, hc_ctx *ctx, int layer, const float *ffn_inp,
                          const float *x_norm, int B, float *out, float *h);

typedef struct {
    int n_ctx;       /* KV cache positions of one sequence; 0: min(context_length, 2048) */
    int n_kv_blocks; /* blocks of kv_block positions in the cache's pool, shared by the
                      * sequences of hc_eval_rows; 0: one sequence's n_ctx (hc_eval's) */
    int n_kv_warm;   /* the pool's blocks 0.. whose pages are made with it, as llama.cpp
                      * clears its cache at creation (the rest: when first written); 0:
                      * the whole cache of one sequence's pool, none of a larger one's */
    int kv_block;    /* positions per block: a power of two in [HC_KV_BLOCK_MIN,
                      * HC_KV_BLOCK_MAX]; 0: HC_KV_BLOCK */
    int n_batch;     /* most tokens per forward step; 0: min(n_ctx, 512) */
    uint32_t type_k, type_v;   /* the KV cache's k and v: GGML_TYPE_F32 (0, the default) or
                                * GGML_TYPE_F16 (llama.cpp's -ctk/-ctv f16: half the bytes,
                                * rounded to nearest even; on the CPU only) */
    int n_threads;   /* 0: 1 */
    hc_hook_fn hook;  void *hook_user;   /* NULL: no hooks */
    hc_ffn_fn ffn;    void *ffn_user;    /* NULL: the dense FFN (hc_ffn_dense) */
    /* NULL: everything on the CPU; else the layers and head it puts on a
     * device (place.h). A context with a hook ignores it (hooks read every
     * row on the host), and one with a placement runs hc_eval only: the
     * pieces below are the CPU's. */
    const struct hc_place *place;
} hc_ctx_params;

/* NULL + message in err (too large a context, out of memory). */
hc_ctx *hc_ctx_new(const hc_model *m, const hc_ctx_params *p, char *err, size_t errlen);
void hc_ctx_free(hc_ctx *ctx);
const hc_model *hc_ctx_model(const hc_ctx *ctx);
int hc_ctx_n_batch(const hc_ctx *ctx);
int hc_ctx_kv_block(const hc_ctx *ctx);   /* positions per KV block */
int hc_ctx_kv_bytes(const hc_ctx *ctx);   /* bytes of a k element and a v element of its cache */
int hc_ctx_on_device(const hc_ctx *ctx);  /* 1: layers or the head run on a device */
/* The context's threads, for a hook that wants to run work on them. */
hc_pool *hc_ctx_pool(hc_ctx *ctx);
/* Why the last hc_eval failed. */
const char *hc_ctx_error(const hc_ctx *ctx);

enum hc_logits { HC_LOGITS_NONE, HC_LOGITS_LAST, HC_LOGITS_ALL };
/* Evaluate tokens at positions pos0 .. pos0+n_tokens-1 (the cache must hold
 * 0 .. pos0-1), in batches of at most n_batch with causal attention.
 * logits: n_vocab floats (LAST) or n_tokens*n_vocab (ALL). LAST without a
 * hook runs the last layer for the last token only (the others leave their k
 * and v in the cache); its logits are the same bits. 0, or -1 with the
 * reason in hc_ctx_error (position past n_ctx, token id out of range, a
 * logit that is not finite: NaN or infinite weights). */
int hc_eval(hc_ctx *ctx, const int32_t *tokens, int n_tokens, int pos0, float *logits, int which);

/* Positions per block of the paged KV cache: by default vLLM's default
 * block size; a power of two (the kernels shift and mask), at least what
 * the CPU's attention computes side by side (cpu/attention.c, ATT_POS). */
#define HC_KV_BLOCK 16
#define HC_KV_BLOCK_MIN 4
#define HC_KV_BLOCK_MAX 1024
/* Blocks of `block` positions that hold n positions. */
static inline int hc_blocks_for(int n, int block) { return (n + block - 1) / block; }

/* The rows of one step over several sequences (runtime/scheduler.c builds
 * them): row b is position pos[b] of sequence seq[b], whose positions live
 * in the cache's blocks table[seq[b] * max_blocks + position / block].
 * Every position a row attends to (0..pos[b] of its sequence) is in the
 * cache or among the step's rows. */
typedef struct {
    int B;
    const int32_t *pos, *seq;   /* [B] */
    const int32_t *table;       /* [n_seq][max_blocks] block ids */
    int n_seq, max_blocks;
    int block;                  /* positions per block: the context's kv_block */
} hc_seq_rows;

/* One step of rows of several sequences (B <= n_batch; tokens valid, every
 * position below n_ctx, blocks below n_kv_blocks): the logits of the last
 * n_out rows into logits[n_out][n_vocab] (the others only leave their k and
 * v in the cache). Each row gets the bits it gets in hc_eval of its own
 * sequence, whatever runs beside it. 0; 1 when a device failed: the context
 * runs on the CPU from here on and the cache of every sequence is lost (the
 * caller recomputes them); -1 with the reason in hc_ctx_error (a logit that
 * is not finite). */
int hc_eval_rows(hc_ctx *ctx, const int32_t *tokens, const hc_seq_rows *rows, int n_out, float *logits);

/* Swap preemption (vLLM's): the k and v of every layer in the cache's
 * blocks ids[0..n) to host memory (out 1: n · hc_blocks_bytes of the
 * context's block size at host), or from there into the blocks ids (out 0;
 * they need not be the ones it came from), wherever each layer's cache
 * lives. 0; 1 when a device failed, as hc_eval_rows (the copy is lost with
 * every sequence's cache). */
int hc_ctx_kv_copy(hc_ctx *ctx, const int32_t *ids, int n, void *host, int out);

/* The pieces of hc_eval, for B <= n_batch rows (tokens must be valid), in
 * the order they run. */
void hc_embed(hc_ctx *ctx, const int32_t *tokens, int B, int pos0, float *x);   /* x[B][n_embd] */
void hc_layer_forward(hc_ctx *ctx, int layer, float *x, int B, int pos0);  /* in place */
/* The context's FFN of one layer (params.ffn, or the dense FFN) for rows at
 * positions pos0..: out[B][n_embd] = FFN(x_norm), then HC_HOOK_FFN_ACT. */
void hc_ffn_forward(hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B, int pos0, float *out);
void hc_output(hc_ctx *ctx, const float *x, int B, float *logits);         /* norm + classifier */

/* y[B][w->rows] = w · x[B][w->n], threads split over rows. */
void hc_ctx_matvec(hc_ctx *ctx, const hc_weight *w, const float *x, int B, float *y);

/* The dense FFN of a layer (the default when params.ffn is NULL), an
 * hc_ffn_fn without user: out = FFN(x_norm); h as for hc_ffn_fn. */
void hc_ffn_dense(hc_ctx *ctx, int layer, const float *x_norm, int B, float *out, float *h);

#endif
