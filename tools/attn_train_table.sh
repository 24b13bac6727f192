#!/bin/sh
# attn_train_table.sh: every attention variant trained from scratch by ./train, measured the
# same way, written into docs/attention.md (its one home) with a picture.
#
# One model shape and recipe for every row (SHAPE, RECIPE below: 4 layers of width 128, 4
# heads, context 256, 1200 steps of 8 x 256 tokens, Tiny Shakespeare with a 1024-token BPE);
# only --attn differs. Phases, each resumable (a run whose log ends with "final:" is kept):
#   train   every variant from scratch (SEEDS seeds for the headline rows, one elsewhere),
#           every kind at context 1024 (LONG_VARIANTS, LONG_STEPS; with rotary positions, and
#           four with the learned position table), nine at 4096 (XLONG_VARIANTS, XLONG_STEPS,
#           rotary; XLONG_SEEDS for their headline rows), and each variant swapped into the
#           exact model then fine-tuned for FT_STEPS
#   speed   training tokens/s (the median of three short runs of each, in rounds over the
#           rows, on the same two cores), decode tokens/s and
#           attention state bytes at positions 256, 1024 and 4096 (a random model of the
#           same shape with a 4352-token context: speed depends on shapes, not weights)
#   equal   every variant again for exact attention's wall-clock time instead of its tokens:
#           STEPS x (its training tokens/s) / (exact's), from the speed phase's figures, so
#           the budget is the same seconds on the same cores but the runs stay deterministic
#           (at 1024 and 4096 against the exact row of the same context and positions)
#   table   bits/char of each checkpoint on the validation split (./run --eval), the table
#           into docs/attention.md between the attn-train markers, and a picture for each
#           context: docs/img/attn_trained.svg (256), attn_trained_1024.svg (the rotary
#           rows) and attn_trained_4096.svg
#   picture the pictures again from the table phase's points ($WORK/points*.txt)
#   all     train, speed, equal and table (default). `make attn-train-table` runs it: about
#           6 hours on two idle cores, most of it training. Measured: the rows of context 256
#           and 1024 without the Synthesizer, about 4 hours (2026-11-26, AMD EPYC Zen 4: the
#           sum of its runs at the speed phase's training tokens/s); the Synthesizer's rows
#           about 50 minutes (2026-11-28, Zen 5: train 8 runs in 25 min, 1.7-3.4 min each;
#           speed 46 s a row; equal 8 runs in 16 min); the context-4096 rows (2026-11-28,
#           Zen 5): speed 9 rows in 6.8 min; train 6 runs in 18 min and equal 8 runs in 46
#           min, as two lanes of one thread at once (1.9-12.7 min a run; one at a time on
#           two threads, as this script runs them, the speed phase's rates give about 35
#           min for the 11 training runs and 40 for the equal ones: exact 5 min a run); the
#           18 rotary rows of context 1024 (2026-11-28, Zen 5): speed, three rounds, 16 min;
#           equal 17 runs in 31 min as two one-thread lanes (2.9-4.5 min a run); the 8
#           learned-position rows of 1024 (the same day): speed 9.5 min, equal 7 runs in 12
#           min as two lanes; the 18 rows of 256 (the same day): speed 12 min, equal 17 runs
#           in 45 min as two lanes (3.3-5.9 min a run). Run it on an idle machine, since the
#           speed phase times things.
# RUN, TRAIN, GEN, DATA, WORK, DOC and SVG override the paths; STEPS the training steps;
# DATE the date in the picture's title (default today: give the table's when redrawing).
set -eu
RUN=${RUN:-./run}
TRAIN=${TRAIN:-./train}
GEN=${GEN:-build/tools/gen_model}
DATA=${DATA:-data/tinyshakespeare.txt}
[ -f "$DATA" ] || DATA=../shared/data/tinyshakespeare.txt   # where the test machines keep it
WORK=${WORK:-build/attn-train}
DOC=${DOC:-docs/attention.md}
SVG=${SVG:-docs/img/attn_trained.svg}
STEPS=${STEPS:-1200}
LONG_STEPS=${LONG_STEPS:-$((STEPS / 2))}
FT_STEPS=$((STEPS / 10))
SEEDS="1337 2 3"
SPEED_ROUNDS="1 2 3"
SHAPE="-L 4 -C 128 -H 4 -T 256 -v 1024"
RECIPE="-B 8 --attn-dropout 0 --ema 0"
WHAT=${1:-all}
case $WHAT in
    all|train|speed|equal|table|picture) ;;
    *) echo "usage: sh tools/attn_train_table.sh [all|train|speed|equal|table|picture]" >&2; exit 2 ;;
