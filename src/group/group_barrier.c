/* SPDX-License-Identifier: MIT */
/*
 * Barrier rounds across hosts: a round releases when every live member has
 * arrived at it, and the release is one etcd transaction.
 *
 *   GROUP/round                     "N S": N the round gathering (absent: 0),
 *                                   S the serial's join revision of round N-1
 *   GROUP/rounds/<r>/a/<name>       an arrival: on the member's lease, value
 *                                   "<join revision> <round of the call>"
 *   GROUP/rounds/<r>/s/<name>       "<join revision>", no lease: who arrived
 *                                   at r at some time (for the left-out list)
 *   GROUP/rounds/<r>/gate           put by every withdrawal from r
 *   GROUP/released/<r>              the record of a release (no lease; the
 *                                   last 64 kept): {"round","serial",
 *                                   "counted":[[name,rev]..],"left_out":[..]}
 *
 * Live members are the keys under names/ (vigil members only, each on its
 * member's lease). <r> is 20 decimal digits, so rounds sort in key order.
 *
 * THE PROTOCOL (model: model/group.pml, "round"; tests etcd_test_group.c,
 * etcd_test_group_hosts.c, and the chaos run etcd_test_group_chaos.c).
 *
 *   Arrival at r, on GROUP/round as the member last saw it (N, and its
 *   mod_revision). r < N: released, return. Else one txn, fenced and
 *   comparing GROUP/round's mod_revision with the one known: put the
 *   arrival and the seen key for every round N..r (an arrival counts for
 *   the rounds before it still gathering: a caller ahead of the others is
 *   counted in the rounds it passed over), and count names/ and the
 *   arrivals at N. If the round moved, the txn's failure branch reads it
 *   (and our member key, to tell a stale member): try again on it. An
 *   arrival's key hangs on the member's lease with its member key and its
 *   name, so a death takes all of them in one revision: arrivals are
 *   always a subset of the live names.
 *
 *   Judgement and commit of round N (by whoever sees the counts equal: the
 *   last to arrive, or a waiter woken by a death). Read at one revision X
 *   GROUP/round (N, still gathering), GROUP/rounds/N/gate, GROUP/joins,
 *   every name and every arrival at N; complete when every name has an
 *   arrival. Then one txn, fenced, comparing the mod_revisions of round,
 *   gate and joins with those read at X:
 *     put GROUP/round = N+1 and the serial; put released/N (counted: the
 *     arrivals read at X; the serial: the committer if its call is for N,
 *     else the counted member of lowest join revision whose call is for N);
 *     delete rounds/N/; delete released/N-64; put our names/ key again
 *     (same lease, value "<hex> N+1 <serial>": the event that wakes every
 *     waiter, and tells it the release, at the commit's revision).
 *   The round compare makes the release of N happen once (one serial). The
 *   gate compare makes a judgement fail if anyone withdrew from N since X:
 *   a waiter that timed out is never counted. The joins compare makes it
 *   fail if anyone joined since X: a member live at the commit, and not
 *   counted, is always one that died (its name gone) or never existed.
 *
 *   Withdrawal (timeout). Read N; r < N: released, and the release read
 *   our arrival (return 0). Else one txn, fenced and comparing round's
 *   mod_revision: delete our arrivals at N..r, put each round's gate. If
 *   the round moved first, look again: released means counted.
 *
 *   Waiting. A watch of names/ (the member's own, kept from one wait to
 *   the next): a re-put by a release tells the round now gathering, its
 *   revision and its serial, and a waiter whose round it passed returns
 *   on that alone; a deletion (a death or a leave) may complete the
 *   round, and wakes a look (the round and the counts, one txn). A look
 *   also happens every third of the TTL and whenever the stream no longer
 *   goes to the adapter's current endpoint (a frozen member).
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AHEAD_MAX   16 /* rounds an arrival may be ahead of the one gathering */
#define KEEP_ROUNDS 64 /* released records kept */
#define COMMIT_TRIES 64
#define EVENTS 64

/* GROUP/round: the round gathering, its mod_revision, and the serial of
 * the round before it. */
struct round_state {
    uint64_t next;
    int64_t  mod;
    uint64_t serial;
};

