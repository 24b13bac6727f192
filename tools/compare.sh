#!/bin/sh
# compare.sh: this engine beside llama2.c, and llama.cpp when given, on the same models, in
# alternating rounds.
#
# Usage: sh tools/compare.sh LLAMA2C_DIR [LLAMACPP_BUILD_DIR]
#   LLAMA2C_DIR: a checkout of karpathy/llama2.c in which `make runomp` (or your own
#   flags) built `run` and `runq`, or any folder holding the two programs; nothing of it
#   enters this repository. A file LLAMA2C_DIR/BUILD, if there, is printed as its build
#   note (how it was built), else its git commit. Build every engine with the same
#   instruction set: for the AVX2 + FMA path on any x86-64-v3 machine, this engine with
#   `make B=build/v3 CFLAGS="-O3 -march=x86-64-v3"` (then RUN=build/v3/run), llama2.c
#   with `gcc -Ofast -fopenmp -march=x86-64-v3 run.c -lm -o run` (runq.c likewise).
#   LLAMACPP_BUILD_DIR: a CMake build folder of ggerganov/llama.cpp (or the bin/ inside it)
#   with llama-bench, and llama-convert-llama2c-to-ggml and llama-quantize to make the GGUF
#   files that MODELS_DIR lacks; llama-cli, when there, prints its CPU features. Build it
#   with `cmake -B BUILD -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
#   -DGGML_NATIVE=ON`, or
#   for AVX2 alone -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
#   -DGGML_AVX512=OFF, then `cmake --build BUILD --target llama-bench llama-cli
#   llama-quantize llama-convert-llama2c-to-ggml`.
# Environment: RUN (default ./run), OTHERS (other builds of this engine, run in the same
#   rounds as RUN, each a column and RUN's ratio to it: "LABEL=PATH LABEL=PATH", e.g.
#   OTHERS="before=../old/build/run no-openmp=build/noomp/run"), ROUNDS (3), STEPS (256 new tokens at most), THREADS
#   ("1 2"), SHARED_DIR (../shared: s260k, s15m and its int8 form, the tokenizers), MODELS
#   (default below; also s110m and s110m_q80), MODELS_DIR (build/compare: the GGUF files and
#   the random s110m, made there when missing and kept), GEN (build/tools/gen_model),
#   QUANTIZE (the quantize beside RUN, else ./quantize), PROMPT_TOKENS (256) and
#   PROMPT_TEXT (tools/bench_prompt.txt) for prefill, STAT (median, or best: the fastest
#   round of each engine, steadier where other work shares the machine), ONE_CPU (the CPU
#   that every engine's one-thread runs are held to, with taskset: by default the first
#   this may run on, 0 on most machines; empty: none).
# One-thread runs go on one CPU because a machine's CPUs need not be alike: on a 2-CPU VM
# (Zen 5, 2026-11-30) CPU 1 decoded s15m at 400 tokens/s where CPU 0 gave 625, so that an
# unpinned round measured mostly where the scheduler put it. Two-thread runs use both.
#
# For each model and thread count it runs each engine in turn (the order turning by one place
# each round, so that no engine always runs first), ROUNDS times, and prints
# the median (or best) tokens/s of each and this engine's ratio to each, under the CPU's name, its
# vector instruction sets, the date and each engine's build. What each number is:
#   decode, greedy, N = min(STEPS, context - prompt) new tokens after "Once upon a time"
#   (N stops short of the context, so that no engine shifts or stops):
#   - this engine: its "generation: N tokens, X tokens/s" line (-t 0 -n N): the loop that
#     picks each token and runs it through the model.
#   - llama2.c: its "achieved tok/s", over its positions after the first (its -n counts the
#     prompt too, so it is given N + the prompt's tokens; it runs the prompt a token at a
#     time, as it decodes).
#   - llama.cpp: llama-bench -p 0 -n N -r 1, its "tg" tokens/s: N single-token decodes
#     from position 0 (random token ids, no sampling), after one warm-up token.
#   prefill, only with llama.cpp: a prompt of P = at most min(PROMPT_TOKENS, context)
#   tokens (the longest whole-word start of PROMPT_TEXT that fits, as this engine counts):
#   - this engine: its "prompt: P tokens, X tokens/s" line (-f PROMPT -n 1).
#   - llama.cpp: llama-bench -p P -n 0 -r 1, its "pp" tokens/s (P random token ids, BOS
#     first, in one batch, after one warm-up run of the same prompt).
#   - llama2.c has no batched prompt: it runs prompts at its decode speed (no column).
# Files: llama2.c's fp32 files and the int8 ones (version 2: groups of 32 values, fp32
# scales) serve this engine and llama2.c (`run`, int8: `runq`); llama.cpp reads the fp32
# files converted to GGUF (its KV cache in f16, as by default), and for the int8 rows
# Q8_0 (blocks of 32, f16 scales) made from them by llama-quantize (its converter records a
# context of 128 whatever the model's: llama-bench sizes its own and only warns). s110m is
# gen_model's random 110M-shaped model, rewritten in llama2.c's legacy layout, which all
# three read.
# Run it on an idle machine: nothing else should share the cores. Nothing is asserted:
# this prints figures.
set -u
L2C=${1:?usage: sh tools/compare.sh LLAMA2C_DIR [LLAMACPP_BUILD_DIR]}
LCPP_ARG=${2:-}
RUN=${RUN:-./run}
OTHERS=${OTHERS:-}
ROUNDS=${ROUNDS:-3}
STAT=${STAT:-median}
case $STAT in median | best) ;; *) echo "compare.sh: STAT must be median or best (got '$STAT')" >&2; exit 2 ;; esac
STEPS=${STEPS:-256}
THREADS=${THREADS:-"1 2"}
# a setting that is not a positive integer (or a thread count above the CPUs) is refused:
# it printed tables of "-" cells, or llama2.c really ran 99 threads on 2 CPUs
posint() {   # NAME VALUE
    case $2 in ''|*[!0-9]*|0*) echo "compare.sh: $1 must be a positive integer (got '$2')" >&2
                               exit 2;; esac
}
posint ROUNDS "$ROUNDS"
posint STEPS "$STEPS"
[ -n "$(echo $THREADS)" ] || { echo "compare.sh: THREADS is empty (expected counts, e.g. \"1 2\")" >&2; exit 2; }
for t in $THREADS; do
    posint THREADS "$t"
    [ "$t" -le "$(nproc)" ] || { echo "compare.sh: THREADS: $t is more than this machine's" \
        "$(nproc) CPUs (expected 1..$(nproc))" >&2; exit 2; }
