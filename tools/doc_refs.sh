#!/bin/sh
# doc_refs.sh: keep the docs' references to the C code, and their quotes of test check
# labels, current.
#
# A reference names a function by its name, never by line numbers, so that moving code
# never breaks a document: a Markdown link whose text is a C file and whose target is the
# same file (relative to the document, no #anchor), followed by a space and the
# function's name in backticks, e.g.
#     [attention.c](../attention.c) `attention_forward`
# Check mode checks that the file defines the function: a line at column 0 that contains
# NAME( and begins a definition, not a prototype (the first '{' or ';' after NAME(
# decides, so signatures may span lines). The older form with line numbers,
# [FILE:START-END](PATH#LSTART-LEND) `NAME`, is reported in check mode, and update mode
# rewrites it to the form above.
#
# Check mode also checks the docs' quotes of test check labels (what a test prints after
# "ok - "). A label is written as a code span that is entirely a double-quoted string,
# e.g. `"§12 (b) unscaled, all keys"`; it may wrap onto the next line (the line break and
# the indentation count as one space), and fenced code blocks are skipped. Each label
# must spell the beginning of a string literal in some tests/test_*.c (tests/ beside
# this script's tools/; byte for byte, UTF-8 as it is), where:
#   - adjacent literals ("a" "b", even across lines) count as one, with escapes undone;
#   - a printf conversion in the literal (%s, %d, %g, %zu, %.2g, ...) matches any text
#     (one word if it starts the literal), so a label built by printf is quoted with its
#     values filled in: "G3 %s: prefill" is quoted as `"G3 window: prefill"` (what
#     stands for a conversion is not checked);
#   - "..." in the quote matches any text: `"... q=63"` (a sibling of the label before),
#     `"G4 ... == exact, bitwise"`, `"weights exact: ..."`;
#   - each part of the quote between "..."s must match at least one letter or digit of
#     the literal's own text, and a part followed by "..." must end in the literal's own
#     text, not in text standing for a conversion;
#   - the quote may stop early (a prefix), best at a natural boundary such as ":", but
#     not inside the text of a conversion unless that ends the literal: for
#     "rows sum to %s (worst ...)" quote `"... rows sum to ..."`, not `"... rows sum to 1"`.
# An unknown label is reported as: doc_refs: FILE:LINE: check "LABEL": not found in tests/
# A plain double quote outside code that opens like a label ("§12 ..." or "G7: ...") is
# reported too, as probably missing its backticks.
#
# A file map row is a table row whose first cell lists files in backticks and whose
# second cell lists as many numbers, e.g.
#     | `attention.h`, `attention.c` | 247, 1302 | ... |
# The numbers must be the files' line counts (wc -l; paths relative to the document).
#
# Check mode also checks every Markdown link and image outside code: it must be relative,
# name a file or folder that exists inside the repository, and, for a #anchor into a
# Markdown file, a heading of that file (GitHub's anchors, compared on their ASCII
# characters only). Links to http(s) or other schemes, and absolute paths, are reported:
# the docs point only inside the repository.
#
# Usage:
#   sh tools/doc_refs.sh check DOC...    report every stale or broken reference and
#                                        every unknown check label; exit 1 if any, else
#                                        0 with a count line
#   sh tools/doc_refs.sh update DOC...   rewrite the file maps' line counts in place to
#                                        the current ones, and line-number references to
#                                        name-only ones; a DOC with a reference that
#                                        cannot be resolved (missing file or function) is
#                                        left unchanged, and the exit status is 1 (labels
#                                        and links are not looked at)
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

# Checks one reference ref (the matched text, [FILE](PATH) `NAME`) found on line ln:
# PATH names FILE and defines NAME. Returns ref.
function resolve(ref, ln,    file, path, name) {
    file = substr(ref, 2, index(ref, "]") - 2);
    path = substr(ref, index(ref, "](") + 2);
    path = substr(path, 1, index(path, ")") - 1);
    name = substr(ref, index(ref, ") `") + 3);
    name = substr(name, 1, length(name) - 1);
    check_def(file, path, name, doc ":" ln ": " file " `" name "`");
    return ref;
}

