/* GPTQ on one linear layer (docs/design/gptq.md; IST-DASLab/gptq, gptq.py:
 * fasterquant), with OpenBLAS and LAPACK doing every O(K³) and O(N·K²) step,
 * each on one OpenBLAS thread; the products are cut into pieces fixed by
 * their shape and shared over the pool (blas_fixed.h), so no bit depends on
 * the thread count.
 *
 * The working copy is W transposed, Wt[K][N], so that column j of W (what
 * the loop quantizes, for all N rows at once) is one contiguous row. The
 * upper Cholesky factor U of H⁻¹ is row-major, so the loop reads U[j][j..]
 * contiguously. LAPACK is column-major: a row-major symmetric matrix is its
 * own transpose, and LAPACK's lower triangle is our upper one, so potrf('L')
 * -> potri('L') -> potrf('L') leaves U (H⁻¹ = UᵀU) in our upper triangle while
 * our lower triangle still holds the damped H (used to retry). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "blas_fixed.h"
#include "gptq.h"

extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
extern void spotri_(const char *uplo, const int *n, float *a, const int *lda, int *info);

#define DAMP_RETRIES 4

void gptq_hessian(hc_pool *pool, const float *X, int T, int K, float *H)
{
    hc_gram(pool, X, T, K, 2.0f / (float)T, H);
}

double gptq_rel_error(hc_pool *pool, const float *W, const float *Q, int N, int K, const float *X, int T)
{
    const size_t nk = (size_t)N * K, nt = (size_t)N * T;
    float *D = malloc(sizeof(float) * nk), *E = malloc(sizeof(float) * nt), *R = malloc(sizeof(float) * nt);
    if (!D || !E || !R) {
        free(D); free(E); free(R);
        return NAN;
    }
    for (size_t i = 0; i < nk; i++) D[i] = W[i] - Q[i];
    hc_sgemm(pool, CblasNoTrans, CblasTrans, N, T, K, 1.0f, D, K, X, K, 0.0f, E, T);
    hc_sgemm(pool, CblasNoTrans, CblasTrans, N, T, K, 1.0f, W, K, X, K, 0.0f, R, T);
    double e = 0, r = 0;
    for (size_t i = 0; i < nt; i++) {
        e += (double)E[i] * E[i];
        r += (double)R[i] * R[i];
    }
    free(D); free(E); free(R);
    return r > 0 ? sqrt(e / r) : 0.0;
}

void gptq_dequant(const uint8_t *codes, const gptq_grid *grids, int N, int K, int gs, float *Q)
{
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            Q[(size_t)n * K + k] = gptq_value(&grids[(size_t)(k / gs) * N + n], codes[(size_t)n * K + k]);
}

/* U with H⁻¹ = UᵀU in the upper triangle of H (see the top). The damping
 * fraction grows ×10 while the Cholesky fails; *damp returns the one used. */
static int inverse_factor(float *H, int K, float *damp, char *err, size_t errlen)
{
    double mean = 0;
    for (int i = 0; i < K; i++) mean += H[(size_t)i * K + i];
    mean /= K;
    float *diag = malloc(sizeof(float) * (size_t)K);
    if (!diag) {
        snprintf(err, errlen, "out of memory for a %d x %d Hessian", K, K);
        return -1;
    }
    for (int i = 0; i < K; i++) diag[i] = H[(size_t)i * K + i];
    float f = *damp;
    int info = 1;
    for (int attempt = 0; attempt <= DAMP_RETRIES; attempt++) {
        if (attempt > 0) {
            /* restore H's upper triangle from the intact lower one */
            for (int i = 0; i < K; i++)
                for (int j = i + 1; j < K; j++) H[(size_t)i * K + j] = H[(size_t)j * K + i];
            f = f > 0 ? f * 10.0f : 0.01f;
        }
        const float lambda = (float)(f * mean);
        for (int i = 0; i < K; i++) H[(size_t)i * K + i] = diag[i] + lambda;
        hc_blas_one_thread();   /* threaded potrf/potri round differently */
        spotrf_("L", &K, H, &K, &info);
        if (info == 0) spotri_("L", &K, H, &K, &info);
        if (info == 0) spotrf_("L", &K, H, &K, &info);
        if (info == 0) break;
    }
    free(diag);
    if (info != 0) {
        snprintf(err, errlen, "the damped Hessian is not positive definite even with damp %g "
                 "(more calibration tokens may help)", (double)f);
        return -1;
    }
    *damp = f;
    return 0;
}

/* Columns by descending diag(H), ties by index (deterministic). */
typedef struct { float d; int k; } diag_key;
static int by_diag_desc(const void *pa, const void *pb)
{
    const diag_key *a = pa, *b = pb;
    if (a->d != b->d) return a->d > b->d ? -1 : 1;
    return (a->k > b->k) - (a->k < b->k);
}

