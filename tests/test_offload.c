/* Placements and device failures (issue 33), on a stand-in device: the CPU
 * backend behind a table of its own (backend.h), so the forward pass treats
 * it as a device (its own rows and cache, the residual stream moved across,
 * the FFN exchanged with the CPU) while computing the CPU's bits. Every
 * placement must then give the CPU-only logits bit for bit, and a device
 * that fails mid-run must leave the conversation exactly where a CPU-only
 * run is, for one sequence and for several scheduled together. The device's own numerics are tests/test_backend_ops.c's and
 * tests/test_offload.sh's. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/cpu.h"
#include "model.h"
#include "place.h"
#include "sampler.h"
#include "scheduler.h"
#include "sparse.h"

enum { CTX = 48, NPROMPT = 11, NGEN = 8, VMAX = 512 };

/* ------------------------------------------------------------ the stand-in device */

typedef struct {
    hc_backend be;
    hc_backend *cpu;     /* the CPU backend that computes */
    hc_ctx *owner;       /* the context whose pool it runs on */
    long steps, fail_at; /* steps run; the step that fails (-1: none) */
    long first_copy[2];  /* the step of the first kv_copy in (0) and out (1); -1: none yet */
    int failed;
    int top_block;       /* the largest block id a step's rows used */
} standin;

static standin *sd(hc_backend *be) { return (standin *)be; }
/* 1 when the step may run: counts it, fails at fail_at, does nothing after */
static int step(hc_backend *be)
{
    standin *s = sd(be);
    if (s->steps++ == s->fail_at) s->failed = 1;
    return !s->failed;
}
static int status(hc_backend *be, char *err, size_t errlen)
{
    if (sd(be)->failed) snprintf(err, errlen, "stand-in device: lost (injected at step %ld)", sd(be)->fail_at);
    return sd(be)->failed ? -1 : 0;
}

