# tests/fuzz/fuzz.mk: the fuzz targets of tests/fuzz, included by the Makefile.
#
# Every target in FUZZ_TARGETS is built two ways: a replay binary with the Makefile's own
# $(CC) $(BASE) $(CFLAGS) into $(B)/fuzz/ (linked with tests/fuzz/replay.c, whose main runs
# the target on files and folders), and a libFuzzer binary with clang, ASan and UBSan into
# build/fuzz-clang/ (without OpenMP: no runtime beside libFuzzer's; the Makefile's BASE
# brings -pthread, for kernels_run's POSIX threads). tests/fuzz/make_seeds.c
# writes the seed corpora into $(B)/fuzz/seeds/<target>/; inputs that once crashed are
# kept in tests/fuzz/regressions/<target>/. tests/fuzz/fuzz.sh runs the loops, one target
# at a time. It uses the Makefile's B, BASE, CFLAGS, LDLIBS, CORE, TOK and FLAGS_STAMP.

FUZZ_TARGETS = fuzz_checkpoint fuzz_tokenizer_load fuzz_encode_gpt2 fuzz_encode_llama \
               fuzz_attn_spec fuzz_eval fuzz_cli fuzz_gguf
FUZZ_SECONDS ?= 300
FUZZ_CLANG ?= clang-14
FUZZ_CLANG_B = build/fuzz-clang
FUZZ_SEEDS = $(B)/fuzz/seeds
FUZZ_REGRESSIONS = tests/fuzz/regressions
FUZZ_HEADERS = tests/fuzz/fuzz.h $(HEADERS)
# the project's objects every target links (unused ones cost nothing)
FUZZ_PROJECT = $(B)/lab/attention_spec.o $(B)/lab/eval.o $(B)/platform/cli.o $(B)/sampler.o $(B)/generate.o \
               $(B)/lab/attnmap.o $(B)/lab/run_lab.o $(CORE) $(TOK)

