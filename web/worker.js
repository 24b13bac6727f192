/* worker.js: the engine (attn.wasm, web/web.c) in a Web Worker, so that a long generation
 * never freezes the page, behind a minimal WASI shim: the shipped model and tokenizer are
 * files held in memory (read-only, under one preopened folder "/"), stdout and stderr go
 * to the page as messages, the clocks are the browser's. No network beyond fetching the
 * page's own files; when the page was opened from one self-contained file, it hands the
 * files over in its first message instead.
 *
 * Messages in (from page.js): {type: 'generate', prompt, n, t, p, k, s, attn},
 * {type: 'attention', layer}, {type: 'eval', attn, text}.
 * Messages out: {type: 'ready', config, pieces} | {type: 'tokens', ids} |
 * {type: 'out', bytes} | {type: 'err', text} | {type: 'steps', steps: [{id, top, probs}]} |
 * {type: 'done', status, stats} | {type: 'attention', layer, T, heads, weights, keep} |
 * {type: 'eval', status, bits} | {type: 'tutorial', step, status, out, err} |
 * {type: 'fatal', text}.
 */
'use strict';

const ERRNO = {SUCCESS: 0, BADF: 8, INVAL: 28, ISDIR: 31, NOENT: 44, NOSYS: 52, SPIPE: 70};
const FILETYPE = {CHARACTER_DEVICE: 2, DIRECTORY: 3, REGULAR_FILE: 4};
const PREOPEN = 3;            // the one preopened folder, "/"
const files = {};             // path (no leading '/') -> Uint8Array
const open = {};              // fd -> {data, pos}
let nextFd = 4;
let wasm = null;              // the instance's exports
let argv = [];                // the running command's arguments, each a C string's bytes
let captured = null;          // while tutorial.wasm runs: {1: [bytes], 2: [bytes]}
let tutorialModule = null;    // tutorial.wasm compiled, instantiated afresh for each step
let memory = null;
const utf8 = new TextDecoder('utf-8');
const encoder = new TextEncoder();

function view() { return new DataView(memory.buffer); }
function bytesAt(ptr, len) { return new Uint8Array(memory.buffer, ptr, len); }
function stringAt(ptr, len) { return utf8.decode(bytesAt(ptr, len)); }
function pathOf(ptr, len) { return stringAt(ptr, len).replace(/^\.?\/+/, ''); }

function filestat(buf, type, size) {
    const v = view();
    for (let i = 0; i < 64; i += 8) v.setBigUint64(buf + i, 0n, true);
    v.setUint8(buf + 16, type);
    v.setBigUint64(buf + 24, 1n, true);
    v.setBigUint64(buf + 32, BigInt(size), true);
}

// Copies from data at pos into the iovecs; returns the bytes copied.
function readInto(data, pos, iovs, n) {
    const v = view();
    let done = 0;
    for (let i = 0; i < n; i++) {
        const ptr = v.getUint32(iovs + 8 * i, true), len = v.getUint32(iovs + 8 * i + 4, true);
        const chunk = data.subarray(Math.min(pos + done, data.length),
                                    Math.min(pos + done + len, data.length));
        bytesAt(ptr, chunk.length).set(chunk);
        done += chunk.length;
        if (chunk.length < len) break;
    }
    return done;
}

