/* The sparse model file (PowerInfer's PWRI variant) and the report plot.
 *
 * Output = every KV of the input, powerinfer.sparse_threshold and the
 * hotcold.predictor.* report keys; every tensor of the input in its order,
 * with blk.N.ffn_down.weight {n_ff, n_embd} replaced by blk.N.ffn_down_t.weight
 * {n_embd, n_ff} (its transpose, same type: F32/F16/BF16 exactly, Q8_0/Q4_0
 * dequantized and quantized again along the new rows) and any old fc1/fc2
 * dropped; then blk.N.fc1.weight {n_embd, r} and blk.N.fc2.weight {r, n_ff}. */
#include "predictors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "cli.h"
#include "ggml_types.h"
#include "quants.h"

enum { T_COPY, T_DOWN_T, T_FC1, T_FC2 };
typedef struct {
    int kind, layer;
    const gguf_tensor *src;
} out_tensor;

/* n f32 values into type (F32, F16, BF16, Q8_0, Q4_0; n a multiple of the block). */
static void encode(uint32_t type, const float *x, int64_t n, void *out)
{
    switch (type) {
    case GGML_TYPE_F32: memcpy(out, x, sizeof(float) * (size_t)n); break;
    case GGML_TYPE_F16: for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = fp32_to_fp16(x[i]); break;
    case GGML_TYPE_BF16: for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = fp32_to_bf16(x[i]); break;
    case GGML_TYPE_Q8_0: quantize_row_q8_0(x, out, n); break;
    case GGML_TYPE_Q4_0: quantize_row_q4_0(x, out, n); break;
    }
}

/* ffn_down_t of a layer: row j = column j of ffn_down, encoded in its type. */
static int down_t(const hc_weight *down, void *out)
{
    int E = down->rows, F = down->n;
    size_t rb = ggml_row_size(down->type, E);
    float *d = malloc(sizeof(float) * (size_t)E * F), *col = malloc(sizeof(float) * (size_t)E);
    if (!d || !col) { free(d); free(col); return -1; }
    for (int i = 0; i < E; i++) hc_weight_row(down, i, d + (size_t)i * F);
    for (int j = 0; j < F; j++) {
        for (int i = 0; i < E; i++) col[i] = d[(size_t)i * F + j];
        encode(down->type, col, E, (char *)out + (size_t)j * rb);
    }
    free(d);
    free(col);
    return 0;
}

static int is_layer_tensor(const char *name, const char *suffix, int *layer)
{
    int n = 0;
    if (sscanf(name, "blk.%d.%n", layer, &n) != 1 || n == 0) return 0;
    return strcmp(name + n, suffix) == 0;
}

/* An fc1 or fc2 of the input: predictors trained before, which the output drops. */
static int is_old_predictor(const char *name)
{
    int l;
    return is_layer_tensor(name, "fc1.weight", &l) || is_layer_tensor(name, "fc2.weight", &l);
}

int hc_pred_check_room(const hc_model *m, const hc_pred_opts *o, char *err, size_t errlen)
{
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < m->file->n_tensors; i++)
        if (!is_old_predictor(m->file->tensors[i].name)) bytes += m->file->tensors[i].nbytes;
    return af_check(o->output, bytes, err, errlen);
}

/* Every KV of the input, then the threshold and the hotcold.predictor.*
 * report keys. 0, or -1 out of memory. */
static int set_kvs(gguf_writer *w, const gguf_file *f, const hc_pred_opts *o, const hc_pred_report *rep, int L)
{
    float *vals = malloc(sizeof(float) * 4 * (size_t)L);
    if (!vals) return -1;
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_set_kv(w, &f->kv[i]);
    gguf_set_f32(w, "powerinfer.sparse_threshold", rep->global_threshold);
    gguf_set_f32(w, "hotcold.predictor.recall_target", o->recall);
    gguf_set_f32(w, "hotcold.predictor.active_threshold", rep->act_threshold);
    gguf_set_u64(w, "hotcold.predictor.seed", o->seed);
    for (int l = 0; l < L; l++) {
        vals[l] = (float)rep->layers[l].recall;
        vals[L + l] = (float)rep->layers[l].precision;
        vals[2 * L + l] = (float)rep->layers[l].pred_sparsity;
        vals[3 * L + l] = (float)rep->layers[l].true_sparsity;
    }
    gguf_set_arr(w, "hotcold.predictor.recall", GGUF_TYPE_FLOAT32, vals, (uint64_t)L);
    gguf_set_arr(w, "hotcold.predictor.precision", GGUF_TYPE_FLOAT32, vals + L, (uint64_t)L);
    gguf_set_arr(w, "hotcold.predictor.predicted_sparsity", GGUF_TYPE_FLOAT32, vals + 2 * L, (uint64_t)L);
    gguf_set_arr(w, "hotcold.predictor.true_sparsity", GGUF_TYPE_FLOAT32, vals + 3 * L, (uint64_t)L);
    free(vals);
    return 0;
}

