/* SPDX-License-Identifier: MIT */
/*
 * Description: vigil_barrier_start, the safe start of a group (issue 22).
 * Processes that register and wait from round 0 at once can see early
 * rounds released before the whole group exists (a peer not yet
 * registered is not live) and then count rounds apart. With the start,
 * every member gets the same first round, and every later round waits for
 * all of them:
 *
 * - members that start at different times: each is forked only once the
 *   one before it has arrived at the start (the test decides the order,
 *   never a sleep), on a barrier file that is already past round 0;
 *   each counts its arrival at round r before waiting, and on release
 *   finds every member's arrival counted; one VIGIL_SERIAL per round;
 * - a member that joins a group already under way (more callers than
 *   participants) gets the round the group is at, and stays in step;
 * - too few members: VIGIL_ETIMEDOUT, the arrival withdrawn, nothing
 *   written; and the argument checks.
 *
 * The first two again with the start in slices (vigil_barrier_start_slice,
 * the bindings' start): slices of 1 ms, the arrival kept between them.
 */
#include "testutil.h"

#include "barrier_internal.h"

#define SEC 1000000000ull
#define MS  1000000ull

enum { GROUP = 4, ROUNDS = 200, BASE = 7 };

struct counts {
    _Atomic int arrived[BASE + ROUNDS + 2];
    _Atomic int serial[BASE + ROUNDS + 2];
    _Atomic int early;       /* releases that found a member missing */
    _Atomic int first_early;
    _Atomic uint32_t first[GROUP + 1];
    _Atomic int start_serial;
    _Atomic int go;          /* the late joiner may come */
};

static uint32_t peek_arrived(const char *bp)
{
    vigil_barrier_state st = { 0 };
    vigil_barrier_peek(bp, &st);
    return st.arrived;
}

static bool sliced; /* members start with vigil_barrier_start_slice */

/* vigil_barrier_start, or the same in slices of 1 ms up to timeout_ns. */
static int start(vigil_barrier *b, uint32_t participants, uint64_t timeout_ns, uint32_t *first)
{
    if (!sliced)
        return vigil_barrier_start(b, participants, timeout_ns, first);
    int arrived = 0;
    uint32_t round = 0;
    for (uint64_t spent = 0;; spent += MS) {
        int rc = vigil_barrier_start_slice(b, participants, MS, &arrived, &round);
        if (rc != VIGIL_ETIMEDOUT || spent >= timeout_ns) {
            if (rc >= 0)
                *first = round;
            else if (arrived)
                (void)vigil_barrier_withdraw(b, round, &arrived);
            return rc;
        }
    }
}

static _Noreturn void member(int idx, const char *hbp, const char *bp, struct counts *c, uint32_t rounds)
{
    vigil_hb *hb;
    vigil_barrier *b;
    uint32_t slot, first;
    if (vigil_hb_open(hbp, 0, &hb) < 0 || vigil_barrier_open(bp, hb, 0, &b) < 0 ||
        vigil_hb_register(hb, (uint32_t)getpid(), &slot) < 0 || vigil_barrier_bind(b, slot) < 0)
        _exit(3);
    int rc = start(b, GROUP, 60 * SEC, &first);
    if (rc < 0)
        _exit(4);
    atomic_fetch_add(&c->start_serial, rc == VIGIL_SERIAL);
    if (first - 1 < BASE + ROUNDS + 2)
        atomic_fetch_add(&c->serial[first - 1], rc == VIGIL_SERIAL); /* the start round's */
    atomic_store(&c->first[idx], first);
    for (uint32_t r = first; r < first + rounds && r < BASE + ROUNDS + 2; r++) {
        atomic_fetch_add(&c->arrived[r], 1);
        rc = vigil_barrier_wait(b, r);
        if (rc < 0)
            _exit(5);
        atomic_fetch_add(&c->serial[r], rc == VIGIL_SERIAL);
        if (atomic_load(&c->arrived[r]) < GROUP && atomic_fetch_add(&c->early, 1) == 0)
            atomic_store(&c->first_early, (int)r);
        if (idx == 0 && r == first + rounds / 2 && rounds < ROUNDS) {
            /* Halfway: the late joiner comes, and the group, held at
             * the next round for want of member 0, waits for it. Member
             * 0 comes only once the joiner's start stands at that round
             * beside the three others' arrivals (or the round went on
             * without member 0): a start that released on the quorum
             * alone releases it then, every time (make mutate:
             * barrier_start_quorum_only). */
            atomic_store(&c->go, 1);
            vigil_barrier_state st;
            if (!VT_WAIT_FOR(vigil_barrier_peek(bp, &st) == 0 && (st.epoch != r + 1 || st.recorded >= GROUP), 60000))
                _exit(6);
        }
    }
    vigil_hb_unregister(hb, slot);
    _exit(0);
}

