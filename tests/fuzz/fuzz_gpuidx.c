/* .gpuidx (runtime/gpuidx.c), loaded for the shape the file itself suggests
 * (2 tensors per layer, n_ff of the first), so that the checks past the
 * shape comparison are reached too. */
#include "fuzz.h"

#include "gguf.h"
#include "gpuidx.h"

FUZZ_TARGET(fuzz_gpuidx)
{
    char err[512];
    const char *path = fuzz_file("x.gpuidx", data, size);
    int n_layer = 1, n_ff = 8;
    gguf_file *f = gguf_open_mem(data, size, "fuzz.gpuidx", err, sizeof err);
    if (f && f->n_tensors >= 2 && f->n_tensors <= 256) n_layer = (int)(f->n_tensors / 2);
    if (f && f->n_tensors && f->tensors[0].ne[0] >= 1 && f->tensors[0].ne[0] <= (1 << 20))
        n_ff = (int)f->tensors[0].ne[0];
    gguf_close(f);
    hc_gpuidx *g = hc_gpuidx_load(path, n_layer, n_ff, err, sizeof err);
    if (!g) {
        fuzz_refused(err, path);
        return 0;
    }
    for (int l = 0; l < n_layer; l++) {
        FUZZ_ASSERT(g->n_gpu[l] >= 0 && g->n_gpu[l] <= n_ff);
        for (int i = 0; i < g->n_gpu[l]; i++)
            FUZZ_ASSERT(g->bucket[l][i] >= 0 && g->bucket[l][i] < n_ff && (i == 0 || g->bucket[l][i] > g->bucket[l][i - 1]));
    }
    hc_gpuidx_free(g);
    return 0;
}
