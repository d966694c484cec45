/* The CPU kernels of the runtime, one set per weight type and instruction set.
 *
 * The layers of a product (HACKING.md, "From a product to the kernels"):
 *   matmul.c   hc_ctx_*      threaded products: chunks of rows over the pool
 *   weight.c   hc_weight_*   the traits table (one entry per weight type) and
 *                            the row / tile loops every type shares
 *   kernels_ISA.c            one file per instruction set: the hc_kernel of
 *                            each type (hc_ref_*, hc_avx2_*, hc_avx512_*)
 *
 * kernels_ref.c is the portable scalar reference every SIMD kernel is tested
 * against and the fallback where no SIMD path runs; the instruction set is
 * chosen at run time (kernels.c). A weight matrix is w->rows rows of w->n
 * elements (weight.h); activations are "prepared" once per vector for the
 * weight's type, as ggml does (F32/F16 weights: the f32 vector itself; BF16
 * weights: the vector rounded to bf16, as ggml's vec_dot_type for BF16;
 * Q8_0/Q4_0 weights: Q8_0 blocks; INT4-GPTQ: see kernels_gptq.h). */
#ifndef HC_KERNELS_H
#define HC_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ggml_types.h"
#include "weight.h"

/* Instruction sets, as indices of hc_type_traits.isa. HC_ISA_CHOSEN is none
 * of them: passed as the `isa` of weight.h it asks for the one chosen for the
 * weight's type (hc_kernel_choice). */
enum hc_isa_id { HC_ISA_SCALAR, HC_ISA_AVX2, HC_ISA_AVX512, HC_ISA_COUNT, HC_ISA_CHOSEN = HC_ISA_COUNT };

/* The weight types with kernels: the traits table's entries (weight.c) and
 * the columns of the table of CPU models (kernel_table.c). Q4_0 and Q8_0 in
 * chunks of 16 blocks (HC_WEIGHT_X16) are no columns: they take their type's
 * choice. */
enum hc_kernel_type { HC_KT_F32, HC_KT_F16, HC_KT_BF16, HC_KT_Q8_0, HC_KT_Q4_0, HC_KT_GPTQ, HC_KT_COUNT,
                      HC_KT_Q4X16 = HC_KT_COUNT, HC_KT_Q8X16 };

