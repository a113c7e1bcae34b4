/* SPDX-License-Identifier: MIT */
/*
 * Description: embedded lease store in one process: acquire, busy while
 * unexpired (same owner included), renew, release, expiry, fencing tokens
 * that grow on every hand-over, a full store, argument ranges, rebinding
 * keys, the entry view, a keepalive on the store's port, and recovery from
 * entries left locked by a process that no longer exists.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#include "leases_internal.h"

static int test_acquire_release(void)
{
    vigil_leases *ls = vt_leases_fresh("basic.leases", 8);
    EXPECT(vigil_leases_capacity(ls) == 8, "capacity %u", vigil_leases_capacity(ls));
    vigil_lease a, b;
    memset(&b, 0x5a, sizeof(b));
    EXPECT_RC(vigil_leases_acquire(ls, "scope/1", "alice", 5000, &a), 0);
    EXPECT(strcmp(a.key, "scope/1") == 0 && strcmp(a.owner, "alice") == 0 && a.ttl_ms == 5000,
           "lease fields: key %s owner %s ttl %llu", a.key, a.owner, (unsigned long long)a.ttl_ms);
    EXPECT(a.token == 1, "expected the first token to be 1, got %llu", (unsigned long long)a.token);
    EXPECT(a.id >= 1 && a.id <= 8, "expected the entry as id, got %lld", (long long)a.id);
    vigil_lease saved = b;
    EXPECT_RC(vigil_leases_acquire(ls, "scope/1", "bob", 5000, &b), VIGIL_EBUSY);
    EXPECT(memcmp(&b, &saved, sizeof(b)) == 0, "a refused acquire wrote its output");
    /* The same owner string gets no second copy either. */
    EXPECT_RC(vigil_leases_acquire(ls, "scope/1", "alice", 5000, &b), VIGIL_EBUSY);
    EXPECT_RC(vigil_leases_renew(ls, &a), 0);
    EXPECT_RC(vigil_leases_release(ls, &a), 0);
    EXPECT_RC(vigil_leases_release(ls, &a), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_renew(ls, &a), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_acquire(ls, "scope/1", "bob", 5000, &b), 0);
    EXPECT(b.token > a.token, "expected a greater token on hand-over, got %llu after %llu",
           (unsigned long long)b.token, (unsigned long long)a.token);
    EXPECT(b.id == a.id, "the key moved from entry %lld to %lld", (long long)a.id, (long long)b.id);
    /* The old holder's lease names the same entry and key: the token alone
     * refuses it. */
    EXPECT_RC(vigil_leases_renew(ls, &a), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_release(ls, &a), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_renew(ls, &b), 0);
    vigil_leases_close(ls);
    vigil_leases_close(NULL);
    return 0;
}

/* Timing-free: a refusal is only a failure when the lease cannot have
 * lapsed, that is when less than its TTL passed between the start of the
 * last successful call and the end of this one. */
static int test_expiry(void)
{
    vigil_leases *ls = vt_leases_fresh("expiry.leases", 4);
    vigil_lease a, b;
    const uint64_t ttl = 200;
    uint64_t t0 = vt_now_ms();
    EXPECT_RC(vigil_leases_acquire(ls, "short", "alice", ttl, &a), 0);
    int rc = vigil_leases_acquire(ls, "short", "bob", ttl, &b);
    EXPECT(rc == VIGIL_EBUSY || (rc == 0 && vt_now_ms() - t0 >= ttl),
           "bob acquired alice's unexpired lease: %d (%s)", rc, vigil_strerror(rc));
    if (rc == 0)
        return VT_SKIP; /* the machine stalled past the TTL: nothing left to judge */
    vt_sleep_ms(ttl + 50);
    EXPECT_RC(vigil_leases_renew(ls, &a), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_release(ls, &a), VIGIL_ELOST);
    uint64_t last_ok = vt_now_ms();
    EXPECT_RC(vigil_leases_acquire(ls, "short", "bob", ttl, &b), 0);
    EXPECT(b.token > a.token, "expected a greater token after expiry, got %llu after %llu",
           (unsigned long long)b.token, (unsigned long long)a.token);
    /* Renewals keep a short lease for longer than its TTL: 8 x 50 ms. */
    for (int i = 0; i < 8; i++) {
        vt_sleep_ms(50);
        uint64_t before = vt_now_ms();
        rc = vigil_leases_renew(ls, &b);
        uint64_t after = vt_now_ms();
        EXPECT(rc == 0 || (rc == VIGIL_ELOST && after - last_ok >= ttl),
               "renew %d refused %llu ms after the last renewal began (ttl %llu): %s", i,
               (unsigned long long)(after - last_ok), (unsigned long long)ttl, vigil_strerror(rc));
        if (rc != 0)
            return VT_SKIP; /* stalled past the TTL; the refusal was right */
        last_ok = before;
    }
    vigil_lease c;
    rc = vigil_leases_acquire(ls, "short", "carol", ttl, &c);
    EXPECT(rc == VIGIL_EBUSY || (rc == 0 && vt_now_ms() - last_ok >= ttl),
           "carol took a renewed lease: %d (%s)", rc, vigil_strerror(rc));
    vigil_leases_close(ls);
    return 0;
}

