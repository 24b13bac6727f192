/* test_model.c: the forward pass against reference logits, prefill against
 * token-by-token decoding, bf16 and int8 loading, and thread-count independence.
 *
 * Reference data (tests/data, else ../shared/testdata; check_data_file): gpt2/{tiny,small}.bin
 * with {tiny,small}_logits.f32, written by llm.c's gpt2_forward (the token ids are the
 * sidecars' "lcg42" sequence, regenerated here from its stated recurrence);
 * llama2c/{s260k,s15m}.bin with their logits, written by llama2.c's run.c forward (token
 * ids from the sidecars). The repository carries tiny and s260k; small and s15m need
 * ../shared.
 */
#include "model.h"

#include <errno.h>     /* errno, EIO */
#include <float.h>     /* FLT_EVAL_METHOD */
#include <math.h>      /* fabsf; pow, cos, sin, fmax, fabs (float64 references) */
#include <stdint.h>    /* uint64_t, uintptr_t, SIZE_MAX */
#include <stdio.h>     /* printf, snprintf */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memcmp, memcpy, memset */
#include <sys/resource.h>   /* setrlimit, RLIMIT_AS */
#include <unistd.h>    /* sysconf, rmdir */

#include "block.h"        /* block_qkv, block_matmul */
#include "checkpoint.h"   /* checkpoint_mark_cold, Weights */
#include "kernels.h"      /* kernels_set_threads, kernels_run: the thread pool */
#include "os.h"           /* os_map_file, os_unmap_file, os_drop_mapped, os_alloc_zeroed,
                             * os_commit_keep */
#include "quant.h"        /* quant_quantize */
#include "tests/check.h"  /* check_* */
#include "tests/gpt2_f64.h"   /* gpt2_f64_forward: the float64 reference */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode: --attn-top's prompt */

/* The files the tests write go in a folder of their own, made by main (mkdtemp) and
 * removed at the end. */
static char tmp_dir[] = "/tmp/test_model_XXXXXX";

/* out (cap) = tmp_dir/name; returns out. */
static const char *tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", tmp_dir, name);
    return out;
}

/* llm.c's logits agree with an independent PyTorch forward to 1e-6; ours must be within 1e-5. */
#define LOGIT_ATOL 1e-5

/* The sidecars' token generator: s0 = 42; s = s * 6364136223846793005 + 1442695040888963407
 * (mod 2^64); id = (s >> 33) mod V. */
static void lcg42_tokens(int *ids, int T, int V) {
    uint64_t s = 42;
    for (int t = 0; t < T; t++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        ids[t] = (int)((s >> 33) % (uint64_t)V);
    }
}

/* Logits of model for ids (T,), token by token through the KV cache, into out (T, V). */
static int forward_one_by_one(Model *m, const int *ids, int T, float *out) {
    int V = m->config.vocab_size;
    for (int t = 0; t < T; t++) {
        const float *logits = model_forward(m, &ids[t], 1, t, 0);
        if (!logits) return -1;
        memcpy(out + (size_t)t * V, logits, (size_t)V * sizeof(float));
    }
    return 0;
}

/* Block forward over all T tokens at once, token by token, and in uneven chunks, against
 * reference logits (T, V) read from logits_path. The chunks run first, on an empty KV
 * cache: a prompt's last layer runs only its last row past q, k and v (model.c), and the
 * token decoded after the chunks reads every key and value they left in the cache. */
static void check_logits(const char *name, const char *model_path, const char *logits_path,
                         const int *ids, int T) {
    char what[128];
    Model m;
    if (!check_true(model_load(&m, model_path, T, 0) == 0, "%s: load", name)) return;
    int V = m.config.vocab_size;
    size_t ref_bytes;
    float *ref = check_read_file(logits_path, &ref_bytes);
    float *got = malloc((size_t)T * V * sizeof(float));
    if (check_true(ref && got && ref_bytes == (size_t)T * V * sizeof(float),
                   "%s: reference logits are (%d, %d) floats", name, T, V)) {
        /* T - 1 tokens in two uneven chunks, then the last decoded */
        int split = T / 3;
        const float *next = model_forward(&m, ids, split, 0, 0) &&
                                    model_forward(&m, ids + split, T - 1 - split, split, 0)
                                ? model_forward(&m, ids + T - 1, 1, T - 1, 0)
                                : NULL;
        snprintf(what, sizeof what, "%s chunked prefill, then the last token decoded", name);
        if (check_true(next != NULL, "%s: chunked prefill and decode run", name))
            check_close(what, next, ref + (size_t)(T - 1) * V, (size_t)V, LOGIT_ATOL, 0.0);
        const float *block = model_forward(&m, ids, T, 0, 1);
        snprintf(what, sizeof what, "%s block forward logits", name);
        if (check_true(block != NULL, "%s: block forward runs", name))
            check_close(what, block, ref, (size_t)T * V, LOGIT_ATOL, 0.0);
        snprintf(what, sizeof what, "%s token-by-token logits", name);
        if (check_true(forward_one_by_one(&m, ids, T, got) == 0, "%s: decode runs", name))
            check_close(what, got, ref, (size_t)T * V, LOGIT_ATOL, 0.0);
        /* prefill in two uneven chunks must give the same final logits */
        model_forward(&m, ids, split, 0, 0);
        const float *last = model_forward(&m, ids + split, T - split, split, 0);
        snprintf(what, sizeof what, "%s chunked prefill, last row", name);
        if (check_true(last != NULL, "%s: chunked prefill runs", name))
            check_close(what, last, ref + (size_t)(T - 1) * V, (size_t)V, LOGIT_ATOL, 0.0);
    }
    free(ref);
    free(got);
    model_free(&m);
}

/* GPT-2: llm.c's logits for the sidecar's lcg42 token sequence. */
/* The two reference files of a model, or NULL (after a skip line) if either is missing. */
static int data_pair(const char *rel_model, const char *rel_other, char *model_path,
                     char *other_path) {
    const char *a = check_data_file(rel_model), *b = check_data_file(rel_other);
    if (!a || !b) {
        char reason[256];
        snprintf(reason, sizeof reason, "%s: not in tests/data and no ../shared", rel_model);
        check_skip(reason);
        return -1;
    }
    snprintf(model_path, 512, "%s", a);
    snprintf(other_path, 512, "%s", b);
    return 0;
}

static void test_gpt2_logits(const char *name, int T) {
    char model_path[512], logits_path[512], rel_model[64], rel_logits[64];
    snprintf(rel_model, sizeof rel_model, "gpt2/%s.bin", name);
    snprintf(rel_logits, sizeof rel_logits, "gpt2/%s_logits.f32", name);
    if (data_pair(rel_model, rel_logits, model_path, logits_path) != 0) return;
    int *ids = malloc((size_t)T * sizeof(int));
    if (!check_true(ids != NULL, "%s: memory for %d token ids", name, T)) return;
    lcg42_tokens(ids, T, name[0] == 't' ? 512 : 50257);
    check_logits(name, model_path, logits_path, ids, T);
    free(ids);
}

/* Llama: llama2.c's run.c logits for the token list in the sidecar ("tokens"). */
static void test_llama_logits(const char *name) {
    char model_path[512], logits_path[512], json_path[512], rel[3][64];
    snprintf(rel[0], sizeof rel[0], "llama2c/%s.bin", name);
    snprintf(rel[1], sizeof rel[1], "llama2c/%s_logits.f32", name);
    snprintf(rel[2], sizeof rel[2], "llama2c/%s_logits.json", name);
    if (data_pair(rel[0], rel[1], model_path, logits_path) != 0 ||
        data_pair(rel[0], rel[2], model_path, json_path) != 0) return;
    size_t size, T = 0;
    char *json = check_read_file(json_path, &size);
    int ids[64];
    if (check_true(json && check_json_ints(json, "tokens", ids, 64, &T) == 0 && T == 64,
                   "%s: 64 token ids from the sidecar", name))
        check_logits(name, model_path, logits_path, ids, (int)T);
    free(json);
}

/* The int8 (Q8_0) export of s15m against the fp32 model: quantizing the weights to 8 bits
 * in groups of 32 moves the logits. Measured: max |diff| 0.035 over 16 x 32000 logits
 * whose own magnitude reaches ~1 (random N(0, 0.02) weights); the bound adds margin. */
