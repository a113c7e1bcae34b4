/* SPDX-License-Identifier: MIT */
/*
 * vigil lock (--store FILE | --etcd ENDPOINTS) [--ttl DURATION] [--wait
 * DURATION] [--owner NAME] [--kill-after DURATION] KEY -- CMD [ARG...]: runs CMD while
 * holding KEY's lease, as flock(1), `etcdctl lock` and `consul lock` do,
 * with fencing: CMD gets the token in VIGIL_LEASE_TOKEN.
 *
 * The order of things: acquire (waiting up to --wait), start the
 * keepalive, look at it once more, fork and exec CMD; then one poll(2) on
 * a signalfd (SIGCHLD and the signals passed on) and on the keepalive's
 * fd, readable the moment the lease is lost (refused, or expired
 * locally). On loss CMD gets SIGTERM, then SIGKILL after --kill-after.
 * Once CMD has exited: stop the keepalive, release the lease.
 *
 * CMD never runs without the lease (issue 18):
 *  - every signal that would end the tool by default and can be caught
 *    (INT, TERM, HUP, QUIT, USR1, USR2, ALRM, PIPE) is taken by the
 *    signalfd and passed on to CMD, so the tool outlives CMD and releases
 *    after it; SIGKILL of the tool kills CMD (PR_SET_PDEATHSIG, set in
 *    the child and checked against the parent's pid, which a tool killed
 *    before the prctl no longer is);
 *  - the keepalive is asked before the fork and again in the child just
 *    before the exec (vigil_keepalive_lost judges the clock itself, so a
 *    tool stalled past the TTL anywhere on the way finds the loss even
 *    before its watcher thread runs): a lost lease is exit 79 with no CMD.
 *    A loss after the child's look is the supervised one (SIGTERM).
 *  - SIGSTOP of the tool past the TTL is the one window left: CMD runs on
 *    until the tool is continued and sees the loss; vigil(1) says so and
 *    names the answer, the fencing token.
 *
 * Exit status: CMD's own (128 + n for signal n), 75 not acquired within
 * --wait, 79 lease lost while CMD ran, 2 usage, 1 other errors (one line
 * on stderr naming the key and the reason). CMD not found is 127, not
 * executable 126, as the shells and env(1) say.
 */
#define _GNU_SOURCE
#include "etcd_opts.h"
#include "etcd_report.h"
#include "fds.h"
#include "vigil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef VIGIL_HAVE_ETCD
#include <vigil/etcd.h>
#else
#include "etcd_exec.h"
#endif

enum { EXIT_NOT_ACQUIRED = 75, EXIT_LOST = 79 };

/* A store made by --store when FILE is missing: 1024 keys, 256 KiB. */
#define LOCK_STORE_CAPACITY 1024u
#define LOCK_MAX_TTL_MS     UINT64_C(86400000)        /* a day */
#define LOCK_MAX_WAIT_MS    (UINT64_MAX / 1000000 - 1) /* in ns, below UINT64_MAX */

/* The fds the tool was given: CMD inherits these and no other, whatever
 * the libraries opened without close-on-exec. */
static void note_inherited(void)
{
    tool_fds_note();
}

