/* os.h: the little the programs ask of the operating system (POSIX), in one place: a
 * monotonic clock, the machine's memory, whole files read with a size limit, weights files
 * read onto huge pages, and files written without ever losing one.
 *
 * Writing: a file is written whole to a temporary beside its destination, flushed to the
 * disk (fsync), and renamed over the destination, then the folder is synced: a reader
 * sees the old file or the new one, never a part, and a failure removes the temporary
 * and leaves every existing file as it was. The temporary of os_save_open has no name
 * until it is whole (Linux's O_TMPFILE), or a name no file had (mkstemp: PATH.tmp-XXXXXX),
 * so it is never an input of the same command. A
 * writer that must find its temporary again after a crash (the trainer) uses a fixed
 * name instead (os_create_new), under a lock, after checking that name against its
 * inputs. Before writing, a program checks each destination (os_check_output: a regular
 * file or a new path, not a link, and none of its inputs) and holds a lock on it for the
 * whole run (os_lock), so a second program aimed at the same file is refused instead of
 * mixing its bytes in. A program removes only files it created: a lock's path holding anything
 * but a lock of ours (an input, a user's file, a link) is refused, never removed; and
 * a signal that ends the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 ...; not
 * SIGKILL) removes the temporaries and locks of os_save_open and os_lock before it ends
 * (the trainer's fixed-name temporaries stay: its next run finishes or replaces them).
 */
#ifndef OS_H
#define OS_H

#include <stddef.h>  /* size_t */
#include <stdio.h>   /* FILE */

#define OS_PATH_CAP 4096         /* longest path, NUL included */
#define OS_TEMP_SUFFIX ".tmp"    /* os_save_open: PATH.tmp-XXXXXX */
#define OS_LOCK_SUFFIX ".lock"   /* os_lock: PATH.lock */

/* ---- the clock and the machine ---- */

/* What every program does first: SIGPIPE and SIGXFSZ ignored (a closed pipe, a file past
 * ulimit -f: write errors the program reports, not deaths); SIGBUS (a mapped file
 * truncated while in use: a model copied over in place) reported in one stderr line
 * "PROGRAM: ..." and exit 1, after the removals a signal makes (os_save_open, os_lock);
 * and descriptors 0, 1 and 2 held: one that is closed gets /dev/null opened the other way
 * round (standard input for writing, the outputs for reading), so that its reads or
 * writes still fail (EBADF) as on a closed one, and no file the program opens takes its
 * number (a map opened as fd 1 would get the text too). */
void os_program_start(const char *program);

/* The CPUs this process may run on: its affinity mask (taskset, a container's cpuset)
 * where the system says, else the CPUs online, else 1. */
int os_usable_cpus(void);

/* The CPUs' worth of time this process may use, the threads worth starting when nobody
 * says how many: os_usable_cpus, at most what its Linux cgroups' CPU quotas give under
 * /sys/fs/cgroup (os_cgroup_cpu_limit; docker --cpus 1.5 gives 2). A version 1 tree found
 * elsewhere than /sys/fs/cgroup/cpu, or a version 2 tree elsewhere than /sys/fs/cgroup
 * (hybrid systems mount it at unified/), sets no limit, as for os_memory_limit. */
int os_quota_cpus(void);

/* 1 if standard input and standard output are one regular file (run -I < f >> f would
 * read its own text back, without end). */
int os_stdin_is_stdout(void);

/* Why standard input cannot give lines of text (closed, a folder), or NULL if it may
 * (a terminal, a pipe, a file: what it holds shows when it is read). */
const char *os_stdin_problem(void);

/* Seconds on a monotonic clock (for speeds and durations: differences only). */
double os_seconds(void);

/* The memory this process may use, in bytes: the least of the machine's physical memory,
 * the limits of its Linux cgroup and of the cgroup's parents (version 2 memory.max,
 * version 1 memory.limit_in_bytes) and RLIMIT_AS (ulimit -v); fallback where none of
 * them says. */
size_t os_memory_limit(size_t fallback);

/* os_memory_limit's cgroup part, its inputs given (so that tests can build a tree in a
 * temporary folder): the least of bytes and the limits of the cgroups that cgroup_text
 * (the text of /proc/self/cgroup: lines "ID:CONTROLLERS:PATH") names and of their parents,
 * in files under root ("/sys/fs/cgroup"): version 2 ("0::PATH") root/PATH/memory.max,
 * version 1 (a line whose controllers include memory) root/memory/PATH/
 * memory.limit_in_bytes. A missing file, or one that starts with no number ("max",
 * empty), sets no limit; nor does a line whose PATH has a ".." (a cgroup outside the tree
 * a cgroup namespace shows). */
size_t os_cgroup_memory_limit(const char *cgroup_text, const char *root, size_t bytes);

