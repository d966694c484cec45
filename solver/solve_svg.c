/* SVG: GPU coverage per layer (bars) over the share of neurons placed, and the
 * VRAM budget split into its dense parts, the FFN neurons placed and what is left. */
#include <inttypes.h>
#include <stdio.h>

#include "atomic_file.h"
#include "cli.h"
#include "solve.h"

#define W 860
#define H 470
#define X0 60      /* plot area of the coverage chart */
#define Y0 62
#define PW 760
#define PH 250
#define BY 370     /* budget bar */
#define BH 26

static const char *const part_colors[HC_FIX_COUNT + 2] = {
    "#8c6bb1", "#e7298a", "#a6761d", "#666666", "#1b9e77", "#e6ab02", "#d95f02", "#dddddd",
};

static void coverage_chart(FILE *f, const solve_result *r)
{
    const solve_problem *p = r->problem;
    double bw = (double)PW / p->n_layer;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"15\">GPU share of activations per layer (%s, %s)</text>\n",
            X0, Y0 - 22, r->method, solve_status_names[r->info.status]);
    for (int pct = 0; pct <= 100; pct += 25) {
        double y = Y0 + PH * (1 - pct / 100.0);
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%d%%</text>\n",
                X0, X0 + PW, y, y, X0 - 6, y + 4, pct);
    }
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const solve_layer *L = &p->layer[l];
        double cov = L->total ? (double)solve_layer_covered(p, &r->sol, l) / (double)L->total : 0;
        double neu = (double)solve_gpu_neurons(p, &r->sol, l) / p->n_ff;
        double x = X0 + l * bw;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#1f78b4\">"
                "<title>layer %" PRIu32 ": %.1f%% of activations, %.1f%% of neurons</title></rect>\n",
                x + bw * 0.1, Y0 + PH * (1 - cov), bw * 0.8, PH * cov, l, 100 * cov, 100 * neu);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#a6cee3\"/>\n",
                x + bw * 0.3, Y0 + PH * (1 - neu), bw * 0.4, PH * neu);
    }
    int step = p->n_layer > 40 ? 10 : p->n_layer > 10 ? 5 : 1;
    for (uint32_t l = 0; l < p->n_layer; l += (uint32_t)step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%" PRIu32 "</text>\n",
                X0 + (l + 0.5) * bw, Y0 + PH + 15, l);
    fprintf(f, "<text transform=\"translate(16 %d) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">"
            "share of the layer (%%)</text>\n", Y0 + PH / 2);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">layer</text>\n"
            "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#1f78b4\"/>"
            "<text x=\"%d\" y=\"%d\" font-size=\"12\">activations served by the GPU</text>\n"
            "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#a6cee3\"/>"
            "<text x=\"%d\" y=\"%d\" font-size=\"12\">neurons on the GPU</text>\n",
            X0 + PW / 2, Y0 + PH + 30, X0 + 300, Y0 - 16, X0 + 314, Y0 - 7, X0 + 520, Y0 - 16, X0 + 534, Y0 - 7);
}

static void budget_bar(FILE *f, const solve_result *r)
{
    uint64_t parts[HC_FIX_COUNT + 2];
    const char *names[HC_FIX_COUNT + 2];
    for (int i = 0; i < HC_FIX_COUNT; i++) {
        parts[i] = r->budget->fixed[i];
        names[i] = hc_budget_fixed_names[i];
    }
    parts[HC_FIX_COUNT] = r->sol.bytes;
    names[HC_FIX_COUNT] = "FFN neurons";
    parts[HC_FIX_COUNT + 1] = r->vram_budget - r->budget->fixed_total - r->sol.bytes;
    names[HC_FIX_COUNT + 1] = "unused";
    char sz[32];
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"15\">VRAM budget %s</text>\n", X0, BY - 10,
            hc_format_size(r->vram_budget, sz, sizeof sz));
    double x = X0;
    for (int i = 0; i < HC_FIX_COUNT + 2; i++) {
        double w = r->vram_budget ? (double)PW * (double)parts[i] / (double)r->vram_budget : 0;
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>%s: %s</title></rect>\n",
                x, BY, w, BH, part_colors[i], names[i], hc_format_size(parts[i], sz, sizeof sz));
        x += w;
        int lx = X0 + (i % 4) * 190, ly = BY + BH + 22 + (i / 4) * 20;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s %s</text>\n",
                lx, ly - 9, part_colors[i], lx + 14, ly, names[i], hc_format_size(parts[i], sz, sizeof sz));
    }
}

int solve_write_svg(const solve_result *r, const char *path, char *err, size_t errlen)
{
    atomic_file af;
    if (af_open(&af, path, err, errlen))
        return -1;
    fprintf(af.fp, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H, W, H);
    fprintf(af.fp, "<text x=\"%d\" y=\"16\" font-size=\"12\">", X0);
    hc_xml_text(af.fp, r->model_name);
    fprintf(af.fp, ", statistics: ");
    hc_xml_text(af.fp, r->stats->corpus);
    fprintf(af.fp, "</text>\n");
    coverage_chart(af.fp, r);
    budget_bar(af.fp, r);
    fprintf(af.fp, "</svg>\n");
    return af_commit(&af, err, errlen);
}
