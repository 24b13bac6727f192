# mk/deps.mk: the headers each object depends on, as the compiler found them: every
# object's rule writes its list beside it (-MMD: build/model.o's in build/model.d, with
# -MP an empty rule for each header, so that a header removed is no error), and the lists
# of this build folder are read here; an object not yet built has none, and needs none.
# Also the explorer page lab/attnmap.c embeds. Included by the Makefile.
DEPFLAGS = -MMD -MP
-include $(shell find $(B) -name '*.d' 2>/dev/null)

# lab/attnmap.c includes its explorer page, lab/attnmap_page.html, as C string literals sed
# writes into the build folder: one per line (C11 promises no more than 4095 bytes in a
# literal), with \ " and ? escaped (so that no trigraph forms).
$(B)/attnmap_page.inc: lab/attnmap_page.html
	@mkdir -p $(B)
	sed -e 's/[\\"?]/\\&/g' -e 's/^/"/' -e 's/$$/\\n",/' lab/attnmap_page.html > $@.tmp
	@mv $@.tmp $@
$(B)/lab/attnmap.o: lab/attnmap.c $(B)/attnmap_page.inc $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(DEPFLAGS) -I$(B) -c $< -o $@
