#!/bin/sh
# tests/fuzz/fuzz.sh: the two loops of tests/fuzz/fuzz.mk, one target at a time.
#   fuzz.sh replay TARGET...  runs each replay binary ($FUZZ_BIN/TARGET) on its regression
#       folder and seeds; prints one line per target; on a crash, the log's tail (its last
#       "replay: PATH" line names the input). Exits 1 if any target crashed.
#   fuzz.sh fuzz TARGET...    runs each libFuzzer binary for $FUZZ_SECONDS with its corpus,
#       then prints executions, coverage (cov, ft) and crashes found per target. Exits 1
#       if any target found a crash, leak, out-of-memory or timeout.
# Folders come from the environment (fuzz.mk sets them all). It builds nothing.
set -u
mode=${1:?usage: fuzz.sh replay|fuzz TARGET...}
shift
bin=${FUZZ_BIN:?} seeds=${FUZZ_SEEDS:?} regressions=${FUZZ_REGRESSIONS:?}
logs=${FUZZ_LOGS:-$bin/logs}
mkdir -p "$logs"

# The folders a target reads: its regressions (if any), its seeds, and for fuzzing the
# working corpus first (libFuzzer adds new inputs to the first folder only).
dirs_of() {
    dirs=""
    [ -d "$regressions/$1" ] && dirs="$regressions/$1"
    [ -d "$seeds/$1" ] && dirs="$dirs $seeds/$1"
    printf '%s' "$dirs"
}

# Longest input libFuzzer makes, per target (bytes).
max_len_of() {
    case $1 in
        fuzz_checkpoint|fuzz_tokenizer_load|fuzz_gguf) echo 65536 ;;
        fuzz_encode_gpt2|fuzz_encode_llama) echo 4096 ;;
        fuzz_eval) echo 1025 ;;
        fuzz_cli) echo 512 ;;
        *) echo 256 ;;
    esac
}

status=0
if [ "$mode" = replay ]; then
    for t in "$@"; do
        dirs=$(dirs_of "$t")
        if [ -z "$dirs" ]; then
            echo "$t: no regressions or seeds to replay"
            continue
        fi
        # shellcheck disable=SC2086  # $dirs is a list of folders without spaces
        if "$bin/$t" $dirs 2>"$logs/$t.replay.log"; then
            tail -n 1 "$logs/$t.replay.log"
        else
            echo "$t: CRASHED; last lines of $logs/$t.replay.log:"
            tail -n 40 "$logs/$t.replay.log"
            status=1
        fi
    done
    exit $status
fi

[ "$mode" = fuzz ] || { echo "fuzz.sh: unknown mode '$mode' (expected replay or fuzz)"; exit 2; }
seconds=${FUZZ_SECONDS:-300} corpus=${FUZZ_CORPUS:?} artifacts=${FUZZ_ARTIFACTS:?}
printf '%-20s %12s %8s %8s %8s  %s\n' target executions cov ft crashes log
for t in "$@"; do
    mkdir -p "$corpus/$t" "$artifacts/$t"
    before=$(ls "$artifacts/$t" | wc -l)
    log="$logs/$t.fuzz.log"
    # shellcheck disable=SC2086  # folder lists and FUZZ_FLAGS are split on purpose
    "$bin/$t" -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=3 \
        -artifact_prefix="$artifacts/$t/" ${FUZZ_FLAGS:-} "$corpus/$t" $(dirs_of "$t") \
        >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
    cov=$(printf '%s' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    after=$(ls "$artifacts/$t" | wc -l)
    found=$((after - before))
    printf '%-20s %12s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$found" \
        "$log"
    if [ $rc -ne 0 ] || [ $found -ne 0 ]; then
        status=1
        echo "  $t: exit status $rc; new files in $artifacts/$t/:"
        ls -t "$artifacts/$t" | head -n "$((found > 0 ? found : 1))" | sed 's/^/    /'
        grep -E 'ERROR|SUMMARY|fuzz: |Test unit written' "$log" | head -n 8 | sed 's/^/    /'
        # -close_fd_mask hid the target's own stderr (fuzz_fail's message): run each new
        # input once more with stderr open, and show its first bytes, so that a CI log
        # alone says what failed and on what
        for f in $(ls -t "$artifacts/$t" | head -n "$found"); do
            echo "  $f, first 256 bytes:"
            head -c 256 "$artifacts/$t/$f" | od -An -c | head -n 16 | sed 's/^/    /'
            "$bin/$t" "$artifacts/$t/$f" 2>&1 |
                grep -E 'fuzz: |runtime error|ERROR: AddressSanitizer|SUMMARY' | head -n 4 |
                sed 's/^/    /'
        done
    fi
done
exit $status
