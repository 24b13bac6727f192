/* tutorial_figures.c: the pictures of docs/tutorial.md (docs/img/), drawn as SVG on
 * standard output by `./tutorial svg NAME`, each at most 800 px wide with text of 14 px
 * or more so that it reads at the width of a documentation column. The pictures of worked
 * examples take their numbers from the same calls as the tutorial's commands
 * (tutorial.c); the others (the head split, the cache, the block) are diagrams.
 * `make docs-figures` writes them all.
 */
#include "tutorial.h"

#include <math.h>      /* expf, sqrtf */
#include <stdarg.h>    /* va_list */
#include <stdio.h>     /* printf, vprintf, fprintf */
#include <string.h>    /* strcmp */

#include "attention.h" /* attention_weights */
#include "block.h"     /* block_matmul */
#include "kernels.h"   /* Matrix */

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
    svg_text(left, 344, 15, "start", "(L, n_ctx, KVD) floats for the keys, the same for "
             "the values");
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

/* ------------------------------------------------------------------------- */
/* By name                                                                     */

static const struct {
    const char *name;
    int (*draw)(void);
} FIGURES[] = {
    {"kernel", figure_kernel}, {"qkv", figure_qkv}, {"heads", figure_heads},
    {"mask", figure_mask},     {"cache", figure_cache}, {"block", figure_block},
    {"sampling", figure_sampling},
};

int tutorial_figure(const char *name) {
    for (size_t i = 0; i < sizeof FIGURES / sizeof FIGURES[0]; i++)
        if (strcmp(name, FIGURES[i].name) == 0) return FIGURES[i].draw();
    fprintf(stderr, "tutorial: svg %s: no such picture (%s)\n", name, tutorial_figure_names());
    return 2;
}

const char *tutorial_figure_names(void) {
    return "kernel, qkv, heads, mask, cache, block, sampling";
}
