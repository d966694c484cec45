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
 * (forward.c's formulas: dots, softmax, mix).
 *   bench_clops table [n n_ff positions reps]
 * the device's kernel table (scripts/bench-gpu.sh): its copy bandwidth, then
 * each kernel on a layer's shapes (default 4096 x 11008, attention of 32
 * heads x 128 over 2048 positions) in GB/s of the bytes it must read and
 * their share of the copy bandwidth: the products of decode (mv), of a
 * 64-token prompt (mm: the matrix read once), the transposed product
 * (ffn_down_t), the hot rows (gate/up, then down for the non-zero h of a
 * ReLU), attention, and one small step's launch (add of n floats, in µs,
 * alone with its wait and queued). Each kernel's time is one of 8 queued back
 * to back with one wait, as a decode queues them; the hot rows', one step with
 * its wait (a hybrid layer's exchange).
 *   bench_clops kernels [DIR]
 * what the device made of each kernel (private bytes an item: on a GPU,
 * registers spilled and arrays kept in memory; local bytes a group; the
 * largest group), and with DIR the programs' binaries there (PTX on NVIDIA:
 * PTX=DIR/backend.bin sh scripts/sass-loops.sh reads the driver's own code).
 * With HC_CL_SOURCE=FILE every mode builds FILE, a variant of
 * runtime/opencl/kernels/backend.cl (the same kernels and arguments), in its
 * place: a GPU session weighs a change without a rebuild (scripts/bench-gpu.sh,
 * VARIANTS). */
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

static const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
enum { N_TYPES = sizeof types / sizeof *types };

/* rows x n random weights of a ggml type, in *data (malloc'ed). */
static hc_weight random_weight(uint32_t type, int rows, int n, char **data)
{
    size_t rb = ggml_row_size(type, n);
    char *d = malloc(rb * (size_t)rows);
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < rows; r++) {
        char *row = d + rb * (size_t)r;
        for (int i = 0; i < n; i++) f[i] = frand();
        switch (type) {
        case GGML_TYPE_F32: memcpy(row, f, rb); break;
        case GGML_TYPE_F16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_fp16(f[i]); break;
        case GGML_TYPE_BF16: for (int i = 0; i < n; i++) ((uint16_t *)row)[i] = fp32_to_bf16(f[i]); break;
        case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(f, (block_q8_0 *)row, n); break;
        default: quantize_row_q4_0_ref(f, (block_q4_0 *)row, n); break;
        }
    }
    free(f);
    *data = d;
    return (hc_weight){ HC_WEIGHT_GGML, type, d, n, rows, NULL };
}

/* One sequence's cache of npos positions in blocks 0.. of layer 0, k and v
 * of type (f32 or f16), for a decode step's attention: k[npos] and v[npos] rows stored, then the
 * backend's batch left at *rows, the row of position npos - 1. *tables holds
 * what *rows points to: both stay until the last step (free *tables then).
 * NULL + err. */
static hc_kv *decode_cache(hc_backend *be, const hc_hparams *hp, int npos, uint32_t type, hc_view k, hc_view v,
                           hc_seq_rows *rows, int32_t **tables, char *err, size_t errlen)
{
    const hc_backend_ops *o = be->ops;
    int n_blocks = hc_blocks_for(npos, HC_KV_BLOCK);
    int32_t *t = malloc(sizeof *t * (2 * (size_t)npos + (size_t)n_blocks));   /* positions, sequences, table */
    hc_kv *kv = t ? o->kv_new(be, hp, n_blocks, n_blocks, HC_KV_BLOCK, npos, NULL, type, type, err, errlen) : NULL;
    if (!kv) {
        if (!t) snprintf(err, errlen, "out of memory");
        free(t);
        return NULL;
    }
    int32_t *pos = t, *seq = t + npos, *table = seq + npos;
    for (int p = 0; p < npos; p++) pos[p] = p, seq[p] = 0;
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    *rows = (hc_seq_rows){ npos, pos, seq, table, 1, n_blocks, HC_KV_BLOCK };
    o->batch(be, rows);
    o->kv_store(be, kv, 0, npos, k, v);
    *rows = (hc_seq_rows){ 1, pos + npos - 1, seq, table, 1, n_blocks, HC_KV_BLOCK };
    o->batch(be, rows);
    *tables = t;
    return kv;
}

