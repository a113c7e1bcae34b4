/* SPDX-License-Identifier: MIT */
/*
 * Description: wherever etcdctl works, vigil works. The TLS and auth
 * configurations production etcds run with, each against a real etcd (the
 * etcd_stls fixture: server-only TLS; etcd_tls: mutual TLS with
 * --client-cert-auth; both --auth-token-ttl=2, their certificates made
 * with openssl: tests/etcd_cluster.sh certs), taken column by column as a
 * user meets them:
 *
 *   etcdctl     --endpoints --cacert --cert --key --user as a user types
 *               them: `lock KEY` held and seen by `get --prefix`; then the
 *               same through ETCDCTL_* variables. It comes first: a
 *               configuration etcdctl cannot serve is out of the matrix.
 *   vigil lock  the same flags, its CMD etcdctl seeing the key vigil holds
 *               (under the namespace where there is one); then the same
 *               through the ETCDCTL_* variables.
 *   C API       vigil_etcd_connect_opts; acquire, a keepalive, release; a
 *               session holding a key; a group's join, add, take, done,
 *               leave.
 *   Python      vigil.Etcd(...).lock(...) and a group's join, take, done
 *               (tests/etcd_matrix.py, with this build's libraries).
 *
 * Auth is set up with etcdctl as a user does (user add, role add,
 * grant-permission, auth enable; et_auth), ET_CN_USER named as the client
 * certificate's CommonName for the identity that needs no password. Token
 * expiry: everything held (etcdctl's lock too) for three renewal periods
 * of a 10 s TTL (3.2 s each, past the token's idle life of 2 s to 3 s:
 * each renewal finds the token gone), still held after, and released;
 * etcd's Authenticate count shows a token was renewed.
 *
 * A vigil cell is judged by what its transport spoke, not by a list: a
 * failure whose reason is etcd's JSON gateway refusing a client
 * certificate with a CommonName while auth is on (et_gateway_refusal) is
 * XFAIL (gRPC serves it); any other failure is FAIL. The
 * transport is whatever VIGIL_ETCD_TRANSPORT picks for the whole run (C
 * API, vigil lock and Python alike): CTest runs the matrix as the user
 * gets it (etcd_test_matrix: unset, auto), and again with gRPC and with
 * the gateway forced (etcd_test_matrix_grpc, etcd_test_matrix_gateway).
 * With gRPC forced on a library that reads the variable (reads_transport:
 * it refuses an unknown one), the refusal is FAIL: those cells must pass
 * there; the gateway's stay XFAIL for good. The
 * last case prints the matrix (docs/testing.md has it).
 */
#include "etcd_testutil.h"

#include <vigil/group.h>

#ifndef VIGIL_TOOL
#error "VIGIL_TOOL (the path of the built vigil) is set by tests/CMakeLists.txt"
#endif

#define TTL_MS    10000 /* each renewal 3.2 s after the last: past a token's idle life */
#define WINDOW_MS (3 * 3200 + 500) /* three renewals: three tokens gone */

enum { STLS, MTLS }; /* the servers */
enum { L_CTL, L_TOOL, L_C, L_PY, LAYERS };
enum cell { NOT_RUN, PASS, XFAIL, SKIP, FAIL }; /* worse the later */
static const char *const layer_name[LAYERS] = { "etcdctl", "vigil lock", "C API", "Python" };
static const char *const cell_name[] = { "-", "pass", "XFAIL", "skip", "FAIL" };

struct config {
    const char *name;     /* in the matrix (docs/testing.md) */
    int         server;
    const char *cert;     /* the client certificate ("client": no CommonName; "client-cn"), or NULL */
    bool        auth;     /* etcd auth on */
    bool        password; /* as ET_USER with its password; else no user: the CommonName is the identity */
    bool        ns;       /* under a namespace */
    bool        expiry;   /* held across several token expiries */
};

