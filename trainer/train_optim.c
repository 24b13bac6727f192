/* train_optim.c: the update (schedule, clipping, AdamW) and the files of a run (the
 * checkpoint run loads, the optimizer state tied to it), written crash-safe and read back
 * with every field checked (train_optim.h).
 *
 * What this file does not do: gradients (train_backward.c), the network
 * (train_model.c), flags and data (train.c).
 */
#include "train_optim.h"

#include <errno.h>        /* errno */
#include <math.h>         /* sqrt, sqrtf, powf, cosf, isfinite */
#include <stdint.h>       /* int32_t, uint32_t, uint64_t, SIZE_MAX */
#include <stdio.h>        /* FILE, fopen, fread, fwrite, fprintf, remove */
#include <stdlib.h>       /* malloc, free */
#include <string.h>       /* memcpy, memset, strlen, strerror */
#include <sys/stat.h>     /* stat, S_ISREG, S_ISDIR, S_ISFIFO (POSIX) */
#include <unistd.h>       /* access: whether a rename that failed took place (POSIX) */

#include "checkpoint.h"   /* checkpoint_gpt2_header, CHECKPOINT_GPT2_* */
#include "hash.h"         /* hash_fnv1a64: the checksums of the files */
#include "kernels.h"      /* kernels_parallel_for */
#include "os.h"           /* os_create_new, os_close_synced, os_rename_synced, os_open_read,
                            * os_remove_on_signal */
#include "train_model.h"  /* Trainer, trainer_init, trainer_check_config, ... */

#define PI_F 3.14159265358979f
#define NORM_BLOCKS 64          /* the gradient norm: float64 sums over this many blocks */
#define NORM_LANES 8            /* ... each kept as 8 partial sums, added in a fixed order */
#define ELEMENTS_PER_JOB 16384  /* AdamW: parameters per job */

/* ------------------------------------------------------------------------- */
/* Schedule, clipping, AdamW                                                   */

float trainer_learning_rate(const TrainSettings *s, int step) {
    if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    float lr_min = s->lr * s->lr_min_ratio;
    float progress = s->steps > s->warmup ?
                     (float)(step - s->warmup) / (float)(s->steps - s->warmup) : 1.0f;
    if (progress > 1.0f) progress = 1.0f;
    return lr_min + 0.5f * (s->lr - lr_min) * (1.0f + cosf(PI_F * progress));
}

/* One update's arguments, for its jobs. */
typedef struct {
    Trainer *tr;
    double partial[NORM_BLOCKS];   /* the norm's block sums */
    size_t block;                  /* parameters per norm block */
    float norm;                    /* the result: the norm before clipping */
    float clip_scale, lr, correction1, correction2;
    float ema_rate;                /* 1 - the moving average's decay at this step */
} Update;

/* Block j of the squared gradient norm, in float64: NORM_LANES interleaved partial sums
 * (independent chains, so the additions overlap), added in a fixed order. */
