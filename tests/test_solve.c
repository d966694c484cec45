/* hc-solve end to end on tiny llama GGUFs written here: the ILP against a
 * brute-force optimum computed independently, ILP >= greedy, the .gpuidx bytes
 * as PowerInfer reads them, errors, determinism, report, SVG and sweep. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "harness.h"
#include "stats.h"

#define NL 3          /* layers */
#define NFF 80        /* neurons per layer */
#define NE 32         /* n_embd */
#define NKV 16        /* rows of attn_k / attn_v (GQA: 2 KV heads of 8) */
#define NV 64         /* vocab */
#define BATCH 16
#define CTX 8
#define NCTX 96       /* the models' llama.context_length */

static char err[512];

/* Neuron bytes the test expects: gate F16 + up F16 + down row of that layer's
 * type (layer 0 ffn_down_t F32, layer 1 ffn_down_t Q8_0, layer 2 an
 * untransposed ffn_down F16). */
static const uint64_t neuron_bytes[NL] = { 64 + 64 + 128, 64 + 64 + 34, 64 + 64 + 64 };

/* Dense part: q, o [NE,NE] F32, k, v [NE,NKV] F32, attn_norm, ffn_norm per
 * layer; output_norm + output head; f32 KV cache (hc-run's) for CTX positions. */
static uint64_t fixed_bytes(void)
{
    uint64_t layer = 2 * NE * NE * 4 + 2 * NE * NKV * 4 + NE * 4 + NE * 4 + (uint64_t)CTX * 2 * NKV * 4;
    return NL * layer + NE * 4 + (uint64_t)NE * NV * 4;
}

static uint64_t ffn_total(void)
{
    uint64_t t = 0;
    for (int l = 0; l < NL; l++)
        t += NFF * neuron_bytes[l];
    return t;
}

static void add(gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1, const void *data)
{
    int64_t ne[2] = { ne0, ne1 };
    gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, data);
}

/* The keys hc-run needs besides the shapes: hyperparameters and a vocabulary
 * of NV tokens (hc-solve accepts exactly the models hc-run accepts). */
static void set_runnable_kvs(gguf_writer *w)
{
    static char names[NV][8];
    const char *tokens[NV];
    float scores[NV];
    int32_t types[NV];
    for (int i = 0; i < NV; i++) {
        snprintf(names[i], sizeof names[i], i < 3 ? (i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>") : "t%d", i);
        tokens[i] = names[i];
        scores[i] = (float)-i;
        types[i] = i < 3 ? (i ? 3 : 2) : 1;
    }
    gguf_set_u32(w, "llama.context_length", NCTX);
    gguf_set_u32(w, "llama.attention.head_count", 4);
    gguf_set_u32(w, "llama.attention.head_count_kv", 2);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, NV);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, NV);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, NV);
}

static int write_model(const char *path, uint8_t poke)
{
    static uint8_t data[NFF * NE * 4 + NV * NE * 4];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    data[5] = poke;
    /* Q8_0 blocks need a finite fp16 scale: 0x3c00 = 1.0 at the start of every block. */
    static uint8_t q8[NFF * NE / 32 * 34];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = i % 34 == 1 ? 0x3c : i % 34 == 0 ? 0 : (uint8_t)i;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", NL);
    gguf_set_u32(w, "llama.feed_forward_length", NFF);
    gguf_set_u32(w, "llama.embedding_length", NE);
    set_runnable_kvs(w);
    add(w, "token_embd.weight", GGML_TYPE_F32, NE, NV, data);
    for (int l = 0; l < NL; l++) {
        char n[64];
#define T(s, type, a, b, d) (snprintf(n, sizeof n, "blk.%d." s, l), add(w, n, type, a, b, d))
        T("attn_norm.weight", GGML_TYPE_F32, NE, 1, data);
        T("attn_q.weight", GGML_TYPE_F32, NE, NE, data);
        T("attn_k.weight", GGML_TYPE_F32, NE, NKV, data);
        T("attn_v.weight", GGML_TYPE_F32, NE, NKV, data);
        T("attn_output.weight", GGML_TYPE_F32, NE, NE, data);
        T("ffn_norm.weight", GGML_TYPE_F32, NE, 1, data);
        T("ffn_gate.weight", GGML_TYPE_F16, NE, NFF, data);
        T("ffn_up.weight", GGML_TYPE_F16, NE, NFF, data);
        if (l == 0)
            T("ffn_down_t.weight", GGML_TYPE_F32, NE, NFF, data);
        else if (l == 1)
            T("ffn_down_t.weight", GGML_TYPE_Q8_0, NE, NFF, q8);
        else
            T("ffn_down.weight", GGML_TYPE_F16, NFF, NE, data);
#undef T
    }
    add(w, "output_norm.weight", GGML_TYPE_F32, NE, 1, data);
    add(w, "output.weight", GGML_TYPE_F32, NE, NV, data);
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    return rc;
}

