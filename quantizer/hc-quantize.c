/* hc-quantize IN OUT TYPE: F32/F16/BF16 models to Q8_0/Q4_0 (bit-identical
 * to ggml), F16, BF16 or F32, with llama-quantize's tensor rules; TYPE GPTQ
 * hands over to the GPTQ code (gptq.h). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "cli.h"
#include "model_check.h"
#include "outputs.h"
#include "gptq.h"
#include "quantize.h"

static void usage(FILE *fp)
{
    fprintf(fp,
        "usage: hc-quantize [options] IN.gguf OUT.gguf TYPE\n"
        "\n"
        "Quantize a GGUF model as llama-quantize does: Q8_0 and Q4_0 are bit-identical\n"
        "to ggml's reference quantizers. TYPE (case-insensitive): Q8_0, Q4_0, F16, BF16,\n"
        "F32, or GPTQ. Only 2-D+ '*weight' tensors other than norms are converted;\n"
        "rows that are not a multiple of 32 stay 16-bit.\n"
        "\n"
        "  -t, --threads N               threads (default: all CPUs); output is the same for any N\n"
        "      --allow-requantize        allow converting tensors that are already quantized\n"
        "      --pure                    no mixture rules: every eligible tensor becomes TYPE\n"
        "      --output-tensor-type T    type of output.weight\n"
        "      --token-embedding-type T  type of token_embd.weight\n"
        "      --powerinfer              PWRI files: ffn_down_t stays F16 unless TYPE is Q4_0 (the\n"
        "                                types PowerInfer's down kernel runs)\n"
        "  -q, --quiet                   print nothing but errors\n"
        "  -v, --verbose                 print a line per tensor and the totals even when stdout\n"
        "                                is not a terminal (on a terminal that is the default)\n"
        "      --version                 print the version\n"
        "  -h, --help                    this help\n"
        "\n"
        "GPTQ options (TYPE GPTQ):\n"
        "      --calib FILE              calibration text\n"
        "      --group-size N            columns per quantization group (default 128; 32 with --export)\n"
        "      --act-order               quantize columns in order of decreasing Hessian diagonal\n"
        "                                (static groups: g_idx stays k / group size)\n"
        "      --sym | --asym            symmetric or asymmetric (default) grid; --export implies one\n"
        "      --damp F                  damping, fraction of the mean Hessian diagonal (default 0.01)\n"
        "      --calib-tokens N          calibration tokens (default 4096)\n"
        "      --ctx N                   tokens per calibration sequence (default 256)\n"
        "      --export q4_0|q4_1        write ggml Q4_0 (sym) / Q4_1 (asym) blocks instead of the\n"
        "                                native layout (<name>.qweight/.scales/.qzeros[/.g_idx])\n"
        "      --rtn                     round to nearest on the same grid, no error feedback (baseline)\n");
}

/* A type the plain quantizer writes, by name; -1 otherwise. */
static int target_type(const char *name)
{
    int t = ggml_type_from_name(name);
    return hc_ftype_of((uint32_t)t) >= 0 && t != GGML_TYPE_Q4_1 ? t : -1;
}

enum {
    OPT_ALLOW_REQ = 256, OPT_PURE, OPT_OUT_TYPE, OPT_EMB_TYPE, OPT_POWERINFER,
    OPT_CALIB, OPT_GROUP, OPT_ACT_ORDER, OPT_SYM, OPT_ASYM, OPT_DAMP, OPT_CALIB_TOKENS, OPT_CTX, OPT_EXPORT, OPT_RTN,
};

/* The value of option c (not -h) into o or g. Returns the option's name when
 * it is a GPTQ one (for the error when TYPE is not GPTQ), else NULL. */
static const char *option(int c, const char *v, hc_quant_opts *o, hc_gptq_opts *g)
{
    switch (c) {
    case 't': o->nthreads = (int)hc_opt_int("-t", v, 1, 256); return NULL;
    case 'q': o->quiet = 1; return NULL;
    case OPT_ALLOW_REQ: o->allow_requantize = 1; return NULL;
    case OPT_PURE: o->pure = 1; return NULL;
    case OPT_POWERINFER: o->powerinfer = 1; return NULL;
    case OPT_OUT_TYPE:
    case OPT_EMB_TYPE: {
        int t = target_type(v);
        if (t < 0) hc_die("%s: unknown tensor type (expected Q8_0, Q4_0, F16, BF16 or F32)", v);
        *(c == OPT_OUT_TYPE ? &o->output_type : &o->token_embd_type) = (uint32_t)t;
        return NULL;
    }
    case OPT_CALIB: g->calib = v; return "--calib";
    case OPT_GROUP: g->group_size = (int)hc_opt_int("--group-size", v, 1, INT_MAX); return "--group-size";
    case OPT_ACT_ORDER: g->act_order = 1; return "--act-order";
    case OPT_SYM: g->sym = 1; return "--sym";
    case OPT_ASYM: g->sym = 0; return "--asym";
    case OPT_DAMP: {
        char *end;
        g->damp = strtof(v, &end);
        if (!*v || *end || !(g->damp >= 0.0f && g->damp < 1.0f))
            hc_die("bad value for --damp: '%s' (expected a number in [0, 1))", v);
        return "--damp";
    }
    case OPT_CALIB_TOKENS: g->calib_tokens = (int)hc_opt_int("--calib-tokens", v, 1, INT_MAX); return "--calib-tokens";
    case OPT_CTX: g->ctx = (int)hc_opt_int("--ctx", v, 1, INT_MAX); return "--ctx";
    case OPT_EXPORT:
        if (strcasecmp(v, "q4_0") != 0 && strcasecmp(v, "q4_1") != 0)
            hc_die("bad value for --export: '%s' (expected q4_0 or q4_1)", v);
        g->export_type = (uint32_t)ggml_type_from_name(v);
        return "--export";
    case OPT_RTN: g->rtn = 1; return "--rtn";
    }
    return NULL;
}

