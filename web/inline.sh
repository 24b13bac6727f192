#!/bin/sh
# web/inline.sh: the page as one self-contained file that opens from file:// (make web):
# index.html with page.js inline, worker.js in a text script (page.js starts the Worker
# from it as a Blob), and attn.wasm, tutorial.wasm and the weights as base64 in a JSON script (page.js
# decodes them and hands them to the worker, which then fetches nothing).
# Usage: web/inline.sh PAGE_FOLDER > PAGE_FOLDER/attn.html (the folder make web writes)
set -eu
dir=$1
for f in index.html steps.js page.js worker.js attn.wasm tutorial.wasm weights/model.bin weights/tokenizer.bin; do
    [ -f "$dir/$f" ] || { echo "inline.sh: $dir/$f: missing (expected make web's folder)" >&2; exit 1; }
done
b64() { base64 -w 0 "$dir/$1"; }
sed '/<script src="steps.js"><\/script>/,$d' "$dir/index.html"
echo '<script id="worker-source" type="text/plain">'
cat "$dir/worker.js"
echo '</script>'
printf '<script id="inlined-files" type="application/json">{"attn.wasm": "%s", ' "$(b64 attn.wasm)"
printf '"tutorial.wasm": "%s", ' "$(b64 tutorial.wasm)"
printf '"weights/model.bin": "%s", ' "$(b64 weights/model.bin)"
printf '"weights/tokenizer.bin": "%s"}</script>\n' "$(b64 weights/tokenizer.bin)"
echo '<script>'
cat "$dir/steps.js" "$dir/page.js"
echo '</script>'
sed '1,/<script src="page.js"><\/script>/d' "$dir/index.html"
