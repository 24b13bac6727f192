#!/usr/bin/env bash
# tools/web_check.sh: the page (make web, web/) in headless Chromium against ./run (make
# web-check; make check). Serves BUILD_DIR/web with python3 -m http.server on a free local
# port (and its one-file form, attn.html, from file://) and opens deep links with
# tools/cdp_page.py, which waits for the page's
# <body data-state> to say the run is over (--dump-dom cannot wait for a Worker). Checks:
#  - greedy (-t 0), seeded sampling (-t 0.8 -s 7), greedy with another attention
#    (--attn window:w=16,sinks=2) and after a prompt of more bytes than the context has
#    positions: #output is ./run's stdout for the same flags, byte for
#    byte; one heatmap cell (#probe) is the weight ./run --attn-map writes for it in its
#    SVG (to its 4 decimals); the page's bits/char on its validation text is ./run
#    --eval's on the same text (to 4 decimals);
#  - an empty prompt, a prompt longer than the context and an absurd -n each get their
#    one-line message in #message, and the page says it is done (no frozen tab);
#  - no console message and no uncaught exception on any load; nothing wider than the
#    window at 1400 and 600 px, whose screenshots it writes to BUILD_DIR/web-check/ (look
#    at them: clipping a script cannot see shows there).
#  - the Tutorial panel: every step ./tutorial --help lists (but svg) runs in the page
#    (#step=NAME), its #tutorial-out ./tutorial NAME's stdout byte for byte (tokens with
#    an argument); the C shown for attend is the functions' text in the sources;
#    screenshots tutorial-1400.png and tutorial-600.png.
# It prints the page's decode tokens/s (one thread of WebAssembly) beside ./run's.
# Chromium is Debian's chromium (tools/chromium.sh); without it, skipped. About 2 minutes (a Chromium
# per tutorial step).
# Usage: tools/web_check.sh [BUILD_DIR] (default build: BUILD_DIR/run, BUILD_DIR/web).
set -u
B=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
RUN=$(cd "$here" && realpath "$B/run")
PAGE=$(cd "$here" && realpath "$B/web")
SHOTS="$(cd "$here" && realpath "$B")/web-check"
LOAD_TIMEOUT=90      # s for one deep link's run; the greedy one takes about 3 s

WHAT="web check"
. "$here/tools/chromium.sh"   # $browser, or skipped

work=$(mktemp -d "${TMPDIR:-/tmp}/web_check.XXXXXX")
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
chromium_home "$work"
mkdir -p "$SHOTS"
passed=0
failed=0
ok() { echo "ok - web check: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL - web check: $1"; failed=$((failed + 1)); }

# the page's folder on a free port (the server prints the one it got)
(cd "$PAGE" && exec python3 -u -m http.server 0 --bind 127.0.0.1) >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
    port=$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$work/server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAIL - web check: python3 -m http.server did not start:"
    cat "$work/server.log"
    exit 1
fi
base="http://127.0.0.1:$port/"

# load HASH WIDTH NAME: opens the deep link; $work/NAME.out has one JSON line per value
# (the output text, #message, #probe, data-decode, the page's and the window's widths),
# then any console lines. Returns 1 when the page never said it was done.
load() {
    local shot=()
    [ -z "${4:-}" ] || shot=(--screenshot "$4")
    python3 "$here/tools/cdp_page.py" "$browser" "${LOAD_BASE:-$base}#$1" --width "$2" \
        --timeout "$LOAD_TIMEOUT" \
        --wait "['done', 'error'].includes(document.body.dataset.state)" \
        --eval "document.getElementById('output').textContent" \
        --eval "document.getElementById('message').textContent" \
        --eval "document.getElementById('probe').textContent" \
        --eval "document.body.dataset.decode || ''" \
        --eval "document.documentElement.scrollWidth + ' ' + window.innerWidth" \
        --eval "document.getElementById('bits').textContent" \
        --eval "VALIDATION_TEXT" \
        "${shot[@]}" >"$work/$3.out" 2>&1
}
# field NAME N: the Nth value (1-based) of the last load of NAME, decoded from JSON
field() {
    sed -n "${2}p" "$work/$1.out" | python3 -c 'import json, sys; sys.stdout.write(json.loads(sys.stdin.read()))'
}
console_of() { grep -E '^(console|timeout|failed):' "$work/$1.out" || true; }

