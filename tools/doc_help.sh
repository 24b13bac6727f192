#!/bin/sh
# doc_help.sh: keep the docs' copies of the programs' --help text identical to what the
# programs print.
#
# A copy is a fenced code block (``` lines) between the lines
#     <!-- help:PROGRAM:begin -->
#     <!-- help:PROGRAM:end -->
# where PROGRAM is run, train or quantize, whose BINDIR/PROGRAM --help must print exactly
# the block's lines, or make, whose `make help` (run in the current folder) must. Usage:
#   sh tools/doc_help.sh check BINDIR DOC...    report each copy that differs (with a diff);
#                                               exit 1 if any, else 0 with a count line
#   sh tools/doc_help.sh update BINDIR DOC...   rewrite the copies in place
# POSIX sh and awk only.
set -u

usage() {
    echo "usage: sh tools/doc_help.sh check|update BINDIR DOC..." >&2
    exit 2
}

[ $# -ge 3 ] || usage
mode=$1
bindir=$2
shift 2
case $mode in
    check|update) ;;
    *) usage ;;
esac

tmpdir=${TMPDIR:-/tmp}/doc_help.$$
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' HUP INT TERM
mkdir "$tmpdir" || exit 1

[ -d "$bindir" ] || { echo "doc_help: BINDIR $bindir: no such folder" >&2; exit 2; }
for prog in run train quantize; do
    [ -x "$bindir/$prog" ] ||
        { echo "doc_help: $bindir/$prog: no such program (BINDIR holds run, train and" \
               "quantize: make all)" >&2; exit 2; }
done

status=0
copies=0
for doc in "$@"; do
    [ -f "$doc" ] || { echo "doc_help: $doc: no such file" >&2; status=1; continue; }
    programs=$(sed -n 's/^<!-- help:\([a-z_]*\):begin -->$/\1/p' "$doc")
    for prog in $programs; do
        copies=$((copies + 1))
        if ! grep -q "^<!-- help:$prog:end -->\$" "$doc"; then
            echo "doc_help: $doc: <!-- help:$prog:begin --> without its end line" >&2
            status=1
            continue
        fi
        # what the program prints, fenced
        {
            echo '```'
            if [ "$prog" = make ]; then
                # MAKEFLAGS cleared: under `make -jN` a sub-make warns on stderr that the
                # jobserver is unavailable, which would read as a failure here
                MAKEFLAGS= make -s --no-print-directory help ||
                    echo "doc_help: make help failed" >&2
            else
                "$bindir/$prog" --help || echo "doc_help: $bindir/$prog --help failed" >&2
            fi
            echo '```'
        } > "$tmpdir/want" 2>"$tmpdir/err"
        if [ -s "$tmpdir/err" ]; then
            cat "$tmpdir/err" >&2
            status=1
            continue
        fi
        awk -v begin="<!-- help:$prog:begin -->" -v end="<!-- help:$prog:end -->" '
            $0 == end { inside = 0 }
            inside { print }
            $0 == begin { inside = 1 }' "$doc" > "$tmpdir/have"
        if cmp -s "$tmpdir/want" "$tmpdir/have"; then
            continue
        fi
        if [ "$mode" = check ]; then
            line=$(grep -n "^<!-- help:$prog:begin -->\$" "$doc" | cut -d: -f1)
            echo "doc_help: $doc:$line: the copy of '$prog --help' (make: 'make help')" \
                 "differs from what it prints (- the doc, + the program; make docs-refs" \
                 "rewrites it):" >&2
            diff -u "$tmpdir/have" "$tmpdir/want" | sed '1,2d' >&2
            status=1
        else
            awk -v table="$tmpdir/want" -v begin="<!-- help:$prog:begin -->" \
                -v end="<!-- help:$prog:end -->" '
                $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
                $0 == end { skip = 0 }
                !skip { print }' "$doc" > "$tmpdir/doc" && cat "$tmpdir/doc" > "$doc" || status=1
            echo "doc_help: $doc: the copy of '$prog --help' rewritten"
        fi
    done
done
if [ "$mode" = check ] && [ "$status" -eq 0 ]; then
    echo "doc_help: $copies copies of --help in $# file(s), all current"
fi
exit "$status"
