/* hc-quantize on whole files: tensor types per llama-quantize's rules, bytes
 * equal to the reference quantizers, KVs copied with the two llama.cpp keys
 * moved to the end, llama.cpp's tensor order, thread-count independence,
 * requantization refused, and bad inputs leaving no output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gguf.h"
#include "harness.h"
#include "quantize.h"
#include "quants.h"

static uint64_t rng = 12345;
static float frand(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

enum { TIED = 1, PWRI = 2, WITH_INF = 4 };

static void *model_data[32];   /* the writer keeps pointers until written */
static int n_model_data;

/* Add a tensor of random values stored as type (F32, F16 or BF16). */
static void add(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, int64_t ne0,
                int64_t ne1, int64_t ne2, int inf)
{
    const int64_t ne[3] = { ne0, ne1, ne2 }, n = ne0 * ne1 * ne2;
    void *data = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        float v = frand() * (1 + (float)(i % 7));
        if (inf && i == n / 2) v = INFINITY;
        if (type == GGML_TYPE_F32) ((float *)data)[i] = v;
        if (type == GGML_TYPE_F16) ((uint16_t *)data)[i] = fp32_to_fp16(v);
        if (type == GGML_TYPE_BF16) ((uint16_t *)data)[i] = fp32_to_bf16(v);
    }
    gguf_add_tensor(w, name, type, n_dims, ne, data);
    model_data[n_model_data++] = data;
}

/* The one layer hc-run needs (n_embd 64, n_ff 32, 2 heads): hc-quantize
 * accepts only models hc-run accepts. */
static const char *const layer0[] = { "attn_k", "attn_norm", "attn_output", "attn_q", "attn_v",
                                       "ffn_down", "ffn_gate", "ffn_norm", "ffn_up" };

/* A small LLaMA-like model: a runnable layer 0 and, beyond block_count,
 * tensors hc-run ignores but the quantizer's rules must handle (blk.2,
 * blk.10, 3-D, rope_freqs, ffn_gate_inp), deliberately out of llama.cpp's order. */
static const char *make_model(const char *name, int flags)
{
    const char *path = th_tmp(name);
    gguf_writer *w = gguf_writer_new(flags & PWRI ? GGUF_VARIANT_PWRI : GGUF_VARIANT_GGUF);
    static const char *const toks[16] = { "<unk>", "<s>", "</s>", "a", "b", "c", "d", "e",
                                          "f", "g", "h", "i", "j", "k", "l", "m" };
    int32_t types[16];
    float scores[16];
    for (int i = 0; i < 16; i++) {
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
        scores[i] = (float)-i;
    }
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "general.file_type", 0);
    gguf_set_str(w, "general.name", "tiny");
    gguf_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 16);
    gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 16);
    gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 16);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_u32(w, "llama.block_count", 1);
    gguf_set_u32(w, "llama.context_length", 64);
    gguf_set_u32(w, "llama.embedding_length", 64);
    gguf_set_u32(w, "llama.feed_forward_length", 32);
    gguf_set_u32(w, "llama.attention.head_count", 2);
    for (size_t i = 0; i < sizeof layer0 / sizeof *layer0; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.0.%s.weight", layer0[i]);
        int norm = strstr(layer0[i], "norm") != NULL, ff = strncmp(layer0[i], "ffn_", 4) == 0;
        int rows = norm ? 1 : ff ? (strcmp(layer0[i], "ffn_down") ? 32 : 64) : 64;
        add(w, nm, GGML_TYPE_F32, norm ? 1 : 2, strcmp(layer0[i], "ffn_down") ? 64 : 32, rows, 1, 0);
    }
    add(w, "blk.10.ffn_up.weight", GGML_TYPE_F32, 2, 64, 4, 1, flags & WITH_INF);
    add(w, "blk.2.attn_q.weight", GGML_TYPE_F16, 2, 64, 64, 1, 0);
    add(w, "token_embd.weight", GGML_TYPE_F32, 2, 64, 16, 1, 0);
    if (!(flags & TIED)) add(w, "output.weight", GGML_TYPE_F32, 2, 64, 16, 1, 0);
    add(w, "output_norm.weight", GGML_TYPE_F32, 1, 64, 1, 1, 0);
    add(w, "blk.2.attn_norm.weight", GGML_TYPE_F32, 1, 64, 1, 1, 0);
    add(w, "blk.2.ffn_down.weight", GGML_TYPE_F32, 2, 40, 8, 1, 0);
    add(w, "blk.2.ffn_gate_inp.weight", GGML_TYPE_F32, 2, 64, 4, 1, 0);
    /* PowerInfer's old type table has no BF16 */
    add(w, "blk.2.attn_k.weight", flags & PWRI ? GGML_TYPE_F16 : GGML_TYPE_BF16, 2, 64, 8, 1, 0);
    add(w, "blk.2.stack.weight", GGML_TYPE_F32, 3, 32, 2, 3, 0);
    add(w, "rope_freqs.weight", GGML_TYPE_F32, 1, 16, 1, 1, 0);   /* [head_dim / 2], positive: the loader checks */
    for (int i = 0; i < 16; i++) ((float *)model_data[n_model_data - 1])[i] = 1.0f + (float)i;
    if (flags & PWRI) {
        add(w, "blk.2.fc1.weight", GGML_TYPE_F16, 2, 64, 32, 1, 0);
        add(w, "blk.2.fc2.weight", GGML_TYPE_F16, 2, 32, 64, 1, 0);
    }
    char err[256];
    int rc = gguf_writer_write(w, path, err, sizeof err);
    gguf_writer_free(w);
    while (n_model_data)
        free(model_data[--n_model_data]);
    if (rc != 0) {
        printf("# %s\n", err);
        return NULL;
    }
    return path;
}

