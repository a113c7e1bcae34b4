/* SPDX-License-Identifier: MIT */
/*
 * Description: a hostile peer. One process writes random bytes over a live
 * mapping of each kind of vigil file, its header included, while victim
 * processes call every operation on it with random arguments for a few
 * seconds of scribbling. A victim may get errors, never a crash, an access
 * outside the mapping (the sanitized builds run this too) or a hang in a
 * call the contract bounds: each victim must finish well inside its
 * bounded wait. (Truncating the file is the one thing a peer can do that
 * makes every process fault, SIGBUS, as with any shared mapping; the
 * scribbler never does it.)
 */
#include "testutil.h"

#include <fcntl.h>

enum { VICTIMS = 3, SECONDS = 3, CAP = 32, LEASE_CAP = 8 };

static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Writes random bytes at random places of the file's mapping until
 * killed: single bytes, aligned words and whole runs, header included. */
static _Noreturn void scribbler(const char *path, size_t size, unsigned seed, _Atomic int *going)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        _exit(3);
    unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        _exit(3);
    close(fd);
    for (unsigned i = 0;; i++) {
        unsigned r = next_rand(&seed);
        size_t at = next_rand(&seed) % size;
        switch (r % 4) {
        case 0:
            p[at] = (unsigned char)next_rand(&seed);
            break;
        case 1: { /* a whole aligned word: odd versions, huge counts, all ones */
            static const uint64_t words[] = { 0, 1, UINT64_MAX, UINT64_C(0x8000000000000000),
                                              UINT64_C(0xffffffff), UINT64_C(0x100000001) };
            uint64_t w = (r & 16) ? words[next_rand(&seed) % 6] : (uint64_t)next_rand(&seed) << 32 | next_rand(&seed);
            at &= ~(size_t)7;
            __atomic_store_n((uint64_t *)(p + at), w, __ATOMIC_RELAXED);
            break;
        }
        case 2: { /* a run */
            size_t n = 1 + next_rand(&seed) % 64;
            for (size_t k = 0; k < n && at + k < size; k++)
                p[at + k] = (unsigned char)next_rand(&seed);
            break;
        }
        default: /* the header, often: bounds must come from the opener's own copy */
            p[next_rand(&seed) % 64] = (unsigned char)next_rand(&seed);
            break;
        }
        if ((i & 255) == 0) {
            if (i == 256)
                atomic_fetch_add(going, 1);
            sched_yield();
        }
    }
}

static void heartbeat_calls(vigil_hb *hb, unsigned *s)
{
    uint32_t slot = next_rand(s) % (CAP + 2);
    uint64_t grace = next_rand(s) % 4 ? next_rand(s) % 8 : UINT64_MAX - next_rand(s) % 3;
    vigil_slot_info si;
    vigil_reclaim rec[8];
    vigil_leader l;
    uint32_t got;
    switch (next_rand(s) % 14) {
    case 0: if (vigil_hb_register(hb, next_rand(s) % 3 ? (uint32_t)getpid() : next_rand(s), &got) == 0)
                vigil_hb_unregister(hb, got);
            break;
    case 1: vigil_hb_unregister(hb, slot); break;
    case 2: vigil_hb_beat(hb, slot); break;
    case 3: vigil_hb_tick(hb); (void)vigil_hb_epoch(hb); break;
    case 4: vigil_hb_mark_in_flight(hb, slot, next_rand(s) % 66); break;
    case 5: vigil_hb_clear_in_flight(hb, slot, next_rand(s) % 66); break;
    case 6: vigil_hb_set_role(hb, slot, next_rand(s) % 3); break;
    case 7: vigil_hb_snapshot(hb, slot, &si); break;
    case 8: (void)vigil_hb_live_count(hb, grace); break;
    case 9: vigil_failover_scan(hb, grace, rec, 8); break;
    case 10: vigil_failover_scan_probe(hb, grace, rec, 8); break;
    case 11: vigil_leader_elect(hb, grace, &l); (void)vigil_leader_is(hb, slot, grace); break;
    case 12: vigil_leader_get(hb, &l); break;
    default: vigil_hb_probe(hb, slot); break;
    }
}

static void barrier_calls(vigil_barrier *b, const char *path, unsigned *s)
{
    uint32_t e = vigil_barrier_epoch(b) + (uint32_t)(next_rand(s) % 3) - 1;
    vigil_barrier_state st;
    switch (next_rand(s) % 6) {
    case 0: vigil_barrier_bind(b, next_rand(s) % (CAP + 2)); break;
    case 1: vigil_barrier_wait_timeout(b, e, 1000000u * (next_rand(s) % 3)); break;
    case 2: vigil_barrier_wait_quorum_timeout(b, e, next_rand(s) % 5, 1000000u); break;
    case 3: (void)vigil_barrier_live_peers(b); break;
    case 4: vigil_barrier_peek(path, &st); break;
    default: (void)vigil_barrier_epoch(b); break;
    }
}

