/* SPDX-License-Identifier: MIT */
/*
 * Description: failover, leader election and probing on a 64-slot table,
 * against textbook baselines in one run:
 *
 *   failover_scan, nothing stale     vs one pthread_mutex over the table,
 *                                    and a mutex per slot
 *   failover_scan, 8 of 64 stale     the same, the 8 re-registered (and
 *                                    made stale) inside every iteration
 *   leader_elect, nothing changed    vs the mutex table's election
 *   leader_is                        vs the mutex table's check
 *   probe (alive self, dead pid)     vs a bare kill(pid, 0), and kill plus
 *                                    a read of /proc/<pid>/stat (what probe
 *                                    must do to see zombies and reuse)
 *   failover_scan, nothing stale,    the same, while another thread beats
 *     under beats                    flat out (beats take the mutex table's
 *                                    lock; vigil's beat is one store)
 *   failover_scan_probe, 64 live     per scan, for the record
 *
 * and the hardware's floor for a scan: 64 slots' two words loaded with no
 * atomics beyond plain loads, plus an uncontended lock/unlock pair.
 *
 * A second thread stays alive (blocked) for the whole run: glibc skips a
 * mutex's atomic instructions while a process has one thread, which would
 * flatter the baselines. Each figure is the best of REPS repetitions;
 * ratios are baseline / vigil, so above 1 means vigil is faster.
 */
#include "bench.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include <vigil/vigil.h>

#include "heartbeat_internal.h"

#define SLOTS 64
#define STALE 8
#define GRACE 5
#define REPS  9

/* A warm-up, then the best of REPS runs of `iters` calls, in ns per call. */
static double best_ns(void (*fn)(void *, long), void *arg, long iters)
{
    return bench_best_ns(fn, arg, iters, REPS);
}

/* ---- baseline: one mutex over a table of plain records ------------------- */

struct rec {
    uint32_t pid;
    uint32_t role;
    uint64_t last_seen_epoch;
    uint64_t in_flight;
};

struct mtable {
    pthread_mutex_t lock;
    uint64_t        epoch;
    uint64_t        term;
    uint64_t        leader; /* (pid << 32) | (slot + 1) */
    struct rec      slots[SLOTS];
};

static bool live_at(uint32_t pid, uint64_t seen, uint64_t epoch, uint64_t grace)
{
    int64_t age = (int64_t)(epoch - seen);
    return pid != 0 && (age <= 0 || (uint64_t)age <= grace);
}

__attribute__((noinline)) static int mt_scan(struct mtable *t, uint64_t grace, vigil_reclaim *out, uint32_t max)
{
    uint32_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < SLOTS && n < max; i++) {
        struct rec *r = &t->slots[i];
        if (r->pid == 0 || live_at(r->pid, r->last_seen_epoch, t->epoch, grace))
            continue;
        out[n++] = (vigil_reclaim){ .slot = i, .pid = r->pid, .in_flight = r->in_flight };
        memset(r, 0, sizeof(*r));
    }
    pthread_mutex_unlock(&t->lock);
    return (int)n;
}

