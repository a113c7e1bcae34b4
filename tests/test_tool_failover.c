/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil failover`, run as a program: usage errors, --once in
 * JSON (exact keys and values, one object a line) and human form, the
 * long-running watchdog printing reclaims through a pipe as they happen
 * and ending on SIGTERM with exit 0, two watchdog processes racing over
 * the same stale slots with every slot reclaimed exactly once; --exec:
 * the CMD's environment per reclaim, its failure logged while the others
 * run, a hung CMD killed at its timeout without holding up the reclaims,
 * the timeout following CMD's process group (SIGKILL 5 s after SIGTERM
 * whether or not the shell is gone, the next CMD only after the group),
 * and the queued CMDs run on SIGTERM.
 */
#include "tooltest.h"

#include "journal_internal.h"
#include "proc_internal.h"

static vigil_hb *make_hb(const char *path, uint32_t cap)
{
    vigil_hb *hb = NULL;
    int rc = vigil_hb_create(path, cap, &hb);
    if (rc < 0) {
        fprintf(stderr, "create %s: %s\n", path, vigil_strerror(rc));
        exit(1);
    }
    return hb;
}

static int test_usage(void)
{
    const char *f = vt_path("usage.hb");
    vigil_hb_close(make_hb(f, 2));
    const char *const cases[][8] = {
        { "failover" },
        { "failover", f, f },
        { "failover", f, "--grace" },
        { "failover", f, "--grace", "-1" },
        { "failover", f, "--grace", "x" },
        { "failover", f, "--interval", "0" },
        { "failover", f, "--once=1" },
        { "failover", f, "--json=0" },
        { "failover", f, "--bogus" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vt_runv(10000, cases[i]);
        EXPECT_EXIT(2, cases[i][2] ? cases[i][2] : "failover without FILE");
        EXPECT(!R.out[0] && strncmp(R.err, "vigil failover: ", 16) == 0,
               "case %zu: expected a usage message on stderr alone, got '%s' / '%s'", i, R.out, R.err);
    }
    VT_RUN("failover", "--help");
    EXPECT_EXIT(0, "failover --help");
    EXPECT(strstr(R.out, "--once") && strstr(R.out, "--json"), "help lacks the options:\n%s", R.out);
    return 0;
}

/* Three slots with bits; epoch 5; slots 0 and 2 last seen at 0 (stale for
 * grace 2), slot 1 beating. */
static void stale_table(vigil_hb *hb, uint32_t s[3])
{
    vigil_hb_register(hb, 501, &s[0]);
    vigil_hb_register(hb, 502, &s[1]);
    vigil_hb_register(hb, 503, &s[2]);
    vigil_hb_mark_in_flight(hb, s[0], 1);
    vigil_hb_mark_in_flight(hb, s[0], 40);
    vigil_hb_mark_in_flight(hb, s[1], 7);
    for (int i = 0; i < 5; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, s[1]);
}

static int test_once_json(void)
{
    const char *f = vt_path("once.hb");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s[3];
    stale_table(hb, s);
    VT_RUN("failover", f, "--grace", "2", "--once", "--json", "--epochs-only"); /* the pids 50x are fictions */
    EXPECT_EXIT(0, "failover --once --json");
    EXPECT(vt_count_lines(R.out) == 2 && !R.err[0], "expected 2 lines, got '%s' / '%s'", R.out,
           R.err);
    static const char *const keys[] = { "slot", "pid", "in_flight", "reason", "epoch", "time", NULL };
    char *line = R.out;
    const struct { uint32_t slot, pid; const char *bits; } want[2] = {
        { s[0], 501, "0x10000000002" }, { s[2], 503, "0x0" } };
    for (int i = 0; i < 2; i++) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        struct vj *o = vj_parse(line);
        EXPECT(o, "line %d is not JSON (%s): %s", i, vj_error, line);
        EXPECT(vj_keys_are(o, keys), "line %d: expected exactly slot, pid, in_flight, reason, epoch, time: %s", i, line);
        const struct vj *t = vj_get(o, "time");
        EXPECT(vj_is_str(vj_get(o, "reason"), "stale"), "line %d: expected reason stale: %s", i, line);
        uint64_t ep;
        EXPECT(vj_u64(vj_get(o, "epoch"), &ep) && ep == vigil_hb_epoch(hb), "line %d: epoch: %s", i, line);
        EXPECT(t && t->type == VJ_STR && strlen(t->str) == 24 && t->str[10] == 'T' && t->str[23] == 'Z',
               "line %d: time is not RFC 3339 UTC with milliseconds: %s", i, line);
        uint64_t v;
        EXPECT(vj_u64(vj_get(o, "slot"), &v) && v == want[i].slot, "line %d: slot: %s", i, line);
        EXPECT(vj_get(o, "pid")->type == VJ_NUM && vj_u64(vj_get(o, "pid"), &v) && v == want[i].pid,
               "line %d: pid: %s", i, line);
        EXPECT(vj_is_str(vj_get(o, "in_flight"), want[i].bits), "line %d: expected in_flight %s: %s",
               i, want[i].bits, line);
        line = nl + 1;
    }
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, s[0], &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_snapshot(hb, s[2], &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_snapshot(hb, s[1], &info), 0);
    EXPECT(info.in_flight == 1u << 7, "the live slot lost its bits");

    /* exactly once: a second scan finds nothing */
    VT_RUN("failover", f, "--grace=2", "--once", "--json", "--epochs-only");
    EXPECT_EXIT(0, "second scan");
    EXPECT(!R.out[0], "a second scan reclaimed again: %s", R.out);
    VT_RUN("failover", f, "--grace=2", "--once", "--epochs-only");
    EXPECT_EXIT(0, "human scan with nothing to do");
    EXPECT(strstr(R.out, "nothing to reclaim"), "expected 'nothing to reclaim', got '%s'", R.out);
    vigil_hb_close(hb);
    return 0;
}

static int test_once_human(void)
{
    const char *f = vt_path("human.hb");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s[3];
    stale_table(hb, s);
    VT_RUN("failover", f, "--once", "--epochs-only"); /* grace 5: epoch 5 - 0 is not past it */
    EXPECT_EXIT(0, "failover --once, default grace");
    EXPECT(strstr(R.out, "nothing to reclaim (grace 5)"), "default grace should be 5: %s", R.out);
    vigil_hb_tick(hb);
    VT_RUN("failover", f, "--once", "--epochs-only");
    EXPECT_EXIT(0, "failover --once");
    char want[128];
    snprintf(want, sizeof(want), "epoch 6: reclaimed slot %u (pid 501, stale past grace), in flight 0x10000000002\n",
             s[0]);
    EXPECT(strstr(R.out, want), "expected '%s' in '%s'", want, R.out);
    EXPECT(vt_count_lines(R.out) == 2, "expected two reclaims, got '%s'", R.out);
    vigil_hb_close(hb);
    return 0;
}

/* The default watchdog's one look (--once without --epochs-only): a slot
 * whose pid names no process at all (above the kernel's PID_MAX_LIMIT,
 * 2^22, so no process can have it) is reclaimed on that first look, no
 * tick and no grace needed, as "exited"; a live owner (this process) is
 * left alone; a second look finds nothing. Without pidfds (an old kernel,
 * a seccomp filter) the look goes by epochs alone: skipped. */
static int test_once_gone_pid(void)
{
    const char *f = vt_path("gone.hb");
    vigil_hb *hb = make_hb(f, 4);
    vigil_failover_watch_info wi;
    EXPECT_RC(vigil_failover_wait_info(hb, &wi), 0);
    if (!wi.pidfds) {
        vigil_hb_close(hb);
        return VT_SKIP;
    }
    uint32_t gone, me;
    EXPECT_RC(vigil_hb_register(hb, 4194305u, &gone), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, gone, 5), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &me), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, me, 6), 0);
    VT_RUN("failover", f, "--once");
    EXPECT_EXIT(0, "failover --once");
    char want[128];
    snprintf(want, sizeof(want), "epoch 0: reclaimed slot %u (pid 4194305, exited), in flight 0x20\n", gone);
    EXPECT(!strcmp(R.out, want), "expected exactly '%s', got '%s' / '%s'", want, R.out, R.err);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(hb, gone, &info), VIGIL_EVACANT);
    EXPECT_RC(vigil_hb_snapshot(hb, me, &info), 0);
    EXPECT(info.in_flight == 1u << 6, "the live slot lost its bits");
    VT_RUN("failover", f, "--once", "--json");
    EXPECT_EXIT(0, "second look");
    EXPECT(!R.out[0], "a second look reclaimed again: %s", R.out);
    vigil_hb_close(hb);
    return 0;
}

static int test_watchdog_runs(void)
{
    const char *f = vt_path("run.hb");
    vigil_hb *hb = make_hb(f, 4);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "failover", f, "--grace", "1", "--interval", "5", "--json", "--epochs-only") == 0, "spawn");
    uint32_t s;
    vigil_hb_register(hb, 777, &s);
    vigil_hb_mark_in_flight(hb, s, 3);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    bool seen = vt_read_until(&p, "\"pid\": 777", 10000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(seen, "the running watchdog printed no reclaim: '%s'", p.buf);
    EXPECT(rc == 0, "expected exit 0 on SIGTERM, got %d", rc);
    EXPECT(strstr(p.buf, "\"in_flight\": \"0x8\""), "expected in_flight 0x8: %s", p.buf);
    vigil_hb_close(hb);

    VT_RUN("failover", vt_path("none.hb"), "--once");
    EXPECT_EXIT(1, "failover of a missing file");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, strerror(ENOENT)), "got '%s'", R.err);
    return 0;
}

/* The default watchdog: a worker killed with SIGKILL is reclaimed at once,
 * with no tick at all, and its line says it exited. */
static int test_killed_worker_exited(void)
{
    const char *f = vt_path("killed.hb");
    vigil_hb *hb = make_hb(f, 4);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "failover", f, "--json") == 0, "spawn");
    int up[2];
    EXPECT(pipe(up) == 0, "pipe");
    pid_t w = fork();
    if (w == 0) {
        uint32_t s;
        if (vigil_hb_register(hb, (uint32_t)getpid(), &s) < 0 || vigil_hb_mark_in_flight(hb, s, 9) < 0)
            _exit(3);
        char c = 1;
        if (write(up[1], &c, 1) != 1)
            _exit(4);
        vt_await_kill();
    }
    char c;
    EXPECT(read(up[0], &c, 1) == 1, "worker did not start");
    kill(w, SIGKILL);
    char want[64];
    snprintf(want, sizeof(want), "\"pid\": %d,", (int)w);
    bool seen = vt_read_until(&p, want, 10000) && vt_read_until(&p, "\n", 10000);
    waitpid(w, NULL, 0);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(seen, "the watchdog did not reclaim the killed worker: '%s'", p.buf);
    EXPECT(strstr(p.buf, "\"reason\": \"exited\"") && strstr(p.buf, "\"in_flight\": \"0x200\""),
           "expected in_flight 0x200, reason exited: %s", p.buf);
    EXPECT(vigil_hb_epoch(hb) == 0, "no tick happened, yet epoch %llu", (unsigned long long)vigil_hb_epoch(hb));
    EXPECT(rc == 0, "expected exit 0 on SIGTERM, got %d", rc);
    vigil_hb_close(hb);
    return 0;
}

/* Two watchdog processes over the same table: every stale slot is
 * reclaimed by exactly one of them. */
static int test_two_watchdogs_exactly_once(void)
{
    enum { N = 24 };
    const char *f = vt_path("race.hb");
    vigil_hb *hb = make_hb(f, N);
    struct vt_proc a, b;
    /* One waits with pidfds (the default), one scans by epochs alone: the
     * fictional pids are dead to the first, stale to the second. */
    EXPECT(VT_SPAWN(&a, "failover", f, "--grace", "0", "--interval", "1", "--json") == 0, "spawn a");
    EXPECT(VT_SPAWN(&b, "failover", f, "--grace", "0", "--interval", "1", "--json", "--epochs-only") == 0, "spawn b");
    uint32_t slot[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            EXPECT_RC(vigil_hb_register(hb, (uint32_t)(1000 + round * 100 + i), &slot[i]), 0);
            vigil_hb_mark_in_flight(hb, slot[i], (unsigned)i);
        }
        vigil_hb_tick(hb); /* all N stale at once, with grace 0 */
        /* wait until every slot is vacant again: someone took each */
        bool vacant = VT_WAIT_FOR(vigil_hb_live_count(hb, UINT64_MAX) == 0, 10000);
        EXPECT(vacant, "round %d: the watchdogs left %u slots", round,
               vigil_hb_live_count(hb, UINT64_MAX));
    }
    /* let both print what they took, then stop them */
    vt_read_until(&a, "never", 200);
    vt_read_until(&b, "never", 200);
    int ra = vt_stop_tool(&a, SIGTERM, 10000), rb = vt_stop_tool(&b, SIGINT, 10000);
    EXPECT(ra == 0 && rb == 0, "expected both to exit 0, got %d and %d", ra, rb);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            char key[64];
            snprintf(key, sizeof(key), "\"pid\": %d,", 1000 + round * 100 + i);
            int seen = 0;
            for (const char *q = a.buf; (q = strstr(q, key)); q++)
                seen++;
            for (const char *q = b.buf; (q = strstr(q, key)); q++)
                seen++;
            EXPECT(seen == 1, "pid %d reclaimed %d times:\n--- a\n%s--- b\n%s",
                   1000 + round * 100 + i, seen, a.buf, b.buf);
        }
    }
    vigil_hb_close(hb);
    return 0;
}

/* What the CMD of --exec sees: one line per reclaim, written by the CMD
 * itself from its environment, in reclaim order; its stdout kept out of
 * the JSON stream; its failure logged with the units, the others run
 * all the same; --once then exits 1. */
static int test_exec_env(void)
{
    const char *f = vt_path("exec.hb"), *out = vt_path("exec.out");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s[3];
    stale_table(hb, s);
    setenv("HOOK_OUT", out, 1);
    setenv("VIGIL_RECLAIM_UNITS", "inherited-must-not-show", 1);
    VT_RUN("failover", f, "--grace", "2", "--once", "--json", "--epochs-only", "--exec",
           "echo \"$VIGIL_RECLAIM_SLOT|$VIGIL_RECLAIM_PID|$VIGIL_RECLAIM_UNITS|$VIGIL_RECLAIM_REASON|"
           "$VIGIL_RECLAIM_IN_FLIGHT|$VIGIL_RECLAIM_EPOCH|$VIGIL_RECLAIM_FILE\" >> \"$HOOK_OUT\"; "
           "echo noise-on-stdout; [ \"$VIGIL_RECLAIM_PID\" != 503 ] || exit 3");
    unsetenv("VIGIL_RECLAIM_UNITS");
    unsetenv("HOOK_OUT");
    EXPECT_EXIT(1, "failover --once --exec with one CMD failing");
    char got[4096], want[4096];
    vt_slurp(out, got, sizeof(got));
    snprintf(want, sizeof(want), "%u|501|1,40|stale|0x10000000002|5|%s\n%u|503||stale|0x0|5|%s\n", s[0], f, s[2], f);
    EXPECT(strcmp(got, want) == 0, "the CMDs saw:\n%s\nexpected:\n%s", got, want);
    EXPECT(vt_count_lines(R.out) == 2 && !strstr(R.out, "noise"), "CMD's stdout reached the JSON stream:\n%s", R.out);
    for (char *l = R.out; *l; l = strchr(l, '\n') + 1) {
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)(strchr(l, '\n') - l), l);
        EXPECT(vj_parse(line), "not JSON (%s): %s", vj_error, line);
    }
    snprintf(want, sizeof(want), "vigil: %s: --exec for slot %u (pid 503, stale, units none): exited with status 3\n",
             f, s[2]);
    EXPECT(strstr(R.err, want) && strstr(R.err, "noise-on-stdout"), "expected '%s' in stderr, got '%s'", want, R.err);
    vigil_hb_close(hb);
    return 0;
}

/*
 * The journal as a file of its own: `vigil create --kind journal --table
 * T` makes it (its mode), inspect shows it, a watchdog without --exec
 * writes its reclaims there (--journal PATH) and one with --exec runs them
 * from there, once; a journal made for another table (--journal naming
 * another table's) is refused before anything is vacated.
 */
static int test_journal_file(void)
{
    const char *f = vt_path("jf.hb"), *j = vt_path("jf.journal"), *out = vt_path("jf.out");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s[3];
    stale_table(hb, s);
    VT_RUN("create", j, "--kind", "journal", "--table", f, "--mode", "0640");
    EXPECT_EXIT(0, "create --kind journal");
    struct stat st;
    EXPECT(strstr(R.out, "reclaim journal, capacity 64") && stat(j, &st) == 0 && (st.st_mode & 0777) == 0640,
           "create --kind journal said '%s', mode %o", R.out, (unsigned)(st.st_mode & 0777));
    VT_RUN("create", vt_path("nope.journal"), "--kind", "journal");
    EXPECT_EXIT(2, "create --kind journal without --table");
    /* Without --exec: vacated and written down, for an --exec watchdog. */
    VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only", "--journal", j);
    EXPECT_EXIT(0, "failover --once --journal");
    /* Each line says the reclaim is the --exec watchdog's to hand on. */
    EXPECT(vt_count_lines(R.out) == 2 && strstr(R.out, "journaled: an --exec watchdog hands it on") &&
               strstr(strchr(R.out, '\n') + 1, "journaled: an --exec watchdog hands it on"),
           "two journaled reclaims expected, got '%s'", R.out);
    VT_RUN("inspect", j);
    EXPECT_EXIT(0, "inspect of a journal");
    EXPECT(strstr(R.out, "reclaim journal, capacity 64") && strstr(R.out, "2 pending, 0 running") &&
               strstr(R.out, "pending  slot"),
           "inspect of the journal said '%s'", R.out);
    /* A journal of another table: refused, nothing run nor vacated. */
    const char *f8 = vt_path("jf8.hb");
    vigil_hb *hb8 = make_hb(f8, 8);
    uint32_t s8[3];
    stale_table(hb8, s8);
    VT_RUN("failover", f8, "--grace", "2", "--once", "--epochs-only", "--journal", j, "--exec", "true");
    EXPECT_EXIT(1, "a journal of another table");
    EXPECT(strstr(R.err, "made for a table of 4 slots, not this one's 8") && !R.out[0],
           "expected the journal refused, got '%s' / '%s'", R.out, R.err);
    VT_RUN("failover", f8, "--grace", "2", "--once", "--epochs-only", "--journal", j);
    EXPECT_EXIT(1, "a journal of another table, without --exec");
    EXPECT(vigil_hb_live_count(hb8, UINT64_MAX) == 3, "a slot of the other table was vacated");
    vigil_hb_close(hb8);
    /* Another table of the same capacity: its identity tells it (issue
     * 32's review ran table A's pending reclaim against B's pool). */
    const char *fb = vt_path("jfb.hb");
    vigil_hb *hbb = make_hb(fb, 4);
    uint32_t sb[3];
    stale_table(hbb, sb);
    VT_RUN("failover", fb, "--grace", "2", "--once", "--epochs-only", "--journal", j, "--exec", "exit 7");
    EXPECT_EXIT(1, "the journal of another table of the same capacity");
    EXPECT(strstr(R.err, "the reclaim journal of another table (device") && !R.out[0] &&
               !strstr(R.err, "exited with status 7"),
           "expected the journal refused, got '%s' / '%s'", R.out, R.err);
    VT_RUN("failover", fb, "--grace", "2", "--once", "--epochs-only", "--journal", j);
    EXPECT_EXIT(1, "the journal of another table of the same capacity, without --exec");
    EXPECT(vigil_hb_live_count(hbb, UINT64_MAX) == 3, "a slot of the other table was vacated");
    vigil_hb_close(hbb);
    /* With --exec: the two pending CMDs run from the journal, once. */
    setenv("HOOK_OUT", out, 1);
    for (int round = 0; round < 2; round++) {
        VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only", "--journal", j, "--exec",
               "echo \"$VIGIL_RECLAIM_SLOT|$VIGIL_RECLAIM_UNITS\" >> \"$HOOK_OUT\"");
        EXPECT_EXIT(0, "failover --once --exec --journal");
    }
    unsetenv("HOOK_OUT");
    char got[1024], want[256];
    vt_slurp(out, got, sizeof(got));
    snprintf(want, sizeof(want), "%u|1,40\n%u|\n", s[0], s[2]);
    EXPECT(strcmp(got, want) == 0, "the CMDs saw:\n%s\nexpected:\n%s", got, want);
    VT_RUN("inspect", j);
    EXPECT(strstr(R.out, "0 pending, 0 running"), "the journal after the runs: '%s'", R.out);
    vigil_hb_close(hb);
    return 0;
}

/* A journal of 2 entries for a table of table_cap slots, both PENDING
 * (for a slot past the table). */
static int full_journal(const char *path, const char *table, uint32_t table_cap)
{
    vigil_journal *j;
    struct stat st;
    EXPECT(stat(table, &st) == 0, "stat %s: %s", table, strerror(errno));
    const struct vigil_journal_table t = { table_cap, (uint64_t)st.st_dev, (uint64_t)st.st_ino };
    EXPECT_RC(vigil_journal_create(path, 2, &t, 0600, (gid_t)-1, &j), 0);
    uint64_t me = vigil_self_lock_word();
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t idx;
        uint64_t w;
        EXPECT_RC(vigil_journal_begin(j, me, 99, 1, 1, 0, VIGIL_RECLAIM_STALE, 0, &idx, &w), 0);
        EXPECT(vigil_journal_move(j, idx, w, me, vj_word(VJ_PENDING, vj_ticket(w)), 0), "entry %u not pending", idx);
    }
    vigil_journal_close(j);
    return 0;
}

/*
 * A watchdog without --exec never depends on FILE.journal: it reclaims
 * for its own consumer even when the journal there is full (issue 32's
 * review: "nothing to reclaim" over 2 dead slots once 64 reclaims had
 * filled it, and each reclaim handed over twice). Given --journal, a full
 * one is said on stderr and --once exits 1, its slots left as they were.
 */
static int test_plain_journal_full(void)
{
    const char *f = vt_path("pf.hb"), *j = vt_path("pf.hb.journal");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s[3];
    stale_table(hb, s);
    if (full_journal(j, f, 4) != 0)
        return 1;
    VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only");
    EXPECT_EXIT(0, "a plain failover --once beside a full FILE.journal");
    EXPECT(vt_count_lines(R.out) == 2 && !strstr(R.out, "journaled") && !strstr(R.out, "nothing"),
           "two reclaims of its own expected, got '%s' / '%s'", R.out, R.err);
    VT_RUN("inspect", j);
    EXPECT(strstr(R.out, "2 pending"), "FILE.journal was written to: '%s'", R.out);
    stale_table(hb, s);
    uint32_t occupied = vigil_hb_live_count(hb, UINT64_MAX);
    VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only", "--journal", j);
    EXPECT_EXIT(1, "failover --once --journal into a full journal");
    EXPECT(!strstr(R.out, "nothing to reclaim") && strstr(R.err, "is full (2 reclaims pending") &&
               strstr(R.err, "left as they are, unreclaimed"),
           "the full journal not said: '%s' / '%s'", R.out, R.err);
    EXPECT(vigil_hb_live_count(hb, UINT64_MAX) == occupied, "a slot was vacated into a full journal");
    /* --exec says it too, and runs what is pending. */
    VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only", "--exec", "true");
    EXPECT_EXIT(1, "failover --once --exec with a full journal");
    /* (its counts are the moment's: a CMD may have started meanwhile) */
    EXPECT(strstr(R.err, "is full (") && strstr(R.err, "left as they are, unreclaimed"),
           "--exec did not say the journal full: '%s'", R.err);
    vigil_hb_close(hb);
    return 0;
}

/*
 * FILE.journal made by someone else (another user in a sticky shared
 * directory: a FIFO, a symlink, a file of theirs) stops no plain watchdog
 * (issue 32's review: root's `vigil failover t --once` exited 1); --exec,
 * which needs it, names it and its owner.
 */
static int test_foreign_journal(void)
{
    for (int kind = 0; kind < 2; kind++) {
        const char *f = vt_path(kind ? "fj1.hb" : "fj0.hb"), *j = vt_path(kind ? "fj1.hb.journal" : "fj0.hb.journal");
        vigil_hb *hb = make_hb(f, 8);
        uint32_t s[3];
        stale_table(hb, s);
        unlink(j);
        EXPECT(kind == 0 ? mkfifo(j, 0600) == 0 : symlink("/dev/null", j) == 0, "make %s: %s", j, strerror(errno));
        VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only");
        EXPECT_EXIT(0, "a plain watchdog beside a foreign FILE.journal");
        EXPECT(vt_count_lines(R.out) == 2 && !R.err[0], "two reclaims expected, got '%s' / '%s'", R.out, R.err);
        stale_table(hb, s);
        VT_RUN("failover", f, "--grace", "2", "--once", "--epochs-only", "--exec", "true");
        EXPECT_EXIT(1, "--exec beside a foreign FILE.journal");
        EXPECT(strstr(R.err, kind == 0 ? "a FIFO, not a regular file" : "a symbolic link") &&
                   strstr(R.err, "move it away, or name another with --journal PATH") && strstr(R.err, "owner uid") &&
                   !R.out[0],
               "--exec did not name the journal: '%s' / '%s'", R.out, R.err);
        vigil_hb_close(hb);
    }
    return 0;
}

/* A watchdog of table f with --exec script and --exec-timeout timeout,
 * scanning by epochs every 5 ms, its stderr into err. */
static int exec_watchdog_timeout(struct vt_proc *p, const char *f, const char *err, const char *timeout,
                                 const char *script)
{
    return vt_spawn_logged(p, err, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                          "--epochs-only", "--exec-timeout", timeout, "--exec",
                                                          script, NULL });
}

/* As exec_watchdog_timeout, with --exec-timeout 300ms. */
static int exec_watchdog(struct vt_proc *p, const char *f, const char *err, const char *script)
{
    return exec_watchdog_timeout(p, f, err, "300ms", script);
}

/* A CMD that hangs is killed at --exec-timeout and logged; the CMDs
 * queued behind it run, and the watchdog goes on reclaiming meanwhile. */
static int test_exec_hung(void)
{
    const char *f = vt_path("hung.hb"), *out = vt_path("hung.out"), *err = vt_path("hung.err");
    vigil_hb *hb = make_hb(f, 4);
    setenv("HOOK_OUT", out, 1);
    struct vt_proc p;
    int sp = exec_watchdog(&p, f, err,
        "echo \"start $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"; [ \"$VIGIL_RECLAIM_PID\" != 701 ] || exec sleep 1000; "
        "echo \"done $VIGIL_RECLAIM_PID $VIGIL_RECLAIM_UNITS\" >> \"$HOOK_OUT\"");
    unsetenv("HOOK_OUT");
    EXPECT(sp == 0, "spawn");
    uint32_t a, b, c;
    EXPECT_RC(vigil_hb_register(hb, 701, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 702, &b), 0);
    vigil_hb_mark_in_flight(hb, b, 6);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096], ebuf[4096];
    /* 701's CMD hangs; the watchdog still reclaims 703 meanwhile. */
    bool hung = vt_file_has(out, "start 701", buf, sizeof(buf), 10000);
    EXPECT_RC(vigil_hb_register(hb, 703, &c), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    bool reclaimed = vt_read_until(&p, "pid 703", 10000);
    bool killed = vt_file_has(err, "ran past --exec-timeout 300ms; SIGTERM to its process group", ebuf, sizeof(ebuf), 10000);
    bool after = vt_file_has(out, "done 703", buf, sizeof(buf), 10000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(hung && reclaimed, "the watchdog stopped reclaiming behind a hung CMD:\n%s\n%s", buf, p.buf);
    char want[96];
    snprintf(want, sizeof(want), "--exec for slot %u (pid 701, stale, units none): ran past", a);
    EXPECT(strstr(ebuf, "its process group is gone"), "the hung CMD's end was not said: '%s'", ebuf);
    EXPECT(killed && strstr(ebuf, want), "the hung CMD was not logged: '%s'", ebuf);
    EXPECT(after && strstr(buf, "done 702 6\n") && strstr(buf, "done 702") < strstr(buf, "done 703") &&
               !strstr(buf, "done 701"),
           "the queued CMDs did not run in order after the hung one:\n%s", buf);
    EXPECT(rc == 0, "expected exit 0 on SIGTERM, got %d", rc);
    vigil_hb_close(hb);
    return 0;
}

/*
 * --exec-timeout follows the process group, not the shell (issue 32): a
 * CMD whose step ignores SIGTERM while its shell dies of it. The group
 * gets SIGKILL 5 s after the SIGTERM, whether or not the shell was
 * reaped; the next CMD starts only once the step is gone (it looks for
 * it), and so is what CMD put outside its group (a setsid'd stray,
 * reparented to the guardian: the review saw it outlive the timeout);
 * the log says what happened: SIGTERM, the shell killed by it, SIGKILL
 * 5 s later, the group gone, what it left outside ended.
 *
 * The SIGTERM must find the step and the stray in place, or the test
 * proves nothing (or, the shell killed before it made the step, sees no
 * SIGKILL at all): the timeout is generous (5 s) beside the two shells'
 * start, however loaded the machine, and the test checks that both were
 * made. The second reclaim (902) is made only once they were: the next
 * CMD comes timeout + 5 s (the SIGKILL) + a guardian tick and a poll
 * after the first one's start, about 10 s; the test waits 60 s for it.
 */
static int test_exec_timeout_follows_group(void)
{
    const char *f = vt_path("tgroup.hb"), *out = vt_path("tgroup.out"), *err = vt_path("tgroup.err");
    vigil_hb *hb = make_hb(f, 4);
    setenv("HOOK_OUT", out, 1);
    struct vt_proc p;
    int sp = exec_watchdog_timeout(&p, f, err, "5s",
        "if [ \"$VIGIL_RECLAIM_PID\" = 901 ]; then "
        "  s=$(setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' &); echo \"stray $s\" >> \"$HOOK_OUT\"; "
        "  (trap '' TERM; echo \"step $(exec sh -c 'echo $PPID')\" >> \"$HOOK_OUT\"; exec sleep 1000); "
        "else step=$(sed -n 's/^step //p' \"$HOOK_OUT\"); stray=$(sed -n 's/^stray //p' \"$HOOK_OUT\"); "
        "  echo \"next: step $(kill -0 \"$step\" 2>/dev/null && echo alive || echo gone)"
        " stray $(kill -0 \"$stray\" 2>/dev/null && echo alive || echo gone)\" >> \"$HOOK_OUT\"; fi");
    unsetenv("HOOK_OUT");
    EXPECT(sp == 0, "spawn");
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 901, &a), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096] = "", ebuf[4096] = "";
    /* The first CMD's step is there (it is made after the stray): now the
     * second reclaim, stale at once (registered at this epoch, then two
     * ticks past grace 1). */
    bool made = vt_file_has(out, "step ", buf, sizeof(buf), 60000);
    EXPECT_RC(vigil_hb_register(hb, 902, &b), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    bool next = made && vt_file_has(out, "next: ", buf, sizeof(buf), 60000);
    bool said = made && vt_file_has(err, "its process group is gone", ebuf, sizeof(ebuf), 60000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    const char *sp_at = strstr(buf, "step ");
    int step = 0;
    if (sp_at && sscanf(sp_at, "step %d", &step) == 1 && step > 0 && !vt_gone(step))
        kill(step, SIGKILL); /* a failing run leaves no step behind */
    const char *st_at = strstr(buf, "stray ");
    int stray = 0;
    if (st_at && sscanf(st_at, "stray %d", &stray) == 1 && stray > 0 && !vt_gone(stray))
        kill(stray, SIGKILL); /* nor a stray */
    EXPECT(made && strstr(buf, "stray "), "the first CMD never made its stray and step:\n%s", buf);
    EXPECT(next && strstr(buf, "next: step gone stray gone"),
           "the next CMD started beside the first one's step or its stray outside its group:\n%s", buf);
    char want[200];
    snprintf(want, sizeof(want), "--exec for slot %u (pid 901, stale, units none): ran past --exec-timeout 5s; "
             "SIGTERM to its process group; SIGKILL to its process group 5s later; the shell was killed by signal 15",
             a);
    EXPECT(said && strstr(ebuf, want), "expected '%s' in the log, got '%s'", want, ebuf);
    EXPECT(rc == 0, "expected exit 0 on SIGTERM, got %d", rc);
    vigil_hb_close(hb);
    return 0;
}

/* Past --exec-timeout, a step that catches SIGTERM outlives its shell and
 * then ends by itself (the test lets it go once it said it got the
 * SIGTERM) before the SIGKILL: the log says so, not merely that the group
 * is gone. */
static int test_exec_timeout_step_ends_itself(void)
{
    const char *f = vt_path("tself.hb"), *out = vt_path("tself.out"), *err = vt_path("tself.err");
    char go[600];
    snprintf(go, sizeof(go), "%s.go", out);
    vigil_hb *hb = make_hb(f, 4);
    setenv("HOOK_OUT", out, 1);
    struct vt_proc p;
    int sp = exec_watchdog(&p, f, err,
                           "(trap 'echo term >> \"$HOOK_OUT\"' TERM; echo step >> \"$HOOK_OUT\"; "
                           " while [ ! -e \"$HOOK_OUT.go\" ]; do sleep 0.01; done); exit 0");
    unsetenv("HOOK_OUT");
    EXPECT(sp == 0, "spawn");
    uint32_t a;
    EXPECT_RC(vigil_hb_register(hb, 903, &a), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096] = "", ebuf[4096] = "";
    bool term = vt_file_has(out, "term", buf, sizeof(buf), 30000);
    int fd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0600); /* the step's end, whatever happened */
    if (fd >= 0)
        close(fd);
    bool said = vt_file_has(err, "its process group is gone", ebuf, sizeof(ebuf), 15000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(term, "the step never got the SIGTERM: '%s'", buf);
    EXPECT(said && strstr(ebuf, "ran past --exec-timeout 300ms; SIGTERM to its process group; the shell was killed "
                                "by signal 15 (Terminated); the rest of its group outlived the shell and ended by "
                                "itself before the SIGKILL; its process group is gone") &&
               !strstr(ebuf, "SIGKILL to its"),
           "the log did not say the step ended by itself: '%s'", ebuf);
    EXPECT(rc == 0, "expected exit 0 on SIGTERM, got %d", rc);
    vigil_hb_close(hb);
    return 0;
}

/* SIGTERM while a CMD runs and another waits: both still run before the
 * watchdog exits 0, so a reclaim made is never dropped by a restart. */
static int test_exec_runs_on_stop(void)
{
    const char *f = vt_path("drain.hb"), *out = vt_path("drain.out"), *gate = vt_path("drain.gate");
    vigil_hb *hb = make_hb(f, 4);
    setenv("HOOK_OUT", out, 1);
    setenv("HOOK_GATE", gate, 1);
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "failover", f, "--grace", "1", "--interval", "5ms", "--epochs-only", "--exec",
                      "echo \"start $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"; "
                      "while [ ! -e \"$HOOK_GATE\" ]; do sleep 0.01; done; echo \"done $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"");
    unsetenv("HOOK_OUT");
    unsetenv("HOOK_GATE");
    EXPECT(sp == 0, "spawn");
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 801, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 802, &b), 0);
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096];
    bool both = vt_read_until(&p, "pid 802", 10000);
    bool first = vt_file_has(out, "start 80", buf, sizeof(buf), 10000);
    kill(p.pid, SIGTERM);
    int fd = open(gate, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    close(fd);
    int st = vt_wait(p.pid, 20000);
    close(p.fd);
    vt_slurp(out, buf, sizeof(buf));
    EXPECT(both && first, "the reclaims or the first CMD never came: '%s' / '%s'", p.buf, buf);
    EXPECT(strstr(buf, "done 801") && strstr(buf, "done 802"), "a CMD was dropped on SIGTERM:\n%s", buf);
    EXPECT(st == 0, "expected exit 0, got %d", st);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_usage), VT_CASE(test_killed_worker_exited), VT_CASE(test_once_json), VT_CASE(test_once_human), VT_CASE(test_once_gone_pid),
        VT_CASE(test_watchdog_runs), VT_CASE(test_two_watchdogs_exactly_once), VT_CASE(test_exec_env),
        VT_CASE(test_exec_hung), VT_CASE(test_exec_timeout_follows_group),
           VT_CASE(test_exec_timeout_step_ends_itself), VT_CASE(test_exec_runs_on_stop), VT_CASE(test_journal_file),
           VT_CASE(test_plain_journal_full), VT_CASE(test_foreign_journal))