static int round_read(const struct gkv *kv, int found, struct round_state *st)
{
    memset(st, 0, sizeof(*st));
    if (!found)
        return 0;
    char *end;
    st->mod = kv->mod;
    st->next = strtoull(kv->val ? kv->val : "", &end, 10);
    if (end == kv->val || (*end && *end != ' '))
        return -EPROTO;
    if (*end == ' ')
        st->serial = strtoull(end + 1, NULL, 10);
    return 0;
}

static int rkey(char *buf, const char *group, uint64_t r, const char *rest)
{
    return gkey(buf, group, "rounds/%020" PRIu64 "/%s", r, rest);
}

/* ---- arrival, withdrawal and a look: one txn on the round as we know it ------- */

enum round_op { ARRIVE, WITHDRAW, LOOK };

/*
 * One txn, fenced and comparing GROUP/round's mod_revision with st's (the
 * member's last reading, kept between calls): ARRIVE puts our arrivals at
 * the rounds st->next..r, WITHDRAW deletes them and bumps their gates,
 * LOOK changes nothing; ARRIVE and LOOK then count names/ and the
 * arrivals at st->next (*complete: every name has arrived). If the round
 * moved, the txn's failure branch reads it into st: -EAGAIN, go again;
 * VIGIL_ELOST when our member key is gone. One round trip when the round
 * stands where we last saw it.
 */
static int round_txn(vigil_group_member *m, struct round_state *st, enum round_op op, uint64_t r, int64_t *rev,
                     bool *complete)
{
    char kr[GKEY_MAX], kn[GKEY_MAX], ka[GKEY_MAX], km[GKEY_MAX], k[GKEY_MAX], val[48], sv[24];
    int rc;
    if ((rc = gkey(kr, m->group, "round")) < 0 || (rc = gkey(kn, m->group, "names/")) < 0 ||
        (rc = rkey(ka, m->group, st->next, "a/")) < 0 || (rc = gkey(km, m->group, "members/%s", m->hex)) < 0)
        return rc;
    snprintf(val, sizeof(val), "%" PRIu64 " %" PRIu64, m->rev, r);
    snprintf(sv, sizeof(sv), "%" PRIu64, m->rev);
    struct gtxn t;
    struct greply res;
    uint64_t id = 0;
    /* ARRIVE and WITHDRAW are writes, fenced (group_fence.c): one at a
     * time, and a copy that lands late or twice changes nothing. */
    if (op == LOOK) {
        gtxn_init(&t);
        gtxn_fence(&t, m);
    } else {
        pthread_mutex_lock(&m->lock);
        id = gop_begin(m, &t);
    }
    gtxn_cmp(&t, kr, G_MOD, G_EQ, st->mod);
    for (uint64_t x = st->next; op != LOOK && x <= r && t.err == 0; x++) {
        char rest[VIGIL_MEMBER_MAX + 8];
        snprintf(rest, sizeof(rest), "a/%s", m->name);
        if ((rc = rkey(k, m->group, x, rest)) < 0) {
            t.err = rc;
        } else if (op == ARRIVE) {
            gtxn_put(&t, G_OK, k, val, strlen(val), m->lease);
            snprintf(rest, sizeof(rest), "s/%s", m->name);
            if ((rc = rkey(k, m->group, x, rest)) < 0)
                t.err = rc;
            gtxn_put(&t, G_OK, k, sv, strlen(sv), 0);
        } else {
            gtxn_del(&t, G_OK, k, 0);
            if ((rc = rkey(k, m->group, x, "gate")) < 0)
                t.err = rc;
            gtxn_put(&t, G_OK, k, "", 0, 0);
        }
    }
    if (op != WITHDRAW) {
        gtxn_range(&t, G_OK, kn, G_PREFIX | G_COUNT, 0);
        gtxn_range(&t, G_OK, ka, G_PREFIX | G_COUNT, 0);
    }
    gtxn_range(&t, G_FAIL, kr, 0, 0);
    gtxn_range(&t, G_FAIL, km, G_KEYS_ONLY, 0);
    int64_t landed_at = 0;
    if (op == LOOK) {
        rc = gtxn_run(m->e, &t, &res);
        landed_at = res.rev;
    } else {
        rc = gop_run(m, &t, id, op == ARRIVE ? GOP_ARRIVE : GOP_WITHDRAW, NULL, &res, &landed_at);
        pthread_mutex_unlock(&m->lock);
        /* Refused: the round moved (or we are out), as res tells. Void
         * (never landed, and never will): go again. */
        rc = rc == GOP_REFUSED ? 0 : rc == GOP_VOID ? -EAGAIN : rc;
        if (rc == GOP_LANDED && !res.root) {
            /* Landed, found so by a resolution: what it would have read, read now. */
            gtxn_free(&t);
            if (rev)
                *rev = landed_at;
            if (op == WITHDRAW)
                return 0;
            rc = round_txn(m, st, LOOK, 0, NULL, complete);
            return rc == -EAGAIN ? 0 : rc; /* moved: st says where (released, or a look due) */
        }
    }
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    if (rev)
        *rev = landed_at;
    struct gkv kv = { 0 }, me = { 0 };
    int64_t names = 0, arrived = 0;
    const cJSON *kvs;
    if (res.ok && op != WITHDRAW) {
        if ((rc = greply_range(&res, 0, &names, &kvs)) == 0)
            rc = greply_range(&res, 1, &arrived, &kvs);
        if (rc == 0)
            *complete = names > 0 && arrived >= names;
    } else if (!res.ok) {
        int f = greply_first(&res, 0, &kv), fm = f < 0 ? f : greply_first(&res, 1, &me);
        if (f < 0 || fm < 0)
            rc = f < 0 ? f : fm;
        else if (fm == 0 || me.create != (int64_t)m->rev)
            rc = VIGIL_ELOST;
        else if ((rc = round_read(&kv, f, st)) == 0)
            rc = -EAGAIN;
    }
    gkv_free(&kv);
    gkv_free(&me);
    greply_free(&res);
    return rc;
}

