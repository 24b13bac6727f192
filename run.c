/* run.c: the command-line program. Parses flags, loads a model and a tokenizer,
 * encodes the prompt, runs it through the model in chunks, then samples and
 * streams new tokens, and reports speed on stderr. With --eval it instead reports
 * the model's loss on a file (eval.c), and --attn swaps in another attention.
 *
 * It owns exit codes (0 ok, 1 bad data or runtime failure, 2 usage error) and all
 * output; it contains no kernels and reaches the network only via model_forward.
 * Read model.h, then tokenizer.h and sampler.h, for what it calls.
 */
#include <ctype.h>      /* isprint, isspace */
#include <errno.h>      /* errno */
#include <limits.h>     /* INT_MAX */
#include <math.h>       /* log, exp (the eval report) */
#include <stdint.h>     /* uint64_t */
#include <stdio.h>      /* printf, fwrite, fprintf */
#include <stdlib.h>     /* malloc, free */
#include <string.h>     /* strcmp, strncmp, strrchr */
#include <time.h>       /* clock_gettime, time */
#include <sys/stat.h>   /* stat: refuse FIFOs and directories as text files */

#include "attention_spec.h"  /* attention_spec_parse, attention_spec_help */
#include "cli.h"        /* cli_parse_int, cli_parse_float, cli_parse_u64, cli_printable */
#include "eval.h"       /* eval_windows */
#include "kernels.h"    /* kernels_set_threads, kernels_run */
#include "model.h"      /* Model, model_load, model_forward, model_set_attention */
#include "sampler.h"    /* Sampler, sampler_sample */
#include "tokenizer.h"  /* Tokenizer, tokenizer_encode, tokenizer_decode */

#define EXIT_BAD_DATA 1          /* corrupt file, out of memory, runtime failure */
#define EXIT_USAGE 2             /* unknown flag, malformed or out-of-range value */
#define PREFILL_CHUNK 64         /* prompt tokens per model_forward call */
#define DEFAULT_STEPS 256        /* -n default: tokens to generate */
#define DEFAULT_TEMPERATURE 1.0f /* -t default, as llama2.c */
#define DEFAULT_TOP_P 0.9f       /* -p default, as llama2.c */
#define MAX_PROMPT_BYTES (1 << 24) /* -f refuses files larger than 16 MiB */
#define MAX_THREADS 1024         /* -T upper bound (more than the cores is then capped) */
#define RUN_MIN_MACS_FOR_THREADS 4000000L  /* per token; smaller models run on 1 thread */

static const char USAGE[] =
"Usage: run MODEL [options]\n"
"Generate text from MODEL: an llm.c GPT-2 checkpoint (fp32, bf16, or int8 made by\n"
"quantize) or a llama2.c checkpoint (legacy, version 1 fp32, or version 2 int8); int8\n"
"files compute in int8. The tokenizer file's format (llm.c GPT-2 or llama2.c) chooses\n"
"how text is encoded.\n"
"\n"
"Options:\n"
"  -z, --tokenizer PATH   tokenizer file (default: tokenizer.bin beside MODEL)\n"
"  -i, --prompt TEXT      prompt text (default: none; start from end-of-text or BOS)\n"
"  -f, --prompt-file PATH read the prompt from a file instead\n"
"  -n, --n-predict N      tokens to generate after the prompt, 0..1000000 (default 256)\n"
"  -t, --temperature T    sampling temperature, 0 = greedy, 0..100 (default 1.0)\n"
"  -p, --top-p P          nucleus sampling mass, (0, 1]; 1 = off (default 0.9)\n"
"  -k, --top-k K          keep only the K most likely tokens, 0 = off (default 0)\n"
"  -s, --seed S           random seed, 1..18446744073709551615 (default: time)\n"
"  -T, --threads N        most threads for the matrix products and attention, 1..1024,\n"
"                         capped at the cores (default: all of them, or OMP_NUM_THREADS);\n"
"                         models under 4 M multiply-adds per token always use one\n"
"      --attn SPEC        attention variant NAME[:key=value,...] (default exact):\n"
"%s"
"      --eval FILE        instead of generating, report the loss on FILE's tokens in\n"
"                         non-overlapping windows (nats/token, bits/char, perplexity,\n"
"                         and KL and top-1 agreement against exact attention)\n"
"      --ctx T            --eval window length, 2..context (default: the context)\n"
"      --ref MODEL        --eval: compare against MODEL (e.g. the fp32 file an int8 one\n"
"                         was made from) instead of exact attention on MODEL itself\n"
"  -h, --help             print this help and exit\n"
"\n"
"The prompt and the generated text stream to stdout; what was loaded and the speed go\n"
"to stderr. Generation stops at end-of-text (GPT-2), BOS or EOS (Llama), or at the\n"
"model's context length.\n"
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
    AttentionConfig attention;    /* --attn; exact by default */
    const char *eval_path;        /* --eval FILE, or NULL to generate */
    int ctx;                      /* --ctx; 0 = the model's context */
    int threads;                  /* -T; 0 = OpenMP's default */
    const char *ref_path;         /* --ref MODEL: the reference for --eval, or NULL */
} Options;