/* The OpenCL backend on cl, of HC_CL_SOURCE's kernels when it names a file */
static hc_backend *open_backend(hc_cl *cl, char *err, size_t errlen)
{
    const char *path = getenv("HC_CL_SOURCE");
    if (!cl) return NULL;
    if (!path || !*path) return hc_cl_backend_new(cl, err, errlen);
    char *src = hc_read_file(path, NULL, err, errlen);
    hc_backend *be = src ? hc_cl_backend_new_with(cl, src, err, errlen) : NULL;
    free(src);
    if (be) printf("kernels: %s (HC_CL_SOURCE)\n", path);
    return be;
}

static int attention_bench(int argc, char **argv)
{
    int H = argc > 4 ? atoi(argv[2]) : 32, hd = argc > 4 ? atoi(argv[3]) : 128, npos = argc > 4 ? atoi(argv[4]) : 2048;
    int reps = argc > 5 ? atoi(argv[5]) : 10;
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    hc_backend *be = open_backend(cl, err, sizeof err);
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
    hc_buf *bq = o->buf_new(be, sizeof(float) * dim, err, sizeof err), *bo = o->buf_new(be, sizeof(float) * dim, err, sizeof err);
    hc_buf *bk = o->buf_new(be, sizeof(float) * kvn, err, sizeof err), *bv = o->buf_new(be, sizeof(float) * kvn, err, sizeof err);
    if (!bq || !bo || !bk || !bv) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
    o->write(be, (hc_view){ bq, 0 }, q, sizeof(float) * dim);
    o->write(be, (hc_view){ bk, 0 }, k, sizeof(float) * kvn);
    o->write(be, (hc_view){ bv, 0 }, v, sizeof(float) * kvn);
    int32_t *tables;
    hc_seq_rows rows;
    hc_kv *kv = decode_cache(be, &hp, npos, GGML_TYPE_F32, (hc_view){ bk, 0 }, (hc_view){ bv, 0 }, &rows, &tables, err,
                             sizeof err);
    if (!kv) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
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
    free(q); free(k); free(v); free(out); free(sc); free(tables);
    return 0;
}

/* ------------------------------------------------------------ the kernel table */

enum { K_MATMUL, K_HOT, K_ATTN, K_ADD };
typedef struct {
    int kind;
    hc_view x, y;        /* K_MATMUL: input and output; K_ATTN: q and out; K_ADD: x += y */
    int B;               /* input rows; K_ADD: floats */
    hc_mm it;
    hc_cl_layer *L;      /* K_HOT: the rows, prepared input xp, mask; results y, h */
    const void *xp;
    const uint8_t *mask;
    float *hy, *hh;
    hc_kv *kv;           /* K_ATTN: the cache (decode_cache) and its shape */
    const hc_hparams *hp;
} step;

/* Queue s `count` times (K_HOT: once, it waits for its results itself),
 * then wait: 0, or -1 + err. */
static int run_steps(hc_backend *be, const step *s, int count, char *err, size_t errlen)
{
    const hc_backend_ops *o = be->ops;
    double dev_s = 0;
    for (int i = 0; i < count; i++) {
        switch (s->kind) {
        case K_MATMUL: o->matmul(be, s->x, s->B, &s->it, 1); break;
        case K_HOT:
            return hc_cl_layer_start(s->L, s->xp, 0, 1, s->mask, HC_ACT_RELU, 0.0f, err, errlen) ||
                   hc_cl_layer_finish(s->L, s->hy, s->hh, &dev_s, err, errlen) ? -1 : 0;
        case K_ATTN: o->attention(be, s->kv, 0, s->hp, s->x, 0, 1, s->y); break;
        default: o->add(be, s->x, s->y, (hc_view){ NULL, 0 }, (size_t)s->B); break;
        }
    }
    return o->sync(be, err, errlen);
}

