/* SPDX-License-Identifier: MIT */
/*
 * Description: the vigil tool, run as a program: exit codes 0/1/2 and
 * --help for every command, strict numbers, create, inspect (human and
 * JSON, exact keys and values, counters past 2^53), corrupt and missing
 * files described and never a crash, tick --count (its log of changes
 * only, --verbose and --quiet) and a running ticker logging each change
 * of the table as it comes, and watch and tick ended by SIGTERM and
 * SIGINT with exit 0 and their lines seen through a pipe as they happen.
 */
#include "tooltest.h"
#include "hbtest.h"

#include <ctype.h>

static const char *const commands[] = { "create", "inspect", "watch", "tick", "failover", "demo" };

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

static int test_help(void)
{
    VT_RUN("--help");
    EXPECT_EXIT(0, "vigil --help");
    EXPECT(strstr(R.out, "usage: vigil COMMAND") && !R.err[0], "vigil --help printed no usage");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        EXPECT(strstr(R.out, commands[i]), "vigil --help does not list %s", commands[i]);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "usage: vigil %s ", commands[i]);
        VT_RUN(commands[i], "--help");
        EXPECT_EXIT(0, commands[i]);
        EXPECT(strncmp(R.out, want, strlen(want)) == 0 && !R.err[0],
               "%s --help: expected '%s' on stdout alone, got '%.80s' / '%s'", commands[i], want,
               R.out, R.err);
        /* --help wins over anything else on the line */
        VT_RUN(commands[i], "--bogus", "-h");
        EXPECT_EXIT(0, "--bogus -h");
        EXPECT(strncmp(R.out, want, strlen(want)) == 0, "-h after a bad option printed no help");
        VT_RUN("help", commands[i]);
        EXPECT_EXIT(0, "vigil help COMMAND");
        EXPECT(strncmp(R.out, want, strlen(want)) == 0, "vigil help %s printed '%.60s'",
               commands[i], R.out);
    }
    VT_RUN("help");
    EXPECT_EXIT(0, "vigil help");
    EXPECT(strstr(R.out, "usage: vigil COMMAND"), "vigil help printed no usage");
    VT_RUN("-h");
    EXPECT_EXIT(0, "vigil -h");
    return 0;
}

static int test_usage_errors(void)
{
    const char *f = vt_path("usage.hb");
    vigil_hb_close(make_hb(f, 4));
    const char *nf = vt_path("usage-new.hb");
    static const char *const big = "99999999999999999999999";
    const char *const cases[][8] = {
        { NULL },                                   /* no command */
        { "bogus" },
        { "help", "bogus" },
        { "create" },
        { "create", nf },                           /* --capacity is required */
        { "create", nf, "--capacity" },             /* needs a value */
        { "create", nf, "--capacity", "0" },
        { "create", nf, "--capacity", "-1" },
        { "create", nf, "--capacity", "+4" },
        { "create", nf, "--capacity", " 4" },
        { "create", nf, "--capacity", "4x" },
        { "create", nf, "--capacity", "" },
        { "create", nf, "--capacity", "0x10" },
        { "create", nf, "--capacity", big },
        { "create", nf, "--capacity", "1048577" },
        { "create", nf, "--capacity=4", "extra" },
        { "create", nf, "--cap", "4" },             /* no abbreviations */
        { "create", nf, "--capacity", "4", "-x" },
        { "inspect" },
        { "inspect", f, f },
        { "inspect", f, "--grace", "-1" },
        { "inspect", f, "--grace", "1.5" },
        { "inspect", f, "--grace", big },
        { "inspect", f, "--json=yes" },
        { "inspect", f, "--bogus" },
        { "watch" },
        { "watch", f, "--interval", "0" },
        { "watch", f, "--interval", "abc" },
        { "watch", f, "--interval", "86400001" },
        { "tick" },
        { "tick", f, "--count", "0" },
        { "tick", f, "--count", "-3" },
        { "tick", f, "--count" },
        { "tick", f, "--interval", "0" },
        { "tick", f, "extra" },
        { "demo", "--workers", "1" },
        { "demo", "--workers", "33" },
        { "demo", "--workers", "four" },
        { "demo", "extra" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vt_runv(10000, cases[i]);
        char what[256] = "vigil";
        for (size_t j = 0; cases[i][j]; j++)
            snprintf(what + strlen(what), sizeof(what) - strlen(what), " '%s'", cases[i][j]);
        EXPECT_EXIT(2, what);
        EXPECT(!R.out[0], "%s: a usage error printed on stdout: %s", what, R.out);
        EXPECT(strncmp(R.err, "vigil", 5) == 0, "%s: expected a message on stderr, got '%s'", what,
               R.err);
    }
    EXPECT(access(nf, F_OK) != 0, "a create with bad arguments made the file");
    /* the table was not touched by the refused ticks */
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(f, 4, &hb), 0);
    EXPECT(vigil_hb_epoch(hb) == 0, "a refused tick ticked: epoch %llu",
           (unsigned long long)vigil_hb_epoch(hb));
    vigil_hb_close(hb);
    return 0;
}

/* etcdctl's habits (issue 31.4): a slip of a letter gets "did you mean",
 * an etcdctl flag vigil does not take says what to write instead, two
 * different lists of endpoints are refused, and ETCDCTL_DIAL_TIMEOUT is
 * read as a duration; all before any connection (the endpoint is never
 * asked). */
