/* cli.c: the flag parser and strict number parsing of the command-line programs
 * (see cli.h). */
#include "cli.h"

#include <errno.h>    /* errno, ERANGE, EIO */
#include <float.h>    /* DBL_TRUE_MIN */
#include <math.h>     /* isfinite, nextafterf */
#include <stdio.h>    /* snprintf, fflush, ferror, fprintf */
#include <stdlib.h>   /* strtol, strtof, strtod, strtoull, getenv */
#include <string.h>   /* strlen, strcmp, strncmp, strchr, strerror */

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
    if (!is_decimal(text, min < 0, 0)) return -1;   /* '-' only where negatives exist */
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *text, double min, double max, int open_min, float *out) {
    if (!is_decimal(text, min < 0.0, 1)) return -1;
    char *end;
    errno = 0;
    float v = strtof(text, &end);   /* an underflow (ERANGE) gives the nearest float: kept */
    if (end == text || *end != '\0' || !isfinite(v)) return -1;
    /* the range on the number as written: 100.0000001 rounds to the float 100 */
    errno = 0;
    double exact = strtod(text, NULL);
    /* too small even for a double (1e-400): as written just off 0, on its sign's side */
    if (errno == ERANGE && exact == 0.0) exact = text[0] == '-' ? -DBL_TRUE_MIN : DBL_TRUE_MIN;
    if (exact < min || exact > max || (open_min && exact == min)) return -1;
    /* above min as written, not as a float: 1e-47 for (0, 1] rounds to 0 */
    if (open_min && v <= (float)min) v = nextafterf((float)min, (float)max);
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

/* 1 if p starts a control character: a byte below 0x20, 0x7f, or one of UTF-8's C1
 * controls U+0080..U+009F (0xc2 0x80..0x9f; U+009B starts an escape on some terminals). */
static int control_at(const unsigned char *p) {
    return *p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
}

const char *cli_printable(const char *text, char *out, size_t cap) {
    if (cap < 4) {   /* no room for "..." and the NUL: nothing shown */
        if (cap > 0) out[0] = '\0';
        return out;
    }
    size_t n = 0, marked = 0;   /* marked: the longest length "..." still fits after */
    const unsigned char *p = (const unsigned char *)text;
    for (; *p; p++) {
        char one[9] = {(char)*p};   /* the character as shown: itself, \xHH or \xc2\xHH */
        int c1 = control_at(p) && *p == 0xc2;
        size_t k = c1 ? (size_t)snprintf(one, sizeof one, "\\x%02x\\x%02x", p[0], p[1])
                 : control_at(p) ? (size_t)snprintf(one, sizeof one, "\\x%02x", *p) : 1;
        if (n + k >= cap) break;   /* it and the NUL do not fit: cut before it */
        memcpy(out + n, one, k);
        n += k;
        if (n + 4 <= cap && (p[1 + c1] & 0xc0) != 0x80) marked = n;   /* not in a character */
        p += c1;
    }
    if (*p) n = marked + (size_t)snprintf(out + marked, 4, "...");   /* cut, and marked so */
    out[n] = '\0';
    return out;
}

/* ------------------------------------------------------------------------- */
/* The flag parser                                                             */

#define CLI_SHOWN_CAP 256   /* bytes of a flag or value quoted in a message */

int cli_usage_error(const char *program, const char *subject, const char *problem,
                    const char *got, const char *expected) {
    char shown[CLI_SHOWN_CAP];
    fprintf(stderr, "%s: %s: %s", program, cli_printable(subject, shown, sizeof shown),
            problem);
    if (got && expected) fprintf(stderr, " (got %s, expected %s)", got, expected);
    else if (expected) fprintf(stderr, " (expected %s)", expected);
    fprintf(stderr, "\nTry '%s --help' for the options.\n", program);
    return CLI_EXIT_USAGE;
}

const char *cli_expected(const CliOption *o, char *buf, size_t cap) {
    if (o->expected) snprintf(buf, cap, "%s", o->expected);
    else if (o->kind == CLI_INT) snprintf(buf, cap, "an integer in %.0f..%.0f", o->min, o->max);
    else if (o->kind == CLI_U64) snprintf(buf, cap, "an integer in %.0f..18446744073709551615",
                                          o->min);
    else if (o->kind == CLI_FLOAT && o->open_min)
        snprintf(buf, cap, "a number in (%g, %g]", o->min, o->max);
    else if (o->kind == CLI_FLOAT) snprintf(buf, cap, "a number in %g..%g", o->min, o->max);
    else snprintf(buf, cap, "a value");
    return buf;
}

int cli_check_path(const char *program, const char *subject, const char *path) {
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (!control_at(p)) continue;
        char shown[CLI_SHOWN_CAP], got[CLI_SHOWN_CAP + 2];
        snprintf(got, sizeof got, "'%s'", cli_printable(path, shown, sizeof shown));
        return cli_usage_error(program, subject, "control character in a path", got,
                               "a path without control characters");
    }
    return 0;
}

