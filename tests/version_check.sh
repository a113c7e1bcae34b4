#!/bin/sh
# scripts/version.sh --check on copies of the files it reads, each made
# wrong on purpose: it names the file, and passes again once mended.
# Usage: version_check.sh SOURCE_DIR
set -u
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-version.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
t="$tmp/tree"
mkdir -p "$t/scripts" "$t/python/vigil" "$t/rust"
cp "$src/CMakeLists.txt" "$t/"
cp "$src/scripts/version.sh" "$t/scripts/"
cp -r "$src/debian" "$src/man" "$t/"
cp "$src/python/pyproject.toml" "$t/python/"
cp "$src/python/vigil/__init__.py" "$src/python/vigil/_ffi.py" "$t/python/vigil/"
cp "$src/rust/Cargo.toml" "$src/rust/Cargo.lock" "$t/rust/"
check() { sh "$t/scripts/version.sh" --check >"$tmp/out" 2>&1; }
check || fail "the copy of the tree fails: $(cat "$tmp/out")"
passed=0

# wrong FILE SED-EXPRESSION EXPECTED: FILE edited, the check fails naming
# EXPECTED; FILE put back, it passes.
wrong() {
    cp "$t/$1" "$tmp/saved"
    sed -i "$2" "$t/$1"
    cmp -s "$t/$1" "$tmp/saved" && fail "$1: '$2' changed nothing"
    check && fail "$1 '$2': the check passed"
    grep -qF "$3" "$tmp/out" || fail "$1 '$2': expected '$3', got: $(cat "$tmp/out")"
    cp "$tmp/saved" "$t/$1"
    check || fail "$1 put back: the check fails: $(cat "$tmp/out")"
    passed=$((passed + 1))
}
wrong rust/Cargo.lock '/^name = "vigil"$/{n;s/^version = .*/version = "9.9.9"/;}' "rust/Cargo.lock says 9.9.9"
wrong rust/Cargo.toml '/^\[package\]/,/^\[/s/^version = .*/version = "9.9.9"/' "rust/Cargo.toml says 9.9.9"
wrong debian/changelog '1s/(.*)/(9.9.9)/' "debian/changelog says 9.9.9"
# A new ABI number, the packaging left behind: each file named.
wrong CMakeLists.txt 's/^set(VIGIL_SOVERSION [0-9]*)/set(VIGIL_SOVERSION 99)/' "debian/control has no package libvigil99"
wrong CMakeLists.txt 's/^set(VIGIL_SOVERSION [0-9]*)/set(VIGIL_SOVERSION 99)/' "python/vigil/_ffi.py does not load libvigil-etcd.so.99"
n=$(sh "$t/scripts/version.sh" --soversion)
wrong debian/control "s/libvigil-etcd$n (>=/libvigil-etcd98 (>=/" "debian/control names libvigil-etcd98"
wrong "debian/libvigil$n.symbols" "1s/.*/libvigil.so.98 libvigil98 #MINVER#/" "debian/libvigil$n.symbols begins 'libvigil.so.98"
wrong "debian/libvigil$n.symbols" "s/@VIGIL_$n /@VIGIL_98 /" "names the symbol versions VIGIL_98"
wrong "debian/libvigil$n.symbols" "s/(symver)VIGIL_PRIVATE_$n /(symver)VIGIL_PRIVATE_98 /" "names the symbol versions VIGIL_PRIVATE_98"
mv "$t/debian/libvigil-etcd$n.install" "$t/debian/libvigil-etcd98.install"
check && fail "debian/libvigil-etcd98.install passed"
grep -qF "debian/libvigil-etcd98.install is not named for libvigil-etcd$n" "$tmp/out" || fail "a file not named for its package: $(cat "$tmp/out")"
echo "$((passed + 1)) passed, 0 failed"