#define Q8_LOGIT_ATOL 5e-2
static void test_q80(void) {
    char f32_path[512], q8_path[512];
    if (data_pair("llama2c/s15m.bin", "llama2c/s15m_q80.bin", f32_path, q8_path) != 0) return;
    Model a, b;   /* zeroed: when a load fails, the other is never loaded but still freed */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int T = 16, ids[16];
    lcg42_tokens(ids, T, 32000);
    ids[0] = 1;   /* BOS */
    int loaded = model_load(&a, f32_path, T, 0) == 0 && model_load(&b, q8_path, T, 0) == 0;
    if (check_true(loaded, "q80: s15m.bin and s15m_q80.bin load")) {
        size_t n = (size_t)T * a.config.vocab_size;
        float *fp32 = malloc(n * sizeof(float));
        const float *la = model_forward(&a, ids, T, 0, 1);
        if (fp32 && la) memcpy(fp32, la, n * sizeof(float));
        const float *lb = model_forward(&b, ids, T, 0, 1);
        if (check_true(fp32 && la && lb, "q80: both forwards run"))
            check_close("q80 vs fp32 logits (s15m, 16 tokens)", lb, fp32, n, Q8_LOGIT_ATOL, 0.0);
        const Weights *wb = &b.checkpoint.weights;   /* 17 MB of int8: in the caches */
        check_true(wb->classifier.q8.q && !wb->classifier.q8.cold && !wb->layers[0].wq.q8.cold,
                   "q80: s15m's int8 matrices are not marked cold");
        free(fp32);
    }
    model_free(&a);
    model_free(&b);
}

/* The int8 file at path with one weight of the first layer's W_Q;W_K;W_V set to v, written
 * to a copy; whether the copy loads. at: the weight's index in the layer's values, or -1
 * for the layer's last. */
static int q8_loads_with(const char *path, long at, unsigned char v) {
    Checkpoint ck;
    size_t size, offset = 0, numel = 0;
    if (checkpoint_load(&ck, path) == 0) {
        const CheckpointTensor *t = &ck.tensors[TENSOR_QKVW];
        offset = (size_t)((const unsigned char *)t->q - (const unsigned char *)ck.map);
        numel = (size_t)t->rows * (size_t)t->cols;
    }
    checkpoint_free(&ck);
    unsigned char *data = check_read_file(path, &size);
    char copy_path[64];
    const char *copy = tmp_path(copy_path, sizeof copy_path, "q8_poisoned.bin");
    FILE *f = NULL;
    if (data && numel) {
        data[offset + (at < 0 ? numel - 1 : (size_t)at)] = v;
        f = fopen(copy, "wb");
    }
    int written = f && fwrite(data, 1, size, f) == size;
    if (f) written = fclose(f) == 0 && written;
    free(data);
    int loads = written && checkpoint_load(&ck, copy) == 0;
    checkpoint_free(&ck);
    remove(copy);
    return written ? loads : -1;
}

/* The loader refuses an int8 weight of -128 wherever it lies in a layer's values (the first
 * of a block of 64, inside one, the last), and takes -127. */
static void test_q8_poisoned(const char *q8_path) {
    static const long at[] = {0, 64, 64 * 3 + 37, -1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        check_true(q8_loads_with(q8_path, at[i], 0x80) == 0, "int8 file with -128 at weight "
                   "%ld of a layer (-1: its last): refused", at[i]);
    check_true(q8_loads_with(q8_path, 64 * 3 + 37, 0x81) == 1,
               "int8 file with -127 at weight 229 of a layer: loads");
}

/* A forward pass run inside kernels_run, where the matmuls and attention heads go to the
 * thread pool. */
typedef struct { Model *m; const int *ids; int T; float *logits; } PoolRun;
static void pool_forward(void *ctx) {
    PoolRun *p = ctx;
    const float *l = model_forward(p->m, p->ids, p->T, 0, 1);
    if (l) memcpy(p->logits, l, (size_t)p->T * p->m->config.vocab_size * sizeof(float));
}

/* m's forward pass over ids (T,) and then over ids[0] alone (decode), with 1 and 2 threads,
 * bit for bit (G10): through per-call OpenMP loops (one thread without OpenMP) and through
 * the pool (OpenMP's threads, or POSIX threads without OpenMP). An int8 prompt's product
 * splits its rows by the threads (kernels.c), so 1 and 2 threads run different jobs. */
static void threads_agree(Model *m, const int *ids, int T, const char *what) {
    int V = m->config.vocab_size;
    float *one = malloc((size_t)T * V * sizeof(float));
    kernels_set_threads(1);
    const float *l1 = model_forward(m, ids, T, 0, 1);
    if (one && l1) memcpy(one, l1, (size_t)T * V * sizeof(float));
    int threads = kernels_set_threads(2);   /* at most the cores */
    const float *l2 = model_forward(m, ids, T, 0, 1);
    check_true(one && l1 && l2 && memcmp(one, l2, (size_t)T * V * sizeof(float)) == 0,
               "threads: %s: 1 vs %d threads outside kernels_run give bitwise identical "
               "logits", what, threads);
    float *pooled = malloc((size_t)T * V * sizeof(float));
    int decode[1] = {ids[0]};
    PoolRun run = {m, ids, T, pooled};
    if (pooled) kernels_run(pool_forward, &run);
    check_true(one && pooled && memcmp(one, pooled, (size_t)T * V * sizeof(float)) == 0,
               "threads: %s: the %d-thread pool gives the same bits as 1 thread (prefill)",
               what, threads);
    run.ids = decode;
    run.T = 1;
    if (pooled) kernels_run(pool_forward, &run);   /* a single token: the decode kernels */
    kernels_set_threads(1);
    const float *l3 = model_forward(m, decode, 1, 0, 1);
    check_true(pooled && l3 && memcmp(pooled, l3, (size_t)V * sizeof(float)) == 0,
               "threads: %s: the %d-thread pool gives the same bits as 1 thread (decode)",
               what, threads);
    kernels_set_threads(2);
    free(pooled);
    free(one);
}

/* quantize's int8 form of a GPT-2 and a Llama model (s260k's hidden width 172 is not a
 * multiple of the group of 32: its rows end in a short group) against the fp32 files.
 * Measured max |diff|: tiny 0.0065 over logits of magnitude ~5; s260k 0.011. */
#define Q8_SAVE_ATOL 3e-2
static void test_quantize(const char *rel, int T, int bos) {
    char f32_path[512], q8_path[512];
    if (data_pair(rel, rel, f32_path, q8_path) != 0) return;
    snprintf(q8_path, sizeof q8_path, "%s/q8_%d.bin", tmp_dir, T);
    Checkpoint ck;
    int saved = checkpoint_load(&ck, f32_path) == 0 &&
                checkpoint_save_q8(&ck, q8_path, CHECKPOINT_Q8_GROUP) == 0;
    checkpoint_free(&ck);
    Model a, b;   /* zeroed: when a load fails, the other is never loaded but still freed */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int ids[64];
    int loaded = saved && model_load(&a, f32_path, T, 0) == 0 && model_load(&b, q8_path, T, 0) == 0;
    if (check_true(loaded, "quantize: %s written as int8 and loaded", rel)) {
        lcg42_tokens(ids, T, a.config.vocab_size);
        if (bos) ids[0] = 1;
        size_t n = (size_t)T * a.config.vocab_size;
        float *fp32 = malloc(n * sizeof(float));
        const float *la = model_forward(&a, ids, T, 0, 1);
        if (fp32 && la) memcpy(fp32, la, n * sizeof(float));
        const float *lb = model_forward(&b, ids, T, 0, 1);
        check_true(b.checkpoint.weights.int8, "quantize: %s int8 file runs in int8", rel);
        if (check_true(fp32 && la && lb, "quantize: %s: both forwards run", rel))
            check_close("quantize: int8 vs fp32 logits", lb, fp32, n, Q8_SAVE_ATOL, 0.0);
        free(fp32);
        char what[96];
        snprintf(what, sizeof what, "%s in int8", rel);
        threads_agree(&b, ids, T, what);
        /* model_load rearranged the int8 rows where this build reads them packed: such a
         * checkpoint is not written (it would be garbage as rows), and no file appears */
        if (b.checkpoint.packed) {
            char again[600];
            snprintf(again, sizeof again, "%s.again", q8_path);
            remove(again);
            FILE *f = NULL;
            check_true(checkpoint_save_q8(&b.checkpoint, again, CHECKPOINT_Q8_GROUP) == -1 &&
                       !(f = fopen(again, "rb")),
                       "quantize: %s: a packed checkpoint is refused, nothing written", rel);
            if (f) fclose(f);
            remove(again);
        }
        model_free(&b);
    }
    model_free(&a);
    if (!bos) test_q8_poisoned(q8_path);
    remove(q8_path);
}

/* Writes the checkpoint at src as bf16 (round to nearest even) to bf16_path, and the
 * same rounded values as fp32 to f32_path; returns 0 on success. */
static int write_bf16_pair(const char *src, const char *bf16_path, const char *f32_path) {
    size_t size;
    unsigned char *data = check_read_file(src, &size);
    if (!data || size < 1024) { free(data); return -1; }
    size_t n = (size - 1024) / 4;
    FILE *fb = fopen(bf16_path, "wb"), *ff = fopen(f32_path, "wb");
    int ok = fb && ff;
    int32_t header[256];
    memcpy(header, data, sizeof header);
    if (ok) ok = fwrite(header, sizeof header, 1, ff) == 1;
    header[1] = CHECKPOINT_GPT2_BF16;
    if (ok) ok = fwrite(header, sizeof header, 1, fb) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        uint32_t bits;
        memcpy(&bits, data + 1024 + 4 * i, 4);
        bits += 0x7FFF + ((bits >> 16) & 1);   /* round to nearest, ties to even */
        uint16_t half = (uint16_t)(bits >> 16);
        uint32_t widened = (uint32_t)half << 16;
        ok = fwrite(&half, 2, 1, fb) == 1 && fwrite(&widened, 4, 1, ff) == 1;
    }
    if (fb) fclose(fb);
    if (ff) fclose(ff);
    free(data);
    return ok ? 0 : -1;
}

