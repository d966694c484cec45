/* 2 MiB-page memory for weights (hugepage.h). With 4 KiB pages a weight
 * stream costs a TLB miss every 4 KiB: INT4-GPTQ rows repacked into malloc'd
 * memory decoded at 62-83 t/s where the same model's Q4_0 rows in the file
 * mapping ran at 93-103, and at 82-104 in 2 MiB pages (docs/measurements.md);
 * the sparse FFN's scattered rows gained 17 % (runtime/sparse.c). */
#include "hugepage.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *hc_huge_alloc(size_t bytes)
{
    void *p;
    if (posix_memalign(&p, HUGE_PAGE, bytes ? bytes : 1)) return NULL;
    if (bytes >= HUGE_PAGE) madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
    return p;
}
