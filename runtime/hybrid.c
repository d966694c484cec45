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
    for (int l = 0; l < m->hp.n_layer; l++) {
        const hc_layer *ly = &m->layers[l];
        /* the per-row biases upload_layer stores: the first product's and up's */
        int n_bias = (m->hp.ffn_kind != HC_FFN_SEQUENTIAL && ly->ffn_gate_b) + (ly->ffn_up_b != NULL);
        b += hc_cl_layer_bytes(m->hp.ffn_kind, ly->ffn_up.type, hc_sparse_down(s, l)->type, n_bias, g->n_gpu[l],
                               m->hp.n_embd);
    }
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

/* v[bucket[i]] for i < k (a bias, the down norms), or NULL when v is NULL (or no memory: *oom). */
static float *gather_bias(const float *bias, const int32_t *bucket, int k, int *oom)
{
    if (!bias) return NULL;
    float *out = malloc(sizeof(float) * (size_t)k);
    if (!out) *oom = 1;
    for (int i = 0; out && i < k; i++) out[i] = bias[bucket[i]];
    return out;
}

/* The hot rows of layer l onto the device: the first rows (gate; up without
 * a gate), up, down, the per-row biases of the first and up products, and
 * the down rows' norms with the contribution criterion. */
static int upload_layer(hc_sparse *s, hc_cl *cl, const hc_model *m, const hc_gpuidx *g, int l, char *msg, size_t msglen)
{
    const hc_layer *ly = &m->layers[l];
    const int32_t *bk = g->bucket[l];
    int k = g->n_gpu[l], seq = m->hp.ffn_kind == HC_FFN_SEQUENTIAL, oom = 0;
    hc_cl_rows rows = { .kind = m->hp.ffn_kind, .gu_type = ly->ffn_up.type, .down_type = hc_sparse_down(s, l)->type };
    void *first = gather(seq ? &ly->ffn_up : &ly->ffn_gate, bk, k), *up = seq ? NULL : gather(&ly->ffn_up, bk, k);
    void *down = gather(hc_sparse_down(s, l), bk, k);
    float *fb = gather_bias(seq ? ly->ffn_up_b : ly->ffn_gate_b, bk, k, &oom);
    float *ub = seq ? NULL : gather_bias(ly->ffn_up_b, bk, k, &oom);
    float *dn = gather_bias(hc_sparse_down_norm(s, l), bk, k, &oom);
    rows.first = first;
    rows.up = up;
    rows.down = down;
    rows.first_b = fb;
    rows.up_b = ub;
    rows.down_norm = dn;
    int rc = -1;
    if (!first || (!seq && !up) || !down || oom) {
        snprintf(msg, msglen, "out of memory gathering the device rows of layer %d", l);
    } else {
        hc_cl_layer *L = hc_cl_layer_new(cl, &rows, k, m->hp.n_embd, msg, msglen);
        if (L && hc_sparse_set_hot(s, l, bk, k, L)) {
            hc_cl_layer_free(L);
            snprintf(msg, msglen, "out of memory for the hot set of layer %d", l);
        } else {
            rc = L ? 0 : -1;
        }
    }
    void *bufs[] = { first, up, down, fb, ub, dn };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    return rc;
}

/* The layer's device rows must be ggml rows of a type the kernels take. */
static int check_layer(hc_sparse *s, const hc_model *m, int l, char *msg, size_t msglen)
{
    const hc_layer *ly = &m->layers[l];
    const hc_weight *dn = hc_sparse_down(s, l);
    int gate = m->hp.ffn_kind != HC_FFN_SEQUENTIAL;
    if ((gate && ly->ffn_gate.kind == HC_WEIGHT_GPTQ) || ly->ffn_up.kind == HC_WEIGHT_GPTQ) {
        snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up are INT4-GPTQ: the device kernels take ggml rows "
                 "(F32, F16, Q8_0 or Q4_0; no GPTQ device kernels)", l);
        return -1;
    }
    if ((gate && (ly->ffn_gate.kind != HC_WEIGHT_GGML || ly->ffn_gate.type != ly->ffn_up.type)) ||
        ly->ffn_up.kind != HC_WEIGHT_GGML || !hc_cl_supports(ly->ffn_up.type) || !hc_cl_supports(dn->type)) {
        snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up %s/%s, down rows %s: the device kernels take F32, F16, "
                 "Q8_0 or Q4_0 with gate and up of one type", l, gate ? ggml_type_name(ly->ffn_gate.type) : "none",
                 ggml_type_name(ly->ffn_up.type), ggml_type_name(dn->type));
        return -1;
    }
    return 0;
}

hc_cl *hc_hybrid_setup(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, uint64_t budget, char *msg, size_t msglen)
{
    char sz[2][32];
    for (int l = 0; l < m->hp.n_layer; l++)
        if (check_layer(s, m, l, msg, msglen)) return NULL;
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