/* Declare the output tensors in w and list them in ot (*n_ot of them).
 * Returns the largest one that must go through a buffer. */
static size_t add_tensors(gguf_writer *w, const hc_model *m, const hc_pred_net *nets, const hc_pred_opts *o,
                          out_tensor *ot, int *n_ot)
{
    const gguf_file *f = m->file;
    const int L = m->hp.n_layer, E = m->hp.n_embd, F = m->hp.n_ff;
    size_t max_bytes = 0;
    char nm[GGUF_MAX_NAME + 1];
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        int l;
        if (is_old_predictor(t->name)) continue;
        if (is_layer_tensor(t->name, "ffn_down.weight", &l) && l >= 0 && l < L) {
            int64_t ne[2] = { E, F };
            snprintf(nm, sizeof nm, "blk.%d.ffn_down_t.weight", l);
            gguf_add_tensor(w, nm, t->type, 2, ne, NULL);
            ot[(*n_ot)++] = (out_tensor){ T_DOWN_T, l, t };
            if (t->nbytes > max_bytes) max_bytes = t->nbytes;
        } else {
            /* PowerInfer renames every ffn_down tensor: OPT's down bias is ffn_down_t.bias */
            if (is_layer_tensor(t->name, "ffn_down.bias", &l)) snprintf(nm, sizeof nm, "blk.%d.ffn_down_t.bias", l);
            else snprintf(nm, sizeof nm, "%s", t->name);
            gguf_add_tensor(w, nm, t->type, t->n_dims, t->ne, NULL);
            ot[(*n_ot)++] = (out_tensor){ T_COPY, -1, t };
        }
    }
    size_t es = o->pred_type == GGML_TYPE_F16 ? 2 : 4;
    for (int l = 0; l < L; l++) {
        int64_t ne1[2] = { E, nets[l].r }, ne2[2] = { nets[l].r, F };
        snprintf(nm, sizeof nm, "blk.%d.fc1.weight", l);
        gguf_add_tensor(w, nm, o->pred_type, 2, ne1, NULL);
        ot[(*n_ot)++] = (out_tensor){ T_FC1, l, NULL };
        snprintf(nm, sizeof nm, "blk.%d.fc2.weight", l);
        gguf_add_tensor(w, nm, o->pred_type, 2, ne2, NULL);
        ot[(*n_ot)++] = (out_tensor){ T_FC2, l, NULL };
        size_t b = es * (size_t)nets[l].r * (size_t)(E > F ? E : F);
        if (b > max_bytes) max_bytes = b;
    }
    return max_bytes;
}

int hc_pred_write(const hc_model *m, const hc_pred_net *nets, const hc_pred_opts *o, const hc_pred_report *rep,
                  char *err, size_t errlen)
{
    const gguf_file *f = m->file;
    const int L = m->hp.n_layer, E = m->hp.n_embd, F = m->hp.n_ff;
    gguf_writer *w = gguf_writer_new(GGUF_VARIANT_PWRI);
    out_tensor *ot = malloc(sizeof *ot * (size_t)(f->n_tensors + 2 * (uint64_t)L));
    void *buf = NULL;
    int rc = -1, n_ot = 0;
    if (!w || !ot || set_kvs(w, f, o, rep, L) != 0) goto oom;
    size_t max_bytes = add_tensors(w, m, nets, o, ot, &n_ot);
    size_t es = o->pred_type == GGML_TYPE_F16 ? 2 : 4;
    if (!(buf = malloc(max_bytes ? max_bytes : 1))) goto oom;
    if (gguf_writer_begin(w, o->output, err, errlen) != 0) goto done;
    for (int i = 0; i < n_ot; i++) {
        const out_tensor *t = &ot[i];
        const void *data = buf;
        size_t n = 0;
        if (t->kind == T_COPY) {
            data = t->src->data;
            n = t->src->nbytes;
        } else if (t->kind == T_DOWN_T) {
            if (down_t(&m->layers[t->layer].ffn_down, buf) != 0) goto oom;
            n = t->src->nbytes;
        } else {
            const hc_pred_net *net = &nets[t->layer];
            int64_t k = (int64_t)net->r * (t->kind == T_FC1 ? E : F);
            encode(o->pred_type, t->kind == T_FC1 ? net->w1 : net->w2, k, buf);
            n = es * (size_t)k;
        }
        if (gguf_writer_write_data(w, data, n, err, errlen) != 0) goto done;
    }
    if (gguf_writer_finish(w, err, errlen) != 0) goto done;
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "%s: out of memory", o->output);
done:
    gguf_writer_free(w);
    free(buf);
    free(ot);
    return rc;
}

/* ------------------------------------------------------------------ SVG */

#define SVG_W 720
#define PLOT_X0 60
#define PLOT_X1 560
#define PANEL_H 200

/* Layer l at the centre of its slot, so bars and line ends stay inside the panel. */
static double px(int l, int L) { return PLOT_X0 + (l + 0.5) / L * (PLOT_X1 - PLOT_X0); }

