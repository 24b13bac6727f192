/* test_files.c: the file layer's failure paths (platform/os.h), its functions called
 * directly. A save that fails at each stage (the temporary cannot be made; a write past the
 * file size limit, seen by the caller or only at the commit; the folder moved away before
 * the temporary is named; the rename refused) returns -1 after one stderr line naming the
 * destination, and leaves the destination as it was (bytes, inode, mode, time) and no
 * temporary; os_create_new, os_close_synced and os_rename_synced likewise. A lock held by a
 * live process (a child) refuses a second writer with one line naming the path and the
 * holder's pid, and the holder's save ends whole; a lock a killed run left is taken over;
 * no lock file is left behind, and none that is not ours is written or removed. A signal
 * removes the files listed for it.
 *
 * The files live in a folder of the test's own (mkdtemp under $TMPDIR, else /tmp), removed
 * at the end. The checks of permissions skip, saying why, when run as root (root writes a
 * read-only folder). Messages start "files: ".
 */
#include "os.h"

#include <dirent.h>        /* opendir, readdir, closedir */
#include <errno.h>         /* errno */
#include <fcntl.h>         /* open, O_*, AT_FDCWD */
#include <signal.h>        /* kill, raise, SIGKILL, SIGTERM */
#include <stdio.h>         /* FILE, fopen, fwrite, fclose, snprintf, setvbuf, rename */
#include <stdlib.h>        /* mkdtemp, getenv, malloc, realloc, free */
#include <string.h>        /* strcmp, strncmp, strstr, strchr, strlen, strerror, memcmp,
                             * memset */
#include <sys/resource.h>  /* getrlimit, setrlimit, RLIMIT_FSIZE */
#include <sys/stat.h>      /* stat, lstat, mkdir, chmod, utimensat */
#include <sys/wait.h>      /* waitpid, WIFEXITED, WIFSIGNALED, WTERMSIG */
#include <unistd.h>        /* fork, pipe, read, write, dup, dup2, close, unlink, rmdir, link,
                             * symlink, geteuid, _exit */

#include "tests/check.h"   /* check_true, check_skip, check_summary, check_run */

#define PROGRAM "files"         /* the program name every message of os.c starts with */
#define LIMIT_BYTES 65536       /* RLIMIT_FSIZE while a save is made to overflow it */
#define BIG_BYTES (4 * LIMIT_BYTES)   /* what such a save writes */
#define OLD_TIME 1000000000     /* a destination's mtime (2001): a rewrite would move it */
#define DIR_CAP 256             /* the test folder's path, so that paths in it fit */
#define NAME_CAP (DIR_CAP + 64) /* a path in the test folder */

static char dir[DIR_CAP];       /* the test's own folder, made by main */
static const char OLD_TEXT[] = "the old file, which no failed save may touch\n";
/* what os_lock writes in a lock file (platform/os.c LOCK_SIGNATURE) */
static const char LOCK_TEXT[] = "attn: lock of a file being written\n";

/* ---- helpers ---- */

/* dir/name into out (NAME_CAP bytes). Returns out. */
static char *at(char out[NAME_CAP], const char *name) {
    snprintf(out, NAME_CAP, "%s/%s", dir, name);
    return out;
}

/* The whole of the file at path as a malloc'd string (NUL-terminated), or NULL. */
static char *read_text(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    size_t cap = 1024, n = 0, got;
    char *text = malloc(cap + 1);
    while (text && (got = fread(text + n, 1, cap - n, file)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(text, 2 * cap + 1);
            if (!grown) free(text);
            text = grown;
            cap *= 2;
        }
    }
    fclose(file);
    if (text) text[n] = '\0';
    if (size) *size = n;
    return text;
}

/* Write text to a new or replaced file at path, then set its mtime to OLD_TIME. 1 if done. */
static int put_file(const char *path, const char *text) {
    FILE *file = fopen(path, "wb");
    if (!file) return 0;
    int ok = fputs(text, file) >= 0;
    ok &= fclose(file) == 0;
    const struct timespec times[2] = {{OLD_TIME, 0}, {OLD_TIME, 0}};
    return ok && utimensat(AT_FDCWD, path, times, 0) == 0;
}

/* What a file is: its status and bytes (text NULL: nothing at the path). */
typedef struct {
    struct stat st;
    char *text;
    size_t size;
} Snapshot;

static Snapshot snapshot(const char *path) {
    Snapshot s;
    memset(&s, 0, sizeof s);
    if (lstat(path, &s.st) == 0 && S_ISREG(s.st.st_mode)) s.text = read_text(path, &s.size);
    return s;
}

