/* SPDX-License-Identifier: MIT */
/*
 * Description: who a released round counted and who it left out
 * (vigil_barrier_wait_info; THE RELEASE RECORD in src/barrier_info.c;
 * model/barrier_info.pml), with real processes:
 *
 * - every waiter of a round reads the same record: the bound peers
 *   counted, the unbound arrivals, the one given VIGIL_SERIAL;
 * - a peer killed before it arrived is left out as dead once its
 *   heartbeat lapsed; a live peer that timed out (its arrival withdrawn)
 *   is left out as absent by a quorum release, never counted;
 * - the judge killed as it claims its place, after it recorded, after
 *   its commit, or once it has moved the state: the record the round is
 *   read from is the committing judgement's (with the dead committer
 *   named when it had committed), and its mark was written before the
 *   state moved;
 * - a judge stopped as it claims its place, or between its gate check
 *   and its ticket, and resumed a dozen rounds later changes no later
 *   round's record, and its own round is then no longer kept (kept 0),
 *   never answered wrong;
 * - without the 16-byte CAS nothing is recorded and the waits work.
 *
 * Every moment is the test's: children stop or kill themselves at a hook,
 * and the heartbeat epoch moves only when the parent ticks it.
 */
#include "hbtest.h"
#include "barriertest.h"

#include "barrier_internal.h"

#define MS 1000000ull

enum { KIDS = 3, ROUNDS = 13 };

/* What a child saw of round r: rc + 1000 (0 not yet), slot masks, serial. */
struct seen {
    _Atomic int      rc;
    _Atomic uint32_t kept, counted, left_dead, left_absent, unbound, serial_slot;
};

struct shared {
    _Atomic int      hook_at;    /* the point the armed child acts at */
    _Atomic int      hook_idx;   /* the armed child */
    _Atomic int      hook_sig;   /* SIGSTOP or SIGKILL */
    _Atomic int      hook_fired;
    _Atomic int      arrived[KIDS];
    _Atomic uint32_t slot[KIDS];
    _Atomic int      go[KIDS];   /* the child may wait rounds [0, go) */
    _Atomic int      mode[KIDS]; /* 0 wait_info, 1 a timed wait that withdraws, then beat */
    _Atomic uint32_t quorum;
    struct seen      seen[KIDS][ROUNDS];
};
static struct shared *sh;
static int my_idx;

static void hook(int point)
{
    if (point == BP_RECORDED)
        atomic_store(&sh->arrived[my_idx], 1);
    if (point == atomic_load(&sh->hook_at) && my_idx == atomic_load(&sh->hook_idx)) {
        atomic_store(&sh->hook_at, 0);
        atomic_store(&sh->hook_fired, 1);
        raise(atomic_load(&sh->hook_sig));
    }
}

static uint32_t mask_of(const vigil_barrier_peer *p, uint32_t n, uint32_t why)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (p[i].why == why)
            m |= 1u << p[i].slot;
    return m;
}

static bool same_peers(const vigil_barrier_peer *a, const vigil_barrier_peer *b, uint32_t n)
{
    for (uint32_t i = 0; i < n && i < 4; i++)
        if (a[i].slot != b[i].slot || a[i].why != b[i].why || a[i].gen != b[i].gen || a[i].pid != b[i].pid)
            return false;
    return true;
}

/* Reads info into a seen record. */
static void note(struct seen *s, int rc, const vigil_barrier_round *info)
{
    s->kept = info->kept;
    s->counted = mask_of(info->counted_peers, info->counted, VIGIL_BARRIER_COUNTED);
    s->left_dead = mask_of(info->left_out_peers, info->left_out, VIGIL_BARRIER_DEAD);
    s->left_absent = mask_of(info->left_out_peers, info->left_out, VIGIL_BARRIER_ABSENT);
    s->unbound = info->unbound;
    s->serial_slot = info->serial_slot;
    atomic_store(&s->rc, rc + 1000);
}

