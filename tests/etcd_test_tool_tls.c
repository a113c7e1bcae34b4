/* SPDX-License-Identifier: MIT */
/*
 * Description: `vigil lock --etcd` with etcdctl's connection flags against
 * the mutual-TLS etcd (the etcd_tls fixture) and then with etcd auth on:
 * --cacert/--cert/--key and their ETCDCTL_* variables; a server the tool
 * cannot verify (no --cacert) exits 1 with a line naming certificate
 * verification; --user NAME:PASSWORD, --user with --password, and
 * ETCDCTL_USER/ETCDCTL_PASSWORD; a wrong password exits 1 with a line
 * naming authentication; --namespace puts the key under the prefix.
 */
#include "etcd_testutil.h"
#include "tooltest.h"

static const char *url, *certs;
static char ca[1200], cert[1200], key[1200];

#define NEED_TLS() ET_NEED_TLS()

static int test_tls_flags(void)
{
    NEED_TLS();
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--wait", "5000",
           et_key("tool-tls"), "--", "sh", "-c", "echo ran $VIGIL_LEASE_TOKEN");
    EXPECT_EXIT(0, "vigil lock with --cacert --cert --key");
    EXPECT(strstr(R.out, "ran "), "CMD did not run: '%s'", R.out);
    /* Without --cacert: the system's CAs do not know the test's. */
    VT_RUN("lock", "--etcd", url, "--cert", cert, "--key", key, "--wait", "5000", et_key("tool-tls"), "--", "true");
    EXPECT(R.rc == 1 && strstr(R.err, "certificate") && strstr(R.err, "verification") && vt_count_lines(R.err) == 1,
           "an unverifiable server: expected exit 1 and one line naming certificate verification, got %d, '%s'",
           R.rc, R.err);
    /* Without a client certificate: the server wants one. */
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--wait", "5000", et_key("tool-tls"), "--", "true");
    EXPECT(R.rc == 1 && strstr(R.err, "client certificate"),
           "no client certificate: expected exit 1 naming it, got %d, '%s'", R.rc, R.err);
    /* etcdctl's variables stand in for the flags. */
    setenv("ETCDCTL_CACERT", ca, 1);
    setenv("ETCDCTL_CERT", cert, 1);
    setenv("ETCDCTL_KEY", key, 1);
    VT_RUN("lock", "--etcd", url, "--wait", "5000", et_key("tool-tls-env"), "--", "true");
    unsetenv("ETCDCTL_CACERT");
    unsetenv("ETCDCTL_CERT");
    unsetenv("ETCDCTL_KEY");
    EXPECT_EXIT(0, "vigil lock with ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY");
    return 0;
}

static int test_auth_flags(void)
{
    NEED_TLS();
    NEED_ETCDCTL();
    EXPECT(et_tls_auth(url, certs, true) == 0, "etcdctl could not enable auth");
    int rc = 0;
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--user", ET_USER ":wrong",
           "--wait", "5000", et_key("tool-auth"), "--", "true");
    if (!(R.rc == 1 && strstr(R.err, "authentication") && vt_count_lines(R.err) == 1)) {
        fprintf(stderr, "a wrong password: expected exit 1 and one line naming authentication, got %d, '%s'\n",
                R.rc, R.err);
        rc = 1;
    }
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--user", ET_USER ":" ET_USER_PW,
           "--wait", "5000", et_key("tool-auth"), "--", "true");
    if (R.rc != 0) {
        fprintf(stderr, "--user NAME:PASSWORD: exit %d, '%s'\n", R.rc, R.err);
        rc = 1;
    }
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--user", ET_USER, "--password",
           ET_USER_PW, "--wait", "5000", et_key("tool-auth"), "--", "true");
    if (R.rc != 0) {
        fprintf(stderr, "--user NAME --password PW: exit %d, '%s'\n", R.rc, R.err);
        rc = 1;
    }
    setenv("ETCDCTL_USER", ET_USER, 1);
    setenv("ETCDCTL_PASSWORD", ET_USER_PW, 1);
    VT_RUN("lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--wait", "5000",
           et_key("tool-auth"), "--", "true");
    unsetenv("ETCDCTL_USER");
    unsetenv("ETCDCTL_PASSWORD");
    if (R.rc != 0) {
        fprintf(stderr, "ETCDCTL_USER and ETCDCTL_PASSWORD: exit %d, '%s'\n", R.rc, R.err);
        rc = 1;
    }
    int off = et_tls_auth(url, certs, false);
    EXPECT(off == 0, "etcdctl could not disable auth");
    return rc;
}

/* --namespace: while vigil lock holds KEY, etcd has it as PREFIX KEY. */
static int test_namespace_flag(void)
{
    NEED_TLS();
    char ns[64], full[300];
    const char *k = et_key("tool-ns");
    snprintf(ns, sizeof(ns), "%sns-%d/", ET_USER_PFX, (int)getpid());
    snprintf(full, sizeof(full), "%s%s", ns, k);
    struct vt_proc p;
    int sp = VT_SPAWN(&p, "lock", "--etcd", url, "--cacert", ca, "--cert", cert, "--key", key, "--namespace", ns,
                      "--owner", "spaced", k, "--", "sh", "-c", "echo held $VIGIL_LEASE_KEY; exec sleep 30");
    EXPECT(sp == 0, "spawn failed");
    bool held = vt_read_until(&p, "held", 15000);
    struct vigil_etcd_options o = { .cacert = ca, .cert = cert, .key = key };
    vigil_etcd *e = NULL;
    int rc = vigil_etcd_connect_opts(url, &o, &e);
    vigil_lease_info info = { 0 }, bare = { 0 };
    int got = rc == 0 ? vigil_etcd_get(e, full, &info) : rc;
    int plain = rc == 0 ? vigil_etcd_get(e, k, &bare) : rc;
    int st = vt_stop(&p, SIGTERM, 15000);
    int after = rc == 0 ? vigil_etcd_get(e, full, &info) : rc;
    vigil_etcd_close(e);
    EXPECT(held && strstr(p.buf, k), "CMD did not run with VIGIL_LEASE_KEY %s: '%s'", k, p.buf);
    EXPECT(got == 0 && strcmp(info.owner, "spaced") == 0, "etcd's %s while held: %d owner '%s'", full, got,
           info.owner);
    EXPECT_RC(plain, VIGIL_EVACANT);
    EXPECT(st == 128 + SIGTERM, "vigil lock exited %d after SIGTERM", st);
    EXPECT_RC(after, VIGIL_EVACANT);
    return 0;
}

VT_MAIN(VT_CASE(test_tls_flags), VT_CASE(test_auth_flags), VT_CASE(test_namespace_flag))