esac
[ -f tools/one_cpu.sh ] || { echo "attn_train_table.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
. tools/doc_table.sh   # label, replace_between
mkdir -p "$WORK"
for f in "$RUN" "$TRAIN" "$DATA"; do
    [ -f "$f" ] || { echo "attn-train-table: $f: missing (make; the data: weights/README.md)" >&2; exit 1; }
done

# The rows: name, spec, 1 for a headline row (trained with every seed). w = 32 is 1/8 of the
# context; the hybrid keeps the last of the four layers exact.
VARIANTS=${VARIANTS:-"exact exact 1
window window:w=32 0
window-sinks window:w=32,sinks=4 0
window-sinklogit window:w=32,sinklogit=1 1
hybrid 3*window:w=32,sinklogit=1;exact 1
dilated dilated:w=16,k=2,sinks=4 0
strided strided:l=16 0
fixed fixed:l=32,c=4 0
softmax1 softmax1 0
linear linear 1
linear-norm linear:norm=1 0
efficient efficient 0
performer performer:m=64 0
lsh lsh:buckets=8,rounds=2,local=16,sinks=1 0
synth-random synth-random 0
synth-dense synth-dense 0
synth-frandom synth-frandom:rank=16 0
synth-fdense synth-fdense:a=16 0"}
# The long-context rows: context 1024 (2 x 1024 tokens a step: the same tokens), the window
# 1/8 of it again; the headline rows with every seed here too; the Synthesizer's four forms
# (their factors 32); then every kind with rotary
# positions instead of the learned table (more flags for train after the headline field),
# each pattern's lengths scaled with the context (strided's l its square root, LSH's
# buckets and local window x 4).
LONG_VARIANTS=${LONG_VARIANTS:-"long-exact exact 1
long-window-sinklogit window:w=128,sinklogit=1 1
long-hybrid 3*window:w=128,sinklogit=1;exact 1
long-fixed fixed:l=128,c=16 0
long-synth-random synth-random 0
long-synth-dense synth-dense 0
long-synth-frandom synth-frandom:rank=32 0
long-synth-fdense synth-fdense:a=32 0
long-exact-rope exact 1 --pos rope
long-window-rope window:w=128 0 --pos rope
long-window-sinks-rope window:w=128,sinks=4 1 --pos rope
long-window-sinklogit-rope window:w=128,sinklogit=1 1 --pos rope
long-hybrid-rope 3*window:w=128,sinklogit=1;exact 1 --pos rope
long-dilated-rope dilated:w=64,k=2,sinks=4 0 --pos rope
long-strided-rope strided:l=32 1 --pos rope
long-fixed-rope fixed:l=128,c=16 0 --pos rope
long-softmax1-rope softmax1 1 --pos rope
long-linear-rope linear 0 --pos rope
long-linear-norm-rope linear:norm=1 0 --pos rope
long-efficient-rope efficient 0 --pos rope
long-performer-rope performer:m=64 0 --pos rope
long-lsh-rope lsh:buckets=32,rounds=2,local=64,sinks=1 1 --pos rope
long-synth-random-rope synth-random 0 --pos rope
long-synth-dense-rope synth-dense 0 --pos rope
long-synth-frandom-rope synth-frandom:rank=32 0 --pos rope
long-synth-fdense-rope synth-fdense:a=32 0 --pos rope"}
LONG="-T 1024 -B 2"
# The longest rows: context 4096 (1 x 4096 tokens a step, a quarter of STEPS: the tokens of
# the context-1024 rows), rotary positions only (a 4096-row table would hold a quarter of
# the model's parameters), each pattern's lengths 4 x the 1024 rows' again (strided's l the
# context's square root); the headline rows (exact, and the hybrid and LSH, the rows nearest
# it: about 0.02 bits/char) with XLONG_SEEDS, the rest with one.
XLONG_VARIANTS=${XLONG_VARIANTS:-"xlong-exact-rope exact 1 --pos rope
xlong-window-sinklogit-rope window:w=512,sinklogit=1 0 --pos rope
xlong-hybrid-rope 3*window:w=512,sinklogit=1;exact 1 --pos rope
xlong-fixed-rope fixed:l=512,c=64 0 --pos rope
xlong-strided-rope strided:l=64 0 --pos rope
xlong-linear-rope linear 0 --pos rope
xlong-efficient-rope efficient 0 --pos rope
xlong-performer-rope performer:m=64 0 --pos rope
xlong-lsh-rope lsh:buckets=128,rounds=2,local=256,sinks=1 1 --pos rope"}
XLONG_SEEDS="1337 2"
XLONG_STEPS=${XLONG_STEPS:-$((STEPS / 4))}
XLONG="-T 4096 -B 1"

# train_one NAME SPEC SEED [FLAGS...]: one run into $WORK/NAME.bin, log $WORK/NAME.log
# (FLAGS after the recipe's, so they override it). Its own variable names: a function's
# variables are the caller's in sh.
train_one() {
    t_name=$1 t_spec=$2 t_seed=$3
    shift 3
    if [ -f "$WORK/$t_name.log" ] && grep -q '^final:' "$WORK/$t_name.log"; then return 0; fi
    echo "attn-train-table: training $t_name ($t_spec, seed $t_seed)" >&2
    # shellcheck disable=SC2086  # SHAPE and RECIPE are lists of flags
    "$TRAIN" --force -d "$DATA" -o "$WORK/$t_name.bin" -z "$WORK/$t_name.tok" $SHAPE $RECIPE \
        -n "$STEPS" -e "$STEPS" -s "$t_seed" --attn "$t_spec" "$@" > "$WORK/$t_name.log" 2>&1 || {
        tail -3 "$WORK/$t_name.log" >&2
        exit 1
    }
}

if [ "$WHAT" = all ] || [ "$WHAT" = train ]; then
    echo "$VARIANTS" | while read -r name spec headline; do
        train_one "$name" "$spec" 1337
        [ "$headline" = 1 ] || continue
        for seed in $SEEDS; do
            [ "$seed" = 1337 ] || train_one "$name.s$seed" "$spec" "$seed"
        done
    done
    echo "$LONG_VARIANTS" | while read -r name spec headline flags; do
        for seed in $SEEDS; do
            [ "$seed" = 1337 ] && suffix= || suffix=.s$seed
            [ "$seed" = 1337 ] || [ "$headline" = 1 ] || continue
            # shellcheck disable=SC2086
            train_one "$name$suffix" "$spec" "$seed" $LONG -n "$LONG_STEPS" -e "$LONG_STEPS" $flags
        done
    done
    echo "$XLONG_VARIANTS" | while read -r name spec headline flags; do
        for seed in $XLONG_SEEDS; do
            [ "$seed" = 1337 ] && suffix= || suffix=.s$seed
            [ "$seed" = 1337 ] || [ "$headline" = 1 ] || continue
            # shellcheck disable=SC2086
            train_one "$name$suffix" "$spec" "$seed" $XLONG -n "$XLONG_STEPS" -e "$XLONG_STEPS" $flags
        done
    done
    # swapped into the exact model, then trained on for a tenth of the steps (not a
    # Synthesizer: the exact model has no weights to lend it, so run refuses the swap)
    echo "$VARIANTS" | while read -r name spec headline; do
        case $spec in exact|synth-*) continue ;; esac
        train_one "$name.ft" "$spec" 1337 --init "$WORK/exact.bin" -n "$FT_STEPS" -e "$FT_STEPS" \
            -w $((FT_STEPS / 10 + 1))
    done
fi

# ---- speed: training tokens/s, decode tokens/s and state bytes by position ----
if [ "$WHAT" = all ] || [ "$WHAT" = speed ]; then
    [ -x "$GEN" ] || { echo "attn-train-table: $GEN: not built (make $GEN)" >&2; exit 1; }
    gen="$WORK/random4352.bin"
    [ -f "$gen" ] || "$GEN" gpt2-124m "$gen" --dim 128 --layers 4 --heads 4 --vocab 1024 \
        --seq-len 4352 > /dev/null
    size=$(wc -c < "$DATA")
    split=$(( size / 10 * 9 + size % 10 * 9 / 10 ))
    ROWS=$(printf '%s\n%s\n%s\n' "$VARIANTS" "$LONG_VARIANTS" "$XLONG_VARIANTS")
    # rows measured before are kept: delete speed.txt (and speed-rounds.txt) to measure again
    touch "$WORK/speed.txt" "$WORK/speed-rounds.txt"
    # training: SPEED_ROUNDS rounds over every row not yet in speed.txt, a 30-step run of
    # each (tokens/s of the median of its three progress lines) into speed-rounds.txt; a
    # row's figure is the median of its rounds, so that no one slow or fast minute of the
    # machine decides a row (on a shared VM one round alone put rows 20 % off)
    for round in $SPEED_ROUNDS; do
        echo "$ROWS" | while read -r name spec headline flags; do
            grep -q "^$name " "$WORK/speed.txt" && continue
            [ "$(grep -c "^$name " "$WORK/speed-rounds.txt")" -lt "$round" ] || continue
            echo "attn-train-table: training speed of $name (round $round)" >&2
            case $name in long-*) context=$LONG ;; xlong-*) context=$XLONG ;; *) context= ;; esac
            # shellcheck disable=SC2086
            "$TRAIN" --force -d "$DATA" -o "$WORK/speed.bin" -z "$WORK/speed.tok" $SHAPE \
                $RECIPE $context -n 30 -e 1000 --attn "$spec" $flags > "$WORK/speed.log" 2>&1
            sed -n 's/.*| \([0-9]*\) tok\/s |.*/\1/p' "$WORK/speed.log" | sort -n |
                awk -v n="$name" '{ v[NR] = $1 } END { print n, v[int((NR + 1) / 2)] }' \
                >> "$WORK/speed-rounds.txt"
        done
    done
    echo "$ROWS" | while read -r name spec headline flags; do
        grep -q "^$name " "$WORK/speed.txt" && continue
        echo "attn-train-table: decode speed of $name" >&2
        # decode: the random model, or for a Synthesizer (which has parameters the random
        # model lacks) one made by ./train -n 0 at context 4096 (synth-random's (T, T) tables
        # at 1088: 1 GB at 4096), the prompts then ending 64 tokens before its context
        model=$gen tok=weights/tokenizer.bin limit=4352
        case $spec in synth-*)
            limit=4096; case $spec in synth-random*) limit=1088 ;; esac
            model="$WORK/speed-model.bin" tok="$WORK/speed.tok"
            # shellcheck disable=SC2086
            "$TRAIN" --force -d "$DATA" -o "$model" -z "$tok" $SHAPE $RECIPE -T $limit -B 1 -n 0 \
                --attn "$spec" $flags > "$WORK/speed.log" 2>&1 ;;
        esac
        train_tps=$(awk -v n="$name" '$1 == n { print $2 }' "$WORK/speed-rounds.txt" | sort -n |
                    awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] + 0 }')
        line="$name $train_tps"
        for pos in 256 1024 4096; do
            [ "$pos" -le "$limit" ] || { line="$line - -"; continue; }   # beyond its context
            p=$pos; [ $((p + 64)) -le "$limit" ] || p=$((limit - 64))
            # a prompt of about p tokens (2.42 bytes a token at the text's start), then
            # 64 generated tokens; the better of two runs
            head -c $((p * 242 / 100)) "$DATA" > "$WORK/prompt.txt"
            best=0
            for r in 1 2; do
                tps=$("$RUN" "$model" -z "$tok" -f "$WORK/prompt.txt" -n 64 -t 0 \
                      --attn "$spec" 2>&1 >/dev/null |
                      sed -n 's/.*generation: 64 tokens, \([0-9.]*\) tokens\/s.*/\1/p')
                best=$(awk -v a="$best" -v b="${tps:-0}" 'BEGIN { print (b > a ? b : a) }')
            done
            state=$("$RUN" "$model" -z "$tok" --eval "$WORK/prompt.txt" -c "$pos" \
                    --attn "$spec" 2>/dev/null | sed -n 's/^state: \([0-9]*\) bytes.*/\1/p')
            line="$line $best ${state:-0}"
        done
        echo "$line" >> "$WORK/speed.txt"
    done
    rm -f "$WORK/speed.bin" "$WORK/speed.bin.state" "$WORK/speed.tok" "$WORK/speed-model.bin" \
        "$WORK/speed-model.bin.state"