__attribute__((noinline)) static int mt_register(struct mtable *t, uint32_t pid, uint32_t *slot)
{
    int rc = VIGIL_EFULL;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < SLOTS; i++) {
        struct rec *r = &t->slots[i];
        if (r->pid != 0)
            continue;
        *r = (struct rec){ .pid = pid, .last_seen_epoch = t->epoch };
        *slot = i;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

__attribute__((noinline)) static int mt_elect(struct mtable *t, uint64_t grace, vigil_leader *out)
{
    pthread_mutex_lock(&t->lock);
    uint32_t best = 0, bs = 0;
    for (uint32_t i = 0; i < SLOTS; i++) {
        struct rec *r = &t->slots[i];
        if (live_at(r->pid, r->last_seen_epoch, t->epoch, grace) && (!best || r->pid < best)) {
            best = r->pid;
            bs = i;
        }
    }
    if (!best) {
        pthread_mutex_unlock(&t->lock);
        return VIGIL_ENOPEERS;
    }
    uint64_t want = ((uint64_t)best << 32) | (bs + 1);
    bool changed = t->leader != want;
    if (changed) {
        t->leader = want;
        t->term++;
    }
    for (uint32_t i = 0; i < SLOTS; i++)
        if (t->slots[i].pid)
            t->slots[i].role = i == bs ? VIGIL_ROLE_COORDINATOR : VIGIL_ROLE_WORKER;
    *out = (vigil_leader){ .slot = bs, .pid = best, .term = t->term };
    pthread_mutex_unlock(&t->lock);
    return changed;
}

__attribute__((noinline)) static bool mt_leader_is(struct mtable *t, uint32_t slot, uint64_t grace)
{
    pthread_mutex_lock(&t->lock);
    struct rec *me = &t->slots[slot];
    bool ok = me->role == VIGIL_ROLE_COORDINATOR && live_at(me->pid, me->last_seen_epoch, t->epoch, grace);
    for (uint32_t i = 0; ok && i < SLOTS; i++) {
        struct rec *r = &t->slots[i];
        if (i != slot && live_at(r->pid, r->last_seen_epoch, t->epoch, grace) &&
            (r->pid < me->pid || (r->pid == me->pid && i < slot)))
            ok = false;
    }
    pthread_mutex_unlock(&t->lock);
    return ok;
}

/* ---- baseline: a mutex per slot ------------------------------------------ */

struct pslot {
    _Alignas(64) pthread_mutex_t lock;
    struct rec r;
};

struct ptable {
    pthread_mutex_t epoch_lock;
    uint64_t        epoch;
    struct pslot    slots[SLOTS];
};

__attribute__((noinline)) static int pt_scan(struct ptable *t, uint64_t grace, vigil_reclaim *out, uint32_t max)
{
    pthread_mutex_lock(&t->epoch_lock);
    uint64_t epoch = t->epoch;
    pthread_mutex_unlock(&t->epoch_lock);
    uint32_t n = 0;
    for (uint32_t i = 0; i < SLOTS && n < max; i++) {
        struct pslot *p = &t->slots[i];
        pthread_mutex_lock(&p->lock);
        if (p->r.pid != 0 && !live_at(p->r.pid, p->r.last_seen_epoch, epoch, grace)) {
            out[n++] = (vigil_reclaim){ .slot = i, .pid = p->r.pid, .in_flight = p->r.in_flight };
            memset(&p->r, 0, sizeof(p->r));
        }
        pthread_mutex_unlock(&p->lock);
    }
    return (int)n;
}

__attribute__((noinline)) static int pt_register(struct ptable *t, uint32_t pid, uint32_t *slot)
{
    pthread_mutex_lock(&t->epoch_lock);
    uint64_t epoch = t->epoch;
    pthread_mutex_unlock(&t->epoch_lock);
    for (uint32_t i = 0; i < SLOTS; i++) {
        struct pslot *p = &t->slots[i];
        pthread_mutex_lock(&p->lock);
        if (p->r.pid == 0) {
            p->r = (struct rec){ .pid = pid, .last_seen_epoch = epoch };
            pthread_mutex_unlock(&p->lock);
            *slot = i;
            return 0;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return VIGIL_EFULL;
}

/* ---- the timed bodies ----------------------------------------------------- */

struct ctx {
    vigil_hb      *hb;
    struct mtable *mt;
    struct ptable *pt;
    uint32_t       stale_slots[STALE];
    uint32_t       slot;
    uint32_t       dead_slot;
    uint32_t       dead_pid;
};

static void b_scan_none(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)vigil_failover_scan(c->hb, GRACE, out, SLOTS);
        BARRIER();
    }
}

static void b_mt_scan_none(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)mt_scan(c->mt, GRACE, out, SLOTS);
        BARRIER();
    }
}

static void b_pt_scan_none(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)pt_scan(c->pt, GRACE, out, SLOTS);
        BARRIER();
    }
}

/* The floor: every slot's pid and last_seen loaded (relaxed), the rule
 * applied, nothing written. */
static void b_floor_scan(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++) {
        uint64_t epoch = atomic_load_explicit(&c->hb->hdr->epoch, memory_order_acquire);
        uint32_t stale = 0;
        for (uint32_t s = 0; s < SLOTS; s++) {
            uint32_t pid = atomic_load_explicit(&c->hb->slots[s].pid, memory_order_relaxed);
            uint64_t seen = atomic_load_explicit(&c->hb->slots[s].last_seen_epoch, memory_order_relaxed);
            stale += pid != 0 && !vigil_hb_is_live_at(pid, seen, epoch, GRACE);
        }
        bench_sink += stale;
        BARRIER();
    }
}