static uint64_t lcg = 12345;
static uint32_t rnd(void)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(lcg >> 33);
}

/* Stats for the model at model_path with counts from a skewed random draw. */
static hc_stats *write_stats(const char *path, const char *model_path, uint64_t seed)
{
    hc_stats *s = hc_stats_new(NL, NFF);
    strcpy(s->arch, "llama");
    strcpy(s->activation, "relu");
    strcpy(s->corpus, "test");
    s->n_embd = NE;
    s->n_tokens = 1000;
    gguf_file *m = gguf_open(model_path, err, sizeof err);
    if (!m) {
        hc_stats_free(s);
        return NULL;
    }
    s->ffn_hash = hc_ffn_hash(m);
    gguf_close(m);
    lcg = seed;
    for (int i = 0; i < NL * NFF; i++) {
        uint32_t a = rnd() % 1001, b = rnd() % 1001;
        s->count[i] = (int64_t)(a * b / 1000);   /* skewed towards cold */
        s->sum[i] = (double)s->count[i];
    }
    if (hc_stats_write(s, path, err, sizeof err)) {
        hc_stats_free(s);
        return NULL;
    }
    return s;
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* PowerInfer's ILP by enumeration: any subset of each layer's batches (batches
 * of BATCH neurons by descending count), a layer holds 0 or >= min neurons,
 * bytes within the capacity. */
static int64_t brute_force(const hc_stats *s, uint64_t capacity, uint32_t min)
{
    enum { NB = (NFF + BATCH - 1) / BATCH };
    int64_t val[NL][NB];
    uint32_t cnt[NL][NB];
    for (int l = 0; l < NL; l++) {
        int64_t sorted[NFF];
        memcpy(sorted, s->count + l * NFF, sizeof sorted);
        qsort(sorted, NFF, sizeof *sorted, cmp_desc);
        for (int b = 0; b < NB; b++) {
            val[l][b] = 0;
            cnt[l][b] = 0;
            for (int i = b * BATCH; i < (b + 1) * BATCH && i < NFF; i++, cnt[l][b]++)
                val[l][b] += sorted[i];
        }
    }
    int64_t best = -1;
    for (uint64_t mask = 0; mask < (1ull << (NB * NL)); mask++) {
        uint64_t bytes = 0;
        int64_t v = 0;
        int ok = 1;
        for (int l = 0; l < NL && ok; l++) {
            uint32_t n = 0;
            for (int b = 0; b < NB; b++)
                if (mask >> (l * NB + b) & 1) {
                    n += cnt[l][b];
                    v += val[l][b];
                }
            ok = n == 0 || n >= min;
            bytes += n * neuron_bytes[l];
        }
        if (ok && bytes <= capacity && v > best)
            best = v;
    }
    return best;
}

typedef struct {
    int64_t objective;
    uint64_t bytes;
} placement;

/* Read a .gpuidx through the reader and check its structure; the objective
 * and bytes are recomputed from gpu_idx and the stats, not taken from KVs. */
static int read_placement(const char *path, const hc_stats *s, placement *pl)
{
    gguf_file *f = gguf_open(path, err, sizeof err);
    if (!f)
        return fprintf(stderr, "%s\n", err), 0;
    int ok = f->variant == GGUF_VARIANT_PWRI && f->n_tensors == 2 * NL;
    char *arch = NULL;
    uint32_t nl = 0;
    uint64_t cap = 0;
    ok = ok && gguf_get_str(f, "general.architecture", &arch) == 0 && !strcmp(arch, "generic.gpu_index");
    ok = ok && gguf_get_u32(f, "generic.gpu_index.block_count", &nl) == 0 && nl == NL;
    ok = ok && gguf_get_u64(f, "split.vram_capacity", &cap) == 0;
    free(arch);
    pl->objective = 0;
    pl->bytes = 0;
    for (int l = 0; l < NL && ok; l++) {
        const gguf_tensor *idx = &f->tensors[2 * l], *bucket = &f->tensors[2 * l + 1];
        char want[64];
        snprintf(want, sizeof want, "blk.%d.gpu_idx", l);
        ok = !strcmp(idx->name, want) && idx->type == GGML_TYPE_I32 && idx->n_dims == 1 && idx->ne[0] == NFF;
        snprintf(want, sizeof want, "blk.%d.gpu_bucket", l);
        ok = ok && !strcmp(bucket->name, want) && bucket->type == GGML_TYPE_I32 && bucket->n_dims == 1;
        if (!ok)
            break;
        const int32_t *gi = idx->data, *gb = bucket->data;
        int64_t k = 0;
        for (int j = 0; j < NFF && ok; j++) {
            ok = gi[j] == 0 || gi[j] == 1;
            if (gi[j] == 1) {
                ok = ok && k < bucket->ne[0] && gb[k] == j;   /* bucket = the ones, ascending */
                k++;
                pl->objective += s->count[l * NFF + j];
            }
        }
        ok = ok && k == bucket->ne[0];
        pl->bytes += (uint64_t)k * neuron_bytes[l];
    }
    ok = ok && cap == pl->bytes;
    gguf_close(f);
    return ok;
}

static const char *model_path, *stats_path;
static hc_stats *stats;

static int setup(void)
{
    if (stats)
        return 1;
    model_path = strdup(th_tmp("m.gguf"));
    stats_path = strdup(th_tmp("m.stats"));
    if (write_model(model_path, 0))
        return 0;
    stats = write_stats(stats_path, model_path, 7);
    return stats != NULL;
}

static int solve(const char *out, uint64_t budget, const char *extra)
{
    return th_sh("%s -m %s -s %s --vram-budget %" PRIu64 " --batch %d --ctx %d -o %s %s", th_bin("hc-solve"),
                 model_path, stats_path, budget, BATCH, CTX, out, extra);
}

static void test_ilp_equals_brute_force(void)
{
    CHECKF(setup(), "%s", err);
    static const double share[] = { 0.12, 0.3, 0.47, 0.71, 0.9 };
    static const uint32_t mins[] = { 0, 20, 40 };
    int greedy_lost = 0;
    for (size_t i = 0; i < sizeof share / sizeof share[0]; i++)
        for (size_t m = 0; m < sizeof mins / sizeof mins[0]; m++) {
            uint64_t cap = (uint64_t)(share[i] * (double)ffn_total()) + 37 * i;
            char extra[64];
            snprintf(extra, sizeof extra, "--gap 0 --min-layer-neurons %u", mins[m]);
            const char *ilp = th_tmp("ilp.gpuidx"), *gr = th_tmp("greedy.gpuidx");
            CHECKF(solve(ilp, fixed_bytes() + cap, extra) == 0, "%s", th_last_err());
            char gextra[96];
            snprintf(gextra, sizeof gextra, "%s --greedy", extra);
            CHECKF(solve(gr, fixed_bytes() + cap, gextra) == 0, "%s", th_last_err());
            placement a, b;
            CHECK(read_placement(ilp, stats, &a));
            CHECK(read_placement(gr, stats, &b));
            int64_t best = brute_force(stats, cap, mins[m]);
            CHECKF(a.objective == best, "share %.2f min %u: ilp %" PRId64 " != brute force %" PRId64, share[i],
                   mins[m], a.objective, best);
            CHECK(a.bytes <= cap && b.bytes <= cap);
            CHECKF(a.objective >= b.objective, "ilp %" PRId64 " < greedy %" PRId64, a.objective, b.objective);
            greedy_lost += b.objective < best;
        }
    /* The instances include ones where greedy is not optimal, so the comparison means something. */
    CHECK(greedy_lost > 0);
}

/* The bytes PowerInfer reads: "PWRI", version 3, I32 as code 18, tensors in order. */
static void test_gpuidx_raw_bytes(void)
{
    CHECKF(setup(), "%s", err);
    const char *out = th_tmp("raw.gpuidx");
    CHECKF(solve(out, fixed_bytes() + ffn_total() / 2, "") == 0, "%s", th_last_err());
    size_t len;
    unsigned char *b = th_read(out, &len);
    CHECK(b && len > 24);
    CHECK(!memcmp(b, "PWRI", 4));
    uint32_t version;
    uint64_t n_tensors;
    memcpy(&version, b + 4, 4);
    memcpy(&n_tensors, b + 8, 8);
    CHECK(version == 3 && n_tensors == 2 * NL);
    size_t last = 0;
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 2; k++) {
            char name[64];
            int n = snprintf(name, sizeof name, "blk.%d.%s", l, k ? "gpu_bucket" : "gpu_idx");
            unsigned char key[72];
            uint64_t n64 = (uint64_t)n;
            memcpy(key, &n64, 8);
            memcpy(key + 8, name, (size_t)n);
            unsigned char *at = memmem(b, len, key, 8 + (size_t)n);
            CHECKF(at, "%s not found", name);
            CHECKF((size_t)(at - b) > last, "%s out of order", name);
            last = (size_t)(at - b);
            uint32_t n_dims, type;
            memcpy(&n_dims, at + 8 + n, 4);
            memcpy(&type, at + 8 + n + 4 + 8, 4);
            CHECKF(n_dims == 1 && type == 18, "%s: n_dims %u type %u", name, n_dims, type);
        }
    free(b);
}

