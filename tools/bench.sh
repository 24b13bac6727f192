#!/bin/sh
# bench.sh: end-to-end speed and memory of ./run, printed as a table (run by `make bench`).
#
# For each model it runs greedy generation of N tokens after a fixed prompt, with 1 and with 2
# OpenMP threads, REPEAT times in alternation (so a change in machine load hits both thread
# counts alike), and reports the median prompt and generation tokens/s and the peak resident
# memory (GNU time's "Maximum resident set size"). Nothing here is asserted: speed is measured,
# never tested. Models that are missing (no ../shared, no weights/) are skipped with a line.
# Usage: sh tools/bench.sh [N] [REPEAT]
N=${1:-128}
REPEAT=${2:-3}
RUN=${RUN:-./run}
SHARED=${SHARED_DIR:-../shared}
PROMPT="Once upon a time"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "command: $RUN MODEL -z TOKENIZER -i \"$PROMPT\" -n $N -t 0   (median of $REPEAT runs)"
printf '%-28s %8s %7s %12s %12s %9s\n' model params threads "prompt tok/s" "gen tok/s" "peak MB"

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

bench_model() {  # name model tokenizer params
    name=$1; model=$2; tok=$3; params=$4
    if [ ! -f "$model" ] || [ ! -f "$tok" ]; then
        echo "$name: skipped ($model not found)"
        return
    fi
    tmp=$(mktemp -d)
    i=0
    while [ $i -lt "$REPEAT" ]; do
        for threads in 1 2; do
            OMP_NUM_THREADS=$threads /usr/bin/time -f "%M" "$RUN" "$model" -z "$tok" \
                -i "$PROMPT" -n "$N" -t 0 >/dev/null 2>"$tmp/err"
            sed -n 's/.*prompt: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' "$tmp/err" \
                >>"$tmp/prompt$threads"
            sed -n 's/.*generation: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' "$tmp/err" \
                >>"$tmp/gen$threads"
            tail -n 1 "$tmp/err" >>"$tmp/mem$threads"
        done
        i=$((i + 1))
    done
    for threads in 1 2; do
        printf '%-28s %8s %7s %12s %12s %9s\n' "$name" "$params" "$threads" \
            "$(median <"$tmp/prompt$threads")" "$(median <"$tmp/gen$threads")" \
            "$(median <"$tmp/mem$threads" | awk '{printf "%.1f", $1 / 1024}')"
    done
    rm -rf "$tmp"
}

bench_model "shipped (weights/)" weights/model.bin weights/tokenizer.bin 1.34M
bench_model "GPT-2 small.bin (random)" "$SHARED/testdata/gpt2/small.bin" \
    "$SHARED/testdata/gpt2/gpt2_tokenizer.bin" 7.3M
bench_model "llama2.c s15m.bin (fp32)" "$SHARED/testdata/llama2c/s15m.bin" \
    "$SHARED/testdata/llama2c/tokenizer.bin" 15.2M
bench_model "llama2.c s15m_q80.bin (int8)" "$SHARED/testdata/llama2c/s15m_q80.bin" \
    "$SHARED/testdata/llama2c/tokenizer.bin" 15.2M
bench_model "llama2.c s260k.bin" "$SHARED/testdata/llama2c/s260k.bin" \
    "$SHARED/testdata/llama2c/tok512.bin" 0.26M