static int quantize(const char *in, const char *out, const char *args)
{
    return th_sh("%s -q %s %s %s", th_bin("hc-quantize"), in, out, args);
}

static uint32_t type_of(const gguf_file *f, const char *name)
{
    const gguf_tensor *t = gguf_get_tensor(f, name);
    return t ? t->type : UINT32_MAX;
}

/* The output bytes a tensor must have, from the scalar references. */
static void *expected(const gguf_tensor *src, uint32_t type, size_t *len)
{
    const int64_t n = src->ne[0] * src->ne[1] * src->ne[2] * src->ne[3];
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *h = src->data;
        x[i] = src->type == GGML_TYPE_F32 ? ((const float *)src->data)[i]
             : src->type == GGML_TYPE_F16 ? fp16_to_fp32(h[i]) : bf16_to_fp32(h[i]);
    }
    *len = ggml_row_size(type, src->ne[0]) * (size_t)(n / src->ne[0]);
    uint8_t *y = malloc(*len);
    if (type == GGML_TYPE_Q4_0) quantize_row_q4_0_ref(x, (block_q4_0 *)y, n);
    if (type == GGML_TYPE_Q8_0) quantize_row_q8_0_ref(x, (block_q8_0 *)y, n);
    if (type == GGML_TYPE_F32) memcpy(y, x, *len);
    for (int64_t i = 0; i < n && (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16); i++)
        ((uint16_t *)y)[i] = type == GGML_TYPE_F16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
    free(x);
    return y;
}

/* Every output tensor has the type the rules give and the reference bytes. */
static int tensors_match(const gguf_file *in, const gguf_file *out, const char *const *names,
                         const uint32_t *types, int n)
{
    for (int i = 0; i < n; i++) {
        const gguf_tensor *s = gguf_get_tensor(in, names[i]), *t = gguf_get_tensor(out, names[i]);
        if (!s || !t || t->type != types[i]) {
            printf("# %s: type %s, expected %s\n", names[i], t ? ggml_type_name(t->type) : "missing",
                   ggml_type_name(types[i]));
            return 0;
        }
        size_t len;
        void *want = expected(s, types[i], &len);
        int same = len == t->nbytes && memcmp(want, t->data, len) == 0;
        free(want);
        if (!same) {
            printf("# %s: bytes differ from the reference\n", names[i]);
            return 0;
        }
    }
    return 1;
}

static gguf_file *open_ok(const char *path)
{
    char err[256];
    gguf_file *f = gguf_open(path, err, sizeof err);
    if (!f) printf("# %s\n", err);
    return f;
}

static void test_types_and_bytes_q4_0(void)
{
    const char *in = make_model("m.gguf", 0), *out = th_tmp("m-q4.gguf");
    CHECKF(in && quantize(in, out, "-t 2 Q4_0") == 0, "%s", th_last_err());
    gguf_file *a = open_ok(in), *b = open_ok(out);
    CHECK(a && b);
    static const char *const names[] = {
        "output.weight", "token_embd.weight", "blk.2.attn_q.weight", "blk.2.attn_k.weight",
        "blk.2.ffn_down.weight", "blk.2.stack.weight", "blk.10.ffn_up.weight",
        "output_norm.weight", "blk.2.attn_norm.weight", "blk.2.ffn_gate_inp.weight", "rope_freqs.weight",
    };
    static const uint32_t types[] = {
        GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0,
        GGML_TYPE_F16,  /* rows of 40: no block fits */
        GGML_TYPE_Q4_0, GGML_TYPE_Q4_0,
        GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32,
    };
    int ok = tensors_match(a, b, names, types, 11);
    const int ntens = (int)b->n_tensors;
    gguf_close(a);
    gguf_close(b);
    CHECK(ok);
    CHECK(ntens == 20);
}

