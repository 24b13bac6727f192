/* attnmap.c: attention weights written as an SVG heatmap, an HTML explorer and text.
 *
 * Everything is written with stdio as it is produced: the only allocations are one
 * PNG buffer per panel of a big SVG and the text view's sort array. In order: label
 * escaping (shared by all three outputs), the checks on an AttnMap and the one rule of
 * which cells are visible, the colour scale, the SVG (one element per cell, or PNG
 * panels past ATTNMAP_SVG_MAX_CELLS), the HTML page (its markup, style and script are
 * attnmap_page.html; this file fills in the map), the text view. Nothing here computes
 * attention: the caller collects the weights (attention.h) and hands them over one
 * layer at a time.
 */
#include "attnmap.h"

#include <ctype.h>    /* toupper: the shift note as a sentence */
#include <limits.h>   /* INT_MAX */
#include <math.h>     /* sqrt, ceil, lround, isfinite */
#include <stdint.h>   /* uint32_t */
#include <stdio.h>    /* fprintf, fputs, fwrite, ferror, fflush */
#include <stdlib.h>   /* malloc, free, qsort */
#include <string.h>   /* strlen, memcpy */

#include "unicode.h"  /* unicode_utf8_next: a label's characters */

/* ======================================================================================
 * Labels: bytes to display units, then each unit escaped for its context
 * ==================================================================================== */

#define SPACE_MARK "\xE2\x90\xA3"   /* U+2423 OPEN BOX: a space in the pictures and the page */
#define SPACE_MARK_CODE 0x2423
#define ELLIPSIS "\xE2\x80\xA6"     /* U+2026: ends a label shortened to fit */
#define ELLIPSIS_BYTES 3
#define UNIT_MAX 16                 /* longest unit: "\U0010ffff" (10) or 4 UTF-8 bytes */
#define ENTITY_MAX 6                /* longest escape of one byte: "&quot;", "\u003c" */
#define ASCII_END 0x80
#define ASCII_DEL 0x7F
#define ASCII_CONTROL_END 0x20      /* bytes below this are control characters */
#define BMP_END 0x10000             /* code points from here are written \UXXXXXXXX */

/* Valid characters that would show as nothing, move the text around, break a JavaScript
 * string (U+2028/9), or are not meant for text: written as \u escapes instead. */
static int is_hidden(uint32_t c) {
    return (c >= 0x80 && c <= 0x9F)          /* C1 controls */
        || c == 0xAD                         /* soft hyphen */
        || (c >= 0x200B && c <= 0x200F)      /* zero-width spaces and joiners, LRM, RLM */
        || (c >= 0x2028 && c <= 0x202E)      /* line and paragraph separators, bidi embeddings */
        || (c >= 0x2060 && c <= 0x206F)      /* word joiner, invisible operators, bidi isolates */
        || c == 0xFEFF                       /* byte-order mark */
        || (c >= 0xFDD0 && c <= 0xFDEF)      /* noncharacters */
        || (c & 0xFFFEu) == 0xFFFEu          /* noncharacters U+FFFE, U+FFFF, U+1FFFE, ... */
        || c == SPACE_MARK_CODE;             /* so that a shown space is never ambiguous */
}

/* The display unit at label[*pos] (attnmap.h) into unit (UNIT_MAX bytes); advances *pos,
 * returns the unit's length in bytes, and *chars how many characters it shows. quoted: the
 * unit goes between C-style quotes (a quote becomes \"); mark_spaces: a space shows as ␣. */
static size_t label_unit(const unsigned char *label, size_t len, size_t *pos, int quoted,
                         int mark_spaces, char *unit, size_t *chars) {
    uint32_t code = 0;
    size_t n = unicode_utf8_next(label + *pos, len - *pos, &code);
    int m;
    if (code == UNICODE_INVALID) {                 /* a byte of no valid character */
        m = snprintf(unit, UNIT_MAX, "\\x%02x", label[*pos]);
        *pos += 1;
        *chars = (size_t)m;
        return (size_t)m;
    }
    *pos += n;
    *chars = 1;
    if (code >= ASCII_END) {
        if (is_hidden(code)) {
            m = snprintf(unit, UNIT_MAX, code < BMP_END ? "\\u%04x" : "\\U%08x", (unsigned)code);
            *chars = (size_t)m;
            return (size_t)m;
        }
        memcpy(unit, label + *pos - n, n);
        return n;
    }
    const char *text = NULL;
    if (code == '\\') text = "\\\\";
    else if (code == '\n') text = "\\n";
    else if (code == '\t') text = "\\t";
    else if (code == '\r') text = "\\r";
    else if (code == '"' && quoted) text = "\\\"";
    else if (code == ' ' && mark_spaces) {
        memcpy(unit, SPACE_MARK, sizeof SPACE_MARK - 1);
        return sizeof SPACE_MARK - 1;
    } else if (code < ASCII_CONTROL_END || code == ASCII_DEL) {
        m = snprintf(unit, UNIT_MAX, "\\x%02x", (unsigned)code);
        *chars = (size_t)m;
        return (size_t)m;
    }
    if (!text) { unit[0] = (char)code; return 1; }
    *chars = strlen(text);
    memcpy(unit, text, *chars);
    return *chars;
}

/* Where escaped text goes: a stream, or a buffer that takes whole pieces only. */
typedef struct {
    FILE *f;         /* the stream, or NULL for the buffer */
    char *buf;       /* (cap,) */
    size_t cap;
    size_t copied;   /* bytes in buf */
    size_t len;      /* bytes of the whole text, copied or not */
    int full;        /* a piece did not fit: nothing after it is copied either */
} Sink;

static void sink_put(Sink *s, const char *text, size_t n) {
    if (s->f) fwrite(text, 1, n, s->f);
    else if (!s->full && s->copied + n < s->cap) {
        memcpy(s->buf + s->copied, text, n);
        s->copied += n;
    } else s->full = 1;
    s->len += n;
}

/* A unit escaped for its context: entities in XML; in a JSON string inside <script>, \"
 * and \\, and < > & as \u escapes so that neither "</script" nor "]]>" can appear. */
static void put_escaped(Sink *s, const char *unit, size_t n, AttnMapEscape context) {
    char out[UNIT_MAX * ENTITY_MAX];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = unit[i];
        const char *rep = NULL;
        if (context == ATTNMAP_ESCAPE_XML)
            rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                : c == '"' ? "&quot;" : c == '\'' ? "&apos;" : NULL;
        else if (context == ATTNMAP_ESCAPE_JSON)
            rep = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '<' ? "\\u003c"
                : c == '>' ? "\\u003e" : c == '&' ? "\\u0026" : NULL;
        if (rep) {
            size_t r = strlen(rep);
            memcpy(out + m, rep, r);
            m += r;
        } else out[m++] = c;
    }
    sink_put(s, out, m);
}