/* A bf16 checkpoint must give exactly the logits of the fp32 file holding the same values. */
static void test_bf16(void) {
    char src[512];
    if (data_pair("gpt2/tiny.bin", "gpt2/tiny.bin", src, src) != 0) return;
    char bf16_buf[64], f32_buf[64];
    const char *bf16_path = tmp_path(bf16_buf, sizeof bf16_buf, "bf16.bin");
    const char *f32_path = tmp_path(f32_buf, sizeof f32_buf, "f32.bin");
    if (!check_true(write_bf16_pair(src, bf16_path, f32_path) == 0, "bf16: fixtures written"))
        return;
    Model a, b;   /* zeroed: when a load fails, the other is never loaded but still freed */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int T = 16, ids[16];
    lcg42_tokens(ids, T, 512);
    int loaded = model_load(&a, bf16_path, T, 0) == 0 && model_load(&b, f32_path, T, 0) == 0;
    if (check_true(loaded, "bf16: both files load")) {
        const float *la = model_forward(&a, ids, T, 0, 1);
        const float *lb = model_forward(&b, ids, T, 0, 1);
        size_t bytes = (size_t)T * a.config.vocab_size * sizeof(float);
        check_true(la && lb && memcmp(la, lb, bytes) == 0,
                   "bf16: logits bitwise equal to the fp32 file of the rounded weights");
    }
    model_free(&a);
    model_free(&b);
    remove(bf16_path);
    remove(f32_path);
}

/* The forward pass with 1 and 2 threads must agree bit for bit (G10). */
static void test_threads(void) {
    char path[512];
    if (data_pair("gpt2/tiny.bin", "gpt2/tiny.bin", path, path) != 0) return;
    Model m;
    if (!check_true(model_load(&m, path, 64, 0) == 0, "threads: load tiny")) return;
    int ids[64];
    lcg42_tokens(ids, 64, m.config.vocab_size);
    threads_agree(&m, ids, 64, "tiny (fp32)");
    model_free(&m);
}

/* Logits of ids (T,) three ways, into out (2 T + 1, V): block forward (rows 0 .. T-1),
 * token by token (T .. 2T-1), and two uneven chunks (the last row, 2T). Returns 0, or -1
 * if a pass failed. */
static int forward_three_ways(Model *m, const int *ids, int T, float *out) {
    size_t V = (size_t)m->config.vocab_size;
    const float *block = model_forward(m, ids, T, 0, 1);
    if (!block) return -1;
    memcpy(out, block, (size_t)T * V * sizeof(float));
    if (forward_one_by_one(m, ids, T, out + (size_t)T * V) != 0) return -1;
    int split = T / 3;
    const float *last = model_forward(m, ids, split, 0, 0)
                        ? model_forward(m, ids + split, T - split, split, 0) : NULL;
    if (!last) return -1;
    memcpy(out + 2 * (size_t)T * V, last, V * sizeof(float));
    return 0;
}

/* A KV cache in half precision (model_set_half_cache), on the tiny GPT-2 and s260k (whose
 * 8 heads share 4 kv heads):
 *   - with q, k and v rounded to halves before attention (Config.half_kv, a GGUF model's
 *     path), the cache stores them exactly: block forward, token by token and chunks give
 *     the float cache's logits, bit for bit;
 *   - on the plain path, the three stay near the reference's logits (halves keep 11
 *     significant bits: measured max |diff| 4.4e-5 (tiny) and 1.5e-4 (s260k), against
 *     3e-7 with floats; another head's keys, or a value missing, moved them by 3e-3 to 0.18), and
 *     1 and 2 threads give the same bits;
 *   - the cache takes half the bytes. */
#define HALF_LOGIT_ATOL 1e-3
static void test_half_cache(const char *rel_model, const char *rel_logits,
                            const char *rel_json) {
    char path[512], logits_path[512], json_path[512];
    if (data_pair(rel_model, rel_logits, path, logits_path) != 0) return;
    enum { T = 48 };   /* the first rows of the reference's 64 */
    int ids[64];
    if (rel_json) {   /* llama2.c's: the sidecar's tokens */
        size_t size, n = 0;
        char *json = data_pair(rel_model, rel_json, path, json_path) == 0
                     ? check_read_file(json_path, &size) : NULL;
        int ok = json && check_json_ints(json, "tokens", ids, 64, &n) == 0 && n >= T;
        free(json);
        if (!check_true(ok, "half cache: %d token ids from %s", T, rel_json)) return;
    } else {          /* llm.c's: lcg42 */
        lcg42_tokens(ids, T, 512);
    }
    Model m;
    if (!check_true(model_load(&m, path, T, 0) == 0, "half cache: load %s", rel_model)) return;
    size_t V = (size_t)m.config.vocab_size, n_out = (2 * (size_t)T + 1) * V;
    float *f32 = malloc(n_out * sizeof(float)), *f16 = malloc(n_out * sizeof(float));
    size_t ref_bytes = 0;
    float *ref = check_read_file(logits_path, &ref_bytes);
    if (!f32 || !f16 || !ref || ref_bytes < (size_t)T * V * sizeof(float)) {
        check_true(0, "half cache: memory, and %d rows of logits in %s", T, rel_logits);
        goto done;
    }
    size_t float_bytes = m.attention_bytes;
    m.config.half_kv = 1;   /* q, k and v rounded as a GGUF model's */
    int ran = forward_three_ways(&m, ids, T, f32) == 0 && model_set_half_cache(&m, 1) == 0 &&
              forward_three_ways(&m, ids, T, f16) == 0;
    check_true(ran && memcmp(f16, f32, n_out * sizeof(float)) == 0,
               "half cache: %s, keys and values rounded to halves first: the float cache's "
               "logits bit for bit (block, token by token, chunks)", rel_model);
    check_true(m.attention_bytes * 2 == float_bytes, "half cache: %s: %zu bytes, half of %zu",
               rel_model, m.attention_bytes, float_bytes);
    m.config.half_kv = 0;   /* the plain path, its keys and values rounded by the cache alone */
    if (check_true(forward_three_ways(&m, ids, T, f16) == 0, "half cache: %s: the plain "
                   "path runs", rel_model)) {
        check_close("half cache: block forward vs the reference's logits", f16, ref,
                    (size_t)T * V, HALF_LOGIT_ATOL, 0.0);
        check_close("half cache: token by token vs the reference's logits", f16 + (size_t)T * V,
                    ref, (size_t)T * V, HALF_LOGIT_ATOL, 0.0);
        check_close("half cache: chunks' last row vs the reference's", f16 + 2 * (size_t)T * V,
                    ref + (size_t)(T - 1) * V, V, HALF_LOGIT_ATOL, 0.0);
    }
    threads_agree(&m, ids, T, "half cache");
done:
    free(f32), free(f16), free(ref);
    model_free(&m);
}

