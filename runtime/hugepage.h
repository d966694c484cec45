/* Anonymous memory for weights the runtime repacks or copies (INT4-GPTQ
 * rows, the sparse FFN's row matrices), advised to use 2 MiB pages. */
#ifndef HC_HUGEPAGE_H
#define HC_HUGEPAGE_H

#include <stddef.h>

/* bytes (> 0) aligned to 2 MiB, the whole 2 MiB extents of it advised to
 * use transparent huge pages (MADV_HUGEPAGE); a last partial extent keeps
 * 4 KiB pages, so no resident memory is added. Advice only: where it fails
 * the memory is the same. NULL when out of memory; release with free(). */
void *hc_huge_alloc(size_t bytes);

#endif