static void test_budget_too_small(void)
{
    CHECKF(setup(), "%s", err);
    const char *out = th_tmp("small.gpuidx");
    unlink(out);
    CHECK(solve(out, fixed_bytes() - 1, "") == 1);
    const char *e = th_last_err();
    /* One line: "hc-solve: MODEL: ... too small ..." */
    CHECKF(!strncmp(e, "hc-solve: ", 10) && strstr(e, model_path) && strstr(e, "too small") &&
           strchr(e, '\n') == e + strlen(e) - 1, "%s", e);
    CHECK(access(out, F_OK) != 0);
    /* Exactly the dense part is enough: nothing placed, still a valid index. */
    CHECKF(solve(out, fixed_bytes(), "") == 0, "%s", th_last_err());
    placement p;
    CHECK(read_placement(out, stats, &p) && p.objective == 0 && p.bytes == 0);
}

static void test_stats_for_another_model(void)
{
    CHECKF(setup(), "%s", err);
    const char *other = th_tmp("other.gguf"), *out = th_tmp("other.gpuidx");
    CHECK(write_model(other, 99) == 0);  /* same shapes, one weight byte differs */
    unlink(out);
    CHECK(th_sh("%s -m %s -s %s --vram-budget 1M -o %s", th_bin("hc-solve"), other, stats_path, out) == 1);
    CHECKF(strstr(th_last_err(), "FFN weights hash"), "%s", th_last_err());
    CHECK(access(out, F_OK) != 0);
}

