/* Choosing and building a model's FFN (see ffn_setup.h). */
#include "ffn_setup.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "budget.h"
#include "cli.h"
#include "gpuidx.h"
#include "hybrid.h"
#include "opencl.h"
#include "place.h"
#include "sparse.h"
#include "stats.h"

struct hc_ffn {
    int verbose;
    int contribution;        /* the sparse FFN skips by the contribution criterion */
    float *thr;              /* [n_layer] calibrated thresholds read from the model */
    hc_sparse *sparse;       /* NULL: the dense FFN */
    hc_cl *cl;               /* the device, or NULL */
    hc_backend *dev;         /* its backend, for the placed layers and head */
    hc_place *place;         /* what runs there besides hot neurons, or NULL */
    uint64_t hot_budget;     /* device bytes left to a GPU index's hot neurons */
    double dense_s;          /* time in the dense FFN (verbose) */
    uint64_t dense_tokens;   /* tokens through layer 0 of the dense FFN (verbose) */
};

/* The dense FFN, timed to compare with the sparse FFN's report. */
static void timed_dense(void *user, hc_ctx *ctx, int layer, const float *ffn_inp, const float *x_norm, int B,
                        float *out, float *h)
{
    hc_ffn *f = user;
    double t0 = hc_now();
    (void)ffn_inp;
    hc_ffn_dense(ctx, layer, x_norm, B, out, h);
    f->dense_s += hc_now() - t0;
    if (layer == 0) f->dense_tokens += (uint64_t)B;
}

static int has_predictors(const hc_model *m)
{
    int all = 1;
    for (int l = 0; l < m->hp.n_layer; l++) all &= m->layers[l].fc1.kind != HC_WEIGHT_NONE;
    return all;
}

/* hotcold.sparse_criterion and hotcold.sparse_thresholds (docs/formats.md)
 * into *crit and thr[n_layer]: 1, 0 when the model has neither, -1 with err. */
static int read_calibration(const hc_model *m, int *crit, float *thr, char *err, size_t errlen)
{
    const gguf_file *g = m->file;
    int kc = gguf_find_kv(g, HC_KEY_SPARSE_CRITERION), kt = gguf_find_kv(g, HC_KEY_SPARSE_THRESHOLDS);
    if (kc < 0 && kt < 0) return 0;
    char *name = NULL;
    if (kc < 0 || kt < 0 || gguf_get_str(g, HC_KEY_SPARSE_CRITERION, &name) != 0) {
        snprintf(err, errlen, "%s: %s and %s go together (a string and an array)", m->path, HC_KEY_SPARSE_CRITERION,
                 HC_KEY_SPARSE_THRESHOLDS);
        return -1;
    }
    *crit = hc_sparse_criterion_parse(name);
    if (*crit < 0) snprintf(err, errlen, "%s: %s '%s' is neither gate nor contribution", m->path,
                            HC_KEY_SPARSE_CRITERION, name);
    free(name);
    if (*crit < 0) return -1;
    const gguf_kv *kv = &g->kv[kt];
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_FLOAT32 || kv->n != (uint64_t)m->hp.n_layer) {
        snprintf(err, errlen, "%s: %s must be an array of %d float32 (one per layer)", m->path,
                 HC_KEY_SPARSE_THRESHOLDS, m->hp.n_layer);
        return -1;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        thr[l] = (float)gguf_kv_num(kv, (uint64_t)l);
        if (!(thr[l] >= 0 && thr[l] < INFINITY)) {
            snprintf(err, errlen, "%s: %s[%d] = %g is not a finite number >= 0", m->path, HC_KEY_SPARSE_THRESHOLDS, l,
                     (double)thr[l]);
            return -1;
        }
    }
    return 1;
}

/* The sparse FFN with its thresholds, said on log; calibrated thresholds
 * (calib: thr, crit) unless --sparse-threshold is given. -1 with err. */
