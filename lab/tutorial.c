/* tutorial.c: the `tutorial` program, every number of docs/tutorial.md from the engine's
 * own code.
 *
 * `./tutorial STEP [ARGS]` prints one chapter's worked example: it sets up the hand-made
 * inputs (or loads the shipped model, weights/), calls the functions the engine runs
 * (tokenizer.c, kernels.c, attention.c, block.c, model.c, sampler.c, the trainer's
 * cross-entropy) and prints what they return. It computes nothing of its own beyond
 * what a learner would do with a calculator (a sum, a logarithm), so the text's numbers
 * are the code's numbers: tests/tutorial_check.sh runs each command the tutorial shows
 * and compares the output with the text. `./tutorial svg NAME` draws the tutorial's
 * pictures (lab/tutorial_figures.c). Commands run from the repository's top folder.
 *
 * Read docs/tutorial.md beside it; each function below is one of its steps, in order.
 */
#include "tutorial.h"

#include <errno.h>        /* errno, ENOENT */
#include <math.h>         /* sqrtf, logf, expf, fabsf, cosf, sinf, powf, NAN */
#include <stdio.h>        /* printf, fprintf */
#include <stdlib.h>       /* calloc, malloc, free */
#include <string.h>       /* strcmp, strlen, memcpy, memset */
#include <unistd.h>       /* access (POSIX) */

#include "attention.h"    /* attention_forward, attention_weights, attention_step */
#include "block.h"        /* block_qkv, block_finish, block_norm, block_matmul, backward */
#include "cli.h"          /* cli_parse_float, cli_parse_int, cli_printable, cli_stdout_ok */
#include "kernels.h"      /* kernels_layernorm, kernels_rmsnorm, kernels_gelu, ... */
#include "model.h"        /* model_load, model_forward, MODEL_ROPE_BASE */
#include "os.h"           /* os_program_start */
#include "sampler.h"      /* sampler_init, sampler_sample */
#include "tokenizer.h"    /* tokenizer_load, tokenizer_encode, tokenizer_merge, ... */
#include "train_backward.h"  /* train_crossentropy_backward */
#include "train_model.h"  /* train_crossentropy_forward */

#define TUTORIAL_MODEL "weights/model.bin"          /* the shipped model ... */
#define TUTORIAL_TOKENIZER "weights/tokenizer.bin"  /* ... and its tokenizer */

/* ------------------------------------------------------------------------- */
/* Printing                                                                    */

/* Prints v with `decimals` decimals, never as "-0.0000". */
void tutorial_print_number(float v, int decimals) {
    float half = 0.5f * powf(10.0f, (float)-decimals);
    if (fabsf(v) < half) v = 0.0f;
    printf("%.*f", decimals, (double)v);
}

/* Prints v as tutorial_print_number does, right-aligned in `width` characters. */
static void print_padded(float v, int decimals, int width) {
    float half = 0.5f * powf(10.0f, (float)-decimals);
    printf("%*.*f", width, decimals, fabsf(v) < half ? 0.0 : (double)v);
}

/* Prints "label [a, b, c]" and a newline, each number with `decimals` decimals. */
static void print_vector(const char *label, const float *x, int n, int decimals) {
    printf("%s[", label);
    for (int i = 0; i < n; i++) {
        if (i) printf(", ");
        tutorial_print_number(x[i], decimals);
    }
    printf("]\n");
}

/* Prints a token's bytes between double quotes, a newline as \n. */
static void print_piece(const Tokenizer *t, int id) {
    size_t len;
    const unsigned char *b = tokenizer_decode(t, -1, id, &len);
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        if (b[i] == '\n') printf("\\n");
        else if (b[i] < 32 || b[i] >= 127) printf("\\x%02x", b[i]);
        else putchar(b[i]);
    }
    putchar('"');
}

/* Prints n bytes of the user's text: a newline as \n, other control bytes and UTF-8's C1
 * controls U+0080..U+009F (0xc2 0x80..0x9f, as cli_printable) as \xHH (no terminal escape
 * reaches the screen), the rest (UTF-8 included) as they are. */
static void print_user_bytes(const char *text, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        unsigned char next = i + 1 < n ? (unsigned char)text[i + 1] : 0;
        if (c == '\n') printf("\\n");
        else if (c < 32 || c == 127) printf("\\x%02x", c);
        else if (c != 0xc2 || next < 0x80 || next > 0x9f) putchar(c);
        else {   /* a C1 control: both its bytes shown */
            printf("\\xc2\\x%02x", next);
            i++;
        }
    }
}

/* Prints "text: "TEXT" (N tokens)" and a newline (print_user_bytes): the input of a step
 * that runs the shipped model, so the reader sees what the numbers are about. */
static void print_text(const char *text, int n_tokens) {
    printf("text: \"");
    print_user_bytes(text, strlen(text));
    printf("\" (%d tokens)\n", n_tokens);
}

/* ------------------------------------------------------------------------- */
/* The shipped model and tokenizer                                             */

int tutorial_load_tokenizer(Tokenizer *t) {
    if (access(TUTORIAL_TOKENIZER, F_OK) != 0 && errno == ENOENT) {   /* another folder */
        fprintf(stderr, "tutorial: %s: not found (expected ./tutorial run in the repository's "
                "top folder, which holds weights/)\n", TUTORIAL_TOKENIZER);
        return -1;
    }
    if (tokenizer_load(t, TUTORIAL_TOKENIZER) != 0) return -1;
    if (t->kind == TOKENIZER_GPT2) return 0;
    fprintf(stderr, "tutorial: %s: the steps read the shipped kind of tokenizer (got llama2.c's "
            "tokenizer file, expected llm.c's GPT-2 tokenizer file, as ./train writes)\n",
            TUTORIAL_TOKENIZER);
    tokenizer_free(t);
    return -1;
}

/* Encodes text (len bytes) into ids (TUTORIAL_MAX_TOKENS,); returns the count, or -1
 * after one stderr line (more tokens than that, or out of memory). The shipped
 * tokenizer's byte-level BPE makes at most a token per byte: room for all of them first,
 * so that a long text is told its count. */
static int encode(const Tokenizer *t, const char *text, size_t len, int *ids) {
    size_t n = 0, cap = len + 1;
    int *all = malloc(cap * sizeof *all);
    if (!all) {
        fprintf(stderr, "tutorial: out of memory for the tokens of %zu bytes\n", len);
        return -1;
    }
    int rc = tokenizer_encode(t, text, len, all, cap, &n);   /* it says why if it fails */
    if (rc == 0 && n > TUTORIAL_MAX_TOKENS) {
        fprintf(stderr, "tutorial: the text must be at most %d tokens (got %zu)\n",
                TUTORIAL_MAX_TOKENS, n);
        rc = -1;
    }
    if (rc == 0) memcpy(ids, all, n * sizeof *ids);
    free(all);
    return rc == 0 ? (int)n : -1;
}

/* Loads the shipped model (chunks of up to max_chunk tokens) and tokenizer and encodes
 * text into ids; returns the token count, or -1 with both freed. */