static const struct config configs[] = {
    { .name = "server-only TLS", .server = STLS },
    { .name = "server-only TLS, password", .server = STLS, .auth = true, .password = true },
    { .name = "mutual TLS", .server = MTLS, .cert = "client" },
    { .name = "mutual TLS, CN", .server = MTLS, .cert = "client-cn" },
    { .name = "mutual TLS, password", .server = MTLS, .cert = "client", .auth = true, .password = true },
    { .name = "mutual TLS, CN + password", .server = MTLS, .cert = "client-cn", .auth = true, .password = true },
    { .name = "CN identity, no password", .server = MTLS, .cert = "client-cn", .auth = true },
    { .name = "token expiry", .server = MTLS, .cert = "client", .auth = true, .password = true, .expiry = true },
    { .name = "namespace", .server = MTLS, .cert = "client", .auth = true, .password = true, .ns = true },
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static enum cell cells[NCONFIGS][LAYERS];

/* One configuration's run: how each column reaches etcd, and what a
 * column holds between its start and its finish. */
struct run {
    const struct config *c;
    const char          *url, *certs;
    char                 ca[1200], cert[1200], key[1200];
    struct et_ctl_to     to;        /* etcdctl's flags */
    const char          *user;      /* etcdctl's --user NAME:PASSWORD, or NULL */
    char                 ns[96];    /* "" for none */
    char                 go[600];   /* exists once the held columns may go on */
    char                 env[6][1300]; /* the ETCDCTL_* variables */
    const char          *envp[7];
    char k_ctl[128], k_ctl_env[128], k_tool[128], k_tool_env[128], k_c[128], k_s[128], group[128], k_py[128],
        g_py[128];
    struct vt_proc ctl, tool, py;
    /* the C column */
    vigil_etcd         *e;
    vigil_lease         l, sl;
    vigil_keepalive    *ka;
    vigil_etcd_session *s;
    vigil_group_member *m;
    vigil_group_unit    u;
    char                why[LAYERS][600]; /* what went wrong, per column */
};
static struct run R_;

/* ---- small helpers ---------------------------------------------------------- */

/* What went wrong in r's column layer, in a line of at most 600 bytes. */
static void say(struct run *r, int layer, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct run *r, int layer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why[layer], sizeof(r->why[0]), fmt, ap);
    va_end(ap);
    for (char *p = r->why[layer]; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Runs argv to its end (bounded: 30 s) with env in the child alone:
 * its exit status (-1 when it could not run or was killed at the bound),
 * its stdout in out (a static buffer), its stderr in err. */
static int run_to_end(const char *const *argv, const char *const *env, const char **out, char *err, size_t errcap)
{
    static struct vt_proc p;
    const char *errpath = vt_path("run.stderr");
    unlink(errpath);
    *out = p.buf;
    p.buf[0] = '\0';
    if (et_spawnve(&p, argv, env, errpath) != 0)
        return -1;
    vt_read_until(&p, "\x01", 30000); /* all it says, until it closes */
    int st = vt_wait(p.pid, 30000);
    close(p.fd);
    slurp(errpath, err, errcap);
    return st;
}

/* a ⊔ b: the worse of two cells. */
static enum cell worse(enum cell a, enum cell b)
{
    return a > b ? a : b;
}

/* Does this library read VIGIL_ETCD_TRANSPORT (the gRPC transport's
 * switch)? A library that reads it refuses a transport it does not know;
 * one that does not serves the fixture's plain etcd as ever (the key is
 * vacant). Asked once, in a child of its own (a library may read the
 * variable once per process), before the test has any thread. */
static bool reads_transport(void)
{
    static int known = -1;
    const char *url;
    if (known >= 0 || et_fixture(&url) != 0)
        return known > 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("VIGIL_ETCD_TRANSPORT", "no-such-transport", 1);
        vigil_etcd *e = NULL;
        vigil_lease_info info;
        int rc = vigil_etcd_connect(url, &e);
        if (rc == 0)
            rc = vigil_etcd_get(e, et_key("transport-probe"), &info);
        bool reads = rc != 0 && rc != VIGIL_EVACANT;
        printf("this library %s VIGIL_ETCD_TRANSPORT (an unknown one: %s)\n", reads ? "reads" : "does not read",
               reads ? vigil_etcd_errmsg() : "etcd served as ever");
        fflush(stdout);
        _exit(reads ? 1 : 0);
    }
    int st = pid > 0 ? vt_wait(pid, 30000) : -1;
    known = st == 1;
    if (st != 0 && st != 1)
        printf("the transport probe ended with %d: taken as a library that does not read the variable\n", st);
    return known > 0;
}

/* Is gRPC forced on a library that has it? Then no cell may meet the
 * gateway's refusal. */
static bool grpc_forced(void)
{
    const char *t = getenv("VIGIL_ETCD_TRANSPORT");
    return t && strcmp(t, "grpc") == 0 && reads_transport();
}

/* A vigil column's outcome, judged by what was spoken, not by a list of
 * configurations: PASS when ok; XFAIL when why is etcd's JSON gateway
 * refusing a CommonName (the transport that spoke was the gateway, which
 * cannot serve the cell), unless gRPC was forced on a library that has it
 * (then the gateway should never have spoken); any other failure FAIL. A
 * transport that speaks gRPC never meets that refusal, so there the same
 * cell passes or fails. */
static enum cell judge(bool ok, const char *why)
{
    if (ok)
        return PASS;
    return ET_GATEWAY_XFAIL && et_gateway_refusal(why) && !grpc_forced() ? XFAIL : FAIL;
}

/* etcd's count of Authenticate requests served so far (-1 unknown), from
 * its /metrics as curl reads them: apart from vigil, whatever transport it
 * speaks. */
static long long authenticated(struct run *r)
{
    char metrics[1400], cert[1300], key[1300], err[512];
    snprintf(metrics, sizeof(metrics), "%s/metrics", r->url);
    snprintf(cert, sizeof(cert), "%s/client.pem", r->certs);
    snprintf(key, sizeof(key), "%s/client-key.pem", r->certs);
    const char *argv[] = { "sh", "-c",
                           "curl -sS --max-time 10 \"$@\" | grep '^grpc_server_started_total{grpc_method=\"Authenticate\",'",
                           "sh", "--cacert", r->ca, metrics,
                           r->c->server == MTLS ? "--cert" : NULL, cert, "--key", key, NULL },
               *out;
    if (run_to_end(argv, NULL, &out, err, sizeof(err)) != 0)
        return -1;
    const char *p = strchr(out, '}');
    return p ? atoll(p + 1) : -1;
}

/* etcd auth on r's server as the configuration wants it, set with
 * etcdctl by root over a certificate without a CommonName; each server's
 * state remembered (-1: unknown, set at the first need). 0, or etcdctl's
 * failing exit status. */
static int auth_state[2] = { -1, -1 };
static int set_auth(const char *url, const char *certs, int server, bool on)
{
    if (auth_state[server] == (int)on)
        return 0;
    struct et_ctl_to admin = et_tls_to(url, certs);
    if (server == STLS)
        admin.cert = admin.key = NULL;
    int st = et_auth(&admin, on);
    auth_state[server] = st == 0 ? (int)on : -1;
    return st;
}

/* ---- etcdctl ---------------------------------------------------------------- */

static void ctl_start(struct run *r)
{
    const char *argv[ET_CTL_ARGV], *const args[] = { "lock", r->k_ctl, NULL };
    et_ctl_argv(argv, &r->to, r->user, args);
    if (et_spawnve(&r->ctl, argv, NULL, vt_path("ctl.stderr")) != 0)
        r->ctl.pid = 0;
}

static enum cell ctl_finish(struct run *r)
{
    char name[140], err[2048] = "";
    snprintf(name, sizeof(name), "%s/", r->k_ctl);
    bool held = r->ctl.pid > 0 && vt_read_until(&r->ctl, name, 20000);
    /* Another etcdctl sees the key held (after the window, when there is one). */
    const char *argv[ET_CTL_ARGV], *out;
    const char *const get[] = { "get", "--prefix", "--keys-only", name, NULL };
    et_ctl_argv(argv, &r->to, r->user, get);
    int gst = held ? run_to_end(argv, NULL, &out, err, sizeof(err)) : -1;
    bool seen = gst == 0 && strstr(out, name);
    int st = r->ctl.pid > 0 ? vt_stop(&r->ctl, SIGTERM, 15000) : -1;
    if (!held || !seen || st != 0) {
        char said[2048];
        slurp(vt_path("ctl.stderr"), said, sizeof(said));
        say(r, L_CTL, "etcdctl lock %s: held %d, seen by get %d (exit %d), exit %d: %s %s",
                 r->k_ctl, held, seen, gst, st, r->ctl.buf, held ? err : said);
        return FAIL;
    }
    /* The same through etcdctl's variables. */
    const char *const env_lock[] = { "etcdctl", "lock", r->k_ctl_env, "--", "echo", "etcdctl-env-held", NULL };
    st = run_to_end(env_lock, r->envp, &out, err, sizeof(err));
    if (st != 0 || !strstr(out, "etcdctl-env-held")) {
        say(r, L_CTL, "etcdctl lock with ETCDCTL_*: exit %d, '%s' %s", st, out, err);
        return FAIL;
    }
    return PASS;
}

/* ---- vigil lock --------------------------------------------------------------- */

/* vigil lock's flags for r, as etcdctl's (plus --namespace), into argv
 * from n on: the new n. */
static size_t tool_flags(const struct run *r, const char **argv, size_t n, bool flags)
{
    argv[n++] = VIGIL_TOOL;
    argv[n++] = "lock";
    argv[n++] = "--etcd";
    argv[n++] = r->url;
    if (flags) {
        argv[n++] = "--cacert";
        argv[n++] = r->ca;
        if (r->c->cert) {
            argv[n++] = "--cert";
            argv[n++] = r->cert;
            argv[n++] = "--key";
            argv[n++] = r->key;
        }
        if (r->user) {
            argv[n++] = "--user";
            argv[n++] = r->user;
        }
    }
    if (r->ns[0]) {
        argv[n++] = "--namespace";
        argv[n++] = r->ns;
    }
    argv[n++] = "--ttl";
    argv[n++] = "10s";
    argv[n++] = "--wait";
    argv[n++] = "20s";
    return n;
}

/* With the flags, holding KEY: CMD says "held", waits for the go file
 * (bounded: 60 s), then is etcdctl listing what etcd has under NS KEY/. */
static void tool_start(struct run *r)
{
    static char full[300];
    snprintf(full, sizeof(full), "%s%s/", r->ns, r->k_tool);
    const char *argv[80];
    size_t n = tool_flags(r, argv, 0, true);
    argv[n++] = r->k_tool;
    argv[n++] = "--";
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = "echo held $VIGIL_LEASE_TOKEN; go=$1; shift; i=0; "
                "while [ ! -e \"$go\" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; exec \"$@\"";
    argv[n++] = "sh";
    argv[n++] = r->go;
    const char *ctl[ET_CTL_ARGV], *const get[] = { "get", "--prefix", "--keys-only", full, NULL };
    et_ctl_argv(ctl, &r->to, r->user, get);
    for (size_t i = 0; ctl[i] && n < 79; i++)
        argv[n++] = ctl[i];
    argv[n] = NULL;
    unlink(vt_path("tool.stderr"));
    if (et_spawnve(&r->tool, argv, NULL, vt_path("tool.stderr")) != 0)
        r->tool.pid = 0;
}

static enum cell tool_finish(struct run *r)
{
    char full[300], err[2048];
    snprintf(full, sizeof(full), "%s%s/", r->ns, r->k_tool);
    int st = -1;
    if (r->tool.pid > 0) {
        vt_read_until(&r->tool, "\x01", 30000); /* to its end: held, then etcdctl's listing */
        st = vt_wait(r->tool.pid, 15000);
        close(r->tool.fd);
        r->tool.pid = 0;
    }
    slurp(vt_path("tool.stderr"), err, sizeof(err));
    bool ok = st == 0 && strstr(r->tool.buf, "held ") && strstr(r->tool.buf, full);
    enum cell flags = judge(ok, err);
    if (!ok)
        say(r, L_TOOL, "vigil lock with the flags: exit %d, '%s', %s", st, r->tool.buf,
                 err);
    /* The same through etcdctl's variables. */
    const char *argv[80], *out;
    size_t n = tool_flags(r, argv, 0, false);
    argv[n++] = r->k_tool_env;
    argv[n++] = "--";
    argv[n++] = "echo";
    argv[n++] = "tool-env-held";
    argv[n] = NULL;
    st = run_to_end(argv, r->envp, &out, err, sizeof(err));
    ok = st == 0 && strstr(out, "tool-env-held");
    if (!ok && flags == PASS)
        say(r, L_TOOL, "vigil lock with ETCDCTL_*: exit %d, '%s', %s", st, out, err);
    return worse(flags, judge(ok, err));
}

/* ---- the C API ---------------------------------------------------------------- */

/* Records a failed step of the C column: false. */
static bool c_failed(struct run *r, const char *step, int rc)
{
    say(r, L_C, "%s: %d (%s): %s", step, rc, vigil_strerror(rc), vigil_etcd_errmsg());
    return false;
}
#define C_DO(r, step, call)                          \
    do {                                             \
        int c_do_rc_ = (call);                       \
        if (c_do_rc_ < 0)                            \
            return c_failed((r), (step), c_do_rc_);  \
    } while (0)

static bool c_start(struct run *r)
{
    struct vigil_etcd_options o = { .cacert = r->ca, .namespace = r->ns[0] ? r->ns : NULL };
    if (r->c->cert)
        o.cert = r->cert, o.key = r->key;
    if (r->c->password)
        o.user = ET_USER, o.password = ET_USER_PW;
    C_DO(r, "vigil_etcd_connect_opts", vigil_etcd_connect_opts(r->url, &o, &r->e));
    C_DO(r, "vigil_etcd_acquire", vigil_etcd_acquire(r->e, r->k_c, "matrix-c", TTL_MS, &r->l));
    vigil_lease_port port = vigil_etcd_port(r->e);
    C_DO(r, "vigil_keepalive_start", vigil_keepalive_start(&port, &r->l, &r->ka));
    C_DO(r, "vigil_etcd_session_open", vigil_etcd_session_open(r->e, TTL_MS, &r->s));
    C_DO(r, "vigil_etcd_session_acquire", vigil_etcd_session_acquire(r->s, r->k_s, "matrix-s", &r->sl));
    struct vigil_group_options go = { .dir = "" };
    C_DO(r, "vigil_group_join", vigil_group_join_opts(r->e, r->group, "c", TTL_MS, &go, &r->m));
    C_DO(r, "vigil_group_add", vigil_group_add(r->e, r->group, "unit-c"));
    C_DO(r, "vigil_group_take", vigil_group_take(r->m, &r->u));
    return true;
}

/* Everything the C column started still held, used once more, then
 * given back; whatever is open is closed, whatever happened. */
static bool c_check(struct run *r)
{
    vigil_lease_info info;
    if (vigil_keepalive_lost(r->ka))
        return c_failed(r, "the keepalive lost the lease", VIGIL_ELOST);
    C_DO(r, "vigil_etcd_get", vigil_etcd_get(r->e, r->k_c, &info));
    if (info.token != r->l.token)
        return c_failed(r, "vigil_etcd_get: another token", VIGIL_ELOST);
    if (vigil_etcd_session_lost(r->s))
        return c_failed(r, "the session was lost", VIGIL_ELOST);
    C_DO(r, "vigil_etcd_get (the session's key)", vigil_etcd_get(r->e, r->k_s, &info));
    if (info.token != r->sl.token)
        return c_failed(r, "the session's key: another token", VIGIL_ELOST);
    C_DO(r, "vigil_group_done", vigil_group_done(r->m, &r->u));
    vigil_keepalive *ka = r->ka;
    r->ka = NULL;
    C_DO(r, "vigil_keepalive_stop", vigil_keepalive_stop(ka));
    C_DO(r, "vigil_etcd_release", vigil_etcd_release(r->e, &r->l));
    vigil_etcd_session *s = r->s;
    r->s = NULL;
    C_DO(r, "vigil_etcd_session_close", vigil_etcd_session_close(s));
    vigil_group_member *m = r->m;
    r->m = NULL;
    C_DO(r, "vigil_group_leave", vigil_group_leave(m));
    return true;
}

static enum cell c_finish(struct run *r, bool started)
{
    bool ok = started && c_check(r);
    vigil_keepalive_stop(r->ka);
    vigil_etcd_session_close(r->s);
    vigil_group_leave(r->m);
    vigil_etcd_close(r->e);
    r->ka = NULL, r->s = NULL, r->m = NULL, r->e = NULL;
    return judge(ok, r->why[L_C]);
}

/* ---- Python ------------------------------------------------------------------- */

#ifdef VIGIL_PYTHON_DIR
/* A python3 with cffi (Debian's first), or NULL. */
static const char *python(void)
{
    static const char *found;
    static bool looked;
    static const char *const candidates[] = { "/usr/bin/python3", "python3" };
    for (size_t i = 0; !looked && i < 2; i++) {
        const char *argv[] = { candidates[i], "-c", "import cffi", NULL }, *out;
        char err[512];
        if (run_to_end(argv, NULL, &out, err, sizeof(err)) == 0)
            found = candidates[i];
        looked = found != NULL || i == 1;
    }
    return found;
}

/* s as a JSON string (the paths and names here: '"', '\\' and controls
 * escaped), or null. */
static void json_str(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    if (!s) {
        snprintf(buf, cap, "null");
        return;
    }
    buf[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        if (*s == '"' || *s == '\\')
            buf[n++] = '\\', buf[n++] = *s;
        else if ((unsigned char)*s < 0x20)
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", *s);
        else
            buf[n++] = *s;
    }
    buf[n++] = '"';
    buf[n] = '\0';
}
#endif

/* PASS once started, SKIP where Python cannot run, FAIL. */
static enum cell py_start(struct run *r)
{
#ifdef VIGIL_PYTHON_DIR
    const char *py = python();
    if (!py) {
        say(r, L_PY, "no python3 with cffi (Debian: python3-cffi)");
        return SKIP;
    }
    static char cfg[12000], env[6][12100];
    char v[8][1300];
    json_str(v[0], sizeof(v[0]), r->url);
    json_str(v[1], sizeof(v[1]), r->ca);
    json_str(v[2], sizeof(v[2]), r->c->cert ? r->cert : NULL);
    json_str(v[3], sizeof(v[3]), r->c->cert ? r->key : NULL);
    json_str(v[4], sizeof(v[4]), r->c->password ? ET_USER : NULL);
    json_str(v[5], sizeof(v[5]), r->c->password ? ET_USER_PW : NULL);
    json_str(v[6], sizeof(v[6]), r->ns[0] ? r->ns : NULL);
    json_str(v[7], sizeof(v[7]), r->go);
    snprintf(cfg, sizeof(cfg),
             "{\"endpoints\": %s, \"cacert\": %s, \"cert\": %s, \"key\": %s, \"user\": %s, \"password\": %s, "
             "\"namespace\": %s, \"go\": %s, \"lock\": \"%s\", \"group\": \"%s\", \"ttl\": %d}",
             v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], r->k_py, r->g_py, TTL_MS / 1000);
    snprintf(env[0], sizeof(env[0]), "VIGIL_MATRIX=%s", cfg);
    snprintf(env[1], sizeof(env[1]), "PYTHONPATH=%s", VIGIL_PYTHON_DIR);
    snprintf(env[2], sizeof(env[2]), "VIGIL_LIBRARY=%s", VIGIL_LIBRARY_FILE);
    snprintf(env[3], sizeof(env[3]), "VIGIL_ETCD_LIBRARY=%s", VIGIL_ETCD_LIBRARY_FILE);
    snprintf(env[4], sizeof(env[4]), "PYTHONDONTWRITEBYTECODE=1");
    const char *const envp[] = { env[0], env[1], env[2], env[3], env[4], NULL };
    const char *const argv[] = { py, VIGIL_TEST_SOURCE_DIR "/etcd_matrix.py", NULL };
    unlink(vt_path("py.stderr"));
    if (et_spawnve(&r->py, argv, envp, vt_path("py.stderr")) != 0) {
        r->py.pid = 0;
        say(r, L_PY, "could not run %s", py);
        return FAIL;
    }
    return PASS;
#else
    say(r, L_PY, "not in a sanitizer build (Python cannot load its libraries)");
    return SKIP;
#endif
}

