/* tutorial_figures.c: the pictures of docs/tutorial.md (docs/img/), drawn as SVG on
 * standard output by `./tutorial svg NAME`, each at most 800 px wide with text of 14 px
 * or more so that it reads at the width of a documentation column. The pictures of worked
 * examples take their numbers from the same calls as the tutorial's commands
 * (tutorial.c); the others (the head split, the cache, the block, the training step) are
 * diagrams.
 * `make docs-figures` writes them all.
 */
#include "tutorial.h"

#include <math.h>      /* expf, sqrtf, logf, log2f, floorf, ceilf, fminf, fmaxf */
#include <stdarg.h>    /* va_list */
#include <stdio.h>     /* printf, vprintf, fprintf, snprintf */
#include <stdlib.h>    /* malloc, free, qsort */
#include <string.h>    /* strcmp, strlen, memcpy */

#include "attention.h" /* attention_weights */
#include "block.h"     /* block_matmul */
#include "cli.h"       /* cli_printable */
#include "kernels.h"   /* Matrix, kernels_gelu, kernels_swiglu, kernels_dot */
#include "tokenizer.h" /* tokenizer_decode, tokenizer_free */

#define INK "#222222"      /* text and lines */
#define GRID "#999999"     /* cell borders */
#define Q_FILL "#fde0c5"   /* queries */
#define K_FILL "#c6dbef"   /* keys */
#define V_FILL "#c7e9c0"   /* values */
#define X_FILL "#eeeeee"   /* token vectors, neutral */
#define HIDE "#dddddd"     /* hidden (masked) cells */

/* ------------------------------------------------------------------------- */
/* SVG                                                                         */

static void figure_svg_begin(int width, int height, const char *title) {
    printf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
           "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
           "font-size=\"15\" fill=\"" INK "\">\n<title>%s</title>\n"
           "<defs><marker id=\"arrow\" markerWidth=\"10\" markerHeight=\"8\" refX=\"9\" "
           "refY=\"4\" orient=\"auto\"><path d=\"M0 0L10 4L0 8z\" fill=\"" INK "\"/>"
           "</marker><pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"8\" "
           "height=\"8\"><rect width=\"8\" height=\"8\" fill=\"#f2f2f2\"/><path "
           "d=\"M0 8L8 0\" stroke=\"#bbbbbb\"/></pattern></defs>\n"
           "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
           width, height, width, height, title, width, height);
}

static void svg_end(void) { printf("</svg>\n"); }

/* A rectangle; stroke NULL for none. */
static void svg_rect(float x, float y, float w, float h, const char *fill, const char *stroke) {
    printf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
           (double)x, (double)y, (double)w, (double)h, fill);
    if (stroke) printf(" stroke=\"%s\"", stroke);
    printf("/>\n");
}

/* A line, with an arrow head at its end if arrow. */
static void svg_line(float x1, float y1, float x2, float y2, int arrow) {
    printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" INK "\"%s/>\n",
           (double)x1, (double)y1, (double)x2, (double)y2,
           arrow ? " marker-end=\"url(#arrow)\"" : "");
}

/* Text at (x, y); anchor "start", "middle" or "end"; size in px. The text is the
 * printf of fmt: the callers' own strings, with no character XML would read as markup. */
static void svg_text(float x, float y, int size, const char *anchor, const char *fmt, ...) {
    printf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", (double)x,
           (double)y, size, anchor);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("</text>\n");
}

/* A matrix m (rows, cols) drawn as cells of `cell` px with its numbers (`decimals`),
 * top left at (x, y), a label above it. */
