/* run.c: the command-line program. Parses flags, loads a model and a tokenizer,
 * encodes the prompt and sizes the context, then hands over to generate.c (which
 * streams the text) and reports the speed on stderr. The attention lab's flags are
 * wired in from lab/run_lab.c: --attn swaps in another attention, --attn-map then draws
 * the attention over the final context, --attn-top prints it as text instead of the
 * text itself, and --eval instead reports the model's loss on a file.
 *
 * It owns exit codes (0 ok, 1 bad data or runtime failure, 2 usage error); it
 * contains no kernels. Read model.h, generate.h, then tokenizer.h and sampler.h.
 * A token's path: main -> kernels_run(run_job) (the threads as a pool) -> run_generation
 * -> generate (generate.c) -> model_forward (model.c) -> sampler_sample (sampler.c).
 */
#include <errno.h>      /* errno, ENOENT */
#include <float.h>      /* FLT_MAX: is -p's value a number at all? */
#include <limits.h>     /* INT_MAX */
#include <stdint.h>     /* uint64_t */
#include <stdio.h>      /* fprintf, fputs, snprintf */
#include <stdlib.h>     /* malloc, free */
#include <string.h>     /* strcmp, strlen, strpbrk, strrchr */
#include <time.h>       /* clock_gettime, CLOCK_REALTIME: the default seed */
#include <unistd.h>     /* isatty: "> " only to a terminal; getpid; access: is the
                         * default tokenizer there? */

#include "attention_spec.h"  /* attention_spec_parse, _help, _format_layers */
#include "cli.h"        /* cli_parse_int, cli_parse_float, cli_parse_u64, cli_printable */
#include "generate.h"   /* Generation, generate */
#include "hash.h"       /* hash_mix64: the default seed */
#include "kernels.h"    /* kernels_set_threads, kernels_run */
#include "model.h"      /* Model, model_load, model_set_context, model_trace */
#include "os.h"         /* os_read_file; the map written whole (SaveFile), output checks */
#include "run_lab.h"    /* run_lab_set_attention, run_lab_evaluate, run_lab_write_map, ... */
#include "sampler.h"    /* Sampler, sampler_init */
#include "tokenizer.h"  /* Tokenizer, tokenizer_load, tokenizer_encode */
#include "gguf.h"       /* gguf_load_tokenizer: a GGUF model's own tokenizer */

#define EXIT_BAD_DATA 1          /* corrupt file, out of memory, runtime failure */
#define EXIT_USAGE 2             /* unknown flag, malformed or out-of-range value */
#define PREFILL_CHUNK 256        /* prompt tokens per model_forward call */
#define DEFAULT_STEPS 256        /* -n default: tokens to generate */
#define DEFAULT_TEMPERATURE 1.0f /* -t default, as llama2.c */
#define DEFAULT_TOP_P 0.9f       /* -p default, as llama2.c */
#define TOP_P_EXPECTED "a number in (0, 1]"   /* -p's values */
#ifndef RUN_MAX_TEXT_BYTES
#define RUN_MAX_TEXT_BYTES (1 << 24) /* -f and --eval refuse files larger than 16 MiB (the
                                      * fuzzer lowers it: evaluating megabytes takes long) */
#endif
#define MAX_THREADS 1024         /* -T upper bound (more than the cores is then capped) */
#ifndef RUN_MAX_STEPS
#define RUN_MAX_STEPS 1000000    /* -n upper bound (the fuzzer lowers it) */
#endif
#define RUN_MAX_REVERSE 16       /* -r texts at most */
#define KEEP_UNSET (-2)          /* RunOptions.keep without --keep */
#define RUN_MIN_MACS_FOR_THREADS 4000000L  /* per token; smaller models run on 1 thread */
#define RUN_FIRST_CONTEXT 4096   /* -I without -c: positions allocated at first (llama.cpp's
                                    long-time default context), doubled as turns need */

