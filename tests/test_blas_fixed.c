/* runtime/blas_fixed.c: products whose bits do not depend on the thread
 * count (issue 32: GPTQ and predictors changed with -t under some OpenBLAS
 * kernels), and that compute the right thing in every transpose case. The
 * environment's OPENBLAS_* settings are left as the machine sets them. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blas_fixed.h"
#include "harness.h"

static float *randoms(size_t n, unsigned seed)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n && x; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    }
    return x;
}

/* op(X)[i][j] of a row-major X with leading dimension ld. */
static float at(const float *X, int ld, enum CBLAS_TRANSPOSE t, int i, int j)
{
    return t == CblasNoTrans ? X[(size_t)i * ld + j] : X[(size_t)j * ld + i];
}

/* Shapes past the split threshold, with the inner dimension >= 256 where
 * OpenBLAS's own threads changed the bits, split by rows and by columns, and
 * with a last partial piece; every transpose case against a double sum. */
static void test_sgemm_any_pool(void)
{
    static const int shapes[][3] = { { 300, 70, 700 }, { 37, 1000, 512 }, { 129, 129, 256 }, { 5, 3, 4 } };
    hc_pool *pools[3] = { NULL, hc_pool_new(2), hc_pool_new(3) };
    CHECK(pools[1] && pools[2]);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                const enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
                const int lda = ta ? M : K, ldb = tb ? K : N;
                float *A = randoms((size_t)M * K, 1), *B = randoms((size_t)K * N, 2);
                float *C[3];
                for (int p = 0; p < 3; p++) {
                    C[p] = randoms((size_t)M * N, 3);   /* beta = 0.5 reads it */
                    hc_sgemm(pools[p], TA, TB, M, N, K, -1.5f, A, lda, B, ldb, 0.5f, C[p], N);
                }
                float *C0 = randoms((size_t)M * N, 3);
                double worst = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double sum = 0;
                        for (int k = 0; k < K; k++) sum += (double)at(A, lda, TA, i, k) * at(B, ldb, TB, k, j);
                        double want = -1.5 * sum + 0.5 * C0[(size_t)i * N + j];
                        worst = fmax(worst, fabs(want - C[0][(size_t)i * N + j]));
                    }
                const int same = !memcmp(C[0], C[1], sizeof(float) * (size_t)M * N) &&
                                 !memcmp(C[0], C[2], sizeof(float) * (size_t)M * N);
                for (int p = 0; p < 3; p++) free(C[p]);
                free(A);
                free(B);
                free(C0);
                CHECKF(worst < 1e-3, "%dx%dx%d ta %d tb %d: off by %g", M, N, K, ta, tb, worst);
                CHECKF(same, "%dx%dx%d ta %d tb %d: bits differ between 1, 2 and 3 threads", M, N, K, ta, tb);
            }
    hc_pool_free(pools[1]);
    hc_pool_free(pools[2]);
}

/* alpha·XᵀX: exactly symmetric, right, and the same bits on any pool. */
static void test_gram_any_pool(void)
{
    const int T = 300, K = 200;
    float *X = randoms((size_t)T * K, 4), *H[3];
    hc_pool *pools[3] = { NULL, hc_pool_new(2), hc_pool_new(3) };
    CHECK(X && pools[1] && pools[2]);
    for (int p = 0; p < 3; p++) {
        H[p] = malloc(sizeof(float) * (size_t)K * K);
        hc_gram(pools[p], X, T, K, 2.0f / T, H[p]);
    }
    double worst = 0;
    int symmetric = 1;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            double sum = 0;
            for (int t = 0; t < T; t++) sum += (double)X[(size_t)t * K + i] * X[(size_t)t * K + j];
            worst = fmax(worst, fabs(2.0 / T * sum - H[0][(size_t)i * K + j]));
            symmetric &= H[0][(size_t)i * K + j] == H[0][(size_t)j * K + i];
        }
    const int same = !memcmp(H[0], H[1], sizeof(float) * (size_t)K * K) &&
                     !memcmp(H[0], H[2], sizeof(float) * (size_t)K * K);
    for (int p = 0; p < 3; p++) free(H[p]);
    free(X);
    hc_pool_free(pools[1]);
    hc_pool_free(pools[2]);
    CHECKF(worst < 1e-5, "off by %g", worst);
    CHECK(symmetric);
    CHECK(same);
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* OpenBLAS stays on one thread with no pool, in the state
 * OPENBLAS_NUM_THREADS=1 gives, through the first product (which sets up its
 * buffers) and hc_blas_one_thread. OpenBLAS 0.3.21, left half-configured by
 * the preinit (blas_fixed.c), went threaded to a pool it never started and
 * started a stray thread numbered -1. Must run first, before any product. */
extern int blas_cpu_number __attribute__((weak));
extern int blas_num_threads __attribute__((weak));
static void test_one_thread_no_pool(void)
{
    CHECK(&blas_cpu_number && &blas_num_threads);   /* OpenBLAS */
    const int before = threads_now();
    float a[4] = { 1, 2, 3, 4 }, c[4];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);
    hc_blas_one_thread();
    hc_sgemm(NULL, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);
    const int after = threads_now();
    CHECKF(before > 0 && after == before, "%d threads before, %d after", before, after);
    CHECKF(blas_cpu_number == 1 && blas_num_threads == 1, "OpenBLAS: blas_cpu_number %d, blas_num_threads %d",
           blas_cpu_number, blas_num_threads);
    CHECK(c[0] == 7 && c[1] == 10 && c[2] == 15 && c[3] == 22);
}

int main(void)
{
    RUN(test_one_thread_no_pool);
    RUN(test_sgemm_any_pool);
    RUN(test_gram_any_pool);
    return th_done();
}
