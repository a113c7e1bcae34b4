/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil ls, against the built binary: it finds the vigil
 * files of a directory (and only those: not a symlink, not a text file,
 * not a subdirectory), with their kind, capacity, occupied and live
 * counts and owner, in text and JSON; a missing directory named on the
 * command line is an error, the default ones are skipped; as a user who
 * may not read a file, it is still listed, marked unreadable.
 */
#include "tooltest.h"

#include <sys/stat.h>

static const struct vj *find_path(const struct vj *arr, const char *suffix)
{
    for (const struct vj *o = arr->child; o; o = o->next) {
        const struct vj *p = vj_get(o, "path");
        size_t n = strlen(suffix);
        if (p && p->type == VJ_STR && p->len >= n && strcmp(p->str + p->len - n, suffix) == 0)
            return o;
    }
    return NULL;
}

static int test_ls_dir(void)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/d", vt_tmpdir());
    EXPECT(mkdir(dir, 0700) == 0, "mkdir");
    char p[4][600];
    snprintf(p[0], sizeof(p[0]), "%s/pool.hb", dir);
    snprintf(p[1], sizeof(p[1]), "%s/phase.barrier", dir);
    snprintf(p[2], sizeof(p[2]), "%s/locks.leases", dir);
    snprintf(p[3], sizeof(p[3]), "%s/notes.txt", dir);
    vigil_hb *hb = vt_hb_fresh_at(p[0], 8);
    uint32_t s1, s2;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s1), 0);
    EXPECT_RC(vigil_hb_register(hb, 99999, &s2), 0);
    for (int i = 0; i < 7; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, s1); /* one live, one stale */
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(p[1], hb, 3, &b), 0);
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_create(p[2], 4, &ls), 0);
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "me", 60000, &l), 0);
    FILE *f = fopen(p[3], "w");
    EXPECT(f && fputs("not a vigil file, but long enough to hold a whole header of sixty-four bytes\n", f) >= 0 &&
               fclose(f) == 0, "write notes");
    char link[600], sub[600];
    snprintf(link, sizeof(link), "%s/link.hb", dir);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    EXPECT(symlink(p[0], link) == 0 && mkdir(sub, 0700) == 0, "symlink, mkdir");

    VT_RUN("ls", dir, "--json");
    EXPECT_EXIT(0, "ls --json");
    struct vj *doc = vj_parse(R.out);
    EXPECT(doc && doc->type == VJ_ARR, "not a JSON array (%s):\n%s", vj_error ? vj_error : "", R.out);
    EXPECT(vj_count(doc) == 3, "expected the 3 vigil files alone, got %zu:\n%s", vj_count(doc), R.out);
    const struct vj *h = find_path(doc, "/pool.hb"), *br = find_path(doc, "/phase.barrier"),
                    *le = find_path(doc, "/locks.leases");
    EXPECT(h && br && le, "a vigil file is missing:\n%s", R.out);
    uint64_t v;
    EXPECT(vj_is_str(vj_get(h, "kind"), "heartbeat") && vj_u64(vj_get(h, "capacity"), &v) && v == 8 &&
               vj_u64(vj_get(h, "occupied"), &v) && v == 2 && vj_u64(vj_get(h, "live"), &v) && v == 1,
           "heartbeat row wrong:\n%s", R.out);
    EXPECT(vj_is_str(vj_get(le, "kind"), "leases") && vj_u64(vj_get(le, "capacity"), &v) && v == 4 &&
               vj_u64(vj_get(le, "live"), &v) && v == 1,
           "lease row wrong:\n%s", R.out);
    EXPECT(vj_is_str(vj_get(br, "kind"), "barrier") && vj_u64(vj_get(br, "capacity"), &v) && v == 8,
           "barrier row wrong:\n%s", R.out);
    EXPECT(vj_is_str(vj_get(h, "owner"), "root") || getuid() != 0, "owner of a root-made file:\n%s", R.out);

    VT_RUN("ls", dir);
    EXPECT_EXIT(0, "ls");
    EXPECT(vt_count_lines(R.out) == 4 && strstr(R.out, "KIND") && strstr(R.out, "pool.hb") &&
               !strstr(R.out, "link.hb") && !strstr(R.out, "notes.txt"),
           "expected a header and 3 rows:\n%s", R.out);

    VT_RUN("ls", vt_path("no-such-dir"));
    EXPECT_EXIT(1, "ls of a missing directory");
    EXPECT(strstr(R.err, "No such file"), "got '%s'", R.err);
    vigil_leases_close(ls);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* The default directories: whatever is there, ls finishes and prints a
 * listing (no error for a missing /run/vigil). */
