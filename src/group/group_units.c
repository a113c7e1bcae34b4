/* SPDX-License-Identifier: MIT */
/*
 * Work units of a group, each done exactly once (model/group.pml, "claim").
 *
 *   GROUP/work/units/<u>    the work set: permanent keys, one per unit not done
 *   GROUP/work/owners/<u>   the claim: on the owner's lease, value "<its lease
 *                           in hex> <id>" (the id: the claim's, as the
 *                           member's fence counts writes); its
 *                           create_revision is the claim's token
 *   GROUP/work/done/<u>     permanent: {"name","member","token"} of who finished it
 *
 *   add     txn: if units/<u> and done/<u> are both absent, put units/<u>.
 *   take    read units/ and owners/ (one txn, fenced: ELOST once we are out);
 *           a unit without an owner is a candidate; then the claim, txn:
 *             fence (members/<ours> created at our join revision, and the
 *             member's fence, group_fence.c)
 *             owners/<u> absent (nobody owns it)
 *             units/<u> present (still in the set: done, a unit never
 *             comes back, since add refuses a unit with a done record)
 *           then put owners/<u> on our lease. At most one claim of a unit
 *           exists at any revision (the absent compare, in etcd's total
 *           order), and only a live member's claim lands (the fence: our
 *           key hangs on our lease, and a put on a dead lease fails).
 *   done    txn: fence, owners/<u> created at the token and on our lease,
 *           then delete owners/<u> and units/<u>, put done/<u>. A unit
 *           leaves the set in the txn that finishes it, and only its owner
 *           of that claim can run it: done at most once, ever; and never by
 *           a stale owner (its claim went with its lease, and a later
 *           claim has another token).
 *   giveback txn: fence, owners/<u> at the token; delete owners/<u>.
 *
 * LATE AND TWICE. Every write of a member (claim, done, giveback) is
 * fenced by the member's fence (group_fence.c, THE RULE): it compares the
 * fence's version and moves it, so a copy of it that lands late (after
 * the member's later writes) or a second time fails; a write whose answer
 * never came is resolved (landed, or void for ever) before the caller is
 * told, or, when etcd does not answer that either, before the member's
 * next write:
 *   claim   its value carries its id; landed unknown to its call, it is
 *           kept (m->found) and the next take answers with it (a claim
 *           that landed unknown to its owner would be held by a live
 *           member that never finishes it: the unit stuck for the
 *           member's life, every survivor waiting for it).
 *   done    a caller told an error may call done again: its failure
 *           branch reads done/<u>, and a record with our join revision
 *           and our token is our own done, landed earlier: 0.
 *   giveback failing while we are still a member, our claim at its token
 *           can only have gone by our own hand: 0.
 * (model/group.pml: run claim, where any answer may be lost; claim_net,
 * where any request may be held and delivered after the member's later
 * ones, or twice; lostreply and claim_late, the steps before each fix.)
 *
 * A member's death deletes its claims with its lease, in one revision:
 * its units are candidates again, and each is claimed by exactly one
 * survivor (the absent compare). take_wait sleeps on a watch of work/:
 * a claim deleted without its unit (freed, not done) is claimed at once,
 * by name, without reading the set first; a unit added, or a freed unit
 * another got first, sends it back to take.
 */
#define _GNU_SOURCE
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define CLAIM_TRIES 4 /* candidates tried from one reading before reading again */
#define CLAIM_SENDS 3 /* a claim sent again while it is known not to have landed */

#define cand gentry /* a unit of the set, or a claim */

int vigil_group_add(vigil_etcd *e, const char *group, const char *unit)
{
    int rc;
    char ku[GKEY_MAX], kd[GKEY_MAX];
    if (!e)
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0 || (rc = gname_check(unit, VIGIL_UNIT_MAX)) < 0 ||
        (rc = gkey(ku, group, "work/units/%s", unit)) < 0 || (rc = gkey(kd, group, "work/done/%s", unit)) < 0)
        return rc;
    /* The unit's value names this call: refused, the add finds its own
     * first copy (delivered twice, its answer lost) by it, and says 0. */
    char mine[32];
    uint64_t x = 0;
    if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x))
        x = gnow_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(mine, sizeof(mine), "add %016" PRIx64, x);
    struct gtxn t;
    struct greply r;
    struct gkv kv;
    gtxn_init(&t);
    gtxn_cmp(&t, ku, G_CREATE, G_EQ, 0);
    gtxn_cmp(&t, kd, G_CREATE, G_EQ, 0);
    gtxn_put(&t, G_OK, ku, mine, strlen(mine), 0);
    gtxn_range(&t, G_FAIL, ku, 0, 0);
    rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    if (!r.ok) {
        int f = greply_first(&r, 0, &kv);
        rc = f < 0 ? f : f == 1 && kv.val && strcmp(kv.val, mine) == 0 ? 0 : -EEXIST;
        if (f == 1)
            gkv_free(&kv);
    }
    greply_free(&r);
    return rc;
}

