/* hc-run: generate text (for one prompt, or for many at once), print logits or
 * measure perplexity with a GGUF model. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cJSON.h>
#include "blocks.h"
#include "budget.h"
#include "cli.h"
#include "ffn_setup.h"
#include "kernels.h"
#include "model.h"
#include "opencl.h"
#include "prompts.h"
#include "sampler.h"
#include "scheduler.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: hc-run -m MODEL.gguf [-p PROMPT] [-n N] [options]\n"
    "  -m, --model FILE        GGUF model (llama architecture; F32/F16/BF16/Q8_0/Q4_0)\n"
    "  -p, --prompt TEXT       prompt (BOS first when the vocabulary adds it; \"\" = BOS\n"
    "                          only; - = standard input)\n"
    "  -f, --file FILE         prompt from a file (- = standard input); one final newline\n"
    "                          is dropped, as llama.cpp does; with --parallel, one\n"
    "                          prompt a line\n"
    "  -np, --parallel N       generate for every prompt of -f FILE, N sequences at once\n"
    "                          in one batch (continuous batching over a paged KV cache);\n"
    "                          a line starting with '{' is a JSON object: \"prompt\" and,\n"
    "                          for it alone, \"n_predict\", \"temp\", \"seed\"; each text\n"
    "                          after a line '--- line L ---', in input order; a prompt\n"
    "                          longer than the context is refused alone (exit 1 at the end)\n"
    "      --json              with --parallel: a JSON object per prompt on stdout (line,\n"
    "                          prompt, completion, token counts, stop)\n"
    "      --kv-budget SIZE    with --parallel: bytes of KV cache (K/M/G = 1024-based;\n"
    "                          default 3/4 of the available memory, at most N contexts)\n"
    "      --block-size N      with --parallel: positions per KV block, a power of two\n"
    "                          from 4 to 1024 (default 16, vLLM's)\n"
    "      --preemption-mode M with --parallel: what a preempted sequence's cache becomes:\n"
    "                          swap (to host memory, back when it runs again; default)\n"
    "                          or recompute (dropped, its text evaluated again)\n"
    "      --swap-space SIZE   with --parallel: host memory for swapped caches (default\n"
    "                          4G, vLLM's); a cache it does not hold is recomputed\n"
    "  -i, --interactive       after generating, read a line from standard input, append\n"
    "                          it and go on in the same context; ends at end of input\n"
    "  -n, --n-predict N       tokens to generate (default 128); stops early at BOS/EOS;\n"
    "                          -2: until the context is full\n"
    "  -t, --threads N         threads (default: online CPUs)\n"
    "  -c, --ctx-size N        context (default: prompt + N for generation, 512 for\n"
    "                          --perplexity, the model's context_length for --parallel,\n"
    "                          per sequence; at most the model's context_length)\n"
    "  -b, --batch-size N      prompt tokens per forward step (default 512)\n"
    "  -ctk, --cache-type-k T  the KV cache's keys: f32 (default: exact) or f16 (half\n"
    "                          the memory and the bytes attention reads, rounded to\n"
    "                          nearest even; llama.cpp's default)\n"
    "  -ctv, --cache-type-v T  the KV cache's values: f32 (default) or f16, as -ctk\n"
    "      --temp T            temperature; 0 = greedy (default 0.8)\n"
    "      --top-k K           keep the K most likely tokens (default 40; 0 = all)\n"
    "      --top-p P           nucleus sampling (default 0.95; 1 = off)\n"
    "      --seed S            sampler seed (default 42; -1: a random one, printed)\n"
    "      --perplexity FILE   perplexity of a text file in windows of -c tokens; each\n"
    "                          window starts with BOS and its second half is scored (as\n"
    "                          llama.cpp); ends with the line 'perplexity: X'\n"
    "      --logits            print the logits of the last prompt position, one per line\n"
    "      --tokenize          print the prompt's token ids on one line (BOS/EOS where\n"
    "                          the model's tokenizer adds them, as llama-tokenize) and exit\n"
    "      --sparse            sparse FFN on the CPU: up and down rows only for active\n"
    "                          neurons (exact for ReLU); on by default with predictors,\n"
    "                          a GPU index or --sparse-threshold\n"
    "      --sparse-threshold T predictor models: compute neurons whose predictor output\n"
    "                          is >= T (default powerinfer.sparse_threshold); others:\n"
    "                          skip neurons with |act(gate)| < T (approximate for SiLU)\n"
    "      --dense             the dense FFN whatever the model or index\n"
    "      --gpu-index FILE    PowerInfer .gpuidx: its hot neurons run on the OpenCL\n"
    "                          device, the others on the CPU (default: MODEL.generated.gpuidx\n"
    "                          when it exists); on a CPU OpenCL device too\n"
    "      --disable-gpu-index do not look for MODEL.generated.gpuidx\n"
    "      --reset-gpu-index   make MODEL.generated.gpuidx again with hc-solve for the\n"
    "                          budget (--vram-budget, default the device's memory) and\n"
    "                          use it; the statistics come from --stats\n"
    "      --stats FILE        activation statistics for --reset-gpu-index (default\n"
    "                          MODEL.stats.gguf)\n"
    "      --vram-budget SIZE  device memory for this model (K/M/G = 1024-based; default:\n"
    "                          the device's less 1/16): attention, norms, KV cache and\n"
    "                          output head first, then FFN neurons (all: the whole model\n"
    "                          runs there; else the GPU index's hot ones)\n"
    "      --device N          the OpenCL device to use (a number from --list-devices;\n"
    "                          default: $HC_OPENCL_DEVICE, else the first GPU, else 0);\n"
    "                          named, it is used even when it is a CPU device\n"
    "      --list-devices      list the OpenCL devices, one per line, and exit\n"
    "  -ngl, --n-gpu-layers N  the first N layers wholly on the device (all of them: the\n"
    "                          output head too), whatever the budget; also on a CPU\n"
    "                          OpenCL device; -ngl 0: no device (default: a GPU gets what\n"
    "                          --vram-budget holds)\n"
    "      --batch-invariant   on a device, every row of a step with the bits it has\n"
    "                          alone: a prompt batched gives the logits of its tokens\n"
    "                          one at a time (products one row at a time; on by default\n"
    "                          with --parallel); the CPU always does so\n"
    "      --mmap              run the weights from the file mapping (4 KiB pages)\n"
    "      --no-mmap           copy the weights into memory in 2 MiB pages (faster\n"
    "                          decode: fewer TLB misses); default: copy when transparent\n"
    "                          huge pages are on and the copy fits in 80 % of the\n"
    "                          available memory, else the mapping; same results\n"
    "  -v, --verbose           print model and kernel details to stderr (with the sparse\n"
    "                          FFN: per-layer skipped fraction and predictor recall)\n"
    "      --version           print the version\n"
    "  -h, --help              this help\n"
    "Text goes to stdout; timings to stderr.\n";

typedef struct {
    const char *model, *prompt, *prompt_file, *ppl_file, *stats;
    size_t prompt_len;
    char *prompt_buf;    /* the prompt read from a file or stdin, freed at the end */
    int until_full;      /* -n -2 */
    int n_predict, threads, n_ctx, n_batch, logits, verbose, interactive, reset_index, tokenize, list_devices;
    int parallel, json;  /* --parallel N (0: one prompt), --json */
    int seed_drawn;      /* --seed -1: sp.seed drawn from the kernel's random bytes */
    uint64_t kv_budget;  /* --kv-budget; 0: from the available memory */
    int kv_block;        /* --block-size: positions per KV block */
    uint32_t type_k, type_v;   /* -ctk, -ctv: GGML_TYPE_F32 or GGML_TYPE_F16 */
    int recompute;       /* --preemption-mode recompute */
    uint64_t swap_space; /* --swap-space */
    int sched_opts;      /* --preemption-mode or --swap-space given */
    hc_prompt *prompts;  /* --parallel: the prompts of -f */
    int n_prompts;
    int weights_mem;     /* enum hc_weights_mem: --mmap, --no-mmap or neither */
    hc_ffn_opts fo;
    hc_sampler_params sp;
} options;