static int wait_noted(vigil_barrier *b, uint32_t round, uint32_t quorum, uint64_t timeout_ns, struct seen *s)
{
    vigil_barrier_peer c[8], l[8];
    vigil_barrier_round info = { .counted_peers = c, .counted_cap = 8, .left_out_peers = l, .left_out_cap = 8 };
    int rc = vigil_barrier_wait_info(b, round, quorum, timeout_ns, &info);
    note(s, rc, &info);
    return rc;
}

/* The files of the case under way (fresh_case), which its children open. */
static char hb_name[16], b_name[16];

/* A case's start: fresh files TAG.hb and TAG.b, the shared record
 * cleared, and this process's handles on them. */
static vigil_barrier *fresh_case(const char *tag, vigil_hb **hb)
{
    snprintf(hb_name, sizeof(hb_name), "%s.hb", tag);
    snprintf(b_name, sizeof(b_name), "%s.b", tag);
    vt_barrier_files(hb_name, b_name, 2);
    memset(sh, 0, sizeof(*sh));
    return vt_barrier_open(hb_name, b_name, hb);
}

/* A child: registers, binds, then waits the rounds it is let go to. */
static pid_t spawn_peer(int idx)
{
    fflush(NULL);
    pid_t p = fork();
    if (p != 0)
        return p;
    vt_own_pgrp(); /* it may stop itself at a hook */
    vigil_hb *hb;
    vigil_barrier *b = vt_barrier_open(hb_name, b_name, &hb);
    uint32_t slot;
    if (vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        _exit(91);
    atomic_store(&sh->slot[idx], slot);
    my_idx = idx;
    vigil_barrier_hook = hook;
    for (int r = 0; r < ROUNDS; r++) {
        if (!VT_WAIT_FOR((vigil_hb_beat(hb, slot), atomic_load(&sh->go[idx]) > r), 60000))
            _exit(92);
        if (atomic_load(&sh->mode[idx]) == 1) {
            /* Arrives, times out (nobody else is there yet), withdrawn. */
            atomic_store(&sh->seen[idx][r].rc, vigil_barrier_wait_timeout(b, (uint32_t)r, 1 * MS) + 1000);
            break;
        }
        if (wait_noted(b, (uint32_t)r, atomic_load(&sh->quorum), 60000 * MS, &sh->seen[idx][r]) < 0)
            break;
    }
    for (;;) /* live until killed */
        vigil_hb_beat(hb, slot), vt_sleep_ms(1);
}

static int result(int idx, int r)
{
    return atomic_load(&sh->seen[idx][r].rc) - 1000;
}

static bool returned(int idx, int r)
{
    return VT_WAIT_FOR(atomic_load(&sh->seen[idx][r].rc) != 0, 60000);
}

static void end(pid_t *p, int n)
{
    for (int i = 0; i < n; i++)
        if (p[i] > 0) {
            kill(p[i], SIGKILL);
            waitpid(p[i], NULL, 0);
        }
}

/* ---- what every waiter reads ---------------------------------------------- */

/* Two bound children and the parent, bound or unbound (then its arrival
 * is the unbound one, matching its own live slot). */
static int everyone_reads_the_same(bool parent_bound)
{
    vigil_hb *hb;
    vigil_barrier *a = fresh_case(parent_bound ? "same1" : "same2", &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    if (parent_bound)
        EXPECT_RC(vigil_barrier_bind(a, as), 0);
    pid_t kid[2] = { spawn_peer(0), spawn_peer(1) };
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->slot[0]) && atomic_load(&sh->slot[1]), 20000), "children never registered");
    atomic_store(&sh->go[0], 1);
    atomic_store(&sh->go[1], 1);
    struct seen mine;
    memset(&mine, 0, sizeof(mine));
    int rc = wait_noted(a, 0, 0, 60000 * MS, &mine);
    EXPECT(rc >= 0, "parent: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(returned(0, 0) && returned(1, 0), "a child never returned");
    uint32_t bound = 1u << sh->slot[0] | 1u << sh->slot[1] | (parent_bound ? 1u << as : 0);
    uint32_t serial_slot = rc == VIGIL_SERIAL ? as : result(0, 0) == VIGIL_SERIAL ? sh->slot[0] : sh->slot[1];
    EXPECT((rc == VIGIL_SERIAL) + (result(0, 0) == VIGIL_SERIAL) + (result(1, 0) == VIGIL_SERIAL) == 1,
           "one VIGIL_SERIAL: parent %d, children %d %d", rc, result(0, 0), result(1, 0));
    const struct seen *all[3] = { &mine, &sh->seen[0][0], &sh->seen[1][0] };
    for (int i = 0; i < 3; i++) {
        const struct seen *s = all[i];
        EXPECT(s->kept == 1 && s->counted == bound && s->left_dead == 0 && s->left_absent == 0,
               "waiter %d read kept %u counted %#x dead %#x absent %#x, expected counted %#x", i, s->kept,
               s->counted, s->left_dead, s->left_absent, bound);
        EXPECT(s->unbound == (parent_bound ? 0u : 1u), "waiter %d: %u unbound", i, s->unbound);
        /* The serial's slot is named only when a bound handle got it. */
        bool serial_bound = parent_bound || rc != VIGIL_SERIAL;
        EXPECT(s->serial_slot == (serial_bound ? serial_slot + 1 : 0), "waiter %d: serial slot %u, expected %u", i,
               s->serial_slot, serial_bound ? serial_slot + 1 : 0);
    }
    vigil_barrier_round later;
    memset(&later, 0, sizeof(later));
    EXPECT_RC(vigil_barrier_round_info(a, 1, &later), VIGIL_EVACANT); /* not released */
    EXPECT(later.kept == 0, "an unreleased round kept");
    end(kid, 2);
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

static int test_everyone_reads_the_same_bound(void) { return everyone_reads_the_same(true); }
static int test_everyone_reads_the_same_unbound(void) { return everyone_reads_the_same(false); }

/* ---- left out ---------------------------------------------------------------- */

/* C registered and was killed before it arrived; once its heartbeat has
 * lapsed the round releases with A and B, C left out as dead. */
static int test_dead_peer_left_out(void)
{
    vigil_hb *hb;
    vigil_barrier *a = fresh_case("dead", &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    EXPECT_RC(vigil_barrier_bind(a, as), 0);
    pid_t kid[2] = { spawn_peer(0), spawn_peer(1) };
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->slot[0]) && atomic_load(&sh->slot[1]), 20000), "children never registered");
    uint32_t cs = sh->slot[1];
    uint64_t cgen = vigil_slot_gen(&hb->slots[cs]);
    pid_t cpid = kid[1];
    kill(kid[1], SIGKILL);
    EXPECT(vt_wait(kid[1], 20000) == 128 + SIGKILL, "C not killed");
    kid[1] = 0;
    atomic_store(&sh->go[0], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[0]), 20000), "B never arrived");
    vt_hb_tick_keep(hb, 4, 1u << as | 1u << sh->slot[0]); /* C lapses, A and B kept live */
    vigil_barrier_peer c[8], l[8];
    vigil_barrier_round info = { .counted_peers = c, .counted_cap = 8, .left_out_peers = l, .left_out_cap = 8 };
    int rc = vigil_barrier_wait_info(a, 0, 0, 60000 * MS, &info);
    EXPECT(rc >= 0, "A: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(info.kept && info.counted == 2 && info.left_out == 1, "kept %u counted %u left out %u", info.kept,
           info.counted, info.left_out);
    EXPECT(l[0].slot == cs && l[0].why == VIGIL_BARRIER_DEAD && l[0].gen == cgen && l[0].pid == (uint32_t)cpid,
           "left out: slot %u why %u gen %llu pid %u; C was slot %u gen %llu", l[0].slot, l[0].why,
           (unsigned long long)l[0].gen, l[0].pid, cs, (unsigned long long)cgen);
    EXPECT(mask_of(c, 2, VIGIL_BARRIER_COUNTED) == (1u << as | 1u << sh->slot[0]), "counted %#x",
           mask_of(c, 2, VIGIL_BARRIER_COUNTED));
    EXPECT(returned(0, 0) && sh->seen[0][0].left_dead == 1u << cs, "B read dead %#x", sh->seen[0][0].left_dead);
    end(kid, 2);
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