#define CPU(be) (sd(be)->cpu)
static void s_free(hc_backend *be) { CPU(be)->ops->free(CPU(be)); hc_ctx_free(sd(be)->owner); free(be); }
static hc_buf *s_buf_new(hc_backend *be, size_t n, char *e, size_t el) { return CPU(be)->ops->buf_new(CPU(be), n, e, el); }
static void s_buf_free(hc_backend *be, hc_buf *b) { CPU(be)->ops->buf_free(CPU(be), b); }
static void s_write(hc_backend *be, hc_view d, const void *src, size_t n) { if (step(be)) CPU(be)->ops->write(CPU(be), d, src, n); }
static int s_read(hc_backend *be, hc_view src, void *d, size_t n, char *e, size_t el)
{
    if (status(be, e, el)) return -1;
    return CPU(be)->ops->read(CPU(be), src, d, n, e, el);
}
static float *s_host(hc_view v) { (void)v; return NULL; }
static float *s_pinned_host(hc_buf *b) { return hc_cpu_ptr((hc_view){ b, 0 }); }
static void *s_mat_new(hc_backend *be, const hc_weight *w, char *e, size_t el) { (void)be, (void)e, (void)el; return (void *)w; }
static void *s_vec_new(hc_backend *be, const float *v, int n, char *e, size_t el) { (void)be, (void)n, (void)e, (void)el; return (void *)v; }
static void s_dev_free(hc_backend *be, void *d) { (void)be, (void)d; }
static void s_matmul(hc_backend *be, hc_view x, int B, const hc_mm *it, int n) { if (step(be)) CPU(be)->ops->matmul(CPU(be), x, B, it, n); }
static void s_norm(hc_backend *be, const hc_hparams *hp, const hc_bvec *w, const hc_bvec *b, hc_view x, hc_view o, int B)
{
    if (step(be)) CPU(be)->ops->norm(CPU(be), hp, w, b, x, o, B);
}
static void s_rope(hc_backend *be, const hc_hparams *hp, const hc_bvec *f, const hc_rope_rows *r, int count)
{
    if (step(be)) CPU(be)->ops->rope(CPU(be), hp, f, r, count);
}
static void s_add_bias(hc_backend *be, hc_view y, const hc_bvec *b, int B, int n) { if (step(be)) CPU(be)->ops->add_bias(CPU(be), y, b, B, n); }
static void s_add(hc_backend *be, hc_view x, hc_view a, hc_view b, size_t n) { if (step(be)) CPU(be)->ops->add(CPU(be), x, a, b, n); }
static void s_ffn_act(hc_backend *be, const hc_hparams *hp, const hc_bvec *gb, const hc_bvec *ub, hc_view g, hc_view u, int B)
{
    if (step(be)) CPU(be)->ops->ffn_act(CPU(be), hp, gb, ub, g, u, B);
}
static void s_batch(hc_backend *be, const hc_seq_rows *rows)
{
    for (int b = 0; b < rows->B; b++) {
        int32_t id = rows->table[rows->seq[b] * rows->max_blocks + rows->pos[b] / rows->block];
        if (id > sd(be)->top_block) sd(be)->top_block = id;
    }
    CPU(be)->ops->batch(CPU(be), rows);
}
static hc_kv *s_kv_new(hc_backend *be, const hc_hparams *hp, int n_blocks, int n_warm, int block, int n_ctx,
                       const uint8_t *on, uint32_t tk, uint32_t tv, char *e, size_t el)
{
    return CPU(be)->ops->kv_new(CPU(be), hp, n_blocks, n_warm, block, n_ctx, on, tk, tv, e, el);
}
static void s_kv_free(hc_backend *be, hc_kv *kv) { CPU(be)->ops->kv_free(CPU(be), kv); }
static int s_kv_copy(hc_backend *be, hc_kv *kv, int l, const int32_t *ids, int n, void *host, int out, char *e,
                     size_t el)
{
    if (sd(be)->first_copy[out] < 0) sd(be)->first_copy[out] = sd(be)->steps;
    if (!step(be)) return status(be, e, el);
    CPU(be)->ops->kv_copy(CPU(be), kv, l, ids, n, host, out, e, el);
    if (out) {   /* blocks given up are the pool's again: NaN here, so a swap that is not copied back shows */
        size_t floats = (size_t)n * 2 * HC_KV_BLOCK_MAX * 64;   /* synth's kv_dim is 32 */
        float *nan = malloc(sizeof *nan * floats);
        for (size_t i = 0; nan && i < floats; i++) nan[i] = NAN;
        if (nan) CPU(be)->ops->kv_copy(CPU(be), kv, l, ids, n, nan, 0, e, el);
        free(nan);
    }
    return status(be, e, el);
}
static void s_kv_store(hc_backend *be, hc_kv *kv, int l, int B, hc_view k, hc_view v)
{
    if (step(be)) CPU(be)->ops->kv_store(CPU(be), kv, l, B, k, v);
}
static void s_attention(hc_backend *be, hc_kv *kv, int l, const hc_hparams *hp, hc_view q, int row0, int n, hc_view out)
{
    if (step(be)) CPU(be)->ops->attention(CPU(be), kv, l, hp, q, row0, n, out);
}

static const hc_backend_ops standin_ops = {
    .name = "stand-in", .free = s_free, .buf_new = s_buf_new, .buf_free = s_buf_free, .write = s_write,
    .send = s_write, .read = s_read, .host = s_host, .pinned_new = s_buf_new, .pinned_host = s_pinned_host, .mat_new = s_mat_new, .vec_new = s_vec_new, .dev_free = s_dev_free,
    .matmul = s_matmul, .norm = s_norm, .rope = s_rope, .add_bias = s_add_bias, .add = s_add,
    .ffn_act = s_ffn_act, .batch = s_batch, .kv_new = s_kv_new, .kv_free = s_kv_free, .kv_store = s_kv_store, .kv_copy = s_kv_copy,
    .attention = s_attention, .sync = status,
};

static hc_backend *standin_new(const hc_model *m, long fail_at)
{
    char err[256];
    standin *s = calloc(1, sizeof *s);
    hc_ctx_params p = { .n_ctx = CTX, .n_threads = 2 };
    s->be.ops = &standin_ops;
    s->owner = hc_ctx_new(m, &p, err, sizeof err);
    s->cpu = s->owner ? hc_cpu_backend_new(s->owner) : NULL;
    s->fail_at = fail_at;
    s->first_copy[0] = s->first_copy[1] = -1;
    return &s->be;
}

/* ------------------------------------------------------------ runs */

static const int32_t prompt[NPROMPT] = { 1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 33 };

typedef struct {
    float logits[NPROMPT * VMAX];   /* every prompt position, then */
    float last[NGEN][VMAX];         /* each generated token's */
} run_out;

