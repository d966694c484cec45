/* common/stats.c: round trip, validation of corrupt files, model identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "harness.h"
#include "stats.h"

static char err[512];

/* hc_ffn_hash of tiny_model("...", 32, 0, 0, 0), as computed before GPTQ
 * companions were hashed. */
#define PINNED_TINY_HASH 0xd0a8940d68e58fa8ull

static hc_stats *sample_stats(void)
{
    hc_stats *s = hc_stats_new(3, 40);
    strcpy(s->arch, "llama");
    strcpy(s->activation, "relu");
    strcpy(s->corpus, "tinystories:abcd");
    s->n_embd = 16;
    s->ctx = 128;
    s->threshold = 0.25f;
    s->n_tokens = 1000;
    s->ffn_hash = 0x0123456789abcdefULL;
    for (size_t i = 0; i < 3 * 40; i++) {
        s->count[i] = (int64_t)(i * 37 % 1001);
        s->sum[i] = 0.5 * (double)s->count[i] + 1e-3 * (double)i;
    }
    return s;
}

static void test_round_trip(void)
{
    hc_stats *s = sample_stats();
    const char *p = th_tmp("rt.stats");
    CHECKF(hc_stats_write(s, p, err, sizeof err) == 0, "%s", err);
    hc_stats *r = hc_stats_read(p, err, sizeof err);
    CHECKF(r, "%s", err);
    CHECK(r->n_layer == 3 && r->n_ff == 40 && r->n_embd == 16 && r->ctx == 128);
    CHECK(!strcmp(r->arch, "llama") && !strcmp(r->activation, "relu") && !strcmp(r->corpus, s->corpus));
    CHECK(r->threshold == 0.25f && r->n_tokens == 1000 && r->ffn_hash == s->ffn_hash);
    CHECK(!memcmp(r->count, s->count, 3 * 40 * sizeof *s->count));
    CHECK(!memcmp(r->sum, s->sum, 3 * 40 * sizeof *s->sum));
    /* The file is a GGUF with the documented names, in order. */
    gguf_file *f = gguf_open(p, err, sizeof err);
    CHECKF(f, "%s", err);
    CHECK(f->n_tensors == 6);
    CHECK(!strcmp(f->tensors[0].name, "blk.0.act_count") && f->tensors[0].type == GGML_TYPE_I64);
    CHECK(!strcmp(f->tensors[5].name, "blk.2.act_sum") && f->tensors[5].type == GGML_TYPE_F64);
    char *h = NULL;
    CHECK(gguf_get_str(f, "hotcold.stats.ffn_hash", &h) == 0 && !strcmp(h, "0123456789abcdef"));
    free(h);
    gguf_close(f);
    hc_stats_free(r);
    hc_stats_free(s);
}

/* Write a stats file by hand with one thing changed by `mutate`, expect the
 * reader to reject it with `want` in the message. */
typedef void (*mutator)(gguf_writer *w, int64_t *count, double *sum);

static int rejects(mutator mutate, const char *want)
{
    hc_stats *s = sample_stats();
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "hotcold.stats");
    gguf_set_u32(w, "hotcold.stats.version", 1);
    gguf_set_str(w, "hotcold.stats.arch", "llama");
    gguf_set_u32(w, "hotcold.stats.n_layer", 3);
    gguf_set_u32(w, "hotcold.stats.n_ff", 40);
    gguf_set_u32(w, "hotcold.stats.n_embd", 16);
    gguf_set_str(w, "hotcold.stats.activation", "relu");
    gguf_set_f32(w, "hotcold.stats.threshold", 0);
    gguf_set_u64(w, "hotcold.stats.n_tokens", 1000);
    gguf_set_str(w, "hotcold.stats.ffn_hash", "0000000000000000");
    gguf_set_str(w, "hotcold.stats.corpus", "c");
    gguf_set_u32(w, "hotcold.stats.ctx", 64);
    mutate(w, s->count, s->sum);
    int64_t ne[1] = { 40 };
    for (int l = 0; l < 3; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.act_count", l);
        gguf_add_tensor(w, name, GGML_TYPE_I64, 1, ne, s->count + l * 40);
        snprintf(name, sizeof name, "blk.%d.act_sum", l);
        gguf_add_tensor(w, name, GGML_TYPE_F64, 1, ne, s->sum + l * 40);
    }
    const char *p = th_tmp("bad.stats");
    int ok = gguf_writer_write(w, p, err, sizeof err) == 0;
    gguf_writer_free(w);
    hc_stats_free(s);
    if (!ok)
        return 0;
    hc_stats *r = hc_stats_read(p, err, sizeof err);
    if (r) {
        hc_stats_free(r);
        return 0;
    }
    if (!strstr(err, want) || !strstr(err, p) || strchr(err, '\n')) {
        fprintf(stderr, "message: %s\n", err);
        return 0;
    }
    return 1;
}

