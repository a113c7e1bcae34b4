/* SPDX-License-Identifier: MIT */
/*
 * vigil demo: telling the story. The slot table at every tick, a line for
 * each thing that happens (read from the files and from the workers'
 * reports), and the summary that checks what the story claims.
 */
#include "demo.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

void demo_fmt_units(char *buf, size_t size, uint64_t bits)
{
    size_t n = 0;
    buf[n++] = '{';
    for (unsigned bit = 0; bit < 64 && n + 5 < size; bit++)
        if (bits >> bit & 1)
            n += (size_t)snprintf(buf + n, size - n, "%s%u", n > 1 ? "," : "", bit);
    snprintf(buf + n, size - n, "}");
}

int demo_worker_of_pid(const struct demo *d, uint32_t pid)
{
    for (unsigned i = 0; i < d->n; i++)
        if ((uint32_t)d->pid[i] == pid)
            return (int)i;
    return -1;
}

uint32_t demo_lowest_live_pid(const struct demo *d)
{
    uint64_t epoch = vigil_hb_epoch(d->hb);
    uint32_t lowest = 0;
    for (uint32_t s = 0; s < vigil_hb_capacity(d->hb); s++) {
        vigil_slot_info info;
        if (vigil_hb_snapshot(d->hb, s, &info) == 0 &&
            vigil_hb_is_live_at(info.pid, info.last_seen_epoch, epoch, DEMO_GRACE) &&
            (!lowest || info.pid < lowest))
            lowest = info.pid;
    }
    return lowest;
}

void demo_print_intro(const struct demo *d)
{
    printf("vigil demo: %u worker processes, a heartbeat table, a barrier and a lease store\n"
           "  in %s: demo.hb (%u slots), demo.barrier, demo.leases\n"
           "  the parent ticks the epoch every %u ms; a slot is stale after %u epochs without a beat\n"
           "  each phase a worker takes a unit (marks its in-flight bit), works %u ms, then waits\n"
           "  at the barrier; the unit is done when the round is released\n"
           "== 1. workers start\n",
           d->n, d->paths.dir, d->n, DEMO_TICK_MS, DEMO_GRACE, DEMO_WORK_MS);
    for (unsigned i = 0; i < d->n; i++)
        printf("  worker %u: pid %d, slot %u, units {%u,%u}\n", i, (int)d->pid[i],
               atomic_load(&d->box->w[i].slot), 2 * i, 2 * i + 1);
    printf("  watchdogs: the parent scans after every tick, and `vigil failover --json` (pid %d)\n"
           "  every %u ms\n"
           "  table, each tick: epoch, the barrier round gathering, the leader's term, then per\n"
           "  slot: s<slot> (* = coordinator) live/STALE/- and its units in flight\n",
           (int)d->wd_pid, DEMO_TICK_MS / 8);
}

void demo_print_table(struct demo *d, uint64_t epoch)
{
    vigil_leader ld;
    uint64_t term = vigil_leader_get(d->hb, &ld) == 0 ? ld.term : 0;
    printf("epoch %3" PRIu64 "  round %2u  term %" PRIu64 " |", epoch, vigil_barrier_epoch(d->b), term);
    uint32_t cap = vigil_hb_capacity(d->hb);
    for (uint32_t s = 0; s < cap; s++) {
        if (s && s % 4 == 0)
            printf("\n%28s|", "");
        char cell[128], units[80];
        vigil_slot_info info;
        int rc = vigil_hb_snapshot(d->hb, s, &info);
        if (rc == VIGIL_EVACANT) {
            snprintf(cell, sizeof(cell), "s%u -", s);
        } else if (rc < 0) {
            snprintf(cell, sizeof(cell), "s%u busy", s);
        } else {
            demo_fmt_units(units, sizeof(units), info.in_flight);
            bool live = vigil_hb_is_live_at(info.pid, info.last_seen_epoch, epoch, DEMO_GRACE);
            snprintf(cell, sizeof(cell), "s%u%s %s %s", s,
                     info.role == VIGIL_ROLE_COORDINATOR ? "*" : "", live ? "live" : "STALE", units);
        }
        printf(" %-15s|", cell);
    }
    putchar('\n');
}

