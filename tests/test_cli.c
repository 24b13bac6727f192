/* test_cli.c: ./run end to end on fixtures this test writes itself: a tiny random
 * GPT-2 checkpoint and a 260-token tokenizer. It checks every failure path the
 * README promises (exit code and a specific stderr message) and that a healthy run
 * streams text, is reproducible for a seed, and stops at the context length; last, the
 * make targets a newcomer starts with and the test runner's output.
 *
 * The binary under test is $RUN (default ./run), so `make debug` can point it at the
 * sanitizer build.
 */
#define _GNU_SOURCE     /* O_TMPFILE (Linux), where the C library has it */
#include <ctype.h>     /* isspace */
#include <fcntl.h>     /* open, fcntl, struct flock (POSIX: holding a lock), O_TMPFILE */
#include <math.h>      /* NAN: a weight that is not finite */
#include <stdint.h>    /* int32_t, uint32_t */
#include <stdio.h>     /* fopen, fwrite, snprintf */
#include <stdlib.h>    /* getenv, free, mkdtemp */
#include <string.h>    /* strstr, strcmp */
#include <sys/stat.h>  /* chmod (POSIX): the test runner's fake tests */
#include <unistd.h>    /* truncate, close, getpid (POSIX) */

#include "model.h"         /* MODEL_MAX_STATE_BYTES */
#include "tests/check.h"   /* check_*, check_run */

/* The fixture model's dimensions: small enough that every run takes milliseconds. */
enum { MAX_T = 16, V = 260, VP = 264, L = 1, NH = 2, C = 8 };

static char dir[64];
static const char *run_bin;

/* Parameters of llm.c's GPT-2 layout for these dimensions (transcribed from the
 * format description in the README, independently of model.c). */
static size_t param_count(int maxT, int vp, int layers, int c) {
    size_t n = (size_t)vp * c + (size_t)maxT * c + (size_t)c * 2;
    n += (size_t)layers * (2 * c + 3 * c * c + 3 * c + c * c + c + 2 * c +
                           4 * c * c + 4 * c + c * 4 * c + c);
    return n;
}

/* Writes a checkpoint with the given header fields and `extra` bytes more (negative
 * truncates) than the header implies. Returns the path, in one of 16 buffers used in
 * turn: a caller that keeps it past 15 more calls copies it (as main does). */
static const char *write_model(const char *name, int32_t magic, int32_t version, int maxT,
                               int v, int layers, int nh, int c, int vp, long extra) {
    static char paths[16][128];
    static int next;
    char *path = paths[next++ % 16];
    snprintf(path, 128, "%s/%s", dir, name);
    int32_t header[256] = {0};
    header[0] = magic; header[1] = version; header[2] = maxT; header[3] = v;
    header[4] = layers; header[5] = nh; header[6] = c; header[7] = vp;
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    fwrite(header, sizeof header, 1, f);
    long n = (c > 0 && nh > 0 && layers < 1000 && vp > 0 && maxT > 0)
             ? (long)param_count(maxT, vp, layers, c) * 4 + extra : extra;
    uint32_t s = 1;
    for (long i = 0; i < n / 4; i++) {   /* small pseudo-random weights in [-0.5, 0.5) */
        s = s * 1664525u + 1013904223u;
        float w = (float)(s >> 8) / 16777216.0f - 0.5f;
        fwrite(&w, 4, 1, f);
    }
    for (long i = 0; i < n % 4; i++) fputc(0, f);
    fclose(f);
    return path;
}

/* Tokenizer: ids 0..255 are the bytes, 256 "ab", 257 "cd", 258 "ef", 259 end-of-text. */
static const char *write_tokenizer(void) {
    static char path[128];
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    uint32_t header[256] = {20240328, 2, 260, 259};
    fwrite(header, sizeof header, 1, f);
    for (int b = 0; b < 256; b++) { fputc(1, f); fputc(b, f); }
    const char *pairs[4] = {"ab", "cd", "ef", "<|endoftext|>"};
    for (int i = 0; i < 4; i++) {
        fputc((int)strlen(pairs[i]), f);
        fputs(pairs[i], f);
    }
    fclose(f);
    return path;
}

/* A llama2.c tokenizer of 260 tokens for the Llama fixtures: <unk>, BOS, EOS, the 256
 * byte tokens <0x00>..<0xFF>, and " " (its format: an int32 max_token_length, then per
 * token a float32 score, an int32 length and the bytes). */
/* A llama2.c tokenizer of 260 tokens at path, BOS and EOS spelled bos and eos. */
static void write_llama_tokenizer_at(const char *path, const char *bos, const char *eos) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    int32_t max_len = 7;
    fwrite(&max_len, sizeof max_len, 1, f);
    for (int id = 0; id < 260; id++) {
        char name[16];
        if (id < 3) snprintf(name, sizeof name, "%s", id == 0 ? "<unk>" : id == 1 ? bos : eos);
        else if (id < 259) snprintf(name, sizeof name, "<0x%02X>", id - 3);
        else snprintf(name, sizeof name, " ");   /* encode's dummy prefix */
        float score = -(float)id;
        int32_t len = (int32_t)strlen(name);
        fwrite(&score, sizeof score, 1, f);
        fwrite(&len, sizeof len, 1, f);
        fwrite(name, 1, (size_t)len, f);
    }
    fclose(f);
}

/* llama2.c's own spelling of BOS and EOS, in dir/llama_tok.bin. */
static const char *write_llama_tokenizer(void) {
    static char path[128];
    snprintf(path, sizeof path, "%s/llama_tok.bin", dir);
    write_llama_tokenizer_at(path, "\n<s>\n", "\n</s>\n");
    return path;
}

/* Runs program (a command) with args; checks its exit status and a substring of stderr. */
static void expect_program(const char *program, const char *what, const char *args,
                           int want_code, const char *message) {
    char command[1024];
    /* timeout: a hang (a blocking open, an endless loop) fails as exit 124 */
    snprintf(command, sizeof command, "timeout 120 %s %s", program, args);
    char *out = NULL, *err = NULL;
    int code = check_run(command, &out, &err);
    int has = err && strstr(err, message) != NULL;
    check_true(code == want_code && has, "%s: exit %d (want %d), stderr has \"%s\"%s%s", what,
               code, want_code, message, has ? "" : "; stderr was: ", has || !err ? "" : err);
    free(out);
    free(err);
}

/* expect_program for run. */
static void expect(const char *what, const char *args, int want_code, const char *message) {
    expect_program(run_bin, what, args, want_code, message);
}

static void test_usage_errors(const char *model, const char *tok) {
    char base[512];
    snprintf(base, sizeof base, "%s -z %s", model, tok);
    char args[1024];
#define EXPECT_USAGE(what, flags, message) \
    (snprintf(args, sizeof args, "%s %s", base, flags), expect(what, args, 2, message))
    expect("no arguments", "", 2, "missing (expected a model path)");
    EXPECT_USAGE("unknown flag", "--bogus", "--bogus: unknown option");
    EXPECT_USAGE("-n not a number", "-n abc", "-n: invalid value (got 'abc'");
    EXPECT_USAGE("-n trailing junk", "-n 12x", "-n: invalid value (got '12x'");
    EXPECT_USAGE("-n out of range", "-n 99999999999999", "expected an integer in 0..1000000");
    EXPECT_USAGE("-n missing value", "-n", "-n: missing value");
    EXPECT_USAGE("-t negative", "-t -1", "-t: invalid value (got '-1'");
    EXPECT_USAGE("-t nan", "--temperature=nan", "invalid value (got 'nan'");
    EXPECT_USAGE("-p zero", "-p 0", "expected a number in (0, 1]");
    /* below FLT_MIN strtof reports an underflow: the nearest float is still in range */
    snprintf(args, sizeof args, "%s -t 1e-39 -p 1e-40 -n 2", base);
    expect("-t 1e-39 -p 1e-40: denormal, in range", args, 0, "generation: 2 tokens");
    EXPECT_USAGE("-p above one", "--top-p 1.5", "invalid value (got '1.5'");
    EXPECT_USAGE("-p given a prompt, as llama.cpp's -p: the prompt is -i", "-p ROMEO:",
                 "-p: invalid value (got 'ROMEO:', expected a number in (0, 1]; the prompt is "
                 "-i TEXT, -p is top-p)");
    EXPECT_USAGE("-k negative", "-k -3", "-k: invalid value (got '-3'");
    EXPECT_USAGE("-s zero", "-s 0", "expected an integer in 1..18446744073709551615");
    EXPECT_USAGE("-s negative", "-s -1", "-s: invalid value (got '-1'");
    EXPECT_USAGE("-s overflow", "-s 18446744073709551616", "invalid value");
    EXPECT_USAGE("two prompts", "-i a -f b", "cannot be combined with -i");
    EXPECT_USAGE("extra argument", "other.bin", "unexpected extra argument");
    /* a lone "-" is an argument, not an option (cli.h; getopt's rule), so the model's path,
     * as llama2.c's run takes its first argument: no file of that name here */
    EXPECT_USAGE("a lone - after the model: an extra argument", "-",
                 "run: -: unexpected extra argument");
    expect("a lone - as the model: a path, not an unknown option", "-", 1,
           "model: -: cannot open (got \"No such file or directory\", expected a model file)");
    EXPECT_USAGE("unknown attention", "--attn bogus",
                 "unknown attention 'bogus' (expected one of: exact, unscaled");
    EXPECT_USAGE("attention: unknown key", "--attn window:q=3",
                 "window: unknown or malformed parameter 'q=3' (expected key=value with key one "
                 "of: w sinks tau softmax1 sinklogit)");
    EXPECT_USAGE("attention: out of range", "--attn=window:w=0", "invalid value '0' for w");
    EXPECT_USAGE("attention: a key with no value", "--attn exact:tau=",
                 "exact: parameter tau has no value, or one too long (expected tau=VALUE of "
                 "1..63 characters)");
    /* the test model has one layer */
    EXPECT_USAGE("attention: more layer specs than layers", "--attn 'window:w=8;exact'",
                 "more layer specs than layers (expected 1 in all");
    EXPECT_USAGE("attention: repeat count over the layers", "--attn '2*window:w=8'",
                 "invalid repeat count '2' (expected N*SPEC with N in 1..1");
    EXPECT_USAGE("attention: a layer's spec bad", "--attn '1*exakt'",
                 "unknown attention 'exakt'");
    /* names and keys are matched whole, not as prefixes (exa ran as exact) */
    EXPECT_USAGE("attention: a prefix of a name", "--attn exa", "unknown attention 'exa'");
    EXPECT_USAGE("attention: a prefix of a key", "--attn exact:s=1",
                 "exact: unknown or malformed parameter 's=1'");
    EXPECT_USAGE("attention: a prefix of lsh's local", "--attn lsh:l=5",
                 "lsh: unknown or malformed parameter 'l=5'");
    /* a count of 1 is one layer, not every layer (the shipped model has 10: '1*window' ran
     * window in all ten) */
    snprintf(args, sizeof args, "weights/model.bin -z weights/tokenizer.bin -n 1 --attn "
             "'1*window:w=4'");
    expect("attention: 1*SPEC for a 10-layer model", args, 2,
           "layer specs cover 1 layer (expected 10");
    EXPECT_USAGE("attention: sink logit and softmax1", "--attn window:softmax1=1,sinklogit=1",
                 "softmax1 and sinklogit exclude each other");
    EXPECT_USAGE("attention: junk value", "--attn performer:m=12x", "invalid value '12x' for m");
    EXPECT_USAGE("attention: odd buckets", "--attn lsh:buckets=3", "buckets must be 1 or even");
    EXPECT_USAGE("attention: softmax1 on Performer", "--attn performer:softmax1=1",
                 "unknown or malformed parameter 'softmax1=1'");
    EXPECT_USAGE("attention: nystrom is not causal", "--attn nystrom", "nystrom: not causal");
    EXPECT_USAGE("attention: synth-frandom of rank 0", "--attn synth-frandom:rank=0",
                 "invalid value '0' for rank");
    EXPECT_USAGE("attention: a key synth-dense does not take", "--attn synth-dense:a=4",
                 "synth-dense: unknown or malformed parameter 'a=4'");
    EXPECT_USAGE("attention: softmax1 on a Synthesizer", "--attn synth-random:softmax1=1",
                 "unknown or malformed parameter 'softmax1=1'");
    snprintf(args, sizeof args, "%s --attn synth-dense", base);   /* swapped into exact's */
    expect("a Synthesizer on a model trained without one", args, 1,
           "model: attention synth-dense (layer 0): a Synthesizer's weights are trained "
           "parameters, and this model has none for it (expected a model trained with ./train "
           "--attn synth-dense)");
    EXPECT_USAGE("--attn missing value", "--attn", "--attn: missing value");
    EXPECT_USAGE("--cache-type unknown", "--cache-type f8",
                 "--cache-type: invalid value (got 'f8', expected f32 or f16)");
    EXPECT_USAGE("--cache-type f16 with a variant", "--cache-type f16 --attn window:w=4",
                 "--cache-type f16: only applies to exact attention's KV cache (expected no "
                 "--attn, or --attn exact without parameters)");
    EXPECT_USAGE("--ctx-size zero", "-c 0", "-c: invalid value (got '0'");
    EXPECT_USAGE("--ctx-size below 2", "--eval x --ctx-size 1",
                 "--ctx-size: invalid value (got '1'");
    EXPECT_USAGE("-c beyond the model (named as given)", "-c 17",
                 "-c: invalid value (got '17', expected an integer in 2..16, this model's "
                 "context)");
    EXPECT_USAGE("--keep as large as the context", "-c 8 --keep 8",
                 "--keep: invalid value (got '8', expected an integer in -1..7, less than the "
                 "context)");
    EXPECT_USAGE("--keep below -1", "--keep -2", "--keep: invalid value (got '-2'");
    EXPECT_USAGE("--interactive with -f -", "-I -f -", "-f -: cannot be combined with "
                 "--interactive");
    EXPECT_USAGE("--keep with --eval", "--eval x --keep 1", "--keep: cannot be combined with "
                 "--eval");
    EXPECT_USAGE("a prompt with --eval", "--eval x -i hi", "-i: cannot be combined with --eval");
    EXPECT_USAGE("--temperature with --eval", "--temperature 0 --eval x",
                 "--temperature: cannot be combined with --eval");
    EXPECT_USAGE("-n with --eval", "--eval x -n 5", "-n: cannot be combined with --eval");
    EXPECT_USAGE("empty reverse prompt", "-r ''", "-r: invalid value (got ''");
    EXPECT_USAGE("a 17th reverse prompt", "-r 1 -r 2 -r 3 -r 4 -r 5 -r 6 -r 7 -r 8 -r 9 -r 10 "
                 "-r 11 -r 12 -r 13 -r 14 -r 15 -r 16 -r 17", "-r: too many (got '17', "
                 "expected at most 16 reverse prompts)");
    EXPECT_USAGE("--attn-map with --eval", "--eval x --attn-map m.svg",
                 "--attn-map: cannot be combined with --eval");
    EXPECT_USAGE("--attn-map without .svg or .html", "--attn-map m.png",
                 "--attn-map: invalid value (got 'm.png', expected a file name ending in .svg or "
                 ".html)");
    EXPECT_USAGE("--layer out of range", "--attn-map m.svg --layer 1",
                 "--layer: invalid value (got '1', expected an integer in 0..0, this model's "
                 "layers)");
    EXPECT_USAGE("--head out of range", "--attn-map m.svg --head 2",
                 "--head: invalid value (got '2', expected an integer in 0..1, this model's "
                 "heads)");
    EXPECT_USAGE("--head without --attn-map", "--head 0", "--head: only applies with --attn-map");
    EXPECT_USAGE("--keep with --no-context-shift", "--keep 1 --no-context-shift",
                 "--keep: cannot be combined with --no-context-shift (it applies to the shifts)");
    EXPECT_USAGE("--layer alone", "--layer 0", "--layer: only applies with --attn-map or "
                 "--attn-top");
    EXPECT_USAGE("--ref without --eval", "--ref m.bin", "--ref: only applies with --eval");
    EXPECT_USAGE("--attn-top zero", "--attn-top 0", "--attn-top: invalid value (got '0'");
#undef EXPECT_USAGE
    /* a value quoted in 256 bytes with the NUL (cli.h): whole up to 255 bytes, else cut
     * before a character (never inside a \xHH) where "..." and the NUL still fit, marked
     * "..." (it was cut silently after 247 bytes, even one of 250 that fits) */
    static const struct { int ones; const char *tail; int shown_ones; const char *shown; }
    quoted[] = {
        {250, "", 250, ""},               /* fits: whole */
        {300, "", 252, "..."},            /* 252 + "..." + NUL = 256 */
        {251, "\001", 251, "\\x01"},      /* 251 + 4 = 255: fits whole */
        {252, "\001", 252, "..."},        /* 252 + 4 + NUL = 257: the \x01 cut */
        {250, "\001\001", 250, "..."},    /* 254 + 4 too many; 254 + "..." too: after 250 */
    };
    for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++) {
        char ones[320], want[400];
        memset(ones, '1', (size_t)quoted[i].ones);
        ones[quoted[i].ones] = '\0';
        snprintf(args, sizeof args, "%s -n '%s%s'", base, ones, quoted[i].tail);
        snprintf(want, sizeof want, "-n: invalid value (got '%.*s%s', expected an integer in "
                 "0..1000000)", quoted[i].shown_ones, ones, quoted[i].shown);
        char what[96];
        snprintf(what, sizeof what, "-n of %d digits%s: quoted as %d%s%s", quoted[i].ones,
                 *quoted[i].tail ? " and \\x01s" : "", quoted[i].shown_ones,
                 *quoted[i].shown ? " and " : "", quoted[i].shown);
        expect(what, args, 2, want);
    }
    {   /* "1" and 150 two-byte characters: cut after a whole one, "1" and 125 of them */
        char value[320] = "1", want[400], shown[300] = "1";
        for (int i = 0; i < 150; i++) strcat(value, "\xc3\xa9");
        for (int i = 0; i < 125; i++) strcat(shown, "\xc3\xa9");
        snprintf(args, sizeof args, "%s -n '%s'", base, value);
        snprintf(want, sizeof want, "-n: invalid value (got '%s...', expected an integer in "
                 "0..1000000)", shown);
        expect("-n of \"1\" and 150 two-byte characters: quoted as \"1\", 125 whole ones and "
               "...", args, 2, want);
    }
    char *out = NULL;
    snprintf(args, sizeof args, "%s --help", run_bin);
    int code = check_run(args, &out, NULL);
    check_true(code == 0 && out && strstr(out, "Usage: run MODEL"), "--help prints usage, exit 0");
    free(out);
}

static void test_bad_files(const char *tok) {
    char args[1024];
    {   /* the shipped tokenizer one byte short: its last token named */
        char cut[256], command[600];
        snprintf(cut, sizeof cut, "%s/tok_cut.bin", dir);
        snprintf(command, sizeof command, "head -c $(( $(wc -c < weights/tokenizer.bin) - 1 )) "
                 "weights/tokenizer.bin > %s", cut);
        snprintf(args, sizeof args, "weights/model.bin -z %s -n 1", cut);
        if (check_true(check_run(command, NULL, NULL) == 0, "the shipped tokenizer cut by a byte"))
            expect("a tokenizer one byte short", args, 1, "tok_cut.bin: truncated in token 1023 "
                   "(got 12 bytes, expected 13)");
    }
#define EXPECT_BAD(what, path, message) \
    (snprintf(args, sizeof args, "%s -z %s -n 1", path, tok), expect(what, args, 1, message))
    EXPECT_BAD("missing model", "/nonexistent/model.bin",
               "cannot open (got \"No such file or directory\", expected a model file)");
    EXPECT_BAD("wrong magic", write_model("magic.bin", 1234, 3, MAX_T, V, L, NH, C, VP, 0),
               "bad magic number (got 1234, expected 20240326");
    EXPECT_BAD("unknown version", write_model("v4.bin", 20240326, 4, MAX_T, V, L, NH, C, VP, 0),
               "unknown checkpoint version (got 4");
    EXPECT_BAD("truncated", write_model("trunc.bin", 20240326, 3, MAX_T, V, L, NH, C, VP, -4),
               "truncated");
    EXPECT_BAD("trailing bytes", write_model("trail.bin", 20240326, 3, MAX_T, V, L, NH, C, VP, 1),
               "trailing bytes");
    EXPECT_BAD("heads do not divide width",
               write_model("nh.bin", 20240326, 3, MAX_T, V, L, 3, C, VP, 0),
               "width dim not divisible by n_heads (got dim 8, n_heads 3, expected n_heads to "
               "divide dim)");
    EXPECT_BAD("V > Vp", write_model("vp.bin", 20240326, 3, MAX_T, VP + 1, L, NH, C, VP, 0),
               "vocab V larger than padded vocab Vp (got V 265, Vp 264, expected V <= Vp)");
    /* a reserved header int (here [200]) that is not 0 */
    const char *reserved = write_model("reserved.bin", 20240326, 3, MAX_T, V, L, NH, C, VP, 0);
    FILE *patch = fopen(reserved, "r+b");
    int32_t seven = 7;
    if (patch) {
        fseek(patch, 200 * (long)sizeof(int32_t), SEEK_SET);
        fwrite(&seven, sizeof seven, 1, patch);
        fclose(patch);
    }
    EXPECT_BAD("a reserved header field not 0", reserved,
               "reserved header field [200] is not 0 (got 7, expected 0)");
    EXPECT_BAD("absurd layer count",
               write_model("layers.bin", 20240326, 3, MAX_T, V, 1000000, NH, C, VP, 0),
               "header field n_layers out of range (got 1000000");
    EXPECT_BAD("zero width", write_model("c0.bin", 20240326, 3, MAX_T, V, L, NH, 0, VP, 0),
               "header field C out of range (got 0");
    EXPECT_BAD("negative context",
               write_model("t.bin", 20240326, 3, -5, V, L, NH, C, VP, 0),
               "header field seq_len out of range (got -5");
    char short_path[128];
    snprintf(short_path, sizeof short_path, "%s/short.bin", dir);
    FILE *f = fopen(short_path, "wb");
    if (f) { fputs("short", f); fclose(f); }
    EXPECT_BAD("file shorter than the header", short_path, "file too short for the header");
#undef EXPECT_BAD
}

/* Writes a llama2.c file: versioned ("ak42", version, 7 fields, shared flag, pad to 256)
 * when version > 0, else legacy (7 fields); then `floats` zero floats. */
static const char *write_llama(const char *name, int version, const int32_t fields[7],
                               long floats) {
    static char paths[8][128];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 128, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    if (version > 0) {
        unsigned char header[256] = {0};
        int32_t head[2] = {0x616b3432, version};
        memcpy(header, head, sizeof head);
        memcpy(header + 8, fields, 7 * sizeof(int32_t));
        header[36] = 1;   /* shared classifier */
        fwrite(header, sizeof header, 1, f);
    } else {
        fwrite(fields, sizeof(int32_t), 7, f);
    }
    /* the zero weights as a hole: a sparse file, written at once whatever its size */
    long at = ftell(f);
    fclose(f);
    if (at >= 0 && truncate(path, (off_t)at + (off_t)floats * (off_t)sizeof(float)) != 0)
        remove(path);
    return path;
}

