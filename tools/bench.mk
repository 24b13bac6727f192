# tools/bench.mk: what `make bench` needs besides ./run, included by the Makefile.
#
# Builds the two benchmark tools (tools/gen_model.c: random-weight checkpoints of real
# shapes; tools/probe.c: the machine's measured read bandwidth and FMA peak) with the
# Makefile's $(CC) $(BASE) $(CFLAGS) $(LDLIBS), and generates the random-weight models under
# $(B)/bench/ (about 1 GB in all; `make clean` removes them). BENCH_DEPS lists all of it;
# BENCH_ENV passes the paths to tools/bench.sh. int8 files are made by bench.sh itself
# (with ./quantize, when it exists).

$(B)/tools/gen_model.o: tools/gen_model.c cli.h
$(B)/tools/gen_model: $(B)/tools/gen_model.o $(B)/cli.o
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(B)/tools/probe.o: tools/probe.c
$(B)/tools/probe: $(B)/tools/probe.o
	$(CC) $(BASE) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Random-weight checkpoints, one per gen_model preset (s260k's real file is in ../shared);
# deterministic, so regenerating after a change to gen_model is always safe.
BENCH_MODELS = $(B)/bench/s15m.bin $(B)/bench/s110m.bin $(B)/bench/gpt2-124m.bin
$(BENCH_MODELS): $(B)/bench/%.bin: $(B)/tools/gen_model
	@mkdir -p $(dir $@)
	$(B)/tools/gen_model $* $@

BENCH_DEPS = $(B)/tools/gen_model $(B)/tools/probe $(BENCH_MODELS)
BENCH_ENV = GEN=$(B)/tools/gen_model PROBE=$(B)/tools/probe BENCH_DIR=$(B)/bench