void demo_add_reclaim(struct demo *d, const vigil_reclaim *r, const char *by, uint64_t epoch)
{
    if (d->nrec < sizeof(d->rec) / sizeof(d->rec[0]))
        d->rec[d->nrec++] = (struct demo_reclaim){ *r, by, epoch, false };
    char units[128];
    demo_fmt_units(units, sizeof(units), r->in_flight);
    int w = demo_worker_of_pid(d, r->pid);
    printf("  > %s reclaimed slot %u (pid %u, worker %d): units %s\n", by, r->slot, r->pid, w, units);
}

static void tell_leader(struct demo *d)
{
    vigil_leader ld;
    if (vigil_leader_get(d->hb, &ld) != 0)
        return;
    if (d->leader_known && ld.pid == d->leader.pid && ld.term == d->leader.term)
        return;
    bool first = !d->leader_known;
    d->leader_known = true;
    d->leader = ld;
    if (ld.pid == 0) {
        /* The record names a registration that has left its slot (the
         * workers winding down): there is no leader until an election. */
        printf("  > leader: none (the leader of term %" PRIu64 " has left; no election since)\n", ld.term);
        return;
    }
    uint32_t lowest = demo_lowest_live_pid(d);
    int w = demo_worker_of_pid(d, ld.pid);
    char who[32] = "not a worker";
    if (w >= 0)
        snprintf(who, sizeof(who), "worker %d", w);
    printf("  > leader: slot %u, pid %u (%s), term %" PRIu64 "%s\n", ld.slot, ld.pid, who, ld.term,
           ld.pid == lowest ? ", the lowest live pid" : "");
    if (first) {
        d->first_leader = ld;
        d->first_leader_ok = ld.pid == lowest;
    }
    if (d->stage >= STAGE_KILLED && ld.pid != d->victim_pid && ld.term > d->term_at_kill &&
        !d->new_leader_ok) {
        d->new_leader = ld;
        d->lowest_pid_after = lowest;
        d->new_leader_ok = ld.pid == lowest;
    }
}

static void tell_leases(struct demo *d)
{
    uint32_t busy = 0;
    for (unsigned i = 0; i < d->n; i++) {
        struct demo_worker *w = &d->box->w[i];
        busy += atomic_load(&w->lease_busy);
        uint64_t token = atomic_load(&w->lease_token);
        if (token <= d->token_told)
            continue;
        d->token_told = token;
        printf("  > worker %u (pid %d) holds lease \"%s\", fencing token %" PRIu64
               ": ttl %u ms, kept alive every %u ms\n",
               i, (int)d->pid[i], DEMO_LEASE_KEY, token, DEMO_LEASE_TTL, DEMO_LEASE_TTL / 3);
        if (d->stage >= STAGE_KILLED && (int)i != d->victim && token > d->victim_token &&
            d->taker < 0) {
            d->taker = (int)i;
            d->taker_token = token;
        }
    }
    if (d->stage >= STAGE_KILLED && !d->busy_told && busy > d->busy_at_kill) {
        d->busy_told = true;
        printf("  > the new leader asks for \"%s\": refused (busy), the dead leader's lease\n"
               "    has not run out yet\n", DEMO_LEASE_KEY);
    }
}

