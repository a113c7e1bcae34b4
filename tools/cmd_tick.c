/* SPDX-License-Identifier: MIT */
/*
 * vigil tick FILE [--interval DURATION] [--count N] [--grace G] [--quiet]
 * [--verbose]: the epoch ticker. Every interval the table's epoch goes up
 * by one; a slot that has not beaten for more than grace ticks is stale.
 * Ticks first, then sleeps, so --count N takes (N - 1) intervals.
 *
 * A ticker runs for months under a service manager, so by default it says
 * only what changed: a line when it starts, one when the table's live or
 * stale counts change, one when another process ticks the same table too
 * (at most hourly), and one when it stops. --quiet says nothing but
 * errors, --verbose every epoch as well.
 */
#include "vigil.h"

#include <inttypes.h>

/* What the log follows: a line whenever it changes. */
struct tick_state {
    uint32_t live, stale;
};

/* Another ticker on the same table is said at most this often: two
 * tickers interleave irregularly, and a line per jump would be the flood
 * this log exists to avoid. */
#define SHARED_SAY_MS UINT64_C(3600000)

/* One pass over the slots, word by word: a ticker's log needs counts, not
 * consistent snapshots, and a table of 2^20 slots is read once per tick. */
static struct tick_state look(const vigil_hb *hb, uint64_t grace)
{
    struct tick_state st = { 0 };
    uint64_t epoch = vigil_hb_epoch(hb);
    for (uint32_t i = 0; i < vigil_hb_capacity(hb); i++) {
        /* Relaxed: looks, each word as a snapshot's own load of it is. */
        uint32_t pid = atomic_load_explicit(&hb->slots[i].pid, memory_order_relaxed);
        if (!pid)
            continue;
        uint64_t seen = atomic_load_explicit(&hb->slots[i].last_seen_epoch, memory_order_relaxed);
        if (vigil_hb_is_live_at(pid, seen, epoch, grace))
            st.live++;
        else
            st.stale++;
    }
    return st;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t interval = 1000, count = 0, grace = TOOL_DEFAULT_GRACE;
    bool have_count = false, quiet = false, verbose = false, trust = false;
    const struct tool_opt opts[] = {
        { "interval", OPT_MS, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "count", OPT_U64, 1, UINT64_MAX, &count, &have_count, NULL },
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "quiet", OPT_FLAG, 0, 0, NULL, &quiet, NULL },
        { "verbose", OPT_FLAG, 0, 0, NULL, &verbose, NULL },
        { "trust-owner", OPT_FLAG, 0, 0, NULL, &trust, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    if (quiet && verbose)
        return tool_usage_error(cmd, "--quiet and --verbose contradict each other");
    vigil_hb *hb;
    if ((rc = tool_open_hb(pos[0], trust, &hb)) != 0)
        return rc;
    tool_catch_stop_signals();

    char every[32];
    tool_format_ms(interval, every, sizeof(every));
    struct tick_state was = { 0 };
    uint64_t done = 0, last = 0, said_shared = 0;
    bool ever_shared = false;
    for (;;) {
        uint64_t epoch = vigil_hb_tick(hb);
        done++;
        if (!quiet) {
            struct tick_state st = look(hb, grace);
            if (done == 1)
                printf("epoch %" PRIu64 ": ticking every %s (grace %" PRIu64 "): %u live, %u stale\n", epoch, every,
                       grace, st.live, st.stale);
            /* The epoch moved by more than this ticker's one: someone else
             * ticks too, and the table ages faster than --interval says. */
            uint64_t now = tool_now_ms();
            if (done > 1 && epoch - last != 1 && (!ever_shared || now - said_shared >= SHARED_SAY_MS)) {
                printf("epoch %" PRIu64 ": the epoch moved by %" PRIu64 " since this ticker's last tick: another "
                       "process ticks this table too, so slots go stale sooner than --interval says\n",
                       epoch, epoch - last);
                ever_shared = true, said_shared = now;
            }
            if (done > 1 && (st.live != was.live || st.stale != was.stale))
                printf("epoch %" PRIu64 ": %u live, %u stale (was %u live, %u stale)\n", epoch, st.live, st.stale,
                       was.live, was.stale);
            else if (verbose && done > 1)
                printf("epoch %" PRIu64 "\n", epoch);
            was = st;
        }
        last = epoch;
        if ((rc = tool_flush()) != 0)
            break;
        if (have_count && done == count)
            break;
        if (tool_sleep_ms(interval))
            break;
    }
    if (rc == 0 && !quiet) {
        printf("epoch %" PRIu64 ": stopped after %" PRIu64 " tick%s\n", last, done, done == 1 ? "" : "s");
        rc = tool_flush();
    }
    vigil_hb_close(hb);
    return rc;
}

const struct tool_cmd tool_cmd_tick = {
    .name = "tick",
    .synopsis = "FILE [--interval DURATION] [--count N] [--grace G] [--quiet] [--verbose] [--trust-owner]",
    .summary = "epoch ticker",
    .help = "Advances the epoch of the heartbeat table FILE by one every DURATION,\n"
            "until N ticks are done or SIGINT or SIGTERM arrives (then exits 0).\n"
            "It logs changes only: a line when it starts, one whenever the table's\n"
            "live or stale counts change (judged with grace G), one when another\n"
            "process ticks the same table too (at most hourly), and one when it\n"
            "stops.\n"
            "\n"
            "options:\n"
            "  --interval DURATION  time between ticks, 1ms..24h (default 1s): 200ms,\n"
            "                       1.5s, 1m; a number alone is milliseconds\n"
            "  --count N            stop after N ticks, N >= 1 (default: never)\n"
            "  --grace G            epochs a slot may miss before the log counts it\n"
            "                       stale (default 5)\n"
            "  --quiet              print nothing but errors\n"
            "  --verbose            also print every epoch, one line each\n"
            "  --trust-owner        open FILE even if another user could have made or\n"
            "                       rewritten it (writable by everyone, or another\n"
            "                       user's outside a group of yours): refused otherwise\n"
            "  -h, --help           show this help\n",
    .run = run,
};
