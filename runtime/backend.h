/* The compute steps of the forward pass, behind one table per device.
 *
 * forward.c says what to compute, in llama2.c's order; a backend says where
 * and how: runtime/cpu/ (the host's threads and kernels, always there) and
 * runtime/opencl/ (one OpenCL device). Each fills one hc_backend_ops table;
 * forward.c and the dense FFN call nothing else to compute. Every step is
 * one the forward pass ran before the table existed (docs/design/runtime.md,
 * "Backends"), so the CPU keeps its exact bits; a device stays within
 * tolerance of the CPU's scalar reference and gives the same result on
 * every run (no atomics, sums in a fixed order).
 *
 * Memory. A backend owns its buffers (hc_buf); a view is a byte offset in
 * one. Activations are f32 rows. Nothing moves between backends unless the
 * caller asks (read / write): forward.c moves the residual stream where a
 * layer runs, and the logits back.
 *
 * Errors. Compute steps return nothing: a backend that fails (a device lost,
 * out of memory) records the first failure and does nothing more until the
 * context drops it; sync and read report it (-1 and the line in err), and
 * the context then runs on the CPU (forward.c, "Device failures"). */
#ifndef HC_BACKEND_H
#define HC_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"

typedef struct hc_backend hc_backend;
typedef struct hc_backend_ops hc_backend_ops;
typedef struct hc_buf hc_buf;   /* memory a backend owns */
typedef struct hc_kv hc_kv;     /* a KV cache in a backend's memory */

/* Bytes at offset off of buf. */
typedef struct {
    hc_buf *buf;
    size_t off;
} hc_view;

static inline hc_view hc_view_at(hc_view v, size_t bytes) { return (hc_view){ v.buf, v.off + bytes }; }

/* A matrix as the backends read it: the host's (the CPU computes with it)
 * and a device's copy (from mat_new; NULL on the CPU). */
typedef struct {
    const hc_weight *host;
    void *dev;
} hc_bmat;
/* A vector (norm weights, a bias, the RoPE frequencies): n host floats
 * (NULL: absent, e.g. no bias) and a device's copy (vec_new). */
typedef struct {
    const float *host;
    int n;
    void *dev;
} hc_bvec;

/* One product of matmul: for input rows b in [b0, B),
 *   y[(b - b0) * y_stride + r] = row r of w · x_b,   r < w->rows,
 * or, transposed (PowerInfer's ffn_down_t: a row per input),
 *   y[(b - b0) * y_stride + c] = Σ_i x_b[i] · row i of w,   c < w->n.
 * y_stride in floats. add: y += the product instead (the residual stream,
 * the bits of the product added to y after it; a device then needs no
 * launch of its own for the add). */
typedef struct {
    const hc_bmat *w;
    int b0, transposed;
    hc_view y;
    size_t y_stride;
    int add;
} hc_mm;

/* One kernel's launches timed on the device (kernel_times). */
typedef struct {
    char name[40];
    uint64_t launches;
    double seconds;
} hc_kernel_time;

/* Rows that rope rotates: n rows of dim floats (whole heads) at v, row i at
 * the position of the batch's row row0 + i. */
typedef struct {
    hc_view v;
    int dim, n, row0;
} hc_rope_rows;

/* A layer as its backends read it: every weight's host copy, and a device's
 * copy of those that run there (place.h). */
typedef struct {
    int dev;        /* 1: the layer's attention, norms and residual run on the device */
    int ffn_dev;    /* 1: its dense FFN runs on the device too (else on the CPU, by the context's FFN) */
    hc_bvec attn_norm, attn_norm_b, ffn_norm, ffn_norm_b;
    hc_bvec q_b, k_b, v_b, o_b, gate_b, up_b, down_b;
    hc_bmat q, k, v, o, gate, up, down;   /* down: ffn_down, or ffn_down_t (down_t set) */
    int down_t;
} hc_blayer;

