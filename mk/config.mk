# mk/config.mk: the compiler, its flags and the build folder, included first by the
# Makefile. What `make` does with no variables set: -O3 for the host's own CPU, OpenMP on
# where the compiler has it. No -Ofast/-ffast-math anywhere: they reorder float sums and
# break NaN checks.

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
# trainer/, the programs' plumbing (files, flags) in platform/, llama.cpp's GGUF in
# formats/, the generated Unicode tables in unicode/; a file includes any of them by its
# name.
# -pthread: the thread pool (parallel/pool.c) is POSIX threads without OpenMP, and waits on a
# pthread condition variable in every build; BASE is in every compile and link line
# (tests, tools, fuzz and the cross builds too).
BASE = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DARWIN_C_SOURCE -I. -Ilab -Itrainer -Iplatform \
       -Iformats -Iunicode -Wall -Wextra -Wpedantic -Wshadow -Wdouble-promotion -Wstrict-prototypes \
       -ffp-contract=off -pthread
HEADERS = $(wildcard *.h lab/*.h trainer/*.h simd/*.h parallel/*.h platform/*.h formats/*.h unicode/*.h)
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
# the build folder: make B=build/noomp OMP=0 keeps a second build's objects beside the
# first's (switching back rebuilds nothing); ./run, ./train, ./quantize and ./tutorial are
# the last build's, which the checks of the docs' commands run
B = build

# Every object also depends on $(B)/flags, a file holding the compiler and flags it was
# built with, rewritten only when they change: `make test OMP=0` after a default build
# rebuilds everything instead of testing the OpenMP objects again, and `make -n` lists
# only what would be built.
FLAGS_STAMP = $(B)/flags
FLAGS_LINE = $(CC) $(BASE) $(CFLAGS)
FLAGS_CHANGED := $(shell echo '$(FLAGS_LINE)' | cmp -s - $(FLAGS_STAMP) || echo yes)
$(FLAGS_STAMP): $(if $(FLAGS_CHANGED),FORCE)
	@mkdir -p $(B)
	@echo '$(FLAGS_LINE)' > $@
FORCE:
.PHONY: FORCE
