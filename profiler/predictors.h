/* hc-profile predictors: train PowerInfer's per-layer activation predictors
 * (fc2 · relu(fc1 · x), no bias) from a corpus and write the model in
 * PowerInfer's sparse GGUF variant (PWRI). Method, threshold convention and
 * memory policy: docs/design/predictors.md.
 *
 * A neuron is predicted active iff fc2·relu(fc1·x) >= powerinfer.sparse_threshold
 * (the raw fc2 output, no sigmoid; PowerInfer skips when < threshold). Every
 * layer's fc2 is scaled so that one global threshold, +1 or -1, holds for all
 * layers (predictors.c). */
#ifndef HC_PREDICTORS_H
#define HC_PREDICTORS_H

#include <stddef.h>
#include <stdint.h>
#include "model.h"
#include "tokenizer.h"

/* The default number of epochs gives at least this many Adam steps: fewer
 * leave the predictor underfitted, flagging many inactive neurons at the
 * calibrated recall (docs/design/predictors.md, "Training length"). */
#define HC_PRED_MIN_STEPS 8000
/* The default Adam step is min(0.003, this / n_embd): a step moves every
 * fc1 weight by about the step size, so a hidden unit's input moves by about
 * step · n_embd; larger steps killed the hidden units of wide models
 * (docs/design/predictors.md, "Training length"). */
#define HC_PRED_LR_WIDTH 0.3f

typedef struct {
    const char *model, *corpus, *output, *svg;   /* output/svg may be NULL (no file) */
    int rank;              /* predictor hidden size; 0: n_embd/4 (multiple of 8, >= 8) */
    int rank_auto;         /* try a few ranks per layer, keep the cheapest (see docs) */
    int epochs;            /* 0: at least 10 and HC_PRED_MIN_STEPS minibatch steps */
    int batch;             /* minibatch rows; 0: 32 */
    float lr;              /* Adam step; 0: min(3e-3, HC_PRED_LR_WIDTH / n_embd) (cosine decay to 0) */
    float pos_weight;      /* BCE weight of active targets; 0: sqrt(inactive/active), >= 1 */
    float recall;          /* target recall of active neurons; 0: 0.99 */
    float holdout;         /* fraction of windows held out; 0: 0.2 */
    int act_threshold_set; /* active means |h| > T: default 0 (ReLU), HC_SILU_THRESHOLD (SiLU) */
    float act_threshold;
    int ctx;               /* window length incl. BOS; 0: min(512, model context) */
    int64_t max_tokens;    /* corpus tokens to use; 0: all */
    uint64_t mem;          /* bytes for kept samples; 0: 2 GiB */
    uint64_t seed;
    int n_threads;         /* >= 1 */
    uint32_t pred_type;    /* GGML_TYPE_F32 or GGML_TYPE_F16 */
} hc_pred_opts;

typedef struct {
    int rank;
    float threshold;                 /* calibrated threshold before fc2 was rescaled */
    double recall, precision;        /* on held-out test tokens, with the stored weights */
    double pred_sparsity, true_sparsity;  /* fractions of (token, neuron) pairs predicted / truly inactive */
    uint64_t params, bytes;          /* fc1 + fc2 */
    double loss;                     /* mean training loss of the last epoch */
    double train_s;
} hc_pred_layer;

typedef struct {
    int n_layer, n_ff, n_embd;
    int64_t n_tokens;                /* corpus tokens evaluated */
    int64_t n_train, n_calib, n_test;/* tokens kept per layer in each set */
    int64_t seen_train, seen_calib, seen_test;  /* tokens of each set before subsampling */
    float act_threshold;
    float global_threshold;          /* powerinfer.sparse_threshold: +1 or -1 */
    double collect_s, train_s;
    int epochs, batch;               /* what training used */
    float lr;
    hc_pred_layer *layers;           /* [n_layer], malloc'd */
} hc_pred_report;

/* Everything: collect, train, calibrate, evaluate, write o->output (and
 * o->svg). 0, or -1 with a one-line message in err. rep->layers must be
 * freed by the caller (also after a failure). */