/* Characters label shows (before context escaping). */
static size_t label_chars(const unsigned char *label, size_t len, int quoted, int mark_spaces) {
    size_t total = 0;
    for (size_t pos = 0; pos < len;) {
        char unit[UNIT_MAX];
        size_t chars;
        label_unit(label, len, &pos, quoted, mark_spaces, unit, &chars);
        total += chars;
    }
    return total;
}

/* Writes label's display form for context to s, at most max_chars characters (0: no
 * limit; a longer one is cut at a unit boundary and ends in an ellipsis). */
static void put_label(Sink *s, const unsigned char *label, size_t len, AttnMapEscape context,
                      int mark_spaces, size_t max_chars) {
    int quoted = context == ATTNMAP_ESCAPE_TEXT;
    int cut = max_chars > 0 && label_chars(label, len, quoted, mark_spaces) > max_chars;
    size_t shown = 0;
    for (size_t pos = 0; pos < len;) {
        char unit[UNIT_MAX];
        size_t chars, n = label_unit(label, len, &pos, quoted, mark_spaces, unit, &chars);
        if (cut && shown + chars > max_chars - 1) break;
        put_escaped(s, unit, n, context);
        shown += chars;
    }
    if (cut) sink_put(s, ELLIPSIS, ELLIPSIS_BYTES);
}

size_t attnmap_escape(const unsigned char *label, size_t len, AttnMapEscape context,
                      char *out, size_t cap) {
    Sink s = {NULL, out, cap, 0, 0, 0};
    put_label(&s, label, len, context, context != ATTNMAP_ESCAPE_TEXT, 0);
    if (cap > 0) out[s.copied] = '\0';
    return s.len;
}

/* Token i's label to f, for context (spaces marked outside the text view). */
static void write_label(FILE *f, const AttnMap *map, int i, AttnMapEscape context,
                        size_t max_chars) {
    Sink s = {f, NULL, 0, 0, 0, 0};
    put_label(&s, map->labels[i], map->label_lens[i], context,
              context != ATTNMAP_ESCAPE_TEXT, max_chars);
}

/* The map's title, or "attention" without one. */
static const char *map_title(const AttnMap *map) {
    return map->title ? map->title : "attention";
}

/* The title to f, escaped like a label but with its spaces left as spaces. */
static void write_title(FILE *f, const AttnMap *map, AttnMapEscape context) {
    const char *title = map_title(map);
    Sink s = {f, NULL, 0, 0, 0, 0};
    put_label(&s, (const unsigned char *)title, strlen(title), context, 0, 0);
}

/* ======================================================================================
 * The map: checks, weights, the end of a write
 * ==================================================================================== */

static int in_range(const char *what, long got, long lo, long hi) {
    if (got >= lo && got <= hi) return 1;
    fprintf(stderr, "attnmap: %s: out of range (got %ld, expected %ld..%ld)\n", what, got, lo, hi);
    return 0;
}

/* 0 if every field of map is usable, else -1 after a stderr line. */
static int map_check(const AttnMap *map) {
    if (!map || !map->labels || !map->label_lens || !map->layer_weights) {
        fprintf(stderr, "attnmap: map: missing labels, label lengths or weights callback\n");
        return -1;
    }
    int ok = in_range("n_layers", map->n_layers, 1, INT_MAX)
          && in_range("n_heads", map->n_heads, 1, INT_MAX)
          && in_range("n_tokens", map->n_tokens, 1, ATTNMAP_MAX_TOKENS)
          && in_range("layer", map->layer, -1, map->n_layers - 1)
          && in_range("head", map->head, -1, map->n_heads - 1)
          && in_range("n_prompt", map->n_prompt, 0, map->n_tokens)
          && in_range("n_shifts", map->n_shifts, 0, LONG_MAX)
          && in_range("n_kept", map->n_kept, 0, map->n_tokens);
    for (int i = 0; ok && i < map->n_tokens; i++) {
        if (!map->labels[i] && map->label_lens[i] > 0) {
            fprintf(stderr, "attnmap: label %d: NULL with length %zu\n", i, map->label_lens[i]);
            ok = 0;
        }
    }
    return ok ? 0 : -1;
}

/* The weights (NH, T, T) of layer, or NULL after a stderr line. */
static const float *map_layer(const AttnMap *map, int layer) {
    const float *w = map->layer_weights(map->ctx, layer);
    if (!w) fprintf(stderr, "attnmap: layer %d: no attention weights\n", layer);
    return w;
}

/* seek to w[h, i, :] of a layer's (NH, T, T) weights */
static const float *weights_row(const float *w, int T, int h, int i) {
    return w + ((size_t)h * (size_t)T + (size_t)i) * (size_t)T;
}

/* Whether key j is visible to query i, whose weights row is w_i (T,). */
static int is_visible(const float *w_i, int i, int j) {
    return j <= i && isfinite(w_i[j]);
}

#define SHIFT_NOTE_MAX 128          /* bytes of shift_note's text */

/* What the tokens are after the context shifted, into out (cap bytes): "the context shifted
 * N times: the first K tokens kept, then the latest M", or with K = 0 "...: the run's
 * latest T tokens"; "" when it never shifted. */
static void shift_note(const AttnMap *map, char *out, size_t cap) {
    char times[48];
    int K = map->n_kept, T = map->n_tokens;
    out[0] = '\0';
    if (map->n_shifts <= 0) return;
    if (map->n_shifts == 1) snprintf(times, sizeof times, "once");
    else snprintf(times, sizeof times, "%ld times", map->n_shifts);
    char first[32] = "token";   /* K = 1: "the first token kept" */
    if (K > 1) snprintf(first, sizeof first, "%d tokens", K);
    if (K == 0)
        snprintf(out, cap, "the context shifted %s: the run's latest %d tokens", times, T);
    else
        snprintf(out, cap, "the context shifted %s: the first %s kept, then the latest %d",
                 times, first, T - K);
}

