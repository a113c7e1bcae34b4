/* SPDX-License-Identifier: MIT */
/* vigil failover FILE [--grace G] [--interval MS] [--once] [--json]: the watchdog. */
#include "vigil.h"

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE, interval = 1000;
    bool once = false, json = false;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL },
        { "interval", OPT_U64, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL },
        { "once", OPT_FLAG, 0, 0, NULL, &once },
        { "json", OPT_FLAG, 0, 0, NULL, &json },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 4, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    fprintf(stderr, "vigil %s: not built yet (waits on the failover module)\n", cmd->name);
    return EXIT_RUNTIME;
}

const struct tool_cmd tool_cmd_failover = {
    .name = "failover",
    .synopsis = "FILE --grace G [--interval MS] [--once] [--json]",
    .summary = "watchdog",
    .help = "Not built yet.\n",
    .run = run,
};
