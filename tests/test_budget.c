/* common/budget.c: the per-layer figures (dense part, KV cache), the output
 * head, totals that are their sums, and hc_budget_layers at its boundaries;
 * on stories260K.gguf and on a small model with a predictor, biases and tied
 * embeddings; the cost model's verdict on a placement. hc-solve's use of
 * the same figures: test_solve. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "budget.h"
#include "gguf.h"
#include "harness.h"

static char err[512];

/* Every fixed total is its parts summed over the layers (the output head
 * apart, which belongs to no layer), and fixed_total their sum. */
static int sums_hold(const hc_budget *b)
{
    uint64_t total = 0;
    for (int i = 0; i < HC_FIX_COUNT; i++) {
        uint64_t sum = 0;
        for (uint32_t l = 0; l < b->n_layer; l++)
            sum += b->layer[l].part[i];
        if (sum != (i == HC_FIX_OUTPUT ? 0 : b->fixed[i]))
            return 0;
        total += b->fixed[i];
    }
    return total == b->fixed_total;
}

static gguf_file *open_fixture(const char *name)
{
    const char *path = th_fixture(name);
    return path ? gguf_open(path, err, sizeof err) : NULL;
}

/* stories260K: 5 layers of F32 attention (q, o [64, 64]; k, v [64, 32];
 * attn_norm [64]), ffn_norm [64], no predictor; output.weight [64, 512] +
 * output_norm; its KV cache in f32, then in f16. */
static void test_stories260K_layers(void)
{
    if (!th_fixture("stories260K.gguf"))
        SKIP("no fixtures");
    gguf_file *m = open_fixture("stories260K.gguf");
    CHECKF(m, "%s", err);
    hc_budget b;
    int rc = hc_budget_read(&b, m, 512, 2 * HC_BUDGET_KV_BYTES, err, sizeof err);
    gguf_close(m);
    CHECKF(rc == 0, "%s", err);
    CHECK(b.n_layer == 5 && b.ctx == 512);
    for (uint32_t l = 0; l < b.n_layer; l++) {
        const uint64_t *p = b.layer[l].part;
        CHECKF(p[HC_FIX_ATTN] == 2 * 64 * 64 * 4 + 2 * 64 * 32 * 4 + 64 * 4 && p[HC_FIX_PRED] == 0 &&
               p[HC_FIX_NORM] == 64 * 4 && p[HC_FIX_OUTPUT] == 0 && p[HC_FIX_GPTQ_PAIRS] == 0,
               "layer %" PRIu32 ": attn %" PRIu64 " pred %" PRIu64 " norm %" PRIu64, l, p[HC_FIX_ATTN],
               p[HC_FIX_PRED], p[HC_FIX_NORM]);
        /* K and V, 32 f32 each (4 heads of 8), for 512 positions */
        CHECKF(p[HC_FIX_KV] == 2 * 512 * 32 * 4, "layer %" PRIu32 ": kv %" PRIu64, l, p[HC_FIX_KV]);
        CHECK(hc_budget_layer_dense(&b, l) == p[HC_FIX_ATTN] + p[HC_FIX_NORM]);
        CHECK(b.layer[l].neuron_bytes == 3 * 64 * 4);
    }
    CHECK(b.fixed[HC_FIX_OUTPUT] == 64 * 512 * 4 + 64 * 4);
    CHECK(sums_hold(&b));
    hc_budget_free(&b);
    /* an f16 cache (-ctk f16 -ctv f16): 2 bytes an element, the rest as before */
    m = open_fixture("stories260K.gguf");
    CHECKF(m, "%s", err);
    hc_budget h;
    rc = hc_budget_read(&h, m, 512, 2 * 2, err, sizeof err);
    gguf_close(m);
    CHECKF(rc == 0, "%s", err);
    CHECK(h.layer[0].part[HC_FIX_KV] == 2 * 512 * 32 * 2 &&
          h.layer[0].part[HC_FIX_ATTN] == 2 * 64 * 64 * 4 + 2 * 64 * 32 * 4 + 64 * 4);
    CHECK(sums_hold(&h));
    hc_budget_free(&h);
}

/* hc_budget_layers counts whole leading layers (dense part + KV), and all of
 * them whenever hc_budget_capacity accepts the budget. */
