/* The traits table (one entry per weight type) and the loops every type
 * shares: activations arranged for the kernels (once per product, by the
 * caller), rows one at a time for a single vector, register tiles over panels
 * of rows for a batch. */
#include "weight.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "x16.h"
#include "quants.h"

/* Batched products: weight rows are processed in panels of about 3/4 of the
 * L2 cache (PANEL_DEFAULT when the C library does not know it), so a panel
 * stays in L2 while every activation vector passes. Each vector is read from
 * L3 once per panel: on Zen 4 (1 MiB L2) 256 KiB panels held F16 rows of
 * 11008 to 58 GFLOP/s at B = 512, 768 KiB ones reach 86. */
#define PANEL_DEFAULT (256 * 1024)
/* ... and of at least PANEL_ROWS rows, so that long rows still make panels
 * high enough for the vectors' L3 traffic (each vector read once per panel)
 * to stay small: 3/4 of L2 is 17 F32 rows of 11008, whose 512 vectors (22
 * MiB) then came from L3 or memory for every 16 rows (F32 71 GFLOP/s at B =
 * 512; 64-row panels of 2.7 MiB, read from L3 by the tiles: 87). */
#define PANEL_ROWS 64
/* The floor applies only where 3/4 of L2 holds fewer than PANEL_FEW rows: a
 * 4096-wide F32 row is 16 KiB, so 64 rows filled the whole 1 MiB L2 and the
 * panel no longer stayed there while the vectors passed (48 rows, 3/4 of L2:
 * AVX2 F32 71-77 -> 75-81 GFLOP/s at B = 128, AVX-512 87-94 -> 88-97); F16
 * and BF16 rows of 11008 (34 rows in 3/4 of L2) keep their 64. */
#define PANEL_FEW 40

static size_t act_f32(const hc_weight *w) { return (size_t)w->n * sizeof(float); }
static size_t act_bf16(const hc_weight *w) { return (size_t)w->n * sizeof(uint16_t); }
static size_t act_q8(const hc_weight *w) { return (size_t)(w->n / QK8_0) * sizeof(block_q8_0); }
static size_t act_gptq(const hc_weight *w) { return hc_gptq_act_bytes(w->ext); }

static size_t row_bytes_ggml(const hc_weight *w) { return ggml_row_size(w->type, w->n); }
static size_t row_bytes_gptq(const hc_weight *w) { return hc_gptq_bytes(w->ext) / (size_t)w->rows; }

static void row_ggml(const hc_weight *w, int r, float *out)
{
    const void *row = (const char *)w->data + (size_t)r * ggml_row_size(w->type, w->n);
    const uint16_t *h = row;
    switch (w->type) {
    case GGML_TYPE_F32:  memcpy(out, row, (size_t)w->n * sizeof(float)); return;
    case GGML_TYPE_F16:  for (int i = 0; i < w->n; i++) out[i] = fp16_to_fp32(h[i]); return;
    case GGML_TYPE_BF16: for (int i = 0; i < w->n; i++) out[i] = bf16_to_fp32(h[i]); return;
    case GGML_TYPE_Q8_0: dequantize_row_q8_0(row, out, w->n); return;
    default:             dequantize_row_q4_0(row, out, w->n); return;
    }
}

static void row_gptq(const hc_weight *w, int r, float *out) { hc_gptq_row(w->ext, r, out); }

static void row_x16(const hc_weight *w, int r, float *out)
{
    hc_x16_row_f32(w->type, (const uint8_t *)w->data + (size_t)r * ggml_row_size(w->type, w->n), w->n, out);
}

#if defined(__x86_64__)
#define KERNELS2(ref, t) { &hc_ref_##ref, &hc_avx2_##t, &hc_avx512_##t }
#define X16_KERNELS(t, avx2) { &hc_ref_##t##_0, avx2, &hc_avx512_##t##x16 }
#else
#define KERNELS2(ref, t) { &hc_ref_##ref }
#define X16_KERNELS(t, avx2) { &hc_ref_##t##_0 }
#endif
#define KERNELS(t) KERNELS2(t, t)

