/* SPDX-License-Identifier: MIT */
/*
 * Description: lease store files: create never clobbers and publishes mode
 * 0600 (or the mode asked for); open refuses every bad file (missing,
 * symlink, directory, FIFO, short, wrong magic, version, kind, capacity,
 * entry size, flags, a size that disagrees with the header); a handle keeps
 * the bounds it checked against a peer scribbling the header; hostile
 * entry contents give errors, never a crash or a hang.
 */
#include "testutil.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "leases_internal.h"

static const char *make_store(const char *name, uint32_t cap)
{
    vigil_leases_close(vt_leases_fresh(name, cap));
    const char *path = vt_path(name);
    /* vt_path's buffers rotate: keep a copy that outlives eight more calls. */
    static char keep[64][512];
    static unsigned next;
    char *copy = keep[next++ % 64];
    snprintf(copy, sizeof(keep[0]), "%s", path);
    return copy;
}

static int patch(const char *path, off_t off, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = pwrite(fd, bytes, n, off);
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

static int patch_u32(const char *path, off_t off, uint32_t v)
{
    return patch(path, off, &v, sizeof(v));
}

/* Opens and expects `want`, and that a failed open left *out alone. */
static int expect_open(const char *path, int want, const char *what)
{
    vigil_leases *ls = (vigil_leases *)&ls;
    int rc = vigil_leases_open(path, &ls);
    EXPECT(rc == want, "%s: expected %d (%s), got %d (%s)", what, want, vigil_strerror(want), rc,
           vigil_strerror(rc));
    if (rc == 0)
        vigil_leases_close(ls);
    else
        EXPECT(ls == (vigil_leases *)&ls, "%s: a failed open wrote its output", what);
    return 0;
}

static int test_create_rules(void)
{
    const char *path = make_store("made.leases", 8);
    struct stat st;
    EXPECT(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600, "expected mode 0600, got %o",
           (unsigned)(st.st_mode & 07777));
    EXPECT(st.st_size == 128 + 8 * 256, "expected size %d, got %lld", 128 + 8 * 256, (long long)st.st_size);
    vigil_leases *ls = NULL;
    EXPECT_RC(vigil_leases_create(path, 8, &ls), -EEXIST);
    EXPECT_RC(vigil_leases_create(path, 4, &ls), -EEXIST);
    EXPECT(ls == NULL, "a failed create wrote its output");
    EXPECT_RC(vigil_leases_create(vt_path("zero.leases"), 0, &ls), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_create(vt_path("huge.leases"), VIGIL_LEASES_MAX_CAPACITY + 1, &ls), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_create(NULL, 4, &ls), -EINVAL);
    EXPECT_RC(vigil_leases_create(vt_path("x.leases"), 4, NULL), -EINVAL);
    EXPECT_RC(vigil_leases_create_mode(vt_path("mode.leases"), 4, 0640, &ls), 0);
    vigil_leases_close(ls);
    EXPECT(stat(vt_path("mode.leases"), &st) == 0 && (st.st_mode & 07777) == 0640,
           "expected mode 0640, got %o", (unsigned)(st.st_mode & 07777));
    EXPECT_RC(vigil_leases_create_mode(vt_path("badmode.leases"), 4, 010000, &ls), -EINVAL);
    /* A dangling symlink is a name that exists. */
    EXPECT(symlink(vt_path("nowhere"), vt_path("dangling.leases")) == 0, "symlink failed");
    EXPECT_RC(vigil_leases_create(vt_path("dangling.leases"), 4, &ls), -EEXIST);
    /* No temporary file is left behind. */
    EXPECT(access(vt_path("nowhere"), F_OK) != 0, "create followed the symlink");
    vigil_file_info fi;
    EXPECT_RC(vigil_file_probe(path, &fi), 0);
    EXPECT(fi.kind == VIGIL_KIND_LEASES && fi.capacity == 8 && fi.version == VIGIL_LAYOUT_VERSION,
           "probe: kind %u capacity %u version %u", fi.kind, fi.capacity, fi.version);
    return 0;
}

static int test_open_refuses(void)
{
    if (expect_open(vt_path("missing.leases"), -ENOENT, "missing"))
        return 1;
    const char *good = make_store("good.leases", 4);
    if (expect_open(good, 0, "good"))
        return 1;
    EXPECT(symlink(good, vt_path("link.leases")) == 0, "symlink failed");
    if (expect_open(vt_path("link.leases"), -ELOOP, "symlink"))
        return 1;
    EXPECT(mkdir(vt_path("dir.leases"), 0700) == 0, "mkdir failed");
    vigil_leases *ls;
    EXPECT(vigil_leases_open(vt_path("dir.leases"), &ls) < 0, "a directory was opened");
    EXPECT(mkfifo(vt_path("fifo.leases"), 0600) == 0, "mkfifo failed");
    if (expect_open(vt_path("fifo.leases"), VIGIL_EBADFILE, "fifo"))
        return 1;
    EXPECT_RC(vigil_leases_open(NULL, &ls), -EINVAL);
    EXPECT_RC(vigil_leases_open(good, NULL), -EINVAL);

    /* Short files. */
    int fd = open(vt_path("empty.leases"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    close(fd);
    if (expect_open(vt_path("empty.leases"), VIGIL_EBADFILE, "empty"))
        return 1;
    const char *shorty = make_store("short.leases", 4);
    EXPECT(truncate(shorty, 40) == 0, "truncate");
    if (expect_open(shorty, VIGIL_EBADFILE, "shorter than a header"))
        return 1;

    /* The size must be exactly header + capacity entries. */
    const char *trunc = make_store("trunc.leases", 4);
    EXPECT(truncate(trunc, 128 + 3 * 256) == 0, "truncate");
    if (expect_open(trunc, VIGIL_EBADFILE, "one entry short"))
        return 1;
    const char *longer = make_store("long.leases", 4);
    EXPECT(truncate(longer, 128 + 4 * 256 + 1) == 0, "truncate");
    if (expect_open(longer, VIGIL_EBADFILE, "a byte long"))
        return 1;

    /* Header fields, one at a time. */
    struct { const char *name; off_t off; uint32_t value; } bad[] = {
        { "magic", 1, 0x4c494756 },             /* "VGIL" over "VIGI" */
        { "version", 8, VIGIL_LAYOUT_VERSION + 1 },
        { "version 1", 8, 1 },
        { "version 0", 8, 0 },
        { "kind heartbeat", 12, VIGIL_KIND_HEARTBEAT },
        { "kind barrier", 12, VIGIL_KIND_BARRIER },
        { "kind unknown", 12, 99 },
        { "capacity 0", 16, 0 },
        { "capacity larger than the file", 16, 5 },
        { "capacity smaller than the file", 16, 3 },
        { "capacity huge", 16, 0xffffffffu },
        { "flags", 20, 1 },
        { "version 3 (before the lock waits)", 8, 3 },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "bad%zu.leases", i);
        const char *p = make_store(name, 4);
        EXPECT(patch_u32(p, bad[i].off, bad[i].value) == 0, "patch %s", bad[i].name);
        if (expect_open(p, VIGIL_EBADFILE, bad[i].name))
            return 1;
    }
    /* A heartbeat table is not a lease store, nor the reverse. */
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(vt_path("table.hb"), 4, &hb), 0);
    vigil_hb_close(hb);
    if (expect_open(vt_path("table.hb"), VIGIL_EBADFILE, "heartbeat table"))
        return 1;
    EXPECT_RC(vigil_hb_open(good, 0, &hb), VIGIL_EBADFILE);
    return 0;
}

/* A peer rewriting the header after open moves none of this handle's
 * bounds; reopening then refuses the file. */
static int test_scribbled_header(void)
{
    const char *path = make_store("scribble.leases", 4);
    vigil_leases *ls, *peer;
    EXPECT_RC(vigil_leases_open(path, &ls), 0);
    EXPECT_RC(vigil_leases_open(path, &peer), 0);
    peer->hdr->capacity = 0x7fffffff;
    atomic_store(&peer->hdr->bind_waiters, 0xffffffffu);
    memset(peer->hdr->magic, 0, 8);
    EXPECT(vigil_leases_capacity(ls) == 4, "capacity followed the scribble: %u", vigil_leases_capacity(ls));
    vigil_lease_info info;
    EXPECT_RC(vigil_leases_entry(ls, 4, &info), VIGIL_ERANGE);
    EXPECT_RC(vigil_leases_entry(ls, 1000000, &info), VIGIL_ERANGE);
    vigil_lease l[5];
    char key[16];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "s%d", i);
        EXPECT_RC(vigil_leases_acquire(ls, key, "o", 10000, &l[i]), 0);
    }
    EXPECT_RC(vigil_leases_acquire(ls, "s4", "o", 10000, &l[4]), VIGIL_EFULL);
    /* A lease naming an entry past the end is looked up by key instead. */
    vigil_lease far = l[0];
    far.id = 1 << 30;
    EXPECT_RC(vigil_leases_renew(ls, &far), 0);
    vigil_leases_close(peer);
    vigil_leases_close(ls);
    if (expect_open(path, VIGIL_EBADFILE, "scribbled magic"))
        return 1;
    return 0;
}