/* The round as it stands, and whether the one gathering is complete. */
static int look(vigil_group_member *m, struct round_state *st, bool *complete)
{
    int rc = -EAGAIN;
    for (int tries = 0; tries < COMMIT_TRIES && rc == -EAGAIN; tries++)
        rc = round_txn(m, st, LOOK, 0, NULL, complete);
    return rc == -EAGAIN ? VIGIL_EBUSY : rc; /* the round moved under every look: a churn we do not outlast */
}

/* Arrives at r (and the rounds gathering before it): 0 with the txn's
 * revision and whether the round gathering is complete; 1 r was released
 * already; VIGIL_ERANGE too far ahead; VIGIL_ELOST. */
static int arrive(vigil_group_member *m, uint64_t r, struct round_state *st, int64_t *rev, bool *complete)
{
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        if (r < st->next)
            return 1;
        if (r - st->next >= AHEAD_MAX)
            return VIGIL_ERANGE;
        int rc = round_txn(m, st, ARRIVE, r, rev, complete);
        if (rc != -EAGAIN)
            return rc;
    }
    return VIGIL_EBUSY;
}

/* Withdraws from r: VIGIL_ETIMEDOUT withdrawn, 1 released first (we were
 * counted), or an error. */
static int withdraw(vigil_group_member *m, uint64_t r, struct round_state *st)
{
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        if (r < st->next)
            return 1;
        int rc = round_txn(m, st, WITHDRAW, r, NULL, NULL);
        if (rc != -EAGAIN)
            return rc < 0 ? rc : VIGIL_ETIMEDOUT;
    }
    return VIGIL_EBUSY;
}

/* ---- the commit ---------------------------------------------------------------- */

struct peer {
    char     name[VIGIL_MEMBER_MAX + 1];
    uint64_t rev;
    uint64_t call;
};

/* The names under prefix (plen bytes) in range n of r, with what their
 * values say (arrivals: "rev call"; seen: "rev"): their number, or an error. */
static int read_peers(const struct greply *r, int n, size_t plen, struct peer **out)
{
    struct gentry *e;
    int k = greply_entries(r, n, plen, VIGIL_MEMBER_MAX, &e);
    *out = NULL;
    if (k <= 0)
        return k;
    struct peer *p = calloc((size_t)k, sizeof(*p));
    for (int i = 0; p && i < k; i++) {
        char *end;
        memcpy(p[i].name, e[i].name, sizeof(p[i].name));
        p[i].rev = strtoull(e[i].val, &end, 10);
        p[i].call = *end == ' ' ? strtoull(end + 1, NULL, 10) : 0;
    }
    free(e);
    *out = p;
    return p ? k : -ENOMEM;
}

