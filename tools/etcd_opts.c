/* SPDX-License-Identifier: MIT */
/*
 * The etcd connection flags, shared by every etcd command of the tool
 * (etcd_opts.h says which and how).
 */
#define _GNU_SOURCE
#include "etcd_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#ifdef VIGIL_HAVE_ETCD
#include <vigil/etcd.h>
#endif

/* The flag, else its variable when set and not empty, else NULL. */
static const char *flag_or_env(const char *flag, const char *var)
{
    if (flag)
        return flag;
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

bool tool_etcd_flags_given(const struct tool_etcd_flags *f)
{
    return f->cacert || f->cert || f->key || f->user || f->password || f->ns || f->dial_ms || f->command_ms;
}

/* An endpoint of the list names a user (scheme://user:password@host). */
static bool has_userinfo(const char *list)
{
    for (const char *ep = list; ep && *ep; ep += strcspn(ep, ",") + (ep[strcspn(ep, ",")] == ',')) {
        size_t len = strcspn(ep, ",");
        const char *host = memmem(ep, len, "://", 3);
        host = host ? host + 3 : ep;
        size_t n = strcspn(host, "/?#,");
        if (memchr(host, '@', n))
            return true;
    }
    return false;
}

int tool_etcd_where(const struct tool_cmd *cmd, const struct tool_etcd_where *w, const char **out)
{
    /* Endpoints are printed (trouble lines, errors) and kept in the
     * health record: a password in one would be said to anyone reading
     * stderr or the logs. */
    const char *given[] = { w->etcd, w->endpoints, w->etcd || w->endpoints ? NULL : getenv("ETCDCTL_ENDPOINTS") };
    const char *from[] = { "--etcd", "--endpoints", "ETCDCTL_ENDPOINTS" };
    for (int i = 0; i < 3; i++)
        if (has_userinfo(given[i]))
            return tool_usage_error(cmd, "%s: an endpoint with a user in it (scheme://USER:PASSWORD@HOST) would be "
                                         "printed in messages: give --user USER (and --password, or ETCDCTL_USER "
                                         "and ETCDCTL_PASSWORD) instead", from[i]);
    if (w->etcd && w->endpoints && strcmp(w->etcd, w->endpoints) != 0)
        return tool_usage_error(cmd, "--etcd %s and --endpoints %s: two lists of endpoints (--endpoints is "
                                     "--etcd's other name: give one)", w->etcd, w->endpoints);
    *out = flag_or_env(w->etcd ? w->etcd : w->endpoints, "ETCDCTL_ENDPOINTS");
    return TOOL_GO;
}

/* etcdctl's global flags that vigil does not take, and what to write instead. */
static const struct {
    const char *flag, *hint;
} etcdctl_flags[] = {
    { "insecure-skip-tls-verify", "vigil always verifies the servers: give their CA bundle with --cacert" },
    { "insecure-transport", "a bare host:port is http:// unless --cacert or --cert is given: write http:// "
                            "or https:// in the endpoints" },
    { "insecure-discovery", "no DNS discovery: list the endpoints with --etcd" },
    { "discovery-srv", "no DNS discovery: list the endpoints with --etcd" },
    { "discovery-srv-name", "no DNS discovery: list the endpoints with --etcd" },
    { "write-out", "--json, where the command has it" },
    { "keepalive-time", "not needed: vigil's requests and watches are bounded by --command-timeout" },
    { "keepalive-timeout", "not needed: vigil's requests and watches are bounded by --command-timeout" },
    { "hex", "keys and names are printed escaped (\\xNN) where they are not text" },
    { "debug", "every failure is said on stderr as it happens" },
    { "auth-jwt-token", "give --user and --password (or ETCDCTL_USER and ETCDCTL_PASSWORD)" },
};

const char *tool_etcd_flag_hint(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(etcdctl_flags) / sizeof(etcdctl_flags[0]); i++)
        if (strlen(etcdctl_flags[i].flag) == len && strncmp(etcdctl_flags[i].flag, name, len) == 0)
            return etcdctl_flags[i].hint;
    return NULL;
}