/* The tiny GPT-2's weights as a file with rotary positions (header [10] = 1, no wpe), at
 * out. Returns 0, or -1. */
static int write_rotary_copy(const char *in, const char *out) {
    size_t n = 0;
    unsigned char *bytes = check_read_file(in, &n);
    int32_t h[CHECKPOINT_GPT2_HEADER_INTS];
    if (!bytes || n < sizeof h) {
        free(bytes);
        return -1;
    }
    memcpy(h, bytes, sizeof h);
    size_t wte = (size_t)h[7] * (size_t)h[6] * sizeof(float);         /* Vp x C */
    size_t wpe = (size_t)h[2] * (size_t)h[6] * sizeof(float);         /* S x C */
    h[CHECKPOINT_GPT2_POS_SLOT] = MODEL_POSITIONS_ROTARY;
    FILE *f = fopen(out, "wb");
    int ok = f && sizeof h + wte + wpe <= n && fwrite(h, sizeof h, 1, f) == 1 &&
             fwrite(bytes + sizeof h, 1, wte, f) == wte &&
             fwrite(bytes + sizeof h + wte + wpe, 1, n - sizeof h - wte - wpe, f) ==
             n - sizeof h - wte - wpe;
    if (f && fclose(f) != 0) ok = 0;
    free(bytes);
    return ok ? 0 : -1;
}

/* Last-row logits of the tokens ids (T,) over a window of 4 keys, at positions 0 .. T-1. */
static const float *window_logits(Model *m, const int *ids, int T, int all) {
    AttentionConfig window;
    attention_config_default(&window);
    window.kind = ATTENTION_WINDOW;
    window.window = 4;
    if (model_set_attention(m, &window) != 0) return NULL;
    return model_forward(m, ids, T, 0, all);
}

/* A GPT-2 with rotary positions (train --pos rope): the tiny model's weights without
 * their table. Prefill, decoding and chunks agree, 1 and 2 threads bit for bit; and the
 * property RoPE exists for: the scores depend only on how far apart a query and a key
 * are. With a window of 4 keys and no sinks, the logits at position t see tokens
 * t - L * 3 .. t only, so a token stream of period 4 gives the same logits at t and
 * t + 16 (to float rounding: the angles differ), which learned positions do not. */
static void test_rotary_gpt2(void) {
    char path[512];
    char rotary_buf[64];
    const char *rotary = tmp_path(rotary_buf, sizeof rotary_buf, "rotary.bin");
    if (data_pair("gpt2/tiny.bin", "gpt2/tiny.bin", path, path) != 0) return;
    Model m;
    if (!check_true(write_rotary_copy(path, rotary) == 0 && model_load(&m, rotary, 64, 0) == 0,
                    "rotary GPT-2: the tiny model without wpe, header [10] = 1, loads")) {
        remove(rotary);
        return;
    }
    enum { T = 64, PERIOD = 4, SHIFT = 16 };
    int ids[T], V = m.config.vocab_size;
    lcg42_tokens(ids, T, V);
    check_true(m.config.positions == MODEL_POSITIONS_ROTARY &&
               m.checkpoint.weights.pos_embedding == NULL && T > 3 * m.config.n_layers + SHIFT,
               "rotary GPT-2: no position table; %d layers", m.config.n_layers);
    float *block = malloc((size_t)T * V * sizeof(float)), *steps = malloc((size_t)T * V *
                                                                          sizeof(float));
    kernels_set_threads(1);
    const float *l = model_forward(&m, ids, T, 0, 1);
    if (block && steps && l) {
        memcpy(block, l, (size_t)T * V * sizeof(float));
        int threads = kernels_set_threads(2);
        l = model_forward(&m, ids, T, 0, 1);
        check_true(l && memcmp(block, l, (size_t)T * V * sizeof(float)) == 0,
                   "rotary GPT-2: 1 and %d threads give the same bits", threads);
        if (check_true(forward_one_by_one(&m, ids, T, steps) == 0, "rotary GPT-2: decode runs"))
            check_close("rotary GPT-2: token-by-token logits vs prefill", steps, block,
                        (size_t)T * V, LOGIT_ATOL, 0.0);
        model_forward(&m, ids, T / 3, 0, 0);
        l = model_forward(&m, ids + T / 3, T - T / 3, T / 3, 0);
        if (check_true(l != NULL, "rotary GPT-2: chunked prefill runs"))
            check_close("rotary GPT-2: chunked prefill, last row", l,
                        block + (size_t)(T - 1) * V, (size_t)V, LOGIT_ATOL, 0.0);
    }
    /* relative positions: a periodic stream under a window of 4 */
    for (int t = PERIOD; t < T; t++) ids[t] = ids[t % PERIOD];
    for (int learned = 0; learned <= 1 && block; learned++) {
        Model *model = &m, other;
        if (learned && model_load(&other, path, 64, 0) != 0) break;
        if (learned) model = &other;
        l = window_logits(model, ids, T, 1);
        float max_diff = 0.0f;
        for (int t = T - PERIOD - SHIFT; l && t < T - SHIFT; t++)
            for (int v = 0; v < V; v++) {
                float d = fabsf(l[(size_t)t * V + v] - l[(size_t)(t + SHIFT) * V + v]);
                max_diff = d > max_diff ? d : max_diff;
            }
        if (!learned)
            check_true(l && (double)max_diff < LOGIT_ATOL, "rotary GPT-2, window of 4: a "
                       "stream of period %d gives the same logits %d positions later (max "
                       "|diff| %g, under 1e-5)", PERIOD, SHIFT, (double)max_diff);
        else
            check_true(l && max_diff > 1e-2f, "learned GPT-2, window of 4: the same stream "
                       "gives other logits %d positions later (max |diff| %g, over 1e-2)",
                       SHIFT, (double)max_diff);
        if (learned) model_free(&other);
    }
    free(block);
    free(steps);
    model_free(&m);
    remove(rotary);
}

/* model_forward rejects out-of-range calls instead of reading out of bounds. */
static void test_forward_bounds(void) {
    char path[512];
    if (data_pair("gpt2/tiny.bin", "gpt2/tiny.bin", path, path) != 0) return;
    Model m;
    if (!check_true(model_load(&m, path, 8, 0) == 0, "bounds: load tiny")) return;
    int good[1] = {3}, bad_id[1] = {512}, negative[1] = {-1};
    check_true(model_forward(&m, bad_id, 1, 0, 0) == NULL, "bounds: token id V rejected");
    check_true(model_forward(&m, negative, 1, 0, 0) == NULL, "bounds: token id -1 rejected");
    check_true(model_forward(&m, good, 1, 64, 0) == NULL, "bounds: position S rejected");
    check_true(model_forward(&m, good, 9, 0, 0) == NULL, "bounds: chunk over max rejected");
    check_true(model_forward(&m, good, 1, 63, 0) != NULL, "bounds: position S-1 accepted");
    model_free(&m);
    check_true(model_load(&m, path, 1000, 0) == 0 && m.max_chunk == 64,
               "bounds: chunk capacity limited to the context length");
    model_free(&m);
    /* loaded for one position (a run that sizes its context later): a chunk of one, and
     * the chunk of 8 back when the context grows */
    int eight[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    check_true(model_load(&m, path, 8, 1) == 0 && m.n_alloc == 1 && m.max_ctx == 64 &&
               m.max_chunk == 1, "bounds: load for one position");
    check_true(model_forward(&m, good, 1, 1, 0) == NULL, "bounds: position 1 of 1 rejected");
    check_true(model_set_context(&m, 64) == 0 && m.max_chunk == 8 &&
               model_forward(&m, eight, 8, 0, 0) != NULL, "bounds: context 64 takes chunks "
               "of 8 again");
    model_free(&m);
    check_true(model_load(&m, path, 8, 65) != 0 && model_load(&m, path, 8, -1) != 0,
               "bounds: load for 65 or -1 positions refused");
    model_free(&m);
    model_free(&m);   /* double free must be harmless */
}

/* block_qkv on int8 weights: k and v get the products block_matmul gives them alone, bit
 * for bit, whether their groups are q's (x quantized once for the three) or not (x
 * quantized again in their own groups). */
static void test_qkv_int8_groups(void) {
    enum { N = 3, C = 16 };
    const int groups[][3] = {{4, 4, 4}, {4, 8, 8}, {8, 4, 8}};   /* W_Q, W_K, W_V */
    Config c = {.family = MODEL_LLAMA, .positions = MODEL_POSITIONS_ROTARY, .n_layers = 1,
                .n_heads = 2, .n_kv_heads = 2, .dim = C, .hidden_dim = C, .head_dim = C / 2,
                .kv_dim = C};
    float x[N * C], norm_w[C], w_f[3][C * C], scale[3][C * C / 4];
    float xn1[N * C], q[N * C], k[N * C], v[N * C], want[N * C], xs[N * C / 4];
    int8_t w_q[3][C * C], xq[N * C];
    for (int i = 0; i < N * C; i++) x[i] = (float)((i * 37) % 23) * 0.1f - 1.1f;
    for (int i = 0; i < C; i++) norm_w[i] = 1.0f + (float)i * 0.01f;
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < C * C; i++) w_f[m][i] = (float)((i * (m + 5)) % 19) * 0.05f - 0.45f;
    for (size_t t = 0; t < sizeof groups / sizeof groups[0]; t++) {
        Matrix mat[3];
        for (int m = 0; m < 3; m++) {
            quant_quantize(w_q[m], scale[m], w_f[m], C, C, groups[t][m]);
            mat[m] = (Matrix){.q8 = {w_q[m], scale[m], C, C, groups[t][m], 0, 0, NULL}};
        }
        LayerWeights w = {.norm1_w = norm_w, .wq = mat[0], .wk = mat[1], .wv = mat[2]};
        BlockBuffers b = {.x = x, .xn1 = xn1, .q = q, .k = k, .v = v, .xq = xq, .xs = xs};
        block_qkv(&c, &w, N, &b);
        const float *got[3] = {q, k, v};
        for (int m = 0; m < 3; m++) {
            block_matmul(want, xn1, &mat[m], NULL, N, C, C, xq, xs);
            check_true(memcmp(got[m], want, sizeof want) == 0,
                       "block_qkv int8, groups %d / %d / %d: %s as block_matmul alone, bitwise",
                       groups[t][0], groups[t][1], groups[t][2], m == 0 ? "q" : m == 1 ? "k" : "v");
        }
    }
}

