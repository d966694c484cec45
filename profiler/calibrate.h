/* hc-profile calibrate: per-layer sparsity thresholds for the sparse FFN
 * (runtime/sparse.h, criteria gate and contribution), chosen so that a
 * fraction S of the neurons is skipped on a corpus, and written into a copy
 * of the model (docs/formats.md, docs/design/sparse-hybrid.md). */
#ifndef HC_CALIBRATE_H
#define HC_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *model, *corpus, *output;
    double target;           /* S in [0, 1): fraction of neurons to skip in every layer */
    int criterion;           /* enum hc_sparse_criterion */
    int global;              /* one threshold for all layers (gate only): the quantile of every
                              * layer's values together, from one pass with no neuron skipped */
    int ctx;                 /* window length; 0: min(512, the model's context) as hc-run --perplexity */
    int n_threads;
} hc_calib_opts;

typedef struct {
    float threshold;         /* keep a neuron iff its criterion c != 0 and c >= threshold */
    uint64_t values;         /* criterion values seen (tokens x neurons) */
    uint64_t skipped;        /* of them below the threshold or 0 */
} hc_calib_layer;

/* Calibrates every layer (in order, each with the layers before it already
 * sparse) and writes o->output; layers[n_layer] receives the thresholds. 0,
 * or -1 with one line in err (and no output file). */
int hc_calibrate(const hc_calib_opts *o, hc_calib_layer **layers, int *n_layer, char *err, size_t errlen);

/* The k-th smallest (0-based, k < n) of n finite floats >= 0, exactly; v is
 * reordered. O(n) (a radix selection on the float bits). */
float hc_select_kth(float *v, size_t n, size_t k);

#endif
