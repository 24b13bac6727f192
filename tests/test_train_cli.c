/* test_train_cli.c: the train program, run as a user runs it ($TRAIN, default ./train).
 *
 * Usage errors and exit codes, defaults that fit the run, empty / short / binary data, no
 * overwriting, corrupt or mismatched state files, interrupted saves, kill -9 at random
 * moments of a run that saves every step and at each rename of its first save, one
 * writer per checkpoint, and the contracts of its outputs (memory, threads, stdout).
 */
#include "train.h"

#include <fcntl.h>     /* open, fcntl, struct flock (POSIX: holding a lock) */
#include <math.h>      /* fabs, sqrt, exp, log, tanh, NAN */
#include <stdarg.h>    /* va_list (format_into) */
#include <stdint.h>    /* uint64_t */
#include <stdio.h>     /* printf, snprintf, remove */
#include <stdlib.h>    /* malloc, calloc, free, mkdtemp, setenv */
#include <string.h>    /* memcpy, memcmp, strstr */
#include <signal.h>    /* kill, SIGKILL (POSIX: the kill -9 test) */
#include <sys/stat.h>  /* mkdir, mkfifo */
#include <sys/wait.h>  /* waitpid */
#include <time.h>      /* clock, clock_gettime, nanosleep */
#include <unistd.h>    /* access, fork, execl, getcwd, rmdir, close, getpid, unlink */

#include "attention.h"    /* attention_backward */
#include "attention_spec.h"   /* attention_spec_parse_layers: the variants' runs */
#include "hash.h"         /* hash_fnv1a64: the merges' checksum */
#include "kernels.h"      /* kernels_gelu, KERNELS_NORM_EPS, kernels_set_threads */
#include "model.h"        /* model_load, model_forward */
#include "tokenizer.h"    /* tokenizer_load, _encode, _decode, _next_piece, _merge */
#include "tests/check.h"  /* check_* */
#include "tests/train_fixtures.h"   /* tiny_config, run_init, run_steps, format_into, ... */

/* ------------------------------------------------------------------------- */
/* The train program: flags, exit codes, data, files, and crashes            */

#define TRAIN_ENV "OMP_NUM_THREADS=1"   /* tiny models: one thread is quickest; same bits */
#define TINY "-v 300 -L 1 -C 16 -H 2 -T 8 -B 4"   /* a model that trains in milliseconds */
#define CAP 4096                        /* paths and commands built here */

static char train_bin[CAP] = "./train";   /* absolute and quoted for sh once main has run */
static const char *run_bin = "./run";

/* A new empty folder under /tmp, its path in dir (CAP bytes). Returns 0 or -1. */
static int make_temp_dir(char *dir) {
    format_into(dir, CAP, "/tmp/test_train_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static void remove_dir(const char *dir) {
    char command[CAP];
    format_into(command, sizeof command, "rm -rf '%s'", dir);
    check_run(command, NULL, NULL);
}

/* dir/name into path (CAP bytes); returns path. */
static char *join(char *path, const char *dir, const char *name) {
    format_into(path, CAP, "%s/%s", dir, name);
    return path;
}

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A small training text: 40 times two lines of Hamlet (3.6 KB). */
static int write_play(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (int i = 0; i < 40; i++)
        fprintf(f, "To be, or not to be, that is the question %d.\nWhether 'tis nobler in the "
                "mind to suffer.\n", i);
    return fclose(f);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* Runs "TRAIN_ENV $TRAIN args"; returns the exit code; out and err as check_run. */
static int train(const char *args, char **out, char **err) {
    char command[3 * CAP];
    format_into(command, sizeof command, "%s %s %s", TRAIN_ENV, train_bin, args);
    return check_run(command, out, err);
}

/* Runs train with args, checks the exit code and that stderr (or stdout) has `message`. */
static void expect_train(const char *what, const char *args, int want_code, const char *message) {
    char *out = NULL, *err = NULL;
    int code = train(args, &out, &err);
    int has = (err && strstr(err, message)) || (out && strstr(out, message));
    check_true(code == want_code && has, "train %s: exit %d (want %d), output has \"%s\"%s%s",
               what, code, want_code, message, has ? "" : "; stderr: ", has || !err ? "" : err);
    free(out);
    free(err);
}

/* A usage error: exit 2 and exactly two stderr lines, "train: FLAG: PROBLEM (got X,
 * expected Y)" containing message, then the hint; no help text. */
static void expect_usage(const char *what, const char *args, const char *message) {
    char *out = NULL, *err = NULL;
    int code = train(args, &out, &err);
    const char *hint = "Try 'train --help' for the options.\n";
    const char *second = err ? strchr(err, '\n') : NULL;
    int one_line = err && second && !strcmp(second + 1, hint) && !strncmp(err, "train: ", 7) &&
                   strstr(err, "(got ") && strstr(err, ", expected ");
    int has = err && strstr(err, message) && (!second || strstr(err, message) < second);
    int ok = code == 2 && one_line && has && !(out && strstr(out, "Usage"));
    check_true(ok, "train %s: exit %d (want 2), one line with \"%s\" then the hint%s%s", what,
               code, message, ok || !err ? "" : "; stderr: ", ok || !err ? "" : err);
    free(out);
    free(err);
}

/* The final validation figures of a run (train with args, which wrote model and tok from
 * the file text, context 8), against the engine's own forward (model.c, not the trainer's)
 * summed here in float64 the trainer's way: the validation bytes' tokens in windows of 8
 * inputs from the first, each position predicting the token after it, the last window
 * shorter; nats over every prediction, bits over every validation byte. */
static void check_final_against_run(const char *text, const char *model, const char *tok,
                                    const char *args) {
    enum { T = 8 };
    char *out = NULL;
    unsigned long from = 0, to = 0, bytes = 0;
    double nats = (double)NAN, bits = (double)NAN, sum = 0.0;
    long count = 0;
    int code = train(args, &out, NULL);
    const char *at = out ? strstr(out, "validation bytes [") : NULL;
    if (at) sscanf(at, "validation bytes [%lu, %lu)", &from, &to);
    at = out ? strstr(out, "final: train") : NULL;
    at = at ? strstr(at, "validation ") : NULL;
    if (at) sscanf(at, "validation %lf nats/token (%lf bits/char over %lu bytes)", &nats, &bits,
                   &bytes);
    free(out);
    size_t size = 0, n = 0;
    char *all = check_read_file(text, &size);
    int *ids = all && to > from && to <= size ? malloc((to - from + 1) * sizeof *ids) : NULL;
    Tokenizer t;
    Model m;
    int ok = ids && tokenizer_load(&t, tok) == 0;
    if (ok) {
        ok = tokenizer_encode(&t, all + from, to - from, ids, to - from + 1, &n) == 0 && n > 1;
        tokenizer_free(&t);
    }
    if (ok && model_load(&m, model, T, T) == 0) {
        for (size_t w = 0; ok && w + 1 < n; w += T) {
            int len = n - 1 - w < T ? (int)(n - 1 - w) : T;
            const float *logits = model_forward(&m, ids + w, len, 0, 1);
            ok = logits != NULL;
            for (int i = 0; ok && i < len; i++, count++) {
                const float *row = logits + (size_t)i * (size_t)m.config.vocab_size;
                double max = (double)row[0], z = 0.0;
                for (int v = 1; v < m.config.vocab_size; v++) max = fmax(max, (double)row[v]);
                for (int v = 0; v < m.config.vocab_size; v++) z += exp((double)row[v] - max);
                sum += max + log(z) - (double)row[ids[w + (size_t)i + 1]];
            }
        }
        model_free(&m);
    } else {
        ok = 0;
    }
    free(all);
    free(ids);
    double want_nats = count ? sum / (double)count : (double)NAN;
    double want_bits = sum / (log(2.0) * (double)(to - from));
    check_true(code == 0 && ok && bytes == to - from && fabs(nats - want_nats) <= 1e-4 &&
               fabs(bits - want_bits) <= 1e-4,
               "train's final validation figures are the engine's forward's, summed in float64 "
               "over bytes [%lu, %lu): %.4f vs %.6f nats/token, %.4f vs %.6f bits/char", from,
               to, nats, want_nats, bits, want_bits);
}

/* Flags: one-line usage errors, --name=value, and one test per exit-code row. */
static void test_cli(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "cli: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "cli: write a small text"))
        goto done;
    join(model, dir, "model.bin");
    join(tok, dir, "tok.bin");
    /* exit 2: usage errors, each one line naming the flag, then the hint */
    expect_usage("unknown flag", "--bogus 1", "--bogus: unknown option (got '--bogus'");
    expect_usage("unknown flag without a value", "--bogus", "--bogus: unknown option");
    expect_usage("unknown long flag with =", "--bogus=1", "--bogus: unknown option");
    expect_usage("malformed number", "-n 12x", "-n: invalid value (got '12x', expected an "
                 "integer in 0..10000000)");
    expect_usage("malformed number after =", "--steps=12x", "--steps: invalid value (got '12x'");
    expect_usage("out of range", "-p 0.95", "-p: invalid value (got '0.95', expected a number "
                 "in 0..0.9)");
    expect_usage("the top of each float range as written, then a stray word",
                 "-p 0.9 --attn-dropout 0.9 --token-noise 0.9 --ema 0.99999 stray",
                 "stray: unexpected argument");
    expect_usage("missing value", "-L", "-L: missing value (got nothing after it, expected an "
                 "integer in 1..64)");
    expect_usage("value given to a switch", "--resume=1", "--resume: takes no value");
    expect_usage("stray word", "model.bin", "model.bin: unexpected argument");
    expect_usage("control byte in an argument, shown as \\xHH", "\"$(printf 'x\\001y')\"",
                 "x\\x01y: unexpected argument (got 'x\\x01y'");
    expect_usage("heads not dividing width", "-C 64 -H 5", "-H: heads must divide the width "
                 "(got 5 heads for width 64");
    expect_usage("shape flags with -r", "-r -L 2", "-L: not allowed with -r (got -L with -r, "
                 "expected only -d, -o, -z, -e, -n, --sample, --threads, --max-memory and --force");
    expect_usage("warmup beyond the steps", "-n 10 -w 20", "-w: warmup exceeds the steps (got "
                 "-w 20 with -n 10");
    /* -n 0 (a checkpoint of the initial weights) takes no -w: its state kept -w 7, and no
     * resume could then ask for fewer than 7 steps */
    expect_usage("warmup with no steps", "-n 0 -w 7", "-w: warmup exceeds the steps (got "
                 "-w 7 with -n 0");
    expect_usage("tokenizer onto the checkpoint", "-o a.bin -z a.bin", "-z: same file as the "
                 "checkpoint");
    expect_usage("an unknown position scheme", "--pos alibi", "--pos: unknown position scheme "
                 "(got 'alibi', expected learned (a table) or rope (rotary))");
    expect_usage("rope with an odd head size", "--pos rope -C 24 -H 8", "--pos: rope rotates "
                 "pairs of a head's dimensions (got head size 3 (-C 24 / -H 8), expected an "
                 "even head size)");
    expect_usage("--pos with -r (the checkpoint records it)", "-r --pos rope", "--pos: not "
                 "allowed with -r (got --pos with -r");
    /* exit 1: bad data */
    format_into(args, sizeof args, "-d %s/no_such_file.txt -o %s", dir, model);
    expect_train("missing data", args, 1, "no_such_file.txt: cannot open");
    format_into(args, sizeof args, "-d '' -o %s", model);
    expect_train("empty data path", args, 1, "train: empty path (got \"\", expected a readable "
                 "text file)");
    /* exit 0: help, and a run (--steps=5 as --steps 5) */
    expect_train("--help", "--help", 0, "Usage: train [options]");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " --steps=5 --eval-every=5",
             text, model, tok);
    expect_train("--steps=5 (long option with =)", args, 0, "schedule: 5 steps");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 4 -e 2 --sample 7 --force",
                text, model, tok);
    expect_train("--sample 7: a greedy sample of 7 tokens after each checkpoint", args, 0,
                 "sample (7 tokens from a newline, greedy):");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 0 --sample 3 --force",
                text, model, tok);
    expect_train("--sample 3 with -n 0: the one checkpoint's sample too", args, 0,
                 "sample (3 tokens from a newline, greedy):");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 0 --sample 20 --force",
                text, model, tok);
    expect_train("--sample 20 with -T 8: 7 tokens, the context less one, as --help says", args,
                 0, "sample (7 tokens from a newline, greedy):");
    {   /* the last sample is what ./run -t 0 writes after a newline, from that checkpoint */
        static const char header[] = "sample (7 tokens from a newline, greedy):\n";
        format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 4 -e 2 --sample 7 --force",
                    text, model, tok);
        char *sampled = NULL, *ran = NULL, *last = NULL;
        int code = train(args, &sampled, NULL);
        for (char *at = sampled; at && (at = strstr(at, header)) != NULL; at++) last = at;
        format_into(args, sizeof args, "printf '\\n' > %s/newline.txt && %s %s -z %s -t 0 -n 7 "
                    "-f %s/newline.txt", dir, run_bin, model, tok, dir);
        int run_code = check_run(args, &ran, NULL);
        /* run echoes the newline it starts from; the sample does not */
        check_true(code == 0 && run_code == 0 && last && ran && ran[0] == '\n' &&
                   strlen(ran) > 1 &&
                   strncmp(last + strlen(header), ran + 1, strlen(ran + 1)) == 0,
                   "--sample 7 (T - 1): the last sample is ./run -t 0 -n 7's text from a "
                   "newline, byte for byte (exit %d, %d)", code, run_code);
        free(sampled);
        free(ran);
    }
    /* a run, then run generates from it, and -r with a new total */
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 20 -w 2 -e 10 --force", text,
             model, tok);
    check_final_against_run(text, model, tok, args);   /* the tiny end-to-end run */
    format_into(args, sizeof args, "%s %s -z %s -n 5 -t 0 -i To", run_bin, model, tok);
    char *out = NULL;
    int code = check_run(args, &out, NULL);
    check_true(code == 0 && out && strncmp(out, "To", 2) == 0,
               "run generates from the trained checkpoint (exit %d)", code);
    free(out);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s", text, model, tok);
    expect_train("resume a finished run", args, 0, "resuming at step 20 of 20");
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 10", text, model, tok);
    expect_train("-r with a total below the step reached", args, 2, "-n: new total out of "
                 "range (got 10, expected at least the step reached, 20");
    /* -n 0 is in -n's range with -r too: a -n 0 run (warmup 1) resumed with its own total
     * (refused as below the warmup, though the state holds that very total) */
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 0 --force", text, model, tok);
    expect_train("-n 0: the initial weights' checkpoint", args, 0, "schedule: 0 steps, warmup 1");
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 0", text, model, tok);
    expect_train("-r -n 0 at step 0: its own total", args, 0, "resuming at step 0 of 0");
    /* rotary positions: a run, run generates from its file, -r continues it */
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " --pos rope -n 10 -w 2 -e 5 "
                "--force", text, model, tok);
    expect_train("--pos rope: a tiny run", args, 0, "V 300, rotary positions: ");
    format_into(args, sizeof args, "%s %s -z %s -n 5 -t 0 -i To", run_bin, model, tok);
    char *err = NULL;
    code = check_run(args, &out, &err);
    check_true(code == 0 && out && strncmp(out, "To", 2) == 0 && err &&
               strstr(err, "fp32, rotary positions;"), "run generates from the rotary "
               "checkpoint and names its positions (exit %d)", code);
    free(out);
    free(err);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 12", text, model, tok);
    expect_train("--pos rope: -r continues the run", args, 0, "resuming at step 10 of 12");