/* block_qkv's rotary embedding bit for bit against llama2.c's rotation with each product
 * rounded on its own (volatile: no fused multiply-add; gcc 12 vectorizes some plain forms
 * of this loop into vfmaddsub even under -ffp-contract=off). W_Q and W_K are the identity,
 * so q and k before the rotation are the normed x exactly (one non-zero product a sum). */
static void test_rope_bits(void) {
    enum { N = 5, C = 32, HS = 8, KVD = 16, POS = 37 };   /* 4 heads, 2 kv heads */
    if (FLT_EVAL_METHOD != 0) {   /* x87: the rotation is kept wider until stored, as
                                   * llama2.c's is there */
        check_skip("rope bits: this build evaluates float expressions wider (FLT_EVAL_METHOD "
                   "!= 0)");
        return;
    }
    Config c = {.family = MODEL_LLAMA, .positions = MODEL_POSITIONS_ROTARY, .n_layers = 1,
                .n_heads = C / HS, .n_kv_heads = KVD / HS, .dim = C, .hidden_dim = C,
                .head_dim = HS, .kv_dim = KVD};
    static float x[N * C], norm_w[C], eye_q[C * C], eye_k[KVD * C], cs[N * HS];
    static float xn1[N * C], q[N * C], k[N * KVD], v[N * KVD], xs[N * C];
    static int8_t xq[N * C];
    for (int i = 0; i < N * C; i++) x[i] = (float)((i * 29) % 31) * 0.37f - 5.3f;
    for (int i = 0; i < C; i++) norm_w[i] = 0.75f + (float)i * 0.03f;
    for (int o = 0; o < C; o++) eye_q[o * C + o] = 1.0f;
    for (int o = 0; o < KVD; o++) eye_k[o * C + o] = 1.0f;
    block_rope_angles(&c, NULL, cs, N, POS);
    LayerWeights w = {.norm1_w = norm_w, .wq = {.f32 = eye_q}, .wk = {.f32 = eye_k},
                      .wv = {.f32 = eye_k}};
    BlockBuffers b = {.x = x, .xn1 = xn1, .q = q, .k = k, .v = v, .xq = xq, .xs = xs,
                      .rope = cs};
    block_qkv(&c, &w, N, &b);
    int wrong = 0;
    for (int n = 0; n < N; n++)
        for (int which = 0; which < 2; which++) {
            int width = which ? KVD : C;
            const float *got = (which ? k : q) + n * width;
            for (int i = 0; i < width; i += 2) {
                float cos_a = cs[n * HS + i % HS], sin_a = cs[n * HS + i % HS + 1];
                float v0 = xn1[n * C + i], v1 = xn1[n * C + i + 1];
                volatile float a = v0 * cos_a, b1 = v1 * sin_a, c1 = v0 * sin_a, d = v1 * cos_a;
                float want0 = a - b1, want1 = c1 + d;
                wrong += memcmp(&got[i], &want0, sizeof want0) != 0;
                wrong += memcmp(&got[i + 1], &want1, sizeof want1) != 0;
            }
        }
    check_true(wrong == 0, "rope: q and k rotated with each product rounded, bitwise "
               "(%d of %d values differ)", wrong, N * (C + KVD));
}

/* block_rope_angles against float64: cos and sin of (pos + n) / base^(i / HS) for each row
 * n and pair i, with the default base (rope_base 0: MODEL_ROPE_BASE, 10000), a file's
 * (SmolLM2's 100000), and Llama 3.2's 500000 with frequency factors (each angle divided by
 * its pair's: 1, 1.5, 4, 8), each within 2e-5 (a float angle of up to 40 rad is off by at
 * most 2 ulp, 8e-6); the angles without the case's base or factors miss by far more. */
static void test_rope_base(void) {
    enum { N = 3, HS = 8, POS = 37 };
    static const float llama32[HS / 2] = {1.0f, 1.5f, 4.0f, 8.0f};
    static const struct {
        float base;             /* Config.rope_base */
        double used, other;     /* the base it means, and another */
        const float *factors;   /* NULL: none */
    } cases[] = {
        {0.0f, 10000.0, 100000.0, NULL},
        {100000.0f, 100000.0, 10000.0, NULL},
        {500000.0f, 500000.0, 500000.0, llama32},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Config c = {.family = MODEL_LLAMA, .positions = MODEL_POSITIONS_ROTARY, .head_dim = HS,
                    .rope_base = cases[k].base};
        const float *f = cases[k].factors;
        float cs[N * HS];
        block_rope_angles(&c, f, cs, N, POS);
        double worst = 0.0, other = 0.0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < HS; i += 2) {
                double angle = (POS + n) / pow(cases[k].used, (double)i / HS) /
                               (f ? (double)f[i / 2] : 1.0);
                double wrong = (POS + n) / pow(cases[k].other, (double)i / HS);   /* no factors */
                double got_cos = (double)cs[n * HS + i], got_sin = (double)cs[n * HS + i + 1];
                worst = fmax(worst, fmax(fabs(got_cos - cos(angle)), fabs(got_sin - sin(angle))));
                other = fmax(other, fmax(fabs(got_cos - cos(wrong)), fabs(got_sin - sin(wrong))));
            }
        check_true(worst <= 2e-5 && other > 1e-2, "rope angles, base %g%s: cos and sin within "
                   "2e-5 of float64 (worst %.2g; without the %s off by %.2g)", cases[k].used,
                   f ? " with frequency factors" : "", worst, f ? "factors" : "base", other);
    }
}

