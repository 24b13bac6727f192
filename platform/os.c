/* os.c: the clock, the machine's memory, files read with limits, and crash-safe writes
 * (see os.h for the contracts).
 *
 * The one order every write follows: write the temporary, fsync it, rename it over the
 * destination, fsync the folder. Each function prints one stderr line
 * "PROGRAM: PATH: problem (got ..., expected ...)" when it fails.
 *
 * WASI (the web build, web/) has no signals, file locks, permissions or address-space
 * limits: there this file is its clock and its reading half only (the page writes no
 * files), the writing half and its includes left out by `#ifndef __wasi__`.
 */
#define _GNU_SOURCE   /* O_TMPFILE (Linux), where the C library has it; else unused */
#include "os.h"

#include <errno.h>       /* errno, EINVAL, ENOENT, ENOTDIR, EACCES, EAGAIN, EEXIST, ELOOP, EISDIR */
#include <fcntl.h>       /* open, fcntl, linkat, struct flock, O_*, AT_* */
#include <limits.h>      /* NAME_MAX */
#ifndef __wasi__
#include <pthread.h>     /* pthread_sigmask, pthread_create, pthread_join */
#include <sched.h>       /* sched_getaffinity, CPU_COUNT (Linux) */
#include <signal.h>      /* sigaction, signal, sigset_t, raise, SIG* */
#include <sys/resource.h>   /* getrlimit, RLIMIT_AS */
#endif
#include <stdio.h>       /* FILE, fdopen, fflush, fclose, fprintf, snprintf, rename, remove */
#include <stdint.h>      /* SIZE_MAX, uintptr_t */
#include <stdlib.h>      /* mkstemp, malloc, calloc, realloc, free */
#include <string.h>      /* strcmp, strerror, strlen, strrchr, strchr, strstr, strcspn, memcpy */
#include <sys/mman.h>    /* mmap, madvise, mprotect, munmap (WASI: emulated) */
#include <sys/stat.h>    /* stat, fstat, fchmod, umask, S_IS* */
#include <time.h>        /* clock_gettime, CLOCK_MONOTONIC */
#include <unistd.h>      /* fsync, close, unlink, link, pread, write, access, sysconf, getpid */

#define OS_CGROUP_TEXT_CAP 65536   /* most of /proc/self/cgroup read (a line a hierarchy: a
                                    * dozen or so) */
/* os_close_synced's reason for a write that failed before it (stdio keeps no errno) */
#define OS_LOST_WRITE "an earlier write to it failed: a full disk, or ulimit -f"
#define LOCK_TRIES 8     /* os_lock: attempts while another process removes the file */
#define OS_PAGE_MIN 4096 /* os_commit: a write this far apart reaches every page (the
                          * smallest page of the systems this builds for) */

/* ---- the clock and the machine ---- */

double os_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The number in the file at path ("max", an empty or unreadable file: none) into *bytes,
 * if smaller. */
static void lower_to_file(const char *path, size_t *bytes) {
    FILE *file = fopen(path, "r");
    unsigned long long n;
    if (file && fscanf(file, "%llu", &n) == 1 && n < *bytes) *bytes = (size_t)n;
    if (file) fclose(file);
}

/* The CPUs' worth of time a quota of `quota` microseconds a period of `period` gives,
 * rounded up (1.5 CPUs: 2 threads, as Java's runtime counts; Go's also rounds up, to at
 * least 2), into *cpus if smaller; a quota or period that is not positive (version 1's
 * -1) is no limit. */
static void lower_to_quota(long long quota, long long period, size_t *cpus) {
    if (quota <= 0 || period <= 0) return;
    unsigned long long n = (unsigned long long)(quota / period) + (quota % period != 0);
    if (n < *cpus) *cpus = (size_t)n;
}

/* Version 2's cpu.max at path, "QUOTA PERIOD" ("max PERIOD": no limit), into *cpus. */
static void lower_to_cpu_max(const char *path, size_t *cpus) {
    FILE *file = fopen(path, "r");
    long long quota, period;
    if (file && fscanf(file, "%lld %lld", &quota, &period) == 2)
        lower_to_quota(quota, period, cpus);
    if (file) fclose(file);
}

/* Version 1's cpu.cfs_quota_us at path and the cpu.cfs_period_us beside it into *cpus. */
static void lower_to_cfs_quota(const char *path, size_t *cpus) {
    static const char quota_name[] = "cpu.cfs_quota_us";
    char period_path[OS_PATH_CAP];
    size_t folder = strlen(path) - (sizeof quota_name - 1);   /* path ends with quota_name */
    int len = snprintf(period_path, sizeof period_path, "%.*scpu.cfs_period_us", (int)folder,
                       path);
    FILE *quota_file = fopen(path, "r");
    FILE *period_file = len > 0 && (size_t)len < sizeof period_path ? fopen(period_path, "r")
                                                                    : NULL;
    long long quota, period;
    if (quota_file && period_file && fscanf(quota_file, "%lld", &quota) == 1 &&
        fscanf(period_file, "%lld", &period) == 1)
        lower_to_quota(quota, period, cpus);
    if (quota_file) fclose(quota_file);
    if (period_file) fclose(period_file);
}

/* A limit file's reader: the limit in the file at path into *value, if smaller. */
typedef void (*LowerFile)(const char *path, size_t *value);

