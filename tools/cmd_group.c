/* SPDX-License-Identifier: MIT */
/*
 * vigil group join|watch|ls: a group of processes across hosts, on etcd.
 *
 *   join GROUP --etcd ENDPOINTS [--name NAME] [--ttl DURATION] [--dir DIR]
 *        [--kill-after DURATION] -- CMD [ARG...]
 *        runs CMD as a member: the tool holds the membership (join, its
 *        keepalive, its record under DIR for the host's agent) and CMD gets
 *        VIGIL_GROUP, VIGIL_MEMBER and VIGIL_GROUP_TERM (the join revision).
 *        CMD's exit leaves, with CMD's status; a loss of the membership
 *        ends CMD (SIGTERM, SIGKILL after --kill-after) and exits 79, as
 *        `vigil lock` does. A name taken by a live member exits 75.
 *        With --leader-only, CMD runs only while the member leads
 *        (group_lead.c).
 *   watch GROUP --etcd ENDPOINTS [--json]
 *        one line per change, flushed at once; the members live at the
 *        start come first, as joins, then the leader. JSON: {"event":
 *        "join"|"leave", "name", "pid", "host", "revision", "time"}: the
 *        revision a join's join revision, a leave's the revision of the
 *        leaving; {"event": "leader", "name", "term", "revision", "time"}
 *        for each change of leader; the time when the watch saw it, RFC
 *        3339 in UTC.
 *   ls GROUP --etcd ENDPOINTS [--json]
 *        the live members, the leader first.
 */
#define _GNU_SOURCE
#include "child.h"
#include "etcd_opts.h"
#include "etcd_report.h"
#include "group_lead.h"
#include "vigil.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#ifdef VIGIL_HAVE_ETCD
#include <vigil/group.h>
#endif

enum { EXIT_NOT_JOINED = 75, EXIT_LOST = 79 };

#define GROUP_MAX_TTL_MS UINT64_C(86400000) /* a day */

static const struct tool_cmd join_cmd, watch_cmd, ls_cmd;

#ifdef VIGIL_HAVE_ETCD

/* "vigil: group GROUP: message" on stderr; EXIT_RUNTIME. */
#define group_fail tool_group_say

/* Connects with the connection flags (and their ETCDCTL_* variables):
 * 0, or the exit status after saying why not. With e2, a second handle
 * with the same options. */
static int connect_etcd(const struct tool_cmd *cmd, const char *group, const char *endpoints,
                        struct tool_etcd_flags *flags, vigil_etcd **e, vigil_etcd **e2)
{
    struct vigil_etcd_options o;
    int rc = tool_etcd_options(cmd, flags, &o);
    if (rc == TOOL_GO) {
        char what[VIGIL_GROUP_MAX + 8];
        snprintf(what, sizeof(what), "group %s", group);
        rc = tool_etcd_connect(what, endpoints, &o, e);
        if (rc == 0 && e2 && (rc = tool_etcd_connect(what, endpoints, &o, e2)) != 0)
            vigil_etcd_close(*e);
    }
    tool_etcd_flags_free(flags); /* the handles have their own copies */
    return rc;
}

/* A group or member name the library takes: 0, or the usage error. */
static int check_name(const struct tool_cmd *cmd, const char *what, const char *s, size_t max)
{
    if (!*s || strlen(s) > max)
        return tool_usage_error(cmd, "%s: 1 to %zu bytes, not %zu", what, max, strlen(s));
    return TOOL_GO;
}

/* ---- join ---------------------------------------------------------------- */

/* Why a membership was lost, in a group's words: the library's reason
 * when it has one (the lease gone before the join landed, the store gone
 * backwards), never VIGIL_ELOST's own text, which speaks of leases
 * refused and failover. */
static const char *lost_reason(void)
{
    const char *why = vigil_etcd_errmsg();
    return *why ? why : "the member's lease is gone (revoked, or expired unrenewed)";
}

