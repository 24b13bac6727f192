# one_cpu.sh: the CPU the speed scripts hold their one-thread runs to (sourced: .
# tools/one_cpu.sh by tools/bench.sh, tools/compare.sh and tools/ab_kernels.sh). A
# machine's CPUs need not be alike (docs/performance.md, How to measure).

# one_cpu NAME: ONE_CPU, if unset, becomes the first CPU this shell may run on (taskset
# -pc: a container's CPU set may leave out CPU 0); without taskset (util-linux's) it
# becomes empty: no pinning. A set ONE_CPU that is not one CPU's number (a list or a range
# holds nothing to one CPU) or that no process can be held to is one line on stderr, from
# NAME, and exit 2.
one_cpu() {
    if ! command -v taskset >/dev/null 2>&1; then
        ONE_CPU=
    elif [ -z "${ONE_CPU+set}" ]; then
        ONE_CPU=$(taskset -pc $$ 2>/dev/null | sed -n 's/.*: *\([0-9]*\).*/\1/p')
    fi
    case $ONE_CPU in *[!0-9]*) ONE_CPU_BAD=1;; *) ONE_CPU_BAD=;; esac   # one number: not 0-1
    if [ -n "$ONE_CPU" ] && { [ -n "$ONE_CPU_BAD" ] || ! taskset -c "$ONE_CPU" true 2>/dev/null; }; then
        echo "$1: ONE_CPU: cannot hold a process to CPU '$ONE_CPU' (expected one of this" \
             "machine's CPUs, e.g. 0, or empty for none)" >&2
        exit 2
    fi
}
