/* SPDX-License-Identifier: MIT */
/*
 * A group across 3 hosts x 4 workers under chaos, for GROUP_CHAOS_SECONDS
 * (20 by default; make check keeps it short, a longer run is one variable
 * away), on the 3-member etcd cluster with a fault proxy in front of each
 * member (tests/etcd_proxy.py): workers take units, finish them or give
 * them back, and meet at barrier rounds while the test kills workers with
 * kill -9, stalls them briefly, stops them past their TTL, once kills a
 * whole host with its agent, freezes an etcd member (SIGSTOP) for a
 * moment, and has the proxies hold requests (silently, or answering at
 * once an error that leaves them open: Unavailable, DeadlineExceeded, a
 * 5xx page) and deliver them late, deliver them twice, delay them, cut or drop their answers, end watches
 * at once and freeze. Then the work set is drained and every worker
 * leaves. Counted, each must be 0:
 *
 *   lost        units added and never done (etcd's done record is the
 *               judge: a worker killed after its done landed counts none;
 *               on the workers' counts alone, such kills were the "lost"
 *               this test once reported under load)
 *   done twice  units whose done succeeded more than once, or whose done
 *               record etcd's history shows put twice
 *   two owners  a done that succeeded for a claim that was not the unit's
 *               latest (a stale owner's write landed), or a done record in
 *               etcd that is not the claim a worker was told it finished
 *   two serials rounds where more than one caller got VIGIL_SERIAL
 *   late claims claims etcd's history shows made twice with one value (a
 *               claim's value carries its id: a copy landed late or twice,
 *               e.g. after the member gave the unit back, issue 25.1)
 *   late arrivals an arrival put after a withdrawal told VIGIL_ETIMEDOUT
 *               and before that member's next call (issue 25.2: the waiter
 *               counted after its timeout)
 *   hangs       a call that outlived its timeout by 20 s, or a worker that
 *               did not finish within 90 s of the drain (a unit owned by a
 *               live member that gave it back hangs the drain)
 */
#include "grouptest.h"
#include "group_internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>

#define HOSTS    3
#define WORKERS  4
#define NWORK    (HOSTS * WORKERS)
#define MAXUNITS 8192
#define MAXROUND 65536
#define MAXTOUT  4096
#define TTL_MS   2000

/* A barrier wait told VIGIL_ETIMEDOUT: the member's name and the round,
 * and etcd's revision read after it (at or past the withdrawal) and
 * before the member's next call (0 until then). */
struct timed_out {
    char     name[64];
    uint64_t round;
    int64_t  after, next;
};

struct shared {
    _Atomic int      stop;           /* drain: no unit will be added */
    _Atomic uint32_t added;
    _Atomic uint64_t max_token[MAXUNITS];
    _Atomic uint32_t done[MAXUNITS];
    _Atomic uint32_t serials[MAXROUND];
    _Atomic uint64_t done_token[MAXUNITS]; /* the claim whose done answered 0 */
    _Atomic uint32_t done_member[MAXUNITS];
    _Atomic uint32_t in_done[MAXUNITS];    /* workers between the call of done and its count */
    _Atomic uint32_t stale_done; /* a done answered 0 for a claim that was not the unit's latest */
    _Atomic uint32_t two_owners, hangs, takes, rounds_passed, lost_seen;
    _Atomic uint32_t unknown; /* calls answered neither yes nor no (no answer from etcd) */
    _Atomic uint32_t givebacks, ntout;
    struct timed_out tout[MAXTOUT];
    unsigned         faults[7], member_freezes; /* the nemesis's, written by it alone */
};
static struct shared *S;
static const char *url, *proxies, *group;

struct host {
    char           dir[512];
    struct vt_proc agent;
    pid_t          w[WORKERS];
    unsigned       gen[WORKERS];
};
static struct host hosts[HOSTS];

static uint64_t now_ms(void)
{
    return vt_now_ms();
}

static void check_hang(uint64_t t0, uint64_t timeout_ms)
{
    if (now_ms() - t0 > timeout_ms + 20000)
        atomic_fetch_add(&S->hangs, 1);
}

/* etcd's revision now (read after what came before): or, with no answer,
 * fallback. */
