/* The paged KV cache's free blocks (blocks.h): a stack, so the blocks a
 * sequence gave back are the next ones taken (their pages still in the
 * caches) and the ids handed out follow from the requests alone. */
#include "blocks.h"

#include <stdio.h>
#include <stdlib.h>

int hc_blocks_init(hc_blocks *b, int n)
{
    b->n = b->n_free = n;
    if (!(b->free = malloc(sizeof *b->free * (size_t)(n ? n : 1)))) return -1;
    for (int i = 0; i < n; i++) b->free[i] = n - 1 - i;   /* block 0 taken first */
    return 0;
}

void hc_blocks_free(hc_blocks *b)
{
    free(b->free);
    b->free = NULL;
}

int32_t hc_blocks_take(hc_blocks *b) { return b->n_free ? b->free[--b->n_free] : -1; }

void hc_blocks_give(hc_blocks *b, const int32_t *table, int n)
{
    for (int i = n - 1; i >= 0; i--) b->free[b->n_free++] = table[i];
}

uint64_t hc_blocks_bytes(const hc_hparams *hp, int block, int kv_bytes)
{
    return (uint64_t)kv_bytes * (uint64_t)block * (uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv *
           (uint64_t)hp->head_dim;
}

/* The blocks `bytes` hold, at most n_parallel contexts'. */
static uint64_t blocks_in(const hc_hparams *hp, uint64_t bytes, int n_ctx, int n_parallel, int block, int kv_bytes)
{
    uint64_t most = (uint64_t)n_parallel * (uint64_t)hc_blocks_for(n_ctx, block),
             n = bytes / hc_blocks_bytes(hp, block, kv_bytes);
    return n < most ? n : most;
}

int hc_blocks_most(const hc_hparams *hp, uint64_t budget, int n_ctx, int n_parallel, int block, int kv_bytes)
{
    return (int)blocks_in(hp, budget ? budget : UINT64_MAX, n_ctx, n_parallel, block, kv_bytes);
}

int hc_blocks_pool(const hc_hparams *hp, uint64_t budget, int n_ctx, int n_parallel, int block, int kv_bytes,
                   char *err, size_t errlen)
{
    uint64_t block_bytes = hc_blocks_bytes(hp, block, kv_bytes), bytes = budget ? budget : hc_mem_available() / 4 * 3;
    uint64_t n = blocks_in(hp, bytes, n_ctx, n_parallel, block, kv_bytes);
    if (n < (uint64_t)hc_blocks_for(n_ctx, block)) {
        snprintf(err, errlen, "a KV budget of %llu bytes%s holds %llu blocks of %d positions (%llu bytes each), less "
                 "than one context of %d positions (-c): give a larger --kv-budget or a smaller -c",
                 (unsigned long long)bytes, budget ? "" : " (3/4 of the available memory)", (unsigned long long)n,
                 block, (unsigned long long)block_bytes, n_ctx);
        return -1;
    }
    return (int)n;
}
