/* SPDX-License-Identifier: MIT */
/*
 * The vigil command: what the subcommands share.
 *
 * Exit status: 0 success, 1 runtime error (one line "vigil: FILE: reason"
 * on stderr), 2 usage error. Every subcommand answers --help on stdout.
 */
#ifndef VIGIL_TOOL_H
#define VIGIL_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <vigil/vigil.h>

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_NOT_LIVE = 3 };

/* Returned by tool_parse when the command should go on. */
#define TOOL_GO (-1)

/* The heartbeat layout's own limit (2^20 slots, a 64 MiB file). */
#define TOOL_MAX_CAPACITY (UINT32_C(1) << 20)

/* What the liveness rule's signed age can express. */
#define TOOL_MAX_GRACE ((uint64_t)INT64_MAX)

/* A day, in milliseconds: the longest --interval. */
#define TOOL_MAX_INTERVAL_MS UINT64_C(86400000)

#define TOOL_DEFAULT_GRACE 5u

struct tool_cmd {
    const char *name;
    const char *synopsis; /* the arguments after the command's name */
    const char *summary;  /* one line for `vigil --help` */
    const char *help;     /* the rest of `vigil NAME --help` */
    int (*run)(const struct tool_cmd *cmd, int argc, char **argv);
};

extern const struct tool_cmd tool_cmd_create, tool_cmd_inspect, tool_cmd_watch,
    tool_cmd_tick, tool_cmd_failover, tool_cmd_demo, tool_cmd_lock, tool_cmd_ls, tool_cmd_export,
    tool_cmd_group, tool_cmd_agent;

/* ---- arguments (opts.c) --------------------------------------------------- */

/* OPT_MS: a duration (duration.c), stored in milliseconds; a bare number
 * is milliseconds. */
enum tool_opt_type { OPT_FLAG, OPT_U64, OPT_STR, OPT_MS };

struct tool_opt {
    const char        *name;  /* without the leading "--" */
    enum tool_opt_type type;
    uint64_t           min, max; /* OPT_U64, OPT_MS: inclusive range (OPT_MS in ms) */
    uint64_t          *value;    /* OPT_U64, OPT_MS: written when given */
    bool              *seen;     /* optional: set when given */
    const char       **str;      /* OPT_STR: the argument, when given; OPT_MS: optional, the text as given */
};

/*
 * Parses argv[1..] of a subcommand: long options (--name VALUE or
 * --name=VALUE), -h/--help, "--" ending options, and between npos_min and
 * npos_max positional arguments stored in pos[]. Numbers are strict
 * decimal (no sign, no space, no suffix) within the option's range.
 * Returns TOOL_GO to go on, EXIT_OK after printing help, EXIT_USAGE after
 * printing what was wrong.
 */
int tool_parse(const struct tool_cmd *cmd, int argc, char **argv, const struct tool_opt *opts,
               size_t nopts, const char **pos, size_t npos_min, size_t npos_max, size_t *npos);

/* ---- durations (duration.c) ------------------------------------------------ */

/* A duration: one or more NUMBER[.FRACTION]UNIT terms with no space
 * ("500ms", "1.5s", "1h30m"; units ns, us or µs, ms, s or sec, m or min,
 * h, d), or a bare whole number in units of bare_unit_ns. Writes *ns; 0,
 * or -1 with *why (when not NULL) saying what was wrong. */
int tool_parse_duration(const char *s, uint64_t bare_unit_ns, uint64_t *ns, const char **why);

/* The same in whole milliseconds, a bare number being milliseconds: a
 * duration finer than that (1500us) is an error, never rounded. */
int tool_parse_ms(const char *s, uint64_t *ms, const char **why);

/* True when s is a bare number (digits alone, no unit). */
bool tool_duration_bare(const char *s);

