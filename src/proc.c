/* SPDX-License-Identifier: MIT */
/*
 * Process identity: /proc/<pid>/stat read once, this process's own
 * identity cached, and the judge of whether a recorded process lives.
 *
 * What is read (a procfs line, not a vigil file):
 *
 *   /proc/<pid>/stat   "pid (comm) S ppid ... starttime ..." fields 1..52;
 *                      field 3 the state, field 22 the start time in clock
 *                      ticks since boot. comm (field 2) may hold spaces and
 *                      ')' itself, so fields are counted from the last ')'.
 *   /proc/<pid>/task   one entry per thread of the process
 *   /proc/self/ns/pid  its inode names this process's pid namespace
 *   /proc/self         a link to this process's pid, as this /proc numbers it
 *
 * What vigil records of a process elsewhere (heartbeat slots' start_time
 * and owner_ns, the election lock word, the lease store's lock words) is
 * the pid with the start time, or some low bits of it, against PID reuse,
 * and where there is room the pid namespace, since a pid names a process
 * only within one.
 */
#define _GNU_SOURCE
#include "proc_internal.h"


#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- /proc/<pid>/stat ---------------------------------------------------- */

static int read_stat(const char *path, char *state, uint64_t *start)
{
    char buf[1024];
    /* O_NOFOLLOW applies to the last component, "stat", which is never a
     * link; /proc/self before it still resolves. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n;
    do
        n = read(fd, buf, sizeof(buf) - 1);
    while (n < 0 && errno == EINTR);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold spaces
     * and ')' itself, so fields are counted from the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return -EIO;
    char st = p[2];
    p += 2; /* field 3 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EIO;
        p++;
    }
    /* Digits only: strtoull would also take a sign or leading space. */
    if (*p < '0' || *p > '9')
        return -EIO;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || (*end != ' ' && *end != '\n' && *end != '\0'))
        return -EIO;
    *state = st;
    *start = v;
    return 0;
}

int vigil_proc_stat(uint32_t pid, char *state, uint64_t *start)
{
    if (pid == 0 || pid > INT_MAX)
        return -EINVAL;
    char path[32];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    return read_stat(path, state, start);
}

int vigil_proc_start_time(uint32_t pid, uint64_t *out)
{
    char state;
    return vigil_proc_stat(pid, &state, out);
}

/* ---- this process -------------------------------------------------------- */

/*
 * This process's own pid, start time and pid namespace, computed once and
 * cached process-wide: getpid() is a system call (glibc keeps no cache),
 * and a register, an acquire or an election that asked for them every time
 * would spend microseconds on them alone (a getpid is 1.5 us on a
 * microVM), more than the whole rest of the call.
 *
 * A forked child is a different process and must never use its parent's
 * values. The cache lives in a page marked MADV_WIPEONFORK: the kernel
 * gives the child of any fork or clone without CLONE_VM a zero page, which
 * reads as "not computed", and the child works out its own. A
 * pthread_atfork child handler clears the cache as well, which covers
 * kernels without the flag (before 4.14), where the cache is a static
 * one; there, a child made by a raw clone(2) or fork system call, which
 * runs no atfork handlers, would inherit its parent's values, and vigil
 * does not support being called from one.
 *
 * The start time is read from /proc/self/stat rather than from
 * /proc/<getpid()>/stat: in a /proc mounted from another pid namespace the
 * second names another process, while /proc/self is always this one.
 *
 * Each value is one word with VALID set once computed; threads that race
 * to fill it compute the same value, so the last store wins harmlessly.
 * Relaxed: each word is self-contained.
 */
#define SELF_VALID (UINT64_C(1) << 63)

struct self_cache {
    _Atomic uint64_t pid, ns, start;
    _Atomic uint64_t lock; /* vigil_self_lock_word, 0 not yet (a lock word never is 0) */
};

static struct self_cache self_static;
static struct self_cache *_Atomic self_words;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void self_forget(void)
{
    struct self_cache *c = atomic_load_explicit(&self_words, memory_order_relaxed);
    if (c) {
        /* The child has one thread: nothing races these stores. */
        atomic_store_explicit(&c->pid, 0, memory_order_relaxed);
        atomic_store_explicit(&c->ns, 0, memory_order_relaxed);
        atomic_store_explicit(&c->start, 0, memory_order_relaxed);
        atomic_store_explicit(&c->lock, 0, memory_order_relaxed);
    }
}

