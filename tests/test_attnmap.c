/* test_attnmap.c: the attention pictures, page and text view (attnmap.c) on weights made
 * here: a causal uniform pattern (1/(i+1), with garbage, not NaN, above the diagonal, which
 * must still be masked) and a window pattern (sink + last keys, NaN elsewhere, one weight
 * exactly 0), under labels chosen to break XML, JSON and terminals.
 *
 * The outputs are checked by a small XML well-formedness checker of this file (tags
 * nested, attributes quoted, only the predefined or numeric entities, valid UTF-8, no
 * control characters), by xmllint and node when they are installed, and by reading back
 * the numbers every cell carries: the SVG's data-q/k/w, the PNG pixels of a big map, the
 * page's embedded integers, the text view's lines.
 */
#include "attnmap.h"

#include <math.h>      /* NAN, isnan, sqrt, fabs, lround */
#include <stdint.h>    /* uint32_t */
#include <stdio.h>     /* tmpfile, fopen, snprintf */
#include <stdlib.h>    /* malloc, free, strtol, strtod */
#include <string.h>    /* strstr, strncmp, memcmp */
#include <unistd.h>    /* access */

#include "tests/check.h"  /* check_* */

#define W_ATOL 5.1e-5      /* data-w is printed with 4 decimals: half a unit of the last */
#define WINDOW 3           /* the window fixture: key 0 (the sink) plus the last 3 keys */
#define ERROR_CAP 256      /* the XML checker's message */
#define TMP_PATH_MAX 64

/* ======================================================================================
 * Fixtures
 * ==================================================================================== */

enum { FIX_UNIFORM, FIX_WINDOW };

typedef struct {
    int L, NH, T;                  /* layers, heads, tokens */
    int kind;                      /* FIX_UNIFORM or FIX_WINDOW */
    float *w;                      /* (L, NH, T, T) */
    int fail_layer;                /* the callback returns NULL for this layer (-1: never) */
} Fixture;

/* The weight query i gives key j in the fixture, NaN when masked. Rows are softmax-like:
 * the visible weights sum to 1. Window: scores 1 + (j (l + 2) + 3 h + i) mod 7 over the
 * sink and the last WINDOW keys, with the sink's score 0 in head 1 (a weight exactly 0). */
static void fixture_fill(Fixture *fx) {
    int T = fx->T;
    for (int l = 0; l < fx->L; l++) {
        for (int h = 0; h < fx->NH; h++) {
            for (int i = 0; i < T; i++) {
                float *row = fx->w + (((size_t)l * fx->NH + h) * T + i) * T;
                double z = 0.0;
                for (int j = 0; j < T; j++) {
                    if (fx->kind == FIX_UNIFORM) {
                        row[j] = j <= i ? 1.0f / (float)(i + 1) : 5.0f;   /* future: garbage */
                        continue;
                    }
                    if (j > i || (j != 0 && i - j >= WINDOW)) { row[j] = NAN; continue; }
                    double score = (h == 1 && j == 0 && i > 0) ? 0.0
                                 : 1 + (j * (l + 2) + 3 * h + i) % 7;
                    row[j] = (float)score;
                    z += score;
                }
                if (fx->kind == FIX_WINDOW)
                    for (int j = 0; j <= i; j++)
                        if (!isnan(row[j])) row[j] = (float)((double)row[j] / z);
            }
        }
    }
}

/* fixture weight (l, h, i, j) as the module must read it: NaN when masked or future */
static double fixture_weight(const Fixture *fx, int l, int h, int i, int j) {
    if (j > i) return (double)NAN;
    return (double)fx->w[(((size_t)l * fx->NH + h) * fx->T + i) * fx->T + j];
}

static const float *fixture_layer(void *ctx, int layer) {
    Fixture *fx = ctx;
    if (layer == fx->fail_layer) return NULL;
    return fx->w + (size_t)layer * fx->NH * fx->T * fx->T;
}

/* Labels that try to break every context, in order: markup characters, an embedded NUL,
 * invalid UTF-8 (0xFF, an overlong 0xC0 0x80), a 3-byte character cut after 2 bytes, a
 * closing script tag, controls, a C1 control, U+2028, U+FFFE, valid é, €, an emoji, an
 * encoded surrogate, a CDATA end, a literal backslash-x, an empty label, DEL, a leading
 * space, and a comment opener. */
static const char *const HOSTILE[] = {
    "<&>'\"", "a\0b", "\xff", "\xc0\x80", "x\xe2\x82", "</script>", "\n\t\r", "\xc2\x85",
    "\xe2\x80\xa8", "\xef\xbf\xbe", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
    "\xed\xa0\x80", "]]>", "\\x41", "", "\x7f", " the", "<!--"};
static const size_t HOSTILE_LEN[] = {5, 3, 1, 2, 3, 9, 3, 2, 3, 3, 2, 3, 4, 3, 3, 4, 0, 1, 4, 4};
#define N_HOSTILE ((int)(sizeof HOSTILE / sizeof HOSTILE[0]))

typedef struct {
    const unsigned char *labels[ATTNMAP_MAX_TOKENS];
    size_t lens[ATTNMAP_MAX_TOKENS];
} Labels;

/* Token i's label: the hostile ones in turn. */
static void labels_fill(Labels *lb, int T) {
    for (int i = 0; i < T; i++) {
        lb->labels[i] = (const unsigned char *)HOSTILE[i % N_HOSTILE];
        lb->lens[i] = HOSTILE_LEN[i % N_HOSTILE];
    }
}

static AttnMap map_make(Fixture *fx, const Labels *lb, int layer, int head) {
    AttnMap map = {fx->L, fx->NH, fx->T, layer, head, fx->T / 3, 0, 0, lb->labels, lb->lens,
                   "weights/model.bin, attention window:w=3 <test> & \"quotes\"",
                   fixture_layer, fx};
    return map;
}

static int fixture_init(Fixture *fx, int L, int NH, int T, int kind) {
    fx->L = L;
    fx->NH = NH;
    fx->T = T;
    fx->kind = kind;
    fx->fail_layer = -1;
    fx->w = malloc((size_t)L * NH * T * T * sizeof *fx->w);
    if (!fx->w) return -1;
    fixture_fill(fx);
    return 0;
}

/* ======================================================================================
 * Writing to a string
 * ==================================================================================== */

typedef int (*Writer)(const AttnMap *map, FILE *f);

/* What writer writes for map, as a malloc'd string (caller frees), *rc its return. */
static char *write_to_string(Writer writer, const AttnMap *map, int *rc, size_t *len) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    *rc = writer(map, f);
    long size = ftell(f);
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    rewind(f);
    if (text && fread(text, 1, (size_t)size, f) != (size_t)size) { free(text); text = NULL; }
    if (text) text[size] = '\0';
    *len = text ? (size_t)size : 0;
    fclose(f);
    return text;
}

/* ======================================================================================
 * A small XML well-formedness checker: enough of XML 1.0 for what attnmap writes and
 * for catching what it must never write.
 * ==================================================================================== */

/* Decodes the UTF-8 character at s (n bytes left): its length, or 0 if invalid. */
static int utf8_char(const unsigned char *s, size_t n, uint32_t *code) {
    int len = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF
            ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    static const unsigned char lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t c = s[0] & lead_mask[len];
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *code = c;
    return len;
}