static void svg_matrix(float x, float y, const float *m, int rows, int cols, float cell,
                       int decimals, const char *fill, const char *label) {
    svg_text(x + cols * cell / 2, y - 8, 16, "middle", "%s", label);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            float cx = x + c * cell, cy = y + r * cell;
            svg_rect(cx, cy, cell, cell, fill, GRID);
            svg_text(cx + cell / 2, cy + cell / 2 + 5, 15, "middle", "%.*f", decimals,
                     (double)m[r * cols + c]);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* The pictures                                                                */

/* kernel: the Gaussian bump of width sigma = 4 around the query 82, each person's waist
 * under it with the weight it gets and the kilograms it brings. */
static int figure_kernel(void) {
    float w[TUTORIAL_PEOPLE], out;
    if (tutorial_kernel(4.0f, 82.0f, w, &out) != 0) return 1;
    const float x0 = 60, x1 = 100, left = 60, width = 680, base = 330, height = 200;
#define PX(v) (left + ((v) - x0) / (x1 - x0) * width)
    figure_svg_begin(800, 410,
                     "kernel regression: weights of the waist table for a waist of 82 cm");
    svg_line(left, base, left + width, base, 0);
    for (int v = 60; v <= 100; v += 5) {
        svg_line(PX((float)v), base, PX((float)v), base + 6, 0);
        svg_text(PX((float)v), base + 24, 15, "middle", "%d", v);
    }
    svg_text(left + width / 2, base + 50, 16, "middle", "waist (cm)");
    printf("<path fill=\"none\" stroke=\"#e6550d\" stroke-width=\"2.5\" d=\"");
    for (int i = 0; i <= 200; i++) {   /* exp(-(82 - waist)^2 / (2 sigma^2)), sigma = 4 */
        float v = x0 + (x1 - x0) * (float)i / 200.0f, d = (v - 82.0f) / 4.0f;
        printf("%c%.1f %.1f", i ? 'L' : 'M', (double)PX(v),
               (double)(base - height * expf(-0.5f * d * d)));
    }
    printf("\"/>\n");
    svg_line(PX(82), base, PX(82), base - height - 44, 0);
    svg_text(PX(82), base - height - 52, 16, "middle", "query 82: guess %.2f kg", (double)out);
    for (int j = 0; j < TUTORIAL_PEOPLE; j++) {
        float x = PX(TUTORIAL_WAIST[j]), h = height * w[j] / w[1];
        svg_rect(x - 14, base - h, 28, h, "#9ecae1", INK);
        svg_text(x, base - h - 26, 15, "middle", "%.0f kg", (double)TUTORIAL_KG[j]);
        svg_text(x, base - h - 8, 15, "middle", "a = %.4f", (double)w[j]);
    }
    svg_text(left, 26, 15, "start", "curve: exp(-(82 - waist)\xc2\xb2 / 2\xcf\x83\xc2\xb2), "
             "\xcf\x83 = 4");
    svg_text(left, 48, 15, "start", "bars: the softmax weights (the tallest scaled "
             "to the curve)");
#undef PX
    svg_end();
    return 0;
}

/* qkv: x (3, 4) times W_Q^T, W_K^T, W_V^T (4, 3) gives q, k, v (3, 3), by block_matmul:
 * the engine stores each W as (out, in) = (3, 4), so the picture draws its transpose and
 * writes the product as `./tutorial qkv` prints it. */
static int figure_qkv(void) {
    const float cell = 36;
    const float *weights[3] = {TUTORIAL_WQ, TUTORIAL_WK, TUTORIAL_WV};
    const char *fills[3] = {Q_FILL, K_FILL, V_FILL};
    static const char *names[3][2] = {{"W_Q^T (4, 3)", "q = x W_Q^T"},
                                      {"W_K^T", "k = x W_K^T"}, {"W_V^T", "v = x W_V^T"}};
    figure_svg_begin(800, 590, "q, k and v from the same tokens x through three matrices");
    svg_matrix(30, 230, TUTORIAL_X, 3, 4, cell, 0, X_FILL, "x (3 tokens, 4)");
    for (int m = 0; m < 3; m++) {
        float y = 40 + m * 180, wt[12], out[9];
        for (int i = 0; i < 4; i++)   /* W^T (in, out): row i meets column i of x */
            for (int o = 0; o < 3; o++) wt[i * 3 + o] = weights[m][o * 4 + i];
        Matrix w = {.f32 = weights[m]};
        block_matmul(out, TUTORIAL_X, &w, NULL, 3, 4, 3, NULL, NULL);
        svg_line(180, 284, 320, y + 70, 1);
        svg_matrix(330, y + 10, wt, 4, 3, cell, 0, "#ffffff", names[m][0]);
        svg_line(450, y + 82, 560, y + 82, 1);
        svg_matrix(580, y + 28, out, 3, 3, cell, 0, fills[m], names[m][1]);
    }
    svg_text(30, 380, 15, "start", "row t of x is token t");
    svg_text(30, 402, 15, "start", "row t of q, k, v: its query,");
    svg_text(30, 424, 15, "start", "key and value");
    svg_end();
    return 0;
}

/* heads: the shipped model's 128 columns of q, k, v cut into 4 heads of 32; each head
 * attends on its own columns; the outputs side by side go through W_O. */
static int figure_heads(void) {
    static const char *fills[4] = {"#fdd0a2", "#c6dbef", "#c7e9c0", "#dadaeb"};
    const float left = 110, width = 640, col = width / 4;
    figure_svg_begin(800, 430, "multi-head attention: 4 heads of 32 columns each");
    static const char *rows[3] = {"q (T, 128)", "k (T, 128)", "v (T, 128)"};
    for (int r = 0; r < 3; r++) {
        float y = 40 + r * 60;
        svg_text(left - 10, y + 27, 16, "end", "%s", rows[r]);
        for (int h = 0; h < 4; h++) {
            svg_rect(left + h * col, y, col, 40, fills[h], INK);
            svg_text(left + h * col + col / 2, y + 26, 15, "middle",
                     "columns %d..%d", 32 * h, 32 * h + 31);
        }
    }
    for (int h = 0; h < 4; h++) {
        float x = left + h * col + col / 2;
        svg_line(x, 218, x, 248, 1);
        svg_rect(x - 70, 252, 140, 40, "#ffffff", INK);
        svg_text(x, 277, 15, "middle", "head %d: softmax", h);
        svg_line(x, 292, x, 318, 1);
        svg_rect(left + h * col, 322, col, 36, fills[h], INK);
    }
    svg_text(left - 10, 345, 16, "end", "out (T, 128)");
    svg_line(left + width / 2, 358, left + width / 2, 388, 1);
    svg_text(left + width / 2, 412, 16, "middle",
             "\xc3\x97 W_O^T (128, 128): the heads' outputs mixed into the stream");
    svg_end();
    return 0;
}

/* mask: the example's causal weights (attention_weights), the future hatched. */
static int figure_mask(void) {
    const float cell = 90, x0 = 200, y0 = 90;
    AttentionShape shape = {1, 1, 3, 1.0f / sqrtf(3.0f)};
    AttentionConfig cfg;
    attention_config_default(&cfg);
    float w[9], scratch[1024];   /* (3, 3) NAN where a key is hidden */
    if (attention_weights(&cfg, &shape, NULL, 3, w, TUTORIAL_Q, TUTORIAL_K, 0, 3, scratch) != 0)
        return 1;
    figure_svg_begin(760, 420, "the causal mask: each token attends to itself and earlier tokens");
    svg_text(x0 + 1.5f * cell, 40, 16, "middle", "keys \xe2\x86\x92");
    svg_text(x0 - 30, y0 - 40, 16, "end", "queries \xe2\x86\x93");
    for (int t = 0; t < 3; t++) {
        svg_text(x0 + t * cell + cell / 2, y0 - 12, 15, "middle", "token %d", t);
        svg_text(x0 - 12, y0 + t * cell + cell / 2 + 5, 15, "end", "token %d", t);
        for (int j = 0; j < 3; j++) {
            float x = x0 + j * cell, y = y0 + t * cell;
            if (isnan(w[t * 3 + j])) {
                svg_rect(x, y, cell, cell, "url(#hatch)", GRID);
                svg_text(x + cell / 2, y + cell / 2 + 5, 15, "middle", "future");
                continue;
            }
            float a = w[t * 3 + j];
            int dark = a > 0.5f;
            printf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#08519c\" "
                   "fill-opacity=\"%.3f\" stroke=\"" GRID "\"/>\n", (double)x, (double)y,
                   (double)cell, (double)cell, (double)(0.08f + 0.92f * a));
            printf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" text-anchor=\"middle\"%s>"
                   "%.4f</text>\n", (double)(x + cell / 2), (double)(y + cell / 2 + 6),
                   dark ? " fill=\"white\"" : "", (double)a);
        }
    }
    svg_text(x0 + 1.5f * cell, y0 + 3 * cell + 40, 15, "middle",
             "weights of the worked example (scaled, d = 3); each row sums to 1");
    svg_end();
    return 0;
}

