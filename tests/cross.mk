# tests/cross.mk: the suite on other architectures, each cross-built into its own build
# folder (included by the Makefile; the targets use its TESTS and build rules): aarch64
# under qemu-user, and 32-bit x86 with x87 floats. Each also checks that the shipped
# model's greedy text is this machine's, byte for byte. Debian's packages for each are
# named by the target, and .ci/run installs them.

GREEDY_ARGS = weights/model.bin -z weights/tokenizer.bin -i "ROMEO:" -n 120 -t 0
# $(call same_greedy,NAME,RUN): RUN (a command) prints $(B)/run's greedy text, or fails
same_greedy = $(B)/run $(GREEDY_ARGS) > $(B)/greedy.txt 2>/dev/null && \
  $(2) $(GREEDY_ARGS) > $(B)/greedy_$(1).txt 2>/dev/null && \
  if cmp -s $(B)/greedy.txt $(B)/greedy_$(1).txt; then \
    echo "ok - $(1): the shipped model's greedy text equals this machine's, byte for byte"; \
  else echo "FAIL - $(1): the greedy text differs:"; diff $(B)/greedy.txt $(B)/greedy_$(1).txt; \
    exit 1; fi
# $(call same_text,NAME,RUN,ARGS): RUN ARGS prints what $(B)/run ARGS prints, byte for byte
same_text = $(B)/run $(3) > $(B)/same.txt 2>/dev/null && $(2) $(3) > $(B)/same_$(1).txt \
  2>/dev/null && if cmp -s $(B)/same.txt $(B)/same_$(1).txt; then \
    echo "ok - $(1): $(3): the same text as this build's, byte for byte"; \
  else echo "FAIL - $(1): $(3): the text differs:"; diff $(B)/same.txt $(B)/same_$(1).txt; \
    exit 1; fi
# $(call need,COMMAND,PACKAGES): fail with what to install when COMMAND is missing
need = command -v $(1) >/dev/null || { echo "$@: needs $(1) (Debian: apt-get install $(2))"; \
  exit 1; }
TEST_NAMES = $(notdir $(TESTS))
# aarch64: Debian's cross compiler; qemu-user runs its programs, with the cross libraries as
# their root (-L). The build's flags are the default ones ($(CC) for aarch64 takes no
# -march=native here: -O3 for any ARMv8-A), with OpenMP.
AARCH64_CC = aarch64-linux-gnu-gcc
AARCH64_ROOT = /usr/aarch64-linux-gnu
AARCH64_RUN = qemu-aarch64 -L $(AARCH64_ROOT)
AARCH64_B = build/aarch64
AARCH64_PACKAGES = gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
AARCH64_QUICK = test_kernels test_quant test_attention test_model test_tokenizer \
                test_tokenizer_llama test_sampler
# the int8 kernels built with the dot-product instructions (ARMv8.2-A's, which most ARM
# cores of the last years have: what -march=native gives there), run on qemu's "max" CPU
AARCH64_DOT_B = build/aarch64-dotprod
AARCH64_DOT_FLAGS = -O3 -march=armv8.2-a+dotprod

# test-aarch64: the aarch64 build under qemu-aarch64: the kernel, quantization, attention,
# model, tokenizer and sampler tests, and the greedy text; then the quantization tests of
# a build with the dot-product instructions. About 2 minutes (CI runs it).
# Example: make test-aarch64
test-aarch64: all
	@$(call need,$(AARCH64_CC),$(AARCH64_PACKAGES))
	@$(call need,qemu-aarch64,$(AARCH64_PACKAGES))
	$(MAKE) B=$(AARCH64_B) CC=$(AARCH64_CC) $(AARCH64_B)/run \
	  $(addprefix $(AARCH64_B)/tests/,$(AARCH64_QUICK))
	@WRAP="$(AARCH64_RUN)" sh tests/run_all.sh $(addprefix $(AARCH64_B)/tests/,$(AARCH64_QUICK))
	@$(call same_greedy,aarch64,$(AARCH64_RUN) $(AARCH64_B)/run)
	$(MAKE) B=$(AARCH64_DOT_B) CC=$(AARCH64_CC) CFLAGS="$(AARCH64_DOT_FLAGS)" \
	  $(AARCH64_DOT_B)/tests/test_quant
	@WRAP="$(AARCH64_RUN) -cpu max" sh tests/run_all.sh $(AARCH64_DOT_B)/tests/test_quant