static void test_kvs_copied_and_set(void)
{
    const char *in = make_model("kv.gguf", 0), *out = th_tmp("kv-q8.gguf");
    CHECK(in && quantize(in, out, "q8_0") == 0);
    gguf_file *a = open_ok(in), *b = open_ok(out);
    CHECK(a && b);
    int ok = b->n_kv == a->n_kv + 1;   /* + quantization_version; file_type replaced */
    uint64_t j = 0;
    for (uint64_t i = 0; ok && i < a->n_kv; i++) {
        if (strcmp(a->kv[i].key, "general.file_type") == 0) continue;
        const gguf_kv *x = &a->kv[i], *y = &b->kv[j++];
        ok = strcmp(x->key, y->key) == 0 && x->type == y->type && x->arr_type == y->arr_type && x->n == y->n;
        if (ok && x->strs)
            for (uint64_t k = 0; k < x->n; k++)
                ok = ok && x->strs[k].len == y->strs[k].len && memcmp(x->strs[k].ptr, y->strs[k].ptr, x->strs[k].len) == 0;
        else if (ok)
            ok = memcmp(x->data, y->data, x->n * gguf_vtype_size(x->type == GGUF_TYPE_ARRAY ? x->arr_type : x->type)) == 0;
        if (!ok) printf("# KV %s differs\n", x->key);
    }
    uint32_t qv = 0, ft = 0;
    ok = ok && strcmp(b->kv[b->n_kv - 2].key, "general.quantization_version") == 0 &&
         strcmp(b->kv[b->n_kv - 1].key, "general.file_type") == 0 &&
         gguf_get_u32(b, "general.quantization_version", &qv) == 0 && qv == 2 &&
         gguf_get_u32(b, "general.file_type", &ft) == 0 && ft == 7;
    const int variant = b->variant;
    gguf_close(a);
    gguf_close(b);
    CHECK(ok);
    CHECK(variant == GGUF_VARIANT_GGUF);
}

static void test_tensor_order(void)
{
    const char *in = make_model("ord.gguf", 0), *out = th_tmp("ord-f16.gguf");
    CHECK(in && quantize(in, out, "F16") == 0);
    gguf_file *b = open_ok(out);
    CHECK(b);
    static const char *const want[] = {
        "output.weight", "output_norm.weight", "rope_freqs.weight", "token_embd.weight",
        "blk.0.attn_k.weight", "blk.0.attn_norm.weight", "blk.0.attn_output.weight", "blk.0.attn_q.weight",
        "blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_norm.weight",
        "blk.0.ffn_up.weight",
        "blk.2.attn_k.weight", "blk.2.attn_norm.weight", "blk.2.attn_q.weight", "blk.2.ffn_down.weight",
        "blk.2.ffn_gate_inp.weight", "blk.2.stack.weight", "blk.10.ffn_up.weight",
    };
    int ok = b->n_tensors == 20;
    for (int i = 0; ok && i < 20; i++)
        ok = strcmp(b->tensors[i].name, want[i]) == 0;
    uint32_t ft = 0;
    ok = ok && gguf_get_u32(b, "general.file_type", &ft) == 0 && ft == 1;
    ok = ok && type_of(b, "blk.2.attn_k.weight") == GGML_TYPE_F16 && type_of(b, "output.weight") == GGML_TYPE_F16;
    gguf_close(b);
    CHECK(ok);
    CHECK(hc_tensor_order("blk.9.x", "blk.10.a") < 0 && hc_tensor_order("z.weight", "blk.0.a") < 0);
}

static void test_pure_and_overrides(void)
{
    const char *in = make_model("p.gguf", 0), *pure = th_tmp("p-pure.gguf"), *ovr = th_tmp("p-ovr.gguf");
    CHECK(in && quantize(in, pure, "--pure Q4_0") == 0);
    CHECK(quantize(in, ovr, "--output-tensor-type f16 --token-embedding-type Q8_0 q4_0") == 0);
    gguf_file *a = open_ok(pure), *b = open_ok(ovr);
    CHECK(a && b);
    int ok = type_of(a, "output.weight") == GGML_TYPE_Q4_0 && type_of(a, "token_embd.weight") == GGML_TYPE_Q4_0 &&
             type_of(b, "output.weight") == GGML_TYPE_F16 && type_of(b, "token_embd.weight") == GGML_TYPE_Q8_0 &&
             type_of(b, "blk.2.attn_q.weight") == GGML_TYPE_Q4_0;
    gguf_close(a);
    gguf_close(b);
    CHECK(ok);
}

