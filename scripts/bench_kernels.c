/* Matvec speed per weight type on a 4096 x 11008 matrix (LLaMA-7B ffn_up):
 * B = 1 as GB/s of weights streamed (enough copies rotate to defeat the
 * last-level cache), B = 16/64 as GFLOP/s, on the runtime's persistent pool
 * (wall time: on a shared machine see "pool" below). Built and run by
 * bench-kernels.sh.
 * The weights live in 2 MiB pages, as hc-run copies them (with 4 KiB pages
 * the TLB misses, not the kernels, bound B = 1).
 * Usage: bench_kernels [max threads (default 2)] [isa (default: best)]
 *        bench_kernels cpu ISA N ROWS B [REPS]: one thread, one N x ROWS
 *        product with B vectors (arranged once, as hc_ctx_matvec), best of
 *        REPS (3) in the thread's CPU time, which a loaded machine disturbs
 *        far less than wall time: GFLOP/s (and GB/s of weights for B = 1),
 *        for each ggml type and INT4-GPTQ (groups of 128; TYPES="F16 GPTQ"
 *        picks some).
 *        ISA avx512-nobf16: the AVX-512 BF16 kernels without vdpbf16ps
 *        (its FMAs), where every other AVX-512 ISA here takes vdpbf16ps when
 *        the CPU has it, whatever the table row says (hc_bf16_dot);
 *        avx512-vpermt2w, avx512-vpermt2d: AVX-512 Q4_0 unpacking with word
 *        or dword permutes (by default as the CPU model's table row says);
 *        avx512-streams, avx512-rows (also after -chunks): AVX-512 decode
 *        reading rows as far-apart streams or one at a time (by default as
 *        the table row says; hc_decode_streams);
 *        avx512-chunks, avx2-chunks: Q4_0 and Q8_0 rows in chunks of 16
 *        blocks, as hc-run copies them for AVX-512 (and Q4_0 for AVX2;
 *        AVX2's Q8_0 in chunks takes the reference) (runtime/x16.h; also
 *        for pool).
 *        bench_kernels pool ISA N ROWS THREADS [REPS [B]]: decode (B = 1) on
 *        the runtime's persistent pool of THREADS threads, split as hc-run
 *        splits it (hc_pool_matvec), each ggml type and INT4-GPTQ
 *        (TYPES="F16 Q4_0" picks some), interleaved rep by rep with a plain
 *        read of the same bytes (GPTQ: its codes; the product also reads the
 *        pairs) in the same number of chunks (64-byte loads, 8 sums: what the
 *        product could reach at that moment); weights rotate through copies
 *        that defeat the LLC. A rep counts only if every thread ran for all
 *        of it (its CPU time >= 95 % of the wall time: on a shared machine a
 *        thread descheduled mid-product is not the product's speed). Prints
 *        the medians of GB/s (product, read), their ratio and the reps kept.
 *        With B > 1 (at most 64; *-chunks as for cpu): the product of B
 *        vectors alone, as a step of B sequences runs it (hc-run
 *        --parallel B), its median GFLOP/s and the reps kept: beside cpu
 *        mode's best rep of one thread from the cache, what the split, the
 *        memory and a typical rep leave of the tile. */
#include <time.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"
#include "hugepage.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "matmul.h"
#include "x16.h"
#include "quants.h"

enum { N = 4096, ROWS = 11008 };
#define ROTATE_BYTES (384u << 20)   /* > 10x a 32 MiB L3 */

/* The ggml types the pool and default modes measure. */
static const uint32_t ggml_types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

/* One product of the N x ROWS weight of type at W with B vectors on pool
 * (hc_pool_matvec: the runtime's persistent threads and split). */
static void matvec_pool(hc_pool *pool, uint32_t type, const char *W, const void *acts, size_t as, int B, float *y)
{
    hc_weight w = { .kind = HC_WEIGHT_GGML, .type = type, .data = W, .n = N, .rows = ROWS };
    hc_pool_matvec(pool, &w, hc_isa(), acts, as, B, y, ROWS);
}

/* rows x n weights of type from the 64 vectors of n floats at x (repeating:
 * the values do not matter). */
