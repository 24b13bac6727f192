/* test_platform.c: the machine as the programs see it (platform/os.c: the memory a cgroup
 * allows, the CPUs this process may use) and the thread pool that runs the kernels' loops
 * (parallel/pool.c).
 *
 * The cgroup checks build fake trees of limit files in a temporary folder ($TMPDIR, else
 * /tmp) and hand them to os_cgroup_memory_limit and os_cgroup_cpu_limit with a fake
 * /proc/self/cgroup text, so no root and no real cgroup is needed; each expected limit is
 * worked out by hand beside it.
 * The pool checks count, with an atomic counter a job, how often each job of a loop ran
 * and on which thread: every job exactly once, for any number of jobs, each on the
 * thread the contract names. They run in a child process of this program for each of
 * 1, 2, 3 and 8 threads, set by OMP_NUM_THREADS (which, unlike pool_set_threads, is not
 * capped at the cores: so several threads are tested even on one CPU, as taskset -c 1
 * leaves).
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT (Linux) */
#include "os.h"
#include "parallel/pool.h"

#include <errno.h>       /* errno, EEXIST */
#include <sched.h>       /* sched_yield; sched_getaffinity, sched_setaffinity, CPU_* (Linux) */
#include <stdatomic.h>   /* the per-job counters */
#include <stdint.h>      /* SIZE_MAX */
#include <stdio.h>       /* fopen, fputs, snprintf, printf */
#include <stdlib.h>      /* calloc, free, getenv, mkdtemp, strtol */
#include <string.h>      /* strcmp, strncmp, strchr, strrchr, strlen, memset, memcpy,
                          * strerror */
#include <sys/resource.h>   /* getrlimit, RLIMIT_AS */
#include <sys/stat.h>    /* mkdir */
#include <unistd.h>      /* sysconf, alarm */

#include "tests/check.h"   /* check_*, check_run, check_read_file */

#define GIB (1ULL << 30)   /* sizes as written in the files: past size_t on 32 bits */
#define MIB (1ULL << 20)
#define V1_UNLIMITED "9223372036854771712"   /* what version 1 shows for no limit: the
                                              * largest signed 64-bit count of 4 KiB pages */
#define CHILD_FLAG "--pool-child"            /* argv[1] of the child that runs the pool */
#define CHILD_SECONDS 60                     /* the child's time: a pool that loses a job
                                              * waits for it forever, so SIGALRM ends it */
#define TICKET_JOBS 65535                    /* kernels.h: the most jobs a loop on the pool
                                              * has (more run on the calling thread) */

/* ---- the cgroup parser ---- */

static char tree[256];   /* the temporary folder every fake tree lives in */

/* Writes text into the file at tree/rel, making its folders first; text NULL makes only
 * the folder tree/rel. Returns 1 if it is there. */
static int put(const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tree, rel);
    char *end = text ? strrchr(path, '/') : path + strlen(path);
    for (char *slash = strchr(path + strlen(tree) + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (!slash || slash > end) slash = end;
        char kept = *slash;
        *slash = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
        *slash = kept;
        if (slash == end) break;
    }
    if (!text) return 1;
    FILE *file = fopen(path, "w");
    int ok = file && fputs(text, file) >= 0;
    if (file && fclose(file) != 0) ok = 0;
    return ok;
}

/* The limit os_cgroup_memory_limit finds from `start` for the text of /proc/self/cgroup
 * under the fake root tree/root. */
static size_t limit_of(const char *root, const char *cgroup_text, size_t start) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tree, root);
    return os_cgroup_memory_limit(cgroup_text, path, start);
}

/* n as a size_t: SIZE_MAX (no limit) where it does not fit (32-bit builds). */
static size_t as_size(unsigned long long n) { return n > SIZE_MAX ? SIZE_MAX : (size_t)n; }

/* One check: the limit found from `start` against the hand-worked one, each as a size_t
 * (a limit file's value that does not fit lowers nothing). */
static void expect(const char *root, const char *cgroup_text, unsigned long long start,
                   unsigned long long want_bytes, const char *what) {
    size_t got = limit_of(root, cgroup_text, as_size(start)), want = as_size(want_bytes);
    check_true(got == want, "cgroup %s: %zu bytes (expected %zu)", what, got, want);
}