/* -n N: 0..2^24, or llama.cpp's -2, until the context is full (or EOS):
 * the largest N, which every context ends first. llama.cpp's -1 generates
 * without end by shifting the context, which hc-run does not do: refused. */
static void parse_n_predict(const char *s, options *o)
{
    if (!strcmp(s, "-1"))
        hc_die("-n -1 (llama.cpp's endless generation, which shifts the context) is not supported; "
               "-n -2 generates until the context is full");
    o->until_full = !strcmp(s, "-2");
    o->n_predict = o->until_full ? 1 << 24 : (int)hc_opt_int("-n", s, 0, 1 << 24);
}

/* A seed from the kernel's random bytes, for a seed of -1 (what names it). */
static uint64_t draw_seed(const char *what)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) hc_die("%s: no random bytes: %s", what, strerror(errno));
    return seed;
}

/* --seed S: 0..2^64-1, or -1 (llama.cpp's "random seed"), which draws one
 * (1 returned: the run prints it, so that it can be repeated). */
static int parse_seed(const char *s, uint64_t *seed)
{
    if (!strcmp(s, "-1")) {
        *seed = draw_seed("--seed -1");
        return 1;
    }
    *seed = hc_opt_seed("--seed", s);
    return 0;
}

/* -f FILE, -f - and -p -: the prompt's text, without one final newline. */
static void read_prompt(options *o)
{
    const char *src = o->prompt_file ? o->prompt_file : strcmp(o->prompt, "-") == 0 ? "-" : NULL;
    if (!src) {
        o->prompt_len = strlen(o->prompt);
        return;
    }
    if (o->interactive && strcmp(src, "-") == 0)
        hc_die("-i reads standard input: the prompt cannot come from it too (use -f FILE or -p TEXT)");
    char err[512], *text;
    text = strcmp(src, "-") == 0 ? hc_read_stream(0, "standard input", &o->prompt_len, err, sizeof err)
                                 : hc_read_file(src, &o->prompt_len, err, sizeof err);
    if (!text) hc_die("%s", err);
    if (o->prompt_len && text[o->prompt_len - 1] == '\n') text[--o->prompt_len] = 0;
    o->prompt = o->prompt_buf = text;
}

/* --device N names a listed device: a device asked for by number that is not
 * there is an error, not a quiet run on the CPU. */
static void check_device(const char *device)
{
    char err[512];
    hc_cl_info d;
    if (hc_cl_choose(device, &d, err, sizeof err) < 0) hc_die("%s", err);
}

