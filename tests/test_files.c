/* SPDX-License-Identifier: MIT */
/*
 * Description: the file layer under every vigil file, through the
 * heartbeat table: every bad file (missing, empty, short, grown,
 * truncated, wrong magic, version or kind, capacity 0, mismatched or
 * overflowing, a directory, a symlink, a FIFO, a device) gets its own
 * clear error without a crash or a hang; create never clobbers, sets the
 * mode exactly, leaves no temporary file, and under racing creators and
 * openers exactly one wins and no opener sees a half-made file; probe
 * reports what a file is; no file descriptor is kept or leaked.
 */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "file_internal.h"

#define HB_MAX (1u << 20)

/* ---- helpers -------------------------------------------------------------- */

/* A fresh subdirectory of the test's directory, for tests that list
 * entries or run twice (a sequence number keeps each call's apart). */
static const char *subdir(const char *name)
{
    static unsigned seq;
    char unique[128];
    snprintf(unique, sizeof(unique), "%s.%u", name, seq++);
    const char *d = vt_path(unique);
    if (mkdir(d, 0700) != 0 && errno != EEXIST) {
        perror(d);
        exit(2);
    }
    return d;
}

static const char *join(const char *dir, const char *name)
{
    static char bufs[4][600];
    static unsigned next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return b;
}

static int write_file(const char *path, const void *buf, size_t n)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    ssize_t w = n ? write(fd, buf, n) : 0;
    close(fd);
    return w == (ssize_t)n ? 0 : -EIO;
}

/* A valid heartbeat image of `cap` slots, with its header fields settable. */
static uint8_t *image(uint32_t cap, size_t *size)
{
    *size = 64 + (size_t)cap * 64;
    uint8_t *b = calloc(1, *size);
    if (!b)
        exit(2);
    memcpy(b, vigil_magic, 8);
    uint32_t v = VIGIL_LAYOUT_VERSION, kind = VIGIL_KIND_HEARTBEAT;
    memcpy(b + 8, &v, 4);
    memcpy(b + 12, &kind, 4);
    memcpy(b + 16, &cap, 4);
    return b;
}

static void put32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
}

/* open and probe of path: the codes they return. */
static int open_rc(const char *path, uint32_t cap)
{
    vigil_hb *hb = (vigil_hb *)&hb; /* must stay untouched on failure */
    vigil_hb *before = hb;
    int rc = vigil_hb_open(path, cap, &hb);
    if (rc == 0)
        vigil_hb_close(hb);
    else if (hb != before)
        return -99999; /* wrote its output on failure */
    return rc;
}

static int probe_rc(const char *path)
{
    vigil_file_info fi;
    return vigil_file_probe(path, &fi);
}

static int count_entries(const char *dir, char *first_odd, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (first_odd && strstr(e->d_name, "tmp"))
            snprintf(first_odd, len, "%s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static int count_fds(void)
{
    return count_entries("/proc/self/fd", NULL, 0) - 1; /* minus opendir's own */
}

/* ---- bad files ------------------------------------------------------------ */

static int test_missing(void)
{
    EXPECT_RC(open_rc(vt_path("no-such.hb"), 0), -ENOENT);
    EXPECT_RC(open_rc(vt_path("no-such-dir/x.hb"), 4), -ENOENT);
    EXPECT_RC(probe_rc(vt_path("no-such.hb")), -ENOENT);
    return 0;
}

static int test_empty_and_short(void)
{
    const char *p = vt_path("empty.hb");
    EXPECT_RC(write_file(p, "", 0), 0);
    EXPECT_RC(open_rc(p, 0), VIGIL_EBADFILE);
    EXPECT_RC(probe_rc(p), VIGIL_EBADFILE);
    /* the magic alone, then all of a valid header but its last byte */
    size_t size;
    uint8_t *b = image(1, &size);
    static const size_t cuts[] = { 1, 8, 24, 63 };
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        EXPECT_RC(write_file(p, b, cuts[i]), 0);
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "%zu-byte file: expected VIGIL_EBADFILE, got %d", cuts[i],
               open_rc(p, 0));
        EXPECT(probe_rc(p) == VIGIL_EBADFILE, "%zu-byte file: probe gave %d", cuts[i], probe_rc(p));
    }
    free(b);
    return 0;
}

