/* SPDX-License-Identifier: MIT */
/*
 * vigil groups on etcd: membership, and the layout every group call and
 * every peer must agree on. A group is a set of keys under "GROUP/":
 *
 *   key                          lease    value, and what it means
 *   GROUP/members/<lease hex>    member's {"name","host","pid","start"}: one
 *                                         per member; its create_revision is
 *                                         the join revision, a registration
 *                                         that never recurs
 *   GROUP/names/<name>           member's <lease hex>: one live member per name
 *   GROUP/joins                  none     "": put by every join, so a round's
 *                                         commit can tell nobody joined since
 *                                         it looked (group_barrier.c)
 *   GROUP/work/units/<unit>      none     the work set (group_units.c)
 *   GROUP/fence/<lease hex>      member's "<id>": the member's fence, whose
 *                                         version every write of the member
 *                                         compares and moves (group_fence.c,
 *                                         THE RULE)
 *   GROUP/work/owners/<unit>     owner's  "<owner's lease hex> <id>": the claim
 *   GROUP/work/done/<unit>       none     who finished it
 *   GROUP/round, GROUP/rounds/,  see group_barrier.c
 *   GROUP/released/<round>
 *
 * Everything a member writes hangs on its lease or is fenced by it: a
 * member's death (its lease revoked by the host's agent, or lapsed at its
 * TTL) deletes its member key, its name, its claims and its arrivals in
 * one revision, and every write a member makes is a txn comparing its own
 * key's create_revision with its join revision (gtxn_fence), so a stale
 * member, resumed after its lease went, changes nothing.
 *
 *   join    lease/grant; [the agent's record, group_agent.c]; kv/txn:
 *           if names/<name> absent: put members/<hex>, names/<name>,
 *           fence/<hex> (on the lease), joins. The txn's revision is the
 *           join revision. Idempotent by construction: a copy that lands
 *           late finds the name taken (by us, or by whoever took it after
 *           we left), or our lease revoked (a join that fails revokes it).
 *           Then the keepalive renews the lease every 0.32 TTL: one
 *           lease/keepalive, the member's only request at rest.
 *   leave   stop the keepalive, lease/revoke, remove the record. A revoke
 *           delivered twice answers "not found" to its second copy: while
 *           the keepalive says the lease cannot have lapsed, that is our
 *           own revoke, and the leave answers 0.
 *   members kv/range of members/, by create_revision.
 *
 * The leader is the live member with the lowest join revision; its join
 * revision is its term. This is the layout of etcd's concurrency.Election
 * named "GROUP/members" (keys "<prefix>/<lease hex>", the leader the lowest
 * create_revision, Election.Rev() the term), so `etcdctl elect -l
 * GROUP/members` prints the vigil leader's key and value, and a campaigner
 * `etcdctl elect GROUP/members PROPOSAL` is a member of the group (flagged
 * foreign, named after its proposal) that leads when it joined first.
 * Where it does not go further: a foreign member takes no unit and is not
 * waited for by a round (rounds count names/, which only vigil members
 * write), `etcdctl elect -l` prints vigil's JSON value where it would print
 * a proposal, and a Proclaim by a campaigner changes only its own value.
 */
#define _GNU_SOURCE
#include "group_internal.h"
#include "keepalive_internal.h"
#include "proc_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- what the group files share ------------------------------------------ */

int gkey(char *buf, const char *group, const char *fmt, ...)
{
    int n = snprintf(buf, GKEY_MAX, "%s/", group);
    if (n <= 0 || n >= GKEY_MAX)
        return VIGIL_ERANGE;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, GKEY_MAX - (size_t)n, fmt, ap);
    va_end(ap);
    return k >= 0 && (size_t)k < GKEY_MAX - (size_t)n ? 0 : VIGIL_ERANGE;
}

int gname_check(const char *s, size_t max)
{
    if (!s)
        return -EINVAL;
    size_t n = strnlen(s, max + 1);
    return n == 0 || n > max ? VIGIL_ERANGE : 0;
}