void tool_etcd_flags_free(struct tool_etcd_flags *f)
{
    if (!f)
        return;
    free(f->user_name);
    f->user_name = NULL;
}

bool tool_etcd_secret_env(const char *entry)
{
    if (strncmp(entry, "ETCDCTL_PASSWORD=", 17) == 0)
        return true;
    return strncmp(entry, "ETCDCTL_USER=", 13) == 0 && strchr(entry + 13, ':') != NULL; /* NAME:PASSWORD */
}

/* *slot's string from byte `from` on is a secret: *slot moved to a copy
 * of the whole (never freed: argv and environ live as long as the
 * process), and the secret's bytes in the original starred out. 1 hidden,
 * 0 nothing to hide (or no memory for the copy: then it is left as it
 * is, the program needing its value). */
static int hide(char **slot, size_t from)
{
    char *orig = *slot, *copy = orig[from] ? strdup(orig) : NULL;
    if (!copy)
        return 0;
    *slot = copy;
    memset(orig + from, '*', strlen(orig + from));
    return 1;
}

/* The password's offset in a --user value, NAME:PASSWORD: after the
 * first ':' (as tool_etcd_options splits it), or none (0). */
static size_t user_secret(const char *v)
{
    const char *colon = strchr(v, ':');
    return colon ? (size_t)(colon + 1 - v) : 0;
}

int tool_etcd_hide_secrets(int argc, char **argv)
{
    extern char **environ;
    int n = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        /* A flag's value is the next argument, short of the "--". */
        char **value = i + 1 < argc && strcmp(argv[i + 1], "--") != 0 ? &argv[i + 1] : NULL;
        if (value && strcmp(argv[i], "--password") == 0)
            n += hide(value, 0), i++;
        else if (value && strcmp(argv[i], "--user") == 0)
            n += user_secret(*value) ? hide(value, user_secret(*value)) : 0, i++;
        else if (strncmp(argv[i], "--password=", 11) == 0)
            n += hide(&argv[i], 11);
        else if (strncmp(argv[i], "--user=", 7) == 0 && user_secret(argv[i] + 7))
            n += hide(&argv[i], 7 + user_secret(argv[i] + 7));
    }
    for (size_t i = 0; environ && environ[i]; i++) {
        if (strncmp(environ[i], "ETCDCTL_PASSWORD=", 17) == 0)
            n += hide(&environ[i], 17);
        else if (strncmp(environ[i], "ETCDCTL_USER=", 13) == 0 && user_secret(environ[i] + 13))
            n += hide(&environ[i], 13 + user_secret(environ[i] + 13));
    }
    /* The copies, and whatever the handle and libcurl make of them, are
     * in our memory: closed to the same user's other processes. */
    if (n > 0)
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return n;
}

#ifdef VIGIL_HAVE_ETCD

