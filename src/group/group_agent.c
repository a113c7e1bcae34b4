/* SPDX-License-Identifier: MIT */
/*
 * Death seen at once across hosts: a member records its etcd lease on its
 * host, and the host's agent revokes the lease the moment the member's
 * process dies, so every other host sees the member leave, its units freed
 * and its leadership gone within a round trip to etcd, not a TTL later.
 *
 * The record: DIR/vigil-<lease hex>.lease, written by join before the
 * member key exists (a temporary file renamed into place: an agent never
 * reads half a record), removed by leave once the revoke is answered. DIR
 * may be a group's (1770), whose members see the lease IDs etcd hands out
 * in order and could put a file at any name they guess: the temporary
 * name is random (opened O_EXCL|O_NOFOLLOW, another taken if it exists,
 * never removing what is there), and when another user's file holds the
 * final name the record takes DIR/vigil-<lease hex>-<random>.lease
 * instead (renamed without replacing). So no other user can keep a
 * member from joining, and what a record's name says is never trusted:
 * the agent reads every vigil-*.lease by its owner and its content.
 *
 *   vigil-lease 2
 *   lease <lease ID, decimal>
 *   pid <pid, as the member's own pid namespace numbers it>
 *   start <start time: /proc/<pid>/stat field 22>
 *   pidns <the member's pid namespace: inode of /proc/self/ns/pid, 0 unknown>
 *   group <group>
 *   name <member>
 *
 * (Version 1, without the pidns line, is read as a member of the agent's
 * own namespace, as it always was. In version 2 a pidns or start of 0 is
 * no identity: the member could not read its own /proc, so its pid may
 * be another namespace's.)
 *
 * The agent (vigil_agent_*, `vigil agent --dir DIR`) watches DIR with
 * inotify and each recorded process with a pidfd, as failover_wait does
 * (src/failover_wait.c): open a pidfd for the pid, then read the
 * process's start time; equal to the record's, the pidfd names the member
 * and is watched; different, or no such process, the member is dead.
 * A pidfd readable is a death. A dead member's lease is revoked (retried,
 * backing off, while etcd cannot be reached; a lease already gone is
 * done), then its record removed. Opening scans DIR, so an agent started
 * again (or late) revokes at once the leases of members that died while
 * it was away: the records are the state, and the agent holds none of
 * its own. Revoking twice is harmless, so two agents on one DIR are too.
 * An overflow of the inotify queue (IN_Q_OVERFLOW: events were dropped)
 * scans DIR again, so no record goes unseen.
 *
 * Only a death the agent can see is judged. A member of another pid
 * namespace (a container sharing DIR: its pid means another process
 * here, or none), one that does not know its own namespace (no /proc
 * where it runs: it recorded pidns 0), one whose namespace the agent
 * cannot tell its own from (no /proc of the agent's), or one whose /proc
 * entries the agent reads from another namespace's /proc, is never
 * judged dead: the agent says so once (an event with result -EREMOTE)
 * and leaves its lease to its TTL.
 *
 * DIR is the trust boundary: whoever may write in it may have the agent
 * revoke any lease ID it names. Make it 0700, the agent's and its
 * members' user's (join makes a missing DIR so). The agent refuses a DIR
 * that another user could have written in (vigil_file_trusted: writable
 * by everyone, or another user's outside a group of the agent's), and
 * ignores a record that is writable by everyone or whose owner is neither
 * trusted by that rule nor one who may write in DIR (its owner, or a
 * member of its group when it is group-writable), unless told to trust
 * them. A record is written under a random temporary name opened
 * O_EXCL|O_NOFOLLOW, so never through a file or symlink put there first.
 */
#define _GNU_SOURCE
#include "group_internal.h"
#include "file_internal.h"
#include "proc_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RECORD_MAX   1024 /* bytes of a record */
#define BACKOFF_MIN  50u  /* ms between revoke attempts, doubling ... */
#define BACKOFF_MAX  1000u
#define NOPIDFD_MS   100u /* without pidfds, how often a process is looked at */

/* ---- the record (the member's side) ------------------------------------------- */

static bool record_name(const char *n)
{
    size_t l = strlen(n);
    return l > 12 && strncmp(n, "vigil-", 6) == 0 && strcmp(n + l - 6, ".lease") == 0;
}

