/* SPDX-License-Identifier: MIT */
/*
 * What the group files share (group*.c): the keys of a group, transactions
 * built with cJSON and their replies read back, a watch stream over a
 * prefix, and the member handle. The layout in etcd and the protocols are
 * told in group.c (membership), group_units.c (work units) and
 * group_barrier.c (rounds); the agent's records in group_agent.c.
 */
#ifndef VIGIL_SRC_GROUP_INTERNAL_H
#define VIGIL_SRC_GROUP_INTERNAL_H

#include <vigil/group.h>

#include "recipes_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define GKEY_MAX 512 /* a key of ours: GROUP (100) + a unit (127) + what we add, with room */

/* The time a watching call sleeps before it looks again whether its
 * stream still speaks for e's current endpoint (a frozen member keeps a
 * stream open and silent). */
#define GROUP_STREAM_SLICE_MS 250

/* ---- keys (group.c) ---------------------------------------------------- */

/* "GROUP/" fmt... into buf: 0, or VIGIL_ERANGE. */
int gkey(char *buf, const char *group, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Checks a group, member or unit name: 0, VIGIL_ERANGE, -EINVAL (NULL). */
int gname_check(const char *s, size_t max);
/* A lease ID as etcd's concurrency package names a key: lowercase hex. */
void ghex(int64_t lease, char out[17]);

/* ---- transactions (group_json.c) --------------------------------------- */

enum gtarget { G_CREATE, G_MOD, G_VERSION, G_LEASE };
enum gresult { G_EQ, G_LESS, G_GREATER, G_NE };
enum gbranch { G_OK, G_FAIL };
enum {
    G_PREFIX    = 1, /* range / delete every key starting with key */
    G_KEYS_ONLY = 2,
    G_COUNT     = 4, /* count_only */
    G_BY_CREATE = 8, /* sorted by create_revision, ascending */
};

/* A txn being built. Errors while building are kept in err and reported by
 * gtxn_run, so a caller builds without checking each step. */
struct gtxn {
    struct cJSON *root, *cmp, *ok, *fail;
    int           err;
    bool          lease_put; /* a put under a lease: "lease not found" is then VIGIL_ELOST */
    int64_t       fence_rev; /* gtxn_fence's join revision: a reply below it is VIGIL_ELOST */
    int           franges;   /* ranges in the failure branch so far */
};
void gtxn_init(struct gtxn *t);
void gtxn_free(struct gtxn *t);
void gtxn_cmp(struct gtxn *t, const char *key, enum gtarget target, enum gresult res, int64_t v);
void gtxn_put(struct gtxn *t, enum gbranch b, const char *key, const char *val, size_t vlen, int64_t lease);
void gtxn_range(struct gtxn *t, enum gbranch b, const char *key, unsigned flags, int64_t limit);
void gtxn_del(struct gtxn *t, enum gbranch b, const char *key, unsigned flags);

/* A reply: the parsed body, whether the comparisons held, the revision;
 * and doubt: an earlier sending of the same txn failed after it may have
 * reached a member (timed out, reset), so a copy of it may still land. */
struct greply {
    struct cJSON *root;
    bool          ok, doubt;
    bool          behind; /* refused by vigil_etcd__store_behind: the store went back, or is another */
    int64_t       rev;
};
/* Sends t through e (taking e's lock): 0 with *r (free with greply_free),
 * or the error (VIGIL_ELOST for "lease not found" when t puts under a
 * lease). */
int  gtxn_run(vigil_etcd *e, struct gtxn *t, struct greply *r);
void greply_free(struct greply *r);

/* A key-value as etcd gave it, decoded. */
struct gkv {
    char    key[GKEY_MAX];
    char   *val;   /* NUL-terminated, malloc'd (gkv_free) */
    size_t  vlen;
    int64_t create, mod, version, lease;
};
void gkv_free(struct gkv *kv);
/* The n-th range among r's responses (puts and deletes not counted): its
 * count and its kvs (a cJSON array, possibly empty: NULL). 0, or -EPROTO. */
int  greply_range(const struct greply *r, int n, int64_t *count, const struct cJSON **kvs);
/* Decodes one element of a kvs array: 0, or -EPROTO. */
int  gkv_read(const struct cJSON *kv, struct gkv *out);
/* A key of a range under a prefix: the rest of its name past the prefix,
 * its create_revision, and the start of its value. */
struct gentry {
    char    name[VIGIL_UNIT_MAX + 1];
    int64_t create;
    char    val[48];
};
/* The keys of the n-th range of r whose rest past plen bytes is 1 to
 * maxlen bytes, in key order: their number (into *out, malloc'd; NULL for
 * none), or an error. */
int  greply_entries(const struct greply *r, int n, size_t plen, size_t maxlen, struct gentry **out);
/* The first kv of the n-th range (as greply_range): 1 and *out, 0 none,
 * -EPROTO. */
int  greply_first(const struct greply *r, int n, struct gkv *out);

/* ---- a watch stream (group_stream.c) ------------------------------------ */

/* A watch of key (or of every key under it, G_PREFIX) from revision rev,
 * with the previous value on deletions, on a connection of its own to e's
 * current endpoint. */
struct gstream;
int  gstream_open(vigil_etcd *e, const char *key, unsigned flags, int64_t rev, struct gstream **out);
/* One event of the stream. */
struct gevent {
    bool       del;    /* DELETE, else PUT */
    struct gkv kv;     /* for a DELETE, the previous kv when etcd sent it (val may be NULL) */
};
/* Waits up to timeout_ms (or until extra_fd, if >= 0, is readable) for
 * events: the number written to ev (at most max; those after wait for the
 * next call), 0 none, GSTREAM_ENDED (the stream ended, was cancelled or
 * compacted: look again), or an error. *rev is raised to the revision the
 * stream has reported up to. Each event's kv must be freed (gkv_free). */
#define GSTREAM_ENDED 1000000
int  gstream_next(struct gstream *s, int timeout_ms, int extra_fd, struct gevent *ev, int max, int64_t *rev);
/* Does the stream still go to e's current endpoint? */
bool gstream_current(struct gstream *s, vigil_etcd *e);
/* Did it end because etcd compacted past the revision it was opened
 * from? (Then a caller reads afresh: the changes between are gone.) */
bool gstream_compacted(const struct gstream *s);
void gstream_close(struct gstream *s);

/* ---- the member (group.c) ------------------------------------------------ */

struct vigil_group_member {
    vigil_etcd      *e;
    char             group[VIGIL_GROUP_MAX + 1];
    char             name[VIGIL_MEMBER_MAX + 1];
    char             host[64];
    char             hex[17];     /* the lease in hex: our key under members/ */
    int64_t          lease;
    uint64_t         rev;         /* join revision */
    uint64_t         ttl_ms;      /* as granted */
    uint32_t         pid;
    vigil_keepalive *ka;
    char            *value;       /* our members/ value (JSON), re-put by a round's commit */
    char             record[4096]; /* the agent's record of our lease, "" none */
    _Atomic bool     waiting;     /* in a barrier wait (one at a time) */
    uint64_t         rnext, rserial; /* GROUP/round as the last wait left it */
    int64_t          rmod;
    struct gstream  *bstream;     /* the last wait's watch of names/, kept for the next */
    int64_t          bstream_rev;  /* what it has reported up to */
    uint64_t         rtold;       /* rounds below it were told to a call of ours (its serial too) */
    /* The member's fence (group_fence.c, THE RULE): one write at a time,
     * each comparing GROUP/fence/<hex>'s version with fence and putting
     * its own id there. Under lock. */
    pthread_mutex_t  lock;
    uint64_t         fence;       /* the version the next write compares */
    uint64_t         ids;         /* writes sent so far: the last id given */
    struct gdoubt {               /* a write whose outcome we do not know */
        int      op;              /* GOP_NONE: none */
        uint64_t id;
        char     unit[VIGIL_UNIT_MAX + 1]; /* a claim's unit */
    } doubt;
    char             found[VIGIL_UNIT_MAX + 1]; /* a claim in doubt found landed: the next take's ("" none) */
    uint64_t         found_token;
    /* A fenced write answered by a store that went back below our join, or
     * by another cluster: lost for good, and nothing read there since
     * (a done record, say) can tell otherwise. */
    _Atomic bool     behind;
};

/* The comparison every write of a member makes: its key under members/
 * still there, created at its join revision (so its lease lives: the key
 * hangs on it, and a stale member's writes never land). */
void gtxn_fence(struct gtxn *t, const vigil_group_member *m);

/* ---- the rule: a write sent late or twice changes nothing (group_fence.c) ---- */

enum gop { GOP_NONE, GOP_CLAIM, GOP_DONE, GOP_GIVEBACK, GOP_ARRIVE, GOP_WITHDRAW, GOP_COMMIT };
/* What became of a write. */
enum {
    GOP_LANDED  = 0, /* it landed, at *rev; r is its reply, or empty (r->root NULL) when a resolution found it */
    GOP_REFUSED = 1, /* its comparisons failed (r: the failure branch), and no copy of it will ever land */
    GOP_VOID    = 2, /* it never landed and never will: the caller may send it again, as a new write */
    GOP_FOUND   = 3, /* a claim not sent: an earlier claim of ours landed unknown to its call (m->found), take that */
};
/* A write of m begun: t made, fenced by gtxn_fence; its id, which a claim
 * puts in its value. The caller adds its comparisons and operations (its
 * failure ranges first, gop_run adds one after them), then gop_run. */
uint64_t gop_begin(vigil_group_member *m, struct gtxn *t);
/* Sends t as write op (a claim's unit: unit) of id, m->lock held: a GOP_*
 * with *r (free it), VIGIL_ELOST, or an error: the outcome unknown, kept in
 * m->doubt and resolved before any other write of m. A doubt of an
 * earlier write is resolved first. */
int gop_run(vigil_group_member *m, struct gtxn *t, uint64_t id, int op, const char *unit, struct greply *r,
            int64_t *rev);
/* Resolves m->doubt, if any (m->lock held): 0 nothing in doubt any more
 * (a claim found landed is kept in m->found), VIGIL_ELOST, or an error
 * (still in doubt). */
int gop_resolve(vigil_group_member *m);
/* The put of the fence key at join (version 1): into the join's txn. */
void gfence_join(struct gtxn *t, const vigil_group_member *m);

/* Monotonic and realtime ns. */
uint64_t gnow_ns(void);
int64_t  grealtime_ns(void);

/* Parses a member's value (JSON) into info (name, host, pid); a value that
 * is not ours makes a foreign member named after it. */
void gmember_parse(const struct gkv *kv, const char *hex, vigil_group_member_info *info);

/* The agent's records (group_agent.c): writes dir/vigil-<hex>.lease for m
 * (dir/vigil-<hex>-<random>.lease when another user's file holds that
 * name; the path into m->record), or removes it. */
int  grecord_write(vigil_group_member *m, const char *dir);
/* Tests only: called by vigil_agent_open at "opened" (DIR open, not yet
 * watched), so a test can swap DIR's name there; NULL otherwise. */
extern void (*gagent_test_hook)(const char *step);
/* Tests only: called by a take at "candidates" (the set read, no claim
 * sent yet, no lock held), so a test can act as another thread of m
 * there; NULL otherwise. */
extern void (*gunits_test_hook)(vigil_group_member *m, const char *step);
void grecord_remove(vigil_group_member *m);

#endif
