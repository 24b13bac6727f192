# Makefile for the engine. Every target has a comment: when to use it, and an example.
# `make help` lists them. The parts a reader of the engine need not read are included
# from mk/ (the compiler and its flags, each object's headers, the tests' links, the
# docs' checks) and from beside what they serve (tests/fuzz/fuzz.mk, tests/cross.mk,
# tools/bench.mk).
#
# The default build is the fast one users get (-O3 for the host's own CPU, OpenMP on
# where the compiler has it; mk/config.mk); the tests run on that same build.

include mk/config.mk
include mk/deps.mk
# `make` with no target builds the programs (the first rule below would otherwise win)
.DEFAULT_GOAL := all
# What `make run` generates from: the shipped model (weights/README.md).
RUN_ARGS ?= weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n 120 -s 42

# ---- objects, one per module (mk/deps.mk: the headers each depends on) ----
$(B)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# quant_x86.o asks simd/cpu.o whether the core wants decode's lines asked for ahead
QUANT = $(B)/quant.o $(B)/simd/quant_x86.o $(B)/simd/quant_neon.o $(B)/simd/cpu.o
# the pool asks platform/os.o for the cores this process may use
KERNELS = $(B)/kernels.o $(B)/parallel/pool.o $(B)/parallel/products.o \
          $(B)/simd/vec_kernels.o $(B)/trainer/train_kernels.o $(QUANT) $(B)/platform/os.o
TOK = $(B)/tokenizer.o $(B)/unicode/unicode.o $(B)/hash.o $(B)/platform/os.o
# checkpoint.c reads GGUF files through formats/gguf.c, which builds their tokenizers (tokenizer.c)
CKPT = $(B)/checkpoint.o $(B)/formats/gguf.o $(TOK)
CORE = $(B)/attention.o $(B)/block.o $(B)/model.o $(CKPT) $(KERNELS)
# the lab's parts of ./run (lab/run_lab.c wires them in): the variants' specs, --eval,
# the heatmaps and --attn-top
RUN_LAB = $(B)/lab/run_lab.o $(B)/lab/attention_spec.o $(B)/lab/eval.o $(B)/lab/attnmap.o
# the trainer library (what the trainer's tests link; train.o adds the program)
TRAIN_LIB = $(B)/trainer/train_model.o $(B)/trainer/train_backward.o $(B)/trainer/train_optim.o

# ---- the programs ----
$(B)/run: $(B)/run.o $(B)/platform/cli.o $(B)/sampler.o $(B)/generate.o $(RUN_LAB) $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/train: $(B)/trainer/train.o $(TRAIN_LIB) $(B)/platform/cli.o $(B)/trainer/bpe.o \
            $(B)/lab/attention_spec.o $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/quantize: $(B)/quantize.o $(B)/platform/cli.o $(CKPT) $(B)/attention.o $(KERNELS)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/tutorial: $(B)/lab/tutorial.o $(B)/lab/tutorial_figures.o $(TRAIN_LIB) $(B)/sampler.o \
               $(B)/platform/cli.o $(B)/lab/attention_spec.o $(CORE) $(TOK)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# $(call install,NAME): copy $(B)/NAME to ./NAME when it differs. rm first: a copy onto
# a binary that is running (a long ./train) fails with ETXTBSY.
install = cmp -s $(B)/$(1) $(1) || { rm -f $(1) && cp $(B)/$(1) $(1); }

# all: build ./run, ./train and ./quantize (default). Example: make
all: $(B)/run $(B)/train $(B)/quantize
	@$(call install,run)
	@$(call install,train)
	@$(call install,quantize)

# run: build ./run (only it), then generate text from the shipped model.
# Example: make run   (or: make run RUN_ARGS="...")
run: $(B)/run
	@$(call install,run)
	./run $(RUN_ARGS)

# train: build ./train (only it), the trainer; it trains nothing (make retrain does).
# Example: make train && ./train --help
train: $(B)/train
	@$(call install,train)