static void fill_rows(uint32_t type, char *W, const float *x, int n, int rows)
{
    size_t rb = ggml_row_size(type, n);
    for (int r = 0; r < rows; r++) {
        char *row = W + rb * (size_t)r;
        const float *xr = x + (size_t)(r % 64) * (size_t)n;
        uint16_t *h = (uint16_t *)row;
        switch (type) {
        case GGML_TYPE_F32: memcpy(row, xr, rb); break;
        case GGML_TYPE_F16: for (int i = 0; i < n; i++) h[i] = fp32_to_fp16(xr[i]); break;
        case GGML_TYPE_BF16: for (int i = 0; i < n; i++) h[i] = fp32_to_bf16(xr[i]); break;
        case GGML_TYPE_Q8_0: quantize_row_q8_0(xr, (block_q8_0 *)row, n); break;
        case GGML_TYPE_Q4_0: quantize_row_q4_0(xr, (block_q4_0 *)row, n); break;
        }
    }
}

/* Enough copies (*copies) of rows x n weights of type, filled by fill_rows,
 * to pass ROTATE_BYTES, one after another in 2 MiB pages: reading them in
 * turn defeats the last-level cache. */
static char *rotating_weights(uint32_t type, const float *x, int n, int rows, int *copies)
{
    size_t bytes = ggml_row_size(type, n) * (size_t)rows;
    *copies = (int)(ROTATE_BYTES / bytes) + 1;
    char *W = hc_huge_alloc(bytes * (size_t)*copies);
    if (!W) hc_die("out of memory");
    fill_rows(type, W, x, n, rows);
    for (int c = 1; c < *copies; c++) memcpy(W + bytes * (size_t)c, W, bytes);
    return W;
}

/* A random INT4-GPTQ weight of rows x n (groups of 128 inputs, no g_idx) in *g. */
static void gptq_weight(int n, int rows, hc_gptq *g)
{
    const int gs = 128, G = (n + gs - 1) / gs;
    int32_t *qw = malloc(sizeof(int32_t) * (size_t)(n / 8) * (size_t)rows);
    int32_t *qz = malloc(sizeof(int32_t) * (size_t)G * (size_t)((rows + 7) / 8));
    uint16_t *sc = malloc(sizeof(uint16_t) * (size_t)G * (size_t)rows);
    char err[256];
    unsigned s = 1;
    if (!qw || !qz || !sc) hc_die("out of memory");
    for (size_t i = 0; i < (size_t)(n / 8) * (size_t)rows; i++) qw[i] = (int32_t)(s = s * 1103515245u + 12345u);
    for (size_t i = 0; i < (size_t)G * (size_t)((rows + 7) / 8); i++) qz[i] = (int32_t)(s = s * 1103515245u + 12345u);
    for (size_t i = 0; i < (size_t)G * (size_t)rows; i++) sc[i] = fp32_to_fp16(0.01f);
    if (hc_gptq_load(g, n, rows, gs, qw, sc, qz, NULL, err, sizeof err)) hc_die("%s", err);
    free(qw);
    free(qz);
    free(sc);
}

