#!/bin/sh
# scripts/deb-test.sh: the Debian packages in dist/ (make deb) installed on
# this machine with apt-get, used as a user would use them, then purged
# without a trace. CI runs it (as root); `make deb-test` builds and runs it.
#
#   installed   apt-get install ./dist/*.deb, under a policy-rc.d that denies
#               every start (scripts/no-starts.sh); then no unit of theirs
#               enabled or running, /run/vigil made 1770 root:vigil
#   used        /usr/bin/vigil demo; vigil imported by /usr/bin/python3 from
#               dist-packages, a table used through the installed
#               libvigil.so.0, libvigil-etcd.so.0 loaded; C programs built
#               with `pkg-config vigil` (shared and static) and
#               `pkg-config vigil-etcd`, and with CMake's find_package(vigil
#               COMPONENTS etcd), run against /usr/lib; man vigil, man 7
#               vigil, man vigil_hb_register and others; each section 3
#               page in the -dev package of the header that declares it
#   purged      apt-get purge: every file and directory the packages had is
#               gone (directories other packages share excepted), /run/vigil
#               too, no unit state left
#
# Root only: otherwise it says so and exits 77 (skipped). It refuses to run
# when one of the packages is installed already (an admin's install is not
# this test's to purge), except on CI (CI=true), where it purges them first.
set -eu
top=$(cd "${0%/*}/.." && pwd)
cd "$top"
# Nothing of the build may stand in for the installed files.
unset PKG_CONFIG_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH PYTHONPATH VIGIL_LIBRARY VIGIL_ETCD_LIBRARY
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
failed=0
fail() { echo "deb-test: FAIL: $*" >&2; failed=1; }
ok() { echo "deb-test: ok: $*"; }

if [ "$(id -u)" != 0 ]; then
    echo "deb-test: skipped: installing packages takes root (run it as root, as CI does)"
    exit 77
