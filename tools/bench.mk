# tools/bench.mk: the speed tables and the attention lab's tables (make bench, bench-kernels,
# bench-attention, attn-table, attn-train-table), included by the Makefile.
#
# Builds the two benchmark tools (tools/gen_model.c: random-weight checkpoints of real
# shapes; tools/probe.c: the machine's measured read bandwidth, FMA and int8 peaks) with the
# Makefile's $(CC) $(BASE) $(CFLAGS) $(LDLIBS), and generates the random-weight models under
# $(B)/bench/ (about 1 GB in all; `make clean` removes them). BENCH_DEPS lists all of it;
# BENCH_ENV passes the paths to tools/bench.sh. int8 files are made by bench.sh itself
# (with ./quantize, when it exists).

$(B)/tools/gen_model: $(B)/tools/gen_model.o $(B)/platform/cli.o
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(B)/tools/probe: $(B)/tools/probe.o
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Random-weight checkpoints, one per gen_model preset (s260k's real file is in ../shared);
# deterministic, so regenerating after a change to gen_model is always safe.
BENCH_MODELS = $(B)/bench/s15m.bin $(B)/bench/s110m.bin $(B)/bench/gpt2-124m.bin
$(BENCH_MODELS): $(B)/bench/%.bin: $(B)/tools/gen_model
	@mkdir -p $(dir $@)
	$(B)/tools/gen_model $* $@

BENCH_DEPS = $(B)/tools/gen_model $(B)/tools/probe $(BENCH_MODELS)

# bench-tools: the four benchmark programs built, none run: check-build builds them, so that
# a rule here cannot go stale unnoticed. Example: make bench-tools
bench-tools: $(B)/tools/gen_model $(B)/tools/probe $(B)/tools/bench_kernels $(B)/tools/bench_attention
# ONE_CPU: the CPU that one-thread figures (bench-kernels, bench.sh's one-thread rows and
# peaks) are held to with taskset, so that they and the peaks come from the same CPU (a
# machine's CPUs need not be alike: docs/performance.md, How to measure): by default the
# first CPU make may run on; empty for none.
ONE_CPU ?= $(shell taskset -pc $$$$ 2>/dev/null | sed -n 's/.*: *\([0-9]*\).*/\1/p')
ONE_CPU_PIN = $(if $(ONE_CPU),$(shell echo '$(ONE_CPU)' | grep -qx '[0-9][0-9]*' && \
                command -v taskset >/dev/null 2>&1 && taskset -c $(ONE_CPU) true 2>/dev/null && \
                echo taskset -c $(ONE_CPU)))
BENCH_ENV = GEN=$(B)/tools/gen_model PROBE=$(B)/tools/probe BENCH_DIR=$(B)/bench \
            ONE_CPU=$(ONE_CPU)

# ab-check: tools/ab_kernels.sh built with this build's compiler and flags and run on this
# checkout against itself (two pairs, two small shapes): the copies must give the same bits,
# so that the tool's build and renaming cannot go stale unnoticed (skipped, and said, off
# x86-64 or without objcopy); and tools/ab_run.sh, two pairs of ./run against itself on the
# shipped model, must print its ratio. make check runs it. Example: make ab-check
ab-check: $(B)/run
	@out=$$(PAIRS=2 sh tools/ab_run.sh $(B)/run $(B)/run weights/model.bin \
	  weights/tokenizer.bin tests/data/llama2c/greedy_s260k_noprompt.txt) || exit 1; \
	if ! echo "$$out" | grep -q '^median B/A [0-9.]* (quartiles [0-9.]*-[0-9.]*) of 2 pairs'; then \
	  echo "$$out"; echo "ab-check: tools/ab_run.sh printed no ratio of 2 pairs"; exit 1; fi; \
	echo "ab-check: tools/ab_run.sh, 2 pairs of ./run against itself, its ratio printed"
	@if [ "$$(uname -m)" = x86_64 ] && command -v objcopy >/dev/null; then \
	  out=$$(CC="$(CC)" CFLAGS="$(CFLAGS)" ROUNDS=2 B=$(B)/ab \
	    sh tools/ab_kernels.sh . . q8:64:128 fp32:64:128) || exit 1; \
	  if [ "$$(echo "$$out" | grep -c '| yes |$$')" != 2 ]; then \
	    echo "$$out"; echo "ab-check: the two copies of one kernel gave different bits"; exit 1; fi; \
	  echo "ab-check: tools/ab_kernels.sh, 2 shapes, the same bits from both copies"; \
	else echo "skipped: ab-check (needs x86-64 and objcopy)"; fi

# mca-check: tools/mca_tiles.sh must model the six loops of the AVX2 build and of an
# AVX-512 VNNI one (Sapphire Rapids: the packed int8 tiles), so that neither goes stale,
# with gcc whatever CC is (the code docs/performance.md's table models; clang unrolls the
# AVX-512 attention loop away); its build is its own, the same for every B, so make check
# runs it once (skipped, and said, off x86-64 or without llvm-mca or gcc).
# Example: make mca-check
mca-check:
	@if [ "$$(uname -m)" = x86_64 ] && command -v gcc >/dev/null && \
	    { command -v llvm-mca-14 || command -v llvm-mca; } >/dev/null; then \
	  out=$$(CC=gcc sh tools/mca_tiles.sh x86-64-v3:haswell sapphirerapids:sapphirerapids) || exit 1; \
	  if [ "$$(echo "$$out" | grep -c '^| [a-z0-9-]* / [a-z]* | [a-z0-9]* [a-z]* (`[a-z0-9_]*`) | [0-9][0-9]* | [0-9.]* | [0-9.]* |$$')" != 12 ]; then \
	    echo "$$out"; echo "mca-check: tools/mca_tiles.sh modelled fewer than 2 x 6 loops"; exit 1; fi; \
	  echo "mca-check: tools/mca_tiles.sh, the 6 loops of the AVX2 and AVX-512 VNNI builds modelled"; \
	else echo "skipped: mca-check (needs x86-64, gcc and llvm-mca)"; fi

# bench-attention: attention-only time per generated token at T = 128 .. 16384 on
# synthetic q/k/v, every variant (tools/bench_attention.c); prints a table, asserts
# nothing. Example: OMP_NUM_THREADS=1 make bench-attention
$(B)/tools/bench_attention: $(B)/tools/bench_attention.o $(B)/attention.o $(B)/lab/attention_spec.o \
                            $(B)/platform/cli.o $(B)/platform/os.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
bench-attention: $(B)/tools/bench_attention
	@echo "machine: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), \
	$$(nproc --all) cores, OMP_NUM_THREADS=$${OMP_NUM_THREADS:-all}"
	@$(B)/tools/bench_attention

# bench-kernels: the matmul kernels alone on one thread (GEMM GFLOP/s, decode GB/s, fp32 and
# int8), to hold against the peaks tools/probe.c measures, on CPU ONE_CPU; asserts nothing.
# Example: make bench-kernels
$(B)/tools/bench_kernels: $(B)/tools/bench_kernels.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
bench-kernels: $(B)/tools/bench_kernels
	@if [ -n "$(ONE_CPU)" ] && [ -z "$(ONE_CPU_PIN)" ] && command -v taskset >/dev/null; then \
	  echo "bench-kernels: ONE_CPU: cannot hold a process to CPU '$(ONE_CPU)' (expected one" \
	       "of this machine's CPUs, e.g. 0, or empty for none)" >&2; exit 2; fi
	@echo "bench-kernels: $$(date -u '+%Y-%m-%d %H:%M UTC'), $$(grep -m1 'model name' /proc/cpuinfo \
	  | cut -d: -f2 | sed 's/^ //'), $(if $(ONE_CPU_PIN),held to CPU $(ONE_CPU),not held to a CPU)"
	@$(ONE_CPU_PIN) $(B)/tools/bench_kernels

# attn-table: every attention variant and its sweep on the shipped model over the
# validation slice, then the attention-only cost table; writes both into docs/lab.md
# (tools/attn_table.sh; `sh tools/attn_table.sh bench` the second alone). Minutes.
# Example: make attn-table
attn-table: all $(B)/tools/bench_attention
	@BENCH=$(B)/tools/bench_attention sh tools/attn_table.sh

# attn-train-table: every attention variant trained from scratch with ./train, the same
# shape, data and steps (tools/attn_train_table.sh): the tables into docs/attention.md, a
# picture for each context (docs/img/attn_trained*.svg). About 6 hours on two idle cores;
# its phases run alone with `sh tools/attn_train_table.sh train|speed|equal|table|picture`.
# Example: make attn-train-table
attn-train-table: all $(B)/tools/gen_model
	@GEN=$(B)/tools/gen_model sh tools/attn_train_table.sh

# bench: end-to-end speed (tokens/s, 1 and 2 threads) and peak memory of ./run on the
# shipped and reference models; prints a table, asserts nothing. Example: make bench
bench: all bench-attention bench-kernels $(BENCH_DEPS)
	@$(BENCH_ENV) sh tools/bench.sh

.PHONY: bench bench-attention bench-kernels bench-tools ab-check mca-check attn-table attn-train-table
