/* hc-profile: per-neuron FFN activation statistics (profile a corpus, merge
 * shards, import PowerInfer's activation files, show a summary) and
 * PowerInfer's activation predictors, and the calibration of sparsity
 * thresholds. This file is the command line: each
 * subcommand parses its options, checks them, and runs the library's
 * function (profile.h, predictors.h, calibrate.h). */
#include <cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "cli.h"
#include "outputs.h"
#include "ggml_types.h"
#include "predictors.h"
#include "profile.h"
#include "sparse.h"

/* The usage: this head, each subcommand's line (commands[] below), the tail. */
static const char usage_head[] = "usage: hc-profile -m MODEL.gguf -f CORPUS.txt -o STATS.gguf [options]\n";
static const char usage_tail[] =
    "Profiling counts, per layer and FFN neuron, the corpus tokens on which the\n"
    "neuron is active: |h| > T with h = act(gate)*up, the input of ffn_down.\n"
    "  -m, --model FILE     GGUF model\n"
    "  -f, --file FILE      corpus (UTF-8 text)\n"
    "  -o, --output FILE    statistics GGUF to write\n"
    "  -c, --ctx-size N     window length in tokens, BOS included (default: 512 or\n"
    "                       the model's context length if smaller)\n"
    "      --tokens N       use the first N corpus tokens (default: all)\n"
    "  -t, --threads N      threads (default: online CPUs); results do not depend on it\n"
    "      --threshold T    active means |h| > T (default 0 for ReLU and calibrated\n"
    "                       models, 0.01 for SiLU)\n"
    "      --shard I/N      evaluate windows w with w % N == I (0 <= I < N); merging\n"
    "                       all N shards gives exactly the single-run file\n"
    "merge:             add statistics of the same model, threshold and ctx\n"
    "import-powerinfer: DIR/activation_{0..L-1}.pt (torch.save 1-D count tensors);\n"
    "                   -m records and checks the model identity; --tokens N records\n"
    "                   N tokens seen (default: the largest count)\n"
    "show:              per layer: neurons, mean activation rate, fraction of neurons\n"
    "                   (hottest first) covering 80/90/99% of activations\n"
    "      --svg FILE   plot the sorted activation-frequency curves (log-log)\n"
    "      --json       print the summary as JSON\n"
    "      --version        print the version\n"
    "  -h, --help           this help\n";

static void usage(void);

static void need_output(const char *out)
{
    if (!out) hc_die("no output file (-o; see --help)");
}

static void write_stats(const hc_stats *s, const char *path)
{
    char err[512];
    if (hc_stats_write(s, path, err, sizeof err) != 0) hc_die("%s", err);
}

static int cmd_merge(int argc, char **argv)
{
    static const struct option longs[] = { { "output", required_argument, 0, 'o' }, HC_LONG_VERSION,
                                           { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    const char *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else if (c == 'h') { usage(); return 0; }
        else if (c == HC_OPT_VERSION) hc_version();
        else hc_bad_option(c, "merge", argv, longs);
    }
    need_output(out);
    int n = argc - optind;
    if (n < 1) hc_die("merge: no input files");
    hc_check_outputs((const char *const *)argv + optind, (size_t)n, &out, 1);
    hc_stats **in = calloc((size_t)n, sizeof *in);
    if (!in) hc_die("out of memory");
    char err[512];
    for (int k = 0; k < n; k++)
        if (!(in[k] = hc_stats_read(argv[optind + k], err, sizeof err))) hc_die("%s", err);
    hc_stats *s = hc_stats_merge(in, (const char *const *)argv + optind, n, err, sizeof err);
    if (!s) hc_die("%s", err);
    write_stats(s, out);
    for (int k = 0; k < n; k++) hc_stats_free(in[k]);
    free(in);
    hc_stats_free(s);
    return 0;
}

static int cmd_import(int argc, char **argv)
{
    static const struct option longs[] = { { "output", required_argument, 0, 'o' },
                                           { "model", required_argument, 0, 'm' },
                                           { "tokens", required_argument, 0, 'N' },
                                           HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    const char *out = NULL, *model = NULL;
    uint64_t n_tokens = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:m:h", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'm': model = optarg; break;
        case 'N': n_tokens = (uint64_t)hc_opt_int("--tokens", optarg, 1, INT64_MAX); break;
        case HC_OPT_VERSION: hc_version();
        case 'h': usage(); return 0;
        default: hc_bad_option(c, "import-powerinfer", argv, longs);
        }
    }
    need_output(out);
    if (argc - optind != 1) hc_die("import-powerinfer: expected one directory");
    hc_check_outputs((const char *[]){ argv[optind], model }, 2, &out, 1);
    char err[512];
    hc_stats *s = hc_import_powerinfer(argv[optind], model, n_tokens, err, sizeof err);
    if (!s) hc_die("%s", err);
    write_stats(s, out);
    hc_stats_free(s);
    return 0;
}

