/* Token sampling: greedy (temperature 0: first maximum, as llama2.c run.c),
 * or top-k, then temperature, then top-p (nucleus), then a draw from the
 * remaining distribution with the sampler's own PRNG (deterministic per seed). */
#ifndef HC_SAMPLER_H
#define HC_SAMPLER_H

#include <stdint.h>

typedef struct {
    float temp;      /* 0: greedy */
    int top_k;       /* 0: all */
    float top_p;     /* >= 1: off */
    uint64_t seed;
} hc_sampler_params;

typedef struct hc_sampler hc_sampler;

hc_sampler *hc_sampler_new(const hc_sampler_params *p, int n_vocab);
void hc_sampler_free(hc_sampler *s);
/* Pick a token from n_vocab logits (not modified). */
int hc_sample(hc_sampler *s, const float *logits);
/* Index of the first maximum. */
int hc_argmax(const float *x, int n);

#endif
