/* SPDX-License-Identifier: MIT */
/*
 * etcd trouble said out loud: every etcd command of the tool that runs for
 * a while (group watch and join, agent, lock) starts a reporter on its
 * handle, a thread that sleeps on vigil_etcd_health_fd and writes one line
 * on stderr when etcd stops answering (the endpoints, the failure in
 * libcurl's or etcd's words) and one when it answers again (after how
 * long), however many requests fail between:
 *
 *   vigil: group jobs: etcd unreachable (http://10.0.0.1:2379): http://10.0.0.1:2379: Failed to
 *       connect to 10.0.0.1 port 2379 after 0 ms: Couldn't connect to server; trying again
 *   vigil: group jobs: etcd reachable again (http://10.0.0.1:2379) after 12.5s
 *
 * A command whose handle makes no request at rest (the agent) has the
 * reporter ask etcd every ping_ms (vigil_etcd_ping). Lines are escaped as
 * every human line is (tool_e).
 */
#ifndef VIGIL_TOOL_ETCD_REPORT_H
#define VIGIL_TOOL_ETCD_REPORT_H

#ifdef VIGIL_HAVE_ETCD
#include <vigil/etcd.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct tool_etcd_report {
    vigil_etcd *e;
    const char *what, *endpoints; /* the line's subject, the endpoints as given: outlive the reporter */
    uint64_t    ping_ms;
    pthread_t   thread;
    int         stopfd;
    bool        running;
    int64_t     down_ns; /* when the record turned unreachable, as last said (the thread's own) */
};

/* Starts the reporter (its thread with every signal blocked: the
 * command's own signal handling is untouched). 0, or -errno (then no
 * reporter runs, and the command goes on without). */
int  tool_etcd_report_start(struct tool_etcd_report *r, vigil_etcd *e, const char *what, const char *endpoints,
                            uint64_t ping_ms);
/* Stops it (a line it was writing is finished first); fine if it never ran. */
void tool_etcd_report_stop(struct tool_etcd_report *r);

/* For a wait that ended (timed out, not acquired): the failure it met
 * last since since_ns (CLOCK_REALTIME), in words for the end of a line,
 * "" when it met none. Not escaped. */
const char *tool_etcd_met(vigil_etcd *e, int64_t since_ns);

/* CLOCK_REALTIME in ns, to give tool_etcd_met. */
int64_t tool_realtime_ns(void);
#endif

#endif
