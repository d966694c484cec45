/* Adding statistics shards. Counts are integers and add exactly; the sums
 * of |h| are multiples of 2^-24 (see profile_run.c), so they add exactly too
 * while below 2^29: the merge of all shards equals one run byte for byte. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "profile.h"

/* Inputs must describe the same model and the same counting rule. */
static int same_kind(const hc_stats *a, const char *pa, const hc_stats *b, const char *pb, char *err, size_t errlen)
{
    char va[64], vb[64];
    const char *what = NULL;
#define DIFF(name, fmt, x, y) if (!what && (x) != (y)) { what = name; snprintf(va, sizeof va, fmt, x); snprintf(vb, sizeof vb, fmt, y); }
    if (strcmp(a->arch, b->arch) != 0) { what = "arch"; snprintf(va, sizeof va, "%s", a->arch); snprintf(vb, sizeof vb, "%s", b->arch); }
    if (!what && strcmp(a->activation, b->activation) != 0) {
        what = "activation"; snprintf(va, sizeof va, "%s", a->activation); snprintf(vb, sizeof vb, "%s", b->activation);
    }
    DIFF("ffn_hash", "%016" PRIx64, a->ffn_hash, b->ffn_hash)
    DIFF("n_layer", "%" PRIu32, a->n_layer, b->n_layer)
    DIFF("n_ff", "%" PRIu32, a->n_ff, b->n_ff)
    DIFF("n_embd", "%" PRIu32, a->n_embd, b->n_embd)
    DIFF("threshold", "%g", (double)a->threshold, (double)b->threshold)
    DIFF("ctx", "%" PRIu32, a->ctx, b->ctx)
#undef DIFF
    if (!what) return 0;
    snprintf(err, errlen, "%s: %s is %s but %s in %s (cannot merge)", pb, what, vb, va, pa);
    return -1;
}

/* "ID shard=I/N" -> length of ID, *i, *n; or -1 when there is no shard tag. */
static int shard_of(const char *corpus, int *i, int *n)
{
    const char *t = NULL;
    for (const char *p = corpus; (p = strstr(p, HC_SHARD_TAG)); p++) t = p;
    char end;
    if (!t || sscanf(t + strlen(HC_SHARD_TAG), "%d/%d%c", i, n, &end) != 2) return -1;
    return (int)(t - corpus);
}

/* The merged corpus identity: the unsharded identity when the inputs are
 * exactly shards 0..N-1 of one run, else the identities joined with " + ". */
static void merged_corpus(hc_stats *const *in, int n, char *out, size_t cap)
{
    int i0, n0, len0 = shard_of(in[0]->corpus, &i0, &n0);
    if (len0 >= 0 && n0 == n) {
        unsigned char seen[4096] = { 0 };
        int ok = n <= (int)sizeof seen;
        for (int k = 0; k < n && ok; k++) {
            int i, m, len = shard_of(in[k]->corpus, &i, &m);
            ok = len == len0 && m == n && i >= 0 && i < n && !seen[i] &&
                 memcmp(in[k]->corpus, in[0]->corpus, (size_t)len) == 0;
            if (ok) seen[i] = 1;
        }
        if (ok) { snprintf(out, cap, "%.*s", len0, in[0]->corpus); return; }
    }
    size_t used = 0;
    uint64_t h = HC_FNV_INIT;
    for (int k = 0; k < n; k++) {
        h = hc_fnv1a64(in[k]->corpus, strlen(in[k]->corpus) + 1, h);
        int w = snprintf(out + used, cap - used, "%s%s", k ? " + " : "", in[k]->corpus);
        used = w < 0 || (size_t)w >= cap - used ? cap : used + (size_t)w;
    }
    if (used >= cap) snprintf(out, cap, "merge of %d corpora fnv=%016" PRIx64, n, h);
}

hc_stats *hc_stats_merge(hc_stats *const *in, const char *const *paths, int n, char *err, size_t errlen)
{
    if (n < 1) { snprintf(err, errlen, "nothing to merge"); return NULL; }
    for (int k = 1; k < n; k++)
        if (same_kind(in[0], paths[0], in[k], paths[k], err, errlen)) return NULL;
    hc_stats *o = hc_stats_new(in[0]->n_layer, in[0]->n_ff);
    if (!o) { snprintf(err, errlen, "out of memory"); return NULL; }
    memcpy(o->arch, in[0]->arch, sizeof o->arch);
    memcpy(o->activation, in[0]->activation, sizeof o->activation);
    o->n_embd = in[0]->n_embd;
    o->ctx = in[0]->ctx;
    o->threshold = in[0]->threshold;
    o->ffn_hash = in[0]->ffn_hash;
    merged_corpus(in, n, o->corpus, sizeof o->corpus);
    size_t total = (size_t)o->n_layer * o->n_ff;
    for (int k = 0; k < n; k++) {
        if (__builtin_add_overflow(o->n_tokens, in[k]->n_tokens, &o->n_tokens)) {
            snprintf(err, errlen, "%s: token count overflows", paths[k]);
            hc_stats_free(o);
            return NULL;
        }
        for (size_t j = 0; j < total; j++) {
            o->count[j] += in[k]->count[j];   /* <= n_tokens: cannot overflow once n_tokens did not */
            o->sum[j] += in[k]->sum[j];
        }
    }
    return o;
}
