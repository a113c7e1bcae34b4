/* SPDX-License-Identifier: MIT */
/*
 * Description: the host's agent (src/group/group_agent.c) and what it
 * cannot see (issue 25.4). A member in a pid namespace of its own (pid 1
 * there, as in a container sharing the agent's directory) records its
 * namespace; the agent never judges it dead, neither when it is running
 * as the member joins (the join succeeds) nor when it starts later (its
 * scan leaves the member alone): it says so once (result -EREMOTE) and
 * leaves the lease to its TTL. So too a member without /proc where it
 * runs (a tmpfs over it: it records pidns 0, start 0) at a pid that
 * names no process here: the agent used to take pidns 0 for its own
 * namespace and revoke it ("pid 11 died"). An inotify queue that overflows makes the
 * agent scan its directory again: a record that came meanwhile is
 * watched (here: its process dead, its lease revoked), one that went is
 * forgotten. The pid namespace cases need root (unshare) and skip
 * without it.
 */
#include "grouptest.h"
#include "proc_internal.h"

#include <sys/inotify.h>

#define LONG_TTL 120000 /* far past every wait: a member gone within it was revoked */

/* The agent's first report of lease ID (gt_agent_start's "revoked ID RC"
 * lines), within timeout_ms: true with *rc, false if none came. */
static bool agent_report(struct vt_proc *agent, int64_t lease, int *rc, unsigned timeout_ms)
{
    char want[64];
    snprintf(want, sizeof(want), "revoked %lld ", (long long)lease);
    if (!vt_read_until(agent, want, timeout_ms))
        return false;
    const char *at = strstr(agent->buf, want);
    if (!strchr(at, '\n') && !vt_read_until(agent, "\n", timeout_ms))
        return false;
    return sscanf(at + strlen(want), "%d", rc) == 1;
}

/* A member in a pid namespace of its own (box, GT_BOX_*), or a skip:
 * true with *c joined; *skip set when this process may not make the
 * namespace. */
static bool ns_member(struct gt_child *c, const char *url, const char *g, const char *dir, int box, bool *skip)
{
    *skip = false;
    if (gt_child_start_in(c, url, g, "boxed", LONG_TTL, dir, "box", box))
        return true;
    int st = vt_wait(c->pid, 10000);
    *skip = st == VT_SKIP;
    close(c->in);
    close(c->out);
    c->pid = 0;
    return false;
}

/* The member's record names its pid namespace, not ours, and pid 1;
 * or, made without /proc (boxed_pid: its pid), no namespace and no start
 * time. */
static bool record_is_foreign(const char *dir, int64_t lease, pid_t boxed_pid)
{
    char path[700], text[1024];
    snprintf(path, sizeof(path), "%s/vigil-%llx.lease", dir, (unsigned long long)lease);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    unsigned long long ns = 0;
    const char *p = strstr(text, "\npidns ");
    char pid[32];
    snprintf(pid, sizeof(pid), "\npid %d\n", boxed_pid ? (int)boxed_pid : 1);
    if (strncmp(text, "vigil-lease 2\n", 14) != 0 || !strstr(text, pid) || !p || sscanf(p + 7, "%llu", &ns) != 1)
        return false;
    if (boxed_pid)
        return ns == 0 && strstr(text, "\nstart 0\n");
    return ns != 0 && ns != vigil_self_pidns();
}

/*
 * A member of another pid namespace and the host's agent. agent_first:
 * the agent runs as the member joins (the join takes: the agent used to
 * revoke the lease between the record and the join, "Connection timed
 * out"). Else the member joined while no agent ran, and the agent
 * started then scans it (it used to revoke it: "pid 1 died", and `vigil
 * group join` exited 79). Either way the agent says -EREMOTE once, and
 * the member stays a member; its record names its own namespace and pid 1.
 */
static int other_pidns(bool agent_first, const char *tag, int box)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    const char *g = gt_group(tag);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", vt_path(tag));
    struct vt_proc agent;
    bool started = agent_first && gt_agent_start(&agent, url, dir);
    struct gt_child m;
    bool skip;
    if (!ns_member(&m, url, g, dir, box, &skip)) {
        if (started)
            vt_stop(&agent, SIGKILL, 10000);
        vigil_etcd_close(e);
        if (skip)
            return VT_SKIP;
        EXPECT(false, "the member in its own pid namespace did not join: '%s'", m.line);
    }
    int64_t lease = gt_lease_of(e, g, "boxed");
    if (!agent_first)
        started = gt_agent_start(&agent, url, dir);
    int rc = 0;
    bool said = started && agent_report(&agent, lease, &rc, 20000);
    int members = gt_count(e, g);
    gt_send(&m, "lost");
    bool answered = gt_readline(m.out, m.line, sizeof(m.line), 10000);
    bool lost = !answered || strcmp(m.line, "lost 0") != 0;
    bool foreign = record_is_foreign(dir, lease, m.boxed_pid);
    int left = gt_child_leave(&m);
    if (started)
        vt_stop(&agent, SIGKILL, 10000);
    vigil_etcd_close(e);
    EXPECT(started, "the agent did not start");
    EXPECT(lease != 0, "the member is not listed");
    EXPECT(foreign, "the record does not name the member's own pid namespace and pid 1 (or, without /proc, pid %d "
                    "and no namespace)", (int)m.boxed_pid);
    EXPECT(said && rc == -EREMOTE, "the agent's report of the member: %s %d (expected -EREMOTE, %d): '%s'",
           said ? "said" : "none", rc, -EREMOTE, agent.buf);
    EXPECT(members == 1 && !lost, "after the agent's look: %d members, the member says '%s'", members, m.line);
    EXPECT_RC(left, 0);
    return 0;
}

