#!/usr/bin/env bash
# tools/page_check.sh: the explorer page (lab/attnmap_page.html) in a real browser
# (make page-check; CI). Writes two maps with BUILD_DIR/run, 41 tokens (token labels on the
# axes) and 173 (index ticks, a heatmap larger than its box), and opens each in headless
# Chromium at 1400 and 600 px wide with #selftest in the address. There the page runs its
# own checks (hovering a token changes the status line; Tab reaches a token and Enter pins
# it; a heatmap cell under the pointer shows its weight; the heatmap's size and pixels per
# px; nothing wider than the window; an edited #token=&layer=&head= followed) and writes
# its verdict into <body data-selftest>, which --dump-dom prints. A load fails on a verdict
# other than "ok", on no verdict (the script did not run), and on any console message
# besides the verdict (Chromium logs each one, errors included, to stderr).
#
# Chromium is Debian's chromium package (or $CHROMIUM), installed with apt-get when missing
# and root; otherwise the check says skipped and exits 0. About 10 s.
# Usage: tools/page_check.sh [BUILD_DIR] (default build; the program is BUILD_DIR/run).
set -u
B=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
RUN=$(cd "$here" && realpath "$B/run")
MAPS=$(cd "$here" && realpath "$B")
WIDTHS="1400 600"
LOAD_TIMEOUT=60      # s for one page load; a load takes about 1.5 s

WHAT="page check"
. "$here/tools/chromium.sh"   # $browser, or skipped

work=$(mktemp -d "${TMPDIR:-/tmp}/page_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
chromium_home "$work"
passed=0
failed=0

# One map: NAME TOKENS -> $MAPS/page_check_NAME.html (a prompt of 2 tokens, then generated
# ones; the map has all but the last).
write_map() {
    (cd "$here" && "$RUN" weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n "$(($2 - 1))" \
        -s 7 --attn-map "$MAPS/page_check_$1.html") >"$work/run.out" 2>"$work/run.err" || {
        echo "FAIL - page check: ./run could not write the $1 map:"
        cat "$work/run.err"
        exit 1
    }
}

# One load: MAP WIDTH. Prints ok or FAIL with the verdict and any console messages.
load() {
    local map=$1 width=$2 what verdict console
    what="page check: $(basename "$map") at $width px"
    rm -rf "$work/profile"
    timeout "$LOAD_TIMEOUT" "$browser" --headless --no-sandbox --disable-gpu --disable-quic \
        --no-first-run --disable-background-networking --disable-component-update \
        --disable-sync --user-data-dir="$work/profile" --window-size="$width,900" \
        --virtual-time-budget=5000 --enable-logging=stderr --v=0 \
        --dump-dom "file://$map#selftest" >"$work/dom.html" 2>"$work/chromium.err"
    local rc=$?
    verdict=$(grep -o 'data-selftest="[^"]*"' "$work/dom.html" | head -n 1 |
              sed -e 's/^data-selftest="//' -e 's/"$//' -e 's/&amp;/\&/g' -e 's/&quot;/"/g')
    console=$(grep ':CONSOLE' "$work/chromium.err" | grep -v '"selftest: ' || true)
    if [ "$rc" = 0 ] && [ "$verdict" = ok ] && [ -z "$console" ]; then
        echo "ok - $what: the self-test passed, no console message"
        passed=$((passed + 1))
        return
    fi
    failed=$((failed + 1))
    echo "FAIL - $what: chromium exit $rc, self-test: ${verdict:-no verdict (did the script run?)}"
    [ -z "$console" ] || printf 'console: %s\n' "$console"
    [ -n "$verdict" ] || tail -n 5 "$work/chromium.err"
}

write_map short 41
write_map long 173
for map in short long; do
    for width in $WIDTHS; do load "$MAPS/page_check_$map.html" "$width"; done
done
echo "page-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
