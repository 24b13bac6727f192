# mk/docs.mk: the documentation's checks and pictures, and the explorer page's self-test
# (included by the Makefile; `make check` runs the checks, `make test` none of them).

# docs-check: every "[FILE](PATH) `function`" reference in the docs names a function
# defined in FILE, every file-map line count is current, every quoted check label
# (`"LABEL"`) is one the tests print, every link stays inside the repository and resolves
# (tools/doc_refs.sh), and docs/cli.md's help texts are what the programs print
# (tools/doc_help.sh), and every project name a comment or a doc gives (a function, a
# type, a macro) exists in the code (tools/doc_names.sh); make check runs it.
# Example: make docs-check
DOCS = README.md $(wildcard docs/*.md) weights/README.md
docs-check: $(B)/run $(B)/train $(B)/quantize
	@sh tools/doc_refs.sh check $(DOCS)
	@sh tools/doc_help.sh check $(B) $(DOCS)
	@sh tools/doc_names.sh $(DOCS)

# docs-refs: rewrite the file maps' line counts and the help texts after the code
# changed. Example: make docs-refs
docs-refs: $(B)/run $(B)/train $(B)/quantize
	sh tools/doc_refs.sh update $(DOCS)
	sh tools/doc_help.sh update $(B) $(DOCS)

# tutorial-check: runs every command docs/tutorial.md shows with its output and compares
# (tests/tutorial_check.sh); a short training run when Tiny Shakespeare is at hand, else
# says skipped. make check runs it. Example: make tutorial-check
tutorial-check: all tutorial
	@sh tests/tutorial_check.sh

# readme-check: runs every command README.md shows, exactly as written, in a copy of the
# repository's files as a fresh clone has them (tests/readme_check.sh): `make run`'s text
# against README.md's, the downloads copied from ../shared (or the commands that need them
# skipped, saying so). About 3 minutes. make check runs it. Example: make readme-check
readme-check:
	@sh tests/readme_check.sh

# docs-figures: the tutorial's pictures (docs/img/*.svg): its diagrams and worked examples
# (./tutorial svg NAME), and heatmaps of the shipped model's last layer, head 2, on one
# text (-n 0: the prompt alone, so every variant draws the same tokens): exact attention,
# a window of 16 and strided l = 8; and the loss curve of step 6.4's run, from its log
# (docs/img/loss.log, kept: the run takes minutes) by tools/loss_curve.sh.
# Example: make docs-figures
DOC_PROMPT = ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.
DOC_RUN = printf '$(DOC_PROMPT)' | ./run weights/model.bin -f - -n 0 --layer 9 --head 2
DOC_FIGURES = merges rope kernel qkv heads mask cache lens block mlp sampling nucleus \
  tokenloss train adamw
docs-figures: all tutorial
	@mkdir -p docs/img
	for f in $(DOC_FIGURES); do ./tutorial svg $$f > docs/img/$$f.svg || exit 1; done
	$(DOC_RUN) --attn-map docs/img/exact.svg
	$(DOC_RUN) --attn window:w=16 --attn-map docs/img/window.svg
	$(DOC_RUN) --attn strided:l=8 --attn-map docs/img/strided.svg
	sh tools/loss_curve.sh docs/img/loss.log \
	  "./train -L 4 -C 128 -T 128 -n 1000 -e 250 on Tiny Shakespeare" > docs/img/loss.svg

# page-check: the explorer page in headless Chromium (tools/page_check.sh): two maps at
# 1400 and 600 px wide, each running the page's own #selftest (hovering a token, Tab and
# Enter, the weight under the pointer, an edited #token=, nothing wider than the window)
# with no console message. Installs Debian's chromium when missing and root, else says
# skipped. About 10 s. Example: make page-check
page-check: all
	@bash tools/page_check.sh $(B)

.PHONY: docs-check docs-refs tutorial-check readme-check docs-figures page-check