done:
    remove_dir(dir);
}

/* Task: defaults fit the run (the warmup of 100 used to exceed -n 20). */
static void test_default_warmup(void) {
    char dir[CAP], text[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "warmup: temp folder")) return;
    if (check_true(write_play(join(text, dir, "text.txt")) == 0, "warmup: the text written")) {
        format_into(args, sizeof args, "-d %s -o %s/a.bin " TINY " -n 20", text, dir);
        expect_train("-n 20 without -w: warmup min(100, 20 / 10)", args, 0,
                     "schedule: 20 steps, warmup 2,");
        format_into(args, sizeof args, "-d %s -o %s/b.bin -z %s/b.tok " TINY " -n 5", text, dir,
                 dir);
        expect_train("-n 5 without -w: warmup at least 1", args, 0,
                     "schedule: 5 steps, warmup 1,");
        format_into(args, sizeof args, "-d %s -o %s/c.bin -z %s/c.tok " TINY " -n 20 -w 20",
                 text, dir, dir);
        expect_train("-w equal to -n", args, 0, "schedule: 20 steps, warmup 20,");
    }
    remove_dir(dir);
}

#define BINARY_RANDOM 16000       /* the binary file: random bytes, ... */
#define BINARY_ZEROS 50000        /* ... a run of NULs (one piece), random bytes again */
#define BINARY_SECONDS 20.0       /* a generous bound: it takes ~0.2 s */

/* Task: too little text, none, and binary data, each with a clear outcome. */
static void test_bad_data(void) {
    char dir[CAP], path[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "data: temp folder")) return;
    if (check_true(write_bytes(join(path, dir, "empty.txt"), "", 0) == 0,
                   "data: the empty file written")) {
        format_into(args, sizeof args, "-d %s -o %s/e.bin", path, dir);
        expect_train("empty data", args, 1, "empty.txt: empty file (got 0 bytes, expected "
                     "text to train on)");
    }
    const char *line = "Short text, far less than a context.";
    if (check_true(write_bytes(join(path, dir, "short.txt"), line, strlen(line)) == 0,
                   "data: the short file written")) {
        format_into(args, sizeof args, "-d %s -o %s/s.bin", path, dir);
        expect_train("text shorter than one context window", args, 1, "short.txt: too little "
                     "text for a context of 256 tokens (got ");
        expect_train("... says how many tokens it needs", args, 1, "expected at least 258 and 2)");
        char tok[CAP];
        check_true(!exists(join(tok, dir, "s.bin")) && !exists(join(tok, dir, "tokenizer.bin")) &&
                   !exists(join(tok, dir, "tokenizer.bin.tmp")),
                   "data: a refused run leaves no checkpoint, tokenizer or temporary behind");
    }
    /* not regular files: a folder or a FIFO as the text (opening a FIFO would block), a
     * folder as an output, which --force must not remove */
    char other[CAP];
    if (check_true(mkdir(join(path, dir, "folder"), 0700) == 0 &&
                   mkfifo(join(other, dir, "fifo"), 0600) == 0,
                   "data: a folder and a FIFO made")) {
        format_into(args, sizeof args, "-d %s -o %s/f.bin", path, dir);
        expect_train("a folder as the text", args, 1, "folder: not a regular file (got a "
                     "folder, expected a readable text file)");
        format_into(args, sizeof args, "-d %s -o %s/f.bin", other, dir);
        expect_train("a FIFO as the text", args, 1, "fifo: not a regular file (got a FIFO, "
                     "expected a readable text file)");
        format_into(args, sizeof args, "--force -d %s -o %s", other, path);
        expect_train("--force with a folder as the checkpoint", args, 1, "folder: not a regular "
                     "file (got a folder, expected a path for the checkpoint)");
        check_true(access(path, F_OK) == 0, "data: --force left the folder in place");
        format_into(args, sizeof args, "-r -d %s -o %s/none.bin", other, dir);
        expect_train("-r without a checkpoint names the checkpoint", args, 1,
                     "none.bin: nothing to resume");
    }
    unsigned char *bytes = malloc(2 * BINARY_RANDOM + BINARY_ZEROS);
    if (check_true(bytes != NULL, "data: memory for the binary file")) {
        uint64_t s = 2024;
        for (int i = 0; i < 2 * BINARY_RANDOM + BINARY_ZEROS; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            bytes[i] = i >= BINARY_RANDOM && i < BINARY_RANDOM + BINARY_ZEROS ? 0 :
                       (unsigned char)(s >> 56);
        }
        if (check_true(write_bytes(join(path, dir, "data.bin"), bytes,
                               2 * BINARY_RANDOM + BINARY_ZEROS) == 0,
                       "data: the binary file written")) {
            format_into(args, sizeof args, "-d %s -o %s/b.bin " TINY " -n 3", path, dir);
            double start = seconds_now();
            char *out = NULL;
            int code = train(args, &out, NULL);
            double seconds = seconds_now() - start;
            check_true(code == 0 && out && strstr(out, "data.bin: not plain text (") &&
                       strstr(out, "final: train") && seconds < BINARY_SECONDS,
                       "binary data (random bytes, %d NULs): says it is not plain text, "
                       "trains byte-level BPE on it and finishes (exit %d, %.2f s)",
                       BINARY_ZEROS, code, seconds);
            free(out);
        }
        free(bytes);
    }
    remove_dir(dir);
}

