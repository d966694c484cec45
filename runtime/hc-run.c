/* hc-run: generate text, print logits or measure perplexity with a GGUF model. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "ffn_setup.h"
#include "kernels.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: hc-run -m MODEL.gguf [-p PROMPT] [-n N] [options]\n"
    "  -m, --model FILE        GGUF model (llama architecture; F32/F16/BF16/Q8_0/Q4_0)\n"
    "  -p, --prompt TEXT       prompt (BOS is prepended; \"\" = BOS only)\n"
    "  -n, --n-predict N       tokens to generate (default 128); stops early at BOS/EOS\n"
    "  -t, --threads N         threads (default: online CPUs)\n"
    "  -c, --ctx-size N        context (default: prompt + N for generation, 512 for\n"
    "                          --perplexity; at most the model's context_length)\n"
    "  -b, --batch-size N      prompt tokens per forward step (default 512)\n"
    "      --temp T            temperature; 0 = greedy (default 0.8)\n"
    "      --top-k K           keep the K most likely tokens (default 40; 0 = all)\n"
    "      --top-p P           nucleus sampling (default 0.95; 1 = off)\n"
    "      --seed S            sampler seed (default 42)\n"
    "      --perplexity FILE   perplexity of a text file in windows of -c tokens; each\n"
    "                          window starts with BOS and its second half is scored (as\n"
    "                          llama.cpp); ends with the line 'perplexity: X'\n"
    "      --logits            print the logits of the last prompt position, one per line\n"
    "      --sparse            sparse FFN on the CPU: up and down rows only for active\n"
    "                          neurons (exact for ReLU); on by default with predictors,\n"
    "                          a GPU index or --sparse-threshold\n"
    "      --sparse-threshold T predictor models: compute neurons whose predictor output\n"
    "                          is >= T (default powerinfer.sparse_threshold); others:\n"
    "                          skip neurons with |act(gate)| < T (approximate for SiLU)\n"
    "      --dense             the dense FFN whatever the model or index\n"
    "      --gpu-index FILE    PowerInfer .gpuidx: its hot neurons run on the OpenCL\n"
    "                          device, the others on the CPU (default: MODEL.generated.gpuidx\n"
    "                          when it exists)\n"
    "      --disable-gpu-index do not look for MODEL.generated.gpuidx\n"
    "      --vram-budget SIZE  device memory for the hot neurons (K/M/G = 1024-based;\n"
    "                          default: the device's); a larger split runs on the CPU\n"
    "  -v, --verbose           print model and kernel details to stderr (with the sparse\n"
    "                          FFN: per-layer skipped fraction and predictor recall)\n"
    "  -h, --help              this help\n"
    "Text goes to stdout; timings to stderr.\n";

typedef struct {
    const char *model, *prompt, *ppl_file;
    int n_predict, threads, n_ctx, n_batch, logits, verbose;
    hc_ffn_opts fo;
    hc_sampler_params sp;
} options;

static void parse_args(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "prompt", required_argument, 0, 'p' },
        { "n-predict", required_argument, 0, 'n' }, { "threads", required_argument, 0, 't' },
        { "ctx-size", required_argument, 0, 'c' }, { "batch-size", required_argument, 0, 'b' },
        { "temp", required_argument, 0, 'T' }, { "top-k", required_argument, 0, 'K' },
        { "top-p", required_argument, 0, 'P' }, { "seed", required_argument, 0, 'S' },
        { "perplexity", required_argument, 0, 'X' }, { "logits", no_argument, 0, 'L' },
        { "sparse", no_argument, 0, 'R' }, { "dense", no_argument, 0, 'D' },
        { "sparse-threshold", required_argument, 0, 'H' }, { "gpu-index", required_argument, 0, 'G' },
        { "disable-gpu-index", no_argument, 0, 'N' }, { "vram-budget", required_argument, 0, 'B' },
        { "verbose", no_argument, 0, 'v' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    *o = (options){ .prompt = "", .n_predict = 128, .threads = hc_default_threads(64),
                    .sp = { .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 42 } };
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:n:t:c:b:vh", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'n': o->n_predict = (int)hc_opt_int("-n", optarg, 0, 1 << 24); break;
        case 't': o->threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case 'c': o->n_ctx = (int)hc_opt_int("-c", optarg, 1, 1 << 24); break;
        case 'b': o->n_batch = (int)hc_opt_int("-b", optarg, 1, 1 << 20); break;
        case 'T': o->sp.temp = (float)hc_opt_num("--temp", optarg, 0, 1e6); break;
        case 'K': o->sp.top_k = (int)hc_opt_int("--top-k", optarg, 0, 1 << 30); break;
        case 'P': o->sp.top_p = (float)hc_opt_num("--top-p", optarg, 0, 1); break;
        case 'S': {
            char *end;
            o->sp.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) hc_die("bad value for --seed: '%s'", optarg);
            break;
        }
        case 'X': o->ppl_file = optarg; break;
        case 'L': o->logits = 1; break;
        case 'R': o->fo.sparse = 1; break;
        case 'D': o->fo.dense = 1; break;
        case 'H':
            o->fo.threshold = (float)hc_opt_num("--sparse-threshold", optarg, -1e30, 1e30);
            o->fo.have_threshold = 1;
            break;
        case 'G': o->fo.gpu_index = optarg; break;
        case 'N': o->fo.no_gpu_index = 1; break;
        case 'B':
            if (hc_parse_size(optarg, &o->fo.vram_budget) || !o->fo.vram_budget)
                hc_die("bad value for --vram-budget: '%s' (bytes, or K/M/G/T)", optarg);
            break;
        case 'v': o->verbose = o->fo.verbose = 1; break;
        case 'h': fputs(usage, stdout); exit(0);
        default: hc_bad_option(c, NULL, argv, longs);
        }
    }
    if (optind < argc) hc_die("unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model) hc_die("no model given (-m MODEL.gguf; see --help)");
    if (o->ppl_file && o->logits) hc_die("--perplexity and --logits do not go together");
    if (o->fo.dense && (o->fo.sparse || o->fo.have_threshold || o->fo.gpu_index))
        hc_die("--dense does not go with --sparse, --sparse-threshold or --gpu-index");
}

static hc_ctx *new_ctx(const hc_model *m, const options *o, hc_ffn *ffn, int n_ctx)
{
    char err[512];
    hc_ctx_params cp = { .n_ctx = n_ctx, .n_batch = o->n_batch, .n_threads = o->threads };
    hc_ffn_attach(ffn, &cp);
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, sizeof err);
    if (!ctx) hc_die("%s", err);
    return ctx;
}

static int32_t *tokenize(const hc_tokenizer *tok, const char *what, const char *text, size_t len,
                         int parse_special, int *n)
{
    int need = hc_tokenize(tok, text, len, 1, parse_special, NULL, 0);
    int32_t *t = need > 0 ? malloc(sizeof *t * (size_t)need) : NULL;
    if (!t || hc_tokenize(tok, text, len, 1, parse_special, t, need) != need)
        hc_die("%s: cannot tokenize", what);
    *n = need;
    return t;
}

static void print_piece(const hc_tokenizer *tok, int prev, int id)
{
    char buf[256];
    int n = hc_token_to_piece(tok, prev, id, buf, sizeof buf);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
}

/* Mean negative log-likelihood: llama.cpp's perplexity (first token of each
 * window replaced by BOS; positions n_ctx/2 .. n_ctx-2 predict the next token). */
