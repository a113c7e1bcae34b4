/* SPDX-License-Identifier: MIT */
/*
 * vigil create FILE [--kind heartbeat|barrier|leases] [--capacity N]
 * [--table T] [--grace G] [--mode OCTAL] [--group NAME]: make a vigil
 * file. A heartbeat table or a lease store takes --capacity; a barrier
 * takes its heartbeat table (--table), whose capacity it shares, and the
 * grace it stores.
 *
 * The library makes the file through its descriptor alone (see
 * src/file.c): nameless until whole, given its group (--group) and mode
 * by fchown and fchmod on it, its space reserved, then linked at FILE
 * without replacing anything there. No name another user can touch is
 * ever acted on by path, so a group member swapping names in a shared
 * directory can neither be given this file's group and mode for a file
 * of theirs nor make FILE their own. A directory others can write
 * without the sticky bit is warned about: there they could still rename
 * the finished file and put their own in its place.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include "file_internal.h"
#include "journal_internal.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0..0777 in octal digits (a leading 0 or not): the permission bits alone. */
static int parse_mode(const char *s, unsigned *out)
{
    if (!*s || strlen(s) > 4)
        return -1;
    unsigned v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '7')
            return -1;
        v = v * 8 + (unsigned)(*p - '0');
    }
    if (v > 0777)
        return -1;
    *out = v;
    return 0;
}

/* A group by name, or by number when no group has that name. */
static int parse_group(const char *s, gid_t *out)
{
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(s, &gr, buf, sizeof(buf), &res) == 0 && res) {
        *out = res->gr_gid;
        return 0;
    }
    uint64_t v;
    if (tool_parse_u64(s, &v) == 0 && v < (gid_t)-1) {
        *out = (gid_t)v;
        return 0;
    }
    return -1;
}

struct spec {
    uint32_t    kind;
    uint32_t    capacity;
    uint64_t    grace;
    const char *table;
    unsigned    mode;
    gid_t       gid; /* (gid_t)-1: the creator's */
};

/* Makes the file at path, setting sp->capacity to what it holds: 0, a
 * negative error about path, or EXIT_RUNTIME after printing what was
 * wrong with the barrier's table. */
