/* Activation statistics files: see stats.h for the format. */
#include "stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define STATS_ARCH "hotcold.stats"
#define STATS_VERSION 1
#define K(name) "hotcold.stats." name

hc_stats *hc_stats_new(uint32_t n_layer, uint32_t n_ff)
{
    if (n_layer == 0 || n_ff == 0)
        return NULL;
    size_t n = (size_t)n_layer * n_ff;
    hc_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n_layer = n_layer;
    s->n_ff = n_ff;
    s->count = calloc(n, sizeof *s->count);
    s->sum = calloc(n, sizeof *s->sum);
    if (!s->count || !s->sum) {
        hc_stats_free(s);
        return NULL;
    }
    return s;
}

void hc_stats_free(hc_stats *s)
{
    if (!s)
        return;
    free(s->count);
    free(s->sum);
    free(s);
}

int hc_stats_write(const hc_stats *s, const char *path, char *err, size_t errlen)
{
    char hash[17];
    snprintf(hash, sizeof hash, "%016" PRIx64, s->ffn_hash);
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_GGUF);
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    gguf_set_str(w, "general.architecture", STATS_ARCH);
    gguf_set_u32(w, K("version"), STATS_VERSION);
    gguf_set_str(w, K("arch"), s->arch);
    gguf_set_u32(w, K("n_layer"), s->n_layer);
    gguf_set_u32(w, K("n_ff"), s->n_ff);
    gguf_set_u32(w, K("n_embd"), s->n_embd);
    gguf_set_str(w, K("activation"), s->activation);
    gguf_set_f32(w, K("threshold"), s->threshold);
    gguf_set_u64(w, K("n_tokens"), s->n_tokens);
    gguf_set_str(w, K("ffn_hash"), hash);
    gguf_set_str(w, K("corpus"), s->corpus);
    gguf_set_u32(w, K("ctx"), s->ctx);
    int64_t ne[1] = { s->n_ff };
    for (uint32_t l = 0; l < s->n_layer; l++) {
        char name[GGUF_MAX_NAME + 1];
        size_t off = (size_t)l * s->n_ff;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_count", l);
        int a = gguf_add_tensor(w, name, GGML_TYPE_I64, 1, ne, s->count + off);
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_sum", l);
        int b = gguf_add_tensor(w, name, GGML_TYPE_F64, 1, ne, s->sum + off);
        if (a < 0 || b < 0) {
            snprintf(err, errlen, "%s: cannot add tensor %s", path, name);
            gguf_writer_free(w);
            return -1;
        }
    }
    int rc = gguf_writer_write(w, path, err, errlen);
    gguf_writer_free(w);
    return rc;
}

/* Copy a string KV into a fixed buffer; -1 with a message if missing, mistyped or too long. */
static int get_str(const gguf_file *f, const char *key, char *dst, size_t cap, char *err, size_t errlen)
{
    char *v = NULL;
    int rc = gguf_get_str(f, key, &v);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s %s", f->path, key, rc == -1 ? "is missing" : "is not a string");
        return -1;
    }
    size_t n = strlen(v);
    if (n >= cap) {
        snprintf(err, errlen, "%s: %s is too long (%zu bytes, at most %zu)", f->path, key, n, cap - 1);
        free(v);
        return -1;
    }
    memcpy(dst, v, n + 1);
    free(v);
    return 0;
}

static int getter_fail(const gguf_file *f, const char *key, int rc, const char *type, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s %s", f->path, key, rc == -1 ? "is missing" : "has the wrong type, expected");
    if (rc != -1) {
        size_t n = strlen(err);
        snprintf(err + n, errlen > n ? errlen - n : 0, " %s", type);
    }
    return -1;
}

static int get_u32(const gguf_file *f, const char *key, uint32_t *out, char *err, size_t errlen)
{
    int rc = gguf_get_u32(f, key, out);
    return rc ? getter_fail(f, key, rc, "u32", err, errlen) : 0;
}

static int parse_hash(const char *s, uint64_t *out)
{
    if (strlen(s) != 16)
        return -1;
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        h = h << 4 | (uint64_t)d;
    }
    *out = h;
    return 0;
}

