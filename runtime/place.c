/* Placements (see place.h): the device copies of the placed layers'
 * weights, made once, shared by the contexts. */
#include "place.h"

#include <stdlib.h>
#include <string.h>

struct hc_place {
    hc_backend *dev;
    char *name;
    int n_layer, n_dev, n_ffn;   /* layers, those on the device, those whose FFN is there too */
    hc_blayer *layers;   /* [n_layer]: host weights, device copies for the placed */
    hc_blayer head;
    uint8_t *kv_on;      /* [n_layer] */
};

/* Every vector and matrix of a layer (or the head), to copy or free in turn. */
#define BVECS(b) { &(b)->attn_norm, &(b)->attn_norm_b, &(b)->ffn_norm, &(b)->ffn_norm_b, &(b)->q_b, &(b)->k_b, \
                   &(b)->v_b, &(b)->o_b, &(b)->gate_b, &(b)->up_b, &(b)->down_b }
#define BMATS(b) { &(b)->q, &(b)->k, &(b)->v, &(b)->o, &(b)->gate, &(b)->up, &(b)->down }

static void unplace(hc_backend *dev, hc_blayer *b)
{
    hc_bvec *vs[] = BVECS(b);
    hc_bmat *ms[] = BMATS(b);
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        if (vs[i]->dev) dev->ops->dev_free(dev, vs[i]->dev), vs[i]->dev = NULL;
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        if (ms[i]->dev) dev->ops->dev_free(dev, ms[i]->dev), ms[i]->dev = NULL;
    b->dev = b->ffn_dev = 0;
}

/* The device copies of b's weights (the FFN's only with ffn): 0, 1 when
 * the device's kernels do not take one (why), -1 out of device memory (err). */
static int place(hc_backend *dev, hc_blayer *b, int ffn, char *why, size_t whylen, char *err, size_t errlen)
{
    const hc_backend_ops *op = dev->ops;
    hc_bvec *vs[] = BVECS(b);
    hc_bmat *ms[] = BMATS(b);
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        if (vs[i]->host && !(vs[i]->dev = op->vec_new(dev, vs[i]->host, vs[i]->n, err, errlen))) return -1;
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        const hc_weight *w = ms[i]->host;
        if (!w || w->kind == HC_WEIGHT_NONE || (!ffn && (ms[i] == &b->gate || ms[i] == &b->up || ms[i] == &b->down)))
            continue;
        if (!(ms[i]->dev = op->mat_new(dev, w, why, whylen))) return 1;
    }
    return 0;
}

hc_place *hc_place_new(const hc_model *m, hc_backend *dev, const char *name, const hc_place_plan *plan, FILE *log,
                       char *err, size_t errlen)
{
    int L = m->hp.n_layer;
    hc_place *p = calloc(1, sizeof *p);
    if (p) {
        p->dev = dev;
        p->n_layer = L;
        p->name = strdup(name);
        p->layers = calloc((size_t)L, sizeof *p->layers);
        p->kv_on = calloc((size_t)L, 1);
    }
    if (!p || !p->name || !p->layers || !p->kv_on) {
        snprintf(err, errlen, "%s: out of memory", m->path);
        hc_place_free(p);
        return NULL;
    }
    hc_host_layers(m, p->layers, &p->head);
    char why[256];
    int n = plan->n_layers < L ? plan->n_layers : L;
    for (int l = 0; l < n; l++) {
        hc_blayer *b = &p->layers[l];
        int ffn = plan->ffn, rc = place(dev, b, ffn, why, sizeof why, err, errlen);
        if (rc == 1 && ffn) {   /* an FFN the device cannot run: the layer's attention may still go */
            fprintf(log, "%s: layer %d: %s; its FFN runs on the CPU\n", name, l, why);
            unplace(dev, b);
            ffn = 0;
            rc = place(dev, b, 0, why, sizeof why, err, errlen);
        }
        if (rc == 1) fprintf(log, "%s: layer %d: %s; the layer runs on the CPU\n", name, l, why);
        if (rc) unplace(dev, b);
        if (rc < 0) goto fail;
        if (rc) continue;
        b->dev = 1;
        b->ffn_dev = ffn;
        p->kv_on[l] = 1;
        p->n_dev++;
        p->n_ffn += ffn;
    }
    if (plan->head) {
        int rc = place(dev, &p->head, 0, why, sizeof why, err, errlen);
        if (rc == 1) fprintf(log, "%s: output head: %s; it runs on the CPU\n", name, why);
        if (rc) unplace(dev, &p->head);
        if (rc < 0) goto fail;
        p->head.dev = !rc;
    }
    return p;
fail:
    hc_place_free(p);
    return NULL;
}

void hc_place_free(hc_place *p)
{
    if (!p) return;
    for (int l = 0; p->layers && l < p->n_layer; l++) unplace(p->dev, &p->layers[l]);
    if (p->dev) unplace(p->dev, &p->head);
    free(p->layers);
    free(p->kv_on);
    free(p->name);
    free(p);
}

int hc_place_layers(const hc_place *p) { return p->n_dev; }
int hc_place_ffn_layers(const hc_place *p) { return p->n_ffn; }
int hc_place_head(const hc_place *p) { return p->head.dev; }
hc_backend *hc_place_device(const hc_place *p) { return p->dev; }
const uint8_t *hc_place_kv_layers(const hc_place *p) { return p->kv_on; }

int hc_place_attach(const hc_place *p, hc_blayer *layers, hc_blayer *head, const char **dev_name)
{
    memcpy(layers, p->layers, sizeof *layers * (size_t)p->n_layer);
    *head = p->head;
    *dev_name = p->name;
    return p->n_dev > 0 || p->head.dev;
}