static void grad_norm_job(void *ctx, int j) {
    Update *u = ctx;
    const float *g = u->tr->grads;
    size_t start = (size_t)j * u->block, end = start + u->block;
    if (start > u->tr->n_params) start = u->tr->n_params;
    if (end > u->tr->n_params) end = u->tr->n_params;
    double lanes[NORM_LANES] = {0};
    size_t i = start;
    for (; i + NORM_LANES <= end; i += NORM_LANES)
        for (int k = 0; k < NORM_LANES; k++) lanes[k] += (double)g[i + k] * (double)g[i + k];
    for (; i < end; i++) lanes[0] += (double)g[i] * (double)g[i];
    u->partial[j] = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                    ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/* AdamW (Loshchilov & Hutter, Algorithm 2) on parameters [j, j + 1) * ELEMENTS_PER_JOB:
 * each tensor's part with its own weight decay. */
static void adamw_job(void *ctx, int j) {
    const Update *u = ctx;
    Trainer *tr = u->tr;
    const TrainSettings *s = &tr->settings;
    KernelsAdamW h = {u->lr, s->beta1, s->beta2, s->eps, 0.0f, u->clip_scale, u->correction1,
                      u->correction2};
    size_t start = (size_t)j * ELEMENTS_PER_JOB, end = start + ELEMENTS_PER_JOB;
    if (end > tr->n_params) end = tr->n_params;
    size_t tensor_start = 0;
    for (int t = 0; t < TRAIN_N_TENSORS; t++) {
        size_t tensor_end = tensor_start + tr->tensor_size[t];
        size_t lo = start > tensor_start ? start : tensor_start;
        size_t hi = end < tensor_end ? end : tensor_end;
        if (lo < hi) {
            h.weight_decay = trainer_tensor_decayed(t) ? s->weight_decay : 0.0f;
            kernels_adamw(tr->params + lo, tr->grads + lo, tr->adam_m + lo, tr->adam_v + lo,
                          hi - lo, &h);
        }
        tensor_start = tensor_end;
    }
}

/* The weights' moving average on parameters [j, j + 1) * ELEMENTS_PER_JOB:
 * ema += (1 - decay) (params - ema), one rounding order for any thread count. */
static void ema_job(void *ctx, int j) {
    const Update *u = ctx;
    Trainer *tr = u->tr;
    size_t start = (size_t)j * ELEMENTS_PER_JOB, end = start + ELEMENTS_PER_JOB;
    if (end > tr->n_params) end = tr->n_params;
    for (size_t i = start; i < end; i++)
        tr->ema[i] += u->ema_rate * (tr->params[i] - tr->ema[i]);
}

float trainer_ema_decay(const TrainSettings *s, int step) {
    float warm = (1.0f + (float)step) / (10.0f + (float)step);
    return warm < s->ema ? warm : s->ema;
}

static void update_body(void *ctx) {
    Update *u = ctx;
    Trainer *tr = u->tr;
    const TrainSettings *s = &tr->settings;
    /* global gradient norm: the blocks depend only on n_params, summed in order */
    u->block = (tr->n_params + NORM_BLOCKS - 1) / NORM_BLOCKS;
    kernels_parallel_for(grad_norm_job, u, NORM_BLOCKS, (double)tr->n_params);
    double sum_sq = 0.0;
    for (int j = 0; j < NORM_BLOCKS; j++) sum_sq += u->partial[j];
    u->norm = (float)sqrt(sum_sq);
    u->clip_scale = s->clip > 0.0f && u->norm > s->clip ? s->clip / u->norm : 1.0f;
    u->lr = trainer_learning_rate(s, tr->step);
    int t = tr->step + 1;
    u->correction1 = 1.0f - powf(s->beta1, (float)t);
    u->correction2 = 1.0f - powf(s->beta2, (float)t);
    int jobs = (int)((tr->n_params + ELEMENTS_PER_JOB - 1) / ELEMENTS_PER_JOB);
    kernels_parallel_for(adamw_job, u, jobs, (double)tr->n_params * 4);
    tr->step++;
    if (tr->ema) {
        u->ema_rate = 1.0f - trainer_ema_decay(s, tr->step);
        kernels_parallel_for(ema_job, u, jobs, (double)tr->n_params * 2);
    }
}

float trainer_update(Trainer *tr) {
    Update u = {.tr = tr};
    kernels_run(update_body, &u);   /* on the pool, as trainer_forward */
    return u.norm;
}

void trainer_swap_ema(Trainer *tr) {
    if (!tr->ema) return;
    for (size_t i = 0; i < tr->n_params; i++) {
        float x = tr->params[i];
        tr->params[i] = tr->ema[i];
        tr->ema[i] = x;
    }
}

/* ------------------------------------------------------------------------- */
/* Checkpoints                                                                 */

/* Fields of the optimizer state file's header (TRAIN_STATE_HEADER_INTS int32 slots; the
 * float ones hold float32 bits, 64-bit ones low half first; from STATE_UNUSED on, 0).
 * Then adam_m and adam_v, n_params floats each, and with a moving average (STATE_EMA > 0)
 * the training weights (the checkpoint holds the average). STATE_MODEL_SUM is the FNV-1a
 * 64 of the checkpoint file the state belongs to (header and parameters); STATE_SUM that
 * of this file with the STATE_SUM slots 0; STATE_TOKENIZER_SUM that of the run's tokenizer
 * file (0 before version 4); STATE_REDRAW the Performer redraw interval (0 before it
 * existed: the default). weights/README.md documents the format. */
enum { STATE_MAGIC, STATE_VERSION, STATE_STEP, STATE_N_PARAMS_LO, STATE_N_PARAMS_HI,
       STATE_BATCH, STATE_STEPS, STATE_WARMUP, STATE_LR, STATE_LR_MIN_RATIO,
       STATE_WEIGHT_DECAY, STATE_BETA1, STATE_BETA2, STATE_EPS, STATE_CLIP, STATE_DROPOUT,
       STATE_SEED_LO, STATE_SEED_HI, STATE_MODEL_SUM_LO, STATE_MODEL_SUM_HI, STATE_T, STATE_V,
       STATE_L, STATE_NH, STATE_C, STATE_SUM_LO, STATE_SUM_HI, STATE_EMA, STATE_ATTN_DROPOUT,
       STATE_TOKEN_NOISE, STATE_TOKENIZER_SUM_LO, STATE_TOKENIZER_SUM_HI, STATE_REDRAW,
       STATE_UNUSED };

#define SUM_CHUNK 65536    /* bytes per read when hashing a file (train_file_sum) */

static int32_t float_bits(float f) { int32_t i; memcpy(&i, &f, sizeof i); return i; }
static float bits_float(int32_t i) { float f; memcpy(&f, &i, sizeof f); return f; }

/* A 64-bit value in two int32 slots, low half first. */
static void put_u64(int32_t *slots, int low, uint64_t x) {
    slots[low] = (int32_t)(uint32_t)(x & 0xFFFFFFFFu);
    slots[low + 1] = (int32_t)(uint32_t)(x >> 32);
}
static uint64_t get_u64(const int32_t *slots, int low) {
    return (uint64_t)(uint32_t)slots[low] | (uint64_t)(uint32_t)slots[low + 1] << 32;
}

/* ---- crash-safe files: write PATH.tmp, fsync it, rename it over PATH (os.h) */

int train_temp_path(char temp[TRAIN_PATH_CAP], const char *path) {
    int n = snprintf(temp, TRAIN_PATH_CAP, "%s%s", path, TRAIN_TEMP_SUFFIX);
    if (n < 0 || n >= TRAIN_PATH_CAP) {
        fprintf(stderr, "train: %s: path too long (got %zu bytes, expected at most %zu)\n",
                path, strlen(path), (size_t)TRAIN_PATH_CAP - sizeof TRAIN_TEMP_SUFFIX);
        return -1;
    }
    return 0;
}

/* Removes a temporary of a save that did not commit, and its listing for removal on a
 * signal. */
static void drop_temp(const char *path) {
    remove(path);
    os_remove_on_signal(path, 0);
}

/* Write the n_parts buffers, in order, to a new file at path (os_create_new: never into
 * another file's bytes); flush them to the disk (fsync); close. Returns 0, or -1 after a
 * stderr line, with path removed. */
static int write_synced(const char *path, const void *const parts[], const size_t sizes[],
                        int n_parts) {
    FILE *file = os_create_new("train", path);
    if (!file) return -1;
    os_remove_on_signal(path, 1);   /* until the save commits (trainer_save) */
    int ok = 1;
    for (int i = 0; ok && i < n_parts; i++) ok = fwrite(parts[i], 1, sizes[i], file) == sizes[i];
    if (!ok) {
        fprintf(stderr, "train: %s: write failed (got \"%s\", expected the whole file on the "
                "disk)\n", path, strerror(errno));
        fclose(file);
        drop_temp(path);
        return -1;
    }
    if (os_close_synced(file, "train", path) == 0) return 0;
    os_remove_on_signal(path, 0);   /* removed by os_close_synced */
    return -1;
}

int train_file_sum(const char *path, uint64_t *sum) {
    FILE *file = os_open_read("train", path, NULL);
    if (!file) return -1;
    unsigned char *buffer = malloc(SUM_CHUNK);
    uint64_t hash = HASH_FNV64_OFFSET;
    size_t got = 0;
    while (buffer && (got = fread(buffer, 1, SUM_CHUNK, file)) > 0)
        hash = hash_fnv1a64(hash, buffer, got);
    int ok = buffer && !ferror(file);
    free(buffer);
    fclose(file);
    *sum = hash;
    return ok ? 0 : -1;
}

/* ---- the checkpoint and its optimizer state */

/* FNV-1a 64 of a checkpoint file's bytes: header, parameters, then the attention
 * extension (ext_bytes of ext; none if 0). */
static uint64_t checkpoint_sum(const int32_t header[CHECKPOINT_GPT2_HEADER_INTS],
                               const float *params, size_t n_params, const void *ext,
                               size_t ext_bytes) {
    uint64_t sum = hash_fnv1a64(HASH_FNV64_OFFSET, header,
                                CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t));
    sum = hash_fnv1a64(sum, params, n_params * sizeof(float));
    return ext_bytes ? hash_fnv1a64(sum, ext, ext_bytes) : sum;
}