static int test_ls_defaults(void)
{
    VT_RUN("ls", "--json");
    EXPECT_EXIT(0, "ls --json with the default directories");
    EXPECT(vj_parse(R.out), "not JSON (%s):\n%s", vj_error, R.out);
    return 0;
}

/* As a user who may not read them, ls still lists the files of a size a
 * vigil file can have, marked unreadable with their owner, beside the
 * ones it can read; a file of another size it cannot read stays out. */
static int ls_as_user(void *arg)
{
    const char *dir = arg;
    VT_RUN("ls", dir, "--json");
    struct vj *doc = R.rc == 0 ? vj_parse(R.out) : NULL;
    if (!doc || vj_count(doc) != 2) {
        fprintf(stderr, "ls --json as nobody: exit %d, expected 2 entries:\n%s\n%s\n", R.rc, R.out, R.err);
        return 1;
    }
    const struct vj *mine = find_path(doc, "/open.hb"), *theirs = find_path(doc, "/closed.hb");
    const struct vj *rd = mine ? vj_get(mine, "readable") : NULL, *nrd = theirs ? vj_get(theirs, "readable") : NULL;
    if (!rd || rd->type != VJ_BOOL || !rd->b || !vj_is_str(vj_get(mine, "kind"), "heartbeat") || !nrd ||
        nrd->type != VJ_BOOL || nrd->b || vj_get(theirs, "kind")->type != VJ_NULL ||
        vj_get(theirs, "capacity")->type != VJ_NULL || !vj_is_str(vj_get(theirs, "owner"), "root")) {
        fprintf(stderr, "ls --json as nobody: wrong entries:\n%s\n", R.out);
        return 1;
    }
    VT_RUN("ls", dir);
    if (R.rc != 0 || vt_count_lines(R.out) != 3 || !strstr(R.out, "unreadable") || !strstr(R.out, "closed.hb") ||
        strstr(R.out, "closed.txt")) {
        fprintf(stderr, "ls as nobody: exit %d:\n%s\n%s\n", R.rc, R.out, R.err);
        return 1;
    }
    return 0;
}

static int test_ls_unreadable(void)
{
    static char dir[512];
    snprintf(dir, sizeof(dir), "%s/shared", vt_tmpdir());
    EXPECT(mkdir(dir, 0755) == 0 && chmod(dir, 0755) == 0, "mkdir");
    char open_hb[600], closed_hb[600], closed_txt[600];
    snprintf(open_hb, sizeof(open_hb), "%s/open.hb", dir);
    snprintf(closed_hb, sizeof(closed_hb), "%s/closed.hb", dir);
    snprintf(closed_txt, sizeof(closed_txt), "%s/closed.txt", dir);
    vigil_hb_close(vt_hb_fresh_at(open_hb, 2));
    vigil_hb_close(vt_hb_fresh_at(closed_hb, 2)); /* 0600, root's */
    EXPECT(chmod(open_hb, 0644) == 0, "chmod");
    FILE *f = fopen(closed_txt, "w");
    EXPECT(f && fputs("71 bytes, a size no vigil file has (64 + 8k), that only root may read.\n", f) >= 0 &&
               fclose(f) == 0 && chmod(closed_txt, 0600) == 0,
           "write closed.txt");
    return vt_as_nobody(ls_as_user, dir);
}

VT_MAIN(VT_CASE(test_ls_dir), VT_CASE(test_ls_defaults), VT_CASE(test_ls_unreadable))
