#!/bin/sh
# loss_curve.sh: a training log of ./train drawn as an SVG loss curve on standard output:
# the training loss of every logged step (a line) and the validation loss of every
# evaluation (dots), both in nats per token, against the step. Reads the lines
# "step N/M | loss X | val Y (Z bpc) | ..." that train prints (val "-" between
# evaluations). Labels are at least 13 px; the picture is 760 px wide.
# Usage: sh tools/loss_curve.sh LOG "TITLE" > curve.svg   (make docs-figures draws
# docs/img/loss.svg from docs/img/loss.log, the run of the tutorial's step 6.4)
set -eu
[ $# -eq 2 ] || { echo "usage: loss_curve.sh LOG TITLE" >&2; exit 2; }
[ -f "$1" ] && [ -r "$1" ] || { echo "loss_curve.sh: $1: cannot read it (expected a log file)" >&2
                             exit 1; }
# the title as XML text (& < > escaped)
title=$(printf '%s' "$2" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g')
awk -F' *[|] *' -v title="$title" '
    /^step +[0-9]+\/[0-9]+ / {
        split($1, s, /[ \/]+/)
        sub(/^loss /, "", $2)
        if ($2 !~ /^[0-9.]+$/) next   # nan or inf: a diverged step, not drawn
        n++; step[n] = s[2] + 0; last = s[3] + 0
        loss[n] = $2 + 0
        if ($3 ~ /^val [0-9]/ && !(step[n] in seen_val)) {
            v = $3; sub(/^val /, "", v); sub(/ .*/, "", v)
            b = $3; sub(/.*\(/, "", b); sub(/ bpc.*/, "", b)
            if (v != prev_val) { nv++; vstep[nv] = step[n]; val[nv] = v + 0; bpc[nv] = b }
            prev_val = v
        }
    }
    END {
        if (n == 0) { print "loss_curve.sh: no step lines in the log" > "/dev/stderr"; exit 1 }
        if (last < 4) {   # the ticks are quarters of the run
            printf "loss_curve.sh: a run of %d steps (expected at least 4 to draw)\n", last > "/dev/stderr"
            exit 1
        }
        W = 760; H = 440; left = 70; right = 730; top = 60; bottom = 370
        ymin = 3; ymax = 7   # nats per token: ln 1024 = 6.93 at the start
        printf "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        printf "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"15\" fill=\"#222222\">\n", W, H, W, H
        printf "<title>%s</title>\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", title, W, H
        printf "<text x=\"%d\" y=\"28\" font-size=\"16\">%s</text>\n", left, title
        for (y = ymin; y <= ymax; y++) {
            py = bottom - (y - ymin) / (ymax - ymin) * (bottom - top)
            printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", left, py, right, py
            printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", left - 8, py + 5, y
        }
        tick = last >= 1000 ? 250 : int(last / 4)
        for (x = 0; x <= last; x += tick) {
            px = left + x / last * (right - left)
            printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#222222\"/>\n", px, bottom, px, bottom + 6
            printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", px, bottom + 24, x
        }
        printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222222\"/>\n", left, bottom, right, bottom
        printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222222\"/>\n", left, top, left, bottom
        printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (left + right) / 2, bottom + 50
        printf "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">loss (nats per token)</text>\n", (top + bottom) / 2, (top + bottom) / 2
        printf "<path fill=\"none\" stroke=\"#6baed6\" stroke-width=\"2\" d=\""
        for (i = 1; i <= n; i++)
            printf "%s%.1f %.1f", (i > 1 ? "L" : "M"), left + step[i] / last * (right - left), bottom - (loss[i] - ymin) / (ymax - ymin) * (bottom - top)
        printf "\"/>\n"
        for (i = 1; i <= nv; i++) {
            px = left + vstep[i] / last * (right - left); py = bottom - (val[i] - ymin) / (ymax - ymin) * (bottom - top)
            printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#e6550d\"/>\n", px, py
            printf "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">%.2f (%s bpc)</text>\n", px - (i == nv ? 40 : 0), py - 12, val[i], bpc[i]
        }
        printf "<line x1=\"470\" y1=\"80\" x2=\"500\" y2=\"80\" stroke=\"#6baed6\" stroke-width=\"2\"/>\n"
        printf "<text x=\"508\" y=\"85\">training loss (every 10 steps)</text>\n"
        printf "<circle cx=\"485\" cy=\"104\" r=\"5\" fill=\"#e6550d\"/>\n"
        printf "<text x=\"508\" y=\"109\">validation loss (last 10 %%)</text>\n"
        printf "</svg>\n"
    }
' "$1"
