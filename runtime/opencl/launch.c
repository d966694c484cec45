/* The OpenCL backend's launch geometry (runtime/opencl.h, "the backend"):
 * plain C, in every build, so a test holds it against a GPU's and PoCL's
 * figures without a device. The caps are the work items a group of each
 * kernel gets: on a GPU enough to keep loads in flight (NVIDIA's guide: 128
 * to 256), on a CPU device (PoCL) few, each with a long run of its own
 * (PoCL runs a group's items as a loop; a tree reduction costs a barrier
 * per level). docs/design/runtime.md, "The OpenCL backend". */
#include "opencl.h"

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

static size_t pow2_ceil(size_t v)
{
    size_t p = 1;
    while (p < v) p *= 2;
    return p;
}

/* The smallest of want (rounded up to a power of two), cap and the device's limit. */
static size_t fit(const hc_clb_device *d, size_t want, size_t cap)
{
    size_t l = pow2_ceil(want ? want : 1), m = pow2_floor(d->wg_max ? d->wg_max : 1);
    if (l > cap) l = cap;
    return l < m ? l : m;
}

size_t hc_clb_mv_lanes(const hc_clb_device *d, int units) { return fit(d, (size_t)units, d->gpu ? 32 : 1); }

/* a CPU device: one item a row, its rows whole (4096 x 4096 on PoCL, 2
 * units: F16 1.3 ms at 1 item, 2.2-5 ms at 8 or 16; docs/measurements.md) */
size_t hc_clb_mv_rows(const hc_clb_device *d, size_t lanes)
{
    size_t items = d->gpu ? 256 : 4, most = d->wg_max ? d->wg_max : 1;
    if (items > most) items = most;
    return items / lanes > 0 ? pow2_floor(items / lanes) : 1;
}

/* One row's form on a GPU: word w of HC_CLB_Q8_RUN blocks side by side, so
 * that mv's lanes load each word of theirs as one contiguous run; more rows
 * go to the tiles, which take a block's 32 bytes whole, and a CPU device's
 * item takes a row's blocks in turn (kernels/backend.cl, xwords) */
int hc_clb_q8_interleaved(const hc_clb_device *d, int B) { return d->gpu && B == 1; }

size_t hc_clb_glu_lanes(const hc_clb_device *d, int units)
{
    size_t most = (d->wg_max ? d->wg_max : 1) / 32;
    size_t l = fit(d, (size_t)units, d->gpu ? 8 : 1);
    return l < most ? l : most > 0 ? pow2_floor(most) : 1;
}

int hc_clb_mm_tile(int B) { return B <= 16 ? 16 : 64; }

int hc_clb_mm_slices(const hc_clb_device *d, int rows, int n, int B)
{
    const size_t tile = (size_t)hc_clb_mm_tile(B);
    size_t groups = ((size_t)rows + HC_CLB_MM_ROWS - 1) / HC_CLB_MM_ROWS * (((size_t)B + tile - 1) / tile);
    size_t target = d->gpu ? 2 * (size_t)d->cu : d->cu;
    size_t s = (target + groups - 1) / groups, most = ((size_t)n + 255) / 256;   /* 8 blocks a slice or more */
    if (s > most) s = most;
    if (s > 16) s = 16;
    return s < 1 ? 1 : (int)s;
}

size_t hc_clb_t_local(const hc_clb_device *d, int units) { return fit(d, (size_t)units, d->gpu ? 64 : 16); }

int hc_clb_t_slices(const hc_clb_device *d, int units, int k, int B)
{
    size_t l = hc_clb_t_local(d, units), groups = ((size_t)units + l - 1) / l;
    size_t tiles = ((size_t)(B > 0 ? B : 1) + HC_CLB_TOKENS - 1) / HC_CLB_TOKENS;
    size_t target = d->gpu ? 32 * (size_t)d->cu : d->cu;
    size_t s = (target + groups * tiles - 1) / (groups * tiles), most = (size_t)k / 32;
    size_t fit = HC_CLB_T_PART / ((size_t)(B > 0 ? B : 1) * 8 * (size_t)units);
    if (s > most) s = most;
    if (s > fit) s = fit;
    return s < 1 ? 1 : (int)s;
}

int hc_clb_t_slices_fixed(const hc_clb_device *d, int units, int k)
{
    const int s = hc_clb_t_slices(d, units, k, 1);
    return s < HC_CLB_T_FIXED ? s : HC_CLB_T_FIXED;
}

int hc_clb_t_rows(int units, int S)
{
    const size_t r = HC_CLB_T_PART / ((size_t)S * 8 * (size_t)units);
    return r < 1 ? 1 : r > (size_t)INT32_MAX ? INT32_MAX : (int)r;
}

int hc_clb_attn_chunk(const hc_clb_device *d, int n_head, int B, int n_pos)
{
    size_t target = d->gpu ? 8 * (size_t)d->cu : d->cu, rows = (size_t)n_head * (size_t)(B > 0 ? B : 1);
    size_t c = (target + rows - 1) / rows;
    size_t ch = ((size_t)n_pos + c - 1) / c;
    if (ch > 16) ch = ch / 16 * 16;
    else if (d->gpu) ch = 16;   /* fewer positions do not pay a group's reductions */
    if (ch > HC_CLB_CHUNK_MAX) ch = HC_CLB_CHUNK_MAX;
    return ch < 1 ? 1 : (int)ch;
}

/* A CPU device: one item, its mix a contiguous pass over each value row */
size_t hc_clb_attn_local(const hc_clb_device *d, int head_dim) { return fit(d, (size_t)head_dim, d->gpu ? 128 : 1); }

int hc_clb_attn_lanes(int head_dim) { return (head_dim + 3) / 4; }

size_t hc_clb_attn_sums(size_t items, int head_dim)
{
    size_t W = (size_t)hc_clb_attn_lanes(head_dim), slices = items / (items < W ? items : W);
    return 4 * slices * W;
}

int hc_clb_attn_tile(int head_dim)
{
    int t = HC_CLB_ATTN_TILE / (hc_clb_attn_lanes(head_dim) + 1);
    return t < 1 ? 1 : t;
}

/* A CPU device: one item, its sums in the CPU's order, so the norm's output
 * has the CPU's bits where the products round it (bf16, Q8_0 blocks: an ulp
 * there can move a value to the next step of the form, 2^-8 of it) */
size_t hc_clb_norm_local(const hc_clb_device *d, int n) { return fit(d, (size_t)n, d->gpu ? 256 : 1); }

size_t hc_clb_ew_local(const hc_clb_device *d, size_t n)
{
    size_t l = fit(d, n, d->gpu ? 256 : 64);
    while (l > 1 && (n + l - 1) / l < d->cu) l /= 2;
    return l;
}