/* cache: decoding token 7: its q, k, v are computed, k and v appended to the cache, and
 * the query attends over every cached row. */
static int figure_cache(void) {
    const float left = 150, cell = 62, top = 130;
    figure_svg_begin(800, 390, "the KV cache: keys and values of earlier positions are kept");
    static const char *rows[2] = {"K cache", "V cache"};
    static const char *fills[2] = {K_FILL, V_FILL};
    for (int r = 0; r < 2; r++) {
        float y = top + r * 64;
        svg_text(left - 12, y + 30, 16, "end", "%s", rows[r]);
        for (int p = 0; p < 8; p++) {
            svg_rect(left + p * cell, y, cell - 6, 46, p < 7 ? fills[r] : "#ffffff", INK);
            svg_text(left + p * cell + (cell - 6) / 2, y + 29, 15, "middle", "%c%d%s",
                     "kv"[r], p, p < 7 ? "" : " new");
        }
    }
    float qx = left + 7 * cell + (cell - 6) / 2;
    svg_rect(qx + 60, 20, 56, 46, Q_FILL, INK);
    svg_text(qx + 88, 49, 15, "middle", "q7");
    for (int p = 0; p < 8; p++)
        svg_line(qx + 60, 50, left + p * cell + (cell - 6) / 2, top - 4, 1);
    svg_text(left - 12, 40, 15, "end", "token 7:");
    svg_text(left, 40, 15, "start", "only its own q7, k7, v7 are computed;");
    svg_text(left, 300, 15, "start", "k7 and v7 fill the new column, and q7 scores against "
             "all eight keys:");
    svg_text(left, 322, 15, "start", "no earlier row is computed again. One such pair per "
             "layer:");
    svg_text(left, 344, 15, "start", "(L, NKV, n_alloc, HS) floats for the keys, the same "
             "for the values");
    svg_end();
    return 0;
}

/* One box of the block diagram, centred at x, top at y. */
static void block_box(float x, float y, float w, const char *fill, const char *text) {
    svg_rect(x - w / 2, y, w, 36, fill, INK);
    svg_text(x, y + 24, 15, "middle", "%s", text);
}

/* block: one transformer block as block.c runs it, with the residual stream. */
static int figure_block(void) {
    const float mid = 380, stream = 120, box = 420;
    figure_svg_begin(800, 660, "one transformer block (pre-norm GPT-2; Llama in brackets)");
    svg_text(stream, 30, 16, "middle", "x (T, C)");
    svg_line(stream, 40, stream, 620, 1);
    svg_text(stream, 645, 16, "middle", "out (T, C)");
    static const struct { const char *text, *fill; } boxes[] = {
        {"LayerNorm [RMSNorm]", X_FILL},
        {"q, k, v = x W_Q^T, x W_K^T, x W_V^T [RoPE on q, k]", Q_FILL},
        {"attention (causal, per head)", K_FILL}, {"\xc3\x97 W_O^T", X_FILL},
        {"LayerNorm [RMSNorm]", X_FILL}, {"\xc3\x97 W_up^T (C \xe2\x86\x92 4C)", V_FILL},
        {"GELU [SiLU(x W_up^T) \xc2\xb7 x W_gate^T]", V_FILL},
        {"\xc3\x97 W_down^T (4C \xe2\x86\x92 C)", V_FILL}};
    float y = 60;
    for (int i = 0; i < 8; i++) {
        if (i == 0 || i == 4) {   /* a branch leaves the stream */
            svg_line(stream, y + 18, mid - box / 2, y + 18, 1);
        } else {
            svg_line(mid, y - 22, mid, y, 1);
        }
        block_box(mid, y, box, boxes[i].fill, boxes[i].text);
        y += 58;
        if (i == 3 || i == 7) {   /* ... and joins it again: the residual sum */
            svg_line(mid, y - 22, mid, y + 6, 0);
            svg_line(mid, y + 6, stream + 14, y + 6, 1);
            printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"12\" fill=\"white\" stroke=\"" INK
                   "\"/>\n", (double)stream, (double)(y + 6));
            svg_text(stream, y + 12, 18, "middle", "+");
            svg_text(mid + box / 2 + 12, y + 12, 15, "start", "residual");
            y += 40;
        }
    }
    svg_text(mid + box / 2 + 12, 113, 15, "start", "block_qkv");
    svg_text(mid + box / 2 + 12, 200, 15, "start", "attention_forward");
    svg_text(mid + box / 2 + 12, 258, 15, "start", "block_finish,");
    svg_text(mid + box / 2 + 12, 278, 15, "start", "to the end");
    svg_end();
    return 0;
}

/* sampling: the toy distribution at temperatures 0.5, 1 and 2, and the top-p = 0.9
 * nucleus at temperature 1. */
static int figure_sampling(void) {
    static const float temps[3] = {0.5f, 1.0f, 2.0f};
    const float left = 70, group = 140, bar = 36, base = 300, height = 240;
    figure_svg_begin(800, 420, "softmax(logits / T) of five words at three temperatures");
    svg_line(left, base, left + 5 * group, base, 0);
    for (int tick = 0; tick <= 4; tick++) {
        float y = base - height * (float)tick / 4.0f;
        svg_line(left - 6, y, left, y, 0);
        svg_text(left - 10, y + 5, 14, "end", "%.2f", (double)tick / 4.0);
    }
    static const char *fills[3] = {"#08519c", "#6baed6", "#c6dbef"};
    for (int t = 0; t < 3; t++) {
        float scaled[TUTORIAL_TOY_V], p[TUTORIAL_TOY_V];
        for (int i = 0; i < TUTORIAL_TOY_V; i++) scaled[i] = TUTORIAL_LOGITS[i] / temps[t];
        tutorial_softmax(p, scaled, TUTORIAL_TOY_V);
        for (int i = 0; i < TUTORIAL_TOY_V; i++) {
            float x = left + i * group + 12 + t * bar, h = height * p[i];
            svg_rect(x, base - h, bar - 4, h, fills[t], INK);
            if (t == 1) svg_text(x + bar / 2 - 2, base - h - 6, 14, "middle", "%.2f",
                                 (double)p[i]);
        }
        svg_rect(470 + t * 100, 20, 18, 18, fills[t], INK);
        svg_text(494 + t * 100, 35, 15, "start", "T = %g", (double)temps[t]);
    }
    for (int i = 0; i < TUTORIAL_TOY_V; i++)
        svg_text(left + i * group + 12 + 1.5f * bar, base + 24, 16, "middle", "%s",
                 TUTORIAL_WORDS[i]);
    /* top-p 0.9 at T = 1: king, queen, night, sun make 0.9719 >= 0.9; fool is cut */
    float cut = left + 4 * group;
    printf("<line x1=\"%.1f\" y1=\"60\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6550d\" "
           "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n", (double)cut, (double)cut,
           (double)(base + 36));
    svg_text(cut - 8, 80, 15, "end", "top-p 0.9 at T = 1 keeps these four");
    svg_text(left, 362, 15, "start", "lower T sharpens the distribution, higher T "
             "flattens it;");
    svg_text(left, 384, 15, "start", "top-k and top-p cut the tail off before the draw");
    svg_end();
    return 0;
}