static const struct peer *find(const struct peer *p, int n, const char *name)
{
    for (int lo = 0, hi = n; lo < hi;) { /* ranges come in key order */
        int mid = lo + (hi - lo) / 2, c = strcmp(p[mid].name, name);
        if (c == 0)
            return &p[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool add_pair(cJSON *arr, const char *name, uint64_t rev)
{
    cJSON *p = cJSON_CreateArray();
    if (!p || !cJSON_AddItemToArray(arr, p))
        return cJSON_Delete(p), false;
    return cJSON_AddItemToArray(p, cJSON_CreateString(name)) && cJSON_AddItemToArray(p, cJSON_CreateNumber((double)rev));
}

static bool counted_in(const struct peer *c, int nc, const char *name, uint64_t rev)
{
    const struct peer *p = find(c, nc, name);
    return p && p->rev == rev;
}

/* The record of round N: counted, serial, left out (the previous round's
 * counted and this round's seen, less the counted). */
static char *record(uint64_t n, uint64_t serial, const struct peer *c, int nc, const struct peer *seen, int ns,
                    const struct gkv *prev)
{
    cJSON *j = cJSON_CreateObject(), *ca, *la, *pj = NULL;
    char *s = NULL;
    if (!j || !cJSON_AddNumberToObject(j, "round", (double)n) || !cJSON_AddNumberToObject(j, "serial", (double)serial) ||
        !(ca = cJSON_AddArrayToObject(j, "counted")) || !(la = cJSON_AddArrayToObject(j, "left_out")))
        goto out;
    for (int i = 0; i < nc; i++)
        if (!add_pair(ca, c[i].name, c[i].rev))
            goto out;
    if (prev && prev->val) {
        const cJSON *pc, *e;
        pj = cJSON_Parse(prev->val);
        pc = vigil_etcd__field(pj, "counted");
        cJSON_ArrayForEach(e, (cJSON_IsArray(pc) ? pc : NULL)) {
            const cJSON *nm = cJSON_GetArrayItem(e, 0), *rv = cJSON_GetArrayItem(e, 1);
            if (cJSON_IsString(nm) && cJSON_IsNumber(rv) && !counted_in(c, nc, nm->valuestring, (uint64_t)rv->valuedouble) &&
                !add_pair(la, nm->valuestring, (uint64_t)rv->valuedouble))
                goto out;
        }
    }
    for (int i = 0; i < ns; i++) {
        if (counted_in(c, nc, seen[i].name, seen[i].rev))
            continue;
        bool dup = false; /* already listed from the round before */
        const cJSON *e;
        cJSON_ArrayForEach(e, la) {
            const cJSON *nm = cJSON_GetArrayItem(e, 0), *rv = cJSON_GetArrayItem(e, 1);
            dup = dup || (strcmp(nm->valuestring, seen[i].name) == 0 && (uint64_t)rv->valuedouble == seen[i].rev);
        }
        if (!dup && !add_pair(la, seen[i].name, seen[i].rev))
            goto out;
    }
    s = cJSON_PrintUnformatted(j);
out:
    cJSON_Delete(pj);
    cJSON_Delete(j);
    return s;
}

#define COMMITTED 1
#define NOT_COMPLETE 2

/* One judgement and commit of round n by m, whose call is for round call:
 * COMMITTED, NOT_COMPLETE (or released by another: the caller looks
 * again), VIGIL_ELOST, an error; or -EAGAIN when something changed between
 * the reading and the commit (judge again). */
static int commit_once(vigil_group_member *m, uint64_t n, uint64_t call)
{
    char kr[GKEY_MAX], kg[GKEY_MAX], kj[GKEY_MAX], kn[GKEY_MAX], ka[GKEY_MAX], ks[GKEY_MAX], kp[GKEY_MAX],
        krel[GKEY_MAX], kold[GKEY_MAX], kround[GKEY_MAX], kme[GKEY_MAX];
    int rc;
    if ((rc = gkey(kr, m->group, "round")) < 0 || (rc = rkey(kg, m->group, n, "gate")) < 0 ||
        (rc = gkey(kj, m->group, "joins")) < 0 || (rc = gkey(kn, m->group, "names/")) < 0 ||
        (rc = rkey(ka, m->group, n, "a/")) < 0 || (rc = rkey(ks, m->group, n, "s/")) < 0 ||
        (rc = gkey(kp, m->group, "released/%020" PRIu64, n ? n - 1 : 0)) < 0 ||
        (rc = gkey(krel, m->group, "released/%020" PRIu64, n)) < 0 ||
        (rc = gkey(kold, m->group, "released/%020" PRIu64, n >= KEEP_ROUNDS ? n - KEEP_ROUNDS : 0)) < 0 ||
        (rc = rkey(kround, m->group, n, "")) < 0 || (rc = gkey(kme, m->group, "names/%s", m->name)) < 0)
        return rc;
    /* The judgement, at one revision. */
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_fence(&t, m);
    gtxn_range(&t, G_OK, kr, 0, 0);
    gtxn_range(&t, G_OK, kg, 0, 0);
    gtxn_range(&t, G_OK, kj, 0, 0);
    gtxn_range(&t, G_OK, kn, G_PREFIX | G_KEYS_ONLY, 0);
    gtxn_range(&t, G_OK, ka, G_PREFIX, 0);
    if ((rc = gtxn_run(m->e, &t, &r)) < 0) {
        gtxn_free(&t);
        return rc;
    }
    gtxn_free(&t);
    struct round_state st;
    struct gkv kround_kv = { 0 }, kgate = { 0 }, kjoins = { 0 };
    struct peer *names = NULL, *arr = NULL, *seen = NULL;
    int nn = 0, na = 0, ns = 0;
    int f0 = 0, f1 = 0, f2 = 0;
    if (!r.ok)
        rc = VIGIL_ELOST;
    else if ((f0 = greply_first(&r, 0, &kround_kv)) < 0 || (f1 = greply_first(&r, 1, &kgate)) < 0 ||
             (f2 = greply_first(&r, 2, &kjoins)) < 0)
        rc = -EPROTO;
    else if ((rc = round_read(&kround_kv, f0, &st)) == 0 && (nn = read_peers(&r, 3, strlen(kn), &names)) >= 0)
        na = read_peers(&r, 4, strlen(ka), &arr);
    if (rc == 0 && (nn < 0 || na < 0))
        rc = nn < 0 ? nn : na;
    greply_free(&r);
    int64_t gate_mod = f1 == 1 ? kgate.mod : 0, joins_mod = f2 == 1 ? kjoins.mod : 0;
    gkv_free(&kround_kv);
    gkv_free(&kgate);
    gkv_free(&kjoins);
    if (rc == 0 && (st.next != n || nn == 0))
        rc = NOT_COMPLETE;
    for (int i = 0; rc == 0 && i < nn; i++)
        if (!find(arr, na, names[i].name))
            rc = NOT_COMPLETE;
    if (rc != 0)
        goto out;
    /* Complete: the counted are the arrivals of live names (all of them,
     * but for a name deleted by hand under a live lease). */
    int nc = 0;
    uint64_t serial = 0;
    for (int i = 0; i < na; i++) {
        if (!find(names, nn, arr[i].name))
            continue;
        arr[nc++] = arr[i];
        if (call == n && strcmp(arr[i].name, m->name) == 0)
            serial = m->rev;
    }
    for (int i = 0; i < nc && call != n; i++)
        if (arr[i].call == n && (serial == 0 || arr[i].rev < serial))
            serial = arr[i].rev;
    /* Who arrived at some time, and the round before's record. */
    struct gkv prev = { 0 };
    int fp = 0;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, ks, G_PREFIX, 0);
    if (n > 0)
        gtxn_range(&t, G_OK, kp, 0, 0);
    if ((rc = gtxn_run(m->e, &t, &r)) == 0) {
        if ((ns = read_peers(&r, 0, strlen(ks), &seen)) < 0)
            rc = ns;
        else if (n > 0 && (fp = greply_first(&r, 1, &prev)) < 0)
            rc = fp;
        greply_free(&r);
    }
    gtxn_free(&t);
    char *rec = rc == 0 ? record(n, serial, arr, nc, seen, ns, fp == 1 ? &prev : NULL) : NULL;
    gkv_free(&prev);
    if (rc == 0 && !rec)
        rc = -ENOMEM;
    if (rc < 0)
        goto out;
    char rv[48];
    snprintf(rv, sizeof(rv), "%" PRIu64 " %" PRIu64, n + 1, serial);
    pthread_mutex_lock(&m->lock);
    uint64_t id = gop_begin(m, &t); /* a write: fenced (group_fence.c) */
    gtxn_cmp(&t, kr, G_MOD, G_EQ, st.mod);
    gtxn_cmp(&t, kg, G_MOD, G_EQ, gate_mod);
    gtxn_cmp(&t, kj, G_MOD, G_EQ, joins_mod);
    gtxn_put(&t, G_OK, kr, rv, strlen(rv), 0);
    gtxn_put(&t, G_OK, krel, rec, strlen(rec), 0);
    gtxn_del(&t, G_OK, kround, G_PREFIX);
    if (n >= KEEP_ROUNDS)
        gtxn_del(&t, G_OK, kold, 0);
    /* The wake-up, which tells the release too: our name again, same
     * lease, its value "<hex> <round now gathering> <serial>". Its event
     * comes at the commit's revision, the round's new mod_revision: a
     * waiter learns from the event alone that its round is released. */
    char poke[96];
    snprintf(poke, sizeof(poke), "%s %" PRIu64 " %" PRIu64, m->hex, n + 1, serial);
    gtxn_put(&t, G_OK, kme, poke, strlen(poke), m->lease);
    free(rec);
    int64_t crev;
    rc = gop_run(m, &t, id, GOP_COMMIT, NULL, &r, &crev);
    pthread_mutex_unlock(&m->lock);
    gtxn_free(&t);
    greply_free(&r);
    /* Refused (something changed since the judgement) or void (never
     * landed, and never will): judge again. */
    rc = rc == GOP_LANDED ? COMMITTED : rc == GOP_REFUSED || rc == GOP_VOID || rc == -EAGAIN ? -EAGAIN : rc;
out:
    free(names);
    free(arr);
    free(seen);
    return rc;
}

/* Judges and commits round n while something keeps changing under it. */
static int commit(vigil_group_member *m, uint64_t n, uint64_t call)
{
    int rc = -EAGAIN;
    for (int i = 0; i < COMMIT_TRIES && rc == -EAGAIN; i++)
        rc = commit_once(m, n, call);
    return rc == -EAGAIN ? 0 : rc;
}

/* The commits a look shows are due (a round complete: perhaps several,
 * when callers were ahead), from a look already made (complete) or a new
 * one. 0 and *st as it stands after. */
static int look_and_commit(vigil_group_member *m, uint64_t call, struct round_state *st, int known)
{
    for (;;) {
        bool complete = known == 1;
        int rc = known >= 0 ? 0 : look(m, st, &complete);
        known = -1;
        if (rc < 0)
            return rc;
        if (!complete || st->next > call)
            return 0;
        rc = commit(m, st->next, call);
        if (rc < 0)
            return rc;
        if (rc != COMMITTED)
            return 0;
    }
}

/* ---- the record ------------------------------------------------------------------- */

static void fill_peers(const cJSON *arr, vigil_group_peer *out, uint32_t cap, uint32_t *n)
{
    const cJSON *e;
    uint32_t k = 0;
    cJSON_ArrayForEach(e, (cJSON_IsArray(arr) ? arr : NULL)) {
        const cJSON *nm = cJSON_GetArrayItem(e, 0), *rv = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsString(nm) || !cJSON_IsNumber(rv))
            continue;
        if (k < cap && out) {
            memset(&out[k], 0, sizeof(out[k]));
            snprintf(out[k].name, sizeof(out[k].name), "%s", nm->valuestring);
            out[k].revision = (uint64_t)rv->valuedouble;
        }
        k++;
    }
    *n = k;
}

int vigil_group_round_info(vigil_etcd *e, const char *group, uint64_t round, vigil_group_round *info)
{
    int rc;
    char k[GKEY_MAX];
    if (!e || !info)
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0 || (rc = gkey(k, group, "released/%020" PRIu64, round)) < 0)
        return rc;
    struct gtxn t;
    struct greply r;
    struct gkv kv = { 0 };
    gtxn_init(&t);
    gtxn_range(&t, G_OK, k, 0, 0);
    rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int f = greply_first(&r, 0, &kv);
    int64_t rev = f == 1 ? kv.mod : 0;
    greply_free(&r);
    if (f <= 0)
        return f < 0 ? f : VIGIL_EVACANT;
    cJSON *j = kv.val ? cJSON_Parse(kv.val) : NULL;
    gkv_free(&kv);
    const cJSON *s = vigil_etcd__field(j, "serial");
    if (!cJSON_IsObject(j) || !cJSON_IsNumber(s)) {
        cJSON_Delete(j);
        return -EPROTO;
    }
    info->round = round;
    info->revision = (uint64_t)rev;
    info->serial = (uint64_t)s->valuedouble;
    fill_peers(vigil_etcd__field(j, "counted"), info->counted_peers, info->counted_cap, &info->counted);
    fill_peers(vigil_etcd__field(j, "left_out"), info->left_out_peers, info->left_out_cap, &info->left_out);
    cJSON_Delete(j);
    return 0;
}

