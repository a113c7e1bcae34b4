/* SPDX-License-Identifier: MIT */
/*
 * Scaffolding for the etcd tests: the fixture's endpoints (or a skip),
 * running tests/etcd_server.sh, and a fake HTTP server in a child process
 * that answers from a script (canned etcd replies, hostile ones, silence),
 * logging every request it got.
 */
#ifndef VIGIL_ETCD_TESTUTIL_H
#define VIGIL_ETCD_TESTUTIL_H

#include "testutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <strings.h>

#include <vigil/etcd.h>
#include "recipes_internal.h"

/* ---- the real server -------------------------------------------------------- */

/* Reads STATE/endpoints into buf. 0 found, VT_SKIP when etcd is absent (the
 * script's marker) or no fixture is set up, 1 when the fixture failed. */
static inline int et_read_endpoints(const char *state, char *buf, size_t cap)
{
    char p[1100];
    if (!state || !*state) {
        fprintf(stderr, "VIGIL_ETCD_STATE not set: run under ctest (etcd fixture)\n");
        return VT_SKIP;
    }
    snprintf(p, sizeof(p), "%s/skip", state);
    FILE *f = fopen(p, "r");
    if (f) {
        char why[200] = "";
        if (!fgets(why, sizeof(why), f))
            why[0] = '\0';
        fclose(f);
        fprintf(stderr, "skip: %s", why[0] ? why : "etcd absent\n");
        return VT_SKIP;
    }
    snprintf(p, sizeof(p), "%s/endpoints", state);
    f = fopen(p, "r");
    if (!f) {
        fprintf(stderr, "expected %s from the etcd fixture, found none\n", p);
        return 1;
    }
    if (!fgets(buf, (int)cap, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!buf[0]) {
        fprintf(stderr, "%s is empty\n", p);
        return 1;
    }
    return 0;
}

/* The fixture's etcd: 0 and its URL, VT_SKIP, or 1 (see above). */
static inline int et_fixture(const char **url)
{
    static char buf[300];
    static int rc = -1;
    if (rc < 0)
        rc = et_read_endpoints(getenv("VIGIL_ETCD_STATE"), buf, sizeof(buf));
    *url = buf;
    return rc;
}

/* Runs `sh etcd_server.sh cmd state [arg]`, bounded to 60 s: its exit status. */
static inline int et_script(const char *cmd, const char *state, const char *arg)
{
    const char *script = getenv("VIGIL_ETCD_SCRIPT");
    if (!script || !*script) {
        fprintf(stderr, "VIGIL_ETCD_SCRIPT not set\n");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("sh", "sh", script, cmd, state, arg, (char *)NULL);
        _exit(127);
    }
    return vt_wait(pid, 60000);
}

/* ---- the cluster and the TLS server (tests/etcd_cluster.sh) ------------------ */

/* A test whose source calls et_cluster() gets the 3-member cluster fixture
 * (etcd3), one that calls et_tls() the mutual-TLS server (etcd_tls); see
 * tests/CMakeLists.txt. */

/* Reads a line of STATE/name into buf: 0, or -1. */
static inline int et_state_line(const char *state, const char *name, char *buf, size_t cap)
{
    char p[1100];
    snprintf(p, sizeof(p), "%s/%s", state, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    if (!fgets(buf, (int)cap, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf[0] ? 0 : -1;
}

/* The shared 3-member cluster: 0 and its endpoints (every member's client
 * URL, comma-separated), VT_SKIP, or 1. */
static inline int et_cluster(const char **endpoints)
{
    static char buf[1000];
    static int rc = -1;
    if (rc < 0)
        rc = et_read_endpoints(getenv("VIGIL_ETCD3_STATE"), buf, sizeof(buf));
    *endpoints = buf;
    return rc;
}

/* Member i's (1..n) client URL in the cluster whose state is in env
 * (a static buffer per call, four in turn; "" when unknown). */
static inline const char *et_member_in(const char *env, int i)
{
    static char bufs[4][300];
    static unsigned next;
    char *b = bufs[next++ % 4], name[32];
    const char *state = getenv(env);
    snprintf(name, sizeof(name), "%d/endpoint", i);
    if (!state || et_state_line(state, name, b, sizeof(bufs[0])) < 0)
        b[0] = '\0';
    return b;
}
#define et_member(i) et_member_in("VIGIL_ETCD3_STATE", (i))

/* `sh etcd_cluster.sh cmd STATE [member [arg]]` on the cluster whose state
 * is in env, bounded to 60 s: its exit status (-1 when it could not run).
 * With out, its stdout's first line goes there (e.g. the leader). */
static inline int et_cluster_run(const char *env, const char *cmd, int member, const char *arg, char *out,
                                 size_t cap)
{
    const char *script = getenv("VIGIL_ETCD_CLUSTER_SCRIPT"), *state = getenv(env);
    if (!script || !*script || !state || !*state) {
        fprintf(stderr, "VIGIL_ETCD_CLUSTER_SCRIPT or %s not set\n", env);
        return -1;
    }
    char m[16];
    snprintf(m, sizeof(m), "%d", member);
    int fds[2] = { -1, -1 };
    if (out && pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (out) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
        }
        execlp("sh", "sh", script, cmd, state, member > 0 ? m : arg, member > 0 ? arg : NULL, (char *)NULL);
        _exit(127);
    }
    if (out) {
        close(fds[1]);
        size_t n = 0;
        struct pollfd pf = { fds[0], POLLIN, 0 };
        while (n + 1 < cap && poll(&pf, 1, 60000) > 0) {
            ssize_t r = read(fds[0], out + n, cap - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
        }
        out[n] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
        close(fds[0]);
    }
    return vt_wait(pid, 60000);
}
#define et_cluster_do(cmd, member, arg) et_cluster_run("VIGIL_ETCD3_STATE", (cmd), (member), (arg), NULL, 0)

/* The cluster's leader (1..n), or -1. */
static inline int et_cluster_leader(void)
{
    char buf[32];
    if (et_cluster_run("VIGIL_ETCD3_STATE", "leader", 0, NULL, buf, sizeof(buf)) != 0)
        return -1;
    return atoi(buf) > 0 ? atoi(buf) : -1;
}

/* A TLS server whose state directory is in the variable env: its
 * endpoint and the directory of its certificates, in the caller's
 * buffers; 0, VT_SKIP, or 1. The fixture's answer is read once. */
struct et_tls_server {
    char buf[300], dir[1100];
    int  rc;
    bool read;
};
static inline int et_tls_server(const char *env, struct et_tls_server *s, const char **endpoint, const char **certs)
{
    const char *state = getenv(env);
    if (!s->read) {
        s->rc = et_read_endpoints(state, s->buf, sizeof(s->buf));
        s->read = true;
    }
    snprintf(s->dir, sizeof(s->dir), "%s/certs", state ? state : "");
    *endpoint = s->buf;
    *certs = s->dir;
    return s->rc;
}

/* The mutual-TLS server: 0 with its endpoint and the directory of its
 * certificates (ca.pem, client.pem, client-key.pem, client-cn.pem,
 * client-cn-key.pem, other-ca.pem, ...), VT_SKIP, or 1. */
static inline int et_tls(const char **endpoint, const char **certs)
{
    static struct et_tls_server s;
    return et_tls_server("VIGIL_ETCD_TLS_STATE", &s, endpoint, certs);
}

/* The server-only TLS server (etcd_stls: it asks clients for no
 * certificate), as et_tls: its ca.pem verifies it. */
static inline int et_stls(const char **endpoint, const char **certs)
{
    static struct et_tls_server s;
    return et_tls_server("VIGIL_ETCD_STLS_STATE", &s, endpoint, certs);
}

/* In a test of the TLS server: its endpoint and certificates, or return
 * the skip or failure. Defines nothing; the caller declares url, certs,
 * ca, cert and key (char[1200] each for the last three). */
#define ET_NEED_TLS()                                                         \
    do {                                                                      \
        int need_rc_ = et_tls(&url, &certs);                                  \
        if (need_rc_)                                                         \
            return need_rc_;                                                  \
        snprintf(ca, sizeof(ca), "%s/ca.pem", certs);                         \
        snprintf(cert, sizeof(cert), "%s/client.pem", certs);                 \
        snprintf(key, sizeof(key), "%s/client-key.pem", certs);               \
    } while (0)

/* A connected handle, or exit: the tests cannot go on without one. */
static inline vigil_etcd *et_connect(const char *url)
{
    vigil_etcd *e = NULL;
    int rc = vigil_etcd_connect(url, &e);
    if (rc < 0) {
        fprintf(stderr, "vigil_etcd_connect(%s): %s\n", url, vigil_strerror(rc));
        exit(1);
    }
    return e;
}

/* A unique key per call and per process, so tests never meet old keys. */
static inline const char *et_key(const char *name)
{
    static char bufs[4][128];
    static unsigned next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "vigil-test/%d/%u/%s", (int)getpid(), next, name);
    return b;
}

/* ---- asking etcd directly --------------------------------------------------- */

/* Revokes lease `id` behind its holder's back, as `etcdctl lease revoke`
 * would: 0, the request's error, or -EIO when etcd refused it. */
static inline int et_revoke(vigil_etcd *e, int64_t id)
{
    char body[64];
    long http;
    const char *reply;
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)id);
    int rc = vigil_etcd__request(e, "v3/lease/revoke", body, &http, &reply, &len);
    return rc < 0 ? rc : http == 200 ? 0 : -EIO;
}

/* How many keys are under KEY/ (-1 if etcd could not be asked). */
static inline int et_count_under(vigil_etcd *e, const char *key)
{
    char k[VIGIL_ETCD_KEY_MAX + 1], pfx[VIGIL_ETCD_KEY_B64], end[VIGIL_ETCD_KEY_B64], body[2 * VIGIL_ETCD_KEY_B64 + 100];
    long http;
    const char *reply;
    size_t len;
    int n = snprintf(k, sizeof(k), "%s/", key);
    vigil_etcd__b64(k, (size_t)n, pfx, sizeof(pfx));
    k[n - 1] = '0';
    vigil_etcd__b64(k, (size_t)n, end, sizeof(end));
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"range_end\":\"%s\",\"count_only\":true}", pfx, end);
    if (vigil_etcd__request(e, "v3/kv/range", body, &http, &reply, &len) < 0 || http != 200)
        return -1;
    const char *c = strstr(reply, "\"count\":\"");
    return c ? atoi(c + 9) : 0;
}


