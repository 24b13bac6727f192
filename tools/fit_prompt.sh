# fit_prompt.sh: the prompt the speed scripts share (sourced: . tools/fit_prompt.sh by
# tools/bench.sh and tools/compare.sh).

# fit_prompt MODEL TOK LIMIT OUT: writes OUT, the longest whole-word start of $PROMPT_TEXT
# that $RUN encodes (with MODEL and TOK) to at most LIMIT tokens, and prints its tokens;
# prints nothing if no start fits or $RUN refuses the model. Few tries: the tokens per word
# are nearly constant, so each try scales the words by LIMIT over the tokens it got.
fit_prompt() {
    fp_words=$(wc -w <"$PROMPT_TEXT")
    while [ "$fp_words" -gt 0 ]; do
        awk -v n="$fp_words" '{ for (i = 1; i <= NF && c < n; i++)
            printf "%s%s", c++ ? " " : "", $i }' "$PROMPT_TEXT" >"$4"
        fp_got=$("$RUN" "$1" -z "$2" -f "$4" -n 0 -t 0 2>&1 >/dev/null | sed -n \
                 's/^prompt: \([0-9]*\) tokens.*/\1/p; s/.*too long.*got \([0-9]*\) tokens.*/\1/p')
        [ -n "$fp_got" ] || return 0
        if [ "$fp_got" -le "$3" ]; then echo "$fp_got"; return 0; fi
        fp_fewer=$((fp_words * $3 / fp_got))
        [ "$fp_fewer" -lt "$fp_words" ] && fp_words=$fp_fewer || fp_words=$((fp_words - 1))
    done
}
