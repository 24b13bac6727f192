/* check.c: implementation of the test harness declared in check.h. */
#include "check.h"

#include <errno.h>    /* errno */
#include <limits.h>   /* INT_MIN, INT_MAX */
#include <math.h>     /* fabs, isnan */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* printf, fopen */
#include <stdlib.h>   /* malloc, getenv */
#include <string.h>   /* strerror, memcmp */
#include <sys/stat.h> /* stat */
#include <sys/wait.h> /* WIFEXITED */
#include <unistd.h>   /* close */

static int passed, failed, skipped;

/* One line a check: a label that quotes a program's output keeps its newlines and other
 * control bytes as escapes (\n, \xNN), so that no stray line follows it. */
int check_true(int ok, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char small[512], *label = small;
    int len = vsnprintf(small, sizeof small, fmt, args);
    va_end(args);
    if (len >= (int)sizeof small && (label = malloc((size_t)len + 1)) != NULL) {
        va_start(args, fmt);
        vsnprintf(label, (size_t)len + 1, fmt, args);
        va_end(args);
    }
    if (!label) label = small;   /* out of memory: the label cut short */
    printf("%s - ", ok ? "ok" : "FAIL");
    for (const unsigned char *c = (const unsigned char *)label; *c; c++) {
        if (*c == '\n') printf("\\n");
        else if (*c < 0x20 || *c == 0x7f) printf("\\x%02x", *c);
        else putchar(*c);
    }
    printf("\n");
    if (label != small) free(label);
    if (ok) passed++; else failed++;
    fflush(stdout);
    return ok;
}

/* Shared core of check_close and check_close_f64: want_at(i) reads the reference. */
static int close_core(const char *what, const float *got, const void *want, int want_is_f64,
                      size_t n, double atol, double rtol) {
    double max_diff = 0.0;
    size_t max_at = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double w = want_is_f64 ? ((const double *)want)[i] : (double)((const float *)want)[i];
        double g = (double)got[i];
        double diff = fabs(g - w);
        int ok = !isnan(g) && !isnan(w) && diff <= atol + rtol * fabs(w);
        if (isnan(g) != isnan(w)) diff = (double)INFINITY;
        if (diff > max_diff || (isnan(diff) && !isnan(max_diff))) { max_diff = diff; max_at = i; }
        if (!ok) {
            if (bad < 5) printf("  mismatch %s[%zu]: got %.9g want %.9g\n", what, i, g, w);
            bad++;
        }
    }
    return check_true(bad == 0, "%s: %zu values, max |diff| %.3g at [%zu] (atol %.1g, rtol %.1g)%s",
                      what, n, max_diff, max_at, atol, rtol, bad ? ", MISMATCHES" : "");
}

int check_close(const char *what, const float *got, const float *want, size_t n,
                double atol, double rtol) {
    return close_core(what, got, want, 0, n, atol, rtol);
}

int check_close_f64(const char *what, const float *got, const double *want, size_t n,
                    double atol, double rtol) {
    return close_core(what, got, want, 1, n, atol, rtol);
}

void check_skip(const char *reason) {
    printf("skipped: %s\n", reason);
    skipped++;
}

int check_summary(const char *name) {
    if (skipped) printf("%s: %d passed, %d failed, %d skipped\n", name, passed, failed, skipped);
    else printf("%s: %d passed, %d failed\n", name, passed, failed);
    return failed ? 1 : 0;
}

const char *check_data_file(const char *rel) {
    static char paths[CHECK_DATA_PATHS][CHECK_PATH_MAX];
    static int next;
    char *path = paths[next++ % CHECK_DATA_PATHS];
    struct stat st;
    snprintf(path, CHECK_PATH_MAX, "%s/%s", CHECK_REPO_DATA, rel);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
    const char *shared = check_shared_dir();
    if (!shared) return NULL;
    snprintf(path, CHECK_PATH_MAX, "%s/testdata/%s", shared, rel);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? path : NULL;
}

const char *check_shared_dir(void) {
    const char *dir = getenv("SHARED_DIR");
    if (!dir || !*dir) dir = "../shared";
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return dir;
}

void *check_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "check: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *grown = realloc(data, cap + 1);
            if (!grown) { free(data); fclose(f); return NULL; }
            data = grown;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    data[len] = '\0';
    *size = len;
    return data;
}

int check_same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *da = check_read_file(a, &na), *db = check_read_file(b, &nb);
    int same = da && db && na == nb && memcmp(da, db, na) == 0;
    free(da);
    free(db);
    return same;
}

/* Reads a temporary file back as a string, then removes it. */
static char *slurp_and_remove(const char *path) {
    size_t size;
    char *text = check_read_file(path, &size);
    remove(path);
    return text;
}

int check_run(const char *command, char **out, char **err) {
    char out_path[] = "/tmp/check_out_XXXXXX", err_path[] = "/tmp/check_err_XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    if (out_fd < 0 || err_fd < 0) return -1;
    size_t len = strlen(command) + 2 * sizeof out_path + 32;
    char *full = malloc(len);
    if (!full) return -1;
    snprintf(full, len, "(%s) >%s 2>%s </dev/null", command, out_path, err_path);
    int status = system(full);
    free(full);
    char *o = slurp_and_remove(out_path), *e = slurp_and_remove(err_path);
    if (out) *out = o; else free(o);
    if (err) *err = e; else free(e);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

const char *check_json_field(const char *line, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(line, pattern);
    return at ? at + strlen(pattern) : NULL;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int check_json_hex(const char *line, const char *key, char *out, size_t cap, size_t *len) {
    const char *hex = check_json_field(line, key);
    *len = 0;
    if (!hex || *hex != '"') return -1;
    for (hex++; *hex != '"'; hex += 2) {
        int high = hex_digit(hex[0]), low = high < 0 ? -1 : hex_digit(hex[1]);
        if (high < 0 || low < 0 || *len == cap) return -1;
        out[(*len)++] = (char)(high * 16 + low);
    }
    return 0;
}

int check_json_ints(const char *line, const char *key, int *out, size_t cap, size_t *n) {
    const char *list = check_json_field(line, key);
    *n = 0;
    if (!list || *list != '[') return -1;
    for (list++; *list != ']';) {
        char *end;
        long value = strtol(list, &end, 10);
        if (end == list || value < INT_MIN || value > INT_MAX || *n == cap) return -1;
        out[(*n)++] = (int)value;
        list = end;
        while (*list == ',' || *list == ' ') list++;
    }
    return 0;
}

void check_fill_random(uint64_t *state, float *x, long n, float amplitude) {
    for (long i = 0; i < n; i++) {
        uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        x[i] = amplitude * (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}
