/* The pickle of one torch tensor (profiler/pickle.c). */
#include "fuzz.h"

#include <string.h>

#include "pickle.h"

FUZZ_TARGET(fuzz_pickle)
{
    char err[512];
    hc_pickle_tensor t;
    if (hc_pickle_tensor_read(data, size, "fuzz.pkl", &t, err, sizeof err) != 0) {
        fuzz_refused(err, "fuzz.pkl");
        return 0;
    }
    FUZZ_ASSERT(t.ndim >= 0 && t.ndim <= HC_PICKLE_MAX_DIMS);
    FUZZ_ASSERT(memchr(t.storage_type, 0, sizeof t.storage_type) && memchr(t.key, 0, sizeof t.key) &&
                memchr(t.location, 0, sizeof t.location));
    return 0;
}
