/* cli.h: the command-line parser shared by run and train, and strict number parsing.
 *
 * A program describes its flags in a table of CliOption; cli_next reads one argument
 * at a time against it (short and long names, "--long=VALUE" or a separate value, the
 * value checked by kind and range) and prints the one usage-error format both programs
 * use. Each number parser accepts the whole string or nothing (no trailing characters,
 * no overflow, no NaN) and checks the range, so a flag's value is never silently
 * replaced (never atoi, which cannot report either).
 */
#ifndef CLI_H
#define CLI_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint64_t */

/* One rule for every number: an optional '-' (only where the range has negative values,
 * so never "-0" for a count), decimal digits, and for real numbers an optional fraction
 * and exponent; no '+', spaces, hexadecimal, inf or nan. */

/* A whole decimal integer in [min, max] into *out. Returns 0, or -1 if text is not one. */
int cli_parse_int(const char *text, long min, long max, int *out);

/* A finite decimal number in [min, max], min itself excluded when open_min, into *out: the
 * nearest float (below FLT_MIN a denormal, or 0; with open_min, a number above min that
 * rounds to min's float or below gives the float just above it). The range holds for the
 * number as written (0.0099999999 is below 0.01, whose float is not). Returns 0, or -1. */
int cli_parse_float(const char *text, double min, double max, int open_min, float *out);

/* An unsigned decimal integer of up to 64 bits, at least min, into *out (a leading '-',
 * which strtoull would wrap around, is refused). Returns 0, or -1. */
int cli_parse_u64(const char *text, uint64_t min, uint64_t *out);

/* text with control characters (bytes below 0x20, 0x7f, UTF-8's C1 controls U+0080..U+009F)
 * written as \xHH, into out (cap bytes with the NUL), for quoting a bad value in a message
 * without sending raw control bytes to a terminal. Text too long for cap is cut before a
 * character (never inside a \xHH) so that "..." and the NUL fit after it, and ends in
 * "...": 300 plain bytes in 256 show as their first 252 and "...". Returns out. */
const char *cli_printable(const char *text, char *out, size_t cap);

/* ---- One flag parser for every program ---- */

#define CLI_EXIT_USAGE 2   /* the exit status of a usage error */

typedef enum {
    CLI_NONE,    /* takes no value */
    CLI_TEXT,    /* any text (a prompt, a spec): the program checks it */
    CLI_PATH,    /* a file's path, without control characters (messages quote paths
                    as given, and a newline or an escape must not reach a terminal) */
    CLI_INT,     /* a decimal integer in [min, max] */
    CLI_FLOAT,   /* a finite decimal number in [min, max] ((min, max] with open_min) */
    CLI_U64      /* an unsigned 64-bit integer >= min */
} CliKind;

typedef struct {
    int id;                  /* the program's name for the flag */
    const char *short_name;  /* "-n", or NULL for a long-only flag */
    const char *long_name;   /* "--n-predict" */
    CliKind kind;
    double min, max;         /* CLI_INT, CLI_FLOAT: the range; CLI_U64: min only */
    int open_min;            /* CLI_FLOAT: min itself excluded */
    const char *expected;    /* what a valid value is, for messages ("a path"); NULL:
                                worded from the kind and range */
} CliOption;

typedef struct {
    const CliOption *option; /* the flag, or NULL for a positional argument */
    const char *flag;        /* the flag as given, without "=VALUE" (view into argv) */
    size_t flag_len;
    const char *value;       /* the flag's value text, or the positional argument */
    int number;              /* CLI_INT: the value */
    float real;              /* CLI_FLOAT: the value */
    uint64_t u64;            /* CLI_U64: the value */
    int options_ended;       /* "--" was read: every later argument is positional */
} CliArg;

/* Reads argv[*i] and, for a flag with a value, "--long=VALUE" or the next argument
 * (*i then moves onto it). An argument not starting with '-', or "-" alone, is
 * positional, and so is every argument after "--" (a file named "-x.bin"). *arg carries that "--" was seen from one
 * call to the next: declare it once, zeroed, before the loop; for the "--" itself
 * cli_next returns 0 with option and value NULL. Returns 0 with *arg filled, or
 * CLI_EXIT_USAGE after printing the problem (unknown option, missing value, invalid
 * value, a value given to a flag that takes none) with cli_usage_error. */
int cli_next(const char *program, const CliOption *options, int n_options, int argc,
             char **argv, int *i, CliArg *arg);

/* 0 if path has no control character (CLI_PATH's rule, for a positional path too);
 * else CLI_EXIT_USAGE after "PROGRAM: SUBJECT: control character in a path (...)". */
int cli_check_path(const char *program, const char *subject, const char *path);

/* What a valid value of o is, e.g. "an integer in 1..64", into buf; returns buf. */
const char *cli_expected(const CliOption *o, char *buf, size_t cap);

/* Prints "PROGRAM: SUBJECT: PROBLEM (got GOT, expected EXPECTED)" (the parenthesis only
 * when got or expected is given; control bytes shown as \xHH) and the line "Try
 * 'PROGRAM --help' for the options." to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *program, const char *subject, const char *problem,
                    const char *got, const char *expected);

/* Prints "PROGRAM: OMP_NUM_THREADS asks for N threads; using the CORES cores" to stderr, N
 * as the variable's text (OpenMP's runtime wraps a number too large for an int), or asked
 * where the variable is unset; for asked < 0 (kernels_cap_threads: no count), that the
 * variable's value is invalid and ignored. */
void cli_note_threads(const char *program, int asked, int cores);

/* Flushes standard output; if anything written to it failed (a full disk, a closed pipe:
 * programs ignore SIGPIPE so that this is reported rather than fatal), prints
 * "PROGRAM: standard output: write error (REASON)" and returns -1; else 0. */
int cli_stdout_ok(const char *program);

#endif /* CLI_H */