/* The options that do not go together; then the prompt. */
static void check_args(options *o)
{
    if (!o->model) hc_die("no model given (-m MODEL.gguf; see --help)");
    if (o->ppl_file && o->logits) hc_die("--perplexity and --logits do not go together");
    if (o->interactive && (o->ppl_file || o->logits)) hc_die("-i does not go with --perplexity or --logits");
    if (o->tokenize && (o->interactive || o->ppl_file || o->logits))
        hc_die("--tokenize does not go with -i, --perplexity or --logits");
    if (o->prompt_file && *o->prompt) hc_die("-p and -f do not go together");
    if (o->reset_index && (o->fo.gpu_index || o->fo.no_gpu_index || o->fo.gpu_layers == 0 || o->fo.dense))
        hc_die("--reset-gpu-index makes MODEL.generated.gpuidx: it does not go with --gpu-index, "
               "--disable-gpu-index, -ngl 0 or --dense");
    if (o->stats && !o->reset_index) hc_die("--stats is for --reset-gpu-index");
    if (o->fo.dense && (o->fo.sparse || o->fo.have_threshold || o->fo.gpu_index))
        hc_die("--dense does not go with --sparse, --sparse-threshold or --gpu-index");
    if (o->parallel && !o->prompt_file) hc_die("--parallel runs the prompts of -f FILE (one a line)");
    if (o->parallel && (o->interactive || o->ppl_file || o->logits || o->tokenize))
        hc_die("--parallel does not go with -i, --perplexity, --logits or --tokenize");
    if (!o->parallel && (o->json || o->kv_budget || o->kv_block != HC_KV_BLOCK || o->sched_opts))
        hc_die("--json, --kv-budget, --block-size, --preemption-mode and --swap-space go with --parallel");
    if (o->parallel && o->n_batch && o->n_batch < o->parallel)
        hc_die("-b %d is less than --parallel %d: every running sequence needs a row in each step", o->n_batch,
               o->parallel);
    if (o->fo.device) check_device(o->fo.device);
    if (o->fo.gpu_layers == 0) o->fo.no_gpu_index = 1;
    if (o->parallel) o->fo.batch_invariant = 1;   /* each text its plain run's (docs/design/runtime.md) */
    read_prompt(o);
    char err[512];
    if (o->parallel && !(o->prompts = hc_prompts_parse(o->prompt_file, o->prompt, o->prompt_len, &o->n_prompts, err,
                                                       sizeof err)))
        hc_die("%s", err);
}

/* --list-devices: every OpenCL device, the one a run would use marked, and
 * why a GPU may be missing; then exit (as llama.cpp's). */
static _Noreturn void list_devices(const char *device)
{
    char err[512], line[512], hint[1024];
    hc_cl_info list[HC_CL_MAX_DEVICES];
    int n = hc_cl_list(list, HC_CL_MAX_DEVICES, err, sizeof err);
    if (n < 0) {
        if (hc_cl_icd_hint(hint, sizeof hint)) hc_warn("%s", hint);
        hc_die("%s", err);
    }
    int use = hc_cl_pick(list, n, device, err, sizeof err), gpu = 0;
    printf("OpenCL devices:\n");
    for (int i = 0; i < n; i++) {
        hc_cl_describe(&list[i], i, line, sizeof line);
        printf("%c %s\n", i == use ? '*' : ' ', line);
        gpu |= list[i].is_gpu;
    }
    if (use < 0) hc_warn("%s", err);
    if (!gpu && hc_cl_icd_hint(hint, sizeof hint)) hc_warn("%s", hint);
    exit(use < 0);
}

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
        { "file", required_argument, 0, 'f' }, { "interactive", no_argument, 0, 'i' },
        { "n-gpu-layers", required_argument, 0, 'g' }, { "reset-gpu-index", no_argument, 0, 'E' },
        { "stats", required_argument, 0, 'A' }, { "tokenize", no_argument, 0, 'Z' },
        { "mmap", no_argument, 0, 'M' }, { "no-mmap", no_argument, 0, 'Y' },
        { "device", required_argument, 0, 'Q' }, { "list-devices", no_argument, 0, 'W' },
        { "parallel", required_argument, 0, 'J' }, { "json", no_argument, 0, 'O' },
        { "kv-budget", required_argument, 0, 'U' }, { "block-size", required_argument, 0, 'F' },
        { "cache-type-k", required_argument, 0, 'k' }, { "cache-type-v", required_argument, 0, 'V' },
        { "preemption-mode", required_argument, 0, 'e' }, { "swap-space", required_argument, 0, 'w' },
        { "batch-invariant", no_argument, 0, 'I' }, { "verbose", no_argument, 0, 'v' }, HC_LONG_VERSION,
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    /* llama.cpp spells them -ngl, -np, -ctk and -ctv, which getopt would read as -n gl, -n p, -c tk, -c tv */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (strcmp(argv[i], "-ngl") == 0) argv[i] = "--n-gpu-layers";
        if (strcmp(argv[i], "-np") == 0) argv[i] = "--parallel";
        if (strcmp(argv[i], "-ctk") == 0) argv[i] = "--cache-type-k";
        if (strcmp(argv[i], "-ctv") == 0) argv[i] = "--cache-type-v";
    }
    *o = (options){ .prompt = "", .n_predict = 128, .threads = hc_default_threads(64), .kv_block = HC_KV_BLOCK,
                    .swap_space = (uint64_t)4 << 30,
                    .sp = { .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 42 }, .fo = { .gpu_layers = -1 } };
    int c;
    while ((c = getopt_long(argc, argv, ":m:p:f:in:t:c:b:vh", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'f': o->prompt_file = optarg; break;
        case 'i': o->interactive = 1; break;
        case 'E': o->reset_index = 1; break;
        case 'A': o->stats = optarg; break;
        case 'g': o->fo.gpu_layers = (int)hc_opt_int("-ngl", optarg, 0, 1 << 20); break;
        case 'n': parse_n_predict(optarg, o); break;
        case 't': o->threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case 'c': o->n_ctx = (int)hc_opt_int("-c", optarg, 1, 1 << 24); break;
        case 'b': o->n_batch = (int)hc_opt_int("-b", optarg, 1, 1 << 20); break;
        case 'T': o->sp.temp = (float)hc_opt_num("--temp", optarg, 0, 1e6); break;
        case 'K': o->sp.top_k = (int)hc_opt_int("--top-k", optarg, 0, 1 << 30); break;
        case 'P': o->sp.top_p = (float)hc_opt_num("--top-p", optarg, 0, 1); break;
        case 'S': o->seed_drawn = parse_seed(optarg, &o->sp.seed); break;
        case 'X': o->ppl_file = optarg; break;
        case 'L': o->logits = 1; break;
        case 'Z': o->tokenize = 1; break;
        case 'R': o->fo.sparse = 1; break;
        case 'D': o->fo.dense = 1; break;
        case 'H':
            o->fo.threshold = (float)hc_opt_num("--sparse-threshold", optarg, -1e30, 1e30);
            o->fo.have_threshold = 1;
            break;
        case 'G': o->fo.gpu_index = optarg; break;
        case 'N': o->fo.no_gpu_index = 1; break;
        case 'M': o->weights_mem = HC_WEIGHTS_MAP; break;
        case 'Y': o->weights_mem = HC_WEIGHTS_COPY; break;
        case 'B':
            if (hc_parse_size(optarg, &o->fo.vram_budget) || !o->fo.vram_budget)
                hc_die("bad value for --vram-budget: '%s' (bytes, or K/M/G/T)", optarg);
            break;
        case 'Q':
            hc_opt_int("--device", optarg, 0, HC_CL_MAX_DEVICES - 1);
            o->fo.device = optarg;
            break;
        case 'W': o->list_devices = 1; break;
        case 'I': o->fo.batch_invariant = 1; break;
        case 'J': o->parallel = (int)hc_opt_int("--parallel", optarg, 1, 4096); break;
        case 'O': o->json = 1; break;
        case 'U':
            if (hc_parse_size(optarg, &o->kv_budget) || !o->kv_budget)
                hc_die("bad value for --kv-budget: '%s' (bytes, or K/M/G/T)", optarg);
            break;
        case 'k': o->type_k = hc_opt_cache_type("--cache-type-k", optarg); break;
        case 'V': o->type_v = hc_opt_cache_type("--cache-type-v", optarg); break;
        case 'F':
            o->kv_block = (int)hc_opt_int("--block-size", optarg, HC_KV_BLOCK_MIN, HC_KV_BLOCK_MAX);
            if (o->kv_block & (o->kv_block - 1)) hc_die("bad value for --block-size: %s (a power of two)", optarg);
            break;
        case 'e':
            if (strcmp(optarg, "swap") && strcmp(optarg, "recompute"))
                hc_die("bad value for --preemption-mode: '%s' (swap or recompute)", optarg);
            o->recompute = optarg[0] == 'r';
            o->sched_opts = 1;
            break;
        case 'w':
            if (hc_parse_size(optarg, &o->swap_space)) hc_die("bad value for --swap-space: '%s' (bytes, or K/M/G/T)", optarg);
            o->sched_opts = 1;
            break;
        case 'v': o->verbose = o->fo.verbose = 1; break;
        case HC_OPT_VERSION: hc_version();
        case 'h': fputs(usage, stdout); exit(0);
        default: hc_bad_option(c, NULL, argv, longs);
        }
    }
    if (optind < argc) hc_die("unexpected argument '%s' (see --help)", argv[optind]);
    if (o->list_devices) list_devices(o->fo.device);
    check_args(o);
}

