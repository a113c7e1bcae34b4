/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil export, against the built binary: Prometheus' text
 * format for each kind of file (the vigil_ prefix, _total on counters,
 * a file label on every sample and no pid label), each file's counters
 * of structural events with their values, valid by `promtool
 * check metrics` where promtool is installed, and --textfile writing
 * DIR/vigil.prom whole, with nothing left beside it; a missing,
 * unreadable or foreign file hides none of the others, vigil_file_up
 * saying which were read and the exit status 1.
 */
#include "tooltest.h"

#include <dirent.h>
#include <sys/stat.h>

/* The value of the first sample line that starts with `prefix`. */
static bool value_of(const char *text, const char *prefix, double *v)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, prefix, strlen(prefix)) == 0) {
            const char *sp = strchr(l, '}');
            return sp && sscanf(sp + 1, "%lf", v) == 1;
        }
    }
    return false;
}

static int test_export_kinds(void)
{
    const char *hbp = vt_path("x.hb"), *bp = vt_path("x.barrier"), *lp = vt_path("x.leases");
    vigil_hb *hb = vt_hb_fresh_at(hbp, 8);
    uint32_t s1, s2;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s1), 0);
    EXPECT_RC(vigil_hb_register(hb, 4242, &s2), 0);
    for (int i = 0; i < 6; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, s1);
    vigil_leader ld;
    EXPECT(vigil_leader_elect(hb, 5, &ld) == 1, "election");
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(bp, hb, 5, &b), 0);
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_create(lp, 4, &ls), 0);
    vigil_lease l, e;
    EXPECT_RC(vigil_leases_acquire(ls, "k", "me", 60000, &l), 0);
    /* One of each counted event: a barrier release and a withdrawal (a
     * quorum of 2 that never forms), a refused renewal, an expiry. */
    EXPECT_RC(vigil_barrier_wait(b, 0), VIGIL_SERIAL);
    EXPECT_RC(vigil_barrier_wait_quorum_timeout(b, 1, 2, 1000000), VIGIL_ETIMEDOUT);
    EXPECT_RC(vigil_leases_acquire(ls, "e", "me", 3, &e), 0);
    vigil_lease_info info;
    EXPECT(VT_WAIT_FOR(vigil_leases_get(ls, "e", &info) == VIGIL_EVACANT, 10000), "lease e never expired");
    EXPECT_RC(vigil_leases_renew(ls, &e), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_acquire(ls, "e", "you", 60000, &e), 0);

    VT_RUN("export", hbp, bp, lp);
    EXPECT_EXIT(0, "export");
    double v;
    char want[700];
    snprintf(want, sizeof(want), "vigil_heartbeat_slots{file=\"%s\",state=\"live\"}", hbp);
    EXPECT(value_of(R.out, want, &v) && v == 1, "expected 1 live slot:\n%s", R.out);
    snprintf(want, sizeof(want), "vigil_heartbeat_slots{file=\"%s\",state=\"stale\"}", hbp);
    EXPECT(value_of(R.out, want, &v) && v == 1, "expected 1 stale slot:\n%s", R.out);
    snprintf(want, sizeof(want), "vigil_heartbeat_epoch{file=\"%s\"}", hbp);
    EXPECT(value_of(R.out, want, &v) && v == 6, "expected epoch 6:\n%s", R.out);
    snprintf(want, sizeof(want), "vigil_leader_term{file=\"%s\"}", hbp);
    EXPECT(value_of(R.out, want, &v) && v == (double)ld.term, "expected term %llu:\n%s",
           (unsigned long long)ld.term, R.out);
    snprintf(want, sizeof(want), "vigil_leases_entries{file=\"%s\",state=\"held\"}", lp);
    EXPECT(value_of(R.out, want, &v) && v == 2, "expected 2 held leases:\n%s", R.out);
    snprintf(want, sizeof(want), "vigil_barrier_epoch{file=\"%s\"}", bp);
    EXPECT(value_of(R.out, want, &v) && v == 1, "expected barrier epoch 1:\n%s", R.out);
    /* The counters, each with its file's value. */
    const struct {
        const char *name, *path;
        double      v;
    } counters[] = {
        { "vigil_heartbeat_registers_total", hbp, 2 },   { "vigil_heartbeat_unregisters_total", hbp, 0 },
        { "vigil_heartbeat_reclaims_total", hbp, 0 },    { "vigil_heartbeat_repairs_total", hbp, 0 },
        { "vigil_leader_changes_total", hbp, 1 },        { "vigil_barrier_releases_total", bp, 1 },
        { "vigil_barrier_withdrawals_total", bp, 1 },    { "vigil_leases_handovers_total", lp, 3 },
        { "vigil_leases_renewals_refused_total", lp, 1 }, { "vigil_leases_expiries_total", lp, 1 },
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        snprintf(want, sizeof(want), "%s{file=\"%s\"}", counters[i].name, counters[i].path);
        EXPECT(value_of(R.out, want, &v) && v == counters[i].v, "expected %s %g:\n%s", counters[i].name,
               counters[i].v, R.out);
        snprintf(want, sizeof(want), "# TYPE %s counter\n", counters[i].name);
        EXPECT(strstr(R.out, want), "no counter TYPE line for %s:\n%s", counters[i].name, R.out);
    }
    EXPECT(!strstr(R.out, "pid="), "a pid label:\n%s", R.out);
    /* Every sample is vigil_-prefixed, every counter ends in _total. */
    for (const char *l = R.out; *l; l = strchr(l, '\n') + 1) {
        if (strncmp(l, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            EXPECT(sscanf(l + 7, "%127s %31s", name, type) == 2, "bad TYPE line");
            size_t n = strlen(name);
            EXPECT(strncmp(name, "vigil_", 6) == 0, "%s: no vigil_ prefix", name);
            EXPECT(strcmp(type, "counter") != 0 || (n > 6 && strcmp(name + n - 6, "_total") == 0),
                   "counter %s does not end in _total", name);
        } else if (*l != '#') {
            EXPECT(strncmp(l, "vigil_", 6) == 0 && strstr(l, "{file=\""), "sample without prefix or file: %.80s", l);
        }
        if (!strchr(l, '\n'))
            break;
    }
    int pt = vt_promtool(R.out);
    EXPECT(pt != 1, "promtool rejected the exposition:\n%s", R.out);
    vigil_leases_close(ls);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_export_textfile(void)
{
    const char *hbp = vt_path("t.hb");
    vigil_hb_close(vt_hb_fresh_at(hbp, 2));
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/textfile", vt_tmpdir());
    EXPECT(mkdir(dir, 0755) == 0, "mkdir");
    VT_RUN("export", hbp, "--textfile", dir);
    EXPECT_EXIT(0, "export --textfile");
    EXPECT(!R.out[0], "--textfile printed on stdout: %s", R.out);
    char prom[700], text[1 << 14];
    snprintf(prom, sizeof(prom), "%s/vigil.prom", dir);
    vt_slurp(prom, text, sizeof(text));
    EXPECT(strstr(text, "vigil_heartbeat_capacity{file="), "vigil.prom: '%s'", text);
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        files += e->d_name[0] != '.' || strncmp(e->d_name, ".vigil", 6) == 0;
    closedir(d);
    EXPECT(files == 1, "expected vigil.prom alone in the directory, found %d entries", files);
    VT_RUN("export", hbp, "--textfile", vt_path("no-such-dir"));
    EXPECT_EXIT(1, "export --textfile into a missing directory");
    VT_RUN("export");
    EXPECT_EXIT(2, "export without a file");
    return 0;
}

/* A missing file, a file that is no vigil file, a file named twice: each
 * hides nothing of the others; vigil_file_up says which were read; the
 * exit status is 1; the text is valid exposition, and --textfile writes
 * it all the same. */
static int test_export_missing(void)
{
    const char *a = vt_path("a.hb"), *missing = vt_path("missing.hb"), *text = vt_path("notes.txt");
    vigil_hb *hb = vt_hb_fresh_at(a, 4);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    FILE *f = fopen(text, "w");
    EXPECT(f && fputs("not a vigil file, but long enough to hold a whole header of sixty-four bytes\n", f) >= 0 &&
               fclose(f) == 0, "write notes");
    VT_RUN("export", missing, a, text, a);
    EXPECT_EXIT(1, "export with a missing file");
    double v;
    char want[700];
    snprintf(want, sizeof(want), "vigil_file_up{file=\"%s\"}", a);
    EXPECT(value_of(R.out, want, &v) && v == 1, "expected %s 1:\n%s", want, R.out);
    snprintf(want, sizeof(want), "vigil_file_up{file=\"%s\"}", missing);
    EXPECT(value_of(R.out, want, &v) && v == 0, "expected %s 0:\n%s", want, R.out);
    snprintf(want, sizeof(want), "vigil_file_up{file=\"%s\"}", text);
    EXPECT(value_of(R.out, want, &v) && v == 0, "expected %s 0:\n%s", want, R.out);
    snprintf(want, sizeof(want), "vigil_heartbeat_slots{file=\"%s\",state=\"live\"}", a);
    EXPECT(value_of(R.out, want, &v) && v == 1, "a missing file hid a.hb's series:\n%s", R.out);
    snprintf(want, sizeof(want), "{file=\"%s\"", missing);
    const char *first = strstr(R.out, want);
    EXPECT(first && !strstr(first + 1, want), "the missing file has series besides vigil_file_up:\n%s", R.out);
    snprintf(want, sizeof(want), "vigil_heartbeat_capacity{file=\"%s\"}", a);
    first = strstr(R.out, want);
    EXPECT(first && !strstr(first + 1, want), "a file named twice was exported twice:\n%s", R.out);
    EXPECT(strstr(R.out, "# TYPE vigil_file_up gauge\n"), "no TYPE for vigil_file_up:\n%s", R.out);
    EXPECT(vt_count_lines(R.err) == 2 && strstr(R.err, strerror(ENOENT)) && strstr(R.err, "not a vigil file"),
           "expected one line per file not read, got '%s'", R.err);
    int pt = vt_promtool(R.out);
    EXPECT(pt != 1, "promtool rejected the exposition:\n%s", R.out);

    char dir[600], prom[700], got[1 << 14];
    snprintf(dir, sizeof(dir), "%s/tf", vt_tmpdir());
    EXPECT(mkdir(dir, 0755) == 0, "mkdir");
    VT_RUN("export", a, missing, "--textfile", dir);
    EXPECT_EXIT(1, "export --textfile with a missing file");
    snprintf(prom, sizeof(prom), "%s/vigil.prom", dir);
    vt_slurp(prom, got, sizeof(got));
    snprintf(want, sizeof(want), "vigil_file_up{file=\"%s\"} 0", missing);
    EXPECT(strstr(got, want) && strstr(got, "vigil_heartbeat_capacity"), "vigil.prom: '%s'", got);

    VT_RUN("export", a);
    EXPECT_EXIT(0, "export of one good file");
    snprintf(want, sizeof(want), "vigil_file_up{file=\"%s\"} 1\n", a);
    EXPECT(strstr(R.out, want) && !R.err[0], "'%s' / '%s'", R.out, R.err);
    vigil_hb_close(hb);
    return 0;
}

/* As a user who may not read one of the files: that file is down, the
 * readable one exported. */
static int export_as_user(void *arg)
{
    const char *const *paths = arg;
    VT_RUN("export", paths[0], paths[1]);
    char up[700], down[700];
    snprintf(up, sizeof(up), "vigil_file_up{file=\"%s\"} 1\n", paths[0]);
    snprintf(down, sizeof(down), "vigil_file_up{file=\"%s\"} 0\n", paths[1]);
    if (R.rc != 1 || !strstr(R.out, up) || !strstr(R.out, down) || !strstr(R.out, "vigil_heartbeat_epoch") ||
        !strstr(R.err, "no read permission")) {
        fprintf(stderr, "export as nobody: exit %d:\n%s\n%s\n", R.rc, R.out, R.err);
        return 1;
    }
    return 0;
}

static int test_export_unreadable(void)
{
    static char readable[512], closed[512];
    snprintf(readable, sizeof(readable), "%s", vt_path("readable.hb"));
    snprintf(closed, sizeof(closed), "%s", vt_path("closed.hb"));
    vigil_hb_close(vt_hb_fresh_at(readable, 2));
    vigil_hb_close(vt_hb_fresh_at(closed, 2));
    EXPECT(chmod(readable, 0644) == 0, "chmod");
    static const char *paths[2] = { readable, closed };
    return vt_as_nobody(export_as_user, paths);
}

VT_MAIN(VT_CASE(test_export_kinds), VT_CASE(test_export_textfile), VT_CASE(test_export_missing),
        VT_CASE(test_export_unreadable))