static void test_bad_llama_files(const char *tok) {
    /* dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 260 (shared), context 16 */
    const int32_t good[7] = {8, 16, 1, 2, 1, 260, 16}, bad_kv[7] = {8, 16, 1, 2, 3, 260, 16},
                  kv_3of4[7] = {8, 16, 1, 4, 3, 260, 16};
    /* floats: norms 2*8+8, embedding 260*8, wq 64, wk 32, wv 32, wo 64, w1 w2 w3 3*128 */
    long n = 24 + 260 * 8 + 64 + 32 + 32 + 64 + 3 * 128, rope = 16 * 4;
    char args[1024];
#define EXPECT_BAD(what, path, message) \
    (snprintf(args, sizeof args, "%s -z %s -n 1", path, tok), expect(what, args, 1, message))
    snprintf(args, sizeof args, "%s -z %s -n 2 -t 0", write_llama("legacy.bin", 0, good, n + rope),
             tok);
    expect("a valid legacy llama2.c file runs", args, 0, "llama2.c legacy checkpoint");
    /* quantize's version 2 of it: llama2.c's runq reads groups that divide dim (8) and
     * hidden_dim (16) only; 8 is the largest of those up to 16 */
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    char q8[160], *err = NULL;
    snprintf(q8, sizeof q8, "%s/legacy_q8.bin", dir);
    snprintf(args, sizeof args, "-g 16 --force %s/legacy.bin %s", dir, q8);
    expect_program(quantize, "quantize -g 16 of a Llama model of widths 8 and 16", args, 0,
                   "groups of 16 do not divide the width 8, so llama2.c's runq cannot read "
                   "this file (run can); -g 8 writes one both read");
    snprintf(args, sizeof args, "-g 32 --force %s/legacy.bin %s", dir, q8);
    expect_program(quantize, "quantize -g 32 of that model: both widths named", args, 0,
                   "groups of 32 do not divide the widths 8 and 16, so llama2.c's runq cannot "
                   "read this file (run can); -g 8 writes one both read");
    snprintf(args, sizeof args, "timeout 120 %s -g 8 --force %s/legacy.bin %s", quantize, dir,
             q8);
    int code = check_run(args, NULL, &err);
    check_true(code == 0 && err && !strstr(err, "runq"), "quantize -g 8 of that model: no note "
               "about runq (exit %d)", code);
    free(err);
    /* widths 12 and 16: the largest group size up to 32 dividing both is their gcd, 4 (12
     * divides the dim alone, 16 the hidden width alone) */
    const int32_t wide[7] = {12, 16, 1, 2, 1, 260, 16};
    /* norms 3*12, embedding 260*12, wq 144, wk wv 72 each, wo 144, w1 w2 w3 3*192; rope:
     * 16 positions x 6 (head size 6: 3 cos and 3 sin) */
    long n_wide = 36 + 260 * 12 + 144 + 72 + 72 + 144 + 3 * 192, rope_wide = 16 * 6;
    snprintf(args, sizeof args, "-g 32 --force %s %s",
             write_llama("wide.bin", 0, wide, n_wide + rope_wide), q8);
    expect_program(quantize, "quantize -g 32 of a Llama model of widths 12 and 16: -g 4, "
                   "their gcd", args, 0, "groups of 32 do not divide the widths 12 and 16, so "
                   "llama2.c's runq cannot read this file (run can); -g 4 writes one both read");
    unlink(q8);
    EXPECT_BAD("legacy llama2.c file truncated", write_llama("l_trunc.bin", 0, good, n),
               "truncated");
    EXPECT_BAD("llama2.c heads not divisible by kv heads",
               write_llama("l_kv.bin", 0, bad_kv, n + rope), "n_kv_heads out of range (got 3");
    EXPECT_BAD("llama2.c kv heads that do not divide the heads",
               write_llama("l_kv3.bin", 0, kv_3of4, n + rope), "n_heads not divisible by "
               "n_kv_heads (got n_heads 4, n_kv_heads 3, expected n_kv_heads to divide n_heads)");
    EXPECT_BAD("llama2.c unknown version", write_llama("l_v3.bin", 3, good, n),
               "unknown llama2.c version (got 3");
    EXPECT_BAD("llama2.c version 1 with trailing bytes", write_llama("l_v1.bin", 1, good, n + 1),
               "trailing bytes");
    /* a Llama model of 261 tokens with the 260-token tokenizer: token 260 would have no
     * text (only a larger llama2.c tokenizer may serve a model); one line, exit 1 */
    const int32_t v261[7] = {8, 16, 1, 2, 1, 261, 16};
    snprintf(args, sizeof args, "%s %s -z %s -n 1", run_bin,
             write_llama("l_v261.bin", 0, v261, n + 8 + rope), tok);
    code = check_run(args, NULL, &err);
    check_true(code == 1 && err && strchr(err, '\n') == err + strlen(err) - 1 &&
               strstr(err, "tokenizer has fewer tokens than the model (got 260, expected at "
                      "least 261)"), "a llama2.c tokenizer smaller than the model: exit %d "
               "(want 1), one line naming both sizes: %s", code, err ? err : "");
    free(err);
#undef EXPECT_BAD
}

static void test_bad_inputs(const char *model, const char *tok) {
    char args[1024];
    snprintf(args, sizeof args, "%s -z %s/none.bin", model, dir);
    expect("missing tokenizer", args, 1, "none.bin");
    /* no -z, and no tokenizer.bin beside the model (a file quantize wrote): the message
     * said only "tokenizer: DIR/tokenizer.bin: cannot open" */
    char command[1024], *err = NULL, want[512];
    snprintf(command, sizeof command, "%s %s -n 1", run_bin, model);
    snprintf(want, sizeof want, "run: %s/tokenizer.bin: no tokenizer beside the model %s, and "
             "no -z (expected -z PATH: the tokenizer file it was trained with, or a quantized "
             "model's source's)\n", dir, model);
    int code = check_run(command, NULL, &err);
    int ok = code == 1 && err && strstr(err, want) && !strstr(err, "tokenizer: ");
    check_true(ok, "no tokenizer beside the model and no -z: exit 1, one line saying to pass "
               "-z (exit %d)%s%s", code, ok || !err ? "" : "; stderr was: ", ok || !err ? "" : err);
    free(err);
    /* the GPT-2 tokenizer with its magic lost (1): read as llama2.c's format (max length 1),
     * its first record is bad (score: the version 2's bits, length: the vocabulary's 260,
     * 1,559 - 12 bytes left of the 1,024-byte header, 256 x 2 and 3 + 3 + 3 + 14), and the
     * line names what the file could have been */
    size_t tok_size = 0;
    char *tok_bytes = check_read_file(tok, &tok_size);
    char no_magic[160];
    snprintf(no_magic, sizeof no_magic, "%s/no_magic_tok.bin", dir);
    FILE *f = tok_bytes && tok_size > 4 ? fopen(no_magic, "wb") : NULL;
    if (f) {
        uint32_t one = 1;
        memcpy(tok_bytes, &one, sizeof one);
        fwrite(tok_bytes, 1, tok_size, f);
        fclose(f);
    }
    free(tok_bytes);
    snprintf(args, sizeof args, "%s -z %s -n 1", model, no_magic);
    expect("GPT-2 tokenizer without its magic", args, 1, "bad token 0 (got score 2.8026e-45, "
           "length 260 with 1547 bytes left, expected a finite score and a length 0..1; or a "
           "GPT-2 file, which starts with magic 20240328)");
    const char *small_vocab = write_model("small_vocab.bin", 20240326, 3, MAX_T, 200, L, NH, C,
                                          VP, 0);
    snprintf(args, sizeof args, "%s -z %s -i ef -n 1", small_vocab, tok);
    expect("GPT-2 tokenizer larger than the model", args, 1,
           "tokenizer does not belong to the model (got 260 tokens, expected 200");
    const char *big_vocab = write_model("big_vocab.bin", 20240326, 3, MAX_T, 261, L, NH, C, VP, 0);
    snprintf(args, sizeof args, "%s -z %s -n 1", big_vocab, tok);
    expect("GPT-2 tokenizer smaller than the model", args, 1,
           "tokenizer does not belong to the model (got 260 tokens, expected 261");
    /* a Llama model of 200 tokens (dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, context
     * 16; floats: norms 24, embedding 200*8, wq 64, wk 32, wv 32, wo 64, w1 w2 w3 3*128)
     * with this GPT-2 tokenizer: its ids would mean other tokens (only llama2.c's larger
     * tokenizer may serve a smaller Llama model) */
    const int32_t llama200[7] = {8, 16, 1, 2, 1, 200, 16};
    const char *llama_model = write_llama("llama200.bin", 1, llama200,
                                          24 + 200 * 8 + 64 + 32 + 32 + 64 + 3 * 128);
    snprintf(args, sizeof args, "%s -z %s -i ef -n 1", llama_model, tok);
    expect("GPT-2 tokenizer for a Llama model", args, 1, "tokenizer of the other family (got "
           "llm.c's GPT-2 tokenizer file, expected llama2.c's tokenizer file for a Llama model)");
    /* the other family at the model's own size was accepted without a word */
    const char *llama_tok = write_llama_tokenizer();
    snprintf(args, sizeof args, "%s -z %s -n 1", model, llama_tok);
    expect("a llama2.c tokenizer of the model's size for a GPT-2 model", args, 1,
           "tokenizer of the other family (got llama2.c's tokenizer file, expected llm.c's "
           "GPT-2 tokenizer file for a GPT-2 model)");
    snprintf(args, sizeof args, "%s -z %s -n 1 -t 0", llama_model, llama_tok);
    expect("a larger llama2.c tokenizer serves a smaller Llama model", args, 0,
           "only the first 200 are used");
    snprintf(args, sizeof args, "%s -z %s -i 'abcdefghijklmnopqrstuvwxyz' -n 1", model, tok);
    expect("prompt longer than the context", args, 1,
           "prompt too long for the context (got 23 tokens, expected at most 16)");
    snprintf(args, sizeof args, "%s -z %s -f %s/no_prompt.txt", model, tok, dir);
    expect("missing prompt file", args, 1, "cannot open (got \"No such file or directory\", "
           "expected a prompt file)");
}

/* What a header or a flag may make the program allocate is bounded: a context field of
 * 2^20 with 1024 layers (a 32 GB KV cache) still runs a short generation in little
 * memory; LSH and Performer parameters beyond what can help are refused with a message. */
/* A FIFO or a directory where a file belongs is refused at once (opening a FIFO would
 * block forever; a directory opens but has no size). `timeout` turns a hang into exit 124. */
static void test_special_files(const char *model, const char *tok) {
    char fifo[128], args[1024];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    char command[256];
    snprintf(command, sizeof command, "mkfifo %s", fifo);
    if (!check_true(check_run(command, NULL, NULL) == 0, "mkfifo for the special-file tests"))
        return;
    snprintf(args, sizeof args, "%s -z %s -n 1", fifo, tok);
    expect("a FIFO as the model", args, 1, "not a regular file");
    snprintf(args, sizeof args, "%s -z %s -n 1", model, fifo);
    expect("a FIFO as the tokenizer", args, 1, "not a regular file");
    snprintf(args, sizeof args, "%s -z %s -n 1", model, dir);
    expect("a directory as the tokenizer", args, 1, "got a folder");
    snprintf(args, sizeof args, "%s -z %s -n 1", dir, tok);
    expect("a directory as the model", args, 1,
           "not a regular file (got a folder, expected a model file)");
    snprintf(args, sizeof args, "'' -z %s -n 1", tok);
    expect("an empty model path", args, 1, "model: empty path (got \"\", expected a model file)");
    snprintf(args, sizeof args, "%s -z '' -n 1", model);
    expect("an empty tokenizer path", args, 1, "run: empty path (got \"\", expected a tokenizer "
           "file)");
    snprintf(args, sizeof args, "%s -z %s -f '' -n 1", model, tok);
    expect("an empty prompt file path", args, 1, "run: empty path (got \"\", expected a prompt "
           "file)");
    snprintf(args, sizeof args, "%s -z %s --eval ''", model, tok);
    expect("an empty --eval path", args, 1, "run: empty path (got \"\", expected an eval file)");
    snprintf(args, sizeof args, "%s -z %s -f %s -n 1", model, tok, fifo);
    expect("a FIFO as the prompt file", args, 1, "not a regular file");
    snprintf(args, sizeof args, "%s -z %s -f - -n 1 < %s", model, tok, dir);
    expect("a folder as standard input with -f -", args, 1,
           "standard input: a folder (expected a prompt file)");
}

/* Standard input as a file, and a model file that changes under a run: the map written
 * over the file standard input reads (-f -, -I) replaced it (exit 0); `run -I < f >> f`
 * read its own text back without end; a /proc file (size 0, text to read) was an empty
 * prompt; a line of exactly the limit's bytes and its newline was refused; a mapped
 * model cut short while in use killed the run by SIGBUS (exit 135, no line). */
static void test_standard_input(const char *model, const char *tok) {
    char command[2048], *out = NULL, *err = NULL;
    int code;
    /* a prompt of 240,001 bytes read whole from a pipe (read in pieces of 64 KiB) and from
     * its file: the same token count in the same refusal */
    char *via[2] = {NULL, NULL};
    snprintf(command, sizeof command, "awk 'BEGIN { for (i = 0; i < 60000; i++) printf "
             "\"a b \"; print \"\" }' > %s/big.txt", dir);
    check_run(command, NULL, NULL);
    for (int piped = 0; piped < 2; piped++) {
        if (piped)
            snprintf(command, sizeof command, "cat %s/big.txt | %s %s -z %s -n 1 -f -", dir,
                     run_bin, model, tok);
        else
            snprintf(command, sizeof command, "%s %s -z %s -n 1 -f %s/big.txt", run_bin, model,
                     tok, dir);
        check_run(command, NULL, &via[piped]);
    }
    const char *at = via[0] ? strstr(via[0], "prompt too long for the context (got ") : NULL;
    check_true(at && via[1] && strstr(via[1], at), "a prompt of 240,001 bytes: through -f - "
               "the token count of -f FILE: %s", at ? at : "(no refusal)");
    free(via[0]);
    free(via[1]);
    /* standard input of 16 MiB (RUN_MAX_TEXT_BYTES) read whole, one byte more refused (not
     * cut); natively only: 16 MiB through valgrind take minutes */
    if (!strchr(run_bin, ' ')) {
        for (int more = 0; more < 2; more++) {
            snprintf(command, sizeof command, "head -c %d /dev/zero | tr '\\0' a | %s %s -z %s "
                     "-n 1 -f -", (1 << 24) + more, run_bin, model, tok);
            err = NULL;
            code = check_run(command, NULL, &err);
            check_true(code == 1 && err && strstr(err, more ? "standard input: too large (got "
                       "more than 16777216 bytes" : "prompt too long for the context (got "
                       "16777216 tokens"), "standard input of 16 MiB%s: %s", more ? " + 1 byte"
                       : "", err ? err : "");
            free(err);
        }
    } else {
        check_skip("RUN is a command (valgrind): 16 MiB of standard input not read");
    }
    const char *modes[2][2] = {{"-f -", "pr.svg"}, {"-I", "lines.svg"}};
    for (int i = 0; i < 2; i++) {
        snprintf(command, sizeof command, "printf 'hi\\n' > %s/%s && %s %s -z %s -n 2 %s "
                 "--attn-map %s/%s < %s/%s; echo \"exit $?\"; cat %s/%s", dir, modes[i][1],
                 run_bin, model, tok, modes[i][0], dir, modes[i][1], dir, modes[i][1], dir,
                 modes[i][1]);
        out = err = NULL;
        check_run(command, &out, &err);
        check_true(out && strstr(out, "exit 1\nhi\n") && err && strstr(err, "is the file "
                   "standard input reads (got the same file, expected another path for the "
                   "attention map)"), "run %s --attn-map naming standard input's file: refused, "
                   "the file kept", modes[i][0]);
        free(out); free(err);
    }
    snprintf(command, sizeof command, "printf 'ab\\n' > %s/same.txt && timeout 20 %s %s -z %s "
             "-n 2 -I < %s/same.txt >> %s/same.txt; echo \"exit $?\"", dir, run_bin, model, tok,
             dir, dir);
    out = err = NULL;
    check_run(command, &out, &err);
    check_true(out && strcmp(out, "exit 1\n") == 0 && err && strstr(err, "run: --interactive: "
               "standard input is the file standard output goes to"), "run -I < f >> f: "
               "refused at once");
    free(out); free(err);
    FILE *proc = fopen("/proc/sys/kernel/ostype", "r");   /* "Linux" */
    char first[16] = "";
    if (!proc || !fgets(first, sizeof first, proc)) {
        check_skip("/proc/sys/kernel/ostype unreadable: a file of size 0 with text not read");
    } else {
        snprintf(command, sizeof command, "%s %s -z %s -f /proc/sys/kernel/ostype -n 1",
                 run_bin, model, tok);
        out = NULL;
        code = check_run(command, &out, NULL);
        check_true(code == 0 && out && strncmp(out, first, strlen(first)) == 0, "run -f "
                   "/proc/sys/kernel/ostype (size 0): its text is the prompt (\"%s\")", first);
        free(out);
    }
    if (proc) fclose(proc);
    /* 1,048,576 bytes and a newline: read (then too long for the context, which may not
     * shift: the run ends there, exit 0); one byte more is refused */
    for (int extra = 0; extra <= 1; extra++) {
        snprintf(command, sizeof command, "{ head -c %d /dev/zero | tr '\\0' a; echo; } | %s "
                 "%s -z %s -n 1 -I --no-context-shift > /dev/null", (1 << 20) + extra, run_bin,
                 model, tok);
        err = NULL;
        code = check_run(command, NULL, &err);
        check_true(extra ? code == 1 && err && strstr(err, "input line too long (expected at "
                   "most 1048576 bytes)") : code == 0 && err && strstr(err, "context full"),
                   "-I: a line of %d bytes and its newline %s (exit %d)", (1 << 20) + extra,
                   extra ? "refused" : "read", code);
        free(err);
    }
    if (strchr(run_bin, ' ')) {   /* a wrapper (valgrind) has signal handlers of its own */
        check_skip("a model cut short while run reads it: RUN is a wrapper");
        return;
    }
    snprintf(command, sizeof command, "cp %s %s/bus.bin && { echo ab; sleep 0.3; truncate -s "
             "1024 %s/bus.bin; echo cd; sleep 0.3; } | %s %s/bus.bin -z %s -n 3 -t 0 -I > "
             "/dev/null; echo \"exit $?\"", model, dir, dir, run_bin, dir, tok);
    out = err = NULL;
    check_run(command, &out, &err);
    check_true(out && strcmp(out, "exit 1\n") == 0 && err && strstr(err, "run: a file in use "
               "was cut short (got SIGBUS reading a mapped model"), "a model cut short "
               "while run -I reads it: one line, exit 1");
    free(out); free(err);
}

/* Standard output that fails (a full disk, a closed pipe) is an error with one line, and
 * thread counts beyond the cores are capped: --help on /dev/full exited 0; generation into
 * `head -c 1` died by SIGPIPE (exit 141) with no message; OMP_NUM_THREADS=100000
 * crashed a model large enough to use threads. */
