#!/bin/sh
# Runs each test binary given as an argument, prints its output, and ends with one
# line "all tests: N passed, N failed[, N skipped]" summed over the binaries' summary
# lines (skipped counts the groups of checks a binary could not run, e.g. without
# ../shared, so that a quiet skip never reads as a full pass).
# A binary's standard error (the messages of the failure paths its checks provoke, which
# read like errors) is shown only when it fails or crashes, after its output.
# Exits non-zero if any binary failed (or crashed).
status=0
total_pass=0
total_fail=0
total_skip=0
err=$(mktemp "${TMPDIR:-/tmp}/run_all.XXXXXX") || exit 1
trap 'rm -f "$err"' EXIT
trap 'exit 1' HUP INT TERM
for t in "$@"; do
    out=$($WRAP "$t" 2>"$err")   # WRAP: an optional command to run each binary under (valgrind)
    rc=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
    p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ -n "$p" ] && total_pass=$((total_pass + p))
    [ -n "$f" ] && total_fail=$((total_fail + f))
    k=$(printf '%s' "$line" | sed -n -E 's/.* ([0-9]+) skipped.*/\1/p')
    [ -n "$k" ] && total_skip=$((total_skip + k))
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        if [ -s "$err" ]; then
            echo "$t: its standard error:"
            cat "$err"
        fi
        echo "$t: exited with status $rc"
        status=1
        [ -z "$line" ] && total_fail=$((total_fail + 1))
    fi
done
if [ "$total_skip" -gt 0 ]; then
    echo "all tests: $total_pass passed, $total_fail failed, $total_skip skipped"
else
    echo "all tests: $total_pass passed, $total_fail failed"
fi
exit $status