static int test_etcdctl_habits(void)
{
    static const char *const nobody = "http://127.0.0.1:1";
    const char *hb = vt_path("habits.hb");
    unsetenv("ETCDCTL_ENDPOINTS"); /* the caller's, if any: "missing --etcd" is the point */
    struct {
        const char *argv[12];
        const char *env; /* NAME=VALUE for the run, or NULL */
        const char *says;
    } cases[] = {
        { { "group", "ls", "g", "--etdc", nobody }, NULL, "unknown option '--etdc' (did you mean '--etcd'?)" },
        { { "group", "ls", "g", "--endpoint", nobody }, NULL, "(did you mean '--endpoints'?)" },
        { { "create", hb, "--capacty", "4" }, NULL, "unknown option '--capacty' (did you mean '--capacity'?)" },
        { { "lock", "--etcd", nobody, "--insecure-skip-tls-verify", "k", "--", "true" }, NULL,
          "an etcdctl option vigil does not take; vigil always verifies the servers" },
        { { "group", "watch", "g", "--etcd", nobody, "-w", "json" }, NULL, "'-w': an etcdctl option" },
        { { "group", "ls", "g", "--etcd", nobody, "--endpoints", "http://127.0.0.1:2" }, NULL,
          "two lists of endpoints" },
        { { "group", "ls", "g", "--etcd", nobody }, "ETCDCTL_DIAL_TIMEOUT=soon",
          "ETCDCTL_DIAL_TIMEOUT=soon: not a duration" },
        { { "group", "ls", "g" }, NULL, "missing --etcd ENDPOINTS" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char var[64] = "";
        if (cases[i].env) {
            snprintf(var, sizeof(var), "%s", cases[i].env);
            char *eq = strchr(var, '=');
            *eq = '\0';
            setenv(var, eq + 1, 1);
        }
        vt_runv(10000, cases[i].argv);
        if (var[0])
            unsetenv(var);
        if (strstr(R.err, "built without"))
            continue; /* no etcd adapter here: nothing to say about etcdctl */
        char what[256] = "vigil";
        for (size_t j = 0; cases[i].argv[j]; j++)
            snprintf(what + strlen(what), sizeof(what) - strlen(what), " '%s'", cases[i].argv[j]);
        EXPECT_EXIT(2, what);
        EXPECT(strstr(R.err, cases[i].says), "%s: expected '%s' on stderr, got '%s'", what, cases[i].says, R.err);
    }
    return 0;
}

static int test_create(void)
{
    const char *f = vt_path("create.hb");
    VT_RUN("create", f, "--capacity", "16");
    EXPECT_EXIT(0, "create");
    struct stat st;
    EXPECT(stat(f, &st) == 0, "create made no file");
    EXPECT(st.st_size == 64 + 16 * 64, "expected %d bytes, got %lld", 64 + 16 * 64,
           (long long)st.st_size);
    EXPECT((st.st_mode & 07777) == 0600, "expected mode 0600, got %o", st.st_mode & 07777);
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_open(f, 16, &hb), 0);
    vigil_hb_close(hb);

    /* never clobbers: an existing file is a runtime error, one line */
    VT_RUN("create", f, "--capacity=4");
    EXPECT_EXIT(1, "create over an existing file");
    char want[600];
    snprintf(want, sizeof(want), "vigil: %s: %s\n", f, vigil_strerror(-EEXIST));
    EXPECT(strcmp(R.err, want) == 0, "expected stderr '%s', got '%s'", want, R.err);
    EXPECT(stat(f, &st) == 0 && st.st_size == 64 + 16 * 64, "the existing file was changed");

    /* the largest capacity, and "--" before a name that starts with '-' */
    EXPECT(chdir(vt_tmpdir()) == 0, "chdir");
    VT_RUN("create", "--capacity", "1048576", "--", "-dash.hb");
    EXPECT_EXIT(0, "create -- -dash.hb");
    EXPECT(stat(vt_path("-dash.hb"), &st) == 0 && st.st_size == 64 + 1048576LL * 64,
           "the largest table has the wrong size");
    unlink(vt_path("-dash.hb"));

    VT_RUN("create", vt_path("no-such-dir/x.hb"), "--capacity", "4");
    EXPECT_EXIT(1, "create in a missing directory");
    EXPECT(strstr(R.err, strerror(ENOENT)) && vt_count_lines(R.err) == 1,
           "expected one line naming ENOENT, got '%s'", R.err);
    return 0;
}

/* A table with one of everything: live worker with bits, live coordinator,
 * stale worker, vacant slots. Epoch 10, grace 5. */
static void fill_table(vigil_hb *hb, uint32_t s[3])
{
    vigil_hb_register(hb, 1001, &s[0]);
    vigil_hb_register(hb, 1002, &s[1]);
    vigil_hb_register(hb, 1003, &s[2]);
    for (int i = 0; i < 10; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, s[0]);
    vigil_hb_beat(hb, s[1]);
    vigil_hb_mark_in_flight(hb, s[0], 0);
    vigil_hb_mark_in_flight(hb, s[0], 2);
    vigil_hb_mark_in_flight(hb, s[2], 63);
    vigil_hb_set_role(hb, s[1], VIGIL_ROLE_COORDINATOR);
}

static int test_inspect_human(void)
{
    const char *f = vt_path("human.hb");
    vigil_hb *hb = make_hb(f, 8);
    uint32_t s[3];
    fill_table(hb, s);
    VT_RUN("inspect", f);
    EXPECT_EXIT(0, "inspect");
    EXPECT(!R.err[0], "inspect wrote on stderr: %s", R.err);
    EXPECT(strstr(R.out, "heartbeat table, capacity 8, epoch 10"), "no header line:\n%s", R.out);
    EXPECT(strstr(R.out, "2 live, 1 stale, 5 vacant (grace 5)"), "wrong counts:\n%s", R.out);
    EXPECT(strstr(R.out, "vacant: 3-7"), "vacant slots not listed:\n%s", R.out);
    EXPECT(strstr(R.out, "1002  coordinator"), "coordinator not shown:\n%s", R.out);
    EXPECT(strstr(R.out, "0x8000000000000000  stale"), "stale slot's bits not shown:\n%s", R.out);
    EXPECT(strstr(R.out, "0x0000000000000005  live"), "live slot's bits not shown:\n%s", R.out);

    VT_RUN("inspect", f, "--grace", "10");
    EXPECT_EXIT(0, "inspect --grace 10");
    EXPECT(strstr(R.out, "3 live, 0 stale, 5 vacant (grace 10)"), "grace 10 counts:\n%s", R.out);
    VT_RUN("inspect", "--grace=0", f);
    EXPECT(strstr(R.out, "2 live, 1 stale"), "grace 0 counts:\n%s", R.out);

    /* a leader and its term, as the header holds them */
    atomic_store(&hb->hdr->term, 7);
    atomic_store(&hb->hdr->leader, vigil_slot_gen(&hb->slots[s[1]]) << 21 | (s[1] + 1));
    VT_RUN("inspect", f);
    EXPECT(strstr(R.out, "leader: slot 1, pid 1002, term 7"), "leader not shown:\n%s", R.out);

    /* a slot wedged mid-change is still shown, and marked */
    vt_wedge(hb, s[2], VT_WRITER_DEAD);
    VT_RUN("inspect", f);
    EXPECT_EXIT(0, "inspect with a wedged slot");
    EXPECT(strstr(R.out, "stale (mid-change)"), "wedged slot not marked:\n%s", R.out);
    vigil_hb_close(hb);
    return 0;
}

