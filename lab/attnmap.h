/* attnmap.h: attention weights as pictures (SVG), as an explorer page (HTML) and as text.
 *
 * The caller hands over, through a callback, the weights of one layer at a time,
 * (NH, T, T) with w[h][i][j] = the weight query token i gives key token j, and the
 * tokens' bytes; the text view takes one query's row per head instead (AttnTop). A
 * weight is visible when j <= i and it is finite; NaN (any non-finite value) means
 * masked, and so does every key after its query (the future), whatever the array holds
 * there. Masked is drawn and listed differently from a weight of 0.
 * This module only writes; it computes nothing of the model. Read attnmap.c next.
 *
 * Labels are arbitrary bytes, shown the same way everywhere (attnmap_escape):
 *   - valid UTF-8 characters pass through, except those that would be invisible or
 *     unsafe: C1 controls, soft hyphen, zero-width and bidirectional controls,
 *     U+2028/U+2029, the byte-order mark, noncharacters (U+FFFE, U+FFFF, ...) and
 *     U+2423, which are written \uXXXX (\UXXXXXXXX beyond U+FFFF);
 *   - a backslash is written \\, newline, tab and carriage return \n \t \r, other
 *     control bytes (NUL included) and DEL \xHH, and so is each byte that is not part
 *     of a valid UTF-8 sequence (invalid, overlong, surrogate, or a character cut off
 *     at the end of the token), so the display names every byte unambiguously;
 *   - in the pictures and the page a space is shown as U+2423 (open box), so " the"
 *     reads "␣the"; the text view quotes labels C-style (" the" stays " the").
 */
#ifndef ATTNMAP_H
#define ATTNMAP_H

#include <stddef.h>   /* size_t */
#include <stdio.h>    /* FILE */

/* The line after the first of every SVG and HTML map: it tells a map these writers made
 * from a user's file, which run refuses to replace (run_lab_check_map_path). */
#define ATTNMAP_SIGNATURE "<!-- an attention map that run wrote: run may write over it -->"

/* Limits, at the top so that a test or a user can change them when compiling. */
#ifndef ATTNMAP_MAX_TOKENS
#define ATTNMAP_MAX_TOKENS 16384          /* T at most: the pictures grow as T squared */
#endif
#ifndef ATTNMAP_SVG_MAX_CELLS
/* Above this many drawn (query, key <= query) cells an SVG draws each panel as an
 * embedded PNG with one pixel per cell instead of one element per cell (about 100
 * bytes each), so that all layers of a 512-token run stay tens of MB, not gigabytes. */
#define ATTNMAP_SVG_MAX_CELLS 250000
#endif

typedef struct {
    int n_layers;                           /* L */
    int n_heads;                            /* NH */
    int n_tokens;                           /* T, 1..ATTNMAP_MAX_TOKENS */
    int layer;                              /* one layer 0..L-1, or -1 for every layer */
    int head;                               /* one head 0..NH-1, or -1 for every head */
    int n_prompt;                           /* tokens 0..n_prompt-1 were the prompt, the
                                               rest generated; 0..T */
    long n_shifts;                          /* times the context shifted before the map,
                                               0..: the map says so */
    int n_kept;                             /* after a shift, tokens 0..n_kept-1 are the
                                               run's first, the rest its latest; 0..T */
    const unsigned char *const *labels;     /* (T,) each token's bytes as decoded: any
                                               bytes (NUL, invalid or partial UTF-8) */
    const size_t *label_lens;               /* (T,) */
    const char *title;                      /* e.g. the model and the attention variant;
                                               plain text, escaped like labels; may be NULL */
    /* The weights of one layer, (NH, T, T), valid until the next call, or NULL on
     * failure (after the callback's own stderr line). Called once per layer drawn. */
    const float *(*layer_weights)(void *ctx, int layer);
    void *ctx;                              /* passed to layer_weights */
} AttnMap;

typedef enum {
    ATTNMAP_ESCAPE_TEXT,   /* the inside of a C-style quoted string: also \" */
    ATTNMAP_ESCAPE_XML,    /* SVG/HTML text or attribute value: & < > " ' as entities */
    ATTNMAP_ESCAPE_JSON    /* a JSON string inside <script>: \" \\ and < > & as \u00XX */
} AttnMapEscape;

/* The display form of label (len bytes) for context, as the header comment describes,
 * into out (cap bytes, NUL-terminated when cap > 0; cut before the first piece that
 * does not fit whole). Returns the length of the whole form, as snprintf does. */
size_t attnmap_escape(const unsigned char *label, size_t len, AttnMapEscape context,
                      char *out, size_t cap);

/* A heatmap per head of map->layer (rows: query tokens, columns: key tokens), or with
 * layer -1 a grid of layers (rows) by heads (columns); map->head >= 0 keeps one head.
 * Each cell is <rect class="c" data-q data-k data-w="%.4f"> (masked: class "m"), the
 * future is the hatched panel background; above ATTNMAP_SVG_MAX_CELLS cells each panel
 * is a PNG instead. Returns 0, or -1 on a bad map or a failed callback (with a stderr
 * line) or on a write error (no line: the caller knows the file name; ferror(f) is set). */
int attnmap_write_svg(const AttnMap *map, FILE *f);

/* One self-contained HTML page (attnmap_page.html: inline CSS and JavaScript, nothing
 * fetched) that embeds every layer and head, weights as integers 0..1000 (-1 = masked):
 * the tokens as chips; hovering one shows what each head of the selected layer attends
 * to from it, a click pins it. It opens at map->layer (the last layer for -1) and
 * map->head (all for -1); the address may choose: page.html#token=5&layer=1&head=2.
 * Returns as attnmap_write_svg. */
int attnmap_write_html(const AttnMap *map, FILE *f);

/* The text view: one query's weights over its keys, per head of one layer. */
typedef struct {
    int n_heads;                            /* NH */
    int n_keys;                             /* T: keys 0..T-1 */
    int layer;                              /* the layer the rows come from (0..), for the
                                               line prefix */
    int query;                              /* the query's position, 0..T-1: later keys are
                                               the future, never listed */
    const unsigned char *const *labels;     /* (T,) each key's bytes, as in AttnMap */
    const size_t *label_lens;               /* (T,) */
    const float *row;                       /* (NH, T) the weight the query gives each key,
                                               NaN = masked */
} AttnTop;

/* One line per head with its k (>= 1) largest visible weights, largest first, ties to
 * the lower key, each as "label"@key weight, e.g.
 *   L5 H2: "ROMEO"@0 0.412  ":"@1 0.221
 * Masked and future keys are never listed, so fewer than k may appear ("(no visible
 * keys)" if none). Returns 0, or -1 on a bad argument (stderr line) or a write error. */
int attnmap_print_top(const AttnTop *top, int k, FILE *f);

/* label (len bytes) between double quotes, escaped as the text view does. */
void attnmap_print_label(const unsigned char *label, size_t len, FILE *f);

#endif /* ATTNMAP_H */