fi

# ---- equal: the same wall-clock budget as exact attention ----
# equal_steps NAME BASE EXACT: BASE steps scaled by NAME's training tokens/s over EXACT's
# (the speed phase's second column)
equal_steps() {
    awk -v n="$1" -v base="$2" -v e="$3" '$1 == n { v = $2 } $1 == e { x = $2 }
        END { if (v > 0 && x > 0) printf "%d\n", base * v / x + 0.5 }' "$WORK/speed.txt"
}
if [ "$WHAT" = all ] || [ "$WHAT" = equal ]; then
    [ -s "$WORK/speed.txt" ] || { echo "attn-train-table: $WORK/speed.txt: run the speed phase first" >&2; exit 1; }
    # the headline rows first, then the rest, then the longer contexts
    for pass in 1 0; do
        echo "$VARIANTS" | while read -r name spec headline; do
            [ "$name" = exact ] || [ "$headline" != "$pass" ] && continue
            n=$(equal_steps "$name" "$STEPS" exact)
            train_one "$name.eq" "$spec" 1337 -n "$n" -e "$n"
        done
    done
    # equal_rows LIST STEPS CONTEXT: LIST's rows against its exact rows (the first exact row
    # before each: the same context and positions)
    equal_rows() {
        echo "$1" | while read -r name spec headline flags; do
            if [ "$spec" = exact ]; then ref=$name; continue; fi
            n=$(equal_steps "$name" "$2" "$ref")
            [ -n "$n" ] || { echo "attn-train-table: $name: no speed (run the speed phase)" >&2; exit 1; }
            # shellcheck disable=SC2086
            train_one "$name.eq" "$spec" 1337 $3 -n "$n" -e "$n" $flags
        done
    }
    equal_rows "$LONG_VARIANTS" "$LONG_STEPS" "$LONG"
    equal_rows "$XLONG_VARIANTS" "$XLONG_STEPS" "$XLONG"
