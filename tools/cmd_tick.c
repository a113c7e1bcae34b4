/* SPDX-License-Identifier: MIT */
/*
 * vigil tick FILE [--interval MS] [--count N]: the epoch ticker. Every
 * interval the table's epoch goes up by one; a slot that has not beaten
 * for more than grace ticks is stale. Ticks first, then sleeps, so
 * --count N takes (N - 1) intervals.
 */
#include "vigil.h"

#include <inttypes.h>

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t interval = 1000, count = 0;
    bool have_count = false;
    const struct tool_opt opts[] = {
        { "interval", OPT_U64, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "count", OPT_U64, 1, UINT64_MAX, &count, &have_count, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 2, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    vigil_hb *hb;
    if ((rc = tool_open_hb(pos[0], &hb)) != 0)
        return rc;
    tool_catch_stop_signals();

    for (uint64_t done = 0;;) {
        uint64_t epoch = vigil_hb_tick(hb);
        printf("epoch %" PRIu64 "\n", epoch);
        if ((rc = tool_flush()) != 0)
            break;
        if (have_count && ++done == count)
            break;
        if (tool_sleep_ms(interval))
            break;
    }
    vigil_hb_close(hb);
    return rc;
}

const struct tool_cmd tool_cmd_tick = {
    .name = "tick",
    .synopsis = "FILE [--interval MS] [--count N]",
    .summary = "epoch ticker",
    .help = "Advances the epoch of the heartbeat table FILE by one every MS\n"
            "milliseconds and prints each new epoch on its own line, until N ticks\n"
            "are done or SIGINT or SIGTERM arrives (then exits 0).\n"
            "\n"
            "options:\n"
            "  --interval MS   time between ticks, 1..86400000 (default 1000)\n"
            "  --count N       stop after N ticks, N >= 1 (default: never)\n"
            "  -h, --help      show this help\n",
    .run = run,
};
