#!/bin/sh
# ab_kernels.sh: the prefill GEMM kernels of two checkouts side by side, in one program
# that calls them in turn (tools/ab_kernels.c), so that the machine's drift from minute to
# minute falls on both alike. For changes inside simd/quant_x86.c (the int8 tile) or
# simd/vec_kernels.c (the fp32 tile) that are too small to see between two runs.
#
# Usage: sh tools/ab_kernels.sh A_DIR B_DIR [SHAPE ...]
#   A_DIR, B_DIR: checkouts of this repository (B usually this one, A an older commit,
#   e.g. `git worktree add ../before HEAD~1`). SHAPE: KIND:IC:OC (KIND q8, q8p or fp32;
#   q8p: the packed int8 kernel, AVX-512 VNNI builds); by default the int8 (row) and fp32
#   shapes of s15m and s110m, 256 rows each.
# Environment: CC (cc), CFLAGS (-O3 -march=native: the same for both builds), ROUNDS (300
#   pairs a shape), COPIES (1; e.g. 100 for w read from memory, as in a prompt), OUTS (1;
#   e.g. 8 for out buffers in L3, as in a prompt), B (build:
#   where the program and its objects go, build/ab in this checkout), ONE_CPU (the CPU the
#   program is held to with taskset, when there: by default the first this may run on;
#   empty: none).
# Prints a markdown table: per shape each build's best / median G operations/s, the
# median of the pairs' B/A speed ratios, and whether A and B gave the same bits. Needs
# x86-64 (the int8 tile is quant_x86.c's), objcopy (binutils), and the same QuantMatrix in
# both checkouts; asserts nothing.
set -eu
a_dir=${1:?usage: sh tools/ab_kernels.sh A_DIR B_DIR [KIND:IC:OC ...]}
b_dir=${2:?usage: sh tools/ab_kernels.sh A_DIR B_DIR [KIND:IC:OC ...]}
shift 2
shapes=${*:-q8:288:288 q8:288:768 q8:768:288 q8:768:768 q8:768:2048 q8:2048:768
fp32:288:288 fp32:288:768 fp32:768:288 fp32:768:768 fp32:768:2048 fp32:2048:768}
cc=${CC:-cc}
# every shape checked before anything is compiled: a kind the program knows, and two
# sizes of digits only ("64x" is not 64)
for shape in $shapes; do
    case $shape in
        q8:*:*|q8p:*:*|fp32:*:*) ;;
        *) echo "ab_kernels: shape $shape: expected KIND:IC:OC with KIND q8, q8p or fp32" >&2
           exit 2 ;;
    esac
    sizes=${shape#*:}
    case $sizes in
        *[!0-9:]*|:*|*:|*:*:*|*::*) echo "ab_kernels: shape $shape: IC and OC must be" \
                                      "positive whole numbers (KIND:IC:OC)" >&2
                                 exit 2 ;;
    esac
    case ${sizes%:*}:${sizes#*:} in
        0*|*:0*) echo "ab_kernels: shape $shape: IC and OC must be positive, without" \
                      "leading zeros" >&2
                 exit 2 ;;
    esac
done
[ -f tools/one_cpu.sh ] || { echo "ab_kernels.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
. tools/one_cpu.sh   # one_cpu
one_cpu ab_kernels
pin=${ONE_CPU:+taskset -c $ONE_CPU}
cflags=${CFLAGS:--O3 -march=native}
out=${B:-build/ab}
for dir in "$a_dir" "$b_dir"; do
    if [ ! -f "$dir/simd/quant_x86.c" ] || [ ! -f "$dir/simd/vec_kernels.c" ]; then
        echo "ab_kernels: $dir is not a checkout of this repository (no simd/quant_x86.c" \
             "or simd/vec_kernels.c)" >&2
        exit 2
    fi
done
command -v objcopy >/dev/null || { echo "ab_kernels: needs objcopy (binutils)" >&2; exit 2; }
base="-std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -pthread"
mkdir -p "$out"
# each build's two kernel files, their entry points renamed and every other symbol made
# local, so that A's and B's helpers never meet
# (the packed kernel only where the flags build it: simd.h defines it as a macro elsewhere)
macros=$($cc $base $cflags -dM -E -x c /dev/null)
packed=
case $macros in *__AVX512VNNI__*) case $macros in *__AVX512BW__*) case $macros in
    *__AVX512VL__*) packed=1 ;; esac ;; esac ;; esac   # simd.h's SIMD_Q8_PACKED
build() {   # build LABEL DIR
    $cc $base $cflags -I"$2" -Dsimd_q8_gemm_tiles=ab_$1_q8 \
        ${packed:+-Dsimd_q8_matmul_packed=ab_$1_q8p} -c "$2/simd/quant_x86.c" -o "$out/$1_q8.o"
    objcopy --keep-global-symbol=ab_$1_q8 --keep-global-symbol=ab_$1_q8p "$out/$1_q8.o"
    $cc $base $cflags -I"$2" -Dsimd_gemm_block=ab_$1_fp32 -c "$2/simd/vec_kernels.c" \
        -o "$out/$1_fp32.o"
    objcopy --keep-global-symbol=ab_$1_fp32 "$out/$1_fp32.o"
}
build a "$a_dir"
build b "$b_dir"
# the quantizer (quant_quantize) and its kernels from this checkout, for the operands
for src in quant.c simd/quant_x86.c simd/quant_neon.c simd/cpu.c; do
    $cc $base $cflags -I. -c "$src" -o "$out/this_$(basename "$src" .c).o"
done
$cc $base $cflags -I. tools/ab_kernels.c "$out"/a_q8.o "$out"/a_fp32.o "$out"/b_q8.o \
    "$out"/b_fp32.o "$out"/this_quant.o "$out"/this_quant_x86.o "$out"/this_quant_neon.o \
    "$out"/this_cpu.o \
    -o "$out/ab_kernels" -lm
echo "ab_kernels: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')"
echo "A: $a_dir ($(git -C "$a_dir" rev-parse --short HEAD 2>/dev/null || echo '?')), B: $b_dir ($(git -C "$b_dir" rev-parse --short HEAD 2>/dev/null || echo '?')), $cc $cflags, ${ROUNDS:-300} pairs, ${COPIES:-1} copies of w, ${OUTS:-1} of out, 256 rows${pin:+, $pin}"
echo
echo "| kernel | IC x OC | A best / median | B best / median | B/A | same bits |"
echo "|---|---|---|---|---|---|"
for shape in $shapes; do
    IFS=: read -r kind ic oc <<EOF
$shape
EOF
    $pin "$out/ab_kernels" "$kind" "$ic" "$oc" "${ROUNDS:-300}" "${COPIES:-1}" "${OUTS:-1}"
done