/* Task: a new run never overwrites a model or tokenizer without --force. */
static void test_no_overwrite(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], tok[CAP], keep[CAP], args[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "overwrite: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "overwrite: the text written"))
        goto done;
    join(model, dir, "model.bin");
    join(state, dir, "model.bin.state");
    join(tok, dir, "tokenizer.bin");
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 4", text, model);
    expect_train("first run into an empty folder", args, 0, "final: train");
    char *before = NULL;
    size_t n_before = 0;
    before = check_read_file(model, &n_before);
    join(keep, dir, "keep.tok");
    char command[3 * CAP];
    format_into(command, sizeof command, "cp %s %s", tok, keep);
    check_run(command, NULL, NULL);
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", text, model);
    expect_train("same -o again", args, 1, "model.bin: the checkpoint exists already (got an "
                 "existing file, expected a new path; pass --force to overwrite it, or -r");
    size_t n_after = 0;
    char *after = check_read_file(model, &n_after);
    check_true(before && after && n_before == n_after && !memcmp(before, after, n_after) &&
               check_same_bytes(tok, keep), "overwrite: the refused run left model and tokenizer as "
               "they were");
    free(after);
    /* a tokenizer alone is protected too: another text's run is refused after learning
     * its merges, before writing anything; the same text's tokenizer (the same bytes)
     * stays for a second model */
    remove(model);
    remove(state);
    char other[CAP];
    FILE *f = fopen(join(other, dir, "other.txt"), "wb");
    if (f) {
        for (int i = 0; i < 40; i++)
            fprintf(f, "Now is the winter of our discontent %d,\nmade glorious summer.\n", i);
        fclose(f);
    }
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", other, model);
    expect_train("existing tokenizer, another text", args, 1, "tokenizer.bin: the tokenizer "
                 "exists already and this text trains another one (got a file of other merges");
    char tok_temp[CAP];
    check_true(!exists(model) && check_same_bytes(tok, keep) &&
               !exists(join(tok_temp, dir, "tokenizer.bin.tmp")), "overwrite: nothing written "
               "(and no temporary left) when the tokenizer of another text exists");
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9", text, model);
    expect_train("existing tokenizer, the same text", args, 0, "tokenizer.bin already: kept");
    check_true(exists(model) && check_same_bytes(tok, keep), "overwrite: the same text's tokenizer "
               "stays, byte for byte, beside a second model");
    remove(model);
    remove(state);
    /* --force, but too little text: refused before anything is replaced */
    char tiny_text[CAP];
    if (check_true(write_bytes(join(tiny_text, dir, "tiny.txt"), "a few words", 11) == 0,
                   "overwrite: the tiny text written")) {
        format_into(args, sizeof args, "-d %s -o %s --force", tiny_text, model);
        expect_train("--force with too little text", args, 1, "too little text");
        check_true(check_same_bytes(tok, keep), "overwrite: a refused --force run keeps the tokenizer");
    }
    /* a symbolic link as the checkpoint, even with --force: refused; renaming the finished
     * file over it would replace the link, never write its target */
    char link[CAP];
    format_into(command, sizeof command, "ln -s %s %s", keep, join(link, dir, "link.bin"));
    if (check_true(check_run(command, NULL, NULL) == 0, "overwrite: a link made")) {
        format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2 --force", text, link);
        expect_train("--force with a link as the checkpoint", args, 1, "link.bin: a symbolic "
                     "link (got a link, expected a regular file or a new path for the checkpoint");
        struct stat st;
        check_true(lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && check_same_bytes(tok, keep),
                   "overwrite: the link and its target are as they were");
        remove(link);
    }
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -s 9 --force", text, model);
    expect_train("--force", args, 0, "final: train");
    format_into(args, sizeof args, "-r -d %s -o %s -n 8", text, model);
    expect_train("-r resumes that very file", args, 0, "resuming at step 6 of 8");
    /* -r writes the checkpoint and its state at their PATH.tmp as well: a user's file
     * there is refused as a new run refuses it, never removed (-r used to unlink it) */
    const char *temps[] = {"model.bin.tmp", "model.bin.state.tmp"};
    for (int i = 0; i < 2; i++) {
        char temp[CAP], message[CAP];
        if (!check_true(write_bytes(join(temp, dir, temps[i]), "notes", 5) == 0,
                        "overwrite: a user's %s made", temps[i]))
            continue;
        format_into(args, sizeof args, "-r -d %s -o %s -n 10", text, model);
        format_into(message, sizeof message, "%s: not a save of this trainer's", temps[i]);
        expect_train("-r with a user's file at a PATH.tmp it writes", args, 1, message);
        size_t n = 0;
        char *notes = check_read_file(temp, &n);
        check_true(notes && n == 5 && !memcmp(notes, "notes", 5), "overwrite: -r kept the "
                   "user's %s", temps[i]);
        free(notes);
        remove(temp);
    }
    /* the defaults (weights/model.bin beside the current folder) are protected as well */
    char weights[CAP], precious[CAP];
    format_into(weights, sizeof weights, "%s/weights", dir);
    if (check_true(mkdir(weights, 0700) == 0 &&
                   write_bytes(join(precious, weights, "model.bin"), "trained", 7) == 0,
                   "overwrite: a weights/model.bin made to protect")) {
        format_into(command, sizeof command, "cd %s && %s %s -d text.txt " TINY " -n 2", dir,
                 TRAIN_ENV, train_bin);
        char *err = NULL;
        int code = check_run(command, NULL, &err);
        size_t n = 0;
        char *kept = check_read_file(precious, &n);
        check_true(code == 1 && err && strstr(err, "weights/model.bin: the checkpoint exists") &&
                   kept && n == 7 && !memcmp(kept, "trained", 7),
                   "overwrite: ./train with no -o leaves an existing weights/model.bin alone "
                   "(exit %d)", code);
        free(kept);
        free(err);
    }
    /* a new run's files go first to PATH.tmp: a file of another kind already there (a
     * user's, not a save a crash interrupted) is refused without --force, never removed */
    char fresh[CAP], fresh_tmp[CAP], fresh_lock[CAP];
    join(fresh, dir, "fresh.bin");
    if (check_true(write_bytes(join(fresh_tmp, dir, "fresh.bin.tmp"), "notes", 5) == 0,
                   "overwrite: a user's fresh.bin.tmp made")) {
        format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2", text, fresh);
        expect_train("a file at the checkpoint's PATH.tmp", args, 1, "fresh.bin.tmp: not a "
                     "save of this trainer's (got a file that does not start as a checkpoint");
        size_t n = 0;
        char *notes = check_read_file(fresh_tmp, &n);
        check_true(notes && n == 5 && !memcmp(notes, "notes", 5) && !exists(fresh),
                   "overwrite: the user's fresh.bin.tmp kept, nothing trained");
        free(notes);
        remove(fresh_tmp);
    }
    /* the run's own names, however spelled, are no other file's: -z and -d refused before
     * anything is written */
    format_into(args, sizeof args, "-d %s -o %s -z %s/./fresh.bin " TINY " -n 2", text, fresh,
                dir);
    expect_train("-z the checkpoint by another spelling", args, 1, "the checkpoint and the "
                 "tokenizer would share a file");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 2", text, fresh, fresh_tmp);
    expect_train("-z the checkpoint's PATH.tmp", args, 1, "the checkpoint and the tokenizer "
                 "would share a file");
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2", join(fresh_lock, dir,
                "fresh.bin.lock"), fresh);
    expect_train("-d the checkpoint's lock", args, 1, "fresh.bin.lock: the text is a file of "
                 "this run's");
    check_true(!exists(fresh) && !exists(fresh_tmp) && !exists(fresh_lock),
               "overwrite: the refused runs wrote nothing");
    /* a checkpoint name that leaves no room for the run's suffixes (PATH.lock-XXXXXX):
     * refused at the start, not after training at the first save */
    char longname[CAP];
    int at = snprintf(longname, sizeof longname, "%s/", dir);
    for (int i = 0; i < 246 && at < CAP - 1; i++) longname[at++] = 'a';
    longname[at] = '\0';
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2", text, longname);
    expect_train("a 246-byte checkpoint name", args, 1, "file name too long for the checkpoint "
                 "(got 258 bytes with the run's suffixes, expected at most 255)");
    /* 238 bytes: its state, NAME.state (244), has a lock too, NAME.state.lock-XXXXXX
     * (256): refused naming the state; 237 bytes trains */
    longname[at - 8] = '\0';
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2", text, longname);
    expect_train("a 238-byte checkpoint name", args, 1, "file name too long for the optimizer "
                 "state (got 256 bytes with the run's suffixes, expected at most 255)");
    longname[at - 9] = '\0';
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2 --force", text, longname);
    expect_train("a 237-byte checkpoint name", args, 0, "");
    remove(longname);
    format_into(fresh_tmp, sizeof fresh_tmp, "%s.state", longname);
    remove(fresh_tmp);
    /* synth-frandom's rank beyond the context: refused, not a (context, rank) table of any
     * size (rank=1048576 at -T 8 grew 67 M parameters) */
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2 --attn synth-frandom:rank=9999",
                text, fresh);
    expect_train("synth-frandom of a rank above the context", args, 2, "rank above the context "
                 "(got rank 9999");
    /* LSH's 16 buckets over -T 8: a usage error (it trained a checkpoint run refused) */
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 2 --attn lsh", text, fresh);
    expect_train("lsh's 16 buckets over 8 positions", args, 2, "--attn: layer 0: lsh: buckets "
                 "above the context (got 16 buckets, context 8");
    free(before);
done:
    remove_dir(dir);
}

