/* Memory read bandwidth with 1..N threads, the figure decode is measured
 * against (issue 20: "% of the measured read bandwidth"). Each thread reads
 * its own part of a buffer much larger than the last-level cache with the
 * widest loads the CPU has (64-byte AVX-512 loads, else 32-byte AVX2, else
 * 16-byte vectors), summing 8 independent chains so that the loads, not the
 * adds, bound it; its part is read as S streams side by side (S = 1, 2, 4, 8:
 * S sub-ranges advanced together, as the hardware prefetchers see several
 * rows), and the best of the stream counts and of P passes is kept. The time
 * of a pass is the slowest thread's wall time. The buffer is advised to use
 * 2 MiB pages (transparent huge pages), as hc-run's weights are: with 4 KiB
 * pages one core read 22-27 GB/s here against 33 in 2 MiB pages (the TLB
 * misses, not the memory, bound it; scripts/bench_gather.c "stream").
 * Build: make build/bench/bench_membw
 * Usage: bench_membw [MiB (default 1024)] [max threads (default: online CPUs)] [passes (default 5)]
 * Prints "threads GB/s loads streams" per thread count (the best), then "best GB/s". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* 64 bytes; the compiler uses the widest registers of the function's target. */
typedef uint64_t v8 __attribute__((vector_size(64), may_alias));

#define LINE 64                          /* bytes per step of a stream */
#define CHAINS 8                         /* independent sums: lines in flight per step */
static const int stream_counts[] = { 1, 2, 4, CHAINS };

/* The sum of ns streams of `lines` lines each (stream s starts at p + s *
 * lines * LINE), CHAINS lines per step spread over the streams. */
static inline __attribute__((always_inline)) uint64_t read_lines(const char *p, size_t lines, int ns)
{
    size_t off[CHAINS];
    v8 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) {
        off[c] = ((size_t)(c % ns) * lines + (size_t)(c / ns)) * LINE;
        acc[c] = (v8){ 0 };
    }
    for (size_t i = 0; i < lines; i += (size_t)(CHAINS / ns)) {
        const char *q = p + i * LINE;
        _Pragma("GCC unroll 8")
        for (int c = 0; c < CHAINS; c++) acc[c] += *(const v8 *)(q + off[c]);
    }
    v8 t = acc[0];
    for (int c = 1; c < CHAINS; c++) t += acc[c];
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

typedef uint64_t (*reader_fn)(const char *p, size_t lines, int ns);
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static uint64_t read_avx512(const char *p, size_t lines, int ns)
{
    return read_lines(p, lines, ns);
}
__attribute__((target("avx2"))) static uint64_t read_avx2(const char *p, size_t lines, int ns)
{
    return read_lines(p, lines, ns);
}
#endif
static uint64_t read_base(const char *p, size_t lines, int ns) { return read_lines(p, lines, ns); }

struct job { reader_fn read; const char *p; size_t lines; int ns; pthread_barrier_t *bar; double secs; uint64_t sink; };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *reader(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(j->bar);
    double t0 = now();
    j->sink = j->read(j->p, j->lines, j->ns);
    j->secs = now() - t0;
    return NULL;
}

/* GB/s of one pass over bytes of buf with nt threads, each its own part as
 * ns streams (the slowest thread's time). */
static double pass(reader_fn read, const char *buf, size_t bytes, int nt, int ns, uint64_t *sink)
{
    pthread_t th[256];
    struct job jobs[256];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nt);
    size_t lines = bytes / LINE / (size_t)nt / CHAINS * CHAINS / (size_t)ns;   /* per stream */
    for (int t = 0; t < nt; t++) {
        jobs[t] = (struct job){ read, buf + (size_t)t * lines * (size_t)ns * LINE, lines, ns, &bar, 0, 0 };
        pthread_create(&th[t], NULL, reader, &jobs[t]);
    }
    double worst = 0;
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].secs > worst) worst = jobs[t].secs;
        *sink += jobs[t].sink;
    }
    pthread_barrier_destroy(&bar);
    return (double)(lines * (size_t)ns * (size_t)nt * LINE) / worst / 1e9;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int maxt = argc > 2 ? atoi(argv[2]) : (int)ncpu, passes = argc > 3 ? atoi(argv[3]) : 5;
    if (mib == 0 || maxt < 1 || maxt > 256 || passes < 1) {
        fprintf(stderr, "usage: bench_membw [MiB] [max threads 1..256] [passes >= 1]\n");
        return 1;
    }
    reader_fn read = read_base;
    const char *loads = "16-byte";
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) read = read_avx512, loads = "64-byte";
    else if (__builtin_cpu_supports("avx2")) read = read_avx2, loads = "32-byte";
#endif
    size_t bytes = mib * 1024 * 1024;
    char *buf = aligned_alloc((size_t)2 << 20, bytes);
    if (!buf) { fprintf(stderr, "bench_membw: cannot allocate %zu MiB\n", mib); return 1; }
    madvise(buf, bytes, MADV_HUGEPAGE);
    memset(buf, 1, bytes);   /* touch every page before timing */
    uint64_t sink = 0;
    double best = 0;
    for (int nt = 1; nt <= maxt; nt++) {
        double gbs = 0;
        int best_ns = 1;
        for (int rep = 0; rep < passes; rep++)
            for (size_t k = 0; k < sizeof stream_counts / sizeof stream_counts[0]; k++) {
                double g = pass(read, buf, bytes, nt, stream_counts[k], &sink);
                if (g > gbs) gbs = g, best_ns = stream_counts[k];
            }
        printf("%d %.1f %s %d\n", nt, gbs, loads, best_ns);
        if (gbs > best) best = gbs;
    }
    printf("best %.1f\n", best);
    free(buf);
    return sink == 42;   /* keeps the sums alive */
}
