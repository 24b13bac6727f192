#!/usr/bin/env bash
# tests/faults.sh: the fault-injection pass (make faults). Every program that writes a file
# is killed (SIGKILL, injected by strace) at each of its write, rename and fsync system
# calls in turn, and what it left is checked: the destination holds the old file or the
# whole new one, never a part; the trainer's run resumes with -r (or, killed before its
# first checkpoint, starts again) and ends bit-identical to an uninterrupted run. Then, in
# a private mount namespace, a full file system (1 MiB tmpfs: ENOSPC) and a read-only one
# (EROFS): one stderr line, exit 1, no file left behind, the old file untouched.
#
# Prints one table row per injected fault and exits 1 if any row failed. Needs strace;
# the namespace part needs `unshare --mount` with privileges. Each part says when it is
# skipped. Usage: tests/faults.sh [BUILD_DIR] (default build; the programs are BUILD_DIR/run,
# BUILD_DIR/train and BUILD_DIR/quantize).
set -u
B=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
RUN=$(cd "$here" && realpath "$B/run")
TRAIN=$(cd "$here" && realpath "$B/train")
QUANTIZE=$(cd "$here" && realpath "$B/quantize")
MODEL=$here/weights/model.bin
TOKENIZER=$here/weights/tokenizer.bin
TINY="-v 300 -L 1 -C 16 -H 2 -T 8 -B 4 -n 3 -w 1 -e 1"   # 3 steps, a checkpoint after each
export OMP_NUM_THREADS=1
failed=0
rows=0

work=$(mktemp -d "${TMPDIR:-/tmp}/faults.XXXXXX")
trap 'rm -rf "$work"' EXIT
head -c 20000 "$here/weights/README.md" > "$work/text.txt"   # any text of the repository

row() {   # point, left, recovered, identical, ok
    rows=$((rows + 1))
    [ "$5" = ok ] || failed=$((failed + 1))
    printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$5"
}

# The files a folder holds, on one line, text.txt and the reference files left out.
left_in() { (cd "$1" && ls -A | grep -v -e '^text.txt$' -e '^ref' | tr '\n' ' ' | sed 's/ $//'); }

# The system calls strace traces and injects for a kind of call: rename() is the rename
# system call on x86-64 and renameat (or renameat2) elsewhere, such as aarch64; '?' takes
# the names this machine has.
calls() { if [ "$1" = rename ]; then echo '?rename,?renameat,?renameat2'; else echo "$1"; fi; }

# Count the calls of one kind a command makes (strace -c would count threads too).
count_calls() {   # write | rename | fsync, command...
    local call=$1; shift
    strace -f -qq -o "$work/trace" -e trace="$(calls "$call")" "$@" > /dev/null 2>&1
    grep -cE "(^|[ ])$call(at2?)?\(" "$work/trace"
}

if ! command -v strace > /dev/null || ! strace -qq -o /dev/null true 2> /dev/null; then
    echo "faults: skipped: strace is missing or cannot trace here (the kill points)"
