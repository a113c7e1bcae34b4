/* SPDX-License-Identifier: MIT */
/*
 * vigil export FILE... [--grace G] [--textfile DIR]: the files' state in
 * Prometheus' text exposition format (version 0.0.4), for a scrape or for
 * node_exporter's textfile collector. Names carry the vigil_ prefix,
 * counters end in _total, times are in seconds, and no label carries a
 * pid (pids churn; a series per process would never end). Every file is
 * opened read-only and only looked at.
 *
 * A file that cannot be read (missing, unreadable, not a vigil file) hides
 * none of the others: vigil_file_up{file=...} is 1 for each file read and
 * 0 for each that was not, whose reason goes to stderr; the others' series
 * are printed as ever, and the exit status is 1 (0 when every file was
 * read), with --textfile too, whose file is written all the same.
 */
#define _GNU_SOURCE
#include "etcd_opts.h"
#include "export_group.h"
#include "vigil.h"

#include "journal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What one file says, read once; the families are printed afterwards,
 * each with every file's sample under one HELP and TYPE. */
struct file_state {
    const char *path;
    bool        up;       /* read; otherwise kind is 0 and only vigil_file_up is printed */
    uint32_t    kind, capacity;
    /* heartbeat */
    uint64_t epoch, term;
    int64_t  leader_slot; /* -1 none */
    uint32_t live, stale, vacant, busy;
    vigil_hb_counters hc;
    /* barrier */
    vigil_barrier_state bs;
    /* leases */
    uint32_t held, expired, released, changing, lvacant;
    vigil_leases_counters lc;
    /* journal */
    uint32_t jcounts[5];
};

static int read_heartbeat(struct file_state *f, uint64_t grace)
{
    vigil_hb *hb;
    int rc = vigil_hb_open_readonly(f->path, 0, &hb);
    if (rc < 0)
        return tool_fail_file(f->path, rc, VIGIL_KIND_HEARTBEAT, false);
    f->capacity = vigil_hb_capacity(hb);
    f->epoch = vigil_hb_epoch(hb);
    for (uint32_t i = 0; i < f->capacity; i++) {
        vigil_slot_info si;
        bool busy;
        int s = tool_slot_look(hb, i, &si, &busy);
        if (s == VIGIL_EVACANT)
            f->vacant++;
        else if (s < 0)
            f->busy++;
        else if (vigil_hb_is_live_at(si.pid, si.last_seen_epoch, f->epoch, grace))
            f->live++;
        else
            f->stale++;
    }
    vigil_leader ld;
    f->leader_slot = vigil_leader_get(hb, &ld) == 0 ? (int64_t)ld.slot : -1;
    rc = vigil_hb_stats(hb, &f->hc);
    f->term = f->hc.leader_changes;
    vigil_hb_close(hb);
    if (rc < 0)
        return tool_fail(f->path, rc);
    return 0;
}

static int read_leases(struct file_state *f)
{
    vigil_leases *ls;
    int rc = vigil_leases_open_readonly(f->path, &ls);
    if (rc < 0)
        return tool_fail_file(f->path, rc, VIGIL_KIND_LEASES, false);
    f->capacity = vigil_leases_capacity(ls);
    for (uint32_t i = 0; i < f->capacity; i++) {
        vigil_lease_info info;
        int s = vigil_leases_entry(ls, i, &info);
        if (s == VIGIL_EVACANT)
            f->lvacant++;
        else if (s == VIGIL_EBUSY)
            f->changing++;
        else if (s == 0)
            f->held += info.state == VIGIL_LEASE_HELD, f->expired += info.state == VIGIL_LEASE_EXPIRED,
                f->released += info.state == VIGIL_LEASE_RELEASED;
    }
    rc = vigil_leases_stats(ls, &f->lc);
    vigil_leases_close(ls);
    return rc < 0 ? tool_fail(f->path, rc) : 0;
}

static int read_file(struct file_state *f, uint64_t grace);

/* read_file, under the guard against a file shrunk during the look. */
struct read_look {
    struct file_state *f;
    uint64_t           grace;
};

static int read_guarded(void *arg)
{
    struct read_look *l = arg;
    return read_file(l->f, l->grace);
}