static void test_deterministic(void)
{
    CHECKF(setup(), "%s", err);
    const char *a = th_tmp("a.gpuidx"), *b = th_tmp("b.gpuidx");
    uint64_t budget = fixed_bytes() + ffn_total() * 2 / 5;
    CHECK(solve(a, budget, "--min-layer-neurons 20") == 0);
    CHECK(solve(b, budget, "--min-layer-neurons 20") == 0);
    size_t la, lb;
    unsigned char *x = th_read(a, &la), *y = th_read(b, &lb);
    CHECK(x && y && la == lb && !memcmp(x, y, la));
    free(x);
    free(y);
}

static double num(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return o && cJSON_IsNumber(o) ? o->valuedouble : -1;
}

static void test_report_and_svg(void)
{
    CHECKF(setup(), "%s", err);
    const char *out = th_tmp("r.gpuidx"), *rep = th_tmp("r.json"), *svg = th_tmp("r.svg");
    uint64_t budget = fixed_bytes() + ffn_total() / 3;
    char extra[256];
    snprintf(extra, sizeof extra, "--report %s --svg %s", rep, svg);
    CHECKF(solve(out, budget, extra) == 0, "%s", th_last_err());
    placement p;
    CHECK(read_placement(out, stats, &p));
    size_t len;
    char *text = (char *)th_read(rep, &len);
    CHECK(text);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    CHECK(j);
    CHECK(num(j, "totals.gpu_activations") == (double)p.objective);
    CHECK(num(j, "totals.gpu_bytes") == (double)p.bytes);
    CHECK(num(j, "budget.dense_total") == (double)fixed_bytes());
    CHECK(num(j, "budget.ffn_capacity") == (double)(budget - fixed_bytes()));
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    CHECK(cJSON_GetArraySize(layers) == NL);
    double covered = 0;
    for (int l = 0; l < NL; l++) {
        const cJSON *e = cJSON_GetArrayItem(layers, l);
        CHECK(num(e, "neuron_bytes") == (double)neuron_bytes[l]);
        covered += num(e, "gpu_activations");
    }
    CHECK(covered == (double)p.objective);
    cJSON_Delete(j);
    char *s = (char *)th_read(svg, &len);
    CHECK(s && len > 100 && !strncmp(s, "<svg", 4) && strstr(s, "layer 2:") && strstr(s, "</svg>"));
    /* it names its inputs (model file, statistics' corpus) and the unit of its axis */
    const char *base = strrchr(model_path, '/');
    CHECKF(s && strstr(s, base + 1) && strstr(s, "statistics: ") && strstr(s, "share of the layer (%)"), "%s", s);
    free(s);
}