/* Moves the record open at fd from tmp to its final name in dirfd, which
 * goes into `final`: vigil-<hex>.lease when that name is free or already
 * ours (a record this user left for the same lease, replaced), else, when
 * another user's file holds it, vigil-<hex>-<random>.lease, never
 * replacing anything. Returns 0 or a negative error. */
static int grecord_publish(int dirfd, const char *tmp, int fd, const char *hex, char *final, size_t cap)
{
    struct stat st;
    snprintf(final, cap, "vigil-%s.lease", hex);
    bool free_or_ours = fstatat(dirfd, final, &st, AT_SYMLINK_NOFOLLOW) != 0
                            ? errno == ENOENT
                            : S_ISREG(st.st_mode) && st.st_uid == geteuid();
    if (free_or_ours && renameat(dirfd, tmp, dirfd, final) == 0)
        return 0;
    /* Another user's name (planted there, or arrived since: a sticky
     * directory refuses the rename over it): a name of our own instead.
     * The agent reads every vigil-*.lease, whatever follows the hex. */
    int err = -EEXIST;
    for (int attempt = 0; attempt < 100 && err == -EEXIST; attempt++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "vigil-%s-", hex);
        if ((err = vigil_file_random_name(final, cap, prefix, ".lease")) < 0)
            return err;
        if (renameat2(dirfd, tmp, dirfd, final, RENAME_NOREPLACE) == 0)
            return 0;
        err = -errno;
        if (err == -EINVAL || err == -ENOSYS) {
            /* No RENAME_NOREPLACE here: a link never replaces either. */
            if (linkat(dirfd, tmp, dirfd, final, 0) == 0) {
                if (vigil_file_names_fd(dirfd, tmp, fd))
                    unlinkat(dirfd, tmp, 0);
                return 0;
            }
            err = -errno;
        }
    }
    return err;
}

int grecord_write(vigil_group_member *m, const char *dir)
{
    char tmp[64], final[64], body[RECORD_MAX];
    int b = snprintf(body, sizeof(body), "vigil-lease 2\nlease %" PRId64 "\npid %" PRIu32 "\nstart %" PRIu64
                     "\npidns %" PRIu64 "\ngroup %s\nname %s\n",
                     m->lease, m->pid, vigil_self_start_time(), vigil_self_pidns(), m->group, m->name);
    m->record[0] = '\0';
    if (b <= 0 || (size_t)b >= sizeof(body) || strlen(dir) + sizeof(final) + 1 > sizeof(m->record))
        return VIGIL_ERANGE;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -errno;
    /* A random temporary name: DIR may be a group's, whose other members
     * can see the lease IDs (etcd hands them out in order) and put a file
     * at any name they can guess; a guessed name is never ours to remove. */
    char prefix[32];
    snprintf(prefix, sizeof(prefix), ".vigil-%s.", m->hex);
    int fd = vigil_file_open_temp(dirfd, prefix, ".tmp", tmp, sizeof(tmp));
    int rc = fd < 0 ? fd : 0;
    if (rc == 0) {
        ssize_t w = write(fd, body, (size_t)b);
        rc = w == b ? 0 : w < 0 ? -errno : -EIO;
    }
    if (rc == 0)
        rc = grecord_publish(dirfd, tmp, fd, m->hex, final, sizeof(final));
    if (rc == 0)
        snprintf(m->record, sizeof(m->record), "%s/%s", dir, final);
    else if (fd >= 0 && vigil_file_names_fd(dirfd, tmp, fd))
        unlinkat(dirfd, tmp, 0); /* ours still: another user's is left alone */
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    close(dirfd);
    return rc;
}

void grecord_remove(vigil_group_member *m)
{
    if (m->record[0])
        unlink(m->record);
    m->record[0] = '\0';
}

/* ---- the agent ---------------------------------------------------------------- */

struct rec {
    char     file[NAME_MAX + 1];
    int64_t  lease;
    uint32_t pid;
    uint64_t start;
    uint64_t pidns;    /* 0: unknown (version 2), or not recorded (version 1) */
    unsigned version;  /* of the record: 1 names no namespace, 2 does */
    char     group[104];
    char     name[64];
    int      pidfd;    /* -1: not watched (dead, unseen, or no pidfds) */
    bool     dead;     /* its lease is to be revoked */
    bool     unseen;   /* another pid namespace's, or not visible: left to its TTL */
    bool     told;     /* unseen, and said so */
    bool     found;    /* seen by the scan under way */
    uint64_t retry_at; /* ns, the next revoke attempt */
    unsigned backoff;
};

