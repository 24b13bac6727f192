#!/bin/sh
# attn_table.sh: the attention lab's two tables, written into docs/lab.md, their one home.
#
# Runs ./run --eval with every variant and its sweep over the validation slice of
# the training text (bytes from floor(0.9 x size) to the end, the split train.c
# uses), and writes a markdown table (variant, parameters, bits/char, KL to exact,
# top-1 agreement, state bytes per token, tokens/s) to build/attn_table.md and into
# docs/lab.md between <!-- attn-table:begin --> and <!-- attn-table:end -->; then the
# attention-only benchmark (build/tools/bench_attention) between the attn-bench markers.
# Each table starts with a line naming the date, the machine, the commit and the command.
# Sweep sizes follow the model's context S (windows S/16 .. S/2). Usage:
#   sh tools/attn_table.sh            both tables (minutes; make attn-table)
#   sh tools/attn_table.sh bench      the attention-only benchmark alone
# MODEL, TOK, DATA, RUN, BENCH and DOC override the paths.
set -eu
RUN=${RUN:-./run}
MODEL=${MODEL:-weights/model.bin}
TOK=${TOK:-weights/tokenizer.bin}
if [ -n "${DATA:-}" ]; then   # the user's: used as given, or refused
    [ -f "$DATA" ] || { echo "attn_table.sh: DATA: $DATA: no such file" >&2; exit 2; }
else
    DATA=data/tinyshakespeare.txt
    [ -f "$DATA" ] || DATA=../shared/data/tinyshakespeare.txt   # where the test machines keep it
fi
BENCH=${BENCH:-build/tools/bench_attention}
DOC=${DOC:-docs/lab.md}
[ $# -le 1 ] || { echo "usage: sh tools/attn_table.sh [bench] (got $# arguments)" >&2; exit 2; }
WHAT=${1:-all}
case $WHAT in
    all|bench) ;;
    *) echo "usage: sh tools/attn_table.sh [bench]" >&2; exit 2 ;;
esac
OUT=build/attn_table.md
BENCH_OUT=build/attn_bench.md
mkdir -p build

[ -f tools/one_cpu.sh ] || { echo "attn_table.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
. tools/doc_table.sh   # label, replace_between

# ---- the quality table ----
if [ "$WHAT" = all ]; then
    for f in "$RUN" "$MODEL" "$TOK" "$DATA"; do
        [ -f "$f" ] || { echo "attn-table: $f: missing (train the model first: make retrain, then install it)" >&2; exit 1; }
    done
    size=$(wc -c < "$DATA")
    split=$(( size / 10 * 9 + size % 10 * 9 / 10 ))
    VAL=build/validation.txt
    tail -c +$((split + 1)) "$DATA" > "$VAL"
    S=$("$RUN" "$MODEL" -z "$TOK" -n 0 2>&1 >/dev/null | sed -n 's/.*context \([0-9]*\).*/\1/p')
    [ -n "$S" ] || { echo "attn-table: cannot read the context of $MODEL" >&2; exit 1; }
    w1=$((S / 16)); w2=$((S / 8)); w3=$((S / 4)); w4=$((S / 2))
    l=1; while [ $(( (l + 1) * (l + 1) )) -le "$S" ]; do l=$((l + 1)); done   # floor(sqrt(S))

    variants="exact unscaled exact:tau=0.8 exact:tau=1.25 softmax1 gauss
    window:w=$w1 window:w=$w1,sinks=4 window:w=$w2 window:w=$w2,sinks=4 window:w=$w3,sinks=4
    window:w=$w4 window:w=$w4,sinks=4 window:w=$w2,sinks=4,softmax1=1
    dilated:w=$w2,k=2 dilated:w=$w2,k=2,sinks=4 strided:l=$l fixed:l=$w3,c=$w1
    lsh:buckets=16,rounds=1,local=0,sinks=0 lsh:buckets=4,rounds=4,local=$w1,sinks=4
    lsh:buckets=16,rounds=4,local=$w1,sinks=4 lsh:buckets=16,rounds=8,local=$w1,sinks=4
    linear efficient performer:m=64,seed=1 performer:m=256,seed=1 performer:m=256,seed=2
    performer:m=256,seed=3 performer:m=1024,seed=1"

    {
        label "make attn-table"
        echo "Model \`$MODEL\` (context $S), validation slice of \`$(basename "$DATA")\` (bytes $split..$size),"
        echo "non-overlapping windows of $S tokens."
        echo
        echo "| variant | bits/char | nats/token | KL to exact (nats/token) | top-1 agreement | state bytes/token | tokens/s |"
        echo "|---|---|---|---|---|---|---|"
    } > "$OUT"
    for spec in $variants; do
        echo "attn-table: $spec" >&2
        if ! result=$("$RUN" "$MODEL" -z "$TOK" --eval "$VAL" --attn "$spec" 2>build/attn_table.err)
        then
            cat build/attn_table.err >&2
            exit 1
        fi
        bpc=$(echo "$result" | sed -n 's/^loss: .* nats\/token, \([0-9.]*\) bits\/char.*/\1/p')
        nats=$(echo "$result" | sed -n 's/^loss: \([0-9.]*\) nats\/token.*/\1/p')
        kl=$(echo "$result" | sed -n 's/^vs exact: KL \([0-9.]*\) nats.*/\1/p')
        agree=$(echo "$result" | sed -n 's/.*top-1 agreement \([0-9.]*%\).*/\1/p')
        state=$(echo "$result" | sed -n 's/^state: .*(\([0-9.]*\) bytes\/token).*/\1/p')
        speed=$(echo "$result" | sed -n 's/.*speed: \([0-9.]*\) tokens\/s.*/\1/p')
        printf '| `%s` | %.4f | %.4f | %.3g | %s | %.0f | %.0f |\n' "$spec" "$bpc" "$nats" "$kl" \
            "$agree" "$state" "$speed" >> "$OUT"
    done
    echo '| `nystrom` | excluded: not causal ([attention.md §7](attention.md#7-nyström-attention)) | | | | | |' >> "$OUT"
    cat "$OUT"
    replace_between attn-table "$OUT" "$DOC"
fi

# ---- the attention-only microbenchmark (tools/bench_attention.c) ----
if [ -x "$BENCH" ]; then
    echo "attn-table: attention-only benchmark" >&2
    {
        label "make bench-attention"
        echo
        "$BENCH" | grep '^|'
    } > "$BENCH_OUT"
    cat "$BENCH_OUT"
    replace_between attn-bench "$BENCH_OUT" "$DOC"
elif [ "$WHAT" = bench ]; then
    echo "attn-table: $BENCH: not built (make $BENCH)" >&2
    exit 1
fi
exit 0
