#!/bin/sh
# scripts/deps.sh against a fake system: apt-get, dpkg, systemctl and id
# are stand-ins on a PATH that has nothing else the script looks for, and
# VIGIL_DEPS_ROOT is a scratch root. It checks that `build` asks only for
# what the build needs (no package with a service, no test tool), that
# `check` asks for the test tools too, that every install runs under a
# policy-rc.d denying starts (101), that the admin's own policy-rc.d is
# put back (and none is left where there was none), that the service
# of a package installed now is disabled and stopped, that `deb` has
# apt-get build-dep install debian/control's Build-Depends (and so
# build-essential), and that every apt-get waits for another's lock.
# Usage: deps_policy.sh SOURCE_DIR
set -u
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-deps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

bin="$tmp/bin"
mkdir -p "$bin"
# The few real tools the script itself runs, and nothing it looks for.
for t in mkdir mv rm chmod printf cat flock; do
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
echo "$*" >>"$LOG.all"
[ ! -e /proc/$$/fd/8 ] || echo "fd 8 (the lock) handed to apt-get $*" >>"$LOG.all"
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
install=$(grep ' install ' "$tmp/log")
for p in gcc cmake pkg-config libcurl4-openssl-dev libcjson-dev; do
    case "$install" in *" $p"*) ;; *) fail "build: $p not installed: $install" ;; esac
done
for p in etcd-server etcd-client prometheus spin python3-pytest python3-h2 cargo; do
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
install=$(grep ' install ' "$tmp/log")
for p in gcc etcd-server etcd-client prometheus spin python3-cffi python3-pytest python3-pytest-asyncio python3-h2 cargo; do
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
install=$(grep ' install ' "$tmp/log")
for p in gcc etcd-server golang-go golang-etcd-server-dev; do
    case "$install" in *" $p"*) ;; *) fail "bench-peer: $p not installed: $install" ;; esac
done
case "$install" in *"| policy 101") ;; *) fail "bench-peer: apt-get install ran without a policy-rc.d denying starts" ;; esac

# deb: debian/control's Build-Depends, build-essential among them, through
# `apt-get build-dep` on the tree (which reads debian/control itself, virtual
# dh-sequence-* included) when dpkg-checkbuilddeps is missing or says one
# is missing; and the tools make deb and its test run.
: >"$tmp/log"
run deb || fail "deps.sh deb exited $?: $(cat "$tmp/out")"
install=$(grep ' install ' "$tmp/log")
build_dep=$(grep ' build-dep ' "$tmp/log")
for p in gcc dpkg-dev lintian man-db; do
    case "$install " in *" $p "*) ;; *) fail "deb: $p not installed: $install" ;; esac
done
case "$build_dep" in
*" build-dep -y "*" $src/ | policy 101" | *" build-dep -y "*" $(cd "$src" && pwd)/ | policy 101") ;;
*) fail "deb: no apt-get build-dep of $src/ under a policy-rc.d denying starts: $(cat "$tmp/log")" ;;
esac
case "$install" in *" etcd-server"*) fail "deb installs etcd-server, which only the tests use: $install" ;; esac
case "$install" in *"| policy 101") ;; *) fail "deb: apt-get install ran without a policy-rc.d denying starts" ;; esac
# dpkg-checkbuilddeps content: no build-dep; finding one missing: build-dep.
printf '#!/bin/sh\nexit 0\n' >"$bin/dpkg-checkbuilddeps"
chmod 755 "$bin/dpkg-checkbuilddeps"
: >"$tmp/log"
run deb || fail "deps.sh deb (build dependencies there) exited $?: $(cat "$tmp/out")"
! grep -q ' build-dep ' "$tmp/log" || fail "deb: apt-get build-dep with every build dependency there: $(cat "$tmp/log")"
printf '#!/bin/sh\necho "dpkg-checkbuilddeps: error: Unmet build dependencies: build-essential:native" >&2\nexit 1\n' >"$bin/dpkg-checkbuilddeps"
: >"$tmp/log"
run deb || fail "deps.sh deb (build-essential missing) exited $?: $(cat "$tmp/out")"
grep -q ' build-dep -y ' "$tmp/log" || fail "deb: no apt-get build-dep with build-essential missing: $(cat "$tmp/log")"
rm -f "$bin/dpkg-checkbuilddeps"

# Every apt-get of every set waits for another apt or dpkg at work instead
# of failing.
nolock=$(grep -v '^-o DPkg::Lock::Timeout=[1-9][0-9]* ' "$tmp/log.all")
[ -z "$nolock" ] || fail "apt-get run without DPkg::Lock::Timeout, or given the lock: $nolock"

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

# Two at once (deps.sh here, deb-test.sh of another checkout): the second
# waits for the first's policy-rc.d to be put back before saving the one
# in place as the admin's. The lock held here; deps.sh found waiting on
# it (its flock child), nothing installed meanwhile; then released.
cp "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d"
mkfifo "$tmp/hold"
exec 7<>"$tmp/hold" # read-write: opens at once; a line written releases the holder
mkdir -p "$tmp/root/run/lock"
flock "$tmp/root/run/lock/vigil-no-starts.lock" sh -c ': >"$2"; read -r x <"$1"' sh "$tmp/hold" "$tmp/locked" &
holder=$!
wait_for() { # CONDITION WHAT: CONDITION true within 30 s, else fail saying WHAT
    i=0
    until eval "$1"; do
        i=$((i + 1))
        [ $i -lt 300 ] || { echo >&7; wait; fail "$2"; }
        sleep 0.1
    done
}
wait_for '[ -e "$tmp/locked" ]' "the test's flock never took the lock"
: >"$tmp/log"
run deb &
runner=$!
wait_for 'pgrep -x flock -P "$(pgrep -P "$runner" | paste -sd, -)" >/dev/null 2>&1' "deps.sh never waited on the lock"
[ ! -s "$tmp/log" ] || fail "apt-get ran while another held the lock: $(cat "$tmp/log")"
cmp -s "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d" || fail "policy-rc.d replaced while another held the lock"
echo >&7
wait "$holder"
wait "$runner" || fail "deps.sh deb (after waiting) exited $?: $(cat "$tmp/out")"
exec 7>&-
grep -q ' install .*| policy 101' "$tmp/log" || fail "after waiting: no install under a policy-rc.d denying starts"
cmp -s "$tmp/admin-policy" "$tmp/root/usr/sbin/policy-rc.d" || fail "after waiting: the admin's policy-rc.d not put back"

# A set it does not know is a usage error.
run nonsense && fail "deps.sh nonsense: expected a usage error"
echo "10 passed, 0 failed"