const wasi = {
    args_get(argvPtr, buf) {
        let at = buf;
        argv.forEach((arg, i) => {
            view().setUint32(argvPtr + 4 * i, at, true);
            bytesAt(at, arg.length).set(arg);
            at += arg.length;
        });
        return ERRNO.SUCCESS;
    },
    args_sizes_get(argc, size) {
        view().setUint32(argc, argv.length, true);
        view().setUint32(size, argv.reduce((n, a) => n + a.length, 0), true);
        return ERRNO.SUCCESS;
    },
    environ_get: () => ERRNO.SUCCESS,
    environ_sizes_get: (n, size) => { view().setUint32(n, 0, true); view().setUint32(size, 0, true); return 0; },
    clock_time_get(id, precision, out) {
        const ns = id === 0 ? BigInt(Date.now()) * 1000000n
                            : BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
        view().setBigUint64(out, ns, true);
        return ERRNO.SUCCESS;
    },
    fd_write(fd, iovs, n, written) {
        const v = view();
        let total = 0;
        const parts = [];
        for (let i = 0; i < n; i++) {
            const ptr = v.getUint32(iovs + 8 * i, true), len = v.getUint32(iovs + 8 * i + 4, true);
            parts.push(bytesAt(ptr, len).slice());
            total += len;
        }
        if (fd !== 1 && fd !== 2) return ERRNO.BADF;
        const bytes = new Uint8Array(total);
        let at = 0;
        for (const p of parts) { bytes.set(p, at); at += p.length; }
        if (captured) captured[fd].push(bytes);
        else if (fd === 1) { pendingOut.push(bytes); flushSoon(); }
        else postMessage({type: 'err', text: utf8.decode(bytes)});
        v.setUint32(written, total, true);
        return ERRNO.SUCCESS;
    },
    fd_read(fd, iovs, n, nread) {
        const f = open[fd];
        if (!f) return ERRNO.BADF;
        const got = readInto(f.data, f.pos, iovs, n);
        f.pos += got;
        view().setUint32(nread, got, true);
        return ERRNO.SUCCESS;
    },
    fd_pread(fd, iovs, n, offset, nread) {
        const f = open[fd];
        if (!f) return ERRNO.BADF;
        view().setUint32(nread, readInto(f.data, Number(offset), iovs, n), true);
        return ERRNO.SUCCESS;
    },
    fd_seek(fd, offset, whence, out) {
        const f = open[fd];
        if (!f) return fd <= 2 ? ERRNO.SPIPE : ERRNO.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? f.pos : f.data.length;
        const pos = base + Number(offset);
        if (pos < 0) return ERRNO.INVAL;
        f.pos = pos;
        view().setBigUint64(out, BigInt(pos), true);
        return ERRNO.SUCCESS;
    },
    fd_close(fd) {
        if (!open[fd]) return ERRNO.BADF;
        delete open[fd];
        return ERRNO.SUCCESS;
    },
    fd_fdstat_get(fd, buf) {
        const v = view();
        const type = fd <= 2 ? FILETYPE.CHARACTER_DEVICE : fd === PREOPEN ? FILETYPE.DIRECTORY
                   : open[fd] ? FILETYPE.REGULAR_FILE : -1;
        if (type < 0) return ERRNO.BADF;
        v.setUint8(buf, type);
        v.setUint16(buf + 2, 0, true);
        v.setBigUint64(buf + 8, 0xffffffffffffffffn, true);
        v.setBigUint64(buf + 16, 0xffffffffffffffffn, true);
        return ERRNO.SUCCESS;
    },
    fd_fdstat_set_flags: () => ERRNO.SUCCESS,
    fd_filestat_get(fd, buf) {
        const f = open[fd];
        if (fd === PREOPEN) { filestat(buf, FILETYPE.DIRECTORY, 0); return ERRNO.SUCCESS; }
        if (!f) return ERRNO.BADF;
        filestat(buf, FILETYPE.REGULAR_FILE, f.data.length);
        return ERRNO.SUCCESS;
    },
    fd_prestat_get(fd, buf) {
        if (fd !== PREOPEN) return ERRNO.BADF;
        view().setUint8(buf, 0);
        view().setUint32(buf + 4, 1, true);
        return ERRNO.SUCCESS;
    },
    fd_prestat_dir_name(fd, ptr, len) {
        if (fd !== PREOPEN) return ERRNO.BADF;
        bytesAt(ptr, 1)[0] = 0x2f;   // "/"
        return ERRNO.SUCCESS;
    },
    path_filestat_get(fd, flags, ptr, len, buf) {
        const path = pathOf(ptr, len);
        if (fd !== PREOPEN) return ERRNO.BADF;
        if (path === '' || path === '.') { filestat(buf, FILETYPE.DIRECTORY, 0); return 0; }
        if (!files[path]) return ERRNO.NOENT;
        filestat(buf, FILETYPE.REGULAR_FILE, files[path].length);
        return ERRNO.SUCCESS;
    },
    path_open(fd, dirflags, ptr, len, oflags, rights, inheriting, fdflags, out) {
        const path = pathOf(ptr, len);
        if (fd !== PREOPEN) return ERRNO.BADF;
        if (!files[path]) return ERRNO.NOENT;
        if (oflags & 2) return ERRNO.ISDIR;   // O_DIRECTORY
        const handle = nextFd++;
        open[handle] = {data: files[path], pos: 0};
        view().setUint32(out, handle, true);
        return ERRNO.SUCCESS;
    },
    proc_exit(code) {
        if (captured) throw {exitStatus: code};
        throw new Error('the engine exited with status ' + code);
    },
};

