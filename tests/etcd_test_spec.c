/* SPDX-License-Identifier: MIT */
/* Description: the etcd adapter's public contract, checked by the compiler. */
#include "testutil.h"

#include <vigil/etcd.h>

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
    vigil_etcd_close(NULL);
    return 0;
}

VT_MAIN(VT_CASE(test_signatures))
