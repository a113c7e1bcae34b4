/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil failover --exec` killed at each step of a reclaim
 * (THE JOURNAL, src/journal_internal.h; model/journal.pml): three workers
 * go stale, watchdog A stops itself at the step the test names
 * (VIGIL_TEST_JOURNAL_STOP: in the claim with the slot locked, before the
 * guardian, in the guardian holding the run lock, with CMD running,
 * between a log line and the free), the test kills it there with SIGKILL
 * (or SIGABRT, as WatchdogSec= does), its guardian too or not, and
 * watchdog B (--once) must run every pending CMD exactly once, say what
 * became of the one that was running (killed with its watchdog, or may
 * have run), and leave the journal empty. Issue 32 saw the restarted
 * watchdog say "nothing to reclaim" while two CMDs were lost.
 *
 * Then two watchdogs at once over one table and journal: every CMD runs
 * exactly once and never two at a time; and a watchdog stopped (SIGSTOP)
 * while its CMD runs, then continued: its CMD's outcome is its own to
 * say, the others' CMDs run meanwhile, nothing twice.
 */
#include "tooltest.h"

#include "journal_internal.h"
#include "proc_internal.h"

#include <sys/resource.h>
#include <sys/wait.h>

/* Each CMD says it ran (pid and units); HOOK_HOLD's CMD then waits to be
 * killed, HOOK_FAIL's exits 3. */
#define SCRIPT                                                                                                 \
    "echo \"ran $VIGIL_RECLAIM_PID $VIGIL_RECLAIM_UNITS\" >> \"$HOOK_OUT\"; "                                 \
    "[ \"$VIGIL_RECLAIM_PID\" != \"$HOOK_HOLD\" ] || exec sleep 1000; "                                       \
    "[ \"$VIGIL_RECLAIM_PID\" != \"$HOOK_FAIL\" ] || exit 3"

static vigil_hb *stale_three(const char *f)
{
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    uint32_t s;
    for (uint32_t i = 0; i < 3; i++) {
        vigil_hb_register(hb, 911 + i, &s);
        vigil_hb_mark_in_flight(hb, s, 1 + i);
    }
    return hb;
}

/* How many lines of `text` start with `prefix`. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        n += strncmp(l, prefix, pl) == 0;
    return n;
}

/* Every entry of the table's journal is free. */
static bool journal_empty(const char *f)
{
    char path[600];
    snprintf(path, sizeof(path), "%s.journal", f);
    vigil_journal *j;
    if (vigil_journal_open(path, &j) < 0)
        return false;
    uint32_t c[5];
    vigil_journal_counts(j, c);
    uint32_t cap = j->capacity;
    vigil_journal_close(j);
    return c[VJ_FREE] == cap;
}

enum who { KILL_TOOL, KILL_BOTH, KILL_TOOL_ABRT };

struct step {
    const char *point; /* VIGIL_TEST_JOURNAL_STOP, or "cmd": CMD of 911 running */
    bool        in_guardian;
    enum who    who;
    int         ran911;  /* how often 911's CMD must have run: 1, 0, or -1 (at most once) */
    const char *said;    /* what A or B must say about 911, or NULL */
    const char *fail;    /* HOOK_FAIL */
    bool        hold;    /* 911's CMD waits to be killed */
    bool        twice;   /* `said` by both A and B */
};

static int kill_at(const struct step *st)
{
    const char *f = vt_path("kill.hb"), *out = vt_path("kill.out"), *aerr = vt_path("a.err");
    char journal[600];
    snprintf(journal, sizeof(journal), "%s.journal", f);
    unlink(f), unlink(journal), unlink(out);
    vigil_hb *hb = stale_three(f);
    setenv("HOOK_OUT", out, 1);
    setenv("HOOK_HOLD", strcmp(st->point, "cmd") == 0 || st->hold ? "911" : "none", 1);
    setenv("HOOK_FAIL", st->fail ? st->fail : "none", 1);
    if (strcmp(st->point, "cmd") != 0)
        setenv("VIGIL_TEST_JOURNAL_STOP", st->point, 1);
    struct vt_proc a;
    int sp = vt_spawn_logged(&a, aerr, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                              "--epochs-only", "--exec", SCRIPT, NULL });
    unsetenv("VIGIL_TEST_JOURNAL_STOP");
    EXPECT(sp == 0, "spawn");
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    /* The moment: A (or its guardian) stopped at the step, or 911's CMD
     * running. */
    pid_t g = 0;
    int wst = 0;
    char buf[4096];
    bool there;
    if (strcmp(st->point, "cmd") == 0)
        there = vt_file_has(out, "ran 911", buf, sizeof(buf), 20000);
    else if (st->in_guardian)
        there = VT_WAIT_FOR((g = vt_stopped_child(a.pid)) != 0, 20000);
    else
        there = VT_WAIT_FOR(waitpid(a.pid, &wst, WNOHANG | WUNTRACED) == a.pid && WIFSTOPPED(wst), 20000);
    if (!there) {
        kill(a.pid, SIGKILL);
        vt_wait(a.pid, 10000);
        close(a.fd);
        vigil_hb_close(hb);
        vt_slurp(aerr, buf, sizeof(buf));
        fprintf(stderr, "%s: watchdog A never reached the step; its stderr: %s\n", st->point, buf);
        return 1;
    }
    /* Both at the step: the watchdog frozen, then the guardian killed, then
     * the watchdog. The guardian, in a process group of its own, would be
     * continued by the kernel (SIGCONT to an orphaned group with a stopped
     * member) the moment its watchdog died, and go on past the step; and
     * a watchdog left running meanwhile would start the next CMD. */
    if (g && st->who == KILL_BOTH) {
        kill(a.pid, SIGSTOP);
        VT_WAIT_FOR(waitpid(a.pid, &wst, WNOHANG | WUNTRACED) == a.pid && WIFSTOPPED(wst), 10000);
        kill(g, SIGKILL);
        VT_WAIT_FOR(vt_gone(g), 10000);
    }
    kill(a.pid, st->who == KILL_TOOL_ABRT ? SIGABRT : SIGKILL);
    kill(a.pid, SIGCONT); /* a stopped A dies of its SIGABRT only once continued */
    vt_wait(a.pid, 10000);
    close(a.fd);
    if (g && st->who != KILL_BOTH)
        kill(g, SIGCONT); /* the guardian goes on (the kernel's SIGCONT may have come first) */
    /* B, once: repairs, sweeps, runs what is pending, says what happened. */
    setenv("HOOK_HOLD", "none", 1);
    int rc = vt_runv(60000, (const char *const[]){ "failover", f, "--grace", "1", "--once", "--epochs-only",
                                                   "--exec", SCRIPT, NULL });
    unsetenv("HOOK_OUT"), unsetenv("HOOK_HOLD"), unsetenv("HOOK_FAIL");
    char ran[4096], aerr_text[4096];
    vt_slurp(out, ran, sizeof(ran));
    vt_slurp(aerr, aerr_text, sizeof(aerr_text));
    int n911 = count_lines(ran, "ran 911 1"), n912 = count_lines(ran, "ran 912 2"), n913 = count_lines(ran, "ran 913 3");
    bool empty = journal_empty(f);
    vigil_hb_close(hb);
    bool ok911 = st->ran911 < 0 ? n911 <= 1 : n911 == st->ran911;
    /* Said by the watchdog that saw it end (A, if it looked before its
     * kill) or by the one that took its entry over (B): at least once. */
    bool a_said = st->said && strstr(aerr_text, st->said), b_said = st->said && strstr(R.err, st->said);
    bool said = !st->said || (st->twice ? a_said && b_said : a_said || b_said);
    if (!ok911 || n912 != 1 || n913 != 1 || !empty || !said || rc < 0) {
        fprintf(stderr, "killed at %s (%s): 911 ran %d times (want %d), 912 %d, 913 %d (want 1 each), journal "
                        "empty %d, B exited %d\nCMDs:\n%sB's stderr (want '%s'):\n%sA's stderr:\n%s\n",
                st->point, st->who == KILL_BOTH ? "tool and guardian" : st->who == KILL_TOOL ? "tool" : "tool, SIGABRT",
                n911, st->ran911, n912, n913, empty, rc, ran, st->said ? st->said : "", R.err, aerr_text);
        if (st->said)
            fprintf(stderr, "said by A %d, by B %d (want %s)\n", a_said, b_said, st->twice ? "both" : "either");
        return 1;
    }
    return 0;
}

/* In the claim, the slot locked: the journal's entry begun, the bits
 * swapped, the entry committed. The next watchdog's repair settles it. */
static int test_killed_in_claim(void)
{
    static const char *const points[] = { "begun", "swapped", "committed" };
    for (size_t i = 0; i < 3; i++) {
        struct step st = { .point = points[i], .who = KILL_TOOL, .ran911 = 1 };
        if (kill_at(&st))
            return 1;
    }
    return 0;
}

/* Between the reclaims and the first guardian: every CMD pending. */
static int test_killed_before_guardian(void)
{
    struct step st = { .point = "fork", .who = KILL_TOOL, .ran911 = 1 };
    return kill_at(&st);
}

/* The guardian killed with its watchdog: holding the run lock before its
 * entry runs (run exactly once, by B); with the entry running but CMD not
 * yet forked (B cannot know: "may have run", never run again); with the
 * entry done (B says it for the dead watchdog: 911 fails here). */
static int test_killed_in_guardian(void)
{
    const struct step steps[] = {
        { .point = "run-taken", .in_guardian = true, .who = KILL_BOTH, .ran911 = 1 },
        { .point = "started", .in_guardian = true, .who = KILL_BOTH, .ran911 = 0,
          .said = "(pid 911, stale, units 1): may have run" },
        { .point = "finished", .in_guardian = true, .who = KILL_BOTH, .ran911 = 1,
          .said = "(pid 911, stale, units 1): exited with status 3", .fail = "911" },
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (kill_at(&steps[i]))
            return 1;
    return 0;
}

/* The watchdog killed, its guardian left alive: stopped at the start of
 * the run (it then finds its watchdog gone and ends what it started), or
 * with CMD running (SIGKILL, and SIGABRT as WatchdogSec= sends it): the
 * guardian ends CMD's group and B says it was killed with its watchdog. */
static int test_killed_tool_guardian_lives(void)
{
    const struct step steps[] = {
        { .point = "started", .in_guardian = true, .who = KILL_TOOL, .ran911 = -1, .hold = true,
          .said = "(pid 911, stale, units 1): killed: the watchdog running it died" },
        { .point = "cmd", .who = KILL_TOOL, .ran911 = 1,
          .said = "(pid 911, stale, units 1): killed: the watchdog running it died; SIGTERM to its process group" },
        { .point = "cmd", .who = KILL_TOOL_ABRT, .ran911 = 1,
          .said = "(pid 911, stale, units 1): killed: the watchdog running it died" },
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (kill_at(&steps[i]))
            return 1;
    return 0;
}

/* Between its log line and the free: the next watchdog says it again
 * (twice, never never). */
static int test_killed_after_log(void)
{
    struct step st = { .point = "logged", .who = KILL_TOOL, .ran911 = 1, .fail = "911", .twice = true,
                       .said = "(pid 911, stale, units 1): exited with status 3" };
    return kill_at(&st);
}

/* Two watchdogs at once, --exec on both, workers dying while they run:
 * every CMD exactly once, never two at a time (each CMD holds a directory
 * that a second one would fail to make). */
static int test_two_watchdogs_exec(void)
{
    const char *f = vt_path("two.hb"), *out = vt_path("two.out"), *held = vt_path("two.held");
    vigil_hb *hb = vt_hb_fresh_at(f, 16);
    setenv("HOOK_OUT", out, 1);
    setenv("HOOK_HELD", held, 1);
    const char *script = "if mkdir \"$HOOK_HELD\" 2>/dev/null; then echo \"ran $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"; "
                         "rmdir \"$HOOK_HELD\"; else echo \"overlap $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"; fi";
    static struct vt_proc a, b;
    int sa = VT_SPAWN(&a, "failover", f, "--grace", "1", "--interval", "5ms", "--epochs-only", "--exec", script);
    int sb = VT_SPAWN(&b, "failover", f, "--grace", "1", "--interval", "5ms", "--epochs-only", "--exec", script);
    unsetenv("HOOK_OUT"), unsetenv("HOOK_HELD");
    EXPECT(sa == 0 && sb == 0, "spawn");
    enum { ROUNDS = 4, PER = 8 };
    uint32_t s;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER; i++)
            vigil_hb_register(hb, (uint32_t)(3000 + round * PER + i), &s);
        vigil_hb_tick(hb);
        vigil_hb_tick(hb);
        VT_WAIT_FOR(vigil_hb_live_count(hb, 1000) == 0, 20000); /* all reclaimed, by one or the other */
    }
    char buf[16384];
    bool all = VT_WAIT_FOR((vt_slurp(out, buf, sizeof(buf)), vt_count_lines(buf) >= ROUNDS * PER), 60000);
    int ra = vt_stop_tool(&a, SIGTERM, 30000), rb = vt_stop_tool(&b, SIGTERM, 30000);
    vt_slurp(out, buf, sizeof(buf));
    vigil_hb_close(hb);
    EXPECT(all && !strstr(buf, "overlap"), "CMDs: all %d, log:\n%s", all, buf);
    for (int k = 0; k < ROUNDS * PER; k++) {
        char line[32];
        snprintf(line, sizeof(line), "ran %d", 3000 + k);
        EXPECT(count_lines(buf, line) == 1, "%s: %d times, log:\n%s", line, count_lines(buf, line), buf);
    }
    EXPECT(ra == 0 && rb == 0, "watchdogs exited %d and %d", ra, rb);
    EXPECT(journal_empty(f), "the journal is not empty");
    return 0;
}

/* A watchdog stopped while its CMD runs, continued later: meanwhile the
 * other watchdog runs the other CMDs once the first is gone (the run lock
 * is the guardian's, which is not stopped), and does not say the stopped
 * one's outcome; continued, the stopped watchdog says its own. */
static int test_stopped_watchdog_resumes(void)
{
    const char *f = vt_path("stop.hb"), *out = vt_path("stop.out"), *gate = vt_path("stop.gate");
    const char *aerr = vt_path("stop-a.err"), *berr = vt_path("stop-b.err");
    vigil_hb *hb = stale_three(f);
    setenv("HOOK_OUT", out, 1);
    setenv("HOOK_GATE", gate, 1);
    const char *script = "echo \"ran $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\"; "
                         "if [ \"$VIGIL_RECLAIM_PID\" = 911 ]; then while [ ! -e \"$HOOK_GATE\" ]; do sleep 0.01; done; "
                         "exit 3; fi";
    static struct vt_proc a, b;
    int sa = vt_spawn_logged(&a, aerr, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                              "--epochs-only", "--exec", script, NULL });
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096];
    bool first = vt_file_has(out, "ran 911", buf, sizeof(buf), 20000);
    kill(a.pid, SIGSTOP);
    int wst;
    bool stopped = VT_WAIT_FOR(waitpid(a.pid, &wst, WNOHANG | WUNTRACED) == a.pid && WIFSTOPPED(wst), 10000);
    int sb = vt_spawn_logged(&b, berr, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                              "--epochs-only", "--exec", script, NULL });
    unsetenv("HOOK_OUT"), unsetenv("HOOK_GATE");
    int fd = open(gate, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    close(fd);
    bool rest = vt_file_has(out, "ran 913", buf, sizeof(buf), 20000) && vt_file_has(out, "ran 912", buf, sizeof(buf), 20000);
    char bt[4096];
    vt_slurp(berr, bt, sizeof(bt));
    bool b_said = strstr(bt, "pid 911") != NULL;
    kill(a.pid, SIGCONT);
    char at[4096];
    bool a_said = vt_file_has(aerr, "(pid 911, stale, units 1): exited with status 3", at, sizeof(at), 20000);
    int ra = vt_stop_tool(&a, SIGTERM, 30000), rb = vt_stop_tool(&b, SIGTERM, 30000);
    vt_slurp(out, buf, sizeof(buf));
    vigil_hb_close(hb);
    EXPECT(sa == 0 && sb == 0 && first && stopped, "setup: spawn %d %d, first CMD %d, A stopped %d", sa, sb, first,
           stopped);
    EXPECT(rest, "B did not run the other CMDs while A was stopped:\n%s", buf);
    EXPECT(!b_said, "B said the stopped watchdog's outcome: %s", bt);
    EXPECT(a_said, "A, continued, did not say its CMD's outcome: %s", at);
    EXPECT(count_lines(buf, "ran 911") == 1 && count_lines(buf, "ran 912") == 1 && count_lines(buf, "ran 913") == 1,
           "not exactly once:\n%s", buf);
    EXPECT(ra == 0 && rb == 0, "watchdogs exited %d and %d", ra, rb);
    EXPECT(journal_empty(f), "the journal is not empty");
    return 0;
}

/*
 * A watchdog and its guardian killed while 911's CMD runs with a worker
 * in its process group (a step in the background): the shell dies of its
 * parent-death signal, the step would not, and never gets one. The next
 * watchdog's sweep must end the group before it takes the run lock over,
 * so that 912's and 913's CMDs never run beside the step (each says so
 * when it finds the step still there).
 */
static int test_killed_group_ended(void)
{
    const char *f = vt_path("grp.hb"), *out = vt_path("grp.out"), *stepf = vt_path("grp.step");
    const char *aerr = vt_path("grp-a.err");
    unlink(out), unlink(stepf);
    vigil_hb *hb = stale_three(f);
    setenv("HOOK_OUT", out, 1);
    setenv("HOOK_STEP", stepf, 1);
    const char *script =
        "if [ \"$VIGIL_RECLAIM_PID\" = 911 ]; then sleep 1000 & echo \"$$ $!\" > \"$HOOK_STEP.tmp\"; "
        "mv \"$HOOK_STEP.tmp\" \"$HOOK_STEP\"; wait; fi; "
        "st=$(cut -d' ' -f3 /proc/$(cut -d' ' -f2 \"$HOOK_STEP\")/stat 2>/dev/null); "
        "case \"$st\" in ''|Z|X) echo \"ran $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\" ;; "
        "*) echo \"beside $VIGIL_RECLAIM_PID\" >> \"$HOOK_OUT\" ;; esac";
    struct vt_proc a;
    int sp = vt_spawn_logged(&a, aerr, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                              "--epochs-only", "--exec", script, NULL });
    EXPECT(sp == 0, "spawn");
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    char buf[4096];
    int sh = 0, step = 0;
    bool running = vt_file_has(stepf, "\n", buf, sizeof(buf), 20000) && sscanf(buf, "%d %d", &sh, &step) == 2;
    char state;
    pid_t g = running ? vt_parent_of(sh, &state) : 0;
    int wst;
    /* A frozen first (it would end the group itself), then the guardian. */
    kill(a.pid, SIGSTOP);
    bool frozen = VT_WAIT_FOR(waitpid(a.pid, &wst, WNOHANG | WUNTRACED) == a.pid && WIFSTOPPED(wst), 10000);
    if (g > 1 && g != a.pid) {
        kill(g, SIGKILL);
        VT_WAIT_FOR(vt_gone(g), 10000);
    }
    kill(a.pid, SIGKILL);
    kill(a.pid, SIGCONT);
    vt_wait(a.pid, 10000);
    close(a.fd);
    bool shell_gone = VT_WAIT_FOR(vt_gone(sh), 10000);
    bool step_lives = step > 0 && !vt_gone(step);
    int rc = vt_runv(60000, (const char *const[]){ "failover", f, "--grace", "1", "--once", "--epochs-only", "--exec",
                                                   script, NULL });
    unsetenv("HOOK_OUT"), unsetenv("HOOK_STEP");
    bool step_gone = step > 0 && vt_gone(step);
    if (step > 0 && !step_gone)
        kill(step, SIGKILL);
    vt_slurp(out, buf, sizeof(buf));
    vigil_hb_close(hb);
    EXPECT(running && frozen && g > 1 && g != a.pid, "setup: CMD running %d (shell %d, step %d), A frozen %d, "
           "guardian %d", running, sh, step, frozen, (int)g);
    EXPECT(shell_gone && step_lives, "the guardian's death: the shell gone %d (want 1), the step alive %d (want 1)",
           shell_gone, step_lives);
    EXPECT(rc == 1 && step_gone && strstr(R.err, "(pid 911, stale, units 1): may have run"),
           "B: exit %d (want 1: 911 may have run), the step gone %d, stderr '%s'", rc, step_gone, R.err);
    EXPECT(count_lines(buf, "ran 912") == 1 && count_lines(buf, "ran 913") == 1 && !strstr(buf, "beside"),
           "the next CMDs ran beside the dead guardian's step, or not once:\n%s", buf);
    EXPECT(journal_empty(f), "the journal is not empty");
    return 0;
}

/*
 * A journal whose header a writer of it forged: the run lock held by a
 * dead word, a RUNNING entry of that word, and run_pgid naming another
 * process group of ours (its leader's start time right). The sweep must
 * not signal it: none of its members is that entry's CMD (no
 * VIGIL_RECLAIM_TICKET of it in their environment), so a writer of the
 * journal cannot turn a watchdog on another's processes. The entry is
 * said as a dead guardian's, and the lock taken over.
 */
static int test_forged_group_spared(void)
{
    const char *f = vt_path("forge.hb");
    char path[600];
    snprintf(path, sizeof(path), "%s.journal", f);
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    vigil_journal *j;
    struct stat st;
    EXPECT(stat(f, &st) == 0, "stat %s: %s", f, strerror(errno));
    const struct vigil_journal_table t = { 4, (uint64_t)st.st_dev, (uint64_t)st.st_ino };
    EXPECT_RC(vigil_journal_create(path, 64, &t, 0600, (gid_t)-1, &j), 0);
    fflush(NULL);
    pid_t victim = fork();
    if (victim == 0) {
        setpgid(0, 0);
        for (;;)
            pause();
    }
    setpgid(victim, victim);
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    vt_wait(gone, 10000);
    uint64_t start = 0;
    bool known = VT_WAIT_FOR(vigil_proc_start_time((uint32_t)victim, &start) == 0 && getpgid(victim) == victim, 10000);
    uint64_t w = vigil_lock_word_of((uint32_t)gone, vigil_self_pidns(), 1);
    atomic_store(&j->hdr->run_word, w);
    atomic_store(&j->hdr->run_seq, 1);
    atomic_store(&j->hdr->run_start, start);
    atomic_store(&j->hdr->run_pgid, (uint32_t)victim);
    atomic_store(&j->e[0].slot, 0);
    atomic_store(&j->e[0].pid, 999);
    atomic_store(&j->e[0].gen, 1);
    atomic_store(&j->e[0].why, VIGIL_RECLAIM_STALE);
    bool moved = vigil_journal_move(j, 0, vj_word(VJ_FREE, 0), 0, vj_word(VJ_RUNNING, 7), w);
    vigil_journal_close(j);
    VT_RUN("failover", f, "--grace", "1", "--once", "--epochs-only", "--exec", "true");
    bool alive = !vt_gone(victim);
    kill(victim, SIGKILL);
    vt_wait(victim, 10000);
    vigil_hb_close(hb);
    EXPECT(known && moved, "setup: the victim's start time %d, the entry forged %d", known, moved);
    EXPECT(alive, "the watchdog killed a process group the forged header named");
    EXPECT(strstr(R.err, "(pid 999, stale, units none): may have run"), "the forged entry was not said: '%s'", R.err);
    EXPECT(journal_empty(f), "the journal is not empty");
    return 0;
}

/*
 * A run lock held by a guardian in another pid namespace (whose death no
 * watchdog here can see, so none takes it over): the watchdog says who
 * holds it and in which namespace, inspect says the namespace, and a
 * --once (or a stop) does not wait for it for ever: past --exec-timeout
 * and twice the 5 s kill grace it leaves the pending CMD in the journal,
 * says so, and exits 1 (issue 32's review: SIGTERM hung the watchdog).
 */
static int test_foreign_run_lock(void)
{
    const char *f = vt_path("foreign.hb");
    char path[600];
    snprintf(path, sizeof(path), "%s.journal", f);
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    struct stat st;
    EXPECT(stat(f, &st) == 0, "stat %s: %s", f, strerror(errno));
    const struct vigil_journal_table t = { 4, (uint64_t)st.st_dev, (uint64_t)st.st_ino };
    vigil_journal *j;
    EXPECT_RC(vigil_journal_create(path, 64, &t, 0600, (gid_t)-1, &j), 0);
    /* A watchdog of ours that is gone (a pid past any), whose reclaim the
     * drain would run; a guardian in a namespace that is not ours. */
    uint64_t self = vigil_self_lock_word(), pid_bits = VIGIL_LOCK_PID_MASK << VIGIL_LOCK_PID_SHIFT;
    uint64_t gone = (self & ~pid_bits) | ((uint64_t)4194000 << VIGIL_LOCK_PID_SHIFT);
    uint32_t ns = vigil_lock_ns(self) == 79 ? 80 : 79;
    uint64_t foreign = vigil_lock_word_of(12345, UINT64_C(0xf0000000) + ns - 2, 1);
    uint32_t idx;
    uint64_t w;
    EXPECT_RC(vigil_journal_begin(j, gone, 2, 999, 1, 0, VIGIL_RECLAIM_STALE, 0, &idx, &w), 0);
    EXPECT(vigil_journal_move(j, idx, w, gone, vj_word(VJ_PENDING, vj_ticket(w)), 0), "pending");
    atomic_store(&j->hdr->run_word, foreign);
    atomic_store(&j->hdr->run_seq, 1);
    vigil_journal_close(j);
    VT_RUN("inspect", path);
    char want[96];
    snprintf(want, sizeof(want), "run lock held by pid 12345 (a guardian of failover --exec) in pid namespace pid:[%u]",
             0xf0000000u + ns - 2);
    EXPECT(strstr(R.out, want) && strstr(R.out, "not ours"), "inspect said '%s', wanted '%s'", R.out, want);
    int rc = vt_runv(60000, (const char *const[]){ "failover", f, "--grace", "1", "--once", "--epochs-only",
                                                   "--exec-timeout", "1ms", "--exec", "true", NULL });
    EXPECT(rc == 1, "--once with the run lock held from another namespace: expected exit 1, got %d", rc);
    EXPECT(strstr(R.err, "waiting: the run lock is held by pid 12345 in pid namespace pid:[") &&
               strstr(R.err, "(pid 999, stale, units none): not run yet: left in the journal for the next watchdog "
                             "(the run lock is held by pid 12345"),
           "the watchdog did not say who holds the run lock: '%s'", R.err);
    vigil_hb_close(hb);
    return 0;
}

/* Whether the run lock of table f's journal is free: the guardian, once
 * CMD's group is gone, writes the outcome (DONE) and then releases it. */
static bool run_lock_free(const char *f)
{
    char path[600];
    snprintf(path, sizeof(path), "%s.journal", f);
    vigil_journal *j;
    if (vigil_journal_open_readonly(path, &j) < 0)
        return false;
    bool free_now = !(atomic_load_explicit(&j->hdr->run_seq, memory_order_acquire) & 1u);
    vigil_journal_close(j);
    return free_now;
}

/* As nobody, a watchdog whose --exec CMD is a set-user-ID root program:
 * once CMD has said it runs, the watchdog gets SIGKILL, and CMD must go
 * with it (its guardian ends the group; the parent-death signal alone
 * would not hold a set-user-ID CMD); the next watchdog says it was killed
 * with its watchdog. */
static int suid_body(void *arg)
{
    const char *copy = arg;
    const char *f = vt_path("suid.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 2);
    uint32_t s;
    vigil_hb_register(hb, 999, &s);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "exec %s reclaim", copy);
    const char *err = vt_path("suid.err");
    struct vt_proc p;
    if (vt_spawn_logged(&p, err, (const char *const[]){ "failover", f, "--grace", "1", "--interval", "5ms",
                                                        "--epochs-only", "--exec", cmd, NULL }) != 0)
        return 1;
    vigil_hb_tick(hb);
    vigil_hb_tick(hb);
    /* CMD's stdout is the watchdog's stderr (its own stdout, the reclaim
     * lines, stays open on p.fd: closed, the watchdog would die of
     * SIGPIPE at its first line). */
    char buf[4096];
    int cmd_pid = 0, euid = -1, ruid = -1;
    bool said = vt_file_has(err, "reclaim pid ", buf, sizeof(buf), 15000) &&
                VT_WAIT_FOR((vt_slurp(err, buf, sizeof(buf)), strchr(strstr(buf, "reclaim pid "), '\n') != NULL),
                            15000) &&
                sscanf(strstr(buf, "reclaim pid "), "reclaim pid %d euid %d ruid %d", &cmd_pid, &euid, &ruid) == 3;
    if (!said || euid != 0 || ruid != (int)getuid()) {
        kill(p.pid, SIGKILL);
        vt_wait(p.pid, 15000);
        close(p.fd);
        fprintf(stderr, "the set-user-ID CMD did not say it runs as euid 0, ruid %d: '%s'\n", (int)getuid(), buf);
        return 1;
    }
    kill(p.pid, SIGKILL);
    vt_wait(p.pid, 15000);
    close(p.fd);
    bool dead = VT_WAIT_FOR(vt_gone(cmd_pid), 10000);
    if (!dead)
        kill(cmd_pid, SIGKILL);
    EXPECT(dead, "the set-user-ID CMD (pid %d) runs on after the watchdog was killed", (int)cmd_pid);
    /* CMD gone is not yet its entry DONE: the guardian writes that, then
     * frees the run lock (the next watchdog would say "may have run" of a
     * guardian it finds dead, not of one still finishing). */
    EXPECT(VT_WAIT_FOR(run_lock_free(f), 15000), "the guardian never released the run lock");
    VT_RUN("failover", f, "--grace", "1", "--once", "--epochs-only", "--exec", "true");
    EXPECT(strstr(R.err, "(pid 999, stale, units none): killed: the watchdog running it died"),
           "the next watchdog did not say it: '%s'", R.err);
    vigil_hb_close(hb);
    return 0;
}

static int test_suid_cmd_dies_with_watchdog(void)
{
    const char *copy = vt_suid_copy();
    if (!copy)
        return VT_SKIP;
    return vt_as_nobody(suid_body, (void *)copy);
}

int main(void)
{
    struct rlimit no_core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &no_core); /* SIGABRT's core, not wanted here */
    static const struct vt_case cases[] = {
        VT_CASE(test_killed_in_claim),          VT_CASE(test_killed_before_guardian),
        VT_CASE(test_killed_in_guardian),       VT_CASE(test_killed_tool_guardian_lives),
        VT_CASE(test_killed_after_log),         VT_CASE(test_two_watchdogs_exec),
        VT_CASE(test_stopped_watchdog_resumes), VT_CASE(test_suid_cmd_dies_with_watchdog),
        VT_CASE(test_killed_group_ended),       VT_CASE(test_forged_group_spared),
        VT_CASE(test_foreign_run_lock),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
