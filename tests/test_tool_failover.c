/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil failover`, run as a program: usage errors, --once in
 * JSON (exact keys and values, one object a line) and human form, the
 * long-running watchdog printing reclaims through a pipe as they happen
 * and ending on SIGTERM with exit 0, two watchdog processes racing over
 * the same stale slots with every slot reclaimed exactly once.
 */
#include "tooltest.h"

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
    int ra = vt_stop(&a, SIGTERM, 10000), rb = vt_stop(&b, SIGINT, 10000);
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

VT_MAIN(VT_CASE(test_usage), VT_CASE(test_killed_worker_exited), VT_CASE(test_once_json), VT_CASE(test_once_human),
        VT_CASE(test_watchdog_runs), VT_CASE(test_two_watchdogs_exactly_once))