static int test_grown_and_truncated(void)
{
    const char *p = vt_path("size.hb");
    size_t size;
    uint8_t *b = image(4, &size);
    uint8_t *big = calloc(1, size + 4096);
    memcpy(big, b, size);
    EXPECT_RC(write_file(p, b, size), 0);
    EXPECT_RC(open_rc(p, 4), 0);
    static const long deltas[] = { 1, 63, 64, 4096, -1, -63, -64, -(4 * 64) };
    for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
        size_t n = (size_t)((long)size + deltas[i]);
        EXPECT_RC(write_file(p, big, n), 0);
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "header says 4 slots, file %zu bytes: expected VIGIL_EBADFILE, got %d",
               n, open_rc(p, 0));
        EXPECT(open_rc(p, 4) == VIGIL_EBADFILE, "same, opened for 4: got %d", open_rc(p, 4));
    }
    /* probe reports the size it found, without judging it */
    vigil_file_info fi;
    EXPECT_RC(vigil_file_probe(p, &fi), 0);
    EXPECT(fi.size == 64 && fi.capacity == 4, "probe: size %llu capacity %u", (unsigned long long)fi.size,
           fi.capacity);
    free(big);
    free(b);
    return 0;
}

static int test_wrong_magic(void)
{
    const char *p = vt_path("magic.hb");
    size_t size;
    uint8_t *b = image(2, &size);
    for (int i = 0; i < 8; i++) {
        b[i] ^= 0x20;
        EXPECT_RC(write_file(p, b, size), 0);
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "magic byte %d changed: open gave %d", i, open_rc(p, 0));
        EXPECT(probe_rc(p) == VIGIL_EBADFILE, "magic byte %d changed: probe gave %d", i, probe_rc(p));
        b[i] ^= 0x20;
    }
    memset(b, 0, 8);
    EXPECT_RC(write_file(p, b, size), 0);
    EXPECT_RC(open_rc(p, 0), VIGIL_EBADFILE);
    free(b);
    return 0;
}

static int test_wrong_version(void)
{
    const char *p = vt_path("version.hb");
    size_t size;
    uint8_t *b = image(2, &size);
    /* VIGIL_LAYOUT_VERSION - 1: a file of the layout before registrations
     * were named by generation (pids instead), never to be reinterpreted. */
    static const uint32_t versions[] = { 0, VIGIL_LAYOUT_VERSION - 1, VIGIL_LAYOUT_VERSION + 1, 0x01000000,
                                         UINT32_MAX };
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        put32(b, 8, versions[i]);
        EXPECT_RC(write_file(p, b, size), 0);
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "version %u: open gave %d", versions[i], open_rc(p, 0));
        vigil_file_info fi;
        EXPECT_RC(vigil_file_probe(p, &fi), 0);
        EXPECT(fi.version == versions[i], "probe reported version %u, file has %u", fi.version, versions[i]);
    }
    free(b);
    return 0;
}

static int test_wrong_kind(void)
{
    const char *p = vt_path("kind.hb");
    size_t size;
    uint8_t *b = image(2, &size);
    static const uint32_t kinds[] = { 0, VIGIL_KIND_BARRIER, VIGIL_KIND_LEASES, 4, 99, UINT32_MAX };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        put32(b, 12, kinds[i]);
        EXPECT_RC(write_file(p, b, size), 0);
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "kind %u: open gave %d", kinds[i], open_rc(p, 0));
        vigil_file_info fi;
        EXPECT_RC(vigil_file_probe(p, &fi), 0);
        EXPECT(fi.kind == kinds[i], "probe reported kind %u, file has %u", fi.kind, kinds[i]);
    }
    free(b);
    return 0;
}

static int test_capacity_zero_in_header(void)
{
    const char *p = vt_path("cap0.hb");
    size_t size;
    uint8_t *b = image(1, &size);
    put32(b, 16, 0);
    EXPECT_RC(write_file(p, b, 64), 0); /* the size capacity 0 would have */
    EXPECT_RC(open_rc(p, 0), VIGIL_EBADFILE);
    EXPECT_RC(open_rc(p, 1), VIGIL_EBADFILE);
    EXPECT_RC(write_file(p, b, size), 0);
    EXPECT_RC(open_rc(p, 0), VIGIL_EBADFILE);
    free(b);
    return 0;
}

