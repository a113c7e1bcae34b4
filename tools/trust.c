/* SPDX-License-Identifier: MIT */
/*
 * Where the tool meets other users and the file system: the message for a
 * file another user could have made (VIGIL_EUNTRUSTED, naming its owner
 * and mode), for a file system with no room (naming it and the size
 * wanted), and the warning for a directory whose other writers could swap
 * a file for their own (no sticky bit).
 */
#define _GNU_SOURCE
#include "vigil.h"
#include "file_internal.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

const char *tool_user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char scratch[1024];
    if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &res) == 0 && res)
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
    return buf;
}

const char *tool_group_name(gid_t gid, char *buf, size_t len)
{
    struct group gr, *res = NULL;
    char scratch[4096];
    if (getgrgid_r(gid, &gr, scratch, sizeof(scratch), &res) == 0 && res)
        snprintf(buf, len, "%s", res->gr_name);
    else
        snprintf(buf, len, "%u", (unsigned)gid);
    return buf;
}

/* The directory part of path ("." for none), into buf. */
static const char *dir_part(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else if (slash == path)
        snprintf(buf, len, "/");
    else
        snprintf(buf, len, "%.*s", (int)(slash - path), path);
    return buf;
}

int tool_fail_untrusted(const char *path)
{
    /* The file the library refused, as its descriptor showed it: the
     * path may name another by now. */
    struct stat st;
    if (vigil_file_refused(&st) != 0)
        return tool_fail(path, VIGIL_EUNTRUSTED);
    char user[64], group[64];
    tool_user_name(st.st_uid, user, sizeof(user));
    tool_group_name(st.st_gid, group, sizeof(group));
    bool dir = S_ISDIR(st.st_mode);
    /* Group-writable, but its owner is not in that group (a setgid
     * directory gives its group to anyone's file): the group proves
     * nothing of who made it. */
    bool outsider = !(st.st_mode & S_IWOTH) && (st.st_mode & S_IWGRP) && !vigil_user_in_group(st.st_uid, st.st_gid);
    const char *why = (st.st_mode & S_IWOTH)
        ? (dir ? "writable by everyone, so anyone could have put files in it"
               : "writable by everyone, so anyone could have made or rewritten it")
        : outsider ? "another user's, group-writable, but its owner is not a member of its group (a setgid "
                     "directory gives its group to a file whoever makes it), so the group proves nothing of "
                     "who made it"
        : (dir ? "another user's (not root's, not yours, not group-writable for a group of yours), who "
                 "decides what is in it"
               : "another user's (not root's, not yours, not group-writable for a group of yours), who could "
                 "rewrite or truncate it under every process that maps it");
    return tool_fail_msg(path, "owned by %s (uid %u), group %s (gid %u), mode %04o: %s; refused "
                               "(--trust-owner to use it all the same)",
                         user, (unsigned)st.st_uid, group, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777), why);
}

/* The name of a file system type, as mount(8) has it, for the common ones. */
static const char *fs_type(long type)
{
    switch ((unsigned long)type) {
    case 0x01021994: return "tmpfs";
    case 0xef53:     return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683e: return "btrfs";
    case 0x794c7630: return "overlay";
    case 0x6969:     return "nfs";
    case 0x2fc12fc1: return "zfs";
    case 0x958458f6: return "hugetlbfs";
    }
    return NULL;
}

/* Where the file system holding dir is mounted, from mountinfo (matched by
 * device number); buf empty when it cannot be told. */
static void mount_point(const char *dir, char *buf, size_t len)
{
    buf[0] = '\0';
    struct stat st;
    FILE *f = stat(dir, &st) == 0 ? fopen("/proc/self/mountinfo", "re") : NULL;
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        unsigned maj, mnr;
        char point[2048];
        if (sscanf(line, "%*u %*u %u:%u %*s %2047s", &maj, &mnr, point) == 3 && maj == major(st.st_dev) &&
            mnr == minor(st.st_dev))
            snprintf(buf, len, "%s", point); /* the last one: what is mounted on top */
    }
    fclose(f);
}

int tool_fail_space(const char *path, int err, uint64_t size, bool made)
{
    char dir[4096], point[2048], what[2200];
    dir_part(path, dir, sizeof(dir));
    mount_point(dir, point, sizeof(point));
    struct statfs sf;
    const char *type = statfs(dir, &sf) == 0 ? fs_type(sf.f_type) : NULL;
    int n = snprintf(what, sizeof(what), "the %s%sfile system", type ? type : "", type ? " " : "");
    if (point[0])
        n += snprintf(what + n, sizeof(what) - (size_t)n, " mounted at %s", point);
    if (statfs(dir, &sf) == 0)
        snprintf(what + n, sizeof(what) - (size_t)n, " (%llu bytes free to this user)",
                 (unsigned long long)sf.f_bavail * (unsigned long long)sf.f_bsize);
    const char *lack = err == -EDQUOT ? "over this user's disk quota" : "no room";
    if (made)
        return tool_fail_msg(path, "%s for its %llu bytes on %s; nothing was made", lack,
                             (unsigned long long)size, what);
    return tool_fail_msg(path, "made by an older vigil, its pages not yet allocated, and %s for its %llu bytes "
                               "on %s: free some space, or re-create it",
                         lack, (unsigned long long)size, what);
}

void tool_warn_dir(const char *path)
{
    char dir[4096];
    struct stat st;
    if (stat(dir_part(path, dir, sizeof(dir)), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & S_ISVTX) ||
        !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return;
    char group[64], who[96];
    if (st.st_mode & S_IWOTH)
        snprintf(who, sizeof(who), "everyone");
    else
        snprintf(who, sizeof(who), "group %s", tool_group_name(st.st_gid, group, sizeof(group)));
    fflush(stdout);
    fprintf(stderr, "vigil: warning: %s (mode %04o) is writable by %s without the sticky bit: another user there "
                    "can rename %s and put their own file in its place; make it sticky (chmod +t, e.g. mode %04o)\n",
            tool_e(dir), (unsigned)(st.st_mode & 07777), tool_e(who), tool_e(path),
            (unsigned)((st.st_mode & 07777) | S_ISVTX));
}

int tool_open_hb(const char *path, bool trust_owner, vigil_hb **out)
{
    tool_warn_dir(path);
    int rc = vigil_hb_open_flags(path, 0, trust_owner ? VIGIL_OPEN_TRUST_OWNER : 0, out);
    return rc < 0 ? tool_fail_file(path, rc, VIGIL_KIND_HEARTBEAT, true) : 0;
}