/* FNV-1a 64 of a state file's bytes, with its own checksum slots taken as 0. */
static uint64_t state_sum(const int32_t state[TRAIN_STATE_HEADER_INTS], const float *adam_m,
                          const float *adam_v, const float *weights, size_t n_params) {
    int32_t header[TRAIN_STATE_HEADER_INTS];
    memcpy(header, state, sizeof header);
    put_u64(header, STATE_SUM_LO, 0);
    uint64_t sum = hash_fnv1a64(HASH_FNV64_OFFSET, header, sizeof header);
    sum = hash_fnv1a64(sum, adam_m, n_params * sizeof(float));
    sum = hash_fnv1a64(sum, adam_v, n_params * sizeof(float));
    return weights ? hash_fnv1a64(sum, weights, n_params * sizeof(float)) : sum;
}

/* What a checkpoint holds: the moving average when there is one, else the weights; and
 * the training weights the state file then carries (NULL without an average). */
static const float *saved_params(const Trainer *tr) { return tr->ema ? tr->ema : tr->params; }
static const float *state_weights(const Trainer *tr) { return tr->ema ? tr->params : NULL; }

/* Floats of the 16 tensors an llm.c checkpoint holds (the sink logits and the
 * Synthesizers' parameters, the 17th and 18th, go into the attention extension). */
static size_t file_params(const Trainer *tr) {
    return tr->n_params - tr->tensor_size[TRAIN_N_FILE_TENSORS] -
           tr->tensor_size[TRAIN_N_FILE_TENSORS + 1];
}

/* A checkpoint's bytes after its header: the parameters, and for a variant the attention
 * extension, which *ext gets (malloc'd, *ext_bytes of it; NULL and 0 for exact attention
 * in every layer). Returns 0, or -1 if out of memory. */
static int encode_extension(const Trainer *tr, void **ext, size_t *ext_bytes) {
    *ext = NULL;
    *ext_bytes = 0;
    if (!tr->variant) return 0;
    const Config *c = &tr->config;
    size_t fixed = checkpoint_attention_bytes(c->n_layers, c->n_heads);
    *ext_bytes = fixed + checkpoint_synth_bytes(tr->attn, c);
    AttentionConfig *cfgs = malloc((size_t)c->n_layers * sizeof *cfgs);
    if (!cfgs || !(*ext = malloc(*ext_bytes))) {
        free(cfgs);
        return -1;
    }
    const float *sink = tr->tensor_size[TRAIN_N_FILE_TENSORS]
                      ? saved_params(tr) + file_params(tr) : NULL;
    checkpoint_encode_attention(*ext, tr->attn, sink, c->n_layers, c->n_heads);
    /* the Synthesizers' parameters as saved (the moving average's, when there is one) */
    memcpy(cfgs, tr->attn, (size_t)c->n_layers * sizeof *cfgs);
    checkpoint_point_synth(cfgs, c, saved_params(tr) + file_params(tr) +
                                    tr->tensor_size[TRAIN_N_FILE_TENSORS]);
    checkpoint_encode_synth((char *)*ext + fixed, cfgs, c);
    free(cfgs);
    return 0;
}

/* The state header of tr, belonging to the checkpoint whose bytes hash to model_sum. */
static void state_header(int32_t state[TRAIN_STATE_HEADER_INTS], const Trainer *tr,
                         uint64_t model_sum) {
    const TrainSettings *s = &tr->settings;
    const Config *c = &tr->config;
    memset(state, 0, TRAIN_STATE_HEADER_INTS * sizeof(int32_t));
    state[STATE_MAGIC] = TRAIN_STATE_MAGIC;
    state[STATE_VERSION] = TRAIN_STATE_VERSION;
    state[STATE_STEP] = tr->step;
    put_u64(state, STATE_N_PARAMS_LO, (uint64_t)tr->n_params);
    state[STATE_BATCH] = s->batch;
    state[STATE_STEPS] = s->steps;
    state[STATE_WARMUP] = s->warmup;
    state[STATE_LR] = float_bits(s->lr);
    state[STATE_LR_MIN_RATIO] = float_bits(s->lr_min_ratio);
    state[STATE_WEIGHT_DECAY] = float_bits(s->weight_decay);
    state[STATE_BETA1] = float_bits(s->beta1);
    state[STATE_BETA2] = float_bits(s->beta2);
    state[STATE_EPS] = float_bits(s->eps);
    state[STATE_CLIP] = float_bits(s->clip);
    state[STATE_DROPOUT] = float_bits(s->dropout);
    put_u64(state, STATE_SEED_LO, s->seed);
    put_u64(state, STATE_MODEL_SUM_LO, model_sum);
    state[STATE_T] = c->seq_len;
    state[STATE_V] = c->vocab_size;
    state[STATE_L] = c->n_layers;
    state[STATE_NH] = c->n_heads;
    state[STATE_C] = c->dim;
    state[STATE_EMA] = float_bits(s->ema);
    state[STATE_ATTN_DROPOUT] = float_bits(s->attn_dropout);
    state[STATE_TOKEN_NOISE] = float_bits(s->token_noise);
    put_u64(state, STATE_TOKENIZER_SUM_LO, tr->tokenizer_sum);
    state[STATE_REDRAW] = s->redraw;
    put_u64(state, STATE_SUM_LO, state_sum(state, tr->adam_m, tr->adam_v, state_weights(tr),
                                           tr->n_params));
}

