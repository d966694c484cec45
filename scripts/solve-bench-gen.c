/* Benchmark instance for hc-solve: a llama-shaped GGUF with the real layer and
 * neuron counts but a narrow n_embd (the ILP's size depends on layers x neurons
 * only; n_embd just scales bytes), mixed quantization (ffn_down_t Q8_0 in even
 * layers, Q4_0 in odd ones), and power-law activation statistics.
 *
 *   solve-bench-gen MODEL.gguf STATS.gguf N_LAYER N_FF [N_EMBD=32] [SEED=1]
 *
 * Built and run by scripts/bench-solve.sh. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "stats.h"

#define N_VOCAB 256
#define N_TOKENS 100000
#define PRED_RANK 16

static uint64_t rng_state;
static uint64_t rng(void)   /* xorshift64*: the same instance on every machine */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static void add(gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1, const void *zeros)
{
    int64_t ne[2] = { ne0, ne1 };
    if (gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, zeros) < 0)
        hc_die("cannot add %s", name);
}

static void write_model(const char *path, uint32_t n_layer, uint32_t n_ff, uint32_t n_embd)
{
    size_t biggest = (size_t)n_ff * n_embd * 2 + (size_t)N_VOCAB * n_embd * 4;
    void *zeros = calloc(1, biggest);
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    gguf_set_str(w, "general.architecture", "llama");
    gguf_set_str(w, "general.name", "solve-bench");
    gguf_set_u32(w, "llama.block_count", n_layer);
    gguf_set_u32(w, "llama.feed_forward_length", n_ff);
    gguf_set_u32(w, "llama.embedding_length", n_embd);
    gguf_set_u32(w, "llama.context_length", 4096);
    gguf_set_u32(w, "llama.attention.head_count", n_embd / 8);
    add(w, "token_embd.weight", GGML_TYPE_Q4_0, n_embd, N_VOCAB, zeros);
    for (uint32_t l = 0; l < n_layer; l++) {
        char n[64];
#define T(suffix, type, a, b) (snprintf(n, sizeof n, "blk.%" PRIu32 "." suffix, l), add(w, n, type, a, b, zeros))
        T("attn_norm.weight", GGML_TYPE_F32, n_embd, 1);
        T("attn_q.weight", GGML_TYPE_Q4_0, n_embd, n_embd);
        T("attn_k.weight", GGML_TYPE_Q4_0, n_embd, n_embd);
        T("attn_v.weight", GGML_TYPE_Q4_0, n_embd, n_embd);
        T("attn_output.weight", GGML_TYPE_Q4_0, n_embd, n_embd);
        T("fc1.weight", GGML_TYPE_F16, n_embd, PRED_RANK);
        T("fc2.weight", GGML_TYPE_F16, PRED_RANK, n_ff);
        T("ffn_norm.weight", GGML_TYPE_F32, n_embd, 1);
        T("ffn_gate.weight", GGML_TYPE_Q4_0, n_embd, n_ff);
        T("ffn_up.weight", GGML_TYPE_Q4_0, n_embd, n_ff);
        T("ffn_down_t.weight", l % 2 ? GGML_TYPE_Q4_0 : GGML_TYPE_Q8_0, n_embd, n_ff);
#undef T
    }
    add(w, "output_norm.weight", GGML_TYPE_F32, n_embd, 1, zeros);
    add(w, "output.weight", GGML_TYPE_Q4_0, n_embd, N_VOCAB, zeros);
    char err[512];
    if (gguf_writer_write(w, path, err, sizeof err))
        hc_die("%s", err);
    gguf_writer_free(w);
    free(zeros);
}

/* Activation rate of the neuron of rank r: a power law whose steepness varies
 * by layer, capped at 1, with some noise; neuron ids are a random permutation. */
static void write_stats(const char *path, const char *model_path, uint32_t n_layer, uint32_t n_ff, uint32_t n_embd)
{
    char err[512];
    hc_stats *s = hc_stats_new(n_layer, n_ff);
    strcpy(s->arch, "llama");
    strcpy(s->activation, "relu");
    strcpy(s->corpus, "synthetic power law");
    s->n_embd = n_embd;
    s->ctx = 512;
    s->n_tokens = N_TOKENS;
    gguf_file *m = gguf_open(model_path, err, sizeof err);
    if (!m)
        hc_die("%s", err);
    s->ffn_hash = hc_ffn_hash(m);
    gguf_close(m);
    uint32_t *perm = malloc(n_ff * sizeof *perm);
    for (uint32_t l = 0; l < n_layer; l++) {
        double alpha = 0.5 + 0.7 * (double)(rng() % 1000) / 1000.0;
        for (uint32_t i = 0; i < n_ff; i++)
            perm[i] = i;
        for (uint32_t i = n_ff - 1; i > 0; i--) {
            uint32_t j = (uint32_t)(rng() % (i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (uint32_t r = 0; r < n_ff; r++) {
            double p = fmin(1.0, 0.9 * pow((double)(r + 1) / 8.0, -alpha));
            p *= 0.9 + 0.2 * (double)(rng() % 1000) / 1000.0;
            int64_t c = (int64_t)fmin((double)N_TOKENS, floor(p * N_TOKENS));
            size_t k = (size_t)l * n_ff + perm[r];
            s->count[k] = c;
            s->sum[k] = 0.7 * (double)c;
        }
    }
    free(perm);
    if (hc_stats_write(s, path, err, sizeof err))
        hc_die("%s", err);
    hc_stats_free(s);
}

int main(int argc, char **argv)
{
    hc_prog = "solve-bench-gen";
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: solve-bench-gen MODEL.gguf STATS.gguf N_LAYER N_FF [N_EMBD=32] [SEED=1]\n");
        return 1;
    }
    uint32_t n_layer = (uint32_t)atoi(argv[3]), n_ff = (uint32_t)atoi(argv[4]);
    uint32_t n_embd = argc > 5 ? (uint32_t)atoi(argv[5]) : 32;
    rng_state = argc > 6 ? strtoull(argv[6], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1 : 0x9E3779B97F4A7C16ULL;
    if (n_layer == 0 || n_ff == 0 || n_embd == 0 || n_embd % 32)
        hc_die("N_LAYER and N_FF must be positive, N_EMBD a multiple of 32");
    write_model(argv[1], n_layer, n_ff, n_embd);
    write_stats(argv[2], argv[1], n_layer, n_ff, n_embd);
    return 0;
}