/* The tensor `name` must be 1-D of n_ff elements of `type`. */
static const gguf_tensor *get_vec(const gguf_file *f, const char *name, uint32_t type, uint32_t n_ff,
                                  char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_get_tensor(f, name);
    if (!t) {
        snprintf(err, errlen, "%s: tensor %s is missing", f->path, name);
        return NULL;
    }
    if (t->type != type || t->n_dims != 1 || t->ne[0] != (int64_t)n_ff) {
        snprintf(err, errlen, "%s: tensor %s must be %s [%" PRIu32 "]", f->path, name,
                 ggml_type_name(type), n_ff);
        return NULL;
    }
    return t;
}

/* The scalar KVs of a statistics file, checked. */
typedef struct {
    uint32_t n_layer, n_ff, n_embd, ctx;
    uint64_t n_tokens, hash;
    float threshold;
} stats_header;

static int read_header(const gguf_file *f, stats_header *h, char *err, size_t errlen)
{
    char arch[64];
    uint32_t version;
    char hash_str[32];
    if (get_str(f, "general.architecture", arch, sizeof arch, err, errlen))
        return -1;
    if (strcmp(arch, STATS_ARCH) != 0) {
        snprintf(err, errlen, "%s: not a statistics file (general.architecture is \"%s\", expected \"%s\")",
                 f->path, arch, STATS_ARCH);
        return -1;
    }
    if (get_u32(f, K("version"), &version, err, errlen))
        return -1;
    if (version != STATS_VERSION) {
        snprintf(err, errlen, "%s: statistics version %" PRIu32 " is not supported (expected %d)",
                 f->path, version, STATS_VERSION);
        return -1;
    }
    if (get_u32(f, K("n_layer"), &h->n_layer, err, errlen) || get_u32(f, K("n_ff"), &h->n_ff, err, errlen) ||
        get_u32(f, K("n_embd"), &h->n_embd, err, errlen) || get_u32(f, K("ctx"), &h->ctx, err, errlen))
        return -1;
    int rc;
    if ((rc = gguf_get_u64(f, K("n_tokens"), &h->n_tokens)))
        return getter_fail(f, K("n_tokens"), rc, "u64", err, errlen), -1;
    if ((rc = gguf_get_f32(f, K("threshold"), &h->threshold)))
        return getter_fail(f, K("threshold"), rc, "f32", err, errlen), -1;
    if (!(h->threshold >= 0 && h->threshold < 1e9f)) {   /* what hc-profile --threshold takes */
        snprintf(err, errlen, "%s: %s = %g is not a threshold (a number >= 0 and < 1e9)", f->path, K("threshold"),
                 h->threshold);
        return -1;
    }
    if (get_str(f, K("ffn_hash"), hash_str, sizeof hash_str, err, errlen))
        return -1;
    if (parse_hash(hash_str, &h->hash)) {
        snprintf(err, errlen, "%s: %s is \"%s\", expected 16 lowercase hex digits", f->path, K("ffn_hash"),
                 hash_str);
        return -1;
    }
    if (h->n_layer == 0 || h->n_ff == 0) {
        snprintf(err, errlen, "%s: n_layer and n_ff must be positive", f->path);
        return -1;
    }
    return 0;
}

/* Every tensor is checked against the file before anything is allocated. */
static int check_tensors(const gguf_file *f, uint32_t n_layer, uint32_t n_ff, char *err, size_t errlen)
{
    if (f->n_tensors != (uint64_t)2 * n_layer) {
        snprintf(err, errlen, "%s: %" PRIu64 " tensors, expected %" PRIu64 " (2 per layer for %" PRIu32 " layers)",
                 f->path, f->n_tensors, (uint64_t)2 * n_layer, n_layer);
        return -1;
    }
    for (uint32_t l = 0; l < n_layer; l++) {
        char name[GGUF_MAX_NAME + 1];
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_count", l);
        if (!get_vec(f, name, GGML_TYPE_I64, n_ff, err, errlen))
            return -1;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_sum", l);
        if (!get_vec(f, name, GGML_TYPE_F64, n_ff, err, errlen))
            return -1;
    }
    return 0;
}