static int test_capacity_mismatch(void)
{
    const char *p = vt_path("capmis.hb");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(p, 4, &hb), 0);
    vigil_hb_close(hb);
    EXPECT_RC(open_rc(p, 8), VIGIL_ECAPACITY);
    EXPECT_RC(open_rc(p, 3), VIGIL_ECAPACITY);
    EXPECT_RC(open_rc(p, 1), VIGIL_ECAPACITY);
    EXPECT_RC(open_rc(p, UINT32_MAX), VIGIL_ECAPACITY);
    EXPECT_RC(vigil_hb_open(p, 0, &hb), 0);
    EXPECT(vigil_hb_capacity(hb) == 4, "open with 0 should take the file's 4, got %u", vigil_hb_capacity(hb));
    vigil_hb_close(hb);
    EXPECT_RC(open_rc(p, 4), 0);
    return 0;
}

/* Capacities whose size would overflow, wrap in 32 bits, or pass the
 * maximum, each next to a file size that such arithmetic might accept. */
static int test_capacity_overflow(void)
{
    const char *p = vt_path("capbig.hb");
    size_t size;
    uint8_t *b = image(1, &size);
    static const struct { uint32_t cap; uint64_t file; } cases[] = {
        { UINT32_MAX, 64 },                    /* 64 + cap * 64 is 2^38 */
        { UINT32_MAX, 128 },
        { 0x04000000u, 64 },                   /* 64 + 2^32: 64 in 32 bits */
        { 0x04000001u, 128 },                  /* 128 in 32 bits */
        { 0x80000000u, 64 },
        { HB_MAX + 1, 64 + (uint64_t)(HB_MAX + 1) * 64 }, /* exact size, one past the maximum */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        put32(b, 16, cases[i].cap);
        EXPECT_RC(write_file(p, b, 64), 0);
        EXPECT(truncate(p, (off_t)cases[i].file) == 0, "truncate: %s", strerror(errno));
        EXPECT(open_rc(p, 0) == VIGIL_EBADFILE, "capacity %#x in a %llu-byte file: open gave %d", cases[i].cap,
               (unsigned long long)cases[i].file, open_rc(p, 0));
        EXPECT(open_rc(p, cases[i].cap) == VIGIL_EBADFILE, "same, asked for %#x: gave %d", cases[i].cap,
               open_rc(p, cases[i].cap));
    }
    /* The maximum itself, at its exact (sparse) size, is a good file. */
    put32(b, 16, HB_MAX);
    EXPECT_RC(write_file(p, b, 64), 0);
    EXPECT(truncate(p, (off_t)(64 + (uint64_t)HB_MAX * 64)) == 0, "truncate: %s", strerror(errno));
    EXPECT_RC(open_rc(p, HB_MAX), 0);
    unlink(p);
    free(b);
    return 0;
}

static int test_directory(void)
{
    const char *d = subdir("a-dir.hb");
    EXPECT_RC(open_rc(d, 0), -EISDIR);
    EXPECT_RC(probe_rc(d), VIGIL_EBADFILE);
    return 0;
}

static int test_symlinks(void)
{
    const char *good = vt_path("target.hb");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(good, 2, &hb), 0);
    vigil_hb_close(hb);
    const char *link = vt_path("link.hb");
    EXPECT(symlink(good, link) == 0, "symlink: %s", strerror(errno));
    EXPECT_RC(open_rc(link, 0), -ELOOP); /* O_NOFOLLOW, even to a valid table */
    EXPECT_RC(probe_rc(link), -ELOOP);
    EXPECT_RC(open_rc(good, 2), 0);
    const char *dangling = vt_path("dangling.hb");
    EXPECT(symlink(vt_path("nowhere.hb"), dangling) == 0, "symlink: %s", strerror(errno));
    EXPECT_RC(open_rc(dangling, 0), -ELOOP);
    EXPECT_RC(probe_rc(dangling), -ELOOP);
    return 0;
}

/* A FIFO at the path must not block open or probe: run them in a child
 * under a bound, so a blocking open fails the test instead of hanging it. */
