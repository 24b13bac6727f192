/* generate.c: generation. A Generation is the sequence in the model's context: tokens
 * are appended, the context shifts when it is full, and the model runs whatever it has
 * not run yet. generate() is the loop on top: echo the prompt, sample and stream tokens,
 * stop at -n, end-of-text or a reverse prompt, and in interactive mode read a line and
 * go on. It prints the text (stdout); run.c prints what was loaded and the speed.
 *
 * Legend: n_ctx the context size (positions).
 */
#include "generate.h"

#include <stdlib.h>     /* malloc, free */
#include <string.h>     /* memcpy, memmove, memcmp */
#include <unistd.h>     /* isatty (POSIX): a message after text on the same terminal */

#include "kernels.h"    /* kernels_all_finite */
#include "os.h"         /* os_seconds: the speed line */
#include "unicode.h"    /* unicode_utf8_length: a character is written whole */

#define GENERATE_MAX_LINE (1 << 20)   /* interactive: longest input line, bytes */

/* ------------------------------------------------------------------------- */
/* The sequence in the context                                                 */

int generation_init(Generation *g, Model *m, int n_ctx, int n_alloc, int keep, int shift) {
    memset(g, 0, sizeof *g);
    if (keep < 0 || keep >= n_ctx) {
        fprintf(stderr, "generate: tokens to keep out of range (got %d, expected 0..%d, less "
                "than the context)\n", keep, n_ctx - 1);
        return -1;
    }
    if (n_alloc < 1 || n_alloc > n_ctx) {
        fprintf(stderr, "generate: positions to allocate out of range (got %d, expected "
                "1..%d)\n", n_alloc, n_ctx);
        return -1;
    }
    if (model_set_context(m, n_alloc) != 0) return -1;
    g->tokens = malloc((size_t)n_ctx * sizeof(int));
    if (!g->tokens) {
        fprintf(stderr, "generate: out of memory for a context of %d tokens\n", n_ctx);
        return -1;
    }
    g->model = m;
    g->n_ctx = n_ctx;
    g->n_alloc = n_alloc;
    g->keep = keep;
    g->shift = shift;
    return 0;
}

void generation_free(Generation *g) {
    free(g->tokens);
    g->tokens = NULL;
}

/* Starts a message on stderr where the text on stdout may have stopped mid-line on the same
 * terminal: a line break first, so the message is a line of its own (elsewhere, none). */
static void message_start(void) {
    if (isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)) fputc('\n', stderr);
}

/* Drops the older half of the tokens after the first `keep` (at least one token), so
 * that the rest must be run again from position 0. */
static void shift_context(Generation *g) {
    int rest = g->n_tokens - g->keep;
    int drop = rest / 2 > 0 ? rest / 2 : 1;
    memmove(g->tokens + g->keep, g->tokens + g->keep + drop,
            (size_t)(rest - drop) * sizeof(int));
    g->n_tokens -= drop;
    /* the prompt's tokens at positions keep .. keep+drop-1 go with the rest */
    if (g->n_prompt > g->keep)
        g->n_prompt = g->n_prompt - drop > g->keep ? g->n_prompt - drop : g->keep;
    g->n_run = 0;
    g->stats.shifts++;
}

static int run_pending(Generation *g);

/* Doubles the attention state (up to n_ctx) until it holds `need` positions, and runs the
 * tokens again from position 0, unless a shift will (need > n_ctx). Where memory for the
 * larger state cannot be had, the context stays at its size from then on (n_ctx lowered
 * to it, after a stderr line), and shifts or fills as a context of that size would.
 * Returns 0, or -1 after a stderr line (not even the old size could be had again). */
static int grow_state(Generation *g, int need) {
    int n = g->n_alloc;
    while (n < need && n < g->n_ctx) n = n > g->n_ctx / 2 ? g->n_ctx : 2 * n;
    double start = os_seconds();
    int grown = model_set_context(g->model, n) == 0;
    if (!grown) {
        if (model_set_context(g->model, g->n_alloc) != 0) {
            message_start();
            fprintf(stderr, "generate: out of memory for the context's %d positions\n",
                    g->n_alloc);
            return -1;
        }
        message_start();
        fprintf(stderr, "generate: no memory to grow the context to %d positions: it stays "
                "at %d from here (-c %d sets that from the start)\n", n, g->n_alloc,
                g->n_alloc);
        n = g->n_ctx = g->n_alloc;
        if (g->keep > g->n_ctx - 1) g->keep = g->n_ctx - 1;
    }
    g->n_alloc = n;
    g->n_run = 0;
    g->stats.grows += grown;
    if (g->n_tokens > 0 && need <= g->n_ctx) {
        if (run_pending(g) != 0) return -1;
        g->stats.grow_tokens += g->n_tokens;
    }
    g->stats.grow_seconds += os_seconds() - start;
    return 0;
}