/* The shortest decimal that reads back as the same float (0.01f -> 0.01). */
static double short_float(float f)
{
    char buf[32];
    for (int prec = 6;; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f || prec == 9) return strtod(buf, NULL);
    }
}

static void show_json(const char *path, const hc_stats *s, const hc_layer_summary *ls)
{
    char hash[17];
    snprintf(hash, sizeof hash, "%016" PRIx64, s->ffn_hash);
    cJSON *o = cJSON_CreateObject(), *layers = cJSON_CreateArray();
    hc_json_add_text(o, "file", path);
    hc_json_add_text(o, "arch", s->arch);
    cJSON_AddNumberToObject(o, "n_layer", s->n_layer);
    cJSON_AddNumberToObject(o, "n_ff", s->n_ff);
    cJSON_AddNumberToObject(o, "n_embd", s->n_embd);
    hc_json_add_text(o, "activation", s->activation);
    cJSON_AddNumberToObject(o, "threshold", short_float(s->threshold));
    hc_json_add_u64(o, "n_tokens", s->n_tokens);
    cJSON_AddNumberToObject(o, "ctx", s->ctx);
    cJSON_AddStringToObject(o, "ffn_hash", hash);
    hc_json_add_text(o, "corpus", s->corpus);
    for (uint32_t l = 0; l < s->n_layer; l++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "neurons", ls[l].neurons);
        cJSON_AddNumberToObject(e, "mean_rate", ls[l].mean_rate);
        for (int p = 0; p < 3; p++) {
            char key[16];
            snprintf(key, sizeof key, "cover%d", hc_cover_pct[p]);
            cJSON_AddNumberToObject(e, key, ls[l].cover[p]);
        }
        cJSON_AddItemToArray(layers, e);
    }
    cJSON_AddItemToObject(o, "layers", layers);
    hc_json_print(o);
}

static int cmd_show(int argc, char **argv)
{
    static const struct option longs[] = { { "svg", required_argument, 0, 'S' }, { "json", no_argument, 0, 'J' },
                                           HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    const char *svg = NULL;
    int json = 0, c;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        switch (c) {
        case 'S': svg = optarg; break;
        case 'J': json = 1; break;
        case HC_OPT_VERSION: hc_version();
        case 'h': usage(); return 0;
        default: hc_bad_option(c, "show", argv, longs);
        }
    }
    if (argc - optind != 1) hc_die("show: expected one statistics file");
    const char *path = argv[optind];
    hc_check_outputs(&path, 1, &svg, 1);
    char err[512];
    hc_stats *s = hc_stats_read(path, err, sizeof err);
    if (!s) hc_die("%s", err);
    hc_layer_summary *ls = calloc(s->n_layer, sizeof *ls);
    if (!ls) hc_die("out of memory");
    for (uint32_t l = 0; l < s->n_layer; l++) hc_stats_summarize(s, l, &ls[l]);
    if (svg) {
        char title[512];
        snprintf(title, sizeof title, "%s: %s, %" PRIu64 " tokens, %s |h| > %g", path, s->arch, s->n_tokens,
                 s->activation, (double)s->threshold);
        if (hc_stats_svg(s, title, svg, err, sizeof err) != 0) hc_die("%s", err);
    }
    if (json) {
        show_json(path, s, ls);
    } else {
        printf("%s: %s, %" PRIu32 " layers x %" PRIu32 " neurons, %s |h| > %g, %" PRIu64 " tokens, ctx %" PRIu32 "\n",
               path, s->arch, s->n_layer, s->n_ff, s->activation, (double)s->threshold, s->n_tokens, s->ctx);
        printf("model ffn_hash %016" PRIx64 "%s\ncorpus %s\n", s->ffn_hash, s->ffn_hash ? "" : " (unknown)", s->corpus);
        printf("layer  neurons  mean_rate  cover80  cover90  cover99\n");
        for (uint32_t l = 0; l < s->n_layer; l++)
            printf("%5" PRIu32 "  %7" PRIu32 "  %9.4f  %7.4f  %7.4f  %7.4f\n", l, ls[l].neurons, ls[l].mean_rate,
                   ls[l].cover[0], ls[l].cover[1], ls[l].cover[2]);
    }
    free(ls);
    hc_stats_free(s);
    return 0;
}