static int test_fifo(void)
{
    const char *p = vt_path("fifo.hb");
    EXPECT(mkfifo(p, 0600) == 0, "mkfifo: %s", strerror(errno));
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (open_rc(p, 0) != VIGIL_EBADFILE)
            _exit(1);
        if (probe_rc(p) != VIGIL_EBADFILE)
            _exit(2);
        vigil_hb *hb;
        if (vigil_hb_create(p, 2, &hb) != -EEXIST)
            _exit(3);
        _exit(0);
    }
    int st = vt_wait(pid, 5000);
    EXPECT(st == 0, "FIFO: expected VIGIL_EBADFILE from open and probe and -EEXIST from create without "
                    "blocking; child %s %d", st < 0 ? "hung," : "failed step", st);
    return 0;
}

static int test_device(void)
{
    if (access("/dev/null", R_OK | W_OK) != 0)
        return VT_SKIP;
    EXPECT_RC(open_rc("/dev/null", 0), VIGIL_EBADFILE);
    EXPECT_RC(probe_rc("/dev/null"), VIGIL_EBADFILE);
    return 0;
}

/* Opening a tty acts on it: a session leader without a controlling
 * terminal that opens one without O_NOCTTY makes it its controlling
 * terminal. Open, probe and peek must refuse the path before anything
 * reaches the device. The child leads a new session (no terminal), points
 * every call at a pseudo-terminal's slave, and then checks that it still
 * has no controlling terminal (/dev/tty: ENXIO). */
static int test_tty_untouched(void)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
        return VT_SKIP;
    const char *slave = ptsname(master);
    if (!slave)
        return VT_SKIP;
    pid_t kid = fork();
    if (kid == 0) {
        if (setsid() < 0)
            _exit(10);
        vigil_hb *hb = NULL;
        vigil_leases *ls = NULL;
        vigil_file_info fi;
        vigil_barrier_state bs;
        if (vigil_hb_open(slave, 0, &hb) != VIGIL_EBADFILE)
            _exit(11);
        if (vigil_leases_open(slave, &ls) != VIGIL_EBADFILE)
            _exit(12);
        if (vigil_file_probe(slave, &fi) != VIGIL_EBADFILE)
            _exit(13);
        if (vigil_barrier_peek(slave, &bs) != VIGIL_EBADFILE)
            _exit(14);
        int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
        _exit(tty < 0 && errno == ENXIO ? 0 : 15);
    }
    int st = vt_wait(kid, 10000);
    close(master);
    EXPECT(st != 15, "opening a pseudo-terminal's slave made it the controlling terminal");
    EXPECT(st == 0, "a tty at the path: expected VIGIL_EBADFILE from every open and no controlling "
                    "terminal, child exited %d (10 setsid, 11 hb_open, 12 leases_open, 13 probe, 14 peek)", st);
    return 0;
}

static int test_null_args(void)
{
    vigil_hb *hb = NULL;
    EXPECT_RC(vigil_hb_create(NULL, 4, &hb), -EINVAL);
    EXPECT_RC(vigil_hb_create(vt_path("null.hb"), 4, NULL), -EINVAL);
    EXPECT_RC(vigil_hb_open(NULL, 0, &hb), -EINVAL);
    EXPECT_RC(vigil_hb_open(vt_path("null.hb"), 0, NULL), -EINVAL);
    EXPECT_RC(vigil_file_probe(NULL, &(vigil_file_info){ 0 }), -EINVAL);
    EXPECT_RC(vigil_file_probe(vt_path("null.hb"), NULL), -EINVAL);
    EXPECT_RC(vigil_hb_create("", 4, &hb), -ENOENT);
    EXPECT_RC(open_rc("", 0), -ENOENT);
    EXPECT(hb == NULL, "a failed call wrote its output");
    EXPECT(access(vt_path("null.hb"), F_OK) != 0, "a failed create left a file");
    return 0;
}

/* ---- create --------------------------------------------------------------- */