static void test_output_and_threads(const char *model, const char *tok) {
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    char args[1024], command[2048];
    expect("--help into a full disk", "--help >/dev/full", 1,
           "run: standard output: write error (No space left on device)");
    expect_program(quantize, "quantize --help into a full disk", "--help >/dev/full", 1,
                   "quantize: standard output: write error (No space left on device)");
    /* the reader is gone before the first write (true exits at once; run starts a second
     * later), so the write fails whatever the pipe's buffer holds */
    snprintf(command, sizeof command, "{ sleep 1; %s %s -z %s -n 200 -s 1 2>%s/pipe_err; "
             "echo $? > %s/pipe_code; } | true", run_bin, model, tok, dir, dir);
    check_run(command, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/pipe_code", dir);
    size_t size;
    char *code = check_read_file(path, &size);
    snprintf(path, sizeof path, "%s/pipe_err", dir);
    char *err = check_read_file(path, &size);
    if (code) code[strcspn(code, "\n")] = '\0';   /* the check stays one line */
    check_true(code && atoi(code) == 1 && err &&
               strstr(err, "run: standard output: write error (Broken pipe)"),
               "generation into a closed pipe: exit 1 (got %s), one line naming the broken pipe",
               code ? code : "nothing");
    free(code);
    free(err);
    /* 2 layers of width 512: 6.4 M multiply-adds per token, so the threads are used */
    const char *wide = write_model("wide.bin", 20240326, 3, MAX_T, V, 2, 4, 512, VP, 0);
    snprintf(args, sizeof args, "%s -z %s -n 2 -t 0", wide, tok);
    snprintf(command, sizeof command, "env OMP_NUM_THREADS=100000 %s", run_bin);
    expect_program(command, "OMP_NUM_THREADS=100000", args, 0,
                   "OMP_NUM_THREADS asks for 100000 threads; using the");
    /* a number past int: named as given, not as OpenMP's runtime wraps it, and capped in
     * both builds (the pool without OpenMP took it for invalid) */
    snprintf(command, sizeof command, "env OMP_NUM_THREADS=99999999999 %s", run_bin);
    expect_program(command, "OMP_NUM_THREADS=99999999999", args, 0,
                   "OMP_NUM_THREADS asks for 99999999999 threads; using the");
    /* the cores are those the process may use: one under taskset -c 0 (the pool without
     * OpenMP counted the machine's), said in the singular */
    if (check_run("taskset -c 0 true", NULL, NULL) != 0) {
        check_skip("no taskset: the affinity mask's cores not checked");
    } else {
        snprintf(command, sizeof command, "env OMP_NUM_THREADS=4 taskset -c 0 %s", run_bin);
        expect_program(command, "OMP_NUM_THREADS=4 under taskset -c 0", args, 0,
                       "run: OMP_NUM_THREADS asks for 4 threads; using the 1 core\n");
    }
#ifndef _OPENMP
    /* without OpenMP, an invalid value is the program's to say (OpenMP's runtime says so
     * itself), with its name */
    snprintf(command, sizeof command, "env OMP_NUM_THREADS=abc %s", run_bin);
    expect_program(command, "OMP_NUM_THREADS=abc without OpenMP", args, 0,
                   "run: OMP_NUM_THREADS: invalid value (got 'abc', expected a positive integer "
                   "or a list of them); ignored");
#endif
}

static void test_resource_limits(const char *model, const char *tok) {
    /* 1024 layers of dim 8: floats = norms 2*1024*8+8, embedding 260*8, per layer
     * wq 64, wk 32, wv 32, wo 64, w1 w2 w3 3*128 */
    const int32_t huge[7] = {8, 16, 1024, 2, 1, 260, 1 << 20};
    long n = 2L * 1024 * 8 + 8 + 260 * 8 + 1024L * (64 + 32 + 32 + 64 + 3 * 128);
    char args[1024];
    const char *llama_tok = write_llama_tokenizer();
    snprintf(args, sizeof args, "%s -z %s -n 3 -t 0", write_llama("huge_ctx.bin", 1, huge, n),
             llama_tok);
    expect("context field 2^20 x 1024 layers: a short run still works", args, 0,
           "generation: 3 tokens");
    /* in little memory: the cache holds the 4 positions the run reaches (BOS and 3 new
     * tokens; 1024 layers x 2 x 4 floats each: 0.1 MB), not the header's 2^20 (32 GB) */
    expect("context field 2^20 x 1024 layers: the KV cache is sized for the run", args, 0,
           "KV cache 0.1 MiB for 4 positions");
    /* under ulimit -v 1 GB, with -c and without: the load takes no attention memory before
     * the run knows its context (it took the 4 GB the limit holds of the header's 2^20
     * positions, and failed; a sanitizer build may not start under it) */
    char command[1536], *err = NULL;
    snprintf(command, sizeof command, "ulimit -v 1000000 && %s --help", run_bin);
    if (check_run(command, NULL, NULL) != 0) {
        check_skip("run under ulimit -v does not start (a sanitizer build, or an emulator): "
                   "not checked");
    } else {
        for (int with_c = 0; with_c < 2; with_c++) {
            snprintf(command, sizeof command, "ulimit -v 1000000 && %s %s%s", run_bin, args,
                     with_c ? " -c 64" : "");
            int code = check_run(command, NULL, &err);
            check_true(code == 0 && err && strstr(err, "generation: 3 tokens"), "context field "
                       "2^20 x 1024 layers under ulimit -v 1000000%s: exit %d (want 0), %s",
                       with_c ? " with -c 64" : "", code, err ? err : "");
            free(err);
            err = NULL;
        }
        /* -I without -c: its length is unknown; 4096 positions at first (128 MB here), not
         * the 4 GB the limit holds */
        snprintf(command, sizeof command, "printf 'hi\\n' | (ulimit -v 1000000 && %s %s -I)",
                 run_bin, args);
        int code = check_run(command, NULL, &err);
        check_true(code == 0 && err && strstr(err, "KV cache 128.0 MiB for 4096 positions") &&
                   !strstr(err, "context grown"), "context field 2^20 x 1024 layers, -I under "
                   "ulimit -v 1000000: 4096 positions (exit %d): %s", code, err ? err : "");
        free(err);
        err = NULL;
        /* a line of 10,000 bytes asks for 16,384 positions (512 MB) under 400 MB: the
         * context stays at 4096, in one line on its own naming -c; then, without shifts,
         * the line does not fit and the run ends as a full context ends it */
        snprintf(command, sizeof command, "(head -c 10000 /dev/zero | tr '\\0' x; echo) | "
                 "(ulimit -v 400000 && %s %s -I --no-context-shift)", run_bin, args);
        code = check_run(command, NULL, &err);
        check_true(code == 0 && err && strstr(err, "\ngenerate: no memory to grow the context "
                   "to 16384 positions: it stays at 4096 from here (-c 4096 sets that from the "
                   "start)\n"), "-I growing past ulimit -v 400000: the context stays, one "
                   "line naming -c (exit %d): %s", code, err ? err : "");
        free(err);
        err = NULL;
    }
    /* -I past its first 4096 positions (a typed line of 5000 bytes): the state doubles to
     * the model's 8192, the 2 tokens before the line (BOS, the
     * turn's token) run again; no shift */
    const int32_t long_ctx[7] = {8, 16, 1, 2, 1, 260, 8192};
    snprintf(command, sizeof command, "(head -c 5000 /dev/zero | tr '\\0' x; echo) | %s %s -z %s "
             "-n 1 -s 1 -I", run_bin,
             write_llama("long_ctx.bin", 1, long_ctx, 2L * 8 + 8 + 260 * 8 + 64 + 32 + 32 + 64 +
                         3 * 128), llama_tok);
    int grew = check_run(command, NULL, &err);
    check_true(grew == 0 && err && strstr(err, "for 4096 positions") && strstr(err,
               "context shifts: 0 ") && strstr(err, "context grown to 8192 positions in 1 "
               "growths") && strstr(err, "ms, 2 tokens run again"),
               "-I on a context of 8192: 4096 positions, grown once to 8192 (exit %d): %s", grew,
               err ? err : "");
    free(err);
    err = NULL;
    /* 1024 heads of 2 (dim 2048) and one kv head: a position's key and value are 16 bytes,
     * its score rows 32768 (a block of 8 queries' rows, a float each, in each of 1024
     * heads); the context is cut to what the limit holds of both together
     * (floats: norms 3*2048, embedding 260*2048, wq wo 2*2048^2, wk wv 2*2*2048, w1 w2 w3
     * 3*2*2048) */
    const int32_t many_heads[7] = {2048, 2, 1, 1024, 1, 260, 1 << 20};
    long n_heads_floats = 273L * 2048 + 2L * 2048 * 2048;
    char expected[128];
    snprintf(expected, sizeof expected, "expected an integer in 2..%zu, this model's context",
             (size_t)MODEL_MAX_STATE_BYTES / (16 + 4 * 8 * 1024));
    snprintf(args, sizeof args, "%s -z %s -n 1 -c 1048576",
             write_llama("many_heads.bin", 1, many_heads, n_heads_floats), llama_tok);
    expect("1024 heads x 2^20 positions: the context limit counts the score rows", args, 2,
           expected);
    /* 64 layers of dim 128 (4 heads of 32) and 2^20 positions: a position's keys and values
     * are 64 x 2 x 128 values, its score rows 4 x 8 floats; in halves the values take half
     * the bytes and attention's scratch adds each head's keys and values as floats (4 x 2 x
     * 32), so the limit holds about twice the positions: --cache-type sets the range
     * (floats: embedding 260*128, norms 2*64*128+128, wq wk wv wo 4*64*128^2, w1 w2 w3
     * 3*64*2*128) */
    const int32_t deep[7] = {128, 2, 64, 4, 4, 260, 1 << 20};
    long deep_floats = 260L * 128 + 2L * 64 * 128 + 128 + 4L * 64 * 128 * 128 + 3L * 64 * 2 * 128;
    const char *deep_model = write_llama("deep.bin", 1, deep, deep_floats);
    for (int half = 0; half < 2; half++) {
        size_t position = half ? 64 * 2 * 128 * 2 + 4 * 8 * 4 + 4 * 2 * 32 * 4
                               : 64 * 2 * 128 * 4 + 4 * 8 * 4;
        snprintf(expected, sizeof expected, "expected an integer in 2..%zu, this model's "
                 "context", (size_t)MODEL_MAX_STATE_BYTES / position);
        snprintf(args, sizeof args, "%s -z %s -n 1 -c 1048576 --cache-type %s", deep_model,
                 llama_tok, half ? "f16" : "f32");
        expect(half ? "64 layers x 2^20 positions, f16 cache: the context limit in halves"
                    : "64 layers x 2^20 positions, f32 cache: the context limit in floats",
               args, 2, expected);
    }
    /* --eval in halves at a context only they hold: its comparison, exact attention over
     * the file's own cache of floats, cannot hold the windows, and says so (it named a
     * --ref never given, as "(null)") */
    size_t f32_positions = (size_t)MODEL_MAX_STATE_BYTES / (64 * 2 * 128 * 4 + 4 * 8 * 4);
    char eval_text[256], said[256];
    snprintf(eval_text, sizeof eval_text, "%s/deep_eval.txt", dir);
    FILE *f = fopen(eval_text, "wb");
    if (f) {
        fputs("hello there\n", f);
        fclose(f);
    }
    snprintf(said, sizeof said, "run: --eval: exact attention over an f32 KV cache, the "
             "comparison, holds fewer positions than the windows (got %zu, expected at least "
             "%zu;", f32_positions, f32_positions + 1);
    snprintf(args, sizeof args, "%s -z %s --eval %s --cache-type f16 -c %zu", deep_model,
             llama_tok, eval_text, f32_positions + 1);
    expect("--eval, f16 cache, a context the f32 comparison cannot hold: said so", args, 1,
           said);
    snprintf(args, sizeof args, "%s -z %s -n 1 --attn lsh:buckets=65536", model, tok);
    expect("lsh buckets beyond 4096", args, 2, "expected an integer in 1..4096");
    snprintf(args, sizeof args, "%s -z %s -n 1 --attn performer:m=65536", model, tok);
    expect("performer m beyond 8192", args, 2, "expected an integer in 1..8192");
    snprintf(args, sizeof args, "%s -z %s -n 1 --attn lsh:buckets=64", model, tok);
    expect("more lsh buckets than positions", args, 2, "--attn: layer 0: lsh: buckets above "
           "the context (got 64 buckets, context 16; expected at most 16");
}

/* Usage errors are one line and a hint, never the whole help; every number follows one
 * rule; bad values are quoted with control bytes escaped. */
static void test_strict_parsing(const char *model, const char *tok) {
    char args[1024];
    const char *bad[][3] = {
        {"-n +5", "-n: invalid value (got '+5'", "a leading + on an integer"},
        {"-n ' 5'", "-n: invalid value (got ' 5'", "a leading space"},
        {"-t 0x1p3", "-t: invalid value (got '0x1p3'", "a hexadecimal float"},
        {"-t inf", "-t: invalid value (got 'inf'", "inf"},
        {"-s +5", "-s: invalid value (got '+5'", "a leading + on the seed"},
        {"-n -0", "-n: invalid value (got '-0'", "a '-' on a count (no negative counts)"},
        {"-t -0", "-t: invalid value (got '-0'", "a '-' on the temperature"},
        {"--attn window:w=3,w=5", "parameter w given twice", "a key given twice"},
        {"--attn exact:tau=' 1'", "invalid value ' 1' for tau", "a space in tau"},
        {"--attn exact:tau=1.2e-38", "expected a number in [0.01, 100]",
         "a temperature small enough to overflow the scores"},
        {"--attn exact:tau=100.5", "expected a number in [0.01, 100]", "tau above 100"},
        {"--attn exact:softmax1=+1", "invalid value '+1' for softmax1", "+1 for a flag"},
        {"-n \"$(printf 'a\\033b')\"", "invalid value (got 'a\\x1bb'", "a control byte, escaped"},
        /* the range holds for the number as written, not for the float it rounds to */
        {"-t 100.0000001", "-t: invalid value (got '100.0000001'", "-t just above 100"},
        {"-p 1.00000001", "-p: invalid value (got '1.00000001'", "-p just above 1"},
        /* paths are quoted as given in every message: no control byte may reach one */
        {"-f \"$(printf 'p\\033[2J')\"", "-f: control character in a path (got 'p\\x1b[2J'",
         "an escape sequence in a prompt file's path"},
        {"--eval \"$(printf 'a\\nb')\"", "--eval: control character in a path (got 'a\\x0ab'",
         "a newline in --eval's path"},
        {"\"$(printf 'm\\tb')\"", "run: m\\x09b: unexpected extra argument",
         "a tab in a second model path, escaped"},
        {"-- -n", "-n: unexpected extra argument", "a flag after -- is an argument"},
        {"-f \"$(printf 'p\\302\\233x')\"", "-f: control character in a path (got "
         "'p\\xc2\\x9bx'", "a C1 control (U+009B, an escape on some terminals) in a path"},
        {"-f \"$(printf 'p\\302\\237x')\"", "-f: control character in a path (got "
         "'p\\xc2\\x9fx'", "U+009F, the last C1 control, in a path"},
        /* a spec's value of 64 characters (63 at most), and counts one past their ranges */
        {"--attn exact:tau=1.00000000000000000000000000000000000000000000000000000000000000",
         "exact: parameter tau has no value, or one too long (expected tau=VALUE of 1..63",
         "--attn: a value of 64 characters"},
        {"--attn lsh:rounds=65", "lsh: invalid value '65' for rounds (expected an integer in "
         "1..64", "--attn lsh:rounds=65"},
        {"--attn '0*exact;exact'", "invalid repeat count '0' (expected N*SPEC with N in 1..1,",
         "--attn with a repeat count of 0"},
        {"--attn-map /tmp/.svg", "--attn-map: invalid value (got '/tmp/.svg', expected a file "
         "name ending in .svg or .html)", "--attn-map naming only an extension"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s -z %s %s", model, tok, bad[i][0]);
        expect(bad[i][2], args, 2, bad[i][1]);
    }
    char command[1024], *err = NULL;
    /* -p with a prompt names the prompt flag on the same line; a number out of range does not */
    static const char *const flags[][2] = {{"--bogus", NULL}, {"-p ROMEO:", "the prompt is -i"},
                                           {"-p 1.5", NULL}};
    for (int i = 0; i < 3; i++) {
        snprintf(command, sizeof command, "%s %s -z %s %s", run_bin, model, tok, flags[i][0]);
        err = NULL;
        int code = check_run(command, NULL, &err);
        int lines = 0;
        for (const char *p = err; p && *p; p++) lines += *p == '\n';
        int hint = err && strstr(err, "the prompt is -i");
        check_true(code == 2 && err && strstr(err, "Try 'run --help'") &&
                   !strstr(err, "Options:") && lines == 2 && hint == (flags[i][1] != NULL),
                   "usage error (%s): one line%s and a hint to --help, not the whole help "
                   "(exit %d, %d lines)", flags[i][0], flags[i][1] ? " naming -i" : "", code,
                   lines);
        free(err);
    }
    snprintf(args, sizeof args, "%s -z %s -n 3 -t 0.5 -s 3 -T 1", model, tok);
    expect("valid numbers still parse (-t 0.5, -T 1)", args, 0, "generation: 3 tokens");
    /* the load line names the attention as its canonical spec: sinklogit kept, tau in the
     * fewest digits that read back as its float (1.000000667 is the float 1.0000007, which
     * 7 digits, 1.000001, are not), one spec for every layer without a count */
    static const char *const formats[][2] = {
        {"window:w=4,sinklogit=1", "(window:w=4,sinks=0,sinklogit=1)\n"},
        {"gauss:tau=1.000000667", "(gauss:tau=1.0000007)\n"},
        {"'10*window:w=4'", "(window:w=4,sinks=0)\n"},
        {"'9*window:w=4;exact'", "(9*window:w=4,sinks=0;exact)\n"},
        {"unscaled", "(unscaled)\n"}, {"exact:tau=0.5", "(exact:tau=0.5)\n"},
        {"softmax1", "(exact:softmax1=1)\n"},
        {"window:w=8,softmax1=1", "(window:w=8,sinks=0,softmax1=1)\n"}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char what[96];
        snprintf(args, sizeof args, "weights/model.bin -n 1 -t 0 --attn %s", formats[i][0]);
        snprintf(what, sizeof what, "--attn %s: its canonical spec on the load line",
                 formats[i][0]);
        expect(what, args, 0, formats[i][1]);
    }
    /* an exponent's sign (1e+0), a spec's value of 63 characters */
    snprintf(args, sizeof args, "%s -z %s -n 3 -t 1e+0 -s 3 --attn exact:tau=%s", model, tok,
             "1.0000000000000000000000000000000000000000000000000000000000000");
    expect("-t 1e+0 and a tau of 63 characters parse", args, 0, "generation: 3 tokens");
    expect("an escape sequence in the model's path", "\"$(printf 'm\\033[2J')\"", 2,
           "run: MODEL: control character in a path (got 'm\\x1b[2J'");
    snprintf(args, sizeof args, "-z %s -n 3 -t 100 -p 1 -s 3 -- %s", tok, model);
    expect("-t 100 and -p 1, the ranges' ends; the model after --", args, 0,
           "generation: 3 tokens");
    expect("a second -- after the first is an argument: the model's path", "-- --", 1,
           "model: --: cannot open (got \"No such file or directory\", expected a model file)");
    /* "--" ends the options (getopt's rule): a model whose name starts with '-', run from
     * its folder (RUN a command, as make valgrind's, cannot move there: not checked) */
    if (strchr(run_bin, ' ')) {
        check_skip("RUN is a command, not a program: run -- -m.bin from another folder not "
                   "checked");
        return;
    }
    snprintf(command, sizeof command, "r=$(realpath '%s') && ln -sf %s %s/-m.bin && cd %s && "
             "\"$r\" -n 2 -z %s -- -m.bin", run_bin, model, dir, dir, tok);
    err = NULL;
    int code = check_run(command, NULL, &err);
    check_true(code == 0 && err && strstr(err, "run: -m.bin: llm.c GPT-2"),
               "run -- -m.bin loads the file -m.bin (exit %d): %s", code, err ? err : "");
    free(err);
}

/* The model is broken (a NaN weight), or sampling is pushed to its limits: a clear
 * error or a valid token, never an out-of-bounds read or a token id that does not exist. */
static void test_numerical_edges(const char *model, const char *tok) {
    char args[1024], path[128];
    snprintf(path, sizeof path, "%s/nan.bin", dir);
    FILE *in = fopen(model, "rb"), *out = fopen(path, "wb");
    int c, at = 0;
    while (in && out && (c = fgetc(in)) != EOF) {   /* the first weight of wte becomes NaN */
        if (at >= 1024 && at < 1028) c = (const unsigned char[]){0x00, 0x00, 0xc0, 0x7f}[at - 1024];
        fputc(c, out);
        at++;
    }
    if (in) fclose(in);
    if (out) fclose(out);
    snprintf(args, sizeof args, "%s -z %s -n 3", path, tok);
    expect("NaN weight: generation refuses non-finite logits", args, 1,
           "non-finite logits for position 1");
    snprintf(args, sizeof args, "%s -z %s --eval %s", path, tok, path);
    expect("NaN weight: --eval refuses non-finite logits", args, 1, "non-finite logits at token");
    snprintf(args, sizeof args, "%s -z %s -n 5 -t 2e-38 -s 1", model, tok);
    expect("temperature 2e-38 (logit / T overflows): generates", args, 0, "generation: 5 tokens");
    /* top-p below 1/V keeps only the most likely token: the greedy text, at any seed; 1e-47
     * and 1e-400 (above 0, whose nearest float, and for 1e-400 double, is 0) as the
     * smallest float above 0 */
    char *greedy = NULL;
    snprintf(args, sizeof args, "%s %s -z %s -n 5 -t 0", run_bin, model, tok);
    int greedy_code = check_run(args, &greedy, NULL);
    static const char *const tiny_p[] = {"0.000001", "1e-47", "1e-400"};
    for (int i = 0; i < 3; i++) {
        char *nucleus = NULL;
        snprintf(args, sizeof args, "%s %s -z %s -n 5 -p %s -s 1", run_bin, model, tok,
                 tiny_p[i]);
        int code = check_run(args, &nucleus, NULL);
        check_true(code == 0 && greedy_code == 0 && nucleus && greedy &&
                   strcmp(nucleus, greedy) == 0, "top-p %s, below 1/V: keeps the most likely "
                   "token (the greedy text)", tiny_p[i]);
        free(nucleus);
    }
    free(greedy);
}

/* The seed the speed line printed in the file at path, or 0. */
static unsigned long long printed_seed(const char *path) {
    size_t size;
    char *err = check_read_file(path, &size);
    const char *at = err ? strstr(err, "; seed ") : NULL;
    unsigned long long seed = at ? strtoull(at + strlen("; seed "), NULL, 10) : 0;
    free(err);
    return seed;
}

/* Without -s, two runs started together choose different seeds: the seed was
 * time(NULL) | 1, the same for every run started within the same two seconds. */
static void test_default_seed(const char *model, const char *tok) {
    char command[1024], first[160], second[160];
    snprintf(first, sizeof first, "%s/seed1", dir);
    snprintf(second, sizeof second, "%s/seed2", dir);
    snprintf(command, sizeof command, "%s %s -z %s -n 1 >/dev/null 2>%s & %s %s -z %s -n 1 "
             ">/dev/null 2>%s; wait", run_bin, model, tok, first, run_bin, model, tok, second);
    check_run(command, NULL, NULL);
    unsigned long long a = printed_seed(first), b = printed_seed(second);
    check_true(a != 0 && b != 0 && a != b, "two runs started together print different seeds "
               "(%llu, %llu)", a, b);
}

static void test_generation(const char *model, const char *tok) {
    char args[1024], *out1 = NULL, *out2 = NULL, *err = NULL;
    snprintf(args, sizeof args, "%s %s -z %s -i hi -n 5 -t 0.9 -s 7", run_bin, model, tok);
    int code1 = check_run(args, &out1, &err);
    int code2 = check_run(args, &out2, NULL);
    check_true(code1 == 0 && code2 == 0 && out1 && out2 && strcmp(out1, out2) == 0 &&
               strncmp(out1, "hi", 2) == 0, "same seed twice: same text, prompt echoed");
    check_true(err && strstr(err, "generation: 5 tokens"), "speed line reports 5 generated");
    free(out1); free(out2); free(err);
    test_default_seed(model, tok);
    snprintf(args, sizeof args, "%s -z %s -i hi -n 100 -t 0 --no-context-shift", model, tok);
    /* its one line, right after the load line: no empty line before it off a terminal */
    expect("--no-context-shift stops at the context length", args, 0,
           "positions\ngenerate: context full (16 tokens); stopping\n");
    snprintf(args, sizeof args, "%s -z %s -n 3 -t 0", model, tok);
    expect("no prompt starts from end-of-text", args, 0, "prompt: 1 tokens");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 100 -t 0 --attn window:w=4,sinks=1 "
             "--no-context-shift", model, tok);
    expect("a window variant generates to the context length", args, 0,
           "context full (16 tokens)");
    /* -n's default, 256 tokens as llama2.c's (-t's and -p's: test_llama2c_generation) */
    expect("without -n, 256 tokens", "weights/model.bin -t 0", 0, "generation: 256 tokens");
}

/* -I driven through a pipe and, with script(1), through a terminal. */
static void test_interactive(const char *model, const char *tok) {
    char command[1024], *out = NULL, *err = NULL;
    int code;
    /* interactive: two lines then end of input; no earlier token is run again, so the
     * prompt tokens on the speed line are the prompt's plus each line's after the newline
     * that ends a turn, as each encodes alone (-n 0 runs report their prompt's count).
     * The model read "...abcd", the turn's last token glued to the line, while the
     * screen showed a newline between them. */
    int counts[3] = {0, 0, 0};
    const char *texts[3] = {"hi", "\nabcd\n", "\nefx\n"};
    for (int i = 0; i < 3; i++) {
        err = NULL;
        snprintf(command, sizeof command, "%s %s -z %s -i '%s' -n 0", run_bin, model, tok,
                 texts[i]);
        check_run(command, NULL, &err);
        const char *p = err ? strstr(err, "prompt: ") : NULL;
        if (p) counts[i] = atoi(p + 8);
        free(err);
    }
    err = out = NULL;
    snprintf(command, sizeof command, "printf 'abcd\\nefx\\n' | %s %s -z %s -i hi -n 3 -t 0 "
             "-I", run_bin, model, tok);
    code = check_run(command, &out, &err);
    char want[64];
    snprintf(want, sizeof want, "prompt: %d tokens", counts[0] + counts[1] + counts[2]);
    check_true(code == 0 && err && strstr(err, want) && strstr(err, "generation: 9 tokens"),
               "-I with two lines piped: 3 turns of 3 tokens, \"%s\": each line after a "
               "newline, nothing run twice", want);
    check_true(out && strstr(out, "> ") == NULL && strstr(out, "\nabcd\n") &&
               strstr(out, "\nefx\n") && err && !strstr(err, "type a line"),
               "-I from a pipe: no \"> \" prompt and no hint; each line printed after a "
               "newline, as the model reads it");
    free(out); free(err);
    /* a line with a broken UTF-8 sequence (0xC3, then 'A', not a continuation byte): the
     * held byte comes out before the 'A', the line byte for byte */
    err = out = NULL;
    snprintf(command, sizeof command, "printf 'x\\303A\\n' | %s %s -z %s -i hi -n 1 -t 0 -I",
             run_bin, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && out && strstr(out, "\nx\303A\n"), "-I: a line with a broken UTF-8 "
               "sequence printed byte for byte, in order");
    free(out); free(err);
    /* a line that does not fit the context, which may not shift: the run ends, and the
     * line, which the model never read, is not printed */
    err = out = NULL;
    snprintf(command, sizeof command, "printf 'a line much longer than the context\\n' | %s %s "
             "-z %s -i hi -n 2 -t 0 -I --no-context-shift", run_bin, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && out && !strstr(out, "longer") && err &&
               strstr(err, "context full (16 tokens)"), "-I --no-context-shift: a line that "
               "does not fit ends the run unprinted (exit %d)", code);
    free(out); free(err);
    /* standard input that cannot give lines (a folder, closed): refused before the first
     * turn, which it generated before the read failed */
    const char *stdins[2][2] = {{"< /", "a folder"}, {"<&-", "closed, or not open for reading"}};
    for (int i = 0; i < 2; i++) {
        err = out = NULL;
        snprintf(command, sizeof command, "%s %s -z %s -i hi -n 3 -t 0 -I %s", run_bin, model,
                 tok, stdins[i][0]);
        code = check_run(command, &out, &err);
        char want_err[128];
        snprintf(want_err, sizeof want_err, "run: --interactive: standard input: %s (expected "
                 "lines of text to read)\n", stdins[i][1]);
        check_true(code == 1 && out && !*out && err && !strcmp(err, want_err), "-I %s: one "
                   "line, exit 1 (got %d), nothing generated", stdins[i][0], code);
        free(out); free(err);
    }
    /* a prompt that ends with the reverse prompt ends the first turn at once, as llama.cpp's
     * match reads the prompt too (llama.cpp's chat recipe: a prompt ending "User:"): the
     * line is read before any token is generated, then one turn of 3; -r again adds another
     * (as llama.cpp's), and either ends a turn */
    const char *reverses[2] = {"-r hi", "-r hi -r zz"};
    for (int i = 0; i < 2; i++) {
        err = out = NULL;
        snprintf(command, sizeof command, "printf 'abcd\\n' | %s %s -z %s -i hi %s -n 3 -t 0 "
                 "-I", run_bin, model, tok, reverses[i]);
        code = check_run(command, &out, &err);
        check_true(code == 0 && out && strncmp(out, "hi\nabcd\n", 8) == 0 && err &&
                   strstr(err, "generation: 3 tokens"), "-I %s after the prompt hi: the line "
                   "read first, then 3 tokens (exit %d)", reverses[i], code);
        free(out); free(err);
    }
    /* a reverse prompt with a character the vocabulary spells in byte tokens (the shipped
     * tokenizer's e-acute, bytes C3 A9), which the screen does not show (a lone unprintable
     * byte, safe_printf): the prompt's text ends with it all the same, so the turn ends at
     * once, with and without -I (the match read only the shown bytes: it never fired) */
    for (int i = 0; i < 2; i++) {
        err = out = NULL;
        snprintf(command, sizeof command, "printf '' | %s weights/model.bin -i 'hi \303\251' "
                 "-r '\303\251' -n 3 -t 0%s", run_bin, i ? " -I" : "");
        code = check_run(command, &out, &err);
        check_true(code == 0 && err && strstr(err, "generation: 0 tokens"), "-r with a "
                   "character of byte tokens, after a prompt ending with it%s: no token "
                   "(exit %d)", i ? ", -I" : "", code);
        free(out); free(err);
    }
    /* without -I, a match may end up to 2 bytes before the text, as llama.cpp's (a token may
     * print a few bytes past the reverse prompt): the prompt "hi " ends the run at once,
     * while with -I the turn goes on to its 3 tokens */
    for (int i = 0; i < 2; i++) {
        err = out = NULL;
        snprintf(command, sizeof command, "printf 'abcd\\n' | %s %s -z %s -i 'hi ' -r hi -n 3 "
                 "-t 0%s", run_bin, model, tok, i ? " -I" : "");
        code = check_run(command, &out, &err);
        check_true(code == 0 && err && strstr(err, i ? "generation: 6 tokens" : "generation: 0 "
                   "tokens"), "-r hi after the prompt 'hi '%s (exit %d)", i ? " with -I: no "
                   "match, two turns of 3 tokens" : ": a match 1 byte before the end, no token",
                   code);
        free(out); free(err);
    }
    /* the same line where the context may shift: the model keeps its last tokens, and one
     * line says how many went. Worked by hand: the input is "\n" + the line's 35 bytes +
     * "\n", 37 tokens of one byte (the fixture's tokenizer has no merge for them), after
     * 4 tokens ("hi" and 2 generated); each shift of the full 16 positions drops the older 8
     * (--keep 0): 4 of the input at the first, 8 at each of the next three, 28 in all */
    err = out = NULL;
    snprintf(command, sizeof command, "printf 'a line much longer than the context\n' | %s %s "
             "-z %s -i hi -n 2 -t 0 -I", run_bin, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "generate: the context of 16 positions (0 kept "
               "at its start) shifted out 28 of the input's 37 tokens: the model holds "
               "the rest (-c sets a larger context)") && strstr(err, "prompt: 11 tokens"),
               "-I: a line longer than the context shifts its own start out, says so, and "
               "counts the 2 + 9 tokens run on the speed line (exit %d)", code);
    free(out); free(err);
    /* on a terminal (script(1) makes one), a line on stderr says how a turn works */
    if (check_run("script -qec true /dev/null", NULL, NULL) != 0) {
        check_skip("script(1) from util-linux not found: the -I hint on a terminal not checked");
        return;
    }
    out = NULL;
    snprintf(command, sizeof command, "printf '' | timeout 60 script -qec '%s %s -z %s -i hi "
             "-n 2 -t 0 -I' /dev/null", run_bin, model, tok);
    code = check_run(command, &out, NULL);
    check_true(code == 0 && out && strstr(out, "run: -I: after each turn, type a line and Enter "
               "to continue the text; end of input (Ctrl-D) to stop") && strstr(out, "\n> "),
               "-I on a terminal: the hint, and \"> \" when a line is awaited (exit %d)", code);
    free(out);
    /* typed at a terminal, the text into a file: the file holds the lines the model read
     * (the terminal's echo never reached it), the "> " marks go to the terminal (stderr) */
    char text[128];
    snprintf(text, sizeof text, "%s/typed.txt", dir);
    out = NULL;
    snprintf(command, sizeof command, "printf 'abcd\\n' | timeout 60 script -qec '%s %s -z %s "
             "-i hi -n 2 -t 0 -I > %s' /dev/null", run_bin, model, tok, text);
    code = check_run(command, &out, NULL);
    size_t n_text = 0;
    char *written = check_read_file(text, &n_text);
    check_true(code == 0 && written && strstr(written, "\nabcd\n") && !strstr(written, "> ") &&
               out && strstr(out, "\n> ") && strstr(out, "prompt: ") &&
               !strstr(out, "> prompt: "), "-I typed at a terminal with the text into a file: "
               "the file holds the line, \"> \" on the terminal only, and the speed line on a "
               "line of its own after end of input (exit %d)", code);
    free(written);
    free(out);
}