/* C arrives first, times out (VIGIL_ETIMEDOUT: withdrawn) and stays live;
 * A and B then release the round by a quorum of 2: C is left out as
 * absent, never counted. */
static int test_withdrawn_never_counted(void)
{
    vigil_hb *hb;
    vigil_barrier *a = fresh_case("wd", &hb);
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    EXPECT_RC(vigil_barrier_bind(a, as), 0);
    atomic_store(&sh->quorum, 2);
    atomic_store(&sh->mode[1], 1);
    pid_t kid[2] = { spawn_peer(0), spawn_peer(1) };
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->slot[0]) && atomic_load(&sh->slot[1]), 20000), "children never registered");
    atomic_store(&sh->go[1], 1);
    EXPECT(returned(1, 0), "C never returned");
    EXPECT(result(1, 0) == VIGIL_ETIMEDOUT, "C: %d, expected VIGIL_ETIMEDOUT", result(1, 0));
    atomic_store(&sh->go[0], 1);
    struct seen mine;
    memset(&mine, 0, sizeof(mine));
    int rc = wait_noted(a, 0, 2, 60000 * MS, &mine);
    EXPECT(rc >= 0 && returned(0, 0), "A: %d (%s)", rc, vigil_strerror(rc));
    uint32_t cs = sh->slot[1], two = 1u << as | 1u << sh->slot[0];
    const struct seen *all[2] = { &mine, &sh->seen[0][0] };
    for (int i = 0; i < 2; i++)
        EXPECT(all[i]->kept && all[i]->counted == two && all[i]->left_absent == 1u << cs && all[i]->left_dead == 0,
               "waiter %d: counted %#x absent %#x dead %#x; C is slot %u", i, all[i]->counted,
               all[i]->left_absent, all[i]->left_dead, cs);
    end(kid, 2);
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

