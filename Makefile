# Makefile for the engine. Every target has a comment: when to use it, and an example.
#
# The default build is the fast one users get (-O3 for the host's own CPU, OpenMP on
# where the compiler has it); the tests run on that same build. No -Ofast/-ffast-math
# anywhere: they reorder float sums and break NaN checks.

CC ?= cc
# $(call accepts,FLAG): FLAG if $(CC) compiles an empty file with it and no warning.
accepts = $(shell $(CC) $(1) -Werror -x c -c /dev/null -o /dev/null >/dev/null 2>&1 && echo $(1))
# The default CFLAGS: -O3 and the host's CPU, -march=native where $(CC) takes it, else
# -mcpu=native (what clang for AArch64 takes, Apple clang 14 and older among them), else
# neither (a cross compiler). make CFLAGS=... replaces them.
ifeq ($(origin CFLAGS),undefined)
  NATIVE := $(call accepts,-march=native)
  ifeq ($(NATIVE),)
    NATIVE := $(call accepts,-mcpu=native)
  endif
  CFLAGS := -O3 $(NATIVE)
endif
# -ffp-contract=off: a*b+c in plain C is never fused behind our back, so gcc and clang
# round the portable code alike; the SIMD kernels fuse explicitly with FMA intrinsics.
# -D_DARWIN_C_SOURCE: on macOS, _POSIX_C_SOURCE alone hides mkdtemp (the tests' temporary
# folders); other systems ignore it.
# -I: the engine's headers at the top, the attention lab's in lab/, the trainer's in
# trainer/; a file includes any of them by its name.
# -pthread: the thread pool (parallel/pool.c) is POSIX threads without OpenMP, and waits on a
# pthread condition variable in every build; BASE is in every compile and link line
# (tests, tools, fuzz and the cross builds too).
BASE = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DARWIN_C_SOURCE -I. -Ilab -Itrainer -Wall \
       -Wextra -Wpedantic -Wshadow -Wdouble-promotion -Wstrict-prototypes -ffp-contract=off \
       -pthread