/* --keep counts prompt tokens besides the BOS a Llama prompt starts with, as llama.cpp's:
 * on a 16-position Llama fixture with the 4-token prompt BOS " " a b, no --keep and
 * --keep 0 keep the BOS alone, and --keep 3, 9 and -1 the whole prompt: equal speed lines
 * (shifts, tokens run again) in each group, and the groups unequal. */
static void test_keep_llama(const char *tok) {
    const int32_t fields[7] = {8, 16, 1, 2, 1, 260, 16};   /* as test_bad_llama_files' */
    const char *model = write_llama("keep_llama.bin", 1, fields, 24 + 260 * 8 + 64 + 32 + 32 +
                                    64 + 3 * 128);
    const char *keeps[5] = {"", "--keep 0", "--keep 3", "--keep 9", "--keep -1"};
    char lines[5][96] = {{0}};
    for (int i = 0; i < 5; i++) {
        char command[1024], *out = NULL, *err = NULL;
        snprintf(command, sizeof command, "%s %s -z %s -i ab -n 40 -t 0 %s", run_bin, model,
                 tok, keeps[i]);
        int code = check_run(command, &out, &err);
        const char *shifts = err ? strstr(err, "context shifts: ") : NULL;
        const char *end = shifts ? strstr(shifts, " ms each, ") : NULL;
        if (code == 0 && end) {   /* "context shifts: N (", then "T tokens run again" */
            snprintf(lines[i], sizeof lines[i], "%.*s%s", (int)(strchr(shifts, '(') - shifts),
                     shifts, end + 10);
            lines[i][strcspn(lines[i], ")")] = '\0';
        }
        free(out);
        free(err);
    }
    int ok = lines[0][0] && lines[2][0] && !strcmp(lines[0], lines[1]) &&
             !strcmp(lines[2], lines[3]) && !strcmp(lines[2], lines[4]) &&
             strcmp(lines[0], lines[2]) != 0;
    check_true(ok, "Llama --keep: none = 0 (the BOS: \"%s\" / \"%s\"), 3 = 9 = -1 (the prompt: "
               "\"%s\" / \"%s\" / \"%s\")", lines[0], lines[1], lines[2], lines[3], lines[4]);
}

/* Context shift, --ctx-size, prompts from standard input, interactive mode. The token
 * counts come from the speed line on stderr. */
static void test_long_generation(const char *model, const char *tok) {
    char args[1024];
    /* 16 positions: 100 tokens need shifts; each keeps the latest half of the rest */
    snprintf(args, sizeof args, "%s -z %s -i hi -n 100 -t 0", model, tok);
    expect("-n beyond the context writes exactly -n tokens", args, 0, "generation: 100 tokens");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 100 -t 0 --keep 2 -c 8", model, tok);
    expect("-c 8 --keep 2: 5 stay after each shift, 31 shifts", args, 0,
           "context shifts: 31 (");
    /* --keep past the prompt's 2 tokens keeps the prompt, as llama.cpp's; -1 likewise */
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s -z %s -i hi -n 100 -t 0 --keep %s -c 8", model, tok,
                 i ? "-1" : "5");
        expect(i ? "-c 8 --keep -1: the prompt's 2 tokens kept, 31 shifts"
                 : "-c 8 --keep 5: the prompt's 2 tokens kept, 31 shifts", args, 0,
               "context shifts: 31 (");
    }
    /* a prompt that fills the context: a shift cannot keep all of it, and says so (it was
     * cut back without a word); a run that never shifts says nothing */
    snprintf(args, sizeof args, "%s -z %s -i hi -n 5 -t 0 --keep -1 -c 2", model, tok);
    expect("-c 2 --keep -1 with a 2-token prompt: one note", args, 0, "run: note: --keep: the "
           "prompt's 2 tokens fill the context of 2, so a shift keeps 1 of them\n");
    expect("-c 2 --keep -1 with a 2-token prompt: every token written", args, 0,
           "generation: 5 tokens");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 5 -t 0 --keep -1 -c 8", model, tok);
    {
        char *quiet = NULL, line[1536];
        snprintf(line, sizeof line, "%s %s", run_bin, args);
        int code = check_run(line, NULL, &quiet);
        check_true(code == 0 && quiet && !strstr(quiet, "note"), "-c 8 --keep -1, never "
                   "shifted: no note (exit %d)", code);
        free(quiet);
    }
    for (int i = 0; i < 3; i++) {
        static const char *specs[] = {"window:w=4,sinks=1", "linear", "lsh:buckets=2,local=2"};
        snprintf(args, sizeof args, "%s -z %s -i hi -n 40 -t 0 --attn %s", model, tok, specs[i]);
        expect("a variant goes on across the context", args, 0, "generation: 40 tokens");
    }
    /* 16 positions; the prompt is 2 tokens, and 39 of the 40 generated tokens are run
     * (the last is only printed). The 15th fills the context; appending the 15th shifts
     * (keep 0: 8 stay) and so does every 8th after it: the 15th, 23rd, 31st and 39th */
    snprintf(args, sizeof args, "%s -z %s -i hi -n 40 -t 0", model, tok);
    expect("shift count on the speed line", args, 0, "context shifts: 4 (");
    snprintf(args, sizeof args, "%s -z %s -i ghijklmnopqrstuvw -n 1", model, tok);
    expect("a prompt longer than the context is refused", args, 1,
           "prompt too long for the context (got 17 tokens, expected at most 16)");
    snprintf(args, sizeof args, "%s -z %s -i ghijklmnop -n 1 -c 8", model, tok);
    expect("a prompt longer than --ctx-size is refused", args, 1,
           "prompt too long for the context (got 10 tokens, expected at most 8, the "
           "--ctx-size)");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 3 -c 8 --attn window:w=4", model, tok);
    expect("the load line reports the attention memory", args, 0,
           "attention state");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 3 -c 8", model, tok);
    expect("the load line reports the KV cache", args, 0, "KV cache 0.0 MiB for 5 positions");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 3 -c 8 --cache-type f16", model, tok);
    expect("--cache-type f16: the load line says so", args, 0,
           "KV cache (f16) 0.0 MiB for 5 positions");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 3 -c 8 --cache-type f32 --attn exact", model,
             tok);
    expect("--cache-type f32 --attn exact", args, 0, "KV cache 0.0 MiB for 5 positions");

    /* sampled text prints no control byte but whitespace (llm.c's safe_printf): the
     * shipped model at temperature 100 draws nearly any of its 1,024 tokens, among them
     * the single bytes 0x00..0x1f (ESC too), which printed as they were */
    {
        char command_t[1024], *text = NULL;
        snprintf(command_t, sizeof command_t, "%s weights/model.bin -t 100 -p 1 -n 3000 -s 7",
                 run_bin);
        int code_t = check_run(command_t, &text, NULL);
        size_t control = 0, len_t = text ? strlen(text) : 0;
        for (size_t i = 0; i < len_t; i++) {
            unsigned char b = (unsigned char)text[i];
            control += (b < 0x20 && !isspace(b)) || b == 0x7f;
        }
        check_true(code_t == 0 && len_t > 500 && control == 0, "up to 3,000 tokens at temperature "
                   "100: no control byte printed but whitespace (got %zu in %zu bytes)",
                   control, len_t);
        free(text);
    }
    /* -f -: the bytes of standard input exactly (a NUL, no trailing newline: 3 tokens);
     * the echo prints "ab", the NUL's token dropped as llm.c's safe_printf drops a byte
     * that is neither printable nor whitespace */
    char command[1024], *out = NULL, *err = NULL;
    snprintf(command, sizeof command, "printf 'a\\000b' | %s %s -z %s -f - -n 0", run_bin,
             model, tok);
    int code = check_run(command, &out, &err);
    check_true(code == 0 && out && strcmp(out, "ab\n") == 0 && err &&
               strstr(err, "prompt: 3 tokens"), "-f - reads a NUL and no newline: 3 tokens, "
               "echoed without the NUL");
    free(out); free(err);
    out = err = NULL;
    snprintf(command, sizeof command, "%s %s -z %s -f %s/missing.txt", run_bin, model, tok, dir);
    code = check_run(command, NULL, &err);
    check_true(code == 1 && err && strstr(err, "missing.txt: cannot open (got"),
               "-f with a missing file names it, exit 1");
    free(err);
    test_interactive(model, tok);
}

/* Counts the occurrences of needle in text. */
static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* The map after context shifts: 16 positions, prompt "hi" (2 tokens), 40 generated, 4
 * shifts. With --keep 0 the prompt is gone, yet the map drew the first two tokens as the
 * prompt (it took min(tokens, input tokens)); with --keep 2 both stay. A line of -I input
 * after generated tokens was counted as prompt too. The caption says the context shifted. */
static void map_after_shifts(const char *model, const char *tok) {
    static const struct { const char *flags, *file, *want[2], *what; } cases[] = {
        {"-n 40 --keep 0", "shift.svg", {"9 tokens: 0 prompt, 9 generated; the context shifted "
         "4 times: the run's latest 9 tokens</tspan>", NULL}, "--keep 0: no prompt token left"},
        {"-n 40 --keep 2", "shift_keep.svg", {"13 tokens: 2 prompt, 11 generated; the context "
         "shifted 4 times: the first 2 tokens kept, then the latest 11</tspan>", NULL},
         "--keep 2: the prompt stays"},
        {"-n 40 --keep 0", "shift.html", {"\"n_prompt\": 0,", "generated</span>. The context "
         "shifted 4 times: the run's latest 9 tokens. "}, "the page: no prompt token, a note"},
        /* 2 + 2 generated + the turn's last + "\nabcd\n" (4) + 2 generated */
        {"-n 3 -I", "interactive.svg", {"11 tokens: 2 prompt, 9 generated</tspan>", NULL},
         "-I: the line after generated tokens is not prompt"},
        {"-n 3", "no_shift.svg", {"4 tokens: 2 prompt, 2 generated</tspan>", NULL},
         "no shift: no note"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char command[1024], path[160];
        snprintf(path, sizeof path, "%s/%s", dir, cases[c].file);
        snprintf(command, sizeof command, "printf 'abcd\\n' | %s %s -z %s -i hi -t 0 %s "
                 "--attn-map %s", run_bin, model, tok, cases[c].flags, path);
        int code = check_run(command, NULL, NULL);
        size_t len = 0;
        char *map = check_read_file(path, &len);
        int ok = code == 0 && map;
        for (int k = 0; k < 2 && ok; k++) ok = !cases[c].want[k] || strstr(map, cases[c].want[k]);
        check_true(ok, "--attn-map after context shifts, %s: has \"%s\"%s%s%s", cases[c].what,
                   cases[c].want[0], cases[c].want[1] ? " and \"" : "",
                   cases[c].want[1] ? cases[c].want[1] : "", cases[c].want[1] ? "\"" : "");
        free(map);
    }
}

/* Each --attn parameter at the top of the range the help gives (1..1048576, LSH's buckets
 * 1..4096 and rounds 1..64, Performer's m 1..8192) runs: the parser and the attention's
 * own check agree on where the ranges end. A model of 4,096 positions, for LSH's buckets
 * (at most the context). */
static void test_attention_limits(const char *tok) {
    const char *model = write_model("wide_ctx.bin", 20240326, 3, 4096, V, L, NH, C, VP, 0);
    static const char *const specs[] = {
        "lsh:buckets=4096,rounds=64,local=1048576,sinks=1048576", "performer:m=8192",
        "window:w=1048576,sinks=1048576", "dilated:w=1048576,k=1048576,sinks=1048576",
        "fixed:l=1048576,c=1048576", "strided:l=1048576"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char args[512], what[160];
        snprintf(args, sizeof args, "%s -z %s -n 1 -t 0 --attn %s", model, tok, specs[i]);
        snprintf(what, sizeof what, "--attn %s (each at its range's end)", specs[i]);
        expect(what, args, 0, "generation: 1 tokens");
    }
}

/* --attn-map and --attn-top through ./run: the cells of the picture, what masked means,
 * where the file goes. The fixture has 1 layer of 2 heads; prompt "hi" (2 tokens) and
 * -n 5 run 6 tokens (the last generated one is printed, never run). */
static void test_attention_views(const char *model, const char *tok) {
    char args[1024], path[128];
    snprintf(path, sizeof path, "%s/map.svg", dir);
    const char *specs[2] = {"exact", "window:w=2"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s %s -z %s -i hi -n 5 -t 0 --attn %s --attn-map %s",
                 run_bin, model, tok, specs[i], path);
        int code = check_run(args, NULL, NULL);
        size_t len = 0;
        char *svg = check_read_file(path, &len);
        /* 6 tokens: 21 (query, key <= query) cells per head; the window of 2 shows
         * 1 + 2 * 5 = 11 of them per head and masks the other 10 */
        int cells = svg ? count_of(svg, "class=\"c\"") : -1;
        int masked = svg ? count_of(svg, "class=\"m\"") : -1;
        int want_masked = i == 0 ? 0 : 20;
        double sum = 0.0;
        for (const char *p = svg; p && (p = strstr(p, "data-w=\"")) != NULL; p += 8)
            sum += atof(p + 8);
        check_true(code == 0 && cells + masked == 42 && masked == want_masked &&
                   sum > 12.0 - 0.01 && sum < 12.0 + 0.01, "--attn %s --attn-map: 42 cells, "
                   "%d masked (got %d cells, %d masked), weights sum to 1 per row (12 rows: "
                   "got %.4f)", specs[i], want_masked, cells, masked, sum);
        free(svg);
    }
    map_after_shifts(model, tok);
    snprintf(args, sizeof args, "%s -z %s -i hi -n 2 --attn-map %s/no/such/dir/m.svg", model,
             tok, dir);
    expect("--attn-map into a missing folder", args, 1,
           "cannot write the attention map there");
    /* a user's file at the map's path is kept (it was replaced without a word); a map run
     * wrote is written over, as the SVG and the page alike */
    for (int html = 0; html < 2; html++) {
        const char *ext = html ? "html" : "svg";
        char command[600];
        snprintf(command, sizeof command, "printf '<p>notes</p>' > %s/user.%s", dir, ext);
        if (check_run(command, NULL, NULL) != 0) continue;
        snprintf(args, sizeof args, "%s -z %s -i hi -n 2 --attn-map %s/user.%s", model, tok,
                 dir, ext);
        expect(html ? "--attn-map naming a user's .html file" : "--attn-map naming a user's "
               ".svg file", args, 1, "exists and is not an attention map run wrote (got a file "
               "without its signature line, expected a new path or such a map; remove or "
               "rename the file to replace it)");
        snprintf(command, sizeof command, "test \"$(cat %s/user.%s)\" = '<p>notes</p>'", dir,
                 ext);
        check_true(check_run(command, NULL, NULL) == 0, "--attn-map naming a user's .%s file: "
                   "the file is as it was", ext);
        /* greedy: a sampled run may draw the end token first, and map 2 tokens */
        snprintf(args, sizeof args, "%s -z %s -i hi -n 2 -t 0 --attn-map %s/own.%s", model, tok,
                 dir, ext);
        char written[512];
        snprintf(written, sizeof written, "%s/own.%s: attention of ", dir, ext);
        expect(html ? "--attn-map: a new .html map" : "--attn-map: a new .svg map", args, 0,
               written);
        expect(html ? "--attn-map: a .html map written over" : "--attn-map: a .svg map "
               "written over", args, 0, written);
    }
    /* a map named for an input (a link to the model) crashed with SIGBUS and left the model
     * empty; now refused before the model is read */
    char link[256], command[1024];
    snprintf(link, sizeof link, "%s/model_link.svg", dir);
    snprintf(command, sizeof command, "ln -sf %s %s && cp %s %s/model_copy.bin", model, link,
             model, dir);
    if (check_run(command, NULL, NULL) == 0) {
        snprintf(args, sizeof args, "%s -z %s -i hi -n 2 --attn-map %s", model, tok, link);
        expect("--attn-map naming the model", args, 1, "is the input");
        snprintf(command, sizeof command, "printf keep > %s/notes.svg && ln -sf %s/notes.svg "
                 "%s/map_link.svg", dir, dir, dir);
        if (check_run(command, NULL, NULL) == 0) {
            snprintf(args, sizeof args, "%s -z %s -i hi -n 2 --attn-map %s/map_link.svg", model,
                     tok, dir);
            expect("--attn-map a link to another file", args, 1, "map_link.svg: a symbolic link");
            snprintf(command, sizeof command, "test -L %s/map_link.svg && test \"$(cat "
                     "%s/notes.svg)\" = keep", dir, dir);
            check_true(check_run(command, NULL, NULL) == 0, "--attn-map a link: the link and its "
                       "target are as they were");
        }
        snprintf(command, sizeof command, "cmp -s %s %s/model_copy.bin", model, dir);
        check_true(check_run(command, NULL, NULL) == 0, "--attn-map naming the model: the "
                   "model is untouched");
    }
    /* a map has a bound of its own, like the KV cache: at most 2^26 weights drawn or held
     * (a long generation's map grew as T^2 until the OOM killer came; measured with 4 x 4
     * heads: 278 MB at 4,000 tokens). Here 1 layer x 2 heads: at most 5,792 tokens. A
     * refused map leaves no file (a failed one left an empty file). */
    const char *long_model = write_model("long.bin", 20240326, 3, 8192, V, L, NH, C, VP, 0);
    snprintf(args, sizeof args, "%s -z %s -i hi -n 6000 --attn-map %s/none.svg", long_model,
             tok, dir);
    expect("--attn-map over 6,001 tokens", args, 2, "--attn-map: too large for up to 6001 "
           "tokens (got '");
    /* the last of 2 + 5,792 tokens is never run: 5,793 rows, one too many (it counted the
     * last, and refused 2 + 5,791 tokens, whose 5,792 rows fit) */
    snprintf(args, sizeof args, "%s -z %s -i hi -n 5792 --attn-map %s/none.svg", long_model,
             tok, dir);
    expect("--attn-map over 2 + 5,792 tokens: 5,793 rows", args, 2, "--attn-map: too large "
           "for up to 5793 tokens (got '");
    snprintf(args, sizeof args, "%s -z %s -i hi -n 6000 --attn-map %s/none.svg --head 1",
             long_model, tok, dir);
    expect("--attn-map --head 1 over 6,001 tokens (both heads are held)", args, 2,
           "expected at most 5792 tokens with this model (a map holds at most 67108864 "
           "weights)");
    snprintf(command, sizeof command, "ls -a %s | grep -q -e none.svg -e '\\.tmp-'", dir);
    check_true(check_run(command, NULL, NULL) != 0, "a refused --attn-map leaves no file");
    char *out = NULL;
    snprintf(args, sizeof args, "%s %s -z %s -i hi -n 3 -t 0 --attn-top 2 --attn window:w=1",
             run_bin, model, tok);
    int code = check_run(args, &out, NULL);
    /* a window of 1 sees only the query itself: one key, weight 1, per head */
    check_true(code == 0 && out && count_of(out, "L0 H0: ") == 3 && count_of(out, "L0 H1: ") == 3
               && count_of(out, " 1.000") == 6 && !strstr(out, "0.000"),
               "--attn-top 2 with a window of 1: per token and head, only the query itself, "
               "weight 1");
    free(out);
    /* -c 4, -n 5 after a prompt of two tokens ("h", "i"): the 1st to 3rd tokens chosen
     * after reading positions 1, 2, 3; the 3rd joins a full context, whose shift (keep 0:
     * 2 of 4 dropped) leaves 3 tokens, so the 4th is chosen after reading position 2 and
     * the 5th after 3 (the last: never placed, no second shift). No line says where a
     * token goes */
    out = NULL;
    snprintf(args, sizeof args, "%s %s -z %s -i hi -n 5 -t 0 -c 4 --attn-top 1", run_bin,
             model, tok);
    char *err = NULL;
    code = check_run(args, &out, &err);
    check_true(code == 0 && out && count_of(out, ", chosen after reading position ") == 5 &&
               count_of(out, " position 1:") == 1 && count_of(out, " position 2:") == 2 &&
               count_of(out, " position 3:") == 2 &&
               !strstr(out, " at position") && err && strstr(err, "context shifts: 1 ("),
               "--attn-top -c 4: the 5 tokens chosen after reading positions 1, 2, 3, then "
               "after the one shift 2 and 3; none said to be past the context");
    free(out);
    free(err);
}

