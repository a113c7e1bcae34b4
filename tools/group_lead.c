/* SPDX-License-Identifier: MIT */
/*
 * `vigil group join GROUP --leader-only -- CMD`: a member that runs CMD
 * only while it leads.
 *
 * The tool joins, and watches the group's leader (vigil_group_watch_flags
 * with VIGIL_GROUP_WATCH_LEADER, on a handle of its own so that the
 * watch's requests never hold up a renewal). When a leader event names
 * this member's own registration (its lease and its join revision, the
 * term), CMD starts with VIGIL_GROUP_TERM set to that term. A member
 * that leads leads until its membership ends: nobody can join below the
 * lowest live join revision. So leadership ends in one of two ways, and
 * either stops CMD (SIGTERM, SIGKILL --kill-after later), as `vigil lock`
 * stops CMD when its lease is lost:
 *
 *   the membership lost: the keepalive's fd (refused, or not renewed for a
 *     TTL, timed from when the last renewal was sent, so before etcd can
 *     have expired it and handed leadership on);
 *   the watch naming another leader (or none): this member's key is gone
 *     (revoked by an agent, by hand) before its keepalive found out.
 *
 * Once CMD is gone (never before: one term's CMD at a time on this host)
 * the tool leaves (revoking the lease, if etcd still has it) and joins
 * again, as a new member at the back of the line with a new term; if it
 * leads again, CMD runs again under the new term. CMD ending on its own
 * ends the tool with CMD's status (the member leaves, and leadership
 * passes on). SIGINT and SIGTERM are passed on to a running CMD and end
 * the tool once it has exited (its status); with no CMD running they end
 * it at once, status 0. SIGHUP is passed on alone.
 *
 * CMD runs under a guardian of its own (guard.h), one per term, in a
 * process group of its own, and "CMD" above is that whole group: the end
 * of a term ends what CMD started too (SIGTERM to the group, SIGKILL
 * --kill-after later), and the next term's CMD starts only once the
 * guardian has seen the group gone.
 *
 * What it promises across hosts, and what it cannot: see vigil(1),
 * --leader-only, and docs/guide-groups.md. In short: on a host that runs,
 * CMD's group is sent SIGTERM no later than etcd can hand leadership on,
 * and is dead --kill-after after that at the latest; the tool killed
 * (SIGKILL) takes the group with it (the guardian sees its pipe close:
 * a set-user-ID CMD too, which the parent-death signal would not reach);
 * the tool stopped (SIGSTOP) does not keep it running: the guardian reads
 * the membership's keepalive page (still_member) and ends the group when
 * the membership lapses. What a whole stopped host or paused VM runs on
 * (the guardian frozen with it) is fenced only by VIGIL_GROUP_TERM, which
 * the resources CMD writes must check. Modelled in model/leader.pml
 * (handover: two hosts, any step stopped, killed, revoked);
 * tests/etcd_test_tool_leader.c.
 */
#define _GNU_SOURCE
#include "group_lead.h"
#include "etcd_opts.h"
#include "etcd_report.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

int tool_group_say(const char *group, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "vigil: group %s: ", tool_e(group));
    va_start(ap, fmt);
    tool_vmsg(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_RUNTIME;
}

#ifdef VIGIL_HAVE_ETCD

enum { EXIT_NOT_JOINED = 75 };
#define REJOIN_MIN_MS 100u
#define REJOIN_MAX_MS 2000u

struct lead {
    struct tool_lead       *l;
    vigil_group_member     *m;        /* NULL: between two memberships */
    vigil_group_member_info self;
    bool                    joined;   /* once: a name taken at the first join is exit 75 */
    bool                    busy_said;
    vigil_group_watcher    *w;
    bool                    known;    /* a leader event has come */
    vigil_group_member_info leader;   /* the last it told (revision 0: none) */
    pid_t                   pid;      /* CMD (and its group, under its guardian), or 0 */
    uint64_t                cmd_term;
    bool                    ending;   /* CMD's group told to end (SIGTERM, SIGKILL --kill-after later) */
    bool                    over;     /* ... and gone: the member leaves, and joins again */
    bool                    quitting; /* a stop signal came: end once CMD has */
    uint64_t                join_at;  /* the next join, not before */
    unsigned                backoff;
    int                     status;   /* the exit status, once known */
};

static bool leads(const struct lead *s)
{
    return s->m && s->known && s->leader.revision == s->self.revision && s->leader.lease == s->self.lease;
}

