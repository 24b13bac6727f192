/* fuzz_cli.c: fuzz target for the command line as a whole: run.c's main, called in
 * process on an argv built from the input (split at NUL and newline bytes, at most
 * MAX_ARGS arguments after argv[0] = "run"). run.c is compiled for this target with
 * -Dmain=run_main (tests/fuzz/fuzz.mk), so its main is callable; it never calls exit().
 *
 * Each run happens inside a sandbox folder of small files (made once, removed at exit),
 * so that relative paths reach only these: model.bin and tokenizer.bin (links to the
 * shipped ones), q.bin (its int8 form), g.bin (a tiny GPT-2), b.bin (the same in bf16,
 * vocabulary padded), n.bin (a tiny GPT-2 whose weights are all NaN), l.bin and l8.bin (a
 * tiny Llama, fp32 and int8) with lt.bin (its tokenizer), p.txt (a prompt), e.txt (text
 * for --eval). stdout goes to /dev/null and stdin reads /dev/null. The exit code must be 0,
 * 1 or 2; a crash, sanitizer report, leak or hang is a finding.
 */
#include <fcntl.h>       /* open, O_RDONLY, O_DIRECTORY */
#include <stdio.h>       /* freopen, remove */
#include <stdlib.h>      /* atexit, malloc, free */
#include <string.h>      /* memcpy, memset, strlen */
#include <sys/stat.h>    /* mkdir */
#include <unistd.h>      /* fchdir, getcwd, symlink, rmdir */

#include "tests/fuzz/fuzz.h"   /* the entry points, FUZZ_CHECK, writers, paths */
#include "checkpoint.h"  /* Config, MODEL_GPT2, MODEL_LLAMA */

#define MAX_ARGS 12                  /* arguments after argv[0] */
#define SANDBOX_MODE 0700            /* the sandbox folder is private */
#define EXIT_USAGE_MAX 2             /* run.c's exit codes are 0, 1 and 2 */
#define Q8_GROUP 32                  /* q.bin's int8 group size (the quantize default) */
#define LLAMA_Q8_GROUP 4             /* l8.bin's (divides the tiny width 8) */
#define TINY_SEED 42                 /* weights of the tiny models */
#define TINY_GPT2_VOCAB 1024         /* g.bin: as many tokens as the shipped tokenizer */
#define TINY_CTX 16                  /* g.bin and l.bin: context, */
#define TINY_HEADS 2                 /* heads, */
#define TINY_DIM 8                   /* width, */
#define TINY_HIDDEN 16               /* Llama MLP width */
#define TINY_PADDING 6               /* b.bin: padded vocabulary Vp = V + 6 */
#define NAN_BYTE 0xFF                /* n.bin: every weight 0xFFFFFFFF, a NaN */

/* run.c's main, renamed by -Dmain=run_main. */
int run_main(int argc, char **argv);

/* The sandbox's files, in the order they are made (and removed in reverse). */
static const char *const FILES[] = {
    "model.bin", "tokenizer.bin", "q.bin", "g.bin", "b.bin", "n.bin", "lt.bin", "l.bin",
    "l8.bin", "p.txt", "e.txt",
};
enum { N_FILES = sizeof FILES / sizeof FILES[0] };
static const char PROMPT[] = "ROMEO:\nWhat light";
static const char EVAL_TEXT[] =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n";

static char sandbox[FUZZ_PATH_MAX];
static int sandbox_fd = -1, home_fd = -1;

/* Removes the sandbox and everything in it (at exit). */
static void remove_sandbox(void) {
    if (home_fd < 0 || sandbox_fd < 0 || fchdir(sandbox_fd) != 0) return;
    for (int i = N_FILES - 1; i >= 0; i--) remove(FILES[i]);
    if (fchdir(home_fd) == 0) rmdir(sandbox);
}

/* Writes a tiny-file writer's bytes (NULL: out of memory) to name, then frees them;
 * fatal on failure. */
static void put_file(const char *name, unsigned char *bytes, size_t size) {
    if (!bytes || fuzz_write_file(name, bytes, size) != 0)
        fuzz_fail("sandbox: cannot make %s", name);
    free(bytes);
}

