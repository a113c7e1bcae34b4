/* SPDX-License-Identifier: MIT */
/*
 * vigil(1): make, inspect, watch, tick and guard vigil files, and show the
 * whole system at work (`vigil demo`). This file is main and the dispatch;
 * each command lives in its own cmd_<name>.c.
 */
#include "etcd_exec.h"
#include "etcd_opts.h"
#include "vigil.h"

#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static const struct tool_cmd *const commands[] = {
    &tool_cmd_create, &tool_cmd_inspect, &tool_cmd_watch,
    &tool_cmd_tick,   &tool_cmd_failover, &tool_cmd_demo,    &tool_cmd_lock, &tool_cmd_ls, &tool_cmd_export,
    &tool_cmd_group,  &tool_cmd_agent,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_overview(FILE *out)
{
    fputs("usage: vigil COMMAND [ARGS]\n"
          "\n"
          "Liveness and coordination between processes through memory-mapped files.\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  vigil %s %s\n      %s\n", commands[i]->name, commands[i]->synopsis,
                commands[i]->summary);
    fputs("\n"
          "`vigil COMMAND --help` describes a command; `vigil --version` (-V) prints\n"
          "the version. Exit status: 0 success, 1 runtime error, 2 usage error.\n"
          "See vigil(1), and vigil(7) for the concepts.\n",
          out);
}

static const struct tool_cmd *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    tool_etcd_hide_secrets(argc, argv); /* first: /proc/PID/cmdline is everyone's to read */
    if (argc < 2) {
        fputs("vigil: missing COMMAND\n", stderr);
        print_overview(stderr);
        return EXIT_USAGE;
    }
#ifdef VIGIL_HAVE_ETCD
    /* The helper, exec'd by `vigil` in its place, keeps the name scripts
     * look for (pgrep -x vigil, killall vigil, ps -C vigil); its
     * /proc/PID/exe names vigil-etcd. */
    prctl(PR_SET_NAME, "vigil", 0, 0, 0);
#endif
    tool_etcd_keep_argv(argv);
    const char *name = argv[1];
#ifdef VIGIL_ETCD_HELPER
    if (tool_wants_etcd(argc, argv)) /* the etcd commands run in the helper, in our place */
        return tool_exec_etcd(argv);
#endif
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        if (argc > 2) {
            fprintf(stderr, "vigil: unexpected argument '%s'\n", tool_e(argv[2]));
            return EXIT_USAGE;
        }
        printf("vigil %s (layout version %u)\n", VIGIL_VERSION, VIGIL_LAYOUT_VERSION);
        return tool_flush();
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc == 2) {
            print_overview(stdout);
            return tool_flush();
        }
        /* vigil help COMMAND */
        const struct tool_cmd *cmd = find(argv[2]);
        if (!cmd || argc > 3) {
            fprintf(stderr, "vigil: %s '%s'\n", cmd ? "unexpected argument" : "unknown command",
                    tool_e(cmd ? argv[3] : argv[2]));
            return EXIT_USAGE;
        }
        tool_print_help(cmd, stdout);
        return tool_flush();
    }
    const struct tool_cmd *cmd = find(name);
    if (!cmd) {
        fprintf(stderr, "vigil: unknown command '%s' (try 'vigil --help')\n", tool_e(name));
        return EXIT_USAGE;
    }
    int rc = cmd->run(cmd, argc - 1, argv + 1);
    /* A look the guard jumped out of left its handles behind (by design,
     * tools/look_guard.c): leave without the exit handlers that would count
     * them as leaks. */
    if (tool_guard_jumped()) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