/* Version 2: one file, memory.max, in the cgroup's folder and in each parent's. */
static void test_cgroup_v2(void) {
    int ok = put("v2a/a/memory.max", "1073741824\n") && put("v2a/a/b/memory.max", "2147483648\n")
          && put("v2a/a/b/c/memory.max", "max\n");
    check_true(ok, "cgroup: a fake version 2 tree written");
    expect("v2a", "0::/a/b/c\n", SIZE_MAX, GIB, "v2: the grandparent's 1 GiB under the parent's "
           "2 GiB and the group's max");
    expect("v2a", "0::/a/b\n", 512 * MIB, 512 * MIB, "v2: a start below every limit stays");
    put("v2b/a/memory.max", "4294967296");   /* no newline */
    put("v2b/a/b/memory.max", "3221225472\n");
    expect("v2b", "0::/a/b", SIZE_MAX, 3 * GIB, "v2: the child's 3 GiB under the parent's "
           "4 GiB (no newline after either)");
    put("v2c/a/memory.max", "max\n");
    put("v2c/a/b/memory.max", "max");
    expect("v2c", "0::/a/b\n", SIZE_MAX, SIZE_MAX, "v2: \"max\" in every file is no limit");
    expect("v2c", "0::/a/b\n", 8 * GIB, 8 * GIB, "v2: \"max\" leaves the start (8 GiB)");
    put("v2d/a/memory.max", "garbage\n");
    put("v2d/a/b/memory.max", "");
    put("v2d/a/b/c/memory.max", "\n");
    expect("v2d", "0::/a/b/c\n", 8 * GIB, 8 * GIB, "v2: garbage, an empty file and a lone "
           "newline are no limits");
    put("v2e/a/memory.max", "3221225472\n");   /* a/b and a/b/c have no folder at all */
    expect("v2e", "0::/a/b/c\n", SIZE_MAX, 3 * GIB, "v2: missing files and folders below a "
           "parent's 3 GiB");
    expect("v2e", "0::/x/y\n", SIZE_MAX, SIZE_MAX, "v2: a group with no file anywhere");
    char near[64];
    snprintf(near, sizeof near, "%zu\n", SIZE_MAX - 1);
    put("v2f/a/memory.max", near);
    snprintf(near, sizeof near, "%zu\n", SIZE_MAX);
    put("v2f/a/b/memory.max", near);
    expect("v2f", "0::/a/b\n", SIZE_MAX, SIZE_MAX - 1, "v2: SIZE_MAX - 1 is a limit, SIZE_MAX "
           "is not below the start");
    /* 2^64 and more do not fit: glibc's and musl's scanf then give the largest value */
    put("v2g/a/memory.max", "18446744073709551616\n");
    put("v2g/a/b/memory.max", "99999999999999999999999999\n");
    expect("v2g", "0::/a/b\n", 16 * GIB, 16 * GIB, "v2: numbers past 2^64 are no limits");
    put("v2h/a/memory.max", "0\n");
    expect("v2h", "0::/a\n", 16 * GIB, 0, "v2: a limit of 0 bytes is a limit");
    put("v2i/memory.max", "268435456\n");   /* the root of the tree a namespace shows */
    expect("v2i", "0::/\n", SIZE_MAX, 256 * MIB, "v2: \"0::/\" reads the root's own file");
    put("v2j/a/memory.max", "2147483648\n");
    put("v2j/a/b/memory.max", "1073741824\n");
    expect("v2j", "0::/a//b/\n", SIZE_MAX, GIB, "v2: doubled and trailing slashes");
    expect("v2j", "\n\ngarbage\n1:name=systemd:/a\n0::/a/b", SIZE_MAX, GIB,
           "v2: blank, garbage and other hierarchies' lines around the line of version 2");
    expect("v2j", "", SIZE_MAX, SIZE_MAX, "v2: an empty /proc/self/cgroup");
    expect("v2j", "0:memory:/a/b\n", SIZE_MAX, SIZE_MAX, "v2: a line 0 with controllers is "
           "version 1's, read under memory/ (none there)");
}

/* Version 1: memory.limit_in_bytes under root/memory, on the line whose controllers
 * include memory. */