/* Reads the set and the claims at one revision: the units without an
 * owner (into *cand), their number; VIGIL_EVACANT none left at all,
 * VIGIL_ELOST we are out. *rev: the revision read at. */
static int candidates(vigil_group_member *m, struct cand **cand, int64_t *rev)
{
    char ku[GKEY_MAX], ko[GKEY_MAX];
    int rc;
    if ((rc = gkey(ku, m->group, "work/units/")) < 0 || (rc = gkey(ko, m->group, "work/owners/")) < 0)
        return rc;
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_fence(&t, m);
    gtxn_range(&t, G_OK, ku, G_PREFIX | G_KEYS_ONLY, 0);
    gtxn_range(&t, G_OK, ko, G_PREFIX | G_KEYS_ONLY, 0);
    rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    *rev = r.rev;
    struct cand *units = NULL, *owned = NULL;
    int nu = 0, no = 0;
    if (!r.ok)
        rc = VIGIL_ELOST;
    else if ((nu = greply_entries(&r, 0, strlen(ku), VIGIL_UNIT_MAX, &units)) < 0)
        rc = nu;
    else if ((no = greply_entries(&r, 1, strlen(ko), VIGIL_UNIT_MAX, &owned)) < 0)
        rc = no;
    greply_free(&r);
    if (rc == 0 && nu == 0)
        rc = VIGIL_EVACANT;
    if (rc < 0) {
        free(units);
        free(owned);
        return rc;
    }
    /* Both in key order: one merge keeps the units nobody owns. */
    int k = 0;
    for (int i = 0, j = 0; i < nu; i++) {
        while (j < no && strcmp(owned[j].name, units[i].name) < 0)
            j++;
        if (j < no && strcmp(owned[j].name, units[i].name) == 0)
            continue;
        units[k++] = units[i];
    }
    free(owned);
    *cand = units;
    return k;
}

/* A claim of an earlier call that landed unknown to it (m->lock held): 1
 * and the unit into out, or 0. */
static int take_found(vigil_group_member *m, vigil_group_unit *out)
{
    if (!m->found[0])
        return 0;
    memset(out, 0, sizeof(*out));
    memcpy(out->name, m->found, strlen(m->found));
    out->token = m->found_token;
    m->found[0] = '\0';
    return 1;
}

/* The claim of one unit (m->lock held): 0 ours (token in *token),
 * VIGIL_EBUSY another got it first (or it left the set), VIGIL_ELOST we
 * are out, GOP_FOUND not sent (an earlier claim of ours found landed, in
 * m->found: the take's), or an error (the claim in doubt, kept in m:
 * group_fence.c). */
static int claim(vigil_group_member *m, const struct cand *c, uint64_t *token)
{
    char ko[GKEY_MAX], ku[GKEY_MAX], km[GKEY_MAX], val[40];
    int rc;
    if ((rc = gkey(ko, m->group, "work/owners/%s", c->name)) < 0 ||
        (rc = gkey(ku, m->group, "work/units/%s", c->name)) < 0 || (rc = gkey(km, m->group, "members/%s", m->hex)) < 0)
        return rc;
    rc = GOP_VOID;
    for (int sends = 0; rc == GOP_VOID && sends < CLAIM_SENDS; sends++) {
        struct gtxn t;
        struct greply r;
        struct gkv me;
        int64_t rev = 0;
        uint64_t id = gop_begin(m, &t);
        snprintf(val, sizeof(val), "%s %" PRIu64, m->hex, id);
        gtxn_cmp(&t, ko, G_CREATE, G_EQ, 0);
        gtxn_cmp(&t, ku, G_CREATE, G_GREATER, 0); /* still in the set: a done unit never returns (its done record) */
        gtxn_put(&t, G_OK, ko, val, strlen(val), m->lease);
        gtxn_range(&t, G_FAIL, km, G_KEYS_ONLY, 0);
        rc = gop_run(m, &t, id, GOP_CLAIM, c->name, &r, &rev);
        gtxn_free(&t);
        if (rc == GOP_LANDED) {
            *token = (uint64_t)rev;
        } else if (rc == GOP_REFUSED) {
            /* Which comparison failed: ours is the one that says we are out. */
            int f = greply_first(&r, 0, &me);
            rc = f < 0 ? f : f == 0 || me.create != (int64_t)m->rev ? VIGIL_ELOST : VIGIL_EBUSY;
            if (f == 1)
                gkv_free(&me);
        } else if (rc == -EAGAIN) {
            rc = GOP_VOID;
        }
        greply_free(&r);
    }
    return rc == GOP_VOID ? VIGIL_EBUSY : rc;
}