static int64_t revision_now(vigil_etcd *e, int64_t fallback)
{
    vigil_group_stats st;
    for (int tries = 0; tries < 5; tries++)
        if (vigil_group_stats_get(e, group, &st) == 0)
            return (int64_t)st.revision;
    return fallback;
}

static _Noreturn void worker(int h, int i, unsigned gen)
{
    vigil_etcd *e = NULL;
    if (vigil_etcd_connect(proxies, &e) < 0)
        _exit(3);
    vigil_etcd_set_timeout(e, 500, 1500); /* a held request costs 1.5 s, then the next member */
    char name[64], host[16];
    snprintf(name, sizeof(name), "h%d-w%d-g%u", h, i, gen);
    snprintf(host, sizeof(host), "host%d", h);
    struct vigil_group_options o = { .dir = hosts[h].dir, .host = host };
    vigil_group_member *m = NULL;
    if (vigil_group_join_opts(e, group, name, TTL_MS, &o, &m) < 0)
        _exit(4);
    vigil_group_stats st;
    uint64_t round = vigil_group_stats_get(e, group, &st) == 0 ? st.round : 0;
    int tout = -1; /* our last VIGIL_ETIMEDOUT, until our next call */
    uint64_t quiet_until = 0;
    srand((unsigned)getpid());
    for (;;) {
        vigil_group_unit u;
        uint64_t t0 = now_ms();
        int rc = vigil_group_take_wait(m, 300000000ull, &u);
        check_hang(t0, 300 + 3000 * 2);
        if (rc < 0 && rc != VIGIL_ELOST && rc != VIGIL_EVACANT && rc != VIGIL_ETIMEDOUT && rc != VIGIL_EBUSY)
            atomic_fetch_add(&S->unknown, 1);
        if (rc == 0) {
            unsigned k = (unsigned)atoi(u.name + 1) % MAXUNITS;
            atomic_fetch_add(&S->takes, 1);
            /* The unit's latest claim (a claimer stalled before this line
             * may write an older one late: the max keeps the latest). */
            uint64_t prev = atomic_load(&S->max_token[k]);
            while (prev < u.token && !atomic_compare_exchange_weak(&S->max_token[k], &prev, u.token))
                ;
            if (rand() % 4 == 0)
                vt_sleep_ms((unsigned)(rand() % 5));
            if (rand() % 5 == 0) {
                /* Given back: free for anyone, never again this claim's
                 * (a copy of it landing late would make it so). */
                for (int tries = 0; tries < 20; tries++) {
                    rc = vigil_group_giveback(m, &u);
                    if (rc == 0 || rc == VIGIL_ELOST || vigil_group_lost(m))
                        break;
                    atomic_fetch_add(&S->unknown, 1);
                }
                atomic_fetch_add(&S->givebacks, rc == 0);
                if (rc == VIGIL_ELOST)
                    break;
                continue;
            }
            /* A done not answered is called again (0 if the first
             * landed): the claim is not left to a live member that
             * believes it finished. */
            atomic_fetch_add(&S->in_done[k], 1);
            for (int tries = 0; tries < 20; tries++) {
                t0 = now_ms();
                rc = vigil_group_done(m, &u);
                check_hang(t0, 3000 * 4);
                if (rc == 0 || rc == VIGIL_ELOST || vigil_group_lost(m))
                    break;
                atomic_fetch_add(&S->unknown, 1);
            }
            if (rc == 0) {
                atomic_fetch_add(&S->done[k], 1);
                atomic_store(&S->done_token[k], u.token);
                vigil_group_member_info self;
                if (vigil_group_self(m, &self) == 0)
                    atomic_store(&S->done_member[k], (uint32_t)self.revision);
                if (atomic_load(&S->max_token[k]) != u.token)
                    atomic_fetch_add(&S->stale_done, 1); /* finished by a claim not the last */
            }
            /* A worker killed before this line leaves it raised, and so
             * does a done left without a yes or a no (unanswered, then
             * the member out): it may have landed, as a kill's may. */
            if (rc == 0 || rc == VIGIL_ELOST)
                atomic_fetch_sub(&S->in_done[k], 1);
        }
        if (rc == VIGIL_ELOST)
            break;
        if (rc == VIGIL_EVACANT && atomic_load(&S->stop))
            break;
        /* After a time-out the member stays away from the barrier a
         * while (takes go on): an arrival of the call that timed out,
         * delivered late meanwhile, is then one that no call made. */
        if (tout >= 0 && now_ms() < quiet_until)
            continue;
        if (tout >= 0)
            S->tout[tout].next = revision_now(e, 1); /* before this call's arrival */
        tout = -1;
        t0 = now_ms();
        rc = vigil_group_barrier_wait(m, round, 1000000000ull);
        check_hang(t0, 1000);
        if (rc == VIGIL_ETIMEDOUT && (tout = (int)atomic_fetch_add(&S->ntout, 1)) < MAXTOUT) {
            struct timed_out *t = &S->tout[tout];
            snprintf(t->name, sizeof(t->name), "%s", name);
            t->round = round;
            t->after = revision_now(e, 0); /* 0: unknown, the entry is not judged */
            quiet_until = now_ms() + 2000 + (uint64_t)(rand() % 2000);
        } else {
            tout = -1;
        }
        if (rc == VIGIL_SERIAL && round < MAXROUND)
            atomic_fetch_add(&S->serials[round], 1);
        if (rc >= 0) {
            round++;
            atomic_fetch_add(&S->rounds_passed, 1);
        } else if (rc == VIGIL_ELOST) {
            break;
        }
    }
    if (vigil_group_lost(m))
        atomic_fetch_add(&S->lost_seen, 1);
    vigil_group_leave(m);
    vigil_etcd_close(e);
    _exit(0);
}