static void test_cgroup_v1(void) {
    int ok = put("v1a/memory/docker/memory.limit_in_bytes", "268435456\n") &&
             put("v1a/memory/docker/abc/memory.limit_in_bytes", V1_UNLIMITED "\n") &&
             put("v1a/memory/memory.limit_in_bytes", V1_UNLIMITED "\n");
    check_true(ok, "cgroup: a fake version 1 tree written");
    expect("v1a", "4:memory:/docker/abc\n", SIZE_MAX, 256 * MIB,
           "v1: the parent's 256 MiB under the group's unlimited " V1_UNLIMITED);
    put("v1b/memory/u/memory.limit_in_bytes", V1_UNLIMITED "\n");
    put("v1b/memory/memory.limit_in_bytes", V1_UNLIMITED "\n");
    expect("v1b", "4:memory:/u\n", 16 * GIB, 16 * GIB, "v1: " V1_UNLIMITED " everywhere "
           "leaves the machine's 16 GiB");
    put("v1c/memory/m/memory.limit_in_bytes", "536870912\n");
    put("v1c/memory/x/memory.limit_in_bytes", "1048576\n");
    const char *lines = "11:hugetlb:/x\n10:cpu,cpuacct:/x\n9:name=systemd:/x\n"
                        "8:memory,hugetlb:/m\n7:pids:/x\n";
    expect("v1c", lines, SIZE_MAX, 512 * MIB, "v1: the memory line among several "
           "controllers' (the others name a 1 MiB group)");
    expect("v1c", "3:cpuset:/x\n", SIZE_MAX, SIZE_MAX, "v1: no memory controller, no limit");
    put("v1d/u/memory.max", "5368709120\n");
    put("v1d/memory/m/memory.limit_in_bytes", "3221225472\n");
    expect("v1d", "0::/u\n4:memory:/m\n", SIZE_MAX, 3 * GIB, "hybrid: version 1's 3 GiB "
           "under version 2's 5 GiB");
    expect("v1d", "4:memory:/x\n0::/u\n", SIZE_MAX, 5 * GIB, "hybrid: version 2's 5 GiB, "
           "version 1's group without a file");
}

/* Lines whose path climbs out of the tree ("/.." from a cgroup namespace) and lines too
 * long for any path. */
static void test_cgroup_paths(void) {
    put("outside/memory.max", "1000\n");      /* tree/outside: beside the root, not in it */
    put("ns/memory.max", "2000\n");           /* the namespace's root: not our parent */
    put("ns/..x/memory.max", "777\n");        /* a group whose name starts with two dots */
    expect("ns", "0::/../outside\n", SIZE_MAX, SIZE_MAX, "\"0::/../outside\": no file "
           "outside the root is read, nor the root's (not a parent of that group)");
    expect("ns", "0::/a/../b\n", SIZE_MAX, SIZE_MAX, "a \"..\" inside the path: no limit");
    expect("ns", "0::/..x\n", SIZE_MAX, 777, "\"..x\" is a name, not a step up: its 777 and "
           "the root's 2000");
    static char text[OS_PATH_CAP + 64];
    memset(text, 'x', sizeof text);
    memcpy(text, "1:cpu:/", 7);
    snprintf(text + OS_PATH_CAP + 16, sizeof text - OS_PATH_CAP - 16, "\n0::/\n");
    expect("ns", text, SIZE_MAX, 2000, "a line longer than any path is skipped, the next read");
}

/* One check of os_cgroup_cpu_limit under the fake root tree/root: the CPUs found from
 * `start` against the hand-worked count. */
static void expect_cpus(const char *root, const char *cgroup_text, size_t start, size_t want,
                        const char *what) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tree, root);
    size_t got = os_cgroup_cpu_limit(cgroup_text, path, start);
    check_true(got == want, "cgroup CPU quota %s: %zu CPUs (expected %zu)", what, got, want);
}

/* The CPU quota: version 2's cpu.max ("QUOTA PERIOD", microseconds) and version 1's
 * cpu.cfs_quota_us with cpu.cfs_period_us, each as CPUs rounded up, the least of the group's
 * and its parents'. */
