/* A tensor saved with torch.save (profiler/ptfile.c: zip + pickle + storage),
 * as hc-profile import-powerinfer reads activation_N.pt. */
#include "fuzz.h"

#include <math.h>
#include <stdlib.h>

#include "ptfile.h"

FUZZ_TARGET(fuzz_ptfile)
{
    char err[512];
    int64_t n = -1;
    double *v = hc_pt_read_vector_mem(data, size, "fuzz.pt", 1 << 24, &n, err, sizeof err);
    if (!v) {
        fuzz_refused(err, "fuzz.pt");
        return 0;
    }
    FUZZ_ASSERT(n >= 0);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += isnan(v[i]) ? 0 : v[i];   /* ASan checks the extent */
    (void)sum;
    free(v);
    return 0;
}
