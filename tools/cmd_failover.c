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

/* Scans until nothing is left to take (a scan returns at most max). */
static int scan(const char *path, vigil_hb *hb, uint64_t grace, bool json, bool once)
{
    vigil_reclaim r[64];
    unsigned total = 0;
    for (;;) {
        int n = vigil_failover_scan(hb, grace, r, 64);
        if (n < 0)
            return tool_fail(path, n);
        uint64_t epoch = vigil_hb_epoch(hb);
        for (int i = 0; i < n; i++) {
            if (json) {
                printf("{\"slot\": %u, \"pid\": %u, \"in_flight\": ", r[i].slot, r[i].pid);
                json_hex(stdout, r[i].in_flight);
                fputs(", \"epoch\": ", stdout);
                json_u64(stdout, epoch);
                fputs(", \"time\": ", stdout);
                json_time(stdout);
                fputs("}\n", stdout);
            } else {
                printf("epoch %" PRIu64 ": reclaimed slot %u (pid %u), in flight 0x%" PRIx64 "\n",
                       epoch, r[i].slot, r[i].pid, r[i].in_flight);
            }
        }
        total += (unsigned)n;
        int rc = tool_flush();
        if (rc != 0)
            return rc;
        if (n < 64)
            break;
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
    bool once = false, json = false, notify = false;
    const struct tool_opt opts[] = {
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "interval", OPT_U64, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "once", OPT_FLAG, 0, 0, NULL, &once, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
        { "sd-notify", OPT_FLAG, 0, 0, NULL, &notify, NULL },
        { "min-live", OPT_U64, 0, TOOL_MAX_CAPACITY, &min_live, NULL, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 6, pos, 1, 1, &npos);
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
    for (uint64_t n = 0;; n++) {
        if ((rc = scan(pos[0], hb, grace, json, once)) != 0 || once)
            break;
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
        if (tool_sleep_ms(interval))
            break;
    }
    free(h.odd_v);
    free(h.odd_since);
    vigil_hb_close(hb);
    return rc;
}

const struct tool_cmd tool_cmd_failover = {
    .name = "failover",
    .synopsis = "FILE [--grace G] [--interval MS] [--once] [--json] [--sd-notify] [--min-live N]",
    .summary = "watchdog",
    .help = "Scans the heartbeat table FILE every MS milliseconds: each slot whose last\n"
            "beat is more than G epochs old is vacated and its in-flight bits handed\n"
            "over, exactly once even with several watchdogs on one table. Prints one\n"
            "line per reclaimed slot; runs until SIGINT or SIGTERM (then exits 0).\n"
            "It does not tick the epoch: run `vigil tick` (or the application's\n"
            "ticker) beside it.\n"
            "\n"
            "options:\n"
            "  --grace G       epochs a slot may miss before it is reclaimed (default 5)\n"
            "  --interval MS   time between scans, 1..86400000 (default 1000)\n"
            "  --once          scan once and exit; says so when there was nothing\n"
            "  --json          one JSON object per reclaim and line: {\"slot\": i,\n"
            "                  \"pid\": p, \"in_flight\": \"0x..\", \"epoch\": e,\n"
            "                  \"time\": \"2026-12-02T10:00:00.000Z\"}\n"
            "  --sd-notify     tell systemd: READY=1 once running, then each interval\n"
            "                  WATCHDOG=1 while at least N slots are live and none is\n"
            "                  wedged past the grace window (so WatchdogSec= restarts\n"
            "                  the service when its workers stall), and STATUS=\n"
            "  --min-live N    live slots --sd-notify needs for WATCHDOG=1 (default 1)\n"
            "  -h, --help      show this help\n",
    .run = run,
};