/* Reads n bytes from fd (a child's report on a pipe), waiting at most
 * timeout_ms for each part: false when they did not all come. */
static inline bool et_read_bounded(int fd, void *buf, size_t n, int timeout_ms)
{
    char *p = buf;
    while (n) {
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, timeout_ms) <= 0)
            return false;
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* A child that reports on a pipe: stdio flushed, then fork. The child
 * (0 returned) has in *fd the write end and dies with the test; the
 * parent (the child's pid returned) the read end; -1 when pipe or fork
 * failed. */
static inline pid_t et_fork_reporter(int *fd)
{
    int res[2];
    if (pipe(res) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t kid = fork();
    if (kid == 0) {
        vt_die_with_parent();
        close(res[0]);
        *fd = res[1];
        return 0;
    }
    close(res[1]);
    if (kid < 0) {
        close(res[0]);
        return -1;
    }
    *fd = res[0];
    return kid;
}

/* A holder in a child of its own, to be killed: it acquires key (as
 * owner, for ttl_ms) and waits for its SIGKILL. The child's pid, with its
 * lease in *out (token 0: it did not acquire), or -1. */
static inline pid_t et_kid_holder(const char *url, const char *key, const char *owner, uint64_t ttl_ms,
                                  vigil_lease *out)
{
    int fd = -1;
    pid_t kid = et_fork_reporter(&fd);
    if (kid == 0) {
        vigil_etcd *ce = et_connect(url);
        vigil_lease l;
        if (vigil_etcd_acquire(ce, key, owner, ttl_ms, &l) != 0)
            memset(&l, 0, sizeof(l));
        if (write(fd, &l, sizeof(l)) != (ssize_t)sizeof(l))
            _exit(3);
        vt_await_kill();
    }
    memset(out, 0, sizeof(*out));
    if (kid > 0) {
        if (!et_read_bounded(fd, out, sizeof(*out), 15000))
            memset(out, 0, sizeof(*out));
        close(fd);
    }
    return kid;
}

/* The sum of etcd's started counters for these gRPC methods, from its
 * /metrics; -1 if it could not be read. */
static inline long long et_grpc_started(vigil_etcd *e, const char *const *methods)
{
    long http;
    const char *reply;
    size_t len;
    if (vigil_etcd__request(e, "metrics", NULL, &http, &reply, &len) < 0 || http != 200)
        return -1;
    long long sum = 0;
    for (; *methods; methods++) {
        char pat[128];
        snprintf(pat, sizeof(pat), "grpc_server_started_total{grpc_method=\"%s\",", *methods);
        const char *p = strstr(reply, pat);
        if (!p)
            return -1;
        p = strchr(p, '}');
        sum += p ? atoll(p + 1) : 0;
    }
    return sum;
}

/* The value of one of etcd's metrics without labels (a gauge, such as
 * etcd_debugging_mvcc_watcher_total: the watchers registered now), from its
 * /metrics; -1 if it could not be read. */
static inline long long et_metric(vigil_etcd *e, const char *name)
{
    long http;
    const char *reply;
    size_t len;
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s ", name);
    if (vigil_etcd__request(e, "metrics", NULL, &http, &reply, &len) < 0 || http != 200)
        return -1;
    const char *p = strstr(reply, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

/* ---- etcd's own client, for interoperation ----------------------------------- */

/* Is etcdctl on PATH? */
static inline bool et_have_etcdctl(void)
{
    const char *path = getenv("PATH");
    char dir[1024];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof(dir), "%.*s/etcdctl", (int)n, path);
        if (access(dir, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

#define NEED_ETCDCTL()                                                        \
    do {                                                                      \
        if (!et_have_etcdctl()) {                                             \
            fprintf(stderr, "etcdctl not installed (Debian: etcd-client)\n"); \
            return VT_SKIP;                                                   \
        }                                                                     \
    } while (0)

/* Runs argv[0] (found on PATH) with argv and, in the child alone, the
 * variables env ("NAME=VALUE", NULL-terminated; NULL for none): stdout to
 * a pipe, stderr appended to the file errpath. 0 or -1. */
static inline int et_spawnve(struct vt_proc *p, const char *const *argv, const char *const *env, const char *errpath)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    p->len = 0;
    p->buf[0] = '\0';
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        int err = open(errpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        dup2(fds[1], 1);
        if (err >= 0)
            dup2(err, 2);
        if (in >= 0)
            dup2(in, 0);
        close(fds[0]);
        close(fds[1]);
        setenv("ETCDCTL_API", "3", 1);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
    return 0;
}

/* et_spawnve with stderr to child.stderr in the test's directory. */
static inline int et_spawnv(struct vt_proc *p, const char *const *argv)
{
    return et_spawnve(p, argv, NULL, vt_path("child.stderr"));
}

/* etcdctl --endpoints=URL ARGS... */
static inline int et_ctlv(struct vt_proc *p, const char *url, const char *const *args)
{
    static char ep[400];
    const char *argv[32];
    size_t n = 0;
    snprintf(ep, sizeof(ep), "--endpoints=%s", url);
    argv[n++] = "etcdctl";
    argv[n++] = ep;
    for (; args[n - 2] && n < 31; n++)
        argv[n] = args[n - 2];
    argv[n] = NULL;
    return et_spawnv(p, argv);
}
#define ET_CTL(p, url, ...) et_ctlv((p), (url), (const char *const[]){ __VA_ARGS__, NULL })

/* The TLS servers' users once auth is on (et_auth): root, ET_USER with a
 * password, and ET_CN_USER with none, who is whoever presents the client
 * certificate whose CommonName it is (client-cn.pem: etcd_cluster.sh
 * certs makes it with that CN). Both may read and write under
 * ET_USER_PFX. */
#define ET_ROOT_PW  "vigil-root-pw"
#define ET_USER     "vigil"
#define ET_USER_PW  "vigil-pw"
#define ET_CN_USER  "vigil-client"
#define ET_USER_PFX "vigil-test/" /* what ET_USER and ET_CN_USER may read and write */

/* How etcdctl reaches a TLS server, as a user types it: --endpoints=URL,
 * --cacert=CACERT, and --cert=CERT --key=KEY unless cert is NULL. */
struct et_ctl_to {
    const char *url, *cacert, *cert, *key;
};

/* etcdctl's command line to a TLS server, as user ("NAME:PASSWORD", or
 * NULL for none), ARGS...: into argv (room for ET_CTL_ARGV), its strings
 * in static buffers until the next call. */
#define ET_CTL_ARGV 40
static inline void et_ctl_argv(const char **argv, const struct et_ctl_to *to, const char *user,
                               const char *const *args)
{
    static char ep[400], ca[1300], cert[1300], key[1300], us[200];
    size_t n = 0;
    snprintf(ep, sizeof(ep), "--endpoints=%s", to->url);
    snprintf(ca, sizeof(ca), "--cacert=%s", to->cacert);
    argv[n++] = "etcdctl";
    argv[n++] = ep;
    argv[n++] = ca;
    if (to->cert) {
        snprintf(cert, sizeof(cert), "--cert=%s", to->cert);
        snprintf(key, sizeof(key), "--key=%s", to->key);
        argv[n++] = cert;
        argv[n++] = key;
    }
    if (user) {
        snprintf(us, sizeof(us), "--user=%s", user);
        argv[n++] = us;
    }
    for (size_t i = 0; args[i] && n < ET_CTL_ARGV - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
}

/* etcdctl to a TLS server, as et_ctl_argv; stdout on p's pipe. 0 or -1. */
static inline int et_ctl_tov(struct vt_proc *p, const struct et_ctl_to *to, const char *user,
                             const char *const *args)
{
    const char *argv[ET_CTL_ARGV];
    et_ctl_argv(argv, to, user, args);
    return et_spawnv(p, argv);
}

/* Runs etcdctl (as et_ctl_tov) to its end, bounded: its exit status. */
static inline int et_ctl_to_run(const struct et_ctl_to *to, const char *user, const char *const *args)
{
    struct vt_proc p;
    if (et_ctl_tov(&p, to, user, args) != 0)
        return -1;
    vt_read_until(&p, "\x01", 15000); /* all it says, until it closes */
    int st = vt_wait(p.pid, 15000);
    close(p.fd);
    return st;
}
#define ET_CTL_RUN(to, user, ...) et_ctl_to_run((to), (user), (const char *const[]){ __VA_ARGS__, NULL })

/* The mutual-TLS server at url as etcdctl reaches it with the client
 * certificate in certs that has no CommonName (client.pem). */
static inline struct et_ctl_to et_tls_to(const char *url, const char *certs)
{
    static char ca[1200], cert[1200], key[1200];
    snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
    snprintf(cert, sizeof(cert), "%s/client.pem", certs);
    snprintf(key, sizeof(key), "%s/client-key.pem", certs);
    return (struct et_ctl_to){ url, ca, cert, key };
}

/* etcdctl on the mutual-TLS server at url with the client certificate in
 * certs, as user ("NAME:PASSWORD", or NULL for none), ARGS... */
static inline int et_tls_ctlv(struct vt_proc *p, const char *url, const char *certs, const char *user,
                              const char *const *args)
{
    struct et_ctl_to to = et_tls_to(url, certs);
    return et_ctl_tov(p, &to, user, args);
}
#define ET_TLS_CTL(p, url, certs, user, ...) \
    et_tls_ctlv((p), (url), (certs), (user), (const char *const[]){ __VA_ARGS__, NULL })

/* Runs etcdctl (as et_tls_ctlv) to its end, bounded: its exit status. */
static inline int et_tls_ctl_run(const char *url, const char *certs, const char *user, const char *const *args)
{
    struct et_ctl_to to = et_tls_to(url, certs);
    return et_ctl_to_run(&to, user, args);
}
#define ET_TLS_RUN(url, certs, user, ...) \
    et_tls_ctl_run((url), (certs), (user), (const char *const[]){ __VA_ARGS__, NULL })

/* etcd auth on a TLS server, as a user turns it on with etcdctl: users
 * root, ET_USER and ET_CN_USER (read and write under ET_USER_PFX), then
 * `auth enable`; or off again. Whatever a run before left is set right
 * first. 0, or the failing step's exit status. */
static inline int et_auth(const struct et_ctl_to *to, bool on)
{
    const char *root = "root:" ET_ROOT_PW;
    (void)ET_CTL_RUN(to, root, "auth", "disable"); /* a run before may have left it on */
    if (!on)
        return 0;
    (void)ET_CTL_RUN(to, NULL, "user", "add", root);
    (void)ET_CTL_RUN(to, NULL, "user", "grant-role", "root", "root");
    (void)ET_CTL_RUN(to, NULL, "user", "add", ET_USER ":" ET_USER_PW);
    (void)ET_CTL_RUN(to, NULL, "user", "add", ET_CN_USER, "--no-password");
    (void)ET_CTL_RUN(to, NULL, "role", "add", "vigil-rw");
    int st = ET_CTL_RUN(to, NULL, "role", "grant-permission", "vigil-rw", "--prefix=true", "readwrite", ET_USER_PFX);
    if (st == 0)
        st = ET_CTL_RUN(to, NULL, "user", "grant-role", ET_USER, "vigil-rw");
    if (st == 0)
        st = ET_CTL_RUN(to, NULL, "user", "grant-role", ET_CN_USER, "vigil-rw");
    if (st == 0)
        st = ET_CTL_RUN(to, NULL, "auth", "enable");
    return st;
}

/* et_auth on the mutual-TLS server at url, its certificates in certs. */
static inline int et_tls_auth(const char *url, const char *certs, bool on)
{
    struct et_ctl_to to = et_tls_to(url, certs);
    return et_auth(&to, on);
}

/*
 * etcd's JSON gateway (VIGIL_ETCD_TRANSPORT=gateway, or an endpoint
 * without gRPC) refuses every request that comes with a client
 * certificate that has a CommonName while auth is on (etcd 3.4:
 * "CommonName of client sending a request against gateway will be
 * ignored"), where etcdctl and vigil, speaking gRPC, are served. A test
 * that meets that refusal where the gateway spoke calls it XFAIL rather
 * than failing, while ET_GATEWAY_XFAIL is 1 (0: a refusal fails).
 */
#ifndef ET_GATEWAY_XFAIL
#define ET_GATEWAY_XFAIL 1
#endif

/* Is text (vigil_etcd_errmsg, the tool's stderr, a Python exception's
 * message) the gateway's refusal of a CommonName? */
static inline bool et_gateway_refusal(const char *text)
{
    return text && strstr(text, "gateway") && strstr(text, "CommonName");
}

/* ---- a fake server ---------------------------------------------------------- */

enum et_mode {
    ET_REPLY,   /* status and body, connection kept alive */
    ET_CLOSE,   /* close the connection without a word */
    ET_HANG,    /* say nothing for 1.5 s, then close */
    ET_GARBAGE, /* bytes that are not HTTP */
    ET_HUGE,    /* a 200 claiming and sending 2 MiB */
    ET_TEXT,    /* status and body as text/plain (a proxy's page) */
};

struct et_reply {
    int         mode;
    int         status;
    const char *body;
};

struct et_fake {
    pid_t pid;
    int   port;
    char  url[64];
    char  log[600];
};

static inline bool et_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* 1 read, 0 closed or idle past 20 s. */
static inline int et_read_more(int c, char *buf, size_t *have, size_t cap)
{
    struct pollfd pf = { c, POLLIN, 0 };
    if (*have >= cap || poll(&pf, 1, 20000) <= 0)
        return 0;
    ssize_t r = read(c, buf + *have, cap - *have);
    if (r <= 0)
        return 0;
    *have += (size_t)r;
    return 1;
}

/* A request in buf[0..have): 1 whole, with its header's length and its
 * body's (*hl, *cl); 0 not yet; -1 one that cannot fit in cap. */
static inline int et_request(const char *buf, size_t have, size_t cap, size_t *hl, size_t *cl)
{
    const char *end = memmem(buf, have, "\r\n\r\n", 4);
    if (!end)
        return have >= cap ? -1 : 0;
    *hl = (size_t)(end + 4 - buf);
    *cl = 0;
    for (const char *h = buf; h < end;) {
        if (end - h >= 15 && strncasecmp(h, "content-length:", 15) == 0)
            *cl = strtoul(h + 15, NULL, 10);
        const char *nl = memchr(h, '\n', (size_t)(end - h));
        if (!nl)
            break;
        h = nl + 1;
    }
    if (*cl > cap - *hl)
        return -1;
    return have >= *hl + *cl;
}

/* Logs "METHOD PATH BODY\n" of a whole request, before it is answered,
 * so the client finds it there once it has the reply; *path (not
 * NUL-terminated) and its length, for routing. */
static inline void et_log_request(int logfd, const char *buf, size_t hl, size_t cl, const char **path, size_t *plen)
{
    const char *line_end = memchr(buf, '\r', hl);
    const char *sp = memchr(buf, ' ', hl);
    const char *sp2 = sp ? memchr(sp + 1, ' ', (size_t)(line_end - sp - 1)) : NULL;
    *path = sp ? sp + 1 : buf;
    *plen = sp2 ? (size_t)(sp2 - sp - 1) : 0;
    if (logfd >= 0 && sp2) {
        et_write_all(logfd, buf, (size_t)(sp2 - buf));
        et_write_all(logfd, " ", 1);
        et_write_all(logfd, buf + hl, cl);
        et_write_all(logfd, "\n", 1);
    }
}

/* An HTTP/2 client's preface ("PRI * HTTP/2.0"): the adapter's gRPC, tried
 * first (VIGIL_ETCD_TRANSPORT=auto). The fakes speak HTTP/1.1 only and
 * refuse it as such a server does (505, closed), neither logged nor
 * taking a scripted reply: the adapter then takes the gateway. */
static inline bool et_refuse_h2(int c, const char *buf, size_t hl)
{
    static const char pri[] = "PRI * HTTP/2.0\r\n";
    if (hl < sizeof(pri) - 1 || memcmp(buf, pri, sizeof(pri) - 1) != 0)
        return false;
    static const char no[] = "HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    et_write_all(c, no, sizeof(no) - 1);
    /* Closed only once the client has read it and gone: a close with its
     * frames unread would reset the connection instead (an ECONNRESET that
     * says nothing of the protocol). */
    shutdown(c, SHUT_WR);
    char sink[4096];
    struct pollfd pf = { c, POLLIN, 0 };
    while (poll(&pf, 1, 2000) > 0 && read(c, sink, sizeof(sink)) > 0)
        ;
    return true;
}

static inline void et_serve(int ls, const struct et_reply *script, size_t n, const char *logpath)
{
    static char buf[1 << 16];
    size_t next = 0;
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        struct pollfd pf = { ls, POLLIN, 0 };
        if (poll(&pf, 1, 20000) <= 0)
            _exit(0); /* idle for 20 s: the test is gone */
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        size_t have = 0;
        for (;;) {
            size_t hl = 0, cl = 0;
            int whole;
            while ((whole = et_request(buf, have, sizeof(buf), &hl, &cl)) == 0)
                if (!et_read_more(c, buf, &have, sizeof(buf)))
                    goto closed;
            if (whole < 0 || et_refuse_h2(c, buf, hl))
                goto closed;
            const char *path;
            size_t plen;
            et_log_request(logfd, buf, hl, cl, &path, &plen);
            memmove(buf, buf + hl + cl, have - hl - cl);
            have -= hl + cl;
            static const struct et_reply none = { ET_REPLY, 500, "{\"error\":\"script exhausted\",\"code\":13}" };
            const struct et_reply *r = next < n ? &script[next++] : &none;
            char head[256];
            switch (r->mode) {
            case ET_CLOSE:
                goto closed;
            case ET_HANG:
                vt_sleep_ms(1500);
                goto closed;
            case ET_GARBAGE:
                et_write_all(c, "\x01\x02garbage\xff\r\n\r\n", 15);
                goto closed;
            case ET_HUGE: {
                static char chunk[65536];
                memset(chunk, '[', sizeof(chunk));
                int hlen = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                                        "Content-Length: %d\r\n\r\n", 2 << 20);
                et_write_all(c, head, (size_t)hlen);
                for (int i = 0; i < 32 && et_write_all(c, chunk, sizeof(chunk)); i++)
                    ;
                goto closed;
            }
            default: {
                size_t bl = r->body ? strlen(r->body) : 0;
                int hlen = snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Type: %s\r\n"
                                                        "Content-Length: %zu\r\n\r\n", r->status,
                                    r->mode == ET_TEXT ? "text/plain" : "application/json", bl);
                if (!et_write_all(c, head, (size_t)hlen) || !et_write_all(c, r->body ? r->body : "", bl))
                    goto closed;
            }
            }
        }
    closed:
        close(c);
    }
}

/*
 * A fake server that answers by path, on any number of connections at
 * once (the handle's, and each watch stream's): a request whose path
 * starts with routes[i].path gets routes[i]'s status and body, and its
 * connection is closed after it when close is set (an empty 200 to a
 * watch: the stream ends at once). Anything else: 404. Logged as
 * et_serve logs.
 */
struct et_route {
    const char *path;
    int         status;
    const char *body;
    bool        close;
};

static inline void et_route_serve(int ls, const struct et_route *routes, size_t n, const char *logpath)
{
    enum { CONNS = 32, CAP = 1 << 14 };
    static char buf[CONNS][CAP];
    size_t have[CONNS] = { 0 };
    struct pollfd pf[CONNS + 1];
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    signal(SIGPIPE, SIG_IGN);
    pf[0] = (struct pollfd){ ls, POLLIN, 0 };
    for (int i = 1; i <= CONNS; i++)
        pf[i] = (struct pollfd){ -1, POLLIN, 0 };
    for (;;) {
        if (poll(pf, CONNS + 1, 20000) <= 0)
            _exit(0); /* idle for 20 s: the test is gone */
        if (pf[0].revents & POLLIN) {
            int c = accept(ls, NULL, NULL);
            for (int i = 1; c >= 0 && i <= CONNS; i++)
                if (pf[i].fd < 0) {
                    pf[i].fd = c, have[i - 1] = 0, c = -1;
                }
            if (c >= 0)
                close(c); /* no room: the client tries again */
        }
        for (int i = 1; i <= CONNS; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char *b = buf[i - 1];
            ssize_t r = read(pf[i].fd, b + have[i - 1], CAP - have[i - 1]);
            bool drop = r <= 0;
            have[i - 1] += r > 0 ? (size_t)r : 0;
            size_t hl = 0, cl = 0;
            int whole = 0;
            while (!drop && (whole = et_request(b, have[i - 1], CAP, &hl, &cl)) != 0) {
                const char *path;
                size_t plen;
                if (whole < 0)
                    break;
                if (et_refuse_h2(pf[i].fd, b, hl)) {
                    drop = true;
                    break;
                }
                et_log_request(logfd, b, hl, cl, &path, &plen);
                memmove(b, b + hl + cl, have[i - 1] - hl - cl);
                have[i - 1] -= hl + cl;
                const struct et_route *rt = NULL;
                for (size_t k = 0; k < n && !rt; k++)
                    if (plen >= strlen(routes[k].path) && strncmp(path, routes[k].path, strlen(routes[k].path)) == 0)
                        rt = &routes[k];
                const char *body = rt && rt->body ? rt->body : "";
                char head[256];
                int hlen = snprintf(head, sizeof(head),
                                    "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                                    rt ? rt->status : 404, strlen(body));
                drop = !et_write_all(pf[i].fd, head, (size_t)hlen) || !et_write_all(pf[i].fd, body, strlen(body)) ||
                       (rt && rt->close);
            }
            if (drop || whole < 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
            }
        }
    }
}

/* Binds a fake server's socket on 127.0.0.1 and names its URL and log:
 * the listening socket, or -errno. */
static inline int et_fake_listen(struct et_fake *f)
{
    static unsigned seq;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 16) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) < 0) {
        int err = -errno;
        close(s);
        return err;
    }
    f->port = ntohs(a.sin_port);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", f->port);
    char name[64];
    snprintf(name, sizeof(name), "fake-%u.log", seq++);
    snprintf(f->log, sizeof(f->log), "%s", vt_path(name));
    return s;
}

/* The fake in a child process, serving s with script or routes. */
static inline int et_fake_fork(struct et_fake *f, int s, const struct et_reply *script, const struct et_route *routes,
                               size_t n)
{
    if (s < 0)
        return s;
    fflush(stdout);
    fflush(stderr);
    f->pid = fork();
    if (f->pid < 0) {
        int err = -errno;
        close(s);
        return err;
    }
    if (f->pid == 0) {
        if (routes)
            et_route_serve(s, routes, n, f->log);
        else
            et_serve(s, script, n, f->log);
        _exit(0);
    }
    close(s);
    return 0;
}

/* Starts a fake server answering with script[0], script[1], ... in order
 * (then 500s). 0 or -errno. */
static inline int et_fake_start(struct et_fake *f, const struct et_reply *script, size_t n)
{
    return et_fake_fork(f, et_fake_listen(f), script, NULL, n);
}

/* Starts a fake server answering by path (et_route_serve). 0 or -errno. */
static inline int et_router_start(struct et_fake *f, const struct et_route *routes, size_t n)
{
    return et_fake_fork(f, et_fake_listen(f), NULL, routes, n);
}

static inline void et_fake_stop(struct et_fake *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        vt_wait(f->pid, 5000);
        f->pid = 0;
    }
}

/* The fake's request log, "METHOD PATH BODY" per line (a static buffer). */
static inline const char *et_fake_log(const struct et_fake *f)
{
    static char buf[1 << 16];
    buf[0] = '\0';
    FILE *fp = fopen(f->log, "r");
    if (fp) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
        buf[n] = '\0';
        fclose(fp);
    }
    return buf;
}

