/* Many prompts at once: continuous batching over the paged KV cache, as
 * vLLM's scheduler runs it (docs/design/runtime.md, "Many prompts at once").
 * Requests wait, run or are preempted; each step is one hc_eval_rows of
 * every running sequence's next token and chunks of the prompts of those
 * just admitted, so each weight is read once per step for all of them. */
#ifndef HC_SCHEDULER_H
#define HC_SCHEDULER_H

#include <stdint.h>
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

/* One prompt's generation. */
typedef struct {
    const int32_t *prompt;   /* the caller's, until hc_sched_run returns */
    int n_prompt, n_predict;
    hc_sampler_params sp;    /* the sequence's own sampler: its text whatever runs beside it */
} hc_request;

enum hc_stop {
    HC_STOP_EOS,       /* an end token sampled (hc_tokenizer_is_end; not given to token) */
    HC_STOP_LENGTH,    /* n_predict tokens */
    HC_STOP_CONTEXT,   /* the next token would not fit the context (n_ctx) */
    HC_STOP_REFUSED,   /* never run: an empty prompt, or one longer than the context */
};

/* Where the tokens go, as they are sampled. */
typedef struct {
    void (*token)(void *user, int req, int32_t token);
    void (*done)(void *user, int req, enum hc_stop why);   /* the request's last call */
    void *user;
} hc_sched_out;

typedef struct {
    int n_parallel;           /* most sequences running at once (llama.cpp's -np) */
    int n_ctx;                /* positions of one sequence (the context's n_ctx) */
    int n_blocks;             /* the context's n_kv_blocks: at least one n_ctx's */
    const hc_tokenizer *tok;  /* its end tokens end a text (hc_tokenizer_is_end); NULL: none */
    int swap;                 /* preemption by swapping the cache to host memory (vLLM's swap), where
                               * swap_space holds it; else, and when it does not, by recomputation */
    uint64_t swap_space;      /* bytes of host memory for swapped caches */
} hc_sched_params;

typedef struct {
    int steps, decode_steps;  /* decode steps: every row a running sequence's next token */
    int preempted;            /* sequences preempted */
    int swapped;              /* of them, those whose cache was swapped to host memory (the others
                               * recomputed it later) */
    long prompt_rows;         /* rows of prompts (and of recomputed sequences) */
    long generated;           /* tokens sampled, decode_tokens of them from decode steps */
    long decode_tokens;
    double t_decode;          /* seconds in decode steps */
    int most_running;         /* the most sequences run in one step */
} hc_sched_stats;

/* The most KV blocks of `block` positions the requests hold at once when
 * run with p: the n_parallel largest of their prompts with their
 * generations, each at most n_ctx positions, at most the pool. The pool's
 * free blocks are a stack from block 0, so the blocks a run ever takes are
 * 0 .. this - 1: the ones worth making at creation (hc_ctx_params.n_kv_warm). */
int hc_sched_blocks_most(const hc_request *reqs, int n, const hc_sched_params *p, int block);

/* Every request to its end on ctx (made with n_kv_blocks = p->n_blocks,
 * n_batch >= p->n_parallel), first come first served. 0, or -1 + err (out
 * of memory, logits that are not finite). */
int hc_sched_run(hc_ctx *ctx, const hc_request *reqs, int n, const hc_sched_params *p, const hc_sched_out *out,
                 hc_sched_stats *st, char *err, size_t errlen);

#endif