/* ---------------------------------------------------------------- predictors */

static const char predictors_usage[] =
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
    "      --epochs E         passes over the training tokens (default: enough for 8000\n"
    "                         minibatch steps, at least 10)\n"
    "      --batch N          minibatch rows (default 32)\n"
    "      --lr X             Adam step size, cosine-decayed to 0 (default 0.3/n_embd, at most\n"
    "                         0.003)\n"
    "      --pos-weight W     loss weight of active targets (default sqrt(inactive/active), >= 1)\n"
    "      --recall R         recall of active neurons each layer's threshold reaches on the\n"
    "                         calibration tokens (default 0.99)\n"
    "      --holdout F        fraction of windows held out: half calibration, half test (default 0.2)\n"
    "      --act-threshold T  a neuron is active when |act(gate)*up| > T (default 0; a SiLU or\n"
    "                         GELU model needs it, or a calibrated set from calibrate)\n"
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

enum { O_RANK = 256, O_AUTO, O_EPOCHS, O_BATCH, O_LR, O_PW, O_RECALL, O_HOLD, O_ACT, O_PTYPE, O_MEM, O_TOK,
       O_SEED, O_SVG };

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

/* The value of predictors' option c (not -h) into o; *type_set when --pred-type. */
static void predictors_option(int c, const char *v, hc_pred_opts *o, int *type_set)
{
    switch (c) {
    case 'm': o->model = v; break;
    case 'f': o->corpus = v; break;
    case 'o': o->output = v; break;
    case 'c': o->ctx = (int)hc_opt_int("-c", v, 2, 1 << 20); break;
    case 't': o->n_threads = (int)hc_opt_int("-t", v, 1, 256); break;
    case O_RANK: o->rank = (int)hc_opt_int("--rank", v, 1, 1 << 16); break;
    case O_AUTO: o->rank_auto = 1; break;
    case O_EPOCHS: o->epochs = (int)hc_opt_int("--epochs", v, 1, 100000); break;
    case O_BATCH: o->batch = (int)hc_opt_int("--batch", v, 1, 1 << 16); break;
    case O_LR: o->lr = parse_float("--lr", v, 0, 1, 0); break;
    case O_PW: o->pos_weight = parse_float("--pos-weight", v, 0, 1e6f, 0); break;
    case O_RECALL: o->recall = parse_float("--recall", v, 0, 1, 0); break;
    case O_HOLD: o->holdout = parse_float("--holdout", v, 0, 0.9f, 0); break;
    case O_ACT: o->act_threshold = parse_float("--act-threshold", v, 0, 1e9f, 1); o->act_threshold_set = 1; break;
    case O_PTYPE:
        if (!strcmp(v, "f32")) o->pred_type = GGML_TYPE_F32;
        else if (!strcmp(v, "f16")) o->pred_type = GGML_TYPE_F16;
        else hc_die("bad value for --pred-type: '%s' (expected f32 or f16)", v);
        *type_set = 1;
        break;
    case O_MEM:
        if (hc_parse_size(v, &o->mem) != 0 || !o->mem) hc_die("bad value for --mem: '%s' (expected a size like 4G)", v);
        break;
    case O_TOK: o->max_tokens = hc_opt_int("--tokens", v, 1, INT64_MAX); break;
    case O_SEED: o->seed = (uint64_t)hc_opt_int("--seed", v, 0, INT64_MAX); break;
    case O_SVG: o->svg = v; break;
    }
}