static void test_sweep_json(void)
{
    CHECKF(setup(), "%s", err);
    uint64_t f = fixed_bytes(), t = ffn_total();
    CHECKF(th_sh("%s -m %s -s %s --batch %d --ctx %d --min-layer-neurons 0 --json --sweep %" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64,
                 th_bin("hc-solve"), model_path, stats_path, BATCH, CTX, f / 2, f + t / 5, f + t / 2, f + t) == 0,
           "%s", th_last_err());
    cJSON *j = cJSON_Parse(th_last_out());
    CHECK(j && cJSON_GetArraySize(j) == 4);
    CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(j, 0), "error"));
    double prev = -1;
    for (int i = 1; i < 4; i++) {
        double c = num(cJSON_GetArrayItem(j, i), "totals.coverage");
        CHECK(c >= prev);
        prev = c;
    }
    CHECK(prev == 1.0);   /* the whole FFN fits */
    cJSON_Delete(j);
    /* the list is checked before any work: nothing on stdout, one line */
    static const char *const bad[] = { "''", "1M,", ",1M", "1M,,2M", "1M,x" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = th_sh("%s -m %s -s %s --greedy --sweep %s", th_bin("hc-solve"), model_path, stats_path, bad[i]);
        CHECKF(rc == 1 && !*th_last_out() && strstr(th_last_err(), "bad value for --sweep"), "--sweep %s: rc %d, %s",
               bad[i], rc, th_last_err());
    }
}

static void test_time_limit_is_loud(void)
{
    CHECKF(setup(), "%s", err);
    const char *out = th_tmp("tl.gpuidx");
    CHECKF(solve(out, fixed_bytes() + ffn_total() / 2, "--time-limit 0 --min-layer-neurons 0") == 0, "%s", th_last_err());
    CHECKF(strstr(th_last_err(), "WARNING: the time limit"), "%s", th_last_err());
    gguf_file *f = gguf_open(out, err, sizeof err);
    CHECK(f);
    int hit = 0;
    CHECK(gguf_get_bool(f, "hotcold.solve.time_limit_hit", &hit) == 0 && hit == 1);
    gguf_close(f);
}

