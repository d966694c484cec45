/* hc-profile's pieces: the profiling run over a corpus, shard merging, the
 * PowerInfer import and the per-layer summary / plot. Each returns an
 * hc_stats (common/stats.h) or fills a summary; errors are one line in err. */
#ifndef HC_PROFILE_H
#define HC_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include "stats.h"

/* |h| > T counts as active; SwiGLU's h is almost never exactly 0, so SiLU
 * models need a threshold. ReLU models default to 0 (h != 0). */
#define HC_SILU_THRESHOLD 0.01f
/* Corpus identity of one shard: "<corpus id> shard=I/N" (merge drops it
 * again when all N shards come together). */
#define HC_SHARD_TAG " shard="

typedef struct {
    const char *model, *corpus;  /* paths */
    int ctx;                     /* window length incl. BOS; 0: min(512, model context) */
    int64_t max_tokens;          /* corpus tokens to use; 0: all */
    int n_threads;
    int threshold_set;
    float threshold;
    int shard_i, shard_n;        /* windows w with w % shard_n == shard_i */
} hc_profile_opts;

/* eval_s (may be NULL) receives the seconds spent evaluating windows
 * (without loading and tokenizing). */
hc_stats *hc_profile_run(const hc_profile_opts *o, double *eval_s, char *err, size_t errlen);

/* Sum of n stats (paths name them in messages); refuses inputs that differ
 * in model, activation, threshold, shape or ctx. */
hc_stats *hc_stats_merge(hc_stats *const *in, const char *const *paths, int n, char *err, size_t errlen);

/* PowerInfer's DIR/activation_{0..L-1}.pt. model_path (may be NULL) gives the
 * model identity and is checked against the files; n_tokens 0: unknown,
 * store the largest count (the smallest token count consistent with them). */
hc_stats *hc_import_powerinfer(const char *dir, const char *model_path, uint64_t n_tokens,
                               char *err, size_t errlen);

typedef struct {
    uint32_t neurons;
    double mean_rate;        /* mean over neurons of count / n_tokens */
    double cover[3];         /* fraction of neurons (hottest first) holding 80/90/99% of activations */
} hc_layer_summary;
extern const int hc_cover_pct[3];   /* 80, 90, 99 */

void hc_stats_summarize(const hc_stats *s, uint32_t layer, hc_layer_summary *out);
/* Sorted activation-frequency curves of every layer, log-log, atomically to path. */
int hc_stats_svg(const hc_stats *s, const char *title, const char *path, char *err, size_t errlen);

#endif