static void m_none(gguf_writer *w, int64_t *c, double *s) { (void)w; (void)c; (void)s; }
static void m_arch(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_str(w, "general.architecture", "llama"); }
static void m_version(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_u32(w, "hotcold.stats.version", 2); }
static void m_type(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_u64(w, "hotcold.stats.n_ff", 40); }
static void m_missing(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_remove_key(w, "hotcold.stats.corpus"); }
static void m_layers(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_u32(w, "hotcold.stats.n_layer", 4); }
static void m_shape(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_u32(w, "hotcold.stats.n_ff", 39); }
static void m_count(gguf_writer *w, int64_t *c, double *s) { (void)w; (void)s; c[77] = 1001; }
static void m_negative(gguf_writer *w, int64_t *c, double *s) { (void)w; (void)s; c[5] = -1; }
static void m_nan(gguf_writer *w, int64_t *c, double *s) { (void)w; (void)c; s[9] = NAN; }
static void m_hash(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_str(w, "hotcold.stats.ffn_hash", "12345"); }
static void m_act(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_str(w, "hotcold.stats.activation", "tanh"); }
static void m_thr_inf(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_f32(w, "hotcold.stats.threshold", INFINITY); }
static void m_thr_nan(gguf_writer *w, int64_t *c, double *s) { (void)c; (void)s; gguf_set_f32(w, "hotcold.stats.threshold", NAN); }

static void test_corrupt_rejected(void)
{
    CHECK(rejects(m_none, "") == 0); /* the unmodified file is accepted */
    CHECK(rejects(m_arch, "not a statistics file"));
    CHECK(rejects(m_version, "version 2"));
    CHECK(rejects(m_type, "hotcold.stats.n_ff has the wrong type"));
    CHECK(rejects(m_missing, "hotcold.stats.corpus is missing"));
    CHECK(rejects(m_layers, "expected 8"));
    CHECK(rejects(m_shape, "blk.0.act_count must be I64 [39]"));
    CHECK(rejects(m_count, "blk.1.act_count[37] = 1001"));
    CHECK(rejects(m_negative, "act_count[5] = -1"));
    CHECK(rejects(m_nan, "act_sum[9]"));
    CHECK(rejects(m_hash, "16 lowercase hex"));
    CHECK(rejects(m_act, "activation \"tanh\" is not \"relu\", \"silu\" or \"gelu\""));
    /* what hc-profile --threshold refuses */
    CHECK(rejects(m_thr_inf, "hotcold.stats.threshold = inf is not a threshold"));
    CHECK(rejects(m_thr_nan, "hotcold.stats.threshold = nan is not a threshold"));
}

static void test_not_gguf(void)
{
    const char *p = th_tmp("junk.stats");
    th_write(p, "hello", 5);
    CHECK(hc_stats_read(p, err, sizeof err) == NULL);
    CHECK(strstr(err, p) != NULL);
}

/* A tiny llama-shaped model: FFN tensors of `big` floats per row so that the
 * hash samples instead of reading everything. */
static gguf_file *tiny_model(const char *name, uint32_t n_ff, float poke, int swap_order, int big)
{
    int64_t n_embd = big ? 8192 : 8;
    size_t n = (size_t)n_embd * n_ff;
    float *data = calloc(n, sizeof *data);
    data[n - 1] = poke;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", 2);
    gguf_set_u32(w, "llama.feed_forward_length", n_ff);
    int64_t ne[2] = { n_embd, n_ff };
    static const char *parts[] = { "ffn_gate", "ffn_up", "ffn_down_t" };
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 3; k++) {
            char tn[64];
            int kk = swap_order ? 2 - k : k;
            snprintf(tn, sizeof tn, "blk.%d.%s.weight", l, parts[kk]);
            gguf_add_tensor(w, tn, GGML_TYPE_F32, 2, ne, data);
        }
    const char *p = th_tmp(name);
    gguf_writer_write(w, p, err, sizeof err);
    gguf_writer_free(w);
    free(data);
    return gguf_open(p, err, sizeof err);
}

static void test_ffn_hash(void)
{
    gguf_file *a = tiny_model("a.gguf", 32, 0, 0, 0), *b = tiny_model("b.gguf", 32, 0, 1, 0);
    gguf_file *c = tiny_model("c.gguf", 32, 1, 0, 0), *d = tiny_model("d.gguf", 64, 0, 0, 0);
    gguf_file *e = tiny_model("e.gguf", 32, 0, 0, 1), *g = tiny_model("g.gguf", 32, 1, 0, 1);
    CHECK(a && b && c && d && e && g);
    CHECK(hc_ffn_hash(a) == hc_ffn_hash(b));  /* tensor order in the file does not matter */
    CHECK(hc_ffn_hash(a) != hc_ffn_hash(c));  /* one weight changed */
    CHECK(hc_ffn_hash(a) != hc_ffn_hash(d));  /* shape changed */
    CHECK(hc_ffn_hash(e) != hc_ffn_hash(g));  /* sampling still sees the last bytes of a large tensor */
    CHECK(hc_ffn_hash(a) != 0);
    /* Models without GPTQ companions hash as they always did: committed
     * statistics and indexes (models/, make gpuidx-check) depend on it. */
    CHECKF(hc_ffn_hash(a) == PINNED_TINY_HASH, "%016llx", (unsigned long long)hc_ffn_hash(a));
    gguf_close(a); gguf_close(b); gguf_close(c); gguf_close(d); gguf_close(e); gguf_close(g);
}

