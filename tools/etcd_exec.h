/* SPDX-License-Identifier: MIT */
/*
 * `vigil` is built without the etcd adapter, so that a one-host command
 * starts with libc alone; the commands that need etcd run in its helper,
 * `vigil-etcd` (the same sources built with the adapter), which `vigil`
 * execs in its own place: the same argv, environment, descriptors, signal
 * mask and dispositions, and pid, so that CMD, a supervisor or a shell sees
 * one process, as before (the helper names itself "vigil" too). Routed in
 * two steps: main asks tool_wants_etcd, a shortcut; a command line it
 * misses reaches the helper all the same, from the etcd path of each
 * command, which in `vigil` calls tool_etcd_elsewhere.
 */
#ifndef VIGIL_TOOL_ETCD_EXEC_H
#define VIGIL_TOOL_ETCD_EXEC_H

#include "vigil.h"

#include <stdbool.h>

/* Keeps main's argv: the command line the helper is given whole. */
void tool_etcd_keep_argv(char **argv);

/* Does this command line go to the helper? `group` and `agent`, unless
 * --help or -h stands before any "--" (their help is served here); `lock`
 * and `export` when an argument before the first "--" is --etcd or
 * --endpoints (alone or with =VALUE), wherever it stands among the
 * positional arguments (--endpoints is --etcd's other name, as
 * etcdctl's); `lock` without --store, and `export` with --group, when
 * ETCDCTL_ENDPOINTS is set (it stands for --etcd there). What is taken
 * for etcd and is not loses nothing (the helper
 * runs every command alike); what is missed (a "--" that is an option's
 * value, as in `export --textfile -- --etcd E`) reaches the helper
 * through tool_etcd_elsewhere. Only in a `vigil` built beside a helper
 * (VIGIL_ETCD_HELPER). */
bool tool_wants_etcd(int argc, char **argv);

/* Execs the helper with argv: returns only when it could not, after one
 * line on stderr naming the helper and why; then EXIT_RUNTIME. */
int tool_exec_etcd(char **argv);

/* For a command of a `vigil` without the adapter that finds it needs
 * etcd: cmd's help when --help or -h stands in argv (argc of them, argv[0]
 * the command) before any "--", as tool_parse serves it; else the whole
 * command line (tool_etcd_keep_argv) handed to the helper, or, in a build
 * with no helper, one line saying so. Returns only when the helper did not
 * run: EXIT_OK after help, else EXIT_RUNTIME. */
int tool_etcd_elsewhere(const struct tool_cmd *cmd, int argc, char **argv);

#endif