static int check_slot(const struct vj *o, uint64_t slot, uint64_t pid, const char *role,
                      uint64_t seen, const char *bits, const char *state)
{
    static const char *const keys[] = { "slot", "pid", "role", "last_seen_epoch", "in_flight",
                                        "state", NULL };
    EXPECT(o && o->type == VJ_OBJ && vj_keys_are(o, keys),
           "slot %llu: expected exactly the keys slot, pid, role, last_seen_epoch, in_flight, state",
           (unsigned long long)slot);
    uint64_t v;
    EXPECT(vj_get(o, "slot")->type == VJ_NUM && vj_u64(vj_get(o, "slot"), &v) && v == slot,
           "expected slot %llu", (unsigned long long)slot);
    EXPECT(vj_get(o, "pid")->type == VJ_NUM && vj_u64(vj_get(o, "pid"), &v) && v == pid,
           "slot %llu: expected pid %llu", (unsigned long long)slot, (unsigned long long)pid);
    EXPECT(vj_is_str(vj_get(o, "role"), role), "slot %llu: expected role %s",
           (unsigned long long)slot, role);
    EXPECT(vj_u64(vj_get(o, "last_seen_epoch"), &v) && v == seen,
           "slot %llu: expected last_seen_epoch %llu", (unsigned long long)slot,
           (unsigned long long)seen);
    EXPECT(vj_is_str(vj_get(o, "in_flight"), bits), "slot %llu: expected in_flight %s, got %s",
           (unsigned long long)slot, bits, vj_get(o, "in_flight")->str);
    EXPECT(vj_is_str(vj_get(o, "state"), state), "slot %llu: expected state %s, got %s",
           (unsigned long long)slot, state, vj_get(o, "state")->str);
    return 0;
}

static int test_inspect_json(void)
{
    static const char *const top[] = { "kind", "capacity", "epoch", "term", "leader", "grace",
                                       "live", "stale", "vacant", "slots", NULL };
    const char *f = vt_path("json.hb");
    vigil_hb *hb = make_hb(f, 8);

    VT_RUN("inspect", f, "--json");
    EXPECT_EXIT(0, "inspect --json of an empty table");
    struct vj *doc = vj_parse(R.out);
    EXPECT(doc, "not JSON (%s):\n%s", vj_error, R.out);
    EXPECT(vj_keys_are(doc, top), "expected exactly kind, capacity, epoch, term, leader, grace, live, stale, vacant, slots:\n%s", R.out);
    EXPECT(vj_get(doc, "slots")->type == VJ_ARR && vj_count(vj_get(doc, "slots")) == 0,
           "empty table: expected slots []");
    EXPECT(vj_get(doc, "leader")->type == VJ_NULL, "no election yet: expected leader null:\n%s", R.out);

    uint32_t s[3];
    fill_table(hb, s);
    VT_RUN("inspect", f, "--json");
    EXPECT_EXIT(0, "inspect --json");
    EXPECT(!R.err[0], "inspect --json wrote on stderr: %s", R.err);
    doc = vj_parse(R.out);
    EXPECT(doc, "not JSON (%s):\n%s", vj_error, R.out);
    EXPECT(vj_keys_are(doc, top), "expected exactly kind, capacity, epoch, term, leader, grace, live, stale, vacant, slots:\n%s", R.out);
    uint64_t v;
    EXPECT(vj_is_str(vj_get(doc, "kind"), "heartbeat"), "expected kind heartbeat");
    EXPECT(vj_get(doc, "capacity")->type == VJ_NUM && vj_u64(vj_get(doc, "capacity"), &v) && v == 8,
           "expected capacity 8");
    EXPECT(vj_get(doc, "epoch")->type == VJ_NUM && vj_u64(vj_get(doc, "epoch"), &v) && v == 10,
           "expected epoch 10 as a number");
    struct vj *slots = vj_get(doc, "slots");
    EXPECT(slots->type == VJ_ARR && vj_count(slots) == 3, "expected 3 occupied slots, got %zu",
           vj_count(slots));
    struct vj *o = slots->child;
    if (check_slot(o, s[0], 1001, "worker", 10, "0x5", "live") ||
        check_slot(o->next, s[1], 1002, "coordinator", 10, "0x0", "live") ||
        check_slot(o->next->next, s[2], 1003, "worker", 0, "0x8000000000000000", "stale"))
        return 1;
    EXPECT(vj_u64(vj_get(doc, "live"), &v) && v == 2 && vj_u64(vj_get(doc, "stale"), &v) && v == 1 &&
               vj_u64(vj_get(doc, "vacant"), &v) && v == 5,
           "expected 2 live, 1 stale, 5 vacant:\n%s", R.out);

    /* What the text shows of the leader, the JSON carries too. */
    vigil_leader ld;
    EXPECT(vigil_leader_elect(hb, 5, &ld) >= 0, "election");
    VT_RUN("inspect", f, "--json");
    doc = vj_parse(R.out);
    EXPECT(doc, "not JSON (%s):\n%s", vj_error, R.out);
    const struct vj *l = vj_get(doc, "leader");
    EXPECT(l && l->type == VJ_OBJ && vj_u64(vj_get(l, "slot"), &v) && v == ld.slot &&
               vj_u64(vj_get(l, "pid"), &v) && v == ld.pid && vj_u64(vj_get(l, "term"), &v) && v == ld.term &&
               vj_get(l, "holds")->type == VJ_BOOL && vj_get(l, "holds")->b,
           "expected leader slot %u pid %u term %llu holding:\n%s", ld.slot, ld.pid,
           (unsigned long long)ld.term, R.out);
    EXPECT(vj_u64(vj_get(doc, "term"), &v) && v == ld.term, "expected term %llu:\n%s",
           (unsigned long long)ld.term, R.out);

    /* counters are numbers up to 2^53 and strings past it */
    uint64_t p53 = UINT64_C(1) << 53;
    atomic_store(&hb->hdr->epoch, p53);
    atomic_store(&hb->slots[s[0]].last_seen_epoch, p53);
    atomic_store(&hb->slots[s[1]].last_seen_epoch, p53 + 1);
    VT_RUN("inspect", f, "--json");
    doc = vj_parse(R.out);
    EXPECT(doc, "not JSON (%s):\n%s", vj_error, R.out);
    EXPECT(vj_get(doc, "epoch")->type == VJ_NUM && vj_u64(vj_get(doc, "epoch"), &v) && v == p53,
           "epoch 2^53 should be a number:\n%s", R.out);
    o = vj_get(doc, "slots")->child;
    EXPECT(vj_get(o, "last_seen_epoch")->type == VJ_NUM, "2^53 should be a number");
    EXPECT(vj_get(o->next, "last_seen_epoch")->type == VJ_STR &&
               vj_u64(vj_get(o->next, "last_seen_epoch"), &v) && v == p53 + 1,
           "2^53 + 1 should be the string \"%llu\":\n%s", (unsigned long long)(p53 + 1), R.out);
    atomic_store(&hb->hdr->epoch, UINT64_MAX);
    VT_RUN("inspect", f, "--json");
    doc = vj_parse(R.out);
    EXPECT(doc && vj_is_str(vj_get(doc, "epoch"), "18446744073709551615"),
           "epoch 2^64 - 1 should be a string:\n%s", R.out);
    vigil_hb_close(hb);
    return 0;
}