/* The XML 1.0 Char production, without the noncharacters U+FFFE and U+FFFF. */
static int xml_char(uint32_t c) {
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
           (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

typedef struct {
    const char *doc;
    size_t n, pos;
    char *error;                   /* (ERROR_CAP,) the first problem */
} Xml;

static int xml_fail(Xml *x, const char *what) {
    snprintf(x->error, ERROR_CAP, "at byte %zu: %s (near \"%.30s\")", x->pos, what,
             x->doc + x->pos);
    return 0;
}

static int name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int name_char(char c) {
    return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A name at x->pos; its length into *len. */
static int xml_name(Xml *x, size_t *len) {
    size_t start = x->pos;
    if (x->pos >= x->n || !name_start(x->doc[x->pos])) return xml_fail(x, "expected a name");
    while (x->pos < x->n && name_char(x->doc[x->pos])) x->pos++;
    *len = x->pos - start;
    return 1;
}

/* An entity or character reference starting at the '&' at x->pos. */
static int xml_reference(Xml *x) {
    static const char *const entities[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
    const char *p = x->doc + x->pos + 1;
    for (int e = 0; e < 5; e++) {
        size_t n = strlen(entities[e]);
        if (strncmp(p, entities[e], n) == 0) { x->pos += 1 + n; return 1; }
    }
    if (*p != '#') return xml_fail(x, "'&' that is not one of the 5 entities or a number");
    int hex = p[1] == 'x';
    char *end;
    long v = strtol(p + 1 + hex, &end, hex ? 16 : 10);
    if (end == p + 1 + hex || *end != ';' || !xml_char((uint32_t)v))
        return xml_fail(x, "a bad character reference");
    x->pos = (size_t)(end + 1 - x->doc);
    return 1;
}

/* Skips past `close`, which must come. */
static int xml_skip_to(Xml *x, const char *close, const char *what) {
    const char *end = strstr(x->doc + x->pos, close);
    if (!end) return xml_fail(x, what);
    x->pos = (size_t)(end - x->doc) + strlen(close);
    return 1;
}

enum { XML_MAX_DEPTH = 256, XML_MAX_ATTRS = 32 };

/* The open elements: where each one's name starts in the document, and its length. */
typedef struct {
    size_t at[XML_MAX_DEPTH], len[XML_MAX_DEPTH];
    int depth, roots;
} XmlStack;

/* Every character of the document is valid UTF-8 and one XML allows. */
static int xml_chars(Xml *x) {
    for (size_t i = 0; i < x->n;) {
        uint32_t c;
        int len = utf8_char((const unsigned char *)x->doc + i, x->n - i, &c);
        x->pos = i;
        if (len == 0) return xml_fail(x, "invalid UTF-8");
        if (!xml_char(c)) return xml_fail(x, "a character XML does not allow");
        i += (size_t)len;
    }
    x->pos = 0;
    return 1;
}

/* Character data at x->pos, up to the next '<'. */
static int xml_text(Xml *x, const XmlStack *s) {
    const char *p = x->doc + x->pos;
    if (*p == '&') return xml_reference(x);
    if (s->depth == 0 && !is_space(*p)) return xml_fail(x, "text outside the root");
    if (strncmp(p, "]]>", 3) == 0) return xml_fail(x, "\"]]>\" in text");
    x->pos++;
    return 1;
}

/* A comment, CDATA section, DOCTYPE or processing instruction at x->pos: 1 and skipped,
 * 0 after xml_fail, or -1 if there is none (a tag). */
static int xml_markup(Xml *x, const XmlStack *s) {
    const char *p = x->doc + x->pos;
    if (strncmp(p, "<!--", 4) == 0) {
        const char *end = strstr(p + 4, "--");
        if (!end || end[2] != '>') return xml_fail(x, "a comment without \"-->\"");
        x->pos = (size_t)(end - x->doc) + 3;
        return 1;
    }
    if (strncmp(p, "<![CDATA[", 9) == 0) {
        if (s->depth == 0) return xml_fail(x, "CDATA outside the root");
        return xml_skip_to(x, "]]>", "unclosed CDATA");
    }
    if (strncmp(p, "<!DOCTYPE", 9) == 0) {
        if (s->roots) return xml_fail(x, "DOCTYPE after the root");
        const char *end = strchr(p, '>');
        if (!end || memchr(p, '[', (size_t)(end - p))) return xml_fail(x, "bad DOCTYPE");
        x->pos = (size_t)(end - x->doc) + 1;
        return 1;
    }
    if (p[1] == '?') return xml_skip_to(x, "?>", "unclosed instruction");
    return -1;
}

/* The end tag at x->pos ("</"), which must close the innermost open element. */
static int xml_end_tag(Xml *x, XmlStack *s) {
    size_t len;
    x->pos += 2;
    size_t at = x->pos;
    if (!xml_name(x, &len)) return 0;
    while (x->pos < x->n && is_space(x->doc[x->pos])) x->pos++;
    if (x->pos >= x->n || x->doc[x->pos] != '>') return xml_fail(x, "an end tag without '>'");
    if (s->depth == 0 || s->len[s->depth - 1] != len ||
        memcmp(x->doc + s->at[s->depth - 1], x->doc + at, len) != 0)
        return xml_fail(x, "an end tag that does not match the open element");
    s->depth--;
    x->pos++;
    return 1;
}

/* One attribute's value at x->pos: quoted, without '<', references valid. */
static int xml_attribute_value(Xml *x) {
    char quote = x->pos < x->n ? x->doc[x->pos] : 0;
    if (quote != '"' && quote != '\'') return xml_fail(x, "an unquoted attribute value");
    for (x->pos++; x->pos < x->n && x->doc[x->pos] != quote;) {
        if (x->doc[x->pos] == '<') return xml_fail(x, "'<' in an attribute value");
        if (x->doc[x->pos] == '&') { if (!xml_reference(x)) return 0; }
        else x->pos++;
    }
    if (x->pos >= x->n) return xml_fail(x, "an unclosed attribute value");
    x->pos++;
    return 1;
}

/* A start tag's attributes, up to its '>' or "/>": separated by spaces, each once. */
static int xml_attributes(Xml *x) {
    size_t attr_at[XML_MAX_ATTRS], attr_len[XML_MAX_ATTRS];
    int attrs = 0;
    for (;;) {
        int spaced = 0;
        while (x->pos < x->n && is_space(x->doc[x->pos])) { x->pos++; spaced = 1; }
        if (x->pos >= x->n) return xml_fail(x, "an unclosed tag");
        if (x->doc[x->pos] == '>' || strncmp(x->doc + x->pos, "/>", 2) == 0) return 1;
        if (!spaced) return xml_fail(x, "attributes not separated by a space");
        size_t a_at = x->pos, a_len;
        if (!xml_name(x, &a_len)) return 0;
        for (int a = 0; a < attrs; a++)
            if (attr_len[a] == a_len && memcmp(x->doc + attr_at[a], x->doc + a_at, a_len) == 0)
                return xml_fail(x, "an attribute twice");
        if (attrs < XML_MAX_ATTRS) { attr_at[attrs] = a_at; attr_len[attrs++] = a_len; }
        while (x->pos < x->n && is_space(x->doc[x->pos])) x->pos++;
        if (x->pos >= x->n || x->doc[x->pos] != '=') return xml_fail(x, "an attribute without '='");
        x->pos++;
        while (x->pos < x->n && is_space(x->doc[x->pos])) x->pos++;
        if (!xml_attribute_value(x)) return 0;
    }
}

/* The start tag at x->pos ('<'): one root only; an element that is not empty is opened. */
static int xml_start_tag(Xml *x, XmlStack *s) {
    x->pos++;
    size_t at = x->pos, len;
    if (!xml_name(x, &len)) return 0;
    if (s->depth == 0 && s->roots++) return xml_fail(x, "a second root element");
    if (!xml_attributes(x)) return 0;
    if (x->doc[x->pos] != '>') {   /* "/>": empty */
        x->pos += 2;
        return 1;
    }
    if (s->depth == XML_MAX_DEPTH) return xml_fail(x, "nested too deep for this checker");
    s->at[s->depth] = at;
    s->len[s->depth++] = len;
    x->pos++;
    return 1;
}

/* Checks doc (n bytes): NULL if well-formed, else a message in error. */
static const char *xml_check(const char *doc, size_t n, char *error) {
    Xml x = {doc, n, 0, error};
    XmlStack s = {.depth = 0, .roots = 0};
    if (!xml_chars(&x)) return error;
    if (strncmp(doc, "<?xml", 5) == 0 && !xml_skip_to(&x, "?>", "unclosed declaration"))
        return error;
    while (x.pos < n) {
        int ok;
        if (doc[x.pos] != '<') ok = xml_text(&x, &s);
        else if ((ok = xml_markup(&x, &s)) >= 0) { /* skipped */ }
        else if (doc[x.pos + 1] == '/') ok = xml_end_tag(&x, &s);
        else ok = xml_start_tag(&x, &s);
        if (!ok) return error;
    }
    if (s.depth != 0) { xml_fail(&x, "unclosed elements at the end"); return error; }
    if (s.roots != 1) { xml_fail(&x, "no root element"); return error; }
    return NULL;
}

/* The checker must catch what it is for. */
static void test_checker(void) {
    static const char *const bad[] = {
        "<a><b></a></b>", "<a>x &nbsp; y</a>", "<a>1 < 2</a>", "<a b=c/>", "<a>\xff</a>",
        "<a>\x01</a>", "<a b=\"1\" b=\"2\"/>", "<a/><b/>", "<a>]]></a>", "<a>",
        "<a b=\"<\"/>", "<a>&#0;</a>", "<a>\xef\xbf\xbe</a>"};
    char error[ERROR_CAP];
    int caught = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *e = xml_check(bad[i], strlen(bad[i]), error);
        caught += e != NULL;
        if (!e) printf("  not caught: %s\n", bad[i]);
    }
    check_true(caught == (int)(sizeof bad / sizeof bad[0]), "the XML checker rejects %d of %zu "
               "broken documents", caught, sizeof bad / sizeof bad[0]);
    const char *good = "<?xml version=\"1.0\"?>\n<!DOCTYPE html>\n<a x='1' y=\"&amp;&#65;\">"
                       "<!-- c --><b/>t&lt;<![CDATA[ < & ]]>\xc3\xa9</a>\n";
    const char *e = xml_check(good, strlen(good), error);
    check_true(!e, "the XML checker accepts a well-formed document%s%s", e ? ": " : "", e ? e : "");
}

/* xmllint --noout on text, when installed. */
static void check_xmllint(const char *text, size_t len, const char *what) {
    if (check_run("command -v xmllint", NULL, NULL) != 0) {
        check_skip("xmllint not installed");
        return;
    }
    char path[TMP_PATH_MAX] = "/tmp/test_attnmap_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        check_true(0, "%s: could not write %s", what, path);
        return;
    }
    char command[2 * TMP_PATH_MAX], *err = NULL;
    snprintf(command, sizeof command, "xmllint --noout %s", path);
    int rc = check_run(command, NULL, &err);
    check_true(rc == 0, "%s: xmllint --noout accepts it (exit %d)%s%.200s", what, rc,
               rc ? ": " : "", rc && err ? err : "");
    free(err);
    remove(path);
}

/* ======================================================================================
 * Escaping
 * ==================================================================================== */

static void expect_escape(const char *label, size_t len, AttnMapEscape context,
                          const char *want) {
    static const char *const names[] = {"text", "xml", "json"};
    char out[256];
    size_t n = attnmap_escape((const unsigned char *)label, len, context, out, sizeof out);
    int ok = strcmp(out, want) == 0 && n == strlen(want);
    char shown[sizeof out];
    attnmap_escape((const unsigned char *)want, strlen(want), ATTNMAP_ESCAPE_TEXT, shown,
                   sizeof shown);
    check_true(ok, "escape (%s) gives \"%s\"%s%s", names[context], shown, ok ? "" : ", got ",
               ok ? "" : out);
}

static void test_escape(void) {
    expect_escape("<&>'\"", 5, ATTNMAP_ESCAPE_XML, "&lt;&amp;&gt;&apos;&quot;");
    expect_escape("<&>'\"", 5, ATTNMAP_ESCAPE_TEXT, "<&>'\\\"");
    expect_escape("<&>'\"", 5, ATTNMAP_ESCAPE_JSON, "\\u003c\\u0026\\u003e'\\\"");
    expect_escape("a\0b", 3, ATTNMAP_ESCAPE_TEXT, "a\\x00b");
    expect_escape("\xff", 1, ATTNMAP_ESCAPE_XML, "\\xff");
    expect_escape("\xc0\x80", 2, ATTNMAP_ESCAPE_XML, "\\xc0\\x80");
    expect_escape("x\xe2\x82", 3, ATTNMAP_ESCAPE_XML, "x\\xe2\\x82");
    expect_escape("</script>", 9, ATTNMAP_ESCAPE_JSON, "\\u003c/script\\u003e");
    expect_escape("\n\t\r", 3, ATTNMAP_ESCAPE_TEXT, "\\n\\t\\r");
    expect_escape("\n", 1, ATTNMAP_ESCAPE_JSON, "\\\\n");
    expect_escape("\xc2\x85", 2, ATTNMAP_ESCAPE_XML, "\\u0085");
    expect_escape("\xe2\x80\xa8", 3, ATTNMAP_ESCAPE_JSON, "\\\\u2028");
    expect_escape("\xef\xbf\xbe", 3, ATTNMAP_ESCAPE_XML, "\\ufffe");
    expect_escape("\xf4\x8f\xbf\xbf", 4, ATTNMAP_ESCAPE_XML, "\\U0010ffff");
    expect_escape("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, ATTNMAP_ESCAPE_XML,
                  "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    expect_escape("\xed\xa0\x80", 3, ATTNMAP_ESCAPE_XML, "\\xed\\xa0\\x80");
    expect_escape("\\x41", 4, ATTNMAP_ESCAPE_TEXT, "\\\\x41");
    expect_escape("\x7f", 1, ATTNMAP_ESCAPE_TEXT, "\\x7f");
    expect_escape(" the", 4, ATTNMAP_ESCAPE_XML, "\xe2\x90\xa3the");
    expect_escape(" the", 4, ATTNMAP_ESCAPE_TEXT, " the");
    expect_escape("\xe2\x90\xa3", 3, ATTNMAP_ESCAPE_XML, "\\u2423");
    expect_escape("", 0, ATTNMAP_ESCAPE_XML, "");

    char out[8];
    size_t n = attnmap_escape((const unsigned char *)"<<<", 3, ATTNMAP_ESCAPE_XML, out, sizeof out);
    check_true(n == 12 && strcmp(out, "&lt;") == 0, "a short buffer gets whole pieces only "
               "(\"%s\") and the full length (%zu)", out, n);
}

/* ======================================================================================
 * SVG
 * ==================================================================================== */

typedef struct {
    int panel, q, k, masked;
    double w;
} Cell;

/* The value of attribute name inside the tag that starts at tag, or NULL. */
static const char *attr(const char *tag, const char *name) {
    const char *end = strchr(tag, '>');
    char pattern[32];
    snprintf(pattern, sizeof pattern, " %s=\"", name);
    const char *at = strstr(tag, pattern);
    return at && at < end ? at + strlen(pattern) : NULL;
}

static int attr_int(const char *tag, const char *name) {
    const char *v = attr(tag, name);
    return v ? (int)strtol(v, NULL, 10) : -1;
}

/* Reads the panels (layer, head) and, unless cells is NULL, the cells of svg; returns the
 * cell count, or -1 if a cell lies outside any panel or there are more than cap. */
static long svg_cells(const char *svg, int *layers, int *heads, int *n_panels, int max_panels,
                      Cell *cells, long cap) {
    long n = 0;
    *n_panels = 0;
    for (const char *p = strchr(svg, '<'); p; p = strchr(p + 1, '<')) {
        if (strncmp(p, "<g class=\"panel\"", 16) == 0) {
            if (*n_panels == max_panels) return -1;
            layers[*n_panels] = attr_int(p, "data-layer");
            heads[(*n_panels)++] = attr_int(p, "data-head");
            continue;
        }
        int c = strncmp(p, "<rect class=\"c\"", 15) == 0;
        int m = strncmp(p, "<rect class=\"m\"", 15) == 0;
        if (!c && !m) continue;
        if (!cells) continue;
        if (*n_panels == 0 || n == cap) return -1;
        const char *w = attr(p, "data-w");
        cells[n] = (Cell){*n_panels - 1, attr_int(p, "data-q"), attr_int(p, "data-k"), m,
                          w ? strtod(w, NULL) : (double)NAN};
        n++;
    }
    return n;
}

/* Every panel of svg against fx: one cell per (query, key <= query), class m exactly where
 * the fixture is masked, data-w equal to the weight, rows summing to 1. */
static void check_svg_cells(const char *svg, const Fixture *fx, const char *what) {
    enum { MAX_PANELS = 64 };
    int layers[MAX_PANELS], heads[MAX_PANELS], n_panels, T = fx->T;
    long cap = (long)MAX_PANELS * T * T;
    Cell *cells = malloc((size_t)cap * sizeof *cells);
    int *count = malloc((size_t)T * T * sizeof *count);
    long n = cells && count ? svg_cells(svg, layers, heads, &n_panels, MAX_PANELS, cells, cap) : -1;
    if (n < 0) {
        check_true(0, "%s: cells read back", what);
        free(cells);
        free(count);
        return;
    }
    long bad_count = 0, bad_class = 0, bad_weight = 0, bad_sum = 0, zeros = 0;
    int zero_head = 0;             /* a panel of head 1, whose sink weights are 0 */
    for (int p = 0; p < n_panels; p++) {
        int l = layers[p], h = heads[p];
        zero_head |= h == 1;
        double *sum = calloc((size_t)T, sizeof *sum);
        memset(count, 0, (size_t)T * T * sizeof *count);
        for (long c = 0; c < n; c++) {
            const Cell *cell = &cells[c];
            if (cell->panel != p) continue;
            if (cell->q < 0 || cell->q >= T || cell->k < 0 || cell->k >= T) {
                bad_count++;
                continue;
            }
            count[cell->q * T + cell->k]++;
            double want = fixture_weight(fx, l, h, cell->q, cell->k);
            if (cell->masked != isnan(want)) { bad_class++; continue; }
            if (cell->masked) continue;
            if (!(fabs(cell->w - want) <= W_ATOL)) bad_weight++;
            if (cell->w == 0.0) zeros++;
            if (sum) sum[cell->q] += cell->w;
        }
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) bad_count += count[i * T + j] != (j <= i);
            if (sum && fabs(sum[i] - 1.0) > (i + 1) * W_ATOL) bad_sum++;
        }
        free(sum);
    }
    check_true(bad_count == 0, "%s: exactly one cell element per (query, key <= query) in each "
               "of %d panels, none for future keys (%ld wrong)", what, n_panels, bad_count);
    check_true(bad_class == 0, "%s: masked cells are class m, visible ones (0 included) class c "
               "(%ld wrong)", what, bad_class);
    check_true(bad_weight == 0 && bad_sum == 0, "%s: data-w equals each weight within %.1e; "
               "every row sums to 1 (%ld weights, %ld rows wrong)", what, W_ATOL, bad_weight,
               bad_sum);
    if (fx->kind == FIX_WINDOW && zero_head)
        check_true(zeros > 0, "%s: a weight of exactly 0 is a class c cell with data-w 0.0000 "
                   "(%ld of them), not a masked one", what, zeros);
    free(cells);
    free(count);
}

/* The panels of an SVG of map: count and (layer, head) order. */
static void check_svg_panels(const char *svg, const AttnMap *map, const char *what) {
    enum { MAX_PANELS = 64 };
    int layers[MAX_PANELS], heads[MAX_PANELS], n_panels, ok = 1;
    svg_cells(svg, layers, heads, &n_panels, MAX_PANELS, NULL, 0);
    int rows = map->layer < 0 ? map->n_layers : 1, cols = map->head < 0 ? map->n_heads : 1;
    for (int p = 0; p < n_panels && p < rows * cols; p++) {
        int want_layer = map->layer < 0 ? p / cols : map->layer;
        int want_head = map->head < 0 ? p % cols : map->head;
        ok &= layers[p] == want_layer && heads[p] == want_head;
    }
    check_true(n_panels == rows * cols && ok, "%s: %d panels (want %d) in layer-major order, "
               "captioned with their layer and head", what, n_panels, rows * cols);
}

static void test_svg(void) {
    static const struct { int layer, head; const char *what; } selections[] = {
        {1, -1, "svg layer 1"}, {-1, -1, "svg all layers"}, {-1, 2, "svg head 2 of every layer"},
        {0, 1, "svg layer 0 head 1"}};
    static Labels labels;
    Fixture fx;
    char error[ERROR_CAP];
    for (int kind = FIX_UNIFORM; kind <= FIX_WINDOW; kind++) {
        int T = kind == FIX_UNIFORM ? 9 : N_HOSTILE;
        if (fixture_init(&fx, 2, 3, T, kind) != 0) { check_true(0, "fixture memory"); return; }
        labels_fill(&labels, T);
        for (size_t s = 0; s < sizeof selections / sizeof selections[0]; s++) {
            if (kind == FIX_UNIFORM && s > 0) break;
            AttnMap map = map_make(&fx, &labels, selections[s].layer, selections[s].head);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", selections[s].what,
                     kind == FIX_UNIFORM ? "uniform, garbage above the diagonal" : "window");
            int rc;
            size_t len;
            char *svg = write_to_string(attnmap_write_svg, &map, &rc, &len);
            if (!svg) { check_true(0, "%s: written", what); continue; }
            const char *e = xml_check(svg, len, error);
            check_true(rc == 0 && !e, "%s: returns 0, well-formed XML (%zu bytes)%s%s", what,
                       len, e ? ": " : "", e ? e : "");
            if (s == 0) check_xmllint(svg, len, what);
            check_svg_panels(svg, &map, what);
            check_svg_cells(svg, &fx, what);
            if (kind == FIX_WINDOW && s == 0) {
                check_true(strstr(svg, "&lt;&amp;&gt;&apos;&quot;") && strstr(svg, "a\\x00b") &&
                           strstr(svg, "x\\xe2\\x82<") && strstr(svg, "\\xc0\\x80") &&
                           strstr(svg, "\xe2\x90\xa3the") && strstr(svg, "\\\\x41"),
                           "%s: hostile labels shown by their escapes", what);
                /* the one comment: the signature, the second line */
                const char *second = strchr(svg, '\n');
                check_true(!strstr(svg, "</script") && second && strstr(svg, "<!--") ==
                           second + 1 && strstr(svg, "<!--") == strstr(svg, ATTNMAP_SIGNATURE) &&
                           !strstr(second + 2, "<!--") && strstr(svg, "]]&gt;") &&
                           strstr(svg, "&lt;!--"), "%s: no raw markup from the labels (the "
                           "one comment the signature line)", what);
                check_true(strstr(svg, "masked (not visible") && strstr(svg, "url(#scale)") &&
                           strstr(svg, "attention window:w=3 &lt;test&gt; &amp; &quot;quotes"
                                  "&quot;"), "%s: a legend with the masked hatch and colour bar, "
                           "the escaped title", what);
            }
            free(svg);
        }
        free(fx.w);
    }
}