static const char USAGE[] =
"Usage: run MODEL [options]\n"
"Generate text from MODEL: an llm.c GPT-2 checkpoint (fp32, bf16, or int8 made by\n"
"quantize), a llama2.c checkpoint (legacy, version 1 fp32, or version 2 int8) or a\n"
"GGUF file (llama, qwen2 or gpt2: F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_1, Q5_0,\n"
"Q4_K, Q4_1, Q4_0, Q3_K, Q2_K, IQ4_XS, IQ4_NL, TQ2_0, TQ1_0), which carries its\n"
"tokenizer; int8 files and the GGUF Q, IQ4 and TQ types compute in int8. The\n"
"tokenizer file's format (llm.c GPT-2 or llama2.c) chooses how text is encoded.\n"
"\n"
"Options:\n"
"  -z, --tokenizer PATH   tokenizer file (default: tokenizer.bin beside MODEL; none\n"
"                         with a GGUF MODEL, whose own it uses)\n"
"  -i, --prompt TEXT      prompt text (default: none; start from end-of-text or BOS)\n"
"  -f, --prompt-file PATH read the prompt from a file instead; - reads standard input\n"
"                         (the bytes exactly, to its end)\n"
"  -n, --n-predict N      tokens to generate after the prompt (per turn with -I),\n"
"                         0..1000000 (default 256)\n"
"  -t, --temperature T    sampling temperature, 0 = greedy, 0..100 (default 1.0)\n"
"  -p, --top-p P          nucleus sampling mass, (0, 1]; 1 = off (default 0.9)\n"
"  -k, --top-k K          keep only the K most likely tokens, 0 = off (default 0)\n"
"  -s, --seed S           random seed, 1..18446744073709551615 (default: from the clock\n"
"                         and the process id; the speed line prints it)\n"
"  -c, --ctx-size N       context size, 2..the model's context (default: the model's);\n"
"                         attention memory is allocated for N positions, or the fewer\n"
"                         the prompt and -n reach (-I without -c: for 4096, doubled as\n"
"                         turns need); with --eval, the length of the windows scored\n"
"      --keep N           prompt tokens kept at the start when the context shifts,\n"
"                         0..the context less one, besides the BOS a Llama prompt\n"
"                         starts with (kept always), as llama.cpp; -1: the whole prompt\n"
"                         (default 0)\n"
"      --no-context-shift stop with a message when the context is full, instead of\n"
"                         keeping --keep tokens and the latest half of the rest and\n"
"                         going on (they are run again from position 0)\n"
"  -I, --interactive      after each turn (-n tokens, end-of-text, or -r), read a line\n"
"                         from standard input, append it after a newline and go on;\n"
"                         end of input (Ctrl-D) ends\n"
"  -r, --reverse-prompt TEXT  end the turn when the text ends with TEXT (without -I:\n"
"                         or with TEXT and up to 2 bytes more), as llama.cpp; a prompt\n"
"                         that ends so: at once; -r again adds another, up to 16\n"
"      --cache-type TYPE  exact attention's KV cache in f32 or f16 (IEEE half precision:\n"
"                         half the memory, half the bytes read a token) (default: f16\n"
"                         for a GGUF model, whose keys and values are halves anyway; f32)\n"
"  -T, --threads N        most threads for the matrix products and attention, 1..1024,\n"
"                         capped at the cores (default: all of them, fewer under a\n"
"                         cgroup's CPU quota, or OMP_NUM_THREADS);\n"
"                         models under 4 M multiply-adds per token always use one\n"
"      --attn SPEC        attention variant NAME[:key=value,...] (default: exact, or\n"
"                         the variant the model was trained with), for every layer;\n"
"                         or one per layer, 'SPEC;SPEC;...', N*SPEC for N layers:\n";

/* The usage text after the list of attention variants. */
static const char USAGE_TAIL[] =
"      --attn-map FILE    write the attention weights over the final context as a\n"
"                         heatmap: FILE.svg (an SVG picture) or FILE.html (an explorer\n"
"                         page: point at a token to see what each head attends to);\n"
"                         at most 2^26 weights (layers x heads x tokens^2), written\n"
"                         whole or not at all\n"
"      --layer L          --attn-map, --attn-top: only layer L, 0..layers-1 (default:\n"
"                         every layer for the map, the last for --attn-top)\n"
"      --head H           --attn-map: only head H, 0..heads-1 (default: every head)\n"
"      --attn-top K       instead of the text, print for each generated token the K\n"
"                         earlier tokens each head attended to most, with the weights\n"
"      --eval FILE        instead of generating, report the loss on FILE's tokens in\n"
"                         non-overlapping windows (nats/token, bits/char, perplexity,\n"
"                         and KL and top-1 agreement against exact attention; with\n"
"                         --cache-type f16, against exact attention over floats)\n"
"      --ref MODEL        --eval: compare against MODEL (e.g. the fp32 file an int8 one\n"
"                         was made from) instead of exact attention on MODEL itself\n"
"  -h, --help             print this help and exit\n"
"\n"
"The prompt and the generated text stream to stdout; what was loaded and the speed go\n"
"to stderr. A turn of generation stops after -n tokens, at end-of-text (GPT-2), or at\n"
"EOS (Llama; at BOS too with a llama2.c tokenizer, as llama2.c). The attention\n"
"variants and the heatmaps are explained in\n"
"docs/attention.md and docs/tutorial.md.\n"
"Exit status: 0 ok, 1 bad data or runtime failure, 2 usage error.\n";

typedef struct {
    const char *model_path;
    const char *tokenizer_path;   /* NULL: tokenizer.bin beside the model */
    const char *prompt;           /* -i text, or NULL */
    const char *prompt_file;      /* -f path, or NULL */
    int steps;                    /* -n */
    float temperature;            /* -t */
    float top_p;                  /* -p */
    int top_k;                    /* -k */
    uint64_t seed;                /* -s; 0 until chosen */
    const char *attn_spec;        /* --attn, or NULL: the model's own attention */
    const char *eval_path;        /* --eval FILE, or NULL to generate */
    int ctx_size;                 /* -c; 0 = the model's context */
    int keep;                     /* --keep; -1 = the whole prompt, KEEP_UNSET = 0 (the
                                     BOS a tokenizer adds is kept besides, either way) */
    int no_shift;                 /* --no-context-shift */
    int cache_half;               /* --cache-type: 1 f16, 0 f32, -1 the model's default */
    int interactive;              /* -I */
    const char *reverse_prompts[RUN_MAX_REVERSE];   /* each -r TEXT, in order */
    int n_reverse;
    int threads;                  /* -T; 0 = not given: kernels_set_threads's default */
    const char *ref_path;         /* --ref MODEL: the reference for --eval, or NULL */
    const char *attn_map_path;    /* --attn-map FILE (.svg or .html), or NULL */
    int layer;                    /* --layer; -1 = not given */
    int head;                     /* --head; -1 = not given */
    int attn_top;                 /* --attn-top K; 0 = off */
    char sampling_flag[64];       /* the last of -i -f -n -t -p -k -s given, or "" */
    char ctx_flag[64];            /* -c or --ctx-size, as given (for its messages) */
} RunOptions;

/* Prints the usage text (with the list of attention variants) to f. */
static void print_usage(FILE *f) {
    fputs(USAGE, f);
    fputs(attention_spec_help(), f);
    fputs(USAGE_TAIL, f);
}

/* ------------------------------------------------------------------------- */
/* Strict argument parsing                                                     */

