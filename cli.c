/* cli.c: strict number parsing for the command-line programs (see cli.h). */
#include "cli.h"

#include <errno.h>    /* errno, ERANGE */
#include <math.h>     /* isfinite */
#include <stdio.h>    /* snprintf */
#include <stdlib.h>   /* strtol, strtof, strtoull */

/* The one rule for every number on a command line: an optional '-' (where negative values
 * make sense), decimal digits, and for real numbers an optional fraction and exponent.
 * No '+', no spaces, no hexadecimal, no "inf" or "nan": strto* alone accepts all of
 * those. Returns 1 if text has this form. */
static int is_decimal(const char *text, int allow_minus, int allow_real) {
    const char *p = text;
    if (allow_minus && *p == '-') p++;
    const char *digits = p;
    while (*p >= '0' && *p <= '9') p++;
    int n_digits = (int)(p - digits);
    if (allow_real && *p == '.') {
        const char *fraction = ++p;
        while (*p >= '0' && *p <= '9') p++;
        n_digits += (int)(p - fraction);
    }
    if (n_digits == 0) return 0;
    if (allow_real && (*p == 'e' || *p == 'E')) {
        p++;
        if (*p == '-' || *p == '+') p++;
        const char *exponent = p;
        while (*p >= '0' && *p <= '9') p++;
        if (p == exponent) return 0;
    }
    return *p == '\0';
}

int cli_parse_int(const char *text, long min, long max, int *out) {
    if (!is_decimal(text, 1, 0)) return -1;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *text, float min, float max, int open_min, float *out) {
    if (!is_decimal(text, 1, 1)) return -1;
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v < min ||
        v > max || (open_min && v == min)) return -1;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *text, uint64_t min, uint64_t *out) {
    if (!is_decimal(text, 0, 0)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < min) return -1;
    *out = (uint64_t)v;
    return 0;
}

const char *cli_printable(const char *text, char *out, size_t cap) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && n + 5 < cap; p++) {
        if (*p < 0x20 || *p == 0x7f) n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *p);
        else out[n++] = (char)*p;
    }
    if (cap > 0) out[n < cap ? n : cap - 1] = '\0';
    return out;
}