/* The left axis's labels of a small SVG (6 tokens, the first 2 the prompt): prompt tokens
 * in #1a1a1a, the rest in #c2410c (the legend's colours); a label of 12 characters (the
 * SVG's most) shown whole, one of 13 cut to 11 and an ellipsis. */
static void test_svg_labels(void) {
    static const char *const text[6] = {"abcdefghijkl", "abcdefghijklm", "p", "q", "r", "s"};
    static const char *const want[6] = {"abcdefghijkl", "abcdefghijk\xE2\x80\xA6", "p", "q",
                                        "r", "s"};
    static Labels labels;
    Fixture fx;
    if (fixture_init(&fx, 1, 1, 6, FIX_UNIFORM) != 0) {
        check_true(0, "svg labels: fixture memory");
        return;
    }
    for (int i = 0; i < 6; i++) {
        labels.labels[i] = (const unsigned char *)text[i];
        labels.lens[i] = strlen(text[i]);
    }
    AttnMap map = map_make(&fx, &labels, 0, 0);
    map.n_prompt = 2;
    int rc, ok = 1;
    size_t len;
    char *svg = write_to_string(attnmap_write_svg, &map, &rc, &len);
    const char *at = svg ? strstr(svg, "text-anchor=\"end\" fill=\"") : NULL;
    for (int i = 0; i < 6 && ok; i++, at = strstr(at + 1, "text-anchor=\"end\" fill=\"")) {
        char line[160];
        snprintf(line, sizeof line, "text-anchor=\"end\" fill=\"%s\">%s</text>",
                 i < 2 ? "#1a1a1a" : "#c2410c", want[i]);
        ok = at && strncmp(at, line, strlen(line)) == 0;
        if (!ok) printf("  label %d: want %s, got %.60s\n", i, line, at ? at : "(none)");
    }
    check_true(rc == 0 && ok, "svg labels: the prompt's 2 in the prompt's colour, the rest in "
               "the generated one; 12 characters whole, 13 cut to 11 and an ellipsis");
    free(svg);
    free(fx.w);
}