/* "vigil: KEY: message" on stderr; EXIT_RUNTIME. */
__attribute__((format(printf, 2, 3))) static int lock_fail(const char *key, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vigil: %s: ", tool_e(key));
    va_start(ap, fmt);
    tool_vmsg(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_RUNTIME;
}

/* ---- the two backends ------------------------------------------------------ */

struct backend {
    const char   *where; /* FILE or ENDPOINTS, for messages */
    vigil_leases *ls;
#ifdef VIGIL_HAVE_ETCD
    vigil_etcd   *e;
    struct tool_etcd_report rep; /* etcd's trouble said while we wait and hold */
#endif
};

static int backend_open(struct backend *b, const char *store, const char *etcd, const char *key, uint64_t ttl,
                        const struct tool_cmd *cmd, struct tool_etcd_flags *flags, bool trust)
{
    int rc;
    if (store) {
        /* A store another user could have made is refused (unless
         * --trust-owner): its owner could keep KEY from us, or truncate it
         * under us. */
        b->where = store;
        tool_warn_dir(store);
        unsigned how = trust ? VIGIL_OPEN_TRUST_OWNER : 0;
        rc = vigil_leases_open_flags(store, how, &b->ls);
        if (rc == -ENOENT) {
            rc = vigil_leases_create(store, LOCK_STORE_CAPACITY, &b->ls);
            if (rc == -EEXIST) /* another vigil lock made it first */
                rc = vigil_leases_open_flags(store, how, &b->ls);
            else if (rc == -ENOSPC || rc == -EDQUOT)
                return tool_fail_space(store, rc, vigil_file_size(VIGIL_KIND_LEASES, LOCK_STORE_CAPACITY), true);
        }
        /* What the store is (a FIFO, a table, another user's...), said as
         * every other command says it. */
        if (rc == VIGIL_EUNTRUSTED || rc == -ENOSPC || rc == -EDQUOT || rc == -EOPNOTSUPP || rc == VIGIL_EBADFILE ||
            rc == VIGIL_ECAPACITY || rc == -ELOOP || rc == -EACCES || rc == -EPERM)
            return tool_fail_file(store, rc, VIGIL_KIND_LEASES, true);
        return rc < 0 ? lock_fail(key, "lease store %s: %s", store, vigil_strerror(rc)) : 0;
    }
    b->where = etcd;
#ifdef VIGIL_HAVE_ETCD
    struct vigil_etcd_options o;
    if ((rc = tool_etcd_options(cmd, flags, &o)) != TOOL_GO)
        return rc;
    if ((rc = tool_etcd_connect(key, etcd, &o, &b->e)) != 0)
        return rc;
    /* A request is bounded by a beat (ttl / 3): one that takes longer is
     * of no use to the lease, and on a loss to a silent server the
     * keepalive's stop and the release each wait out at most that. */
    uint64_t total = ttl / 3 < 200 ? 200 : ttl / 3 > 3000 ? 3000 : ttl / 3;
    uint64_t dial = flags->dial_ms ? flags->dial_ms : 1000; /* --dial-timeout, --command-timeout: within a beat */
    if (flags->command_ms && flags->command_ms < total)
        total = flags->command_ms;
    vigil_etcd_set_timeout(b->e, (uint32_t)(total < dial ? total : dial), (uint32_t)total);
    return 0;
#else /* the command line goes on in the helper, whole */
    (void)rc, (void)flags, (void)ttl, (void)key;
    return tool_etcd_elsewhere(cmd, 0, NULL);
#endif
}

/* etcd's trouble said from now on (its requests' failures, on a line of
 * their own): for a wait, which rides trouble out, and for the hold; not
 * for an attempt that ends at its first failure, which says it itself. */
static void backend_report(struct backend *b, const char *key)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e && !b->rep.running)
        (void)tool_etcd_report_start(&b->rep, b->e, key, b->where, 0);
#else
    (void)b, (void)key;
#endif
}

static void backend_close(struct backend *b)
{
    vigil_leases_close(b->ls);
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        tool_etcd_report_stop(&b->rep);
    vigil_etcd_close(b->e);
#endif
}

/* The failure a wait met last since since_ns, for the end of its line
 * (", etcd unreachable: ..."), or "". */
static const char *backend_met(struct backend *b, int64_t since_ns)
{
#ifdef VIGIL_HAVE_ETCD
    static char buf[420];
    const char *met = b->e ? tool_etcd_met(b->e, since_ns) : "";
    snprintf(buf, sizeof(buf), "%s%s", *met ? "; " : "", met);
    return buf;
#else
    (void)b, (void)since_ns;
    return "";
#endif
}

static int backend_acquire(struct backend *b, const char *key, const char *owner, uint64_t ttl_ms,
                           uint64_t timeout_ns, vigil_lease *out)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return vigil_etcd_acquire_wait(b->e, key, owner, ttl_ms, timeout_ns, out);
#endif
    return vigil_leases_acquire_wait(b->ls, key, owner, ttl_ms, timeout_ns, out);
}

static int backend_get(struct backend *b, const char *key, vigil_lease_info *out)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return vigil_etcd_get(b->e, key, out);
#endif
    return vigil_leases_get(b->ls, key, out);
}

static int backend_release(struct backend *b, const vigil_lease *l)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return vigil_etcd_release(b->e, l);
#endif
    return vigil_leases_release(b->ls, l);
}

/* Why a call on the backend failed, in a user's words. */
static const char *backend_reason(struct backend *b, int err)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return tool_etcd_reason(b->e, err);
#endif
    (void)b;
    return vigil_strerror(err);
}

/* What the backend said of its last failure on this thread, or "": why a
 * lease was lost, when it knows more than the loss (a store that went
 * backwards). */