/* ---- the judge killed --------------------------------------------------------- */

/* Fresh files TAG.hb and TAG.b, three children X, Y, Z: X and Y arrive
 * at round 0 and wait, then Z, armed to raise `sig` at `point` of its own
 * wait, is let go. */
static int z_judges_last(const char *tag, int sig, int point, vigil_hb **hb, vigil_barrier **a, pid_t kid[KIDS])
{
    *a = fresh_case(tag, hb);
    for (int i = 0; i < KIDS; i++)
        kid[i] = spawn_peer(i);
    EXPECT(VT_WAIT_FOR(sh->slot[0] + sh->slot[1] + sh->slot[2] == 3, 20000), "children never registered");
    atomic_store(&sh->go[0], 1);
    atomic_store(&sh->go[1], 1);
    EXPECT(VT_WAIT_FOR(atomic_load(&sh->arrived[0]) && atomic_load(&sh->arrived[1]), 20000),
           "X and Y never arrived");
    atomic_store(&sh->hook_sig, sig);
    atomic_store(&sh->hook_idx, 2);
    atomic_store(&sh->hook_at, point);
    atomic_store(&sh->go[2], 1);
    return 0;
}

/*
 * X and Y arrive and wait; Z arrives last, finds the round complete and
 * is killed at `point` of its judgement. The round's record is the
 * committing judgement's: Z's when it had committed (Z named as the
 * serial, and nobody else given VIGIL_SERIAL), else X's or Y's. A
 * waiter that woke and committed before Z's judgement got there leaves
 * Z unkilled: the case is tried again (a few microseconds' window).
 */