/* One weight type on one instruction set (ggml's type_traits_cpu entry). */
typedef struct hc_kernel {
    /* x (w->n floats) -> the prepared activation (hc_weight_act_bytes bytes). */
    void (*prepare)(const hc_weight *w, const float *x, void *act);
    /* Optional (NULL: dot and tile read the prepared activation as is): the
     * prepared activation rearranged once per product for the inner loops,
     * into arranged_bytes(n) bytes aligned to 64. */
    size_t (*arranged_bytes)(int n);
    void (*arrange)(const void *act, int n, void *xa);
    /* Row r of w · xa. */
    float (*dot)(const hc_weight *w, int r, const void *xa);
    /* Optional (NULL: dot per row; F16 on AVX2 has them): rows longer
     * than HC_ROW_BLOCK at B = 1 go through column blocks (weight.c):
     * piece adds columns [c0, c1) of row r (x: the prepared activation) to
     * the row's accumulators parked in acc (32 floats aligned to 64, zeroed
     * before the first piece), in the order dot takes them (c0 and c1
     * multiples of HC_ROW_BLOCK, or c1 = n), and prefetches the next piece
     * (NULL: none) into L2, one line per 64 bytes read; piece_sum gives the
     * row's result from acc, the bits of dot. */
    void (*piece)(const hc_weight *w, int r, int c0, int c1, const void *x, float *acc, const char *next);
    float (*piece_sum)(const float *acc);
    /* Optional (NULL: dot per row; the float types have it, Q8_0 and Q4_0
     * on AVX2 and AVX-512, and INT4-GPTQ on AVX-512): y[i] = row r[i] · x[0]
     * for i < dots_rm (0: rm) (x[0]: the arranged or prepared activation),
     * the bits of dot, the rows read side by side.
     * Which rows at B = 1 are read as ascending streams through it (weight.c;
     * a kernel with piece takes rows longer than HC_ROW_BLOCK in column
     * blocks instead): dots_when. */
    void (*dots)(const hc_weight *w, const int *r, const void *const *x, float *y);
    int dots_rm, dots_when;
    /* Optional register tile (NULL: dot per pair): y[t * rm + i] = row r[i]
     * · x[t] for i < rm, t < tm, every value the bits dot gives. */
    void (*tile)(const hc_weight *w, const int *r, const void *const *x, float *y);
    int rm, tm;
    /* Optional (NULL: tile for every B): the tile for batches of at most
     * few_tm vectors (decoding several sequences at once), which the large
     * tile serves worse: y[t * few_rm + i] for few_rm rows (0: rm) and
     * few_tm vectors (the last repeated), every value the bits dot gives
     * ("Few vectors" in docs/design/kernels.md: F16's, Q4_0's in chunks of
     * 16 and AVX-512 Q8_0's read their rows once for all 8; AVX-512's
     * chunks of 16 take 3 rows where their tile takes 2). */
    void (*few)(const hc_weight *w, const int *r, const void *const *x, float *y);
    int few_tm, few_rm;
    /* The fewest vectors a tile is run for: fewer (B, or the last vectors of
     * B) go by dot, which costs less than a tile padded to tm at those counts
     * (measured per kernel with bench_kernels cpu: docs/design/kernels.md,
     * "Few vectors"); 0: always a tile. */
    int tile_min;
    /* Optional (NULL: tile over whole rows): the tile in column blocks of kb
     * elements, for rows longer than kb and batches of at least one whole
     * vector tile (tm; fewer vectors go over whole rows, which the memory
     * streams faster: AVX-512 F32 at B = 5 ran at 40-47 GFLOP/s in blocks,
     * 50-56 without). weight.c keeps a vector tile's block in L1 while the
     * row tiles of a group pass. tile_part adds columns [c0, c1) (c0 a
     * multiple of kb; c1 one too, or n) of the pairs to their accumulators
     * parked at park (tile_park floats aligned to 64, zeroed before the
     * first block), in the order tile takes them; tile_sum gives tile's y
     * from park, its bits. */
    void (*tile_part)(const hc_weight *w, const int *r, const void *const *x, int c0, int c1, float *park);
    void (*tile_sum)(const hc_weight *w, const void *const *x, const float *park, float *y);
    int kb, tile_park;
    /* y[0 .. c1 - c0) += a · columns [c0, c1) of row r (c0 on a block boundary). */
    void (*axpy)(const hc_weight *w, int r, int c0, int c1, float a, float *y);
    /* Optional (NULL: axpy per t): the multi-token AXPY of a prompt's sparse
     * down rows: for t < nt, (y + rows[t] * y_stride)[0 .. c1 - c0) += a[t] ·
     * columns [c0, c1) of row r, the bits of nt axpy calls, with the row read
     * and converted to floats once for all nt outputs. */
    void (*axpy_multi)(const hc_weight *w, int r, int c0, int c1, int nt, const float *a, const int32_t *rows, float *y,
                       size_t y_stride);
} hc_kernel;

/* One weight type: what does not depend on the instruction set, and its
 * kernel on each (NULL where the build has none). */
typedef struct hc_type_traits {
    size_t (*act_bytes)(const hc_weight *w);
    size_t (*row_bytes)(const hc_weight *w);
    void (*row_f32)(const hc_weight *w, int r, float *out);
    const hc_kernel *isa[HC_ISA_COUNT];
} hc_type_traits;

/* The traits table's entry for w's type (weight.c); dies on a type the
 * runtime has no kernels for (model loading refuses those by name). */
const hc_type_traits *hc_traits(const hc_weight *w);
/* hc_kernel.dots_when: the rows read as streams through dots (the others
 * one at a time): those longer than HC_ROW_BLOCK (0); every row; every row
 * where hc_decode_streams() says so, else none; every row where it says so,
 * else the long ones. */
enum { HC_DOTS_LONG, HC_DOTS_ALL, HC_DOTS_BY_CPU, HC_DOTS_BY_CPU_LONG };

/* w's kernel on isa (HC_ISA_CHOSEN: on the one chosen for w's type). */
const hc_kernel *hc_kernel_for(const hc_weight *w, int isa);
/* 1 if the runtime has kernels for ggml weights of this type. */
int hc_kernel_supports(uint32_t type);

/* The `isa` the products pass (weight.h): the instruction set $HC_KERNELS
 * names ("avx512", "avx2", "scalar"; refused when this CPU does not run it)
 * or the one forced, for every type; else HC_ISA_CHOSEN, each weight type's
 * kernels from the instruction set chosen for it (hc_kernel_choice). */
