/* SPDX-License-Identifier: MIT */
/*
 * vigil failover FILE [--grace G] [--interval DURATION] [--once] [--json]
 * [--exec CMD]: the watchdog. It waits on the owners' pidfds
 * (vigil_failover_wait) or, with --epochs-only, scans every interval
 * (vigil_failover_scan); either vacates each dead or stale slot and hands
 * over its in-flight bits, exactly once among any number of watchdogs on
 * the same table. It prints each reclaim as it happens, and with --exec
 * hands the units on to CMD (reclaim_exec.c); it does not tick.
 */
#define _GNU_SOURCE
#include "child.h"
#include "vigil.h"

#include <errno.h>
#include <inttypes.h>

/* How long a wait for deaths runs before the stop signals are looked at. */
#define STOP_LOOK_MS 100u
#include <stdlib.h>
#include <time.h>

/* The wall-clock time of a reclaim, RFC 3339 in UTC with milliseconds:
 * for the log a reader keeps, never for deciding anything. */
static void json_time(FILE *out)
{
    struct timespec ts;
    struct tm tm;
    char buf[40] = "";
    clock_gettime(CLOCK_REALTIME, &ts);
    if (gmtime_r(&ts.tv_sec, &tm))
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(out, "\"%s.%03ldZ\"", buf, ts.tv_nsec / 1000000);
}

static const char *reason_name(uint32_t why)
{
    return why == VIGIL_RECLAIM_EXITED ? "exited" : "stale";
}

/* Reclaims what can be reclaimed now, or within wait_ns: with pidfds
 * (vigil_failover_wait) unless `epochs_only`, by the epoch scan alone
 * otherwise; until nothing is left (a call returns at most 64). Returns 0
 * or EXIT_RUNTIME; *total counts the entries. */
static int reclaim(const char *path, vigil_hb *hb, uint64_t grace, bool json, bool epochs_only, uint64_t wait_ns,
                   struct tool_hooks *hooks, unsigned *total)
{
    vigil_reclaim r[64];
    uint32_t why[64];
    for (;;) {
        int n;
        if (epochs_only) {
            n = vigil_failover_scan(hb, grace, r, 64);
            for (int i = 0; i < n; i++)
                why[i] = VIGIL_RECLAIM_STALE;
        } else {
            n = vigil_failover_wait_why(hb, grace, wait_ns, r, why, 64);
        }
        if (n < 0)
            return tool_fail(path, n);
        uint64_t epoch = vigil_hb_epoch(hb);
        /* Without --exec but with --journal: written down for the --exec
         * watchdogs, whose CMD hands the units on; the line says so, so
         * that no consumer of this one hands them on a second time. Stray
         * bits (pid 0) are never journaled: this reader's alone. */
        for (int i = 0; i < n; i++) {
            bool journaled = hb->journal && !hooks && r[i].pid != 0;
            if (json) {
                printf("{\"slot\": %u, \"pid\": %u, \"in_flight\": ", r[i].slot, r[i].pid);
                json_hex(stdout, r[i].in_flight);
                fputs(", \"reason\": ", stdout);
                printf("\"%s\"", reason_name(why[i]));
                fputs(", \"epoch\": ", stdout);
                json_u64(stdout, epoch);
                fputs(", \"time\": ", stdout);
                json_time(stdout);
                fputs(journaled ? ", \"journaled\": true}\n" : "}\n", stdout);
            } else {
                printf("epoch %" PRIu64 ": reclaimed slot %u (pid %u, %s), in flight 0x%" PRIx64 "%s\n",
                       epoch, r[i].slot, r[i].pid, why[i] == VIGIL_RECLAIM_EXITED ? "exited" : "stale past grace",
                       r[i].in_flight, journaled ? ", journaled: an --exec watchdog hands it on" : "");
            }
        }
        *total += (unsigned)n;
        int rc = tool_flush();
        if (rc != 0)
            return rc;
        /* With --exec the reclaims are in the journal already, written
         * before their slots were vacated; the CMDs run from there. */
        tool_hooks_poll(hooks);
        if (n < 64)
            return 0;
        wait_ns = 0; /* more may be waiting: take them at once */
    }
}

/* --once: one look, reporting nothing found. */
static int scan(const char *path, vigil_hb *hb, uint64_t grace, bool json, bool once, bool epochs_only,
                struct tool_hooks *hooks)
{
    unsigned total = 0;
    int rc = reclaim(path, hb, grace, json, epochs_only, 0, hooks, &total);
    if (rc != 0)
        return rc;
    /* A full journal left slots as they were: not "nothing", and --once
     * fails. */
    if (tool_journal_starved(path, hb)) {
        tool_flush();
        return EXIT_RUNTIME;
    }
    if (once && !json && total == 0)
        printf("epoch %" PRIu64 ": nothing to reclaim (grace %" PRIu64 ")\n", vigil_hb_epoch(hb),
               grace);
    return tool_flush();
}

