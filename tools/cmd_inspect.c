/* SPDX-License-Identifier: MIT */
/*
 * vigil inspect FILE [--grace G] [--json]: any vigil file, header and
 * slots. The file is only read: inspect never changes a byte, and a file
 * a peer broke is described, never trusted (the library checks the header
 * against the size before a slot is touched).
 */
#include "vigil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

enum slot_state { ST_VACANT, ST_LIVE, ST_STALE };

/* Tables at least this large show their progress while being read. */
#define PROGRESS_SLOTS 65536u

struct row {
    vigil_slot_info info;
    uint8_t         state;
    bool            busy; /* SeqLock odd: a change in progress, or wedged */
};

static const char *role_name(uint32_t role)
{
    switch (role) {
    case VIGIL_ROLE_WORKER:      return "worker";
    case VIGIL_ROLE_COORDINATOR: return "coordinator";
    }
    return "unknown";
}

static const char *state_name(uint8_t st)
{
    return st == ST_LIVE ? "live" : st == ST_STALE ? "stale" : "vacant";
}

/* A consistent snapshot when there is one; a wedged slot word by word
 * (tool_slot_look), marked busy. */
static void read_row(const vigil_hb *hb, uint32_t i, uint64_t epoch, uint64_t grace, struct row *r)
{
    int rc = tool_slot_look(hb, i, &r->info, &r->busy);
    if (rc < 0 && rc != VIGIL_EBUSY)
        r->info.pid = 0;
    if (r->info.pid == 0)
        r->state = ST_VACANT;
    else
        r->state = vigil_hb_is_live_at(r->info.pid, r->info.last_seen_epoch, epoch, grace)
                       ? ST_LIVE : ST_STALE;
}

/* What --check judges: every occupied slot live, none mid-change. */
static void summarize(const struct row *rows, uint32_t cap, struct tool_summary *sum)
{
    if (!sum)
        return;
    sum->occupied = sum->live = sum->busy = 0;
    for (uint32_t i = 0; i < cap; i++) {
        sum->occupied += rows[i].state != ST_VACANT;
        sum->live += rows[i].state == ST_LIVE;
        sum->busy += rows[i].busy;
    }
}

/* Whether row r is in the set a range line lists: vacant slots, or
 * wedged ones (held by a writer past a look, whatever their state). */
static bool in_set(const struct row *r, bool wedged)
{
    return wedged ? r->busy : r->state == ST_VACANT && !r->busy;
}

static void print_ranges(const struct row *rows, uint32_t cap, bool wedged, FILE *out)
{
    bool any = false;
    for (uint32_t i = 0; i < cap;) {
        if (!in_set(&rows[i], wedged)) {
            i++;
            continue;
        }
        uint32_t j = i;
        while (j + 1 < cap && in_set(&rows[j + 1], wedged))
            j++;
        fprintf(out, any ? ", " : wedged ? "wedged (mid-change): " : "vacant: ");
        if (j == i)
            fprintf(out, "%u", i);
        else
            fprintf(out, "%u-%u", i, j);
        any = true;
        i = j + 1;
    }
    if (any)
        fputc('\n', out);
}

static struct row *read_rows(const vigil_hb *hb, uint64_t epoch, uint64_t grace, uint32_t counts[3])
{
    uint32_t cap = vigil_hb_capacity(hb);
    struct row *rows = calloc(cap, sizeof(*rows));
    if (!rows)
        return NULL;
    counts[0] = counts[1] = counts[2] = 0;
    /* A large table takes a while: say how far it got, on a terminal. */
    bool progress = cap >= PROGRESS_SLOTS && isatty(STDERR_FILENO);
    for (uint32_t i = 0; i < cap; i++) {
        if (progress && (i % (PROGRESS_SLOTS / 4)) == 0)
            fprintf(stderr, "\rvigil: reading slot %u of %u (%u%%)", i, cap, (unsigned)((uint64_t)i * 100 / cap));
        read_row(hb, i, epoch, grace, &rows[i]);
        counts[rows[i].state]++;
    }
    if (progress)
        fputs("\r\033[K", stderr);
    return rows;
}