static const char *backend_why(struct backend *b)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return vigil_etcd_errmsg();
#endif
    (void)b;
    return "";
}

/* The keepalive's port: its renew is the backend's renew. */
static vigil_lease_port backend_port(struct backend *b)
{
#ifdef VIGIL_HAVE_ETCD
    if (b->e)
        return vigil_etcd_port(b->e);
#endif
    return vigil_leases_port(b->ls);
}

/* ---- CMD -------------------------------------------------------------------- */

/* Frees what lease_env made: the array, and the three strings it starts with. */
static void free_env(char **env)
{
    if (!env)
        return;
    for (int i = 0; i < 3; i++)
        free(env[i]);
    free(env);
}

/* CMD's environment: the lease's three, then ours less any VIGIL_LEASE_*
 * we had and less the etcd passwords (tool_etcd_secret_env). Built
 * before fork: the child only execs. */
static char **lease_env(const vigil_lease *l)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof(*env));
    if (!env)
        return NULL;
    char token[24];
    snprintf(token, sizeof(token), "%" PRIu64, l->token);
    const char *const name[3] = { "VIGIL_LEASE_KEY=", "VIGIL_LEASE_OWNER=", "VIGIL_LEASE_TOKEN=" };
    const char *const value[3] = { l->key, l->owner, token };
    for (int i = 0; i < 3; i++) {
        size_t nl = strlen(name[i]), vl = strlen(value[i]);
        if (!(env[i] = malloc(nl + vl + 1))) {
            free_env(env); /* the ones not made are still NULL */
            return NULL;
        }
        memcpy(env[i], name[i], nl);
        memcpy(env[i] + nl, value[i], vl + 1);
    }
    size_t k = 3;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VIGIL_LEASE_KEY=", 16) != 0 && strncmp(environ[i], "VIGIL_LEASE_OWNER=", 18) != 0 &&
            strncmp(environ[i], "VIGIL_LEASE_TOKEN=", 18) != 0 && !tool_etcd_secret_env(environ[i]))
            env[k++] = environ[i];
    return env;
}

/* Where a test stops the tool (VIGIL_TEST_LOCK_STOP, never set in use):
 * "fork" after the keepalive started and before the last look at it,
 * "exec" in the child before its look. Each raises SIGSTOP, so the test
 * decides how long the stall lasts. */
static void test_stop(const char *where)
{
    const char *at = getenv("VIGIL_TEST_LOCK_STOP");
    if (at && strcmp(at, where) == 0)
        raise(SIGSTOP);
}

/* The child: told to die with the tool (SIGKILL: a CMD that outlived it
 * would run without the lease, which lapses unrenewed), the lease looked
 * at once more, the signal mask as it was (the dispositions were never
 * changed: an ignored SIGINT stays ignored, as under nohup), our own fds
 * closed, CMD. Only async-signal-safe calls before the exec (the parent
 * has threads): prctl, getppid, getpid, clock_gettime, write. */
static _Noreturn void exec_cmd(char **argv, char **env, const sigset_t *old, pid_t parent, vigil_keepalive *ka)
{
    /* Set first, then checked: a parent killed before the prctl left us
     * to init (or a subreaper), whose pid is not `parent`. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(EXIT_RUNTIME);
    test_stop("exec");
    /* The exec is the last moment CMD can be kept from running: a lease
     * lost by now (the tool stalled since its own look) is not exec'd on. */
    if (vigil_keepalive_lost(ka))
        _exit(EXIT_LOST);
    sigprocmask(SIG_SETMASK, old, NULL);
    tool_fds_cloexec_unnoted(3);
    execvpe(argv[0], argv, env);
    int err = errno;
    fprintf(stderr, "vigil: %s: %s\n", tool_e(argv[0]), strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What happened while CMD ran. */
struct outcome {
    int  status; /* CMD's, as a shell reports it */
    bool lost;   /* the keepalive said the lease was lost */
};

/*
 * Waits for CMD: SIGCHLD ends it; the other signals of the set are passed
 * to CMD (not when the terminal sent them, si_code SI_KERNEL: CMD, in our
 * process group, had its own; nor one we raised ourselves, such as the
 * SIGPIPE of a write to a closed stderr); the keepalive's fd readable is the loss:
 * SIGTERM to CMD, SIGKILL kill_after ms later. 0, or EXIT_RUNTIME.
 */
static int supervise(pid_t pid, int sfd, vigil_keepalive *ka, uint64_t kill_after, struct outcome *o)
{
    int lfd = vigil_keepalive_fd(ka);
    uint64_t kill_at = 0; /* when SIGKILL is due, after a loss */
    bool killed = false;
    for (;;) {
        struct pollfd pf[2] = { { sfd, POLLIN, 0 }, { o->lost ? -1 : lfd, POLLIN, 0 } };
        int timeout = -1;
        if (lfd < 0 && !o->lost)
            timeout = 100; /* no fd to wait on: look at lost() ten times a second */
        if (kill_at && !killed) {
            uint64_t now = now_ms();
            uint64_t left = kill_at > now ? kill_at - now : 0;
            if (timeout < 0 || left < (uint64_t)timeout)
                timeout = left > INT_MAX ? INT_MAX : (int)left;
        }
        int n = poll(pf, 2, timeout);
        if (n < 0 && errno != EINTR)
            return EXIT_RUNTIME;
        if (!o->lost && ((lfd >= 0 && (pf[1].revents & POLLIN)) || (lfd < 0 && vigil_keepalive_lost(ka)))) {
            o->lost = true;
            kill(pid, SIGTERM);
            kill_at = now_ms() + kill_after;
        }
        if (kill_at && !killed && now_ms() >= kill_at) {
            kill(pid, SIGKILL);
            killed = true;
        }
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo != SIGCHLD && si.ssi_code != SI_KERNEL && (pid_t)si.ssi_pid != getpid())
                    kill(pid, (int)si.ssi_signo);
            }
        }
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return EXIT_RUNTIME;
    }
}

