#!/bin/sh
# doc_names.sh: every function, type or macro of the project that a comment or a doc
# names must exist, so a rename cannot leave a comment pointing at nothing.
#
# A name is a word that starts with one of the project's module prefixes and an
# underscore (attention_, model_, block_, kernels_, ...; the list is MODULES below), or is
# CamelCase with a project prefix (Block..., Train..., Attention..., ...). Names are
# collected from the comments of every .c and .h file (tests and tools included) and from
# the code spans (`...`) of the Markdown files given; each must appear in the code of some
# .c or .h file, comments and string literals removed. A name that stands for something
# outside the code (a make target, a flag) is not in this form, so it is not checked.
#
# Usage: sh tools/doc_names.sh FILE.md...   Exit 0 if every name exists, else 1 after one
# line per missing name: "doc_names: FILE:LINE: NAME: not defined in the code".
set -u
# each document must exist; it is read from where the user is (the check runs from the
# repository's top)
for d in "$@"; do
    [ -f "$d" ] || { echo "doc_names: $d: no such file (expected a Markdown file)" >&2; exit 1; }
done
here=$(pwd)
cd "$(dirname "$0")/.." || exit 1
MODULES='attention|attnmap|block|bpe|checkpoint|cli|eval|generate|kernels|model|os|quant|sampler|tokenizer|train|trainer|unicode|hash|generation'
TYPES='Attention|Block|Train|Trainer|Model|Kernels|Quant|Checkpoint|Tokenizer|Sampler|Generation|Generate|AttnMap|Eval|Save|Bpe|Cli|Run|KVCache|LayerWeights|Weights|Config|Matrix'
sources=$(find . -path ./build -prune -o \( -name '*.c' -o -name '*.h' \) -print | sort)
tmp=${TMPDIR:-/tmp}/doc_names.$$
trap 'rm -f "$tmp".*' EXIT

# The code of every source with comments and string literals blanked: the defined words.
for f in $sources; do cat "$f"; echo; done | awk '
    BEGIN { c = 0 }
    {
        out = ""; i = 1; n = length($0); s = 0
        while (i <= n) {
            two = substr($0, i, 2); ch = substr($0, i, 1)
            if (c) { if (two == "*/") { c = 0; i += 2 } else i++; continue }
            if (s) { if (ch == "\\") i += 2; else { if (ch == "\"") s = 0; i++ }; continue }
            if (two == "/*") { c = 1; i += 2; continue }
            if (two == "//") break
            if (ch == "\"") { s = 1; i++; out = out " "; continue }
            if (ch == "\x27") { j = index(substr($0, i + 1), "\x27"); i += j + 1; continue }
            out = out ch; i++
        }
        print out
    }' | tr -c 'A-Za-z0-9_' '\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$tmp.defined"

# Names in comments: FILE:LINE NAME, from the comment text of each source.
for f in $sources; do
    awk -v file="$f" '
        BEGIN { c = 0 }
        {
            text = ""; i = 1; n = length($0); s = 0
            while (i <= n) {
                two = substr($0, i, 2); ch = substr($0, i, 1)
                if (c) { if (two == "*/") { c = 0; i += 2 } else { text = text ch; i++ }; continue }
                if (s) { if (ch == "\\") i += 2; else { if (ch == "\"") s = 0; i++ }; continue }
                if (two == "/*") { c = 1; i += 2; continue }
                if (two == "//") { text = text substr($0, i + 2); break }
                if (ch == "\"") { s = 1; i++; continue }
                i++
            }
            if (text != "") print file ":" FNR "\t" text
        }' "$f"
done > "$tmp.comments"
# Names in the docs' code spans.
for f in "$@"; do
    case $f in /*) path=$f;; *) path=$here/$f;; esac
    awk -v file="$f" '
        /^```/ { fence = !fence; next }
        !fence {
            line = $0
            while (match(line, /`[^`]+`/)) {
                print file ":" FNR "\t" substr(line, RSTART + 1, RLENGTH - 2)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$path"
done > "$tmp.docs"

# The names of the repository's files without their endings (train_model, ...).
find . -path ./build -prune -o -path ./.git -prune -o -type f -print | sed 's|.*/||; s|\..*||' | sort -u > "$tmp.files"
cat "$tmp.comments" "$tmp.docs" | awk -F '\t' -v modules="$MODULES" -v types="$TYPES" \
    -v list="$tmp.files" '
    BEGIN { while ((getline f < list) > 0) files[f] = 1 }
    {
        text = $2
        while (match(text, /[A-Za-z_][A-Za-z0-9_]*/)) {
            word = substr(text, RSTART, RLENGTH)
            before = RSTART > 1 ? substr(text, RSTART - 1, 1) : ""
            after = substr(text, RSTART + RLENGTH, 1)
            text = substr(text, RSTART + RLENGTH)
            if (before == "." || before == "-" || before == "/" || after == ".") continue
            if (word in files) continue   # a file named without its ending
            if (word ~ ("^(" modules ")_[a-z0-9_]*[a-z0-9]$") && word ~ /_[a-z]/ ||
                word ~ ("^(" types ")[A-Z][A-Za-z0-9]*$"))
                print $1 "\t" word
        }
    }' | sort -u > "$tmp.named"

status=0
awk -F '\t' -v defined="$tmp.defined" '
    BEGIN { while ((getline d < defined) > 0) known[d] = 1 }
    !($2 in known) { print "doc_names: " $1 ": " $2 ": not defined in the code"; bad = 1 }
    END { exit bad }' "$tmp.named" || status=1
total=$(cut -f 2 "$tmp.named" | sort -u | wc -l | tr -d ' ')
[ $status -eq 0 ] && echo "doc_names: $total names in comments and docs, all defined"
exit $status