/* --eval with a window prints the loss and the comparison with exact; variants given
 * without parameters run with their defaults, named in the report. */
static void eval_variants(const char *model, const char *tok, const char *text) {
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "%s %s -z %s --eval %s -c 8 --attn window:w=3", run_bin, model,
             tok, text);
    int code = check_run(args, &out, NULL);
    check_true(code == 0 && out && strstr(out, "attention: window:w=3,sinks=0") &&
               strstr(out, "bits/char") && strstr(out, "top-1 agreement"),
               "--eval with a window prints loss, bits/char and the comparison with exact");
    free(out);
    const char *defaults[][2] = {{"fixed", "attention: fixed:l=128,c=32"},
                                 {"lsh", "attention: lsh:buckets=16,rounds=4,local=64,sinks=4,"},
                                 {"window:sinks=2", "attention: window:w=128,sinks=2"},
                                 {"performer", "attention: performer:m=256,orf=1,seed=1"}};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "%s %s -z %s --eval %s -c 8 --attn %s", run_bin, model,
                 tok, text, defaults[i][0]);
        out = NULL;
        code = check_run(args, &out, NULL);
        check_true(code == 0 && out && strstr(out, defaults[i][1]), "--attn %s runs with its "
                   "defaults (%s)", defaults[i][0], defaults[i][1]);
        free(out);
    }
}

/* --eval reports the windows it scored: with N = k x ctx + 1 tokens, k whole windows and
 * the last token alone in none (it was reported as "k windows of ctx (the last 1
 * tokens)"); with ctx - 1, a shorter last window. */
static void eval_window_counts(const char *model, const char *tok, const char *text) {
    char args[1024], *out = NULL;
    snprintf(args, sizeof args, "%s %s -z %s --eval %s -c 2", run_bin, model, tok, text);
    long n_ids = 0;
    const char *at = check_run(args, &out, NULL) == 0 && out ? strstr(out, " bytes, ") : NULL;
    if (at) n_ids = strtol(at + strlen(" bytes, "), NULL, 10);
    free(out);
    int ctx = 0;
    for (int c = MAX_T; c >= 3 && !ctx; c--) if (n_ids > c && (n_ids - 1) % c == 0) ctx = c;
    if (!check_true(ctx > 0, "--eval: a window length that leaves one token over (%ld tokens)",
                    n_ids))
        return;
    char want[160];
    for (int shorter = 0; shorter < 2; shorter++) {
        int c = ctx - shorter, last = (int)(n_ids % c);
        if (shorter && last < 2) break;   /* ctx - 1 must leave a window of 2 or more */
        snprintf(args, sizeof args, "%s %s -z %s --eval %s -c %d", run_bin, model, tok,
                 text, c);
        if (!shorter)
            snprintf(want, sizeof want, "%ld tokens, %ld windows of %d, the last token "
                     "alone in no window, %ld tokens predicted", n_ids, (n_ids - 1) / c, c,
                     (n_ids - 1) / c * (c - 1));
        else
            snprintf(want, sizeof want, "%ld tokens, %ld windows of %d (the last %d tokens), "
                     "%ld tokens predicted", n_ids, n_ids / c + 1, c, last,
                     n_ids / c * (c - 1) + last - 1);
        out = NULL;
        int rc = check_run(args, &out, NULL);
        check_true(rc == 0 && out && strstr(out, want), "--eval reports the windows it "
                   "scored: \"%s\"%s%s", want, out && !strstr(out, want) ? "; got " : "",
                   out && !strstr(out, want) ? out : "");
        free(out);
    }
}

/* The files run reads after the model (-z, -f, --eval, --ref) are opened before it loads,
 * as llama.cpp opens them while it parses its arguments: a missing one is said at once, the
 * only line on standard error (a missing --eval or --ref file was said after the model's
 * line, seconds later for a large model). */
static void missing_before_load(const char *model, const char *tok, const char *text) {
    char args[4][1024];
    snprintf(args[0], sizeof args[0], "%s -z %s/none.bin -n 1", model, dir);
    snprintf(args[1], sizeof args[1], "%s -z %s -f %s/none.txt -n 1", model, tok, dir);
    snprintf(args[2], sizeof args[2], "%s -z %s --eval %s/none.txt", model, tok, dir);
    snprintf(args[3], sizeof args[3], "%s -z %s --eval %s --ref %s/none.bin", model, tok, text,
             dir);
    const char *want[4] = {"none.bin: cannot open (got \"No such file or directory\", "
                           "expected a tokenizer file)\n",
                           "none.txt: cannot open (got \"No such file or directory\", "
                           "expected a prompt file)\n",
                           "none.txt: cannot open (got \"No such file or directory\", "
                           "expected an eval file)\n",
                           "none.bin: cannot open (got \"No such file or directory\", "
                           "expected a model file)\n"};
    for (int i = 0; i < 4; i++) {
        char command[4096 + 1100];
        snprintf(command, sizeof command, "timeout 120 %s %s", run_bin, args[i]);
        char *out = NULL, *err = NULL;
        int code = check_run(command, &out, &err);
        const char *at = err ? strstr(err, want[i]) : NULL;
        int one_line = at && strchr(err, '\n') == at + strlen(want[i]) - 1;
        check_true(code == 1 && one_line, "a missing %s file: exit %d (want 1), said before "
                   "the model loads, the only line: %s", i == 0 ? "-z" : i == 1 ? "-f"
                   : i == 2 ? "--eval" : "--ref", code, err ? err : "(none)");
        free(out);
        free(err);
    }
}

/* --eval's failures, each one line: a window beyond the model's context, a missing file,
 * a full disk (and generation's), a --ref of the other family or of a shorter context
 * (which -c then fits). */
static void eval_failures(const char *model, const char *tok, const char *text) {
    char args[1024];
    snprintf(args, sizeof args, "%s -z %s --eval %s --ctx-size 17", model, tok, text);
    expect("--ctx-size beyond the model's context", args, 2,
           "--ctx-size: invalid value (got '17', expected an integer in 2..16, this model's "
           "context)");
    snprintf(args, sizeof args, "%s -z %s --eval %s/none.txt", model, tok, dir);
    expect("--eval missing file", args, 1, "none.txt: cannot open (got \"No such file or "
           "directory\", expected an eval file)");
    snprintf(args, sizeof args, "%s -z %s --eval %s -c 8 >/dev/full", model, tok, text);
    expect("--eval into a full disk", args, 1, "standard output: write error");
    snprintf(args, sizeof args, "%s -z %s -n 4 -i hi >/dev/full", model, tok);
    expect("generation into a full disk", args, 1, "standard output: write error");
    /* a reference of the other family with the same vocabulary was compared token id by
     * token id, though the ids mean other text */
    const int32_t llama260[7] = {8, 16, 1, 2, 1, 260, 16};
    const char *llama_ref = write_llama("ref_llama.bin", 1, llama260,
                                        24 + 260 * 8 + 64 + 32 + 32 + 64 + 3 * 128);
    snprintf(args, sizeof args, "%s -z %s --eval %s --ref %s", model, tok, text, llama_ref);
    expect("--ref of the other family", args, 1, "a model of the other family (got Llama, "
           "expected GPT-2 like the model");
    /* a reference of context 8 against windows of the model's 16: one line before any
     * work; with -c 8 the two fit */
    const char *short_ref = write_model("ref8.bin", 20240326, 3, 8, V, L, NH, C, VP, 0);
    snprintf(args, sizeof args, "%s -z %s --eval %s --ref %s", model, tok, text, short_ref);
    expect("--ref with a shorter context", args, 1, "context shorter than the windows (got 8, "
           "expected at least 16; -c sets the window)");
    snprintf(args, sizeof args, "%s -z %s --eval %s --ref %s -c 8", model, tok, text, short_ref);
    expect("--ref with a shorter context, -c 8 (memory for 8 positions)", args, 0,
           "KV cache 0.0 MiB for 8 positions");
}

/* --eval: loss on a text file, against exact attention. */
/* --ref with a tokenizer beside it that spells an id otherwise than the model's (beside
 * it too): refused (a model of the same shape and vocabulary size, whose ids mean other
 * text, was compared, exit 0); with -z, which says nothing of --ref's, it runs. */
static void eval_ref_tokenizer(const char *model, const char *tok, const char *text) {
    char command[2048], args[1024];
    snprintf(command, sizeof command, "mkdir -p %s/ra %s/rb && cp %s %s/ra/m.bin && cp %s "
             "%s/rb/m.bin && cp %s %s/ra/tokenizer.bin && cp %s %s/rb/tokenizer.bin", dir, dir,
             model, dir, model, dir, tok, dir, tok, dir);
    if (!check_true(check_run(command, NULL, NULL) == 0, "--ref tokenizer: copies")) return;
    char path[256];
    snprintf(path, sizeof path, "%s/rb/tokenizer.bin", dir);
    FILE *f = fopen(path, "r+b");   /* token 256 "ab" becomes "ba" (after its length byte) */
    int ok = f && fseek(f, 1024 + 2 * 256 + 1, SEEK_SET) == 0 && fputs("ba", f) >= 0;
    if (f) fclose(f);
    if (!check_true(ok, "--ref tokenizer: rb's tokenizer changed")) return;
    snprintf(args, sizeof args, "%s/ra/m.bin --eval %s --ref %s/rb/m.bin", dir, text, dir);
    expect("--eval --ref of a model whose tokenizer spells 256 otherwise", args, 1,
           "rb/tokenizer.bin) spells token 256 otherwise than the model's");
    snprintf(args, sizeof args, "%s/ra/m.bin --eval %s --ref %s/ra/m.bin", dir, text, dir);
    expect("--eval --ref of a model with the same tokenizer", args, 0, "");
    snprintf(args, sizeof args, "%s/ra/m.bin -z %s --eval %s --ref %s/rb/m.bin", dir, tok, text,
             dir);
    expect("--eval -z --ref: --ref's tokenizer not compared", args, 0, "");
    /* BOS and EOS spelled as a GGUF file spells them ("<s>", llama2.c "\n<s>\n"): no text
     * encodes to them, so the two tokenizers agree (an int8 file quantized from a GGUF,
     * run with llama2.c's tokenizer.bin, against that GGUF was refused) */
    static const int32_t tiny[7] = {8, 16, 1, 2, 1, 260, 16};
    const char *llama = write_llama("ref_llama.bin", 1, tiny, 2L * 8 + 8 + 260 * 8 + 64 + 32 +
                                    32 + 64 + 3 * 128);
    snprintf(command, sizeof command, "mkdir -p %s/la %s/lb && cp %s %s/la/m.bin && cp %s "
             "%s/lb/m.bin", dir, dir, llama, dir, llama, dir);
    if (!check_true(check_run(command, NULL, NULL) == 0, "--ref Llama tokenizer: copies")) return;
    snprintf(path, sizeof path, "%s/la/tokenizer.bin", dir);
    write_llama_tokenizer_at(path, "\n<s>\n", "\n</s>\n");
    snprintf(path, sizeof path, "%s/lb/tokenizer.bin", dir);
    write_llama_tokenizer_at(path, "<s>", "</s>");
    snprintf(args, sizeof args, "%s/la/m.bin --eval %s --ref %s/lb/m.bin", dir, text, dir);
    expect("--eval --ref whose tokenizer spells only BOS and EOS otherwise", args, 0,
           "la/m.bin: llama2.c checkpoint version 1");
    write_llama_tokenizer_at(path, "<s>", "\n</s>\n");
    f = fopen(path, "r+b");   /* and then token 3, "<0x00>", as "<0x01>": after max_len, */
    /* "<unk>", "<s>", "\n</s>\n" (a score, a length, the bytes each), 3's score, length, "<0x0" */
    ok = f && fseek(f, 4 + (8 + 5) + (8 + 3) + (8 + 6) + 8 + 4, SEEK_SET) == 0 &&
         fputs("1", f) >= 0;
    if (f) fclose(f);
    if (!check_true(ok, "--ref Llama tokenizer: lb's token 3 changed")) return;
    expect("--eval --ref whose Llama tokenizer spells a byte token otherwise", args, 1,
           "spells token 3 otherwise");
}

/* --eval with a Llama vocabulary (s260k and tok512 of llama2.c), on a text that fits one
 * window: the bytes predicted are the text's own 42 (a token after BOS drops its dummy
 * space, as decoding with the previous token does), and bits/char is the loss in bits
 * over them: loss x tokens / (42 ln 2), perplexity exp(loss). With llama2.c's 32000-token
 * tokenizer, "In" encodes as BOS and " In", id 512: one past s260k's vocabulary, refused. */
static void eval_llama(void) {
    const char *model = check_data_file("llama2c/s260k.bin");
    const char *tok = check_data_file("llama2c/tok512.bin");
    const char *big_tok = check_data_file("llama2c/tokenizer.bin");
    if (!model || !tok || !big_tok) {
        check_skip("llama2c/s260k.bin, tok512.bin or tokenizer.bin not found: --eval with a "
                   "Llama vocabulary not checked");
        return;
    }
    static const char text[] = "Once upon a time, there was a little girl.";
    char text_path[160], args[1024], *out = NULL;
    snprintf(text_path, sizeof text_path, "%s/eval_llama.txt", dir);
    FILE *f = fopen(text_path, "wb");
    int written = f && fputs(text, f) >= 0;
    if (f) written = fclose(f) == 0 && written;
    if (!check_true(written, "--eval Llama: text written")) return;
    snprintf(args, sizeof args, "%s %s -z %s --eval %s", run_bin, model, tok, text_path);
    int code = check_run(args, &out, NULL);
    long tokens = 0, bytes = 0;
    double nats = (double)NAN, bits = (double)NAN;
    const char *at = out ? strstr(out, " tokens predicted (") : NULL;
    while (at && at > out && at[-1] >= '0' && at[-1] <= '9') at--;
    if (at && sscanf(at, "%ld tokens predicted (%ld bytes)", &tokens, &bytes) != 2) tokens = 0;
    at = out ? strstr(out, "loss: ") : NULL;
    double perplexity = (double)NAN;
    if (at && sscanf(at, "loss: %lf nats/token, %lf bits/char, perplexity %lf", &nats, &bits,
                     &perplexity) != 3)
        bits = (double)NAN;
    double want_bits = nats * (double)tokens / (log(2.0) * (double)(sizeof text - 1));
    check_true(code == 0 && tokens > 1 && bytes == (long)sizeof text - 1,
               "--eval with a Llama vocabulary: the text's %zu bytes predicted (exit %d, got "
               "%ld bytes over %ld tokens)", sizeof text - 1, code, bytes, tokens);
    check_true(fabs(bits - want_bits) <= 1e-5 * want_bits, "--eval: bits/char is the loss "
               "in bits per byte (got %.6f, want %.6f)", bits, want_bits);
    check_true(fabs(perplexity - exp(nats)) <= 1e-5 * exp(nats), "--eval: perplexity is "
               "exp(loss) (got %.4f, want %.4f)", perplexity, exp(nats));
    free(out);
    f = fopen(text_path, "wb");
    written = f && fputs("In", f) >= 0;
    if (f) written = fclose(f) == 0 && written;
    snprintf(args, sizeof args, "%s -z %s --eval %s", model, big_tok, text_path);
    if (written)
        expect("--eval: a text with an id past the model's vocabulary", args, 1, "eval_llama.txt: "
               "token id out of range for the model (got 512 at position 1, expected 0..511)");
    remove(text_path);
}

static void test_eval(const char *model, const char *tok) {
    char text[128];
    snprintf(text, sizeof text, "%s/eval.txt", dir);
    FILE *f = fopen(text, "wb");
    if (f) {
        fputs("abcdefabcdef hello there, abcdef cdab efef abab cdcd hi hi hi!\n", f);
        fclose(f);
    }
    eval_variants(model, tok, text);
    eval_window_counts(model, tok, text);
    eval_failures(model, tok, text);
    missing_before_load(model, tok, text);
    eval_ref_tokenizer(model, tok, text);
    eval_llama();
}

/* llama2.c's generations (../shared/testdata/llama2c/generation.json: stdout of its run
 * for each command) reproduced byte for byte. llama2.c's -n counts the prompt tokens
 * including BOS minus one (its loop feeds positions 0..n-1), so its -n 64 with a
 * 5-token prompt generates 60 tokens: -n here is 64 - prompt tokens + 1. */