static void spawn(int h, int i)
{
    unsigned gen = ++hosts[h].gen[i];
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        worker(h, i, gen);
    hosts[h].w[i] = p;
}

/* Reaps workers that left (lost, or drained) and, unless draining, starts
 * new ones in their place. */
static void reap_and_respawn(bool respawn)
{
    for (int h = 0; h < HOSTS; h++)
        for (int i = 0; i < WORKERS; i++) {
            pid_t p = hosts[h].w[i];
            if (p > 0 && waitpid(p, NULL, WNOHANG) == p) {
                hosts[h].w[i] = 0;
                if (respawn)
                    spawn(h, i);
            }
        }
}

static void add_units(vigil_etcd *e, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = atomic_load(&S->added);
        if (id >= MAXUNITS)
            return;
        char name[32];
        snprintf(name, sizeof(name), "u%u", id);
        /* -EEXIST: our own add of this fresh name landed unanswered (or
         * was sent twice): it is in the set, counted as added. */
        int rc = vigil_group_add(e, group, name);
        if (rc == 0 || rc == -EEXIST)
            atomic_fetch_add(&S->added, 1);
    }
}

/* The unit's done record in etcd (GROUP/work/done/<unit>): 1 and who
 * finished it (the member's join revision, the claim's token), 0 none, -1
 * no answer. A worker killed between its done landing and its count in
 * shared memory leaves the count at 0: etcd is the judge of "lost". */
static int done_record(vigil_etcd *e, uint32_t k, uint64_t *member, uint64_t *token)
{
    char key[256], b64[400], body[512];
    long http;
    const char *reply;
    size_t len;
    int n = snprintf(key, sizeof(key), "%s/work/done/u%u", group, k);
    if (vigil_etcd__b64(key, (size_t)n, b64, sizeof(b64)) < 0)
        return -1;
    snprintf(body, sizeof(body), "{\"key\":\"%s\"}", b64);
    for (int tries = 0; tries < 5; tries++) {
        if (vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len) != 0 || http != 200)
            continue;
        cJSON *j = cJSON_ParseWithLength(reply, len);
        const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs"), *kv = cJSON_GetArrayItem(kvs, 0);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
        int found = 0;
        char val[512];
        int vl = cJSON_IsString(v) ? vigil_etcd__unb64(v->valuestring, strlen(v->valuestring), val, sizeof(val) - 1)
                                   : -1;
        if (vl >= 0) {
            val[vl] = '\0';
            cJSON *r = cJSON_Parse(val);
            const cJSON *mem = cJSON_GetObjectItemCaseSensitive(r, "member"),
                        *tok = cJSON_GetObjectItemCaseSensitive(r, "token");
            if (cJSON_IsNumber(mem) && cJSON_IsNumber(tok)) {
                *member = (uint64_t)mem->valuedouble;
                *token = (uint64_t)tok->valuedouble;
                found = 1;
            }
            cJSON_Delete(r);
        }
        bool answered = j != NULL;
        cJSON_Delete(j);
        if (answered)
            return found;
    }
    return -1;
}

