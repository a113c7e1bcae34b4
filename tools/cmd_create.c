/* SPDX-License-Identifier: MIT */
/* vigil create FILE --capacity N: make a heartbeat table. */
#include "vigil.h"

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t capacity = 0;
    bool have_capacity = false;
    const struct tool_opt opts[] = {
        { "capacity", OPT_U64, 1, TOOL_MAX_CAPACITY, &capacity, &have_capacity, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 1, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    if (!have_capacity)
        return tool_usage_error(cmd, "--capacity is required");

    vigil_hb *hb;
    int err = vigil_hb_create(pos[0], (uint32_t)capacity, &hb);
    if (err < 0)
        return tool_fail(pos[0], err);
    vigil_hb_close(hb);
    printf("%s: heartbeat table, capacity %llu, %llu bytes\n", pos[0],
           (unsigned long long)capacity, (unsigned long long)(64 + capacity * 64));
    return tool_flush();
}

const struct tool_cmd tool_cmd_create = {
    .name = "create",
    .synopsis = "FILE --capacity N",
    .summary = "make a heartbeat table",
    .help = "Makes a heartbeat table of N slots (1..1048576) at FILE, mode 0600.\n"
            "Never replaces anything: an existing FILE is an error.\n"
            "\n"
            "options:\n"
            "  --capacity N   number of slots, one per process (required)\n"
            "  -h, --help     show this help\n",
    .run = run,
};