static int join_run(const struct tool_cmd *cmd, int argc, char **argv)
{
    const char *etcd = NULL, *name_opt = NULL, *dir = NULL;
    uint64_t ttl = 10000, kill_after = 5000;
    bool leader_only = false;
    struct tool_etcd_flags flags = { 0 };
    struct tool_etcd_where where = { NULL, NULL };
    /* Durations as every command of the tool reads them (duration.c). */
    const struct tool_opt opts[] = {
        TOOL_ETCD_WHERE_OPTS(&where),
        { "leader-only", OPT_FLAG, 0, 0, NULL, &leader_only, NULL },
        { "name", OPT_STR, 0, 0, NULL, NULL, &name_opt },
        { "ttl", OPT_MS, 1000, GROUP_MAX_TTL_MS, &ttl, NULL, NULL },
        { "dir", OPT_STR, 0, 0, NULL, NULL, &dir },
        { "kill-after", OPT_MS, 0, GROUP_MAX_TTL_MS, &kill_after, NULL, NULL },
        TOOL_ETCD_OPTS(&flags),
    };
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    const char *pos[1];
    size_t npos = 0;
    int rc = tool_parse(cmd, dd, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 0, 1, &npos);
    if (rc != TOOL_GO || (rc = tool_etcd_where(cmd, &where, &etcd)) != TOOL_GO)
        return rc;
    if (!etcd)
        return tool_usage_error(cmd, TOOL_ETCD_MISSING);
    if (npos == 0)
        return tool_usage_error(cmd, "missing GROUP");
    if (dd + 1 >= argc)
        return tool_usage_error(cmd, dd == argc ? "missing '--' and CMD after GROUP" : "missing CMD after '--'");
    const char *group = pos[0];
    if ((rc = check_name(cmd, "GROUP", group, VIGIL_GROUP_MAX)) != TOOL_GO)
        return rc;
    char name[VIGIL_MEMBER_MAX + 1];
    if (name_opt) {
        if ((rc = check_name(cmd, "--name", name_opt, VIGIL_MEMBER_MAX)) != TOOL_GO)
            return rc;
        snprintf(name, sizeof(name), "%s", name_opt);
    } else {
        char host[256] = "localhost", pid[16];
        const char *h = getenv("VIGIL_HOST");
        if (h && *h)
            snprintf(host, sizeof(host), "%s", h);
        else
            gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        int pl = snprintf(pid, sizeof(pid), ":%d", (int)getpid());
        snprintf(name, sizeof(name), "%.*s%s", (int)(sizeof(name) - 1 - (size_t)pl), host, pid);
    }
    tool_child_note_fds();
    /* Before the keepalive's thread: a SIGTERM must come to the wait, not
     * end the tool by its default action in another thread. */
    /* A group we may not end (sudo's) is waited out, the membership kept. */
    char who[VIGIL_GROUP_MAX + 16];
    snprintf(who, sizeof(who), "group %s", group);
    struct tool_child c = { .sfd = -1, .tty = -1, .orphan_kill_ms = kill_after, .still_who = who,
                            .still_hold = "the membership" };
    if ((rc = tool_child_block(&c)) < 0)
        return group_fail(group, "signalfd: %s", strerror(-rc));
    vigil_etcd *e = NULL, *ew = NULL;
    if ((rc = connect_etcd(cmd, group, etcd, &flags, &e, leader_only ? &ew : NULL)) != 0) {
        tool_child_end(&c);
        return rc;
    }
    if (leader_only) {
        struct tool_lead l = { .e = e, .ew = ew, .group = group, .name = name, .endpoints = etcd,
                               .opts = { .dir = dir, .host = NULL }, .ttl_ms = ttl, .kill_after_ms = kill_after,
                               .cmd = argv + dd + 1, .child = &c };
        rc = tool_group_lead(&l);
        tool_child_end(&c);
        vigil_etcd_close(ew);
        vigil_etcd_close(e);
        return rc;
    }
    struct vigil_group_options o = { .dir = dir, .host = NULL };
    vigil_group_member *m = NULL;
    rc = vigil_group_join_opts(e, group, name, ttl, &o, &m);
    if (rc < 0) {
        /* What happened: refused (the name is taken), lost (the lease
         * gone before the join landed), or the request's own error. */
        if (rc == VIGIL_EBUSY)
            group_fail(group, "join as '%s' refused: the name is a live member's", name);
        else if (rc == VIGIL_ELOST)
            group_fail(group, "membership of '%s' lost before CMD started: %s; CMD not run", name, lost_reason());
        else
            group_fail(group, "join as '%s' on %s: %s", name, etcd, tool_etcd_reason(e, rc));
        vigil_etcd_close(e);
        tool_child_end(&c);
        return rc == VIGIL_EBUSY ? EXIT_NOT_JOINED : rc == VIGIL_ELOST ? EXIT_LOST : EXIT_RUNTIME;
    }
    char what[VIGIL_GROUP_MAX + 8];
    snprintf(what, sizeof(what), "group %s", group);
    struct tool_etcd_report rep;
    (void)tool_etcd_report_start(&rep, e, what, etcd, 0); /* the keepalive's renewals find trouble */
    vigil_group_member_info self;
    vigil_group_self(m, &self);
    char eg[VIGIL_GROUP_MAX + 16], em[VIGIL_MEMBER_MAX + 16], et[48];
    snprintf(eg, sizeof(eg), "VIGIL_GROUP=%s", group);
    snprintf(em, sizeof(em), "VIGIL_MEMBER=%s", name);
    snprintf(et, sizeof(et), "VIGIL_GROUP_TERM=%" PRIu64, self.revision);
    const char *const add[] = { eg, em, et, NULL };
    const char *const drop[] = { "VIGIL_GROUP", "VIGIL_MEMBER", "VIGIL_GROUP_TERM", NULL };
    char **env = tool_env_with(add, drop, tool_etcd_secret_env); /* no password reaches CMD */
    int status = EXIT_RUNTIME;
    bool lost = false;
    if (!env)
        rc = -ENOMEM;
    else if ((rc = tool_child_start(&c, argv + dd + 1, env)) == 0 &&
             (rc = tool_child_wait(&c, vigil_group_lost_fd(m), kill_after, &status, &lost)) < 0)
        group_fail(group, "waiting for CMD (pid %d): %s", (int)c.pid, strerror(-rc));
    if (rc < 0 && !env)
        group_fail(group, "environment for CMD: %s", strerror(ENOMEM));
    else if (rc < 0 && c.pid <= 0)
        group_fail(group, "starting CMD: %s", strerror(-rc));
    int left = vigil_group_leave(m);
    tool_etcd_report_stop(&rep);
    tool_child_end(&c);
    free(env);
    vigil_etcd_close(e);
    if (rc < 0)
        return EXIT_RUNTIME;
    if (lost || left == VIGIL_ELOST) {
        group_fail(group, "membership of '%s' lost while CMD ran (term %" PRIu64 ")%s", name, self.revision,
                   lost ? "; CMD was sent SIGTERM" : "");
        return EXIT_LOST;
    }
    if (left < 0)
        group_fail(group, "leave: %s (the membership lapses within its TTL)", vigil_strerror(left));
    if (c.g.r.flags & GUARD_STILL) {
        group_fail(group, "CMD's process group %d outlived its leader beyond the tool's signals (%s); the "
                          "membership was kept until the group was gone",
                   (int)c.pid, strerror(c.g.r.err));
        return status != 0 ? status : EXIT_RUNTIME;
    }
    return tool_child_exit(&c, status);
}

