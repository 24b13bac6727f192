#!/bin/sh
# doc_refs.sh: keep the docs' line references to the C code current.
#
# A reference is a Markdown link whose text is FILE:START-END and whose target is the
# same file (relative to the document) with #LSTART-LEND, followed by a space and the
# function's name in backticks, e.g.
#     [attention.c:91-100](../attention.c#L91-L100) `attention_forward`
# START is the function's definition line: a line at column 0 that contains NAME( and
# begins a definition, not a prototype (the first '{' or ';' after NAME( decides, so
# signatures may span lines). END is the first line after it that starts with '}' (or
# START's own line, for a one-line function).
#
# Usage:
#   sh tools/doc_refs.sh check DOC...    report every stale or broken reference;
#                                        exit 1 if any, else 0 with a count line
#   sh tools/doc_refs.sh update DOC...   rewrite the numbers in place to the current
#                                        ones; a DOC with a reference that cannot be
#                                        resolved (missing file or function) is left
#                                        unchanged, and the exit status is 1
# POSIX sh and awk only.
set -u

usage() {
    echo "usage: sh tools/doc_refs.sh check|update DOC..." >&2
    exit 2
}

[ $# -ge 2 ] || usage
mode=$1
shift
case $mode in
    check|update) ;;
    *) usage ;;
esac

# The awk program: reads one document, resolves its references, prints diagnostics on
# stderr, the document (update mode) on stdout, and "REFS BAD" into countfile.
prog='
function err(msg) { print "doc_refs: " msg | "cat 1>&2"; }

# Loads path into LINE[path, 1..N[path]]; returns 0 if it cannot be read.
function load(path,    n, s, rc) {
    if (path in N) return N[path] >= 0;
    n = 0;
    while ((rc = (getline s < path)) > 0) LINE[path, ++n] = s;
    close(path);
    N[path] = (rc < 0 && n == 0) ? -1 : n;
    return N[path] >= 0;
}

# 1 if c is a character of a C identifier.
function ident(c) { return c ~ /[A-Za-z0-9_]/; }

# Finds the definition of name in path: sets DEF_START, DEF_END; returns 1, or 0.
function find_def(path, name,    i, j, s, p, off, c, k, depth, opened) {
    if ((path, name) in START) {
        DEF_START = START[path, name]; DEF_END = END_[path, name];
        return DEF_START > 0;
    }
    START[path, name] = 0; END_[path, name] = 0;
    for (i = 1; i <= N[path]; i++) {
        s = LINE[path, i];
        if (s !~ /^[A-Za-z_]/) continue;           # column 0, not a comment or a # line
        off = 0; p = 0;
        while ((k = index(substr(s, off + 1), name "(")) > 0) {
            p = off + k;
            if (p == 1 || !ident(substr(s, p - 1, 1))) break;
            off = p; p = 0;
        }
        if (!p) continue;
        # the first { or ; after name( decides: definition, or prototype/declaration
        opened = 0;
        for (j = i; j <= N[path] && j < i + 64 && !opened; j++) {
            s = LINE[path, j];
            for (k = (j == i ? p : 1); k <= length(s); k++) {
                c = substr(s, k, 1);
                if (c == ";") { opened = -1; break; }
                if (c == "{") { opened = j; break; }
            }
        }
        if (opened <= 0) continue;
        j = opened; s = LINE[path, j]; depth = 0;
        for (k = 1; k <= length(s); k++) {
            c = substr(s, k, 1);
            if (c == "{") depth++;
            else if (c == "}") depth--;
        }
        if (depth <= 0) { START[path, name] = i; END_[path, name] = j; break; }
        for (j = opened + 1; j <= N[path]; j++)
            if (substr(LINE[path, j], 1, 1) == "}") break;
        if (j > N[path]) continue;
        START[path, name] = i; END_[path, name] = j;
        break;
    }
    DEF_START = START[path, name]; DEF_END = END_[path, name];
    return DEF_START > 0;
}