/* A token's bytes as a label: a space drawn as the open box U+2423, a newline as U+21B5,
 * XML's special characters escaped, any other byte below 32 or above 126 as \xNN. */
static const char *token_label(const Tokenizer *t, int id) {
    static char out[8 * TUTORIAL_MAX_WORD + 1];
    size_t len, o = 0;
    const unsigned char *b = tokenizer_decode(t, -1, id, &len);
    for (size_t i = 0; i < len && o + 8 < sizeof out; i++) {
        const char *s = NULL;
        char hex[8];
        if (b[i] == ' ') s = "\xe2\x90\xa3";
        else if (b[i] == '\n') s = "\xe2\x86\xb5";
        else if (b[i] == '&') s = "&amp;";
        else if (b[i] == '<') s = "&lt;";
        else if (b[i] == '>') s = "&gt;";
        else if (b[i] < 32 || b[i] > 126) snprintf(hex, sizeof hex, "\\x%02x", b[i]), s = hex;
        if (s) {
            size_t n = strlen(s);
            memcpy(out + o, s, n);
            o += n;
        } else {
            out[o++] = (char)b[i];
        }
    }
    out[o] = '\0';
    return out;
}

/* merges: BPE on " thee" (tutorial_merges): one row per merge, from the bytes to the
 * final token, each token a box as wide as its bytes, the new one coloured. */
static int figure_merges(void) {
    Tokenizer t;
    if (tutorial_load_tokenizer(&t) != 0) return 1;
    TutorialMergeRow rows[TUTORIAL_MAX_WORD];
    int n = tutorial_merges(&t, " thee", rows, TUTORIAL_MAX_WORD);
    if (n < 1) {
        tokenizer_free(&t);
        return 1;
    }
    const float left = 300, byte_w = 76, row_h = 78, top = 90;
    figure_svg_begin(800, (int)(top + n * row_h + 50),
                     "byte-pair encoding of \" thee\": one merge per row, lowest id first");
    svg_text(30, 34, 16, "start", "BPE on \xe2\x90\xa3thee (\xe2\x90\xa3 is the space): "
             "each row merges the adjacent pair");
    svg_text(30, 56, 16, "start", "whose token has the lowest id; the box below is its id");
    for (int r = 0; r < n; r++) {
        float y = top + r * row_h, x = left;
        if (rows[r].id < 0) {
            svg_text(left - 24, y + 28, 16, "end", "the 5 bytes");
        } else {
            svg_text(left - 24, y + 28, 16, "end", "merge id %d: %s", rows[r].id,
                     token_label(&t, rows[r].id));
        }
        for (int i = 0; i < rows[r].count; i++) {
            size_t len;
            tokenizer_decode(&t, -1, rows[r].ids[i], &len);
            float w = byte_w * (float)len;
            int is_new = rows[r].ids[i] == rows[r].id;
            svg_rect(x + 2, y, w - 4, 40, is_new ? Q_FILL : X_FILL, INK);
            svg_text(x + w / 2, y + 27, 18, "middle", "%s", token_label(&t, rows[r].ids[i]));
            svg_text(x + w / 2, y + 60, 14, "middle", "%d", rows[r].ids[i]);
            x += w;
        }
    }
    svg_text(30, top + n * row_h + 24, 15, "start", "coloured: the token the row's merge made; "
             "5 bytes end as %d token%s", rows[n - 1].count, rows[n - 1].count == 1 ? "" : "s");
    svg_end();
    tokenizer_free(&t);
    return 0;
}

/* rope: tutorial_rope's q at positions 0 .. 3, each pair of numbers drawn as an arrow:
 * pair (0, 1) turns 1 rad per position, pair (2, 3) 0.01 rad. */
static int figure_rope(void) {
    enum { HS = 4, SHOWN = 4 };
    float q[TUTORIAL_ROPE_N * HS], k[TUTORIAL_ROPE_N * HS];
    tutorial_rope(q, k);
    static const char *shade[SHOWN] = {"#fdae6b", "#f16913", "#d94801", "#7f2704"};
    const float unit = 100, cy = 250;
    figure_svg_begin(800, 500, "rotary positions: q at positions 0 to 3, pair by pair");
    for (int pair = 0; pair < 2; pair++) {
        float cx = 200 + pair * 400;
        svg_text(cx, 40, 16, "middle", pair ? "pair (2, 3): 0.01 rad per position"
                                            : "pair (0, 1): 1 rad per position");
        printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"" GRID
               "\" stroke-dasharray=\"4 4\"/>\n", (double)cx, (double)cy,
               (double)(unit * sqrtf(2.0f)));
        svg_line(cx - 170, cy, cx + 170, cy, 0);
        svg_line(cx, cy - 170, cx, cy + 170, 0);
        for (int p = 0; p < SHOWN; p++) {
            float a = q[p * HS + 2 * pair], b = q[p * HS + 2 * pair + 1];
            float x = cx + unit * a, y = cy - unit * b;
            printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" "
                   "fill=\"%s\"/>\n", (double)cx, (double)cy, (double)x, (double)y,
                   shade[p], (double)x, (double)y, shade[p]);
            if (pair == 0) {   /* the label beyond the tip, out of the arrow's way */
                float d = sqrtf(a * a + b * b), r = unit * d + 30;
                svg_text(cx + r * a / d, cy - r * b / d + 5, 15, "middle", "p = %d", p);
            }
        }
        if (pair == 1)
            svg_text(cx + unit + 40, cy - unit - 30, 15, "middle", "p = 0 .. 3");
    }
    svg_text(400, 440, 15, "middle", "each pair of q (and of k) turns by the position "
             "times its own angle;");
    svg_text(400, 464, 15, "middle", "so q_m \xc2\xb7 k_n depends on m \xe2\x88\x92 n only: "
             "q_1 \xc2\xb7 k_0 = q_4 \xc2\xb7 k_3 = %.4f", (double)kernels_dot(q + HS, k, HS));
    svg_end();
    return 0;
}