static void self_init(void)
{
    struct self_cache *c = &self_static;
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = pg > 0 ? (size_t)pg : 4096;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
#ifdef MADV_WIPEONFORK
        if (madvise(p, len, MADV_WIPEONFORK) == 0)
            c = p; /* never unmapped: one page for the process's life */
        else
#endif
            munmap(p, len);
    }
    if (pthread_atfork(NULL, NULL, self_forget) != 0 && c == &self_static)
        return; /* no way to forget: no cache, every call asks the kernel */
    /* Release: pairs with the acquire in cache(), for the page's mapping. */
    atomic_store_explicit(&self_words, c, memory_order_release);
}

/* The cache, or NULL when there can be none. */
static inline struct self_cache *cache(void)
{
    struct self_cache *c = atomic_load_explicit(&self_words, memory_order_acquire);
    if (__builtin_expect(c == NULL, 0)) {
        pthread_once(&self_once, self_init);
        c = atomic_load_explicit(&self_words, memory_order_acquire);
    }
    return c;
}

static uint64_t compute_pid(void)
{
    return (uint32_t)getpid();
}

static uint64_t compute_ns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static uint64_t compute_start(void)
{
    char state;
    uint64_t t;
    return read_stat("/proc/self/stat", &state, &t) == 0 ? t : 0;
}

static uint64_t cached(_Atomic uint64_t *w, uint64_t (*compute)(void))
{
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    if (__builtin_expect(!(v & SELF_VALID), 0)) {
        v = SELF_VALID | (compute() & ~SELF_VALID);
        atomic_store_explicit(w, v, memory_order_relaxed);
    }
    return v & ~SELF_VALID;
}

uint32_t vigil_self_pid(void)
{
    struct self_cache *c = cache();
    return (uint32_t)(c ? cached(&c->pid, compute_pid) : compute_pid());
}

uint64_t vigil_self_pidns(void)
{
    struct self_cache *c = cache();
    return c ? cached(&c->ns, compute_ns) : compute_ns() & ~SELF_VALID;
}

uint64_t vigil_self_start_time(void)
{
    struct self_cache *c = cache();
    return c ? cached(&c->start, compute_start) : compute_start() & ~SELF_VALID;
}

/* ---- is it alive? -------------------------------------------------------- */

/* Is /proc this process's namespace's? In another's, /proc/self does not
 * resolve to our own pid. */
static bool proc_is_ours(void)
{
    char buf[32];
    ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *end;
    unsigned long v = strtoul(buf, &end, 10);
    return *end == '\0' && v == (unsigned long)vigil_self_pid();
}

/* A zombie's threads: /proc shows a process as a zombie as soon as its
 * main thread has exited, even while its other threads still run (the
 * main thread called pthread_exit). Such a process is alive. Only when
 * the task list holds the main thread alone has the whole process exited.
 * 0 dead, 1 alive, -errno unknown. */
static int zombie_verdict(uint32_t pid)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/%u/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 0 : -errno; /* ENOENT: reaped meanwhile */
    int tasks = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && tasks < 2)
        if (de->d_name[0] != '.')
            tasks++;
    closedir(d);
    return tasks >= 2;
}

/*
 * The verdicts, in the order they are tried:
 *
 *   pid 0                                -EINVAL
 *   ns recorded, ours unknown            -ENOENT (no /proc: cannot tell)
 *   ns recorded and not ours             -EREMOTE (its pid means nothing here)
 *   pid > INT_MAX                        0: no process has that id
 *   kill(pid, 0) == ESRCH                0: gone
 *   kill(pid, 0) other than 0 or EPERM   -errno
 *   /proc/<pid>/stat unreadable          0 if kill now says ESRCH, else -errno
 *   start time recorded and different    0: the pid belongs to another process
 *   state Z, X or x, other threads run   1: only its main thread has exited
 *   state Z, X or x, no other thread     0: exited, only waits to be reaped
 *   anything else                        1
 *
 * A verdict of 0 that rests on /proc (zombie, start time) is given only
 * after checking that /proc is this process's own namespace's (readlink
 * of /proc/self is our pid); a /proc mounted from another namespace names
 * other processes by the same numbers, and then the answer is -EREMOTE.
 * kill(2) needs no /proc: ESRCH is conclusive even where /proc is absent.
 */
