#!/bin/sh
# scripts/version.sh [--check]: vigil's version, from its one place: the
# project() line of CMakeLists.txt (the libraries' VERSION, the .pc files,
# the CMake package and `vigil --version` take it from there).
#
# --check: every file that must state it too agrees, or each one that does
# not is named: debian/changelog (the packages' version, native: no Debian
# revision), the Python package (pyproject.toml and __version__), the Rust
# crate (Cargo.toml) and the man pages' headers. To release a new version,
# change the project() line, then each file --check names
# (`dch -v VERSION` for the changelog).
set -u
top=$(cd "${0%/*}/.." && pwd) || exit 1
version=$(sed -n 's/^project(vigil VERSION \([0-9][0-9.]*\)[ )].*/\1/p' "$top/CMakeLists.txt")
if [ -z "$version" ]; then
    echo "version: no 'project(vigil VERSION x.y.z' line in CMakeLists.txt" >&2
    exit 1
fi
[ "${1:-}" = --check ] || { echo "$version"; exit 0; }

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
for page in "$top"/man/man*/*.[0-9]; do
    th=$(sed -n '1,5s/^\.TH .*"vigil \([0-9][^"]*\)".*/\1/p' "$page")
    # A page that is only a .so link has no header of its own.
    [ -n "$th" ] || ! grep -q '^\.TH' "$page" || th=none
    [ -z "$th" ] || says "${page#"$top"/}" ".TH" "$th"
done
[ "$bad" = 0 ] && echo "version: $version everywhere"
exit "$bad"