# url-encoded TEXT
quote() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# One run compared: NAME PROMPT N T SEED LAYER HEAD QUERY KEY WIDTH SCREENSHOT ATTN
# (SCREENSHOT and ATTN may be empty: none, and the model's own attention)
compare() {
    local name=$1 prompt=$2 n=$3 t=$4 s=$5 cell="$6,$7,$8,$9" width=${10} attn=()
    local hash="prompt=$(quote "$prompt")&n=$n&t=$t&s=$s&probe=$cell&bits=1"
    [ -z "${12}" ] || { attn=(--attn "${12}"); hash="$hash&attn=$(quote "${12}")"; }
    (cd "$here" && "$RUN" weights/model.bin -i "$prompt" -n "$n" -t "$t" -s "$s" --layer "$6" \
        --head "$7" "${attn[@]}" --attn-map "$work/$name.svg") >"$work/$name.run" 2>"$work/$name.err" || {
        fail "$name: ./run failed: $(cat "$work/$name.err")"
        return
    }
    if ! load "$hash" "$width" "$name" "${11:-}"; then
        fail "$name: the page never finished: $(console_of "$name")"
        return
    fi
    field "$name" 1 >"$work/$name.page"
    if cmp -s "$work/$name.run" "$work/$name.page"; then
        ok "$name: #output is ./run's stdout ($(wc -c <"$work/$name.run") bytes, -n $n -t $t -s $s)"
    else
        fail "$name: #output differs from ./run's stdout (-n $n -t $t -s $s):"
        diff "$work/$name.run" "$work/$name.page" | head -n 6
    fi
    local page_w svg_w
    page_w=$(field "$name" 3 | sed -n 's/^probe [0-9,]*: //p')
    svg_w=$(grep -o "<rect class=\"c\" data-q=\"$8\" data-k=\"$9\" data-w=\"[^\"]*\"" \
            "$work/$name.svg" | sed 's/.*data-w="//; s/"$//')
    if [ -n "$page_w" ] && [ -n "$svg_w" ] &&
       python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 5.1e-5)' \
           "$page_w" "$svg_w"; then
        ok "$name: heatmap cell layer $6 head $7 query $8 key $9: $page_w, --attn-map's $svg_w"
    else
        fail "$name: heatmap cell layer $6 head $7 query $8 key $9: page '${page_w}', --attn-map '${svg_w}'"
    fi
    field "$name" 7 >"$work/validation.txt"
    local page_bits run_bits
    page_bits=$(field "$name" 6 | sed -n 's/^\([0-9.]*\) bits\/char.*/\1/p')
    run_bits=$(cd "$here" && "$RUN" weights/model.bin --eval "$work/validation.txt" "${attn[@]}" \
               2>/dev/null | sed -n 's/.*nats\/token, \([0-9.]*\) bits\/char.*/\1/p')
    if [ -n "$page_bits" ] && [ -n "$run_bits" ] &&
       python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 5.1e-5)' \
           "$page_bits" "$run_bits"; then
        ok "$name: bits/char on the page's validation text: $page_bits, ./run --eval's $run_bits"
    else
        fail "$name: bits/char: page '$page_bits', ./run --eval '$run_bits'"
    fi
    check_console "$name"
    check_width "$name" "$width"
    grep -o 'generation: [0-9]* tokens, [0-9.]* tokens/s' "$work/$name.err" >"$work/$name.speed"
    echo "   decode: the page $(field "$name" 4) tokens/s, ./run $(sed 's/.*, //' "$work/$name.speed")"
}

check_console() {
    local console
    console=$(console_of "$1")
    if [ -z "$console" ]; then ok "$1: no console message"; else fail "$1: $console"; fi
}

check_width() {
    local widths
    widths=$(field "$1" 5)
    if [ "${widths% *}" -le "${widths#* }" ] 2>/dev/null; then
        ok "$1: nothing wider than the window at $2 px (page ${widths% *} px)"
    else
        fail "$1: the page is wider than the window at $2 px (page, window: $widths)"
    fi
}

