/* hc-convert: training-world checkpoints (llama2.c, Hugging Face, PowerInfer
 * predictors) and synthetic models -> GGUF. This file is the command line:
 * each subcommand parses its options, checks how they go together, then runs
 * the converter of its convert_*.c file (convert.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outputs.h"
#include "convert.h"
#include "ggml_types.h"

#define MAX_COUNT (1L << 30) /* largest --dim, --n-ff, ... of synth */

/* Every subcommand ends the same way: run its converter, or die with its message. */
static int finish(int rc, const char *err)
{
    if (rc) hc_die("%s", err);
    return 0;
}

/* ---------------------------------------------------------------- llama2c */

static const char llama2c_usage[] =
    "usage: hc-convert llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf [--ctx N]\n"
    "\n"
    "Convert a llama2.c checkpoint (legacy or version 1, float32) and its tokenizer.bin\n"
    "into a llama GGUF laid out as llama.cpp's convert-llama2c-to-ggml writes it.\n"
    "\n"
    "  -o, --output FILE   output GGUF (written atomically)\n"
    "      --ctx N         llama.context_length (default: the checkpoint's seq_len;\n"
    "                      llama.cpp's converter writes its own default, e.g. 2048)\n"
    "      --version       print the version\n"
    "  -h, --help          this help\n";

/* 1 when --help was asked for (printed), else 0 with o filled from argv. */
static int llama2c_parse(int argc, char **argv, cv_llama2c_opts *o)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'}, {"ctx", required_argument, 0, 'c'},
        HC_LONG_VERSION, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'c': o->ctx = (long)hc_opt_int("--ctx", optarg, 1, INT32_MAX); break;
        case HC_OPT_VERSION: hc_version();
        case 'h': fputs(llama2c_usage, stdout); return 1;
        default: hc_bad_option(c, "llama2c", argv, opts);
        }
    }
    if (argc - optind != 2 || !o->out)
        hc_die("llama2c: needs CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf (see --help)");
    o->checkpoint = argv[optind];
    o->tokenizer = argv[optind + 1];
    return 0;
}

static int llama2c_run(int argc, char **argv)
{
    cv_llama2c_opts o = {0};
    if (llama2c_parse(argc, argv, &o)) return 0;
    hc_check_outputs((const char *[]){ o.checkpoint, o.tokenizer }, 2, &o.out, 1);
    char err[512];
    return finish(cv_convert_llama2c(&o, err, sizeof err), err);
}

/* ---------------------------------------------------------------- hf */

static const char hf_usage[] =
    "usage: hc-convert hf DIR -o OUT.gguf [--outtype f32|f16|bf16] [--predictors DIR]\n"
    "                     [--relu-arch | --llama-arch]\n"
    "\n"
    "Convert a Hugging Face checkpoint directory (config.json, model.safetensors\n"
    "or sharded model-*.safetensors + model.safetensors.index.json, tokenizer.model\n"
    "and/or tokenizer.json) into a GGUF: Llama 1/2/3, Mistral and ProSparse (llama),\n"
    "Qwen2 (qwen2), Bamboo (bamboo), OPT (opt), Falcon (falcon).\n"
    "\n"
    "  -o, --output FILE       output GGUF (written atomically)\n"
    "      --outtype TYPE      f32, f16 (default) or bf16 for 2-D weights; 1-D stay f32\n"
    "      --predictors DIR    PowerInfer predictors (model_N.safetensors with fc1.weight,\n"
    "                          fc2.weight; optional config.json with sparse_threshold):\n"
    "                          write PowerInfer's sparse GGUF (PWRI) with ffn_down_t\n"
    "      --relu-arch         a dense ReLU (or FATReLU) llama is written as architecture\n"
    "                          llama-relu (the default), which llama.cpp and PowerInfer\n"
    "                          refuse instead of running it with SiLU; hotcold runs it\n"
    "                          as llama; this option refuses any other model\n"
    "      --llama-arch        write a dense ReLU llama as architecture llama, as\n"
    "                          before (llama.cpp and PowerInfer then run it with SiLU)\n"
    "      --version           print the version\n"
    "  -h, --help              this help\n";