/* ---- the network and etcd's members as a nemesis ---------------------------------- */

#define MEMBERS 3

struct nemesis {
    uint64_t release_at[MEMBERS + 1], thaw_at[MEMBERS + 1], member_thaw_at;
    bool     holding[MEMBERS + 1]; /* a hold armed, its request not yet seen held ... */
    uint64_t hold_since[MEMBERS + 1]; /* ... since then (after 5 s, the proxy's rules cleared) */
    int      frozen_member;
    unsigned *faults, *member_freezes; /* in S: counted for the parent */
};

/* What a fault hits: any txn, any request (a keepalive, a watch, a read),
 * or one of the group's writes by its keys (a claim, an arrival, a
 * withdrawal, a round's commit, a done). */
static const char *const targets[] = { "kv/txn", "*", "put:*/work/owners/*", "put:*/rounds/*/a/*",
                                       "put:*/rounds/*/gate", "put:*/released/*", "put:*/work/done/*" };
static const char *const fail_how[] = { "unavailable", "deadline", "page" };
static const char *const fault_names[] = { "held (or failed) and delivered late", "delivered twice", "delayed", "answer cut",
                                           "answer dropped", "watch ended", "proxy frozen" };

/* One fault at one proxy: for a txn, or for any request (a keepalive, a
 * watch, a read). */
static void nemesis_strike(struct nemesis *n)
{
    int i = 1 + rand() % MEMBERS, r = rand() % 10, kind = r < 3 ? 0 : r == 9 ? 1 : r - 2; /* holds thrice as often */
    const char *what = targets[rand() % (int)(sizeof(targets) / sizeof(targets[0]))];
    uint64_t later = now_ms() + 200 + (unsigned)(rand() % 1300);
    if ((kind == 0 && (n->holding[i] || n->release_at[i])) || (kind == 6 && n->thaw_at[i]))
        return;
    switch (kind) {
    case 0: /* held silently, or answered at once with an error that leaves it open (etcd_proxy.py, fail) */
        if (rand() % 2)
            et_proxy(i, "hold %s", what);
        else
            et_proxy(i, "fail %s 1 %s", what, fail_how[rand() % 3]);
        n->holding[i] = true;
        n->hold_since[i] = now_ms();
        break;
    case 1: et_proxy(i, "dup %s", what); break;
    case 2: et_proxy(i, "delay %s %d", what, 50 + rand() % 400); break;
    case 3: et_proxy(i, "cut %s", what); break;
    case 4: et_proxy(i, "drop %s", what); break;
    case 5: et_proxy(i, "endwatch 2"); break;
    default: et_proxy(i, "freeze"); n->thaw_at[i] = later; break;
    }
    n->faults[kind]++;
}

/* An etcd member frozen (SIGSTOP) for a moment, one at a time. */
static void nemesis_freeze_member(struct nemesis *n)
{
    int i = 1 + rand() % MEMBERS;
    if (n->frozen_member || et_cluster_do("freeze", i, NULL) != 0)
        return;
    n->frozen_member = i;
    n->member_thaw_at = now_ms() + 300 + (unsigned)(rand() % 900);
    (*n->member_freezes)++;
}

/* What is due: held requests delivered, proxies and members thawed (with
 * all, everything, and every proxy's rules cleared). */
static void nemesis_due(struct nemesis *n, bool all)
{
    uint64_t now = now_ms();
    for (int i = 1; i <= MEMBERS; i++) {
        /* A held request is delivered late: once its client has given up
         * (1.5 s) and gone on (resent it, withdrawn, given back), while
         * what it acts on may still be as it was. */
        if (n->holding[i] && strcmp(et_proxy(i, "held"), "held 1") == 0) {
            n->holding[i] = false;
            n->release_at[i] = now + 1500 + (unsigned)(rand() % 2000);
        } else if (n->holding[i] && now - n->hold_since[i] > 5000) {
            n->holding[i] = false; /* nothing came its way */
            et_proxy(i, "clear");
        }
        if (n->release_at[i] && (all || now >= n->release_at[i])) {
            et_proxy(i, "release");
            n->release_at[i] = 0;
        }
        if (n->thaw_at[i] && (all || now >= n->thaw_at[i])) {
            et_proxy(i, "thaw");
            n->thaw_at[i] = 0;
        }
        if (all) {
            n->holding[i] = false;
            et_proxy(i, "release");
            et_proxy(i, "clear");
            et_proxy(i, "thaw");
        }
    }
    if (n->frozen_member && (all || now >= n->member_thaw_at)) {
        et_cluster_do("thaw", n->frozen_member, NULL);
        n->frozen_member = 0;
    }
}

