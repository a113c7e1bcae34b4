/* SPDX-License-Identifier: MIT */
/*
 * vigil inspect, for the kinds that are not heartbeat tables: a barrier
 * file (read with vigil_barrier_peek, which needs no heartbeat table), a
 * lease store (its entries through vigil_leases_entry) and the reclaim
 * journal of failover --exec (its entries that are in use). Keys and
 * owners are whatever a peer wrote: they are printed quoted and escaped
 * (tool_esc), so a hostile key cannot write escape sequences to the
 * terminal.
 */
#include "vigil.h"

#include "journal_internal.h"
#include "proc_internal.h"

#include <inttypes.h>
#include <sys/sysmacros.h>

int tool_show_barrier(const char *path, bool json, FILE *out)
{
    vigil_barrier_state st;
    int rc = vigil_barrier_peek(path, &st);
    if (rc < 0)
        return tool_fail_file(path, rc, VIGIL_KIND_BARRIER, false);
    if (json) {
        fprintf(out, "{\"kind\": \"barrier\", \"capacity\": %u, \"epoch\": %u, \"arrived\": %u, "
                     "\"recorded\": %u, \"grace_epochs\": ",
                st.capacity, st.epoch, st.arrived, st.recorded);
        json_u64(out, st.grace_epochs);
        fprintf(out, ", \"sleepers\": %u}\n", st.sleepers);
        return 0;
    }
    fprintf(out,
            "%s: barrier file, capacity %u, grace %" PRIu64 " epochs\n"
            "round %u gathering: %u arrived (%u recorded by bound peers), %u asleep\n",
            tool_e(path), st.capacity, st.grace_epochs, st.epoch, st.arrived, st.recorded, st.sleepers);
    return 0;
}

static const char *lease_state(uint32_t st)
{
    switch (st) {
    case VIGIL_LEASE_VACANT:   return "vacant";
    case VIGIL_LEASE_HELD:     return "held";
    case VIGIL_LEASE_EXPIRED:  return "expired";
    case VIGIL_LEASE_RELEASED: return "released";
    case VIGIL_LEASE_CHANGING: return "changing";
    }
    return "unknown";
}

/* A key or owner in a human line: in double quotes, escaped (tool_esc,
 * with '"' as \"). */
static void quoted(FILE *out, const char *s, size_t maxlen)
{
    char buf[4 * 256 + 1];
    tool_esc_buf(buf, sizeof(buf), s, maxlen, true);
    fprintf(out, "\"%s\"", buf);
}

/* A signed counter: a number while a double holds it exactly, else a string. */
static void json_i64(FILE *out, int64_t v)
{
    const int64_t lim = INT64_C(1) << 53;
    if (v >= -lim && v <= lim)
        fprintf(out, "%" PRId64, v);
    else
        fprintf(out, "\"%" PRId64 "\"", v);
}

int tool_show_leases(const char *path, bool json, FILE *out)
{
    vigil_leases *ls;
    int rc = vigil_leases_open_readonly(path, &ls);
    if (rc < 0)
        return tool_fail_file(path, rc, VIGIL_KIND_LEASES, false);
    uint32_t cap = vigil_leases_capacity(ls);
    if (json)
        fprintf(out, "{\"kind\": \"leases\", \"capacity\": %u, \"leases\": [", cap);
    else
        fprintf(out, "%s: lease store, capacity %u\n", tool_e(path), cap);
    unsigned shown = 0, held = 0;
    for (uint32_t i = 0; i < cap; i++) {
        vigil_lease_info e;
        rc = vigil_leases_entry(ls, i, &e);
        if (rc == VIGIL_EVACANT || (rc < 0 && rc != VIGIL_EBUSY))
            continue;
        held += e.state == VIGIL_LEASE_HELD;
        if (json) {
            fprintf(out, "%s\n  {\"entry\": %u, \"key\": ", shown ? "," : "", i);
            json_str(out, e.key, sizeof(e.key));
            fputs(", \"owner\": ", out);
            json_str(out, e.owner, sizeof(e.owner));
            fputs(", \"token\": ", out);
            json_u64(out, e.token);
            fputs(", \"ttl_ms\": ", out);
            json_u64(out, e.ttl_ms);
            fputs(", \"expires_in_ms\": ", out);
            json_i64(out, e.expires_in_ms);
            fprintf(out, ", \"state\": \"%s\", \"pid\": %u}", lease_state(e.state), e.pid);
        } else {
            if (!shown)
                fputs(" entry  state            token    ttl_ms  expires_in      pid  key, owner\n",
                      out);
            fprintf(out, "%6u  %-9s %12" PRIu64 " %9" PRIu64 " %8" PRId64 "ms %8u  ", i,
                    lease_state(e.state), e.token, e.ttl_ms, e.expires_in_ms, e.pid);
            quoted(out, e.key, sizeof(e.key));
            fputs(", ", out);
            quoted(out, e.owner, sizeof(e.owner));
            fputc('\n', out);
        }
        shown++;
    }
    if (json)
        fputs(shown ? "\n]}\n" : "]}\n", out);
    else
        fprintf(out, "leases: %u held, %u other entries in use, %u vacant\n", held, shown - held,
                cap - shown);
    vigil_leases_close(ls);
    return 0;
}