static int test_create_never_clobbers(void)
{
    const char *d = subdir("clobber");
    vigil_hb *hb;
    /* a regular file, with content that must survive */
    const char *f = join(d, "file");
    EXPECT_RC(write_file(f, "precious", 8), 0);
    EXPECT_RC(vigil_hb_create(f, 4, &hb), -EEXIST);
    struct stat st;
    EXPECT(stat(f, &st) == 0 && st.st_size == 8, "the existing file was changed");
    /* a vigil table */
    const char *t = join(d, "table");
    EXPECT_RC(vigil_hb_create(t, 4, &hb), 0);
    vigil_hb_tick(hb);
    vigil_hb *again = NULL;
    EXPECT_RC(vigil_hb_create_mode(t, 8, 0644, &again), -EEXIST);
    EXPECT(again == NULL, "a failed create wrote its output");
    EXPECT(vigil_hb_epoch(hb) == 1, "the existing table was reset");
    vigil_hb_close(hb);
    EXPECT_RC(open_rc(t, 4), 0);
    /* a directory */
    const char *dir = join(d, "dir");
    EXPECT(mkdir(dir, 0700) == 0, "mkdir: %s", strerror(errno));
    EXPECT_RC(vigil_hb_create(dir, 4, &hb), -EEXIST);
    /* a symlink to a file: neither the link nor its target changes */
    const char *ln = join(d, "link");
    EXPECT(symlink(f, ln) == 0, "symlink: %s", strerror(errno));
    EXPECT_RC(vigil_hb_create(ln, 4, &hb), -EEXIST);
    EXPECT(lstat(ln, &st) == 0 && S_ISLNK(st.st_mode), "the symlink was replaced");
    EXPECT(stat(f, &st) == 0 && st.st_size == 8, "the symlink's target was changed");
    /* a dangling symlink: create must not make its target */
    const char *target = join(d, "target-of-dangling");
    const char *dl = join(d, "dangling");
    EXPECT(symlink(target, dl) == 0, "symlink: %s", strerror(errno));
    EXPECT_RC(vigil_hb_create(dl, 4, &hb), -EEXIST);
    EXPECT(access(target, F_OK) != 0, "create followed a dangling symlink and made %s", target);
    EXPECT(lstat(dl, &st) == 0 && S_ISLNK(st.st_mode), "the dangling symlink was replaced");
    char odd[256] = "";
    int n = count_entries(d, odd, sizeof(odd));
    EXPECT(n == 5 && !odd[0], "expected the 5 entries made here, found %d (%s)", n, odd);
    return 0;
}

static int test_create_mode_umask(void)
{
    static const mode_t masks[] = { 0, 022, 077, 0777 };
    const char *d = subdir("umask");
    mode_t old = umask(0);
    int fail = 0;
    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]) && !fail; i++) {
        umask(masks[i]);
        char name[32];
        snprintf(name, sizeof(name), "umask%zu.hb", i);
        const char *p = join(d, name);
        vigil_hb *hb;
        int rc = vigil_hb_create(p, 2, &hb);
        struct stat st;
        if (rc != 0) {
            fprintf(stderr, "umask %03o: create gave %d (%s)\n", masks[i], rc, vigil_strerror(rc));
            fail = 1;
        } else if (stat(p, &st) != 0 || (st.st_mode & 07777) != 0600) {
            fprintf(stderr, "umask %03o: expected mode 0600, got %04o\n", masks[i], st.st_mode & 07777);
            fail = 1;
        } else {
            vigil_hb_close(hb);
        }
    }
    umask(old);
    EXPECT(!fail, "create's mode depends on the umask");
    return 0;
}

static int test_create_mode(void)
{
    static const unsigned modes[] = { 0640, 0644, 0604, 0660, 0666, 0400 };
    const char *d = subdir("mode");
    mode_t old = umask(077);
    int fail = 0;
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]) && !fail; i++) {
        char name[32];
        snprintf(name, sizeof(name), "mode%04o.hb", modes[i]);
        const char *p = join(d, name);
        vigil_hb *hb;
        int rc = vigil_hb_create_mode(p, 2, modes[i], &hb);
        struct stat st;
        if (rc != 0 || stat(p, &st) != 0 || (st.st_mode & 07777) != modes[i]) {
            fprintf(stderr, "create_mode %04o under umask 077: rc %d, mode %04o\n", modes[i], rc,
                    rc ? 0 : st.st_mode & 07777);
            fail = 1;
        }
        if (rc == 0)
            vigil_hb_close(hb);
    }
    umask(old);
    EXPECT(!fail, "create_mode not honoured exactly");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create_mode(join(d, "badmode.hb"), 2, 010000, &hb), -EINVAL);
    EXPECT_RC(vigil_hb_create_mode(join(d, "badmode.hb"), 2, UINT32_MAX, &hb), -EINVAL);
    EXPECT(count_entries(d, NULL, 0) == (int)(sizeof(modes) / sizeof(modes[0])),
           "a refused create left a file");
    return 0;
}

