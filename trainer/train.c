/* train.c: the trainer program: train a byte-level BPE tokenizer and a GPT-2 model from
 * scratch on a text file.
 *
 * The flags, the data (read, split 90/10, tokenized with bpe.c's tokenizer), the batches,
 * the loop (forward, backward, update, every few steps a validation pass and a
 * checkpoint), the progress lines (loss, tokens/s, GFLOP/s) and the final figures. The
 * network, its gradient and the update are the trainer library: train.h names its parts
 * (train_model.c, train_backward.c, train_optim.c). Read train.h first.
 */
#include "train.h"

#include <errno.h>        /* errno */
#include <limits.h>       /* INT_MAX (flag parsing) */
#include <stdint.h>       /* uint64_t */
#include <stdio.h>        /* FILE, fopen, printf, fprintf, snprintf, remove */
#include <stdlib.h>       /* malloc, free */
#include <string.h>       /* strcmp, strncmp, strlen, strchr, strrchr, strerror */
#include <unistd.h>       /* access (POSIX) */

#include "attention_spec.h"   /* attention_spec_parse_layers: --attn */
#include "bpe.h"          /* bpe_train_logged, bpe_save: the tokenizer trainer */
#include "cli.h"          /* cli_parse_int, cli_parse_float, cli_printable (flag parsing) */
#include "kernels.h"      /* kernels_threads, kernels_isa (progress line) */
#include "model.h"        /* Config */
#include "os.h"           /* os_read_file, os_seconds, os_check_output, os_lock */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode */

#define EXIT_BAD_DATA 1                 /* unreadable or unusable data, runtime failure */
#define EXIT_USAGE 2                    /* unknown flag, malformed or out-of-range value */
#define TRAIN_SPLIT_NUM 9               /* the first 9/10 of the bytes train ... */
#define TRAIN_SPLIT_DEN 10              /* ... and the rest validates */
#define LN2 0.6931471805599453          /* ln 2: nats per bit */
#define LOG_EVERY 10                    /* steps between progress lines */
#define MAX_DATA_BYTES (1L << 30)       /* refuse text files above 1 GiB */
#define MAX_TOKENIZER_BYTES (1L << 26)  /* above any tokenizer train writes (under 17 MiB) */
#define DEFAULT_WARMUP 100              /* warmup steps, unless the run is short: then ... */
#define WARMUP_SHARE 10                 /* ... 1/10 of the steps (at least 1) */
#define DEFAULT_SEED 1337
#define TRAIN_EXTRA_TOKENS 2            /* training needs T + 2 tokens: two distinct windows */
#define MIN_VAL_TOKENS 2                /* validation needs one token and its successor */
#define ASCII_DEL 0x7F                  /* the one control character above the C0 range */
#define FLAG_MAX_VOCAB 65536            /* the flags' ranges of the model's shape */
#define FLAG_MAX_LAYERS 64
#define MAX_SAMPLE 1000                 /* --sample: most tokens printed */
#define FLAG_MIN_DIM 8
#define FLAG_MAX_DIM 2048
#define FLAG_MIN_CONTEXT 2
#define FLAG_MAX_CONTEXT 4096
#define MAX_THREADS 1024                /* --threads upper bound (then capped at the cores) */
#define MAX_MEMORY_GB 1e6               /* --max-memory upper bound, GB */
#define DEFAULT_MAX_MEMORY ((size_t)1 << (sizeof(size_t) > 4 ? 34 : 31)) /* --max-memory where
                                        * memory limit is unknown: 16 GiB (2 GiB on 32-bit) */
#define ENCODE_CHUNK ((size_t)1 << 20)  /* encode_all: bytes per chunk, about */
#define STATE_SUFFIX ".state"           /* the optimizer state is PATH.state */
#define TOKENIZER_NAME "tokenizer.bin"  /* default tokenizer, beside the checkpoint */

static const char USAGE[] =
"Usage: train [options]\n"
"Train a byte-level BPE tokenizer and a GPT-2 model from scratch on a text file. The\n"
"first 90% of its bytes train, the last 10% validate.\n"
"\n"
"Options (a long one takes its value as --name VALUE or --name=VALUE):\n"
"  -d, --data PATH        training text (default data/tinyshakespeare.txt; weights/README.md\n"
"                         says where to get Tiny Shakespeare); - reads standard input\n"
"  -o, --out PATH         checkpoint to write (default weights/model.bin); the optimizer\n"
"                         state goes to PATH.state\n"
"  -z, --tokenizer PATH   tokenizer to write, or read with -r (default: tokenizer.bin\n"
"                         beside the checkpoint)\n"
"  -r, --resume           continue the run saved in the checkpoint and its state file\n"
"      --force            overwrite an existing checkpoint, state and tokenizer (without\n"
"                         it a new run refuses to, so no trained model is lost; an\n"
"                         existing tokenizer stays if this text trains the same file)\n"
"  -v, --vocab N          BPE vocabulary size incl. 256 bytes and end-of-text, 257..65536\n"
"                         (default 1024)\n"
"  -L, --layers N         transformer blocks, 1..64 (default 10)\n"
"  -C, --dim N            model width, 8..2048 (default 128)\n"
"  -H, --heads N          attention heads, dividing the width (default 4)\n"
"  -T, --context N        context length in tokens, 2..4096 (default 256)\n"
"      --pos SCHEME       positions: learned (a T x C table, default) or rope (rotary)\n"
"  -B, --batch N          sequences per step, 1..4096 (default 16)\n";

/* The usage text's training flags (a string of its own: C11 promises 4095 characters). */
static const char USAGE_TRAINING[] =
"  -n, --steps N          optimizer steps, 0..10000000 (default 5300)\n"
"  -l, --lr X             peak learning rate, (0, 1] (default 0.002)\n"
"  -w, --warmup N         warmup steps, 1..steps (default 100, or steps / 10 if that is\n"
"                         smaller, at least 1)\n"
"  -W, --weight-decay X   AdamW weight decay on weight matrices, 0..10 (default 0.5)\n"
"  -p, --dropout X        residual and embedding dropout, [0, 0.9] (default 0.2)\n"
"      --attn-dropout X   dropout on the attention weights, [0, 0.9] (default 0.1),\n"
"                         in the layers that have them (linear, efficient and performer\n"
"                         layers have none: without another layer, the default is 0)\n"
"      --attn SPEC        the attention to train, as run's --attn: one spec for every\n"
"                         layer, or 'SPEC;SPEC;...' per layer with N*SPEC for N layers\n"
"                         (default exact); the checkpoint records it, and run uses it\n"
"      --init PATH        start from the weights of PATH, an fp32 checkpoint of the same\n"
"                         shape and tokenizer (fine-tuning, or another --attn trained on\n"
"                         from exact attention's weights); the optimizer starts afresh.\n"
"                         The tokenizer must be PATH's (as PATH.state records, or\n"
"                         tokenizer.bin beside PATH): learned anew from the same text, or\n"
"                         used as it is when -z names it (then any text will do)\n"
"      --redraw N         Performer: steps between draws of its random features,\n"
"                         1..10000000 (default 100; LSH draws its rotations every step)\n"
"      --token-noise X    replace this share of the input tokens of each training batch,\n"
"                         each by the token at a random place of the training text (the\n"
"                         targets stay), [0, 0.9] (default 0)\n"
"      --ema X            keep a moving average of the weights with this decay per step,\n"
"                         0..0.99999, 0 = none (default 0.999); checkpoints, validation and\n"
"                         the final figures use the average\n"
"  -g, --clip X           gradient-norm clip, 0 = off, 0..1000 (default 1.0)\n"
"  -e, --eval-every N     steps between validation and checkpoints, 1.. (default 500)\n"
"      --sample N         after each checkpoint, print the N tokens it continues greedily\n"
"                         from a newline (what ./run -t 0 would write), at most the\n"
"                         context -T less one, 0..1000 (default 0)\n"
"  -s, --seed N           random seed, 0..2147483647 (default 1337)\n"
"      --threads N        threads, 1..1024, capped at the cores (default: all of them,\n"
"                         fewer under a cgroup's CPU quota, or OMP_NUM_THREADS); any\n"
"                         number gives the same bits\n"
"      --max-memory GB    refuse a run that needs more memory, (0, 1e6] (default: what\n"
"                         this process may use: the machine's memory, or less under a\n"
"                         cgroup limit or ulimit -v; the run's need, --sample's model\n"
"                         included, is computed before any step)\n"
"  -h, --help             print this help and exit\n";

