/* The sparse FFN: an hc_ffn_fn (hc_ctx_params.ffn) that computes only the neurons that matter,
 * optionally with a layer's hot neurons on an OpenCL device (hybrid).
 *
 * Which neurons are computed, per token:
 *  - predictor (the model has fc1/fc2 in every layer and use_predictor):
 *    p = fc2 · relu(fc1 · ffn_inp) on the residual stream before the FFN norm,
 *    as PowerInfer feeds LLaMA; neuron j is a candidate iff p_j >= threshold
 *    (PowerInfer skips p < threshold). Candidates then follow the rule below
 *    with t_act = 0 (a ReLU zero still skips its up and down rows: exact).
 *  - otherwise every neuron is a candidate and t_act = threshold.
 * For a candidate the gate row is computed, a = act(gate·x); the up row and
 * the down row (ffn_down_t, or ffn_down made into rows: sparse.c) only when a != 0 and |a| >= t_act.
 * ReLU with threshold 0 is exact; SiLU with threshold T > 0 is an
 * approximation that saves the up and down rows of neurons with
 * |silu(gate)| < T (the gate must be computed for every neuron to know).
 *
 * Calibrated thresholds (hc-profile calibrate; docs/design/sparse-hybrid.md):
 * layer_thr gives each layer its own t_act, on one of two criteria:
 *  - HC_CRIT_GATE: c = |act(gate)|, the rule above with t_act = layer_thr[l];
 *  - HC_CRIT_CONTRIBUTION: c = |act(gate)·up|·‖down_j‖ (hc_contribution),
 *    what neuron j adds to the output: gate and up rows are computed for
 *    every candidate with a != 0, the down row only when c != 0 and
 *    c >= layer_thr[l]; only the down rows are saved.
 * observe, when set, receives every row's criterion values [B][n_ff] (0 for
 * neurons not computed) before the keep rule, for the calibration.
 *
 * With a device part (hc_sparse_set_hot), the device computes the layer's hot
 * neurons while the pool threads compute the cold ones; out = cold + hot.
 * B > 1 rows (prompts, perplexity) are computed together: the gate for all
 * rows with the batched kernel, then up and down only for the union of the
 * neurons the rows keep, each row's h being 0 where it does not keep a neuron;
 * every token still gets its own neuron set, and its results are bit for bit
 * those of computing it alone. With a device, the B rows are queued on it
 * before the CPU computes the cold neurons, and waited for at the end; or,
 * when the layer's residual stream is on that device (forward.h,
 * hc_ctx_ffn_device_share), their sum stays there and nothing waits: the
 * CPU's out is the cold share, and the device's counts join the stats when
 * they are asked for.
 * Results do not depend on the thread count. */
#ifndef HC_SPARSE_H
#define HC_SPARSE_H

#include <stdio.h>
#include "model.h"
#include "opencl.h"

enum hc_sparse_criterion { HC_CRIT_GATE = 0, HC_CRIT_CONTRIBUTION = 1 };
/* The calibration keys of a model (docs/formats.md, written by hc-profile calibrate). */
#define HC_KEY_SPARSE_CRITERION "hotcold.sparse_criterion"     /* string: gate | contribution */
#define HC_KEY_SPARSE_THRESHOLDS "hotcold.sparse_thresholds"   /* float32[n_layer] */
#define HC_KEY_SPARSE_TARGET "hotcold.sparse_target"           /* float32: the skipped fraction asked for */
/* "gate" / "contribution" -> enum value, else -1; and back. */
int hc_sparse_criterion_parse(const char *name);
const char *hc_sparse_criterion_name(int criterion);

/* Observer of the criterion values of B rows of a layer (calibration). */
typedef void (*hc_sparse_observe_fn)(void *user, int layer, const float *crit, int B, int n_ff);