/* Random floats in [-0.5, 0.5). */
static float *random_floats(size_t count)
{
    float *x = malloc(count * sizeof *x);
    unsigned s = 1;
    if (!x) hc_die("out of memory");
    for (size_t i = 0; i < count; i++) x[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    return x;
}

/* The prepared (and, if the kernels want it, arranged) activations of the B
 * vectors at x for w; *stride: bytes per vector. */
static char *activations(const hc_weight *w, const float *x, int B, size_t *stride)
{
    /* 64-byte aligned vectors, as the runtime's (hc_ctx_acts) */
    size_t as = (hc_weight_act_bytes(w) + 63) & ~(size_t)63, xs = hc_weight_arranged_bytes(w, hc_isa());
    char *acts = NULL, *xa = NULL;
    if (posix_memalign((void **)&acts, 64, as * (size_t)B)) hc_die("out of memory");
    for (int b = 0; b < B; b++) hc_weight_prepare(w, hc_isa(), x + (size_t)b * (size_t)w->n, acts + as * (size_t)b);
    *stride = as;
    if (!xs) return acts;
    if (posix_memalign((void **)&xa, 64, xs * (size_t)B)) hc_die("out of memory");
    hc_weight_arrange(w, hc_isa(), acts, as, B, xa);
    free(acts);
    *stride = xs;
    return xa;
}

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ISA NAME-streams or NAME-rows: AVX-512 decode reads rows as streams or
 * one at a time (hc_kernel_decode_streams; by default as the CPU model's
 * table row says); NAME left in isa. */
static void streams_asked(char *isa)
{
    char *s = strstr(isa, "-streams"), *r = strstr(isa, "-rows");
    if (s) hc_kernel_decode_streams(1), *s = 0;
    if (r) hc_kernel_decode_streams(0), *r = 0;
}

/* ISA NAME-chunks: 1, and NAME left in isa. */
static int chunks_asked(char *isa)
{
    char *c = strstr(isa, "-chunks");
    if (c) *c = 0;
    return c != NULL;
}

/* The rows of w (rows x copies of them at W) into chunks of 16 blocks when
 * asked and w is Q4_0 or Q8_0, as hc-run's copy of the weights. */
static void to_chunks(int asked, hc_weight *w, char *W, int copies)
{
    if (!asked || (w->type != GGML_TYPE_Q4_0 && w->type != GGML_TYPE_Q8_0)) return;
    const int nb = w->n / QK4_0;
    const size_t rb = ggml_row_size(w->type, w->n);
    uint8_t *row = malloc(rb);
    if (!row) hc_die("out of memory");
    for (size_t r = 0; r < (size_t)w->rows * (size_t)copies; r++) {
        memcpy(row, W + r * rb, rb);
        hc_x16_repack(w->type, row, (uint8_t *)W + r * rb, nb);
    }
    free(row);
    w->kind = HC_WEIGHT_X16;
}

/* bench_kernels cpu ISA N ROWS B [REPS] (see the top of the file). */
static int cpu_mode(int argc, char **argv)
{
    /* the ggml types, then INT4-GPTQ (GGML_TYPE_COUNT here) */
    static const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                      GGML_TYPE_COUNT };
    if (argc < 6) hc_die("usage: bench_kernels cpu ISA N ROWS B [REPS]");
    char isa[32];
    snprintf(isa, sizeof isa, "%s", argv[2]);
    char *nobf16 = strstr(isa, "-nobf16");   /* avx512-nobf16: BF16 without vdpbf16ps */
    hc_kernel_bf16_dot(!nobf16);
    if (nobf16) *nobf16 = 0;
    char *perm = strstr(isa, "-vpermt2");    /* avx512-vpermt2w / -vpermt2d: how Q4_0 unpacks */
    if (perm) hc_kernel_q4_word_permutes(perm[8] == 'w'), *perm = 0;
    streams_asked(isa);
    const int chunks = chunks_asked(isa);
    if (hc_kernel_force(isa)) hc_die("instruction set %s is not available", argv[2]);
    int n = atoi(argv[3]), rows = atoi(argv[4]), B = atoi(argv[5]), reps = argc > 6 ? atoi(argv[6]) : 3;
    if (n < 32 || n % 32 || rows < 1 || B < 1 || reps < 1) hc_die("N must be a multiple of 32; ROWS, B, REPS >= 1");
    const char *only = getenv("TYPES");
    int nx = B > 64 ? B : 64;
    float *x = random_floats((size_t)nx * (size_t)n), *y = malloc(sizeof(float) * (size_t)B * (size_t)rows);
    if (!y) hc_die("out of memory");
    printf("isa %s%s%s, one thread, %d x %d, B = %d, best of %d in CPU time\n", hc_kernel_isa(),
           hc_isa() == HC_ISA_AVX512 && hc_bf16_dot() ? " (BF16: vdpbf16ps)" : "",
           chunks ? " (Q4_0: chunks of 16)" : hc_isa() != HC_ISA_AVX512 ? "" : hc_q4_word_permutes() ? " (Q4_0: vpermt2w)"
           : " (Q4_0: vpermt2d)", n, rows, B, reps);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int gptq = types[ti] == GGML_TYPE_COUNT;
        if (only && !strstr(only, gptq ? "GPTQ" : ggml_type_name(types[ti]))) continue;
        hc_gptq g;
        char *W = NULL;
        hc_weight w = { .kind = HC_WEIGHT_GGML, .type = types[ti], .n = n, .rows = rows };
        if (gptq) {
            gptq_weight(n, rows, &g);
            w = (hc_weight){ .kind = HC_WEIGHT_GPTQ, .type = GGML_TYPE_I32, .n = n, .rows = rows, .ext = &g };
        } else {
            if (!(W = hc_huge_alloc(ggml_row_size(types[ti], n) * (size_t)rows))) hc_die("out of memory");
            fill_rows(types[ti], W, x, n, rows);
            w.data = W;
            to_chunks(chunks, &w, W, 1);
        }
        size_t bytes = hc_weight_bytes(&w), xs;
        char *xa = activations(&w, x, B, &xs);
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = thread_cpu();
            hc_weight_matvec(&w, hc_isa(), 0, rows, xa, xs, B, y, (size_t)rows);
            double t = thread_cpu() - t0;
            if (t < best) best = t;
        }
        printf("%-5s %8.2f GFLOP/s", gptq ? "GPTQ" : ggml_type_name(types[ti]), 2.0 * n * rows * B / best / 1e9);
        if (B == 1) printf(" %8.2f GB/s", (double)bytes / best / 1e9);
        printf("\n");
        if (gptq) hc_gptq_free(&g);
        free(W);
        free(xa);
    }
    free(x);
    free(y);
    return 0;
}

