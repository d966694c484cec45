/* The table of CPU models: for each, the instruction set each weight type's
 * kernels take on it, how AVX-512 Q4_0 unpacks its nibbles there, whether
 * AVX-512 decode reads rows as streams and whether AVX-512 BF16 takes
 * vdpbf16ps or its FMAs (kernels.h, hc_kernel_table). A row
 * comes from scripts/tune-kernels.sh run on that CPU, which times every
 * instruction set's kernels for decode and prompts and prints the row; a CPU
 * without a row takes the best instruction set it runs for every type,
 * decodes as streams and takes vdpbf16ps (docs/design/kernels.md, "Choosing the kernels": why a
 * table and not a timing at startup). */
#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <string.h>

#define A2 HC_ISA_AVX2
#define A5 HC_ISA_AVX512

static const struct {
    const char *name, *vendor;
    int family, model_lo, model_hi;
    hc_kernel_row k;   /* { F32, F16, BF16, Q8_0, Q4_0, INT4-GPTQ }, word permutes, streams, vdpbf16ps */
} rows[] = {
    /* Zen 4 (family 25 with AVX-512; Zen 3, the same family without it, has no
     * row since it does not run A5): EPYC 9004 model 17, 2026-11-27, each type
     * fastest on AVX-512 for decode and prompts, Q4_0 with word permutes
     * (docs/measurements.md, "Kernels chosen by CPU model"); F16 and BF16
     * 4096-wide rows decoded faster one at a time there, the quantized ones
     * without a fetch ahead (not measured as streams); BF16's vdpbf16ps tile
     * twice its FMAs' (190-201 against 96-102 GFLOP/s, docs/design/kernels.md);
     * the same row again on 2026-12-03, the quantized types timed as streams
     * too (docs/measurements.md, "Zen 4 again") */
    { "Zen 4", "AuthenticAMD", 25, 0x00, 0xff, { { A5, A5, A5, A5, A5, A5 }, 1, 0, 1 } },
    /* Zen 5: Q4_0 decode on AVX-512 at half AVX2's speed (66-71 against
     * 136-141 tok/s, issue 36, the kernel that unpacked with vpermt2w; the
     * one without word permutes is not measured there yet; decode and BF16 as
     * Zen 4's) */
    { "Zen 5", "AuthenticAMD", 26, 0x00, 0xff, { { A5, A5, A5, A5, A2, A5 }, 0, 0, 1 } },
    /* An Intel Xeon with AMX and AVX512-FP16 (Sapphire Rapids' features) in a
     * VM that reports family 6 model 167, 2026-12-02: each type fastest on
     * AVX-512; Q4_0 from the mapping 0.72 of the chunks' prompt tile with word
     * permutes against 0.69 with dword permutes, a near tie; decode as
     * streams fetching ahead: Q4_0 47-50 -> 72-82 tok/s, F16 17.4 -> 23;
     * BF16 by FMAs, vdpbf16ps peaking at half their GFLOP/s here: the prompt
     * tile 118-133 against 104-111 GFLOP/s, prompts 6-9 % faster
     * (docs/measurements.md, "Intel Xeon (AVX-512, AMX), every type") */
    { "Intel Xeon (model 167)", "GenuineIntel", 6, 167, 167, { { A5, A5, A5, A5, A5, A5 }, 1, 1, 0 } },
    /* The Xeon host of the lent H200 machine, family 6 model 207 (Emerald
     * Rapids' number), 2026-12-04: each type fastest on AVX-512 again; Q4_0
     * from the mapping with dword permutes 0.82 / 0.71 of the best decode /
     * prompt against 0.70 / 0.99 with word permutes (a near tie, the other
     * way round from model 167); decode as streams 1.02-1.21 of a read
     * against 0.73-1.01 a row at a time; BF16 by FMAs, the prompt tile 78.2
     * against 69.4 GFLOP/s by vdpbf16ps (docs/measurements.md, "The lent
     * H200 machine's Xeon (family 6 model 207)") */
    { "Intel Xeon (model 207)", "GenuineIntel", 6, 207, 207, { { A5, A5, A5, A5, A5, A5 }, 0, 1, 0 } },
};

void hc_cpu_identify(hc_cpu_id *c)
{
    memset(c, 0, sizeof *c);
#if defined(__x86_64__)
    unsigned a, b, d, e;
    if (!__get_cpuid(0, &a, &b, &e, &d)) return;
    memcpy(c->vendor, &b, 4);
    memcpy(c->vendor + 4, &d, 4);
    memcpy(c->vendor + 8, &e, 4);
    if (!__get_cpuid(1, &a, &b, &e, &d)) return;
    /* the display family and model (Intel SDM and AMD APM, cpuid leaf 1) */
    int fam = (int)(a >> 8 & 0xf), model = (int)(a >> 4 & 0xf);
    if (fam == 0xf) fam += (int)(a >> 20 & 0xff);
    if (fam == 0x6 || fam >= 0xf) model += (int)(a >> 16 & 0xf) << 4;
    c->family = fam;
    c->model = model;
#endif
}

const char *hc_kernel_table(const hc_cpu_id *c, int best, hc_kernel_row *row)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (strcmp(rows[i].vendor, c->vendor) || rows[i].family != c->family || c->model < rows[i].model_lo ||
            c->model > rows[i].model_hi)
            continue;
        int top = 0;
        for (int t = 0; t < HC_KT_COUNT; t++) top = rows[i].k.isa[t] > top ? rows[i].k.isa[t] : top;
        if (top > best) continue;
        *row = rows[i].k;
        return rows[i].name;
    }
    return NULL;
}
