/* SPDX-License-Identifier: MIT */
/*
 * What every command shares: the one-line runtime error, the diagnosis of
 * a file that will not open, flushing, and the stop signals of the
 * long-running commands.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include "proc_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int tool_fail(const char *path, int err)
{
    fflush(stdout);
    fprintf(stderr, "vigil: %s: %s\n", tool_e(path), vigil_strerror(err));
    return EXIT_RUNTIME;
}

/* A formatted message, escaped as every human line is: its arguments
 * (names, keys, owners) may hold anything. */
void tool_vmsg(FILE *out, const char *fmt, va_list ap)
{
    char buf[4096];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    tool_esc(out, buf, sizeof(buf));
}

int tool_fail_msg(const char *path, const char *fmt, ...)
{
    fflush(stdout);
    va_list ap;
    fprintf(stderr, "vigil: %s: ", tool_e(path));
    va_start(ap, fmt);
    tool_vmsg(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_RUNTIME;
}

int tool_fail_detail(const char *path, int err, const char *fmt, ...)
{
    fflush(stdout);
    va_list ap;
    fprintf(stderr, "vigil: %s: %s (", tool_e(path), vigil_strerror(err));
    va_start(ap, fmt);
    tool_vmsg(stderr, fmt, ap);
    va_end(ap);
    fputs(")\n", stderr);
    return EXIT_RUNTIME;
}

void tool_lock_ns(uint64_t word, char *buf, size_t len)
{
    uint32_t code = vigil_lock_ns(word), mine = vigil_lock_ns(vigil_self_lock_word());
    /* The code's inverse (proc_internal.h): 1 the initial namespace. */
    uint64_t inode = code == 1 ? UINT64_C(0xeffffffc) : UINT64_C(0xf0000000) + code - 2;
    if (code == 0)
        snprintf(buf, len, "unknown");
    else
        snprintf(buf, len, "pid:[%llu], %s", (unsigned long long)inode,
                 code == mine ? "ours" : "not ours: its holder's death cannot be seen from here");
}

const char *tool_kind_name(uint32_t kind)
{
    switch (kind) {
    case VIGIL_KIND_HEARTBEAT: return "heartbeat";
    case VIGIL_KIND_BARRIER:   return "barrier";
    case VIGIL_KIND_LEASES:    return "leases";
    case VIGIL_KIND_JOURNAL:   return "journal";
    }
    return NULL;
}

static const char *kind_article(uint32_t kind)
{
    switch (kind) {
    case VIGIL_KIND_HEARTBEAT: return "a heartbeat table";
    case VIGIL_KIND_BARRIER:   return "a barrier file";
    case VIGIL_KIND_LEASES:    return "a lease store";
    case VIGIL_KIND_JOURNAL:   return "a reclaim journal";
    }
    return "a vigil file";
}

/* The header's first 8 bytes, to tell "no magic" from "unreadable". */
static int read_magic(const char *path, unsigned char magic[8])
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    ssize_t n = pread(fd, magic, 8, 0);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (err == 0 && n != 8)
        err = VIGIL_EBADFILE;
    return err;
}

static const char *type_name(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Which permission is missing, and whose: the useful part first. */
static int fail_permission(const char *path, bool writing)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == EACCES)
            return tool_fail_msg(path, "no search (x) permission on a directory on the way to it (running "
                                       "as uid %u)", (unsigned)geteuid());
        return tool_fail(path, -errno);
    }
    bool r = faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0;
    bool w = faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
    const char *need = !writing ? "read" : !r && !w ? "read and write" : !r ? "read" : "write";
    return tool_fail_msg(path, "no %s permission (mode %04o, owner uid %u gid %u; running as uid %u gid %u)",
                         need, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
                         (unsigned)geteuid(), (unsigned)getegid());
}

/* A file that is not there: said with how to make it (vigil makes none
 * implicitly, so a service restarted forever on "No such file" would
 * never learn it), or that its directory is missing first. */
static int fail_missing(const char *path, uint32_t want)
{
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char dir[4096];
        struct stat st;
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
        if (stat(dir, &st) != 0 && errno == ENOENT)
            return tool_fail_msg(path, "No such file or directory, nor its directory %s: make that first, "
                                       "then the file with `vigil create`", dir);
    }
    const char *how = want == VIGIL_KIND_BARRIER   ? " --kind barrier --table TABLE"
                      : want == VIGIL_KIND_LEASES  ? " --kind leases --capacity N"
                      : want == VIGIL_KIND_JOURNAL ? " --kind journal --table TABLE"
                                                   : " --capacity N";
    return tool_fail_msg(path, "No such file or directory: make it with `vigil create %s%s`", path, how);
}

