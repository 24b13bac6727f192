# mk/tests.mk: the unit tests (one program per module, each printing "NAME: N passed,
# N failed"), how each is linked, and the suite under the sanitizers and under valgrind.
# Included by the Makefile, whose `make test` runs $(TESTS) with tests/run_all.sh.

# a test may include any header, so every test object depends on all of them
$(B)/tests/%.o: tests/%.c $(wildcard tests/*.h) $(HEADERS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -c $< -o $@

TESTS = $(B)/tests/test_kernels $(B)/tests/test_quant $(B)/tests/test_attention $(B)/tests/test_attention_variants \
        $(B)/tests/test_attention_train $(B)/tests/test_model \
        $(B)/tests/test_tokenizer $(B)/tests/test_tokenizer_llama $(B)/tests/test_sampler $(B)/tests/test_cli \
        $(B)/tests/test_eval $(B)/tests/test_generate $(B)/tests/test_attnmap \
        $(B)/tests/test_gguf $(B)/tests/test_files $(B)/tests/test_platform \
        $(TRAIN_TESTS)
# the trainer's tests, one program per subject, linking the same objects
TRAIN_TESTS = $(B)/tests/test_train_grad $(B)/tests/test_train_runs $(B)/tests/test_bpe \
              $(B)/tests/test_train_cli
$(B)/tests/test_kernels: $(B)/tests/test_kernels.o $(B)/tests/check.o $(KERNELS)
$(B)/tests/test_quant: $(B)/tests/test_quant.o $(B)/tests/check.o $(QUANT)
$(B)/tests/test_attention: $(B)/tests/test_attention.o $(B)/tests/check.o $(B)/attention.o \
                           $(KERNELS)
$(B)/tests/test_attention_variants: $(B)/tests/test_attention_variants.o $(B)/tests/check.o \
                                    $(B)/tests/attention_kernels.o $(B)/attention.o $(KERNELS)
$(B)/tests/test_attention_train: $(B)/tests/test_attention_train.o $(B)/tests/check.o \
                                 $(B)/attention.o $(KERNELS)
$(B)/tests/test_model: $(B)/tests/test_model.o $(B)/tests/check.o $(B)/tests/gpt2_f64.o $(CORE)
$(B)/tests/test_gguf: $(B)/tests/test_gguf.o $(B)/tests/check.o $(CORE)
$(B)/tests/test_eval: $(B)/tests/test_eval.o $(B)/tests/check.o $(B)/tests/gpt2_f64.o \
                     $(B)/lab/eval.o $(CORE) $(TOK)
$(B)/tests/test_generate: $(B)/tests/test_generate.o $(B)/tests/check.o $(B)/generate.o \
                          $(B)/sampler.o $(CORE) $(TOK)
$(B)/tests/test_tokenizer: $(B)/tests/test_tokenizer.o $(B)/tests/check.o $(TOK)
$(B)/tests/test_tokenizer_llama: $(B)/tests/test_tokenizer_llama.o $(B)/tests/check.o $(TOK)
$(B)/tests/test_sampler: $(B)/tests/test_sampler.o $(B)/tests/check.o $(B)/sampler.o $(KERNELS) \
                         $(B)/hash.o
$(B)/tests/test_attnmap: $(B)/tests/test_attnmap.o $(B)/tests/check.o $(B)/lab/attnmap.o \
                        $(B)/unicode/unicode.o
$(B)/tests/test_cli: $(B)/tests/test_cli.o $(B)/tests/check.o
$(B)/tests/test_files: $(B)/tests/test_files.o $(B)/tests/check.o $(B)/platform/os.o
$(B)/tests/test_platform: $(B)/tests/test_platform.o $(B)/tests/check.o $(B)/parallel/pool.o \
                          $(B)/platform/os.o
$(TRAIN_TESTS): $(B)/tests/%: $(B)/tests/%.o $(B)/tests/check.o $(B)/tests/train_fixtures.o \
                $(TRAIN_LIB) $(B)/platform/cli.o $(B)/trainer/bpe.o $(B)/lab/attention_spec.o $(CORE) $(TOK)
$(B)/tests/test_train_grad: $(B)/tests/gpt2_f64.o   # the float64 reference forward
$(TESTS):
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# every step of ./tutorial, for `make debug` (which runs each under the sanitizers)
TUTORIAL_STEPS = tokens merges embed rope kernel attend qkv heads mask cache norm mlp block \
                 sample next loss backward adamw

# debug: the whole suite under AddressSanitizer and UBSan (own build folder, no
# OpenMP so that no runtime library hides a report), with the fuzz replay and every
# tutorial step and picture (DOC_FIGURES, mk/docs.mk); built with clang 14 where it is
# installed (its UBSan also finds arithmetic on a NULL pointer, gcc's does not; make
# debug-native builds with $(CC)), else $(CC); DEBUG_CC=... chooses. Example: make debug
DEBUG_CC ?= $(if $(shell command -v clang-14),clang-14,$(CC))
debug:
	$(MAKE) B=build/debug OMP=0 CC=$(DEBUG_CC) CFLAGS="-O1 -g -fsanitize=address,undefined \
	  -fno-omit-frame-pointer -fno-sanitize-recover=all" debug-tests

debug-tests: $(B)/run $(B)/train $(B)/quantize $(B)/tutorial $(TESTS) $(FUZZ_REPLAY) \
             $(FUZZ_SEEDS)/.stamp
	@$(FUZZ_ENV) FUZZ_BIN=$(B)/fuzz sh tests/fuzz/fuzz.sh replay $(FUZZ_TARGETS)
	@for s in $(TUTORIAL_STEPS); do $(B)/tutorial $$s > /dev/null || \
	  { echo "FAIL - $(B)/tutorial $$s"; exit 1; }; done; \
	  echo "ok - every tutorial step ran under the sanitizers: $(TUTORIAL_STEPS)"
	@for f in $(DOC_FIGURES); do $(B)/tutorial svg $$f > /dev/null || \
	  { echo "FAIL - $(B)/tutorial svg $$f"; exit 1; }; done; \
	  echo "ok - every tutorial picture drawn under the sanitizers: $(DOC_FIGURES)"
	@RUN=$(B)/run TRAIN=$(B)/train QUANTIZE=$(B)/quantize TUTORIAL=$(B)/tutorial \
	  sh tests/run_all.sh $(TESTS)

# debug-native: the kernel, int8 and model tests under the same sanitizers, built for this
# host's own instruction sets (make debug builds the portable paths): the vector kernels'
# loads and stores checked where the machine has them (AVX-512 VNNI's packed int8 rows).
debug-native:
	$(MAKE) B=build/debug-native OMP=0 CFLAGS="-O1 -g -march=native \
	  -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  debug-native-tests

debug-native-tests: $(B)/tests/test_kernels $(B)/tests/test_quant $(B)/tests/test_model
	@sh tests/run_all.sh $^

# valgrind: memcheck (errors and leaks are failures) on a build valgrind can run (AVX2, not
# AVX-512, which valgrind 3.19 does not decode; no OpenMP) over every test but the
# trainer's, test_eval and test_gguf (their training runs and full evaluation take 5+ minutes each
# under valgrind; the sanitizer build covers them) and test_generate (its 700 tokens take 2.5
# minutes; test_cli's runs take generate.c's shifts and growth), with test_model on the
# repository's own reference files only, and test_cli running ./run itself under valgrind,
# so every error path of the program is checked. About 9 minutes. Example: make valgrind
VALGRIND = valgrind -q --error-exitcode=9 --leak-check=full \
           --errors-for-leak-kinds=definite,indirect
VG_TESTS = test_kernels test_quant test_attention test_attention_variants \
           test_attention_train test_sampler \
           test_tokenizer test_tokenizer_llama test_model test_cli test_attnmap test_platform \
           test_files
valgrind:
	$(MAKE) B=build/valgrind OMP=0 CFLAGS="-O2 -g -mavx2 -mfma -DOS_PLAIN_ALLOC" build/valgrind/run \
	  build/valgrind/quantize $(addprefix build/valgrind/tests/,$(VG_TESTS))
	@SHARED_DIR=/nonexistent RUN="$(VALGRIND) build/valgrind/run" WRAP="$(VALGRIND)" \
	  QUANTIZE="$(VALGRIND) build/valgrind/quantize" \
	  sh tests/run_all.sh $(addprefix build/valgrind/tests/,$(VG_TESTS))

# faults: the fault-injection pass (tests/faults.sh): run, train and quantize killed at
# each of their write, rename and fsync calls, then a full and a read-only file system;
# prints the table, fails if a point lost data. Needs strace and (for the file systems)
# unshare with privileges, each skipped with a message otherwise. About 30 s.
# Example: make faults
faults: all
	@bash tests/faults.sh $(B)

.PHONY: debug debug-tests debug-native debug-native-tests valgrind faults