/* The flags -r takes (the rest comes from the state file): allowed_with_resume's list,
 * as the help and the usage error print it. */
#define RESUME_FLAGS "-d, -o, -z, -e, -n, --sample, --threads, --max-memory and --force"

/* The usage text's notes, after the flags. */
static const char USAGE_NOTES[] =
"\n"
"With -r only " RESUME_FLAGS " may be\n"
"given: the rest comes from the state file; -n then sets a new total, and the cosine decay\n"
"continues toward the new end.\n"
"A checkpoint and its state (and, with the first, the tokenizer) are written to PATH.tmp\n"
"files and renamed into place, so a run stopped at any moment (even by a crash) resumes\n"
"with -r from its last checkpoint, or, stopped before its first, left nothing: run the\n"
"same command again. PATH.lock is held while a run writes PATH: a second trainer aimed\n"
"at the same checkpoint, state or tokenizer is refused.\n"
"Exit status: 0 ok, 1 bad data or runtime failure (or an output file exists without\n"
"--force), 2 usage error.\n";

/* ---- flags ---- */

typedef enum {
    OPT_HELP, OPT_RESUME, OPT_FORCE, OPT_DATA, OPT_OUT, OPT_TOKENIZER, OPT_EVAL_EVERY,
    OPT_STEPS, OPT_VOCAB, OPT_LAYERS, OPT_DIM, OPT_HEADS, OPT_CONTEXT, OPT_BATCH, OPT_LR,
    OPT_WARMUP, OPT_WEIGHT_DECAY, OPT_DROPOUT, OPT_ATTN_DROPOUT, OPT_TOKEN_NOISE, OPT_EMA,
    OPT_CLIP, OPT_SEED, OPT_THREADS, OPT_MAX_MEMORY, OPT_ATTN, OPT_REDRAW, OPT_INIT,
    OPT_SAMPLE, OPT_POS
} OptionId;

