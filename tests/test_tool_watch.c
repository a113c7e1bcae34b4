/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil watch as an operator sees it. On a terminal (a
 * pseudo-terminal the test holds, 60 columns wide) stale slots are
 * coloured and every line fits the width; NO_COLOR takes the colour away
 * and TERM=dumb every escape code, lines still cut to the width; --json gives one JSON document per
 * line, with the file's counters and their rates (null in the first
 * view, above zero in the first one after new registrations); the human
 * view ends with them too; a file truncated under the watch ends it with
 * a message.
 */
#include "tooltest.h"

#include <sys/ioctl.h>
#include <termios.h>

extern char **environ;

/* vigil watch on a pty of `cols` columns with env additions; the parent
 * reads the master into p->buf until `needle` shows, then stops it. */
static int watch_on_pty(const char *file, unsigned short cols, const char *env1, const char *env2,
                        const char *needle, char *out, size_t outlen)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
        return VT_SKIP;
    struct winsize ws = { .ws_row = 40, .ws_col = cols };
    const char *slave = ptsname(master);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0) {
        setsid();
        int fd = open(slave, O_RDWR);
        if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) != 0 || ioctl(fd, TIOCSWINSZ, &ws) != 0)
            _exit(126);
        dup2(fd, 1);
        unsetenv("NO_COLOR");
        setenv("TERM", "xterm", 1);
        if (env1)
            putenv((char *)env1);
        if (env2)
            putenv((char *)env2);
        execl(VIGIL_TOOL, VIGIL_TOOL, "watch", file, "--interval", "50", (char *)NULL);
        _exit(127);
    }
    size_t len = 0;
    uint64_t deadline = vt_now_ms() + 10000;
    out[0] = '\0';
    while (!strstr(out, needle) && vt_now_ms() < deadline && len + 1 < outlen) {
        struct pollfd pfd = { master, POLLIN, 0 };
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t k = read(master, out + len, outlen - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
        out[len] = '\0';
    }
    kill(kid, SIGTERM);
    int st = vt_wait(kid, 10000);
    close(master);
    return st == 0 && strstr(out, needle) ? 0 : 1;
}

/* The longest line once escape sequences are taken out. */
static size_t widest(const char *s)
{
    size_t best = 0, cur = 0;
    for (; *s; s++) {
        if (*s == '\033') {
            while (*s && !(*s >= '@' && *s <= '~' && *s != '['))
                s++;
            if (!*s)
                break;
            continue;
        }
        if (*s == '\n' || *s == '\r') {
            best = cur > best ? cur : best;
            cur = 0;
        } else {
            cur++;
        }
    }
    return cur > best ? cur : best;
}

static vigil_hb *stale_table(const char *f)
{
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    uint32_t a, b;
    vigil_hb_register(hb, 4001, &a);
    vigil_hb_register(hb, 4002, &b);
    for (int i = 0; i < 9; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, a);
    return hb;
}

static int test_terminal_colour_and_width(void)
{
    const char *f = vt_path("w.hb");
    vigil_hb *hb = stale_table(f);
    static char out[1 << 16];
    int rc = watch_on_pty(f, 60, NULL, NULL, "1 stale", out, sizeof(out));
    if (rc == VT_SKIP)
        return rc;
    EXPECT(rc == 0, "watch on a terminal never showed the table:\n%s", out);
    EXPECT(strstr(out, "\033[33m"), "no colour for the stale slot on a terminal:\n%s", out);
    EXPECT(widest(out) <= 60, "a line of %zu columns on a 60-column terminal", widest(out));

    rc = watch_on_pty(f, 60, "NO_COLOR=1", NULL, "1 stale", out, sizeof(out));
    EXPECT(rc == 0, "watch with NO_COLOR:\n%s", out);
    EXPECT(!strstr(out, "\033[3"), "colour despite NO_COLOR:\n%s", out);

    rc = watch_on_pty(f, 60, "TERM=dumb", NULL, "1 stale", out, sizeof(out));
    EXPECT(rc == 0, "watch with TERM=dumb:\n%s", out);
    EXPECT(!strchr(out, '\033'), "escape codes with TERM=dumb:\n%s", out);
    /* A dumb terminal wraps as badly as any: lines are cut all the same. */
    EXPECT(widest(out) <= 60, "a line of %zu columns on a 60-column dumb terminal:\n%s", widest(out), out);
    /* and they are cut, not merely short: the same view is wider on 200 */
    rc = watch_on_pty(f, 200, "TERM=dumb", NULL, "1 stale", out, sizeof(out));
    EXPECT(rc == 0 && widest(out) > 60, "the view is no wider than 60 columns on a 200-column terminal (%zu)",
           widest(out));
    vigil_hb_close(hb);
    return 0;
}

static int test_json_lines(void)
{
    const char *f = vt_path("j.hb");
    vigil_hb *hb = stale_table(f);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "watch", f, "--interval", "20", "--json") == 0, "spawn");
    bool two = vt_read_until(&p, "}\n{", 10000); /* the end of one document and the next */
    int st = vt_stop(&p, SIGTERM, 10000);
    EXPECT(two, "expected two JSON lines, got:\n%s", p.buf);
    *strchr(p.buf, '\n') = '\0';
    struct vj *doc = vj_parse(p.buf);
    EXPECT(doc && vj_is_str(vj_get(doc, "kind"), "heartbeat"), "line 1 is not inspect's JSON (%s): %s",
           vj_error ? vj_error : "", p.buf);
    EXPECT(st == 0, "watch --json: exit %d on SIGTERM", st);
    vigil_hb_close(hb);
    return 0;
}