/* The counts and sums of every layer into s, each checked. */
static int read_layers(const gguf_file *f, hc_stats *s, char *err, size_t errlen)
{
    const uint32_t n_ff = s->n_ff;
    for (uint32_t l = 0; l < s->n_layer; l++) {
        char name[GGUF_MAX_NAME + 1];
        size_t off = (size_t)l * n_ff;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_count", l);
        memcpy(s->count + off, gguf_get_tensor(f, name)->data, (size_t)n_ff * sizeof *s->count);
        snprintf(name, sizeof name, "blk.%" PRIu32 ".act_sum", l);
        memcpy(s->sum + off, gguf_get_tensor(f, name)->data, (size_t)n_ff * sizeof *s->sum);
        for (uint32_t i = 0; i < n_ff; i++) {
            int64_t c = s->count[off + i];
            double v = s->sum[off + i];
            if (c < 0 || (uint64_t)c > s->n_tokens) {
                snprintf(err, errlen, "%s: blk.%" PRIu32 ".act_count[%" PRIu32 "] = %" PRId64
                         " is outside [0, n_tokens = %" PRIu64 "]", f->path, l, i, c, s->n_tokens);
                return -1;
            }
            if (!isfinite(v) || v < 0) {
                snprintf(err, errlen, "%s: blk.%" PRIu32 ".act_sum[%" PRIu32 "] = %g is not a finite sum >= 0",
                         f->path, l, i, v);
                return -1;
            }
        }
    }
    return 0;
}

static hc_stats *read_stats(const gguf_file *f, char *err, size_t errlen)
{
    stats_header h;
    if (read_header(f, &h, err, errlen) || check_tensors(f, h.n_layer, h.n_ff, err, errlen))
        return NULL;
    hc_stats *s = hc_stats_new(h.n_layer, h.n_ff);
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", f->path);
        return NULL;
    }
    if (get_str(f, K("arch"), s->arch, sizeof s->arch, err, errlen) ||
        get_str(f, K("activation"), s->activation, sizeof s->activation, err, errlen) ||
        get_str(f, K("corpus"), s->corpus, sizeof s->corpus, err, errlen))
        goto fail;
    if (strcmp(s->activation, "relu") != 0 && strcmp(s->activation, "silu") != 0 && strcmp(s->activation, "gelu") != 0) {
        snprintf(err, errlen, "%s: activation \"%s\" is not \"relu\", \"silu\" or \"gelu\"", f->path, s->activation);
        goto fail;
    }
    s->n_embd = h.n_embd;
    s->ctx = h.ctx;
    s->threshold = h.threshold;
    s->n_tokens = h.n_tokens;
    s->ffn_hash = h.hash;
    if (read_layers(f, s, err, errlen)) goto fail;
    return s;
fail:
    hc_stats_free(s);
    return NULL;
}

hc_stats *hc_stats_read(const char *path, char *err, size_t errlen)
{
    gguf_file *f = gguf_open(path, err, errlen);
    if (!f)
        return NULL;
    hc_stats *s = read_stats(f, err, errlen);
    gguf_close(f);
    return s;
}

int hc_model_ffn_shape(const gguf_file *model, const char *model_path, char arch[64], int64_t *n_layer,
                       int64_t *n_ff, char *err, size_t errlen)
{
    char *a = NULL, key[128];
    if (gguf_get_str(model, "general.architecture", &a) != 0) {
        snprintf(err, errlen, "%s: general.architecture is missing or not a string", model_path);
        return -1;
    }
    snprintf(arch, 64, "%s", a);
    int rc = -1;
    snprintf(key, sizeof key, "%s.block_count", a);
    if (gguf_get_int(model, key, n_layer) != 0) {
        snprintf(err, errlen, "%s: %s is missing or not an integer", model_path, key);
        goto out;
    }
    snprintf(key, sizeof key, "%s.feed_forward_length", a);
    if (gguf_get_int(model, key, n_ff) != 0) {
        snprintf(err, errlen, "%s: %s is missing or not an integer", model_path, key);
        goto out;
    }
    rc = 0;
out:
    free(a);
    return rc;
}