/* The nemesis, a process of its own beside the parent's kills and stops:
 * a fault every 50 to 250 ms, an etcd member frozen now and then, until
 * the drain; then everything delivered, thawed and cleared. */
static _Noreturn void nemesis(void)
{
    struct nemesis n = { .faults = S->faults, .member_freezes = &S->member_freezes };
    srand((unsigned)getpid());
    while (!atomic_load(&S->stop)) {
        nemesis_due(&n, false);
        if (rand() % 20 == 0)
            nemesis_freeze_member(&n);
        else
            nemesis_strike(&n);
        vt_sleep_ms(50 + (unsigned)(rand() % 200));
    }
    nemesis_due(&n, true);
    _exit(0);
}

/* ---- etcd's history of the group ------------------------------------------------- */

struct hevent {
    char    key[GKEY_MAX];
    int64_t rev, version;
    bool    del;
    char    val[48];
};

/* Every event under the group's prefix rest (GROUP/rest) from revision 1
 * (a watch: etcd keeps the whole history of a test's cluster), up to a
 * marker put under it now, appended to *h (n events of cap): 0, or -1.
 * A prefix at a time: a watch's first message gathers up to a thousand
 * revisions, which for the whole group is more than a message may be. */
static int history_of(vigil_etcd *e, const char *rest, struct hevent **h, long *n, long *cap)
{
    char pfx[GKEY_MAX], mark[GKEY_MAX + 16], b64[2 * GKEY_MAX + 32], body[2 * GKEY_MAX + 96];
    long http;
    const char *reply;
    size_t len;
    snprintf(pfx, sizeof(pfx), "%s/%s", group, rest);
    snprintf(mark, sizeof(mark), "%s~history-end", pfx);
    vigil_etcd__b64(mark, strlen(mark), b64, sizeof(b64));
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":\"\"}", b64);
    int rc = vigil_etcd__request(e, "v3/kv/put", body, &http, &reply, &len);
    if (rc < 0 || http != 200) {
        printf("history: the marker's put: %d (%s), http %ld\n", rc, vigil_strerror(rc), http);
        return -1;
    }
    struct gstream *s = NULL;
    struct gevent ev[64];
    int64_t rev = 0;
    bool marked = false;
    uint64_t deadline = now_ms() + 60000;
    while (!marked && now_ms() < deadline) {
        if (!s && (rc = gstream_open(e, pfx, G_PREFIX, rev + 1, &s)) < 0) {
            s = NULL;
            vt_sleep_ms(100);
            continue;
        }
        int k = gstream_next(s, 1000, -1, ev, 64, &rev);
        if (k < 0 || k == GSTREAM_ENDED) {
            rc = k;
            gstream_close(s);
            s = NULL;
            continue;
        }
        for (int i = 0; i < k; i++) {
            marked = marked || strcmp(ev[i].kv.key, mark) == 0;
            if (!marked && *n == *cap) {
                *cap = *cap ? *cap * 2 : 4096;
                struct hevent *g = realloc(*h, (size_t)*cap * sizeof(**h));
                if (!g)
                    abort();
                *h = g;
            }
            if (!marked) {
                struct hevent *x = &(*h)[(*n)++];
                memset(x, 0, sizeof(*x));
                snprintf(x->key, sizeof(x->key), "%s", ev[i].kv.key);
                x->rev = ev[i].kv.mod;
                x->version = ev[i].kv.version;
                x->del = ev[i].del;
                if (ev[i].kv.val)
                    snprintf(x->val, sizeof(x->val), "%.*s", (int)(ev[i].kv.vlen < 47 ? ev[i].kv.vlen : 47),
                             ev[i].kv.val);
            }
            gkv_free(&ev[i].kv);
        }
    }
    gstream_close(s);
    if (!marked)
        printf("history of %s: the marker never came (%ld events, up to revision %lld; the stream's last word %d)\n",
               pfx, *n, (long long)rev, rc);
    return marked ? 0 : -1;
}

