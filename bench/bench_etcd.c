/* SPDX-License-Identifier: MIT */
/*
 * The etcd adapter's cost per call on loopback etcd, against the bare HTTP
 * round trip of the same connection (GET /version, which etcd answers
 * without touching raft or disk) and a bare keepalive POST, in one run.
 *
 *   renew           = keepalive + a read-only txn proving the key is ours
 *   acquire         = grant + txn (put if create_revision == 0, range)
 *   release         = txn (delete if still ours) + revoke
 *
 * Starts its own etcd with tests/etcd_server.sh (found next to this source
 * file), or uses VIGIL_ETCD_ENDPOINTS; without etcd it says so and exits 0.
 * Figures are medians (p99 beside them); the ratio to the round trip is
 * the figure to compare, the machine being noisy.
 */
#include "bench.h"

#include <vigil/etcd.h>
#include "etcd_internal.h"

#include <sys/wait.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct stat_ns {
    double p50, p99;
};

static struct stat_ns summarize(uint64_t *s, size_t n)
{
    qsort(s, n, sizeof(*s), cmp_u64);
    struct stat_ns r = { (double)s[n / 2], (double)s[n * 99 / 100] };
    return r;
}

static char script[1024], state[256];

static int run_script(const char *cmd)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("sh", "sh", script, cmd, state, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stop_server(void)
{
    if (state[0]) {
        run_script("stop"); /* leaves only its log, or the skip marker */
        static const char *const left[] = { "etcd.log", "skip" };
        char p[400];
        for (unsigned i = 0; i < 2; i++) {
            snprintf(p, sizeof(p), "%s/%s", state, left[i]);
            unlink(p);
        }
        if (rmdir(state) != 0)
            fprintf(stderr, "bench_etcd: could not remove %s: %s\n", state, strerror(errno));
    }
}

/* The endpoints: VIGIL_ETCD_ENDPOINTS, or a server of our own. NULL: skip. */
static const char *endpoints(char *buf, size_t cap)
{
    const char *env = getenv("VIGIL_ETCD_ENDPOINTS");
    if (env && *env)
        return env;
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    snprintf(script, sizeof(script), "%.*s%s../tests/etcd_server.sh", dir, src, slash ? "/" : "");
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "bench_etcd: %s not found; set VIGIL_ETCD_ENDPOINTS\n", script);
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(state, sizeof(state), "%s/vigil-bench-etcd.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(state)) {
        perror("mkdtemp");
        state[0] = '\0';
        return NULL;
    }
    atexit(stop_server);
    if (run_script("start") != 0) {
        fprintf(stderr, "bench_etcd: etcd did not start\n");
        return NULL;
    }
    char p[400];
    snprintf(p, sizeof(p), "%s/skip", state);
    if (access(p, F_OK) == 0) {
        printf("bench_etcd: skipped, etcd is not installed (Debian: etcd-server)\n");
        return NULL;
    }
    snprintf(p, sizeof(p), "%s/endpoints", state);
    FILE *f = fopen(p, "r");
    if (!f || !fgets(buf, (int)cap, f)) {
        if (f)
            fclose(f);
        return NULL;
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf;
}

#define RTT_N   2000
#define RENEW_N 2000
#define ACQ_N   300

int main(void)
{
    char buf[300];
    const char *url = endpoints(buf, sizeof(buf));
    if (!url)
        return 0;
    vigil_etcd *e;
    int rc = vigil_etcd_connect(url, &e);
    if (rc < 0) {
        fprintf(stderr, "connect %s: %s\n", url, vigil_strerror(rc));
        return 1;
    }
    static uint64_t s_rtt[RTT_N], s_ka[RENEW_N], s_renew[RENEW_N], s_acq[ACQ_N], s_rel[ACQ_N], s_pair[ACQ_N];
    long http;
    const char *reply;
    size_t len;
    vigil_lease l;
    char key[64];
    snprintf(key, sizeof(key), "vigil-bench/%d", (int)getpid());
    if ((rc = vigil_etcd_acquire(e, key, "bench", 5000, &l)) != 0) {
        fprintf(stderr, "acquire: %s\n", vigil_strerror(rc));
        return 1;
    }
    char ka_body[64];
    snprintf(ka_body, sizeof(ka_body), "{\"ID\":\"%lld\"}", (long long)l.id);
    for (int i = 0; i < 200; i++) { /* warm the connection and etcd */
        vigil_etcd__request(e, "version", NULL, &http, &reply, &len);
        vigil_etcd_renew(e, &l);
    }
    /* Interleaved, so drift in the machine's load hits every column alike. */
    for (int i = 0; i < RENEW_N; i++) {
        uint64_t t0 = bench_now_ns();
        rc = vigil_etcd__request(e, "version", NULL, &http, &reply, &len);
        uint64_t t1 = bench_now_ns();
        int rk = vigil_etcd__request(e, "v3/lease/keepalive", ka_body, &http, &reply, &len);
        uint64_t t2 = bench_now_ns();
        int rr = vigil_etcd_renew(e, &l);
        uint64_t t3 = bench_now_ns();
        if (rc || rk || rr) {
            fprintf(stderr, "request failed: %s / %s / %s\n", vigil_strerror(rc), vigil_strerror(rk), vigil_strerror(rr));
            return 1;
        }
        s_rtt[i] = t1 - t0;
        s_ka[i] = t2 - t1;
        s_renew[i] = t3 - t2;
    }
    vigil_etcd_release(e, &l);
    for (int i = 0; i < ACQ_N; i++) {
        uint64_t t0 = bench_now_ns();
        int ra = vigil_etcd_acquire(e, key, "bench", 5000, &l);
        uint64_t t1 = bench_now_ns();
        int rr = ra == 0 ? vigil_etcd_release(e, &l) : ra;
        uint64_t t2 = bench_now_ns();
        if (ra || rr) {
            fprintf(stderr, "acquire/release failed: %s / %s\n", vigil_strerror(ra), vigil_strerror(rr));
            return 1;
        }
        s_acq[i] = t1 - t0;
        s_rel[i] = t2 - t1;
        s_pair[i] = t2 - t0;
    }
    vigil_etcd_close(e);

    struct stat_ns rtt = summarize(s_rtt, RTT_N), ka = summarize(s_ka, RENEW_N), renew = summarize(s_renew, RENEW_N),
                   acq = summarize(s_acq, ACQ_N), rel = summarize(s_rel, ACQ_N), pair = summarize(s_pair, ACQ_N);
    printf("etcd on loopback (%s), median per op (p99), ratio to the HTTP round trip:\n", url);
    printf("  %-34s %9.1f us (%8.1f)   1.00x\n", "HTTP round trip (GET /version)", rtt.p50 / 1e3, rtt.p99 / 1e3);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "bare keepalive POST", ka.p50 / 1e3, ka.p99 / 1e3, ka.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_renew", renew.p50 / 1e3, renew.p99 / 1e3, renew.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_acquire", acq.p50 / 1e3, acq.p99 / 1e3, acq.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "vigil_etcd_release", rel.p50 / 1e3, rel.p99 / 1e3, rel.p50 / rtt.p50);
    printf("  %-34s %9.1f us (%8.1f) %6.2fx\n", "acquire + release", pair.p50 / 1e3, pair.p99 / 1e3, pair.p50 / rtt.p50);
    printf("  renew / bare keepalive: %.2fx (the ownership txn); samples: %d renew, %d acquire+release\n",
           renew.p50 / ka.p50, RENEW_N, ACQ_N);
    return 0;
}
