/* ZIP archives (profiler/zipread.c over libzip): the directory, then every
 * entry's data (stored or deflated, CRC-checked, bounded by its declared size). */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "zipread.h"

FUZZ_TARGET(fuzz_zip)
{
    char err[512];
    hc_zip *z = hc_zip_open_mem(data, size, "fuzz.zip", err, sizeof err);
    if (!z) {
        fuzz_refused(err, "fuzz.zip");
        return 0;
    }
    for (size_t i = 0; i < hc_zip_count(z); i++) {
        const hc_zip_entry *e = hc_zip_entry_at(z, i);
        FUZZ_ASSERT(hc_zip_find(z, e->name) == (long)i);   /* names are unique */
        size_t len;
        uint8_t *p = hc_zip_read(z, i, (uint64_t)1 << 26, &len, err, sizeof err);
        if (!p) {
            fuzz_refused(err, "fuzz.zip");
            continue;
        }
        FUZZ_ASSERT(len == e->usize && p[len] == 0);
        free(p);
    }
    hc_zip_close(z);
    return 0;
}
