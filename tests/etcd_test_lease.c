/* SPDX-License-Identifier: MIT */
/*
 * Description: the etcd adapter against a real etcd (the CTest fixture's):
 * acquire, renew, release and their refusals; two processes contending
 * for a key; a holder killed with SIGKILL whose lease lapses and passes on
 * with a greater token; a key taken behind a live lease; a keepalive
 * holding a key well past its TTL on a handle shared with the caller, and
 * noticing a revoke; TTL rounding; keys and owners of any bytes; a dead
 * endpoint ahead of the live one. Skips when etcd is not installed.
 */
#include "etcd_testutil.h"

#include <pthread.h>

static const char *url;

/* The decimal after "name":" in a gateway reply (int64 fields are strings),
 * or def when absent. */
static int64_t reply_i64(const char *reply, const char *name, int64_t def)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":\"", name);
    const char *p = strstr(reply, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : def;
}

/* The lease's remaining TTL as etcd tells it without renewing it: -1 once
 * expired or revoked; -999 if etcd could not be asked. */
static int64_t lease_ttl(vigil_etcd *e, int64_t id, int64_t *granted)
{
    char body[64];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)id);
    if (vigil_etcd__request(e, "v3/lease/timetolive", body, &http, &reply, &len) < 0 || http != 200)
        return -999;
    if (granted)
        *granted = reply_i64(reply, "grantedTTL", 0);
    return reply_i64(reply, "TTL", 0);
}

/* A holder's own key in etcd, KEY/<lease id in hex> (a static buffer). */
static const char *own(const vigil_lease *l)
{
    static char buf[200];
    vigil_etcd__own_key(l->key, l->id, buf, sizeof(buf));
    return buf;
}

/* The key as etcd has it: 1 and its lease, create_revision and base64
 * value; 0 absent; -1 on error. */
static int key_get(vigil_etcd *e, const char *key, int64_t *lease, int64_t *rev, char *value, size_t cap)
{
    char kb[300], body[400];
    long http;
    const char *reply;
    size_t len;
    vigil_etcd__b64(key, strlen(key), kb, sizeof(kb));
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", kb);
    if (vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len) < 0 || http != 200)
        return -1;
    if (!strstr(reply, "\"kvs\""))
        return 0;
    *lease = reply_i64(reply, "lease", 0);
    *rev = reply_i64(reply, "create_revision", 0);
    const char *v = strstr(reply, "\"value\":\"");
    value[0] = '\0';
    if (v) {
        v += 9;
        size_t n = strcspn(v, "\"");
        if (n < cap) {
            memcpy(value, v, n);
            value[n] = '\0';
        }
    }
    return 1;
}

/* An operator's "etcdctl del key", behind the adapter's back. */
static int key_delete(vigil_etcd *e, const char *key)
{
    char kb[300], body[400];
    long http;
    const char *reply;
    size_t len;
    vigil_etcd__b64(key, strlen(key), kb, sizeof(kb));
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", kb);
    int rc = vigil_etcd__request(e, "v3/kv/deleterange", body, &http, &reply, &len);
    return rc < 0 ? rc : http == 200 ? 0 : -EIO;
}


#define NEED_ETCD()                                                           \
    do {                                                                      \
        int need_rc_ = et_fixture(&url);                                      \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
    } while (0)