/* 1 if the file at path is still the one of `before`: its inode, mode, size, mtime, bytes. */
static int unchanged(const Snapshot *before, const char *path) {
    Snapshot now = snapshot(path);
    int same = before->text && now.text && now.st.st_dev == before->st.st_dev &&
               now.st.st_ino == before->st.st_ino && now.st.st_mode == before->st.st_mode &&
               now.size == before->size && memcmp(now.text, before->text, now.size) == 0 &&
               now.st.st_mtime == before->st.st_mtime;   /* seconds: macOS has no st_mtim */
    free(now.text);
    return same;
}

/* The entries of folder other than the n names in keep: their count, the first one's
 * name into first (cap bytes, "" if none). -1 if the folder cannot be read. */
static int others_in(const char *folder, const char *const keep[], int n, char *first,
                     size_t cap) {
    DIR *d = opendir(folder);
    if (!d) return -1;
    int count = 0;
    first[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        for (int i = 0; i < n && !known; i++) known = !strcmp(e->d_name, keep[i]);
        if (known) continue;
        if (count++ == 0) snprintf(first, cap, "%s", e->d_name);
    }
    closedir(d);
    return count;
}

/* Check that folder (a path) holds nothing but the n names in keep: no temporary, no lock. */
static void check_nothing_left(const char *what, const char *folder, const char *const keep[],
                               int n) {
    char first[256];
    int others = others_in(folder, keep, n, first, sizeof first);
    check_true(others == 0, "%s: nothing left beside it (got %d other entries%s%s)", what,
               others, others > 0 ? ", first " : "", first);
}

/* ---- standard error, captured around one call ---- */

static int saved_stderr = -1;