static const hc_type_traits traits[] = {
    [HC_KT_F32]  = { act_f32,  row_bytes_ggml, row_ggml, KERNELS2(float, f32) },
    [HC_KT_F16]  = { act_f32,  row_bytes_ggml, row_ggml, KERNELS(float) },
    [HC_KT_BF16] = { act_bf16, row_bytes_ggml, row_ggml, KERNELS(bf16) },
    [HC_KT_Q8_0] = { act_q8,   row_bytes_ggml, row_ggml, KERNELS(q8_0) },
    [HC_KT_Q4_0] = { act_q8,   row_bytes_ggml, row_ggml, KERNELS(q4_0) },
    [HC_KT_GPTQ] = { act_gptq, row_bytes_gptq, row_gptq, KERNELS(gptq) },
    /* only made where the type runs on AVX-512, or AVX2 for Q4_0 (model_memory.c); other instruction sets: the
     * reference */
    [HC_KT_Q4X16] = { act_q8, row_bytes_ggml, row_x16, X16_KERNELS(q4, &hc_avx2_q4x16) },
    [HC_KT_Q8X16] = { act_q8, row_bytes_ggml, row_x16, X16_KERNELS(q8, &hc_ref_q8_0) },
};

static int ggml_entry(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32:  return HC_KT_F32;
    case GGML_TYPE_F16:  return HC_KT_F16;
    case GGML_TYPE_BF16: return HC_KT_BF16;
    case GGML_TYPE_Q8_0: return HC_KT_Q8_0;
    case GGML_TYPE_Q4_0: return HC_KT_Q4_0;
    default:             return -1;
    }
}

int hc_kernel_supports(uint32_t type) { return ggml_entry(type) >= 0; }

/* w's traits entry (enum hc_kernel_type). */
static int entry(const hc_weight *w)
{
    int e = w->kind == HC_WEIGHT_GPTQ ? HC_KT_GPTQ : w->kind == HC_WEIGHT_GGML ? ggml_entry(w->type)
            : w->kind != HC_WEIGHT_X16 ? -1 : w->type == GGML_TYPE_Q4_0 ? HC_KT_Q4X16
            : w->type == GGML_TYPE_Q8_0 ? HC_KT_Q8X16 : -1;
    if (e < 0) hc_die("kernels: no kernels for weight kind %d type %u", w->kind, w->type);
    if ((e == HC_KT_Q8_0 || e == HC_KT_Q4_0 || e >= HC_KT_COUNT) && w->n % QK8_0)
        hc_die("kernels: row of %d elements is not whole blocks", w->n);
    return e;
}

const hc_type_traits *hc_traits(const hc_weight *w) { return &traits[entry(w)]; }

/* Every product, gathered row and AXPY of a type runs on one instruction set
 * (the choice is per type, not per operation): a row's bits then do not
 * depend on which of them ran it (docs/design/kernels.md). */
const hc_kernel *hc_kernel_for(const hc_weight *w, int isa)
{
    int e = entry(w);
    const int column = e >= HC_KT_COUNT ? ggml_entry(w->type) : e;   /* chunks of 16: their type's */
    return traits[e].isa[isa == HC_ISA_CHOSEN ? hc_kernel_choice(column) : isa];
}

size_t hc_weight_act_bytes(const hc_weight *w) { return hc_traits(w)->act_bytes(w); }

void hc_weight_prepare(const hc_weight *w, int isa, const float *x, void *act)
{
    hc_kernel_for(w, isa)->prepare(w, x, act);
}

int hc_weight_same_act(const hc_weight *a, const hc_weight *b)
{
    if (a->kind == HC_WEIGHT_GPTQ && b->kind == HC_WEIGHT_GPTQ) return hc_gptq_same_act(a->ext, b->ext);
    return a->kind == b->kind && a->type == b->type && a->n == b->n &&
           (a->kind == HC_WEIGHT_GGML || a->kind == HC_WEIGHT_X16);
}

const char *hc_weight_type_name(const hc_weight *w)
{
    return w->kind == HC_WEIGHT_GPTQ ? "INT4-GPTQ" : ggml_type_name(w->type);
}

void hc_weight_row(const hc_weight *w, int r, float *out) { hc_traits(w)->row_f32(w, r, out); }

size_t hc_weight_bytes(const hc_weight *w)
{
    return w->kind == HC_WEIGHT_NONE ? 0 : (size_t)w->rows * hc_traits(w)->row_bytes(w);
}

void hc_weight_axpy(const hc_weight *w, int isa, int r, int c0, int c1, float a, float *y)
{
    hc_kernel_for(w, isa)->axpy(w, r, c0, c1, a, y);
}

