/* SPDX-License-Identifier: MIT */
/*
 * Description: read-only handles (vigil_hb_open_readonly,
 * vigil_leases_open_readonly). They open with read permission alone, see
 * a peer's changes as they land, and nothing done through them reaches
 * the file, not even a call that writes by mistake.
 */
#include "testutil.h"

#include <sys/stat.h>

static int test_hb_sees_peers(void)
{
    const char *p = vt_path("ro.hb");
    vigil_hb *rw = vt_hb_fresh_at(p, 4), *ro;
    EXPECT_RC(vigil_hb_open_readonly(p, 0, &ro), 0);
    EXPECT(vigil_hb_capacity(ro) == 4, "capacity %u", vigil_hb_capacity(ro));
    uint32_t s;
    EXPECT_RC(vigil_hb_register(rw, 4242, &s), 0);
    vigil_hb_tick(rw);
    vigil_hb_beat(rw, s);
    EXPECT_RC(vigil_hb_mark_in_flight(rw, s, 9), 0);
    vigil_slot_info info;
    EXPECT_RC(vigil_hb_snapshot(ro, s, &info), 0);
    EXPECT(info.pid == 4242 && info.last_seen_epoch == 1 && info.in_flight == 1u << 9,
           "read-only view: pid %u seen %llu bits %#llx", info.pid, (unsigned long long)info.last_seen_epoch,
           (unsigned long long)info.in_flight);
    EXPECT(vigil_hb_epoch(ro) == 1 && vigil_hb_live_count(ro, 5) == 1, "epoch %llu live %u",
           (unsigned long long)vigil_hb_epoch(ro), vigil_hb_live_count(ro, 5));
    /* Later changes too: the page is the file's, not a copy taken at open. */
    vigil_hb_tick(rw);
    EXPECT_RC(vigil_hb_unregister(rw, s), 0);
    EXPECT_RC(vigil_hb_snapshot(ro, s, &info), VIGIL_EVACANT);
    EXPECT(vigil_hb_epoch(ro) == 2, "epoch %llu after a second tick", (unsigned long long)vigil_hb_epoch(ro));
    vigil_hb_close(ro);
    vigil_hb_close(rw);
    return 0;
}

/* Writing through a read-only handle changes nothing of the file. */
static int test_hb_writes_stay_private(void)
{
    const char *p = vt_path("private.hb");
    vigil_hb *rw = vt_hb_fresh_at(p, 4), *ro;
    EXPECT_RC(vigil_hb_open_readonly(p, 0, &ro), 0);
    uint32_t s;
    int rc = vigil_hb_register(ro, 777, &s);
    vigil_hb_tick(ro);
    vigil_slot_info info;
    EXPECT(rc != 0 || vigil_hb_snapshot(rw, s, &info) == VIGIL_EVACANT,
           "a register through a read-only handle reached the file");
    EXPECT(vigil_hb_epoch(rw) == 0, "a tick through a read-only handle reached the file: epoch %llu",
           (unsigned long long)vigil_hb_epoch(rw));
    vigil_hb_close(ro);
    vigil_hb_close(rw);
    return 0;
}

/* Read permission is enough: a 0400 file opens read-only, and not
 * read-write (checked as an unprivileged user; root reads everything). */
static int test_needs_read_only(void)
{
    const char *p = vt_path("r.hb");
    vigil_hb_close(vt_hb_fresh_at(p, 2));
    vigil_leases_close(vt_leases_fresh("r.leases", 2));
    const char *lp = vt_path("r.leases");
    EXPECT(chmod(p, 0444) == 0 && chmod(lp, 0444) == 0 && chmod(vt_tmpdir(), 0755) == 0, "chmod");
    if (geteuid() != 0)
        return VT_SKIP;
    pid_t kid = fork();
    if (kid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(77);
        vigil_hb *hb;
        vigil_leases *ls;
        if (vigil_hb_open(p, 0, &hb) != -EACCES)
            _exit(1);
        if (vigil_hb_open_readonly(p, 0, &hb) != 0)
            _exit(2);
        vigil_hb_close(hb);
        if (vigil_leases_open(lp, &ls) != -EACCES)
            _exit(3);
        if (vigil_leases_open_readonly(lp, &ls) != 0)
            _exit(4);
        vigil_lease_info info;
        int rc = vigil_leases_entry(ls, 0, &info);
        vigil_leases_close(ls);
        _exit(rc == VIGIL_EVACANT ? 0 : 5);
    }
    int st = vt_wait(kid, 10000);
    chmod(vt_tmpdir(), 0700);
    if (st == 77)
        return VT_SKIP;
    EXPECT(st == 0, "as nobody on 0444 files: step %d failed (1/3 read-write not refused, 2/4 read-only "
                    "refused, 5 entry)", st);
    return 0;
}

VT_MAIN(VT_CASE(test_hb_sees_peers), VT_CASE(test_hb_writes_stay_private), VT_CASE(test_needs_read_only))