static int test_create_range(void)
{
    const char *d = subdir("range");
    vigil_hb *hb = NULL;
    EXPECT_RC(vigil_hb_create(join(d, "zero"), 0, &hb), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_create(join(d, "past"), HB_MAX + 1, &hb), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_create(join(d, "huge"), UINT32_MAX, &hb), VIGIL_ERANGE);
    EXPECT(hb == NULL, "a failed create wrote its output");
    EXPECT(count_entries(d, NULL, 0) == 0, "a refused create left %d entries", count_entries(d, NULL, 0));
    EXPECT_RC(vigil_hb_create(join(d, "one"), 1, &hb), 0);
    EXPECT(vigil_hb_capacity(hb) == 1, "capacity %u", vigil_hb_capacity(hb));
    vigil_hb_close(hb);
    EXPECT_RC(vigil_hb_create(join(d, "max"), HB_MAX, &hb), 0);
    struct stat st;
    EXPECT(stat(join(d, "max"), &st) == 0 && (uint64_t)st.st_size == 64 + (uint64_t)HB_MAX * 64,
           "maximum table has size %lld", (long long)st.st_size);
    vigil_hb_close(hb);
    unlink(join(d, "max"));
    return 0;
}

/* A new table is all zeros past the header: epoch 0, every slot vacant. */
static int test_create_contents(void)
{
    const char *p = join(subdir("contents"), "t.hb");
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(p, 3, &hb), 0);
    vigil_hb_close(hb);
    uint8_t buf[64 + 3 * 64 + 1]; /* one more, to catch a longer file */
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    EXPECT(fd >= 0, "open: %s", strerror(errno));
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    EXPECT(n == (ssize_t)sizeof(buf) - 1, "file is %zd bytes, expected %zu", n, sizeof(buf) - 1);
    size_t size;
    uint8_t *want = image(3, &size);
    EXPECT(memcmp(buf, want, size) == 0, "new file differs from header + zeros");
    free(want);
    vigil_file_info fi;
    EXPECT_RC(vigil_file_probe(p, &fi), 0);
    EXPECT(fi.kind == VIGIL_KIND_HEARTBEAT && fi.version == VIGIL_LAYOUT_VERSION && fi.capacity == 3 &&
               fi.size == sizeof(buf) - 1,
           "probe: kind %u version %u capacity %u size %llu", fi.kind, fi.version, fi.capacity,
           (unsigned long long)fi.size);
    return 0;
}

/* No temporary file in the directory after a success or any failure. */
static int test_no_temp_left(void)
{
    const char *d = subdir("notemp");
    const char *p = join(d, "t.hb");
    vigil_hb *hb;
    char odd[256] = "";
    EXPECT_RC(vigil_hb_create(p, 4, &hb), 0);
    vigil_hb_close(hb);
    EXPECT(count_entries(d, odd, sizeof(odd)) == 1 && !odd[0], "after success: %d entries (%s)",
           count_entries(d, NULL, 0), odd);
    EXPECT_RC(vigil_hb_create(p, 4, &hb), -EEXIST);
    EXPECT_RC(vigil_hb_create(join(d, "r.hb"), 0, &hb), VIGIL_ERANGE);
    EXPECT_RC(vigil_hb_create_mode(join(d, "m.hb"), 4, 077777, &hb), -EINVAL);
    EXPECT_RC(vigil_hb_create(join(d, "missing/x.hb"), 4, &hb), -ENOENT);
    EXPECT(count_entries(d, odd, sizeof(odd)) == 1 && !odd[0], "after failures: %d entries (%s)",
           count_entries(d, NULL, 0), odd);
    return 0;
}

/* A name as long as a directory entry can be: create must not need a
 * longer temporary name beside it. */
static int test_long_name(void)
{
    const char *d = subdir("long");
    char name[256];
    memset(name, 'n', 255);
    name[255] = '\0';
    const char *p = join(d, name);
    vigil_hb *hb;
    EXPECT_RC(vigil_hb_create(p, 2, &hb), 0);
    vigil_hb_close(hb);
    EXPECT_RC(open_rc(p, 2), 0);
    EXPECT(count_entries(d, NULL, 0) == 1, "%d entries", count_entries(d, NULL, 0));
    return 0;
}