/* ---- a big map: PNG panels ---- */

static uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int bit = 0; bit < 8; bit++) crc = crc & 1 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

/* Decodes base64 up to the first '"' into a malloc'd buffer; *n its size. */
static unsigned char *base64_decode(const char *s, size_t *n) {
    const char *end = strchr(s, '"');
    if (!end) return NULL;
    unsigned char *out = malloc((size_t)(end - s) / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    *n = 0;
    for (; out && s < end && *s != '='; s++) {
        const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *d = strchr(digits, *s);
        if (!d) { free(out); return NULL; }
        acc = acc << 6 | (uint32_t)(d - digits);
        bits += 6;
        if (bits >= 8) { bits -= 8; out[(*n)++] = (unsigned char)(acc >> bits); }
    }
    return out;
}

/* The pixels (T, T) of the PNG: every chunk's CRC right, 8-bit palette T x T, index 0
 * transparent, stored deflate blocks with a right Adler-32. NULL with *why on failure. */
static unsigned char *png_pixels(const unsigned char *png, size_t n, int T, const char **why) {
    *why = "signature";
    if (n < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8) != 0) return NULL;
    unsigned char *pixels = malloc((size_t)T * T), *z = malloc(n);
    size_t z_len = 0, at = 8;
    int ihdr = 0, trns = 0;
    while (pixels && z && at + 12 <= n) {
        uint32_t len = read_u32(png + at);
        const unsigned char *type = png + at + 4, *data = type + 4;
        if (at + 12 + len > n) { *why = "chunk length"; goto fail; }
        if (crc32_of(type, 4 + len) != read_u32(data + len)) { *why = "chunk CRC"; goto fail; }
        if (!memcmp(type, "IHDR", 4))
            ihdr = len == 13 && read_u32(data) == (uint32_t)T && read_u32(data + 4) ==
                   (uint32_t)T && data[8] == 8 && data[9] == 3 && data[12] == 0;
        if (!memcmp(type, "tRNS", 4)) trns = len >= 1 && data[0] == 0;
        if (!memcmp(type, "IDAT", 4)) { memcpy(z + z_len, data, len); z_len += len; }
        at += 12 + len;
        if (!memcmp(type, "IEND", 4)) break;
    }
    if (!ihdr || !trns) { *why = "IHDR or tRNS"; goto fail; }
    if (z_len < 6 || (z[0] * 256 + z[1]) % 31 != 0 || (z[0] & 0x0F) != 8) {  /* RFC 1950 */
        *why = "zlib header";
        goto fail;
    }
    size_t zi = 2, raw_len = (size_t)T * (T + 1), got = 0;
    unsigned char *raw = malloc(raw_len);
    int final = 0;
    while (raw && !final && zi + 5 <= z_len) {
        final = z[zi] & 1;
        size_t blen = z[zi + 1] | (size_t)z[zi + 2] << 8, nlen = z[zi + 3] | (size_t)z[zi + 4] << 8;
        if ((z[zi] & 6) != 0 || (blen ^ 0xFFFF) != nlen || got + blen > raw_len) break;
        memcpy(raw + got, z + zi + 5, blen);
        got += blen;
        zi += 5 + blen;
    }
    uint32_t a = 1, b = 0;
    for (size_t i = 0; raw && i < got; i++) { a = (a + raw[i]) % 65521; b = (b + a) % 65521; }
    if (!raw || !final || got != raw_len || zi + 4 != z_len || read_u32(z + zi) != (b << 16 | a)) {
        *why = "stored deflate blocks and Adler-32";
        free(raw);
        goto fail;
    }
    for (int i = 0; i < T; i++) {
        if (raw[(size_t)i * (T + 1)] != 0) { *why = "filter byte"; free(raw); goto fail; }
        memcpy(pixels + (size_t)i * T, raw + (size_t)i * (T + 1) + 1, (size_t)T);
    }
    free(raw);
    free(z);
    return pixels;
fail:
    free(pixels);
    free(z);
    return NULL;
}

