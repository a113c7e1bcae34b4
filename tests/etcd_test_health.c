/* SPDX-License-Identifier: MIT */
/*
 * vigil_etcd_health_get, _fd and vigil_etcd_ping against a real etcd
 * behind a relay the test takes away and gives back (relaytest.h): the
 * handle starts reachable; a request no endpoint answers makes it
 * unreachable once, however many fail, with the endpoint and the refusal
 * in its message and the fd readable until the record is read; the first
 * answer makes it reachable again; a wait's own deadline cutting a request
 * short (a frozen etcd) is neither; a wait that ends names the failure it
 * met (vigil_etcd_errmsg).
 */
#include "etcd_testutil.h"
#include "relaytest.h"

#include <poll.h>

static const char *url;

#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static bool readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int test_down_and_back(void)
{
    NEED_ETCD();
    struct vt_relay r;
    EXPECT(vt_relay_start(&r, url) == 0, "relay did not start");
    vigil_etcd *e = et_connect(r.url);
    vigil_etcd_health h;
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT(h.reachable == 1 && h.changes == 0 && h.failures == 0 && h.error == 0 && !h.message[0],
           "a fresh handle: reachable %u, changes %llu, failures %llu", h.reachable, (unsigned long long)h.changes,
           (unsigned long long)h.failures);
    int fd = vigil_etcd_health_fd(e);
    EXPECT(fd >= 0 && vigil_etcd_health_fd(e) == fd && !readable(fd), "health fd %d", fd);
    EXPECT_RC(vigil_etcd_ping(e), 0);
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT(h.reachable == 1 && h.changes == 0 && h.answered_ns > 0, "after an answer: %u %llu", h.reachable,
           (unsigned long long)h.changes);

    vt_relay_down(&r);
    int rc = vigil_etcd_ping(e);
    EXPECT(rc == -ECONNREFUSED, "ping with etcd gone: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(readable(fd), "the fd not readable after the change");
    EXPECT(vigil_etcd_ping(e) < 0 && vigil_etcd_ping(e) < 0, "etcd answered through a dead relay");
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT(h.reachable == 0 && h.changes == 1 && h.failures == 3 && h.error == -ECONNREFUSED && h.failed_ns > 0 &&
               h.changed_ns > 0 && strstr(h.message, r.url) && strstr(h.message, "refused"),
           "down: reachable %u, changes %llu, failures %llu, error %d, '%s'", h.reachable,
           (unsigned long long)h.changes, (unsigned long long)h.failures, h.error, h.message);
    EXPECT(!readable(fd), "the fd still readable after the record was read");

    /* A wait that ends names what it met. */
    vigil_lease l;
    rc = vigil_etcd_acquire_wait(e, et_key("health"), "me", 5000, 300000000ull, &l);
    EXPECT(rc == VIGIL_ETIMEDOUT && strstr(vigil_etcd_errmsg(), "refused") && strstr(vigil_etcd_errmsg(), r.url),
           "acquire_wait with etcd gone: %d, errmsg '%s'", rc, vigil_etcd_errmsg());

    EXPECT(vt_relay_up(&r) == 0, "relay did not come back");
    EXPECT(VT_WAIT_FOR(vigil_etcd_ping(e) == 0, 10000), "no answer once etcd was back");
    EXPECT(readable(fd), "the fd not readable after the way back");
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT(h.reachable == 1 && h.changes == 2 && h.error == -ECONNREFUSED && h.answered_ns >= h.failed_ns,
           "back: reachable %u, changes %llu, error %d", h.reachable, (unsigned long long)h.changes, h.error);

    /* A frozen etcd and a wait's deadline: the cut is the caller's, not a failure. */
    vt_relay_freeze(&r, true);
    uint64_t failures = h.failures;
    rc = vigil_etcd_acquire_wait(e, et_key("health"), "me", 5000, 300000000ull, &l);
    EXPECT(rc == VIGIL_ETIMEDOUT, "acquire_wait on a frozen etcd: %d", rc);
    EXPECT_RC(vigil_etcd_health_get(e, &h), 0);
    EXPECT(h.reachable == 1 && h.failures == failures, "a deadline's cut counted: reachable %u, failures %llu",
           h.reachable, (unsigned long long)h.failures);
    vt_relay_freeze(&r, false);
    vigil_etcd_close(e);
    vt_relay_down(&r);
    return 0;
}

static int test_bad_arguments(void)
{
    vigil_etcd_health h;
    EXPECT_RC(vigil_etcd_health_get(NULL, &h), -EINVAL);
    EXPECT_RC(vigil_etcd_health_fd(NULL), -EINVAL);
    EXPECT_RC(vigil_etcd_ping(NULL), -EINVAL);
    vigil_etcd *e = NULL;
    EXPECT_RC(vigil_etcd_connect("http://127.0.0.1:1", &e), 0);
    EXPECT_RC(vigil_etcd_health_get(e, NULL), -EINVAL);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_down_and_back), VT_CASE(test_bad_arguments))