static void test_defaults(void)
{
    CHECKF(setup(), "%s", err);
    char def[600];
    snprintf(def, sizeof def, "%s.generated.gpuidx", model_path);
    unlink(def);
    CHECKF(th_sh("%s -m %s -s %s --vram-budget 1M", th_bin("hc-solve"), model_path, stats_path) == 0, "%s",
           th_last_err());
    CHECK(access(def, F_OK) == 0);
    /* n_ff = 80: batches of 4 so that each layer has at least 16, and it says so. */
    CHECKF(strstr(th_last_err(), "batches of 4 neurons"), "%s", th_last_err());
    CHECK(th_sh("%s --help", th_bin("hc-solve")) == 0 && strstr(th_last_out(), "--vram-budget"));
    CHECK(th_sh("%s -m %s", th_bin("hc-solve"), model_path) == 1);
    /* the KV cache is charged for the model's context length unless --ctx says otherwise */
    CHECK(th_sh("%s -m %s -s %s --vram-budget 1M -o %s", th_bin("hc-solve"), model_path, stats_path,
                th_tmp("d.gpuidx")) == 0);
    gguf_file *f = gguf_open(th_tmp("d.gpuidx"), err, sizeof err);
    uint32_t ctx = 0, kv = 0;
    CHECK(f && gguf_get_u32(f, "hotcold.solve.ctx", &ctx) == 0 && ctx == NCTX);
    CHECK(f && gguf_get_u32(f, "hotcold.solve.kv_bytes", &kv) == 0 && kv == 8);   /* f32 k and v */
    gguf_close(f);
    /* ... at the types hc-run will hold: -ctk/-ctv f16, 2 bytes each */
    CHECK(th_sh("%s -m %s -s %s --vram-budget 1M -ctk f16 -ctv f16 -o %s", th_bin("hc-solve"), model_path,
                stats_path, th_tmp("h.gpuidx")) == 0);
    f = gguf_open(th_tmp("h.gpuidx"), err, sizeof err);
    CHECK(f && gguf_get_u32(f, "hotcold.solve.kv_bytes", &kv) == 0 && kv == 4);
    gguf_close(f);
    /* -b is llama.cpp's batch size: the budget is --vram-budget, and the message says so */
    CHECK(th_sh("%s -m %s -s %s -b 1M", th_bin("hc-solve"), model_path, stats_path) == 1);
    CHECKF(strstr(th_last_err(), "the GPU memory budget is --vram-budget SIZE"), "%s", th_last_err());
}

/* ------------------------------------------------------------ INT4-GPTQ */

#define GS 16         /* GPTQ group size of the model below */

static uint64_t gptq_dense;   /* what write_gptq_model put in the dense part */

/* Bytes of the GPTQ companions of a [K inputs, N outputs] weight
 * (docs/formats.md, "INT4-GPTQ tensors"): qweight I32 [N, ceil(K/8)], scales F16 [N, G],
 * qzeros I32 [ceil(N/8), G], g_idx I32 [K]. */
static uint64_t gptq_bytes(int64_t K, int64_t N, int g_idx)
{
    int64_t G = (K + GS - 1) / GS;
    return (uint64_t)(4 * N * ((K + 7) / 8) + 2 * N * G + 4 * ((N + 7) / 8) * G + (g_idx ? 4 * K : 0));
}

static void add_gptq(gguf_writer *w, int l, const char *what, int64_t K, int64_t N, int g_idx, const void *data)
{
    char n[96];
    int64_t G = (K + GS - 1) / GS;
#define C(sfx, type, a, b, d) (snprintf(n, sizeof n, "blk.%d.%s.weight." sfx, l, what), add(w, n, type, a, b, d))
    C("qweight", GGML_TYPE_I32, N, (K + 7) / 8, data);
    C("scales", GGML_TYPE_F16, N, G, data);
    C("qzeros", GGML_TYPE_I32, (N + 7) / 8, G, data);
    static int32_t groups[NFF];   /* input k in group k / GS: the order hc-run accepts */
    for (int k = 0; k < NFF; k++) groups[k] = k / GS;
    if (g_idx)
        C("g_idx", GGML_TYPE_I32, K, 1, groups);
#undef C
}

/* The model of write_model as hc-quantize GPTQ would store it: every block
 * linear as companions (g_idx in layer 1 only), except layer 2's gate and up,
 * which stay F16 (a mixed layer). */
