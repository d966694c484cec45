/* hc-solve internals (the budget is common/budget.h): the placement problem, its solvers and outputs.
 *
 * A layer's neurons are sorted hottest first (activation count, then sum, then
 * id) and cut into "units": unit 0 is the layer's minimum GPU share (the
 * communication constraint: a layer holds none of its neurons on the GPU or at
 * least that many), every further unit is one batch. A solution places a prefix
 * of units in each layer: since batches are sorted by value within a layer and
 * cost the same bytes, some optimal solution of PowerInfer's ILP is always a
 * prefix, so nothing is lost and the LP relaxation becomes nearly integral. */
#ifndef HC_SOLVE_H
#define HC_SOLVE_H

#include <stdint.h>
#include <stddef.h>

#include "budget.h"
#include "gguf.h"
#include "stats.h"

/* ---------------------------------------------------------------- problem (solve_problem.c) */

typedef struct {
    int fixed;                 /* 1: min_neurons as given; 0: from the cost model */
    uint32_t min_neurons;
    double cpu_bw, gpu_bw;     /* bytes/s the CPU and GPU stream FFN rows at */
    double sync_s;             /* one CPU-GPU synchronisation, seconds */
} solve_cost;

typedef struct {
    uint32_t n_units;          /* 0: the layer never pays off on the GPU */
    uint32_t *end;             /* [n_units] neurons placed when units 0..u are */
    int64_t *value;            /* [n_units] activations of unit u */
    uint64_t neuron_bytes;
    int64_t total;             /* activations of the whole layer */
} solve_layer;

typedef struct {
    uint32_t n_layer, n_ff, batch;
    uint32_t *order;           /* [n_layer * n_ff] neuron ids, hottest first per layer */
    solve_layer *layer;
    int64_t total;             /* all activations */
} solve_problem;

typedef struct {
    uint32_t *units;           /* [n_layer] units placed (a prefix) */
    int64_t objective;         /* activations served by the GPU */
    uint64_t bytes;            /* FFN bytes placed */
} solve_solution;

void solve_problem_build(solve_problem *p, const hc_stats *s, const hc_budget *b, uint32_t batch,
                         const solve_cost *cost);
void solve_problem_free(solve_problem *p);

static inline uint32_t solve_unit_neurons(const solve_layer *L, uint32_t u)
{
    return L->end[u] - (u ? L->end[u - 1] : 0);
}
static inline uint64_t solve_unit_bytes(const solve_layer *L, uint32_t u)
{
    return (uint64_t)solve_unit_neurons(L, u) * L->neuron_bytes;
}
/* GPU neurons of layer l in a solution. */
static inline uint32_t solve_gpu_neurons(const solve_problem *p, const solve_solution *s, uint32_t l)
{
    return s->units[l] ? p->layer[l].end[s->units[l] - 1] : 0;
}

/* malloc that ends the program with "out of memory" instead of returning NULL. */
void *solve_alloc(size_t n);

void solve_solution_init(solve_solution *s, uint32_t n_layer);
void solve_solution_free(solve_solution *s);
/* Activations of layer l that the solution serves on the GPU. */
int64_t solve_layer_covered(const solve_problem *p, const solve_solution *s, uint32_t l);
/* Recompute objective and bytes from units. */
void solve_solution_eval(const solve_problem *p, solve_solution *s);

/* ---------------------------------------------------------------- solvers */

/* Hottest per byte first under the same constraints (solve_greedy.c). */
void solve_greedy(const solve_problem *p, uint64_t capacity, solve_solution *out);

typedef enum { SOLVE_OPTIMAL, SOLVE_GAP, SOLVE_TIME_LIMIT, SOLVE_FALLBACK, SOLVE_GREEDY } solve_status;
extern const char *const solve_status_names[];

typedef struct {
    double time_limit;         /* seconds */
    double gap;                /* relative MIP gap at which to stop */
    int verbose;               /* GLPK terminal output */
} solve_ilp_opts;

typedef struct {
    solve_status status;
    double lp_bound;           /* LP relaxation at the root */
    double bound;              /* best proven upper bound on the objective */
    double gap;                /* (bound - objective) / bound */
    double seconds;
    int time_limit_hit;
} solve_ilp_info;

/* PowerInfer's placement ILP with GLPK (solve_ilp.c). The result is never worse
 * than `greedy`, which it falls back to (status SOLVE_FALLBACK) if GLPK found
 * nothing better in time. 0, or -1 with a message if GLPK failed. */
int solve_ilp(const solve_problem *p, uint64_t capacity, const solve_solution *greedy, const solve_ilp_opts *o,
              solve_solution *out, solve_ilp_info *info, char *err, size_t errlen);

/* ---------------------------------------------------------------- outputs */

typedef struct {
    const char *model_name;    /* file name without directories */
    uint64_t model_hash, stats_hash;
    const hc_stats *stats;
    const hc_budget *budget;
    const solve_problem *problem;
    uint64_t vram_budget, capacity;
    const char *method;        /* "ilp" or "greedy" */
    solve_solution sol;        /* what is written */
    solve_ilp_info info;
    int64_t greedy_objective;
} solve_result;

/* PowerInfer's .gpuidx (solve_gpuidx.c). Atomic. */
int solve_write_gpuidx(const solve_result *r, const char *path, char *err, size_t errlen);
/* JSON (solve_report.c): the budget split, solver result and totals (one sweep
 * row), and the full report with every layer as a malloc'd string. */
struct cJSON *solve_summary_json(const solve_result *r);
char *solve_report_json(const solve_result *r);
/* SVG: coverage per layer and the budget split (solve_svg.c). Atomic. */
int solve_write_svg(const solve_result *r, const char *path, char *err, size_t errlen);

#endif