/* A pool task whose chunks each record their thread's CPU time, then wait
 * (at most 20 ms) until every thread has: so each thread runs one chunk. */
typedef struct {
    double cpu[64];
    atomic_int in;
    int n;
} stamp_task;

static void stamp_chunk(void *arg, int chunk, int ith)
{
    stamp_task *s = arg;
    (void)chunk;
    s->cpu[ith] = thread_cpu();
    atomic_fetch_add(&s->in, 1);
    for (double t0 = hc_now(); atomic_load(&s->in) < s->n && hc_now() - t0 < 0.02;) {}
}

/* Every thread's CPU time now (-1: a thread that did not check in). */
static void stamp(hc_pool *pool, stamp_task *s)
{
    s->n = hc_pool_size(pool);
    atomic_store(&s->in, 0);
    for (int i = 0; i < s->n; i++) s->cpu[i] = -1;
    hc_pool_run(pool, stamp_chunk, s, s->n);
}

/* The plain read: chunk c of n_chunks sums its share of bytes with 64-byte
 * vectors (AVX-512 loads where the CPU has them, else two AVX2 loads) in 8
 * independent sums. */
typedef uint64_t v8u __attribute__((vector_size(64), may_alias));
typedef struct {
    const char *p;
    size_t bytes;
    int n_chunks;
    uint64_t sink[64];
} read_task;

