/* SPDX-License-Identifier: MIT */
/*
 * vigil export --etcd ENDPOINTS --group GROUP[,GROUP...]: gauges of groups
 * on etcd beside the files' (cmd_export.c), each read once at one etcd
 * revision (vigil_group_stats_get):
 *
 *   vigil_group_up{group}                1 read, 0 not (the reason on stderr)
 *   vigil_group_members{group}           live members
 *   vigil_group_units{group,state}       free, owned, done
 *   vigil_group_round{group}             the round gathering (rounds released)
 *   vigil_group_leader_term{group}       the leader's join revision, 0 none
 */
#define _GNU_SOURCE
#include "etcd_opts.h"
#include "export_group.h"

#include <stdlib.h>
#include <string.h>

#ifdef VIGIL_HAVE_ETCD
#include <vigil/group.h>

/* {group="..."} with the name escaped as the exposition format wants. */
static void label(FILE *out, const char *group, const char *k, const char *v)
{
    fputs("{group=\"", out);
    tool_label_value(out, group);
    fputc('"', out);
    if (k)
        fprintf(out, ",%s=\"%s\"", k, v);
    fputs("}", out);
}

int tool_export_groups(FILE *out, const char *endpoints, const char *groups, const struct vigil_etcd_options *o,
                       bool *all_up)
{
    vigil_etcd *e = NULL;
    if (tool_etcd_connect("export", endpoints, o, &e) != 0) {
        *all_up = false;
        return EXIT_RUNTIME;
    }
    char *list = strdup(groups);
    size_t n = 0;
    for (const char *p = groups; *p; p++)
        n += *p == ',';
    vigil_group_stats *st = calloc(n + 1, sizeof(*st));
    const char **name = calloc(n + 1, sizeof(*name));
    bool *up = calloc(n + 1, sizeof(*up));
    if (!list || !st || !name || !up) {
        free(list), free(st), free(name), free(up);
        vigil_etcd_close(e);
        *all_up = false;
        return tool_fail("export", -12);
    }
    size_t k = 0;
    for (char *save = NULL, *g = strtok_r(list, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        name[k] = g;
        int rc = vigil_group_stats_get(e, g, &st[k]);
        up[k] = rc == 0;
        if (rc < 0) {
            fprintf(stderr, "vigil: group %s: %s\n", tool_e(g), tool_e(tool_etcd_reason(e, rc)));
            *all_up = false;
        }
        k++;
    }
    vigil_etcd_close(e);
    static const struct {
        const char *name, *help;
    } fam[] = {
        { "vigil_group_up", "1 when the group was read from etcd, 0 when it could not be." },
        { "vigil_group_members", "Live members of the group." },
        { "vigil_group_units", "Work units by state: free (in the set, unowned), owned, done." },
        { "vigil_group_round", "The barrier round gathering: rounds released so far." },
        { "vigil_group_leader_term", "The leader's term (its join revision), 0 without members." },
    };
    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", fam[f].name, fam[f].help, fam[f].name);
        for (size_t i = 0; i < k; i++) {
            if (f > 0 && !up[i])
                continue;
            if (f == 2) {
                static const char *const state[] = { "free", "owned", "done" };
                const uint32_t v[] = { st[i].units_free, st[i].units_owned, st[i].units_done };
                for (int s = 0; s < 3; s++) {
                    fputs(fam[f].name, out);
                    label(out, name[i], "state", state[s]);
                    fprintf(out, " %u\n", v[s]);
                }
                continue;
            }
            double v = f == 0 ? up[i] : f == 1 ? st[i].members : f == 3 ? (double)st[i].round : (double)st[i].term;
            fputs(fam[f].name, out);
            label(out, name[i], NULL, NULL);
            fprintf(out, " %.17g\n", v);
        }
    }
    free(list), free(st), free(name), free(up);
    return EXIT_OK;
}
#else
#include "etcd_exec.h"

int tool_export_groups(FILE *out, const char *endpoints, const char *groups, const struct vigil_etcd_options *o,
                       bool *all_up)
{
    (void)out, (void)endpoints, (void)groups, (void)o;
    *all_up = false;
    return tool_etcd_elsewhere(&tool_cmd_export, 0, NULL); /* the command line goes on in the helper, whole */
}
#endif
