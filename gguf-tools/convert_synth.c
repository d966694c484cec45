/* hc-convert synth: a random but well-formed llama GGUF of any shape, generated
 * row by row from a seed (splitmix64, one stream per row, so any row can be
 * made anywhere and huge shapes stream in constant memory).
 *
 * Planted hot set (--hot-fraction F --hot-skew S). A ReLU neuron j fires when
 * its gate pre-activation g_j = w_j . h > 0, h = RMSNorm(x) of the residual
 * stream. Every token embedding gets the same component A*u along a fixed unit
 * direction u (A = sqrt(dim), as large as the per-token noise), so after
 * RMSNorm h . u ~ m = sqrt(dim/2) on every token, while the rest of h varies
 * from token to token. All matrices that read h (q, k, v, up, gate, output)
 * have rows orthogonal to u, so nothing else sees that direction; gate row j
 * then gets b_j u on top. With rows of per-element variance 1/dim,
 * g_j ~ N(b_j m, 1/2) over tokens, so P(fire) = Phi(b_j m sqrt 2), and
 * b_j = Phi^-1(p_j) / sqrt(dim) gives neuron j the firing rate p_j. Neurons
 * get random ranks k = 1..n_ff per layer and p(k) = P_MAX (1 + (k-1)/H)^-S
 * with H = round(F n_ff): the H top neurons fire on most tokens, the rest ever
 * more rarely (a Zipf-Mandelbrot law). Attention output and down projections
 * are kept small (gain 0.2) so later layers' residual streams keep the
 * direction. The order (hottest first) is stored per layer in KVs.
 *
 * Uniform firing (--active-fraction P): the same construction with p_j = P for
 * every neuron, so about P of a layer's neurons fire on each token.
 *
 * Low-rank gate (--gate-rank K): gate row j is c_j . V / sqrt(K), V the K unit
 * rows of a per-layer random basis (orthogonal to u), c_j unit-variance
 * noise: same per-element variance as a full-rank row, but every
 * pre-activation of a layer is a function of the K numbers V.h and h.u, so
 * which neurons fire is exactly what a predictor of hidden size >= 2K + 2 can
 * represent (sign(g_j) does not change with the RMSNorm scale). Real ReLU
 * models' activations are predictable in this way (PowerInfer's predictors);
 * full-rank random gates are not. */
#include "convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ggml_types.h"

#define P_MAX 0.9            /* firing rate of the hottest neuron */
#define WRITE_GAIN 0.2f      /* scale of attn_output / ffn_down: small residual updates */

typedef struct {
    uint64_t seed;
    int64_t dim, n_ff;
    float *u;                /* bias direction (unit), or NULL: nothing planted */
    float **gate_shift;      /* [layer][neuron] b_j * sqrt(dim) = Phi^-1(p_j) */
    int32_t **order;         /* [layer] neurons hottest first (hot set only) */
    uint32_t n_hot;          /* H = round(F n_ff), at least 1 (hot set only) */
    int64_t gate_rank;       /* K, or 0: full-rank gate rows */
    float **basis;           /* [layer][K][dim] unit rows orthogonal to u (gate_rank only) */
} synth;

/* Uniform on (-sqrt3, sqrt3): mean 0, variance 1. */
static float unit_noise(uint64_t *s)
{
    return ((float)(hc_splitmix64(s) >> 40) + 0.5f) * (2.0f / 16777216.0f) * 1.7320508f - 1.7320508f;
}

/* The stream of row r of tensor t. */
static uint64_t row_state(const synth *sy, const cv_tensor *t, int64_t r)
{
    uint64_t s = sy->seed ^ hc_fnv1a64(t->name, strlen(t->name), HC_FNV_INIT);
    s = hc_splitmix64(&s) ^ (uint64_t)r * 0xd1342543de82ef95ULL;
    hc_splitmix64(&s);
    return s;
}

static void noise_row(const synth *sy, const cv_tensor *t, int64_t r, float gain, float *out)
{
    uint64_t s = row_state(sy, t, r);
    const float scale = gain / sqrtf((float)t->ne[0]);
    for (int64_t i = 0; i < t->ne[0]; i++) out[i] = scale * unit_noise(&s);
}