/* mlp: GELU and SiLU (SwiGLU's activation, gate 1) by kernels_gelu and kernels_swiglu on
 * [-4, 4], ReLU dashed for comparison, the step's seven points on GELU. */
static int figure_mlp(void) {
    enum { N = 161, POINTS = 7 };
    static const float points[POINTS] = {-3, -1, -0.5f, 0, 0.5f, 1, 3};
    float x[N], gelu[N], silu[N], ones[N], pg[POINTS];
    for (int i = 0; i < N; i++) x[i] = -4.0f + 8.0f * (float)i / (float)(N - 1), ones[i] = 1;
    kernels_gelu(gelu, x, N);
    kernels_swiglu(silu, x, ones, N);
    kernels_gelu(pg, points, POINTS);
    const float left = 90, top = 60, width = 640, height = 320, ymin = -1, ymax = 4;
#define MX(v) (left + ((v) + 4.0f) / 8.0f * width)
#define MY(v) (top + (ymax - (v)) / (ymax - ymin) * height)
    figure_svg_begin(800, 460, "GELU and SiLU, the MLP's activations, from the engine's kernels");
    for (int v = -4; v <= 4; v++) {
        svg_line(MX((float)v), MY(ymin), MX((float)v), MY(ymin) + 6, 0);
        svg_text(MX((float)v), MY(ymin) + 24, 15, "middle", "%d", v);
    }
    for (int v = -1; v <= 4; v++) {
        svg_line(left - 6, MY((float)v), left, MY((float)v), 0);
        svg_text(left - 10, MY((float)v) + 5, 15, "end", "%d", v);
    }
    svg_line(left, MY(ymin), left + width, MY(ymin), 0);
    svg_line(left, MY(ymin), left, MY(ymax), 0);
    printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" GRID "\"/>\n",
           (double)left, (double)MY(0), (double)(left + width), (double)MY(0));
    svg_text(left + width / 2, MY(ymin) + 50, 16, "middle", "x");
    printf("<path fill=\"none\" stroke=\"#999999\" stroke-width=\"2\" "
           "stroke-dasharray=\"6 5\" d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1f\"/>\n", (double)MX(-4),
           (double)MY(0), (double)MX(0), (double)MY(0), (double)MX(4), (double)MY(4));
    static const char *colour[2] = {"#e6550d", "#3182bd"};
    for (int c = 0; c < 2; c++) {
        const float *y = c ? silu : gelu;
        printf("<path fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" d=\"", colour[c]);
        for (int i = 0; i < N; i++)
            printf("%c%.1f %.1f", i ? 'L' : 'M', (double)MX(x[i]), (double)MY(y[i]));
        printf("\"/>\n");
    }
    for (int i = 0; i < POINTS; i++)
        printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>\n",
               (double)MX(points[i]), (double)MY(pg[i]), colour[0]);
    static const char *names[3] = {"GELU (GPT-2); dots: ./tutorial mlp", "SiLU (Llama's SwiGLU)",
                                   "ReLU, max(0, x), for comparison"};
    static const char *keys[3] = {"#e6550d", "#3182bd", "#999999"};
    for (int c = 0; c < 3; c++) {
        printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
               "stroke-width=\"3\"%s/>\n", (double)(left + 20), (double)(top + 14 + c * 24),
               (double)(left + 50), (double)(top + 14 + c * 24), keys[c],
               c == 2 ? " stroke-dasharray=\"6 5\"" : "");
        svg_text(left + 58, top + 19 + c * 24, 15, "start", "%s", names[c]);
    }
    svg_text(MX(-4), 30, 15, "start", "both pass the positives, let a little of the "
             "negatives through, and bend near 0");
#undef MX
#undef MY
    svg_end();
    return 0;
}

/* lens: tutorial_lens on the block step's text: for each token that was ever the top
 * guess, its probability after the embeddings and after each block; the top outlined. */
static int figure_lens(void) {
    enum { MAX_ROWS = 8 };
    TutorialLens lens;
    if (tutorial_lens(&lens, TUTORIAL_LENS_TEXT) != 0) return 1;
    int V = lens.vocab_size, S = lens.n_stages, rows[MAX_ROWS], n_rows = 0, best[64];
    if (S > 64) {
        tutorial_lens_free(&lens);
        return 1;
    }
    for (int s = 0; s < S; s++) {   /* the top token of each stage, distinct ones as rows */
        const float *p = lens.probs + (size_t)s * V;
        best[s] = 0;
        for (int i = 1; i < V; i++)
            if (p[i] > p[best[s]]) best[s] = i;
        int seen = 0;
        for (int r = 0; r < n_rows; r++) seen |= rows[r] == best[s];
        if (!seen && n_rows < MAX_ROWS) rows[n_rows++] = best[s];
    }
    const float left = 130, cell_w = 60, cell_h = 48, top = 100;
    figure_svg_begin(800, (int)(top + n_rows * cell_h + 50),
                     "the next token if the model stopped after each block");
    svg_text(30, 30, 16, "start", "text: \"ROMEO:\xe2\x86\xb5" "But soft, what light through "
             "yonder\"; the next token's probability");
    svg_text(30, 52, 16, "start", "if the model stopped after each block (outlined: its "
             "top guess there)");
    for (int s = 0; s < S; s++) {
        float x = left + s * cell_w + cell_w / 2;
        if (s == 0) svg_text(x, top - 12, 15, "middle", "emb.");
        else svg_text(x, top - 12, 15, "middle", "%d", s - 1);
    }
    svg_text(left + S * cell_w / 2, top + n_rows * cell_h + 30, 15, "middle",
             "after the embeddings, then after block 0 .. %d", S - 2);
    for (int r = 0; r < n_rows; r++) {
        float y = top + r * cell_h;
        svg_text(left - 14, y + cell_h / 2 + 6, 18, "end", "\"%s\"",
                 token_label(&lens.tokenizer, rows[r]));
        for (int s = 0; s < S; s++) {
            float x = left + s * cell_w, a = lens.probs[(size_t)s * V + rows[r]];
            int top_guess = best[s] == rows[r];
            printf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#08519c\" "
                   "fill-opacity=\"%.3f\" stroke=\"%s\" stroke-width=\"%s\"/>\n", (double)x,
                   (double)y, (double)cell_w, (double)cell_h,
                   (double)(0.04f + 0.96f * sqrtf(a)), top_guess ? "#e6550d" : GRID,
                   top_guess ? "3" : "1");
            printf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\"%s>"
                   "%.3f</text>\n", (double)(x + cell_w / 2), (double)(y + cell_h / 2 + 5),
                   sqrtf(a) > 0.5f ? " fill=\"white\"" : "", (double)a);
        }
    }
    svg_end();
    tutorial_lens_free(&lens);
    return 0;
}