struct hc_backend_ops {
    const char *name;
    void (*free)(hc_backend *be);
    /* memory: buf_new NULL when out of memory (err says so) */
    hc_buf *(*buf_new)(hc_backend *be, size_t bytes, char *err, size_t errlen);
    void (*buf_free)(hc_backend *be, hc_buf *b);
    void (*write)(hc_backend *be, hc_view dst, const void *src, size_t bytes);
    /* write, queued without waiting: src (the exchange's pinned memory)
     * stays untouched until the backend's next read or sync, by which the
     * in-order queue has done it. NULL on the CPU. */
    void (*send)(hc_backend *be, hc_view dst, const void *src, size_t bytes);
    /* returns when dst holds the bytes: 0, or -1 + err (the first failure
     * since the backend was made, this read's or an earlier step's) */
    int (*read)(hc_backend *be, hc_view src, void *dst, size_t bytes, char *err, size_t errlen);
    /* the floats of v when they are host memory (the CPU), else NULL */
    float *(*host)(hc_view v);
    /* host memory for the exchanges with a device, pinned where the device
     * has such (its transfers then run at the bus's speed): a buffer (freed
     * by buf_free) whose floats pinned_host gives; NULL + err when out of
     * memory. NULL on the CPU. */
    hc_buf *(*pinned_new)(hc_backend *be, size_t bytes, char *err, size_t errlen);
    float *(*pinned_host)(hc_buf *b);
    /* the backend's copy of a weight: NULL when its kernels do not take w
     * (err names the type) or out of memory; CPU: not needed (NULL) */
    void *(*mat_new)(hc_backend *be, const hc_weight *w, char *err, size_t errlen);
    void *(*vec_new)(hc_backend *be, const float *v, int n, char *err, size_t errlen);
    void (*dev_free)(hc_backend *be, void *dev);

    /* The steps, on B rows. x[B][w->n] in (a transposed item's rows are
     * w->rows long), items sharing that input (q, k and v; gate and up)
     * computed from it together. A device reads a weight or vector through
     * its copy (dev): one without it is the caller's error. */
    void (*matmul)(hc_backend *be, hc_view x, int B, const hc_mm *items, int n_items);
    /* o[B][n_embd] = hp->norm of x with w (+ b): RMSNorm or LayerNorm, hp->rms_eps */
    void (*norm)(hc_backend *be, const hc_hparams *hp, const hc_bvec *w, const hc_bvec *b, hc_view x, hc_view o,
                 int B);
    /* rotate the rows of each of the count (1 or 2: k and q, one launch on
     * a device) hc_rope_rows per hp->pos (adjacent pairs, NeoX halves;
     * learned positions: nothing), freq[head_dim/2] */
    void (*rope)(hc_backend *be, const hc_hparams *hp, const hc_bvec *freq, const hc_rope_rows *r, int count);
    /* y[B][n] += bias (nothing when bias->host is NULL) */
    void (*add_bias)(hc_backend *be, hc_view y, const hc_bvec *bias, int B, int n);
    /* x[i] += a[i] (b.buf NULL), or x[i] += a[i] + b[i] (the parallel residual), i < n */
    void (*add)(hc_backend *be, hc_view x, hc_view a, hc_view b, size_t n);
    /* The FFN kind's neuron, in place of g ([B][hp->n_ff]): gate and up biases
     * added, then gated act(g)·u (FATReLU below hp->act_threshold), symmetric
     * act(g)·act(u), or sequential act(g + up_b) (g is up·x, u unused). */
    void (*ffn_act)(hc_backend *be, const hc_hparams *hp, const hc_bvec *gate_b, const hc_bvec *up_b, hc_view g,
                    hc_view u, int B);
    /* Optional (NULL: none): H[n_ff] = one input row's FFN neurons, the
     * kind's products of xn (gate and up; up alone for the sequential kind)
     * and ffn_act, in one step with the bits of those three; -1 where the
     * layer's weights do not allow it (the caller then runs them). */
    int (*ffn_neurons)(hc_backend *be, const hc_hparams *hp, const hc_blayer *ly, hc_view xn, hc_view H);

