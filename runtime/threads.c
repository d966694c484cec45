/* Persistent thread pool with dynamic chunks.
 *
 * One 64-bit word holds the task: generation (24 bits) | chunk count (20) |
 * next chunk (20). A thread claims a chunk by compare-and-swap on that word,
 * so it can never claim a chunk of a task other than the one it read; and
 * since the caller publishes the next task only after every chunk is done,
 * fn/arg are stable while a claimed chunk runs. Idle workers spin briefly
 * (a token's products come back to back), then sleep on a condition variable
 * so an idle runtime does not burn a shared machine's cores. */
#include "threads.h"

#include "cli.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum { SPIN = 4096, MIN_CHUNK_WORK = 32768 };

#define GEN(w) ((unsigned)((w) >> 40))
#define NCH(w) ((unsigned)(((w) >> 20) & 0xFFFFF))
#define IDX(w) ((unsigned)((w) & 0xFFFFF))

typedef struct {
    hc_pool *pool;
    int ith;
} worker;

struct hc_pool {
    int n;
    pthread_t *th;
    worker *w;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    hc_task_fn fn;
    void *arg;
    unsigned gen;
    _Atomic uint64_t task;
    atomic_int done;       /* chunks finished in the current task */
    atomic_int sleeping;
    atomic_int quit;
};

/* Claim and run chunks of generation gen until none is left. */
static void run_chunks(hc_pool *p, unsigned gen, int ith)
{
    uint64_t w = atomic_load(&p->task);
    while (GEN(w) == gen && IDX(w) < NCH(w)) {
        if (!atomic_compare_exchange_weak(&p->task, &w, w + 1)) continue;
        p->fn(p->arg, (int)IDX(w), ith);
        atomic_fetch_add(&p->done, 1);
        w = atomic_load(&p->task);
    }
}

static void *worker_main(void *arg)
{
    worker *me = arg;
    hc_pool *p = me->pool;
    unsigned seen = 0;
    for (;;) {
        uint64_t w;
        for (int i = 0; GEN(w = atomic_load(&p->task)) == seen; i++) {
            if (i < SPIN) { CPU_RELAX(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleeping, 1);
            while (GEN(atomic_load(&p->task)) == seen) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleeping, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = GEN(w);
        run_chunks(p, seen, me->ith);
    }
}

/* Publish a new task word and wake sleeping workers. */
static void publish(hc_pool *p, unsigned n_chunks)
{
    p->gen = (p->gen + 1) & 0xFFFFFF;
    atomic_store(&p->task, (uint64_t)p->gen << 40 | (uint64_t)n_chunks << 20);
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
}

hc_pool *hc_pool_new(int n_threads)
{
    hc_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (p->n == 1) return p;
    p->th = calloc((size_t)p->n, sizeof *p->th);
    p->w = calloc((size_t)p->n, sizeof *p->w);
    if (!p->th || !p->w) { p->n = 1; hc_pool_free(p); return NULL; }
    for (int i = 1; i < p->n; i++) {
        p->w[i] = (worker){ p, i };
        if (pthread_create(&p->th[i], NULL, worker_main, &p->w[i]) != 0) {
            p->n = i;   /* free joins the ones that started */
            hc_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void hc_pool_free(hc_pool *p)
{
    if (!p) return;
    if (p->n > 1) {
        atomic_store(&p->quit, 1);
        publish(p, 0);
        for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->th);
    free(p->w);
    free(p);
}

int hc_pool_size(const hc_pool *p) { return p->n; }

void hc_pool_run(hc_pool *p, hc_task_fn fn, void *arg, int n_chunks)
{
    /* a count the task word cannot hold would run some chunks or none, and
     * the caller would wait for the rest forever: refuse it out loud */
    if (n_chunks < 1 || n_chunks > 0xFFFFF || !fn)
        hc_die("hc_pool_run: %d chunks (must be 1..%d; see hc_pool_chunks)", n_chunks, 0xFFFFF);
    if (p->n == 1 || n_chunks == 1) {
        for (int c = 0; c < n_chunks; c++) fn(arg, c, 0);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->done, 0);
    publish(p, (unsigned)n_chunks);
    run_chunks(p, p->gen, 0);
    /* a worker still busy may be descheduled: yield the core to it */
    for (int i = 0; atomic_load(&p->done) < n_chunks; i++) {
        if (i < SPIN) CPU_RELAX();
        else sched_yield();
    }
}

int hc_pool_chunks(const hc_pool *p, int n_units, size_t work)
{
    if (p->n == 1 || work < 2 * (size_t)MIN_CHUNK_WORK) return 1;
    size_t c = 4 * (size_t)p->n;
    if (c > work / MIN_CHUNK_WORK) c = work / MIN_CHUNK_WORK;
    if (c > (size_t)n_units) c = (size_t)n_units;
    if (c > 0xFFFFF) c = 0xFFFFF;
    return c < 1 ? 1 : (int)c;
}

void hc_pool_run_range(int n, int unit, int chunk, int n_chunks, int regions, int *lo, int *hi)
{
    if (regions <= 1 || n_chunks % regions) {
        hc_split(n, unit, chunk, n_chunks, lo, hi);
        return;
    }
    int q = n_chunks / regions, j = chunk / regions, r0, r1;
    hc_split(n, unit, chunk % regions, regions, &r0, &r1);
    long units = (r1 - r0 + (long)unit - 1) / unit, parts = (long)q * (q + 1) / 2;
    long a = (long)j * q - (long)j * (j - 1) / 2;   /* the parts of the pieces before j */
    long b = a + q - j;
    *lo = r0 + (int)(units * a / parts) * unit;
    *hi = r0 + (int)(units * b / parts) * unit;
    *lo = *lo < r1 ? *lo : r1;
    *hi = *hi < r1 ? *hi : r1;
}

void hc_split(int n, int unit, int i, int nparts, int *lo, int *hi)
{
    long units = (n + (long)unit - 1) / unit;
    long a = units * i / nparts * unit, b = units * (i + 1) / nparts * unit;
    *lo = (int)(a < n ? a : n);
    *hi = (int)(b < n ? b : n);
}

typedef struct {
    hc_range_fn fn;
    void *arg;
    int n, n_chunks;
} range_task;

static void range_chunk(void *arg, int chunk, int ith)
{
    const range_task *t = arg;
    int lo, hi;
    (void)ith;
    hc_split(t->n, 1, chunk, t->n_chunks, &lo, &hi);
    if (lo < hi) t->fn(t->arg, lo, hi);
}

void hc_pool_ranges(hc_pool *p, hc_range_fn fn, void *arg, int n, size_t work)
{
    if (n <= 0) return;
    range_task t = { fn, arg, n, hc_pool_chunks(p, n, work) };
    hc_pool_run(p, range_chunk, &t, t.n_chunks);
}