/* tokenloss: tutorial_losses on the loss step's text: each predicted token's loss as a
 * bar, its probability above it, the mean and a uniform guess's ln V as lines. */
static int figure_tokenloss(void) {
    static TutorialLosses l;
    if (tutorial_losses(&l, TUTORIAL_LOSS_TEXT) != 0) return 1;
    int n = l.n_tokens - 1, V = l.tokenizer.vocab_size;
    if (n < 1 || n > 12) {   /* one bar per predicted token: 12 fit the picture */
        fprintf(stderr, "tutorial: svg tokenloss: the model's tokenizer makes %d tokens of "
                "its text, expected 2 to 13 (the shipped model's)\n", l.n_tokens);
        tutorial_losses_free(&l);
        return 1;
    }
    const float left = 70, slot = 680.0f / (float)n, base = 380, per_nat = 40;
    float mean = 0;
    for (int i = 1; i <= n; i++) mean += l.loss[i] / (float)n;
    figure_svg_begin(800, 460, "the loss of each next token of a text, by the shipped model");
    svg_text(left, 30, 16, "start", "each token's loss, -ln p, given the tokens before it "
             "(p above each bar)");
    for (int v = 0; v <= 7; v++) {
        svg_line(left - 6, base - v * per_nat, left, base - v * per_nat, 0);
        svg_text(left - 10, base - v * per_nat + 5, 15, "end", "%d", v);
    }
    svg_line(left, base, left + n * slot, base, 0);
    svg_line(left, base, left, base - 7 * per_nat, 0);
    printf("<text x=\"22\" y=\"%.1f\" font-size=\"15\" text-anchor=\"middle\" "
           "transform=\"rotate(-90 22 %.1f)\">nats</text>\n", (double)(base - 3.5f * per_nat),
           (double)(base - 3.5f * per_nat));
    for (int i = 1; i <= n; i++) {
        float x = left + (i - 1) * slot, h = l.loss[i] * per_nat;
        svg_rect(x + 10, base - h, slot - 20, h, "#9ecae1", INK);
        svg_text(x + slot / 2, base - h - 8, 14, "middle", "%.3f", (double)l.p[i]);
        svg_text(x + slot / 2, base + 24, 17, "middle", "\"%s\"",
                 token_label(&l.tokenizer, l.ids[i]));
    }
    float uniform = logf((float)V);
    printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6550d\" "
           "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n", (double)left,
           (double)(base - uniform * per_nat), (double)(left + n * slot),
           (double)(base - uniform * per_nat));
    svg_text(left + n * slot, base - uniform * per_nat - 8, 15, "end",
             "a uniform guess: ln %d = %.2f", V, (double)uniform);
    printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" INK "\" "
           "stroke-width=\"2\" stroke-dasharray=\"2 4\"/>\n", (double)left,
           (double)(base - mean * per_nat), (double)(left + n * slot),
           (double)(base - mean * per_nat));
    svg_text(left + 8, base - mean * per_nat - 8, 15, "start", "the mean: %.3f",
             (double)mean);
    svg_text(left, base + 56, 15, "start", "text: \"ROMEO:\xe2\x86\xb5" "But soft, what "
             "light\"; ROMEO, the first token, is given (\xe2\x86\xb5: newline, "
             "\xe2\x90\xa3: space)");
    svg_end();
    tutorial_losses_free(&l);
    return 0;
}

/* One box of the training diagram, centred at x, top at y, 44 px tall: a line of text and
 * the function that does it (NULL: none). */
static void train_box(float x, float y, float w, const char *fill, const char *text,
                      const char *code) {
    svg_rect(x - w / 2, y, w, 44, fill, INK);
    svg_text(x, y + (code ? 19 : 27), 15, "middle", "%s", text);
    if (code) svg_text(x, y + 37, 14, "middle", "%s", code);
}

/* train: one training step as the trainer runs it: the forward pass down, keeping every
 * layer's activations; the loss; the backward pass up, each step mirroring one of the
 * forward; AdamW on every parameter. */
