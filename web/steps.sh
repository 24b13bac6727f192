#!/bin/sh
# web/steps.sh: the Tutorial panel's table (make web): for each step of web/steps.txt, the
# text of its functions cut from the sources (from the line that starts the definition,
# at column 0, to the first line that is "}"), as steps.js: TUTORIAL_STEPS = [{name,
# code: [{file, name, text}]}]. Fails with one line if a function is not found.
# Usage: web/steps.sh web/steps.txt > PAGE_FOLDER/steps.js
set -eu
table=$1
cut_function() {   # FILE FUNCTION: the function's text, or nothing
    awk -v fn="$2" '
        !inside && $0 ~ "^[A-Za-z].*[ *]" fn "\\(" && $0 !~ /;[ \t]*$/ { inside = 1 }
        inside { print }
        inside && $0 == "}" { exit }' "$1"
}
json() {   # stdin as a JSON string
    awk 'BEGIN { printf "\"" } { gsub(/\\/, "&&"); gsub(/"/, "\\\\&"); gsub(/\t/, "\\t");
         printf "%s\\n", $0 } END { printf "\"" }'
}
echo '/* steps.js: written by web/steps.sh from web/steps.txt; do not edit. */'
echo 'const TUTORIAL_STEPS = ['
grep -v '^#' "$table" | while read -r step places; do
    [ -n "$step" ] || continue
    printf '  {name: "%s", code: [\n' "$step"
    for place in $places; do
        file=${place%%:*} fn=${place#*:}
        [ -f "$file" ] || { echo "steps.sh: $table: $step: $file: no such file" >&2; exit 1; }
        text=$(cut_function "$file" "$fn")
        [ -n "$text" ] || { echo "steps.sh: $table: $step: $fn: not found in $file (expected its definition at column 0)" >&2; exit 1; }
        printf '    {file: "%s", name: "%s", text: %s},\n' "$file" "$fn" "$(printf '%s\n' "$text" | json)"
    done
    printf '  ]},\n'
done
echo '];'