done
SHARED=${SHARED_DIR:-../shared}
LL=$SHARED/testdata/llama2c
MODELS=${MODELS:-"s260k s15m s15m_q80"}   # also: s110m s110m_q80 (made in MODELS_DIR)
MODELS_DIR=${MODELS_DIR:-build/compare}
PROMPT="Once upon a time"
PROMPT_TOKENS=${PROMPT_TOKENS:-256}
posint PROMPT_TOKENS "$PROMPT_TOKENS"
for m in $MODELS; do
    case $m in s260k|s15m|s15m_q80|s110m|s110m_q80) ;;
        *) echo "compare.sh: MODELS: unknown model '$m' (expected s260k, s15m, s15m_q80," \
               "s110m or s110m_q80)" >&2; exit 2;; esac
done
PROMPT_TEXT=${PROMPT_TEXT:-tools/bench_prompt.txt}
[ -f tools/one_cpu.sh ] || { echo "compare.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
. tools/fit_prompt.sh   # fit_prompt
. tools/one_cpu.sh      # one_cpu
GEN=${GEN:-build/tools/gen_model}
one_cpu compare.sh
QUANTIZE=${QUANTIZE:-$(dirname "$RUN")/quantize}
[ -x "$QUANTIZE" ] || QUANTIZE=./quantize

[ -x "$RUN" ] || { echo "compare: $RUN: not built (make)" >&2; exit 1; }
for o in $OTHERS; do
    case $o in
        ?*=?*) [ -x "${o#*=}" ] || { echo "compare: OTHERS: ${o#*=}: not built" >&2; exit 1; };;
        *) echo "compare: OTHERS: expected LABEL=PATH entries (got '$o')" >&2; exit 2;;
    esac