/* Prints the usage text (with the list of attention variants) to f. */
static void print_usage(FILE *f) {
    fprintf(f, USAGE, attention_spec_help());
}

/* ------------------------------------------------------------------------- */
/* Strict argument parsing                                                     */

/* Prints "run: FLAG: problem" on one line and a hint to --help (not the whole usage,
 * which would scroll the error off a small terminal), and returns EXIT_USAGE. */
static int usage_error(const char *flag, const char *value, const char *expected) {
    char shown_flag[256], shown_value[256];
    cli_printable(flag, shown_flag, sizeof shown_flag);
    if (value) fprintf(stderr, "run: %s: invalid value '%s' (expected %s)\n", shown_flag,
                       cli_printable(value, shown_value, sizeof shown_value), expected);
    else fprintf(stderr, "run: %s: %s\n", shown_flag, expected);
    fprintf(stderr, "Try 'run --help' for the options.\n");
    return EXIT_USAGE;
}

/* Matches argv[*i] against a short and long flag name, taking its value from
 * "--long=VALUE" or from the next argument. Returns 1 and sets *value on a match,
 * 0 if the flag is another one, -1 if the value is missing. */
static int match_flag(int argc, char **argv, int *i, const char *short_name,
                      const char *long_name, const char **value) {
    const char *arg = argv[*i];
    size_t long_len = strlen(long_name);
    if (strncmp(arg, long_name, long_len) == 0 && arg[long_len] == '=') {
        *value = arg + long_len + 1;
        return 1;
    }
    if (strcmp(arg, short_name) != 0 && strcmp(arg, long_name) != 0) return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

/* Fills o from argv. Returns 0, EXIT_USAGE after printing the problem and usage,
 * or -1 for --help (already printed). */
static int parse_args(int argc, char **argv, Options *o) {
    o->steps = DEFAULT_STEPS;
    o->temperature = DEFAULT_TEMPERATURE;
    o->top_p = DEFAULT_TOP_P;
    attention_config_default(&o->attention);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        int m;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            print_usage(stdout);
            return -1;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (o->model_path) return usage_error(arg, NULL, "unexpected extra argument");
            o->model_path = arg;
            continue;
        }
#define FLAG(short_name, long_name) \
        ((m = match_flag(argc, argv, &i, short_name, long_name, &value)) != 0)
        if (FLAG("-z", "--tokenizer")) {
            o->tokenizer_path = value;
        } else if (FLAG("-i", "--prompt")) {
            o->prompt = value;
        } else if (FLAG("-f", "--prompt-file")) {
            o->prompt_file = value;
        } else if (FLAG("-n", "--n-predict")) {
            if (m > 0 && cli_parse_int(value, 0, 1000000, &o->steps))
                return usage_error(arg, value, "an integer in 0..1000000");
        } else if (FLAG("-t", "--temperature")) {
            if (m > 0 && cli_parse_float(value, 0.0f, 100.0f, 0, &o->temperature))
                return usage_error(arg, value, "a number in 0..100");
        } else if (FLAG("-p", "--top-p")) {
            if (m > 0 && cli_parse_float(value, 0.0f, 1.0f, 1, &o->top_p))
                return usage_error(arg, value, "a number in (0, 1]");
        } else if (FLAG("-k", "--top-k")) {
            if (m > 0 && cli_parse_int(value, 0, INT_MAX, &o->top_k))
                return usage_error(arg, value, "an integer >= 0");
        } else if (FLAG("-s", "--seed")) {
            if (m > 0 && cli_parse_u64(value, 1, &o->seed))
                return usage_error(arg, value, "an integer in 1..18446744073709551615");
        } else if (FLAG("-T", "--threads")) {
            if (m > 0 && cli_parse_int(value, 1, MAX_THREADS, &o->threads))
                return usage_error(arg, value, "an integer in 1..1024");
        } else if (FLAG("--attn", "--attn")) {
            char problem[512];
            if (m > 0 && attention_spec_parse(value, &o->attention, problem, sizeof problem))
                return usage_error(arg, NULL, problem);
        } else if (FLAG("--ref", "--ref")) {
            o->ref_path = value;
        } else if (FLAG("--eval", "--eval")) {
            o->eval_path = value;
        } else if (FLAG("--ctx", "--ctx")) {
            if (m > 0 && cli_parse_int(value, 2, MODEL_MAX_SEQ_LEN, &o->ctx))
                return usage_error(arg, value, "an integer in 2..the model's context");
        } else {
            return usage_error(arg, NULL, "unknown option");
        }
#undef FLAG
        if (m < 0) return usage_error(arg, NULL, "missing value");
    }
    if (!o->model_path) return usage_error("MODEL", NULL, "missing (expected a model path)");
    if (o->prompt && o->prompt_file)
        return usage_error("-f", NULL, "cannot be combined with -i (give one prompt)");
    if (o->ctx && !o->eval_path) return usage_error("--ctx", NULL, "only applies with --eval");
    if (o->ref_path && !o->eval_path)
        return usage_error("--ref", NULL, "only applies with --eval");
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Output that never splits a UTF-8 character                                  */

