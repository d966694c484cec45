/* Continuous batching (scheduler.h), vLLM's scheduler on one context: requests
 * are admitted first come first served while the pool keeps a watermark of
 * free blocks; each step feeds every running sequence's next token and, in
 * what the step's n_batch rows leave, chunks of the prompts of those just
 * admitted; a sequence that needs a block when none is free preempts the
 * most recent request: its blocks freed, its cache swapped to host memory
 * and back into other blocks when it is admitted again, or its text so far
 * recomputed as a prompt then (the rows' bits do not depend on the batch,
 * so either way it goes on as if never stopped). docs/design/runtime.md,
 * "Many prompts at once". */
#include "scheduler.h"
#include "blocks.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WAITING, RUNNING, DONE };

typedef struct {
    int32_t *tokens;      /* the prompt, then the tokens sampled */
    int n_tokens;         /* of them so far */
    int n_cached;         /* positions whose k and v are in the cache */
    int n_gen, state;
    int slot;             /* its block table (the rows' sequence id) while running */
    int n_blocks;         /* blocks in its table */
    void *swapped;        /* preempted by swapping: the cache of its n_cached positions (hc_ctx_kv_copy) */
    hc_sampler *smp;      /* from its first admission to its end: preemption keeps its draws */
} seq_state;

typedef struct {
    hc_ctx *ctx;
    const hc_request *reqs;
    const hc_sched_params *p;
    const hc_sched_out *out;
    hc_sched_stats *st;
    seq_state *s;                 /* [n requests] */
    int *waiting, n_waiting;      /* request ids, ascending: arrival order */
    int *running, n_running;      /* request ids, ascending */
    int *slots, n_slots;          /* free block tables */
    int max_blocks, watermark, block;   /* block: positions per block (the context's) */
    uint64_t block_bytes, swap_used;    /* a block's k and v in every layer; the swap space taken */
    int32_t *tables;              /* [n_parallel][max_blocks] */
    hc_blocks blocks;
    int32_t *tok, *pos, *seq;     /* [n_batch]: the step's rows */
    int *take, *wanted;           /* [n_parallel]: rows fed per running sequence; the request of each logits row */
    float *logits;                /* [n_parallel][n_vocab] */
} sched;

static void insert(int *a, int *n, int id)
{
    int i = *n;
    for (; i > 0 && a[i - 1] > id; i--) a[i] = a[i - 1];
    a[i] = id;
    (*n)++;
}

static void drop(int *a, int *n, int id)
{
    int i = 0;
    while (a[i] != id) i++;
    memmove(a + i, a + i + 1, sizeof *a * (size_t)(--*n - i));
}

static int32_t *table_of(sched *S, const seq_state *s) { return S->tables + (size_t)s->slot * S->max_blocks; }

/* A running sequence's blocks and table back. */
static void release(sched *S, int r)
{
    seq_state *s = &S->s[r];
    hc_blocks_give(&S->blocks, table_of(S, s), s->n_blocks);
    s->n_blocks = 0;
    S->slots[S->n_slots++] = s->slot;
    drop(S->running, &S->n_running, r);
}

static void finish(sched *S, int r, enum hc_stop why)
{
    seq_state *s = &S->s[r];
    if (s->state == RUNNING) release(S, r);
    s->state = DONE;
    hc_sampler_free(s->smp);
    s->smp = NULL;
    S->out->done(S->out->user, r, why);
}

/* The blocks that hold a sequence's cached positions. */
static int cached_blocks(const sched *S, const seq_state *s) { return hc_blocks_for(s->n_cached, S->block); }

static void swap_free(sched *S, seq_state *s)
{
    if (!s->swapped) return;
    S->swap_used -= (uint64_t)cached_blocks(S, s) * S->block_bytes;
    free(s->swapped);
    s->swapped = NULL;
}

/* The cache of running sequence s to host memory: 0; -1 when the swap
 * space does not hold it; 1 when the device failed (every cache lost). */
