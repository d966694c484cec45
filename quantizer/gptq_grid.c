/* The 4-bit grid of one row over one group (see gptq.h): GPTQ's quantizer
 * (docs/design/gptq.md, "Grid"; quant.py: Quantizer.find_params with
 * perchannel, mse=False), or the grid ggml's Q4_0 / Q4_1 reference
 * quantizers choose for a block. Scales (and Q4_1's min) are rounded to
 * fp16 before any code is chosen. rintf rounds half to even
 * as torch.round does (nothing changes the default rounding mode). */
#include <math.h>
#include "ggml_types.h"
#include "gptq.h"

static float fp16_round(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

static void native_params(float xmin, float xmax, int sym, gptq_grid *g)
{
    xmin = xmin < 0 ? xmin : 0;   /* the range always includes 0 */
    xmax = xmax > 0 ? xmax : 0;
    if (sym) {
        xmax = -xmin > xmax ? -xmin : xmax;
        if (xmin < 0) xmin = -xmax;   /* an all-nonnegative row keeps xmin = 0 (a quirk of quant.py) */
    }
    if (xmin == 0 && xmax == 0) {
        xmin = -1.0f;
        xmax = 1.0f;
    }
    const float scale = (xmax - xmin) / (float)GPTQ_MAXQ;
    g->zero = sym ? (GPTQ_MAXQ + 1) / 2 : (int)rintf(-xmin / scale);
    g->d = fp16_round(scale);
    if (g->d == 0.0f) g->d = fp16_to_fp32(1);   /* below fp16's range: its smallest step */
    g->m = -g->d * (float)g->zero;
}

void gptq_find_params(const float *x, int cols, int n, size_t ld, int sym, int param, gptq_grid *g)
{
    for (int r = 0; r < n; r++) {
        float xmin = INFINITY, xmax = -INFINITY, amax = 0.0f, max = 0.0f;
        for (int c = 0; c < cols; c++) {
            const float v = x[(size_t)c * ld + (size_t)r];
            xmin = v < xmin ? v : xmin;
            xmax = v > xmax ? v : xmax;
            if (fabsf(v) > amax) {   /* ggml: the first value of largest magnitude */
                amax = fabsf(v);
                max = v;
            }
        }
        gptq_grid *o = &g[r];
        if (param == GPTQ_NATIVE) {
            native_params(xmin, xmax, sym, o);
        } else if (param == GPTQ_Q4_0) {
            o->d = fp16_round(max / -8.0f);
            o->zero = 8;
            o->m = -8.0f * o->d;
        } else {
            o->d = fp16_round((xmax - xmin) / (float)GPTQ_MAXQ);
            o->zero = 0;
            o->m = fp16_round(xmin);
        }
    }
}

int gptq_code(const gptq_grid *g, int param, float w)
{
    if (g->d == 0.0f) return g->zero;
    const float q = param == GPTQ_Q4_1 ? rintf((w - g->m) / g->d) : rintf(w / g->d) + (float)g->zero;
    return q < 0 ? 0 : q > GPTQ_MAXQ ? GPTQ_MAXQ : (int)q;
}
