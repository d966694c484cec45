#!/bin/sh
# The OpenCL backend's kernels as an NVIDIA GPU would run them, without a
# GPU: runtime/opencl/kernels/{common,backend,hot_rows}.cl compiled by clang's OpenCL
# front end to PTX (with libclc's built-ins), by NVIDIA's ptxas to machine
# code for ARCH, and disassembled by nvdisasm; then, for each kernel named,
# each loop's instructions (a label to the branch back to it) by opcode.
# NVIDIA's driver compiles the same source with a front end of its own, so
# the counts are a proxy: what a change does to a loop's instructions per
# byte of weights, before a GPU measures it (docs/measurements.md, "dp4a for
# the quantized products").
#   sh scripts/sass-loops.sh [KERNEL...]       (default: mv_q8 mv_q4 mm64_q4)
#   DP4A=0 sh scripts/sass-loops.sh mv_q4      (the build without dp4a)
#   sh scripts/sass-loops.sh gate_up1_f16 down8_f16   (kernels/hot_rows.cl's too)
#   CL=variant.cl sh scripts/sass-loops.sh mm64_f32   (a variant of backend.cl in
#       its place, as bench-gpu.sh's VARIANTS would time it on a GPU)
#   PTX=DIR/backend.bin sh scripts/sass-loops.sh mm64_q4
#       (the PTX NVIDIA's driver made: bench_clops kernels DIR on the GPU's
#       machine writes it; only ptxas and nvdisasm are needed then, and the
#       counts are the card's own code, not a proxy)
# Needs Debian's clang, llvm (llvm-link, opt, llc) and libclc (LIBCLC: its
# nvptx64--nvidiacl.bc; apt-get install libclc-15 or apt-get download
# libclc-14 and unpack it), and NVIDIA's ptxas and nvdisasm (CUDA_BIN, a
# folder holding both: pip download nvidia-cuda-nvcc-cu12
# nvidia-cuda-nvdisasm and unzip the wheels). Says what is missing, exit 2.
set -eu
LLVM=${LLVM:-14}
ARCH=${ARCH:-sm_90}
DP4A=${DP4A:-1}
CUDA_BIN=${CUDA_BIN:-}
LIBCLC=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
[ $# -gt 0 ] || set -- mv_q8 mv_q4 mm64_q4
tool() {
    for t in "$@"; do
        if [ -n "$CUDA_BIN" ] && [ -x "$CUDA_BIN/$t" ]; then echo "$CUDA_BIN/$t"; return; fi
        if command -v "$t" >/dev/null 2>&1; then command -v "$t"; return; fi
    done
    echo "sass-loops: $1 not found (see the header of scripts/sass-loops.sh)" >&2
    exit 2
}
# loops KERNEL...: each loop of each kernel in $T/k.sass, by opcode
loops() {
    for k in "$@"; do
        # ptxas -v: the kernel's stack frame, spills and registers
        awk -v name="$k" '$0 ~ "Function properties for " name "$" { on = 1; next }
            on && /stack frame/ { sub(/^[ \t]+/, ""); f = $0; next }
            on && /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/)
                printf "%s: %s; %s\n", name, substr($0, RSTART + 5, RLENGTH - 5), f; exit }' "$T/ptxas.txt"
        awk -v name="$k" '
            $0 ~ "^[ \t]*\\.text\\." name ":" { on = 1; next }
            on && /^[ \t]*\.section/ { exit }
            on && /^\.L_x_[0-9]+:/ { sub(":.*", ""); at[$0] = n; next }
            on && match($0, /\/\*[0-9a-f]+\*\/[ \t]+[^;]*;/) {
                ins = substr($0, RSTART, RLENGTH)
                sub(/^\/\*[0-9a-f]+\*\/[ \t]+/, "", ins)
                sub(/^@!?U?P[A-Z0-9]+[ \t]+/, "", ins)
                split(ins, w, /[ \t]+/)
                op[n++] = w[1]
                if (w[1] == "BRA" && match(ins, /\.L_x_[0-9]+/)) {
                    l = substr(ins, RSTART, RLENGTH)
                    if ((l in at) && at[l] < n - 1) {
                        delete c
                        m = 0
                        for (i = at[l]; i < n; i++) if (c[op[i]]++ == 0) u[++m] = op[i]
                        for (i = 2; i <= m; i++)   # the opcodes by count, most first
                            for (j = i; j > 1 && c[u[j]] > c[u[j - 1]]; j--) { t = u[j]; u[j] = u[j - 1]; u[j - 1] = t }
                        s = ""
                        for (i = 1; i <= m; i++) s = s sprintf("%s%s %d", i > 1 ? ", " : "", u[i], c[u[i]])
                        printf "%s: loop of %d instructions: %s\n", name, n - at[l], s
                    }
                }
            }' "$T/k.sass"
    done
}
PTXAS=$(tool ptxas)
NVDISASM=$(tool nvdisasm)
T=$(mktemp -d "${TMPDIR:-/tmp}/hcsass.XXXXXX")
trap 'rm -rf "$T"' EXIT
# sass NAME: $T/NAME.ptx to machine code, disassembled into $T/NAME.sass
sass() {
    "$PTXAS" -v -arch="$ARCH" -O3 "$T/$1.ptx" -o "$T/$1.cubin" 2>> "$T/ptxas.txt" ||
        { cat "$T/ptxas.txt" >&2; exit 1; }   # its messages, kept for the registers, are also its errors
    "$NVDISASM" -c "$T/$1.cubin" 2>/dev/null > "$T/$1.sass"
}
if [ -n "${PTX:-}" ]; then
    [ -f "$PTX" ] || { echo "sass-loops: PTX: no file $PTX" >&2; exit 2; }
    cp "$PTX" "$T/k.ptx"
    sass k
    echo "$ARCH, the driver's PTX ($PTX): each loop's instructions (a label to the branch back to it), by opcode"
    loops "$@"
    exit 0
