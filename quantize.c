/* quantize.c: write the int8 form of a checkpoint (the third program).
 *
 * Loads any checkpoint run can load (checkpoint.c validates it), then writes every weight
 * matrix as int8 with one fp32 scale per group of GS values along each row: GPT-2 models
 * as llm.c's header with version 80, Llama models as llama2.c's version 2 (which
 * llama2.c's runq also reads when GS divides the model's widths). Norms, biases and
 * position embeddings stay fp32. run then multiplies in int8 (kernels_matmuls).
 */
#include <errno.h>        /* errno, ENOENT */
#include <stdint.h>       /* uint32_t */
#include <stdio.h>        /* fprintf, printf, fopen, fread */
#include <stdlib.h>       /* EXIT_SUCCESS */
#include <string.h>       /* memcpy, strerror */
#include <unistd.h>       /* access (POSIX) */

#include "checkpoint.h"   /* checkpoint_load, checkpoint_save_q8 */
#include "cli.h"          /* cli_next, cli_usage_error */
#include "quant.h"        /* QUANT_GROUP_MAX */
#include "os.h"           /* os_check_output, os_lock, os_same_path: one writer, never IN */

enum { EXIT_BAD_DATA = 1 };
enum { OPT_GROUP, OPT_FORCE, OPT_HELP };

static const CliOption OPTIONS[] = {
    {OPT_GROUP, "-g", "--group", CLI_INT, 1, QUANT_GROUP_MAX, 0, NULL},
    {OPT_FORCE, NULL, "--force", CLI_NONE, 0, 0, 0, NULL},
    {OPT_HELP, "-h", "--help", CLI_NONE, 0, 0, 0, NULL},
};
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0] };

static void usage(FILE *f) {
    fprintf(f, "Usage: quantize IN.bin OUT.bin [-g GS] [--force]\n"
               "Write the int8 form of the checkpoint IN.bin (any format run loads) to OUT.bin:\n"
               "every matrix as int8 values with one fp32 scale per GS values along each row\n"
               "(default %d; the last group of a row may be shorter), norms and biases fp32.\n"
               "OUT.bin is written to a new file in its folder, named OUT.bin.tmp-XXXXXX and\n"
               "renamed over it when complete (an existing OUT.bin keeps its mode; on Linux\n"
               "the file has no name until then: a run killed while writing leaves none); it\n"
               "must be a new path or a regular file you may write, not IN.bin, and no other\n"
               "process may be writing it (OUT.bin.lock is held meanwhile). An existing\n"
               "OUT.bin is replaced only if it is empty or the int8 file of a model of IN's\n"
               "shape (llm.c's header with version 80, llama2.c's version 2), so that a\n"
               "mistyped path or swapped paths lose no other file, fp32, bf16 or other\n"
               "models' included.\n"
               "  -g, --group GS   values per scale, 1..%d\n"
               "      --force      replace OUT.bin whatever it holds\n"
               "  -h, --help       print this help and exit\n"
               "Exit status: 0 ok, 1 bad data or runtime failure, 2 usage error.\n",
            CHECKPOINT_Q8_GROUP, QUANT_GROUP_MAX);
}

/* 1 if replacing path loses nothing quantize could not write again: no file there, an
 * empty one, or an int8 checkpoint as quantize writes them (llm.c's magic and version 80,
 * llama2.c's "ak42" and version 2) of c's shape, the model being quantized again (another
 * group size, say); never an fp32 or bf16 checkpoint (the source, with the paths swapped)
 * nor another model's int8 file (a mistyped path); else 0 after a stderr line. */
static int replaceable(const char *path, const Config *c) {
    FILE *f = fopen(path, "rb");
    if (!f && errno == ENOENT) return 1;   /* nothing there */
    if (!f) {
        fprintf(stderr, "quantize: %s: exists and cannot be read to tell what it holds (got "
                "\"%s\", expected a new path or a checkpoint to replace; --force replaces it)\n",
                path, strerror(errno));
        return 0;
    }
    int32_t h[9] = {0};   /* magic, version, and the shape's first 7 fields */
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n == 0) return 1;
    int gpt2 = n == sizeof h && (uint32_t)h[0] == CHECKPOINT_GPT2_MAGIC;
    int llama = n == sizeof h && (uint32_t)h[0] == CHECKPOINT_LLAMA_MAGIC;
    const char *what = "a file that starts as neither llm.c's version 80 nor llama2.c's "
                       "version 2";
    if ((gpt2 && h[1] != CHECKPOINT_GPT2_Q8) || (llama && h[1] != CHECKPOINT_LLAMA_Q8)) {
        what = "a checkpoint of another version, fp32 or bf16: an input, perhaps, with the "
               "paths swapped";
    } else if (gpt2 || llama) {   /* llm.c: maxT V L NH C; llama2.c: C Hd L NH NKV V S */
        int same = gpt2 ? c->family == MODEL_GPT2 && h[2] == c->seq_len &&
                          h[3] == c->vocab_size && h[4] == c->n_layers &&
                          h[5] == c->n_heads && h[6] == c->dim
                        : c->family == MODEL_LLAMA && h[2] == c->dim &&
                          h[3] == c->hidden_dim && h[4] == c->n_layers &&
                          h[5] == c->n_heads && h[6] == c->n_kv_heads &&
                          h[7] == c->vocab_size && h[8] == c->seq_len;
        if (same) return 1;
        what = "the int8 file of a model of another shape";
    }
    fprintf(stderr, "quantize: %s: exists and is not this model's int8 file (got %s, expected "
            "a new path or the int8 file of IN's shape; --force replaces it)\n", path, what);
    return 0;
}