fi
set -- ./dist/*.deb
[ -e "$1" ] || { echo "deb-test: no packages in dist/ (make deb)" >&2; exit 1; }
# Every apt-get waits up to 5 minutes for another apt or dpkg at work, and
# is not handed the locks' descriptors (8: no-starts.sh's, 9: this test's),
# which a daemon some maintainer script left behind would hold for ever.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@" 8>&- 9>&-; }
soversion=$(sh scripts/version.sh --soversion)
# One run at a time: another's packages are not this run's to purge.
mkdir -p /run/lock
exec 9>/run/lock/vigil-deb-test.lock
flock -w 900 9 || { echo "deb-test: another run held /run/lock/vigil-deb-test.lock for 15 minutes" >&2; exit 1; }
pkgs=""
for deb; do pkgs="$pkgs $(dpkg-deb -f "$deb" Package)"; done
for p in $pkgs; do
    if dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^.[^n]'; then
        if [ "${CI:-}" = true ]; then
            # On CI's machine, only an earlier run that was killed put it there.
            echo "deb-test: $p is installed already (an earlier run's): purged first"
            # shellcheck disable=SC2086
            apt_get purge -y -qq $pkgs >/dev/null 2>&1
            break
        fi
        echo "deb-test: $p is installed already: purge it first (apt-get purge$pkgs)" >&2
        exit 1
    fi
done
version=$(sh scripts/version.sh)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-deb-test.XXXXXX")
root=
# shellcheck source=scripts/no-starts.sh
. scripts/no-starts.sh
purge() {
    # shellcheck disable=SC2086
    apt_get purge -y -qq $pkgs >"$tmp/purge.log" 2>&1
}
cleanup() {
    allow_starts
    installed=""
    for p in $pkgs; do
        dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^.[^n]' && installed="$installed $p"
    done
    [ -z "$installed" ] || purge || echo "deb-test: could not purge$installed: $(cat "$tmp/purge.log")" >&2
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- installed --------------------------------------------------------------
start=$(date +%s)
policy_before=none
[ ! -e "$policy" ] || policy_before=$(cat "$policy")
deny_starts
apt_get install -y -qq --no-install-recommends "$@" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log" >&2
    echo "deb-test: apt-get install ./dist/*.deb failed" >&2
    exit 1
}
allow_starts
policy_after=none
[ ! -e "$policy" ] || policy_after=$(cat "$policy")
[ "$policy_after" = "$policy_before" ] || fail "$policy not put back as it was: '$policy_after'"
ok "installed$pkgs in $(( $(date +%s) - start )) s"
for p in $pkgs; do dpkg -L "$p"; done | sort -u >"$tmp/files"

# Where PID 1 is not systemd (a container, a chroot), nothing can start a
# unit: whether one runs is not asked (said below), the rest is.
systemd_runs=false
[ -d /run/systemd/system ] && systemd_runs=true
for unit in vigil-tick.service vigil-failover.service; do
    # /lib/systemd/system on Debian 12, /usr/lib/systemd/system after it.
    grep -Eqx "(/usr)?/lib/systemd/system/$unit" "$tmp/files" || fail "$unit not installed in /lib/systemd/system"
    # systemctl reads the unit files without systemd running.
    state=$(systemctl is-enabled "$unit" 2>/dev/null || true)
    [ "$state" = disabled ] || fail "$unit is '$state' after the install, not disabled"
    if [ "$systemd_runs" = true ] && systemctl -q is-active "$unit"; then
        fail "$unit is running after the install"
    fi
    if ls /etc/systemd/system/*.wants/"$unit" >/dev/null 2>&1; then
        fail "$unit enabled: $(ls /etc/systemd/system/*.wants/"$unit")"
    fi
done
for proc in /proc/[0-9]*; do
    if [ "$(readlink "$proc/exe" 2>/dev/null)" = /usr/bin/vigil ]; then
        fail "a /usr/bin/vigil runs after the install: pid ${proc#/proc/}: $(tr '\0' ' ' <"$proc/cmdline")"
    fi
done
if [ "$systemd_runs" = true ]; then
    ok "no unit enabled or running (systemctl is-enabled, is-active)"
else
    ok "no unit enabled (systemctl is-enabled, the .wants links), no /usr/bin/vigil running"
    echo "deb-test: skipped: whether systemd runs a unit (PID 1 is $(cat /proc/1/comm 2>/dev/null || echo unknown), not systemd: no /run/systemd/system)"
fi
getent group vigil >/dev/null || fail "no group vigil"
getent passwd vigil >/dev/null || fail "no user vigil"
mode=$(stat -c '%a %U %G' /run/vigil 2>/dev/null || echo missing)
[ "$mode" = "1770 root vigil" ] || fail "/run/vigil is '$mode', not '1770 root vigil'"
ok "/run/vigil $mode, user and group vigil"

# ---- used: the tool, Python ----------------------------------------------------
cd "$tmp"
[ "$(command -v vigil)" = /usr/bin/vigil ] || fail "vigil on PATH is $(command -v vigil), not /usr/bin/vigil"
/usr/bin/vigil --version | grep -q "$version" || fail "vigil --version: $(/usr/bin/vigil --version 2>&1)"
if timeout 120 /usr/bin/vigil demo >"$tmp/demo.log" 2>&1; then
    ok "/usr/bin/vigil demo: $(tail -n 1 "$tmp/demo.log")"
else
    cat "$tmp/demo.log" >&2
    fail "/usr/bin/vigil demo exited $?"
fi

# The etcd commands run vigil's helper, /usr/libexec/vigil/vigil-etcd: against
# a port nobody serves, the refused connection is etcd's error, not a
# missing helper.
[ -x /usr/libexec/vigil/vigil-etcd ] || fail "/usr/libexec/vigil/vigil-etcd is not installed"
/usr/bin/vigil group ls g --etcd http://127.0.0.1:1 >"$tmp/etcd.log" 2>&1 && fail "vigil group ls on a closed port exited 0"
grep -q "Connection refused" "$tmp/etcd.log" || fail "vigil group ls did not reach etcd: $(cat "$tmp/etcd.log")"
ok "/usr/bin/vigil group ls runs its etcd helper: $(cat "$tmp/etcd.log")"

env -i PATH="$PATH" HOME="$tmp" /usr/bin/python3 - "$tmp" "$version" >"$tmp/py.log" 2>&1 <<'PY' || { cat "$tmp/py.log" >&2; fail "python3-vigil"; }
import os, sys
import vigil
from vigil import _ffi

tmp, version = sys.argv[1], sys.argv[2]
assert vigil.__file__.startswith("/usr/lib/python3/dist-packages/vigil/"), vigil.__file__
assert vigil.__version__ == version, (vigil.__version__, version)
path = os.path.join(tmp, "py.hb")
with vigil.HeartbeatTable.create(path, 8) as table, table.registered() as slot:
    table.mark(slot, 3)
    table.beat(slot)
    table.clear(slot, 3)
maps = open("/proc/self/maps").read()
core = sorted({l.split()[-1] for l in maps.splitlines() if "libvigil.so" in l})
assert core and all(p.startswith("/usr/lib/") for p in core), core
_ffi.etcd_lib()
maps = open("/proc/self/maps").read()
etcd = sorted({l.split()[-1] for l in maps.splitlines() if "libvigil-etcd.so" in l})
assert etcd and all(p.startswith("/usr/lib/") for p in etcd), etcd
print("python3: vigil", vigil.__version__, "from", os.path.dirname(vigil.__file__), "over", core[0], "and", etcd[0])
PY
[ "$failed" = 1 ] || ok "$(tail -n 1 "$tmp/py.log")"

# ---- used: C, through pkg-config and CMake ------------------------------------------
cat >"$tmp/etcd.c" <<'C'
#include <vigil/etcd.h>
#include <vigil/group.h>
int main(void)
{
    vigil_etcd *e = 0;
    int rc = vigil_etcd_connect("http://127.0.0.1:1", &e); /* parses only: no server needed */
    vigil_etcd_close(e);
    return rc == 0 ? 0 : 1;
}
C
runs_over_usr_lib() { # PROGRAM LIB: runs, and the loader took LIB from /usr/lib
    ldd "$1" | grep -Eq "$2 => /(usr/)?lib/" || fail "$1: $2 not from /usr/lib: $(ldd "$1" | grep vigil)"
    "$1" "$tmp/c.hb" >/dev/null || fail "$1 exited $?"
    rm -f "$tmp/c.hb"
}
# shellcheck disable=SC2046
if cc -Wall -Wextra -Werror -o "$tmp/hello" "$top/examples/hello.c" $(pkg-config --cflags --libs vigil) &&
    cc -o "$tmp/hello_static" "$top/examples/hello.c" $(pkg-config --cflags vigil) \
        "$(pkg-config --variable=libdir vigil)/libvigil.a" -pthread &&
    cc -Wall -Wextra -Werror -o "$tmp/etcd" "$tmp/etcd.c" $(pkg-config --cflags --libs vigil-etcd); then
    runs_over_usr_lib "$tmp/hello" "libvigil.so.$soversion"
    ! ldd "$tmp/hello_static" | grep -q libvigil || fail "hello_static loads libvigil: $(ldd "$tmp/hello_static")"
    "$tmp/hello_static" "$tmp/s.hb" >/dev/null || fail "hello_static exited $?"
    runs_over_usr_lib "$tmp/etcd" "libvigil-etcd.so.$soversion"
    ok "C with pkg-config vigil (shared: $(pkg-config --cflags --libs vigil); static) and vigil-etcd"