/* Writes `size` bytes of `data` to a new file at path. */
static void write_file(const char *path, const void *data, size_t size)
{
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
}

/* Runs inspect (human and JSON) on path; expects exit 1, nothing on
 * stdout, and one line "vigil: PATH: ..." holding `reason`. */
static int expect_bad(const char *path, const char *reason)
{
    const char *modes[] = { NULL, "--json" };
    for (int m = 0; m < 2; m++) {
        vt_runv(10000, (const char *const[]){ "inspect", path, modes[m], NULL });
        EXPECT_EXIT(1, path);
        char head[600];
        snprintf(head, sizeof(head), "vigil: %s: ", path);
        EXPECT(strncmp(R.err, head, strlen(head)) == 0 && vt_count_lines(R.err) == 1,
               "expected one line starting '%s', got '%s'", head, R.err);
        EXPECT(strstr(R.err, reason), "%s: expected the reason '%s', got '%s'", path, reason, R.err);
        EXPECT(!R.out[0], "%s: printed on stdout: %s", path, R.out);
    }
    return 0;
}

static int test_inspect_bad_files(void)
{
    if (expect_bad(vt_path("missing.hb"), strerror(ENOENT)))
        return 1;
    write_file(vt_path("empty"), "", 0);
    if (expect_bad(vt_path("empty"), "0 bytes, too short"))
        return 1;
    static const char text[] = "this is not a vigil file, but it is long enough to hold a header.\n";
    write_file(vt_path("text"), text, sizeof(text) - 1);
    if (expect_bad(vt_path("text"), "no vigil magic"))
        return 1;
    if (expect_bad(vt_tmpdir(), "a directory, not a regular file"))
        return 1;
    EXPECT(mkfifo(vt_path("fifo"), 0600) == 0, "mkfifo");
    if (expect_bad(vt_path("fifo"), "a FIFO, not a regular file")) /* and no hang on open */
        return 1;
    EXPECT(symlink("json.hb", vt_path("link.hb")) == 0, "symlink");
    if (expect_bad(vt_path("link.hb"), "a symbolic link")) /* O_NOFOLLOW, said plainly */
        return 1;

    /* a good table, then each header field broken in turn */
    const char *good = vt_path("good.hb");
    vigil_hb_close(make_hb(good, 4));
    unsigned char img[64 + 4 * 64];
    FILE *fp = fopen(good, "rb");
    EXPECT(fp && fread(img, 1, sizeof(img), fp) == sizeof(img), "read good.hb");
    fclose(fp);
    const char *bad = vt_path("bad.hb");
    unsigned char b[sizeof(img) + 64];

    memcpy(b, img, sizeof(img));
    b[8] = 9; /* version */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "made by a newer vigil (layout version 9"))
        return 1;
    memcpy(b, img, sizeof(img));
    b[8] = 5; /* a file of the layout before the barrier's release record */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "made by an older vigil (layout version 5; this vigil reads only 6): re-create it"))
        return 1;
    memcpy(b, img, sizeof(img));
    b[12] = 77; /* kind */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "unknown kind 77"))
        return 1;
    memcpy(b, img, sizeof(img));
    b[16] = 5; /* capacity 5 in a file sized for 4 */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "a heartbeat table of capacity 5 has 384"))
        return 1;
    memcpy(b, img, sizeof(img));
    b[16] = 0, b[17] = 0, b[18] = 0, b[19] = 0x80; /* capacity 2^31 */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "past the limit"))
        return 1;
    memcpy(b, img, sizeof(img));
    memset(b + 16, 0, 4); /* capacity 0 */
    write_file(bad, b, sizeof(img));
    if (expect_bad(bad, "capacity 0"))
        return 1;
    write_file(bad, img, sizeof(img) - 1); /* truncated */
    if (expect_bad(bad, "319 bytes"))
        return 1;
    memcpy(b, img, sizeof(img));
    memset(b + sizeof(img), 0, 64);
    write_file(bad, b, sizeof(img) + 64); /* grown */
    if (expect_bad(bad, "384 bytes"))
        return 1;

    /* Hostile bytes everywhere past the magic: inspect describes or
     * refuses, and never crashes. A fixed seed keeps it reproducible. */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 150; round++) {
        memcpy(b, img, sizeof(img));
        int flips = 1 + round % 12;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = 8 + (size_t)(x % (sizeof(img) - 8));
            b[at] = (unsigned char)(x >> 32);
        }
        write_file(bad, b, sizeof(img));
        vt_runv(10000, (const char *const[]){ "inspect", bad, round % 2 ? "--json" : NULL, NULL });
        EXPECT(R.rc == 0 || R.rc == 1, "round %d: inspect of a scribbled file exited %d", round, R.rc);
        EXPECT(R.rc == 0 || (vt_count_lines(R.err) == 1 && !R.out[0]),
               "round %d: a refusal should be one line on stderr, got '%s'", round, R.err);
        if (R.rc == 0 && round % 2)
            EXPECT(vj_parse(R.out), "round %d: --json is not JSON (%s):\n%s", round, vj_error, R.out);
    }
    return 0;
}

