/* os.c: the clock, the machine's memory, files read with limits, and crash-safe writes
 * (see os.h for the contracts).
 *
 * The one order every write follows: write the temporary, fsync it, rename it over the
 * destination, fsync the folder. Each function prints one stderr line
 * "PROGRAM: PATH: problem (got ..., expected ...)" when it fails.
 */
#include "os.h"

#include <errno.h>       /* errno, EINVAL, ENOENT, ENOTDIR, EACCES, EAGAIN */
#include <fcntl.h>       /* open, fcntl, struct flock, O_* */
#include <stdio.h>       /* FILE, fdopen, fflush, fclose, fprintf, snprintf, rename, remove */
#include <stdint.h>      /* SIZE_MAX */
#include <stdlib.h>      /* mkstemp, realloc, free */
#include <string.h>      /* strcmp, strerror, strlen, strrchr, memcpy */
#include <sys/stat.h>    /* stat, fstat, fchmod, umask, S_IS* */
#include <time.h>        /* clock_gettime, CLOCK_MONOTONIC */
#include <unistd.h>      /* fsync, close, unlink, access, sysconf, STDIN_FILENO */

#define LOCK_TRIES 8     /* os_lock: attempts while another process removes the file */

/* ---- the clock and the machine ---- */

double os_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t os_physical_memory(size_t fallback) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (unsigned long)pages <= SIZE_MAX / (unsigned long)page)
        return (size_t)pages * (size_t)page;
#endif
    return fallback;
}

/* ---- reading ---- */

int os_not_regular(const char *path, const char **kind) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    *kind = S_ISDIR(st.st_mode) ? "folder" : S_ISFIFO(st.st_mode) ? "FIFO" : "special file";
    return 1;
}

FILE *os_open_read(const char *program, const char *path, const char *expected) {
    const char *kind;
    if (os_not_regular(path, &kind)) {   /* before fopen: opening a FIFO would block */
        if (expected)
            fprintf(stderr, "%s: %s: not a regular file (got a %s, expected %s)\n", program,
                    path, kind, expected);
        return NULL;
    }
    FILE *file = fopen(path, "rb");
    if (!file && expected)
        fprintf(stderr, "%s: %s: cannot open (got \"%s\", expected %s)\n", program, path,
                strerror(errno), expected);
    return file;
}

int os_read_exact(FILE *file, void *data, size_t n, const char *program, const char *path,
                  const char *what) {
    size_t got = fread(data, 1, n, file);
    if (got != n) {
        fprintf(stderr, "%s: %s: truncated %s (got %zu bytes, expected %zu)\n", program, path,
                what, got, n);
        return -1;
    }
    return 0;
}

int os_file_size(FILE *file, const char *program, const char *path, size_t *size) {
    long end = -1;
    if (fseek(file, 0, SEEK_END) == 0) end = ftell(file);
    if (end < 0 || fseek(file, 0, SEEK_SET) != 0) {
        fprintf(stderr, "%s: %s: cannot find the file size (got \"%s\", expected a seekable "
                "file)\n", program, path, strerror(errno));
        return -1;
    }
    *size = (size_t)end;
    return 0;
}

/* All of standard input, at most max_bytes, into a malloc'd buffer (one spare byte);
 * NULL after a stderr line. It has no size to ask for, so the buffer grows. */
static char *read_stdin(const char *program, const char *expected, size_t max_bytes,
                        size_t *size) {
    size_t cap = 0, got = 0;
    char *text = NULL;
    for (;;) {
        if (got == cap) {
            if (cap > max_bytes) {
                fprintf(stderr, "%s: standard input: too large (got more than %zu bytes, "
                        "expected %s of at most %zu)\n", program, max_bytes, expected,
                        max_bytes);
                free(text);
                return NULL;
            }
            size_t next = cap ? 2 * cap : 65536;
            if (next > max_bytes + 1) next = max_bytes + 1;
            char *grown = realloc(text, next + 1);
            if (!grown) {
                fprintf(stderr, "%s: standard input: out of memory (%zu bytes)\n", program,
                        next + 1);
                free(text);
                return NULL;
            }
            text = grown;
            cap = next;
        }
        size_t n = fread(text + got, 1, cap - got, stdin);
        got += n;
        if (n > 0) continue;
        if (ferror(stdin)) {
            fprintf(stderr, "%s: standard input: read error (got \"%s\", expected %s)\n",
                    program, strerror(errno), expected);
            free(text);
            return NULL;
        }
        *size = got;
        return text;
    }
}

