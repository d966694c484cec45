/* Products on one OpenBLAS thread each, in pieces fixed by the shape
 * (blas_fixed.h says why). A piece is a run of PIECE rows of the output
 * (or columns, when it has more columns than rows): sgemm's rounding of an
 * output element depends on where the element sits in the call, so the
 * pieces must not follow the thread count, only the shape. */
#include "blas_fixed.h"

#include <pthread.h>
#include <stddef.h>

enum {
    PIECE = 64,                 /* output rows (or columns) per call */
    MAX_PIECES = 1 << 16,       /* pieces grow past this (hc_pool_run's limit is 2^20) */
    MIN_SPLIT_WORK = 1 << 18    /* multiply-adds below which one call does it all */
};

static void one_thread(void) { openblas_set_num_threads(1); }

/* OpenBLAS starts its thread pool when the library loads, before main: under
 * an address-space limit (`ulimit -v` of 100-160 MB) a thread of that pool
 * fails to start and the exit waits for it forever, even after --version.
 * Every product here runs OpenBLAS on one thread, so the pool is never used.
 * OPENBLAS_NUM_THREADS=1 in the environment would make OpenBLAS start none,
 * but a program cannot set it in time: its initialiser runs before main and
 * any constructor of ours, and libc's initialiser resets the environment
 * after the executable's preinit array. What it honours is a thread count
 * already set when it initialises, set here from the preinit array, which
 * the dynamic loader runs before any shared library's initialiser: the two
 * counts OPENBLAS_NUM_THREADS=1 would set (exported by OpenBLAS, 0 until
 * then; weak, so another BLAS without them links). Both, or OpenBLAS is
 * left half-configured: with blas_num_threads still 0 (0.3.21, Debian 12),
 * its first buffer allocation sets blas_cpu_number back to the processor
 * count, so that products go threaded to a pool never started (a hang), and
 * openblas_set_num_threads(1) "grows" the pool of none by starting a server
 * thread numbered -1 that writes before its table of threads: together a
 * segmentation fault of hc-quantize's GPTQ 13 times in 1500 runs. This
 * object is linked into every program that calls OpenBLAS. */
extern int blas_cpu_number __attribute__((weak));
extern int blas_num_threads __attribute__((weak));
static void no_blas_pool(void)
{
    if (&blas_cpu_number && &blas_num_threads) blas_cpu_number = blas_num_threads = 1;
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit_no_blas_pool)(void) = no_blas_pool;

/* once per process: the products of a training loop call it every step */
void hc_blas_one_thread(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, one_thread);
}

typedef struct {
    enum CBLAS_TRANSPOSE ta, tb;
    int M, N, K, piece, by_rows;
    float alpha, beta;
    const float *A, *B;
    int lda, ldb, ldc;
    float *C;
} gemm_job;

/* The width of a piece over a dimension of n. */
static int piece_width(int n)
{
    int w = PIECE;
    while ((n + w - 1) / w > MAX_PIECES) w *= 2;
    return w;
}

static void gemm_piece(void *arg, int chunk, int ith)
{
    (void)ith;
    const gemm_job *j = arg;
    const int lo = chunk * j->piece, n = j->by_rows ? j->M : j->N, hi = lo + j->piece < n ? lo + j->piece : n;
    const float *A = j->A, *B = j->B;
    float *C = j->C;
    if (j->by_rows) {   /* rows lo..hi of op(A) and of C */
        A += j->ta == CblasNoTrans ? (size_t)lo * j->lda : (size_t)lo;
        C += (size_t)lo * j->ldc;
        cblas_sgemm(CblasRowMajor, j->ta, j->tb, hi - lo, j->N, j->K, j->alpha, A, j->lda, B, j->ldb, j->beta, C,
                    j->ldc);
    } else {            /* columns lo..hi of op(B) and of C */
        B += j->tb == CblasNoTrans ? (size_t)lo : (size_t)lo * j->ldb;
        C += lo;
        cblas_sgemm(CblasRowMajor, j->ta, j->tb, j->M, hi - lo, j->K, j->alpha, A, j->lda, B, j->ldb, j->beta, C,
                    j->ldc);
    }
}

void hc_sgemm(hc_pool *pool, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    hc_blas_one_thread();
    if (M <= 0 || N <= 0) return;
    gemm_job j = { ta, tb, M, N, K, 0, M >= N, alpha, beta, A, B, lda, ldb, ldc, C };
    const int n = j.by_rows ? M : N;
    const double work = (double)M * N * (K > 0 ? K : 1);
    j.piece = work < MIN_SPLIT_WORK ? n : piece_width(n);
    const int pieces = (n + j.piece - 1) / j.piece;
    if (!pool || pieces == 1) {
        for (int c = 0; c < pieces; c++) gemm_piece(&j, c, 0);
        return;
    }
    hc_pool_run(pool, gemm_piece, &j, pieces);
}

typedef struct {
    const float *X;
    int T, K, piece;
    float alpha;
    float *H;
} gram_job;

/* Rows lo..hi of H from the diagonal on: H[lo:hi, lo:K] = alpha·X[:, lo:hi]ᵀ·X[:, lo:K]. */
static void gram_piece(void *arg, int chunk, int ith)
{
    (void)ith;
    const gram_job *g = arg;
    const int lo = chunk * g->piece, hi = lo + g->piece < g->K ? lo + g->piece : g->K;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, g->K - lo, g->T, g->alpha, g->X + lo, g->K,
                g->X + lo, g->K, 0.0f, g->H + (size_t)lo * g->K + lo, g->K);
}

void hc_gram(hc_pool *pool, const float *X, int T, int K, float alpha, float *H)
{
    hc_blas_one_thread();
    if (K <= 0) return;
    gram_job g = { X, T, K, piece_width(K), alpha, H };
    const int pieces = (K + g.piece - 1) / g.piece;
    if (pool && pieces > 1)
        hc_pool_run(pool, gram_piece, &g, pieces);
    else
        for (int c = 0; c < pieces; c++) gram_piece(&g, c, 0);
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < K; j++) H[(size_t)j * K + i] = H[(size_t)i * K + j];
}