static int read_file(struct file_state *f, uint64_t grace)
{
    vigil_file_info fi;
    int rc = vigil_file_probe(f->path, &fi);
    if (rc < 0)
        return tool_fail_file(f->path, rc, 0, false);
    if (fi.version != VIGIL_LAYOUT_VERSION || !tool_kind_name(fi.kind))
        return tool_fail_file(f->path, VIGIL_EBADFILE, 0, false);
    f->kind = fi.kind;
    if (fi.kind == VIGIL_KIND_HEARTBEAT)
        return read_heartbeat(f, grace);
    if (fi.kind == VIGIL_KIND_LEASES)
        return read_leases(f);
    if (fi.kind == VIGIL_KIND_JOURNAL) {
        vigil_journal *j;
        if ((rc = vigil_journal_open_readonly(f->path, &j)) < 0)
            return tool_fail_file(f->path, rc, VIGIL_KIND_JOURNAL, false);
        f->capacity = j->capacity;
        vigil_journal_counts(j, f->jcounts);
        vigil_journal_close(j);
        return 0;
    }
    rc = vigil_barrier_peek(f->path, &f->bs);
    if (rc < 0)
        return tool_fail_file(f->path, rc, VIGIL_KIND_BARRIER, false);
    f->capacity = f->bs.capacity;
    return 0;
}

struct family {
    const char *name, *type, *help;
    uint32_t    kind;
    const char *extra; /* a label name for per-state samples, or NULL */
};

static void sample(FILE *out, const char *name, const char *path, const char *lname, const char *lvalue,
                   double v)
{
    fprintf(out, "%s{file=\"", name);
    tool_label_value(out, path);
    fputc('"', out);
    if (lname)
        fprintf(out, ",%s=\"%s\"", lname, lvalue);
    fprintf(out, "} %.17g\n", v);
}