/* The outcome of a released round r for m: VIGIL_SERIAL or 0, with info. */
static int outcome(vigil_group_member *m, uint64_t r, const struct round_state *st, vigil_group_round *info)
{
    vigil_group_round tmp = { 0 };
    vigil_group_round *ri = info ? info : &tmp;
    /* The round just released: its serial is in the round word. */
    if (!info && st->next == r + 1)
        return st->serial == m->rev ? VIGIL_SERIAL : 0;
    int rc = vigil_group_round_info(m->e, m->group, r, ri);
    if (rc == VIGIL_EVACANT) {
        /* Released long ago (the record is no longer kept): not ours. */
        vigil_group_peer *cp = ri->counted_peers, *lp = ri->left_out_peers;
        uint32_t cc = ri->counted_cap, lc = ri->left_out_cap;
        memset(ri, 0, sizeof(*ri));
        ri->round = r;
        ri->counted_peers = cp, ri->counted_cap = cc, ri->left_out_peers = lp, ri->left_out_cap = lc;
        return 0;
    }
    if (rc < 0)
        return rc;
    return ri->serial == m->rev ? VIGIL_SERIAL : 0;
}

/* ---- the wait ------------------------------------------------------------------------- */

/* What the wait does next: nothing (sleep on the stream); read the round
 * (a release's wake-up: one txn, the counts with it); look (a death may
 * have completed the round, or the stream may have missed news); or
 * commit what a reading already showed (complete or not). */
