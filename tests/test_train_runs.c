/* test_train_runs.c: short training runs and the checkpoints they write.
 *
 * A short training run: the loss falls, a seed reproduces it bit for bit, 1 and 2
 * threads agree bit for bit, and resuming from a checkpoint continues identically; save
 * -> model_load -> model_forward gives the trainer's own logits. The same for every
 * attention variant and for rotary positions (their files, --init across them), the
 * training batch with token noise, the weights' moving average, the schedule and AdamW's
 * update against float64. (The shipped model's greedy text is test_model's, against a
 * float64 forward.)
 */
#include "train.h"

#include <fcntl.h>     /* open, fcntl, struct flock (POSIX: holding a lock) */
#include <math.h>      /* fabs, sqrt, exp, log, tanh, NAN */
#include <stdarg.h>    /* va_list (format_into) */
#include <stdint.h>    /* uint64_t, uintptr_t */
#include <stdio.h>     /* printf, snprintf, remove */
#include <stdlib.h>    /* malloc, calloc, free, mkdtemp, setenv, atoi */
#include <string.h>    /* memcpy, memcmp, strstr, strncmp, strcspn */
#include <signal.h>    /* kill, SIGKILL (POSIX: the kill -9 test) */
#include <sys/stat.h>  /* mkdir, mkfifo */
#include <sys/wait.h>  /* waitpid */
#include <time.h>      /* clock, clock_gettime, nanosleep */
#include <unistd.h>    /* access, fork, execl, getcwd, rmdir, close, getpid */

#include "attention.h"    /* attention_backward */
#include "attention_spec.h"   /* attention_spec_parse_layers: the variants' runs */
#include "hash.h"         /* hash_fnv1a64: the merges' checksum */
#include "kernels.h"      /* kernels_gelu, KERNELS_NORM_EPS, kernels_set_threads */
#include "model.h"        /* model_load, model_forward */
#include "tokenizer.h"    /* tokenizer_load, _encode, _decode, _next_piece, _merge */
#include "tests/check.h"  /* check_* */
#include "tests/train_fixtures.h"   /* tiny_config, run_init, run_steps, format_into, ... */

/* ------------------------------------------------------------------------- */
/* 3. Short training runs                                                      */

#define RUN_MARGIN 1.0f       /* the loss must fall by at least this many nats */


static void test_training_run(void) {
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[3][RUN_STEPS];
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b;
    if (!check_true(run_init(&a) == 0 && run_init(&b) == 0, "short run: init")) return;
    /* every pass of the trainer runs inside kernels_run, so the second run's loops go to
     * its pool of 2 threads (OpenMP's, or POSIX threads without OpenMP) */
    kernels_set_threads(1);
    run_steps(&a, tokens, RUN_STEPS, losses[0]);
    int threads = kernels_set_threads(2);   /* at most the cores */
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    float last = 0.0f;
    for (int i = RUN_STEPS - 10; i < RUN_STEPS; i++) last += losses[0][i] / 10.0f;
    check_true(last < losses[0][0] - RUN_MARGIN,
               "short run: loss falls by more than %.1f nats (step 1 %.3f, mean of last 10 %.3f)",
               (double)RUN_MARGIN, (double)losses[0][0], (double)last);
    check_true(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: 1 and %d threads give identical losses and parameters, bit for bit",
               threads);
    trainer_free(&b);

    /* the same seed again, interrupted: save at step 30, resume, continue to the end */
    const char *path = "build/test_train_ckpt.bin", *state = "build/test_train_ckpt.bin.state";
    if (!check_true(run_init(&b) == 0, "short run: init again")) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[2]);
    int saved = trainer_save(&b, path, state, NULL);
    trainer_free(&b);
    if (!check_true(saved == 0 && trainer_load(&b, path, state, 0) == 0, "short run: save, load"))
        goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[2]);
    check_true(memcmp(losses[0], losses[2], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "short run: same seed, and resumed at step %d, gives the same losses and "
               "parameters bit for bit", RUN_STEPS / 2);
    trainer_free(&b);

    /* 4. the checkpoint loads in run's model.c and gives the trainer's own logits */
    if (!check_true(trainer_save(&a, path, NULL, NULL) == 0, "short run: checkpoint saved"))
        goto done;
    Model m;
    if (check_true(model_load(&m, path, a.T, 0) == 0, "checkpoint loads with model_load")) {
        int inputs[8 * 16], targets[8 * 16];
        stream_batch(tokens, 0, a.B, a.T, inputs, targets);
        a.dropout_on = 0;
        trainer_forward(&a, inputs, NULL);
        const float *logits = model_forward(&m, inputs + a.T, a.T, 0, 1);  /* sequence 1 */
        check_true(logits != NULL, "model_forward on a trained checkpoint");
        /* the same layer functions in the same order: equal to float rounding, and bit
         * for bit where the model's products take the GEMM tile (see variant_run) */
        if (logits)
            check_close("run's logits vs the trainer's (sequence 1 of the batch)", logits,
                        a.a.logits + (size_t)a.T * RUN_V, (size_t)a.T * RUN_V, 1e-5, 1e-5);
        if (logits && kernels_gemm_min_rows() > 0 && a.T >= kernels_gemm_min_rows())
            check_true(memcmp(logits, a.a.logits + (size_t)a.T * RUN_V,
                              (size_t)a.T * RUN_V * sizeof(float)) == 0,
                       "run's logits = the trainer's bit for bit (the GEMM tile's order)");
        else
            check_skip("run's logits = the trainer's bit for bit: this build's products of "
                       "the sequence are dot products, not the GEMM tile");
        model_free(&m);
    }
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    free(tokens);
}

