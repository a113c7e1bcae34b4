/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil inspect` of the kinds that are not heartbeat tables:
 * barrier files (header, round, arrivals, in both forms, exact JSON keys)
 * and lease stores (every entry in use, exact JSON keys and values, keys
 * and owners holding quotes, control characters and malformed UTF-8 that
 * come out escaped, never raw on a terminal); and the commands that want a
 * heartbeat table saying what they were given instead.
 */
#include "tooltest.h"

static vigil_hb *make_hb(const char *path, uint32_t cap)
{
    vigil_hb *hb = NULL;
    int rc = vigil_hb_create(path, cap, &hb);
    if (rc < 0) {
        fprintf(stderr, "create %s: %s\n", path, vigil_strerror(rc));
        exit(1);
    }
    return hb;
}

static int test_inspect_barrier(void)
{
    const char *hf = vt_path("bar.hb"), *bf = vt_path("bar.barrier");
    vigil_hb *hb = make_hb(hf, 6);
    vigil_barrier *b;
    EXPECT_RC(vigil_barrier_create(bf, hb, 4, &b), 0);
    VT_RUN("inspect", bf);
    EXPECT_EXIT(0, "inspect barrier");
    EXPECT(strstr(R.out, "barrier file, capacity 6, grace 4 epochs") && strstr(R.out, "round 0"),
           "barrier header not shown:\n%s", R.out);
    VT_RUN("inspect", bf, "--json");
    EXPECT_EXIT(0, "inspect barrier --json");
    struct vj *o = vj_parse(R.out);
    EXPECT(o, "not JSON (%s):\n%s", vj_error, R.out);
    static const char *const keys[] = { "kind", "capacity", "epoch", "arrived", "recorded",
                                        "grace_epochs", "sleepers", NULL };
    EXPECT(vj_keys_are(o, keys), "unexpected keys:\n%s", R.out);
    uint64_t v;
    EXPECT(vj_is_str(vj_get(o, "kind"), "barrier") && vj_u64(vj_get(o, "capacity"), &v) && v == 6,
           "kind/capacity:\n%s", R.out);
    EXPECT(vj_u64(vj_get(o, "grace_epochs"), &v) && v == 4, "grace_epochs:\n%s", R.out);

    /* the tick and failover commands want a heartbeat table, and say so */
    VT_RUN("tick", bf, "--count", "1");
    EXPECT_EXIT(1, "tick of a barrier file");
    EXPECT(strstr(R.err, "a barrier file, not a heartbeat table"), "got '%s'", R.err);
    VT_RUN("failover", bf, "--once");
    EXPECT_EXIT(1, "failover of a barrier file");
    vigil_barrier_close(b);
    vigil_hb_close(hb);
    return 0;
}


static int test_inspect_leases(void)
{
    const char *lf = vt_path("store.leases");
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_create(lf, 8, &ls), 0);
    VT_RUN("inspect", lf, "--json");
    EXPECT_EXIT(0, "inspect of an empty store");
    struct vj *o = vj_parse(R.out);
    EXPECT(o && vj_get(o, "leases") && vj_count(vj_get(o, "leases")) == 0, "empty store:\n%s", R.out);

    /* a key and owner holding everything a JSON writer must escape */
    static const char key[] = "job/\"7\"\\\n\t\x01\x1b[31mred\xff\xc3\xa9";
    static const char owner[] = "host\x7f/pid 1";
    vigil_lease l;
    EXPECT_RC(vigil_leases_acquire(ls, key, owner, 60000, &l), 0);
    VT_RUN("inspect", lf, "--json");
    EXPECT_EXIT(0, "inspect --json of a store");
    o = vj_parse(R.out);
    EXPECT(o, "not JSON (%s):\n%s", vj_error, R.out);
    static const char *const top[] = { "kind", "capacity", "leases", NULL };
    EXPECT(vj_keys_are(o, top) && vj_is_str(vj_get(o, "kind"), "leases"), "top level:\n%s", R.out);
    struct vj *e = vj_get(o, "leases")->child;
    EXPECT(e && !e->next, "expected one lease:\n%s", R.out);
    static const char *const keys[] = { "entry", "key", "owner", "token", "ttl_ms",
                                        "expires_in_ms", "state", "pid", NULL };
    EXPECT(vj_keys_are(e, keys), "lease keys:\n%s", R.out);
    /* \xff is not UTF-8: it comes out as \u00ff, which decodes to U+00FF */
    static const char decoded[] = "job/\"7\"\\\n\t\x01\x1b[31mred\xc3\xbf\xc3\xa9";
    EXPECT(vj_get(e, "key")->len == sizeof(decoded) - 1 &&
               memcmp(vj_get(e, "key")->str, decoded, sizeof(decoded) - 1) == 0,
           "the key did not survive escaping:\n%s", R.out);
    EXPECT(vj_is_str(vj_get(e, "owner"), owner), "owner:\n%s", R.out);
    EXPECT(vj_is_str(vj_get(e, "state"), "held"), "state:\n%s", R.out);
    uint64_t v;
    EXPECT(vj_u64(vj_get(e, "token"), &v) && v == l.token, "token:\n%s", R.out);
    EXPECT(vj_u64(vj_get(e, "ttl_ms"), &v) && v == 60000, "ttl:\n%s", R.out);
    EXPECT(vj_u64(vj_get(e, "pid"), &v) && v == (uint64_t)getpid(), "pid:\n%s", R.out);

    VT_RUN("inspect", lf);
    EXPECT_EXIT(0, "inspect of a store");
    EXPECT(strstr(R.out, "lease store, capacity 8") && strstr(R.out, "1 held"), "header:\n%s", R.out);
    EXPECT(!strchr(R.out, '\x1b') && !strchr(R.out, '\x01'),
           "the human form let control characters through to the terminal");
    vigil_leases_close(ls);
    return 0;
}


VT_MAIN(VT_CASE(test_inspect_barrier), VT_CASE(test_inspect_leases))