static int test_cycle(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("cycle");
    vigil_lease l, l2;
    EXPECT_RC(vigil_etcd_acquire(e, key, "owner-a", 1000, &l), 0);
    EXPECT(strcmp(l.key, key) == 0 && strcmp(l.owner, "owner-a") == 0 && l.token > 0 && l.id > 0 &&
           l.ttl_ms >= 1000 && l.ttl_ms % 1000 == 0,
           "lease: key %s owner %s token %llu id %lld ttl_ms %llu", l.key, l.owner,
           (unsigned long long)l.token, (long long)l.id, (unsigned long long)l.ttl_ms);
    int64_t lease = 0, rev = 0;
    char value[128];
    EXPECT(key_get(e, own(&l), &lease, &rev, value, sizeof(value)) == 1, "expected %s in etcd", own(&l));
    EXPECT(lease == l.id && (uint64_t)rev == l.token && strcmp(value, "b3duZXItYQ==") == 0,
           "etcd has lease %lld rev %lld value %s; expected %lld %llu b3duZXItYQ==", (long long)lease,
           (long long)rev, value, (long long)l.id, (unsigned long long)l.token);
    /* Held: the same owner string is refused too, as in the embedded store. */
    EXPECT_RC(vigil_etcd_acquire(e, key, "owner-a", 1000, &l2), VIGIL_EBUSY);
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    vigil_lease_port port = vigil_etcd_port(e);
    EXPECT_RC(port.renew(port.ctx, &l), 0);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    EXPECT(key_get(e, own(&l), &lease, &rev, value, sizeof(value)) == 0, "the key outlived its release");
    EXPECT(lease_ttl(e, l.id, NULL) == -1, "the lease outlived its release");
    /* Released: refused on renew and on a second release. */
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ELOST);
    /* Free again, with a greater token. */
    EXPECT_RC(vigil_etcd_acquire(e, key, "owner-b", 1000, &l2), 0);
    EXPECT(l2.token > l.token && l2.id != l.id, "expected a greater token than %llu, got %llu",
           (unsigned long long)l.token, (unsigned long long)l2.token);
    /* The old lease cannot touch the new holder's key. */
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_renew(e, &l2), 0);
    EXPECT_RC(vigil_etcd_release(e, &l2), 0);
    vigil_etcd_close(e);
    return 0;
}

/* What a contending child reports to the parent. */
struct outcome {
    int      rc;
    uint64_t token;
};

/* Two processes race for one key, three rounds: exactly one wins each
 * round, the other gets VIGIL_EBUSY, and every hand-over raises the token. */
static int test_contend(void)
{
    NEED_ETCD();
    const char *key = et_key("contend");
    vigil_etcd *e = et_connect(url);
    uint64_t last = 0;
    for (int round = 0; round < 3; round++) {
        /* go closes to start the race (both see EOF at once), done closes
         * once the parent has looked, res carries the outcomes. */
        int go[2], done[2], res[2];
        EXPECT(pipe(go) == 0 && pipe(done) == 0 && pipe(res) == 0, "pipe: %s", strerror(errno));
        pid_t kids[2];
        for (int i = 0; i < 2; i++) {
            fflush(stdout);
            fflush(stderr);
            kids[i] = fork();
            EXPECT(kids[i] >= 0, "fork: %s", strerror(errno));
            if (kids[i] == 0) {
                close(go[1]);
                close(done[1]);
                close(res[0]);
                vigil_etcd *ce = et_connect(url);
                char owner[32], c;
                snprintf(owner, sizeof(owner), "kid-%d-%d", round, i);
                if (read(go[0], &c, 1) != 0)
                    _exit(3);
                vigil_lease l;
                struct outcome o = { vigil_etcd_acquire(ce, key, owner, 2000, &l), 0 };
                if (o.rc == 0)
                    o.token = l.token;
                if (write(res[1], &o, sizeof(o)) != sizeof(o))
                    _exit(3);
                if (read(done[0], &c, 1) != 0)
                    _exit(3);
                int rel = o.rc == 0 ? vigil_etcd_release(ce, &l) : 0;
                vigil_etcd_close(ce);
                _exit(rel == 0 ? 0 : 1);
            }
        }
        close(go[0]);
        close(done[0]);
        close(res[1]);
        close(go[1]);
        struct outcome o[2];
        bool got = et_read_bounded(res[0], &o[0], sizeof(o[0]), 15000) &&
                   et_read_bounded(res[0], &o[1], sizeof(o[1]), 15000);
        vigil_lease probe;
        int busy = vigil_etcd_acquire(e, key, "parent", 1000, &probe);
        close(done[1]);
        close(res[0]);
        int s0 = vt_wait(kids[0], 15000), s1 = vt_wait(kids[1], 15000);
        EXPECT(got, "round %d: the children did not both report (exit statuses %d, %d)", round, s0, s1);
        int winners = (o[0].rc == 0) + (o[1].rc == 0);
        int busies = (o[0].rc == VIGIL_EBUSY) + (o[1].rc == VIGIL_EBUSY);
        EXPECT(winners == 1 && busies == 1, "round %d: expected one win and one VIGIL_EBUSY, got %d (%s) and %d (%s)",
               round, o[0].rc, vigil_strerror(o[0].rc), o[1].rc, vigil_strerror(o[1].rc));
        uint64_t token = o[0].rc == 0 ? o[0].token : o[1].token;
        EXPECT(token > last, "round %d: token %llu not above the last holder's %llu", round,
               (unsigned long long)token, (unsigned long long)last);
        last = token;
        EXPECT_RC(busy, VIGIL_EBUSY);
        EXPECT(s0 == 0 && s1 == 0, "round %d: children exited %d and %d (the winner's release failed?)", round, s0, s1);
    }
    vigil_etcd_close(e);
    return 0;
}

