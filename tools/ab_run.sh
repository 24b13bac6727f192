#!/bin/sh
# ab_run.sh: two builds of ./run end to end, in alternated ABBA pairs (A then B, then B
# then A, ...), so that the machine's drift from minute to minute falls on both alike and
# neither always runs first; prints the median of the pairs' B/A speed ratios. For changes
# of a few percent that two runs in sequence cannot show (docs/performance.md, How to
# measure).
#
# Usage: sh tools/ab_run.sh A_RUN B_RUN MODEL TOKENIZER PROMPT_FILE
#   A_RUN, B_RUN: two run programs (e.g. ../before/build/run and build/run, after
#   `git worktree add ../before HEAD~1` and make there); MODEL, TOKENIZER: as run's
#   arguments; PROMPT_FILE: the prompt's text (e.g. tools/bench_prompt.txt).
# Environment: PAIRS (40), THREADS (1: held to ONE_CPU, by default the first CPU this may
#   run on, as tools/compare.sh holds one-thread runs), WHAT (prompt: the prompt's tokens/s
#   with -n 1; decode: the generation's tokens/s), N (decode: tokens generated, 128).
# Prints the median B/A ratio with its quartiles and each build's mean tokens/s; above 1:
# B faster. Asserts nothing.
set -eu
[ -f tools/one_cpu.sh ] || { echo "ab_run.sh: run it from the repository's top folder (got $(pwd))" >&2; exit 2; }
usage="usage: sh tools/ab_run.sh A_RUN B_RUN MODEL TOKENIZER PROMPT_FILE"
[ $# -eq 5 ] || { echo "ab_run: expected 5 arguments, got $#; $usage" >&2; exit 2; }
a_run=$1 b_run=$2 model=$3 tok=$4 prompt_file=$5
for f in "$a_run" "$b_run"; do
    [ -f "$f" ] && [ -x "$f" ] || { echo "ab_run: $f: not an executable run program" >&2; exit 2; }
done
case $a_run in */*) ;; *) a_run=./$a_run;; esac   # a bare name would be looked up in PATH
case $b_run in */*) ;; *) b_run=./$b_run;; esac
for f in "$model" "$tok" "$prompt_file"; do
    [ -f "$f" ] && [ -r "$f" ] || { echo "ab_run: $f: cannot read it (expected a file)" >&2; exit 2; }
done
pairs=${PAIRS:-40} threads=${THREADS:-1} what=${WHAT:-prompt} n=${N:-128}
case $pairs in ''|*[!0-9]*|0) echo "ab_run: PAIRS must be a positive integer (got '$pairs')" >&2; exit 2;; esac
case $threads in ''|*[!0-9]*|0) echo "ab_run: THREADS must be a positive integer (got '$threads')" >&2; exit 2;; esac
case $n in ''|*[!0-9]*|0) echo "ab_run: N must be a positive integer (got '$n')" >&2; exit 2;; esac
case $what in
    prompt) steps=1 field='/^prompt:/ {gsub(/[,;]/, ""); print $4; exit}';;
    decode) steps=$n field='/generation:/ {gsub(/[,;]/, ""); print $9; exit}';;
    *) echo "ab_run: WHAT must be prompt or decode (got '$what')" >&2; exit 2;;
esac
pin=
if [ "$threads" = 1 ]; then
    . tools/one_cpu.sh   # one_cpu
    one_cpu ab_run
    pin=${ONE_CPU:+taskset -c $ONE_CPU}
fi
prompt=$(cat "$prompt_file")
# one run of program $1: its stderr (the speed line, or why it failed) on stdout
run_once() { $pin "$1" "$model" -z "$tok" -i "$prompt" -n "$steps" -t 0 -T "$threads" 2>&1 >/dev/null; }
# one run's tokens/s (nothing if it failed: the pair is then left out)
speed() { run_once "$1" | awk "$field"; }
for f in "$a_run" "$b_run"; do   # each once first: a run that fails says why, here
    err=$(run_once "$f") ||
        { echo "ab_run: $f failed: $(printf '%s\n' "$err" | tail -n 1)" >&2; exit 1; }
done
echo "ab_run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null |
      sed 's/.*: //'), $what tokens/s, $pairs ABBA pairs at $threads thread(s)${pin:+ ($pin)}:" \
     "A $a_run, B $b_run"
i=0
while [ $i -lt "$pairs" ]; do
    kill -0 $$ 2>/dev/null || break   # the script was ended (SIGTERM): its loop ends too
    i=$((i + 1))
    if [ $((i % 2)) = 1 ]; then a=$(speed "$a_run"); b=$(speed "$b_run")
    else b=$(speed "$b_run"); a=$(speed "$a_run"); fi
    [ -n "$a" ] && [ -n "$b" ] && echo "$a $b"
done | awk '{ print $2 / $1, $1, $2 }' | sort -n | awk -v what="$what" '
    { r[NR] = $1; sa += $2; sb += $3 }
    END {
        if (NR == 0) { print "ab_run: no pair ran (see either run alone)" > "/dev/stderr"; exit 1 }
        printf "median B/A %.3f (quartiles %.3f-%.3f) of %d pairs; mean %s tokens/s A %.1f, B %.1f\n",
               r[int((NR + 1) / 2)], r[int((NR + 3) / 4)], r[int((3 * NR + 3) / 4)], NR,
               what, sa / NR, sb / NR
    }'