# Bad input: NAME HASH EXPECTED-TEXT: the page finishes with a message containing it.
refuse() {
    if ! load "$2" 1400 "$1"; then
        fail "$1: the page never finished: $(console_of "$1")"
        return
    fi
    local message
    message=$(field "$1" 2)
    case "$message" in
        *"$3"*) ok "$1: says \"$(printf '%s' "$message" | head -n 1)\"" ;;
        *) fail "$1: message '$message' (expected one containing '$3')" ;;
    esac
    check_console "$1"
}

compare greedy "ROMEO:" 100 0 42 9 2 50 10 1400 "$SHOTS/page-1400.png" ""
compare seeded "JULIET:" 200 0.8 7 3 1 120 112 600 "$SHOTS/page-600.png" ""
LOAD_BASE="file://$PAGE/attn.html" \
    compare file "ROMEO:" 40 0.5 3 0 3 20 17 1400 "" ""
compare window "KING RICHARD III:" 60 0 1 5 0 40 31 1400 "" "window:w=16,sinks=2"
# more bytes than the context has positions, fewer tokens (279 bytes, 89 tokens): the page
# ran the ids of an earlier prompt
compare bytes "ROMEO:
$(for i in $(seq 17); do printf 'O, speak again! '; done)" 40 0 3 9 2 100 90 1400 "" ""
refuse empty "prompt=&n=10&t=0&s=1" "the prompt is empty"
refuse long "prompt=$(printf 'a%%20%.0s' $(seq 300))&n=10&t=0&s=1" "prompt too long for the context"
refuse steps "prompt=ROMEO%3A&n=99999999&t=0&s=1" "n: invalid value"

# tutorial STEP WIDTH SCREENSHOT [ARG...]: #step=STEP&args=... against ./tutorial STEP ARG...;
# its stdout byte for byte, and the page says the step is done without a message.
load_step() {
    local shot=()
    [ -z "${3:-}" ] || shot=(--screenshot "$3")
    python3 "$here/tools/cdp_page.py" "$browser" "$base#$1" --width "$2" \
        --timeout "$LOAD_TIMEOUT" \
        --wait "['done', 'error'].includes(document.body.dataset.tutorial)" \
        --eval "document.getElementById('tutorial-out').textContent" \
        --eval "document.getElementById('message').textContent" \
        --eval "document.body.dataset.tutorial" \
        --eval "[...document.querySelectorAll('#tutorial-code pre')].map(p => p.dataset.function + '\\n' + p.textContent).join('\\f')" \
        --eval "document.documentElement.scrollWidth + ' ' + window.innerWidth" \
        "${shot[@]}" >"$work/$4.out" 2>&1
}
tutorial() {
    local step=$1 width=$2 shot=$3 name="step-$1"
    shift 3
    local args=""
    [ $# = 0 ] || args="&args=$(quote "$(printf '%s\n' "$@" | sed '$s/$//')")"
    (cd "$here" && "$TUTORIAL" "$step" "$@") >"$work/$name.tut" 2>"$work/$name.terr" || {
        fail "$name: ./tutorial $step failed: $(cat "$work/$name.terr")"
        return
    }
    if ! load_step "step=$step$args" "$width" "$shot" "$name"; then
        fail "$name: the page never finished the step: $(console_of "$name")"
        return
    fi
    field "$name" 1 >"$work/$name.page"
    if [ "$(field "$name" 3)" = done ] && [ -z "$(field "$name" 2)" ] &&
       cmp -s "$work/$name.tut" "$work/$name.page"; then
        ok "$name: #tutorial-out is ./tutorial $step${*:+ $*}'s stdout ($(wc -c <"$work/$name.tut") bytes)"
    else
        fail "$name: ./tutorial $step${*:+ $*}: page state '$(field "$name" 3)', message '$(field "$name" 2)':"
        diff "$work/$name.tut" "$work/$name.page" | head -n 6
    fi
    check_console "$name"
}
TUTORIAL=$(cd "$here" && realpath "$B/tutorial")
steps=$(cd "$here" && "$TUTORIAL" --help | sed -n 's/^  \([a-z]*\) .*/\1/p' | grep -vx svg)
for step in $steps; do
    case $step in
        attend) tutorial attend 1400 "$SHOTS/tutorial-1400.png" ;;
        tokens) tutorial tokens 600 "$SHOTS/tutorial-600.png" "ROMEO:" ;;
        *) tutorial "$step" 1400 "" ;;
    esac