static int judge_killed(int point)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        vigil_hb *hb;
        vigil_barrier *a;
        pid_t kid[KIDS];
        if (z_judges_last("jk", SIGKILL, point, &hb, &a, kid))
            return 1;
        EXPECT(returned(0, 0) && returned(1, 0), "X or Y never returned");
        int zst = atomic_load(&sh->hook_fired) ? vt_wait(kid[2], 20000) : -1;
        if (zst != 128 + SIGKILL) {
            end(kid, KIDS);
            vigil_barrier_close(a);
            vigil_hb_close(hb);
            continue; /* Z was not the one judging: again */
        }
        kid[2] = 0;
        uint32_t all = 1u << sh->slot[0] | 1u << sh->slot[1] | 1u << sh->slot[2];
        int serials = (result(0, 0) == VIGIL_SERIAL) + (result(1, 0) == VIGIL_SERIAL);
        /* Z killed before its commit: a survivor committed. After it: Z
         * did. Killed having moved the state: Z, or a survivor whose
         * commit Z finished. */
        EXPECT(point == BP_MOVED ? serials <= 1 : serials == (point == BP_COMMITTED ? 0 : 1),
               "point %d: %d VIGIL_SERIALs among X and Y", point, serials);
        uint32_t serial = serials ? sh->slot[result(0, 0) == VIGIL_SERIAL ? 0 : 1] : sh->slot[2];
        for (int i = 0; i < 2; i++) {
            const struct seen *s = &sh->seen[i][0];
            EXPECT(s->kept && s->counted == all && s->left_dead == 0 && s->left_absent == 0,
                   "point %d, %c read kept %u counted %#x dead %#x absent %#x, expected %#x", point, "XY"[i],
                   s->kept, s->counted, s->left_dead, s->left_absent, all);
            EXPECT(s->serial_slot == serial + 1, "point %d: serial slot %u, expected %u", point, s->serial_slot,
                   serial + 1);
        }
        end(kid, KIDS);
        vigil_barrier_close(a);
        vigil_hb_close(hb);
        return 0;
    }
    EXPECT(false, "Z never judged first in 20 tries");
    return 1;
}

static int test_judge_killed_claiming(void) { return judge_killed(BP_PLACE_CLAIMED); }
static int test_judge_killed_recorded(void) { return judge_killed(BP_JUDGED); }
static int test_judge_killed_committed(void) { return judge_killed(BP_COMMITTED); }
static int test_judge_killed_moved(void) { return judge_killed(BP_MOVED); }

/* ---- a stale judge ------------------------------------------------------------ */

/*
 * Z stops itself at `point` of its judgement of round 0: having claimed
 * its place, or having checked the gate and not yet taken its ticket
 * (issue 25.8: resumed, it took the newest ticket and evicted a kept
 * record). X and Y release round 0, Z is aged out, and X and Y wait
 * rounds 1..12 (Z left out as dead), so every place has been taken
 * again. Z resumes: the records of the rounds still kept must be as they
 * were, and Z's own round 0 is no longer kept.
 */