static int test_tokens_grow(void)
{
    vigil_leases *ls = vt_leases_fresh("tokens.leases", 4);
    uint64_t last = 0;
    for (int i = 0; i < 200; i++) {
        vigil_lease l;
        const char *key = (i % 3 == 0) ? "k0" : (i % 3 == 1) ? "k1" : "k2";
        EXPECT_RC(vigil_leases_acquire(ls, key, "x", 1000, &l), 0);
        EXPECT(l.token > last, "token %llu after %llu: not increasing", (unsigned long long)l.token,
               (unsigned long long)last);
        last = l.token;
        EXPECT_RC(vigil_leases_release(ls, &l), 0);
    }
    /* A second handle on the same file shares the counter. */
    vigil_leases *again;
    EXPECT_RC(vigil_leases_open(vt_path("tokens.leases"), &again), 0);
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire(again, "k9", "x", 1000, &l), 0);
    EXPECT(l.token == last + 1, "expected token %llu from the shared counter, got %llu",
           (unsigned long long)last + 1, (unsigned long long)l.token);
    vigil_leases_close(again);
    vigil_leases_close(ls);
    return 0;
}

static int test_full_and_reuse(void)
{
    vigil_leases *ls = vt_leases_fresh("full.leases", 3);
    vigil_lease l[3], x;
    char key[16];
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "key%d", i);
        EXPECT_RC(vigil_leases_acquire(ls, key, "o", 10000, &l[i]), 0);
    }
    memset(&x, 0x11, sizeof(x));
    vigil_lease saved = x;
    EXPECT_RC(vigil_leases_acquire(ls, "key3", "o", 10000, &x), VIGIL_EFULL);
    EXPECT(memcmp(&x, &saved, sizeof(x)) == 0, "a failed acquire wrote its output");
    /* A held key is busy before the store is full. */
    EXPECT_RC(vigil_leases_acquire(ls, "key1", "o", 10000, &x), VIGIL_EBUSY);
    /* A released entry takes a new key. */
    EXPECT_RC(vigil_leases_release(ls, &l[1]), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "key3", "o", 10000, &x), 0);
    EXPECT(x.id == l[1].id, "expected key3 in the released entry %lld, got %lld", (long long)l[1].id,
           (long long)x.id);
    /* key1 lost its binding: its holder is refused, and it needs a vacancy. */
    EXPECT_RC(vigil_leases_renew(ls, &l[1]), VIGIL_ELOST);
    vigil_lease y;
    EXPECT_RC(vigil_leases_acquire(ls, "key1", "o", 10000, &y), VIGIL_EFULL);
    /* An expired entry takes a new key too. */
    vigil_leases *ls2 = vt_leases_fresh("full2.leases", 1);
    EXPECT_RC(vigil_leases_acquire(ls2, "a", "o", 20, &x), 0);
    EXPECT_RC(vigil_leases_acquire(ls2, "b", "o", 20, &y), VIGIL_EFULL);
    vt_sleep_ms(40);
    EXPECT_RC(vigil_leases_acquire(ls2, "b", "o", 20, &y), 0);
    EXPECT(y.token > x.token, "rebinding gave token %llu after %llu", (unsigned long long)y.token,
           (unsigned long long)x.token);
    EXPECT_RC(vigil_leases_renew(ls2, &x), VIGIL_ELOST);
    vigil_leases_close(ls2);
    vigil_leases_close(ls);
    return 0;
}

