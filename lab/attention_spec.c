/* attention_spec.c: parse and print "NAME[:key=value,...]" attention specs.
 *
 * One table lists every variant name with the keys it accepts; another lists every
 * key with its field of AttentionConfig and its range. Nothing here computes
 * attention (attention.c does) or prints (run.c prints the messages written here).
 */
#include "attention_spec.h"

#include <stddef.h>   /* offsetof */
#include <stdint.h>   /* uint64_t */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* strtof */
#include <string.h>   /* strcmp, strchr, strlen */

#include "attention.h"   /* AttentionConfig, attention_config_default */
#include "cli.h"         /* cli_parse_int, cli_parse_float, cli_parse_u64, cli_printable */

#define SPEC_MAX_INT ATTENTION_MAX_INT   /* upper bound of integer keys (attention.h) */

/* One key: its name, where it goes, its range, and what it means. */
typedef enum { KEY_INT, KEY_TAU, KEY_SEED } KeyType;
typedef struct {
    const char *name;
    KeyType type;
    size_t offset;     /* of the int field in AttentionConfig (KEY_INT) */
    int min, max;
    const char *meaning;
} Key;

static const Key KEYS[] = {
    {"w", KEY_INT, offsetof(AttentionConfig, window), 1, SPEC_MAX_INT, "window, self included"},
    {"sinks", KEY_INT, offsetof(AttentionConfig, sinks), 0, SPEC_MAX_INT, "first positions kept"},
    {"k", KEY_INT, offsetof(AttentionConfig, dilation), 1, SPEC_MAX_INT, "dilation"},
    {"l", KEY_INT, offsetof(AttentionConfig, stride), 1, SPEC_MAX_INT, "stride or block length"},
    {"c", KEY_INT, offsetof(AttentionConfig, summary), 0, SPEC_MAX_INT, "summary cells, <= l"},
    {"buckets", KEY_INT, offsetof(AttentionConfig, buckets), 1, ATTENTION_MAX_BUCKETS, "buckets, 1 or even"},
    {"rounds", KEY_INT, offsetof(AttentionConfig, rounds), 1, ATTENTION_MAX_ROUNDS, "hash rounds"},
    {"local", KEY_INT, offsetof(AttentionConfig, local), 0, SPEC_MAX_INT, "local window kept"},
    {"m", KEY_INT, offsetof(AttentionConfig, features), 1, ATTENTION_MAX_FEATURES, "random features"},
    {"orf", KEY_INT, offsetof(AttentionConfig, orthogonal), 0, 1, "orthogonal features"},
    {"prescale", KEY_INT, offsetof(AttentionConfig, prescale), 0, 1, "q, k times HS^-1/4"},
    {"softmax1", KEY_INT, offsetof(AttentionConfig, softmax1), 0, 1, "softmax plus one"},
    {"sinklogit", KEY_INT, offsetof(AttentionConfig, sink_logit), 0, 1, "learned sink logit"},
    {"norm", KEY_INT, offsetof(AttentionConfig, norm), 0, 1, "RMS-normalised output"},
    {"rank", KEY_INT, offsetof(AttentionConfig, factor), 1, SPEC_MAX_INT, "rank of R1 R2^T"},
    {"a", KEY_INT, offsetof(AttentionConfig, factor), 1, SPEC_MAX_INT, "factor a, dividing the context"},
    {"tau", KEY_TAU, 0, 0, 0, "temperature"},
    {"seed", KEY_SEED, 0, 0, 0, "random seed"},
};
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };

/* One name: the kind it selects, fixed settings, and its keys (space-separated). */
typedef struct {
    const char *name;
    AttentionKind kind;
    int unscaled, softmax1;
    const char *keys;
} Name;