/* Holds back the bytes of an unfinished UTF-8 sequence until it completes, so a
 * character split across two tokens reaches the terminal in one piece. Invalid
 * bytes are passed through as they are: the output is always exactly the bytes. */
typedef struct {
    unsigned char pending[4];
    int n_pending;   /* bytes held */
    int need;        /* total length of the held sequence */
} Utf8Writer;

/* Length of the sequence a lead byte starts, or 0 if b cannot start one. */
static int utf8_sequence_length(unsigned char b) {
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

static void utf8_flush(Utf8Writer *w) {
    fwrite(w->pending, 1, (size_t)w->n_pending, stdout);
    w->n_pending = 0;
}

static void utf8_write(Utf8Writer *w, const unsigned char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b = bytes[i];
        if (w->n_pending > 0) {
            if ((b & 0xC0) == 0x80) {           /* continuation: hold it */
                w->pending[w->n_pending++] = b;
                if (w->n_pending == w->need) utf8_flush(w);
                continue;
            }
            utf8_flush(w);                       /* broken sequence: pass it through */
        }
        int need = utf8_sequence_length(b);
        if (need == 0) {
            fputc(b, stdout);
        } else {
            w->pending[0] = b;
            w->n_pending = 1;
            w->need = need;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Generation                                                                  */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads a whole file (what: "prompt" or "eval") into a malloc'd buffer; returns NULL
 * after a message. */
static char *read_text_file(const char *path, const char *what, size_t *len) {
    struct stat st;   /* stat first: opening a FIFO would block */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "run: %s: not a regular file (expected a %s file)\n", path, what);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "run: %s: cannot open %s file (%s)\n", path, what, strerror(errno));
        return NULL;
    }
    char *text = malloc(MAX_PROMPT_BYTES + 1);
    size_t got = text ? fread(text, 1, MAX_PROMPT_BYTES + 1, f) : 0;
    int error = ferror(f);
    fclose(f);
    if (!text || error || got > MAX_PROMPT_BYTES) {
        fprintf(stderr, "run: %s: cannot read %s file (%s)\n", path, what,
                !text ? "out of memory" : error ? "read error" : "larger than 16 MiB");
        free(text);
        return NULL;
    }
    *len = got;
    return text;
}

/* Writes token id's bytes, as they read after token prev, through the UTF-8 writer.
 * Llama output follows llama2.c's safe_printf, so that it matches llama2.c byte for
 * byte: a piece of one byte that is neither printable ASCII nor whitespace (a control
 * character, or a lone byte of a byte-fallback character) is not printed. */
static void emit_token(Utf8Writer *w, const Tokenizer *tok, int prev, int id) {
    size_t len;
    const unsigned char *bytes = tokenizer_decode(tok, prev, id, &len);
    if (tok->kind == TOKENIZER_LLAMA && len == 1 && !isprint(bytes[0]) && !isspace(bytes[0]))
        return;
    utf8_write(w, bytes, len);
}

