/* A persistent thread pool: the caller plus n-1 pthreads share the chunks of
 * one task at a time, handed out dynamically (a descheduled thread on a busy
 * machine delays nobody but its own chunk). A chunk covers fixed items that
 * do not depend on which thread runs it, so every output element is computed
 * by exactly one thread in the same order whatever the thread count. */
#ifndef HC_THREADS_H
#define HC_THREADS_H

#include <stddef.h>

typedef struct hc_pool hc_pool;
/* Run chunk `chunk` of a task; ith (< pool size) names the thread, for per-thread scratch. */
typedef void (*hc_task_fn)(void *arg, int chunk, int ith);

/* n_threads >= 1 (1: no pthreads, tasks run on the caller). NULL on failure. */
hc_pool *hc_pool_new(int n_threads);
void hc_pool_free(hc_pool *p);
int hc_pool_size(const hc_pool *p);
/* Run fn(arg, c, ith) for every c in [0, n_chunks); returns when all are
 * done. n_chunks must be 1..2^20-1 (hc_pool_chunks gives one): anything else
 * is a caller bug and exits with a message (hc_die) rather than running
 * nothing. n_chunks == 1 runs on the caller without waking anyone.
 * Not reentrant. */
void hc_pool_run(hc_pool *p, hc_task_fn fn, void *arg, int n_chunks);
/* How many chunks to cut `work` (multiply-adds) over n_units split units
 * into: 1 when too small to be worth waking threads, else about 4 per thread. */
int hc_pool_chunks(const hc_pool *p, int n_units, size_t work);

/* fn(arg, lo, hi) over ranges that cover [0, n) once, split over the pool
 * like a task of hc_pool_chunks(p, n, work) chunks: for items that do not
 * depend on each other (the rows of a batch), whose values then do not
 * depend on the split. */
typedef void (*hc_range_fn)(void *arg, int lo, int hi);
void hc_pool_ranges(hc_pool *p, hc_range_fn fn, void *arg, int n, size_t work);

/* Range [*lo, *hi) of [0, n) (boundaries at multiples of unit) that chunk
 * `chunk` of n_chunks takes: [0, n) cut into `regions` runs (hc_split), the
 * chunks dealt to the runs in turn (chunk mod regions is the run, chunk /
 * regions the place in it), each run's q = n_chunks / regions pieces in
 * order and shrinking, q, q - 1, ..., 1 parts of q(q + 1)/2. With one run
 * per thread and the threads claiming chunks in turn, each thread walks its
 * own run from start to end, and the chunk a product's end waits for is a
 * run's smallest. regions <= 1, or one that does not divide n_chunks:
 * hc_split's part `chunk`. */
void hc_pool_run_range(int n, int unit, int chunk, int n_chunks, int regions, int *lo, int *hi);

/* Range [*lo, *hi) of part i of nparts over [0, n), boundaries at multiples of unit. */
void hc_split(int n, int unit, int i, int nparts, int *lo, int *hi);

#endif