/* Ends a write: 0, or -1 if anything failed to reach the file. */
static int write_end(FILE *f) {
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

/* ======================================================================================
 * Colour scale: ColorBrewer YlGnBu, 9 classes (Brewer, colorbrewer2.org), pale yellow
 * for 0 to dark blue for 1, at the square root of the weight: softmax weights over many
 * keys are mostly small, and sqrt shows 0.01 at a tenth of the scale instead of 1 %.
 * Masked cells are a grey hatch, which no weight's colour resembles.
 * ==================================================================================== */

#define SCALE_STOPS 9
static const unsigned char SCALE[SCALE_STOPS][3] = {
    {255, 255, 217}, {237, 248, 177}, {199, 233, 180}, {127, 205, 187}, {65, 182, 196},
    {29, 145, 192}, {34, 94, 168}, {37, 52, 148}, {8, 29, 88}};
#define COLOUR_PROMPT "#1a1a1a"      /* prompt tokens' labels */
#define COLOUR_GENERATED "#c2410c"   /* generated tokens' labels, and the prompt's end */
#define COLOUR_HATCH_BACK "#ececec"
#define COLOUR_HATCH_LINE "#b0b0b0"
#define COLOUR_FRAME "#666666"

/* w clamped to [0, 1], for the colours and the page's integers (the numbers in the SVG's
 * data-w and in the text view are the weights as given). */
static double clamp_weight(double w) {
    return w > 0.0 ? (w < 1.0 ? w : 1.0) : 0.0;
}

/* Position of weight w on the scale, 0..1. */
static double scale_position(double w) {
    return sqrt(clamp_weight(w));
}

/* The colour at position t (0..1) of the scale, interpolated between its stops. */
static void scale_colour(double t, unsigned char rgb[3]) {
    double x = t * (SCALE_STOPS - 1);
    int k = (int)x;
    if (k > SCALE_STOPS - 2) k = SCALE_STOPS - 2;
    double frac = x - k;
    for (int c = 0; c < 3; c++)
        rgb[c] = (unsigned char)lround(SCALE[k][c] + (SCALE[k + 1][c] - SCALE[k][c]) * frac);
}

static const char *token_colour(const AttnMap *map, int i) {
    return i < map->n_prompt ? COLOUR_PROMPT : COLOUR_GENERATED;
}

/* ======================================================================================
 * SVG
 * ==================================================================================== */

#define SVG_MARGIN 16
#define SVG_TITLE_FONT 16
#define SVG_TITLE_H 28              /* the title line */
#define SVG_TITLE_CHAR_W 9          /* px per title character, to size the picture */
#define SVG_CAPTION_CHAR_W 7        /* px per character of the caption after the title */
#define SVG_CAPTION_MAX (64 + SHIFT_NOTE_MAX)   /* bytes of that caption */
#define SVG_LEGEND_H 64             /* the legend block under the title */
#define SVG_LEGEND_W 660            /* the picture is at least this wide, for the legend */
#define SVG_LEGEND_FONT 11
#define SVG_LEGEND_RIGHT 340        /* x of the legend's second column */
#define SVG_SCALE_W 300             /* the colour bar */
#define SVG_SCALE_H 12
#define SVG_SWATCH_W 18
#define SVG_LEGEND_BASELINE 10      /* the legend's first text row, below its top */
#define SVG_LEGEND_BAR_Y 16         /* the colour bar's top, below the legend's top */
#define SVG_LEGEND_ROW 15           /* the third row's baseline, below the bar */
#define SVG_LEGEND_TICK 4           /* length of a tick under the bar */
#define SVG_LEGEND_TEXT_DX 6        /* text after a swatch */
#define SVG_LEGEND_GENERATED_DX 84  /* "generated token" right of "prompt token" */
#define SVG_LEGEND_END_DX 186       /* the dashed "end of prompt" sample */
#define SVG_PANEL_PX 360            /* a panel's side aims at this (T * cell) ... */
#define SVG_SINGLE_PANEL_PX 720     /* ... or this when it is the only panel */
#define SVG_CELL_MAX 24             /* px; a cell is at least 1 */
#define SVG_LABEL_MIN_CELL 9        /* token labels on the axes from this cell size */
#define SVG_LABEL_FONT_MAX 11
#define SVG_LABEL_INSET 2           /* label font: this many px smaller than a cell */
#define SVG_LABEL_MAX_CHARS 12      /* longer labels are cut, with an ellipsis */
#define SVG_CHAR_W 0.62             /* a monospace character's advance, per px of font */
#define SVG_BASELINE 0.35           /* shift, per px of font, that centres a line vertically */
#define SVG_LABEL_PAD 6             /* px between the labels and the panel */
#define SVG_CAPTION_H 20            /* "layer l, head h" above each panel */
#define SVG_CAPTION_FONT 12
#define SVG_GAP 24                  /* px between panels */
#define SVG_TICK_GUTTER 32          /* room for index ticks when labels are off */
#define SVG_TICK_MIN_PX 28          /* index ticks at least this far apart */
#define SVG_TICK_FONT 9
#define SVG_HATCH 6                 /* period of the masked hatch, px */

typedef struct {
    int first_layer, n_rows;        /* panel rows: layers first_layer.. */
    int first_head, n_cols;         /* panel columns: heads first_head.. */
    int cell;                       /* px per cell */
    int side;                       /* T * cell: a panel's heatmap */
    int labels;                     /* token labels on the axes (else index ticks) */
    double font;                    /* label font size, px */
    int gutter;                     /* px left of and below each heatmap for labels */
    int panel_w, panel_h;           /* one panel with its gutter, caption and gap */
    int raster;                     /* panels are PNG images, not one element per cell */
    int width, height;              /* the whole picture */
    int top;                        /* y of the first panel row */
} SvgLayout;

/* The caption after the title, into out (cap bytes): " - T tokens: P prompt, G generated",
 * and the shift note. */
static void svg_caption(const AttnMap *map, char *out, size_t cap) {
    char note[SHIFT_NOTE_MAX];
    shift_note(map, note, sizeof note);
    snprintf(out, cap, " \xE2\x80\x94 %d tokens: %d prompt, %d generated%s%s", map->n_tokens,
             map->n_prompt, map->n_tokens - map->n_prompt, note[0] ? "; " : "", note);
}

static void svg_layout(const AttnMap *map, SvgLayout *lay) {
    int T = map->n_tokens;
    lay->first_layer = map->layer < 0 ? 0 : map->layer;
    lay->n_rows = map->layer < 0 ? map->n_layers : 1;
    lay->first_head = map->head < 0 ? 0 : map->head;
    lay->n_cols = map->head < 0 ? map->n_heads : 1;
    int panels = lay->n_rows * lay->n_cols;
    int target = panels == 1 ? SVG_SINGLE_PANEL_PX : SVG_PANEL_PX;
    lay->cell = target / T < 1 ? 1 : target / T > SVG_CELL_MAX ? SVG_CELL_MAX : target / T;
    lay->side = T * lay->cell;
    lay->labels = lay->cell >= SVG_LABEL_MIN_CELL;
    double cells = (double)panels * T * (T + 1) / 2.0;
    lay->raster = cells > ATTNMAP_SVG_MAX_CELLS;
    lay->font = 0.0;
    lay->gutter = SVG_TICK_GUTTER;
    if (lay->labels) {
        int font = lay->cell - SVG_LABEL_INSET;
        lay->font = font < SVG_LABEL_FONT_MAX ? font : SVG_LABEL_FONT_MAX;
        size_t longest = 1;
        for (int i = 0; i < T; i++) {
            size_t n = label_chars(map->labels[i], map->label_lens[i], 0, 1);
            if (n > longest) longest = n;
        }
        if (longest > SVG_LABEL_MAX_CHARS) longest = SVG_LABEL_MAX_CHARS;
        lay->gutter = (int)ceil((double)longest * lay->font * SVG_CHAR_W) + SVG_LABEL_PAD;
    }
    lay->panel_w = lay->gutter + lay->side + SVG_GAP;
    lay->panel_h = SVG_CAPTION_H + lay->side + lay->gutter + SVG_GAP;
    lay->top = SVG_MARGIN + SVG_TITLE_H + SVG_LEGEND_H;
    lay->width = 2 * SVG_MARGIN + lay->n_cols * lay->panel_w;
    char caption[SVG_CAPTION_MAX];
    svg_caption(map, caption, sizeof caption);
    int title_w = 2 * SVG_MARGIN + (int)strlen(map_title(map)) * SVG_TITLE_CHAR_W +
                  (int)strlen(caption) * SVG_CAPTION_CHAR_W;
    if (lay->width < SVG_LEGEND_W) lay->width = SVG_LEGEND_W;
    if (lay->width < title_w) lay->width = title_w;
    lay->height = lay->top + lay->n_rows * lay->panel_h + SVG_MARGIN;
}

/* The legend: the colour bar with ticks, the masked hatch, prompt and generated labels. */
static void svg_legend(int y, FILE *f) {
    static const double ticks[] = {0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0};
    static const char *const tick_text[] = {"0", ".01", ".05", ".1", ".25", ".5", "1"};
    int x = SVG_MARGIN, x2 = SVG_MARGIN + SVG_LEGEND_RIGHT;
    int y1 = y + SVG_LEGEND_BASELINE;                      /* baseline of the first row */
    int bar_y = y + SVG_LEGEND_BAR_Y;                      /* top of the bar, the second row */
    int y3 = bar_y + SVG_SCALE_H + SVG_LEGEND_ROW;         /* baseline of the third row */
    fprintf(f, "<g class=\"legend\" font-size=\"%d\" fill=\"#333333\">\n", SVG_LEGEND_FONT);
    fprintf(f, "<text x=\"%d\" y=\"%d\">attention weight (colour: square root of the weight)"
            "</text>\n", x, y1);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#scale)\" "
            "stroke=\"%s\" stroke-width=\"0.5\"/>\n", x, bar_y, SVG_SCALE_W, SVG_SCALE_H,
            COLOUR_FRAME);
    for (size_t t = 0; t < sizeof ticks / sizeof ticks[0]; t++) {
        double tx = x + scale_position(ticks[t]) * SVG_SCALE_W;
        fprintf(f, "<path d=\"M%.1f %dv%d\" stroke=\"%s\"/><text x=\"%.1f\" y=\"%d\" "
                "text-anchor=\"middle\">%s</text>\n", tx, bar_y + SVG_SCALE_H, SVG_LEGEND_TICK,
                COLOUR_FRAME, tx, y3, tick_text[t]);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\">rows: query tokens, columns: key tokens</text>\n",
            x2, y1);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#hatch)\" "
            "stroke=\"%s\" stroke-width=\"0.5\"/><text x=\"%d\" y=\"%d\">masked (not visible; "
            "not the same as 0)</text>\n", x2, bar_y, SVG_SWATCH_W, SVG_SCALE_H, COLOUR_FRAME,
            x2 + SVG_SWATCH_W + SVG_LEGEND_TEXT_DX, bar_y + SVG_SCALE_H - 2);
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"%s\">prompt token</text>"
            "<text x=\"%d\" y=\"%d\" fill=\"%s\">generated token</text>"
            "<path d=\"M%d %dh%d\" stroke=\"%s\" stroke-dasharray=\"4 3\"/>"
            "<text x=\"%d\" y=\"%d\">end of prompt</text>\n",
            x2, y3, COLOUR_PROMPT, x2 + SVG_LEGEND_GENERATED_DX, y3, COLOUR_GENERATED,
            x2 + SVG_LEGEND_END_DX, y3 - SVG_LEGEND_TICK, SVG_SWATCH_W, COLOUR_GENERATED,
            x2 + SVG_LEGEND_END_DX + SVG_SWATCH_W + SVG_LEGEND_TEXT_DX, y3);
    fputs("</g>\n", f);
}