static void test_svg_raster(void) {
    static Labels labels;
    Fixture fx;
    int T = 710;                   /* T (T + 1) / 2 = 252,405 cells > ATTNMAP_SVG_MAX_CELLS */
    if ((double)T * (T + 1) / 2 <= ATTNMAP_SVG_MAX_CELLS) {
        check_skip("ATTNMAP_SVG_MAX_CELLS changed: the raster fixture is too small");
        return;
    }
    if (fixture_init(&fx, 1, 2, T, FIX_WINDOW) != 0) { check_true(0, "fixture memory"); return; }
    labels_fill(&labels, T);
    AttnMap map = map_make(&fx, &labels, 0, 1);
    int rc;
    size_t len;
    char error[ERROR_CAP];
    char *svg = write_to_string(attnmap_write_svg, &map, &rc, &len);
    const char *e = svg ? xml_check(svg, len, error) : "not written";
    check_true(rc == 0 && !e, "svg %d tokens: returns 0, well-formed XML (%zu bytes)%s%s", T, len,
               e ? ": " : "", e ? e : "");
    const char *href = svg ? strstr(svg, "xlink:href=\"data:image/png;base64,") : NULL;
    check_true(href && !strstr(svg, "class=\"c\"") && len < (size_t)T * T * 2,
               "svg %d tokens: the panel is an embedded PNG, not %d elements (%zu bytes)", T,
               T * (T + 1) / 2, len);
    size_t png_len = 0;
    unsigned char *png = href ? base64_decode(href + strlen("xlink:href=\"data:image/png;base64,"),
                                              &png_len) : NULL;
    const char *why = "base64";
    unsigned char *pixels = png ? png_pixels(png, png_len, T, &why) : NULL;
    check_true(pixels != NULL, "svg %d tokens: a valid PNG of %dx%d palette pixels (%s)", T, T, T,
               pixels ? "CRCs, zlib, Adler-32 right" : why);
    if (pixels) {
        long wrong = 0;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double w = fixture_weight(&fx, 0, 1, i, j);
                long want = isnan(w) ? 0 : 1 + lround(sqrt(w) * 254);
                wrong += labs(pixels[(size_t)i * T + j] - want) > (isnan(w) ? 0 : 1);
            }
        check_true(wrong == 0, "svg %d tokens: each pixel is its cell: index 0 (transparent) "
                   "exactly where masked, else 1 + 254 sqrt(w) (%ld wrong)", T, wrong);
    }
    free(pixels);
    free(png);
    free(svg);
    free(fx.w);
}

