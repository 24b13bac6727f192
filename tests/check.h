/* check.h: the tiny test harness every tests/test_*.c links against.
 *
 * Each check prints one line ("ok - ..." or "FAIL - ..."), and check_summary
 * prints "NAME: N passed, N failed" and returns the exit code for main. Float
 * comparisons are relative and absolute: |got - want| <= atol + rtol * |want|, and on
 * failure the largest difference and the first mismatches are printed.
 */
#ifndef CHECK_H
#define CHECK_H

#include <stddef.h>   /* size_t */
#include <stdint.h>   /* uint64_t */

/* Record one check. ok != 0 passes; the message is printf-style. Returns ok. */
int check_true(int ok, const char *fmt, ...);

/* Compare n floats elementwise. Prints the max abs difference and where it is,
 * plus the first 5 mismatches. Returns 1 if every element is within tolerance
 * (and neither side is NaN), else 0. `what` names the tensor in messages. */
int check_close(const char *what, const float *got, const float *want, size_t n,
                double atol, double rtol);

/* Same, against a float64 reference. */
int check_close_f64(const char *what, const float *got, const double *want, size_t n,
                    double atol, double rtol);

/* Record a skipped group of checks, printing "skipped: REASON". */
void check_skip(const char *reason);

/* Print "NAME: N passed, N failed[, N skipped]" and return 0 if nothing failed, else 1. */
int check_summary(const char *name);

#define CHECK_REPO_DATA "tests/data"   /* the small reference files, copied into the repo */
#define CHECK_DATA_PATHS 8              /* check_data_file's rotating result buffers */
#define CHECK_PATH_MAX 512

/* The path of reference file rel (e.g. "gpt2/tiny.bin"): the repository's copy under
 * tests/data when it has one, else ../shared/testdata's, else NULL (the caller then calls
 * check_skip). The string is valid until CHECK_DATA_PATHS more calls. */
const char *check_data_file(const char *rel);

/* The shared test-data folder (env SHARED_DIR, default "../shared"), or NULL
 * when it does not exist. Tests that need it call check_skip when it is NULL. */
const char *check_shared_dir(void);

/* Read a whole file into a malloc'd buffer (caller frees). NULL on failure,
 * with a message on stderr. *size receives the byte count. */
void *check_read_file(const char *path, size_t *size);

/* 1 if the files at a and b both read and hold the same bytes. */
int check_same_bytes(const char *a, const char *b);

/* Run a shell command, capturing stdout and stderr into malloc'd strings
 * (caller frees; either may be NULL to discard). Returns the exit code, or -1
 * if the command could not be run or was killed by a signal. */
int check_run(const char *command, char **out, char **err);

/* Fill x (n,) with uniform values in [-amplitude, amplitude), drawn by splitmix64
 * (Steele, Lea, Flood 2014) from *state, which advances: fixed seeds, same data. */
void check_fill_random(uint64_t *state, float *x, long n, float amplitude);

/* ---- reading the reference cases (.jsonl: one flat JSON object per line) ---- */

/* Pointer just past `"key": ` in line, or NULL. Enough for the reference files, whose
 * keys never occur inside strings (every quote in a string is escaped). */
const char *check_json_field(const char *line, const char *key);

/* Decode the hex string value of key into out (at most cap bytes); *len gets the count.
 * Returns 0, or -1 if the key is missing or the value is not a hex string that fits. */
int check_json_hex(const char *line, const char *key, char *out, size_t cap, size_t *len);

/* Parse the integer array value of key into out (at most cap); *n gets the count.
 * Returns 0, or -1 if the key is missing or the value is not such an array that fits. */
int check_json_ints(const char *line, const char *key, int *out, size_t cap, size_t *n);

#endif /* CHECK_H */
