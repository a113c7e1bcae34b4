/* SPDX-License-Identifier: MIT */
/* vigil export's gauges of groups on etcd (export_group.c). */
#ifndef VIGIL_TOOL_EXPORT_GROUP_H
#define VIGIL_TOOL_EXPORT_GROUP_H

#include "vigil.h"

struct vigil_etcd_options;

/* The families of every group in the comma-separated list, on out; *all_up
 * cleared for a group that could not be read (its reason on stderr).
 * EXIT_OK, or EXIT_RUNTIME when etcd could not be reached at all. */
int tool_export_groups(FILE *out, const char *endpoints, const char *groups, const struct vigil_etcd_options *o,
                       bool *all_up);

#endif
