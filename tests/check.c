/* check.c: implementation of the test harness declared in check.h. */
#include "check.h"

#include <errno.h>    /* errno */
#include <math.h>     /* fabs, isnan */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* printf, fopen */
#include <stdlib.h>   /* malloc, getenv */
#include <string.h>   /* strerror */
#include <sys/stat.h> /* stat */
#include <sys/wait.h> /* WIFEXITED */
#include <unistd.h>   /* close */

static int passed, failed, skipped;

int check_true(int ok, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    printf("%s - ", ok ? "ok" : "FAIL");
    vprintf(fmt, args);
    printf("\n");
    va_end(args);
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
        if (isnan(g) != isnan(w)) diff = INFINITY;
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