static int test_ranges(void)
{
    vigil_leases *ls = vt_leases_fresh("ranges.leases", 4);
    vigil_lease l;
    char key[200], owner[100];
    memset(key, 'k', sizeof(key));
    memset(owner, 'o', sizeof(owner));
    key[127] = '\0'; /* 127 characters: fits with its NUL */
    owner[63] = '\0';
    EXPECT_RC(vigil_leases_acquire(ls, key, owner, 100, &l), 0);
    EXPECT(strlen(l.key) == 127 && strlen(l.owner) == 63, "long key/owner truncated: %zu %zu",
           strlen(l.key), strlen(l.owner));
    EXPECT_RC(vigil_leases_renew(ls, &l), 0);
    EXPECT_RC(vigil_leases_release(ls, &l), 0);
    key[127] = 'k';
    key[128] = '\0'; /* 128 characters: no room for the NUL */
    EXPECT_RC(vigil_leases_acquire(ls, key, "o", 100, &l), VIGIL_ERANGE);
    key[127] = '\0';
    owner[63] = 'o';
    owner[64] = '\0';
    EXPECT_RC(vigil_leases_acquire(ls, key, owner, 100, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "o", 2, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "o", 0, &l), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "o", 3, &l), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "", "o", 100, &l), -EINVAL);
    EXPECT_RC(vigil_leases_acquire(ls, NULL, "o", 100, &l), -EINVAL);
    EXPECT_RC(vigil_leases_acquire(ls, "k", NULL, 100, &l), -EINVAL);
    EXPECT_RC(vigil_leases_acquire(ls, "k", "o", 100, NULL), -EINVAL);
    EXPECT_RC(vigil_leases_acquire(NULL, "k", "o", 100, &l), -EINVAL);
    EXPECT_RC(vigil_leases_renew(NULL, &l), -EINVAL);
    EXPECT_RC(vigil_leases_renew(ls, NULL), -EINVAL);
    EXPECT_RC(vigil_leases_release(ls, NULL), -EINVAL);
    /* A lease whose key has no NUL is refused without reading past it. */
    vigil_lease bad;
    memset(&bad, 'z', sizeof(bad));
    EXPECT_RC(vigil_leases_renew(ls, &bad), VIGIL_ERANGE);
    /* A huge TTL is clamped, not wrapped. */
    EXPECT_RC(vigil_leases_acquire(ls, "forever", "o", UINT64_MAX, &l), 0);
    EXPECT_RC(vigil_leases_renew(ls, &l), 0);
    vigil_lease m;
    EXPECT_RC(vigil_leases_acquire(ls, "forever", "o", 100, &m), VIGIL_EBUSY);
    EXPECT(vigil_leases_capacity(NULL) == 0, "capacity(NULL) not 0");
    vigil_leases_close(ls);
    return 0;
}

/* A lease without the store's id (built by hand, or id scribbled) is found
 * by key; one naming another entry is refused. */
static int test_lease_id(void)
{
    vigil_leases *ls = vt_leases_fresh("id.leases", 8);
    vigil_lease a, b;
    EXPECT_RC(vigil_leases_acquire(ls, "alpha", "o", 5000, &a), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "beta", "o", 5000, &b), 0);
    vigil_lease byhand = a;
    byhand.id = 0;
    EXPECT_RC(vigil_leases_renew(ls, &byhand), 0);
    byhand.id = 1000;
    EXPECT_RC(vigil_leases_renew(ls, &byhand), 0);
    vigil_lease wrong = a;
    wrong.id = b.id;
    EXPECT_RC(vigil_leases_renew(ls, &wrong), VIGIL_ELOST);
    vigil_lease forged = b;
    forged.token = a.token;
    EXPECT_RC(vigil_leases_renew(ls, &forged), VIGIL_ELOST);
    EXPECT_RC(vigil_leases_release(ls, &byhand), 0);
    vigil_lease nokey = a;
    snprintf(nokey.key, sizeof(nokey.key), "gamma");
    nokey.id = 0;
    EXPECT_RC(vigil_leases_renew(ls, &nokey), VIGIL_ELOST);
    vigil_leases_close(ls);
    return 0;
}

