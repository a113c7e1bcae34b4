#!/bin/sh
# scripts/deps.sh against a fake system: apt-get, dpkg, systemctl and id
# are stand-ins on a PATH that has nothing else the script looks for, and
# VIGIL_DEPS_ROOT is a scratch root. It checks that `build` asks only for
# what the build needs (no package with a service, no test tool), that
# `check` asks for the test tools too, that every install runs under a
# policy-rc.d denying starts (101), that the admin's own policy-rc.d is
# put back (and none is left where there was none), that the service
# of a package installed now is disabled and stopped, and that `deb` asks
# for debian/control's Build-Depends.
# Usage: deps_policy.sh SOURCE_DIR
set -u
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

bin="$tmp/bin"
mkdir -p "$bin"
# The few real tools the script itself runs, and nothing it looks for.
for t in mkdir mv rm chmod printf cat; do
    p=$(command -v "$t") && ln -s "$p" "$bin/$t"
done
cat >"$bin/id" <<'EOF'
#!/bin/sh
echo 0
EOF
cat >"$bin/apt-get" <<'EOF'
#!/bin/sh
# Records each call with what policy-rc.d answers for a start right then.
verdict=none
[ -x "$VIGIL_DEPS_ROOT/usr/sbin/policy-rc.d" ] && { "$VIGIL_DEPS_ROOT/usr/sbin/policy-rc.d" etcd start; verdict=$?; }
echo "$* | policy $verdict" >>"$LOG"
EOF
cat >"$bin/dpkg" <<'EOF'
#!/bin/sh
[ "$2" = etcd-server ] && printf '/usr/bin/etcd\n/lib/systemd/system/etcd.service\n/etc/init.d/etcd\n'
[ "$2" = prometheus ] && printf '/usr/bin/promtool\n/lib/systemd/system/prometheus.service\n'
exit 0
EOF
cat >"$bin/systemctl" <<'EOF'
#!/bin/sh
echo "systemctl $*" >>"$LOG"
EOF
chmod 755 "$bin/id" "$bin/apt-get" "$bin/dpkg" "$bin/systemctl"

run() { # run SET: the script on the fake system, as root
    env -i PATH="$bin" LOG="$tmp/log" VIGIL_DEPS_ROOT="$tmp/root" /bin/sh "$src/scripts/deps.sh" "$1" >"$tmp/out" 2>&1
}

# build: the build's needs alone, with the admin's policy-rc.d put back.
mkdir -p "$tmp/root/usr/sbin" "$tmp/root/run/systemd/system"
printf '#!/bin/sh\n# the admin'"'"'s own\nexit 0\n' >"$tmp/root/usr/sbin/policy-rc.d"
cp "$tmp/root/usr/sbin/policy-rc.d" "$tmp/admin-policy"
: >"$tmp/log"
run build || fail "deps.sh build exited $?: $(cat "$tmp/out")"
install=$(grep '^install' "$tmp/log")
for p in gcc cmake pkg-config libcurl4-openssl-dev libcjson-dev; do
    case "$install" in *" $p"*) ;; *) fail "build: $p not installed: $install" ;; esac
done
for p in etcd-server etcd-client prometheus spin python3-pytest cargo; do
    case "$install" in *" $p"*) fail "build installs $p, which only the tests use: $install" ;; esac
done
case "$install" in *" libsystemd-dev"*) fail "build installs libsystemd-dev, which nothing links (tools/notify.c): $install" ;; esac
case "$install" in *"| policy 101") ;; *) fail "build: apt-get install ran without a policy-rc.d denying starts: $install" ;; esac
cmp -s "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d" || fail "the admin's policy-rc.d was not put back"
[ ! -e "$tmp/root/usr/sbin/policy-rc.d.vigil-deps-saved" ] || fail "the saved policy-rc.d was left beside it"