/* One line of the table: the fastest of reps runs of s (after one untimed),
 * each QUEUED steps queued back to back and one wait, as a decode queues
 * them (the hot rows: one step and its results, as a hybrid layer), per
 * step, reading `bytes`; against the copy bandwidth (bytes/s). Without
 * bytes, µs: of one step and its wait (count 1) or of each of QUEUED. */
enum { QUEUED = 8 };
static int table_row(hc_backend *be, const char *what, const step *s, double bytes, int reps, double copy, int count)
{
    char err[512];
    double sec = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = hc_now();
        if (run_steps(be, s, count, err, sizeof err)) {
            fprintf(stderr, "bench_clops: %s: %s\n", what, err);
            return -1;
        }
        if (r && hc_now() - t0 < sec) sec = hc_now() - t0;
    }
    sec /= s->kind == K_HOT ? 1 : count;
    if (bytes > 0)
        printf("%-36s %9.1f MiB %9.3f ms %8.1f GB/s %6.1f%%\n", what, bytes / 1048576.0, sec * 1e3, bytes / sec / 1e9,
               100.0 * bytes / sec / copy);
    else
        printf("%-36s %13s %9.1f us\n", what, count > 1 ? "queued" : "and wait", sec * 1e6);
    return 0;
}

static hc_view device_floats(hc_backend *be, const float *v, size_t n, char *err, size_t errlen)
{
    hc_buf *b = be->ops->buf_new(be, sizeof(float) * n, err, errlen);
    if (b) be->ops->write(be, (hc_view){ b, 0 }, v, sizeof(float) * n);
    return (hc_view){ b, 0 };
}

/* The products and hot rows of one type on n x ff matrices. */
static int type_rows(hc_cl *cl, hc_backend *be, uint32_t type, int n, int ff, int reps, double copy, hc_view x,
                     hc_view xh, hc_view y)
{
    enum { PROMPT = 64 };
    char err[512], what[64];
    const char *tn = ggml_type_name(type);
    char *mem[3];
    hc_weight w = random_weight(type, ff, n, &mem[0]), up = random_weight(type, ff, n, &mem[1]);
    hc_weight down = random_weight(type, ff, n, &mem[2]);
    hc_bmat m = { &w, be->ops->mat_new(be, &w, err, sizeof err) }, mt = { &down, NULL };
    int rc = -1;
    if (!m.dev || !(mt.dev = be->ops->mat_new(be, &down, err, sizeof err))) {
        fprintf(stderr, "bench_clops: %s\n", err);
        goto done;
    }
    double wb = (double)hc_weight_bytes(&w);
    step s = { .kind = K_MATMUL, .x = x, .B = 1, .it = { &m, 0, 0, y, (size_t)ff, 0 } };
    snprintf(what, sizeof what, "mv %s %dx%d", tn, ff, n);
    if (table_row(be, what, &s, wb, reps, copy, QUEUED)) goto done;
    s.B = PROMPT;
    snprintf(what, sizeof what, "mm %s %dx%d, %d tokens", tn, ff, n, PROMPT);
    if (table_row(be, what, &s, wb, reps, copy, QUEUED)) goto done;
    s = (step){ .kind = K_MATMUL, .x = xh, .B = 1, .it = { &mt, 0, 1, y, (size_t)n, 0 } };
    snprintf(what, sizeof what, "mt %s %dx%d (down_t)", tn, ff, n);
    if (table_row(be, what, &s, wb, reps, copy, QUEUED)) goto done;
    if (!hc_cl_supports(&w, 0)) {
        printf("%-36s no hot-row kernel for %s\n", "hot rows", tn);
        rc = 0;
        goto done;
    }
    hc_cl_rows rows = { 0, w, up, down, NULL, NULL, NULL };
    hc_cl_layer *L = hc_cl_layer_new(cl, &rows, ff, n, err, sizeof err);
    size_t xb = hc_weight_act_bytes(&w);
    float *xf = malloc(sizeof(float) * (size_t)n), *hy = malloc(sizeof(float) * (size_t)n), *hh = malloc(sizeof(float) * (size_t)ff);
    void *xp = malloc(xb);
    uint8_t *mask = malloc((size_t)ff);
    if (L && xf && hy && hh && xp && mask) {
        for (int i = 0; i < n; i++) xf[i] = frand();
        memset(mask, 1, (size_t)ff);
        hc_weight_prepare(&w, HC_ISA_SCALAR, xf, xp);
        s = (step){ .kind = K_HOT, .L = L, .xp = xp, .mask = mask, .hy = hy, .hh = hh };
        if (run_steps(be, &s, 1, err, sizeof err)) {
            fprintf(stderr, "bench_clops: %s\n", err);
        } else {   /* gate and up rows of every row, down rows of the non-zero h */
            int active = 0;
            for (int r = 0; r < ff; r++) active += hh[r] != 0.0f;
            snprintf(what, sizeof what, "hot %s %d rows, %d active", tn, ff, active);
            rc = table_row(be, what, &s, 2 * wb + wb * active / ff, reps, copy, 1);
        }
    } else {
        fprintf(stderr, "bench_clops: %s\n", L ? "out of memory" : err);
    }
    hc_cl_layer_free(L);
    free(xf); free(hy); free(hh); free(xp); free(mask);
done:
    if (m.dev) be->ops->dev_free(be, m.dev);
    if (mt.dev) be->ops->dev_free(be, mt.dev);
    for (int i = 0; i < 3; i++) free(mem[i]);
    return rc;
}

