/* SPDX-License-Identifier: MIT */
/*
 * Description: the public contract, checked by the compiler: every SPEC
 * declaration with its exact type (a mismatch is an incompatible-pointer
 * error under -Werror), every constant's value, and the types' fields.
 */
#include "testutil.h"

#include <stddef.h>

#define SAME(fn, type) do { __typeof__(type) vt_p_ = fn; (void)vt_p_; } while (0)

static int test_signatures(void)
{
    SAME(vigil_strerror, const char *(*)(int));
    SAME(vigil_hb_create, int (*)(const char *, uint32_t, vigil_hb **));
    SAME(vigil_hb_open, int (*)(const char *, uint32_t, vigil_hb **));
    SAME(vigil_hb_close, void (*)(vigil_hb *));
    SAME(vigil_hb_capacity, uint32_t (*)(const vigil_hb *));
    SAME(vigil_hb_register, int (*)(vigil_hb *, uint32_t, uint32_t *));
    SAME(vigil_hb_unregister, int (*)(vigil_hb *, uint32_t));
    SAME(vigil_hb_tick, uint64_t (*)(vigil_hb *));
    SAME(vigil_hb_epoch, uint64_t (*)(const vigil_hb *));
    SAME((vigil_hb_mark_in_flight), int (*)(vigil_hb *, uint32_t, unsigned));
    SAME((vigil_hb_clear_in_flight), int (*)(vigil_hb *, uint32_t, unsigned));
    SAME(vigil_hb_set_role, int (*)(vigil_hb *, uint32_t, uint32_t));
    SAME(vigil_hb_snapshot, int (*)(const vigil_hb *, uint32_t, vigil_slot_info *));
    SAME(vigil_hb_live_count, uint32_t (*)(const vigil_hb *, uint64_t));
    void (*beat)(vigil_hb *, uint32_t) = vigil_hb_beat;
    (void)beat;
    SAME(vigil_hb_beater, vigil_beater (*)(vigil_hb *, uint32_t));
    void (*beater_beat)(vigil_beater) = vigil_beater_beat;
    (void)beater_beat;

    SAME(vigil_barrier_create, int (*)(const char *, vigil_hb *, uint64_t, vigil_barrier **));
    SAME(vigil_barrier_open, int (*)(const char *, vigil_hb *, uint64_t, vigil_barrier **));
    SAME(vigil_barrier_close, void (*)(vigil_barrier *));
    SAME(vigil_barrier_wait, int (*)(vigil_barrier *, uint32_t));
    SAME(vigil_barrier_wait_quorum, int (*)(vigil_barrier *, uint32_t, uint32_t));
    SAME(vigil_barrier_wait_timeout, int (*)(vigil_barrier *, uint32_t, uint64_t));
    SAME(vigil_barrier_wait_quorum_timeout, int (*)(vigil_barrier *, uint32_t, uint32_t, uint64_t));
    SAME(vigil_barrier_epoch, uint32_t (*)(const vigil_barrier *));
    SAME(vigil_barrier_live_peers, uint32_t (*)(const vigil_barrier *));
    SAME(vigil_barrier_bind, int (*)(vigil_barrier *, uint32_t));

    SAME(vigil_keepalive_start, int (*)(const vigil_lease_port *, const vigil_lease *, vigil_keepalive **));
    SAME(vigil_keepalive_stop, int (*)(vigil_keepalive *));
    SAME(vigil_keepalive_lost, bool (*)(const vigil_keepalive *));
    SAME(vigil_with_keepalive, int (*)(const vigil_lease_port *, const vigil_lease *, int (*)(void *), void *));
    SAME(vigil_leases_create, int (*)(const char *, uint32_t, vigil_leases **));
    SAME(vigil_leases_open, int (*)(const char *, vigil_leases **));
    SAME(vigil_leases_close, void (*)(vigil_leases *));
    SAME(vigil_leases_acquire, int (*)(vigil_leases *, const char *, const char *, uint64_t, vigil_lease *));
    SAME(vigil_leases_renew, int (*)(vigil_leases *, const vigil_lease *));
    SAME(vigil_leases_release, int (*)(vigil_leases *, const vigil_lease *));
    SAME(vigil_leases_port, vigil_lease_port (*)(vigil_leases *));
    SAME(vigil_keepalive_fd, int (*)(const vigil_keepalive *));
    SAME(vigil_leases_get, int (*)(vigil_leases *, const char *, vigil_lease_info *));
    SAME(vigil_leases_acquire_wait,
         int (*)(vigil_leases *, const char *, const char *, uint64_t, uint64_t, vigil_lease *));

    SAME(vigil_failover_scan, int (*)(vigil_hb *, uint64_t, vigil_reclaim *, uint32_t));
    SAME(vigil_leader_elect, int (*)(vigil_hb *, uint64_t, vigil_leader *));
    SAME(vigil_leader_is, bool (*)(const vigil_hb *, uint32_t, uint64_t));
    SAME(vigil_hb_probe, int (*)(const vigil_hb *, uint32_t));
    SAME(vigil_failover_wait, int (*)(vigil_hb *, uint64_t, uint64_t, vigil_reclaim *, uint32_t));
    /* The third round: identity and staleness. */
    SAME(vigil_hb_owned, int (*)(const vigil_hb *, uint32_t));

    /* Beyond SPEC, the counters of structural events (vigil_hb_stats(3)). */
    SAME(vigil_hb_stats, int (*)(const vigil_hb *, vigil_hb_counters *));
    SAME(vigil_barrier_stats, int (*)(const vigil_barrier *, vigil_barrier_counters *));
    SAME(vigil_leases_stats, int (*)(const vigil_leases *, vigil_leases_counters *));

    /* The fourth round: the operating system's boundaries (whose file is
     * trusted for writing, a group set through the descriptor, sizes). */
    SAME(vigil_hb_open_flags, int (*)(const char *, uint32_t, unsigned, vigil_hb **));
    SAME(vigil_leases_open_flags, int (*)(const char *, unsigned, vigil_leases **));
    SAME(vigil_barrier_open_flags, int (*)(const char *, vigil_hb *, uint64_t, unsigned, vigil_barrier **));
    SAME(vigil_hb_create_group, int (*)(const char *, uint32_t, unsigned, gid_t, vigil_hb **));
    SAME(vigil_leases_create_group, int (*)(const char *, uint32_t, unsigned, gid_t, vigil_leases **));
    SAME(vigil_barrier_create_group,
         int (*)(const char *, vigil_hb *, uint64_t, unsigned, gid_t, vigil_barrier **));
    SAME(vigil_file_size, uint64_t (*)(uint32_t, uint32_t));
    return 0;
}