void ghex(int64_t lease, char out[17])
{
    snprintf(out, 17, "%" PRIx64, (uint64_t)lease);
}

uint64_t gnow_ns(void)
{
    return vigil_etcd__now_ns();
}

int64_t grealtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void gtxn_fence(struct gtxn *t, const vigil_group_member *m)
{
    char k[GKEY_MAX];
    if (gkey(k, m->group, "members/%s", m->hex) < 0) {
        t->err = VIGIL_ERANGE;
        return;
    }
    gtxn_cmp(t, k, G_CREATE, G_EQ, (int64_t)m->rev);
    t->fence_rev = (int64_t)m->rev; /* a store gone back below it: lost (gtxn_run) */
}

static void copy_str(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void gmember_parse(const struct gkv *kv, const char *hex, vigil_group_member_info *info)
{
    memset(info, 0, sizeof(*info));
    info->revision = (uint64_t)kv->create;
    info->lease = kv->lease;
    cJSON *j = kv->val && kv->vlen ? cJSON_ParseWithLength(kv->val, kv->vlen) : NULL;
    const cJSON *n = vigil_etcd__field(j, "name"), *h = vigil_etcd__field(j, "host"), *p = vigil_etcd__field(j, "pid");
    if (cJSON_IsString(n) && n->valuestring[0] && cJSON_IsString(h) && cJSON_IsNumber(p)) {
        copy_str(info->name, sizeof(info->name), n->valuestring, strlen(n->valuestring));
        copy_str(info->host, sizeof(info->host), h->valuestring, strlen(h->valuestring));
        info->pid = p->valuedouble >= 0 && p->valuedouble <= 4194304 ? (uint32_t)p->valuedouble : 0;
    } else {
        /* Not ours (an etcdctl elect campaigner: its value is its proposal). */
        info->flags = VIGIL_GROUP_FOREIGN;
        if (kv->vlen && kv->val)
            copy_str(info->name, sizeof(info->name), kv->val, strnlen(kv->val, kv->vlen));
        else
            copy_str(info->name, sizeof(info->name), hex, strlen(hex));
    }
    cJSON_Delete(j);
}

/* ---- join and leave -------------------------------------------------------- */

static char *member_value(const vigil_group_member *m)
{
    cJSON *j = cJSON_CreateObject();
    char *s = NULL;
    if (j && cJSON_AddStringToObject(j, "name", m->name) && cJSON_AddStringToObject(j, "host", m->host) &&
        cJSON_AddNumberToObject(j, "pid", m->pid) &&
        cJSON_AddNumberToObject(j, "start", (double)vigil_self_start_time()))
        s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static void pick_host(char *host, size_t cap, const struct vigil_group_options *o)
{
    const char *h = o && o->host ? o->host : getenv("VIGIL_HOST");
    if (h && *h) {
        copy_str(host, cap, h, strlen(h));
        return;
    }
    if (gethostname(host, cap - 1) != 0)
        snprintf(host, cap, "localhost");
    host[cap - 1] = '\0';
}

static void revoke_lease(vigil_etcd *e, int64_t lease)
{
    vigil_etcd__lock(e);
    (void)vigil_etcd__revoke_locked(e, lease);
    vigil_etcd__unlock(e);
}

/* The keepalive's renewal: one lease/keepalive, nothing more. The member
 * key hangs on the lease, so the lease alive is the membership alive; a
 * key deleted by hand under a live lease is found by the member's next
 * write, which its fence refuses (VIGIL_ELOST). One request per 0.32 TTL
 * is a member's whole cost at rest. */
static int renew_member(void *ctx, const vigil_lease *l)
{
    return vigil_etcd__keepalive(ctx, l->id);
}

static void member_free(vigil_group_member *m)
{
    gstream_close(m->bstream);
    pthread_mutex_destroy(&m->lock);
    free(m->value);
    free(m);
}

/* The join txn: our name if nobody has it, our member key, the joins mark. */
static int join_txn(vigil_group_member *m)
{
    char km[GKEY_MAX], kn[GKEY_MAX], kj[GKEY_MAX];
    int rc;
    if ((rc = gkey(km, m->group, "members/%s", m->hex)) < 0 || (rc = gkey(kn, m->group, "names/%s", m->name)) < 0 ||
        (rc = gkey(kj, m->group, "joins")) < 0)
        return rc;
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_cmp(&t, kn, G_CREATE, G_EQ, 0);
    gtxn_put(&t, G_OK, km, m->value, strlen(m->value), m->lease);
    gtxn_put(&t, G_OK, kn, m->hex, strlen(m->hex), m->lease);
    gtxn_put(&t, G_OK, kj, "", 0, 0);
    gfence_join(&t, m);
    gtxn_range(&t, G_FAIL, km, G_KEYS_ONLY, 0); /* ours, if a first sending landed unanswered */
    rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (rc == VIGIL_ELOST)
        /* Our lease gone between grant and join: revoked (a host's agent
         * that took us for dead, an operator) or expired (etcd slower
         * than the TTL). Said as it is, never as a timeout. */
        vigil_etcd__why("the member's lease %s was gone before its join landed (revoked, by a host's agent or "
                        "by hand, or expired); nothing was joined", m->hex);
    if (rc < 0)
        return rc;
    struct gkv me;
    int f = 0;
    m->fence = 1;
    if (r.ok)
        m->rev = (uint64_t)r.rev;
    else if ((f = greply_first(&r, 0, &me)) == 1 && me.lease == m->lease)
        m->rev = (uint64_t)me.create; /* our member key on our own lease: our join, sent twice */
    else
        rc = f < 0 ? f : VIGIL_EBUSY;
    if (f == 1)
        gkv_free(&me);
    greply_free(&r);
    return rc;
}

int vigil_group_join_opts(vigil_etcd *e, const char *group, const char *name, uint64_t ttl_ms,
                          const struct vigil_group_options *opts, vigil_group_member **out)
{
    vigil_etcd__why("%s", ""); /* a call's errmsg is its own */
    if (!e || !out)
        return -EINVAL;
    int rc;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0 || (rc = gname_check(name, VIGIL_MEMBER_MAX)) < 0)
        return rc;
    uint64_t secs = ttl_ms / 1000 + (ttl_ms % 1000 != 0);
    if (ttl_ms == 0 || secs > VIGIL_ETCD_MAX_TTL_S)
        return VIGIL_ERANGE;
    const char *dir = opts && opts->dir ? opts->dir : getenv("VIGIL_DIR");
    vigil_group_member *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    m->e = e;
    memcpy(m->group, group, strlen(group));
    memcpy(m->name, name, strlen(name));
    pick_host(m->host, sizeof(m->host), opts);
    m->pid = vigil_self_pid();
    if (!(m->value = member_value(m))) {
        member_free(m);
        return -ENOMEM;
    }
    int64_t granted = 0;
    uint64_t sent = gnow_ns();
    vigil_etcd__lock(e);
    rc = vigil_etcd__grant_locked(e, secs, &m->lease, &granted);
    vigil_etcd__unlock(e);
    if (rc < 0) {
        member_free(m);
        return rc;
    }
    ghex(m->lease, m->hex);
    m->ttl_ms = (uint64_t)granted * 1000;
    /* The record first: a death between the join and the record would
     * leave the member to lapse at its TTL instead of at once. */
    if ((dir && *dir && (rc = grecord_write(m, dir)) < 0) || (rc = join_txn(m)) < 0)
        goto undo;
    vigil_lease l;
    memset(&l, 0, sizeof(l));
    snprintf(l.key, sizeof(l.key), "%s/members", m->group);
    memcpy(l.owner, m->name, strlen(m->name));
    l.token = m->rev;
    l.ttl_ms = m->ttl_ms;
    l.id = m->lease;
    vigil_lease_note_sent(&l, sent); /* local expiry runs from the grant's sending */
    vigil_lease_port port = { .ctx = e, .renew = renew_member };
    if ((rc = vigil_keepalive_start(&port, &l, &m->ka)) < 0)
        goto undo;
    *out = m;
    return 0;
undo:;
    char why[256];
    vigil_etcd__why_save(why, sizeof(why)); /* the failure's, not the revoke's */
    revoke_lease(e, m->lease); /* and with it whatever the join put */
    vigil_etcd__why_restore(why);
    grecord_remove(m);
    member_free(m);
    return rc;
}

int vigil_group_join(vigil_etcd *e, const char *group, const char *name, uint64_t ttl_ms, vigil_group_member **out)
{
    return vigil_group_join_opts(e, group, name, ttl_ms, NULL, out);
}

/* Our member key, at the join revision, is there (so the lease lives): 1,
 * 0 gone, or the error. */
static int still_member(vigil_group_member *m)
{
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_fence(&t, m);
    int rc = gtxn_run(m->e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    rc = r.ok;
    greply_free(&r);
    return rc;
}

int vigil_group_leave(vigil_group_member *m)
{
    if (!m)
        return 0;
    int rc = vigil_keepalive_stop(m->ka);
    /* Revoked even when lost: on etcd the lease may outlive a local
     * expiry, and revoking it frees the name and the units at once. The
     * record goes only once the revoke is answered, so that the agent
     * revokes it if we could not. Our key is looked at first: a revoke
     * answered "not found" is this very revoke delivered twice when the
     * lease lived as it was sent (or not known not to; an earlier copy of
     * it that may have landed makes revoke_locked say 0 itself); when our
     * key was seen gone, the membership was lost before the leave
     * (revoked by hand or by the agent): VIGIL_ELOST. */
    int alive = rc == 0 ? still_member(m) : 0;
    vigil_etcd__lock(m->e);
    int rv = vigil_etcd__revoke_locked(m->e, m->lease);
    vigil_etcd__unlock(m->e);
    if (rv == 0 || rv == VIGIL_ELOST)
        grecord_remove(m);
    if (rv == VIGIL_ELOST && alive != 0)
        rv = 0; /* gone by this revoke: its first copy's answer lost */
    if (rc == 0 && rv < 0)
        rc = rv;
    member_free(m);
    return rc;
}

int vigil_group_self(const vigil_group_member *m, vigil_group_member_info *out)
{
    if (!m || !out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    memcpy(out->name, m->name, sizeof(m->name));
    memcpy(out->host, m->host, sizeof(out->host));
    out->pid = m->pid;
    out->revision = m->rev;
    out->lease = m->lease;
    return 0;
}

int vigil_group_lost_fd(const vigil_group_member *m)
{
    return m ? vigil_keepalive_fd(m->ka) : -EINVAL;
}

bool vigil_group_lost(const vigil_group_member *m)
{
    return m && vigil_keepalive_lost(m->ka);
}

/* ---- who is in ------------------------------------------------------------- */

int vigil_group_members(vigil_etcd *e, const char *group, vigil_group_member_info *out, uint32_t max)
{
    int rc;
    if (!e || (max && !out))
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0)
        return rc;
    char k[GKEY_MAX];
    if ((rc = gkey(k, group, "members/")) < 0)
        return rc;
    size_t plen = strlen(k);
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, k, G_PREFIX | G_BY_CREATE, 0);
    rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int64_t count;
    const cJSON *kvs, *kv;
    uint32_t n = 0;
    if ((rc = greply_range(&r, 0, &count, &kvs)) == 0) {
        cJSON_ArrayForEach(kv, kvs) {
            struct gkv g;
            if ((rc = gkv_read(kv, &g)) < 0)
                break;
            if (n < max && strncmp(g.key, k, plen) == 0)
                gmember_parse(&g, g.key + plen, &out[n]);
            gkv_free(&g);
            n++;
        }
    }
    greply_free(&r);
    return rc < 0 ? rc : (int)(n > INT32_MAX ? INT32_MAX : n);
}

int vigil_group_leader(vigil_etcd *e, const char *group, vigil_group_member_info *out)
{
    if (!out)
        return -EINVAL;
    int rc;
    char k[GKEY_MAX];
    if (!e)
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0 || (rc = gkey(k, group, "members/")) < 0)
        return rc;
    struct gtxn t;
    struct greply r;
    struct gkv g;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, k, G_PREFIX | G_BY_CREATE, 1);
    rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    rc = greply_first(&r, 0, &g);
    greply_free(&r);
    if (rc == 0)
        return VIGIL_ENOPEERS;
    if (rc < 0)
        return rc;
    gmember_parse(&g, g.key + strlen(k), out);
    gkv_free(&g);
    return 0;
}