char *os_read_file(const char *program, const char *path, const char *expected,
                   size_t max_bytes, size_t *size) {
    if (strcmp(path, "-") == 0) {
        struct stat st;
        if (fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode)) {   /* < FOLDER */
            fprintf(stderr, "%s: standard input: a folder (expected %s)\n", program, expected);
            return NULL;
        }
        return read_stdin(program, expected, max_bytes, size);
    }
    FILE *file = os_open_read(program, path, expected);
    if (!file) return NULL;
    char *text = NULL;
    size_t length = 0;
    if (os_file_size(file, program, path, &length) != 0) {
        /* it said why */
    } else if (length > max_bytes) {
        fprintf(stderr, "%s: %s: file too large (got %zu bytes, expected %s of at most %zu)\n",
                program, path, length, expected, max_bytes);
    } else if (!(text = malloc(length + 1))) {
        fprintf(stderr, "%s: %s: out of memory (%zu bytes)\n", program, path, length);
    } else if (os_read_exact(file, text, length, program, path, "file") != 0) {
        free(text);
        text = NULL;
    } else {
        *size = length;
    }
    fclose(file);
    return text;
}

/* ---- writing ---- */

/* path + suffix into out (cap bytes). Returns 0, or -1 after a stderr line. */
static int with_suffix(char *out, size_t cap, const char *program, const char *path,
                       const char *suffix) {
    int n = snprintf(out, cap, "%s%s", path, suffix);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "%s: %s: path too long (got %zu bytes, expected at most %zu)\n",
                program, path, strlen(path), cap - 1 - strlen(suffix));
        return -1;
    }
    return 0;
}

/* The folder holding path into folder (".", "/" or the part before the last '/').
 * Returns 0, or -1 if it does not fit. */
static int folder_of(char folder[OS_PATH_CAP], const char *path) {
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= OS_PATH_CAP) return -1;
    if (!slash) strcpy(folder, ".");
    else if (n == 0) strcpy(folder, "/");
    else {
        memcpy(folder, path, n);
        folder[n] = '\0';
    }
    return 0;
}

/* fsync the folder of path. Returns 0, or -1 after a stderr line. */
static int sync_folder(const char *program, const char *path) {
    char folder[OS_PATH_CAP];
    if (folder_of(folder, path) != 0) {
        fprintf(stderr, "%s: %s: path too long (got %zu bytes, expected at most %d)\n",
                program, path, strlen(path), OS_PATH_CAP - 1);
        return -1;
    }
    int fd = open(folder, O_RDONLY);
    int rc = fd < 0 ? -1 : fsync(fd);
    int error = errno;
    if (fd >= 0) close(fd);
    if (rc != 0 && !(fd >= 0 && error == EINVAL)) {   /* EINVAL: folders cannot be synced */
        fprintf(stderr, "%s: %s: cannot sync the folder (got \"%s\", expected a readable "
                "folder)\n", program, folder, strerror(error));
        return -1;
    }
    return 0;
}

int os_save_open(SaveFile *s, const char *program, const char *path) {
    s->file = NULL;
    s->temp[0] = '\0';
    if (with_suffix(s->path, sizeof s->path, program, path, "") != 0 ||
        with_suffix(s->temp, sizeof s->temp, program, path, OS_TEMP_SUFFIX "-XXXXXX")) {
        s->temp[0] = '\0';
        return -1;
    }
    int fd = mkstemp(s->temp);
    if (fd < 0) {
        fprintf(stderr, "%s: %s: cannot create a file beside it (got \"%s\", expected a "
                "writable folder)\n", program, path, strerror(errno));
        s->temp[0] = '\0';
        return -1;
    }
    mode_t mask = umask(0);   /* mkstemp makes 0600; give the file what open(2) would */
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(s->file = fdopen(fd, "wb"))) {
        fprintf(stderr, "%s: %s: cannot open (got \"%s\", expected a writable file)\n",
                program, s->temp, strerror(errno));
        close(fd);
        remove(s->temp);
        s->temp[0] = '\0';
        return -1;
    }
    return 0;
}

int os_close_synced(FILE *file, const char *program, const char *path) {
    int ok = fflush(file) == 0 && fsync(fileno(file)) == 0;
    int error = errno;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        error = errno;
    }
    if (!ok) {
        fprintf(stderr, "%s: %s: write failed (got \"%s\", expected the whole file on the "
                "disk)\n", program, path, strerror(error));
        remove(path);
        return -1;
    }
    return 0;
}

int os_rename_synced(const char *program, const char *from, const char *to) {
    if (rename(from, to) != 0) {
        fprintf(stderr, "%s: %s: cannot rename to %s (got \"%s\", expected a writable path)\n",
                program, from, to, strerror(errno));
        return -1;
    }
    return sync_folder(program, to);
}