static void test_cgroup_cpu(void) {
    int ok = put("c2a/a/cpu.max", "max 100000\n") & put("c2a/a/b/cpu.max", "150000 100000\n");
    expect_cpus("c2a", "0::/a/b\n", 64, 2, "v2: 150000 of 100000 is 1.5 CPUs, rounded up to "
                "2, under the parent's max");
    expect_cpus("c2a", "0::/a/b\n", 1, 1, "v2: a start below the quota stays");
    expect_cpus("c2a", "0::/a\n", 64, 64, "v2: \"max\" is no quota");
    ok &= put("c2b/a/cpu.max", "100000 100000");   /* no newline */
    ok &= put("c2b/a/b/cpu.max", "400000 100000\n");
    expect_cpus("c2b", "0::/a/b\n", 64, 1, "v2: the parent's 1 CPU under the child's 4");
    ok &= put("c2c/a/cpu.max", "50000 100000\n");
    expect_cpus("c2c", "0::/a\n", 64, 1, "v2: half a CPU is 1");
    ok &= put("c2d/a/cpu.max", "300001 100000\n");
    expect_cpus("c2d", "0::/a\n", 64, 4, "v2: a microsecond past 3 CPUs is 4");
    ok &= put("c2e/a/cpu.max", "garbage\n");
    ok &= put("c2e/a/b/cpu.max", "150000\n");       /* no period */
    ok &= put("c2e/a/b/c/cpu.max", "150000 0\n");   /* a zero period */
    ok &= put("c2e/a/b/c/d/cpu.max", "");
    expect_cpus("c2e", "0::/a/b/c/d\n", 64, 64, "v2: garbage, no period, a zero period and "
                "an empty file are no quotas");
    ok &= put("c2f/a/cpu.max", "9223372036854775807 1\n");
    expect_cpus("c2f", "0::/a\n", 64, 64, "v2: 2^63 - 1 CPUs is no limit");
    ok &= put("c2f/a/b/cpu.max", "99999999999999999999999 100000\n");
    expect_cpus("c2f", "0::/a/b\n", 64, 64, "v2: a quota past 2^63 is no limit");
    ok &= put("c2g/cpu.max", "200000 100000\n");   /* the root of the tree a namespace shows */
    expect_cpus("c2g", "0::/\n", 64, 2, "v2: \"0::/\" reads the root's own file");
    ok &= put("c1a/cpu/docker/cpu.cfs_quota_us", "250000\n");
    ok &= put("c1a/cpu/docker/cpu.cfs_period_us", "100000\n");
    ok &= put("c1a/cpu/docker/abc/cpu.cfs_quota_us", "-1\n");
    ok &= put("c1a/cpu/docker/abc/cpu.cfs_period_us", "100000\n");
    expect_cpus("c1a", "4:cpu,cpuacct:/docker/abc\n", 64, 3, "v1: the parent's 2.5 CPUs "
                "(3) under the group's -1");
    expect_cpus("c1a", "4:cpuacct,cpu:/docker\n", 64, 3, "v1: cpu second in the list");
    expect_cpus("c1a", "4:cpuset:/docker\n3:cpuacct:/docker\n", 64, 64, "v1: cpuset and "
                "cpuacct are not cpu");
    ok &= put("c1b/cpu/x/cpu.cfs_quota_us", "100000\n");   /* no period file beside it */
    expect_cpus("c1b", "4:cpu:/x\n", 64, 64, "v1: a quota without its period is no limit");
    ok &= put("c1c/u/cpu.max", "300000 100000\n");
    ok &= put("c1c/cpu/m/cpu.cfs_quota_us", "200000\n");
    ok &= put("c1c/cpu/m/cpu.cfs_period_us", "100000\n");
    expect_cpus("c1c", "0::/u\n4:cpu:/m\n", 64, 2, "hybrid: version 1's 2 CPUs under "
                "version 2's 3");
    ok &= put("c1d/outside/cpu.max", "100000 100000\n");
    expect_cpus("c1d", "0::/../outside\n", 64, 64, "a path with \"..\": no quota read");
    check_true(ok, "cgroup: the fake trees of CPU quotas written (a file not written would "
               "pass as no quota)");
}

/* os_memory_limit and os_usable_cpus on this machine: os_memory_limit is the least of the
 * physical memory, the real cgroup files (os_cgroup_memory_limit over /proc/self/cgroup)
 * and RLIMIT_AS; os_usable_cpus counts the affinity mask, and os_quota_cpus that count
 * under the real cgroups' CPU quota (os_cgroup_cpu_limit). */
static void test_this_machine(void) {
    size_t physical = SIZE_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (unsigned long)pages <= SIZE_MAX / (unsigned long)page)
        physical = (size_t)pages * (size_t)page;   /* as os_memory_limit: no overflow */
    size_t size = 0;
    char *text = check_read_file("/proc/self/cgroup", &size);
    size_t cgroup = text ? os_cgroup_memory_limit(text, "/sys/fs/cgroup", physical) : physical;
    free(text);
    struct rlimit address_space;   /* ulimit -v */
    if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY &&
        address_space.rlim_cur < cgroup)
        cgroup = (size_t)address_space.rlim_cur;
    size_t limit = os_memory_limit(7), want = cgroup == SIZE_MAX ? 7 : cgroup;
    check_true(limit == want, "os_memory_limit: %zu bytes, the least of the physical memory, "
               "the cgroups' and ulimit -v's (expected %zu)", limit, want);
    int cpus = os_usable_cpus();