else
    fail "C with pkg-config: did not build"
fi

mkdir "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(vigil $version REQUIRED COMPONENTS etcd)
add_executable(hello $top/examples/hello.c)
target_link_libraries(hello PRIVATE vigil::vigil)
add_executable(hello_static $top/examples/hello.c)
target_link_libraries(hello_static PRIVATE vigil::vigil_static)
add_executable(etcd $tmp/etcd.c)
target_link_libraries(etcd PRIVATE vigil::etcd)
CM
if cmake -S "$tmp/consumer" -B "$tmp/consumer/build" >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/consumer/build" >>"$tmp/cmake.log" 2>&1; then
    runs_over_usr_lib "$tmp/consumer/build/hello" "libvigil.so.$soversion"
    "$tmp/consumer/build/hello_static" "$tmp/s.hb" >/dev/null || fail "CMake hello_static exited $?"
    runs_over_usr_lib "$tmp/consumer/build/etcd" "libvigil-etcd.so.$soversion"
    grep -q "vigil_DIR:PATH=/usr/lib/" "$tmp/consumer/build/CMakeCache.txt" ||
        fail "find_package(vigil) found $(grep vigil_DIR "$tmp/consumer/build/CMakeCache.txt")"
    ok "C with CMake's find_package(vigil COMPONENTS etcd): vigil::vigil, vigil::vigil_static, vigil::etcd"
