/* Command line of `hc-profile predictors` and its per-layer report. */
#include "predictors.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "outputs.h"
#include "ggml_types.h"

static const char usage[] =
    "usage: hc-profile predictors -m MODEL.gguf -f CORPUS.txt -o MODEL.sparse.gguf [options]\n"
    "Trains PowerInfer's per-layer activation predictors (fc2 . relu(fc1 . x), x the\n"
    "residual stream before ffn_norm) on a corpus and writes the model in PowerInfer's\n"
    "sparse GGUF variant (PWRI: ffn_down_t, blk.N.fc1/fc2, powerinfer.sparse_threshold).\n"
    "A neuron is predicted active iff fc2 . relu(fc1 . x) >= powerinfer.sparse_threshold.\n"
    "  -m, --model FILE       dense GGUF model (llama)\n"
    "  -f, --file FILE        corpus (UTF-8 text)\n"
    "  -o, --output FILE      sparse model to write (PWRI)\n"
    "      --rank R           predictor hidden size (default n_embd/4, a multiple of 8)\n"
    "      --rank-auto        per layer, try n_embd/16, /8, /4, /2 and keep the cheapest:\n"
    "                         predictor weights + FFN weights it leaves to compute\n"
    "      --epochs E         passes over the training tokens (default 10)\n"
    "      --batch N          minibatch rows (default 128)\n"
    "      --lr X             Adam step size, cosine-decayed to 0 (default 0.003)\n"
    "      --pos-weight W     loss weight of active targets (default sqrt(inactive/active), >= 1)\n"
    "      --recall R         recall of active neurons each layer's threshold reaches on the\n"
    "                         calibration tokens (default 0.99)\n"
    "      --holdout F        fraction of windows held out: half calibration, half test (default 0.2)\n"
    "      --act-threshold T  a neuron is active when |act(gate)*up| > T (default 0 for ReLU\n"
    "                         models, 0.01 for SiLU models)\n"
    "      --pred-type TYPE   f32 or f16 for fc1/fc2 (default f16 if ffn_up is not F32, else f32)\n"
    "      --mem SIZE         memory for kept samples (default 2G); beyond it each set keeps a\n"
    "                         uniform random subsample of its tokens\n"
    "  -c, --ctx-size N       window length in tokens, BOS included (default 512 or the\n"
    "                         model's context length if smaller)\n"
    "      --tokens N         use the first N corpus tokens (default: all)\n"
    "  -t, --threads N        threads (default: online CPUs); same -t and --seed give the\n"
    "                         same file byte for byte\n"
    "      --seed S           random seed (default 1)\n"
    "      --svg FILE         plot recall, precision, sparsity and predictor size per layer\n"
    "      --version          print the version\n"
    "  -h, --help             this help\n";

/* A float in (lo, hi] (lo_incl: [lo, hi]). */
static float parse_float(const char *opt, const char *s, float lo, float hi, int lo_incl)
{
    char *end;
    float v = strtof(s, &end);
    if (!*s || *end || !(lo_incl ? v >= lo : v > lo) || !(v <= hi))
        hc_die("bad value for %s: '%s' (expected a number in %c%g, %g])", opt, s, lo_incl ? '[' : '(', (double)lo,
               (double)hi);
    return v;
}

static void print_report(const hc_pred_report *r, const char *out)
{
    printf("%s: sparse_threshold %g; %" PRId64 " corpus tokens (%.1f s); per layer kept %" PRId64 " of %" PRId64 " training, %" PRId64
           " of %" PRId64 " calibration, %" PRId64 " of %" PRId64 " test tokens; active |h| > %g; training %.1f s\n",
           out ? out : "(no output)", (double)r->global_threshold, r->n_tokens, r->collect_s, r->n_train, r->seen_train, r->n_calib,
           r->seen_calib, r->n_test, r->seen_test, (double)r->act_threshold, r->train_s);
    printf("layer  rank  recall  precision  pred_sparsity  true_sparsity     params       bytes  threshold    loss  "
           "train_s\n");
    for (int l = 0; l < r->n_layer; l++) {
        const hc_pred_layer *y = &r->layers[l];
        printf("%5d  %4d  %6.4f  %9.4f  %13.4f  %13.4f  %9" PRIu64 "  %10" PRIu64 "  %9.4g  %6.4f  %7.2f\n", l,
               y->rank, y->recall, y->precision, y->pred_sparsity, y->true_sparsity, y->params, y->bytes,
               (double)y->threshold, y->loss, y->train_s);
    }
}