#if defined(__linux__)
    cpu_set_t mask, one;
    if (!check_true(sched_getaffinity(0, sizeof mask, &mask) == 0, "sched_getaffinity"))
        return;
    check_true(cpus == CPU_COUNT(&mask), "os_usable_cpus: %d, the affinity mask's %d", cpus,
               CPU_COUNT(&mask));
    size_t quota = (size_t)CPU_COUNT(&mask);
    text = check_read_file("/proc/self/cgroup", &size);
    if (text) quota = os_cgroup_cpu_limit(text, "/sys/fs/cgroup", quota);
    free(text);
    check_true(os_quota_cpus() == (int)quota, "os_quota_cpus: %d, the affinity mask's %d "
               "under the cgroups' CPU quota (expected %zu)", os_quota_cpus(),
               CPU_COUNT(&mask), quota);
    int first = 0;
    while (!CPU_ISSET(first, &mask)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {   /* a sandbox may refuse it */
        char why[160];
        snprintf(why, sizeof why, "os_usable_cpus pinned to one CPU: sched_setaffinity "
                 "refused (%s)", strerror(errno));
        check_skip(why);
        return;
    }
    int pinned = os_usable_cpus();
    int back = sched_setaffinity(0, sizeof mask, &mask) == 0 ? os_usable_cpus() : -1;
    check_true(pinned == 1 && back == cpus, "os_usable_cpus: 1 pinned to CPU %d, %d again "
               "after (got %d, %d)", first, cpus, pinned, back);
#else
    check_true(cpus >= 1, "os_usable_cpus: %d", cpus);
#endif
}

/* ---- the thread pool ---- */

/* One loop's record: how often each job ran, on which thread and when. */
typedef struct {
    int n_jobs;
    _Atomic int *runs;    /* (n_jobs,) times job j ran */
    _Atomic int *thread;  /* (n_jobs,) the tag of the thread that ran job j */
    _Atomic long *when;   /* (n_jobs,) the clock's value as job j ran */
    _Atomic long clock;   /* one tick a job run, over every thread */
    _Atomic int stray;    /* jobs run with an index outside 0 .. n_jobs-1 */
} Record;

static _Atomic int tags_given;   /* the thread tags handed out so far */
static _Thread_local int tag;    /* this thread's tag, 0 until thread_tag gives one */

/* A number for the calling thread, the same at every call, unlike any other thread's. */
static int thread_tag(void) {
    if (!tag) tag = atomic_fetch_add(&tags_given, 1) + 1;
    return tag;
}

static Record *record_new(int cap) {
    Record *r = calloc(1, sizeof *r);
    if (r) {
        r->runs = calloc((size_t)cap + 1, sizeof *r->runs);
        r->thread = calloc((size_t)cap + 1, sizeof *r->thread);
        r->when = calloc((size_t)cap + 1, sizeof *r->when);
    }
    return r;
}

static void record_free(Record *r) {
    if (!r) return;
    free(r->runs);
    free(r->thread);
    free(r->when);
    free(r);
}

/* Empties r for a loop of n_jobs jobs (never while one runs). */
static void record_reset(Record *r, int n_jobs) {
    r->n_jobs = n_jobs;
    for (int j = 0; j < n_jobs; j++) {
        atomic_store(&r->runs[j], 0);
        atomic_store(&r->thread[j], 0);
        atomic_store(&r->when[j], 0);
    }
    atomic_store(&r->clock, 0);
    atomic_store(&r->stray, 0);
}

/* The job of every loop here: it records itself. */
static void record_job(void *ctx, int j) {
    Record *r = ctx;
    if (j < 0 || j >= r->n_jobs) {
        atomic_fetch_add(&r->stray, 1);
        return;
    }
    atomic_fetch_add(&r->runs[j], 1);
    atomic_store(&r->thread[j], thread_tag());
    atomic_store(&r->when[j], atomic_fetch_add(&r->clock, 1));
}

/* record_job, then for the first jobs a yield of the core: on one CPU, where the jobs
 * would all be done before a worker runs, a worker then gets the chance to claim one
 * (which a loop that must stay on main never lets it). */
static void record_job_yield(void *ctx, int j) {
    record_job(ctx, j);
    if (j < 4) sched_yield();
}

/* The jobs that did not run exactly once (stray ones included). */
static int not_once(const Record *r) {
    int bad = atomic_load(&r->stray);
    for (int j = 0; j < r->n_jobs; j++) bad += atomic_load(&r->runs[j]) != 1;
    return bad;
}