static int swap_out(sched *S, seq_state *s)
{
    uint64_t bytes = (uint64_t)cached_blocks(S, s) * S->block_bytes;
    if (!s->n_cached || S->swap_used + bytes > S->p->swap_space || !(s->swapped = malloc(bytes))) return -1;
    S->swap_used += bytes;
    if (hc_ctx_kv_copy(S->ctx, table_of(S, s), cached_blocks(S, s), s->swapped, 1)) {
        swap_free(S, s);
        return 1;
    }
    S->st->swapped++;
    return 0;
}

/* Preemption: the blocks back, the tokens kept; the cache swapped out where
 * `keep` and the parameters ask for it and the swap space holds it, else
 * dropped, to be recomputed. When the device fails in the swap, every
 * running sequence's cache is lost with it: they are preempted too. */
static void preempt(sched *S, int r, int keep)
{
    seq_state *s = &S->s[r];
    int rc = keep && S->p->swap ? swap_out(S, s) : -1;
    if (rc) s->n_cached = 0;
    release(S, r);
    s->state = WAITING;
    insert(S->waiting, &S->n_waiting, r);
    S->st->preempted++;
    if (rc == 1)
        while (S->n_running) preempt(S, S->running[S->n_running - 1], 0);
}

/* A swapped sequence's cache back, into its new blocks. When the device
 * fails, the copy is lost with every cache: all running are preempted. */
static void swap_in(sched *S, int r)
{
    seq_state *s = &S->s[r];
    int rc = hc_ctx_kv_copy(S->ctx, table_of(S, s), cached_blocks(S, s), s->swapped, 0);
    swap_free(S, s);
    if (rc)   /* this one too: recomputed */
        while (S->n_running) preempt(S, S->running[S->n_running - 1], 0);
}

/* Waiting requests in order while there is a free table and their tokens'
 * blocks leave the watermark free (when another runs: alone, one always
 * fits). 0, or -1 out of memory. */
static int admit(sched *S)
{
    int V = hc_ctx_model(S->ctx)->hp.n_vocab;
    while (S->n_waiting && S->n_slots) {
        int r = S->waiting[0];
        seq_state *s = &S->s[r];
        int need = hc_blocks_for(s->n_tokens, S->block);
        if (need > S->blocks.n_free || (S->n_running && S->blocks.n_free - need < S->watermark)) break;
        if (!s->smp && !(s->smp = hc_sampler_new(&S->reqs[r].sp, V))) return -1;
        s->slot = S->slots[--S->n_slots];
        for (int32_t *t = table_of(S, s); s->n_blocks < need; s->n_blocks++) t[s->n_blocks] = hc_blocks_take(&S->blocks);
        s->state = RUNNING;
        drop(S->waiting, &S->n_waiting, r);
        insert(S->running, &S->n_running, r);
        if (s->swapped) swap_in(S, r);
    }
    return 0;
}

/* A block for each running sequence whose next token starts one, the
 * oldest first; when none is free the most recent request gives its up. */
static void grow(sched *S)
{
    for (int i = 0; i < S->n_running;) {
        seq_state *s = &S->s[S->running[i]];
        if (hc_blocks_for(s->n_tokens, S->block) <= s->n_blocks) {
            i++;
            continue;
        }
        int32_t b = hc_blocks_take(&S->blocks);
        if (b >= 0) table_of(S, s)[s->n_blocks++] = b;
        else preempt(S, S->running[S->n_running - 1], 1);   /* perhaps this one: then the loop ends */
    }
}

/* The logits of request r's last token: its next token, or its end. */
static void sample(sched *S, int r, const float *logits)
{
    seq_state *s = &S->s[r];
    const hc_sched_params *p = S->p;
    if (s->n_gen >= S->reqs[r].n_predict) {
        finish(S, r, HC_STOP_LENGTH);
        return;
    }
    int32_t t = hc_sample(s->smp, logits);
    S->st->generated++;
    if (p->tok && hc_tokenizer_is_end(p->tok, t)) {
        finish(S, r, HC_STOP_EOS);
        return;
    }
    S->out->token(S->out->user, r, t);
    s->tokens[s->n_tokens++] = t;
    s->n_gen++;
    if (s->n_gen == S->reqs[r].n_predict) finish(S, r, HC_STOP_LENGTH);
    else if (s->n_tokens > p->n_ctx) finish(S, r, HC_STOP_CONTEXT);
}

