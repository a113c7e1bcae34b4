#!/bin/sh
# Installs the build into a temporary prefix and builds a consumer against
# it twice: with pkg-config and with find_package(vigil).
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR CC
set -eu
build=$1 src=$2 cc=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/vigil/vigil.h"
ls "$tmp/prefix"/lib*/libvigil.so.0 >/dev/null
libdir=$(dirname "$(ls "$tmp/prefix"/lib*/libvigil.a)")

PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists vigil
"$cc" -o "$tmp/hello" "$src/examples/hello.c" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs vigil) -Wl,-rpath,"$libdir"
"$tmp/hello" "$tmp/hello.hb" >/dev/null

mkdir "$tmp/consumer"
cat > "$tmp/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(vigil REQUIRED)
add_executable(hello $src/examples/hello.c)
target_link_libraries(hello PRIVATE vigil::vigil)
CM
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
"$tmp/consumer/build/hello" "$tmp/hello2.hb" >/dev/null

# The headers as C++17 (g++ and clang++, where installed): the same source
# built as C and as C++, one process of each kind (and of each C++
# compiler) in one table and at one barrier, every one of them passing.
cat > "$tmp/mk.c" <<'C'
#include <vigil/vigil.h>
int main(int argc, char **argv)
{
    vigil_hb *hb;
    vigil_barrier *b;
    (void)argc;
    return vigil_hb_create(argv[1], 16, &hb) || vigil_barrier_create(argv[2], hb, 1000, &b);
}
C
pcflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs vigil)
"$cc" -o "$tmp/mk" "$tmp/mk.c" $pcflags -Wl,-rpath,"$libdir"
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pair_c" "$src/tests/consumer_pair.c" $pcflags -Wl,-rpath,"$libdir"
pair="$tmp/pair_c"
for cxx in g++ clang++; do
    command -v "$cxx" >/dev/null 2>&1 || continue
    "$cxx" -std=c++17 -Wall -Wextra -Werror -x c++ -o "$tmp/pair_$cxx" "$src/tests/consumer_pair.c" -x none \
        $pcflags -Wl,-rpath,"$libdir"
    pair="$pair $tmp/pair_$cxx"
done
"$tmp/mk" "$tmp/pair.hb" "$tmp/pair.barrier"
n=0; for p in $pair; do n=$((n + 1)); done
pids=""
for p in $pair; do timeout 60 "$p" "$tmp/pair.hb" "$tmp/pair.barrier" $n & pids="$pids $!"; done
for p in $pids; do wait "$p"; done

# The installed tool, and, with the adapter, its etcd helper
# (LIBEXECDIR/vigil/vigil-etcd), found from the installed vigil's own place.
bindir=$(dirname "$(ls "$tmp/prefix"/*bin/vigil)")
"$bindir/vigil" --version >/dev/null
# The etcd adapter, when it was built: its own .pc and the vigil::etcd target.
if [ -f "$libdir/pkgconfig/vigil-etcd.pc" ]; then
    ls "$tmp/prefix"/*/vigil/vigil-etcd >/dev/null
    rc=0; PATH=/nonexistent "$bindir/vigil" agent 2>"$tmp/agent.err" || rc=$?
    if [ "$rc" != 2 ] || ! grep -q "missing --etcd" "$tmp/agent.err"; then
        echo "install_consumer: the installed vigil did not run its helper (exit $rc): $(cat "$tmp/agent.err")" >&2
        exit 1
    fi
    cat > "$tmp/etcd.c" <<'C'
#include <vigil/etcd.h>
#include <vigil/group.h>
int main(void)
{
    vigil_etcd *e = 0;
    /* Links and runs: connecting needs no server, it only parses. */
    int rc = vigil_etcd_connect("http://127.0.0.1:1", &e);
    vigil_group_watch_close(0);
    vigil_etcd_close(e);
    return rc == 0 && vigil_group_leave(0) == 0 ? 0 : 1;
}
C
    for cxx in g++ clang++; do # the groups' header as C++17 too
        command -v "$cxx" >/dev/null 2>&1 || continue
        "$cxx" -std=c++17 -Wall -Wextra -Werror -x c++ -fsyntax-only "$tmp/etcd.c" \
            $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags vigil-etcd)
    done
    "$cc" -o "$tmp/etcd" "$tmp/etcd.c" \
        $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs vigil-etcd) -Wl,-rpath,"$libdir"
    "$tmp/etcd"
    # The options struct as C++ sees it (its namespace field is namespace_
    # there): the same source, built by each C++ compiler, connects alike.
    cat > "$tmp/etcd_opts.c" <<'C'
#include <vigil/etcd.h>
#include <string.h>
int main(void)
{
    struct vigil_etcd_options o;
    memset(&o, 0, sizeof(o));
#ifdef __cplusplus
    o.namespace_ = "app/";
#else
    o.namespace = "app/";
#endif
    o.request_timeout_ms = 500;
    vigil_etcd *e = 0;
    int rc = vigil_etcd_connect_opts("127.0.0.1:1", &o, &e);
    vigil_etcd_close(e);
    return rc == 0 && sizeof(o) == 6 * sizeof(const char *) + 2 * sizeof(uint32_t) ? 0 : 1;
}
C
    etcdflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs vigil-etcd)
    "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/etcd_opts_c" "$tmp/etcd_opts.c" $etcdflags -Wl,-rpath,"$libdir"
    "$tmp/etcd_opts_c"
    for cxx in g++ clang++; do
        command -v "$cxx" >/dev/null 2>&1 || continue
        "$cxx" -std=c++17 -Wall -Wextra -Werror -x c++ -o "$tmp/etcd_opts_$cxx" "$tmp/etcd_opts.c" -x none \
            $etcdflags -Wl,-rpath,"$libdir"
        "$tmp/etcd_opts_$cxx"
    done
    cat >> "$tmp/consumer/CMakeLists.txt" <<CM
add_executable(etcd_consumer $tmp/etcd.c)
target_link_libraries(etcd_consumer PRIVATE vigil::etcd)
CM
    cmake --build "$tmp/consumer/build" >/dev/null
    "$tmp/consumer/build/etcd_consumer"
fi
echo "1 passed, 0 failed"
