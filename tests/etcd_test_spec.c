/* SPDX-License-Identifier: MIT */
/* Description: the etcd adapter's public contract, checked by the compiler. */
#include "testutil.h"

#include <vigil/etcd.h>

#include <stddef.h>

#define SAME(fn, type) do { __typeof__(type) vt_p_ = fn; (void)vt_p_; } while (0)

static int test_signatures(void)
{
    SAME(vigil_etcd_connect, int (*)(const char *, vigil_etcd **));
    SAME(vigil_etcd_close, void (*)(vigil_etcd *));
    SAME(vigil_etcd_acquire, int (*)(vigil_etcd *, const char *, const char *, uint64_t, vigil_lease *));
    SAME(vigil_etcd_renew, int (*)(vigil_etcd *, const vigil_lease *));
    SAME(vigil_etcd_release, int (*)(vigil_etcd *, const vigil_lease *));
    SAME(vigil_etcd_port, vigil_lease_port (*)(vigil_etcd *));
    SAME(vigil_etcd_get, int (*)(vigil_etcd *, const char *, vigil_lease_info *));
    SAME(vigil_etcd_acquire_wait, int (*)(vigil_etcd *, const char *, const char *, uint64_t, uint64_t, vigil_lease *));
    /* Issue 19: the production options and election parity. */
    SAME(vigil_etcd_connect_opts, int (*)(const char *, const struct vigil_etcd_options *, vigil_etcd **));
    SAME(vigil_etcd_errmsg, const char *(*)(void));
    SAME(vigil_etcd_session_open, int (*)(vigil_etcd *, uint64_t, vigil_etcd_session **));
    SAME(vigil_etcd_session_close, int (*)(vigil_etcd_session *));
    SAME(vigil_etcd_session_lease, int64_t (*)(const vigil_etcd_session *));
    SAME(vigil_etcd_session_fd, int (*)(const vigil_etcd_session *));
    SAME(vigil_etcd_session_lost, bool (*)(const vigil_etcd_session *));
    SAME(vigil_etcd_session_acquire, int (*)(vigil_etcd_session *, const char *, const char *, vigil_lease *));
    SAME(vigil_etcd_session_acquire_wait,
         int (*)(vigil_etcd_session *, const char *, const char *, uint64_t, vigil_lease *));
    SAME(vigil_etcd_resign, int (*)(vigil_etcd *, const vigil_lease *));
    SAME(vigil_etcd_proclaim, int (*)(vigil_etcd *, vigil_lease *, const char *));
    SAME(vigil_etcd_observe, int (*)(vigil_etcd *, const char *, vigil_etcd_observer **));
    SAME(vigil_etcd_observer_fd, int (*)(const vigil_etcd_observer *));
    SAME(vigil_etcd_observer_next, int (*)(vigil_etcd_observer *, vigil_lease_info *, uint64_t));
    SAME(vigil_etcd_observer_close, void (*)(vigil_etcd_observer *));
    struct vigil_etcd_options o = { .cacert = "ca", .cert = "c", .key = "k", .user = "u", .password = "p",
                                    .namespace = "n/", .dial_timeout_ms = 1, .request_timeout_ms = 2 };
    EXPECT(offsetof(struct vigil_etcd_options, namespace) == 5 * sizeof(char *) &&
               offsetof(struct vigil_etcd_options, request_timeout_ms) == 6 * sizeof(char *) + 4 && o.key,
           "struct vigil_etcd_options is not laid out as the contract says");
    EXPECT(VIGIL_ETLS == -1010 && strcmp(vigil_strerror(VIGIL_ETLS), vigil_strerror(VIGIL_EBUSY)) != 0,
           "VIGIL_ETLS");
    vigil_etcd_observer_close(NULL);
    EXPECT_RC(vigil_etcd_session_close(NULL), 0);
    vigil_etcd_close(NULL);
    return 0;
}

VT_MAIN(VT_CASE(test_signatures))
