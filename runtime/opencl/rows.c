/* What the device's hot rows take and cost, and the scalar reference of its
 * two kernels (runtime/opencl.h): plain C, in every build. */
#include <math.h>
#include <string.h>

#include "forward.h"
#include "ggml_types.h"
#include "kernels.h"
#include "kernels_gptq.h"
#include "opencl.h"
#include "types.h"

static const uint32_t ggml_types[HC_CL_N_GGML] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                                   GGML_TYPE_Q4_0 };
const char *const hc_cl_type_names[HC_CL_N_TYPES] = { "f32", "f16", "bf16", "q8_0", "q4_0", "gptq" };

int hc_cl_type_index(const hc_weight *w)
{
    if (w->kind == HC_WEIGHT_GPTQ) return HC_CL_GPTQ;
    for (int i = 0; i < HC_CL_N_GGML; i++)
        if (w->kind == HC_WEIGHT_GGML && ggml_types[i] == w->type) return i;
    return -1;
}

int hc_cl_supports(const hc_weight *w, int down)
{
    const hc_gptq *g = w->ext;
    if (w->kind == HC_WEIGHT_GPTQ) return down ? g->sm_row && g->gs == 1 && !g->perm : !g->sm_row;
    return hc_cl_type_index(w) >= 0;
}

uint64_t hc_cl_rows_bytes(const hc_weight *w, int k)
{
    if (w->kind == HC_WEIGHT_GPTQ) return hc_gptq_rows_bytes(w->ext, k);
    return (uint64_t)k * ggml_row_size(w->type, w->n);
}

/* kernels/hot_rows.cl: DITEMS items of 4 columns, LANES = wg / DITEMS */
static int down_items(int wg) { return wg < 8 ? wg : 8; }

int hc_cl_down_cols(int wg) { return 4 * down_items(wg); }

int hc_cl_down_splits(int n, int k, int wg, unsigned cu)
{
    const long blocks = (n + hc_cl_down_cols(wg) - 1) / hc_cl_down_cols(wg), lanes = wg / down_items(wg);
    long s = (2 * (long)cu + blocks - 1) / blocks, most = k / (2 * lanes);
    /* a lane's rows are a chain of dependent loads (h, then the row when h is not zero): short chains */
    long chains = ((long)k + lanes * HC_CL_DOWN_ROWS - 1) / (lanes * HC_CL_DOWN_ROWS);
    if (s < chains) s = chains;
    if (s > most) s = most;
    if (s > 64) s = 64;
    return s < 1 ? 1 : (int)s;
}

void hc_cl_layer_ref(const hc_cl_rows *rows, int k, int n_embd, const void *x, const uint8_t *mask, int act,
                     float t_act, float *y, float *h)
{
    memset(y, 0, sizeof(float) * (size_t)n_embd);
    for (int r = 0; r < k; r++) {
        h[r] = 0.0f;
        if (!mask[r]) continue;
        float g, u;
        hc_weight_matvec(&rows->first, HC_ISA_SCALAR, r, r + 1, x, 0, 1, &g, 1);
        float a = hc_act1(act, g + (rows->first_b ? rows->first_b[r] : 0.0f));
        if (!hc_keep_act(a, rows->down_norm ? 0.0f : t_act)) continue;
        if (rows->kind == 2) {
            h[r] = a;
        } else {
            hc_weight_matvec(&rows->up, HC_ISA_SCALAR, r, r + 1, x, 0, 1, &u, 1);
            u += rows->up_b ? rows->up_b[r] : 0.0f;
            h[r] = a * (rows->kind == 1 ? hc_act1(act, u) : u);
        }
        if (rows->down_norm && !hc_keep_act(fabsf(h[r]) * rows->down_norm[r], t_act)) h[r] = 0.0f;
        hc_weight_axpy(&rows->down, HC_ISA_SCALAR, r, 0, n_embd, h[r], y);
    }
}