static const Name NAMES[] = {
    {"exact", ATTENTION_EXACT, 0, 0, "tau softmax1 sinklogit"},
    {"unscaled", ATTENTION_EXACT, 1, 0, "softmax1 sinklogit"},
    {"softmax1", ATTENTION_EXACT, 0, 1, "tau"},
    {"gauss", ATTENTION_GAUSS, 0, 0, "tau softmax1 sinklogit"},
    {"window", ATTENTION_WINDOW, 0, 0, "w sinks tau softmax1 sinklogit"},
    {"dilated", ATTENTION_DILATED, 0, 0, "w k sinks tau softmax1 sinklogit"},
    {"strided", ATTENTION_STRIDED, 0, 0, "l tau softmax1 sinklogit"},
    {"fixed", ATTENTION_FIXED, 0, 0, "l c tau softmax1 sinklogit"},
    {"lsh", ATTENTION_LSH, 0, 0, "buckets rounds local sinks seed tau softmax1 sinklogit"},
    {"linear", ATTENTION_LINEAR, 0, 0, "prescale norm"},
    {"efficient", ATTENTION_EFFICIENT, 0, 0, ""},
    {"performer", ATTENTION_PERFORMER, 0, 0, "m orf seed tau"},
    {"synth-random", ATTENTION_SYNTH_RANDOM, 0, 0, ""},
    {"synth-dense", ATTENTION_SYNTH_DENSE, 0, 0, ""},
    {"synth-frandom", ATTENTION_SYNTH_FRANDOM, 0, 0, "rank"},
    {"synth-fdense", ATTENTION_SYNTH_FDENSE, 0, 0, "a"},
};
enum { N_NAMES = sizeof NAMES / sizeof NAMES[0] };

const char *attention_spec_help(void) {
    return
    "  exact[:tau=,softmax1=]      softmax(q.k/sqrt(HS)), the default\n"
    "  unscaled[:softmax1=,sinklogit=]  softmax(q.k), no 1/sqrt(HS)\n"
    "  softmax1[:tau=]             exact with softmax plus one (a virtual zero key)\n"
    "  gauss[:tau=,softmax1=]      Gaussian kernel: q.k/sqrt(HS) - |k|^2/(2 sqrt(HS))\n"
    "  window[:w=,sinks=]          last w keys (128) plus the first `sinks` (0)\n"
    "  dilated[:w=,k=,sinks=]      w keys (128) spaced k (2) apart, plus sinks (0)\n"
    "  strided[:l=]                Sparse Transformer strided, merged (l 32)\n"
    "  fixed[:l=,c=]               Sparse Transformer fixed, merged (l 128, c 32)\n"
    "  lsh[:buckets=,rounds=,local=,sinks=,seed=]  Reformer LSH (16, 4, 64, 4, 1)\n"
    "  linear[:prescale=,norm=]    linear attention, elu+1 features; norm=1: no\n"
    "                              denominator, each head's output RMS-normalised\n"
    "  efficient                   Efficient Attention (Shen et al.), causal\n"
    "  performer[:m=,orf=,seed=,tau=]  FAVOR+, m positive random features (256, 1, 1)\n"
    "  synth-random, synth-dense   Synthesizer: weights from trained parameters, not q.k\n"
    "  synth-frandom[:rank=]       (a learned (context, context) logit table; logits from\n"
    "  synth-fdense[:a=]           the token alone; their factorized forms, rank 16, a 16);\n"
    "                              only a model trained with one has them (./train --attn)\n"
    "  (exact, gauss, window, dilated, strided, fixed and lsh also take tau=,\n"
    "  softmax1= and sinklogit= (1: a learned per-head sink logit, trained by ./train;\n"
    "  0 in a model without one); tau in [0.01, 100], softmax1/sinklogit/orf/prescale/\n"
    "  norm 0 or 1 (softmax1 and sinklogit not both), buckets 1..4096, rounds\n"
    "  1..64, m 1..8192, w, k, l, rank and a 1..2^20, sinks, c and local 0..2^20, seed\n"
    "  0..2^64-1; nystrom is not causal and cannot run in the model)\n";
}