/* 1 if every job ran on thread `who`, in order. */
static int all_on(const Record *r, int who) {
    for (int j = 0; j < r->n_jobs; j++)
        if (atomic_load(&r->thread[j]) != who ||
            (j > 0 && atomic_load(&r->when[j]) < atomic_load(&r->when[j - 1])))
            return 0;
    return 1;
}

/* The pool's order (pool_claim): main takes jobs from the front, the workers from the
 * back, so main ran jobs 0 .. m-1 in that order, and the workers the rest, each of them
 * going down. Returns 1 if so; *main_jobs gets m. */
static int front_and_back(const Record *r, int main_tag, int *main_jobs) {
    int m = 0;
    while (m < r->n_jobs && atomic_load(&r->thread[m]) == main_tag) m++;
    *main_jobs = m;
    if (!all_on(&(Record){.n_jobs = m, .thread = r->thread, .when = r->when}, main_tag))
        return 0;
    for (int j = m; j < r->n_jobs; j++) {
        int who = atomic_load(&r->thread[j]);
        if (who == main_tag) return 0;
        for (int later = j + 1; later < r->n_jobs; later++)
            if (atomic_load(&r->thread[later]) == who &&
                atomic_load(&r->when[later]) > atomic_load(&r->when[j]))
                return 0;   /* a worker went up */
    }
    return 1;
}

/* What a loop run inside pool_run checks, per job count. */
typedef struct {
    int main_tag;
    Record *record;
    int counts[12];
    int n_counts;
} PoolCase;

/* Inside pool_run: each count with enough work (on the pool: exactly once, front and
 * back) and with too little (on main alone, in order); more jobs than the ticket holds
 * run on main. */
static void pool_loops_body(void *ctx) {
    PoolCase *c = ctx;
    Record *r = c->record;
    check_true(thread_tag() == c->main_tag, "pool_run: the body runs on the calling thread");
    for (int i = 0; i < c->n_counts; i++) {
        int n = c->counts[i], m = 0;
        record_reset(r, n);
        pool_parallel_for(record_job, r, n, (double)POOL_MIN_WORK);
        int bad = not_once(r), order = front_and_back(r, c->main_tag, &m);
        check_true(bad == 0 && order, "pool, %d jobs, work POOL_MIN_WORK: each once (%d not), "
                   "main's the first %d in order, the workers' the rest going down", n, bad, m);
        record_reset(r, n);
        pool_parallel_for(record_job_yield, r, n, (double)POOL_MIN_WORK - 1);
        bad = not_once(r);
        check_true(bad == 0 && all_on(r, c->main_tag), "pool, %d jobs, work POOL_MIN_WORK - 1: "
                   "each once (%d not), all on main in order", n, bad);
    }
    int n = TICKET_JOBS + 1;
    record_reset(r, n);
    pool_parallel_for(record_job_yield, r, n, (double)POOL_PARALLEL_MIN_MACS * 1e3);
    int bad = not_once(r);
    check_true(bad == 0 && all_on(r, c->main_tag), "pool, %d jobs (more than a ticket holds): "
               "each once (%d not), all on main in order", n, bad);
}

#define REPEATS 200   /* rounds of the repeated loop */
#define REPEAT_JOBS 64

/* The same loop REPEATS times inside one pool_run, as the forward pass repeats its
 * matmuls: every round each job once, in the pool's order. How many jobs stayed on the
 * thread of the round before is measured and shown, not checked: pool.c says "mostly",
 * which no scheduler promises. */
static void pool_repeat_body(void *ctx) {
    PoolCase *c = ctx;
    Record *r = c->record;
    int last[REPEAT_JOBS] = {0}, bad_rounds = 0, same = 0, compared = 0;
    for (int round = 0; round < REPEATS; round++) {
        int m;
        record_reset(r, REPEAT_JOBS);
        pool_parallel_for(record_job, r, REPEAT_JOBS, (double)POOL_PARALLEL_MIN_MACS);
        bad_rounds += not_once(r) != 0 || !front_and_back(r, c->main_tag, &m);
        for (int j = 0; j < REPEAT_JOBS; j++) {
            int who = atomic_load(&r->thread[j]);
            if (round > 0) {
                same += who == last[j];
                compared++;
            }
            last[j] = who;
        }
    }
    check_true(bad_rounds == 0, "pool, %d jobs %d times: every round each job once in the "
               "pool's order (%d rounds not); %.0f%% of jobs on the thread of the round "
               "before", REPEAT_JOBS, REPEATS, bad_rounds,
               compared ? 100.0 * same / compared : 100.0);
}

