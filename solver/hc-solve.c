/* hc-solve: which FFN neurons live on the GPU, as PowerInfer's placement ILP
 * solved with GLPK, written as the .gpuidx file PowerInfer's loader reads. */
#include <cjson/cJSON.h>
#include <float.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "cli.h"
#include "gguf.h"
#include "ggml_types.h"
#include "model_check.h"
#include "outputs.h"
#include "solve.h"
#include "stats.h"

#define DEFAULT_BATCH 256
#define MIN_BATCHES 16       /* a smaller model gets smaller batches, down to this many per layer */

static void usage(FILE *f)
{
    fprintf(f,
"usage: hc-solve -m MODEL.gguf -s STATS.gguf --vram-budget SIZE [options]\n"
"Choose the FFN neurons to keep on the GPU (PowerInfer's placement ILP, GLPK)\n"
"and write them as PowerInfer's .gpuidx.\n"
"\n"
"  -m, --model FILE          model GGUF (PowerInfer or plain llama layout)\n"
"  -s, --stats FILE          activation statistics from hc-profile\n"
"      --vram-budget SIZE    GPU memory for this model: bytes or K/M/G/T (1024-based)\n"
"  -o, --output FILE         default MODEL.generated.gpuidx (where PowerInfer looks)\n"
"      --batch N             neurons per ILP variable (default 256; smaller for small\n"
"                            FFNs so that a layer has at least %d batches)\n"
"      --time-limit S        stop GLPK after S seconds (default 60) and keep its best\n"
"      --gap G               stop at relative MIP gap G (default 1e-5; 0 = prove\n"
"                            optimality, which can take minutes on 70B shapes)\n"
"      --ctx N               KV cache charged for N positions (default: the model's\n"
"                            context length, the most hc-run uses)\n"
"  -ctk, --cache-type-k T    ... its keys as hc-run will hold them: f32 (default) or f16\n"
"  -ctv, --cache-type-v T    ... its values: f32 (default) or f16\n"
"      --greedy              hottest neurons per byte first, no ILP (baseline)\n"
"      --sweep LIST          coverage for each budget of a comma-separated list; no file\n"
"      --json                print the report (or the sweep) as JSON on stdout\n"
"      --report FILE         write the JSON report to FILE\n"
"      --svg FILE            draw coverage per layer and the budget split\n"
"  per-layer minimum (a layer puts none or at least this many neurons on the GPU):\n"
"      --min-layer-neurons N fixed minimum (0 = PowerInfer's released solver)\n"
"      --cpu-bw SIZE         CPU bytes/s streaming FFN rows (default 40G)\n"
"      --gpu-bw SIZE         GPU bytes/s (default 900G)\n"
"      --sync-us US          cost of one CPU-GPU synchronisation (default 20)\n"
"                            minimum = fewest hottest neurons whose saved CPU time\n"
"                            per token pays for one synchronisation\n"
"  -v, --verbose             GLPK's own output\n"
"      --version             print the version\n"
"  -h, --help                this help\n", MIN_BATCHES);
}

typedef struct {
    const char *model, *stats, *out, *report, *svg, *sweep;
    uint64_t budget, *sweep_budgets;   /* --sweep's list, checked while parsing */
    int n_sweep;
    int have_budget, batch, greedy, json, have_cost, ctx;
    uint32_t type_k, type_v;   /* -ctk, -ctv: the KV cache's types as hc-run holds them */
    solve_cost cost;
    solve_ilp_opts ilp;
} options;

static uint64_t parse_bytes(const char *opt, const char *s)
{
    uint64_t v;
    if (hc_parse_size(s, &v))
        hc_die("bad value for %s: '%s' (expected a size: bytes, or with K/M/G/T or KiB/MiB/GiB)", opt, s);
    return v;
}

/* --sweep's comma-separated sizes (malloc'd, *n of them); an empty list or
 * item, or one that is not a size, exits through parse_bytes before any work. */