static enum cell py_finish(struct run *r, enum cell started)
{
    if (started != PASS)
        return started;
    vt_read_until(&r->py, "\x01", 60000); /* to its end: "held TOKEN", then "ok" */
    int st = vt_wait(r->py.pid, 15000);
    close(r->py.fd);
    r->py.pid = 0;
    bool ok = st == 0 && strstr(r->py.buf, "held ") && strstr(r->py.buf, "\nok");
    if (!ok) {
        char err[2048];
        slurp(vt_path("py.stderr"), err, sizeof(err));
        say(r, L_PY, "exit %d: %s %s", st, r->py.buf, err);
    }
    return judge(ok, r->py.buf);
}

/* ---- a configuration, column by column ------------------------------------------ */

static void keys(struct run *r, const char *tag)
{
    char name[64];
#define KEY(field, what)                                              \
    do {                                                              \
        snprintf(name, sizeof(name), "%s-%s", tag, what);             \
        snprintf(r->field, sizeof(r->field), "%s", et_key(name));     \
    } while (0)
    KEY(k_ctl, "ctl");
    KEY(k_ctl_env, "ctl-env");
    KEY(k_tool, "tool");
    KEY(k_tool_env, "tool-env");
    KEY(k_c, "c");
    KEY(k_s, "session");
    KEY(group, "group");
    KEY(k_py, "py");
    KEY(g_py, "py-group");
#undef KEY
}

