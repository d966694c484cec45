/* Command line of `hc-profile calibrate` and its per-layer report. */
#include "calibrate.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sparse.h"

static const char usage[] =
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

static void parse(int argc, char **argv, hc_calib_opts *o)
{
    static const struct option longs[] = {
        { "model", required_argument, 0, 'm' }, { "file", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' }, { "target-sparsity", required_argument, 0, 'S' },
        { "criterion", required_argument, 0, 'C' }, { "ctx-size", required_argument, 0, 'c' },
        { "threads", required_argument, 0, 't' }, { "global", no_argument, 0, 'G' },
        { "help", no_argument, 0, 'h' }, HC_LONG_VERSION, { 0, 0, 0, 0 },
    };
    *o = (hc_calib_opts){ .target = -1, .criterion = HC_CRIT_CONTRIBUTION, .n_threads = hc_default_threads(64) };
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
        case 'h': fputs(usage, stdout); exit(0);
        case HC_OPT_VERSION: hc_version();
        default: hc_bad_option(c, "calibrate", argv, longs);
        }
    }
    if (optind != argc) hc_die("calibrate: unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model || !o->corpus) hc_die("calibrate: need -m MODEL and -f CORPUS (see --help)");
    if (!o->output) hc_die("calibrate: no output file (-o; see --help)");
    if (o->target < 0) hc_die("calibrate: no --target-sparsity S (see --help)");
    if (o->global && o->criterion != HC_CRIT_GATE) hc_die("calibrate: --global needs --criterion gate");
    if (strcmp(o->model, o->output) == 0) hc_die("calibrate: -o must not be the input model %s", o->model);
}

int hc_profile_calibrate_main(int argc, char **argv)
{
    hc_calib_opts o;
    parse(argc, argv, &o);
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