int vigil_pid_judge(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask)
{
    if (pid == 0)
        return -EINVAL;
    if (ns_mask != 0) {
        /* A registrant that recorded no namespace may have been in any:
         * its pid cannot be judged here, only called unknown. */
        if ((ns & ns_mask) == 0)
            return -EREMOTE;
        uint64_t mine = vigil_self_pidns();
        if (mine == 0)
            return -ENOENT; /* no /proc: cannot tell which namespace we are in */
        if ((mine & ns_mask) != (ns & ns_mask))
            return -EREMOTE;
    }
    if (pid > INT_MAX)
        return 0;
    if (kill((pid_t)pid, 0) < 0) {
        if (errno == ESRCH)
            return 0;
        if (errno != EPERM)
            return -errno;
    }
    char state;
    uint64_t now_start;
    int err = vigil_proc_stat(pid, &state, &now_start);
    if (err < 0) {
        /* It may have exited between the two looks; or there is no /proc
         * (or it hides the pid) and nothing more can be said than that it
         * exists. */
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return 0;
        return err;
    }
    bool reused = (start & start_mask) != 0 && (now_start & start_mask) != (start & start_mask);
    if (!reused) {
        /* 'x' is the dead state of kernels 2.6.33 to 3.13. */
        if (state != 'Z' && state != 'X' && state != 'x')
            return 1;
        int z = zombie_verdict(pid);
        if (z != 0)
            return z;
    }
    return proc_is_ours() ? 0 : -EREMOTE;
}

bool vigil_holder_dead(uint32_t pid, uint64_t start, uint64_t start_mask, uint64_t ns, uint64_t ns_mask)
{
    if (pid == 0)
        return true; /* not a word any locker writes: a scribble */
    /* Every thread of this process writes the same word (the cache above
     * holds it constant for the process's life), so a word with our pid
     * and our namespace is a sibling's exactly when its start tag is ours;
     * with another tag it is the pid's previous owner's. */
    if (pid == vigil_self_pid() && ((ns & ns_mask) == 0 || (vigil_self_pidns() & ns_mask) == (ns & ns_mask)))
        return (start & start_mask) != (vigil_self_start_time() & start_mask);
    return vigil_pid_judge(pid, start, start_mask, ns, ns_mask) == 0;
}

/* ---- lock words ---------------------------------------------------------- */

/* Pid namespace inodes come from procfs: the initial namespace has a fixed
 * one, every other is handed out upwards from PROC_DYNAMIC_FIRST, lowest
 * free first, so the offset stays small. */
#define PIDNS_INIT_INODE   UINT64_C(0xeffffffc)
#define PIDNS_DYNAMIC_BASE UINT64_C(0xf0000000)

uint32_t vigil_pidns_code(uint64_t inode)
{
    if (inode == PIDNS_INIT_INODE)
        return 1;
    if (inode >= PIDNS_DYNAMIC_BASE && inode - PIDNS_DYNAMIC_BASE < VIGIL_LOCK_NS_MASK - 1)
        return (uint32_t)(inode - PIDNS_DYNAMIC_BASE) + 2;
    return 0;
}

uint64_t vigil_lock_word_of(uint32_t pid, uint64_t ns_inode, uint64_t start)
{
    if (pid == 0 || pid > VIGIL_LOCK_PID_MASK)
        return 0;
    return VIGIL_LOCK_HELD | (uint64_t)pid << VIGIL_LOCK_PID_SHIFT |
           (uint64_t)vigil_pidns_code(ns_inode) << VIGIL_LOCK_NS_SHIFT | (start & VIGIL_LOCK_START_MASK);
}

void vigil_self_id(struct vigil_self_id *out)
{
    struct self_cache *c = cache();
    if (c) {
        /* Relaxed, as every cached word: each is this process's constant. */
        uint64_t pid = atomic_load_explicit(&c->pid, memory_order_relaxed);
        uint64_t start = atomic_load_explicit(&c->start, memory_order_relaxed);
        uint64_t ns = atomic_load_explicit(&c->ns, memory_order_relaxed);
        uint64_t lock = atomic_load_explicit(&c->lock, memory_order_relaxed);
        if (__builtin_expect((pid & start & ns & SELF_VALID) && lock != 0, 1)) {
            *out = (struct vigil_self_id){ (uint32_t)(pid & ~SELF_VALID), start & ~SELF_VALID,
                                           ns & ~SELF_VALID, lock };
            return;
        }
    }
    *out = (struct vigil_self_id){ vigil_self_pid(), vigil_self_start_time(), vigil_self_pidns(),
                                   vigil_self_lock_word() };
}

uint64_t vigil_self_lock_word(void)
{
    /* Cached whole: every slot lock and unlock asks for it. Relaxed, as
     * the other cached words: each is this process's constant. */
    struct self_cache *c = cache();
    uint64_t w = c ? atomic_load_explicit(&c->lock, memory_order_relaxed) : 0;
    if (__builtin_expect(w != 0, 1))
        return w;
    w = vigil_lock_word_of(vigil_self_pid(), vigil_self_pidns(), vigil_self_start_time());
    if (c)
        atomic_store_explicit(&c->lock, w, memory_order_relaxed);
    return w;
}

/* The "dev inode" pair of the line of a maps file that covers addr (addr
 * != 0), or whether any line carries `want` (addr == 0): 1 found, 0 read to
 * the end without finding it, -errno. A line is
 *   "start-end perms offset major:minor inode   path". */