/* The prompt in batches of n_batch, then NGEN greedy tokens one at a time. */
static int run(const hc_model *m, const hc_place *place, hc_sparse *s, int n_batch, run_out *o)
{
    char err[256];
    hc_ctx_params p = { .n_ctx = CTX, .n_batch = n_batch, .n_threads = 2, .place = place };
    if (s) hc_sparse_attach(s, &p);
    p.place = place;
    hc_ctx *ctx = hc_ctx_new(m, &p, err, sizeof err);
    if (!ctx) return -1;
    int V = m->hp.n_vocab, rc = hc_eval(ctx, prompt, NPROMPT, 0, o->logits, HC_LOGITS_ALL);
    const float *last = o->logits + (size_t)(NPROMPT - 1) * V;
    for (int i = 0; i < NGEN && !rc; i++) {
        int32_t t = hc_argmax(last, V);
        rc = hc_eval(ctx, &t, 1, NPROMPT + i, o->last[i], HC_LOGITS_LAST);
        last = o->last[i];
    }
    hc_ctx_free(ctx);
    return rc;
}

static int same(const run_out *a, const run_out *b, int V)
{
    return !memcmp(a->logits, b->logits, sizeof(float) * NPROMPT * (size_t)V) &&
           !memcmp(a->last, b->last, sizeof a->last);
}

static hc_model *synth(const char *arch, const char *act)
{
    char err[256], name[64];
    snprintf(name, sizeof name, "%s-%s.gguf", arch, act);
    const char *path = th_tmp(name);
    if (th_sh("%s synth --arch %s --act %s --dim 64 --n-ff 192 --layers 3 --heads 4 --kv-heads 2 --vocab %d "
              "--ctx %d --hot-fraction 0.3 -o %s", th_bin("hc-convert"), arch, act, VMAX, CTX, path))
        return NULL;
    return hc_model_load(path, err, sizeof err);
}

/* Every placement of every family, dense and (ReLU) sparse FFN (on the CPU,
 * behind the exchange), prompt in one batch and in batches of 4: the
 * CPU-only bits. */
static void test_placements_same_bits(void)
{
    static const char *arches[] = { "llama", "qwen2", "bamboo", "opt", "falcon" };
    static const hc_place_plan plans[] = { { 3, 1, 1 }, { 1, 1, 0 }, { 3, 0, 1 }, { 2, 0, 0 }, { 0, 0, 1 } };
    static run_out cpu, dev;
    for (size_t a = 0; a < sizeof arches / sizeof *arches; a++) {
        hc_model *m = synth(arches[a], "relu");
        CHECKF(m, "%s: %s", arches[a], th_last_err());
        for (int sparse = 0; sparse < 2; sparse++) {
            char err[256];
            hc_sparse_params sp = { 0 };
            hc_sparse *s = sparse ? hc_sparse_new(m, &sp, err, sizeof err) : NULL;
            CHECKF(!sparse || s, "%s", err);
            CHECK(run(m, NULL, s, 0, &cpu) == 0);
            for (size_t p = 0; p < sizeof plans / sizeof *plans; p++) {
                if (sparse && plans[p].ffn) continue;   /* the device's FFN is dense: other bits than the sparse one */
                hc_backend *be = standin_new(m, -1);
                hc_place *pl = hc_place_new(m, be, "stand-in", &plans[p], stderr, err, sizeof err);
                CHECKF(pl, "%s", err);
                for (int nb = 0; nb <= 4; nb += 4) {
                    CHECK(run(m, pl, s, nb, &dev) == 0);
                    CHECKF(same(&cpu, &dev, m->hp.n_vocab), "%s, %s FFN, plan {%d, %d, %d}, batch %d: not the CPU's bits",
                           arches[a], sparse ? "sparse" : "dense", plans[p].n_layers, plans[p].ffn, plans[p].head, nb);
                }
                hc_place_free(pl);
                be->ops->free(be);
            }
            hc_sparse_free(s);
        }
        hc_model_free(m);
    }
}

/* The device lost at any step of the run (the prompt, between layers,
 * in the head, in a decode step): one warning, the cache rebuilt on the
 * CPU, and every logit after it the CPU-only run's. */