# 1 if path (a link target) names file and defines name; else reports it (as shown) and
# returns 0.
function check_def(file, path, name, shown,    full) {
    refs++;
    if (path != file && substr(path, length(path) - length(file)) != "/" file) {
        err(shown ": link points to " path ", not " file); bad++; broken++;
        return 0;
    }
    full = (path ~ /^\//) ? path : dir "/" path;
    if (!load(full)) {
        err(shown ": " full ": no such file"); bad++; broken++;
        return 0;
    }
    if (!find_def(full, name)) {
        err(shown ": no definition of " name "( in " full); bad++; broken++;
        return 0;
    }
    return 1;
}

# An old reference with line numbers, [FILE:START-END](PATH#LSTART-LEND) `NAME`, on line
# ln: reported in check mode; in update mode returned as [FILE](PATH) `NAME`, which the
# caller then checks as any other reference.
function resolve_lines(ref, ln,    text, target, name, file, path) {
    text = substr(ref, 2, index(ref, "]") - 2);
    target = substr(ref, index(ref, "](") + 2);
    target = substr(target, 1, index(target, ")") - 1);
    name = substr(ref, index(ref, ") `") + 3);
    name = substr(name, 1, length(name) - 1);
    file = substr(text, 1, match(text, /:[0-9]+-[0-9]+$/) - 1);
    path = substr(target, 1, index(target, "#L") - 1);
    if (mode == "check") {
        err(doc ":" ln ": " text " `" name "`: line numbers break when code moves; write [" \
            file "](" path ") `" name "` (sh tools/doc_refs.sh update does)");
        refs++; bad++;
        return ref;
    }
    changed++;
    return "[" file "](" path ") `" name "`";
}

# Line count of path as wc -l gives it (cached); -1 if it cannot be read.
function lines_of(path,    cmd, n, s) {
    if (path in LINES) return LINES[path];
    LINES[path] = -1;
    if ((getline s < path) < 0) return -1;
    close(path);
    cmd = "wc -l < \"" path "\"";
    if ((cmd | getline n) > 0) LINES[path] = n + 0;
    close(cmd);
    return LINES[path];
}

# A file map row (see the top of this script): returns it with the current line counts.
function counts(row, ln,    head, files, nf, s, rest, nums, nn, i, full, want, fixed) {
    if (!match(row, /^\| *`[^`]+`( *, *`[^`]+`)* *\| */)) return row;
    head = substr(row, 1, RLENGTH); rest = substr(row, RLENGTH + 1);
    if (!match(rest, /^[0-9][0-9, ]*\|/)) return row;   # (mawk mismatches "( *, *[0-9]+)*")
    s = substr(rest, 1, RLENGTH - 1); rest = substr(rest, RLENGTH);
    sub(/ +$/, "", s);
    nn = split(s, nums, / *, */);
    for (i = 1; i <= nn; i++)
        if (nums[i] !~ /^[0-9]+$/) return row;
    nf = 0; s = head;
    while (match(s, /`[^`]+`/)) {
        files[++nf] = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH);
    }
    if (nn != nf) {
        err(doc ":" ln ": file map row with " nf " file(s) and " nn " line count(s)");
        bad++; broken++;
        return row;
    }
    fixed = "";
    for (i = 1; i <= nf; i++) {
        counted++;
        full = (files[i] ~ /^\//) ? files[i] : dir "/" files[i];
        want = lines_of(full);
        if (want < 0) {
            err(doc ":" ln ": file map: " files[i] ": no such file"); bad++; broken++;
            return row;
        }
        if (want != nums[i] + 0) {
            bad++; changed++;
            if (mode == "check")
                err(doc ":" ln ": file map: " files[i] " has " want " lines, not " nums[i]);
        }
        fixed = fixed (i > 1 ? ", " : "") want;
    }
    return head fixed " " rest;
}

BEGIN { refs = 0; bad = 0; broken = 0; changed = 0; counted = 0; }
{
    line = $0; out = ""; strict = 0;
    while (match(line, /\[[^]]*:[0-9]+-[0-9]+\]\([^)]*#L[0-9]+-L[0-9]+\) `[A-Za-z_][A-Za-z0-9_]*`/)) {
        at = RSTART; len = RLENGTH;            # resolve_lines() runs match() too
        out = out substr(line, 1, at - 1) resolve_lines(substr(line, at, len), NR);
        line = substr(line, at + len);
        strict++;
    }
    line = out line; out = "";
    while (match(line, /\[[A-Za-z0-9_.\/-]+\.[ch]\]\([^)#]+\) `[A-Za-z_][A-Za-z0-9_]*`/)) {
        at = RSTART; len = RLENGTH;
        out = out substr(line, 1, at - 1) resolve(substr(line, at, len), NR);
        line = substr(line, at + len);
    }
    out = counts(out line, NR);
    # anything that looks like a line link but is not a whole reference
    loose = 0; rest = $0;
    while (match(rest, /\]\([^)]*#L[0-9]+(-L[0-9]+)?\)/)) {
        loose++; rest = substr(rest, RSTART + RLENGTH);
    }
    if (loose > strict) {
        err(doc ":" NR ": a link to a line: name the function instead ([FILE](PATH) `NAME`)");
        bad++; broken++;
    }
    if (mode == "update") print out;
}
END {
    print refs, bad, broken, changed, counted > countfile;
    close(countfile);
    close("cat 1>&2");
}'

# ---- check labels (check mode only) ----
# litprog: prints every string literal of the C files it reads, one a line; adjacent
# literals ("a" "b", across lines and comments) are joined, escapes are undone (\c -> c,
# \n and \t -> space) and each printf conversion (%d, %5.2f, %zu, ...) becomes the byte
# \001; %% becomes %. Literals without a letter outside conversions ("%s%s") are dropped.
litprog='
function flush(    s, out, k, c) {
    if (!pending) return;
    pending = 0; s = cur; out = "";
    while ((k = index(s, "%")) > 0) {
        out = out substr(s, 1, k - 1); s = substr(s, k);
        if (substr(s, 1, 2) == "%%") { out = out "%"; s = substr(s, 3); }
        else if (match(s, /^%[-+ #0]*[0-9*]*(\.[0-9*]*)?(hh|h|ll|l|z|j|t|L)?[diouxXeEfFgGcsp]/)) {
            out = out "\001"; s = substr(s, RLENGTH + 1);
        } else { out = out "%"; s = substr(s, 2); }
    }
    out = out s; s = out; gsub(/\001/, "", s);
    if (s ~ /[A-Za-z]/) print out;
}
function unescape(s,    out, k, c) {
    out = "";
    while ((k = index(s, "\\")) > 0) {
        c = substr(s, k + 1, 1);
        out = out substr(s, 1, k - 1) ((c == "n" || c == "t") ? " " : c);
        s = substr(s, k + 2);
    }
    return out s;
}
FNR == 1 { flush(); incomment = 0; }
{
    rest = $0;
    while (rest != "") {
        if (incomment) {
            if ((k = index(rest, "*/")) == 0) break;
            rest = substr(rest, k + 2); incomment = 0; continue;
        }
        if (!match(rest, /["\047]|\/\*|\/\//)) {
            if (rest ~ /[^ \t]/) flush();
            break;
        }
        if (substr(rest, 1, RSTART - 1) ~ /[^ \t]/) flush();
        tok = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH);
        if (tok == "//") break;
        if (tok == "/*") { incomment = 1; continue; }
        if (tok == "\047") {                        # a character constant
            flush();
            if (match(rest, /^(\\.|[^\047\\])*\047/)) rest = substr(rest, RLENGTH + 1);
            else rest = "";
            continue;
        }
        if (!match(rest, /^(\\.|[^"\\])*"/)) { flush(); break; }   # unterminated
        if (!pending) cur = "";
        cur = cur unescape(substr(rest, 1, RLENGTH - 1)); pending = 1;
        rest = substr(rest, RLENGTH + 1);
    }
}
END { flush(); }'

# labprog: reads the literals (file lits), then one document; checks every label in it.
labprog='
function err(msg) { print "doc_refs: " msg | "cat 1>&2"; }

# 1 if label d (with \002 for each "...") spells the beginning of some expansion of the
# format s (with \001 for each conversion): a dynamic program over (i in d, j in s). After
# i characters of d, C[j,e] says that they can use up j characters of s with the last one
# matched as itself, W[j,e] with the last one taken by a conversion, L[j] with the last
# one a "..." (which takes any text of s, conversions too); e = 1 once the current part
# of d (between "..."s) has matched a letter or digit of s as itself. A conversion takes
# any text of d (one word if it starts s), but not the character right after a "...". A
# "..." may follow C with e = 1 only (or start d); d may end in L, in C with e = 1, or in
# W with e = 1 at the end of s.
function matches(d, s,    n, m, i, j, e, dc, sc, C, W, L, C2, W2, L2, any, k) {
    n = length(d); m = length(s);
    for (j = 0; j <= m; j++) { C[j,0] = C[j,1] = W[j,0] = W[j,1] = L[j] = 0; }
    i = 0;
    if (substr(d, 1, 1) == "\002") {                 # d starts with "...": any of s
        for (j = 0; j <= m; j++) L[j] = 1;
        i = 1;
    } else C[0,0] = 1;
    for (; ; i++) {
        for (j = 0; j < m; j++)                       # a conversion ends (or is skipped)
            if (substr(s, j + 1, 1) == "\001") {
                for (e = 0; e <= 1; e++) {
                    if (C[j,e]) C[j + 1,e] = 1;
                    if (W[j,e]) W[j + 1,e] = 1;
                }
                if (L[j]) L[j + 1] = 1;
            }
        if (i == n) {
            for (j = 0; j <= m; j++) if (C[j,1] || L[j]) return 1;
            return W[m,1];
        }
        dc = substr(d, i + 1, 1);
        any = 0;
        for (j = 0; j <= m; j++) { C2[j,0] = C2[j,1] = W2[j,0] = W2[j,1] = L2[j] = 0; }
        if (dc == "\002") {                          # "..." takes s[j+1..k], any k >= j
            for (j = 0; j <= m; j++)
                if (C[j,1] || L[j]) break;
            for (; j <= m; j++) L2[j] = any = 1;
        } else {
            for (j = 0; j < m; j++) {
                sc = substr(s, j + 1, 1);
                if (sc == "\001") {
                    if (j == 0 && dc == " ") continue;
                    for (e = 0; e <= 1; e++)
                        if (C[j,e] || W[j,e]) W2[j,e] = any = 1;
                } else if (dc == sc) {
                    k = (dc ~ /[A-Za-z0-9]/);
                    if (C[j,1] || W[j,1]) C2[j + 1,1] = any = 1;
                    if (C[j,0] || W[j,0] || L[j]) C2[j + 1,k] = any = 1;
                }
            }
        }
        if (!any) return 0;
        for (j = 0; j <= m; j++) {
            C[j,0] = C2[j,0]; C[j,1] = C2[j,1]; W[j,0] = W2[j,0]; W[j,1] = W2[j,1];
            L[j] = L2[j];
        }
    }
}

function known(label,    d, d0, s0, k, i) {
    d = label; gsub(/\.\.\./, "\002", d);
    d0 = d; if ((k = index(d0, "\002")) > 0) d0 = substr(d0, 1, k - 1);
    for (i = 1; i <= nlit; i++) {
        s0 = LIT[i]; if ((k = index(s0, "\001")) > 0) s0 = substr(s0, 1, k - 1);
        k = length(d0) < length(s0) ? length(d0) : length(s0);   # cheap test first
        if (substr(d0, 1, k) != substr(s0, 1, k)) continue;
        if (matches(d, LIT[i])) return 1;
    }
    return 0;
}

function label(text, ln) {
    labels++;
    if (!known(text)) {
        err(doc ":" ln ": check \"" text "\": not found in tests/"); bad++;
    }
}

BEGIN { while ((getline s < lits) > 0) LIT[++nlit] = s; close(lits); }
/^[ \t]*(```|~~~)/ { fence = !fence; next; }
fence { next; }
/^[ \t]*$/ {                                 # a blank line ends any code span
    if (incode && span ~ /^"/) {
        err(doc ":" start ": unterminated check label `" span); bad++;
    }
    incode = 0; next;
}
{
    rest = $0;
    if (incode) { sub(/^[ \t]+/, "", rest); span = span " "; }
    while (rest != "") {
        if (incode) {
            if ((k = index(rest, "`")) == 0) { sub(/[ \t]+$/, "", rest); span = span rest; break; }
            span = span substr(rest, 1, k - 1); rest = substr(rest, k + 1); incode = 0;
            if (span ~ /^".*"$/ && length(span) > 2) label(substr(span, 2, length(span) - 2), start);
            continue;
        }
        if ((k = index(rest, "`")) == 0) k = length(rest) + 1;
        plain = substr(rest, 1, k - 1);
        if (match(plain, /"(§[0-9]|G[0-9]+[ :])/)) {
            err(doc ":" FNR ": " substr(plain, RSTART) ": a check label? write it as `\"LABEL\"`");
            bad++;
        }
        if (k > length(rest)) break;
        rest = substr(rest, k + 1); incode = 1; span = ""; start = FNR;
    }
}
END {
    print labels, bad > countfile;
    close(countfile);
    close("cat 1>&2");
}'

# ---- links (check mode only) ----
# linkprog: prints "LINE<TAB>TARGET" for every Markdown link or image target of a document,
# outside fenced code blocks and code spans.
linkprog='
/^[ \t]*(```|~~~)/ { fence = !fence; next; }
fence { next; }
{
    s = $0; gsub(/`[^`]*`/, "", s);
    while (match(s, /\]\([^) ]*\)/)) {
        print FNR "\t" substr(s, RSTART + 2, RLENGTH - 3);
        s = substr(s, RSTART + RLENGTH);
    }
}'