# test-aarch64-all: the whole suite on the aarch64 build under qemu-aarch64 (test_cli,
# test_eval and test_train_cli run the aarch64 programs under it too), and the greedy text.
# About 7 minutes here: for occasional runs. Example: make test-aarch64-all
# (the programs' commands are absolute: test_train_cli puts its folder before a relative one.
# Its four rename kill points fail here until its strace also traces renameat, which is
# what rename is on aarch64, natively and under qemu)
test-aarch64-all: all
	@$(call need,$(AARCH64_CC),$(AARCH64_PACKAGES))
	@$(call need,qemu-aarch64,$(AARCH64_PACKAGES))
	$(MAKE) B=$(AARCH64_B) CC=$(AARCH64_CC) $(AARCH64_B)/run $(AARCH64_B)/train \
	  $(AARCH64_B)/quantize $(addprefix $(AARCH64_B)/tests/,$(TEST_NAMES))
	@qemu="$$(command -v qemu-aarch64) -L $(AARCH64_ROOT)" && bin=$(CURDIR)/$(AARCH64_B) && \
	  WRAP="$(AARCH64_RUN)" RUN="$$qemu $$bin/run" TRAIN="$$qemu $$bin/train" \
	  QUANTIZE="$$qemu $$bin/quantize" \
	  sh tests/run_all.sh $(addprefix $(AARCH64_B)/tests/,$(TEST_NAMES))
	@$(call same_greedy,aarch64,$(AARCH64_RUN) $(AARCH64_B)/run)

# i686: 32-bit x86 (32-bit size_t and long) with gcc's default x87 floats (FLT_EVAL_METHOD
# 2: float expressions kept wider, the portable kernels), as Debian's i386 builds; Debian's
# cross compiler, as gcc-multilib (for -m32) conflicts with the aarch64 one. Linked to the
# cross libraries (rpath and loader), so the programs run natively where the kernel runs
# 32-bit programs; where it does not (a kernel without IA-32 emulation: "Exec format
# error"), under qemu-i386, on I686_EMULATED (qemu-i386 emulates x87 slowly: test_model
# alone ran over 15 minutes there).
I686_CC = i686-linux-gnu-gcc
I686_LIB = /usr/i686-linux-gnu/lib
I686_LDLIBS = -lm -Wl,-rpath,$(I686_LIB) -Wl,--dynamic-linker=$(I686_LIB)/ld-linux.so.2
I686_B = build/i686
I686_EMULATED = test_kernels test_quant test_attention test_attention_variants test_tokenizer \
                test_tokenizer_llama test_sampler

# test-i686: the whole suite on the i686 build, and the greedy text. About 2 minutes (CI
# runs it; longer under qemu-i386). Example: make test-i686
test-i686: all
	@$(call need,$(I686_CC),gcc-i686-linux-gnu libc6-dev-i386-cross)
	$(MAKE) B=$(I686_B) CC=$(I686_CC) CFLAGS=-O3 LDLIBS="$(I686_LDLIBS)" $(I686_B)/run \
	  $(I686_B)/train $(I686_B)/quantize $(addprefix $(I686_B)/tests/,$(TEST_NAMES))
	@if $(I686_B)/run --help >/dev/null 2>&1; then \
	  RUN=$(I686_B)/run TRAIN=$(I686_B)/train QUANTIZE=$(I686_B)/quantize \
	    sh tests/run_all.sh $(addprefix $(I686_B)/tests/,$(TEST_NAMES)) && \
	  $(call same_greedy,i686,$(I686_B)/run); \
	else \
	  $(call need,qemu-i386,qemu-user) && \
	  echo "test-i686: this kernel runs no 32-bit programs: under qemu-i386, a subset" && \
	  WRAP=qemu-i386 RUN="qemu-i386 $(I686_B)/run" QUANTIZE="qemu-i386 $(I686_B)/quantize" \
	    TRAIN="qemu-i386 $(I686_B)/train" \
	    sh tests/run_all.sh $(addprefix $(I686_B)/tests/,$(I686_EMULATED)) && \
	  $(call same_greedy,i686,qemu-i386 $(I686_B)/run); \
	fi