/* The claims, done records and arrivals of the group's history, each
 * prefix in revision order: their number, into *out (malloc'd), or -1. */
static long history(vigil_etcd *e, struct hevent **out)
{
    long n = 0, cap = 0;
    *out = NULL;
    if (history_of(e, "work/owners/", out, &n, &cap) < 0 || history_of(e, "work/done/", out, &n, &cap) < 0 ||
        history_of(e, "rounds/", out, &n, &cap) < 0)
        return -1;
    return n;
}

static int by_key_val(const void *a, const void *b)
{
    const struct hevent *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->val, y->val);
}

/* Claims made twice with one value (a copy landed late or twice), and done
 * records put twice: from the history. */
static void history_units(struct hevent *h, long n, unsigned *late_claims, unsigned *done_twice)
{
    char ko[GKEY_MAX], kd[GKEY_MAX];
    snprintf(ko, sizeof(ko), "%s/work/owners/", group);
    snprintf(kd, sizeof(kd), "%s/work/done/", group);
    long k = 0;
    for (long i = 0; i < n; i++)
        if (!h[i].del && ((strncmp(h[i].key, ko, strlen(ko)) == 0 && h[i].version == 1) ||
                          strncmp(h[i].key, kd, strlen(kd)) == 0))
            h[k++] = h[i];
    qsort(h, (size_t)k, sizeof(*h), by_key_val);
    for (long i = 1; i < k; i++) {
        bool done = strncmp(h[i].key, kd, strlen(kd)) == 0, same = strcmp(h[i].key, h[i - 1].key) == 0;
        if (done && same)
            (*done_twice)++;
        else if (!done && same && strcmp(h[i].val, h[i - 1].val) == 0) {
            (*late_claims)++;
            printf("late claim: %s made twice with '%s' (revisions %lld, %lld)\n", h[i].key, h[i].val,
                   (long long)h[i - 1].rev, (long long)h[i].rev);
        }
    }
}

/* Arrivals put after a withdrawal that told VIGIL_ETIMEDOUT and before the
 * member's next call: from the history (each prefix in revision order, as
 * etcd sent it; an arrival's key is under rounds/ alone). */
static unsigned history_arrivals(const struct hevent *h, long n)
{
    unsigned late = 0, nt = atomic_load(&S->ntout);
    for (unsigned t = 0; t < nt && t < MAXTOUT; t++) {
        const struct timed_out *o = &S->tout[t];
        if (o->after <= 0)
            continue; /* its revision unknown: not judged */
        char key[GKEY_MAX];
        snprintf(key, sizeof(key), "%s/rounds/%020" PRIu64 "/a/%s", group, o->round, o->name);
        int64_t next = o->next == 0 ? INT64_MAX : o->next > o->after ? o->next : o->after + 1, gone = 0;
        for (long i = 0; i < n; i++)
            if (h[i].del && h[i].rev <= o->after && h[i].rev > gone && strcmp(h[i].key, key) == 0)
                gone = h[i].rev; /* the withdrawal's deletion, or an earlier one */
        for (long i = 0; i < n; i++)
            if (!h[i].del && h[i].rev > gone && h[i].rev < next && strcmp(h[i].key, key) == 0) {
                late++;
                printf("late arrival: %s put at %lld, after its withdrawal (told VIGIL_ETIMEDOUT by %lld) and "
                       "before the member's next call (%lld)\n", key, (long long)h[i].rev, (long long)o->after,
                       (long long)(next == INT64_MAX ? -1 : next));
                break;
            }
    }
    return late;
}