int tool_etcd_options(const struct tool_cmd *cmd, struct tool_etcd_flags *f, struct vigil_etcd_options *o)
{
    memset(o, 0, sizeof(*o));
    o->cacert = flag_or_env(f->cacert, "ETCDCTL_CACERT");
    o->cert = flag_or_env(f->cert, "ETCDCTL_CERT");
    o->key = flag_or_env(f->key, "ETCDCTL_KEY");
    const char *user = flag_or_env(f->user, "ETCDCTL_USER");
    const char *password = flag_or_env(f->password, "ETCDCTL_PASSWORD");
    if (o->key && !o->cert)
        return tool_usage_error(cmd, "--key without --cert (or ETCDCTL_CERT)");
    if (password && !user)
        return tool_usage_error(cmd, "--password without --user (or ETCDCTL_USER)");
    /* NAME:PASSWORD is split once, at the first ':': the name alone goes
     * on, into the handle and every message; the password given there is
     * the one (over ETCDCTL_PASSWORD), and --password beside it is a
     * usage error that names neither. */
    const char *colon = user ? strchr(user, ':') : NULL;
    if (colon) {
        if (f->password)
            return tool_usage_error(cmd, "a password both in --user NAME:PASSWORD (or ETCDCTL_USER) and in "
                                         "--password: give it once");
        free(f->user_name);
        if (!(f->user_name = strndup(user, (size_t)(colon - user)))) {
            fprintf(stderr, "vigil %s: %s\n", cmd->name, strerror(ENOMEM));
            return EXIT_RUNTIME;
        }
        user = f->user_name;
        password = colon + 1;
    } else if (user && !password) {
        return tool_usage_error(cmd, "--user %s: no password (--user NAME:PASSWORD, --password, or "
                                     "ETCDCTL_PASSWORD)", user);
    }
    if (user && !*user)
        return tool_usage_error(cmd, "--user: an empty name");
    o->user = user;
    o->password = password;
    o->namespace = f->ns;
    /* The timeouts, etcdctl's variables written as Go writes a duration
     * ("2s", "500ms": our durations). */
    uint64_t *ms[2] = { &f->dial_ms, &f->command_ms };
    static const char *const var[2] = { "ETCDCTL_DIAL_TIMEOUT", "ETCDCTL_COMMAND_TIMEOUT" };
    for (int i = 0; i < 2; i++) {
        const char *v = *ms[i] ? NULL : flag_or_env(NULL, var[i]);
        const char *why = NULL;
        if (v && (tool_parse_ms(v, ms[i], &why) < 0 || *ms[i] == 0 || *ms[i] > TOOL_ETCD_TIMEOUT_MAX_MS))
            return tool_usage_error(cmd, "%s=%s: not a duration from 1ms to 1h (%s)", var[i], v,
                                    why ? why : "out of range");
    }
    o->dial_timeout_ms = (uint32_t)f->dial_ms;
    o->request_timeout_ms = (uint32_t)f->command_ms;
    return TOOL_GO;
}

const char *tool_etcd_reason(vigil_etcd *e, int err)
{
    static char buf[512];
    (void)e;
    const char *why = vigil_etcd_errmsg();
    if (err == -EACCES && !*why)
        why = "etcd refused: authentication failed or permission denied (see --user and --password)";
    if (!*why)
        return vigil_strerror(err);
    /* The library's reason names the cause (the TLS step, authentication,
     * the file); the code's text is added where it says more. */
    if (err == -EACCES || err == VIGIL_ETLS || strstr(why, vigil_strerror(err)))
        snprintf(buf, sizeof(buf), "%s", why);
    else
        snprintf(buf, sizeof(buf), "%s (%s)", vigil_strerror(err), why);
    return buf;
}

int tool_etcd_connect(const char *what, const char *endpoints, const struct vigil_etcd_options *o,
                      vigil_etcd **out)
{
    int rc = vigil_etcd_connect_opts(endpoints, o, out);
    if (rc < 0) {
        fprintf(stderr, "vigil: %s: etcd '%s': %s\n", tool_e(what), tool_e(endpoints), tool_e(tool_etcd_reason(NULL, rc)));
        return EXIT_RUNTIME;
    }
    return 0;
}

#else
#include "etcd_exec.h"

/* A command that asks needs etcd: in a `vigil` beside a helper, the
 * command line goes on there, whole, before the command did anything
 * (export has read no file yet); in a build without one, the command
 * says so where it connects. */
int tool_etcd_options(const struct tool_cmd *cmd, struct tool_etcd_flags *f, struct vigil_etcd_options *o)
{
    (void)f, (void)o;
    (void)flag_or_env;
#ifdef VIGIL_ETCD_HELPER
    return tool_etcd_elsewhere(cmd, 0, NULL);
#else
    (void)cmd;
    return TOOL_GO;
#endif
}

#endif
