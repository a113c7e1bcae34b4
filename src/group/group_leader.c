/* SPDX-License-Identifier: MIT */
/*
 * vigil_group_leader_wait: a wait for the group's leader to change from
 * the one a caller knows (its term; 0 for none).
 *
 * The leader is the live member with the lowest join revision (group.c),
 * so while a leader of term T lives nobody else can lead: a member that
 * joins later has a higher revision. Its leadership ends only when its
 * key members/<lease hex> goes (left, died, lease revoked or lapsed). So
 * the wait reads the leader (the lowest key under members/, and the
 * revision of the reading), and when it is still T watches that one key
 * from the revision after the reading for its deletion; when there is no
 * leader (T = 0), it watches members/ for the first key made. Any event,
 * the stream's end, or PROBE_MS passing sends it back to read: a change
 * is never inferred from the stream alone, only read, so a stream on a
 * member that lags or froze costs at most PROBE_MS (the reading goes
 * through the handle, which moves to an endpoint that answers). Errors
 * that an outage makes are waited out, backing off, until the deadline.
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define PROBE_MS    2000
#define BACKOFF_MAX 1000u
#define EVENTS      16

/* The leader now: 1 and *out with its key (members/<hex>), 0 none, or an
 * error; *rev the reading's revision. */
static int read_leader(vigil_etcd *e, const char *prefix, vigil_group_member_info *out, char *key, int64_t *rev)
{
    struct gtxn t;
    struct greply r;
    struct gkv g;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, prefix, G_PREFIX | G_BY_CREATE, 1);
    int rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    *rev = r.rev;
    rc = greply_first(&r, 0, &g);
    greply_free(&r);
    if (rc <= 0)
        return rc;
    size_t plen = strlen(prefix);
    if (strncmp(g.key, prefix, plen) != 0 || strlen(g.key + plen) >= 17) {
        gkv_free(&g);
        return -EPROTO;
    }
    gmember_parse(&g, g.key + plen, out);
    snprintf(key, GKEY_MAX, "%s", g.key);
    gkv_free(&g);
    return 1;
}

static void pause_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Does an event of the stream say the leader may have changed? A
 * deletion of the leader's key; with no leader, a key made. */
static bool news(const struct gevent *ev, int n, bool have_leader)
{
    for (int i = 0; i < n; i++)
        if (have_leader ? ev[i].del : !ev[i].del && ev[i].kv.create == ev[i].kv.mod)
            return true;
    return false;
}

int vigil_group_leader_wait(vigil_etcd *e, const char *group, uint64_t term, uint64_t timeout_ns,
                            vigil_group_member_info *out)
{
    vigil_etcd__why("%s", "");
    int rc;
    char prefix[GKEY_MAX], key[GKEY_MAX], watched[GKEY_MAX] = "";
    if (!e || !out)
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0 || (rc = gkey(prefix, group, "members/")) < 0)
        return rc;
    uint64_t start = gnow_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    int64_t wall = vigil_etcd__wall_ns();
    unsigned backoff = 0;
    unsigned ended = 0; /* the pause after a stream that ended without news, as group_watch.c's */
    struct gstream *s = NULL;
    struct gevent ev[EVENTS];
    for (;;) {
        vigil_group_member_info now;
        int64_t rev = 0;
        int found = read_leader(e, prefix, &now, key, &rev);
        if (found >= 0) {
            uint64_t t = found ? now.revision : 0;
            if (t != term) {
                gstream_close(s);
                if (!found)
                    return VIGIL_ENOPEERS;
                *out = now;
                return 0;
            }
            backoff = 0;
        } else if (!vigil_etcd__transient(found)) {
            gstream_close(s);
            return found;
        }
        uint64_t at = gnow_ns();
        if (at >= deadline) {
            gstream_close(s);
            vigil_etcd__why_wait(e, wall); /* the trouble it met, if any */
            return VIGIL_ETIMEDOUT;
        }
        if (found < 0) { /* etcd unreachable: again, backing off */
            gstream_close(s);
            s = NULL;
            backoff = backoff ? (backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2) : 50;
            uint64_t pause = (uint64_t)backoff * 1000000u;
            pause_ns(deadline - at < pause ? deadline - at : pause);
            continue;
        }
        /* The leader's key (or, with none, members/) from after the
         * reading; a stream kept from before watches the same key. */
        const char *what = found ? key : prefix;
        if (s && (strcmp(watched, what) != 0 || !gstream_current(s, e))) {
            gstream_close(s);
            s = NULL;
        }
        if (!s && (rc = gstream_open(e, what, found ? 0 : G_PREFIX, rev + 1, &s)) < 0) {
            s = NULL;
            if (rc == -ENOMEM)
                return rc;
        }
        snprintf(watched, sizeof(watched), "%s", what);
        /* Until news, the stream's end, the deadline, or the next look. */
        uint64_t look = deadline - at > PROBE_MS * 1000000ull ? at + PROBE_MS * 1000000ull : deadline;
        int64_t srev = rev;
        bool rest = !s; /* no stream to wait on: a moment before the next look, not a spin */
        bool quiet_end = false, heard = false;
        while (s) {
            uint64_t t = gnow_ns();
            if (t >= look)
                break;
            uint64_t ms = (look - t + 999999) / 1000000;
            int n = gstream_next(s, (int)(ms < GROUP_STREAM_SLICE_MS ? ms : GROUP_STREAM_SLICE_MS), -1, ev, EVENTS,
                                 &srev);
            if (n < 0 || n == GSTREAM_ENDED) {
                gstream_close(s);
                s = NULL;
                quiet_end = !heard; /* refused, reset, or ended at once: no loop of reads and opens */
                break;
            }
            heard = heard || n > 0;
            bool changed = news(ev, n, found == 1);
            for (int i = 0; i < n; i++)
                gkv_free(&ev[i].kv);
            if (changed || !gstream_current(s, e))
                break;
        }
        uint64_t t = gnow_ns();
        if (quiet_end) {
            /* 50 ms doubling to 1 s: a server (or a proxy) that ends
             * every watch at once costs a few requests a second, not a
             * thousand. */
            ended = ended ? (ended * 2 > 1000 ? 1000 : ended * 2) : 50;
            uint64_t pause = (uint64_t)ended * 1000000u;
            if (t < deadline)
                pause_ns(deadline - t < pause ? deadline - t : pause);
        } else {
            if (heard || !rest)
                ended = 0;
            if (rest && t < look)
                pause_ns(look - t < 50000000u ? look - t : 50000000u);
        }
    }
}