/* Send stderr to dir/stderr.txt (emptied) until capture_end. */
static void capture_start(void) {
    char path[NAME_CAP];
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    int fd = open(at(path, "stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
}

/* stderr back where it went; returns what was written to it meanwhile (malloc'd). */
static char *capture_end(void) {
    char path[NAME_CAP];
    fflush(stderr);
    if (saved_stderr >= 0) {
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
    }
    char *text = read_text(at(path, "stderr.txt"), NULL);
    return text ? text : calloc(1, 1);
}

/* Check that text (freed here) is one line "files: ..." holding must and also (if not
 * NULL): the message os.h promises for a failure. */
static void check_one_line(const char *what, char *text, const char *must, const char *also) {
    char *newline = text ? strchr(text, '\n') : NULL;
    const char *start = PROGRAM ": ";
    int ok = newline && newline[1] == '\0' && strncmp(text, start, strlen(start)) == 0 &&
             strstr(text, must) && (!also || strstr(text, also));
    if (newline && newline[1] == '\0') *newline = '\0';   /* for the message */
    check_true(ok, "%s: one stderr line naming %s%s%s (got \"%s\")", what, must,
               also ? " and " : "", also ? also : "", text ? text : "(nothing)");
    free(text);
}

/* Check that text (freed here) is empty: a call that succeeds says nothing. */
static void check_silent(const char *what, char *text) {
    check_true(text && text[0] == '\0', "%s: nothing on stderr (got \"%s\")", what,
               text ? text : "(unreadable)");
    free(text);
}

/* A fresh folder dir/name (removed first, with anything in it) into out. 1 if made. */
static int fresh_folder(char out[NAME_CAP], const char *name) {
    char command[2 * NAME_CAP];
    at(out, name);
    snprintf(command, sizeof command, "rm -rf '%s'", out);
    return check_run(command, NULL, NULL) == 0 && mkdir(out, 0755) == 0;
}

/* folder/name into out (IN_CAP bytes; "" if it does not fit, which no path here reaches). */
#define IN_CAP (NAME_CAP + 64)
static char *in(char out[IN_CAP], const char *folder, const char *name) {
    int n = snprintf(out, IN_CAP, "%s/%s", folder, name);
    if (n < 0 || n >= IN_CAP) out[0] = '\0';
    return out;
}

/* Lower RLIMIT_FSIZE to LIMIT_BYTES (on 1) or put back the limit it had (0). */
static int file_limit(int on) {
    static struct rlimit saved;
    if (on) {
        struct rlimit lower;
        if (getrlimit(RLIMIT_FSIZE, &saved) != 0) return 0;
        lower = saved;
        if (lower.rlim_cur == RLIM_INFINITY || lower.rlim_cur > LIMIT_BYTES)
            lower.rlim_cur = LIMIT_BYTES;
        return setrlimit(RLIMIT_FSIZE, &lower) == 0;
    }
    return setrlimit(RLIMIT_FSIZE, &saved) == 0;
}

/* Write BIG_BYTES to file in pieces of piece bytes (a divisor of BIG_BYTES); 1 if every
 * fwrite took its whole piece. */
static int write_big(FILE *file, size_t piece) {
    static char bytes[BIG_BYTES];
    memset(bytes, 'x', sizeof bytes);
    int ok = 1;
    for (size_t at_byte = 0; at_byte < sizeof bytes; at_byte += piece)
        ok &= fwrite(bytes + at_byte, 1, piece, file) == piece;
    return ok;
}

/* A whole save of "new\n" to out through s (os_save_open, then os_save_commit), its return
 * into *rc; returns what it wrote to stderr (capture_end's). */
static char *save_new(SaveFile *s, const char *out, int *rc) {
    capture_start();
    *rc = os_save_open(s, PROGRAM, out);
    if (*rc == 0) {
        fputs("new\n", s->file);
        *rc = os_save_commit(s, PROGRAM);
    }
    return capture_end();
}

/* ---- os_save_open, os_save_commit, os_save_discard ---- */

/* The way it should go: the file replaced, its mode kept, nothing said or left. */
static void test_save_works(void) {
    char folder[NAME_CAP], out[IN_CAP];
    if (!check_true(fresh_folder(folder, "works") && put_file(in(out, folder, "out.bin"),
                    OLD_TEXT) && chmod(out, 0640) == 0, "save: set up works/out.bin"))
        return;
    SaveFile s;
    int rc;
    char *said = save_new(&s, out, &rc);
    Snapshot now = snapshot(out);
    check_true(rc == 0 && now.text && strcmp(now.text, "new\n") == 0 &&
               (now.st.st_mode & 07777) == 0640,
               "save: a save that works replaces the file and keeps its mode 0640 (got %d, "
               "mode %o)", rc, (unsigned)(now.st.st_mode & 07777));
    free(now.text);
    check_silent("save that works", said);
    check_true(s.file == NULL && s.temp[0] == '\0', "save: the SaveFile holds nothing after "
               "the commit");
    os_save_discard(&s);   /* after a commit: nothing to remove */
    check_true(access(out, F_OK) == 0, "save: os_save_discard after a commit leaves the file");
    const char *keep[] = {"out.bin"};
    check_nothing_left("save that works", folder, keep, 1);
}

/* The temporary cannot be made: a missing folder, a file where the folder should be, a
 * folder this user may not write. */
static void test_save_open_fails(void) {
    char folder[NAME_CAP], out[IN_CAP], file[IN_CAP];
    if (!check_true(fresh_folder(folder, "open"), "save_open: set up the folder open")) return;
    struct {
        const char *what, *name;
    } cases[] = {{"a folder that does not exist", "missing/out.bin"},
                 {"a file where the folder should be", "afile/out.bin"}};
    check_true(put_file(in(file, folder, "afile"), OLD_TEXT), "save_open: write afile");
    for (int i = 0; i < 2; i++) {
        SaveFile s;
        memset(&s, 0x55, sizeof s);   /* what a caller's stack held before */
        capture_start();
        int rc = os_save_open(&s, PROGRAM, in(out, folder, cases[i].name));
        char *said = capture_end();
        check_true(rc == -1 && s.file == NULL && s.temp[0] == '\0',
                   "save_open into %s: -1, and the SaveFile holds nothing (got %d)",
                   cases[i].what, rc);
        check_one_line(cases[i].what, said, out, "cannot create");
        os_save_discard(&s);   /* holds nothing: safe */
    }
    const char *keep[] = {"afile"};
    check_nothing_left("save_open that failed", folder, keep, 1);

    if (geteuid() == 0) {
        check_skip("save_open into a read-only folder: running as root, which writes it");
        return;
    }
    char ro[IN_CAP];
    in(ro, folder, "ro");
    if (!check_true(mkdir(ro, 0755) == 0 && put_file(in(out, ro, "out.bin"), OLD_TEXT) &&
                    chmod(ro, 0555) == 0, "save_open: set up the read-only folder ro"))
        return;
    Snapshot before = snapshot(out);
    SaveFile s;
    capture_start();
    int rc = os_save_open(&s, PROGRAM, out);
    char *said = capture_end();
    check_true(rc == -1, "save_open in a read-only folder: -1 (got %d)", rc);
    if (rc == 0) os_save_discard(&s);
    check_one_line("save_open in a read-only folder", said, out, NULL);
    check_true(unchanged(&before, out), "save_open in a read-only folder: out.bin unchanged");
    const char *keep_ro[] = {"out.bin"};
    check_nothing_left("save_open in a read-only folder", ro, keep_ro, 1);
    chmod(ro, 0755);
    free(before.text);
}

/* Writes that fail once the save has started: past RLIMIT_FSIZE (SIGXFSZ ignored:
 * os_program_start), as a full disk fails them. Three callers: one that sees fwrite fail
 * and discards; one that ignores fwrite and commits (the commit must see the lost bytes:
 * stdio drops a buffer it could not write, and a later fflush succeeds); one whose bytes
 * all wait in the stream's buffer, so the commit's flush is the write that fails. */
static void test_write_fails(void) {
    static const char *const callers[] = {"a caller that sees fwrite fail and discards",
                                          "a caller that ignores fwrite and commits",
                                          "a commit whose flush fails"};
    for (int i = 0; i < 3; i++) {
        char folder[NAME_CAP], out[IN_CAP], name[32];
        snprintf(name, sizeof name, "full%d", i);
        if (!check_true(fresh_folder(folder, name) && put_file(in(out, folder, "out.bin"),
                        OLD_TEXT), "write: set up %s/out.bin", name))
            continue;
        Snapshot before = snapshot(out);
        SaveFile s;
        capture_start();
        int rc = os_save_open(&s, PROGRAM, out), wrote = -1, limited = 0;
        if (rc == 0 && i == 2) setvbuf(s.file, NULL, _IOFBF, 2 * BIG_BYTES);
        if (rc == 0) {
            limited = file_limit(1);
            /* one fwrite larger than the stream's buffer (written past it, and lost) for
             * the caller that ignores it; 1 KiB pieces for the others */
            wrote = write_big(s.file, i == 1 ? BIG_BYTES : 1024);
            if (i == 0) os_save_discard(&s);
            else rc = os_save_commit(&s, PROGRAM);
            if (limited) file_limit(0);
        }
        char *said = capture_end();
        if (!check_true(limited, "write: RLIMIT_FSIZE lowered for %s", callers[i])) {
            free(said);
            free(before.text);
            continue;
        }
        if (i == 0) {
            check_true(wrote == 0, "write: fwrite past the limit fails");
            check_silent(callers[i], said);
        } else {
            check_true(rc == -1, "write: %s: os_save_commit returns -1 (got %d)", callers[i],
                       rc);
            check_one_line(callers[i], said, out, "write failed");
        }
        check_true(unchanged(&before, out), "write: %s: out.bin unchanged (bytes, inode, "
                   "time)", callers[i]);
        check_true(s.file == NULL && s.temp[0] == '\0', "write: %s: the SaveFile holds "
                   "nothing", callers[i]);
        const char *keep[] = {"out.bin"};
        check_nothing_left(callers[i], folder, keep, 1);
        os_save_discard(&s);   /* twice: safe */
        free(before.text);
    }
}

/* The commit fails: the folder renamed away, or removed, after the temporary was made (its
 * name, given at the commit, has no folder then); a folder at the destination (the rename
 * refused, the named temporary removed). */
static void test_commit_fails(void) {
    char folder[NAME_CAP], moved[NAME_CAP], out[IN_CAP], moved_out[IN_CAP];
    /* renamed away */
    if (check_true(fresh_folder(folder, "moved") && put_file(in(out, folder, "out.bin"),
                   OLD_TEXT), "commit: set up moved/out.bin")) {
        at(moved, "moved2");
        rmdir(moved);
        Snapshot before = snapshot(out);
        SaveFile s;
        int opened = os_save_open(&s, PROGRAM, out) == 0;
        check_true(opened, "commit: os_save_open moved/out.bin");
        if (opened && !s.unnamed) {
            check_skip("commit into a folder renamed away: no file of no name here (O_TMPFILE)"
                       ", so the named temporary moves with the folder");
            os_save_discard(&s);
        } else if (opened) {
            fputs("new\n", s.file);
            int renamed = rename(folder, moved) == 0;
            capture_start();
            int rc = os_save_commit(&s, PROGRAM);
            char *said = capture_end();
            check_true(renamed && rc == -1, "commit into a folder renamed away: -1 (got %d)",
                       rc);
            check_one_line("commit into a folder renamed away", said, out, NULL);
            check_true(unchanged(&before, in(moved_out, moved, "out.bin")), "commit into a "
                       "folder renamed away: out.bin unchanged");
            const char *keep[] = {"out.bin"};
            check_nothing_left("commit into a folder renamed away", moved, keep, 1);
            check_true(access(folder, F_OK) != 0, "commit into a folder renamed away: the "
                       "folder not made again");
        }
        free(before.text);
    }
    /* removed (a new path) */
    if (check_true(fresh_folder(folder, "gone"), "commit: set up gone/")) {
        SaveFile s;
        int opened = os_save_open(&s, PROGRAM, in(out, folder, "new.bin")) == 0;
        check_true(opened, "commit: os_save_open gone/new.bin");
        if (opened && !s.unnamed) {
            check_skip("commit into a folder removed: no file of no name here (O_TMPFILE)");
            os_save_discard(&s);
        } else if (opened) {
            fputs("new\n", s.file);
            int removed = rmdir(folder) == 0;
            capture_start();
            int rc = os_save_commit(&s, PROGRAM);
            char *said = capture_end();
            check_true(removed && rc == -1, "commit into a folder removed: -1 (got %d)", rc);
            check_one_line("commit into a folder removed", said, out, NULL);
            check_true(access(folder, F_OK) != 0, "commit into a folder removed: not made "
                       "again");
        }
    }
    /* a folder at the destination: the rename fails after the temporary has its name */
    char inner[IN_CAP + 16];
    if (check_true(fresh_folder(folder, "isdir") && mkdir(in(out, folder, "out.bin"), 0755)
                   == 0, "commit: set up isdir/out.bin/ (a folder)")) {
        snprintf(inner, sizeof inner, "%s/inner", out);
        put_file(inner, OLD_TEXT);
        Snapshot before = snapshot(inner);
        SaveFile s;
        int rc;
        char *said = save_new(&s, out, &rc);
        check_true(rc == -1, "commit over a folder: -1 (got %d)", rc);
        check_one_line("commit over a folder", said, out, "cannot rename");
        check_true(unchanged(&before, inner), "commit over a folder: the file in it unchanged");
        const char *keep[] = {"out.bin"};
        check_nothing_left("commit over a folder", folder, keep, 1);
        free(before.text);
    }
}

/* os_save_discard removes its own temporary and nothing else: not the destination, not a
 * user's files of the temporaries' pattern (PATH.tmp-XXXXXX). */
static void test_discard(void) {
    char folder[NAME_CAP], out[IN_CAP], look0[IN_CAP], look1[IN_CAP];
    if (!check_true(fresh_folder(folder, "discard") && put_file(in(out, folder, "out.bin"),
                    OLD_TEXT) && put_file(in(look0, folder, "out.bin.tmp-000000"), "mine\n") &&
                    put_file(in(look1, folder, "out.bin.tmp-XXXXXX"), "mine too\n"),
                    "discard: set up out.bin and two look-alikes of temporaries"))
        return;
    Snapshot before = snapshot(out), user0 = snapshot(look0), user1 = snapshot(look1);
    SaveFile s;
    if (check_true(os_save_open(&s, PROGRAM, out) == 0, "discard: os_save_open")) {
        write_big(s.file, 1024);
        fflush(s.file);
        struct stat st;
        check_true(s.unnamed ? s.temp[0] == '\0' : stat(s.temp, &st) == 0,
                   "discard: the temporary is %s while written", s.unnamed ? "of no name"
                   : "at its name");
        os_save_discard(&s);
        os_save_discard(&s);   /* twice: safe */
        check_true(s.file == NULL && s.temp[0] == '\0', "discard: the SaveFile holds nothing");
        check_true(unchanged(&before, out), "discard: out.bin unchanged");
        check_true(unchanged(&user0, look0) && unchanged(&user1, look1),
                   "discard: the user's out.bin.tmp-000000 and out.bin.tmp-XXXXXX kept");
        const char *keep[] = {"out.bin", "out.bin.tmp-000000", "out.bin.tmp-XXXXXX"};
        check_nothing_left("discard", folder, keep, 3);
    }
    free(before.text);
    free(user0.text);
    free(user1.text);
}

/* ---- os_create_new, os_close_synced, os_rename_synced ---- */

static void test_fixed_names(void) {
    char folder[NAME_CAP], temp[IN_CAP], victim[IN_CAP], to[IN_CAP];
    if (!check_true(fresh_folder(folder, "fixed") && put_file(in(victim, folder, "victim"),
                    OLD_TEXT), "fixed: set up fixed/victim"))
        return;
    Snapshot before = snapshot(victim);
    /* a link at the fixed name: removed, never written through */
    in(temp, folder, "t.tmp");
    check_true(symlink(victim, temp) == 0, "fixed: t.tmp a link to victim");
    FILE *file = os_create_new(PROGRAM, temp);
    struct stat st;
    check_true(file && lstat(temp, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0,
               "os_create_new over a link: a new empty file at t.tmp");
    check_true(unchanged(&before, victim), "os_create_new over a link: its target unchanged");
    /* os_close_synced past the limit, at its flush (the bytes in the stream's buffer) or at
     * an fwrite the caller ignored (the bytes already lost): -1, the file removed */
    static const char *const ways[] = {"at its flush", "after a write lost"};
    for (int i = 0; i < 2; i++) {
        if (i == 1) file = os_create_new(PROGRAM, temp);
        if (!check_true(file != NULL, "fixed: t.tmp open for os_close_synced %s", ways[i]))
            continue;
        if (i == 0) {
            setvbuf(file, NULL, _IOFBF, 2 * BIG_BYTES);
            write_big(file, 1024);
        }
        capture_start();
        int limited = file_limit(1);
        if (i == 1) write_big(file, BIG_BYTES);
        int rc = os_close_synced(file, PROGRAM, temp);
        if (limited) file_limit(0);
        char *said = capture_end();
        check_true(limited && rc == -1, "os_close_synced %s: -1 (got %d)", ways[i], rc);
        check_one_line("os_close_synced past the limit", said, temp, "write failed");
        check_true(access(temp, F_OK) != 0, "os_close_synced %s: t.tmp removed", ways[i]);
    }
    /* os_rename_synced: a rename that fails leaves from in place */
    char from[IN_CAP];
    if (check_true(put_file(in(from, folder, "from"), "from\n"), "fixed: write from")) {
        Snapshot was = snapshot(from);
        capture_start();
        int rc = os_rename_synced(PROGRAM, from, in(to, folder, "nowhere/to"));
        char *said = capture_end();
        check_true(rc == -1, "os_rename_synced into a missing folder: -1 (got %d)", rc);
        check_one_line("os_rename_synced into a missing folder", said, from, to);
        check_true(unchanged(&was, from), "os_rename_synced that failed: from left in place");
        capture_start();
        rc = os_rename_synced(PROGRAM, from, in(to, folder, "to"));
        said = capture_end();
        Snapshot now = snapshot(to);
        check_true(rc == 0 && access(from, F_OK) != 0 && now.st.st_ino == was.st.st_ino,
                   "os_rename_synced: from becomes to (got %d)", rc);
        check_silent("os_rename_synced", said);
        free(now.text);
        free(was.text);
    }
    const char *keep[] = {"victim", "to"};
    check_nothing_left("fixed names", folder, keep, 2);
    free(before.text);
}

/* ---- os_lock, os_unlock ---- */

/* A child that takes the lock of path (and, with save 1, starts a save of it, "first\n"),
 * tells the parent through ready ('L' locked, 'F' failed), then waits on go: a byte lets it
 * commit, unlock and exit 0. The child's pid (the caller closes ready[0] and go[1]), or -1
 * (nothing open). */
static pid_t start_holder(const char *path, int save, int ready[2], int go[2]) {
    if (pipe(ready) != 0) return -1;
    if (pipe(go) != 0) {
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) {
        close(ready[1]);
        close(go[0]);
        if (pid < 0) {   /* no child: the caller closes nothing */
            close(ready[0]);
            close(go[1]);
        }
        return pid;
    }
    close(ready[0]);
    close(go[1]);
    SaveLock l;
    SaveFile s;
    int ok = os_lock(&l, "holder", path) == 0;
    if (ok && save) ok = os_save_open(&s, "holder", path) == 0 && fputs("first\n", s.file) >= 0;
    char byte = ok ? 'L' : 'F';
    if (write(ready[1], &byte, 1) != 1 || !ok) _exit(1);
    if (read(go[0], &byte, 1) != 1) _exit(1);   /* the parent ended: leave as SIGKILL would */
    if (save && os_save_commit(&s, "holder") != 0) _exit(1);
    os_unlock(&l);
    _exit(0);
}

/* Wait for pid; its wait status, or -1. */
static int reap(pid_t pid) {
    int status;
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

/* Two processes saving one file at once: the second is refused at its lock, with one line
 * naming the path and the first's pid; the first's lock and save are untouched and its
 * file ends whole; no lock is left. */
static void test_lock_live(void) {
    char folder[NAME_CAP], out[IN_CAP], lock[IN_CAP];
    if (!check_true(fresh_folder(folder, "live") && put_file(in(out, folder, "out.bin"),
                    OLD_TEXT), "lock: set up live/out.bin"))
        return;
    in(lock, folder, "out.bin" OS_LOCK_SUFFIX);
    int ready[2], go[2];
    char byte = 0;
    pid_t pid = start_holder(out, 1, ready, go);
    if (!check_true(pid > 0 && read(ready[0], &byte, 1) == 1 && byte == 'L',
                    "lock: a child holds the lock of out.bin and is saving it")) {
        if (pid > 0 && kill(pid, SIGKILL) == 0) reap(pid);
        if (pid > 0) {
            close(ready[0]);
            close(go[1]);
        }
        return;
    }
    Snapshot held = snapshot(lock);
    SaveLock l;
    capture_start();
    int rc = os_lock(&l, PROGRAM, out);
    char *said = capture_end();
    check_true(rc == -1 && l.fd == -1, "lock held by a live process: -1 (got %d)", rc);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "pid %ld", (long)pid);
    check_one_line("lock held by a live process", said, out, pid_text);
    os_unlock(&l);   /* a lock never taken: nothing to do */
    check_true(held.text && strcmp(held.text, LOCK_TEXT) == 0 && unchanged(&held, lock),
               "lock held by a live process: the holder's lock file kept as it was");
    /* the holder goes on: its save ends whole, its lock goes */
    check_true(write(go[1], "g", 1) == 1, "lock: the child told to commit");
    int status = reap(pid);
    check_true(WIFEXITED(status) && WEXITSTATUS(status) == 0, "lock: the holder committed "
               "and unlocked (status %d)", status);
    Snapshot now = snapshot(out);
    check_true(now.text && strcmp(now.text, "first\n") == 0, "lock: out.bin is the holder's "
               "whole file");
    free(now.text);
    const char *keep[] = {"out.bin"};
    check_nothing_left("two writers of one file", folder, keep, 1);
    /* then this process may take it, and leaves nothing */
    capture_start();
    rc = os_lock(&l, PROGRAM, out);
    said = capture_end();
    check_true(rc == 0 && access(lock, F_OK) == 0, "lock: free again once the holder ended");
    check_silent("lock once free", said);
    os_unlock(&l);
    os_unlock(&l);   /* twice: safe */
    check_nothing_left("lock then unlock", folder, keep, 1);
    close(ready[0]);
    close(go[1]);
    free(held.text);
}

/* A lock left by a run killed with SIGKILL (no handler runs) is taken over, the same file,
 * silently, and removed at the unlock; a run ended by SIGTERM leaves none. */
static void test_lock_stale(void) {
    char folder[NAME_CAP], out[IN_CAP], lock[IN_CAP];
    if (!check_true(fresh_folder(folder, "stale"), "lock: set up stale/")) return;
    in(out, folder, "out.bin");
    in(lock, folder, "out.bin" OS_LOCK_SUFFIX);
    const int signals[] = {SIGKILL, SIGTERM};
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "SIGKILL" : "SIGTERM";
        int ready[2], go[2];
        char byte = 0;
        pid_t pid = start_holder(out, 0, ready, go);
        if (!check_true(pid > 0 && read(ready[0], &byte, 1) == 1 && byte == 'L',
                        "lock: a child holds the lock before its %s", name)) {
            if (pid > 0 && kill(pid, SIGKILL) == 0) reap(pid);
            if (pid > 0) {
                close(ready[0]);
                close(go[1]);
            }
            continue;
        }
        kill(pid, signals[i]);
        int status = reap(pid);
        check_true(WIFSIGNALED(status) && WTERMSIG(status) == signals[i],
                   "lock: the holder ended by %s", name);
        close(ready[0]);
        close(go[1]);
        if (i == 1) {
            check_true(access(lock, F_OK) != 0, "lock: a holder ended by SIGTERM leaves no "
                       "lock");
            continue;
        }
        Snapshot stale = snapshot(lock);
        check_true(stale.text && strcmp(stale.text, LOCK_TEXT) == 0, "lock: SIGKILL leaves "
                   "the lock file (a stale lock)");
        SaveLock l;
        capture_start();
        int rc = os_lock(&l, PROGRAM, out);
        char *said = capture_end();
        struct stat st;
        check_true(rc == 0 && stat(lock, &st) == 0 && st.st_ino == stale.st.st_ino,
                   "lock: a stale lock is taken over (the same file; got %d)", rc);
        check_silent("stale lock taken over", said);
        os_unlock(&l);
        check_true(access(lock, F_OK) != 0, "lock: the stale lock removed at the unlock");
        free(stale.text);
    }
    check_nothing_left("stale locks", folder, NULL, 0);
}

/* Something at PATH.lock that is not a lock of ours (a user's file, a link, a folder) is
 * refused with one line and left as it was; and os_unlock removes only the file it locked:
 * one put at PATH.lock meanwhile stays. */
static void test_lock_not_ours(void) {
    char folder[NAME_CAP], out[IN_CAP], lock[IN_CAP], target[IN_CAP];
    if (!check_true(fresh_folder(folder, "notours"), "lock: set up notours/")) return;
    in(out, folder, "out.bin");
    in(lock, folder, "out.bin" OS_LOCK_SUFFIX);
    in(target, folder, "elsewhere");
    static const char *const kinds[] = {"a user's file", "a dangling link", "a folder"};
    for (int i = 0; i < 3; i++) {
        int made = i == 0 ? put_file(lock, "notes\n") : i == 1 ? symlink(target, lock) == 0
                 : mkdir(lock, 0755) == 0;
        if (!check_true(made, "lock: %s at out.bin.lock", kinds[i])) continue;
        Snapshot before = snapshot(lock);
        SaveLock l;
        capture_start();
        int rc = os_lock(&l, PROGRAM, out);
        char *said = capture_end();
        check_true(rc == -1, "lock over %s: -1 (got %d)", kinds[i], rc);
        if (rc == 0) os_unlock(&l);
        check_one_line(kinds[i], said, lock, "in the way");
        struct stat st;
        check_true(lstat(lock, &st) == 0 && st.st_ino == before.st.st_ino &&
                   (i != 0 || unchanged(&before, lock)) && access(target, F_OK) != 0,
                   "lock over %s: it is kept as it was (a link's target not made)", kinds[i]);
        if (i == 2) rmdir(lock);
        else unlink(lock);
        free(before.text);
    }
    /* os_unlock after PATH.lock was replaced: the replacement stays */
    char other[IN_CAP];
    SaveLock l;
    if (check_true(os_lock(&l, PROGRAM, out) == 0 && put_file(in(other, folder, "other"),
                   "someone's\n"), "lock: taken, and another file made")) {
        Snapshot before = snapshot(other);
        check_true(rename(other, lock) == 0, "lock: the other file renamed over out.bin.lock");
        os_unlock(&l);
        check_true(unchanged(&before, lock), "os_unlock: a file put at out.bin.lock meanwhile "
                   "is not removed");
        unlink(lock);
        free(before.text);
    }
    check_nothing_left("locks not ours", folder, NULL, 0);
}

/* ---- os_remove_on_signal ---- */

/* A child lists a file, then raises SIGTERM: the file is removed (on 1), or kept once taken
 * off the list (on then off). */
static void test_remove_on_signal(void) {
    char folder[NAME_CAP], path[IN_CAP];
    if (!check_true(fresh_folder(folder, "signal"), "signal: set up signal/")) return;
    in(path, folder, "fixed.tmp");
    for (int off = 0; off < 2; off++) {
        if (!check_true(put_file(path, "partial\n"), "signal: write fixed.tmp")) continue;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            os_remove_on_signal(path, 1);
            if (off) os_remove_on_signal(path, 0);
            raise(SIGTERM);
            _exit(0);   /* not reached when the signal ends the process */
        }
        int status = pid > 0 ? reap(pid) : -1;
        check_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM &&
                   (access(path, F_OK) == 0) == off, "os_remove_on_signal: SIGTERM %s "
                   "fixed.tmp", off ? "keeps a file taken off the list," : "removes");
    }
    unlink(path);
}

