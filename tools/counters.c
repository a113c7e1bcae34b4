/* SPDX-License-Identifier: MIT */
/*
 * The counters of structural events of any vigil file, for vigil watch:
 * read through the library (vigil_hb_stats, vigil_barrier_peek,
 * vigil_leases_stats) from a read-only handle, shown as totals and as
 * rates per second between two views.
 */
#include "vigil.h"

#include <inttypes.h>

static void put(struct tool_counters *c, const char *name, uint64_t v)
{
    c->name[c->n] = name;
    c->value[c->n++] = v;
}

int tool_counters_read(const char *path, uint32_t kind, struct tool_counters *out)
{
    struct tool_counters c = { .kind = kind };
    int rc;
    if (kind == VIGIL_KIND_HEARTBEAT) {
        vigil_hb *hb;
        if ((rc = vigil_hb_open_readonly(path, 0, &hb)) < 0)
            return rc;
        vigil_hb_counters hc;
        rc = vigil_hb_stats(hb, &hc);
        vigil_hb_close(hb);
        if (rc < 0)
            return rc;
        put(&c, "registers", hc.registers);
        put(&c, "unregisters", hc.unregisters);
        put(&c, "reclaims", hc.reclaims);
        put(&c, "repairs", hc.repairs);
        put(&c, "leader_changes", hc.leader_changes);
    } else if (kind == VIGIL_KIND_BARRIER) {
        vigil_barrier_state st;
        if ((rc = vigil_barrier_peek(path, &st)) < 0)
            return rc;
        put(&c, "releases", st.epoch);
        put(&c, "withdrawals", st.withdrawals);
    } else if (kind == VIGIL_KIND_LEASES) {
        vigil_leases *ls;
        if ((rc = vigil_leases_open_readonly(path, &ls)) < 0)
            return rc;
        vigil_leases_counters lc;
        rc = vigil_leases_stats(ls, &lc);
        vigil_leases_close(ls);
        if (rc < 0)
            return rc;
        put(&c, "handovers", lc.handovers);
        put(&c, "renewals_refused", lc.renewals_refused);
        put(&c, "expiries", lc.expiries);
    } else {
        return VIGIL_EBADFILE;
    }
    *out = c;
    return 0;
}

/* Counter i's rate from `was` to `now`, `ms` apart. A count that went
 * down (a wrap) is read as Prometheus reads it: a reset to 0 since. */
static double rate(const struct tool_counters *now, const struct tool_counters *was, size_t i, uint64_t ms)
{
    uint64_t d = now->value[i] >= was->value[i] ? now->value[i] - was->value[i] : now->value[i];
    return (double)d * 1000.0 / (double)ms;
}

static bool comparable(const struct tool_counters *now, const struct tool_counters *was, uint64_t ms)
{
    return was && ms > 0 && was->kind == now->kind && was->n == now->n;
}

void tool_counters_human(const struct tool_counters *now, const struct tool_counters *was, uint64_t ms,
                         FILE *out)
{
    fputs("counters:", out);
    for (size_t i = 0; i < now->n; i++) {
        fprintf(out, "%s ", i ? "," : "");
        for (const char *p = now->name[i]; *p; p++)
            fputc(*p == '_' ? ' ' : *p, out);
        fprintf(out, " %" PRIu64, now->value[i]);
    }
    fputs("\nrates /s:", out);
    if (!comparable(now, was, ms)) {
        fputs(" (from the next view on)\n", out);
        return;
    }
    for (size_t i = 0; i < now->n; i++) {
        fprintf(out, "%s ", i ? "," : "");
        for (const char *p = now->name[i]; *p; p++)
            fputc(*p == '_' ? ' ' : *p, out);
        fprintf(out, " %.2f", rate(now, was, i, ms));
    }
    fputc('\n', out);
}

void tool_counters_json(const struct tool_counters *now, const struct tool_counters *was, uint64_t ms,
                        FILE *out)
{
    fputs("\"counters\": {", out);
    for (size_t i = 0; i < now->n; i++) {
        fprintf(out, "%s\"%s\": ", i ? ", " : "", now->name[i]);
        json_u64(out, now->value[i]);
    }
    fputs("}, \"rates\": ", out);
    if (!comparable(now, was, ms)) {
        fputs("null", out);
        return;
    }
    fputc('{', out);
    for (size_t i = 0; i < now->n; i++)
        fprintf(out, "%s\"%s\": %.6g", i ? ", " : "", now->name[i], rate(now, was, i, ms));
    fputc('}', out);
}