int hc_stats_check_model(const hc_stats *s, const gguf_file *model, const char *model_path,
                         char *err, size_t errlen)
{
    char arch[64];
    int64_t n_layer = -1, n_ff = -1;
    if (hc_model_ffn_shape(model, model_path, arch, &n_layer, &n_ff, err, errlen) != 0) return -1;
    if (strcmp(arch, s->arch) != 0) {
        snprintf(err, errlen, "%s: architecture \"%s\", but the statistics are for \"%s\"", model_path, arch,
                 s->arch);
        return -1;
    }
    if (n_layer != (int64_t)s->n_layer || n_ff != (int64_t)s->n_ff) {
        snprintf(err, errlen, "%s: %" PRId64 " layers x %" PRId64 " FFN neurons, but the statistics are for %"
                 PRIu32 " x %" PRIu32, model_path, n_layer, n_ff, s->n_layer, s->n_ff);
        return -1;
    }
    uint64_t h = s->ffn_hash ? hc_ffn_hash(model) : 0;
    if (h != s->ffn_hash) {
        snprintf(err, errlen, "%s: FFN weights hash %016" PRIx64 ", but the statistics were made on weights "
                 "with hash %016" PRIx64 " (another model or another quantization)", model_path, h, s->ffn_hash);
        return -1;
    }
    return 0;
}

/* Tensors up to this size are hashed whole; larger ones by HASH_CHUNKS evenly
 * spaced chunks, so that identifying a multi-GB model touches a few MiB only. */
#define HASH_WHOLE (64u << 10)
#define HASH_CHUNKS 16
#define HASH_CHUNK 4096

static uint64_t hash_tensor(const gguf_tensor *t, uint64_t h)
{
    h = hc_fnv1a64(t->name, strlen(t->name) + 1, h);
    uint32_t meta[2] = { t->type, t->n_dims };
    h = hc_fnv1a64(meta, sizeof meta, h);
    h = hc_fnv1a64(t->ne, sizeof t->ne, h);
    const uint8_t *p = t->data;
    if (t->nbytes <= HASH_WHOLE)
        return hc_fnv1a64(p, t->nbytes, h);
    uint64_t span = t->nbytes - HASH_CHUNK;
    for (uint64_t i = 0; i < HASH_CHUNKS; i++)
        h = hc_fnv1a64(p + span * i / (HASH_CHUNKS - 1), HASH_CHUNK, h);
    return h;
}

uint64_t hc_ffn_hash(const gguf_file *model)
{
    static const char *const parts[] = { "ffn_gate", "ffn_up", "ffn_down", "ffn_down_t" };
    uint64_t h = HC_FNV_INIT;
    /* Layer by layer in a fixed name order, so the tensor order in the file does not matter. */
    for (uint32_t l = 0;; l++) {
        int found = 0;
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            char name[GGUF_MAX_NAME + 1];
            snprintf(name, sizeof name, "blk.%" PRIu32 ".%s.weight", l, parts[k]);
            const gguf_tensor *t = gguf_get_tensor(model, name);
            if (t) {
                h = hash_tensor(t, h);
                found = 1;
                continue;
            }
            /* INT4-GPTQ (hc-quantize GPTQ): the weight is stored as companion
             * tensors <name>.qweight/.scales/.qzeros[/.g_idx]; hash those, in
             * this order. A model without them hashes as before. */
            static const char *const gptq[] = { "qweight", "scales", "qzeros", "g_idx" };
            for (size_t c = 0; c < sizeof gptq / sizeof gptq[0]; c++) {
                char cname[GGUF_MAX_NAME + 16];
                snprintf(cname, sizeof cname, "%s.%s", name, gptq[c]);
                if ((t = gguf_get_tensor(model, cname))) {
                    h = hash_tensor(t, h);
                    found = 1;
                }
            }
        }
        if (!found)
            break;
    }
    /* 0 means "unknown" in a stats file; never produce it. */
    return h ? h : 1;
}
