/* The evaluation context's fields: only the runtime .c files that own a part of it
 * include this (forward.c builds it and runs the layers, dense.c the dense FFN,
 * matmul.c reads its pool and activation buffers, cpu/ is its CPU backend).
 * Everything else, replacement FFNs included, goes through model.h and
 * forward.h, so the context can change without them. */
#ifndef HC_CTX_INTERNAL_H
#define HC_CTX_INTERNAL_H

#include "backend.h"
#include "model.h"

/* Chunks of a product start at multiples of this many rows (listed rows for a
 * gathered product), so a kernel that handles rows in groups always sees the
 * same groups. */
#define ROW_UNIT 16

/* A backend's rows of the batch being evaluated, [n_batch] of each. */
typedef struct {
    hc_backend *be;
    hc_kv *kv;          /* the K and V of the layers this backend runs */
    hc_buf *buf;        /* one allocation holding the views below */
    hc_view x, xn, tmp, tmp2;   /* [n_embd] */
    hc_view q, att;             /* [n_head*head_dim] */
    hc_view k, v;               /* [n_head_kv*head_dim] */
    hc_view ffn[2];             /* [n_ff]: the FFN's scratch (hc_ctx_ffn_scratch on the CPU) */
    hc_view logits;             /* [n_batch][n_vocab] on a device; none on the CPU (the caller's memory) */
    hc_bvec rope_freq;          /* [head_dim/2] as this backend reads it */
    hc_buf *pinned;             /* a device's host memory for an FFN exchange: stage = x, xn, out */
    float *stage;               /* ([3][n_batch][n_embd]); NULL on the CPU */
} hc_rows;

enum { HC_ON_CPU = 0, HC_ON_DEV = 1 };

struct hc_ctx {
    const hc_model *model;
    hc_pool *pool;
    int n_ctx, n_batch;
    int n_kv_blocks, kv_block;  /* the KV cache's pool and block size (model.h, hc_ctx_params) */
    int n_kv_warm;              /* its blocks whose memory is made with it (hc_ctx_params) */
    uint32_t type_k, type_v;    /* its element types (hc_ctx_params) */
    hc_hook_fn hook;  void *hook_user;   /* from hc_ctx_params; NULL: none */
    hc_ffn_fn ffn;    void *ffn_user;    /* NULL: the dense FFN */
    hc_rows rows[2];            /* [HC_ON_CPU] always; [HC_ON_DEV] with a device (rows[1].be set) */
    hc_blayer *layers;          /* [n_layer] */
    hc_blayer head;             /* the output head: attn_norm(_b) = output_norm(_b), o = output */
    const char *dev_name;       /* the device, for the warning when it fails */
    int32_t *history;           /* [n_ctx]: the tokens evaluated, to rebuild the cache when a device fails */
    int32_t *table;             /* hc_eval's sequence's blocks: 0, 1, ... */
    int32_t *pos, *seq;         /* [n_batch]: hc_eval's rows (seq all 0) */
    hc_seq_rows one;            /* hc_eval's step, over the three above */
    const hc_seq_rows *step;    /* the step being evaluated (hooks read its positions) */
    float *rope_freq;           /* [head_dim/2] */
    float *h;                   /* [n_batch][n_ff] for HC_HOOK_FFN_ACT, with a hook only */
    void *acts, *acts2;         /* prepared activations, [n_batch] each */
    size_t act_stride;          /* bytes per prepared vector */
    hc_view ffn_share;          /* hc_ctx_ffn_device_share during an FFN's call */
    int ffn_share_left;         /* the FFN left its share there */
    void *arranged;             /* the product's activations arranged for its kernels (matmul.c) */
    size_t arranged_cap;        /* its bytes */
    char err[256];
};

/* dense.c: out[B][n_embd] = the dense FFN of xn on the rows' backend, or
 * (add, only without a down bias) out += it; H gets every neuron
 * (act(gate)·up) */
void hc_ffn_dense_on(hc_ctx *ctx, const hc_rows *R, const hc_blayer *ly, hc_view xn, int B, hc_view H, hc_view out,
                     int add);

#endif
