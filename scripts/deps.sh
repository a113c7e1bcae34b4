#!/bin/sh
# scripts/deps.sh [build|check|bench-peer|deb]: installs what is missing from Debian's
# packages, when run as root; otherwise says what is missing and carries on
# (the etcd adapter and its tests are then skipped, never faked).
#
#   build  what the build needs: a compiler, make, cmake, pkg-config and the
#          libraries the build links (libcurl, cJSON). No
#          package of this set runs a service. `make build`, `make demo`.
#   check  (the default) the build's needs and what the tests use: etcd and
#          etcdctl, spin, promtool (prometheus), Python with cffi and pytest,
#          Debian's cargo.
#          `make check`, the sanitizer builds.
#   bench-peer  the build's needs, etcd, and Go with Debian's etcd sources
#          (golang-go, golang-etcd-server-dev): `make bench-peer` only.
#   deb    the build's needs and what building and trying the Debian
#          packages takes: debian/control's Build-Depends and
#          build-essential (`apt-get build-dep` on the tree, when
#          dpkg-checkbuilddeps finds one missing), dpkg-dev, lintian,
#          man-db. `make deb`.
#
# No install leaves a system service started: apt-get runs under a
# policy-rc.d that denies every start (put back as it was afterwards), and
# the services of the packages installed now are then disabled and, where
# systemd runs, stopped. etcd-server and prometheus are test tools here,
# not services of this host: a system etcd on 2379 would also stand in the
# way of the test cluster. apt-get waits up to 5 minutes for another apt
# or dpkg to finish (DPkg::Lock::Timeout) rather than fail.
#
# For the test of this script (tests/deps_policy.sh) alone: VIGIL_DEPS_ROOT
# prefixes the system paths it writes or looks at, VIGIL_DEPS_APT replaces
# apt-get.
set -u
set_name=${1:-check}
case "$set_name" in
build|check|bench-peer|deb) ;;
*) echo "usage: scripts/deps.sh [build|check|bench-peer|deb]" >&2; exit 2 ;;
esac
root=${VIGIL_DEPS_ROOT:-}
case "$0" in */*) here=${0%/*} ;; *) here=. ;; esac
apt=${VIGIL_DEPS_APT:-apt-get}
need=""
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
py="$root/usr/bin/python3" # Debian's, which python/tests/run.sh prefers
have_py() { "$py" -c "import $1" 2>/dev/null; }

# ---- what the build needs ----------------------------------------------------
have_cmd cc || need="$need gcc libc6-dev"
have_cmd make || need="$need make"
have_cmd cmake || need="$need cmake"
have_cmd pkg-config || need="$need pkg-config"
have_pc libcurl || need="$need libcurl4-openssl-dev"
have_pc libcjson || need="$need libcjson-dev"
have_pc libprotobuf-c || need="$need libprotobuf-c-dev" # etcd's gRPC messages (src/etcd/proto/)
have_cmd protoc-c || need="$need protobuf-c-compiler"

# ---- what the tests use --------------------------------------------------------
if [ "$set_name" = check ]; then
    have_cmd etcd || need="$need etcd-server"
    have_cmd etcdctl || need="$need etcd-client"
    have_cmd spin || need="$need spin"
    have_cmd promtool || need="$need prometheus"
    [ -x "$py" ] || need="$need python3"
    have_py cffi || need="$need python3-cffi"
    have_py pytest || need="$need python3-pytest"
    have_py pytest_asyncio || need="$need python3-pytest-asyncio"
    have_py pip || need="$need python3-pip" # the Python README's venv install, which the docs test runs
    have_py h2 || need="$need python3-h2" # tests/grpc_fake.py: a gRPC endpoint that fails after the request left
    # Debian's cargo (and its rustc, 1.63: the Rust crate's MSRV) for the
    # crate's tests, not a rustup toolchain that may be on PATH: no crate
    # registry is reachable here.
    [ -x "$root/usr/bin/cargo" ] || need="$need cargo"
    have_cmd valgrind || need="$need valgrind" # the Rust crate's tests under memcheck (rust_valgrind)
fi

# ---- what make bench-peer uses ---------------------------------------------------
if [ "$set_name" = bench-peer ]; then
    have_cmd etcd || need="$need etcd-server"
    have_cmd curl || have_cmd etcdctl || need="$need curl" # tests/etcd_server.sh asks etcd if it is up
    have_cmd go || need="$need golang-go"
    [ -d "$root/usr/share/gocode/src/go.etcd.io/etcd/clientv3/concurrency" ] || need="$need golang-etcd-server-dev"
fi

# ---- what building the Debian packages needs ------------------------------------
# debian/control's Build-Depends, build-essential among them, as
# dpkg-checkbuilddeps judges them (virtual packages such as
# dh-sequence-python3 included): when it finds one missing, or is missing
# itself, `apt-get build-dep` on the tree installs them all. Then what make
# deb and scripts/deb-test.sh run.
build_dep=""
if [ "$set_name" = deb ]; then
    if ! (cd "$here/.." && dpkg-checkbuilddeps) >/dev/null 2>&1; then # missing, or missing one
        build_dep=$(cd "$here/.." && pwd)
    fi
    have_cmd dpkg-buildpackage || need="$need dpkg-dev"
    have_cmd lintian || need="$need lintian"
    have_cmd man || need="$need man-db"
fi

[ -z "$need" ] && [ -z "$build_dep" ] && exit 0
what=$need
[ -z "$build_dep" ] || what="$what debian/control's Build-Depends"
if [ "$(id -u)" -ne 0 ] || ! have_cmd "$apt"; then
    echo "deps: missing$what (run as root to install them); continuing without" >&2
    exit 0
fi

# ---- installing, with every service start denied ----------------------------
# shellcheck source=scripts/no-starts.sh
. "$here/no-starts.sh"
deny_starts || exit 1
trap allow_starts EXIT
trap 'exit 130' INT TERM

echo "deps: installing$what"
export DEBIAN_FRONTEND=noninteractive
# Another apt-get or dpkg at work (an unattended upgrade, the packages'
# test of another checkout): waited for, up to 5 minutes, not failed on.
# Fd 8, no-starts.sh's lock, not handed down: a daemon some maintainer
# script leaves behind would hold it for ever.
apt_get() { "$apt" -o DPkg::Lock::Timeout=300 "$@" 8>&-; }
apt_get update -qq >/dev/null 2>&1 || true
if [ -n "$build_dep" ]; then
    apt_get build-dep -y -qq --no-install-recommends "$build_dep/" >/dev/null 2>&1 || {
        echo "deps: apt-get build-dep $build_dep/ (debian/control's Build-Depends) failed" >&2
        exit 1
    }
fi
if [ -n "$need" ]; then
    # shellcheck disable=SC2086
    apt_get install -y -qq --no-install-recommends $need >/dev/null 2>&1 || {
        echo "deps: apt-get install$need failed" >&2
        exit 1
    }
fi

# ---- and none left enabled or running -----------------------------------------
# The units and init scripts of the packages installed now: a package's
# postinst enables them for the next boot even when its start was denied.
# (The build dependencies are tools: none has a service.)
for pkg in $need; do
    dpkg -L "$pkg" 2>/dev/null | while read -r f; do
        case "$f" in
        */systemd/system/*.service)
            unit=${f##*/}
            case "$unit" in *@.service) continue ;; esac
            if [ -d "$root/run/systemd/system" ]; then
                systemctl disable --now "$unit" >/dev/null 2>&1 || true
            elif have_cmd systemctl; then
                systemctl disable "$unit" >/dev/null 2>&1 || true
            fi
            echo "deps: $pkg: $unit disabled (a test tool here, not a service)"
            ;;
        /etc/init.d/*)
            [ -d "$root/run/systemd/system" ] || ! have_cmd update-rc.d ||
                update-rc.d "${f##*/}" disable >/dev/null 2>&1 || true
            ;;
        esac
    done
done
exit 0