# ---- replay binaries: the project's compiler and flags ----
$(B)/fuzz/%.o: tests/fuzz/%.c $(FUZZ_HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@
# run.c with its main renamed, callable by fuzz_cli (run.c returns exit codes, never exits),
# -n at most 200 tokens (with the context shift a run of -n 1000000 would take minutes)
# and prompt and eval files of at most 4 KiB (--eval on a model file would run tens of
# thousands of tokens under the sanitizers, past libFuzzer's timeout)
FUZZ_RUN_FLAGS = -Dmain=run_main -DRUN_MAX_STEPS=200 -DRUN_MAX_TEXT_BYTES=4096
$(B)/fuzz/run_main.o: run.c $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(FUZZ_RUN_FLAGS) -c $< -o $@

FUZZ_REPLAY = $(addprefix $(B)/fuzz/,$(FUZZ_TARGETS))
$(FUZZ_REPLAY): $(B)/fuzz/%: $(B)/fuzz/%.o $(B)/fuzz/replay.o $(B)/fuzz/fuzz_util.o \
                $(FUZZ_PROJECT)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/fuzz/fuzz_cli: $(B)/fuzz/run_main.o

$(B)/fuzz/make_seeds: $(B)/fuzz/make_seeds.o $(B)/fuzz/fuzz_util.o $(FUZZ_PROJECT)
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# the seed corpora, rewritten whenever the generator (or a file format it links) changes
$(FUZZ_SEEDS)/.stamp: $(B)/fuzz/make_seeds weights/tokenizer.bin
	rm -rf $(FUZZ_SEEDS)
	@mkdir -p $(FUZZ_SEEDS)
	$(B)/fuzz/make_seeds $(FUZZ_SEEDS)
	@touch $@

FUZZ_ENV = FUZZ_SEEDS=$(FUZZ_SEEDS) FUZZ_REGRESSIONS=$(FUZZ_REGRESSIONS)

# fuzz-replay: every target's replay binary over its regression corpus and seeds; fails
# if any input crashes (what `make check` runs). Example: make fuzz-replay
fuzz-replay: $(FUZZ_REPLAY) $(FUZZ_SEEDS)/.stamp
	@$(FUZZ_ENV) FUZZ_BIN=$(B)/fuzz sh tests/fuzz/fuzz.sh replay $(FUZZ_TARGETS)

# ---- libFuzzer binaries: clang, ASan + UBSan, coverage on the project's sources ----
# MODEL_MAX_STATE_BYTES (model.h, 4 GiB) is lowered so that the KV cache a header's huge
# context asks for stays under libFuzzer's malloc limit (-rss_limit_mb=2048): the cap
# itself is what gets fuzzed, not a 2 GiB calloc reported as out-of-memory every time
# (268435456 = 256 MiB; an unsigned long, as model.c prints it with %zu).
FUZZ_CLANG_FLAGS = $(filter-out -fopenmp,$(BASE)) -Wno-unknown-pragmas -O2 -g -march=native \
                   -fno-omit-frame-pointer -fsanitize=address,undefined \
                   -fno-sanitize-recover=all -DMODEL_MAX_STATE_BYTES=268435456UL
# like the Makefile's $(B)/flags: rebuild everything when the command changes
FUZZ_CLANG_STAMP = $(FUZZ_CLANG_B)/flags
$(FUZZ_CLANG_STAMP): FUZZ_FORCE
	@mkdir -p $(FUZZ_CLANG_B)
	@echo '$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS)' | cmp -s - $@ || \
	  echo '$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS)' > $@
FUZZ_FORCE:
$(FUZZ_CLANG_B)/%.o: %.c $(FUZZ_HEADERS) $(FUZZ_CLANG_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
# lab/attnmap.c includes the page the Makefile generates into $(B) (see $(B)/attnmap_page.inc)
$(FUZZ_CLANG_B)/lab/attnmap.o: lab/attnmap.c $(FUZZ_HEADERS) $(FUZZ_CLANG_STAMP) \
                               $(B)/attnmap_page.inc
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS) -fsanitize=fuzzer-no-link -I$(B) -c $< -o $@
$(FUZZ_CLANG_B)/run_main.o: run.c $(HEADERS) $(FUZZ_CLANG_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS) -fsanitize=fuzzer-no-link $(FUZZ_RUN_FLAGS) -c $< -o $@

FUZZ_CLANG_PROJECT = $(patsubst $(B)/%,$(FUZZ_CLANG_B)/%,$(FUZZ_PROJECT))
FUZZ_CLANG_BINS = $(addprefix $(FUZZ_CLANG_B)/,$(FUZZ_TARGETS))
$(FUZZ_CLANG_BINS): $(FUZZ_CLANG_B)/%: $(FUZZ_CLANG_B)/tests/fuzz/%.o \
                    $(FUZZ_CLANG_B)/tests/fuzz/fuzz_util.o $(FUZZ_CLANG_PROJECT)
	$(FUZZ_CLANG) $(FUZZ_CLANG_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)
$(FUZZ_CLANG_B)/fuzz_cli: $(FUZZ_CLANG_B)/run_main.o

# fuzz-build: the libFuzzer binaries only. Example: make fuzz-build
fuzz-build: $(FUZZ_CLANG_BINS)

# fuzz: each libFuzzer target for FUZZ_SECONDS (default 300), one after another, from its
# seeds, regressions and the corpus it grew before (build/fuzz-corpus/); prints executions,
# coverage and crashes per target, keeps crashing inputs in build/fuzz-artifacts/<target>/
# and fails if there are any. Extra libFuzzer flags: FUZZ_FLAGS="...".
# Example: make fuzz FUZZ_SECONDS=600
fuzz: $(FUZZ_CLANG_BINS) $(FUZZ_SEEDS)/.stamp
	@$(FUZZ_ENV) FUZZ_BIN=$(FUZZ_CLANG_B) FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  FUZZ_CORPUS=build/fuzz-corpus FUZZ_ARTIFACTS=build/fuzz-artifacts \
	  sh tests/fuzz/fuzz.sh fuzz $(FUZZ_TARGETS)

# fuzz-smoke: `make fuzz` for 20 seconds per target (CI), from a fixed random seed so that
# CI explores the same inputs each time. Example: make fuzz-smoke
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=20 FUZZ_FLAGS=-seed=1

.PHONY: fuzz fuzz-smoke fuzz-replay fuzz-build FUZZ_FORCE