/* os_cgroup_memory_limit's walk for the CPU quota: the least of cpus and the quotas of the
 * cgroups that cgroup_text names and of their parents, each as CPUs rounded up (quota /
 * period microseconds: 150000 / 100000 is 2): version 2 root/PATH/cpu.max ("QUOTA PERIOD";
 * "max PERIOD": none), version 1 (a line whose controllers include cpu)
 * root/cpu/PATH/cpu.cfs_quota_us (-1: none) with cpu.cfs_period_us beside it. Files that
 * do not say, and paths with "..", set no limit. */
size_t os_cgroup_cpu_limit(const char *cgroup_text, const char *root, size_t cpus);

/* calloc and free for large working buffers (activations, the KV cache): n zeros of size
 * bytes each, 64-byte aligned, or NULL if out of memory. Where the system can (Linux), the
 * block is mapped on its own and, from 4 MiB on, marked for huge pages: its pages come as
 * they are first written, 2 MiB at a time rather than 4 KiB (a page fault costs
 * microseconds, and thousands on a VM). With OS_PLAIN_ALLOC (defined here under
 * AddressSanitizer, or given, as the valgrind build does) it is calloc itself (aligned as
 * calloc aligns), so that those tools see each block's edges. */
#if defined(__SANITIZE_ADDRESS__)   /* gcc's AddressSanitizer */
#define OS_PLAIN_ALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)   /* clang's */
#define OS_PLAIN_ALLOC 1
#endif
#endif
void *os_alloc_zeroed(size_t n, size_t size);
void os_free_zeroed(void *p);

/* The pages of the first bytes of p committed now rather than as each is first written
 * (as for os_alloc_zeroed's blocks), by a zero written into each: for memory whose
 * contents do not matter yet (a block of zeros stays zeros). */
void os_commit(void *p, size_t bytes);

/* os_commit for memory whose contents matter: each page's byte is read and written back as
 * it was, so every value stays (a fresh page takes two faults, a read's then a write's). */
void os_commit_keep(void *p, size_t bytes);

/* Buffers of zeros that live and die together (a model's activations): *at is set to
 * bytes of zeros, 64-byte aligned, for each part, all carved from one os_alloc_zeroed
 * block (small buffers share its huge pages), or each its own calloc where
 * os_alloc_zeroed is calloc. Returns 0, or -1 if out of memory (every *at then NULL).
 * os_free_parts takes the same parts. */
typedef struct {
    void **at;
    size_t bytes;
} OsPart;
int os_alloc_parts(const OsPart *parts, int n);
void os_free_parts(const OsPart *parts, int n);

/* ---- reading ---- */

/* 1 if something that is not a regular file (a folder, a FIFO, a device) is at path; then
 * *kind names it ("folder", "FIFO", "special file"). Never opens path, so never blocks. */
int os_not_regular(const char *path, const char **kind);

/* fopen(path, "rb") of a regular file (a FIFO would block, a folder has no size). On
 * failure returns NULL after a stderr line "PROGRAM: PATH: ... (got ..., expected
 * EXPECTED)" ("PROGRAM: empty path (got "", expected EXPECTED)" for ""), or silently if
 * expected is NULL. */
FILE *os_open_read(const char *program, const char *path, const char *expected);

/* Read exactly n bytes of `what` from file, or print what was missing and return -1. */
int os_read_exact(FILE *file, void *data, size_t n, const char *program, const char *path,
                  const char *what);

/* Size in bytes of an open file into *size, leaving the position at the start.
 * Returns 0, or -1 after a stderr line. */
int os_file_size(FILE *file, const char *program, const char *path, size_t *size);

/* The whole of a regular file, or of standard input for path "-", as a malloc'd buffer
 * with one spare byte (callers may NUL-terminate); *size its bytes. expected describes it
 * in messages ("a prompt file"). Refuses a folder, a FIFO or a device (before opening:
 * a FIFO would block), and more than max_bytes. Returns NULL after one stderr line. */
char *os_read_file(const char *program, const char *path, const char *expected,
                   size_t max_bytes, size_t *size);

/* The first size bytes (size > 0) of the open regular file fd, for reading (a weights
 * file), or NULL with errno set. Where the system has huge pages (Linux) and whole is 1 (the
 * caller reads it all, again and again), a file of 4 MiB or more that takes at most a
 * quarter of os_memory_limit is read into anonymous memory marked for them: weights read
 * at every token then lie on 2 MiB pages, whose addresses the TLB holds and across which
 * the hardware prefetchers run, where the file's own pages are 4 KiB. Any other file, and
 * every file with whole 0 (only a part of it read: a GGUF file's tokenizer), is mapped
 * (mmap), its pages read as they are touched, the kernel's to drop and read again. Either
 * way writing to it is a fault. *own (own may be NULL) becomes 1 for the anonymous copy, 0
 * for the file's pages. os_unmap_file(p, size) frees it. */
void *os_map_file(int fd, size_t size, int whole, int *own);
void os_unmap_file(void *p, size_t size);

/* Gives back the whole pages inside the size bytes at p, a part of a map of a file's own
 * pages (os_map_file with *own 0) that the caller has read and does not mean to read
 * again: they leave the process's memory, and come back from the file if read. Nothing
 * where the system has no such call. */
void os_drop_mapped(const void *p, size_t size);