static int test_constants(void)
{
    EXPECT(VIGIL_EFULL == -1001 && VIGIL_EBADFILE == -1002 && VIGIL_ECAPACITY == -1003 &&
           VIGIL_ERANGE == -1004 && VIGIL_EVACANT == -1005 && VIGIL_ETIMEDOUT == -1006 &&
           VIGIL_ENOPEERS == -1007 && VIGIL_ELOST == -1008 && VIGIL_EBUSY == -1009,
           "error codes differ from SPEC");
    EXPECT(VIGIL_ROLE_WORKER == 0 && VIGIL_ROLE_COORDINATOR == 1, "roles differ from SPEC");
    EXPECT(VIGIL_SERIAL == 1, "VIGIL_SERIAL is %d", VIGIL_SERIAL);
    EXPECT(VIGIL_EUNTRUSTED == -1011 && VIGIL_OPEN_READONLY == 0x1u && VIGIL_OPEN_TRUST_OWNER == 0x2u,
           "the open flags or VIGIL_EUNTRUSTED changed");
    EXPECT(strcmp(vigil_strerror(VIGIL_EUNTRUSTED), "unknown error") != 0, "VIGIL_EUNTRUSTED has no text");
    /* VIGIL_ELOST is a lease's loss and a heartbeat slot's alike: its text
     * says both, and ends as SPEC's comment does. */
    const char *lost = vigil_strerror(VIGIL_ELOST);
    EXPECT(strstr(lost, "lease") && strstr(lost, "heartbeat slot") && strstr(lost, "the scope is someone else's now"),
           "VIGIL_ELOST's text: '%s'", lost);
    /* The sizes the layouts give (vigil-files(5)). */
    EXPECT(vigil_file_size(VIGIL_KIND_HEARTBEAT, 8) == 64 + 8 * 64 && vigil_file_size(VIGIL_KIND_LEASES, 4) == 128 + 4 * 256 &&
               vigil_file_size(VIGIL_KIND_BARRIER, 4) > 64 && vigil_file_size(VIGIL_KIND_HEARTBEAT, 0) == 0 &&
               vigil_file_size(9, 4) == 0,
           "vigil_file_size");
    return 0;
}