void hc_weight_prefetch(const hc_weight *w, int r, int c0, int c1)
{
    if (w->kind != HC_WEIGHT_GGML && w->kind != HC_WEIGHT_X16) return;
    size_t rb = hc_traits(w)->row_bytes(w);
    const char *row = (const char *)w->data + (size_t)r * rb;
    for (size_t o = rb * (size_t)c0 / (size_t)w->n; o < rb * (size_t)c1 / (size_t)w->n; o += 64) __builtin_prefetch(row + o, 0, 2);
}

void hc_weight_axpy_multi(const hc_weight *w, int isa, int r, int c0, int c1, int nt, const float *a,
                          const int32_t *rows, float *y, size_t y_stride)
{
    const hc_kernel *k = hc_kernel_for(w, isa);
    if (k->axpy_multi) {
        k->axpy_multi(w, r, c0, c1, nt, a, rows, y, y_stride);
        return;
    }
    for (int t = 0; t < nt; t++) k->axpy(w, r, c0, c1, a[t], y + (size_t)rows[t] * y_stride);
}

size_t hc_weight_arranged_bytes(const hc_weight *w, int isa)
{
    const hc_kernel *k = hc_kernel_for(w, isa);
    return k->arrange ? (k->arranged_bytes(w->n) + 63) & ~(size_t)63 : 0;
}

void hc_weight_arrange(const hc_weight *w, int isa, const void *acts, size_t act_stride, int B, void *xa)
{
    const hc_kernel *k = hc_kernel_for(w, isa);
    size_t xs = hc_weight_arranged_bytes(w, isa);
    for (int b = 0; b < B; b++) k->arrange((const char *)acts + (size_t)b * act_stride, w->n, (char *)xa + (size_t)b * xs);
}

/* Decode (B = 1) of rows longer than HC_ROW_BLOCK elements, such as the down
 * projection's 11008, for the kernel that has pieces (F16 on AVX2; the
 * others take dots_streams): the activation (44 KiB
 * in f32) did not stay in the 32 KiB L1 beside the weight stream, and
 * re-reading it from L2 for every row held the stream
 * to 11-19 GB/s against 18-26 on 4096-wide rows. So rows go in groups of
 * HC_ROW_GROUP, each group in column blocks of HC_ROW_BLOCK (16 KiB of f32
 * activation, which stays in L1), each row's accumulators parked between
 * blocks: the dot's steps in its order, so its bits. The hardware prefetchers
 * do not follow the jumps from piece to piece, so each piece prefetches the
 * next one (docs/design/kernels.md, "Decode"). */
#define HC_ROW_BLOCK 4096   /* a multiple of 32 (F16 steps) */
#define HC_ROW_GROUP 16

static void dots_blocked(const hc_weight *w, const hc_kernel *k, int r0, int nr, const void *x, float *y)
{
    const int n = w->n;
    _Alignas(64) float acc[HC_ROW_GROUP][32];
    for (int g = 0; g < nr; g += HC_ROW_GROUP) {
        int gn = nr - g < HC_ROW_GROUP ? nr - g : HC_ROW_GROUP;
        memset(acc, 0, sizeof acc);
        for (int c = 0; c < n; c += HC_ROW_BLOCK) {
            int c1 = n - c <= HC_ROW_BLOCK ? n : c + HC_ROW_BLOCK;
            for (int i = 0; i < gn; i++) {
                /* the next piece: the next row's block, the group's next block, the next group */
                const char *next = i + 1 < gn ? hc_float_row(w, r0 + g + i + 1, c)
                                   : c1 < n ? hc_float_row(w, r0 + g, c1)
                                   : g + gn < nr ? hc_float_row(w, r0 + g + gn, 0) : NULL;
                k->piece(w, r0 + g + i, c, c1, x, acc[i], next);
            }
        }
        for (int i = 0; i < gn; i++) y[g + i] = k->piece_sum(acc[i]);
    }
}

/* y[i] = row r0 + i · xa for i < nr through hc_kernel.dots: the rows split
 * into R runs of q rows (R = the rows dots takes), row i of every run at
 * once, so R ascending streams; the last nr - R * q rows one at a time. */
static void dots_streams(const hc_weight *w, const hc_kernel *k, int r0, int nr, const void *xa, float *y)
{
    int R = k->dots_rm ? k->dots_rm : k->rm, q = nr / R;
    for (int i = 0; i < q; i++) {
        int rows[8];
        float out[8];
        for (int s = 0; s < R; s++) rows[s] = r0 + s * q + i;
        k->dots(w, rows, &xa, out);
        for (int s = 0; s < R; s++) y[s * q + i] = out[s];
    }
    for (int i = R * q; i < nr; i++) y[i] = k->dot(w, r0 + i, xa);
}