static int make(const char *path, struct spec *sp)
{
    int rc;
    if (sp->kind == VIGIL_KIND_HEARTBEAT) {
        vigil_hb *hb;
        if ((rc = vigil_hb_create_group(path, sp->capacity, sp->mode, sp->gid, &hb)) < 0)
            return rc;
        vigil_hb_close(hb);
    } else if (sp->kind == VIGIL_KIND_LEASES) {
        vigil_leases *ls;
        if ((rc = vigil_leases_create_group(path, sp->capacity, sp->mode, sp->gid, &ls)) < 0)
            return rc;
        vigil_leases_close(ls);
    } else if (sp->kind == VIGIL_KIND_JOURNAL) {
        /* The reclaim journal of `vigil failover --exec`: twice the
         * table's slots (64 at least, 65536 at most) pending reclaims. */
        vigil_hb *hb;
        if ((rc = vigil_hb_open_readonly(sp->table, 0, &hb)) < 0)
            return tool_fail_file(sp->table, rc, VIGIL_KIND_HEARTBEAT, false);
        struct vigil_journal_table t = { vigil_hb_capacity(hb), 0, 0 };
        vigil_hb_close(hb);
        /* The table's identity, which a watchdog checks (a journal is
         * its table's alone). */
        struct stat st;
        if (stat(sp->table, &st) != 0)
            return tool_fail(sp->table, -errno);
        t.dev = (uint64_t)st.st_dev, t.ino = (uint64_t)st.st_ino;
        sp->capacity = vigil_journal_capacity_for(t.capacity);
        vigil_journal *j;
        if ((rc = vigil_journal_create(path, sp->capacity, &t, sp->mode, sp->gid, &j)) < 0)
            return rc;
        vigil_journal_close(j);
    } else {
        /* Read permission on the table is enough: the barrier only takes
         * its capacity now; its waiters open the table themselves. */
        vigil_hb *hb;
        if ((rc = vigil_hb_open_readonly(sp->table, 0, &hb)) < 0)
            return tool_fail_file(sp->table, rc, VIGIL_KIND_HEARTBEAT, false);
        vigil_barrier *b;
        sp->capacity = vigil_hb_capacity(hb);
        rc = vigil_barrier_create_group(path, hb, sp->grace, sp->mode, sp->gid, &b);
        if (rc == 0)
            vigil_barrier_close(b);
        vigil_hb_close(hb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Why the file was not made, in one line. */
static int fail(const char *path, const struct spec *sp, int rc, const char *group)
{
    if (rc == -ENOSPC || rc == -EDQUOT)
        return tool_fail_space(path, rc, vigil_file_size(sp->kind, sp->capacity), true);
    if (rc == -EPERM && group)
        return tool_fail_msg(path, "cannot give it to group %s: %s (uid %u is not a member, and not root); "
                                   "nothing was made", group, strerror(EPERM), (unsigned)geteuid());
    return tool_fail(path, rc);
}

static const char *kind_text(uint32_t kind)
{
    return kind == VIGIL_KIND_HEARTBEAT ? "heartbeat table"
           : kind == VIGIL_KIND_BARRIER ? "barrier"
           : kind == VIGIL_KIND_JOURNAL ? "reclaim journal"
           : kind == VIGIL_KIND_LEASES  ? "lease store"
                                        : "file of an unknown kind";
}

/* --exist-ok and FILE was there: kept when it is the file asked for (its
 * kind, and the capacity asked for where one was) and one the commands
 * that write it will open (vigil_file_trusted, unless --trust-owner), an
 * error otherwise, so that a service's start step fails loudly, never
 * hides behind "-". One lookup: the kind, the trust and the mode are all
 * of the file whose header was read (a symlink is refused, -ELOOP). */
static int keep_existing(const char *path, const struct spec *sp, bool have_capacity, bool trust)
{
    struct stat st;
    vigil_file_info fi;
    int rc = vigil_file_probe_stat(path, &fi, &st);
    if (rc < 0)
        return tool_fail_file(path, rc, sp->kind, false);
    if (fi.kind != sp->kind)
        return tool_fail_msg(path, "exists, a %s, not a %s: kept, never replaced (remove it once nothing uses "
                                   "it to make it anew)", kind_text(fi.kind), kind_text(sp->kind));
    if (have_capacity && fi.capacity != sp->capacity)
        return tool_fail_msg(path, "exists, a %s of capacity %u, not %u: kept, never replaced (remove it once "
                                   "nothing uses it to make it anew)", kind_text(fi.kind), fi.capacity,
                             sp->capacity);
    if (!trust && vigil_file_trusted(&st) < 0)
        return tool_fail_untrusted(path);
    if ((st.st_mode & 0777) != sp->mode || (sp->gid != (gid_t)-1 && st.st_gid != sp->gid))
        fprintf(stderr, "vigil: warning: %s: kept with mode %04o, group %u, not the --mode %04o%s asked for\n",
                tool_e(path), (unsigned)(st.st_mode & 0777), (unsigned)st.st_gid, sp->mode,
                sp->gid != (gid_t)-1 ? " and --group" : "");
    printf("%s: %s, capacity %u: there already, kept\n", tool_e(path), kind_text(fi.kind), fi.capacity);
    return tool_flush();
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t capacity = 0, grace = TOOL_DEFAULT_GRACE;
    bool have_capacity = false, have_grace = false, exist_ok = false, trust = false;
    const char *kind = "heartbeat", *table = NULL, *mode_s = NULL, *group = NULL;
    const struct tool_opt opts[] = {
        { "capacity", OPT_U64, 1, TOOL_MAX_CAPACITY, &capacity, &have_capacity, NULL },
        { "kind", OPT_STR, 0, 0, NULL, NULL, &kind },
        { "table", OPT_STR, 0, 0, NULL, NULL, &table },
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, &have_grace, NULL },
        { "mode", OPT_STR, 0, 0, NULL, NULL, &mode_s },
        { "group", OPT_STR, 0, 0, NULL, NULL, &group },
        { "exist-ok", OPT_FLAG, 0, 0, NULL, &exist_ok, NULL },
        { "trust-owner", OPT_FLAG, 0, 0, NULL, &trust, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    if (trust && !exist_ok)
        return tool_usage_error(cmd, "--trust-owner goes with --exist-ok (a new file is this user's own)");
    struct spec sp = { .capacity = (uint32_t)capacity, .grace = grace, .table = table, .mode = 0600,
                       .gid = (gid_t)-1 };
    if (strcmp(kind, "heartbeat") == 0)
        sp.kind = VIGIL_KIND_HEARTBEAT;
    else if (strcmp(kind, "barrier") == 0)
        sp.kind = VIGIL_KIND_BARRIER;
    else if (strcmp(kind, "leases") == 0)
        sp.kind = VIGIL_KIND_LEASES;
    else if (strcmp(kind, "journal") == 0)
        sp.kind = VIGIL_KIND_JOURNAL;
    else
        return tool_usage_error(cmd, "--kind: heartbeat, barrier, leases or journal, not '%s'", kind);
    if (sp.kind == VIGIL_KIND_BARRIER || sp.kind == VIGIL_KIND_JOURNAL) {
        if (!table)
            return tool_usage_error(cmd, sp.kind == VIGIL_KIND_BARRIER
                                             ? "--kind barrier needs --table T, the heartbeat table it counts peers in"
                                             : "--kind journal needs --table T, the heartbeat table it journals");
        if (have_capacity)
            return tool_usage_error(cmd, "--capacity does not apply to a %s: it has its table's",
                                    sp.kind == VIGIL_KIND_BARRIER ? "barrier" : "journal");
        if (sp.kind == VIGIL_KIND_JOURNAL && have_grace)
            return tool_usage_error(cmd, "--grace applies to --kind barrier only");
    } else {
        if (!have_capacity)
            return tool_usage_error(cmd, "--capacity is required");
        if (table || have_grace)
            return tool_usage_error(cmd, "--%s applies to --kind barrier only", table ? "table" : "grace");
    }
    if (mode_s && parse_mode(mode_s, &sp.mode) < 0)
        return tool_usage_error(cmd, "--mode: permission bits in octal, 0..0777 (e.g. 0660), not '%s'", mode_s);
    if (group && parse_group(group, &sp.gid) < 0)
        return tool_usage_error(cmd, "--group: no group named '%s'", group);
    tool_warn_dir(pos[0]);
    if (sp.mode & 0002)
        fprintf(stderr, "vigil: warning: %s: mode %04o lets anyone rewrite or truncate it, so vigil's writing "
                        "commands will refuse it unless given --trust-owner; give it to a group instead "
                        "(--mode 0660 --group NAME)\n",
                tool_e(pos[0]), sp.mode);
    if ((rc = make(pos[0], &sp)) == -EEXIST && exist_ok)
        return keep_existing(pos[0], &sp, have_capacity, trust);
    if (rc != 0)
        return rc == EXIT_RUNTIME ? rc : fail(pos[0], &sp, rc, group);
    printf("%s: %s, capacity %u, mode %04o%s%s, %llu bytes\n", tool_e(pos[0]), kind_text(sp.kind), sp.capacity,
           sp.mode, group ? ", group " : "", group ? tool_e(group) : "",
           (unsigned long long)vigil_file_size(sp.kind, sp.capacity));
    return tool_flush();
}

const struct tool_cmd tool_cmd_create = {
    .name = "create",
    .synopsis = "FILE [--kind KIND] [--capacity N] [--table T] [--grace G] [--mode OCTAL] [--group NAME] "
                "[--exist-ok [--trust-owner]]",
    .summary = "make a heartbeat table, a barrier, a lease store or a reclaim journal",
    .help = "Makes a vigil file at FILE: by default a heartbeat table of N slots\n"
            "(1..1048576). Never replaces anything: an existing FILE is an error. The\n"
            "file appears whole, with its mode and group already set.\n"
            "\n"
            "options:\n"
            "  --kind KIND     heartbeat, barrier, leases or journal (default\n"
            "                  heartbeat); a journal is the one `vigil failover --exec`\n"
            "                  keeps next to a table (FILE.journal), made here to give\n"
            "                  it a --mode and --group of its own\n"
            "  --capacity N    slots (heartbeat) or entries (leases), 1..1048576;\n"
            "                  required for those two kinds\n"
            "  --table T       barrier: the heartbeat table whose live peers it counts\n"
            "                  (its capacity is the table's); journal: the table it\n"
            "                  journals (twice its slots, 64..65536 entries); required\n"
            "                  for both\n"
            "  --grace G       barrier: the grace in epochs it stores (default 5)\n"
            "  --mode OCTAL    permission bits, e.g. 0660 for a group of processes\n"
            "                  (default 0600; the umask does not apply)\n"
            "  --group NAME    the file's group, by name or number (default: the\n"
            "                  creator's); needs root or membership of the group\n"
            "  --exist-ok      an existing FILE of this kind (and --capacity) is kept\n"
            "                  and the exit status is 0 (a service's start step);\n"
            "                  one of another kind or capacity is still an error, and\n"
            "                  so is one the commands that write it would refuse\n"
            "                  (another user could have made or rewritten it)\n"
            "  --trust-owner   with --exist-ok: keep such a file all the same (the\n"
            "                  commands that use it need --trust-owner too)\n"
            "  -h, --help      show this help\n",
    .run = run,
};