/* inspect --check: 0 when every occupied slot is live, 3 when one is
 * stale or none is occupied, as `systemctl is-active` answers. */
static int test_inspect_check(void)
{
    const char *f = vt_path("check.hb");
    vigil_hb *hb = make_hb(f, 4);
    VT_RUN("inspect", f, "--check");
    EXPECT_EXIT(3, "--check of an empty table");
    uint32_t a, b;
    EXPECT_RC(vigil_hb_register(hb, 11, &a), 0);
    EXPECT_RC(vigil_hb_register(hb, 12, &b), 0);
    VT_RUN("inspect", f, "--check", "--json");
    EXPECT_EXIT(0, "--check with every slot live");
    EXPECT(vj_parse(R.out), "--check --json still prints the document (%s)", vj_error);
    for (int i = 0; i < 6; i++)
        vigil_hb_tick(hb);
    vigil_hb_beat(hb, a);
    VT_RUN("inspect", f, "--check");
    EXPECT_EXIT(3, "--check with a stale slot");
    VT_RUN("inspect", f, "--check", "--grace", "10");
    EXPECT_EXIT(0, "--check with a wider grace");
    vigil_hb_close(hb);
    return 0;
}

/* A permission error says which permission is missing and whose the
 * file is. Run as an unprivileged user (root reads everything): skipped
 * when this test is not root and so cannot become one, or when that user
 * cannot reach the built tool. */
static int permission_errors_as_user(void *arg)
{
    const char *const *paths = arg;
    vt_runv(10000, (const char *const[]){ "inspect", paths[0], NULL });
    bool inspect_ok = R.rc == 1 && strstr(R.err, "no read permission (mode 0600, owner uid 0") &&
                      strstr(R.err, "running as uid 65534") && vt_count_lines(R.err) == 1;
    if (!inspect_ok)
        fprintf(stderr, "inspect as nobody: exit %d, '%s'\n", R.rc, R.err);
    vt_runv(10000, (const char *const[]){ "tick", paths[0], "--count", "1", NULL });
    bool tick_ok = R.rc == 1 && strstr(R.err, "no read and write permission");
    if (!tick_ok)
        fprintf(stderr, "tick as nobody: exit %d, '%s'\n", R.rc, R.err);
    /* Read permission alone is enough to look. */
    vt_runv(10000, (const char *const[]){ "inspect", paths[1], NULL });
    bool look_ok = R.rc == 0;
    if (!look_ok)
        fprintf(stderr, "inspect of a 0444 table as nobody: exit %d, '%s'\n", R.rc, R.err);
    return inspect_ok && tick_ok && look_ok ? 0 : 1;
}

static int test_permission_errors(void)
{
    static char f[512], readable[512];
    snprintf(f, sizeof(f), "%s", vt_path("private.hb"));
    vigil_hb_close(make_hb(f, 2));
    snprintf(readable, sizeof(readable), "%s", vt_path("readable.hb"));
    vigil_hb_close(make_hb(readable, 2));
    EXPECT(chmod(readable, 0444) == 0 && chmod(f, 0600) == 0, "chmod: %s", strerror(errno));
    static const char *paths[2] = { f, readable };
    int rc = vt_as_nobody(permission_errors_as_user, paths);
    EXPECT(rc == 0 || rc == VT_SKIP, "permission errors did not say which permission");
    return rc;
}

static int test_tick_count(void)
{
    const char *f = vt_path("tick.hb");
    vigil_hb *hb = make_hb(f, 2);
    vigil_hb_tick(hb);
    VT_RUN("tick", f, "--count", "5", "--interval", "1");
    EXPECT_EXIT(0, "tick --count 5");
    EXPECT(vigil_hb_epoch(hb) == 6, "expected epoch 1 + 5 = 6, got %llu",
           (unsigned long long)vigil_hb_epoch(hb));
    /* Changes only: the start and the end, nothing in between. */
    EXPECT(strcmp(R.out, "epoch 2: ticking every 1ms (grace 5): 0 live, 0 stale\n"
                         "epoch 6: stopped after 5 ticks\n") == 0,
           "expected a start line and a stop line, got '%s'", R.out);
    VT_RUN("tick", f, "--count", "5", "--interval", "1ms", "--verbose");
    EXPECT_EXIT(0, "tick --count 5 --verbose");
    EXPECT(strstr(R.out, "epoch 8\nepoch 9\nepoch 10\nepoch 11\nepoch 11: stopped after 5 ticks\n"),
           "--verbose: expected every epoch one a line, got '%s'", R.out);
    VT_RUN("tick", f, "--count=1", "--quiet");
    EXPECT_EXIT(0, "tick --count 1 --quiet");
    EXPECT(!R.out[0] && !R.err[0], "--quiet printed '%s' / '%s'", R.out, R.err);
    EXPECT(vigil_hb_epoch(hb) == 12, "expected epoch 12, got %llu", (unsigned long long)vigil_hb_epoch(hb));
    VT_RUN("tick", f, "--count=1", "--quiet", "--verbose");
    EXPECT_EXIT(2, "tick --quiet --verbose");
    vigil_hb_close(hb);

    VT_RUN("tick", vt_path("none.hb"), "--count", "1");
    EXPECT_EXIT(1, "tick of a missing file");
    EXPECT(strstr(R.err, strerror(ENOENT)), "expected ENOENT, got '%s'", R.err);
    VT_RUN("tick", vt_path("none.hb"), "--count", "1", "--quiet");
    EXPECT_EXIT(1, "tick --quiet of a missing file");
    EXPECT(strstr(R.err, strerror(ENOENT)), "--quiet hid the error: '%s'", R.err);
    VT_RUN("tick", vt_path("text"), "--count", "1");
    EXPECT_EXIT(1, "tick of a text file");
    return 0;
}