static const char *const journal_states[] = { "free", "claiming", "pending", "running", "done" };

int tool_show_journal(const char *path, bool json, FILE *out)
{
    vigil_journal *j;
    int rc = vigil_journal_open_readonly(path, &j);
    if (rc < 0)
        return tool_fail_file(path, rc, VIGIL_KIND_JOURNAL, false);
    /* Relaxed: a look. */
    uint64_t last = atomic_load_explicit(&j->hdr->last_ticket, memory_order_relaxed);
    uint64_t rw, rs;
    bool held = vigil_pair_read(&j->hdr->run_word, &rw, &rs) && (rs & 1u);
    uint32_t counts[5];
    vigil_journal_counts(j, counts);
    if (json) {
        fprintf(out, "{\"kind\": \"journal\", \"capacity\": %u, \"last_ticket\": ", j->capacity);
        json_u64(out, last);
        fprintf(out, ", \"running_pid\": %u, \"table_capacity\": %u, \"table_device\": \"%u:%u\", \"table_inode\": ",
                held ? vigil_lock_pid(rw) : 0, j->hdr->table_capacity, major((dev_t)j->hdr->table_dev),
                minor((dev_t)j->hdr->table_dev));
        json_u64(out, j->hdr->table_ino);
        fputs(", \"entries\": [", out);
    } else {
        fprintf(out, "%s: reclaim journal, capacity %u, last ticket %" PRIu64 "\n", path, j->capacity, last);
        fprintf(out, "of the table of %u slots at device %u:%u inode %" PRIu64 "\n", j->hdr->table_capacity,
                major((dev_t)j->hdr->table_dev), minor((dev_t)j->hdr->table_dev), j->hdr->table_ino);
        fprintf(out, "%u pending, %u running%s, %u done (not yet said), %u being written\n", counts[VJ_PENDING],
                counts[VJ_RUNNING], held ? "" : " (run lock free)", counts[VJ_DONE], counts[VJ_CLAIMING]);
        if (held) {
            char ns[128];
            tool_lock_ns(rw, ns, sizeof(ns));
            fprintf(out, "run lock held by pid %u (a guardian of failover --exec) in pid namespace %s\n",
                    vigil_lock_pid(rw), ns);
        }
    }
    unsigned shown = 0;
    for (uint32_t i = 0; i < j->capacity; i++) {
        struct vigil_journal_rec r;
        if (vigil_journal_read(j, i, &r) != 0 || r.state == VJ_FREE)
            continue;
        const char *state = r.state <= VJ_DONE ? journal_states[r.state] : "unknown";
        const char *why = r.why == VIGIL_RECLAIM_EXITED ? "exited" : "stale";
        if (json) {
            fprintf(out, "%s\n  {\"ticket\": ", shown ? "," : "");
            json_u64(out, r.ticket);
            fprintf(out, ", \"state\": \"%s\", \"slot\": %u, \"pid\": %u, \"in_flight\": ", state, r.slot, r.pid);
            json_hex(out, r.in_flight);
            fprintf(out, ", \"reason\": \"%s\", \"epoch\": ", why);
            json_u64(out, r.epoch);
            fprintf(out, ", \"owner_pid\": %u, \"outcome\": %u}", vigil_lock_pid(r.owner), r.outcome);
        } else {
            fprintf(out, "  ticket %" PRIu64 " %-8s slot %u pid %u (%s) in flight 0x%" PRIx64 " epoch %" PRIu64,
                    r.ticket, state, r.slot, r.pid, why, r.in_flight, r.epoch);
            if (r.owner)
                fprintf(out, ", by pid %u", vigil_lock_pid(r.owner));
            fputc('\n', out);
        }
        shown++;
    }
    if (json)
        fputs(shown ? "\n]}\n" : "]}\n", out);
    vigil_journal_close(j);
    return 0;
}
