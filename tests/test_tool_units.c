/* SPDX-License-Identifier: MIT */
/*
 * Description: durations with units, as every command of the built tool
 * reads them (one parser, tools/duration.c): 500ms, 10s, 1.5s, 2m, 1h30m,
 * us and ns when whole milliseconds, a bare number still milliseconds;
 * what is refused (no unit after a fraction, an unknown unit, a sign, a
 * space, finer than a millisecond, past the range) is a usage error whose
 * message names the units; every duration in a --help names its unit;
 * `vigil lock --ttl 1s` works and a bare `--ttl 10` is warned about; a
 * count given a unit (--grace 5s) is told it is a count; the systemd
 * units in examples/ run with the options they give, as root in the group
 * vigil (Group=vigil), on a table a member of that group made.
 */
#include "tooltest.h"
#include "usertest.h"

static int test_accepted(void)
{
    const char *f = vt_path("units.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 2);
    static const struct {
        const char *arg, *shown; /* as given, as the ticker's start line prints it */
    } ok[] = {
        { "1", "1ms" },          { "250", "250ms" },      { "500ms", "500ms" },   { "10s", "10s" },
        { "1.5s", "1.5s" },      { "2m", "2m" },          { "1h30m", "90m" },     { "1m30s", "90s" },
        { "0.25s", "250ms" },    { "1500ms", "1.5s" },    { "2000us", "2ms" },    { "3000000ns", "3ms" },
        { "1sec", "1s" },        { "1min", "1m" },        { "24h", "24h" },
        { "1d", "24h" },         { ".5s", "500ms" },      { "86400000", "24h" },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        VT_RUN("tick", f, "--count", "1", "--interval", ok[i].arg);
        EXPECT_EXIT(0, ok[i].arg);
        char want[64];
        snprintf(want, sizeof(want), "ticking every %s (", ok[i].shown);
        EXPECT(strstr(R.out, want), "--interval %s: expected '%s' in '%s'", ok[i].arg, want, R.out);
    }
    VT_RUN("tick", f, "--count", "1", "--interval", "2\xc2\xb5s");
    EXPECT_EXIT(2, "2µs is finer than a millisecond");
    VT_RUN("tick", f, "--count", "1", "--interval", "2000\xc2\xb5s");
    EXPECT_EXIT(0, "2000µs");
    EXPECT(strstr(R.out, "every 2ms"), "2000µs: '%s'", R.out);
    vigil_hb_close(hb);
    return 0;
}

static int test_refused(void)
{
    const char *f = vt_path("refused.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 2);
    static const char *const bad[] = {
        "1.5",  "10x", "s",   "-1s", "+1s",   " 1s", "1s ", "1 s", "1e3ms", "1s5",     "1500us",
        "1.5ms", "0",  "0s",  "25h", "1.2.3s", "",   "ms",  "1ss", "0x10",  "99999999999999999999s",
        "1h-1m",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        VT_RUN("tick", f, "--count", "1", "--interval", bad[i]);
        EXPECT_EXIT(2, bad[i]);
        EXPECT(!R.out[0] && strncmp(R.err, "vigil tick: --interval: ", 24) == 0, "'%s': '%s' / '%s'", bad[i],
               R.out, R.err);
        /* Every refusal names the units, or the range in units. */
        EXPECT(strstr(R.err, "ms") && (strstr(R.err, "10s") || strstr(R.err, "1ms..24h")),
               "'%s': the message does not name the units: %s", bad[i], R.err);
    }
    VT_RUN("tick", f, "--count", "1", "--interval", "0");
    EXPECT(strstr(R.err, "a number alone is milliseconds"), "a bare 0: %s", R.err);
    EXPECT(vigil_hb_epoch(hb) == 0, "a refused tick ticked");
    /* A count is not a duration, and says so. */
    VT_RUN("inspect", f, "--grace", "5s");
    EXPECT_EXIT(2, "--grace 5s");
    EXPECT(strstr(R.err, "--grace is a count, not a duration"), "--grace 5s: %s", R.err);
    vigil_hb_close(hb);
    return 0;
}

/* Every option whose help line says DURATION says what a bare number is,
 * and the commands' usage lines call it DURATION. */
static int test_help_names_units(void)
{
    static const char *const cmds[] = { "tick", "watch", "failover", "lock" };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        VT_RUN(cmds[i], "--help");
        EXPECT_EXIT(0, cmds[i]);
        EXPECT(strstr(R.out, "DURATION") && strstr(R.out, "a number alone is milliseconds") &&
                   !strstr(R.out, " MS ") && !strstr(R.out, "MS]"),
               "vigil %s --help does not name the units:\n%s", cmds[i], R.out);
    }
    return 0;
}

static int test_lock_ttl(void)
{
    const char *s = vt_path("units.leases");
    const char *marker = vt_path("ran");
    VT_RUN("lock", "--store", s, "--ttl", "1m", "--wait", "1.5s", "--kill-after", "2s", "k", "--", "touch", marker);
    EXPECT_EXIT(0, "lock --ttl 1m");
    EXPECT(!R.err[0] && access(marker, F_OK) == 0, "--ttl 1m: '%s'", R.err);
    /* flock and etcdctl take seconds: a bare short TTL is said. The key is
     * held, so no 10ms lease ever has to survive this machine's load. */
    vigil_leases *ls;
    vigil_lease held;
    EXPECT_RC(vigil_leases_open(s, &ls), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "held", "the-test", 600000, &held), 0);
    VT_RUN("lock", "--store", s, "--ttl", "10", "--wait", "0", "held", "--", "true");
    EXPECT_EXIT(75, "lock --ttl 10 on a held key");
    EXPECT(strstr(R.err, "vigil lock: warning: --ttl 10 is 10ms") && strstr(R.err, "--ttl 10s") &&
               vt_count_lines(R.err) == 2,
           "a bare --ttl 10: '%s'", R.err);
    VT_RUN("lock", "--store", s, "--ttl", "1s", "--wait", "0", "held", "--", "true");
    EXPECT(R.rc == 75 && !strstr(R.err, "warning") && strstr(R.err, "the-test"), "--ttl 1s: '%s'", R.err);
    VT_RUN("lock", "--store", s, "--ttl", "10ms", "--wait", "0", "held", "--", "true");
    EXPECT(R.rc == 75 && !strstr(R.err, "warning"), "--ttl 10ms (a unit: meant) warned: '%s'", R.err);
    VT_RUN("lock", "--store", s, "--ttl", "5000", "--wait", "0", "held", "--", "true");
    EXPECT(R.rc == 75 && !strstr(R.err, "warning"), "a bare --ttl 5000 warned: '%s'", R.err);
    vigil_leases_close(ls);
    VT_RUN("lock", "--store", s, "--ttl", "2ms", "k", "--", "true");
    EXPECT_EXIT(2, "--ttl 2ms");
    EXPECT(strstr(R.err, "3ms..24h"), "--ttl 2ms: %s", R.err);
    return 0;
}