done
[ -x "$L2C/run" ] || { echo "compare: $L2C/run: not built (make runomp in $L2C)" >&2; exit 1; }
case " $MODELS " in *_q80*) [ -x "$L2C/runq" ] || { echo "compare: $L2C/runq: not built (its" \
    "int8 models need it: make runq in $L2C)" >&2; exit 1; };; esac
# llama.cpp's programs: in the folder given, or in its bin/
LCPP=
if [ -n "$LCPP_ARG" ]; then
    for d in "$LCPP_ARG/bin" "$LCPP_ARG"; do
        [ -x "$d/llama-bench" ] && { LCPP=$d; break; }
    done
    [ -n "$LCPP" ] || { echo "compare: no llama-bench in $LCPP_ARG or $LCPP_ARG/bin" >&2; exit 1; }
    [ -f "$PROMPT_TEXT" ] || { echo "compare: $PROMPT_TEXT: missing" >&2; exit 1; }
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP PIPE
say() { echo "compare: $*" >&2; }   # progress, on stderr

# STAT of the numbers on standard input: their median, or the largest (best: another
# process on the machine only ever slows a round, so the fastest round is the one least
# disturbed)
stat() {
    sort -g | awk -v best="$([ "$STAT" = best ] && echo 1 || echo 0)" '{ v[NR] = $1 } END {
        if (NR == 0) print "-"; else if (best) printf "%.1f\n", v[NR];
        else if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2];
        else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
rounds_said() { [ "$STAT" = best ] && echo "the best of $ROUNDS alternated rounds" ||
                echo "medians of $ROUNDS alternated rounds"; }
# ratio A B: A / B as "1.23x", or "-" when either is missing
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }'; }

# ---- model files ----
# legacy V1 OUT: gen_model's llama2.c version 1 file V1 (fp32, shared classifier) rewritten
# in llama2.c's legacy layout, the one llama2.c's run and llama.cpp's converter read: its 7
# config ints, then the same tensors in another order (each one contiguous in both), then
# the unused RoPE tables (seq_len x head_size floats, zeros here).
legacy() {
    # shellcheck disable=SC2046 # (the 7 numbers, split on purpose)
    set -- $(od -An -t d4 -j 8 -N 28 "$1") "$1" "$2"   # dim hidden layers heads kv vocab seq
    lg_in=$8; lg_c=$1; lg_hd=$2; lg_l=$3; lg_kvd=$(($5 * $1 / $4)); lg_v=$6
    lg_rope=$(($7 * $1 / $4))
    [ "$(od -An -t u1 -j 36 -N 1 "$lg_in" | tr -d ' ')" = 1 ] || return 1   # shared only
    # version 1 offsets, in floats after its 256-byte header
    lg_lc=$((lg_l * lg_c)); lg_ffn=$lg_lc; lg_fin=$((2 * lg_lc)); lg_emb=$((lg_fin + lg_c))
    lg_wq=$((lg_emb + lg_v * lg_c)); lg_wk=$((lg_wq + lg_lc * lg_c))
    lg_wv=$((lg_wk + lg_l * lg_kvd * lg_c)); lg_wo=$((lg_wv + lg_l * lg_kvd * lg_c))
    lg_w1=$((lg_wo + lg_lc * lg_c)); lg_w2=$((lg_w1 + lg_lc * lg_hd))
    lg_w3=$((lg_w2 + lg_lc * lg_hd))
    {   head -c 36 "$lg_in" | tail -c 28
        part $lg_emb $((lg_v * lg_c)); part 0 $lg_lc; part $lg_wq $((lg_lc * lg_c))
        part $lg_wk $((lg_l * lg_kvd * lg_c)); part $lg_wv $((lg_l * lg_kvd * lg_c))
        part $lg_wo $((lg_lc * lg_c)); part $lg_ffn $lg_lc; part $lg_w1 $((lg_lc * lg_hd))
        part $lg_w2 $((lg_lc * lg_hd)); part $lg_w3 $((lg_lc * lg_hd)); part $lg_fin "$lg_c"
        head -c $((4 * lg_rope)) /dev/zero
    } >"$9.tmp" && mv "$9.tmp" "$9"
}
part() { tail -c +$((256 + 4 * $1 + 1)) "$lg_in" | head -c $((4 * $2)); }   # OFFSET COUNT