int tool_fail_file(const char *path, int err, uint32_t want, bool writing)
{
    struct stat st;
    if (err == -ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return tool_fail_msg(path, "a symbolic link: vigil opens a file only by its own name, never "
                                   "through a link");
    if (err == -EACCES || err == -EPERM)
        return fail_permission(path, writing);
    if (err == VIGIL_EUNTRUSTED)
        return tool_fail_untrusted(path);
    if (err == -ENOENT && want != 0)
        return fail_missing(path, want);
    if ((err == -ENOSPC || err == -EDQUOT) && lstat(path, &st) == 0)
        return tool_fail_space(path, err, (uint64_t)st.st_size, false);
    /* The file layer refuses a file with holes it cannot allocate (the
     * same errno as a processor without 16-byte CAS, hence the look). */
    if (err == -EOPNOTSUPP && writing && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size)
        return tool_fail_msg(path, "made by an older vigil, its pages not yet allocated, and its file system "
                                   "cannot allocate them (no fallocate): re-create it (vigil create writes "
                                   "every page), or keep it on a tmpfs");
    if (err != VIGIL_EBADFILE && err != VIGIL_ECAPACITY)
        return tool_fail(path, err);

    if (lstat(path, &st) != 0)
        return tool_fail(path, -errno);
    if (!S_ISREG(st.st_mode))
        return tool_fail_msg(path, "%s, not a regular file: not a vigil file", type_name(st.st_mode));
    if (st.st_size < 64)
        return tool_fail_msg(path, "%lld bytes, too short for a vigil file (at least 64)",
                             (long long)st.st_size);
    vigil_file_info fi;
    int rc = vigil_file_probe(path, &fi);
    if (rc == VIGIL_EBADFILE) {
        static const unsigned char magic[8] = { 0x7f, 'V', 'I', 'G', 'I', 'L', '\r', '\n' };
        unsigned char m[8];
        int mr = read_magic(path, m);
        if (mr < 0 && mr != VIGIL_EBADFILE)
            return tool_fail(path, mr);
        if (mr == 0 && memcmp(m, magic, 8) != 0)
            return tool_fail_msg(path, "not a vigil file (no vigil magic at offset 0)");
        return tool_fail(path, err);
    }
    if (rc < 0)
        return tool_fail_file(path, rc, want, false);
    if (fi.version < VIGIL_LAYOUT_VERSION)
        return tool_fail_msg(path, "made by an older vigil (layout version %u; this vigil reads only %u): "
                                   "re-create it with this vigil once nothing uses it", fi.version,
                             VIGIL_LAYOUT_VERSION);
    if (fi.version != VIGIL_LAYOUT_VERSION)
        return tool_fail_msg(path, "made by a newer vigil (layout version %u; this vigil reads only %u): "
                                   "use that vigil", fi.version, VIGIL_LAYOUT_VERSION);
    const char *kind = tool_kind_name(fi.kind);
    if (!kind)
        return tool_fail_msg(path, "unknown kind %u (1 heartbeat, 2 barrier, 3 leases)", fi.kind);
    if (want && fi.kind != want)
        return tool_fail_msg(path, "%s, not %s", kind_article(fi.kind), kind_article(want));
    if (fi.capacity == 0)
        return tool_fail_msg(path, "%s of capacity 0: corrupt", kind_article(fi.kind));
    if (fi.capacity > TOOL_MAX_CAPACITY)
        return tool_fail_msg(path, "%s capacity %u is past the limit %u", kind, fi.capacity, TOOL_MAX_CAPACITY);
    uint64_t size = vigil_file_size(fi.kind, fi.capacity);
    if (fi.size != size)
        return tool_fail_msg(path, "%llu bytes, but %s of capacity %u has %llu", (unsigned long long)fi.size,
                             kind_article(fi.kind), fi.capacity, (unsigned long long)size);
    if (err == VIGIL_ECAPACITY)
        return tool_fail_msg(path, "capacity %u, not the capacity asked for", fi.capacity);
    return tool_fail_detail(path, err, "%s of capacity %u, %llu bytes", kind_article(fi.kind), fi.capacity,
                            (unsigned long long)fi.size);
}

int tool_flush(void)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "vigil: stdout: %s\n", vigil_strerror(errno ? -errno : -EIO));
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

static sigset_t stop_signals;

void tool_catch_stop_signals(void)
{
    /* Blocked, not handled: a stop signal that arrives while the command
     * is busy stays pending and ends the next sleep at once, so there is
     * no window between checking a flag and going to sleep. */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_signals, NULL);
}

uint64_t tool_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool tool_sleep_ms(uint64_t ms)
{
    uint64_t deadline = tool_now_ms() + ms;
    for (;;) {
        uint64_t now = tool_now_ms();
        uint64_t left = deadline > now ? deadline - now : 0;
        struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
        int sig = sigtimedwait(&stop_signals, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM)
            return true;
        if (sig < 0 && errno == EAGAIN)
            return false;
        /* EINTR (another signal, say SIGCHLD): sleep out the rest. */
        if (left == 0)
            return false;
    }
}

int tool_slot_look(const vigil_hb *hb, uint32_t i, vigil_slot_info *info, bool *busy)
{
    /* A slot whose writer holds it at a few looks (a writer killed
     * mid-change leaves it so until failover repairs it) is read word by
     * word: each word is atomic, and an observer's moment-old view is what
     * it asked for. Waiting the snapshot's bound per wedged slot would
     * make a table full of them take hours. Relaxed: looks only. */
    const struct vigil_hb_slot *s = &hb->slots[i];
    *busy = false;
    for (int k = 0; k < 4; k++) {
        if (!(atomic_load_explicit(&s->seq, memory_order_relaxed) & 1u)) {
            int rc = vigil_hb_snapshot(hb, i, info);
            if (rc != VIGIL_EBUSY)
                return rc;
        }
    }
    *busy = true;
    info->pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
    info->role = atomic_load_explicit(&s->role, memory_order_relaxed);
    info->last_seen_epoch = atomic_load_explicit(&s->last_seen_epoch, memory_order_relaxed);
    info->in_flight = atomic_load_explicit(&s->in_flight, memory_order_relaxed);
    return VIGIL_EBUSY;
}
