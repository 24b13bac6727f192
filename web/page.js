/* page.js: the page's script (web/index.html). It starts the engine in a Worker
 * (worker.js: attn.wasm behind a WASI shim; or, in the self-contained file, from the
 * files inlined in it), sends it the settings, and shows what comes back: the text as
 * ./run prints it (#output), the speed line, the prompt's tokens, each step's ten most
 * likely tokens, the attention heatmaps and bits/char. Every setting is checked in C
 * (web.c, with cli.h's parsers); its one-line message appears in #message.
 *
 * A deep link generates at load: #prompt=TEXT&n=N&t=T&s=SEED (optional p=, k=, attn=,
 * probe=LAYER,HEAD,QUERY,KEY: that heatmap cell's weight into #probe; bits=1: then
 * bits/char on the validation text into #bits); when all that is over, <body data-state> is "done" (or "error"), which tools/web_check.sh waits for.
 */
'use strict';

// The validation text of bits/char: the end of Tiny Shakespeare (The Tempest), in the
// 10 % held out from the shipped model's training (weights/README.md).
const VALIDATION_TEXT =
    "SEBASTIAN:\n" +
    "His word is more than the miraculous harp; he hath\n" +
    "raised the wall and houses too.\n" +
    "\n" +
    "ANTONIO:\n" +
    "What impossible matter will he make easy next?\n" +
    "\n" +
    "SEBASTIAN:\n" +
    "I think he will carry this island home in his pocket\n" +
    "and give it his son for an apple.\n" +
    "\n" +
    "ANTONIO:\n" +
    "And, sowing the kernels of it in the sea, bring\n" +
    "forth more islands.\n" +
    "\n" +
    "GONZALO:\n" +
    "Ay.\n" +
    "\n" +
    "ANTONIO:\n" +
    "Why, in good time.\n" +
    "\n" +
    "GONZALO:\n" +
    "Sir, we were talking that our garments seem now\n" +
    "as fresh as when we were at Tunis at the marriage\n" +
    "of your daughter, who is now queen.\n" +
    "\n" +
    "ANTONIO:\n" +
    "And the rarest that e'er came there.\n" +
    "\n" +
    "SEBASTIAN:\n" +
    "Bate, I beseech you, widow Dido.\n" +
    "\n" +
    "ANTONIO:\n" +
    "O, widow Dido! ay, widow Dido.\n" +
    "\n" +
    "GONZALO:\n" +
    "Is not, sir, my doublet as fresh as the first day I\n" +
    "wore it? I mean, in a sort.\n" +
    "\n" +
    "ANTONIO:\n" +
    "That sort was well fished for.\n" +
    "\n" +
    "GONZALO:\n" +
    "When I wore it at your daughter's marriage?\n" +
    "\n" +
    "ALONSO:\n" +
    "You cram these words into mine ears against\n" +
    "The stomach of my sense. Would I had never\n" +
    "Married my daughter there! for, coming thence,\n" +
    "My son is lost and, in my rate, she too,\n" +
    "Who is so far from Italy removed\n" +
    "I ne'er again shall see her. O thou mine heir\n" +
    "Of Naples and of Milan, what strange fish\n" +
    "Hath made his meal on thee?\n";

// The attention variants offered (the --attn names; lab/attention_spec.c has them all).
const VARIANTS = ['', 'window:w=32,sinks=4', 'window:w=16', 'dilated:w=32,k=2,sinks=4',
                  'strided:l=8', 'fixed:l=32,c=8', 'lsh', 'softmax1', 'gauss', 'unscaled',
                  'linear', 'efficient', 'performer:m=256,seed=1'];
const $ = (id) => document.getElementById(id);

let worker = null, ready = false, running = false;
let config = null, pieces = [];
let decoder = null;
let steps = [];                 // per generated token: {id, top, probs}
let promptIds = [];
let heat = null;                // {layer, T, heads, weights}
let deepLink = null;

// The bytes as text, or null if they are not whole UTF-8 characters (a token that is
// a piece of one, as GPT-2's byte tokens can be).
function utf8Text(bytes) {
    try { return new TextDecoder('utf-8', {fatal: true}).decode(bytes); } catch (e) { return null; }
}