    /* The rows of the steps that follow, until the next call (the caller's
     * arrays stay valid until then): row b of every step is token position
     * rows->pos[b] of sequence rows->seq[b] (model.h, hc_seq_rows). rope,
     * kv_store and attention read the positions and block tables from it. */
    void (*batch)(hc_backend *be, const hc_seq_rows *rows);

    /* The KV cache, paged (vLLM's): a pool of n_blocks blocks of `block`
     * positions (a power of two), each a k and a v row of
     * n_head_kv·head_dim elements, for the layers with on[layer] set (on
     * NULL: every layer). A sequence's position p lives in slot p % block
     * of block table[p / block] of its block table (the rows' block is
     * this one); a sequence holds at most n_ctx positions. type_k, type_v:
     * GGML_TYPE_F32, or GGML_TYPE_F16 (stored rounded to nearest even,
     * widened exactly when read) where the backend holds it; else NULL and
     * err names the type. Blocks 0..n_warm-1 get their memory now (the
     * rest when first written, where a backend's memory is made lazily). */
    hc_kv *(*kv_new)(hc_backend *be, const hc_hparams *hp, int n_blocks, int n_warm, int block, int n_ctx,
                     const uint8_t *on, uint32_t type_k, uint32_t type_v, char *err, size_t errlen);
    void (*kv_free)(hc_backend *be, hc_kv *kv);
    /* store k[B][kv_dim] and v[B][kv_dim] of the batch's rows 0..B-1 of layer */
    void (*kv_store)(hc_backend *be, hc_kv *kv, int layer, int B, hc_view k, hc_view v);
    /* Swapping (vLLM's swap preemption): layer's k and v of the n blocks
     * ids[] to host memory (out 1) or from it into them (out 0), host
     * holding for each block in turn its k rows, then its v rows (block ·
     * kv_dim elements each, in the cache's types). After the steps queued
     * before; done on return. 0, or -1 + err as read. */
    int (*kv_copy)(hc_backend *be, hc_kv *kv, int layer, const int32_t *ids, int n, void *host, int out, char *err,
                   size_t errlen);
    /* out[n][n_head·head_dim] = causal grouped-query attention of q[n][...],
     * q's row i being the batch's row row0 + i: over positions 0..pos of its
     * sequence in layer: scores q·k / sqrt(head_dim), softmax, the mix of v */
    void (*attention)(hc_backend *be, hc_kv *kv, int layer, const hc_hparams *hp, hc_view q, int row0, int n,
                      hc_view out);
    /* wait for every step queued: 0, or -1 + err as read */
    int (*sync)(hc_backend *be, char *err, size_t errlen);
    /* start the steps queued so far, so that a device works while the host
     * queues the next layer's (one flush per layer); NULL where every step
     * runs when it is called (the CPU) */
    void (*flush)(hc_backend *be);
    /* the reads and writes so far: how many, their bytes and their time on
     * the device, and the kernels launched (each launch costs the device a
     * gap of microseconds: what fusing steps would save); 0, or -1 when the
     * transfers are not timed (a device opened without profiling:
     * hc_cl_open). NULL on the CPU. */
    int (*transfers)(hc_backend *be, uint64_t *count, uint64_t *bytes, double *seconds, uint64_t *launches);
    /* Optional (NULL: none): each kernel's launches so far and their time on
     * the device, the most costly first, up to max of them into t (*count),
     * and *idle the device's time between kernels (from the first kernel
     * after a wait to the wait: launch gaps, not the host's time between
     * steps); -1 when not timed (a device opened without profiling). */
    int (*kernel_times)(hc_backend *be, hc_kernel_time *t, int max, int *count, double *idle);
};

struct hc_backend {
    const hc_backend_ops *ops;
};

#endif
