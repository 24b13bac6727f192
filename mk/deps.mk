# mk/deps.mk: the headers each object depends on (included by the Makefile, whose pattern
# rule $(B)/%.o: %.c compiles them), and the explorer page lab/attnmap.c embeds.

$(B)/attention.o: attention.c attention.h hash.h kernels.h quant.h
$(B)/quant.o: quant.c quant.h simd/simd.h kernels.h
$(B)/kernels.o: kernels.c kernels.h quant.h parallel/pool.h parallel/products.h simd/simd.h
# the thread pool, the instruction sets' kernels (simd/) and the trainer's kernels
$(B)/parallel/pool.o: parallel/pool.c parallel/pool.h simd/simd.h kernels.h quant.h
$(B)/parallel/products.o: parallel/products.c parallel/products.h parallel/pool.h simd/simd.h \
                          kernels.h quant.h
$(B)/simd/vec_kernels.o: simd/vec_kernels.c simd/vec.h simd/simd.h kernels.h quant.h hash.h
$(B)/simd/quant_x86.o: simd/quant_x86.c simd/simd.h kernels.h quant.h
$(B)/simd/quant_neon.o: simd/quant_neon.c simd/simd.h kernels.h quant.h
$(B)/simd/cpu.o: simd/cpu.c simd/simd.h kernels.h quant.h
# the trainer's kernels, linked into every program (block.c and attention.c hold the
# backward passes); built by the pattern rule, as in the fuzz and cross builds
$(B)/trainer/train_kernels.o: trainer/train_kernels.c kernels.h quant.h hash.h simd/simd.h
$(B)/checkpoint.o: checkpoint.c checkpoint.h attention.h kernels.h quant.h platform/os.h formats/gguf.h \
                   tokenizer.h
$(B)/formats/gguf.o: formats/gguf.c formats/gguf.h checkpoint.h attention.h kernels.h quant.h tokenizer.h \
                    platform/os.h
$(B)/platform/os.o: platform/os.c platform/os.h
$(B)/block.o: block.c block.h checkpoint.h kernels.h quant.h
$(B)/model.o: model.c model.h block.h checkpoint.h kernels.h quant.h attention.h
$(B)/unicode/unicode.o: unicode/unicode.c unicode/unicode.h
$(B)/hash.o: hash.c hash.h
$(B)/tokenizer.o: tokenizer.c tokenizer.h hash.h platform/os.h unicode/unicode.h
$(B)/sampler.o: sampler.c sampler.h kernels.h quant.h
$(B)/platform/cli.o: platform/cli.c platform/cli.h
$(B)/generate.o: generate.c generate.h model.h checkpoint.h kernels.h quant.h attention.h platform/os.h \
                 tokenizer.h sampler.h unicode/unicode.h
$(B)/run.o: run.c formats/gguf.h model.h checkpoint.h kernels.h quant.h attention.h lab/attention_spec.h \
            lab/run_lab.h platform/os.h tokenizer.h sampler.h platform/cli.h generate.h hash.h
$(B)/quantize.o: quantize.c checkpoint.h kernels.h quant.h platform/cli.h platform/os.h

# lab/attnmap.c includes its explorer page, lab/attnmap_page.html, as C string literals sed
# writes into the build folder: one per line (C11 promises no more than 4095 bytes in a
# literal), with \ " and ? escaped (so that no trigraph forms).
$(B)/attnmap_page.inc: lab/attnmap_page.html
	@mkdir -p $(B)
	sed -e 's/[\\"?]/\\&/g' -e 's/^/"/' -e 's/$$/\\n",/' lab/attnmap_page.html > $@.tmp
	@mv $@.tmp $@
$(B)/lab/attnmap.o: lab/attnmap.c lab/attnmap.h unicode/unicode.h $(B)/attnmap_page.inc $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -I$(B) -c $< -o $@
$(B)/lab/attention_spec.o: lab/attention_spec.c lab/attention_spec.h attention.h platform/cli.h
$(B)/lab/run_lab.o: lab/run_lab.c lab/run_lab.h lab/attention_spec.h lab/attnmap.h lab/eval.h formats/gguf.h \
                    generate.h model.h checkpoint.h kernels.h quant.h attention.h platform/os.h \
                    tokenizer.h sampler.h
$(B)/lab/eval.o: lab/eval.c lab/eval.h model.h checkpoint.h kernels.h quant.h attention.h \
                 tokenizer.h platform/os.h
$(B)/lab/tutorial.o $(B)/lab/tutorial_figures.o: lab/tutorial.h $(HEADERS)

$(B)/trainer/bpe.o: trainer/bpe.c trainer/bpe.h hash.h tokenizer.h platform/os.h
TRAIN_HEADERS = trainer/train.h trainer/train_model.h trainer/train_backward.h \
                trainer/train_optim.h model.h checkpoint.h \
                kernels.h quant.h attention.h
$(B)/trainer/train.o: trainer/train.c $(TRAIN_HEADERS) tokenizer.h trainer/bpe.h platform/cli.h platform/os.h \
                      lab/attention_spec.h
$(B)/trainer/train_model.o: trainer/train_model.c block.h hash.h $(TRAIN_HEADERS)
$(B)/trainer/train_backward.o: trainer/train_backward.c $(TRAIN_HEADERS)
$(B)/trainer/train_optim.o: trainer/train_optim.c $(TRAIN_HEADERS) hash.h platform/os.h
