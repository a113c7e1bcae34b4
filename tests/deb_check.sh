#!/bin/sh
# scripts/deb-check.sh on packages made wrong on purpose, each beside a
# right one: a library whose soname is not its package's (libvigil.so.1 in
# libvigil0, its symbols and shlibs files still saying 0), and a program
# that names the directory it was built in. Needs cc, objdump, dpkg-deb.
# Usage: deb_check.sh SOURCE_DIR
set -u
src=$1
for t in cc objdump dpkg-deb; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: no $t"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-deb-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

# deb PACKAGE SONAME|- [FILE TEXT]: $tmp/PACKAGE.deb with the library
# SONAME (built with that soname; its symbols and shlibs files always say
# libvigil.so.0 in libvigil0), and FILE holding TEXT.
deb() {
    root="$tmp/$1"
    rm -rf "$root"
    mkdir -p "$root/DEBIAN" "$root/usr/lib"
    printf 'Package: %s\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n t\n' "$1" \
        >"$root/DEBIAN/control"
    if [ "$2" != - ]; then
        echo 'int vigil_x(void) { return 0; }' >"$tmp/x.c"
        cc -shared -fPIC -Wl,-soname,"$2" -o "$root/usr/lib/$2.0.0" "$tmp/x.c" || fail "cc -shared failed"
        ln -s "$2.0.0" "$root/usr/lib/$2"
        printf 'libvigil.so.0 libvigil0 #MINVER#\n vigil_x@Base 1\n' >"$root/DEBIAN/symbols"
        printf 'libvigil 0 libvigil0 (>= 1)\n' >"$root/DEBIAN/shlibs"
    fi
    if [ $# -gt 2 ]; then
        mkdir -p "$root/${3%/*}"
        printf '%s\n' "$4" >"$root/$3"
    fi
    dpkg-deb --root-owner-group -b "$root" "$tmp/$1.deb" >/dev/null || fail "dpkg-deb -b $1 failed"
}
check() { sh "$src/scripts/deb-check.sh" "$tmp/build" "$@" >"$tmp/out" 2>&1; }

deb libvigil0 libvigil.so.0
check "$tmp/libvigil0.deb" || fail "a right package found wrong: $(cat "$tmp/out")"

# SOVERSION 1 built, the packaging left at 0.
deb libvigil0 libvigil.so.1
check "$tmp/libvigil0.deb" && fail "libvigil.so.1 in libvigil0 passed"
grep -q "libvigil0: ships /usr/lib/libvigil.so.1.0.0, whose soname libvigil.so.1 belongs in a package libvigil1" "$tmp/out" ||
    fail "the soname's package not named: $(cat "$tmp/out")"
grep -q "symbols file does not begin 'libvigil.so.1 libvigil0" "$tmp/out" || fail "the symbols file not named: $(cat "$tmp/out")"
grep -q "shlibs file does not say 'libvigil 1 libvigil0'" "$tmp/out" || fail "the shlibs file not named: $(cat "$tmp/out")"

# libfoo2.so.N goes in libfoo2-N.
deb libvigil2-0 libvigil2.so.0
check "$tmp/libvigil2-0.deb"
grep -q "belongs in" "$tmp/out" && fail "libvigil2.so.0 in libvigil2-0 said misplaced: $(cat "$tmp/out")"

# A program that knows its build directory, beside a library that does not.
deb libvigil0 libvigil.so.0
deb vigil - usr/bin/vigil "helper in $tmp/build/obj-x86_64-linux-gnu"
check "$tmp/libvigil0.deb" "$tmp/vigil.deb" && fail "a package naming the build directory passed"
grep -qx "vigil: names the build directory $tmp/build: /usr/bin/vigil" "$tmp/out" ||
    fail "the file naming the build directory not named: $(cat "$tmp/out")"
[ "$(grep -c . "$tmp/out")" = 1 ] || fail "more than the one problem: $(cat "$tmp/out")"
echo "4 passed, 0 failed"