/* Why KEY was not acquired, with its holder when one can be named, and
 * the failure the wait met last (since since_ns) when it met one. */
static int not_acquired(struct backend *b, const char *key, uint64_t wait_ms, bool waited, int64_t since_ns)
{
    vigil_lease_info info;
    char holder[400] = "";
    if (backend_get(b, key, &info) == 0) {
        /* The owner as the store or etcd has it: lock_fail escapes it. */
        snprintf(holder, sizeof(holder), ": held by '%.*s' (token %" PRIu64 ")", (int)sizeof(info.owner),
                 info.owner, info.token);
    }
    char within[32];
    tool_format_ms(wait_ms, within, sizeof(within));
    const char *met = backend_met(b, since_ns);
    if (waited)
        lock_fail(key, "not acquired within %s%s%s", within, holder, met);
    else
        lock_fail(key, "not acquired (--wait 0)%s%s", holder, met);
    return EXIT_NOT_ACQUIRED;
}

static int run(const struct tool_cmd *cmd, int argc, char **argv)
{
    const char *store = NULL, *etcd = NULL, *owner_opt = NULL, *ttl_text = NULL;
    struct tool_etcd_where where = { NULL, NULL };
    uint64_t ttl = 10000, wait_ms = 0, kill_after = 5000;
    bool have_wait = false, trust = false;
    struct tool_etcd_flags flags = { 0 };
    const struct tool_opt opts[] = {
        { "store", OPT_STR, 0, 0, NULL, NULL, &store },
        TOOL_ETCD_WHERE_OPTS(&where),
        { "ttl", OPT_MS, 3, LOCK_MAX_TTL_MS, &ttl, NULL, &ttl_text },
        { "wait", OPT_MS, 0, LOCK_MAX_WAIT_MS, &wait_ms, &have_wait, NULL },
        { "owner", OPT_STR, 0, 0, NULL, NULL, &owner_opt },
        { "kill-after", OPT_MS, 0, LOCK_MAX_TTL_MS, &kill_after, NULL, NULL },
        { "trust-owner", OPT_FLAG, 0, 0, NULL, &trust, NULL },
        TOOL_ETCD_OPTS(&flags),
    };
    /* KEY before "--", CMD after it: the options end at the first "--". */
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    const char *pos[1];
    size_t npos = 0;
    int rc = tool_parse(cmd, dd, argv, opts, sizeof(opts) / sizeof(opts[0]), pos, 0, 1, &npos);
    if (rc != TOOL_GO)
        return rc;
    /* ETCDCTL_ENDPOINTS stands for --etcd when no --store is given. */
    if (store && !where.etcd && !where.endpoints)
        etcd = NULL;
    else if ((rc = tool_etcd_where(cmd, &where, &etcd)) != TOOL_GO)
        return rc;
    if (!store == !etcd)
        return tool_usage_error(cmd, store ? "exactly one of --store FILE and --etcd ENDPOINTS"
                                           : "exactly one of --store FILE and --etcd ENDPOINTS (or --endpoints, or "
                                             "ETCDCTL_ENDPOINTS in the environment)");
    if (store && tool_etcd_flags_given(&flags))
        return tool_usage_error(cmd, "the etcd connection flags (--cacert ... --namespace) go with --etcd");
    if (npos == 0)
        return tool_usage_error(cmd, "missing KEY");
    if (dd + 1 >= argc)
        return tool_usage_error(cmd, dd == argc ? "missing '--' and CMD after KEY" : "missing CMD after '--'");
    /* flock(1) and etcdctl take seconds: a bare --ttl under a second was
     * most likely meant as seconds. Said, not refused: "--ttl 500ms"
     * (any unit) is the way to mean it and silence this. */
    if (ttl_text && tool_duration_bare(ttl_text) && ttl < 1000)
        fprintf(stderr, "vigil lock: warning: --ttl %s is %sms (a number alone is milliseconds); for seconds "
                        "write --ttl %ss\n", ttl_text, ttl_text, ttl_text);
    const char *key = pos[0];
    if (!*key || strlen(key) >= sizeof(((vigil_lease *)0)->key))
        return tool_usage_error(cmd, "KEY: 1 to 127 bytes, not %zu", strlen(key));
    char owner[sizeof(((vigil_lease *)0)->owner)];
    if (owner_opt) {
        if (strlen(owner_opt) >= sizeof(owner))
            return tool_usage_error(cmd, "--owner: at most 63 bytes, not %zu", strlen(owner_opt));
        snprintf(owner, sizeof(owner), "%s", owner_opt);
    } else {
        char host[256] = "localhost";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        char pid[16];
        int pl = snprintf(pid, sizeof(pid), ":%d", (int)getpid());
        snprintf(owner, sizeof(owner), "%.*s%s", (int)(sizeof(owner) - 1 - (size_t)pl), host, pid);
    }
    uint64_t timeout_ns = have_wait ? wait_ms * 1000000u : UINT64_MAX;

    note_inherited();
    struct backend b = { 0 };
    rc = backend_open(&b, store, etcd, key, ttl, cmd, &flags, trust);
    tool_etcd_flags_free(&flags); /* the handle has its own copies */
    if (rc != 0)
        return rc;
    vigil_lease lease;
    int64_t wait_start = realtime_ns();
    if (timeout_ns > 0)
        backend_report(&b, key);
    rc = backend_acquire(&b, key, owner, ttl, timeout_ns, &lease);
    if (rc == VIGIL_ETIMEDOUT || rc == VIGIL_EBUSY) {
        rc = not_acquired(&b, key, wait_ms, have_wait && wait_ms > 0, wait_start);
        backend_close(&b);
        return rc;
    }
    if (rc < 0) {
        backend_close(&b);
        return lock_fail(key, "acquire on %s: %s", b.where, backend_reason(&b, rc));
    }

    backend_report(&b, key); /* the keepalive's renewals find trouble while we hold */

    /* Held from here: every way out releases. The signals that would end
     * the tool by default are taken (before the keepalive's threads, which
     * inherit the mask) and passed on to CMD; SIGKILL is the child's
     * PR_SET_PDEATHSIG. */
    static const int taken[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGCHLD };
    sigset_t stop, old;
    sigemptyset(&stop);
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
        sigaddset(&stop, taken[i]);
    sigprocmask(SIG_BLOCK, &stop, &old);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    vigil_lease_port port = backend_port(&b);
    vigil_keepalive *ka = NULL;
    char **env = NULL;
    pid_t pid = -1;
    int ka_rc = 0, exit_rc = EXIT_RUNTIME;
    struct outcome o = { 0, false };
    if (sfd < 0) {
        lock_fail(key, "signalfd: %s", strerror(errno));
        goto release;
    }
    if ((rc = vigil_keepalive_start(&port, &lease, &ka)) < 0) {
        lock_fail(key, "keepalive: %s", vigil_strerror(rc));
        goto release;
    }
    if (!(env = lease_env(&lease))) {
        lock_fail(key, "environment for CMD: %s", strerror(ENOMEM));
        goto stop;
    }
    test_stop("fork");
    /* Stalled since the acquisition past the TTL (preempted, stopped), the
     * lease may be another's already: CMD is not started on it. */
    if (vigil_keepalive_lost(ka)) {
        lock_fail(key, "lease lost before CMD started (token %" PRIu64 "); CMD not run", lease.token);
        exit_rc = EXIT_LOST;
        goto stop;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        lock_fail(key, "fork: %s", strerror(errno));
        goto stop;
    }
    if (pid == 0)
        exec_cmd(argv + dd + 1, env, &old, parent, ka);
    if (supervise(pid, sfd, ka, kill_after, &o) != 0) {
        lock_fail(key, "waiting for CMD (pid %d): %s", (int)pid, strerror(errno));
        goto stop;
    }
    exit_rc = o.status;
stop:
    ka_rc = vigil_keepalive_stop(ka);
release:;
    /* Released even when lost: on etcd the lease may live on after a
     * local expiry, and revoking it frees KEY at once. */
    int rel = backend_release(&b, &lease);
    if (pid > 0 && (o.lost || ka_rc == VIGIL_ELOST || rel == VIGIL_ELOST)) {
        const char *why = rel == VIGIL_ELOST ? backend_why(&b) : "";
        lock_fail(key, "lease lost while CMD ran (token %" PRIu64 ")%s%s%s", lease.token,
                  o.lost ? "; CMD was sent SIGTERM" : "", *why ? ": " : "", why);
        exit_rc = EXIT_LOST;
    } else if (rel < 0 && rel != VIGIL_ELOST) {
        lock_fail(key, "release on %s: %s (the lease lapses within its TTL)", b.where, backend_reason(&b, rel));
    }
    if (sfd >= 0)
        close(sfd);
    free_env(env);
    backend_close(&b);
    return exit_rc;
}

