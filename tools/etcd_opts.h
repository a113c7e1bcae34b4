/* SPDX-License-Identifier: MIT */
/*
 * The etcd connection flags every etcd command of the tool takes (lock,
 * and group and agent), as etcdctl spells them, with etcdctl's own
 * environment variables when a flag is absent:
 *
 *   --cacert FILE            ETCDCTL_CACERT    verify the servers with this CA bundle
 *   --cert FILE              ETCDCTL_CERT      client certificate ...
 *   --key FILE               ETCDCTL_KEY       ... and its key
 *   --user NAME[:PASSWORD]   ETCDCTL_USER      etcd authentication
 *   --password PASSWORD      ETCDCTL_PASSWORD  (then --user is the name alone)
 *   --namespace PREFIX                         prepended to every key
 *
 * A command puts TOOL_ETCD_OPTS(&flags) in its option table, then, once
 * tool_parse has said go, calls tool_etcd_options to fill a
 * struct vigil_etcd_options (and tool_etcd_connect to connect with it).
 */
#ifndef VIGIL_TOOL_ETCD_OPTS_H
#define VIGIL_TOOL_ETCD_OPTS_H

#include "vigil.h"

#include <vigil/etcd.h> /* the options' struct, which `vigil` without the adapter parses too */

/* The flags as given (NULL: absent); tool_etcd_options fills the rest. */
struct tool_etcd_flags {
    const char *cacert, *cert, *key, *user, *password, *ns;
    char       *user_name; /* NAME of --user NAME:PASSWORD (owned) */
    uint64_t    dial_ms, command_ms; /* --dial-timeout, --command-timeout; 0: absent */
};

#define TOOL_ETCD_TIMEOUT_MAX_MS UINT64_C(3600000) /* an hour: more is no timeout */

#define TOOL_ETCD_OPTS(f)                                         \
    { "cacert", OPT_STR, 0, 0, NULL, NULL, &(f)->cacert },        \
    { "cert", OPT_STR, 0, 0, NULL, NULL, &(f)->cert },            \
    { "key", OPT_STR, 0, 0, NULL, NULL, &(f)->key },              \
    { "user", OPT_STR, 0, 0, NULL, NULL, &(f)->user },            \
    { "password", OPT_STR, 0, 0, NULL, NULL, &(f)->password },    \
    { "namespace", OPT_STR, 0, 0, NULL, NULL, &(f)->ns },         \
    { "dial-timeout", OPT_MS, 1, TOOL_ETCD_TIMEOUT_MAX_MS, &(f)->dial_ms, NULL, NULL }, \
    { "command-timeout", OPT_MS, 1, TOOL_ETCD_TIMEOUT_MAX_MS, &(f)->command_ms, NULL, NULL }

#define TOOL_ETCD_SYNOPSIS                                                            \
    "[--cacert FILE] [--cert FILE] [--key FILE] [--user NAME[:PASSWORD]] [--password PW] " \
    "[--namespace PREFIX] [--dial-timeout DURATION] [--command-timeout DURATION]"

/* Where etcd is, as etcdctl takes it: --etcd or its synonym --endpoints
 * (the same value, or a usage error), else ETCDCTL_ENDPOINTS. A command
 * puts TOOL_ETCD_WHERE_OPTS(&where) in its option table, then asks
 * tool_etcd_where once tool_parse has said go. */
struct tool_etcd_where {
    const char *etcd, *endpoints;
};
#define TOOL_ETCD_WHERE_OPTS(w)                                   \
    { "etcd", OPT_STR, 0, 0, NULL, NULL, &(w)->etcd },            \
    { "endpoints", OPT_STR, 0, 0, NULL, NULL, &(w)->endpoints }
/* TOOL_GO and *out (NULL: given nowhere), or EXIT_USAGE after saying
 * that --etcd and --endpoints disagree. */
int tool_etcd_where(const struct tool_cmd *cmd, const struct tool_etcd_where *w, const char **out);
/* What a command without --etcd says. */
#define TOOL_ETCD_MISSING "missing --etcd ENDPOINTS (or --endpoints, or ETCDCTL_ENDPOINTS in the environment)"
/* The line of help for --etcd, the same in every command. */
#define TOOL_ETCD_WHERE_HELP                                                               \
    "  --etcd ENDPOINTS  etcd, e.g. http://10.0.0.1:2379,http://10.0.0.2:2379 (or\n"      \
    "                    --endpoints, as etcdctl; default $ETCDCTL_ENDPOINTS)\n"