static void test_llama2c_generation(void) {
    static const struct {
        const char *file, *args, *note;
    } cases[] = {
        {"greedy_s15m.txt", "s15m.bin -z $D/tokenizer.bin -t 0 -n 60 -i 'Once upon a time'", ""},
        {"greedy_s260k_tok512.txt",
         "s260k.bin -z $D/tok512.bin -t 0 -n 47 -i 'Once upon a time'", ""},
        {"greedy_s260k_noprompt.txt", "s260k.bin -z $D/tokenizer.bin -t 0 -n 64", ""},
        {"sample_s260k_tok512_t1_p0.9.txt",
         "s260k.bin -z $D/tok512.bin -t 1 -p 0.9 -s 42 -n 47 -i 'Once upon a time'", ""},
        {"sample_s260k_tok512_t1_p1.txt",
         "s260k.bin -z $D/tok512.bin -t 1 -p 1 -s 42 -n 47 -i 'Once upon a time'", ""},
        {"sample_s260k_tok512_t1_p0.9.txt", "s260k.bin -z $D/tok512.bin -s 42 -n 47 -i "
         "'Once upon a time'", " without -t and -p: their defaults are llama2.c's, 1 and 0.9"},
        {"greedy_s260k_tok512.txt", "s260k.bin -z $D/tok512.bin -k 1 -s 42 -n 47 -i "
         "'Once upon a time'", " with -k 1 at -t 1 (top-k 1 keeps the greedy token alone)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char command[1024], path[512], model[64], *out = NULL;
        /* the model file is the first word of args: s260k in tests/data, s15m in ../shared */
        snprintf(model, sizeof model, "llama2c/%.*s", (int)strcspn(cases[i].args, " "),
                 cases[i].args);
        char rel[96];
        snprintf(rel, sizeof rel, "llama2c/%s", cases[i].file);
        const char *model_path = check_data_file(model), *want_path = check_data_file(rel);
        if (!model_path || !want_path) {
            char reason[160];
            snprintf(reason, sizeof reason, "%s not found: %s not compared", model,
                     cases[i].file);
            check_skip(reason);
            continue;
        }
        /* $D: the folder holding the model, whose tokenizers sit beside it */
        snprintf(command, sizeof command, "D=%.*s; %s $D/%s", (int)(strrchr(model_path, '/') -
                 model_path), model_path, run_bin, cases[i].args);
        snprintf(path, sizeof path, "%s", want_path);
        size_t want_len;
        char *want = check_read_file(path, &want_len);
        int code = check_run(command, &out, NULL);
        check_true(code == 0 && want && out && strlen(out) == want_len &&
                   memcmp(out, want, want_len) == 0, "llama2.c output %s reproduced byte for "
                   "byte%s", cases[i].file, cases[i].note);
        free(want);
        free(out);
    }
    /* llama2.c's 32000-token tokenizer with s260k (vocab 512), whose encoding of the prompt
     * has ids past 511: one line, naming both sizes (the note that only 512 are used came
     * first, a second line) */
    const char *model = check_data_file("llama2c/s260k.bin");
    const char *big_tok = check_data_file("llama2c/tokenizer.bin");
    if (!model || !big_tok) {
        check_skip("llama2c/s260k.bin or tokenizer.bin not found: a larger tokenizer's "
                   "prompt not checked");
        return;
    }
    char command[1024], *err = NULL;
    snprintf(command, sizeof command, "%s %s -z %s -n 4 -i 'Once upon'", run_bin, model, big_tok);
    int code = check_run(command, NULL, &err);
    check_true(code == 1 && err && strchr(err, '\n') == err + strlen(err) - 1 &&
               strstr(err, "prompt token id out of range for the model (got 9038 at position 1, "
                      "expected 0..511: the tokenizer has 32000 tokens, the model 512)"),
               "a prompt past a smaller model's vocabulary: exit %d (want 1), one line naming "
               "both sizes: %s", code, err ? err : "");
    free(err);
    /* the same in a line of -I (the prompt "a" inside the model's vocabulary): exit 1, the
     * last stderr line the refusal naming the model's range */
    snprintf(command, sizeof command, "printf 'Once upon\\n' | %s %s -z %s -i a -n 4 -t 0 -I",
             run_bin, model, big_tok);
    err = NULL;
    code = check_run(command, NULL, &err);
    const char *last = err ? err + strlen(err) : NULL;
    while (last && last > err && last[-1] == '\n') last--;
    while (last && last > err && last[-1] != '\n') last--;
    check_true(code == 1 && last && strstr(last, "generate: input token id out of range for "
               "the model (got ") == last && strstr(last, ", expected 0..511)\n"),
               "-I, a line past a smaller model's vocabulary: exit %d (want 1), its last line "
               "the refusal: %s", code, last ? last : "");
    free(err);
}

/* -I with a Llama model: a line continues the text without BOS or the dummy-prefix space,
 * so the model reads exactly what the screen shows. tok512 spells "Once" as BOS, " ", O,
 * n, c, e (6 ids: llama2.c's encode) and "\nhi\n" as its four bytes: 10 prompt tokens,
 * where a space before the newline would make 11. */
static void test_llama_interactive(void) {
    const char *model = check_data_file("llama2c/s260k.bin");
    const char *tok = check_data_file("llama2c/tok512.bin");
    if (!model || !tok) {
        check_skip("llama2c/s260k.bin or tok512.bin not found: Llama -I not checked");
        return;
    }
    char command[1024], *out = NULL, *err = NULL;
    snprintf(command, sizeof command, "printf 'hi\\n' | %s %s -z %s -i Once -n 2 -t 0 -I",
             run_bin, model, tok);
    int code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "prompt: 10 tokens") && out &&
               strstr(out, "\nhi\n") && !strstr(out, " \nhi"),
               "-I with a Llama model: the line after a newline, no BOS and no space before "
               "it (10 prompt tokens, exit %d)", code);
    free(out); free(err);
}

/* Bytes in the file at path, or -1. */
static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (f) fclose(f);
    return size;
}

/* quantize of llama2.c's s15m.bin with its defaults (groups of 32): the int8
 * file llama2.c's export (version 2, torch.round: halves to even) wrote, byte for byte. */
static void test_quantize_llama2c(void) {
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    const char *model = check_data_file("llama2c/s15m.bin");
    const char *want = check_data_file("llama2c/s15m_q80.bin");
    if (!model || !want) {
        check_skip("llama2c/s15m.bin or s15m_q80.bin not found: quantize against llama2.c's "
                   "export not checked");
        return;
    }
    char out[256], command[1024];
    snprintf(out, sizeof out, "%s/s15m_q80.bin", dir);
    snprintf(command, sizeof command, "%s %s %s", quantize, model, out);
    int code = check_run(command, NULL, NULL);
    check_true(code == 0 && check_same_bytes(out, want), "quantize s15m.bin: llama2.c's "
               "s15m_q80.bin byte for byte (exit %d)", code);
    remove(out);
}

/* quantize: the shared flag parser, and an output that is the input (directly or through
 * a link) refused before anything is written: writing it truncated the mapped input
 * (SIGBUS, and an empty model). The int8 file is written under OUT.tmp and renamed. */
static void test_quantize_program(const char *model, const char *tok) {
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    char args[1024], link[256], out[256], command[1024];
    long size_before = file_size(model);
    snprintf(args, sizeof args, "%s %s", model, model);
    expect_program(quantize, "quantize: OUT is IN", args, 2, "is the same file as the input");
    snprintf(args, sizeof args, "%s \"$(printf '%s/q\\033[2J.bin')\"", model, dir);
    expect_program(quantize, "quantize: an escape sequence in OUT", args, 2,
                   "OUT.bin: control character in a path (got '");
    snprintf(link, sizeof link, "%s/link.bin", dir);
    snprintf(command, sizeof command, "ln -s %s %s", model, link);
    if (check_run(command, NULL, NULL) == 0) {
        snprintf(args, sizeof args, "%s %s", model, link);
        expect_program(quantize, "quantize: OUT is a link to IN", args, 2,
                       "is the same file as the input");
    }
    /* OUT a link to another file: refused, the link and its target untouched (renaming the
     * int8 file over OUT replaced the link and never wrote its target) */
    char target[256];
    snprintf(target, sizeof target, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/link_out.bin", dir);
    snprintf(command, sizeof command, "printf keep > %s && ln -s %s %s", target, target, link);
    if (check_run(command, NULL, NULL) == 0) {
        snprintf(args, sizeof args, "%s %s", model, link);
        expect_program(quantize, "quantize: OUT a link to another file", args, 1,
                       "link_out.bin: a symbolic link (got a link, expected a regular file or a "
                       "new path for the int8 model");
        struct stat ls;
        check_true(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode) && file_size(target) == 4,
                   "quantize: OUT's link and its target are as they were");
    }
    check_true(file_size(model) == size_before && size_before > 0,
               "quantize: the input is untouched (%ld bytes)", file_size(model));
    snprintf(out, sizeof out, "%s/q8.bin", dir);
    snprintf(args, sizeof args, "--group=16 %s %s", model, out);
    expect_program(quantize, "quantize --group=16", args, 0, "int8, groups of 16");
    snprintf(args, sizeof args, "%s -z %s -n 2", out, tok);
    expect("the int8 file loads and runs", args, 0, "checkpoint, int8 (llm.c header, version 80)");
    snprintf(command, sizeof command, "test ! -e %s.tmp", out);
    check_true(check_run(command, NULL, NULL) == 0, "quantize: no %s.tmp left behind", out);
    /* OUT an existing file that is no checkpoint (a mistyped path: the tokenizer) is kept
     * without --force (it was replaced by the int8 model, exit 0); --force replaces it */
    char copy[256];
    snprintf(copy, sizeof copy, "%s/tok_copy.bin", dir);
    snprintf(command, sizeof command, "cp %s %s", tok, copy);
    if (check_true(check_run(command, NULL, NULL) == 0, "quantize: a copy of the tokenizer")) {
        snprintf(args, sizeof args, "%s %s", model, copy);
        expect_program(quantize, "quantize over a file that is no checkpoint", args, 1,
                       "tok_copy.bin: exists and is not this model's int8 file (got a file "
                       "that starts as neither llm.c's version 80 nor llama2.c's version 2, "
                       "expected a new path or the int8 file of IN's shape; --force replaces "
                       "it)");
        check_true(check_same_bytes(copy, tok), "quantize: the file that is no checkpoint is "
                   "kept");
        snprintf(args, sizeof args, "%s %s --force", model, copy);
        expect_program(quantize, "quantize --force over a file that is no checkpoint", args, 0,
                       "int8, groups of 32");
    }
    /* the paths swapped: OUT the fp32 model (an int8 file as IN) is kept without --force
     * (it was replaced by the int8 model, exit 0, the fp32 weights lost) */
    snprintf(copy, sizeof copy, "%s/fp32_copy.bin", dir);
    snprintf(command, sizeof command, "cp %s %s", model, copy);
    if (check_true(check_run(command, NULL, NULL) == 0, "quantize: a copy of the model")) {
        snprintf(args, sizeof args, "%s %s", out, copy);
        expect_program(quantize, "quantize INT8 FP32 (the paths swapped)", args, 1,
                       "fp32_copy.bin: exists and is not this model's int8 file (got a "
                       "checkpoint of another version, fp32 or bf16: an input, perhaps, with "
                       "the paths swapped");
        check_true(check_same_bytes(copy, model), "quantize: the fp32 model named as OUT is "
                   "kept");
        /* OUT another model's int8 file (a mistyped path): kept; this model's is replaced */
        const int32_t tiny[7] = {8, 16, 1, 2, 1, 260, 16};
        const char *llama = write_llama("other_shape.bin", 1, tiny, 2L * 8 + 8 + 260 * 8 + 64 +
                                        32 + 32 + 64 + 3 * 128);
        char other_q8[256];
        snprintf(other_q8, sizeof other_q8, "%s/other_q8.bin", dir);
        snprintf(args, sizeof args, "%s %s", llama, other_q8);
        expect_program(quantize, "quantize the other model", args, 0, "int8, groups of 32");
        snprintf(command, sizeof command, "cp %s %s/other_q8_copy.bin", other_q8, dir);
        check_run(command, NULL, NULL);
        snprintf(args, sizeof args, "%s %s", model, other_q8);
        expect_program(quantize, "quantize over another model's int8 file", args, 1,
                       "other_q8.bin: exists and is not this model's int8 file (got the int8 "
                       "file of a model of another shape");
        snprintf(copy, sizeof copy, "%s/other_q8_copy.bin", dir);
        check_true(check_same_bytes(other_q8, copy), "quantize: another model's int8 file "
                   "named as OUT is kept");
        /* one that differs in its context alone (8 positions, the model 16) is another's too */
        const char *short_ctx = write_model("ctx8.bin", 20240326, 3, 8, V, L, NH, C, VP, 0);
        snprintf(args, sizeof args, "%s %s/ctx8_q8.bin", short_ctx, dir);
        expect_program(quantize, "quantize a model of context 8", args, 0, "int8, groups of 32");
        snprintf(args, sizeof args, "%s %s/ctx8_q8.bin", model, dir);
        expect_program(quantize, "quantize over the int8 file of a model of another context",
                       args, 1, "ctx8_q8.bin: exists and is not this model's int8 file (got the "
                       "int8 file of a model of another shape");
        /* standard error closed: the int8 file is the same (a descriptor 2 left free would
         * be OUT's, and the messages would land in it); standard error into OUT: refused */
        snprintf(command, sizeof command, "%s %s %s/q8_open.bin 2>/dev/null && %s %s "
                 "%s/q8_closed.bin 2>&- && cmp %s/q8_closed.bin %s/q8_open.bin", quantize, model,
                 dir, quantize, model, dir, dir, dir);
        if (strchr(quantize, ' '))   /* valgrind writes to standard error itself */
            check_skip("QUANTIZE is a command (valgrind): standard error closed not checked");
        else
            check_true(check_run(command, NULL, NULL) == 0, "quantize with standard error "
                       "closed: the same int8 file");
        snprintf(command, sizeof command, "%s %s %s/q8_err.bin 2> %s/q8_err.bin; echo \"exit "
                 "$?\"; cat %s/q8_err.bin", quantize, model, dir, dir, dir);
        char *said = NULL;
        check_run(command, &said, NULL);
        check_true(said && strstr(said, "exit 1\nquantize: ") && strstr(said, "q8_err.bin: is "
                   "the file standard error goes to (got the same file, expected another path "
                   "for the int8 model)"), "quantize 2> OUT: refused, the message its only "
                   "content");
        free(said);
        /* an empty OUT is replaced (the help's rule), and a third path is refused */
        snprintf(command, sizeof command, ": > %s/empty_q8.bin", dir);
        check_run(command, NULL, NULL);
        snprintf(args, sizeof args, "%s %s/empty_q8.bin", model, dir);
        expect_program(quantize, "quantize over an empty OUT", args, 0, "int8, groups of 32");
        snprintf(args, sizeof args, "%s %s/a_q8.bin %s/b_q8.bin", model, dir, dir);
        expect_program(quantize, "quantize with three paths", args, 2, "b_q8.bin: too many "
                       "arguments (expected IN.bin and OUT.bin only)");
    }
    /* a name whose lock's temporary passes the folder's limit: refused at the start (a save
     * of 245 to 250 bytes failed at its temporary, 251 and more at its lock) */
    char longest[512];
    int n = snprintf(longest, sizeof longest, "%s/", dir);
    memset(longest + n, 'q', 244);
    longest[n + 244] = '\0';
    snprintf(args, sizeof args, "%s %s", model, longest);
    expect_program(quantize, "quantize to a name of 244 bytes", args, 1, "file name too long "
                   "(got 244 bytes, expected at most 243: NAME.lock-XXXXXX, written beside it, "
                   "must fit a folder's limit of 255)");
    check_true(access(longest, F_OK) != 0, "quantize to a name of 244 bytes: nothing written");
    /* OUT replaced keeps its mode (a private file stays private), as writing over it
     * would; one its user may not write is refused (running as root, access(2) lets
     * root write it: the check is then skipped) */
    struct stat st;
    if (check_true(chmod(out, 0600) == 0, "quantize: chmod 600 the existing OUT")) {
        snprintf(args, sizeof args, "%s %s", model, out);
        expect_program(quantize, "quantize over an existing OUT of mode 600", args, 0,
                       "int8, groups of 32");
        unsigned mode = stat(out, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0u;
        check_true(mode == 0600, "quantize: the replaced OUT keeps mode 600 (got %o)", mode);
    }
    {   /* a new OUT gets what open(2) would give it under the umask (mkstemp's is 0600) */
        char fresh[256];
        snprintf(fresh, sizeof fresh, "%s/umask.bin", dir);
        snprintf(command, sizeof command, "umask 027 && %s %s %s", quantize, model, fresh);
        int code = check_run(command, NULL, NULL);
        unsigned mode = code == 0 && stat(fresh, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0u;
        check_true(mode == 0640, "quantize under umask 027: a new OUT of mode 640 (got %o, exit "
                   "%d)", mode, code);
        remove(fresh);
    }
    if (chmod(out, 0444) == 0 && access(out, W_OK) != 0) {
        snprintf(args, sizeof args, "%s %s", model, out);
        expect_program(quantize, "quantize over a read-only OUT", args, 1,
                       "cannot replace (got \"Permission denied\", expected a file this user "
                       "may write, for the int8 model)");
    } else {
        check_skip("quantize over a read-only OUT: this user may write any file (root)");
    }
    chmod(out, 0644);
    snprintf(args, sizeof args, "%s %s/no_folder/q8.bin", model, dir);
    expect_program(quantize, "quantize into a missing folder", args, 1,
                   "cannot write the int8 model there");
    /* a weight that is not finite (the model's last value made NaN): refused, nothing
     * written (its int8 file gave non-finite logits only when run) */
    char nan_model[256], nan_out[256];
    snprintf(nan_model, sizeof nan_model, "%s/nan.bin", dir);
    snprintf(nan_out, sizeof nan_out, "%s/nan_q8.bin", dir);
    snprintf(command, sizeof command, "cp %s %s", model, nan_model);
    FILE *f = check_run(command, NULL, NULL) == 0 ? fopen(nan_model, "r+b") : NULL;
    float nan_value = NAN;
    if (check_true(f && fseek(f, -(long)sizeof nan_value, SEEK_END) == 0 &&
                   fwrite(&nan_value, sizeof nan_value, 1, f) == 1 && fclose(f) == 0,
                   "quantize: a model with a NaN made")) {
        snprintf(args, sizeof args, "%s %s", nan_model, nan_out);
        expect_program(quantize, "quantize a model holding a NaN (its last value, lnfb's)",
                       args, 1, "quantize: the model's lnfb (llm.c's or llama2.c's name) holds "
                       "a value that is not finite (got NaN or infinity, expected finite "
                       "weights)");
        check_true(file_size(nan_out) < 0, "quantize: nothing written for a NaN model");
    }
    /* IN is OUT's old temporary name, OUT.tmp: it was opened "wb" while mapped (SIGBUS, and
     * an empty input); the temporary now has a name no file had */
    char in_tmp[256], q8[256];
    snprintf(in_tmp, sizeof in_tmp, "%s/m.bin.tmp", dir);
    snprintf(q8, sizeof q8, "%s/m.bin", dir);
    snprintf(command, sizeof command, "cp %s %s", model, in_tmp);
    if (check_true(check_run(command, NULL, NULL) == 0, "quantize: copy the model to m.bin.tmp")) {
        snprintf(args, sizeof args, "%s %s", in_tmp, q8);
        expect_program(quantize, "quantize m.bin.tmp m.bin", args, 0, "int8, groups of 32");
        snprintf(command, sizeof command, "cmp -s %s %s", model, in_tmp);
        check_true(check_run(command, NULL, NULL) == 0, "quantize m.bin.tmp m.bin: the input "
                   "is untouched");
        snprintf(args, sizeof args, "%s -z %s -n 2", q8, tok);
        expect("quantize m.bin.tmp m.bin: m.bin loads and runs", args, 0, "int8");
    }
    /* OUT a FIFO (or a device): refused; it was replaced by a regular file */
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo.bin", dir);
    snprintf(command, sizeof command, "mkfifo %s", fifo);
    if (check_run(command, NULL, NULL) == 0) {
        snprintf(args, sizeof args, "%s %s", model, fifo);
        expect_program(quantize, "quantize into a FIFO", args, 1,
                       "not a regular file (got a FIFO, expected a path for the int8 model)");
        snprintf(command, sizeof command, "test -p %s", fifo);
        check_true(check_run(command, NULL, NULL) == 0, "quantize into a FIFO: still a FIFO");
    }
    /* one writer per output: while another process holds OUT's lock, quantize is refused
     * (two quantizers aimed at one OUT interleaved their bytes in a shared OUT.tmp) */
    char lock_path[300];
    snprintf(lock_path, sizeof lock_path, "%s.lock", q8);
    int fd = open(lock_path, O_RDWR | O_CREAT, 0666);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (check_true(fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0, "quantize: hold m.bin.lock")) {
        char want[128];
        snprintf(want, sizeof want, "another process (pid %ld) is writing it", (long)getpid());
        snprintf(args, sizeof args, "%s %s", model, q8);
        expect_program(quantize, "quantize while another writer holds OUT", args, 1, want);
    }
    if (fd >= 0) close(fd);
    remove(lock_path);
    snprintf(command, sizeof command, "ls -a %s | grep -q -e '\\.tmp-' -e '\\.lock'", dir);
    check_true(check_run(command, NULL, NULL) != 0, "quantize: no temporary or lock left");
    snprintf(args, sizeof args, "-g 0 %s %s", model, out);
    expect_program(quantize, "quantize -g 0", args, 2,
                   "-g: invalid value (got '0', expected an integer in 1..65536)");
    snprintf(args, sizeof args, "%s", model);
    expect_program(quantize, "quantize with one path", args, 2, "missing (got 1 of 2");
}

/* A program removes only what it created. OUT.lock is the one name a writer takes beside
 * its output: an input of the same command at that name, a user's own file, a link (even
 * a dangling one) are refused and left as they were (quantize and train deleted each and
 * created a link's target); a lock an interrupted run left (its fixed text) is taken over
 * and removed. Then SIGTERM in the middle of a write leaves no temporary and no lock. */
static void test_files_not_ours(const char *model, const char *tok) {
    const char *quantize = getenv("QUANTIZE"), *train = getenv("TRAIN");
    if (!quantize || !*quantize) quantize = "./quantize";
    if (!train || !*train) train = "./train";
    char in[256], out[256], lock[300], args[1024], command[1024], text[256];
    /* IN is OUT.lock */
    snprintf(in, sizeof in, "%s/in.bin.lock", dir);
    snprintf(out, sizeof out, "%s/in.bin", dir);
    snprintf(command, sizeof command, "cp %s %s", model, in);
    if (check_true(check_run(command, NULL, NULL) == 0, "lock: copy the model to in.bin.lock")) {
        snprintf(args, sizeof args, "%s %s", in, out);
        expect_program(quantize, "quantize in.bin.lock in.bin", args, 1,
                       "in.bin.lock is in the way (got a file of");
        check_true(check_same_bytes(in, model) && access(out, F_OK) != 0,
                   "quantize in.bin.lock in.bin: the input is kept, nothing written");
        snprintf(args, sizeof args, "--init %s -o %s -d %s -z %s/i_tok.bin -n 1", in, out,
                 tok, dir);
        expect_program(train, "train --init in.bin.lock -o in.bin", args, 1,
                       "in.bin.lock is in the way");
        check_true(check_same_bytes(in, model),
                   "train --init in.bin.lock -o in.bin: the input is kept");
    }
    /* IN is OUT.lock, and missing: reported missing, not read as the lock the run made
     * (quantize said "bad magic number", train "truncated header (got 35 bytes") */
    snprintf(in, sizeof in, "%s/gone.bin.lock", dir);
    snprintf(out, sizeof out, "%s/gone.bin", dir);
    snprintf(args, sizeof args, "%s %s", in, out);
    expect_program(quantize, "quantize gone.bin.lock gone.bin, no such IN", args, 1,
                   "gone.bin.lock: cannot open (got \"No such file or directory\"");
    snprintf(args, sizeof args, "--init %s -o %s -d %s -z %s/g_tok.bin -n 1", in, out, tok,
             dir);
    expect_program(train, "train --init gone.bin.lock -o gone.bin, no such file", args, 1,
                   "gone.bin.lock: cannot open (got \"No such file or directory\"");
    check_true(access(in, F_OK) != 0 && access(out, F_OK) != 0,
               "gone.bin.lock as a missing input: no lock left, nothing written");
    /* the training text is OUT.lock */
    snprintf(text, sizeof text, "%s/text.bin.lock", dir);
    snprintf(out, sizeof out, "%s/text.bin", dir);
    FILE *f = fopen(text, "w");
    if (check_true(f != NULL, "lock: write t.bin.lock")) {
        for (int i = 0; i < 60; i++) fprintf(f, "To be, or not to be, that is the question.\n");
        fclose(f);
        snprintf(args, sizeof args, "-d %s -o %s -z %s/t_tok.bin -v 300 -L 1 -C 16 -H 2 -T 8 "
                 "-B 4 -n 1", text, out, dir);
        expect_program(train, "train -d text.bin.lock -o text.bin", args, 1,
                       "text.bin.lock: the text is a file of this run's");
        snprintf(command, sizeof command, "grep -c question %s | grep -qx 60", text);
        int kept = check_run(command, NULL, NULL) == 0;
        check_true(kept && access(out, F_OK) != 0,
                   "train -d text.bin.lock -o text.bin: the text is "
                   "kept (%s), nothing written", kept ? "yes" : "no");
    }
    /* a user's own OUT.lock, beside quantize's output and run's --attn-map (which wrote the
     * map beside it) */
    static const char *const owned[] = {"q.bin", "locked.svg"};
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/%s", dir, owned[i]);
        snprintf(lock, sizeof lock, "%s.lock", out);
        f = fopen(lock, "w");
        if (!check_true(f != NULL, "lock: write the user's %s.lock", owned[i])) continue;
        fputs("notes\n", f);
        fclose(f);
        if (i == 0) snprintf(args, sizeof args, "%s %s", model, out);
        else snprintf(args, sizeof args, "%s -z %s -n 2 --attn-map %s", model, tok, out);
        char want[128];
        snprintf(want, sizeof want, "%s.lock is in the way (got a file of 6 bytes that is not "
                 "a lock", owned[i]);
        expect_program(i == 0 ? quantize : run_bin, i == 0 ? "quantize with a user's OUT.lock"
                       : "run --attn-map with a user's MAP.lock", args, 1, want);
        snprintf(command, sizeof command, "grep -qx notes %s", lock);
        check_true(check_run(command, NULL, NULL) == 0 && access(out, F_OK) != 0,
                   "%s: the user's %s.lock kept, nothing written", i == 0 ? "quantize" : "run",
                   owned[i]);
    }
    /* OUT.lock a dangling link: refused; its target is not created */
    snprintf(out, sizeof out, "%s/d.bin", dir);
    snprintf(command, sizeof command, "ln -s %s/elsewhere.txt %s/d.bin.lock", dir, dir);
    if (check_true(check_run(command, NULL, NULL) == 0, "lock: a dangling link d.bin.lock")) {
        snprintf(args, sizeof args, "%s %s", model, out);
        expect_program(quantize, "quantize with d.bin.lock a dangling link", args, 1,
                       "d.bin.lock is in the way (got a symbolic link");
        snprintf(command, sizeof command, "test -L %s/d.bin.lock && test ! -e %s/elsewhere.txt",
                 dir, dir);
        check_true(check_run(command, NULL, NULL) == 0,
                   "quantize: the link kept, its target not created");
    }
    /* a lock an interrupted run left (the file os_lock writes) is taken over, then removed */
    snprintf(out, sizeof out, "%s/s.bin", dir);
    snprintf(lock, sizeof lock, "%s.lock", out);
    f = fopen(lock, "w");
    if (check_true(f != NULL, "lock: write a stale lock")) {
        fputs("attn: lock of a file being written\n", f);
        fclose(f);
        snprintf(args, sizeof args, "%s %s", model, out);
        expect_program(quantize, "quantize over a stale lock", args, 0, "int8, groups of 32");
        check_true(access(lock, F_OK) != 0 && access(out, F_OK) == 0,
                   "quantize over a stale lock: written, the lock removed");
    }
    /* quantize's report into a pipe already closed: a write error, not SIGPIPE's death
     * with the lock left behind */
    snprintf(command, sizeof command, "%s %s %s/pipe.bin 2>&1 | true; "
             "ls %s | grep -c '^pipe.bin.lock' || true", quantize, model, dir, dir);
    char *printed = NULL;
    check_run(command, &printed, NULL);
    check_true(printed && strcmp(printed, "0\n") == 0, "quantize into a closed pipe: no "
               "pipe.bin.lock left (got \"%s\")", printed);
    free(printed);
    /* a signal while run writes its attention map (strace sends it at a system call):
     * SIGTERM at the map's fsync, and SIGUSR1 (whose default also ends the process) at the
     * link that names a temporary of no name (O_TMPFILE; asked of the file system here,
     * not of run): ended by the signal (128 + its number), and nothing left */
    int tmpfile_fd = -1;
#ifdef O_TMPFILE
    tmpfile_fd = open(dir, O_TMPFILE | O_WRONLY, 0600);
#endif
    if (tmpfile_fd >= 0) close(tmpfile_fd);
    const struct { const char *name, *call, *want; } sigs[] = {
        {"TERM", "fsync", "143\n0\n"}, {"USR1", "linkat", "138\n0\n"}};
    for (int i = 0; i < 2; i++) {
        if (strchr(run_bin, ' ') || check_run("strace -qq -o /dev/null true 2>/dev/null",
                                              NULL, NULL) != 0) {
            check_skip(i ? "SIGUSR1 during run --attn-map: no strace, or RUN is a wrapper"
                         : "SIGTERM during run --attn-map: no strace, or RUN is a wrapper");
            continue;
        }
        if (i == 1 && tmpfile_fd < 0) {
            check_skip("SIGUSR1 at the map's link: this file system makes no file of no name");
            continue;
        }
        snprintf(command, sizeof command, "strace -f -qq -o /dev/null -e trace=%s -e "
                 "inject=%s:signal=%s:when=1 %s %s -z %s -n 4 -s 1 --attn-map %s/sig%d.html "
                 ">/dev/null 2>&1; echo $?; ls %s | grep -c '^sig%d.html' || true",
                 sigs[i].call, sigs[i].call, sigs[i].name, run_bin, model, tok, dir, i, dir, i);
        printed = NULL;
        check_run(command, &printed, NULL);
        check_true(printed && strcmp(printed, sigs[i].want) == 0, "SIG%s at run --attn-map's "
                   "%s: ended by the signal (%.3s), no sig%d.html* left (got \"%s\")",
                   sigs[i].name, sigs[i].call, sigs[i].want, i, printed);
        free(printed);
    }
    /* standard output or error closed: the map's file never takes descriptor 1 or 2, so
     * it holds the map alone; a closed standard output is a write error (exit 1), and a
     * failed run writes no map */
    for (int fd = 1; fd <= 2; fd++) {
        if (fd == 2 && strchr(run_bin, ' ')) {   /* a wrapper (valgrind) needs its stderr */
            check_skip("run --attn-map with standard error closed: RUN is a wrapper");
            continue;
        }
        snprintf(command, sizeof command, "%s %s -z %s -n 5 -s 1 --attn-map %s/closed%d.svg "
                 "%s; echo $?; head -c 6 %s/closed%d.svg 2>/dev/null", run_bin, model, tok, dir,
                 fd, fd == 1 ? ">&-" : "2>&- >/dev/null", dir, fd);
        printed = NULL;
        check_run(command, &printed, NULL);
        const char *want = fd == 1 ? "1\n" : "0\n<?xml ";
        check_true(printed && strcmp(printed, want) == 0, "run --attn-map with %s closed: %s, "
                   "exit %c (got \"%s\")", fd == 1 ? "standard output" : "standard error",
                   fd == 1 ? "no map" : "the map alone in its file", want[0], printed);
        free(printed);
    }
    /* the map at the file standard output goes to: refused (the map was renamed over the
     * text, exit 0); a run whose text failed (a full disk) leaves an existing map as it was
     * (it was replaced, exit 1) */
    snprintf(command, sizeof command, "%s %s -z %s -n 5 -s 1 --attn-map %s/same.html > "
             "%s/same.html 2>%s/same.err; echo $?; head -c 4 %s/same.html; grep -c 'is the "
             "file standard output goes to' %s/same.err", run_bin, model, tok, dir, dir, dir, dir,
             dir);
    printed = NULL;
    check_run(command, &printed, NULL);
    check_true(printed && strcmp(printed, "1\n1\n") == 0, "run --attn-map at the file of "
               "standard output: refused, the file empty (got \"%s\")", printed);
    free(printed);
    snprintf(command, sizeof command, "printf keep > %s/kept.svg && %s %s -z %s -n 5 -s 1 "
             "--attn-map %s/kept.svg > /dev/full 2>/dev/null; echo $?; cat %s/kept.svg", dir,
             run_bin, model, tok, dir, dir);
    printed = NULL;
    check_run(command, &printed, NULL);
    check_true(printed && strcmp(printed, "1\nkeep") == 0, "run --attn-map > /dev/full: exit 1, "
               "the existing map kept (got \"%s\")", printed);
    free(printed);
    snprintf(command, sizeof command, "{ %s -d %s -o %s/sig.bin -z %s/sig_tok.bin "
             "-v 300 -L 1 -C 16 -H 2 -T 8 -B 4 -n 100000 -e 100000 >/dev/null 2>&1 & p=$!; "
             "i=0; while [ $i -lt 1000 ] && ! ls %s | grep -q '^sig.bin.lock$'; do sleep 0.01; "
             "i=$((i+1)); done; sleep 0.2; kill -TERM $p; wait $p; echo $?; }; "
             "ls %s | grep -c -E '^sig.*(lock|tmp)$' || true", train, text, dir, dir, dir, dir);
    check_run(command, &printed, NULL);
    check_true(printed && strcmp(printed, "143\n0\n") == 0, "SIGTERM during train: ended by "
               "the signal (143), no lock or temporary left (got \"%s\")", printed);
    free(printed);
}

/* The fixture model with the attention extension (docs/formats.md): header [9] = 1, then
 * one record of 20 int32 per layer (kind, unscaled, softmax1, tau's bits, w, sinks, k, l,
 * c, buckets, rounds, local, m, orf, prescale, norm, sinklogit, seed low, seed high, factor)
 * and NH sink logits (0). rec holds the record's fields from w on (16 values). */
static const char *write_with_record(const char *name, int kind, const int32_t rec[16]) {
    const char *path = write_model(name, 20240326, 3, MAX_T, V, L, NH, C, VP, 0);
    FILE *f = fopen(path, "r+b");
    if (!f) return path;
    int32_t one = 1;
    float tau = 1.0f, zero = 0.0f;
    int32_t head[4] = {kind, 0, 0, 0};
    memcpy(&head[3], &tau, sizeof tau);
    int ok = fseek(f, 9 * 4, SEEK_SET) == 0 && fwrite(&one, 4, 1, f) == 1 &&
             fseek(f, 0, SEEK_END) == 0 && fwrite(head, 4, 4, f) == 4 &&
             fwrite(rec, 4, 16, f) == 16;
    for (int h = 0; ok && h < NH; h++) ok = fwrite(&zero, 4, 1, f) == 1;
    fclose(f);
    return path;
}

/* A record is held to the limits and rules of the same spec given as --attn (it was
 * accepted up to 2^20 in every field: LSH with 2^20 rounds ran 21 s and 790 MB for 8
 * tokens of a 16-position model), and a bad one names its layer, field and value (it said
 * "invalid parameters for this model"); quantize refuses what run refuses (it copied the
 * record into an int8 file run then refused). */
static void test_attention_records(const char *tok) {
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    /*                 w    sinks k  l   c   buckets rounds   local m  orf pre norm sink seed factor */
    int32_t lsh[16] = {128, 4,    2, 32, 32, 2,      1 << 20, 64,  256, 1, 0, 0,  0,   1, 0, 0};
    int32_t win[16] = {0,   0,    2, 32, 32, 16,     4,       64,  256, 1, 0, 0,  0,   1, 0, 0};
    int32_t fix[16] = {128, 0,    2, 4,  5,  16,     4,       64,  256, 1, 0, 0,  0,   1, 0, 0};
    int32_t ok[16] =  {8,   2,    2, 32, 32, 16,     4,       64,  256, 1, 0, 0,  0,   1, 0, 0};
    char args[1024], out[256];
    const char *window = write_with_record("rec_ok.bin", 2, ok);
    snprintf(args, sizeof args, "%s -z %s -n 8", window, tok);
    expect("a record of window w=8, sinks=2 runs, named on the load line", args, 0,
           "attention state 0.0 MiB for 9 positions (window:w=8,sinks=2)");
    snprintf(args, sizeof args, "%s -z %s -n 2 --cache-type f16", window, tok);
    expect("--cache-type f16 on a model trained with a window, no --attn", args, 2,
           "expected --attn exact: this model was trained with another attention");
    {   /* --ref runs the attention its file records: the model against itself is KL 0 (the
         * reference ran exact attention, KL 0.4 here) */
        char text_path[256], command[1536], *report = NULL;
        snprintf(text_path, sizeof text_path, "%s/rec_eval.txt", dir);
        FILE *f = fopen(text_path, "w");
        for (int i = 0; f && i < 8; i++) fprintf(f, "abcdef %d ab cd ef\n", i);
        if (f) fclose(f);
        snprintf(command, sizeof command, "%s %s -z %s --eval %s --ref %s", run_bin, window,
                 tok, text_path, window);
        int code = check_run(command, &report, NULL);
        check_true(code == 0 && report && strstr(report, "KL 0.000000 nats/token, top-1 "
                   "agreement 100.0000%"), "--eval of a window model against itself by --ref: "
                   "KL 0 (exit %d): %s", code, report ? report : "");
        free(report);
    }
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_lsh.bin", 6, lsh), tok);
    expect("a record of LSH with 2^20 rounds", args, 1,
           "attention of layer 0: lsh: rounds out of range (got 1048576, expected 1..64)");
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_win.bin", 2, win), tok);
    expect("a record of a window of 0", args, 1,
           "attention of layer 0: window: w out of range (got 0, expected 1..1048576)");
    const char *fixed = write_with_record("rec_fix.bin", 5, fix);
    snprintf(args, sizeof args, "%s -z %s -n 8", fixed, tok);
    expect("a record of fixed with c > l", args, 1,
           "attention of layer 0: fixed: c must not exceed l (got c 5, l 4)");
    snprintf(out, sizeof out, "%s/rec_fix_q8.bin", dir);
    snprintf(args, sizeof args, "%s %s", fixed, out);
    expect_program(quantize, "quantize a record of fixed with c > l", args, 1,
                   "fixed: c must not exceed l (got c 5, l 4)");
    check_true(access(out, F_OK) != 0, "quantize of a bad record wrote nothing");
    /* a Synthesizer's record without its parameters, a factor not dividing the context */
    int32_t fd3[16] = {128, 0,    2, 32, 32, 16,     4,       64,  256, 1, 0, 0,  0,   1, 0, 3};
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_syn.bin", 11, ok), tok);
    expect("a record of synth-dense without its parameters", args, 1,
           "file size does not match its header (got");
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_fd3.bin", 13, fd3), tok);
    expect("a record of synth-fdense with a = 3 over 16 positions", args, 1,
           "attention of layer 0: synth-fdense: a must divide the context (got a 3, context 16)");
    /* a flag of 2 (sinklogit: 0 or 1), and a sink logit that is not finite (it loaded, and
     * generation failed on non-finite logits) */
    int32_t flag2[16] = {8, 2, 2, 32, 32, 16, 4, 64, 256, 1, 0, 0, 2, 1, 0, 0};
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_flag.bin", 2, flag2),
             tok);
    expect("a record with sinklogit 2", args, 1, "attention of layer 0: field sink_logit out "
           "of range (got 2, expected 0 or 1)");
    int32_t sink[16] = {8, 2, 2, 32, 32, 16, 4, 64, 256, 1, 0, 0, 1, 1, 0, 0};
    const char *nan_sink = write_with_record("rec_nan.bin", 2, sink);
    FILE *f = fopen(nan_sink, "r+b");
    float nan = NAN;
    int patched = f && fseek(f, -4, SEEK_END) == 0 && fwrite(&nan, 4, 1, f) == 1;
    if (f) fclose(f);
    snprintf(args, sizeof args, "%s -z %s -n 8", nan_sink, tok);
    if (check_true(patched, "a record's last sink logit made NaN"))
        expect("a record with a NaN sink logit", args, 1, "sink logit of layer 0, head 1 is not "
               "finite (got nan, expected a finite number)");
    /* LSH with more buckets than the context's 16 positions: refused at load (it loaded,
     * then model.c refused to set it up) */
    int32_t lsh32[16] = {128, 4, 2, 32, 32, 32, 4, 64, 256, 1, 0, 0, 0, 1, 0, 0};
    snprintf(args, sizeof args, "%s -z %s -n 8", write_with_record("rec_lsh32.bin", 6, lsh32),
             tok);
    expect("a record of LSH with 32 buckets over 16 positions", args, 1, "attention of layer "
           "0: lsh: buckets above the context (got 32 buckets, context 16");
}