# gguf NAME SRC TOK [Q8_0]: MODELS_DIR/NAME.gguf, converted from the legacy fp32 file SRC
# with the tokenizer TOK (and quantized from its fp32 GGUF with Q8_0), unless already there
gguf() {
    gg_f32=$MODELS_DIR/${1%-q8_0}.gguf
    # each written under a temporary name in the folder and renamed when whole: an
    # interrupted conversion left a broken file that later runs took as made
    if [ ! -f "$gg_f32" ]; then
        say "converting $2 to $gg_f32"
        "$LCPP/llama-convert-llama2c-to-ggml" --copy-vocab-from-model "$3" \
            --llama2c-model "$2" --llama2c-output-model "$gg_f32.tmp.gguf" >"$tmp/conv" 2>&1 &&
            mv "$gg_f32.tmp.gguf" "$gg_f32" ||
            { tail -n 3 "$tmp/conv" >&2; rm -f "$gg_f32.tmp.gguf"; return 1; }
    fi
    if [ -n "${4:-}" ] && [ ! -f "$MODELS_DIR/$1.gguf" ]; then
        say "quantizing $gg_f32 to $MODELS_DIR/$1.gguf"
        "$LCPP/llama-quantize" "$gg_f32" "$MODELS_DIR/$1.gguf.tmp.gguf" Q8_0 >"$tmp/quant" 2>&1 &&
            mv "$MODELS_DIR/$1.gguf.tmp.gguf" "$MODELS_DIR/$1.gguf" ||
            { tail -n 3 "$tmp/quant" >&2; rm -f "$MODELS_DIR/$1.gguf.tmp.gguf"; return 1; }
    fi
}

# model NAME: sets file, tok, q (llama2.c's program: run or runq) and gg (the GGUF, or
# empty without llama.cpp), making missing files; returns 1 if one cannot be had
model() {
    q=""; gg=""
    case $1 in
        s260k) file=$LL/s260k.bin; tok=$LL/tok512.bin;;
        s15m) file=$LL/s15m.bin; tok=$LL/tokenizer.bin;;
        s15m_q80) file=$LL/s15m_q80.bin; tok=$LL/tokenizer.bin; q=q;;
        s110m|s110m_q80)
            file=$MODELS_DIR/s110m.bin; tok=$LL/tokenizer.bin
            if [ ! -f "$file" ]; then
                mkdir -p "$MODELS_DIR" || return 1
                [ -x "$GEN" ] || make -s "$GEN" >/dev/null 2>&1
                say "writing the random s110m to $file"
                "$GEN" s110m "$tmp/s110m_v1.bin" >/dev/null 2>&1 &&
                    legacy "$tmp/s110m_v1.bin" "$file" || return 1
                rm -f "$tmp/s110m_v1.bin"
            fi
            if [ "$1" = s110m_q80 ]; then
                q=q; file=$MODELS_DIR/s110m_q80.bin
                [ -f "$file" ] || "$QUANTIZE" "$MODELS_DIR/s110m.bin" "$file" -g 32 \
                    >/dev/null 2>&1 || return 1
            fi;;
        *) say "unknown model $1"; return 1;;
    esac
    [ -f "$file" ] && [ -f "$tok" ] || return 1
    [ -n "$LCPP" ] || return 0
    mkdir -p "$MODELS_DIR" || return 1
    case $1 in
        s15m_q80) gguf s15m-q8_0 "$LL/s15m.bin" "$tok" Q8_0;;
        s110m_q80) gguf s110m-q8_0 "$MODELS_DIR/s110m.bin" "$tok" Q8_0;;
        *) gguf "$1" "$file" "$tok";;
    esac || return 1
    case $1 in *_q80) gg=$MODELS_DIR/${1%_q80}-q8_0.gguf;; *) gg=$MODELS_DIR/$1.gguf;; esac
}