int trainer_save(const Trainer *tr, const char *path, const char *state_path,
                 const char *tokenizer_path) {
    size_t param_bytes = tr->n_params * sizeof(float), ext_bytes;
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS], state[TRAIN_STATE_HEADER_INTS];
    char path_temp[TRAIN_PATH_CAP], state_temp[TRAIN_PATH_CAP], tokenizer_temp[TRAIN_PATH_CAP];
    checkpoint_gpt2_header(header, &tr->config, CHECKPOINT_GPT2_FP32, 0);
    if (tr->variant) header[CHECKPOINT_GPT2_ATTN_SLOT] = CHECKPOINT_ATTN_VERSION;
    void *ext;
    if (encode_extension(tr, &ext, &ext_bytes) != 0) {
        fprintf(stderr, "train: %s: out of memory\n", path);
        return -1;
    }
    if (train_temp_path(path_temp, path) != 0 ||
        (state_path && train_temp_path(state_temp, state_path)) ||
        (tokenizer_path && train_temp_path(tokenizer_temp, tokenizer_path))) {
        free(ext);
        return -1;
    }
    /* both files go to their temporaries first, each synced to the disk */
    if (state_path) {
        state_header(state, tr, checkpoint_sum(header, saved_params(tr), file_params(tr), ext,
                                               ext_bytes));
        const void *parts[] = {state, tr->adam_m, tr->adam_v, state_weights(tr)};
        const size_t sizes[] = {sizeof state, param_bytes, param_bytes, param_bytes};
        if (write_synced(state_temp, parts, sizes, tr->ema ? 4 : 3) != 0) {
            if (tokenizer_path) drop_temp(tokenizer_temp);
            free(ext);
            return -1;
        }
    }
    const void *parts[] = {header, saved_params(tr), ext};
    const size_t sizes[] = {sizeof header, file_params(tr) * sizeof(float), ext_bytes};
    int written = write_synced(path_temp, parts, sizes, ext ? 3 : 2);
    free(ext);
    if (written != 0) {
        if (state_path) drop_temp(state_temp);
        if (tokenizer_path) drop_temp(tokenizer_temp);
        return -1;
    }
    /* then the state is renamed into place: the commit. From here on a crash leaves a
     * state whose checkpoint (and tokenizer) wait in their PATH.tmp, which
     * trainer_finish_save renames; so those are kept if a later step fails, and a signal
     * no longer removes them (until here it removes every temporary: a run stopped before
     * its commit leaves nothing) */
    if (state_path) {
        os_remove_on_signal(path_temp, 0);
        if (tokenizer_path) os_remove_on_signal(tokenizer_temp, 0);
        if (os_rename_synced("train", state_temp, state_path) != 0) {
            /* renamed, but its folder not synced: the commit stands, and the checkpoint and
             * tokenizer it names stay at their PATH.tmp for -r to rename */
            int committed = access(state_temp, F_OK) != 0;
            drop_temp(state_temp);
            if (committed) return -1;
            drop_temp(path_temp);
            if (tokenizer_path) drop_temp(tokenizer_temp);
            return -1;
        }
        os_remove_on_signal(state_temp, 0);   /* renamed: the name is free again */
    }
    if (os_rename_synced("train", path_temp, path) != 0) {
        if (!state_path) drop_temp(path_temp);
        return -1;
    }
    os_remove_on_signal(path_temp, 0);
    return tokenizer_path ? os_rename_synced("train", tokenizer_temp, tokenizer_path) : 0;
}

/* 1 if the state header's magic and version are ones this trainer reads. */
static int state_version_ok(const int32_t state[TRAIN_STATE_HEADER_INTS]) {
    return state[STATE_MAGIC] == TRAIN_STATE_MAGIC &&
           state[STATE_VERSION] >= TRAIN_STATE_MIN_VERSION &&
           state[STATE_VERSION] <= TRAIN_STATE_VERSION;
}

int trainer_state_tokenizer_sum(const char *state_path, uint64_t *sum) {
    int32_t state[TRAIN_STATE_HEADER_INTS];
    *sum = 0;
    FILE *file = os_open_read("train", state_path, NULL);
    if (!file) return 0;
    int complete = fread(state, sizeof state, 1, file) == 1;
    fclose(file);
    if (complete && state_version_ok(state)) *sum = get_u64(state, STATE_TOKENIZER_SUM_LO);
    return *sum != 0;
}

/* If the file at path does not hash to want but path.tmp does, rename path.tmp over path:
 * 1 if it did, 0 if there was nothing to finish, -1 after a stderr line. */
static int finish_rename(const char *path, uint64_t want) {
    char temp[TRAIN_PATH_CAP];
    uint64_t sum;
    if (train_file_sum(path, &sum) == 0 && sum == want) return 0;   /* in place already */
    if (train_temp_path(temp, path) != 0) return -1;
    if (train_file_sum(temp, &sum) != 0 || sum != want) return 0;   /* nothing to finish */
    return os_rename_synced("train", temp, path) == 0 ? 1 : -1;
}

int trainer_finish_save(const char *path, const char *state_path, const char *tokenizer_path) {
    int32_t state[TRAIN_STATE_HEADER_INTS];
    FILE *file = os_open_read("train", state_path, NULL);
    if (!file) return 0;
    int complete = fread(state, sizeof state, 1, file) == 1;
    fclose(file);
    if (!complete || !state_version_ok(state)) return 0;
    int model = finish_rename(path, get_u64(state, STATE_MODEL_SUM_LO));
    if (model < 0) return -1;
    uint64_t tokenizer_sum = get_u64(state, STATE_TOKENIZER_SUM_LO);
    int tokenizer = tokenizer_path && tokenizer_sum ? finish_rename(tokenizer_path,
                                                                    tokenizer_sum) : 0;
    if (tokenizer < 0) return -1;
    return model * TRAIN_FINISHED_CHECKPOINT + tokenizer * TRAIN_FINISHED_TOKENIZER;
}