struct vigil_agent {
    vigil_etcd  *e;
    int          dirfd, ino, ep;
    bool         no_pidfd;
    bool         trust;    /* VIGIL_OPEN_TRUST_OWNER: every record is read */
    struct stat  dir;      /* DIR as opened: who may write in it */
    struct rec **r;
    size_t       n, cap;
};

static int pidfd_open_(uint32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* A record's text: 0 and its fields, or -EINVAL for anything else. */
static int parse_record(const char *s, struct rec *r)
{
    char group[sizeof(r->group) + 1] = "", name[sizeof(r->name) + 1] = "";
    int64_t lease = 0;
    unsigned long pid = 0;
    uint64_t start = 0, pidns = 0;
    int used = 0, n;
    if (strncmp(s, "vigil-lease 1\n", 14) == 0)
        n = sscanf(s, "vigil-lease 1\nlease %" SCNd64 "\npid %lu\nstart %" SCNu64
                   "\ngroup %104[^\n]\nname %64[^\n]\n%n", &lease, &pid, &start, group, name, &used) == 5;
    else
        n = sscanf(s, "vigil-lease 2\nlease %" SCNd64 "\npid %lu\nstart %" SCNu64 "\npidns %" SCNu64
                   "\ngroup %104[^\n]\nname %64[^\n]\n%n", &lease, &pid, &start, &pidns, group, name, &used) == 6;
    if (!n || used == 0 || s[used] != '\0' || lease <= 0 || pid == 0 || pid > INT32_MAX ||
        strlen(group) >= sizeof(r->group) || strlen(name) >= sizeof(r->name))
        return -EINVAL;
    r->lease = lease;
    r->pid = (uint32_t)pid;
    r->start = start;
    r->pidns = pidns;
    r->version = strncmp(s, "vigil-lease 1\n", 14) == 0 ? 1 : 2;
    memcpy(r->group, group, strlen(group) + 1);
    memcpy(r->name, name, strlen(name) + 1);
    return 0;
}

static struct rec *find_rec(vigil_agent *a, const char *file)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->r[i]->file, file) == 0)
            return a->r[i];
    return NULL;
}

static void drop_rec(vigil_agent *a, struct rec *r)
{
    for (size_t i = 0; i < a->n; i++) {
        if (a->r[i] != r)
            continue;
        if (r->pidfd >= 0)
            close(r->pidfd); /* and out of the epoll set with it */
        free(r);
        a->r[i] = a->r[--a->n];
        return;
    }
}

enum { PROC_DEAD = 0, PROC_ALIVE = 1, PROC_UNSEEN = 2 };

/* Does the record's pid name a process of the agent's own namespace?
 * Only when the record says so: its namespace known (the member read
 * its own /proc: pidns and start time), and the agent's known and the
 * same. A version 1 record said nothing, and is taken as ours, as it
 * always was. A pidns of 0 in version 2 is a member without /proc where
 * it runs: a container with /proc hidden or another's, whose pid may
 * name another process here, or none (a death here it is not). */
static bool pid_is_ours(const struct rec *r)
{
    if (r->version < 2)
        return true;
    uint64_t mine = vigil_self_pidns();
    return r->pidns != 0 && r->start != 0 && mine != 0 && r->pidns == mine;
}

/* The judge of a recorded process from here, without a pidfd: its pid
 * names a process of the agent's own namespace only if the record says
 * so (pid_is_ours); a verdict of death that rests on a /proc of another
 * namespace (vigil_pid_judge's -EREMOTE) is no verdict. Unknown
 * otherwise: alive (a death it cannot see is left to the TTL, never
 * guessed). */
static int judge_proc(const struct rec *r)
{
    if (!pid_is_ours(r))
        return PROC_UNSEEN; /* another namespace's pid, or not known to be ours: it means nothing here */
    int v = vigil_pid_judge(r->pid, r->start, r->start ? ~0ull : 0, 0, 0);
    return v == 0 ? PROC_DEAD : v == -EREMOTE ? PROC_UNSEEN : PROC_ALIVE;
}

