/* attention_spec.h: the text form of an attention variant, as --attn takes it.
 *
 * "NAME[:key=value,...]", e.g. "window:w=64,sinks=4", "performer:m=256,seed=1",
 * "lsh:buckets=16,rounds=8". Every name, key and range is listed by
 * attention_spec_help. Parsing is strict: an unknown name or key, a malformed or
 * out-of-range value is an error that says what is valid. Read attention.h for
 * what each variant computes.
 */
#ifndef ATTENTION_SPEC_H
#define ATTENTION_SPEC_H

#include <stddef.h>      /* size_t */
#include "attention.h"   /* AttentionConfig */

/* Parses spec into cfg (every field not named keeps its default). Returns 0, or -1
 * after writing one message into err (cap bytes): the problem, the bad text, and the
 * valid names or keys with their ranges. */
int attention_spec_parse(const char *spec, AttentionConfig *cfg, char *err, size_t cap);

#define ATTENTION_SPEC_MAX 192   /* bytes that hold any spec attention_spec_format writes */

/* Writes the canonical spec of cfg (its name and the parameters that matter for its
 * kind, e.g. "window:w=64,sinks=4") into out (cap bytes). */
void attention_spec_format(const AttentionConfig *cfg, char *out, size_t cap);

/* One spec per layer: "SPEC" for every layer, or "SPEC;SPEC;..." with one item per layer,
 * where "N*SPEC" stands for N layers of SPEC (e.g. "3*window:w=64;exact" for 4 layers).
 * Fills cfgs (n_layers,). Returns 0, or -1 after one message in err (a bad spec, a bad
 * count, or items covering more or fewer layers than n_layers). */
int attention_spec_parse_layers(const char *spec, int n_layers, AttentionConfig *cfgs,
                                char *err, size_t cap);

/* The canonical text of cfgs (n_layers,) that attention_spec_parse_layers reads back: one
 * spec if every layer has it, else runs of equal layers as "N*SPEC;...". At most cap bytes
 * (ATTENTION_SPEC_MAX * n_layers always holds it); a longer text ends at its last whole
 * item and ";... (N more layers)" (where cap holds 33 bytes). */
void attention_spec_format_layers(const AttentionConfig *cfgs, int n_layers, char *out,
                                  size_t cap);

/* The list of names and keys, one variant per line, for usage text. */
const char *attention_spec_help(void);

#endif /* ATTENTION_SPEC_H */