/* Encodes the prompt (or starts from end-of-text) and checks it fits the model.
 * Returns a malloc'd id array with its length in *n, or NULL after a message. */
static int *prompt_tokens(const Options *o, const Tokenizer *tok, const Config *c, int *n) {
    size_t len = 0, n_ids = 0;
    char *file_text = NULL;
    const char *text = o->prompt ? o->prompt : "";
    if (o->prompt_file) {
        if (!(file_text = read_text_file(o->prompt_file, "prompt", &len))) return NULL;
        text = file_text;
    } else {
        len = strlen(text);
    }
    /* BPE never makes more ids than bytes, plus Llama's BOS and dummy-prefix space */
    int *ids = malloc((len + 2) * sizeof(int));
    if (!ids) {
        fprintf(stderr, "run: out of memory for a %zu-byte prompt\n", len);
        goto fail;
    }
    if (tokenizer_encode(tok, text, len, ids, len + 2, &n_ids) != 0) goto fail;
    /* GPT-2 with no prompt starts from end-of-text (Llama's encode already gave BOS) */
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
                    "position %zu, expected 0..%d)\n", ids[t], t, c->vocab_size - 1);
            goto fail;
        }
    }
    if (n_ids > (size_t)c->seq_len) {
        fprintf(stderr, "run: prompt too long for the context (got %zu tokens, expected at "
                "most %d)\n", n_ids, c->seq_len);
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

/* Runs the prompt, then samples up to o->steps tokens, streaming them to stdout. */
static int generate(const Options *o, Model *m, const Tokenizer *tok, Sampler *sampler) {
    const Config *c = &m->config;
    int n_prompt;
    int *ids = prompt_tokens(o, tok, c, &n_prompt);
    if (!ids) return EXIT_BAD_DATA;
    Utf8Writer out = {0};
    /* echo the prompt as its tokens decode, but not a BOS or end-of-text start token */
    int first = (ids[0] == tok->bos_id || ids[0] == tok->eot_id) ? 1 : 0;
    for (int t = first; t < n_prompt; t++) emit_token(&out, tok, t ? ids[t - 1] : -1, ids[t]);
    fflush(stdout);
    /* the attention state only needs the positions this run can reach */
    long reach = (long)n_prompt + o->steps;
    if (model_set_context(m, reach < c->seq_len ? (int)reach : c->seq_len) != 0) goto fail;

    /* prefill: the prompt in chunks; only the last chunk's last row of logits is kept */
    double start = now_seconds();
    float *row = NULL;   /* the next-token logits; the sampler scales them in place */
    for (int pos = 0; pos < n_prompt; pos += m->max_chunk) {
        int n = n_prompt - pos < m->max_chunk ? n_prompt - pos : m->max_chunk;
        if (!(row = model_forward(m, ids + pos, n, pos, 0))) goto fail;
    }
    int pos = n_prompt;   /* the position whose token the logits in row predict */
    if (!kernels_all_finite(row, (size_t)c->vocab_size)) goto non_finite;
    double prompt_seconds = now_seconds() - start;

    /* decode: sample, print, feed back, one token at a time */
    start = now_seconds();
    int generated = 0, status = 0, prev = ids[n_prompt - 1];
    while (generated < o->steps) {
        int next = sampler_sample(sampler, row);
        if (next == tok->eot_id || next == tok->bos_id) break;   /* llama2.c stops at BOS */
        if (next >= tok->vocab_size) {
            fprintf(stderr, "\nrun: model produced token %d, which the tokenizer does not "
                    "have (expected 0..%d)\n", next, tok->vocab_size - 1);
            status = EXIT_BAD_DATA;
            break;
        }
        emit_token(&out, tok, prev, next);
        prev = next;
        fflush(stdout);
        generated++;
        if (generated == o->steps) break;
        if (pos == c->seq_len) {
            utf8_flush(&out);
            fprintf(stderr, "\nrun: context full (%d tokens); stopping\n", c->seq_len);
            break;
        }
        if (!(row = model_forward(m, &next, 1, pos, 0))) goto fail;
        pos++;
        if (!kernels_all_finite(row, (size_t)c->vocab_size)) goto non_finite;
    }
    double gen_seconds = now_seconds() - start;
    utf8_flush(&out);
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "prompt: %d tokens, %.1f tokens/s; generation: %d tokens, %.1f tokens/s; "
            "seed %llu\n", n_prompt, prompt_seconds > 0 ? n_prompt / prompt_seconds : 0.0,
            generated, gen_seconds > 0 ? generated / gen_seconds : 0.0,
            (unsigned long long)o->seed);
    free(ids);
    return status;
non_finite:
    utf8_flush(&out);
    fprintf(stderr, "\nrun: non-finite logits for position %d (expected finite numbers: the "
            "weights hold a NaN or infinity, or the activations overflowed)\n", pos);
fail:
    free(ids);
    return EXIT_BAD_DATA;
}

