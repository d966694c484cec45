/* Greedy baseline: units by activations per byte, hottest first, each taken if
 * it fits and extends its layer's prefix. Within a layer the density never
 * rises (unit 0 holds the hottest neurons), so this is "hottest per byte first"
 * under the minimum-per-layer constraint. */
#include <stdlib.h>


#include "solve.h"

typedef struct {
    int64_t value;
    uint64_t bytes;
    uint32_t layer, unit;
} cand;

/* Density descending (compared exactly by cross-multiplication), then layer and unit. */
static int denser(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    unsigned __int128 x = (unsigned __int128)(uint64_t)a->value * b->bytes;
    unsigned __int128 y = (unsigned __int128)(uint64_t)b->value * a->bytes;
    if (x != y)
        return x > y ? -1 : 1;
    if (a->layer != b->layer)
        return a->layer < b->layer ? -1 : 1;
    return a->unit < b->unit ? -1 : a->unit > b->unit;
}

void solve_greedy(const solve_problem *p, uint64_t capacity, solve_solution *out)
{
    size_t n = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        n += p->layer[l].n_units;
    cand *c = solve_alloc((n ? n : 1) * sizeof *c);
    n = 0;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        out->units[l] = 0;
        for (uint32_t u = 0; u < p->layer[l].n_units; u++)
            c[n++] = (cand){ p->layer[l].value[u], solve_unit_bytes(&p->layer[l], u), l, u };
    }
    qsort(c, n, sizeof *c, denser);
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++)
        if (out->units[c[i].layer] == c[i].unit && used + c[i].bytes <= capacity) {
            out->units[c[i].layer]++;
            used += c[i].bytes;
        }
    free(c);
    solve_solution_eval(p, out);
}
