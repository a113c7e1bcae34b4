/* SPDX-License-Identifier: MIT */
/*
 * vigil watch FILE [--interval MS] [--grace G]: inspect's view, refreshed.
 * On a terminal the screen is redrawn in place; into a pipe or a file each
 * refresh is appended, followed by a blank line, and flushed at once.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t interval = 1000, grace = TOOL_DEFAULT_GRACE;
    const struct tool_opt opts[] = {
        { "interval", OPT_U64, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 2, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    const char *path = pos[0];
    bool tty = isatty(STDOUT_FILENO);
    tool_catch_stop_signals();

    for (;;) {
        /* Render off screen first, so a redraw never shows half a table. */
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (!mem)
            return tool_fail(path, -errno);
        time_t now = time(NULL);
        struct tm tm;
        char stamp[32] = "";
        if (localtime_r(&now, &tm))
            strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
        fprintf(mem, "vigil watch %s, every %llu ms, %s%s\n", path, (unsigned long long)interval,
                stamp, tty ? " (Ctrl-C ends)" : "");
        rc = tool_show(path, grace, false, mem, NULL);
        fclose(mem);
        if (rc != 0) {
            free(buf);
            return rc;
        }
        if (tty)
            fputs("\033[H\033[2J", stdout);
        fwrite(buf, 1, len, stdout);
        if (!tty)
            fputc('\n', stdout);
        free(buf);
        if ((rc = tool_flush()) != 0)
            return rc;
        if (tool_sleep_ms(interval))
            return EXIT_OK;
    }
}

const struct tool_cmd tool_cmd_watch = {
    .name = "watch",
    .synopsis = "FILE [--interval MS] [--grace G]",
    .summary = "live refreshing view",
    .help = "Shows FILE as `vigil inspect` does, again every MS milliseconds, until\n"
            "SIGINT or SIGTERM (then exits 0). On a terminal the view is redrawn in\n"
            "place; otherwise each view is appended, ending with a blank line.\n"
            "\n"
            "options:\n"
            "  --interval MS   time between views, 1..86400000 (default 1000)\n"
            "  --grace G       epochs a slot may miss before it is stale (default 5)\n"
            "  -h, --help      show this help\n",
    .run = run,
};