/* train's defaults and its flags that would do nothing: the attention dropout follows the
 * kinds (0 where no layer has softmax weights: the default was refused as if given), a
 * --redraw without a Performer layer and a flag -r does not take are usage errors whose
 * list of -r's flags is the help's; --init takes only the tokenizer its checkpoint was
 * trained with (a text that trains another was accepted, the embeddings then belonging to
 * other ids), or uses that tokenizer as it is when -z names it; and a run larger than
 * ulimit -v is refused before anything is allocated. */
static void test_train_flags(void) {
    const char *train = getenv("TRAIN");
    if (!train || !*train) train = "./train";
    char text[256], other[256], args[2048], a[256], want[512];
    snprintf(text, sizeof text, "%s/play.txt", dir);
    snprintf(other, sizeof other, "%s/other.txt", dir);
    FILE *f = fopen(text, "w"), *g = fopen(other, "w");
    for (int i = 0; f && g && i < 200; i++) {
        fprintf(f, "To be, or not to be, that is the question %d.\n", i);
        fprintf(g, "Now is the winter of our discontent %d, made glorious summer.\n", i);
    }
    if (f) fclose(f);
    if (g) fclose(g);
    if (!check_true(f && g, "train flags: write two texts")) return;
    snprintf(args, sizeof args, "-d %s -o \"$(printf '%s/m\\rx.bin')\"", text, dir);
    expect_program(train, "train: a carriage return in -o's path", args, 2,
                   "-o: control character in a path (got '");
    expect_program(train, "train: -- then an argument", "-- -d", 2,
                   "train: -d: unexpected argument (got '-d', expected nothing after --: "
                   "train takes no arguments, only options)");
#define TINY_RUN "-v 300 -L 2 -C 16 -H 2 -T 8 -B 4 -n 2"
    static const char *const kinds[] = {"performer", "linear", "efficient", "2*performer:m=8",
                                        "window:w=4;performer:m=8"};
    for (int i = 0; i < 5; i++) {
        snprintf(args, sizeof args, "%s -d %s -o %s/k%d.bin -z %s/k%d.tok " TINY_RUN
                 " --attn '%s'", train, text, dir, i, dir, i, kinds[i]);
        char *printed = NULL;
        int code = check_run(args, &printed, NULL);
        const char *rate = i < 4 ? "attention dropout 0," : "attention dropout 0.1,";
        check_true(code == 0 && printed && strstr(printed, rate), "train --attn %s with the "
                   "default --attn-dropout: exit %d (want 0), \"%s\"", kinds[i], code, rate);
        free(printed);
    }
    snprintf(args, sizeof args, "-d %s -o %s/kx.bin " TINY_RUN " --attn performer "
             "--attn-dropout 0.1", text, dir);
    expect_program(train, "train --attn performer --attn-dropout 0.1", args, 2,
                   "--attn-dropout: no layer has attention weights to drop");
    snprintf(args, sizeof args, "-d %s -o %s/kx.bin " TINY_RUN " --redraw 5", text, dir);
    expect_program(train, "train --redraw with exact attention", args, 2,
                   "--redraw: no Performer layer to draw features for");
    snprintf(args, sizeof args, "--init %s/k0.bin -r -d %s -o %s/kx.bin", dir, text, dir);
    expect_program(train, "train --init with -r", args, 2, "expected only -d, -o, -z, -e, -n, "
                   "--sample, --threads, --max-memory and --force with -r");
    /* --init: the checkpoint's own tokenizer, or one the same text trains */
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(args, sizeof args, "-d %s -o %s -z %s/a.tok " TINY_RUN, text, a, dir);
    expect_program(train, "train a.bin", args, 0, "");
    snprintf(args, sizeof args, "-d %s -o %s/x.bin -z %s/x.tok " TINY_RUN " --init %s", other,
             dir, dir, a);
    expect_program(train, "train --init a.bin on a text that trains another tokenizer", args,
                   1, "this text with -v 300 trains another tokenizer than the one it was "
                   "trained with");
    snprintf(want, sizeof want, "%s/x.bin", dir);
    check_true(access(want, F_OK) != 0, "train --init with another tokenizer: nothing written");
    snprintf(args, sizeof args, "-d %s -o %s/x.bin -z weights/tokenizer.bin " TINY_RUN
             " --init %s", other, dir, a);
    expect_program(train, "train --init a.bin -z another existing tokenizer: -z's file named",
                   args, 1, "the tokenizer weights/tokenizer.bin is not the one it was trained "
                   "with (got checksum ");
    snprintf(args, sizeof args, "-d %s -o %s/x.bin " TINY_RUN " --init %s", other, dir, text);
    expect_program(train, "train --init a text file: its kind said before any tokenizer", args,
                   1, "not an llm.c GPT-2 checkpoint (got magic ");
    snprintf(args, sizeof args, "-d %s -o %s/y.bin -z %s/a.tok " TINY_RUN " --init %s", other,
             dir, dir, a);
    expect_program(train, "train --init a.bin -z a's tokenizer, on another text", args, 0, "");
    snprintf(args, sizeof args, "%s/a.tok", dir);
    snprintf(want, sizeof want, "%s/y.bin", dir);
    check_true(access(want, F_OK) == 0, "train --init a.bin -z a's tokenizer: trained");
    {   /* a -v that differs from that tokenizer's vocab learns nothing, and says so */
        char *printed = NULL;
        snprintf(args, sizeof args, "%s -d %s -o %s/w.bin -z %s/a.tok " TINY_RUN " -v 290 "
                 "--init %s", train, other, dir, dir, a);
        int code = check_run(args, &printed, NULL);
        check_true(code == 0 && printed && strstr(printed, "used as it is (-v does not apply)"),
                   "train --init a.bin -z a's tokenizer -v 290: exit %d (want 0), the line "
                   "says -v does not apply", code);
        free(printed);
    }
    snprintf(args, sizeof args, "-d %s -o %s/z.bin -z %s/z.tok " TINY_RUN " --init %s", text,
             dir, dir, a);
    expect_program(train, "train --init a.bin on its own text", args, 0, "");
    snprintf(args, sizeof args, "-d %s -o %s/v.bin " TINY_RUN " --init %s/none.bin", text, dir,
             dir);
    expect_program(train, "train --init of a missing file", args, 1, "none.bin: cannot open "
                   "(got \"No such file or directory\", expected a checkpoint to start from)");
    /* --init's checkpoint and state are inputs: no output may be either, even with --force
     * (-z a.bin replaced the model it started from by a tokenizer, exit 0) */
    size_t a_size = 0;
    char *a_before = check_read_file(a, &a_size);
    snprintf(args, sizeof args, "-d %s -o %s/v.bin -z %s " TINY_RUN " --init %s --force", text,
             dir, a, a);
    expect_program(train, "train -z naming --init's checkpoint", args, 1, "is the input");
    snprintf(args, sizeof args, "-d %s -o %s/v.bin -z %s.state " TINY_RUN " --init %s --force",
             text, dir, a, a);
    expect_program(train, "train -z naming --init's state", args, 1, "is the input");
    snprintf(args, sizeof args, "-d %s -o %s " TINY_RUN " --init %s --force", text, a, a);
    expect_program(train, "train -o naming --init's checkpoint", args, 1, "is the input");
    size_t a_after_size = 0;
    char *a_after = check_read_file(a, &a_after_size);
    check_true(a_before && a_after && a_size == a_after_size &&
               memcmp(a_before, a_after, a_size) == 0, "train: --init's checkpoint unchanged");
    free(a_before);
    free(a_after);
    /* ulimit -v: refused with the computed need (a sanitizer build may not start under it) */
    char command[2048], *err = NULL;
    snprintf(command, sizeof command, "ulimit -v 400000 && %s --help", train);
    if (check_run(command, NULL, NULL) != 0) {
        check_skip("train under ulimit -v does not start (a sanitizer build, or an "
                   "emulator): not checked");
        return;
    }
    snprintf(command, sizeof command, "ulimit -v 400000 && %s -d %s -o %s/big.bin -z %s/big.tok "
             "-v 300 -L 4 -C 256 -H 4 -T 128 -B 64 -n 1", train, text, dir, dir);
    int code = check_run(command, NULL, &err);
    check_true(code == 1 && err && strstr(err, "more than the limit of 0.41 GB"),
               "train under ulimit -v 400000: refused before allocating (exit %d: %s)", code,
               err ? err : "");
    free(err);
}