static int write_gptq_model(const char *path)
{
    static uint8_t data[NFF * NE * 4 + NV * NE * 4];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 5 + 3);
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", NL);
    gguf_set_u32(w, "llama.feed_forward_length", NFF);
    gguf_set_u32(w, "llama.embedding_length", NE);
    gguf_set_u32(w, "hotcold.gptq.bits", 4);
    gguf_set_u32(w, "hotcold.gptq.group_size", GS);
    gguf_set_str(w, "hotcold.gptq.zero_format", "v2");
    set_runnable_kvs(w);
    add(w, "token_embd.weight", GGML_TYPE_F32, NE, NV, data);
    gptq_dense = 0;
    for (int l = 0; l < NL; l++) {
        char n[64];
        int gi = l == 1;
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l);
        add(w, n, GGML_TYPE_F32, NE, 1, data);
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l);
        add(w, n, GGML_TYPE_F32, NE, 1, data);
        add_gptq(w, l, "attn_q", NE, NE, gi, data);
        add_gptq(w, l, "attn_k", NE, NKV, gi, data);
        add_gptq(w, l, "attn_v", NE, NKV, gi, data);
        add_gptq(w, l, "attn_output", NE, NE, gi, data);
        gptq_dense += 2 * NE * 4 + 2 * gptq_bytes(NE, NE, gi) + 2 * gptq_bytes(NE, NKV, gi) +
                      (uint64_t)CTX * 2 * NKV * 4;
        if (l < 2) {
            add_gptq(w, l, "ffn_gate", NE, NFF, gi, data);
            add_gptq(w, l, "ffn_up", NE, NFF, gi, data);
        } else {
            snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", l);
            add(w, n, GGML_TYPE_F16, NE, NFF, data);
            snprintf(n, sizeof n, "blk.%d.ffn_up.weight", l);
            add(w, n, GGML_TYPE_F16, NE, NFF, data);
        }
        add_gptq(w, l, "ffn_down", NFF, NE, gi, data);
    }
    add(w, "output_norm.weight", GGML_TYPE_F32, NE, 1, data);
    add(w, "output.weight", GGML_TYPE_F32, NE, NV, data);
    gptq_dense += NE * 4 + (uint64_t)NE * NV * 4;
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    return rc;
}

/* A GPTQ model is priced as hc-run stores it (docs/design/gptq.md, "Sparse
 * and hybrid rows"): a GPTQ gate/up row is its codes (n_embd rounded up to
 * 32, two per byte) and an f32 pair per group, a GPTQ down column its codes
 * and a 4-byte group index, and each layer's down columns share a table of
 * n_embd pairs per group of ffn_down (gptq_down_pairs, charged before the
 * FFN); the attention companions and the KV cache (head_count_kv x head
 * dimension = NKV per position) are dense. */