/* A take's claim of c (m->lock held): 0 and *out, the unit, or a claim of
 * an earlier call found landed (another thread's, or one this claim's
 * resolution of another found); or claim()'s error. */
static int claim_for(vigil_group_member *m, const struct cand *c, vigil_group_unit *out)
{
    uint64_t token = 0;
    if (take_found(m, out))
        return 0;
    int rc = claim(m, c, &token);
    if (rc == GOP_FOUND)
        return take_found(m, out) ? 0 : VIGIL_EBUSY;
    if (rc == 0) {
        memset(out, 0, sizeof(*out));
        memcpy(out->name, c->name, strlen(c->name));
        out->token = token;
    }
    return rc;
}

#define RACED 1 /* take_once: every candidate tried went to another first */

void (*gunits_test_hook)(vigil_group_member *m, const char *step);

/* One attempt: 0, RACED, VIGIL_EBUSY (all owned), VIGIL_EVACANT,
 * VIGIL_ELOST; *rev the revision of the reading (a watch starts after it). */
static int take_once(vigil_group_member *m, vigil_group_unit *out, int64_t *rev)
{
    struct cand *c = NULL;
    pthread_mutex_lock(&m->lock);
    int n = gop_resolve(m); /* a claim of an earlier call, landed unknown to it, is found */
    bool got = n == 0 && take_found(m, out);
    pthread_mutex_unlock(&m->lock);
    if (n < 0 || got)
        return n;
    n = candidates(m, &c, rev);
    if (gunits_test_hook)
        gunits_test_hook(m, "candidates"); /* what another thread of m may do before the claims */
    if (n <= 0) {
        free(c);
        return n == 0 ? VIGIL_EBUSY : n;
    }
    /* Takers start at different places, so that they seldom race for one
     * unit: from a point drawn from our lease and the clock. */
    uint64_t x = (uint64_t)m->lease ^ gnow_ns();
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    size_t start = (size_t)((x >> 17) % (uint64_t)n);
    int rc = VIGIL_EBUSY;
    for (int i = 0; i < n && i < CLAIM_TRIES && rc == VIGIL_EBUSY; i++) {
        pthread_mutex_lock(&m->lock);
        rc = claim_for(m, &c[(start + (size_t)i) % (size_t)n], out);
        pthread_mutex_unlock(&m->lock);
    }
    free(c);
    return rc == VIGIL_EBUSY ? RACED : rc;
}

/* take_once until it does not lose a race (a few times: busy then means
 * every unit left is owned). */
static int take_some(vigil_group_member *m, vigil_group_unit *out, int64_t *rev)
{
    int rc = RACED;
    for (int i = 0; i < 8 && rc == RACED; i++)
        rc = take_once(m, out, rev);
    return rc == RACED ? VIGIL_EBUSY : rc;
}

int vigil_group_take(vigil_group_member *m, vigil_group_unit *out)
{
    int64_t rev;
    if (!m || !out)
        return -EINVAL;
    return take_some(m, out, &rev);
}

/* Does this event free a unit or add one? A claim deleted without its
 * unit (in the same revision) is freed: its name into freed (if empty);
 * a unit put is added. */
static bool frees(const struct gevent *ev, int n, int i, const char *ko, const char *ku, char *freed)
{
    const struct gkv *kv = &ev[i].kv;
    size_t lo = strlen(ko), lu = strlen(ku);
    if (!ev[i].del)
        return strncmp(kv->key, ku, lu) == 0;
    if (strncmp(kv->key, ko, lo) != 0)
        return false;
    for (int j = 0; j < n; j++)
        if (ev[j].del && ev[j].kv.mod == kv->mod && strncmp(ev[j].kv.key, ku, lu) == 0 &&
            strcmp(ev[j].kv.key + lu, kv->key + lo) == 0)
            return false; /* done in that txn: not free */
    if (!freed[0] && strlen(kv->key + lo) <= VIGIL_UNIT_MAX)
        memcpy(freed, kv->key + lo, strlen(kv->key + lo) + 1);
    return true;
}