static void row(sched *S, int *B, const seq_state *s, int p)
{
    S->tok[*B] = s->tokens[p];
    S->pos[*B] = p;
    S->seq[*B] = s->slot;
    (*B)++;
}

/* One step: every running sequence's next token (one row each), then its
 * prompt's next chunk for one being prefilled, as the rows left allow; the
 * rows whose logits are wanted (a sequence's last token) last. 0, or -1. */
static int step(sched *S, int n_batch, char *err, size_t errlen)
{
    int left = n_batch, B = 0, n_out = 0, prompt_rows = 0;
    for (int i = 0; i < S->n_running; i++) {   /* decoding sequences first: one row each */
        const seq_state *s = &S->s[S->running[i]];
        S->take[i] = s->n_tokens - s->n_cached == 1;
        left -= S->take[i];
    }
    for (int i = 0; i < S->n_running; i++) {
        const seq_state *s = &S->s[S->running[i]];
        int k = s->n_tokens - s->n_cached;
        if (k == 1) continue;
        S->take[i] = k < left ? k : left;
        left -= S->take[i];
        prompt_rows += S->take[i];
    }
    for (int i = 0; i < S->n_running; i++) {   /* rows that only fill the cache */
        const seq_state *s = &S->s[S->running[i]];
        int last = s->n_cached + S->take[i] == s->n_tokens;
        for (int p = s->n_cached; p < s->n_cached + S->take[i] - last; p++) row(S, &B, s, p);
    }
    for (int i = 0; i < S->n_running; i++) {   /* the rows whose logits are sampled */
        const seq_state *s = &S->s[S->running[i]];
        if (S->take[i] && s->n_cached + S->take[i] == s->n_tokens) {
            row(S, &B, s, s->n_tokens - 1);
            S->wanted[n_out++] = S->running[i];
        }
    }
    hc_seq_rows rows = { B, S->pos, S->seq, S->tables, S->p->n_parallel, S->max_blocks, S->block };
    double t0 = hc_now();
    int rc = hc_eval_rows(S->ctx, S->tok, &rows, n_out, S->logits);
    if (rc < 0) {
        snprintf(err, errlen, "%s", hc_ctx_error(S->ctx));
        return -1;
    }
    if (rc > 0) {   /* a device failed and the caches went with it: everything recomputed on the CPU */
        while (S->n_running) preempt(S, S->running[S->n_running - 1], 0);
        return 0;
    }
    hc_sched_stats *st = S->st;
    st->steps++;
    st->prompt_rows += prompt_rows;
    if (S->n_running > st->most_running) st->most_running = S->n_running;
    for (int i = 0; i < S->n_running; i++) S->s[S->running[i]].n_cached += S->take[i];
    long before = st->generated;
    size_t V = (size_t)hc_ctx_model(S->ctx)->hp.n_vocab;
    for (int j = 0; j < n_out; j++) sample(S, S->wanted[j], S->logits + (size_t)j * V);
    if (!prompt_rows) {
        st->decode_steps++;
        st->t_decode += hc_now() - t0;
        st->decode_tokens += st->generated - before;
    }
    return 0;
}

/* A request that never runs: an empty prompt, or one longer than the context. */
static int refused(const hc_request *q, const hc_sched_params *p) { return !q->n_prompt || q->n_prompt > p->n_ctx; }