/* The flags, as --help lists them (cli.h: names, value kind, range). */
static const CliOption OPTIONS[] = {
    {OPT_HELP, "-h", "--help", CLI_NONE, 0, 0, 0, NULL},
    {OPT_RESUME, "-r", "--resume", CLI_NONE, 0, 0, 0, NULL},
    {OPT_FORCE, NULL, "--force", CLI_NONE, 0, 0, 0, NULL},
    {OPT_DATA, "-d", "--data", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_OUT, "-o", "--out", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_TOKENIZER, "-z", "--tokenizer", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_EVAL_EVERY, "-e", "--eval-every", CLI_INT, 1, INT_MAX, 0, NULL},
    {OPT_STEPS, "-n", "--steps", CLI_INT, 0, TRAIN_MAX_STEPS, 0, NULL},
    {OPT_VOCAB, "-v", "--vocab", CLI_INT, BPE_BYTE_TOKENS + 1, FLAG_MAX_VOCAB, 0, NULL},
    {OPT_LAYERS, "-L", "--layers", CLI_INT, 1, FLAG_MAX_LAYERS, 0, NULL},
    {OPT_DIM, "-C", "--dim", CLI_INT, FLAG_MIN_DIM, FLAG_MAX_DIM, 0, NULL},
    {OPT_HEADS, "-H", "--heads", CLI_INT, 1, FLAG_MAX_DIM, 0, NULL},
    {OPT_CONTEXT, "-T", "--context", CLI_INT, FLAG_MIN_CONTEXT, FLAG_MAX_CONTEXT, 0, NULL},
    {OPT_BATCH, "-B", "--batch", CLI_INT, 1, TRAIN_MAX_BATCH, 0, NULL},
    {OPT_LR, "-l", "--lr", CLI_FLOAT, 0, (double)TRAIN_MAX_LR, 1, NULL},
    {OPT_WARMUP, "-w", "--warmup", CLI_INT, 1, TRAIN_MAX_STEPS, 0, NULL},
    {OPT_WEIGHT_DECAY, "-W", "--weight-decay", CLI_FLOAT, 0, (double)TRAIN_MAX_WEIGHT_DECAY,
     0, NULL},
    {OPT_DROPOUT, "-p", "--dropout", CLI_FLOAT, 0, (double)TRAIN_MAX_DROPOUT, 0, NULL},
    {OPT_ATTN_DROPOUT, NULL, "--attn-dropout", CLI_FLOAT, 0, (double)TRAIN_MAX_DROPOUT, 0,
     NULL},
    {OPT_TOKEN_NOISE, NULL, "--token-noise", CLI_FLOAT, 0, (double)TRAIN_MAX_DROPOUT, 0,
     NULL},
    {OPT_EMA, NULL, "--ema", CLI_FLOAT, 0, (double)TRAIN_MAX_EMA, 0, NULL},
    {OPT_CLIP, "-g", "--clip", CLI_FLOAT, 0, (double)TRAIN_MAX_CLIP, 0, NULL},
    {OPT_SEED, "-s", "--seed", CLI_INT, 0, INT_MAX, 0, NULL},
    {OPT_THREADS, NULL, "--threads", CLI_INT, 1, MAX_THREADS, 0, NULL},
    {OPT_MAX_MEMORY, NULL, "--max-memory", CLI_FLOAT, 0, MAX_MEMORY_GB, 1, NULL},
    {OPT_ATTN, NULL, "--attn", CLI_TEXT, 0, 0, 0, "an attention spec"},
    {OPT_REDRAW, NULL, "--redraw", CLI_INT, 1, TRAIN_MAX_STEPS, 0, NULL},
    {OPT_INIT, NULL, "--init", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_SAMPLE, NULL, "--sample", CLI_INT, 0, MAX_SAMPLE, 0, NULL},
    {OPT_POS, NULL, "--pos", CLI_TEXT, 0, 0, 0, "learned or rope"},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

typedef struct {
    const char *data_path, *out_path, *tokenizer_path;
    int resume, force, vocab, layers, dim, heads, context, eval_every;
    int steps_given;              /* -n was given (with -r: a new total) */
    int vocab_given;              /* -v was given */
    int attn_dropout_given;       /* --attn-dropout was given */
    int redraw_given;             /* --redraw was given */
    int sample;                   /* --sample: tokens printed after each checkpoint */
    int threads;                  /* --threads; 0 = OpenMP's default, capped at the cores */
    const char *pos_name;         /* --pos as given, or NULL: learned */
    ModelPositions positions;     /* --pos: learned (a table) or rotary */
    TrainSettings settings;
    const char *attn_spec;        /* --attn, or NULL: exact attention */
    const char *init_path;        /* --init, or NULL: GPT-2's initialisation */
    AttentionConfig attention[FLAG_MAX_LAYERS];   /* --attn per layer (settings.attention) */
    char state_path[TRAIN_PATH_CAP];    /* out_path + STATE_SUFFIX */
    char tokenizer_default[TRAIN_PATH_CAP];
} Options;

/* Print "train: SUBJECT: PROBLEM (got GOT, expected EXPECTED)" and the hint; EXIT_USAGE. */
static int usage_error(const char *subject, const char *problem, const char *got,
                       const char *expected) {
    return cli_usage_error("train", subject, problem, got, expected);
}

/* 1 if the flag may be given with -r (the rest comes from the state file). */
static int allowed_with_resume(OptionId id) {
    return id == OPT_HELP || id == OPT_RESUME || id == OPT_FORCE || id == OPT_DATA ||
           id == OPT_OUT || id == OPT_TOKENIZER || id == OPT_EVAL_EVERY || id == OPT_STEPS ||
           id == OPT_THREADS || id == OPT_MAX_MEMORY || id == OPT_SAMPLE;
}

/* Warmup when -w is not given: DEFAULT_WARMUP, or a tenth of a shorter run, at least 1. */
static int default_warmup(int steps) {
    int share = steps / WARMUP_SHARE;
    int warmup = share < DEFAULT_WARMUP ? share : DEFAULT_WARMUP;
    return warmup > 1 ? warmup : 1;
}

/* o with every default: the shipped model's shape and training settings (weights/README.md
 * records the run). */
static void set_defaults(Options *o) {
    TrainSettings *s = &o->settings;
    memset(o, 0, sizeof *o);
    o->data_path = "data/tinyshakespeare.txt";
    o->out_path = "weights/model.bin";
    o->vocab = 1024;
    o->layers = 10;
    o->dim = 128;
    o->heads = 4;
    o->context = 256;
    o->eval_every = 500;
    s->batch = 16;
    s->max_memory = os_memory_limit(DEFAULT_MAX_MEMORY);
    s->steps = 5300;
    s->lr = 0.002f;
    s->lr_min_ratio = 0.1f;
    s->weight_decay = 0.5f;
    s->beta1 = 0.9f;
    s->beta2 = 0.99f;
    s->eps = 1e-8f;
    s->clip = 1.0f;
    s->dropout = 0.2f;
    s->ema = 0.999f;
    s->attn_dropout = 0.1f;
    s->redraw = TRAIN_DEFAULT_REDRAW;
}

/* Records one flag (arg, its value checked by cli_next for kind and range) in o; the seed
 * into *seed (an int until parsing ends), and *warmup_given = 1 for -w. Returns 0, or -1
 * after printing the help for -h. */
static int apply_option(Options *o, const CliArg *arg, int *seed, int *warmup_given) {
    TrainSettings *s = &o->settings;
    const CliOption *spec = arg->option;
    const char *value = arg->value;
    int number = arg->number;
    float real = arg->real;
    if (spec->id == OPT_HELP) {
        fputs(USAGE, stdout);
        fputs(USAGE_TRAINING, stdout);
        fputs(USAGE_NOTES, stdout);
        return -1;
    }
    if (spec->id == OPT_RESUME) o->resume = 1;
    if (spec->id == OPT_FORCE) o->force = 1;
    switch ((OptionId)spec->id) {
    case OPT_DATA: o->data_path = value; break;
    case OPT_OUT: o->out_path = value; break;
    case OPT_TOKENIZER: o->tokenizer_path = value; break;
    case OPT_EVAL_EVERY: o->eval_every = number; break;
    case OPT_STEPS: s->steps = number; o->steps_given = 1; break;
    case OPT_VOCAB: o->vocab = number; o->vocab_given = 1; break;
    case OPT_LAYERS: o->layers = number; break;
    case OPT_DIM: o->dim = number; break;
    case OPT_HEADS: o->heads = number; break;
    case OPT_CONTEXT: o->context = number; break;
    case OPT_THREADS: o->threads = number; break;
    case OPT_MAX_MEMORY:   /* at least a byte: 0 would mean no limit */
        s->max_memory = (double)real * 1e9 < 1.0 ? 1 : (size_t)((double)real * 1e9);
        break;
    case OPT_BATCH: s->batch = number; break;
    case OPT_LR: s->lr = real; break;
    case OPT_WARMUP: s->warmup = number; *warmup_given = 1; break;
    case OPT_WEIGHT_DECAY: s->weight_decay = real; break;
    case OPT_DROPOUT: s->dropout = real; break;
    case OPT_ATTN_DROPOUT: s->attn_dropout = real; o->attn_dropout_given = 1; break;
    case OPT_TOKEN_NOISE: s->token_noise = real; break;
    case OPT_EMA: s->ema = real; break;
    case OPT_CLIP: s->clip = real; break;
    case OPT_ATTN: o->attn_spec = value; break;
    case OPT_INIT: o->init_path = value; break;
    case OPT_POS: o->pos_name = value; break;
    case OPT_SAMPLE: o->sample = number; break;
    case OPT_REDRAW: s->redraw = number; o->redraw_given = 1; break;
    case OPT_SEED: *seed = number; break;
    default: break;   /* the flags without a value were handled above */
    }
    return 0;
}

/* What the flags mean together: with -r, no flag the state file sets (first_shape, the
 * first one given, or NULL); the heads divide the width; the warmup, defaulted unless
 * given (warmup_given), at most the steps. Returns 0, or EXIT_USAGE after a one-line
 * message and the hint. */
static int check_combinations(Options *o, const CliOption *first_shape, int warmup_given) {
    TrainSettings *s = &o->settings;
    char got[TRAIN_PATH_CAP + 2], expected[TRAIN_PATH_CAP];
    if (o->resume && first_shape) {
        const char *name = first_shape->short_name ? first_shape->short_name
                                                   : first_shape->long_name;
        snprintf(got, sizeof got, "%s with -r", name);
        return usage_error(name, "not allowed with -r", got, "only " RESUME_FLAGS " with -r: "
                           "the rest comes from the state file");
    }
    if (o->dim % o->heads != 0) {
        snprintf(got, sizeof got, "%d heads for width %d", o->heads, o->dim);
        snprintf(expected, sizeof expected, "a number of heads dividing -C %d", o->dim);
        return usage_error("-H", "heads must divide the width", got, expected);
    }
    if (o->pos_name) {
        char shown[64];
        snprintf(got, sizeof got, "'%s'", cli_printable(o->pos_name, shown, sizeof shown));
        if (!strcmp(o->pos_name, "rope")) o->positions = MODEL_POSITIONS_ROTARY;
        else if (strcmp(o->pos_name, "learned") != 0)
            return usage_error("--pos", "unknown position scheme", got,
                               "learned (a table) or rope (rotary)");
    }
    if (o->positions == MODEL_POSITIONS_ROTARY && (o->dim / o->heads) % 2 != 0) {
        snprintf(got, sizeof got, "head size %d (-C %d / -H %d)", o->dim / o->heads, o->dim,
                 o->heads);
        return usage_error("--pos", "rope rotates pairs of a head's dimensions", got,
                           "an even head size");
    }
    if (o->attn_spec) {
        char problem[512];
        if (attention_spec_parse_layers(o->attn_spec, o->layers, o->attention, problem,
                                        sizeof problem) != 0)
            return cli_usage_error("train", "--attn", problem, NULL, NULL);
        for (int l = 0; l < o->layers; l++) {   /* what depends on -T */
            char why[256];
            if (attention_context_check(&o->attention[l], o->context, why, sizeof why) != 0) {
                snprintf(problem, sizeof problem, "layer %d: %s", l, why);
                return cli_usage_error("train", "--attn", problem, NULL, NULL);
            }
        }
        /* the dropout applies to the layers with softmax weights: with none, the default
         * is 0 and a rate given is a usage error */
        int weighted = 0;
        for (int l = 0; l < o->layers; l++) weighted += attention_has_weights(o->attention[l].kind);
        if (!weighted && s->attn_dropout > 0.0f) {
            if (o->attn_dropout_given) {
                snprintf(got, sizeof got, "--attn-dropout %g with --attn %s",
                         (double)s->attn_dropout, o->attn_spec);
                return usage_error("--attn-dropout", "no layer has attention weights to drop",
                                   got, "--attn-dropout 0, or a layer of a softmax kind");
            }
            s->attn_dropout = 0.0f;
        }
        s->attention = o->attention;
    }
    int performer = 0;
    for (int l = 0; o->attn_spec && l < o->layers; l++)
        performer |= o->attention[l].kind == ATTENTION_PERFORMER;
    if (o->redraw_given && !performer) {
        snprintf(got, sizeof got, "--redraw %d with --attn %s", s->redraw,
                 o->attn_spec ? o->attn_spec : "exact");
        return usage_error("--redraw", "no Performer layer to draw features for", got,
                           "--redraw only with a performer layer in --attn");
    }
    if (!warmup_given) {
        s->warmup = default_warmup(s->steps);
    } else if (s->warmup > s->steps) {   /* -n 0 takes no -w: its resume would keep it */
        snprintf(got, sizeof got, "-w %d with -n %d", s->warmup, s->steps);
        snprintf(expected, sizeof expected, "at most the %d steps", s->steps);
        return usage_error("-w", "warmup exceeds the steps", got, expected);
    }
    return 0;
}

/* The paths derived from -o and -z: the state file (PATH.state) and the default
 * tokenizer (tokenizer.bin beside the checkpoint), each with room for TRAIN_TEMP_SUFFIX,
 * and the tokenizer a file of its own. Returns 0, or EXIT_USAGE after a one-line message
 * and the hint. */
static int derive_paths(Options *o) {
    char shown[TRAIN_PATH_CAP], got[TRAIN_PATH_CAP + 2], expected[TRAIN_PATH_CAP];
    size_t room = TRAIN_PATH_CAP - sizeof TRAIN_TEMP_SUFFIX - sizeof STATE_SUFFIX;
    if (strlen(o->out_path) > room) {
        snprintf(got, sizeof got, "%zu bytes", strlen(o->out_path));
        snprintf(expected, sizeof expected, "at most %zu", room);
        return usage_error("-o", "path too long", got, expected);
    }
    snprintf(o->state_path, sizeof o->state_path, "%s%s", o->out_path, STATE_SUFFIX);
    if (!o->tokenizer_path) {
        const char *slash = strrchr(o->out_path, '/');
        int folder = slash ? (int)(slash - o->out_path + 1) : 0;
        snprintf(o->tokenizer_default, sizeof o->tokenizer_default, "%.*s%s", folder,
                 o->out_path, TOKENIZER_NAME);
        o->tokenizer_path = o->tokenizer_default;
    }
    if (strlen(o->tokenizer_path) > room) {
        snprintf(got, sizeof got, "%zu bytes", strlen(o->tokenizer_path));
        snprintf(expected, sizeof expected, "at most %zu", room);
        return usage_error("-z", "path too long", got, expected);
    }
    if (!strcmp(o->tokenizer_path, o->out_path) || !strcmp(o->tokenizer_path, o->state_path)) {
        snprintf(got, sizeof got, "'%s'", cli_printable(o->tokenizer_path, shown, sizeof shown));
        return usage_error("-z", "same file as the checkpoint or its state", got,
                           "a path of its own");
    }
    return 0;
}

/* Fill o from argv. Returns 0, -1 after printing the help (exit 0), or EXIT_USAGE after
 * a one-line message and the hint. */
static int parse_options(Options *o, int argc, char **argv) {
    int seed = DEFAULT_SEED, warmup_given = 0;
    const CliOption *first_shape = NULL;   /* the first flag -r does not allow */
    char shown[TRAIN_PATH_CAP], got[TRAIN_PATH_CAP + 2];
    set_defaults(o);
    CliArg arg = {0};   /* carries a "--" from one argument to the next */
    for (int i = 1; i < argc; i++) {
        if (cli_next("train", OPTIONS, N_OPTIONS, argc, argv, &i, &arg) != 0) return EXIT_USAGE;
        if (!arg.option && !arg.value) continue;   /* "--" */
        if (!arg.option) {
            snprintf(got, sizeof got, "'%s'", cli_printable(arg.value, shown, sizeof shown));
            return usage_error(arg.value, "unexpected argument", got, arg.options_ended ?
                               "nothing after --: train takes no arguments, only options" :
                               "options only, each starting with '-'");
        }
        if (!allowed_with_resume((OptionId)arg.option->id) && !first_shape)
            first_shape = arg.option;
        if (apply_option(o, &arg, &seed, &warmup_given) != 0) return -1;
    }
    o->settings.seed = (uint64_t)seed;
    int status = check_combinations(o, first_shape, warmup_given);
    return status != 0 ? status : derive_paths(o);
}

/* ---- data ---- */

/* 0 if nothing exists at path; else -1 after a stderr line saying how to proceed. */
static int check_new_file(const char *path, const char *what, const char *alternative) {
    if (access(path, F_OK) != 0) return 0;
    fprintf(stderr, "train: %s: %s exists already (got an existing file, expected a new path; "
            "pass --force to overwrite it, or %s)\n", path, what, alternative);
    return -1;
}

/* 0 if the run may write its files: each output and its PATH.tmp a regular file or a new
 * path in a writable folder, and none of them the text (--force must never remove a
 * folder or the data, and a FIFO would block the write); no two outputs, their PATH.tmp or
 * their PATH.lock the same file, however spelled (-z ./m.bin, -z m.bin.tmp); and the text
 * none of those either (-d m.bin.lock would read the lock this run writes), nor a missing
 * --init a lock of the run's (it would read the lock it made, not report the file missing;
 * an existing one os_lock refuses); else -1 after a stderr line. */
static int check_outputs(const Options *o) {
    const char *paths[] = {o->out_path, o->state_path, o->tokenizer_path};
    const char *what[] = {"the checkpoint", "the optimizer state", "the tokenizer"};
    /* the files read: the text, and --init's checkpoint and state (a -z naming --init's
     * tokenizer uses it as it is: that output is its input, unchanged) */
    char init_state[TRAIN_PATH_CAP];
    snprintf(init_state, sizeof init_state, "%s%s", o->init_path ? o->init_path : "",
             STATE_SUFFIX);
    const char *inputs[] = {o->data_path, o->init_path, init_state};
    int n_inputs = o->init_path ? 3 : 1;
    char names[3][3][TRAIN_PATH_CAP];   /* each output's path, PATH.tmp and PATH.lock */
    for (int i = 0; i < 3; i++) {
        snprintf(names[i][0], TRAIN_PATH_CAP, "%s", paths[i]);
        if (os_check_output("train", paths[i], what[i], inputs, n_inputs) != 0 ||
            train_temp_path(names[i][1], paths[i]) != 0 ||
            os_check_output("train", names[i][1], what[i], inputs, n_inputs) != 0)
            return -1;
        snprintf(names[i][2], TRAIN_PATH_CAP, "%s%s", paths[i], OS_LOCK_SUFFIX);
        /* the longest name the run writes for it: the lock's own temporary, PATH.lock-XXXXXX
         * (a file name past the folder's limit would fail only at the first save) */
        const char *last = names[i][2], *slash = strrchr(last, '/');
        size_t longest = strlen(slash ? slash + 1 : last) + 7;
        if (longest > NAME_MAX) {
            fprintf(stderr, "train: %s: file name too long for %s (got %zu bytes with the run's "
                    "suffixes, expected at most %d)\n", paths[i], what[i], longest, NAME_MAX);
            return -1;
        }
        int missing = o->init_path && access(o->init_path, F_OK) != 0 ? errno : 0;
        if (missing && os_same_path(o->init_path, names[i][2])) {
            fprintf(stderr, "train: %s: cannot open (got \"%s\", expected a checkpoint to start "
                    "from; the name is the lock this run takes on %s)\n", o->init_path,
                    strerror(missing), paths[i]);
            return -1;
        }
    }
    for (int i = 0; i < 3; i++)
        for (int a = 0; a < 3; a++) {
            if (os_same_path(o->data_path, names[i][a])) {
                fprintf(stderr, "train: %s: the text is a file of this run's (got %s, expected "
                        "a text that is not %s's file, temporary or lock)\n", o->data_path,
                        names[i][a], what[i]);
                return -1;
            }
            for (int j = i + 1; j < 3; j++)
                for (int b = 0; b < 3; b++)
                    if (os_same_path(names[i][a], names[j][b])) {
                        fprintf(stderr, "train: %s: %s and %s would share a file (got %s for "
                                "both, expected a path of its own for each)\n", paths[j],
                                what[i], what[j], names[i][a]);
                        return -1;
                    }
        }
    return 0;
}

/* Bytes of text[0 .. n) that are control characters other than whitespace (C0 but for
 * \t \n \v \f \r, and DEL): plain text has none, binary data many. */
static size_t count_control_bytes(const char *text, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        count += (c < ' ' && !(c >= '\t' && c <= '\r')) || c == ASCII_DEL;
    }
    return count;
}