/* Is `key` (length n) one of the space-separated words of list? */
static int has_word(const char *list, const char *key, size_t n) {
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, " ");
        if (len == n && strncmp(p, key, n) == 0) return 1;
        p += len;
        while (*p == ' ') p++;
    }
    return 0;
}

/* Parses one "key=value" (the text up to `end`) into cfg; seen marks the keys already
 * given (a key given twice is an error, not a silent override). */
static int parse_pair(const Name *name, const char *pair, const char *end, AttentionConfig *cfg,
                      unsigned *seen, char *err, size_t cap) {
    const char *eq = memchr(pair, '=', (size_t)(end - pair));
    int key_len = (int)((eq ? eq : end) - pair);
    if (!eq || key_len == 0 || !has_word(name->keys, pair, (size_t)key_len)) {
        char raw[64], shown[sizeof raw * 4];
        snprintf(raw, sizeof raw, "%.*s", (int)(end - pair), pair);
        snprintf(err, cap, "%s: unknown or malformed parameter '%s' (expected key=value "
                 "with key one of: %s)", name->name, cli_printable(raw, shown, sizeof shown),
                 *name->keys ? name->keys : "none");
        return -1;
    }
    char value[64];
    int value_len = (int)(end - eq - 1);
    if (value_len < 1 || value_len >= (int)sizeof value) {
        snprintf(err, cap, "%s: parameter %.*s has no value, or one too long (expected "
                 "%.*s=VALUE of 1..%d characters)", name->name, key_len, pair, key_len, pair,
                 (int)sizeof value - 1);
        return -1;
    }
    memcpy(value, eq + 1, (size_t)value_len);
    value[value_len] = '\0';
    for (int i = 0; i < N_KEYS; i++) {
        const Key *key = &KEYS[i];
        if ((int)strlen(key->name) != key_len || strncmp(key->name, pair, (size_t)key_len) != 0)
            continue;
        if (*seen & (1u << i)) {
            snprintf(err, cap, "%s: parameter %s given twice (expected each key at most once)",
                     name->name, key->name);
            return -1;
        }
        *seen |= 1u << i;
        char shown[sizeof value * 4];
        cli_printable(value, shown, sizeof shown);
        if (key->type == KEY_INT) {
            int v;
            if (cli_parse_int(value, key->min, key->max, &v) != 0) {
                snprintf(err, cap, "%s: invalid value '%s' for %s (expected an integer in "
                         "%d..%d: %s)", name->name, shown, key->name, key->min, key->max,
                         key->meaning);
                return -1;
            }
            *(int *)((char *)cfg + key->offset) = v;
        } else if (key->type == KEY_TAU) {
            float v;
            if (cli_parse_float(value, (double)ATTENTION_MIN_TAU, (double)ATTENTION_MAX_TAU, 0,
                                &v) != 0) {
                snprintf(err, cap, "%s: invalid value '%s' for tau (expected a number in "
                         "[%g, %g])", name->name, shown, (double)ATTENTION_MIN_TAU,
                         (double)ATTENTION_MAX_TAU);
                return -1;
            }
            cfg->tau = v;
        } else {
            uint64_t v;
            if (cli_parse_u64(value, 0, &v) != 0) {
                snprintf(err, cap, "%s: invalid value '%s' for seed (expected an integer in "
                         "0..18446744073709551615)", name->name, shown);
                return -1;
            }
            cfg->seed = v;
        }
        return 0;
    }
    return -1;   /* not reached: every name's keys are in KEYS */
}