int hc_profile_predictors_main(int argc, char **argv)
{
    enum { O_RANK = 256, O_AUTO, O_EPOCHS, O_BATCH, O_LR, O_PW, O_RECALL, O_HOLD, O_ACT, O_PTYPE, O_MEM, O_TOK,
           O_SEED, O_SVG };
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "file", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' }, { "ctx-size", required_argument, 0, 'c' },
        { "threads", required_argument, 0, 't' }, { "rank", required_argument, 0, O_RANK },
        { "rank-auto", no_argument, 0, O_AUTO }, { "epochs", required_argument, 0, O_EPOCHS },
        { "batch", required_argument, 0, O_BATCH }, { "lr", required_argument, 0, O_LR },
        { "pos-weight", required_argument, 0, O_PW }, { "recall", required_argument, 0, O_RECALL },
        { "holdout", required_argument, 0, O_HOLD }, { "act-threshold", required_argument, 0, O_ACT },
        { "pred-type", required_argument, 0, O_PTYPE }, { "mem", required_argument, 0, O_MEM },
        { "tokens", required_argument, 0, O_TOK }, { "seed", required_argument, 0, O_SEED },
        { "svg", required_argument, 0, O_SVG }, HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    hc_pred_opts o = { .n_threads = hc_default_threads(64), .seed = 1 };
    int type_set = 0, c;
    while ((c = getopt_long(argc, argv, ":m:f:o:c:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'f': o.corpus = optarg; break;
        case 'o': o.output = optarg; break;
        case 'c': o.ctx = (int)hc_opt_int("-c", optarg, 2, 1 << 20); break;
        case 't': o.n_threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case O_RANK: o.rank = (int)hc_opt_int("--rank", optarg, 1, 1 << 16); break;
        case O_AUTO: o.rank_auto = 1; break;
        case O_EPOCHS: o.epochs = (int)hc_opt_int("--epochs", optarg, 1, 100000); break;
        case O_BATCH: o.batch = (int)hc_opt_int("--batch", optarg, 1, 1 << 16); break;
        case O_LR: o.lr = parse_float("--lr", optarg, 0, 1, 0); break;
        case O_PW: o.pos_weight = parse_float("--pos-weight", optarg, 0, 1e6f, 0); break;
        case O_RECALL: o.recall = parse_float("--recall", optarg, 0, 1, 0); break;
        case O_HOLD: o.holdout = parse_float("--holdout", optarg, 0, 0.9f, 0); break;
        case O_ACT: o.act_threshold = parse_float("--act-threshold", optarg, 0, 1e9f, 1); o.act_threshold_set = 1; break;
        case O_PTYPE:
            if (!strcmp(optarg, "f32")) o.pred_type = GGML_TYPE_F32;
            else if (!strcmp(optarg, "f16")) o.pred_type = GGML_TYPE_F16;
            else hc_die("bad value for --pred-type: '%s' (expected f32 or f16)", optarg);
            type_set = 1;
            break;
        case O_MEM:
            if (hc_parse_size(optarg, &o.mem) != 0 || !o.mem) hc_die("bad value for --mem: '%s' (expected a size like 4G)", optarg);
            break;
        case O_TOK: o.max_tokens = hc_opt_int("--tokens", optarg, 1, INT64_MAX); break;
        case O_SEED: o.seed = (uint64_t)hc_opt_int("--seed", optarg, 0, INT64_MAX); break;
        case O_SVG: o.svg = optarg; break;
        case HC_OPT_VERSION: hc_version();
        case 'h': fputs(usage, stdout); return 0;
        default: hc_bad_option(c, "predictors", argv, longs);
        }
    }
    if (optind != argc) hc_die("unexpected argument '%s'; see --help", argv[optind]);
    if (!o.model || !o.corpus) hc_die("need -m MODEL and -f CORPUS; see --help");
    if (!o.output) hc_die("no output file (-o); see --help");
    if (o.rank && o.rank_auto) hc_die("--rank and --rank-auto do not go together");
    hc_check_outputs((const char *[]){ o.model, o.corpus }, 2, (const char *[]){ o.output, o.svg }, 2);
    if (!type_set) {
        /* the model's FFN type decides: F32 models get F32 predictors */
        char err[512];
        gguf_file *f = gguf_open(o.model, err, sizeof err);
        if (!f) hc_die("%s", err);
        const gguf_tensor *t = gguf_get_tensor(f, "blk.0.ffn_up.weight");
        o.pred_type = t && t->type == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
        gguf_close(f);
    }
    char err[512];
    hc_pred_report rep;
    int rc = hc_predictors_run(&o, &rep, err, sizeof err);
    if (rc != 0) {
        free(rep.layers);
        hc_die("%s", err);
    }
    print_report(&rep, o.output);
    free(rep.layers);
    return 0;
}
