#!/bin/sh
# tutorial_check.sh: the commands docs/tutorial.md shows, run, and their output compared
# with the text's, so the text cannot drift from the code.
#
# In docs/tutorial.md, a fenced block whose info string is `console` holds commands, each
# on a line starting with "$ ", and below each the exact standard output it prints (up to
# the next "$ " line or the end of the block). Each command runs from the repository's
# top folder with standard error discarded; its output must equal the text's byte for byte.
# Then the prose's arithmetic: a comment `<!-- check: VALUE = EXPR; ... -->` on the line
# right after a paragraph or table says that each VALUE appears in it (since the last
# blank line) and is EXPR, an awk expression, rounded to VALUE's decimals (commas in VALUE
# ignored). `NAME := EXPR` in such a comment names a value for the checks after it; pi
# is defined. So a slipped digit in the text fails like a changed output.
# Then the exercise of 3.7: its commands run as written, their counts against the answer's
# table. Then a short training run with the tutorial's settings (10 steps and a checkpoint after
# the 10th instead of its 1000 and 250, every other flag as written, the rest defaults) on
# Tiny Shakespeare, if data/tinyshakespeare.txt or ../shared/data/tinyshakespeare.txt is
# there (else it says skipped): it must train, and the tutorial's ./run command must
# generate its 80 tokens from it.
# Prints one line per check and "tutorial_check: N passed, N failed[, 1 skipped]";
# exits 1 if any failed. Usage: sh tests/tutorial_check.sh  (make tutorial-check)
set -u
cd "$(dirname "$0")/.." || exit 1
doc=docs/tutorial.md
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tutorial_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# cmd.N: the Nth command; exp.N: its expected output; line.N: its line in the doc
awk -v dir="$tmp" '
    /^```console[ \t]*$/ { inblock = 1; next }
    /^```/ && inblock { inblock = 0; next }
    inblock && /^\$ / {
        n++
        printf "%s\n", substr($0, 3) > (dir "/cmd." n); close(dir "/cmd." n)
        printf "" > (dir "/exp." n)
        printf "%d\n", NR > (dir "/line." n); close(dir "/line." n)
        next
    }
    inblock && n { print >> (dir "/exp." n) }
    END { print n + 0 > (dir "/count") }
' "$doc"

pass=0
fail=0
skip=0
count=$(cat "$tmp/count")
i=1
while [ "$i" -le "$count" ]; do
    cmd=$(cat "$tmp/cmd.$i")
    sh -c "$cmd" > "$tmp/out.$i" 2>/dev/null
    if cmp -s "$tmp/out.$i" "$tmp/exp.$i"; then
        echo "ok - tutorial: $cmd"
        pass=$((pass + 1))
    else
        echo "FAIL - tutorial: $cmd ($doc:$(cat "$tmp/line.$i")): the text (-), the code (+)"
        diff "$tmp/exp.$i" "$tmp/out.$i" | sed -n 's/^\([<>]\)/\1/p' | sed 's/^</-/; s/^>/+/'
        fail=$((fail + 1))
    fi
    i=$((i + 1))
done
if [ "$count" -lt 10 ]; then
    echo "FAIL - tutorial: only $count console commands found in $doc"
    fail=$((fail + 1))
fi

# the prose's numbers: check.N holds "LINE<TAB>VALUE<TAB>EXPR<TAB>FOUND" (FOUND 1 if
# VALUE is in the paragraph above); defs.N the definitions made up to that check
awk -v dir="$tmp" '
    /^[ \t]*$/ { para = ""; next }
    /^<!-- check: .* -->$/ {
        body = $0
        sub(/^<!-- check: /, "", body)
        sub(/ -->$/, "", body)
        k = split(body, items, /; /)
        for (i = 1; i <= k; i++) {
            item = items[i]
            if (item ~ /^[A-Za-z_][A-Za-z_0-9]* := /) {
                name = item; sub(/ := .*/, "", name)
                expr = item; sub(/^[^:]*:= /, "", expr)
                defs = defs name " = (" expr "); "
                continue
            }
            value = item; sub(/ = .*/, "", value)
            expr = item; sub(/^[^=]*= /, "", expr)
            m++
            found = index(para, value) > 0
            printf "%d\t%s\t%s\t%d\n", NR, value, expr, found > (dir "/check." m)
            close(dir "/check." m)
            printf "%s", defs > (dir "/defs." m); close(dir "/defs." m)
        }
        next
    }
    { para = para "\n" $0 }
    END { print m + 0 > (dir "/checks") }