/* Rows per lazy block: the largest multiple of gs up to GPTQ_BLOCK (gs if
 * larger), so every group lies inside one block and its parameters come from
 * weights that have received every earlier column's update. */
static int block_cols(int gs) { return gs >= GPTQ_BLOCK ? gs : GPTQ_BLOCK / gs * gs; }

int gptq_quantize_layer(hc_pool *pool, const float *W, int N, int K, float *H, const gptq_params *p,
                        uint8_t *codes, gptq_grid *grids, gptq_stats *st, char *err, size_t errlen)
{
    const int gs = p->group_size, B = block_cols(gs), fb = H != NULL;
    const int stat = p->act_order && fb;
    float *Wt = malloc(sizeof(float) * (size_t)K * N);
    float *err1 = malloc(sizeof(float) * (size_t)B * N);
    int *perm = stat ? malloc(sizeof(int) * (size_t)K) : NULL;
    float *tmp = stat ? malloc(sizeof(float) * (size_t)K * (size_t)(K > N ? K : N) + sizeof(diag_key) * (size_t)K) : NULL;
    int rc = -1;
    memset(st, 0, sizeof *st);
    st->damp = p->damp;
    if (!Wt || !err1 || (stat && (!perm || !tmp))) {
        snprintf(err, errlen, "out of memory for a %d x %d layer", N, K);
        goto done;
    }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) Wt[(size_t)k * N + n] = W[(size_t)n * K + k];
    if (fb)
        for (int k = 0; k < K; k++)
            if (H[(size_t)k * K + k] == 0.0f) {   /* dead input: never active */
                H[(size_t)k * K + k] = 1.0f;
                memset(Wt + (size_t)k * N, 0, sizeof(float) * (size_t)N);
                st->dead++;
            }
    if (stat) {
        /* static groups from the (dead-zeroed) weights before reordering */
        for (int g = 0; g * gs < K; g++)
            gptq_find_params(Wt + (size_t)g * gs * N, K - g * gs < gs ? K - g * gs : gs, N, (size_t)N,
                             p->sym, p->param, grids + (size_t)g * N);
        diag_key *keys = (diag_key *)tmp;   /* tmp is free until the permutation */
        for (int k = 0; k < K; k++) keys[k] = (diag_key){ H[(size_t)k * K + k], k };
        qsort(keys, (size_t)K, sizeof *keys, by_diag_desc);
        for (int k = 0; k < K; k++) perm[k] = keys[k].k;
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) tmp[(size_t)i * K + j] = H[(size_t)perm[i] * K + perm[j]];
        memcpy(H, tmp, sizeof(float) * (size_t)K * K);
        for (int j = 0; j < K; j++) memcpy(tmp + (size_t)j * N, Wt + (size_t)perm[j] * N, sizeof(float) * (size_t)N);
        memcpy(Wt, tmp, sizeof(float) * (size_t)K * N);
    }
    if (fb && inverse_factor(H, K, &st->damp, err, errlen) != 0) goto done;
    hc_blas_one_thread();   /* for sger */
    const float *U = H;

    for (int i1 = 0; i1 < K; i1 += B) {
        const int i2 = K - i1 < B ? K : i1 + B;
        for (int j = i1; j < i2; j++) {
            float *w = Wt + (size_t)j * N, *e = err1 + (size_t)(j - i1) * N;
            const int col = stat ? perm[j] : j;
            gptq_grid *gr = grids + (size_t)(col / gs) * N;
            if (!stat && j % gs == 0)
                gptq_find_params(w, K - j < gs ? K - j : gs, N, (size_t)N, p->sym, p->param, gr);
            const float d = fb ? U[(size_t)j * K + j] : 1.0f;
            for (int n = 0; n < N; n++) {
                const int q = gptq_code(&gr[n], p->param, w[n]);
                const float delta = w[n] - gptq_value(&gr[n], q);
                codes[(size_t)n * K + col] = (uint8_t)q;
                e[n] = delta / d;
                st->loss += (double)e[n] * e[n] / 2;
            }
            if (fb && j + 1 < i2)   /* W1[:, j+1:] -= err · U1[j, j+1:] */
                cblas_sger(CblasRowMajor, i2 - j - 1, N, -1.0f, U + (size_t)j * K + j + 1, 1, e, 1,
                           Wt + (size_t)(j + 1) * N, N);
        }
        if (fb && i2 < K)   /* W[:, i2:] -= Err1 · U[i1:i2, i2:] */
            hc_sgemm(pool, CblasTrans, CblasNoTrans, K - i2, N, i2 - i1, -1.0f, U + (size_t)i1 * K + i2, K,
                     err1, N, 1.0f, Wt + (size_t)i2 * N, N);
    }
    rc = 0;
done:
    free(Wt);
    free(err1);
    free(perm);
    free(tmp);
    return rc;
}