/* Pages of this process in memory (Linux's /proc/self/statm, second field), or -1. */
static long resident_pages(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (f && fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    if (f) fclose(f);
    return resident;
}

/* model_set_context commits the KV cache it allocates (so a first prompt does not take its
 * pages one fault at a time): the process's resident memory grows by at least the cache's
 * bytes, and the cache reads as zeros. */
static void test_context_commit(void) {
    char path[512];
    if (data_pair("llama2c/s260k.bin", "llama2c/s260k.bin", path, path) != 0) return;
    Model m;
    if (!check_true(model_load(&m, path, 16, 0) == 0, "commit: load s260k")) return;
    long page = sysconf(_SC_PAGESIZE), before = resident_pages();
    if (before < 0 || page <= 0) {
        check_skip("commit: no /proc/self/statm to read resident memory from");
    } else if (check_true(model_set_context(&m, m.config.seq_len) == 0, "commit: set context")) {
        long grown = (resident_pages() - before) * page;
        check_true(grown >= (long)m.attention_bytes,
                   "commit: resident memory grows by the KV cache's %zu bytes (got %ld)",
                   m.attention_bytes, grown);
        size_t floats = m.attention_bytes / 2 / sizeof(float), nonzero = 0;
        for (size_t i = 0; i < floats; i++) nonzero += m.cache.k[i] != 0.0f || m.cache.v[i] != 0.0f;
        check_true(nonzero == 0, "commit: the cache reads as zeros (%zu values not)", nonzero);
    }
    /* the logits keep their values (a caller may still read them) */
    size_t V = (size_t)m.config.vocab_size, changed = 0;
    for (size_t i = 0; i < V; i++) m.state.logits[i] = (float)i + 0.3f;
    if (check_true(model_set_context(&m, m.config.seq_len / 2) == 0, "commit: set it again")) {
        for (size_t i = 0; i < V; i++) {
            float want = (float)i + 0.3f;   /* a float (x87 keeps the sum wider until stored) */
            changed += m.state.logits[i] != want;
        }
        check_true(changed == 0, "commit: the logits keep their values (%zu changed)", changed);
    }
    model_free(&m);
}

/* Size of this process's address space in pages (/proc/self/statm, first field), or -1. */
static long address_pages(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = -1;
    if (f && fscanf(f, "%ld", &size) != 1) size = -1;
    if (f) fclose(f);
    return size;
}

/* model_free releases the run state whichever buffer the last layer left as the input:
 * s260k has 5 layers, so a forward pass ends with the names x and out swapped an odd
 * number of times. 24 loads, each with one forward pass and a model_free: the address
 * space grows by less than 4 MiB after the first (a leaked state is about 0.5 MiB a load). */
static void test_free_odd_layers(void) {
#if defined(OS_PLAIN_ALLOC)   /* os.h: AddressSanitizer (gcc's or clang's), or given */
    check_skip("free: the address space under a sanitizer (its quarantine keeps what is "
               "freed) or the plain allocator (no block to leak) says nothing");
    return;
#endif
    char path[512];
    if (data_pair("llama2c/s260k.bin", "llama2c/s260k.bin", path, path) != 0) return;
    long page = sysconf(_SC_PAGESIZE), first = -1;
    int token = 1, loads = 0;
    for (int i = 0; i < 25; i++, loads++) {
        Model m;
        if (model_load(&m, path, 64, 0) != 0 || model_set_context(&m, 16) != 0) break;
        int ok = model_forward(&m, &token, 1, 0, 0) != NULL && m.config.n_layers % 2 == 1;
        model_free(&m);
        if (!ok) break;
        if (i == 0) first = address_pages();
    }
    long last = address_pages();
    if (!check_true(loads == 25, "free: 25 loads of s260k (5 layers), each with a forward pass"))
        return;
    if (first < 0 || last < 0 || page <= 0) {
        check_skip("free: no /proc/self/statm to read the address space from");
        return;
    }
    check_true((last - first) * page < (4L << 20), "free: the address space grows by less than "
               "4 MiB over 24 loads and frees (got %ld bytes)", (last - first) * page);
}

/* After a failed set-up of the attention the model refuses to run, never reads through
 * what it freed: a Synthesizer s260k has no weights for is refused, then
 * model_set_context refuses too (one line) and model_forward returns NULL; exact
 * attention set again gives the logits of before. Where an address-space limit can make
 * the KV cache's allocation fail (not under a sanitizer or valgrind), a model_set_context
 * that runs out of memory keeps the variant, and the next one, with room, succeeds with
 * the same logits. */
static void test_attention_setup_failure(void) {
    char path[512];
    if (data_pair("llama2c/s260k.bin", "llama2c/s260k.bin", path, path) != 0) return;
    Model m;
    if (!check_true(model_load(&m, path, 16, 0) == 0 && model_set_context(&m, 16) == 0,
                    "set-up failure: load s260k")) return;
    int ids[3] = {1, 300, 42};
    size_t V = (size_t)m.config.vocab_size;
    float *want = malloc(V * sizeof(float));
    const float *got = model_forward(&m, ids, 3, 0, 0);
    if (!check_true(want && got, "set-up failure: logits before")) {
        free(want);
        model_free(&m);
        return;
    }
    memcpy(want, got, V * sizeof(float));
    AttentionConfig synth, exact;
    attention_config_default(&synth);
    attention_config_default(&exact);
    synth.kind = ATTENTION_SYNTH_RANDOM;
    check_true(model_set_attention(&m, &synth) != 0, "set-up failure: a Synthesizer without "
               "weights refused");
    check_true(model_set_context(&m, 16) != 0 && model_set_half_cache(&m, 0) != 0 &&
               model_trace(&m, 0) != 0 && model_forward(&m, ids, 3, 0, 0) == NULL,
               "set-up failure: then set_context, set_half_cache, trace and forward refuse");
    got = model_set_attention(&m, &exact) == 0 ? model_forward(&m, ids, 3, 0, 0) : NULL;
    check_true(got && memcmp(got, want, V * sizeof(float)) == 0,
               "set-up failure: exact attention set again gives the same logits");
#if defined(OS_PLAIN_ALLOC)   /* os.h: AddressSanitizer (gcc's or clang's), or given */
    check_skip("set-up failure: out of memory (an address-space limit under a sanitizer or "
               "the plain allocator)");
#else
    struct rlimit old;
    long pages = address_pages(), page = sysconf(_SC_PAGESIZE);
    if (getrlimit(RLIMIT_AS, &old) != 0 || pages < 0 || page <= 0) {
        check_skip("set-up failure: out of memory (no address-space limit to set)");
    } else {
        /* room for 64 KiB more; a context of 512 needs 640 KiB of KV cache */
        struct rlimit low = old;
        low.rlim_cur = (rlim_t)(pages * page + (64L << 10));
        int failed = setrlimit(RLIMIT_AS, &low) == 0 && model_set_context(&m, 512) != 0;
        setrlimit(RLIMIT_AS, &old);
        if (!failed) {
            check_skip("set-up failure: out of memory (the limit did not make it fail)");
        } else {
            got = model_set_context(&m, 16) == 0 ? model_forward(&m, ids, 3, 0, 0) : NULL;
            check_true(got && memcmp(got, want, V * sizeof(float)) == 0,
                       "set-up failure: after running out of memory, a context with room "
                       "gives the same logits");
        }
    }
#endif
    free(want);
    model_free(&m);
}

/* os_commit_keep brings a block's pages in and keeps their values: a block of 64 pages
 * (under os_alloc_zeroed's huge-page size, so 4 KiB pages), a value written into the first
 * byte of every eighth page first (where os_commit writes its zeros); resident memory
 * grows by the 56 pages not yet written (skipped where it cannot be read, or where the
 * allocator wrote the whole block already). */
static void test_commit_keep(void) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t bytes = 64 * (size_t)page;
    long before_alloc = resident_pages();
    unsigned char *p = os_alloc_zeroed(1, bytes);
    if (!check_true(p != NULL, "commit keep: a block of %zu bytes", bytes)) return;
    size_t stride = 8 * (size_t)page;   /* every eighth page holds its number + 1 */
    for (size_t i = 0; i < bytes; i += stride) p[i] = (unsigned char)(i / (size_t)page + 1);
    long before = resident_pages();
    os_commit_keep(p, bytes);
    long after = resident_pages();
    if (before_alloc < 0 || before < 0 || after < 0)
        check_skip("commit keep: no /proc/self/statm to read resident memory from");
    else if (before - before_alloc >= 56)
        check_skip("commit keep: the allocator wrote the block's pages already");
    else
        check_true(after - before >= 56, "commit keep: resident memory grows by the 56 pages "
                   "not yet written (got %ld)", after - before);
    size_t changed = 0;
    for (size_t i = 0; i < bytes; i++) {
        unsigned char want = i % stride == 0 ? (unsigned char)(i / (size_t)page + 1) : 0;
        changed += p[i] != want;
    }
    check_true(changed == 0, "commit keep: every byte as it was (%zu changed)", changed);
    os_free_zeroed(p);
}

/* os_alloc_parts: parts of 1, 1, 65 and 0 bytes, zeros, and apart (each filled with its
 * own byte, every part then still holds its own); where they are carved from one block
 * (not OS_PLAIN_ALLOC's callocs), each on cache lines of its own: 64-byte aligned, 64, 64
 * and 128 bytes apart, and os_alloc_zeroed refusing a size whose bytes overflow size_t. */