/* ---- watch ---------------------------------------------------------------- */

/* RFC 3339, UTC, milliseconds. */
static void iso_time(int64_t ns, char *buf, size_t cap)
{
    time_t s = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, cap - n, ".%03dZ", (int)(ns / 1000000 % 1000));
}

/* A change of leader: {"event": "leader", "name", "term", "revision",
 * "time"}, name and term null when none leads. */
static void print_leader(const vigil_group_event *ev, bool json, const char *t)
{
    const vigil_group_member_info *m = &ev->member;
    bool none = m->revision == 0;
    if (json) {
        printf("{\"event\": \"leader\", \"name\": ");
        if (none)
            printf("null");
        else
            json_str(stdout, m->name, sizeof(m->name));
        printf(", \"term\": ");
        if (none)
            printf("null");
        else
            json_u64(stdout, m->revision);
        printf(", \"revision\": ");
        json_u64(stdout, ev->revision);
        printf(", \"time\": \"%s\"}\n", t);
    } else if (none) {
        printf("%s leader none revision %" PRIu64 "\n", t, ev->revision);
    } else {
        printf("%s leader %s (%s pid %" PRIu32 ") term %" PRIu64 " revision %" PRIu64 "%s\n", t, tool_e(m->name),
               m->host[0] ? tool_e(m->host) : "?", m->pid, m->revision, ev->revision,
               m->flags & VIGIL_GROUP_FOREIGN ? " [not vigil]" : "");
    }
}