/* Remove the component along u (rows that read the residual stream). */
static void orthogonalize(const synth *sy, float *row)
{
    if (!sy->u) return;
    double d = 0;
    for (int64_t i = 0; i < sy->dim; i++) d += (double)row[i] * sy->u[i];
    for (int64_t i = 0; i < sy->dim; i++) row[i] -= (float)d * sy->u[i];
}

static void gen_ones(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    (void)r0;
    for (int64_t i = 0; i < nr * t->ne[0]; i++) out[i] = 1.0f;
}

static void gen_zeros(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    (void)r0;
    for (int64_t i = 0; i < nr * t->ne[0]; i++) out[i] = 0.0f;
}

static void gen_embd(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    const synth *sy = t->gen_ctx;
    const float a = sqrtf((float)sy->dim);
    for (int64_t r = 0; r < nr; r++) {
        float *o = out + r * t->ne[0];
        noise_row(sy, t, r0 + r, sqrtf((float)t->ne[0]), o);     /* unit-variance elements */
        if (sy->u)
            for (int64_t i = 0; i < t->ne[0]; i++) o[i] += a * sy->u[i];
    }
}

static void gen_read(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    for (int64_t r = 0; r < nr; r++) {
        noise_row(t->gen_ctx, t, r0 + r, 1.0f, out + r * t->ne[0]);
        orthogonalize(t->gen_ctx, out + r * t->ne[0]);
    }
}

static void gen_write(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    for (int64_t r = 0; r < nr; r++) noise_row(t->gen_ctx, t, r0 + r, WRITE_GAIN, out + r * t->ne[0]);
}

/* A gate row of rank K: c . V / sqrt(K), c from the row's stream. */
static void low_rank_row(const synth *sy, const cv_tensor *t, int64_t r, float *out)
{
    uint64_t s = row_state(sy, t, r);
    const float *V = sy->basis[t->gen_id];
    const float inv = 1.0f / sqrtf((float)sy->gate_rank);
    memset(out, 0, (size_t)sy->dim * sizeof *out);
    for (int64_t k = 0; k < sy->gate_rank; k++) {
        const float c = unit_noise(&s) * inv;
        for (int64_t i = 0; i < sy->dim; i++) out[i] += c * V[k * sy->dim + i];
    }
}

static void gen_gate(const cv_tensor *t, int64_t r0, int64_t nr, float *out)
{
    const synth *sy = t->gen_ctx;
    if (sy->gate_rank)
        for (int64_t r = 0; r < nr; r++) low_rank_row(sy, t, r0 + r, out + r * t->ne[0]);
    else
        gen_read(t, r0, nr, out);
    if (!sy->u) return;
    const float inv = 1.0f / sqrtf((float)sy->dim);
    for (int64_t r = 0; r < nr; r++) {
        const float b = sy->gate_shift[t->gen_id][r0 + r] * inv;
        for (int64_t i = 0; i < sy->dim; i++) out[r * t->ne[0] + i] += b * sy->u[i];
    }
}