/* The systemd units in examples/ run: each vigil command line they hold
 * (ExecStartPre, ExecStart, continuation lines joined) is run with the
 * built tool on a table in the test's directory, the group vigil swapped
 * for one this test has, the ticker stopped after a tick and the watchdog
 * after one look. A unit with a wrong option would fail here, not on a
 * user's host. No line is prefixed '-', which would hide a failed step. */
static int run_unit_line(char *line, const char *table, gid_t group, bool *ran)
{
    char *at = strstr(line, "/usr/bin/vigil ");
    if (!at)
        return 0;
    EXPECT(!(strchr(line, '=') && strchr(line, '=')[1] == '-'), "examples: '-' hides a failed step: %s", line);
    const char *args[32];
    size_t n = 0;
    char gid[16];
    snprintf(gid, sizeof(gid), "%u", (unsigned)group);
    bool prev_group = false;
    char *save;
    for (char *tok = strtok_r(at + strlen("/usr/bin/vigil "), " \t\\", &save); tok && n < 28;
         tok = strtok_r(NULL, " \t\\", &save)) {
        if (strcmp(tok, "/run/vigil/pool.hb") == 0)
            tok = (char *)table;
        else if (prev_group)
            tok = gid;
        prev_group = strcmp(tok, "--group") == 0;
        args[n++] = tok;
    }
    if (n && strcmp(args[0], "tick") == 0)
        args[n++] = "--count", args[n++] = "1";
    if (n && strcmp(args[0], "failover") == 0)
        args[n++] = "--once";
    args[n] = NULL;
    vt_runv(10000, args);
    EXPECT(R.rc == 0, "examples: 'vigil %s ...' exited %d: %s", args[0], R.rc, R.err);
    *ran = true;
    return 0;
}

static const char *const units[] = { "vigil-tick.service", "vigil-failover.service" };