HEADERS = $(wildcard *.h lab/*.h trainer/*.h simd/*.h parallel/*.h)
LDLIBS = -lm
# OpenMP (parallel matmul rows and attention heads) is on where $(CC) builds and links an
# OpenMP program (Apple clang does not); OMP=0 builds without it, runs kernels_run's pool
# on POSIX threads, and gives bit-identical results: make OMP=0
ifeq ($(origin OMP),undefined)
  OMP := $(shell printf '\043include <omp.h>\nint main(void) { return omp_get_max_threads(); }\n' \
           | $(CC) -fopenmp -x c - -o /dev/null >/dev/null 2>&1 && echo 1 || echo 0)
  ifeq ($(OMP),0)
    $(info make: $(CC) cannot build with -fopenmp: building without OpenMP, as with OMP=0)
  endif
endif
ifeq ($(OMP),1)
  BASE += -fopenmp
else
  BASE += -Wno-unknown-pragmas
endif
B = build
# `make` with no target builds the programs (the first rule below would otherwise win)
.DEFAULT_GOAL := all
# What `make run` generates from: the shipped model (weights/README.md).
RUN_ARGS ?= weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n 120 -s 42

# ---- objects, one per module, with the headers each depends on ----
# Every object also depends on $(B)/flags, a file holding the compiler and flags it was
# built with, rewritten only when they change: `make test OMP=0` after a default build
# rebuilds everything instead of testing the OpenMP objects again.
FLAGS_STAMP = $(B)/flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(B)
	@echo '$(CC) $(BASE) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(BASE) $(CFLAGS)' > $@
FORCE:

$(B)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@

$(B)/attention.o: attention.c attention.h hash.h kernels.h quant.h
$(B)/quant.o: quant.c quant.h simd/simd.h kernels.h
$(B)/kernels.o: kernels.c kernels.h quant.h parallel/pool.h simd/simd.h
# the thread pool, the instruction sets' kernels (simd/) and the trainer's kernels
$(B)/parallel/pool.o: parallel/pool.c parallel/pool.h simd/simd.h kernels.h quant.h
$(B)/simd/vec_kernels.o: simd/vec_kernels.c simd/vec.h simd/simd.h kernels.h quant.h hash.h
$(B)/simd/quant_x86.o: simd/quant_x86.c simd/simd.h kernels.h quant.h
$(B)/simd/quant_neon.o: simd/quant_neon.c simd/simd.h kernels.h quant.h
# The trainer's kernels are linked into every program (block.c and attention.c hold the
# backward passes), so their object sits with the kernels', not in $(B)/trainer/, which
# holds the train program's.
$(B)/kernels/train_kernels.o: trainer/train_kernels.c kernels.h quant.h hash.h simd/simd.h \
                              $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@
$(B)/checkpoint.o: checkpoint.c checkpoint.h kernels.h quant.h os.h
$(B)/os.o: os.c os.h
$(B)/block.o: block.c block.h checkpoint.h kernels.h quant.h
$(B)/model.o: model.c model.h block.h checkpoint.h kernels.h quant.h attention.h
$(B)/unicode.o: unicode.c unicode.h
$(B)/hash.o: hash.c hash.h
$(B)/tokenizer.o: tokenizer.c tokenizer.h hash.h os.h unicode.h
$(B)/sampler.o: sampler.c sampler.h
# lab/attnmap.c includes its explorer page, lab/attnmap_page.html, as C string literals sed
# writes into the build folder: one per line (C11 promises no more than 4095 bytes in a
# literal), with \ " and ? escaped (so that no trigraph forms).
$(B)/attnmap_page.inc: lab/attnmap_page.html
	@mkdir -p $(B)
	sed -e 's/[\\"?]/\\&/g' -e 's/^/"/' -e 's/$$/\\n",/' lab/attnmap_page.html > $@.tmp
	@mv $@.tmp $@
$(B)/lab/attnmap.o: lab/attnmap.c lab/attnmap.h unicode.h $(B)/attnmap_page.inc $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -I$(B) -c $< -o $@
$(B)/lab/attention_spec.o: lab/attention_spec.c lab/attention_spec.h attention.h cli.h
$(B)/lab/eval.o: lab/eval.c lab/eval.h model.h checkpoint.h kernels.h quant.h attention.h \
                 tokenizer.h os.h
$(B)/generate.o: generate.c generate.h model.h checkpoint.h kernels.h quant.h attention.h os.h \
                 tokenizer.h sampler.h lab/attnmap.h unicode.h
$(B)/run.o: run.c model.h checkpoint.h kernels.h quant.h attention.h lab/attention_spec.h \
            lab/eval.h os.h tokenizer.h sampler.h cli.h generate.h lab/attnmap.h hash.h
$(B)/quantize.o: quantize.c checkpoint.h kernels.h quant.h cli.h os.h
$(B)/cli.o: cli.c cli.h
$(B)/trainer/bpe.o: trainer/bpe.c trainer/bpe.h hash.h tokenizer.h os.h
TRAIN_HEADERS = trainer/train.h trainer/train_model.h trainer/train_backward.h \
                trainer/train_optim.h model.h checkpoint.h \
                kernels.h quant.h attention.h
$(B)/trainer/train.o: trainer/train.c $(TRAIN_HEADERS) tokenizer.h trainer/bpe.h cli.h os.h \
                      lab/attention_spec.h
$(B)/trainer/train_model.o: trainer/train_model.c block.h hash.h $(TRAIN_HEADERS)
$(B)/trainer/train_backward.o: trainer/train_backward.c $(TRAIN_HEADERS)
$(B)/trainer/train_optim.o: trainer/train_optim.c $(TRAIN_HEADERS) hash.h os.h
$(B)/tests/check.o: tests/check.c tests/check.h
$(B)/tests/attention_kernels.o: tests/attention_kernels.c tests/attention_kernels.h
$(B)/tests/test_attention_variants.o: tests/attention_kernels.h
# the trainer library (what tests/test_train.c links; train.o adds the program)
TRAIN_LIB = $(B)/trainer/train_model.o $(B)/trainer/train_backward.o $(B)/trainer/train_optim.o
# a test may include any header, so every test object depends on all of them
$(B)/tests/%.o: tests/%.c tests/check.h $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@

QUANT = $(B)/quant.o $(B)/simd/quant_x86.o $(B)/simd/quant_neon.o
KERNELS = $(B)/kernels.o $(B)/parallel/pool.o $(B)/simd/vec_kernels.o \
          $(B)/kernels/train_kernels.o $(QUANT)
CORE = $(B)/attention.o $(B)/block.o $(B)/model.o $(B)/checkpoint.o $(B)/os.o $(KERNELS)
TOK = $(B)/tokenizer.o $(B)/unicode.o $(B)/hash.o $(B)/os.o

# the fuzz targets (tests/fuzz/fuzz.mk): make fuzz, make fuzz-smoke, make fuzz-replay
include tests/fuzz/fuzz.mk

# all: build ./run, ./train and ./quantize (default). Example: make
all: $(B)/run $(B)/train $(B)/quantize
	@# rm first: a copy onto a binary that is running (a long ./train) fails with ETXTBSY
	@cmp -s $(B)/run run || { rm -f run && cp $(B)/run run; }
	@cmp -s $(B)/train train || { rm -f train && cp $(B)/train train; }
	@cmp -s $(B)/quantize quantize || { rm -f quantize && cp $(B)/quantize quantize; }

$(B)/quantize: $(B)/quantize.o $(B)/cli.o $(B)/checkpoint.o $(B)/os.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(B)/run: $(B)/run.o $(B)/cli.o $(B)/sampler.o $(B)/lab/attention_spec.o $(B)/lab/eval.o \
          $(B)/generate.o $(B)/lab/attnmap.o $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# run: build ./run (only it), then generate text from the shipped model.
# Example: make run   (or: make run RUN_ARGS="...")
run: $(B)/run
	@cmp -s $(B)/run run || { rm -f run && cp $(B)/run run; }
	./run $(RUN_ARGS)

# help: the targets, one line each (each has its comment here). Example: make help
.PHONY: help
help:
	@echo "make targets (each has a comment in the Makefile saying when to use it):"
	@echo "  make                  build ./run, ./train and ./quantize"
	@echo "  make run              build ./run, then generate from the shipped model"
	@echo "                        (RUN_ARGS=\"...\" replaces the flags)"
	@echo "  make test             build everything, then run every test program"
	@echo "  make tutorial         build ./tutorial, the numbers of docs/tutorial.md"
	@echo "  make tutorial-check   the tutorial's commands against its text"
	@echo "  make debug            the tests under AddressSanitizer and UBSan"
	@echo "  make valgrind         the tests under valgrind's memcheck (minutes)"
	@echo "  make faults           the programs killed at each write, rename and fsync"
	@echo "  make fuzz, fuzz-smoke the fuzz targets (tests/fuzz); fuzz-replay their corpora"
	@echo "  make test-aarch64, test-i686  the tests on other architectures (tests/cross.mk)"
	@echo "  make train            train the shipped model again into weights/ (half an hour)"
	@echo "  make bench            speed tables; bench-kernels, bench-attention: their parts"
	@echo "  make attn-table       the attention lab's tables, written into docs/lab.md"
	@echo "  make attn-train-table every variant trained from scratch (4 h), docs/attention.md"
	@echo "  make docs-figures     the tutorial's pictures (docs/img/)"
	@echo "  make page-check       the explorer page's self-test in headless Chromium"
	@echo "  make docs-check       the docs checked against the code; docs-refs rewrites them"
	@echo "  make clean            remove every build product"
	@echo "  make help             this list"
	@echo "Variables: OMP=0 (no OpenMP), B=DIR (build folder), CC=..., CFLAGS=..."

$(B)/train: $(B)/trainer/train.o $(TRAIN_LIB) $(B)/cli.o $(B)/trainer/bpe.o \
            $(B)/lab/attention_spec.o $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# tutorial: build ./tutorial (lab/tutorial.c), the tutorial's own program: `./tutorial STEP`
# prints the numbers of one step of docs/tutorial.md, computed by the engine's code, and
# `./tutorial svg NAME` draws one of its pictures. Example: make tutorial && ./tutorial kernel
$(B)/lab/tutorial.o $(B)/lab/tutorial_figures.o: lab/tutorial.h $(HEADERS)
$(B)/tutorial: $(B)/lab/tutorial.o $(B)/lab/tutorial_figures.o $(TRAIN_LIB) $(B)/sampler.o \
               $(B)/cli.o $(B)/lab/attention_spec.o $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
tutorial: $(B)/tutorial
	@cmp -s $(B)/tutorial tutorial || { rm -f tutorial && cp $(B)/tutorial tutorial; }

# tutorial-check: runs every command docs/tutorial.md shows with its output and compares
# (tests/tutorial_check.sh); a short training run when Tiny Shakespeare is at hand, else
# says skipped. make test runs it. Example: make tutorial-check
tutorial-check: all tutorial
	@sh tests/tutorial_check.sh

# every step of ./tutorial, for `make debug` (which runs each under the sanitizers)
TUTORIAL_STEPS = tokens merges embed rope kernel attend qkv heads mask cache norm mlp block \
                 sample next loss backward adamw

# train: build, then train the shipped model (tokenizer and GPT) from scratch into
# weights/, replacing the files there (--force), as weights/README.md records.
# Example: make train TRAIN_DATA=path/to/text.txt
TRAIN_DATA ?= $(firstword $(wildcard data/tinyshakespeare.txt) ../shared/data/tinyshakespeare.txt)
TRAIN_ARGS ?= --force -o weights/model.bin
train: all
	./train -d $(TRAIN_DATA) $(TRAIN_ARGS)

# ---- the documentation's pictures and line references ----
# docs-figures: the tutorial's pictures (docs/img/*.svg): its diagrams and worked examples
# (./tutorial svg NAME), and heatmaps of the shipped model's last layer, head 2, on one
# text (-n 0: the prompt alone, so every variant draws the same tokens): exact attention,
# a window of 16 and strided l = 8. Example: make docs-figures
DOC_PROMPT = ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.
DOC_RUN = printf '$(DOC_PROMPT)' | ./run weights/model.bin -f - -n 0 --layer 9 --head 2
DOC_FIGURES = kernel qkv heads mask cache block sampling
docs-figures: all tutorial
	@mkdir -p docs/img
	for f in $(DOC_FIGURES); do ./tutorial svg $$f > docs/img/$$f.svg || exit 1; done
	$(DOC_RUN) --attn-map docs/img/exact.svg
	$(DOC_RUN) --attn window:w=16 --attn-map docs/img/window.svg
	$(DOC_RUN) --attn strided:l=8 --attn-map docs/img/strided.svg

# docs-check: every "FILE:START-END `function`" reference in the docs still spans the
# function, every file-map line count is current, every quoted check label (`"LABEL"`) is
# one the tests print, every link stays inside the repository and resolves
# (tools/doc_refs.sh), and docs/cli.md's help texts are what the programs print
# (tools/doc_help.sh), and every project name a comment or a doc gives (a function, a
# type, a macro) exists in the code (tools/doc_names.sh); make test runs it.
# Example: make docs-check
DOCS = README.md $(wildcard docs/*.md) weights/README.md
docs-check: $(B)/run $(B)/train $(B)/quantize
	@sh tools/doc_refs.sh check $(DOCS)
	@sh tools/doc_help.sh check $(B) $(DOCS)
	@sh tools/doc_names.sh $(DOCS)

# docs-refs: rewrite those line numbers, line counts and help texts after the code
# changed. Example: make docs-refs
docs-refs: $(B)/run $(B)/train $(B)/quantize
	sh tools/doc_refs.sh update $(DOCS)
	sh tools/doc_help.sh update $(B) $(DOCS)

# ---- tests: one binary per module, each printing "NAME: N passed, N failed" ----
TESTS = $(B)/tests/test_kernels $(B)/tests/test_quant $(B)/tests/test_attention $(B)/tests/test_attention_variants \
        $(B)/tests/test_attention_train $(B)/tests/test_model \
        $(B)/tests/test_tokenizer $(B)/tests/test_tokenizer_llama $(B)/tests/test_sampler $(B)/tests/test_cli \
        $(B)/tests/test_train $(B)/tests/test_eval $(B)/tests/test_generate \
        $(B)/tests/test_attnmap
$(B)/tests/test_kernels: $(B)/tests/test_kernels.o $(B)/tests/check.o $(KERNELS)
$(B)/tests/test_quant: $(B)/tests/test_quant.o $(B)/tests/check.o $(QUANT)
$(B)/tests/test_attention: $(B)/tests/test_attention.o $(B)/tests/check.o $(B)/attention.o \
                           $(KERNELS)
$(B)/tests/test_attention_variants: $(B)/tests/test_attention_variants.o $(B)/tests/check.o \
                                    $(B)/tests/attention_kernels.o $(B)/attention.o $(KERNELS)
$(B)/tests/test_attention_train: $(B)/tests/test_attention_train.o $(B)/tests/check.o \
                                 $(B)/attention.o $(KERNELS)
$(B)/tests/test_model: $(B)/tests/test_model.o $(B)/tests/check.o $(CORE)
$(B)/tests/test_eval: $(B)/tests/test_eval.o $(B)/tests/check.o $(B)/lab/eval.o $(CORE) $(TOK)
$(B)/tests/test_generate: $(B)/tests/test_generate.o $(B)/tests/check.o $(B)/generate.o \
                          $(B)/lab/attnmap.o $(B)/sampler.o $(CORE) $(TOK)
$(B)/tests/test_tokenizer: $(B)/tests/test_tokenizer.o $(B)/tests/check.o $(TOK)
$(B)/tests/test_tokenizer_llama: $(B)/tests/test_tokenizer_llama.o $(B)/tests/check.o $(TOK)
$(B)/tests/test_sampler: $(B)/tests/test_sampler.o $(B)/tests/check.o $(B)/sampler.o
$(B)/tests/test_attnmap: $(B)/tests/test_attnmap.o $(B)/tests/check.o $(B)/lab/attnmap.o \
                        $(B)/unicode.o
$(B)/tests/test_cli: $(B)/tests/test_cli.o $(B)/tests/check.o
$(B)/tests/test_train: $(B)/tests/test_train.o $(B)/tests/check.o $(TRAIN_LIB) $(B)/cli.o \
                       $(B)/trainer/bpe.o $(B)/lab/attention_spec.o \
                       $(CORE) $(TOK)
$(TESTS):
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# test: build, then run every test binary; exits non-zero if any check fails.
# Reference-data checks read ../shared and say "skipped" without it. Example: make test
# It first replays every fuzz target's regression corpus and seeds (tests/fuzz).
test: all $(TESTS) $(FUZZ_REPLAY) $(FUZZ_SEEDS)/.stamp docs-check tutorial-check
	@$(FUZZ_ENV) FUZZ_BIN=$(B)/fuzz sh tests/fuzz/fuzz.sh replay $(FUZZ_TARGETS)
	@RUN=$(B)/run TRAIN=$(B)/train QUANTIZE=$(B)/quantize sh tests/run_all.sh $(TESTS)

# debug: the whole suite under AddressSanitizer and UBSan (own build folder, no
# OpenMP so that no runtime library hides a report). Example: make debug
debug:
	$(MAKE) B=build/debug OMP=0 CFLAGS="-O1 -g -fsanitize=address,undefined \
	  -fno-omit-frame-pointer -fno-sanitize-recover=all" debug-tests

debug-tests: $(B)/run $(B)/train $(B)/quantize $(B)/tutorial $(TESTS) $(FUZZ_REPLAY) \
             $(FUZZ_SEEDS)/.stamp
	@$(FUZZ_ENV) FUZZ_BIN=$(B)/fuzz sh tests/fuzz/fuzz.sh replay $(FUZZ_TARGETS)
	@for s in $(TUTORIAL_STEPS); do $(B)/tutorial $$s > /dev/null || \
	  { echo "FAIL - $(B)/tutorial $$s"; exit 1; }; done; \
	  echo "ok - every tutorial step ran under the sanitizers: $(TUTORIAL_STEPS)"
	@RUN=$(B)/run TRAIN=$(B)/train QUANTIZE=$(B)/quantize sh tests/run_all.sh $(TESTS)

# faults: the fault-injection pass (tests/faults.sh): run, train and quantize killed at
# each of their write, rename and fsync calls, then a full and a read-only file system;
# prints the table, fails if a point lost data. Needs strace and (for the file systems)
# unshare with privileges, each skipped with a message otherwise. About 30 s.
# Example: make faults
faults: all
	@bash tests/faults.sh $(B)

# page-check: the explorer page in headless Chromium (tools/page_check.sh): two maps at
# 1400 and 600 px wide, each running the page's own #selftest (hovering a token, Tab and
# Enter, the weight under the pointer, an edited #token=, nothing wider than the window)
# with no console message. Installs Debian's chromium when missing and root, else says
# skipped. About 10 s. Example: make page-check
page-check: all
	@bash tools/page_check.sh $(B)
.PHONY: page-check

# the benchmark's tools and random-weight models (tools/bench.mk)
include tools/bench.mk

# valgrind: memcheck (errors and leaks are failures) on a build valgrind can run (AVX2, not
# AVX-512, which valgrind 3.19 does not decode; no OpenMP) over every test but test_train
# and test_eval (their training runs and full evaluation take 5+ minutes each under
# valgrind; the sanitizer build covers them), with test_model on the repository's own
# reference files only, and test_cli running ./run itself under valgrind, so every error
# path of the program is checked. About 3 minutes. Example: make valgrind
VALGRIND = valgrind -q --error-exitcode=9 --leak-check=full \
           --errors-for-leak-kinds=definite,indirect
VG_TESTS = test_kernels test_quant test_attention test_attention_variants \
           test_attention_train test_sampler \
           test_tokenizer test_tokenizer_llama test_model test_cli test_generate test_attnmap
valgrind:
	$(MAKE) B=build/valgrind OMP=0 CFLAGS="-O2 -g -mavx2 -mfma" build/valgrind/run \
	  build/valgrind/quantize $(addprefix build/valgrind/tests/,$(VG_TESTS))
	@SHARED_DIR=/nonexistent RUN="$(VALGRIND) build/valgrind/run" WRAP="$(VALGRIND)" \
	  QUANTIZE="$(VALGRIND) build/valgrind/quantize" \
	  sh tests/run_all.sh $(addprefix build/valgrind/tests/,$(VG_TESTS))

# the other architectures (tests/cross.mk): make test-aarch64, test-aarch64-all, test-i686
include tests/cross.mk

# bench-attention: attention-only time per generated token at T = 128 .. 16384 on
# synthetic q/k/v, every variant (tools/bench_attention.c); prints a table, asserts
# nothing. Example: OMP_NUM_THREADS=1 make bench-attention
$(B)/tools/bench_attention: $(B)/tools/bench_attention.o $(B)/attention.o $(B)/lab/attention_spec.o \
                            $(B)/cli.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/tools/bench_attention.o: tools/bench_attention.c attention.h lab/attention_spec.h
bench-attention: $(B)/tools/bench_attention
	@echo "machine: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), \
	$$(nproc --all) cores, OMP_NUM_THREADS=$${OMP_NUM_THREADS:-all}"
	@$(B)/tools/bench_attention

# bench-kernels: the matmul kernels alone on one thread (GEMM GFLOP/s, decode GB/s, fp32 and
# int8), to hold against the peaks tools/probe.c measures; asserts nothing.
# Example: make bench-kernels
$(B)/tools/bench_kernels: $(B)/tools/bench_kernels.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/tools/bench_kernels.o: tools/bench_kernels.c kernels.h quant.h
bench-kernels: $(B)/tools/bench_kernels
	@$(B)/tools/bench_kernels

# attn-table: every attention variant and its sweep on the shipped model over the
# validation slice, then the attention-only cost table; writes both into docs/lab.md
# (tools/attn_table.sh; `sh tools/attn_table.sh bench` the second alone). Minutes.
# Example: make attn-table
attn-table: all $(B)/tools/bench_attention
	@BENCH=$(B)/tools/bench_attention sh tools/attn_table.sh

# attn-train-table: every attention variant trained from scratch with ./train, the same
# shape, data and steps (tools/attn_train_table.sh): the table into docs/attention.md, the
# picture docs/img/attn_trained.svg. About 4 hours on two idle cores; its phases run alone
# with `sh tools/attn_train_table.sh train|speed|equal|table`. Example: make attn-train-table
attn-train-table: all $(B)/tools/gen_model
	@GEN=$(B)/tools/gen_model sh tools/attn_train_table.sh

# bench: end-to-end speed (tokens/s, 1 and 2 threads) and peak memory of ./run on the
# shipped and reference models; prints a table, asserts nothing. Example: make bench
bench: all bench-attention bench-kernels $(BENCH_DEPS)
	@$(BENCH_ENV) sh tools/bench.sh

# clean: remove every build product. Example: make clean
clean:
	rm -rf build run train quantize tutorial

.PHONY: FORCE all run train tutorial tutorial-check test debug debug-tests valgrind bench bench-attention bench-kernels attn-table attn-train-table clean docs-figures docs-check docs-refs faults