/* Everything before the panels: the root element, patterns, title and legend. */
static void svg_begin(const AttnMap *map, const SvgLayout *lay, FILE *f) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" ATTNMAP_SIGNATURE "\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "xmlns:xlink=\"http://www.w3.org/1999/xlink\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            lay->width, lay->height, lay->width, lay->height);
    fputs("<title>", f);
    write_title(f, map, ATTNMAP_ESCAPE_XML);
    fputs("</title>\n<defs>\n", f);
    fprintf(f, "<pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"%d\" "
            "height=\"%d\"><rect width=\"%d\" height=\"%d\" fill=\"%s\"/><path d=\"M0 %dL%d 0"
            "M-1 1L1 -1M%d %dL%d %d\" stroke=\"%s\" stroke-width=\"1\"/></pattern>\n",
            SVG_HATCH, SVG_HATCH, SVG_HATCH, SVG_HATCH, COLOUR_HATCH_BACK, SVG_HATCH, SVG_HATCH,
            SVG_HATCH - 1, SVG_HATCH + 1, SVG_HATCH + 1, SVG_HATCH - 1, COLOUR_HATCH_LINE);
    fputs("<linearGradient id=\"scale\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">", f);
    for (int k = 0; k < SCALE_STOPS; k++)
        fprintf(f, "<stop offset=\"%.4f\" stop-color=\"#%02x%02x%02x\"/>",
                (double)k / (SCALE_STOPS - 1), SCALE[k][0], SCALE[k][1], SCALE[k][2]);
    fputs("</linearGradient>\n</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n",
          f);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" font-weight=\"bold\">", SVG_MARGIN,
            SVG_MARGIN + SVG_TITLE_FONT, SVG_TITLE_FONT);
    write_title(f, map, ATTNMAP_ESCAPE_XML);
    char caption[SVG_CAPTION_MAX];
    svg_caption(map, caption, sizeof caption);
    fprintf(f, "<tspan font-size=\"%d\" font-weight=\"normal\" fill=\"#555555\">%s</tspan>"
            "</text>\n", SVG_CAPTION_FONT, caption);
    svg_legend(SVG_MARGIN + SVG_TITLE_H, f);
}