/* Each unit's text, continuation lines joined ("\\\n" becomes spaces). */
static bool unit_text(size_t u, char *text, size_t cap)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/examples/%s", VIGIL_SOURCE_DIR, units[u]);
    vt_slurp(path, text, cap);
    for (char *c = text; (c = strstr(c, "\\\n"));)
        c[0] = ' ', c[1] = ' ';
    return text[0] != '\0';
}

/* The group a unit's [Service] runs in (Group=), or "" for root's own. */
static void unit_group(const char *text, char *out, size_t cap)
{
    out[0] = '\0';
    const char *service = strstr(text, "\n[Service]\n");
    const char *end = service ? strstr(service + 1, "\n[") : NULL;
    const char *g = service ? strstr(service, "\nGroup=") : NULL;
    if (g && (!end || g < end))
        snprintf(out, cap, "%.*s", (int)strcspn(g + 7, "\n"), g + 7);
}

/* Runs every vigil line of both units on table; when root, each unit in
 * the group its Group= names, the group vigil standing for vigil_gid
 * here (what the units' --group vigil becomes too). */
static int run_units(const char *table, gid_t vigil_gid)
{
    int lines = 0;
    const gid_t was = getegid();
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        char text[1 << 14], group[64];
        EXPECT(unit_text(u, text, sizeof(text)), "%s: missing or empty", units[u]);
        unit_group(text, group, sizeof(group));
        const gid_t gid = strcmp(group, "vigil") == 0 ? vigil_gid : was;
        if (geteuid() == 0 && setregid(gid, gid) != 0)
            return 1;
        char *save;
        int fail = 0;
        for (char *l = strtok_r(text, "\n", &save); l && !fail; l = strtok_r(NULL, "\n", &save)) {
            if (strncmp(l, "ExecStart", 9) != 0)
                continue;
            char copy[2048];
            snprintf(copy, sizeof(copy), "%s", l);
            bool ran = false;
            fail = run_unit_line(copy, table, vigil_gid, &ran);
            lines += ran;
        }
        if (geteuid() == 0 && setregid(was, was) != 0)
            return 1;
        if (fail)
            return 1;
    }
    EXPECT(lines == 3, "expected 3 vigil command lines in the units (create, tick, failover), ran %d", lines);
    return 0;
}

static int test_example_units(void)
{
    return run_units(vt_path("pool.hb"), getegid());
}

/* Both units run as root in the group vigil (Group=vigil), with no
 * RuntimeDirectory= (/run/vigil is tmpfiles.d's, 1770 root:vigil: a unit
 * making it would hand it and its files to its own user at each start). */
static int test_units_group(void)
{
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        char text[1 << 14];
        EXPECT(unit_text(u, text, sizeof(text)), "%s: missing or empty", units[u]);
        char group[64];
        unit_group(text, group, sizeof(group));
        EXPECT(strcmp(group, "vigil") == 0, "%s: [Service] has Group=%s, not Group=vigil", units[u], group);
        char *service = strstr(text, "\n[Service]\n");
        char *next = service ? strstr(service + 1, "\n[") : NULL;
        if (next)
            *next = '\0';
        EXPECT(!strstr(service, "\nRuntimeDirectory"), "%s: RuntimeDirectory= (it re-owns /run/vigil)", units[u]);
        EXPECT(!strstr(service, "\nUser="), "%s: not root as shipped", units[u]);
    }
    return 0;
}

/* The table a member of the group made (0660, its group), as a worker
 * started before the ticker leaves it: root's ticker and watchdog, in the
 * group as Group=vigil puts them, use it (vigil_file_trusted trusts
 * another user's file only through a group the caller is in). */
static int test_units_member_table(void)
{
    struct vt_user u;
    int rc = vt_test_user(&u);
    if (rc)
        return rc;
    const char *run = vt_path("run-vigil");
    EXPECT(mkdir(run, 0700) == 0 && chown(run, 0, u.gid) == 0 && chmod(run, 01770) == 0, "mkdir: %s",
           strerror(errno));
    char table[600];
    snprintf(table, sizeof(table), "%s/pool.hb", run);
    /* The capacity the tick unit's create --exist-ok asks for: it keeps it. */
    EXPECT(vt_make_table_cap_as(table, 64, 0660, u.uid, u.gid) == 0, "the member could not make the table");
    return run_units(table, u.gid);
}

VT_MAIN(VT_CASE(test_accepted), VT_CASE(test_refused), VT_CASE(test_help_names_units), VT_CASE(test_lock_ttl),
        VT_CASE(test_example_units), VT_CASE(test_units_group),
        VT_CASE(test_units_member_table))