else
    cat "$tmp/cmake.log" >&2
    fail "C with CMake's find_package(vigil): did not build"
fi

# ---- used: the manual -----------------------------------------------------------
# In the C locale, as on a machine without LANG: troff warns there of what
# UTF-8 lets through (tests/man_warnings.sh does the same on the tree).
for page in "1 vigil" "7 vigil" "5 vigil-files" "3 vigil_hb_register" "3 vigil_hb_close" "3 vigil_etcd_acquire"; do
    # shellcheck disable=SC2086
    set -- $page
    text=$(LC_ALL=C MANWIDTH=80 man "$1" "$2" 2>"$tmp/man.err") || { fail "man $page: $(cat "$tmp/man.err")"; continue; }
    case "$text" in *"$2"*) ;; *) fail "man $page: the page does not name $2" ;; esac
    [ ! -s "$tmp/man.err" ] || fail "man $page: $(cat "$tmp/man.err")"
done
LC_ALL=C MANWIDTH=80 man vigil 2>/dev/null | head -n 5 | grep -q "make, inspect, watch" || fail "man vigil is not vigil(1)"
# Each section 3 page in the -dev package of its library: libvigil-etcd-dev
# for a function libvigil-etcd exports, libvigil-dev for the rest (the
# core's functions, its inline ones and its types).
# (each name without its version: vigil_etcd_close@@VIGIL_ETCD_0)
nm -D --defined-only /usr/lib/*/"libvigil-etcd.so.$soversion" | awk '{ sub(/@.*/, "", $3); print $3 }' >"$tmp/etcd.syms"
for p in libvigil-dev libvigil-etcd-dev; do
    dpkg -L "$p" | sed -n 's|^/usr/share/man/man3/\(.*\)\.3\.gz$|\1|p' | while read -r fn; do
        if grep -qx "$fn" "$tmp/etcd.syms"; then want=libvigil-etcd-dev; else want=libvigil-dev; fi
        [ "$p" = "$want" ] || echo "$fn.3 is in $p, not in $want"
    done
done >"$tmp/pages"
[ ! -s "$tmp/pages" ] || fail "section 3 pages in the wrong package: $(cat "$tmp/pages")"
[ "$failed" = 1 ] || ok "man vigil, 7 vigil, 5 vigil-files, vigil_hb_register, vigil_hb_close (a link), vigil_etcd_acquire"
cd "$top"

