/* Q4_0 rows in chunks of 16 blocks: the layout the model's copy of its Q4_0
 * matrices takes when their products run on AVX-512 (model_memory.c), so
 * that a chunk's weights load into the kernel's lanes with plain loads, no
 * permutes (docs/design/kernels.md, "Q4_0 in chunks of 16 blocks").
 *
 * A row keeps its bytes (18 a block, the same blocks), reordered within
 * each chunk of 16 blocks; the row's last chunk holds the t < 16 blocks left.
 * A chunk has 16 lanes: lane L holds block 4·(L % 4) + L / 4 of the chunk
 * (the order in which the AVX-512 kernel's block sums come out); a short
 * chunk only the lanes whose block exists. The chunk stores its lanes'
 * fp16 scales (lanes ascending), then four planes, plane i holding the
 * lanes' nibble bytes qs[4i .. 4i + 3] (lanes ascending): in a whole chunk
 * the scales are 32 bytes and each plane 64, one register. */
#ifndef HC_Q4X16_H
#define HC_Q4X16_H

#include <stddef.h>
#include <stdint.h>
#include "ggml_types.h"
#include "weight.h"

#define HC_Q4X16_CHUNK 16   /* blocks per chunk */

/* The block of chunk lane L. */
static inline int hc_q4x16_block_of(int L) { return 4 * (L % 4) + L / 4; }
/* The lanes (bit L) of a chunk of t blocks. */
uint16_t hc_q4x16_lanes(int t);
/* A row of nb blocks into the layout (dst: 18·nb bytes, not src). */
void hc_q4x16_repack(const block_q4_0 *src, uint8_t *dst, int nb);
/* Block b of a row of nb blocks in the layout, as ggml stores it. */
void hc_q4x16_block(const uint8_t *row, int nb, int b, block_q4_0 *out);
/* A row of n elements in the layout, widened to f32 (dequantize_row_q4_0's values). */
void hc_q4x16_row_f32(const uint8_t *row, int n, float *out);

/* Block b of row r of a Q4_0 weight in either layout (weight.h:
 * HC_WEIGHT_GGML, HC_WEIGHT_Q4X16): where it lies, or copied into *buf
 * from the chunks. */
static inline const block_q4_0 *hc_q4_0_block(const hc_weight *w, int r, int b, block_q4_0 *buf)
{
    const block_q4_0 *row = (const block_q4_0 *)w->data + (size_t)r * (size_t)(w->n / QK4_0);
    if (w->kind != HC_WEIGHT_Q4X16) return row + b;
    hc_q4x16_block((const uint8_t *)row, w->n / QK4_0, b, buf);
    return buf;
}

#endif
