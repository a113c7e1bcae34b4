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
 * CMD never runs without the lease (issues 18 and 32):
 *  - CMD runs under a guardian (guard.h, child.h), in a process group of
 *    its own: the tool killed by any signal, SIGKILL included, closes the
 *    guardian's command pipe and the group gets SIGKILL at once, whatever
 *    CMD's credentials (a set-user-ID CMD clears PR_SET_PDEATHSIG, which
 *    was all that held before issue 32). What CMD leaves of its group
 *    when it exits gets SIGTERM, then SIGKILL after --kill-after, and the
 *    lease is released only once the group is gone;
 *  - every signal that would end the tool by default and can be caught
 *    (INT, TERM, HUP, QUIT, USR1, USR2, ALRM, PIPE) is taken by the
 *    signalfd and passed on to CMD, so the tool outlives CMD and
 *    releases after it;
 *  - the keepalive is asked before the fork and again in CMD's child just
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
#include "child.h"
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
 * "exec" in CMD's child before its look. Each raises SIGSTOP, so the
 * test decides how long the stall lasts. */
static bool test_stop_at(const char *where)
{
    const char *at = getenv("VIGIL_TEST_LOCK_STOP");
    return at && strcmp(at, where) == 0;
}

/* CMD's child's last look before the exec (async-signal-safe: atomics, a
 * clock read, a write): a lease lost by now (the tool stalled since its
 * own look) is not exec'd on. */
static bool still_held(void *ka)
{
    return !vigil_keepalive_lost(ka);
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
    } else if (b->ls) {
        /* Not held, yet not acquired: the store had no entry to bind it
         * to, every one held by another key (acquire_wait waits for room
         * as for the key). */
        uint32_t cap = vigil_leases_capacity(b->ls), held = 0;
        for (uint32_t i = 0; i < cap; i++)
            held += vigil_leases_entry(b->ls, i, &info) == 0 && info.state == VIGIL_LEASE_HELD;
        if (held == cap)
            snprintf(holder, sizeof(holder), ": the store %s is full (its %u entries held by other keys)", b->where,
                     cap);
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

    tool_child_note_fds();
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
     * inherit the mask) and passed on to CMD; SIGKILL of the tool
     * is its guardian's to answer. */
    struct tool_child c = { .sfd = -1, .tty = -1 };
    vigil_lease_port port = backend_port(&b);
    vigil_keepalive *ka = NULL;
    char **env = NULL;
    bool started = false, lost = false;
    int ka_rc = 0, exit_rc = EXIT_RUNTIME, status = 0;
    if ((rc = tool_child_block(&c)) < 0) {
        lock_fail(key, "signalfd: %s", strerror(-rc));
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
    if (test_stop_at("fork"))
        raise(SIGSTOP);
    /* Stalled since the acquisition past the TTL (preempted, stopped), the
     * lease may be another's already: CMD is not started on it. */
    if (vigil_keepalive_lost(ka)) {
        lock_fail(key, "lease lost before CMD started (token %" PRIu64 "); CMD not run", lease.token);
        exit_rc = EXIT_LOST;
        goto stop;
    }
    /* The tool dead, CMD dies at once: the lease lapses unrenewed, and a
     * CMD that outlived the tool would run beside the next holder's. */
    c.orphan_signal = SIGKILL;
    c.orphan_kill_ms = kill_after;
    c.may_exec = still_held;
    c.may_exec_arg = ka;
    /* Watched by the guardian too: a tool stopped (SIGSTOP, a debugger)
     * renews nothing, and its CMD must not run on past the lapse. */
    c.held = still_held;
    c.held_arg = ka;
    /* A group we may not end (a member made every uid another's, as sudo
     * does) is waited out with the lease kept: never released under it. */
    c.still_who = key;
    c.still_hold = "the lease";
    c.refuse_status = EXIT_LOST;
    c.stop_before_exec = test_stop_at("exec");
    if ((rc = tool_child_start(&c, argv + dd + 1, env)) < 0) {
        lock_fail(key, "starting CMD: %s", strerror(-rc));
        goto stop;
    }
    started = true;
    if ((rc = tool_child_wait(&c, vigil_keepalive_fd(ka), kill_after, &status, &lost)) < 0) {
        if (rc == -ECHILD)
            lock_fail(key, "CMD (pid %d): its guardian died; its process group was sent SIGKILL", (int)c.pid);
        else
            lock_fail(key, "waiting for CMD (pid %d): %s", (int)c.pid, strerror(-rc));
        goto stop;
    }
    exit_rc = status;
    if (c.g.r.flags & GUARD_STILL) {
        lock_fail(key, "CMD's process group %d outlived its leader beyond vigil lock's signals (%s); the lease was "
                       "kept until the group was gone",
                  (int)c.pid, strerror(c.g.r.err));
        exit_rc = status != 0 ? status : EXIT_RUNTIME;
    }
stop:
    ka_rc = vigil_keepalive_stop(ka);
release:;
    /* Released even when lost: on etcd the lease may live on after a
     * local expiry, and revoking it frees KEY at once. */
    int rel = backend_release(&b, &lease);
    if (started && (lost || ka_rc == VIGIL_ELOST || rel == VIGIL_ELOST)) {
        const char *why = rel == VIGIL_ELOST ? backend_why(&b) : "";
        lock_fail(key, "lease lost while CMD ran (token %" PRIu64 ")%s%s%s", lease.token,
                  lost ? "; CMD's process group was sent SIGTERM" : "", *why ? ": " : "", why);
        exit_rc = EXIT_LOST;
    } else if (rel < 0 && rel != VIGIL_ELOST) {
        lock_fail(key, "release on %s: %s (the lease lapses within its TTL)", b.where, backend_reason(&b, rel));
    }
    tool_child_end(&c);
    free_env(env);
    backend_close(&b);
    return tool_child_exit(&c, exit_rc);
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
            "and SIGPIPE are passed on to CMD, and the lease is released once it and\n"
            "its process group are gone. CMD runs in a process group of its own under\n"
            "a guardian: if vigil lock is killed (SIGKILL included), CMD's group is\n"
            "killed with it, set-user-ID or not. A lease lost before CMD starts is\n"
            "exit 79 and CMD is not run. A full store is waited for as a held key.\n"
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