/* A running ticker logs the table's changes as they happen and nothing
 * in between: a slot registering, the slot going stale, another ticker
 * joining. The test makes each change itself and reads the line it
 * brings; the lines stay few however many epochs pass. */
static int test_tick_logs_changes(void)
{
    const char *f = vt_path("tick-log.hb");
    vigil_hb *hb = make_hb(f, 4);
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "tick", f, "--interval", "1ms", "--grace", "2") == 0, "spawn");
    bool started = vt_read_until(&p, "0 live, 0 stale\n", 10000);
    uint32_t s;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &s), 0);
    /* never beaten: live for 2 epochs, then stale */
    bool live = vt_read_until(&p, "1 live, 0 stale (was 0 live, 0 stale)\n", 10000);
    bool stale = vt_read_until(&p, "0 live, 1 stale (was 1 live, 0 stale)\n", 10000);
    uint64_t e0 = vigil_hb_epoch(hb);
    bool many = VT_WAIT_FOR(vigil_hb_epoch(hb) >= e0 + 50, 10000);
    /* A second ticker on the same table: said once, not per epoch. */
    struct vt_proc q;
    EXPECT(VT_SPAWN(&q, "tick", f, "--interval", "1ms", "--quiet") == 0, "spawn the second ticker");
    bool shared = vt_read_until(&p, "another process ticks this table too", 10000);
    uint64_t e1 = vigil_hb_epoch(hb);
    bool more = VT_WAIT_FOR(vigil_hb_epoch(hb) >= e1 + 50, 10000);
    int rq = vt_stop(&q, SIGTERM, 10000);
    kill(p.pid, SIGTERM);
    bool stopped = vt_read_until(&p, ": stopped after ", 10000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(started && live && stale, "the ticker did not log the slot's changes:\n%s", p.buf);
    EXPECT(many && more, "the tickers stopped ticking");
    EXPECT(shared, "the ticker did not say another ticked the table too:\n%s", p.buf);
    const char *once = strstr(p.buf, "another process");
    EXPECT(!strstr(once + 1, "another process"), "another ticker said more than once:\n%s", p.buf);
    EXPECT(rc == 0 && rq == 0, "expected exit 0 on SIGTERM, got %d and %d", rc, rq);
    EXPECT(stopped, "no stop line:\n%s", p.buf);
    EXPECT(vt_count_lines(p.buf) <= 5, "expected a handful of lines over %llu epochs, got %d:\n%s",
           (unsigned long long)vigil_hb_epoch(hb), vt_count_lines(p.buf), p.buf);
    vigil_hb_close(hb);
    return 0;
}

/* A long-running command prints its first line through a pipe while it
 * runs (it flushes), and a stop signal ends it with exit 0, even in the
 * middle of a long sleep. */
static int stops_cleanly(const char *const *args, const char *first, int sig)
{
    struct vt_proc p;
    EXPECT(vt_spawnv(&p, args) == 0, "spawn");
    bool seen = vt_read_until(&p, first, 10000);
    int rc = vt_stop(&p, sig, 10000);
    EXPECT(seen, "%s: expected '%s' through the pipe while it ran, got '%s'", args[0], first, p.buf);
    EXPECT(rc == 0, "%s: expected exit 0 on signal %d, got %d", args[0], sig, rc);
    return 0;
}

static int test_tick_stops_on_signal(void)
{
    const char *f = vt_path("tick-sig.hb");
    vigil_hb *hb = make_hb(f, 2);
    if (stops_cleanly((const char *const[]){ "tick", f, "--interval", "3600000", NULL }, "epoch 1: ticking every 1h",
                      SIGTERM))
        return 1;
    if (stops_cleanly((const char *const[]){ "tick", f, "--interval", "1h", NULL }, "epoch 2: ticking every 1h",
                      SIGINT))
        return 1;
    EXPECT(vigil_hb_epoch(hb) == 2, "expected one tick per run, epoch %llu",
           (unsigned long long)vigil_hb_epoch(hb));
    /* a quick ticker keeps printing, one line per tick */
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "tick", f, "--interval", "2", "--verbose") == 0, "spawn");
    bool seen = vt_read_until(&p, "epoch 6\n", 10000);
    int rc = vt_stop(&p, SIGTERM, 10000);
    EXPECT(seen && rc == 0, "fast ticker: saw '%s', exit %d", p.buf, rc);
    vigil_hb_close(hb);
    return 0;
}

