/* SPDX-License-Identifier: MIT */
/*
 * vigil failover FILE [--grace G] [--interval MS] [--once] [--json]: the
 * watchdog. Every interval it runs vigil_failover_scan, which vacates each
 * slot stale past the grace window and hands over its in-flight bits,
 * exactly once among any number of watchdogs scanning the same table. It
 * prints each reclaim as it happens; it does not tick.
 */
#define _GNU_SOURCE
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
                   unsigned *total)
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
        for (int i = 0; i < n; i++) {
            if (json) {
                printf("{\"slot\": %u, \"pid\": %u, \"in_flight\": ", r[i].slot, r[i].pid);
                json_hex(stdout, r[i].in_flight);
                fputs(", \"reason\": ", stdout);
                printf("\"%s\"", reason_name(why[i]));
                fputs(", \"epoch\": ", stdout);
                json_u64(stdout, epoch);
                fputs(", \"time\": ", stdout);
                json_time(stdout);
                fputs("}\n", stdout);
            } else {
                printf("epoch %" PRIu64 ": reclaimed slot %u (pid %u, %s), in flight 0x%" PRIx64 "\n",
                       epoch, r[i].slot, r[i].pid, why[i] == VIGIL_RECLAIM_EXITED ? "exited" : "stale past grace",
                       r[i].in_flight);
            }
        }
        *total += (unsigned)n;
        int rc = tool_flush();
        if (rc != 0)
            return rc;
        if (n < 64)
            return 0;
        wait_ns = 0; /* more may be waiting: take them at once */
    }
}

/* --once: one look, reporting nothing found. */
static int scan(const char *path, vigil_hb *hb, uint64_t grace, bool json, bool once, bool epochs_only)
{
    unsigned total = 0;
    int rc = reclaim(path, hb, grace, json, epochs_only, 0, &total);
    if (rc != 0)
        return rc;
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

static bool healthy(const vigil_hb *hb, struct health *h, uint64_t grace, uint64_t min_live, uint32_t *live,
                    uint32_t *wedged)
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
    return *live >= min_live && *wedged == 0;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t grace = TOOL_DEFAULT_GRACE, interval = 1000, min_live = 1;
    bool once = false, json = false, notify = false, epochs_only = false;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "interval", OPT_U64, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "once", OPT_FLAG, 0, 0, NULL, &once, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
        { "sd-notify", OPT_FLAG, 0, 0, NULL, &notify, NULL },
        { "min-live", OPT_U64, 0, TOOL_MAX_CAPACITY, &min_live, NULL, NULL },
        { "epochs-only", OPT_FLAG, 0, 0, NULL, &epochs_only, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 7, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    vigil_hb *hb;
    if ((rc = tool_open_hb(pos[0], &hb)) != 0)
        return rc;
    tool_catch_stop_signals();
    struct health h = { 0 };
    if (notify) {
        h.odd_v = calloc(vigil_hb_capacity(hb), sizeof(*h.odd_v));
        h.odd_since = calloc(vigil_hb_capacity(hb), sizeof(*h.odd_since));
        if (!h.odd_v || !h.odd_since) {
            vigil_hb_close(hb);
            return tool_fail(pos[0], -ENOMEM);
        }
    }
    if (once) {
        rc = scan(pos[0], hb, grace, json, once, epochs_only);
        goto out;
    }
    for (uint64_t n = 0;; n++) {
        /* One interval: reclaims as they come (a death wakes the wait at
         * once), looking at the stop signals every STOP_LOOK_MS. */
        uint64_t end = tool_now_ms() + interval;
        bool stop = false;
        for (;;) {
            uint64_t now = tool_now_ms();
            uint64_t left = end > now ? end - now : 0;
            uint64_t slice = left < STOP_LOOK_MS ? left : STOP_LOOK_MS;
            unsigned total = 0;
            if ((rc = reclaim(pos[0], hb, grace, json, epochs_only, slice * 1000000u, &total)) != 0)
                goto out;
            if (epochs_only ? tool_sleep_ms(slice) : tool_sleep_ms(0)) {
                stop = true;
                break;
            }
            if (tool_now_ms() >= end)
                break;
        }
        if (notify) {
            /* WATCHDOG=1 only while the table is healthy: systemd's
             * WatchdogSec= then restarts the service when it is not. */
            uint32_t live, wedged;
            bool ok = healthy(hb, &h, grace, min_live, &live, &wedged);
            char msg[160];
            snprintf(msg, sizeof(msg), "%s%sSTATUS=scan %llu: %u live, %u wedged, epoch %llu", n == 0 ? "READY=1\n" : "",
                     ok ? "WATCHDOG=1\n" : "", (unsigned long long)n, live, wedged,
                     (unsigned long long)vigil_hb_epoch(hb));
            tool_sd_notify(msg);
        }
        if (stop)
            break;
    }
out:
    free(h.odd_v);
    free(h.odd_since);
    vigil_hb_close(hb);
    return rc;
}

const struct tool_cmd tool_cmd_failover = {
    .name = "failover",
    .synopsis = "FILE [--grace G] [--interval MS] [--once] [--json] [--epochs-only] [--sd-notify] [--min-live N]",
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
            "  --interval MS   time between health reports (--sd-notify) and, with\n"
            "                  --epochs-only, between scans, 1..86400000 (default 1000)\n"
            "  --once          look once and exit; says so when there was nothing\n"
            "  --json          one JSON object per reclaim and line: {\"slot\": i,\n"
            "                  \"pid\": p, \"in_flight\": \"0x..\", \"reason\": \"exited\"\n"
            "                  or \"stale\", \"epoch\": e, \"time\": \"2026-12-02T10:00:00.000Z\"}\n"
            "  --epochs-only   no pidfds: scan every interval and reclaim by epochs alone\n"
            "  --sd-notify     tell systemd: READY=1 once running, then each interval\n"
            "                  WATCHDOG=1 while at least N slots are live and none is\n"
            "                  wedged past the grace window (so WatchdogSec= restarts\n"
            "                  the service when its workers stall), and STATUS=\n"
            "  --min-live N    live slots --sd-notify needs for WATCHDOG=1 (default 1)\n"
            "  -h, --help      show this help\n",
    .run = run,
};
