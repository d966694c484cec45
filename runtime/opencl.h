/* The device half of the hybrid FFN, through OpenCL 1.2.
 *
 * A layer's hot neurons (PowerInfer's gpu_bucket) live on the device as three
 * compact matrices of k rows in their stored type: gate and up rows (n_embd
 * inputs; F32, F16, Q8_0, Q4_0 or INT4-GPTQ) and down rows (ffn_down_t: n_embd
 * outputs per neuron; a GPTQ ffn_down's columns, kernels_gptq.h). INT4 stays
 * INT4 on the device: a GPTQ gate/up row is uploaded as its codes followed by
 * its groups' {scale, -scale*zero}; down columns as their codes, one group
 * index each, and the pairs of the groups of ffn_down (shared by the columns
 * of a group). Per token the device computes, for hot row r with mask[r] set,
 *   g = gate_r · x,  a = act(g),  h_r = keep(a) ? a * (up_r · x) : 0
 * (the gated FFN; hc_cl_rows below gives every kind) and y = Σ_r h_r · down_r, for B tokens at once (prompts: in tiles of HC_CL_TILE tokens, each row read once per tile). Every sum runs
 * in a fixed order (no atomics), so the device's results are deterministic.
 * keep(a) = a != 0 && |a| >= t_act: ReLU zeros cost no up or down row.
 * x is the activation prepared for the gate type as the CPU kernels prepare it
 * (hc_weight_prepare: f32, Q8_0 blocks for Q8_0/Q4_0 weights, the gathered
 * f32 positions and group sums for GPTQ).
 *
 * hc_cl_layer_ref is the scalar C reference of the two kernels (built from
 * the kernels.h references); the tests hold the device against it. */
#ifndef HC_OPENCL_H
#define HC_OPENCL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "weight.h"

typedef struct hc_cl hc_cl;
typedef struct hc_cl_layer hc_cl_layer;

/* One OpenCL device as listed: no context made, no kernels built. */
typedef struct {
    char platform[128], name[160], version[96];
    int is_gpu;
    unsigned compute_units;
    uint64_t mem_size;          /* CL_DEVICE_GLOBAL_MEM_SIZE */
} hc_cl_info;

enum { HC_CL_MAX_DEVICES = 32 };

/* Every device of every platform, platform by platform (the numbers that
 * --device and HC_OPENCL_DEVICE take), up to max. The count (0 when the
 * platforms have no device), or -1 + one line in err when OpenCL cannot be
 * asked (no platform installed, a build without OpenCL). */
int hc_cl_list(hc_cl_info *out, int max, char *err, size_t errlen);
/* The device a run uses among n listed: device ("N", from --device) when
 * not NULL, else $HC_OPENCL_DEVICE when set and not empty, else the first GPU,
 * else device 0. -1 + one line in err for a number that is not listed. */
int hc_cl_pick(const hc_cl_info *list, int n, const char *device, char *err, size_t errlen);
/* The device a run would use (hc_cl_list, then hc_cl_pick(device)): its
 * number, and what it is in *info; -1 + one line in err when there is none
 * or the number is not listed. Builds nothing. */
int hc_cl_choose(const char *device, hc_cl_info *info, char *err, size_t errlen);
/* "device I: 'NAME' (platform 'P', VERSION, N compute units, SIZE, GPU|a CPU
 * device)": the line a run prints whenever it uses a device. */
void hc_cl_describe(const hc_cl_info *d, int index, char *line, size_t len);
/* When a vendor's OpenCL library is installed but no ICD file names it (so
 * the OpenCL loader cannot see that GPU; usual in containers): one line in
 * hint saying how to register it, and 1. 0 (hint empty) otherwise. Looks in
 * $LD_LIBRARY_PATH and the usual library folders, and in $OCL_ICD_VENDORS or
 * /etc/OpenCL/vendors for the ICD files. */
int hc_cl_icd_hint(char *hint, size_t len);

/* The device hc_cl_pick(device) chooses, with the kernels built. NULL + one
 * line in err when there is none or a call fails. flags: HC_CL_PROFILE times
 * every command on the device (-v, benchmarks: the hot rows' device time, the
 * backend's transfers); without it the queue keeps no timings.
 * HC_CL_BATCH_INVARIANT: the backend (hc_cl_backend_new) gives every row of
 * a step the bits it has alone (--batch-invariant, --parallel): products one
 * input row at a time (mv_T, over all of a step's rows in one launch), no
 * fused FFN neurons, attention and transposed products cut the same way
 * whatever the batch. */