/* A loopback port nothing listens on (bound, then closed). */
static inline int et_closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) < 0) {
        if (s >= 0)
            close(s);
        return 1; /* tcpmux: nobody serves it on loopback */
    }
    close(s);
    return ntohs(a.sin_port);
}

/* A transient error: negative, neither VIGIL_ELOST nor VIGIL_EBUSY. */
static inline bool et_transient(int rc)
{
    return rc < 0 && rc != VIGIL_ELOST && rc != VIGIL_EBUSY;
}

/* ---- the fault proxies in front of the cluster's members (tests/etcd_proxy.py) ---- */

/* Every member's proxy (comma-separated): 0, VT_SKIP (no cluster, or no
 * python3 for the proxies), or 1. */
static inline int et_proxies(const char **endpoints)
{
    static char buf[1000];
    int rc = et_cluster(endpoints);
    if (rc)
        return rc;
    if (et_state_line(getenv("VIGIL_ETCD3_STATE"), "proxies", buf, sizeof(buf)) < 0) {
        fprintf(stderr, "skip: the cluster has no fault proxies (python3 missing?)\n");
        return VT_SKIP;
    }
    *endpoints = buf;
    return 0;
}

/* Member i's proxy URL ("" when none; a static buffer per call, four in turn). */
static inline const char *et_proxy_url(int i)
{
    static char bufs[4][300];
    static unsigned next;
    char *b = bufs[next++ % 4], name[32];
    snprintf(name, sizeof(name), "%d/proxy", i);
    if (et_state_line(getenv("VIGIL_ETCD3_STATE"), name, b, sizeof(bufs[0])) < 0)
        b[0] = '\0';
    return b;
}