/* 1 if x is in [lo, hi] (an open end excluded), else 0 after a stderr line naming the
 * state file and the field. */
static int state_int_ok(const char *state_path, const char *name, long x, long lo, long hi) {
    if (x >= lo && x <= hi) return 1;
    fprintf(stderr, "train: %s: bad %s in the optimizer state (got %ld, expected %ld..%ld)\n",
            state_path, name, x, lo, hi);
    return 0;
}

static int state_float_ok(const char *state_path, const char *name, float x, float lo,
                          float hi, int open_lo, int open_hi) {
    if (isfinite(x) && (open_lo ? x > lo : x >= lo) && (open_hi ? x < hi : x <= hi)) return 1;
    fprintf(stderr, "train: %s: bad %s in the optimizer state (got %g, expected a number in "
            "%c%g, %g%c)\n", state_path, name, (double)x, open_lo ? '(' : '[', (double)lo,
            (double)hi, open_hi ? ')' : ']');
    return 0;
}

/* Settings from a state header into *s, each checked against the flags' ranges.
 * Returns 0, or -1 after a stderr line. */
static int state_settings(TrainSettings *s, const int32_t state[TRAIN_STATE_HEADER_INTS],
                          const char *state_path) {
    memset(s, 0, sizeof *s);
    s->batch = state[STATE_BATCH];
    s->steps = state[STATE_STEPS];
    s->warmup = state[STATE_WARMUP];
    s->lr = bits_float(state[STATE_LR]);
    s->lr_min_ratio = bits_float(state[STATE_LR_MIN_RATIO]);
    s->weight_decay = bits_float(state[STATE_WEIGHT_DECAY]);
    s->beta1 = bits_float(state[STATE_BETA1]);
    s->beta2 = bits_float(state[STATE_BETA2]);
    s->eps = bits_float(state[STATE_EPS]);
    s->clip = bits_float(state[STATE_CLIP]);
    s->dropout = bits_float(state[STATE_DROPOUT]);
    s->ema = bits_float(state[STATE_EMA]);   /* 0 in a version 2 file: no average */
    s->attn_dropout = bits_float(state[STATE_ATTN_DROPOUT]);   /* 0 before it existed */
    s->token_noise = bits_float(state[STATE_TOKEN_NOISE]);     /* likewise */
    s->seed = get_u64(state, STATE_SEED_LO);   /* any 64-bit value is a seed */
    s->redraw = state[STATE_REDRAW] ? state[STATE_REDRAW] : TRAIN_DEFAULT_REDRAW;
    const char *p = state_path;
    if (!state_int_ok(p, "batch", s->batch, 1, TRAIN_MAX_BATCH) ||
        !state_int_ok(p, "total steps", s->steps, 0, TRAIN_MAX_STEPS) ||
        !state_int_ok(p, "warmup", s->warmup, 1, s->steps > 0 ? s->steps : TRAIN_MAX_STEPS) ||
        !state_int_ok(p, "step", state[STATE_STEP], 0, s->steps) ||
        !state_float_ok(p, "learning rate", s->lr, 0.0f, TRAIN_MAX_LR, 1, 0) ||
        !state_float_ok(p, "final learning-rate ratio", s->lr_min_ratio, 0.0f, 1.0f, 0, 0) ||
        !state_float_ok(p, "weight decay", s->weight_decay, 0.0f, TRAIN_MAX_WEIGHT_DECAY, 0, 0) ||
        !state_float_ok(p, "beta1", s->beta1, 0.0f, 1.0f, 0, 1) ||
        !state_float_ok(p, "beta2", s->beta2, 0.0f, 1.0f, 0, 1) ||
        !state_float_ok(p, "eps", s->eps, 0.0f, 1.0f, 1, 0) ||
        !state_float_ok(p, "clip", s->clip, 0.0f, TRAIN_MAX_CLIP, 0, 0) ||
        !state_float_ok(p, "dropout", s->dropout, 0.0f, TRAIN_MAX_DROPOUT, 0, 0) ||
        !state_float_ok(p, "attention dropout", s->attn_dropout, 0.0f, TRAIN_MAX_DROPOUT, 0,
                        0) ||
        !state_float_ok(p, "token noise", s->token_noise, 0.0f, TRAIN_MAX_DROPOUT, 0, 0) ||
        !state_float_ok(p, "moving-average decay", s->ema, 0.0f, TRAIN_MAX_EMA, 0, 0) ||
        !state_int_ok(p, "redraw interval", s->redraw, 1, TRAIN_MAX_STEPS))
        return -1;
    for (int i = STATE_UNUSED; i < TRAIN_STATE_HEADER_INTS; i++) {
        if (state[i] != 0) {
            fprintf(stderr, "train: %s: bad optimizer state header (got %d in unused slot %d, "
                    "expected 0)\n", state_path, (int)state[i], i);
            return -1;
        }
    }
    return 0;
}

/* Index of the first non-finite value of x (n,), or n if there is none. */
static size_t first_non_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return i;
    return n;
}

/* A checkpoint's attention extension as read: each layer's attention, the sink logits,
 * and the bytes (for the checksum). All NULL for a checkpoint without one. */
typedef struct {
    AttentionConfig *cfgs;   /* (L,); a Synthesizer layer's synth points into ext */
    float *sink;             /* (L, NH) */
    void *ext;               /* the records, the sink logits, the Synthesizers' parameters */
    size_t ext_bytes;
} FileAttention;

static void file_attention_free(FileAttention *fa) {
    free(fa->cfgs);
    free(fa->sink);
    free(fa->ext);
    memset(fa, 0, sizeof *fa);
}

/* Reads the attention extension of a checkpoint (model_file, whose parameters end at byte
 * at, model_bytes long) into fa, checking that the file ends where its Synthesizers'
 * parameters do, and leaves the file at the parameters (byte back). Returns 0, or -1
 * after a stderr line. */
