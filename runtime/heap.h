/* Growable arrays and a binary heap of fixed-size elements, for the
 * tokenizers' merge queues (runtime/tokenizer.c, runtime/tokenizer_bpe.c). */
#ifndef HC_HEAP_H
#define HC_HEAP_H

#include <stddef.h>

/* Make *pp (an array of *cap elements of elem bytes) hold at least need
 * elements, doubling from 64. 0, or -1 when out of memory (*pp unchanged). */
int hc_grow(void *pp, size_t *cap, size_t need, size_t elem);

/* first(a, b): a leaves the heap before b. Start from {0} with esz and first set. */
typedef int (*hc_heap_first)(const void *a, const void *b);
typedef struct {
    char *v;
    size_t n, cap, esz;
    hc_heap_first first;
} hc_heap;

int hc_heap_push(hc_heap *h, const void *e);    /* 0, or -1 when out of memory */
void hc_heap_pop(hc_heap *h, void *out);        /* h->n > 0 */

#endif