static void print_event(const vigil_group_event *ev, bool json)
{
    char t[40];
    bool join = ev->type == VIGIL_GROUP_JOIN;
    uint64_t rev = join ? ev->member.revision : ev->revision;
    iso_time(ev->time_ns, t, sizeof(t));
    if (ev->type == VIGIL_GROUP_LEADER) {
        print_leader(ev, json, t);
        return;
    }
    if (json) {
        printf("{\"event\": \"%s\", \"name\": ", join ? "join" : "leave");
        json_str(stdout, ev->member.name, sizeof(ev->member.name));
        printf(", \"pid\": %" PRIu32 ", \"host\": ", ev->member.pid);
        json_str(stdout, ev->member.host, sizeof(ev->member.host));
        printf(", \"revision\": ");
        json_u64(stdout, rev);
        printf(", \"time\": \"%s\"}\n", t);
    } else {
        printf("%s %-5s %s (%s pid %" PRIu32 ") revision %" PRIu64 "%s\n", t, join ? "join" : "leave",
               tool_e(ev->member.name), ev->member.host[0] ? tool_e(ev->member.host) : "?", ev->member.pid, rev,
               ev->member.flags & VIGIL_GROUP_FOREIGN ? " [not vigil]" : "");
    }
}

/* watch and ls: GROUP --etcd ENDPOINTS [--json] and the connection flags,
 * parsed and connected. TOOL_GO with *group, *etcd, *json and *e, or the
 * exit status. */
static int group_and_etcd(const struct tool_cmd *cmd, int argc, char **argv, const char **group,
                          const char **etcd, bool *json, vigil_etcd **e)
{
    struct tool_etcd_flags flags = { 0 };
    struct tool_etcd_where where = { NULL, NULL };
    const struct tool_opt opts[] = {
        TOOL_ETCD_WHERE_OPTS(&where),
        { "json", OPT_FLAG, 0, 0, NULL, json, NULL },
        TOOL_ETCD_OPTS(&flags),
    };
    const char *pos[1];
    size_t npos = 0;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 0, 1, &npos);
    if (rc != TOOL_GO || (rc = tool_etcd_where(cmd, &where, etcd)) != TOOL_GO)
        return rc;
    if (!*etcd)
        return tool_usage_error(cmd, TOOL_ETCD_MISSING);
    if (npos == 0)
        return tool_usage_error(cmd, "missing GROUP");
    if ((rc = check_name(cmd, "GROUP", pos[0], VIGIL_GROUP_MAX)) != TOOL_GO)
        return rc;
    *group = pos[0];
    return (rc = connect_etcd(cmd, *group, *etcd, &flags, e, NULL)) != 0 ? rc : TOOL_GO;
}