/* The limit of the cgroup at root + group (a folder of limit files named name, read by
 * lower) and of each of its parents, the least of them into *value, if smaller. */
static void lower_to_cgroup(const char *root, const char *group, const char *name,
                            LowerFile lower, size_t *value) {
    char path[OS_PATH_CAP];
    size_t n = strlen(group);
    while (n > 0 && group[n - 1] == '/') n--;
    for (;;) {
        int len = snprintf(path, sizeof path, "%s%.*s/%s", root, (int)n, group, name);
        if (len > 0 && (size_t)len < sizeof path) lower(path, value);
        if (n == 0) return;
        while (n > 0 && group[n - 1] != '/') n--;   /* the parent */
        while (n > 0 && group[n - 1] == '/') n--;
    }
}

/* 1 if path has a component "..". */
static int has_parent_step(const char *path) {
    for (const char *c = path; *c; c += strcspn(c, "/")) {
        while (*c == '/') c++;
        if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0')) return 1;
    }
    return 0;
}

/* 1 if the comma-separated list of controllers has `controller` ("cpu" in "cpu,cpuacct";
 * not in "cpuset"). */
static int has_controller(const char *list, const char *controller) {
    size_t n = strlen(controller);
    for (const char *c = list; *c; c += *c == ',') {
        size_t len = strcspn(c, ",");
        if (len == n && !strncmp(c, controller, n)) return 1;
        c += len;
    }
    return 0;
}

/* The least of value and the limits of the cgroups cgroup_text names (and of their
 * parents) under root: version 2's file v2_name, version 1's v1_name under
 * root/controller, read by v2 and v1 (os_cgroup_memory_limit's contract, for any
 * controller). */
static size_t cgroup_limit(const char *cgroup_text, const char *root, const char *controller,
                           const char *v2_name, LowerFile v2, const char *v1_name,
                           LowerFile v1, size_t value) {
    char line[OS_PATH_CAP], root_v1[OS_PATH_CAP];
    int len = snprintf(root_v1, sizeof root_v1, "%s/%s", root, controller);
    if (len < 0 || (size_t)len >= sizeof root_v1) return value;
    /* lines "ID:CONTROLLERS:PATH" ("0::PATH" for version 2) */
    for (const char *at = cgroup_text; *at;) {
        size_t length = strcspn(at, "\n");
        const char *next = at + length + (at[length] == '\n');
        if (length >= sizeof line) {   /* a path no limit file's fits in */
            at = next;
            continue;
        }
        memcpy(line, at, length);
        line[length] = '\0';
        at = next;
        char *controllers = strchr(line, ':');
        char *group = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!group) continue;
        *group++ = '\0';
        *controllers++ = '\0';   /* line: the ID alone */
        /* a ".." names a cgroup outside the part of the tree this system shows at root (a
         * cgroup namespace's): its limits and its parents' are not there */
        if (has_parent_step(group)) continue;
        if (!strcmp(line, "0") && !*controllers)
            lower_to_cgroup(root, group, v2_name, v2, &value);
        else if (has_controller(controllers, controller))
            lower_to_cgroup(root_v1, group, v1_name, v1, &value);
    }
    return value;
}

size_t os_cgroup_memory_limit(const char *cgroup_text, const char *root, size_t bytes) {
    return cgroup_limit(cgroup_text, root, "memory", "memory.max", lower_to_file,
                        "memory.limit_in_bytes", lower_to_file, bytes);
}

size_t os_cgroup_cpu_limit(const char *cgroup_text, const char *root, size_t cpus) {
    return cgroup_limit(cgroup_text, root, "cpu", "cpu.max", lower_to_cpu_max,
                        "cpu.cfs_quota_us", lower_to_cfs_quota, cpus);
}

/* The text of /proc/self/cgroup (read to its end, or to OS_CGROUP_TEXT_CAP: the file tells
 * no size), malloc'd, or NULL where there is none. */
static char *cgroup_text(void) {
    FILE *file = fopen("/proc/self/cgroup", "r");
    char *text = file ? malloc(OS_CGROUP_TEXT_CAP) : NULL;
    if (text) text[fread(text, 1, OS_CGROUP_TEXT_CAP - 1, file)] = '\0';
    if (file) fclose(file);
    return text;
}

#if defined(MAP_ANONYMOUS) && !defined(__wasi__) && !defined(OS_PLAIN_ALLOC)
#define OS_HEADER 64   /* the mapping's length, kept in front of the block (one cache line) */
#define OS_HUGE_MIN (4u << 20)   /* blocks marked for huge pages: at least two of them */
#if defined(MADV_HUGEPAGE)
#define OS_HUGE_FILES 1   /* os_map_file reads a large file onto huge pages */
#endif
void *os_alloc_zeroed(size_t n, size_t size) {
    if (size && n > (SIZE_MAX - OS_HEADER) / size) return NULL;
    size_t bytes = OS_HEADER + n * size;
    unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    if (p == MAP_FAILED) return NULL;
#if defined(MADV_HUGEPAGE)
    /* a hint (without it, 4 KiB pages), for large blocks only: a huge page is 2 MiB to
     * clear, and the kernel may compact memory to find one */
    if (bytes >= OS_HUGE_MIN) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memcpy(p, &bytes, sizeof bytes);
    return p + OS_HEADER;
}

