/* Memory read bandwidth with 1..N threads: each thread sums its share of a
 * buffer much larger than the last-level cache; best of several passes.
 * Build: cc -O2 -pthread scripts/bench_membw.c -o bench_membw
 * Usage: bench_membw [MiB (default 1024)] [max threads (default: online CPUs)]
 * Prints "threads GB/s" per line, then "best GB/s". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t v2 __attribute__((vector_size(16)));

struct job { const v2 *p; size_t n; pthread_barrier_t *bar; double secs; uint64_t sink; };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *reader(void *arg)
{
    struct job *j = arg;
    v2 a = {0, 0}, b = a, c = a, d = a;
    pthread_barrier_wait(j->bar);
    double t0 = now();
    for (size_t i = 0; i + 4 <= j->n; i += 4) {   /* four chains: loads, not adds, bound it */
        a += j->p[i], b += j->p[i + 1], c += j->p[i + 2], d += j->p[i + 3];
    }
    j->secs = now() - t0;
    v2 s = a + b + c + d;
    j->sink = s[0] + s[1];
    return NULL;
}

/* GB/s of one pass over buf with nt threads (the slowest thread's time). */
static double pass(const v2 *buf, size_t n, int nt, uint64_t *sink)
{
    pthread_t th[256];
    struct job jobs[256];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nt);
    size_t per = n / (size_t)nt;
    for (int t = 0; t < nt; t++) {
        jobs[t] = (struct job){ buf + per * (size_t)t, per, &bar, 0, 0 };
        pthread_create(&th[t], NULL, reader, &jobs[t]);
    }
    double worst = 0;
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].secs > worst) worst = jobs[t].secs;
        *sink += jobs[t].sink;
    }
    pthread_barrier_destroy(&bar);
    return (double)(per * (size_t)nt * sizeof(v2)) / worst / 1e9;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int maxt = argc > 2 ? atoi(argv[2]) : (int)ncpu;
    if (mib == 0 || maxt < 1 || maxt > 256) {
        fprintf(stderr, "usage: bench_membw [MiB] [max threads 1..256]\n");
        return 1;
    }
    size_t n = mib * 1024 * 1024 / sizeof(v2);
    v2 *buf = aligned_alloc(64, n * sizeof(v2));
    if (!buf) { fprintf(stderr, "bench_membw: cannot allocate %zu MiB\n", mib); return 1; }
    memset(buf, 1, n * sizeof(v2));   /* touch every page before timing */
    uint64_t sink = 0;
    double best = 0;
    for (int nt = 1; nt <= maxt; nt++) {
        double gbs = 0;
        for (int rep = 0; rep < 3; rep++) {
            double g = pass(buf, n, nt, &sink);
            if (g > gbs) gbs = g;
        }
        printf("%d %.1f\n", nt, gbs);
        if (gbs > best) best = gbs;
    }
    printf("best %.1f\n", best);
    free(buf);
    return sink == 42;   /* keeps the sums alive */
}