static int test_watch(void)
{
    const char *f = vt_path("watch.hb");
    vigil_hb *hb = make_hb(f, 4);
    uint32_t s;
    vigil_hb_register(hb, 4242, &s);
    if (stops_cleanly((const char *const[]){ "watch", f, "--interval", "3600000", NULL },
                      "1 live, 0 stale, 3 vacant", SIGTERM))
        return 1;
    /* refreshes show changes as they happen */
    struct vt_proc p;
    EXPECT(VT_SPAWN(&p, "watch", f, "--interval", "20", "--grace", "2") == 0, "spawn");
    bool first = vt_read_until(&p, "4242", 10000);
    for (int i = 0; i < 3; i++)
        vigil_hb_tick(hb);
    bool stale = vt_read_until(&p, "0 live, 1 stale", 10000);
    int rc = vt_stop(&p, SIGINT, 10000);
    EXPECT(first && stale, "watch never showed the slot go stale:\n%s", p.buf);
    EXPECT(rc == 0, "watch: expected exit 0 on SIGINT, got %d", rc);
    vigil_hb_close(hb);

    VT_RUN("watch", vt_path("none.hb"));
    EXPECT_EXIT(1, "watch of a missing file");
    EXPECT(vt_count_lines(R.err) == 1 && strstr(R.err, strerror(ENOENT)), "got '%s'", R.err);
    return 0;
}

/* The commands `vigil --help` lists, in its order, a command with
 * sub-commands ("group join|watch|ls") as one entry each ("group join"):
 * how many (at most max). */
static int overview_commands(char names[][32], int max)
{
    if (VT_RUN("--help") != 0)
        return 0;
    int n = 0;
    for (const char *l = R.out; l && *l && n < max; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char cmd[16], sub[64];
        int k = sscanf(l, "  vigil %15s %63s", cmd, sub);
        if (k < 1)
            continue;
        if (k < 2 || !strchr(sub, '|') || sub[0] < 'a' || sub[0] > 'z') {
            snprintf(names[n++], 32, "%s", cmd);
            continue;
        }
        for (char *save, *t = strtok_r(sub, "|", &save); t && n < max; t = strtok_r(NULL, "|", &save))
            snprintf(names[n++], 32, "%s %.14s", cmd, t);
    }
    return n;
}

/* `vigil NAME --help`, NAME one word or a command and a sub-command. */
static int run_help(const char *name)
{
    char first[32];
    const char *space = strchr(name, ' ');
    if (!space)
        return VT_RUN(name, "--help");
    snprintf(first, sizeof(first), "%.*s", (int)(space - name), name);
    return VT_RUN(first, space + 1, "--help");
}

/* Every command's usage line names exactly the options its help lists,
 * and an option the help gives a default for is bracketed as optional. */
static int test_usage_lines_agree(void)
{
    char names[32][32];
    int ncmds = overview_commands(names, 32);
    EXPECT(ncmds > 5, "vigil --help listed %d commands", ncmds);
    int checked = 0;
    for (int c = 0; c < ncmds; c++) {
        const char *name = names[c];
        static char help[sizeof(R.out)];
        run_help(name);
        EXPECT_EXIT(0, name);
        memcpy(help, R.out, sizeof(help));
        char *usage = strstr(help, "usage: vigil ");
        char *nl = usage ? strchr(usage, '\n') : NULL;
        char *opts = strstr(help, "\noptions:\n");
        EXPECT(usage && nl && opts, "vigil %s --help: no usage line or options section:\n%s", name, help);
        *nl = '\0';
        /* Each option listed under "options:". */
        for (char *o = strstr(opts, "\n  --"); o; o = strstr(o + 1, "\n  --")) {
            char opt[48];
            if (sscanf(o + 5, "%47[a-z0-9-]", opt) != 1)
                continue;
            char *eol = strchr(o + 1, '\n');
            size_t len = eol ? (size_t)(eol - o) : strlen(o);
            bool has_default = memmem(o, len, "(default", 8) != NULL;
            char flag[64], bracketed[64];
            snprintf(flag, sizeof(flag), "--%s", opt);
            snprintf(bracketed, sizeof(bracketed), "[--%s", opt);
            char *at = strstr(usage, flag);
            EXPECT(at, "vigil %s: --%s is in the help but not in the usage line '%s'", name, opt, usage);
            if (has_default)
                EXPECT(strstr(usage, bracketed) || (at > usage && at[-1] == '|' ) || strstr(usage, "[("),
                       "vigil %s: --%s has a default but is not optional in '%s'", name, opt, usage);
            checked++;
        }
        /* And each option of the usage line is in the help. */
        for (char *u = strstr(usage, "--"); u; u = strstr(u + 2, "--")) {
            char opt[48];
            if (sscanf(u + 2, "%47[a-z0-9-]", opt) != 1 || !opt[0])
                continue;
            char want[64];
            snprintf(want, sizeof(want), "\n  --%s", opt);
            EXPECT(strstr(opts, want), "vigil %s: --%s is in the usage line but not under options", name, opt);
        }
    }
    EXPECT(checked > 10, "only %d options checked: the overview format changed?", checked);
    return 0;
}

/* vigil(1) documents every option every command's --help lists, and the
 * commands' usage lines' placeholders (DURATION, not MS). */
static int test_man_page_agrees(void)
{
    static char man[1 << 17];
    char path[1024];
    snprintf(path, sizeof(path), "%s/man/man1/vigil.1", VIGIL_SOURCE_DIR);
    vt_slurp(path, man, sizeof(man));
    EXPECT(man[0], "%s: missing", path);
    EXPECT(!strstr(man, "\\fIMS\\fP") && !strstr(man, "\" MS\""), "vigil(1) still calls a duration MS");
    char names[32][32];
    int ncmds = overview_commands(names, 32);
    int checked = 0;
    for (int c = 0; c < ncmds; c++) {
        const char *name = names[c];
        run_help(name);
        char *opts = strstr(R.out, "\noptions:\n");
        for (char *o = opts ? strstr(opts, "\n  --") : NULL; o; o = strstr(o + 1, "\n  --")) {
            char opt[48], want[64];
            if (sscanf(o + 5, "%47[a-z0-9-]", opt) != 1)
                continue;
            /* groff writes a dash as \- */
            size_t n = 0;
            n += (size_t)snprintf(want + n, sizeof(want) - n, "\\-\\-");
            for (const char *c = opt; *c && n + 3 < sizeof(want); c++)
                n += (size_t)snprintf(want + n, sizeof(want) - n, *c == '-' ? "\\-" : "%c", *c);
            EXPECT(strstr(man, want), "vigil %s --%s is not in vigil(1)", name, opt);
            checked++;
        }
    }
    EXPECT(checked > 20, "only %d options checked", checked);
    return 0;
}

