/* run_lab.h: the attention lab's parts of the run program: --attn (a variant for every
 * layer), --eval (the loss on a file, against exact attention or --ref), --attn-map (a
 * heatmap of the final context) and --attn-top (the most-attended tokens, as text).
 *
 * run.c parses the flags and wires these in; the engine (model.c, generate.c) includes
 * nothing from here. The messages are run's own ("run: ..."): a usage error goes through
 * the program's RunLabUsage, so it reads and exits as every other flag's.
 *
 * Legend: L layers, NH heads, T tokens in the context, V vocab.
 */
#ifndef RUN_LAB_H
#define RUN_LAB_H

#include <stddef.h>        /* size_t */
#include "generate.h"      /* Generation */
#include "model.h"         /* Model, Config */
#include "os.h"            /* SaveFile */
#include "tokenizer.h"     /* Tokenizer */

#define RUN_LAB_SPEC_TEXT 2048   /* bytes of the attention text a map or --eval prints
                                  * (a longer per-layer list ends at its last whole item
                                  * and says how many layers it leaves out) */
#define RUN_LAB_MAP_MAX_WEIGHTS (1L << 26) /* --attn-map: weights drawn (about 1 byte each in
                                    * the file), and floats of one layer's (NH, T, T) (256 MB) */

/* The program's usage error: prints "run: SUBJECT: PROBLEM" (with what was got and what
 * was expected when given) and the hint to --help; returns the usage exit status. */
typedef int (*RunLabUsage)(const char *subject, const char *value, const char *problem,
                           const char *expected);

/* --attn SPEC: every layer's spec, read now that the layers are known, replaces the
 * model's attention (saying so on stderr when model_path was trained with another).
 * Returns 0, usage's status (a spec wrong for this model), or -1 after a stderr line
 * (model_set_attention_layers, or out of memory). */
int run_lab_set_attention(Model *m, const char *spec, const char *model_path,
                          RunLabUsage usage);

/* What --eval scores and against what. */
typedef struct {
    const char *eval_path;    /* the text to score */
    const char *ref_path;     /* --ref MODEL, or NULL: exact attention on model_path */
    const char *model_path;   /* the model's file */
    int tokenizer_beside;     /* 1: the model's tokenizer is tokenizer.bin beside it (no -z),
                               * and --ref's beside it, if there is one, must be the same */
    int ctx;                  /* tokens per window (-c, or the model's context) */
    size_t max_bytes;         /* the largest eval file read */
} RunLabEval;

/* Tokenises the eval file, runs eval_windows with m's attention (and an exact twin of
 * the model, or --ref's, for the KL and agreement when m is a variant or --ref is
 * given), and prints one result block on stdout. Returns 0, or -1 after a stderr line. */
int run_lab_evaluate(const RunLabEval *e, Model *m, const Tokenizer *tok);

/* The --attn-map format a path's extension asks for: "svg", "html", or NULL. */
const char *run_lab_map_format(const char *path);

/* Whether --attn-map may write path: a new path, or a file whose first lines hold
 * ATTNMAP_SIGNATURE (a map run wrote before), never a user's file. Returns 0, or -1
 * after one stderr line. */
int run_lab_check_map_path(const char *path);

/* usage's status after its message if a map at path of up to T tokens of c (layer and
 * head -1: every one) would exceed RUN_LAB_MAP_MAX_WEIGHTS, drawn (layers x heads x T x T)
 * or held (NH x T x T); else 0. */
int run_lab_check_map_size(const char *path, int layer, int head, const Config *c, int T,
                           RunLabUsage usage);

/* What --attn-map draws. */
typedef struct {
    const char *path;         /* FILE.svg or FILE.html (run_lab_map_format) */
    const char *model_path;   /* named in the title */
    int layer, head;          /* -1: every layer, every head */
} RunLabMap;

/* Writes the map: the weights of the chosen layers and heads over the tokens in g's
 * context when generation ended (m traced them: model_trace), as SVG or HTML into out
 * (opened by os_save_open), renamed into place when whole, and says so on stderr.
 * Returns 0, or -1 after a stderr line (out is then discarded: no file). */
int run_lab_write_map(const RunLabMap *map, Model *m, const Tokenizer *tok,
                      const Generation *g, SaveFile *out);

/* --attn-top K: for each generated token, the K earlier tokens each head of one layer
 * attended to most (GenerateOptions' watch, with the text itself left out). */
typedef struct {
    const Tokenizer *tok;           /* not owned */
    int layer;                      /* the layer shown */
    int k;                          /* tokens per head */
    const unsigned char **labels;   /* (n_ctx,) views into the tokenizer */
    size_t *lens;                   /* (n_ctx,) */
    float *weights;                 /* (NH, 1, n_ctx) one query's row per head */
} RunLabTop;

/* Allocates t's buffers for contexts of up to n_ctx tokens of m. Returns 0, or -1 when
 * out of memory (run_lab_top_free releases what was allocated). */
int run_lab_top_init(RunLabTop *t, const Model *m, const Tokenizer *tok, int n_ctx, int layer,
                     int k);

/* GenerateOptions' watch (ctx: a RunLabTop): prints on stdout which earlier tokens each
 * head attended to most when the model read the last token of g's context, the step that
 * chose `next`. Returns 0, or -1 after a stderr line. */
int run_lab_top_print(void *ctx, const Generation *g, int next);

/* Releases t's buffers. Safe on a zeroed or freed RunLabTop. */
void run_lab_top_free(RunLabTop *t);

#endif /* RUN_LAB_H */