// The C string s in fresh wasm memory (free with web_free); its byte length in .length.
function cString(s) {
    const bytes = encoder.encode(s);
    const ptr = wasm.web_alloc(bytes.length + 1);
    bytesAt(ptr, bytes.length).set(bytes);
    bytesAt(ptr + bytes.length, 1)[0] = 0;
    return {ptr, length: bytes.length};
}

// The text and the steps go to the page in batches, at most every FLUSH_MS: a message per
// token would cost more than the token (the page's thread wakes for each).
const FLUSH_MS = 50;
let pendingOut = [], pendingSteps = [], lastFlush = 0;

function flush() {
    if (pendingSteps.length) postMessage({type: 'steps', steps: pendingSteps});
    if (pendingOut.length) {
        const bytes = new Uint8Array(pendingOut.reduce((n, b) => n + b.length, 0));
        let at = 0;
        for (const b of pendingOut) { bytes.set(b, at); at += b.length; }
        postMessage({type: 'out', bytes});
    }
    pendingOut = [];
    pendingSteps = [];
    lastFlush = performance.now();
}

function flushSoon() { if (performance.now() - lastFlush >= FLUSH_MS) flush(); }

function onToken(id) {
    const top = Array.from(new Int32Array(memory.buffer, wasm.web_top_ids(), 10));
    const probs = Array.from(new Float32Array(memory.buffer, wasm.web_top_probs(), 10));
    pendingSteps.push({id, top, probs});
}

async function fetchBytes(name) {
    const response = await fetch(name);
    if (!response.ok) throw new Error(name + ': HTTP ' + response.status);
    return new Uint8Array(await response.arrayBuffer());
}

async function start(given) {
    const wasmBytes = given ? given['attn.wasm'] : await fetchBytes('attn.wasm');
    for (const name of ['weights/model.bin', 'weights/tokenizer.bin'])
        files[name] = given ? given[name] : await fetchBytes(name);
    const {instance} = await WebAssembly.instantiate(wasmBytes,
        {wasi_snapshot_preview1: wasi, web: {on_token: onToken}});
    wasm = instance.exports;
    memory = wasm.memory;
    tutorialModule = await WebAssembly.compile(given ? given['tutorial.wasm']
                                                     : await fetchBytes('tutorial.wasm'));
    wasm._initialize();
    if (wasm.web_load() !== 0) throw new Error('the model did not load (see the message above)');
    const config = {layers: wasm.web_config(0), heads: wasm.web_config(1),
                    vocab: wasm.web_config(2), context: wasm.web_config(3)};
    const lenPtr = wasm.web_alloc(4), pieces = [];
    for (let id = 0; id < config.vocab; id++) {
        const ptr = wasm.web_piece(-1, id, lenPtr);
        pieces.push(bytesAt(ptr, view().getInt32(lenPtr, true)).slice());
    }
    wasm.web_free(lenPtr);
    warmUp();
    postMessage({type: 'ready', config, pieces});
}

