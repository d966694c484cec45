/* Hybrid setup (see hybrid.h). */
#include "hybrid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ggml_types.h"
#include "kernels_gptq.h"

uint64_t hc_hybrid_bytes(const hc_model *m, const hc_sparse *s, const hc_gpuidx *g)
{
    uint64_t b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const hc_layer *ly = &m->layers[l];
        /* the per-row biases upload_layer stores: the first product's and up's */
        int k = g->n_gpu[l], n_bias = (m->hp.ffn_kind != HC_FFN_SEQUENTIAL && ly->ffn_gate_b) + (ly->ffn_up_b != NULL);
        b += hc_cl_rows_bytes(&ly->ffn_up, k) * (m->hp.ffn_kind == HC_FFN_SEQUENTIAL ? 1 : 2) +
             (k ? hc_cl_rows_bytes(hc_sparse_down(s, l), k) : 0) + (uint64_t)k * (uint64_t)n_bias * sizeof(float);
    }
    return b;
}

/* Rows bucket[0..k) of w, packed into *out: ggml rows copied (free out->data),
 * GPTQ rows gathered into *q (hc_gptq_free it). 0, or -1 out of memory. */
static int gather(const hc_weight *w, const int32_t *bucket, int k, hc_weight *out, hc_gptq *q)
{
    *out = *w;
    out->rows = k;
    if (w->kind == HC_WEIGHT_GPTQ) {
        out->ext = q;
        return hc_gptq_gather(w->ext, bucket, k, q);
    }
    size_t rb = ggml_row_size(w->type, w->n);
    char *rows = malloc(rb * (size_t)k);
    out->data = rows;
    if (!rows) return -1;
    for (int i = 0; i < k; i++) memcpy(rows + (size_t)i * rb, (const char *)w->data + (size_t)bucket[i] * rb, rb);
    return 0;
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
    hc_cl_rows rows = { .kind = m->hp.ffn_kind };
    hc_gptq q[3] = { { 0 } };
    oom |= gather(seq ? &ly->ffn_up : &ly->ffn_gate, bk, k, &rows.first, &q[0]);
    if (!seq) oom |= gather(&ly->ffn_up, bk, k, &rows.up, &q[1]);
    oom |= gather(hc_sparse_down(s, l), bk, k, &rows.down, &q[2]);
    float *fb = gather_bias(seq ? ly->ffn_up_b : ly->ffn_gate_b, bk, k, &oom);
    float *ub = seq ? NULL : gather_bias(ly->ffn_up_b, bk, k, &oom);
    float *dn = gather_bias(hc_sparse_down_norm(s, l), bk, k, &oom);
    rows.first_b = fb;
    rows.up_b = ub;
    rows.down_norm = dn;
    int rc = -1;
    if (oom) {
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
    const hc_weight *ws[3] = { &rows.first, &rows.up, &rows.down };
    for (int i = 0; i < 3; i++) {
        hc_gptq_free(&q[i]);
        if (ws[i]->kind == HC_WEIGHT_GGML) free((void *)ws[i]->data);
    }
    free(fb);
    free(ub);
    free(dn);
    return rc;
}

/* The layer's device rows must be of a type the kernels take, gate and up of
 * one type sharing one prepared activation. */
static int check_layer(hc_sparse *s, const hc_model *m, int l, char *msg, size_t msglen)
{
    const hc_layer *ly = &m->layers[l];
    const hc_weight *dn = hc_sparse_down(s, l);
    int gate = m->hp.ffn_kind != HC_FFN_SEQUENTIAL;
    if ((gate && (ly->ffn_gate.kind != ly->ffn_up.kind || ly->ffn_gate.type != ly->ffn_up.type ||
                  !hc_weight_same_act(&ly->ffn_gate, &ly->ffn_up))) ||
        !hc_cl_supports(&ly->ffn_up, 0) || !hc_cl_supports(dn, 1)) {
        snprintf(msg, msglen, "layer %d: ffn_gate/ffn_up %s/%s, down rows %s: the device kernels take F32, F16, "
                 "Q8_0, Q4_0 or INT4-GPTQ with gate and up of one type and one prepared input", l,
                 gate ? hc_weight_type_name(&ly->ffn_gate) : "none", hc_weight_type_name(&ly->ffn_up), hc_weight_type_name(dn));
        return -1;
    }
    return 0;
}

int hc_hybrid_place(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, hc_cl *cl, uint64_t budget, char *msg,
                    size_t msglen)
{
    char sz[2][32];
    for (int l = 0; l < m->hp.n_layer; l++)
        if (check_layer(s, m, l, msg, msglen)) return -1;
    const uint64_t mem = hc_cl_about(cl)->mem_size;
    uint64_t need = hc_hybrid_bytes(m, s, g);
    if (need > budget || need > mem) {
        snprintf(msg, msglen, "the split needs %s of device memory, more than the %s %s", hc_format_size(need, sz[0], sizeof sz[0]),
                 hc_format_size(budget < mem ? budget : mem, sz[1], sizeof sz[1]),
                 budget < mem ? "the budget leaves for it" : "the device has");
        return -1;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        if (!g->n_gpu[l]) continue;
        if (upload_layer(s, cl, m, g, l, msg, msglen)) {
            for (int j = 0; j < l; j++) hc_sparse_set_hot(s, j, NULL, 0, NULL);
            return -1;
        }
    }
    return 0;
}

hc_cl *hc_hybrid_setup(hc_sparse *s, const hc_model *m, const hc_gpuidx *g, const char *device, uint64_t budget,
                       char *msg, size_t msglen)
{
    hc_cl *cl = hc_cl_open(device, HC_CL_PROFILE, msg, msglen);
    if (cl && hc_hybrid_place(s, m, g, cl, budget ? budget : hc_cl_about(cl)->mem_size, msg, msglen)) {
        hc_cl_free(cl);
        cl = NULL;
    }
    return cl;
}