typedef struct {
    float threshold;     /* predictor threshold, or activation threshold t_act (see above) */
    int use_predictor;   /* use fc1/fc2 when every layer has them */
    int check;           /* per-layer recall against the true active set (costs a dense gate + up) */
    int criterion;       /* enum hc_sparse_criterion */
    const float *layer_thr;  /* [n_layer] t_act per layer (copied), or NULL: threshold (0 with a predictor) */
    hc_sparse_observe_fn observe;
    void *observe_user;
} hc_sparse_params;

/* The contribution criterion of a neuron: |h| · ‖down_j‖ with h = act(gate)·up
 * (the one definition the calibration and the sparse FFN use). */
static inline float hc_contribution(float h, float down_norm) { return (h < 0 ? -h : h) * down_norm; }

typedef struct hc_sparse hc_sparse;

/* 0 if the sparse FFN can run model m, else -1 with one line in err naming
 * the first weight it cannot take: the down projection must be ggml rows
 * (ffn_down_t, else ffn_down) or an INT4-GPTQ ffn_down, so a caller can fall
 * back to the dense FFN. */
int hc_sparse_check(const hc_model *m, char *err, size_t errlen);
/* Down rows of every layer are made here (may take a while for a large
 * model without ffn_down_t). NULL + one line in err (hc_sparse_check's
 * refusal included). */
hc_sparse *hc_sparse_new(const hc_model *m, const hc_sparse_params *p, char *err, size_t errlen);
void hc_sparse_free(hc_sparse *s);
/* 1 if neurons are chosen by the predictor. */
int hc_sparse_uses_predictor(const hc_sparse *s);
/* 1 if the CPU's copies of the gate and up rows (up without a gate) are in
 * chunks of 16 blocks (x16.h: Q4_0 and Q8_0 where their kernels read those). */
int hc_sparse_chunked(const hc_sparse *s);
/* Layer's down rows: one row of n_embd per neuron, rows = n_ff. */
const hc_weight *hc_sparse_down(const hc_sparse *s, int layer);
/* Layer's ‖down_j‖ per neuron with the contribution criterion, else NULL. */
const float *hc_sparse_down_norm(const hc_sparse *s, int layer);
/* Make the device compute neurons bucket[0..k) (ascending) of a layer; the
 * sparse FFN owns dev from now on. The CPU computes the others; k = 0 (dev
 * NULL) puts the layer back on the CPU. 0 or -1 (out of memory). */
int hc_sparse_set_hot(hc_sparse *s, int layer, const int32_t *bucket, int k, hc_cl_layer *dev);
/* Make the contexts created with p run s as their FFN (p->ffn / ffn_user). */
void hc_sparse_attach(hc_sparse *s, hc_ctx_params *p);

typedef struct {
    uint64_t tokens;          /* token-layer evaluations */
    uint64_t computed;        /* neurons whose down rows were used */
    uint64_t bytes;           /* FFN weight bytes the tokens needed (each token's own rows) */
    uint64_t predicted;       /* candidates chosen by the predictor (predictor mode) */
    uint64_t served_cpu, served_dev;  /* non-zero activations computed by each side */
    uint64_t truth, hit;      /* check: truly active neurons, and those computed */
    uint64_t steps, kept;     /* CPU calls (a step's rows at once) and the neurons some row of each kept:
                               * the up and down rows a batch reads */
} hc_sparse_stats;

/* Totals over all layers (layer < 0) or one layer. */
hc_sparse_stats hc_sparse_get_stats(hc_sparse *s, int layer);
/* A one-line device failure (the hot neurons then run on the CPU), or NULL. */
const char *hc_sparse_device_error(const hc_sparse *s);
/* Summary lines on f: skipped fraction and FFN weight bytes read per token
 * against the dense FFN's (and predicted fraction, recall with check), FFN
 * wall time, CPU time, device time and share; per_layer adds a line per layer. */
void hc_sparse_report(hc_sparse *s, FILE *f, int per_layer);

#endif