static int finish(pid_t *kids, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = vt_wait(kids[i], 120000);
        if (st != 0) {
            fprintf(stderr, "member %d ended with %d (3 open, 4 start, 5 wait, 6 no late joiner; -1 hung)\n", i, st);
            bad++;
        }
    }
    return bad;
}

/* A barrier whose file is past round 0, as one reused across runs is. */
static vigil_barrier *fresh(const char *hbp, const char *bp, vigil_hb **hb)
{
    *hb = vt_hb_fresh_at(hbp, 16);
    vigil_barrier *b;
    if (vigil_barrier_create(bp, *hb, 5, &b) < 0)
        exit(2);
    for (int i = 0; i < BASE; i++)
        if (vigil_barrier_wait_quorum(b, (uint32_t)i, 1) < 0)
            exit(2);
    return b;
}

static int test_start_members_at_different_times(void)
{
    const char *hbp = vt_path(sliced ? "sstart.hb" : "start.hb"), *bp = vt_path(sliced ? "sstart.barrier" : "start.barrier");
    vigil_hb *hb;
    vigil_barrier *b = fresh(hbp, bp, &hb);
    struct counts *c = vt_shared(sizeof(*c));
    pid_t kids[GROUP];
    for (int i = 0; i < GROUP; i++) {
        /* Member i comes only once the i before it wait at the start. */
        EXPECT(VT_WAIT_FOR(peek_arrived(bp) == (uint32_t)i, 20000), "members before %d never arrived", i);
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] == 0)
            member(i, hbp, bp, c, ROUNDS);
    }
    EXPECT(finish(kids, GROUP) == 0, "a member failed");
    for (int i = 1; i < GROUP; i++)
        EXPECT(atomic_load(&c->first[i]) == atomic_load(&c->first[0]), "member %d starts at round %u, member 0 at %u",
               i, atomic_load(&c->first[i]), atomic_load(&c->first[0]));
    EXPECT(atomic_load(&c->first[0]) == BASE + 1, "the first round is %u, the start was round %d",
           atomic_load(&c->first[0]), BASE);
    EXPECT(atomic_load(&c->start_serial) == 1, "%d VIGIL_SERIALs for the start round", atomic_load(&c->start_serial));
    EXPECT(atomic_load(&c->early) == 0, "%d releases found a member missing, the first at round %d",
           atomic_load(&c->early), atomic_load(&c->first_early));
    for (uint32_t r = BASE + 1; r < BASE + 1 + ROUNDS; r++)
        EXPECT(atomic_load(&c->serial[r]) == 1, "round %u had %d VIGIL_SERIALs", r, atomic_load(&c->serial[r]));
    EXPECT(vigil_barrier_epoch(b) == BASE + 1 + ROUNDS, "expected the barrier at round %d, found %u",
           BASE + 1 + ROUNDS, vigil_barrier_epoch(b));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* A fifth caller with participants 4 joins halfway through (the group
 * held at round X until its start stands at X): it gets X + 1, the round the
 * group goes on to, and from there all five meet every round. */
static int test_start_late_joiner_in_step(void)
{
    const char *hbp = vt_path(sliced ? "slate.hb" : "late.hb"), *bp = vt_path(sliced ? "slate.barrier" : "late.barrier");
    vigil_hb *hb;
    vigil_barrier *b = fresh(hbp, bp, &hb);
    struct counts *c = vt_shared(sizeof(*c));
    enum { R = 40 };
    pid_t kids[GROUP + 1];
    for (int i = 0; i < GROUP; i++) {
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] == 0)
            member(i, hbp, bp, c, R);
    }
    EXPECT(VT_WAIT_FOR(atomic_load(&c->go), 60000), "the group never got halfway");
    /* The joiner comes once the three others stand at the held round, so
     * its start judges that round at its arrival: the all-live rule waits
     * for member 0, the quorum alone (4 arrivals) would release it. */
    vigil_barrier_state st;
    EXPECT_RC(vigil_barrier_peek(bp, &st), 0);
    uint32_t held = st.epoch;
    EXPECT(VT_WAIT_FOR(vigil_barrier_peek(bp, &st) == 0 && st.epoch == held && st.recorded >= GROUP - 1, 60000),
           "the three others never stood at round %u (epoch %u, recorded %u)", held, st.epoch, st.recorded);
    fflush(NULL);
    kids[GROUP] = fork();
    if (kids[GROUP] == 0)
        member(GROUP, hbp, bp, c, 8);
    EXPECT(finish(kids, GROUP + 1) == 0, "a member failed");
    uint32_t late = atomic_load(&c->first[GROUP]), first = atomic_load(&c->first[0]);
    EXPECT(late == first + R / 2 + 2, "the late joiner starts at round %u; the group was held at round %u", late,
           first + R / 2 + 1);
    for (uint32_t r = first; r < first + R; r++)
        EXPECT(atomic_load(&c->serial[r]) == 1, "round %u had %d VIGIL_SERIALs", r, atomic_load(&c->serial[r]));
    EXPECT(atomic_load(&c->early) == 0, "%d releases found a member missing", atomic_load(&c->early));
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

