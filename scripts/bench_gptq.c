/* Time GPTQ on one LLaMA-7B-shaped linear layer with random weights and
 * random calibration inputs (timing only: the numbers do not depend on the
 * values), on hc-quantize GPTQ's default grid. Usage: bench_gptq N K T threads */
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "gptq.h"
#include "threads.h"

static uint64_t rng = 1;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: bench_gptq N K T threads\n"); return 1; }
    const int N = atoi(argv[1]), K = atoi(argv[2]), T = atoi(argv[3]);
    hc_pool *pool = hc_pool_new(atoi(argv[4]));
    float *W = malloc(sizeof(float) * (size_t)N * K), *X = malloc(sizeof(float) * (size_t)T * K);
    float *H = malloc(sizeof(float) * (size_t)K * K);
    uint8_t *codes = malloc((size_t)N * K);
    gptq_grid *grids = malloc(sizeof *grids * (size_t)gptq_groups(K, GPTQ_NATIVE_GROUP) * N);
    if (!pool || !W || !X || !H || !codes || !grids) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)N * K; i++) W[i] = frand();
    for (size_t i = 0; i < (size_t)T * K; i++) X[i] = frand();
    gptq_params p = { .group_size = GPTQ_NATIVE_GROUP, .sym = GPTQ_NATIVE_SYM, .damp = 0.01f };
    gptq_stats st;
    char err[256];
    double t0 = hc_now();
    gptq_hessian(pool, X, T, K, H);
    double t1 = hc_now();
    if (gptq_quantize_layer(pool, W, N, K, H, &p, codes, grids, &st, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t2 = hc_now();
    printf("gptq %d x %d (out x in), %d tokens, g%d %s, %s threads: hessian %.2f s, quantize %.2f s, total %.2f s\n",
           N, K, T, p.group_size, p.sym ? "sym" : "asym", argv[4], t1 - t0, t2 - t1, t2 - t0);
    return 0;
}
