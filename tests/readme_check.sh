#!/bin/sh
# readme_check.sh: every command README.md shows, run exactly as written (the same words,
# the same defaults) in a copy of the repository's files, as a user would on a fresh clone.
#
# The commands are the lines of README.md's fenced `sh` blocks (a line ending in "\" joined
# to the next), in order, each with `sh -c` from the copy's top folder: each must exit 0,
# and some must show more (below). `make run`'s text must be the one README.md prints
# under it. What a user downloads is copied from ../shared instead, when there: Tiny
# Shakespeare (the same file), llama2.c's tokenizer.bin (the same file), and stand-ins of
# the same formats for the TinyStories models (../shared's s15m.bin and s15m-q8_0.gguf, of
# stories15M's shape with random weights); without ../shared, each command that needs one
# says skipped. Skipped always: `make test` (make check runs after it) and the GGUF
# conversion, which needs a llama.cpp checkout. A command this script does not know still
# runs and must exit 0, so a new README command is checked from the day it is written.
# Prints one line per command and "readme_check: N passed, N failed, N skipped"; exits 1
# if any failed. About 3 minutes on two cores (two training runs of 300 steps).
# Usage: sh tests/readme_check.sh  (make readme-check)
set -u
cd "$(dirname "$0")/.." || exit 1
# a user's shell, not make's: a make run under make check would say which folder it left
unset MAKEFLAGS MAKELEVEL MFLAGS MAKEOVERRIDES
here=$(pwd)
shared=${SHARED_DIR:-$here/../shared}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/readme_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# the copy: the repository's files without what a build or a run made (a fresh clone's)
mkdir "$tmp/repo" && tar -C "$here" --exclude=./build --exclude=./data --exclude=./.git \
    --exclude=./run --exclude=./train --exclude=./quantize --exclude=./tutorial \
    -cf - . | tar -C "$tmp/repo" -xf - || { echo "FAIL - readme: copying the files"; exit 1; }

# cmd.N: the Nth command (continuation lines joined); line.N: its line in README.md
awk -v dir="$tmp" '
    /^```sh[ \t]*$/ { inblock = 1; next }
    /^```/ && inblock { inblock = 0; next }
    inblock {
        if (!joining) { n++; start = NR; text = "" }
        line = $0
        joining = sub(/\\$/, "", line)
        text = text line
        if (!joining) {
            print text > (dir "/cmd." n); close(dir "/cmd." n)
            print start > (dir "/line." n); close(dir "/line." n)
        }
    }
    END { print n + 0 > (dir "/count") }
' README.md

# the text README.md shows under `make run`: its block's lines but the command (make's
# echo, checked apart) and stderr's load and speed lines
awk '/prints the command it runs/ { want = 1 }
     /^```$/ && want == 1 { want = 2; next }
     /^```$/ && want == 2 { exit }
     want == 2 && n++ == 0 { print > "/dev/stderr" }
     want == 2 && n > 1 && !/^run: / && !/^prompt: / { print }' README.md \
    > "$tmp/make_run.txt" 2> "$tmp/make_run_command.txt"

pass=0
fail=0
skip=0
ok() { echo "ok - readme: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - readme: $1"; fail=$((fail + 1)); }
skipped() { echo "skipped - readme: $1"; skip=$((skip + 1)); }
# stand-in SOURCE for a download: copied to the copy's TARGET, or 1 if SOURCE is missing
fetch() { [ -f "$1" ] && mkdir -p "$tmp/repo/$(dirname "$2")" && cp "$1" "$tmp/repo/$2"; }