/* For an option a command does not take: what to write instead when it is
 * one of etcdctl's (--insecure-skip-tls-verify, --write-out, ...), in a
 * few words; NULL when it is not. */
const char *tool_etcd_flag_hint(const char *name, size_t len);

#define TOOL_ETCD_HELP                                                                 \
    "  --cacert FILE     verify the etcd servers with this CA bundle (ETCDCTL_CACERT)\n" \
    "  --cert FILE       client certificate for etcd (ETCDCTL_CERT)\n"                  \
    "  --key FILE        its private key (ETCDCTL_KEY)\n"                                \
    "  --user NAME[:PW]  authenticate to etcd as NAME (ETCDCTL_USER)\n"                  \
    "  --password PW     NAME's password, --user then being the name alone\n"           \
    "                    (ETCDCTL_PASSWORD; the environment keeps it out of ps)\n"       \
    "  --namespace PFX   prepend PFX to every key, as etcd's grpc-proxy --namespace\n" \
    "  --dial-timeout DURATION     connecting to an endpoint (ETCDCTL_DIAL_TIMEOUT;\n"  \
    "                    default 1s)\n"                                                   \
    "  --command-timeout DURATION  a request on an endpoint, in all\n"                  \
    "                    (ETCDCTL_COMMAND_TIMEOUT; default 3s)\n"

/*
 * The flags, each absent one taken from its ETCDCTL_* variable (an empty
 * variable is absent), checked and written to *o (which is zeroed first;
 * its strings point into f, argv and the environment, valid until
 * tool_etcd_flags_free). --user NAME:PASSWORD is split at the first ':'
 * unless a password is given apart, as etcdctl does. Returns TOOL_GO, or
 * EXIT_USAGE after saying what was wrong (a password without a user, a
 * user without a password, a key without a certificate). In a `vigil`
 * without the adapter, the command line goes on in the helper
 * (tool_etcd_elsewhere): then only a failure to run it returns.
 */
int tool_etcd_options(const struct tool_cmd *cmd, struct tool_etcd_flags *f, struct vigil_etcd_options *o);

void tool_etcd_flags_free(struct tool_etcd_flags *f);

/* Was any of the flags given (on the command line: not the environment)? */
bool tool_etcd_flags_given(const struct tool_etcd_flags *f);

/*
 * Hides the etcd passwords of the command line and the environment from
 * everyone else, the moment the program starts (main calls it first):
 * --password PW, --password=PW, --user NAME:PW and --user=NAME:PW before
 * a "--" (what follows is CMD's), ETCDCTL_PASSWORD and ETCDCTL_USER as
 * NAME:PASSWORD. Each such string is copied, the pointer in argv or
 * environ moved to the copy (the program reads what it was given), and
 * the password's bytes in the original overwritten with '*' in place:
 * /proc/PID/cmdline (readable by every user) and /proc/PID/environ show
 * the stars, of the same length. Then, when there was one, the process
 * is made non-dumpable (PR_SET_DUMPABLE 0): its memory, environ and a
 * core are closed to other processes of the same user, CMD among them
 * (CMD's own exec makes it dumpable again). What remains visible: the
 * password's length, and its bytes during the moments from the exec to
 * this call (vigil(1) says so). Returns how many it hid.
 */
int tool_etcd_hide_secrets(int argc, char **argv);

/* Does an environment entry ("NAME=value") carry an etcd password
 * (ETCDCTL_PASSWORD, or ETCDCTL_USER as NAME:PASSWORD)? A CMD run under
 * vigil lock or vigil group join gets none of them. */
bool tool_etcd_secret_env(const char *entry);

#ifdef VIGIL_HAVE_ETCD
/*
 * Connects to ENDPOINTS with o. 0, or EXIT_RUNTIME after one line on
 * stderr, "vigil: WHAT: etcd ENDPOINTS: reason", the reason naming the
 * cause (authentication, certificate verification, a file that cannot be
 * read) where it is known.
 */
int tool_etcd_connect(const char *what, const char *endpoints, const struct vigil_etcd_options *o,
                      vigil_etcd **out);

/* One line's worth of why an etcd call failed with err: the cause in
 * words a user acts on (vigil_etcd_strerror when the handle knows more,
 * else vigil_strerror). */
const char *tool_etcd_reason(vigil_etcd *e, int err);
#endif

#endif