/* 0 if the splits hold enough tokens for a context of T, else -1 after a stderr line. */
static int check_token_counts(const char *data_path, size_t n_train, size_t n_val, int T) {
    size_t need = (size_t)T + TRAIN_EXTRA_TOKENS;
    if (n_train >= need && n_val >= MIN_VAL_TOKENS) return 0;
    fprintf(stderr, "train: %s: too little text for a context of %d tokens (got %zu training "
            "and %zu validation tokens, expected at least %zu and %d)\n", data_path, T,
            n_train, n_val, need, MIN_VAL_TOKENS);
    return -1;
}

/* 1 if c is printable ASCII other than the space. */
static int printable(char c) { return c > ' ' && c < ASCII_DEL; }

/* The ids of text[0 .. len) into a malloc'd array (no end-of-text), *n of them; what
 * names the split in progress lines. NULL after a stderr line. */
static int *encode_all(const Tokenizer *t, const char *text, size_t len, size_t *n,
                       const char *what) {
    int *ids = malloc((len + 1) * sizeof(int));   /* a token covers at least one byte */
    if (!ids) {
        fprintf(stderr, "train: out of memory encoding %zu bytes\n", len);
        return NULL;
    }
    /* in chunks of about ENCODE_CHUNK bytes, each ending with a lone newline between two
     * printable ASCII bytes ("a\nb"): a boundary of GPT-2's pre-tokenization (a longer
     * whitespace run would end its piece differently at the end of a chunk), so the ids
     * are those of the whole text; a progress line every BPE_LOG_SECONDS */
    double start = os_seconds(), shown = start;
    size_t done = 0;
    *n = 0;
    while (done < len) {
        size_t end = len - done > ENCODE_CHUNK ? done + ENCODE_CHUNK : len;
        while (end < len && !(text[end - 1] == '\n' && printable(text[end - 2]) &&
                              printable(text[end])))
            end++;
        size_t got = 0;
        if (tokenizer_encode(t, text + done, end - done, ids + *n, len + 1 - *n, &got) != 0) {
            free(ids);
            return NULL;
        }
        *n += got;
        done = end;
        double now = os_seconds();
        if (now - shown >= BPE_LOG_SECONDS && done < len) {
            printf("tokens: encoding the %s split: %.1f of %.1f MB, %zu tokens, %.0f s\n", what,
                   (double)done * 1e-6, (double)len * 1e-6, *n, now - start);
            fflush(stdout);
            shown = now;
        }
    }
    return ids;
}

