/* The OpenCL backend's products against the CPU's scalar reference: a
 * rows x n matrix (default 4096 x 4096) of each type times one input row
 * (decode), on the device a run would use (HC_OPENCL_DEVICE) and with
 * hc_weight_matvec(HC_ISA_SCALAR) on one thread. Usage:
 *   bench_clops [rows n reps [B]]
 * Prints per type: milliseconds per product on each (the fastest of reps:
 * the machine may be shared), and device speed /
 * scalar speed (the bar for PoCL: 0.7 or more). B > 1 times the
 * device's token tiles too (per input row).
 *   bench_clops attention [heads head_dim positions reps]
 * times one decode step's attention (default 32 x 128 over 2048 positions,
 * one KV head per head) on the device against a plain C loop on one thread
 * (forward.c's formulas: dots, softmax, mix). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "ggml_types.h"
#include "kernels.h"
#include "opencl.h"
#include "quants.h"
#include "weight.h"

static uint64_t rng = 5;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / 8388608.0) - 1.0f;
}

static int attention_bench(int argc, char **argv)
{
    int H = argc > 4 ? atoi(argv[2]) : 32, hd = argc > 4 ? atoi(argv[3]) : 128, npos = argc > 4 ? atoi(argv[4]) : 2048;
    int reps = argc > 5 ? atoi(argv[5]) : 10;
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, err, sizeof err);
    hc_backend *be = cl ? hc_cl_backend_new(cl, err, sizeof err) : NULL;
    if (!be || H < 1 || hd < 2 || npos < 1 || reps < 1) {
        fprintf(stderr, "bench_clops: %s\n", be ? "bad arguments" : err);
        return 1;
    }
    const hc_backend_ops *o = be->ops;
    hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
    printf("%s\nattention: %d heads x %d, %d positions, %d reps\n", line, H, hd, npos, reps);
    size_t dim = (size_t)H * hd, kvn = dim * (size_t)npos;
    float *q = malloc(sizeof(float) * dim), *k = malloc(sizeof(float) * kvn), *v = malloc(sizeof(float) * kvn);
    float *out = malloc(sizeof(float) * dim), *sc = malloc(sizeof(float) * (size_t)npos);
    for (size_t i = 0; i < dim; i++) q[i] = frand();
    for (size_t i = 0; i < kvn; i++) { k[i] = frand(); v[i] = frand(); }
    double cpu = 1e30, dev = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = hc_now();
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)h * hd;
            float mx = -1e30f, sum = 0.0f;
            for (int p = 0; p < npos; p++) {
                float s = 0.0f;
                for (int d = 0; d < hd; d++) s += qh[d] * k[(size_t)p * dim + (size_t)h * hd + d];
                sc[p] = s / sqrtf((float)hd);
                if (sc[p] > mx) mx = sc[p];
            }
            for (int p = 0; p < npos; p++) { sc[p] = expf(sc[p] - mx); sum += sc[p]; }
            for (int p = 0; p < npos; p++) sc[p] /= sum;
            float *o = out + (size_t)h * hd;
            memset(o, 0, sizeof(float) * (size_t)hd);
            for (int p = 0; p < npos; p++)
                for (int d = 0; d < hd; d++) o[d] += sc[p] * v[(size_t)p * dim + (size_t)h * hd + d];
        }
        if (hc_now() - t0 < cpu) cpu = hc_now() - t0;
    }
    hc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_head = hp.n_head_kv = H;
    hp.head_dim = hd;
    hp.n_layer = 1;
    int n_blocks = (npos + HC_KV_BLOCK - 1) / HC_KV_BLOCK;
    hc_kv *kv = o->kv_new(be, &hp, n_blocks, npos, NULL, err, sizeof err);
    /* one sequence: its positions 0..npos-1 in blocks 0.. */
    int32_t *pos = malloc(sizeof *pos * (size_t)npos), *seq = calloc((size_t)npos, sizeof *seq);
    int32_t *table = malloc(sizeof *table * (size_t)n_blocks);
    if (!pos || !seq || !table) { fprintf(stderr, "bench_clops: out of memory\n"); return 1; }
    for (int p = 0; p < npos; p++) pos[p] = p;
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    hc_buf *bq = o->buf_new(be, sizeof(float) * dim, err, sizeof err), *bo = o->buf_new(be, sizeof(float) * dim, err, sizeof err);
    hc_buf *bk = o->buf_new(be, sizeof(float) * kvn, err, sizeof err), *bv = o->buf_new(be, sizeof(float) * kvn, err, sizeof err);
    if (!kv || !bq || !bo || !bk || !bv) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
    o->write(be, (hc_view){ bq, 0 }, q, sizeof(float) * dim);
    o->write(be, (hc_view){ bk, 0 }, k, sizeof(float) * kvn);
    o->write(be, (hc_view){ bv, 0 }, v, sizeof(float) * kvn);
    o->batch(be, &(hc_seq_rows){ npos, pos, seq, table, 1, n_blocks });
    o->kv_store(be, kv, 0, npos, (hc_view){ bk, 0 }, (hc_view){ bv, 0 });
    o->batch(be, &(hc_seq_rows){ 1, pos + npos - 1, seq, table, 1, n_blocks });
    for (int r = 0; r <= reps; r++) {
        double t0 = hc_now();
        o->attention(be, kv, 0, &hp, (hc_view){ bq, 0 }, 0, 1, (hc_view){ bo, 0 });
        if (o->sync(be, err, sizeof err)) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
        if (r && hc_now() - t0 < dev) dev = hc_now() - t0;   /* r = 0: warm-up */
    }
    printf("attention: scalar %8.3f ms  device %8.3f ms  device/scalar speed %.2f\n", cpu * 1e3, dev * 1e3, cpu / dev);
    o->kv_free(be, kv);
    hc_buf *bs[] = { bq, bo, bk, bv };
    for (int i = 0; i < 4; i++) o->buf_free(be, bs[i]);
    o->free(be);
    hc_cl_free(cl);
    free(q); free(k); free(v); free(out); free(sc); free(pos); free(seq); free(table);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "attention")) return attention_bench(argc, argv);
    int rows = argc > 3 ? atoi(argv[1]) : 4096, n = argc > 3 ? atoi(argv[2]) : 4096;
    int reps = argc > 3 ? atoi(argv[3]) : 20, B = argc > 4 ? atoi(argv[4]) : 1;
    if (rows < 1 || n < 32 || n % 32 || reps < 1 || B < 1) {
        fprintf(stderr, "bench_clops: usage: bench_clops [rows n reps [B]] (n a multiple of 32)\n");
        return 1;
    }
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, err, sizeof err);
    hc_backend *be = cl ? hc_cl_backend_new(cl, err, sizeof err) : NULL;
    if (!be) {
        fprintf(stderr, "bench_clops: %s\n", err);
        hc_cl_free(cl);
        return 1;
    }
    const hc_backend_ops *o = be->ops;
    hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
    printf("%s\n%d x %d, B %d, %d reps\n", line, rows, n, B, reps);
    static const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    float *f = malloc(sizeof(float) * (size_t)n), *x = malloc(sizeof(float) * (size_t)n * B);
    float *y = malloc(sizeof(float) * (size_t)rows * B);
    for (size_t i = 0; i < (size_t)n * B; i++) x[i] = frand();
    hc_buf *bx = o->buf_new(be, sizeof(float) * (size_t)n * B, err, sizeof err);
    hc_buf *by = o->buf_new(be, sizeof(float) * (size_t)rows * B, err, sizeof err);
    if (!bx || !by) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
    o->write(be, (hc_view){ bx, 0 }, x, sizeof(float) * (size_t)n * B);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        size_t rb = ggml_row_size(types[t], n);
        char *d = malloc(rb * (size_t)rows);
        for (int r = 0; r < rows; r++) {
            char *row = d + rb * (size_t)r;
            for (int i = 0; i < n; i++) f[i] = frand();
            switch (types[t]) {
            case GGML_TYPE_F32: memcpy(row, f, rb); break;
            case GGML_TYPE_F16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_fp16(f[i]); break;
            case GGML_TYPE_BF16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_bf16(f[i]); break;
            case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(f, (block_q8_0 *)row, n); break;
            default: quantize_row_q4_0_ref(f, (block_q4_0 *)row, n); break;
            }
        }
        hc_weight w = { HC_WEIGHT_GGML, types[t], d, n, rows, NULL };
        /* the CPU's scalar reference, one thread: prepare x, then the rows */
        void *act = malloc(hc_weight_act_bytes(&w) * (size_t)B);
        double cpu = 1e30, dev = 1e30;
        for (int k = 0; k < reps; k++) {
            double t0 = hc_now();
            for (int b = 0; b < B; b++)
                hc_weight_prepare(&w, HC_ISA_SCALAR, x + (size_t)b * n, (char *)act + hc_weight_act_bytes(&w) * b);
            hc_weight_matvec(&w, HC_ISA_SCALAR, 0, rows, act, hc_weight_act_bytes(&w), B, y, (size_t)rows);
            if (hc_now() - t0 < cpu) cpu = hc_now() - t0;
        }
        hc_bmat m = { &w, o->mat_new(be, &w, err, sizeof err) };
        if (!m.dev) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
        hc_mm it = { &m, 0, 0, { by, 0 }, (size_t)rows };
        o->matmul(be, (hc_view){ bx, 0 }, B, &it, 1);   /* warm-up */
        if (o->sync(be, err, sizeof err)) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
        for (int k = 0; k < reps; k++) {
            double t0 = hc_now();
            o->matmul(be, (hc_view){ bx, 0 }, B, &it, 1);
            if (o->sync(be, err, sizeof err)) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
            if (hc_now() - t0 < dev) dev = hc_now() - t0;
        }
        printf("%-5s scalar %8.3f ms  device %8.3f ms  device/scalar speed %.2f  (device %.1f GB/s)\n",
               ggml_type_name(types[t]), cpu * 1e3, dev * 1e3, cpu / dev, (double)hc_weight_bytes(&w) / dev / 1e9);
        o->dev_free(be, m.dev);
        free(act);
        free(d);
    }
    o->buf_free(be, bx);
    o->buf_free(be, by);
    o->free(be);
    hc_cl_free(cl);
    free(f);
    free(x);
    free(y);
    return 0;
}