/* Makes the sandbox's files in the current folder (the sandbox). */
static void fill_sandbox(const char *model, const char *tokenizer) {
    if (symlink(model, "model.bin") != 0 || symlink(tokenizer, "tokenizer.bin") != 0)
        fuzz_fail("sandbox: cannot link the shipped model");
    if (fuzz_write_q8("model.bin", "q.bin", Q8_GROUP) != 0) fuzz_fail("sandbox: no q.bin");
    size_t size = 0;
    unsigned char *bytes;
    Config g = {.family = MODEL_GPT2, .seq_len = TINY_CTX, .vocab_size = TINY_GPT2_VOCAB,
                .padded_vocab_size = TINY_GPT2_VOCAB, .n_layers = 1, .n_heads = TINY_HEADS,
                .n_kv_heads = TINY_HEADS, .dim = TINY_DIM};
    bytes = fuzz_tiny_gpt2(&g, 0, TINY_SEED, &size);   /* (sets size before put_file reads it) */
    if (bytes)   /* n.bin: the same header, NaN weights */
        memset(bytes + CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t), NAN_BYTE,
               size - CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t));
    put_file("n.bin", bytes, size);
    bytes = fuzz_tiny_gpt2(&g, 0, TINY_SEED, &size);
    put_file("g.bin", bytes, size);
    g.padded_vocab_size = TINY_GPT2_VOCAB + TINY_PADDING;
    bytes = fuzz_tiny_gpt2(&g, 1, TINY_SEED, &size);
    put_file("b.bin", bytes, size);
    int vocab = 0;
    bytes = fuzz_tiny_llama_tokenizer(&size, &vocab);
    put_file("lt.bin", bytes, size);
    Config l = {.family = MODEL_LLAMA, .seq_len = TINY_CTX, .vocab_size = vocab,
                .padded_vocab_size = vocab, .n_layers = 1, .n_heads = TINY_HEADS,
                .n_kv_heads = 1, .dim = TINY_DIM, .hidden_dim = TINY_HIDDEN};
    bytes = fuzz_tiny_llama(&l, 0, 0, TINY_SEED, &size);
    put_file("l.bin", bytes, size);
    if (fuzz_write_q8("l.bin", "l8.bin", LLAMA_Q8_GROUP) != 0) fuzz_fail("sandbox: no l8.bin");
    if (fuzz_write_file("p.txt", PROMPT, strlen(PROMPT)) != 0 ||
        fuzz_write_file("e.txt", EVAL_TEXT, strlen(EVAL_TEXT)) != 0)
        fuzz_fail("sandbox: cannot write the text files");
}

/* out = the absolute path of the repository file relative (the sandbox links to it). */
static void absolute_repo_path(char *out, size_t cap, const char *relative) {
    char path[FUZZ_PATH_MAX], cwd[FUZZ_PATH_MAX];
    if (fuzz_repo_path(path, sizeof path, relative) != 0 || !fuzz_file_exists(path))
        fuzz_fail("%s: not found (run from the repository, or set FUZZ_ROOT)", relative);
    int n = path[0] == '/' ? snprintf(out, cap, "%s", path)
          : getcwd(cwd, sizeof cwd) ? snprintf(out, cap, "%s/%s", cwd, path) : -1;
    if (n < 0 || (size_t)n >= cap) fuzz_fail("%s: path too long", relative);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char model[FUZZ_PATH_MAX], tokenizer[FUZZ_PATH_MAX];
    absolute_repo_path(model, sizeof model, "weights/model.bin");
    absolute_repo_path(tokenizer, sizeof tokenizer, "weights/tokenizer.bin");
    if (fuzz_temp_path(sandbox, sizeof sandbox, "cli") != 0 || mkdir(sandbox, SANDBOX_MODE) != 0)
        fuzz_fail("%s: cannot make the sandbox", sandbox);
    home_fd = open(".", O_RDONLY | O_DIRECTORY);
    sandbox_fd = open(sandbox, O_RDONLY | O_DIRECTORY);
    if (home_fd < 0 || sandbox_fd < 0 || fchdir(sandbox_fd) != 0)
        fuzz_fail("%s: cannot enter the sandbox", sandbox);
    atexit(remove_sandbox);
    fill_sandbox(model, tokenizer);
    if (fchdir(home_fd) != 0) fuzz_fail("cannot leave the sandbox");
    /* the generated text would flood the fuzzer's output; a prompt file of /dev/stdin
     * must not wait for a terminal */
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "r", stdin))
        fuzz_fail("cannot redirect stdout and stdin to /dev/null");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char program[] = "run";
    char *text = malloc(size + 1), *argv[MAX_ARGS + 2] = {program};
    int argc = 1;
    if (!text) fuzz_fail("out of memory for %zu bytes", size);
    if (size) memcpy(text, data, size);
    text[size] = '\0';
    /* fields end at NUL or newline; a final separator ends the last field */
    for (size_t start = 0, i = 0; i <= size && argc <= MAX_ARGS; i++) {
        if (i < size && text[i] != '\0' && text[i] != '\n') continue;
        if (i == size && start == size) break;
        text[i] = '\0';
        argv[argc++] = text + start;
        start = i + 1;
    }
    argv[argc] = NULL;
    if (fchdir(sandbox_fd) != 0) fuzz_fail("cannot enter the sandbox");
    int status = run_main(argc, argv);
    if (fchdir(home_fd) != 0) fuzz_fail("cannot leave the sandbox");
    FUZZ_CHECK(status >= 0 && status <= EXIT_USAGE_MAX);
    free(text);
    return 0;
}