static int table_bench(int argc, char **argv)
{
    int n = argc > 5 ? atoi(argv[2]) : 4096, ff = argc > 5 ? atoi(argv[3]) : 11008;
    int npos = argc > 5 ? atoi(argv[4]) : 2048, reps = argc > 5 ? atoi(argv[5]) : 10;
    if (n < 128 || n % 128 || ff < 32 || ff % 32 || npos < 1 || reps < 1) {
        fprintf(stderr, "bench_clops: usage: bench_clops table [n n_ff positions reps] (n a multiple of 128, n_ff of 32)\n");
        return 1;
    }
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    hc_backend *be = open_backend(cl, err, sizeof err);
    double copy = be ? hc_cl_copy_bandwidth(cl, 64u << 20, reps, err, sizeof err) : -1;
    if (copy <= 0) {
        fprintf(stderr, "bench_clops: %s\n", err);
        return 1;
    }
    hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
    printf("%s\ncopy: %.1f GB/s (64 MiB buffers, read + written bytes); integer dots: %s (hot rows: %s)\n", line,
           copy / 1e9, hc_cl_backend_dots(be, NULL), hc_cl_dots(cl, NULL));
    printf("%-36s %13s %12s %13s %8s\n", "kernel", "read", "time", "speed", "of copy");
    size_t big = (size_t)(n > ff ? n : ff) * 64;
    float *host = malloc(sizeof(float) * big);
    for (size_t i = 0; i < big; i++) host[i] = frand();
    hc_view x = device_floats(be, host, big, err, sizeof err), xh = device_floats(be, host, big, err, sizeof err);
    hc_view y = device_floats(be, host, big, err, sizeof err);
    int rc = !x.buf || !xh.buf || !y.buf;
    for (size_t t = 0; !rc && t < N_TYPES; t++) rc = type_rows(cl, be, types[t], n, ff, reps, copy, x, xh, y) != 0;
    /* attention of one decode step: 32 heads of 128 (n / 128 heads of 128 on other shapes) */
    hc_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_head = hp.n_head_kv = n / 128;
    hp.head_dim = 128;
    hp.n_layer = 1;
    size_t kvn = (size_t)npos * (size_t)n;
    float *kvh = rc ? NULL : malloc(sizeof(float) * kvn);
    hc_view kb = { NULL, 0 };
    if (kvh) {
        for (size_t i = 0; i < kvn; i++) kvh[i] = frand();
        kb = device_floats(be, kvh, kvn, err, sizeof err);
    }
    char what[64];
    int made = kb.buf != NULL;
    for (int f16 = 0; made && !rc && f16 < 2; f16++) {   /* an f32 cache, then an f16 one (-ctk/-ctv f16) */
        int32_t *tables;
        hc_seq_rows rows;
        hc_kv *kv = decode_cache(be, &hp, npos, f16 ? GGML_TYPE_F16 : GGML_TYPE_F32, kb, kb, &rows, &tables, err,
                                 sizeof err);
        if (!(made = kv != NULL)) break;
        step s = { .kind = K_ATTN, .x = x, .y = y, .kv = kv, .hp = &hp };
        snprintf(what, sizeof what, "attention %dx128, %d pos%s", n / 128, npos, f16 ? ", f16" : "");
        rc = table_row(be, what, &s, 2.0 * (double)kvn * (f16 ? 2 : sizeof(float)), reps, copy, QUEUED);
        be->ops->kv_free(be, kv);
        free(tables);
    }
    if (made && !rc) {
        step s = (step){ .kind = K_ADD, .x = y, .y = x, .B = n };
        snprintf(what, sizeof what, "add %d floats", n);
        rc = rc || table_row(be, what, &s, 0, reps, copy, 1) || table_row(be, what, &s, 0, reps, copy, QUEUED);
    } else if (!rc) {
        fprintf(stderr, "bench_clops: %s\n", err);
        rc = 1;
    }
    if (kb.buf) be->ops->buf_free(be, kb.buf);
    hc_buf *bs[] = { x.buf, xh.buf, y.buf };
    for (int i = 0; i < 3; i++) if (bs[i]) be->ops->buf_free(be, bs[i]);
    be->ops->free(be);
    hc_cl_free(cl);
    free(host);
    free(kvh);
    return rc != 0;
}