#define EVENTS 64

int vigil_group_take_wait(vigil_group_member *m, uint64_t timeout_ns, vigil_group_unit *out)
{
    if (!m || !out)
        return -EINVAL;
    char kw[GKEY_MAX], ko[GKEY_MAX], ku[GKEY_MAX];
    int rc;
    if ((rc = gkey(kw, m->group, "work/")) < 0 || (rc = gkey(ko, m->group, "work/owners/")) < 0 ||
        (rc = gkey(ku, m->group, "work/units/")) < 0)
        return rc;
    uint64_t start = gnow_ns();
    uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
    /* A safety net under the watch: a look every third of the TTL even if
     * the stream said nothing (it may speak for a member that froze). */
    uint64_t recheck = m->ttl_ms / 3 * 1000000ull;
    int lfd = vigil_group_lost_fd(m);
    struct gstream *s = NULL;
    struct gevent ev[EVENTS];
    struct cand freed = { .name = "" };
    int64_t rev = 0;
    for (;;) {
        if (vigil_group_lost(m)) {
            rc = VIGIL_ELOST;
            break;
        }
        rc = VIGIL_EBUSY;
        if (freed.name[0]) {
            /* A unit the stream saw freed: claim it by name at once. */
            pthread_mutex_lock(&m->lock);
            rc = claim_for(m, &freed, out);
            pthread_mutex_unlock(&m->lock);
            freed.name[0] = '\0';
        }
        if (rc == VIGIL_EBUSY)
            rc = take_some(m, out, &rev);
        if (rc != VIGIL_EBUSY)
            break;
        uint64_t now = gnow_ns();
        if (now >= deadline) {
            rc = VIGIL_ETIMEDOUT;
            break;
        }
        if (!s || !gstream_current(s, m->e)) {
            gstream_close(s);
            if ((rc = gstream_open(m->e, kw, G_PREFIX, rev + 1, &s)) < 0) {
                s = NULL;
                break;
            }
        }
        uint64_t look_at = now + recheck;
        bool again = false;
        while (!again) {
            now = gnow_ns();
            if (now >= deadline || now >= look_at || vigil_group_lost(m) || !gstream_current(s, m->e))
                break;
            uint64_t until = deadline < look_at ? deadline : look_at;
            uint64_t ms = (until - now) / 1000000 + 1;
            int n = gstream_next(s, (int)(ms < GROUP_STREAM_SLICE_MS ? ms : GROUP_STREAM_SLICE_MS), lfd, ev,
                                 EVENTS, &rev);
            if (n < 0 || n == GSTREAM_ENDED) {
                gstream_close(s); /* look again, and open a new stream after */
                s = NULL;
                break;
            }
            for (int i = 0; i < n; i++)
                again = frees(ev, n, i, ko, ku, freed.name) || again;
            for (int i = 0; i < n; i++)
                gkv_free(&ev[i].kv);
        }
    }
    gstream_close(s);
    return rc;
}

/* Is the done record kv ours: our join revision and the token of u? */
static bool our_done(const vigil_group_member *m, const vigil_group_unit *u, const struct gkv *kv)
{
    cJSON *j = kv->val ? cJSON_ParseWithLength(kv->val, kv->vlen) : NULL;
    const cJSON *mem = vigil_etcd__field(j, "member"), *tok = vigil_etcd__field(j, "token");
    bool ours = cJSON_IsNumber(mem) && cJSON_IsNumber(tok) && (uint64_t)mem->valuedouble == m->rev &&
                (uint64_t)tok->valuedouble == u->token;
    cJSON_Delete(j);
    return ours;
}

/* After VIGIL_ELOST: is the done record of u (key kd) ours? 0 yes (our
 * done landed before we were out), VIGIL_ELOST no, or the read's error. */
static int done_found(vigil_group_member *m, const vigil_group_unit *u, const char *kd)
{
    struct gtxn t;
    struct greply r;
    struct gkv rec;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, kd, 0, 0);
    int rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc; /* unknown still: the caller may call again */
    int f = greply_first(&r, 0, &rec);
    greply_free(&r);
    bool ours = f == 1 && our_done(m, u, &rec);
    if (f == 1)
        gkv_free(&rec);
    return f < 0 ? f : ours ? 0 : VIGIL_ELOST;
}

