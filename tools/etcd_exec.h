/* SPDX-License-Identifier: MIT */
/*
 * `vigil` is built without the etcd adapter, so that a one-host command
 * starts with libc alone; the commands that need etcd run in its helper,
 * `vigil-etcd` (the same sources built with the adapter), which `vigil`
 * execs in its own place: the same argv, environment, descriptors, signal
 * mask and dispositions, and pid, so that CMD, a supervisor or a shell sees
 * one process, as before. Only in a `vigil` built beside a helper
 * (VIGIL_ETCD_HELPER).
 */
#ifndef VIGIL_TOOL_ETCD_EXEC_H
#define VIGIL_TOOL_ETCD_EXEC_H

#include <stdbool.h>

/* Does this command line need etcd? `group` and `agent` always; `lock`
 * and `export` when an option before any "--" names etcd (--etcd,
 * --endpoints, with or without =VALUE), and `lock` without --store when
 * ETCDCTL_ENDPOINTS is set. A command line taken for etcd that is not
 * (an option's value that reads "--etcd") loses nothing: the helper runs
 * every command alike. A new way of naming etcd is added here. */
bool tool_wants_etcd(int argc, char **argv);

/* Execs the helper with argv: returns only when it could not, after one
 * line on stderr naming the helper and why; then EXIT_RUNTIME. */
int tool_exec_etcd(char **argv);

#endif