/* A holder killed with SIGKILL renews no more: its lease lapses, the key
 * passes to the next acquirer with a greater token, and the dead holder's
 * lease is refused on renew. */
static int test_crashed_holder(void)
{
    NEED_ETCD();
    const char *key = et_key("crash");
    vigil_lease dead;
    pid_t kid = et_kid_holder(url, key, "doomed", 1000, &dead);
    EXPECT(kid >= 0, "fork: %s", strerror(errno));
    bool got = dead.token > 0;
    kill(kid, SIGKILL);
    int st = vt_wait(kid, 5000);
    EXPECT(got, "the child did not acquire");
    EXPECT(st == 128 + SIGKILL, "expected the child killed by SIGKILL, status %d", st);

    vigil_etcd *e = et_connect(url);
    vigil_lease l;
    int rc = VIGIL_EBUSY;
    uint64_t deadline = vt_now_ms() + dead.ttl_ms * 3 + 5000;
    while ((rc = vigil_etcd_acquire(e, key, "heir", 1000, &l)) == VIGIL_EBUSY && vt_now_ms() < deadline)
        vt_sleep_ms(100);
    EXPECT_RC(rc, 0);
    EXPECT(l.token > dead.token, "expected the heir's token above %llu, got %llu",
           (unsigned long long)dead.token, (unsigned long long)l.token);
    EXPECT(lease_ttl(e, dead.id, NULL) == -1, "the dead holder's lease is still alive");
    EXPECT_RC(vigil_etcd_renew(e, &dead), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &dead), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    vigil_etcd_close(e);
    return 0;
}

/* A lease left to lapse, with nobody waiting for the key: refused. */
static int test_lapsed(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    const char *key = et_key("lapse");
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, "idle", 1000, &l), 0);
    int64_t ttl;
    uint64_t deadline = vt_now_ms() + l.ttl_ms * 3 + 5000;
    while ((ttl = lease_ttl(e, l.id, NULL)) != -1 && vt_now_ms() < deadline)
        vt_sleep_ms(100);
    EXPECT(ttl == -1, "the lease did not lapse within %llu ms (TTL %lld)",
           (unsigned long long)(l.ttl_ms * 3 + 5000), (long long)ttl);
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ELOST);
    int64_t lease, rev;
    char value[64];
    EXPECT(key_get(e, own(&l), &lease, &rev, value, sizeof(value)) == 0, "the key outlived its lease");
    vigil_etcd_close(e);
    return 0;
}

/* An operator deletes the key and another client takes it while our lease
 * still lives: a keepalive alone would succeed, but the renewal is
 * refused, and the old lease cannot release the new holder's key. */
