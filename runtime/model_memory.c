/* Where the weight matrices live while a model runs (model.h,
 * hc_model_copy_weights): the file mapping, or a copy in 2 MiB pages.
 *
 * A decode step streams every matrix once. From a file mapping in 4 KiB pages
 * that stream takes a TLB miss every 4 KiB, and a file mapping cannot get
 * transparent huge pages (ext4: MADV_COLLAPSE on it fails). Copied into
 * anonymous memory advised to use 2 MiB pages the same kernels read faster:
 * Q4_0 decode 79.8 -> 105.1 t/s on AVX-512 (docs/measurements.md). The copy
 * keeps every block, so every result is the same (where Q4_0's products run
 * on AVX2 or AVX-512, and Q8_0's on AVX-512, their rows' blocks are
 * reordered within chunks of 16, x16.h, which those kernels read without
 * permutes or inserts: the same blocks, the same bits); the copied pages of the mapping are dropped (clean file pages:
 * resident memory does not double). */
#include "model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hugepage.h"
#include "x16.h"

void hc_model_drop_mapped(const hc_model *m, const void *p, size_t n)
{
    const gguf_file *f = m->file;
    const uint8_t *a = p;
    if (!f || !f->owns_map || a < f->base || a + n > f->base + f->size) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)a + page - 1) & ~(page - 1),
              hi = ((uintptr_t)a + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* A weight to copy and the bytes it reads; chunks: 1 when its copy may
 * take chunks of 16 (read by products, not by AXPY). */
typedef struct {
    hc_weight *w;
    const uint8_t *lo, *hi;
    int chunks;
} span;

static int by_start(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* w into s[*n] when it is ggml rows inside the file mapping. */
static void add(const hc_model *m, hc_weight *w, int chunks, span *s, int *n)
{
    const gguf_file *f = m->file;
    const uint8_t *p = w->data;
    if (w->kind != HC_WEIGHT_GGML || !p || p < f->base || p >= f->base + f->size) return;
    s[(*n)++] = (span){ w, p, p + hc_weight_bytes(w), chunks };
}

/* The model's ggml matrices in the mapping, ascending by address; with_ffn 0
 * leaves out the FFN's gate, up and down. */
static int collect(hc_model *m, int with_ffn, span *s)
{
    int n = 0;
    add(m, &m->token_embd, 1, s, &n);
    add(m, &m->output, 1, s, &n);
    add(m, &m->pos_embd, 1, s, &n);
    for (int l = 0; l < m->hp.n_layer; l++) {
        hc_layer *ly = &m->layers[l];
        hc_weight *all[] = { &ly->attn_q, &ly->attn_k, &ly->attn_v, &ly->attn_output, &ly->fc1, &ly->fc2,
                             &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, &ly->ffn_down_t };
        for (int i = 0; i < (with_ffn ? 10 : 6); i++) add(m, all[i], all[i] != &ly->ffn_down_t, s, &n);
    }
    qsort(s, (size_t)n, sizeof *s, by_start);
    return n;
}

/* The end of the run of overlapping spans (views of one tensor, tied
 * embeddings) that starts at s[i], and its last byte in *hi. */
static int run_end(const span *s, int n, int i, const uint8_t **hi)
{
    *hi = s[i].hi;
    int j = i + 1;
    for (; j < n && s[j].lo < *hi; j++)
        if (s[j].hi > *hi) *hi = s[j].hi;
    return j;
}

/* Where each run starts in the copy: its address modulo 64 kept, so every
 * matrix keeps the alignment it had in the file. */
static size_t place(size_t at, const uint8_t *lo) { return ((at + 63) & ~(size_t)63) + ((uintptr_t)lo & 63); }

uint64_t hc_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb * 1024;
}

/* 1 when the kernel gives anonymous memory 2 MiB pages on advice (transparent
 * huge pages "always" or "madvise"). */
static int huge_pages_on(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    return strstr(line, "[always]") || strstr(line, "[madvise]");
}

/* 1 when the run s[i..j) (bytes up to hi) is whole rows of matrices of one
 * type whose products read chunks of 16 (x16.h) and one row length that
 * products read: its copy can be in chunks row by row, for every view of it. */
static int in_chunks(const span *s, int i, int j, const uint8_t *hi)
{
    const size_t rb = hc_weight_bytes(s[i].w) / (size_t)s[i].w->rows;
    if (!hc_x16_wanted(s[i].w->type)) return 0;
    for (int k = i; k < j; k++)
        if (!s[k].chunks || s[k].w->type != s[i].w->type || s[k].w->n != s[i].w->n || (size_t)(s[k].lo - s[i].lo) % rb)
            return 0;
    return (size_t)(hi - s[i].lo) % rb == 0;
}

int64_t hc_model_copy_weights(hc_model *m, int mode, int with_ffn, char *err, size_t errlen)
{
    if (mode == HC_WEIGHTS_MAP || !m->file->owns_map) return 0;
    span *s = malloc(sizeof *s * (3 + 10 * (size_t)m->hp.n_layer));
    if (!s) goto no_memory;
    int n = collect(m, with_ffn, s);
    size_t total = 0;
    const uint8_t *hi;
    for (int i = 0, j; i < n; i = j) {
        j = run_end(s, n, i, &hi);
        total = place(total, s[i].lo) + (size_t)(hi - s[i].lo);
    }
    if (mode == HC_WEIGHTS_AUTO && (!huge_pages_on() || (double)total > 0.8 * (double)hc_mem_available())) total = 0;
    uint8_t *buf = total ? hc_huge_alloc(total) : NULL;
    if (!buf) {   /* nothing to copy, not worth it, or no memory */
        free(s);
        if (!total || mode == HC_WEIGHTS_AUTO) return 0;
        goto no_memory;
    }
    size_t at = 0;
    for (int i = 0, j; i < n; i = j) {
        j = run_end(s, n, i, &hi);
        at = place(at, s[i].lo);
        if (in_chunks(s, i, j, hi)) {
            const uint32_t type = s[i].w->type;
            const int nb = s[i].w->n / 32;
            const size_t rb = ggml_row_size(type, s[i].w->n);
            for (size_t o = 0; o < (size_t)(hi - s[i].lo); o += rb) hc_x16_repack(type, s[i].lo + o, buf + at + o, nb);
            for (int k = i; k < j; k++) s[k].w->kind = HC_WEIGHT_X16;
            m->n_chunked += j - i;
        } else {
            memcpy(buf + at, s[i].lo, (size_t)(hi - s[i].lo));
        }
        for (int k = i; k < j; k++) s[k].w->data = buf + at + (s[k].lo - s[i].lo);
        hc_model_drop_mapped(m, s[i].lo, (size_t)(hi - s[i].lo));
        at += (size_t)(hi - s[i].lo);
    }
    free(s);
    m->weights_copy = buf;
    return (int64_t)total;
no_memory:
    snprintf(err, errlen, "%s: out of memory for a copy of the weights (--mmap keeps them in the file mapping)",
             m->path);
    return -1;
}