void os_free_zeroed(void *p) {
    if (!p) return;
    size_t bytes;
    unsigned char *start = (unsigned char *)p - OS_HEADER;
    memcpy(&bytes, start, sizeof bytes);
    munmap(start, bytes);
}

int os_alloc_parts(const OsPart *parts, int n) {
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {   /* each part on cache lines of its own */
        if (parts[i].bytes > SIZE_MAX - 63 - bytes) return -1;
        bytes += (parts[i].bytes + 63) / 64 * 64;
    }
    unsigned char *block = os_alloc_zeroed(1, bytes);
    for (int i = 0; i < n; i++) {
        *parts[i].at = block;
        if (block) block += (parts[i].bytes + 63) / 64 * 64;
    }
    return block ? 0 : -1;
}

void os_free_parts(const OsPart *parts, int n) {
    if (n > 0) os_free_zeroed(*parts[0].at);   /* the block starts at the first part */
    for (int i = 0; i < n; i++) *parts[i].at = NULL;
}
#else
void *os_alloc_zeroed(size_t n, size_t size) { return calloc(n, size); }
void os_free_zeroed(void *p) { free(p); }

int os_alloc_parts(const OsPart *parts, int n) {
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok &= (*parts[i].at = calloc(1, parts[i].bytes ? parts[i].bytes : 1)) != NULL;
    if (!ok) os_free_parts(parts, n);
    return ok ? 0 : -1;
}

void os_free_parts(const OsPart *parts, int n) {
    for (int i = 0; i < n; i++) {
        free(*parts[i].at);
        *parts[i].at = NULL;
    }
}
#endif

void os_commit(void *p, size_t bytes) {
    /* a write, not a read: a fresh page read first is mapped to the shared zero page, and
     * faults again when it is written */
    volatile unsigned char *b = p;
    for (size_t i = 0; i < bytes; i += OS_PAGE_MIN) b[i] = 0;
    if (bytes > 0) b[bytes - 1] = 0;
}

void os_commit_keep(void *p, size_t bytes) {
    volatile unsigned char *b = p;
    for (size_t i = 0; i < bytes; i += OS_PAGE_MIN) b[i] = b[i];
    if (bytes > 0) b[bytes - 1] = b[bytes - 1];
}

size_t os_memory_limit(size_t fallback) {
    size_t bytes = SIZE_MAX;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (unsigned long)pages <= SIZE_MAX / (unsigned long)page)
        bytes = (size_t)pages * (size_t)page;
#endif
    char *text = cgroup_text();   /* Linux cgroups: /proc/self/cgroup names them */
    if (text) bytes = os_cgroup_memory_limit(text, "/sys/fs/cgroup", bytes);
    free(text);
#ifndef __wasi__
    struct rlimit limit;   /* ulimit -v */
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < bytes)
        bytes = (size_t)limit.rlim_cur;
#endif
    return bytes == SIZE_MAX ? fallback : bytes;
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
    if (!*path) {   /* no name at all: said as such, not as ": cannot open" */
        if (expected)
            fprintf(stderr, "%s: empty path (got \"\", expected %s)\n", program, expected);
        return NULL;
    }
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

/* All of file (named name in messages), at most max_bytes, into a malloc'd buffer (one
 * spare byte); NULL after a stderr line. For standard input and files that tell no size
 * (/proc's: 0 bytes), so the buffer grows. */