static int load_model(Model *m, Tokenizer *t, int max_chunk, const char *text, int *ids) {
    if (tutorial_load_tokenizer(t) != 0) return -1;
    if (model_load(m, TUTORIAL_MODEL, max_chunk, 0) != 0) {
        tokenizer_free(t);
        return -1;
    }
    if (m->config.family != MODEL_GPT2 || t->vocab_size != m->config.vocab_size) {
        /* the same ids would mean other text, or rows the model does not have */
        fprintf(stderr, "tutorial: %s: tokenizer does not belong to %s (got a GPT-2 tokenizer "
                "of %d tokens, expected the model's: %s of %d)\n", TUTORIAL_TOKENIZER,
                TUTORIAL_MODEL, t->vocab_size, m->config.family == MODEL_GPT2 ? "a GPT-2 model"
                : "a Llama-family model", m->config.vocab_size);
        model_free(m);
        tokenizer_free(t);
        return -1;
    }
    int n = encode(t, text, strlen(text), ids);
    if (n >= 1 && n <= m->max_ctx) return n;
    if (n >= 0)   /* n < 0: encode said why */
        fprintf(stderr, "tutorial: the text must be 1 to %d tokens (got %d)\n", m->max_ctx, n);
    model_free(m);
    tokenizer_free(t);
    return -1;
}

/* 1 if m is of the shipped model's kind, which embed and tutorial_lens write out by hand:
 * GPT-2's block, learned positions, no int8 matrix (whose products want scratch the lens
 * does not keep); else 0 after a stderr line. */
