/* OpenBLAS products whose bits do not depend on the thread count.
 *
 * OpenBLAS's own threads change how it blocks a product, and so how its sums
 * round: under OPENBLAS_CORETYPE=Haswell with OPENBLAS_L2_SIZE=512 (what
 * Zen 5 machines set) sgemm and ssyrk with an inner dimension of 256 or more
 * differ between one and two threads, and so does sgemm at 1000³ with
 * Cooper Lake's kernels. So OpenBLAS runs on one thread here, and a product's
 * output is cut into pieces fixed by its shape alone, which hc's pool shares
 * out: each piece is one single-threaded call, whatever thread runs it and
 * however many there are (docs/design/gptq.md, "Thread count"). */
#ifndef HC_BLAS_FIXED_H
#define HC_BLAS_FIXED_H

#include <cblas.h>

#include "threads.h"

/* OpenBLAS on one thread from now on (every function below calls it; call
 * it before a LAPACK routine too). */
void hc_blas_one_thread(void);

/* Row-major C[M][N] = alpha·op(A)·op(B) + beta·C, as cblas_sgemm, with the
 * pieces on pool (NULL: on the caller). */
void hc_sgemm(hc_pool *pool, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* H[K][K] = alpha·XᵀX over X[T][K], both triangles (the upper one computed
 * in pieces of rows, then mirrored, so H is exactly symmetric). */
void hc_gram(hc_pool *pool, const float *X, int T, int K, float alpha, float *H);

#endif