' "$doc"
checks=$(cat "$tmp/checks")
i=1
while [ "$i" -le "$checks" ]; do
    IFS='	' read -r line value expr found < "$tmp/check.$i"
    plain=$(printf '%s' "$value" | tr -d ,)
    decimals=0
    case $plain in *.*) decimals=${plain#*.}; decimals=${#decimals} ;; esac
    program="BEGIN { pi = atan2(0, -1); $(cat "$tmp/defs.$i")"
    got=$(awk "$program printf \"%.${decimals}f\", ($expr) }" 2>&1)
    if [ "$found" -ne 1 ]; then
        echo "FAIL - tutorial: $value ($doc:$line) is not in the paragraph above its check"
        fail=$((fail + 1))
    elif [ "$got" = "$plain" ]; then
        echo "ok - tutorial: $value = $expr"
        pass=$((pass + 1))
    else
        echo "FAIL - tutorial: $value ($doc:$line): $expr is $got"
        fail=$((fail + 1))
    fi
    i=$((i + 1))
done
if [ "$checks" -lt 30 ]; then
    echo "FAIL - tutorial: only $checks numbers of the prose checked in $doc"
    fail=$((fail + 1))
fi

# the exercise of 3.7: its sh block (the one writing top.txt) run as written in a folder
# of its own, its "head H: N of 40" lines against the answer's table rows "| H | N |"
awk '/^```sh/ { block = ""; inblock = 1; next }
     /^```/ && inblock { inblock = 0; if (block ~ /top\.txt/) { printf "%s", block; exit } }
     inblock { block = block $0 "\n" }' "$doc" > "$tmp/exercise.sh"
awk '/top\.txt/ { seen = 1 } seen && /^<\/details>/ { exit }
     seen && /^\| [0-9]+ \| [0-9]+ \|$/ { print "head " $2 ": " $4 " of 40" }' "$doc" \
    > "$tmp/exercise.want"
mkdir "$tmp/exercise" && ln -s "$(pwd)/weights" "$(pwd)/run" "$tmp/exercise/" &&
    (cd "$tmp/exercise" && sh "$tmp/exercise.sh") > "$tmp/exercise.got" 2>/dev/null
if [ -s "$tmp/exercise.want" ] && cmp -s "$tmp/exercise.got" "$tmp/exercise.want"; then
    echo "ok - tutorial: the exercise of 3.7 run as written gives its answer's table"
    pass=$((pass + 1))
else
    echo "FAIL - tutorial: the exercise of 3.7 ($doc): the answer (-), the code (+)"
    diff "$tmp/exercise.want" "$tmp/exercise.got" | sed -n 's/^</-/p; s/^>/+/p'
    fail=$((fail + 1))
fi

# the training run, shortened
data=
for d in data/tinyshakespeare.txt "${SHARED_DIR:-../shared}/data/tinyshakespeare.txt"; do
    [ -f "$d" ] && { data=$d; break; }
done
if [ -z "$data" ]; then
    echo "skipped - tutorial: the training run (no data/tinyshakespeare.txt)"
    skip=1
elif ./train -d "$data" -o "$tmp/model.bin" -L 4 -C 128 -T 128 -n 10 -e 10 \
        --sample 60 > "$tmp/train.log" 2>&1 &&
     grep -q '^step     10/10 ' "$tmp/train.log" &&
     grep -q '^sample (60 tokens from a newline, greedy):$' "$tmp/train.log" &&
     ./run "$tmp/model.bin" -i "ROMEO:" -n 80 -s 1 > "$tmp/sample" 2> "$tmp/run.log" &&
     grep -q 'generation: 80 tokens' "$tmp/run.log"; then
    echo "ok - tutorial: the training run (10 steps of the tutorial's settings) and a sample"
    pass=$((pass + 1))
else
    echo "FAIL - tutorial: the training run:"
    tail -n 5 "$tmp/train.log"
    fail=$((fail + 1))
fi

if [ "$skip" -gt 0 ]; then
    echo "tutorial_check: $pass passed, $fail failed, $skip skipped"
else
    echo "tutorial_check: $pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
