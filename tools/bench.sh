#!/bin/sh
# bench.sh: end-to-end speed and memory of ./run as one table (run by `make bench`).
#
# Prints the machine's measured peaks (tools/probe.c), then a row per model, format and thread
# count: median greedy decode tokens/s at N_SHORT and N_LONG new tokens, prefill tokens/s and
# GFLOP/s on a prompt of at most PROMPT_TOKENS tokens, the weight GB/s decode implies, each
# phase's share of the probe's peaks (attention and the KV cache counted), peak memory, and
# the command that reproduces the row. 1- and 2-thread runs alternate so that load
# hits both alike. Nothing is asserted. Missing models are skipped with a line.
set -u
# Settings, all from the environment: sh tools/bench.sh, or e.g. REPEAT=1 MODELS=s15m sh ...
RUN=${RUN:-./run}                      # the engine
GEN=${GEN:-build/tools/gen_model}      # random-weight checkpoints (tools/gen_model.c)
PROBE=${PROBE:-build/tools/probe}      # machine peaks (tools/probe.c)
QUANTIZE=${QUANTIZE:-./quantize}       # fp32 -> int8 files; int8 rows are '-' without it
SHARED=${SHARED_DIR:-../shared}        # reference models and tokenizers
OUT=${BENCH_DIR:-build/bench}          # generated models, int8 files, prompt files
REPEAT=${REPEAT:-3}                    # runs per row (the median is reported)
REPEAT_LARGE=${REPEAT_LARGE:-3}        # runs per row for s110m-rand and gpt2-124m-rand
N_SHORT=${N_SHORT:-128}                # decode lengths (tokens generated)
N_LONG=${N_LONG:-512}
PROMPT_TOKENS=${PROMPT_TOKENS:-256}    # prefill prompt length, at most (and the context)
PROMPT_TEXT=${PROMPT_TEXT:-tools/bench_prompt.txt}
# ONE_CPU: the CPU one-thread runs and peaks are held to (taskset), by default the first
# this may run on; empty: none. A machine's CPUs need not be alike (docs/performance.md).
[ -f tools/one_cpu.sh ] || { echo "bench.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
. tools/fit_prompt.sh   # fit_prompt
. tools/one_cpu.sh      # one_cpu
MODELS=${MODELS:-"shipped s260k s15m s15m-rand s110m-rand gpt2-124m-rand"}
DECODE_PROMPT="Once upon a time"
TIMER=/usr/bin/time          # GNU time: -f %M is the peak resident set size in KB
GPT2_MAGIC=20240326          # llm.c checkpoint magic (checkpoint.h CHECKPOINT_GPT2_MAGIC)
LLAMA_MAGIC=1634415666       # llama2.c "ak42" as a little-endian int32 (0x616b3432)
FP32_BYTES=4                 # bytes per parameter streamed, fp32
INT8_BYTES=1.125             # int8 Q8_0: 32 int8 values + one fp32 scale per 32 = 36/32
LL=$SHARED/testdata/llama2c

[ -f "$RUN" ] && [ -x "$RUN" ] || { echo "bench: $RUN: not built (make)" >&2; exit 1; }
case $RUN in */*) ;; *) RUN=./$RUN;; esac   # a bare name would be looked up in PATH
# a setting that is not a positive integer printed rows of "-" cells with exit 0
for setting in "REPEAT=$REPEAT" "REPEAT_LARGE=$REPEAT_LARGE" "N_SHORT=$N_SHORT" \
               "N_LONG=$N_LONG" "PROMPT_TOKENS=$PROMPT_TOKENS"; do
    case ${setting#*=} in ''|*[!0-9]*|0*)
        echo "bench: ${setting%%=*} must be a positive integer (got '${setting#*=}')" >&2
        exit 2;; esac
done
for name in $MODELS; do
    case $name in shipped|s260k|s15m|s15m-rand|s110m-rand|gpt2-124m-rand) ;;
        *) echo "bench: MODELS: unknown model '$name' (expected shipped, s260k, s15m," \
               "s15m-rand, s110m-rand or gpt2-124m-rand)" >&2; exit 2;; esac
done
one_cpu bench
[ -f "$PROMPT_TEXT" ] || { echo "bench: $PROMPT_TEXT: missing" >&2; exit 1; }
mkdir -p "$OUT" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP PIPE
: >"$tmp/notes"
note() { echo "$*" >>"$tmp/notes"; }
start_seconds=$(date +%s)
row() { printf '%-15s %-5s %2s %9s %9s %9s %4s %8s %7s %5s %5s %7s  %s\n' "$@"; }   # a line

# Threads: ./run's -T flag; before it existed, OMP_NUM_THREADS (then the commands say so).
"$RUN" --help >"$tmp/help" 2>&1 || { echo "bench: $RUN --help failed: $(tail -n 1 "$tmp/help")" >&2
                                      exit 1; }
if grep -q -e '^ *-T' "$tmp/help"; then HAS_T=1; else HAS_T=0; fi
[ -x "$TIMER" ] || { TIMER=; note "peak MB: '-' because $TIMER (GNU time) is missing"; }

# ---- header: machine and its measured peaks ----
cores=$(nproc 2>/dev/null || echo '?')
# probe_peaks: the machine's peaks now, into $tmp/probe (3-4 s). Run again before each
# model and format's rows (about a minute and a half in all), whose shares of the peaks
# (%pk, %rd) take the peaks of their own minutes: on a VM they move by a third within
# minutes (docs/performance.md).
probe_peaks() {
    : >"$tmp/probe"
    [ -x "$PROBE" ] || return 0
    "$PROBE" >"$tmp/probe" 2>&1 || echo "bench: $PROBE failed" >&2
    if [ -n "$ONE_CPU" ]; then   # the one-thread peaks from the CPU the one-thread rows use
        taskset -c "$ONE_CPU" "$PROBE" >"$tmp/probe1" 2>&1 || echo "bench: $PROBE failed" >&2
        awk 'NR == FNR { if ($2 == 1) one[$1] = $0; next }
             $2 == 1 && ($1 in one) { print one[$1]; next } { print }' \
            "$tmp/probe1" "$tmp/probe" >"$tmp/probe2" && mv "$tmp/probe2" "$tmp/probe"
    fi
}
[ -x "$PROBE" ] || echo "bench: $PROBE: not built; no peaks (make $PROBE)" >&2
probe_peaks
probe_value() { awk -v k="$1" -v t="${2:-}" '$1 == k && (t == "" || $2 == t) {
    print (t == "" ? substr($0, length(k) + 2) : $3); found = 1 } END { if (!found) print "-" }' \
    "$tmp/probe"; }
cpu=$(probe_value cpu)
[ "$cpu" = - ] && cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo "machine: $cpu, $cores cores, built for $(probe_value isa); $(date '+%Y-%m-%d %H:%M %Z')"
echo "peaks (tools/probe.c): read $(probe_value read_bw_gbs 1) / $(probe_value read_bw_gbs 2)" \
     "GB/s, FMA $(probe_value fma_gflops 1) / $(probe_value fma_gflops 2) GFLOP/s, int8" \
     "$(probe_value int8_gops 1) / $(probe_value int8_gops 2) GOP/s (the int8 tile's" \
     "ceiling with its float steps: $(probe_value int8_tile_gops 1) /" \
     "$(probe_value int8_tile_gops 2)) at 1 / 2 threads"
[ -n "$ONE_CPU" ] && echo "one thread: the rows and the peaks held to CPU $ONE_CPU (taskset)"
echo "decode: greedy after \"$DECODE_PROMPT\"; prefill: -n 1 after a prefix of" \
     "$PROMPT_TEXT"
echo "  of at most $PROMPT_TOKENS tokens (P); medians of $REPEAT runs ($REPEAT_LARGE for" \
     "s110m-rand and gpt2-124m-rand)"
row model format T \
    "dec@$N_SHORT" "dec@$N_LONG" prefill P "prefill" "decode" pre dec peak command
row "" "" "" tok/s tok/s tok/s "" \
    GFLOP/s GB/s %pk %rd MB ""

# ---- helpers ----
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }
largest() { sort -n | awk 'END { print NR ? $1 : "-" }'; }

# read_shape FILE: parses a checkpoint header (llm.c GPT-2, llama2.c "ak42" or legacy) into
# s_ctx (context), s_mm (parameters of the per-layer matmuls, all layers), s_cls (the
# classifier's V x C, which every decode step streams; the token and position tables are
# only looked up, a row per token, and are left out), s_att (attention's FLOPs per query and
# key: 4 x layers x C, the dots' and the weighted sums' multiply-adds), s_kv (the KV
# cache's bytes per position: 2 x layers x the kv width x 4, an f32 cache, run's default for
# these files), and what a prompt's rows but the last skip in the last layer (model.c's
# first_row): s_last, its matmul parameters after q, k, v (W_O and the MLP), and s_att_last,
# its share of s_att (4 x C).
read_shape() {
    # shellcheck disable=SC2046
    set -- $(od -An -t d4 -N 36 "$1")
    if [ "$1" = "$GPT2_MAGIC" ]; then     # magic version maxT V L NH C Vp
        s_ctx=$3; s_cls=$(($4 * $7)); s_mm=$((12 * $5 * $7 * $7))   # qkv 3C^2, proj C^2, MLP 8C^2
        s_att=$((4 * $5 * $7)); s_kv=$((2 * $5 * $7 * 4))
        s_last=$((9 * $7 * $7)); s_att_last=$((4 * $7))
        return
    fi
    [ "$1" = "$LLAMA_MAGIC" ] && shift 2  # versioned: magic version, then the legacy 7 fields
    dim=$1; hidden=$2; layers=$3; heads=$4; kv_heads=$5; vocab=${6#-}; s_ctx=$7
    kv_dim=$((kv_heads * dim / heads))
    s_cls=$((vocab * dim))
    s_mm=$((layers * (2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim)))  # wq wo, wk wv, w1-3
    s_att=$((4 * layers * dim)); s_kv=$((2 * layers * kv_dim * 4))
    s_last=$((dim * dim + 3 * hidden * dim)); s_att_last=$((4 * dim))
}

# run_one THREADS ARGS...: runs $RUN ARGS at THREADS threads; sets r_ok (1 if it succeeded),
# r_P, r_X (prompt tokens, tokens/s), r_G, r_Y (generated tokens, tokens/s), r_mem (KB).
run_one() {
    threads=$1; shift
    if [ "$HAS_T" = 1 ]; then set -- "$RUN" "$@" -T "$threads"; else set -- "$RUN" "$@"; fi
    if [ -n "$TIMER" ]; then set -- "$TIMER" -o "$tmp/mem" -f %M "$@"; fi
    if [ "$threads" = 1 ] && [ -n "$ONE_CPU" ]; then set -- taskset -c "$ONE_CPU" "$@"; fi
    : >"$tmp/mem"
    if [ "$HAS_T" = 1 ]; then "$@" >/dev/null 2>"$tmp/err"; r_rc=$?
    else OMP_NUM_THREADS=$threads "$@" >/dev/null 2>"$tmp/err"; r_rc=$?; fi
    # "prompt: P tokens, X tokens/s; generation: G tokens, Y tokens/s; seed S"
    stats=$(awk '/^prompt: .* generation: / { gsub(/[,;]/, ""); print $2, $4, $7, $9 }' \
            "$tmp/err")
    r_ok=0; r_P=-; r_X=-; r_G=-; r_Y=-
    r_mem=$(tail -n 1 "$tmp/mem" | grep -x '[0-9]*' || echo -)
    [ -n "$stats" ] || return 0
    # shellcheck disable=SC2086
    set -- $stats
    r_P=$1; r_X=$2; r_G=$3; r_Y=$4
    [ "$r_rc" = 0 ] && r_ok=1
}

# Command prefix that reproduces a row (threads as this script sets them).
row_command() {  # MODEL TOK THREADS
    rc_pin=; [ "$3" = 1 ] && [ -n "$ONE_CPU" ] && rc_pin="taskset -c $ONE_CPU "
    if [ "$HAS_T" = 1 ]; then echo "$rc_pin$RUN $1 -z $2 -t 0 -T $3"
    else echo "${rc_pin}env OMP_NUM_THREADS=$3 $RUN $1 -z $2 -t 0"; fi
}

# prompt_for MODEL TOK TOKNAME LIMIT: fp_file = $OUT/prompt-TOKNAME-LIMIT.txt, fit_prompt's
# prompt, and fp_P its tokens, or fp_file= if none fits; cached per tokenizer and limit.
prompt_for() {
    fp_file=$OUT/prompt-$3-$4.txt
    if [ -f "$tmp/fit-$3-$4" ]; then read -r fp_P <"$tmp/fit-$3-$4"
    else fp_P=$(fit_prompt "$1" "$2" "$4" "$fp_file"); echo "$fp_P" >"$tmp/fit-$3-$4"; fi
    [ -n "$fp_P" ] || fp_file=
}

# ---- one model in one format: the rows for 1 and 2 threads ----
# bench_file LABEL FORMAT FILE TOK TOKNAME REPEATS BYTES_PER_PARAM (needs read_shape's s_*)
bench_file() {
    label=$1; format=$2; file=$3; tok=$4; tokname=$5; repeats=$6; bpp=$7
    # warm-up (page cache) and the decode prompt's length
    run_one 2 "$file" -z "$tok" -i "$DECODE_PROMPT" -n 0 -t 0
    if [ "$r_ok" != 1 ]; then
        note "$label $format: $file: $(tail -n 1 "$tmp/err")"
        for threads in 1 2; do
            row "$label" "$format" \
                "$threads" - - - - - - - - - "(failed: see notes)"
        done
        return
    fi
    p_dec=$r_P
    probe_peaks   # this block's own peaks, for its %pk and %rd
    [ -s "$tmp/probe" ] && note "$label $format: peaks read $(probe_value read_bw_gbs 1) /" \
        "$(probe_value read_bw_gbs 2) GB/s, FMA $(probe_value fma_gflops 1) /" \
        "$(probe_value fma_gflops 2) GFLOP/s, int8 $(probe_value int8_gops 1) /" \
        "$(probe_value int8_gops 2) GOP/s (its %pk and %rd)"
    # run takes one thread for models under 4 M multiply-adds a token, whatever -T says
    # (run.c's RUN_MIN_MACS_FOR_THREADS): their rows are held to the one-thread peaks
    one_thread_model=0; [ $((s_mm + s_cls)) -lt 4000000 ] && one_thread_model=1
    # generation stops when the context is full: at most ctx - P + 1 tokens
    n_short=$N_SHORT; room=$((s_ctx - p_dec + 1))
    if [ "$room" -lt "$n_short" ]; then
        n_short=$room
        note "$label: context $s_ctx, so dec@$N_SHORT generates $n_short tokens (marked ^)"
    fi
    n_long=$N_LONG; [ "$room" -lt "$n_long" ] && n_long=
    limit=$PROMPT_TOKENS; [ "$s_ctx" -lt "$limit" ] && limit=$s_ctx
    prompt_for "$file" "$tok" "$tokname" "$limit"
    for threads in 1 2; do : >"$tmp/short$threads"; : >"$tmp/long$threads"
        : >"$tmp/pre$threads"; : >"$tmp/mem$threads"; : >"$tmp/early$threads"; done
    i=0
    while [ "$i" -lt "$repeats" ]; do
        for what in short long pre; do
            for threads in 1 2; do
                case $what in
                    short) run_one "$threads" "$file" -z "$tok" -i "$DECODE_PROMPT" \
                               -n "$n_short" -t 0;;
                    long) [ -n "$n_long" ] || continue
                          run_one "$threads" "$file" -z "$tok" -i "$DECODE_PROMPT" \
                              -n "$n_long" -t 0;;
                    pre) [ -n "$fp_file" ] || continue
                         run_one "$threads" "$file" -z "$tok" -f "$fp_file" -n 1 -t 0;;
                esac
                if [ "$r_ok" != 1 ]; then
                    note "$label $format T$threads $what: $(tail -n 1 "$tmp/err")"
                    continue
                fi
                [ "$r_mem" != - ] && echo "$r_mem" >>"$tmp/mem$threads"
                case $what in
                    short) echo "$r_Y" >>"$tmp/short$threads"
                           [ "$r_G" -lt "$n_short" ] && echo "$r_G" >>"$tmp/early$threads";;
                    long) echo "$r_Y" >>"$tmp/long$threads"
                          [ "$r_G" -lt "$n_long" ] && echo "$r_G" >>"$tmp/early$threads";;
                    pre) echo "$r_X" >>"$tmp/pre$threads";;
                esac
            done
        done
        i=$((i + 1))
    done
    for threads in 1 2; do
        short=$(median <"$tmp/short$threads"); long=$(median <"$tmp/long$threads")
        pre=$(median <"$tmp/pre$threads")
        [ -n "$n_long" ] || long=-
        mark=; [ "$n_short" != "$N_SHORT" ] && mark=^
        if [ -s "$tmp/early$threads" ]; then
            mark="$mark*"
            note "$label $format T$threads: stopped at end-of-text after" \
                 "$(sort -n "$tmp/early$threads" | head -n 1) tokens (marked *)"
        fi
        # prefill FLOPs: 2 per matmul parameter per prompt token but the last layer's W_O
        # and MLP, which only the last token runs, plus the one classifier row
        gflops=$(awk -v t="$pre" -v p="${fp_P:-0}" -v mm="$s_mm" -v last="$s_last" \
                     -v cls="$s_cls" 'BEGIN {
            if (t == "-" || p == 0) print "-"
            else printf "%.1f", (2 * (mm * p - last * (p - 1)) + 2 * cls) * t / p / 1e9 }')
        # decode bytes: every matmul weight and the classifier once per token
        gbs=$(awk -v y="$short" -v mm="$s_mm" -v cls="$s_cls" -v b="$bpp" 'BEGIN {
            if (y == "-") print "-"; else printf "%.2f", (mm + cls) * b * y / 1e9 }')
        # each phase's share of the probe's peaks at the threads the row runs on: the
        # prompt's matmul operations (int8: at the int8 peak) and its attention's P (P + 1)
        # / 2 query-key pairs (fp32 FMAs; the last layer's P, its one query's) against the
        # time they would take at the peaks;
        # decode's weights and KV cache against the read peak (n tokens take n - 1 steps,
        # at positions p0 .. p0 + n - 2: p0 + n / 2 keys a step on average)
        pt=$threads; [ "$one_thread_model" = 1 ] && pt=1
        pk=$(awk -v t="$pre" -v p="${fp_P:-0}" -v mm="$s_mm" -v cls="$s_cls" -v att="$s_att" \
                 -v last="$s_last" -v att_last="$s_att_last" \
                 -v fma="$(probe_value fma_gflops "$pt")" -v fmt="$format" \
                 -v i8="$(probe_value int8_gops "$pt")" 'BEGIN {
            mat_peak = fmt == "int8" ? i8 : fma
            if (t == "-" || p == 0 || fma + 0 <= 0 || mat_peak + 0 <= 0) { print "-"; exit }
            mm_ops = 2 * (mm * p - last * (p - 1)) + 2 * cls
            att_ops = (att - att_last) * p * (p + 1) / 2 + att_last * p
            ideal = mm_ops / (mat_peak * 1e9) + att_ops / (fma * 1e9)
            printf "%.0f%%", 100 * ideal * t / p }')
        rd=$(awk -v y="$short" -v mm="$s_mm" -v cls="$s_cls" -v b="$bpp" -v kv="$s_kv" \
                 -v p0="$p_dec" -v n="$n_short" -v bw="$(probe_value read_bw_gbs "$pt")" 'BEGIN {
            if (y == "-" || bw + 0 <= 0) { print "-"; exit }
            bytes = (mm + cls) * b + kv * (p0 + n / 2)
            printf "%.0f%%", 100 * bytes * y / (bw * 1e9) }')
        mem=$(largest <"$tmp/mem$threads" |
              awk '{ print $1 == "-" ? "-" : sprintf("%.1f", $1 / 1024) }')
        cmd="$(row_command "$file" "$tok" "$threads") {-i \"$DECODE_PROMPT\" -n $n_short"
        cmd="$cmd${n_long:+|$n_long}${fp_file:+, -f $fp_file -n 1}}"
        row "$label" "$format" "$threads" \
            "$short$mark" "$long" "$pre" "${fp_P:--}" "$gflops" "$gbs" "$pk" "$rd" "$mem" "$cmd"
    done
}

# Prints '-' rows for a format that could not be benchmarked, and why.
skip_rows() {  # LABEL FORMAT WHY
    for threads in 1 2; do
        row "$1" "$2" "$threads" \
            - - - - - - - - - "($3)"
    done
}

# ---- the models ----
for name in $MODELS; do
    large=0; fallback=; preset=
    case $name in
        shipped) file=weights/model.bin; tok=weights/tokenizer.bin; tokname=shipped;;
        s260k) file=$LL/s260k.bin; tok=$LL/tok512.bin; tokname=tok512;;
        s15m) file=$LL/s15m.bin; tok=$LL/tokenizer.bin; tokname=llama; fallback=$LL/s15m_q80.bin;;
        s15m-rand) file=$OUT/s15m.bin; tok=$LL/tokenizer.bin; tokname=llama; preset=s15m;;
        s110m-rand) file=$OUT/s110m.bin; tok=$LL/tokenizer.bin; tokname=llama; preset=s110m
                    large=1;;
        gpt2-124m-rand) file=$OUT/gpt2-124m.bin; tok=$SHARED/testdata/gpt2/gpt2_tokenizer.bin
                        tokname=gpt2; preset=gpt2-124m; large=1;;
        *) echo "bench: unknown model $name (known: shipped s260k s15m s15m-rand" \
                "s110m-rand gpt2-124m-rand)" >&2; continue;;
    esac
    if [ -n "$preset" ] && [ ! -f "$file" ] && [ -x "$GEN" ]; then
        "$GEN" "$preset" "$file" 2>"$tmp/err" || note "$name: $(tail -n 1 "$tmp/err")"
    fi
    if [ ! -f "$file" ] || [ ! -f "$tok" ]; then
        echo "$name: skipped ($file or $tok not found)"
        continue
    fi
    repeats=$REPEAT; [ "$large" = 1 ] && repeats=$REPEAT_LARGE
    read_shape "$file"
    bench_file "$name" fp32 "$file" "$tok" "$tokname" "$repeats" "$FP32_BYTES"

    # int8: ./quantize's file when it exists, else a shipped int8 file, else '-'
    qfile=
    if [ -x "$QUANTIZE" ]; then
        qfile=$OUT/$name-int8.bin
        # (re)make it when missing or older than its checkpoint or than ./quantize
        if [ ! -f "$qfile" ] || [ -n "$(find "$file" "$QUANTIZE" -newer "$qfile")" ]; then
            if ! "$QUANTIZE" "$file" "$qfile" >/dev/null 2>"$tmp/err"; then
                note "$name int8: $QUANTIZE failed: $(tail -n 1 "$tmp/err")"
                rm -f "$qfile"; qfile=
            fi
        fi
        [ -n "$qfile" ] || skip_rows "$name" int8 "quantize failed: see notes"
    elif [ -n "$fallback" ] && [ -f "$fallback" ]; then
        qfile=$fallback
    else
        skip_rows "$name" int8 "no $QUANTIZE"
    fi
    [ -n "$qfile" ] && bench_file "$name" int8 "$qfile" "$tok" "$tokname" "$repeats" "$INT8_BYTES"
done

# ---- notes ----
echo
echo "prefill GFLOP/s = (2 x matmul parameters x P + 2 x V x C) / prefill time, less the"
echo "  last layer's W_O and MLP for the P - 1 rows whose outputs no logit reads (model.c"
echo "  skips them; attention's own FLOPs left out); decode GB/s = (matmul parameters + V x C"
echo "  classifier) x bytes per parameter ($FP32_BYTES fp32, $INT8_BYTES int8 Q8_0) x dec@$N_SHORT tok/s;" \
     "peak MB: the largest of the row's runs"
echo "pre %pk = the prompt's time at the probe's peaks (its matmuls as GFLOP/s counts them at"
echo "  the FMA peak, int8 ones at the int8 peak, attention's 4 x C FLOPs a layer and query-key"
echo "  pair, the last layer's last query only, at the FMA peak) / its measured time; dec %rd"
echo "  = (the weights as GB/s counts them + the f32 KV cache read a token at the run's mean"
echo "  position) x dec@$N_SHORT tok/s / the read peak; both against"
echo "  the peaks probed just before the model and format's rows, at the row's threads (one for"
echo "  the models that run on one thread whatever -T says: shipped, s260k)"
echo "s260k and s15m are the llama2.c-format reference checkpoints of the tests (random weights);"
echo "  *-rand are random-weight files of the real shapes from $GEN (s15m-rand: context 1024,"
echo "  for dec@$N_LONG)"
[ "$HAS_T" = 1 ] || echo "threads: $RUN has no -T flag; set with OMP_NUM_THREADS instead"
awk '!seen[$0]++' "$tmp/notes"
echo "total: $(( $(date +%s) - start_seconds )) s"