static uint64_t *sweep_budgets(const char *list, int *n)
{
    uint64_t *v = NULL;
    *n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        char item[64];
        if (len >= sizeof item) hc_die("bad value for --sweep: '%.20s...' (expected a size)", p);
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        uint64_t *more = realloc(v, sizeof *v * (size_t)(*n + 1));
        if (!more) hc_die("out of memory");
        v = more;
        v[(*n)++] = parse_bytes("--sweep", item);
        p += len;
        if (!*p) return v;
    }
}

static void parse_args(int argc, char **argv, options *o)
{
    enum { O_BATCH = 256, O_TIME, O_GAP, O_CTX, O_GREEDY, O_SWEEP, O_JSON, O_REPORT, O_SVG, O_MIN, O_CPU, O_GPU,
           O_SYNC, O_CTK, O_CTV };
    static const struct option longopts[] = {
        { "model", required_argument, 0, 'm' }, { "stats", required_argument, 0, 's' },
        { "vram-budget", required_argument, 0, 'B' }, { "output", required_argument, 0, 'o' },
        { "batch", required_argument, 0, O_BATCH }, { "time-limit", required_argument, 0, O_TIME },
        { "gap", required_argument, 0, O_GAP }, { "ctx", required_argument, 0, O_CTX },
        { "greedy", no_argument, 0, O_GREEDY }, { "sweep", required_argument, 0, O_SWEEP },
        { "json", no_argument, 0, O_JSON }, { "report", required_argument, 0, O_REPORT },
        { "svg", required_argument, 0, O_SVG }, { "min-layer-neurons", required_argument, 0, O_MIN },
        { "cpu-bw", required_argument, 0, O_CPU }, { "gpu-bw", required_argument, 0, O_GPU },
        { "sync-us", required_argument, 0, O_SYNC }, { "cache-type-k", required_argument, 0, O_CTK },
        { "cache-type-v", required_argument, 0, O_CTV }, { "verbose", no_argument, 0, 'v' },
        HC_LONG_VERSION, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    memset(o, 0, sizeof *o);
    o->ctx = -1;
    o->type_k = o->type_v = GGML_TYPE_F32;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {   /* llama.cpp's spelling, which getopt reads as -c tk */
        if (strcmp(argv[i], "-ctk") == 0) argv[i] = "--cache-type-k";
        if (strcmp(argv[i], "-ctv") == 0) argv[i] = "--cache-type-v";
    }
    o->cost = (solve_cost){ 0, 0, HC_COST_CPU_BW, HC_COST_GPU_BW, HC_COST_SYNC_S };
    /* A gap stop, unlike a time-limit stop, gives the same file on every machine. */
    o->ilp = (solve_ilp_opts){ 60, 1e-5, 0 };
    int c;
    while ((c = getopt_long(argc, argv, ":m:s:b:o:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 's': o->stats = optarg; break;
        case 'B': o->budget = parse_bytes("--vram-budget", optarg); o->have_budget = 1; break;
        case 'b': hc_die("-b is a batch size in llama.cpp; the GPU memory budget is --vram-budget SIZE");
        case 'o': o->out = optarg; break;
        case O_BATCH: o->batch = (int)hc_opt_int("--batch", optarg, 1, 1 << 24); break;
        case O_TIME: o->ilp.time_limit = hc_opt_num("--time-limit", optarg, 0, DBL_MAX); break;
        case O_GAP: o->ilp.gap = hc_opt_num("--gap", optarg, 0, DBL_MAX); break;
        case O_CTX: o->ctx = (int)hc_opt_int("--ctx", optarg, 1, 1 << 24); break;
        case O_CTK: o->type_k = hc_opt_cache_type("--cache-type-k", optarg); break;
        case O_CTV: o->type_v = hc_opt_cache_type("--cache-type-v", optarg); break;
        case O_GREEDY: o->greedy = 1; break;
        case O_SWEEP: o->sweep = optarg; free(o->sweep_budgets); o->sweep_budgets = sweep_budgets(optarg, &o->n_sweep); break;
        case O_JSON: o->json = 1; break;
        case O_REPORT: o->report = optarg; break;
        case O_SVG: o->svg = optarg; break;
        case O_MIN:
            o->cost.fixed = 1;
            o->cost.min_neurons = (uint32_t)hc_opt_int("--min-layer-neurons", optarg, 0, UINT32_MAX);
            break;
        case O_CPU: o->cost.cpu_bw = (double)parse_bytes("--cpu-bw", optarg); o->have_cost = 1; break;
        case O_GPU: o->cost.gpu_bw = (double)parse_bytes("--gpu-bw", optarg); o->have_cost = 1; break;
        case O_SYNC: o->cost.sync_s = hc_opt_num("--sync-us", optarg, 0, DBL_MAX) * 1e-6; o->have_cost = 1; break;
        case 'v': o->ilp.verbose = 1; break;
        case HC_OPT_VERSION: hc_version();
        case 'h': usage(stdout); exit(0);
        default: hc_bad_option(c, NULL, argv, longopts);
        }
    }
    if (optind < argc)
        hc_die("unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->model || !o->stats)
        hc_die("-m MODEL and -s STATS are required (see --help)");
    if (!o->have_budget && !o->sweep)
        hc_die("--vram-budget (or --sweep) is required (see --help)");
    if (o->have_budget && o->sweep)
        hc_die("--sweep takes its budgets from its list, not from --vram-budget");
    if (o->sweep && (o->out || o->report || o->svg))
        hc_die("--sweep prints a table only: drop -o, --report and --svg");
    if (o->cost.fixed && o->have_cost)
        hc_die("--min-layer-neurons replaces the cost model: drop --cpu-bw, --gpu-bw and --sync-us");
    if (o->cost.cpu_bw <= 0 || o->cost.gpu_bw <= 0)
        hc_die("--cpu-bw and --gpu-bw must be positive");
}

/* 256 as PowerInfer, but at least MIN_BATCHES batches per layer: the largest
 * power of two that gives that, unless the user chose. */
static uint32_t choose_batch(const options *o, uint32_t n_ff)
{
    if (o->batch)
        return (uint32_t)o->batch;
    uint32_t b = DEFAULT_BATCH;
    while (b > 1 && n_ff / b < MIN_BATCHES)
        b /= 2;
    if (b != DEFAULT_BATCH)
        hc_warn("note: n_ff = %" PRIu32 ": batches of %" PRIu32 " neurons instead of %d "
                "(at least %d per layer; --batch to choose)", n_ff, b, DEFAULT_BATCH, MIN_BATCHES);
    return b;
}

static uint64_t stats_identity(const hc_stats *s)
{
    uint64_t h = hc_fnv1a64(s->corpus, strlen(s->corpus), HC_FNV_INIT);
    return hc_fnv1a64(s->count, (size_t)s->n_layer * s->n_ff * sizeof *s->count, h);
}

static void say_layers_off(const options *o, const solve_problem *p)
{
    uint32_t off = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        off += p->layer[l].n_units == 0;
    if (!off)
        return;
    if (o->cost.fixed)
        hc_warn("note: --min-layer-neurons %" PRIu32 " is more than n_ff = %" PRIu32
                ": no layer can go to the GPU", o->cost.min_neurons, p->n_ff);
    else
        hc_warn("note: in %" PRIu32 " of %" PRIu32 " layers no share of neurons saves the CPU "
                "enough time to pay for a synchronisation (--sync-us %g with --cpu-bw/--gpu-bw): they stay on "
                "the CPU; --min-layer-neurons N sets the minimum instead", off, p->n_layer, o->cost.sync_s * 1e6);
}

/* Greedy always (baseline and incumbent), then the ILP unless --greedy. */
static void solve(const options *o, solve_result *r)
{
    char err[512];
    solve_solution greedy;
    solve_solution_init(&greedy, r->problem->n_layer);
    solve_greedy(r->problem, r->capacity, &greedy);
    r->greedy_objective = greedy.objective;
    if (o->greedy) {
        memcpy(r->sol.units, greedy.units, r->problem->n_layer * sizeof *greedy.units);
        solve_solution_eval(r->problem, &r->sol);
        memset(&r->info, 0, sizeof r->info);
        r->info.status = SOLVE_GREEDY;
        r->method = "greedy";
    } else {
        if (solve_ilp(r->problem, r->capacity, &greedy, &o->ilp, &r->sol, &r->info, err, sizeof err))
            hc_die("%s", err);
        r->method = "ilp";
    }
    solve_solution_free(&greedy);
}

static void say_time_limit(const options *o, const solve_result *r)
{
    if (r->info.time_limit_hit)
        hc_warn("WARNING: the time limit (%g s) stopped GLPK before it proved the placement "
                "optimal: %s, gap %.4f%% to the bound; recorded as hotcold.solve.time_limit_hit",
                o->ilp.time_limit, solve_status_names[r->info.status], 100 * r->info.gap);
    else if (r->info.status == SOLVE_FALLBACK)
        hc_warn("WARNING: GLPK found nothing better than the greedy placement; writing that");
}

static double pct(int64_t a, int64_t b)
{
    return b > 0 ? 100.0 * (double)a / (double)b : 0;
}

static void print_summary(const solve_result *r, const char *out)
{
    const solve_problem *p = r->problem;
    const hc_budget *b = r->budget;
    char s1[32], s2[32], s3[32];
    uint64_t neurons = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        neurons += solve_gpu_neurons(p, &r->sol, l);
    printf("model     %s: %" PRIu32 " layers x %" PRIu32 " neurons, batch %" PRIu32 "\n", r->model_name, p->n_layer,
           p->n_ff, p->batch);
    printf("budget    %s = dense %s + FFN capacity %s\n", hc_format_size(r->vram_budget, s1, sizeof s1),
           hc_format_size(b->fixed_total, s2, sizeof s2), hc_format_size(r->capacity, s3, sizeof s3));
    printf("dense    ");
    for (int i = 0; i < HC_FIX_COUNT; i++)
        printf(" %s %s%s", hc_budget_fixed_names[i], hc_format_size(b->fixed[i], s1, sizeof s1),
               i == HC_FIX_COUNT - 1 ? "" : ",");
    printf(" (ctx %" PRIu32 ", %d bytes a KV element pair)\n", b->ctx, b->kv_bytes);
    printf("placed    %" PRIu64 " of %" PRIu64 " neurons (%.2f%%), %s\n", neurons, (uint64_t)p->n_layer * p->n_ff,
           100.0 * (double)neurons / ((double)p->n_layer * p->n_ff), hc_format_size(r->sol.bytes, s1, sizeof s1));
    printf("coverage  %.4f%% of activations (greedy %.4f%%)\n", pct(r->sol.objective, p->total),
           pct(r->greedy_objective, p->total));
    if (r->info.status != SOLVE_GREEDY)
        printf("ilp       %s, objective %" PRId64 ", LP bound %.1f, bound %.1f, gap %.4f%%, %.2f s\n",
               solve_status_names[r->info.status], r->sol.objective, r->info.lp_bound, r->info.bound,
               100 * r->info.gap, r->info.seconds);
    printf("wrote     %s\n", out);
}

static void run_sweep(const options *o, solve_result *r, const char *model_path)
{
    cJSON *rows = o->json ? cJSON_CreateArray() : NULL;
    if (!o->json)
        printf("%12s %12s %10s %10s %10s %9s %8s  %s\n", "budget", "ffn_capacity", "neurons", "coverage",
               "greedy", "gap", "seconds", "status");
    for (int k = 0; k < o->n_sweep; k++) {
        char err[512], s1[32], s2[32];
        r->vram_budget = o->sweep_budgets[k];
        if (hc_budget_capacity(r->budget, model_path, r->vram_budget, &r->capacity, err, sizeof err)) {
            if (rows) {
                cJSON *e = cJSON_CreateObject();
                hc_json_add_u64(e, "vram_budget", r->vram_budget);
                hc_json_add_text(e, "error", err);
                cJSON_AddItemToArray(rows, e);
            } else {
                printf("%12s %12s  the dense part (%s) does not fit\n", hc_format_size(r->vram_budget, s1, sizeof s1),
                       "-", hc_format_size(r->budget->fixed_total, s2, sizeof s2));
            }
            continue;
        }
        solve(o, r);
        say_time_limit(o, r);
        if (rows) {
            cJSON_AddItemToArray(rows, solve_summary_json(r));
            continue;
        }
        uint64_t neurons = 0;
        for (uint32_t l = 0; l < r->problem->n_layer; l++)
            neurons += solve_gpu_neurons(r->problem, &r->sol, l);
        printf("%12s %12s %10" PRIu64 " %9.4f%% %9.4f%% %8.4f%% %8.2f  %s\n",
               hc_format_size(r->vram_budget, s1, sizeof s1), hc_format_size(r->capacity, s2, sizeof s2), neurons,
               pct(r->sol.objective, r->problem->total), pct(r->greedy_objective, r->problem->total),
               100 * r->info.gap, r->info.seconds, solve_status_names[r->info.status]);
    }
    if (rows) hc_json_print(rows);
}

static void write_text(const char *path, const char *text)
{
    char err[512];
    atomic_file af;
    if (af_open(&af, path, err, sizeof err))
        hc_die("%s", err);
    fputs(text, af.fp);
    fputc('\n', af.fp);
    if (af_commit(&af, err, sizeof err))
        hc_die("%s", err);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int main(int argc, char **argv)
{
    hc_prog = "hc-solve";
    options o;
    parse_args(argc, argv, &o);
    char *out = NULL;
    if (o.out)
        out = strdup(o.out);
    else if (!o.sweep && asprintf(&out, "%s.generated.gpuidx", o.model) < 0)
        hc_die("out of memory");
    hc_check_outputs((const char *[]){ o.model, o.stats }, 2, (const char *[]){ out, o.report, o.svg }, 3);
    char err[512];
    if (hc_model_check(o.model, err, sizeof err))   /* exactly the models hc-run accepts */
        hc_die("%s", err);
    gguf_file *model = gguf_open(o.model, err, sizeof err);
    if (!model)
        hc_die("%s", err);
    hc_stats *stats = hc_stats_read(o.stats, err, sizeof err);
    if (!stats)
        hc_die("%s", err);
    if (hc_stats_check_model(stats, model, o.model, err, sizeof err))
        hc_die("%s (statistics %s)", err, o.stats);
    hc_budget budget;
    if (hc_budget_read(&budget, model, o.ctx, hc_kv_bytes(o.type_k, o.type_v), err, sizeof err))
        hc_die("%s", err);
    if (budget.ctx_train && o.ctx > (int64_t)budget.ctx_train)   /* a cache for a context hc-run refuses */
        hc_die("%s: --ctx %d exceeds the model's context_length %" PRIu32, o.model, o.ctx, budget.ctx_train);

    uint64_t capacity = 0;
    if (!o.sweep && hc_budget_capacity(&budget, o.model, o.budget, &capacity, err, sizeof err))
        hc_die("%s", err);

    solve_problem problem;
    solve_problem_build(&problem, stats, &budget, choose_batch(&o, stats->n_ff), &o.cost);
    say_layers_off(&o, &problem);
    solve_result r = { 0 };
    r.model_name = base_name(o.model);
    r.model_hash = hc_ffn_hash(model);
    r.stats_hash = stats_identity(stats);
    r.stats = stats;
    r.budget = &budget;
    r.problem = &problem;
    solve_solution_init(&r.sol, problem.n_layer);

    if (o.sweep) {
        run_sweep(&o, &r, o.model);
    } else {
        r.vram_budget = o.budget;
        r.capacity = capacity;
        solve(&o, &r);
        say_time_limit(&o, &r);
        char *json = solve_report_json(&r);
        af_group_begin();   /* the index, report and drawing land together or not at all */
        if (solve_write_gpuidx(&r, out, err, sizeof err))
            hc_die("%s", err);
        if (o.report)
            write_text(o.report, json);
        if (o.svg && solve_write_svg(&r, o.svg, err, sizeof err))
            hc_die("%s", err);
        if (af_group_commit(err, sizeof err))
            hc_die("%s", err);
        if (o.json)
            puts(json);
        else
            print_summary(&r, out);
        free(json);
    }
    free(out);
    solve_solution_free(&r.sol);
    solve_problem_free(&problem);
    hc_budget_free(&budget);
    hc_stats_free(stats);
    gguf_close(model);
    free(o.sweep_budgets);
    return 0;
}