static int test_entry_view(void)
{
    vigil_leases *ls = vt_leases_fresh("view.leases", 4);
    vigil_lease_info info;
    memset(&info, 0x33, sizeof(info));
    EXPECT_RC(vigil_leases_entry(ls, 0, &info), VIGIL_EVACANT);
    EXPECT(info.state == VIGIL_LEASE_VACANT && info.key[0] == 0 && info.token == 0,
           "vacant entry view: state %u key '%s'", info.state, info.key);
    EXPECT_RC(vigil_leases_entry(ls, 4, &info), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_entry(ls, 0, NULL), -EINVAL);
    vigil_lease a, b;
    EXPECT_RC(vigil_leases_acquire(ls, "viewed", "alice", 10000, &a), 0);
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(a.id - 1), &info), 0);
    EXPECT(info.state == VIGIL_LEASE_HELD && strcmp(info.key, "viewed") == 0 &&
           strcmp(info.owner, "alice") == 0 && info.token == a.token && info.ttl_ms == 10000 &&
           info.pid == (uint32_t)getpid(),
           "held view: state %u key %s owner %s token %llu ttl %llu pid %u", info.state, info.key,
           info.owner, (unsigned long long)info.token, (unsigned long long)info.ttl_ms, info.pid);
    EXPECT(info.expires_in_ms > 9000 && info.expires_in_ms <= 10001, "expires in %lld ms",
           (long long)info.expires_in_ms);
    EXPECT_RC(vigil_leases_release(ls, &a), 0);
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(a.id - 1), &info), 0);
    EXPECT(info.state == VIGIL_LEASE_RELEASED && strcmp(info.key, "viewed") == 0 && info.expires_in_ms == 0,
           "released view: state %u key %s", info.state, info.key);
    EXPECT_RC(vigil_leases_acquire(ls, "lapse", "bob", 10, &b), 0);
    vt_sleep_ms(30);
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(b.id - 1), &info), 0);
    EXPECT(info.state == VIGIL_LEASE_EXPIRED && info.expires_in_ms < 0, "expired view: state %u in %lld",
           info.state, (long long)info.expires_in_ms);
    /* Scribbled fields come out bounded and terminated. */
    struct vigil_leases_entry *e = &ls->entries[b.id - 1];
    for (int i = 0; i < 16; i++)
        atomic_store(&e->key[i], UINT64_C(0x4141414141414141));
    for (int i = 0; i < 8; i++)
        atomic_store(&e->owner[i], UINT64_C(0x4242424242424242));
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(b.id - 1), &info), 0);
    EXPECT(strlen(info.key) == 127 && strlen(info.owner) == 63, "unterminated fields: %zu %zu",
           strlen(info.key), strlen(info.owner));
    vigil_leases_close(ls);
    return 0;
}

/* The store's port under a keepalive keeps a short lease alive well past
 * its TTL; stop, then release, frees it at once. */
static int test_keepalive_on_store(void)
{
    vigil_leases *ls = vt_leases_fresh("ka.leases", 4);
    vigil_lease l, other;
    /* A TTL of 600 ms renewed every ~190 ms, watched for 1 s: only a
     * renewer starved for two whole beats could lose it. */
    EXPECT_RC(vigil_leases_acquire(ls, "kept", "me", 600, &l), 0);
    vigil_lease_port port = vigil_leases_port(ls);
    vigil_keepalive *ka;
    EXPECT_RC(vigil_keepalive_start(&port, &l, &ka), 0);
    for (int i = 0; i < 5; i++) {
        vt_sleep_ms(200);
        EXPECT_RC(vigil_leases_acquire(ls, "kept", "thief", 600, &other), VIGIL_EBUSY);
    }
    EXPECT(!vigil_keepalive_lost(ka), "lost a lease that was being renewed");
    EXPECT_RC(vigil_keepalive_stop(ka), 0);
    EXPECT_RC(vigil_leases_release(ls, &l), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "kept", "thief", 90, &other), 0);
    /* The keepalive notices the theft on its next beat and stops. */
    vigil_lease stale = l;
    EXPECT_RC(vigil_keepalive_start(&port, &stale, &ka), 0);
    EXPECT(VT_WAIT_FOR(vigil_keepalive_lost(ka), 5000), "a stale lease's keepalive never stopped");
    EXPECT_RC(vigil_keepalive_stop(ka), VIGIL_ELOST);
    vigil_lease_port none = vigil_leases_port(NULL);
    EXPECT_RC(none.renew(none.ctx, &l), -EINVAL);
    vigil_leases_close(ls);
    return 0;
}

/* Threads of one process race for one key: one holder at a time, tokens
 * strictly increasing in the order the holders held it. */
struct race {
    vigil_leases *ls;
    _Atomic int   holders;
    _Atomic int   violations;
    _Atomic uint64_t last_token;
    _Atomic int   acquired;
    _Atomic int   token_regress;
};