static int make_sparse(hc_ffn *f, const hc_model *m, const hc_ffn_opts *o, int predictors, int calib, int crit,
                       const float *thr, FILE *log, char *err, size_t errlen)
{
    calib &= !o->have_threshold;
    hc_sparse_params sp = { .threshold = o->have_threshold ? o->threshold : predictors ? m->hp.sparse_threshold : 0.0f,
                            .use_predictor = 1, .check = o->verbose, .criterion = calib ? crit : HC_CRIT_GATE,
                            .layer_thr = calib ? thr : NULL };
    double t0 = hc_now();
    if (!(f->sparse = hc_sparse_new(m, &sp, err, errlen))) return -1;
    f->contribution = sp.criterion == HC_CRIT_CONTRIBUTION;
    if (calib)
        fprintf(log, "sparse: calibrated per-layer thresholds on %s%s", f->contribution
                ? "|act(gate)·up|·‖down‖ (gate and up computed for every neuron)" : "|act(gate)|",
                predictors ? ", candidates chosen by the predictor" : "");
    else
        fprintf(log, "sparse: %s, threshold %g%s", predictors ? "neurons chosen by the predictor" : m->hp.act == HC_ACT_RELU
                ? "ReLU skips inactive neurons" : "SiLU: skips |silu(gate)| < threshold", sp.threshold,
                predictors ? " on fc2 · relu(fc1 · x)" : "");
    fprintf(log, " (%s%.2f ms to prepare the down rows)\n",
            hc_sparse_chunked(f->sparse) ? "gate and up rows in chunks of 16 blocks; " : "", (hc_now() - t0) * 1e3);
    return 0;
}

/* The hot neurons of index idx on the device, said on log; any reason not
 * to is a warning and leaves them on the CPU. -1 with err if idx cannot be read. */
static int place_hot(hc_ffn *f, const hc_model *m, const hc_ffn_opts *o, const char *idx, FILE *log, char *err,
                     size_t errlen)
{
    hc_gpuidx *g = hc_gpuidx_load(idx, m->hp.n_layer, m->hp.n_ff, err, errlen);
    if (!g) return -1;
    char sz[2][32], msg[512];
    uint64_t model_hash = hc_ffn_hash(m->file);
    if (g->model_ffn_hash && g->model_ffn_hash != model_hash)
        hc_warn("%s: solved for FFN weights other than this model's (hash %016llx, this model's %016llx: another "
                "model, or another type of this one); its hot neurons may not be this model's",
                idx, (unsigned long long)g->model_ffn_hash, (unsigned long long)model_hash);
    if (o->vram_budget && o->vram_budget < g->vram_capacity) {
        /* PowerInfer treats such an index as stale */
        hc_warn("%s: made for %s of device memory (split.vram_capacity), more than --vram-budget %s; its neurons "
                "run on the CPU", idx, hc_format_size(g->vram_capacity, sz[0], sizeof sz[0]),
                hc_format_size(o->vram_budget, sz[1], sizeof sz[1]));
    } else if (!f->cl) {
        hc_warn("%s: no device to run its neurons; they run on the CPU", idx);
    } else if (hc_hybrid_place(f->sparse, m, g, f->cl, f->hot_budget, msg, sizeof msg)) {
        hc_warn("%s: %s; its neurons run on the CPU", idx, msg);
    } else {
        long hot = 0;
        for (int l = 0; l < m->hp.n_layer; l++) hot += g->n_gpu[l];
        fprintf(log, "hybrid: %s: %ld of %ld neurons on the device (%s)\n", idx, hot, (long)m->hp.n_layer * m->hp.n_ff,
                hc_format_size(hc_hybrid_bytes(m, f->sparse, g), sz[0], sizeof sz[0]));
    }
    hc_gpuidx_free(g);
    return 0;
}

/* The device a run uses, opened with its kernels built once: a GPU
 * whenever there is one (unless -ngl 0), a CPU OpenCL device (PoCL) only
 * when asked (forced: --gpu-index FILE, -ngl N or --device N), since there
 * the device's share runs on the same cores. Its line on log; a reason not to use one
 * is a warning when it was asked for. */