/* Slots of the optimizer state header (weights/README.md), and where the moments start. */
enum { SLOT_VERSION = 1, SLOT_STEP = 2, SLOT_N_PARAMS_LO = 3, SLOT_BETA1 = 11, SLOT_BETA2 = 12,
       SLOT_EPS = 13, SLOT_EMA = 27, SLOT_ATTN_DROPOUT = 28, SLOT_TOKEN_NOISE = 29,
       SLOT_FIRST_UNUSED = 33, SLOT_UNUSED = 40 };
#define STATE_HEADER_BYTES (64 * 4)

/* Write state (n bytes) to path after fix(state) changed it; then expect -r to fail. */
static void expect_bad_state(const char *what, const char *args, const char *state_path,
                             const unsigned char *pristine, size_t n, size_t new_n,
                             void (*fix)(unsigned char *, size_t), const char *message) {
    unsigned char *copy = malloc(n + 1);
    if (!check_true(copy != NULL, "%s: memory for the state's copy", what)) return;
    memcpy(copy, pristine, n);
    copy[n] = 0x5A;   /* the byte a "trailing bytes" case appends */
    if (fix) fix(copy, n);
    char full[CAP];
    format_into(full, sizeof full, "%s: %s", state_path, message);
    if (check_true(write_bytes(state_path, copy, new_n) == 0, "%s: the state written", what))
        expect_train(what, args, 1, full);
    free(copy);
}

static void put_slot(unsigned char *state, int slot, uint32_t value) {
    for (int byte = 0; byte < 4; byte++)
        state[4 * slot + byte] = (unsigned char)(value >> (8 * byte));
}
static uint32_t get_slot(const unsigned char *state, int slot) {
    uint32_t v = 0;
    for (int byte = 0; byte < 4; byte++) v |= (uint32_t)state[4 * slot + byte] << (8 * byte);
    return v;
}
/* The corruptions: each changes a copy of a state file of n bytes. */
static void flip_step(unsigned char *s, size_t n) {
    (void)n;
    put_slot(s, SLOT_STEP, get_slot(s, SLOT_STEP) ^ (1u << 30));
}
static void step_minus_one(unsigned char *s, size_t n) {
    (void)n;
    put_slot(s, SLOT_STEP, get_slot(s, SLOT_STEP) - 1);
}
static void version_one(unsigned char *s, size_t n) { (void)n; put_slot(s, SLOT_VERSION, 1); }
static void put_float_slot(unsigned char *s, int slot, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    put_slot(s, slot, bits);
}
static void beta2_above_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_BETA2, 1.5f);
}
static void ema_above_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_EMA, 1.5f);
}
static void attn_dropout_one(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_ATTN_DROPOUT, 1.0f);
}
static void token_noise_high(unsigned char *s, size_t n) {
    (void)n;
    put_float_slot(s, SLOT_TOKEN_NOISE, 0.95f);
}
static void beta2_one(unsigned char *s, size_t n) { (void)n; put_float_slot(s, SLOT_BETA2, 1.0f); }
static void unused_slot(unsigned char *s, size_t n) { (void)n; put_slot(s, SLOT_UNUSED, 7); }
static void first_unused_slot(unsigned char *s, size_t n) {
    (void)n;
    put_slot(s, SLOT_FIRST_UNUSED, 5);
}
static void last_slot(unsigned char *s, size_t n) { (void)n; put_slot(s, 63, 9); }
static void huge_n_params(unsigned char *s, size_t n) {   /* 2^64 - 1: a size that would wrap */
    (void)n;
    put_slot(s, SLOT_N_PARAMS_LO, 0xFFFFFFFFu);
    put_slot(s, SLOT_N_PARAMS_LO + 1, 0xFFFFFFFFu);
}
static void nan_moment(unsigned char *s, size_t n) {   /* adam_m[7] */
    float f = NAN;
    (void)n;
    memcpy(s + STATE_HEADER_BYTES + 7 * sizeof(float), &f, sizeof f);
}
/* Float i of array `array` (0 adam_m, 1 adam_v, 2 the weights) set to f; the parameter
 * count is the state's own (slot 3; these files are far below 2^32 parameters). */
static void put_state_float(unsigned char *s, int array, size_t i, float f) {
    size_t n_params = get_slot(s, SLOT_N_PARAMS_LO);
    memcpy(s + STATE_HEADER_BYTES + ((size_t)array * n_params + i) * sizeof f, &f, sizeof f);
}
static void negative_v(unsigned char *s, size_t n) { (void)n; put_state_float(s, 1, 0, -1.0f); }
static void nan_weight(unsigned char *s, size_t n) { (void)n; put_state_float(s, 2, 5, NAN); }

/* State: the runs whose files the checks use, in dir on text: A at model (a.bin), B of
 * the same shape with another seed (b.bin), C of another shape (c.bin). */
static void state_runs(const char *dir, const char *text, const char *model) {
    char args[3 * CAP];
    format_into(args, sizeof args, "-d %s -o %s " TINY " -n 6 -e 3", text, model);
    expect_train("state: run A", args, 0, "final: train");
    format_into(args, sizeof args, "-d %s -o %s/b.bin -z %s/b.tok " TINY " -n 6 -e 3 -s 2", text,
             dir, dir);
    expect_train("state: run B, same shape, another seed", args, 0, "final: train");
    format_into(args, sizeof args, "-d %s -o %s/c.bin -z %s/c.tok -v 300 -L 1 -C 32 -H 2 -T 8 -B 4 "
             "-n 6 -e 3", text, dir, dir);
    expect_train("state: run C, another shape", args, 0, "final: train");
}

/* State: A's state (pristine, n bytes) written to state cut, lengthened or with one field
 * broken, each refused by resume (-r) with its message. */
static void state_corruptions(const char *resume, const char *state,
                              const unsigned char *pristine, size_t n) {
    expect_bad_state("-r, state truncated by 4 bytes", resume, state, pristine, n, n - 4, NULL,
                     "truncated (got ");
    expect_bad_state("-r, state with a trailing byte", resume, state, pristine, n, n + 1, NULL,
                     "trailing bytes (got ");
    expect_bad_state("-r, state's step with a bit flipped", resume, state, pristine, n, n,
                     flip_step, "bad step in the optimizer state (got 1073741830, expected 0..6)");
    expect_bad_state("-r, state's step off by one", resume, state, pristine, n, n,
                     step_minus_one, "corrupt optimizer state (got checksum ");
    expect_bad_state("-r, state with a NaN moment", resume, state, pristine, n, n, nan_moment,
                     "adam_m[7] is not finite (got nan");
    expect_bad_state("-r, state with a negative second moment", resume, state, pristine, n, n,
                     negative_v, "adam_v[0] is negative");
    expect_bad_state("-r, state with beta2 1.5", resume, state, pristine, n, n, beta2_above_one,
                     "bad beta2 in the optimizer state (got 1.5, expected a number in [0, 1))");
    expect_bad_state("-r, state with attention dropout 1", resume, state, pristine, n, n,
                     attn_dropout_one, "bad attention dropout in the optimizer state (got 1, "
                     "expected a number in [0, 0.9])");
    expect_bad_state("-r, state with token noise 0.95", resume, state, pristine, n, n,
                     token_noise_high, "bad token noise in the optimizer state (got 0.95, "
                     "expected a number in [0, 0.9])");
    expect_bad_state("-r, state with a NaN training weight (beside the average)", resume, state,
                     pristine, n, n, nan_weight, "weight 5 is not finite (got nan");
    expect_bad_state("-r, state with moving-average decay 1.5", resume, state, pristine, n, n,
                     ema_above_one, "bad moving-average decay in the optimizer state (got 1.5, "
                     "expected a number in [0, 0.99999])");
    expect_bad_state("-r, state of format version 1", resume, state, pristine, n, n,
                     version_one, "not an optimizer state of this trainer (got magic");
    expect_bad_state("-r, state with beta2 1 (the range is open at 1)", resume, state,
                     pristine, n, n, beta2_one, "bad beta2 in the optimizer state (got 1, "
                     "expected a number in [0, 1))");
    expect_bad_state("-r, state with an unused slot set", resume, state, pristine, n, n,
                     unused_slot, "bad optimizer state header (got 7 in unused slot 40");
    expect_bad_state("-r, state with the first unused slot set", resume, state, pristine, n, n,
                     first_unused_slot, "bad optimizer state header (got 5 in unused slot 33");
    expect_bad_state("-r, state with the last slot set", resume, state, pristine, n, n,
                     last_slot, "bad optimizer state header (got 9 in unused slot 63");
    expect_bad_state("-r, state with 2^64 - 1 parameters", resume, state, pristine, n, n,
                     huge_n_params, "state of another model shape (got T 8, V 300, L 1, NH 2, "
                     "C 16, 18446744073709551615 parameters");
}

/* State: A's state beside a checkpoint it does not hash (run B's) and a PATH.tmp it does
 * not hash either (run C's), as a crash and another run might leave them: -r refuses, and
 * neither file moves (renaming PATH.tmp over PATH finishes only a save of this state). */
static void state_leftover_temp(const char *dir, const char *resume, const char *model,
                                const char *state, const unsigned char *pristine, size_t n) {
    char b[CAP], c[CAP], temp[CAP], command[4 * CAP];
    join(b, dir, "b.bin");
    join(c, dir, "c.bin");
    format_into(temp, sizeof temp, "%s.tmp", model);
    format_into(command, sizeof command, "cp %s %s.keep && cp %s %s && cp %s %s", model, model,
                b, model, c, temp);
    if (!check_true(write_bytes(state, pristine, n) == 0 && system(command) == 0,
                    "state: A's state, B's checkpoint and C's at PATH.tmp in place"))
        return;
    expect_train("-r with a checkpoint and a PATH.tmp neither of which the state hashes",
                 resume, 1, "state of another checkpoint (got ");
    check_true(check_same_bytes(model, b) && check_same_bytes(temp, c), "state: the checkpoint "
               "and PATH.tmp left as they were");
    format_into(command, sizeof command, "mv %s.keep %s && rm -f %s", model, model, temp);
    check_true(system(command) == 0, "state: A's checkpoint back in place");
}