/* The smallest 1, 2, 4 or 8 times a power of ten that is >= v (v > 0), so
 * that the quarter ticks of an axis to it are round (0.1, 0.2, 0.3, 0.4). */
static double nice_max(double v)
{
    double p = pow(10, floor(log10(v)));
    static const double steps[] = { 1, 2, 4, 8, 10 };
    for (int i = 0; i < 5; i++)
        if (steps[i] * p >= v * (1 - 1e-9)) return steps[i] * p;
    return 10 * p;
}

/* A panel at y0 with 0..ymax on its axis: title above, y axis label and unit
 * at the left, the layers below. */
static void axes(FILE *fp, double y0, double ymax, const char *label, const char *ylabel, int L)
{
    fprintf(fp, "<rect x='%d' y='%.1f' width='%d' height='%d' fill='none' stroke='#888'/>\n", PLOT_X0, y0,
            PLOT_X1 - PLOT_X0, PANEL_H);
    for (int k = 0; k <= 4; k++) {
        double y = y0 + PANEL_H - k * PANEL_H / 4.0;
        fprintf(fp, "<text x='%d' y='%.1f' text-anchor='end' font-size='10'>%.3g</text>\n", PLOT_X0 - 4, y + 3,
                ymax * k / 4);
    }
    for (int l = 0; l < L; l += L > 16 ? L / 8 : 1)
        fprintf(fp, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>%d</text>\n", px(l, L),
                y0 + PANEL_H + 12, l);
    fprintf(fp, "<text x='%d' y='%.1f' font-size='11'>%s</text>\n", PLOT_X0, y0 - 6, label);
    fprintf(fp, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='10'>layer</text>\n",
            (PLOT_X0 + PLOT_X1) / 2.0, y0 + PANEL_H + 26);
    fprintf(fp, "<text transform='translate(14 %.1f) rotate(-90)' text-anchor='middle' font-size='10'>%s</text>\n",
            y0 + PANEL_H / 2.0, ylabel);
}

int hc_pred_svg(const hc_pred_report *rep, const char *title, const char *path, char *err, size_t errlen)
{
    static const char *names[4] = { "recall", "precision", "predicted sparsity", "true sparsity" };
    static const char *colors[4] = { "#d62728", "#1f77b4", "#2ca02c", "#555555" };
    const int L = rep->n_layer;
    atomic_file af;
    if (af_open(&af, path, err, errlen) != 0) return -1;
    FILE *fp = af.fp;
    double top = 40, bot = top + PANEL_H + 64;
    fprintf(fp, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%.0f' font-family='sans-serif'>\n",
            SVG_W, bot + PANEL_H + 40);
    fprintf(fp, "<text x='10' y='18' font-size='12'>");
    hc_xml_text(fp, title);
    fprintf(fp, "</text>\n");
    axes(fp, top, 1.0, "per layer, on held-out test tokens", "fraction (0 to 1)", L);
    for (int s = 0; s < 4; s++) {
        fprintf(fp, "<polyline fill='none' stroke='%s' stroke-width='2' points='", colors[s]);
        for (int l = 0; l < L; l++) {
            const hc_pred_layer *y = &rep->layers[l];
            double v = s == 0 ? y->recall : s == 1 ? y->precision : s == 2 ? y->pred_sparsity : y->true_sparsity;
            fprintf(fp, "%.1f,%.1f ", px(l, L), top + PANEL_H * (1 - v));
        }
        double ly = top + 10 + 16 * s;   /* legend: a swatch of the line, then its name */
        fprintf(fp, "'/>\n<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='%s' stroke-width='2'/>"
                "<text x='%d' y='%.1f' font-size='11'>%s</text>\n", PLOT_X1 + 10, ly, PLOT_X1 + 30, ly, colors[s],
                PLOT_X1 + 36, ly + 4, names[s]);
    }
    /* predictor size relative to the FFN (3 n_embd n_ff weights) */
    double ffn = 3.0 * rep->n_embd * rep->n_ff, ymax = 0;
    for (int l = 0; l < L; l++)
        if (rep->layers[l].params / ffn > ymax) ymax = rep->layers[l].params / ffn;
    ymax = ymax > 0 ? nice_max(ymax) : 1;
    axes(fp, bot, ymax, "predictor size against the FFN it predicts", "parameters / FFN parameters", L);
    double bw = (PLOT_X1 - PLOT_X0) / (double)L * 0.6;
    for (int l = 0; l < L; l++) {
        double h = PANEL_H * (rep->layers[l].params / ffn) / ymax;
        fprintf(fp, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#9467bd'><title>layer %d: r=%d, "
                "%llu params, %llu bytes</title></rect>\n", px(l, L) - bw / 2, bot + PANEL_H - h, bw, h, l,
                rep->layers[l].rank, (unsigned long long)rep->layers[l].params,
                (unsigned long long)rep->layers[l].bytes);
    }
    fprintf(fp, "</svg>\n");
    return af_commit(&af, err, errlen);
}