/* ---- racing creators and openers ------------------------------------------ */

#define CREATORS 8
#define OPENERS  4

struct create_race {
    _Atomic int ready;
    _Atomic int gate;
    int         create_rc[CREATORS];
    int         open_rc[OPENERS];  /* the first answer other than -ENOENT */
    int         verified[OPENERS]; /* 1 when that table checked out */
};

static int race_opener(const char *path, struct create_race *r, int i)
{
    atomic_fetch_add(&r->ready, 1);
    if (!vt_spin_until(&r->gate, 1, 1, 10000))
        return 1;
    uint64_t deadline = vt_now_ms() + 5000;
    for (;;) {
        vigil_hb *hb;
        int rc = vigil_hb_open(path, i & 1 ? 4 : 0, &hb);
        if (rc == -ENOENT) {
            if (vt_now_ms() > deadline)
                return 1;
            continue;
        }
        r->open_rc[i] = rc;
        if (rc == 0) {
            int ok = vigil_hb_capacity(hb) == 4 && vigil_hb_epoch(hb) == 0;
            for (uint32_t s = 0; s < 4 && ok; s++) {
                vigil_slot_info info;
                ok = vigil_hb_snapshot(hb, s, &info) == VIGIL_EVACANT;
            }
            r->verified[i] = ok;
            vigil_hb_close(hb);
        }
        return 0;
    }
}

static int test_create_race(void)
{
    struct create_race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT(r != MAP_FAILED, "mmap: %s", strerror(errno));
    for (int round = 0; round < 5; round++) {
        char dn[32];
        snprintf(dn, sizeof(dn), "race%d", round);
        const char *d = subdir(dn);
        const char *path = join(d, "t.hb");
        memset(r, 0, sizeof(*r));
        pid_t pids[CREATORS + OPENERS];
        for (int i = 0; i < CREATORS + OPENERS; i++) {
            pids[i] = fork();
            EXPECT(pids[i] >= 0, "fork: %s", strerror(errno));
            if (pids[i] == 0) {
                if (i >= CREATORS)
                    _exit(race_opener(path, r, i - CREATORS));
                atomic_fetch_add(&r->ready, 1);
                if (!vt_spin_until(&r->gate, 1, 1, 10000))
                    _exit(4);
                vigil_hb *hb;
                r->create_rc[i] = vigil_hb_create(path, 4, &hb);
                if (r->create_rc[i] == 0)
                    vigil_hb_close(hb);
                _exit(0);
            }
        }
        bool ready = VT_WAIT_FOR(atomic_load(&r->ready) == CREATORS + OPENERS, 10000);
        atomic_store_explicit(&r->gate, 1, memory_order_release);
        int bad = 0;
        for (int i = 0; i < CREATORS + OPENERS; i++)
            if (vt_wait(pids[i], 10000) != 0)
                bad = 1;
        EXPECT(ready && !bad, "round %d: a racer did not start or finish", round);
        int won = 0;
        for (int i = 0; i < CREATORS; i++) {
            EXPECT(r->create_rc[i] == 0 || r->create_rc[i] == -EEXIST,
                   "round %d creator %d: expected 0 or -EEXIST, got %d (%s)", round, i, r->create_rc[i],
                   vigil_strerror(r->create_rc[i]));
            won += r->create_rc[i] == 0;
        }
        EXPECT(won == 1, "round %d: %d creators won, expected exactly 1", round, won);
        for (int i = 0; i < OPENERS; i++) {
            EXPECT(r->open_rc[i] == 0, "round %d opener %d: expected -ENOENT then 0, got %d (%s)", round, i,
                   r->open_rc[i], vigil_strerror(r->open_rc[i]));
            EXPECT(r->verified[i], "round %d opener %d: the table it opened was not a fresh 4-slot table",
                   round, i);
        }
        char odd[256] = "";
        int n = count_entries(d, odd, sizeof(odd));
        EXPECT(n == 1 && !odd[0], "round %d: expected only the table in the directory, found %d (%s)", round, n,
               odd);
    }
    munmap(r, sizeof(*r));
    return 0;
}