/* A context of n_ctx positions per sequence; n_kv_blocks 0: one sequence's;
 * n_kv_warm: hc_ctx_params'. */
static hc_ctx *new_ctx(const hc_model *m, const options *o, hc_ffn *ffn, int n_ctx, int n_kv_blocks, int n_kv_warm)
{
    char err[512];
    hc_ctx_params cp = { .n_ctx = n_ctx, .n_kv_blocks = n_kv_blocks, .n_kv_warm = n_kv_warm, .kv_block = o->kv_block,
                         .n_batch = o->n_batch, .n_threads = o->threads, .type_k = o->type_k, .type_v = o->type_v };
    hc_ffn_attach(ffn, &cp);
    hc_ctx *ctx = hc_ctx_new(m, &cp, err, sizeof err);
    if (!ctx) hc_die("%s", err);
    return ctx;
}

/* The ids of text; one pass for nearly every text (an id per byte plus the
 * specials), a second only when the first's room was short. add_special:
 * BOS and EOS where the vocabulary adds them (tokenizer.ggml.add_bos_token,
 * add_eos_token), as llama.cpp's add_special. */
static int32_t *tokenize(const hc_tokenizer *tok, const char *what, const char *text, size_t len, int add_special,
                         int parse_special, int *n)
{
    int add_bos = add_special && hc_tokenizer_add_bos(tok);
    int add_eos = add_special && hc_tokenizer_add_eos(tok) && hc_tokenizer_eos(tok) >= 0;
    int cap = len < (size_t)(1 << 28) ? (int)len + 16 : 0;
    int32_t *t = malloc(sizeof *t * (size_t)(cap + 2));
    int need = t ? hc_tokenize(tok, text, len, add_bos, parse_special, t, cap) : -1;
    if (need > cap) {
        int32_t *more = realloc(t, sizeof *t * (size_t)(need + 2));
        if (!more || hc_tokenize(tok, text, len, add_bos, parse_special, t = more, need) != need) need = -1;
    }
    if (need < 0) {
        free(t);   /* LeakSanitizer reads hc_die's exit */
        hc_die("%s: cannot tokenize: %s", what, hc_tokenize_error());
    }
    if (add_eos) t[need++] = hc_tokenizer_eos(tok);
    *n = need;
    return t;   /* room for one more id */
}

/* --tokenize: the vocabulary only, no weights loaded. */
static void print_tokens(const options *o)
{
    char err[512];
    gguf_file *f = gguf_open(o->model, err, sizeof err);
    hc_tokenizer *tok = f ? hc_tokenizer_load(f, err, sizeof err) : NULL;
    if (!tok) hc_die("%s", err);
    size_t len = o->prompt_len;
    double t0 = hc_now();
    int n;
    int32_t *ids = tokenize(tok, "prompt", o->prompt, len, 1, 1, &n);
    double dt = hc_now() - t0;
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    fprintf(stderr, "tokenize:   %zu bytes -> %d tokens in %.2f ms (%.2f MB/s)\n", len, n, dt * 1e3,
            (double)len / 1e6 / (dt > 0 ? dt : 1e-9));
    free(ids);
    hc_tokenizer_free(tok);
    gguf_close(f);
}