enum { HC_CL_PROFILE = 1, HC_CL_BATCH_INVARIANT = 2 };
hc_cl *hc_cl_open(const char *device, int flags, char *err, size_t errlen);
void hc_cl_free(hc_cl *cl);
/* The device's copy bandwidth: one buffer of `bytes` copied into another
 * reps times (after one untimed copy), read plus written bytes per second;
 * the ceiling its kernels are measured against (scripts/bench-gpu.sh).
 * -1 + err on failure. */
double hc_cl_copy_bandwidth(hc_cl *cl, size_t bytes, int reps, char *err, size_t errlen);
/* The opened device: its number in hc_cl_list and what it is. */
int hc_cl_index(const hc_cl *cl);
const hc_cl_info *hc_cl_about(const hc_cl *cl);
/* How the hot rows' Q8_0 and Q4_0 dots multiply four code bytes at a time,
 * as hc_cl_backend_dots says of the backend's products. */
const char *hc_cl_dots(const hc_cl *cl, int *fell_back);
/* 1 if the kernels handle rows of this weight: ggml F32, F16, Q8_0, Q4_0, or
 * INT4-GPTQ (gate/up rows with their own pairs, down columns with a table). */
int hc_cl_supports(const hc_weight *w, int down);

/* A layer's hot rows as gathered on the host, for its FFN kind (model.h
 * enum hc_ffn_kind: 0 gated, 1 symmetric, 2 sequential):
 *   gated       h = keep(a) ? a * (up·x + up_b) : 0,       a = act(first·x + first_b)
 *   symmetric   h = keep(a) ? a * act(up·x + up_b) : 0
 *   sequential  h = keep(a) ? a : 0                         (first = the up rows, up NULL)
 * first is the gate rows (the up rows without a gate; up is then kind
 * NONE), each weight k rows of n_embd (gate and up of one type taking one
 * prepared x); biases are k floats or NULL (none). down_norm (k floats,
 * ‖down_r‖, or NULL) selects the contribution criterion (sparse.h): then
 * keep(a) is a != 0 and h is set to 0 unless hc_keep_act(|h| * down_norm[r], t_act). */
typedef struct {
    int kind;
    hc_weight first, up, down;
    const float *first_b, *up_b;
    const float *down_norm;
} hc_cl_rows;

/* Device bytes of k rows of weight w (the layer's gate/up or down rows; for
 * k of a GPTQ weight's rows, as gathered: hc_gptq_rows_bytes). A layer is
 * gate + up + down (no gate for a sequential FFN) + a float per row for each
 * per-row bias (the caller adds those). */
uint64_t hc_cl_rows_bytes(const hc_weight *w, int k);

/* Tokens per tile of the hot rows' kernels: a prompt's B tokens go in tiles
 * of this many, each hot row read once per tile (kernels/hot_rows.cl). */
enum { HC_CL_TILE = 8 };
/* Launch geometry, from the device (work groups of wg items, cu compute
 * units). gate_up: one group per (hot row, tile of tokens). down: n outputs in
 * blocks of hc_cl_down_cols(wg) columns, times the slices of the k hot rows
 * that hc_cl_down_splits cuts so that one token's launch has at least twice
 * as many groups as the device has compute units and each lane at most
 * HC_CL_DOWN_ROWS rows of a slice (while every lane keeps two rows or more,
 * and at most 64 slices): a 4096-wide layer is 128 blocks, fewer than an
 * H200's 132 units, and a lane's rows are a chain of loads that wait on each
 * other (h, then the row where h is not zero: 458 rows a lane took 0.43 ms on
 * the H200). The slices' sums are added in a fixed order (kernels/hot_rows.cl). */
enum { HC_CL_DOWN_ROWS = 32 };
int hc_cl_down_cols(int wg);
int hc_cl_down_splits(int n, int k, int wg, unsigned cu);
/* Upload k gathered rows. */
hc_cl_layer *hc_cl_layer_new(hc_cl *cl, const hc_cl_rows *rows, int k, int n_embd, char *err, size_t errlen);
void hc_cl_layer_free(hc_cl_layer *L);
/* Queue B tokens: token b's x (hc_weight_act_bytes of the first rows) at
 * x + b * x_stride, its mask at mask[b * k .. b * k + k); copies both and
 * returns at once (the device works while the caller computes the cold
 * neurons). */
int hc_cl_layer_start(hc_cl_layer *L, const void *x, size_t x_stride, int B, const uint8_t *mask, int act,
                      float t_act, char *err, size_t errlen);
/* Wait for the B tokens: y[B][n_embd], y_b = Σ h_br down_r; h[B][k];
 * *dev_s += device seconds (with HC_CL_PROFILE; else unchanged). */
