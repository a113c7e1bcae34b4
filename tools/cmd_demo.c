/* SPDX-License-Identifier: MIT */
/* vigil demo [--workers N]: the whole system at work, end to end. */
#include "vigil.h"

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t workers = 4;
    const struct tool_opt opts[] = {
        { "workers", OPT_U64, 2, 32, &workers, NULL },
    };
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 1, NULL, 0, 0, &npos);
    if (rc != TOOL_GO)
        return rc;
    fprintf(stderr, "vigil %s: not built yet\n", cmd->name);
    return EXIT_RUNTIME;
}

const struct tool_cmd tool_cmd_demo = {
    .name = "demo",
    .synopsis = "[--workers N]",
    .summary = "the whole system at work, end to end",
    .help = "Not built yet.\n",
    .run = run,
};