static int hf_parse(int argc, char **argv, cv_hf_opts *o)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'}, {"outtype", required_argument, 0, 't'},
        {"predictors", required_argument, 0, 'p'}, {"relu-arch", no_argument, 0, 'r'},
        {"llama-arch", no_argument, 0, 'l'}, HC_LONG_VERSION, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'p': o->predictors = optarg; break;
        case 'r': o->relu_arch = 1; break;
        case 'l': o->llama_arch = 1; break;
        case 't':
            if (!strcmp(optarg, "f32")) o->type = GGML_TYPE_F32;
            else if (!strcmp(optarg, "f16")) o->type = GGML_TYPE_F16;
            else if (!strcmp(optarg, "bf16")) o->type = GGML_TYPE_BF16;
            else hc_die("bad value for --outtype: '%s' (expected f32, f16 or bf16)", optarg);
            break;
        case HC_OPT_VERSION: hc_version();
        case 'h': fputs(hf_usage, stdout); return 1;
        default: hc_bad_option(c, "hf", argv, opts);
        }
    }
    if (argc - optind != 1 || !o->out) hc_die("hf: needs DIR -o OUT.gguf (see --help)");
    if ((o->relu_arch || o->llama_arch) && o->predictors)
        hc_die("hf: --%s is for dense files; PowerInfer runs the sparse file (--predictors) as ReLU",
               o->relu_arch ? "relu-arch" : "llama-arch");
    if (o->relu_arch && o->llama_arch) hc_die("hf: --relu-arch and --llama-arch do not go together");
    o->dir = argv[optind];
    return 0;
}

static int hf_run(int argc, char **argv)
{
    cv_hf_opts o = {.type = GGML_TYPE_F16};
    if (hf_parse(argc, argv, &o)) return 0;
    hc_check_outputs((const char *[]){ o.dir, o.predictors }, 2, &o.out, 1);
    char err[512];
    return finish(cv_convert_hf(&o, err, sizeof err), err);
}

/* ---------------------------------------------------------------- synth */

static const char synth_usage[] =
    "usage: hc-convert synth -o OUT.gguf [options]\n"
    "\n"
    "Write a random, well-formed GGUF (deterministic from --seed).\n"
    "\n"
    "  -o, --output FILE     output GGUF (written atomically)\n"
    "      --dim N           embedding length (default 64)\n"
    "      --n-ff N          FFN neurons per layer (default 256)\n"
    "      --layers N        blocks (default 2)\n"
    "      --heads N         attention heads (default 4)\n"
    "      --kv-heads N      KV heads (default: --heads)\n"
    "      --vocab N         vocabulary size, >= 259 (default 512)\n"
    "      --ctx N           context length (default 256)\n"
    "      --arch NAME       llama (default), qwen2, bamboo, opt or falcon: that family's\n"
    "                        tensors (biases zero, norms one); the hot set is planted in\n"
    "                        the gate, or in up for opt/falcon (no gate)\n"
    "      --act relu|silu   FFN activation (default relu)\n"
    "      --type f32|f16    weight type of 2-D tensors (default f32)\n"
    "      --seed N          random seed (default 1)\n"
    "      --hot-fraction F  plant a hot set: the top F of each layer's neurons fire on\n"
    "                        most tokens (0 < F <= 1; default: nothing planted)\n"
    "      --hot-skew S      firing rate of the neuron of rank k: 0.9 (1 + (k-1)/H)^-S,\n"
    "                        H = F n_ff (default 1)\n"
    "      --active-fraction P  plant uniform firing instead: every neuron fires on about\n"
    "                        P of the tokens (0 < P < 1; not with --hot-fraction)\n"
    "      --gate-rank K     gate rows of rank K (1 <= K <= dim; default: full rank): which\n"
    "                        neurons fire is then predictable from K + 1 numbers of the\n"
    "                        input, as predictors assume (up rows for opt/falcon)\n"
    "      --version         print the version\n"
    "  -h, --help            this help\n";