static void test_alloc_parts(void) {
    static const size_t sizes[4] = {1, 1, 65, 0};
    unsigned char *p[4] = {NULL, NULL, NULL, NULL};
    OsPart parts[4];
    for (int i = 0; i < 4; i++) parts[i] = (OsPart){(void **)&p[i], sizes[i]};
    int ok = os_alloc_parts(parts, 4) == 0;
    for (int i = 0; ok && i < 4; i++) {
        ok = p[i] != NULL;
        for (size_t j = 0; ok && j < sizes[i]; j++) ok = p[i][j] == 0;
    }
    for (int i = 0; ok && i < 4; i++) memset(p[i], i + 1, sizes[i]);
    for (int i = 0; ok && i < 4; i++)
        for (size_t j = 0; ok && j < sizes[i]; j++) ok = p[i][j] == i + 1;
#ifndef OS_PLAIN_ALLOC
    static const size_t apart[3] = {64, 64, 128};
    for (int i = 0; ok && i < 3; i++)
        ok = (uintptr_t)p[i] % 64 == 0 && (size_t)(p[i + 1] - p[i]) == apart[i];
#endif
    check_true(ok, "os_alloc_parts: parts of 1, 1, 65 and 0 bytes, zeros, each its own "
               "(64-byte aligned, on lines of their own)");
    if (p[0]) os_free_parts(parts, 4);
#ifndef OS_PLAIN_ALLOC   /* (calloc's own check; AddressSanitizer's aborts) */
    void *huge = os_alloc_zeroed(SIZE_MAX / 8, 16);
    check_true(huge == NULL, "os_alloc_zeroed: SIZE_MAX / 8 blocks of 16 bytes refused");
    if (huge) os_free_zeroed(huge);
#endif
}

/* os_map_file gives a file's bytes as they are: a file of 5 MiB and a few bytes (read onto
 * huge pages where the system has them, its last page partly past the file; and mapped,
 * whole 0), one of 70 MiB and a few (read in two parts side by side where this process
 * may use two CPUs) and one of a few KiB (mapped), each compared byte for byte with what
 * was written; where a large file is read whole (the copy is os_map_file's own), asked
 * for more bytes than the file holds, the read fails (NULL, EIO). os_drop_mapped over the
 * mapped file, from its second byte (so its first page stays), gives back its pages
 * (resident memory falls by at least 90 % of them), and it still reads as written. */
static void test_map_file(void) {
    static const size_t sizes[] = {((size_t)5 << 20) + 77, ((size_t)70 << 20) + 5, 3000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *want = malloc(n);
        FILE *file = tmpfile();   /* removed when closed */
        if (!want || !file) {
            check_true(0, "map file: a temporary file of %zu bytes", n);
            free(want);
            if (file) fclose(file);
            continue;
        }
        uint64_t x = 88172645463325252ULL + n;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            want[i] = (unsigned char)(x >> 56);
        }
        int written = fwrite(want, 1, n, file) == n && fflush(file) == 0, copied = 0;
        for (int whole = 1; whole >= 0; whole--) {
            int own = 0;
            void *got = written ? os_map_file(fileno(file), n, whole, &own) : NULL;
            check_true(got && memcmp(got, want, n) == 0,
                       "map file: %zu bytes read back as written (whole %d)", n, whole);
            if (whole) copied = own;
            if (got && !own && n > ((size_t)4 << 20)) {   /* its pages given back */
                long page = sysconf(_SC_PAGESIZE), before = resident_pages();
                os_drop_mapped((unsigned char *)got + 1, n - 1);
                /* at least 90 % of its pages: statm's count may lag a few pages */
                long after = resident_pages();
                long want_fall = page > 0 ? (long)(n / (size_t)page) * 9 / 10 : 0;
                if (before < 0 || after < 0)
                    check_skip("map file: no /proc/self/statm to read resident memory from");
                else
                    check_true(before - after >= want_fall, "map file: os_drop_mapped gives "
                               "back at least %ld of the mapped file's pages (got %ld)",
                               want_fall, before - after);
                check_true(memcmp(got, want, n) == 0, "map file: %zu bytes read as written "
                           "after os_drop_mapped", n);
            }
            os_unmap_file(got, n);
        }
        if (n > ((size_t)4 << 20) && !copied)   /* a map may reach past the file's end */
            check_skip("map file: this system mapped the large file, not read it whole "
                       "(os_map_file's copy refused here): no read to fail");
        else if (n > ((size_t)4 << 20)) {   /* the read of a file that ends before its size */
            errno = 0;
            void *got = os_map_file(fileno(file), n + 4096, 1, NULL);
            int err = errno;
            check_true(!got && err == EIO, "map file: %zu bytes asked of a file of %zu: NULL, "
                       "EIO (got %s, errno %d)", n + 4096, n, got ? "memory" : "NULL", err);
            os_unmap_file(got, n + 4096);
        }
        fclose(file);
        free(want);
    }
}

/* checkpoint_mark_cold against sizes worked out by hand: a classifier of 32,000 x 768 int8
 * (27,648,000 bytes with its 24 scales a row) and layer matrices of 768 x 768 (663,552
 * bytes each). One in each of two layers: 28,975,104 bytes, at most CHECKPOINT_CACHED_BYTES
 * (33,554,432), none cold; six int8 and one fp32 in each: 35,610,624, every int8 one cold,
 * the fp32 one neither counted nor marked. */
static void test_mark_cold(void) {
    static const int8_t q;   /* the views' values: only their sizes are read */
    static const float f;
    QuantMatrix cls = {&q, &f, 32000, 768, 32, 0, 0, NULL}, m = {&q, &f, 768, 768, 32, 0, 0, NULL};
    LayerWeights layers[2];
    memset(layers, 0, sizeof layers);
    Weights w = {.layers = layers};
    w.classifier.q8 = cls;
    for (int l = 0; l < 2; l++) layers[l].wq.q8 = m;
    checkpoint_mark_cold(&w, 2);
    check_true(!w.classifier.q8.cold && !layers[0].wq.q8.cold && !layers[1].wq.q8.cold,
               "mark_cold: 28,975,104 bytes of int8 matrices: none cold");
    for (int l = 0; l < 2; l++) {
        LayerWeights *lw = &layers[l];
        lw->wk.q8 = lw->wv.q8 = lw->wo.q8 = lw->w_up.q8 = lw->w_down.q8 = m;
        lw->w_gate.f32 = &f;   /* fp32 */
    }
    checkpoint_mark_cold(&w, 2);
    int all = w.classifier.q8.cold;
    for (int l = 0; l < 2; l++) {
        const LayerWeights *lw = &layers[l];
        all &= lw->wq.q8.cold && lw->wk.q8.cold && lw->wv.q8.cold && lw->wo.q8.cold &&
               lw->w_up.q8.cold && lw->w_down.q8.cold && !lw->w_gate.q8.cold;
    }
    check_true(all, "mark_cold: 35,610,624 bytes of int8 matrices: every int8 one cold, the "
               "fp32 one not");
}

/* The forward of a GPT-2 model m over the T tokens ids in float64 from its weights
 * (gpt2_f64.h): logits (T, V) if not NULL, and layer `layer`'s attention weights into
 * weights (NH, T, T) if not NULL. Returns 0, or -1 without fp32 weights or memory. */
static int gpt2_f64(const Model *m, const int *ids, int T, double *logits, int layer,
                    double *weights) {
    Gpt2F64 g;
    double *block = gpt2_f64_model(&g, m, T);
    int ok = block && gpt2_f64_forward(&g, ids, T, logits, layer, weights) == 0;
    free(block);
    return ok ? 0 : -1;
}

/* The traced attention weights (what --attn-map and --attn-top draw) of the shipped model's
 * first layer against gpt2_f64's. Three tokens go in one call, three one at a
 * time (the trace's rows by position). A trace that kept nothing gave uniform rows, which
 * the drawings' own checks (rows sum to 1) pass. */
