/* SPDX-License-Identifier: MIT */
/*
 * Argument parsing for the subcommands: long options only (plus -h), strict
 * numbers, durations with units (duration.c), and one clear line for
 * every usage error. Not getopt_long: it
 * accepts abbreviations and prints its own messages, and a usage error here
 * must say exactly what was wrong and exit 2.
 */
#include "etcd_opts.h"
#include "vigil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int tool_parse_u64(const char *s, uint64_t *out)
{
    /* strtoull alone accepts leading space, a sign (and negates "-1" into
     * 2^64 - 1) and trailing junk: only plain digits get this far. */
    if (!s || *s < '0' || *s > '9')
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

void tool_print_help(const struct tool_cmd *cmd, FILE *out)
{
    fprintf(out, "usage: vigil %s %s\n\n%s", cmd->name, cmd->synopsis, cmd->help);
}

int tool_usage_error(const struct tool_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vigil %s: ", cmd->name);
    va_start(ap, fmt);
    tool_vmsg(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: vigil %s %s (see 'vigil %s --help')\n", cmd->name, cmd->synopsis,
            cmd->name);
    return EXIT_USAGE;
}

static const struct tool_opt *find_opt(const struct tool_opt *opts, size_t nopts, const char *name,
                                       size_t len)
{
    for (size_t i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

/* Edits (insertions, deletions, substitutions, swaps of two neighbours)
 * from a[0..n) to b: how far a mistyped option is from a real one. */
static size_t distance(const char *a, size_t n, const char *b)
{
    size_t m = strlen(b);
    if (n > 64 || m > 64)
        return SIZE_MAX;
    size_t d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* An unknown option, with a hint: what to write instead of one of
 * etcdctl's that an etcd command does not take, or the option of ours it
 * is closest to (a slip of a letter or two). */
static int unknown_option(const struct tool_cmd *cmd, const struct tool_opt *opts, size_t nopts, const char *dashes,
                          const char *name, size_t len)
{
    const char *etcdctl = find_opt(opts, nopts, "etcd", 4) ? tool_etcd_flag_hint(name, len) : NULL;
    if (!etcdctl && len == 1 && *name == 'w' && find_opt(opts, nopts, "json", 4))
        etcdctl = tool_etcd_flag_hint("write-out", 9); /* etcdctl's -w */
    if (etcdctl)
        return tool_usage_error(cmd, "unknown option '%s%.*s': an etcdctl option vigil does not take; %s", dashes,
                                (int)len, name, etcdctl);
    const struct tool_opt *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < nopts; i++) {
        size_t d = distance(name, len, opts[i].name);
        if (d < best_d) {
            best_d = d;
            best = &opts[i];
        }
    }
    if (best && best_d <= (len < 6 ? 1u : 2u))
        return tool_usage_error(cmd, "unknown option '%s%.*s' (did you mean '--%s'?)", dashes, (int)len, name,
                                best->name);
    return tool_usage_error(cmd, "unknown option '%s%.*s'", dashes, (int)len, name);
}

static int set_count(const struct tool_cmd *cmd, const struct tool_opt *o, const char *arg)
{
    uint64_t v, ns;
    if (tool_parse_u64(arg, &v) < 0) {
        /* "--grace 5s": a count (of epochs, slots, ticks) is not a time. */
        if (tool_parse_duration(arg, 1, &ns, NULL) == 0)
            return tool_usage_error(cmd, "--%s is a count, not a duration: '%s' (write a plain number)", o->name,
                                    arg);
        return tool_usage_error(cmd, "--%s: not a non-negative decimal number: '%s'", o->name, arg);
    }
    if (v < o->min || v > o->max)
        return tool_usage_error(cmd, "--%s: %s out of range (%llu..%llu)", o->name, arg,
                                (unsigned long long)o->min, (unsigned long long)o->max);
    *o->value = v;
    return TOOL_GO;
}

/* A duration: every message names the units, and what a bare number is. */
static int set_duration(const struct tool_cmd *cmd, const struct tool_opt *o, const char *arg)
{
    uint64_t ms;
    const char *why;
    char lo[32], hi[32];
    tool_format_ms(o->min, lo, sizeof(lo));
    tool_format_ms(o->max, hi, sizeof(hi));
    if (tool_parse_ms(arg, &ms, &why) < 0)
        return tool_usage_error(cmd, "--%s: '%s' is not a duration (%s): write 500ms, 10s, 1.5s, 2m or 1h "
                                     "(units ns, us, ms, s, m, h, d); a number alone is milliseconds",
                                o->name, arg, why);
    if (ms < o->min || ms > o->max) {
        char got[32];
        tool_format_ms(ms, got, sizeof(got));
        bool same = strcmp(got, arg) == 0;
        return tool_usage_error(cmd, "--%s: %s%s%s%s is out of range, %s..%s%s", o->name, arg, same ? "" : " (",
                                same ? "" : got, same ? "" : ")", lo, hi,
                                tool_duration_bare(arg) ? "; a number alone is milliseconds" : "");
    }
    *o->value = ms;
    if (o->str)
        *o->str = arg;
    return TOOL_GO;
}

int tool_parse(const struct tool_cmd *cmd, int argc, char **argv, const struct tool_opt *opts,
               size_t nopts, const char **pos, size_t npos_min, size_t npos_max, size_t *npos)
{
    /* --help wins wherever it stands (before a "--"), whatever else is wrong. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            tool_print_help(cmd, stdout);
            return tool_flush();
        }
    }
    size_t n = 0;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            /* a positional argument ("-" alone is one too) */
            if (n == npos_max)
                return tool_usage_error(cmd, "unexpected argument '%s'", a);
            pos[n++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        if (a[1] != '-')
            return unknown_option(cmd, opts, nopts, "-", a + 1, strlen(a + 1));
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct tool_opt *o = find_opt(opts, nopts, name, len);
        if (!o)
            return unknown_option(cmd, opts, nopts, "--", name, len);
        if (o->seen)
            *o->seen = true;
        if (o->type == OPT_FLAG) {
            if (eq)
                return tool_usage_error(cmd, "--%s takes no value", o->name);
            continue;
        }
        const char *arg = eq ? eq + 1 : NULL;
        if (!arg) {
            if (i + 1 >= argc)
                return tool_usage_error(cmd, "--%s needs a value", o->name);
            arg = argv[++i];
        }
        if (o->type == OPT_STR) {
            if (!*arg)
                return tool_usage_error(cmd, "--%s: empty value", o->name);
            *o->str = arg;
            continue;
        }
        int rc = o->type == OPT_MS ? set_duration(cmd, o, arg) : set_count(cmd, o, arg);
        if (rc != TOOL_GO)
            return rc;
    }
    if (n < npos_min)
        return tool_usage_error(cmd, "missing FILE");
    *npos = n;
    return TOOL_GO;
}