/* Which member's proxy url is (1..9), or -1. */
static inline int et_proxy_of(const char *url)
{
    for (int i = 1; i <= 9; i++) {
        const char *p = et_proxy_url(i);
        if (p[0] && url && strcmp(p, url) == 0)
            return i;
    }
    return -1;
}

/* A command to member i's proxy (bounded: 30 s): its one-line answer (a
 * static buffer; "" when none came). */
static inline const char *et_proxy(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline const char *et_proxy(int i, const char *fmt, ...)
{
    static char answer[512];
    char cmd[600], req[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    answer[0] = '\0';
    const char *url = et_proxy_url(i), *colon = strrchr(url, ':');
    if (!url[0] || !colon)
        return answer;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int n = snprintf(req, sizeof(req), "POST /_proxy HTTP/1.1\r\nHost: proxy\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(cmd), cmd);
    static char got[4096];
    size_t have = 0;
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 && et_write_all(s, req, (size_t)n)) {
        uint64_t deadline = vt_now_ms() + 30000;
        char *body;
        while (!((body = memmem(got, have, "\r\n\r\n", 4)) && memchr(body + 4, '\n', have - (size_t)(body + 4 - got))) &&
               vt_now_ms() < deadline && have + 1 < sizeof(got)) {
            struct pollfd pf = { s, POLLIN, 0 };
            if (poll(&pf, 1, 1000) <= 0)
                continue;
            ssize_t k = read(s, got + have, sizeof(got) - 1 - have);
            if (k <= 0)
                break;
            have += (size_t)k;
        }
        got[have] = '\0';
        if ((body = strstr(got, "\r\n\r\n"))) {
            snprintf(answer, sizeof(answer), "%s", body + 4);
            answer[strcspn(answer, "\r\n")] = '\0';
        }
    }
    if (s >= 0)
        close(s);
    return answer;
}

#endif
