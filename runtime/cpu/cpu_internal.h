/* What the CPU backend's files share (runtime/cpu/). */
#ifndef HC_CPU_INTERNAL_H
#define HC_CPU_INTERNAL_H

#include <stdint.h>
#include "cpu.h"
#include "threads.h"

struct hc_buf {
    char *p;   /* NULL for the view of all host memory (hc_cpu_view) */
};

typedef struct {
    hc_backend be;
    hc_ctx *ctx;      /* its pool and activation buffers (matmul.h) */
    hc_pool *pool;
    const hc_seq_rows *rows;   /* the step's rows (batch) */
    float *sum;       /* an added product (hc_mm's add) before it is added; sum_n floats */
    size_t sum_n;
} hc_cpu;

static inline float *hc_cpu_host(hc_view v) { return (float *)((uintptr_t)v.buf->p + v.off); }

/* attention.c */
hc_kv *hc_cpu_kv_new(hc_backend *be, const hc_hparams *hp, int n_blocks, int n_warm, int block, int n_ctx,
                     const uint8_t *on,
                     uint32_t type_k, uint32_t type_v, char *err, size_t errlen);
void hc_cpu_kv_free(hc_backend *be, hc_kv *kv);
void hc_cpu_kv_store(hc_backend *be, hc_kv *kv, int layer, int B, hc_view k, hc_view v);
int hc_cpu_kv_copy(hc_backend *be, hc_kv *kv, int layer, const int32_t *ids, int n, void *host, int out, char *err,
                   size_t errlen);
void hc_cpu_attention(hc_backend *be, hc_kv *kv, int layer, const hc_hparams *hp, hc_view q, int row0, int n,
                      hc_view out);

#endif
