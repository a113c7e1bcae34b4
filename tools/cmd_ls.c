/* SPDX-License-Identifier: MIT */
/*
 * vigil ls [DIR...] [--grace G] [--json]: the vigil files in some
 * directories, as ipcs lists System V objects. By default /dev/shm,
 * /run/vigil, $XDG_RUNTIME_DIR and the current directory, each looked at
 * once (not recursively); a directory that does not exist is skipped. A
 * file is listed when it starts with vigil's magic; symlinks are never
 * followed. Every file is opened read-only and only looked at. A file
 * this user may not read is listed too, marked unreadable, when its size
 * is one a vigil file can have (a 64-byte header and 8-byte multiples):
 * hiding it would tell a user there is nothing where a table they cannot
 * use is, which is the one thing they need to know. A file that could not
 * be looked at for a reason of this process or machine (EMFILE, ENFILE,
 * ENOMEM, EIO) is named on stderr and makes the exit status 1; the rest
 * is listed all the same. Paths and owners are escaped (tool_esc).
 */
#define _GNU_SOURCE
#include "vigil.h"

#include "journal_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
    char     path[PATH_MAX];
    uint32_t kind, version, capacity;
    int64_t  occupied, live; /* -1: does not apply, or could not be read */
    uid_t    uid;
    int      err;            /* why the counts are missing, 0 none */
    bool     readable;       /* false: only its name, owner and size are known */
};

/* Occupied and live: slots for a heartbeat table (live by grace), bound
 * entries and unexpired holders for a lease store, this round's arrivals
 * and bound records for a barrier, entries in use and the one CMD running
 * for a reclaim journal. */
static void count(struct entry *e, uint64_t grace)
{
    e->occupied = e->live = -1;
    if (e->version != VIGIL_LAYOUT_VERSION)
        return;
    if (e->kind == VIGIL_KIND_HEARTBEAT) {
        vigil_hb *hb;
        if ((e->err = vigil_hb_open_readonly(e->path, 0, &hb)) < 0)
            return;
        int64_t occ = 0;
        for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++)
            occ += atomic_load_explicit(&hb->slots[i].pid, memory_order_relaxed) != 0;
        e->occupied = occ;
        e->live = vigil_hb_live_count(hb, grace);
        vigil_hb_close(hb);
    } else if (e->kind == VIGIL_KIND_LEASES) {
        vigil_leases *ls;
        if ((e->err = vigil_leases_open_readonly(e->path, &ls)) < 0)
            return;
        e->occupied = e->live = 0;
        for (uint32_t i = 0; i < vigil_leases_capacity(ls); i++) {
            vigil_lease_info info;
            int rc = vigil_leases_entry(ls, i, &info);
            e->occupied += rc == 0 || rc == VIGIL_EBUSY;
            e->live += rc == 0 && info.state == VIGIL_LEASE_HELD;
        }
        vigil_leases_close(ls);
    } else if (e->kind == VIGIL_KIND_JOURNAL) {
        vigil_journal *j;
        if ((e->err = vigil_journal_open_readonly(e->path, &j)) < 0)
            return;
        uint32_t c[5];
        vigil_journal_counts(j, c);
        e->occupied = (int64_t)(c[VJ_CLAIMING] + c[VJ_PENDING] + c[VJ_RUNNING] + c[VJ_DONE]);
        e->live = c[VJ_RUNNING];
        vigil_journal_close(j);
    } else if (e->kind == VIGIL_KIND_BARRIER) {
        vigil_barrier_state st;
        if ((e->err = vigil_barrier_peek(e->path, &st)) < 0)
            return;
        e->occupied = st.arrived;
        e->live = st.recorded;
    }
}

/* count, under the guard against a file shrunk during the look. */
struct count_look {
    struct entry *e;
    uint64_t      grace;
};

static int count_guarded(void *arg)
{
    struct count_look *l = arg;
    count(l->e, l->grace);
    return 0;
}

/* Whether a look at a file failed for a reason of this process or this
 * machine (no descriptor left, no memory, an I/O error), not because of
 * what the file is: such a file is reported, never passed over as "not a
 * vigil file", so that a listing is never silently short. */