static void open_device(hc_ffn *f, const hc_ffn_opts *o, int forced, FILE *log)
{
    char msg[512], line[512], hint[1024];
    if (o->gpu_layers == 0) {
        if (forced) hc_warn("-ngl 0: running on the CPU only (%s not used)", o->gpu_index ? "--gpu-index" : "--device");
        return;
    }
    hc_cl_info d;
    int i = hc_cl_choose(o->device, &d, msg, sizeof msg);
    const char *named = getenv("HC_OPENCL_DEVICE");
    if (i < 0 && named && *named) hc_die("%s", msg);   /* as --device's, never replaced */
    if (i < 0 || (!d.is_gpu && !forced)) {
        if (i < 0 && forced) hc_warn("%s; running on the CPU only", msg);
        return;
    }
    const int flags = (o->verbose ? HC_CL_PROFILE : 0) | (o->batch_invariant ? HC_CL_BATCH_INVARIANT : 0);
    if (!(f->cl = hc_cl_open(o->device, flags, msg, sizeof msg)) || !(f->dev = hc_cl_backend_new(f->cl, msg, sizeof msg))) {
        hc_warn("%s; running on the CPU only", msg);
        hc_cl_free(f->cl);
        f->cl = NULL;
        return;
    }
    hc_cl_describe(&d, i, line, sizeof line);
    fprintf(log, "opencl: %s%s%s\n", line, d.is_gpu ? "" : ": the 'device' share runs on this machine's cores",
            o->batch_invariant ? "; every row with its bits alone (--batch-invariant)" : "");
    if (!d.is_gpu && hc_cl_icd_hint(hint, sizeof hint)) hc_warn("%s", hint);
    int fell_back, rows_fell_back;
    const char *dots = hc_cl_backend_dots(f->dev, &fell_back), *rows_dots = hc_cl_dots(f->cl, &rows_fell_back);
    if (fell_back) hc_warn("OpenCL: the quantized products' integer dots: %s", dots);
    else if (o->verbose) fprintf(log, "opencl: the quantized products' integer dots: %s\n", dots);
    /* the hot rows' program is built first, with the same choice: said only where it differs */
    if (rows_fell_back && !fell_back) hc_warn("OpenCL: the hot rows' integer dots: %s", rows_dots);
}

uint64_t hc_default_budget(uint64_t mem)
{
    uint64_t reserve = mem / 16 > ((uint64_t)256 << 20) ? mem / 16 : (uint64_t)256 << 20;
    return mem > reserve ? mem - reserve : 0;
}

/* What goes on the device, in PowerInfer's order and at hc-solve's prices
 * (common/budget.h): the layers' attention, norms and predictors with their
 * KV cache as far as the budget holds them, the output head once every
 * layer is there, then the FFN: every neuron when all fit (the whole model
 * on the device, one result per token back), else the hot neurons of a
 * GPU index in what is left (f->hot_budget). -ngl N asks for N whole layers
 * (the head with all of them) whatever the budget, as llama.cpp does. A
 * placement nothing asked for (no -ngl, --vram-budget, --device or
 * --gpu-index) is made only when it pays by hc-solve's cost model
 * (hc_budget_place_pays): on a GPU, a small model's layers cost more in
 * synchronisations than their weights take to read. */