static void lease_calls(vigil_leases *ls, vigil_lease *held, bool *have, unsigned *s)
{
    static const char *keys[] = { "a", "b", "a-longer-key", "" };
    vigil_lease_info info;
    int k = (int)(next_rand(s) % 4);
    switch (next_rand(s) % 6) {
    case 0:
        if (!have[k % 3])
            have[k % 3] = vigil_leases_acquire(ls, keys[k], "victim", 3 + next_rand(s) % 50, &held[k % 3]) == 0;
        break;
    case 1: if (have[k % 3]) vigil_leases_renew(ls, &held[k % 3]); break;
    case 2:
        if (have[k % 3]) {
            vigil_leases_release(ls, &held[k % 3]);
            have[k % 3] = false;
        }
        break;
    case 3: vigil_leases_entry(ls, next_rand(s) % (LEASE_CAP + 2), &info); break;
    case 4: (void)vigil_leases_capacity(ls); break;
    default: {
        vigil_lease l = have[k % 3] ? held[k % 3] : (vigil_lease){ .ttl_ms = 30 };
        vigil_lease_port port = vigil_leases_port(ls);
        vigil_keepalive *ka;
        if (vigil_keepalive_start(&port, &l, &ka) == 0) {
            sched_yield();
            (void)vigil_keepalive_lost(ka);
            vigil_keepalive_stop(ka);
        }
        break;
    }
    }
}

enum kind { HB, BARRIER, LEASES };

struct sync {
    _Atomic int ready; /* victims that opened their files */
    _Atomic int going; /* scribblers under way */
};

/* A victim: opens the files before the scribbling starts (open checks
 * them), then makes random calls for SECONDS once the scribbling is under
 * way, and exits 0. */
static _Noreturn void victim(enum kind kind, const char *hbp, const char *bp, const char *lsp, unsigned seed,
                             struct sync *sy, int scribblers)
{
    vigil_hb *hb = NULL;
    vigil_barrier *b = NULL;
    vigil_leases *ls = NULL;
    if (kind != LEASES && vigil_hb_open(hbp, 0, &hb) != 0)
        _exit(3);
    if (kind == BARRIER && vigil_barrier_open(bp, hb, 0, &b) != 0)
        _exit(3);
    if (kind == LEASES && vigil_leases_open(lsp, &ls) != 0)
        _exit(3);
    vigil_lease held[3];
    bool have[3] = { false, false, false };
    atomic_fetch_add(&sy->ready, 1);
    if (!VT_WAIT_FOR(atomic_load(&sy->going) == scribblers, 10000))
        _exit(4);
    uint64_t end = vt_now_ms() + SECONDS * 1000;
    for (unsigned i = 0; (i & 63) || vt_now_ms() < end; i++) {
        if (kind == HB)
            heartbeat_calls(hb, &seed);
        else if (kind == BARRIER)
            barrier_calls(b, bp, &seed);
        else
            lease_calls(ls, held, have, &seed);
    }
    _exit(0);
}

static int run(enum kind kind, const char *name)
{
    const char *hbp = vt_path("hostile.hb"), *bp = vt_path("hostile.barrier"), *lsp = vt_path("hostile.leases");
    unlink(hbp), unlink(bp), unlink(lsp);
    vigil_hb *hb = vt_hb_fresh_at(hbp, CAP);
    vigil_barrier *b = NULL;
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_barrier_create(bp, hb, 3, &b), 0);
    EXPECT_RC(vigil_leases_create(lsp, LEASE_CAP, &ls), 0);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    const char *target = kind == LEASES ? lsp : kind == BARRIER ? bp : hbp;
    size_t size = kind == LEASES ? 64 + LEASE_CAP * 256 : kind == BARRIER ? 64 + CAP * 8 : 64 + CAP * 64;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)kind << 24;

    struct sync *sy = vt_shared(sizeof(*sy));
    int scribblers = kind == BARRIER ? 2 : 1;
    pid_t v[VICTIMS], scrib[2] = { -1, -1 };
    for (int i = 0; i < VICTIMS; i++) {
        v[i] = fork();
        if (v[i] == 0)
            victim(kind, hbp, bp, lsp, seed + (unsigned)i * 7919u, sy, scribblers);
    }
    bool up = VT_WAIT_FOR(atomic_load(&sy->ready) == VICTIMS, 10000);
    scrib[0] = fork();
    if (scrib[0] == 0)
        scribbler(target, size, seed ^ 0x5a5a5a5au, &sy->going);
    if (kind == BARRIER) { /* the table the barrier reads is scribbled too */
        scrib[1] = fork();
        if (scrib[1] == 0)
            scribbler(hbp, 64 + CAP * 64, seed ^ 0xa5a5a5a5u, &sy->going);
    }
    int bad = 0;
    for (int i = 0; i < VICTIMS; i++) {
        int st = vt_wait(v[i], 60000);
        if (st != 0) {
            fprintf(stderr, "%s: victim %d ended with %d (-1: hung; >= 128: killed by signal %d) (seed %u)\n",
                    name, i, st, st >= 128 ? st - 128 : 0, seed);
            bad++;
        }
    }
    for (int i = 0; i < 2; i++)
        if (scrib[i] > 0) {
            kill(scrib[i], SIGKILL);
            waitpid(scrib[i], NULL, 0);
        }
    munmap(sy, sizeof(*sy));
    vigil_leases_close(ls);
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    EXPECT(up, "%s: victims did not open their files", name);
    EXPECT(bad == 0, "%s: %d of %d victims crashed or hung under a scribbling peer", name, bad, VICTIMS);
    return 0;
}

static int test_hostile_heartbeat(void) { return run(HB, "heartbeat"); }
static int test_hostile_barrier(void) { return run(BARRIER, "barrier"); }
static int test_hostile_leases(void) { return run(LEASES, "leases"); }

VT_MAIN(VT_CASE(test_hostile_heartbeat), VT_CASE(test_hostile_barrier), VT_CASE(test_hostile_leases))