# anchorprog: prints the anchor of every heading of a Markdown file, as GitHub makes them
# (lower case; punctuation dropped; spaces to hyphens; -1, -2 ... for repeats), keeping
# only the ASCII characters.
anchorprog='
/^[ \t]*(```|~~~)/ { fence = !fence; next; }
fence { next; }
/^#+ / {
    s = $0; sub(/^#+ +/, "", s); sub(/ +#* *$/, "", s);
    s = tolower(s); gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s);
    if (s in seen) { seen[s]++; print s "-" seen[s]; } else { seen[s] = 0; print s; }
}'

# check_links DOC: reports each link of DOC that leaves the repository, names nothing, or
# names a heading its Markdown file does not have; prints the number of links, then of
# problems, on stdout.
check_links() {
    n=0; nbad=0
    LC_ALL=C awk "$linkprog" "$1" > "$tmpdir/links"
    while IFS='	' read -r ln target; do
        n=$((n + 1))
        path=${target%%#*}
        anchor=
        case $target in *'#'*) anchor=${target#*#} ;; esac
        case $path in
            *:*|/*)
                echo "doc_refs: $1:$ln: link $target: points outside the repository" >&2
                nbad=$((nbad + 1)); continue ;;
        esac
        [ -n "$path" ] && full=$(dirname "$1")/$path || full=$1
        if [ ! -e "$full" ]; then
            echo "doc_refs: $1:$ln: link $target: no such file" >&2
            nbad=$((nbad + 1)); continue
        fi
        real=$(cd "$(dirname "$full")" && pwd -P)/$(basename "$full")
        case $real in
            "$root"/*|"$root") ;;
            *) echo "doc_refs: $1:$ln: link $target: outside the repository" >&2
               nbad=$((nbad + 1)); continue ;;
        esac
        case $full:$anchor in
            *.md:?*)
                want=$(printf '%s' "$anchor" | LC_ALL=C tr -cd 'A-Za-z0-9_-' | tr 'A-Z' 'a-z')
                if ! LC_ALL=C awk "$anchorprog" "$full" | grep -qx -e "$want"; then
                    echo "doc_refs: $1:$ln: link $target: no such heading in $path" >&2
                    nbad=$((nbad + 1))
                fi ;;
        esac
    done < "$tmpdir/links"
    echo "$n $nbad"
}

status=0
total=0
total_counts=0
total_links=0
total_bad=0
total_labels=0
root=$(cd "$(dirname "$0")/.." && pwd -P) || exit 1
tmpdir=${TMPDIR:-/tmp}/doc_refs.$$
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' HUP INT TERM
mkdir "$tmpdir" || exit 1
if [ "$mode" = check ]; then
    for src in "$root"/tests/test_*.c; do        # an unmatched glob stays as it is
        [ -f "$src" ] || { echo "doc_refs: no $root/tests/test_*.c" >&2; exit 1; }
        break
    done
    LC_ALL=C awk "$litprog" "$root"/tests/test_*.c > "$tmpdir/literals" || exit 1
fi
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
    read -r refs bad broken changed counted < "$tmpdir/count"
    total=$((total + refs))
    total_counts=$((total_counts + counted))
    if [ "$mode" = check ]; then
        LC_ALL=C awk -v doc="$doc" -v lits="$tmpdir/literals" -v countfile="$tmpdir/count" \
            "$labprog" "$doc" || { status=1; continue; }
        read -r labels lbad < "$tmpdir/count"
        total_labels=$((total_labels + labels))
        bad=$((bad + lbad))
        check_links "$doc" > "$tmpdir/count" || status=1
        read -r links lnbad < "$tmpdir/count"
        total_links=$((total_links + links))
        bad=$((bad + lnbad))
        [ "$bad" -eq 0 ] || status=1
        total_bad=$((total_bad + bad))
    elif [ "$broken" -ne 0 ]; then
        echo "doc_refs: $doc: left unchanged ($broken reference(s) cannot be resolved)" >&2
        status=1
    elif [ "$changed" -ne 0 ]; then
        cat "$tmpdir/out" > "$doc" || status=1      # in place: keeps the file's mode
        echo "doc_refs: $doc: updated $changed of its $refs references and $counted line counts"
    else
        echo "doc_refs: $doc: $refs references and $counted line counts, all current"
    fi
done
if [ "$mode" = check ]; then
    if [ "$status" -eq 0 ]; then
        echo "doc_refs: $total references, $total_counts file-map line counts," \
             "$total_labels check labels and $total_links links in $# file(s), all current"
    else
        echo "doc_refs: $total_bad problem(s) in $total reference(s), $total_counts" \
             "file-map line count(s), $total_labels check label(s) and $total_links link(s)" >&2
    fi
fi
exit "$status"