# tutorial: build ./tutorial (lab/tutorial.c), the tutorial's own program: `./tutorial STEP`
# prints the numbers of one step of docs/tutorial.md, computed by the engine's code, and
# `./tutorial svg NAME` draws one of its pictures. Example: make tutorial && ./tutorial kernel
tutorial: $(B)/tutorial
	@$(call install,tutorial)

# retrain: build, then train the shipped model (tokenizer and GPT) again from scratch, as
# weights/README.md records, into $(B)/retrain/ (model.bin, its .state, tokenizer.bin);
# weights/ is left as it is, and the last line says how to install the result there.
# About half an hour on two cores. Example: make retrain TRAIN_DATA=path/to/text.txt
TRAIN_DATA ?= $(firstword $(wildcard data/tinyshakespeare.txt) ../shared/data/tinyshakespeare.txt)
RETRAIN_OUT = $(B)/retrain
RETRAIN_ARGS ?= --force -o $(RETRAIN_OUT)/model.bin
retrain: all
	@mkdir -p $(RETRAIN_OUT)
	./train -d $(TRAIN_DATA) $(RETRAIN_ARGS)
	@echo "retrain: to make it the shipped model: cp $(RETRAIN_OUT)/model.bin" \
	  "$(RETRAIN_OUT)/tokenizer.bin weights/"

# ---- tests and checks ----
# the fuzz targets (tests/fuzz/fuzz.mk): make fuzz, make fuzz-smoke, make fuzz-replay
include tests/fuzz/fuzz.mk
# the unit tests and how each links (mk/tests.mk; also make debug, valgrind, faults)
include mk/tests.mk
# the docs' checks and pictures, tutorial-check, page-check (mk/docs.mk)
include mk/docs.mk
# the other architectures (tests/cross.mk): make test-aarch64, test-aarch64-all, test-i686
include tests/cross.mk
# the speed and lab tables (tools/bench.mk): make bench, bench-kernels, attn-table, ...
include tools/bench.mk
# the page: the engine compiled to WebAssembly (mk/web.mk): make web, web-check
include mk/web.mk

# test: build, then run every unit test program (tests/run_all.sh); exits non-zero if any
# check fails. Reference-data checks read ../shared and say "skipped" without it. About 1.5
# minutes on two cores. Example: make test
test: all $(B)/tutorial $(TESTS)
	@RUN=$(B)/run TRAIN=$(B)/train QUANTIZE=$(B)/quantize TUTORIAL=$(B)/tutorial \
	  sh tests/run_all.sh $(TESTS)

# check-build: the checks beyond the unit tests that depend on the build (CI runs them in
# each of its builds): the tutorial's commands, the fuzz corpora replayed, the benchmark
# tools built, no fused multiply-add outside simd/ (fused-check). Example: make check-build
check-build: tutorial-check fuzz-replay bench-tools fused-check

# fused-check: the engine's objects outside simd/ hold no fused multiply-add instruction
# (tools/fused_check.sh: the compiler may fuse despite -ffp-contract=off). Example: make
# fused-check
fused-check: all
	@sh tools/fused_check.sh $(B)

# check: everything beyond the unit tests (CI runs it after make test): check-build, the
# docs against the code (docs-check), README.md's commands as written (readme-check), the
# A/B tools run (ab-check), the
# hot loops modelled by llvm-mca (mca-check), the explorer page (page-check), the
# WebAssembly page (web-check), fault injection (faults), and the aarch64 and i686 builds
# (tests/cross.mk), each cross leg skipped with a message when its compiler or qemu is
# missing, and on x86-64 the AVX2 build's greedy texts against this one's (test-x86-widths)
# and, on a CPU with AVX-VNNI, that build's int8 tests and text (test-x86-vnni). Stops at the
# first failure. Minutes. Example: make check
check: check-build docs-check readme-check ab-check mca-check page-check web-check faults
	@if command -v $(AARCH64_CC) >/dev/null && command -v qemu-aarch64 >/dev/null; then \
	  $(MAKE) test-aarch64; else \
	  echo "skipped: make test-aarch64 (needs $(AARCH64_CC) and qemu-aarch64)"; fi
	@if command -v $(I686_CC) >/dev/null; then $(MAKE) test-i686; else \
	  echo "skipped: make test-i686 (needs $(I686_CC))"; fi
	@$(MAKE) test-x86-widths
	@$(MAKE) test-x86-vnni