/* State: the whole state of run B (same shape) or C (another shape) in place of A's. */
static void state_of_other_runs(const char *dir, const char *resume, const char *state) {
    char other[CAP];
    size_t n_other = 0;
    unsigned char *b_state = check_read_file(join(other, dir, "b.bin.state"), &n_other);
    if (b_state) {
        expect_bad_state("-r, the state of another model of the same shape", resume, state,
                         b_state, n_other, n_other, NULL, "state of another checkpoint (got ");
        free(b_state);
    }
    unsigned char *c_state = check_read_file(join(other, dir, "c.bin.state"), &n_other);
    if (c_state) {
        expect_bad_state("-r, the state of a model of another shape", resume, state, c_state,
                         n_other, n_other, NULL, "state of another model shape (got T 8, V 300, "
                         "L 1, NH 2, C 32");
        free(c_state);
    }
}

/* State: the state of an earlier checkpoint of the same run: run D stops at step 3, its
 * state is kept, the run is resumed to step 6; that old state beside the new checkpoint
 * is refused, naming the step it belongs to. */
static void state_of_earlier_step(const char *dir, const char *text) {
    char args[3 * CAP], d_model[CAP], d_state[CAP], d_tok[CAP];
    join(d_model, dir, "d.bin");
    join(d_state, dir, "d.bin.state");
    join(d_tok, dir, "d.tok");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -e 3", text, d_model, d_tok);
    expect_train("state: run D to step 3", args, 0, "final: train");
    size_t n_d3 = 0;
    unsigned char *d3_state = check_read_file(d_state, &n_d3);
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 6", text, d_model, d_tok);
    expect_train("state: run D resumed to step 6", args, 0, "resuming at step 3 of 6");
    if (check_true(d3_state != NULL, "state: read D's state of step 3")) {
        char message[CAP];
        format_into(message, sizeof message, "%s: state of another checkpoint (got %s with "
                    "checksum ", d_state, d_model);
        if (check_true(write_bytes(d_state, d3_state, n_d3) == 0,
                       "state: D's state of step 3 written back"))
            expect_train("-r, the state of step 3 beside the checkpoint of step 6 of the same "
                         "run", args, 1, message);
        expect_train("-r, ... and the message names the step of the state", args, 1,
                     "of the step-3 checkpoint the state was saved with)");
        free(d3_state);
    }
}

/* State: a truncated checkpoint (model) beside its intact state (pristine, n bytes) is
 * named as such; with both files as they were, resume goes on from step 6. */
static void state_checkpoint_truncated(const char *resume, const char *model,
                                       const char *state, const unsigned char *pristine,
                                       size_t n) {
    size_t n_model = 0;
    unsigned char *model_bytes = check_read_file(model, &n_model);
    if (check_true(model_bytes && write_bytes(state, pristine, n) == 0 &&
                   write_bytes(model, model_bytes, n_model - 4) == 0,
                   "state: a truncated checkpoint written beside its state")) {
        char message[CAP];
        format_into(message, sizeof message, "%s: truncated (got %zu bytes", model, n_model - 4);
        expect_train("-r, checkpoint truncated", resume, 1, message);
    }
    if (check_true(model_bytes && write_bytes(model, model_bytes, n_model) == 0 &&
                   write_bytes(state, pristine, n) == 0,
                   "state: the intact checkpoint and state written back"))
        expect_train("-r with the intact state", resume, 0, "resuming at step 6 of 8");
    free(model_bytes);
}

/* Task: a corrupt or mismatched state file is refused, naming the state file. */
static void test_state_file(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], resume[3 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "state: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "state: the text written"))
        goto done;
    join(model, dir, "a.bin");
    join(state, dir, "a.bin.state");
    state_runs(dir, text, model);
    size_t n = 0;
    unsigned char *pristine = check_read_file(state, &n);
    if (!check_true(pristine && n > STATE_HEADER_BYTES, "state: read A's state")) goto done;
    format_into(resume, sizeof resume, "-r -d %s -o %s -n 8", text, model);
    /* run A took train's defaults for AdamW: weights/README.md's beta1 0.9, beta2 0.99,
     * eps 1e-8 */
    float beta1, beta2, eps;
    uint32_t bits[3] = {get_slot(pristine, SLOT_BETA1), get_slot(pristine, SLOT_BETA2),
                        get_slot(pristine, SLOT_EPS)};
    memcpy(&beta1, &bits[0], 4);
    memcpy(&beta2, &bits[1], 4);
    memcpy(&eps, &bits[2], 4);
    check_true(beta1 == 0.9f && beta2 == 0.99f && eps == 1e-8f, "state: train's AdamW defaults "
               "(beta1 %g, beta2 %g, eps %g; weights/README.md: 0.9, 0.99, 1e-8)", (double)beta1,
               (double)beta2, (double)eps);
    state_corruptions(resume, state, pristine, n);
    state_leftover_temp(dir, resume, model, state, pristine, n);
    state_of_other_runs(dir, resume, state);
    state_of_earlier_step(dir, text);
    state_checkpoint_truncated(resume, model, state, pristine, n);
    free(pristine);
done:
    remove_dir(dir);
}

/* Task: a save interrupted between its two renames is finished by trainer_finish_save;
 * a successful save leaves no temporaries; a failed one removes them. */
static void test_interrupted_save(void) {
    char dir[CAP], path[CAP], state[CAP], next[CAP], next_state[CAP], temp[CAP];
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[RUN_STEPS];
    Trainer a, b;
    if (!check_true(tokens && make_temp_dir(dir) == 0, "interrupted save: temp folder")) {
        free(tokens);
        return;
    }
    make_stream(tokens, RUN_TOKENS);
    join(path, dir, "m.bin");
    join(state, dir, "m.bin.state");
    join(next, dir, "n.bin");
    join(next_state, dir, "n.bin.state");
    join(temp, dir, "m.bin.tmp");
    if (!check_true(run_init(&a) == 0, "interrupted save: init")) goto done;
    run_steps(&a, tokens, 3, losses);
    int saved = trainer_save(&a, path, state, NULL) == 0;
    char state_temp[CAP];
    format_into(state_temp, sizeof state_temp, "%s.tmp", state);
    check_true(saved && !exists(temp) && !exists(state_temp) &&
               trainer_finish_save(path, state, NULL) == 0,
               "save: no temporaries left; a matching pair needs no finishing");
    run_steps(&a, tokens, 4, losses);
    saved = saved && trainer_save(&a, next, next_state, NULL) == 0;
    /* the crash: the step-4 state is in place, the step-4 checkpoint still in m.bin.tmp */
    if (!check_true(saved && rename(next_state, state) == 0 && rename(next, temp) == 0,
                    "interrupted save: staged")) goto free_a;
    int refused = trainer_load(&b, path, state, 0) != 0;
    int finished = trainer_finish_save(path, state, NULL);
    int loaded = trainer_load(&b, path, state, 0) == 0;
    check_true(refused && finished == 1 && loaded && b.step == 4 && !exists(temp) &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0 &&
               memcmp(a.adam_v, b.adam_v, a.n_params * sizeof(float)) == 0,
               "interrupted save: the new state with the old checkpoint is refused; "
               "trainer_finish_save renames m.bin.tmp (got %d) and step 4 loads exactly",
               finished);
    trainer_free(&b);
    /* failed saves leave no temporaries: a missing folder; a state path that is a folder
     * (its rename fails); a checkpoint temporary that cannot be written */
    char missing[CAP], bad[CAP], bad_state[CAP], bad_temp[CAP], bad_state_temp[CAP];
    format_into(missing, sizeof missing, "%s/no/such/folder/m.bin", dir);
    check_true(trainer_save(&a, missing, NULL, NULL) != 0, "save into a missing folder fails");
    join(bad, dir, "s.bin");
    format_into(bad_state, sizeof bad_state, "%s.state", bad);
    format_into(bad_temp, sizeof bad_temp, "%s.tmp", bad);
    format_into(bad_state_temp, sizeof bad_state_temp, "%s.tmp", bad_state);
    int failed = mkdir(bad_state, 0700) == 0 && trainer_save(&a, bad, bad_state, NULL) != 0;
    check_true(failed && !exists(bad) && !exists(bad_temp) && !exists(bad_state_temp),
               "save whose state rename fails: refused, no checkpoint, no temporaries left");
    rmdir(bad_state);
    failed = mkdir(bad_temp, 0700) == 0 && trainer_save(&a, bad, bad_state, NULL) != 0;
    check_true(failed && !exists(bad) && !exists(bad_state) && !exists(bad_state_temp),
               "save whose checkpoint temporary cannot be written: refused, the state's "
               "temporary removed");
    rmdir(bad_temp);
free_a:
    trainer_free(&a);
done:
    remove_dir(dir);
    free(tokens);
}

#define KILLS 20                  /* kill -9 this many runs during their saves */
#define KILL_ATTEMPTS 60          /* at most this many starts (a run may finish first) */
#define KILL_STEPS 40             /* each run: 40 steps, a checkpoint after every one */
#define KILL_TIMEOUT 60.0         /* seconds to wait for a run's first checkpoint */
#define POLL_NS 200000L           /* 0.2 ms between looks at the folder */