/* Cell (i, j) as a visible element: class c, its weight (as given) in data-w, its colour,
 * and with the labels on a tooltip naming both tokens. */
static void svg_weight_cell(const AttnMap *map, const SvgLayout *lay, int i, int j, float weight,
                            FILE *f) {
    int s = lay->cell;
    double w = (double)weight + 0.0;   /* + 0.0: -0 prints as 0 */
    unsigned char rgb[3];
    scale_colour(scale_position(w), rgb);
    fprintf(f, "<rect class=\"c\" data-q=\"%d\" data-k=\"%d\" data-w=\"%.4f\" x=\"%d\" y=\"%d\" "
            "width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\"", i, j, w, j * s, i * s, s, s,
            rgb[0], rgb[1], rgb[2]);
    if (!lay->labels) { fputs("/>\n", f); return; }
    fprintf(f, "><title>query %d ", i);
    write_label(f, map, i, ATTNMAP_ESCAPE_XML, 0);
    fprintf(f, " \xE2\x86\x92 key %d ", j);
    write_label(f, map, j, ATTNMAP_ESCAPE_XML, 0);
    fprintf(f, ": %.4f</title></rect>\n", w);
}

/* Cell (i, j) as a masked element: class m, filled by its group's hatch. */
static void svg_masked_cell(const SvgLayout *lay, int i, int j, FILE *f) {
    int s = lay->cell;
    fprintf(f, "<rect class=\"m\" data-q=\"%d\" data-k=\"%d\" x=\"%d\" y=\"%d\" width=\"%d\" "
            "height=\"%d\"", i, j, j * s, i * s, s, s);
    if (!lay->labels) { fputs("/>\n", f); return; }
    fprintf(f, "><title>query %d \xE2\x86\x92 key %d: masked</title></rect>\n", i, j);
}

/* One element per drawn cell of a head's weights w_h (T, T): the visible cells, then the
 * masked ones inside a group whose hatch fill they share (written once, not per cell);
 * the future is the panel's hatched background. */
static void svg_cells(const AttnMap *map, const SvgLayout *lay, const float *w_h, FILE *f) {
    static const char *const group[2] = {
        "<g shape-rendering=\"crispEdges\">\n",
        "<g fill=\"url(#hatch)\" shape-rendering=\"crispEdges\">\n"};
    int T = map->n_tokens;
    for (int masked = 0; masked <= 1; masked++) {
        fputs(group[masked], f);
        for (int i = 0; i < T && !ferror(f); i++) {
            const float *w_i = w_h + (size_t)i * T;
            for (int j = 0; j <= i; j++) {
                int visible = is_visible(w_i, i, j);
                if (!masked && visible) svg_weight_cell(map, lay, i, j, w_i[j], f);
                else if (masked && !visible) svg_masked_cell(lay, i, j, f);
            }
        }
        fputs("</g>\n", f);
    }
}

/* ---- PNG panels for big maps (W3C PNG spec, 2nd ed.): one palette pixel per cell,
 * index 0 transparent (masked: the hatch shows through), 1..255 the colour scale; the
 * zlib stream holds stored (uncompressed) deflate blocks, so no compressor is needed. */
#define PNG_SIGNATURE "\x89PNG\r\n\x1a\n"
#define PNG_SIGNATURE_BYTES 8
#define PNG_CHUNKS 5                /* IHDR, PLTE, tRNS, IDAT, IEND */
#define PNG_CHUNK_EXTRA 12          /* length, type and CRC around each chunk's data */
#define PNG_IHDR_BYTES 13
#define PNG_COLOURS 256             /* palette entries */
#define PNG_DEPTH 8                 /* bits per pixel */
#define PNG_TYPE_PALETTE 3          /* IHDR colour type */
#define PNG_STORED_MAX 65535        /* bytes per stored deflate block (RFC 1951 3.2.4) */
#define PNG_STORED_HEADER 5         /* BFINAL/BTYPE byte, LEN, NLEN */
#define ZLIB_HEADER "\x78\x01"      /* deflate, 32 K window, no dictionary (RFC 1950) */
#define ZLIB_EXTRA 6                /* the 2-byte header and the 4-byte Adler-32 */
#define ADLER_MOD 65521u            /* RFC 1950 8.2 */
#define CRC_POLY 0xEDB88320u        /* CRC-32, reflected (PNG spec annex D) */

typedef struct {
    unsigned char *p;               /* (capacity,) the file being built */
    size_t len;
    uint32_t crc_table[256];
} Png;

static void png_u32(Png *png, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) png->p[png->len++] = (unsigned char)(v >> shift);
}

static void png_chunk_begin(Png *png, const char *type, size_t n) {
    png_u32(png, (uint32_t)n);
    memcpy(png->p + png->len, type, 4);
    png->len += 4;
}

/* Appends the CRC of the chunk whose length field starts at `start`. */
static void png_chunk_end(Png *png, size_t start) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = start + 4; i < png->len; i++)
        crc = png->crc_table[(crc ^ png->p[i]) & 0xFFu] ^ (crc >> 8);
    png_u32(png, crc ^ 0xFFFFFFFFu);
}

/* The signature and the chunks before the pixels: IHDR (T x T, 8-bit palette), PLTE
 * (index 0 black, 1..255 the colour scale from 0 to 1) and tRNS (index 0 transparent). */
static void png_begin(Png *png, int T) {
    memcpy(png->p, PNG_SIGNATURE, PNG_SIGNATURE_BYTES);
    png->len = PNG_SIGNATURE_BYTES;

    size_t start = png->len;
    png_chunk_begin(png, "IHDR", PNG_IHDR_BYTES);
    png_u32(png, (uint32_t)T);
    png_u32(png, (uint32_t)T);
    unsigned char ihdr_rest[] = {PNG_DEPTH, PNG_TYPE_PALETTE, 0, 0, 0};  /* deflate, no filter
                                                                           method, no interlace */
    memcpy(png->p + png->len, ihdr_rest, sizeof ihdr_rest);
    png->len += sizeof ihdr_rest;
    png_chunk_end(png, start);

    start = png->len;
    png_chunk_begin(png, "PLTE", 3 * PNG_COLOURS);
    for (int k = 0; k < PNG_COLOURS; k++) {
        unsigned char rgb[3] = {0, 0, 0};
        if (k > 0) scale_colour((double)(k - 1) / (PNG_COLOURS - 2), rgb);
        memcpy(png->p + png->len, rgb, 3);
        png->len += 3;
    }
    png_chunk_end(png, start);

    start = png->len;                                        /* alpha 0 for index 0 only */
    png_chunk_begin(png, "tRNS", 1);
    png->p[png->len++] = 0;
    png_chunk_end(png, start);
}