/* Phi^-1(p) by bisection on Phi(x) = erfc(-x/sqrt2)/2. */
static double probit(double p)
{
    double lo = -10, hi = 10;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Vocabulary: <unk> <s> </s>, the 256 byte tokens, printable ASCII, then
 * "▁"+letters and letters (English letter frequency order, shortest first)
 * with scores falling by one per piece, so SPM merges short common pieces first. */
static void synth_vocab(cv_vocab *v, uint32_t n)
{
    static const char alpha[] = "etaoinshrdlcumwfgypbvkjxqz";
    char buf[64];
    uint32_t id = 0;
    cv_vocab_init(v, n);
    cv_vocab_set(v, id++, "<unk>", 5, 0.0f, TOK_UNKNOWN);
    cv_vocab_set(v, id++, "<s>", 3, 0.0f, TOK_CONTROL);
    cv_vocab_set(v, id++, "</s>", 4, 0.0f, TOK_CONTROL);
    for (int b = 0; b < 256; b++, id++) {
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        cv_vocab_set(v, id, buf, 6, 0.0f, TOK_BYTE);
    }
    for (char c = ' '; c <= '~' && id < n; c++, id++) cv_vocab_set(v, id, &c, 1, 0.0f, TOK_NORMAL);
    float score = 0.0f;
    for (int len = 1; id < n; len++) {
        uint64_t count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (int space = 1; space >= (len > 1 ? 0 : 1) && id < n; space--)
            for (uint64_t k = 0; k < count && id < n; k++) {
                uint64_t x = k;
                buf[0] = ' ';
                for (int i = len; i > 0; i--, x /= 26) buf[space + i - 1] = alpha[x % 26];
                cv_vocab_set(v, id++, buf, (size_t)(len + space), score, TOK_NORMAL);
                score -= 1.0f;
            }
    }
}

/* The planted firing rates of o->layers layers: the unit direction u, and per
 * layer a random rank order of the neurons and each neuron's gate shift
 * (the hot set's law, or P for every neuron with --active-fraction). */
static void plant_hot_set(synth *sy, const cv_synth_opts *o)
{
    const long layers = o->layers, n_ff = o->n_ff;
    uint64_t s = o->seed ^ 0x5eed0fb1a5d1u;
    sy->n_hot = (uint32_t)lround(o->hot_fraction * (double)n_ff);
    if (!sy->n_hot) sy->n_hot = 1;
    const double uniform = o->active_fraction > 0 ? probit(o->active_fraction) : 0;
    sy->u = malloc((size_t)o->dim * sizeof *sy->u);
    double *shift_of_rank = malloc((size_t)n_ff * sizeof *shift_of_rank);
    sy->gate_shift = malloc((size_t)layers * sizeof *sy->gate_shift);
    sy->order = malloc((size_t)layers * sizeof *sy->order);
    if (!sy->u || !shift_of_rank || !sy->gate_shift || !sy->order) hc_die("out of memory");
    double norm = 0;
    for (long i = 0; i < o->dim; i++) {
        sy->u[i] = unit_noise(&s);
        norm += (double)sy->u[i] * sy->u[i];
    }
    for (long i = 0; i < o->dim; i++) sy->u[i] = (float)(sy->u[i] / sqrt(norm));
    for (long k = 0; k < n_ff; k++)
        shift_of_rank[k] = o->active_fraction > 0 ? uniform : probit(P_MAX * pow(1.0 + (double)k / sy->n_hot, -o->hot_skew));
    for (long l = 0; l < layers; l++) {
        int32_t *order = sy->order[l] = malloc((size_t)n_ff * sizeof *order);
        sy->gate_shift[l] = malloc((size_t)n_ff * sizeof **sy->gate_shift);
        if (!order || !sy->gate_shift[l]) hc_die("out of memory");
        for (long j = 0; j < n_ff; j++) order[j] = (int32_t)j;
        for (long j = n_ff - 1; j > 0; j--) {           /* Fisher-Yates */
            long r = (long)(hc_splitmix64(&s) % (uint64_t)(j + 1));
            int32_t t = order[j];
            order[j] = order[r];
            order[r] = t;
        }
        for (long k = 0; k < n_ff; k++) sy->gate_shift[l][order[k]] = (float)shift_of_rank[k];
    }
    free(shift_of_rank);
}

/* The per-layer bases of --gate-rank K: K noise rows, made orthogonal to u
 * and normalized (they need not be orthogonal to each other). */
static void make_gate_basis(synth *sy, const cv_synth_opts *o)
{
    uint64_t s = o->seed ^ 0xba5150fa7e5u;
    sy->basis = malloc((size_t)o->layers * sizeof *sy->basis);
    if (!sy->basis) hc_die("out of memory");
    for (long l = 0; l < o->layers; l++) {
        float *V = sy->basis[l] = malloc((size_t)(sy->gate_rank * sy->dim) * sizeof *V);
        if (!V) hc_die("out of memory");
        for (int64_t k = 0; k < sy->gate_rank; k++) {
            float *v = V + k * sy->dim;
            for (int64_t i = 0; i < sy->dim; i++) v[i] = unit_noise(&s);
            orthogonalize(sy, v);
            double n = 0;
            for (int64_t i = 0; i < sy->dim; i++) n += (double)v[i] * v[i];
            for (int64_t i = 0; i < sy->dim; i++) v[i] = (float)(v[i] / sqrt(n));
        }
    }
}

static void free_hot_set(synth *sy, long layers)
{
    for (long l = 0; sy->basis && l < layers; l++) free(sy->basis[l]);
    free(sy->basis);
    if (!sy->u) return;
    for (long l = 0; l < layers; l++) {
        free(sy->order[l]);
        free(sy->gate_shift[l]);
    }
    free(sy->order);
    free(sy->gate_shift);
    free(sy->u);
}

/* Add one generated tensor. */
static void gen_t(cv_tensors *ts, const synth *sy, cv_gen_fn fn, uint32_t wtype, int64_t ne0, int64_t ne1, long layer,
                  const char *name)
{
    cv_tensor *t = cv_add(ts, ne1 > 1 ? wtype : GGML_TYPE_F32, ne1 > 1 ? 2 : 1, ne0, ne1, "%s", name);
    t->gen = fn;
    t->gen_ctx = sy;
    t->gen_id = layer;
}

/* The tensors of a synthetic model of hp->arch (docs/formats.md, "Model families"). */
static void synth_tensors(cv_tensors *ts, const synth *sy, const cv_synth_opts *o, const cv_hparams *hp)
{
    const uint32_t wtype = o->type;
    const char *arch = hp->arch;
    int opt = !strcmp(arch, "opt"), falcon = !strcmp(arch, "falcon"), seq = opt || falcon;
    int ln = hp->layer_norm, qkv_bias = opt || !strcmp(arch, "qwen2");
    const int64_t E = hp->n_embd, F = hp->n_ff, V = hp->n_vocab, KV = E / hp->n_head * hp->n_head_kv;
    char nm[GGUF_MAX_NAME + 1];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%ld." s, l), nm)
    gen_t(ts, sy, gen_embd, wtype, E, V, 0, "token_embd.weight");
    if (opt) gen_t(ts, sy, gen_read, wtype, E, hp->n_ctx, 0, "position_embd.weight");
    gen_t(ts, sy, gen_ones, wtype, E, 1, 0, "output_norm.weight");
    if (ln) gen_t(ts, sy, gen_zeros, wtype, E, 1, 0, "output_norm.bias");
    gen_t(ts, sy, gen_read, wtype, E, V, 0, "output.weight");
    for (long l = 0; l < (long)hp->n_layer; l++) {
        if (falcon) {
            gen_t(ts, sy, gen_read, wtype, E, E + 2 * KV, l, NAME("attn_qkv.weight"));
        } else {
            gen_t(ts, sy, gen_read, wtype, E, E, l, NAME("attn_q.weight"));
            gen_t(ts, sy, gen_read, wtype, E, KV, l, NAME("attn_k.weight"));
            gen_t(ts, sy, gen_read, wtype, E, KV, l, NAME("attn_v.weight"));
        }
        if (qkv_bias) {
            gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("attn_q.bias"));
            gen_t(ts, sy, gen_zeros, wtype, KV, 1, l, NAME("attn_k.bias"));
            gen_t(ts, sy, gen_zeros, wtype, KV, 1, l, NAME("attn_v.bias"));
        }
        gen_t(ts, sy, gen_write, wtype, E, E, l, NAME("attn_output.weight"));
        if (opt) gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("attn_output.bias"));
        gen_t(ts, sy, gen_ones, wtype, E, 1, l, NAME("attn_norm.weight"));
        if (ln) gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("attn_norm.bias"));
        if (falcon) {
            gen_t(ts, sy, gen_ones, wtype, E, 1, l, NAME("attn_norm_2.weight"));
            gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("attn_norm_2.bias"));
        }
        if (!seq) gen_t(ts, sy, gen_gate, wtype, E, F, l, NAME("ffn_gate.weight"));
        gen_t(ts, sy, gen_write, wtype, F, E, l, NAME("ffn_down.weight"));
        if (opt) gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("ffn_down.bias"));
        gen_t(ts, sy, seq ? gen_gate : gen_read, wtype, E, F, l, NAME("ffn_up.weight"));
        if (opt) gen_t(ts, sy, gen_zeros, wtype, F, 1, l, NAME("ffn_up.bias"));
        if (!falcon) gen_t(ts, sy, gen_ones, wtype, E, 1, l, NAME("ffn_norm.weight"));
        if (opt) gen_t(ts, sy, gen_zeros, wtype, E, 1, l, NAME("ffn_norm.bias"));
    }