/* ======================================================================================
 * HTML
 * ==================================================================================== */

/* node: JSON.parse the page's data object, and compare each token there with its chip's
 * text (entities decoded): the script and the markup must show the same label. */
static const char *const NODE_CHECK =
    "const fs = require('fs'), html = fs.readFileSync(process.argv[2], 'utf8');\n"
    "const start = html.indexOf('var D = ') + 8, end = html.indexOf('};\\n', start) + 1;\n"
    "const D = JSON.parse(html.slice(start, end));\n"
    "const chips = [...html.matchAll(/<span class=\"tok [pg]\" data-i=\"(\\d+)\"[^>]*>(.*?)"
    "<\\/span>/g)];\n"
    "const un = s => s.replace(/&(lt|gt|quot|apos|amp);/g, (m, e) =>\n"
    "  ({lt: '<', gt: '>', quot: '\"', apos: \"'\", amp: '&'})[e]);\n"
    "let bad = chips.length === D.tokens.length ? 0 : 1;\n"
    "chips.forEach(m => { if (un(m[2]) !== D.tokens[+m[1]]) bad++; });\n"
    "console.log(bad === 0 ? 'same' : 'differ ' + bad);\n";

static void check_html_script(const char *html) {
    if (check_run("command -v node", NULL, NULL) != 0) {
        check_skip("node not installed: the page's script not parsed");
        return;
    }
    const char *open = strstr(html, "<script>"), *close = open ? strstr(open, "</script>") : NULL;
    char script[TMP_PATH_MAX] = "/tmp/test_attnmap_XXXXXX", page[TMP_PATH_MAX + 8];
    char checker[TMP_PATH_MAX] = "/tmp/test_attnmap_XXXXXX";
    int fd = mkstemp(script), fd2 = mkstemp(checker);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL, *g = fd2 >= 0 ? fdopen(fd2, "w") : NULL;
    snprintf(page, sizeof page, "%s.html", script);
    FILE *p = fopen(page, "w");
    if (!close || !f || !g || !p) {
        check_true(0, "html: the script extracted");
        if (f) fclose(f);
        if (g) fclose(g);
        if (p) fclose(p);
        return;
    }
    fwrite(open + 8, 1, (size_t)(close - open - 8), f);
    fputs(NODE_CHECK, g);
    fputs(html, p);
    fclose(f);
    fclose(g);
    fclose(p);
    char command[4 * TMP_PATH_MAX], *out = NULL, *err = NULL;
    snprintf(command, sizeof command, "node --check %s", script);
    int rc = check_run(command, NULL, &err);
    check_true(rc == 0, "html: node --check parses the page's script%s%.200s", rc ? ": " : "",
               rc && err ? err : "");
    free(err);
    err = NULL;
    snprintf(command, sizeof command, "node %s %s", checker, page);
    rc = check_run(command, &out, &err);
    if (out && strchr(out, '\n')) *strchr(out, '\n') = '\0';
    check_true(rc == 0 && out && strncmp(out, "same", 4) == 0, "html: the data is strict JSON, "
               "and every token in it decodes to its chip's text (%s%.200s)", out ? out : "",
               err ? err : "");
    free(out);
    free(err);
    remove(script);
    remove(checker);
    remove(page);
}

/* The page's embedded weights against the fixture: L * NH lower triangles, -1 = masked. */
static void check_html_weights(const char *html, const Fixture *fx) {
    const char *p = strstr(html, "\"w\": [");
    long n = 0, wrong = 0;
    if (p) p += 6;
    for (int l = 0; p && l < fx->L; l++)
        for (int h = 0; h < fx->NH; h++)
            for (int i = 0; i < fx->T; i++)
                for (int j = 0; j <= i; j++) {
                    while (*p == '[' || *p == ']' || *p == ',' || *p == '\n') p++;
                    char *end;
                    long v = strtol(p, &end, 10);
                    if (end == p) { wrong++; continue; }
                    p = end;
                    n++;
                    double w = fixture_weight(fx, l, h, i, j);
                    wrong += v != (isnan(w) ? -1 : lround(w * 1000));
                }
    while (p && (*p == ']' || *p == '\n')) p++;
    long want = (long)fx->L * fx->NH * fx->T * (fx->T + 1) / 2;
    check_true(p && n == want && wrong == 0 && strncmp(p, "};", 2) == 0, "html: %ld weights "
               "embedded as integers 0..1000 per layer, head and row, -1 where masked (%ld wrong)",
               want, wrong);
}

