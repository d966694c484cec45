/* Choosing an OpenCL device, and telling why a GPU may be invisible
 * (runtime/opencl.h). Plain C, in every build: no OpenCL call here. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "opencl.h"

int hc_cl_pick(const hc_cl_info *list, int n, const char *device, char *err, size_t errlen)
{
    const char *what = "--device";
    if (!device) {
        device = getenv("HC_OPENCL_DEVICE");
        what = "HC_OPENCL_DEVICE";
    }
    if (device && *device) {
        char *end;
        long v = strtol(device, &end, 10);
        if (end == device || *end || v < 0 || v >= n) {
            snprintf(err, errlen, "%s %s: no such OpenCL device (%d listed: hc-run --list-devices)", what, device, n);
            return -1;
        }
        return (int)v;
    }
    for (int i = 0; i < n; i++)
        if (list[i].is_gpu) return i;
    if (n > 0) return 0;
    snprintf(err, errlen, "OpenCL: the platforms list no device");
    return -1;
}

int hc_cl_choose(const char *device, hc_cl_info *info, char *err, size_t errlen)
{
    hc_cl_info list[HC_CL_MAX_DEVICES];
    int n = hc_cl_list(list, HC_CL_MAX_DEVICES, err, errlen);
    int i = n < 0 ? -1 : hc_cl_pick(list, n, device, err, errlen);
    if (i >= 0) *info = list[i];
    return i;
}

void hc_cl_describe(const hc_cl_info *d, int index, char *line, size_t len)
{
    char sz[32];
    snprintf(line, len, "device %d: '%s' (platform '%s', %s, %u compute units, %s, %s)", index, d->name, d->platform,
             d->version, d->compute_units, hc_format_size(d->mem_size, sz, sizeof sz),
             d->is_gpu ? "GPU" : "a CPU device");
}

/* The OpenCL libraries of GPU vendors, as their ICD files name them. */
static const struct { const char *lib, *icd; } vendors[] = {
    { "libnvidia-opencl.so.1", "nvidia" },
    { "libamdocl64.so", "amdocl64" },
    { "libigdrcl.so", "intel" },
};

/* 1 when ICD file `path` names lib (as a bare name or a path ending in it). */
static int icd_names(const char *path, const char *lib)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int yes = 0;
    if (!f) return 0;
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        const char *base = strrchr(line, '/');
        yes = strcmp(base ? base + 1 : line, lib) == 0;
    }
    fclose(f);
    return yes;
}

/* 1 when an ICD file the loader reads names lib: $OCL_ICD_VENDORS (a
 * folder of *.icd files, or one such file) else /etc/OpenCL/vendors. */
static int registered(const char *lib)
{
    const char *dir = getenv("OCL_ICD_VENDORS");
    struct stat st;
    if (!dir || !*dir) dir = "/etc/OpenCL/vendors";
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) return icd_names(dir, lib);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int yes = 0;
    for (struct dirent *e; !yes && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        char path[4096];
        if (n < 4 || strcmp(e->d_name + n - 4, ".icd")) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path) yes = icd_names(path, lib);
    }
    closedir(d);
    return yes;
}

/* Folder `dir` (length n) holds lib: its path in path. */
static int holds(const char *dir, size_t n, const char *lib, char *path, size_t len)
{
    struct stat st;
    if (n == 0 || (size_t)snprintf(path, len, "%.*s/%s", (int)n, dir, lib) >= len) return 0;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int hc_cl_icd_hint(char *hint, size_t len)
{
    static const char *const usual = "/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/lib:/usr/local/nvidia/lib64:"
                                     "/usr/local/lib";
    const char *env = getenv("LD_LIBRARY_PATH");
    const char *paths[2] = { env ? env : "", usual };
    char path[4096];
    hint[0] = 0;
    for (size_t v = 0; v < sizeof vendors / sizeof vendors[0]; v++)
        for (int p = 0; p < 2; p++)
            for (const char *d = paths[p]; *d;) {
                size_t n = strcspn(d, ":");
                if (holds(d, n, vendors[v].lib, path, sizeof path)) {
                    if (registered(vendors[v].lib)) return 0;
                    snprintf(hint, len, "%s is installed but no ICD file names it, so OpenCL cannot see that GPU: "
                             "register it with 'echo %s > /etc/OpenCL/vendors/%s.icd' (as root), or put that line "
                             "in a file %s.icd of a folder of your own and set OCL_ICD_VENDORS to the folder",
                             path, path, vendors[v].icd, vendors[v].icd);
                    return 1;
                }
                d += n + (d[n] == ':');
            }
    return 0;
}
