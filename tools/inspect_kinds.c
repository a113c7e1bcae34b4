/* SPDX-License-Identifier: MIT */
/*
 * vigil inspect, for the two kinds that are not heartbeat tables: a barrier
 * file (read with vigil_barrier_peek, which needs no heartbeat table) and a
 * lease store (its entries through vigil_leases_entry). Keys and owners are
 * whatever a peer wrote: they are printed quoted and escaped (tool_esc),
 * so a hostile key cannot write escape sequences to the terminal.
 */
#include "vigil.h"

#include <inttypes.h>

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