static int figure_train(void) {
    static const struct { const char *fwd, *fwd_code, *bwd, *bwd_code; } rows[] = {
        {"embed: wte[token] + wpe[pos]", NULL, "into the rows of wte, wpe",
         "train_embedding_backward"},
        {"norm, q, k, v", "block_qkv", "into x, the norm, W_Q, W_K, W_V", "block_qkv_backward"},
        {"attention", "attention_forward", "through the softmax", "attention_backward"},
        {"W_O, residual, norm, MLP, residual", "block_finish", "into W_O, the MLP, its norm",
         "block_finish_backward"},
        {"final norm, logits (T, V)", NULL, "into the final norm, the classifier", NULL},
        {"softmax, loss = mean -ln p", "train_crossentropy_forward", "p \xe2\x88\x92 "
         "onehot(target)", "train_crossentropy_backward"}};
    const int n = 6;
    const float fx = 210, bx = 590, bw = 330, top = 80, step = 70;
    figure_svg_begin(800, 640, "one training step: forward, loss, backward, AdamW");
    svg_text(fx, 40, 16, "middle", "forward (down)");
    svg_text(bx, 40, 16, "middle", "backward (up): gradients");
    svg_text(fx, 62, 15, "middle", "a batch of B texts of T tokens");
    for (int r = 0; r < n; r++) {
        float y = top + r * step;
        const char *fill = r >= 1 && r <= 3 ? K_FILL : X_FILL;
        train_box(fx, y, bw, fill, rows[r].fwd, rows[r].fwd_code);
        train_box(bx, y, bw, r == n - 1 ? Q_FILL : V_FILL, rows[r].bwd, rows[r].bwd_code);
        if (r + 1 < n) {
            svg_line(fx, y + 44, fx, y + step - 2, 1);
            svg_line(bx, y + step, bx, y + 46, 1);
        }
        if (r < n - 1)   /* the forward's activations, kept for the backward */
            printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" "
                   "stroke-dasharray=\"5 4\" marker-end=\"url(#arrow)\"/>\n",
                   (double)(fx + bw / 2), (double)(y + 22), (double)(bx - bw / 2 - 2),
                   (double)(y + 22));
    }
    float last = top + (n - 1) * step;
    svg_line(fx + bw / 2, last + 22, bx - bw / 2 - 2, last + 22, 1);   /* loss -> its grad */
    /* the gradients (every backward box writes some) go to AdamW, which updates the
     * parameters that the next step's forward reads */
    const float ay = top + n * step + 20, right = bx + bw / 2, leftx = fx - bw / 2;
    train_box(400, ay, 420, Q_FILL, "AdamW: every parameter moves against its gradient",
              "kernels_adamw");
    svg_line(right, top + 22, right + 22, top + 22, 0);
    svg_line(right + 22, top + 22, right + 22, ay + 22, 0);
    svg_line(right + 22, ay + 22, 610, ay + 22, 1);
    svg_line(190, ay + 22, leftx - 22, ay + 22, 0);
    svg_line(leftx - 22, ay + 22, leftx - 22, top + 22, 0);
    svg_line(leftx - 22, top + 22, leftx - 2, top + 22, 1);
    svg_text(400, ay + 76, 15, "middle", "blue: once per layer, L times (the backward from the "
             "last layer to the first);");
    svg_text(400, ay + 98, 15, "middle", "dashed: the activations the forward keeps for the "
             "backward; then the next batch");
    svg_end();
    return 0;
}

/* adamw: tutorial_adamw on one parameter from 1, the adamw step's three gradients and
 * then -0.5 until step 12, with weight decay 0 and 0.5: momentum carries the parameter on
 * down after the gradient turns. */
static int figure_adamw(void) {
    enum { STEPS = 10 };
    float path[2][STEPS + 1], grads[STEPS + 1], lo = 1.0f, hi = 1.0f;
    for (int pass = 0; pass < 2; pass++) {
        float param = 1.0f, m = 0.0f, v = 0.0f;
        path[pass][0] = param;
        for (int step = 1; step <= STEPS; step++) {
            grads[step] = step <= 3 ? TUTORIAL_ADAMW_GRADS[step - 1] : -0.5f;
            tutorial_adamw(&param, &m, &v, grads[step], step, pass ? 0.5f : 0.0f);
            path[pass][step] = param;
            lo = fminf(lo, param), hi = fmaxf(hi, param);
        }
    }
    const float left = 90, top = 90, width = 660, height = 290;
    const float ymin = floorf(lo * 10.0f) / 10.0f, ymax = ceilf(hi * 10.0f) / 10.0f;
#define AX(s) (left + (float)(s) / (float)STEPS * width)
#define AY(v) (top + (ymax - (v)) / (ymax - ymin) * height)
    figure_svg_begin(800, 520, "AdamW: one parameter over 10 steps, with and without weight decay");
    svg_text(30, 30, 16, "start", "one parameter from 1, lr %g; steps 1 to 3 are",
             (double)TUTORIAL_ADAMW_LR);
    svg_text(30, 52, 16, "start", "./tutorial adamw's, then the gradient stays \xe2\x88\x92" "0.5");
    for (int i = 0; ymin + 0.1f * (float)i <= ymax + 1e-3f; i++) {
        float v = ymin + 0.1f * (float)i;
        svg_line(left - 6, AY(v), left, AY(v), 0);
        svg_text(left - 10, AY(v) + 5, 15, "end", "%.1f", (double)v);
    }
    svg_line(left, AY(ymin), left + width, AY(ymin), 0);
    svg_line(left, AY(ymin), left, AY(ymax), 0);
    for (int step = 0; step <= STEPS; step++) {
        svg_line(AX(step), AY(ymin), AX(step), AY(ymin) + 6, 0);
        svg_text(AX(step), AY(ymin) + 24, 15, "middle", "%d", step);
        if (step > 0)
            svg_text(AX(step), AY(ymin) + 48, 15, "middle", "%s", grads[step] > 0 ? "+0.5" :
                     "\xe2\x88\x92" "0.5");
    }
    svg_text(left - 24, AY(ymin) + 24, 15, "end", "step");
    svg_text(left - 24, AY(ymin) + 48, 15, "end", "gradient");
    static const char *colour[2] = {"#3182bd", "#e6550d"};
    static const char *names[2] = {"weight decay 0", "weight decay 0.5"};
    for (int pass = 0; pass < 2; pass++) {
        printf("<path fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" d=\"", colour[pass]);
        for (int step = 0; step <= STEPS; step++)
            printf("%c%.1f %.1f", step ? 'L' : 'M', (double)AX(step),
                   (double)AY(path[pass][step]));
        printf("\"/>\n");
        for (int step = 0; step <= STEPS; step++)
            printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n",
                   (double)AX(step), (double)AY(path[pass][step]), colour[pass]);
        printf("<line x1=\"560\" y1=\"%d\" x2=\"590\" y2=\"%d\" stroke=\"%s\" "
               "stroke-width=\"3\"/>\n", 25 + pass * 24, 25 + pass * 24, colour[pass]);
        svg_text(598, (float)(30 + pass * 24), 15, "start", "%s", names[pass]);
    }
    for (int step = 1; step <= 3; step++)   /* the printed values */
        svg_text(AX(step) + 8, AY(path[0][step]) - 10, 14, "start", "%.4f",
                 (double)path[0][step]);
    svg_text(30, AY(ymin) + 90, 15, "start", "the gradient turns at step 3, the parameter "
             "only later; steps 1 and 2 move it by lr exactly,");
    svg_text(30, AY(ymin) + 112, 15, "start", "whatever the gradient's size; weight decay "
             "pulls it towards 0 besides");
#undef AX
#undef AY
    svg_end();
    return 0;
}