static bool could_not_look(int err)
{
    return err < 0 && err > -1000 && err != -ENOENT && err != -ELOOP && err != -EACCES && err != -EPERM &&
           err != -EISDIR && err != -ENOTDIR;
}

/* Whether path holds a vigil file, filling e: not a symlink, a regular
 * file, the magic at offset 0. An unreadable file is listed with its
 * error when its name alone cannot tell. 1 listed, 0 not a vigil file (or
 * gone meanwhile), or the negative error that kept it from being looked
 * at. */
static int probe(const char *path, struct entry *e, uint64_t grace)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return could_not_look(-errno) ? -errno : 0;
    if (!S_ISREG(st.st_mode) || st.st_size < 64)
        return 0;
    vigil_file_info fi;
    int rc = vigil_file_probe(path, &fi);
    if ((rc == -EACCES || rc == -EPERM) && (st.st_size - 64) % 8 == 0) {
        memset(e, 0, sizeof(*e));
        snprintf(e->path, sizeof(e->path), "%s", path);
        e->uid = st.st_uid;
        e->err = rc;
        e->occupied = e->live = -1;
        return 1;
    }
    if (could_not_look(rc))
        return rc;
    if (rc < 0)
        return 0; /* no magic: not ours to list */
    memset(e, 0, sizeof(*e));
    e->readable = true;
    snprintf(e->path, sizeof(e->path), "%s", path);
    e->kind = fi.kind;
    e->version = fi.version;
    e->capacity = fi.capacity;
    e->uid = st.st_uid;
    struct count_look look = { e, grace };
    if (tool_guarded(count_guarded, &look) == TOOL_SHRUNK) {
        e->err = TOOL_SHRUNK;
        e->occupied = e->live = -1;
    }
    return 1;
}