void tool_show_hb_table(const vigil_hb *hb, uint64_t grace, FILE *out, struct tool_summary *sum)
{
    uint64_t epoch = vigil_hb_epoch(hb);
    uint32_t cap = vigil_hb_capacity(hb);
    uint32_t counts[3];
    struct row *rows = read_rows(hb, epoch, grace, counts);
    if (!rows) {
        fprintf(out, "(out of memory reading %u slots)\n", cap);
        return;
    }
    if (counts[ST_LIVE] + counts[ST_STALE] > 0) {
        fprintf(out, " slot       pid  role          last_seen      age  in_flight           state\n");
        for (uint32_t i = 0; i < cap; i++) {
            const struct row *r = &rows[i];
            if (r->state == ST_VACANT)
                continue;
            int64_t age = (int64_t)(epoch - r->info.last_seen_epoch);
            fprintf(out, "%5u %9u  %-12s %10" PRIu64 " %8" PRId64 "  0x%016" PRIx64 "  %s%s\n", i,
                    r->info.pid, role_name(r->info.role), r->info.last_seen_epoch, age,
                    r->info.in_flight, state_name(r->state), r->busy ? " (mid-change)" : "");
        }
    }
    print_ranges(rows, cap, false, out);
    print_ranges(rows, cap, true, out);
    struct tool_summary mine = { 0 };
    summarize(rows, cap, &mine);
    if (sum) {
        sum->occupied = mine.occupied, sum->live = mine.live, sum->busy = mine.busy;
    }
    fprintf(out, "slots: %u live, %u stale, %u vacant (grace %" PRIu64 ")", counts[ST_LIVE],
            counts[ST_STALE], counts[ST_VACANT], grace);
    if (mine.busy)
        fprintf(out, ", %u wedged", mine.busy);
    fputc('\n', out);
    free(rows);
}

static void show_hb_human(const char *path, const vigil_hb *hb, uint64_t grace, FILE *out,
                          struct tool_summary *sum)
{
    fprintf(out, "%s: heartbeat table, capacity %u, epoch %" PRIu64 "\n", tool_e(path),
            vigil_hb_capacity(hb), vigil_hb_epoch(hb));
    vigil_leader ld;
    int rc = vigil_leader_get(hb, &ld);
    static const char gone[] = " (no longer holds: the next election replaces it)";
    if (rc == 0)
        fprintf(out, "leader: slot %u, pid %u, term %" PRIu64 "%s\n", ld.slot, ld.pid, ld.term,
                vigil_leader_is(hb, ld.slot, grace) ? "" : gone);
    else if (rc == VIGIL_EBUSY)
        fprintf(out, "leader: an election is installing a new one\n");
    else
        fprintf(out, "leader: none elected\n");
    tool_show_hb_table(hb, grace, out, sum);
}

/* The leader as JSON: {"slot", "pid", "term", "holds"}, or null. */
static void leader_json(const vigil_hb *hb, uint64_t grace, FILE *out)
{
    vigil_leader ld;
    if (vigil_leader_get(hb, &ld) != 0) {
        fputs("null", out);
        return;
    }
    fprintf(out, "{\"slot\": %u, \"pid\": %u, \"term\": ", ld.slot, ld.pid);
    json_u64(out, ld.term);
    fprintf(out, ", \"holds\": %s}", vigil_leader_is(hb, ld.slot, grace) ? "true" : "false");
}

static int show_hb_json(const vigil_hb *hb, uint64_t grace, FILE *out, struct tool_summary *sum)
{
    uint64_t epoch = vigil_hb_epoch(hb);
    uint32_t cap = vigil_hb_capacity(hb);
    uint32_t counts[3];
    struct row *rows = read_rows(hb, epoch, grace, counts);
    if (!rows)
        return -ENOMEM;
    fprintf(out, "{\"kind\": \"heartbeat\", \"capacity\": %u, \"epoch\": ", cap);
    json_u64(out, epoch);
    fputs(", \"term\": ", out);
    json_u64(out, atomic_load_explicit(&hb->hdr->term, memory_order_acquire));
    fputs(", \"leader\": ", out);
    leader_json(hb, grace, out);
    fprintf(out, ", \"grace\": ");
    json_u64(out, grace);
    fprintf(out, ", \"live\": %u, \"stale\": %u, \"vacant\": %u", counts[ST_LIVE], counts[ST_STALE],
            counts[ST_VACANT]);
    fputs(", \"slots\": [", out);
    bool first = true;
    for (uint32_t i = 0; i < cap; i++) {
        const struct row *r = &rows[i];
        if (r->state == ST_VACANT)
            continue;
        fprintf(out, "%s\n  {\"slot\": %u, \"pid\": %u, \"role\": \"%s\", \"last_seen_epoch\": ",
                first ? "" : ",", i, r->info.pid, role_name(r->info.role));
        json_u64(out, r->info.last_seen_epoch);
        fputs(", \"in_flight\": ", out);
        json_hex(out, r->info.in_flight);
        fprintf(out, ", \"state\": \"%s\"}", state_name(r->state));
        first = false;
    }
    fputs(first ? "]}\n" : "\n]}\n", out);
    summarize(rows, cap, sum);
    free(rows);
    return 0;
}