# on THREADS COMMAND...: COMMAND with OMP_NUM_THREADS=THREADS, held to ONE_CPU when THREADS
# is 1 (and ONE_CPU is set)
on() {
    on_t=$1; shift
    if [ "$on_t" = 1 ] && [ -n "$ONE_CPU" ]; then
        taskset -c "$ONE_CPU" env OMP_NUM_THREADS="$on_t" "$@"
    else env OMP_NUM_THREADS="$on_t" "$@"; fi
}

# lcpp_bench GGUF THREADS P N [FIELD]: llama.cpp's tokens/s for a prompt of P tokens or N
# generated ones (one of the two is 0), from one llama-bench repetition; or another FIELD
# of its report (build_commit: the commit it was built from)
lcpp_bench() {
    on "$2" "$LCPP/llama-bench" -m "$1" -t "$2" -p "$3" -n "$4" -r 1 -o jsonl \
        2>/dev/null | sed -n "s/.*\"${5:-avg_ts}\": \"*\([0-9a-z.]*\).*/\1/p"
}

# run_engine WHICH: one round of one engine on the current model and thread count (file,
# tok, q, gg, n, n_pre, t): its decode, then its prefill where measured, each figure
# appended to its file. WHICH: ours (RUN), otherI (the I-th of OTHERS), l2c, lcpp.
run_engine() {
    case $1 in
        l2c) on "$t" "$L2C/run$q" "$file" -z "$tok" -t 0 -n $((n + ${n_prompt:-1})) \
                 -i "$PROMPT" 2>&1 >/dev/null | sed -n 's/achieved tok\/s: \([0-9.]*\)/\1/p' >>"$tmp/theirs"
             return;;
        lcpp) lcpp_bench "$gg" "$t" 0 "$n" >>"$tmp/lcpp"
              [ -z "$n_pre" ] || lcpp_bench "$gg" "$t" "$n_pre" 0 >>"$tmp/lcpp_pre"
              return;;
        ours) re_bin=$RUN; re_out=ours; re_pre=ours_pre;;
        *) re_i=${1#other}; re_bin=$(echo $OTHERS | tr ' ' '\n' | sed -n "${re_i}p")
           re_bin=${re_bin#*=}; re_out=other$re_i; re_pre=other_pre$re_i;;
    esac
    on "$t" "$re_bin" "$file" -z "$tok" -t 0 -n "$n" -i "$PROMPT" 2>&1 >/dev/null |
        sed -n 's/.*generation: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' >>"$tmp/$re_out"
    [ -z "$n_pre" ] || on "$t" "$re_bin" "$file" -z "$tok" -t 0 -n 1 -f "$tmp/prompt" \
        2>&1 >/dev/null | sed -n 's/^prompt: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' >>"$tmp/$re_pre"
}

# flags_of BIN: the compiler command its build recorded (the make build's flags file, beside
# the program or, for a program at the top of a checkout, in build/)
flags_of() {
    for f in "$(dirname "$1")/flags" "$(dirname "$1")/build/flags"; do
        [ -f "$f" ] && { head -c 400 "$f"; return; }
    done
    echo "flags unknown"
}

# ---- the models, then the header, then the tables ----
ready=""
for m in $MODELS; do
    if model "$m"; then ready="$ready $m"
    else echo "| $m | - | skipped: a file it needs is missing or could not be made |" >>"$tmp/skipped"; fi
done
[ -n "$ready" ] || { echo "compare: none of MODELS ($MODELS) could be had (expected their files" \
    "in $LL or $MODELS_DIR: SHARED_DIR names ../shared)" >&2; exit 1; }

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
isa=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_vnni|avx_vnni)$' | tr '\n' ' ')
echo "compare: $(date -u +%Y-%m-%d), $cpu, $(nproc 2>/dev/null || echo '?') cores, ISA: $isa"
echo "this engine: $RUN, from the checkout at" \
     "$(git -C "$(dirname "$RUN")" describe --always --dirty 2>/dev/null || echo "?")" \
     "($(flags_of "$RUN"))"