/* 1 when --help was asked for (printed), else 0 with o filled from argv. */
static int predictors_parse(int argc, char **argv, hc_pred_opts *o, int *type_set)
{
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
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:o:c:t:h", longs, NULL)) != -1) {
        if (c == 'h') { fputs(predictors_usage, stdout); return 1; }
        if (c == HC_OPT_VERSION) hc_version();
        if (c == '?' || c == ':') hc_bad_option(c, "predictors", argv, longs);
        predictors_option(c, optarg, o, type_set);
    }
    return 0;
}

/* Options that must or must not go together; the predictor type the model's
 * FFN implies when --pred-type was not given. */
static void predictors_validate(int argc, char **argv, hc_pred_opts *o, int type_set)
{
    if (optind != argc) hc_die("unexpected argument '%s'; see --help", argv[optind]);
    if (!o->model || !o->corpus) hc_die("need -m MODEL and -f CORPUS; see --help");
    if (!o->output) hc_die("no output file (-o); see --help");
    if (o->rank && o->rank_auto) hc_die("--rank and --rank-auto do not go together");
    hc_check_outputs((const char *[]){ o->model, o->corpus }, 2, (const char *[]){ o->output, o->svg }, 2);
    char err[512];
    if (!type_set && hc_pred_default_type(o->model, &o->pred_type, err, sizeof err) != 0) hc_die("%s", err);
}

static void print_report(const hc_pred_report *r, const char *out)
{
    printf("%s: sparse_threshold %g; %" PRId64 " corpus tokens (%.1f s); per layer kept %" PRId64 " of %" PRId64 " training, %" PRId64
           " of %" PRId64 " calibration, %" PRId64 " of %" PRId64 " test tokens; active |h| > %g; training %.1f s"
           " (%d epochs of %d-token minibatches, step %g)\n",
           out ? out : "(no output)", (double)r->global_threshold, r->n_tokens, r->collect_s, r->n_train, r->seen_train, r->n_calib,
           r->seen_calib, r->n_test, r->seen_test, (double)r->act_threshold, r->train_s, r->epochs, r->batch, (double)r->lr);
    printf("layer  rank  recall  precision  pred_sparsity  true_sparsity     params       bytes  threshold    loss  "
           "train_s\n");
    for (int l = 0; l < r->n_layer; l++) {
        const hc_pred_layer *y = &r->layers[l];
        printf("%5d  %4d  %6.4f  %9.4f  %13.4f  %13.4f  %9" PRIu64 "  %10" PRIu64 "  %9.4g  %6.4f  %7.2f\n", l,
               y->rank, y->recall, y->precision, y->pred_sparsity, y->true_sparsity, y->params, y->bytes,
               (double)y->threshold, y->loss, y->train_s);
    }
}