static int test_taken_behind_lease(void)
{
    NEED_ETCD();
    vigil_etcd *a = et_connect(url), *b = et_connect(url);
    const char *key = et_key("taken");
    vigil_lease la, lb;
    EXPECT_RC(vigil_etcd_acquire(a, key, "a", 3000, &la), 0);
    EXPECT_RC(key_delete(b, own(&la)), 0);
    EXPECT_RC(vigil_etcd_acquire(b, key, "b", 3000, &lb), 0);
    EXPECT(lb.token > la.token, "tokens %llu then %llu", (unsigned long long)la.token, (unsigned long long)lb.token);
    EXPECT(lease_ttl(a, la.id, NULL) > 0, "a's lease should still be alive");
    EXPECT_RC(vigil_etcd_renew(a, &la), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(a, &la), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_renew(b, &lb), 0);
    int64_t lease = 0, rev = 0;
    char value[64];
    EXPECT(key_get(b, own(&lb), &lease, &rev, value, sizeof(value)) == 1 && lease == lb.id,
           "b's key should be untouched by a's release (lease %lld, b's %lld)", (long long)lease, (long long)lb.id);
    EXPECT_RC(vigil_etcd_release(b, &lb), 0);
    vigil_etcd_close(a);
    vigil_etcd_close(b);
    return 0;
}

/* A keepalive holds the key through more than three TTLs, on the handle
 * the caller keeps using (probing and renewing on another key), while a
 * second client is refused throughout. */
static int test_keepalive_holds(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url), *other = et_connect(url);
    const char *key = et_key("held"), *side = et_key("side");
    vigil_lease l, side_l, probe;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 1000, &l), 0);
    EXPECT_RC(vigil_etcd_acquire(e, side, "holder", 5000, &side_l), 0);
    vigil_lease_port port = vigil_etcd_port(e);
    vigil_keepalive *ka = NULL;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    uint64_t until = vt_now_ms() + l.ttl_ms * 7 / 2;
    int busy_other = VIGIL_EBUSY, busy_same = VIGIL_EBUSY, side_rc = 0, probes = 0;
    while (vt_now_ms() < until && busy_other == VIGIL_EBUSY && busy_same == VIGIL_EBUSY && side_rc == 0) {
        busy_other = vigil_etcd_acquire(other, key, "thief", 1000, &probe);
        busy_same = vigil_etcd_acquire(e, key, "thief", 1000, &probe);
        side_rc = vigil_etcd_renew(e, &side_l);
        probes++;
        vt_sleep_ms(150);
    }
    bool lost = vigil_keepalive_lost(ka);
    vigil_keepalive_info info;
    memset(&info, 0, sizeof(info));
    vigil_keepalive_stats(ka, &info);
    int stop = vigil_keepalive_stop(ka);
    EXPECT_RC(busy_other, VIGIL_EBUSY);
    EXPECT_RC(busy_same, VIGIL_EBUSY);
    EXPECT_RC(side_rc, 0);
    EXPECT(!lost && stop == 0, "keepalive lost %d, stop %d (%s)", lost, stop, vigil_strerror(stop));
    EXPECT(info.renewals >= 3, "expected at least 3 renewals in 3.5 TTLs, got %llu (failures %llu)",
           (unsigned long long)info.renewals, (unsigned long long)info.failures);
    EXPECT(probes >= 3, "only %d probes", probes);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    EXPECT_RC(vigil_etcd_renew(e, &l), VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &side_l), 0);
    vigil_etcd_close(e);
    vigil_etcd_close(other);
    return 0;
}

/* A keepalive whose lease is revoked under it is refused, stops for good,
 * and says so. */
static int test_keepalive_refused(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url), *admin = et_connect(url);
    const char *key = et_key("revoked");
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, "holder", 1000, &l), 0);
    vigil_lease_port port = vigil_etcd_port(e);
    vigil_keepalive *ka = NULL;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    vt_sleep_ms(100);
    EXPECT_RC(et_revoke(admin, l.id), 0);
    bool lost = VT_WAIT_FOR(vigil_keepalive_lost(ka), l.ttl_ms * 2 + 3000);
    int stop = vigil_keepalive_stop(ka);
    EXPECT(lost, "the keepalive did not notice the revoke within %llu ms",
           (unsigned long long)(l.ttl_ms * 2 + 3000));
    EXPECT_RC(stop, VIGIL_ELOST);
    EXPECT_RC(vigil_etcd_release(e, &l), VIGIL_ELOST);
    vigil_etcd_close(e);
    vigil_etcd_close(admin);
    return 0;
}