/* ------------------------------------------------------------------------- */
/* Evaluation (--eval)                                                         */

/* Whether cfg computes exactly what the plain model computes. */
static int is_plain_exact(const AttentionConfig *cfg) {
    return cfg->kind == ATTENTION_EXACT && !cfg->unscaled && !cfg->softmax1 && cfg->tau == 1.0f;
}

/* Tokenises the eval file, runs eval_windows with the variant (and an exact twin of
 * the model for the KL and agreement), and prints one result block on stdout. */
static int evaluate(const Options *o, Model *m, const Tokenizer *tok) {
    const Config *c = &m->config;
    int ctx = o->ctx ? o->ctx : c->seq_len;
    if (ctx > c->seq_len) {
        char value[32];
        snprintf(value, sizeof value, "%d", ctx);
        char expected[64];
        snprintf(expected, sizeof expected, "an integer in 2..%d (this model's context)",
                 c->seq_len);
        return usage_error("--ctx", value, expected);
    }
    size_t len;
    char *text = read_text_file(o->eval_path, "eval", &len);
    if (!text) return EXIT_BAD_DATA;
    int status = EXIT_BAD_DATA;
    Model exact;
    memset(&exact, 0, sizeof exact);
    size_t n_ids = 0;
    int *ids = malloc((len + 2) * sizeof(int));
    if (!ids) {
        fprintf(stderr, "run: out of memory for a %zu-byte eval file\n", len);
        goto done;
    }
    if (tokenizer_encode(tok, text, len, ids, len + 2, &n_ids) != 0) goto done;
    for (size_t t = 0; t < n_ids; t++) {
        if (ids[t] >= c->vocab_size) {
            fprintf(stderr, "run: %s: token id out of range for the model (got %d at position "
                    "%zu, expected 0..%d)\n", o->eval_path, ids[t], t, c->vocab_size - 1);
            goto done;
        }
    }
    int compare = o->ref_path || !is_plain_exact(&o->attention);
    if (compare && model_load(&exact, o->ref_path ? o->ref_path : o->model_path,
                              m->max_chunk) != 0) goto done;
    if (compare && exact.config.vocab_size != c->vocab_size) {
        fprintf(stderr, "run: --ref %s: vocabulary differs from the model's (got %d, expected "
                "%d)\n", o->ref_path, exact.config.vocab_size, c->vocab_size);
        goto done;
    }
    EvalResult r;
    if (eval_windows(m, compare ? &exact : NULL, tok, ids, (long)n_ids, ctx, 1, &r) != 0)
        goto done;
    if (r.tokens == 0) {
        fprintf(stderr, "run: %s: nothing to evaluate (got %zu tokens, expected at least 2)\n",
                o->eval_path, n_ids);
        goto done;
    }
    char spec[ATTENTION_SPEC_MAX];
    attention_spec_format(&o->attention, spec, sizeof spec);
    double nats = r.nll / (double)r.tokens;
    size_t state_bytes = m->attention_layer_bytes * (size_t)c->n_layers;
    printf("eval: %s: %zu bytes, %zu tokens, %d windows of %d (the last %zu tokens), %ld "
           "tokens predicted (%ld bytes)\n", o->eval_path, len, n_ids, r.windows, ctx,
           n_ids % (size_t)ctx ? n_ids % (size_t)ctx : (size_t)ctx, r.tokens, r.bytes);
    printf("attention: %s\n", spec);
    printf("loss: %.6f nats/token, %.6f bits/char, perplexity %.4f\n", nats,
           r.nll / (log(2.0) * (double)r.bytes), exp(nats));
    printf("vs %s: KL %.6f nats/token, top-1 agreement %.4f%%\n",
           o->ref_path ? o->ref_path : "exact", r.kl / (double)r.tokens,
           100.0 * (double)r.agree / (double)r.tokens);
    printf("state: %zu bytes for %d layers at context %d (%.1f bytes/token); speed: %.1f "
           "tokens/s\n", state_bytes, c->n_layers, c->seq_len,
           (double)state_bytes / (double)c->seq_len,
           r.seconds > 0 ? (double)r.tokens / r.seconds : 0.0);
    status = 0;
done:
    model_free(&exact);
    free(ids);
    free(text);
    return status;
}

