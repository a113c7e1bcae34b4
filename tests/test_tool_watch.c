/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil watch as an operator sees it. On a terminal (a
 * pseudo-terminal the test holds, 60 columns wide) stale slots are
 * coloured and every line fits the width; NO_COLOR takes the colour away
 * and TERM=dumb every escape code; --json gives one JSON document per
 * line; a file truncated under the watch ends it with a message.
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
    vigil_hb_close(hb);
    return 0;
}

static int test_json_lines(void)
{
    const char *f = vt_path("j.hb");
    vigil_hb *hb = stale_table(f);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "watch", f, "--interval", "20", "--json") == 0, "spawn");
    bool two = vt_read_until(&p, "]}\n{", 10000); /* the end of one document and the next */
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

VT_MAIN(VT_CASE(test_terminal_colour_and_width), VT_CASE(test_json_lines), VT_CASE(test_truncated_under_watch))