/* Start "exec $TRAIN args" with stdout and stderr to /dev/null, one thread. */
static pid_t spawn_train(const char *args) {
    char command[3 * CAP];
    format_into(command, sizeof command, "exec %s %s >/dev/null 2>&1", train_bin, args);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("OMP_NUM_THREADS", "1", 1);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void sleep_seconds(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Wait until path exists while pid runs: 1 (it exists, pid still running), 0 (pid exited,
 * *status set), -1 (timeout). */
static int wait_for_file(pid_t pid, const char *path, int *status) {
    double start = seconds_now();
    while (seconds_now() - start < KILL_TIMEOUT) {
        if (exists(path)) return 1;
        if (waitpid(pid, status, WNOHANG) == pid) return 0;
        sleep_seconds(POLL_NS * 1e-9);
    }
    return -1;
}

/* Task: training never loses work. A real ./train checkpointing every step is killed
 * with SIGKILL at random moments; each time the last checkpoint must load in run's
 * model_load, and -r must resume from it and end with exactly the bits of the
 * uninterrupted run. */
static void test_kill_during_save(void) {
    char dir[CAP], text[CAP], model[CAP], state[CAP], tok[CAP], ref[CAP], args[3 * CAP];
    char resume[3 * CAP], model_temp[CAP], state_temp[CAP], tok_temp[CAP];
    if (!check_true(make_temp_dir(dir) == 0, "kill: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "kill: the text written"))
        goto done;
    join(model, dir, "m.bin");
    join(state, dir, "m.bin.state");
    join(tok, dir, "tok.bin");
    join(ref, dir, "ref.bin");
    join(model_temp, dir, "m.bin.tmp");
    join(state_temp, dir, "m.bin.state.tmp");
    join(tok_temp, dir, "tok.bin.tmp");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n %d -w 2 -e 1", text, model, tok,
             KILL_STEPS);
    format_into(resume, sizeof resume, "-r -d %s -o %s -z %s -e 1000000", text, model, tok);

    /* the uninterrupted run: its final checkpoint, and how long its saving phase lasts */
    int status = 0;
    pid_t pid = spawn_train(args);
    int seen = pid > 0 ? wait_for_file(pid, model, &status) : -1;
    double first = seconds_now();
    if (seen == 1) waitpid(pid, &status, 0);
    double window = seconds_now() - first;
    if (!check_true(seen >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                    rename(model, ref) == 0, "kill: the uninterrupted reference run")) goto done;

    uint64_t rng = 4242;
    int kills = 0, attempts = 0, in_save = 0, loaded = 0, resumed = 0, finished = 0;
    int identical = 0, clean = 0, late = 0;
    while (kills < KILLS && attempts < KILL_ATTEMPTS) {
        attempts++;
        const char *files[] = {model, state, tok, model_temp, state_temp, tok_temp};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) remove(files[i]);
        pid = spawn_train(args);
        if (pid <= 0 || wait_for_file(pid, model, &status) != 1) {
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
            }
            continue;
        }
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        sleep_seconds(window * (double)(rng >> 11) / 9007199254740992.0);   /* [0, window) */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status)) {   /* it finished before the kill */
            late++;
            window *= 0.8;   /* the reference run was slow (a busy machine): aim earlier */
            continue;
        }
        kills++;
        in_save += exists(model_temp) || exists(state_temp);
        Model m;
        if (model_load(&m, model, KILL_STEPS, 0) == 0) loaded++;
        model_free(&m);
        char *out = NULL;
        int code = train(resume, &out, NULL);
        resumed += code == 0 && out && strstr(out, "resuming at step ") != NULL;
        finished += out && strstr(out, "finished the interrupted save") != NULL;
        free(out);
        identical += check_same_bytes(model, ref);
        clean += !exists(model_temp) && !exists(state_temp);
    }
    check_true(kills == KILLS && loaded == kills && resumed == kills && identical == kills &&
               clean == kills,
               "kill -9 during training (%d attempts, %d finished first, window %.0f ms): %d "
               "kills, %d with a save in progress, %d loaded by model_load, %d resumed by -r "
               "(%d finishing an interrupted save), %d bit-identical to the uninterrupted run, "
               "%d without temporaries left", attempts, late, window * 1e3, kills, in_save,
               loaded, resumed, finished, identical, clean);
done:
    remove_dir(dir);
}

/* The rename system calls: rename() is rename on x86-64, renameat or renameat2 elsewhere
 * (aarch64); strace's '?' takes the names this machine has. */
#define RENAMES "?rename,?renameat,?renameat2"

/* 1 if strace can run a program here (it is how the kill points are injected). */
static int strace_works(void) {
    return check_run("strace -qq -o /dev/null true 2>/dev/null", NULL, NULL) == 0;
}

/* In dir, with m.bin* and tok.bin* removed first: train with args under strace, which
 * sends the signal sig (KILL, TERM) at the when-th call of call. 1 if the run did not
 * succeed (the signal ended it). */
static int train_signalled(const char *dir, const char *args, const char *call,
                           const char *sig, int when) {
    char command[4 * CAP];
    format_into(command, sizeof command, "cd %s && rm -f m.bin* tok.bin*", dir);
    check_run(command, NULL, NULL);
    format_into(command, sizeof command, "%s strace -f -qq -o /dev/null -e trace=%s -e "
                "inject=%s:signal=%s:when=%d %s %s >/dev/null 2>&1", TRAIN_ENV, call, call,
                sig, when, train_bin, args);
    return check_run(command, NULL, NULL) != 0;
}

/* Task: a run killed at any moment of its first save, or just before or after it,
 * recovers: -r finishes the save (or, killed before any checkpoint, the same command
 * starts the run again: nothing of it is in place), and the run ends bit-identical to
 * an uninterrupted one. strace kills it (SIGKILL) at the K-th rename or fsync: the first
 * save's three renames (state, checkpoint, tokenizer), the next save's first, and fsyncs
 * before and during the first save. A run killed between the first save's renames could
 * not be resumed ("nothing to resume"), nor started again (its state existed). */
static void test_first_save_kills(void) {
    if (!strace_works()) {
        check_skip("strace is missing or cannot trace here: the first-save kill points");
        return;
    }
    char dir[CAP], text[CAP], model[CAP], tok[CAP], ref[CAP], ref_tok[CAP], args[3 * CAP];
    char resume[3 * CAP], command[4 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "first-save kills: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0,
                    "first-save kills: the text written"))
        goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    join(ref, dir, "ref.bin");
    join(ref_tok, dir, "ref_tok.bin");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -w 1 -e 1", text, model,
                tok);
    format_into(resume, sizeof resume, "-r -d %s -o %s -z %s", text, model, tok);
    if (!check_true(train(args, NULL, NULL) == 0 && rename(model, ref) == 0 &&
                    rename(tok, ref_tok) == 0, "first-save kills: the reference run")) goto done;
    /* the syscall and its count: rename 1-3 the first save, 4 the second; fsync 1 the
     * tokenizer's temporary, 2 the first state's, 3 the first checkpoint's */
    const struct { const char *call; int when; const char *point; } kills[] = {
        {"fsync", 1, "before the first save (the tokenizer's temporary synced)"},
        {"fsync", 2, "during the first save, before its renames"},
        {RENAMES, 1, "at the first save's state rename"},
        {RENAMES, 2, "between the first save's state and checkpoint renames"},
        {RENAMES, 3, "between the first save's checkpoint and tokenizer renames"},
        {RENAMES, 4, "after the first save, at the second's"},
    };
    for (size_t i = 0; i < sizeof kills / sizeof kills[0]; i++) {
        int killed = train_signalled(dir, args, kills[i].call, "KILL", kills[i].when);
        char *out = NULL, *err = NULL;
        if (!strcmp(kills[i].call, RENAMES) && kills[i].when == 2) {
            /* the state committed, the checkpoint at m.bin.tmp: the same command again is
             * refused naming -r, not only --force (which would throw the save away) */
            int again = train(args, NULL, &err);
            check_true(again == 1 && err && strstr(err, "m.bin.state: the optimizer state "
                       "exists already") && strstr(err, "or -r to finish its interrupted save"),
                       "kill %s: the same command again names -r (exit %d): %s",
                       kills[i].point, again, err ? err : "");
            free(err);
            err = NULL;
        }
        int code = train(resume, &out, &err);
        const char *how = "-r";
        if (code != 0 && err && strstr(err, "nothing to resume")) {
            free(out);
            free(err);
            out = err = NULL;
            code = train(args, &out, &err);   /* the same command again, without --force */
            how = "the same command again";
        }
        int identical = code == 0 && check_same_bytes(model, ref) && check_same_bytes(tok, ref_tok);
        format_into(command, sizeof command, "ls -a %s | grep -q -e '\\.tmp' -e '\\.lock'",
                    dir);
        int clean = check_run(command, NULL, NULL) != 0;
        check_true(killed && identical && clean, "kill %s (%s %d): recovered by %s (exit %d), "
                   "bit-identical to the uninterrupted run, no temporary or lock left%s%s",
                   kills[i].point, strcmp(kills[i].call, RENAMES) ? kills[i].call : "rename",
                   kills[i].when, how, code,
                   err && code ? "; stderr: " : "", err && code ? err : "");
        free(out);
        free(err);
    }
done:
    remove_dir(dir);
}

/* Task: a save whose state is renamed into place (the commit) but whose folder then fails
 * to sync (strace makes that fsync fail with EIO) keeps what the state names: the run
 * stops (exit 1) and -r finishes the save, ending bit-identical to an uninterrupted run.
 * It used to remove the checkpoint's and tokenizer's temporaries: the first save left a
 * state with nothing to resume (nor could the same command start again), a later one a
 * state of another checkpoint beside the last. fsync 4 is the folder's after the first
 * save's state rename (1-3: the tokenizer's, state's and checkpoint's temporaries), 9 the
 * second save's (5, 6: the folder after the first save's other renames; 7, 8: files). */
static void test_commit_sync_fails(void) {
    if (!strace_works()) {
        check_skip("strace is missing or cannot trace here: the commit's failed sync");
        return;
    }
    char dir[CAP], text[CAP], model[CAP], tok[CAP], ref[CAP], ref_tok[CAP], args[3 * CAP];
    char resume[3 * CAP], command[4 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "commit sync: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "commit sync: the text"))
        goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    join(ref, dir, "ref.bin");
    join(ref_tok, dir, "ref_tok.bin");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -w 1 -e 1", text, model,
                tok);
    format_into(resume, sizeof resume, "-r -d %s -o %s -z %s", text, model, tok);
    if (!check_true(train(args, NULL, NULL) == 0 && rename(model, ref) == 0 &&
                    rename(tok, ref_tok) == 0, "commit sync: the reference run")) goto done;
    const int whens[] = {4, 9};
    for (int i = 0; i < 2; i++) {
        format_into(command, sizeof command, "cd %s && rm -f m.bin* tok.bin* && %s strace -f "
                    "-qq -o /dev/null -e trace=fsync -e inject=fsync:error=EIO:when=%d %s %s "
                    ">/dev/null 2>&1", dir, TRAIN_ENV, whens[i], train_bin, args);
        int failed = check_run(command, NULL, NULL) == 1;
        char *err = NULL;
        int code = train(resume, NULL, &err);
        int identical = code == 0 && check_same_bytes(model, ref) &&
                        check_same_bytes(tok, ref_tok);
        format_into(command, sizeof command, "ls -a %s | grep -q -e '\\.tmp' -e '\\.lock'",
                    dir);
        int clean = check_run(command, NULL, NULL) != 0;
        check_true(failed && identical && clean, "fsync %d (the folder's, after a save's state "
                   "rename) fails: exit 1, then -r finishes the save (exit %d), bit-identical "
                   "to the uninterrupted run, no temporary or lock left%s%s", whens[i], code,
                   err && code ? "; stderr: " : "", err && code ? err : "");
        free(err);
    }
done:
    remove_dir(dir);
}