static void *race_thread(void *p)
{
    struct race *r = p;
    uint64_t deadline = vt_now_ms() + 2000;
    int mine = 0;
    while (mine < 200 && vt_now_ms() < deadline) {
        vigil_lease l;
        int rc = vigil_leases_acquire(r->ls, "raced", "t", 1000, &l);
        if (rc == VIGIL_EBUSY)
            continue;
        if (rc != 0) {
            atomic_fetch_add(&r->violations, 1000);
            break;
        }
        if (atomic_fetch_add(&r->holders, 1) != 0)
            atomic_fetch_add(&r->violations, 1);
        uint64_t prev = atomic_exchange(&r->last_token, l.token);
        if (l.token <= prev)
            atomic_fetch_add(&r->token_regress, 1);
        if (vigil_leases_renew(r->ls, &l) != 0)
            atomic_fetch_add(&r->violations, 1);
        atomic_fetch_sub(&r->holders, 1);
        if (vigil_leases_release(r->ls, &l) != 0)
            atomic_fetch_add(&r->violations, 1);
        atomic_fetch_add(&r->acquired, 1);
        mine++;
    }
    return NULL;
}

static int test_threads_race(void)
{
    vigil_leases *ls = vt_leases_fresh("race.leases", 4);
    struct race r = { .ls = ls };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        EXPECT(pthread_create(&t[i], NULL, race_thread, &r) == 0, "pthread_create");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    EXPECT(atomic_load(&r.violations) == 0, "expected one holder at a time, got %d violations",
           atomic_load(&r.violations));
    EXPECT(atomic_load(&r.token_regress) == 0, "tokens went backwards %d times", atomic_load(&r.token_regress));
    EXPECT(atomic_load(&r.acquired) > 0, "nobody ever acquired");
    /* One key, one entry: the race never bound it twice. */
    int bound = 0;
    for (uint32_t i = 0; i < 4; i++) {
        vigil_lease_info info;
        if (vigil_leases_entry(ls, i, &info) >= 0 && strcmp(info.key, "raced") == 0)
            bound++;
    }
    EXPECT(bound == 1, "expected the key in one entry, found it in %d", bound);
    vigil_leases_close(ls);
    return 0;
}

/* Threads binding many distinct keys at once into a small store: each key
 * lands in exactly one entry. */
static void *bind_thread(void *p)
{
    vigil_leases *ls = p;
    char key[32];
    for (int round = 0; round < 300; round++) {
        snprintf(key, sizeof(key), "k%d", round % 12);
        vigil_lease l;
        if (vigil_leases_acquire(ls, key, "b", 1000, &l) == 0)
            vigil_leases_release(ls, &l);
    }
    return NULL;
}

static int test_threads_bind_unique(void)
{
    vigil_leases *ls = vt_leases_fresh("bind.leases", 8);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        EXPECT(pthread_create(&t[i], NULL, bind_thread, ls) == 0, "pthread_create");
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    char seen[8][128];
    int n = 0;
    for (uint32_t i = 0; i < 8; i++) {
        vigil_lease_info info;
        if (vigil_leases_entry(ls, i, &info) < 0)
            continue;
        for (int j = 0; j < n; j++)
            EXPECT(strcmp(seen[j], info.key) != 0, "key %s bound in two entries", info.key);
        snprintf(seen[n++], sizeof(seen[0]), "%s", info.key);
    }
    vigil_leases_close(ls);
    return 0;
}

/* Start time of a process, /proc/<pid>/stat field 22. */
static bool proc_start(uint32_t pid, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return false;
    *start = strtoull(p + 1, NULL, 10);
    return true;
}

/* Entries and the bind lock left locked by a process that is gone are
 * taken over, cleared and served again; one locked by a live process is
 * waited for and then reported busy, never robbed. */