static int show_heartbeat(const char *path, uint64_t grace, bool json, FILE *out, struct tool_summary *sum)
{
    vigil_hb *hb;
    int rc = vigil_hb_open_readonly(path, 0, &hb);
    if (rc < 0)
        return tool_fail_file(path, rc, VIGIL_KIND_HEARTBEAT, false);
    if (json)
        rc = show_hb_json(hb, grace, out, sum);
    else
        show_hb_human(path, hb, grace, out, sum);
    vigil_hb_close(hb);
    return rc < 0 ? tool_fail(path, rc) : 0;
}

int tool_show(const char *path, uint64_t grace, bool json, FILE *out, struct tool_summary *sum)
{
    vigil_file_info fi;
    int rc = vigil_file_probe(path, &fi);
    if (rc < 0)
        return tool_fail_file(path, rc, 0, false);
    if (fi.version != VIGIL_LAYOUT_VERSION || !tool_kind_name(fi.kind))
        return tool_fail_file(path, VIGIL_EBADFILE, 0, false);
    if (sum)
        sum->kind = fi.kind;
    switch (fi.kind) {
    case VIGIL_KIND_HEARTBEAT: return show_heartbeat(path, grace, json, out, sum);
    case VIGIL_KIND_BARRIER:   return tool_show_barrier(path, json, out);
    case VIGIL_KIND_JOURNAL:   return tool_show_journal(path, json, out);
    default:                   return tool_show_leases(path, json, out);
    }
}

/* tool_show, under the guard against a file shrunk during the look. */
struct show {
    const char         *path;
    uint64_t            grace;
    bool                json;
    struct tool_summary sum;
};

static int show_guarded(void *arg)
{
    struct show *s = arg;
    return tool_show(s->path, s->grace, s->json, stdout, &s->sum);
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE;
    bool json = false, check = false;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
        { "check", OPT_FLAG, 0, 0, NULL, &check, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 3, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    struct show show = { pos[0], grace, json, { .kind = 0 } };
    rc = tool_guarded(show_guarded, &show);
    if (rc == TOOL_SHRUNK) {
        fflush(stdout); /* what was shown before the file shrank */
        return tool_fail_msg(pos[0], "%s", tool_look_strerror(rc));
    }
    if (rc != 0)
        return rc;
    struct tool_summary sum = show.sum;
    if ((rc = tool_flush()) != 0)
        return rc;
    /* As `systemctl is-active`: 0 all live, 3 not (a stale or wedged slot,
     * or none occupied). Only a heartbeat table has slots to judge. */
    if (check && sum.kind != VIGIL_KIND_HEARTBEAT)
        return tool_fail_msg(pos[0], "--check judges heartbeat tables only");
    if (check && (sum.live == 0 || sum.live != sum.occupied || sum.busy != 0))
        return EXIT_NOT_LIVE;
    return EXIT_OK;
}

const struct tool_cmd tool_cmd_inspect = {
    .name = "inspect",
    .synopsis = "FILE [--grace G] [--json] [--check]",
    .summary = "any vigil file: header and slots, live/stale/vacant",
    .help = "Prints what FILE is and what it holds. For a heartbeat table: capacity,\n"
            "epoch, leader and term, and every occupied slot (pid, role, last seen\n"
            "epoch, age, in-flight bitmap, live or stale), then the vacant ones.\n"
            "A slot is live when its age (epoch - last_seen_epoch) is at most G.\n"
            "A file that is not a vigil file, or is corrupt, is an error saying why.\n"
            "\n"
            "options:\n"
            "  --grace G   epochs a slot may miss before it is stale (default 5)\n"
            "  --json      one JSON document instead (see vigil(1) for its shape)\n"
            "  --check     exit status says whether everything is live, as\n"
            "              `systemctl is-active` does: 0 when every occupied slot is\n"
            "              live and none is mid-change, 3 otherwise (or none occupied)\n"
            "  -h, --help  show this help\n",
    .run = run,
};