int os_save_commit(SaveFile *s, const char *program) {
    FILE *file = s->file;
    s->file = NULL;
    int rc = os_close_synced(file, program, s->temp);   /* removes the temporary on failure */
    if (rc == 0 && rename(s->temp, s->path) != 0) {
        fprintf(stderr, "%s: %s: cannot rename %s over it (got \"%s\", expected a writable "
                "path)\n", program, s->path, s->temp, strerror(errno));
        remove(s->temp);
        rc = -1;
    }
    s->temp[0] = '\0';
    return rc == 0 ? sync_folder(program, s->path) : -1;
}

void os_save_discard(SaveFile *s) {
    if (s->file) fclose(s->file);
    s->file = NULL;
    if (s->temp[0]) remove(s->temp);
    s->temp[0] = '\0';
}

FILE *os_create_new(const char *program, const char *path) {
    if (unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "%s: %s: cannot replace (got \"%s\", expected a writable path)\n",
                program, path, strerror(errno));
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    FILE *file = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!file) {
        fprintf(stderr, "%s: %s: cannot open for writing (got \"%s\", expected a writable "
                "path)\n", program, path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            remove(path);
        }
    }
    return file;
}

int os_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int os_check_output(const char *program, const char *path, const char *what,
                          const char *const inputs[], int n_inputs) {
    struct stat st;
    if (path[0] == '\0') {
        fprintf(stderr, "%s: empty path for %s (got \"\", expected a file name)\n", program,
                what);
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode) ? "folder" : S_ISFIFO(st.st_mode) ? "FIFO"
                         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device"
                         : "special file";
        fprintf(stderr, "%s: %s: not a regular file (got a %s, expected a path for %s)\n",
                program, path, kind, what);
        return -1;
    }
    for (int i = 0; i < n_inputs; i++) {
        if (os_same_file(path, inputs[i])) {
            fprintf(stderr, "%s: %s: is the input %s (got the same file, expected another path "
                    "for %s)\n", program, path, inputs[i], what);
            return -1;
        }
    }
    char folder[OS_PATH_CAP];
    if (folder_of(folder, path) != 0) {
        fprintf(stderr, "%s: %s: path too long (got %zu bytes, expected at most %d)\n",
                program, path, strlen(path), OS_PATH_CAP - 1);
        return -1;
    }
    int error = stat(folder, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR
              : access(folder, W_OK | X_OK) != 0 ? errno : 0;
    if (error) {
        fprintf(stderr, "%s: %s: cannot write %s there (got \"%s\" for the folder %s, expected "
                "a writable folder)\n", program, path, what, strerror(error), folder);
        return -1;
    }
    return 0;
}

int os_lock(SaveLock *l, const char *program, const char *path) {
    l->fd = -1;
    if (with_suffix(l->path, sizeof l->path, program, path, OS_LOCK_SUFFIX) != 0)
        return -1;
    for (int attempt = 0; attempt < LOCK_TRIES; attempt++) {
        int fd = open(l->path, O_RDWR | O_CREAT, 0666);
        if (fd < 0) {
            fprintf(stderr, "%s: %s: cannot create its lock %s (got \"%s\", expected a "
                    "writable folder)\n", program, path, l->path, strerror(errno));
            return -1;
        }
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if (fcntl(fd, F_SETLK, &lock) != 0) {
            int error = errno;
            struct flock holder = lock;
            long pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK
                     ? (long)holder.l_pid : 0;
            close(fd);
            if (error == EACCES || error == EAGAIN) {
                fprintf(stderr, "%s: %s: another process (pid %ld) is writing it (got a lock "
                        "held on %s, expected no other writer: wait for it, or choose another "
                        "path)\n", program, path, pid, l->path);
            } else {
                fprintf(stderr, "%s: %s: cannot lock %s (got \"%s\", expected a file system "
                        "with POSIX locks)\n", program, path, l->path, strerror(error));
            }
            return -1;
        }
        /* the holder before us may have removed the file after we opened it: the lock
         * counts only if it is on the file that is at the path now */
        struct stat held, now;
        if (fstat(fd, &held) == 0 && stat(l->path, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino) {
            l->fd = fd;
            return 0;
        }
        close(fd);
    }
    fprintf(stderr, "%s: %s: cannot lock %s (got a lock file replaced %d times, expected it to "
            "stay)\n", program, path, l->path, LOCK_TRIES);
    return -1;
}

void os_unlock(SaveLock *l) {
    if (l->fd < 0) return;
    unlink(l->path);   /* while still locked: a waiter then finds no file, or a new one */
    close(l->fd);
    l->fd = -1;
}