/* The ETCDCTL_* variables that stand for r's flags. */
static void env_vars(struct run *r)
{
    size_t n = 0;
    snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_ENDPOINTS=%s", r->url);
    snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_CACERT=%s", r->ca);
    if (r->c->cert) {
        snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_CERT=%s", r->cert);
        snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_KEY=%s", r->key);
    }
    if (r->c->password) {
        snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_USER=%s", ET_USER);
        snprintf(r->env[n++], sizeof(r->env[0]), "ETCDCTL_PASSWORD=%s", ET_USER_PW);
    }
    for (size_t i = 0; i < n; i++)
        r->envp[i] = r->env[i];
    r->envp[n] = NULL;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

static int run_config(size_t i)
{
    struct run *r = &R_;
    memset(r, 0, sizeof(*r));
    r->c = &configs[i];
    int rc = r->c->server == STLS ? et_stls(&r->url, &r->certs) : et_tls(&r->url, &r->certs);
    if (rc)
        return rc;
    (void)grpc_forced(); /* the probe, while the test is one thread */
    NEED_ETCDCTL(); /* each configuration is proven with etcdctl first */
    snprintf(r->ca, sizeof(r->ca), "%s/ca.pem", r->certs);
    if (r->c->cert) {
        snprintf(r->cert, sizeof(r->cert), "%s/%s.pem", r->certs, r->c->cert);
        snprintf(r->key, sizeof(r->key), "%s/%s-key.pem", r->certs, r->c->cert);
    }
    r->to = (struct et_ctl_to){ r->url, r->ca, r->c->cert ? r->cert : NULL, r->c->cert ? r->key : NULL };
    r->user = r->c->password ? ET_USER ":" ET_USER_PW : NULL;
    if (r->c->ns)
        snprintf(r->ns, sizeof(r->ns), "%sns-%d-%zu/", ET_USER_PFX, (int)getpid(), i);
    char tag[16];
    snprintf(tag, sizeof(tag), "m%zu", i);
    keys(r, tag);
    env_vars(r);
    snprintf(r->go, sizeof(r->go), "%s", vt_path(tag));
    int st = set_auth(r->url, r->certs, r->c->server, r->c->auth);
    EXPECT(st == 0, "%s: etcdctl could not turn auth %s (exit %d)", r->c->name, r->c->auth ? "on" : "off", st);

    enum cell *row = cells[i];
    long long a0 = -1, a1 = -1;
    if (!r->c->expiry) {
        touch(r->go); /* nothing to wait for: each column in turn */
        ctl_start(r);
        row[L_CTL] = ctl_finish(r);
        tool_start(r);
        row[L_TOOL] = tool_finish(r);
        row[L_C] = c_finish(r, c_start(r));
        row[L_PY] = py_finish(r, py_start(r));
    } else {
        /* Every column holds at once; the C column, whose keepalives are
         * threads, starts last, after the forks. */
        ctl_start(r);
        tool_start(r);
        enum cell py = py_start(r);
        bool c = c_start(r);
        a0 = authenticated(r);
        vt_sleep_ms(WINDOW_MS);
        touch(r->go);
        row[L_C] = c_finish(r, c);
        row[L_TOOL] = tool_finish(r);
        row[L_PY] = py_finish(r, py);
        a1 = authenticated(r); /* before etcdctl lets go: its unlock authenticates again too */
        row[L_CTL] = ctl_finish(r);
    }
    int failed = 0;
    for (int l = 0; l < LAYERS; l++) {
        if (row[l] == XFAIL)
            printf("XFAIL %s, %s: etcd's JSON gateway refuses a client certificate with a CommonName while auth "
                   "is on (gRPC serves it)\n", r->c->name, layer_name[l]);
        else if (row[l] == SKIP)
            printf("%s, %s: skipped: %s\n", r->c->name, layer_name[l], r->why[l]);
        else if (row[l] == FAIL) {
            fprintf(stderr, "%s, %s: FAIL: %s\n", r->c->name, layer_name[l], r->why[l]);
            failed = 1;
        }
    }
    if (row[L_CTL] == FAIL)
        fprintf(stderr, "%s: etcdctl itself fails with these flags: the configuration cannot be in the matrix "
                        "as it stands\n", r->c->name);
    /* Three renewal periods, each past a token's idle life: at least three
     * tokens renewed (one per period by the C column's keepalives alone). */
    if (r->c->expiry) {
        printf("%s: etcd served %lld Authenticate requests while everything was held (%lld, then %lld)\n",
               r->c->name, a1 - a0, a0, a1);
        if (!(a0 >= 0 && a1 - a0 >= 3)) {
            fprintf(stderr, "%s: expected at least 3 tokens renewed in %d ms of tokens lasting 2 s idle "
                            "(Authenticate %lld, then %lld)\n", r->c->name, WINDOW_MS, a0, a1);
            failed = 1;
        }
    }
    return failed;
}

#define CONFIG_CASE(fn, i) \
    static int fn(void) { return run_config(i); }
CONFIG_CASE(test_server_tls, 0)
CONFIG_CASE(test_server_tls_password, 1)
CONFIG_CASE(test_mutual_tls, 2)
CONFIG_CASE(test_mutual_tls_cn, 3)
CONFIG_CASE(test_mutual_tls_password, 4)
CONFIG_CASE(test_mutual_tls_cn_password, 5)
CONFIG_CASE(test_cn_identity, 6)
CONFIG_CASE(test_token_expiry, 7)
CONFIG_CASE(test_namespace, 8)

/* Auth off again on both servers (the other TLS tests start from there),
 * and the matrix as it ran. */
static int test_matrix(void)
{
    int rc = 0;
    const char *url, *certs;
    if (auth_state[STLS] != 0 && et_stls(&url, &certs) == 0)
        rc |= set_auth(url, certs, STLS, false) != 0;
    if (auth_state[MTLS] != 0 && et_tls(&url, &certs) == 0)
        rc |= set_auth(url, certs, MTLS, false) != 0;
    const char *transport = getenv("VIGIL_ETCD_TRANSPORT");
    printf("\nthe matrix, VIGIL_ETCD_TRANSPORT=%s\n", transport && *transport ? transport : "(unset: auto)");
    printf("%-28s", "configuration");
    for (int l = 0; l < LAYERS; l++)
        printf(" %-11s", layer_name[l]);
    printf("\n");
    for (size_t i = 0; i < NCONFIGS; i++) {
        printf("%-28s", configs[i].name);
        for (int l = 0; l < LAYERS; l++)
            printf(" %-11s", cell_name[cells[i][l]]);
        printf("\n");
    }
    EXPECT(rc == 0, "etcdctl could not turn auth off again");
    return 0;
}

VT_MAIN(VT_CASE(test_server_tls), VT_CASE(test_server_tls_password), VT_CASE(test_mutual_tls),
        VT_CASE(test_mutual_tls_cn), VT_CASE(test_mutual_tls_password), VT_CASE(test_mutual_tls_cn_password),
        VT_CASE(test_cn_identity), VT_CASE(test_token_expiry), VT_CASE(test_namespace), VT_CASE(test_matrix))
