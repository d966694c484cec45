/* INT4-GPTQ (Frantar et al. 2022) as the reference implementation does it,
 * see docs/design/gptq.md; stored in GGUF as docs/formats.md, "INT4-GPTQ
 * tensors" describes.
 *
 *   gptq_grid.c   the 4-bit grid of one row over one group (find_params)
 *   gptq_pack.c   HF/AutoGPTQ packing of codes and zero points (v2 zeros)
 *   gptq_layer.c  Hessian, damping, inverse Cholesky factor, lazy-block column loop
 *   gptq_calib.c  calibration through the runtime, block by block
 *   gptq_out.c    hc-quantize's TYPE GPTQ: the native GGUF layout or Q4_0/Q4_1 export
 *
 * Layouts: a weight W is N rows (outputs) of K columns (inputs), row-major,
 * as ggml stores it (ne = [K, N]). Groups are runs of group_size columns:
 * group g = columns [g*gs, min((g+1)*gs, K)). */
#ifndef HC_GPTQ_H
#define HC_GPTQ_H

#include <stddef.h>
#include <stdint.h>
#include "gguf.h"
#include "quantize.h"
#include "threads.h"

#define GPTQ_MAXQ 15          /* 4-bit codes 0..15 */
#define GPTQ_BLOCK 128        /* lazy-batch width of the column loop */

/* hc-quantize IN OUT GPTQ: calibrate, quantize and write o->out (native
 * layout, or g->export_type blocks). 0, or -1 with one line in err. */
int hc_gptq_quantize(const hc_quant_opts *o, const hc_gptq_opts *g, char *err, size_t errlen);

/* ------------------------------------------------------------ grid */

/* How a group's 4-bit codes map to values: value(q) = d*q + m, d and m as
 * stored (fp16 values), so the error feedback sees exactly what is written.
 * GPTQ_NATIVE: GPTQ's find_params, d = fp16(scale), integer zero,
 *   m = -d*zero (exact in f32), q = clamp(rint(w/d) + zero, 0, 15);
 * GPTQ_Q4_0: a ggml Q4_0 block's grid as quantize_row_q4_0_ref chooses it,
 *   d = fp16(max / -8) (max: the value of largest magnitude), zero 8;
 * GPTQ_Q4_1: a ggml Q4_1 block's grid as quantize_row_q4_1_ref chooses it,
 *   d = fp16((max - min) / 15), m = fp16(min), q = clamp(rint((w - m)/d), 0, 15).
 * Codes always round half to even (rintf); d = 0 (a constant group) maps
 * every value to the code of 0 (Q4_0: 8) or of min (Q4_1: 0). */
enum gptq_param { GPTQ_NATIVE = 0, GPTQ_Q4_0 = 1, GPTQ_Q4_1 = 2 };

typedef struct {
    float d, m;               /* value(q) = d*q + m */
    int zero;                 /* zero point (native: the true zero, v2; Q4_0: 8; Q4_1: 0) */
} gptq_grid;

/* Grids of n rows from cols columns: element (row r, column c) at x[c*ld + r]
 * (the column-major working copy of gptq_layer.c); sym applies to NATIVE. */
void gptq_find_params(const float *x, int cols, int n, size_t ld, int sym, int param, gptq_grid *g);
/* Code of w on a grid. */
int gptq_code(const gptq_grid *g, int param, float w);
static inline float gptq_value(const gptq_grid *g, int q) { return g->d * (float)q + g->m; }

/* ------------------------------------------------------------ packing */

/* Words of packed 4-bit values along a dimension of n: ceil(n/8) (the last
 * word is zero-padded when n is not a multiple of 8, which HF cannot store). */
static inline int gptq_words(int n) { return (n + 7) / 8; }
/* codes[N][K] -> qweight[ceil(K/8)][N]: word (r, n) holds inputs 8r..8r+7 of
 * output n, input 8r+i in bits 4i..4i+3. */
