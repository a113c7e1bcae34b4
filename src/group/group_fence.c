/* SPDX-License-Identifier: MIT */
/*
 * THE RULE: a request whose outcome the caller does not know can never
 * change what a later call of the same caller decided.
 *
 * A request to etcd may be applied late, or twice. Late: a member frozen
 * (SIGSTOP, a stalled disk) holds it, the client gives up and sends it to
 * the next member, where it lands; the caller goes on (gives the unit
 * back, withdraws from the round); and when the first member resumes it
 * applies the first copy. Twice: the first copy lands and its answer is
 * lost, the second is sent anyway (the adapter's request loop, etcd_http.c,
 * sends a txn on to the next member when one does not answer; libcurl
 * sends again on a fresh connection when a reused one died). So every
 * write vigil sends either is idempotent by construction (it hangs on a
 * lease revoked when the caller gives up, or compares a create_revision
 * that never recurs: join, leave, add, lock, resign, etcd.c and
 * etcd_session.c), or carries a fence that every later write of the same
 * caller moves, so that a late or second copy fails its comparison. A
 * group member's writes (claim, done, giveback, arrive, withdraw, commit)
 * carry this one:
 *
 *   GROUP/fence/<hex>   on the member's lease, put by its join (version 1)
 *
 *   a write   txn: gtxn_fence (members/<hex> at the join revision), and
 *             version(fence/<hex>) == F, F the version the member knows;
 *             then the write's own operations and a put of fence/<hex>
 *             = "<id>", the write's id (the member's count of writes
 *             sent); in the failure branch a range of fence/<hex>.
 *   answered  succeeded: landed, at the reply's revision; F + 1.
 *             failed, fence/<hex> = "<id>": a copy of this very write
 *             landed before (twice): landed, at the fence's mod_revision.
 *             failed, fence/<hex> at F: refused by its own comparisons.
 *             fence/<hex> gone: our lease is gone (VIGIL_ELOST).
 *   in doubt  no answer; or refused, but an earlier sending failed after
 *             it may have reached a member (greply.doubt), so a copy may
 *             still land: the write is kept (m->doubt) and RESOLVED before
 *             the caller is told, or, when even that goes unanswered,
 *             before any other write of the member is sent.
 *   resolve   txn: gtxn_fence, version(fence/<hex>) == F, then a put of
 *             fence/<hex> = "<a new id>"; failure: a range of fence/<hex>.
 *             Succeeded: the write in doubt never landed, and never will
 *             (every copy of it compares F, and the fence is past F):
 *             void. Failed with fence/<hex> = the doubted write's id: it
 *             landed, at the fence's mod_revision (a claim's token: the
 *             claim and the fence are put in one txn). Failed with another
 *             id: an earlier resolve landed, the write is void.
 *
 * A claim found landed by a resolution (of another thread's call, or of
 * an earlier call of the caller's) is kept in m->found for the next take,
 * and no claim is sent while it is kept (gop_run answers GOP_FOUND, and
 * the take answers that unit): so one slot holds every claim a
 * resolution can find, and none is dropped. A failed write that finds the
 * fence moved by no write the member knows of (an outcome unknown that
 * left no doubt: a bug, or a failure mode not yet counted as doubt) looks
 * for a claim of its id among the owners, and keeps it the same way.
 *
 * Exactly one txn per fence version can land, every one of them this
 * member's own, sent only while the member knows the version: so the
 * fence's history is the member's writes in the order the member decided
 * them, and a copy of a write decided earlier can never land after a
 * later one. The member sends one write at a time (m->lock), and the
 * fence holds across the member's threads, its calls, and a caller told
 * an error: the write it was told of is resolved before the next.
 *
 * Model: model/group_net.pml, runs claim_net and round_net (every request
 * of a member may be held and delivered after its later ones, or
 * delivered twice); claim_late, round_late and withdraw_late are the txns
 * before the fence, where Spin finds issue 25's claim applied late and
 * withdrawn arrival counted, nodoubt the fence without the resolution
 * of a refused answer whose copy may still land, and unavailable_old the
 * request loop that took an answer of Unavailable for no doubt.
 * Tests: etcd_test_net.c (each write held then delivered late, and
 * delivered twice, through tests/etcd_proxy.py; a claim answered
 * Unavailable, DeadlineExceeded or a 5xx page and refused by the next
 * member), etcd_test_group_doubt.c (answers lost; a claim found by
 * another thread's resolution, test_found_kept), etcd_test_group_chaos.c
 * (the proxy as a nemesis).
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESOLVE_TRIES 3 /* a resolution sent again at once while unanswered */