/* ---- file descriptors ------------------------------------------------------ */

/* Open handles hold no descriptor (the mapping outlives it), and no
 * success or failure path leaks one. */
static int test_no_fd_leak(void)
{
    int before = count_fds();
    EXPECT(before > 0, "cannot count /proc/self/fd");
    const char *d = subdir("fds");
    const char *p = join(d, "t.hb");
    const char *bad = join(d, "bad.hb");
    EXPECT_RC(write_file(bad, "not a vigil file, not at all, no; long enough to pass the size check ......", 72), 0);
    const char *ln = join(d, "ln.hb");
    EXPECT(symlink(p, ln) == 0, "symlink: %s", strerror(errno));
    vigil_hb *held[4];
    for (int i = 0; i < 4; i++) {
        if (i == 0)
            EXPECT_RC(vigil_hb_create(p, 4, &held[i]), 0);
        else
            EXPECT_RC(vigil_hb_open(p, 4, &held[i]), 0);
    }
    EXPECT(count_fds() == before, "open handles hold %d descriptors", count_fds() - before);
    for (int i = 0; i < 4; i++)
        vigil_hb_close(held[i]);
    for (int i = 0; i < 100; i++) {
        vigil_hb *hb;
        vigil_file_info fi;
        unlink(p);
        if (vigil_hb_create(p, 4, &hb) != 0)
            break;
        vigil_hb_close(hb);
        (void)vigil_hb_create(p, 4, &hb);          /* -EEXIST */
        if (vigil_hb_open(p, 0, &hb) == 0)
            vigil_hb_close(hb);
        (void)open_rc(p, 8);                        /* VIGIL_ECAPACITY */
        (void)open_rc(bad, 0);                      /* VIGIL_EBADFILE */
        (void)open_rc(ln, 0);                       /* -ELOOP */
        (void)open_rc(d, 0);                        /* -EISDIR */
        (void)vigil_file_probe(p, &fi);
        (void)vigil_file_probe(bad, &fi);
        (void)vigil_file_probe(d, &fi);
        (void)vigil_hb_create(join(d, "r.hb"), 0, &hb); /* VIGIL_ERANGE */
    }
    EXPECT(count_fds() == before, "expected %d descriptors after 100 cycles, have %d", before, count_fds());
    return 0;
}

/* The same create tests through create's fallback (a named temporary
 * file), which kernels and filesystems without O_TMPFILE get. */
#define NAMED(t)                                                              \
    static int t##_named(void)                                                \
    {                                                                         \
        vigil_file_pretend = VIGIL_PRETEND_NO_TMPFILE;                                            \
        int rc = t();                                                         \
        vigil_file_pretend = 0;                                            \
        return rc;                                                            \
    }
NAMED(test_create_never_clobbers)
NAMED(test_create_mode_umask)
NAMED(test_create_mode)
NAMED(test_create_contents)
NAMED(test_no_temp_left)
NAMED(test_create_race)
NAMED(test_long_name)

VT_MAIN(VT_CASE(test_missing), VT_CASE(test_empty_and_short), VT_CASE(test_grown_and_truncated),
        VT_CASE(test_wrong_magic), VT_CASE(test_wrong_version), VT_CASE(test_wrong_kind),
        VT_CASE(test_capacity_zero_in_header), VT_CASE(test_capacity_mismatch), VT_CASE(test_capacity_overflow),
        VT_CASE(test_directory), VT_CASE(test_symlinks), VT_CASE(test_fifo), VT_CASE(test_device), VT_CASE(test_tty_untouched),
        VT_CASE(test_null_args), VT_CASE(test_create_never_clobbers), VT_CASE(test_create_mode_umask),
        VT_CASE(test_create_mode), VT_CASE(test_create_range), VT_CASE(test_create_contents),
        VT_CASE(test_no_temp_left), VT_CASE(test_long_name), VT_CASE(test_create_race),
        VT_CASE(test_no_fd_leak), VT_CASE(test_create_never_clobbers_named), VT_CASE(test_create_mode_umask_named),
        VT_CASE(test_create_mode_named), VT_CASE(test_create_contents_named), VT_CASE(test_no_temp_left_named),
        VT_CASE(test_create_race_named), VT_CASE(test_long_name_named))