/* What kernels_run runs: the generation or the evaluation, with the threads as a pool. */
typedef struct {
    const Options *options;
    Model *model;
    const Tokenizer *tokenizer;
    Sampler *sampler;
    int status;
} Job;

static void run_job(void *ctx) {
    Job *job = ctx;
    job->status = job->options->eval_path
                ? evaluate(job->options, job->model, job->tokenizer)
                : generate(job->options, job->model, job->tokenizer, job->sampler);
}

/* The default tokenizer path: tokenizer.bin in the model's folder. */
static void default_tokenizer_path(const char *model_path, char *out, size_t cap) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    snprintf(out, cap, "%.*stokenizer.bin", dir_len, model_path);
}

int main(int argc, char **argv) {
    Options o = {0};
    int parsed = parse_args(argc, argv, &o);
    if (parsed < 0) return 0;           /* --help */
    if (parsed > 0) return parsed;
    if (o.seed == 0) o.seed = (uint64_t)time(NULL) | 1u;   /* nonzero for xorshift */

    char tokenizer_path[4096];
    if (o.tokenizer_path) snprintf(tokenizer_path, sizeof tokenizer_path, "%s", o.tokenizer_path);
    else default_tokenizer_path(o.model_path, tokenizer_path, sizeof tokenizer_path);

    Model model;
    Tokenizer tok;
    Sampler sampler;
    memset(&tok, 0, sizeof tok);
    memset(&sampler, 0, sizeof sampler);
    int status = EXIT_BAD_DATA;
    if (o.threads) kernels_set_threads(o.threads);
    if (model_load(&model, o.model_path, PREFILL_CHUNK) != 0) return EXIT_BAD_DATA;
    const Config *c = &model.config;
    /* a second thread pays only when a token brings enough work to share (measured: the
     * shipped model and s260k decode 15-30 % slower on two threads than on one) */
    if (model_macs_per_token(&model) < RUN_MIN_MACS_FOR_THREADS) kernels_set_threads(1);
    fprintf(stderr, "run: %s: %s; %d layers, width %d, %d heads (%d kv), vocab %d, context %d\n",
            o.model_path, model.format, c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
            c->vocab_size, c->seq_len);
    if (tokenizer_load(&tok, tokenizer_path) != 0) goto done;
    if (c->family == MODEL_GPT2 && tok.vocab_size != c->vocab_size) {
        /* a GPT-2 model and its tokenizer share one vocabulary: any other is not its own */
        fprintf(stderr, "run: %s: tokenizer does not belong to the model (got %d tokens, "
                "expected %d, the model's vocabulary)\n", tokenizer_path, tok.vocab_size,
                c->vocab_size);
        goto done;
    }
    if (tok.vocab_size < c->vocab_size) {
        fprintf(stderr, "run: %s: tokenizer has fewer tokens than the model (got %d, expected "
                "at least %d)\n", tokenizer_path, tok.vocab_size, c->vocab_size);
        goto done;
    }
    if (tok.vocab_size > c->vocab_size)   /* llama2.c reads only the model's first V */
        fprintf(stderr, "run: %s: tokenizer has %d tokens, the model %d: as llama2.c does, only "
                "the first %d are used (prompt ids beyond are refused)\n", tokenizer_path,
                tok.vocab_size, c->vocab_size, c->vocab_size);
    if (model_set_attention(&model, &o.attention) != 0) goto done;
    if (!o.eval_path && sampler_init(&sampler, model.config.vocab_size, o.temperature, o.top_p,
                                     o.top_k, o.seed) != 0) goto done;
    Job job = {&o, &model, &tok, &sampler, EXIT_BAD_DATA};
    kernels_run(run_job, &job);
    status = job.status;
done:
    sampler_free(&sampler);
    tokenizer_free(&tok);
    model_free(&model);
    return status;
}
