/* Choosing and building a model's FFN (see ffn_setup.h). */
#include "ffn_setup.h"

#include <stdlib.h>
#include <unistd.h>
#include "cli.h"
#include "gpuidx.h"
#include "hybrid.h"
#include "opencl.h"
#include "sparse.h"

struct hc_ffn {
    int verbose;
    hc_sparse *sparse;       /* NULL: the dense FFN */
    hc_cl *cl;               /* the device of the hot neurons, or NULL */
    double dense_s;          /* time in the dense FFN (verbose) */
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
}

static int has_predictors(const hc_model *m)
{
    int all = 1;
    for (int l = 0; l < m->hp.n_layer; l++) all &= m->layers[l].fc1.kind != HC_WEIGHT_NONE;
    return all;
}

/* The sparse FFN with its threshold, said on log. -1 with err. */
static int make_sparse(hc_ffn *f, const hc_model *m, const hc_ffn_opts *o, int predictors, FILE *log, char *err,
                       size_t errlen)
{
    hc_sparse_params sp = { .threshold = o->have_threshold ? o->threshold : predictors ? m->hp.sparse_threshold : 0.0f,
                            .use_predictor = 1, .check = o->verbose };
    double t0 = hc_now();
    if (!(f->sparse = hc_sparse_new(m, &sp, err, errlen))) return -1;
    fprintf(log, "sparse: %s, threshold %g%s (%.2f ms to prepare the down rows)\n",
            predictors ? "neurons chosen by the predictor" : m->hp.act == HC_ACT_RELU ? "ReLU skips inactive neurons"
                                                                                      : "SiLU: skips |silu(gate)| < threshold",
            sp.threshold, predictors ? " on fc2 · relu(fc1 · x)" : "", (hc_now() - t0) * 1e3);
    return 0;
}

/* The hot neurons of index idx on a device, said on log; any reason not to
 * is a warning and leaves them on the CPU. -1 with err if idx cannot be read. */
static int place_hot(hc_ffn *f, const hc_model *m, const hc_ffn_opts *o, const char *idx, FILE *log, char *err,
                     size_t errlen)
{
    hc_gpuidx *g = hc_gpuidx_load(idx, m->hp.n_layer, m->hp.n_ff, err, errlen);
    if (!g) return -1;
    char sz[2][32], msg[512];
    if (o->vram_budget && o->vram_budget < g->vram_capacity) {
        /* PowerInfer treats such an index as stale */
        hc_warn("%s: made for %s of device memory (split.vram_capacity), more than --vram-budget %s; running on the "
                "CPU only", idx, hc_format_size(g->vram_capacity, sz[0], sizeof sz[0]),
                hc_format_size(o->vram_budget, sz[1], sizeof sz[1]));
        hc_gpuidx_free(g);
        return 0;
    }
    f->cl = hc_hybrid_setup(f->sparse, m, g, o->vram_budget, msg, sizeof msg);
    if (!f->cl) {
        hc_warn("%s: %s; running on the CPU only", idx, msg);
    } else {
        long hot = 0;
        for (int l = 0; l < m->hp.n_layer; l++) hot += g->n_gpu[l];
        fprintf(log, "opencl: platform '%s', device '%s'%s\n", hc_cl_platform(f->cl), hc_cl_device(f->cl),
                hc_cl_is_gpu(f->cl) ? "" : " (a CPU device: the 'device' share runs on this machine's cores)");
        fprintf(log, "hybrid: %s: %ld of %ld neurons on the device (%s)\n", idx, hot, (long)m->hp.n_layer * m->hp.n_ff,
                hc_format_size(hc_hybrid_bytes(m, f->sparse, g), sz[0], sizeof sz[0]));
    }
    hc_gpuidx_free(g);
    return 0;
}

/* MODEL.generated.gpuidx is used unasked only with a GPU: on a CPU OpenCL
 * device (PoCL) the split runs on the same cores and usually costs more than
 * it saves (docs/measurements.md, "Sparse and hybrid FFN"). --gpu-index FILE
 * still forces it. */
static int auto_index_usable(const char *idx)
{
    char err[512];
    hc_cl *cl = hc_cl_open(err, sizeof err);
    int gpu = cl && hc_cl_is_gpu(cl);
    if (!gpu && cl)
        hc_warn("%s: not used: the OpenCL device '%s' is a CPU device, where the split usually costs more "
                "than it saves; running on the CPU (--gpu-index FILE forces it)", idx, hc_cl_device(cl));
    else if (!gpu)
        hc_warn("%s: not used: %s; running on the CPU", idx, err);
    hc_cl_free(cl);
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
    int predictors = has_predictors(m);
    if (o->dense || !(o->sparse || o->have_threshold || predictors || idx)) return f;
    if (hc_sparse_check(m, msg, sizeof msg)) {
        /* e.g. INT4-GPTQ: no sparse kernels; the dense FFN computes the same model */
        hc_warn("%s; running the dense FFN%s", msg, idx ? " (GPU index not used)" : "");
        return f;
    }
    if (idx == auto_idx && !auto_index_usable(idx)) {
        idx = NULL;
        if (!(o->sparse || o->have_threshold || predictors)) return f;
    }
    if (make_sparse(f, m, o, predictors, log, err, errlen) || (idx && place_hot(f, m, o, idx, log, err, errlen))) {
        hc_ffn_free(f);
        return NULL;
    }
    return f;
}

void hc_ffn_attach(hc_ffn *f, hc_ctx_params *p)
{
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
    else if (f->verbose) fprintf(out, "dense: FFN time %.2f ms\n", f->dense_s * 1e3);
}

void hc_ffn_free(hc_ffn *f)
{
    if (!f) return;
    hc_sparse_free(f->sparse);
    hc_cl_free(f->cl);
    free(f);
}