/* Descending order of floats, for qsort. */
static int by_value_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* nucleus: the shipped model's next-token distribution after two texts (tutorial_lens's
 * last stage, model_forward's logits), sorted: the share the likeliest r tokens hold
 * against r on a log scale, and where top-p 0.9 (run's default) and top-k 40 cut. */
static int figure_nucleus(void) {
    static const char *texts[2] = {"ROMEO:", TUTORIAL_LENS_TEXT};
    static const char *names[2] = {"after \"ROMEO:\"", "after \"ROMEO:\xe2\x86\xb5" "But soft, "
                                   "what light through yonder\""};
    static const char *colour[2] = {"#e6550d", "#3182bd"};
    const float top_p = 0.9f, left = 90, right = 740, top = 110, bottom = 380;
    const int top_k = 40;
    /* Both distributions before the first line of the picture, so that a failure prints
     * no half a picture. */
    TutorialLens lens[2];
    if (tutorial_lens(&lens[0], texts[0]) != 0) return 1;
    if (tutorial_lens(&lens[1], texts[1]) != 0) {
        tutorial_lens_free(&lens[0]);
        return 1;
    }
    int V = lens[0].vocab_size;
    float *sorted_both = malloc(2 * (size_t)V * sizeof(float));
    if (!sorted_both) fprintf(stderr, "tutorial: out of memory\n");
    for (int t = 0; t < 2 && sorted_both; t++) {
        float *sorted = sorted_both + (size_t)t * V;
        memcpy(sorted, lens[t].probs + (size_t)(lens[t].n_stages - 1) * V,
               (size_t)V * sizeof(float));
        qsort(sorted, (size_t)V, sizeof(float), by_value_desc);
    }
    tutorial_lens_free(&lens[0]);
    tutorial_lens_free(&lens[1]);
    if (!sorted_both) return 1;
    figure_svg_begin(800, 475, "top-p and top-k on the shipped model's real distributions");
    svg_text(30, 30, 16, "start", "the share of the probability the likeliest r tokens hold, "
             "by the shipped model");
    const float bits = log2f((float)V);
    for (int t = 0; t < 2; t++) {
        const float *sorted = sorted_both + (size_t)t * V;
#define NX(r) (left + log2f((float)(r)) / bits * (right - left))
#define NY(p) (bottom - (p) * (bottom - top))
        if (t == 0) {   /* axes, once V is known */
            for (int r = 1; r <= V; r *= 2) {
                svg_line(NX(r), bottom, NX(r), bottom + 6, 0);
                svg_text(NX(r), bottom + 24, 14, "middle", "%d", r);
            }
            svg_text((left + right) / 2, bottom + 50, 16, "middle", "r, the likeliest tokens "
                     "kept (log scale)");
            for (int i = 0; i <= 4; i++) {
                svg_line(left - 6, NY(0.25f * (float)i), left, NY(0.25f * (float)i), 0);
                svg_text(left - 10, NY(0.25f * (float)i) + 5, 15, "end", "%.2f",
                         (double)(0.25f * (float)i));
            }
            svg_line(left, bottom, right, bottom, 0);
            svg_line(left, bottom, left, top, 0);
            printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" "
                   "stroke-dasharray=\"6 4\"/>\n", (double)left, (double)NY(top_p),
                   (double)right, (double)NY(top_p));
            svg_text(right, NY(top_p) + 20, 15, "end", "top-p %.1f (run's default)",
                     (double)top_p);
            printf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999999\" "
                   "stroke-dasharray=\"6 4\"/>\n", (double)NX(top_k), (double)top,
                   (double)NX(top_k), (double)bottom);
            svg_text(NX(top_k) + 6, NY(0.08f), 15, "start", "top-k %d", top_k);
        }
        float cumulative = 0;
        int kept = 0;
        printf("<path fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" d=\"", colour[t]);
        for (int r = 1; r <= V; r++) {
            cumulative += sorted[r - 1];
            if (!kept && cumulative > top_p) kept = r;
            printf("%c%.1f %.1f", r > 1 ? 'L' : 'M', (double)NX(r), (double)NY(cumulative));
        }
        printf("\"/>\n");
        float kept_share = 0;
        for (int r = 1; r <= kept; r++) kept_share += sorted[r - 1];
        printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\"/>\n", (double)NX(kept),
               (double)NY(kept_share), colour[t]);
        svg_text(NX(kept) + (t ? -10 : 12), NY(kept_share) + (t ? -12 : 48), 15,
                 t ? "end" : "start", "top-p keeps %d token%s", kept, kept == 1 ? "" : "s");
        printf("<line x1=\"30\" y1=\"%d\" x2=\"60\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n",
               56 + t * 24, 56 + t * 24, colour[t]);
        svg_text(68, (float)(61 + t * 24), 15, "start", "%s: the likeliest token %.3f", names[t],
                 (double)sorted[0]);
    }
    free(sorted_both);
#undef NX
#undef NY
    svg_text(30, 458, 15, "start", "top-p keeps as many tokens as the model's doubt needs; "
             "top-k, always the same number");
    svg_end();
    return 0;
}

/* ------------------------------------------------------------------------- */
/* By name                                                                     */

static const struct {
    const char *name;
    int (*draw)(void);
} FIGURES[] = {
    {"kernel", figure_kernel}, {"qkv", figure_qkv}, {"heads", figure_heads},
    {"mask", figure_mask},     {"cache", figure_cache}, {"block", figure_block},
    {"sampling", figure_sampling}, {"merges", figure_merges}, {"rope", figure_rope},
    {"mlp", figure_mlp}, {"lens", figure_lens}, {"tokenloss", figure_tokenloss},
    {"train", figure_train}, {"adamw", figure_adamw}, {"nucleus", figure_nucleus},
};

int tutorial_figure(const char *name) {
    for (size_t i = 0; i < sizeof FIGURES / sizeof FIGURES[0]; i++)
        if (strcmp(name, FIGURES[i].name) == 0) return FIGURES[i].draw();
    char shown[64];
    fprintf(stderr, "tutorial: svg %s: no such picture (%s)\n",
            cli_printable(name, shown, sizeof shown), tutorial_figure_names());
    return 2;
}

const char *tutorial_figure_names(void) {
    return "kernel, qkv, heads, mask, cache, block, sampling, merges, rope, mlp, lens, "
           "tokenloss, nucleus, train, adamw";
}