int hc_predictors_run(const hc_pred_opts *o, hc_pred_report *rep, char *err, size_t errlen);

/* The predictor type when none is asked for: F32 for a model whose FFN
 * (blk.0.ffn_up) is F32, else F16. 0, or -1 with a message in err. */
int hc_pred_default_type(const char *model, uint32_t *type, char *err, size_t errlen);

/* ---- pieces, shared by the files of this module and the tests ---- */

/* Samples of one layer: x rows [n][n_embd] (f32) and active-neuron bit rows
 * [n][ceil(n_ff/8)] (bit j of row i: neuron j active on sample i). */
typedef struct {
    int64_t n;
    int n_embd, n_ff;
    float *x;
    uint8_t *y;
} hc_pred_set;

static inline size_t hc_pred_ybytes(int n_ff) { return ((size_t)n_ff + 7) / 8; }

/* A trained predictor: w1 [r][n_embd] (fc1), w2 [n_ff][r] (fc2), row-major f32. */
typedef struct {
    int r, n_embd, n_ff;
    float *w1, *w2;
} hc_pred_net;

typedef struct {
    int rank, epochs, batch;
    float lr, pos_weight;
    uint64_t seed;
} hc_pred_train_opts;

/* Train a predictor on s (Adam, weighted BCE on the logits fc2·relu(fc1·x)).
 * Products on pool (NULL: the caller); the result depends on the inputs
 * alone, not on the pool's size. loss (may be NULL): mean loss of the last
 * epoch. 0, or -1 (out of memory). */
int hc_pred_train(hc_pool *pool, const hc_pred_set *s, const hc_pred_train_opts *o, hc_pred_net *net, double *loss);
void hc_pred_net_free(hc_pred_net *net);
/* Round the weights as they will be stored (f16 round trip for F16; none for F32). */
void hc_pred_net_round(hc_pred_net *net, uint32_t type);

/* The threshold t reaching recall R on s: at least ceil(R * positives) of the
 * active pairs have a logit >= t. 0; 1 (t untouched) if s has no active pair;
 * -1 out of memory. */
int hc_pred_calibrate(hc_pool *pool, const hc_pred_net *net, const hc_pred_set *s, double recall, float *t);

typedef struct {
    uint64_t tp, fp, fn, tn;
} hc_pred_counts;
/* Confusion counts of "logit >= t" against the true active sets of s. */
int hc_pred_evaluate(hc_pool *pool, const hc_pred_net *net, const hc_pred_set *s, float t, hc_pred_counts *c);

/* Active (token, neuron) pairs of s. */
uint64_t hc_pred_count_active(const hc_pred_set *s);

enum { HC_PRED_TRAIN, HC_PRED_CALIB, HC_PRED_TEST, HC_PRED_NSETS };
/* Run the corpus windows through m and keep, per layer, reservoir samples of
 * (FFN input, active set) in sets[k][layer] for the training, calibration
 * and test windows (see the docs). Fills the token counts of rep. */
int hc_pred_collect(const hc_pred_opts *o, const hc_model *m, hc_pred_set *sets[HC_PRED_NSETS],
                    hc_pred_report *rep, char *err, size_t errlen);
void hc_pred_sets_free(hc_pred_set *sets, int n_layer);

/* Before the work: 0 when the least the output can take (the input's
 * tensors but an old fc1 and fc2: ffn_down_t has ffn_down's bytes) can be
 * reserved at o->output now, else -1 and af_check's message in err, so that
 * a disk without room refuses before collection and training, not after. */
int hc_pred_check_room(const hc_model *m, const hc_pred_opts *o, char *err, size_t errlen);
/* The PWRI model to o->output (atomic): nets[layer] are the stored predictors. */
int hc_pred_write(const hc_model *m, const hc_pred_net *nets, const hc_pred_opts *o, const hc_pred_report *rep,
                  char *err, size_t errlen);
/* Per-layer recall, precision, sparsity and predictor size, atomically to path. */
int hc_pred_svg(const hc_pred_report *rep, const char *title, const char *path, char *err, size_t errlen);

#endif