static void test_layers_boundaries(void)
{
    if (!th_fixture("stories260K.gguf"))
        SKIP("no fixtures");
    gguf_file *m = open_fixture("stories260K.gguf");
    CHECKF(m, "%s", err);
    hc_budget b;
    int rc = hc_budget_read(&b, m, 100, 2 * HC_BUDGET_KV_BYTES, err, sizeof err);
    gguf_close(m);
    CHECKF(rc == 0, "%s", err);
    uint64_t one = hc_budget_layer_dense(&b, 0) + b.layer[0].part[HC_FIX_KV], all = 5 * one;
    CHECK(all == b.fixed_total - b.fixed[HC_FIX_OUTPUT]);
    CHECK(hc_budget_layers(&b, 0) == 0);
    CHECK(hc_budget_layers(&b, one - 1) == 0);
    CHECK(hc_budget_layers(&b, one) == 1);
    CHECK(hc_budget_layers(&b, 3 * one - 1) == 2);
    CHECK(hc_budget_layers(&b, 3 * one) == 3);
    /* the last layer's dense part fits but not its KV cache: it does not count */
    CHECK(hc_budget_layers(&b, 4 * one + hc_budget_layer_dense(&b, 4)) == 4);
    CHECK(hc_budget_layers(&b, all - 1) == 4);
    CHECK(hc_budget_layers(&b, all) == 5);
    CHECK(hc_budget_layers(&b, UINT64_MAX) == 5);
    uint64_t cap;
    CHECK(hc_budget_capacity(&b, "m", b.fixed_total, &cap, err, sizeof err) == 0 && cap == 0);
    CHECK(hc_budget_layers(&b, b.fixed_total) == 5);
    CHECK(hc_budget_capacity(&b, "m", b.fixed_total - 1, &cap, err, sizeof err) == -1);
    CHECKF(strstr(err, "runs out at kv_cache"), "%s", err);
    hc_budget_free(&b);
}

/* Without --ctx the KV cache is priced for <arch>.context_length (2048). */
static void test_default_ctx(void)
{
    if (!th_fixture("stories260K.gguf"))
        SKIP("no fixtures");
    gguf_file *m = open_fixture("stories260K.gguf");
    CHECKF(m, "%s", err);
    hc_budget b;
    int rc = hc_budget_read(&b, m, -1, 2 * HC_BUDGET_KV_BYTES, err, sizeof err);
    gguf_close(m);
    CHECKF(rc == 0, "%s", err);
    CHECK(b.ctx == 2048 && b.fixed[HC_FIX_KV] == 5ull * 2 * 2048 * 32 * 4);
    hc_budget_free(&b);
}

#define NE 32
#define NFF 64
#define NV 16

static void add(gguf_writer *w, const char *name, int64_t ne0, int64_t ne1)
{
    static const float zeros[NFF * NE];
    int64_t ne[2] = { ne0, ne1 };
    gguf_add_tensor(w, name, GGML_TYPE_F32, ne1 > 1 ? 2 : 1, ne, zeros);
}

/* Two layers, 4 heads of 8 with 1 KV head (GQA), tied embeddings (no
 * output.weight); layer 0 has a predictor, an attn_q bias and an ffn_up bias,
 * layer 1 none of them; rope_freqs. extra: one more tensor, or NULL. */
static gguf_file *small_model(const char *path, const char *extra)
{
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", 2);
    gguf_set_u32(w, "llama.feed_forward_length", NFF);
    gguf_set_u32(w, "llama.embedding_length", NE);
    gguf_set_u32(w, "llama.context_length", 64);
    gguf_set_u32(w, "llama.attention.head_count", 4);
    gguf_set_u32(w, "llama.attention.head_count_kv", 1);
    add(w, "token_embd.weight", NE, NV);
    add(w, "output_norm.weight", NE, 1);
    add(w, "rope_freqs.weight", 4, 1);
    for (int l = 0; l < 2; l++) {
        char n[64];
#define T(s, a, b) (snprintf(n, sizeof n, "blk.%d." s, l), add(w, n, a, b))
        T("attn_norm.weight", NE, 1);
        T("attn_q.weight", NE, NE);
        T("attn_k.weight", NE, 8);
        T("attn_v.weight", NE, 8);
        T("attn_output.weight", NE, NE);
        T("ffn_norm.weight", NE, 1);
        T("ffn_up.weight", NE, NFF);
        T("ffn_down.weight", NFF, NE);
        if (l == 0) {
            T("attn_q.bias", NE, 1);
            T("ffn_up.bias", NFF, 1);
            T("fc1.weight", NE, 16);
            T("fc2.weight", 16, NFF);
        }
#undef T
    }
    if (extra)
        add(w, extra, NE, 1);
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    return rc ? NULL : gguf_open(path, err, sizeof err);
}

