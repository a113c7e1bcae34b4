/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil lock` on the embedded store, run as a program:
 * usage errors (exit 2), the store made when missing, CMD's environment
 * and its exit status passed through (128 + n for a signal, 127 not
 * found), the lease released after CMD; --wait 0 and --wait MS on a held
 * key (exit 75, one line naming the key and its holder); a waiting lock
 * running once the holder releases, with a greater token; two vigil lock
 * processes never running their commands at once; SIGTERM, SIGINT,
 * SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM and SIGPIPE passed to CMD,
 * CMD's status kept; CMD killed with vigil lock (SIGKILL); a lease lost
 * in a stall before the fork or before the exec never starting CMD; a
 * holder's owner printed escaped; a lease lost while CMD runs (vigil
 * lock stopped past the TTL) killing CMD with SIGTERM, then SIGKILL after
 * --kill-after, exit 79; a store that cannot be made, a FIFO or a table
 * for a store, each said as every command says it (exit 1).
 */
#include "locktest.h"

#include "leases_internal.h"

#include <dirent.h>
#include <sys/wait.h>

static const char *store(void)
{
    return vt_path("locks.leases");
}

static int test_usage(void)
{
    const char *s = store();
    char longkey[200], longowner[80];
    memset(longkey, 'k', 150);
    longkey[150] = '\0';
    memset(longowner, 'o', 70);
    longowner[70] = '\0';
    const char *const cases[][12] = {
        { "lock" },
        { "lock", "k", "--", "true" },
        { "lock", "--store", s, "--etcd", "http://127.0.0.1:1", "k", "--", "true" },
        { "lock", "--store", s, "--", "true" },
        { "lock", "--store", s, "k" },
        { "lock", "--store", s, "k", "--" },
        { "lock", "--store", s, "k", "true" },
        { "lock", "--store", s, "--ttl", "2", "k", "--", "true" },
        { "lock", "--store", s, "--ttl", "x", "k", "--", "true" },
        { "lock", "--store", s, "--wait", "-1", "k", "--", "true" },
        { "lock", "--store", s, "--kill-after", "1e3", "k", "--", "true" },
        { "lock", "--store", s, "--owner", longowner, "k", "--", "true" },
        { "lock", "--store", s, longkey, "--", "true" },
        { "lock", "--store", s, "--bogus", "k", "--", "true" },
        { "lock", "--store", "", "k", "--", "true" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vt_runv(10000, cases[i]);
        EXPECT_EXIT(2, "a usage error");
        EXPECT(!R.out[0] && strncmp(R.err, "vigil lock: ", 12) == 0,
               "case %zu: expected a usage message on stderr alone, got '%s' / '%s'", i, R.out, R.err);
    }
    EXPECT(access(s, F_OK) != 0, "a usage error made the store");
    VT_RUN("lock", "--help");
    EXPECT_EXIT(0, "lock --help");
    EXPECT(strstr(R.out, "--kill-after") && strstr(R.out, "VIGIL_LEASE_TOKEN") && strstr(R.out, "79"),
           "help lacks the options:\n%s", R.out);
    /* --help wins before "--", and is CMD's own after it. */
    VT_RUN("lock", "--store", s, "k", "--", "sh", "-c", "echo cmd $1", "sh", "--help");
    EXPECT_EXIT(0, "--help after --");
    EXPECT(strcmp(R.out, "cmd --help\n") == 0, "CMD's --help went to vigil: '%s'", R.out);
    return 0;
}

/* The store is made when missing; CMD sees the lease; its status is ours;
 * the lease is released after it. */
static int test_run(void)
{
    const char *s = store();
    unlink(s);
    VT_RUN("lock", "--store", s, "--owner", "me", "job/1", "--", "sh", "-c",
           "echo \"$VIGIL_LEASE_KEY|$VIGIL_LEASE_OWNER|$VIGIL_LEASE_TOKEN\"; exit 3");
    EXPECT_EXIT(3, "CMD exiting 3");
    unsigned long long token = 0;
    EXPECT(sscanf(R.out, "job/1|me|%llu", &token) == 1 && token > 0 && !R.err[0],
           "CMD's environment: '%s' (stderr '%s')", R.out, R.err);
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_leases_open(s, &ls), 0);
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_get(ls, "job/1", &info), VIGIL_EVACANT);
    /* Default owner host:pid; a greater token the next time. */
    VT_RUN("lock", "--store", s, "job/1", "--", "sh", "-c", "echo \"$VIGIL_LEASE_OWNER $VIGIL_LEASE_TOKEN\"");
    EXPECT_EXIT(0, "a second run");
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    unsigned long long t2 = 0;
    const char *sp = strchr(R.out, ' ');
    EXPECT(sp && strncmp(R.out, host, strlen(host)) == 0 && R.out[strlen(host)] == ':' && sscanf(sp, "%llu", &t2) == 1 &&
           t2 > token, "owner and token: '%s' (host %s, first token %llu)", R.out, host, token);
    /* Statuses as a shell reports them. */
    VT_RUN("lock", "--store", s, "job/1", "--", "sh", "-c", "kill -KILL $$");
    EXPECT_EXIT(128 + SIGKILL, "CMD killed by SIGKILL");
    VT_RUN("lock", "--store", s, "job/1", "--", vt_path("no-such-program"));
    EXPECT_EXIT(127, "CMD not found");
    EXPECT(strstr(R.err, "no-such-program"), "expected the missing CMD named: '%s'", R.err);
    EXPECT_RC(vigil_leases_get(ls, "job/1", &info), VIGIL_EVACANT);
    vigil_leases_close(ls);
    return 0;
}

static int test_not_acquired(void)
{
    const char *s = store();
    unlink(s);
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_leases_create(s, 16, &ls), 0);
    vigil_lease held;
    EXPECT_RC(vigil_leases_acquire(ls, "busy", "the-holder", 60000, &held), 0);
    const char *marker = vt_path("ran");
    VT_RUN("lock", "--store", s, "--wait", "0", "busy", "--", "touch", marker);
    EXPECT_EXIT(75, "--wait 0 on a held key");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, "busy") && strstr(R.err, "the-holder"),
           "expected one line naming the key and its holder, got '%s'", R.err);
    VT_RUN("lock", "--store", s, "--wait", "200", "busy", "--", "touch", marker);
    EXPECT_EXIT(75, "--wait 200 on a held key");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, "within 200ms"), "stderr: '%s'", R.err);
    EXPECT(access(marker, F_OK) != 0, "CMD ran without the lease");
    EXPECT_RC(vigil_leases_release(ls, &held), 0);
    vigil_leases_close(ls);
    return 0;
}

/* A full store (every entry held by another key) is waited for as a held
 * key is (issue 32: --wait exited 1 with "no vacant slot"): 75 at the end
 * of --wait, saying the store is full; and a wait that sees an entry
 * freed runs CMD. */
static int test_full_store_waited(void)
{
    const char *s = vt_path("full.leases");
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_leases_create(s, 1, &ls), 0);
    vigil_lease other;
    EXPECT_RC(vigil_leases_acquire(ls, "other", "someone", 60000, &other), 0);
    VT_RUN("lock", "--store", s, "--wait", "200ms", "mine", "--", "true");
    EXPECT_EXIT(75, "--wait 200ms on a full store");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, "within 200ms") && strstr(R.err, "is full"),
           "expected one line saying the store is full, got '%s'", R.err);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "lock", "--store", s, "--wait", "30s", "mine", "--", "sh", "-c", "echo ran") == 0, "spawn");
    bool waiting = VT_WAIT_FOR(atomic_load(&ls->hdr->room_waiters) > 0, 15000);
    EXPECT_RC(vigil_leases_release(ls, &other), 0);
    bool ran = vt_read_until(&p, "ran", 15000);
    int st = vt_wait(p.pid, 15000);
    close(p.fd);
    EXPECT(waiting && ran && st == 0, "a lock waiting on a full store: waiting %d, ran %d, exit %d", waiting, ran, st);
    vigil_leases_close(ls);
    return 0;
}

/* A lock waiting for ever runs once the holder releases, and not before. */
static int test_waits(void)
{
    const char *s = store();
    unlink(s);
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_leases_create(s, 16, &ls), 0);
    vigil_lease held;
    EXPECT_RC(vigil_leases_acquire(ls, "queue", "holder", 60000, &held), 0);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "lock", "--store", s, "queue", "--", "sh", "-c", "echo ran $VIGIL_LEASE_TOKEN") == 0, "spawn");
    bool early = vt_read_until(&p, "ran", 500);
    EXPECT_RC(vigil_leases_release(ls, &held), 0);
    bool ran = vt_read_until(&p, "ran", 15000);
    int st = vt_wait(p.pid, 15000);
    close(p.fd);
    unsigned long long t = 0;
    EXPECT(!early, "CMD ran while the key was held: '%s'", p.buf);
    EXPECT(ran && st == 0 && sscanf(p.buf, "ran %llu", &t) == 1 && t > held.token,
           "after the release: exit %d, output '%s' (holder's token %llu)", st, p.buf,
           (unsigned long long)held.token);
    vigil_leases_close(ls);
    return 0;
}

static int test_two_never_overlap(void)
{
    const char *s = store();
    unlink(s);
    return lt_two_never_overlap("--store", s, "shared", vt_path("order.log"));
}

/* Every signal that would end vigil lock by default and can be caught
 * (issue 18: HUP, QUIT, USR1, USR2, ALRM and PIPE left CMD running without
 * the lease) reaches CMD; vigil lock exits with CMD's status once CMD has,
 * and the lease is released. */
static int test_signals(void)
{
    const char *s = store();
    unlink(s);
    static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct vt_proc p;
        EXPECT(VT_SPAWN(&p, "lock", "--store", s, "sig", "--", "sh", "-c",
                        "trap 'echo got; exit 42' TERM INT HUP QUIT USR1 USR2 ALRM PIPE; echo ready; "
                        "while :; do sleep 0.05; done") == 0,
               "spawn");
        bool ready = vt_read_until(&p, "ready", 15000);
        kill(p.pid, sigs[i]);
        bool got = vt_read_until(&p, "got", 15000);
        int st = vt_wait(p.pid, 15000);
        close(p.fd);
        EXPECT(ready, "CMD never started: '%s'", p.buf);
        EXPECT(got && st == 42, "signal %d: CMD saw it %d, vigil lock exited %d (want CMD's 42)", sigs[i], got, st);
        EXPECT(vt_key_vacant(s, "sig"), "signal %d: the lease was not released", sigs[i]);
    }
    return 0;
}


/* vigil lock killed with SIGKILL: CMD dies with it (PR_SET_PDEATHSIG), so
 * no CMD runs on without the lease, which lapses unrenewed. */
static int test_sigkill(void)
{
    const char *s = store();
    unlink(s);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "lock", "--store", s, "--ttl", "60s", "k9", "--", "sh", "-c",
                    "trap '' TERM HUP; echo pid $$; while :; do sleep 0.05; done") == 0,
           "spawn");
    bool ready = vt_read_until(&p, "\n", 15000);
    int cmd = 0;
    EXPECT(ready && sscanf(p.buf, "pid %d", &cmd) == 1 && cmd > 0, "CMD never said its pid: '%s'", p.buf);
    kill(p.pid, SIGKILL);
    int st = vt_wait(p.pid, 15000);
    close(p.fd);
    EXPECT(st == 128 + SIGKILL, "vigil lock: %d", st);
    bool dead = VT_WAIT_FOR(vt_gone(cmd), 10000);
    if (!dead)
        kill(cmd, SIGKILL);
    EXPECT(dead, "CMD (pid %d) runs on after vigil lock was killed", cmd);
    return 0;
}

/* Waits (bounded) for a spawned child of ours to stop itself. */
static bool stopped(pid_t pid)
{
    int st;
    return waitpid(pid, &st, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(st);
}

/* The pid of a grandchild of `tool` in state T (stopped): CMD's child,
 * under the guardian, stopped before its exec; 0 if none yet. */
static pid_t stopped_child_of(pid_t tool)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *de;
    while (d && !found && (de = readdir(d))) {
        int pid = atoi(de->d_name);
        char state, pstate;
        pid_t ppid;
        if (pid > 0 && (ppid = vt_parent_of(pid, &state)) > 0 && state == 'T' && vt_parent_of(ppid, &pstate) == tool)
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* Takes KEY in the store once the stalled tool's lease has lapsed. */
static bool steal(const char *s, const char *key, vigil_leases **ls, vigil_lease *other)
{
    return vigil_leases_open(s, ls) == 0 &&
           VT_WAIT_FOR(vigil_leases_acquire(*ls, key, "thief", 60000, other) == 0, 10000);
}

/*
 * vigil lock stalled past its TTL between the acquisition and the fork
 * (stopped at VIGIL_TEST_LOCK_STOP=fork, its keepalive's threads with it)
 * while another takes the key: continued, it must not start CMD (exit 79,
 * one line); issue 18 saw CMD1 run beside CMD2. Then the same stall in the
 * child (under the guardian), between the fork and the exec, with the tool
 * stopped too so that its supervision cannot end the child first: the
 * child's own look at the keepalive keeps CMD from being exec'd.
 */
static int test_lost_before_cmd(void)
{
    const char *s = store();
    for (int where = 0; where < 2; where++) {
        unlink(s);
        setenv("VIGIL_TEST_LOCK_STOP", where == 0 ? "fork" : "exec", 1);
        int efd = open(vt_path("early.stderr"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int saved = fcntl(2, F_DUPFD_CLOEXEC, 3); /* not inherited by the tool, nor by its CMD */
        dup2(efd, 2);
        struct vt_proc p;
        int sp = VT_SPAWN(&p, "lock", "--store", s, "--ttl", "300ms", "early", "--", "sh", "-c", "echo ran");
        dup2(saved, 2);
        close(saved);
        close(efd);
        unsetenv("VIGIL_TEST_LOCK_STOP");
        EXPECT(sp == 0, "spawn");
        pid_t child = 0;
        bool ok;
        if (where == 0) {
            ok = VT_WAIT_FOR(stopped(p.pid), 15000);
        } else {
            ok = VT_WAIT_FOR((child = stopped_child_of(p.pid)) != 0, 15000);
            kill(p.pid, SIGSTOP);
            ok = ok && VT_WAIT_FOR(stopped(p.pid), 15000);
        }
        vigil_leases *ls = NULL;
        vigil_lease other;
        bool taken = ok && steal(s, "early", &ls, &other);
        if (child > 0) {
            kill(child, SIGCONT); /* the child looks while the tool is still stopped */
            VT_WAIT_FOR(stopped_child_of(p.pid) != child, 10000);
        }
        kill(p.pid, SIGCONT);
        int st = vt_wait(p.pid, 20000);
        vt_read_until(&p, "ran", 500); /* whatever CMD printed, if it ran */
        close(p.fd);
        char err[1024];
        vt_slurp(vt_path("early.stderr"), err, sizeof(err));
        if (taken)
            vigil_leases_release(ls, &other);
        vigil_leases_close(ls);
        EXPECT(ok && taken, "stop at %d: stopped %d, the lease taken by another %d", where, ok, taken);
        EXPECT(st == 79 && !strstr(p.buf, "ran") && strncmp(err, "vigil: early: ", 14) == 0 && strstr(err, "lost"),
               "stalled at %s past the TTL: want exit 79, no CMD, a line; got %d, CMD said '%s', '%s'",
               where == 0 ? "the fork" : "the exec", st, p.buf, err);
    }
    return 0;
}

/* Another holder's owner is printed escaped: an owner of ESC [2J must not
 * clear the user's terminal. */
static int test_owner_escaped(void)
{
    const char *s = store();
    unlink(s);
    vigil_leases *ls = NULL;
    vigil_lease l;
    EXPECT_RC(vigil_leases_create(s, 16, &ls), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "esc", "\x1b[2J\\\x07me", 60000, &l), 0);
    VT_RUN("lock", "--store", s, "--wait", "0", "esc", "--", "true");
    EXPECT_EXIT(75, "a held key");
    EXPECT(!strchr(R.err, 0x1b) && !strchr(R.err, 0x07) && strstr(R.err, "'\\x1b[2J\\\\\\x07me'"),
           "the owner's control bytes reached the terminal, or were not shown escaped: '%s'", R.err);
    vigil_leases_release(ls, &l);
    vigil_leases_close(ls);
    return 0;
}

/* vigil lock stopped past its TTL: the lease lapses and another takes it.
 * Its guardian, not stopped, finds the lease lost: CMD's group gets
 * SIGTERM (or, ignoring it, SIGKILL after --kill-after) while the tool is
 * still stopped, so no CMD runs on beside the next holder's (*gone: CMD,
 * whose script says "ready PID", was gone before the tool was continued).
 * Continued, vigil lock exits 79. */
static int lost_with(const char *cmd_script, const char *kill_after, int *exit_status, char *err, size_t errcap,
                     bool *gone)
{
    const char *s = store();
    unlink(s);
    struct vt_proc p;
    int efd = open(vt_path("lock.stderr"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = fcntl(2, F_DUPFD_CLOEXEC, 3); /* not inherited by the tool, nor by its CMD */
    dup2(efd, 2); /* the spawned tool's stderr, to read its one line */
    int sp = VT_SPAWN(&p, "lock", "--store", s, "--ttl", "300ms", "--kill-after", kill_after, "lost", "--", "sh", "-c",
                      cmd_script);
    dup2(saved, 2);
    close(saved);
    close(efd);
    if (sp != 0)
        return 1;
    bool ready = vt_read_until(&p, "ready", 15000);
    kill(p.pid, SIGSTOP);
    vigil_leases *ls = NULL;
    vigil_lease other;
    int rc = vigil_leases_open(s, &ls);
    bool taken = rc == 0 && VT_WAIT_FOR(vigil_leases_acquire(ls, "lost", "thief", 60000, &other) == 0, 10000);
    const char *at = strstr(p.buf, "ready ");
    int cmd = at ? atoi(at + 6) : 0;
    *gone = cmd > 0 && VT_WAIT_FOR(vt_gone(cmd), 20000);
    if (cmd > 0 && !*gone)
        kill(cmd, SIGKILL);
    kill(p.pid, SIGCONT);
    *exit_status = vt_wait(p.pid, 20000);
    close(p.fd);
    vt_slurp(vt_path("lock.stderr"), err, errcap);
    if (taken)
        vigil_leases_release(ls, &other);
    vigil_leases_close(ls);
    if (!ready || !taken) {
        fprintf(stderr, "ready %d, lease taken by another %d ('%s')\n", ready, taken, p.buf);
        return 1;
    }
    return 0;
}

static int test_lost(void)
{
    int st;
    bool gone;
    char err[1024];
    /* The whole group gets SIGTERM: the shell may say its sleep was
     * "Terminated"; the tool says one line. */
    EXPECT_RC(lost_with("trap 'exit 9' TERM; echo ready $$; while :; do sleep 0.05; done", "5000", &st, err,
                        sizeof(err), &gone),
              0);
    const char *line = strstr(err, "vigil: lost: ");
    EXPECT(st == 79 && line && strstr(line, "lost while CMD ran") && !strstr(line + 1, "vigil:"),
           "a lost lease: expected exit 79 and one line of the tool's, got %d, '%s'", st, err);
    EXPECT(gone, "CMD ran on past the lapse while vigil lock was stopped");
    /* CMD ignores SIGTERM: SIGKILL after --kill-after. */
    EXPECT_RC(lost_with("trap '' TERM; echo ready $$; exec sleep 60", "200", &st, err, sizeof(err), &gone), 0);
    EXPECT(st == 79, "a CMD deaf to SIGTERM: expected exit 79 after SIGKILL, got %d, '%s'", st, err);
    EXPECT(gone, "a CMD deaf to SIGTERM ran on past the lapse while vigil lock was stopped");
    return 0;
}

static int test_store_error(void)
{
    VT_RUN("lock", "--store", vt_path("no/such/dir/locks"), "k", "--", "true");
    EXPECT_EXIT(1, "a store that cannot be made");
    EXPECT(vt_count_lines(R.err) == 1 && strncmp(R.err, "vigil: k: ", 10) == 0 && strstr(R.err, "no/such/dir"),
           "expected one line naming the key, the store and the reason, got '%s'", R.err);
    /* A store that is not one is said as every command says it. */
    EXPECT(mkfifo(vt_path("fifo.ls"), 0600) == 0, "mkfifo: %s", strerror(errno));
    VT_RUN("lock", "--store", vt_path("fifo.ls"), "--wait", "0", "k", "--", "true");
    EXPECT_EXIT(1, "a FIFO for a store");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, "a FIFO, not a regular file"), "a FIFO store: '%s'", R.err);
    vigil_hb_close(vt_hb_fresh_at(vt_path("table.hb"), 2));
    VT_RUN("lock", "--store", vt_path("table.hb"), "--wait", "0", "k", "--", "true");
    EXPECT_EXIT(1, "a heartbeat table for a store");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, "a heartbeat table, not a lease store"), "a table: '%s'", R.err);
    return 0;
}

VT_MAIN(VT_CASE(test_usage), VT_CASE(test_run), VT_CASE(test_not_acquired), VT_CASE(test_full_store_waited), VT_CASE(test_waits),
        VT_CASE(test_two_never_overlap), VT_CASE(test_signals), VT_CASE(test_sigkill), VT_CASE(test_lost_before_cmd), VT_CASE(test_owner_escaped),
        VT_CASE(test_lost), VT_CASE(test_store_error))
