/* replay.c: a plain main for every fuzz target, linked instead of libFuzzer: runs the
 * target's LLVMFuzzerTestOneInput once on each file named on the command line and on each
 * file of each directory named (not recursive, by name, dot files skipped); "-" reads one
 * input from stdin. So any compiler, any external fuzzer (AFL pipes stdin) or none at all
 * can replay a regression or seed corpus. It prints "replay: PATH" to stderr before each
 * input, so the last such line names the input behind a crash; each input gets
 * FUZZ_REPLAY_TIMEOUT seconds (env, default below) before SIGALRM ends the process. It
 * does not mutate inputs or catch crashes: a crash ends the process, as it should.
 */
#include <dirent.h>      /* scandir, alphasort */
#include <errno.h>       /* errno */
#include <stdio.h>       /* fprintf */
#include <stdlib.h>      /* malloc, free, getenv, strtol */
#include <string.h>      /* memcpy, strcmp, strerror */
#include <sys/stat.h>    /* stat, S_ISDIR */
#include <unistd.h>      /* alarm */

#include "tests/fuzz/fuzz.h"   /* LLVMFuzzerInitialize, LLVMFuzzerTestOneInput, fuzz_read_file */

#define REPLAY_TIMEOUT_DEFAULT 60   /* seconds per input (a sanitizer build is slow) */
#define REPLAY_TIMEOUT_MAX 86400    /* one day: larger FUZZ_REPLAY_TIMEOUT values are refused */
#define STDIN_CHUNK 65536           /* bytes read from stdin at a time */

/* Seconds each input may take: env FUZZ_REPLAY_TIMEOUT (1..REPLAY_TIMEOUT_MAX, 0 = none). */
static unsigned replay_timeout(void) {
    const char *text = getenv("FUZZ_REPLAY_TIMEOUT");
    if (!text || !*text) return REPLAY_TIMEOUT_DEFAULT;
    char *end;
    long seconds = strtol(text, &end, 10);
    if (*end || seconds < 0 || seconds > REPLAY_TIMEOUT_MAX) {
        fprintf(stderr, "replay: FUZZ_REPLAY_TIMEOUT: invalid value '%s' (expected 0..%d); "
                "using %d\n", text, REPLAY_TIMEOUT_MAX, REPLAY_TIMEOUT_DEFAULT);
        return REPLAY_TIMEOUT_DEFAULT;
    }
    return (unsigned)seconds;
}

/* Runs the target on size bytes from data, copied to a block of exactly size bytes so
 * that a sanitizer sees a read past the end, as under libFuzzer. Returns 0, or -1 if out
 * of memory. */
static int run_one(const char *name, const unsigned char *data, size_t size) {
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) {
        fprintf(stderr, "replay: %s: out of memory for %zu bytes\n", name, size);
        return -1;
    }
    if (size) memcpy(copy, data, size);
    fprintf(stderr, "replay: %s\n", name);
    fflush(stderr);
    alarm(replay_timeout());
    LLVMFuzzerTestOneInput(copy, size);
    alarm(0);
    free(copy);
    return 0;
}

/* Reads all of stdin into a malloc'd buffer; NULL after a message. */
static unsigned char *read_stdin(size_t *size) {
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < STDIN_CHUNK) {
            unsigned char *grown = realloc(data, cap + STDIN_CHUNK);
            if (!grown) {
                fprintf(stderr, "replay: stdin: out of memory\n");
                free(data);
                return NULL;
            }
            data = grown;
            cap += STDIN_CHUNK;
        }
        size_t got = fread(data + len, 1, cap - len, stdin);
        len += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "replay: stdin: read error\n");
        free(data);
        return NULL;
    }
    *size = len;
    return data;
}

/* Replays the file at path. Returns 0, or -1 after a message. */
static int replay_file(const char *path) {
    size_t size;
    unsigned char *data = fuzz_read_file(path, &size);
    if (!data) return -1;
    int status = run_one(path, data, size);
    free(data);
    return status;
}

/* Skips "." and ".." and hidden files (such as a generator's stamp). */
static int visible(const struct dirent *entry) {
    return entry->d_name[0] != '.';
}

/* Replays every file of directory dir, by name; adds them to *count. Returns 0 or -1. */
static int replay_dir(const char *dir, long *count) {
    struct dirent **entries;
    int n = scandir(dir, &entries, visible, alphasort), status = 0;
    if (n < 0) {
        fprintf(stderr, "replay: %s: cannot list (%s)\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[FUZZ_PATH_MAX];
        struct stat st;
        int fits = snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name) <
                   (int)sizeof path;
        if (status == 0 && fits && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            status = replay_file(path);
            if (status == 0) (*count)++;
        }
        free(entries[i]);
    }
    free(entries);
    return status;
}

int main(int argc, char **argv) {
    const char *name = argc > 0 ? argv[0] : "replay";
    if (argc < 2) {
        fprintf(stderr, "Usage: %s FILE_OR_DIR... (\"-\" reads one input from stdin)\n"
                "Runs the fuzz target once on every file given or found in a directory; "
                "exits 0 if none crashed.\n", name);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int status;
        if (strcmp(argv[i], "-") == 0) {
            size_t size;
            unsigned char *data = read_stdin(&size);
            status = data ? run_one("(stdin)", data, size) : -1;
            free(data);
            if (status == 0) count++;
        } else if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            status = replay_dir(argv[i], &count);
        } else {
            status = replay_file(argv[i]);
            if (status == 0) count++;
        }
        if (status != 0) return 1;
    }
    fprintf(stderr, "%s: %ld inputs replayed, none crashed\n", name, count);
    return 0;
}
