/* SPDX-License-Identifier: MIT */
/*
 * vigil agent --etcd ENDPOINTS --dir DIR [--json]: the host's agent. Every
 * member started with the same --dir (or VIGIL_DIR) records its etcd lease
 * under DIR; the agent watches each member's process through a pidfd and
 * revokes its lease the moment it dies, so other hosts see the member gone,
 * its units free and its leadership passed on within a round trip to etcd
 * instead of a TTL. A member that died while no agent ran is revoked when
 * one starts (the records under DIR are all the state there is). One line
 * per revoke; SIGINT or SIGTERM end it.
 */
#define _GNU_SOURCE
#include "etcd_opts.h"
#include "etcd_report.h"
#include "vigil.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#ifdef VIGIL_HAVE_ETCD
#include <vigil/group.h>

/* The agent asks nothing of etcd at rest: it asks this often whether etcd
 * answers, so that an etcd it could not revoke on is said at once. */
#define AGENT_PING_MS 2000

static void print_revoke(const vigil_agent_event *ev, bool json)
{
    /* -EREMOTE: a member this agent cannot see (another pid namespace,
     * or /proc from another), said once and left to its TTL. */
    bool unseen = ev->result == -EREMOTE;
    const char *what = unseen ? "unwatched" : ev->result == 0 ? "revoked" : ev->result == VIGIL_ELOST ? "gone" : "failed";
    if (json) {
        printf("{\"event\": \"%s\", \"lease\": \"%" PRIx64 "\", \"pid\": %" PRIu32 ", \"group\": ", what,
               (uint64_t)ev->lease, ev->pid);
        json_str(stdout, ev->group, sizeof(ev->group));
        printf(", \"name\": ");
        json_str(stdout, ev->name, sizeof(ev->name));
        printf(", \"error\": ");
        if (unseen)
            json_str(stdout, "in another pid namespace, or not visible from here: left to its TTL", 200);
        else if (ev->result < 0 && ev->result != VIGIL_ELOST)
            json_str(stdout, vigil_strerror(ev->result), 200);
        else
            printf("null");
        printf("}\n");
    } else if (unseen) {
        printf("not watching lease %" PRIx64 " of %s in %s: its pid %" PRIu32 " is another pid namespace's, or "
               "cannot be seen from here; its lease ends at its TTL\n",
               (uint64_t)ev->lease, tool_e(ev->name), tool_e(ev->group), ev->pid);
    } else if (ev->result == 0 || ev->result == VIGIL_ELOST) {
        printf("%s lease %" PRIx64 " of %s in %s (pid %" PRIu32 " died)\n", what, (uint64_t)ev->lease,
               tool_e(ev->name), tool_e(ev->group), ev->pid);
    } else {
        printf("failed to revoke lease %" PRIx64 " of %s in %s (pid %" PRIu32 " died): %s; retrying\n",
               (uint64_t)ev->lease, tool_e(ev->name), tool_e(ev->group), ev->pid, vigil_strerror(ev->result));
    }
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    const char *etcd = NULL, *dir = NULL;
    bool json = false, trust = false;
    struct tool_etcd_flags flags = { 0 };
    struct tool_etcd_where where = { NULL, NULL };
    const struct tool_opt opts[] = {
        TOOL_ETCD_WHERE_OPTS(&where),
        { "dir", OPT_STR, 0, 0, NULL, NULL, &dir },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
        { "trust-owner", OPT_FLAG, 0, 0, NULL, &trust, NULL },
        TOOL_ETCD_OPTS(&flags),
    };
    size_t npos = 0;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), NULL, 0, 0, &npos);
    if (rc != TOOL_GO || (rc = tool_etcd_where(cmd, &where, &etcd)) != TOOL_GO)
        return rc;
    if (!etcd)
        return tool_usage_error(cmd, TOOL_ETCD_MISSING);
    if (!dir)
        return tool_usage_error(cmd, "missing --dir DIR");
    vigil_etcd *e = NULL;
    vigil_agent *a = NULL;
    struct vigil_etcd_options o;
    if ((rc = tool_etcd_options(cmd, &flags, &o)) == TOOL_GO)
        rc = tool_etcd_connect(dir, etcd, &o, &e);
    tool_etcd_flags_free(&flags);
    if (rc != TOOL_GO && rc != 0)
        return rc;
    /* A request is bounded well under any TTL: a revoke that hangs on a
     * frozen member goes to the next one. */
    vigil_etcd_set_timeout(e, flags.dial_ms ? (uint32_t)flags.dial_ms : 500,
                           flags.command_ms ? (uint32_t)flags.command_ms : 1000); /* or as the user said */
    if ((rc = vigil_agent_open_flags(e, dir, trust ? VIGIL_OPEN_TRUST_OWNER : 0, &a)) < 0) {
        vigil_etcd_close(e);
        return rc == VIGIL_EUNTRUSTED ? tool_fail_untrusted(dir) : tool_fail(dir, rc);
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    if (!json)
        printf("vigil agent: watching %s (%" PRIu32 " member%s)\n", tool_e(dir), vigil_agent_watched(a),
               vigil_agent_watched(a) == 1 ? "" : "s");
    else
        printf("{\"event\": \"ready\", \"watched\": %" PRIu32 "}\n", vigil_agent_watched(a));
    int exit_rc = tool_flush();
    tool_sd_notify("READY=1");
    struct tool_etcd_report rep;
    (void)tool_etcd_report_start(&rep, e, "agent", etcd, AGENT_PING_MS);
    while (exit_rc == EXIT_OK) {
        vigil_agent_event ev[32];
        /* A first pass without sleeping: what opening found dead. */
        int n = vigil_agent_run(a, 0, ev, 32);
        if (n == 0) {
            struct pollfd pf[2] = { { vigil_agent_fd(a), POLLIN, 0 }, { sfd, POLLIN, 0 } };
            if (poll(pf, 2, 250) < 0 && errno != EINTR) /* 250: a failed revoke's retry */
                break;
            if (pf[1].revents & POLLIN)
                break;
            n = vigil_agent_run(a, 0, ev, 32);
        }
        if (n < 0) {
            exit_rc = tool_fail(dir, n);
            break;
        }
        for (int i = 0; i < n; i++)
            print_revoke(&ev[i], json);
        if (n > 0)
            exit_rc = tool_flush();
    }
    if (sfd >= 0)
        close(sfd);
    tool_etcd_report_stop(&rep);
    vigil_agent_close(a);
    vigil_etcd_close(e);
    return exit_rc;
}
#else /* no etcd adapter: the helper's, or help */
#include "etcd_exec.h"

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    return tool_etcd_elsewhere(cmd, argc, argv);
}
#endif