static void test_tied_embedding(void)
{
    const char *in = make_model("tied.gguf", TIED), *out = th_tmp("tied-q4.gguf");
    CHECK(in && quantize(in, out, "Q4_0") == 0);
    gguf_file *b = open_ok(out);
    CHECK(b);
    const uint32_t t = type_of(b, "token_embd.weight");
    gguf_close(b);
    CHECK(t == GGML_TYPE_Q8_0);
}

static void test_pwri_kept(void)
{
    const char *in = make_model("pw.gguf", PWRI), *out = th_tmp("pw-q4.gguf");
    CHECK(in && quantize(in, out, "Q4_0") == 0);
    gguf_file *b = open_ok(out);
    CHECK(b);
    const int ok = b->variant == GGUF_VARIANT_PWRI && type_of(b, "blk.2.fc1.weight") == GGML_TYPE_Q4_0 &&
                   type_of(b, "blk.2.fc2.weight") == GGML_TYPE_Q4_0;
    gguf_close(b);
    CHECK(ok);
}

static void test_thread_count_independent(void)
{
    const char *in = make_model("thr.gguf", 0);
    const char *o1 = th_tmp("thr1.gguf"), *o2 = th_tmp("thr2.gguf"), *o7 = th_tmp("thr7.gguf");
    for (int k = 0; k < 2; k++) {
        const char *type = k ? "Q8_0" : "Q4_0";
        char a1[32], a2[32], a7[32];
        snprintf(a1, sizeof a1, "-t 1 %s", type);
        snprintf(a2, sizeof a2, "-t 2 %s", type);
        snprintf(a7, sizeof a7, "--threads 7 %s", type);
        CHECK(in && quantize(in, o1, a1) == 0 && quantize(in, o2, a2) == 0 && quantize(in, o7, a7) == 0);
        size_t n1, n2, n7;
        unsigned char *b1 = th_read(o1, &n1), *b2 = th_read(o2, &n2), *b7 = th_read(o7, &n7);
        const int same = b1 && b2 && b7 && n1 == n2 && n1 == n7 && !memcmp(b1, b2, n1) && !memcmp(b1, b7, n1);
        free(b1); free(b2); free(b7);
        CHECKF(same, "%s output differs between thread counts", type);
    }
}

static void test_requantize_refused(void)
{
    const char *in = make_model("rq.gguf", 0), *q4 = th_tmp("rq-q4.gguf"), *q8 = th_tmp("rq-q8.gguf");
    CHECK(in && quantize(in, q4, "Q4_0") == 0);
    CHECK(quantize(q4, q8, "Q8_0") != 0);
    CHECK(strstr(th_last_err(), "--allow-requantize") && access(q8, F_OK) != 0);
    CHECK(quantize(q4, q8, "--allow-requantize Q8_0") == 0);
    gguf_file *a = open_ok(q4), *b = open_ok(q8);
    CHECK(a && b);
    /* Q4_0 -> F32 (dequantized) -> Q8_0 */
    const gguf_tensor *s = gguf_get_tensor(a, "blk.2.attn_q.weight"), *t = gguf_get_tensor(b, "blk.2.attn_q.weight");
    int ok = s && t && t->type == GGML_TYPE_Q8_0;
    if (ok) {
        const int64_t n = s->ne[0] * s->ne[1];
        float *x = malloc((size_t)n * 4);
        block_q8_0 *y = malloc((size_t)n / 32 * sizeof *y);
        dequantize_row_q4_0(s->data, x, n);
        quantize_row_q8_0_ref(x, y, n);
        ok = memcmp(y, t->data, t->nbytes) == 0;
        free(x);
        free(y);
    }
    gguf_close(a);
    gguf_close(b);
    CHECK(ok);
}

/* One line on stderr starting with the program name, exit 1, no output. */
static int fails_cleanly(const char *in, const char *out, const char *args)
{
    int rc = quantize(in, out, args);
    const char *e = th_last_err();
    const char *nl = strchr(e, '\n');
    int one_line = nl && nl[1] == 0 && strncmp(e, "hc-quantize: ", 13) == 0;
    if (rc != 1 || !one_line || access(out, F_OK) == 0) {
        printf("# rc %d, stderr: %s", rc, e);
        return 0;
    }
    return 1;
}

static int dir_is_empty(const char *dir)
{
    return th_sh("[ -z \"$(ls -A %s)\" ]", dir) == 0;
}