/* One join: 0 a member, 1 try again later, or the exit status (>= 2). */
static int join_once(struct lead *s)
{
    struct tool_lead *l = s->l;
    int rc = vigil_group_join_opts(l->e, l->group, l->name, l->ttl_ms, &l->opts, &s->m);
    if (rc == 0) {
        vigil_group_self(s->m, &s->self);
        if (s->joined)
            tool_group_say(l->group, "joined again as '%s' (term %" PRIu64 ")", l->name, s->self.revision);
        s->joined = true;
        s->busy_said = false;
        s->backoff = 0;
        return 0;
    }
    s->m = NULL;
    if (rc == VIGIL_EBUSY && !s->joined) {
        tool_group_say(l->group, "join as '%s' refused: the name is a live member's", l->name);
        return EXIT_NOT_JOINED;
    }
    if (rc == VIGIL_EBUSY && !s->busy_said) {
        /* Our last term's lease, unrevoked (etcd was not answering), or
         * another process's: it is free when that lapses. */
        tool_group_say(l->group, "join as '%s': the name is still a live member's (this member's last term, "
                                 "until its lease lapses, or another's); trying again", l->name);
        s->busy_said = true;
    } else if (rc != VIGIL_EBUSY && rc != VIGIL_ELOST && !s->joined && !(rc == -ETIMEDOUT || rc == -EAGAIN ||
                                                                          rc == -ECONNREFUSED || rc == -ECONNRESET ||
                                                                          rc == -EHOSTUNREACH || rc == -ENETUNREACH)) {
        tool_group_say(l->group, "join as '%s' on %s: %s", l->name, l->endpoints, tool_etcd_reason(l->e, rc));
        return EXIT_RUNTIME; /* refused for good (authentication, TLS, a bad name) */
    }
    s->backoff = s->backoff ? (s->backoff * 2 > REJOIN_MAX_MS ? REJOIN_MAX_MS : s->backoff * 2) : REJOIN_MIN_MS;
    s->join_at = tool_now_ms() + s->backoff;
    return 1;
}

/* The guardian's look, every GUARD_TICK_MS, even while the tool is
 * stopped: the keepalive's shared page says whether the membership (and
 * so the term) still stands. Async-signal-safe: atomics and a clock. */
static bool still_member(void *m)
{
    return !vigil_group_lost(m);
}

static void start_cmd(struct lead *s)
{
    struct tool_lead *l = s->l;
    /* Looked at once more: a keepalive that lapsed since the event says so. */
    if (vigil_group_lost(s->m))
        return;
    char eg[VIGIL_GROUP_MAX + 16], em[VIGIL_MEMBER_MAX + 16], et[48];
    snprintf(eg, sizeof(eg), "VIGIL_GROUP=%s", l->group);
    snprintf(em, sizeof(em), "VIGIL_MEMBER=%s", l->name);
    snprintf(et, sizeof(et), "VIGIL_GROUP_TERM=%" PRIu64, s->self.revision);
    const char *const add[] = { eg, em, et, NULL };
    const char *const drop[] = { "VIGIL_GROUP", "VIGIL_MEMBER", "VIGIL_GROUP_TERM", NULL };
    char **env = tool_env_with(add, drop, tool_etcd_secret_env); /* no password reaches CMD */
    /* Under a guardian of its own (guard.h), in a group of its own: the
     * whole group ends with the term, with the tool (kill -9, a set-user-
     * ID CMD too), and with the membership while the tool is stopped. */
    l->child->held = still_member;
    l->child->held_arg = s->m;
    int rc = env ? tool_child_start(l->child, l->cmd, env) : -ENOMEM;
    free(env);
    if (rc == 0 && tool_child_pid(l->child) <= 0) {
        int st;
        while ((rc = tool_child_done(l->child, &st)) == 0)
            poll(&(struct pollfd){ l->child->g.rep, POLLIN, 0 }, 1, -1);
        if (l->child->g.r.flags & GUARD_LOST)
            return; /* lost before the start: the loop sees the loss */
        rc = rc < 0 ? rc : -ECHILD;
    }
    if (rc < 0) {
        tool_group_say(l->group, "starting CMD: %s", strerror(-rc));
        s->status = EXIT_RUNTIME;
        s->quitting = true;
        return;
    }
    s->pid = l->child->pid;
    s->cmd_term = s->self.revision;
    s->ending = false;
    tool_group_say(l->group, "'%s' leads (term %" PRIu64 "): CMD started (pid %d)", l->name, s->cmd_term, (int)s->pid);
}

/* The term is over for CMD's whole group: SIGTERM now, SIGKILL
 * kill_after later (the guardian's). */
static void end_cmd(struct lead *s, const char *why)
{
    if (s->pid <= 0 || s->ending)
        return;
    (void)tool_guard_end(&s->l->child->g, s->l->kill_after_ms); /* gone already: its report says so */
    s->ending = true;
    tool_group_say(s->l->group, "'%s' no longer leads (term %" PRIu64 "): %s; CMD's process group sent SIGTERM",
                   s->l->name, s->cmd_term, why);
}

/* Leaves (the lease revoked if etcd still has it): a member no more. */
static void drop_member(struct lead *s)
{
    if (!s->m)
        return;
    (void)vigil_group_leave(s->m); /* lost or not: the lease is revoked where it lives on */
    s->m = NULL;
    s->join_at = 0;
}

static void on_signals(struct lead *s)
{
    if (tool_child_signals(s->l->child)) /* passed on to CMD while it runs */
        s->quitting = true;
}

/* The watch's events: the leader's, kept; joins and leaves, not ours to say. */
static int on_watch(struct lead *s)
{
    vigil_group_event ev;
    int rc;
    while ((rc = vigil_group_watch_next(s->w, &ev)) == 1) {
        if (ev.type != VIGIL_GROUP_LEADER)
            continue;
        s->known = true;
        s->leader = ev.member;
    }
    return rc;
}