/* A run ended by SIGTERM (a handler, unlike SIGKILL's) in the middle of a save, before it
 * commits, leaves no temporary: the first save's (state, checkpoint and the tokenizer's,
 * 51 MB of state left at -C 512), and a later one's beside the committed first. strace
 * sends the signal at the saves' fsyncs. */
static void test_term_during_save(void) {
    if (!strace_works()) {
        check_skip("strace is missing or cannot trace here: SIGTERM during a save");
        return;
    }
    char dir[CAP], text[CAP], model[CAP], tok[CAP], args[3 * CAP], command[4 * CAP];
    if (!check_true(make_temp_dir(dir) == 0, "term: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "term: the text written"))
        goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 3 -w 1 -e 1", text, model,
                tok);
    /* fsync 1 the tokenizer's temporary, 2 the first state's, 3 the first checkpoint's,
     * 4-6 the folder after each rename, 7 and 8 the second save's state and checkpoint (the
     * signal comes as the call returns) */
    const struct { const char *call; int when, committed; const char *point; } terms[] = {
        {"fsync", 2, 0, "the first save's state written"},
        {"fsync", 3, 0, "the first save's checkpoint written"},
        {"fsync", 7, 1, "the second save's state written"},
        {"fsync", 8, 1, "the second save's checkpoint written"},
    };
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++) {
        int stopped = train_signalled(dir, args, terms[i].call, "TERM", terms[i].when);
        format_into(command, sizeof command, "ls -a %s | grep -q -e '\\.tmp' -e '\\.lock'",
                    dir);
        int clean = check_run(command, NULL, NULL) != 0;
        int first = exists(model) && exists(tok);
        check_true(stopped && clean && first == terms[i].committed, "SIGTERM at %s (%s %d): no "
                   "temporary or lock left, %s", terms[i].point,
                   terms[i].call, terms[i].when,
                   terms[i].committed ? "the first save in place" : "nothing in place");
    }
done:
    remove_dir(dir);
}

/* Task: one trainer per output. Two trainers on one -o both passed the "exists already"
 * checks (nothing existed yet) and wrote the same temporaries, leaving a mix of two
 * runs. Now the second is refused by name while the first holds the lock: first with
 * this process holding m.bin.lock, then with two trainers started together. */
static void test_one_writer(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP], lock_path[CAP], args[3 * CAP];
    char want[128];
    if (!check_true(make_temp_dir(dir) == 0, "one writer: temp folder")) return;
    if (!check_true(write_play(join(text, dir, "text.txt")) == 0, "one writer: the text written"))
        goto done;
    join(model, dir, "m.bin");
    join(tok, dir, "tok.bin");
    format_into(lock_path, sizeof lock_path, "%s.lock", model);
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 300 -w 1 -e 1000", text,
                model, tok);
    int fd = open(lock_path, O_RDWR | O_CREAT, 0666);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (check_true(fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0, "one writer: hold m.bin.lock")) {
        format_into(want, sizeof want, "m.bin: another process (pid %ld) is writing it",
                    (long)getpid());
        expect_train("while another process writes its checkpoint", args, 1, want);
        check_true(!exists(model) && !exists(tok), "one writer: the refused trainer wrote "
                   "nothing");
    }
    if (fd >= 0) close(fd);
    remove(lock_path);
    /* m.bin.state's lock held, as a trainer whose -o is m.bin.state holds it: refused (the
     * state of this run would have been the other's checkpoint) */
    format_into(lock_path, sizeof lock_path, "%s.state.lock", model);
    fd = open(lock_path, O_RDWR | O_CREAT, 0666);
    if (check_true(fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0, "one writer: hold "
                   "m.bin.state.lock")) {
        format_into(want, sizeof want, "m.bin.state: another process (pid %ld) is writing it",
                    (long)getpid());
        expect_train("while another process writes its optimizer state", args, 1, want);
        check_true(!exists(model) && !exists(tok), "one writer: the trainer refused by its "
                   "state's lock wrote nothing");
    }
    if (fd >= 0) close(fd);
    remove(lock_path);
    format_into(lock_path, sizeof lock_path, "%s.lock", model);
    /* two at once: exactly one trains; the other is refused, by the lock or, if it came
     * late, by the first one's files */
    pid_t a = spawn_train(args), b = spawn_train(args);
    int status_a = 0, status_b = 0;
    if (a > 0) waitpid(a, &status_a, 0);
    if (b > 0) waitpid(b, &status_b, 0);
    int ok_a = WIFEXITED(status_a) && WEXITSTATUS(status_a) == 0;
    int ok_b = WIFEXITED(status_b) && WEXITSTATUS(status_b) == 0;
    int refused = WIFEXITED(status_a) && WIFEXITED(status_b) &&
                  WEXITSTATUS(status_a) + WEXITSTATUS(status_b) == 1;
    check_true(a > 0 && b > 0 && ok_a != ok_b && refused && !exists(lock_path),
               "two trainers started together on one -o: one trains, the other is refused "
               "(exits %d and %d)", WIFEXITED(status_a) ? WEXITSTATUS(status_a) : -1,
               WIFEXITED(status_b) ? WEXITSTATUS(status_b) : -1);
done:
    remove_dir(dir);
}

/* Contracts: the training text as an output (-z or -o naming it), refused even with
 * --force, and the text left untouched. */
static void contracts_text_as_output(const char *text, const char *model) {
    char args[3 * CAP];
    size_t n_text = 0;
    char *text_before = check_read_file(text, &n_text);
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2", text, model, text);
    expect_train("--force -z naming the training text", args, 1, "text.txt: is the input");
    format_into(args, sizeof args, "--force -d %s -o %s " TINY " -n 2", text, text);
    expect_train("--force -o naming the training text", args, 1, "text.txt: is the input");
    /* the text read from standard input (-d -), -o the same file */
    format_into(args, sizeof args, "--force -d - -o %s -z %s.tok " TINY " -n 2 < %s", text,
                model, text);
    expect_train("--force -d - with -o naming the file standard input reads", args, 1,
                 "text.txt: is the file standard input reads");
    /* and to another checkpoint: it trains on the bytes standard input gives */
    format_into(args, sizeof args, "--force -d - -o %s -z %s.tok " TINY " -n 2 < %s", model,
                model, text);
    char want[64];
    snprintf(want, sizeof want, "data: -: %zu bytes", n_text);
    expect_train("-d - reads the text from standard input", args, 0, want);
    char made[CAP + 16];
    static const char *const suffixes[] = {"", ".state", ".tok"};
    for (int i = 0; i < 3; i++) {   /* gone again: later checks want no checkpoint there */
        snprintf(made, sizeof made, "%s%s", model, suffixes[i]);
        unlink(made);
    }
    size_t n_after = 0;
    char *text_after = check_read_file(text, &n_after);
    check_true(text_before && text_after && n_text == n_after &&
               !memcmp(text_before, text_after, n_text), "contracts: the text is untouched");
    free(text_before);
    free(text_after);
}

/* Contracts: outputs that cannot be written (an empty -o, a folder that does not exist),
 * refused before any training. */
static void contracts_unwritable_outputs(const char *dir, const char *text) {
    char args[3 * CAP];
    char *out = NULL, *err = NULL;
    format_into(args, sizeof args, "-d %s -o '' " TINY " -n 2", text);
    int code = train(args, &out, &err);
    check_true(code == 1 && err && strstr(err, "empty path for the checkpoint") &&
               !(out && strstr(out, "step")), "-o '': refused before training (exit %d)", code);
    free(out);
    free(err);
    out = err = NULL;
    format_into(args, sizeof args, "-d %s -o %s/no/such/m.bin " TINY " -n 2", text, dir);
    code = train(args, &out, &err);
    check_true(code == 1 && err && strstr(err, "cannot write the checkpoint there") &&
               !(out && strstr(out, "step")), "-o in a missing folder: refused before training "
               "(exit %d)", code);
    free(out);
    free(err);
}

/* Contracts: the memory a run needs, against --max-memory: refused just below (writing
 * nothing), run just above (leaving model and tok for the next checks); the hostile
 * round's 80 GB shape refused under a 64 GB limit. */