const struct tool_cmd tool_cmd_agent = {
    .name = "agent",
    .synopsis = "--etcd ENDPOINTS --dir DIR [--json] [--trust-owner] " TOOL_ETCD_SYNOPSIS,
    .summary = "end a group member's etcd lease the moment its process dies",
    .help = "The host's agent: every member started with the same --dir DIR (or\n"
            "VIGIL_DIR) records its etcd lease under DIR, and the agent revokes it the\n"
            "moment the member's process dies (it watches each through a pidfd), so\n"
            "other hosts see the member leave, its units free and its leadership gone\n"
            "at once rather than at its TTL. Members that died while no agent ran are\n"
            "revoked when it starts. A member it cannot see (another pid namespace,\n"
            "such as a container sharing DIR) is never judged dead: said once, and\n"
            "left to its TTL. Prints a line per revoke; runs until SIGINT or\n"
            "SIGTERM. Run one per host (a systemd unit), as the members' user; DIR is\n"
            "made 0700.\n"
            "\n"
            "options:\n"
            TOOL_ETCD_WHERE_HELP
            "  --dir DIR         the directory the members record their leases in\n"
            "  --json            one JSON object per line: {\"event\": \"ready\"|\"revoked\"|\n"
            "                    \"gone\"|\"failed\"|\"unwatched\", \"lease\", \"pid\", \"group\", \"name\",\n"
            "                    \"error\"}\n"
            "  --trust-owner     use DIR even if another user could have written in it\n"
            "                    (writable by everyone, or another user's outside a\n"
            "                    group of yours), and read their records: refused and\n"
            "                    ignored otherwise\n"
            TOOL_ETCD_HELP
            "  -h, --help        show this help\n",
    .run = run,
};