// V8 runs WebAssembly first from a quick baseline compile and swaps in optimised code once a
// function has run hot, so a first generation would time mostly the baseline code (short
// runs decoded at a third of the speed of long ones). A short greedy run at load, its text
// and steps dropped, makes the forward pass hot before the user's first run.
const WARM_UP_TOKENS = '48';
function warmUp() {
    const strings = ['ROMEO:', WARM_UP_TOKENS, '0', '0.9', '0', '1'].map(cString);
    captured = {1: [], 2: []};   // its output goes nowhere
    wasm.web_generate(strings[0].ptr, strings[0].length, ...strings.slice(1).map(x => x.ptr));
    captured = null;
    for (const x of strings) wasm.web_free(x.ptr);
    pendingSteps = [];
}

function generate(m) {
    const spec = cString(m.attn || '');
    let status = wasm.web_set_attention(spec.ptr);
    wasm.web_free(spec.ptr);
    if (status !== 0) { postMessage({type: 'done', status, stats: null}); return; }
    const prompt = cString(m.prompt);
    const n = wasm.web_encode(prompt.ptr, prompt.length);   // its message when refused
    if (n < 0) {
        wasm.web_free(prompt.ptr);
        postMessage({type: 'done', status: 2, stats: null});
        return;
    }
    postMessage({type: 'tokens', ids: Array.from(new Int32Array(memory.buffer, wasm.web_ids(), n))});
    const settings = [m.n, m.t, m.p, m.k, m.s].map(cString);
    status = wasm.web_generate(prompt.ptr, prompt.length, ...settings.map(x => x.ptr));
    for (const x of [prompt, ...settings]) wasm.web_free(x.ptr);
    flush();
    const stats = status === 0 ? {input: wasm.web_stats(0), inputSeconds: wasm.web_stats(1),
                                  generated: wasm.web_stats(2), generateSeconds: wasm.web_stats(3),
                                  context: wasm.web_stats(4)} : null;
    postMessage({type: 'done', status, stats});
}

function attention(m) {
    const T = wasm.web_stats(4), heads = wasm.web_config(1);
    const ptr = T > 0 ? wasm.web_attention(m.layer) : 0;
    const weights = ptr ? new Float32Array(memory.buffer, ptr, heads * T * T).slice() : null;
    postMessage({type: 'attention', layer: m.layer, T, heads, weights, keep: wasm.web_stats(5)});
}

function evaluate(m) {
    const spec = cString(m.attn || '');
    const status = wasm.web_set_attention(spec.ptr);
    wasm.web_free(spec.ptr);
    let bits = -1;
    if (status === 0) {
        const text = cString(m.text);
        bits = wasm.web_bits_per_char(text.ptr, text.length);
        wasm.web_free(text.ptr);
    }
    postMessage({type: 'eval', status, bits, attn: m.attn});
}

// Runs ./tutorial's main (tutorial.wasm, a WASI command: a fresh instance each time) with
// args; its stdout and stderr as text, and its exit status.
function tutorial(m) {
    const saved = memory;
    argv = ['tutorial', ...m.args].map(a => encoder.encode(a + '\0'));
    captured = {1: [], 2: []};
    let status = 0;
    try {
        const instance = new WebAssembly.Instance(tutorialModule, {wasi_snapshot_preview1: wasi});
        memory = instance.exports.memory;
        instance.exports._start();
    } catch (e) {
        if (e && e.exitStatus !== undefined) status = e.exitStatus;
        else throw e;
    } finally {
        memory = saved;
        argv = [];
    }
    const text = fd => utf8.decode(new Uint8Array(captured[fd].flatMap(b => Array.from(b))));
    const out = text(1), err = text(2);
    captured = null;
    postMessage({type: 'tutorial', step: m.args[0], status, out, err});
}

let ready = null;
onmessage = async (event) => {
    const m = event.data;
    try {
        if (m.type === 'start') { ready = start(m.files); await ready; return; }
        await ready;
        if (m.type === 'generate') generate(m);
        else if (m.type === 'attention') attention(m);
        else if (m.type === 'eval') evaluate(m);
        else if (m.type === 'tutorial') tutorial(m);
    } catch (e) {
        postMessage({type: 'fatal', text: String(e && e.message || e)});
    }
};
