/* Matvec speed per weight type on a 4096 x 11008 matrix (LLaMA-7B ffn_up):
 * B = 1 as GB/s of weights streamed (enough copies rotate to defeat the
 * last-level cache), B = 16/64 as GFLOP/s. Built and run by bench-kernels.sh.
 * Usage: bench_kernels [max threads (default 2)] [isa (default: best)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"
#include "kernels.h"
#include "quants.h"

enum { N = 4096, ROWS = 11008 };
#define ROTATE_BYTES (384u << 20)   /* > 10x a 32 MiB L3 */

struct mv { uint32_t type; const char *W; const void *acts; size_t as; int B; float *y; int row0, row1; };

static void *run_part(void *arg)
{
    struct mv *m = arg;
    hc_weight w = { .kind = HC_WEIGHT_GGML, .type = m->type, .data = m->W, .n = N, .rows = ROWS };
    hc_weight_matvec(&w, hc_isa(), m->row0, m->row1, m->acts, m->as, m->B, m->y + m->row0, ROWS);
    return NULL;
}

/* One matvec of W split over nt threads by rows, as the runtime does. */
static void matvec_threads(uint32_t type, const char *W, const void *acts, size_t as, int B, float *y, int nt)
{
    pthread_t th[64];
    struct mv m[64];
    for (int t = 0; t < nt; t++) {
        m[t] = (struct mv){ type, W, acts, as, B, y, ROWS * t / nt, ROWS * (t + 1) / nt };
        if (t) pthread_create(&th[t], NULL, run_part, &m[t]);
    }
    run_part(&m[0]);
    for (int t = 1; t < nt; t++) pthread_join(th[t], NULL);
}

static void fill_rows(uint32_t type, char *W, const float *x)
{
    size_t rb = ggml_row_size(type, N);
    for (int r = 0; r < ROWS; r++) {
        char *row = W + rb * (size_t)r;
        const float *xr = x + (size_t)(r % 64) * N;   /* 64 distinct rows repeat: values do not matter */
        uint16_t *h = (uint16_t *)row;
        switch (type) {
        case GGML_TYPE_F32: memcpy(row, xr, rb); break;
        case GGML_TYPE_F16: for (int i = 0; i < N; i++) h[i] = fp32_to_fp16(xr[i]); break;
        case GGML_TYPE_BF16: for (int i = 0; i < N; i++) h[i] = fp32_to_bf16(xr[i]); break;
        case GGML_TYPE_Q8_0: quantize_row_q8_0(xr, (block_q8_0 *)row, N); break;
        case GGML_TYPE_Q4_0: quantize_row_q4_0(xr, (block_q4_0 *)row, N); break;
        }
    }
}

int main(int argc, char **argv)
{
    static const uint32_t types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    int maxt = argc > 1 ? atoi(argv[1]) : 2;
    hc_prog = "bench_kernels";
    if (maxt < 1 || maxt > 64) hc_die("threads must be 1..64");
    if (argc > 2 && hc_kernel_force(argv[2])) hc_die("instruction set %s is not available", argv[2]);
    float *x = malloc((size_t)64 * N * sizeof *x), *y = malloc((size_t)64 * ROWS * sizeof *y);
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)64 * N; i++) x[i] = (float)((s = s * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    printf("isa %s, %d x %d\n", hc_kernel_isa(), N, ROWS);
    printf("%-5s %8s %s\n", "type", "MiB", "B=1 GB/s by threads 1..N | B=16, B=64 GFLOP/s (N threads)");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t type = types[ti];
        size_t bytes = ggml_row_size(type, N) * ROWS;
        int copies = (int)(ROTATE_BYTES / bytes) + 1;
        char *W = malloc(bytes * (size_t)copies);
        if (!W) hc_die("out of memory");
        fill_rows(type, W, x);
        for (int c = 1; c < copies; c++) memcpy(W + bytes * (size_t)c, W, bytes);
        hc_weight w = { .kind = HC_WEIGHT_GGML, .type = type, .n = N, .rows = ROWS };
        size_t as = hc_weight_act_bytes(&w);
        char *acts = malloc(as * 64);
        for (int b = 0; b < 64; b++) hc_weight_prepare(&w, hc_isa(), x + (size_t)b * N, acts + as * (size_t)b);
        size_t xs = hc_weight_arranged_bytes(&w, hc_isa());
        if (xs) {   /* arranged once, as hc_ctx_matvec does */
            char *xa = NULL;
            if (posix_memalign((void **)&xa, 64, xs * 64)) hc_die("out of memory");
            hc_weight_arrange(&w, hc_isa(), acts, as, 64, xa);
            free(acts);
            acts = xa;
            as = xs;
        }
        printf("%-5s %8.1f", ggml_type_name(type), bytes / 1048576.0);
        for (int nt = 1; nt <= maxt; nt++) {
            int iters = 2 * copies > 12 ? 2 * copies : 12;
            matvec_threads(type, W, acts, as, 1, y, nt);   /* warm-up */
            double t0 = hc_now();
            for (int it = 0; it < iters; it++) matvec_threads(type, W + bytes * (size_t)(it % copies), acts, as, 1, y, nt);
            printf(" %6.1f", (double)bytes * iters / (hc_now() - t0) / 1e9);
        }
        printf(" |");
        for (int B = 16; B <= 64; B *= 4) {
            double t0 = hc_now();
            matvec_threads(type, W, acts, as, B, y, maxt);
            printf(" %6.1f", 2.0 * N * ROWS * B / (hc_now() - t0) / 1e9);
        }
        printf("\n");
        fflush(stdout);
        free(W);
        free(acts);
    }
    free(x);
    free(y);
    return 0;
}