static void contracts_memory(const char *dir, const char *text, const char *model,
                             const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    Config c = {0};
    c.seq_len = 8;
    c.vocab_size = 300;
    c.n_layers = 1;
    c.n_heads = 2;
    c.dim = 16;
    TrainSettings settings = {0};
    settings.ema = 0.999f;   /* train's default: the average is a sixth parameter copy */
    size_t need = trainer_memory_bytes(&c, &settings, 4);
    /* at least the five parameter copies and the per-layer activations (8 of N x C and 2 of
     * N x 4C floats, N = 4 x 8), counted here from the shapes */
    size_t P = trainer_tensor_sizes((size_t[TRAIN_N_TENSORS]){0}, &(Config){.seq_len = 8,
                                    .vocab_size = 300, .padded_vocab_size = 300,
                                    .n_layers = 1, .n_heads = 2, .dim = 16,
                                    .hidden_dim = 64}, 0, 0);
    size_t floor_bytes = (6 * P + 1 * 32 * (8 * 16 + 2 * 64)) * sizeof(float);
    check_true(need >= floor_bytes && need < 4 * floor_bytes, "trainer_memory_bytes: %zu bytes "
               "for the tiny model, at least the %zu its parameters and activations take",
               need, floor_bytes);
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --max-memory %.9f",
                text, model, tok, (double)need * 0.99e-9);
    /* below 0.01 GB in bytes (two decimals of GB read 0.00) */
    char needs[96];
    format_into(needs, sizeof needs, "train: the run needs %zu bytes of memory (", need);
    expect_train("--max-memory just below the need: the need in bytes", args, 1, needs);
    check_true(!exists(model) && !exists(tok), "--max-memory: the refused run wrote nothing");
    /* a limit under a byte is a limit, not none (it was cut to 0, which meant no limit) */
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --max-memory 1e-10",
                text, model, tok);
    expect_train("--max-memory 1e-10", args, 1, "more than the limit of 1 byte (expected less");
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --max-memory %.9f",
                text, model, tok, (double)need * 1.01e-9);
    expect_train("--max-memory just above the need", args, 0, "final: train");
    /* --sample 8 loads the checkpoint beside the trainer: its P weights and a KV cache of 8
     * positions (7 tokens after the newline, the most a context of 8 holds: 2 x 1 layer x
     * 8 x 16 floats), counted here from the shapes; refused (before training) at 1.01 x the
     * trainer's need, run just above the sum */
    size_t sample = (P + 2 * 1 * 8 * 16) * sizeof(float);
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --sample 8 "
                "--max-memory %.9f", text, model, tok, (double)need * 1.01e-9);
    expect_train("--max-memory below the need with --sample's model", args, 1,
                 "--sample 8's model");
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --sample 8 "
                "--max-memory %.9f", text, model, tok, (double)(need + sample) * 1.001e-9);
    expect_train("--max-memory just above the need with --sample's model", args, 0,
                 "sample (7 tokens");
    /* the hostile round's shape (-B 64 -T 4096 -C 512 -L 8: about 80 GB), on a text long
     * enough for its context, against a limit of 64 GB */
    char long_text[CAP], want[128];
    format_into(command, sizeof command, "for i in 1 2 3 4 5 6 7 8 9 10; do cat %s; done > %s",
                text, join(long_text, dir, "long.txt"));
    check_run(command, NULL, NULL);
    Config big = {.seq_len = 4096, .vocab_size = 300, .n_layers = 8, .n_heads = 8, .dim = 512};
    format_into(args, sizeof args, "--force -d %s -o %s -z %s -v 300 -L 8 -C 512 -H 8 -T 4096 "
                "-B 64 -n 1 --max-memory 64", long_text, model, tok);
    if (SIZE_MAX <= 0xFFFFFFFFu) {   /* 32-bit: the shape cannot even be addressed */
        expect_train("the 80 GB shape on a 32-bit build", args, 1,
                     "model too large for this machine");
        return;
    }
    double need_big = (double)trainer_memory_bytes(&big, &settings, 64);
    format_into(want, sizeof want, "the run needs %.2f GB of memory", need_big * 1e-9);
    expect_train("the 80 GB shape against a 64 GB limit", args, 1, want);
    check_true(need_big > 75e9, "the 80 GB shape needs more than 75 GB (%.2f)",
               need_big * 1e-9);
}

/* Contracts: -r on the run at model with a tokenizer that is not the run's: another run's
 * of the same size, or a llama2.c file. */
static void contracts_foreign_tokenizer(const char *dir, const char *text, const char *model) {
    char args[3 * CAP], command[4 * CAP];
    char other[CAP], other_text[CAP], other_model[CAP];
    join(other_text, dir, "other.txt");
    join(other_model, dir, "o.bin");
    join(other, dir, "other_tok.bin");
    format_into(command, sizeof command, "tr 'a-z' 'b-za' < %s > %s", text, other_text);
    check_run(command, NULL, NULL);
    format_into(args, sizeof args, "-d %s -o %s -z %s " TINY " -n 2", other_text, other_model,
                other);
    expect_train("a second run (another tokenizer of 300 tokens)", args, 0, "final: train");
    format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 3", text, model, other);
    expect_train("-r with another run's tokenizer of the same size", args, 1,
                 "other_tok.bin: not the tokenizer this run trained with");
    /* a llama2.c tokenizer file for -r: the other family, whatever its size */
    char llama_tok[CAP];
    format_into(command, sizeof command, "cp tests/data/llama2c/tok512.bin %s",
                join(llama_tok, dir, "llama_tok.bin"));
    if (check_true(check_run(command, NULL, NULL) == 0, "contracts: a llama2.c tokenizer")) {
        format_into(args, sizeof args, "-r -d %s -o %s -z %s -n 3", text, model, llama_tok);
        expect_train("-r with a llama2.c tokenizer", args, 1, "llama_tok.bin: tokenizer of the "
                     "other family (got llama2.c's tokenizer file");
    }
}

/* Contracts: OMP_NUM_THREADS beyond the cores capped with a note, read as OpenMP reads it
 * (also without OpenMP, where kernels.c reads it); --threads in range. */
static void contracts_threads(const char *text, const char *model, const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    format_into(command, sizeof command, "env OMP_NUM_THREADS=100000 %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    char *out = NULL, *err = NULL;
    int code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "OMP_NUM_THREADS asks for 100000 threads; "
               "using the"), "OMP_NUM_THREADS=100000: capped at the cores with a note (exit %d)",
               code);
    free(out);
    free(err);
    /* a list (one number per nesting level: the first counts), spaces around each */
    format_into(command, sizeof command, "env 'OMP_NUM_THREADS= 1 ,2' %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && out && strstr(out, "; 1 thread,") && err && !strstr(err, "OMP_"),
               "OMP_NUM_THREADS=' 1 ,2': 1 thread, no note (exit %d)", code);
    free(out);
    free(err);
#ifndef _OPENMP
    /* what OpenMP's runtime would do, with the project's message: say so, ignore it
     * (an OpenMP build leaves this to the runtime, whose message is its own) */
    format_into(command, sizeof command, "env OMP_NUM_THREADS=2x %s --force -d %s -o %s "
                "-z %s " TINY " -n 2", train_bin, text, model, tok);
    code = check_run(command, &out, &err);
    check_true(code == 0 && err && strstr(err, "train: OMP_NUM_THREADS: invalid value (got "
               "'2x', expected a positive integer or a list of them); ignored"),
               "OMP_NUM_THREADS=2x without OpenMP: reported as ignored (exit %d)", code);
    free(out);
    free(err);
#endif
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 --threads 1", text,
                model, tok);
    expect_train("--threads 1", args, 0, "1 thread,");
    expect_usage("--threads 0", "--threads 0", "--threads: invalid value (got '0', expected an "
                 "integer in 1..1024)");
}

/* Contracts: standard output closed after the first line (exit 1 with a message, not
 * SIGPIPE's silent 141), or full. */
static void contracts_stdout(const char *dir, const char *text, const char *model,
                             const char *tok) {
    char args[3 * CAP], command[4 * CAP];
    /* the reader is gone before the first write (true exits at once; train starts a second
     * later), so the write fails whatever the pipe's buffer holds */
    format_into(command, sizeof command, "{ sleep 1; %s %s --force -d %s -o %s -z %s " TINY
                " -n 300 2>%s/pipe_err; echo $? > %s/pipe_code; } | true", TRAIN_ENV,
                train_bin, text, model, tok, dir, dir);
    check_run(command, NULL, NULL);
    char path[CAP];
    size_t size;
    char *code_text = check_read_file(join(path, dir, "pipe_code"), &size);
    char *pipe_err = check_read_file(join(path, dir, "pipe_err"), &size);
    check_true(code_text && atoi(code_text) == 1 && pipe_err &&
               strstr(pipe_err, "standard output: write error (Broken pipe)"),
               "train into a closed pipe: exit 1, one line naming the broken pipe (exit %d)",
               code_text ? atoi(code_text) : -1);
    free(code_text);
    free(pipe_err);
    expect_train("--help into a full disk", "--help >/dev/full", 1,
                 "train: standard output: write error (No space left on device)");
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 2 >/dev/full", text,
                model, tok);
    expect_train("a run into a full disk", args, 1,
                 "standard output: write error (No space left on device)");
    /* before the first checkpoint (the progress line at step 10, a checkpoint at 50): the
     * error named was access()'s, made while choosing the hint */
    format_into(args, sizeof args, "--force -d %s -o %s -z %s " TINY " -n 100 -e 50 "
                ">/dev/full", text, model, tok);
    remove(model);
    expect_train("a run into a full disk before its first checkpoint", args, 1,
                 "standard output: write error (No space left on device); stopped at step");
}

/* Task: the hostile round's contract breaks, each refused with one line before any work
 * (or reported): outputs that are the training text; an empty -o; a folder that does not
 * exist (it failed only at the first checkpoint, after training); a run needing more
 * memory than the limit (it went to the OOM killer); a tokenizer of the same size that is
 * not the run's, on -r; OMP_NUM_THREADS beyond the cores (it crashed); standard output
 * closed (SIGPIPE, exit 141, no message) or full. In this order: -r needs the run the
 * memory checks leave. */
static void test_contracts(void) {
    char dir[CAP], text[CAP], model[CAP], tok[CAP];
    if (!check_true(make_temp_dir(dir) == 0, "contracts: temp folder")) return;
    if (check_true(write_play(join(text, dir, "text.txt")) == 0, "contracts: the text written")) {
        join(model, dir, "m.bin");
        join(tok, dir, "tok.bin");
        contracts_text_as_output(text, model);
        contracts_unwritable_outputs(dir, text);
        contracts_memory(dir, text, model, tok);
        contracts_foreign_tokenizer(dir, text, model);
        contracts_threads(text, model, tok);
        contracts_stdout(dir, text, model, tok);
    }
    remove_dir(dir);
}

int main(void) {
    const char *env = getenv("TRAIN"), *bin = env ? env : "./train";
    char cwd[CAP / 2];
    if (bin[0] != '/' && getcwd(cwd, sizeof cwd)) format_into(train_bin, CAP, "'%s/%s'", cwd, bin);
    else format_into(train_bin, CAP, "'%s'", bin);
    env = getenv("RUN");
    if (env) run_bin = env;
    test_cli();
    test_default_warmup();
    test_bad_data();
    test_no_overwrite();
    test_state_file();
    test_interrupted_save();
    test_kill_during_save();
    test_first_save_kills();
    test_commit_sync_fails();
    test_term_during_save();
    test_one_writer();
    test_contracts();
    return check_summary("test_train_cli");
}