.PHONY: test-aarch64 test-aarch64-all test-i686 test-x86-widths test-x86-vnni

# test-x86-widths: an AVX2 + FMA build (build/avx2, as CI's AVX2 leg makes it) against this
# one, on x86-64: the shipped model's greedy text, fp32 and its int8 form, 300 tokens, byte
# for byte. AVX-512 and AVX2 builds give the same bits but in blocks of 8 to 15 rows
# (kernels.h): a 2-token prompt and its decode have none, so any difference is a kernel
# whose sums depend on the register width (a LayerNorm in 16 lanes made the int8 text part
# after 170-180 tokens). Where this build is AVX2 already, the two are the same code. Example:
# make test-x86-widths
X86_WIDTHS_B = build/avx2
WIDTHS_ARGS = -z weights/tokenizer.bin -i "ROMEO:" -n 300 -t 0
test-x86-widths: all
	@case "$$($(CC) -dumpmachine)" in x86_64*) ;; *) \
	  echo "skipped: make test-x86-widths (not an x86-64 compiler)"; exit 0;; esac; \
	$(MAKE) B=$(X86_WIDTHS_B) CFLAGS="-O3 -mavx2 -mfma" $(X86_WIDTHS_B)/run \
	  $(X86_WIDTHS_B)/quantize && \
	$(X86_WIDTHS_B)/quantize weights/model.bin $(X86_WIDTHS_B)/model-int8.bin >/dev/null && \
	$(call same_text,avx2,$(X86_WIDTHS_B)/run,weights/model.bin $(WIDTHS_ARGS)) && \
	$(call same_text,avx2,$(X86_WIDTHS_B)/run,$(X86_WIDTHS_B)/model-int8.bin $(WIDTHS_ARGS))

# test-x86-vnni: an AVX2 build with AVX-VNNI and without AVX-512 (build/avx-vnni), what
# -march=native gives on Intel's client cores (Alder Lake and later): its int8 kernels
# (simd/quant_x86.c's "avx-vnni") take the VEX form of 256-bit vpdpbusd and the 8-row
# prefill tile with VNNI, which no other build compiles. On an x86-64 CPU with AVX-VNNI and
# a compiler that takes -mavxvnni: test_quant (every int8 kernel against the reference, bit
# for bit) and the shipped model's int8 greedy text after a 116-token prompt (the prefill
# tile) against this build's, byte for byte (where this build is that one already, the two
# are the same code); skipped with a message elsewhere. Example: make test-x86-vnni
X86_VNNI_B = build/avx-vnni
VNNI_ARGS = -z weights/tokenizer.bin -f $(X86_VNNI_B)/prompt.txt -n 100 -t 0
test-x86-vnni: all
	@case "$$($(CC) -dumpmachine)" in x86_64*) ;; *) \
	  echo "skipped: make test-x86-vnni (not an x86-64 compiler)"; exit 0;; esac; \
	if ! grep -qw avx_vnni /proc/cpuinfo 2>/dev/null; then \
	  echo "skipped: make test-x86-vnni (this CPU has no AVX-VNNI)"; exit 0; fi; \
	if ! $(CC) -mavxvnni -E -x c /dev/null >/dev/null 2>&1; then \
	  echo "skipped: make test-x86-vnni ($(CC) does not take -mavxvnni)"; exit 0; fi; \
	$(MAKE) B=$(X86_VNNI_B) CFLAGS="-O3 -mavx2 -mfma -mf16c -mavxvnni" $(X86_VNNI_B)/run \
	  $(X86_VNNI_B)/quantize $(X86_VNNI_B)/tests/test_quant && \
	$(X86_VNNI_B)/tests/test_quant && \
	head -c 300 tools/bench_prompt.txt > $(X86_VNNI_B)/prompt.txt && \
	$(X86_VNNI_B)/quantize weights/model.bin $(X86_VNNI_B)/model-int8.bin >/dev/null && \
	$(call same_text,avx-vnni,$(X86_VNNI_B)/run,$(X86_VNNI_B)/model-int8.bin $(VNNI_ARGS))