static int test_chaos(void)
{
    int f = et_proxies(&proxies);
    if (f)
        return f;
    if ((f = et_cluster(&url)))
        return f;
    const char *secs_env = getenv("GROUP_CHAOS_SECONDS");
    unsigned secs = secs_env && atoi(secs_env) > 0 ? (unsigned)atoi(secs_env) : 20;
    S = vt_shared(sizeof(*S));
    group = gt_group("chaos");
    vigil_etcd *e = et_connect(url);
    for (int h = 0; h < HOSTS; h++) {
        char n[16];
        snprintf(n, sizeof(n), "host%d", h);
        snprintf(hosts[h].dir, sizeof(hosts[h].dir), "%s", vt_path(n));
        EXPECT(gt_agent_start(&hosts[h].agent, url, hosts[h].dir), "agent %d did not start", h);
    }
    add_units(e, 48);
    for (int h = 0; h < HOSTS; h++)
        for (int i = 0; i < WORKERS; i++)
            spawn(h, i);
    srand((unsigned)getpid());
    uint64_t end = now_ms() + secs * 1000ull;
    unsigned kills = 0, stalls = 0, long_stops = 0, host_kills = 0;
    bool host_killed = false;
    fflush(NULL);
    pid_t nem = fork();
    if (nem == 0)
        nemesis();
    while (now_ms() < end) {
        vigil_group_stats st;
        if (vigil_group_stats_get(e, group, &st) == 0 && st.units_free + st.units_owned < 24)
            add_units(e, 24);
        int h = rand() % HOSTS, i = rand() % WORKERS, what = rand() % 10;
        pid_t p = hosts[h].w[i];
        if (p > 0 && what < 3) {
            kill(p, SIGKILL); /* reaped below, and replaced */
            kills++;
        } else if (p > 0 && what < 6) {
            kill(p, SIGSTOP);
            vt_sleep_ms(50 + (unsigned)(rand() % 300));
            kill(p, SIGCONT);
            stalls++;
        } else if (p > 0 && what == 6 && long_stops < secs / 5 + 1) {
            kill(p, SIGSTOP); /* past the TTL: it must find itself out */
            vt_sleep_ms(TTL_MS + 1500);
            kill(p, SIGCONT);
            long_stops++;
        } else if (what == 7 && !host_killed && now_ms() + secs * 500ull > end) {
            /* A whole host, agent first: its members lapse at the TTL. */
            vt_stop(&hosts[h].agent, SIGKILL, 10000);
            for (int k = 0; k < WORKERS; k++)
                if (hosts[h].w[k] > 0)
                    kill(hosts[h].w[k], SIGKILL);
            for (int k = 0; k < WORKERS; k++)
                if (hosts[h].w[k] > 0)
                    vt_wait(hosts[h].w[k], 10000);
            vt_sleep_ms(TTL_MS / 2);
            EXPECT(gt_agent_start(&hosts[h].agent, url, hosts[h].dir), "agent %d did not restart", h);
            for (int k = 0; k < WORKERS; k++)
                spawn(h, k);
            host_killed = true;
            host_kills++;
        }
        reap_and_respawn(true);
        vt_sleep_ms(100 + (unsigned)(rand() % 200));
    }
    /* Drain: no more faults, no more units; every worker finishes what is
     * left and leaves. */
    atomic_store(&S->stop, 1);
    int nem_rc = nem > 0 ? vt_wait(nem, 60000) : -1;
    uint64_t drain_end = now_ms() + 90000;
    bool all_out = false;
    while (!all_out && now_ms() < drain_end) {
        reap_and_respawn(false);
        all_out = true;
        for (int h = 0; h < HOSTS; h++)
            for (int i = 0; i < WORKERS; i++)
                all_out = all_out && hosts[h].w[i] == 0;
        /* Units freed by the last losses need someone to take them. */
        vigil_group_stats st;
        int src = all_out ? vigil_group_stats_get(e, group, &st) : 0;
        if (all_out && src < 0) {
            all_out = false; /* no answer: no word that the set is empty; look again */
        } else if (all_out && st.units_free + st.units_owned > 0) {
            spawn(0, 0);
            all_out = false;
        }
        vt_sleep_ms(50);
    }
    uint32_t hangs = atomic_load(&S->hangs);
    for (int h = 0; h < HOSTS; h++)
        for (int i = 0; i < WORKERS; i++)
            if (hosts[h].w[i] > 0) {
                hangs++;
                kill(hosts[h].w[i], SIGKILL);
                vt_wait(hosts[h].w[i], 10000);
            }
    for (int h = 0; h < HOSTS; h++)
        vt_stop(&hosts[h].agent, SIGKILL, 10000);
    uint32_t added = atomic_load(&S->added), lost = 0, twice = 0, two_serials = 0, unrecorded = 0, unjudged = 0,
             not_told = 0;
    for (uint32_t k = 0; k < added; k++) {
        uint32_t d = atomic_load(&S->done[k]);
        uint64_t member = 0, token = 0;
        int rec = done_record(e, k, &member, &token);
        if (rec < 0)
            unjudged++;
        else if (rec == 0)
            lost++;
        else if (d == 0 && atomic_load(&S->in_done[k]) > 0)
            unrecorded++; /* its worker killed between the call and the count */
        else if (d == 0 || token != atomic_load(&S->done_token[k]) ||
                 (uint32_t)member != atomic_load(&S->done_member[k])) {
            /* a done record nobody was finishing, or not the claim its
             * worker was told it finished */
            not_told++;
            printf("u%u: done record of member %llu, token %llu; told %u times, last member %u token %llu\n", k,
                   (unsigned long long)member, (unsigned long long)token, d, atomic_load(&S->done_member[k]),
                   (unsigned long long)atomic_load(&S->done_token[k]));
        }
        twice += d > 1;
    }
    if (not_told || atomic_load(&S->stale_done))
        printf("two owners: %u done records no worker was told of, %u dones by a claim not the latest\n", not_told,
               atomic_load(&S->stale_done));
    atomic_fetch_add(&S->two_owners, not_told + atomic_load(&S->stale_done));
    for (uint32_t r = 0; r < MAXROUND; r++)
        two_serials += atomic_load(&S->serials[r]) > 1;
    vigil_group_stats st;
    int src = vigil_group_stats_get(e, group, &st);
    struct hevent *hist = NULL;
    long nh = history(e, &hist);
    unsigned late_claims = 0, done_twice_etcd = 0, late_arrivals = nh >= 0 ? history_arrivals(hist, nh) : 0;
    if (nh >= 0)
        history_units(hist, nh, &late_claims, &done_twice_etcd); /* sorts hist: after the arrivals */
    free(hist);
    twice += done_twice_etcd;
    printf("chaos %us: %u units added, %u takes, %u given back, %u barrier passes (round %llu), %u timeouts; "
           "%u kill -9, %u stalls, %u stops past the TTL (%u losses seen), %u host killed, %u etcd member freezes; "
           "proxy faults:", secs, added, atomic_load(&S->takes), atomic_load(&S->givebacks),
           atomic_load(&S->rounds_passed), src == 0 ? (unsigned long long)st.round : 0ull,
           atomic_load(&S->ntout), kills, stalls, long_stops, atomic_load(&S->lost_seen), host_kills,
           S->member_freezes);
    for (int k = 0; k < 7; k++)
        printf(" %u %s%s", S->faults[k], fault_names[k], k < 6 ? "," : ";");
    printf(" %u dones killed before counted, %u calls unanswered, %ld events of history; lost %u, done twice %u, "
           "two owners %u, two serials %u, late claims %u, late arrivals %u, hangs %u\n",
           unrecorded, atomic_load(&S->unknown), nh, lost, twice, atomic_load(&S->two_owners), two_serials,
           late_claims, late_arrivals, hangs);
    EXPECT(nem_rc == 0, "the nemesis ended with %d", nem_rc);
    EXPECT(nh >= 0, "etcd's history of the group could not be read");
    EXPECT(late_claims == 0 && late_arrivals == 0, "late claims %u, late arrivals %u", late_claims, late_arrivals);
    EXPECT(unjudged == 0, "etcd did not answer for %u units' done records", unjudged);
    EXPECT(lost == 0 && twice == 0 && atomic_load(&S->two_owners) == 0 && two_serials == 0 && hangs == 0,
           "lost %u, done twice %u, two owners %u, two serials %u, hangs %u", lost, twice,
           atomic_load(&S->two_owners), two_serials, hangs);
    EXPECT(src == 0 && st.units_done == added && st.units_free == 0 && st.units_owned == 0,
           "etcd says done %u of %u, free %u, owned %u", st.units_done, added, st.units_free, st.units_owned);
    vigil_etcd_close(e);
    return 0;
}

VT_MAIN(VT_CASE(test_chaos))