#define FINISH_SENDS 4 /* a done or a give-back sent again while it is known not to have landed */

/* The txns of done and giveback: fenced, on our claim of u (group_fence.c:
 * a copy lands at most once, and never after a later write of ours); a
 * failure that our own earlier landing explains is a success. */
static int finish(vigil_group_member *m, const vigil_group_unit *u, bool done)
{
    if (!m || !u)
        return -EINVAL;
    char ko[GKEY_MAX], ku[GKEY_MAX], kd[GKEY_MAX], km[GKEY_MAX];
    int rc;
    if ((rc = gname_check(u->name, VIGIL_UNIT_MAX)) < 0 || (rc = gkey(ko, m->group, "work/owners/%s", u->name)) < 0 ||
        (rc = gkey(ku, m->group, "work/units/%s", u->name)) < 0 || (rc = gkey(kd, m->group, "work/done/%s", u->name)) < 0 ||
        (rc = gkey(km, m->group, "members/%s", m->hex)) < 0)
        return rc;
    if (u->token == 0 || u->token > INT64_MAX)
        return VIGIL_ERANGE;
    cJSON *j = cJSON_CreateObject();
    char *val = j && cJSON_AddStringToObject(j, "name", m->name) &&
                        cJSON_AddNumberToObject(j, "member", (double)m->rev) &&
                        cJSON_AddNumberToObject(j, "token", (double)u->token)
                    ? cJSON_PrintUnformatted(j)
                    : NULL;
    cJSON_Delete(j);
    if (!val)
        return -ENOMEM;
    struct greply r = { 0 };
    rc = GOP_VOID;
    for (int sends = 0; rc == GOP_VOID; sends++) {
        if (sends == FINISH_SENDS || (sends > 0 && vigil_group_lost(m))) {
            rc = sends == FINISH_SENDS ? -ETIMEDOUT : VIGIL_ELOST; /* not landed: the caller may call again */
            break;
        }
        struct gtxn t;
        int64_t rev;
        pthread_mutex_lock(&m->lock);
        uint64_t id = gop_begin(m, &t);
        gtxn_cmp(&t, ko, G_CREATE, G_EQ, (int64_t)u->token);
        gtxn_cmp(&t, ko, G_LEASE, G_EQ, m->lease);
        gtxn_del(&t, G_OK, ko, 0);
        if (done) {
            gtxn_del(&t, G_OK, ku, 0);
            gtxn_put(&t, G_OK, kd, val, strlen(val), 0);
        }
        gtxn_range(&t, G_FAIL, km, G_KEYS_ONLY, 0);
        if (done)
            gtxn_range(&t, G_FAIL, kd, 0, 0);
        rc = gop_run(m, &t, id, done ? GOP_DONE : GOP_GIVEBACK, u->name, &r, &rev);
        pthread_mutex_unlock(&m->lock);
        gtxn_free(&t);
        rc = rc == -EAGAIN ? GOP_VOID : rc;
    }
    free(val);
    if (rc == VIGIL_ELOST && done && !atomic_load(&m->behind))
        rc = done_found(m, u, kd); /* out: but a done of ours may have landed before (not on a store gone back) */
    if (rc == GOP_REFUSED) {
        struct gkv me, rec;
        int f = greply_first(&r, 0, &me), fd = f < 0 || !done ? 0 : greply_first(&r, 1, &rec);
        if (f < 0 || fd < 0)
            rc = f < 0 ? f : fd;
        else if (done)
            rc = fd == 1 && our_done(m, u, &rec) ? 0 : VIGIL_ELOST; /* our done, landed before */
        else
            rc = f == 1 && me.create == (int64_t)m->rev ? 0 : VIGIL_ELOST; /* live: gone by our own give-back */
        if (f == 1)
            gkv_free(&me);
        if (fd == 1)
            gkv_free(&rec);
    }
    greply_free(&r);
    return rc; /* an error: still unknown, the caller may call again */
}

int vigil_group_done(vigil_group_member *m, const vigil_group_unit *u)
{
    return finish(m, u, true);
}

int vigil_group_giveback(vigil_group_member *m, const vigil_group_unit *u)
{
    return finish(m, u, false);
}