static void perplexity(const hc_model *m, const hc_tokenizer *tok, const options *o, hc_ffn *ffn)
{
    char err[512];
    size_t len;
    char *text = hc_read_file(o->ppl_file, &len, err, sizeof err);
    if (!text) hc_die("%s", err);
    int n_tok;
    int32_t *toks = tokenize(tok, o->ppl_file, text, len, 0, &n_tok);
    free(text);
    int n_ctx = o->n_ctx ? o->n_ctx : (m->hp.n_ctx_train < 512 ? m->hp.n_ctx_train : 512);
    if (n_ctx < 4) hc_die("-c %d is too small for --perplexity (need 4 or more)", n_ctx);
    if (n_tok < n_ctx) hc_die("%s: %d tokens, need at least %d (one window of -c)", o->ppl_file, n_tok, n_ctx);
    hc_ctx *ctx = new_ctx(m, o, ffn, n_ctx);
    int V = m->hp.n_vocab, n_chunk = n_tok / n_ctx, first = n_ctx / 2;
    float *logits = malloc(sizeof(float) * (size_t)n_ctx * (size_t)V);
    int32_t *win = malloc(sizeof *win * (size_t)n_ctx);
    if (!logits || !win) hc_die("out of memory for %d logits", n_ctx);
    double nll = 0, t0 = hc_now();
    long scored = 0;
    hc_progress pr;
    hc_progress_start(&pr, "perplexity", (uint64_t)n_chunk * (uint64_t)n_ctx, "tok");
    for (int c = 0; c < n_chunk; c++) {
        const int32_t *w = toks + (size_t)c * n_ctx;
        memcpy(win, w, sizeof *win * (size_t)n_ctx);
        win[0] = hc_tokenizer_bos(tok);
        if (hc_eval(ctx, win, n_ctx, 0, logits, HC_LOGITS_ALL)) hc_die("%s: %s", o->ppl_file, hc_ctx_error(ctx));
        for (int i = first; i < n_ctx - 1; i++) {
            const float *l = logits + (size_t)i * V;
            float mx = l[hc_argmax(l, V)];
            double s = 0;
            for (int j = 0; j < V; j++) s += exp((double)l[j] - mx);
            nll += log(s) + mx - l[w[i + 1]];
            scored++;
        }
        hc_progress_update(&pr, (uint64_t)(c + 1) * (uint64_t)n_ctx);
    }
    hc_progress_end(&pr);
    double dt = hc_now() - t0;
    fprintf(stderr, "perplexity: %d windows of %d tokens, %ld tokens scored (positions %d..%d of each), %.1f tok/s\n",
            n_chunk, n_ctx, scored, first + 1, n_ctx - 1, (double)n_chunk * n_ctx / dt);
    printf("perplexity: %.4f\n", exp(nll / (double)scored));
    free(win);
    free(logits);
    free(toks);
    hc_ctx_free(ctx);
}

