/* train_optim.h: what the trainer does with a gradient, and how it keeps a run on disk:
 * the learning-rate schedule, global-norm clipping and AdamW, then checkpoints in the
 * format run loads, each with an optimizer state file tied to it by a checksum, written
 * crash-safe, and validated like any input when a run resumes.
 *
 * The state file's format is in weights/README.md ("Optimizer state file"); its header
 * slots are the enum in train_optim.c.
 */
#ifndef TRAIN_OPTIM_H
#define TRAIN_OPTIM_H

#include <stddef.h>        /* size_t */
#include <stdint.h>        /* uint64_t */
#include <stdio.h>         /* FILE */
#include "train_model.h"   /* Trainer, TrainSettings */

#define TRAIN_STATE_MAGIC 0x31534F41         /* optimizer state file: "AOS1" little-endian */
#define TRAIN_STATE_VERSION 4                /* 4: the tokenizer's checksum */
#define TRAIN_STATE_MIN_VERSION 2            /* 2: tied to its checkpoint by a checksum */
#define TRAIN_STATE_HEADER_INTS 64           /* state header: 64 int32/float32 fields */
#define TRAIN_TEMP_SUFFIX ".tmp"             /* a file is written as PATH.tmp, then renamed */
#define TRAIN_PATH_CAP 4096                  /* longest path the trainer builds, NUL included */
#define TRAIN_FINISHED_CHECKPOINT 1          /* trainer_finish_save: what it finished */
#define TRAIN_FINISHED_TOKENIZER 2

/* ---- the update ---- */

/* Learning rate at step: linear warmup to lr, then cosine decay to lr * lr_min_ratio. */
float trainer_learning_rate(const TrainSettings *s, int step);

/* Clip, then one AdamW step at the scheduled learning rate; increments tr->step; then,
 * with settings.ema, ema += (1 - trainer_ema_decay(step)) (params - ema).
 * Returns the gradient norm before clipping. The norm is summed in float64 over fixed
 * blocks of the parameters, and the blocks in order: the same bits for any thread count. */
float trainer_update(Trainer *tr);

/* Decay of the weights' moving average after `step` updates: settings.ema, or less
 * early on, (1 + step) / (10 + step), so the first weights are soon forgotten. */
float trainer_ema_decay(const TrainSettings *s, int step);

/* Exchange params and the moving average (nothing without one): evaluation swaps, runs
 * the forward, and swaps back, bit for bit. */
void trainer_swap_ema(Trainer *tr);

/* ---- checkpoints and the optimizer state ---- */

/* Write the parameters (their moving average, if kept) as an llm.c fp32 GPT-2 checkpoint
 * (what run loads) to path, and, if state_path is not NULL, the step, settings, AdamW
 * moments (and, with an average, the training weights), a checksum of that checkpoint
 * and tr->tokenizer_sum to state_path (format: weights/README.md). A new run's first save
 * also passes tokenizer_path, whose PATH.tmp the caller has written and synced: it is
 * renamed into place last (else NULL). Crash-safe: each file is written to a new file at
 * its PATH.tmp and flushed to the disk (fsync), then the state is renamed into place (the
 * commit), then the checkpoint, then the tokenizer, and the folder is synced after each
 * rename; so path always holds a whole checkpoint, and state_path belongs to it unless a
 * crash fell after the commit, which trainer_finish_save completes. Returns 0, or -1
 * after one stderr line: temporaries are removed, except those whose state is in place. */
int trainer_save(const Trainer *tr, const char *path, const char *state_path,
                 const char *tokenizer_path);

/* Finish a trainer_save interrupted after its commit: if state_path's checksum of the
 * checkpoint does not match path but matches path.tmp, rename path.tmp to path; likewise
 * the tokenizer (with tokenizer_path not NULL and a state of version 4). Returns what it
 * finished (TRAIN_FINISHED_CHECKPOINT | TRAIN_FINISHED_TOKENIZER), 0 if nothing
 * (unreadable or mismatched files are left for trainer_load to report), or -1 after one
 * stderr line if a rename failed. */
int trainer_finish_save(const char *path, const char *state_path, const char *tokenizer_path);

/* Resume: build a trainer from a checkpoint and its state file (batch and settings
 * come from the state). Every field is checked before anything is allocated (shape and
 * settings in range, exact file sizes computed without overflow, the state's own
 * checksum, the checksum of the checkpoint it belongs to, finite parameters and
 * moments, second moments >= 0); tr->tokenizer_sum from the state (0 before version 4);
 * max_memory bounds its memory as settings.max_memory does trainer_init's (0 = none);
 * call trainer_finish_save first. Returns 0 or -1 after
 * one stderr line naming the file at fault; trainer_free is safe either way. */
int trainer_load(Trainer *tr, const char *path, const char *state_path, size_t max_memory);

/* The checksum (train_file_sum) of the tokenizer recorded in the state file at
 * state_path, into *sum. Returns 1, or 0 (*sum 0, no message) if there is no readable
 * state of a known version there or it records none (versions before 4). */
int trainer_state_tokenizer_sum(const char *state_path, uint64_t *sum);

/* 0 if path is a checkpoint trainer_start_from reads (an fp32 llm.c file this trainer
 * wrote: its header, size and attention extension), else -1 after one stderr line; a
 * check before a run's slow steps, which the shape check of trainer_start_from follows. */
int trainer_check_start(const char *path);

/* A new run's weights from the checkpoint at path (--init: fine-tuning, or swapping in
 * another attention and training on): its 16 tensors into tr (made by trainer_init, of
 * the same T, V, L, NH, C and positions), and its learned sink logits where both its
 * layer and tr's have them (else they stay 0); the moving average starts at them. The
 * optimizer starts afresh. Returns 0, or -1 after one stderr line (another shape, a bad file). */
int trainer_start_from(Trainer *tr, const char *path);

/* ---- files (also the program's) ---- */

/* path + TRAIN_TEMP_SUFFIX into temp. Returns 0, or -1 after a stderr line. */
int train_temp_path(char temp[TRAIN_PATH_CAP], const char *path);

/* FNV-1a 64 of the whole file at path into *sum (a state records its tokenizer's).
 * Returns 0, or -1 (no message) if it cannot be read. */
int train_file_sum(const char *path, uint64_t *sum);

#endif /* TRAIN_OPTIM_H */