/* ------------------------------------------------------------------------- */
/* 3b. Short training runs of attention variants                               */

/* A run of RUN_STEPS with each layer's attention from spec (2 layers), on the same stream
 * as test_training_run: the loss falls; for the ones marked `full`, also 1 vs 2 threads bit
 * for bit, a resume from a save at half way bit for bit (sink logits, redrawn Performer
 * features and per-step LSH rotations included), and run's model_forward on the saved
 * checkpoint (which records the attention and the positions) gives the trainer's logits,
 * bit for bit with exact attention. positions: learned, or rotary (no wpe). */
static void variant_run(const char *spec, int full, ModelPositions positions) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    c.positions = positions;
    int rotary = positions == MODEL_POSITIONS_ROTARY;
    char label[96];   /* the spec, and the positions when rotary */
    snprintf(label, sizeof label, "%s%s", spec, rotary ? " --pos rope" : "");
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    s.steps = RUN_STEPS;
    s.redraw = 7;   /* Performer: several draws within the run and across the resume */
    AttentionConfig cfgs[2];
    char err[256] = "";
    if (!check_true(attention_spec_parse_layers(spec, 2, cfgs, err, sizeof err) == 0,
                    "variant run %s: spec parses%s%s", label, *err ? ": " : "", err)) return;
    int kernelised = 0;
    for (int l = 0; l < 2; l++)
        kernelised |= cfgs[l].kind == ATTENTION_LINEAR || cfgs[l].kind == ATTENTION_EFFICIENT ||
                      cfgs[l].kind == ATTENTION_PERFORMER;
    s.attn_dropout = kernelised ? 0.0f : 0.1f;
    s.attention = cfgs;
    int *tokens = malloc(sizeof(int) * RUN_TOKENS);
    float losses[3][RUN_STEPS];
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b;
    memset(&b, 0, sizeof b);
    const char *path = "build/test_train_variant.bin";
    const char *state = "build/test_train_variant.bin.state";
    if (!check_true(trainer_init(&a, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    if (rotary)
        check_true(a.tensor_size[1] == 0 && a.a.rope != NULL, "variant run %s: no wpe table "
                   "(0 of %zu parameters), the rotary angles made", label, a.n_params);
    kernels_set_threads(1);
    run_steps(&a, tokens, RUN_STEPS, losses[0]);
    float last = 0.0f;
    for (int i = RUN_STEPS - 10; i < RUN_STEPS; i++) last += losses[0][i] / 10.0f;
    check_true(last < losses[0][0] - RUN_MARGIN && isfinite(last),
               "variant run %s: loss falls by more than %.1f nats (step 1 %.3f, mean of last "
               "10 %.3f)", label, (double)RUN_MARGIN, (double)losses[0][0], (double)last);
    if (!full) goto done;
    int threads = kernels_set_threads(2);
    if (!check_true(trainer_init(&b, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    check_true(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "variant run %s: 1 and %d threads give identical losses and parameters", label,
               threads);
    trainer_free(&b);
    if (!check_true(trainer_init(&b, &c, &s, 8) == 0, "variant run %s: init", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[2]);
    int saved = trainer_save(&b, path, state, NULL);
    trainer_free(&b);
    if (!check_true(saved == 0 && trainer_load(&b, path, state, 0) == 0,
                    "variant run %s: save, load", label)) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[2]);
    check_true(memcmp(losses[0], losses[2], sizeof losses[0]) == 0 &&
               memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
               "variant run %s: resumed at step %d, the same losses and parameters bit for "
               "bit", label, RUN_STEPS / 2);
    /* the checkpoint records the attention: run's model uses it and gives the trainer's
     * logits (evaluation: dropout off, the random matrices of draw 0 in both) */
    if (!check_true(trainer_save(&a, path, NULL, NULL) == 0, "variant run %s: checkpoint saved",
                    label))
        goto done;
    Model m;
    if (check_true(model_load(&m, path, a.T, 0) == 0, "variant run %s: checkpoint loads", label)) {
        int inputs[8 * 16], targets[8 * 16];
        stream_batch(tokens, 0, a.B, a.T, inputs, targets);
        a.dropout_on = 0;
        trainer_forward(&a, inputs, NULL);
        const float *logits = model_forward(&m, inputs + a.T, a.T, 0, 1);  /* sequence 1 */
        char what[192];
        snprintf(what, sizeof what, "variant run %s: run's logits vs the trainer's", label);
        if (check_true(logits != NULL && m.lab == a.variant &&
                       m.config.positions == positions, "%s: the model runs the recorded "
                       "attention and positions", what))
            check_close(what, logits, a.a.logits + (size_t)a.T * RUN_V, (size_t)a.T * RUN_V,
                        1e-4, 1e-4);
        /* exact attention: the same functions in the same order (the rotary angles of
         * block_rope_angles in both), so the same bits where the model's products of T
         * rows take the GEMM tile, whose sums run in the trainer's order (kernels.h); the
         * portable build's products are dot products in another order, 2e-6 apart */
        float max_diff = 0.0f;
        for (size_t i = 0; logits && !a.variant && i < (size_t)a.T * RUN_V; i++) {
            float diff = fabsf(logits[i] - a.a.logits[(size_t)a.T * RUN_V + i]);
            max_diff = diff > max_diff ? diff : max_diff;
        }
        int gemm = kernels_gemm_min_rows() > 0 && a.T >= kernels_gemm_min_rows();
        if (logits && !a.variant && gemm)
            check_true(max_diff == 0.0f, "%s: max |diff| %g (expected 0: bit for bit)", what,
                       (double)max_diff);
        else if (logits && !a.variant)
            check_skip("run's logits bit for bit with the trainer's: this build's products of "
                       "the sequence are not the GEMM tile (the tolerance check above holds)");
        model_free(&m);
    }
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    trainer_free(&b);
    free(tokens);
}

/* The header's slot [10] of a checkpoint written by a run of these positions (-1 if the
 * run or the file failed); *bytes gets the file's size. */
static int saved_positions(ModelPositions positions, const char *path, long *bytes) {
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    c.positions = positions;
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    Trainer tr;
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS] = {0};
    FILE *f = NULL;
    if (trainer_init(&tr, &c, &s, 2) == 0 && trainer_save(&tr, path, NULL, NULL) == 0)
        f = fopen(path, "rb");
    int got = f && fread(header, sizeof header, 1, f) == 1;
    if (f && fseek(f, 0, SEEK_END) == 0) *bytes = ftell(f);
    if (f) fclose(f);
    trainer_free(&tr);
    return got ? (int)header[CHECKPOINT_GPT2_POS_SLOT] : -1;
}

/* Rotary positions in the files: the header's slot [10] (0 for learned, as llm.c's own),
 * no wpe in the file, model_load's view of it (no table, the angles within the context
 * only), the int8 form, and the trainer's refusals: a learned run's state beside a rotary
 * checkpoint, --init across position schemes. */
static void test_rotary_files(void) {
    const char *learned = "build/test_train_learned.bin", *rotary = "build/test_train_rope.bin";
    const char *q8 = "build/test_train_rope_q8.bin", *state = "build/test_train_rope.bin.state";
    const char *learned_state = "build/test_train_learned.bin.state";
    long learned_bytes = 0, rotary_bytes = 0;
    int slot_learned = saved_positions(MODEL_POSITIONS_LEARNED, learned, &learned_bytes);
    int slot_rotary = saved_positions(MODEL_POSITIONS_ROTARY, rotary, &rotary_bytes);
    check_true(slot_learned == 0 && slot_rotary == 1 &&
               learned_bytes - rotary_bytes == 16L * 32 * (long)sizeof(float),
               "rotary checkpoint: header [%d] = 1 (learned: 0, as llm.c's), and no wpe: "
               "%ld bytes, the learned file's %ld less T x C floats", CHECKPOINT_GPT2_POS_SLOT,
               rotary_bytes, learned_bytes);
    Model m;
    if (check_true(model_load(&m, rotary, 16, 0) == 0, "rotary checkpoint: model_load")) {
        int tokens[17] = {0};
        const float *logits = model_forward(&m, tokens, 16, 0, 0);
        check_true(m.config.positions == MODEL_POSITIONS_ROTARY &&
                   m.checkpoint.weights.pos_embedding == NULL && logits != NULL &&
                   strstr(m.format, "rotary positions") != NULL,
                   "rotary checkpoint: loads as rotary, no position table, runs 16 tokens "
                   "(\"%s\")", m.format);
        check_true(model_forward(&m, tokens, 1, 16, 0) == NULL,
                   "rotary checkpoint: position 16 refused (the context is still 16)");
        int saved = checkpoint_save_q8(&m.checkpoint, q8, CHECKPOINT_Q8_GROUP);
        model_free(&m);
        if (check_true(saved == 0 && model_load(&m, q8, 16, 0) == 0,
                       "rotary checkpoint: its int8 form (checkpoint_save_q8) loads")) {
            check_true(m.config.positions == MODEL_POSITIONS_ROTARY &&
                       model_forward(&m, tokens, 16, 0, 0) != NULL,
                       "rotary checkpoint: the int8 form keeps the rotary positions and runs");
            model_free(&m);
        }
    }
    /* --init across position schemes is refused, each way */
    Config c;
    tiny_config(&c, RUN_V, 2, 32, 2, 16);
    TrainSettings s = tiny_settings(0.1f, 1e-2f);
    Trainer tr;
    for (int r = 0; r < 2; r++) {
        c.positions = r ? MODEL_POSITIONS_ROTARY : MODEL_POSITIONS_LEARNED;
        if (check_true(trainer_init(&tr, &c, &s, 2) == 0, "--init: a %s run",
                       r ? "rotary" : "learned")) {
            check_true(trainer_start_from(&tr, r ? learned : rotary) != 0 &&
                       trainer_start_from(&tr, r ? rotary : learned) == 0,
                       "--init: a %s run refuses a %s checkpoint, takes its own kind",
                       r ? "rotary" : "learned", r ? "learned" : "rotary");
            trainer_free(&tr);
        }
    }
    /* a learned run's state beside a rotary checkpoint of the same shape: refused */
    c.positions = MODEL_POSITIONS_LEARNED;
    if (check_true(trainer_init(&tr, &c, &s, 2) == 0, "rotary checkpoint: a learned run")) {
        int saved = trainer_save(&tr, learned, learned_state, NULL);
        trainer_free(&tr);
        c.positions = MODEL_POSITIONS_ROTARY;
        Trainer rope;
        if (saved == 0 && trainer_init(&rope, &c, &s, 2) == 0) {
            saved = trainer_save(&rope, rotary, state, NULL);
            trainer_free(&rope);
        }
        check_true(saved == 0 && trainer_load(&tr, rotary, state, 0) == 0,
                   "rotary checkpoint: resumes with its own state");
        trainer_free(&tr);
        check_true(trainer_load(&tr, rotary, learned_state, 0) != 0 &&
                   trainer_load(&tr, learned, state, 0) != 0,
                   "rotary checkpoint: a learned run's state beside it is refused, and its "
                   "state beside a learned checkpoint");
    }
    remove(learned_state);
    remove(state);
    remove(learned);
    remove(rotary);
    remove(q8);
}

/* A Synthesizer's parameters in an int8 file: they follow the int8 tensors, whose bytes
 * (V = 17 rows of C = 10 int8 values first) leave them at no multiple of 4 in the file.
 * The int8 model's are the fp32 model's, 4-byte aligned in memory (a float read at an odd
 * address is undefined: the sanitizer build stops on it), and it runs a token. With a NaN
 * among them, --init (trainer_start_from) refuses the fp32 file. */
static void test_synth_q8_file(void) {
    const char *path = "build/test_train_synth.bin", *q8 = "build/test_train_synth_q8.bin";
    Config c;
    tiny_config(&c, 17, 1, 10, 2, 8);
    TrainSettings s = tiny_settings(0.0f, 1e-2f);
    AttentionConfig cfg;
    char err[256] = "";
    attention_spec_parse_layers("synth-random", 1, &cfg, err, sizeof err);
    s.attention = &cfg;
    Trainer tr;
    Model fp, q;
    if (!check_true(trainer_init(&tr, &c, &s, 2) == 0, "synth int8 file: init")) return;
    int saved = trainer_save(&tr, path, NULL, NULL);
    trainer_free(&tr);
    if (!check_true(saved == 0 && model_load(&fp, path, 8, 0) == 0,
                    "synth int8 file: the fp32 checkpoint loads")) return;
    saved = checkpoint_save_q8(&fp.checkpoint, q8, CHECKPOINT_Q8_GROUP);
    if (check_true(saved == 0 && model_load(&q, q8, 8, 0) == 0,
                   "synth int8 file: its int8 form loads")) {
        size_t bytes = checkpoint_synth_bytes(q.checkpoint.attention, &q.config);
        const float *a = fp.checkpoint.attention[0].synth, *b = q.checkpoint.attention[0].synth;
        int token = 3;
        check_true(bytes > 0 && a && b && (uintptr_t)b % _Alignof(float) == 0 &&
                   memcmp(a, b, bytes) == 0 && model_forward(&q, &token, 1, 0, 0) != NULL,
                   "synth int8 file: the %zu bytes of parameters are the fp32 file's, "
                   "4-byte aligned, and a token runs", bytes);
        model_free(&q);
    }
    model_free(&fp);
    /* a NaN among them: --init refuses the file, as run does */
    FILE *f = fopen(path, "r+b");
    float nan_value = NAN;
    int written = f && fseek(f, -(long)sizeof nan_value, SEEK_END) == 0 &&
                  fwrite(&nan_value, sizeof nan_value, 1, f) == 1;
    if (f) fclose(f);
    if (check_true(written && trainer_init(&tr, &c, &s, 2) == 0, "synth --init: set-up")) {
        check_true(trainer_start_from(&tr, path) != 0, "synth --init: a file whose last "
                   "Synthesizer parameter is NaN is refused");
        trainer_free(&tr);
    }
    remove(path);
    remove(q8);
}

static void test_variant_runs(void) {
    static const struct { const char *spec; int full; } RUNS[] = {
        {"window:w=4,sinklogit=1;exact", 1},   /* a hybrid with a learned sink */
        {"window:w=4,sinks=2", 0},
        {"dilated:w=3,k=2,sinks=1", 0},
        {"strided:l=4", 0},
        {"fixed:l=8,c=2", 0},
        {"softmax1", 0},
        {"linear", 0},
        {"linear:norm=1", 1},
        {"efficient", 0},
        {"performer:m=16", 1},
        {"lsh:buckets=4,rounds=2,local=2,sinks=1", 1},
        {"synth-dense;synth-random", 1},   /* two layers' parameters, one after the other */
        {"synth-frandom:rank=4;exact", 0},
        {"synth-fdense:a=4", 1},
    };
    for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++)
        variant_run(RUNS[i].spec, RUNS[i].full, MODEL_POSITIONS_LEARNED);
    /* rotary positions: with exact attention (run's logits bit for bit), and every variant,
     * since RoPE changes only q and k before attention */
    variant_run("exact", 1, MODEL_POSITIONS_ROTARY);
    for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++)
        variant_run(RUNS[i].spec, RUNS[i].full, MODEL_POSITIONS_ROTARY);
    test_rotary_files();
    /* an exact run's checkpoint is llm.c's own format: no attention extension */
    Trainer tr;
    if (check_true(run_init(&tr) == 0, "an exact run")) {
        const char *path = "build/test_train_exact.bin";
        int32_t header[CHECKPOINT_GPT2_HEADER_INTS] = {0};
        FILE *f = trainer_save(&tr, path, NULL, NULL) == 0 ? fopen(path, "rb") : NULL;
        int got = f && fread(header, sizeof header, 1, f) == 1;
        if (f) fclose(f);
        check_true(got && header[CHECKPOINT_GPT2_ATTN_SLOT] == 0,
                   "an exact run's checkpoint has no attention extension (header [%d] = %d)",
                   CHECKPOINT_GPT2_ATTN_SLOT, got ? (int)header[CHECKPOINT_GPT2_ATTN_SLOT] : -1);
        /* --init: a window run with learned sink logits starts from the exact run's
         * weights (sink logits 0); a model of another shape is refused */
        Config c;
        tiny_config(&c, RUN_V, 2, 32, 2, 16);
        TrainSettings s = tiny_settings(0.1f, 1e-2f);
        AttentionConfig cfgs[2];
        char err[256] = "";
        attention_spec_parse_layers("window:w=4,sinklogit=1", 2, cfgs, err, sizeof err);
        s.attention = cfgs;
        Trainer w;
        if (check_true(trainer_init(&w, &c, &s, 8) == 0, "--init: a window run")) {
            size_t n_file = w.n_params - w.tensor_size[TRAIN_N_FILE_TENSORS] -
                            w.tensor_size[TRAIN_N_FILE_TENSORS + 1];
            int started = trainer_start_from(&w, path) == 0;
            check_true(started && n_file == tr.n_params &&
                       memcmp(w.params, tr.params, n_file * sizeof(float)) == 0 &&
                       w.p.sink[0] == 0.0f && w.p.sink[3] == 0.0f,
                       "--init: the window run starts from the exact run's %zu parameters, "
                       "its sink logits 0", n_file);
            trainer_free(&w);
        }
        tiny_config(&c, RUN_V, 2, 32, 4, 16);   /* 4 heads */
        s.attention = NULL;
        if (check_true(trainer_init(&w, &c, &s, 8) == 0, "--init: a 4-head run")) {
            check_true(trainer_start_from(&w, path) != 0,
                       "--init: a checkpoint of another shape is refused");
            trainer_free(&w);
        }
        remove(path);
        trainer_free(&tr);
    }
}

/* The training batch (trainer_batch) with and without token noise, on a stream whose
 * token at position i is i, so a window shows where it starts and a replacement shows
 * where it was drawn from. Without noise: B windows of consecutive tokens, targets one
 * ahead. With noise q: the same targets, the same inputs except a share q of them (at
 * ±5 sd), each replaced by a token of the stream, from positions spread evenly (their
 * mean within 5 sd of n/2); another step gives other windows. */
#define BATCH_B 64
#define BATCH_T 64
#define BATCH_N 20000
#define BATCH_NOISE 0.25f

static void test_batch(void) {
    static int tokens[BATCH_N], in[2][BATCH_B * BATCH_T], tg[2][BATCH_B * BATCH_T];
    for (int i = 0; i < BATCH_N; i++) tokens[i] = i;
    Config c;
    tiny_config(&c, RUN_V, 1, 8, 2, BATCH_T);
    TrainSettings s = tiny_settings(0.0f, 1e-3f);
    Trainer tr;
    if (!check_true(trainer_init(&tr, &c, &s, BATCH_B) == 0, "batch: init")) return;
    tr.step = 3;
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    int windows_ok = 1;
    for (int b = 0; b < BATCH_B; b++) {
        int start = in[0][b * BATCH_T];
        windows_ok &= start >= 0 && start < BATCH_N - BATCH_T;
        for (int t = 0; t < BATCH_T; t++)
            windows_ok &= in[0][b * BATCH_T + t] == start + t &&
                          tg[0][b * BATCH_T + t] == start + t + 1;
    }
    check_true(windows_ok, "batch: without noise, %d windows of %d consecutive tokens, targets "
               "one ahead", BATCH_B, BATCH_T);

    tr.settings.token_noise = BATCH_NOISE;
    trainer_batch(&tr, tokens, BATCH_N, in[1], tg[1]);
    int n = BATCH_B * BATCH_T, replaced = 0, in_stream = 1;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (in[1][i] == in[0][i]) continue;
        replaced++;
        in_stream &= in[1][i] >= 0 && in[1][i] < BATCH_N;
        sum += in[1][i];
    }
    double expect = (double)BATCH_NOISE * n, sd = sqrt(expect * (1.0 - (double)BATCH_NOISE));
    check_true(memcmp(tg[0], tg[1], sizeof tg[0]) == 0, "batch: token noise leaves the targets");
    check_true(fabs(replaced - expect) < 5.0 * sd && in_stream,
               "batch: token noise %.2f replaces %d of %d inputs (expected %.0f +- %.0f), each by "
               "a token of the stream", (double)BATCH_NOISE, replaced, n, expect, 5.0 * sd);
    /* positions uniform on [0, N): mean N/2, sd of the mean N / sqrt(12 replaced) */
    double mean = replaced ? sum / replaced : 0.0, mean_sd = BATCH_N / sqrt(12.0 * replaced);
    check_true(fabs(mean - BATCH_N / 2.0) < 5.0 * mean_sd,
               "batch: replacements come from across the stream (mean position %.0f, expected "
               "%d +- %.0f)", mean, BATCH_N / 2, 5.0 * mean_sd);
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    int same = memcmp(in[0], in[1], sizeof in[0]) == 0;
    tr.step = 4;
    trainer_batch(&tr, tokens, BATCH_N, in[0], tg[0]);
    check_true(same && memcmp(tg[0], tg[1], sizeof tg[0]) != 0,
               "batch: the same step gives the same batch, another step other windows");
    trainer_free(&tr);
}

/* The weights' moving average (--ema): after each update, against a float64 recurrence
 * kept here from the weights the trainer reaches, with the decay written out again
 * (min(ema, (1 + t) / (10 + t)) after t updates); float rounding of 60 updates stays far
 * under 1e-6. Then the checkpoint holds the average, a resumed run ends with the same bits
 * (weights and average), and the weights themselves are the run without an average. */
#define EMA_DECAY 0.9f
#define EMA_TOL 1e-6

static void test_ema_run(void) {
    int *tokens = malloc(sizeof(int) * RUN_TOKENS), inputs[8 * 16], targets[8 * 16];
    float losses[2][RUN_STEPS];
    const char *path = "build/test_train_ema.bin", *state = "build/test_train_ema.bin.state";
    make_stream(tokens, RUN_TOKENS);
    Trainer a, b, plain;
    memset(&b, 0, sizeof b);
    memset(&plain, 0, sizeof plain);
    if (!check_true(run_init_ema(&a, EMA_DECAY) == 0 && a.ema != NULL, "ema: init")) goto done;
    double *expect = to_f64(a.params, a.n_params), worst = 0.0;
    for (int step = 0; step < RUN_STEPS; step++) {
        stream_batch(tokens, a.step, a.B, a.T, inputs, targets);
        trainer_forward(&a, inputs, targets);
        trainer_backward(&a);
        trainer_update(&a);
        double t = a.step, decay = (1.0 + t) / (10.0 + t);
        if (decay > (double)EMA_DECAY) decay = (double)EMA_DECAY;
        for (size_t j = 0; j < a.n_params; j++) {
            expect[j] = decay * expect[j] + (1.0 - decay) * (double)a.params[j];
            double err = fabs(expect[j] - (double)a.ema[j]);
            if (err > worst) worst = err;
        }
    }
    check_true(worst < EMA_TOL, "ema: the average after each of %d updates equals a float64 "
               "recurrence over the weights (worst error %.2e, tolerance %.0e)", RUN_STEPS,
               worst, EMA_TOL);
    free(expect);

    /* without an average the weights are the same bits: the average only watches */
    if (!check_true(run_init(&plain) == 0, "ema: init without")) goto done;
    run_steps(&plain, tokens, RUN_STEPS, losses[0]);
    check_true(memcmp(plain.params, a.params, a.n_params * sizeof(float)) == 0,
               "ema: the weights equal a run without an average, bit for bit");

    /* the checkpoint holds the average; save at the middle, resume, same bits at the end */
    if (!check_true(run_init_ema(&b, EMA_DECAY) == 0, "ema: init again")) goto done;
    run_steps(&b, tokens, RUN_STEPS / 2, losses[1]);
    int saved = trainer_save(&b, path, state, NULL);
    Model m;
    if (check_true(saved == 0 && model_load(&m, path, b.T, 0) == 0, "ema: checkpoint loads")) {
        const float *wte = m.checkpoint.tensors[TENSOR_WTE].f32;
        size_t bytes = b.tensor_size[0] * sizeof(float);
        check_true(memcmp(wte, b.ema, bytes) == 0 && memcmp(wte, b.params, bytes) != 0,
                   "ema: the checkpoint holds the average, not the weights");
        model_free(&m);
    }
    trainer_free(&b);
    if (!check_true(trainer_load(&b, path, state, 0) == 0 && b.ema != NULL, "ema: load")) goto done;
    run_steps(&b, tokens, RUN_STEPS, losses[1]);
    check_true(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0 &&
               memcmp(a.ema, b.ema, a.n_params * sizeof(float)) == 0,
               "ema: resumed at step %d, the weights and the average end with the same bits",
               RUN_STEPS / 2);
    /* evaluation swaps the average in and out, exactly */
    float *copy = malloc(a.n_params * sizeof(float));
    memcpy(copy, a.params, a.n_params * sizeof(float));
    trainer_swap_ema(&a);
    int swapped = memcmp(a.params, b.ema, a.n_params * sizeof(float)) == 0;
    trainer_swap_ema(&a);
    check_true(swapped && memcmp(a.params, copy, a.n_params * sizeof(float)) == 0,
               "ema: trainer_swap_ema puts the average in place and back, bit for bit");
    free(copy);
done:
    remove(path);
    remove(state);
    trainer_free(&a);
    trainer_free(&b);
    trainer_free(&plain);
    free(tokens);
}

/* Learning-rate schedule: warmup is linear, then a cosine ends at lr * ratio. */
static void test_schedule(void) {
    TrainSettings s = tiny_settings(0.0f, 1e-3f);
    s.steps = 100; s.warmup = 10;
    float w0 = trainer_learning_rate(&s, 0), w9 = trainer_learning_rate(&s, 9);
    float mid = trainer_learning_rate(&s, 55), end = trainer_learning_rate(&s, 100);
    check_true(fabsf(w0 - 1e-4f) < 1e-9f && fabsf(w9 - 1e-3f) < 1e-9f &&
               fabsf(mid - 5.5e-4f) < 1e-7f && fabsf(end - 1e-4f) < 1e-9f,
               "schedule: warmup 1e-4 .. 1e-3, cosine midpoint 5.5e-4, end 1e-4 (got %g %g %g %g)",
               (double)w0, (double)w9, (double)mid, (double)end);
}

/* Three updates against AdamW in float64 from its definition (Loshchilov & Hutter,
 * Algorithm 2): the global gradient norm, clipped to `clip`, bias corrections at t = 1, 2,
 * 3, the scheduled rate (warmup, then the cosine), and decoupled weight decay on the
 * matrices and embeddings alone (wte, wpe, qkvw, attprojw, fcw, fcprojw: the 2-D tensors,
 * not biases or norms). Made-up parameters (none 0) and gradients of norm ~8: a clip of
 * 0.5 acts, and a clip of 0 (off) leaves them whole. Parameters (|p| <= 0.2) and moments
 * agree within float rounding (a few ulps). */
static void test_update_reference(void) {
    static const int DECAYED[] = {0, 1, 4, 6, 10, 12};
    Config c;
    tiny_config(&c, 16, 2, 8, 2, 4);
    for (int clip_on = 1; clip_on >= 0; clip_on--) {
        TrainSettings s = tiny_settings(0.0f, 1e-2f);
        s.steps = 4; s.warmup = 2; s.beta2 = 0.95f; s.weight_decay = 0.3f;
        s.clip = clip_on ? 0.5f : 0.0f;
        Trainer tr;
        if (!check_true(trainer_init(&tr, &c, &s, 1) == 0, "AdamW reference: trainer built")) {
            trainer_free(&tr);
            return;
        }
        size_t n = tr.n_params;
        for (size_t i = 0; i < n; i++)   /* biases too, so that decay on one shows */
            tr.params[i] = 0.2f * cosf(0.11f * (float)i);
        double *p = to_f64(tr.params, n), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
        double *decay = calloc(n, sizeof *decay);
        double lr0 = (double)s.lr, lr_min = (double)s.lr * (double)s.lr_min_ratio;
        double b1 = (double)s.beta1, b2 = (double)s.beta2, eps = (double)s.eps;
        double clip = (double)s.clip, pi = acos(-1.0);
        for (size_t t = 0, at = 0; p && m && v && decay && t < TRAIN_N_TENSORS; t++) {
            for (size_t k = 0; k < sizeof DECAYED / sizeof DECAYED[0]; k++)
                if ((int)t == DECAYED[k])
                    for (size_t i = 0; i < tr.tensor_size[t]; i++)
                        decay[at + i] = (double)s.weight_decay;
            at += tr.tensor_size[t];
        }
        double worst_p = 0.0, worst_mv = 0.0, worst_norm = 0.0;
        for (int step = 0; p && m && v && decay && step < 3; step++) {
            double sum_sq = 0.0;
            for (size_t i = 0; i < n; i++) {
                tr.grads[i] = 0.5f * sinf(0.37f * (float)i + (float)step);
                sum_sq += (double)tr.grads[i] * (double)tr.grads[i];
            }
            double norm = sqrt(sum_sq), scale = clip_on && norm > clip ? clip / norm : 1.0;
            double lr = step < s.warmup ? lr0 * (step + 1.0) / s.warmup
                      : lr_min + 0.5 * (lr0 - lr_min) *
                        (1.0 + cos(pi * (step - s.warmup) / (s.steps - s.warmup)));
            double c1 = 1.0 - pow(b1, step + 1), c2 = 1.0 - pow(b2, step + 1);
            for (size_t i = 0; i < n; i++) {
                double g = (double)tr.grads[i] * scale;
                m[i] = b1 * m[i] + (1.0 - b1) * g;
                v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                p[i] -= lr * (m[i] / c1 / (sqrt(v[i] / c2) + eps) + decay[i] * p[i]);
            }
            double got_norm = (double)trainer_update(&tr);
            worst_norm = fmax(worst_norm, fabs(got_norm - norm) / norm);
            for (size_t i = 0; i < n; i++) {
                worst_p = fmax(worst_p, fabs((double)tr.params[i] - p[i]));
                worst_mv = fmax(worst_mv, fmax(fabs((double)tr.adam_m[i] - m[i]),
                                               fabs((double)tr.adam_v[i] - v[i])));
            }
        }
        check_true(p && m && v && decay && worst_norm < 1e-6 && worst_p < 1e-7 && worst_mv < 1e-7,
                   "AdamW, clip %s: 3 updates as float64 AdamW (max |diff| params %.2g, "
                   "moments %.2g; norm relative %.2g)", clip_on ? "0.5" : "off", worst_p,
                   worst_mv, worst_norm);
        free(p); free(m); free(v); free(decay);
        trainer_free(&tr);
    }
}

/* A per-layer attention text too long for its buffer ends at a whole item and says how
 * many layers it leaves out (an --eval report of 64 layers listed 28, with no sign). */
static void test_spec_text(void) {
    enum { L = 64 };
    AttentionConfig cfgs[L];
    char err[256], text[256], whole[L * ATTENTION_SPEC_MAX];
    if (!check_true(attention_spec_parse_layers("63*window:w=4;exact", L, cfgs, err,
                                                sizeof err) == 0, "spec text: parses")) return;
    for (int l = 1; l < L; l += 2) cfgs[l] = cfgs[L - 1];   /* window, exact, window, ... */
    attention_spec_format_layers(cfgs, L, whole, sizeof whole);
    AttentionConfig back[L];
    check_true(attention_spec_parse_layers(whole, L, back, err, sizeof err) == 0 &&
               strstr(whole, "...") == NULL, "spec text: the whole text parses back");
    attention_spec_format_layers(cfgs, L, text, sizeof text);
    const char *mark = strstr(text, ";... (");
    int more = mark ? atoi(mark + 6) : 0, items = 1;
    for (const char *p = text; mark && p < mark; p++) items += *p == ';';
    check_true(mark && strlen(text) < sizeof text && items + more == L &&
               strcmp(mark + 6 + strcspn(mark + 6, " "), " more layers)") == 0 &&
               strncmp(text, whole, (size_t)(mark - text)) == 0, "spec text: %d items shown "
               "and the %d more layers counted: %s", items, more, text);
}

int main(void) {
    test_spec_text();
    test_schedule();
    test_update_reference();
    test_training_run();
    test_variant_runs();
    test_synth_q8_file();
    test_ema_run();
    test_batch();
    return check_summary("test_train_runs");
}
