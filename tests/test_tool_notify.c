/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil failover --sd-notify against a NOTIFY_SOCKET the test
 * listens on, as systemd would: READY=1 first, at once (before the first
 * interval's scan), WATCHDOG=1 at each interval while enough slots are
 * live, and none once they are not; a line on stderr, once, when it is
 * first withheld (with STATUS= saying why) and once when it resumes.
 * Every later message carries a STATUS= line with the scan's number and
 * live count, so the test follows the watchdog's own intervals and never
 * a clock. The start grace: --min-live not judged until first met (or
 * --start-grace 0), its time left said rounded (a --start-grace of 1h says "60m left").
 * A NOTIFY_SOCKET in the abstract namespace ('@' first), as systemd
 * gives to services in some containers: the same datagrams reach it.
 */
#include "tooltest.h"

#include <sys/socket.h>
#include <sys/un.h>

/* Receives one datagram into buf (NUL-terminated); false after timeout_ms. */
static bool recv_msg(int fd, char *buf, size_t len, unsigned timeout_ms)
{
    struct pollfd pfd = { fd, POLLIN, 0 };
    if (poll(&pfd, 1, (int)timeout_ms) <= 0)
        return false;
    ssize_t n = recv(fd, buf, len - 1, 0);
    if (n < 0)
        return false;
    buf[n] = '\0';
    return true;
}

static int test_sd_notify(void)
{
    const char *f = vt_path("svc.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &a), 0);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &b), 0);

    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%.90s/notify", vt_tmpdir()) >= (int)sizeof(sa.sun_path))
        return VT_SKIP; /* a TMPDIR too long for a socket name */
    EXPECT(sock >= 0 && bind(sock, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s", sa.sun_path,
           strerror(errno));
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    struct vt_proc p;
    const char *log = vt_path("svc.err");
    const char *args[] = { "failover", f, "--grace", "3", "--interval", "10", "--sd-notify", "--min-live", "2", NULL };
    int sp = vt_spawn_logged(&p, log, args);
    unsetenv("NOTIFY_SOCKET");
    EXPECT(sp == 0, "spawn");

    char msg[512];
    EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message from the watchdog");
    EXPECT(strncmp(msg, "READY=1\n", 8) == 0, "first message is not READY=1: '%s'", msg);
    EXPECT(strstr(msg, "STATUS=watching ") && !strstr(msg, "scan") && !strstr(msg, "WATCHDOG=1"),
           "READY=1 is sent at once, before the first scan: '%s'", msg);
    EXPECT(recv_msg(sock, msg, sizeof(msg), 10000) && strstr(msg, "WATCHDOG=1") && strstr(msg, "STATUS=scan 0: 2 live"),
           "second message: '%s'", msg);
    EXPECT(recv_msg(sock, msg, sizeof(msg), 10000) && strstr(msg, "WATCHDOG=1") && !strstr(msg, "READY"),
           "third message: '%s'", msg);

    /* One slot goes stale: below --min-live, no more WATCHDOG=1. Keep a
     * live, tick past the grace window. */
    for (int i = 0; i < 5; i++) {
        vigil_hb_tick(hb);
        vigil_hb_beat(hb, a);
    }
    bool unhealthy = false;
    int after = 0, watchdogs_after = 0;
    for (int i = 0; i < 2000 && after < 5; i++) {
        if (!recv_msg(sock, msg, sizeof(msg), 10000))
            break;
        if (strstr(msg, ": 1 live") || strstr(msg, ": 0 live"))
            unhealthy = true;
        if (unhealthy) {
            after++;
            watchdogs_after += strstr(msg, "WATCHDOG=1") != NULL;
        }
    }
    EXPECT(unhealthy && after == 5, "the watchdog never reported the table below --min-live ('%s')", msg);
    EXPECT(watchdogs_after == 0, "WATCHDOG=1 sent %d times while fewer than 2 slots were live", watchdogs_after);
    EXPECT(strstr(msg, "STATUS=scan ") && strstr(msg, "ping withheld: 1 live, fewer than --min-live 2"),
           "STATUS= does not say why WATCHDOG=1 is withheld: '%s'", msg);
    /* A second worker again (b's slot was reclaimed as stale): healthy,
     * WATCHDOG=1 resumes, said once. */
    uint32_t c;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &c), 0);
    bool resumed = false;
    for (int i = 0; i < 2000 && !resumed; i++) {
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
        resumed = strstr(msg, "WATCHDOG=1\n") && strstr(msg, ": 2 live");
    }
    EXPECT(resumed, "WATCHDOG=1 never resumed: '%s'", msg);
    for (int i = 0; i < 3; i++)
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
    int st = vt_stop(&p, SIGTERM, 10000);
    close(sock);
    EXPECT(st == 0, "failover --sd-notify: exit %d on SIGTERM", st);
    char err[8192];
    vt_slurp(log, err, sizeof(err));
    EXPECT(vt_count_lines(err) == 2 && strstr(err, "--sd-notify: ping withheld: 1 live, fewer than --min-live 2") &&
               strstr(err, "--sd-notify: ping resumed: 2 live") &&
               strstr(err, "withheld") < strstr(err, "resumed"),
           "one line when WATCHDOG=1 is withheld, one when it resumes: '%s'", err);
    vigil_hb_close(hb);
    return 0;
}

/* The start grace: on a table whose workers are not up yet, --min-live
 * is not judged (WATCHDOG=1, STATUS says starting) until it is first met;
 * from then on it is, and a worker going stale stops WATCHDOG=1. With
 * --start-grace 0 an empty table is unhealthy from the first message. */
static int test_start_grace(void)
{
    const char *f = vt_path("start.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%.90s/notify2", vt_tmpdir()) >= (int)sizeof(sa.sun_path))
        return VT_SKIP;
    EXPECT(sock >= 0 && bind(sock, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind: %s", strerror(errno));
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "failover", f, "--grace", "3", "--interval", "10ms", "--sd-notify", "--min-live", "2",
                      "--start-grace", "1h");
    unsetenv("NOTIFY_SOCKET");
    EXPECT(sp == 0, "spawn");
    char msg[512];
    EXPECT(recv_msg(sock, msg, sizeof(msg), 10000) && strstr(msg, "READY=1"), "no READY=1 from the watchdog");
    EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message from the watchdog");
    EXPECT(strstr(msg, "WATCHDOG=1") && strstr(msg, "starting: 0 live (start grace: 60m left)"),
           "an empty table in its start grace, its time left rounded: '%s'", msg);
    /* The workers come up one by one: still starting with one. */
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &a), 0);
    bool one = false;
    for (int i = 0; i < 2000 && !one; i++) {
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
        one = strstr(msg, "starting: 1 live") != NULL;
        EXPECT(strstr(msg, "WATCHDOG=1"), "no WATCHDOG=1 while starting: '%s'", msg);
    }
    EXPECT(one, "never saw one live worker: '%s'", msg);
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &b), 0);
    bool up = false;
    for (int i = 0; i < 2000 && !up; i++) {
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
        up = strstr(msg, ": 2 live") && !strstr(msg, "starting");
    }
    EXPECT(up && strstr(msg, "WATCHDOG=1"), "never healthy with two live: '%s'", msg);
    /* Met once, judged from now on: one goes stale, no more WATCHDOG=1. */
    for (int i = 0; i < 5; i++) {
        vigil_hb_tick(hb);
        vigil_hb_beat(hb, a);
    }
    bool down = false;
    for (int i = 0; i < 2000 && !down; i++) {
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
        down = strstr(msg, ": 1 live") != NULL;
    }
    EXPECT(down && !strstr(msg, "WATCHDOG=1") && !strstr(msg, "starting"),
           "below --min-live after the start: '%s'", msg);
    int st = vt_stop(&p, SIGTERM, 10000);
    EXPECT(st == 0, "exit %d on SIGTERM", st);

    /* --start-grace 0: judged at once. */
    const char *g = vt_path("nograce.hb");
    vigil_hb_close(vt_hb_fresh_at(g, 4));
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    sp = VT_SPAWN(&p, "failover", g, "--interval", "10ms", "--sd-notify", "--min-live", "1", "--start-grace", "0");
    unsetenv("NOTIFY_SOCKET");
    EXPECT(sp == 0, "spawn");
    bool first = false;
    for (int i = 0; i < 2000 && !first; i++) {
        EXPECT(recv_msg(sock, msg, sizeof(msg), 10000), "no message");
        first = strstr(msg, "READY=1") != NULL; /* the old watchdog's last messages may come first */
    }
    EXPECT(first && recv_msg(sock, msg, sizeof(msg), 10000), "no message after READY=1");
    st = vt_stop(&p, SIGTERM, 10000);
    close(sock);
    EXPECT(first && !strstr(msg, "WATCHDOG=1") && strstr(msg, "scan 0: ping withheld: 0 live"),
           "--start-grace 0: '%s'", msg);
    EXPECT(st == 0, "exit %d on SIGTERM", st);
    vigil_hb_close(hb);
    return 0;
}

