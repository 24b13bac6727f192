#!/bin/sh
# mca_tiles.sh: llvm-mca's model of the kernels' hot loops on cores this project has no
# machine of: tools/mca_tiles.c (each tile in a function of its own) compiled with -S for
# each target, each function's innermost loop with the most multiply instructions taken
# from the assembly and run through llvm-mca for that core. Modelled, not measured: say
# so wherever a figure from here is quoted (docs/performance.md).
#
# Usage: sh tools/mca_tiles.sh [TARGET ...]
#   TARGET: MARCH:MCPU, gcc's -march and llvm-mca's -mcpu (by default Sapphire Rapids, Ice
#   Lake server and Skylake server with AVX-512, Zen 3 and the AVX2 proxy x86-64-v3 as
#   Haswell).
# Environment: CC (gcc), MCA (llvm-mca-14, else llvm-mca).
# Prints a markdown table: per target and loop (int8 and fp32 products, prompt and decode;
# a prompt's attention), the multiplies in one pass of the loop (vpdpbusd or vpmaddubsw for
# int8, vfmadd for floats), llvm-mca's cycles a pass and multiplies a cycle. Asserts
# nothing.
set -eu
targets=${*:-sapphirerapids:sapphirerapids icelake-server:icelake-server
skylake-avx512:skylake-avx512 znver3:znver3 x86-64-v3:haswell}
cc=${CC:-gcc}
mca=${MCA:-}
if [ -z "$mca" ]; then
    for m in llvm-mca-14 llvm-mca; do command -v "$m" >/dev/null && { mca=$m; break; }; done
fi
[ -n "$mca" ] || { echo "mca_tiles: llvm-mca not found (set MCA; Debian: llvm-14)" >&2; exit 2; }
[ -f tools/mca_tiles.c ] || { echo "mca_tiles: run from the repository's top" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mca_tiles.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# innermost FUNCTION KEY < ASM: the innermost loop of FUNCTION (a label and a later jump
# back to it, with no such loop inside) with the most instructions matching KEY, an
# instruction a line; nothing if none matches.
innermost() {
    awk -v fn="$1" -v key="$2" '
    function target(l,  t) { t = l; sub(/^\tj[a-z]+\t/, "", t); sub(/[ \t].*/, "", t); return t }
    $0 ~ "^" fn ":" { on = 1; n = 0; next }
    on && $0 ~ "^\t\\.size\t" fn "," { on = 0 }
    on { n++; line[n] = $0
         if ($0 ~ /^\.L[0-9A-Za-z_]+:/) { l = $0; sub(/:.*/, "", l); at[l] = n } }
    END {
        best = 0
        for (i = 1; i <= n; i++) {
            if (line[i] !~ /^\tj[a-z]+\t\.L/ || !((t = target(line[i])) in at) || at[t] >= i)
                continue
            s = at[t]; inner = 0; c = 0
            for (j = s + 1; j < i; j++)
                if (line[j] ~ /^\tj[a-z]+\t\.L/ && ((u = target(line[j])) in at) &&
                    at[u] > s && at[u] < j) inner = 1
            if (inner) continue
            for (j = s; j <= i; j++) if (line[j] ~ /^\t[a-z]/ && line[j] ~ key) c++
            if (c > best) { best = c; bs = s; be = i }
        }
        for (j = bs; best > 0 && j <= be; j++) if (line[j] ~ /^\t[a-z]/) print line[j]
    }'
}

echo "| target (-march / -mcpu) | loop | multiplies a pass | cycles a pass | multiplies a cycle |"
echo "|---|---|---|---|---|"
for t in $targets; do
    march=${t%%:*} mcpu=${t#*:}
    if ! $cc -std=c11 -D_POSIX_C_SOURCE=200809L -I. -Ilab -Itrainer -Iplatform -Iformats \
            -Iunicode -ffp-contract=off -O3 -march="$march" -S tools/mca_tiles.c \
            -o "$tmp/$march.s" 2>"$tmp/err"; then
        echo "mca_tiles: $cc -march=$march failed: $(tail -n 1 "$tmp/err")" >&2
        exit 1
    fi
    # each loop from the first of its functions the build has: the packed int8 tiles
    # (AVX-512 VNNI), else the x86 int8 kernels' own (AVX2: vpmaddubsw; AVX-VNNI: vpdpbusd)
    for entry in "int8 prompt:mca_q8_prompt simd_q8_gemm_tiles" \
                 "int8 decode:mca_q8_decode dot_rows4_avx2" \
                 "fp32 prompt:mca_fp32_prompt" "fp32 decode:mca_fp32_decode" \
                 "attention dots:mca_attn_dots" "attention sums:mca_attn_sums"; do
        label=${entry%%:*} f=
        for g in ${entry#*:}; do grep -q "^$g:" "$tmp/$march.s" && { f=$g; break; }; done
        [ -n "$f" ] || continue
        case $label in int8*) key='vpdpbusd|vpmaddubsw';; *) key='vfmadd';; esac
        innermost "$f" "$key" <"$tmp/$march.s" >"$tmp/loop.s"
        [ -s "$tmp/loop.s" ] || { echo "mca_tiles: no loop of $key in $f (-march=$march)" >&2; exit 1; }
        muls=$(grep -Ec "$key" "$tmp/loop.s")
        cycles=$("$mca" -mcpu="$mcpu" -iterations=200 "$tmp/loop.s" 2>/dev/null |
                 awk '/^Total Cycles:/ { print $3 / 200 }')
        [ -n "$cycles" ] || { echo "mca_tiles: $mca -mcpu=$mcpu gave no cycles" >&2; exit 1; }
        echo "| $march / $mcpu | $label (\`$f\`) | $muls | $cycles | $(echo "$muls $cycles" |
            awk '{ printf "%.2f", $1 / $2 }') |"
    done
done