/* For --sd-notify: whether the table is healthy, that is at least
 * min_live slots live and none wedged (its version odd at one value) for
 * more than grace epochs, which this watchdog judges by what it saw at
 * earlier intervals. */
struct health {
    uint32_t *odd_v;     /* the odd version last seen per slot, 0 none */
    uint64_t *odd_since; /* the epoch at which it was first seen */
};

static void look_health(const vigil_hb *hb, struct health *h, uint64_t grace, uint32_t *live, uint32_t *wedged)
{
    uint64_t epoch = vigil_hb_epoch(hb);
    *live = vigil_hb_live_count(hb, grace);
    *wedged = 0;
    for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++) {
        /* Relaxed: a look, as a snapshot's first load would be. */
        uint32_t v = atomic_load_explicit(&hb->slots[i].seq, memory_order_relaxed);
        if (!(v & 1u)) {
            h->odd_v[i] = 0;
        } else if (h->odd_v[i] != v) {
            h->odd_v[i] = v;
            h->odd_since[i] = epoch;
        } else if (epoch - h->odd_since[i] > grace) {
            (*wedged)++;
        }
    }
}

/* The start grace: --min-live is not judged until it has been met once
 * or start_grace has passed since the watchdog started, so that a
 * WatchdogSec= shorter than the workers' start does not restart the
 * service before they are up. A wedged slot is judged at once. */
struct start {
    uint64_t since_ms, grace_ms;
    bool     met;
    bool     withheld; /* WATCHDOG=1 withheld at the last interval: said once */
};

/* The health of the table as a status line (STATUS=, and the log line
 * when WATCHDOG=1 is withheld or resumes). */
static void health_text(char *buf, size_t len, bool ok, bool starting, uint64_t left_ms, uint32_t live,
                        uint32_t wedged, uint64_t min_live, uint64_t epoch)
{
    char left[32] = "";
    if (starting)
        tool_format_ms_about(left_ms, left, sizeof(left));
    if (ok)
        snprintf(buf, len, "%s%u live%s%s%s, %u wedged, epoch %llu", starting ? "starting: " : "", live,
                 starting ? " (start grace: " : "", left, starting ? " left)" : "", wedged,
                 (unsigned long long)epoch);
    else if (wedged)
        snprintf(buf, len, "ping withheld: %u wedged past the grace, %u live, epoch %llu", wedged, live,
                 (unsigned long long)epoch);
    else
        snprintf(buf, len, "ping withheld: %u live, fewer than --min-live %llu, epoch %llu", live,
                 (unsigned long long)min_live, (unsigned long long)epoch);
}

