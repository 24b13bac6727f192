# doc_table.sh: what the table scripts share (sourced: . tools/doc_table.sh): the line that
# labels a measured table, and writing a table into its place in a document.

# The label line of a table: date, CPU (name, family and model, cores, the widest SIMD
# that -march=native can use), threads, commit, and the command ($1).
label() {
    cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')
    family=$(grep -m1 '^cpu family' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')
    model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //')
    case $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null) in
        *avx512f*) isa=AVX-512 ;;
        *avx2*) isa=AVX2 ;;
        *) isa="no AVX2" ;;
    esac
    if commit=$(git rev-parse --short HEAD 2>/dev/null); then
        git diff --quiet HEAD -- || commit="$commit with local changes"
    else
        commit="unknown (not a git checkout)"
    fi
    echo "Measured $(date +%Y-%m-%d) on ${cpu:-an unknown CPU} (family ${family:-?}," \
         "model ${model:-?}; $(nproc 2>/dev/null || echo '?') cores, $isa)," \
         "OMP_NUM_THREADS=${OMP_NUM_THREADS:-all}, commit $commit: \`$1\`."
}

# Replaces the lines between <!-- NAME:begin --> and <!-- NAME:end --> of document DOC ($3)
# by the file TABLE ($2): replace_between NAME TABLE DOC.
replace_between() {
    grep -q "^<!-- $1:begin -->\$" "$3" || {
        echo "$1: $3: no <!-- $1:begin --> line; the table is only in $2" >&2
        return 1
    }
    awk -v table="$2" -v begin="<!-- $1:begin -->" -v end="<!-- $1:end -->" '
        $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
        $0 == end { skip = 0 }
        !skip { print }' "$3" > "$3.tmp" && cat "$3.tmp" > "$3" && rm -f "$3.tmp"
    echo "$1: written into $3" >&2
}