static void tell_victim(struct demo *d)
{
    if (d->stage < STAGE_KILLED)
        return;
    vigil_slot_info info;
    uint64_t epoch = vigil_hb_epoch(d->hb);
    if (!d->stale_told && vigil_hb_snapshot(d->hb, d->victim_slot, &info) == 0 &&
        info.pid == d->victim_pid &&
        !vigil_hb_is_live_at(info.pid, info.last_seen_epoch, epoch, DEMO_GRACE)) {
        d->stale_told = true;
        d->stale_epoch = epoch;
        printf("  > slot %u (pid %u) is stale: last beat at epoch %" PRIu64 ", now %" PRIu64
               ", grace %u\n", d->victim_slot, d->victim_pid, info.last_seen_epoch, epoch,
               DEMO_GRACE);
    }
    if (d->target < 0)
        return;
    struct demo_worker *t = &d->box->w[d->target];
    char units[128], held[128];
    if (!d->adopted_told && (atomic_load(&t->adopted) & d->handed) == d->handed) {
        d->adopted_told = true;
        uint64_t bits = 0;
        if (vigil_hb_snapshot(d->hb, atomic_load(&t->slot), &info) == 0)
            bits = info.in_flight;
        d->adopted_in_slot = (bits & d->handed) == d->handed;
        demo_fmt_units(units, sizeof(units), d->handed);
        demo_fmt_units(held, sizeof(held), bits);
        printf("  > worker %d adopted units %s: its slot %u now holds %s\n", d->target, units,
               atomic_load(&t->slot), held);
    }
    if (d->adopted_told && !d->finished_told &&
        (atomic_load(&t->adopted_done) & d->handed) == d->handed) {
        d->finished_told = true;
        demo_fmt_units(units, sizeof(units), d->handed);
        printf("  > worker %d finished the adopted units %s\n", d->target, units);
    }
}

static void tell_rounds(struct demo *d)
{
    uint32_t e = vigil_barrier_epoch(d->b);
    while ((int32_t)(e - d->round_told) > 0) {
        uint32_t live = vigil_barrier_live_peers(d->b);
        bool after = d->stage >= STAGE_KILLED && d->round_told >= d->kill_round;
        if (d->stage >= STAGE_STOPPING) /* the workers are leaving: no count to tell */
            printf("  > barrier: round %u released, the last one\n", d->round_told);
        else
            printf("  > barrier: round %u released, %u live peer%s%s\n", d->round_told, live,
                   live == 1 ? "" : "s", after ? " (without the dead one)" : "");
        if (after && d->round_told == d->kill_round)
            d->live_after = live;
        d->round_told++;
    }
}

void demo_tell_events(struct demo *d)
{
    for (unsigned i = 0; i < d->n; i++) {
        int32_t err = atomic_load(&d->box->w[i].err);
        if (err) {
            char what[160];
            snprintf(what, sizeof(what), "worker %u (pid %d): %s: %s", i, (int)d->pid[i],
                     demo_step_name(atomic_load(&d->box->w[i].err_where)), vigil_strerror(err));
            if (!d->failed) {
                d->failed = true;
                snprintf(d->why, sizeof(d->why), "%s", what);
                printf("  ! %s\n", what);
            }
        }
    }
    if (!d->box || !atomic_load(&d->box->go))
        return;
    tell_leader(d);
    tell_leases(d);
    tell_rounds(d);
    tell_victim(d);
}

/* ---- the summary ------------------------------------------------------------ */