static void test_failure_mid_run(void)
{
    hc_model *m = synth("llama", "silu");
    CHECKF(m, "%s", th_last_err());
    static run_out cpu, dev;
    CHECK(run(m, NULL, NULL, 0, &cpu) == 0);
    static const hc_place_plan whole = { 3, 1, 1 };
    static const long at[] = { 0, 5, 17, 40, 60, 90, 150, 400 };
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        char err[256];
        hc_backend *be = standin_new(m, at[i]);
        hc_place *pl = hc_place_new(m, be, "stand-in", &whole, stderr, err, sizeof err);
        CHECKF(pl, "%s", err);
        CHECK(run(m, pl, NULL, 4, &dev) == 0);
        CHECKF(same(&cpu, &dev, m->hp.n_vocab), "failure at step %ld: not the CPU-only run", at[i]);
        CHECKF(at[i] < sd(be)->steps, "step %ld never came (%ld steps)", at[i], sd(be)->steps);
        hc_place_free(pl);
        be->ops->free(be);
    }
    hc_model_free(m);
}

/* ------------------------------------------------------------ many sequences */

enum { NREQ = 4, SGEN = 6 };
typedef struct {
    int32_t tok[NREQ][SGEN];
    int n[NREQ];
} sched_out;
static void on_token(void *user, int r, int32_t t)
{
    sched_out *o = user;
    if (o->n[r] < SGEN) o->tok[r][o->n[r]++] = t;
}
static void on_done(void *user, int r, enum hc_stop why) { (void)user, (void)r, (void)why; }

/* NREQ greedy requests: the prompt's last NPROMPT - r tokens, SGEN more */
static void requests(hc_request reqs[NREQ])
{
    for (int r = 0; r < NREQ; r++) reqs[r] = (hc_request){ prompt + r, NPROMPT - r, SGEN, { 0.0f, 0, 1.0f, 1 } };
}

/* The requests at once, on place or the CPU, in a pool of n_blocks of
 * `block` positions (0: NREQ contexts), preempted by swapping or
 * recomputation: their tokens in *o. */
static int schedule(const hc_model *m, const hc_place *place, int block, int n_blocks, int swap, sched_out *o,
                    hc_sched_stats *st)
{
    char err[256];
    if (!n_blocks) n_blocks = NREQ * hc_blocks_for(CTX, block);
    hc_ctx_params p = { .n_ctx = CTX, .n_kv_blocks = n_blocks, .kv_block = block, .n_batch = 8, .n_threads = 2,
                        .place = place };
    hc_ctx *ctx = hc_ctx_new(m, &p, err, sizeof err);
    if (!ctx) return -1;
    hc_request reqs[NREQ];
    requests(reqs);
    hc_sched_params sp = { NREQ, CTX, n_blocks, NULL, swap, UINT64_MAX };
    hc_sched_out out = { on_token, on_done, o };
    memset(o, 0, sizeof *o);
    int rc = hc_sched_run(ctx, reqs, NREQ, &sp, &out, st, err, sizeof err);
    hc_ctx_free(ctx);
    return rc;
}

/* Sequences run together when the device fails at any step: every cache
 * went with it, each sequence is recomputed on the CPU, and every text is the
 * CPU-only run's. */
static void test_failure_mid_schedule(void)
{
    hc_model *m = synth("llama", "relu");
    CHECKF(m, "%s", th_last_err());
    static sched_out cpu, dev;
    hc_sched_stats st;
    CHECK(schedule(m, NULL, HC_KV_BLOCK, 0, 1, &cpu, &st) == 0);
    static const hc_place_plan whole = { 3, 1, 1 };
    static const long at[] = { 0, 7, 30, 90, 200, 450 };   /* the last near the end of 486 steps */
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        char err[256];
        hc_backend *be = standin_new(m, at[i]);
        hc_place *pl = hc_place_new(m, be, "stand-in", &whole, stderr, err, sizeof err);
        CHECKF(pl, "%s", err);
        CHECK(schedule(m, pl, HC_KV_BLOCK, 0, 1, &dev, &st) == 0);
        CHECKF(!memcmp(&cpu, &dev, sizeof cpu), "failure at step %ld: not the CPU-only texts", at[i]);
        CHECKF(at[i] < sd(be)->steps, "step %ld never came (%ld steps)", at[i], sd(be)->steps);
        CHECKF(st.most_running > 1, "the requests never ran together (%d)", st.most_running);
        hc_place_free(pl);
        be->ops->free(be);
    }
    hc_model_free(m);
}

/* The blocks a run takes are 0 .. hc_sched_blocks_most - 1, the ones its
 * context makes ahead: the requests' blocks all at once in a pool that holds
 * them, the pool in one that does not. */
