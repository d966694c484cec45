/* The evaluation context's fields: only the runtime .c files that own a part of it
 * include this (forward.c builds it, the threaded products of matmul.c read its
 * pool and activation buffers). Everything else, replacement FFNs included, goes
 * through model.h and forward.h, so the context can change without them. */
#ifndef HC_CTX_INTERNAL_H
#define HC_CTX_INTERNAL_H

#include "model.h"

/* Chunks of a product start at multiples of this many rows (listed rows for a
 * gathered product), so a kernel that handles rows in groups always sees the
 * same groups. */
#define ROW_UNIT 16

struct hc_ctx {
    const hc_model *model;
    hc_pool *pool;
    int n_ctx, n_batch;
    hc_hook_fn hook;  void *hook_user;   /* from hc_ctx_params; NULL: none */
    hc_ffn_fn ffn;    void *ffn_user;    /* NULL: the dense FFN */
    float *k_cache, *v_cache;   /* [n_layer][n_ctx][n_head_kv*head_dim] */
    float *x, *xn, *tmp, *tmp2; /* [n_batch][n_embd] */
    float *q, *att;             /* [n_batch][n_head*head_dim] */
    float *ffn_buf[2];          /* [n_batch][n_ff]: the FFN's scratch (hc_ctx_ffn_scratch) */
    float *h;                   /* [n_batch][n_ff] for HC_HOOK_FFN_ACT, with a hook only */
    float *scores;              /* [n_threads][ATT_TOKENS][n_ctx] (forward.c) */
    float *rope_freq;           /* [head_dim/2] */
    void *acts, *acts2;         /* prepared activations, [n_batch] each */
    size_t act_stride;          /* bytes per prepared vector */
    void *arranged;             /* the product's activations arranged for its kernels (matmul.c) */
    size_t arranged_cap;        /* its bytes */
    char err[256];
};

#endif