/* CMD's group gone: 1 it is (s->status CMD's status when the tool ends
 * with it). */
static int reap(struct lead *s)
{
    int status;
    int rc = s->pid > 0 ? tool_child_done(s->l->child, &status) : 0;
    if (rc == 0)
        return 0;
    s->pid = 0;
    /* The guardian ended it for a lapsed membership (the tool was
     * stopped): the term's end, as if we had. */
    if ((s->l->child->g.r.flags & GUARD_LOST) && !s->ending) {
        s->ending = true;
        tool_group_say(s->l->group, "'%s' no longer leads (term %" PRIu64 "): its membership lapsed while the tool "
                       "was stopped; CMD's process group was ended then", s->l->name, s->cmd_term);
    }
    if (rc < 0) {
        tool_group_say(s->l->group, "CMD's guardian: %s", strerror(-rc));
        s->status = EXIT_RUNTIME;
        s->quitting = true;
    } else if (!s->ending) { /* on its own, or of a signal passed on: the tool ends with it */
        s->status = status;
        s->quitting = true;
    }
    s->over = s->ending;
    s->ending = false;
    return 1;
}

int tool_group_lead(struct tool_lead *l)
{
    struct lead s = { .l = l, .status = EXIT_OK };
    int rc = vigil_group_watch_flags(l->ew, l->group, VIGIL_GROUP_WATCH_LEADER, &s.w);
    if (rc < 0) {
        tool_group_say(l->group, "watch on %s: %s", l->endpoints, tool_etcd_reason(l->ew, rc));
        return EXIT_RUNTIME;
    }
    char what[VIGIL_GROUP_MAX + 8];
    snprintf(what, sizeof(what), "group %s", l->group);
    struct tool_etcd_report rep;
    (void)tool_etcd_report_start(&rep, l->ew, what, l->endpoints, 0); /* the watch's probe finds trouble */
    l->child->orphan_signal = SIGKILL; /* no CMD of a term outlives the tool that holds the term */
    l->child->orphan_kill_ms = l->kill_after_ms; /* a lapse seen by the guardian; what CMD leaves at its exit */
    for (;;) {
        reap(&s);
        if (s.quitting && s.pid <= 0)
            break;
        /* A member again, once the last term's CMD is gone. */
        if (!s.m && s.pid <= 0 && !s.quitting && tool_now_ms() >= s.join_at) {
            if ((rc = join_once(&s)) > 1) {
                s.status = rc;
                break;
            }
        }
        if (s.over) { /* the last term's CMD is gone: so is that membership */
            s.over = false;
            drop_member(&s);
            continue;
        }
        if (s.m && vigil_group_lost(s.m)) {
            end_cmd(&s, "its membership was lost");
            if (s.pid <= 0) {
                drop_member(&s);
                continue;
            }
        } else if (s.m && s.pid > 0 && !s.ending && s.known && s.leader.revision != s.cmd_term) {
            /* Another leads, or none: our key went before our keepalive knew. */
            end_cmd(&s, "the group's watch names another leader");
        } else if (leads(&s) && s.pid <= 0 && !s.quitting) {
            start_cmd(&s);
            continue; /* start_cmd may have ended us */
        }
        /* Sleep until something happens, or a timer. */
        uint64_t now = tool_now_ms(), wake = UINT64_MAX;
        if (!s.m && s.pid <= 0 && s.join_at > now && s.join_at < wake)
            wake = s.join_at;
        int timeout = wake == UINT64_MAX ? -1 : wake <= now ? 0 : wake - now > INT_MAX ? INT_MAX : (int)(wake - now);
        /* The loss fd stays readable once lost: asked only while it can still say something. */
        bool ask_lost = s.m && !s.ending && !vigil_group_lost(s.m);
        struct pollfd pf[4] = { { l->child->sfd, POLLIN, 0 },
                                { vigil_group_watch_fd(s.w), POLLIN, 0 },
                                { ask_lost ? vigil_group_lost_fd(s.m) : -1, POLLIN, 0 },
                                { s.pid > 0 ? l->child->g.rep : -1, POLLIN, 0 } };
        if (poll(pf, 4, timeout) < 0 && errno != EINTR) {
            rc = -errno;
            tool_group_say(l->group, "poll: %s", strerror(-rc));
            s.status = EXIT_RUNTIME;
            s.quitting = true;
            end_cmd(&s, "the tool failed");
            continue;
        }
        on_signals(&s);
        if ((rc = on_watch(&s)) < 0) {
            tool_group_say(l->group, "watch: %s", vigil_strerror(rc));
            s.status = EXIT_RUNTIME;
            s.quitting = true;
            end_cmd(&s, "the watch failed, and with it all knowledge of who leads");
        }
        if (s.quitting && s.pid <= 0)
            break;
    }
    drop_member(&s);
    vigil_group_watch_close(s.w);
    tool_etcd_report_stop(&rep);
    return s.status;
}

#endif
