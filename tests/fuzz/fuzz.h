/* fuzz.h: what the fuzz targets in tests/fuzz share: the libFuzzer entry points, paths
 * to the repository's files, per-process temp files, a fatal check, and writers of tiny
 * valid checkpoints and tokenizers (for the seed corpora and fuzz_cli's sandbox).
 *
 * Each target defines LLVMFuzzerInitialize and LLVMFuzzerTestOneInput and nothing else:
 * clang's libFuzzer drives them (-fsanitize=fuzzer), or replay.c's main replays files with
 * any compiler. The writers lay out bytes as checkpoint.h and tokenizer.h describe them;
 * they do not validate anything (the loaders under test do). Read replay.c next.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>          /* size_t */
#include <stdint.h>          /* uint8_t, uint64_t */
#include "checkpoint.h"      /* Config, Matrix */
#include "tokenizer.h"       /* Tokenizer */

#define FUZZ_PATH_MAX 4096             /* longest path the helpers build */
#define FUZZ_TMP_DIR "/tmp"            /* where per-process temp files go */
#define FUZZ_SHARED_DEFAULT "../shared"   /* reference data beside the repository */

/* ---- the entry points every target defines (libFuzzer's names and contracts) ---- */

/* Called once before the first input; may read or rewrite argc/argv. Returns 0. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Runs one input of size bytes (data is not NUL-terminated and may be NULL when size is
 * 0). Returns 0. A bug is reported by crashing: a sanitizer report or fuzz_fail's abort. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- checks ---- */

/* Prints "fuzz: MESSAGE" to stderr and aborts, so that libFuzzer (or the replay loop)
 * records the input as a crash. For contract violations of the code under test. */
_Noreturn void fuzz_fail(const char *fmt, ...);

/* Aborts via fuzz_fail, naming the file, line and condition, unless cond holds. */
#define FUZZ_CHECK(cond) \
    ((cond) ? (void)0 : fuzz_fail("%s:%d: check failed: %s", __FILE__, __LINE__, #cond))

/* 1 if m holds its values in exactly one form: fp32, halves or int8 (kernels.h's Matrix). */
int fuzz_one_form(const Matrix *m);

/* ---- paths and files ---- */

/* out = the repository root (env FUZZ_ROOT, default ".") + "/" + relative. Returns 0, or
 * -1 if it does not fit in cap bytes. */
int fuzz_repo_path(char *out, size_t cap, const char *relative);

/* out = the shared reference-data folder (env SHARED_DIR, default the repository root +
 * "/../shared") + "/" + relative. Returns 0, or -1 if it does not fit. */
int fuzz_shared_path(char *out, size_t cap, const char *relative);

/* out = the reference file relative (e.g. "llama2c/tok512.bin") where the tests find it:
 * the repository's tests/data/ first, then the shared folder's testdata/. Returns 0, or
 * -1 if it is in neither. */
int fuzz_data_path(char *out, size_t cap, const char *relative);

/* 1 if path names a readable regular file, else 0. */
int fuzz_file_exists(const char *path);

/* out = FUZZ_TMP_DIR "/fuzz_TAG.PID": a file name private to this process, so that
 * parallel fuzzers (libFuzzer -jobs, -fork) never share it. Returns 0, or -1. */
int fuzz_temp_path(char *out, size_t cap, const char *tag);

/* Writes size bytes to path (created or truncated). Returns 0, or -1 after a stderr line. */
int fuzz_write_file(const char *path, const void *data, size_t size);

/* Reads the whole file at path into a malloc'd buffer (caller frees; one extra NUL byte
 * after the data). Returns NULL after a stderr line. *size receives the byte count. */
unsigned char *fuzz_read_file(const char *path, size_t *size);

/* ---- tokenizer contracts ---- */

#define FUZZ_ENCODE_MUST_SUCCEED 1   /* fuzz_check_encode: encoding may not fail */
#define FUZZ_ENCODE_ROUNDTRIP 2      /* fuzz_check_encode: decoding must give the text back */

/* Encodes len bytes of text with t and checks tokenizer_encode's contract: at most len ids
 * (GPT-2) or len + 2 (Llama: BOS and the dummy-prefix space), as run.c assumes when it
 * sizes its buffers; every id in [0, vocab), never GPT-2's end-of-text, BOS first for
 * Llama; a cap one too small fails and reports the count needed; GPT-2's pieces partition
 * the text. flags: FUZZ_ENCODE_MUST_SUCCEED (implied for GPT-2 when every byte of text has
 * a token), FUZZ_ENCODE_ROUNDTRIP (decoding gives the text back; for Llama after the
 * dummy-prefix space, which survives only before a leading continuation byte). For Llama
 * also tokenizer_encode_continuation: at most len ids, each in [0, vocab), decoding to
 * exactly the text. Aborts through fuzz_fail on a violation. */
void fuzz_check_encode(const Tokenizer *t, const unsigned char *text, size_t len, int flags);

/* ---- tiny valid files ---- */

/* A llm.c GPT-2 checkpoint for c (family, seq_len, vocab_size, padded_vocab_size,
 * n_layers, n_heads, dim and positions used: rotary ones have no wpe) with weights
 * uniform in [-1, 1) drawn from seed: fp32 (version 3), or bf16 (version 5) when
 * bf16 != 0. Returns malloc'd bytes (caller frees)
 * and their count in *size, or NULL if out of memory. */
unsigned char *fuzz_tiny_gpt2(const Config *c, int bf16, uint64_t seed, size_t *size);

/* A llama2.c fp32 checkpoint for c (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len used): the legacy headerless layout (with its RoPE tables) when
 * legacy != 0, else version 1 ("ak42"); a separate classifier unless shared. Returns
 * malloc'd bytes and their count in *size, or NULL if out of memory. */
unsigned char *fuzz_tiny_llama(const Config *c, int legacy, int shared, uint64_t seed,
                               size_t *size);

/* Writes the int8 form of the checkpoint at in to out (the quantize program's path:
 * checkpoint_load, then checkpoint_save_q8 with group). Returns 0, or -1 after a message. */
int fuzz_write_q8(const char *in, const char *out, int group);

/* A llm.c GPT-2 tokenizer (version 2): the 256 single bytes, a few English merges, and
 * end-of-text last. Returns malloc'd bytes and their count in *size, or NULL. */
unsigned char *fuzz_tiny_gpt2_tokenizer(size_t *size);

/* A llama2.c tokenizer: <unk>, BOS, EOS, the 256 byte tokens <0x00>..<0xFF>, " ", the
 * lower-case letters and a few merges, scored so earlier merges win. Returns malloc'd
 * bytes and their count in *size, or NULL. *vocab receives the token count. */
unsigned char *fuzz_tiny_llama_tokenizer(size_t *size, int *vocab);

#endif /* FUZZ_H */
