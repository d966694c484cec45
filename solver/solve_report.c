/* JSON report: the budget split, the solver's result and each layer's share. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"
#include "solve.h"

static double share(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

cJSON *solve_summary_json(const solve_result *r)
{
    const solve_problem *p = r->problem;
    cJSON *o = cJSON_CreateObject();
    hc_json_add_u64(o, "vram_budget", r->vram_budget);
    cJSON *b = cJSON_AddObjectToObject(o, "budget");
    for (int i = 0; i < HC_FIX_COUNT; i++)
        hc_json_add_u64(b, hc_budget_fixed_names[i], r->budget->fixed[i]);
    hc_json_add_u64(b, "dense_total", r->budget->fixed_total);
    hc_json_add_u64(b, "ffn_capacity", r->capacity);
    hc_json_add_u64(b, "ffn_used", r->sol.bytes);
    hc_json_add_u64(b, "unused", r->capacity - r->sol.bytes);
    cJSON *s = cJSON_AddObjectToObject(o, "solver");
    cJSON_AddStringToObject(s, "method", r->method);
    cJSON_AddStringToObject(s, "status", solve_status_names[r->info.status]);
    cJSON_AddBoolToObject(s, "time_limit_hit", r->info.time_limit_hit);
    cJSON_AddNumberToObject(s, "objective", (double)r->sol.objective);
    if (r->info.status != SOLVE_GREEDY) {
        cJSON_AddNumberToObject(s, "lp_bound", r->info.lp_bound);
        cJSON_AddNumberToObject(s, "bound", r->info.bound);
        cJSON_AddNumberToObject(s, "gap", r->info.gap);
        cJSON_AddNumberToObject(s, "seconds", r->info.seconds);
    }
    cJSON_AddNumberToObject(s, "greedy_objective", (double)r->greedy_objective);
    cJSON_AddNumberToObject(s, "greedy_coverage", share(r->greedy_objective, p->total));
    uint64_t neurons = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        neurons += solve_gpu_neurons(p, &r->sol, l);
    cJSON *t = cJSON_AddObjectToObject(o, "totals");
    cJSON_AddNumberToObject(t, "gpu_neurons", (double)neurons);
    cJSON_AddNumberToObject(t, "neurons", (double)p->n_layer * p->n_ff);
    hc_json_add_u64(t, "gpu_bytes", r->sol.bytes);
    cJSON_AddNumberToObject(t, "activations", (double)p->total);
    cJSON_AddNumberToObject(t, "gpu_activations", (double)r->sol.objective);
    cJSON_AddNumberToObject(t, "coverage", share(r->sol.objective, p->total));
    return o;
}

char *solve_report_json(const solve_result *r)
{
    const solve_problem *p = r->problem;
    char h[17];
    cJSON *o = cJSON_CreateObject();
    hc_json_add_text(o, "model", r->model_name);
    snprintf(h, sizeof h, "%016" PRIx64, r->model_hash);
    cJSON_AddStringToObject(o, "model_ffn_hash", h);
    snprintf(h, sizeof h, "%016" PRIx64, r->stats_hash);
    cJSON_AddStringToObject(o, "stats_hash", h);
    hc_json_add_text(o, "stats_corpus", r->stats->corpus);
    hc_json_add_u64(o, "stats_n_tokens", r->stats->n_tokens);
    cJSON_AddNumberToObject(o, "n_layer", p->n_layer);
    cJSON_AddNumberToObject(o, "n_ff", p->n_ff);
    cJSON_AddNumberToObject(o, "batch", p->batch);
    cJSON_AddNumberToObject(o, "ctx", r->budget->ctx);
    cJSON_AddNumberToObject(o, "kv_bytes", r->budget->kv_bytes);
    cJSON *sum = solve_summary_json(r);
    for (cJSON *c = sum->child; c; c = sum->child) /* move the summary's members up */
        cJSON_AddItemToObject(o, c->string, cJSON_DetachItemViaPointer(sum, c));
    cJSON_Delete(sum);
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const solve_layer *L = &p->layer[l];
        uint32_t k = solve_gpu_neurons(p, &r->sol, l);
        int64_t covered = solve_layer_covered(p, &r->sol, l);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "gpu_neurons", k);
        hc_json_add_u64(e, "neuron_bytes", L->neuron_bytes);
        hc_json_add_u64(e, "gpu_bytes", (uint64_t)k * L->neuron_bytes);
        cJSON_AddNumberToObject(e, "min_neurons", L->n_units ? L->end[0] : p->n_ff + 1);
        cJSON_AddNumberToObject(e, "activations", (double)L->total);
        cJSON_AddNumberToObject(e, "gpu_activations", (double)covered);
        cJSON_AddNumberToObject(e, "coverage", share(covered, L->total));
        cJSON_AddItemToArray(layers, e);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}