/* Mean loss (nats per token) over every next-token prediction in tokens[0 .. n): windows
 * of T tokens from offsets 0, T, 2T, ..., each starting with an empty context, B at
 * a time; the first token is never a target. Dropout is off. Sets *sum_nats. Runs the
 * weights as they are: evaluate_saved runs what a checkpoint holds. */
static double evaluate(Trainer *tr, const int *tokens, size_t n, int *inputs, int *targets,
                       double *sum_nats) {
    int B = tr->B, T = tr->T;
    size_t windows = (n - 1 + (size_t)T - 1) / (size_t)T, count = 0;
    double sum = 0.0;
    tr->dropout_on = 0;
    for (size_t w0 = 0; w0 < windows; w0 += (size_t)B) {
        for (int b = 0; b < B; b++) {
            size_t start = (w0 + (size_t)b) * (size_t)T;
            for (int t = 0; t < T; t++) {
                size_t at = start + (size_t)t;
                int has_target = at + 1 < n;
                inputs[b * T + t] = at < n ? tokens[at] : 0;
                targets[b * T + t] = has_target ? tokens[at + 1] : -1;
                count += (size_t)has_target;
            }
        }
        trainer_forward(tr, inputs, targets);
        for (int i = 0; i < B * T; i++) sum += (double)tr->a.losses[i];
    }
    tr->dropout_on = 1;
    *sum_nats = sum;
    return count ? sum / (double)count : 0.0;
}

/* evaluate() on the weights a checkpoint holds: the moving average, if kept. */
static double evaluate_saved(Trainer *tr, const int *tokens, size_t n, int *inputs,
                             int *targets, double *sum_nats) {
    trainer_swap_ema(tr);
    double loss = evaluate(tr, tokens, n, inputs, targets, sum_nats);
    trainer_swap_ema(tr);
    return loss;
}

/* "1h02m03s" style duration into buf. */
static const char *format_duration(char *buf, size_t cap, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    return buf;
}

/* Matmul floating-point operations per trained token (forward + backward = 3 x forward):
 * 6 per weight of the blocks and the classifier, plus causal attention's
 * 2 (scores) + 2 (weighted sum) multiply-adds over T/2 keys on average, times 3. */
static double flops_per_token(const Config *c) {
    double C = c->dim, L = c->n_layers, V = c->vocab_size, T = c->seq_len;
    return 6.0 * (12.0 * L * C * C + V * C) + 6.0 * L * T * C;
}

/* ---- the run ---- */

/* What a run reads: the text, its split, the tokenizer and the two token streams. */
typedef struct {
    char *text;                   /* the whole file, owned */
    size_t size, split;           /* bytes: train [0, split), validation [split, size) */
    Tokenizer tok;
    int *train_tokens, *val_tokens;   /* owned */
    size_t n_train, n_val;
    int n_merges;                 /* a new run: merges learned, and in how long */
    double bpe_seconds;
    int tokenizer_pending;        /* 1 while the new tokenizer waits at tokenizer_temp */
    int tokenizer_kept;           /* 1: a new run found its very tokenizer in place */
    int tokenizer_of_init;        /* 1: that tokenizer is --init's, used as it is */
    char tokenizer_temp[TRAIN_PATH_CAP];
    uint64_t tokenizer_sum;       /* FNV-1a 64 of the tokenizer file (train_file_sum) */
} RunData;

/* The new tokenizer's temporary is no longer pending: committed or removed. */
static void tokenizer_settled(RunData *d) {
    if (d->tokenizer_pending) os_remove_on_signal(d->tokenizer_temp, 0);
    d->tokenizer_pending = 0;
}

static void run_data_free(RunData *d) {
    if (d->tokenizer_pending) remove(d->tokenizer_temp);
    tokenizer_settled(d);
    free(d->text);
    free(d->train_tokens);
    free(d->val_tokens);
    tokenizer_free(&d->tok);
    memset(d, 0, sizeof *d);
}

/* A new run without --force whose tokenizer path exists: 0 if that file is the tokenizer
 * just learned (now at d->tokenizer_temp), byte for byte, which then stays and the
 * temporary goes (nothing is lost, and models of one text share their tokenizer); else
 * -1 after a stderr line. */
static int keep_tokenizer(RunData *d, const Options *o) {
    size_t n_old = 0, n_new = 0;
    char *old = os_read_file("train", o->tokenizer_path, "a tokenizer file",
                             MAX_TOKENIZER_BYTES, &n_old);
    char *new = old ? os_read_file("train", d->tokenizer_temp, "the tokenizer just learned",
                                   MAX_TOKENIZER_BYTES, &n_new) : NULL;
    int same = new && n_old == n_new && memcmp(old, new, n_old) == 0;
    if (old && new && !same)
        fprintf(stderr, "train: %s: the tokenizer exists already and this text trains another "
                "one (got a file of other merges, expected the same file or a new path; pass "
                "--force to overwrite it, or -z for another path)\n", o->tokenizer_path);
    free(old);
    free(new);
    remove(d->tokenizer_temp);
    tokenizer_settled(d);
    d->tokenizer_kept = same;
    return same ? 0 : -1;
}

/* --init PATH: the checksum of the tokenizer PATH was trained with into *sum, and where
 * it was found into where: the one PATH's state file records, or else that of
 * tokenizer.bin beside PATH. Returns 0, or -1 after a stderr line if neither says. */
static int init_tokenizer_sum(const char *init_path, uint64_t *sum,
                              char where[TRAIN_PATH_CAP]) {
    /* a missing or foreign file is named as such, not as one without a tokenizer */
    if (trainer_check_start(init_path) != 0) return -1;
    snprintf(where, TRAIN_PATH_CAP, "%s%s", init_path, STATE_SUFFIX);
    if (trainer_state_tokenizer_sum(where, sum)) return 0;
    const char *slash = strrchr(init_path, '/');
    int folder = slash ? (int)(slash - init_path + 1) : 0;
    snprintf(where, TRAIN_PATH_CAP, "%.*s%s", folder, init_path, TOKENIZER_NAME);
    if (train_file_sum(where, sum) == 0) return 0;
    fprintf(stderr, "train: --init %s: cannot tell which tokenizer it was trained with (got "
            "neither a state file %s%s that records it nor %s, expected one of them beside "
            "it)\n", init_path, init_path, STATE_SUFFIX, where);
    return -1;
}

/* A new run with --init: 1 if the run's tokenizer path already holds the tokenizer of
 * --init's checkpoint (want), which the run then uses as it is, whatever the text
 * (fine-tuning on another text); else 0 and the run learns its merges as usual. */
static int use_init_tokenizer(RunData *d, const Options *o, uint64_t want) {
    uint64_t have;
    if (train_file_sum(o->tokenizer_path, &have) != 0 || have != want) return 0;
    d->tokenizer_kept = d->tokenizer_of_init = 1;
    return 1;
}