int vigil_group_is_leader(vigil_group_member *m)
{
    if (!m)
        return -EINVAL;
    vigil_group_member_info l;
    int rc = vigil_group_leader(m->e, m->group, &l);
    if (rc == VIGIL_ENOPEERS)
        return 0;
    return rc < 0 ? rc : l.lease == m->lease && l.revision == m->rev;
}

/* ---- the group at a glance --------------------------------------------------- */

int vigil_group_stats_get(vigil_etcd *e, const char *group, vigil_group_stats *out)
{
    int rc;
    if (!e || !out)
        return -EINVAL;
    if ((rc = gname_check(group, VIGIL_GROUP_MAX)) < 0)
        return rc;
    char km[GKEY_MAX], ku[GKEY_MAX], ko[GKEY_MAX], kd[GKEY_MAX], kr[GKEY_MAX];
    if ((rc = gkey(km, group, "members/")) < 0 || (rc = gkey(ku, group, "work/units/")) < 0 ||
        (rc = gkey(ko, group, "work/owners/")) < 0 || (rc = gkey(kd, group, "work/done/")) < 0 ||
        (rc = gkey(kr, group, "round")) < 0)
        return rc;
    struct gtxn t;
    struct greply r;
    gtxn_init(&t);
    gtxn_range(&t, G_OK, km, G_PREFIX | G_COUNT, 0);
    gtxn_range(&t, G_OK, ku, G_PREFIX | G_COUNT, 0);
    gtxn_range(&t, G_OK, ko, G_PREFIX | G_COUNT, 0);
    gtxn_range(&t, G_OK, kd, G_PREFIX | G_COUNT, 0);
    gtxn_range(&t, G_OK, kr, 0, 0);
    gtxn_range(&t, G_OK, km, G_PREFIX | G_BY_CREATE | G_KEYS_ONLY, 1);
    rc = gtxn_run(e, &t, &r);
    gtxn_free(&t);
    if (rc < 0)
        return rc;
    int64_t c[4];
    const cJSON *kvs;
    struct gkv round = { 0 }, first = { 0 };
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = greply_range(&r, i, &c[i], &kvs);
    int hr = rc < 0 ? rc : greply_first(&r, 4, &round);
    int hf = hr < 0 ? hr : greply_first(&r, 5, &first);
    int64_t rev = r.rev;
    greply_free(&r);
    if (rc == 0 && (hr < 0 || hf < 0))
        rc = hr < 0 ? hr : hf;
    if (rc == 0) {
        memset(out, 0, sizeof(*out));
        out->members = (uint32_t)(c[0] > UINT32_MAX ? UINT32_MAX : c[0]);
        int64_t free_units = c[1] - c[2]; /* every owner key names a unit in the set */
        out->units_free = (uint32_t)(free_units < 0 ? 0 : free_units > UINT32_MAX ? UINT32_MAX : free_units);
        out->units_owned = (uint32_t)(c[2] > UINT32_MAX ? UINT32_MAX : c[2]);
        out->units_done = (uint32_t)(c[3] > UINT32_MAX ? UINT32_MAX : c[3]);
        out->round = hr == 1 && round.val ? strtoull(round.val, NULL, 10) : 0;
        out->term = hf == 1 ? (uint64_t)first.create : 0;
        out->revision = (uint64_t)rev;
    }
    gkv_free(&round);
    gkv_free(&first);
    return rc;
}