static void notify_health(const char *path, const vigil_hb *hb, struct health *h, struct start *st, uint64_t grace,
                          uint64_t min_live, uint64_t n)
{
    uint32_t live, wedged;
    look_health(hb, h, grace, &live, &wedged);
    st->met |= live >= min_live;
    uint64_t up = tool_now_ms() - st->since_ms;
    bool starting = !st->met && up < st->grace_ms;
    bool ok = wedged == 0 && (live >= min_live || starting);
    char text[160], msg[256];
    health_text(text, sizeof(text), ok, starting, st->grace_ms - up, live, wedged, min_live, vigil_hb_epoch(hb));
    /* A change between withheld and sent is logged, once each way: systemd
     * restarts the service WatchdogSec= after the ping stops, and the
     * journal says why before it does. */
    if (ok == st->withheld) {
        fflush(stdout);
        if (ok)
            fprintf(stderr, "vigil: %s: --sd-notify: ping resumed: %s\n", tool_e(path), text);
        else
            fprintf(stderr, "vigil: %s: --sd-notify: %s (no WATCHDOG=1 until that changes: systemd "
                            "restarts the service once WatchdogSec= passes without one)\n",
                    tool_e(path), text);
        st->withheld = !ok;
    }
    /* WATCHDOG=1 only while the table is healthy: systemd's WatchdogSec=
     * then restarts the service when it is not. */
    snprintf(msg, sizeof(msg), "%sSTATUS=scan %llu: %s", ok ? "WATCHDOG=1\n" : "", (unsigned long long)n, text);
    tool_sd_notify(msg);
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE, interval = 1000, min_live = 1, start_grace = 60000, exec_timeout = 60000;
    bool once = false, json = false, notify = false, epochs_only = false, trust = false;
    const char *exec = NULL, *journal = NULL;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "interval", OPT_MS, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "once", OPT_FLAG, 0, 0, NULL, &once, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
        { "sd-notify", OPT_FLAG, 0, 0, NULL, &notify, NULL },
        { "min-live", OPT_U64, 0, TOOL_MAX_CAPACITY, &min_live, NULL, NULL },
        { "start-grace", OPT_MS, 0, TOOL_MAX_INTERVAL_MS, &start_grace, NULL, NULL },
        { "epochs-only", OPT_FLAG, 0, 0, NULL, &epochs_only, NULL },
        { "exec", OPT_STR, 0, 0, NULL, NULL, &exec },
        { "exec-timeout", OPT_MS, 1, TOOL_MAX_INTERVAL_MS, &exec_timeout, NULL, NULL },
        { "journal", OPT_STR, 0, 0, NULL, NULL, &journal },
        { "trust-owner", OPT_FLAG, 0, 0, NULL, &trust, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    /* CMD inherits the fds the tool was given, and no other it opens. */
    tool_child_note_fds();
    vigil_hb *hb;
    if ((rc = tool_open_hb(pos[0], trust, &hb)) != 0)
        return rc;
    tool_catch_stop_signals();
    struct health h = { 0 };
    struct tool_hooks *hooks = NULL;
    struct vigil_journal *plain_journal = NULL;
    if (exec && (rc = tool_hooks_new(exec, pos[0], journal, exec_timeout, hb, trust, &hooks)) != 0) {
        vigil_hb_close(hb);
        return rc < 0 ? tool_fail(pos[0], rc) : rc;
    }
    if (!exec && (rc = tool_journal_attach(pos[0], journal, hb, trust, &plain_journal)) != 0) {
        vigil_hb_close(hb);
        return rc;
    }
    if (notify) {
        h.odd_v = calloc(vigil_hb_capacity(hb), sizeof(*h.odd_v));
        h.odd_since = calloc(vigil_hb_capacity(hb), sizeof(*h.odd_since));
        if (!h.odd_v || !h.odd_since) {
            rc = tool_fail(pos[0], -ENOMEM);
            goto out;
        }
    }
    if (once) {
        rc = scan(pos[0], hb, grace, json, once, epochs_only, hooks);
        goto out;
    }
    struct start st = { tool_now_ms(), start_grace, false, false };
    if (notify) {
        /* Ready at once: the table is open and the journal's CMDs are in
         * hand; the first health report follows an interval later. */
        char ready[200];
        snprintf(ready, sizeof(ready), "READY=1\nSTATUS=watching %s (grace %llu, --min-live %llu)", tool_e(pos[0]),
                 (unsigned long long)grace, (unsigned long long)min_live);
        tool_sd_notify(ready);
    }
    for (uint64_t n = 0;; n++) {
        /* One interval: reclaims as they come (a death wakes the wait at
         * once), looking at the stop signals and the CMDs of --exec every
         * STOP_LOOK_MS. */
        uint64_t end = tool_now_ms() + interval;
        bool stop = false;
        for (;;) {
            uint64_t now = tool_now_ms();
            uint64_t left = end > now ? end - now : 0;
            uint64_t slice = left < STOP_LOOK_MS ? left : STOP_LOOK_MS;
            unsigned total = 0;
            if ((rc = reclaim(pos[0], hb, grace, json, epochs_only, slice * 1000000u, hooks, &total)) != 0)
                goto out;
            tool_journal_starved(pos[0], hb);
            if (epochs_only ? tool_sleep_ms(slice) : tool_sleep_ms(0)) {
                stop = true;
                break;
            }
            tool_hooks_poll(hooks);
            if (tool_now_ms() >= end)
                break;
        }
        if (notify)
            notify_health(pos[0], hb, &h, &st, grace, min_live, n);
        if (stop)
            break;
    }
out:
    /* Stopped or done: the reclaims already made still get their CMDs
     * (each bounded by --exec-timeout; a second stop signal cuts it short). */
    tool_hooks_drain(hooks);
    if (rc == 0 && once && tool_hooks_failed(hooks) > 0)
        rc = EXIT_RUNTIME;
    tool_hooks_free(hooks);
    tool_journal_detach(hb, plain_journal);
    free(h.odd_v);
    free(h.odd_since);
    vigil_hb_close(hb);
    return rc;
}

const struct tool_cmd tool_cmd_failover = {
    .name = "failover",
    .synopsis = "FILE [--grace G] [--interval DURATION] [--once] [--json] [--epochs-only] [--exec CMD] "
                "[--exec-timeout DURATION] [--journal PATH] [--sd-notify] [--min-live N] [--start-grace DURATION] "
                "[--trust-owner]",
    .summary = "watchdog",
    .help = "The watchdog of the heartbeat table FILE. It holds a pidfd for the owner\n"
            "of every occupied slot and reclaims a slot the moment its owner dies\n"
            "(kill -9 included), before any tick; a slot whose owner is alive but\n"
            "stopped beating is reclaimed once its last beat is more than G epochs\n"
            "old. Reclaiming vacates the slot and hands its in-flight bits over,\n"
            "exactly once even with several watchdogs on one table. Prints one line\n"
            "per reclaimed slot, saying why; runs until SIGINT or SIGTERM (then exits\n"
            "0). It does not tick the epoch: run `vigil tick` (or the application's\n"
            "ticker) beside it. Owners it cannot watch (another pid namespace, no\n"
            "pidfds on the kernel) wait out their epochs.\n"
            "\n"
            "options:\n"
            "  --grace G       epochs a slot may miss before it is reclaimed (default 5)\n"
            "  --interval DURATION  time between health reports (--sd-notify) and,\n"
            "                  with --epochs-only, between scans, 1ms..24h (default\n"
            "                  1s); a number alone is milliseconds\n"
            "  --once          look once and exit; says so when there was nothing\n"
            "  --json          one JSON object per reclaim and line: {\"slot\": i,\n"
            "                  \"pid\": p, \"in_flight\": \"0x..\", \"reason\": \"exited\"\n"
            "                  or \"stale\", \"epoch\": e, \"time\": \"2026-12-02T10:00:00.000Z\"}\n"
            "  --epochs-only   no pidfds: scan every interval and reclaim by epochs alone\n"
            "  --exec CMD      run CMD (with /bin/sh -c) once per reclaim, with\n"
            "                  VIGIL_RECLAIM_SLOT, VIGIL_RECLAIM_PID, VIGIL_RECLAIM_UNITS\n"
            "                  (the in-flight bits as a comma list, e.g. 1,40),\n"
            "                  VIGIL_RECLAIM_REASON (exited or stale), VIGIL_RECLAIM_FILE,\n"
            "                  VIGIL_RECLAIM_IN_FLIGHT, VIGIL_RECLAIM_EPOCH and\n"
            "                  VIGIL_RECLAIM_TICKET in its environment. Every reclaim\n"
            "                  is written in the table's journal before its slot is\n"
            "                  vacated and its CMD run from there: a watchdog killed by\n"
            "                  any signal leaves its reclaims to the next. One CMD at a\n"
            "                  time across the table's watchdogs, in reclaim order, in a\n"
            "                  process group of its own that dies with the watchdog;\n"
            "                  never holding up the reclaims; its stdout goes to stderr;\n"
            "                  what became of one that did not simply finish is logged\n"
            "                  on stderr with its units\n"
            "  --exec-timeout DURATION  a CMD running longer gets SIGTERM to its process\n"
            "                  group, SIGKILL to the group 5s later, 1ms..24h (default\n"
            "                  60s); the next CMD starts once the group is gone\n"
            "  --journal PATH  the reclaim journal (default FILE.journal): with --exec\n"
            "                  made when missing; without --exec, a journal to write\n"
            "                  the reclaims in for the --exec watchdogs (each line then\n"
            "                  says \"journaled\"), which otherwise journal nothing\n"
            "  --sd-notify     tell systemd: READY=1 at once, then each interval\n"
            "                  WATCHDOG=1 while at least N slots are live and none is\n"
            "                  wedged past the grace window (so WatchdogSec= restarts\n"
            "                  the service when its workers stall), and STATUS=; a\n"
            "                  line on stderr when that ping is first withheld (why)\n"
            "                  and when it resumes\n"
            "  --min-live N    live slots --sd-notify needs for WATCHDOG=1 (default 1)\n"
            "  --start-grace DURATION  --min-live is not judged until it is first met\n"
            "                  or this long after the start, 0..24h (default 60s)\n"
            "  --trust-owner   open FILE even if another user could have made or\n"
            "                  rewritten it (writable by everyone, or another user's\n"
            "                  outside a group of yours): refused otherwise\n"
            "  -h, --help      show this help\n"
            "\n"
            "On SIGINT or SIGTERM the CMDs of reclaims already made still run (each\n"
            "bounded by --exec-timeout); a second signal kills the running one and\n"
            "leaves the rest in the journal for the next watchdog. With --once the\n"
            "exit status is 1 when a CMD failed.\n",
    .run = run,
};