/* Whether rows of w go through k->dots as streams (hc_kernel.dots_when):
 * F32's at every width (on Zen 4 one core reads 3 or 4 ascending F32
 * streams about 25 % faster than one), and AVX2's F16, BF16, Q8_0 and Q4_0
 * (on Zen 3, an AVX2-only core, one stream reads 8-9 GB/s and three
 * 11-18); AVX-512's Q4_0, Q8_0 in chunks, INT4-GPTQ, F16 and BF16 where the
 * CPU's row says so (an Intel core: Q4_0 at 58 % of a plain read one row at
 * a time; on Zen 4 AVX-512's F16 and BF16 4096-wide rows read faster one at
 * a time, their activation in L1 beside one stream), the float ones' longer rows
 * everywhere. Otherwise one row at a time: interleaving four neighbouring
 * rows halved the speed of Q8_0/Q4_0 on Zen (docs/design/kernels.md,
 * "Decode"). */
static int as_streams(const hc_weight *w, const hc_kernel *k)
{
    switch (k->dots_when) {
    case HC_DOTS_ALL: return 1;
    case HC_DOTS_BY_CPU: return hc_decode_streams();
    case HC_DOTS_BY_CPU_LONG: return hc_decode_streams() || w->n > HC_ROW_BLOCK;
    default: return w->n > HC_ROW_BLOCK;
    }
}

/* y[i] = row r0 + i · xa for i < nr. Rows longer than HC_ROW_BLOCK in
 * column blocks where the kernel has piece (F16 on AVX2), else as several
 * streams where as_streams says so (dots_streams), else one at a time. */
static void dots(const hc_weight *w, const hc_kernel *k, int r0, int nr, const void *xa, float *y)
{
    if (k->piece && w->n > HC_ROW_BLOCK) {
        dots_blocked(w, k, r0, nr, xa, y);
    } else if (k->dots && as_streams(w, k)) {
        dots_streams(w, k, r0, nr, xa, y);
    } else {
        for (int i = 0; i < nr; i++) y[i] = k->dot(w, r0 + i, xa);
    }
}

/* Bytes per panel: measured once (threads racing here store the same value). */
static size_t panel_bytes(void)
{
    static atomic_size_t cached;
    size_t p = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!p) {
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        p = l2 >= 256 * 1024 && l2 <= 64L * 1024 * 1024 ? (size_t)l2 / 4 * 3 : PANEL_DEFAULT;
        atomic_store_explicit(&cached, p, memory_order_relaxed);
    }
    return p;
}

/* The rows of tile i0 (rn real ones, the last repeated) and the pointers to
 * vectors b0.. of a tile group (tn real ones, the last repeated). */
static void tile_rows(int rm, int r0, int i0, int rn, int *rows)
{
    for (int i = 0; i < rm; i++) rows[i] = r0 + i0 + (i < rn ? i : rn - 1);
}

static void tile_vectors(int n, int b0, int tn, const char *xa, size_t xs, const void **x)
{
    for (int t = 0; t < n; t++) x[t] = xa + (size_t)(b0 + (t < tn ? t : tn - 1)) * xs;
}

/* Only the real pairs of a tile's out[t * rm + i] are stored: a row's vectors
 * inner, since GCC made the rows of each vector a call to memcpy for a few
 * floats (1.6 % of a step of 8 sequences' samples). */
static void tile_store(int rm, const float *out, int b0, int tn, int i0, int rn, float *y, size_t ys)
{
    for (int i = 0; i < rn; i++)
        for (int t = 0; t < tn; t++) y[(size_t)(b0 + t) * ys + (size_t)(i0 + i)] = out[t * rm + i];
}

/* Column-blocked tiles (kernels with tile_part). The vectors go in passes
 * of at most VECTOR_PASS_BYTES (an eighth of a 32 MiB L3, which the other
 * cores and the weights share), so that a pass stays in L3 while the row
 * groups go by (8 MiB was slower at 11008 x 4096, B = 512, on a loaded
 * machine); the rows in groups of at most
 * GROUP_TILES row tiles that fill at most half the panel (the group stays
 * in L2 while the pass's vectors go by; half, because the vectors stream
 * through L2 too). For each vector tile the columns go in blocks of kb, each
 * block of the tile's vectors kept in L1 while every row tile of the group
 * passes over it, each pair's accumulators parked between blocks: the
 * tile's order, so its bits. Per step the tile then reads only its weight
 * rows from L2, not its vectors too (docs/design/kernels.md, "Float tiles,
 * night"). */