static void count_str(char *buf, size_t len, int64_t v)
{
    if (v < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%lld", (long long)v);
}

static void print_entry(const struct entry *e, bool json, bool first)
{
    char who[64], occ[24], live[24];
    tool_user_name(e->uid, who, sizeof(who));
    count_str(occ, sizeof(occ), e->occupied);
    count_str(live, sizeof(live), e->live);
    const char *kind = tool_kind_name(e->kind);
    if (json) {
        fputs(first ? "\n  {\"path\": " : ",\n  {\"path\": ", stdout);
        json_str(stdout, e->path, sizeof(e->path));
        if (!e->readable) {
            fputs(", \"kind\": null, \"version\": null, \"capacity\": null, \"occupied\": null, \"live\": null, "
                  "\"owner\": ", stdout);
            json_str(stdout, who, sizeof(who));
            printf(", \"uid\": %u, \"readable\": false}", (unsigned)e->uid);
            return;
        }
        if (kind)
            printf(", \"kind\": \"%s\"", kind);
        else
            printf(", \"kind\": %u", e->kind);
        printf(", \"version\": %u, \"capacity\": %u, \"occupied\": %s, \"live\": %s, \"owner\": ", e->version,
               e->capacity, e->occupied < 0 ? "null" : occ, e->live < 0 ? "null" : live);
        json_str(stdout, who, sizeof(who));
        printf(", \"uid\": %u, \"readable\": true}", (unsigned)e->uid);
        return;
    }
    char kbuf[32];
    if (!e->readable) {
        printf("%-12s %8s %8s %8s  %-10s ", "unreadable", "-", "-", "-", tool_e(who));
        goto path;
    }
    if (!kind)
        snprintf(kbuf, sizeof(kbuf), "kind %u", e->kind);
    else if (e->version != VIGIL_LAYOUT_VERSION)
        snprintf(kbuf, sizeof(kbuf), "%s v%u", kind, e->version);
    else
        snprintf(kbuf, sizeof(kbuf), "%s", kind);
    printf("%-12s %8u %8s %8s  %-10s ", kbuf, e->capacity, occ, live, tool_e(who));
path:
    tool_esc(stdout, e->path, sizeof(e->path));
    fputc('\n', stdout);
}

/* Lists one directory's vigil files, sorted by name; false when the
 * directory could not be read, or a file in it not looked at (each said
 * on stderr). */
static bool list_dir(const char *dir, uint64_t grace, bool json, bool *first, bool *missed)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return false;
    bool here = strcmp(dir, ".") == 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char path[PATH_MAX];
        struct entry e;
        int rc = 0;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
            snprintf(path, sizeof(path), "%s%s%s", here ? "" : dir, here ? "" : "/", name) < (int)sizeof(path))
            rc = probe(path, &e, grace);
        if (rc > 0) {
            print_entry(&e, json, *first);
            *first = false;
            if (could_not_look(e.err)) {
                tool_fail_msg(path, "its counts could not be read: %s", tool_look_strerror(e.err));
                *missed = true;
            }
        } else if (rc < 0) {
            tool_fail_msg(path, "could not be looked at: %s", vigil_strerror(rc));
            *missed = true;
        }
        free(names[i]);
    }
    free(names);
    return true;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE;
    bool json = false;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
    };
    const char *pos[64];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 2, pos, 0, 64, &npos);
    if (rc != TOOL_GO)
        return rc;
    const char *dirs[8];
    size_t ndirs = 0;
    bool explicit_dirs = npos > 0;
    if (explicit_dirs) {
        for (size_t i = 0; i < npos && ndirs < 8; i++)
            dirs[ndirs++] = pos[i];
        if (npos > 8)
            return tool_usage_error(cmd, "at most 8 directories");
    } else {
        dirs[ndirs++] = "/dev/shm";
        dirs[ndirs++] = "/run/vigil";
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && *xdg)
            dirs[ndirs++] = xdg;
        dirs[ndirs++] = ".";
    }
    /* Each directory once, however it was named. */
    char seen[8][PATH_MAX];
    size_t nseen = 0;
    if (json)
        fputs("[", stdout);
    else
        printf("%-12s %8s %8s %8s  %-10s %s\n", "KIND", "CAPACITY", "OCCUPIED", "LIVE", "OWNER", "PATH");
    bool first = true;
    int status = EXIT_OK;
    for (size_t d = 0; d < ndirs; d++) {
        char real[PATH_MAX];
        if (!realpath(dirs[d], real)) {
            if (explicit_dirs)
                status = tool_fail(dirs[d], -errno);
            continue;
        }
        bool dup = false;
        for (size_t k = 0; k < nseen && !dup; k++)
            dup = strcmp(seen[k], real) == 0;
        if (dup)
            continue;
        snprintf(seen[nseen++], sizeof(seen[0]), "%s", real);
        bool missed = false;
        if (!list_dir(dirs[d], grace, json, &first, &missed) && (explicit_dirs || errno != ENOENT))
            status = tool_fail(dirs[d], -errno);
        if (missed)
            status = EXIT_RUNTIME;
    }
    if (json)
        fputs(first ? "]\n" : "\n]\n", stdout);
    int frc = tool_flush();
    return status != EXIT_OK ? status : frc;
}

const struct tool_cmd tool_cmd_ls = {
    .name = "ls",
    .synopsis = "[DIR...] [--grace G] [--json]",
    .summary = "find vigil files: path, kind, capacity, occupied, live, owner",
    .help = "Lists the vigil files in each DIR (not recursively; symlinks are never\n"
            "followed), by default in /dev/shm, /run/vigil, $XDG_RUNTIME_DIR and the\n"
            "current directory (a missing default directory is skipped). For each:\n"
            "kind, capacity, occupied and live counts, the owner and the path. A\n"
            "heartbeat table counts occupied and live slots; a lease store bound\n"
            "entries and unexpired leases; a barrier this round's arrivals and bound\n"
            "records. Each file is opened read-only and only looked at. A file this\n"
            "user may not read, of a size a vigil file can have, is listed with its\n"
            "owner, marked unreadable (its kind and counts unknown). A file that could\n"
            "not be looked at (no file descriptor or memory left, an I/O error) is\n"
            "named on stderr and the exit status is 1; the others are listed all the\n"
            "same. Control characters and malformed UTF-8 in a path are escaped.\n"
            "\n"
            "options:\n"
            "  --grace G   epochs a slot may miss before it is not live (default 5)\n"
            "  --json      a JSON array of {\"path\", \"kind\", \"version\", \"capacity\",\n"
            "              \"occupied\", \"live\", \"owner\", \"uid\", \"readable\"}\n"
            "              instead (null where unreadable)\n"
            "  -h, --help  show this help\n",
    .run = run,
};