// Shows bytes with visible whitespace and \xHH for other control bytes, and for every
// byte of a token that is not whole characters (as ./tutorial tokens shows them).
function showPiece(bytes) {
    const whole = utf8Text(bytes);
    const text = whole !== null ? whole : Array.from(bytes, (b) => b < 0x80 ?
        String.fromCharCode(b) : '\\x' + b.toString(16).padStart(2, '0')).join('');
    return text.replace(/ /g, '\u2423').replace(/\n/g, '\u21b5').replace(/\t/g, '\u21e5')
        .replace(/[\x00-\x08\x0b-\x1f\x7f]/g,
                 (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
}

function setMessage(text) { $('message').textContent = text; }

function busy(on) {
    running = on;
    $('generate').disabled = on || !ready;
    $('eval').disabled = on || !ready;
    $('stop').disabled = !on;
}

// The base64 files of the self-contained page, decoded; null on a served page.
function inlinedFiles() {
    const holder = $('inlined-files');
    if (!holder) return null;
    const files = {};
    for (const [name, b64] of Object.entries(JSON.parse(holder.textContent))) {
        const raw = atob(b64), bytes = new Uint8Array(raw.length);
        for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
        files[name] = bytes;
    }
    return files;
}

function startWorker() {
    ready = false;
    busy(false);
    const source = $('worker-source');
    worker = source ? new Worker(URL.createObjectURL(new Blob([source.textContent],
                                                              {type: 'text/javascript'})))
                    : new Worker('worker.js');
    worker.onmessage = onMessage;
    worker.onerror = (e) => { setMessage('The engine failed: ' + e.message); finish('error'); };
    worker.postMessage({type: 'start', files: inlinedFiles()});
}

function finish(state) {
    busy(false);
    document.body.dataset.state = state;
}

function onMessage(event) {
    const m = event.data;
    switch (m.type) {
    case 'ready':
        ready = true;
        config = m.config;
        pieces = m.pieces;
        $('status').textContent = `Ready: ${config.layers} layers, ${config.heads} heads, ` +
            `vocabulary ${config.vocab}, context ${config.context} tokens.`;
        fillLists();
        busy(false);
        $('tutorial-run').disabled = false;
        if (deepLink) followLink(deepLink);
        break;
    case 'tutorial': showTutorial(m); break;
    case 'tokens': showTokens(m.ids); break;
    case 'out': $('output').append(decoder.decode(m.bytes, {stream: true})); break;
    case 'err': setMessage($('message').textContent + m.text); break;
    case 'steps':
        steps.push(...m.steps);
        $('step').max = steps.length - 1;
        $('step').value = steps.length - 1;
        showStep(steps.length - 1);
        break;
    case 'done': done(m); break;
    case 'attention':
        heat = m;
        $('cell').textContent = '';
        if (m.T === 0)   // web_bits_per_char's evaluation ran in the run's place
            setMessage('No attention to show: Measure ran the validation text since; ' +
                       'generate again to see it.');
        drawHeat();
        probe();
        break;
    case 'eval':
        $('bits').textContent = m.status === 0
            ? `${m.bits.toFixed(4)} bits/char with ${m.attn || 'exact'} attention`
            : 'no result (see the message above)';
        finish(m.status === 0 ? 'done' : 'error');
        break;
    case 'fatal': setMessage('The engine failed: ' + m.text); finish('error'); break;
    }
}

function done(m) {
    $('output').append(decoder.decode());
    if (m.status !== 0) {
        finish('error');
        return;
    }
    const s = m.stats, rate = (n, t) => (t > 0 ? n / t : 0).toFixed(1);
    $('speed').textContent = `prompt: ${s.input} tokens, ${rate(s.input, s.inputSeconds)} ` +
        `tokens/s; generation: ${s.generated} tokens, ` +
        `${rate(s.generated, s.generateSeconds)} tokens/s (WebAssembly, one thread)`;
    document.body.dataset.decode = rate(s.generated, s.generateSeconds);
    showStep(steps.length - 1);
    busy(false);
    heat = null;
    if (s.context > 0) requestHeat(); else afterRun();
}

function showTokens(ids) {
    promptIds = ids;
    const box = $('tokens');
    box.textContent = '';
    for (const id of ids) {
        const chip = document.createElement('span'), small = document.createElement('small');
        chip.className = 'tok';
        chip.append(showPiece(pieces[id]));
        small.textContent = id;
        chip.append(small);
        chip.title = 'click: the merges that built this token (the Tutorial panel\'s merges step)';
        chip.addEventListener('click', () => showMerges(pieces[id]));
        box.append(chip);
    }
}

// The merges that built a token: ./tutorial merges PIECE in the Tutorial panel.
function showMerges(bytes) {
    const text = utf8Text(bytes);
    if (text === null) {   // the panel's arguments are text
        setMessage(`merges: the token ${showPiece(bytes)} is part of a character, which ` +
                   'cannot be passed as an argument (expected whole UTF-8 characters)');
        return;
    }
    if (text.includes('\n')) {   // the panel takes its arguments a line each
        setMessage('merges: a token with a newline cannot be passed as one argument');
        return;
    }
    $('tutorial-step').value = 'merges';
    showCode();
    $('tutorial-args').value = text;
    runTutorial();
    $('tutorial-panel').scrollIntoView();
}

function showStep(i) {
    const table = $('top');
    table.textContent = '';
    if (i < 0 || i >= steps.length) { $('step-shown').textContent = '–'; return; }
    const s = steps[i];
    $('step-shown').textContent = `${i + 1} (it drew ${showPiece(pieces[s.id])})`;
    s.top.forEach((id, k) => {
        if (id < 0) return;
        const row = table.insertRow(), bar = document.createElement('span');
        row.insertCell().textContent = showPiece(pieces[id]);
        row.insertCell().textContent = id;
        row.insertCell().textContent = s.probs[k].toFixed(4);
        bar.className = 'bar';
        bar.style.width = Math.round(160 * s.probs[k]) + 'px';
        row.insertCell().append(bar);
        if (id === s.id) row.style.fontWeight = '700';
    });
}

function fillLists() {
    const layer = $('layer'), head = $('head'), attn = $('attn');
    layer.textContent = head.textContent = '';
    for (let l = 0; l < config.layers; l++) layer.add(new Option(String(l), String(l)));
    for (let h = 0; h < config.heads; h++) head.add(new Option(String(h), String(h)));
    layer.value = String(config.layers - 1);
    if (attn.options.length) return;
    for (const v of VARIANTS) attn.add(new Option(v || 'exact (the model\'s own)', v));
}

function requestHeat() {
    busy(true);
    worker.postMessage({type: 'attention', layer: Number($('layer').value)});
}

// The heatmap of the chosen head: a cell per (query row, key column), white 0 to blue 1
// (square root, so that small weights show), grey where the key is not visible.
function drawHeat() {
    const canvas = $('heatmap');
    if (!heat || !heat.weights) { canvas.width = canvas.height = 1; return; }
    const T = heat.T, h = Number($('head').value), w = heat.weights;
    const room = Math.min(520, canvas.parentElement.clientWidth - 4);
    const scale = Math.max(1, Math.floor(room / T));
    canvas.width = canvas.height = T;
    canvas.style.width = canvas.style.height = Math.min(T * scale, room) + 'px';
    const ctx = canvas.getContext('2d'), image = ctx.createImageData(T, T);
    for (let q = 0; q < T; q++) {
        for (let k = 0; k < T; k++) {
            const x = w[(h * T + q) * T + k], at = 4 * (q * T + k);
            const v = Number.isNaN(x) ? 0 : Math.sqrt(Math.max(0, Math.min(1, x)));
            image.data[at] = Number.isNaN(x) ? 235 : 255 - 220 * v;
            image.data[at + 1] = Number.isNaN(x) ? 235 : 255 - 170 * v;
            image.data[at + 2] = Number.isNaN(x) ? 235 : 255 - 80 * v;
            image.data[at + 3] = 255;
        }
    }
    ctx.putImageData(image, 0, 0);
}

// Row pos of the heatmap: the state holds the run's first heat.keep tokens, then its
// latest (after a context shift, not the run's first).
function tokenAt(pos) {
    const all = promptIds.concat(steps.map((s) => s.id));
    const at = pos < heat.keep ? pos : pos + Math.max(0, all.length - heat.T);
    return at < all.length ? showPiece(pieces[all[at]]) : '?';
}

function pointAt(event) {
    if (!heat || !heat.weights) return;
    const box = $('heatmap').getBoundingClientRect(), T = heat.T;
    const k = Math.floor((event.clientX - box.left) / box.width * T);
    const q = Math.floor((event.clientY - box.top) / box.height * T);
    if (q < 0 || k < 0 || q >= T || k >= T) return;
    const x = heat.weights[(Number($('head').value) * T + q) * T + k];
    $('cell').textContent = `layer ${heat.layer}, head ${$('head').value}: query ${q} ` +
        `(${tokenAt(q)}) → key ${k} (${tokenAt(k)}): ` +
        (!Number.isNaN(x) ? 'weight ' + x.toFixed(6) : k > q ? 'not visible (a later token)'
         : 'not visible (outside this attention\'s pattern)');
}

// After a heatmap arrives: the deep link's probe=LAYER,HEAD,QUERY,KEY (that cell's weight
// into #probe, for the check), then the run is done.
function probe() {
    busy(false);
    const cell = deepLink && deepLink.probe;
    if (!cell || !heat || !heat.weights) { afterRun(); return; }
    const [l, h, q, k] = cell.split(',').map(Number), T = heat.T;
    const valid = [l, h, q, k].every(Number.isInteger) && l >= 0 && l < config.layers &&
                  h >= 0 && h < heat.heads && q >= 0 && q < T && k >= 0 && k < T;
    if (valid && heat.layer !== l) { $('layer').value = String(l); requestHeat(); return; }
    if (valid) { $('head').value = String(h); drawHeat(); }
    $('probe').textContent = valid
        ? `probe ${cell}: ${heat.weights[(h * T + q) * T + k].toFixed(6)}`
        : `probe: no cell ${cell} (expected LAYER,HEAD,QUERY,KEY within ${config.layers} ` +
          `layers, ${heat.heads} heads, ${T} tokens)`;
    deepLink.probe = null;
    afterRun();
}

// The end of a deep link's run: with bits=1, bits/char on the validation text first.
function afterRun() {
    if (!deepLink || !deepLink.bits) { finish('done'); return; }
    deepLink.bits = null;
    measure();
}

function measure() {
    setMessage('');
    $('bits').textContent = 'measuring…';
    busy(true);
    worker.postMessage({type: 'eval', attn: $('attn').value, text: VALIDATION_TEXT});
}

function run() {
    if (!ready || running) return;
    setMessage('');
    $('output').textContent = '';
    $('speed').textContent = '';
    $('tokens').textContent = '';
    $('probe').textContent = '';
    $('cell').textContent = '';
    steps = [];
    $('step').max = $('step').value = 0;
    showStep(-1);
    heat = null;
    drawHeat();
    decoder = new TextDecoder('utf-8');
    document.body.dataset.state = 'running';
    busy(true);
    worker.postMessage({type: 'generate', prompt: $('prompt').value, n: $('n').value.trim(),
                        t: $('t').value.trim(), p: $('p').value.trim(), k: $('k').value.trim(),
                        s: $('s').value.trim(), attn: $('attn').value});
}

// #prompt=TEXT&n=N&...: %XX an escaped byte, '+' a plus (not form encoding).
function parseHash() {
    const hash = location.hash.replace(/^#/, '');
    const link = {};
    for (const part of hash.split('&')) {
        const eq = part.indexOf('=');
        if (eq < 0) continue;
        try {
            link[part.slice(0, eq)] = decodeURIComponent(part.slice(eq + 1));
        } catch (e) {
            setMessage(`The link's ${part.slice(0, eq)} is not valid percent-encoding ` +
                       '(expected %XX escapes of UTF-8 bytes).');
            document.body.dataset.state = 'error';   // the link's work is over
            return null;
        }
    }
    return 'prompt' in link || 'step' in link ? link : null;
}

// A deep link's work: a tutorial step (#step=), a generation (#prompt=), or both.
function followLink(link) {
    if ('step' in link) {
        if (!TUTORIAL_STEPS.some((s) => s.name === link.step)) {
            setMessage(`The link's step "${link.step}" is not a tutorial step (expected one ` +
                       `of: ${TUTORIAL_STEPS.map((s) => s.name).join(', ')}).`);
            document.body.dataset.state = 'error';
        } else {
            $('tutorial-step').value = link.step;
            $('tutorial-args').value = link.args || '';
            showCode();
            runTutorial();
            $('tutorial-panel').scrollIntoView();
        }
    }
    if ('prompt' in link) { applySettings(link); run(); }
}

// The Tutorial panel: the chosen step's functions, as web/steps.sh cut them from the C.
function showCode() {
    const step = TUTORIAL_STEPS.find((s) => s.name === $('tutorial-step').value);
    $('tutorial-code').replaceChildren(...step.code.flatMap((c) => {
        const head = document.createElement('p');
        head.className = 'note';
        head.textContent = `${c.file}: ${c.name}`;
        const pre = document.createElement('pre');
        pre.className = 'code';
        pre.dataset.function = c.name;
        pre.textContent = c.text;
        return [head, pre];
    }));
}

// ./tutorial STEP ARGS in the worker (tutorial.wasm); its arguments one a line.
function runTutorial() {
    const text = $('tutorial-args').value.replace(/\n$/, '');
    const args = text === '' ? [] : text.split('\n');
    $('tutorial-run').disabled = true;
    $('tutorial-out').textContent = '';
    setMessage('');
    delete document.body.dataset.tutorial;
    worker.postMessage({type: 'tutorial', args: [$('tutorial-step').value, ...args]});
}

function showTutorial(m) {
    // a failed step's message also where its output would be, beside the arguments
    $('tutorial-out').textContent = m.out + (m.status !== 0 && m.err ? m.err : '');
    if (m.err) setMessage(m.err.replace(/\n$/, ''));
    $('tutorial-run').disabled = false;
    document.body.dataset.tutorial = m.status === 0 ? 'done' : 'error';
}

function applySettings(link) {
    $('prompt').value = link.prompt;
    for (const key of ['n', 't', 'p', 'k', 's']) if (key in link) $(key).value = link[key];
    if ('attn' in link) {
        const attn = $('attn');
        if (![...attn.options].some((o) => o.value === link.attn))
            attn.add(new Option(link.attn, link.attn));
        attn.value = link.attn;
    }
}

$('form').addEventListener('submit', (e) => { e.preventDefault(); deepLink = null; run(); });
// Ends the run under way: the engine restarts (a second), then follows deepLink if set.
function stopRun(message) {
    worker.terminate();
    if (decoder) $('output').append(decoder.decode());
    setMessage(message);
    finish('stopped');
    startWorker();
}

$('stop').addEventListener('click', () => {
    deepLink = null;
    stopRun('Stopped; the engine restarts (a second).');
});
$('step').addEventListener('input', () => showStep(Number($('step').value)));
$('layer').addEventListener('change', () => { if (heat && !running) requestHeat(); });
$('head').addEventListener('change', drawHeat);
$('heatmap').addEventListener('pointermove', pointAt);
$('eval').addEventListener('click', () => {
    if (ready && !running) measure();
});
window.addEventListener('hashchange', () => {
    deepLink = parseHash();
    if (deepLink && running) stopRun('A new link: the run stops and the link\'s starts.');
    else if (deepLink && ready) followLink(deepLink);
});
$('tutorial-form').addEventListener('submit', (e) => { e.preventDefault(); runTutorial(); });
$('tutorial-step').addEventListener('change', showCode);

for (const step of TUTORIAL_STEPS) $('tutorial-step').add(new Option(step.name, step.name));
$('tutorial-step').value = 'attend';
showCode();
deepLink = parseHash();
startWorker();
