/* savefile.h: how every program here writes a file without ever losing one.
 *
 * A file is written whole to a temporary beside its destination, flushed to the disk
 * (fsync), and renamed over the destination, then the folder is synced: a reader sees
 * the old file or the new one, never a part, and a failure removes the temporary and
 * leaves every existing file as it was. The temporary of savefile_open has a name no
 * file had (mkstemp: PATH.tmp-XXXXXX), so it is never an input of the same command.
 * A writer that must find its temporary again after a crash (the trainer) uses a fixed
 * name instead (savefile_create), under a lock, after checking that name against its
 * inputs.
 *
 * Before writing, a program checks each destination (savefile_check_output: a regular
 * file or a new path, and none of its inputs) and holds a lock on it for the whole run
 * (savefile_lock), so a second program aimed at the same file is refused instead of
 * mixing its bytes in. All of it is POSIX (mkstemp, fsync, rename, fcntl locks).
 */
#ifndef SAVEFILE_H
#define SAVEFILE_H

#include <stdio.h>   /* FILE */

#define SAVEFILE_PATH_CAP 4096         /* longest path, NUL included */
#define SAVEFILE_TEMP_SUFFIX ".tmp"    /* savefile_open: PATH.tmp-XXXXXX */
#define SAVEFILE_LOCK_SUFFIX ".lock"   /* savefile_lock: PATH.lock */

/* A file being written: a new temporary, renamed over `path` by savefile_commit. */
typedef struct {
    FILE *file;                        /* open for writing; NULL once closed */
    char path[SAVEFILE_PATH_CAP];      /* the destination */
    char temp[SAVEFILE_PATH_CAP];      /* the temporary beside it; "" when there is none */
} SaveFile;

/* Create a temporary of a name no file had, PATH.tmp-XXXXXX in path's folder (mode
 * 0666 less the umask), and open it for writing into s->file. Returns 0, or -1 after one
 * stderr line "PROGRAM: PATH: ..." (then s holds nothing to discard). */
int savefile_open(SaveFile *s, const char *program, const char *path);

/* Flush and fsync the temporary, close it, rename it over s->path and sync the folder.
 * Returns 0, or -1 after one stderr line, with the temporary removed and s->path as it
 * was. Either way s holds nothing afterwards. */
int savefile_commit(SaveFile *s, const char *program);

/* Close and remove the temporary, if any (a failed write). Safe to call twice. */
void savefile_discard(SaveFile *s);

/* A new file at the fixed name path, open for writing: whatever was at path is removed
 * first and the file is created with O_EXCL, so the bytes of no other file (a link's
 * target, another name of an input) are ever overwritten. Returns NULL after one stderr
 * line. For temporaries a program finds again by name; the caller has checked path
 * against its inputs (savefile_check_output) and holds the lock of its destination. */
FILE *savefile_create(const char *program, const char *path);

/* fflush, fsync and fclose a file of savefile_create; on failure remove path. Returns 0,
 * or -1 after one stderr line. */
int savefile_close(FILE *file, const char *program, const char *path);

/* rename(from, to), then fsync to's folder so the rename survives a power cut (a file
 * system that cannot sync folders counts as done). Returns 0, or -1 after one stderr
 * line (from is left in place). */
int savefile_rename(const char *program, const char *from, const char *to);

/* Whether path may be written as `what` (for messages: "the checkpoint"): it must be a
 * new path in an existing, writable folder, or a regular file (links followed), and no
 * file of inputs (n_inputs paths, NULL entries skipped; compared by device and inode, so
 * links and other spellings count). Returns 0, or -1 after one stderr line. */
int savefile_check_output(const char *program, const char *path, const char *what,
                          const char *const inputs[], int n_inputs);

/* 1 if a and b name the same existing file (through links or other spellings). */
int savefile_same_file(const char *a, const char *b);

/* A lock that says "this process writes PATH": PATH.lock, locked with fcntl. */
typedef struct {
    int fd;                            /* the lock file, or -1 */
    char path[SAVEFILE_PATH_CAP];      /* PATH.lock */
} SaveLock;

/* Take the lock of path for the rest of the run, never waiting: if another process
 * holds it, returns -1 after one stderr line naming that process and the file. Returns
 * 0, or -1 after one stderr line. */
int savefile_lock(SaveLock *l, const char *program, const char *path);

/* Release the lock and remove its file. Safe on a lock never taken (fd -1) and twice. */
void savefile_unlock(SaveLock *l);

#endif /* SAVEFILE_H */