/* Makes the size bytes at p (from os_map_file) writable (writable 1) or read-only again
 * (0): a mapped file's pages that are then written become the process's own copies, the
 * file unchanged. Returns 0, or -1 where the system refuses. */
int os_map_writable(void *p, size_t size, int writable);

/* ---- writing ---- */

/* A file being written: a new temporary, renamed over `path` by os_save_commit. */
typedef struct {
    FILE *file;                  /* open for writing; NULL once closed */
    char path[OS_PATH_CAP];      /* the destination */
    char temp[OS_PATH_CAP];      /* the temporary's name; "" while it has none */
    int unnamed;                 /* 1: the temporary is a file of no name (O_TMPFILE) */
} SaveFile;

/* Create a temporary in path's folder (the mode of the file at path, and its owner and
 * group where this process may set them; for a new path, 0666 less the umask), and open it
 * for writing into s->file. Where the system makes files of no name (Linux's O_TMPFILE)
 * it has none until os_save_commit names it PATH.tmp-XXXXXX, just before the rename, so
 * a process killed while writing (even by SIGKILL) leaves nothing; else it is created as
 * PATH.tmp-XXXXXX, a name no file had. Returns 0, or -1 after one stderr line
 * "PROGRAM: PATH: ..." (then s holds nothing to discard). */
int os_save_open(SaveFile *s, const char *program, const char *path);

/* Flush and fsync the temporary, close it, rename it over s->path and sync the folder.
 * Returns 0, or -1 after one stderr line, with the temporary removed and s->path as it
 * was; a write to s->file that failed before (ferror) fails it too. Either way s holds
 * nothing afterwards. */
int os_save_commit(SaveFile *s, const char *program);

/* Close and remove the temporary, if any (a failed write). Safe to call twice. */
void os_save_discard(SaveFile *s);

/* A new file at the fixed name path, open for writing: whatever was at path is removed
 * first and the file is created with O_EXCL, so the bytes of no other file (a link's
 * target, another name of an input) are ever overwritten. Returns NULL after one stderr
 * line. For temporaries a program finds again by name; the caller has checked path
 * against its inputs (os_check_output) and holds the lock of its destination. */
FILE *os_create_new(const char *program, const char *path);

/* fflush, fsync and fclose a file of os_create_new; on failure (an earlier write's too:
 * ferror) remove path. Returns 0, or -1 after one stderr line. */
int os_close_synced(FILE *file, const char *program, const char *path);

/* rename(from, to), then fsync to's folder so the rename survives a power cut (a file
 * system that cannot sync folders counts as done). Returns 0, or -1 after one stderr
 * line (from is left in place). */
int os_rename_synced(const char *program, const char *from, const char *to);

/* Whether path may be written as `what` (for messages: "the checkpoint"): it must be a
 * new path in an existing, writable folder, or a regular file this user may write (not a
 * symbolic link: the rename of the finished file would replace the link itself), and no
 * file of inputs (n_inputs paths, NULL entries skipped, "-" the file standard input
 * reads; compared by device and inode, so links and other spellings count), nor the file
 * standard output or error goes to.
 * Returns 0, or -1 after one stderr line. */
int os_check_output(const char *program, const char *path, const char *what,
                          const char *const inputs[], int n_inputs);

/* 1 if a and b name the same existing file (through links or other spellings). */
int os_same_file(const char *a, const char *b);

/* 1 if a and b name the same file, existing or not: os_same_file, or the same last name in
 * the same existing folder (m.bin and ./m.bin before either exists). */
int os_same_path(const char *a, const char *b);

/* path (a fixed-name temporary the caller created) removed, as os_save_open's temporaries
 * are, if a signal ends the process while it is listed (on 1), or no longer (on 0). */
void os_remove_on_signal(const char *path, int on);

/* A lock that says "this process writes PATH": PATH.lock, a small file of a fixed text,
 * locked with fcntl. */
typedef struct {
    int fd;                      /* the lock file, or -1 */
    char path[OS_PATH_CAP];      /* PATH.lock */
} SaveLock;

/* Whether the name of path (its last component) leaves room for suffix, which the program
 * writes as NAME + suffix beside it (".tmp-XXXXXX"), within a folder's limit of NAME_MAX
 * bytes a name: so that too long a name is refused before any work, not at the first
 * write. Returns 0, or -1 after one stderr line. */
int os_check_name(const char *program, const char *path, const char *suffix);

/* Take the lock of path for the rest of the run, never waiting. PATH.lock is created
 * atomically with its text and its lock (never through a link), or taken over when it is
 * a lock an interrupted run left. Refused with one stderr line: another process holds it
 * (naming that process), or something else is at PATH.lock (a link, a folder, a file
 * that is not a lock of ours, such as an input of the same command). Returns 0 or -1. */
int os_lock(SaveLock *l, const char *program, const char *path);

/* Release the lock and remove its file (only the file it locked). Safe on a lock never
 * taken (fd -1) and twice. */
void os_unlock(SaveLock *l);

#endif /* OS_H */