/* A re-registration by hand, as register does it under the slot's SeqLock
 * but without stamping the start time (a /proc read that is register's
 * cost, not the scan's, and that the baselines do not pay): the slot comes
 * back occupied, with one bit in flight, and already stale. */
static void rearm_vigil(vigil_hb *hb, uint32_t s, uint32_t pid)
{
    struct vigil_hb_slot *sl = &hb->slots[s];
    uint32_t v = atomic_load_explicit(&sl->seq, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&sl->last_seen_epoch, 0, memory_order_relaxed);
    atomic_store_explicit(&sl->in_flight, UINT64_C(1) << s, memory_order_relaxed);
    atomic_store_explicit(&sl->pid, pid, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, v + 2, memory_order_release);
}

static void b_scan_stale(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        for (uint32_t s = SLOTS - STALE; s < SLOTS; s++)
            rearm_vigil(c->hb, s, 9000 + s);
        bench_sink += (uint64_t)vigil_failover_scan(c->hb, GRACE, out, SLOTS);
        BARRIER();
    }
}

static void b_mt_scan_stale(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        for (uint32_t s = SLOTS - STALE; s < SLOTS; s++) {
            pthread_mutex_lock(&c->mt->lock);
            c->mt->slots[s] = (struct rec){ .pid = 9000 + s, .in_flight = UINT64_C(1) << s };
            pthread_mutex_unlock(&c->mt->lock);
        }
        bench_sink += (uint64_t)mt_scan(c->mt, GRACE, out, SLOTS);
        BARRIER();
    }
}

static void b_pt_scan_stale(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++) {
        for (uint32_t s = SLOTS - STALE; s < SLOTS; s++) {
            pthread_mutex_lock(&c->pt->slots[s].lock);
            c->pt->slots[s].r = (struct rec){ .pid = 9000 + s, .in_flight = UINT64_C(1) << s };
            pthread_mutex_unlock(&c->pt->slots[s].lock);
        }
        bench_sink += (uint64_t)pt_scan(c->pt, GRACE, out, SLOTS);
        BARRIER();
    }
}

static void b_elect(void *a, long n)
{
    struct ctx *c = a;
    vigil_leader out;
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)vigil_leader_elect(c->hb, GRACE, &out) + out.term;
        BARRIER();
    }
}

static void b_mt_elect(void *a, long n)
{
    struct ctx *c = a;
    vigil_leader out;
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)mt_elect(c->mt, GRACE, &out) + out.term;
        BARRIER();
    }
}

static void b_leader_is(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++) {
        bench_sink += vigil_leader_is(c->hb, c->slot, GRACE);
        BARRIER();
    }
}

static void b_mt_leader_is(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++) {
        bench_sink += mt_leader_is(c->mt, c->slot, GRACE);
        BARRIER();
    }
}

static void b_probe_self(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++)
        bench_sink += (uint64_t)vigil_hb_probe(c->hb, c->slot);
}

static void b_probe_dead(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++)
        bench_sink += (uint64_t)vigil_hb_probe(c->hb, c->dead_slot);
}

static void b_kill_self(void *a, long n)
{
    (void)a;
    pid_t me = getpid();
    for (long i = 0; i < n; i++)
        bench_sink += (uint64_t)kill(me, 0);
}

static void b_kill_dead(void *a, long n)
{
    struct ctx *c = a;
    for (long i = 0; i < n; i++)
        bench_sink += (uint64_t)kill((pid_t)c->dead_pid, 0);
}

/* kill + one read of /proc/<pid>/stat: the least a probe that sees
 * zombies and reuse can do. */
static void b_kill_stat_self(void *a, long n)
{
    (void)a;
    pid_t me = getpid();
    char path[32], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)me);
    for (long i = 0; i < n; i++) {
        bench_sink += (uint64_t)kill(me, 0);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        bench_sink += (uint64_t)read(fd, buf, sizeof(buf));
        close(fd);
    }
}

static void b_scan_probe(void *a, long n)
{
    struct ctx *c = a;
    vigil_reclaim out[SLOTS];
    for (long i = 0; i < n; i++)
        bench_sink += (uint64_t)vigil_failover_scan_probe(c->hb, GRACE, out, SLOTS);
}