int hc_cl_layer_finish(hc_cl_layer *L, float *y, float *h, double *dev_s, char *err, size_t errlen);
/* Or leave them on the device, when its backend holds the residual stream
 * (one exchange per layer: runtime/forward.c): y[B][n_embd] goes to view y
 * of the OpenCL backend made on the same hc_cl; h stays there, counted
 * against truth[B][k] (the truly active rows, for a recall check) when not
 * NULL, by one work group per compute unit. Queued; nothing waits. */
int hc_cl_layer_keep(hc_cl_layer *L, hc_view y, const uint8_t *truth, char *err, size_t errlen);
/* What the tokens left on the device used, since the layer was made:
 * counts[0] rows whose mask was set (gate and up read), counts[1] non-zero
 * h (down rows read), counts[2] of those the ones set in truth. Waits for
 * the queue. */
int hc_cl_layer_counts(hc_cl_layer *L, uint64_t counts[3], char *err, size_t errlen);

/* ------------------------------------------------------------ the backend
 * runtime/backend.h on this device (runtime/opencl/backend.c, kernels in
 * kernels/backend.cl, compiled once when the backend is made): every step
 * on f32 activations, weights dequantized in the kernels (ggml F32, F16,
 * BF16, Q8_0, Q4_0; INT4-GPTQ of group sizes that are multiples of 32).
 * NULL + one line in err when the kernels cannot be built. ops->free frees
 * the backend, not cl. docs/design/runtime.md, "The OpenCL backend". */
hc_backend *hc_cl_backend_new(hc_cl *cl, char *err, size_t errlen);
/* The same with source in place of kernels/backend.cl (a variant of it, with
 * the same kernels and arguments): bench_clops times one without a rebuild. */
hc_backend *hc_cl_backend_new_with(hc_cl *cl, const char *source, char *err, size_t errlen);
/* What the device made of each of its kernels (the backend's and the hot
 * rows'), one line each on out after a heading: private bytes an item (on a
 * GPU, registers spilled and arrays kept in memory), local bytes a group, the
 * largest group it runs (NVIDIA lowers it for a kernel's registers); with dir,
 * the two programs' binaries (PTX on NVIDIA) as dir/backend.bin and
 * dir/hot_rows.bin. 0, or -1 with err. */
int hc_cl_backend_report(hc_backend *be, FILE *out, const char *dir, char *err, size_t errlen);
/* How its quantized products multiply four code bytes at a time: "dp4a (PTX,
 * compute capability M.N)" on an NVIDIA GPU that has it (HC_CL_DP4A=0 turns
 * it off), else "bytes widened", with the reason when a build with dp4a
 * failed (HC_CL_DP4A=1 asks for it on any device; *fell_back, when not NULL,
 * says whether it did). Same bits either way. */
const char *hc_cl_backend_dots(const hc_backend *be, int *fell_back);

/* Its launch geometry, plain C so that a test checks it without a device:
 * what the device says (CL_DEVICE_MAX_COMPUTE_UNITS, CL_DEVICE_MAX_WORK_GROUP_SIZE,
 * a GPU or not) in, work items per group and groups per launch out. Local
 * sizes are powers of two (the reductions are trees). */
typedef struct {
    unsigned cu;
    size_t wg_max;
    int gpu;
} hc_clb_device;
enum {
    HC_CLB_TOKENS = 8,      /* input rows per work group of a prompt's transposed product (the tile) */
    HC_CLB_UNIT_F = 8,      /* weights a lane of mv reads per step: F32, F16, BF16 */
    HC_CLB_UNIT_Q = 32,     /* the same, quantized (a block) */
    HC_CLB_Q8_RUN = 32,     /* blocks of an interleaved act_q8 form whose words lie side by side: mv's lanes */
    HC_CLB_MM_ROWS = 64,    /* matrix rows of a tiled product's group (mm16, mm64: B > 1) */
    HC_CLB_MM_ITEMS = 128,  /* its work items: 16 x 8, each 4 rows x (tile / 8) input rows */
    HC_CLB_CHUNK_MAX = 1024, /* positions of one attention work group (their scores in local memory) */
    HC_CLB_CHUNK_FIXED = 256, /* its positions where each row keeps its bits whatever the batch (HC_CL_BATCH_INVARIANT) */
    HC_CLB_T_FIXED = 16,    /* the transposed product's slices there, at most */
    HC_CLB_ATTN_TILE = 4224, /* floats of an attention group's tile of scores (128 positions x 32 lanes + 1 at head_dim 128) */
    HC_CLB_T_PART = 1 << 22  /* floats of the transposed product's slices' sums, at most */
};
/* A product of one input row (kernel mv_T) of rows of `units` steps (n /
 * HC_CLB_UNIT_F or _Q): the lanes that share a row (a power of two, up to
 * 32 on a GPU, 1 on a CPU device), and the rows of a group (up to 256
 * items on a GPU; 4 on a CPU device). */