static int fence_key(const vigil_group_member *m, char *k)
{
    return gkey(k, m->group, "fence/%s", m->hex);
}

void gfence_join(struct gtxn *t, const vigil_group_member *m)
{
    char k[GKEY_MAX];
    if (fence_key(m, k) < 0) {
        t->err = VIGIL_ERANGE;
        return;
    }
    gtxn_put(t, G_OK, k, "0", 1, m->lease);
}

uint64_t gop_begin(vigil_group_member *m, struct gtxn *t)
{
    gtxn_init(t);
    gtxn_fence(t, m);
    return ++m->ids;
}

/* The fence's part of a write of id: its comparison, its put, and its
 * range at the end of the failure branch. */
static void fence_add(struct gtxn *t, const vigil_group_member *m, uint64_t id)
{
    char k[GKEY_MAX], v[24];
    if (fence_key(m, k) < 0) {
        t->err = VIGIL_ERANGE;
        return;
    }
    snprintf(v, sizeof(v), "%" PRIu64, id);
    gtxn_cmp(t, k, G_VERSION, G_EQ, (int64_t)m->fence);
    gtxn_put(t, G_OK, k, v, strlen(v), m->lease);
    gtxn_range(t, G_FAIL, k, 0, 0);
}

/* The fence as a failed txn's last range shows it: 1 and its version, its
 * mod_revision and the id it holds; 0 gone; or -EPROTO. */
static int fence_seen(const struct greply *r, int n, int64_t *version, int64_t *mod, uint64_t *id)
{
    struct gkv kv;
    int f = greply_first(r, n, &kv);
    if (f != 1)
        return f;
    *version = kv.version;
    *mod = kv.mod;
    *id = kv.val ? strtoull(kv.val, NULL, 10) : 0;
    gkv_free(&kv);
    return 1;
}

/* One resolution of m->doubt: 0 resolved (the write landed: *landed, at
 * *rev), VIGIL_ELOST, or an error (still in doubt). */
static int resolve_once(vigil_group_member *m, bool *landed, int64_t *rev)
{
    struct gtxn t;
    struct greply r;
    uint64_t id = gop_begin(m, &t);
    fence_add(&t, m, id);
    int rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (r.behind)
        atomic_store(&m->behind, true);
    if (rc < 0)
        return rc;
    int64_t version = 0, mod = 0;
    uint64_t seen = 0;
    int f = r.ok ? 1 : fence_seen(&r, 0, &version, &mod, &seen);
    bool ok = r.ok;
    greply_free(&r);
    if (f < 0)
        return f;
    if (ok) {
        m->fence++; /* ours: every copy of the doubted write compares the version before */
        *landed = false;
    } else if (f == 0 || (uint64_t)version == m->fence) {
        return VIGIL_ELOST; /* the fence gone with our lease, or our member key gone */
    } else {
        m->fence = (uint64_t)version;
        *landed = seen == m->doubt.id;
        *rev = mod;
    }
    return 0;
}

/* Resolves the doubt (a few sendings): 0 with *landed and *rev, or the error. */
static int resolve(vigil_group_member *m, bool *landed, int64_t *rev)
{
    int rc = -EIO;
    for (int i = 0; i < RESOLVE_TRIES && rc < 0 && rc != VIGIL_ELOST; i++)
        rc = resolve_once(m, landed, rev);
    if (rc == 0 || rc == VIGIL_ELOST)
        m->doubt.op = GOP_NONE;
    return rc;
}

/* A claim of m's that landed unknown to the call that sent it, at rev:
 * kept for the next take (m->found). No claim is sent while one is kept
 * (gop_run), so the slot is free for the one a resolution finds; a second
 * (a move of the fence no write we know of explains, beside it) is given
 * back at once rather than dropped (a unit left owned by a live member
 * that does not know it waits for that member's end), unless etcd does
 * not answer that either. */
static void keep_found(vigil_group_member *m, const char *unit, int64_t rev)
{
    if (!m->found[0]) {
        snprintf(m->found, sizeof(m->found), "%s", unit);
        m->found_token = (uint64_t)rev;
        return;
    }
    char ko[GKEY_MAX];
    if (gkey(ko, m->group, "work/owners/%s", unit) < 0)
        return;
    /* Idempotent: that claim's key, at that revision, never recurs. */
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_cmp(&t, ko, G_CREATE, G_EQ, rev);
    gtxn_del(&t, G_OK, ko, 0);
    if (gtxn_run(m->e, &t, &r) == 0)
        greply_free(&r);
    gtxn_free(&t);
}