#define PAGE_PATH "lab/attnmap_page.html"   /* the page's template, from the repository's root */
#define PAGE_MARK "@@"

/* The page against its template: the text around the template's @@markers@@ is the
 * page's, in order and byte for byte (so the C literals the build writes reproduce the
 * file), from the page's first byte to its last, and no marker is left unfilled. */
static void check_html_template(const char *html) {
    FILE *f = fopen(PAGE_PATH, "rb");
    if (!f) {
        check_skip(PAGE_PATH " not in the working folder: the page not compared with it");
        return;
    }
    char *page = malloc(1 << 16);
    size_t n = page ? fread(page, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (!page || n == 0 || n == (1 << 16) - 1) {
        check_true(0, "html: " PAGE_PATH " read");
        free(page);
        return;
    }
    page[n] = '\0';
    const char *at = html;
    int ok = 1, markers = 0;
    for (char *text = page; ok;) {
        char *open = strstr(text, PAGE_MARK);
        char *close = open ? strstr(open + 2, PAGE_MARK) : NULL;
        if (close) *open = '\0';
        size_t len = strlen(text);
        if (!close) {                                  /* the last piece ends the page */
            size_t left = strlen(at);
            ok = left >= len && strcmp(at + left - len, text) == 0;
            break;
        }
        const char *found = text == page ? (strncmp(html, text, len) == 0 ? html : NULL)
                                         : strstr(at, text);
        ok = found != NULL;
        at = found ? found + len : at;
        markers++;
        text = close + 2;
    }
    check_true(ok && markers > 0 && !strstr(html, PAGE_MARK), "html: the page is "
               PAGE_PATH " byte for byte around its %d markers, all filled", markers);
    free(page);
}

static size_t count(const char *text, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void test_html(void) {
    static Labels labels;
    Fixture fx;
    char error[ERROR_CAP];
    int L = 3, T = N_HOSTILE + 3;
    if (fixture_init(&fx, L, 2, T, FIX_WINDOW) != 0) { check_true(0, "fixture memory"); return; }
    labels_fill(&labels, T);
    AttnMap map = map_make(&fx, &labels, -1, -1);
    int rc;
    size_t len;
    char *html = write_to_string(attnmap_write_html, &map, &rc, &len);
    if (!html) { check_true(0, "html written"); free(fx.w); return; }
    const char *e = xml_check(html, len, error);
    check_true(rc == 0 && !e, "html: returns 0, well-formed as XML (%zu bytes)%s%s", len,
               e ? ": " : "", e ? e : "");
    check_xmllint(html, len, "html");
    check_true(!strstr(html, "http://") && !strstr(html, "https://") && !strstr(html, "src=") &&
               !strstr(html, "url(") && !strstr(html, "@import") && !strstr(html, "<link"),
               "html: self-contained (no http://, https://, src=, url(, @import or <link)");
    const char *select = strstr(html, "<select id=\"layer\">");
    const char *select_end = select ? strstr(select, "</select>") : NULL;
    size_t options = 0;
    for (const char *o = select; o && (o = strstr(o + 1, "<option")) && o < select_end;) options++;
    check_true(select_end && options == (size_t)L, "html: a layer selector with %zu options "
               "(want %d)", options, L);
    check_true(count(html, "<script") == 1 && count(html, "</script") == 1 &&
               count(html, "]]>") == 2 && count(html, "<!--") == 1 &&
               strstr(html, "<!DOCTYPE html>\n" ATTNMAP_SIGNATURE "\n") == html,
               "html: the labels add no \"</script\", \"]]>\" or \"<!--\" (one script, two CDATA "
               "ends, one comment: the signature, the second line)");
    check_true(strstr(html, "\"\\u003c/script\\u003e\"") && strstr(html, "\"a\\\\x00b\"") &&
               strstr(html, "\"\\\\u2028\"") && strstr(html, "\">\xe2\x90\xa3the</span>") &&
               strstr(html, "\"\\u003c\\u0026\\u003e'\\\"\""),
               "html: labels escaped for JSON in the data and for XML in the chips");
    check_html_weights(html, &fx);
    check_html_script(html);
    check_html_template(html);
    free(html);

    const char *title = map.title;
    map.title = "@@title@@ @@data@@";
    html = write_to_string(attnmap_write_html, &map, &rc, &len);
    check_true(html && rc == 0 && strstr(html, "<title>@@title@@ @@data@@</title>") &&
               count(html, "var D = {") == 1, "html: a title that spells the page's markers "
               "is written as text, not filled in");
    free(html);
    map.title = title;

    map.layer = 1;
    map.head = 0;
    html = write_to_string(attnmap_write_html, &map, &rc, &len);
    check_true(html && rc == 0 && strstr(html, "<option value=\"1\" selected=\"selected\">") &&
               strstr(html, "\"layer\": 1, \"head\": 0,"), "html: opens at the map's layer "
               "and head");
    free(html);
    free(fx.w);
}

/* After a context shift the map's tokens are the run's first n_kept and its latest ones:
 * the SVG's caption and the page's legend say so (the map never did), and say nothing
 * without a shift. */
static void test_shift_note(void) {
    static Labels labels;
    Fixture fx;
    if (fixture_init(&fx, 1, 2, 9, FIX_WINDOW) != 0) { check_true(0, "fixture memory"); return; }
    labels_fill(&labels, fx.T);
    AttnMap map = map_make(&fx, &labels, -1, -1);
    static const struct { long shifts; int kept; const char *want; } cases[] = {
        {0, 0, NULL},
        {3, 2, "context shifted 3 times: the first 2 tokens kept, then the latest 7"},
        {1, 0, "context shifted once: the run's latest 9 tokens"},
        {2, 1, "context shifted 2 times: the first token kept, then the latest 8"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        map.n_shifts = cases[c].shifts;
        map.n_kept = cases[c].kept;
        int rc_svg, rc_html;
        size_t len;
        char *svg = write_to_string(attnmap_write_svg, &map, &rc_svg, &len);
        char *html = write_to_string(attnmap_write_html, &map, &rc_html, &len);
        char in_svg[160], in_html[160];
        const char *want = cases[c].want;
        if (want) {   /* after the caption's counts in the SVG; a sentence in the page */
            snprintf(in_svg, sizeof in_svg, "generated; the %s</tspan>", want);
            snprintf(in_html, sizeof in_html, "generated</span>. The %s. ", want);
        }
        int ok = svg && html && rc_svg == 0 && rc_html == 0 &&
                 (want ? strstr(svg, in_svg) && strstr(html, in_html)
                       : !strstr(svg, "shifted") && !strstr(html, "shifted"));
        check_true(ok, "%ld shifts, %d kept: %s", cases[c].shifts, cases[c].kept,
                   want ? want : "no note in the SVG or the page");
        free(svg);
        free(html);
    }
    free(fx.w);
}

/* ======================================================================================
 * Text view
 * ==================================================================================== */

static void test_text(void) {
    /* NH 3, T 4, query 3 unless said: head 0 0.1 0.4 0.1 0.4 (ties), head 1 masked at keys 0
     * and 2, head 2 all masked */
    enum { NH = 3, T = 4 };
    float row[NH][T] = {{0.1f, 0.4f, 0.1f, 0.4f}, {NAN, 0.7f, NAN, 0.3f}, {NAN, NAN, NAN, NAN}};
    const unsigned char *labels[T] = {(const unsigned char *)"ROMEO",
        (const unsigned char *)"a\"b\\", (const unsigned char *)" x",
        (const unsigned char *)"\n\xff"};
    size_t lens[T] = {5, 4, 2, 2};
    AttnTop top = {NH, T, 5, 3, labels, lens, &row[0][0]};
    struct { int query, k; const char *want, *what; } cases[] = {
        {3, 3, "  L5 H0: \"a\\\"b\\\\\"@1 0.400  \"\\n\\xff\"@3 0.400  \"ROMEO\"@0 0.100\n"
               "  L5 H1: \"a\\\"b\\\\\"@1 0.700  \"\\n\\xff\"@3 0.300\n"
               "  L5 H2: (no visible keys)\n",
         "ties to the lower key, masked keys never listed, escaped labels"},
        {1, 4, "  L5 H0: \"a\\\"b\\\\\"@1 0.400  \"ROMEO\"@0 0.100\n"
               "  L5 H1: \"a\\\"b\\\\\"@1 0.700\n"
               "  L5 H2: (no visible keys)\n",
         "keys after the query (the future) never listed; fewer than k"},
        {3, 1, "  L5 H0: \"a\\\"b\\\\\"@1 0.400\n  L5 H1: \"a\\\"b\\\\\"@1 0.700\n"
               "  L5 H2: (no visible keys)\n", "k = 1"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        top.query = cases[c].query;
        FILE *f = tmpfile();
        char out[512] = "";
        int rc = f ? attnmap_print_top(&top, cases[c].k, f) : -1;
        if (f) {
            rewind(f);
            out[fread(out, 1, sizeof out - 1, f)] = '\0';
            fclose(f);
        }
        int ok = rc == 0 && strcmp(out, cases[c].want) == 0;
        check_true(ok, "text view: %s", cases[c].what);
        if (!ok) printf("  got:\n%s  want:\n%s", out, cases[c].want);
    }
    FILE *f = tmpfile();
    char out[64] = "";
    if (f) {
        attnmap_print_label((const unsigned char *)"\"a\0\xe2\x82", 5, f);
        rewind(f);
        out[fread(out, 1, sizeof out - 1, f)] = '\0';
        fclose(f);
    }
    check_true(strcmp(out, "\"\\\"a\\x00\\xe2\\x82\"") == 0, "attnmap_print_label quotes "
               "and escapes (%s)", out);
}

/* ======================================================================================
 * Errors
 * ==================================================================================== */

static void test_errors(void) {
    static Labels labels;
    Fixture fx;
    if (fixture_init(&fx, 2, 2, 5, FIX_WINDOW) != 0) { check_true(0, "fixture memory"); return; }
    labels_fill(&labels, fx.T);
    AttnMap map = map_make(&fx, &labels, -1, -1);
    if (access("/dev/full", W_OK) == 0) {
        FILE *f = fopen("/dev/full", "w");
        int svg = f ? attnmap_write_svg(&map, f) : 0;
        if (f) fclose(f);
        f = fopen("/dev/full", "w");
        int html = f ? attnmap_write_html(&map, f) : 0;
        if (f) fclose(f);
        float row[2][5] = {{1, 0, 0, 0, 0}, {0.5f, 0.5f, 0, 0, 0}};
        AttnTop top = {2, 5, 0, 4, labels.labels, labels.lens, &row[0][0]};
        f = fopen("/dev/full", "w");
        int text = f ? attnmap_print_top(&top, 2, f) : 0;
        if (f) fclose(f);
        check_true(svg == -1 && html == -1 && text == -1, "a write error (/dev/full) returns -1 "
                   "(svg %d, html %d, text %d)", svg, html, text);
    } else {
        check_skip("/dev/full not writable: write errors not tested");
    }
    FILE *null = fopen("/dev/null", "w");
    if (!null) { check_true(0, "/dev/null opened"); free(fx.w); return; }
    fprintf(stderr, "(the next lines on stderr are expected)\n");
    map.layer = 2;
    int bad_layer = attnmap_write_svg(&map, null);
    map.layer = -1;
    map.head = -2;
    int bad_head = attnmap_write_html(&map, null);
    map.head = -1;
    map.n_prompt = 6;
    int bad_prompt = attnmap_write_svg(&map, null);
    map.n_prompt = 1;
    map.n_shifts = 1;
    map.n_kept = 6;
    int bad_kept = attnmap_write_svg(&map, null);
    map.n_kept = 0;
    map.n_shifts = -1;
    int bad_shifts = attnmap_write_html(&map, null);
    map.n_shifts = 0;
    float row[5] = {1, 0, 0, 0, 0};
    AttnTop top = {1, 5, 0, 5, labels.labels, labels.lens, row};
    int bad_query = attnmap_print_top(&top, 1, null);
    top.query = 0;
    int bad_k = attnmap_print_top(&top, 0, null);
    fx.fail_layer = 1;
    int failed_svg = attnmap_write_svg(&map, null), failed_html = attnmap_write_html(&map, null);
    check_true(bad_layer == -1 && bad_head == -1 && bad_prompt == -1 && bad_query == -1 &&
               bad_k == -1, "out-of-range layer, head, n_prompt, query and k are refused");
    check_true(bad_kept == -1 && bad_shifts == -1, "n_kept above T and negative n_shifts are "
               "refused");
    check_true(failed_svg == -1 && failed_html == -1, "a callback that returns NULL fails the "
               "write");
    fclose(null);
    free(fx.w);
}

/* ======================================================================================
 * Sizes of realistic maps
 * ==================================================================================== */

/* A callback that returns the same (NH, T, T) weights for every layer. */
static const float *same_layer(void *ctx, int layer) {
    (void)layer;
    return ((Fixture *)ctx)->w;
}

static void test_sizes(void) {
    static const struct { int L, NH, T; Writer writer; const char *what; size_t limit; } cases[] = {
        {6, 4, 128, attnmap_write_svg, "svg, all layers of the shipped model's shape", 30u << 20},
        {12, 12, 512, attnmap_write_svg, "svg, all layers of GPT-2 small, 512 tokens", 80u << 20},
        {6, 4, 256, attnmap_write_html, "html, 6 layers x 4 heads, 256 tokens", 4u << 20}};
    static Labels labels;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Fixture fx;
        if (fixture_init(&fx, 1, cases[c].NH, cases[c].T, FIX_UNIFORM) != 0) {
            check_true(0, "fixture memory");
            return;
        }
        fx.L = cases[c].L;
        labels_fill(&labels, cases[c].T);
        AttnMap map = map_make(&fx, &labels, -1, -1);
        map.layer_weights = same_layer;
        int rc;
        size_t len;
        char *text = write_to_string(cases[c].writer, &map, &rc, &len);
        check_true(text && rc == 0 && len < cases[c].limit, "%s: %.1f MB (at most %zu)",
                   cases[c].what, (double)len / (1 << 20), cases[c].limit >> 20);
        free(text);
        free(fx.w);
    }
}

int main(void) {
    test_checker();
    test_escape();
    test_svg();
    test_svg_labels();
    test_svg_raster();
    test_html();
    test_shift_note();
    test_text();
    test_errors();
    test_sizes();
    return check_summary("test_attnmap");
}