static void print_piece(const hc_tokenizer *tok, int prev, int id)
{
    char buf[256];
    int n = hc_token_to_piece(tok, prev, id, buf, sizeof buf);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
}

/* The piece of id after prev appended to *buf (*len bytes of *cap). */
static void add_piece(const hc_tokenizer *tok, int prev, int id, char **buf, size_t *len, size_t *cap)
{
    char piece[256];
    int n = hc_token_to_piece(tok, prev, id, piece, sizeof piece);
    if (n <= 0) return;
    if (*len + (size_t)n + 1 > *cap) {
        *cap = (*len + (size_t)n + 1) * 2;
        if (!(*buf = realloc(*buf, *cap))) hc_die("out of memory");
    }
    memcpy(*buf + *len, piece, (size_t)n);
    *len += (size_t)n;
    (*buf)[*len] = 0;
}

/* Mean negative log-likelihood: llama.cpp's perplexity (for a vocabulary that
 * adds BOS, the first token of each window replaced by BOS; positions
 * n_ctx/2 .. n_ctx-2 predict the next token). */
static void perplexity(const hc_model *m, const hc_tokenizer *tok, const options *o, hc_ffn *ffn)
{
    char err[512];
    size_t len;
    char *text = hc_read_file(o->ppl_file, &len, err, sizeof err);
    if (!text) hc_die("%s", err);
    int n_tok, bos = hc_tokenizer_add_bos(tok);
    int32_t *toks = tokenize(tok, o->ppl_file, text, len, 1, 0, &n_tok);
    free(text);
    int n_ctx = hc_window_len(&m->hp, o->n_ctx);
    if (n_ctx < 4) hc_die("-c %d is too small for --perplexity (need 4 or more)", n_ctx);
    if (n_tok < n_ctx) hc_die("%s: %d tokens, need at least %d (one window of -c)", o->ppl_file, n_tok, n_ctx);
    hc_ctx *ctx = new_ctx(m, o, ffn, n_ctx, 0, 0);
    int V = m->hp.n_vocab, n_chunk = n_tok / n_ctx, first = n_ctx / 2;
    float *logits = malloc(sizeof(float) * (size_t)n_ctx * (size_t)V);
    int32_t *win = malloc(sizeof *win * (size_t)n_ctx);
    if (!logits || !win) hc_die("out of memory for %d logits", n_ctx);
    double nll = 0, t0 = hc_now();
    long scored = 0;
    hc_progress pr;
    hc_progress_start(&pr, "perplexity", (uint64_t)n_chunk * (uint64_t)n_ctx, "tokens");
    for (int c = 0; c < n_chunk; c++) {
        const int32_t *w = toks + (size_t)c * n_ctx;
        memcpy(win, w, sizeof *win * (size_t)n_ctx);
        if (bos) win[0] = hc_tokenizer_bos(tok);
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

/* A generation under way: the last token sampled and printed is evaluated
 * only when generation goes on (pending), as llama2.c does. */
typedef struct {
    const hc_tokenizer *tok;
    hc_ctx *ctx;
    hc_sampler *smp;
    float *logits;
    int n_ctx, pos, last, pending;
    int until_full;              /* -n -2: a full context is the end asked for, no warning */
    int n_gen, n_fed;            /* totals for the timing lines */
    double t_gen, t_fed;
} gen_state;

/* Evaluate the pending token and then t[0..n) at the end of the context;
 * 0, or -1 (and a warning) when they do not fit. */
static int gen_feed(gen_state *g, const int32_t *t, int n)
{
    int k = (g->pending >= 0) + n;
    if (g->pos + k > g->n_ctx) {
        fputs("\n", stdout);
        if (!g->until_full) hc_warn("context of %d tokens is full; stopping (raise -c)", g->n_ctx);
        return -1;
    }
    int32_t *all = malloc(sizeof *all * (size_t)k);
    if (!all) hc_die("out of memory");
    if (g->pending >= 0) all[0] = g->pending;
    if (n) memcpy(all + (k - n), t, sizeof *t * (size_t)n);
    if (hc_eval(g->ctx, all, k, g->pos, g->logits, HC_LOGITS_LAST)) hc_die("%s", hc_ctx_error(g->ctx));
    free(all);
    g->pos += k;
    g->pending = -1;
    return 0;
}

/* Sample and print up to n tokens. Stops at an end token ("[end of text]" on
 * stderr, as llama.cpp) and when the context is full (then returns -1). */
static int gen_run(gen_state *g, int n)
{
    int r = 0;
    double t0 = hc_now();
    for (int k = 0; k < n; k++) {
        if (g->pending >= 0 && (r = gen_feed(g, NULL, 0))) break;
        int next = hc_sample(g->smp, g->logits);
        if (hc_tokenizer_is_end(g->tok, next)) {
            hc_stdout_flush();
            fputs("[end of text]\n", stderr);
            break;
        }
        print_piece(g->tok, g->last, next);
        hc_stdout_flush();
        g->n_gen++;
        g->last = g->pending = next;
    }
    g->t_gen += hc_now() - t0;
    return r;
}

/* -i: after each generation read a line, append it, generate again. */
static void interact(gen_state *g, const options *o)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int tty = isatty(STDIN_FILENO);
    for (;;) {
        if (tty) fputs("\n> ", stderr);
        if ((n = getline(&line, &cap, stdin)) <= 0) break;
        if (!tty) fwrite(line, 1, (size_t)n, stdout);   /* a transcript on stdout */
        int nt;
        int32_t *t = tokenize(g->tok, "input", line, (size_t)n, 0, 1, &nt);
        double t0 = hc_now();
        int r = nt ? gen_feed(g, t, nt) : 0;
        g->t_fed += hc_now() - t0;
        if (!r) {   /* a line that does not fit was not evaluated: not counted */
            g->n_fed += nt;
            if (nt) g->last = t[nt - 1];
        }
        free(t);
        if (r || gen_run(g, o->n_predict)) break;
    }
    free(line);
}

static void generate(const hc_model *m, const hc_tokenizer *tok, const options *o, hc_ffn *ffn)
{
    int n_prompt;
    int32_t *prompt = tokenize(tok, "prompt", o->prompt, o->prompt_len, 1, 1, &n_prompt);
    if (n_prompt == 0) hc_die("%s: the vocabulary adds no BOS and the prompt is empty: give one (-p)", o->model);
    int n_ctx = o->n_ctx;
    if (!n_ctx) {
        long want = o->interactive ? m->hp.n_ctx_train : (long)n_prompt + (o->logits ? 0 : o->n_predict);
        n_ctx = want < m->hp.n_ctx_train ? (int)want : m->hp.n_ctx_train;
    }
    if (n_prompt > n_ctx) hc_die("prompt has %d tokens, more than the context of %d (-c)", n_prompt, n_ctx);
    /* the cache's pages for the positions this run surely writes (the prompt, -n tokens) are made
     * now; -i's later turns fill the rest of a context as long as the model's as they come */
    long sure = (long)n_prompt + (o->logits ? 0 : o->n_predict);
    int warm = (int)(((sure < n_ctx ? sure : n_ctx) + o->kv_block - 1) / o->kv_block);
    int V = m->hp.n_vocab;
    gen_state g = { .tok = tok, .ctx = new_ctx(m, o, ffn, n_ctx, 0, warm), .smp = hc_sampler_new(&o->sp, V),
                    .logits = malloc(sizeof(float) * (size_t)V), .n_ctx = n_ctx, .pending = -1,
                    .until_full = o->until_full,
                    .last = prompt[n_prompt - 1] };
    if (!g.logits || !g.smp) hc_die("out of memory");

    double t0 = hc_now();
    gen_feed(&g, prompt, n_prompt);
    g.t_fed = hc_now() - t0;
    g.n_fed = n_prompt;
    if (o->logits) {
        for (int i = 0; i < V; i++) printf("%.9g\n", g.logits[i]);
    } else {
        for (int i = 0; i < n_prompt; i++) print_piece(tok, i ? prompt[i - 1] : -1, prompt[i]);
        hc_stdout_flush();
        if (!gen_run(&g, o->n_predict) && o->interactive) interact(&g, o);
    }
    if (!o->logits && isatty(STDOUT_FILENO)) fputs("\n", stdout);
    fprintf(stderr, "prompt:     %6d tokens in %9.2f ms (%9.1f tok/s)\n", g.n_fed, g.t_fed * 1e3,
            g.n_fed / (g.t_fed > 0 ? g.t_fed : 1e-9));
    if (!o->logits)
        fprintf(stderr, "generation: %6d tokens in %9.2f ms (%9.1f tok/s)\n", g.n_gen, g.t_gen * 1e3,
                g.n_gen / (g.t_gen > 0 ? g.t_gen : 1e-9));
    hc_sampler_free(g.smp);
    free(g.logits);
    free(prompt);
    hc_ctx_free(g.ctx);
}

/* --parallel: each prompt's text (its pieces as the plain run prints them,
 * then the completion's from gen) as the scheduler samples it, written in
 * input order as each is done, with its timing on stderr. */
typedef struct {
    char *text;
    size_t len, cap, gen;
    int32_t last;          /* the last token: the next piece depends on it */
    int n_prompt, n_gen, done;
    enum hc_stop stop;
    double t_first, t_done;
    uint64_t seed;         /* drawn for the line's "seed": -1 */
} par_text;

typedef struct {
    const hc_tokenizer *tok;
    const options *o;
    par_text *t;
    int next, n_ctx, refused;
    double t0;
} par_run;

static void par_token(void *user, int r, int32_t token)
{
    par_run *P = user;
    par_text *t = &P->t[r];
    if (!t->n_gen++) t->t_first = hc_now() - P->t0;
    add_piece(P->tok, t->last, token, &t->text, &t->len, &t->cap);
    t->last = token;
}

static const char *const stop_names[] = { [HC_STOP_EOS] = "eos", [HC_STOP_LENGTH] = "length",
                                          [HC_STOP_CONTEXT] = "context", [HC_STOP_REFUSED] = "refused" };

/* Prompt r's text on stdout (or its JSON object), its timing on stderr. */
static void par_write(par_run *P, int r)
{
    const hc_prompt *p = &P->o->prompts[r];
    par_text *t = &P->t[r];
    char why[160];
    if (t->stop == HC_STOP_REFUSED)
        snprintf(why, sizeof why, t->n_prompt ? "prompt has %d tokens, more than the context of %d (-c)"
                 : "the vocabulary adds no BOS and the prompt is empty", t->n_prompt, P->n_ctx);
    if (P->o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "line", p->line);
        if (!cJSON_AddItemToObject(j, "prompt", hc_json_text(p->text, p->len))) hc_die("out of memory");
        if (t->stop == HC_STOP_REFUSED) {
            cJSON_AddStringToObject(j, "error", why);
        } else {
            cJSON *text = hc_json_text(t->text ? t->text + t->gen : "", t->len - t->gen);   /* no text: len = gen = 0 */
            if (!cJSON_AddItemToObject(j, "completion", text)) hc_die("out of memory");
            if (p->seed_drawn) hc_json_add_u64(j, "seed", t->seed);
            cJSON_AddNumberToObject(j, "tokens_prompt", t->n_prompt);
            cJSON_AddNumberToObject(j, "tokens_generated", t->n_gen);
            cJSON_AddStringToObject(j, "stop", stop_names[t->stop]);
        }
        char *line = cJSON_PrintUnformatted(j);
        if (!line) hc_die("out of memory");
        puts(line);
        free(line);
        cJSON_Delete(j);
    } else if (t->stop != HC_STOP_REFUSED) {
        printf("--- line %d ---\n", p->line);
        if (t->len) fwrite(t->text, 1, t->len, stdout);
        putchar('\n');
    }
    hc_stdout_flush();
    if (t->stop == HC_STOP_REFUSED) {
        hc_warn("%s:%d: %s; refused", P->o->prompt_file, p->line, why);
        P->refused++;
    } else {
        double dt = t->t_done - t->t_first;
        fprintf(stderr, "line %d: %d prompt tokens, %d generated (%s); first token at %.2f ms, done at %.2f ms "
                "(%.1f tok/s)\n", p->line, t->n_prompt, t->n_gen, stop_names[t->stop], t->t_first * 1e3,
                t->t_done * 1e3, t->n_gen > 1 && dt > 0 ? (t->n_gen - 1) / dt : 0.0);
    }
}