static int test_agent_running_other_pidns(void) { return other_pidns(true, "nsrun", GT_BOX_PIDNS); }
static int test_agent_restart_other_pidns(void) { return other_pidns(false, "nsrestart", GT_BOX_PIDNS); }
static int test_agent_running_noproc(void) { return other_pidns(true, "noprocrun", GT_BOX_NOPROC); }
static int test_agent_restart_noproc(void) { return other_pidns(false, "noprocrestart", GT_BOX_NOPROC); }

/* ---- the inotify queue overflows ------------------------------------------ */

/* A record as join writes it, put in place by rename. */
static int put_record(const char *dir, int64_t lease, uint32_t pid, uint64_t start)
{
    char tmp[700], path[700], body[400];
    snprintf(tmp, sizeof(tmp), "%s/.vigil-%llx.tmp", dir, (unsigned long long)lease);
    snprintf(path, sizeof(path), "%s/vigil-%llx.lease", dir, (unsigned long long)lease);
    int n = snprintf(body, sizeof(body), "vigil-lease 2\nlease %lld\npid %u\nstart %llu\npidns %llu\ngroup g\nname n\n",
                     (long long)lease, pid, (unsigned long long)start, (unsigned long long)vigil_self_pidns());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    bool ok = fwrite(body, 1, (size_t)n, f) == (size_t)n;
    if (fclose(f) != 0 || !ok)
        return -EIO;
    return rename(tmp, path) == 0 ? 0 : -errno;
}

static int64_t grant(vigil_etcd *e)
{
    int64_t id = 0, ttl = 0;
    vigil_etcd__lock(e);
    int rc = vigil_etcd__grant_locked(e, 120, &id, &ttl);
    vigil_etcd__unlock(e);
    return rc < 0 ? rc : id;
}

/* More events than the inotify queue holds (two names in turn: the
 * kernel merges only an event equal to the last one queued). */
static int flood(const char *dir)
{
    long max = 16384;
    FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1)
            max = 16384;
        fclose(f);
    }
    char a[600], b[600];
    snprintf(a, sizeof(a), "%s/noise-a", dir);
    snprintf(b, sizeof(b), "%s/noise-b", dir);
    for (long i = 0; i < max + 64; i++) {
        int fd = open(i % 2 ? a : b, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -errno;
        close(fd); /* IN_CLOSE_WRITE */
    }
    return 0;
}

/*
 * The agent, in this process, loads the record of a live process (this
 * one). Then, while it does not read its inotify queue, the queue
 * overflows; that record is removed and another put, for a process that
 * is dead: both events are lost. The agent scans again on the overflow:
 * it revokes the dead one's lease and forgets the removed record.
 */
static int test_agent_rescans_after_overflow(void)
{
    const char *url;
    int f = et_fixture(&url);
    if (f)
        return f;
    vigil_etcd *e = et_connect(url);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", vt_path("overflow"));
    EXPECT(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    int64_t live = grant(e), dead = grant(e);
    EXPECT(live > 0 && dead > 0, "grants: %lld %lld", (long long)live, (long long)dead);
    EXPECT_RC(put_record(dir, live, vigil_self_pid(), vigil_self_start_time()), 0);
    vigil_agent *a = NULL;
    EXPECT_RC(vigil_agent_open(e, dir, &a), 0);
    uint32_t before = vigil_agent_watched(a);

    /* A process that is gone: its pid and start time. */
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0)
        vt_await_kill();
    uint64_t kid_start = 0;
    bool started = kid > 0 && VT_WAIT_FOR(vigil_proc_start_time((uint32_t)kid, &kid_start) == 0, 10000);
    if (kid > 0) {
        kill(kid, SIGKILL);
        vt_wait(kid, 10000);
    }
    int fl = flood(dir);
    char live_path[700];
    snprintf(live_path, sizeof(live_path), "%s/vigil-%llx.lease", dir, (unsigned long long)live);
    int un = unlink(live_path);
    int put = put_record(dir, dead, (uint32_t)kid, kid_start);

    vigil_agent_event ev[8];
    int got = 0, result = 1;
    for (uint64_t dl = vt_now_ms() + 20000; vt_now_ms() < dl && !got;) {
        int n = vigil_agent_run(a, 200, ev, 8);
        for (int i = 0; i < n; i++)
            if (ev[i].lease == dead) {
                got = 1;
                result = ev[i].result;
            }
        if (n < 0) {
            result = n;
            break;
        }
    }
    uint32_t after = vigil_agent_watched(a);
    vigil_agent_close(a);
    vigil_etcd__lock(e);
    (void)vigil_etcd__revoke_locked(e, live);
    vigil_etcd__unlock(e);
    vigil_etcd_close(e);
    EXPECT(started && fl == 0 && un == 0 && put == 0, "setup: child %d, flood %d, unlink %d, record %d", started, fl,
           un, put);
    EXPECT(before == 1, "the agent watched %u processes at first, expected 1", before);
    EXPECT(got && result == 0, "after the overflow, the dead member's lease: %s, result %d",
           got ? "reported" : "never revoked", result);
    EXPECT(after == 0, "the removed record is still watched (%u)", after);
    return 0;
}

VT_MAIN(VT_CASE(test_agent_running_other_pidns), VT_CASE(test_agent_restart_other_pidns),
        VT_CASE(test_agent_running_noproc), VT_CASE(test_agent_restart_noproc),
        VT_CASE(test_agent_rescans_after_overflow))