count=$(cat "$tmp/count")
absent=
i=1
while [ "$i" -le "$count" ]; do
    cmd=$(cat "$tmp/cmd.$i")
    where="README.md:$(cat "$tmp/line.$i")"
    i=$((i + 1))
    case "$cmd" in
        "make test"*) skipped "$cmd ($where): make check runs after it"; continue ;;
        *gguf_gpt2.py*|*"./run model.gguf"*)
            skipped "$cmd ($where): needs a llama.cpp checkout (gguf-py)"; continue ;;
        "curl "*tinyshakespeare.txt*) src=$shared/data/tinyshakespeare.txt
            dst=data/tinyshakespeare.txt ;;
        "curl "*stories15M.bin*) src=$shared/testdata/llama2c/s15m.bin dst=data/stories15M.bin ;;
        "curl "*llama2c_tokenizer.bin*) src=$shared/testdata/llama2c/tokenizer.bin
            dst=data/llama2c_tokenizer.bin ;;
        "curl "*) bad "$cmd ($where): a download this script has no copy of"; continue ;;
        *stories15M-q8_0.gguf*) fetch "$shared/testdata/gguf/s15m-q8_0.gguf" stories15M-q8_0.gguf ||
            { skipped "$cmd ($where): no ../shared (its stand-in)"; continue; } ;;
        *) src= ;;
    esac
    if [ -n "$src" ]; then   # a download: its copy, or every later command that reads it skips
        if fetch "$src" "$dst"; then ok "$cmd ($where): ${src#"$shared"/} copied instead"
        else skipped "$cmd ($where): no ../shared, no copy of it"; absent="$absent $dst"; fi
        continue
    fi
    # without a download, what reads it (and, without the text, whatever reads data/) skips
    missing=
    for f in $absent; do case "$cmd" in *"$f"*) missing=$f ;; esac; done
    case " $absent " in *" data/tinyshakespeare.txt "*)
        case "$cmd" in "mkdir -p data") ;; *data/*) missing=${missing:-data/tinyshakespeare.txt} ;;
        esac ;;
    esac
    if [ -n "$missing" ]; then skipped "$cmd ($where): $missing not downloaded"; continue; fi
    # the examples' prose: "`make` first builds the programs"
    case "$cmd" in "./"*) prog=${cmd#./}; prog=${prog%% *}
        if [ ! -x "$tmp/repo/$prog" ] &&
           [ -f "$tmp/repo/$prog.c" -o -f "$tmp/repo/trainer/$prog.c" ]; then
            if (cd "$tmp/repo" && make > "$tmp/make.log" 2>&1); then ok "make (before $cmd)"
            else bad "make (before $cmd): $(tail -n 3 "$tmp/make.log")"; fi
        fi ;;
    esac
    began=$(date +%s)
    (cd "$tmp/repo" && sh -c "$cmd") > "$tmp/out" 2> "$tmp/err"
    code=$?
    where="$where, $(( $(date +%s) - began )) s"
    if [ "$code" -ne 0 ]; then
        bad "$cmd ($where): exit $code: $(tail -n 3 "$tmp/err")"
        continue
    fi
    # what the command must show beyond exit 0
    why=
    case "$cmd" in
        "make run"*)
            lines=$(wc -l < "$tmp/make_run.txt")
            grep -qxF "$(cat "$tmp/make_run_command.txt")" "$tmp/out" ||
                why="make's command is not README.md's: $(cat "$tmp/make_run_command.txt")"
            { [ "$lines" -gt 5 ] && tail -n "$lines" "$tmp/out" | cmp -s - "$tmp/make_run.txt"; } ||
                why="its text is not README.md's: $(tail -n "$lines" "$tmp/out" |
                     diff "$tmp/make_run.txt" - | head -n 4)" ;;
        *--attn-map*)
            f=${cmd##*--attn-map }; f=${f%% *}
            grep -q "<html" "$tmp/repo/$f" 2>/dev/null || why="no page written to $f" ;;
        *--eval*--ref*) grep -q "^vs ${cmd##*--ref }: KL" "$tmp/out" || why="no comparison line" ;;
        *--eval*) grep -q "^loss: .* bits/char" "$tmp/out" && grep -q "^vs exact: KL" "$tmp/out" ||
            why="no loss and comparison lines" ;;
        "./train "*)
            out=${cmd#*-o }; out=${out%% *}
            [ -s "$tmp/repo/$out" ] && [ -s "$tmp/repo/$(dirname "$out")/tokenizer.bin" ] ||
                why="no $out and tokenizer.bin beside it" ;;
        "./quantize "*) out=${cmd##* }; [ -s "$tmp/repo/$out" ] || why="no $out" ;;
    esac
    case "$cmd" in   # a run's -n N: N tokens generated
        "./run "*" -n "*) n=${cmd##*-n }; n=${n%% *}
            grep -q "generation: $n tokens" "$tmp/err" ||
                why="$why; not $n tokens: $(tail -n 1 "$tmp/err")" ;;
    esac
    if [ -z "$why" ]; then ok "$cmd ($where)"; else bad "$cmd ($where): ${why#; }"; fi
done
if [ "$count" -lt 15 ]; then bad "only $count commands found in README.md's sh blocks"; fi
echo "readme_check: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