static void par_done(void *user, int r, enum hc_stop why)
{
    par_run *P = user;
    P->t[r].stop = why;
    P->t[r].done = 1;
    P->t[r].t_done = hc_now() - P->t0;
    while (P->next < P->o->n_prompts && P->t[P->next].done) par_write(P, P->next++);
}

/* The positions each of --parallel's sequences has: -c, else the model's. */
static int parallel_ctx(const hc_model *m, const options *o) { return o->n_ctx ? o->n_ctx : m->hp.n_ctx_train; }

static void parallel(const hc_model *m, const hc_tokenizer *tok, const options *o, hc_ffn *ffn)
{
    char err[512];
    int n = o->n_prompts, n_ctx = parallel_ctx(m, o);
    const int kv_bytes = hc_kv_bytes(o->type_k, o->type_v);
    int blocks = hc_blocks_pool(&m->hp, o->kv_budget, n_ctx, o->parallel, o->kv_block, kv_bytes, err, sizeof err);
    if (blocks < 0) hc_die("%s: %s", o->model, err);
    hc_request *reqs = calloc((size_t)n, sizeof *reqs);
    par_run P = { .tok = tok, .o = o, .t = calloc((size_t)n, sizeof *P.t), .n_ctx = n_ctx };
    if (!reqs || !P.t) hc_die("out of memory");
    for (int r = 0; r < n; r++) {
        const hc_prompt *p = &o->prompts[r];
        char what[600];
        snprintf(what, sizeof what, "%s:%d", o->prompt_file, p->line);
        int32_t *ids = tokenize(tok, what, p->text, p->len, 1, 1, &reqs[r].n_prompt);
        reqs[r].prompt = ids;
        reqs[r].n_predict = p->n_predict >= 0 ? p->n_predict : o->n_predict;
        reqs[r].sp = o->sp;
        if (p->has_temp) reqs[r].sp.temp = p->temp;
        if (p->has_seed) reqs[r].sp.seed = p->seed;
        par_text *t = &P.t[r];
        if (p->seed_drawn) {   /* as --seed -1, but below 2^53, so that a JSON line can repeat it */
            t->seed = reqs[r].sp.seed = draw_seed(what) >> 11;
            fprintf(stderr, "%s: seed %" PRIu64 " (drawn for \"seed\": -1)\n", what, t->seed);
        }
        t->n_prompt = reqs[r].n_prompt;
        for (int i = 0; i < t->n_prompt; i++) add_piece(tok, i ? ids[i - 1] : -1, ids[i], &t->text, &t->len, &t->cap);
        t->gen = t->len;
        t->last = t->n_prompt ? ids[t->n_prompt - 1] : -1;
    }
    hc_sched_params sp = { o->parallel, n_ctx, blocks, tok, !o->recompute,
                           o->swap_space };
    hc_ctx *ctx = new_ctx(m, o, ffn, n_ctx, blocks, hc_sched_blocks_most(reqs, n, &sp, o->kv_block));
    hc_sched_out out = { par_token, par_done, &P };
    hc_sched_stats st;
    char sz[32];
    P.t0 = hc_now();
    if (hc_sched_run(ctx, reqs, n, &sp, &out, &st, err, sizeof err)) hc_die("%s: %s", o->model, err);
    double dt = hc_now() - P.t0;
    fprintf(stderr, "batch:      %d prompts (%d refused), at most %d at once, %d steps, %d preempted (%d swapped); "
            "KV cache %d blocks of %d positions (%s)\n", n, P.refused, st.most_running, st.steps, st.preempted,
            st.swapped, blocks,
            o->kv_block,
            hc_format_size((uint64_t)blocks * hc_blocks_bytes(&m->hp, o->kv_block, kv_bytes), sz, sizeof sz));
    fprintf(stderr, "prompt:     %6ld tokens (with recomputed ones)\n", st.prompt_rows);
    fprintf(stderr, "generation: %6ld tokens in %9.2f ms (%9.1f tok/s summed, prompts included)\n", st.generated,
            dt * 1e3, st.generated / (dt > 0 ? dt : 1e-9));
    fprintf(stderr, "decode:     %6ld tokens in %9.2f ms (%9.1f tok/s summed), %d steps of only next tokens\n",
            st.decode_tokens, st.t_decode * 1e3, st.decode_tokens / (st.t_decode > 0 ? st.t_decode : 1e-9),
            st.decode_steps);
    for (int r = 0; r < n; r++) {
        free((void *)reqs[r].prompt);
        free(P.t[r].text);
    }
    free(reqs);
    free(P.t);
    hc_ctx_free(ctx);
    if (P.refused) {
        hc_ffn_free(ffn);
        exit(1);
    }
}