/* "@NAME": the socket NAME in the abstract namespace (no file), bound
 * with a NUL first and the name's length; one datagram of KEY=VALUE lines
 * reaches it, as on a path. */
static int test_abstract_socket(void)
{
    const char *f = vt_path("abstract.hb");
    vigil_hb *hb = vt_hb_fresh_at(f, 4);
    uint32_t a;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &a), 0);
    char name[64];
    snprintf(name, sizeof(name), "@vigil-test-notify-%d-%ld", (int)getpid(), (long)(vt_now_ms() % 1000000));
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(name);
    memcpy(sa.sun_path, name, len);
    sa.sun_path[0] = '\0';
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    EXPECT(sock >= 0 && bind(sock, (struct sockaddr *)&sa, salen) == 0, "bind %s: %s", name, strerror(errno));
    setenv("NOTIFY_SOCKET", name, 1);
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "failover", f, "--grace", "3", "--interval", "10", "--sd-notify");
    unsetenv("NOTIFY_SOCKET");
    EXPECT(sp == 0, "spawn");
    char msg[512];
    char msg2[512] = "";
    bool got = recv_msg(sock, msg, sizeof(msg), 10000) && recv_msg(sock, msg2, sizeof(msg2), 10000);
    int st = vt_stop(&p, SIGTERM, 10000);
    close(sock);
    EXPECT(got, "no messages on the abstract socket %s", name);
    EXPECT(strncmp(msg, "READY=1\n", 8) == 0 && strstr(msg, "\nSTATUS=watching "),
           "one datagram of KEY=VALUE lines, READY=1 first: '%s'", msg);
    EXPECT(strncmp(msg2, "WATCHDOG=1\n", 11) == 0 && strstr(msg2, "\nSTATUS=scan 0: 1 live"),
           "then WATCHDOG=1 with the first scan: '%s'", msg2);
    EXPECT(st == 0, "exit %d on SIGTERM", st);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_sd_notify), VT_CASE(test_start_grace), VT_CASE(test_abstract_socket))
