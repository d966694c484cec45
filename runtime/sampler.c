/* Sampling: top-k → temperature → softmax → top-p → draw (see sampler.h). */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    float v;
    int id;
} cand;

struct hc_sampler {
    hc_sampler_params p;
    int n_vocab;
    uint64_t state;
    cand *c;
};

hc_sampler *hc_sampler_new(const hc_sampler_params *p, int n_vocab)
{
    hc_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    /* xorshift64* needs a non-zero state */
    s->state = p->seed ^ 0x9e3779b97f4a7c15ULL;
    if (!s->state) s->state = 1;
    s->c = malloc(sizeof *s->c * (size_t)n_vocab);
    if (!s->c) { free(s); return NULL; }
    return s;
}

void hc_sampler_free(hc_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s);
}

int hc_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static float rand_f32(hc_sampler *s)
{
    s->state ^= s->state >> 12;
    s->state ^= s->state << 25;
    s->state ^= s->state >> 27;
    return (float)((s->state * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
}

/* Descending by value, ties by lower id: a total order, so qsort is deterministic. */
static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int hc_sample(hc_sampler *s, const float *logits)
{
    int n = s->n_vocab;
    if (s->p.temp <= 0.0f) return hc_argmax(logits, n);
    for (int i = 0; i < n; i++) s->c[i] = (cand){ logits[i], i };
    int top_k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    int use_top_p = s->p.top_p > 0.0f && s->p.top_p < 1.0f;
    if (top_k < n || use_top_p) {
        qsort(s->c, (size_t)n, sizeof *s->c, cand_cmp);
        n = top_k;
    }
    float max = s->c[0].v;
    for (int i = 1; i < n; i++) if (s->c[i].v > max) max = s->c[i].v;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        s->c[i].v = expf((s->c[i].v - max) / s->p.temp);
        sum += s->c[i].v;
    }
    if (use_top_p) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->c[i].v / sum;
            if (cum >= s->p.top_p) { keep = i + 1; break; }
        }
        n = keep;
        sum = 0;
        for (int i = 0; i < n; i++) sum += s->c[i].v;
    }
    double r = rand_f32(s) * sum, cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += s->c[i].v;
        if (r < cdf) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