fi

# draw_picture POINTS SVG CONTEXT POSITION: the picture SVG of bits/char against decode
# tokens/s at position POSITION (left) and against training tokens/s (right), one labelled
# point per line of the file POINTS (name, bits/char, decode tokens/s at that position,
# training tokens/s; CONTEXT, if not empty, names the training context in the title);
# nothing if POINTS is missing or empty. The x axes start at 0 and end at
# a round number. A point far above the rest (more than the others' spread) sits on the top
# edge with its value in its label, so that the rest keep the height. Each label takes the
# first place beside its point, right or left and a line up or down, that no label placed
# before it overlaps (widths estimated at 6.6 pixels a character). The y axis runs between
# multiples of a round step (0.005, 0.01, 0.02, 0.05, ...: the first giving at most 6
# intervals), and each tick is labelled with its exact value.
draw_picture() {
    [ -s "$1" ] || return 0
    awk -v title="Trained from scratch${3:+ at context $3}: quality against speed (${DATE:-$(date +%Y-%m-%d)})" \
        -v position="$4" '
        function nice(v,   p) { p = 1; while (p * 10 <= v) p *= 10; return p * (int(v / p) + 1) }
        function free(x0, y0, x1, y1,   k) {
            for (k = 1; k <= nb; k++)
                if (x0 < bx1[k] && bx0[k] < x1 && y0 < by1[k] && by0[k] < y1) return 0
            return 1
        }
        { name[NR] = $1; y[NR] = $2; d[NR] = $3; t[NR] = $4 }
        END {
            n = NR; ylo = 1e9; yhi = -1e9; top1 = 0
            for (i = 1; i <= n; i++) if (!top1 || y[i] > y[top1]) top1 = i
            for (i = 1; i <= n; i++) {
                if (i == top1) continue
                if (y[i] < ylo) ylo = y[i]
                if (y[i] > yhi) yhi = y[i]
            }
            clip = n > 2 && y[top1] - yhi > yhi - ylo
            if (!clip && y[top1] > yhi) yhi = y[top1]
            pad = (yhi - ylo) * 0.08 + 0.005; ylo -= pad; yhi += pad
            split("0.005 0.01 0.02 0.05 0.1 0.2 0.5 1 2 5", steps, " ")
            for (k = 1; k < 10 && (yhi - ylo) / steps[k] > 6; k++) ;
            ystep = steps[k]
            ylo = int(ylo / ystep) * ystep
            nt = int((yhi - ylo) / ystep); if (ylo + nt * ystep < yhi - 1e-9) nt++
            yhi = ylo + nt * ystep
            ydec = ystep < 0.01 ? 3 : ystep < 0.1 ? 2 : 1
            W = 820; H = 520; top = 40; bottom = 460; pw = 320
            printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H
            printf "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H
            printf "<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n", W / 2, title
            for (p = 0; p < 2; p++) {
                left = 66 + p * 400; xmax = 0; nb = 0
                for (i = 1; i <= n; i++) { v = p ? t[i] : d[i]; if (v > xmax) xmax = v }
                xmax = nice(xmax)
                printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", left, top, pw, bottom - top
                printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", left + pw / 2, bottom + 36, p ? "training tokens/s (2 cores)" : "decode tokens/s at position " position
                for (k = 0; k <= 4; k++) {
                    x = left + pw * k / 4
                    printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">%.0f</text>\n", x, bottom + 16, xmax * k / 4
                }
                for (k = 0; k <= nt; k++) {
                    yy = bottom - (bottom - top) * k / nt
                    printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%.*f</text>\n", left - 6, yy + 4, ydec, ylo + k * ystep
                    printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", left, yy, left + pw, yy
                }
                printf "<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\" text-anchor=\"middle\">validation bits/char (lower is better)</text>\n", left - 48, (top + bottom) / 2, left - 48, (top + bottom) / 2
                for (i = 1; i <= n; i++) {   # the points first: labels keep off them
                    px[i] = left + pw * (p ? t[i] : d[i]) / xmax
                    py[i] = clip && i == top1 ? top : bottom - (bottom - top) * (y[i] - ylo) / (yhi - ylo)
                    nb++; bx0[nb] = px[i] - 5; bx1[nb] = px[i] + 5; by0[nb] = py[i] - 5; by1[nb] = py[i] + 5
                }
                for (i = 1; i <= n; i++) {
                    x = px[i]; yy = py[i]
                    label = clip && i == top1 ? sprintf("%s (%.2f, above)", name[i], y[i]) : name[i]
                    color = name[i] == "exact" ? "#c00" : "#036"
                    w = 6.6 * length(label); placed = 0
                    for (try = 0; try < 24 && !placed; try++) {
                        side = try % 2 ? -1 : 1; shift = int((try + 1) / 2)
                        dy = (shift % 2 ? -1 : 1) * int((shift + 1) / 2) * 13
                        lx = side > 0 ? x + 7 : x - 7 - w; ly = yy + 4 + dy
                        if (lx < left + 2 || lx + w > left + pw - 2 || ly < top + 4) continue
                        if (free(lx, ly - 11, lx + w, ly + 2)) placed = 1
                    }
                    if (!placed) { lx = x + 7; ly = yy + 4 }
                    nb++; bx0[nb] = lx; bx1[nb] = lx + w; by0[nb] = ly - 11; by1[nb] = ly + 2
                    if (ly != yy + 4)   # moved up or down: a leader line to its point
                        printf "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#aaa\"/>\n", x, yy, lx < x ? lx + w : lx, ly - 4
                    printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, yy, color
                    printf "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n", lx, ly, color, label
                }
            }
            print "</svg>"
        }' "$1" > "$2"
    echo "attn-train-table: $2 drawn" >&2
}