/* Reads from the child until a whole line holding `needle` came; returns
 * that line (NUL-terminated, in a static buffer) or NULL after timeout_ms. */
static const char *line_with(struct vt_proc *p, const char *needle, unsigned timeout_ms)
{
    static char line[1 << 14];
    uint64_t deadline = vt_now_ms() + timeout_ms;
    for (;;) {
        const char *at = strstr(p->buf, needle);
        const char *end = at ? strchr(at, '\n') : NULL;
        if (end) {
            const char *start = at;
            while (start > p->buf && start[-1] != '\n')
                start--;
            size_t n = (size_t)(end - start) < sizeof(line) - 1 ? (size_t)(end - start) : sizeof(line) - 1;
            memcpy(line, start, n);
            line[n] = '\0';
            return line;
        }
        uint64_t now = vt_now_ms();
        if (now >= deadline || p->len + 1 >= sizeof(p->buf))
            return NULL;
        struct pollfd pfd = { p->fd, POLLIN, 0 };
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t k = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (k <= 0)
            return NULL;
        p->len += (size_t)k;
        p->buf[p->len] = '\0';
    }
}

/* The counters in --json: totals in every line, rates null in the first
 * and, in the first view that sees new registrations, above zero. */
static int test_json_counters_rates(void)
{
    const char *f = vt_path("r.hb");
    vigil_hb *hb = stale_table(f);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "watch", f, "--interval", "20", "--json") == 0, "spawn");
    const char *l = line_with(&p, "\"kind\"", 10000);
    EXPECT(l, "no JSON line: %s", p.buf);
    struct vj *doc = vj_parse(l);
    uint64_t v = 0;
    struct vj *counters = vj_get(doc, "counters");
    EXPECT(vj_u64(vj_get(counters, "registers"), &v) && v == 2, "first view: expected 2 registers: %s", l);
    EXPECT(vj_u64(vj_get(counters, "reclaims"), &v) && v == 0 && vj_get(counters, "repairs") &&
               vj_get(counters, "unregisters") && vj_get(counters, "leader_changes"),
           "first view: counters incomplete: %s", l);
    struct vj *rates = vj_get(doc, "rates");
    EXPECT(rates && rates->type == VJ_NULL, "first view: rates are not null: %s", l);
    uint32_t c, d;
    EXPECT_RC(vigil_hb_register(hb, 4003, &c), 0);
    EXPECT_RC(vigil_hb_register(hb, 4004, &d), 0);
    EXPECT_RC(vigil_hb_unregister(hb, d), 0);
    l = line_with(&p, "\"counters\": {\"registers\": 4,", 10000);
    EXPECT(l, "no view with 4 registers: %s", p.buf);
    doc = vj_parse(l);
    rates = vj_get(doc, "rates");
    struct vj *r = vj_get(rates, "registers");
    EXPECT(r && r->type == VJ_NUM && r->num > 0, "the first view with new registrations has no rate: %s", l);
    l = line_with(&p, "\"unregisters\": 1,", 10000);
    EXPECT(l, "no view with 1 unregister: %s", p.buf);
    int st = vt_stop(&p, SIGTERM, 10000);
    EXPECT(st == 0, "watch --json: exit %d on SIGTERM", st);
    vigil_hb_close(hb);
    return 0;
}

/* The human view ends with the counters and their rates. */
static int test_counters_human(void)
{
    const char *f = vt_path("h.hb");
    vigil_hb *hb = stale_table(f);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "watch", f, "--interval", "20") == 0, "spawn");
    bool rates = vt_read_until(&p, "rates /s: registers ", 10000);
    int st = vt_stop(&p, SIGTERM, 10000);
    EXPECT(rates, "no rates in the view:\n%s", p.buf);
    EXPECT(strstr(p.buf, "counters: registers 2, unregisters 0, reclaims 0, repairs 0, leader changes 0\n"),
           "no counters line:\n%s", p.buf);
    EXPECT(strstr(p.buf, "rates /s: (from the next view on)\n"), "the first view has rates:\n%s", p.buf);
    EXPECT(st == 0, "watch: exit %d on SIGTERM", st);
    vigil_hb_close(hb);
    return 0;
}

/* A peer shrinks the file: the watch ends with a message saying so. */
static int test_truncated_under_watch(void)
{
    const char *f = vt_path("t.hb");
    vigil_hb *hb = stale_table(f);
    struct vt_proc p;
    /* The child's stderr into a file, to read its message. */
    const char *errpath = vt_path("watch.err");
    int saved = dup(2), efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT(saved >= 0 && efd >= 0 && dup2(efd, 2) == 2, "redirect stderr");
    int sp = VT_SPAWN(&p, "watch", f, "--interval", "20");
    dup2(saved, 2);
    close(saved), close(efd);
    EXPECT(sp == 0, "spawn");
    bool shown = vt_read_until(&p, "1 stale", 10000);
    vigil_hb_close(hb);
    EXPECT(truncate(f, 64 + 2 * 64) == 0, "truncate");
    int st = vt_wait(p.pid, 10000);
    close(p.fd);
    char err[1024];
    vt_slurp(errpath, err, sizeof(err));
    EXPECT(shown, "watch never showed the table");
    EXPECT(st == 1, "expected watch to end with status 1 on a truncated file, got %d", st);
    EXPECT(strstr(err, "truncated") && vt_count_lines(err) == 1, "expected one line saying it was truncated, got '%s'",
           err);
    return 0;
}

VT_MAIN(VT_CASE(test_terminal_colour_and_width), VT_CASE(test_json_lines), VT_CASE(test_json_counters_rates),
        VT_CASE(test_counters_human), VT_CASE(test_truncated_under_watch))