/* A Llama model's int8 file is llama2.c's version 2, which llama2.c's runq reads only when
 * GS divides dim and hidden_dim (its groups run on across rows, where this file's rows end
 * in a shorter group): says so on stderr, with the largest group size below GS that does. */
static void runq_note(const Config *c, int group) {
    if (c->family != MODEL_LLAMA || (c->dim % group == 0 && c->hidden_dim % group == 0)) return;
    int fits = group;
    while (c->dim % fits != 0 || c->hidden_dim % fits != 0) fits--;
    char widths[64];   /* the widths the groups do not divide */
    if (c->dim % group != 0 && c->hidden_dim % group != 0)
        snprintf(widths, sizeof widths, "widths %d and %d", c->dim, c->hidden_dim);
    else
        snprintf(widths, sizeof widths, "width %d", c->dim % group ? c->dim : c->hidden_dim);
    fprintf(stderr, "quantize: note: groups of %d do not divide the %s, so llama2.c's runq "
            "cannot read this file (run can); -g %d writes one both read\n", group, widths,
            fits);
}

int main(int argc, char **argv) {
    os_program_start("quantize");   /* a closed pipe: a write error, as a full disk */
    const char *paths[2] = {NULL, NULL};
    int n_paths = 0, group = CHECKPOINT_Q8_GROUP, force = 0;
    CliArg arg = {0};   /* carries a "--" from one argument to the next */
    for (int i = 1; i < argc; i++) {
        int rc = cli_next("quantize", OPTIONS, N_OPTIONS, argc, argv, &i, &arg);
        if (rc != 0) return rc;
        if (!arg.option && !arg.value) continue;   /* "--" */
        if (!arg.option) {
            if (n_paths == 2)
                return cli_usage_error("quantize", arg.value, "too many arguments", NULL,
                                       "IN.bin and OUT.bin only");
            rc = cli_check_path("quantize", n_paths == 0 ? "IN.bin" : "OUT.bin", arg.value);
            if (rc != 0) return rc;
            paths[n_paths++] = arg.value;
        } else if (arg.option->id == OPT_GROUP) {
            group = arg.number;
        } else if (arg.option->id == OPT_FORCE) {
            force = 1;
        } else {
            usage(stdout);
            return cli_stdout_ok("quantize") == 0 ? EXIT_SUCCESS : EXIT_BAD_DATA;
        }
    }
    if (n_paths != 2) {
        char got[32];
        snprintf(got, sizeof got, "%d of 2", n_paths);
        return cli_usage_error("quantize", "arguments", "missing", got, "IN.bin and OUT.bin");
    }
    if (os_same_file(paths[0], paths[1]))
        return cli_usage_error("quantize", paths[1], "is the same file as the input",
                               paths[0], "another path for OUT.bin");
    /* IN named as OUT's lock: an existing file there os_lock refuses; a missing one must be
     * reported missing, not read as the lock this run makes */
    char lock_path[OS_PATH_CAP];
    snprintf(lock_path, sizeof lock_path, "%s%s", paths[1], OS_LOCK_SUFFIX);
    int missing = access(paths[0], F_OK) != 0 ? errno : 0;
    if (missing && os_same_path(paths[0], lock_path)) {
        fprintf(stderr, "quantize: %s: cannot open (got \"%s\", expected a model file; the name "
                "is the lock this run takes on %s)\n", paths[0], strerror(missing), paths[1]);
        return EXIT_BAD_DATA;
    }
    const char *inputs[] = {paths[0]};
    SaveLock lock;
    if (os_check_output("quantize", paths[1], "the int8 model", inputs, 1) != 0 ||
        os_lock(&lock, "quantize", paths[1]) != 0)
        return EXIT_BAD_DATA;
    Checkpoint ck;
    int status = checkpoint_load(&ck, paths[0]);
    if (status == 0 && !force && !replaceable(paths[1], &ck.config)) {
        checkpoint_free(&ck);
        status = -1;
    } else if (status == 0) {
        status = checkpoint_save_q8(&ck, paths[1], group);
        if (status == 0)
            runq_note(&ck.config, group);
        if (status == 0)
            fprintf(stderr, "quantize: %s (%s) -> %s: int8, groups of %d%s\n", paths[0],
                    ck.format, paths[1], group, !ck.config.half_kv ? ""
                    : ck.config.family == MODEL_GPT2
                    ? " (llm.c's header, version 80, which holds no tokenizer: run it with -z "
                      "and an llm.c tokenizer file of the same vocabulary; it computes without "
                      "llama.cpp's F16 KV rounding)"
                    : " (llama2.c's version 2, which holds no tokenizer: run it with -z and "
                      "a llama2.c tokenizer.bin of the same vocabulary; it computes without "
                      "llama.cpp's F16 KV rounding)");
        checkpoint_free(&ck);
    }
    os_unlock(&lock);
    return status == 0 ? EXIT_SUCCESS : EXIT_BAD_DATA;
}