static int descending(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

int hc_sched_blocks_most(const hc_request *reqs, int n, const hc_sched_params *p, int block)
{
    int *need = malloc(sizeof *need * (size_t)(n ? n : 1));
    if (!need) return 0;   /* only a hint: the blocks get their pages when first written */
    for (int r = 0; r < n; r++) {
        const hc_request *q = &reqs[r];
        long most = (long)q->n_prompt + q->n_predict;
        need[r] = refused(q, p) ? 0 : hc_blocks_for(most < p->n_ctx ? (int)most : p->n_ctx, block);
    }
    qsort(need, (size_t)n, sizeof *need, descending);
    long sum = 0;
    for (int r = 0; r < n && r < p->n_parallel; r++) sum += need[r];
    free(need);
    return sum < p->n_blocks ? (int)sum : p->n_blocks;
}

static void sched_free(sched *S, int n)
{
    for (int r = 0; S->s && r < n; r++) {
        free(S->s[r].tokens);
        free(S->s[r].swapped);
        hc_sampler_free(S->s[r].smp);
    }
    void *bufs[] = { S->s, S->waiting, S->running, S->slots, S->tables, S->tok, S->pos, S->seq, S->take, S->wanted,
                     S->logits };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    hc_blocks_free(&S->blocks);
}

int hc_sched_run(hc_ctx *ctx, const hc_request *reqs, int n, const hc_sched_params *p, const hc_sched_out *out,
                 hc_sched_stats *st, char *err, size_t errlen)
{
    size_t np = (size_t)p->n_parallel, nb = (size_t)hc_ctx_n_batch(ctx), nr = (size_t)(n ? n : 1);
    size_t V = (size_t)hc_ctx_model(ctx)->hp.n_vocab;
    const int block = hc_ctx_kv_block(ctx);
    sched S = { .ctx = ctx, .reqs = reqs, .p = p, .out = out, .st = st, .block = block,
                .max_blocks = hc_blocks_for(p->n_ctx, block), .watermark = p->n_blocks / 100,
                .block_bytes = hc_blocks_bytes(&hc_ctx_model(ctx)->hp, block, hc_ctx_kv_bytes(ctx)) };   /* vLLM's default: 1 % of the blocks */
    memset(st, 0, sizeof *st);
    if (p->n_blocks < S.max_blocks || nb < np) {
        snprintf(err, errlen, "a pool of %d KV blocks and %zu rows per step cannot run %zu sequences of %d positions",
                 p->n_blocks, nb, np, p->n_ctx);
        return -1;
    }
    S.s = calloc(nr, sizeof *S.s);
    S.waiting = malloc(sizeof *S.waiting * nr);
    S.running = malloc(sizeof *S.running * np);
    S.slots = malloc(sizeof *S.slots * np);
    S.tables = malloc(sizeof *S.tables * np * (size_t)S.max_blocks);
    S.tok = malloc(sizeof *S.tok * nb);
    S.pos = malloc(sizeof *S.pos * nb);
    S.seq = malloc(sizeof *S.seq * nb);
    S.take = malloc(sizeof *S.take * np);
    S.wanted = malloc(sizeof *S.wanted * np);
    S.logits = malloc(sizeof *S.logits * np * V);
    int rc = -1;
    if (!S.s || !S.waiting || !S.running || !S.slots || !S.tables || !S.tok || !S.pos || !S.seq || !S.take ||
        !S.wanted || !S.logits || hc_blocks_init(&S.blocks, p->n_blocks))
        goto oom;
    for (int i = (int)np - 1; i >= 0; i--) S.slots[S.n_slots++] = i;   /* table 0 taken first */
    for (int r = 0; r < n; r++) {
        const hc_request *q = &reqs[r];
        if (refused(q, p)) {
            S.s[r].state = DONE;
            out->done(out->user, r, HC_STOP_REFUSED);
            continue;
        }
        int most = q->n_prompt + (q->n_predict < p->n_ctx ? q->n_predict : p->n_ctx);
        if (!(S.s[r].tokens = malloc(sizeof *S.s[r].tokens * (size_t)most))) goto oom;
        memcpy(S.s[r].tokens, q->prompt, sizeof *q->prompt * (size_t)q->n_prompt);
        S.s[r].n_tokens = q->n_prompt;
        S.waiting[S.n_waiting++] = r;
    }
    while (S.n_waiting || S.n_running) {
        if (admit(&S)) goto oom;
        grow(&S);
        if (S.n_running && step(&S, (int)nb, err, errlen)) goto end;
    }
    rc = 0;
    goto end;
oom:
    snprintf(err, errlen, "out of memory for %d requests", n);
end:
    sched_free(&S, n);
    return rc;
}