/* ./tutorial ($TUTORIAL): output it could not write is a failure (exit 1, one line), as in
 * the other programs (it exited 0 with the output lost), and arguments a step does not
 * take are a usage error (they were ignored). */
static void test_tutorial_program(void) {
    const char *tutorial = getenv("TUTORIAL");
    if (!tutorial || !*tutorial) {
        check_skip("TUTORIAL not set (make test sets it): ./tutorial's errors not checked");
        return;
    }
    expect_program(tutorial, "tutorial tokens > /dev/full", "tokens > /dev/full", 1,
                   "tutorial: standard output: write error");
    expect_program(tutorial, "tutorial svg kernel >&-", "svg kernel >&-", 1,
                   "tutorial: standard output: write error");
    expect_program(tutorial, "tutorial rope extra", "rope extra", 2,
                   "tutorial: rope: too many arguments (got 1, expected at most 0)");
    expect_program(tutorial, "tutorial sample with 4 arguments", "sample 1 2 3 4", 2,
                   "expected at most 3: [T] [TOP_K] [TOP_P]");
    expect_program(tutorial, "tutorial kernel 1 2", "kernel 1 2", 0, "");
    /* run from another folder: weights/ not found, said so (it named the file only) */
    if (strchr(tutorial, ' ')) {
        check_skip("tutorial from another folder: TUTORIAL is a command");
    } else {
        char command[512], *err = NULL;
        snprintf(command, sizeof command, "t=%s; case $t in /*) ;; *) t=$(pwd)/$t;; esac; "
                 "cd %s && \"$t\" tokens", tutorial, dir);
        int code = check_run(command, NULL, &err);
        check_true(code == 1 && err && strstr(err, "tutorial: weights/tokenizer.bin: not found "
                   "(expected ./tutorial run in the repository's top folder"), "tutorial tokens "
                   "from another folder: one line naming the top folder (exit %d)", code);
        free(err);
    }
    /* the user's text is echoed with its control bytes escaped, DEL (0x7f) and the C1
     * control U+009B (CSI on some terminals) too, as cli_printable does; other UTF-8 (a
     * no-break space U+00A0, an e acute) as it is */
    static const char *const echoing[] = {"tokens", "next", "cache"};
    for (int i = 0; i < 3; i++) {
        char command[256], *out = NULL;
        snprintf(command, sizeof command, "%s %s \"$(printf 'a\\033[2Jb\\001\\177\\302\\233"
                 "\\302\\240\\303\\251')\"", tutorial, echoing[i]);
        int code = check_run(command, &out, NULL);
        check_true(code == 0 && out && strstr(out, "text: \"a\\x1b[2Jb\\x01\\x7f\\xc2\\x9b"
                                              "\xc2\xa0\xc3\xa9\"") &&
                   !strchr(out, '\033') && !strchr(out, '\001') && !strchr(out, '\177') &&
                   !strstr(out, "\xc2\x9b"), "tutorial %s: the text's control bytes, DEL and "
                   "U+009B escaped, other UTF-8 kept (exit %d)", echoing[i], code);
        free(out);
    }
    /* a temperature whose logits / T overflow (2 / 1e-39): refused, not inf and NaN */
    expect_program(tutorial, "tutorial sample 1e-39", "sample 1e-39", 2,
                   "tutorial: sample T: out of range (got '1e-39', expected a number in (0.001, "
                   "100])");
    /* no step, and a text longer than the context: one line each (the whole usage, and
     * the tokenizer's line beside the tutorial's, were printed), nothing on stdout */
    const struct { const char *what, *args, *message; int code; } bad[] = {
        {"tutorial with no step", "", "tutorial: no step given (expected tutorial STEP", 2},
        {"tutorial next, 400 words", "next \"$(yes ab | head -n 400 | tr '\\n' ' ')\"",
         "tutorial: the text must be at most 256 tokens (got ", 1},
        {"tutorial loss, 400 words", "loss \"$(yes ab | head -n 400 | tr '\\n' ' ')\"",
         "tutorial: the text must be at most 256 tokens (got ", 1},
        /* the whole text is checked before its first piece is printed */
        {"tutorial tokens, 300 bytes", "tokens \"$(yes x | head -n 300 | tr -d '\\n')\"",
         "tutorial: the text must be at most 256 tokens (got ", 1},
        {"tutorial loss of one token", "loss a", "tutorial: loss: the text must be at least 2 "
         "tokens", 1},
        {"tutorial kernel 1e-18 (NaN weights)", "kernel 1e-18", "tutorial: kernel SIGMA: out "
         "of range (got '1e-18', expected a number in (0.01, 1000])", 2},
        /* below 0.01 as written, though not below its float */
        {"tutorial kernel 0.0099999999", "kernel 0.0099999999", "tutorial: kernel SIGMA: out "
         "of range (got '0.0099999999', expected a number in (0.01, 1000])", 2},
        {"tutorial with a newline in the step", "\"$(printf 'x\\ny')\"",
         "tutorial: x\\x0ay: no such step", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char command[512], *out = NULL, *err = NULL;
        snprintf(command, sizeof command, "timeout 120 %s %s", tutorial, bad[i].args);
        int code = check_run(command, &out, &err), lines = 0;
        for (const char *p = err; p && *p; p++) lines += *p == '\n';
        int ok = code == bad[i].code && lines == 1 && err && strstr(err, bad[i].message) &&
                 out && !*out;
        check_true(ok, "%s: exit %d (want %d), one stderr line with \"%s\", no output",
                   bad[i].what, code, bad[i].code, bad[i].message);
        if (!ok) fprintf(stderr, "  stderr (%d lines): %s", lines, err ? err : "(none)\n");
        free(out);
        free(err);
    }
    /* the steps that write the shipped model's block out by hand, with another kind of
     * model in weights/ (the shipped one in int8): one line, no half a picture (they read
     * its tensors as fp32 and crashed) */
    const char *quantize = getenv("QUANTIZE");
    char setup[1024];
    snprintf(setup, sizeof setup, "mkdir -p %s/tut/weights && cp weights/tokenizer.bin "
             "%s/tut/weights/ && %s weights/model.bin %s/tut/weights/model.bin > /dev/null",
             dir, dir, quantize ? quantize : "./quantize", dir);
    if (!check_true(check_run(setup, NULL, NULL) == 0, "tutorial: an int8 model in a "
                    "weights/ folder of its own"))
        return;
    /* a tokenizer not the model's (260 tokens, the model 1024): embed read rows past the
     * embedding table (SIGSEGV), loss printed two lines */
    snprintf(setup, sizeof setup, "mkdir -p %s/tut_tok/weights && cp weights/model.bin "
             "%s/tut_tok/weights/ && cp %s %s/tut_tok/weights/tokenizer.bin", dir, dir,
             write_tokenizer(), dir);
    if (check_true(check_run(setup, NULL, NULL) == 0, "tutorial: another tokenizer beside "
                   "the shipped model")) {
        static const char *const steps[] = {"embed", "loss", "next", "block", "svg lens"};
        for (int i = 0; i < 5; i++) {
            char command[1024], *out = NULL, *err = NULL;
            snprintf(command, sizeof command, "t=$(realpath '%s') && cd %s/tut_tok && "
                     "timeout 120 \"$t\" %s", tutorial, dir, steps[i]);
            int code = check_run(command, &out, &err), lines = 0;
            for (const char *p = err; p && *p; p++) lines += *p == '\n';
            check_true(code == 1 && out && !*out && lines == 1 && strstr(err, "tutorial: "
                       "weights/tokenizer.bin: tokenizer does not belong to weights/model.bin "
                       "(got a GPT-2 tokenizer of 260 tokens, expected the model's: a GPT-2 "
                       "model of 1024)"), "tutorial %s with a tokenizer not the model's: exit "
                       "%d (want 1), one line, no output", steps[i], code);
            free(out);
            free(err);
        }
    }
    static const char *const by_hand[] = {"embed", "block", "svg lens", "svg nucleus"};
    for (int i = 0; i < 4; i++) {
        char command[1024], *out = NULL, *err = NULL;
        snprintf(command, sizeof command, "t=$(realpath '%s') && cd %s/tut && timeout 120 "
                 "\"$t\" %s", tutorial, dir, by_hand[i]);
        int code = check_run(command, &out, &err);
        check_true(code == 1 && out && !*out && err && strstr(err, "tutorial: weights/model.bin: "
                   "this step writes out the shipped kind of model (got int8 matrices"),
                   "tutorial %s with an int8 model: exit %d (want 1), the line naming the "
                   "kind, no output", by_hand[i], code);
        free(out);
        free(err);
    }
    /* a text of TUTORIAL_MAX_TOKENS (256) tokens: 256 x's, one token each; one more is
     * refused (ids[] holds 256); a SIGMA alone (the QUERY defaulted) */
    char x256[300], args[400];
    memset(x256, 'x', 256);
    x256[256] = '\0';
    snprintf(args, sizeof args, "tokens %s", x256);
    expect_program(tutorial, "tutorial tokens of 256 tokens", args, 0, "");
    snprintf(args, sizeof args, "tokens %sx", x256);
    expect_program(tutorial, "tutorial tokens of 257 tokens", args, 1, "tutorial: the text must "
                   "be at most 256 tokens (got 257)");
    expect_program(tutorial, "tutorial kernel 5 (a sigma alone)", "kernel 5", 0, "");
    /* the shipped model's context is 256 (docs/tutorial.md): a text of 250 tokens leaves
     * room for 6 greedy steps (positions 250 .. 255) of next's 8; one of 256 fills it:
     * next takes no step, and loss and cache run on all of it */
    static const struct { const char *step; int n_x; const char *want, *not; } near[] = {
        {"next", 250, "greedy, 6 steps:\n", "position 256"},
        {"next", 250, "\n  position 255: ", "position 256"},
        {"next", 256, "greedy: no step, the text fills the context of 256 tokens\n",
         "position"},
        {"loss", 256, "mean loss ", "nan"},
        {"cache", 256, "\" (256 tokens)\nnext token, prefill: ", "within 1e-4: no"},
    };
    for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
        char command[512], *out = NULL;
        snprintf(command, sizeof command, "timeout 120 %s %s %.*s", tutorial, near[i].step,
                 near[i].n_x, x256);
        int code = check_run(command, &out, NULL);
        check_true(code == 0 && out && strstr(out, near[i].want) && !strstr(out, near[i].not),
                   "tutorial %s of %d tokens (the context 256): exit %d (want 0), prints \"%s\", "
                   "not \"%s\"", near[i].step, near[i].n_x, code, near[i].want, near[i].not);
        free(out);
    }
    /* the arguments' edges, as the usage and the messages give them: SIGMA in (0.01, 1000]
     * and QUERY in (0, 1000]; TOP_K 0 (none) to 5, the toy words: top-k 5 keeps all five,
     * so its draws are those of no cut (seed 1), fool's too */
    expect_program(tutorial, "tutorial kernel 0.01 (SIGMA's open end)", "kernel 0.01", 2,
                   "tutorial: kernel SIGMA: out of range (got '0.01', expected a number in "
                   "(0.01, 1000])");
    expect_program(tutorial, "tutorial kernel 4 0 (QUERY's open end)", "kernel 4 0", 2,
                   "tutorial: kernel QUERY: out of range (got '0', expected a number in "
                   "(0, 1000])");
    expect_program(tutorial, "tutorial kernel 1000 1000 (both closed ends)", "kernel 1000 1000",
                   0, "");
    expect_program(tutorial, "tutorial sample 1 6 (one past the toy words)", "sample 1 6", 2,
                   "tutorial: sample TOP_K: out of range (got '6', expected 0 (none) to 5)");
    {
        char command[512], *all5 = NULL, *none = NULL;
        snprintf(command, sizeof command, "%s sample 1 5", tutorial);
        int code = check_run(command, &all5, NULL);
        snprintf(command, sizeof command, "%s sample 1 0", tutorial);
        check_run(command, &none, NULL);
        const char *rows5 = all5 ? strchr(all5, '\n') : NULL;
        const char *rows0 = none ? strchr(none, '\n') : NULL;
        const char *fool = rows5 ? strstr(rows5, "\nfool ") : NULL;
        check_true(code == 0 && all5 && strncmp(all5, "temperature 1, top-k 5, top-p 1\n", 32)
                   == 0 && rows5 && rows0 && strcmp(rows5, rows0) == 0 && fool &&
                   !strstr(fool, "      0\n"), "tutorial sample 1 5: exit %d (want 0), top-k 5 "
                   "of 5 words draws as no cut, fool drawn", code);
        free(all5);
        free(none);
    }
}

/* A GPT-2 fixture with rotary positions (train --pos rope), written as the format
 * description says: header [10] = positions (1: rotary), and then no wpe tensor unless
 * with_wpe. nh heads of the width C. */
static const char *write_rotary(const char *name, int32_t positions, int nh, int with_wpe) {
    long wpe_bytes = (long)MAX_T * C * (long)sizeof(float);
    const char *path = write_model(name, 20240326, 3, MAX_T, V, L, nh, C, VP,
                                   with_wpe ? 0 : -wpe_bytes);
    FILE *patch = fopen(path, "r+b");
    if (patch) {
        fseek(patch, 10 * (long)sizeof(int32_t), SEEK_SET);
        fwrite(&positions, sizeof positions, 1, patch);
        fclose(patch);
    }
    return path;
}

/* A GPT-2 file with rotary positions: it runs (generation past the context, the
 * attention views, --eval with a variant, int8), and its header field is checked. */
static void test_rotary(const char *tok) {
    char args[1024], out_path[256], text[128];
    const char *rotary = write_rotary("rotary.bin", 1, NH, 0);
    snprintf(args, sizeof args, "%s -z %s -i ab -n 40 -t 0", rotary, tok);
    expect("rotary positions: generates past the context of 16 (context shifts)", args, 0,
           "llm.c GPT-2 checkpoint, fp32, rotary positions; 1 layer,");
    snprintf(out_path, sizeof out_path, "%s/rotary_map.svg", dir);
    snprintf(args, sizeof args, "%s -z %s -i hi -n 5 -t 0 --attn window:w=2 --attn-map %s",
             rotary, tok, out_path);
    expect("rotary positions: --attn window:w=2 --attn-map", args, 0, "rotary positions");
    snprintf(text, sizeof text, "%s/eval.txt", dir);   /* test_eval's text */
    snprintf(args, sizeof args, "%s -z %s --eval %s -c 8 --attn window:w=3", rotary, tok, text);
    expect("rotary positions: --eval with a window", args, 0, "rotary positions");
    const char *quantize = getenv("QUANTIZE");
    if (!quantize || !*quantize) quantize = "./quantize";
    snprintf(out_path, sizeof out_path, "%s/rotary_q8.bin", dir);
    snprintf(args, sizeof args, "%s %s", rotary, out_path);
    expect_program(quantize, "rotary positions: quantize", args, 0, "int8, groups of 32");
    snprintf(args, sizeof args, "%s -z %s -n 4", out_path, tok);
    expect("rotary positions: the int8 file keeps them", args, 0,
           "int8 (llm.c header, version 80), rotary positions;");
    snprintf(args, sizeof args, "%s -z %s -n 1", write_rotary("pos2.bin", 2, NH, 0), tok);
    expect("an unknown position scheme", args, 1, "unknown position scheme (got header [10] "
           "= 2, expected 0 for a learned table or 1 for rotary)");
    snprintf(args, sizeof args, "%s -z %s -n 1", write_rotary("pos_neg.bin", -1, NH, 0), tok);
    expect("a negative position scheme", args, 1, "unknown position scheme (got header [10] "
           "= -1");
    snprintf(args, sizeof args, "%s -z %s -n 1", write_rotary("rot_wpe.bin", 1, NH, 1), tok);
    expect("rotary positions with a wpe table after all", args, 1, "trailing bytes");
    snprintf(args, sizeof args, "%s -z %s -n 1", write_rotary("rot_odd.bin", 1, C, 0), tok);
    expect("rotary positions with a head size of 1", args, 1, "rotary embedding needs an even "
           "head size (got dim 8, n_heads 8: head size 1, expected an even dim / n_heads)");
}

/* Writes an executable shell script at dir/name that prints a check line, a line on stderr
 * and a summary line, and exits with code. Returns its path (static buffer per call). */
static const char *write_fake_test(const char *name, const char *check, const char *noise,
                                   const char *summary, int code) {
    static char paths[2][160];
    static int next;
    char *path = paths[next++ % 2];
    snprintf(path, 160, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return path;
    fprintf(f, "#!/bin/sh\necho '%s'\necho '%s' >&2\necho '%s'\nexit %d\n", check, noise,
            summary, code);
    fclose(f);
    chmod(path, 0755);
    return path;
}

/* The developer's entry points: `make run` builds ./run alone (it built all three programs
 * first: 43 s on a fresh clone), `make help` lists the targets, and tests/run_all.sh shows
 * a test's standard error only when the test fails (the messages its failure paths
 * provoke read as errors among passing checks). Skipped away from the repository. */
static void test_make_and_runner(void) {
    if (check_run("test -f Makefile && test -f tests/run_all.sh && make --version", NULL,
                  NULL) != 0) {
        check_skip("make or the repository's Makefile not found: make run, make help and "
                   "tests/run_all.sh not checked");
        return;
    }
    /* a make of its own: not the flags (B=...) or the jobserver of a make running this */
    char *out = NULL;
    int code = check_run("MAKEFLAGS= MAKELEVEL= make -n run", &out, NULL);
    int train = 0;   /* build/train, the program (build/trainer/ holds objects run links) */
    for (const char *at = out; at && (at = strstr(at, "build/train")) != NULL; at++)
        train |= at[strlen("build/train")] != 'e';
    check_true(code == 0 && out && strstr(out, "./run ") && !train &&
               !strstr(out, "build/quantize"), "make run builds and runs ./run, not ./train "
               "or ./quantize (make -n run)");
    free(out);
    out = NULL;
    /* make train builds the trainer and trains nothing; make retrain writes under build/,
     * never over the shipped weights/ (make train trained into weights/model.bin) */
    code = check_run("MAKEFLAGS= MAKELEVEL= make -n train", &out, NULL);
    check_true(code == 0 && out && strstr(out, "train") && !strstr(out, "./train -d") &&
               !strstr(out, "weights/"), "make train builds ./train and trains nothing "
               "(make -n train)");
    free(out);
    out = NULL;
    code = check_run("MAKEFLAGS= MAKELEVEL= make -n retrain", &out, NULL);
    check_true(code == 0 && out && strstr(out, "./train -d") &&
               strstr(out, "-o build/retrain/model.bin") && !strstr(out, "-o weights/"),
               "make retrain trains into build/retrain/, not weights/ (make -n retrain)");
    free(out);
    out = NULL;
    code = check_run("MAKEFLAGS= MAKELEVEL= make -s help", &out, NULL);
    check_true(code == 0 && out && strstr(out, "  make run ") && strstr(out, "  make test ") &&
               strstr(out, "  make clean ") && strstr(out, "  make help "), "make help lists "
               "the targets, one line each");
    free(out);
    const char *fake[2] = {
        write_fake_test("pass_test", "ok - fine", "an expected message", "pass_test: 1 passed, "
                        "0 failed", 0),
        write_fake_test("fail_test", "FAIL - broken", "why it broke", "fail_test: 0 passed, "
                        "1 failed", 1)};
    for (int i = 0; i < 2; i++) {
        char command[512];
        snprintf(command, sizeof command, "WRAP= sh tests/run_all.sh %s", fake[i]);
        out = NULL;
        code = check_run(command, &out, NULL);
        int shown = out && strstr(out, i ? "why it broke" : "an expected message");
        check_true(i ? code == 1 && shown : code == 0 && out && !shown, "tests/run_all.sh: a "
                   "%s test's standard error is %s", i ? "failing" : "passing",
                   i ? "shown" : "not shown");
        free(out);
    }
}

int main(void) {
    run_bin = getenv("RUN");
    if (!run_bin || !*run_bin) run_bin = "./run";
    snprintf(dir, sizeof dir, "/tmp/test_cli_XXXXXX");
    if (!mkdtemp(dir)) {
        check_true(0, "could not make a temporary folder");
        return check_summary("test_cli");
    }
    static char model[128];   /* the tests' model, kept past write_model's later calls */
    snprintf(model, sizeof model, "%s",
             write_model("model.bin", 20240326, 3, MAX_T, V, L, NH, C, VP, 0));
    const char *tok = write_tokenizer();
    test_usage_errors(model, tok);
    test_bad_files(tok);
    test_bad_llama_files(write_llama_tokenizer());
    test_keep_llama(write_llama_tokenizer());
    test_bad_inputs(model, tok);
    test_strict_parsing(model, tok);
    test_resource_limits(model, tok);
    test_special_files(model, tok);
    test_standard_input(model, tok);
    test_output_and_threads(model, tok);
    test_numerical_edges(model, tok);
    test_generation(model, tok);
    test_long_generation(model, tok);
    test_attention_views(model, tok);
    test_attention_limits(tok);
    test_eval(model, tok);
    test_llama2c_generation();
    test_llama_interactive();
    test_quantize_program(model, tok);
    test_quantize_llama2c();
    test_files_not_ours(model, tok);
    test_attention_records(tok);
    test_train_flags();
    test_tutorial_program();
    test_rotary(tok);
    test_make_and_runner();
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    check_run(command, NULL, NULL);
    return check_summary("test_cli");
}