#undef NAME
}

/* The KVs after cv_set_llama_kvs: rope base, file type, activation, seed and
 * the planted set's parameters and per-layer orders. */
static void synth_kvs(gguf_writer *w, const synth *sy, const cv_synth_opts *o)
{
    if (strcmp(o->arch, "opt")) {   /* learned positions: no RoPE */
        char key[64];
        snprintf(key, sizeof key, "%s.rope.freq_base", o->arch);
        gguf_set_f32(w, key, 10000.0f);
    }
    gguf_set_u32(w, "general.file_type", o->type == GGML_TYPE_F32 ? 0 : 1);
    gguf_set_str(w, "hotcold.ffn_activation", o->relu ? "relu" : "silu");
    gguf_set_u64(w, "hotcold.synth.seed", o->seed);
    if (sy->gate_rank) gguf_set_u32(w, "hotcold.synth.gate_rank", (uint32_t)sy->gate_rank);
    if (o->active_fraction > 0) gguf_set_f32(w, "hotcold.synth.active_fraction", (float)o->active_fraction);
    if (!sy->u || o->active_fraction > 0) return;
    gguf_set_f32(w, "hotcold.synth.hot_fraction", (float)o->hot_fraction);
    gguf_set_f32(w, "hotcold.synth.hot_skew", (float)o->hot_skew);
    gguf_set_u32(w, "hotcold.synth.hot_count", sy->n_hot);
    gguf_set_f32(w, "hotcold.synth.p_max", (float)P_MAX);
    for (long l = 0; l < o->layers; l++) {
        char key[64];
        snprintf(key, sizeof key, "hotcold.synth.order.%ld", l);
        gguf_set_arr(w, key, GGUF_TYPE_INT32, sy->order[l], (uint64_t)o->n_ff);
    }
}