static int test_dead_locker_recovered(void)
{
    vigil_leases *ls = vt_leases_fresh("dead.leases", 4);
    vigil_lease a, b;
    EXPECT_RC(vigil_leases_acquire(ls, "wedged", "x", 20, &a), 0);
    struct vigil_leases_entry *e = &ls->entries[a.id - 1];
    uint64_t dead = vigil_lock_word_of((uint32_t)vt_unused_pid(), vigil_self_pidns(), 1);
    atomic_store(&e->ctl, dead);
    /* Its holder's renewal sees a change of hands: refused. */
    EXPECT_RC(vigil_leases_renew(ls, &a), VIGIL_ELOST);
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(a.id - 1), &info), VIGIL_EBUSY);
    EXPECT(info.state == VIGIL_LEASE_CHANGING && info.pid == vigil_lock_pid(dead), "wedged view: state %u pid %u",
           info.state, info.pid);
    EXPECT_RC(vigil_leases_acquire(ls, "wedged", "y", 1000, &b), 0);
    EXPECT(b.token > a.token, "token after recovery %llu, before %llu", (unsigned long long)b.token,
           (unsigned long long)a.token);

    /* The bind lock (a lock pair: word, odd seq while held) of a dead binder. */
    atomic_store(&ls->hdr->bind_lock[0], vigil_lock_word_of((uint32_t)vt_unused_pid(), vigil_self_pidns(), 1));
    atomic_store(&ls->hdr->bind_lock[1], (atomic_load(&ls->hdr->bind_lock[1]) + 1) | 1);
    vigil_lease c;
    EXPECT_RC(vigil_leases_acquire(ls, "fresh-key", "z", 1000, &c), 0);
    EXPECT((atomic_load(&ls->hdr->bind_lock[1]) & 1) == 0, "bind lock left held");

    /* A lock word naming a live process that maps the store (a child of
     * ours) with its true start time: waited for, then EBUSY; nothing is
     * taken from it. The same pid and tag in a process that maps no part
     * of the store is a reused pid whose tag collides: dead. */
    int ready[2], go[2];
    EXPECT(pipe(ready) == 0 && pipe(go) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        char ch;
        if (read(go[0], &ch, 1) != 1)
            _exit(2);
        vigil_leases_close(ls); /* now it maps nothing of the store */
        if (write(ready[1], &ch, 1) != 1)
            _exit(2);
        vt_await_kill();
    }
    uint64_t start = 0;
    EXPECT(proc_start((uint32_t)kid, &start), "no start time for the child");
    uint64_t live = vigil_lock_word_of((uint32_t)kid, vigil_self_pidns(), start);
    e = &ls->entries[c.id - 1];
    uint64_t before = atomic_load(&e->ctl);
    atomic_store(&e->ctl, live);
    vigil_lease d;
    uint64_t t0 = vt_now_ms();
    int busy = vigil_leases_acquire(ls, "fresh-key", "w", 1000, &d);
    uint64_t waited = vt_now_ms() - t0;
    uint64_t kept = atomic_load(&e->ctl);
    atomic_store(&e->ctl, before);
    int renewed = vigil_leases_renew(ls, &c);
    /* The same pid with another start time is a reused pid: dead. */
    atomic_store(&e->ctl, vigil_lock_word_of((uint32_t)kid, vigil_self_pidns(), start + 1));
    int reused = vigil_leases_acquire(ls, "fresh-key", "w", 1000, &d);
    /* The child unmaps the store: its own word now names a stranger. */
    char ch = 1;
    bool unmapped = write(go[1], &ch, 1) == 1 && read(ready[0], &ch, 1) == 1;
    vigil_lease f;
    EXPECT_RC(vigil_leases_release(ls, &d), 0);
    e = &ls->entries[d.id - 1];
    uint64_t rel = atomic_load(&e->ctl);
    atomic_store(&e->ctl, live);
    int stranger = vigil_leases_acquire(ls, "fresh-key", "v", 1000, &f);
    (void)rel;
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    EXPECT(busy == VIGIL_EBUSY, "a live locker mapping the store: expected VIGIL_EBUSY, got %d (%s)", busy,
           vigil_strerror(busy));
    EXPECT(waited < 2000, "a live lock was waited on for %llu ms", (unsigned long long)waited);
    EXPECT(kept == live, "a live process's lock was taken over");
    EXPECT_RC(renewed, 0);
    EXPECT_RC(reused, 0);
    EXPECT(unmapped, "the child never unmapped the store");
    EXPECT(stranger == 0, "a live pid with the locker's tag but no mapping: expected the lock taken over (0), "
                          "got %d (%s)", stranger, vigil_strerror(stranger));
    vigil_leases_close(ls);
    return 0;
}

VT_MAIN(VT_CASE(test_acquire_release), VT_CASE(test_expiry), VT_CASE(test_tokens_grow),
        VT_CASE(test_full_and_reuse), VT_CASE(test_ranges), VT_CASE(test_lease_id),
        VT_CASE(test_entry_view), VT_CASE(test_keepalive_on_store), VT_CASE(test_threads_race),
        VT_CASE(test_threads_bind_unique), VT_CASE(test_dead_locker_recovered))
