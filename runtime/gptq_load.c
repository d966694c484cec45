/* A GPTQ weight from the companion tensors hc-quantize GPTQ writes
 * (docs/formats.md, "INT4-GPTQ tensors"): every KV, type and shape checked before the
 * repack reads anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml_types.h"
#include "kernels_gptq.h"

/* Tensor <name>.<sfx> of type and shape {ne0, ne1} (ne1 = 0: 1-D), or NULL with a message. */
static const gguf_tensor *companion(const gguf_file *f, const char *name, const char *sfx, uint32_t type,
                                    int64_t ne0, int64_t ne1, int required, char *err, size_t errlen)
{
    char nm[GGUF_MAX_NAME + 16];
    snprintf(nm, sizeof nm, "%s.%s", name, sfx);
    const gguf_tensor *t = gguf_get_tensor(f, nm);
    if (!t) {
        if (required) snprintf(err, errlen, "missing tensor %s", nm);
        return NULL;
    }
    if (t->type != type || t->ne[0] != ne0 || t->ne[1] != (ne1 ? ne1 : 1) || t->ne[2] != 1 || t->ne[3] != 1) {
        char shape[64];
        if (ne1) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        else snprintf(shape, sizeof shape, "[%lld]", (long long)ne0);
        snprintf(err, errlen, "tensor %s must be %s %s", nm, ggml_type_name(type), shape);
        return NULL;
    }
    return t;
}

int hc_gptq_from_gguf(const gguf_file *f, const char *name, int n, int rows, hc_gptq *g, char *err, size_t errlen)
{
    char nm[GGUF_MAX_NAME + 16];
    snprintf(nm, sizeof nm, "%s.qweight", name);
    const gguf_tensor *qw = gguf_get_tensor(f, nm);
    if (!qw) return 1;
    uint32_t bits = 0, gs = 0;
    char *zf = NULL;
    if (gguf_get_u32(f, "hotcold.gptq.bits", &bits) || bits != 4 ||
        gguf_get_u32(f, "hotcold.gptq.group_size", &gs) || gs < 1 || gs > (uint32_t)1 << 24 ||
        gguf_get_str(f, "hotcold.gptq.zero_format", &zf) || strcmp(zf, "v2") != 0) {
        free(zf);
        snprintf(err, errlen, "%s needs hotcold.gptq.bits = 4 (u32), .group_size (u32) and .zero_format = \"v2\"", nm);
        return -1;
    }
    free(zf);
    if (rows < 0) rows = qw->ne[1] >= 1 && qw->ne[0] <= INT32_MAX ? (int)qw->ne[0] : 0;
    if (rows < 1) {
        snprintf(err, errlen, "tensor %s has no rows", nm);
        return -1;
    }
    const int G = (n + (int)gs - 1) / (int)gs;
    const gguf_tensor *sc, *qz, *gi = NULL;
    if (!(qw = companion(f, name, "qweight", GGML_TYPE_I32, rows, (n + 7) / 8, 1, err, errlen)) ||
        !(sc = companion(f, name, "scales", GGML_TYPE_F16, rows, G, 1, err, errlen)) ||
        !(qz = companion(f, name, "qzeros", GGML_TYPE_I32, (rows + 7) / 8, G, 1, err, errlen)))
        return -1;
    err[0] = 0;
    gi = companion(f, name, "g_idx", GGML_TYPE_I32, n, 0, 0, err, errlen);
    if (!gi && err[0]) return -1;
    char msg[200];
    if (hc_gptq_load(g, n, rows, (int)gs, qw->data, sc->data, qz->data, gi ? gi->data : NULL, msg, sizeof msg) == 0)
        return 0;
    snprintf(err, errlen, "%s: %s", name, msg);
    return -1;
}
