# Makefile for the engine. Every target has a comment: when to use it, and an example.
#
# The default build is the fast one users get (-O3 -march=native); the tests run on that
# same build. No -Ofast/-ffast-math anywhere: they reorder float sums (STYLE.md §9).

CC ?= cc
CFLAGS ?= -O3 -march=native
WARN = -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wshadow \
       -Wdouble-promotion -Wstrict-prototypes
LDLIBS = -lm
# OpenMP (parallel matmul rows and attention heads) is on by default; OMP=0 builds
# without it, with identical results: make OMP=0
OMP ?= 1
ifeq ($(OMP),1)
  WARN += -fopenmp
else
  WARN += -Wno-unknown-pragmas
endif
ALL_CFLAGS = $(WARN) $(CFLAGS) -I.
B = build

# Modules and the headers each object depends on.
$(B)/attention.o: attention.c attention.h
$(B)/model.o: model.c model.h attention.h
$(B)/unicode.o: unicode.c unicode.h
$(B)/tokenizer.o: tokenizer.c tokenizer.h unicode.h
$(B)/run.o: run.c model.h attention.h tokenizer.h sampler.h
$(B)/sampler.o: sampler.c sampler.h
$(B)/tests/check.o: tests/check.c tests/check.h

CORE = $(B)/attention.o $(B)/model.o
TOK = $(B)/tokenizer.o $(B)/unicode.o

# all: build the programs (default). Example: make
all: run

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

run: $(B)/run.o $(B)/sampler.o $(CORE) $(TOK)
	$(CC) $(ALL_CFLAGS) $^ -o $@ $(LDLIBS)

# ---- tests: one binary per module, each printing "NAME: N passed, N failed" ----
TESTS = $(B)/tests/test_attention $(B)/tests/test_model $(B)/tests/test_tokenizer \
        $(B)/tests/test_sampler $(B)/tests/test_cli

$(B)/tests/test_attention: $(B)/tests/test_attention.o $(B)/tests/check.o $(B)/attention.o
$(B)/tests/test_model: $(B)/tests/test_model.o $(B)/tests/check.o $(CORE)
$(B)/tests/test_tokenizer: $(B)/tests/test_tokenizer.o $(B)/tests/check.o $(TOK)
$(B)/tests/test_sampler: $(B)/tests/test_sampler.o $(B)/tests/check.o $(B)/sampler.o
$(B)/tests/test_cli: $(B)/tests/test_cli.o $(B)/tests/check.o
$(TESTS):
	$(CC) $(ALL_CFLAGS) $^ -o $@ $(LDLIBS)

# test: build everything and run every test binary; fails if any check fails.
# Example: make test            (needs ../shared for the reference-data checks)
test: run $(TESTS)
	@sh tests/run_all.sh $(TESTS)

# debug: the whole suite under AddressSanitizer and UBSan, in a separate build dir.
# Example: make debug
debug:
	$(MAKE) B=build/debug CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	  -fno-sanitize-recover=all" RUN_BIN=build/debug/run test-debug-inner

test-debug-inner: $(B)/run $(TESTS)
	@RUN=$(B)/run ASAN_OPTIONS=detect_leaks=1 sh tests/run_all.sh $(TESTS)

$(B)/run: $(B)/run.o $(B)/sampler.o $(CORE) $(TOK)
	$(CC) $(ALL_CFLAGS) $^ -o $@ $(LDLIBS)

# clean: remove every build product. Example: make clean
clean:
	rm -rf build run

.PHONY: all test debug test-debug-inner clean
