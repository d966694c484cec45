/* Which FFN a model runs with, decided as hc-run decides it, for any
 * program: the dense FFN, the sparse FFN (sparse.h) or the sparse FFN with a
 * .gpuidx's hot neurons on an OpenCL device (hybrid.h).
 *
 * The sparse FFN runs when asked for (sparse), when a threshold is given,
 * when every layer has a predictor (fc1/fc2), or when there is a GPU index:
 * gpu_index, else MODEL.generated.gpuidx next to the model when it exists
 * (unless no_gpu_index) and the OpenCL device is a GPU (on a CPU device the
 * split usually costs more than it saves: a warning says it is not used).
 * dense forbids all of it. A model the sparse FFN
 * cannot take (hc_sparse_check: e.g. an INT4-GPTQ ffn_down_t) runs dense with a warning; an
 * index that cannot be placed (stale for the budget, no device, too large)
 * leaves every neuron on the CPU with a warning. */
#ifndef HC_FFN_SETUP_H
#define HC_FFN_SETUP_H

#include <stdint.h>
#include <stdio.h>
#include "model.h"

typedef struct {
    int sparse;              /* the sparse FFN even without predictors or index */
    int dense;               /* the dense FFN whatever the model or index */
    int have_threshold;      /* threshold given: predictor / activation threshold (sparse.h) */
    float threshold;
    const char *gpu_index;   /* .gpuidx; NULL: MODEL.generated.gpuidx when it exists */
    int no_gpu_index;        /* do not look for MODEL.generated.gpuidx */
    uint64_t vram_budget;    /* device bytes for this model; 0: the device's memory less a reserve */
    const char *device;      /* OpenCL device number (--device); NULL: $HC_OPENCL_DEVICE, else the first GPU */
    int gpu_layers;          /* -ngl: the first N layers wholly on the device; -1: the budget decides */
    int n_ctx;               /* the context the KV cache is priced for */
    int kv_bytes;            /* ... at these bytes a position's element of k and v (hc_kv_bytes); 0: f32's */
    int batch_invariant;     /* the device's rows keep their bits whatever the batch (HC_CL_BATCH_INVARIANT) */
    int verbose;             /* the sparse FFN checks its recall; the dense FFN is timed */
} hc_ffn_opts;

typedef struct hc_ffn hc_ffn;

/* Device memory a run uses unasked (--vram-budget's default): all but a
 * reserve for the driver and other programs, 1/16 of it and at least 256 MiB. */
uint64_t hc_default_budget(uint64_t mem);

/* The FFN for model m; what was chosen is said on log (sparse mode, device,
 * hot neurons). NULL + one line in err when a chosen part fails to load (the
 * sparse FFN's down rows, the index file). */
hc_ffn *hc_ffn_setup(const hc_model *m, const hc_ffn_opts *o, FILE *log, char *err, size_t errlen);
/* 1 when f is the sparse FFN: it reads its own copies of the FFN's rows. */
int hc_ffn_is_sparse(const hc_ffn *f);
/* Make the contexts created with p run f (nothing for the plain dense FFN). */
void hc_ffn_attach(hc_ffn *f, hc_ctx_params *p);
/* The FFN's figures on out: the sparse FFN's report (per layer with verbose),
 * or the dense FFN's time with verbose. */
void hc_ffn_report(const hc_ffn *f, FILE *out);
void hc_ffn_free(hc_ffn *f);

#endif