/* A new run with --init: 0 if the tokenizer just learned (at d->tokenizer_temp) is the
 * one --init's checkpoint was trained with (want, found at where): its embedding rows
 * mean the same tokens; else -1 after a stderr line. */
static int check_init_tokenizer(const RunData *d, const Options *o, uint64_t want,
                                const char *where) {
    uint64_t have, named;
    if (train_file_sum(d->tokenizer_temp, &have) == 0 && have == want) return 0;
    if (train_file_sum(o->tokenizer_path, &named) == 0) {   /* a file there, not --init's */
        fprintf(stderr, "train: --init %s: the tokenizer %s is not the one it was trained with "
                "(got checksum %016llx, expected %016llx from %s; nor does this text with "
                "-v %d train that one)\n", o->init_path, o->tokenizer_path,
                (unsigned long long)named, (unsigned long long)want, where, o->vocab);
        return -1;
    }
    fprintf(stderr, "train: --init %s: this text with -v %d trains another tokenizer than the "
            "one it was trained with (got checksum %016llx, expected %016llx from %s: its "
            "embeddings belong to those token ids; to train it on this text, give that "
            "tokenizer as -z)\n", o->init_path, o->vocab, (unsigned long long)have,
            (unsigned long long)want, where);
    return -1;
}

/* Read and split the data; for a new run learn the tokenizer on the training bytes
 * (into its PATH.tmp: it takes its place with the run's first checkpoint), else load the
 * run's; encode both splits. Returns 0, or -1 after a stderr line. */
static int run_data_load(RunData *d, const Options *o) {
    memset(d, 0, sizeof *d);
    d->text = os_read_file("train", o->data_path, "a readable text file", MAX_DATA_BYTES,
                           &d->size);
    if (!d->text) return -1;
    if (d->size == 0) {
        fprintf(stderr, "train: %s: empty file (got 0 bytes, expected text to train on)\n",
                o->data_path);
        return -1;
    }
    size_t size = d->size;
    d->split = size / TRAIN_SPLIT_DEN * TRAIN_SPLIT_NUM +   /* floor(0.9 size) */
               size % TRAIN_SPLIT_DEN * TRAIN_SPLIT_NUM / TRAIN_SPLIT_DEN;
    printf("data: %s: %zu bytes; train bytes [0, %zu), validation bytes [%zu, %zu)\n",
           o->data_path, size, d->split, d->split, size);
    size_t control = count_control_bytes(d->text, size);
    if (control > 0)
        printf("data: %s: not plain text (%zu of %zu bytes are control characters); the "
               "tokenizer learns its merges over the raw bytes all the same\n", o->data_path,
               control, size);
    uint64_t init_sum = 0;
    char init_where[TRAIN_PATH_CAP];
    if (!o->resume && o->init_path &&
        init_tokenizer_sum(o->init_path, &init_sum, init_where) != 0)
        return -1;
    if (!o->resume && !(o->init_path && use_init_tokenizer(d, o, init_sum))) {
        /* the tokenizer: learned on the training split only */
        double start = os_seconds();
        Bpe bpe;
        if (train_temp_path(d->tokenizer_temp, o->tokenizer_path) != 0 ||
            bpe_train_logged(&bpe, d->text, d->split, o->vocab, stdout, BPE_LOG_SECONDS) != 0)
            return -1;
        int saved = bpe_save(&bpe, d->tokenizer_temp);
        d->n_merges = bpe.n_merges;
        d->bpe_seconds = os_seconds() - start;
        bpe_free(&bpe);
        if (saved != 0) return -1;
        d->tokenizer_pending = 1;   /* a signal before the first checkpoint removes it */
        os_remove_on_signal(d->tokenizer_temp, 1);
        if (o->init_path && check_init_tokenizer(d, o, init_sum, init_where) != 0) return -1;
        if (!o->force && access(o->tokenizer_path, F_OK) == 0 && keep_tokenizer(d, o) != 0)
            return -1;
    }
    const char *tokenizer = d->tokenizer_pending ? d->tokenizer_temp : o->tokenizer_path;
    if (tokenizer_load(&d->tok, tokenizer) != 0) return -1;
    if (d->tok.kind != TOKENIZER_GPT2) {   /* what bpe.c writes and the model's ids mean */
        fprintf(stderr, "train: %s: tokenizer of the other family (got llama2.c's tokenizer "
                "file, expected llm.c's GPT-2 tokenizer file, as train writes)\n", tokenizer);
        return -1;
    }
    if (train_file_sum(tokenizer, &d->tokenizer_sum) != 0) {
        fprintf(stderr, "train: %s: cannot read the tokenizer again (got \"%s\", expected the "
                "file just loaded)\n", tokenizer, strerror(errno));
        return -1;
    }
    d->train_tokens = encode_all(&d->tok, d->text, d->split, &d->n_train, "training");
    d->val_tokens = encode_all(&d->tok, d->text + d->split, size - d->split, &d->n_val,
                               "validation");
    return d->train_tokens && d->val_tokens ? 0 : -1;
}

/* 0 if the trainer and --sample's model (its checkpoint's weights read as ./run reads
 * them, and a KV cache of n + 1 positions, n at most the context less one) fit
 * --max-memory; else -1 after a stderr line. */
static int check_sample_memory(const Trainer *tr, const Options *o) {
    if (o->sample <= 0 || !o->settings.max_memory) return 0;
    const Config *c = &tr->config;
    size_t trainer = trainer_memory_bytes(c, &tr->settings, tr->B);
    int n = o->sample < c->seq_len - 1 ? o->sample : c->seq_len - 1;   /* print_sample's */
    size_t sample = tr->n_params * sizeof(float) + 2 * (size_t)c->n_layers *
                    (size_t)(n + 1) * (size_t)c->dim * sizeof(float);
    if (trainer + sample <= o->settings.max_memory) return 0;
    char all[32], trained[32], sampled[32], limit[32];
    fprintf(stderr, "train: the run needs %s of memory (the trainer %s, --sample %d's model "
            "%s), more than the limit of %s (expected less: lower --sample, or raise "
            "--max-memory)\n", trainer_format_bytes(all, sizeof all, trainer + sample),
            trainer_format_bytes(trained, sizeof trained, trainer), o->sample,
            trainer_format_bytes(sampled, sizeof sampled, sample),
            trainer_format_bytes(limit, sizeof limit, o->settings.max_memory));
    return -1;
}

/* The trainer of the run: resumed from the checkpoint and its state (with -n a new
 * total; the tokenizer must be the run's), or new, once the data is known to suffice.
 * Returns 0 or an exit code, after a stderr line. */
static int run_trainer(Trainer *tr, const Options *o, RunData *d) {
    if (o->resume) {
        if (trainer_load(tr, o->out_path, o->state_path, o->settings.max_memory) != 0)
            return EXIT_BAD_DATA;
        if (tr->config.vocab_size != d->tok.vocab_size) {
            fprintf(stderr, "train: %s: vocab size differs from %s (got %d, expected %d)\n",
                    o->out_path, o->tokenizer_path, tr->config.vocab_size, d->tok.vocab_size);
            return EXIT_BAD_DATA;
        }
        if (tr->tokenizer_sum && tr->tokenizer_sum != d->tokenizer_sum) {
            fprintf(stderr, "train: %s: not the tokenizer this run trained with (got checksum "
                    "%016llx, expected the %016llx recorded in %s)\n", o->tokenizer_path,
                    (unsigned long long)d->tokenizer_sum,
                    (unsigned long long)tr->tokenizer_sum, o->state_path);
            return EXIT_BAD_DATA;
        }
        if (o->steps_given) {
            /* a total a state holds: at least the step reached and the warmup, or 0 (a
             * -n 0 run's, whose warmup is 1, resumed as it is) */
            int steps = o->settings.steps;
            if (steps < tr->step || (steps > 0 && steps < tr->settings.warmup)) {
                char got[64], expected[128];
                snprintf(got, sizeof got, "%d", steps);
                snprintf(expected, sizeof expected, "at least the step reached, %d, and the "
                         "warmup, %d", tr->step, tr->settings.warmup);
                return usage_error("-n", "new total out of range", got, expected);
            }
            tr->settings.steps = steps;
        }
    }
    if (check_token_counts(o->data_path, d->n_train, d->n_val, o->resume ? tr->T : o->context))
        return EXIT_BAD_DATA;
    printf("tokens: train %zu (%.3f bytes/token), validation %zu (%.3f bytes/token)\n",
           d->n_train, (double)d->split / (double)d->n_train, d->n_val,
           (double)(d->size - d->split) / (double)d->n_val);
    if (o->resume) {
        tr->tokenizer_sum = d->tokenizer_sum;   /* recorded from now on (states before 4) */
        if (check_sample_memory(tr, o) != 0) return EXIT_BAD_DATA;
        printf("resuming at step %d of %d\n", tr->step, tr->settings.steps);
        return 0;
    }
    if (d->tokenizer_of_init)   /* a -v that differs learns nothing: said, not refused */
        printf("tokenizer: %s, vocab %d: the one %s was trained with, used as it is%s\n",
               o->tokenizer_path, d->tok.vocab_size, o->init_path,
               o->vocab_given && o->vocab != d->tok.vocab_size ? " (-v does not apply)" : "");
    else
        printf("tokenizer: %d merges learned in %.1f s, vocab %d, %s %s%s\n", d->n_merges,
               d->bpe_seconds, d->tok.vocab_size, d->tokenizer_kept ? "the very file at" :
               "written to", o->tokenizer_path, d->tokenizer_kept ? " already: kept" :
               " with the first checkpoint");
    Config c = {0};
    c.seq_len = o->context;
    c.vocab_size = d->tok.vocab_size;
    c.n_layers = o->layers;
    c.n_heads = o->heads;
    c.dim = o->dim;
    c.positions = o->positions;
    if (trainer_init(tr, &c, &o->settings, o->settings.batch) != 0 ||
        check_sample_memory(tr, o) != 0)
        return EXIT_BAD_DATA;
    if (o->init_path && trainer_start_from(tr, o->init_path) != 0) return EXIT_BAD_DATA;
    tr->tokenizer_sum = d->tokenizer_sum;
    return 0;
}