int attention_spec_parse(const char *spec, AttentionConfig *cfg, char *err, size_t cap) {
    attention_config_default(cfg);
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const Name *name = NULL;
    for (int i = 0; i < N_NAMES; i++)
        if (strlen(NAMES[i].name) == name_len && strncmp(NAMES[i].name, spec, name_len) == 0)
            name = &NAMES[i];
    if (!name) {
        if (name_len == 7 && strncmp(spec, "nystrom", 7) == 0) {
            snprintf(err, cap, "nystrom: not causal (its landmarks average future rows, "
                     "docs/attention.md §7), so it cannot replace attention in a causal model; "
                     "it is a unit-tested kernel only");
            return -1;
        }
        char raw[64], shown[sizeof raw * 4];
        snprintf(raw, sizeof raw, "%.*s", (int)name_len, spec);
        snprintf(err, cap, "unknown attention '%s' (expected one of: exact, unscaled, "
                 "softmax1, gauss, window, dilated, strided, fixed, lsh, linear, efficient, "
                 "performer, synth-random, synth-dense, synth-frandom, synth-fdense)", cli_printable(raw, shown, sizeof shown));
        return -1;
    }
    cfg->kind = name->kind;
    cfg->unscaled = name->unscaled;
    cfg->softmax1 = name->softmax1;
    if (cfg->kind == ATTENTION_LSH) cfg->sinks = ATTENTION_DEFAULT_LSH_SINKS;
    if (cfg->kind == ATTENTION_FIXED) cfg->stride = ATTENTION_DEFAULT_BLOCK;   /* not strided's */
    if (colon) {
        const char *p = colon + 1;
        if (*p == '\0') {
            snprintf(err, cap, "%s: empty parameter list after ':' (expected KEY=VALUE,... "
                     "or no ':')", name->name);
            return -1;
        }
        unsigned seen = 0;
        for (;;) {
            const char *end = strchr(p, ',');
            if (!end) end = p + strlen(p);
            if (parse_pair(name, p, end, cfg, &seen, err, cap) != 0) return -1;
            if (*end == '\0') break;
            p = end + 1;
        }
    }
    return attention_config_check(cfg, err, cap);   /* c <= l, buckets even, ... */
}

void attention_spec_format(const AttentionConfig *cfg, char *out, size_t cap) {
    const char *name = attention_kind_name(cfg->kind);
    char extra[ATTENTION_SPEC_MAX] = "";
    if (cfg->kind == ATTENTION_EXACT && cfg->unscaled) name = "unscaled";
    switch (cfg->kind) {
    case ATTENTION_WINDOW:
        snprintf(extra, sizeof extra, "w=%d,sinks=%d", cfg->window, cfg->sinks);
        break;
    case ATTENTION_DILATED:
        snprintf(extra, sizeof extra, "w=%d,k=%d,sinks=%d", cfg->window, cfg->dilation,
                 cfg->sinks);
        break;
    case ATTENTION_STRIDED:
        snprintf(extra, sizeof extra, "l=%d", cfg->stride);
        break;
    case ATTENTION_FIXED:
        snprintf(extra, sizeof extra, "l=%d,c=%d", cfg->stride, cfg->summary);
        break;
    case ATTENTION_LSH:
        snprintf(extra, sizeof extra, "buckets=%d,rounds=%d,local=%d,sinks=%d,seed=%llu",
                 cfg->buckets, cfg->rounds, cfg->local, cfg->sinks, cfg->seed);
        break;
    case ATTENTION_LINEAR:
        snprintf(extra, sizeof extra, "%s%s%s", cfg->prescale ? "prescale=1" : "",
                 cfg->prescale && cfg->norm ? "," : "", cfg->norm ? "norm=1" : "");
        break;
    case ATTENTION_PERFORMER:
        snprintf(extra, sizeof extra, "m=%d,orf=%d,seed=%llu", cfg->features, cfg->orthogonal,
                 cfg->seed);
        break;
    case ATTENTION_SYNTH_FRANDOM:
        snprintf(extra, sizeof extra, "rank=%d", cfg->factor);
        break;
    case ATTENTION_SYNTH_FDENSE:
        snprintf(extra, sizeof extra, "a=%d", cfg->factor);
        break;
    default:
        break;
    }
    size_t n = strlen(extra);
    if (cfg->tau != 1.0f) {
        /* the fewest digits (from %g's six) that read back as the same float, so that the
         * text parses to this cfg again (1.00000667 is not "1") */
        char tau[24];
        for (int digits = 6; digits <= 9; digits++) {
            snprintf(tau, sizeof tau, "%.*g", digits, (double)cfg->tau);
            if (strtof(tau, NULL) == cfg->tau) break;
        }
        n += (size_t)snprintf(extra + n, sizeof extra - n, "%stau=%s", n ? "," : "", tau);
    }
    if (cfg->softmax1 && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n, "%ssoftmax1=1", n ? "," : "");
    if (cfg->sink_logit && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, "%ssinklogit=1", n ? "," : "");
    snprintf(out, cap, "%s%s%s", name, *extra ? ":" : "", extra);
}