static unsigned checks, failures;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    checks++;
    failures += !ok;
    fputs(ok ? "ok: " : "FAIL: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

int demo_summary(struct demo *d)
{
    char units[128];
    checks = failures = 0;
    printf("== summary\n");
    if (d->failed)
        check(false, "%s", d->why);

    bool distinct = true;
    for (unsigned i = 0; i < d->n; i++)
        for (unsigned j = 0; j < i; j++)
            if (atomic_load(&d->box->w[i].slot) == atomic_load(&d->box->w[j].slot) ||
                atomic_load(&d->box->w[i].slot) >= d->n)
                distinct = false;
    check(distinct, "%u workers registered, each in a slot of its own", d->n);
    check(d->first_leader_ok, "the first leader was the lowest live pid, %u (slot %u), term %" PRIu64,
          d->first_leader.pid, d->first_leader.slot, d->first_leader.term);
    check(d->rival_rc == VIGIL_EBUSY,
          "the leader's lease outlived its %u ms ttl through its keepalive: a rival was "
          "refused %" PRIu64 " ms in", DEMO_LEASE_TTL, d->rival_after_ms);
    unsigned serials = 0;
    for (unsigned i = 0; i < d->n; i++)
        serials += atomic_load(&d->box->w[i].serials);
    check(d->final_round > 0 && serials == d->final_round,
          "%u rounds released in all, each with exactly one serial caller (%u serials)",
          d->final_round, serials);
    if (d->victim < 0) {
        check(false, "the leader was never killed: nothing after the kill was checked");
    } else {
        demo_fmt_units(units, sizeof(units), d->victim_bits);
        check(d->victim >= 0 && d->victim_bits != 0 && d->victim_token != 0 &&
                  d->victim_pid == d->lowest_pid_then,
              "killed the leader (pid %u) with SIGKILL mid-phase %u, holding units %s and the lease",
              d->victim_pid, d->kill_phase, units);
        unsigned rounds = atomic_load(&d->box->w[d->victim].rounds);
        check(rounds == d->kill_phase && d->kill_phase >= 1,
              "rounds 0..%u were released with all %u peers, the dead one included",
              rounds ? rounds - 1 : 0, d->n);

        unsigned of_victim = 0;
        const struct demo_reclaim *rec = NULL;
        for (unsigned i = 0; i < d->nrec; i++)
            if (d->rec[i].r.pid == d->victim_pid && d->rec[i].r.slot == d->victim_slot)
                of_victim++, rec = &d->rec[i];
        check(rec && rec->exited && d->reclaim_us > 0 && d->vacated_epoch == d->kill_epoch,
              "its death was noticed at once: reclaimed as exited %" PRIu64 " us after the kill, at epoch %" PRIu64
              ", before any tick (the grace window is %u)", d->reclaim_us, d->vacated_epoch, DEMO_GRACE);
        check(of_victim == 1 && d->nrec == 1 && rec->r.in_flight == d->victim_bits,
              "its units %s were reclaimed exactly once (%u reclaim%s in all, by %s), with two "
              "watchdogs scanning", units, d->nrec, d->nrec == 1 ? "" : "s",
              rec ? rec->by : "nobody");
        check(d->target >= 0 && d->adopted_in_slot && d->finished_told,
              "the units went to worker %d, which marked them in its own slot and finished them",
              d->target);
        check(d->rounds_ok && d->live_after == d->n - 1,
              "the barrier released rounds %u..%u without the dead peer (%u live peer%s)",
              d->kill_round, d->final_round ? d->final_round - 1 : 0, d->live_after,
              d->live_after == 1 ? "" : "s");
        check(d->taker >= 0 && d->taker_token > d->victim_token,
              "the lease expired and worker %d took it over with fencing token %" PRIu64
              " > %" PRIu64, d->taker, d->taker_token, d->victim_token);
        check(d->new_leader_ok && d->new_leader.term > d->term_at_kill,
              "new leader: pid %u (slot %u), the lowest live pid, term %" PRIu64 " > %" PRIu64,
              d->new_leader.pid, d->new_leader.slot, d->new_leader.term, d->term_at_kill);
    }
    bool clean = true;
    for (unsigned i = 0; i < d->n; i++)
        if ((int)i != d->victim &&
            (d->status[i] != 0 || !atomic_load(&d->box->w[i].exited)))
            clean = false;
    check(clean, "every survivor released what it held, unregistered and exited 0");
    check(d->wd_status == 0, "the `vigil failover` watchdog ended on SIGTERM with exit 0 (got %d)",
          d->wd_status);
    check(d->dir_removed, "the temporary directory %s is gone", d->paths.dir);

    if (failures)
        printf("vigil demo: %u of %u checks FAILED\n", failures, checks);
    else
        printf("vigil demo: all %u checks passed in %.1f s\n", checks,
               (double)(tool_now_ms() - d->start_ms) / 1000.0);
    fflush(stdout);
    return failures ? EXIT_RUNTIME : EXIT_OK;
}