void gptq_pack_qweight(const uint8_t *codes, int N, int K, int32_t *qweight);
/* zeros[G][N] -> qzeros[G][ceil(N/8)], output 8c+i of group g in bits 4i of word (g, c). */
void gptq_pack_qzeros(const uint8_t *zeros, int N, int G, int32_t *qzeros);
/* Nibble i of word w (any of the above). */
static inline int gptq_nibble(int32_t w, int i) { return (int)(((uint32_t)w >> (4 * i)) & 15u); }

/* ------------------------------------------------------------ one layer */

typedef struct {
    int group_size;           /* >= 1 */
    int sym;
    int act_order;            /* columns by descending diag(H), static groups */
    int param;                /* enum gptq_param */
    float damp;               /* fraction of mean(diag H) added to the diagonal */
} gptq_params;

typedef struct {
    double loss;              /* the reference's Σ (w-q)²/U_jj² / 2 */
    float damp;               /* damping fraction that let the Cholesky succeed */
    int dead;                 /* columns with H_jj = 0 */
} gptq_stats;

/* The native layout's grid when hc-quantize GPTQ is given no option
 * (docs/design/gptq.md, "Choosing the defaults"): groups of 128, asymmetric. */
#define GPTQ_NATIVE_GROUP 128
#define GPTQ_NATIVE_SYM 0

/* Groups of a row of K columns. */
static inline int gptq_groups(int K, int gs) { return (K + gs - 1) / gs; }

/* Quantize W[N][K] given H[K][K] (2/n Σ x xᵀ, symmetric; overwritten). H NULL:
 * round to nearest on the same grids (no error feedback, as if H = I).
 * Outputs codes[N][K] and grids[G][N] (group g of row n at grids[g*N + n]);
 * with act_order the groups are static, so g_idx[k] = k / gs always.
 * Damping is retried ×10 up to 4 times when the Cholesky fails, then
 * -1 with a message. The products run on pool (NULL: the caller) in pieces
 * fixed by their shape, so no result depends on its thread count. */
int gptq_quantize_layer(hc_pool *pool, const float *W, int N, int K, float *H, const gptq_params *p,
                        uint8_t *codes, gptq_grid *grids, gptq_stats *st, char *err, size_t errlen);
/* Dequantized weights Q[N][K] from codes and grids. */
void gptq_dequant(const uint8_t *codes, const gptq_grid *grids, int N, int K, int gs, float *Q);
/* H[K][K] = 2/T Σ_t x_t x_tᵀ over X[T][K] (both triangles filled). */
void gptq_hessian(hc_pool *pool, const float *X, int T, int K, float *H);
/* ‖(W - Q) X‖ / ‖W X‖ over inputs X[T][K] (0 when W X = 0). */
double gptq_rel_error(hc_pool *pool, const float *W, const float *Q, int N, int K, const float *X, int T);

/* ------------------------------------------------------------ calibration */

/* The result of one quantized weight. */
typedef struct {
    char name[GGUF_MAX_NAME + 1];   /* tensor name in the input */
    int N, K;
    uint8_t *codes;           /* [N][K] */
    gptq_grid *grids;         /* [G][N] */
    double rel_err, seconds;
    float *deq;               /* [N][K] dequantized (what the following blocks saw) */
} gptq_result;

typedef struct {
    gptq_params p;
    int rtn;                  /* no Hessian: round to nearest */
    int calib_tokens, ctx, nthreads;
    int min_cols_multiple;    /* quantize only weights with K % this == 0 (32 for export) */
    const char *calib;        /* text file */
    int quiet;
} gptq_calib_opts;

typedef struct {
    gptq_result *res;         /* in model order: per block q, k, v, output, gate, up, down */
    int n_res;
    int tokens, windows;      /* calibration actually used */
    uint64_t corpus_hash;     /* FNV-1a 64 of the calibration file */
} gptq_run;

/* Quantize every block linear weight of the model at path. 0, or -1 + err. */
int gptq_calibrate(const char *path, const gptq_calib_opts *co, gptq_run *run, char *err, size_t errlen);
void gptq_run_free(gptq_run *run);

#endif