/* A checkpoint and its state; a new run's first one also puts its tokenizer in place
 * (trainer_save removes or commits the temporary either way). Returns 0 or -1. */
static int save(const Trainer *tr, const Options *o, RunData *d) {
    const char *tokenizer = d->tokenizer_pending ? o->tokenizer_path : NULL;
    /* a signal removes the tokenizer's temporary until trainer_save commits */
    int status = trainer_save(tr, o->out_path, o->state_path, tokenizer);
    tokenizer_settled(d);
    return status;
}

/* After a checkpoint: the n tokens its weights continue greedily from a newline (fewer if
 * one ends the text), loaded from the file by model.c as ./run loads it, printed as
 * ./run -t 0 would print them.
 * Returns 0, or -1 after a stderr line (the file did not load). */
static int print_sample(const char *path, const Tokenizer *tok, int n) {
    Model m;
    if (model_load(&m, path, 1, 1) != 0) return -1;   /* attention for n + 1, below */
    size_t n_ids = 0;
    int token = 0;
    if (tokenizer_encode(tok, "\n", 1, &token, 1, &n_ids) != 0 || n_ids != 1) token = '\n';
    if (n > m.max_ctx - 1) n = m.max_ctx - 1;
    if (model_set_context(&m, n + 1) != 0) {
        model_free(&m);
        return -1;
    }
    printf("sample (%d tokens from a newline, greedy):\n", n);
    for (int pos = 0; pos < n; pos++) {
        const float *logits = model_forward(&m, &token, 1, pos, 0);
        if (!logits) break;
        int best = 0;
        for (int v = 1; v < m.config.vocab_size; v++) if (logits[v] > logits[best]) best = v;
        if (tokenizer_ends(tok, best)) break;   /* where run stops */
        size_t len;
        const unsigned char *bytes = tokenizer_printed(tok, token, best, &len);
        fwrite(bytes, 1, len, stdout);
        token = best;
    }
    printf("\n\n");
    model_free(&m);
    return 0;
}

/* The training loop, from tr->step to the last step: a batch, forward, backward, update;
 * every eval_every steps (and at the end) a validation pass and a checkpoint; a progress
 * line every LOG_EVERY steps. inputs, targets (B, T) are the batch's buffers. *seconds
 * receives the time spent in steps. Returns 0, or -1 after a stderr line. */
static int run_loop(Trainer *tr, const Options *o, RunData *d, int *inputs,
                    int *targets, double *seconds) {
    const TrainSettings *s = &tr->settings;
    double flops = flops_per_token(&tr->config), start = os_seconds(), loss_sum = 0.0;
    double val_loss = -1.0, val_nats = 0.0, val_bytes = (double)(d->size - d->split);
    double raw_nats = 0.0;   /* validation of the weights themselves, beside their average */
    int first_step = tr->step, loss_count = 0;
    char elapsed[32], left[32];
    *seconds = 0.0;
    while (tr->step < s->steps) {
        double step_start = os_seconds();
        trainer_batch(tr, d->train_tokens, d->n_train, inputs, targets);
        float loss = trainer_forward(tr, inputs, targets);
        trainer_backward(tr);
        float norm = trainer_update(tr);
        *seconds += os_seconds() - step_start;
        loss_sum += (double)loss;
        loss_count++;
        if (!(loss == loss) || !(norm == norm)) {   /* NaN: training diverged */
            fprintf(stderr, "train: loss became NaN at step %d (lower the learning rate)\n",
                    tr->step);
            return -1;
        }
        int evaluate_now = tr->step % o->eval_every == 0 || tr->step == s->steps;
        if (evaluate_now) {
            val_loss = evaluate_saved(tr, d->val_tokens, d->n_val, inputs, targets, &val_nats);
            if (tr->ema) evaluate(tr, d->val_tokens, d->n_val, inputs, targets, &raw_nats);
            if (save(tr, o, d) != 0) return -1;
        }
        if (evaluate_now || tr->step % LOG_EVERY == 0) {
            double steps_done = (double)(tr->step - first_step);
            double tokens_per_s = steps_done * tr->B * tr->T / *seconds;
            double wall = os_seconds() - start;
            printf("step %6d/%d | loss %.4f | val %s", tr->step, s->steps,
                   loss_sum / loss_count, val_loss < 0 ? "-" : "");
            if (val_loss >= 0) printf("%.4f (%.4f bpc)", val_loss, val_nats / (LN2 * val_bytes));
            if (val_loss >= 0 && tr->ema)
                printf(" | unaveraged %.4f bpc", raw_nats / (LN2 * val_bytes));
            printf(" | lr %.2e | norm %.2f | %.0f tok/s | %.1f GFLOP/s | elapsed %s | left %s\n",
                   (double)trainer_learning_rate(s, tr->step - 1), (double)norm, tokens_per_s,
                   tokens_per_s * flops * 1e-9, format_duration(elapsed, sizeof elapsed, wall),
                   format_duration(left, sizeof left,
                                   wall / steps_done * (double)(s->steps - tr->step)));
            if (fflush(stdout) != 0 || ferror(stdout)) {   /* nobody reads on: stop */
                int error = errno;   /* before access(), which sets it too */
                fprintf(stderr, "train: standard output: write error (%s); stopped at step %d "
                        "(%s)\n", strerror(error), tr->step, access(o->out_path, F_OK) == 0
                        ? "-r resumes from the last checkpoint"
                        : "no checkpoint yet: the same command starts it again");
                return -1;
            }
            loss_sum = 0.0;
            loss_count = 0;
        }
        if (evaluate_now && o->sample > 0 && print_sample(o->out_path, &d->tok, o->sample) != 0)
            return -1;
    }
    if (tr->step == first_step) {   /* no step ran (-n 0, or -r at the last step) */
        if (save(tr, o, d) != 0) return -1;
        if (o->sample > 0 && print_sample(o->out_path, &d->tok, o->sample) != 0) return -1;
    }
    return 0;
}

/* 1 if path is empty or starts with magic (a little-endian uint32): what this trainer
 * writes there, cut short or whole, not a file of the user's. */
static int own_temporary(const char *path, uint32_t magic) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char b[4];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    uint32_t got = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                   (uint32_t)b[3] << 24;
    return n == 0 || (n == sizeof b && got == magic);
}

/* Before a run reads anything: a resumed run first finishes a save a crash interrupted
 * (the first one included) and needs its checkpoint; a new run never replaces a trained
 * model or its state unless --force asks it to (nor a tokenizer: keep_tokenizer); and
 * neither replaces a file of another kind at a PATH.tmp it writes. Returns 0, or -1 after
 * a stderr line. */