static int watch_run(const struct tool_cmd *cmd, int argc, char **argv)
{
    const char *etcd = NULL, *group = NULL;
    bool json = false;
    vigil_etcd *e = NULL;
    int rc = group_and_etcd(cmd, argc, argv, &group, &etcd, &json, &e);
    if (rc != TOOL_GO)
        return rc;
    tool_catch_stop_signals(); /* before the watcher's thread, which inherits the mask */
    vigil_group_watcher *w = NULL;
    if ((rc = vigil_group_watch_flags(e, group, VIGIL_GROUP_WATCH_LEADER, &w)) < 0) {
        vigil_etcd_close(e);
        return group_fail(group, "watch on %s: %s", etcd, vigil_strerror(rc));
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    char what[VIGIL_GROUP_MAX + 8];
    snprintf(what, sizeof(what), "group %s", group);
    struct tool_etcd_report rep;
    (void)tool_etcd_report_start(&rep, e, what, etcd, 0); /* the watcher's probe every 2 s finds trouble */
    int exit_rc = EXIT_OK;
    for (;;) {
        vigil_group_event ev;
        while ((rc = vigil_group_watch_next(w, &ev)) == 1) {
            print_event(&ev, json);
            if (tool_flush() != EXIT_OK) {
                rc = -EPIPE;
                break;
            }
        }
        if (rc < 0) {
            exit_rc = rc == -EPIPE ? EXIT_RUNTIME : group_fail(group, "watch: %s", vigil_strerror(rc));
            break;
        }
        struct pollfd pf[2] = { { vigil_group_watch_fd(w), POLLIN, 0 }, { sfd, POLLIN, 0 } };
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN)
            break;
    }
    if (sfd >= 0)
        close(sfd);
    vigil_group_watch_close(w);
    tool_etcd_report_stop(&rep);
    vigil_etcd_close(e);
    return exit_rc;
}

/* ---- ls ---------------------------------------------------------------------- */

static int ls_run(const struct tool_cmd *cmd, int argc, char **argv)
{
    const char *etcd = NULL, *group = NULL;
    bool json = false;
    vigil_etcd *e = NULL;
    int rc = group_and_etcd(cmd, argc, argv, &group, &etcd, &json, &e);
    if (rc != TOOL_GO)
        return rc;
    vigil_group_member_info *m = NULL;
    int n = 0;
    /* The count, then the list; a group that grew between reads again. */
    for (int tries = 0; tries < 4; tries++) {
        uint32_t cap = (uint32_t)n + 16;
        free(m);
        if (!(m = calloc(cap, sizeof(*m)))) {
            n = -ENOMEM;
            break;
        }
        n = vigil_group_members(e, group, m, cap);
        if (n < 0 || (uint32_t)n <= cap)
            break;
    }
    vigil_etcd_close(e);
    if (n < 0) {
        free(m);
        return group_fail(group, "members on %s: %s", etcd, vigil_strerror(n));
    }
    if (json) {
        printf("{\"group\": ");
        json_str(stdout, group, strlen(group));
        printf(", \"leader\": ");
        if (n > 0)
            json_str(stdout, m[0].name, sizeof(m[0].name));
        else
            printf("null");
        printf(", \"term\": ");
        if (n > 0)
            json_u64(stdout, m[0].revision);
        else
            printf("null");
        printf(", \"members\": [");
        for (int i = 0; i < n; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(stdout, m[i].name, sizeof(m[i].name));
            printf(", \"host\": ");
            json_str(stdout, m[i].host, sizeof(m[i].host));
            printf(", \"pid\": %" PRIu32 ", \"revision\": ", m[i].pid);
            json_u64(stdout, m[i].revision);
            printf(", \"lease\": \"%" PRIx64 "\", \"vigil\": %s}", (uint64_t)m[i].lease,
                   m[i].flags & VIGIL_GROUP_FOREIGN ? "false" : "true");
        }
        printf("]}\n");
    } else {
        printf("group %s: %d member%s\n", tool_e(group), n, n == 1 ? "" : "s");
        for (int i = 0; i < n; i++)
            printf("  %-24s %-20s pid %-8" PRIu32 " revision %-10" PRIu64 "%s%s\n", tool_e(m[i].name),
                   m[i].host[0] ? tool_e(m[i].host) : "?", m[i].pid, m[i].revision, i == 0 ? " leader" : "",
                   m[i].flags & VIGIL_GROUP_FOREIGN ? " [not vigil]" : "");
    }
    free(m);
    return tool_flush();
}