#define GROUP_TILES 16
#define VECTOR_PASS_BYTES ((size_t)4 << 20)
#define SEGMENT_COLS 4096

/* Row tiles [p0, p1) (group j's tile at park + (vt * g + j) * pf for vector
 * tile vt of the pass from v0) over columns [s0, s1) for every vector tile of
 * the pass [v0, v1). */
static void blocked_segment(const hc_weight *w, const hc_kernel *k, int r0, int p0, int p1, int g, int s0, int s1,
                            int v0, int v1, const char *xa, size_t xs, float *park)
{
    int rm = k->rm, tm = k->tm, pf = k->tile_park;
    for (int b0 = v0, vt = 0; b0 < v1; b0 += tm, vt++) {
        const void *x[8];
        tile_vectors(tm, b0, v1 - b0 < tm ? v1 - b0 : tm, xa, xs, x);
        for (int c0 = s0; c0 < s1; c0 += k->kb)
            for (int i0 = p0, j = 0; i0 < p1; i0 += rm, j++) {
                int rows[8];
                tile_rows(rm, r0, i0, p1 - i0 < rm ? p1 - i0 : rm, rows);
                k->tile_part(w, rows, x, c0, s1 - c0 < k->kb ? s1 : c0 + k->kb,
                             park + ((size_t)vt * (size_t)g + (size_t)j) * (size_t)pf);
            }
    }
}

static void tiles_blocked(const hc_weight *w, const hc_kernel *k, int r0, int nr, const char *xa, size_t xs, int B,
                          float *y, size_t ys)
{
    int rm = k->rm, tm = k->tm, pf = k->tile_park, n = w->n;
    /* rows longer than SEGMENT_COLS go in segments of it (whole blocks), so
     * a group of a segment holds more rows */
    int sw = n > SEGMENT_COLS ? SEGMENT_COLS / k->kb * k->kb : n;
    size_t seg_bytes = hc_traits(w)->row_bytes(w) * (size_t)sw / (size_t)n;
    int g = (int)(panel_bytes() / 2 / seg_bytes) / rm;
    g = g < 1 ? 1 : g > GROUP_TILES ? GROUP_TILES : g;
    int passes = (int)(((size_t)B * xs + VECTOR_PASS_BYTES - 1) / VECTOR_PASS_BYTES);
    int vp = (B + passes - 1) / passes;
    vp = (vp + tm - 1) / tm * tm;
    /* whole rows: one vector tile's parking at a time; segments: the pass's */
    int vts = sw < n ? vp / tm : 1;
    size_t pb = (size_t)vts * (size_t)g * (size_t)pf * sizeof(float);
    float *park = aligned_alloc(64, (pb + 63) & ~(size_t)63);
    if (!park) hc_die("out of memory");
    for (int v0 = 0; v0 < B; v0 += vp)
        for (int p0 = 0; p0 < nr; p0 += g * rm) {
            int p1 = nr - p0 < g * rm ? nr : p0 + g * rm, v1 = B - v0 < vp ? B : v0 + vp;
            for (int b0 = v0; b0 < v1; b0 += tm * vts) {
                int b1 = v1 - b0 < tm * vts ? v1 : b0 + tm * vts;
                memset(park, 0, pb);
                for (int s0 = 0; s0 < n; s0 += sw)
                    blocked_segment(w, k, r0, p0, p1, g, s0, n - s0 < sw ? n : s0 + sw, b0, b1, xa, xs, park);
                for (int t0 = b0, vt = 0; t0 < b1; t0 += tm, vt++) {
                    int tn = b1 - t0 < tm ? b1 - t0 : tm;
                    const void *x[8];
                    tile_vectors(tm, t0, tn, xa, xs, x);
                    for (int i0 = p0, j = 0; i0 < p1; i0 += rm, j++) {
                        float out[64];
                        k->tile_sum(w, x, park + ((size_t)vt * (size_t)g + (size_t)j) * (size_t)pf, out);
                        tile_store(rm, out, t0, tn, i0, p1 - i0 < rm ? p1 - i0 : rm, y, ys);
                    }
                }
            }
        }
    free(park);
}