/* ---- os_check_output, os_same_file ---- */

static void test_check_output(void) {
    char folder[NAME_CAP], a[IN_CAP], hard[IN_CAP], soft[IN_CAP], b[IN_CAP], path[IN_CAP];
    if (!check_true(fresh_folder(folder, "check") && put_file(in(a, folder, "a"), OLD_TEXT) &&
                    put_file(in(b, folder, "b"), OLD_TEXT) &&
                    link(a, in(hard, folder, "hard")) == 0 &&
                    symlink(a, in(soft, folder, "soft")) == 0, "check: set up a, b, links"))
        return;
    check_true(os_same_file(a, hard) && os_same_file(a, soft) && !os_same_file(a, b) &&
               !os_same_file(a, in(path, folder, "missing")) && !os_same_file(NULL, a),
               "os_same_file: the same through a hard and a symbolic link, not another file, "
               "a missing one or NULL");
    const char *inputs[] = {NULL, hard};
    struct {
        const char *what, *name, *must;
        int n_inputs;
    } refused[] = {{"an input through a hard link", "a", "is the input", 2},
                   {"a symbolic link", "soft", "symbolic link", 0},
                   {"a folder", ".", "not a regular file", 0},
                   {"a missing folder", "missing/out", "cannot write", 0}};
    for (int i = 0; i < 4; i++) {
        capture_start();
        int rc = os_check_output(PROGRAM, in(path, folder, refused[i].name), "the output",
                                 inputs, refused[i].n_inputs);
        char *said = capture_end();
        check_true(rc == -1, "os_check_output refuses %s (got %d)", refused[i].what, rc);
        check_one_line(refused[i].what, said, path, refused[i].must);
    }
    capture_start();
    int rc = os_check_output(PROGRAM, in(path, folder, "new"), "the output", inputs, 2);
    char *said = capture_end();
    check_true(rc == 0, "os_check_output takes a new path in a writable folder (got %d)", rc);
    check_silent("os_check_output of a new path", said);
    if (geteuid() == 0) {
        check_skip("os_check_output of a read-only file: running as root, which writes it");
        return;
    }
    chmod(b, 0444);
    capture_start();
    rc = os_check_output(PROGRAM, b, "the output", NULL, 0);
    said = capture_end();
    check_true(rc == -1, "os_check_output refuses a read-only file (got %d)", rc);
    check_one_line("a read-only file", said, b, "cannot replace");
}

int main(void) {
    os_program_start(PROGRAM);   /* SIGXFSZ ignored: a write past the limit fails instead */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_files_XXXXXX", tmp && *tmp && strlen(tmp) < 128 ? tmp
             : "/tmp");
    if (!mkdtemp(dir)) {
        check_true(0, "a temporary folder %s (got \"%s\")", dir, strerror(errno));
        return check_summary("test_files");
    }
    test_save_works();
    test_save_open_fails();
    test_write_fails();
    test_commit_fails();
    test_discard();
    test_fixed_names();
    test_lock_live();
    test_lock_stale();
    test_lock_not_ours();
    test_remove_on_signal();
    test_check_output();
    char command[2 * DIR_CAP];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    check_true(check_run(command, NULL, NULL) == 0, "the test folder removed");
    return check_summary("test_files");
}
