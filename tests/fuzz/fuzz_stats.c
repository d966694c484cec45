/* Activation statistics files (common/stats.c, hc_stats_read). */
#include "fuzz.h"

#include "stats.h"

FUZZ_TARGET(fuzz_stats)
{
    char err[512];
    const char *path = fuzz_file("x.stats", data, size);
    hc_stats *s = hc_stats_read(path, err, sizeof err);
    if (!s) {
        fuzz_refused(err, path);
        return 0;
    }
    FUZZ_ASSERT(s->n_layer > 0 && s->n_ff > 0);
    /* every count and sum is readable (ASan checks the arrays' extent) */
    double total = 0;
    for (uint64_t i = 0; i < (uint64_t)s->n_layer * s->n_ff; i++) total += (double)s->count[i] + s->sum[i];
    (void)total;
    hc_stats_free(s);
    return 0;
}
