/* hc-profile: per-neuron FFN activation statistics (profile a corpus, merge
 * shards, import PowerInfer's activation files, show a summary). */
#include <cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "outputs.h"
#include "predictors.h"
#include "profile.h"

static const char usage[] =
    "usage: hc-profile -m MODEL.gguf -f CORPUS.txt -o STATS.gguf [options]\n"
    "       hc-profile merge A.gguf B.gguf ... -o OUT.gguf\n"
    "       hc-profile import-powerinfer DIR -o OUT.gguf [-m MODEL.gguf] [--tokens N]\n"
    "       hc-profile show STATS.gguf [--svg FILE] [--json]\n"
    "       hc-profile predictors -m MODEL.gguf -f CORPUS.txt -o MODEL.sparse.gguf [...] (see predictors --help)\n"
    "Profiling counts, per layer and FFN neuron, the corpus tokens on which the\n"
    "neuron is active: |h| > T with h = act(gate)*up, the input of ffn_down.\n"
    "  -m, --model FILE     GGUF model\n"
    "  -f, --file FILE      corpus (UTF-8 text)\n"
    "  -o, --output FILE    statistics GGUF to write\n"
    "  -c, --ctx-size N     window length in tokens, BOS included (default: 512 or\n"
    "                       the model's context length if smaller)\n"
    "      --tokens N       use the first N corpus tokens (default: all)\n"
    "  -t, --threads N      threads (default: online CPUs); results do not depend on it\n"
    "      --threshold T    active means |h| > T (default 0 for ReLU models, 0.01 for SiLU)\n"
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
        else if (c == 'h') { fputs(usage, stdout); return 0; }
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
        case 'h': fputs(usage, stdout); return 0;
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
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "arch", s->arch);
    cJSON_AddNumberToObject(o, "n_layer", s->n_layer);
    cJSON_AddNumberToObject(o, "n_ff", s->n_ff);
    cJSON_AddNumberToObject(o, "n_embd", s->n_embd);
    cJSON_AddStringToObject(o, "activation", s->activation);
    cJSON_AddNumberToObject(o, "threshold", short_float(s->threshold));
    cJSON_AddNumberToObject(o, "n_tokens", (double)s->n_tokens);
    cJSON_AddNumberToObject(o, "ctx", s->ctx);
    cJSON_AddStringToObject(o, "ffn_hash", hash);
    cJSON_AddStringToObject(o, "corpus", s->corpus);
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
        case 'h': fputs(usage, stdout); return 0;
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

static int cmd_profile(int argc, char **argv)
{
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "file", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' }, { "ctx-size", required_argument, 0, 'c' },
        { "tokens", required_argument, 0, 'N' }, { "threads", required_argument, 0, 't' },
        { "threshold", required_argument, 0, 'T' }, { "shard", required_argument, 0, 'S' },
        HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    hc_profile_opts o = { .n_threads = hc_default_threads(64), .shard_n = 1 };
    const char *out = NULL;
    int c;
    while ((c = getopt_long(argc, argv, ":m:f:o:c:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'f': o.corpus = optarg; break;
        case 'o': out = optarg; break;
        case 'c': o.ctx = (int)hc_opt_int("-c", optarg, 2, 1 << 20); break;
        case 'N': o.max_tokens = hc_opt_int("--tokens", optarg, 1, INT64_MAX); break;
        case 't': o.n_threads = (int)hc_opt_int("-t", optarg, 1, 256); break;
        case 'T': {
            char *end;
            o.threshold = strtof(optarg, &end);
            if (!*optarg || *end || !(o.threshold >= 0 && o.threshold < 1e9f))
                hc_die("bad value for --threshold: '%s' (expected a number >= 0)", optarg);
            o.threshold_set = 1;
            break;
        }
        case 'S': {
            char end;
            if (sscanf(optarg, "%d/%d%c", &o.shard_i, &o.shard_n, &end) != 2 || o.shard_n < 1 ||
                o.shard_i < 0 || o.shard_i >= o.shard_n)
                hc_die("bad value for --shard: '%s' (expected I/N with 0 <= I < N)", optarg);
            break;
        }
        case HC_OPT_VERSION: hc_version();
        case 'h': fputs(usage, stdout); return 0;
        default: hc_bad_option(c, NULL, argv, longs);
        }
    }
    if (optind != argc) hc_die("unexpected argument '%s' (see --help)", argv[optind]);
    if (!o.model || !o.corpus) hc_die("need -m MODEL and -f CORPUS (see --help)");
    need_output(out);
    hc_check_outputs((const char *[]){ o.model, o.corpus }, 2, &out, 1);
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

int main(int argc, char **argv)
{
    hc_prog = "hc-profile";
    if (argc > 1 && strcmp(argv[1], "merge") == 0) return cmd_merge(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-powerinfer") == 0) return cmd_import(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "show") == 0) return cmd_show(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "predictors") == 0) return hc_profile_predictors_main(argc - 1, argv + 1);
    return cmd_profile(argc, argv);
}