/* Runs tokens n_run .. n_tokens-1 in chunks of at most m->max_chunk (run.c's PREFILL_CHUNK,
 * 256, or fewer where the attention state holds fewer positions); g->logits gets the last
 * one's logits. */
static int run_pending(Generation *g) {
    Model *m = g->model;
    while (g->n_run < g->n_tokens) {
        int n = g->n_tokens - g->n_run < m->max_chunk ? g->n_tokens - g->n_run : m->max_chunk;
        if (!(g->logits = model_forward(m, g->tokens + g->n_run, n, g->n_run, 0))) return -1;
        g->n_run += n;
    }
    if (!kernels_all_finite(g->logits, (size_t)m->config.vocab_size)) {
        fprintf(stderr, "generate: non-finite logits for position %d (expected finite numbers: "
                "the weights hold a NaN or infinity, or the activations overflowed)\n",
                g->n_run);
        return -1;
    }
    return 0;
}

int generation_append(Generation *g, const int *ids, int n, int input) {
    if (!g->shift && g->n_tokens + n > g->n_ctx) return GENERATE_FULL;
    if (g->n_tokens + n > g->n_alloc && g->n_alloc < g->n_ctx &&
        grow_state(g, g->n_tokens + n) != 0) return -1;
    if (!g->shift && g->n_tokens + n > g->n_ctx) {   /* it could not grow: run what it holds */
        if (run_pending(g) != 0) return -1;
        return GENERATE_FULL;
    }
    int first = g->n_tokens, lost = 0;   /* where ids[0] is, and how many of ids shifted out */
    for (int i = 0; i < n; i++) {
        if (g->n_tokens == g->n_ctx) {
            /* the shift drops positions keep .. end-1: those of ids among them are lost,
             * and ids[0] moves down by drop (to keep if it went; not at all if kept) */
            int before = g->n_tokens;
            shift_context(g);
            int drop = before - g->n_tokens, end = g->keep + drop;
            int from = first > g->keep ? first : g->keep;   /* ids' first dropped position */
            if (end > from) lost += end - from;
            if (first >= end) first -= drop;
            else if (first > g->keep) first = g->keep;
        }
        if (input && g->n_prompt == g->n_tokens) g->n_prompt++;   /* no generated token yet */
        g->tokens[g->n_tokens++] = ids[i];
    }
    if (input && lost > 0) {   /* the context shifted part of the input itself away */
        message_start();
        fprintf(stderr, "generate: the context of %d positions (%d kept at its start) "
                "shifted out %d of the input's %d tokens: the model holds the rest (-c sets a "
                "larger context)\n", g->n_ctx, g->keep, lost, n);
    }
    /* tokens run now: the n - lost new ones, and the kept ones again if a shift reset
     * n_run */
    int new_tokens = g->n_tokens - g->n_run < n - lost ? g->n_tokens - g->n_run : n - lost;
    int rerun = g->n_tokens - g->n_run - new_tokens;
    double start = os_seconds();
    if (run_pending(g) != 0) return -1;
    double seconds = os_seconds() - start;
    g->stats.rerun_tokens += rerun;
    /* after a shift the kept tokens run again too: an input's own share of the time is its
     * tokens' share of those run (a generated token's goes to the shift: one in many) */
    double own = rerun == 0 ? seconds
               : input ? seconds * (double)new_tokens / (double)(new_tokens + rerun) : 0.0;
    g->stats.shift_seconds += seconds - own;
    if (input) g->stats.input_seconds += own;
    if (input) g->stats.input_tokens += n - lost;   /* those shifted out never ran */
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Output that never splits a UTF-8 character                                  */

/* Holds back the bytes of an unfinished UTF-8 sequence until it completes, so a
 * character split across two tokens reaches the terminal in one piece. Invalid
 * bytes are passed through as they are: the output is always exactly the bytes. */
typedef struct {
    unsigned char held[4];
    int n_held;      /* bytes held */
    int need;        /* total length of the held sequence */
} Utf8Writer;

static void utf8_flush(Utf8Writer *w) {
    fwrite(w->held, 1, (size_t)w->n_held, stdout);
    w->n_held = 0;
}

static void utf8_write(Utf8Writer *w, const unsigned char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b = bytes[i];
        if (w->n_held > 0) {
            if ((b & 0xC0) == 0x80) {           /* continuation: hold it */
                w->held[w->n_held++] = b;
                if (w->n_held == w->need) utf8_flush(w);
                continue;
            }
            utf8_flush(w);                       /* broken sequence: pass it through */
        }
        int need = unicode_utf8_length(b);
        if (need <= 1) {                         /* ASCII, or a byte that starts nothing */
            fputc(b, stdout);
        } else {
            w->held[0] = b;
            w->n_held = 1;
            w->need = need;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* The reverse prompts: does the output end with one of them?                 */

#define REVERSE_SLACK 2   /* bytes a match may end before the output, without -I */

typedef struct {
    const char *const *texts;   /* (n,) the reverse prompts */
    int n;
    size_t slack;               /* a match may end this many bytes before the output does */
    size_t len;                 /* the longest one's length, plus the slack (0: none) */
    unsigned char *tail;        /* (len,) the last len bytes printed; owned */
    size_t n_tail;
} ReverseMatch;

/* Feeds printed bytes; returns 1 if the output now ends with a reverse prompt, or with
 * one and at most r->slack bytes after it. */
static int reverse_feed(ReverseMatch *r, const unsigned char *bytes, size_t n) {
    if (r->len == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        if (r->n_tail == r->len) memmove(r->tail, r->tail + 1, --r->n_tail);
        r->tail[r->n_tail++] = bytes[i];
    }
    for (int k = 0; k < r->n; k++) {
        size_t len = strlen(r->texts[k]);
        for (size_t after = 0; after <= r->slack && after + len <= r->n_tail; after++)
            if (memcmp(r->tail + r->n_tail - after - len, r->texts[k], len) == 0) return 1;
    }
    return 0;
}

/* The bytes token id adds to the text the reverse prompts are matched against, after
 * token prev: its text (tokenizer_decode), as llama.cpp's match reads it, even where the
 * screen shows nothing (a lone byte of a character the vocabulary spells in byte tokens,
 * which tokenizer_printed hides as safe_printf does: -r with that character, or a prompt
 * ending with it, must still match); nothing for a silent token (a GGUF file's <s>, <unk>),
 * whose text llama.cpp's match does not see either. */
static const unsigned char *reverse_bytes(const Tokenizer *tok, int prev, int id, size_t *len) {
    const unsigned char *bytes = tokenizer_decode(tok, prev, id, len);
    if (tok->silent && tok->silent[id]) *len = 0;
    return bytes;
}

/* ------------------------------------------------------------------------- */
/* The loop                                                                    */

/* Reads one line (up to and including '\n', NUL bytes kept) from f into a malloc'd
 * buffer; returns its length, 0 at end of input, -1 after a message. */
static long read_line(FILE *f, char **line) {
    size_t cap = 256, n = 0;
    char *buffer = malloc(cap);
    if (!buffer) goto out_of_memory;
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (n == GENERATE_MAX_LINE && c != '\n') {   /* the newline is not the line's */
            fprintf(stderr, "generate: input line too long (expected at most %d bytes)\n",
                    GENERATE_MAX_LINE);
            free(buffer);
            return -1;
        }
        if (n == cap) {
            char *bigger = realloc(buffer, cap * 2);
            if (!bigger) goto out_of_memory;
            buffer = bigger;
            cap *= 2;
        }
        buffer[n++] = (char)c;
        if (c == '\n') break;
    }
    if (ferror(f)) {
        fprintf(stderr, "generate: cannot read the input (read error)\n");
        free(buffer);
        return -1;
    }
    *line = buffer;
    return (long)n;
out_of_memory:
    fprintf(stderr, "generate: out of memory for an input line\n");
    free(buffer);
    return -1;
}

/* Encodes a line of input to continue the sequence (no BOS, no dummy-prefix space: the
 * ids spell the text exactly, as the screen shows it). Returns the count, or -1 after a
 * message. */
static int encode_input(const Tokenizer *tok, int vocab_size, const char *text, size_t len,
                        int **ids) {
    size_t n = 0;
    *ids = malloc((len + 1) * sizeof(int));
    if (!*ids) {
        fprintf(stderr, "generate: out of memory for a %zu-byte input line\n", len);
        return -1;
    }
    if (tokenizer_encode_continuation(tok, text, len, *ids, len + 1, &n) != 0) return -1;
    for (size_t t = 0; t < n; t++) {
        if ((*ids)[t] >= vocab_size) {
            fprintf(stderr, "generate: input token id out of range for the model (got %d, "
                    "expected 0..%d)\n", (*ids)[t], vocab_size - 1);
            return -1;
        }
    }
    return (int)n;
}

/* What generate() carries from one step to the next; the buffers are owned. */
typedef struct {
    Generation *g;                 /* the sequence; not owned */
    const Tokenizer *tok;          /* not owned */
    Sampler *sampler;              /* not owned */
    const GenerateOptions *o;      /* not owned */
    Utf8Writer out;                /* stdout, never splitting a character */
    ReverseMatch reverse;          /* -r: does the output end with it? */
    char *line;                    /* the last line of input read (interactive) */
    char *text;                    /* "\n" and that line: what the model reads */
    int *line_ids;                 /* its tokens */
    int prev;                      /* the last token of the sequence, which decoding follows;
                                    * -1 after a BOS that keeps the next token's space */
    int unrun;                     /* the token that ended a turn, printed but not run; or -1 */
} GenerateLoop;

/* How a step of the loop ended, and so what comes next. */
typedef enum {
    STEP_ERROR = -1,   /* stop, failed: a stderr line said why */
    STEP_CONTINUE,     /* go on: another turn */
    STEP_FULL,         /* stop: the context is full and shifting is off */
    STEP_END,          /* stop: -n reached (not interactive), the end of input, stdout closed */
} GenerateStep;

/* An empty loop for options o, with its buffer allocated (the reverse prompts' tail).
 * Returns 0, or -1 when out of memory (loop_free releases what was allocated). */
static int loop_init(GenerateLoop *loop, Generation *g, const Tokenizer *tok, Sampler *sampler,
                     const GenerateOptions *o) {
    memset(loop, 0, sizeof *loop);
    loop->g = g;
    loop->tok = tok;
    loop->sampler = sampler;
    loop->o = o;
    loop->reverse.texts = o->reverse_prompts;
    loop->reverse.n = o->n_reverse;
    /* without -I, llama.cpp's slack: a token may print a few bytes past the prompt */
    loop->reverse.slack = o->interactive ? 0 : REVERSE_SLACK;
    for (int k = 0; k < o->n_reverse; k++)
        if (strlen(o->reverse_prompts[k]) + loop->reverse.slack > loop->reverse.len)
            loop->reverse.len = strlen(o->reverse_prompts[k]) + loop->reverse.slack;
    loop->unrun = -1;
    if (loop->reverse.len && !(loop->reverse.tail = malloc(loop->reverse.len))) return -1;
    return 0;
}

static void loop_free(GenerateLoop *loop) {
    free(loop->reverse.tail);
    free(loop->line);
    free(loop->text);
    free(loop->line_ids);
    memset(loop, 0, sizeof *loop);
}

/* Echoes the prompt as its tokens decode, but not a BOS or end-of-text start token
 * (nothing when quiet: a watcher that names the tokens itself), and feeds it to the
 * reverse prompts' match. A BOS later in the prompt (a GGUF prompt's "<s>") is followed as
 * a generated one is (sample_turn): the next token keeps its space. Returns 1 if the
 * prompt ends with a reverse prompt: as in llama.cpp, whose match reads the prompt too,
 * the first turn then ends at once. */
static int echo_prompt(GenerateLoop *loop, const int *prompt, int n_prompt) {
    int first = (prompt[0] == loop->tok->bos_id || prompt[0] == loop->tok->eot_id) ? 1 : 0;
    int matched = 0;
    for (int t = first; t < n_prompt; t++) {
        size_t len;
        int prev = t == 0 || (t > first && prompt[t - 1] == loop->tok->bos_id) ? -1 : prompt[t - 1];
        const unsigned char *bytes = tokenizer_printed(loop->tok, prev, prompt[t], &len);
        if (!loop->o->quiet) utf8_write(&loop->out, bytes, len);
        bytes = reverse_bytes(loop->tok, prev, prompt[t], &len);   /* -r reads it all */
        matched = reverse_feed(&loop->reverse, bytes, len);   /* the text so far ends with it */
    }
    fflush(stdout);
    return matched;
}

/* One turn: sample, print and run tokens until -n tokens, an end token (tokenizer_ends:
 * end-of-text, Llama's BOS where tok->stop_at_bos, a GGUF file's <|im_end|> and the like),
 * a reverse prompt, or a closed stdout. The token that
 * ends a turn by -n or a reverse prompt is not run (nobody may read on): in interactive
 * mode it becomes loop->unrun, run before the next input. The turn's time, less its
 * context shifts' and growths', adds to generate_seconds. Returns STEP_CONTINUE,
 * STEP_FULL, or STEP_ERROR after a stderr line (a token the tokenizer lacks, a model
 * failure). */
static GenerateStep sample_turn(GenerateLoop *loop) {
    Generation *g = loop->g;
    const Tokenizer *tok = loop->tok;
    const GenerateOptions *o = loop->o;
    double start = os_seconds(), rerun_seconds = g->stats.shift_seconds + g->stats.grow_seconds;
    int appended = 0;   /* generation_append's last result */
    loop->unrun = -1;
    for (int step = 0; step < o->steps; step++) {
        int next = sampler_sample(loop->sampler, g->logits);
        if (next >= tok->vocab_size) {
            utf8_flush(&loop->out);
            message_start();
            fprintf(stderr, "generate: model produced token %d, which the tokenizer "
                    "does not have (expected 0..%d)\n", next, tok->vocab_size - 1);
            return STEP_ERROR;
        }
        if (tokenizer_ends(tok, next)) break;
        if (o->watch && o->watch(o->watch_ctx, g, next) != 0) return STEP_ERROR;
        size_t len;
        const unsigned char *bytes = tokenizer_printed(tok, loop->prev, next, &len);
        if (!o->quiet) utf8_write(&loop->out, bytes, len);
        size_t text_len;   /* what -r matches: the token's text, shown or not */
        const unsigned char *text = reverse_bytes(tok, loop->prev, next, &text_len);
        fflush(stdout);
        if (ferror(stdout)) break;   /* nobody reads on (a closed pipe): run reports it */
        /* a BOS the model writes (a GGUF vocabulary runs it on: stop_at_bos 0) takes no
         * space from the next token, which llama.cpp prints whole; only the text's first
         * token after its BOS loses its space (llama2.c's decode) */
        loop->prev = next == tok->bos_id ? -1 : next;
        g->stats.generated++;
        int stop = reverse_feed(&loop->reverse, text, text_len) || step + 1 == o->steps;
        if (stop && !o->interactive) break;   /* no need to run a token nobody reads */
        if (stop) {
            loop->unrun = next;
            break;
        }
        appended = generation_append(g, &next, 1, 0);
        if (appended != 0) break;
    }
    /* the turn's time, less its shifts' and growths' */
    g->stats.generate_seconds += os_seconds() - start - (g->stats.shift_seconds +
                                                         g->stats.grow_seconds - rerun_seconds);
    if (appended < 0) return STEP_ERROR;
    return appended == GENERATE_FULL ? STEP_FULL : STEP_CONTINUE;
}

/* The text a line of input (len bytes) continues the sequence with, into loop->text: a
 * newline, which ends the turn's text on the screen, then the line. Returns its length,
 * or -1 after a message. */
static long input_text(GenerateLoop *loop, const char *line, long len) {
    free(loop->text);
    if (!(loop->text = malloc((size_t)len + 1))) {
        fprintf(stderr, "generate: out of memory for an input line\n");
        return -1;
    }
    loop->text[0] = '\n';
    memcpy(loop->text + 1, line, (size_t)len);
    return len + 1;
}

/* Interactive mode, between turns: reads the next line of input and appends it, after a
 * newline (input_text), to the sequence, after the token that ended the turn
 * (loop->unrun). Once appended, the text goes to stdout unless the terminal that typed it
 * is stdout too (which showed "\n> " and echoed it), so that the screen, or the file, shows
 * what the model read, and only that. Returns STEP_CONTINUE, STEP_END at the end of input,
 * STEP_FULL, or STEP_ERROR after a stderr line. */
static GenerateStep continue_with_input(GenerateLoop *loop) {
    Generation *g = loop->g;
    utf8_flush(&loop->out);
    if (loop->o->prompt_to) fputs("\n> ", loop->o->prompt_to);
    fflush(stdout);
    free(loop->line);
    loop->line = NULL;
    long got = read_line(loop->o->input, &loop->line);
    if (got < 0) return STEP_ERROR;
    if (got == 0 && loop->o->prompt_to && loop->o->prompt_to != stdout)
        fputc('\n', loop->o->prompt_to);   /* "> " ends its line before the speed line */
    if (got == 0) return STEP_END;
    long len = input_text(loop, loop->line, got);
    if (len < 0) return STEP_ERROR;
    free(loop->line_ids);
    loop->line_ids = NULL;
    int n = encode_input(loop->tok, g->model->config.vocab_size, loop->text, (size_t)len,
                         &loop->line_ids);
    if (n < 0) return STEP_ERROR;
    int appended = 0;
    if (loop->unrun >= 0) appended = generation_append(g, &loop->unrun, 1, 0);
    if (appended == 0 && n > 0) {
        appended = generation_append(g, loop->line_ids, n, 1);
        if (appended == 0) loop->prev = loop->line_ids[n - 1];
    }
    if (appended < 0) return STEP_ERROR;
    if (appended == GENERATE_FULL) return STEP_FULL;   /* the line was not read: not shown */
    /* the text now ends with the line, not with the reverse prompt that ended the turn */
    reverse_feed(&loop->reverse, (const unsigned char *)loop->text, (size_t)len);
    if (!loop->o->line_shown && !loop->o->quiet)
        utf8_write(&loop->out, (const unsigned char *)loop->text, (size_t)len);
    return STEP_CONTINUE;
}

int generate(Generation *g, const Tokenizer *tok, Sampler *sampler, const GenerateOptions *o,
             const int *prompt, int n_prompt) {
    GenerateLoop loop;
    GenerateStep step = STEP_ERROR;
    if (loop_init(&loop, g, tok, sampler, o) != 0) {
        fprintf(stderr, "generate: out of memory\n");
        goto done;
    }
    int prompt_ends_turn = echo_prompt(&loop, prompt, n_prompt);
    /* a prompt that ends with an end token (a GGUF prompt's "</s>"; not a lone start
     * token) has ended its turn, as llama-cli's does */
    if (n_prompt > 1 && tokenizer_ends(tok, prompt[n_prompt - 1])) prompt_ends_turn = 1;
    /* the prompt's forward pass (model_forward, in chunks): its last logits come back */
    if (generation_append(g, prompt, n_prompt, 1) != 0) goto done;
    /* a BOS that ends a longer prompt (a GGUF prompt's "<s>") is followed as echo_prompt
     * follows a later BOS: the first sampled token keeps its space */
    loop.prev = n_prompt > 1 && prompt[n_prompt - 1] == tok->bos_id ? -1 : prompt[n_prompt - 1];
    /* turns, each followed in interactive mode by a line of input */
    do {
        step = prompt_ends_turn ? STEP_CONTINUE : sample_turn(&loop);
        prompt_ends_turn = 0;
        if (step == STEP_CONTINUE)
            step = o->interactive && !ferror(stdout) ? continue_with_input(&loop) : STEP_END;
    } while (step == STEP_CONTINUE);
    if (step == STEP_FULL) {
        utf8_flush(&loop.out);
        message_start();
        fprintf(stderr, "generate: context full (%d tokens); stopping\n", g->n_ctx);
    }
done:
    utf8_flush(&loop.out);
    if (!o->quiet) printf("\n");
    fflush(stdout);
    loop_free(&loop);
    return step == STEP_ERROR ? 1 : 0;
}