static inline __attribute__((always_inline)) void read_body(read_task *t, int chunk, int ith)
{
    size_t lines = t->bytes / 64, l0 = lines * (size_t)chunk / (size_t)t->n_chunks,
           l1 = lines * (size_t)(chunk + 1) / (size_t)t->n_chunks;
    v8u acc[8] = { { 0 } };
    for (size_t l = l0; l + 8 <= l1; l += 8)
        for (int c = 0; c < 8; c++) acc[c] += *(const v8u *)(t->p + (l + (size_t)c) * 64);
    for (int c = 1; c < 8; c++) acc[0] += acc[c];
    t->sink[ith] += acc[0][0];
}
__attribute__((target("avx512f"))) static void read_avx512(void *arg, int chunk, int ith) { read_body(arg, chunk, ith); }
__attribute__((target("avx2"))) static void read_avx2(void *arg, int chunk, int ith) { read_body(arg, chunk, ith); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One rep of the product of B vectors (read = 0) or of the plain read of
 * w's bytes on pool: GB/s of w's bytes, or 0 when some thread did not run
 * for all of it. */
static double pool_rep(hc_pool *pool, const hc_weight *w, const void *xa, size_t xs, int B, float *y, int read)
{
    const hc_gptq *g = w->kind == HC_WEIGHT_GPTQ ? w->ext : NULL;
    size_t bytes = read && g ? (size_t)w->rows * ((size_t)g->kp / 2) : hc_weight_bytes(w);
    stamp_task s0, s1;
    double w0 = hc_now();
    stamp(pool, &s0);
    double t0 = hc_now();
    if (read) {
        read_task rt = { g ? (const void *)g->codes : w->data, bytes,
                         hc_pool_chunks(pool, (w->rows + 15) / 16, (size_t)w->rows * (size_t)w->n), { 0 } };
        hc_pool_run(pool, __builtin_cpu_supports("avx512f") ? read_avx512 : read_avx2, &rt, rt.n_chunks);
    } else {
        hc_pool_matvec(pool, w, hc_isa(), xa, xs, B, y, (size_t)w->rows);
    }
    double t = hc_now() - t0;
    stamp(pool, &s1);
    double wall = hc_now() - w0;
    for (int i = 0; i < hc_pool_size(pool); i++)
        if (s0.cpu[i] < 0 || s1.cpu[i] < 0 || s1.cpu[i] - s0.cpu[i] < 0.95 * wall) return 0;
    return (double)bytes / t / 1e9;
}

/* bench_kernels pool ISA N ROWS THREADS [REPS [B]] (see the top of the file). */
static int pool_mode(int argc, char **argv)
{
    if (argc < 6) hc_die("usage: bench_kernels pool ISA N ROWS THREADS [REPS [B]]");
    char isa[32];
    snprintf(isa, sizeof isa, "%s", argv[2]);
    streams_asked(isa);
    const int chunks = chunks_asked(isa);
    if (hc_kernel_force(isa)) hc_die("instruction set %s is not available", argv[2]);
    int n = atoi(argv[3]), rows = atoi(argv[4]), nt = atoi(argv[5]), reps = argc > 6 ? atoi(argv[6]) : 30;
    const int B = argc > 7 ? atoi(argv[7]) : 1, reads = B == 1;   /* a plain read beside decode only */
    if (n < 32 || n % 32 || rows < 1 || nt < 1 || nt > 64 || reps < 1 || B < 1 || B > 64)
        hc_die("N must be a multiple of 32; ROWS, REPS >= 1; THREADS 1..64; B 1..64");
    const char *only = getenv("TYPES");
    hc_pool *pool = hc_pool_new(nt);
    float *x = random_floats((size_t)64 * (size_t)n), *y = malloc(sizeof(float) * (size_t)rows * (size_t)B);
    double *gb = malloc(sizeof(double) * 2 * (size_t)reps);
    if (!pool || !y || !gb) hc_die("out of memory");
    printf("isa %s%s, %d threads (the runtime's pool and split), %d x %d, B = %d, medians of %d reps\n", hc_kernel_isa(),
           hc_isa() != HC_ISA_AVX512 ? "" : hc_decode_streams() ? " (decode as streams)" : " (decode a row at a time)", nt,
           n, rows, B, reps);
    for (size_t ti = 0; ti <= N_GGML_TYPES; ti++) {   /* the ggml types, then INT4-GPTQ */
        const int gptq = ti == N_GGML_TYPES;
        const char *name = gptq ? "GPTQ" : ggml_type_name(ggml_types[ti]);
        if (only && !strstr(only, name)) continue;
        int copies, kept[2] = { 0, 0 };
        char *W = NULL;
        hc_gptq g, view;   /* GPTQ: the copies as one weight's rows, a view of one copy at a time */
        hc_weight w = { .kind = HC_WEIGHT_GPTQ, .type = GGML_TYPE_I32, .n = n, .rows = rows, .ext = &view };
        size_t bytes;
        if (gptq) {
            bytes = (size_t)rows * ((size_t)(n + 31) / 32 * 16);
            copies = (int)(ROTATE_BYTES / bytes) + 1;
            gptq_weight(n, rows * copies, &g);
            view = hc_gptq_rows(&g, 0, rows);
        } else {
            bytes = ggml_row_size(ggml_types[ti], n) * (size_t)rows;
            W = rotating_weights(ggml_types[ti], x, n, rows, &copies);
            w = (hc_weight){ .kind = HC_WEIGHT_GGML, .type = ggml_types[ti], .data = W, .n = n, .rows = rows };
            to_chunks(chunks, &w, W, copies);
        }
        size_t xs;
        char *xa = activations(&w, x, B, &xs);
        for (int r = 0, it = 0; r < reps; r++)
            for (int read = 0; read <= reads; read++, it++) {
                if (gptq) view = hc_gptq_rows(&g, rows * (it % copies), rows);
                else w.data = W + bytes * (size_t)(it % copies);
                double v = pool_rep(pool, &w, xa, xs, B, y, read);
                if (v > 0) gb[(size_t)read * (size_t)reps + (size_t)kept[read]++] = v;
            }
        printf("%-5s", name);
        if (!reads && kept[0]) {
            qsort(gb, (size_t)kept[0], sizeof(double), cmp_double);
            const double p = gb[kept[0] / 2], flops = 2.0 * n * rows * B;
            printf(" product %7.2f GFLOP/s (%6.2f GB/s of weights)  (reps kept %d)\n", p * flops / (double)bytes, p,
                   kept[0]);
        } else if (kept[0] && kept[1]) {
            qsort(gb, (size_t)kept[0], sizeof(double), cmp_double);
            qsort(gb + reps, (size_t)kept[1], sizeof(double), cmp_double);
            double p = gb[kept[0] / 2], q = gb[reps + kept[1] / 2];
            printf(" product %6.2f GB/s  read %6.2f GB/s  product/read %.2f  (reps kept %d, %d)\n", p, q, p / q,
                   kept[0], kept[1]);
        } else {
            printf(" no rep in which every thread ran throughout (reps kept %d, %d)\n", kept[0], kept[1]);
        }
        fflush(stdout);
        if (gptq) hc_gptq_free(&g);
        free(W);
        free(xa);
    }
    hc_pool_free(pool);
    free(gb);
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv)
{
    hc_prog = "bench_kernels";
    if (argc > 1 && !strcmp(argv[1], "cpu")) return cpu_mode(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "pool")) return pool_mode(argc, argv);
    int maxt = argc > 1 ? atoi(argv[1]) : 2;
    if (maxt < 1 || maxt > 64) hc_die("threads must be 1..64");
    if (argc > 2 && hc_kernel_force(argv[2])) hc_die("instruction set %s is not available", argv[2]);
    float *x = random_floats((size_t)64 * N), *y = malloc((size_t)64 * ROWS * sizeof *y);
    hc_pool *pools[64];
    for (int nt = 1; nt <= maxt; nt++)
        if (!(pools[nt - 1] = hc_pool_new(nt))) hc_die("cannot start %d threads", nt);
    printf("isa %s, %d x %d\n", hc_kernel_isa(), N, ROWS);
    printf("%-5s %8s %s\n", "type", "MiB", "B=1 GB/s by threads 1..N | B=16, B=64 GFLOP/s (N threads)");
    for (size_t ti = 0; ti < N_GGML_TYPES; ti++) {
        uint32_t type = ggml_types[ti];
        size_t bytes = ggml_row_size(type, N) * ROWS;
        int copies;
        char *W = rotating_weights(type, x, N, ROWS, &copies);
        hc_weight w = { .kind = HC_WEIGHT_GGML, .type = type, .n = N, .rows = ROWS };
        size_t as;
        char *acts = activations(&w, x, 64, &as);
        printf("%-5s %8.1f", ggml_type_name(type), bytes / 1048576.0);
        for (int nt = 1; nt <= maxt; nt++) {
            int iters = 2 * copies > 12 ? 2 * copies : 12;
            matvec_pool(pools[nt - 1], type, W, acts, as, 1, y);   /* warm-up */
            double t0 = hc_now();
            for (int it = 0; it < iters; it++)
                matvec_pool(pools[nt - 1], type, W + bytes * (size_t)(it % copies), acts, as, 1, y);
            printf(" %6.1f", (double)bytes * iters / (hc_now() - t0) / 1e9);
        }
        printf(" |");
        for (int B = 16; B <= 64; B *= 4) {
            double t0 = hc_now();
            matvec_pool(pools[maxt - 1], type, W, acts, as, B, y);
            printf(" %6.1f", 2.0 * N * ROWS * B / (hc_now() - t0) / 1e9);
        }
        printf("\n");
        fflush(stdout);
        free(W);
        free(acts);
    }
    for (int nt = 1; nt <= maxt; nt++) hc_pool_free(pools[nt - 1]);
    free(x);
    free(y);
    return 0;
}