static int read_extension(FILE *model_file, const char *path, const Config *c, size_t at,
                          size_t back, size_t model_bytes, FileAttention *fa) {
    size_t fixed = checkpoint_attention_bytes(c->n_layers, c->n_heads);
    fa->ext_bytes = fixed;
    fa->ext = malloc(fa->ext_bytes);
    fa->cfgs = calloc((size_t)c->n_layers, sizeof *fa->cfgs);
    fa->sink = malloc((size_t)c->n_layers * (size_t)c->n_heads * sizeof(float));
    if (!fa->ext || !fa->cfgs || !fa->sink) {
        fprintf(stderr, "train: %s: out of memory\n", path);
        return -1;
    }
    if (fseek(model_file, (long)at, SEEK_SET) != 0 ||
        os_read_exact(model_file, fa->ext, fixed, "train", path, "attention extension") != 0 ||
        checkpoint_decode_attention(fa->cfgs, fa->sink, fa->ext, c->n_layers, c->n_heads,
                                    path) != 0)
        return -1;
    size_t synth = checkpoint_synth_bytes(fa->cfgs, c);
    if (model_bytes != at + fixed + synth) {
        fprintf(stderr, "train: %s: %s (got %zu bytes, expected %zu with its Synthesizers' "
                "parameters)\n", path, model_bytes < at + fixed + synth ? "truncated"
                : "trailing bytes", model_bytes, at + fixed + synth);
        return -1;
    }
    void *grown = realloc(fa->ext, fixed + synth + 1);
    if (!grown) {
        fprintf(stderr, "train: %s: out of memory\n", path);
        return -1;
    }
    fa->ext = grown;
    fa->ext_bytes = fixed + synth;
    if ((synth && os_read_exact(model_file, (char *)fa->ext + fixed, synth, "train", path,
                                "Synthesizer parameters") != 0) ||
        fseek(model_file, (long)back, SEEK_SET) != 0) {
        if (!ferror(model_file))
            fprintf(stderr, "train: %s: cannot seek (%s)\n", path, strerror(errno));
        return -1;
    }
    const float *synth_f = (const float *)(const void *)((char *)fa->ext + fixed);
    size_t bad = first_non_finite(synth_f, synth / sizeof(float));   /* as run refuses them */
    if (bad < synth / sizeof(float)) {
        fprintf(stderr, "train: %s: Synthesizer parameter %zu is not finite (got %g, expected "
                "a finite number)\n", path, bad, (double)synth_f[bad]);
        return -1;
    }
    checkpoint_point_synth(fa->cfgs, c, synth_f);
    return 0;
}

/* The checkpoint's header (model_file open at its start) into header and *c, checked to
 * be an fp32 file this trainer wrote, of a shape it trains, and exactly as long as its
 * parameters (and attention extension, read into fa) make it; *n_params gets the
 * trainer's parameter count (the sink logits included); the file is left at the
 * parameters. Returns 0, or -1 after a stderr line naming path. */
static int read_checkpoint_header(FILE *model_file, const char *path,
                                  int32_t header[CHECKPOINT_GPT2_HEADER_INTS], Config *c,
                                  size_t *n_params, FileAttention *fa) {
    size_t model_bytes = 0, header_bytes = CHECKPOINT_GPT2_HEADER_INTS * sizeof(int32_t);
    if (os_file_size(model_file, "train", path, &model_bytes) != 0 ||
        os_read_exact(model_file, header, header_bytes, "train", path, "header") != 0)
        return -1;
    int version;
    if (checkpoint_read_gpt2_header(header, path, c, &version) != 0) return -1;
    if (version != CHECKPOINT_GPT2_FP32 || c->vocab_size != c->padded_vocab_size) {
        fprintf(stderr, "train: %s: not a checkpoint this trainer wrote (got version %d, V %d, "
                "Vp %d; expected version %d with V == Vp)\n", path, version, c->vocab_size,
                c->padded_vocab_size, CHECKPOINT_GPT2_FP32);
        return -1;
    }
    if (trainer_check_config(c, 1, path) != 0) return -1;
    c->hidden_dim = 4 * c->dim;   /* in range now: C <= MODEL_MAX_DIM / 4 */
    /* in range, so the sizes below fit in size_t (trainer_check_config bounds them) */
    size_t sizes[TRAIN_N_TENSORS];
    size_t n_file = trainer_tensor_sizes(sizes, c, 0, 0);
    int extended = header[CHECKPOINT_GPT2_ATTN_SLOT] != 0;
    size_t want_model = header_bytes + n_file * sizeof(float) +
                        (extended ? checkpoint_attention_bytes(c->n_layers, c->n_heads) : 0);
    /* with the extension, a Synthesizer's parameters may follow (read_extension checks) */
    if (model_bytes < want_model || (!extended && model_bytes != want_model)) {
        fprintf(stderr, "train: %s: %s (got %zu bytes, expected %zu for %zu parameters%s)\n",
                path, model_bytes < want_model ? "truncated" : "trailing bytes", model_bytes,
                want_model, n_file, extended ? " and the attention extension" : "");
        return -1;
    }
    *n_params = n_file;
    if (!extended) return 0;
    if (read_extension(model_file, path, c, header_bytes + n_file * sizeof(float),
                       header_bytes, model_bytes, fa) != 0)
        return -1;
    int sinks = 0;
    for (int l = 0; l < c->n_layers; l++) sinks |= fa->cfgs[l].sink_logit;
    *n_params = trainer_tensor_sizes(sizes, c, sinks,
                                     checkpoint_synth_bytes(fa->cfgs, c) / sizeof(float));
    return 0;
}

/* The optimizer state of the checkpoint at path (shape c, n_params parameters): opened
 * into *state_file (the caller closes it), its header read into state and checked before
 * anything is allocated (magic and version, the same shape, every setting in range into
 * *s, the exact size its arrays make); the file is left at the arrays. Returns 0, or -1
 * after a stderr line naming state_path. */