if [ -f "$L2C/BUILD" ]; then l2c_build=$(head -c 400 "$L2C/BUILD")
else l2c_build=$(cd "$L2C" && git log --oneline -1 2>/dev/null); fi
for o in $OTHERS; do
    echo "${o%%=*}: ${o#*=} ($(flags_of "${o#*=}"))"
done
echo "llama2.c: $L2C ($l2c_build)"
if [ -n "$LCPP" ]; then
    # its commit, its CMake options that choose the instruction sets, and the CPU
    # features the build uses (llama-cli's system_info line, from the first GGUF)
    cache=$(dirname "$LCPP")/CMakeCache.txt; [ -f "$cache" ] || cache=$LCPP/CMakeCache.txt
    opts=$(grep -E '^(CMAKE_BUILD_TYPE|GGML_NATIVE|GGML_AVX[A-Z0-9_]*|GGML_FMA|GGML_F16C|GGML_OPENMP|GGML_LLAMAFILE|BUILD_SHARED_LIBS):' \
           "$cache" 2>/dev/null | sed 's/:[A-Z]*=/=/' | tr '\n' ' ')
    first=$(for m in $ready; do model "$m" && echo "$gg"; done | head -n 1)
    commit=$(lcpp_bench "$first" 1 0 1 build_commit)
    echo "llama.cpp: $LCPP (commit ${commit:-unknown}; ${opts:-CMake options unknown})"
    if [ -x "$LCPP/llama-cli" ] && [ -n "$first" ]; then
        echo "llama.cpp CPU features: $("$LCPP/llama-cli" -m "$first" -p x -n 1 -no-cnv -t 1 2>&1 |
              sed -n 's/^system_info: .*| CPU : \(.*\)/\1/p')"
    fi
    echo "decode: greedy, min($STEPS, context - prompt) tokens after \"$PROMPT\";" \
         "prefill: at most $PROMPT_TOKENS tokens of $PROMPT_TEXT; $(rounds_said)"
else
    echo "greedy decode of at most $STEPS tokens after \"$PROMPT\", $(rounds_said)"
fi