static char *read_stream(FILE *file, const char *name, const char *program,
                         const char *expected, size_t max_bytes, size_t *size) {
    size_t cap = 0, got = 0;
    char *text = NULL;
    for (;;) {
        if (got == cap) {
            if (cap > max_bytes) {
                fprintf(stderr, "%s: %s: too large (got more than %zu bytes, expected %s of "
                        "at most %zu)\n", program, name, max_bytes, expected, max_bytes);
                free(text);
                return NULL;
            }
            size_t next = cap ? 2 * cap : 65536;
            if (next > max_bytes + 1) next = max_bytes + 1;
            char *grown = realloc(text, next + 1);
            if (!grown) {
                fprintf(stderr, "%s: %s: out of memory (%zu bytes)\n", program, name,
                        next + 1);
                free(text);
                return NULL;
            }
            text = grown;
            cap = next;
        }
        size_t n = fread(text + got, 1, cap - got, file);
        got += n;
        if (n > 0) continue;
        if (ferror(file)) {
            fprintf(stderr, "%s: %s: read error (got \"%s\", expected %s)\n", program, name,
                    strerror(errno), expected);
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
        return read_stream(stdin, "standard input", program, expected, max_bytes, size);
    }
    FILE *file = os_open_read(program, path, expected);
    if (!file) return NULL;
    char *text = NULL;
    size_t length = 0;
    if (os_file_size(file, program, path, &length) != 0) {
        /* it said why */
    } else if (length == 0) {   /* empty, or a size not told (/proc): read to its end */
        text = read_stream(file, path, program, expected, max_bytes, size);
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

int os_usable_cpus(void) {
#if defined(__linux__) && !defined(__wasi__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
#ifdef _SC_NPROCESSORS_ONLN
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online > 0) return online > INT_MAX ? INT_MAX : (int)online;
#endif
    return 1;
}

int os_quota_cpus(void) {
    size_t cpus = (size_t)os_usable_cpus();
#if defined(__linux__) && !defined(__wasi__)
    char *text = cgroup_text();
    if (text) cpus = os_cgroup_cpu_limit(text, "/sys/fs/cgroup", cpus);
    free(text);
#endif
    return (int)cpus;   /* at most os_usable_cpus' int */
}

#ifdef OS_HUGE_FILES
#define OS_READ_PARTS 4              /* read_whole's threads at most */
#define OS_READ_PART_MIN (32u << 20) /* and bytes each at least */

/* Bytes off .. off+n-1 of fd into buf + off by pread; err: 0, or the errno that stopped
 * it (EIO for a file that ends first). */
typedef struct {
    int fd;
    unsigned char *buf;
    size_t off, n;
    int err;
} ReadPart;

static void *read_part(void *arg) {
    ReadPart *p = arg;
    size_t done = 0;
    while (done < p->n) {
        ssize_t got = pread(p->fd, p->buf + p->off + done, p->n - done, (off_t)(p->off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            p->err = got == 0 ? EIO : errno;
            return NULL;
        }
        done += (size_t)got;
    }
    return NULL;
}

/* pread until n bytes of fd from offset 0 are in buf; 0, or -1 with errno set (EIO for a
 * file shorter than n). A large file goes in parts of whole 2 MiB pages side by side, one
 * thread each, on as many of the CPUs this process may use as there are OS_READ_PART_MIN
 * bytes (at most OS_READ_PARTS), the caller's thread reading the first: a fresh page's
 * first write waits for the system to clear it (on a VM whose host takes back the
 * guest's free memory, for the host to back it again too), and the parts' waits overlap
 * (s110m's 438 MB on a Xeon VM: 3.5-4.6 s on one thread, 1.3-1.7 s on two). A thread
 * that cannot start leaves its part to the caller. */
static int read_whole(int fd, unsigned char *buf, size_t n) {
    const size_t huge = (size_t)2 << 20;
    int parts = os_quota_cpus();
    if ((size_t)parts > n / OS_READ_PART_MIN) parts = (int)(n / OS_READ_PART_MIN);
    if (parts > OS_READ_PARTS) parts = OS_READ_PARTS;
    if (parts < 1) parts = 1;
    size_t per = (n / (size_t)parts + huge - 1) / huge * huge;
    ReadPart part[OS_READ_PARTS];
#ifndef __wasi__
    pthread_t thread[OS_READ_PARTS];
    int started[OS_READ_PARTS] = {0};
#endif
    for (int i = 0; i < parts; i++) {
        size_t off = (size_t)i * per < n ? (size_t)i * per : n;
        part[i] = (ReadPart){fd, buf, off, n - off < per ? n - off : per, 0};
#ifndef __wasi__
        if (i > 0) started[i] = pthread_create(&thread[i], NULL, read_part, &part[i]) == 0;
#endif
    }
    read_part(&part[0]);
    for (int i = 1; i < parts; i++) {
#ifndef __wasi__
        if (started[i]) {
            pthread_join(thread[i], NULL);
            continue;
        }
#endif
        read_part(&part[i]);
    }
    for (int i = 0; i < parts; i++)
        if (part[i].err) {
            errno = part[i].err;
            return -1;
        }
    return 0;
}

/* os_map_file's copy: size bytes of fd on pages of their own starting on a 2 MiB
 * boundary, marked for huge pages, then made read-only, into *out. Returns 0; 1 where the
 * system refuses a step (the caller then maps the file); -1 on a read error (errno). */
static int read_huge(int fd, size_t size, void **out) {
    const size_t huge = (size_t)2 << 20;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || size > SIZE_MAX - 2 * huge) return 1;
    size_t span = size + huge, used = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    unsigned char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    if (p == MAP_FAILED) return 1;
    unsigned char *start = p + (huge - (uintptr_t)p % huge) % huge;
    if (start > p) munmap(p, (size_t)(start - p));   /* the pages before and after */
    if (p + span > start + used) munmap(start + used, (size_t)(p + span - (start + used)));
    int status = madvise(start, used, MADV_HUGEPAGE) != 0 ? 1
                 : read_whole(fd, start, size) != 0      ? -1
                 : mprotect(start, used, PROT_READ) != 0 ? 1 : 0;
    if (status != 0) {
        int saved = errno;
        munmap(start, used);
        errno = saved;
        return status;
    }
    *out = start;
    return 0;
}
#endif

void *os_map_file(int fd, size_t size, int whole, int *own) {
    if (own) *own = 0;
#ifndef OS_HUGE_FILES
    (void)whole;   /* every file is mapped */
#else
    if (whole && size >= OS_HUGE_MIN && size <= os_memory_limit(0) / 4) {
        void *copy = NULL;
        int status = read_huge(fd, size, &copy);
        if (status == 0 && own) *own = 1;
        if (status <= 0) return copy;   /* the copy, or NULL after a read error */
    }
#endif
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    return map == MAP_FAILED ? NULL : map;
}

void os_unmap_file(void *p, size_t size) {
    if (p) munmap(p, size);
}

void os_drop_mapped(const void *p, size_t size) {
#if defined(__wasi__)
    (void)p, (void)size;
#else
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || size < (size_t)page) return;
    uintptr_t from = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t to = ((uintptr_t)p + size) / (uintptr_t)page * (uintptr_t)page;
    if (from < to) madvise((void *)from, to - from, MADV_DONTNEED);
#endif
}

int os_map_writable(void *p, size_t size, int writable) {
#if defined(__wasi__)
    (void)p, (void)size, (void)writable;
    return -1;   /* no protections to change */
#else
    return mprotect(p, size, writable ? PROT_READ | PROT_WRITE : PROT_READ) == 0 ? 0 : -1;
#endif
}

/* ---- writing ---- */
#ifndef __wasi__

static void on_cleanup_signal(int sig);
static char bus_message[256];
static size_t bus_length;

void os_program_start(const char *program) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    int n = snprintf(bus_message, sizeof bus_message, "%s: a file in use was cut short (got "
                     "SIGBUS reading a mapped model, expected its file unchanged until the "
                     "program ends)\n", program);
    bus_length = n > 0 && (size_t)n < sizeof bus_message ? (size_t)n : 0;
    struct sigaction bus = {.sa_handler = on_cleanup_signal};
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int held = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
            if (held != fd && held >= 0) close(held);   /* a lower one was closed too: taken */
        }
}

