/* The OpenCL device a run would use (HC_OPENCL_DEVICE, else the first GPU)
 * and its copy bandwidth, for scripts/bench-gpu.sh. Usage: bench_cldev [MiB]
 * Prints "device N: ... " then "copy: X GB/s (MiB MiB buffers)". */
#include <stdio.h>
#include <stdlib.h>

#include "opencl.h"

int main(int argc, char **argv)
{
    const size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    char err[512], line[512];
    hc_cl *cl = hc_cl_open(NULL, 0, err, sizeof err);
    if (!cl || mib < 1) {
        fprintf(stderr, "bench_cldev: %s\n", cl ? "bad size" : err);
        return 1;
    }
    hc_cl_describe(hc_cl_about(cl), hc_cl_index(cl), line, sizeof line);
    double bw = hc_cl_copy_bandwidth(cl, mib << 20, 20, err, sizeof err);
    if (bw < 0) {
        fprintf(stderr, "bench_cldev: %s\n", err);
        hc_cl_free(cl);
        return 1;
    }
    printf("%s\ncopy: %.1f GB/s (%zu MiB buffers)\n", line, bw / 1e9, mib);
    hc_cl_free(cl);
    return 0;
}
