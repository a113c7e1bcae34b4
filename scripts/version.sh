#!/bin/sh
# scripts/version.sh [--check | --soversion]: vigil's version, from its one
# place: the project() line of CMakeLists.txt (the libraries' VERSION, the
# .pc files, the CMake package and `vigil --version` take it from there).
# --soversion: the libraries' ABI number, VIGIL_SOVERSION in
# CMakeLists.txt (their sonames and symbol versions take it from there).
#
# --check: every file that must state them too agrees, or each one that
# does not is named. The version: debian/changelog (the packages' version,
# native: no Debian revision), the Python package (pyproject.toml and
# __version__), the Rust crate (Cargo.toml, and its Cargo.lock) and the
# man pages' headers. The ABI number N: the Debian packages libvigilN and
# libvigil-etcdN (debian/control, their debian/ files, the symbols files'
# sonames and symbol versions) and the sonames the Python package loads.
# To release a new version, change the project() line, then each file
# --check names (`dch -v VERSION` for the changelog); to break the ABI,
# VIGIL_SOVERSION, then the same.
set -u
top=$(cd "${0%/*}/.." && pwd) || exit 1
version=$(sed -n 's/^project(vigil VERSION \([0-9][0-9.]*\)[ )].*/\1/p' "$top/CMakeLists.txt")
if [ -z "$version" ]; then
    echo "version: no 'project(vigil VERSION x.y.z' line in CMakeLists.txt" >&2
    exit 1
fi
soversion=$(sed -n 's/^set(VIGIL_SOVERSION \([0-9][0-9]*\))$/\1/p' "$top/CMakeLists.txt")
if [ -z "$soversion" ]; then
    echo "version: no 'set(VIGIL_SOVERSION n)' line in CMakeLists.txt" >&2
    exit 1
fi
case "${1:-}" in
--check) ;;
--soversion) echo "$soversion"; exit 0 ;;
*) echo "$version"; exit 0 ;;
esac

bad=0
says() { # FILE WHAT FOUND
    [ "$3" = "$version" ] && return 0
    echo "version: $1 says ${3:-nothing} ($2), CMakeLists.txt says $version" >&2
    bad=1
}
says debian/changelog "its first entry" \
    "$(sed -n '1s/^vigil (\([^)]*\)).*/\1/p' "$top/debian/changelog")"
says python/pyproject.toml "version =" \
    "$(sed -n 's/^version = "\(.*\)"$/\1/p' "$top/python/pyproject.toml")"
says python/vigil/__init__.py "__version__" \
    "$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$top/python/vigil/__init__.py")"
says rust/Cargo.toml "version =" \
    "$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$top/rust/Cargo.toml")"
says rust/Cargo.lock "the version of package vigil" \
    "$(sed -n '/^name = "vigil"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$top/rust/Cargo.lock")"
for page in "$top"/man/man*/*.[0-9]; do
    th=$(sed -n '1,5s/^\.TH .*"vigil \([0-9][^"]*\)".*/\1/p' "$page")
    # A page that is only a .so link has no header of its own.
    [ -n "$th" ] || ! grep -q '^\.TH' "$page" || th=none
    [ -z "$th" ] || says "${page#"$top"/}" ".TH" "$th"
done

# ---- the ABI number ------------------------------------------------------------
abi() { # FILE WHAT: FILE does not follow VIGIL_SOVERSION
    echo "version: $1 $2, CMakeLists.txt's VIGIL_SOVERSION is $soversion" >&2
    bad=1
}
n=$soversion
control="$top/debian/control"
packages=$(sed -n 's/^Package: *\(libvigil[^ ]*\)$/\1/p' "$control" | paste -sd ' ' -)
for lib in libvigil libvigil-etcd; do
    pkg=$lib$n
    case " $packages " in *" $pkg "*) ;; *) abi debian/control "has no package $pkg (it has: $packages)" ;; esac
    # Every name of the runtime package, in control's relations and prose
    # too: libvigilM for another M is a soname that is not built.
    others=$(grep -o "\b${lib}[0-9][0-9]*\b" "$control" | sort -u | grep -vx "$pkg" | paste -sd ' ' -)
    [ -z "$others" ] || abi debian/control "names $others"
    for f in "$top/debian/$lib"[0-9]*.*; do
        [ -e "$f" ] || continue
        case "${f##*/}" in "$pkg".*) ;; *) abi "debian/${f##*/}" "is not named for $pkg" ;; esac
    done
    grep -q "\"$lib\.so\.$n\"" "$top/python/vigil/_ffi.py" || abi python/vigil/_ffi.py "does not load $lib.so.$n"
    symbols="$top/debian/$pkg.symbols"
    [ -f "$symbols" ] || { abi "debian/$pkg.symbols" "is missing"; continue; }
    header=$(sed -n 1p "$symbols")
    [ "$header" = "$lib.so.$n $pkg #MINVER#" ] || abi "debian/$pkg.symbols" "begins '$header', not '$lib.so.$n $pkg #MINVER#'"
    case $lib in libvigil) node=VIGIL ;; *) node=VIGIL_ETCD ;; esac
    wrong=$(grep -o '@[A-Z_]*[0-9]*\|(symver)[A-Z_]*[0-9]*' "$symbols" | sed 's/^@//; s/^(symver)//' |
        sort -u | grep -vx "${node}_$n\|VIGIL_PRIVATE_$n" | paste -sd ' ' -)
    [ -z "$wrong" ] || abi "debian/$pkg.symbols" "names the symbol versions $wrong (${node}_$n expected)"
done
[ "$bad" = 0 ] && echo "version: $version everywhere; ABI $soversion (libvigil$n, libvigil-etcd$n)"
exit "$bad"