/* 1 when --help was asked for (printed), else 0 with o and g filled from the
 * options; *gptq_opt: the last GPTQ option seen (NULL: none); *verbose: -v. */
static int parse(int argc, char **argv, hc_quant_opts *o, hc_gptq_opts *g, const char **gptq_opt, int *verbose)
{
    static const struct option longopts[] = {
        { "threads", required_argument, NULL, 't' },
        { "allow-requantize", no_argument, NULL, OPT_ALLOW_REQ },
        { "pure", no_argument, NULL, OPT_PURE },
        { "output-tensor-type", required_argument, NULL, OPT_OUT_TYPE },
        { "token-embedding-type", required_argument, NULL, OPT_EMB_TYPE },
        { "powerinfer", no_argument, NULL, OPT_POWERINFER },
        { "quiet", no_argument, NULL, 'q' }, { "verbose", no_argument, NULL, 'v' },
        HC_LONG_VERSION, { "help", no_argument, NULL, 'h' },
        { "calib", required_argument, NULL, OPT_CALIB },
        { "group-size", required_argument, NULL, OPT_GROUP },
        { "act-order", no_argument, NULL, OPT_ACT_ORDER },
        { "sym", no_argument, NULL, OPT_SYM },
        { "asym", no_argument, NULL, OPT_ASYM },
        { "damp", required_argument, NULL, OPT_DAMP },
        { "calib-tokens", required_argument, NULL, OPT_CALIB_TOKENS },
        { "ctx", required_argument, NULL, OPT_CTX },
        { "export", required_argument, NULL, OPT_EXPORT },
        { "rtn", no_argument, NULL, OPT_RTN },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":t:qvh", longopts, NULL)) != -1) {
        if (c == 'h') { usage(stdout); return 1; }
        if (c == HC_OPT_VERSION) hc_version();
        if (c == 'v') { *verbose = 1; continue; }
        if (c == '?' || c == ':') hc_bad_option(c, NULL, argv, longopts);
        const char *name = option(c, optarg, o, g);
        if (name) *gptq_opt = name;
    }
    return 0;
}

/* IN OUT TYPE into o; returns 1 for TYPE GPTQ, else 0 with o->type set. */
static int validate(int argc, char **argv, hc_quant_opts *o, const char *gptq_opt)
{
    if (argc - optind != 3) {
        usage(stderr);
        exit(1);
    }
    o->in = argv[optind];
    o->out = argv[optind + 1];
    const char *type = argv[optind + 2];
    if (strcasecmp(type, "GPTQ") == 0) return 1;
    int t = target_type(type);
    if (t < 0)
        hc_die("%s: unknown type (expected Q8_0, Q4_0, F16, BF16, F32 or GPTQ)", type);
    if (gptq_opt)
        hc_die("%s: only applies to TYPE GPTQ", gptq_opt);
    o->type = (uint32_t)t;
    return 0;
}

int main(int argc, char **argv)
{
    hc_prog = "hc-quantize";
    hc_quant_opts o = { .output_type = HC_TYPE_DEFAULT, .token_embd_type = HC_TYPE_DEFAULT };
    hc_gptq_opts g = { .sym = -1, .damp = 0.01f, .calib_tokens = 4096, .ctx = 256,
                       .export_type = HC_TYPE_DEFAULT };
    const char *gptq_opt = NULL;
    int verbose = 0;
    o.nthreads = hc_default_threads(INT_MAX);
    o.quiet = -1;
    if (parse(argc, argv, &o, &g, &gptq_opt, &verbose)) return 0;
    /* as llama-quantize, a line per tensor; but only for a person watching */
    if (o.quiet < 0) o.quiet = !verbose && !isatty(STDOUT_FILENO);
    int gptq = validate(argc, argv, &o, gptq_opt);
    hc_check_outputs((const char *[]){ o.in, g.calib }, 2, &o.out, 1);
    char err[1024];
    /* what hc-run would refuse is not quantized (GPTQ loads the model to calibrate: the same checks) */
    if (!gptq && hc_model_check(o.in, err, sizeof err) != 0) hc_die("%s", err);
    int rc = gptq ? hc_gptq_quantize(&o, &g, err, sizeof err) : hc_quantize_model(&o, NULL, err, sizeof err);
    if (rc != 0) hc_die("%s", err);
    return 0;
}
