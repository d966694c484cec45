/* PowerInfer's activation statistics (DIR/activation_{l}.pt, one 1-D tensor
 * of per-neuron activation counts per layer) as an hc_stats. Files are paired
 * with layers by the number in their name (PowerInfer's exporter sorts the
 * names as strings, which mixes up layers from 10 on). */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "model_check.h"
#include "profile.h"
#include "stats.h"
#include "ptfile.h"

#define MAX_LAYERS 4096
#define MAX_NEURONS (1 << 24)   /* per layer, as the model loader's dimension limit */

/* "activation_<digits>.pt" -> layer index, else -1 */
static long layer_of(const char *name)
{
    const char *p = name + strlen("activation_");
    char *end;
    if (strncmp(name, "activation_", strlen("activation_")) != 0 || *p < '0' || *p > '9') return -1;
    long l = strtol(p, &end, 10);
    return strcmp(end, ".pt") == 0 ? l : -1;
}

/* Which layers have a file; the count of layers (highest index + 1). A file
 * for a layer at or past max_layers is refused, not ignored. */
static int scan_dir(const char *dir, long max_layers, const char *why, unsigned char *have, char *err,
                    size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) { snprintf(err, errlen, "%s: cannot open directory", dir); return -1; }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        long l = layer_of(de->d_name);
        if (l < 0) continue;
        if (l >= max_layers) {
            snprintf(err, errlen, "%s/%s: layer %ld, but %s %ld layers", dir, de->d_name, l, why, max_layers);
            closedir(d);
            return -1;
        }
        if (have[l]) {
            snprintf(err, errlen, "%s: two files for layer %ld (%s)", dir, l, de->d_name);
            closedir(d);
            return -1;
        }
        have[l] = 1;
        if (l + 1 > n) n = (int)l + 1;
    }
    closedir(d);
    if (n == 0) { snprintf(err, errlen, "%s: no activation_N.pt files", dir); return -1; }
    for (int l = 0; l < n; l++)
        if (!have[l]) { snprintf(err, errlen, "%s: activation_%d.pt is missing (found up to layer %d)", dir, l, n - 1); return -1; }
    return n;
}

/* With -m, the model's layer count and FFN width bound what the files may
 * declare, before any is inflated; without, MAX_LAYERS and MAX_NEURONS. */
static int model_bounds(const char *path, long *max_layers, int64_t *max_neurons, char *err, size_t errlen)
{
    *max_layers = MAX_LAYERS;
    *max_neurons = MAX_NEURONS;
    if (!path) return 0;
    if (hc_model_check(path, err, errlen) != 0) return -1;
    gguf_file *f = gguf_open(path, err, errlen);
    if (!f) return -1;
    char arch[64];
    int64_t n_layer, n_ff;
    int rc = hc_model_ffn_shape(f, path, arch, &n_layer, &n_ff, err, errlen);
    gguf_close(f);
    if (rc) return -1;
    if (n_layer < *max_layers) *max_layers = n_layer < 0 ? 0 : (long)n_layer;
    if (n_ff < *max_neurons) *max_neurons = n_ff < 0 ? 0 : n_ff;
    return 0;
}

/* Model identity from a GGUF: architecture, shape, FFN hash. */
static int describe_model(hc_stats *s, const char *path, char *err, size_t errlen)
{
    gguf_file *f = gguf_open(path, err, errlen);
    if (!f) return -1;
    char *arch = NULL, key[96];
    int64_t n_embd = 0;
    int rc = gguf_get_str(f, "general.architecture", &arch);
    if (rc == 0) {
        snprintf(key, sizeof key, "%s.embedding_length", arch);
        snprintf(s->arch, sizeof s->arch, "%s", arch);
        rc = gguf_get_int(f, key, &n_embd) != 0 || n_embd <= 0 || n_embd > UINT32_MAX;
    }
    if (rc != 0) snprintf(err, errlen, "%s: architecture or embedding_length missing", path);
    else rc = hc_stats_check_model(s, f, path, err, errlen);   /* layers and n_ff agree */
    s->n_embd = (uint32_t)n_embd;
    s->ffn_hash = hc_ffn_hash(f);
    free(arch);
    gguf_close(f);
    return rc ? -1 : 0;
}

hc_stats *hc_import_powerinfer(const char *dir, const char *model_path, uint64_t n_tokens,
                               char *err, size_t errlen)
{
    unsigned char have[MAX_LAYERS] = { 0 };
    long max_layers;
    int64_t max_neurons;
    if (model_bounds(model_path, &max_layers, &max_neurons, err, errlen)) return NULL;
    int n_layer = scan_dir(dir, max_layers, model_path ? "the model has" : "import-powerinfer reads at most",
                           have, err, errlen);
    if (n_layer < 0) return NULL;
    hc_stats *s = NULL;
    uint64_t max_count = 0, h = HC_FNV_INIT;
    for (int l = 0; l < n_layer; l++) {
        char path[4096];
        int64_t n;
        if (hc_path(path, sizeof path, err, errlen, "%s/activation_%d.pt", dir, l)) goto fail;
        double *v = hc_pt_read_vector(path, s ? (int64_t)s->n_ff : max_neurons, &n, err, errlen);
        if (!v) goto fail;
        if (!s && n > 0 && n <= UINT32_MAX && !(s = hc_stats_new((uint32_t)n_layer, (uint32_t)n))) {
            snprintf(err, errlen, "%s: out of memory", path);
            free(v);
            goto fail;
        }
        if (!s || n != (int64_t)s->n_ff) {
            snprintf(err, errlen, "%s: %" PRId64 " neurons, but %s", path, n,
                     s ? "activation_0.pt has another count" : "a layer needs at least one");
            free(v);
            goto fail;
        }
        int64_t *c = s->count + (size_t)l * s->n_ff;
        for (int64_t i = 0; i < n; i++) {
            /* counts: whole numbers that a double holds exactly */
            if (!(v[i] >= 0 && v[i] <= 9007199254740992.0 && v[i] == floor(v[i]))) {
                snprintf(err, errlen, "%s: element %" PRId64 " = %g is not an activation count", path, i, v[i]);
                free(v);
                goto fail;
            }
            c[i] = (int64_t)v[i];
            if ((uint64_t)c[i] > max_count) max_count = (uint64_t)c[i];
        }
        h = hc_fnv1a64(c, (size_t)n * sizeof *c, h);
        free(v);
    }
    if (n_tokens && n_tokens < max_count) {
        snprintf(err, errlen, "%s: a neuron was active %" PRIu64 " times, more than --tokens %" PRIu64,
                 dir, max_count, n_tokens);
        goto fail;
    }
    s->n_tokens = n_tokens ? n_tokens : max_count;
    snprintf(s->activation, sizeof s->activation, "relu");   /* PowerInfer counts ReLU outputs > 0 */
    snprintf(s->arch, sizeof s->arch, "llama");
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    snprintf(s->corpus, sizeof s->corpus, "powerinfer:%.200s fnv=%016" PRIx64, base, h);
    if (model_path && describe_model(s, model_path, err, errlen) != 0) goto fail;
    return s;
fail:
    hc_stats_free(s);
    return NULL;
}