/* A worker thread beating one slot in a tight loop while the scan is
 * timed: the watchdog's real situation. The mutex table's beat takes the
 * table lock, so beats and scans serialise; vigil's beat is one store. */
__attribute__((noinline)) static void mt_beat(struct mtable *t, uint32_t slot)
{
    pthread_mutex_lock(&t->lock);
    t->slots[slot].last_seen_epoch = t->epoch;
    pthread_mutex_unlock(&t->lock);
}

struct beater {
    struct ctx     *c;
    bool            mutex;
    _Atomic int     stop;
    _Atomic int     running;
    _Atomic uint64_t beats;
};

static void *beater_main(void *arg)
{
    struct beater *b = arg;
    uint64_t n = 0;
    atomic_store(&b->running, 1);
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        if (b->mutex)
            mt_beat(b->c->mt, 1);
        else
            vigil_hb_beat(b->c->hb, 1);
        n++;
    }
    atomic_store(&b->beats, n);
    return NULL;
}

/* Times fn with a beater running; *beats_per_us gets the beater's rate. */
static double with_beater(void (*fn)(void *, long), struct ctx *c, long iters, bool mutex, double *beats_per_us)
{
    struct beater b = { .c = c, .mutex = mutex };
    pthread_t th;
    pthread_create(&th, NULL, beater_main, &b);
    while (!atomic_load(&b.running))
        ;
    uint64_t t0 = bench_now_ns();
    double ns = best_ns(fn, c, iters);
    uint64_t t1 = bench_now_ns();
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    *beats_per_us = (double)atomic_load(&b.beats) / ((double)(t1 - t0) / 1000.0);
    return ns;
}