static void head(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prints one family for every file of its kind; `get` gives the value. */
#define FAMILY(out, files, n, kind_, name, type, help, expr)                     \
    do {                                                                         \
        bool any_ = false;                                                       \
        for (size_t i_ = 0; i_ < (n); i_++)                                      \
            any_ |= (files)[i_].kind == (kind_);                                 \
        if (!any_)                                                               \
            break;                                                               \
        head(out, name, type, help);                                             \
        for (size_t i_ = 0; i_ < (n); i_++) {                                    \
            const struct file_state *f = &(files)[i_];                           \
            if (f->kind == (kind_))                                              \
                sample(out, name, f->path, NULL, NULL, (double)(expr));          \
        }                                                                        \
    } while (0)

static void print_all(FILE *out, const struct file_state *files, size_t n)
{
    const uint32_t H = VIGIL_KIND_HEARTBEAT, B = VIGIL_KIND_BARRIER, L = VIGIL_KIND_LEASES;
    head(out, "vigil_file_up", "gauge", "1 when the file was read, 0 when it could not be (missing, unreadable, "
                                        "not a vigil file).");
    for (size_t i = 0; i < n; i++)
        sample(out, "vigil_file_up", files[i].path, NULL, NULL, files[i].up);
    FAMILY(out, files, n, H, "vigil_heartbeat_capacity", "gauge", "Slots in the heartbeat table.", f->capacity);
    {
        bool any = false;
        for (size_t i = 0; i < n; i++)
            any |= files[i].kind == H;
        if (any) {
            head(out, "vigil_heartbeat_slots", "gauge",
                 "Slots by state: live, stale (heartbeat past grace), vacant, busy (mid-change or wedged).");
            for (size_t i = 0; i < n; i++) {
                const struct file_state *f = &files[i];
                if (f->kind != H)
                    continue;
                sample(out, "vigil_heartbeat_slots", f->path, "state", "live", f->live);
                sample(out, "vigil_heartbeat_slots", f->path, "state", "stale", f->stale);
                sample(out, "vigil_heartbeat_slots", f->path, "state", "vacant", f->vacant);
                sample(out, "vigil_heartbeat_slots", f->path, "state", "busy", f->busy);
            }
        }
    }
    FAMILY(out, files, n, H, "vigil_heartbeat_epoch", "gauge", "The table's epoch, ticked by its watchdog.",
           f->epoch);
    FAMILY(out, files, n, H, "vigil_leader_term", "gauge", "The leader's term: completed changes of leader.",
           f->term);
    FAMILY(out, files, n, H, "vigil_leader_slot", "gauge", "The leader's slot, -1 before the first election.",
           f->leader_slot);
    /* The counters: per slot 32-bit and summed, or the header's 64-bit
     * words; a wrap shows as a drop, which Prometheus takes for a reset. */
    FAMILY(out, files, n, H, "vigil_leader_changes_total", "counter", "Changes of leader (the term).",
           f->hc.leader_changes);
    FAMILY(out, files, n, H, "vigil_heartbeat_registers_total", "counter", "Vacant slots claimed by register.",
           f->hc.registers);
    FAMILY(out, files, n, H, "vigil_heartbeat_unregisters_total", "counter", "Owners gone by unregister.",
           f->hc.unregisters);
    FAMILY(out, files, n, H, "vigil_heartbeat_reclaims_total", "counter",
           "Owners vacated by failover, stale or dead.", f->hc.reclaims);
    FAMILY(out, files, n, H, "vigil_heartbeat_repairs_total", "counter",
           "Slots repaired after their writer died mid-change.", f->hc.repairs);
    FAMILY(out, files, n, B, "vigil_barrier_epoch", "gauge", "The round now gathering.", f->bs.epoch);
    FAMILY(out, files, n, B, "vigil_barrier_releases_total", "counter", "Rounds released (the epoch).",
           f->bs.epoch);
    FAMILY(out, files, n, B, "vigil_barrier_withdrawals_total", "counter",
           "Arrivals withdrawn by waiters that timed out.", f->bs.withdrawals);
    FAMILY(out, files, n, B, "vigil_barrier_arrived", "gauge", "Arrivals in the gathering round, bound and unbound.",
           f->bs.arrived);
    FAMILY(out, files, n, B, "vigil_barrier_sleepers", "gauge", "Waiters asleep in the kernel.", f->bs.sleepers);

    FAMILY(out, files, n, L, "vigil_leases_capacity", "gauge", "Entries in the lease store.", f->capacity);
    {
        bool any = false;
        for (size_t i = 0; i < n; i++)
            any |= files[i].kind == L;
        if (any) {
            head(out, "vigil_leases_entries", "gauge",
                 "Entries by state: held, expired, released, changing, vacant.");
            for (size_t i = 0; i < n; i++) {
                const struct file_state *f = &files[i];
                if (f->kind != L)
                    continue;
                sample(out, "vigil_leases_entries", f->path, "state", "held", f->held);
                sample(out, "vigil_leases_entries", f->path, "state", "expired", f->expired);
                sample(out, "vigil_leases_entries", f->path, "state", "released", f->released);
                sample(out, "vigil_leases_entries", f->path, "state", "changing", f->changing);
                sample(out, "vigil_leases_entries", f->path, "state", "vacant", f->lvacant);
            }
        }
    }
    FAMILY(out, files, n, L, "vigil_leases_handovers_total", "counter",
           "Acquisitions: fencing tokens handed out.", f->lc.handovers);
    FAMILY(out, files, n, L, "vigil_leases_renewals_refused_total", "counter", "Renewals refused (lease lost).",
           f->lc.renewals_refused);
    FAMILY(out, files, n, L, "vigil_leases_expiries_total", "counter",
           "Acquisitions that took over an expired lease.", f->lc.expiries);
    const uint32_t J = VIGIL_KIND_JOURNAL;
    FAMILY(out, files, n, J, "vigil_journal_capacity", "gauge", "Entries in the reclaim journal.", f->capacity);
    FAMILY(out, files, n, J, "vigil_journal_pending", "gauge",
           "Reclaims written down whose --exec CMD has not started.", f->jcounts[VJ_PENDING]);
    FAMILY(out, files, n, J, "vigil_journal_running", "gauge", "--exec CMDs running (0 or 1).",
           f->jcounts[VJ_RUNNING]);
    FAMILY(out, files, n, J, "vigil_journal_unsaid", "gauge",
           "Finished CMDs whose outcome no watchdog has logged yet.", f->jcounts[VJ_DONE]);
}

/* Writes DIR/vigil.prom whole or not at all: a temporary file beside it,
 * renamed over it, so the collector never reads half a scrape. */
static int write_textfile(const char *dir, const char *text, size_t len)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(dst, sizeof(dst), "%s/vigil.prom", dir) >= (int)sizeof(dst) ||
        snprintf(tmp, sizeof(tmp), "%s/.vigil.prom.XXXXXX", dir) >= (int)sizeof(tmp))
        return tool_fail_msg(dir, "path too long");
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return tool_fail(dir, -errno);
    int err = 0;
    for (size_t off = 0; off < len && !err;) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno != EINTR)
            err = -errno;
        else if (w > 0)
            off += (size_t)w;
    }
    if (!err && (fchmod(fd, 0644) != 0 || fsync(fd) != 0))
        err = -errno;
    if (close(fd) != 0 && !err)
        err = -errno;
    if (!err && rename(tmp, dst) != 0)
        err = -errno;
    if (err) {
        unlink(tmp);
        return tool_fail(dst, err);
    }
    return EXIT_OK;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE;
    const char *dir = NULL, *etcd = NULL, *groups = NULL;
    struct tool_etcd_flags flags = { 0 };
    struct tool_etcd_where where = { NULL, NULL };
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "textfile", OPT_STR, 0, 0, NULL, NULL, &dir },
        TOOL_ETCD_WHERE_OPTS(&where), /* groups on etcd: export_group.c */
        { "group", OPT_STR, 0, 0, NULL, NULL, &groups },
        TOOL_ETCD_OPTS(&flags),
    };
    const char *pos[64];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 0, 64, &npos);
    if (rc != TOOL_GO)
        return rc;
    /* ETCDCTL_ENDPOINTS stands for --etcd with --group. */
    if (!groups && !where.etcd && !where.endpoints)
        etcd = NULL;
    else if ((rc = tool_etcd_where(cmd, &where, &etcd)) != TOOL_GO)
        return rc;
    if (!etcd != !groups)
        return tool_usage_error(cmd, "--etcd ENDPOINTS (or --endpoints, or ETCDCTL_ENDPOINTS) and --group GROUP "
                                     "go together");
    if (npos == 0 && !groups)
        return tool_usage_error(cmd, "missing FILE (or --etcd ENDPOINTS --group GROUP)");
    struct vigil_etcd_options eo;
    if (groups && (rc = tool_etcd_options(cmd, &flags, &eo)) != TOOL_GO)
        return rc;
    struct file_state *files = calloc(npos + 1, sizeof(*files));
    if (!files)
        return tool_fail("export", -ENOMEM);
    /* Each file once: a second sample of the same series is not valid
     * exposition. */
    size_t n = 0;
    bool all_up = true;
    for (size_t i = 0; i < npos; i++) {
        bool dup = false;
        for (size_t k = 0; k < n && !dup; k++)
            dup = strcmp(files[k].path, pos[i]) == 0;
        if (dup)
            continue;
        struct file_state *f = &files[n++];
        f->path = pos[i];
        struct read_look look = { f, grace };
        int rc = tool_guarded(read_guarded, &look);
        if (rc == TOOL_SHRUNK)
            tool_fail_msg(f->path, "%s", tool_look_strerror(rc));
        f->up = rc == 0; /* the reason is on stderr */
        if (!f->up) {
            *f = (struct file_state){ .path = pos[i] };
            all_up = false;
        }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        free(files);
        return tool_fail("export", -errno);
    }
    if (n)
        print_all(mem, files, n);
    if (groups && tool_export_groups(mem, etcd, groups, &eo, &all_up) != EXIT_OK)
        all_up = false;
    tool_etcd_flags_free(&flags);
    fclose(mem);
    free(files);
    if (dir)
        rc = write_textfile(dir, buf, len);
    else
        rc = fwrite(buf, 1, len, stdout) == len ? tool_flush() : tool_fail("stdout", -EIO);
    free(buf);
    return rc != EXIT_OK ? rc : all_up ? EXIT_OK : EXIT_RUNTIME;
}