/* Prints "run: SUBJECT: PROBLEM" (with "(got 'VALUE', expected EXPECTED)" when a value is
 * given) and the hint to --help, not the whole usage, which would scroll the error off
 * a small terminal; returns EXIT_USAGE. */
static int usage_error(const char *subject, const char *value, const char *problem,
                       const char *expected) {
    char shown[256], got[260];
    if (value) snprintf(got, sizeof got, "'%s'", cli_printable(value, shown, sizeof shown));
    return cli_usage_error("run", subject, problem, value ? got : NULL, expected);
}

typedef enum {
    OPT_HELP, OPT_TOKENIZER, OPT_PROMPT, OPT_PROMPT_FILE, OPT_STEPS, OPT_TEMPERATURE,
    OPT_TOP_P, OPT_TOP_K, OPT_SEED, OPT_CTX_SIZE, OPT_KEEP, OPT_NO_SHIFT, OPT_INTERACTIVE,
    OPT_REVERSE, OPT_THREADS, OPT_ATTN, OPT_ATTN_MAP, OPT_LAYER, OPT_HEAD, OPT_ATTN_TOP,
    OPT_EVAL, OPT_REF, OPT_CACHE_TYPE
} RunOptionId;

/* The flags, as --help lists them (cli.h: names, value kind, range). */
static const CliOption OPTIONS[] = {
    {OPT_HELP, "-h", "--help", CLI_NONE, 0, 0, 0, NULL},
    {OPT_TOKENIZER, "-z", "--tokenizer", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_PROMPT, "-i", "--prompt", CLI_TEXT, 0, 0, 0, "a text"},
    {OPT_PROMPT_FILE, "-f", "--prompt-file", CLI_PATH, 0, 0, 0, "a path, or - for stdin"},
    {OPT_STEPS, "-n", "--n-predict", CLI_INT, 0, RUN_MAX_STEPS, 0, NULL},
    {OPT_TEMPERATURE, "-t", "--temperature", CLI_FLOAT, 0, 100, 0, NULL},
    {OPT_TOP_P, "-p", "--top-p", CLI_TEXT, 0, 0, 0, TOP_P_EXPECTED},   /* apply_option */
    {OPT_TOP_K, "-k", "--top-k", CLI_INT, 0, INT_MAX, 0, NULL},
    {OPT_SEED, "-s", "--seed", CLI_U64, 1, 0, 0, NULL},
    {OPT_CTX_SIZE, "-c", "--ctx-size", CLI_INT, 2, MODEL_MAX_SEQ_LEN, 0,
     "an integer in 2..the model's context"},
    {OPT_KEEP, NULL, "--keep", CLI_INT, -1, MODEL_MAX_SEQ_LEN, 0,
     "an integer in -1..the context - 1"},
    {OPT_NO_SHIFT, NULL, "--no-context-shift", CLI_NONE, 0, 0, 0, NULL},
    {OPT_CACHE_TYPE, NULL, "--cache-type", CLI_TEXT, 0, 0, 0, "f32 or f16"},
    {OPT_INTERACTIVE, "-I", "--interactive", CLI_NONE, 0, 0, 0, NULL},
    {OPT_REVERSE, "-r", "--reverse-prompt", CLI_TEXT, 0, 0, 0, "a non-empty text"},
    {OPT_THREADS, "-T", "--threads", CLI_INT, 1, MAX_THREADS, 0, NULL},
    {OPT_ATTN, NULL, "--attn", CLI_TEXT, 0, 0, 0, "an attention spec"},
    {OPT_ATTN_MAP, NULL, "--attn-map", CLI_PATH, 0, 0, 0,
     "a file name ending in .svg or .html"},
    {OPT_LAYER, NULL, "--layer", CLI_INT, 0, INT_MAX, 0, "an integer in 0..layers-1"},
    {OPT_HEAD, NULL, "--head", CLI_INT, 0, INT_MAX, 0, "an integer in 0..heads-1"},
    {OPT_ATTN_TOP, NULL, "--attn-top", CLI_INT, 1, INT_MAX, 0, NULL},
    {OPT_EVAL, NULL, "--eval", CLI_PATH, 0, 0, 0, "a path"},
    {OPT_REF, NULL, "--ref", CLI_PATH, 0, 0, 0, "a path"},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

/* 1 if text is a number by cli.h's rule, in any range. */
static int is_number(const char *text) {
    float x;
    return cli_parse_float(text, -(double)FLT_MAX, (double)FLT_MAX, 0, &x) == 0;
}

/* Records one flag (arg, its value checked by cli_next for kind and range) in o; a
 * generation flag is also remembered as given, for --eval's message. Returns 0,
 * EXIT_USAGE after printing the problem and the hint (an empty -r, a bad --attn spec, an
 * --attn-map name of no known format), or -1 for --help (already printed). */
static int apply_option(RunOptions *o, const CliArg *arg) {
    char flag[64], problem[512];
    snprintf(flag, sizeof flag, "%.*s", (int)arg->flag_len, arg->flag);
    switch ((RunOptionId)arg->option->id) {
    case OPT_PROMPT: case OPT_PROMPT_FILE: case OPT_STEPS: case OPT_TEMPERATURE:
    case OPT_TOP_P: case OPT_TOP_K: case OPT_SEED:   /* generation's flags */
        snprintf(o->sampling_flag, sizeof o->sampling_flag, "%s", flag);
        break;
    default: break;
    }
    switch ((RunOptionId)arg->option->id) {
    case OPT_HELP: print_usage(stdout); return -1;
    case OPT_TOKENIZER: o->tokenizer_path = arg->value; break;
    case OPT_PROMPT: o->prompt = arg->value; break;
    case OPT_PROMPT_FILE: o->prompt_file = arg->value; break;
    case OPT_STEPS: o->steps = arg->number; break;
    case OPT_TEMPERATURE: o->temperature = arg->real; break;
    case OPT_TOP_P:   /* -p is top-p as in llama2.c, but llama.cpp's prompt: say so */
        if (cli_parse_float(arg->value, 0.0, 1.0, 1, &o->top_p) != 0)
            return usage_error(flag, arg->value, "invalid value", is_number(arg->value)
                               ? TOP_P_EXPECTED : TOP_P_EXPECTED "; the prompt is -i TEXT, "
                               "-p is top-p");
        break;
    case OPT_TOP_K: o->top_k = arg->number; break;
    case OPT_SEED: o->seed = arg->u64; break;
    case OPT_CTX_SIZE:
        o->ctx_size = arg->number;
        snprintf(o->ctx_flag, sizeof o->ctx_flag, "%s", flag);
        break;
    case OPT_KEEP: o->keep = arg->number; break;
    case OPT_NO_SHIFT: o->no_shift = 1; break;
    case OPT_CACHE_TYPE:
        if (strcmp(arg->value, "f32") != 0 && strcmp(arg->value, "f16") != 0)
            return usage_error(flag, arg->value, "invalid value", "f32 or f16");
        o->cache_half = strcmp(arg->value, "f16") == 0;
        break;
    case OPT_INTERACTIVE: o->interactive = 1; break;
    case OPT_REVERSE:
        if (arg->value[0] == '\0')
            return usage_error(flag, arg->value, "invalid value", "a non-empty text");
        if (o->n_reverse == RUN_MAX_REVERSE) {
            char most[64];
            snprintf(most, sizeof most, "at most %d reverse prompts", RUN_MAX_REVERSE);
            return usage_error(flag, arg->value, "too many", most);
        }
        o->reverse_prompts[o->n_reverse++] = arg->value;
        break;
    case OPT_THREADS: o->threads = arg->number; break;
    case OPT_ATTN: {
        /* one spec is checked now; a list of layers' specs once the layers are known */
        AttentionConfig cfg;
        if (!strpbrk(arg->value, ";*") &&
            attention_spec_parse(arg->value, &cfg, problem, sizeof problem))
            return usage_error(flag, NULL, problem, NULL);
        o->attn_spec = arg->value;
        break;
    }
    case OPT_ATTN_MAP:
        if (!run_lab_map_format(arg->value))
            return usage_error(flag, arg->value, "invalid value",
                               "a file name ending in .svg or .html");
        o->attn_map_path = arg->value;
        break;
    case OPT_LAYER: o->layer = arg->number; break;
    case OPT_HEAD: o->head = arg->number; break;
    case OPT_ATTN_TOP: o->attn_top = arg->number; break;
    case OPT_EVAL: o->eval_path = arg->value; break;
    case OPT_REF: o->ref_path = arg->value; break;
    }
    return 0;
}

/* What the flags mean together: a model path given, one prompt at most, --ref only with
 * --eval and no generation flag with it, -f - not with -I (standard input gives its
 * lines), --head only with --attn-map, --layer only with --attn-map or --attn-top.
 * Returns 0, or EXIT_USAGE after printing the problem and the hint. */
static int check_combinations(const RunOptions *o) {
    if (!o->model_path) return usage_error("MODEL", NULL, "missing", "a model path");
    if (o->prompt && o->prompt_file)
        return usage_error("-f", NULL, "cannot be combined with -i (give one prompt)", NULL);
    if (o->ref_path && !o->eval_path)
        return usage_error("--ref", NULL, "only applies with --eval", NULL);
    const char *generation_only = o->attn_map_path ? "--attn-map" : o->attn_top ? "--attn-top"
                                : o->interactive ? "--interactive" : o->n_reverse ? "-r"
                                : o->keep != KEEP_UNSET ? "--keep"
                                : o->no_shift ? "--no-context-shift"
                                : o->sampling_flag[0] ? o->sampling_flag : NULL;
    if (o->eval_path && generation_only)
        return usage_error(generation_only, NULL, "cannot be combined with --eval (it applies "
                           "to generation)", NULL);
    if (o->interactive && o->prompt_file && strcmp(o->prompt_file, "-") == 0)
        return usage_error("-f -", NULL, "cannot be combined with --interactive (standard "
                           "input gives the lines)", NULL);
    if (o->keep != KEEP_UNSET && o->no_shift)
        return usage_error("--keep", NULL, "cannot be combined with --no-context-shift (it "
                           "applies to the shifts)", NULL);
    if (o->head >= 0 && !o->attn_map_path)
        return usage_error("--head", NULL, "only applies with --attn-map", "--attn-map FILE too");
    if (o->layer >= 0 && !o->attn_map_path && !o->attn_top)
        return usage_error("--layer", NULL, "only applies with --attn-map or --attn-top",
                           "--attn-map FILE or --attn-top K too");
    return 0;
}

/* Fills o from argv. Returns 0, EXIT_USAGE after printing the problem and the hint,
 * or -1 for --help (already printed). */
static int parse_args(int argc, char **argv, RunOptions *o) {
    o->steps = DEFAULT_STEPS;
    o->temperature = DEFAULT_TEMPERATURE;
    o->top_p = DEFAULT_TOP_P;
    o->keep = KEEP_UNSET;
    o->layer = o->head = o->cache_half = -1;
    CliArg arg = {0};   /* carries a "--" from one argument to the next */
    for (int i = 1; i < argc; i++) {
        if (cli_next("run", OPTIONS, N_OPTIONS, argc, argv, &i, &arg) != 0) return EXIT_USAGE;
        if (!arg.option && !arg.value) continue;   /* "--" */
        if (!arg.option) {   /* the model path, once */
            if (o->model_path)
                return usage_error(arg.value, NULL, "unexpected extra argument", NULL);
            if (cli_check_path("run", "MODEL", arg.value) != 0) return EXIT_USAGE;
            o->model_path = arg.value;
            continue;
        }
        int status = apply_option(o, &arg);
        if (status != 0) return status;
    }
    return check_combinations(o);
}

/* ------------------------------------------------------------------------- */
/* Generation                                                                  */

/* Encodes the prompt (or starts from end-of-text) and checks it fits n_ctx positions.
 * Returns a malloc'd id array with its length in *n, or NULL after a message. */
static int *prompt_tokens(const RunOptions *o, const Tokenizer *tok, const Config *c, int n_ctx,
                          int *n) {
    size_t len = 0, n_ids = 0;
    char *file_text = NULL;
    const char *text = o->prompt ? o->prompt : "";
    if (o->prompt_file) {
        file_text = os_read_file("run", o->prompt_file, "a prompt file", RUN_MAX_TEXT_BYTES,
                                 &len);
        if (!file_text) return NULL;
        text = file_text;
    } else {
        len = strlen(text);
    }
    int *ids = malloc(tokenizer_max_ids(tok, len) * sizeof(int));
    if (!ids) {
        fprintf(stderr, "run: out of memory for a %zu-byte prompt\n", len);
        goto fail;
    }
    if (tokenizer_encode(tok, text, len, ids, tokenizer_max_ids(tok, len), &n_ids) != 0) goto fail;
    /* no prompt and no BOS added (GPT-2; a GGUF file whose add_bos_token is false): the
     * text starts from end-of-text, as GPT-2's own samples do */
    if (n_ids == 0) {
        if (tok->eot_id >= c->vocab_size) {
            fprintf(stderr, "run: no prompt, and the tokenizer's end-of-text id is outside the "
                    "model's vocabulary (got %d, expected 0..%d): give a prompt with -i\n",
                    tok->eot_id, c->vocab_size - 1);
            goto fail;
        }
        ids[n_ids++] = tok->eot_id;
    }
    for (size_t t = 0; t < n_ids; t++) {
        if (ids[t] >= c->vocab_size) {
            fprintf(stderr, "run: prompt token id out of range for the model (got %d at "
                    "position %zu, expected 0..%d: the tokenizer has %d tokens, the model "
                    "%d)\n", ids[t], t, c->vocab_size - 1, tok->vocab_size, c->vocab_size);
            goto fail;
        }
    }
    if (n_ids > (size_t)n_ctx) {
        fprintf(stderr, "run: prompt too long for the context (got %zu tokens, expected at "
                "most %d%s)\n", n_ids, n_ctx,
                o->ctx_size ? ", the --ctx-size"
                : n_ctx < c->seq_len ? ", what the KV cache's memory limit holds" : "");
        goto fail;
    }
    free(file_text);
    *n = (int)n_ids;
    return ids;
fail:
    free(file_text);
    free(ids);
    return NULL;
}

/* Everything a generation needs besides the model, decided in main before it starts. */
typedef struct {
    Generation generation;
    GenerateOptions options;
    int *prompt;                  /* (n_prompt,) prompt token ids; owned */
    int n_prompt;
    SaveFile map;                 /* --attn-map's file (map.file NULL until it is written
                                   * after the generation), renamed into place when whole */
    RunLabTop top;                /* --attn-top's view (its buffers NULL without it) */
} GenerationPlan;

/* Runs the generation main planned, then prints the speed line and writes the map. */
static int run_generation(const RunOptions *o, Model *m, const Tokenizer *tok, Sampler *sampler,
                          GenerationPlan *plan) {
    Generation *g = &plan->generation;
    if (plan->options.interactive && plan->options.prompt_to)   /* a person at a terminal */
        fprintf(stderr, "run: -I: after each turn, type a line and Enter to continue the text; "
                "end of input (Ctrl-D) to stop\n");
    if (o->attn_top && run_lab_top_init(&plan->top, m, tok, g->n_ctx, o->layer >= 0 ? o->layer
                                        : m->config.n_layers - 1, o->attn_top) != 0) {
        fprintf(stderr, "run: --attn-top: out of memory for %d positions\n", g->n_ctx);
        return EXIT_BAD_DATA;
    }
    if (generate(g, tok, sampler, &plan->options, plan->prompt, plan->n_prompt) != 0)
        return EXIT_BAD_DATA;
    const GenerationStats *st = &g->stats;
    fprintf(stderr, "prompt: %ld tokens, %.1f tokens/s; generation: %ld tokens, %.1f tokens/s; "
            "context shifts: %ld (%.1f ms each, %ld tokens run again); seed %llu\n",
            st->input_tokens, st->input_seconds > 0 ? st->input_tokens / st->input_seconds : 0.0,
            st->generated, st->generate_seconds > 0 ? st->generated / st->generate_seconds : 0.0,
            st->shifts, st->shifts ? 1e3 * st->shift_seconds / (double)st->shifts : 0.0,
            st->rerun_tokens, (unsigned long long)o->seed);
    if (st->grows)   /* -I's attention memory, taken as the turns reached it */
        fprintf(stderr, "context grown to %d positions in %ld growths (%.1f ms, %ld tokens "
                "run again)\n", g->n_alloc, st->grows, 1e3 * st->grow_seconds, st->grow_tokens);
    if (o->attn_map_path) {
        /* text that did not reach standard output (a full disk, a closed pipe) fails the
         * run: an existing map is then left as it was */
        if (fflush(stdout) != 0 || ferror(stdout)) return EXIT_BAD_DATA;
        RunLabMap map = {o->attn_map_path, o->model_path, o->layer, o->head};
        if (os_save_open(&plan->map, "run", o->attn_map_path) != 0 ||
            run_lab_write_map(&map, m, tok, g, &plan->map) != 0)
            return EXIT_BAD_DATA;
    }
    return 0;
}

/* Checks an option that depends on the model against its range; EXIT_USAGE if outside. */
static int check_model_range(const char *flag, int value, int low, int high, const char *what) {
    if (value >= low && value <= high) return 0;
    char shown[32], expected[128];
    snprintf(shown, sizeof shown, "%d", value);
    snprintf(expected, sizeof expected, "an integer in %d..%d, %s", low, high, what);
    return usage_error(flag, shown, "invalid value", expected);
}

/* Encodes the prompt, sizes the context, checks the map's size (run_generation writes it):
 * everything a generation needs before it starts. Returns 0, EXIT_USAGE or EXIT_BAD_DATA
 * after a message. */
static int plan_generation(const RunOptions *o, Model *m, const Tokenizer *tok,
                           GenerationPlan *plan) {
    const Config *c = &m->config;
    int status;
    int n_ctx = m->max_ctx;   /* the model's context (capped if its header is huge) */
    if (o->ctx_size && (status = check_model_range(o->ctx_flag, o->ctx_size, 2, n_ctx,
                                                   "this model's context")) != 0) return status;
    if (o->ctx_size) n_ctx = o->ctx_size;
    if (o->keep != KEEP_UNSET && (status = check_model_range("--keep", o->keep, -1, n_ctx - 1,
                                                             "less than the context")) != 0)
        return status;
    if (o->layer >= 0 && (status = check_model_range("--layer", o->layer, 0, c->n_layers - 1,
                                                     "this model's layers")) != 0) return status;
    if (o->head >= 0 && (status = check_model_range("--head", o->head, 0, c->n_heads - 1,
                                                    "this model's heads")) != 0) return status;
    if (!(plan->prompt = prompt_tokens(o, tok, c, n_ctx, &plan->n_prompt))) return EXIT_BAD_DATA;
    /* without -I a run never holds more than the prompt and -n tokens */
    long reach = (long)plan->n_prompt + o->steps;
    if (!o->interactive && reach < n_ctx) n_ctx = (int)reach;
    /* --keep's prompt tokens and the BOS a tokenizer adds (Llama's), which llama.cpp always
     * keeps: the model has only ever seen text start with it (a GPT-2 GGUF file adds one
     * only where add_bos_token says so); never more than the prompt, as llama.cpp */
    int added_bos = tok->add_bos && plan->prompt[0] == tok->bos_id;
    int keep = (o->keep == KEEP_UNSET ? 0 : o->keep) + added_bos;
    if (o->keep == -1 || keep > plan->n_prompt) keep = plan->n_prompt;
    if (keep > n_ctx - 1) {   /* the prompt fills the context: a shift keeps all but one */
        if (o->keep != KEEP_UNSET && (o->interactive || reach > n_ctx))
            fprintf(stderr, "run: note: --keep: the prompt's %d tokens fill the context of %d, "
                    "so a shift keeps %d of them\n", plan->n_prompt, n_ctx, n_ctx - 1);
        keep = n_ctx - 1;
    }
    if (o->attn_map_path) {
        /* the tokens the map can hold: a run that ends before the context fills never runs
         * its last token, which has no row */
        int drawn = !o->interactive && o->steps > 0 && reach <= n_ctx ? n_ctx - 1 : n_ctx;
        if ((status = run_lab_check_map_size(o->attn_map_path, o->layer, o->head, c, drawn,
                                             usage_error)) != 0) return status;
    }
    if ((o->attn_map_path || o->attn_top) && model_trace(m, 1) != 0) return EXIT_BAD_DATA;
    /* -I's length is unknown: a huge context's memory is taken only as turns reach it */
    int n_alloc = n_ctx;
    if (o->interactive && !o->ctx_size && n_ctx > RUN_FIRST_CONTEXT)
        n_alloc = reach > RUN_FIRST_CONTEXT ? (int)(reach < n_ctx ? reach : n_ctx)
                                            : RUN_FIRST_CONTEXT;
    if (generation_init(&plan->generation, m, n_ctx, n_alloc, keep, !o->no_shift) != 0)
        return EXIT_BAD_DATA;
    GenerateOptions *go = &plan->options;
    go->steps = o->steps;
    go->interactive = o->interactive;
    go->reverse_prompts = o->reverse_prompts;
    go->n_reverse = o->n_reverse;
    if (o->attn_top) {   /* the lab's view replaces the text (its buffers: run_generation) */
        go->watch = run_lab_top_print;
        go->watch_ctx = &plan->top;
        go->quiet = 1;
    }
    go->input = stdin;
    int typed = isatty(STDIN_FILENO);   /* a person types the lines: show "> " */
    go->line_shown = typed && isatty(STDOUT_FILENO);
    go->prompt_to = !typed ? NULL : go->line_shown ? stdout : stderr;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Running: the job (generation or --eval), the seed, the tokenizer          */

/* What kernels_run runs: the generation or the evaluation, with the threads as a pool. */
typedef struct {
    const RunOptions *options;
    Model *model;
    const Tokenizer *tokenizer;
    Sampler *sampler;
    GenerationPlan *plan;
    int status;
} Job;

static void run_job(void *ctx) {
    Job *job = ctx;
    const RunOptions *o = job->options;
    if (o->eval_path) {
        RunLabEval e = {o->eval_path, o->ref_path, o->model_path,
                        !o->tokenizer_path && !job->model->checkpoint.gguf,
                        o->ctx_size ? o->ctx_size : job->model->max_ctx,   /* the windows */
                        RUN_MAX_TEXT_BYTES};
        job->status = run_lab_evaluate(&e, job->model, job->tokenizer) == 0 ? 0 : EXIT_BAD_DATA;
    } else {
        job->status = run_generation(o, job->model, job->tokenizer, job->sampler, job->plan);
    }
}

/* The seed when -s is not given: the wall clock in nanoseconds and the process id, mixed
 * by hash_mix64, so that runs started in the same second (a script's, in parallel) differ;
 * never 0, which xorshift would never leave. The speed line prints it, for -s. */
static uint64_t default_seed(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    uint64_t seed = hash_mix64(ns ^ hash_mix64((uint64_t)getpid()));
    return seed ? seed : 1;
}

/* The default tokenizer path: tokenizer.bin in the model's folder, in out (cap bytes).
 * Returns 0, or -1 (nothing printed) if it does not fit. */
static int default_tokenizer_path(const char *model_path, char *out, size_t cap) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    int n = snprintf(out, cap, "%.*stokenizer.bin", dir_len, model_path);
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

/* Loads the tokenizer at path (-z's, or without -z the default beside the model) and
 * checks it belongs to the model. Returns 0, or after a message EXIT_USAGE (-z with a GGUF
 * model) or -1. */
static int load_tokenizer(Tokenizer *tok, const char *path, const RunOptions *o, const Model *m) {
    const Config *c = &m->config;
    if (m->checkpoint.gguf) {   /* the file's own vocabulary, which its embedding rows match */
        if (o->tokenizer_path) {
            fprintf(stderr, "run: %s: -z with a GGUF model (expected no -z: the file carries "
                    "its tokenizer)\n", o->tokenizer_path);
            return EXIT_USAGE;
        }
        return gguf_load_tokenizer(tok, o->model_path) == 0 ? 0 : -1;
    }
    if (!o->tokenizer_path && access(path, F_OK) != 0 && errno == ENOENT) {
        /* a model quantize wrote, or moved, has no tokenizer beside it */
        fprintf(stderr, "run: %s: no tokenizer beside the model %s, and no -z (expected -z PATH: "
                "the tokenizer file it was trained with, or a quantized model's source's)\n", path,
                o->model_path);
        return -1;
    }
    if (tokenizer_load(tok, path) != 0) return -1;
    int gpt2_model = c->family == MODEL_GPT2, gpt2_tokenizer = tok->kind == TOKENIZER_GPT2;
    if (gpt2_model != gpt2_tokenizer) {   /* the same ids would mean other text */
        fprintf(stderr, "run: %s: tokenizer of the other family (got %s, expected %s for a "
                "%s model)\n", path,
                gpt2_tokenizer ? "llm.c's GPT-2 tokenizer file" : "llama2.c's tokenizer file",
                gpt2_model ? "llm.c's GPT-2 tokenizer file" : "llama2.c's tokenizer file",
                gpt2_model ? "GPT-2" : "Llama");
        return -1;
    }
    if ((c->family == MODEL_GPT2 || tok->kind == TOKENIZER_GPT2) &&
        tok->vocab_size != c->vocab_size) {
        /* a GPT-2 model and its tokenizer share one vocabulary, and a GPT-2 tokenizer file
         * is its model's: any other is not its own (only llama2.c's larger tokenizer.bin
         * serves smaller models, as in llama2.c) */
        fprintf(stderr, "run: %s: tokenizer does not belong to the model (got %d tokens, "
                "expected %d, the model's vocabulary)\n", path, tok->vocab_size, c->vocab_size);
        return -1;
    }
    if (tok->vocab_size < c->vocab_size) {
        fprintf(stderr, "run: %s: tokenizer has fewer tokens than the model (got %d, expected "
                "at least %d)\n", path, tok->vocab_size, c->vocab_size);
        return -1;
    }
    return 0;   /* a larger one: main says so (llama2.c reads only the model's first V) */
}

int main(int argc, char **argv) {
    os_program_start("run");   /* a closed pipe: a write error, as a full disk */
    RunOptions o = {0};
    int parsed = parse_args(argc, argv, &o);
    if (parsed < 0) return cli_stdout_ok("run") == 0 ? 0 : EXIT_BAD_DATA;   /* --help */
    if (parsed > 0) return parsed;
    if (o.seed == 0) o.seed = default_seed();

    char beside[4096];   /* PATH_MAX on Linux: no longer path opens */
    const char *tokenizer_path = o.tokenizer_path ? o.tokenizer_path : beside;
    if (!o.tokenizer_path && default_tokenizer_path(o.model_path, beside, sizeof beside) != 0) {
        fprintf(stderr, "run: %s: folder path too long for tokenizer.bin beside it (expected "
                "at most %zu bytes in all, or -z PATH)\n", o.model_path, sizeof beside - 1);
        return EXIT_USAGE;
    }
    const char *inputs[] = {o.model_path, tokenizer_path, o.prompt_file,
                            o.interactive ? "-" : NULL};   /* "-": standard input's file */
    const char *stdin_problem = o.interactive ? os_stdin_problem() : NULL;
    if (stdin_problem) {   /* found now, not after the first turn */
        fprintf(stderr, "run: --interactive: standard input: %s (expected lines of text to "
                "read)\n", stdin_problem);
        return EXIT_BAD_DATA;
    }
    if (o.interactive && os_stdin_is_stdout()) {   /* it would read its own text back */
        fprintf(stderr, "run: --interactive: standard input is the file standard output goes "
                "to (got the same file, expected another for the text)\n");
        return EXIT_BAD_DATA;
    }
    /* the files read after the model, opened now: a missing one is said before a large
     * model's seconds of loading (llama.cpp opens them as it parses its arguments) */
    const char *later[4][2] = {{o.tokenizer_path, "a tokenizer file"},
                               {o.prompt_file, "a prompt file"}, {o.eval_path, "an eval file"},
                               {o.ref_path, "a model file"}};
    for (int i = 0; i < 4; i++) {
        if (!later[i][0] || strcmp(later[i][0], "-") == 0) continue;   /* "-": standard input */
        FILE *file = os_open_read("run", later[i][0], later[i][1]);
        if (!file) return EXIT_BAD_DATA;
        fclose(file);
    }
    SaveLock map_lock = {.fd = -1};   /* --attn-map's PATH.lock: one writer of the map */
    if (o.attn_map_path && (os_check_output("run", o.attn_map_path, "the attention map",
                                            inputs, 4) != 0 ||
                            run_lab_check_map_path(o.attn_map_path) != 0 ||
                            os_check_name("run", o.attn_map_path, OS_TEMP_SUFFIX "-XXXXXX") != 0 ||
                            os_lock(&map_lock, "run", o.attn_map_path) != 0))
        return EXIT_BAD_DATA;

    Model model;
    Tokenizer tok;
    Sampler sampler;
    GenerationPlan plan;
    memset(&tok, 0, sizeof tok);
    memset(&sampler, 0, sizeof sampler);
    memset(&plan, 0, sizeof plan);
    int status = EXIT_BAD_DATA;
    int asked = kernels_cap_threads();   /* said once the model decides if threads pay */
    if (o.threads) kernels_set_threads(o.threads);
    /* attention memory for one position: the context is sized once the run knows it
     * (generation_init calls model_set_context, which allocates the KV cache) */
    if (model_load(&model, o.model_path, PREFILL_CHUNK, 1) != 0) {
        os_unlock(&map_lock);
        return EXIT_BAD_DATA;
    }
    const Config *c = &model.config;
    if (o.cache_half >= 0 && o.cache_half != model.half_cache &&
        model_set_half_cache(&model, o.cache_half) != 0)
        goto done;
    /* a second thread pays only when a token brings enough work to share (below that, the
     * hand-over costs more than it saves) */
    int shares = model_macs_per_token(&model) >= RUN_MIN_MACS_FOR_THREADS;
    if (!shares) kernels_set_threads(1);
    if (asked && !o.threads && (asked < 0 || shares))
        cli_note_threads("run", asked, kernels_threads());
    int loaded = load_tokenizer(&tok, tokenizer_path, &o, &model);
    if (loaded != 0) {
        if (loaded > 0) status = loaded;
        goto done;
    }
    if (o.attn_spec && (status = run_lab_set_attention(&model, o.attn_spec, o.model_path,
                                                       usage_error)) != 0) {
        if (status < 0) status = EXIT_BAD_DATA;
        goto done;
    }
    if (o.cache_half == 1 && model.lab) {   /* a variant keeps a state of its own */
        status = usage_error("--cache-type f16", NULL, "only applies to exact attention's KV "
                             "cache", o.attn_spec ? "no --attn, or --attn exact without parameters"
                             : "--attn exact: this model was trained with another attention");
        goto done;
    }
    status = EXIT_BAD_DATA;
    if (o.eval_path) {   /* attention memory for the windows' -c positions */
        if (o.ctx_size > model.max_ctx) {
            status = check_model_range(o.ctx_flag, o.ctx_size, 2, model.max_ctx,
                                       "this model's context");
            goto done;
        }
        if (model_set_context(&model, o.ctx_size ? o.ctx_size : model.max_ctx) != 0) goto done;
    }
    if (!o.eval_path) {
        if ((status = plan_generation(&o, &model, &tok, &plan)) != 0) goto done;
        status = EXIT_BAD_DATA;
        if (sampler_init(&sampler, c->vocab_size, o.temperature, o.top_p, o.top_k,
                         o.seed) != 0) goto done;
    }
    if (tok.vocab_size > c->vocab_size)   /* llama2.c reads only the model's first V */
        fprintf(stderr, "run: %s: tokenizer has %d tokens, the model %d: as llama2.c does, only "
                "the first %d are used (ids beyond are refused)\n", tokenizer_path,
                tok.vocab_size, c->vocab_size, c->vocab_size);
    double state_mib = (double)model.attention_bytes / 1048576.0;
    char variant[RUN_LAB_SPEC_TEXT + 3] = "";   /* " (SPEC)": the layers' attention */
    if (model.lab) {
        char spec[RUN_LAB_SPEC_TEXT];
        attention_spec_format_layers(model.attention_configs, c->n_layers, spec, sizeof spec);
        snprintf(variant, sizeof variant, " (%s)", spec);
    }
    fprintf(stderr, "run: %s: %s; %d layer%s, width %d, %d heads (%d kv), vocab %d, context %d; "
            "%s %.1f MiB for %d positions%s\n", o.model_path, model.format, c->n_layers,
            c->n_layers == 1 ? "" : "s", c->dim, c->n_heads, c->n_kv_heads, c->vocab_size,
            c->seq_len,
            model.lab ? "attention state" : model.half_cache ? "KV cache (f16)" : "KV cache",
            state_mib, model.n_alloc, variant);
    /* the generation: run_job(&job) on this thread, the other threads waiting as a pool
     * for the products' and attention's jobs */
    Job job = {&o, &model, &tok, &sampler, &plan, EXIT_BAD_DATA};
    kernels_run(run_job, &job);
    status = job.status;
done:
    /* text that never reached its destination (a full disk, a closed pipe) is a failure */
    if (cli_stdout_ok("run") != 0 && status == 0) status = EXIT_BAD_DATA;
    os_save_discard(&plan.map);   /* a run that failed before writing its map */
    free(plan.prompt);
    generation_free(&plan.generation);
    run_lab_top_free(&plan.top);
    sampler_free(&sampler);
    tokenizer_free(&tok);
    model_free(&model);
    os_unlock(&map_lock);
    return status;
}