# check: the test tools too, their services disabled and stopped; no
# policy-rc.d left where there was none.
rm -f "$tmp/root/usr/sbin/policy-rc.d"
: >"$tmp/log"
run check || fail "deps.sh check exited $?: $(cat "$tmp/out")"
install=$(grep '^install' "$tmp/log")
for p in gcc etcd-server etcd-client prometheus spin python3-cffi python3-pytest python3-pytest-asyncio cargo; do
    case "$install" in *" $p"*) ;; *) fail "check: $p not installed: $install" ;; esac
done
case "$install" in *"| policy 101") ;; *) fail "check: apt-get install ran without a policy-rc.d denying starts" ;; esac
grep -q '^systemctl disable --now etcd.service' "$tmp/log" || fail "etcd.service not disabled and stopped: $(cat "$tmp/log")"
grep -q '^systemctl disable --now prometheus.service' "$tmp/log" || fail "prometheus.service not disabled and stopped"
[ ! -e "$tmp/root/usr/sbin/policy-rc.d" ] || fail "a policy-rc.d was left where there was none"

# bench-peer: Go and Debian's etcd sources, which check never asks for.
for p in golang-go golang-etcd-server-dev; do
    case "$install" in *" $p"*) fail "check installs $p, which only make bench-peer uses: $install" ;; esac
done
: >"$tmp/log"
run bench-peer || fail "deps.sh bench-peer exited $?: $(cat "$tmp/out")"
install=$(grep '^install' "$tmp/log")
for p in gcc etcd-server golang-go golang-etcd-server-dev; do
    case "$install" in *" $p"*) ;; *) fail "bench-peer: $p not installed: $install" ;; esac
done
case "$install" in *"| policy 101") ;; *) fail "bench-peer: apt-get install ran without a policy-rc.d denying starts" ;; esac

# deb: debian/control's Build-Depends (debhelper for debhelper-compat, no
# version, the first alternative) and the tools make deb and its test run.
: >"$tmp/log"
run deb || fail "deps.sh deb exited $?: $(cat "$tmp/out")"
install=$(grep '^install' "$tmp/log")
for p in gcc debhelper dh-python python3-all pybuild-plugin-pyproject libcjson-dev dpkg-dev lintian man-db; do
    case "$install " in *" $p "*) ;; *) fail "deb: $p not installed: $install" ;; esac
done
case "$install" in *debhelper-compat* | *"(="* | *:any*) fail "deb: a dependency taken whole: $install" ;; esac
case "$install" in *" etcd-server"*) fail "deb installs etcd-server, which only the tests use: $install" ;; esac
case "$install" in *"| policy 101") ;; *) fail "deb: apt-get install ran without a policy-rc.d denying starts" ;; esac

# A run killed while installing left its policy-rc.d in place and the
# admin's saved beside it: the next run puts the admin's back, not its own.
cp "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d.vigil-deps-saved"
printf '#!/bin/sh\nexit 101\n' >"$tmp/root/usr/sbin/policy-rc.d"
run deb || fail "deps.sh deb (after a killed run) exited $?: $(cat "$tmp/out")"
cmp -s "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d" || fail "after a killed run, the admin's policy-rc.d was not put back"
[ ! -e "$tmp/root/usr/sbin/policy-rc.d.vigil-deps-saved" ] || fail "after a killed run, the saved policy-rc.d was left"

# scripts/no-starts.sh on its own: allow_starts a second time (the EXIT
# trap after an explicit call) leaves the admin's policy-rc.d alone.
mkdir -p "$tmp/r2/usr/sbin"
cp "$tmp/admin-policy" "$tmp/r2/usr/sbin/policy-rc.d"
(root="$tmp/r2"; . "$src/scripts/no-starts.sh"; deny_starts && allow_starts && allow_starts) ||
    fail "no-starts.sh: deny_starts, allow_starts twice failed"
cmp -s "$tmp/admin-policy" "$tmp/r2/usr/sbin/policy-rc.d" || fail "a second allow_starts removed the admin's policy-rc.d"

# A set it does not know is a usage error.
run nonsense && fail "deps.sh nonsense: expected a usage error"
echo "7 passed, 0 failed"
