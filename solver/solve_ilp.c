/* PowerInfer's neuron-placement ILP, solved with GLPK's branch and bound.
 *
 *   maximize   sum_{l,u} value[l][u] * z[l][u]
 *   subject to sum_{l,u} bytes[l][u] * z[l][u] <= capacity      (memory)
 *              z[l][u] <= z[l][u-1]                            (hottest first)
 *              z binary
 *
 * z[l][0] is the layer's on/off variable: it places the layer's minimum (the
 * communication constraint "none or at least C_l" of the paper), and every
 * further batch needs it. See solve.h for why prefixes lose nothing.
 *
 * The memory row is written through one integer variable per unit size (a
 * batch or a layer's minimum, in layers quantized alike): N_c = placed units
 * of class c, sum_c bytes_c * N_c <= capacity. The LP relaxation is the same,
 * but GLPK can branch on the few integer counts that make the knapsack hard:
 * on a 70B-shaped instance it closes the gap in about a second where the plain
 * row stalls at the time limit (docs/design/solver.md). */
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "solve.h"

const char *const solve_status_names[] = { "optimal", "gap", "time-limit", "greedy-fallback", "greedy" };

/* Record the best bound of the open nodes as the search goes. */
static void callback(glp_tree *t, void *info)
{
    double *bound = info;
    int best = glp_ios_best_node(t);
    if (best)
        *bound = fmin(*bound, glp_ios_node_bound(t, best));
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Units of the same bytes (neuron size x neurons) form a class; N_c counts
 * how many of its units are placed. */
static int class_of(const uint64_t *cls, int n_class, uint64_t bytes)
{
    for (int i = 0; i < n_class; i++)
        if (cls[i] == bytes)
            return i;
    return -1;
}

/* The model above as a GLPK problem; first[l] receives layer l's first column. */
static glp_prob *build_model(const solve_problem *p, uint64_t capacity, int *first)
{
    int n = 0, n_class = 0, n_chain = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        n += (int)p->layer[l].n_units;
    uint64_t *cls = solve_alloc((size_t)n * sizeof *cls);   /* bytes of class c */
    int *cl = solve_alloc(((size_t)n + 1) * sizeof *cl);     /* class of column j */
    n = 0;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const solve_layer *L = &p->layer[l];
        first[l] = n + 1;
        for (uint32_t u = 0; u < L->n_units; u++) {
            uint64_t bytes = solve_unit_bytes(L, u);
            int c = class_of(cls, n_class, bytes);
            if (c < 0)
                cls[c = n_class++] = bytes;
            cl[++n] = c;
        }
        n_chain += L->n_units ? (int)L->n_units - 1 : 0;
    }
    /* Bytes in units of their gcd G keep the memory row integral and small, so
     * GLPK's relative tolerances cannot let a solution overrun by a byte. */
    uint64_t G = 0;
    for (int c = 0; c < n_class; c++)
        G = gcd(G, cls[c]);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MAX);
    glp_add_cols(lp, n + n_class);
    /* row 1: memory; rows 2..1+n_class: class counts; then the chains */
    glp_add_rows(lp, 1 + n_class + n_chain);
    glp_set_row_bnds(lp, 1, GLP_UP, 0, (double)(capacity / G));
    size_t nz = (size_t)n + 2 * (size_t)n_class + 2 * (size_t)n_chain;
    int *ia = solve_alloc((nz + 1) * sizeof *ia), *ja = solve_alloc((nz + 1) * sizeof *ja);
    double *ar = solve_alloc((nz + 1) * sizeof *ar);
    size_t k = 0;
    for (int c = 0; c < n_class; c++) {
        int j = n + 1 + c;
        glp_set_col_kind(lp, j, GLP_IV);
        glp_set_col_bnds(lp, j, GLP_LO, 0, 0);
        glp_set_row_bnds(lp, 2 + c, GLP_FX, 0, 0);
        k++, ia[k] = 2 + c, ja[k] = j, ar[k] = -1;
        k++, ia[k] = 1, ja[k] = j, ar[k] = (double)(cls[c] / G);
    }
    int row = 1 + n_class;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const solve_layer *L = &p->layer[l];
        for (uint32_t u = 0; u < L->n_units; u++) {
            int j = first[l] + (int)u;
            glp_set_col_kind(lp, j, GLP_BV);
            glp_set_obj_coef(lp, j, (double)L->value[u]);
            k++, ia[k] = 2 + cl[j], ja[k] = j, ar[k] = 1;
            if (u == 0)
                continue;
            row++;
            glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
            k++, ia[k] = row, ja[k] = j, ar[k] = 1;
            k++, ia[k] = row, ja[k] = j - 1, ar[k] = -1;
        }
    }
    glp_load_matrix(lp, (int)k, ia, ja, ar);
    free(ia), free(ja), free(ar), free(cls), free(cl);
    return lp;
}