/* The FFN of tiny_model stored as INT4-GPTQ companions (hc-quantize GPTQ's
 * layout; the bytes need not be a real quantization): `poke` changes one byte
 * of companion `which` (0 qweight, 1 scales, 2 qzeros, 3 g_idx, 4 a non-FFN
 * attn_q companion) of blk.1.ffn_up.weight (attn_q: blk.1.attn_q.weight). */
static gguf_file *tiny_gptq(const char *name, int which, uint8_t poke)
{
    enum { E = 64, F = 32, G = 2 };   /* n_embd, n_ff, groups of 32 inputs */
    static const char *const parts[] = { "ffn_gate", "ffn_up", "ffn_down" };
    static const char *const comp[] = { "qweight", "scales", "qzeros", "g_idx" };
    static uint8_t buf[2][4][4][F * (E / 8) * 4];   /* the writer keeps pointers until written */
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_u32(w, "llama.block_count", 2);
    gguf_set_u32(w, "llama.feed_forward_length", F);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 4; k++) {
            const char *part = k < 3 ? parts[k] : "attn_q";
            /* gate/up: K = E inputs, N = F outputs; down and attn_q: K = F, N = E */
            int64_t K = k < 2 ? E : F, N = k < 2 ? F : E;
            int64_t ne[4][2] = { { N, K / 8 }, { N, G }, { N / 8, G }, { K, 1 } };
            uint32_t types[4] = { GGML_TYPE_I32, GGML_TYPE_F16, GGML_TYPE_I32, GGML_TYPE_I32 };
            for (int c = 0; c < 4; c++) {
                char tn[96];
                uint8_t *d = buf[l][k][c];
                for (size_t i = 0; i < sizeof buf[l][k][c]; i++)
                    d[i] = (uint8_t)(i * 13 + c + 7 * k);
                if (l == 1 && ((which == 4 && k == 3) || (which < 4 && k == 1 && which == c)))
                    d[3] ^= poke;
                snprintf(tn, sizeof tn, "blk.%d.%s.weight.%s", l, part, comp[c]);
                gguf_add_tensor(w, tn, types[c], c == 3 ? 1 : 2, ne[c], d);
            }
        }
    const char *p = th_tmp(name);
    gguf_writer_write(w, p, err, sizeof err);
    gguf_writer_free(w);
    return gguf_open(p, err, sizeof err);
}

static void test_ffn_hash_gptq(void)
{
    gguf_file *a = tiny_gptq("ga.gguf", 0, 0), *a2 = tiny_gptq("ga2.gguf", 0, 0);
    gguf_file *p[5];
    for (int c = 0; c < 5; c++) {
        char n[32];
        snprintf(n, sizeof n, "gp%d.gguf", c);
        p[c] = tiny_gptq(n, c, 0x10);
        CHECK(p[c]);
    }
    CHECK(a && a2);
    uint64_t h = hc_ffn_hash(a);
    CHECKF(h != HC_FNV_INIT && h != 1, "%016llx: nothing hashed", (unsigned long long)h);
    CHECK(hc_ffn_hash(a2) == h);
    for (int c = 0; c < 4; c++)   /* each FFN companion is part of the identity */
        CHECKF(hc_ffn_hash(p[c]) != h, "companion %d", c);
    CHECK(hc_ffn_hash(p[4]) == h);   /* attention is not */
    gguf_close(a); gguf_close(a2);
    for (int c = 0; c < 5; c++) gguf_close(p[c]);
}

static void test_check_model(void)
{
    gguf_file *m = tiny_model("m.gguf", 40, 0, 0, 0), *o = tiny_model("o.gguf", 40, 2, 0, 0);
    CHECK(m && o);
    hc_stats *s = hc_stats_new(2, 40);
    strcpy(s->arch, "llama");
    s->ffn_hash = 0;
    CHECKF(hc_stats_check_model(s, m, "m.gguf", err, sizeof err) == 0, "%s", err);
    s->ffn_hash = hc_ffn_hash(m);
    CHECKF(hc_stats_check_model(s, m, "m.gguf", err, sizeof err) == 0, "%s", err);
    CHECK(hc_stats_check_model(s, o, "o.gguf", err, sizeof err) == -1 && strstr(err, "o.gguf: FFN weights hash"));
    s->ffn_hash = 0;
    s->n_ff = 41;
    CHECK(hc_stats_check_model(s, m, "m.gguf", err, sizeof err) == -1 && strstr(err, "2 x 41"));
    s->n_ff = 40;
    strcpy(s->arch, "falcon");
    CHECK(hc_stats_check_model(s, m, "m.gguf", err, sizeof err) == -1 && strstr(err, "\"falcon\""));
    hc_stats_free(s);
    gguf_close(m);
    gguf_close(o);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_corrupt_rejected);
    RUN(test_not_gguf);
    RUN(test_ffn_hash);
    RUN(test_ffn_hash_gptq);
    RUN(test_check_model);
    return th_done();
}
