/* Read bandwidth of scattered rows, the sparse FFN's access pattern: one
 * thread reads a random FRACTION of the ROW-byte rows of a buffer much larger
 * than the last-level cache, in ascending order (a listed neuron set), summing
 * them with 64-byte loads; each pass lists other rows. Software prefetch of
 * the row DIST listed rows ahead (none, into L1 = prefetcht0, into L2 =
 * prefetcht1), on 4 KiB pages and on memory advised to use 2 MiB pages
 * (transparent huge pages). GB/s of the rows read, best of the passes, in
 * wall time (run it on a quiet machine: it is a bound, not a kernel).
 * Usage: bench_gather [ROW bytes (2048)] [FRACTION (0.08)] [MiB (512)]
 * Prints "pages prefetch dist GB/s" per line, then bench_membw's kind of
 * figure for the same buffer read whole ("stream"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64)));

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void prefetch(const char *row, size_t rb, int hint)
{
    for (size_t o = 0; o < rb; o += 64) {
        if (hint == 1) __builtin_prefetch(row + o, 0, 3);
        else __builtin_prefetch(row + o, 0, 2);
    }
}

/* Sum of the listed rows (hint 0: no prefetch); *secs: the time. Compiled
 * for the widest vectors the CPU runs: built for the baseline (SSE2), the
 * adds held even the sequential pass to 20 GB/s against 30 with AVX-512. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static float gather(const char *buf, size_t rb, const int32_t *idx, int k, int hint, int dist, double *secs)
{
    v16 a = { 0 }, b = a;
    double t0 = now();
    for (int i = 0; i < k; i++) {
        if (hint && i + dist < k) prefetch(buf + (size_t)idx[i + dist] * rb, rb, hint);
        const v16 *r = (const v16 *)(buf + (size_t)idx[i] * rb);
        for (size_t j = 0; j + 2 <= rb / 64; j += 2) a += r[j], b += r[j + 1];
    }
    *secs = now() - t0;
    a += b;
    float s = 0;
    for (int i = 0; i < 16; i++) s += a[i];
    return s;
}

/* k ascending rows out of n, each with probability about frac. */
static int pick(int32_t *idx, int n, double frac, uint64_t *seed)
{
    int k = 0;
    for (int r = 0; r < n; r++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        if ((double)(*seed >> 11) / 9007199254740992.0 < frac) idx[k++] = r;
    }
    return k;
}

int main(int argc, char **argv)
{
    size_t rb = argc > 1 ? strtoul(argv[1], NULL, 10) : 2048;
    double frac = argc > 2 ? atof(argv[2]) : 0.08;
    size_t mib = argc > 3 ? strtoul(argv[3], NULL, 10) : 512;
    if (rb < 128 || rb % 128 || !(frac > 0 && frac <= 1) || mib < 64) {
        fprintf(stderr, "usage: bench_gather [row bytes, a multiple of 128] [fraction 0..1] [MiB >= 64]\n");
        return 1;
    }
    size_t bytes = mib << 20;
    int n = (int)(bytes / rb);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    char *bufs[2];
    for (int h = 0; h < 2; h++) {
        void *p;
        if (posix_memalign(&p, (size_t)2 << 20, bytes)) p = NULL;
        bufs[h] = p;
        if (p) madvise(p, bytes, h ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        if (p) memset(p, 1, bytes);
    }
    if (!idx || !bufs[0] || !bufs[1]) {
        fprintf(stderr, "bench_gather: cannot allocate %zu MiB twice\n", mib);
        return 1;
    }
    static const struct { int hint, dist; const char *name; } modes[] = {
        { 0, 0, "none" }, { 1, 1, "L1" }, { 2, 1, "L2" }, { 2, 2, "L2" }, { 2, 4, "L2" }, { 2, 8, "L2" },
    };
    uint64_t seed = 1;
    float sink = 0;
    printf("rows of %zu bytes, %.3f of %d rows (%zu MiB), 1 thread\n", rb, frac, n, mib);
    for (int h = 0; h < 2; h++)
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            double best = 0;
            for (int pass = 0; pass < 10; pass++) {
                int k = pick(idx, n, frac, &seed);
                double secs;
                sink += gather(bufs[h], rb, idx, k, modes[m].hint, modes[m].dist, &secs);
                double g = (double)k * (double)rb / secs / 1e9;
                if (g > best) best = g;
            }
            printf("%s %s %d %.1f\n", h ? "2M" : "4K", modes[m].name, modes[m].dist, best);
        }
    for (int h = 0; h < 2; h++) {
        double best = 0;
        for (int pass = 0; pass < 3; pass++) {
            double secs;
            for (int r = 0; r < n; r++) idx[r] = r;
            sink += gather(bufs[h], rb, idx, n, 0, 0, &secs);
            double g = (double)bytes / secs / 1e9;
            if (g > best) best = g;
        }
        printf("%s stream - %.1f\n", h ? "2M" : "4K", best);
    }
    free(bufs[0]);
    free(bufs[1]);
    free(idx);
    return sink == 42.0f;
}