/* The fence found moved by a write of m's id that m does not know of: if
 * it was a claim (its owner key holds "<hex> <id>", created at mod), the
 * unit is kept for the next take. 0, or an error. */
static int unknown_claim(vigil_group_member *m, uint64_t id, int64_t mod)
{
    char ko[GKEY_MAX], want[40];
    int rc = gkey(ko, m->group, "work/owners/");
    if (rc < 0)
        return rc;
    snprintf(want, sizeof(want), "%s %" PRIu64, m->hex, id);
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, ko, G_PREFIX, 0);
    rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int64_t count = 0;
    const cJSON *kvs = NULL, *kv;
    rc = greply_range(&r, 0, &count, &kvs);
    cJSON_ArrayForEach(kv, kvs) {
        struct gkv one;
        if (rc < 0 || gkv_read(kv, &one) < 0)
            break;
        if (one.create == mod && one.val && strcmp(one.val, want) == 0 && strlen(one.key) > strlen(ko))
            keep_found(m, one.key + strlen(ko), mod);
        gkv_free(&one);
    }
    greply_free(&r);
    return rc < 0 ? rc : 0;
}

int gop_resolve(vigil_group_member *m)
{
    if (m->doubt.op == GOP_NONE)
        return 0;
    bool landed = false;
    int64_t rev = 0;
    int op = m->doubt.op;
    char unit[sizeof(m->doubt.unit)];
    memcpy(unit, m->doubt.unit, sizeof(unit));
    int rc = resolve(m, &landed, &rev);
    if (rc == 0 && landed && op == GOP_CLAIM)
        keep_found(m, unit, rev);
    return rc;
}

int gop_run(vigil_group_member *m, struct gtxn *t, uint64_t id, int op, const char *unit, struct greply *r,
            int64_t *rev)
{
    memset(r, 0, sizeof(*r));
    int rc = gop_resolve(m);
    if (rc < 0)
        return rc;
    if (op == GOP_CLAIM && m->found[0])
        return GOP_FOUND; /* a claim of ours landed unknown to its call: that one first, none sent */
    int frange = t->franges;
    fence_add(t, m, id);
    rc = gtxn_run(m->e, t, r);
    if (r->behind)
        atomic_store(&m->behind, true);
    if (rc == VIGIL_ELOST)
        return rc; /* our lease not found: the txn failed whole, and so will every copy */
    bool doubt = rc < 0;
    if (rc == 0 && r->ok) {
        m->fence++;
        *rev = r->rev;
        return GOP_LANDED;
    }
    if (rc == 0) {
        int64_t version = 0, mod = 0;
        uint64_t seen = 0;
        int f = fence_seen(r, frange, &version, &mod, &seen);
        if (f < 0) {
            greply_free(r);
            return f;
        }
        if (f == 1 && seen == id) {
            m->fence = (uint64_t)version; /* a copy of this very write landed before */
            *rev = mod;
            greply_free(r);
            return GOP_LANDED;
        }
        if (f == 1 && (uint64_t)version != m->fence) {
            /* Moved by no write we know of (ours are resolved first): a
             * write of ours all the same, that left no doubt; if it was a
             * claim, its unit is ours, and kept for the next take. */
            m->fence = (uint64_t)version;
            greply_free(r);
            int u = unknown_claim(m, seen, mod);
            return u < 0 ? u : -EAGAIN;
        }
        if (f == 0) {
            greply_free(r);
            return VIGIL_ELOST;
        }
        if (!r->doubt)
            return GOP_REFUSED;
        doubt = true; /* refused, but an earlier copy may still land */
    }
    /* In doubt: resolved now if etcd answers, else by the next write. */
    m->doubt.op = op;
    m->doubt.id = id;
    snprintf(m->doubt.unit, sizeof(m->doubt.unit), "%s", unit ? unit : "");
    bool landed = false;
    int rr = resolve(m, &landed, rev);
    if (rr < 0) {
        greply_free(r);
        return rr == VIGIL_ELOST ? rr : rc < 0 ? rc : rr;
    }
    if (landed) {
        greply_free(r);
        return GOP_LANDED; /* r empty: what it read is not known */
    }
    return rc == 0 && doubt && r->root ? GOP_REFUSED : GOP_VOID;
}