#else /* no etcd adapter: the helper's, or help */
#include "etcd_exec.h"

static int no_etcd(const struct tool_cmd *cmd, int argc, char **argv)
{
    return tool_etcd_elsewhere(cmd, argc, argv);
}
#define join_run  no_etcd
#define watch_run no_etcd
#define ls_run    no_etcd

#endif

static const struct tool_cmd join_cmd = {
    .name = "group join",
    .synopsis = "GROUP --etcd ENDPOINTS [--name NAME] [--ttl DURATION] [--dir DIR] [--leader-only] "
                "[--kill-after DURATION] " TOOL_ETCD_SYNOPSIS " -- CMD [ARG...]",
    .summary = "run a command as a member of a group",
    .help = "Joins GROUP on etcd, runs CMD while the membership is kept alive, and\n"
            "leaves when CMD exits, with CMD's exit status. CMD gets VIGIL_GROUP,\n"
            "VIGIL_MEMBER and VIGIL_GROUP_TERM (the join revision: the term while it\n"
            "leads) in its environment. If the membership is lost while CMD runs,\n"
            "CMD gets SIGTERM, then SIGKILL after --kill-after, and the exit is 79.\n"
            "\n"
            "With --leader-only, CMD runs only while this member leads, with its term\n"
            "in VIGIL_GROUP_TERM: started when the member becomes the leader, sent\n"
            "SIGTERM (SIGKILL after --kill-after) when its leadership ends; then the\n"
            "member joins again, and CMD runs again, under a new term, when it leads\n"
            "again. The tool ends when CMD does (its status) or on SIGINT/SIGTERM\n"
            "(passed on to CMD; 0 when none runs). Fence what CMD writes with the\n"
            "term: a stopped host cannot be stopped by anyone (see vigil(1)).\n"
            "\n"
            "options:\n"
            "  --etcd ENDPOINTS     etcd, e.g. http://10.0.0.1:2379,http://10.0.0.2:2379\n"
            "                       (or --endpoints, as etcdctl; default $ETCDCTL_ENDPOINTS)\n"
            "  --name NAME          the member's name, 1 to 63 bytes (default host:pid);\n"
            "                       one live member per name\n"
            "  --ttl DURATION       the membership's lease, 1s..24h (default 10s; whole\n"
            "                       seconds, etcd's minimum applying)\n"
            "  --dir DIR            record the lease under DIR for `vigil agent --dir DIR`,\n"
            "                       which ends it the moment this process dies (default\n"
            "                       $VIGIL_DIR)\n"
            "  --leader-only        run CMD only while this member leads\n"
            "  --kill-after DURATION  from SIGTERM to SIGKILL on a loss (default 5s)\n"
            "                       (a DURATION: 500ms, 10s, 1.5s, 2m; a number alone is\n"
            "                       milliseconds)\n"
            TOOL_ETCD_HELP
            "  -h, --help           show this help\n"
            "\n"
            "exit status: CMD's own (128 + n if it died of signal n), 75 the name is a\n"
            "live member's, 79 the membership was lost while CMD ran (never with\n"
            "--leader-only, which joins again; 0 there when stopped while not\n"
            "leading), 126/127 CMD not executable / not found, 2 usage error, 1 other\n"
            "errors.\n",
    .run = join_run,
};