size_t hc_clb_mv_lanes(const hc_clb_device *d, int units);
size_t hc_clb_mv_rows(const hc_clb_device *d, size_t lanes);
/* act_q8's form of B input rows (the quantized products' input): 1 when
 * its blocks' words are interleaved, word w of HC_CLB_Q8_RUN blocks side by
 * side (the row padded to whole runs); 0 when a block's 32 code bytes lie
 * whole. */
int hc_clb_q8_interleaved(const hc_clb_device *d, int B);
/* The FFN neurons of one input row that also make h's Q8_0 form (glu_T_A
 * with q8): groups of 32 rows (a block of h), the lanes a row gets. */
size_t hc_clb_glu_lanes(const hc_clb_device *d, int units);
/* A product of B > 1 input rows, tiled (kernels mm16_T, mm64_T):
 * HC_CLB_MM_ITEMS items per group, each group HC_CLB_MM_ROWS rows by
 * hc_clb_mm_tile(B) input rows (16 or 64) by a slice of the n inputs; the
 * slices, as many as fill the device where the tiles do not (their sums
 * added in a fixed order by sum_slices), in 32-blocks of n. */
int hc_clb_mm_tile(int B);
int hc_clb_mm_slices(const hc_clb_device *d, int rows, int n, int B);
/* The transposed product (mt_T) of B input rows: one item per unit of 8
 * output columns (units = ceil(cols / 8)), the k rows (inputs) cut into
 * slices so that the groups fill the device, on a GPU 32 groups a compute
 * unit: an item's rows are a chain of loads, one a row, that only other
 * warps can hide (the slices' sums within HC_CLB_T_PART floats, added in a
 * fixed order by sum_slices). */
size_t hc_clb_t_local(const hc_clb_device *d, int units);
int hc_clb_t_slices(const hc_clb_device *d, int units, int k, int B);
/* Where each row keeps its bits whatever the batch (HC_CL_BATCH_INVARIANT):
 * the slices of one input row, HC_CLB_T_FIXED at most, for every batch, and
 * the input rows a launch of S slices takes (their sums within HC_CLB_T_PART). */
int hc_clb_t_slices_fixed(const hc_clb_device *d, int units, int k);
int hc_clb_t_rows(int units, int S);
/* Attention (attn_part then attn_combine): positions per chunk, so that
 * n_head * B * chunks fills the device where n_pos allows (where each row
 * keeps its bits whatever the batch: HC_CLB_CHUNK_FIXED); items per group. */
int hc_clb_attn_chunk(const hc_clb_device *d, int n_head, int B, int n_pos);
size_t hc_clb_attn_local(const hc_clb_device *d, int head_dim);
/* A key or value row's lanes of 4 in attn_part (the last zero-padded); the
 * floats of its value sums for a group of `items` (a float4 per lane and
 * slice of the positions, min(items, lanes) lanes side by side); and the
 * positions of a tile of its scores (HC_CLB_ATTN_TILE floats of rows lanes +
 * 1 long; at least one). */
int hc_clb_attn_lanes(int head_dim);
size_t hc_clb_attn_sums(size_t items, int head_dim);
int hc_clb_attn_tile(int head_dim);
/* Launch b's steps as the geometry above gives them for d instead of its
 * own device (kept within what its kernels take): tests run a GPU's
 * shapes on PoCL. */
void hc_cl_backend_geometry(hc_backend *b, const hc_clb_device *d);
/* Norm: one group per row of n. */
size_t hc_clb_norm_local(const hc_clb_device *d, int n);
/* Element-wise steps over n items (rope pairs, bias, add, FFN activation,
 * gathers, combines): the largest local size that still gives one group
 * per compute unit. */
size_t hc_clb_ew_local(const hc_clb_device *d, size_t n);

/* Scalar reference of start + finish. */
void hc_cl_layer_ref(const hc_cl_rows *rows, int k, int n_embd, const void *x, const uint8_t *mask, int act,
                     float t_act, float *y, float *h);

/* The keep rule above, shared by the CPU and the reference. */
static inline int hc_keep_act(float a, float t_act)
{
    return a != 0.0f && (a >= t_act || -a >= t_act);
}

#endif