/* --reset-gpu-index, as PowerInfer's: run hc-solve (beside this program, else
 * on PATH) for the budget and use the MODEL.generated.gpuidx it writes. */
static void reset_gpu_index(options *o, char *idx, size_t idx_len)
{
    char stats[4096], budget[32], ctx[32], solve[4096], err[512];
    snprintf(idx, idx_len, "%s.generated.gpuidx", o->model);
    snprintf(stats, sizeof stats, o->stats ? "%s" : "%s.stats.gguf", o->stats ? o->stats : o->model);
    uint64_t bytes = o->fo.vram_budget;
    if (!bytes) {
        hc_cl_info d;
        if (hc_cl_choose(o->fo.device, &d, err, sizeof err) < 0)
            hc_die("--reset-gpu-index: no device to take the budget from (%s); give --vram-budget SIZE", err);
        bytes = hc_default_budget(d.mem_size);   /* what the run will place in */
    }
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)bytes);
    snprintf(ctx, sizeof ctx, "%d", o->n_ctx);   /* the run's prices: its KV cache */
    ssize_t n = readlink("/proc/self/exe", solve, sizeof solve - 16);
    char *slash = n > 0 ? memrchr(solve, '/', (size_t)n) : NULL;
    if (slash) strcpy(slash + 1, "hc-solve");
    if (!slash || access(solve, X_OK) != 0) strcpy(solve, "hc-solve");
    char *ctk = o->type_k == GGML_TYPE_F16 ? "f16" : "f32", *ctv = o->type_v == GGML_TYPE_F16 ? "f16" : "f32";
    char *argv[] = { solve, "-m", (char *)o->model, "-s", stats, "--vram-budget", budget, "-o", idx, "-ctk", ctk,
                     "-ctv", ctv, o->n_ctx ? "--ctx" : NULL, ctx, NULL };
    fprintf(stderr, "reset-gpu-index: %s -m %s -s %s --vram-budget %s -o %s -ctk %s -ctv %s%s%s\n", solve, o->model,
            stats, budget, idx, ctk, ctv, o->n_ctx ? " --ctx " : "", o->n_ctx ? ctx : "");
    posix_spawn_file_actions_t fa;   /* its report goes to stderr: stdout is the text */
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawnp(&pid, solve, &fa, NULL, argv, environ), status = 0;
    posix_spawn_file_actions_destroy(&fa);
    if (rc) hc_die("--reset-gpu-index: cannot run %s: %s", solve, strerror(rc));
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) hc_die("--reset-gpu-index: waiting for hc-solve: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        hc_die("--reset-gpu-index: hc-solve failed (its message is above); %s was not made", idx);
    o->fo.gpu_index = idx;
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
    char why[512];
    hc_kernel_describe(why, sizeof why);
    fprintf(stderr, "kernels by type: %s\n", why);
    fprintf(stderr, "KV cache: k %s, v %s (%d bytes a position and layer)\n", ggml_type_name(o->type_k),
            ggml_type_name(o->type_v), hc_kv_bytes(o->type_k, o->type_v) * hp->n_head_kv * hp->head_dim);
}