int main(void)
{
    struct bench_idle idle; /* keeps glibc's mutexes honest */
    if (bench_idle_start(&idle, "bench_failover") != 0)
        return 1;

    const char *path = bench_path("failover.hb");
    vigil_hb *hb;
    int rc = vigil_hb_create(path, SLOTS, &hb);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, vigil_strerror(rc));
        return 1;
    }
    static struct mtable mt = { .lock = PTHREAD_MUTEX_INITIALIZER };
    static struct ptable pt = { .epoch_lock = PTHREAD_MUTEX_INITIALIZER };
    for (int i = 0; i < SLOTS; i++)
        pthread_mutex_init(&pt.slots[i].lock, NULL);

    /* 64 live slots at epoch 100: pid 1000 + i, and the caller's own pid
     * in slot 0 (for probe). */
    for (int i = 0; i < 100; i++)
        vigil_hb_tick(hb);
    mt.epoch = pt.epoch = 100;
    struct ctx c = { .hb = hb, .mt = &mt, .pt = &pt };
    for (uint32_t i = 0; i < SLOTS; i++) {
        uint32_t s, pid = i == 0 ? (uint32_t)getpid() : 100000 + i;
        vigil_hb_register(hb, pid, &s);
        mt_register(&mt, pid, &s);
        pt_register(&pt, pid, &s);
    }
    c.slot = 0;
    vigil_leader out;
    vigil_leader_elect(hb, GRACE, &out);
    mt_elect(&mt, GRACE, &out);
    c.slot = out.slot;

    printf("vigil failover bench: %d slots, grace %d, best of %d\n\n", SLOTS, GRACE, REPS);

    printf("failover_scan, nothing stale\n");
    double v_none = best_ns(b_scan_none, &c, 200000);
    double m_none = best_ns(b_mt_scan_none, &c, 200000);
    double p_none = best_ns(b_pt_scan_none, &c, 100000);
    double floor_scan = best_ns(b_floor_scan, &c, 200000);
    bench_row("vigil_failover_scan", v_none);
    bench_row("mutex table", m_none);
    bench_row("per-slot mutexes", p_none);
    bench_row("floor: 64 x (pid, last_seen) plain loads", floor_scan);
    bench_ratio("mutex table / vigil", m_none, v_none);
    bench_ratio("per-slot mutexes / vigil", p_none, v_none);
    bench_ratio("vigil / floor", v_none, floor_scan);

    printf("\nfailover_scan, nothing stale, while another thread beats slot 1 flat out\n");
    double v_bps, m_bps;
    double v_busy = with_beater(b_scan_none, &c, 100000, false, &v_bps);
    double m_busy = with_beater(b_mt_scan_none, &c, 100000, true, &m_bps);
    bench_row("vigil_failover_scan", v_busy);
    bench_row("mutex table", m_busy);
    printf("  %-44s %10.1f /us\n", "beats meanwhile, vigil", v_bps);
    printf("  %-44s %10.1f /us\n", "beats meanwhile, mutex table", m_bps);
    bench_ratio("mutex table / vigil, scan", m_busy, v_busy);
    bench_ratio("vigil / mutex table, beats", v_bps, m_bps); /* higher is better here */

    printf("\nfailover_scan, %d of %d stale (re-armed each iteration)\n", STALE, SLOTS);
    /* Slots 56..63 are the ones that go stale and come back. */
    double v_stale = best_ns(b_scan_stale, &c, 50000);
    double m_stale = best_ns(b_mt_scan_stale, &c, 50000);
    double p_stale = best_ns(b_pt_scan_stale, &c, 50000);
    bench_row("vigil (8 x re-arm + scan)", v_stale);
    bench_row("mutex table (8 x re-arm + scan)", m_stale);
    bench_row("per-slot mutexes (8 x re-arm + scan)", p_stale);
    bench_ratio("mutex table / vigil", m_stale, v_stale);
    bench_ratio("per-slot mutexes / vigil", p_stale, v_stale);
    for (uint32_t s = SLOTS - STALE; s < SLOTS; s++) {
        uint32_t got;
        vigil_hb_register(hb, 100000 + s, &got);
        mt_register(&mt, 100000 + s, &got);
    }

    printf("\nleader_elect, nothing changed; leader_is\n");
    vigil_leader_elect(hb, GRACE, &out);
    double v_elect = best_ns(b_elect, &c, 200000);
    double m_elect = best_ns(b_mt_elect, &c, 200000);
    double v_is = best_ns(b_leader_is, &c, 200000);
    double m_is = best_ns(b_mt_leader_is, &c, 200000);
    bench_row("vigil_leader_elect", v_elect);
    bench_row("mutex table elect", m_elect);
    bench_row("vigil_leader_is", v_is);
    bench_row("mutex table leader_is", m_is);
    bench_ratio("mutex table / vigil, elect", m_elect, v_elect);
    bench_ratio("mutex table / vigil, leader_is", m_is, v_is);

    /* A pid with no process: a child reaped just now. */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    uint32_t ds = SLOTS - 1;
    vigil_hb_unregister(hb, ds);
    vigil_hb_register(hb, (uint32_t)dead, &ds);
    c.dead_slot = ds;
    c.dead_pid = (uint32_t)dead;
    c.slot = 0; /* our own pid */

    printf("\nprobe, per call\n");
    double v_alive = best_ns(b_probe_self, &c, 20000);
    double v_dead = best_ns(b_probe_dead, &c, 20000);
    double k_self = best_ns(b_kill_self, &c, 20000);
    double k_dead = best_ns(b_kill_dead, &c, 20000);
    double ks_self = best_ns(b_kill_stat_self, &c, 20000);
    bench_row("vigil_hb_probe, alive (self)", v_alive);
    bench_row("vigil_hb_probe, dead pid", v_dead);
    bench_row("kill(self, 0)", k_self);
    bench_row("kill(dead, 0)", k_dead);
    bench_row("kill(self, 0) + read /proc/self/stat", ks_self);
    bench_ratio("kill + stat / vigil, alive", ks_self, v_alive);
    bench_ratio("kill / vigil, dead", k_dead, v_dead);

    printf("\nfailover_scan_probe, %d live slots, every one judged (kill + /proc)\n", SLOTS);
    vigil_hb *phb;
    if (vigil_hb_create(bench_path("probe.hb"), SLOTS, &phb) < 0)
        return 1;
    for (uint32_t i = 0; i < SLOTS; i++) {
        uint32_t s;
        vigil_hb_register(phb, (uint32_t)getpid(), &s);
    }
    struct ctx pc = { .hb = phb };
    double v_sp = best_ns(b_scan_probe, &pc, 200);
    vigil_hb_close(phb);
    bench_row("vigil_failover_scan_probe", v_sp);
    bench_ratio("scan_probe / scan", v_sp, v_none);

    vigil_hb_close(hb);
    bench_idle_stop(&idle);
    return 0;
}
