/* PowerInfer's .gpuidx: a PWRI GGUF with, per layer and in this order,
 * blk.N.gpu_idx (I32 [n_ff], 1 = on the GPU) and blk.N.gpu_bucket (I32, the
 * GPU neurons ascending). PowerInfer reads the tensors by position and I32 as
 * its old code 18, which gguf.c writes for GGUF_VARIANT_PWRI files. Our own KVs
 * follow PowerInfer's three under hotcold.solve.*; nothing in them depends on
 * time or threads, so the same inputs give the same bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solve.h"

#define K(name) "hotcold.solve." name

static void hex(char out[17], uint64_t h)
{
    snprintf(out, 17, "%016" PRIx64, h);
}

static void set_kvs(gguf_writer *w, const solve_result *r)
{
    const solve_problem *p = r->problem;
    char h[17];
    gguf_set_str(w, "general.architecture", "generic.gpu_index");
    gguf_set_u32(w, "generic.gpu_index.block_count", p->n_layer);
    /* What the split needs: the runtime rejects the index when less VRAM is free. */
    gguf_set_u64(w, "split.vram_capacity", r->sol.bytes);

    gguf_set_str(w, K("model"), r->model_name);
    hex(h, r->model_hash);
    gguf_set_str(w, K("model_ffn_hash"), h);
    hex(h, r->stats_hash);
    gguf_set_str(w, K("stats_hash"), h);
    gguf_set_str(w, K("stats_corpus"), r->stats->corpus);
    gguf_set_u64(w, K("stats_n_tokens"), r->stats->n_tokens);
    gguf_set_u64(w, K("vram_budget"), r->vram_budget);
    gguf_set_u64(w, K("dense_bytes"), r->budget->fixed_total);
    gguf_set_u64(w, K("ffn_capacity"), r->capacity);
    gguf_set_u64(w, K("ffn_bytes"), r->sol.bytes);
    gguf_set_u32(w, K("ctx"), r->budget->ctx);
    gguf_set_u32(w, K("kv_bytes"), (uint32_t)r->budget->kv_bytes);
    gguf_set_u32(w, K("batch"), p->batch);
    uint32_t *min = solve_alloc(p->n_layer * sizeof *min);
    for (uint32_t l = 0; l < p->n_layer; l++)
        min[l] = p->layer[l].n_units ? p->layer[l].end[0] : p->n_ff + 1;
    gguf_set_arr(w, K("min_neurons"), GGUF_TYPE_UINT32, min, p->n_layer);
    free(min);
    gguf_set_str(w, K("method"), r->method);
    gguf_set_str(w, K("status"), solve_status_names[r->info.status]);
    gguf_set_bool(w, K("time_limit_hit"), r->info.time_limit_hit);
    gguf_set_u64(w, K("objective"), (uint64_t)r->sol.objective);
    if (r->info.status != SOLVE_GREEDY) {
        gguf_set_f64(w, K("lp_bound"), r->info.lp_bound);
        gguf_set_f64(w, K("bound"), r->info.bound);
        gguf_set_f64(w, K("gap"), r->info.gap);
    }
    gguf_set_u64(w, K("greedy_objective"), (uint64_t)r->greedy_objective);
    gguf_set_u64(w, K("total_activations"), (uint64_t)p->total);
}

int solve_write_gpuidx(const solve_result *r, const char *path, char *err, size_t errlen)
{
    const solve_problem *p = r->problem;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_PWRI);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    set_kvs(w, r);
    /* The writer keeps pointers until it writes: one buffer for all layers. */
    int32_t *idx = solve_alloc((size_t)p->n_layer * p->n_ff * sizeof *idx);
    int32_t *bucket = solve_alloc((size_t)p->n_layer * p->n_ff * sizeof *bucket);
    int rc = 0;
    for (uint32_t l = 0; l < p->n_layer && rc == 0; l++) {
        int32_t *gi = idx + (size_t)l * p->n_ff, *gb = bucket + (size_t)l * p->n_ff;
        uint32_t k = solve_gpu_neurons(p, &r->sol, l);
        const uint32_t *order = p->order + (size_t)l * p->n_ff;
        for (uint32_t i = 0; i < k; i++)
            gi[order[i]] = 1;
        int64_t nb = 0;
        for (uint32_t j = 0; j < p->n_ff; j++)
            if (gi[j])
                gb[nb++] = (int32_t)j;
        char name[GGUF_MAX_NAME + 1];
        int64_t ne = p->n_ff;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_idx", l);
        rc |= gguf_add_tensor(w, name, GGML_TYPE_I32, 1, &ne, gi) < 0;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_bucket", l);
        rc |= gguf_add_tensor(w, name, GGML_TYPE_I32, 1, &nb, gb) < 0;
    }
    if (rc)
        snprintf(err, errlen, "%s: cannot add the index tensors", path);
    else
        rc = gguf_writer_write(w, path, err, errlen);
    gguf_writer_free(w);
    free(idx);
    free(bucket);
    return rc ? -1 : 0;
}