for m in $ready; do
    model "$m"
    # the prompt's tokens as this engine counts them (llama2.c's -n includes them), and
    # the context, which the decode stops short of
    "$RUN" "$file" -z "$tok" -i "$PROMPT" -n 0 2>"$tmp/probe" >/dev/null
    n_prompt=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/probe")
    ctx=$(sed -n 's/.*, context \([0-9]*\);.*/\1/p' "$tmp/probe")
    n=$STEPS
    [ -n "$ctx" ] && [ $((ctx - ${n_prompt:-1})) -lt "$n" ] && n=$((ctx - ${n_prompt:-1}))
    n_pre=
    if [ -n "$LCPP" ]; then
        limit=$PROMPT_TOKENS; [ -n "$ctx" ] && [ "$ctx" -lt "$limit" ] && limit=$ctx
        n_pre=$(fit_prompt "$file" "$tok" "$limit" "$tmp/prompt")
    fi
    for t in $THREADS; do
        for f in ours theirs lcpp ours_pre lcpp_pre; do : >"$tmp/$f"; done
        i=0; for o in $OTHERS; do i=$((i + 1)); : >"$tmp/other$i"; : >"$tmp/other_pre$i"; done
        r=0
        # the engines, in an order that turns by one place each round, so that none always
        # runs first (right after another model's runs) or last
        engines="ours"; i=0
        for o in $OTHERS; do i=$((i + 1)); engines="$engines other$i"; done
        engines="$engines l2c"; [ -n "$LCPP" ] && engines="$engines lcpp"
        count=$(echo $engines | wc -w)
        while [ $r -lt "$ROUNDS" ]; do
            say "$m, $t thread(s), round $((r + 1)) of $ROUNDS"
            list=$engines; k=0
            while [ $k -lt $((r % count)) ]; do list="${list#* } ${list%% *}"; k=$((k + 1)); done
            for e in $list; do run_engine "$e"; done
            r=$((r + 1))
        done
        a=$(stat <"$tmp/ours"); b=$(stat <"$tmp/theirs")
        pa=$(stat <"$tmp/ours_pre")
        # each other build's column and RUN's ratio to it
        more=""; more_pre=""; i=0
        for o in $OTHERS; do
            i=$((i + 1))
            x=$(stat <"$tmp/other$i"); more="$more $x | $(ratio "$a" "$x") |"
            x=$(stat <"$tmp/other_pre$i"); more_pre="$more_pre $x | $(ratio "$pa" "$x") |"
        done
        if [ -n "$LCPP" ]; then
            c=$(stat <"$tmp/lcpp")
            [ "$c" != - ] || say "llama-bench gave no figure for $m at $t thread(s): its cells are -"
            echo "| $m | $t | $n | $a | $b | $c | $(ratio "$a" "$b") | $(ratio "$a" "$c") |$more" >>"$tmp/decode"
            pc=$(stat <"$tmp/lcpp_pre")
            echo "| $m | $t | ${n_pre:--} | $pa | $pc | $(ratio "$pa" "$pc") |$more_pre" >>"$tmp/prefill"
        else
            echo "| $m | $t | $a | $b | $(ratio "$a" "$b") |$more" >>"$tmp/decode"
        fi
    done
done

# the header cells of the other builds: "LABEL | vs LABEL |", and their rule
more=""; rule=""
for o in $OTHERS; do more="$more ${o%%=*} | vs ${o%%=*} |"; rule="$rule---|---|"; done
echo
if [ -n "$LCPP" ]; then
    echo "decode tokens/s:"
    echo
    echo "| model | threads | tokens | this engine | llama2.c | llama.cpp | vs llama2.c | vs llama.cpp |$more"
    echo "|---|---|---|---|---|---|---|---|$rule"
else
    echo "| model | threads | this engine tok/s | llama2.c tok/s | ratio |$more"
    echo "|---|---|---|---|---|$rule"
fi
cat "$tmp/decode" "$tmp/skipped" 2>/dev/null
if [ -n "$LCPP" ]; then
    echo
    echo "prefill tokens/s (llama2.c runs a prompt at its decode speed):"
    echo
    echo "| model | threads | prompt tokens | this engine | llama.cpp | vs llama.cpp |$more"
    echo "|---|---|---|---|---|---|$rule"
    cat "$tmp/prefill" 2>/dev/null
fi
echo
[ -n "$ONE_CPU" ] && echo "one-thread runs held to CPU $ONE_CPU: taskset -c $ONE_CPU COMMAND"
echo "commands: OMP_NUM_THREADS=T $RUN MODEL -z TOK -t 0 -n N -i \"$PROMPT\";" \
     "OMP_NUM_THREADS=T $L2C/run[q] MODEL -z TOK -t 0 -n N+PROMPT -i \"$PROMPT\""
if [ -n "$LCPP" ]; then
    echo "  OMP_NUM_THREADS=T $LCPP/llama-bench -m $MODELS_DIR/MODEL.gguf -t T -p 0 -n N -r 1;" \
         "prefill: $RUN MODEL -z TOK -t 0 -n 1 -f PROMPT; llama-bench ... -p P -n 0 -r 1"
fi