static void test_small_model_parts(void)
{
    gguf_file *m = small_model(th_tmp("small.gguf"), NULL);
    CHECKF(m, "%s", err);
    hc_budget b;
    int rc = hc_budget_read(&b, m, 10, 2 * HC_BUDGET_KV_BYTES, err, sizeof err);
    gguf_close(m);
    CHECKF(rc == 0, "%s", err);
    const uint64_t attn = (2 * NE * NE + 2 * NE * 8 + NE) * 4, norms = NE * 4;   /* attn_norm is attention's */
    const uint64_t *p0 = b.layer[0].part, *p1 = b.layer[1].part;
    CHECK(p0[HC_FIX_ATTN] == attn + NE * 4 && p1[HC_FIX_ATTN] == attn);
    CHECK(p0[HC_FIX_PRED] == (NE * 16 + 16 * NFF) * 4 && p1[HC_FIX_PRED] == 0);
    CHECK(p0[HC_FIX_NORM] == norms + NFF * 4 && p1[HC_FIX_NORM] == norms);
    /* one KV head of 8: K and V, 8 f32 each, for 10 positions */
    CHECK(p0[HC_FIX_KV] == 2 * 10 * 8 * 4 && p1[HC_FIX_KV] == p0[HC_FIX_KV]);
    CHECK(b.layer[0].neuron_bytes == 2 * NE * 4 + 4 && b.layer[1].neuron_bytes == 2 * NE * 4);
    /* tied: token_embd is the head's weight */
    CHECK(b.fixed[HC_FIX_OUTPUT] == (NE * NV + NE + 4) * 4);
    CHECK(sums_hold(&b));
    uint64_t l0 = hc_budget_layer_dense(&b, 0) + p0[HC_FIX_KV], l1 = hc_budget_layer_dense(&b, 1) + p1[HC_FIX_KV];
    CHECK(hc_budget_layers(&b, l0 - 1) == 0 && hc_budget_layers(&b, l0) == 1);
    CHECK(hc_budget_layers(&b, l0 + l1 - 1) == 1 && hc_budget_layers(&b, l0 + l1) == 2);
    hc_budget_free(&b);
}

/* A blk.N tensor of no layer 0..n_layer-1 has no place in the per-layer figures. */
static void test_tensor_outside_layers(void)
{
    const char *path = th_tmp("outside.gguf");
    gguf_file *m = small_model(path, "blk.2.attn_norm.weight");
    CHECKF(m, "%s", err);
    hc_budget b;
    int rc = hc_budget_read(&b, m, 10, 2 * HC_BUDGET_KV_BYTES, err, sizeof err);
    gguf_close(m);
    CHECK(rc == -1);
    CHECKF(strstr(err, path) && strstr(err, "tensor blk.2.attn_norm.weight is not in a layer 0..1"), "%s", err);
    CHECK(b.layer == NULL);
}

/* hc_budget_place_pays: the bytes placed (dense parts, FFN with ffn, head
 * with head) at the cost model's rates against the device's costs: each
 * placed layer's launches, and a synchronisation per placed layer whose
 * FFN stays on the CPU and one for the return. */
static void test_place_pays(void)
{
    hc_budget_layer layers[2] = { { { 0 }, 0 }, { { 0 }, 0 } };
    hc_budget b = { .n_layer = 2, .n_ff = 100, .layer = layers };
    const double per_byte = 1.0 / HC_COST_CPU_BW - 1.0 / HC_COST_GPU_BW;
    /* the dense part at which one layer's launches, its exchange and the return are paid exactly */
    const double one = HC_COST_LAYER_S + 2 * HC_COST_SYNC_S;
    const uint64_t even = (uint64_t)(one / per_byte);
    double saved, cost;
    layers[0].part[HC_FIX_ATTN] = even - 10;
    CHECK(!hc_budget_place_pays(&b, 1, 0, 0, &saved, &cost));
    CHECK(fabs(cost - one) < 1e-12 && fabs(saved - (double)(even - 10) * per_byte) < 1e-12);
    layers[0].part[HC_FIX_ATTN] = even + 10;
    CHECK(hc_budget_place_pays(&b, 1, 0, 0, &saved, &cost));
    /* a second layer of 8 KB (stories260K's size) adds costs it does not pay for */
    layers[1].part[HC_FIX_ATTN] = 8192;
    CHECK(!hc_budget_place_pays(&b, 2, 0, 0, &saved, &cost));
    CHECK(fabs(cost - (2 * HC_COST_LAYER_S + 3 * HC_COST_SYNC_S)) < 1e-12);
    /* with their FFN and the head, one synchronisation (the logits) beside the layers' launches */
    layers[0].part[HC_FIX_ATTN] = layers[1].part[HC_FIX_ATTN] = 1000;
    layers[0].neuron_bytes = layers[1].neuron_bytes = 40;
    b.fixed[HC_FIX_OUTPUT] = 5000;
    CHECK(!hc_budget_place_pays(&b, 2, 1, 1, &saved, &cost));
    CHECK(fabs(cost - (2 * HC_COST_LAYER_S + HC_COST_SYNC_S)) < 1e-12);
    CHECK(fabs(saved - (2 * 1000 + 2 * 4000 + 5000) * per_byte) < 1e-15);
    b.fixed[HC_FIX_OUTPUT] = (uint64_t)((2 * HC_COST_LAYER_S + HC_COST_SYNC_S) / per_byte);
    CHECK(hc_budget_place_pays(&b, 2, 1, 1, &saved, &cost));
    /* nothing placed: nothing saved, nothing spent */
    CHECK(!hc_budget_place_pays(&b, 0, 0, 0, &saved, &cost) && saved == 0 && cost == 0);
}

int main(void)
{
    RUN(test_stories260K_layers);
    RUN(test_layers_boundaries);
    RUN(test_default_ctx);
    RUN(test_small_model_parts);
    RUN(test_tensor_outside_layers);
    RUN(test_place_pays);
    return th_done();
}