int hc_isa(void);
/* The instruction set forced, else the best this CPU runs (the quantizers'). */
int hc_isa_top(void);
/* The forced one's name ("avx512", "avx2", "scalar"), or "by type". */
const char *hc_kernel_isa(void);
/* Force a path for tests and benchmarks: "avx512", "avx2", "scalar", or NULL
 * for the choice by type. 0 if this CPU runs it. */
int hc_kernel_force(const char *isa);
/* The instruction set of type kt's kernels (enum hc_kernel_type): the forced
 * one, else this CPU model's row of the table (kernel_table.c), else the
 * best this CPU runs. Fixed for the process, whatever the thread count. */
int hc_kernel_choice(int kt);
/* One line for -v: each type's instruction set and why ("table: Zen 4, ...",
 * "HC_KERNELS", "cpuid: no table row for ..."). */
void hc_kernel_describe(char *buf, size_t size);

/* 1 when the AVX-512 Q4_0 kernels unpack with word permutes (vpermt2w):
 * this CPU model's table row says they run fast there (Zen 4); else they use
 * dword permutes (the same bits, kernels_avx512.c). */
int hc_q4_word_permutes(void);
/* Tests and benchmarks: on = 0 or 1 sets it, -1 back to the table's. Returns
 * hc_q4_word_permutes(). */
int hc_kernel_q4_word_permutes(int on);

/* 1 when AVX-512 decode (B = 1) reads Q4_0 (and Q8_0 in chunks of 16) and
 * INT4-GPTQ rows, and F16 and BF16 rows of every width, as three or four
 * far-apart streams, each fetching ahead (HC_DOTS_BY_CPU*): this CPU model's
 * table row says so, or it has no row (Intel's cores); 0 on the rows where
 * one row at a time measured faster (Zen 4). The same bits either way. */
int hc_decode_streams(void);
/* Tests and benchmarks: on = 0 or 1 sets it, -1 back to the table's. Returns
 * hc_decode_streams(). */
int hc_kernel_decode_streams(int on);

/* The CPU as cpuid names it: vendor string, display family and model. */
typedef struct {
    char vendor[13];
    int family, model;
} hc_cpu_id;
void hc_cpu_identify(hc_cpu_id *c);
/* A row of the table of CPU models (kernel_table.c). */
typedef struct {
    int isa[HC_KT_COUNT];   /* each type's instruction set */
    int wperm;              /* AVX-512 Q4_0 unpacks with word permutes (hc_q4_word_permutes) */
    int streams;            /* AVX-512 decode reads rows as streams (hc_decode_streams) */
    int bf16dp;             /* AVX-512 BF16 by vdpbf16ps where the CPU has it, else its FMAs (hc_bf16_dot) */
} hc_kernel_row;
/* The name of the table's row for c, filled into *row; NULL (and *row
 * untouched) when no row matches c or the row names an instruction set
 * above best (the best the CPU runs). */
const char *hc_kernel_table(const hc_cpu_id *c, int best, hc_kernel_row *row);

/* 1 when the AVX-512 BF16 kernels use vdpbf16ps: the CPU has AVX512_BF16,
 * its table row (if any) says so, and it was not turned off. Otherwise
 * (Ice Lake; a row whose FMAs ran faster; or turned off) they widen the bf16
 * pairs and FMA them in vdpbf16ps's order (docs/design/kernels.md). */
int hc_bf16_dot(void);
/* Tests and benchmarks: on = 0 turns vdpbf16ps off, 1 on where the CPU has
 * it, -1 back to the table's choice. Returns hc_bf16_dot(). */
int hc_kernel_bf16_dot(int on);

/* The kernels of each instruction set file. The float kernels serve F32 and
 * F16 (they read w->type); their AXPY serves BF16 rows too (an AXPY has no
 * activation), which the bf16 kernels borrow. */
extern const hc_kernel hc_ref_float, hc_ref_bf16, hc_ref_q8_0, hc_ref_q4_0, hc_ref_gptq;
#if defined(__x86_64__)
extern const hc_kernel hc_avx2_float, hc_avx2_f32, hc_avx2_bf16, hc_avx2_q8_0, hc_avx2_q4_0, hc_avx2_gptq,
    hc_avx2_q4x16;