enum { O_DIM = 256, O_FF, O_LAYERS, O_HEADS, O_KV, O_VOCAB, O_CTX, O_ACT, O_TYPE, O_SEED, O_HOT, O_ARCH, O_SKEW, O_ACTIVE, O_RANK };

/* --arch: one of the families cv_convert_synth writes. */
static const char *synth_arch(const char *name)
{
    static const char *const archs[] = { "llama", "qwen2", "bamboo", "opt", "falcon" };
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(name, archs[i])) return archs[i];
    hc_die("bad value for --arch: '%s' (expected llama, qwen2, bamboo, opt or falcon)", name);
}

/* The value of synth's option c (not -o or -h) into o. */
static void synth_option(int c, const char *v, cv_synth_opts *o)
{
    char *end;
    switch (c) {
    case O_DIM: o->dim = (long)hc_opt_int("--dim", v, 2, MAX_COUNT); break;
    case O_FF: o->n_ff = (long)hc_opt_int("--n-ff", v, 1, MAX_COUNT); break;
    case O_LAYERS: o->layers = (long)hc_opt_int("--layers", v, 1, MAX_COUNT); break;
    case O_HEADS: o->heads = (long)hc_opt_int("--heads", v, 1, MAX_COUNT); break;
    case O_KV: o->kv_heads = (long)hc_opt_int("--kv-heads", v, 1, MAX_COUNT); break;
    case O_VOCAB: o->vocab = (long)hc_opt_int("--vocab", v, 259, MAX_COUNT); break;
    case O_CTX: o->ctx = (long)hc_opt_int("--ctx", v, 1, MAX_COUNT); break;
    case O_ACT:
        if (strcmp(v, "relu") && strcmp(v, "silu")) hc_die("bad value for --act: '%s' (expected relu or silu)", v);
        o->relu = !strcmp(v, "relu");
        break;
    case O_TYPE:
        if (!strcmp(v, "f32")) o->type = GGML_TYPE_F32;
        else if (!strcmp(v, "f16")) o->type = GGML_TYPE_F16;
        else hc_die("bad value for --type: '%s' (expected f32 or f16)", v);
        break;
    case O_SEED: o->seed = hc_opt_seed("--seed", v); break;
    case O_HOT:
        o->hot_fraction = strtod(v, &end);
        if (*end || !(o->hot_fraction > 0 && o->hot_fraction <= 1))
            hc_die("bad value for --hot-fraction: '%s' (expected a number in (0, 1])", v);
        break;
    case O_ARCH: o->arch = synth_arch(v); break;
    case O_SKEW:
        o->hot_skew = strtod(v, &end);
        if (*end || !(o->hot_skew > 0 && o->hot_skew <= 16))
            hc_die("bad value for --hot-skew: '%s' (expected a number in (0, 16])", v);
        break;
    case O_ACTIVE:
        o->active_fraction = strtod(v, &end);
        if (*end || !(o->active_fraction > 0 && o->active_fraction < 1))
            hc_die("bad value for --active-fraction: '%s' (expected a number in (0, 1))", v);
        break;
    case O_RANK: o->gate_rank = (long)hc_opt_int("--gate-rank", v, 1, MAX_COUNT); break;
    }
}

/* 1 when --help was asked for (printed), else 0 with o filled from argv;
 * *have_skew tells whether --hot-skew was given. */
