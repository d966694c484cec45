/* Q4_0 and Q8_0 rows in chunks of 16 blocks: the layout the model's copy of
 * those matrices takes when their products run on AVX-512, and Q4_0's on
 * AVX2 (model_memory.c), so that a chunk's weights load into the kernel's
 * lanes with plain loads, no permutes, shuffles or inserts
 * (docs/design/kernels.md, "Q4_0 and Q8_0 in chunks of 16 blocks", "AVX2
 * Q4_0 in chunks of 16").
 *
 * A row keeps its size (the block's bytes, the same blocks), reordered within
 * each chunk of 16 blocks; the row's last chunk holds the t < 16 blocks left.
 * A chunk has 16 lanes: lane L holds block 4·(L % 4) + L / 4 of the chunk
 * (the order in which the AVX-512 Q4_0 kernel's block sums come out); a
 * short chunk only the lanes whose block exists. The chunk stores its lanes'
 * fp16 scales (lanes ascending), then planes, plane i holding the lanes'
 * code bytes qs[4i .. 4i + 3] (lanes ascending): four planes of Q4_0's
 * nibble bytes, eight of Q8_0's codes, those stored plus 128 (x ^ 0x80,
 * unsigned, as vpdpbusd reads them). In a whole chunk the scales are 32
 * bytes and each plane 64, one register. */
#ifndef HC_X16_H
#define HC_X16_H

#include <stddef.h>
#include <stdint.h>
#include "ggml_types.h"
#include "weight.h"

#define HC_X16_CHUNK 16   /* blocks per chunk */

/* The block of chunk lane L (the map is its own inverse). */
static inline int hc_x16_block_of(int L) { return 4 * (L % 4) + L / 4; }
/* The lanes (bit L) of a chunk of t blocks. */
uint16_t hc_x16_lanes(int t);
/* 1 when the products of type's rows read them in the layout on this machine
 * (the kernels chosen for it: Q4_0 on AVX2 or AVX-512, Q8_0 on AVX-512): a
 * copy of rows that products read (not AXPY) is then made in it. */
int hc_x16_wanted(uint32_t type);
/* A row of nb blocks of type (GGML_TYPE_Q4_0 or Q8_0) into the layout (dst:
 * the row's bytes, not src). */
void hc_x16_repack(uint32_t type, const void *src, uint8_t *dst, int nb);
/* Block b of a row of nb blocks in the layout, as ggml stores it. */
void hc_x16_block(uint32_t type, const uint8_t *row, int nb, int b, void *out);
/* A row of n elements in the layout, widened to f32 (ggml's dequantized values). */
void hc_x16_row_f32(uint32_t type, const uint8_t *row, int n, float *out);

/* A chunk of t < 16 blocks at p (type's, in the layout) as a whole chunk
 * of 16 at out (ggml_type_size(type) * 16 bytes): the missing lanes'
 * scales and codes zero, so that a kernel without expanding loads (AVX2)
 * reads a row's last chunk as the others. */
void hc_x16_pad(uint32_t type, const uint8_t *p, int t, uint8_t *out);

/* A Q8_0 activation arranged for the Q4_0 and Q8_0 kernels that take a row
 * 16 blocks a step (AVX-512's, and AVX2's Q4_0): per chunk of 16 blocks of
 * the activation, the bytes that meet each weight lane's codes, lo where
 * they meet a block's first 16 code bytes and hi its last 16 (Q8_0), or its
 * low and high nibbles (Q4_0); and block 4g+m's -bias·Σx (corr) and scale
 * (d) in lane 4m+g, the lane whose integer sum is that block's in those
 * kernels. Zeros past the last block. Two ways to meet the weights' codes:
 * HC_X16_PLANES (rows in chunks of 16, above): lane 4m+g of plane i holds
 * block 4g+m's bytes qs[4i .. 4i + 3] in lo[i], qs[16 + 4i ..] in hi[i];
 * HC_X16_GROUPS (ggml's layout, each block's 16 code bytes loaded as one
 * 128-bit lane): block 4g+m's qs[0 .. 16) at byte 16m of lo[g], qs[16 ..
 * 32) of hi[g]. bias: what the weights' codes are stored plus (8: Q4_0's
 * nibbles; 128: Q8_0 in chunks of 16). 640 bytes a chunk, which the kernels
 * read as registers. */
typedef struct {
    int8_t lo[4][64], hi[4][64];
    int32_t corr[16];
    float d[16];
} hc_x16_act;

enum { HC_X16_GROUPS, HC_X16_PLANES };

/* Bytes of the arrangement of an n-element activation. */
static inline size_t hc_x16_act_bytes(int n)
{
    return sizeof(hc_x16_act) * (size_t)((n / 32 + HC_X16_CHUNK - 1) / HC_X16_CHUNK);
}
/* act: n / 32 Q8_0 blocks; out: hc_x16_act_bytes(n) bytes. */
void hc_x16_arrange(const void *act, int n, int layout, int bias, void *out);

/* Block b of row r of a Q4_0 or Q8_0 weight (blocks of bs bytes) in either
 * layout (weight.h: HC_WEIGHT_GGML, HC_WEIGHT_X16): where it lies, or copied
 * into *buf from the chunks. bs is the caller's constant: AXPY asks per
 * block. */
static inline const void *hc_quant_block(const hc_weight *w, int r, int b, size_t bs, void *buf)
{
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * (size_t)(w->n / 32) * bs;
    if (w->kind != HC_WEIGHT_X16) return row + (size_t)b * bs;
    hc_x16_block(w->type, row, w->n / 32, b, buf);
    return buf;
}
static inline const block_q4_0 *hc_q4_0_block(const hc_weight *w, int r, int b, block_q4_0 *buf)
{
    return hc_quant_block(w, r, b, sizeof(block_q4_0), buf);
}
static inline const block_q8_0 *hc_q8_0_block(const hc_weight *w, int r, int b, block_q8_0 *buf)
{
    return hc_quant_block(w, r, b, sizeof(block_q8_0), buf);
}

#endif