# ---- the table and the picture ----
if [ "$WHAT" = all ] || [ "$WHAT" = table ]; then
    size=$(wc -c < "$DATA")
    split=$(( size / 10 * 9 + size % 10 * 9 / 10 ))
    VAL="$WORK/validation.txt"
    tail -c +$((split + 1)) "$DATA" > "$VAL"
    bpc() {   # bits/char of checkpoint $1 on the validation split (extra flags after it)
        model=$1
        shift
        "$RUN" "$model" -z "$WORK/exact.tok" --eval "$VAL" "$@" 2>/dev/null |
            sed -n 's/^loss: .* nats\/token, \([0-9.]*\) bits\/char.*/\1/p'
    }
    # seeded NAME HEADLINE [SEEDS]: "shown mean" for NAME's checkpoints: one seed's
    # bits/char, or for a headline row the mean over SEEDS (default $SEEDS) with half their
    # range and a *
    seeded() {
        all=$(bpc "$WORK/$1.bin")
        if [ "$2" = 1 ]; then
            for seed in ${3:-$SEEDS}; do
                [ "$seed" = 1337 ] || all="$all $(bpc "$WORK/$1.s$seed.bin")"
            done
        fi
        echo "$all" | awk '{ lo = hi = $1; s = 0
            for (i = 1; i <= NF; i++) { s += $i; if ($i < lo) lo = $i; if ($i > hi) hi = $i }
            if (NF > 1) printf "%.4f ± %.4f* %s\n", s / NF, (hi - lo) / 2, s / NF
            else printf "%.4f %s\n", $1, $1 }'
    }
    # equal NAME: bits/char and steps of NAME's equal wall-clock run, or a dash
    equal() {
        [ -f "$WORK/$1.eq.bin" ] || { echo "—"; return 0; }
        printf '%.4f (%s)' "$(bpc "$WORK/$1.eq.bin")" \
            "$(sed -n 's/^step *\([0-9]*\)\/.*/\1/p' "$WORK/$1.eq.log" | tail -1)"
    }
    # whole V: V rounded to a whole number, or a dash for "-" (beyond a Synthesizer's
    # context); dash V: V, or a dash for "-"
    whole() { if [ "$1" = - ]; then echo "—"; else printf '%.0f' "$1"; fi; }
    dash() { if [ "$1" = - ]; then echo "—"; else echo "$1"; fi; }
    OUT="$WORK/table.md"
    POINTS="$WORK/points.txt"
    : > "$POINTS"
    {
        label "make attn-train-table"
        echo "Every row: \`train $SHAPE $RECIPE -n $STEPS --attn SPEC\` from scratch on"
        echo "\`$(basename "$DATA")\` (the same $STEPS x 8 x 256 tokens for every row); bits/char by"
        echo "\`run --eval\` on the validation split (bytes $split..$size, windows of 256)."
        echo "Seeds: mean ± half the range over seeds $SEEDS for the rows marked *, one seed"
        echo "elsewhere. Swapped in: the exact row's model run with \`--attn SPEC\`; fine-tuned:"
        echo "that, trained on for $FT_STEPS steps (\`--init\`). Training tokens/s: the median of three"
        echo "30-step runs on the same two cores. Equal wall-clock: the variant trained again for"
        echo "exact attention's time instead of its tokens ($STEPS x its training tokens/s over"
        echo "exact's steps, in brackets). Decode tokens/s and attention state (bytes, all layers) at"
        echo "position P: a random model of the same shape with a 4352-token context, 64 tokens"
        echo "generated after a prompt of about P tokens."
        echo
        echo "| variant | spec | bits/char | equal wall-clock (steps) | swapped in | swapped + fine-tuned | training tokens/s | decode tokens/s at 256 / 1024 / 4096 | state bytes at 256 / 1024 / 4096 |"
        echo "|---|---|---|---|---|---|---|---|---|"
    } > "$OUT"
    echo "$VARIANTS" | while read -r name spec headline; do
        echo "attn-train-table: evaluating $name" >&2
        r=$(seeded "$name" "$headline")
        shown=${r% *} b=${r##* }
        if [ "$name" = exact ]; then swapped="—"; tuned="—"; eq="= bits/char ($STEPS)"
        elif [ "${spec#synth-}" != "$spec" ]; then   # nothing in the exact model to lend it
            swapped="refused (no weights to lend)"; tuned="—"; eq=$(equal "$name")
        else
            eq=$(equal "$name")
            swapped=$(printf '%.4f' "$(bpc "$WORK/exact.bin" --attn "$spec")")
            tuned=$(printf '%.4f' "$(bpc "$WORK/$name.ft.bin")")
        fi
        speed=$(grep "^$name " "$WORK/speed.txt" 2>/dev/null || echo "$name 0 0 0 0 0 0 0")
        # shellcheck disable=SC2086
        set -- $speed
        printf '| %s | `%s` | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s |\n' "$name" \
            "$spec" "$shown" "$eq" "$swapped" "$tuned" "$2" "$(whole "$3")" "$(whole "$5")" \
            "$(whole "$7")" "$(dash "$4")" "$(dash "$6")" "$(dash "$8")" >> "$OUT"
        [ "$7" = - ] || echo "$name $b $7 $2" >> "$POINTS"   # no decode figure: no point
    done
    HEAD="| variant | spec | bits/char | equal wall-clock (steps) | training tokens/s | decode tokens/s at 256 / 1024 / 4096 | state bytes at 256 / 1024 / 4096 |
|---|---|---|---|---|---|---|"
    echo '| nystrom | — | not trained: no causal form ([§7](#7-nyström-attention)) | | | | | | |' >> "$OUT"
    {
        echo
        echo "At context 1024 (\`-T 1024 -B 2 -n $LONG_STEPS\`: the same tokens a step, half the"
        echo "steps; the window 1/8 of the context again), seeds as above; learned positions (a"
        echo "1024-row table) but in the rows marked rope (\`--pos rope\`: rotary, no table);"
        echo "equal wall-clock against exact's $LONG_STEPS steps at this context (rotary rows: rotary exact's):"
        echo
        echo "$HEAD"
    } >> "$OUT"
    # long_rows LIST STEPS SEEDS POINTS AT: a table line for each trained row of LIST (STEPS:
    # its exact row's steps; SEEDS: its headline rows' seeds), and for each rotary row a point
    # "name bits/char decode-tokens/s training-tokens/s" into the file POINTS, the decode
    # figure at position AT (1024 or 4096)
    long_rows() {
        lr_steps=$2 lr_seeds=$3 lr_points=$4 lr_at=$5   # (set -- below replaces the arguments)
        : > "$lr_points"
        echo "$1" | while read -r name spec headline flags; do
            [ -f "$WORK/$name.bin" ] || continue
            echo "attn-train-table: evaluating $name" >&2
            r=$(seeded "$name" "$headline" "$lr_seeds")
            if [ "$spec" = exact ]; then eq="= bits/char ($lr_steps)"; else eq=$(equal "$name"); fi
            speed=$(grep "^$name " "$WORK/speed.txt" 2>/dev/null || echo "$name - - - - - - -")
            # shellcheck disable=SC2086
            set -- $speed
            if [ "$2" = - ]; then tr="not timed" dec="—" st="—"   # trained after the speed phase
            else tr=$2 dec="$(whole "$3") / $(whole "$5") / $(whole "$7")"
                 st="$(dash "$4") / $(dash "$6") / $(dash "$8")"; fi
            printf '| %s | `%s` | %s | %s | %s | %s | %s |\n' "${name#*long-}" "$spec" "${r% *}" \
                "$eq" "$tr" "$dec" "$st"
            short=${name#*long-}
            [ "$2" != - ] || continue   # not timed: no point
            case $flags in *"--pos rope"*)   # learned positions: no point
                if [ "$lr_at" = 1024 ]; then d=$5; else d=$7; fi
                [ "$d" = - ] || echo "${short%-rope} ${r##* } $d $2" >> "$lr_points" ;;
            esac
        done
    }
    long_rows "$LONG_VARIANTS" "$LONG_STEPS" "$SEEDS" "$WORK/points-1024.txt" 1024 >> "$OUT"
    pic=img/$(basename "${SVG%.svg}")   # the pictures' path from docs/
    {
        echo
        echo "![bits/char against decode tokens/s at position 1024 and training tokens/s, context 1024, rotary](${pic}_1024.svg)"
    } >> "$OUT"
    {
        echo
        echo "At context 4096 (\`-T 4096 -B 1 -n $XLONG_STEPS\`: the tokens of the rows above), rotary"
        echo "positions; seeds $XLONG_SEEDS for the rows marked *, one elsewhere; equal wall-clock"
        echo "against exact's $XLONG_STEPS steps at this context:"
        echo
        echo "$HEAD"
        long_rows "$XLONG_VARIANTS" "$XLONG_STEPS" "$XLONG_SEEDS" "$WORK/points-4096.txt" 4096
        echo
        echo "![bits/char against decode tokens/s at position 4096 and training tokens/s, context 4096, rotary](${pic}_4096.svg)"
    } >> "$OUT"
    cat "$OUT"
    replace_between attn-train "$OUT" "$DOC"
fi
if [ "$WHAT" = all ] || [ "$WHAT" = table ] || [ "$WHAT" = picture ]; then
    draw_picture "$WORK/points.txt" "$SVG" "" 4096
    draw_picture "$WORK/points-1024.txt" "${SVG%.svg}_1024.svg" 1024 1024
    draw_picture "$WORK/points-4096.txt" "${SVG%.svg}_4096.svg" 4096 4096
fi
exit 0
