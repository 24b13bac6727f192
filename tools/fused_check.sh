#!/bin/sh
# fused_check.sh: no fused multiply-add in the compiled objects outside simd/.
#
# The reference kernels (kernels.c, quant.c, the trainer's) and the engine's plain C
# (block.c's rotary loop, the norms' scalar tails, ...) are the tests' oracle: each product
# is rounded before it is added, as llama2.c's and llm.c's code, and the whole project is
# built with -ffp-contract=off for that. Yet gcc 12's vectorizer emitted vfmaddsub for a
# plain rotary loop under -ffp-contract=off (tests/test_model.c, rope bits): a fused
# rounding in code that must have none. Only simd/'s kernels ask for fused multiply-adds,
# with intrinsics, where their references say so (and tools/probe.c and the tests' FMA
# chains, which are not scanned). This scans the engine's objects of a build (its top
# folder and lab/, trainer/, formats/, platform/, parallel/, unicode/) for the x86 fused
# instructions (vfmadd..., vfmsub..., vfnmadd..., vfnmsub...,
# vfmaddsub..., vfmsubadd...) and AArch64's (fmadd, fmsub, fnmadd, fnmsub, fmla, fmls).
#
# Usage: sh tools/fused_check.sh BUILD_DIR   Exit 0 if none has one (or objdump is missing,
# said on stdout), else 1 after one line per object: "fused_check: OBJECT: N fused
# multiply-add instructions (first: INSTRUCTION)".
set -u
dir=${1:?usage: sh tools/fused_check.sh BUILD_DIR}
if ! command -v objdump >/dev/null; then
    echo "skipped: fused_check (needs objdump)"
    exit 0
fi
x86='vfn?m(add|sub)[0-9a-z]*|vfm(addsub|subadd)[0-9a-z]*'   # vfmadd231ps, vfmaddsub..., ...
arm='fn?m(add|sub)|fml[as]'
pattern="[[:space:]]($x86|$arm)[[:space:]]"
status=0 objects=0
objects_of() {   # the engine's objects of build folder $1, one a line
    for sub in . lab trainer formats platform parallel unicode; do
        [ -d "$1/$sub" ] && find "$1/$sub" -maxdepth 1 -name '*.o'
    done | sed 's#/\./#/#' | sort
}
for obj in $(objects_of "$dir"); do
    objects=$((objects + 1))
    found=$(objdump -d --no-show-raw-insn "$obj" 2>/dev/null | grep -E "$pattern")
    [ -z "$found" ] && continue
    n=$(printf '%s\n' "$found" | wc -l | tr -d ' ')
    first=$(printf '%s\n' "$found" | head -n 1 | sed 's/^[^:]*:[[:space:]]*//')
    echo "fused_check: $obj: $n fused multiply-add instructions (first: $first)"
    status=1
done
[ "$status" = 0 ] && echo "fused_check: $objects objects outside simd/ in $dir, none fused"
exit $status