static int test_types(void)
{
    /* The SPEC's fields, in its order (fields may be added at the end). */
    EXPECT(offsetof(vigil_slot_info, pid) == 0 && offsetof(vigil_slot_info, role) == 4 &&
           offsetof(vigil_slot_info, last_seen_epoch) == 8 && offsetof(vigil_slot_info, in_flight) == 16,
           "vigil_slot_info fields moved");
    vigil_lease l;
    EXPECT(sizeof(l.key) == 128 && sizeof(l.owner) == 64, "lease key/owner sizes %zu/%zu",
           sizeof(l.key), sizeof(l.owner));
    EXPECT(offsetof(vigil_lease, key) == 0 && offsetof(vigil_lease, owner) == 128 &&
           offsetof(vigil_lease, token) == 192 && offsetof(vigil_lease, ttl_ms) == 200 &&
           offsetof(vigil_lease, id) == 208, "vigil_lease fields moved");
    EXPECT(offsetof(vigil_lease_port, ctx) == 0, "vigil_lease_port.ctx moved");
    EXPECT(offsetof(vigil_lease_info, key) == 0 && offsetof(vigil_lease_info, owner) == 128 &&
           offsetof(vigil_lease_info, token) == 192 && offsetof(vigil_lease_info, ttl_ms) == 200 &&
           offsetof(vigil_lease_info, expires_in_ms) == 208 && offsetof(vigil_lease_info, state) == 216 &&
           offsetof(vigil_lease_info, pid) == 220, "vigil_lease_info fields moved");
    EXPECT(VIGIL_LEASE_VACANT == 0 && VIGIL_LEASE_HELD == 1 && VIGIL_LEASE_EXPIRED == 2 &&
           VIGIL_LEASE_RELEASED == 3 && VIGIL_LEASE_CHANGING == 4, "lease states differ from SPEC");
    vigil_reclaim r = { .slot = 1, .pid = 2, .in_flight = 3 };
    vigil_leader ld = { .slot = 1, .pid = 2, .term = 3 };
    EXPECT(r.in_flight == 3 && ld.term == 3, "reclaim/leader fields");
    EXPECT(sizeof(struct vigil_hb_slot) == 64 && sizeof(struct vigil_hb_header) == 64,
           "slot and header are not one cache line each");
    return 0;
}

/* Every *_close and *_stop accepts NULL. */
static int test_null_close(void)
{
    vigil_hb_close(NULL);
    vigil_barrier_close(NULL);
    vigil_leases_close(NULL);
    EXPECT_RC(vigil_keepalive_stop(NULL), 0);
    return 0;
}

VT_MAIN(VT_CASE(test_signatures), VT_CASE(test_constants), VT_CASE(test_types), VT_CASE(test_null_close))
