/* The block manager of the paged KV cache (vLLM's BlockSpaceManager, without
 * sharing): which of the pool's blocks are free. A sequence's block table
 * (model.h, hc_seq_rows) lists the blocks it took, in position order; the
 * scheduler (scheduler.c) takes them as its sequences grow and gives them back
 * when one finishes or is preempted. docs/design/runtime.md, "Many prompts
 * at once". */
#ifndef HC_BLOCKS_H
#define HC_BLOCKS_H

#include <stdint.h>
#include "model.h"

typedef struct {
    int n, n_free;
    int32_t *free;   /* [n]: the free blocks' ids, the next one taken last */
} hc_blocks;

/* The bytes of a block: k and v of `block` positions in every layer,
 * kv_bytes (hc_kv_bytes) a position's element of each. */
uint64_t hc_blocks_bytes(const hc_hparams *hp, int block, int kv_bytes);
/* All n blocks free; 0, or -1 when out of memory. */
int hc_blocks_init(hc_blocks *b, int n);
void hc_blocks_free(hc_blocks *b);
/* A free block's id, or -1 when none is left. */
int32_t hc_blocks_take(hc_blocks *b);
/* The n blocks of table back to the pool. */
void hc_blocks_give(hc_blocks *b, const int32_t *table, int n);
/* The pool for n_parallel sequences of n_ctx positions in blocks of
 * `block`: budget bytes of blocks (0: three quarters of the memory
 * available now), at most what n_parallel whole contexts take. Its blocks,
 * or -1 with err when it holds less than one context. */
int hc_blocks_pool(const hc_hparams *hp, uint64_t budget, int n_ctx, int n_parallel, int block, int kv_bytes,
                   char *err, size_t errlen);
/* The most blocks hc_blocks_pool can give (what the budget holds, or n_parallel
 * contexts without one): what a device's placement prices, before the
 * memory left after loading decides the pool. */
int hc_blocks_most(const hc_hparams *hp, uint64_t budget, int n_ctx, int n_parallel, int block, int kv_bytes);

#endif