static void test_gptq_model(void)
{
    const char *m = th_tmp("gptq.gguf"), *st = th_tmp("gptq.stats"), *out = th_tmp("gptq.gpuidx");
    const char *rep = th_tmp("gptq.json");
    CHECKF(write_gptq_model(m) == 0, "%s", err);
    hc_stats *s = write_stats(st, m, 11);
    CHECKF(s, "%s", err);
    uint64_t nb[NL], ffn = 0, codes = (NE + 31) / 32 * 16, pairs = (uint64_t)NL * 8 * NE * ((NFF + GS - 1) / GS);
    for (int l = 0; l < NL; l++) {
        nb[l] = codes + 4 + (l < 2 ? 2 * (codes + 8 * ((NE + GS - 1) / GS)) : 2 * NE * 2);
        ffn += NFF * nb[l];
    }
    uint64_t dense = gptq_dense + pairs, budget = dense + ffn / 2;
    int rc = th_sh("%s -m %s -s %s --vram-budget %" PRIu64 " --batch %d --ctx %d --min-layer-neurons 0 -o %s "
                   "--report %s", th_bin("hc-solve"), m, st, budget, BATCH, CTX, out, rep);
    CHECKF(rc == 0, "%s", th_last_err());
    size_t len;
    char *text = (char *)th_read(rep, &len);
    cJSON *j = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    CHECK(j);
    CHECKF(num(j, "budget.dense_total") == (double)dense, "dense %g, expected %" PRIu64, num(j, "budget.dense_total"),
           dense);
    CHECK(num(j, "budget.kv_cache") == (double)NL * CTX * 2 * NKV * 4);
    CHECK(num(j, "budget.gptq_down_pairs") == (double)pairs);
    CHECK(num(j, "budget.ffn_capacity") == (double)(budget - dense));
    CHECK(num(j, "totals.gpu_bytes") <= (double)(budget - dense) && num(j, "totals.gpu_neurons") > 0);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    CHECK(cJSON_GetArraySize(layers) == NL);
    for (int l = 0; l < NL; l++)
        CHECKF(num(cJSON_GetArrayItem(layers, l), "neuron_bytes") == (double)nb[l], "layer %d: %g, expected %"
               PRIu64, l, num(cJSON_GetArrayItem(layers, l), "neuron_bytes"), nb[l]);
    char h[17];
    snprintf(h, sizeof h, "%016" PRIx64, s->ffn_hash);
    const cJSON *mh = cJSON_GetObjectItemCaseSensitive(j, "model_ffn_hash");
    CHECK(cJSON_IsString(mh) && !strcmp(mh->valuestring, h) && strcmp(h, "cbf29ce484222325"));
    cJSON_Delete(j);
    hc_stats_free(s);
    /* incomplete companions are an error naming the tensor */
    gguf_file *f = gguf_open(m, err, sizeof err);
    CHECK(f);
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (strcmp(t->name, "blk.1.ffn_up.weight.qzeros"))
            gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    const char *bad = th_tmp("gptq-bad.gguf");
    CHECK(gguf_writer_write(w, bad, err, sizeof err) == 0);
    gguf_writer_free(w);
    gguf_close(f);
    const char *st2 = th_tmp("gptq-bad.stats");
    hc_stats *s2 = write_stats(st2, bad, 11);   /* made on that model: the hash check passes */
    CHECKF(s2, "%s", err);
    hc_stats_free(s2);
    CHECK(th_sh("%s -m %s -s %s --vram-budget 1M --min-layer-neurons 0 -o %s", th_bin("hc-solve"), bad, st2,
                out) == 1);
    CHECKF(strstr(th_last_err(), "gptq-bad.gguf: missing tensor blk.1.ffn_up.weight.qzeros"), "%s", th_last_err());
    /* a GPTQ ffn_down_t (hc-run has no sparse rows for it) is refused by name */
    f = gguf_open(m, err, sizeof err);
    CHECK(f);
    w = gguf_writer_new(GGUF_VARIANT_GGUF);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (strncmp(t->name, "blk.0.ffn_down.weight.", 22))
            gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    static uint8_t zeros[NFF * NE];
    add_gptq(w, 0, "ffn_down_t", NE, NFF, 0, zeros);
    const char *dt = th_tmp("gptq-down-t.gguf");
    CHECK(gguf_writer_write(w, dt, err, sizeof err) == 0);
    gguf_writer_free(w);
    gguf_close(f);
    s2 = write_stats(st2, dt, 11);
    CHECKF(s2, "%s", err);
    hc_stats_free(s2);
    CHECK(th_sh("%s -m %s -s %s --vram-budget 1M --min-layer-neurons 0 -o %s", th_bin("hc-solve"), dt, st2,
                out) == 1);
    CHECKF(strstr(th_last_err(), "gptq-down-t.gguf: blk.0: an INT4-GPTQ ffn_down_t has no sparse rows"), "%s",
           th_last_err());
}

int main(void)
{
    RUN(test_ilp_equals_brute_force);
    RUN(test_gpuidx_raw_bytes);
    RUN(test_budget_too_small);
    RUN(test_stats_for_another_model);
    RUN(test_deterministic);
    RUN(test_report_and_svg);
    RUN(test_sweep_json);
    RUN(test_time_limit_is_loud);
    RUN(test_defaults);
    RUN(test_gptq_model);
    hc_stats_free(stats);
    return th_done();
}