/* Is the recorded process alive? PROC_ALIVE, watched through a pidfd
 * when there are pidfds; PROC_DEAD; PROC_UNSEEN, not for this agent to
 * judge. */
static int watch_proc(vigil_agent *a, struct rec *r)
{
    if (a->no_pidfd || !pid_is_ours(r))
        return judge_proc(r);
    int fd = pidfd_open_(r->pid);
    if (fd < 0) {
        if (errno == ESRCH)
            return PROC_DEAD; /* no such pid in our namespace, which is the member's */
        if (errno == ENOSYS) {
            a->no_pidfd = true;
            return watch_proc(a, r);
        }
        return PROC_ALIVE; /* cannot tell (EMFILE...): alive, looked at again later */
    }
    /* After the open: if this is still the recorded process, the pidfd
     * names it for good. Dead only on a verdict read from our own /proc;
     * a start time that cannot be read (a /proc that hides it) leaves
     * the pidfd watched: if it is not the member, the member is dead
     * already, and its lease lapses at its TTL at the latest. */
    int v = judge_proc(r);
    if (v != PROC_ALIVE) {
        close(fd);
        return v;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = r };
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        return 1;
    }
    r->pidfd = fd;
    return PROC_ALIVE;
}

/* A record's verdict, kept: dead to be revoked, unseen to be told of. */
static void judge_rec(vigil_agent *a, struct rec *r)
{
    int v = watch_proc(a, r);
    r->dead = v == PROC_DEAD;
    r->unseen = v == PROC_UNSEEN;
}

/* Whether uid may write in the directory st describes: root, its owner,
 * or, when it is group-writable, a member of its group. */
static bool may_write_dir(uid_t uid, const struct stat *dir)
{
    if (uid == 0 || uid == dir->st_uid)
        return true;
    return (dir->st_mode & S_IWGRP) && vigil_user_in_group(uid, dir->st_gid);
}

/* Whether a record could only have been made by someone trusted: not
 * writable by everyone, and made by this agent's user, root, a group of
 * this agent's (vigil_file_trusted), or someone who may write in DIR. */
static bool record_trusted(const vigil_agent *a, const struct stat *st)
{
    if (a->trust)
        return true;
    if (st->st_mode & S_IWOTH)
        return false;
    return vigil_file_trusted(st) == 0 || may_write_dir(st->st_uid, &a->dir);
}

/* A record found in DIR: read, and watched or marked dead. */
static int load(vigil_agent *a, const char *file)
{
    struct rec *known = record_name(file) ? find_rec(a, file) : NULL;
    if (known)
        known->found = true;
    if (!record_name(file) || known)
        return 0;
    int fd = openat(a->dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    char buf[RECORD_MAX + 1];
    struct stat st;
    /* A record another user could have made names a lease they chose:
     * ignored, as any file that is not a record is. */
    ssize_t k = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && record_trusted(a, &st)
                    ? read(fd, buf, RECORD_MAX)
                    : -1;
    close(fd);
    if (k <= 0)
        return 0;
    buf[k] = '\0';
    struct rec *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    if (parse_record(buf, r) < 0) {
        free(r);
        return 0; /* not a record of ours: left alone */
    }
    snprintf(r->file, sizeof(r->file), "%s", file);
    r->pidfd = -1;
    r->found = true;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct rec **p = realloc(a->r, cap * sizeof(*p));
        if (!p) {
            free(r);
            return -ENOMEM;
        }
        a->r = p;
        a->cap = cap;
    }
    a->r[a->n++] = r;
    judge_rec(a, r);
    return 0;
}

/* Every record in DIR loaded; a known one whose file is gone (removed by
 * its member after its own revoke, unseen by an inotify queue that
 * overflowed) forgotten, unless it is to be revoked. */
static int scan(vigil_agent *a)
{
    for (size_t i = 0; i < a->n; i++)
        a->r[i]->found = false;
    int fd = dup(a->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    rewinddir(d);
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)))
        rc = load(a, de->d_name);
    closedir(d);
    for (size_t i = 0; rc == 0 && i < a->n;) {
        if (!a->r[i]->found && !a->r[i]->dead)
            drop_rec(a, a->r[i]); /* a->r[i] is now another: look at i again */
        else
            i++;
    }
    return rc;
}

