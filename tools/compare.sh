#!/bin/sh
# compare.sh: this engine beside llama2.c on the same models, in alternating rounds.
#
# Usage: sh tools/compare.sh LLAMA2C_DIR
#   LLAMA2C_DIR: a checkout of karpathy/llama2.c in which `make runomp` (or your own
#   flags) built `run` and `runq`; nothing of it enters this repository. Build both engines
#   with the same instruction set: for the AVX2 + FMA path on any x86-64-v3 machine, this
#   engine with `make CFLAGS="-O3 -march=x86-64-v3"` and llama2.c with
#   `gcc -Ofast -fopenmp -march=x86-64-v3 run.c -lm -o run` (runq.c likewise).
# Environment: RUN (default ./run), ROUNDS (3), STEPS (256 new tokens), THREADS ("1 2"),
#   SHARED_DIR (../shared: s260k, s15m and its int8 form), MODELS (default below).
#
# For each model and thread count it runs greedy decoding (-t 0) of STEPS tokens after
# the same prompt, each engine in turn, ROUNDS times, and prints the median tokens/s of
# each and their ratio, under the CPU's name, its vector instruction sets, the date and
# the commands. llama2.c reports "achieved tok/s" over its positions after the first (its
# -n counts the prompt too, so it is given STEPS + the prompt's tokens); this engine reports
# its generation speed. Run it on an idle machine: nothing else should share the cores.
# Nothing is asserted: this prints figures.
set -u
L2C=${1:?usage: sh tools/compare.sh LLAMA2C_DIR}
RUN=${RUN:-./run}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-256}
THREADS=${THREADS:-"1 2"}
SHARED=${SHARED_DIR:-../shared}
LL=$SHARED/testdata/llama2c
MODELS=${MODELS:-"s260k s15m s15m_q80"}   # s110m: a random one, for this engine only
                                          # (llama2.c's run reads only legacy files)
PROMPT="Once upon a time"
GEN=${GEN:-build/tools/gen_model}

[ -x "$RUN" ] || { echo "compare: $RUN: not built (make)" >&2; exit 1; }
[ -x "$L2C/run" ] || { echo "compare: $L2C/run: not built (make runomp in $L2C)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# median of the numbers on standard input
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
isa=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_vnni|avx_vnni)$' | tr '\n' ' ')
echo "compare: $(date -u +%Y-%m-%d), $cpu, $(nproc 2>/dev/null || echo '?') cores, ISA: $isa"
echo "this engine: $RUN ($(head -c 400 "$(dirname "$RUN")/flags" 2>/dev/null || echo "flags unknown"))"
echo "llama2.c: $L2C ($(cd "$L2C" && git log --oneline -1 2>/dev/null))"
echo "greedy decode of $STEPS tokens after \"$PROMPT\", median of $ROUNDS alternated rounds"
echo
echo "| model | threads | this engine tok/s | llama2.c tok/s | ratio |"
echo "|---|---|---|---|---|"

for model in $MODELS; do
    q=""
    case $model in
        s260k) file=$LL/s260k.bin; tok=$LL/tok512.bin;;
        s15m) file=$LL/s15m.bin; tok=$LL/tokenizer.bin;;
        s15m_q80) file=$LL/s15m_q80.bin; tok=$LL/tokenizer.bin; q=q;;
        s110m) file=$tmp/s110m.bin; tok=$LL/tokenizer.bin
               [ -x "$GEN" ] || make -s "$GEN" >/dev/null 2>&1
               "$GEN" s110m "$file" >/dev/null 2>&1;;
        *) echo "compare: unknown model $model" >&2; continue;;
    esac
    if [ ! -f "$file" ] || [ ! -f "$tok" ]; then
        echo "| $model | - | skipped: $file or $tok missing | | |"
        continue
    fi
    # the prompt's tokens as this engine counts them (llama2.c's -n includes them)
    n_prompt=$("$RUN" "$file" -z "$tok" -i "$PROMPT" -n 0 2>&1 >/dev/null |
               sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p')
    for t in $THREADS; do
        : >"$tmp/ours"; : >"$tmp/theirs"
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            OMP_NUM_THREADS=$t "$RUN" "$file" -z "$tok" -t 0 -n "$STEPS" -i "$PROMPT" \
                2>&1 >/dev/null | sed -n 's/.*generation: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' >>"$tmp/ours"
            OMP_NUM_THREADS=$t "$L2C/run$q" "$file" -z "$tok" -t 0 -n $((STEPS + ${n_prompt:-1})) \
                -i "$PROMPT" 2>&1 >/dev/null | sed -n 's/achieved tok\/s: \([0-9.]*\)/\1/p' >>"$tmp/theirs"
            r=$((r + 1))
        done
        a=$(median <"$tmp/ours"); b=$(median <"$tmp/theirs")
        ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }')
        echo "| $model | $t | $a | $b | $ratio |"
    done
done
echo
echo "commands: OMP_NUM_THREADS=T $RUN MODEL -z TOK -t 0 -n $STEPS -i \"$PROMPT\";" \
     "OMP_NUM_THREADS=T $L2C/run[q] MODEL -z TOK -t 0 -n STEPS+PROMPT -i \"$PROMPT\""
