/* Hybrid setup (see hybrid.h). */
#include "hybrid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ggml_types.h"

uint64_t hc_hybrid_bytes(const hc_model *m, const hc_sparse *s, const hc_gpuidx *g)
{
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++)
        b += hc_cl_layer_bytes(m->layers[l].ffn_gate.type, hc_sparse_down(s, l)->type, g->n_gpu[l], m->hp.n_embd);
    return b;
}

/* Rows bucket[0..k) of w, packed. */
static void *gather(const hc_weight *w, const int32_t *bucket, int k)
{
    size_t rb = ggml_row_size(w->type, w->n);
    char *out = malloc(rb * (size_t)k);
    if (out)
        for (int i = 0; i < k; i++) memcpy(out + (size_t)i * rb, (const char *)w->data + (size_t)bucket[i] * rb, rb);
    return out;
}

static int upload_layer(hc_sparse *s, hc_cl *cl, const hc_model *m, const hc_gpuidx *g, int l, char *msg, size_t msglen)
{
    const hc_layer *ly = &m->layers[l];
    const hc_weight *dn = hc_sparse_down(s, l);
    int k = g->n_gpu[l];
    void *gate = gather(&ly->ffn_gate, g->bucket[l], k), *up = gather(&ly->ffn_up, g->bucket[l], k);
    void *down = gather(dn, g->bucket[l], k);
    int rc = -1;
    if (!gate || !up || !down) {
        snprintf(msg, msglen, "out of memory gathering the device rows of layer %d", l);
    } else {
        hc_cl_layer *L = hc_cl_layer_new(cl, ly->ffn_gate.type, gate, up, dn->type, down, k, m->hp.n_embd, msg, msglen);
        if (L && hc_sparse_set_hot(s, l, g->bucket[l], k, L)) {
            hc_cl_layer_free(L);
            snprintf(msg, msglen, "out of memory for the hot set of layer %d", l);
        } else {
            rc = L ? 0 : -1;
        }
    }
    free(gate);
    free(up);
    free(down);
    return rc;
}

hc_cl *hc_hybrid_setup(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, uint64_t budget, char *msg, size_t msglen)
{
    char sz[2][32];
    switch ((enum hc_ffn_kind)m->hp.ffn_kind) {
    case HC_FFN_GATED:
        break;
    case HC_FFN_SYMMETRIC:
    case HC_FFN_SEQUENTIAL:
        snprintf(msg, msglen, "the device kernels compute act(gate)*up only, not this model's %s FFN",
                 m->hp.ffn_kind == HC_FFN_SYMMETRIC ? "symmetric act(gate)*act(up)" : "sequential act(up)");
        return NULL;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        const hc_layer *ly = &m->layers[l];
        if (ly->ffn_gate_b || ly->ffn_up_b) {
            snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up have biases, which the device kernels do not add", l);
            return NULL;
        }
        const hc_weight *dn = hc_sparse_down(s, l);
        if (ly->ffn_gate.kind == HC_WEIGHT_GPTQ || ly->ffn_up.kind == HC_WEIGHT_GPTQ) {
            snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up are INT4-GPTQ: the device kernels take ggml rows "
                     "(F32, F16, Q8_0 or Q4_0; no GPTQ device kernels)", l);
            return NULL;
        }
        if (ly->ffn_gate.kind != HC_WEIGHT_GGML || ly->ffn_up.kind != HC_WEIGHT_GGML ||
            ly->ffn_gate.type != ly->ffn_up.type || !hc_cl_supports(ly->ffn_gate.type) || !hc_cl_supports(dn->type)) {
            snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up %s/%s, down rows %s: the device kernels take F32, F16, "
                     "Q8_0 or Q4_0 with gate and up of one type", l, ggml_type_name(ly->ffn_gate.type),
                     ggml_type_name(ly->ffn_up.type), ggml_type_name(dn->type));
            return NULL;
        }
    }
    hc_cl *cl = hc_cl_open(msg, msglen);
    if (!cl) return NULL;
    uint64_t need = hc_hybrid_bytes(m, s, g), have = budget ? budget : hc_cl_mem_size(cl);
    if (need > have || need > hc_cl_mem_size(cl)) {
        snprintf(msg, msglen, "the split needs %s of device memory, more than the %s %s", hc_format_size(need, sz[0], sizeof sz[0]),
                 budget ? "--vram-budget of" : "device's", hc_format_size(have, sz[1], sizeof sz[1]));
        hc_cl_free(cl);
        return NULL;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        if (!g->n_gpu[l]) continue;
        if (upload_layer(s, cl, m, g, l, msg, msglen)) {
            for (int j = 0; j < l; j++) hc_sparse_set_hot(s, j, NULL, 0, NULL);
            hc_cl_free(cl);
            return NULL;
        }
    }
    return cl;
}