static int place_dense(hc_ffn *f, const hc_model *m, const hc_ffn_opts *o, FILE *log, char *err, size_t errlen)
{
    hc_budget b;
    if (hc_budget_read(&b, m->file, o->n_ctx > 0 ? o->n_ctx : -1, o->kv_bytes ? o->kv_bytes : 2 * HC_BUDGET_KV_BYTES,
                       err, errlen))
        return -1;
    int L = m->hp.n_layer;
    uint64_t budget = o->vram_budget ? o->vram_budget : hc_default_budget(hc_cl_about(f->cl)->mem_size), used, ffn = 0;
    uint64_t head = b.fixed[HC_FIX_OUTPUT];
    hc_place_plan plan = { 0, 0, 0 };
    if (o->gpu_layers > 0) {
        plan.n_layers = o->gpu_layers < L ? o->gpu_layers : L;
        plan.ffn = 1;
        plan.head = plan.n_layers == L;
    } else {
        plan.head = budget >= head && (int)hc_budget_layers(&b, budget - head) == L;
        plan.n_layers = plan.head ? L : (int)hc_budget_layers(&b, budget);
    }
    used = plan.head ? head : 0;
    for (int l = 0; l < plan.n_layers; l++) {
        used += hc_budget_layer_dense(&b, (uint32_t)l) + b.layer[l].part[HC_FIX_KV];
        ffn += b.layer[l].neuron_bytes * (uint64_t)b.n_ff + b.layer[l].part[HC_FIX_GPTQ_PAIRS];
    }
    if (o->gpu_layers < 0) plan.ffn = plan.head && ffn <= budget - used;
    double saved, cost;
    int unasked = o->gpu_layers < 0 && !o->vram_budget && !o->device && !o->gpu_index;
    if (unasked && (plan.n_layers || plan.head) &&
        !hc_budget_place_pays(&b, (uint32_t)plan.n_layers, plan.ffn, plan.head, &saved, &cost)) {
        fprintf(log, "offload: not chosen: %d layers on the device would save %.1f us a token and cost %.1f us of "
                "launches and synchronisations (hc-solve's cost model: CPU %.0f GiB/s, GPU %.0f GiB/s, %.0f us a "
                "layer, %.0f us a synchronisation); running on the CPU (-ngl N or --vram-budget SIZE places them)\n",
                plan.n_layers, saved * 1e6, cost * 1e6, HC_COST_CPU_BW / 1073741824.0, HC_COST_GPU_BW / 1073741824.0,
                HC_COST_LAYER_S * 1e6, HC_COST_SYNC_S * 1e6);
        plan = (hc_place_plan){ 0, 0, 0 };
        used = ffn = 0;
    }
    hc_budget_free(&b);
    /* -ngl: the hot neurons of the other layers as the device holds them */
    f->hot_budget = o->gpu_layers > 0 ? hc_cl_about(f->cl)->mem_size : plan.ffn || budget <= used ? 0 : budget - used;
    if (!plan.n_layers && !plan.head) return 0;
    char line[512], sz[2][32];
    snprintf(line, sizeof line, "device %d", hc_cl_index(f->cl));
    if (!(f->place = hc_place_new(m, f->dev, line, &plan, log, err, errlen))) {
        hc_warn("%s; running on the CPU only", err);
        return 0;
    }
    fprintf(log, "offload: %d of %d layers (attention, norms, KV cache)%s%s on the device, %s of %s\n",
            hc_place_layers(f->place), L, hc_place_head(f->place) ? ", the output head" : "",
            !plan.ffn ? "" : plan.n_layers == L ? ", every FFN neuron" : ", their FFN",
            hc_format_size(used + (plan.ffn ? ffn : 0), sz[0], sizeof sz[0]), hc_format_size(budget, sz[1], sizeof sz[1]));
    return 0;
}

/* MODEL.generated.gpuidx is used unasked only with a GPU: on a CPU OpenCL
 * device (PoCL) the split runs on the same cores and usually costs more than
 * it saves (docs/measurements.md, "Sparse and hybrid FFN"). --gpu-index FILE
 * still forces it. Asks the device list only: nothing is built. */
static int auto_index_usable(const char *idx, const char *device)
{
    char err[512], hint[1024];
    hc_cl_info d;
    int i = hc_cl_choose(device, &d, err, sizeof err), gpu = i >= 0 && d.is_gpu;
    if (!gpu && i >= 0)
        hc_warn("%s: not used: the OpenCL device '%s' is a CPU device, where the split usually costs more "
                "than it saves; running on the CPU (--gpu-index FILE forces it)", idx, d.name);
    else if (!gpu)
        hc_warn("%s: not used: %s; running on the CPU", idx, err);
    if (!gpu && hc_cl_icd_hint(hint, sizeof hint)) hc_warn("%s", hint);
    return gpu;
}