fi
CLANG=$(tool clang-"$LLVM" clang)
LINK=$(tool llvm-link-"$LLVM" llvm-link)
OPT=$(tool opt-"$LLVM" opt)
LLC=$(tool llc-"$LLVM" llc)
[ -f "$LIBCLC" ] || { echo "sass-loops: $LIBCLC not found (LIBCLC: libclc's nvptx64--nvidiacl.bc)" >&2; exit 2; }
K=runtime/opencl/kernels
# The host's -D options (runtime/opencl/backend.c, build_options): the enums'
# values do not change the loops; clang spells NVIDIA's asm as __asm__, and
# declares vload_half only with cl_khr_fp16 on (the kernels use no half
# arithmetic).
DOTS="-Dasm=__asm__"
[ "$DP4A" = 0 ] || DOTS="$DOTS -DHC_DP4A=1"   # both programs (runtime/opencl/cl.c, hc_cl_build)
D="-DTOKENS=8 -DMM_ROWS=64 -DMM_ITEMS=128 -DQ8_RUN=32 -DHC_ACT_SILU=0 -DHC_ACT_RELU=1 -DHC_ACT_GELU=2 -DHC_NORM_RMS=0
   -DHC_NORM_LAYER=1 -DHC_POS_ROPE=0 -DHC_POS_ROPE_NEOX=1 -DHC_FFN_GATED=0 -DHC_FFN_SYMMETRIC=1 -DHC_FFN_SEQUENTIAL=2
   $DOTS"
# build NAME FILE OPTIONS: common.cl and FILE as one program into $T/NAME.sass
build() {
    cat "$K/common.cl" "$2" > "$T/$1.cl"
    # shellcheck disable=SC2086
    "$CLANG" -target nvptx64-nvidia-nvcl -cl-std=CL1.2 -Xclang -finclude-default-header -Xclang -cl-ext=+cl_khr_fp16 \
        -O2 -emit-llvm -c $3 "$T/$1.cl" -o "$T/$1.bc"
    "$LINK" "$T/$1.bc" "$LIBCLC" -only-needed -o "$T/$1.l.bc" 2>/dev/null   # (a warning on the two triples' spelling)
    "$OPT" -O3 "$T/$1.l.bc" -o "$T/$1.o.bc"
    "$LLC" -mcpu=sm_80 -mattr=+ptx70 "$T/$1.o.bc" -o "$T/$1.ptx"
    sass "$1"
}
build backend "${CL:-$K/backend.cl}" "$D"
# the hybrid FFN's hot-row kernels (gate_up1_T, gate_up8_T, down1_T, down8_T), with runtime/opencl/cl.c's
# options on a GPU (groups of HC_CL_WG_MAX, tiles of HC_CL_TILE tokens)
build hot "$K/hot_rows.cl" "-DWG=64 -DTILE=8 $DOTS"
cat "$T/backend.sass" "$T/hot.sass" > "$T/k.sass"
echo "$ARCH, dp4a $DP4A: each loop's instructions (a label to the branch back to it), by opcode"
loops "$@"