/* ms as the tool prints a duration: "250ms", "1.5s", "10s", "2m", "24h". */
void tool_format_ms(uint64_t ms, char *buf, size_t len);
/* ms as a person reads it in a status: "118s", "2.5s", "12m", "24h", rounded. */
void tool_format_ms_about(uint64_t ms, char *buf, size_t len);

/* Strict decimal: digits only, no overflow. 0 ok, -1 otherwise. */
int tool_parse_u64(const char *s, uint64_t *out);

/* "vigil NAME: <message>" and the usage line on stderr; returns EXIT_USAGE. */
int tool_usage_error(const struct tool_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void tool_print_help(const struct tool_cmd *cmd, FILE *out);

/* ---- errors and files (util.c) -------------------------------------------- */

/* "vigil: FILE: vigil_strerror(err)" on stderr; returns EXIT_RUNTIME. */
int tool_fail(const char *path, int err);

/* Like tool_fail, with a parenthesised detail after the reason. */
int tool_fail_detail(const char *path, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The message fmt makes, escaped as tool_esc does (vigil_strerror's text
 * and a program's own words pass unchanged). Every error message goes
 * through it: tool_fail*, tool_usage_error. */
void tool_vmsg(FILE *out, const char *fmt, va_list ap);

/* "vigil: FILE: <message>" on stderr, the message alone (it says more
 * than vigil_strerror would); returns EXIT_RUNTIME. */
int tool_fail_msg(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Explains why `path` could not be opened as `want` (a VIGIL_KIND_*, or 0
 * for any kind) for reading, or reading and writing (`writing`), after an
 * open gave `err`, in one line with the useful part first: a symlink, a
 * missing permission (which, and whose), not a regular file, too short,
 * no magic, another version, another kind, a size that disagrees with the
 * header (what was expected and what was found). Returns EXIT_RUNTIME. */
int tool_fail_file(const char *path, int err, uint32_t want, bool writing);

/* "heartbeat", "barrier", "leases", "journal", or NULL for a kind vigil does not know. */
const char *tool_kind_name(uint32_t kind);
/* The pid namespace a lock word names, for a line: "pid:[4026531836],
 * ours", "pid:[4026532201], not ours: its holder's death cannot be seen
 * from here", or "unknown". */
void tool_lock_ns(uint64_t word, char *buf, size_t len);

/* Opens a heartbeat table for writing, explaining any failure (a file
 * another user could have made is refused unless trust_owner); warns
 * first when its directory lets others swap it (tool_warn_dir). Returns
 * 0 or EXIT_RUNTIME. */
int tool_open_hb(const char *path, bool trust_owner, vigil_hb **out);

/* ---- other users, the file system (trust.c) --------------------------------- */

/* "vigil: FILE: owned by NAME (uid U), group G (gid G), mode 0666: <why>;
 * not opened for writing (--trust-owner ...)"; EXIT_RUNTIME. */
int tool_fail_untrusted(const char *path);

/* No room (-ENOSPC, -EDQUOT) for size bytes of path: names the file system
 * (type, mount point, bytes free). made: a create that left nothing;
 * otherwise an older vigil's file whose holes could not be allocated.
 * Returns EXIT_RUNTIME. */
int tool_fail_space(const char *path, int err, uint64_t size, bool made);

/* A warning on stderr when path's directory is writable by its group or
 * by everyone without the sticky bit: another user there could rename
 * the file and put their own in its place. */
void tool_warn_dir(const char *path);

/* A user's or group's name, or its number when it has none. */
const char *tool_user_name(uid_t uid, char *buf, size_t len);
const char *tool_group_name(gid_t gid, char *buf, size_t len);

/* Flushes stdout; on a write error says so and returns EXIT_RUNTIME. */
int tool_flush(void);

/* ---- long-running commands (util.c) ----------------------------------------- */

/* Blocks SIGINT and SIGTERM so that they wait for tool_sleep_ms. */
void tool_catch_stop_signals(void);

/* Sleeps ms milliseconds; returns true at once if SIGINT or SIGTERM came
 * (now or while the caller was busy), false when the time ran out. */
bool tool_sleep_ms(uint64_t ms);

/* Monotonic milliseconds. */
uint64_t tool_now_ms(void);
/* A slot for looking at: vigil_hb_snapshot's answer, or, for a slot held
 * by a writer past a short look, VIGIL_EBUSY with *busy set and its words
 * read one by one. Never waits long: a table of wedged slots reads fast. */
int tool_slot_look(const vigil_hb *hb, uint32_t i, vigil_slot_info *info, bool *busy);

/* ---- failover --exec (reclaim_exec.c) -------------------------------------- */

/* The CMDs of failover --exec: every reclaim written in the table's
 * journal (JOURNAL, or FILE.journal, made when missing) before its slot is
 * vacated, and its CMD run from there, one at a time across the table's
 * watchdogs, each under a guardian (guard.h). tool_hooks_new attaches the
 * journal to hb (every claim through hb is journaled from then on): 0, or
 * EXIT_RUNTIME after saying why. */
struct tool_hooks;
int      tool_hooks_new(const char *cmd, const char *file, const char *journal, uint64_t timeout_ms, vigil_hb *hb,
                        bool trust_owner, struct tool_hooks **out);
void     tool_hooks_free(struct tool_hooks *h);                  /* NULL is fine; detaches the journal */
/* Reaps a finished CMD and says what became of it, takes over what dead
 * watchdogs and guardians left, starts the next: call it often. */
void     tool_hooks_poll(struct tool_hooks *h);
bool     tool_hooks_busy(const struct tool_hooks *h);
/* Runs what is ours to its end; a stop signal meanwhile kills the running
 * CMD and leaves the rest in the journal for the next watchdog. */
void     tool_hooks_drain(struct tool_hooks *h);
unsigned tool_hooks_failed(const struct tool_hooks *h);  /* CMDs that failed, timed out or never ran */
/* Without --exec, given --journal PATH: that journal attached (opened,
 * never made), so that this watchdog's reclaims are written down for the
 * --exec watchdogs to hand on, and not handed over by this one. Without
 * --journal nothing is attached (FILE.journal is the --exec watchdogs'
 * alone: a plain watchdog neither fills it nor depends on it). 0 with
 * *out (NULL without `journal`), or EXIT_RUNTIME after saying why. */
struct vigil_journal;
int      tool_journal_attach(const char *file, const char *journal, vigil_hb *hb, bool trust_owner,
                             struct vigil_journal **out);
/* After a scan through hb: whether its journal had no free entry, so that
 * a slot due for reclaim was left as it was. Said on stderr when it
 * starts, every minute while it lasts, and when it ends. */
bool     tool_journal_starved(const char *file, vigil_hb *hb);
void     tool_journal_detach(vigil_hb *hb, struct vigil_journal *j);

/* ---- systemd (notify.c) ---------------------------------------------------- */

/* sd_notify(0, state): > 0 sent, 0 no $NOTIFY_SOCKET, < 0 an error. */
int tool_sd_notify(const char *state);

/* ---- rendering (cmd_inspect.c) -------------------------------------------- */

/* What a view of a file found, for inspect --check and watch. */
struct tool_summary {
    uint32_t kind;     /* VIGIL_KIND_* */
    uint32_t occupied; /* heartbeat: slots with an owner */
    uint32_t live;
    uint32_t busy;     /* mid-change or wedged */
};

/* Prints any vigil file as inspect does (human or JSON), filling *sum
 * when it is not NULL; 0 or EXIT_RUNTIME after printing the reason. */
int tool_show(const char *path, uint64_t grace, bool json, FILE *out, struct tool_summary *sum);

/* Runs look(arg) with a SIGBUS turned into TOOL_SHRUNK (tools/look_guard.c): a
 * mapped file truncated under the look by whoever may write it. */
#define TOOL_SHRUNK (-999)
int tool_guarded(int (*look)(void *), void *arg);
/* Whether a guarded look was jumped out of (its allocations left behind). */
bool tool_guard_jumped(void);
/* vigil_strerror, and what TOOL_SHRUNK means. */
const char *tool_look_strerror(int err);

/* The other kinds (inspect_kinds.c); 0 or EXIT_RUNTIME after the reason. */
int tool_show_barrier(const char *path, bool json, FILE *out);
int tool_show_leases(const char *path, bool json, FILE *out);
int tool_show_journal(const char *path, bool json, FILE *out);

/* Prints the occupied slots of an open heartbeat table, human form. */
void tool_show_hb_table(const vigil_hb *hb, uint64_t grace, FILE *out, struct tool_summary *sum);

/* ---- counters of structural events (counters.c) ------------------------- */

#define TOOL_MAX_COUNTERS 8

/* A file's counters, named as in watch --json ("registers",
 * "leader_changes", ...), in a fixed order for each kind. */
struct tool_counters {
    uint32_t    kind;
    size_t      n;
    const char *name[TOOL_MAX_COUNTERS];
    uint64_t    value[TOOL_MAX_COUNTERS];
};

/* Reads the counters of the file at path, of kind `kind`, through a
 * read-only handle: 0, or a vigil / -errno error. */
int tool_counters_read(const char *path, uint32_t kind, struct tool_counters *out);

/* Two lines: "counters: registers 3, ..." and "rates /s: registers
 * 0.50, ..." over the `ms` since `was` (NULL, another kind, or ms 0:
 * no rates yet). */
void tool_counters_human(const struct tool_counters *now, const struct tool_counters *was, uint64_t ms,
                         FILE *out);

/* The same as JSON members: "counters": {...}, "rates": {...} or null. */
void tool_counters_json(const struct tool_counters *now, const struct tool_counters *was, uint64_t ms,
                        FILE *out);

/* ---- what the tool writes of others' strings (escape.c) ------------------ */

/* s (at most maxlen bytes, stopping at a NUL) for a human line: printable
 * text and well-formed UTF-8 as they are; a backslash doubled; C0
 * controls, DEL and each byte of malformed UTF-8 as \xNN; C1 controls,
 * line separators and bidirectional controls as \uNNNN. Never a byte a
 * terminal acts on. Every name, key, owner, host and path a human line
 * shows goes through it. */
void tool_esc(FILE *out, const char *s, size_t maxlen);

/* The same into dst (cap bytes, always terminated, cut between two
 * characters' escapes when too small; NULL dst: only measured); quoted
 * also escapes '"' as \". Returns the length of the escaped text. */
size_t tool_esc_buf(char *dst, size_t cap, const char *s, size_t maxlen, bool quoted);

/* tool_esc of s into one of a few per-thread buffers (cut with "..." past
 * 4 KiB), for a printf argument: a few may be used in one call. */
const char *tool_e(const char *s);

/* A Prometheus label value (between its quotes): the name as tool_esc
 * writes it, then '\\' and '"' escaped as the exposition format asks, so
 * the value is valid UTF-8 whatever bytes the name holds. */
void tool_label_value(FILE *out, const char *s);

/* A JSON string of at most maxlen bytes of s (stopping at a NUL): quotes,
 * backslashes and what tool_esc escapes (C0, DEL, C1, separators,
 * bidirectional controls) as JSON escapes, other valid UTF-8 kept, every
 * byte of an invalid sequence written as \u00XX. */
void json_str(FILE *out, const char *s, size_t maxlen);

/* ---- JSON numbers (json.c) ------------------------------------------------- */

/* A counter: a JSON number while it is exact in a double (<= 2^53),
 * past that a string of its decimal digits. */
void json_u64(FILE *out, uint64_t v);

/* A 64-bit bitmap as the string "0x..." (lowercase hex, no padding). */
void json_hex(FILE *out, uint64_t v);

#endif