static void generate(const hc_model *m, const hc_tokenizer *tok, const options *o, hc_ffn *ffn)
{
    int n_prompt;
    int32_t *prompt = tokenize(tok, "prompt", o->prompt, strlen(o->prompt), 1, &n_prompt);
    int n_ctx = o->n_ctx;
    if (!n_ctx) {
        long want = (long)n_prompt + (o->logits ? 0 : o->n_predict);
        n_ctx = want < m->hp.n_ctx_train ? (int)want : m->hp.n_ctx_train;
    }
    if (n_prompt > n_ctx) hc_die("prompt has %d tokens, more than the context of %d (-c)", n_prompt, n_ctx);
    hc_ctx *ctx = new_ctx(m, o, ffn, n_ctx);
    int V = m->hp.n_vocab, bos = hc_tokenizer_bos(tok), eos = hc_tokenizer_eos(tok);
    float *logits = malloc(sizeof(float) * (size_t)V);
    hc_sampler *smp = hc_sampler_new(&o->sp, V);
    if (!logits || !smp) hc_die("out of memory");

    double t0 = hc_now();
    if (hc_eval(ctx, prompt, n_prompt, 0, logits, HC_LOGITS_LAST)) hc_die("prompt: %s", hc_ctx_error(ctx));
    double t_prompt = hc_now() - t0;
    if (o->logits) {
        for (int i = 0; i < V; i++) printf("%.9g\n", logits[i]);
    } else {
        for (int i = 1; i < n_prompt; i++) print_piece(tok, prompt[i - 1], prompt[i]);
        fflush(stdout);
    }
    int n_gen = 0, pos = n_prompt, last = prompt[n_prompt - 1];
    t0 = hc_now();
    while (!o->logits && n_gen < o->n_predict) {
        int next = hc_sample(smp, logits);
        if (next == bos || next == eos) break;
        print_piece(tok, last, next);
        fflush(stdout);
        n_gen++;
        last = next;
        if (n_gen == o->n_predict) break;
        if (pos == n_ctx) {
            fputs("\n", stdout);
            hc_warn("context of %d tokens is full; stopping (raise -c)", n_ctx);
            break;
        }
        if (hc_eval(ctx, &next, 1, pos++, logits, HC_LOGITS_LAST)) hc_die("%s", hc_ctx_error(ctx));
    }
    double t_gen = hc_now() - t0;
    if (!o->logits && isatty(STDOUT_FILENO)) fputs("\n", stdout);
    fprintf(stderr, "prompt:     %6d tokens in %9.2f ms (%9.1f tok/s)\n", n_prompt, t_prompt * 1e3,
            n_prompt / (t_prompt > 0 ? t_prompt : 1e-9));
    if (!o->logits)
        fprintf(stderr, "generation: %6d tokens in %9.2f ms (%9.1f tok/s)\n", n_gen, t_gen * 1e3,
                n_gen / (t_gen > 0 ? t_gen : 1e-9));
    hc_sampler_free(smp);
    free(logits);
    free(prompt);
    hc_ctx_free(ctx);
}

static void print_model(const hc_model *m, const options *o)
{
    const hc_hparams *hp = &m->hp;
    char sz[32];
    fprintf(stderr, "model: %d layers, n_embd %d, n_ff %d, heads %d/%d, vocab %d, context_length %d, %s FFN%s\n",
            hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv, hp->n_vocab, hp->n_ctx_train,
            hp->act == HC_ACT_RELU ? "ReLU" : "SwiGLU",
            m->layers[0].ffn_down_t.kind != HC_WEIGHT_NONE ? " (PowerInfer down_t)" : "");
    uint64_t tb = hc_model_token_bytes(m);
    fprintf(stderr, "weights read per token: %llu bytes (%s); kernels: %s; threads: %d\n",
            (unsigned long long)tb, hc_format_size(tb, sz, sizeof sz), hc_kernel_isa(), o->threads);
}

int main(int argc, char **argv)
{
    hc_prog = "hc-run";
    options o;
    parse_args(argc, argv, &o);
    char err[512];
    double t0 = hc_now();
    hc_model *m = hc_model_load(o.model, err, sizeof err);
    if (!m) hc_die("%s", err);
    hc_tokenizer *tok = hc_model_tokenizer(m, err, sizeof err);
    if (!tok) hc_die("%s", err);   /* err names the file, once */
    fprintf(stderr, "load:       %.2f ms\n", (hc_now() - t0) * 1e3);
    if (o.verbose) print_model(m, &o);
    hc_ffn *ffn = hc_ffn_setup(m, &o.fo, stderr, err, sizeof err);
    if (!ffn) hc_die("%s", err);
    if (o.ppl_file) perplexity(m, tok, &o, ffn);
    else generate(m, tok, &o, ffn);
    hc_ffn_report(ffn, stderr);
    hc_ffn_free(ffn);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    return 0;
}
