# mk/web.mk: the page (web/): the engine's own C compiled to WebAssembly, running the
# shipped model in a browser (included by the Makefile). Debian's packages only: clang-14
# for --target=wasm32-wasi, wasi-libc, libclang-rt-14-dev-wasm32 and lld (.ci/run installs
# them when missing). One thread (web/pool_single.c for parallel/pool.c), no OpenMP;
# wasi-libc's mmap emulation serves checkpoint.c's mmap.

WEB_CC ?= clang-14
# WebAssembly SIMD128 (every current browser): simd/wasm_kernels.c's products, with the
# portable build's bits, and clang's vectorised loops. make web WEB_SIMD= builds without.
WEB_SIMD ?= -msimd128
# the web build's objects, and the page's folder (open with python3 -m http.server there)
WEB_OBJ = $(B)/web-obj
WEB_OUT = $(B)/web
WEB_CFLAGS = --target=wasm32-wasi -O3 $(WEB_SIMD) -std=c11 -D_POSIX_C_SOURCE=200809L \
             -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_PROCESS_CLOCKS -D_WASI_EMULATED_SIGNAL -I. -Ilab -Itrainer \
             -Iplatform -Iformats -Iunicode -Iparallel -Wall -Wextra -Wpedantic -Wshadow \
             -Wno-unknown-pragmas -ffp-contract=off
WEB_LDFLAGS = --target=wasm32-wasi -mexec-model=reactor -lwasi-emulated-mman \
              -lwasi-emulated-process-clocks -Wl,-z,stack-size=8388608 -Wl,--initial-memory=67108864 -Wl,--max-memory=1073741824
# the engine's sources the page runs: generation (generate.c, the sampler), the model, the
# tokenizer, the kernels (the portable ones: simd/'s headers fall back to them), the lab's
# attention specs and --eval, and the page's own: web.c and the one-thread pool
WEB_SRC = web/web.c web/pool_single.c generate.c sampler.c model.c block.c attention.c \
          checkpoint.c formats/gguf.c tokenizer.c unicode/unicode.c hash.c kernels.c quant.c \
          parallel/products.c simd/vec_kernels.c simd/quant_x86.c simd/quant_neon.c simd/cpu.c trainer/train_kernels.c \
          simd/wasm_kernels.c lab/attention_spec.c lab/eval.c platform/os.c platform/cli.c
WEB_OBJS = $(WEB_SRC:%.c=$(WEB_OBJ)/%.o)
WEB_PAGE = $(WEB_OUT)/index.html $(WEB_OUT)/page.js $(WEB_OUT)/worker.js $(WEB_OUT)/steps.js \
           $(WEB_OUT)/weights/model.bin $(WEB_OUT)/weights/tokenizer.bin

$(WEB_OBJ)/%.o: %.c $(HEADERS) mk/web.mk
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_CFLAGS) -c $< -o $@
$(WEB_OUT)/attn.wasm: $(WEB_OBJS)
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_LDFLAGS) $^ -o $@
# the tutorial's steps (lab/tutorial.c) as a second wasm, a WASI command: the worker runs
# its main with a step's argv, as ./tutorial is run, so the page prints the same numbers
# by the same functions. A second wasm, not exports in attn.wasm: main, its step table and
# its usage stay the program's own, untouched.
TUTORIAL_WEB_SRC = lab/tutorial.c lab/tutorial_figures.c trainer/train_model.c \
          trainer/train_backward.c trainer/train_optim.c sampler.c model.c block.c \
          attention.c checkpoint.c formats/gguf.c tokenizer.c unicode/unicode.c hash.c \
          kernels.c quant.c parallel/products.c simd/vec_kernels.c simd/quant_x86.c \
          simd/quant_neon.c simd/cpu.c trainer/train_kernels.c simd/wasm_kernels.c lab/attention_spec.c platform/os.c \
          platform/cli.c web/pool_single.c
$(WEB_OUT)/tutorial.wasm: $(TUTORIAL_WEB_SRC:%.c=$(WEB_OBJ)/%.o)
	@mkdir -p $(dir $@)
	$(WEB_CC) $(subst -mexec-model=reactor,,$(WEB_LDFLAGS)) -lwasi-emulated-signal $^ -o $@
# the Tutorial panel's code beside each step, cut from the sources (web/steps.sh)
$(WEB_OUT)/steps.js: web/steps.sh web/steps.txt $(TUTORIAL_WEB_SRC)
	@mkdir -p $(dir $@)
	sh web/steps.sh web/steps.txt > $@.tmp && mv $@.tmp $@
# the same page as one file (web/inline.sh) that opens from file:// too
$(WEB_OUT)/attn.html: web/inline.sh $(WEB_OUT)/attn.wasm $(WEB_OUT)/tutorial.wasm $(WEB_PAGE)
	sh web/inline.sh $(WEB_OUT) > $@.tmp && mv $@.tmp $@
$(WEB_OUT)/%: web/%
	@mkdir -p $(dir $@)
	cp $< $@
$(WEB_OUT)/weights/%: weights/%
	@mkdir -p $(dir $@)
	cp $< $@

# web: build the page into build/web/ (the wasm, the page, the shipped model): open it
# with `cd build/web && python3 -m http.server`, then http://localhost:8000/; or open
# build/web/attn.html, the same page in one file (13 MB), from disk. Example: make web
web: $(WEB_OUT)/attn.wasm $(WEB_OUT)/tutorial.wasm $(WEB_PAGE) $(WEB_OUT)/attn.html

.PHONY: web

# web-check: the page in headless Chromium against ./run (tools/web_check.sh): the deep
# link's text for a greedy and a seeded run, a heatmap cell against --attn-map's, bad input
# refused in the page, every ./tutorial step in the page against ./tutorial's stdout, no
# console message, screenshots at 1400 and 600 px in $(B)/web-check/. make check runs it;
# skipped with a line when the wasm toolchain (or, in the script, chromium) is missing.
# About 2 minutes. Example: make web-check
web-check: $(B)/run $(B)/tutorial
	@if printf 'int main(void) { return 0; }\n' | $(WEB_CC) --target=wasm32-wasi -x c - \
	     -o /dev/null >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory web && bash tools/web_check.sh $(B); \
	else echo "skipped: make web-check (needs $(WEB_CC) for wasm32-wasi: Debian's clang-14," \
	  "lld, wasi-libc and libclang-rt-14-dev-wasm32)"; fi

.PHONY: web-check