/* bench_clops kernels [DIR] */
static int kernels_report(int argc, char **argv)
{
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    hc_backend *be = open_backend(cl, err, sizeof err);
    int rc = !be || hc_cl_backend_report(be, stdout, argc > 2 ? argv[2] : NULL, err, sizeof err);
    if (be) {
        hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
        printf("(%s; integer dots: %s; hot rows: %s)\n", line, hc_cl_backend_dots(be, NULL), hc_cl_dots(cl, NULL));
        be->ops->free(be);
    }
    if (rc) fprintf(stderr, "bench_clops: %s\n", err);
    hc_cl_free(cl);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "attention")) return attention_bench(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "table")) return table_bench(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "kernels")) return kernels_report(argc, argv);
    int rows = argc > 3 ? atoi(argv[1]) : 4096, n = argc > 3 ? atoi(argv[2]) : 4096;
    int reps = argc > 3 ? atoi(argv[3]) : 20, B = argc > 4 ? atoi(argv[4]) : 1;
    if (rows < 1 || n < 32 || n % 32 || reps < 1 || B < 1) {
        fprintf(stderr, "bench_clops: usage: bench_clops [rows n reps [B]] (n a multiple of 32)\n");
        return 1;
    }
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    hc_backend *be = open_backend(cl, err, sizeof err);
    if (!be) {
        fprintf(stderr, "bench_clops: %s\n", err);
        hc_cl_free(cl);
        return 1;
    }
    const hc_backend_ops *o = be->ops;
    hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
    printf("%s\n%d x %d, B %d, %d reps\n", line, rows, n, B, reps);
    float *x = malloc(sizeof(float) * (size_t)n * B);
    float *y = malloc(sizeof(float) * (size_t)rows * B);
    for (size_t i = 0; i < (size_t)n * B; i++) x[i] = frand();
    hc_buf *bx = o->buf_new(be, sizeof(float) * (size_t)n * B, err, sizeof err);
    hc_buf *by = o->buf_new(be, sizeof(float) * (size_t)rows * B, err, sizeof err);
    if (!bx || !by) { fprintf(stderr, "bench_clops: %s\n", err); return 1; }
    o->write(be, (hc_view){ bx, 0 }, x, sizeof(float) * (size_t)n * B);
    for (size_t t = 0; t < N_TYPES; t++) {
        char *d;
        hc_weight w = random_weight(types[t], rows, n, &d);
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
        hc_mm it = { &m, 0, 0, { by, 0 }, (size_t)rows, 0 };
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
    free(x);
    free(y);
    return 0;
}