static int cmd_predictors(int argc, char **argv)
{
    hc_pred_opts o = { .n_threads = hc_default_threads(64), .seed = 1 };
    int type_set = 0;
    if (predictors_parse(argc, argv, &o, &type_set)) return 0;
    predictors_validate(argc, argv, &o, type_set);
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

/* ---------------------------------------------------------------- calibrate */

static const char calibrate_usage[] =
    "usage: hc-profile calibrate -m MODEL.gguf -f CORPUS.txt --target-sparsity S -o OUT.gguf [options]\n"
    "Per layer, the threshold on a neuron criterion that skips a fraction S of the\n"
    "neurons over all tokens and neurons of the corpus (an exact quantile; each layer\n"
    "with the layers before it already sparse), written into a copy of the model\n"
    "(hotcold.sparse_criterion, hotcold.sparse_thresholds) that hc-run applies with\n"
    "the sparse FFN by default. The corpus is cut as hc-run --perplexity -c cuts it.\n"
    "  -m, --model FILE          GGUF model\n"
    "  -f, --file FILE           corpus (UTF-8 text)\n"
    "  -o, --output FILE         model copy to write (not the input)\n"
    "      --target-sparsity S   fraction of neurons to skip, 0 <= S < 1\n"
    "      --criterion C         contribution (default): |act(gate)*up| * |down_i|, what\n"
    "                            the neuron adds to the output (saves its down row);\n"
    "                            gate: |act(gate)| (saves its up and down rows)\n"
    "      --global              one gate threshold for all layers: the quantile of all\n"
    "                            layers' |act(gate)| together, without skipping (the fraction\n"
    "                            hc-run skips then only approaches S)\n"
    "  -c, --ctx-size N          window length in tokens (default 512 or the model's\n"
    "                            context length if smaller)\n"
    "  -t, --threads N           threads (default: online CPUs); the file does not depend on it\n"
    "  -h, --help                this help\n"
    "      --version             print the version\n";

/* 1 when --help was asked for (printed), else 0 with o filled from argv. */
static int calibrate_parse(int argc, char **argv, hc_calib_opts *o)
{
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "file", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' }, { "target-sparsity", required_argument, 0, 'S' },
        { "criterion", required_argument, 0, 'C' }, { "ctx-size", required_argument, 0, 'c' },
        { "threads", required_argument, 0, 't' }, { "global", no_argument, 0, 'G' },
        { "help", no_argument, 0, 'h' }, HC_LONG_VERSION, { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:o:c:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'f': o->corpus = optarg; break;
        case 'o': o->output = optarg; break;
        case 'S':
            o->target = hc_opt_num("--target-sparsity", optarg, 0, 1);
            if (o->target >= 1) hc_die("bad value for --target-sparsity: '%s' (expected 0 <= S < 1)", optarg);
            break;
        case 'C':
            if ((o->criterion = hc_sparse_criterion_parse(optarg)) < 0)
                hc_die("bad value for --criterion: '%s' (expected contribution or gate)", optarg);
            break;
        case 'G': o->global = 1; break;
        case 'c': o->ctx = (int)hc_opt_int("-c", optarg, 2, 1 << 20); break;
        case 't': o->n_threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case 'h': fputs(calibrate_usage, stdout); return 1;
        case HC_OPT_VERSION: hc_version();
        default: hc_bad_option(c, "calibrate", argv, longs);
        }
    }
    return 0;
}

static void calibrate_validate(int argc, char **argv, const hc_calib_opts *o)
{
    if (optind != argc) hc_die("calibrate: unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model || !o->corpus) hc_die("calibrate: need -m MODEL and -f CORPUS (see --help)");
    if (!o->output) hc_die("calibrate: no output file (-o; see --help)");
    if (o->target < 0) hc_die("calibrate: no --target-sparsity S (see --help)");
    if (o->global && o->criterion != HC_CRIT_GATE) hc_die("calibrate: --global needs --criterion gate");
    hc_check_outputs((const char *[]){ o->model, o->corpus }, 2, &o->output, 1);
}

static int cmd_calibrate(int argc, char **argv)
{
    hc_calib_opts o = { .target = -1, .criterion = HC_CRIT_CONTRIBUTION, .n_threads = hc_default_threads(64) };
    if (calibrate_parse(argc, argv, &o)) return 0;
    calibrate_validate(argc, argv, &o);
    hc_calib_layer *ls;
    int L;
    char err[512];
    if (hc_calibrate(&o, &ls, &L, err, sizeof err)) hc_die("%s", err);
    printf("%s: criterion %s%s, target sparsity %g\nlayer  threshold      values  skipped\n", o.output,
           hc_sparse_criterion_name(o.criterion), o.global ? " (one threshold for all layers)" : "", o.target);
    for (int l = 0; l < L; l++)
        printf("%5d  %-12.9g %9" PRIu64 "  %.6f\n", l, (double)ls[l].threshold, ls[l].values,
               (double)ls[l].skipped / (double)ls[l].values);
    free(ls);
    return 0;
}

/* 1 when --help was asked for (printed), else 0 with o and *out filled from argv. */
static int profile_parse(int argc, char **argv, hc_profile_opts *o, const char **out)
{
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "file", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' }, { "ctx-size", required_argument, 0, 'c' },
        { "tokens", required_argument, 0, 'N' }, { "threads", required_argument, 0, 't' },
        { "threshold", required_argument, 0, 'T' }, { "shard", required_argument, 0, 'S' },
        HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:o:c:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'f': o->corpus = optarg; break;
        case 'o': *out = optarg; break;
        case 'c': o->ctx = (int)hc_opt_int("-c", optarg, 2, 1 << 20); break;
        case 'N': o->max_tokens = hc_opt_int("--tokens", optarg, 1, INT64_MAX); break;
        case 't': o->n_threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case 'T': {
            char *end;
            o->threshold = strtof(optarg, &end);
            if (!*optarg || *end || !(o->threshold >= 0 && o->threshold < 1e9f))
                hc_die("bad value for --threshold: '%s' (expected a number >= 0)", optarg);
            o->threshold_set = 1;
            break;
        }
        case 'S': {
            char end;
            if (sscanf(optarg, "%d/%d%c", &o->shard_i, &o->shard_n, &end) != 2 || o->shard_n < 1 ||
                o->shard_i < 0 || o->shard_i >= o->shard_n)
                hc_die("bad value for --shard: '%s' (expected I/N with 0 <= I < N)", optarg);
            break;
        }
        case HC_OPT_VERSION: hc_version();
        case 'h': usage(); return 1;
        default: hc_bad_option(c, NULL, argv, longs);
        }
    }
    return 0;
}

