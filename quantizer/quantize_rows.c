/* Row conversion between tensor types, split over threads by whole rows so
 * the bytes never depend on the thread count. Sources other than F32 are
 * widened to F32 first, as llama-quantize does. The SIMD level is the
 * runtime's instruction set ($HC_KERNELS), so one variable picks both. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "kernels.h"
#include "quantize.h"
#include "quants.h"

static int is_source(uint32_t t)
{
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 ||
           t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1;
}

static int is_target(uint32_t t)
{
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 ||
           t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0;
}

int hc_can_convert(uint32_t src_type, uint32_t dst_type)
{
    return is_source(src_type) && is_target(dst_type);
}

/* One row to F32: src itself when it is F32, else widened into tmp. */
static const float *widen(uint32_t type, const void *src, float *tmp, int64_t n, int level)
{
    switch (type) {
    case GGML_TYPE_F32:  return src;
    case GGML_TYPE_F16:  fp16_row_to_f32_at(src, tmp, n, level); break;
    case GGML_TYPE_BF16: for (int64_t j = 0; j < n; j++) tmp[j] = bf16_to_fp32(((const uint16_t *)src)[j]); break;
    case GGML_TYPE_Q8_0: dequantize_row_q8_0(src, tmp, n); break;
    case GGML_TYPE_Q4_0: dequantize_row_q4_0(src, tmp, n); break;
    case GGML_TYPE_Q4_1: dequantize_row_q4_1(src, tmp, n); break;
    }
    return tmp;
}

static void narrow(uint32_t type, const float *x, void *dst, int64_t n, int level)
{
    switch (type) {
    case GGML_TYPE_F32:  memcpy(dst, x, (size_t)n * sizeof *x); break;
    case GGML_TYPE_F16:  for (int64_t j = 0; j < n; j++) ((uint16_t *)dst)[j] = fp32_to_fp16(x[j]); break;
    case GGML_TYPE_BF16: for (int64_t j = 0; j < n; j++) ((uint16_t *)dst)[j] = fp32_to_bf16(x[j]); break;
    case GGML_TYPE_Q8_0: quantize_row_q8_0_at(x, dst, n, level); break;
    case GGML_TYPE_Q4_0: quantize_row_q4_0_at(x, dst, n, level); break;
    }
}

typedef struct {
    uint32_t src_type, dst_type;
    const uint8_t *src;
    uint8_t *dst;
    int64_t row0, row1, n;
    int level;   /* HC_SIMD_* */
} job;

static void *run_job(void *arg)
{
    const job *j = arg;
    const size_t src_row = ggml_row_size(j->src_type, j->n), dst_row = ggml_row_size(j->dst_type, j->n);
    float *tmp = j->src_type == GGML_TYPE_F32 ? NULL : malloc((size_t)j->n * sizeof *tmp);
    if (j->src_type != GGML_TYPE_F32 && !tmp) hc_die("out of memory for a row of %lld floats", (long long)j->n);
    for (int64_t r = j->row0; r < j->row1; r++)
        narrow(j->dst_type, widen(j->src_type, j->src + (size_t)r * src_row, tmp, j->n, j->level),
               j->dst + (size_t)r * dst_row, j->n, j->level);
    free(tmp);
    return NULL;
}

void hc_convert_rows(uint32_t src_type, const void *src, uint32_t dst_type, void *dst,
                     int64_t nrows, int64_t n, int nthreads)
{
    enum { MAX_THREADS = 256 };
    job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
    if (nthreads > nrows) nthreads = (int)nrows;
    if (nthreads < 1) nthreads = 1;
    int started[MAX_THREADS];
    const int isa = hc_isa_top();
    const int level = isa == HC_ISA_AVX512 ? HC_SIMD_AVX512 : isa == HC_ISA_AVX2 ? HC_SIMD_AVX2 : HC_SIMD_SCALAR;
    for (int i = 0; i < nthreads; i++) {
        jobs[i] = (job){ src_type, dst_type, src, dst, nrows * i / nthreads, nrows * (i + 1) / nthreads, n, level };
        /* the caller takes the last share, and any share a thread failed to start for */
        started[i] = i < nthreads - 1 && pthread_create(&tid[i], NULL, run_job, &jobs[i]) == 0;
        if (!started[i])
            run_job(&jobs[i]);
    }
    for (int i = 0; i < nthreads; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
}

int64_t hc_first_nonfinite(uint32_t type, const void *data, size_t nbytes)
{
    const uint8_t *p = data;
    switch (type) {
    case GGML_TYPE_F32:
        for (size_t i = 0; i < nbytes / 4; i++) {
            float v;
            memcpy(&v, p + 4 * i, 4);
            if (!isfinite(v)) return (int64_t)i;
        }
        return -1;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: {
        const uint16_t exp = type == GGML_TYPE_F16 ? 0x7c00 : 0x7f80;
        for (size_t i = 0; i < nbytes / 2; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            if ((h & exp) == exp) return (int64_t)i;
        }
        return -1;
    }
    default: {
        /* block types start with their fp16 scale */
        const size_t bs = ggml_type_size(type);
        for (size_t i = 0; bs && i < nbytes / bs; i++) {
            uint16_t h;
            memcpy(&h, p + i * bs, 2);
            if ((h & 0x7c00) == 0x7c00) return (int64_t)i;
        }
        return -1;
    }
    }
}