/* The palette index of cell (i, j) of row w_i: 0 (transparent) when masked or in the
 * future, else the weight's scale position as 1..255. */
static unsigned char png_index(const float *w_i, int i, int j) {
    if (!is_visible(w_i, i, j)) return 0;
    return (unsigned char)(1 + lround(scale_position((double)w_i[j]) * (PNG_COLOURS - 2)));
}

/* The IDAT chunk: a zlib stream of stored deflate blocks holding raw (T rows, each a
 * filter byte 0 then T indices) bytes. */
static void png_pixels(Png *png, const float *w_h, int T, size_t zlib, size_t raw) {
    size_t start = png->len;
    png_chunk_begin(png, "IDAT", zlib);
    memcpy(png->p + png->len, ZLIB_HEADER, 2);
    png->len += 2;
    uint32_t adler_a = 1, adler_b = 0;
    size_t in_block = 0, left = raw;
    for (int i = 0; i < T; i++) {
        const float *w_i = w_h + (size_t)i * T;
        for (int j = -1; j < T; j++) {                       /* j = -1: the filter byte */
            if (in_block == 0) {
                size_t n = left < PNG_STORED_MAX ? left : PNG_STORED_MAX;
                png->p[png->len++] = left == n;              /* BFINAL on the last, BTYPE 00 */
                png->p[png->len++] = (unsigned char)(n & 0xFF);
                png->p[png->len++] = (unsigned char)(n >> 8);
                png->p[png->len++] = (unsigned char)(~n & 0xFF);
                png->p[png->len++] = (unsigned char)((~n >> 8) & 0xFF);
                in_block = n;
                left -= n;
            }
            unsigned char index = j < 0 ? 0 : png_index(w_i, i, j);   /* filter 0: none */
            png->p[png->len++] = index;
            in_block--;
            adler_a = (adler_a + index) % ADLER_MOD;
            adler_b = (adler_b + adler_a) % ADLER_MOD;
        }
    }
    png_u32(png, (adler_b << 16) | adler_a);
    png_chunk_end(png, start);
}

/* Head h's weights w_h (T, T) as a PNG, malloc'd into *out (caller frees); returns its
 * size, or 0 when memory runs out. */
static size_t png_encode(const float *w_h, int T, unsigned char **out) {
    size_t raw = (size_t)T * ((size_t)T + 1);                /* a filter byte per row */
    size_t blocks = (raw + PNG_STORED_MAX - 1) / PNG_STORED_MAX;
    size_t zlib = ZLIB_EXTRA + blocks * PNG_STORED_HEADER + raw;
    size_t size = PNG_SIGNATURE_BYTES + PNG_CHUNKS * PNG_CHUNK_EXTRA + PNG_IHDR_BYTES
                + 3 * PNG_COLOURS + 1 + zlib;
    Png png;
    png.p = malloc(size);
    png.len = 0;
    if (!png.p) return 0;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int bit = 0; bit < 8; bit++) c = c & 1u ? CRC_POLY ^ (c >> 1) : c >> 1;
        png.crc_table[n] = c;
    }
    png_begin(&png, T);
    png_pixels(&png, w_h, T, zlib, raw);
    size_t start = png.len;
    png_chunk_begin(&png, "IEND", 0);
    png_chunk_end(&png, start);
    *out = png.p;
    return png.len;
}

/* data (n,) in base64 (RFC 4648 4), on one line. */
static void write_base64(const unsigned char *data, size_t n, FILE *f) {
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char line[4096];
    size_t m = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < n) v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < n) v |= data[i + 2];
        line[m++] = digits[v >> 18];
        line[m++] = digits[(v >> 12) & 63];
        line[m++] = i + 1 < n ? digits[(v >> 6) & 63] : '=';
        line[m++] = i + 2 < n ? digits[v & 63] : '=';
        if (m + 4 > sizeof line) { fwrite(line, 1, m, f); m = 0; }
    }
    fwrite(line, 1, m, f);
}

/* Labels (or index ticks) left of and below a panel, coloured prompt or generated. */
static void svg_axes(const AttnMap *map, const SvgLayout *lay, FILE *f) {
    int T = map->n_tokens, s = lay->cell;
    if (lay->labels) {
        double font = lay->font, shift = font * SVG_BASELINE;
        fprintf(f, "<g font-family=\"monospace\" font-size=\"%.1f\">\n", font);
        for (int i = 0; i < T; i++) {
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">",
                    -SVG_LABEL_PAD / 2, i * s + s / 2.0 + shift, token_colour(map, i));
            write_label(f, map, i, ATTNMAP_ESCAPE_XML, SVG_LABEL_MAX_CHARS);
            fputs("</text>\n", f);
        }
        for (int j = 0; j < T; j++) {
            fprintf(f, "<text transform=\"translate(%.1f %d) rotate(-90)\" text-anchor=\"end\" "
                    "fill=\"%s\">", j * s + s / 2.0 + shift, lay->side + SVG_LABEL_PAD / 2,
                    token_colour(map, j));
            write_label(f, map, j, ATTNMAP_ESCAPE_XML, SVG_LABEL_MAX_CHARS);
            fputs("</text>\n", f);
        }
        fputs("</g>\n", f);
        return;
    }
    static const int nice[] = {1, 2, 5};          /* steps 1, 2, 5, 10, 20, 50, ... */
    int step = 1;
    for (int decade = 1; step * s < SVG_TICK_MIN_PX; decade *= 10)
        for (int k = 0; k < 3 && step * s < SVG_TICK_MIN_PX; k++) step = nice[k] * decade;
    fprintf(f, "<g font-size=\"%d\">\n", SVG_TICK_FONT);
    for (int i = 0; i < T; i += step) {
        double c = i * s + s / 2.0;
        fprintf(f, "<text x=\"-3\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">%d</text>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%d</text>\n",
                c + SVG_TICK_FONT * SVG_BASELINE, token_colour(map, i), i, c,
                lay->side + SVG_TICK_FONT + 2, token_colour(map, i), i);
    }
    fputs("</g>\n", f);
}