const struct tool_cmd tool_cmd_lock = {
    .name = "lock",
    .synopsis = "(--store FILE | --etcd ENDPOINTS) [--ttl DURATION] [--wait DURATION] [--owner NAME] [--kill-after DURATION] "
                "[--trust-owner] " TOOL_ETCD_SYNOPSIS " KEY -- CMD [ARG...]",
    .summary = "run a command while holding a lease",
    .help = "Acquires the lease KEY, waiting for it up to --wait, runs CMD while the\n"
            "lease is kept alive, and releases it after CMD exits. CMD gets\n"
            "VIGIL_LEASE_KEY, VIGIL_LEASE_OWNER and VIGIL_LEASE_TOKEN (the fencing\n"
            "token: greater at every change of holder) in its environment.\n"
            "If the lease is lost while CMD runs (refused, or expired because it\n"
            "could not be renewed in time), CMD gets SIGTERM, then SIGKILL after\n"
            "--kill-after. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM\n"
            "and SIGPIPE are passed on to CMD, and the lease is released once it has\n"
            "exited; if vigil lock is killed (SIGKILL), CMD is killed with it. A\n"
            "lease lost before CMD starts is exit 79 and CMD is not run.\n"
            "\n"
            "options:\n"
            "  --store FILE      the lease store FILE on this host (made when missing)\n"
            "  --etcd ENDPOINTS  etcd, e.g. http://10.0.0.1:2379,http://10.0.0.2:2379;\n"
            "                    KEY is shared with `etcdctl lock KEY` (or --endpoints,\n"
            "                    as etcdctl; without --store, $ETCDCTL_ENDPOINTS)\n"
            "  --ttl DURATION    the lease's TTL, 3ms..24h (default 10s)\n"
            "  --wait DURATION   give up after that long (default: wait for ever; 0: do\n"
            "                    not wait)\n"
            "  --owner NAME      the holder's name, at most 63 bytes (default host:pid)\n"
            "  --kill-after DURATION  from SIGTERM to SIGKILL on a loss, 0..24h\n"
            "                    (default 5s)\n"
            "  --trust-owner     use the store FILE even if another user could have\n"
            "                    made or rewritten it (writable by everyone, or another\n"
            "                    user's outside a group of yours): refused otherwise\n"
            TOOL_ETCD_HELP
            "  -h, --help        show this help\n"
            "\n"
            "A DURATION is a number with a unit: 500ms, 10s, 1.5s, 2m, 1h (also ns, us,\n"
            "d, and sums such as 1m30s); a number alone is milliseconds, so --ttl 10\n"
            "is 10ms (and warned about: write --ttl 10s for seconds).\n"
            "\n"
            "exit status: CMD's own (128 + n if it died of signal n), 75 KEY not\n"
            "acquired within --wait, 79 the lease was lost while CMD ran, 126/127 CMD\n"
            "not executable / not found, 2 usage error, 1 other errors.\n",
    .run = run,
};