void (*gagent_test_hook)(const char *step);

/* Watches the directory open at a->dirfd, never another that its path
 * names by now (renamed away, another put in its place: the agent would
 * scan one and hear of the other). Through /proc/self/fd, which names the
 * open directory itself; without /proc, by path, checked afterwards to
 * still name it. */
static int watch_dir(vigil_agent *a, const char *dir, uint32_t mask)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", a->dirfd);
    if (inotify_add_watch(a->ino, proc, mask) >= 0)
        return 0;
    if (errno != ENOENT)
        return -errno;
    struct stat now;
    if (inotify_add_watch(a->ino, dir, mask) < 0 || stat(dir, &now) != 0)
        return -errno;
    return now.st_dev == a->dir.st_dev && now.st_ino == a->dir.st_ino ? 0 : -ESTALE;
}

int vigil_agent_open_flags(vigil_etcd *e, const char *dir, unsigned flags, vigil_agent **out)
{
    if (!e || !dir || !*dir || !out || (flags & ~VIGIL_OPEN_TRUST_OWNER))
        return -EINVAL;
    vigil_agent *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->e = e;
    a->dirfd = a->ino = a->ep = -1;
    a->trust = flags & VIGIL_OPEN_TRUST_OWNER;
    int rc = 0;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        rc = -errno;
    if (rc == 0 && (a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0 && fstat(a->dirfd, &a->dir) != 0)
        rc = -errno;
    if (rc == 0 && !a->trust)
        rc = vigil_file_trusted(&a->dir);
    if (rc == 0 && ((a->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 || (a->ep = epoll_create1(EPOLL_CLOEXEC)) < 0))
        rc = -errno;
    if (gagent_test_hook)
        gagent_test_hook("opened");
    /* A record arrives by rename (IN_MOVED_TO); one written in place is
     * read once closed. */
    if (rc == 0)
        rc = watch_dir(a, dir, IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    if (rc == 0 && epoll_ctl(a->ep, EPOLL_CTL_ADD, a->ino, &ev) != 0)
        rc = -errno;
    if (rc == 0)
        rc = scan(a);
    if (rc < 0) {
        vigil_agent_close(a);
        return rc;
    }
    *out = a;
    return 0;
}

int vigil_agent_open(vigil_etcd *e, const char *dir, vigil_agent **out)
{
    return vigil_agent_open_flags(e, dir, 0, out);
}

void vigil_agent_close(vigil_agent *a)
{
    if (!a)
        return;
    while (a->n)
        drop_rec(a, a->r[0]);
    free(a->r);
    if (a->ino >= 0)
        close(a->ino);
    if (a->ep >= 0)
        close(a->ep);
    if (a->dirfd >= 0)
        close(a->dirfd);
    free(a);
}

int vigil_agent_fd(const vigil_agent *a)
{
    return a ? a->ep : -EINVAL;
}

uint32_t vigil_agent_watched(const vigil_agent *a)
{
    uint32_t n = 0;
    for (size_t i = 0; a && i < a->n; i++)
        n += !a->r[i]->dead && !a->r[i]->unseen;
    return n;
}

/* The names the inotify fd has news of: loaded, or forgotten. */
static int on_dir(vigil_agent *a)
{
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t k;
    int rc = 0;
    bool overflow = false;
    while ((k = read(a->ino, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + k;) {
            struct inotify_event *ie = (struct inotify_event *)p;
            p += sizeof(*ie) + ie->len;
            overflow |= (ie->mask & IN_Q_OVERFLOW) != 0; /* events were dropped */
            if (!ie->len)
                continue;
            if (ie->mask & (IN_DELETE | IN_MOVED_FROM)) {
                /* Removed by its member after its own revoke: nothing to do. */
                struct rec *r = find_rec(a, ie->name);
                if (r && !r->dead)
                    drop_rec(a, r);
            } else if (rc == 0) {
                rc = load(a, ie->name);
            }
        }
    }
    if (k < 0 && errno == EINVAL)
        return -EINVAL;
    /* Whatever the dropped events said (a record come, one gone), DIR
     * says it again. */
    if (overflow && rc == 0)
        rc = scan(a);
    return rc;
}

/* Revokes what is due: the events reported into ev (up to max), their
 * number; *next_ms the wait until the next retry (-1 none). */
static uint32_t revoke_due(vigil_agent *a, vigil_agent_event *ev, uint32_t max, int *next_ms)
{
    uint32_t k = 0;
    uint64_t now = gnow_ns(), next = UINT64_MAX;
    for (size_t i = 0; i < a->n;) {
        struct rec *r = a->r[i];
        if (r->unseen) {
            /* Said once: not watched, its lease left to its TTL. */
            if (!r->told && k < max && ev) {
                memset(&ev[k], 0, sizeof(ev[k]));
                ev[k].lease = r->lease;
                ev[k].pid = r->pid;
                ev[k].result = -EREMOTE;
                memcpy(ev[k].group, r->group, sizeof(ev[k].group));
                memcpy(ev[k].name, r->name, sizeof(ev[k].name));
                k++;
                r->told = true;
            }
            i++;
            continue;
        }
        if (a->no_pidfd && !r->dead && judge_proc(r) == PROC_DEAD)
            r->dead = true;
        if (a->no_pidfd && !r->dead)
            next = next < now + NOPIDFD_MS * 1000000ull ? next : now + NOPIDFD_MS * 1000000ull;
        if (!r->dead || r->retry_at > now) {
            if (r->dead && r->retry_at < next)
                next = r->retry_at;
            i++;
            continue;
        }
        vigil_etcd__lock(a->e);
        int rc = vigil_etcd__revoke_locked(a->e, r->lease);
        vigil_etcd__unlock(a->e);
        if (k < max && ev) {
            memset(&ev[k], 0, sizeof(ev[k]));
            ev[k].lease = r->lease;
            ev[k].pid = r->pid;
            ev[k].result = rc;
            memcpy(ev[k].group, r->group, sizeof(ev[k].group));
            memcpy(ev[k].name, r->name, sizeof(ev[k].name));
            k++;
        }
        if (rc == 0 || rc == VIGIL_ELOST) {
            unlinkat(a->dirfd, r->file, 0);
            drop_rec(a, r); /* a->r[i] is now another: look at i again */
            continue;
        }
        r->backoff = r->backoff ? (r->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : r->backoff * 2) : BACKOFF_MIN;
        r->retry_at = gnow_ns() + r->backoff * 1000000ull;
        if (r->retry_at < next)
            next = r->retry_at;
        i++;
    }
    now = gnow_ns();
    *next_ms = next == UINT64_MAX ? -1 : next <= now ? 0 : (int)((next - now) / 1000000 + 1);
    return k;
}

int vigil_agent_run(vigil_agent *a, int timeout_ms, vigil_agent_event *ev, uint32_t max)
{
    if (!a || (max && !ev))
        return -EINVAL;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : gnow_ns() + (uint64_t)timeout_ms * 1000000;
    for (;;) {
        int next_ms;
        uint32_t done = revoke_due(a, ev, max, &next_ms);
        if (done > 0)
            return (int)done;
        /* One look at the fds at least, even with no time to wait. */
        uint64_t now = gnow_ns();
        int wait = deadline == UINT64_MAX ? -1 : now >= deadline ? 0 : (int)((deadline - now) / 1000000 + 1);
        if (next_ms >= 0 && (wait < 0 || next_ms < wait))
            wait = next_ms;
        struct epoll_event evs[32];
        int n = epoll_wait(a->ep, evs, 32, wait);
        if (n < 0 && errno != EINTR)
            return -errno;
        bool dir = false;
        for (int i = 0; i < n; i++) {
            struct rec *r = evs[i].data.ptr;
            if (!r) {
                dir = true; /* after the pidfds: it may drop records they name */
                continue;
            }
            /* The pidfd is readable: the member's process is gone. */
            epoll_ctl(a->ep, EPOLL_CTL_DEL, r->pidfd, NULL);
            close(r->pidfd);
            r->pidfd = -1;
            r->dead = true;
        }
        int rc = dir ? on_dir(a) : 0;
        if (rc < 0)
            return rc;
        if (n > 0)
            continue; /* what they made due is revoked at the top */
        if (gnow_ns() >= deadline && next_ms != 0)
            return 0;
    }
}