static const struct tool_cmd watch_cmd = {
    .name = "group watch",
    .synopsis = "GROUP --etcd ENDPOINTS [--json] " TOOL_ETCD_SYNOPSIS,
    .summary = "print a group's membership and leader changes as they happen",
    .help = "Prints one line per change of GROUP's membership and of its leader,\n"
            "flushed at once, until SIGINT or SIGTERM; the members live at the start\n"
            "come first, as joins, then the leader at the start. Each term is told\n"
            "once. On stderr, a line when etcd stops answering and one when it is back.\n"
            "\n"
            "options:\n"
            TOOL_ETCD_WHERE_HELP
            "  --json            one JSON object per line: {\"event\": \"join\"|\"leave\",\n"
            "                    \"name\", \"pid\", \"host\", \"revision\", \"time\"}, and\n"
            "                    {\"event\": \"leader\", \"name\", \"term\", \"revision\",\n"
            "                    \"time\"} (name and term null when none leads)\n"
            TOOL_ETCD_HELP
            "  -h, --help        show this help\n",
    .run = watch_run,
};

static const struct tool_cmd ls_cmd = {
    .name = "group ls",
    .synopsis = "GROUP --etcd ENDPOINTS [--json] " TOOL_ETCD_SYNOPSIS,
    .summary = "list a group's live members",
    .help = "Lists GROUP's live members, lowest join revision first: the first is\n"
            "the leader, its join revision the term.\n"
            "\n"
            "options:\n"
            TOOL_ETCD_WHERE_HELP
            "  --json            one JSON document: {\"group\", \"leader\", \"term\",\n"
            "                    \"members\": [{\"name\", \"host\", \"pid\", \"revision\",\n"
            "                    \"lease\", \"vigil\"}]}\n"
            TOOL_ETCD_HELP
            "  -h, --help        show this help\n",
    .run = ls_run,
};

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    static const struct tool_cmd *const subs[] = { &join_cmd, &watch_cmd, &ls_cmd };
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        tool_print_help(cmd, stdout);
        return tool_flush();
    }
    for (size_t i = 0; argc >= 2 && i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(argv[1], subs[i]->name + 6) == 0)
            return subs[i]->run(subs[i], argc - 1, argv + 1);
    if (argc < 2)
        return tool_usage_error(cmd, "missing join, watch or ls");
    return tool_usage_error(cmd, "unknown subcommand '%s'", argv[1]);
}

const struct tool_cmd tool_cmd_group = {
    .name = "group",
    .synopsis = "join|watch|ls GROUP --etcd ENDPOINTS ...",
    .summary = "a group of processes across hosts, on etcd",
    .help = "  vigil group join GROUP --etcd ENDPOINTS [--name NAME] [--ttl DURATION]\n"
            "        [--dir DIR] [--leader-only] -- CMD [ARG...]    run CMD as a member\n"
            "  vigil group watch GROUP --etcd ENDPOINTS [--json]   membership, leader\n"
            "  vigil group ls GROUP --etcd ENDPOINTS [--json]      the live members\n"
            "\n"
            "`vigil group SUBCOMMAND --help` tells more. The leader is the member with\n"
            "the lowest join revision; `vigil group ls` names it, as does `etcdctl get\n"
            "--prefix --sort-by=CREATE --limit=1 GROUP/members/` (not `etcdctl elect\n"
            "-l`, which goes on listening).\n"
            "A host's `vigil agent --dir DIR` ends a member's lease the moment its\n"
            "process dies, so other hosts see it gone at once (else at its TTL).\n"
            "\n"
            "options:\n"
            "  --etcd ENDPOINTS  etcd, e.g. http://10.0.0.1:2379 (every subcommand; or\n"
            "                    --endpoints, or $ETCDCTL_ENDPOINTS)\n"
            "  -h, --help        show this help\n",
    .run = run,
};