static vigil_leases *hooked;
static uint64_t grabbed;

/* Records this process's lock word while it holds an entry. */
static void grab_lock_word(int point)
{
    if (point != LP_ENTRY_LOCKED)
        return;
    for (uint32_t i = 0; i < hooked->capacity; i++) {
        uint64_t c = atomic_load(&hooked->entries[i].ctl);
        if (c & CTL_LOCKED)
            grabbed = c;
    }
}

/* Hostile entry contents: every call returns, boundedly, with an error or
 * a sound answer. */
static int test_hostile_entries(void)
{
    const char *path = make_store("hostile.leases", 8);
    vigil_leases *ls;
    EXPECT_RC(vigil_leases_open(path, &ls), 0);
    vigil_lease a;
    EXPECT_RC(vigil_leases_acquire(ls, "h", "o", 10000, &a), 0);
    struct vigil_leases_entry *e = &ls->entries[a.id - 1];
    /* A lock word with pid 0 belongs to no process: taken over. */
    atomic_store(&e->ctl, CTL_LOCKED);
    vigil_lease b;
    uint64_t t0 = vt_now_ms();
    EXPECT_RC(vigil_leases_acquire(ls, "h", "o2", 10000, &b), 0);
    /* Key without a NUL, garbage flags and hash, a huge TTL. */
    e = &ls->entries[b.id - 1];
    for (int i = 0; i < 16; i++)
        atomic_store(&e->key[i], ~UINT64_C(0));
    atomic_store(&e->bound, 0xdeadbeef);
    atomic_store(&e->ttl_ms, ~UINT64_C(0));
    EXPECT_RC(vigil_leases_renew(ls, &b), VIGIL_ELOST);
    vigil_lease_info info;
    int rc = vigil_leases_entry(ls, (uint32_t)(b.id - 1), &info);
    EXPECT(rc == VIGIL_EVACANT && info.key[127] == 0, "garbage entry view: %d", rc);
    /* The garbage entry is reusable. */
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof(key), "n%d", i);
        vigil_lease c;
        rc = vigil_leases_acquire(ls, key, "o", 10000, &c);
        EXPECT(rc == 0 || rc == VIGIL_EFULL, "acquire among garbage: %d (%s)", rc, vigil_strerror(rc));
    }
    vigil_lease_info v;
    for (uint32_t i = 0; i < 8; i++)
        (void)vigil_leases_entry(ls, i, &v);
    /* A lock word naming this very process looks like one of its own
     * threads mid-change: waited for, boundedly, then busy. */
    hooked = ls;
    vigil_leases_hook = grab_lock_word;
    vigil_lease c;
    EXPECT_RC(vigil_leases_acquire(ls, "self", "o", 10, &c), 0);
    vigil_leases_hook = NULL;
    EXPECT(grabbed & CTL_LOCKED, "never saw this process's lock word");
    vt_sleep_ms(20);
    e = &ls->entries[c.id - 1];
    atomic_store(&e->ctl, grabbed);
    uint64_t t1 = vt_now_ms();
    EXPECT_RC(vigil_leases_acquire(ls, "self", "o", 10, &c), VIGIL_EBUSY);
    EXPECT(atomic_load(&e->ctl) == grabbed, "this process's own lock was taken over");
    EXPECT(vt_now_ms() - t1 < 2000, "waited %llu ms on a lock word", (unsigned long long)(vt_now_ms() - t1));
    EXPECT_RC(vigil_leases_entry(ls, (uint32_t)(c.id - 1), &v), VIGIL_EBUSY);
    EXPECT(v.state == VIGIL_LEASE_CHANGING && v.pid == (uint32_t)getpid(), "wedged view: state %u pid %u",
           v.state, v.pid);
    EXPECT(vt_now_ms() - t0 < 5000, "hostile entries took %llu ms", (unsigned long long)(vt_now_ms() - t0));
    vigil_leases_close(ls);
    return 0;
}

VT_MAIN(VT_CASE(test_create_rules), VT_CASE(test_open_refuses), VT_CASE(test_scribbled_header),
        VT_CASE(test_hostile_entries))