int main(int argc, char **argv)
{
    hc_prog = "hc-run";
    options o;
    parse_args(argc, argv, &o);
    if (o.tokenize) {
        print_tokens(&o);
        free(o.prompt_buf);
        return 0;
    }
    char err[512];
    double t0 = hc_now();
    hc_model *m = hc_model_load(o.model, err, sizeof err);
    if (!m) hc_die("%s", err);
    hc_tokenizer *tok = hc_model_tokenizer(m, err, sizeof err);
    if (!tok) hc_die("%s", err);   /* err names the file, once */
    if (o.verbose) print_model(m, &o);
    char idx[4096];
    if (o.reset_index) reset_gpu_index(&o, idx, sizeof idx);
    o.fo.n_ctx = o.n_ctx;
    o.fo.kv_bytes = hc_kv_bytes(o.type_k, o.type_v);
    if (o.parallel)   /* the device's share of the cache priced for the largest pool, as hc-solve --ctx */
        o.fo.n_ctx = hc_blocks_most(&m->hp, o.kv_budget, parallel_ctx(m, &o), o.parallel, o.kv_block,
                                    hc_kv_bytes(o.type_k, o.type_v)) * o.kv_block;
    hc_ffn *ffn = hc_ffn_setup(m, &o.fo, stderr, err, sizeof err);
    if (!ffn) hc_die("%s", err);
    int64_t copied = hc_model_copy_weights(m, o.weights_mem, !hc_ffn_is_sparse(ffn), err, sizeof err);
    if (copied < 0) hc_die("%s", err);
    if (o.verbose && m->n_chunked)
        fprintf(stderr, "weights: copied into 2 MiB pages, %d Q4_0/Q8_0 matrices in chunks of 16 blocks (loaded "
                "without permutes or inserts)\n", m->n_chunked);
    else if (o.verbose)
        fprintf(stderr, "weights: %s\n", copied ? "copied into 2 MiB pages" : "in the file mapping");
    fprintf(stderr, "load:       %.2f ms\n", (hc_now() - t0) * 1e3);
    if (o.seed_drawn) fprintf(stderr, "seed:       %" PRIu64 " (drawn for --seed -1)\n", o.sp.seed);
    if (o.ppl_file) perplexity(m, tok, &o, ffn);
    else if (o.parallel) parallel(m, tok, &o, ffn);
    else generate(m, tok, &o, ffn);
    hc_ffn_report(ffn, stderr);
    hc_ffn_free(ffn);
    hc_tokenizer_free(tok);
    hc_model_free(m);
    hc_prompts_free(o.prompts, o.n_prompts);
    free(o.prompt_buf);
    return 0;
}
