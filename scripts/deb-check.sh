#!/bin/sh
# scripts/deb-check.sh BUILD_DIR DEB...: what lintian does not make an
# error of, checked in built packages (scripts/deb.sh runs it on dist/;
# tests/deb_check.sh tries it on packages made wrong on purpose):
#
#   a shared library in a package its soname does not name (Debian's
#           rule: libfoo.so.N in libfooN, libfoo2.so.N in libfoo2-N; a
#           soname changed in CMake alone would go out as libvigil0), or
#           whose symbols or shlibs file names another soname or package
#   BUILD_DIR named in a packaged file: a program that looks there once
#           installed, a file that tells where it was built
#
# Each problem on a line of its own; exit 1 if there is one.
set -eu
[ $# -ge 2 ] || { echo "usage: scripts/deb-check.sh BUILD_DIR DEB..." >&2; exit 2; }
build_dir=$1
shift
x=$(mktemp -d "${TMPDIR:-/tmp}/vigil-deb-check.XXXXXX")
trap 'rm -rf "$x"' EXIT
for deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    rm -rf "$x/root" "$x/control"
    dpkg-deb -x "$deb" "$x/root"
    dpkg-deb -e "$deb" "$x/control"
    find "$x/root" -type f -name 'lib*.so.*' | while read -r so; do
        soname=$(objdump -p "$so" | sed -n 's/^ *SONAME *//p')
        [ -n "$soname" ] || { echo "$pkg: ${so#"$x/root"} has no soname"; continue; }
        base=${soname%.so.*} abi=${soname##*.so.}
        case "$base" in *[0-9]) want=$base-$abi ;; *) want=$base$abi ;; esac
        [ "$pkg" = "$want" ] || echo "$pkg: ships ${so#"$x/root"}, whose soname $soname belongs in a package $want"
        head -n 1 "$x/control/symbols" 2>/dev/null | grep -qxF "$soname $pkg #MINVER#" ||
            echo "$pkg: its symbols file does not begin '$soname $pkg #MINVER#'"
        grep -q "^$base $abi $pkg\\( \\|\$\\)" "$x/control/shlibs" 2>/dev/null ||
            echo "$pkg: its shlibs file does not say '$base $abi $pkg'"
    done
    grep -rlF -e "$build_dir" "$x/root" | sed "s|^$x/root|$pkg: names the build directory $build_dir: |" || true
done >"$x/wrong"
cat "$x/wrong"
[ ! -s "$x/wrong" ]