static void test_bad_inputs(void)
{
    char good[512];   /* th_tmp's buffers rotate: keep a copy */
    const char *made = make_model("good.gguf", 0);
    CHECK(made);
    snprintf(good, sizeof good, "%s", made ? made : "");
    const char *notg = th_tmp("not.gguf"), *trunc = th_tmp("trunc.gguf");
    CHECK(th_write(notg, "hello, world\n", 13) == 0);
    size_t n;
    unsigned char *b = th_read(good, &n);
    CHECK(b && th_write(trunc, b, n - 100) == 0);
    free(b);
    CHECK(th_sh("mkdir -p %s", th_tmp("outdir")) == 0);
    char out[512];
    snprintf(out, sizeof out, "%s/o.gguf", th_tmp("outdir"));
    CHECK(fails_cleanly(notg, out, "Q4_0"));
    CHECK(fails_cleanly(trunc, out, "Q4_0"));
    CHECK(fails_cleanly(th_tmp("missing.gguf"), out, "Q4_0"));
    CHECK(fails_cleanly(good, out, "Q5_K") && strstr(th_last_err(), "Q5_K"));
    CHECK(fails_cleanly(good, out, "--calib x.txt Q4_0") && strstr(th_last_err(), "GPTQ"));
    CHECK(fails_cleanly(good, th_tmp("nodir/o.gguf"), "Q4_0"));
    CHECK(dir_is_empty(th_tmp("outdir")));
    /* a weight that overflows: non-finite scale, refused as ggml_validate_row_data */
    const char *inf = make_model("inf.gguf", WITH_INF);
    CHECK(inf && fails_cleanly(inf, out, "Q8_0") && strstr(th_last_err(), "blk.10.ffn_up.weight"));
    CHECK(dir_is_empty(th_tmp("outdir")));
    if (geteuid() != 0) {   /* root writes anywhere */
        CHECK(chmod(th_tmp("outdir"), 0555) == 0);
        int ok = fails_cleanly(good, out, "Q4_0");
        chmod(th_tmp("outdir"), 0755);
        CHECK(ok);
    }
}

static void test_stories260k(void)
{
    const char *in = th_fixture("stories260K.gguf");
    if (!in) SKIP("no fixtures");
    for (int k = 0; k < 2; k++) {
        const char *out = th_tmp(k ? "s-q8.gguf" : "s-q4.gguf");
        const uint32_t type = k ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0;
        CHECK(quantize(in, out, k ? "Q8_0" : "Q4_0") == 0);
        gguf_file *a = open_ok(in), *b = open_ok(out);
        CHECK(a && b);
        const char *names[] = { "output.weight", "token_embd.weight", "blk.0.attn_q.weight", "blk.4.ffn_up.weight",
                                "blk.0.ffn_down.weight", "blk.3.ffn_down.weight", "blk.0.ffn_norm.weight" };
        const uint32_t types[] = { GGML_TYPE_Q8_0, type, type, type, GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F32 };
        int ok = b->n_tensors == 48 && tensors_match(a, b, names, types, 7);
        gguf_close(a);
        gguf_close(b);
        CHECK(ok);
        if (access(th_bin("hc-gguf"), X_OK) == 0)
            CHECKF(th_sh("%s check %s", th_bin("hc-gguf"), out) == 0, "hc-gguf check: %s", th_last_err());
    }
}

static void test_plan_rules(void)
{
    CHECK(hc_quant_eligible("blk.0.attn_q.weight", 2) && !hc_quant_eligible("blk.0.attn_q.weight", 1));
    CHECK(!hc_quant_eligible("blk.0.ffn_norm.weight", 2) && !hc_quant_eligible("blk.0.attn_q.bias", 2));
    CHECK(!hc_quant_eligible("blk.0.ffn_gate_inp.weight", 2) && !hc_quant_eligible("position_embd.weight", 2));
    CHECK(hc_ftype_of(GGML_TYPE_Q4_0) == 2 && hc_ftype_of(GGML_TYPE_Q8_0) == 7 &&
          hc_ftype_of(GGML_TYPE_BF16) == 32 && hc_ftype_of(GGML_TYPE_Q6_K) == -1);
}

int main(void)
{
    RUN(test_plan_rules);
    RUN(test_types_and_bytes_q4_0);
    RUN(test_kvs_copied_and_set);
    RUN(test_tensor_order);
    RUN(test_pure_and_overrides);
    RUN(test_tied_embedding);
    RUN(test_pwri_kept);
    RUN(test_thread_count_independent);
    RUN(test_requantize_refused);
    RUN(test_bad_inputs);
    RUN(test_stories260k);
    return th_done();
}
