/* Per-layer summary of activation statistics and the SVG of the sorted
 * activation-frequency curves (rank vs frequency, both log scale: a power
 * law is a straight line). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "cli.h"
#include "profile.h"

const int hc_cover_pct[3] = { 80, 90, 99 };

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Counts of one layer, hottest first (malloc'd). */
static int64_t *sorted_counts(const hc_stats *s, uint32_t layer)
{
    int64_t *c = malloc((size_t)s->n_ff * sizeof *c);
    if (!c) return NULL;
    memcpy(c, s->count + (size_t)layer * s->n_ff, (size_t)s->n_ff * sizeof *c);
    qsort(c, s->n_ff, sizeof *c, cmp_desc);
    return c;
}

void hc_stats_summarize(const hc_stats *s, uint32_t layer, hc_layer_summary *out)
{
    memset(out, 0, sizeof *out);
    out->neurons = s->n_ff;
    int64_t *c = sorted_counts(s, layer);
    if (!c) return;
    int64_t total = 0;
    for (uint32_t i = 0; i < s->n_ff; i++) total += c[i];
    if (s->n_tokens) out->mean_rate = (double)total / ((double)s->n_ff * (double)s->n_tokens);
    /* smallest k whose hottest k neurons hold >= p% of all activations (exact integer test) */
    int64_t cum = 0;
    uint32_t k = 0;
    for (int p = 0; p < 3 && total > 0; p++) {
        while (cum * 100 < (int64_t)hc_cover_pct[p] * total) cum += c[k++];
        out->cover[p] = (double)k / s->n_ff;
    }
    free(c);
}

/* ------------------------------------------------------------------ SVG */

#define W 760
#define H 480
#define ML 70    /* margins of the plot area */
#define MR 130
#define MT 40
#define MB 50
#define POINTS 400   /* most points per curve, evenly spaced in log(rank) */

static void layer_color(uint32_t l, uint32_t n, char *buf, size_t cap)
{
    /* hue from blue (first layer) to red (last) */
    double hue = n > 1 ? 240.0 * (1.0 - (double)l / (n - 1)) : 240.0;
    snprintf(buf, cap, "hsl(%.0f,75%%,45%%)", hue);
}

int hc_stats_svg(const hc_stats *s, const char *title, const char *path, char *err, size_t errlen)
{
    /* y axis: from the decade below the rarest non-zero frequency to 1 */
    double fmin = 1.0;
    for (size_t j = 0; j < (size_t)s->n_layer * s->n_ff; j++)
        if (s->count[j] > 0 && s->n_tokens && (double)s->count[j] / (double)s->n_tokens < fmin)
            fmin = (double)s->count[j] / (double)s->n_tokens;
    int ydec = (int)floor(log10(fmin));
    if (ydec > -1) ydec = -1;
    int xdec = (int)ceil(log10((double)s->n_ff));
    if (xdec < 1) xdec = 1;
    const double pw = W - ML - MR, ph = H - MT - MB;
    int height = H;
    if (MT + 16 * (int)s->n_layer + 20 > height) height = MT + 16 * (int)s->n_layer + 20;

    atomic_file af;
    if (af_open(&af, path, err, errlen) != 0) return -1;
    FILE *f = af.fp;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, height, W, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, height);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"14\">", ML);
    hc_xml_text(f, title);
    fprintf(f, "</text>\n");
    /* grid and decade labels */
    for (int d = 0; d <= xdec; d++) {
        double x = ML + pw * d / xdec;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, MT, x, MT + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, MT + ph + 16, pow(10, d));
    }
    for (int d = ydec; d <= 0; d++) {
        double y = MT + ph * (double)-d / -ydec;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, y, ML + pw, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 6, y + 4, pow(10, d));
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n",
            ML, MT, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">neuron rank, hottest first (1 = the most active; log scale)</text>\n",
            ML + pw / 2, height - 12);
    fprintf(f, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">"
               "activation frequency: share of tokens (log scale)</text>\n", MT + ph / 2);

    for (uint32_t l = 0; l < s->n_layer; l++) {
        char color[32];
        layer_color(l, s->n_layer, color, sizeof color);
        int64_t *c = sorted_counts(s, l);
        if (!c) { snprintf(err, errlen, "%s: out of memory", path); af_abort(&af); return -1; }
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
        uint32_t prev = UINT32_MAX;
        for (int p = 0; p <= POINTS; p++) {
            /* rank r (1-based) at p/POINTS of the way through log(n_ff); zero counts end the curve */
            uint32_t r = (uint32_t)llround(pow((double)s->n_ff, (double)p / POINTS));
            if (r == prev || r < 1 || r > s->n_ff || c[r - 1] == 0 || !s->n_tokens) continue;
            prev = r;
            double fr = (double)c[r - 1] / (double)s->n_tokens;
            fprintf(f, "%.1f,%.1f ", ML + pw * log10((double)r) / xdec, MT + ph * log10(fr) / ydec);
        }
        fprintf(f, "\"/>\n");
        free(c);
        double ly = MT + 8 + 16.0 * l;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
                   "<text x=\"%d\" y=\"%.1f\">layer %" PRIu32 "</text>\n",
                W - MR + 12, ly, W - MR + 32, ly, color, W - MR + 38, ly + 4, l);
    }
    fprintf(f, "</svg>\n");
    return af_commit(&af, err, errlen);
}
