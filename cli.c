/* cli.c: strict number parsing for the command-line programs (see cli.h). */
#include "cli.h"

#include <errno.h>    /* errno, ERANGE */
#include <math.h>     /* isfinite */
#include <stdlib.h>   /* strtol, strtof, strtoull */

int cli_parse_int(const char *text, long min, long max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *text, float min, float max, int open_min, float *out) {
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v < min ||
        v > max || (open_min && v == min)) return -1;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *text, uint64_t min, uint64_t *out) {
    char *end;
    errno = 0;
    if (text[0] < '0' || text[0] > '9') return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < min) return -1;
    *out = (uint64_t)v;
    return 0;
}