static int maps_scan(const char *path, uintptr_t addr, char *key, size_t keylen, const char *want)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[4096 + 128];
    int found = 0, lines = 0;
    while (!found && fgets(line, sizeof(line), f)) {
        size_t n = strlen(line);
        bool whole = n > 0 && line[n - 1] == '\n';
        unsigned long lo, hi, ino;
        char dev[32];
        if (sscanf(line, "%lx-%lx %*s %*s %31s %lu", &lo, &hi, dev, &ino) == 4) {
            lines++;
            char k[64];
            snprintf(k, sizeof(k), "%s %lu", dev, ino);
            if (addr) {
                if (addr >= lo && addr < hi) {
                    if (ino == 0)
                        break; /* anonymous: nothing to look for */
                    snprintf(key, keylen, "%s", k);
                    found = 1;
                }
            } else if (ino != 0 && strcmp(k, want) == 0) {
                found = 1;
            }
        }
        /* A path longer than the buffer: skip the rest of its line. */
        while (!whole && fgets(line, sizeof(line), f)) {
            n = strlen(line);
            whole = n > 0 && line[n - 1] == '\n';
        }
    }
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    if (err)
        return err;
    if (!found && lines == 0)
        return -ENODATA; /* an empty maps says nothing (a kernel thread, a race with exit) */
    return found;
}

int vigil_proc_maps_file(uint32_t pid, const void *mapping)
{
    if (pid == 0 || pid > INT_MAX || !mapping)
        return -EINVAL;
    char key[64];
    int r = maps_scan("/proc/self/maps", (uintptr_t)mapping, key, sizeof(key), NULL);
    if (r <= 0)
        return r < 0 ? r : -ENOENT; /* our own mapping not found: cannot tell */
    char path[32];
    snprintf(path, sizeof(path), "/proc/%u/maps", pid);
    r = maps_scan(path, 0, NULL, 0, key);
    if (r == 0 && !proc_is_ours())
        return -EREMOTE; /* that maps file is another namespace's pid */
    return r;
}

bool vigil_lock_holder_dead(uint64_t w, const void *mapping)
{
    uint32_t pid = vigil_lock_pid(w);
    if (!(w & VIGIL_LOCK_HELD) || pid == 0)
        return true; /* not a word any holder writes: a scribble */
    uint32_t ns = vigil_lock_ns(w);
    uint32_t mine = vigil_pidns_code(vigil_self_pidns());
    /* Never judged from here: a holder we cannot see is alive. */
    if (ns == 0 || mine == 0 || ns != mine)
        return false;
    uint64_t start = vigil_lock_start(w);
    if (vigil_holder_dead(pid, start, VIGIL_LOCK_START_MASK, 0, 0))
        return true;
    /* Alive by pid and start tag. Our own pid was judged exactly (a
     * sibling thread); another may be a reused pid whose start tag
     * collides: it is the holder only if it maps the file. */
    if (!mapping || pid == vigil_self_pid())
        return false;
    return vigil_proc_maps_file(pid, mapping) == 0;
}

bool vigil_lock_judge(struct vigil_lock_wait *wait, uint64_t w, const void *mapping)
{
    bool look = mapping && wait->mapped_word != w;
    if (vigil_lock_holder_dead(w, look ? mapping : NULL))
        return true;
    if (look)
        wait->mapped_word = w; /* alive, or mapped: not asked again for this word */
    return false;
}

/* ---- lock pairs (the take and the release are inline) --------------------- */

bool vigil_pair_read(const _Atomic uint64_t *pair, uint64_t *word, uint64_t *seq)
{
    /* seq, word, seq: the word only changes together with seq (a take or a
     * take-over), so an unchanged seq around it gives the two as one
     * moment had them. Acquire and the fence: the word's load stays
     * between the two loads of seq. */
    uint64_t s1 = atomic_load_explicit(&pair[1], memory_order_acquire);
    uint64_t w = atomic_load_explicit(&pair[0], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&pair[1], memory_order_relaxed) != s1)
        return false;
    *word = w;
    *seq = s1;
    return true;
}

bool vigil_pair_take_over(_Atomic uint64_t *pair, uint64_t w, uint64_t s, uint64_t me, uint64_t *held)
{
    /* From exactly the holding judged: of several waiters one wins, and a
     * lock that changed hands since it was read (even to a holder with
     * the same word) has another seq, so the swap fails. Full barrier, as
     * vigil_pair_take. */
    uint64_t want = s + 2u;
    if (!(s & 1u) || !vigil__cas16(pair, &w, &s, me, want))
        return false;
    *held = want;
    return true;
}