/* A loop started from inside a job: on that job's thread alone. */
typedef struct {
    Record *outer;
    Record *inner[16];    /* one a job of the outer loop */
    int inner_on_own;     /* outer jobs whose inner loop ran whole on their own thread */
    _Atomic int nested_body;   /* tag of the thread a pool_run inside a job ran its body on */
    _Atomic int nested_ok;     /* jobs whose pool_run ran its body on their own thread */
} Nest;

#define NEST_INNER 5   /* jobs of each inner loop */

static void nested_run_body(void *ctx) {
    atomic_store(&((Nest *)ctx)->nested_body, thread_tag());
}

static void nest_job(void *ctx, int j) {
    Nest *s = ctx;
    record_job(s->outer, j);
    record_reset(s->inner[j], NEST_INNER);
    pool_parallel_for(record_job, s->inner[j], NEST_INNER, (double)POOL_PARALLEL_MIN_MACS * 1e3);
    if (j == 0) {   /* one job's pool_run: just its body, here */
        atomic_store(&s->nested_body, 0);
        pool_run(nested_run_body, s);
        atomic_store(&s->nested_ok, atomic_load(&s->nested_body) == thread_tag());
    }
}

/* Checks a nested loop's record: each outer and inner job once, the inner ones on their
 * outer job's thread in order. */
static void check_nest(Nest *s, int n, const char *where) {
    int bad = not_once(s->outer), inner_bad = 0;
    for (int j = 0; j < n; j++)
        inner_bad += not_once(s->inner[j]) != 0 ||
                     !all_on(s->inner[j], atomic_load(&s->outer->thread[j]));
    check_true(bad == 0 && inner_bad == 0 && atomic_load(&s->nested_ok), "%s: a loop inside "
               "each of %d jobs ran whole on its job's thread, in order (%d outer not once, "
               "%d inner loops not so); a pool_run inside a job ran its body there", where, n,
               bad, inner_bad);
}

static void pool_nest_body(void *ctx) {
    Nest *s = ctx;
    int n = 16;
    record_reset(s->outer, n);
    atomic_store(&s->nested_ok, 0);
    pool_parallel_for(nest_job, s, n, (double)POOL_PARALLEL_MIN_MACS);
    check_nest(s, n, "pool");
}

static void nested_pool_run_body(void *ctx) {
    int *ran = ctx;
    *ran = thread_tag();
}

static void pool_outer_body(void *ctx) {
    int *inner = ctx;
    pool_run(nested_pool_run_body, inner);   /* already on the pool: just the body, here */
}

/* The child's part: every pool check with pool_threads() threads (OMP_NUM_THREADS). */
static int test_pool_child(void) {
    alarm(CHILD_SECONDS);
    int threads = pool_threads(), main_tag = thread_tag();
    const char *asked = getenv("OMP_NUM_THREADS");
    check_true(asked && threads == strtol(asked, NULL, 10), "pool_threads: %d, as "
               "OMP_NUM_THREADS asks (%s)", threads, asked ? asked : "unset");
    Record *r = record_new(TICKET_JOBS + 1);
    Nest nest = {.outer = record_new(16)};
    int made = r != NULL && r->runs && r->thread && r->when && nest.outer && nest.outer->runs;
    for (int j = 0; j < 16; j++) {
        nest.inner[j] = record_new(NEST_INNER);
        made = made && nest.inner[j] && nest.inner[j]->runs;
    }
    if (!check_true(made, "pool: the records allocated")) goto done;
    /* 0, 1, the thread counts around threads, and many; each once */
    const int wanted[] = {0, 1, 2, 3, threads - 1, threads, threads + 1, 3 * threads + 1,
                          1000, TICKET_JOBS};
    PoolCase c = {.main_tag = main_tag, .record = r, .n_counts = 0};
    for (int i = 0; i < 10; i++) {
        int seen = 0;
        for (int k = 0; k < c.n_counts; k++) seen |= c.counts[k] == wanted[i];
        if (!seen) c.counts[c.n_counts++] = wanted[i];
    }
    /* outside pool_run: an OpenMP loop from POOL_PARALLEL_MIN_MACS, else the caller alone
     * (without OpenMP the caller alone either way) */
    for (int i = 0; i < c.n_counts; i++) {
        int n = c.counts[i];
        record_reset(r, n);
        pool_parallel_for(record_job_yield, r, n, (double)POOL_PARALLEL_MIN_MACS - 1);
        int bad = not_once(r);
        check_true(bad == 0 && all_on(r, main_tag), "outside pool_run, %d jobs, work "
                   "POOL_PARALLEL_MIN_MACS - 1: each once (%d not), all on the caller in order",
                   n, bad);
        record_reset(r, n);
        pool_parallel_for(record_job, r, n, (double)POOL_PARALLEL_MIN_MACS);
        bad = not_once(r);
#ifdef _OPENMP
        int placed = 1;   /* an OpenMP loop: any thread */
#else
        int placed = all_on(r, main_tag);
#endif
        check_true(bad == 0 && placed, "outside pool_run, %d jobs, work POOL_PARALLEL_MIN_MACS:"
                   " each once (%d not)%s", n, bad,
#ifdef _OPENMP
                   ""
#else
                   ", all on the caller in order (no OpenMP)"
#endif
                   );
    }
    atomic_store(&nest.nested_ok, 0);
    record_reset(nest.outer, 16);
    pool_parallel_for(nest_job, &nest, 16, (double)POOL_PARALLEL_MIN_MACS);
    check_nest(&nest, 16, "outside pool_run");
    pool_run(pool_loops_body, &c);
    pool_run(pool_repeat_body, &c);   /* a second pool_run: the pool starts again */
    pool_run(pool_nest_body, &nest);
    int inner = 0;
    pool_run(pool_outer_body, &inner);
    check_true(inner == main_tag, "pool_run inside pool_run's body: the inner body on the "
               "calling thread");
done:
    record_free(r);
    record_free(nest.outer);
    for (int j = 0; j < 16; j++) record_free(nest.inner[j]);
    return check_summary("test_platform_pool");
}