/* ---- what a signal must not leave behind ----
 * The files this process created and has not yet renamed or removed (os_save_open's
 * temporaries, os_lock's locks) are listed here; a signal whose default ends the process
 * (SIGKILL and SIGSTOP aside, which no handler sees, the timers' signals, and those the
 * process ignores or handles itself) removes them, then ends the process as the signal
 * would have. The list changes only with those signals blocked, so the handler never sees
 * half a path. */
#define CLEANUP_SLOTS 8
static char cleanup_paths[CLEANUP_SLOTS][OS_PATH_CAP];
static volatile sig_atomic_t cleanup_used[CLEANUP_SLOTS];
static const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1,
                                      SIGUSR2, SIGXCPU, SIGXFSZ};   /* not the timers'
                                      * (SIGALRM, SIGPROF: a fuzzer's or profiler's) */
#define N_CLEANUP_SIGNALS ((int)(sizeof CLEANUP_SIGNALS / sizeof CLEANUP_SIGNALS[0]))

static void on_cleanup_signal(int sig) {
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (cleanup_used[i]) unlink(cleanup_paths[i]);   /* async-signal-safe */
    if (sig == SIGBUS) {   /* os_program_start's: one line, exit 1 */
        if (write(STDERR_FILENO, bus_message, bus_length) < 0) { /* nothing more to say */ }
        _exit(1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void block_signals(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < N_CLEANUP_SIGNALS; i++) sigaddset(&set, CLEANUP_SIGNALS[i]);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static void unblock_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* Add path to the list (signals blocked by the caller); the handlers are installed with
 * the first entry, for the signals left at their default only: not one the process
 * ignores (nohup) or handles itself (libFuzzer's timer on SIGALRM). A full list leaves
 * path out: it is then removed by the program's own exit paths only. */
static void cleanup_add(const char *path) {
    static int installed;
    if (!installed) {
        installed = 1;
        for (int i = 0; i < N_CLEANUP_SIGNALS; i++) {
            struct sigaction old, action = {.sa_handler = on_cleanup_signal};
            sigemptyset(&action.sa_mask);
            if (sigaction(CLEANUP_SIGNALS[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
                sigaction(CLEANUP_SIGNALS[i], &action, NULL);
        }
    }
    if (strlen(path) >= OS_PATH_CAP) return;
    for (int i = 0; i < CLEANUP_SLOTS; i++) {
        if (cleanup_used[i]) continue;
        strcpy(cleanup_paths[i], path);
        cleanup_used[i] = 1;
        return;
    }
}

/* Take path off the list (signals blocked by the caller). */
static void cleanup_remove(const char *path) {
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (cleanup_used[i] && strcmp(cleanup_paths[i], path) == 0) {
            cleanup_used[i] = 0;
            return;
        }
}


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

/* Take s->temp off the signal list and forget it (the file is renamed or removed). */
static void forget_temp(SaveFile *s) {
    sigset_t held;
    block_signals(&held);
    cleanup_remove(s->temp);
    unblock_signals(&held);
    s->temp[0] = '\0';
}

int os_check_name(const char *program, const char *path, const char *suffix) {
    const char *slash = strrchr(path, '/');
    size_t name = strlen(slash ? slash + 1 : path), added = strlen(suffix);
    if (name + added <= NAME_MAX) return 0;
    fprintf(stderr, "%s: %s: file name too long (got %zu bytes, expected at most %zu: NAME%s, "
            "written beside it, must fit a folder's limit of %d)\n", program, path, name,
            NAME_MAX - added, suffix, NAME_MAX);
    return -1;
}

int os_save_open(SaveFile *s, const char *program, const char *path) {
    s->file = NULL;
    s->temp[0] = '\0';
    if (with_suffix(s->path, sizeof s->path, program, path, "") != 0 ||
        with_suffix(s->temp, sizeof s->temp, program, path, OS_TEMP_SUFFIX "-XXXXXX")) {
        s->temp[0] = '\0';
        return -1;
    }
    int fd = -1;
    s->unnamed = 0;
#ifdef O_TMPFILE
    char folder[OS_PATH_CAP];
    if (folder_of(folder, path) == 0 && access("/proc/self/fd", X_OK) == 0)
        fd = open(folder, O_TMPFILE | O_WRONLY, 0600);   /* named by link_temp */
    if (fd >= 0) {
        s->unnamed = 1;
        s->temp[0] = '\0';
    }
#endif
    if (fd < 0) {
        sigset_t held;
        block_signals(&held);
        fd = mkstemp(s->temp);
        if (fd >= 0) cleanup_add(s->temp);
        unblock_signals(&held);
    }
    if (fd < 0) {
        fprintf(stderr, "%s: %s: cannot create a file beside it (got \"%s\", expected a "
                "writable folder)\n", program, path, strerror(errno));
        s->temp[0] = '\0';
        return -1;
    }
    /* mkstemp makes 0600: a file replaced keeps its mode, and its owner and group where
     * this process may give them (root; a group of its own), as writing over it in place
     * would; a new one gets what open(2) would give it */
    struct stat old;
    int replacing = stat(path, &old) == 0 && S_ISREG(old.st_mode);
    mode_t mask = umask(0);
    umask(mask);
    if (replacing && (old.st_uid != geteuid() || old.st_gid != getegid()) &&
        fchown(fd, old.st_uid, old.st_gid) != 0 && fchown(fd, (uid_t)-1, old.st_gid) != 0) {
        /* the new file stays this user's: the nearest the system allows */
    }
    mode_t mode = replacing ? old.st_mode & 07777 : 0666 & ~mask;
    if (fchmod(fd, mode) != 0 || !(s->file = fdopen(fd, "wb"))) {
        fprintf(stderr, "%s: %s: cannot open (got \"%s\", expected a writable file)\n",
                program, s->unnamed ? path : s->temp, strerror(errno));
        close(fd);
        if (s->temp[0]) remove(s->temp);
        forget_temp(s);
        return -1;
    }
    return 0;
}

int os_close_synced(FILE *file, const char *program, const char *path) {
    /* ferror first: stdio drops the bytes of a write that failed (a full disk, past ulimit
     * -f), and a later fflush succeeds, so a caller that did not check each fwrite would
     * otherwise keep a file cut short (its errno is gone by now: OS_LOST_WRITE says so) */
    int lost = ferror(file), ok = !lost && fflush(file) == 0 && fsync(fileno(file)) == 0;
    int error = lost ? EIO : errno;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        error = errno;
    }
    if (!ok) {
        fprintf(stderr, "%s: %s: write failed (got \"%s\", expected the whole file on the "
                "disk)\n", program, path, lost ? OS_LOST_WRITE : strerror(error));
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

#ifdef O_TMPFILE
/* Flush and fsync s's temporary of no name, give it a name no file had (PATH.tmp- and six
 * hexadecimal digits: linkat through /proc, which fails on any file already there) and
 * close it. Returns 0, or -1 after one stderr line with nothing left (s->temp ""). */
static int link_temp(FILE *file, const char *program, SaveFile *s) {
    static unsigned counter;
    int lost = ferror(file);   /* a write that failed earlier: os_close_synced */
    int ok = !lost && fflush(file) == 0 && fsync(fileno(file)) == 0;
    int error = lost ? EIO : errno, linked = 0;
    char from[64];
    snprintf(from, sizeof from, "/proc/self/fd/%d", fileno(file));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)now.tv_nsec;
    for (int tries = 0; ok && !linked && tries < 100; tries++) {
        unsigned tag = (seed + ++counter * 40503u) & 0xffffffu;
        if (snprintf(s->temp, sizeof s->temp, "%s%s-%06x", s->path, OS_TEMP_SUFFIX, tag) >=
            (int)sizeof s->temp)
            break;   /* os_save_open checked this length: not reached */
        sigset_t held;
        block_signals(&held);
        linked = linkat(AT_FDCWD, from, AT_FDCWD, s->temp, AT_SYMLINK_FOLLOW) == 0;
        if (linked) cleanup_add(s->temp);
        else error = errno;
        unblock_signals(&held);
        if (!linked && error != EEXIST) break;
    }
    if (!linked) s->temp[0] = '\0';
    ok = ok && linked;
    if (fclose(file) != 0 && ok) {
        ok = 0;
        error = errno;
    }
    if (!ok) {
        fprintf(stderr, "%s: %s: write failed (got \"%s\", expected the whole file on the "
                "disk)\n", program, s->path, lost ? OS_LOST_WRITE : strerror(error));
        if (s->temp[0]) remove(s->temp);
        return -1;
    }
    return 0;
}
#endif

int os_save_commit(SaveFile *s, const char *program) {
    FILE *file = s->file;
    s->file = NULL;
    int rc;
#ifdef O_TMPFILE
    if (s->unnamed) rc = link_temp(file, program, s);
    else
#endif
    rc = os_close_synced(file, program, s->temp);   /* removes the temporary on failure */
    if (rc == 0 && rename(s->temp, s->path) != 0) {
        fprintf(stderr, "%s: %s: cannot rename %s over it (got \"%s\", expected a writable "
                "path)\n", program, s->path, s->temp, strerror(errno));
        remove(s->temp);
        rc = -1;
    }
    forget_temp(s);
    return rc == 0 ? sync_folder(program, s->path) : -1;
}

void os_save_discard(SaveFile *s) {
    if (s->file) fclose(s->file);
    s->file = NULL;
    if (s->temp[0]) remove(s->temp);
    forget_temp(s);
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

int os_stdin_is_stdout(void) {
    struct stat in, out;
    return fstat(STDIN_FILENO, &in) == 0 && fstat(STDOUT_FILENO, &out) == 0 &&
           S_ISREG(in.st_mode) && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
}

const char *os_stdin_problem(void) {
    struct stat st;
    int flags = fcntl(STDIN_FILENO, F_GETFL);   /* closed: os_program_start's write-only one */
    if (fstat(STDIN_FILENO, &st) != 0 || flags == -1 || (flags & O_ACCMODE) == O_WRONLY)
        return "closed, or not open for reading";
    return S_ISDIR(st.st_mode) ? "a folder" : NULL;
}

int os_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* path's folder (".": none named) into dir, its last name at *name. 0, or -1 if too long. */
static int split_path(const char *path, char *dir, size_t cap, const char **name) {
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    int n = slash ? snprintf(dir, cap, "%.*s", (int)(slash - path) + 1, path)
                  : snprintf(dir, cap, ".");
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int os_same_path(const char *a, const char *b) {
    if (os_same_file(a, b)) return 1;
    char dir_a[OS_PATH_CAP], dir_b[OS_PATH_CAP];
    const char *name_a, *name_b;
    return split_path(a, dir_a, sizeof dir_a, &name_a) == 0 &&
           split_path(b, dir_b, sizeof dir_b, &name_b) == 0 && *name_a &&
           strcmp(name_a, name_b) == 0 && os_same_file(dir_a, dir_b);
}

void os_remove_on_signal(const char *path, int on) {
    sigset_t blocked;
    block_signals(&blocked);
    if (on) cleanup_add(path);
    else cleanup_remove(path);
    unblock_signals(&blocked);
}

int os_check_output(const char *program, const char *path, const char *what,
                          const char *const inputs[], int n_inputs) {
    struct stat st;
    if (path[0] == '\0') {
        fprintf(stderr, "%s: empty path for %s (got \"\", expected a file name)\n", program,
                what);
        return -1;
    }
    for (int i = 0; i < n_inputs; i++) {
        struct stat in;
        if (inputs[i] && strcmp(inputs[i], "-") == 0 ? stat(path, &st) == 0 &&
            fstat(STDIN_FILENO, &in) == 0 && S_ISREG(in.st_mode) && in.st_dev == st.st_dev &&
            in.st_ino == st.st_ino : os_same_file(path, inputs[i])) {
            int in_stdin = strcmp(inputs[i], "-") == 0;
            fprintf(stderr, "%s: %s: is %s%s (got the same file, expected another path for "
                    "%s)\n", program, path, in_stdin ? "the file standard input reads" :
                    "the input ", in_stdin ? "" : inputs[i], what);
            return -1;
        }
    }
    /* where standard output or error goes: the finished file renamed over it would replace
     * the text written there */
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
        struct stat out;
        if (stat(path, &st) != 0 || fstat(fd, &out) != 0 || !S_ISREG(out.st_mode) ||
            out.st_dev != st.st_dev || out.st_ino != st.st_ino)
            continue;
        fprintf(stderr, "%s: %s: is the file standard %s goes to (got the same file, expected "
                "another path for %s)\n", program, path, fd == STDOUT_FILENO ? "output"
                : "error", what);
        return -1;
    }
    /* a link: renaming the finished file over path would replace the link, not its target */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        fprintf(stderr, "%s: %s: a symbolic link (got a link, expected a regular file or a new "
                "path for %s: name the file it points to)\n", program, path, what);
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
    if (stat(path, &st) == 0 && access(path, W_OK) != 0) {   /* as writing over it would */
        fprintf(stderr, "%s: %s: cannot replace (got \"%s\", expected a file this user may "
                "write, for %s)\n", program, path, strerror(errno), what);
        return -1;
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

/* The first bytes of every lock file: what os_lock writes, and what it must find in a file
 * already at PATH.lock before it takes that file over (a lock an interrupted run left). */
static const char LOCK_SIGNATURE[] = "attn: lock of a file being written\n";

/* 1 if the open file fd holds exactly LOCK_SIGNATURE (and nothing else). */
static int is_our_lock(int fd) {
    char bytes[sizeof LOCK_SIGNATURE];
    ssize_t n = pread(fd, bytes, sizeof bytes, 0);
    return n == (ssize_t)sizeof LOCK_SIGNATURE - 1 &&
           memcmp(bytes, LOCK_SIGNATURE, sizeof LOCK_SIGNATURE - 1) == 0;
}

/* A new lock file at l->path, already holding the signature and the lock when it appears
 * there: written and locked first, then hard-linked to l->path, which fails if anything
 * is there (a file, a link, even a dangling one). The file is an unnamed one in l->path's
 * folder where the system makes them (Linux's O_TMPFILE, linked through /proc), so a
 * process killed before the link leaves nothing; else one of a name no file had
 * (mkstemp: PATH.lock-XXXXXX), removed after the link (SIGKILL in between leaves it).
 * Returns the locked descriptor, -2 if something is at l->path, or -1 after a stderr
 * line. */
static int create_lock(const char *program, const char *path, SaveLock *l) {
    char temp[OS_PATH_CAP] = "", from[OS_PATH_CAP] = "";
    int fd = -1;
    sigset_t held;
#ifdef O_TMPFILE
    char folder[OS_PATH_CAP];
    if (folder_of(folder, l->path) == 0 && access("/proc/self/fd", X_OK) == 0)
        fd = open(folder, O_TMPFILE | O_RDWR, 0666);
    if (fd >= 0) snprintf(from, sizeof from, "/proc/self/fd/%d", fd);
#endif
    if (fd < 0) {
        if (with_suffix(temp, sizeof temp, program, l->path, "-XXXXXX") != 0) return -1;
        block_signals(&held);
        fd = mkstemp(temp);
        if (fd >= 0) cleanup_add(temp);
        unblock_signals(&held);
        if (fd < 0) {
            fprintf(stderr, "%s: %s: cannot create its lock beside it (got \"%s\", expected a "
                    "writable folder)\n", program, path, strerror(errno));
            return -1;
        }
        strcpy(from, temp);
    }
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    size_t n = sizeof LOCK_SIGNATURE - 1;
    int rc = write(fd, LOCK_SIGNATURE, n) == (ssize_t)n && fcntl(fd, F_SETLK, &lock) == 0
           ? 0 : -1;
    int error = errno;
    if (rc == 0) {
        block_signals(&held);
        if ((temp[0] ? link(from, l->path)
                     : linkat(AT_FDCWD, from, AT_FDCWD, l->path, AT_SYMLINK_FOLLOW)) == 0) {
            cleanup_add(l->path);
        } else {
            error = errno;
            rc = error == EEXIST ? -2 : -1;
        }
        unblock_signals(&held);
    }
    if (temp[0]) {
        unlink(temp);
        block_signals(&held);
        cleanup_remove(temp);
        unblock_signals(&held);
    }
    if (rc == 0) return fd;
    close(fd);
    if (rc == -1)
        fprintf(stderr, "%s: %s: cannot create its lock %s (got \"%s\", expected a writable "
                "folder that takes hard links)\n", program, path, l->path, strerror(error));
    return rc;
}

/* The file already at l->path, locked, if it is a lock of ours that no process holds (an
 * interrupted run's). Returns its descriptor, -2 if it went away meanwhile, or -1 after a
 * stderr line: another process holds it, or it is not ours (a link, a folder, a user's
 * file, an input of this command: never removed, never written). */
static int take_over_lock(const char *program, const char *path, SaveLock *l) {
    int fd = open(l->path, O_RDWR | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 && errno == ENOENT) return -2;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int error = errno;
        const char *kind = fd >= 0 ? "something that is not a regular file"
                         : error == ELOOP ? "a symbolic link"
                         : error == EISDIR ? "a folder" : NULL;
        fprintf(stderr, "%s: %s: %s is in the way (got %s%s%s, expected no file there, or a "
                "lock an interrupted run left: move it away)\n", program, path, l->path,
                kind ? "" : "\"", kind ? kind : strerror(error), kind ? "" : "\"");
        if (fd >= 0) close(fd);
        return -1;
    }
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &lock) != 0) {
        int error = errno;
        struct flock holder = lock;
        long pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK
                 ? (long)holder.l_pid : 0;
        close(fd);
        if (error == EACCES || error == EAGAIN)
            fprintf(stderr, "%s: %s: another process (pid %ld) is writing it (got a lock held "
                    "on %s, expected no other writer: wait for it, or choose another path)\n",
                    program, path, pid, l->path);
        else
            fprintf(stderr, "%s: %s: cannot lock %s (got \"%s\", expected a file system with "
                    "POSIX locks)\n", program, path, l->path, strerror(error));
        return -1;
    }
    if (!is_our_lock(fd)) {
        fprintf(stderr, "%s: %s: %s is in the way (got a file of %lld bytes that is not a lock "
                "of ours, expected no file there: move it away, or choose another output)\n",
                program, path, l->path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    /* the holder before us may have removed the file after we opened it: the lock counts
     * only if it is on the file that is at the path now */
    struct stat now;
    if (stat(l->path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        close(fd);
        return -2;
    }
    sigset_t held;
    block_signals(&held);
    cleanup_add(l->path);
    unblock_signals(&held);
    return fd;
}

int os_lock(SaveLock *l, const char *program, const char *path) {
    l->fd = -1;
    if (with_suffix(l->path, sizeof l->path, program, path, OS_LOCK_SUFFIX) != 0)
        return -1;
    /* the longest name written beside path is the lock's temporary (a save's is shorter) */
    if (os_check_name(program, path, OS_LOCK_SUFFIX "-XXXXXX") != 0) return -1;
    for (int attempt = 0; attempt < LOCK_TRIES; attempt++) {
        int fd = create_lock(program, path, l);
        if (fd == -2) fd = take_over_lock(program, path, l);
        if (fd == -1) return -1;
        if (fd >= 0) {
            l->fd = fd;
            return 0;
        }
    }
    fprintf(stderr, "%s: %s: cannot lock %s (got a lock file replaced %d times, expected it to "
            "stay)\n", program, path, l->path, LOCK_TRIES);
    return -1;
}

void os_unlock(SaveLock *l) {
    if (l->fd < 0) return;
    /* while still locked, and only the file we locked: a waiter then finds no file, or a
     * new one */
    struct stat held, now;
    if (fstat(l->fd, &held) == 0 && lstat(l->path, &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino)
        unlink(l->path);
    sigset_t blocked;
    block_signals(&blocked);
    cleanup_remove(l->path);
    unblock_signals(&blocked);
    close(l->fd);
    l->fd = -1;
}
#else
void os_program_start(const char *program) { (void)program; }   /* WASI: no signals */
#endif /* __wasi__ */