/* Panel (layer, head) with its top-left heatmap corner at (x, y). */
static int svg_panel(const AttnMap *map, const SvgLayout *lay, const float *w, int layer,
                     int head, int x, int y, FILE *f) {
    int T = map->n_tokens;
    const float *w_h = weights_row(w, T, head, 0);
    fprintf(f, "<g class=\"panel\" data-layer=\"%d\" data-head=\"%d\" "
            "transform=\"translate(%d %d)\">\n<text x=\"0\" y=\"-6\" font-size=\"%d\" "
            "font-weight=\"bold\">layer %d, head %d</text>\n<rect width=\"%d\" height=\"%d\" "
            "fill=\"url(#hatch)\"/>\n", layer, head, x, y, SVG_CAPTION_FONT, layer, head,
            lay->side, lay->side);
    if (lay->raster) {
        unsigned char *png = NULL;
        size_t n = png_encode(w_h, T, &png);
        if (n == 0) {
            fprintf(stderr, "attnmap: layer %d, head %d: out of memory for a %dx%d PNG\n",
                    layer, head, T, T);
            return -1;
        }
        fprintf(f, "<image class=\"p\" width=\"%d\" height=\"%d\" preserveAspectRatio=\"none\" "
                "image-rendering=\"optimizeSpeed\" style=\"image-rendering:pixelated\" "
                "xlink:href=\"data:image/png;base64,", lay->side, lay->side);
        write_base64(png, n, f);
        fputs("\"/>\n", f);
        free(png);
    } else {
        svg_cells(map, lay, w_h, f);
    }
    if (map->n_prompt > 0 && map->n_prompt < T) {   /* the prompt's end, up to the diagonal */
        int b = map->n_prompt * lay->cell;
        fprintf(f, "<path d=\"M%d %dV%d M0 %dH%d\" stroke=\"%s\" stroke-width=\"1\" "
                "stroke-dasharray=\"4 3\" fill=\"none\"/>\n", b, b, lay->side, b, b,
                COLOUR_GENERATED);
    }
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"%s\" "
            "stroke-width=\"0.5\"/>\n", lay->side, lay->side, COLOUR_FRAME);
    svg_axes(map, lay, f);
    fputs("</g>\n", f);
    return 0;
}

int attnmap_write_svg(const AttnMap *map, FILE *f) {
    if (map_check(map) != 0) return -1;
    SvgLayout lay;
    svg_layout(map, &lay);
    svg_begin(map, &lay, f);
    for (int r = 0; r < lay.n_rows && !ferror(f); r++) {
        int layer = lay.first_layer + r;
        const float *w = map_layer(map, layer);
        if (!w) return -1;
        for (int c = 0; c < lay.n_cols; c++) {
            int x = SVG_MARGIN + c * lay.panel_w + lay.gutter;
            int y = lay.top + r * lay.panel_h + SVG_CAPTION_H;
            if (svg_panel(map, &lay, w, layer, lay.first_head + c, x, y, f) != 0) return -1;
        }
    }
    fputs("</svg>\n", f);
    return write_end(f);
}

/* ======================================================================================
 * HTML explorer: the page is attnmap_page.html, written line by line with each @@name@@
 * marker in it replaced by what html_part writes: the title, the selectors' options, the
 * token chips and the data object the page's script draws everything else from. The
 * page is also well-formed XML (self-closed empty elements, quoted attributes, CSS and
 * script in CDATA sections commented out for HTML), which lets the tests check it with
 * the SVG's checker.
 * ==================================================================================== */

#define HTML_WEIGHT_SCALE 1000      /* weights embedded as integers 0..1000 */
#define HTML_MASKED (-1)            /* the embedded value of a masked cell */
#define HTML_MARK "@@"              /* opens and closes a marker in the page */
#define HTML_MARK_BYTES 2
#define HTML_SELECTED " selected=\"selected\""

/* attnmap_page.html, one string literal per line (C11 promises no more than 4095 bytes
 * in one), each ending in its newline: the Makefile writes them into the build folder. */
static const char *const HTML_PAGE[] = {
#include "attnmap_page.inc"
    NULL};

/* The layer the page opens at: the map's, or the last for every layer (-1). */
static int html_start_layer(const AttnMap *map) {
    return map->layer < 0 ? map->n_layers - 1 : map->layer;
}

/* A selector's <option>s 0..n-1, with `selected` marked; with_all: first an "all" (-1). */
static void html_options(int n, int selected, int with_all, FILE *f) {
    if (with_all)
        fprintf(f, "<option value=\"-1\"%s>all</option>", selected < 0 ? HTML_SELECTED : "");
    for (int k = 0; k < n; k++)
        fprintf(f, "<option value=\"%d\"%s>%d</option>", k, k == selected ? HTML_SELECTED : "",
                k);
}

/* One chip per token, classed prompt (p) or generated (g); the script finds them by order. */
static void html_chips(const AttnMap *map, FILE *f) {
    for (int i = 0; i < map->n_tokens; i++) {
        fprintf(f, "<span class=\"tok %s\" data-i=\"%d\" title=\"token %d\">",
                i < map->n_prompt ? "p" : "g", i, i);
        write_label(f, map, i, ATTNMAP_ESCAPE_XML, 0);
        fputs("</span>", f);
    }
}

/* The scale's stops as the rest of a CSS linear-gradient(): ",#rrggbb" each. */
static void html_scale_stops(FILE *f) {
    for (int k = 0; k < SCALE_STOPS; k++)
        fprintf(f, ",#%02x%02x%02x", SCALE[k][0], SCALE[k][1], SCALE[k][2]);
}

/* Every layer's and head's lower triangle, rows in order, as a JSON array (L, NH, T (T + 1) / 2)
 * of integers 0..HTML_WEIGHT_SCALE, HTML_MASKED where masked. Returns 0, or -1 after a
 * stderr line if the callback fails. */