done
check_width step-attend 1400
check_width step-tokens 600
# merges on demand: after a run, a click on the prompt's first token (ROMEO) shows what
# ./tutorial merges ROMEO prints
(cd "$here" && "$TUTORIAL" merges ROMEO) >"$work/click.tut" 2>/dev/null
if python3 "$here/tools/cdp_page.py" "$browser" "$base#prompt=ROMEO%3A&n=1&t=0" --width 1000 \
       --timeout "$LOAD_TIMEOUT" \
       --wait "(document.querySelector('.tok') && !window.clicked && (window.clicked = 1,
               document.querySelector('.tok').click()), document.body.dataset.tutorial === 'done')" \
       --eval "document.getElementById('tutorial-out').textContent" >"$work/click.out" 2>&1 &&
   field click 1 >"$work/click.page" && cmp -s "$work/click.tut" "$work/click.page"; then
    ok "merges on demand: a click on the token ROMEO shows ./tutorial merges ROMEO's stdout"
else
    fail "merges on demand: the click on ROMEO did not show ./tutorial merges ROMEO's output"
fi
# a token that is one byte of a character (日, three byte tokens): its chip shows \xHH, as
# ./tutorial tokens does (the chips showed three identical U+FFFD), and a click says why
# merges cannot take it (it ran merges on U+FFFD's bytes)
if python3 "$here/tools/cdp_page.py" "$browser" "$base#prompt=%E6%97%A5&n=1&t=0" --width 1000 \
       --timeout "$LOAD_TIMEOUT" \
       --wait "(document.querySelectorAll('.tok').length > 1 && !window.clicked &&
               (window.clicked = 1, document.querySelectorAll('.tok')[1].click()),
               document.getElementById('message').textContent.includes('part of a character'))" \
       --eval "[...document.querySelectorAll('.tok')].slice(0, 3).map((c) => c.textContent).join(' ')" \
       --eval "document.getElementById('message').textContent" >"$work/bytes.out" 2>&1 &&
   field bytes 1 | grep -q 'xe6.* .*x97.* .*xa5' &&
   field bytes 2 | grep -q 'x97 is part of a character'; then
    ok "byte tokens: chips show \\xe6 \\x97 \\xa5; a click says merges takes whole characters"
else
    fail "byte tokens of 日: chips '$(field bytes 1 2>/dev/null)', message '$(field bytes 2 2>/dev/null)'"
fi
# a bad deep link ends the link's work: data-state "error" and the message (it stayed unset)
for bad in "step=nosuch:is not a tutorial step" "prompt=%ZZ:is not valid percent-encoding"; do
    if load "${bad%%:*}" 1000 badlink && field badlink 2 | grep -q "${bad#*:}"; then
        ok "deep link #${bad%%:*}: data-state error, message '${bad#*:}'"
    else
        fail "deep link #${bad%%:*}: never finished, or no message: $(field badlink 2 2>/dev/null)"
    fi
done
# the C shown for attend: each function's text as web/steps.sh cut it, against the source
# cut here by a different tool (python: from the definition's line to the first "}")
field step-attend 4 >"$work/shown.txt"
if python3 - "$here" "$work/shown.txt" <<'PY'
import re, sys
here, shown = sys.argv[1], open(sys.argv[2]).read().split("\f")
places = {"step_attend": "lab/tutorial.c", "tutorial_attend_one": "lab/tutorial.c",
          "attention_forward": "attention.c"}
bad = []
for block in shown:
    name, text = block.split("\n", 1)
    src = open(f"{here}/{places.get(name, '?')}").read() if name in places else ""
    m = re.search(r"^[A-Za-z][^\n;]*[ *]" + name + r"\((?:[^\n]*\n)*?\}\n", src, re.M)
    if not m or m.group(0) != text:
        bad.append(name)
if bad or len(shown) != 3:
    print("differs: " + ", ".join(bad) + f" ({len(shown)} functions shown)")
    sys.exit(1)
PY
then ok "step-attend: the C shown (step_attend, tutorial_attend_one, attention_forward) is the sources' text"
else fail "step-attend: the C shown is not the sources' text"
fi
echo "web-check: screenshots in $SHOTS (page-1400.png, page-600.png, tutorial-1400.png, tutorial-600.png)"
echo "web-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