else
    echo "| point | what was left | recovered | identical | result |"
    echo "|---|---|---|---|---|"
    # ---- train: the uninterrupted reference run
    mkdir -p "$work/t"
    (cd "$work/t" && cp ../text.txt . && "$TRAIN" -d text.txt -o m.bin -z tok.bin $TINY \
        > /dev/null && mv m.bin ref.bin && mv tok.bin ref_tok.bin && rm -f m.bin.state) || {
        echo "faults: the reference training run failed"; exit 1; }
    for call in write rename fsync; do
        (cd "$work/t" && rm -f m.bin* tok.bin*)
        n=$(cd "$work/t" && count_calls $call "$TRAIN" -d text.txt -o m.bin -z tok.bin $TINY)
        for k in $(seq 1 "$n"); do
            (cd "$work/t" && rm -f m.bin* tok.bin*)
            (cd "$work/t" && strace -f -qq -o /dev/null -e trace="$(calls $call)" \
                -e inject="$(calls $call)":signal=KILL:when=$k \
                "$TRAIN" -d text.txt -o m.bin -z tok.bin $TINY > /dev/null 2>&1)
            left=$(left_in "$work/t")
            # resume; a run killed before its first checkpoint is started again instead
            out=$(cd "$work/t" && "$TRAIN" -r -d text.txt -o m.bin -z tok.bin 2>&1)
            rc=$?
            how="-r"
            if [ $rc -ne 0 ] && echo "$out" | grep -q "nothing to resume"; then
                out=$(cd "$work/t" && "$TRAIN" -d text.txt -o m.bin -z tok.bin $TINY 2>&1)
                rc=$?
                how="started again"
            fi
            echo "$out" | grep -q "finished the interrupted save" && how="$how, finished a save"
            same=no
            cmp -s "$work/t/m.bin" "$work/t/ref.bin" && cmp -s "$work/t/tok.bin" \
                "$work/t/ref_tok.bin" && same=yes
            result=ok
            [ $rc -eq 0 ] && [ $same = yes ] || result=FAILED
            [ -z "$(cd "$work/t" && ls -A | grep -e '\.tmp' -e '\.lock')" ] ||
                { result=FAILED; how="$how; temporaries left: $(left_in "$work/t")"; }
            row "train, kill at $call $k of $n" "${left:-nothing}" "$how (exit $rc)" "$same" \
                "$result"
        done
    done

    # ---- quantize and run --attn-map: the old file stays whole until the new one replaces it
    mkdir -p "$work/q"
    "$QUANTIZE" "$MODEL" "$work/q/ref.bin" 2> /dev/null
    "$RUN" "$MODEL" -z "$TOKENIZER" -i "ROMEO:" -n 8 -s 1 --attn-map "$work/q/ref.html" \
        > /dev/null 2>&1
    echo old > "$work/q/old"
    # where the file system makes files of no name (O_TMPFILE), a temporary has a name only
    # between its link and its rename: a kill at any other call leaves no PATH.tmp-XXXXXX
    # (asked of the file system by python3 where there is one, not of the programs)
    unnamed=no
    if command -v python3 > /dev/null; then
        python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY))' \
            "$work/q" 2> /dev/null && unnamed=yes
    else
        strace -f -qq -o "$work/trace" -e trace=open,openat "$QUANTIZE" "$MODEL" \
            "$work/q/probe.bin" > /dev/null 2>&1 &&
            grep -q 'O_WRONLY|O_TMPFILE, 0600) = [0-9]' "$work/trace" && unnamed=yes
        rm -f "$work/q/probe.bin"
    fi
    echo "faults: temporaries of no name (O_TMPFILE) here: $unnamed"
    for prog in quantize map; do
        for call in write rename fsync; do
            if [ $prog = quantize ]; then
                set -- "$QUANTIZE" "$MODEL" "$work/q/out.bin"; out=$work/q/out.bin
                ref=$work/q/ref.bin
            else
                set -- "$RUN" "$MODEL" -z "$TOKENIZER" -i "ROMEO:" -n 8 -s 1 --attn-map \
                    "$work/q/out.html"; out=$work/q/out.html; ref=$work/q/ref.html
            fi
            cp "$work/q/old" "$out"
            n=$(count_calls $call "$@")
            for k in $(seq 1 "$n"); do
                cp "$work/q/old" "$out"
                rm -f "$work"/q/*.tmp-* "$work"/q/*.lock
                strace -f -qq -o /dev/null -e trace="$(calls $call)" \
                    -e inject="$(calls $call)":signal=KILL:when=$k \
                    "$@" > /dev/null 2>&1
                state=part
                cmp -s "$out" "$work/q/old" && state=old
                cmp -s "$out" "$ref" && state=new
                temps=$(cd "$work/q" && ls -A | grep -e '\.tmp-' -e '\.lock' | tr '\n' ' ')
                result=ok
                [ $state = part ] && result=FAILED
                [ $unnamed = yes ] && [ $call != rename ] && case "$temps" in
                    *.tmp-*) result=FAILED ;; esac
                row "$prog, kill at $call $k of $n" "$(basename "$out") $state${temps:+; $temps}" \
                    "-" "-" "$result"
            done
        done
    done
fi

# ---- a full and a read-only file system, in a private mount namespace
if ! unshare --mount true 2> /dev/null; then
    echo "faults: skipped: unshare --mount needs privileges here (ENOSPC and EROFS)"
else
    cat > "$work/ns.sh" << 'EOF'
set -u
work=$1; TRAIN=$2; QUANTIZE=$3; RUN=$4; MODEL=$5; TOKENIZER=$6; TINY=$7
check() {   # name, expected exit, stderr lines (run adds its load and speed lines),
            # folder, old file or "", command...
    local name=$1 want=$2 want_lines=$3 dir=$4 old=$5; shift 5
    local before="" files
    [ -n "$old" ] && before=$(cksum < "$old")
    files=$(ls -A "$dir")
    "$@" > /dev/null 2> "$work/err"
    local rc=$? lines
    lines=$(wc -l < "$work/err")
    local temps=""
    [ "$(ls -A "$dir")" = "$files" ] || temps=$(ls -A "$dir" | tr '\n' ' ')   # new files
    local result=ok
    [ $rc -eq "$want" ] && [ "$lines" -eq "$want_lines" ] && [ -z "$temps" ] || result=FAILED
    [ -n "$old" ] && [ "$(cksum < "$old")" != "$before" ] && result=FAILED
    printf '| %s | exit %d, %d line%s: %s%s | - | - | %s |\n' "$name" $rc "$lines" \
        "$([ "$lines" -eq 1 ] || echo s)" "$(tail -n 1 "$work/err" | head -c 150)" \
        "${temps:+; left: $temps}" "$result"
}
mkdir -p "$work/full" "$work/ro"
mount -t tmpfs -o size=1m tmpfs "$work/full" || exit 3
echo old > "$work/full/out.bin"
check "quantize to a full file system (ENOSPC)" 1 1 "$work/full" "$work/full/out.bin" \
    "$QUANTIZE" "$MODEL" "$work/full/out.bin"
check "--attn-map to a full file system" 1 3 "$work/full" "" \
    "$RUN" "$MODEL" -z "$TOKENIZER" -i "ROMEO:" -n 200 -s 1 --attn-map "$work/full/map.html"
rm -f "$work/full/out.bin"
cp "$work/text.txt" "$work/full/text.txt"
# a model whose checkpoint does not fit: 2 layers of width 128 is 2.4 MB of parameters
check "train to a full file system" 1 1 "$work/full" "" "$TRAIN" -d "$work/full/text.txt" \
    -o "$work/full/m.bin" -z "$work/full/tok.bin" -v 300 -L 2 -C 128 -H 2 -T 8 -B 4 -n 2 -e 1
echo old > "$work/ro/out.bin"
mount -t tmpfs -o size=1m,ro tmpfs "$work/ro" 2> /dev/null ||
    mount -o remount,ro "$work/ro" 2> /dev/null || exit 3
check "quantize to a read-only file system (EROFS)" 1 1 "$work/ro" "" \
    "$QUANTIZE" "$MODEL" "$work/ro/out.bin"
check "train to a read-only file system" 1 1 "$work/ro" "" "$TRAIN" -d "$work/text.txt" \
    -o "$work/ro/m.bin" -z "$work/ro/tok.bin" $TINY
check "--attn-map to a read-only file system" 1 1 "$work/ro" "" \
    "$RUN" "$MODEL" -z "$TOKENIZER" -i "ROMEO:" -n 4 -s 1 --attn-map "$work/ro/map.svg"
EOF
    ns_out=$(unshare --mount bash "$work/ns.sh" "$work" "$TRAIN" "$QUANTIZE" "$RUN" "$MODEL" \
             "$TOKENIZER" "$TINY")
    echo "$ns_out"
    rows=$((rows + $(echo "$ns_out" | grep -c '^|')))
    failed=$((failed + $(echo "$ns_out" | grep -c 'FAILED')))
fi
echo "faults: $rows points, $failed failed"
[ $failed -eq 0 ]
