/* Building blocks of the forward pass shared by forward*.c and by runtime/
 * code that extends it (a replacement FFN): the threaded products of
 * matmul.h and the small numeric pieces below. Not needed by programs, which
 * use model.h. */
#ifndef HC_FORWARD_H
#define HC_FORWARD_H

#include "matmul.h"
#include "model.h"

/* o = w * x / sqrt(mean(x²) + eps), written as run.c does. */
void hc_rmsnorm(float *o, const float *x, const float *w, int n, float eps);
/* Call ctx->hook if set. */
void hc_hook_call(hc_ctx *ctx, int layer, int point, const float *x, int B, int n, int pos0);
/* h = act(gate) * up over n values (SiLU written as run.c). */
void hc_ffn_act(int act, float *gate, const float *up, int n);

#endif