static void profile_validate(int argc, char **argv, const hc_profile_opts *o, const char *out)
{
    if (optind != argc) hc_die("unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model || !o->corpus) hc_die("need -m MODEL and -f CORPUS (see --help)");
    need_output(out);
    hc_check_outputs((const char *[]){ o->model, o->corpus }, 2, &out, 1);
}

static int cmd_profile(int argc, char **argv)
{
    hc_profile_opts o = { .n_threads = hc_default_threads(64), .shard_n = 1 };
    const char *out = NULL;
    if (profile_parse(argc, argv, &o, &out)) return 0;
    profile_validate(argc, argv, &o, out);
    char err[512];
    double t0 = hc_now(), dt = 0;
    hc_stats *s = hc_profile_run(&o, &dt, err, sizeof err);
    if (!s) hc_die("%s", err);
    write_stats(s, out);
    printf("%s: %" PRIu64 " tokens, %" PRIu32 " layers x %" PRIu32 " neurons, %.2f s total, "
           "evaluation %.1f tok/s\n", out, s->n_tokens, s->n_layer, s->n_ff, hc_now() - t0,
           dt > 0 ? (double)s->n_tokens / dt : 0.0);
    hc_stats_free(s);
    return 0;
}

static const hc_command commands[] = {
    { "merge", cmd_merge, "       hc-profile merge A.gguf B.gguf ... -o OUT.gguf\n" },
    { "import-powerinfer", cmd_import,
      "       hc-profile import-powerinfer DIR -o OUT.gguf [-m MODEL.gguf] [--tokens N]\n" },
    { "show", cmd_show, "       hc-profile show STATS.gguf [--svg FILE] [--json]\n" },
    { "predictors", cmd_predictors,
      "       hc-profile predictors -m MODEL.gguf -f CORPUS.txt -o MODEL.sparse.gguf [...] (see predictors --help)\n" },
    { "calibrate", cmd_calibrate,
      "       hc-profile calibrate -m MODEL.gguf -f CORPUS.txt --target-sparsity S -o OUT.gguf [...] (see calibrate --help)\n" },
    { NULL, NULL, NULL },
};

static void usage(void)
{
    hc_command_usage(stdout, usage_head, commands, usage_tail);
}

/* Without a subcommand, hc-profile profiles a corpus. */
int main(int argc, char **argv)
{
    hc_prog = "hc-profile";
    const hc_command *cmd = argc > 1 ? hc_command_find(commands, argv[1]) : NULL;
    return cmd ? cmd->run(argc - 1, argv + 1) : cmd_profile(argc, argv);
}