/* ------------------------------------------------------------------------- */
/* One spec per layer                                                          */

int attention_spec_parse_layers(const char *spec, int n_layers, AttentionConfig *cfgs,
                                char *err, size_t cap) {
    int filled = 0, items = 0, counted = 0;
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[ATTENTION_SPEC_MAX];
        if (len >= sizeof item) {
            snprintf(err, cap, "layer spec %d is too long (got %zu bytes, expected fewer than "
                     "%zu)", items + 1, len, sizeof item);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        /* an optional repeat count: "3*window:w=64" is three layers of window:w=64 */
        int repeat = 1;
        char *body = item, *star = strchr(item, '*');
        if (star) {
            *star = '\0';
            if (cli_parse_int(item, 1, n_layers, &repeat) != 0) {
                char shown[sizeof item * 4];
                snprintf(err, cap, "invalid repeat count '%s' (expected N*SPEC with N in "
                         "1..%d, the layers)", cli_printable(item, shown, sizeof shown),
                         n_layers);
                return -1;
            }
            body = star + 1;
            counted = 1;
        }
        AttentionConfig cfg;
        if (attention_spec_parse(body, &cfg, err, cap) != 0) return -1;
        if (repeat > n_layers - filled) {
            snprintf(err, cap, "more layer specs than layers (expected %d in all: one spec for "
                     "every layer, or SPEC;SPEC;... with N*SPEC for N layers)", n_layers);
            return -1;
        }
        for (int r = 0; r < repeat; r++) cfgs[filled++] = cfg;
        items++;
        if (!end) break;
        p = end + 1;
    }
    if (items == 1 && filled == 1 && !counted) {   /* one spec without a count: every layer */
        for (int l = 1; l < n_layers; l++) cfgs[l] = cfgs[0];
        return 0;
    }
    if (filled != n_layers) {
        snprintf(err, cap, "layer specs cover %d layer%s (expected %d: one spec for every "
                 "layer, or SPEC;SPEC;... with N*SPEC for N layers)", filled,
                 filled == 1 ? "" : "s", n_layers);
        return -1;
    }
    return 0;
}

void attention_spec_format_layers(const AttentionConfig *cfgs, int n_layers, char *out,
                                  size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int l = 0; l < n_layers;) {
        char one[ATTENTION_SPEC_MAX], next[ATTENTION_SPEC_MAX];
        attention_spec_format(&cfgs[l], one, sizeof one);
        int run = 1;
        for (; l + run < n_layers; run++) {
            attention_spec_format(&cfgs[l + run], next, sizeof next);
            if (strcmp(one, next) != 0) break;
        }
        /* one spec for every layer, or a single layer: no count */
        int w = run == 1 || run == n_layers ? snprintf(out + n, cap - n, "%s%s", n ? ";" : "", one)
                : snprintf(out + n, cap - n, "%s%d*%s", n ? ";" : "", run, one);
        /* an item fits if it leaves room for the mark of the rest, unless it is the last */
        size_t room = cap - n, mark = 32;   /* ";... (1024 more layers)" and more */
        if (w < 0 || (size_t)w >= room || (l + run < n_layers && (size_t)w + mark >= room)) {
            out[n] = '\0';   /* truncated: out ends at the last whole item, then the mark */
            if (room > mark)
                snprintf(out + n, room, "%s... (%d more layers)", n ? ";" : "", n_layers - l);
            return;
        }
        n += (size_t)w;
        l += run;
    }
}