/* The LP relaxation, then branch and bound. -1 with a message if GLPK fails. */
static int run_glpk(glp_prob *lp, const solve_ilp_opts *o, solve_ilp_info *info, double *bound, char *err,
                    size_t errlen)
{
    int term = glp_term_out(o->verbose ? GLP_ON : GLP_OFF);
    double t0 = hc_now();
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.presolve = GLP_ON;
    sp.msg_lev = o->verbose ? GLP_MSG_ON : GLP_MSG_OFF;
    int rc = glp_simplex(lp, &sp);
    if (rc != 0 || glp_get_status(lp) != GLP_OPT) {
        glp_term_out(term);
        snprintf(err, errlen, "GLPK could not solve the LP relaxation (code %d)", rc);
        return -1;
    }
    /* Its optimum is where the bound of a stopped search starts from. */
    info->lp_bound = *bound = glp_get_obj_val(lp);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = o->verbose ? GLP_MSG_ON : GLP_MSG_OFF;
    parm.tm_lim = o->time_limit > INT_MAX / 1000.0 ? INT_MAX : (int)(o->time_limit * 1000);
    parm.mip_gap = o->gap;
    parm.cb_func = callback;
    parm.cb_info = bound;
    rc = glp_intopt(lp, &parm);
    info->seconds = hc_now() - t0;
    glp_term_out(term);
    if (rc != 0 && rc != GLP_ETMLIM && rc != GLP_EMIPGAP) {
        snprintf(err, errlen, "GLPK glp_intopt failed (code %d)", rc);
        return -1;
    }
    info->time_limit_hit = rc == GLP_ETMLIM;
    int mip = glp_mip_status(lp);
    info->status = mip != GLP_OPT && mip != GLP_FEAS ? SOLVE_FALLBACK : rc == GLP_ETMLIM ? SOLVE_TIME_LIMIT
                 : rc == 0 && mip == GLP_OPT ? SOLVE_OPTIMAL : SOLVE_GAP;
    return 0;
}

int solve_ilp(const solve_problem *p, uint64_t capacity, const solve_solution *greedy, const solve_ilp_opts *o,
              solve_solution *out, solve_ilp_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    memcpy(out->units, greedy->units, p->n_layer * sizeof *out->units);
    solve_solution_eval(p, out);
    uint32_t n_units = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        n_units += p->layer[l].n_units;
    if (n_units == 0) {
        info->status = SOLVE_OPTIMAL;   /* nothing can be placed: empty is optimal */
        return 0;
    }
    int *first = solve_alloc(p->n_layer * sizeof *first);
    glp_prob *lp = build_model(p, capacity, first);
    double bound;
    int rc = run_glpk(lp, o, info, &bound, err, errlen);
    if (rc == 0 && info->status != SOLVE_FALLBACK) {
        /* A prefix per layer: count the units GLPK switched on (0/1 up to tolerance). */
        solve_solution s;
        solve_solution_init(&s, p->n_layer);
        for (uint32_t l = 0; l < p->n_layer; l++)
            while (s.units[l] < p->layer[l].n_units && glp_mip_col_val(lp, first[l] + (int)s.units[l]) > 0.5)
                s.units[l]++;
        solve_solution_eval(p, &s);
        /* Never worse than the greedy placement, never over the capacity. */
        if (s.bytes <= capacity && s.objective >= greedy->objective)
            memcpy(out->units, s.units, p->n_layer * sizeof *out->units);
        else
            info->status = SOLVE_FALLBACK;
        solve_solution_free(&s);
        solve_solution_eval(p, out);
    }
    if (rc == 0) {
        double obj = (double)out->objective;
        /* A finished search proves the incumbent optimal; a stopped one leaves the tree's best bound. */
        info->bound = info->status == SOLVE_OPTIMAL ? obj : fmax(bound, obj);
        info->gap = info->bound > 0 ? (info->bound - obj) / info->bound : 0;
    }
    glp_delete_prob(lp);
    free(first);
    return rc;
}