static int shipped_kind(const Model *m) {
    const Weights *w = &m->checkpoint.weights;
    int int8 = w->token_embedding.q8.q || w->classifier.q8.q;
    for (int l = 0; l < m->config.n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        int8 |= lw->wq.q8.q || lw->wk.q8.q || lw->wv.q8.q || lw->wo.q8.q || lw->w_up.q8.q ||
                lw->w_down.q8.q;
    }
    if (m->config.family == MODEL_GPT2 && w->pos_embedding && w->token_embedding.f32 && !int8)
        return 1;
    fprintf(stderr, "tutorial: %s: this step writes out the shipped kind of model (got %s, "
            "expected GPT-2's block with learned positions in fp32, as ./train writes)\n",
            TUTORIAL_MODEL, m->config.family != MODEL_GPT2 ? "a Llama-family model"
                            : !w->pos_embedding ? "rotary positions" : "int8 matrices");
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 1. Tokens                                                                   */

/* tokens [TEXT]: the pieces of GPT-2's pre-tokenizer, then each piece's token ids. */
static int step_tokens(int argc, char **argv) {
    const char *text = argc > 0 ? argv[0] : "But soft, what light";
    Tokenizer t;
    if (tutorial_load_tokenizer(&t) != 0) return 1;
    size_t len = strlen(text), total = 0;
    int all[TUTORIAL_MAX_TOKENS];
    if (encode(&t, text, len, all) < 0) {   /* the whole text within the limit, first */
        tokenizer_free(&t);
        return 1;
    }
    printf("text: \"");
    print_user_bytes(text, len);
    printf("\" (%zu bytes)\n", len);
    for (size_t start = 0; start < len;) {
        size_t end = tokenizer_next_piece(text, len, start);
        int ids[TUTORIAL_MAX_TOKENS], n = encode(&t, text + start, end - start, ids);
        if (n < 0) {
            tokenizer_free(&t);
            return 1;
        }
        printf("piece \"");
        print_user_bytes(text + start, end - start);
        printf("\" ->");
        for (int i = 0; i < n; i++) {
            printf(" %d ", ids[i]);
            print_piece(&t, ids[i]);
        }
        printf("\n");
        total += (size_t)n;
        start = end;
    }
    printf("%zu bytes, %zu tokens\n", len, total);
    tokenizer_free(&t);
    return 0;
}

/* A vocabulary cut at id `limit`: the tokenizer's ids 0 .. limit, no end-of-text. */
typedef struct {
    const Tokenizer *t;
    int limit;
} CutVocab;

/* TokenizerFind over a CutVocab: a linear search, fine for a word. */
static int find_cut(const void *vocab, const unsigned char *bytes, size_t len) {
    const CutVocab *cv = vocab;
    for (int id = 0; id <= cv->limit; id++) {
        size_t n;
        const unsigned char *b = tokenizer_decode(cv->t, -1, id, &n);
        if (id != cv->t->eot_id && n == len && memcmp(b, bytes, len) == 0) return id;
    }
    return -1;
}

int tutorial_merges(const Tokenizer *t, const char *word, TutorialMergeRow *rows,
                    int max_rows) {
    size_t n = strlen(word);
    if (n == 0 || n > TUTORIAL_MAX_WORD) {
        fprintf(stderr, "tutorial: merges: a word of 1 to %d bytes, please\n",
                TUTORIAL_MAX_WORD);
        return -1;
    }
    CutVocab cv = {t, 255};
    TokenizerMergeRules rules = {find_cut, &cv, NULL, 0, 0, NULL};
    int32_t starts[TUTORIAL_MAX_WORD];
    int rows_done = 0;
    for (; cv.limit < t->vocab_size && rows_done < max_rows; cv.limit++) {
        TutorialMergeRow *row = &rows[rows_done];
        long count = tokenizer_merge(&rules, (const unsigned char *)word, n, row->ids, starts);
        if (count < 0) break;
        if (rows_done > 0 && count == rows[rows_done - 1].count) continue;
        row->id = rows_done > 0 ? cv.limit : -1;
        row->count = (int)count;
        rows_done++;
        if (count == 1) break;   /* one token: no merge changes it */
    }
    return rows_done;
}

/* merges [WORD]: the merges of WORD (tutorial_merges), one line each. */
static int step_merges(int argc, char **argv) {
    const char *word = argc > 0 ? argv[0] : " thee";
    Tokenizer t;
    if (tutorial_load_tokenizer(&t) != 0) return 1;
    TutorialMergeRow rows[TUTORIAL_MAX_WORD];
    int n = tutorial_merges(&t, word, rows, TUTORIAL_MAX_WORD);
    for (int r = 0; r < n; r++) {
        if (rows[r].id < 0) {
            printf("bytes:");
        } else {
            printf("id %d ", rows[r].id);
            print_piece(&t, rows[r].id);
            printf(" ->");
        }
        for (int i = 0; i < rows[r].count; i++) {
            printf(" ");
            print_piece(&t, rows[r].ids[i]);
        }
        printf("\n");
    }
    tokenizer_free(&t);
    return n < 0 ? 2 : 0;
}

/* ------------------------------------------------------------------------- */
/* 2. Embeddings and positions                                                 */

/* embed [TEXT]: each token's row of the token embedding plus its position's row of the
 * position embedding: the residual stream x entering layer 0 (first 4 of C numbers). */
static int step_embed(int argc, char **argv) {
    const char *text = argc > 0 ? argv[0] : "ROMEO:";
    Tokenizer t;
    Model m;
    int ids[TUTORIAL_MAX_TOKENS], n = load_model(&m, &t, 1, text, ids);
    if (n < 0) return 1;
    if (!shipped_kind(&m)) {
        model_free(&m);
        tokenizer_free(&t);
        return 1;
    }
    int C = m.config.dim;
    const Weights *w = &m.checkpoint.weights;
    printf("C = %d; the first 4 numbers of each row\n", C);
    for (int i = 0; i < n; i++) {
        const float *wte = w->token_embedding.f32 + (size_t)ids[i] * C;   /* (C,) */
        const float *wpe = w->pos_embedding + (size_t)i * C;              /* (C,) */
        float x[4];
        for (int j = 0; j < 4; j++) x[j] = wte[j] + wpe[j];
        printf("position %d, token %d ", i, ids[i]);
        print_piece(&t, ids[i]);
        printf("\n");
        print_vector("  wte[token]    ", wte, 4, 4);
        print_vector("  wpe[position] ", wpe, 4, 4);
        print_vector("  x = sum       ", x, 4, 4);
    }
    model_free(&m);
    tokenizer_free(&t);
    return 0;
}

/* A Llama-family block of width 4, one head of 4, identity W_Q and W_K: block_qkv then
 * only normalises (RMSNorm, weights 1) and rotates. The matrices are (4, 4) views. */
static void rope_block(Config *c, LayerWeights *w, const float *identity, const float *ones) {
    memset(c, 0, sizeof *c);
    c->family = MODEL_LLAMA;
    c->dim = c->head_dim = c->kv_dim = c->hidden_dim = 4;
    c->n_heads = c->n_kv_heads = c->n_layers = 1;
    memset(w, 0, sizeof *w);
    w->norm1_w = ones;
    w->wq.f32 = w->wk.f32 = w->wv.f32 = identity;
}

void tutorial_rope(float *q, float *k) {
    enum { N = TUTORIAL_ROPE_N, HS = 4 };
    static const float identity[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    static const float ones[HS] = {1, 1, 1, 1};
    Config c;
    LayerWeights w;
    rope_block(&c, &w, identity, ones);
    float x[N * HS], xn[N * HS], v[N * HS], cs[N * HS];
    for (int i = 0; i < N * HS; i++) x[i] = 1.0f;
    /* the angles model.c computes for each forward call: position p, pair i/2 */
    for (int p = 0; p < N; p++) {
        for (int i = 0; i < HS; i += 2) {
            float angle = (float)p / powf(MODEL_ROPE_BASE, (float)i / (float)HS);
            cs[p * HS + i] = cosf(angle);
            cs[p * HS + i + 1] = sinf(angle);
        }
    }
    BlockBuffers b = {.x = x, .xn1 = xn, .q = q, .k = k, .v = v, .rope = cs};
    block_qkv(&c, &w, N, &b);
}

/* rope: rotary positions (Llama). The vector [1, 1, 1, 1] as query and key at positions
 * 0 .. 3, rotated by block_qkv (tutorial_rope), and q_m . k_n for pairs m, n the same
 * distance apart. */
static int step_rope(int argc, char **argv) {
    (void)argc, (void)argv;
    enum { HS = 4 };
    float q[TUTORIAL_ROPE_N * HS], k[TUTORIAL_ROPE_N * HS];
    tutorial_rope(q, k);
    printf("angles per position: pair (0, 1) 1 rad, pair (2, 3) 0.01 rad\n");
    for (int p = 0; p < 4; p++) {
        char label[32];
        snprintf(label, sizeof label, "q at position %d: ", p);
        print_vector(label, q + p * HS, HS, 4);
    }
    static const int pairs[][2] = {{1, 0}, {4, 3}, {7, 6}, {2, 0}, {7, 5}};
    for (int i = 0; i < 5; i++) {
        int qm = pairs[i][0], kn = pairs[i][1];
        printf("q_%d . k_%d = ", qm, kn);
        tutorial_print_number(kernels_dot(q + qm * HS, k + kn * HS, HS), 4);
        printf("\n");
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 3. Attention                                                                */

/* Parses argv[i], the step's argument `what` (its usage's name, such as "kernel SIGMA"),
 * as a float in (min, max] into *out if present; returns 0, or 2 after a stderr line. */
static int float_arg(int argc, char **argv, int i, const char *what, double min, double max,
                     float *out) {
    if (i >= argc) return 0;
    if (cli_parse_float(argv[i], min, max, 1, out) == 0) return 0;
    char shown[64];
    fprintf(stderr, "tutorial: %s: out of range (got '%s', expected a number in (%g, %g])\n",
            what, cli_printable(argv[i], shown, sizeof shown), min, max);
    return 2;
}

const float TUTORIAL_WAIST[TUTORIAL_PEOPLE] = {72, 80, 86, 94};
const float TUTORIAL_KG[TUTORIAL_PEOPLE] = {60, 68, 77, 85};

/* The waist table through the engine's Gaussian-kernel attention (--attn gauss): keys the
 * waists, values the weights in kg. The attention is causal, so the query sits at the
 * last of the four positions, which sees every key. */
int tutorial_kernel(float sigma, float query, float *w, float *out) {
    enum { T = TUTORIAL_PEOPLE };
    AttentionShape shape = {1, 1, 1, 1.0f / (sigma * sigma)};   /* score scale 1/sigma^2 */
    AttentionConfig cfg;
    attention_config_default(&cfg);
    cfg.kind = ATTENTION_GAUSS;
    float q[T], o[T], wall[T * T];
    for (int t = 0; t < T; t++) q[t] = query;
    size_t state_bytes = attention_state_bytes(&cfg, &shape, T);
    size_t scratch = attention_step_scratch_floats(&cfg, &shape, T) +
                     attention_weights_scratch_floats(&cfg, &shape, T);
    void *state = calloc(1, state_bytes);
    float *s = calloc(scratch, sizeof(float));
    int rc = !state || !s || attention_state_init(&cfg, &shape, T, 0, state) != 0 ||
             attention_step(&cfg, &shape, state, T, o, q, TUTORIAL_WAIST, TUTORIAL_KG, 0, T,
                            s) != 0 ||
             attention_weights(&cfg, &shape, state, T, wall, q, TUTORIAL_WAIST, T - 1, T,
                               s) != 0;
    free(state);
    free(s);
    if (rc) return 1;
    memcpy(w, wall, T * sizeof(float));
    *out = o[T - 1];
    return 0;
}

/* kernel [SIGMA] [QUERY]: the waist table's weights and the guess (tutorial_kernel). */
static int step_kernel(int argc, char **argv) {
    float sigma = 4.0f, query = 82.0f, w[TUTORIAL_PEOPLE], out;
    /* from 0.01 up: 1/sigma^2 times a squared distance stays finite */
    if (float_arg(argc, argv, 0, "kernel SIGMA", 0.01, 1000.0, &sigma) ||
        float_arg(argc, argv, 1, "kernel QUERY", 0.0, 1000.0, &query))
        return 2;
    if (tutorial_kernel(sigma, query, w, &out) != 0) return 1;
    printf("sigma %g, query %g\n", (double)sigma, (double)query);
    printf("waist  kg   weight\n");
    for (int j = 0; j < TUTORIAL_PEOPLE; j++) {
        printf("%5g %4g   ", (double)TUTORIAL_WAIST[j], (double)TUTORIAL_KG[j]);
        tutorial_print_number(w[j], 4);
        printf("\n");
    }
    printf("output: ");
    tutorial_print_number(out, 2);
    printf(" kg\n");
    return 0;
}

/* The example of steps 3 to 6: three tokens, d = 3 (q, k, v each (3, 3)). */
const float TUTORIAL_Q[9] = {1, 0, 2, 2, 2, 2, 2, 1, 3};
const float TUTORIAL_K[9] = {0, 1, 1, 4, 4, 0, 2, 3, 1};
const float TUTORIAL_V[9] = {1, 2, 3, 2, 8, 0, 2, 6, 3};

/* Exact attention of one query q (d,) over the three keys and values of the example:
 * the query at position 2, which sees keys 0 .. 2. Writes its weights w (3,) and output
 * o (3,). scale: the score scale (1/sqrt(3), or 1 unscaled). */
void tutorial_attend_one(const float *query, float scale, float *w, float *o) {
    enum { T = 3, D = 3 };
    AttentionShape shape = {1, 1, D, scale};
    float q[T * D] = {0}, out[D], scratch[1024], wall[T];
    memcpy(q + 2 * D, query, D * sizeof(float));
    attention_forward(&shape, out, q + 2 * D, TUTORIAL_K, TUTORIAL_V, 2, 1, scratch);
    AttentionConfig cfg;
    attention_config_default(&cfg);
    attention_weights(&cfg, &shape, NULL, T, wall, q, TUTORIAL_K, 2, T, scratch);
    memcpy(w, wall, sizeof wall);
    memcpy(o, out, sizeof out);
}

/* attend: query 0 of the example against all three keys, scaled and unscaled. */
static int step_attend(int argc, char **argv) {
    (void)argc, (void)argv;
    float w[3], o[3];
    tutorial_attend_one(TUTORIAL_Q, 1.0f / sqrtf(3.0f), w, o);
    print_vector("scaled:   weights ", w, 3, 4);
    print_vector("          output  ", o, 3, 4);
    tutorial_attend_one(TUTORIAL_Q, 1.0f, w, o);
    print_vector("unscaled: weights ", w, 3, 4);
    print_vector("          output  ", o, 3, 4);
    return 0;
}

/* The example's tokens x (3, 4) and the projections that give its q, k and v, stored as
 * the engine stores weights, (out, in) = (3, 4): row o holds output o's weights. */
const float TUTORIAL_X[12] = {1, 0, 1, 0, 0, 2, 0, 2, 1, 1, 1, 1};
const float TUTORIAL_WQ[12] = {1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 1, 1};
const float TUTORIAL_WK[12] = {0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0};
const float TUTORIAL_WV[12] = {1, 1, 0, 0, 0, 2, 2, 2, 1, 0, 2, 0};

/* qkv: q, k, v (3, 3) = x (3, 4) . W^T through block_matmul, the one-product form of
 * block_qkv's products. */
static int step_qkv(int argc, char **argv) {
    (void)argc, (void)argv;
    static const char *names[3] = {"q", "k", "v"};
    const float *weights[3] = {TUTORIAL_WQ, TUTORIAL_WK, TUTORIAL_WV};
    for (int m = 0; m < 3; m++) {
        Matrix w = {.f32 = weights[m]};
        float out[9];
        block_matmul(out, TUTORIAL_X, &w, NULL, 3, 4, 3, NULL, NULL);
        for (int t = 0; t < 3; t++) {
            char label[64];
            snprintf(label, sizeof label, "%s_%d = x_%d W_%c^T = ", names[m], t, t,
                     "QKV"[m]);
            print_vector(label, out + t * 3, 3, 0);
        }
    }
    return 0;
}

/* Prints each row of out (T, width) as "label t: [...]". */
static void print_rows(const char *label, const float *out, int T, int width, int decimals) {
    for (int t = 0; t < T; t++) {
        char l[48];
        snprintf(l, sizeof l, "%s %d: ", label, t);
        print_vector(l, out + (size_t)t * width, width, decimals);
    }
}

/* heads: two heads of d = 3 side by side (width 6): head 0 is the example, head 1 the
 * same keys and values with every query negated; then grouped-query attention, the two
 * query heads sharing one key/value head (the example's). */
static int step_heads(int argc, char **argv) {
    (void)argc, (void)argv;
    enum { T = 3, D = 3 };
    float q[T * 2 * D], k[T * 2 * D], v[T * 2 * D], out[T * 2 * D], scratch[1024];
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            q[t * 2 * D + i] = TUTORIAL_Q[t * D + i];
            q[t * 2 * D + D + i] = -TUTORIAL_Q[t * D + i];
            k[t * 2 * D + i] = k[t * 2 * D + D + i] = TUTORIAL_K[t * D + i];
            v[t * 2 * D + i] = v[t * 2 * D + D + i] = TUTORIAL_V[t * D + i];
        }
    }
    AttentionShape two = {2, 2, D, 1.0f / sqrtf((float)D)};
    attention_forward(&two, out, q, k, v, 0, T, scratch);
    printf("2 heads, 2 key/value heads: out (3, 6) = [head 0 | head 1]\n");
    print_rows("  token", out, T, 2 * D, 4);
    AttentionShape grouped = {2, 1, D, 1.0f / sqrtf((float)D)};
    attention_forward(&grouped, out, q, TUTORIAL_K, TUTORIAL_V, 0, T, scratch);
    printf("2 heads, 1 key/value head (grouped-query): the same numbers\n");
    print_rows("  token", out, T, 2 * D, 4);
    return 0;
}

/* mask: the example causal (each token sees itself and the tokens before it), the weights
 * as a table (- for a hidden key), then each query alone at the last position. */
static int step_mask(int argc, char **argv) {
    (void)argc, (void)argv;
    enum { T = 3, D = 3 };
    AttentionShape shape = {1, 1, D, 1.0f / sqrtf((float)D)};
    AttentionConfig cfg;
    attention_config_default(&cfg);
    float out[T * D], w[T * T], scratch[1024];
    attention_forward(&shape, out, TUTORIAL_Q, TUTORIAL_K, TUTORIAL_V, 0, T, scratch);
    attention_weights(&cfg, &shape, NULL, T, w, TUTORIAL_Q, TUTORIAL_K, 0, T, scratch);
    printf("causal weights (rows: queries, columns: keys)\n");
    for (int t = 0; t < T; t++) {
        printf("  token %d:", t);
        for (int j = 0; j < T; j++) {
            if (isnan(w[t * T + j])) {
                printf("       -");
            } else {
                printf("  ");
                tutorial_print_number(w[t * T + j], 4);
            }
        }
        printf("\n");
    }
    printf("causal outputs\n");
    print_rows("  token", out, T, D, 4);
    printf("without the mask (each query sees all three keys)\n");
    for (int t = 0; t < T; t++) {
        float wt[T], o[D];
        char l[32];
        tutorial_attend_one(TUTORIAL_Q + t * D, 1.0f / sqrtf((float)D), wt, o);
        snprintf(l, sizeof l, "  token %d: ", t);
        print_vector(l, o, D, 4);
    }
    return 0;
}

/* The index of the largest of x (n,). */
static int largest(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* cache: the shipped model on a prompt, once in one call (prefill) and once a token at a
 * time through the KV cache (decode): the same next token; then what the cache holds
 * and what it saves. */
static int step_cache(int argc, char **argv) {
    const char *text = argc > 0 ? argv[0] : "ROMEO:\nBut soft";
    Model m;
    Tokenizer t;
    int ids[TUTORIAL_MAX_TOKENS], n = load_model(&m, &t, TUTORIAL_MAX_TOKENS, text, ids);
    if (n < 0) return 1;
    const Config *c = &m.config;
    int V = c->vocab_size;
    float *prefill = malloc((size_t)V * sizeof(float)), *logits = NULL;
    logits = model_forward(&m, ids, n, 0, 0);
    if (prefill && logits) memcpy(prefill, logits, (size_t)V * sizeof(float));
    for (int i = 0; i < n && logits; i++) logits = model_forward(&m, ids + i, 1, i, 0);
    int rc = !prefill || !logits;
    if (!rc) {
        float diff = 0.0f;
        for (int i = 0; i < V; i++) diff = fmaxf(diff, fabsf(prefill[i] - logits[i]));
        int a = largest(prefill, V), b = largest(logits, V);
        print_text(text, n);
        printf("next token, prefill: %d ", a);
        print_piece(&t, a);
        printf(", token by token: %d ", b);
        print_piece(&t, b);
        printf("; logits within 1e-4: %s\n", diff <= 1e-4f ? "yes" : "no");
        size_t per_token = 2 * (size_t)c->n_layers * (size_t)c->kv_dim * sizeof(float);
        printf("cache: %d layers x (key + value) x %d floats x 4 bytes = %zu bytes per token\n",
               c->n_layers, c->kv_dim, per_token);
        printf("       %zu bytes for the whole context of %d\n", per_token * (size_t)c->seq_len,
               c->seq_len);
        /* token 100 reads keys 0 .. 100: a score and a weighted value each, every layer */
        double macs = model_macs_per_token(&m), classifier = (double)c->vocab_size * c->dim;
        double att = 2.0 * 101 * c->dim * c->n_layers;
        printf("token 100 with the cache: %.0f multiply-adds in the weights + %.0f in "
               "attention\n", macs, att);
        /* without: positions 0 .. 100 all run, logits for the last only; position p
         * reads p + 1 keys, 1 + 2 + ... + 101 = 101 x 102 / 2 in all */
        double keys = 101.0 * 102 / 2;
        printf("          without it, positions 0 .. 100 all run: %.0f\n",
               101.0 * (macs - classifier) + classifier + keys * 2.0 * c->dim * c->n_layers);
    }
    free(prefill);
    model_free(&m);
    tokenizer_free(&t);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* 4. The block                                                                */

/* norm: LayerNorm (GPT-2) and RMSNorm (Llama) of [1, 2, 3, 4], weights 1, bias 0. */
static int step_norm(int argc, char **argv) {
    (void)argc, (void)argv;
    static const float x[4] = {1, 2, 3, 4}, ones[4] = {1, 1, 1, 1}, zeros[4] = {0};
    float out[4];
    print_vector("x          ", x, 4, 0);
    kernels_layernorm(out, x, ones, zeros, 1, 4);
    print_vector("LayerNorm  ", out, 4, 4);
    kernels_rmsnorm(out, x, ones, 1, 4, KERNELS_NORM_EPS);
    print_vector("RMSNorm    ", out, 4, 4);
    return 0;
}

/* mlp: GELU (GPT-2) and SiLU, SwiGLU's activation (Llama), at a few points; SwiGLU with
 * a gate of 2 doubles SiLU. */
static int step_mlp(int argc, char **argv) {
    (void)argc, (void)argv;
    enum { N = 7 };
    static const float x[N] = {-3, -1, -0.5f, 0, 0.5f, 1, 3};
    float y[N], gate[N];
    print_vector("x           ", x, N, 2);
    kernels_gelu(y, x, N);
    print_vector("GELU(x)     ", y, N, 4);
    for (int g = 1; g <= 2; g++) {
        for (int i = 0; i < N; i++) gate[i] = (float)g;
        kernels_swiglu(y, x, gate, N);
        print_vector(g == 1 ? "SiLU(x)     " : "SiLU(x) * 2 ", y, N, 4);
    }
    return 0;
}

/* Softmax with kernels_exp_sum (the trainer's and the attention's exp). */
void tutorial_softmax(float *probs, const float *logits, int n) {
    memcpy(probs, logits, (size_t)n * sizeof(float));
    float sum = kernels_exp_sum(probs, n, logits[largest(logits, n)]);
    for (int i = 0; i < n; i++) probs[i] /= sum;
}

/* The next-token distribution of the last row of x (N, C) if the network stopped here:
 * the final norm, the classifier, softmax into probs (V,). xn (C,) and logits (V,) are
 * scratch. */
static void lens_stage(const Model *m, const float *x_last, float *xn, float *logits,
                       float *probs) {
    const Config *c = &m->config;
    const Weights *w = &m->checkpoint.weights;
    block_norm(c, xn, x_last, w->norm_final_w, w->norm_final_b, 1);
    block_matmul(logits, xn, &w->classifier, NULL, 1, c->dim, c->vocab_size, NULL, NULL);
    tutorial_softmax(probs, logits, c->vocab_size);
}

/* The forward pass written out, block by block, as model_forward runs it (embed, then
 * per layer block_qkv, attention_forward, block_finish), with lens_stage after each. */
int tutorial_lens(TutorialLens *lens, const char *text) {
    memset(lens, 0, sizeof *lens);
    Model m;
    int ids[TUTORIAL_MAX_TOKENS];
    int N = load_model(&m, &lens->tokenizer, TUTORIAL_MAX_TOKENS, text, ids);
    if (N < 0) return -1;
    if (!shipped_kind(&m)) {
        model_free(&m);
        tutorial_lens_free(lens);
        return -1;
    }
    const Config *c = &m.config;
    const Weights *w = &m.checkpoint.weights;
    size_t C = (size_t)c->dim, V = (size_t)c->vocab_size, Hd = (size_t)c->hidden_dim;
    int S = c->n_layers + 1;
    size_t scratch_floats = attention_scratch_floats(&m.heads, N);
    float *mem = calloc((size_t)N * (7 * C + Hd) + V + scratch_floats, sizeof(float));
    lens->probs = malloc((size_t)S * V * sizeof(float));
    if (!mem || !lens->probs) {
        fprintf(stderr, "tutorial: out of memory\n");
        free(mem);
        model_free(&m);
        tutorial_lens_free(lens);
        return -1;
    }
    lens->n_tokens = N, lens->n_stages = S, lens->vocab_size = (int)V;
    float *x = mem, *xn = x + N * C, *q = xn + N * C, *k = q + N * C, *v = k + N * C;
    float *att = v + N * C, *proj = att + N * C, *hidden = proj + N * C;
    float *logits = hidden + N * Hd, *scratch = logits + V;
    for (int i = 0; i < N; i++)   /* x = wte[token] + wpe[position] */
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = w->token_embedding.f32[ids[i] * C + j] + w->pos_embedding[i * C + j];
    lens_stage(&m, x + (N - 1) * C, xn, logits, lens->probs);
    for (int l = 0; l < c->n_layers; l++) {
        BlockBuffers b = {.x = x, .xn1 = xn, .q = q, .k = k, .v = v, .att = att,
                          .proj = proj, .x_mid = x, .xn2 = xn, .pre = hidden,
                          .act = hidden, .out = x};
        block_qkv(c, &w->layers[l], N, &b);
        attention_forward(&m.heads, att, q, k, v, 0, N, scratch);
        block_finish(c, &w->layers[l], l, N, &b, NULL);
        lens_stage(&m, x + (N - 1) * C, xn, logits, lens->probs + (size_t)(l + 1) * V);
    }
    const float *out = model_forward(&m, ids, N, 0, 0);
    float diff = 0.0f;
    for (size_t i = 0; out && i < V; i++) diff = fmaxf(diff, fabsf(out[i] - logits[i]));
    lens->same = out && diff <= 1e-5f;
    free(mem);
    model_free(&m);
    return 0;
}

void tutorial_lens_free(TutorialLens *lens) {
    free(lens->probs);
    tokenizer_free(&lens->tokenizer);
    memset(lens, 0, sizeof *lens);
}

/* block [TEXT]: tutorial_lens: after the embeddings and after each block, the token the
 * model would predict if it stopped there. */
static int step_block(int argc, char **argv) {
    const char *text = argc > 0 ? argv[0] : TUTORIAL_LENS_TEXT;
    TutorialLens lens;
    if (tutorial_lens(&lens, text) != 0) return 1;
    print_text(text, lens.n_tokens);
    printf("the next token if the model stopped after each block:\n");
    for (int s = 0; s < lens.n_stages; s++) {
        const float *probs = lens.probs + (size_t)s * lens.vocab_size;
        int best = largest(probs, lens.vocab_size);
        if (s == 0) printf("embeddings only: ");
        else printf("after block %d:   ", s - 1);
        printf("%4d ", best);
        print_piece(&lens.tokenizer, best);
        printf(" ");
        tutorial_print_number(probs[best], 3);
        printf("\n");
    }
    printf("model_forward's logits: the same within 1e-5: %s\n", lens.same ? "yes" : "no");
    tutorial_lens_free(&lens);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* 5. From logits to text                                                      */

const char *const TUTORIAL_WORDS[TUTORIAL_TOY_V] = {"king", "queen", "night", "sun", "fool"};
const float TUTORIAL_LOGITS[TUTORIAL_TOY_V] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f};

/* sample [TEMPERATURE] [TOP_K] [TOP_P]: softmax(logits / T) of the toy logits, then how
 * often sampler_sample picks each word in 10,000 draws (seed 1) with those settings. */
static int step_sample(int argc, char **argv) {
    enum { V = 5, DRAWS = 10000 };
    float temperature = 1.0f, top_p = 1.0f;
    int top_k = 0;
    /* from 0.001 up: logits / T stay finite and fit the table's columns */
    if (float_arg(argc, argv, 0, "sample T", 0.001, 100.0, &temperature) ||
        float_arg(argc, argv, 2, "sample TOP_P", 0.0, 1.0, &top_p))
        return 2;
    if (argc > 1 && cli_parse_int(argv[1], 0, V, &top_k) != 0) {
        char shown[64];
        fprintf(stderr, "tutorial: sample TOP_K: out of range (got '%s', expected 0 (none) to "
                "%d)\n", cli_printable(argv[1], shown, sizeof shown), V);
        return 2;
    }
    float scaled[V], probs[V];
    for (int i = 0; i < V; i++) scaled[i] = TUTORIAL_LOGITS[i] / temperature;
    tutorial_softmax(probs, scaled, V);
    Sampler s;
    if (sampler_init(&s, V, temperature, top_p, top_k, 1) != 0) return 1;
    int count[V] = {0};
    for (int d = 0; d < DRAWS; d++) {
        float logits[V];
        memcpy(logits, TUTORIAL_LOGITS, sizeof logits);
        count[sampler_sample(&s, logits)]++;
    }
    sampler_free(&s);
    printf("temperature %g, top-k %d, top-p %g\n", (double)temperature, top_k, (double)top_p);
    printf("word   logit  logit/T  softmax  drawn (of %d)\n", DRAWS);
    for (int i = 0; i < V; i++) {
        printf("%-6s %5.1f", TUTORIAL_WORDS[i], (double)TUTORIAL_LOGITS[i]);
        print_padded(scaled[i], 3, 9);
        print_padded(probs[i], 4, 9);
        printf("  %5d\n", count[i]);
    }
    return 0;
}

/* next [PROMPT]: the shipped model's five most likely next tokens after PROMPT, then the
 * generation loop, greedy: forward one token, take the most likely, append, repeat. */
static int step_next(int argc, char **argv) {
    enum { TOP = 5, STEPS = 8 };
    const char *text = argc > 0 ? argv[0] : "ROMEO:";
    Model m;
    Tokenizer t;
    int ids[TUTORIAL_MAX_TOKENS], n = load_model(&m, &t, TUTORIAL_MAX_TOKENS, text, ids);
    if (n < 0) return 1;
    int V = m.config.vocab_size, rc = 1;
    int steps = m.max_ctx - n < STEPS ? m.max_ctx - n : STEPS;   /* as many as fit the context */
    float *probs = malloc((size_t)V * sizeof(float));
    float *logits = probs ? model_forward(&m, ids, n, 0, 0) : NULL;
    if (logits) {
        tutorial_softmax(probs, logits, V);
        print_text(text, n);
        printf("the most likely next tokens:\n");
        for (int r = 0; r < TOP; r++) {
            int best = largest(probs, V);
            printf("  %4d ", best);
            print_piece(&t, best);
            printf(" ");
            tutorial_print_number(probs[best], 4);
            printf("\n");
            probs[best] = -1.0f;
        }
        if (steps > 0) printf("greedy, %d steps:\n", steps);
        else printf("greedy: no step, the text fills the context of %d tokens\n", m.max_ctx);
        for (int i = 0; i < steps && logits; i++) {
            int next = largest(logits, V);
            printf("  position %d: %4d ", n + i, next);
            print_piece(&t, next);
            printf("\n");
            logits = model_forward(&m, &next, 1, n + i, 0);
        }
        rc = logits ? 0 : 1;
    }
    free(probs);
    model_free(&m);
    tokenizer_free(&t);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* 6. Training                                                                 */

int tutorial_losses(TutorialLosses *losses, const char *text) {
    memset(losses, 0, sizeof *losses);
    Model m;
    int n = load_model(&m, &losses->tokenizer, TUTORIAL_MAX_TOKENS, text, losses->ids);
    if (n < 0) return -1;
    int V = m.config.vocab_size;
    float *logits = model_forward(&m, losses->ids, n, 0, 1);
    float *p = malloc((size_t)V * sizeof(float));
    if (!logits || !p) {
        fprintf(stderr, "tutorial: %s\n", p ? "the forward pass failed" : "out of memory");
        free(p);
        model_free(&m);
        tutorial_losses_free(losses);
        return -1;
    }
    losses->n_tokens = n;
    for (int i = 1; i < n; i++) {
        train_crossentropy_forward(p, &losses->loss[i], logits + (size_t)(i - 1) * V,
                                   losses->ids + i, 1, V);
        losses->p[i] = p[losses->ids[i]];
    }
    free(p);
    model_free(&m);
    return 0;
}

void tutorial_losses_free(TutorialLosses *losses) {
    tokenizer_free(&losses->tokenizer);
    memset(losses, 0, sizeof *losses);
}

/* loss [TEXT]: cross-entropy, first of the toy logits against "queen", with its gradient,
 * then of the shipped model on every next token of TEXT (tutorial_losses). */
static int step_loss(int argc, char **argv) {
    enum { V = 5 };
    float probs[V], loss;
    int target = 1;
    const char *text = argc > 0 ? argv[0] : TUTORIAL_LOSS_TEXT;
    static TutorialLosses l;
    if (tutorial_losses(&l, text) != 0) return 1;   /* before printing anything */
    if (l.n_tokens < 2) {
        fprintf(stderr, "tutorial: loss: the text must be at least 2 tokens: a token to predict "
                "after the first (got 1)\n");
        tutorial_losses_free(&l);
        return 1;
    }
    train_crossentropy_forward(probs, &loss, TUTORIAL_LOGITS, &target, 1, V);
    print_vector("toy logits        ", TUTORIAL_LOGITS, V, 1);
    print_vector("softmax           ", probs, V, 4);
    printf("target \"queen\": loss = -ln ");
    tutorial_print_number(probs[1], 4);
    printf(" = ");
    tutorial_print_number(loss, 4);
    printf("\n");
    train_crossentropy_backward(probs, &target, 1, V, 1.0f);
    print_vector("d loss / d logits ", probs, V, 4);

    double total = 0.0;
    print_text(text, l.n_tokens);
    printf("the shipped model, each token given the ones before it:\n");
    for (int i = 1; i < l.n_tokens; i++) {
        printf("  %4d ", l.ids[i]);
        print_piece(&l.tokenizer, l.ids[i]);
        printf(" p = ");
        tutorial_print_number(l.p[i], 4);
        printf(", loss ");
        tutorial_print_number(l.loss[i], 3);
        printf("\n");
        total += (double)l.loss[i];
    }
    int MV = l.tokenizer.vocab_size;
    printf("mean loss %.3f nats per token; a uniform guess: ln %d = %.3f\n",
           total / (l.n_tokens - 1), MV, log((double)MV));
    tutorial_losses_free(&l);
    return 0;
}

/* A GPT-2 block of width 4 (one head, MLP width 16) over 3 tokens, its parameters and
 * activations in one array each, for the backward step. */
enum { TB_N = 3, TB_C = 4, TB_H = 16 };
typedef struct {
    Config c;
    LayerWeights w;      /* views of p */
    BlockTensors g;      /* views of grad */
    float p[4 * TB_C * TB_C + 2 * TB_H * TB_C + 10 * TB_C + TB_H];      /* parameters */
    float grad[4 * TB_C * TB_C + 2 * TB_H * TB_C + 10 * TB_C + TB_H];   /* gradients */
    float x[TB_N * TB_C], r[TB_N * TB_C];   /* input; the loss is sum(out * r) */
    float a[TB_N * (10 * TB_C + 2 * TB_H)]; /* activations */
    BlockBuffers b;
} TinyBlock;

/* Points the views of tb at its arrays and fills parameters, input and r with fixed
 * numbers (sines: no generator needed to reproduce them). */
static void tiny_block_init(TinyBlock *tb) {
    memset(tb, 0, sizeof *tb);
    tb->c = (Config){.family = MODEL_GPT2, .seq_len = TB_N, .n_layers = 1, .n_heads = 1,
                     .n_kv_heads = 1, .dim = TB_C, .hidden_dim = TB_H, .head_dim = TB_C,
                     .kv_dim = TB_C};
    float *p = tb->p, *g = tb->grad;
    size_t CC = TB_C * TB_C, HC = TB_H * TB_C;
    float **views[] = {&tb->g.norm1_w, &tb->g.norm1_b, &tb->g.wq, &tb->g.wk, &tb->g.wv,
                       &tb->g.bq, &tb->g.bk, &tb->g.bv, &tb->g.wo, &tb->g.bo, &tb->g.norm2_w,
                       &tb->g.norm2_b, &tb->g.w_up, &tb->g.b_up, &tb->g.w_down,
                       &tb->g.b_down};
    size_t sizes[] = {TB_C, TB_C, CC, CC, CC, TB_C, TB_C, TB_C, CC, TB_C, TB_C, TB_C, HC,
                      TB_H, HC, TB_C};
    const float *pv[16];
    size_t at[16];
    for (int i = 0; i < 16; i++) {
        pv[i] = p;
        at[i] = (size_t)(p - tb->p);
        *views[i] = g;
        p += sizes[i];
        g += sizes[i];
    }
    LayerWeights *w = &tb->w;
    w->norm1_w = pv[0], w->norm1_b = pv[1], w->wq.f32 = pv[2], w->wk.f32 = pv[3];
    w->wv.f32 = pv[4], w->bq = pv[5], w->bk = pv[6], w->bv = pv[7], w->wo.f32 = pv[8];
    w->bo = pv[9], w->norm2_w = pv[10], w->norm2_b = pv[11], w->w_up.f32 = pv[12];
    w->b_up = pv[13], w->w_down.f32 = pv[14], w->b_down = pv[15];
    for (size_t i = 0; i < sizeof tb->p / sizeof(float); i++) tb->p[i] = 0.5f * sinf(1.3f * (float)i);
    for (int i = 0; i < TB_C; i++) tb->p[at[0] + i] = tb->p[at[10] + i] = 1.0f;   /* norms */
    for (int i = 0; i < TB_N * TB_C; i++) {
        tb->x[i] = sinf(0.7f * (float)i + 1.0f);
        tb->r[i] = cosf(0.9f * (float)i);
    }
    float *a = tb->a;
    BlockBuffers *b = &tb->b;
    b->x = tb->x;
    float **bufs[] = {&b->xn1, &b->q, &b->k, &b->v, &b->att, &b->proj, &b->x_mid, &b->xn2,
                      &b->out};
    for (int i = 0; i < 9; i++, a += TB_N * TB_C) *bufs[i] = a;
    b->pre = a;
    b->act = a + TB_N * TB_H;
}

/* The block's forward and its loss, sum(out * r). */
static float tiny_block_loss(TinyBlock *tb) {
    AttentionShape shape = {1, 1, TB_C, 1.0f / sqrtf((float)TB_C)};
    float scratch[64], loss = 0.0f;
    block_qkv(&tb->c, &tb->w, TB_N, &tb->b);
    attention_forward(&shape, tb->b.att, tb->b.q, tb->b.k, tb->b.v, 0, TB_N, scratch);
    block_finish(&tb->c, &tb->w, 0, TB_N, &tb->b, NULL);
    for (int i = 0; i < TB_N * TB_C; i++) loss += tb->b.out[i] * tb->r[i];
    return loss;
}

/* The backward of tiny_block_loss: the block's gradients into tb->grad, d loss / d x into
 * dx (TB_N, TB_C). Returns 0, or -1 if its scratch cannot be allocated. */
static int tiny_block_backward(TinyBlock *tb, float *dx) {
    enum { NC = TB_N * TB_C };
    AttentionShape shape = {1, 1, TB_C, 1.0f / sqrtf((float)TB_C)};
    float dproj[NC], dact[TB_N * TB_H], dxn[NC], datt[NC], dq[NC] = {0}, dk[NC] = {0};
    float dv[NC] = {0}, mean[TB_N], rstd[TB_N];
    float *scratch = malloc(attention_backward_scratch_floats(&shape, TB_N) * sizeof(float));
    if (!scratch) return -1;
    memcpy(dx, tb->r, sizeof(float) * NC);   /* d loss / d out = r */
    BlockGradBuffers d = {.dx = dx, .dproj = dproj, .dact = dact, .dxn = dxn, .datt = datt,
                          .dq = dq, .dk = dk, .dv = dv, .mean = mean, .rstd = rstd};
    tiny_block_loss(tb);
    block_finish_backward(&tb->c, &tb->w, &tb->g, 0, TB_N, &tb->b, &d, NULL);
    attention_backward(&shape, dq, dk, dv, datt, tb->b.q, tb->b.k, tb->b.v, TB_N, NULL,
                       scratch);
    free(scratch);
    block_qkv_backward(&tb->c, &tb->w, &tb->g, TB_N, &tb->b, &d);
    return 0;
}

/* backward: one block's gradient by the backward pass (block.c, attention.c) beside a
 * central difference (loss(p + h) - loss(p - h)) / 2h, h = 1e-2, for a few entries. */
static int step_backward(int argc, char **argv) {
    (void)argc, (void)argv;
    static TinyBlock tb;
    float dx[TB_N * TB_C];
    tiny_block_init(&tb);
    if (tiny_block_backward(&tb, dx) != 0) {
        fprintf(stderr, "tutorial: out of memory\n");
        return 1;
    }
    printf("loss = sum(out * r) = ");
    tutorial_print_number(tiny_block_loss(&tb), 4);
    printf("\nentry            backward   difference\n");
    struct { const char *name; float *value; const float *grad; } e[] = {
        {"x[0][0]", &tb.x[0], &dx[0]},
        {"norm1_w[2]", &tb.p[2], &tb.grad[2]},
        {"W_Q[0][1]", (float *)tb.w.wq.f32 + 1, tb.g.wq + 1},
        {"W_V[2][3]", (float *)tb.w.wv.f32 + 11, tb.g.wv + 11},
        {"W_O[1][2]", (float *)tb.w.wo.f32 + 6, tb.g.wo + 6},
        {"W_up[3][1]", (float *)tb.w.w_up.f32 + 13, tb.g.w_up + 13},
        {"b_down[0]", (float *)tb.w.b_down, tb.g.b_down}};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        const float h = 1e-2f, keep = *e[i].value;
        *e[i].value = keep + h;
        float up = tiny_block_loss(&tb);
        *e[i].value = keep - h;
        float down = tiny_block_loss(&tb);
        *e[i].value = keep;
        printf("%-14s", e[i].name);
        print_padded(*e[i].grad, 3, 10);
        print_padded((up - down) / (2.0f * h), 3, 12);
        printf("\n");
    }
    return 0;
}

void tutorial_adamw(float *param, float *m, float *v, float grad, int step, float decay) {
    const float beta1 = TUTORIAL_ADAMW_BETA1, beta2 = TUTORIAL_ADAMW_BETA2;
    KernelsAdamW h = {.lr = TUTORIAL_ADAMW_LR, .beta1 = beta1, .beta2 = beta2,
                      .eps = TUTORIAL_ADAMW_EPS, .weight_decay = decay, .grad_scale = 1.0f,
                      .correction1 = 1.0f - powf(beta1, (float)step),
                      .correction2 = 1.0f - powf(beta2, (float)step)};
    kernels_adamw(param, &grad, m, v, 1, &h);
}

const float TUTORIAL_ADAMW_GRADS[3] = {0.5f, 0.5f, -0.5f};

/* adamw: three AdamW steps (tutorial_adamw) of one parameter, starting at 1, with the
 * gradients TUTORIAL_ADAMW_GRADS, weight decay 0 then 0.5. */
static int step_adamw(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("lr %g, beta1 %g, beta2 %g, eps %g; the parameter starts at 1\n",
           (double)TUTORIAL_ADAMW_LR, (double)TUTORIAL_ADAMW_BETA1,
           (double)TUTORIAL_ADAMW_BETA2, (double)TUTORIAL_ADAMW_EPS);
    for (int pass = 0; pass < 2; pass++) {
        float param = 1.0f, m = 0.0f, v = 0.0f, decay = pass ? 0.5f : 0.0f;
        printf("weight decay %g\n", (double)decay);
        for (int step = 1; step <= 3; step++) {
            float grad = TUTORIAL_ADAMW_GRADS[step - 1];
            tutorial_adamw(&param, &m, &v, grad, step, decay);
            printf("  step %d: grad %5.2f  m %.4f  v %.6f  param %.4f\n", step, (double)grad,
                   (double)m, (double)v, (double)param);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The program                                                                 */

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args, *what;
} Step;

static const Step STEPS[] = {
    {"tokens", step_tokens, "[TEXT]", "the pieces and token ids of TEXT"},
    {"merges", step_merges, "[WORD]", "the BPE merges of one word, in the order learned"},
    {"embed", step_embed, "[TEXT]", "token + position embeddings: layer 0's input"},
    {"rope", step_rope, "", "rotary positions (Llama): q . k depends on the distance"},
    {"kernel", step_kernel, "[SIGMA] [QUERY]", "kernel regression: the waist table"},
    {"attend", step_attend, "", "scaled dot-product attention of one query"},
    {"qkv", step_qkv, "", "q, k, v = x W_Q^T, x W_K^T, x W_V^T"},
    {"heads", step_heads, "", "two heads side by side; grouped-query heads"},
    {"mask", step_mask, "", "the causal mask: weights and outputs"},
    {"cache", step_cache, "[PROMPT]", "prefill vs token by token; what the KV cache holds"},
    {"norm", step_norm, "", "LayerNorm and RMSNorm of [1, 2, 3, 4]"},
    {"mlp", step_mlp, "", "GELU, SiLU and SwiGLU at a few points"},
    {"block", step_block, "[TEXT]", "the forward pass block by block, and its guesses"},
    {"sample", step_sample, "[T] [TOP_K] [TOP_P]", "temperature, top-k, top-p on toy logits"},
    {"next", step_next, "[PROMPT]", "the shipped model's next tokens, greedy"},
    {"loss", step_loss, "[TEXT]", "cross-entropy: toy logits, then the shipped model"},
    {"backward", step_backward, "", "one block's gradients beside finite differences"},
    {"adamw", step_adamw, "", "three AdamW steps of one parameter"},
};

static void usage(FILE *f) {
    fprintf(f, "Usage: tutorial STEP [ARGS]   (from the repository's top folder)\n"
               "Prints the numbers of one step of docs/tutorial.md, computed by the "
               "engine's code.\n\nSteps, in the tutorial's order:\n");
    for (size_t i = 0; i < sizeof STEPS / sizeof STEPS[0]; i++)
        fprintf(f, "  %-8s %-20s %s\n", STEPS[i].name, STEPS[i].args, STEPS[i].what);
    fprintf(f, "  %-8s %-20s %s\n", "svg", "NAME", "write picture NAME of docs/img/ to "
               "standard output");
    fprintf(f, "           (%s)\n", tutorial_figure_names());
}

/* Arguments a step takes at most: the [NAME]s of its usage. */
static int max_args(const Step *step) {
    int n = 0;
    for (const char *c = step->args; *c; c++) n += *c == '[';
    return n;
}

/* Runs what argv asks; its exit status. */
static int run_step(int argc, char **argv) {
    if (strcmp(argv[1], "svg") == 0) {
        if (argc == 3) return tutorial_figure(argv[2]);
        fprintf(stderr, "tutorial: svg: expected one NAME (%s)\n", tutorial_figure_names());
        return 2;
    }
    for (size_t i = 0; i < sizeof STEPS / sizeof STEPS[0]; i++) {
        if (strcmp(argv[1], STEPS[i].name) != 0) continue;
        if (argc - 2 > max_args(&STEPS[i])) {
            fprintf(stderr, "tutorial: %s: too many arguments (got %d, expected at most %d%s%s)"
                    "\n", argv[1], argc - 2, max_args(&STEPS[i]), *STEPS[i].args ? ": " : "",
                    STEPS[i].args);
            return 2;
        }
        return STEPS[i].run(argc - 2, argv + 2);
    }
    char shown[64];
    fprintf(stderr, "tutorial: %s: no such step (tutorial --help lists them)\n",
            cli_printable(argv[1], shown, sizeof shown));
    return 2;
}

int main(int argc, char **argv) {
    os_program_start("tutorial");   /* a closed pipe: a write error, as a full disk */
    if (argc < 2) {
        fprintf(stderr, "tutorial: no step given (expected tutorial STEP [ARGS]; tutorial "
                "--help lists the steps)\n");
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return cli_stdout_ok("tutorial") == 0 ? 0 : 1;
    }
    kernels_set_threads(1);   /* small work; any count gives the same bits */
    int status = run_step(argc, argv);
    /* output lost (a full disk, a closed pipe) is a failure, as in the other programs */
    return cli_stdout_ok("tutorial") == 0 ? status : 1;
}
