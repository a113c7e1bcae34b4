#!/bin/sh
# Installs what the build and the tests need and is missing, from Debian's
# packages, when run as root; otherwise says what is missing and carries on
# (the etcd adapter and its tests are then skipped, never faked).
set -u
need=""
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pc() { pkg-config --exists "$1" 2>/dev/null; }

have_cmd cc || need="$need gcc libc6-dev"
have_cmd make || need="$need make"
have_cmd cmake || need="$need cmake"
have_cmd pkg-config || need="$need pkg-config"
have_pc libcurl || need="$need libcurl4-openssl-dev"
have_pc libcjson || need="$need libcjson-dev"
have_cmd etcd || need="$need etcd-server"
have_cmd etcdctl || need="$need etcd-client"
have_cmd spin || need="$need spin"
have_cmd promtool || need="$need prometheus"
have_pc libsystemd || need="$need libsystemd-dev"
[ -x /usr/bin/python3 ] || need="$need python3"
/usr/bin/python3 -c 'import cffi' 2>/dev/null || need="$need python3-cffi"
/usr/bin/python3 -c 'import pytest' 2>/dev/null || need="$need python3-pytest"
/usr/bin/python3 -c 'import pytest_asyncio' 2>/dev/null || need="$need python3-pytest-asyncio"
# Debian's cargo (and its rustc, 1.63: the Rust crate's MSRV), not a rustup
# toolchain that may be on PATH: no crate registry is reachable here.
[ -x /usr/bin/cargo ] || need="$need cargo"

[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ] && have_cmd apt-get; then
    echo "deps: installing$need"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 || {
        echo "deps: apt-get install$need failed" >&2
        exit 1
    }
else
    echo "deps: missing$need (run as root to install them); continuing without" >&2
fi
exit 0