static int synth_parse(int argc, char **argv, cv_synth_opts *o, int *have_skew)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'}, {"dim", required_argument, 0, O_DIM},
        {"n-ff", required_argument, 0, O_FF}, {"layers", required_argument, 0, O_LAYERS},
        {"heads", required_argument, 0, O_HEADS}, {"kv-heads", required_argument, 0, O_KV},
        {"vocab", required_argument, 0, O_VOCAB}, {"ctx", required_argument, 0, O_CTX},
        {"act", required_argument, 0, O_ACT}, {"type", required_argument, 0, O_TYPE},
        {"seed", required_argument, 0, O_SEED}, {"hot-fraction", required_argument, 0, O_HOT},
        {"hot-skew", required_argument, 0, O_SKEW}, {"arch", required_argument, 0, O_ARCH},
        {"active-fraction", required_argument, 0, O_ACTIVE}, {"gate-rank", required_argument, 0, O_RANK}, HC_LONG_VERSION,
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        if (c == 'o') o->out = optarg;
        else if (c == 'h') { fputs(synth_usage, stdout); return 1; }
        else if (c == HC_OPT_VERSION) hc_version();
        else if (c >= O_DIM && c <= O_RANK) synth_option(c, optarg, o);
        else hc_bad_option(c, "synth", argv, opts);
        *have_skew |= c == O_SKEW;
    }
    return 0;
}

static void synth_validate(int argc, const cv_synth_opts *o, int have_skew)
{
    if (argc != optind || !o->out) hc_die("synth: needs -o OUT.gguf and no other arguments (see --help)");
    if (have_skew && !o->hot_fraction) hc_die("--hot-skew needs --hot-fraction");
    if (o->active_fraction > 0 && o->hot_fraction > 0) hc_die("--active-fraction and --hot-fraction exclude each other");
    if (o->gate_rank > o->dim) hc_die("bad value for --gate-rank: %ld (expected at most --dim, %ld)", o->gate_rank, o->dim);
}

static int synth_run(int argc, char **argv)
{
    cv_synth_opts o = {
        .dim = 64, .n_ff = 256, .layers = 2, .heads = 4, .vocab = 512, .ctx = 256,
        .relu = 1, .type = GGML_TYPE_F32, .seed = 1, .hot_skew = 1, .arch = "llama",
    };
    int have_skew = 0;
    if (synth_parse(argc, argv, &o, &have_skew)) return 0;
    synth_validate(argc, &o, have_skew);
    hc_check_outputs(NULL, 0, &o.out, 1);
    char err[512];
    return finish(cv_convert_synth(&o, err, sizeof err), err);
}

/* ---------------------------------------------------------------- main */

static const hc_command commands[] = {
    {"llama2c", llama2c_run,
     "  llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf [--ctx N]\n"
     "        llama2.c checkpoint (legacy or version 1) -> llama GGUF\n"},
    {"hf", hf_run,
     "  hf DIR -o OUT.gguf [--outtype f32|f16|bf16] [--predictors DIR] [--relu-arch | --llama-arch]\n"
     "        Hugging Face directory (safetensors) of a supported family -> GGUF; with\n"
     "        --predictors, PowerInfer's sparse GGUF (PWRI) with predictor tensors\n"},
    {"synth", synth_run,
     "  synth -o OUT.gguf [--dim N --n-ff N --layers N --heads N --kv-heads N --vocab N\n"
     "        --ctx N --act relu|silu --type f32|f16 --seed N --hot-fraction F --hot-skew S\n"
     "        --arch NAME] random well-formed GGUF of a family, optionally with a planted\n"
     "        hot-neuron set\n"},
    {NULL, NULL, NULL},
};

static const char usage_head[] =
    "usage: hc-convert COMMAND [options]   (hc-convert COMMAND --help for details)\n"
    "\n";
static const char usage_tail[] =
    "\n"
    "  -h, --help   this help\n"
    "  --version    print the version\n";

int main(int argc, char **argv)
{
    hc_prog = "hc-convert";
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        hc_command_usage(argc < 2 ? stderr : stdout, usage_head, commands, usage_tail);
        return argc < 2;
    }
    if (!strcmp(argv[1], "--version")) hc_version();
    const hc_command *cmd = hc_command_find(commands, argv[1]);
    if (!cmd) hc_die("unknown command '%s' (llama2c, hf or synth; see --help)", argv[1]);
    return cmd->run(argc - 1, argv + 1);
}