hc_ffn *hc_ffn_setup(const hc_model *m, const hc_ffn_opts *o, FILE *log, char *err, size_t errlen)
{
    hc_ffn *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "%s: out of memory", m->path);
        return NULL;
    }
    f->verbose = o->verbose;
    char auto_idx[4096], msg[512];
    const char *idx = o->gpu_index;
    snprintf(auto_idx, sizeof auto_idx, "%s.generated.gpuidx", m->path);
    if (!idx && !o->dense && !o->no_gpu_index && access(auto_idx, R_OK) == 0) idx = auto_idx;
    int predictors = has_predictors(m), crit = HC_CRIT_GATE;
    float *thr = f->thr = malloc(sizeof(float) * (size_t)m->hp.n_layer);
    int calib = thr ? read_calibration(m, &crit, thr, err, errlen) : -1;
    if (calib < 0) {
        if (!thr) snprintf(err, errlen, "%s: out of memory", m->path);
        hc_ffn_free(f);
        return NULL;
    }
    if (idx == auto_idx && !auto_index_usable(idx, o->device)) idx = NULL;
    open_device(f, o, o->gpu_index || o->gpu_layers > 0 || o->device, log);
    if (f->cl && place_dense(f, m, o, log, err, errlen)) {
        hc_ffn_free(f);
        return NULL;
    }
    int every_neuron = f->place && hc_place_ffn_layers(f->place) == m->hp.n_layer;
    if (every_neuron && idx) {   /* still read: a bad index given is refused */
        hc_gpuidx *g = hc_gpuidx_load(idx, m->hp.n_layer, m->hp.n_ff, err, errlen);
        if (!g) {
            hc_ffn_free(f);
            return NULL;
        }
        hc_gpuidx_free(g);
        fprintf(log, "hybrid: %s: not needed: every FFN neuron is on the device\n", idx);
        idx = NULL;
    }
    if (o->dense || !(o->sparse || o->have_threshold || predictors || idx || calib)) return f;
    /* the device runs its layers' FFN dense: the sparse one (and its threshold) is the CPU's */
    int on_device = f->place ? hc_place_ffn_layers(f->place) : 0;
    const char *asked = o->have_threshold ? "--sparse-threshold" : o->sparse ? "--sparse"
                      : predictors ? "the model's predictors" : calib ? "the model's calibrated thresholds" : "--gpu-index";
    if (every_neuron) {
        hc_warn("%s: not used: every layer's FFN is on the device, where it runs dense", asked);
        return f;
    }
    if (on_device)
        hc_warn("%s: the FFN of the first %d of %d layers runs dense on the device; the sparse FFN computes the rest",
                asked, on_device, m->hp.n_layer);
    if (hc_sparse_check(m, msg, sizeof msg)) {
        /* e.g. an INT4-GPTQ ffn_down_t: the dense FFN computes the same model */
        hc_warn("%s; running the dense FFN%s", msg, idx ? " (GPU index not used)" : "");
        return f;
    }
    if (make_sparse(f, m, o, predictors, calib, crit, thr, log, err, errlen) || (idx && place_hot(f, m, o, idx, log, err, errlen))) {
        hc_ffn_free(f);
        return NULL;
    }
    return f;
}

int hc_ffn_is_sparse(const hc_ffn *f) { return f->sparse != NULL; }

void hc_ffn_attach(hc_ffn *f, hc_ctx_params *p)
{
    p->place = f->place;
    if (f->sparse) {
        hc_sparse_attach(f->sparse, p);
    } else if (f->verbose) {
        p->ffn = timed_dense;
        p->ffn_user = f;
    }
}

void hc_ffn_report(const hc_ffn *f, FILE *out)
{
    if (f->sparse) hc_sparse_report(f->sparse, out, f->verbose);
    else if (f->verbose && f->dense_tokens)
        fprintf(out, "dense: FFN time %.2f ms for %llu tokens\n", f->dense_s * 1e3, (unsigned long long)f->dense_tokens);
    uint64_t n, bytes, launches;
    double s;
    if (f->verbose && f->dev && !f->dev->ops->transfers(f->dev, &n, &bytes, &s, &launches) && n) {
        char sz[32];
        fprintf(out, "device transfers: %llu (residual stream, FFN exchanges, logits), %s, %.1f us each on the device, "
                "%.2f ms in all; %llu kernel launches\n", (unsigned long long)n, hc_format_size(bytes, sz, sizeof sz),
                s * 1e6 / (double)n, s * 1e3, (unsigned long long)launches);
    }
    hc_kernel_time kt[8];
    int nk;
    double idle, busy = 0;
    if (!f->verbose || !f->dev || !f->dev->ops->kernel_times || f->dev->ops->kernel_times(f->dev, kt, 8, &nk, &idle) ||
        !nk)
        return;
    for (int i = 0; i < nk; i++) busy += kt[i].seconds;
    fprintf(out, "device kernels: %.2f ms between them; the most costly %d, %.2f ms:", idle * 1e3, nk, busy * 1e3);
    for (int i = 0; i < nk; i++)
        fprintf(out, "%s %s %.2f ms (%llu, %.1f us each)", i ? ";" : "", kt[i].name, kt[i].seconds * 1e3,
                (unsigned long long)kt[i].launches, kt[i].seconds * 1e6 / (double)kt[i].launches);
    fputc('\n', out);
}

void hc_ffn_free(hc_ffn *f)
{
    if (!f) return;
    hc_sparse_free(f->sparse);
    free(f->thr);
    hc_place_free(f->place);
    if (f->dev) f->dev->ops->free(f->dev);
    hc_cl_free(f->cl);
    free(f);
}