int cv_convert_synth(const cv_synth_opts *o, char *err, size_t errlen)
{
    cv_hparams hp = {
        .n_vocab = (uint32_t)o->vocab, .n_embd = (uint32_t)o->dim, .n_ff = (uint32_t)o->n_ff,
        .n_layer = (uint32_t)o->layers, .n_head = (uint32_t)o->heads,
        .n_head_kv = (uint32_t)(o->kv_heads ? o->kv_heads : o->heads),
        .n_ctx = (uint32_t)o->ctx, .eps = 1e-5f, .name = "synth",
        .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = UINT32_MAX,
        .arch = o->arch, .layer_norm = !strcmp(o->arch, "opt") || !strcmp(o->arch, "falcon"),
        .no_rope = !strcmp(o->arch, "opt"),
    };
    if (cv_check_hparams(&hp, err, errlen)) return -1;

    synth sy = {.seed = o->seed, .dim = o->dim, .n_ff = o->n_ff, .gate_rank = o->gate_rank};
    if (o->hot_fraction > 0 || o->active_fraction > 0) plant_hot_set(&sy, o);
    if (sy.gate_rank) make_gate_basis(&sy, o);
    cv_vocab v;
    synth_vocab(&v, (uint32_t)o->vocab);
    cv_tensors ts = {0};
    synth_tensors(&ts, &sy, o, &hp);
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    cv_set_llama_kvs(w, &hp, &v);
    synth_kvs(w, &sy, o);
    int rc = cv_write(w, &ts, o->out, err, errlen);
    gguf_writer_free(w);
    cv_tensors_free(&ts);
    cv_vocab_free(&v);
    free_hot_set(&sy, o->layers);
    return rc;
}