const struct tool_cmd tool_cmd_export = {
    .name = "export",
    .synopsis = "FILE... [--grace G] [--textfile DIR] [--etcd ENDPOINTS --group GROUP[,GROUP...] " TOOL_ETCD_SYNOPSIS "]",
    .summary = "Prometheus text exposition of the files' state and counters",
    .help = "Prints the state of each FILE (any kind) in Prometheus' text format:\n"
            "slot and entry counts by state, epochs, the leader's term and slot, and\n"
            "each file's counters of structural events (registers, unregisters,\n"
            "reclaims, repairs, leader changes, barrier releases and withdrawals,\n"
            "lease hand-overs, refused renewals, expiries). Every sample is\n"
            "labelled with its file; no label names a pid. Files are opened\n"
            "read-only. vigil_file_up{file=...} is 1 for each FILE read, 0 for one\n"
            "that could not be (missing, unreadable, not a vigil file: the reason\n"
            "on stderr), which hides none of the others. Exit status 0 when every\n"
            "FILE was read, 1 when one was not (the rest exported all the same).\n"
            "\n"
            "options:\n"
            "  --grace G        epochs a slot may miss before it is stale (default 5)\n"
            "  --textfile DIR   write DIR/vigil.prom atomically instead (a temporary\n"
            "                   file renamed over it), for node_exporter's textfile\n"
            "                   collector\n"
            "  --etcd ENDPOINTS etcd, for --group (or --endpoints, as etcdctl; with\n"
            "                   --group, default $ETCDCTL_ENDPOINTS)\n"
            "  --group GROUP[,GROUP...]  also each vigil group on etcd: vigil_group_up,\n"
            "                   _members, _units{state=free|owned|done}, _round,\n"
            "                   _leader_term (FILE is then optional)\n"
            TOOL_ETCD_HELP
            "  -h, --help       show this help\n",
    .run = run,
};