static int prepare_outputs(const Options *o) {
    /* each save writes its files first at their PATH.tmp and replaces a save a crash
     * interrupted there (the same command again, or -r, recovers), never a file of another
     * kind (a user's) unless --force asks; a resumed run writes no tokenizer */
    const char *paths[] = {o->out_path, o->state_path, o->tokenizer_path};
    const uint32_t magics[] = {CHECKPOINT_GPT2_MAGIC, TRAIN_STATE_MAGIC, TOKENIZER_MAGIC};
    for (int i = 0; !o->force && i < (o->resume ? 2 : 3); i++) {
        char temp[TRAIN_PATH_CAP];
        if (train_temp_path(temp, paths[i]) != 0) return -1;
        if (access(temp, F_OK) == 0 && !own_temporary(temp, magics[i])) {
            fprintf(stderr, "train: %s: not a save of this trainer's (got a file that does "
                    "not start as %s does, expected a new path or this trainer's "
                    "temporary; pass --force to overwrite it, or remove it)\n", temp,
                    i == 0 ? "a checkpoint" : i == 1 ? "an optimizer state" : "a tokenizer");
            return -1;
        }
    }
    if (!o->resume) {
        if (o->force) return 0;
        if (check_new_file(o->out_path, "the checkpoint", "-r to resume its run") != 0) return -1;
        /* an existing tokenizer waits for the one this text trains (keep_tokenizer); a
         * state with its checkpoint still at PATH.tmp is a first save a crash interrupted
         * after its commit, which -r finishes */
        char temp[TRAIN_PATH_CAP];
        int interrupted = train_temp_path(temp, o->out_path) == 0 && access(temp, F_OK) == 0;
        return check_new_file(o->state_path, "the optimizer state", interrupted
                              ? "-r to finish its interrupted save and resume its run"
                              : "-o for another checkpoint");
    }
    int finished = trainer_finish_save(o->out_path, o->state_path, o->tokenizer_path);
    if (finished < 0) return -1;
    if (finished & TRAIN_FINISHED_CHECKPOINT)
        printf("resume: %s%s belongs to %s: finished the interrupted save of %s\n",
               o->out_path, TRAIN_TEMP_SUFFIX, o->state_path, o->out_path);
    if (finished & TRAIN_FINISHED_TOKENIZER)
        printf("resume: %s%s belongs to %s: finished the interrupted save of %s\n",
               o->tokenizer_path, TRAIN_TEMP_SUFFIX, o->state_path, o->tokenizer_path);
    if (access(o->out_path, F_OK) != 0) {   /* before the tokenizer beside it */
        fprintf(stderr, "train: %s: nothing to resume (got \"%s\", expected the checkpoint "
                "of a run; -o names it; a run stopped before its first checkpoint left "
                "nothing: start it again)\n", o->out_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The run's first two progress lines: the model and its cost, then the schedule. */
static void print_run_header(const Trainer *tr) {
    const TrainSettings *s = &tr->settings;
    const Config *c = &tr->config;
    int threads = kernels_threads();
    printf("model: L %d, C %d, NH %d, T %d, V %d%s: %zu parameters; batch %d x %d; "
           "%.2f MFLOP per token; %d thread%s, %s kernels\n", c->n_layers, c->dim, c->n_heads,
           tr->T, c->vocab_size, c->positions == MODEL_POSITIONS_ROTARY ? ", rotary positions"
           : "", tr->n_params, tr->B, tr->T, flops_per_token(c) * 1e-6, threads,
           threads == 1 ? "" : "s", kernels_isa());
    printf("schedule: %d steps, warmup %d, lr %g -> %g, weight decay %g, dropout %g, attention "
           "dropout %g, token noise %g, clip %g, moving average %g, seed %llu\n", s->steps,
           s->warmup, (double)s->lr, (double)(s->lr * s->lr_min_ratio),
           (double)s->weight_decay, (double)s->dropout, (double)s->attn_dropout,
           (double)s->token_noise, (double)s->clip, (double)s->ema, (unsigned long long)s->seed);
    if (tr->variant) {
        char spec[ATTENTION_SPEC_MAX * 4];
        attention_spec_format_layers(tr->attn, c->n_layers, spec, sizeof spec);
        int performer = 0;
        for (int l = 0; l < c->n_layers; l++) performer |= tr->attn[l].kind == ATTENTION_PERFORMER;
        if (performer) printf("attention: %s (features drawn every %d steps)\n", spec, s->redraw);
        else printf("attention: %s\n", spec);
    }
    fflush(stdout);
}

/* The final figures over the whole of both splits (the saved weights, dropout off), and
 * the files written. inputs and targets (B * T,) are scratch. */
static void print_final(Trainer *tr, const Options *o, const RunData *d, int *inputs,
                        int *targets, double train_seconds) {
    double train_nats = 0.0, val_nats = 0.0;
    double train_loss = evaluate_saved(tr, d->train_tokens, d->n_train, inputs, targets,
                                       &train_nats);
    double val_loss = evaluate_saved(tr, d->val_tokens, d->n_val, inputs, targets, &val_nats);
    char elapsed[32];
    printf("final: train %.4f nats/token (%.4f bits/char over %zu bytes), validation %.4f "
           "nats/token (%.4f bits/char over %zu bytes); training time %s\n",
           train_loss, train_nats / (LN2 * (double)d->split), d->split, val_loss,
           val_nats / (LN2 * (double)(d->size - d->split)), d->size - d->split,
           format_duration(elapsed, sizeof elapsed, train_seconds));
    if (o->resume || d->tokenizer_kept)   /* the tokenizer was in place before the run */
        printf("wrote %s and %s (tokenizer: %s)\n", o->out_path, o->state_path,
               o->tokenizer_path);
    else
        printf("wrote %s, %s and %s\n", o->out_path, o->state_path, o->tokenizer_path);
}

int main(int argc, char **argv) {
    os_program_start("train");   /* a closed pipe: a write error, as a full disk */
    Options o;
    int rc = parse_options(&o, argc, argv);
    if (rc < 0) return cli_stdout_ok("train") == 0 ? 0 : EXIT_BAD_DATA;   /* --help */
    if (rc != 0) return rc;
    int asked = kernels_cap_threads();
    if (asked && !o.threads) cli_note_threads("train", asked, kernels_threads());
    if (o.threads) kernels_set_threads(o.threads);
    if (check_outputs(&o) != 0) return EXIT_BAD_DATA;
    /* one trainer per checkpoint, per state (another's -o may name this run's PATH.state)
     * and per tokenizer, held until exit */
    SaveLock model_lock, state_lock = {.fd = -1}, tokenizer_lock = {.fd = -1};
    if (os_lock(&model_lock, "train", o.out_path) != 0) return EXIT_BAD_DATA;
    if (os_lock(&state_lock, "train", o.state_path) != 0 ||
        os_lock(&tokenizer_lock, "train", o.tokenizer_path) != 0) {
        os_unlock(&state_lock);
        os_unlock(&model_lock);
        return EXIT_BAD_DATA;
    }
    int status = EXIT_BAD_DATA, *inputs = NULL, *targets = NULL;
    RunData d = {0};
    Trainer tr = {0};
    if (prepare_outputs(&o) != 0 || run_data_load(&d, &o) != 0) goto done;
    if ((status = run_trainer(&tr, &o, &d)) != 0) goto done;
    status = EXIT_BAD_DATA;
    inputs = malloc((size_t)tr.B * tr.T * sizeof(int));
    targets = malloc((size_t)tr.B * tr.T * sizeof(int));
    if (!inputs || !targets) {
        fprintf(stderr, "train: out of memory for the batch\n");
        goto done;
    }
    print_run_header(&tr);
    double train_seconds = 0.0;
    if (run_loop(&tr, &o, &d, inputs, targets, &train_seconds) != 0) goto done;
    print_final(&tr, &o, &d, inputs, targets, train_seconds);
    status = cli_stdout_ok("train") == 0 ? 0 : EXIT_BAD_DATA;
done:
    run_data_free(&d);
    free(inputs);
    free(targets);
    trainer_free(&tr);
    os_unlock(&tokenizer_lock);
    os_unlock(&state_lock);
    os_unlock(&model_lock);
    return status;
}
