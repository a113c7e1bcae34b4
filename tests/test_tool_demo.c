/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil demo --workers 3` end to end, read through a pipe as
 * it runs: it tells each act as it happens, ends with its "ok:" lines and
 * exit 0 within 60 s, and leaves no directory and no process behind. An
 * interrupted demo (SIGTERM) fails with exit 1 and cleans up all the same.
 */
#include "tooltest.h"

#include <dirent.h>

/* Entries named vigil-demo.* in the test's directory (the demo's TMPDIR). */
static int leftovers(void)
{
    DIR *dir = opendir(vt_tmpdir());
    int n = 0;
    struct dirent *e;
    while (dir && (e = readdir(dir)))
        n += strncmp(e->d_name, "vigil-demo.", 11) == 0;
    if (dir)
        closedir(dir);
    return n;
}

/* The pids the demo's intro lists, one line each: "  worker 0: pid 1234, ...". */
static int worker_pids(const char *out, pid_t *pids, int max)
{
    int n = 0;
    for (const char *p = out; p && *p && n < max; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned w;
        int pid;
        if (sscanf(p, "  worker %u: pid %d,", &w, &pid) == 2 && pid > 0)
            pids[n++] = (pid_t)pid;
    }
    return n;
}

static bool all_gone(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (kill(pids[i], 0) == 0 || errno != ESRCH)
            return false;
    return true;
}

static int test_demo_end_to_end(void)
{
    setenv("TMPDIR", vt_tmpdir(), 1);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "demo", "--workers", "3") == 0, "spawn");
    /* the story arrives while the demo runs: the kill is told before the end */
    bool kill_told = vt_read_until(&p, "== 2. kill -9 the leader", 60000);
    /* the last line; the first one starts "vigil demo: " too, but no "\n" before it */
    bool ended = kill_told && vt_read_until(&p, "\nvigil demo: ", 60000) &&
                 vt_read_until(&p, " s\n", 5000);
    int rc = vt_wait(p.pid, 60000);
    close(p.fd);
    bool summary_after = kill_told && strstr(p.buf, "== summary") &&
                         strstr(p.buf, "== 2.") < strstr(p.buf, "== summary");
    EXPECT(kill_told && ended, "the demo did not tell its story within 60 s:\n%s", p.buf);
    EXPECT(rc == 0, "expected exit 0, got %d:\n%s", rc, p.buf);
    EXPECT(summary_after, "the summary came before the kill:\n%s", p.buf);
    EXPECT(!strstr(p.buf, "FAIL"), "a check failed:\n%s", p.buf);
    int oks = 0;
    for (const char *q = p.buf; (q = strstr(q, "\nok: ")); q++)
        oks++;
    EXPECT(oks >= 14, "expected at least 14 'ok:' lines, got %d:\n%s", oks, p.buf);
    static const char *const must[] = {
        "exactly once", "stale", "without the dead peer", "took it over with fencing token",
        "new leader", "the lowest live pid", "vigil demo: all",
    };
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
        EXPECT(strstr(p.buf, must[i]), "the summary lacks '%s':\n%s", must[i], p.buf);
    /* Each "leader:" line names a worker, or says there is none (the
     * wind-down once told "pid 0 (worker -1)"). */
    for (const char *l = strstr(p.buf, "> leader: "); l; l = strstr(l + 1, "> leader: ")) {
        const char *eol = strchr(l, '\n');
        int len = eol ? (int)(eol - l) : (int)strlen(l);
        EXPECT((memmem(l, (size_t)len, "(worker ", 8) && !memmem(l, (size_t)len, "worker -", 8) &&
                !memmem(l, (size_t)len, "pid 0 ", 6)) ||
                   memmem(l, (size_t)len, "leader: none", 12),
               "a leader line names no real leader: '%.*s'", len, l);
    }
    EXPECT(leftovers() == 0, "the demo left its temporary directory behind");
    pid_t pids[8];
    int n = worker_pids(p.buf, pids, 8);
    EXPECT(n == 3, "expected 3 worker pids in the intro, found %d", n);
    EXPECT(all_gone(pids, n), "a worker outlived the demo");
    return 0;
}

static int test_demo_interrupted(void)
{
    setenv("TMPDIR", vt_tmpdir(), 1);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "demo", "--workers", "2") == 0, "spawn");
    bool started = vt_read_until(&p, "epoch   2", 30000);
    kill(p.pid, SIGTERM);
    bool ended = vt_read_until(&p, "\nvigil demo: ", 30000) && vt_read_until(&p, "FAILED\n", 5000);
    int rc = vt_wait(p.pid, 30000);
    close(p.fd);
    EXPECT(started && ended, "no start or no summary:\n%s", p.buf);
    EXPECT(rc == 1, "an interrupted demo should exit 1, got %d:\n%s", rc, p.buf);
    EXPECT(strstr(p.buf, "FAIL: interrupted"), "the summary does not say why:\n%s", p.buf);
    EXPECT(leftovers() == 0, "the interrupted demo left its temporary directory behind");
    pid_t pids[4];
    int n = worker_pids(p.buf, pids, 4);
    EXPECT(n == 2 && all_gone(pids, n), "workers outlived the interrupted demo (%d found)", n);
    return 0;
}

VT_MAIN(VT_CASE(test_demo_end_to_end), VT_CASE(test_demo_interrupted))