static void test_blocks_most(void)
{
    hc_model *m = synth("llama", "relu");
    CHECKF(m, "%s", th_last_err());
    static sched_out out;
    hc_sched_stats st;
    static const hc_place_plan whole = { 3, 1, 1 };
    enum { BLOCK = 4 };
    hc_request reqs[NREQ];
    requests(reqs);
    int all = 0;
    for (int r = 0; r < NREQ; r++) all += hc_blocks_for(NPROMPT - r + SGEN, BLOCK);
    const int pools[] = { NREQ * hc_blocks_for(CTX, BLOCK), hc_blocks_for(CTX, BLOCK) };
    for (int i = 0; i < 2; i++) {
        char err[256];
        hc_sched_params sp = { NREQ, CTX, pools[i], NULL, 0, 0 };
        int most = hc_sched_blocks_most(reqs, NREQ, &sp, BLOCK), want = pools[i] < all ? pools[i] : all;
        CHECKF(most == want, "pool %d: %d blocks most, not %d", pools[i], most, want);
        hc_backend *be = standin_new(m, -1);
        hc_place *pl = hc_place_new(m, be, "stand-in", &whole, stderr, err, sizeof err);
        CHECKF(pl, "%s", err);
        CHECK(schedule(m, pl, BLOCK, pools[i], 0, &out, &st) == 0);
        CHECKF(sd(be)->top_block < most, "pool %d: block %d used, beyond the %d made ahead", pools[i],
               sd(be)->top_block, most);
        hc_place_free(pl);
        be->ops->free(be);
    }
    hc_model_free(m);
}

/* A pool of one context for the NREQ sequences: preempted, their caches
 * swapped to host memory and back (or recomputed), the texts those of the
 * pool that holds them all, on the CPU and on the device; the device lost
 * at any step (in a swap too): every text still the CPU-only run's. */
static void test_swap_preemption(void)
{
    hc_model *m = synth("llama", "relu");
    CHECKF(m, "%s", th_last_err());
    static sched_out all, out;
    hc_sched_stats st;
    enum { BLOCK = 4 };   /* a sequence grows by a block every 4 tokens */
    const int small = hc_blocks_for(CTX, BLOCK);
    CHECK(schedule(m, NULL, BLOCK, 0, 1, &all, &st) == 0 && st.preempted == 0);
    for (int swap = 0; swap <= 1; swap++) {
        CHECK(schedule(m, NULL, BLOCK, small, swap, &out, &st) == 0);
        CHECKF(!memcmp(&all, &out, sizeof all), "swap %d on the CPU: not the texts of the larger pool", swap);
        CHECKF(st.preempted > 0 && st.swapped == (swap ? st.preempted : 0), "swap %d: %d preempted, %d swapped", swap,
               st.preempted, st.swapped);
    }
    static const hc_place_plan whole = { 3, 1, 1 };
    /* no failure, then failures in the first swap out and in, then at steps 0, 13, 39, ... */
    long at[16] = { -1 }, steps = 0;
    for (int i = 0; i < 16 && (i < 3 || at[i] < steps); i++) {
        char err[256];
        hc_backend *be = standin_new(m, at[i]);
        hc_place *pl = hc_place_new(m, be, "stand-in", &whole, stderr, err, sizeof err);
        CHECKF(pl, "%s", err);
        CHECK(schedule(m, pl, BLOCK, small, 1, &out, &st) == 0);
        CHECKF(!memcmp(&all, &out, sizeof all), "device, failure at step %ld: not the CPU-only texts", at[i]);
        if (i == 0) {
            steps = sd(be)->steps;
            at[1] = sd(be)->first_copy[1], at[2] = sd(be)->first_copy[0], at[3] = 0;
            CHECKF(st.swapped > 0 && at[1] >= 0 && at[2] > at[1], "no swap on the device (%d preempted)", st.preempted);
        }
        if (i >= 3 && i < 15) at[i + 1] = at[i] * 3 + 13;
        hc_place_free(pl);
        be->ops->free(be);
    }
    hc_model_free(m);
}

int main(void)
{
    RUN(test_placements_same_bits);
    RUN(test_failure_mid_run);
    RUN(test_failure_mid_schedule);
    RUN(test_blocks_most);
    RUN(test_swap_preemption);
    return th_done();
}