static int stale_judge_changes_nothing(int point)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        vigil_hb *hb;
        vigil_barrier *a;
        pid_t kid[KIDS];
        if (z_judges_last("sj", SIGSTOP, point, &hb, &a, kid))
            return 1;
        int st;
        bool stopped = false;
        for (uint64_t dl = vt_now_ms() + 20000; vt_now_ms() < dl && !stopped;) {
            pid_t w = waitpid(kid[2], &st, WUNTRACED | WNOHANG);
            stopped = w == kid[2] && WIFSTOPPED(st);
            if (!stopped && atomic_load(&sh->seen[2][0].rc) != 0)
                break; /* Z returned: it was not the judge */
            vt_sleep_ms(1);
        }
        if (!stopped) {
            end(kid, KIDS);
            vigil_barrier_close(a);
            vigil_hb_close(hb);
            continue;
        }
        EXPECT(returned(0, 0) && returned(1, 0), "X or Y never returned from round 0");
        uint32_t xy = 1u << sh->slot[0] | 1u << sh->slot[1], zs = 1u << sh->slot[2];
        vt_hb_tick_keep(hb, 4, xy); /* Z lapses */
        atomic_store(&sh->go[0], ROUNDS);
        atomic_store(&sh->go[1], ROUNDS);
        EXPECT(returned(0, ROUNDS - 1) && returned(1, ROUNDS - 1), "X or Y never finished");
        for (int r = 1; r < ROUNDS; r++)
            for (int i = 0; i < 2; i++) {
                const struct seen *s = &sh->seen[i][r];
                EXPECT(s->kept && s->counted == xy && s->left_dead == zs,
                       "round %d, %c: kept %u counted %#x dead %#x", r, "XY"[i], s->kept, s->counted, s->left_dead);
            }
        /* The rounds still kept, before and after Z resumes. */
        vigil_barrier_peer before[ROUNDS][2][4];
        vigil_barrier_round binfo[ROUNDS];
        int kept = 0;
        for (int r = 0; r < ROUNDS; r++) {
            binfo[r] = (vigil_barrier_round){ .counted_peers = before[r][0], .counted_cap = 4,
                                              .left_out_peers = before[r][1], .left_out_cap = 4 };
            kept += vigil_barrier_round_info(a, (uint32_t)r, &binfo[r]) == 0;
        }
        EXPECT(kept >= 1 && binfo[0].kept == 0, "%d rounds kept, round 0 kept %u", kept, binfo[0].kept);
        kill(kid[2], SIGCONT);
        EXPECT(returned(2, 0), "Z never returned");
        EXPECT(result(2, 0) == 0 && sh->seen[2][0].kept == 0, "Z: %d, kept %u: its round is no longer kept",
               result(2, 0), sh->seen[2][0].kept);
        for (int r = 0; r < ROUNDS; r++) {
            vigil_barrier_peer after[2][4];
            vigil_barrier_round ainfo = { .counted_peers = after[0], .counted_cap = 4, .left_out_peers = after[1],
                                          .left_out_cap = 4 };
            int arc = vigil_barrier_round_info(a, (uint32_t)r, &ainfo);
            EXPECT((arc == 0) == (binfo[r].kept == 1), "round %d: kept %u before Z resumed, %d after", r,
                   binfo[r].kept, arc);
            if (arc != 0)
                continue;
            EXPECT(ainfo.counted == binfo[r].counted && ainfo.left_out == binfo[r].left_out &&
                       ainfo.serial_slot == binfo[r].serial_slot &&
                       same_peers(after[0], before[r][0], ainfo.counted) &&
                       same_peers(after[1], before[r][1], ainfo.left_out),
                   "round %d's record changed when the stale judge resumed", r);
        }
        end(kid, KIDS);
        vigil_barrier_close(a);
        vigil_hb_close(hb);
        return 0;
    }
    EXPECT(false, "Z never judged first in 20 tries");
    return 1;
}

static int test_stale_judge_changes_nothing(void) { return stale_judge_changes_nothing(BP_PLACE_CLAIMED); }
static int test_judge_stopped_before_ticket(void) { return stale_judge_changes_nothing(BP_TICKET); }

/* ---- without the 16-byte CAS ------------------------------------------------ */

/* A processor without cmpxchg16b (the handle says so): unbound waits still
 * release, and no round is kept; nothing traps. */
static int test_no_cas16_records_nothing(void)
{
    vigil_hb *hb;
    vigil_barrier *a = fresh_case("nc", &hb);
    a->cas16 = false;
    uint32_t as;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &as), 0);
    vigil_barrier_round info = { 0 };
    for (uint32_t r = 0; r < 3; r++) {
        EXPECT_RC(vigil_barrier_wait_info(a, r, 1, 1000 * MS, &info), VIGIL_SERIAL);
        EXPECT(info.kept == 0, "round %u kept without a record", r);
        EXPECT_RC(vigil_barrier_round_info(a, r, &info), VIGIL_EVACANT);
    }
    vigil_barrier_close(a);
    vigil_hb_close(hb);
    return 0;
}

int main(void)
{
    sh = vt_shared(sizeof(*sh));
    static const struct vt_case cases[] = {
        VT_CASE(test_everyone_reads_the_same_bound),
        VT_CASE(test_everyone_reads_the_same_unbound),
        VT_CASE(test_dead_peer_left_out),
        VT_CASE(test_withdrawn_never_counted),
        VT_CASE(test_judge_killed_claiming),
        VT_CASE(test_judge_killed_recorded),
        VT_CASE(test_judge_killed_committed),
        VT_CASE(test_judge_killed_moved),
        VT_CASE(test_stale_judge_changes_nothing),
        VT_CASE(test_judge_stopped_before_ticket),
        VT_CASE(test_no_cas16_records_nothing),
    };
    return vt_run(cases, sizeof(cases) / sizeof(cases[0]));
}