static int html_weights(const AttnMap *map, FILE *f) {
    int T = map->n_tokens;
    fputs("[\n", f);
    for (int l = 0; l < map->n_layers && !ferror(f); l++) {
        const float *w = map_layer(map, l);
        if (!w) return -1;
        fputs(l ? ",\n[" : "[", f);
        for (int h = 0; h < map->n_heads; h++) {
            fputs(h ? ",\n[" : "[", f);
            for (int i = 0; i < T; i++) {
                const float *w_i = weights_row(w, T, h, i);
                for (int j = 0; j <= i; j++) {
                    long v = HTML_MASKED;
                    if (is_visible(w_i, i, j))
                        v = lround(clamp_weight((double)w_i[j]) * HTML_WEIGHT_SCALE);
                    fprintf(f, i + j ? ",%ld" : "%ld", v);
                }
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputc(']', f);
    return 0;
}

/* The JSON object the script reads (its D): the map's shape and opening view, the colour
 * scale's stops, the labels and the weights. Returns as html_weights. */
static int html_data(const AttnMap *map, FILE *f) {
    fputs("{\"title\": \"", f);
    write_title(f, map, ATTNMAP_ESCAPE_JSON);
    fprintf(f, "\", \"n_layers\": %d, \"n_heads\": %d, \"n_prompt\": %d, \"layer\": %d, "
            "\"head\": %d, \"unit\": %d, \"generated\": \"%s\",\n\"scale\": [", map->n_layers,
            map->n_heads, map->n_prompt, html_start_layer(map), map->head, HTML_WEIGHT_SCALE,
            COLOUR_GENERATED);
    for (int k = 0; k < SCALE_STOPS; k++)
        fprintf(f, "%s[%d, %d, %d]", k ? ", " : "", SCALE[k][0], SCALE[k][1], SCALE[k][2]);
    fputs("],\n\"tokens\": [", f);
    for (int i = 0; i < map->n_tokens; i++) {
        fputs(i ? ", \"" : "\"", f);
        write_label(f, map, i, ATTNMAP_ESCAPE_JSON, 0);
        fputc('"', f);
    }
    fputs("],\n\"w\": ", f);
    if (html_weights(map, f) != 0) return -1;
    fputc('}', f);
    return 0;
}

/* Whether the marker name (n bytes) is `want`. */
static int is_marker(const char *name, size_t n, const char *want) {
    return strlen(want) == n && memcmp(name, want, n) == 0;
}

/* The shift note as a sentence after the legend's first: " The context shifted ...", or
 * nothing when it never shifted. */
static void html_shift_note(const AttnMap *map, FILE *f) {
    char note[SHIFT_NOTE_MAX];
    shift_note(map, note, sizeof note);
    if (note[0]) fprintf(f, " %c%s.", toupper((unsigned char)note[0]), note + 1);
}

/* What the page's marker @@name@@ (name: n bytes) stands for: signature, title, n_tokens,
 * shift_note, space_mark, hatch_back, hatch_line, scale_stops, layer_options,
 * head_options, token_chips or data. Returns 0, or -1 after a stderr line when the
 * callback fails or the marker is none of these. */
static int html_part(const AttnMap *map, const char *name, size_t n, FILE *f) {
    if (is_marker(name, n, "signature")) fputs(ATTNMAP_SIGNATURE, f);
    else if (is_marker(name, n, "title")) write_title(f, map, ATTNMAP_ESCAPE_XML);
    else if (is_marker(name, n, "n_tokens")) fprintf(f, "%d", map->n_tokens);
    else if (is_marker(name, n, "shift_note")) html_shift_note(map, f);
    else if (is_marker(name, n, "space_mark")) fputs(SPACE_MARK, f);
    else if (is_marker(name, n, "hatch_back")) fputs(COLOUR_HATCH_BACK, f);
    else if (is_marker(name, n, "hatch_line")) fputs(COLOUR_HATCH_LINE, f);
    else if (is_marker(name, n, "scale_stops")) html_scale_stops(f);
    else if (is_marker(name, n, "layer_options"))
        html_options(map->n_layers, html_start_layer(map), 0, f);
    else if (is_marker(name, n, "head_options")) html_options(map->n_heads, map->head, 1, f);
    else if (is_marker(name, n, "token_chips")) html_chips(map, f);
    else if (is_marker(name, n, "data")) return html_data(map, f);
    else {
        fprintf(stderr, "attnmap: page: unknown marker %s%.*s%s\n", HTML_MARK, (int)n, name,
                HTML_MARK);
        return -1;
    }
    return 0;
}

int attnmap_write_html(const AttnMap *map, FILE *f) {
    if (map_check(map) != 0) return -1;
    for (int k = 0; HTML_PAGE[k] && !ferror(f); k++) {
        const char *text = HTML_PAGE[k], *open, *close;
        while ((open = strstr(text, HTML_MARK)) &&
               (close = strstr(open + HTML_MARK_BYTES, HTML_MARK))) {
            fwrite(text, 1, (size_t)(open - text), f);
            const char *name = open + HTML_MARK_BYTES;
            if (html_part(map, name, (size_t)(close - name), f) != 0) return -1;
            text = close + HTML_MARK_BYTES;
        }
        fputs(text, f);
    }
    return write_end(f);
}

/* ======================================================================================
 * Text view
 * ==================================================================================== */

typedef struct {
    float weight;
    int key;
} TopEntry;

/* Larger weight first; on ties the lower key. */
static int top_order(const void *a, const void *b) {
    const TopEntry *x = a, *y = b;
    if (x->weight != y->weight) return x->weight > y->weight ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

void attnmap_print_label(const unsigned char *label, size_t len, FILE *f) {
    Sink s = {f, NULL, 0, 0, 0, 0};
    fputc('"', f);
    put_label(&s, label, len, ATTNMAP_ESCAPE_TEXT, 0, 0);
    fputc('"', f);
}

int attnmap_print_top(const AttnTop *top, int k, FILE *f) {
    if (!top || !top->labels || !top->label_lens || !top->row) {
        fprintf(stderr, "attnmap: top: missing labels, label lengths or weights\n");
        return -1;
    }
    int T = top->n_keys;
    if (!in_range("n_heads", top->n_heads, 1, INT_MAX) ||
        !in_range("n_keys", T, 1, INT_MAX) || !in_range("layer", top->layer, 0, INT_MAX) ||
        !in_range("query", top->query, 0, T - 1) || !in_range("k", k, 1, INT_MAX))
        return -1;
    TopEntry *entries = malloc((size_t)(top->query + 1) * sizeof *entries);
    if (!entries) {
        fprintf(stderr, "attnmap: out of memory for %d keys\n", top->query + 1);
        return -1;
    }
    for (int h = 0; h < top->n_heads; h++) {
        const float *w_h = top->row + (size_t)h * T;      /* seek to row[h, :] */
        int n = 0;
        for (int j = 0; j <= top->query; j++)
            if (is_visible(w_h, top->query, j)) entries[n++] = (TopEntry){w_h[j], j};
        qsort(entries, (size_t)n, sizeof *entries, top_order);
        fprintf(f, "  L%d H%d:", top->layer, h);
        if (n == 0) fputs(" (no visible keys)", f);
        for (int e = 0; e < n && e < k; e++) {
            int j = entries[e].key;
            fputs(e ? "  " : " ", f);
            attnmap_print_label(top->labels[j], top->label_lens[j], f);
            fprintf(f, "@%d %.3f", j, (double)entries[e].weight);
        }
        fputc('\n', f);
    }
    free(entries);
    return write_end(f);
}
