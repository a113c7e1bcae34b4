/* SPDX-License-Identifier: MIT */
/*
 * vigil watch FILE [--interval DURATION] [--grace G] [--json]: inspect's
 * view, refreshed. On a terminal each line is cut to the terminal's width
 * instead of wrapping; unless TERM is "dumb" the screen is also redrawn in
 * place, and stale and wedged slots are coloured unless NO_COLOR is set
 * (TERM=dumb: each view appended, no escape codes); into a pipe
 * or a file each view is appended, followed by a blank line, and flushed
 * at once, with no escape codes. --json prints one JSON document per line
 * and interval. Each view ends with the file's counters of structural
 * events and their rates per second since the view before. A file replaced under the watch is said so; one truncated
 * under it ends the watch with a message, never a silent exit.
 */
#define _GNU_SOURCE
#include "vigil.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct screen {
    bool     tty;    /* redraw in place */
    bool     colour;
    unsigned width;  /* 0: do not cut */
};

/* A terminal gets lines cut to its width whatever TERM says: a dumb
 * terminal wraps as badly as any. Only the escape codes (redrawing in
 * place, colour) need a TERM that is not "dumb". */
static struct screen screen_of(void)
{
    struct screen sc = { 0 };
    const char *term = getenv("TERM");
    bool terminal = isatty(STDOUT_FILENO);
    sc.tty = terminal && !(term && strcmp(term, "dumb") == 0);
    const char *nc = getenv("NO_COLOR");
    sc.colour = sc.tty && !(nc && *nc);
    struct winsize ws;
    if (terminal && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        sc.width = ws.ws_col;
    return sc;
}

/* One line of the view, cut to the width and coloured by what it says. */
static void put_line(const char *line, size_t len, const struct screen *sc)
{
    const char *on = NULL;
    if (sc->colour) {
        if (memmem(line, len, "wedged", 6) || memmem(line, len, "mid-change", 10))
            on = "\033[31m"; /* red */
        else if (len >= 5 && memcmp(line + len - 5, "stale", 5) == 0)
            on = "\033[33m"; /* yellow */
    }
    if (sc->width && len > sc->width)
        len = sc->width;
    if (on)
        fputs(on, stdout);
    fwrite(line, 1, len, stdout);
    if (on)
        fputs("\033[0m", stdout);
    fputs(sc->tty ? "\033[K\n" : "\n", stdout); /* clear what a longer old line left */
}

/* A file truncated under a mapping faults the reader with SIGBUS; the
 * watch says what happened instead of dying of it. */
static sigjmp_buf bus_jump;
static void on_bus(int sig)
{
    (void)sig;
    siglongjmp(bus_jump, 1);
}

/* The identity and size of the file at path, to tell a replacement from
 * a truncation. */
struct ident {
    dev_t dev;
    ino_t ino;
    off_t size;
};

static bool identity(const char *path, struct ident *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    *id = (struct ident){ st.st_dev, st.st_ino, st.st_size };
    return true;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    uint64_t interval = 1000, grace = TOOL_DEFAULT_GRACE;
    bool json = false;
    const struct tool_opt opts[] = {
        { "interval", OPT_MS, 1, TOOL_MAX_INTERVAL_MS, &interval, NULL, NULL },
        { "grace", OPT_U64, 0, TOOL_MAX_GRACE, &grace, NULL, NULL },
        { "json", OPT_FLAG, 0, 0, NULL, &json, NULL },
    };
    const char *pos[1];
    size_t npos;
    int rc = tool_parse(cmd, argc, argv, opts, 3, pos, 1, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    const char *path = pos[0];
    struct screen sc = screen_of();
    if (json)
        sc.tty = sc.colour = false, sc.width = 0;
    tool_catch_stop_signals();
    struct sigaction sa = { .sa_handler = on_bus };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    struct ident was;
    bool known = identity(path, &was);
    /* The previous view's counters, for the rates; none at first and
     * after the file was replaced. */
    struct tool_counters prev = { 0 };
    bool have_prev = false;
    uint64_t prev_ms = 0;

    for (;;) {
        /* Render off screen first, so a redraw never shows half a table. */
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (!mem)
            return tool_fail(path, -errno);
        struct ident now;
        if (known && identity(path, &now)) {
            if (now.dev != was.dev || now.ino != was.ino) {
                have_prev = false;
                if (json)
                    fprintf(stderr, "vigil: %s: replaced by another file; watching the new one\n", tool_e(path));
                else
                    fprintf(mem, "(%s was replaced by another file; this is the new one)\n", tool_e(path));
            } else if (now.size != was.size) {
                fclose(mem);
                free(buf);
                return tool_fail_msg(path, "%s from %lld to %lld bytes while being watched; the watch ends",
                                     now.size < was.size ? "truncated" : "grown", (long long)was.size,
                                     (long long)now.size);
            }
            was = now;
        }
        if (!json) {
            time_t now = time(NULL);
            struct tm tm;
            char stamp[32] = "";
            if (localtime_r(&now, &tm))
                strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
            char every[32];
            tool_format_ms(interval, every, sizeof(every));
            fprintf(mem, "vigil watch %s, every %s, %s%s\n", tool_e(path), every, stamp, sc.tty ? " (Ctrl-C ends)" : "");
        }
        if (sigsetjmp(bus_jump, 1) != 0) {
            fclose(mem);
            free(buf);
            return tool_fail_msg(path, "truncated while being watched (a peer shrank the file under its "
                                       "mapping); the watch ends");
        }
        struct tool_summary sum = { 0 };
        rc = tool_show(path, grace, json, mem, &sum);
        struct tool_counters cur;
        int crc = rc == 0 ? tool_counters_read(path, sum.kind, &cur) : 0;
        uint64_t now_ms = tool_now_ms();
        if (rc == 0 && crc < 0)
            rc = tool_fail_file(path, crc, sum.kind, false);
        /* The counters as rates per second since the previous view. */
        char *cbuf = NULL;
        size_t clen = 0;
        if (rc == 0) {
            const struct tool_counters *was = have_prev ? &prev : NULL;
            if (json) {
                FILE *cm = open_memstream(&cbuf, &clen);
                if (!cm) {
                    rc = tool_fail(path, -errno);
                } else {
                    tool_counters_json(&cur, was, now_ms - prev_ms, cm);
                    fclose(cm);
                }
            } else {
                tool_counters_human(&cur, was, now_ms - prev_ms, mem);
            }
            prev = cur, prev_ms = now_ms, have_prev = true;
        }
        fclose(mem);
        if (rc != 0) {
            free(buf);
            free(cbuf);
            return rc;
        }
        if (sc.tty)
            fputs("\033[H", stdout);
        if (json) {
            /* One document, one line: JSON strings never hold a raw
             * newline. The counters go in as the document's last members,
             * before its closing brace. */
            char *end = memrchr(buf, '}', len);
            for (size_t i = 0; i < len; i++) {
                if (end && buf + i == end) {
                    fputs(", ", stdout);
                    fwrite(cbuf, 1, clen, stdout);
                }
                if (buf[i] != '\n')
                    fputc(buf[i], stdout);
            }
            fputc('\n', stdout);
        } else {
            for (char *l = buf, *e; l < buf + len; l = e + 1) {
                e = memchr(l, '\n', (size_t)(buf + len - l));
                if (!e)
                    e = buf + len;
                put_line(l, (size_t)(e - l), &sc);
            }
            fputs(sc.tty ? "\033[J" : "\n", stdout); /* clear below, or end the view */
        }
        free(buf);
        free(cbuf);
        if ((rc = tool_flush()) != 0)
            return rc;
        if (tool_sleep_ms(interval))
            return EXIT_OK;
    }
}

const struct tool_cmd tool_cmd_watch = {
    .name = "watch",
    .synopsis = "FILE [--interval DURATION] [--grace G] [--json]",
    .summary = "live refreshing view",
    .help = "Shows FILE as `vigil inspect` does, again every DURATION, until SIGINT\n"
            "or SIGTERM (then exits 0). On a terminal lines are cut to its width and\n"
            "the view is redrawn in place, stale slots in yellow and wedged ones in\n"
            "red (no colour when NO_COLOR is set; with TERM=dumb no escape codes at\n"
            "all, each view appended); otherwise each view is appended, ending with\n"
            "a blank line.\n"
            "A file replaced under the watch is said so; one truncated under it ends\n"
            "the watch with a message. Each view ends with the file's counters of\n"
            "structural events (registers, reclaims, repairs, leader changes;\n"
            "barrier releases and withdrawals; lease hand-overs, refused renewals\n"
            "and expiries) and their rates per second since the previous view.\n"
            "\n"
            "options:\n"
            "  --interval DURATION  time between views, 1ms..24h (default 1s): 500ms,\n"
            "                       2s; a number alone is milliseconds\n"
            "  --grace G            epochs a slot may miss before it is stale (default 5)\n"
            "  --json               one JSON document per line and view: inspect\n"
            "                       --json's, with \"counters\" and \"rates\" (null in\n"
            "                       the first view)\n"
            "  -h, --help           show this help\n",
    .run = run,
};