/* Whether `word` occurs in text as a whole word (not inside a longer
 * name such as last_seen_epoch for epoch). */
static bool has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        bool before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (before && after)
            return true;
    }
    return false;
}

/* Every member name in v and below it, checked against the prose. */
static int keys_documented(const struct vj *v, const char *prose, const char *what)
{
    for (const struct vj *c = v ? v->child : NULL; c; c = c->next) {
        if (c->key)
            EXPECT(has_word(prose, c->key), "%s: member \"%s\" is not described in vigil(1) JSON OUTPUT", what,
                   c->key);
        if (keys_documented(c, prose, what))
            return 1;
    }
    return 0;
}

/* vigil(1)'s JSON OUTPUT describes, in its prose (the examples left out),
 * every member inspect --json prints for each kind of file (a table with
 * a leader and slots, a barrier, a lease store with a lease) and every
 * member of a failover --json line. */
static int test_man_page_json_fields(void)
{
    static char man[1 << 17], prose[1 << 17];
    char path[1024];
    snprintf(path, sizeof(path), "%s/man/man1/vigil.1", VIGIL_SOURCE_DIR);
    vt_slurp(path, man, sizeof(man));
    char *sec = strstr(man, ".SH JSON OUTPUT"), *end = sec ? strstr(sec, ".SH EXIT STATUS") : NULL;
    EXPECT(sec && end, "vigil(1) has no JSON OUTPUT section");
    size_t n = 0;
    bool example = false;
    for (char *line = sec; line < end; line = strchr(line, '\n') + 1) {
        size_t len = (size_t)(strchr(line, '\n') - line) + 1;
        if (!strncmp(line, ".EX", 3))
            example = true;
        else if (!strncmp(line, ".EE", 3))
            example = false;
        else if (!example && n + len < sizeof(prose))
            memcpy(prose + n, line, len), n += len;
    }
    prose[n] = '\0';

    const char *t = vt_path("json-fields.hb"), *b = vt_path("json-fields.br"), *l = vt_path("json-fields.ls");
    vigil_hb *hb = make_hb(t, 4);
    uint32_t me, gone;
    vigil_leader ld;
    EXPECT_RC(vigil_hb_register(hb, (uint32_t)getpid(), &me), 0);
    EXPECT_RC(vigil_hb_mark_in_flight(hb, me, 2), 0);
    EXPECT(vigil_leader_elect(hb, 5, &ld) >= 0, "election");
    EXPECT_RC(vigil_hb_register(hb, 4194305u, &gone), 0); /* above PID_MAX_LIMIT: no process */
    EXPECT_RC(vigil_hb_mark_in_flight(hb, gone, 4), 0);
    VT_RUN("create", b, "--kind", "barrier", "--table", t);
    EXPECT_EXIT(0, "create --kind barrier");
    vigil_leases *ls = NULL;
    vigil_lease lease;
    EXPECT_RC(vigil_leases_create(l, 4, &ls), 0);
    EXPECT_RC(vigil_leases_acquire(ls, "job", "me", 60000, &lease), 0);

    const char *files[] = { t, b, l };
    for (int i = 0; i < 3; i++) {
        VT_RUN("inspect", files[i], "--json");
        EXPECT_EXIT(0, "inspect --json");
        struct vj *o = vj_parse(R.out);
        EXPECT(o && o->type == VJ_OBJ, "inspect --json %s: not a JSON object (%s): %s", files[i], vj_error, R.out);
        if (keys_documented(o, prose, "inspect --json"))
            return 1;
    }
    for (int k = 0; k < 3; k++) /* stale past grace 0 for the scan by epochs */
        vigil_hb_tick(hb);
    VT_RUN("failover", t, "--once", "--json", "--epochs-only", "--grace", "0");
    EXPECT_EXIT(0, "failover --once --json");
    EXPECT(vt_count_lines(R.out) >= 1, "failover --json reclaimed nothing: '%s' / '%s'", R.out, R.err);
    char *nl = strchr(R.out, '\n');
    *nl = '\0';
    struct vj *o = vj_parse(R.out);
    EXPECT(o && o->type == VJ_OBJ, "failover --json: not a JSON object (%s): %s", vj_error, R.out);
    if (keys_documented(o, prose, "failover --json"))
        return 1;
    vigil_leases_close(ls);
    vigil_hb_close(hb);
    return 0;
}

/* --version and -V: the version and the layout it reads, exit 0. */
static int test_version(void)
{
    VT_RUN("--version");
    EXPECT_EXIT(0, "vigil --version");
    EXPECT(strncmp(R.out, "vigil ", 6) == 0 && strstr(R.out, "layout version"), "--version printed '%s'", R.out);
    static char first[sizeof(R.out)];
    memcpy(first, R.out, sizeof(first));
    VT_RUN("-V");
    EXPECT_EXIT(0, "vigil -V");
    EXPECT(strcmp(first, R.out) == 0, "-V printed '%s', --version '%s'", R.out, first);
    VT_RUN("--version", "extra");
    EXPECT_EXIT(2, "vigil --version extra");
    return 0;
}

VT_MAIN(VT_CASE(test_help), VT_CASE(test_usage_errors), VT_CASE(test_etcdctl_habits), VT_CASE(test_create),
        VT_CASE(test_inspect_human), VT_CASE(test_inspect_json), VT_CASE(test_inspect_bad_files),
        VT_CASE(test_tick_count), VT_CASE(test_tick_logs_changes), VT_CASE(test_tick_stops_on_signal), VT_CASE(test_watch),
        VT_CASE(test_usage_lines_agree), VT_CASE(test_man_page_agrees), VT_CASE(test_man_page_json_fields), VT_CASE(test_version), VT_CASE(test_permission_errors),
        VT_CASE(test_inspect_check))