/* Rows [p0, p1) times the tn vectors from b0, fewer than the tile takes,
 * by dot: each row against every vector while it is in L1, but rows longer
 * than HC_ROW_BLOCK vector by vector over the panel (then in L2): the
 * vectors' arranged activations (14 KiB each for Q4_0 at 11008 wide) beside
 * the row outgrew the L1, and B = 2 on the down projection ran at half B =
 * 1's speed (bench_kernels cpu avx512-chunks 11008 4096 2: Q4_0 69 against
 * 138-147 GFLOP/s vector by vector; on 4096-wide rows row by row stays
 * ahead, 171-183 against 161). */
static void dots_few(const hc_weight *w, const hc_kernel *k, int r0, int p0, int p1, const char *xa, size_t xs,
                     int b0, int tn, float *y, size_t ys)
{
    if (w->n > HC_ROW_BLOCK) {
        for (int t = b0; t < b0 + tn; t++)
            for (int i = p0; i < p1; i++) y[(size_t)t * ys + (size_t)i] = k->dot(w, r0 + i, xa + (size_t)t * xs);
    } else {
        for (int i = p0; i < p1; i++)
            for (int t = b0; t < b0 + tn; t++) y[(size_t)t * ys + (size_t)i] = k->dot(w, r0 + i, xa + (size_t)t * xs);
    }
}

/* The B arranged vectors (xs apart) times rows [r0, r0 + nr): panels of rows
 * that stay in L2, in each the vectors tm at a time (B <= few_tm: all at
 * once, by the kernel's few) and the rows rm at a time. An edge tile repeats
 * its last row or vector; only the real pairs are stored. */
static void tiles(const hc_weight *w, const hc_kernel *k, int r0, int nr, const char *xa, size_t xs, int B,
                  float *y, size_t ys)
{
    int few = k->few && B <= k->few_tm;
    /* column blocks where a row has more than one and a vector tile is whole */
    if (k->tile_part && !few && B >= k->tm && w->n > k->kb) {
        tiles_blocked(w, k, r0, nr, xa, xs, B, y, ys);
        return;
    }
    size_t rb = hc_traits(w)->row_bytes(w);
    size_t pb = panel_bytes();
    int rm = few && k->few_rm ? k->few_rm : k->rm, tm = few ? k->few_tm : k->tm;
    int panel = (int)(pb / rb) >= PANEL_FEW ? (int)(pb / rb) : PANEL_ROWS;
    panel = panel < nr ? (panel + rm - 1) / rm * rm : nr;
    for (int p0 = 0; p0 < nr; p0 += panel) {
        int p1 = nr - p0 < panel ? nr : p0 + panel;
        for (int b0 = 0; b0 < B; b0 += tm) {
            int tn = B - b0 < tm ? B - b0 : tm;
            if (tn < k->tile_min) {   /* dot gives a tile's bits */
                dots_few(w, k, r0, p0, p1, xa, xs, b0, tn, y, ys);
                continue;
            }
            const void *x[8];
            tile_vectors(tm, b0, tn, xa, xs, x);
            for (int i0 = p0; i0 < p1; i0 += rm) {
                int rn = p1 - i0 < rm ? p1 - i0 : rm, rows[8];
                float out[64];
                tile_rows(rm, r0, i0, rn, rows);
                (few ? k->few : k->tile)(w, rows, x, out);
                tile_store(rm, out, b0, tn, i0, rn, y, ys);
            }
        }
    }
}

void hc_weight_matvec(const hc_weight *w, int isa, int row0, int row1, const void *xa, size_t xs, int B, float *y,
                      size_t y_stride)
{
    const hc_kernel *k = hc_kernel_for(w, isa);
    if (B == 1) {
        dots(w, k, row0, row1 - row0, xa, y);
    } else if (k->tile) {
        tiles(w, k, row0, row1 - row0, (const char *)xa, xs, B, y, y_stride);
    } else {
        for (int r = row0; r < row1; r++)
            for (int b = 0; b < B; b++)
                y[(size_t)b * y_stride + (size_t)(r - row0)] = k->dot(w, r, (const char *)xa + (size_t)b * xs);
    }
}

/* Gathered rows form no stream to follow, so the next listed row is fetched meanwhile. */
void hc_weight_matvec_rows(const hc_weight *w, int isa, const int32_t *idx, int k, int step, const void *xa, float *y)
{
    const hc_kernel *kern = hc_kernel_for(w, isa);
    for (int i = 0; i < k; i++) {
        if (i + 1 < k) hc_weight_prefetch(w, step * idx[i + 1], 0, w->n);
        y[i] = kern->dot(w, step * idx[i], xa);
    }
}