static void test_trace_weights(void) {
    enum { T = 6 };
    static const int ids[T] = {50, 300, 7, 1000, 42, 513};   /* arbitrary ids of its 1024 */
    Model m;
    if (model_load(&m, "weights/model.bin", T, 0) != 0) {
        check_true(0, "trace: load weights/model.bin");
        return;
    }
    int NH = m.config.n_heads;
    float *w = malloc((size_t)NH * T * T * sizeof(float));
    double *ref = malloc((size_t)NH * T * T * sizeof(double));
    int ok = w && ref && gpt2_f64(&m, ids, T, NULL, 0, ref) == 0 && model_trace(&m, 1) == 0 &&
             model_forward(&m, ids, 3, 0, 0);
    for (int t = 3; ok && t < T; t++) ok = model_forward(&m, &ids[t], 1, t, 0) != NULL;
    ok = ok && model_attention_weights(&m, 0, 0, T, w) == 0;
    double worst = ok ? 0.0 : HUGE_VAL;
    for (size_t i = 0; ok && i < (size_t)NH * T * T; i++) {
        if (isnan(ref[i])) {
            if (!isnan(w[i])) worst = HUGE_VAL;
        } else {
            worst = fmax(worst, fabs((double)w[i] - ref[i]));
        }
    }
    check_true(worst < 1e-5, "trace: the shipped model's layer-0 attention weights of %d tokens "
               "(3 in one call, then 1 by 1) == a float64 reference from its weights (max |diff| "
               "%.2g, NaN past each query)", T, worst);
    free(w);
    free(ref);
    model_free(&m);
}

/* The shipped model's greedy continuation of "ROMEO:" (24 tokens, the prompt in one call,
 * then one token at a time) against gpt2_f64 over the whole sequence: every logit within
 * 1e-4 of float64's (they reach ~20; measured 4.2e-6), and each token float64's argmax, or
 * its second where the two are within 1e-4. */
static void test_shipped_greedy(void) {
    enum { STEPS = 24, CAP = 64 };
    Tokenizer tok;
    Model m;
    int ids[CAP];
    size_t n = 0;
    if (!check_true(tokenizer_load(&tok, "weights/tokenizer.bin") == 0, "shipped model: its "
                    "tokenizer"))
        return;
    int ok = tokenizer_encode(&tok, "ROMEO:", 6, ids, CAP, &n) == 0 && n + STEPS <= CAP;
    tokenizer_free(&tok);
    if (!check_true(ok && model_load(&m, "weights/model.bin", CAP, CAP) == 0, "shipped model "
                    "loads"))
        return;
    int V = m.config.vocab_size, T = (int)n + STEPS;
    float *got = malloc((size_t)T * V * sizeof(float));   /* (T, V) the engine's logits */
    double *want = malloc((size_t)T * V * sizeof(double));
    const float *logits = got ? model_forward(&m, ids, (int)n, 0, 1) : NULL;
    if (logits) memcpy(got, logits, n * V * sizeof(float));
    for (int t = (int)n; logits && t < T; t++) {
        const float *row = got + (size_t)(t - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++) if (row[v] > row[best]) best = v;
        ids[t] = best;
        logits = model_forward(&m, &ids[t], 1, t, 0);
        if (logits) memcpy(got + (size_t)t * V, logits, (size_t)V * sizeof(float));
    }
    ok = logits && want && gpt2_f64(&m, ids, T, want, -1, NULL) == 0;
    double worst = ok ? 0.0 : HUGE_VAL;
    int argmax_ok = 0;
    for (size_t i = 0; ok && i < (size_t)T * V; i++) {   /* (aarch64 gcc 12 crashed on fmax) */
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= worst)) worst = d;   /* NaN too */
    }
    for (int t = (int)n - 1; ok && t < T - 1; t++) {
        const double *row = want + (size_t)t * V;
        int first = 0, second = -1;
        for (int v = 1; v < V; v++) if (row[v] > row[first]) first = v;
        for (int v = 0; v < V; v++)
            if (v != first && (second < 0 || row[v] > row[second])) second = v;
        argmax_ok += ids[t + 1] == first ||
                     (ids[t + 1] == second && row[first] - row[second] < 1e-4);
    }
    check_true(worst < 1e-4 && argmax_ok == STEPS, "shipped model: the greedy continuation of "
               "\"ROMEO:\" (%d tokens) is a float64 forward's, token by token (%d of %d), its "
               "logits within 1e-4 (max |diff| %.2g)", STEPS, argmax_ok, STEPS, worst);
    free(got);
    free(want);
    model_free(&m);
}

/* ./run --attn-top 2 --layer 5 -n 1 (the token after a prompt read whole): for each head,
 * the two keys of largest weight in the prompt's last row, largest first, with their
 * weights to the 3 decimals printed, as gpt2_f64 works them out for the prompt's ids (the
 * default layer is the last: a --layer ignored draws another layer's weights). */
static void test_attn_top_cli(void) {
    enum { LAYER = 5 };   /* of the shipped model's 10 */
    static const char prompt[] = "ROMEO: I will not tell thee";
    const char *run_bin = getenv("RUN") && *getenv("RUN") ? getenv("RUN") : "./run";
    Tokenizer tok;
    Model m;
    int ids[64];
    size_t T = 0;
    if (!check_true(tokenizer_load(&tok, "weights/tokenizer.bin") == 0,
                    "--attn-top: the tokenizer"))
        return;
    int ok = tokenizer_encode(&tok, prompt, strlen(prompt), ids, 64, &T) == 0 && T > 3;
    tokenizer_free(&tok);
    if (!check_true(ok && model_load(&m, "weights/model.bin", 1, 0) == 0, "--attn-top: the "
                    "prompt's %zu ids and the model", T))
        return;
    int NH = m.config.n_heads;
    double *ref = malloc((size_t)NH * T * T * sizeof(double));
    ok = ref && gpt2_f64(&m, ids, (int)T, NULL, LAYER, ref) == 0;
    model_free(&m);
    char command[512], *out = NULL;
    snprintf(command, sizeof command, "%s weights/model.bin -t 0 -n 1 -i '%s' --attn-top 2 "
             "--layer %d", run_bin, prompt, LAYER);
    ok = ok && check_run(command, &out, NULL) == 0 && out;
    int heads_ok = 0;
    for (int h = 0; ok && h < NH; h++) {
        const double *row = ref + ((size_t)h * T + T - 1) * T;
        int first = 0, second = -1;
        for (int j = 1; j < (int)T; j++) if (row[j] > row[first]) first = j;
        for (int j = 0; j < (int)T; j++)
            if (j != first && (second < 0 || row[j] > row[second])) second = j;
        char head[24];
        snprintf(head, sizeof head, "L%d H%d: ", LAYER, h);
        const char *line = strstr(out, head);
        const char *a = line ? strchr(line, '@') : NULL;
        const char *b = a ? strchr(a + 1, '@') : NULL;
        int ja = -1, jb = -1;
        double wa = (double)NAN, wb = (double)NAN;
        if (a && b && sscanf(a, "@%d %lf", &ja, &wa) == 2 && sscanf(b, "@%d %lf", &jb, &wb) == 2)
            heads_ok += ja == first && jb == second && fabs(wa - row[first]) <= 6e-4 &&
                        fabs(wb - row[second]) <= 6e-4;
    }
    check_true(ok && heads_ok == NH, "--attn-top 2 --layer %d: each head's two strongest keys "
               "of the prompt's last token, strongest first, with their weights, as a float64 "
               "forward works them out (%d of %d heads)", LAYER, heads_ok, NH);
    free(out);
    free(ref);
}

int main(void) {
    if (!check_true(mkdtemp(tmp_dir) != NULL, "a temporary folder for the test files"))
        return check_summary("test_model");
    test_mark_cold();
    test_map_file();
    test_alloc_parts();
    test_qkv_int8_groups();
    test_rope_bits();
    test_rope_base();
    test_context_commit();
    test_free_odd_layers();
    test_attention_setup_failure();
    test_commit_keep();
    /* tiny, s260k and their logits are in tests/data; small.bin and s15m only in ../shared */
    test_gpt2_logits("tiny", 64);
    test_gpt2_logits("small", 128);
    test_llama_logits("s260k");
    test_llama_logits("s15m");
    test_q80();
    test_quantize("gpt2/tiny.bin", 64, 0);
    test_quantize("llama2c/s260k.bin", 48, 1);
    test_bf16();
    test_threads();
    test_half_cache("gpt2/tiny.bin", "gpt2/tiny_logits.f32", NULL);
    test_half_cache("llama2c/s260k.bin", "llama2c/s260k_logits.f32", "llama2c/s260k_logits.json");
    test_rotary_gpt2();
    test_forward_bounds();
    test_trace_weights();
    test_attn_top_cli();
    test_shipped_greedy();
    check_true(rmdir(tmp_dir) == 0, "every test file removed (the folder %s empty)", tmp_dir);
    return check_summary("test_model");
}