static int test_start_slices_members_at_different_times(void)
{
    sliced = true;
    int rc = test_start_members_at_different_times();
    sliced = false;
    return rc;
}

static int test_start_slices_late_joiner_in_step(void)
{
    sliced = true;
    int rc = test_start_late_joiner_in_step();
    sliced = false;
    return rc;
}

static int test_start_too_few_and_args(void)
{
    const char *hbp = vt_path("few.hb"), *bp = vt_path("few.barrier");
    vigil_hb *hb;
    vigil_barrier *b = fresh(hbp, bp, &hb);
    uint32_t slot, first = 12345;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &slot), 0);
    EXPECT_RC(vigil_barrier_bind(b, slot), 0);
    EXPECT_RC(vigil_barrier_start(b, 2, 20 * MS, &first), VIGIL_ETIMEDOUT);
    EXPECT(first == 12345, "first_round written on a timeout: %u", first);
    vigil_barrier_state st;
    EXPECT_RC(vigil_barrier_peek(bp, &st), 0);
    EXPECT(st.arrived == 0 && st.epoch == BASE, "after the timeout: arrived %u epoch %u", st.arrived, st.epoch);
    EXPECT_RC(vigil_barrier_start(b, 0, 0, &first), VIGIL_ERANGE);
    EXPECT_RC(vigil_barrier_start(NULL, 1, 0, &first), -EINVAL);
    EXPECT_RC(vigil_barrier_start(b, 1, 0, NULL), -EINVAL);
    /* Alone and enough: the caller releases the start and gets the next. */
    EXPECT_RC(vigil_barrier_start(b, 1, 0, &first), VIGIL_SERIAL);
    EXPECT(first == BASE + 1, "first %u", first);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

/* The round the caller read passes before its arrival is in it (the
 * test releases it from a hook, between the read and the wait): that is
 * no start; the caller tries the round the barrier is at now. */
static vigil_barrier *other;
static uint32_t other_epoch;

static void release_under_start(int point)
{
    if (point != BP_START_READ || !other)
        return;
    vigil_barrier *o = other;
    other = NULL; /* once */
    (void)vigil_barrier_wait_quorum(o, other_epoch, 1);
}

static int test_start_round_passed_meanwhile(void)
{
    const char *hbp = vt_path("pass.hb"), *bp = vt_path("pass.barrier");
    vigil_hb *hb;
    vigil_barrier *b = fresh(hbp, bp, &hb), *o;
    EXPECT_RC(vigil_barrier_open(bp, hb, 0, &o), 0);
    other = o;
    other_epoch = vigil_barrier_epoch(b);
    vigil_barrier_hook = release_under_start;
    uint32_t first = 0;
    int rc = vigil_barrier_start(b, 1, 5 * SEC, &first);
    vigil_barrier_hook = NULL;
    EXPECT(rc == VIGIL_SERIAL, "start: %d (%s)", rc, vigil_strerror(rc));
    EXPECT(first == other_epoch + 2 && vigil_barrier_epoch(b) == other_epoch + 2,
           "the start read round %u, which passed before it arrived: expected it to start at round %u, got %u "
           "(barrier at %u)", other_epoch, other_epoch + 2, first, vigil_barrier_epoch(b));
    vigil_barrier_close(o);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}

VT_MAIN(VT_CASE(test_start_members_at_different_times), VT_CASE(test_start_late_joiner_in_step),
        VT_CASE(test_start_slices_members_at_different_times), VT_CASE(test_start_slices_late_joiner_in_step),
        VT_CASE(test_start_too_few_and_args), VT_CASE(test_start_round_passed_meanwhile))