/* pool_set_threads: 1 .. the cores, whatever is asked. */
static void test_set_threads(void) {
    int cores = os_usable_cpus();
    const int asked[] = {-1, 0, 1, 2, 3, 8};
    for (int i = 0; i < 6; i++) {
        int want = asked[i] < 1 ? 1 : asked[i] > cores ? cores : asked[i];
        int got = pool_set_threads(asked[i]), now = pool_threads();
        check_true(got == want && now == want, "pool_set_threads(%d): %d threads (expected "
                   "%d of %d cores; pool_threads %d)", asked[i], got, want, cores, now);
    }
}

/* Runs this program's pool checks in a child with OMP_NUM_THREADS=threads and records
 * each of its checks here, named by the thread count. */
static void test_pool_threads(const char *self, int threads) {
    char command[1024];
    if (strchr(self, '\'') || !strchr(self, '/')) {
        check_true(0, "pool, %d threads: this program's path (%s) can be run again", threads,
                   self);
        return;
    }
    snprintf(command, sizeof command, "OMP_NUM_THREADS=%d '%s' " CHILD_FLAG, threads, self);
    char *out = NULL, *err = NULL;
    int rc = check_run(command, &out, &err), checks = 0, summary = 0;
    for (char *line = out; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (strncmp(line, "ok - ", 5) == 0 || strncmp(line, "FAIL - ", 7) == 0) {
            int ok = line[0] == 'o';
            check_true(ok, "%d threads: %s", threads, line + (ok ? 5 : 7));
            checks++;
        } else if (strncmp(line, "test_platform_pool: ", 20) == 0) {
            summary = 1;
        } else {
            printf("  %s\n", line);
        }
        line = end ? end + 1 : line + strlen(line);
    }
    check_true(rc == 0 && summary && checks > 0, "%d threads: the child ran %d checks and "
               "exited %d (-1: a signal ended it, SIGALRM after %d s if it hung)%s%s", threads,
               checks, rc, CHILD_SECONDS, err && *err ? ", stderr: " : "", err ? err : "");
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], CHILD_FLAG) == 0) return test_pool_child();
    const char *tmp = getenv("TMPDIR");
    snprintf(tree, sizeof tree, "%s/test_platform_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (check_true(mkdtemp(tree) != NULL, "a temporary folder for the fake cgroup trees")) {
        test_cgroup_v2();
        test_cgroup_v1();
        test_cgroup_paths();
        test_cgroup_cpu();
        char command[512];
        snprintf(command, sizeof command, "rm -rf '%s'", tree);
        check_run(command, NULL, NULL);
    }
    test_this_machine();
    test_set_threads();
    const int threads[] = {1, 2, 3, 8};
    for (int i = 0; i < 4; i++) test_pool_threads(argv[0], threads[i]);
    return check_summary("test_platform");
}