/* ttl_ms rounds up to whole seconds; etcd raises what is below its minimum. */
static int test_ttl_rounding(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    static const uint64_t ask[] = { 1, 999, 1000, 1001, 2500, 3000 };
    static const uint64_t secs[] = { 1, 1, 1, 2, 3, 3 };
    for (unsigned i = 0; i < 6; i++) {
        vigil_lease l;
        const char *key = et_key("ttl");
        EXPECT_RC(vigil_etcd_acquire(e, key, "t", ask[i], &l), 0);
        int64_t granted = 0;
        int64_t left = lease_ttl(e, l.id, &granted);
        int rel = vigil_etcd_release(e, &l);
        EXPECT(granted >= (int64_t)secs[i] && (uint64_t)granted * 1000 == l.ttl_ms && left >= 0,
               "ttl_ms %llu: expected at least %llu s granted and reported, etcd granted %lld (%lld left), lease says %llu ms",
               (unsigned long long)ask[i], (unsigned long long)secs[i], (long long)granted, (long long)left,
               (unsigned long long)l.ttl_ms);
        /* Above etcd's minimum the request is taken exactly. */
        EXPECT(secs[i] < 2 || granted == (int64_t)secs[i], "ttl_ms %llu: expected exactly %llu s, got %lld",
               (unsigned long long)ask[i], (unsigned long long)secs[i], (long long)granted);
        EXPECT_RC(rel, 0);
    }
    vigil_etcd_close(e);
    return 0;
}

/* Keys and owners are bytes: quotes, backslashes, slashes, spaces, UTF-8,
 * control characters go through base64 untouched; the longest that fit. */
static int test_any_bytes(void)
{
    NEED_ETCD();
    vigil_etcd *e = et_connect(url);
    char key[128];
    snprintf(key, sizeof(key), "%s", et_key("q\"uo\\te/ sp\xc3\xa9\t\x01}"));
    const char *owner = "o\"w\\n{]\n";
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, key, owner, 1000, &l), 0);
    int64_t lease = 0, rev = 0;
    char value[128], want[128];
    vigil_etcd__b64(owner, strlen(owner), want, sizeof(want));
    EXPECT(key_get(e, own(&l), &lease, &rev, value, sizeof(value)) == 1 && strcmp(value, want) == 0 && lease == l.id,
           "expected the key with value %s, got %s", want, value);
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);

    char longkey[128], longowner[64];
    memset(longkey, 'K', 127);
    longkey[127] = '\0';
    const char *prefix = et_key("x");
    memcpy(longkey, prefix, strlen(prefix));
    memset(longowner, 'O', 63);
    longowner[63] = '\0';
    EXPECT_RC(vigil_etcd_acquire(e, longkey, longowner, 1000, &l), 0);
    EXPECT(strlen(l.key) == 127 && strlen(l.owner) == 63, "lengths %zu %zu", strlen(l.key), strlen(l.owner));
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    vigil_etcd_close(e);
    return 0;
}

/* Endpoints in turn: a dead one first, then etcd. */
static int test_dead_endpoint_first(void)
{
    NEED_ETCD();
    char spec[400];
    snprintf(spec, sizeof(spec), "http://127.0.0.1:%d, %s", et_closed_port(), url);
    vigil_etcd *e = et_connect(spec);
    vigil_lease l;
    EXPECT_RC(vigil_etcd_acquire(e, et_key("multi"), "m", 1000, &l), 0);
    EXPECT(strcmp(vigil_etcd__current_endpoint(e), url) == 0, "expected %s current, got %s", url,
           vigil_etcd__current_endpoint(e));
    EXPECT_RC(vigil_etcd_renew(e, &l), 0);
    EXPECT_RC(vigil_etcd_release(e, &l), 0);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_cycle), VT_CASE(test_contend), VT_CASE(test_crashed_holder), VT_CASE(test_lapsed),
        VT_CASE(test_taken_behind_lease), VT_CASE(test_keepalive_holds), VT_CASE(test_keepalive_refused),
        VT_CASE(test_ttl_rounding), VT_CASE(test_any_bytes), VT_CASE(test_dead_endpoint_first))
