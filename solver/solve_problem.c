/* The placement problem: neurons sorted hottest first, the per-layer minimum
 * from the cost model, and the units (minimum block, then batches). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "solve.h"

typedef struct {
    int64_t count;
    double sum;
    uint32_t id;
} neuron;

/* Hottest first; equal counts by larger magnitude, then by id: a total order,
 * so the result does not depend on the sort algorithm. */
static int hotter(const void *pa, const void *pb)
{
    const neuron *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    if (a->sum != b->sum)
        return a->sum > b->sum ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Smallest GPU share of a layer worth a synchronisation: the k hottest neurons
 * such that the CPU time they save per token, sum(p_i) * bytes * (1/cpu - 1/gpu)
 * with p_i the activation rate, pays for one sync. n_ff + 1 when none does. */
static uint32_t cost_minimum(const solve_cost *c, const neuron *sorted, uint32_t n_ff, uint64_t n_tokens,
                             uint64_t bytes)
{
    if (c->fixed)
        return c->min_neurons;
    double per_byte = 1.0 / c->cpu_bw - 1.0 / c->gpu_bw;
    if (c->sync_s <= 0)
        return 0;
    if (per_byte <= 0 || n_tokens == 0)
        return n_ff + 1;
    double need = c->sync_s / (per_byte * (double)bytes) * (double)n_tokens; /* in activation counts */
    double acc = 0;
    for (uint32_t i = 0; i < n_ff; i++) {
        acc += (double)sorted[i].count;
        if (acc >= need)
            return i + 1;
    }
    return n_ff + 1;
}

static void build_layer(solve_problem *p, uint32_t l, const hc_stats *s, uint64_t bytes, const solve_cost *cost,
                       neuron *tmp)
{
    uint32_t n_ff = p->n_ff, batch = p->batch;
    solve_layer *L = &p->layer[l];
    const int64_t *count = s->count + (size_t)l * n_ff;
    const double *sum = s->sum + (size_t)l * n_ff;
    for (uint32_t i = 0; i < n_ff; i++)
        tmp[i] = (neuron){ count[i], sum[i], i };
    qsort(tmp, n_ff, sizeof *tmp, hotter);
    uint32_t *order = p->order + (size_t)l * n_ff;
    L->total = 0;
    for (uint32_t i = 0; i < n_ff; i++) {
        order[i] = tmp[i].id;
        L->total += tmp[i].count;
    }
    L->neuron_bytes = bytes;
    uint32_t min = cost_minimum(cost, tmp, n_ff, s->n_tokens, bytes);
    if (min > n_ff) {
        L->n_units = 0;
        return;
    }
    /* The minimum rounded up to whole batches, so GPU row counts stay multiples
     * of the batch (PowerInfer's kernels want multiples of 32 and 256). */
    uint32_t first = min <= batch ? batch : (uint32_t)(((uint64_t)min + batch - 1) / batch * batch);
    if (first > n_ff)
        first = n_ff;
    L->n_units = 1 + (n_ff - first + batch - 1) / batch;
    L->end = solve_alloc(L->n_units * sizeof *L->end);
    L->value = solve_alloc(L->n_units * sizeof *L->value);
    uint32_t at = 0;
    for (uint32_t u = 0; u < L->n_units; u++) {
        uint32_t end = u == 0 ? first : (at + batch < n_ff ? at + batch : n_ff);
        int64_t v = 0;
        for (; at < end; at++)
            v += tmp[at].count;
        L->end[u] = end;
        L->value[u] = v;
    }
}

void *solve_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        hc_die("out of memory");
    return p;
}

void solve_problem_build(solve_problem *p, const hc_stats *s, const hc_budget *b, uint32_t batch,
                         const solve_cost *cost)
{
    memset(p, 0, sizeof *p);
    p->n_layer = s->n_layer;
    p->n_ff = s->n_ff;
    p->batch = batch;
    p->order = solve_alloc((size_t)s->n_layer * s->n_ff * sizeof *p->order);
    p->layer = solve_alloc(s->n_layer * sizeof *p->layer);
    neuron *tmp = solve_alloc((size_t)s->n_ff * sizeof *tmp);
    for (uint32_t l = 0; l < s->n_layer; l++) {
        build_layer(p, l, s, b->layer[l].neuron_bytes, cost, tmp);
        p->total += p->layer[l].total;
    }
    free(tmp);
}

void solve_problem_free(solve_problem *p)
{
    for (uint32_t l = 0; p->layer && l < p->n_layer; l++) {
        free(p->layer[l].end);
        free(p->layer[l].value);
    }
    free(p->layer);
    free(p->order);
    memset(p, 0, sizeof *p);
}

void solve_solution_init(solve_solution *s, uint32_t n_layer)
{
    memset(s, 0, sizeof *s);
    s->units = solve_alloc(n_layer * sizeof *s->units);
}

void solve_solution_free(solve_solution *s)
{
    free(s->units);
    s->units = NULL;
}

int64_t solve_layer_covered(const solve_problem *p, const solve_solution *s, uint32_t l)
{
    int64_t v = 0;
    for (uint32_t u = 0; u < s->units[l]; u++)
        v += p->layer[l].value[u];
    return v;
}

void solve_solution_eval(const solve_problem *p, solve_solution *s)
{
    s->objective = 0;
    s->bytes = 0;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        s->objective += solve_layer_covered(p, s, l);
        s->bytes += (uint64_t)solve_gpu_neurons(p, s, l) * p->layer[l].neuron_bytes;
    }
}