/* The option spelled name[0 .. len) (short or long), or NULL. */
static const CliOption *find_option(const CliOption *options, int n, const char *name,
                                    size_t len) {
    for (int k = 0; k < n; k++) {
        const CliOption *o = &options[k];
        if ((o->short_name && strlen(o->short_name) == len &&
             strncmp(o->short_name, name, len) == 0) ||
            (strlen(o->long_name) == len && strncmp(o->long_name, name, len) == 0)) return o;
    }
    return NULL;
}

/* Parses text as o's kind into arg; returns 0, or -1 if it is not a valid value. */
static int parse_value(const CliOption *o, const char *text, CliArg *arg) {
    switch (o->kind) {
    case CLI_INT: return cli_parse_int(text, (long)o->min, (long)o->max, &arg->number);
    case CLI_FLOAT: return cli_parse_float(text, o->min, o->max, o->open_min, &arg->real);
    case CLI_U64: return cli_parse_u64(text, (uint64_t)o->min, &arg->u64);
    default: return 0;
    }
}

int cli_next(const char *program, const CliOption *options, int n_options, int argc,
             char **argv, int *i, CliArg *arg) {
    const char *text = argv[*i];
    char flag[CLI_SHOWN_CAP], got[CLI_SHOWN_CAP + 2], shown[CLI_SHOWN_CAP];
    char expected[CLI_SHOWN_CAP + 16];
    int ended = arg->options_ended;
    memset(arg, 0, sizeof *arg);
    arg->options_ended = ended;
    arg->flag = text;
    if (!ended && strcmp(text, "--") == 0) {   /* the end of the options */
        arg->options_ended = 1;
        return 0;
    }
    if (ended || text[0] != '-' || text[1] == '\0') {   /* positional, or "-" */
        arg->value = text;
        return 0;
    }
    size_t len = strlen(text);
    const char *equals = strncmp(text, "--", 2) == 0 ? strchr(text, '=') : NULL;
    if (equals) len = (size_t)(equals - text);
    arg->flag_len = len;
    snprintf(flag, sizeof flag, "%.*s", (int)len, text);
    snprintf(got, sizeof got, "'%s'", cli_printable(text, shown, sizeof shown));
    const CliOption *o = find_option(options, n_options, text, len);
    if (!o) return cli_usage_error(program, flag, "unknown option", got,
                                   "an option --help lists");
    arg->option = o;
    if (o->kind == CLI_NONE) {
        if (!equals) return 0;
        snprintf(expected, sizeof expected, "%s alone", flag);
        return cli_usage_error(program, flag, "takes no value", got, expected);
    }
    cli_expected(o, expected, sizeof expected);
    if (equals) {
        arg->value = equals + 1;
    } else {
        if (*i + 1 >= argc)
            return cli_usage_error(program, flag, "missing value", "nothing after it",
                                   expected);
        arg->value = argv[++*i];
    }
    snprintf(got, sizeof got, "'%s'", cli_printable(arg->value, shown, sizeof shown));
    if (o->kind == CLI_PATH) return cli_check_path(program, flag, arg->value);
    if (parse_value(o, arg->value, arg) != 0)
        return cli_usage_error(program, flag, "invalid value", got, expected);
    return 0;
}

void cli_note_threads(const char *program, int asked, int cores) {
    const char *env = getenv("OMP_NUM_THREADS");
    char shown[64], number[16];
    snprintf(number, sizeof number, "%d", asked);
    if (asked < 0)
        fprintf(stderr, "%s: OMP_NUM_THREADS: invalid value (got '%s', expected a positive "
                "integer or a list of them); ignored\n", program,
                env ? cli_printable(env, shown, sizeof shown) : "");
    else
        fprintf(stderr, "%s: OMP_NUM_THREADS asks for %s threads; using the %d core%s\n",
                program, env ? cli_printable(env, shown, sizeof shown) : number, cores,
                cores == 1 ? "" : "s");
}

int cli_stdout_ok(const char *program) {
    /* a failed write left its errno: keep it when the flush has nothing left to fail on */
    int error = fflush(stdout) != 0 ? errno : ferror(stdout) ? (errno ? errno : EIO) : 0;
    if (!error) return 0;
    fprintf(stderr, "%s: standard output: write error (%s)\n", program, strerror(error));
    return -1;
}