# Rewrites one reference ref (the matched text) found on line ln; returns the text to
# put in its place (the same text in check mode).
function resolve(ref, ln,    text, target, name, file, rng, path, lrng, full, a, b, want, shown) {
    text = substr(ref, 2, index(ref, "]") - 2);
    target = substr(ref, index(ref, "](") + 2);
    target = substr(target, 1, index(target, ")") - 1);
    name = substr(ref, index(ref, ") `") + 3);
    name = substr(name, 1, length(name) - 1);
    match(text, /:[0-9]+-[0-9]+$/);
    file = substr(text, 1, RSTART - 1); rng = substr(text, RSTART + 1);
    path = substr(target, 1, index(target, "#L") - 1);
    lrng = substr(target, index(target, "#L") + 2); sub(/-L/, "-", lrng);
    shown = doc ":" ln ": " text " `" name "`";
    refs++;
    if (path != file && substr(path, length(path) - length(file)) != "/" file) {
        err(shown ": link points to " path ", not " file); bad++; broken++;
        return ref;
    }
    full = (path ~ /^\//) ? path : dir "/" path;
    if (!load(full)) {
        err(shown ": " full ": no such file"); bad++; broken++;
        return ref;
    }
    if (!find_def(full, name)) {
        err(shown ": no definition of " name "( in " full); bad++; broken++;
        return ref;
    }
    want = DEF_START "-" DEF_END;
    if (rng != want) {
        bad++;
        if (mode == "check") err(shown ": expected " want);
    } else if (lrng != want) {
        bad++;
        if (mode == "check")
            err(shown ": link target #L" DEF_START "-L" DEF_END " expected (got #L" \
                substr(target, index(target, "#L") + 2) ")");
    }
    if (rng != want || lrng != want) changed++;
    return "[" file ":" want "](" path "#L" DEF_START "-L" DEF_END ") `" name "`";
}

BEGIN { refs = 0; bad = 0; broken = 0; changed = 0; }
{
    line = $0; out = ""; strict = 0;
    while (match(line, /\[[^]]*:[0-9]+-[0-9]+\]\([^)]*#L[0-9]+-L[0-9]+\) `[A-Za-z_][A-Za-z0-9_]*`/)) {
        at = RSTART; len = RLENGTH;            # resolve() runs match() too
        out = out substr(line, 1, at - 1) resolve(substr(line, at, len), NR);
        line = substr(line, at + len);
        strict++;
    }
    out = out line;
    # anything that looks like a line link but is not a whole reference
    loose = 0; rest = $0;
    while (match(rest, /\]\([^)]*#L[0-9]+(-L[0-9]+)?\)/)) {
        loose++; rest = substr(rest, RSTART + RLENGTH);
    }
    if (loose > strict) {
        err(doc ":" NR ": malformed reference (expected [FILE:START-END](PATH#LSTART-LEND) `NAME`)");
        bad++; broken++;
    }
    if (mode == "update") print out;
}
END {
    print refs, bad, broken, changed > countfile;
    close(countfile);
}'

status=0
total=0
total_bad=0
tmpdir=${TMPDIR:-/tmp}/doc_refs.$$
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' HUP INT TERM
mkdir "$tmpdir" || exit 1
for doc in "$@"; do
    if [ ! -f "$doc" ]; then
        echo "doc_refs: $doc: no such file" >&2
        status=1
        total_bad=$((total_bad + 1))
        continue
    fi
    dir=$(dirname "$doc")
    awk -v mode="$mode" -v doc="$doc" -v dir="$dir" -v countfile="$tmpdir/count" \
        "$prog" "$doc" > "$tmpdir/out" || { status=1; continue; }
    read -r refs bad broken changed < "$tmpdir/count"
    total=$((total + refs))
    if [ "$mode" = check ]; then
        [ "$bad" -eq 0 ] || status=1
        total_bad=$((total_bad + bad))
    elif [ "$broken" -ne 0 ]; then
        echo "doc_refs: $doc: left unchanged ($broken reference(s) cannot be resolved)" >&2
        status=1
    elif [ "$changed" -ne 0 ]; then
        cat "$tmpdir/out" > "$doc" || status=1      # in place: keeps the file's mode
        echo "doc_refs: $doc: updated $changed of $refs references"
    else
        echo "doc_refs: $doc: $refs references, all current"
    fi
done
if [ "$mode" = check ]; then
    if [ "$status" -eq 0 ]; then
        echo "doc_refs: $total references in $# file(s), all current"
    else
        echo "doc_refs: $total_bad problem(s) in $total reference(s)" >&2
    fi
fi
exit "$status"
