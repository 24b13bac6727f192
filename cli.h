/* cli.h: strict parsing of command-line numbers, shared by run and train.
 *
 * Each parser accepts the whole string or nothing (no trailing characters, no
 * overflow, no NaN) and checks the range, so a flag's value is never silently
 * replaced (never atoi, which cannot report either). The callers print the usage error.
 */
#ifndef CLI_H
#define CLI_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint64_t */

/* One rule for every number: an optional '-' (not for unsigned values), decimal digits,
 * and for real numbers an optional fraction and exponent; no '+', spaces, hexadecimal,
 * inf or nan. */

/* A whole decimal integer in [min, max] into *out. Returns 0, or -1 if text is not one. */
int cli_parse_int(const char *text, long min, long max, int *out);

/* A finite decimal number in [min, max], min itself excluded when open_min, into *out.
 * Returns 0, or -1. */
int cli_parse_float(const char *text, float min, float max, int open_min, float *out);

/* An unsigned decimal integer of up to 64 bits, at least min, into *out (a leading '-',
 * which strtoull would wrap around, is refused). Returns 0, or -1. */
int cli_parse_u64(const char *text, uint64_t min, uint64_t *out);

/* text with control bytes written as \xHH, into out (cap bytes, truncated if longer),
 * for quoting a bad value in a message without sending raw control bytes to a terminal.
 * Returns out. */
const char *cli_printable(const char *text, char *out, size_t cap);

#endif /* CLI_H */