# ---- removed: prerm stops the units where systemd runs ---------------------------
# The installed prerm, run by hand in a mount namespace of its own over a
# /run of its own (with /run/systemd/system, as where systemd runs, and
# without), a stand-in deb-systemd-invoke first on PATH noting its
# arguments: `remove` stops both units where systemd runs, and nothing
# else asks for anything. The host's /run is never touched.
prerm=/var/lib/dpkg/info/vigil.prerm
mkdir "$tmp/fake"
printf '#!/bin/sh\necho "$*" >>"$INVOKED"\n' >"$tmp/fake/deb-systemd-invoke"
chmod 755 "$tmp/fake/deb-systemd-invoke"
in_own_run() { # SYSTEMD(yes|no) ARG: the prerm ARG, deb-systemd-invoke's calls in $tmp/invoked
    : >"$tmp/invoked"
    env -u DPKG_ROOT INVOKED="$tmp/invoked" PATH="$tmp/fake:$PATH" unshare -m --propagation private sh -c '
        mount -t tmpfs -o mode=755 vigil-deb-test /run || exit 1
        [ "$1" = no ] || mkdir -p /run/systemd/system
        sh "$2" "$3"' sh "$1" "$prerm" "$2" >"$tmp/prerm.log" 2>&1
}
if [ ! -f "$prerm" ]; then
    fail "no $prerm"
elif ! unshare -m --propagation private true 2>/dev/null; then
    # (a chroot: its / is no mount point, and a /run mounted without a
    # private namespace could show through to the host)
    echo "deb-test: skipped: the prerm's stop (no private mount namespace here: $(unshare -m --propagation private true 2>&1 | head -n 1))"
else
    in_own_run yes remove || fail "prerm remove (systemd) exited $?: $(cat "$tmp/prerm.log")"
    [ "$(cat "$tmp/invoked")" = "stop vigil-tick.service vigil-failover.service" ] ||
        fail "prerm remove where systemd runs: deb-systemd-invoke '$(cat "$tmp/invoked")', not 'stop vigil-tick.service vigil-failover.service'"
    for run in "yes upgrade" "yes deconfigure" "no remove"; do
        # shellcheck disable=SC2086
        in_own_run $run || fail "prerm $run exited $?: $(cat "$tmp/prerm.log")"
        [ ! -s "$tmp/invoked" ] || fail "prerm ${run#* } (systemd: ${run%% *}): deb-systemd-invoke $(cat "$tmp/invoked")"
    done
    [ "$failed" = 1 ] || ok "prerm remove stops both units where systemd runs; upgrade, deconfigure and no systemd stop none"
fi

# ---- purged ---------------------------------------------------------------------
start=$(date +%s)
purge || { cat "$tmp/purge.log" >&2; fail "apt-get purge$pkgs failed"; }
for p in $pkgs; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
    case "$status" in "" | un*) ;; *) fail "$p still '$status' after the purge" ;; esac
done
# A file of theirs left, or a directory no other package owns.
while read -r f; do
    [ "$f" != /. ] || continue
    [ -e "$f" ] || [ -L "$f" ] || continue
    if [ -d "$f" ]; then
        dpkg -S "$f" >/dev/null 2>&1 || fail "directory left after the purge: $f ($(ls -A "$f" | head -n 3))"
    else
        fail "file left after the purge: $f"
    fi
done <"$tmp/files"
[ ! -e /run/vigil ] || fail "/run/vigil left after the purge"
if ls /var/lib/systemd/deb-systemd-helper-enabled/vigil-* /etc/systemd/system/*.wants/vigil-* >/dev/null 2>&1; then
    fail "unit state left: $(ls /var/lib/systemd/deb-systemd-helper-enabled/vigil-* /etc/systemd/system/*.wants/vigil-* 2>/dev/null)"
fi
[ "$failed" = 1 ] || ok "purged in $(( $(date +%s) - start )) s: no file of theirs left ($(wc -l <"$tmp/files") paths checked)"

if [ "$failed" = 0 ]; then
    echo "1 passed, 0 failed"
else
    echo "0 passed, 1 failed"
fi
exit "$failed"