# help: the targets, one line each (each has its comment here or in the file it names).
# Example: make help
help:
	@echo "make targets (each has a comment in the Makefile or mk/ saying when to use it):"
	@echo "  make                  build ./run, ./train and ./quantize"
	@echo "  make run              build ./run, then generate from the shipped model"
	@echo "                        (RUN_ARGS=\"...\" replaces the flags)"
	@echo "  make train            build ./train, the trainer (it trains nothing)"
	@echo "  make tutorial         build ./tutorial, the numbers of docs/tutorial.md"
	@echo "  make test             build everything, then run the unit tests"
	@echo "  make check            the rest: docs, tutorial, fuzz replay, pages, faults,"
	@echo "                        other architectures (check-build: this build's part)"
	@echo "  make tutorial-check   the tutorial's commands against its text"
	@echo "  make debug            the tests under AddressSanitizer and UBSan"
	@echo "  make valgrind         the tests under valgrind's memcheck (minutes)"
	@echo "  make faults           the programs killed at each write, rename and fsync"
	@echo "  make fuzz, fuzz-smoke the fuzz targets (tests/fuzz); fuzz-replay their corpora"
	@echo "  make test-aarch64, test-i686  the tests on other architectures (tests/cross.mk)"
	@echo "  make test-x86-widths  an AVX2 build's greedy texts against this build's"
	@echo "  make test-x86-vnni    an AVX-VNNI build's int8 tests and text (CPUs with AVX-VNNI)"
	@echo "  make retrain          train the shipped model again into build/retrain/"
	@echo "                        (half an hour); says how to install it in weights/"
	@echo "  make bench            speed tables; bench-kernels, bench-attention: their parts"
	@echo "  make attn-table       the attention lab's tables, written into docs/lab.md"
	@echo "  make attn-train-table every variant trained from scratch (6 h), docs/attention.md"
	@echo "  make docs-figures     the tutorial's pictures (docs/img/)"
	@echo "  make page-check       the explorer page's self-test in headless Chromium"
	@echo "  make web              the engine in a web page (WebAssembly), build/web/"
	@echo "  make web-check        that page against ./run in headless Chromium"
	@echo "  make docs-check       the docs checked against the code; docs-refs rewrites them"
	@echo "  make clean            remove the build products (keeps build/retrain/, fuzz finds)"
	@echo "  make help             this list"
	@echo "Variables: OMP=0 (no OpenMP), B=DIR (build folder), CC=..., CFLAGS=..."

# clean: remove the build products but those that take long to make again and are not
# made by a build: a retrained model (build/retrain/) and what the fuzzers found
# (build/fuzz-corpus/, build/fuzz-artifacts/); `rm -rf build` removes them too. A build
# folder of B= elsewhere goes whole. Example: make clean
KEPT = retrain fuzz-corpus fuzz-artifacts
clean:
	rm -rf run train quantize tutorial $(filter-out build,$(B))
	@[ ! -d build ] || find build -mindepth 1 -maxdepth 1 $(foreach k,$(KEPT),! -name $(k)) \
	  -exec rm -rf {} +
	@[ ! -d build ] || rmdir build 2>/dev/null || echo "make clean: kept $$(cd build && ls -d \
	  $(KEPT) 2>/dev/null | sed 's|^|build/|' | tr '\n' ' ')(rm -rf build removes them)"

.PHONY: all run train tutorial retrain test check check-build fused-check help clean