static int read_state_header(const char *path, const char *state_path, const Config *c,
                             size_t n_params, int32_t state[TRAIN_STATE_HEADER_INTS],
                             TrainSettings *s, FILE **state_file) {
    size_t state_bytes = 0, header_bytes = TRAIN_STATE_HEADER_INTS * sizeof(int32_t);
    char expected[TRAIN_PATH_CAP + 32];
    snprintf(expected, sizeof expected, "the optimizer state of %s", path);
    if (!(*state_file = os_open_read("train", state_path, expected))) return -1;
    if (os_file_size(*state_file, "train", state_path, &state_bytes) != 0 ||
        os_read_exact(*state_file, state, header_bytes, "train", state_path, "header") != 0)
        return -1;
    if (!state_version_ok(state)) {
        fprintf(stderr, "train: %s: not an optimizer state of this trainer (got magic %d "
                "version %d, expected %d version %d..%d)\n", state_path,
                (int)state[STATE_MAGIC], (int)state[STATE_VERSION], TRAIN_STATE_MAGIC,
                TRAIN_STATE_MIN_VERSION, TRAIN_STATE_VERSION);
        return -1;
    }
    if (state[STATE_T] != c->seq_len || state[STATE_V] != c->vocab_size ||
        state[STATE_L] != c->n_layers || state[STATE_NH] != c->n_heads ||
        state[STATE_C] != c->dim || get_u64(state, STATE_N_PARAMS_LO) != (uint64_t)n_params) {
        fprintf(stderr, "train: %s: state of another model shape (got T %d, V %d, L %d, NH %d, "
                "C %d, %llu parameters; expected %s's T %d, V %d, L %d, NH %d, C %d, %zu%s)\n",
                state_path, (int)state[STATE_T], (int)state[STATE_V], (int)state[STATE_L],
                (int)state[STATE_NH], (int)state[STATE_C],
                (unsigned long long)get_u64(state, STATE_N_PARAMS_LO), path, c->seq_len,
                c->vocab_size, c->n_layers, c->n_heads, c->dim, n_params,
                c->positions == MODEL_POSITIONS_ROTARY ? " with rotary positions (no wpe)" : "");
        return -1;
    }
    if (state_settings(s, state, state_path) != 0) return -1;
    int arrays = s->ema > 0.0f ? 3 : 2;   /* the moments, and the weights with an average */
    size_t want_state = header_bytes + (size_t)arrays * n_params * sizeof(float);
    if (state_bytes != want_state) {
        fprintf(stderr, "train: %s: %s (got %zu bytes, expected %zu: the header and %d x %zu "
                "floats)\n", state_path, state_bytes < want_state ? "truncated" : "trailing bytes",
                state_bytes, want_state, arrays, n_params);
        return -1;
    }
    return 0;
}

/* The arrays of a checkpoint and its state, read into tr (whose tensors trainer_init
 * made): the checkpoint's parameters into the average when there is one, else the
 * weights; then the moments, and with an average the training weights. Returns 0, or -1
 * after a stderr line. */
static int read_arrays(Trainer *tr, FILE *model_file, FILE *state_file, const char *path,
                       const char *state_path, const FileAttention *fa) {
    size_t bytes = tr->n_params * sizeof(float);
    float *saved = tr->ema ? tr->ema : tr->params;
    size_t n_sink = tr->tensor_size[TRAIN_N_FILE_TENSORS];
    size_t n_synth = tr->tensor_size[TRAIN_N_FILE_TENSORS + 1];
    if (n_sink) memcpy(saved + file_params(tr), fa->sink, n_sink * sizeof(float));
    if (n_synth)   /* the checkpoint's Synthesizer layers are this run's (same spec) */
        memcpy(saved + file_params(tr) + n_sink,
               (const char *)fa->ext + checkpoint_attention_bytes(tr->config.n_layers,
                                                                  tr->config.n_heads),
               n_synth * sizeof(float));
    if (os_read_exact(model_file, saved, file_params(tr) * sizeof(float), "train", path,
                      "parameters") ||
        os_read_exact(state_file, tr->adam_m, bytes, "train", state_path, "moments") ||
        os_read_exact(state_file, tr->adam_v, bytes, "train", state_path, "moments") ||
        (tr->ema && os_read_exact(state_file, tr->params, bytes, "train", state_path,
                                  "weights")))
        return -1;
    return 0;
}

/* The arrays tr read are usable: every parameter, weight and moment finite, and every
 * second moment >= 0. Returns 0, or -1 after a stderr line naming the file and index. */
static int check_arrays(const Trainer *tr, const char *path, const char *state_path) {
    size_t n_params = tr->n_params;
    const float *saved = tr->ema ? tr->ema : tr->params;
    size_t bad_p = first_non_finite(saved, n_params);
    size_t bad_m = first_non_finite(tr->adam_m, n_params);
    size_t bad_v = first_non_finite(tr->adam_v, n_params);
    if (bad_p < n_params) {
        fprintf(stderr, "train: %s: parameter %zu is not finite (got %g, expected a finite "
                "number)\n", path, bad_p, (double)saved[bad_p]);
        return -1;
    }
    size_t bad_w = tr->ema ? first_non_finite(tr->params, n_params) : n_params;
    if (bad_w < n_params) {
        fprintf(stderr, "train: %s: weight %zu is not finite (got %g, expected a finite "
                "number)\n", state_path, bad_w, (double)tr->params[bad_w]);
        return -1;
    }
    if (bad_m < n_params || bad_v < n_params) {
        int in_m = bad_m < n_params;
        size_t at = in_m ? bad_m : bad_v;
        fprintf(stderr, "train: %s: adam_%c[%zu] is not finite (got %g, expected a finite "
                "number)\n", state_path, in_m ? 'm' : 'v', at,
                (double)(in_m ? tr->adam_m : tr->adam_v)[at]);
        return -1;
    }
    for (size_t j = 0; j < n_params; j++) {
        if (tr->adam_v[j] < 0.0f) {
            fprintf(stderr, "train: %s: adam_v[%zu] is negative (got %g, expected a mean of "
                    "squares, >= 0)\n", state_path, j, (double)tr->adam_v[j]);
            return -1;
        }
    }
    return 0;
}

/* The checksums that tie the two files together: the state's own (over its header and
 * arrays as read into tr), then that of the checkpoint (header, and the parameters) it
 * records. Returns 0, or -1 after a stderr line. */
