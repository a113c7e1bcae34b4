/* SPDX-License-Identifier: MIT */
/*
 * A group across 3 hosts x 4 workers under chaos, for GROUP_CHAOS_SECONDS
 * (20 by default; make check keeps it short, a longer run is one variable
 * away): workers take units, finish them and meet at barrier rounds while
 * the test kills workers with kill -9, stalls them briefly, stops them past
 * their TTL, and once kills a whole host with its agent. Then the work set
 * is drained and every worker leaves. Counted, each must be 0:
 *
 *   lost        units added and never done (etcd's done record is the
 *               judge: a worker killed after its done landed counts none;
 *               on the workers' counts alone, such kills were the "lost"
 *               this test once reported under load)
 *   done twice  units whose done succeeded more than once
 *   two owners  a done that succeeded for a claim that was not the unit's
 *               latest (a stale owner's write landed), or a done record in
 *               etcd that is not the claim a worker was told it finished
 *   two serials rounds where more than one caller got VIGIL_SERIAL
 *   hangs       a call that outlived its timeout by 20 s, or a worker that
 *               did not finish within 90 s of the drain
 */
#include "grouptest.h"

#include <cjson/cJSON.h>

#define HOSTS    3
#define WORKERS  4
#define NWORK    (HOSTS * WORKERS)
#define MAXUNITS 8192
#define MAXROUND 65536
#define TTL_MS   2000

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
};
static struct shared *S;
static const char *url, *group;

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

static _Noreturn void worker(int h, int i, unsigned gen)
{
    vigil_etcd *e = NULL;
    if (vigil_etcd_connect(url, &e) < 0)
        _exit(3);
    char name[64], host[16];
    snprintf(name, sizeof(name), "h%d-w%d-g%u", h, i, gen);
    snprintf(host, sizeof(host), "host%d", h);
    struct vigil_group_options o = { .dir = hosts[h].dir, .host = host };
    vigil_group_member *m = NULL;
    if (vigil_group_join_opts(e, group, name, TTL_MS, &o, &m) < 0)
        _exit(4);
    vigil_group_stats st;
    uint64_t round = vigil_group_stats_get(e, group, &st) == 0 ? st.round : 0;
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
        t0 = now_ms();
        rc = vigil_group_barrier_wait(m, round, 1000000000ull);
        check_hang(t0, 1000);
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

static int test_chaos(void)
{
    int f = et_fixture(&url);
    if (f)
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
    /* Drain: no more units; every worker finishes what is left and leaves. */
    atomic_store(&S->stop, 1);
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
        else if (d == 0)
            not_told++; /* a done record nobody was finishing: not one a worker was told of */
        else if (token != atomic_load(&S->done_token[k]) || (uint32_t)member != atomic_load(&S->done_member[k]))
            not_told++; /* etcd's record is not the claim its worker was told it finished */
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
    printf("chaos %us: %u units added, %u takes, %u barrier passes (round %llu), %u kill -9, %u stalls, "
           "%u stops past the TTL (%u losses seen), %u host killed, %u dones killed before counted, %u calls "
           "unanswered; lost %u, done twice %u, two owners %u, two serials %u, hangs %u\n",
           secs, added, atomic_load(&S->takes), atomic_load(&S->rounds_passed),
           src == 0 ? (unsigned long long)st.round : 0ull, kills, stalls, long_stops, atomic_load(&S->lost_seen),
           host_kills, unrecorded, atomic_load(&S->unknown), lost, twice, atomic_load(&S->two_owners), two_serials,
           hangs);
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