enum next_step { SLEEP, READ_ROUND, LOOK_AGAIN, SHOWN_COMPLETE, SHOWN_INCOMPLETE };

/* A batch of names/ events: a deletion calls for a look; a name put again
 * by a release tells the round (into st, when it is news), or else calls
 * for a read of it; a join calls for nothing. */
static enum next_step after_events(const struct gevent *ev, int n, struct round_state *st)
{
    enum next_step next = SLEEP;
    for (int i = 0; i < n; i++) {
        uint64_t gathering, serial;
        char hex[17];
        if (ev[i].del) {
            next = LOOK_AGAIN;
        } else if (ev[i].kv.version > 1 && ev[i].kv.val &&
                   sscanf(ev[i].kv.val, "%16s %" SCNu64 " %" SCNu64, hex, &gathering, &serial) == 3) {
            if (gathering > st->next) {
                st->next = gathering;
                st->mod = ev[i].kv.mod; /* the release's revision: the round key's too */
                st->serial = serial;
            }
        } else if (ev[i].kv.version > 1 && next == SLEEP) {
            next = READ_ROUND;
        }
    }
    return next;
}

static int wait_round(vigil_group_member *m, uint64_t r, uint64_t deadline, vigil_group_round *info)
{
    struct round_state st = { m->rnext, m->rmod, m->rserial };
    int64_t rev = 0;
    bool complete = false;
    int rc = arrive(m, r, &st, &rev, &complete);
    if (rc == 1) {
        /* Released before this call arrived. The serial its record names
         * went to the call of ours that was counted if that call was told
         * (a round below m->rtold): 0 here, never a second VIGIL_SERIAL.
         * If no call of ours was told the round (its arrival landed and
         * its answer was lost, or it failed after), this call is the one
         * to tell, or the round would have no serial at all. */
        rc = outcome(m, r, &st, info);
        rc = rc == VIGIL_SERIAL && r < m->rtold ? 0 : rc;
        goto out;
    }
    if (rc < 0)
        goto out;
    char kn[GKEY_MAX];
    if ((rc = gkey(kn, m->group, "names/")) < 0)
        goto out;
    uint64_t recheck = m->ttl_ms / 3 * 1000000ull;
    int lfd = vigil_group_lost_fd(m);
    /* The member's stream from its last wait, if it still speaks for the
     * current endpoint: events it holds from before our arrival are old
     * news (a release they tell is of a round before ours, a death makes
     * one more look), and opening a stream per wait is what a round of a
     * thousand members cannot afford. */
    struct gstream *s = m->bstream;
    m->bstream = NULL;
    if (s && !gstream_current(s, m->e)) {
        gstream_close(s);
        s = NULL;
    }
    if (s)
        rev = m->bstream_rev;
    struct gevent ev[EVENTS];
    enum next_step next = complete ? SHOWN_COMPLETE : SHOWN_INCOMPLETE; /* the arrival's own reading */
    uint64_t look_at = gnow_ns() + recheck;
    for (;;) {
        if (vigil_group_lost(m)) {
            rc = VIGIL_ELOST;
            break;
        }
        uint64_t now = gnow_ns();
        if (now >= look_at)
            next = LOOK_AGAIN;
        if (next == READ_ROUND) {
            bool c = false;
            rc = round_txn(m, &st, LOOK, 0, NULL, &c);
            if (rc < 0 && rc != -EAGAIN)
                break;
            /* Moved: released for us, or a look at the new round. */
            next = rc == 0 ? (c ? SHOWN_COMPLETE : SHOWN_INCOMPLETE) : r < st.next ? SHOWN_INCOMPLETE : LOOK_AGAIN;
        }
        if (next != SLEEP) {
            if ((rc = look_and_commit(m, r, &st, next == SHOWN_COMPLETE ? 1 : next == SHOWN_INCOMPLETE ? 0 : -1)) < 0)
                break;
            if (r < st.next) {
                rc = outcome(m, r, &st, info);
                break;
            }
            next = SLEEP;
            look_at = gnow_ns() + recheck;
        }
        if (now >= deadline) {
            rc = withdraw(m, r, &st);
            if (rc == 1)
                rc = outcome(m, r, &st, info);
            break;
        }
        if (!s || !gstream_current(s, m->e)) {
            bool first = !s;
            gstream_close(s);
            s = NULL;
            if ((rc = gstream_open(m->e, kn, G_PREFIX, rev + 1, &s)) < 0) {
                s = NULL;
                break;
            }
            if (!first)
                next = LOOK_AGAIN; /* what the old stream may have missed */
            continue;
        }
        uint64_t until = deadline < look_at ? deadline : look_at;
        uint64_t ms = until > now ? (until - now) / 1000000 + 1 : 0;
        int n = gstream_next(s, (int)(ms < GROUP_STREAM_SLICE_MS ? ms : GROUP_STREAM_SLICE_MS), lfd, ev, EVENTS, &rev);
        if (n < 0 || n == GSTREAM_ENDED) {
            gstream_close(s);
            s = NULL;
            next = LOOK_AGAIN;
            continue;
        }
        next = after_events(ev, n, &st);
        for (int i = 0; i < n; i++)
            gkv_free(&ev[i].kv);
        if (r < st.next) {
            rc = outcome(m, r, &st, info); /* told by the release's own event */
            break;
        }
    }
    /* The stream stays the member's for its next wait, unless it ended. */
    if (s && gstream_current(s, m->e)) {
        m->bstream = s;
        m->bstream_rev = rev;
    } else {
        gstream_close(s);
    }
out:
    m->rnext = st.next, m->rmod = st.mod, m->rserial = st.serial; /* where the next wait starts */
    if (rc >= 0 && r >= m->rtold)
        m->rtold = r + 1; /* told: round r's serial, if ours, is given */
    return rc;
}

int vigil_group_barrier_wait_info(vigil_group_member *m, uint64_t round, uint64_t timeout_ns,
                                  vigil_group_round *info)
{
    if (!m)
        return -EINVAL;
    if (round > INT64_MAX)
        return VIGIL_ERANGE;
    uint64_t start = gnow_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    /* One wait at a time per member: its arrival keys are one per round,
     * and a second wait would be a second claimant of its serial. */
    if (atomic_exchange_explicit(&m->waiting, true, memory_order_acquire))
        return VIGIL_EBUSY;
    int rc = wait_round(m, round, deadline, info);
    atomic_store_explicit(&m->waiting, false, memory_order_release);
    return rc;
}

int vigil_group_barrier_wait(vigil_group_member *m, uint64_t round, uint64_t timeout_ns)
{
    return vigil_group_barrier_wait_info(m, round, timeout_ns, NULL);
}