static int check_sums(const Trainer *tr, const int32_t header[CHECKPOINT_GPT2_HEADER_INTS],
                      const int32_t state[TRAIN_STATE_HEADER_INTS], const char *path,
                      const char *state_path, const FileAttention *fa) {
    size_t n_params = tr->n_params;
    uint64_t sum = state_sum(state, tr->adam_m, tr->adam_v, state_weights(tr), n_params);
    if (sum != get_u64(state, STATE_SUM_LO)) {
        fprintf(stderr, "train: %s: corrupt optimizer state (got checksum %016llx, expected the "
                "%016llx stored in it)\n", state_path, (unsigned long long)sum,
                (unsigned long long)get_u64(state, STATE_SUM_LO));
        return -1;
    }
    sum = checkpoint_sum(header, saved_params(tr), file_params(tr), fa->ext, fa->ext_bytes);
    if (sum != get_u64(state, STATE_MODEL_SUM_LO)) {
        fprintf(stderr, "train: %s: state of another checkpoint (got %s with checksum %016llx, "
                "expected the %016llx of the step-%d checkpoint the state was saved with)\n",
                state_path, path, (unsigned long long)sum,
                (unsigned long long)get_u64(state, STATE_MODEL_SUM_LO), (int)state[STATE_STEP]);
        return -1;
    }
    return 0;
}

int trainer_load(Trainer *tr, const char *path, const char *state_path, size_t max_memory) {
    memset(tr, 0, sizeof *tr);
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS], state[TRAIN_STATE_HEADER_INTS];
    FILE *model_file = os_open_read("train", path, "a readable checkpoint"), *state_file = NULL;
    if (!model_file) return -1;
    Config c;
    TrainSettings s;
    FileAttention fa = {0};
    size_t n_params;
    if (read_checkpoint_header(model_file, path, header, &c, &n_params, &fa) != 0 ||
        read_state_header(path, state_path, &c, n_params, state, &s, &state_file) != 0)
        goto fail;
    /* the data, then the checksums that tie the two files together */
    s.max_memory = max_memory;
    s.attention = fa.cfgs;
    if (trainer_init(tr, &c, &s, s.batch) != 0) goto fail;
    tr->tokenizer_sum = get_u64(state, STATE_TOKENIZER_SUM_LO);
    if (read_arrays(tr, model_file, state_file, path, state_path, &fa) != 0 ||
        check_arrays(tr, path, state_path) != 0 ||
        check_sums(tr, header, state, path, state_path, &fa) != 0)
        goto fail;
    tr->step = state[STATE_STEP];
    fclose(model_file);
    fclose(state_file);
    file_attention_free(&fa);
    return 0;
fail:
    fclose(model_file);
    if (state_file) fclose(state_file);
    file_attention_free(&fa);
    trainer_free(tr);
    return -1;
}

int trainer_check_start(const char *path) {
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS];
    FileAttention fa = {0};
    Config c;
    size_t n_params;
    FILE *model_file = os_open_read("train", path, "a checkpoint to start from");
    if (!model_file) return -1;
    int status = read_checkpoint_header(model_file, path, header, &c, &n_params, &fa);
    fclose(model_file);
    file_attention_free(&fa);
    return status;
}

int trainer_start_from(Trainer *tr, const char *path) {
    int32_t header[CHECKPOINT_GPT2_HEADER_INTS];
    FileAttention fa = {0};
    Config c;
    size_t n_params;
    int status = -1;
    FILE *model_file = os_open_read("train", path, "a checkpoint to start from");
    if (!model_file) return -1;
    if (read_checkpoint_header(model_file, path, header, &c, &n_params, &fa) != 0) goto done;
    const Config *t = &tr->config;
    if (c.seq_len != t->seq_len || c.vocab_size != t->vocab_size ||
        c.n_layers != t->n_layers || c.n_heads != t->n_heads || c.dim != t->dim) {
        fprintf(stderr, "train: --init %s: a model of another shape (got T %d, V %d, L %d, NH %d, "
                "C %d; expected this run's T %d, V %d, L %d, NH %d, C %d)\n", path, c.seq_len,
                c.vocab_size, c.n_layers, c.n_heads, c.dim, t->seq_len, t->vocab_size,
                t->n_layers, t->n_heads, t->dim);
        goto done;
    }
    if (c.positions != t->positions) {
        static const char *const names[] = {"learned", "rope"};
        fprintf(stderr, "train: --init %s: a model with other positions (got %s, expected %s, "
                "this run's --pos)\n", path, names[c.positions], names[t->positions]);
        goto done;
    }
    size_t n_file = file_params(tr);
    if (os_read_exact(model_file, tr->params, n_file * sizeof(float), "train", path,
                      "parameters") != 0)
        goto done;
    size_t bad = first_non_finite(tr->params, n_file);
    if (bad < n_file) {
        fprintf(stderr, "train: --init %s: parameter %zu is not finite (got %g, expected a "
                "finite number)\n", path, bad, (double)tr->params[bad]);
        goto done;
    }
    /* the sink logits a layer learned, where this run's layer learns them too; a
     * Synthesizer's parameters where this run's layer is the same Synthesizer (else it
     * starts from its own initialisation: an exact model has nothing to lend it) */
    for (int l = 0; fa.cfgs && l < t->n_layers; l++) {
        if (fa.cfgs[l].sink_logit && tr->attn[l].sink_logit)
            memcpy(tr->p.sink + (size_t)l * t->n_heads, fa.sink + (size_t)l * t->n_heads,
                   (size_t)t->n_heads * sizeof(float));
        if (attention_is_synth(tr->attn[l].kind) && fa.cfgs[l].kind == tr->attn[l].kind &&
            fa.cfgs[l].factor == tr->attn[l].factor)
            memcpy(tr->p.synth + tr->synth_offset[l], fa.cfgs[l].synth,
                   (tr->synth_offset[l + 1] - tr->synth_offset[l]) * sizeof(float));
    }
    if (tr->ema) memcpy(tr->ema, tr->params, tr->n_params * sizeof(float));
    status = 0;
done:
    fclose(model_file);
    file_attention_free(&fa);
    return status;
}