extern const hc_kernel hc_avx512_float, hc_avx512_f32, hc_avx512_bf16, hc_avx512_q8_0, hc_avx512_q4_0, hc_avx512_gptq,
    hc_avx512_q4x16, hc_avx512_q8x16;
#endif

/* Row r of a F32, F16 or BF16 weight, from column c. */
static inline const char *hc_float_row(const hc_weight *w, int r, int c)
{
    size_t es = w->type == GGML_TYPE_F32 ? 4 : 2;
    return (const char *)w->data + ((size_t)r * (size_t)w->n + (size_t)c) * es;
}

/* The vectors an edge tile really has (at most tm): weight.c fills the
 * batch's last tile with copies of its last vector, which the SIMD float
 * tiles leave out (AVX-512 F32 and BF16 compute 2 or 4 vectors, not 6: at
 * B = 128 the last of 22 tiles has 2, 3 % of the work). */
static inline int hc_real_vectors(const void *const *x, int tm)
{
    int t = 1;
    while (t < tm && x[t] != x[t - 1]) t++;
    return t;
}

/* y[t * rm + r] for t in [nt, tm): copies of vector nt - 1's. */
static inline void hc_copy_edge(float *y, int nt, int rm, int tm)
{
    for (int t = nt; t < tm; t++)
        for (int r = 0; r < rm; r++) y[t * rm + r] = y[(nt - 1) * rm + r];
}

/* The quantized tiles fetch into L2 (prefetcht1), chunk by chunk, the same
 * chunk of the row tile weight.c runs next (the rows `ahead` bytes after
 * theirs), so that the memory works while the integer arithmetic does
 * (AVX-512 Q8_0 at B = 8: 135 -> 185 GFLOP/s, GPTQ on 11008-wide rows
 * 127-134 -> 187-189; the whole next tile fetched by weight.c before each
 * tile gave 135 for Q8_0: docs/design/kernels.md, "Few vectors"). */
static inline void hc_prefetch_next_tile(const void *chunk, size_t ahead, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)chunk + ahead + o, 0, 2);
}

/* A row's chunk of `whole` units (blocks) of bs bytes at p, of which n are
 * the row's: p itself when n >= whole, else those n copied into pad and
 * zeros after them (no codes, no scales: the missing units add 0), so that
 * a row's short last chunk goes through the whole chunk's loads. */
static inline const void *hc_whole_chunk(const void *p, int n, int whole, size_t bs, void *pad)
{
    if (n >= whole) return p;
    memset(pad, 0, (size_t)whole * bs);
    memcpy(pad, p, (size_t)n * bs);
    return pad;
}

/* rows[i] = where row r[i] of a F32, F16 or BF16 weight starts, i < rm. */
static inline void hc_float_rows(const hc_weight *w, const int *r, int rm, const void **rows)
{
    for (int i = 0; i < rm; i++) rows[i] = hc_float_row(w, r[i], 0);
}

/* Shared by every instruction set: the prepared activation of the float
 * kernels (x itself) and its arrangement, the bf16 kernels' arrangement (their
 * activation is x rounded to bf16 as ggml's fp32_to_bf16: nearest even, NaN
 * kept and quieted, by each instruction set's own prepare), and GPTQ's
 * activation and row AXPY (kernels_ref.c). */
void hc_act_copy(const hc_weight *w, const float *x, void *act);
/* The float kernels' arrangement (SIMD paths): the same floats, each vector
 * of a batch padded so that the vectors' strides are not multiples of 4 KiB. */
size_t hc_float_arranged_bytes(int n);
void hc_float_arrange(const void *act, int n, void *xa);
/* The bf16 kernels' arrangement (SIMD paths): the same bf16, padded alike. */
size_t hc_bf16_arranged_bytes(int n);
void hc_bf16_arrange(const void *act, int n, void *xa);
void hc_ref_gptq_prepare(const hc_weight *w, const float *x, void *act);
void hc_ref_gptq_axpy(const hc_weight *w, int r, int c0, int c1, float a, float *y);
/* The reference's dot for every pair of a rm x tm tile (the SIMD tiles on the
 * f32 GPTQ activation, groups not a multiple of 32). */
void hc_ref_gptq_tile(const hc_weight *w, const int *rows, int rm, const void *const *x, int tm, float *y);

#endif
